//! API keys and tokens never appear in logs, events, stored rows, errors or responses.
//!
//! The real binary runs with recognisable fake keys (a route's `api_key`, a route's
//! `api_key_env`, `OPENROUTER_API_KEY`) pointing at a fake provider that refuses every call
//! with 401 or 500 and echoes nothing, and with logging at `trace`. Runs of several modes fail
//! against it; then every event, every REST answer, the database files and the captured log
//! are searched for the keys and the caller's own API token.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const ROUTE_KEY: &str = "sk-test-SECRET-123";
const ENV_KEY: &str = "sk-test-SECRET-env-456";
const OPENROUTER_KEY: &str = "sk-or-test-SECRET-789";
/// Sent to a provider that, unlike a careful one, repeats the key it was given in its error.
const ECHOED_KEY: &str = "sk-test-SECRET-echo-000";

/// The fake provider: records the `Authorization` header it was sent and refuses the call with
/// the status in its path, saying nothing about the key (`/echo/` answers 401 and repeats the
/// key it was sent, as a careless provider might).
async fn refuse(req: HttpRequest, seen: web::Data<Mutex<Vec<String>>>) -> HttpResponse {
    let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
    seen.lock().unwrap().push(auth.to_string());
    let path = req.match_info().get("status").unwrap_or("500");
    if path == "echo" {
        // The key, then the key again upper-cased and shortened (as some providers show it).
        let key = auth.trim_start_matches("Bearer ");
        let shown = format!("{} / {}…", key.to_uppercase(), &key[..key.len() - 4]);
        let message = format!("Incorrect API key provided: {key}; you sent {shown}");
        return HttpResponse::Unauthorized().json(json!({ "error": { "message": message } }));
    }
    let status = path.parse().unwrap_or(500);
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap())
        .json(json!({ "error": { "message": "upstream refused the request" } }))
}

fn conclave() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_conclave"));
    c.env_remove("CONCLAVE_CONFIG")
        .env_remove("OPENROUTER_API_KEY")
        .env("CONCLAVE_SIM_LATENCY_MS", "10");
    c
}

