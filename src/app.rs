//! Wiring: configuration in, a running server (or an in-process engine for the CLI) out.
//!
//! Tests call [`Application::build`] with a config bound to `127.0.0.1:0` and read
//! [`Application::port`]; `main` does the same with the real address.

use std::net::TcpListener;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{middleware, web, App, HttpServer};

use crate::config::Config;
use crate::engine::bus::BusSettings;
use crate::engine::{Engine, EngineSettings};
use crate::providers::openai::install_crypto;
use crate::secrets::redact_url_in;
use crate::store::{Store, StoreError};
use crate::web::{routes, AppState};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("REDIS_URL / redis_url is not a Redis URL: {0}")]
    Redis(String),
}

/// Who is starting the engine: the server owns the database's runs and cleans up after a
/// process that died; the CLI shares the database with a server that may be running, so it
/// must leave other runs alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Cli,
}

/// Opens the store, starts the engine's actors and (as the server) resumes the runs a dead
/// process left behind whose lease has run out (the rest are taken over as their leases run
/// out). With `redis_url` it joins the other instances on that Redis, the CLI too: the servers'
/// watchers follow a CLI run live, list it, and can cancel it. Must run inside an actix System.
pub async fn start_engine(config: &Config, role: Role) -> Result<Engine, AppError> {
    install_crypto();
    let bus = match &config.redis_url {
        Some(url) => {
            // Checked here so a bad URL stops the start instead of retrying forever.
            redis::Client::open(url.as_str())
                .map_err(|e| AppError::Redis(redact_url_in(&e.to_string(), url)))?;
            Some(BusSettings { url: url.clone(), prefix: config.redis_prefix.clone() })
        }
        None => None,
    };
    let store = Store::start(&config.database_url)?;
    let settings = EngineSettings {
        defaults: config.mode_defaults(),
        token_flush: config.token_flush,
        retention: config.retention,
        finish_grace: config.finish_grace,
        retry: config.retry,
        user_limits: config.user_limits,
        clock: config.clock.clone(),
        lease: config.lease,
        recover: role == Role::Server,
        bus,
        attachments: config.attachments,
    };
    let engine = Engine::launch(store, config.providers(), settings);
    if role == Role::Server {
        match engine.recover().await {
            Ok(0) => {}
            Ok(n) => log::warn!("{n} run(s) left running by a previous process were resumed"),
            Err(e) => log::error!("could not look for runs to resume: {e}"),
        }
    }
    Ok(engine)
}

/// A bound, not yet running, HTTP server with its engine.
pub struct Application {
    addr: std::net::SocketAddr,
    port: u16,
    server: Server,
    engine: Engine,
}

impl Application {
    pub async fn build(config: Config) -> Result<Self, AppError> {
        let listener = TcpListener::bind(&config.bind)
            .map_err(|source| AppError::Bind { addr: config.bind.clone(), source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| AppError::Bind { addr: config.bind.clone(), source })?;
        let port = addr.port();
        let engine = start_engine(&config, Role::Server).await?;
        let state = web::Data::new(AppState {
            engine: engine.clone(),
            heartbeat_interval: config.heartbeat_interval,
            client_timeout: config.client_timeout,
            sign_in_timeout: config.sign_in_timeout,
            clock: config.clock.clone(),
            unauthenticated: crate::web::limits::Unauthenticated::new(
                config.max_unauthenticated_per_address,
            ),
            evals: Default::default(),
        });
        let server = HttpServer::new(move || {
            App::new()
                // No response is sniffed into a type it does not declare (an export's model
                // text read as HTML).
                .wrap(middleware::DefaultHeaders::new().add(("X-Content-Type-Options", "nosniff")))
                .wrap(access_log())
                .wrap(middleware::Compress::default())
                .app_data(state.clone())
                .configure(routes)
        })
        .shutdown_timeout(5)
        // Events leave as they happen: a small write must not wait for the client's ACK of
        // the previous one (Nagle's algorithm, on unless asked; a delayed ACK is 40 ms).
        .tcp_nodelay(true)
        .disable_signals()
        .listen(listener)
        .map_err(|source| AppError::Bind { addr: config.bind.clone(), source })?
        .run();
        Ok(Application { addr, port, server, engine })
    }

    /// The address the server listens on (with the real port when bound to port 0).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Runs until the server is stopped (through its handle, or Ctrl-C in `main`).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// The access log: method, path and protocol, status, time. Never the query string (`%r`,
/// `%q` and `%U` would print it): `/login?token=…` carries a working token, and no query
/// parameter is worth the risk of one that does. A share link's path (`/s/{token}`) is a
/// working token too: it is logged as `/s/[redacted]`.
fn access_log() -> middleware::Logger {
    middleware::Logger::new("%{request}xi %s %Dms").custom_request_replace("request", |req| {
        format!("{} {} {:?}", req.method(), logged_path(req.path()), req.version())
    })
}

/// A request's path as the access log writes it: a share token replaced.
fn logged_path(path: &str) -> std::borrow::Cow<'_, str> {
    match path.strip_prefix("/s/") {
        Some(rest) => {
            let after = rest.find('/').map_or("", |i| &rest[i..]);
            format!("/s/[redacted]{after}").into()
        }
        None => path.into(),
    }
}

/// How long `main` waits for in-flight requests on Ctrl-C.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    #[test]
    fn share_tokens_stay_out_of_the_access_log() {
        assert_eq!(super::logged_path("/s/shr_0123/json"), "/s/[redacted]/json");
        assert_eq!(super::logged_path("/s/shr_0123"), "/s/[redacted]");
        assert_eq!(super::logged_path("/api/me"), "/api/me");
    }
}
