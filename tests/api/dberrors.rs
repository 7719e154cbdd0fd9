//! Database errors: a database that refuses writes (a full disk, a lock held too long), then
//! recovers, and one that loses its connections mid-run. A run's step is retried until the
//! database takes it (nothing lost, nothing twice); a database that keeps refusing fails the
//! run with a clear error; a request that cannot be stored gets a 503 saying so; and the server
//! keeps serving throughout.

use std::collections::HashSet;
use std::time::Duration;

use diesel::{Connection, RunQueryDsl};
use serde_json::{json, Value};

use crate::helpers::*;

/// Runs one statement on the app's database from outside, as an operator (or a failing disk)
/// would. SQLite waits for the server's write lock.
fn sql(database_url: &str, statement: &str) {
    if database_url.starts_with("postgres") {
        let mut conn = diesel::pg::PgConnection::establish(database_url).expect("pg");
        diesel::sql_query(statement).execute(&mut conn).expect(statement);
    } else {
        let path = database_url.trim_start_matches("sqlite://");
        let mut conn = diesel::sqlite::SqliteConnection::establish(path).expect("sqlite");
        diesel::sql_query("PRAGMA busy_timeout = 10000").execute(&mut conn).expect("pragma");
        diesel::sql_query(statement).execute(&mut conn).expect(statement);
    }
}

/// Taken by the tests that make the database refuse a run's commits: the count of refused
/// commits (`conclave_store_commit_failures_total`) is the whole process's, and one test
/// waits for its own run's refusals in it.
static REFUSING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Makes SQLite refuse new rows of `table` with the message a full disk gives.
fn refuse_inserts(database_url: &str, table: &str) {
    sql(
        database_url,
        &format!(
            "CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} \
             BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END"
        ),
    );
}

fn accept_inserts(database_url: &str, table: &str) {
    sql(database_url, &format!("DROP TRIGGER refuse_{table}"));
}

/// The stored stage rows of a run's message, each once.
async fn assert_rows_once(app: &TestApp, message_id: &str) -> usize {
    let store = conclave::store::Store::start(&app.database_url).expect("store");
    let rows = store.get_stages(message_id).await.expect("stages");
    let mut seen = HashSet::new();
    for r in &rows {
        assert!(seen.insert(serde_json::to_string(&r.row).unwrap()), "stored twice: {:?}", r.row);
    }
    rows.len()
}

/// The events of `run` that `ws` gets until the count of refused commits reaches `refused`
/// (within a minute): what a watcher saw while the run's writes were being refused.
async fn events_while_refused(app: &TestApp, ws: &mut Ws, run: &str, refused: f64) -> Vec<Value> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while counter(&metrics(app).await, "conclave_store_commit_failures_total") < refused {
        assert!(tokio::time::Instant::now() < deadline, "the database refused too little");
        while let Some(v) = ws.next_within(Duration::from_millis(50)).await {
            if v["type"] == "event" && v["run"] == run {
                seen.push(v);
            }
        }
    }
    seen
}

#[actix_web::test]
async fn a_run_whose_writes_are_refused_for_a_while_completes_once_the_database_recovers() {
    let _turn = REFUSING.lock().await;
    let app =
        spawn_with(Options { sim_latency_ms: 100, sqlite_only: true, ..Options::default() }).await;
    let before = counter(&metrics(&app).await, "conclave_store_commit_failures_total");
    refuse_inserts(&app.database_url, "run_journal");
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": council_request("Does a full disk lose work?") }))
        .await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    // Nothing is published while the first step cannot be stored: read until it was refused
    // twice (not for a while).
    let early = events_while_refused(&app, &mut ws, &run, before + 2.0).await;
    assert!(early.is_empty(), "no unstored event: {early:?}");
    let (status, _) = app.get("/healthz").await;
    assert_eq!(status, 200, "the server keeps serving");
    accept_inserts(&app.database_url, "run_journal");
    let events = ws.events_until_end(&run).await;
    assert_eq!(events.last().unwrap()["event"], "complete");
    assert_contiguous(&events, 1);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["stage1"].as_array().unwrap().len(), 3);
    assert!(assert_rows_once(&app, stored["messageId"].as_str().unwrap()).await >= 7);
    let after = counter(&metrics(&app).await, "conclave_store_commit_failures_total");
    assert!(after > before, "the refused commits are counted ({before} → {after})");
    app.stop().await;
}

