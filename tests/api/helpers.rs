//! `spawn_app` and the clients the tests drive it with.

use std::collections::HashMap;
use std::time::Duration;

use conclave::app::Application;
use conclave::config::{Config, RouteConfig};
use conclave::providers::sim::{SimConfig, SimModelConfig, SimProvider};
use conclave::providers::sim_server::{self, SimStats};
use conclave::providers::StructuredOutput;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message as WsMessage;

pub struct TestApp {
    pub base: String,
    pub ws_url: String,
    /// Sends the admin `tester`'s token with every request.
    pub http: reqwest::Client,
    /// `tester`'s API token.
    pub token: String,
    pub handle: actix_web::dev::ServerHandle,
    /// Present when the sim models are reached over HTTP through a sim-server.
    pub sim_stats: Option<SimStats>,
    pub database_url: String,
    /// The app's engine, for tests that start runs in process.
    pub engine: conclave::engine::Engine,
    /// A PostgreSQL database made for this app alone (`CONCLAVE_TEST_DATABASE=postgres`),
    /// dropped with it.
    own_pg: Option<String>,
    _dir: tempfile::TempDir,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(url) = self.own_pg.take() {
            crate::postgres::drop_database(&url);
        }
    }
}

/// How a test app is set up.
pub struct Options {
    pub sim_latency_ms: u64,
    pub stage_timeout_ms: u64,
    /// Route `sim/` through a sim-server over HTTP instead of in-process.
    pub sim_over_http: bool,
    /// Use this database URL instead of a temporary SQLite file.
    pub database_url: Option<String>,
    /// Backup models for the single-model roles (the configuration's `[fallback]`).
    pub fallback: conclave::modes::Fallbacks,
    /// Per-model sim settings (`[sim.models."sim/x"]`).
    pub sim_models: HashMap<String, SimModelConfig>,
    /// Cap on concurrent calls to the sim (its route when over HTTP).
    pub max_concurrent_calls: Option<usize>,
    /// Per-user limits on starting runs.
    pub user_limits: conclave::engine::limits::UserLimits,
    /// Always a temporary SQLite file, even when `CONCLAVE_TEST_DATABASE=postgres` (for tests
    /// whose mechanics are SQLite's own, such as triggers that fail writes).
    pub sqlite_only: bool,
    /// More routes (a real model server, a fake provider).
    pub routes: Vec<RouteConfig>,
    /// How long a WebSocket may stay open without signing in.
    pub sign_in_timeout: Duration,
    /// WebSockets one address may hold open without signing in.
    pub max_unauthenticated_per_address: usize,
    /// The time the rate limiters go by (`Clock::manual()` to move it by hand).
    pub clock: conclave::engine::limits::Clock,
    /// How long a run's lease lasts without a heartbeat (heartbeats every third of it).
    pub lease: Duration,
    /// Whether the sim models are asked for JSON (`[sim] structured_output`, or the sim-server
    /// route's when over HTTP).
    pub structured: StructuredOutput,
    /// A context the sim models hold and refuse prompts past (`[sim] context_tokens`).
    pub sim_context_tokens: Option<u32>,
    /// Size limits of attached files (`[attachments]`).
    pub attachments: conclave::attachments::Limits,
    /// Output caps by mode and role (`[max_tokens]`).
    pub max_tokens: conclave::providers::OutputCaps,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sim_latency_ms: 30,
            stage_timeout_ms: 120_000,
            sim_over_http: false,
            database_url: None,
            fallback: Default::default(),
            sim_models: HashMap::new(),
            max_concurrent_calls: None,
            user_limits: conclave::engine::limits::UserLimits {
                concurrent_runs: 1000,
                starts_per_minute: 100_000,
            },
            sqlite_only: false,
            routes: Vec::new(),
            sign_in_timeout: Duration::from_secs(10),
            max_unauthenticated_per_address: 16,
            clock: Default::default(),
            lease: Duration::from_secs(10),
            structured: StructuredOutput::Off,
            sim_context_tokens: None,
            attachments: Default::default(),
            max_tokens: Default::default(),
        }
    }
}

/// Adds a user with an API token and answers the token.
pub async fn add_user(store: &conclave::store::Store, name: &str, admin: bool) -> String {
    use conclave::web::auth::{hash_token, new_token};
    let token = new_token();
    store
        .create_user(name, admin, hash_token(&token), conclave::store::TokenKind::Api, None)
        .await
        .expect("create user");
    token
}