#[actix_web::test]
async fn api_keys_and_tokens_appear_in_no_log_event_row_or_response() {
    conclave::providers::openai::install_crypto();
    let seen = web::Data::new(Mutex::new(Vec::<String>::new()));
    let data = seen.clone();
    let fake = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/{status}/v1/chat/completions", web::post().to(refuse))
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = fake.addrs()[0].port();
    let fake = fake.run();
    let fake_handle = fake.handle();
    actix_web::rt::spawn(fake);

    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("secrets.db");
    let db = format!("sqlite://{}", db_path.display());
    std::fs::write(
        dir.path().join("conclave.toml"),
        format!(
            "retry_max_attempts = 2\nretry_base_delay_ms = 10\nshutdown_grace_ms = 0\n\
             [[routes]]\nprefix = \"leaky401/\"\nbase_url = \"http://127.0.0.1:{port}/401/v1\"\n\
             api_key = \"{ROUTE_KEY}\"\n\
             [[routes]]\nprefix = \"leaky500/\"\nbase_url = \"http://127.0.0.1:{port}/500/v1\"\n\
             api_key_env = \"CONCLAVE_TEST_ROUTE_KEY\"\n\
             [[routes]]\nprefix = \"echo/\"\nbase_url = \"http://127.0.0.1:{port}/echo/v1\"\n\
             api_key = \"{ECHOED_KEY}\"\n"
        ),
    )
    .unwrap();
    let out = conclave().args(["user", "add", "ops", "--admin"]).env("DATABASE_URL", &db).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let log_path = dir.path().join("server.log");
    let mut server = conclave()
        .current_dir(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", &db)
        .env("OPENROUTER_API_KEY", OPENROUTER_KEY)
        .env("OPENROUTER_BASE_URL", format!("http://127.0.0.1:{port}/500/v1"))
        .env("CONCLAVE_TEST_ROUTE_KEY", ENV_KEY)
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let first_line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    let base =
        first_line.split_whitespace().find(|w| w.starts_with("http://")).expect("URL").to_string();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let http = reqwest::Client::builder().default_headers(headers).build().unwrap();
    let get = |path: String| {
        let req = http.get(format!("{base}{path}"));
        async move { req.send().await.unwrap().text().await.unwrap() }
    };

    // Everything the server says goes in here, then gets searched.
    let mut said: Vec<String> = Vec::new();
    let requests = [
        // Stage 1 half fails (401 and 500), rankings fail, the chairman fails.
        json!({ "question": "Secrets?", "councilModels": ["sim/alpha", "sim/beta", "leaky401/a", "leaky500/b"],
                "chairmanModel": "leaky500/c" }),
        // No models named: with a key, the seed's defaults, all sent to the fake OpenRouter.
        json!({ "question": "Defaults with a key?" }),
        json!({ "mode": "jury", "question": "Judge", "modeConfig": { "content": "c",
                "jurorModels": ["leaky401/a", "leaky500/b", "echo/c"], "foremanModel": "leaky401/f" } }),
        json!({ "mode": "clarity", "modeConfig": { "content": "a brief",
                "models": { "skeptic": "leaky401/s", "advocate": "leaky500/a", "generalist": "sim/g", "arbiter": "leaky401/z" } } }),
    ];
    let mut runs = Vec::new();
    for body in &requests {
        let resp = http.post(format!("{base}/api/deliberations")).json(body).send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert_eq!(status, 202, "{text}");
        said.push(text.clone());
        let v: Value = serde_json::from_str(&text).unwrap();
        runs.push(v["runId"].as_str().unwrap().to_string());
    }
    // Every event of every run, over the WebSocket.
    let mut req = format!("{}/ws", base.replace("http://", "ws://")).into_client_request().unwrap();
    req.headers_mut().insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    for run in &runs {
        use futures_util::SinkExt;
        ws.send(Message::text(json!({ "type": "watch", "run": run }).to_string())).await.unwrap();
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .expect("events within 30 s")
                .unwrap()
                .unwrap();
            if let Message::Text(t) = msg {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                said.push(t.to_string());
                if v["run"] == run.as_str()
                    && matches!(v["event"].as_str(), Some("complete" | "error" | "cancelled"))
                {
                    break;
                }
            }
        }
    }
    let events = said.join("\n");
    assert!(events.contains("call_complete") && events.contains("\"status\":401"), "{events}");
    assert!(events.contains("call_retry"), "500s were retried");
    assert!(
        events
            .contains("Incorrect API key provided: [redacted]; you sent [redacted] / [redacted]…"),
        "{events}"
    );
    for run in &runs {
        said.push(get(format!("/api/deliberations/{run}")).await);
        said.push(get(format!("/api/deliberations/{run}/events")).await);
    }
    for path in
        ["/api/deliberations", "/api/models", "/api/conversations", "/api/reviews", "/healthz"]
    {
        said.push(get(path.to_string()).await);
    }
    // Errors: a model no route serves, and one that a route serves but with a bad body.
    for body in [
        json!({ "question": "q", "councilModels": ["nokey-route/x", "leaky401/a"] }),
        json!({ "question": "q", "councilModelz": ["leaky401/a"] }),
    ] {
        let resp = http.post(format!("{base}/api/deliberations")).json(&body).send().await.unwrap();
        said.push(resp.text().await.unwrap());
    }
    let _ = ws.close(None).await;

    // The keys were really used: the fake provider saw each of them.
    let auth = seen.lock().unwrap().clone();
    for key in [ROUTE_KEY, ENV_KEY, OPENROUTER_KEY, ECHOED_KEY] {
        assert!(auth.iter().any(|a| a == &format!("Bearer {key}")), "{key} was not sent: {auth:?}");
    }

    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    let status = tokio::task::spawn_blocking(move || server.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    fake_handle.stop(false).await;

    let log = String::from_utf8_lossy(&std::fs::read(&log_path).unwrap()).into_owned();
    assert!(log.contains("TRACE") || log.contains("DEBUG"), "the log was captured at trace level");
    let mut stored = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let bytes = std::fs::read(format!("{}{suffix}", db_path.display())).unwrap_or_default();
        stored.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    let stored = stored.join("\n");
    assert!(stored.contains("leaky401/a"), "the runs were stored");
    let places =
        [("the log", &log), ("what the server said", &said.join("\n")), ("the database", &stored)];
    // The keys (and anything that looks like a part of them), and the random part of the
    // caller's token.
    let secrets = [ROUTE_KEY, ENV_KEY, OPENROUTER_KEY, ECHOED_KEY, "SECRET", &token[4..]];
    for (place, text) in places {
        for secret in secrets {
            if let Some(at) = text.find(secret) {
                let from = text[..at].char_indices().rev().nth(200).map_or(0, |(i, _)| i);
                let context: String = text[from..].chars().take(400).collect();
                panic!("{secret:?} appears in {place}: …{context}…");
            }
        }
    }
}

/// Starts the real binary on a fresh database (so it prints a one-time sign-in link), logging
/// at `trace` into `server.log` in `dir`; answers the process, its URL and the link's path.
async fn serve_fresh(dir: &std::path::Path) -> (std::process::Child, String, String) {
    let db = format!("sqlite://{}", dir.join("fresh.db").display());
    let mut server = conclave()
        .current_dir(dir)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", &db)
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let (base, link) = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines().map(Result::unwrap);
        let first = lines.next().unwrap();
        let base = first.split_whitespace().find(|w| w.starts_with("http://")).unwrap();
        let link = lines.find(|l| l.contains("/login?token=")).expect("a sign-in link");
        let path = &link[link.find("/login?").unwrap()..];
        (base.to_string(), path.trim().to_string())
    })
    .await
    .unwrap();
    (server, base, link)
}