#[actix_web::test]
async fn a_database_that_keeps_refusing_fails_the_run_clearly_and_the_server_carries_on() {
    let _turn = REFUSING.lock().await;
    let app =
        spawn_with(Options { sim_latency_ms: 50, sqlite_only: true, ..Options::default() }).await;
    let started = app.start(council_request("What if the disk stays full?")).await;
    let run = started["runId"].as_str().unwrap().to_string();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    // Let the first stage through, then refuse every further row.
    ws.until("event", Some("stage1_complete")).await;
    refuse_inserts(&app.database_url, "deliberation_stages");
    let events = ws.events_until_end(&run).await;
    let end = events.last().unwrap();
    assert_eq!(end["event"], "error", "{end}");
    let message = end["data"]["message"].as_str().unwrap();
    assert!(message.contains("database refused the run's writes"), "{message}");
    assert!(message.contains("full"), "the database's own reason: {message}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed", "{stored}");
    assert!(stored["error"].as_str().unwrap().contains("database"), "{stored}");
    assert_eq!(stored["result"]["stage1"].as_array().unwrap().len(), 3, "stage 1 is kept");
    // Replaying the run shows what was watched, ending with the same error.
    let mut replay = app.ws().await;
    replay.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    let replayed = replay.events_until_end(&run).await;
    assert_eq!(replayed.last().unwrap()["data"], end["data"]);
    // Once the database takes writes again, so does the server.
    accept_inserts(&app.database_url, "deliberation_stages");
    let again = app.start(council_request("And now?")).await;
    let done = app.wait_done(again["runId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    app.stop().await;
}

#[actix_web::test]
async fn a_start_that_cannot_be_stored_is_answered_503_with_when_to_retry() {
    let app = spawn_with(Options { sqlite_only: true, ..Options::default() }).await;
    refuse_inserts(&app.database_url, "runs");
    let resp = app
        .http
        .post(format!("{}/api/deliberations", app.base))
        .json(&council_request("Stored?"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "2");
    let body: Value = resp.json().await.unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("database is unavailable") && error.contains("try again"), "{error}");
    // Over the WebSocket too, with the socket left open.
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "id": 7, "request": council_request("Stored?") })).await;
    let (err, _) = ws.until("error", None).await;
    assert_eq!(err["id"], 7);
    assert!(err["message"].as_str().unwrap().contains("database is unavailable"), "{err}");
    // Reads still work, and writes once the database takes them.
    let (status, _) = app.get("/api/deliberations").await;
    assert_eq!(status, 200);
    accept_inserts(&app.database_url, "runs");
    ws.send(json!({ "type": "start", "id": 8, "request": council_request("Stored now?") })).await;
    let (ok, _) = ws.until("started", None).await;
    assert_eq!(ok["id"], 8);
    app.stop().await;
}

#[actix_web::test]
async fn runs_survive_the_database_dropping_every_connection_on_postgresql() {
    let _turn = REFUSING.lock().await;
    let Some(url) = crate::postgres::fresh_database() else { return };
    let app = spawn_with(Options {
        database_url: Some(url.clone()),
        sim_latency_ms: 150,
        ..Options::default()
    })
    .await;
    let mut runs = Vec::new();
    for i in 0..3 {
        let started = app.start(council_request(&format!("Connection lost #{i}?"))).await;
        runs.push(started["runId"].as_str().unwrap().to_string());
    }
    // Cut every connection of the server a few times while the runs go on.
    let name = url.rsplit('/').next().unwrap().split('?').next().unwrap().to_string();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        sql(
            &url,
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            ),
        );
    }
    for run in &runs {
        let stored = app.wait_done(run).await;
        assert_eq!(stored["status"], "completed", "{stored}");
        assert_eq!(stored["result"]["stage2"].as_array().unwrap().len(), 3, "{stored}");
        assert!(assert_rows_once(&app, stored["messageId"].as_str().unwrap()).await >= 7);
    }
    app.stop().await;
    crate::postgres::drop_database(&url);
}