/// An HTTP client that sends `token` with every request.
pub fn client_with(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header value"),
    );
    reqwest::Client::builder().default_headers(headers).build().expect("client")
}

pub async fn spawn_app() -> TestApp {
    spawn_with(Options::default()).await
}

pub async fn spawn_with(opts: Options) -> TestApp {
    let _ = env_logger::builder().is_test(true).try_init();
    conclave::providers::openai::install_crypto();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = Config::defaults();
    config.bind = "127.0.0.1:0".into();
    // `CONCLAVE_TEST_DATABASE=postgres` runs the suite on a fresh PostgreSQL database per app.
    let own_pg = match (&opts.database_url, opts.sqlite_only) {
        (None, false) if std::env::var("CONCLAVE_TEST_DATABASE").as_deref() == Ok("postgres") => {
            crate::postgres::fresh_database()
        }
        _ => None,
    };
    config.database_url = opts
        .database_url
        .clone()
        .or_else(|| own_pg.clone())
        .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("test.db").display()));
    config.sim = SimConfig {
        latency_ms: opts.sim_latency_ms,
        models: opts.sim_models.clone(),
        context_tokens: opts.sim_context_tokens,
    };
    config.sim_structured_output = opts.structured;
    config.sim_max_concurrent_calls = opts.max_concurrent_calls;
    config.stage_timeout_ms = opts.stage_timeout_ms;
    config.fallback = opts.fallback.clone();
    config.user_limits = opts.user_limits;
    config.lease = opts.lease;
    config.heartbeat_interval = Duration::from_millis(500);
    config.client_timeout = Duration::from_secs(5);
    config.sign_in_timeout = opts.sign_in_timeout;
    config.max_unauthenticated_per_address = opts.max_unauthenticated_per_address;
    config.clock = opts.clock.clone();
    config.token_flush = Duration::from_millis(20);
    config.attachments = opts.attachments;
    config.max_tokens = opts.max_tokens.clone();
    // Failing sim models answer 503, which is retried: keep the backoff short in tests.
    config.retry.base_delay = Duration::from_millis(20);
    let mut sim_stats = None;
    if opts.sim_over_http {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind sim");
        let port = listener.local_addr().expect("addr").port();
        let (server, stats) =
            sim_server::build(listener, SimProvider::new(config.sim.clone())).expect("sim server");
        actix_web::rt::spawn(server);
        sim_stats = Some(stats);
        config.routes.push(RouteConfig {
            prefix: "sim/".into(),
            base_url: format!("http://127.0.0.1:{port}/v1"),
            api_key: None,
            api_key_env: None,
            strip_prefix: false,
            max_concurrent_calls: opts.max_concurrent_calls,
            max_tokens: None,
            max_tokens_field: None,
            openrouter: None,
            structured_output: opts.structured,
            context_tokens: None,
            vision: true,
        });
    }
    config.routes.extend(opts.routes.clone());
    let database_url = config.database_url.clone();
    let app = Application::build(config).await.expect("build app");
    let port = app.port();
    let handle = app.handle();
    // Every request of the tests is signed in as an admin unless a test asks otherwise.
    let token = add_user(app.engine().store(), "tester", true).await;
    let engine = app.engine().clone();
    actix_web::rt::spawn(app.run_until_stopped());
    TestApp {
        base: format!("http://127.0.0.1:{port}"),
        ws_url: format!("ws://127.0.0.1:{port}/ws"),
        http: client_with(&token),
        token,
        handle,
        sim_stats,
        database_url,
        engine,
        own_pg,
        _dir: dir,
    }
}

impl TestApp {
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let resp =
            self.http.post(format!("{}{path}", self.base)).json(body).send().await.expect("post");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self.http.get(format!("{}{path}", self.base)).send().await.expect("get");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Starts a run over REST and returns the 202 body.
    pub async fn start(&self, body: Value) -> Value {
        let (status, v) = self.post("/api/deliberations", &body).await;
        assert_eq!(status, 202, "start answered {status}: {v}");
        v
    }