/// Stops the server with SIGTERM and answers its log.
async fn stop_and_read_log(mut server: std::process::Child, dir: &std::path::Path) -> String {
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    let status = tokio::task::spawn_blocking(move || server.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    String::from_utf8_lossy(&std::fs::read(dir.join("server.log")).unwrap()).into_owned()
}

#[actix_web::test]
async fn a_token_in_a_query_string_never_reaches_the_access_log() {
    conclave::providers::openai::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let (server, base, link) = serve_fresh(dir.path()).await;
    let token = link.split("token=").nth(1).unwrap().to_string();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build();
    let http = http.unwrap();
    // The link works: it signs the admin in (a session cookie and a redirect to the page).
    let resp = http.get(format!("{base}{link}")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 303);
    let cookie = resp.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(cookie.starts_with("conclave_session="), "{cookie}");
    // A token (this one is used up by now) in the query of other requests.
    for path in [format!("/api/me?token={token}"), format!("/?x=1&token={token}")] {
        http.get(format!("{base}{path}")).send().await.unwrap();
    }
    let log = stop_and_read_log(server, dir.path()).await;
    // The requests were logged, without their query strings.
    assert!(log.contains("GET /login HTTP/1.1 303"), "{log}");
    assert!(log.contains("GET /api/me HTTP/1.1 401"), "{log}");
    assert!(!log.contains(&token[4..]), "the token is in the log:\n{log}");
    assert!(!log.contains("?x=1"), "a query string is in the log:\n{log}");
}

/// Runs `conclave ARGS` with `DATABASE_URL`, `REDIS_URL` and `envs` until it exits (or, for
/// `serve`, until it has printed its first line, and with Redis logged a line holding `until`
/// or eight about Redis, and been stopped); answers what it printed and logged.
pub(crate) fn printed(
    args: &[&str],
    database: &str,
    redis: Option<&str>,
    envs: &[(&str, &str)],
    until: &str,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut c = conclave();
    c.current_dir(dir.path()).args(args).env("DATABASE_URL", database).env("RUST_LOG", "info");
    c.envs(envs.iter().copied());
    match redis {
        Some(url) => c.env("REDIS_URL", url),
        None => c.env_remove("REDIS_URL"),
    };
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    if first.starts_with("Conclave listening") {
        // The Redis connection is tried at once; its first failure is logged before the
        // server stops on SIGTERM (it logs "shutting down" after it).
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut said = Vec::new();
        let mut about_redis = 0;
        for line in stderr.lines().map(Result::unwrap) {
            about_redis += usize::from(line.contains("Redis at"));
            let seen = redis.is_none() || line.contains(until) || about_redis >= 8;
            said.push(line);
            if seen {
                break;
            }
        }
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        child.wait().unwrap();
        return format!("{first}{}", said.join("\n"));
    }
    let out = child.wait_with_output().unwrap();
    let rest = String::from_utf8_lossy(&out.stdout);
    format!("{first}{rest}{}", String::from_utf8_lossy(&out.stderr))
}

#[test]
fn database_and_redis_passwords_are_printed_nowhere() {
    const PASSWORD: &str = "S3cret-db-Pw";
    // A server nobody listens on: the failed connection's error names the URL, redacted.
    let unreachable = format!("postgres://conclave:{PASSWORD}@127.0.0.1:1/conclave");
    for args in [&["serve", "--bind", "127.0.0.1:0"][..], &["migrate"], &["user", "list"]] {
        let said = printed(args, &unreachable, None, &[], "");
        assert!(said.contains("postgres://conclave:[redacted]@127.0.0.1:1/conclave"), "{said}");
        assert!(!said.contains(PASSWORD), "{args:?}: {said}");
    }
    let query = format!("postgres://conclave@127.0.0.1:1/conclave?password={PASSWORD}");
    let said = printed(&["migrate"], &query, None, &[], "");
    assert!(said.contains("?password=[redacted]") && !said.contains(PASSWORD), "{said}");
    // Redis: the log of a server that cannot reach it.
    let redis = format!("redis://:{PASSWORD}@127.0.0.1:1/0");
    let said = printed(
        &["serve", "--bind", "127.0.0.1:0"],
        "sqlite://x.db",
        Some(&redis),
        &[],
        "Redis at",
    );
    assert!(said.contains("Redis at redis://:[redacted]@127.0.0.1:1/0"), "{said}");
    assert!(!said.contains(PASSWORD), "{said}");
    // A server that answers (trust authentication takes any password): the start line and
    // `migrate` print the URL without it.
    let Some(db) = crate::postgres::fresh_database() else { return };
    let with_password =
        db.replacen("postgres://postgres@", &format!("postgres://postgres:{PASSWORD}@"), 1);
    assert_ne!(with_password, db, "{db}");
    for args in [&["migrate"][..], &["serve", "--bind", "127.0.0.1:0"]] {
        let said = printed(args, &with_password, None, &[], "");
        assert!(said.contains("postgres://postgres:[redacted]@"), "{said}");
        assert!(!said.contains(PASSWORD), "{said}");
    }
    crate::postgres::drop_database(&db);
}

/// A configuration file that does not parse is refused with its line quoted, but no secret in
/// it: not a route's key (in its place, or under a misspelt name), nor a URL's password.
#[test]
fn a_configuration_error_quotes_no_key_or_password() {
    const KEY: &str = "sk-test-SECRET-cfg-4711";
    const PASSWORD: &str = "S3cret-cfg-Pw";
    let dir = tempfile::tempdir().unwrap();
    let route = "[[routes]]\nprefix = \"x/\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    let files = [
        format!("{route}api_key = \"{KEY}\" oops\n"),
        format!("{route}api_key = {KEY}\n"),
        format!("{route}api_kye = \"{KEY}\"\n"),
        format!("database_url = \"postgres://app:{PASSWORD}@db/x\" oops\n"),
        format!("bind = \"127.0.0.1:0\"\n[sim]\nlatency_ms = \"{KEY}\"\n"),
    ];
    for (i, text) in files.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = conclave()
            .args(["serve", "--bind", "127.0.0.1:0", "--config", path.to_str().unwrap()])
            .env("DATABASE_URL", "sqlite://:memory:")
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{text}: {said}");
        assert!(said.contains("is not valid") && said.contains("line"), "{text}: {said}");
        for secret in ["SECRET", PASSWORD] {
            assert!(!said.contains(secret), "{text}: {said}");
        }
    }
}