/// `/healthz` answers anyone: a failing database gets a generic body, never its own words.
#[actix_web::test]
async fn healthz_names_no_database_detail() {
    let app = spawn_with(Options { sqlite_only: true, ..Options::default() }).await;
    let anonymous = reqwest::Client::new();
    let health = |http: reqwest::Client| {
        let url = format!("{}/healthz", app.base);
        async move {
            let resp = http.get(url).send().await.unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    assert_eq!(health(anonymous.clone()).await.0, 200);
    // The table the check reads goes away: SQLite says "no such table: runs".
    sql(&app.database_url, "ALTER TABLE runs RENAME TO runs_elsewhere");
    let (status, body) = health(anonymous).await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v, json!({ "status": "degraded", "database": "unavailable" }), "{body}");
    assert!(!body.contains("runs") && !body.contains("table"), "{body}");
    sql(&app.database_url, "ALTER TABLE runs_elsewhere RENAME TO runs");
    assert_eq!(health(app.http.clone()).await.0, 200);
}

/// A small tmpfs mounted for one test and unmounted when dropped: a disk that really fills up.
struct SmallDisk {
    path: std::path::PathBuf,
}

impl SmallDisk {
    /// None, with the reason printed, where the sandbox does not allow `mount` (not root);
    /// with `CONCLAVE_REQUIRE_TMPFS=1` (set by `.ci/run` where it runs as root) that fails the
    /// test instead, so the disk-full test cannot be skipped unseen.
    fn mount(path: &std::path::Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(path).expect("mount point");
        let required = std::env::var("CONCLAVE_REQUIRE_TMPFS").is_ok_and(|v| v == "1");
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output();
        let why = match out {
            Ok(o) if o.status.success() => return Some(SmallDisk { path: path.to_path_buf() }),
            Ok(o) => format!("cannot mount a tmpfs: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => format!("cannot run mount: {e}"),
        };
        assert!(!required, "CONCLAVE_REQUIRE_TMPFS=1 but {why}");
        eprintln!("skipping: {why}");
        None
    }

    /// Fills the disk with one file, to its last byte; answers the file.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let file = self.path.join("filler");
        let mut f = std::fs::File::create(&file).expect("filler");
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).and_then(|()| f.flush()).is_ok() {}
        let _ = f.write_all(&[0]);
        file
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// The disk fills mid-run, past the commit retries and the first attempts at storing the
/// failure: watchers are told nothing terminal while the failure is not stored (they were,
/// and the run was later resumed and completed). Once space returns the failure is stored,
/// then sent, and what the watcher saw is exactly the record.
#[actix_web::test]
async fn a_failure_the_full_disk_refuses_is_not_shown_until_it_is_stored() {
    use conclave::engine::deliberation::COMMIT_RETRIES;
    let _turn = REFUSING.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), "8m") else { return };
    let url = format!("sqlite://{}", disk.path.join("test.db").display());
    let app =
        spawn_with(Options { database_url: Some(url), sim_latency_ms: 300, ..Options::default() })
            .await;
    let before = counter(&metrics(&app).await, "conclave_store_commit_failures_total");
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": council_request("Is the disk full?") })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    let filler = disk.fill();
    // The give-up, then two refused attempts at storing the failure.
    let refused = before + f64::from(COMMIT_RETRIES + 3);
    let mut live = events_while_refused(&app, &mut ws, &run, refused).await;
    for v in &live {
        let event = v["event"].as_str().unwrap_or("");
        assert!(
            !matches!(event, "error" | "complete" | "cancelled"),
            "{event} sent while the disk was full, so never stored: {v}"
        );
    }
    std::fs::remove_file(filler).unwrap();
    live.extend(ws.events_until_end(&run).await);
    let end = live.last().unwrap().clone();
    assert_eq!(end["event"], "error", "{end}");
    assert!(end["data"]["message"].as_str().unwrap().contains("full"), "{end}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed", "the record says what the watcher saw: {stored}");
    let mut replay = app.ws().await;
    replay.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
    // Token events take sequence numbers but are never stored; a replay the server still
    // holds in memory may carry them, one from the database never does. The rest must match.
    let replayed: Vec<Value> =
        replay.events_until_end(&run).await.into_iter().filter(|v| v["event"] != "token").collect();
    let durable: Vec<&Value> = live.iter().filter(|v| v["event"] != "token").collect();
    let key = |v: &Value| (v["seq"].clone(), v["event"].clone(), v["data"].clone());
    assert_eq!(
        durable.iter().map(|v| key(v)).collect::<Vec<_>>(),
        replayed.iter().map(key).collect::<Vec<_>>(),
        "every event the watcher saw is stored, and nothing else"
    );
    app.stop().await;
}

