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

fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

async fn metrics(app: &TestApp) -> String {
    app.http.get(format!("{}/metrics", app.base)).send().await.unwrap().text().await.unwrap()
}

#[actix_web::test]
async fn a_run_whose_writes_are_refused_for_a_while_completes_once_the_database_recovers() {
    let app =
        spawn_with(Options { sim_latency_ms: 100, sqlite_only: true, ..Options::default() }).await;
    let before = counter(&metrics(&app).await, "conclave_store_commit_failures_total");
    refuse_inserts(&app.database_url, "run_journal");
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": council_request("Does a full disk lose work?") }))
        .await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    // Nothing is published while the first step cannot be stored.
    // (The server's pings restart `next_within`'s wait: bound the whole read.)
    let wait = Duration::from_millis(1500);
    let early = tokio::time::timeout(wait, ws.next_within(wait)).await;
    assert!(!matches!(early, Ok(Some(_))), "no unstored event: {early:?}");
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
