//! Several instances: two real `conclave serve` processes on one PostgreSQL database and one
//! Redis (a channel prefix of their own per test). A watcher on B sees the run A executes with
//! the same sequence numbers and events, and B replays it the same; B lists it live; a cancel
//! sent to B stops it on A; and when A is killed (`kill -9`) mid-run, B takes the run over once
//! its lease has run out and B's watcher follows it to the end. A run of the `conclave run` CLI
//! on the same database and Redis is listed, followed and cancelled from a server likewise.
//!
//! Skipped with a printed reason when PostgreSQL or Redis is unreachable, unless
//! CONCLAVE_REQUIRE_PG / CONCLAVE_REQUIRE_REDIS is set (`.ci/run` sets both): then it fails.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cli::add_user;
use crate::helpers::{client_with, ServerProcess, Ws};

fn redis_url() -> String {
    std::env::var("CONCLAVE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// Whether Redis answers a PING; when it does not, fails if CONCLAVE_REQUIRE_REDIS is set,
/// else prints why the test is skipped.
async fn redis_reachable() -> bool {
    let url = redis_url();
    let ping = async {
        let client = redis::Client::open(url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    let answer = match tokio::time::timeout(Duration::from_secs(3), ping).await {
        Ok(Ok(pong)) => return pong == "PONG",
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer in 3 s".to_string(),
    };
    if std::env::var("CONCLAVE_REQUIRE_REDIS").is_ok() {
        panic!("Redis is required (CONCLAVE_REQUIRE_REDIS) but {url} answered: {answer}");
    }
    eprintln!("skipping the several-instances test: cannot reach Redis at {url}: {answer}");
    false
}

/// Removes the keys a test left under its prefix.
async fn clean_redis(prefix: &str) {
    let Ok(client) = redis::Client::open(redis_url().as_str()) else { return };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else { return };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    if !keys.is_empty() {
        let _ = redis::cmd("DEL").arg(keys).exec_async(&mut conn).await;
    }
}

/// Two instances on a fresh PostgreSQL database and a Redis prefix of their own.
struct Cluster {
    a: ServerProcess,
    b: ServerProcess,
    db: String,
    prefix: String,
    token: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// None (the test is skipped) when Redis or PostgreSQL is unreachable. `sim_latency_ms`:
    /// how long each model call takes.
    async fn start(sim_latency_ms: u64) -> Option<Cluster> {
        if !redis_reachable().await {
            return None;
        }
        let db = crate::postgres::fresh_database()?;
        conclave::providers::openai::install_crypto();
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        // Leases run out 1 s after the last heartbeat (every third of it).
        std::fs::write(
            dir.path().join("conclave.toml"),
            format!(
                "lease_ms = 1000\nmax_runs_per_user = 100\nredis_url = \"{}\"\n\
                 redis_prefix = \"{prefix}\"\n[sim]\nlatency_ms = {sim_latency_ms}\n",
                redis_url()
            ),
        )
        .unwrap();
        let token = add_user(&db, "ops", true);
        let a = ServerProcess::start(dir.path(), &db, "a");
        let b = ServerProcess::start(dir.path(), &db, "b");
        let http = client_with(&token);
        let cluster = Cluster { a, b, db, prefix, token, http, dir };
        cluster.wait_connected().await;
        Some(cluster)
    }

    /// Waits until both instances say they joined Redis.
    async fn wait_connected(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for s in [&self.a, &self.b] {
            while !self.log(s).contains("connected to Redis") {
                assert!(Instant::now() < deadline, "{} never connected:\n{}", s.name, self.log(s));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    fn log(&self, s: &ServerProcess) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{}.log", s.name))).unwrap_or_default()
    }

    /// Starts a run on `server`; answers its id.
    async fn start_run(&self, server: &ServerProcess, body: &Value) -> String {
        let r = self.http.post(format!("{}/api/deliberations", server.url)).json(body).send();
        let r = r.await.unwrap();
        assert_eq!(r.status().as_u16(), 202);
        let v: Value = r.json().await.unwrap();
        v["runId"].as_str().unwrap().to_string()
    }

    async fn get(&self, server: &ServerProcess, path: &str) -> Value {
        let r = self.http.get(format!("{}{path}", server.url)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        r.json().await.unwrap()
    }

    async fn finish(self) {
        let (db, prefix) = (self.db.clone(), self.prefix.clone());
        drop(self);
        crate::postgres::drop_database(&db);
        clean_redis(&prefix).await;
    }
}

fn council(question: &str) -> Value {
    json!({ "mode": "council", "question": question,
            "councilModels": ["sim/alpha", "sim/beta", "sim/gamma"], "chairmanModel": "sim/delta" })
}

fn is_terminal(v: &Value) -> bool {
    matches!(v["event"].as_str(), Some("complete" | "error" | "cancelled"))
}

/// Reads events of `run` until `stop` holds for one (included) or `limit` passes; tokens
/// included, in arrival order.
async fn read_until(
    ws: &mut Ws,
    run: &str,
    limit: Duration,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no {run} event ended the wait within {limit:?}; got {out:?}");
        let Ok(Some(v)) = tokio::time::timeout(left, ws.next_within(left)).await else { continue };
        if v["type"] == "event" && v["run"] == run {
            let done = stop(&v);
            out.push(v);
            if done {
                return out;
            }
        }
    }
}

/// The events of a watch: no number twice and in rising order (what clients rely on).
fn by_seq(events: &[Value]) -> BTreeMap<i64, Value> {
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "numbers rise, none twice: {seqs:?}");
    events.iter().map(|e| (e["seq"].as_i64().unwrap(), e.clone())).collect()
}

fn durable(events: &BTreeMap<i64, Value>) -> Vec<&Value> {
    events.values().filter(|e| e["event"] != "token").collect()
}

#[actix_web::test]
async fn a_watcher_on_another_instance_sees_the_same_run_and_lists_it_live() {
    let Some(c) = Cluster::start(300).await else { return };
    let mut dash = c.b.ws(&c.token).await;
    dash.send(json!({ "type": "dashboard" })).await;
    let (first, _) = dash.until("dashboard", None).await;
    assert_eq!(first["runs"], json!([]), "nothing runs yet");

    let run = c.start_run(&c.a, &council("Is one instance enough?")).await;
    let mut on_a = c.a.ws(&c.token).await;
    let mut on_b = c.b.ws(&c.token).await;
    on_a.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    on_b.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let mut seen_a =
        read_until(&mut on_a, &run, Duration::from_secs(30), |e| e["event"] == "call_complete")
            .await;
    // B lists A's run as running, over REST too.
    let list = c.get(&c.b, "/api/deliberations").await;
    let live: Vec<&Value> =
        list["live"].as_array().unwrap().iter().filter(|r| r["id"] == run).collect();
    assert_eq!(live.len(), 1, "B lists A's run: {list}");
    assert_eq!(live[0]["status"], "running");
    assert_eq!(live[0]["mode"], "council");
    // A second watcher joins B mid-run, from the start.
    let mut late_b = c.b.ws(&c.token).await;
    late_b.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let limit = Duration::from_secs(30);
    let (rest_a, seen_b, seen_late) = tokio::join!(
        read_until(&mut on_a, &run, limit, is_terminal),
        read_until(&mut on_b, &run, limit, is_terminal),
        read_until(&mut late_b, &run, limit, is_terminal),
    );
    seen_a.extend(rest_a);
    let (a, b, late) = (by_seq(&seen_a), by_seq(&seen_b), by_seq(&seen_late));
    assert_eq!(a.values().last().unwrap()["event"], "complete");
    // Same numbers, same events, to the byte (tokens streamed before B subscribed are not
    // replayed: they are not stored).
    assert_eq!(durable(&b), durable(&a), "B's watcher saw what A's did");
    assert_eq!(durable(&late), durable(&a), "so did the one that joined mid-run");
    let tokens_b: Vec<&i64> =
        b.iter().filter(|(_, e)| e["event"] == "token").map(|(s, _)| s).collect();
    assert!(!tokens_b.is_empty(), "tokens stream across instances");
    for seq in &tokens_b {
        assert_eq!(b[seq], a[seq], "token {seq} is A's");
    }
    // Replay from B: the stored events, the same again.
    let mut replay = c.b.ws(&c.token).await;
    replay.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let stored = by_seq(&replay.events_until_end(&run).await);
    assert_eq!(durable(&stored), durable(&a), "B replays what A published");
    let since = *a.keys().nth(a.len() / 2).unwrap();
    replay.send(json!({ "type": "unwatch", "run": run })).await;
    let mut resume = c.b.ws(&c.token).await;
    resume.send(json!({ "type": "watch", "run": run, "since": since })).await;
    let after = by_seq(&resume.events_until_end(&run).await);
    let expected: Vec<&Value> =
        durable(&a).into_iter().filter(|e| e["seq"].as_i64() > Some(since)).collect();
    assert_eq!(durable(&after), expected, "B resumes after seq {since}");

    // B's dashboard got A's run while it ran and when it ended (read up to its end, not until
    // a quiet spell).
    let mut updates = Vec::new();
    while updates.last().is_none_or(|u: &Value| u["status"] == "running") {
        let v = dash.next().await;
        if v["type"] == "dashboard_update" && v["run"]["id"] == run {
            updates.push(v["run"].clone());
        }
    }
    assert!(updates.iter().any(|u| u["status"] == "running"), "{updates:?}");
    let last = updates.last().unwrap();
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["lastEvent"], "complete");
    assert!(last["calls"].as_array().unwrap().len() >= 4, "{last}");
    c.finish().await;
}

#[actix_web::test]
async fn a_cancel_sent_to_another_instance_stops_the_run_at_once() {
    // Calls take 5 s: the run is surely still going when it is cancelled.
    let Some(c) = Cluster::start(5_000).await else { return };
    let run = c.start_run(&c.a, &council("Will this be cancelled from elsewhere?")).await;
    let mut on_a = c.a.ws(&c.token).await;
    let mut on_b = c.b.ws(&c.token).await;
    on_a.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    on_b.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    read_until(&mut on_a, &run, Duration::from_secs(10), |e| e["event"] == "call_start").await;
    read_until(&mut on_b, &run, Duration::from_secs(10), |e| e["event"] == "call_start").await;

    // B keeps the access checks: a user who is neither the owner nor an admin may not.
    let other = client_with(&add_user(&c.db, "someone", false));
    let cancel = format!("{}/api/deliberations/{run}/cancel", c.b.url);
    let refused = other.post(&cancel).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);

    let sent = Instant::now();
    let r = c.http.post(&cancel).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202, "{:?}", r.text().await);
    let on_a_events = read_until(&mut on_a, &run, Duration::from_secs(10), is_terminal).await;
    let took = sent.elapsed();
    let end = on_a_events.last().unwrap();
    assert_eq!(end["event"], "cancelled", "{end}");
    assert_eq!(end["data"]["message"], "cancelled by ops", "who stopped it: {end}");
    eprintln!("a cancel sent to B stopped the run on A in {} ms", took.as_millis());
    // The target is a second; the bound is loose for a loaded machine.
    assert!(took < Duration::from_secs(3), "the cancel took {took:?}");
    // B's watcher sees the end too, and both instances say so.
    let on_b_events = read_until(&mut on_b, &run, Duration::from_secs(10), is_terminal).await;
    assert_eq!(on_b_events.last().unwrap(), end);
    for s in [&c.a, &c.b] {
        let v = c.get(s, &format!("/api/deliberations/{run}")).await;
        assert_eq!(v["status"], "cancelled", "{v}");
    }
    assert!(c.log(&c.a).contains(&format!("run {run} cancelled at the request of instance")));
    // A second cancel finds it ended, on either instance.
    let again = c.http.post(&cancel).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 409);
    c.finish().await;
}

/// A run of the `conclave run` CLI on the same database and Redis is an instance's like any
/// other: a server lists it live, its watchers follow it, and a cancel sent to the server stops
/// it in the CLI's process, which exits 130 (cancelled).
#[actix_web::test]
async fn a_cli_run_is_listed_by_a_server_and_stopped_by_a_cancel_sent_there() {
    // Calls take 5 s: the run is surely still going when it is cancelled.
    let Some(c) = Cluster::start(5_000).await else { return };
    let mut cli = crate::cli::conclave()
        .current_dir(c.dir.path())
        .args(["run", "council", "Can a terminal join the cluster?", "-q"])
        .env("DATABASE_URL", &c.db)
        .env_remove("CONCLAVE_SIM_LATENCY_MS")
        .env_remove("REDIS_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start conclave run");
    let deadline = Instant::now() + Duration::from_secs(15);
    let run = loop {
        let list = c.get(&c.a, "/api/deliberations").await;
        let live = list["live"].as_array().cloned().unwrap_or_default();
        if let Some(r) = live.iter().find(|r| r["question"] == "Can a terminal join the cluster?") {
            break r["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "A never listed the CLI's run: {list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut on_a = c.a.ws(&c.token).await;
    on_a.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    read_until(&mut on_a, &run, Duration::from_secs(10), |e| e["event"] == "call_start").await;

    let sent = Instant::now();
    let cancel = format!("{}/api/deliberations/{run}/cancel", c.a.url);
    let r = c.http.post(&cancel).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202, "{:?}", r.text().await);
    let events = read_until(&mut on_a, &run, Duration::from_secs(10), is_terminal).await;
    let took = sent.elapsed();
    assert_eq!(events.last().unwrap()["event"], "cancelled", "{events:?}");
    eprintln!("a cancel sent to a server stopped the CLI's run in {} ms", took.as_millis());
    assert!(took < Duration::from_secs(3), "the cancel took {took:?}");
    let status = loop {
        if let Some(status) = cli.try_wait().unwrap() {
            break status;
        }
        assert!(sent.elapsed() < Duration::from_secs(15), "the CLI did not exit after the cancel");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut cli.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "the CLI says cancelled: {stderr}");
    let v = c.get(&c.b, &format!("/api/deliberations/{run}")).await;
    assert_eq!(v["status"], "cancelled", "{v}");
    c.finish().await;
}

#[actix_web::test]
async fn when_the_executing_instance_is_killed_another_takes_the_run_over() {
    let Some(c) = Cluster::start(400).await else { return };
    let runs = [
        c.start_run(&c.a, &council("Who finishes this if A dies?")).await,
        c.start_run(
            &c.a,
            &json!({ "mode": "debate", "question": "Should a crash lose work?",
                     "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"] } }),
        )
        .await,
    ];
    let mut on_b = c.b.ws(&c.token).await;
    for run in &runs {
        on_b.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    }
    // Follow both from B until each has finished a model call on A and is streaming tokens
    // numbered after its last stored event, then kill A: B must number what it resumes after
    // those tokens, or B's watchers (which drop numbers they have seen) would lose events.
    let mut seen: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let streaming = |evs: &Vec<Value>| {
        evs.iter().any(|e| e["event"] == "call_complete")
            && evs.last().is_some_and(|e| e["event"] == "token")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !runs.iter().all(|r| seen.get(r).is_some_and(streaming)) {
        assert!(Instant::now() < deadline, "no call finished in time: {seen:?}");
        if let Some(v) = on_b.next_within(Duration::from_secs(5)).await {
            if v["type"] == "event" {
                seen.entry(v["run"].as_str().unwrap().to_string()).or_default().push(v);
            }
        }
    }
    let Cluster { a, b, db, prefix, token, http, dir } = c;
    let killed = Instant::now();
    drop(a); // SIGKILL
    assert!(seen.values().all(|evs| !evs.iter().any(is_terminal)), "A died mid-run");

    // B's watcher follows each run to its end: B resumes it once A's lease ran out.
    let mut resumed_after = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !runs.iter().all(|r| seen[r].iter().any(is_terminal)) {
        assert!(Instant::now() < deadline, "the runs did not finish on B");
        if let Some(v) = on_b.next_within(Duration::from_secs(5)).await {
            if v["type"] == "event" {
                if v["event"] == "resumed" && resumed_after.is_none() {
                    resumed_after = Some(killed.elapsed());
                }
                seen.get_mut(v["run"].as_str().unwrap()).unwrap().push(v);
            }
        }
    }
    let took = resumed_after.expect("a resumed event");
    let log = std::fs::read_to_string(dir.path().join("b.log")).unwrap_or_default();
    eprintln!("B took over A's runs {} ms after A was killed (lease 1000 ms)", took.as_millis());
    assert!(took >= Duration::from_millis(500), "not before the lease ran out: {took:?}");
    assert!(took < Duration::from_secs(10), "took over in {took:?}\n{log}");
    let mut replay = Ws::connect(&format!("{}/ws", b.url.replacen("http", "ws", 1)), &token).await;
    for run in &runs {
        let watched = by_seq(&seen[run]);
        let events = durable(&watched);
        assert_eq!(events.last().unwrap()["event"], "complete", "{run}: {events:?}\n{log}");
        assert_eq!(watched.values().filter(|e| e["event"] == "resumed").count(), 1, "{run}");
        // Nothing missing, nothing twice: what B's watcher saw is what is stored.
        replay.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
        let stored = by_seq(&replay.events_until_end(run).await);
        assert_eq!(durable(&stored), events, "{run}: watched live = stored");
        // Numbers after the takeover follow every number B's watcher had, tokens included.
        let resumed = watched.values().find(|e| e["event"] == "resumed").unwrap();
        let before: Vec<i64> = seen[run]
            .iter()
            .take_while(|e| e["event"] != "resumed")
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        assert!(
            resumed["data"]["afterSeq"].as_i64().unwrap() >= *before.iter().max().unwrap(),
            "{run}: {resumed} after {before:?}"
        );
        let r = http.get(format!("{}/api/deliberations/{run}", b.url)).send().await.unwrap();
        let view: Value = r.json().await.unwrap();
        assert_eq!(view["status"], "completed", "{view}");
    }
    assert!(log.contains("resumed after step"), "B resumed them:\n{log}");
    drop(b);
    crate::postgres::drop_database(&db);
    clean_redis(&prefix).await;
}
