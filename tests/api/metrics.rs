//! `GET /metrics`: the Prometheus text, what it counts, and who may read it.
//!
//! The registry is one per process and the tests of this binary run side by side, so the
//! in-process tests use model ids no other test names and compare before and after. The
//! connection gauge, which every WebSocket test moves, is checked exactly on a `conclave serve`
//! process of its own.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::*;

/// A scrape: every sample by its series (`name{labels}` as written) and the raw text.
struct Scrape {
    samples: HashMap<String, f64>,
    text: String,
}

impl Scrape {
    /// A sample's value; 0 when the series is absent (a counter not yet incremented).
    fn get(&self, series: &str) -> f64 {
        self.samples.get(series).copied().unwrap_or(0.0)
    }
}

/// Parses the text exposition format strictly: every line is `# HELP name text`,
/// `# TYPE name kind` or `name{label="value",...} number`, each sample's family is declared
/// (HELP and TYPE) before it, no family twice, and each histogram's buckets rise to `+Inf`,
/// which equals its `_count`.
fn parse(text: &str) -> Scrape {
    let sample = regex::Regex::new(
        r#"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? (\S+)$"#,
    )
    .unwrap();
    let mut help = HashSet::new();
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, doc) = rest.split_once(' ').expect("HELP has a text");
            assert!(doc.ends_with('.') && !doc.ends_with(".."), "one full stop: {line}");
            assert!(help.insert(name.to_string()), "HELP twice: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(types.insert(name.to_string(), kind.to_string()).is_none(), "{line}");
            continue;
        }
        let caps = sample.captures(line).unwrap_or_else(|| panic!("not a sample: {line:?}"));
        let name = &caps[1];
        let value: f64 = match &caps[3] {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("not a number: {line:?}")),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                let base = name.strip_suffix(s)?;
                (types.get(base).map(String::as_str) == Some("histogram")).then_some(base)
            })
            .unwrap_or(name);
        assert!(types.contains_key(family) && help.contains(family), "undeclared: {line}");
        let series = line.rsplit_once(' ').unwrap().0.to_string();
        assert!(samples.insert(series, value).is_none(), "a series twice: {line}");
    }
    for (family, _) in types.iter().filter(|(_, k)| *k == "histogram") {
        let mut by_series: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
        for (series, v) in &samples {
            let Some(labels) = series.strip_prefix(&format!("{family}_bucket{{")) else { continue };
            let (rest, le) = labels.trim_end_matches("\"}").rsplit_once(",le=\"").unwrap();
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
            by_series.entry(rest.to_string()).or_default().push((le, *v));
        }
        for (labels, mut buckets) in by_series {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative: {buckets:?}");
            assert_eq!(buckets.last().unwrap().0, f64::INFINITY);
            let count = samples[&format!("{family}_count{{{labels}}}")];
            assert_eq!(buckets.last().unwrap().1, count, "+Inf is the count for {labels}");
        }
    }
    Scrape { samples, text: text.to_string() }
}

/// Every family and its type, as the exposition has always named them.
const FAMILIES: [(&str, &str); 14] = [
    ("conclave_runs", "gauge"),
    ("conclave_runs_started_total", "counter"),
    ("conclave_runs_resumed_total", "counter"),
    ("conclave_store_commit_failures_total", "counter"),
    ("conclave_model_call_duration_seconds", "histogram"),
    ("conclave_model_call_errors_total", "counter"),
    ("conclave_model_call_retries_total", "counter"),
    ("conclave_tokens_total", "counter"),
    ("conclave_cost_total", "counter"),
    ("conclave_websocket_connections", "gauge"),
    ("conclave_websocket_connections_total", "counter"),
    ("conclave_events_dropped_total", "counter"),
    ("conclave_websocket_messages_dropped_total", "counter"),
    ("conclave_watchers_lagged_total", "counter"),
];

/// Each family declared in `text` (its `# TYPE` line) and its type.
fn declared(text: &str) -> HashMap<String, String> {
    let types = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '));
    types.map(|(name, kind)| (name.to_string(), kind.to_string())).collect()
}

/// The sample names of a scrape (its series without their labels).
fn sample_names(s: &Scrape) -> HashSet<&str> {
    s.samples.keys().map(|series| series.split('{').next().unwrap()).collect()
}

