//! `conclave`: the server (default), the terminal client, the sim model server, migrations.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use conclave::app::{Application, SHUTDOWN_GRACE};
use conclave::cli;
use conclave::config::{Config, Overrides};
use conclave::providers::sim::SimProvider;
use conclave::providers::sim_server;
use conclave::secrets::redact_url;

/// jemalloc rather than the system's allocator: under load the server allocates and frees many
/// small buffers per streamed chunk and event from several threads, and glibc's malloc spent a
/// fifth of its CPU on them (`conclave bench`, scenario 2: 10.4 -> 8.4 ms of CPU per run).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "conclave", version, about = "A panel of LLMs deliberates on your question")]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Args, Clone)]
struct Common {
    /// Configuration file (TOML). Default: ./conclave.toml when it exists.
    #[arg(long, global = true, env = "CONCLAVE_CONFIG")]
    config: Option<PathBuf>,
    /// Database: sqlite://PATH (default sqlite://conclave.db) or postgres://...
    #[arg(long, global = true, env = "DATABASE_URL")]
    database_url: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default command).
    Serve {
        /// Address to listen on (default 127.0.0.1:8080).
        #[arg(long, env = "CONCLAVE_BIND")]
        bind: Option<String>,
    },
    /// Run one deliberation in this process, with live progress, and print its result
    /// (`conclave run MODE --help` lists a mode's flags).
    Run(conclave::run_flags::RunCommand),
    /// Is the panel worth it? Run a graded question set through single models, their
    /// majority and modes, and print accuracy with intervals, cost and latency per arm.
    Eval(conclave::cli::eval::EvalArgs),
    /// Serve the sim models over the OpenAI-compatible HTTP API.
    SimServer {
        #[arg(long, env = "CONCLAVE_SIM_BIND", default_value = "127.0.0.1:9090")]
        bind: String,
    },
    /// Apply database migrations and exit (the server also does this at start).
    Migrate,
    /// Export a run or a conversation (by id) from the database as Markdown or JSON.
    Export {
        /// A run's id, or a conversation's (all its runs, in order).
        id: String,
        /// md (Markdown, for people) or json (everything stored, to read back).
        #[arg(long, default_value = "md", value_parser = ["md", "json"])]
        format: String,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// With --format json: add the run's stored events.
        #[arg(long)]
        events: bool,
    },
    /// Manage accounts: add (prints a new API token), list, revoke.
    User {
        #[command(subcommand)]
        action: UserAction,
    },
    /// Print benchmark figures: the five scenarios (docs/benchmarks.md) against a real server
    /// and sim-server started as child processes, or `clarity`.
    Bench {
        /// Scenarios, by number or name: 1 overhead, 2 concurrent, 3 throughput, 4 watchers,
        /// 5 modes (default: all five). `clarity` alone runs Clarity panels in-process instead;
        /// `eval` alone runs an eval of 1,000 questions × 4 arms in-process (100 with --quick).
        scenarios: Vec<String>,
        /// Reduced sizes (5 sequential runs, 50 concurrent, 500 watchers...) for a smoke test.
        #[arg(long)]
        quick: bool,
        /// clarity: panels to run.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// clarity: latency of every sim call, in milliseconds (a fast model's typical answer
        /// time).
        #[arg(long, default_value_t = 2500)]
        latency_ms: u64,
        /// Ask the sim models for every machine-read reply as JSON (`structured_output =
        /// "json_schema"` on the server's sim route, the schema in the ideal's calls too).
        #[arg(long)]
        structured: bool,
    },
}