    /// Polls the run until it is no longer running.
    pub async fn wait_done(&self, run_id: &str) -> Value {
        for _ in 0..400 {
            let (status, v) = self.get(&format!("/api/deliberations/{run_id}")).await;
            assert_eq!(status, 200, "{v}");
            if v["status"] != "running" {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("run {run_id} did not finish");
    }

    pub async fn ws(&self) -> Ws {
        self.ws_as(&self.token).await
    }

    /// A WebSocket signed in with `token` (sent as `Authorization: Bearer` on the upgrade).
    pub async fn ws_as(&self, token: &str) -> Ws {
        Ws::connect(&self.ws_url, token).await
    }

    /// A WebSocket that has not signed in.
    pub async fn ws_anonymous(&self) -> Ws {
        let (stream, _) = tokio_tungstenite::connect_async(&self.ws_url).await.expect("ws connect");
        Ws { stream }
    }

    /// Adds a user straight in the store; answers its API token.
    pub async fn user(&self, name: &str, admin: bool) -> String {
        let store = conclave::store::Store::start(&self.database_url).expect("store");
        add_user(&store, name, admin).await
    }

    pub async fn stop(self) {
        self.handle.stop(false).await;
    }
}

pub fn council_request(question: &str) -> Value {
    json!({
        "mode": "council",
        "question": question,
        "councilModels": ["sim/alpha", "sim/beta", "sim/gamma"],
        "chairmanModel": "sim/alpha",
    })
}

pub struct Ws {
    stream: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Ws {
    /// A WebSocket to `url`, signed in with `token` (for servers run as a separate process).
    pub async fn connect(url: &str, token: &str) -> Ws {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = url.into_client_request().expect("ws request");
        req.headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().expect("header"));
        let (stream, _) = tokio_tungstenite::connect_async(req).await.expect("ws connect");
        Ws { stream }
    }

    pub async fn send(&mut self, v: Value) {
        self.stream.send(WsMessage::text(v.to_string())).await.expect("ws send");
    }

    /// The next JSON message (pings are skipped), or None after `wait` of silence (a ping
    /// starts the wait again).
    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(wait, self.stream.next()).await.ok()??.ok()?;
            if let WsMessage::Text(t) = msg {
                return serde_json::from_str(t.as_str()).ok();
            }
        }
    }

    pub async fn next(&mut self) -> Value {
        self.next_within(Duration::from_secs(10)).await.expect("a websocket message within 10 s")
    }

    /// Reads until a message with `type` == `kind` (and, for events, `event` == `event`).
    pub async fn until(&mut self, kind: &str, event: Option<&str>) -> (Value, Vec<Value>) {
        let mut seen = Vec::new();
        loop {
            let v = self.next().await;
            let hit = v["type"] == kind && event.is_none_or(|e| v["event"] == e);
            if hit {
                return (v, seen);
            }
            seen.push(v);
        }
    }

    /// Reads events of `run` until its terminal event; returns all of them in order.
    pub async fn events_until_end(&mut self, run: &str) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let v = self.next().await;
            if v["type"] == "event" && v["run"] == run {
                let ev = v["event"].as_str().unwrap_or("").to_string();
                out.push(v);
                if matches!(ev.as_str(), "complete" | "error" | "cancelled") {
                    return out;
                }
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }
}

/// Event names of a list of envelopes, leaving out the per-call and token events.
pub fn stage_events(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|e| !matches!(*e, "token" | "call_start" | "call_complete"))
        .map(str::to_string)
        .collect()
}

/// The `data` of every event of one name, in order.
pub fn all_of(events: &[Value], name: &str) -> Vec<Value> {
    events.iter().filter(|e| e["event"] == name).map(|e| e["data"].clone()).collect()
}

/// Starts a run over the WebSocket and follows it to its end: its id and its events.
pub async fn watch(app: &TestApp, body: Value) -> (String, Vec<Value>) {
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": body })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().expect("runId").to_string();
    let events = ws.events_until_end(&run).await;
    ws.close().await;
    (run, events)
}

/// Asserts sequence numbers are 1, 2, 3... with no gap and no repeat.
pub fn assert_contiguous(events: &[Value], from: i64) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"].as_i64(), Some(from + i as i64), "event {i} out of sequence: {e}");
    }
}