#[test]
fn every_family_keeps_its_name_and_type_and_the_whole_output_parses() {
    use conclave::metrics::{Feed, Registry};
    use conclave::modes::{CallError, CallErrorKind, CallReply, Usage};
    use conclave::store::RunCount;

    let want: HashMap<String, String> =
        FAMILIES.iter().map(|(f, k)| (f.to_string(), k.to_string())).collect();
    // Before anything is counted, every family is declared; a registry of its own, as the
    // process's is moved by the tests running beside this one.
    let fresh = parse(&Registry::new().render(&[]));
    assert_eq!(declared(&fresh.text), want, "{}", fresh.text);
    let names = sample_names(&fresh);
    assert!(!names.contains("conclave_cost_total") && !names.contains("conclave_runs"));

    let r = Registry::new();
    r.run_started("council");
    r.run_resumed();
    r.commit_failed();
    let call = |result, usage| CallReply {
        key: "k".into(),
        model: "m/a".into(),
        response_time_ms: 300,
        result,
        usage,
    };
    let usage = Usage { prompt_tokens: 3, completion_tokens: 2, cost: Some(0.5) };
    r.call_finished(&call(Ok("answer".into()), Some(usage)));
    let http = CallError::new(CallErrorKind::Http, Some(429), "slow down");
    r.call_finished(&call(Err(http), None));
    r.call_retried("m/a");
    let _open = r.ws_opened();
    r.tokens_dropped(1);
    r.ws_message_dropped();
    r.watcher_lagged(Feed::Run);
    let runs = [RunCount { mode: "vote".into(), status: "running".into(), count: 2 }];
    let s = parse(&r.render(&runs));
    assert_eq!(declared(&s.text), want);
    let histogram = "conclave_model_call_duration_seconds";
    let mut samples: HashSet<String> = FAMILIES
        .iter()
        .filter(|(_, kind)| *kind != "histogram")
        .map(|(name, _)| name.to_string())
        .collect();
    samples.extend(["_bucket", "_sum", "_count"].map(|suffix| format!("{histogram}{suffix}")));
    let names: HashSet<String> = sample_names(&s).into_iter().map(String::from).collect();
    assert_eq!(names, samples, "{}", s.text);
    assert_eq!(s.get("conclave_runs{mode=\"vote\",status=\"running\"}"), 2.0);
    assert_eq!(s.get("conclave_cost_total{model=\"m/a\"}"), 0.5);
    assert_eq!(s.get("conclave_websocket_connections"), 1.0);
    assert_eq!(s.get("conclave_websocket_connections_total"), 1.0);
}

async fn scrape_with(client: &reqwest::Client, base: &str) -> Scrape {
    let resp = client.get(format!("{base}/metrics")).send().await.expect("scrape");
    assert_eq!(resp.status(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    parse(&resp.text().await.unwrap())
}

async fn scrape(app: &TestApp) -> Scrape {
    scrape_with(&app.http, &app.base).await
}

/// Every event of a finished run, replayed over a WebSocket.
async fn events_of(app: &TestApp, run: &str) -> Vec<Value> {
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let events = ws.events_until_end(run).await;
    ws.close().await;
    events
}

/// The events named `event` for `model`.
fn of<'a>(events: &'a [Value], event: &str, model: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == event && e["data"]["model"] == model).collect()
}

fn count(model: &str) -> String {
    format!("conclave_model_call_duration_seconds_count{{model=\"{model}\"}}")
}

fn tokens(model: &str, kind: &str) -> String {
    format!("conclave_tokens_total{{model=\"{model}\",kind=\"{kind}\"}}")
}

fn usage_sum(calls: &[&Value], field: &str) -> f64 {
    calls.iter().map(|c| c["data"]["usage"][field].as_f64().unwrap_or(0.0)).sum()
}