#[derive(Subcommand)]
enum UserAction {
    /// Add a user and print its API token (shown once; only its hash is stored).
    Add {
        name: String,
        /// May see and cancel every run.
        #[arg(long)]
        admin: bool,
    },
    /// List users.
    List,
    /// Revoke a user: every token of theirs stops working at once.
    Revoke { name: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The terminal client draws its own progress; logs would interleave with it.
    let level = match cli.command {
        Some(
            Command::Run(_) | Command::Eval(_) | Command::User { .. } | Command::Export { .. },
        ) => "error",
        // The benchmark's progress is its own log; the server and sim it drives log apart.
        Some(Command::Bench { .. }) => "error,conclave::bench=info",
        _ => "info",
    };
    conclave::logging::init(level);
    let bind = match &cli.command {
        Some(Command::Serve { bind }) => bind.clone(),
        _ => std::env::var("CONCLAVE_BIND").ok(),
    };
    let overrides = Overrides {
        config_path: cli.common.config.clone(),
        bind,
        database_url: cli.common.database_url.clone(),
    };
    let config = match Config::load(&overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("conclave: {e}");
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve { bind: None });
    // The benchmark drives child processes from a runtime of its own.
    if let Command::Bench { scenarios, quick, runs, latency_ms, structured } = command {
        let args = conclave::bench::BenchArgs { scenarios, quick, runs, latency_ms, structured };
        return ExitCode::from(conclave::cli::bench_command(config, args) as u8);
    }
    let system = actix_web::rt::System::new();
    let code = system.block_on(async move {
        match command {
            Command::Serve { .. } => serve(config).await,
            Command::Run(conclave::run_flags::RunCommand(args)) => {
                match cli::run(config, args).await {
                    Ok(code) => code,
                    Err(e) => {
                        eprintln!("conclave: {e}");
                        2
                    }
                }
            }
            Command::Eval(args) => conclave::cli::eval::eval_command(config, args).await,
            Command::SimServer { bind } => sim(config, &bind).await,
            Command::Export { id, format, output, events } => {
                cli::export_command(config, &id, &format, output.as_deref(), events).await
            }
            Command::Bench { .. } => unreachable!("handled before the System starts"),
            Command::User { action } => user_command(&config.database_url, action).await,
            Command::Migrate => match conclave::store::db::connect(&config.database_url, 1) {
                Ok(_) => {
                    println!("migrations applied to {}", redact_url(&config.database_url));
                    0
                }
                Err(e) => {
                    eprintln!("conclave: {e}");
                    1
                }
            },
        }
    });
    // Let the System wind down before it is dropped: an actor the command started but never
    // got to poll (the engine's Hub, when a run is refused before its first await) starts and
    // stops inside the runtime. Dropped un-started with the runtime, its `started` would set a
    // timer with no reactor and panic after the command's own error.
    actix_web::rt::System::current().stop_with_code(code);
    let _ = system.run_with_code();
    ExitCode::from(code as u8)
}

async fn serve(config: Config) -> i32 {
    let models = if config.offline() {
        "sim models (no OPENROUTER_API_KEY)"
    } else {
        "OpenRouter + sim models"
    };
    let database = redact_url(&config.database_url);
    let config_grace = config.shutdown_grace;
    let app = match Application::build(config).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    println!("Conclave listening on http://{} — database {database}, {models}", app.addr());
    match conclave::web::auth::bootstrap_admin(app.engine().store()).await {
        Ok(Some(path)) => println!(
            "No accounts yet: created the admin. Sign in (this link works once, for 24 hours):\n    \
             http://{}{path}",
            app.addr()
        ),
        Ok(None) => {}
        Err(e) => log::error!("could not create the first admin: {e}"),
    }
    let handle = app.handle();
    let engine = app.engine().clone();
    let grace = config_grace;
    actix_web::rt::spawn(async move {
        shutdown_signal().await;
        // New runs are refused at once; running ones get `grace` to finish, the rest end
        // `interrupted` with their completed stages kept, and every write is flushed before
        // the HTTP server stops.
        log::warn!(
            "shutting down: letting running deliberations finish (up to {} s)",
            grace.as_secs()
        );
        match engine.drain(grace).await {
            Ok(0) => log::info!("all runs finished"),
            Ok(n) => log::warn!("{n} run(s) interrupted by the shutdown"),
            Err(e) => log::error!("shutdown: {e}"),
        }
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, handle.stop(true)).await;
    });
    match app.run_until_stopped().await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("conclave: {e}");
            1
        }
    }
}

/// `conclave user add|list|revoke`, straight on the database (no server needed).
async fn user_command(database_url: &str, action: UserAction) -> i32 {
    use conclave::store::{Store, StoreError, TokenKind};
    use conclave::web::auth::{hash_token, new_token};
    let store = match Store::start(database_url) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    match action {
        UserAction::Add { name, admin } => {
            let name = name.trim().to_string();
            let valid = !name.is_empty()
                && name.len() <= 64
                && name.chars().all(|c| c.is_alphanumeric() || "._-@".contains(c));
            if !valid {
                eprintln!("conclave: a user name is 1 to 64 letters, digits, '.', '_', '-' or '@'");
                return 2;
            }
            let token = new_token();
            match store.create_user(&name, admin, hash_token(&token), TokenKind::Api, None).await {
                Ok(user) => {
                    eprintln!(
                        "added {}{}; its API token (shown only now):",
                        user.name,
                        if user.is_admin { " (admin)" } else { "" }
                    );
                    println!("{token}");
                    0
                }
                Err(StoreError::Conflict(m)) => {
                    eprintln!("conclave: {m}");
                    2
                }
                Err(e) => {
                    eprintln!("conclave: {e}");
                    1
                }
            }
        }
        UserAction::List => match store.list_users().await {
            Ok(users) => {
                for u in users {
                    let role = if u.is_admin { "admin" } else { "user" };
                    let state = if u.revoked_at.is_some() { "revoked" } else { "active" };
                    println!("{}\t{role}\t{state}", u.name);
                }
                0
            }
            Err(e) => {
                eprintln!("conclave: {e}");
                1
            }
        },
        UserAction::Revoke { name } => match store.revoke_user(&name).await {
            Ok(true) => {
                eprintln!("revoked {name}: its tokens and sessions no longer work");
                0
            }
            Ok(false) => {
                eprintln!("conclave: no active user named {name:?}");
                2
            }
            Err(e) => {
                eprintln!("conclave: {e}");
                1
            }
        },
    }
}

/// SIGTERM (how service managers stop a server) or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

async fn sim(config: Config, bind: &str) -> i32 {
    let listener = match std::net::TcpListener::bind(bind) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("conclave: cannot listen on {bind}: {e}");
            return 1;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    // Its oracles judge as they do in-process (they know no question: none is registered here).
    conclave::eval::oracle::install();
    let (server, _stats) = match sim_server::build(listener, SimProvider::new(config.sim.clone())) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("conclave: {e}");
            return 1;
        }
    };
    println!("sim models served at http://127.0.0.1:{port}/v1 (OpenAI-compatible)");
    match server.await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("conclave: {e}");
            1
        }
    }
}