/// A run whose lease ran out while its actor here still executes it (the database refused the
/// renewals: a full disk) is not taken over as if its process had died: it would run twice,
/// and watchers would see two histories. Here the lease is made to lapse by hand (owned by an
/// instance that is gone, expired long ago) while heartbeats pass.
#[actix_web::test]
async fn a_run_still_executing_here_is_not_taken_over_when_its_lease_lapses() {
    let _turn = REFUSING.lock().await;
    let app = spawn_with(Options {
        sim_latency_ms: 400,
        lease: Duration::from_millis(300),
        ..Options::default()
    })
    .await;
    let resumed = counter(&metrics(&app).await, "conclave_runs_resumed_total");
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": council_request("Is a lapsed lease an orphan?") }))
        .await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    sql(
        &app.database_url,
        &format!(
            "UPDATE runs SET lease_owner = 'gone', lease_until = {} WHERE id = '{run}'",
            lapsed(&app)
        ),
    );
    let events = ws.events_until_end(&run).await;
    assert_eq!(events.last().unwrap()["event"], "complete");
    assert_contiguous(&events, 1);
    let starts = events.iter().filter(|e| e["event"] == "stage1_start").count();
    assert_eq!(starts, 1, "the run ran once");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(counter(&metrics(&app).await, "conclave_runs_resumed_total"), resumed);
    assert!(assert_rows_once(&app, stored["messageId"].as_str().unwrap()).await >= 7);
    app.stop().await;
}

/// A lease time long past, as the database stores times.
fn lapsed(app: &TestApp) -> &'static str {
    if app.database_url.starts_with("postgres") {
        "'1970-01-01 00:00:01+00'"
    } else {
        "1000"
    }
}

/// A TCP proxy to PostgreSQL that the test can take away (threads of its own, so a server
/// started while the test's runtime waits still reaches it): until [`PgProxy::close`], the
/// server's database is reached through it; after, its port is closed and every connection
/// through it cut, as when PostgreSQL stops.
struct PgProxy {
    port: u16,
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    streams: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

/// The `host:port` of a PostgreSQL URL.
fn authority(url: &str) -> &str {
    url.split('@').nth(1).and_then(|r| r.split('/').next()).expect("a host")
}

impl PgProxy {
    fn to(url: &str) -> PgProxy {
        use std::sync::atomic::Ordering;
        let upstream = authority(url).to_string();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = PgProxy { port, closed: Default::default(), streams: Default::default() };
        let (closed, streams) = (proxy.closed.clone(), proxy.streams.clone());
        std::thread::spawn(move || {
            while !closed.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let Ok(server) = std::net::TcpStream::connect(&upstream) else { continue };
                client.set_nonblocking(false).unwrap();
                let mut held = streams.lock().unwrap();
                for (mut from, mut to) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    held.extend([from.try_clone().unwrap(), to.try_clone().unwrap()]);
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        proxy
    }

    /// `url` reached through the proxy.
    fn url(&self, url: &str) -> String {
        url.replacen(authority(url), &format!("127.0.0.1:{}", self.port), 1)
    }

    fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        // The listener goes with its thread's next turn.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// PostgreSQL stops answering (its port closed): a request that needs it is answered 503 in
/// seconds, not after r2d2's default half-minute, and the log says what happened (the refused
/// connection), not "Invalid connection url for multiconnection".
#[actix_web::test]
async fn an_unreachable_postgresql_is_answered_503_in_seconds_and_logged_as_it_is() {
    let Some(url) = crate::postgres::fresh_database() else { return };
    conclave::providers::openai::install_crypto();
    let proxy = PgProxy::to(&url);
    let through = proxy.url(&url);
    let dir = tempfile::tempdir().unwrap();
    let token = crate::cli::add_user(&through, "ops", true);
    let server = ServerProcess::start(dir.path(), &through, "pg");
    let http = client_with(&token);
    let get = |path: &str| {
        let req = http.get(format!("{}{path}", server.url));
        async move {
            let started = std::time::Instant::now();
            let status = req.send().await.unwrap().status().as_u16();
            (status, started.elapsed())
        }
    };
    assert_eq!(get("/api/me").await.0, 200);
    assert_eq!(get("/healthz").await.0, 200);
    proxy.close();
    for path in ["/api/me", "/healthz", "/api/conversations"] {
        let (status, took) = get(path).await;
        assert_eq!(status, 503, "{path}");
        assert!(took < Duration::from_secs(8), "{path} took {took:?}");
    }
    drop(server);
    let log = std::fs::read_to_string(dir.path().join("pg.log")).unwrap();
    assert!(log.contains("Connection refused"), "the cause is logged:\n{log}");
    assert!(!log.contains("multiconnection"), "{log}");
    crate::postgres::drop_database(&url);
}