#[actix_web::test]
async fn a_council_counts_every_call_of_each_model_its_tokens_and_the_run() {
    let app = spawn_app().await;
    let models = ["sim/metrics-a", "sim/metrics-b", "sim/metrics-c"];
    let before = scrape(&app).await;
    let started = app
        .start(json!({ "question": "What do metrics measure?", "councilModels": models,
                       "chairmanModel": models[0] }))
        .await;
    let run_id = started["runId"].as_str().unwrap();
    let run = app.wait_done(run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let events = events_of(&app, run_id).await;
    let after = scrape(&app).await;

    let mut calls_seen = 0;
    for model in models {
        let calls = of(&events, "call_complete", model);
        assert!(calls.len() >= 2, "{model} answered stage 1 and ranked in stage 2");
        calls_seen += calls.len();
        let delta = |series: &str| after.get(series) - before.get(series);
        assert_eq!(delta(&count(model)), calls.len() as f64, "{model}: one observation a call");
        let inf =
            format!("conclave_model_call_duration_seconds_bucket{{model=\"{model}\",le=\"+Inf\"}}");
        assert_eq!(delta(&inf), calls.len() as f64);
        let elapsed: f64 =
            calls.iter().map(|c| c["data"]["responseTimeMs"].as_f64().unwrap()).sum();
        let sum = format!("conclave_model_call_duration_seconds_sum{{model=\"{model}\"}}");
        assert!(
            (delta(&sum) - elapsed / 1000.0).abs() < 1e-6,
            "{model}: the sum is the calls' time"
        );
        for kind in ["prompt", "completion"] {
            let field = if kind == "prompt" { "promptTokens" } else { "completionTokens" };
            assert_eq!(delta(&tokens(model, kind)), usage_sum(&calls, field), "{model} {kind}");
        }
        assert!(!after.text.contains(&format!("errors_total{{model=\"{model}\"")), "no errors");
    }
    // Every call of the run was one of these models, so their tokens add up to the run's.
    let total = |kind: &str| -> f64 {
        models.iter().map(|m| after.get(&tokens(m, kind)) - before.get(&tokens(m, kind))).sum()
    };
    assert_eq!(total("prompt"), run["usage"]["promptTokens"].as_f64().unwrap());
    assert_eq!(total("completion"), run["usage"]["completionTokens"].as_f64().unwrap());
    assert_eq!(calls_seen, events.iter().filter(|e| e["event"] == "call_complete").count());

    // This app's database holds this one run.
    assert_eq!(after.get("conclave_runs{mode=\"council\",status=\"completed\"}"), 1.0);
    assert_eq!(
        after.text.lines().filter(|l| l.starts_with("conclave_runs{")).count(),
        1,
        "{}",
        after.text
    );
    for (family, kind) in FAMILIES {
        assert!(after.text.contains(&format!("# TYPE {family} {kind}\n")), "{family}");
    }
    // Nothing about who asked what.
    for secret in [run_id, "What do metrics measure", "tester", &app.token] {
        assert!(!after.text.contains(secret), "{secret} is in the metrics");
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_failing_model_shows_http_errors_and_its_retries() {
    let app = spawn_app().await;
    let (fails, ok) = ("sim/fail-metrics", "sim/metrics-ok");
    let before = scrape(&app).await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": [ok, fails, "sim/metrics-ok2"],
                       "chairmanModel": ok }))
        .await;
    let run_id = started["runId"].as_str().unwrap();
    let run = app.wait_done(run_id).await;
    assert_eq!(run["status"], "completed", "the council goes on without it: {run}");
    let events = events_of(&app, run_id).await;
    let after = scrape(&app).await;
    let delta = |series: &str| after.get(series) - before.get(series);

    let failed = of(&events, "call_complete", fails);
    assert!(!failed.is_empty() && failed.iter().all(|c| c["data"]["ok"] == false));
    let errors = format!(
        "conclave_model_call_errors_total{{model=\"{fails}\",kind=\"http\",status=\"503\"}}"
    );
    assert_eq!(delta(&errors), failed.len() as f64, "{}", after.text);
    assert_eq!(delta(&count(fails)), failed.len() as f64, "failed calls are timed too");
    let retries = of(&events, "call_retry", fails).len();
    assert!(retries >= failed.len(), "503 is retried");
    let series = format!("conclave_model_call_retries_total{{model=\"{fails}\"}}");
    assert_eq!(delta(&series), retries as f64);
    assert_eq!(delta(&tokens(fails, "prompt")), 0.0, "a failed call reports no usage");
    assert!(!after.text.contains(&format!("errors_total{{model=\"{ok}\"")));
    assert_eq!(delta(&format!("conclave_model_call_retries_total{{model=\"{ok}\"}}")), 0.0);
    app.stop().await;
}