/// A real `conclave serve` process (for crash and several-instance tests), killed when
/// dropped.
pub struct ServerProcess {
    child: std::process::Child,
    pub url: String,
    /// Its log is `<name>.log` in the directory it was started in.
    pub name: &'static str,
}

impl ServerProcess {
    /// Starts `conclave serve` in `dir` (which holds its conclave.toml) on `db`, with its log
    /// in `<name>.log` there; returns once it listens.
    pub fn start(dir: &std::path::Path, db: &str, name: &'static str) -> ServerProcess {
        use std::io::BufRead;
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let mut child = crate::cli::conclave()
            .current_dir(dir)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("DATABASE_URL", db)
            .env("RUST_LOG", "info")
            .env_remove("CONCLAVE_SIM_LATENCY_MS")
            .env_remove("REDIS_URL")
            .stdout(std::process::Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start conclave serve");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufReader::new(stdout).read_line(&mut line).expect("its first line");
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("URL");
        ServerProcess { child, url: url.to_string(), name }
    }

    pub async fn ws(&self, token: &str) -> Ws {
        Ws::connect(&format!("{}/ws", self.url.replacen("http", "ws", 1)), token).await
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the first sample of `name` (with its labels, if given) in a `/metrics` text;
/// 0 when absent.
pub fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The server's `/metrics` text.
pub async fn metrics(app: &TestApp) -> String {
    app.http.get(format!("{}/metrics", app.base)).send().await.unwrap().text().await.unwrap()
}

/// Each `modeConfig` of `cases` is refused with a 400 naming its field, and so is an empty
/// question.
pub async fn assert_refused_by_field(app: &TestApp, mode: &str, cases: &[(Value, &str)]) {
    for (cfg, field) in cases {
        let body = json!({ "mode": mode, "question": "q", "modeConfig": cfg });
        let (status, b) = app.post("/api/deliberations", &body).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(*field)), "{cfg}: {b}");
    }
    let (status, b) =
        app.post("/api/deliberations", &json!({ "mode": mode, "question": "" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
}

/// How a run's machine-read replies were read: the calls that carried a reply schema (their
/// `call_start` names it) and answered, and, of the stage rows they left, how many say they
/// were read from JSON or from text (`parsedData.readFrom`). The rest were not read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    pub machine_read: usize,
    pub json: usize,
    pub text: usize,
    pub unparsed: usize,
}

impl Reads {
    /// From a run's stored events and stage rows (its JSON export's `events` and `stages`).
    pub fn of(events: &[Value], stages: &[Value]) -> Reads {
        let asked: std::collections::HashSet<&str> = events
            .iter()
            .filter(|e| e["event"] == "call_start" && e["data"]["schema"].is_string())
            .filter_map(|e| e["data"]["key"].as_str())
            .collect();
        let machine_read = events
            .iter()
            .filter(|e| e["event"] == "call_complete" && e["data"]["ok"] == true)
            .filter(|e| e["data"]["key"].as_str().is_some_and(|k| asked.contains(k)))
            .count();
        // A reply read and then asked again (a Decompose plan with a cycle) was read too: its
        // row says how in `firstReadFrom`; so was a reply asked again and set aside for the
        // first (`setAsideReadFrom`).
        let from = |how: &str| {
            stages
                .iter()
                .map(|s| {
                    ["readFrom", "firstReadFrom", "setAsideReadFrom"]
                        .iter()
                        .filter(|k| s["parsedData"][**k] == how)
                        .count()
                })
                .sum::<usize>()
        };
        // A reply whose JSON was cut off at its cap and read up to the cut was read from JSON.
        let (json, text) = (from("json") + from("json_cut"), from("text"));
        assert!(
            json + text <= machine_read,
            "more reads than replies: {json} + {text} of {machine_read}"
        );
        Reads { machine_read, json, text, unparsed: machine_read - json - text }
    }

    pub fn read(&self) -> usize {
        self.json + self.text
    }

    /// The share of machine-read replies read from JSON (1 when there were none).
    pub fn json_share(&self) -> f64 {
        if self.machine_read == 0 {
            1.0
        } else {
            self.json as f64 / self.machine_read as f64
        }
    }
}

impl std::fmt::Display for Reads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "read {}/{} (json {}, text {}), unparsed {}",
            self.read(),
            self.machine_read,
            self.json,
            self.text,
            self.unparsed
        )
    }
}