/// Whatever shape a token takes in a request's path (an encoded query, a matrix parameter, an
/// id), the log (at `trace`, actix's own lines included) has it cut to its prefix.
#[actix_web::test]
async fn a_token_in_a_path_reaches_no_log_line() {
    conclave::providers::openai::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let (server, base, _) = serve_fresh(dir.path()).await;
    // A working API token: what a path must never give away.
    let db = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let token = crate::cli::add_user(&db, "ops", true);
    let share = format!("shr_{}", &token[4..]);
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build();
    let http = http.unwrap();
    let paths = [
        format!("/nonexist%3Ftoken={token}"),
        format!("/login;token={token}"),
        format!("/api/deliberations/{token}"),
        format!("/api/deliberations/{token}/events"),
        format!("/api/deliberations/{token}/stream"),
        format!("/api/conversations/{token}"),
        format!("/s/{share}"),
        format!("/x/cnv%5F{}", &token[4..]),
    ];
    for path in &paths {
        http.get(format!("{base}{path}")).send().await.unwrap();
    }
    // Signed in, so the ids are looked up (and refused as not found).
    let signed_in = crate::helpers::client_with(&token);
    for path in &paths[2..6] {
        signed_in.get(format!("{base}{path}")).send().await.unwrap();
    }
    let log = stop_and_read_log(server, dir.path()).await;
    assert!(log.contains("GET /api/deliberations/cnv_[redacted] HTTP/1.1 404"), "{log}");
    assert!(log.contains("GET /login;token=cnv_[redacted] HTTP/1.1"), "{log}");
    // actix's debug line of the error it answered.
    assert!(log.contains("NotFound(\"run cnv_[redacted] not found\")"), "{log}");
    assert!(!log.contains(&token[4..]), "the token is in the log:\n{log}");
    assert!(!log.contains(&token[4..20]), "a piece of the token is in the log:\n{log}");
}

/// libpq misreads a URL whose password holds `@` and quotes what it took for the host: no
/// piece of the password is printed.
#[test]
fn a_malformed_database_url_prints_no_piece_of_its_password() {
    for url in [
        "postgres://postgres:Pw@@888@127.0.0.1:1/test",
        "postgres://postgres:Pw9@x@y:z777@127.0.0.1/test",
    ] {
        let password = url["postgres://postgres:".len()..url.rfind('@').unwrap()].to_string();
        for args in [&["migrate"][..], &["serve", "--bind", "127.0.0.1:0"]] {
            let said = printed(args, url, None, &[], "");
            assert!(said.contains("conclave: "), "{args:?}: {said}");
            for piece in password.split(['@', ':']).filter(|p| p.len() >= 3) {
                assert!(!said.contains(piece), "{url} {args:?}: {piece:?} in {said}");
            }
        }
    }
}