#[actix_web::test]
async fn only_this_machine_or_an_admin_may_read_the_metrics() {
    let app = spawn_app().await;
    let url = format!("{}/metrics", app.base);
    let plain = reqwest::Client::new();
    // Straight from loopback: no token needed.
    assert_eq!(plain.get(&url).send().await.unwrap().status(), 200);
    // Through a proxy, the peer address says nothing about the client.
    let proxied = |c: &reqwest::Client| c.get(&url).header("X-Forwarded-For", "203.0.113.9");
    let resp = proxied(&plain).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("admin's token"), "{body}");
    let user = client_with(&app.user("metrics-reader", false).await);
    let resp = proxied(&user).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("admins"), "{body}");
    let wrong = client_with("cnv_not-a-token");
    assert_eq!(proxied(&wrong).send().await.unwrap().status(), 401);
    let resp = proxied(&app.http).send().await.unwrap();
    assert_eq!(resp.status(), 200, "an admin's token works from anywhere");
    parse(&resp.text().await.unwrap());
    let forwarded = plain.get(&url).header("Forwarded", "for=203.0.113.9").send().await.unwrap();
    assert_eq!(forwarded.status(), 401);
    app.stop().await;
}

/// Polls `/metrics` until `series` reads `want`; answers the last scrape.
async fn wait_for(client: &reqwest::Client, base: &str, series: &str, want: f64) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = scrape_with(client, base).await;
        if s.get(series) == want || Instant::now() > deadline {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn a_server_process_counts_its_websockets_exactly_and_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("metrics.db").display());
    let token = crate::cli::add_user(&db, "ops", true);
    let server = ServerProcess::start(dir.path(), &db, "metrics");
    let plain = reqwest::Client::new();
    let (open, total) = ("conclave_websocket_connections", "conclave_websocket_connections_total");

    let s = scrape_with(&plain, &server.url).await;
    assert_eq!((s.get(open), s.get(total)), (0.0, 0.0));
    let connect = || async {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let url = format!("{}/ws", server.url.replacen("http://", "ws://", 1));
        let mut req = url.into_client_request().unwrap();
        req.headers_mut().insert("Authorization", format!("Bearer {token}").parse().unwrap());
        tokio_tungstenite::connect_async(req).await.expect("ws connect").0
    };
    let mut first = connect().await;
    let second = connect().await;
    let s = wait_for(&plain, &server.url, open, 2.0).await;
    assert_eq!((s.get(open), s.get(total)), (2.0, 2.0));
    first.close(None).await.unwrap();
    let s = wait_for(&plain, &server.url, open, 1.0).await;
    assert_eq!((s.get(open), s.get(total)), (1.0, 2.0), "a closed socket is no longer open");
    drop(second); // the TCP connection goes away without a close frame
    let s = wait_for(&plain, &server.url, open, 0.0).await;
    assert_eq!((s.get(open), s.get(total)), (0.0, 2.0), "a dropped connection is not open");

    // Runs by mode and status come from the database.
    let admin = client_with(&token);
    let resp = admin
        .post(format!("{}/api/deliberations", server.url))
        .json(&council_request("Counted?"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let s =
        wait_for(&plain, &server.url, "conclave_runs{mode=\"council\",status=\"completed\"}", 1.0)
            .await;
    assert_eq!(s.get("conclave_runs{mode=\"council\",status=\"completed\"}"), 1.0, "{}", s.text);
    assert_eq!(s.get("conclave_runs{mode=\"council\",status=\"running\"}"), 0.0);
    let calls: f64 = ["sim/alpha", "sim/beta", "sim/gamma"].iter().map(|m| s.get(&count(m))).sum();
    assert!(calls >= 7.0, "three answers, three rankings and a synthesis at least: {calls}");
}

// PostgreSQL: the same GROUP BY through the other backend. Skipped, with a printed reason,
// when no server answers at CONCLAVE_TEST_PG (a failure with CONCLAVE_REQUIRE_PG; `postgres.rs`).
#[actix_web::test]
async fn runs_by_mode_and_status_are_counted_on_postgresql() {
    let Some(url) = crate::postgres::fresh_database() else { return };
    let app = spawn_with(Options { database_url: Some(url.clone()), ..Options::default() }).await;
    let first = app.start(council_request("On PostgreSQL?")).await;
    app.wait_done(first["runId"].as_str().unwrap()).await;
    let second = app
        .start(json!({ "mode": "vote", "question": "Which?", "modeConfig": {
            "models": ["sim/alpha", "sim/beta", "sim/gamma"] } }))
        .await;
    let run = app.wait_done(second["runId"].as_str().unwrap()).await;
    let s = scrape(&app).await;
    assert_eq!(s.get("conclave_runs{mode=\"council\",status=\"completed\"}"), 1.0, "{}", s.text);
    let vote =
        format!("conclave_runs{{mode=\"vote\",status=\"{}\"}}", run["status"].as_str().unwrap());
    assert_eq!(s.get(&vote), 1.0, "{}", s.text);
    app.stop().await;
    crate::postgres::drop_database(&url);
}
