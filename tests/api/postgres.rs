//! PostgreSQL: the behaviours that touch SQL, each in a fresh database per test, and where a
//! check also runs on SQLite, both backends must answer alike. Covers every mode's run and
//! reload, the lists and search, the review queue, users and tokens, leases (a claim is
//! exclusive), timestamps to the millisecond, NUL characters in text and JSON, the native
//! column types, and a database made by the migrations both backends used to share, which the
//! first start converts to the same schema as a fresh one. (Crash recovery, database errors
//! and the metrics have their PostgreSQL cases in crash.rs, dberrors.rs and metrics.rs.)
//!
//! Skipped (with a printed reason) when no server answers at CONCLAVE_TEST_PG (default
//! postgres://postgres@127.0.0.1:5432/test); `.ci/run` sets CONCLAVE_REQUIRE_PG=1 so CI fails
//! instead of skipping.

use std::collections::BTreeSet;
use std::sync::Arc;

use conclave::modes::StageRow;
use conclave::store::{
    now_ms, Commit, JournalRecord, NewRun, ReviewStatus, RunFinish, Store, StoreError, StoredEvent,
    TokenKind,
};
use conclave::web::auth::{hash_token, new_token};
use diesel::connection::SimpleConnection;
use diesel::{Connection, RunQueryDsl};
use serde_json::{json, Value};

use crate::helpers::*;

fn admin_url() -> String {
    plain(
        std::env::var("CONCLAVE_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
    )
}

/// The suite connects without TLS (unless the URL says otherwise), as it did before libpq was
/// built with it: the local server offers TLS (Debian's turns it on) and libpq's default,
/// `prefer`, would take it, adding handshakes and encryption to every test's connections under
/// the timings they check. `tls.rs` tests TLS itself.
fn plain(url: String) -> String {
    match (url.contains("sslmode="), url.contains('?')) {
        (true, _) => url,
        (false, true) => format!("{url}&sslmode=disable"),
        (false, false) => format!("{url}?sslmode=disable"),
    }
}

/// Creates a fresh database and returns its URL, or None when PostgreSQL is not reachable.
pub(crate) fn fresh_database() -> Option<String> {
    let name = format!("conclave_test_{}", uuid::Uuid::new_v4().simple());
    database_named(&admin_url(), &name, std::env::var("CONCLAVE_REQUIRE_PG").is_ok())
}

/// Creates database `name` beside `admin`'s and returns its URL. Whatever stops it (no server,
/// a refused `CREATE DATABASE`, a URL without a database) is a skip with the reason printed, or,
/// when PostgreSQL is `required`, a failure: a test that cannot have its database never passes
/// where PostgreSQL is required.
fn database_named(admin: &str, name: &str, required: bool) -> Option<String> {
    let unavailable = |reason: String| -> Option<String> {
        assert!(!required, "PostgreSQL is required (CONCLAVE_REQUIRE_PG) but {reason}");
        eprintln!("skipping PostgreSQL test: {reason}");
        None
    };
    let mut conn = match diesel::pg::PgConnection::establish(admin) {
        Ok(c) => c,
        Err(e) => return unavailable(format!("cannot connect to {admin}: {e}")),
    };
    if let Err(e) = diesel::sql_query(format!("CREATE DATABASE {name}")).execute(&mut conn) {
        return unavailable(format!("cannot create database {name} on {admin}: {e}"));
    }
    match admin.rsplit_once('/') {
        Some((base, _)) => Some(plain(format!("{base}/{name}"))),
        None => unavailable(format!("{admin} names no database")),
    }
}

/// Where PostgreSQL is required, a database the helper cannot create fails the test (it
/// passed silently before: `CREATE DATABASE` refused was a skip). The database's second
/// creation is refused ("already exists"), deterministically.
#[test]
fn a_database_that_cannot_be_created_fails_where_postgresql_is_required() {
    let name = format!("conclave_test_{}", uuid::Uuid::new_v4().simple());
    let required = std::env::var("CONCLAVE_REQUIRE_PG").is_ok();
    let Some(url) = database_named(&admin_url(), &name, required) else { return };
    let _db = TempDb(url);
    assert_eq!(database_named(&admin_url(), &name, false), None, "not required: a skip");
    let again = std::panic::catch_unwind(|| database_named(&admin_url(), &name, true));
    let message = again.expect_err("required: a failure");
    let text = message.downcast_ref::<String>().map_or("", String::as_str);
    assert!(
        text.contains("cannot create database") && text.contains("CONCLAVE_REQUIRE_PG"),
        "{text}"
    );
    assert!(
        std::panic::catch_unwind(|| database_named("postgres://nobody@127.0.0.1:1/x", "x", true))
            .is_err(),
        "required, and no server: a failure"
    );
}

/// Removes a test database (FORCE closes the pool's connections).
pub(crate) fn drop_database(url: &str) {
    let Some((_, name)) = url.rsplit_once('/') else { return };
    let name = name.split('?').next().unwrap_or(name);
    if let Ok(mut conn) = diesel::pg::PgConnection::establish(&admin_url()) {
        let _ = diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn);
    }
}

/// A fresh PostgreSQL database, dropped when the test ends, whether it passed or not.
struct TempDb(String);

impl TempDb {
    fn new() -> Option<TempDb> {
        fresh_database().map(TempDb)
    }

    fn url(&self) -> &str {
        &self.0
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        drop_database(&self.0);
    }
}

/// A SQLite database in a temporary directory (kept while the directory lives).
fn sqlite_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("test.db").display());
    (dir, url)
}

async fn app_on(url: &str) -> TestApp {
    spawn_with(Options { database_url: Some(url.to_string()), ..Options::default() }).await
}

#[actix_web::test]
async fn council_runs_and_reloads_on_postgresql() {
    let Some(url) = fresh_database() else { return };
    let app = spawn_with(Options { database_url: Some(url), ..Options::default() }).await;
    assert!(app.database_url.starts_with("postgres://"));
    let started = app.start(council_request("Does PostgreSQL work too?")).await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["stage1"].as_array().unwrap().len(), 3);
    assert_eq!(run["result"]["stage2Metadata"]["labelToModel"].as_object().unwrap().len(), 3);
    assert!(run["result"]["title"].is_string());
    let conv = started["conversationId"].as_str().unwrap();
    let follow =
        app.start(serde_json::json!({ "question": "Follow-up?", "conversationId": conv })).await;
    let run2 = app.wait_done(follow["runId"].as_str().unwrap()).await;
    assert_eq!(run2["status"], "completed", "{run2}");
    let url =
        format!("{}/api/deliberations/{}/events", app.base, started["runId"].as_str().unwrap());
    let text = app.http.get(url).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("event: complete"));
    let url = app.database_url.clone();
    app.stop().await;
    drop_database(&url);
}

#[actix_web::test]
async fn recent_runs_and_title_search_on_postgresql() {
    let Some(url) = fresh_database() else { return };
    let app = spawn_with(Options { database_url: Some(url), ..Options::default() }).await;
    crate::lists::check_recent_runs_list(&app).await;
    crate::lists::check_conversation_search(&app).await;
    let url = app.database_url.clone();
    app.stop().await;
    drop_database(&url);
}

// --- Every mode, live and reloaded ---------------------------------------------------------------

/// One request of each mode, with panels of sim models.
fn every_mode() -> Vec<Value> {
    let panel = json!(["sim/alpha", "sim/beta", "sim/gamma"]);
    vec![
        council_request("Is PostgreSQL's jsonb faithful?"),
        json!({ "mode": "vote", "question": "Which database for a small team?",
                "modeConfig": { "models": panel, "chairmanModel": "sim/delta" } }),
        json!({ "mode": "jury", "question": "Evaluate this API documentation",
                "modeConfig": { "content": "## GET /api/users\nReturns users.",
                                "originalQuestion": "Document the users endpoint",
                                "jurorModels": panel, "foremanModel": "sim/delta" } }),
        json!({ "mode": "debate", "question": "Should companies adopt a 4-day work week?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"] } }),
        json!({ "mode": "delphi", "question": "How many engineers will there be by 2030?",
                "modeConfig": { "panelistModels": panel, "facilitatorModel": "sim/delta",
                                "maxRounds": 3 } }),
        json!({ "mode": "clarity", "modeConfig": { "content":
                "# The four-day week\n\nTrials reported stable productivity and lower burnout." } }),
    ]
}

/// The `data` of the first event named `name`.
fn payload<'a>(events: &'a [Value], name: &str) -> &'a Value {
    let e = events.iter().find(|e| e["event"] == name);
    &e.unwrap_or_else(|| panic!("no {name} event"))["data"]
}

/// What a mode's stored result (rebuilt from its stage rows) must share with the payloads of
/// the events that went out live.
fn check_result_matches_events(mode: &str, r: &Value, events: &[Value]) {
    let d = |name: &str| payload(events, name)["data"].clone();
    match mode {
        "council" => {
            assert_eq!(r["stage1"], d("stage1_complete"));
            assert_eq!(r["stage2"], d("stage2_complete"));
            assert_eq!(r["stage2Metadata"], payload(events, "stage2_complete")["metadata"]);
            assert_eq!(r["stage3"], d("stage3_complete"));
        }
        "vote" => {
            assert_eq!(r["stage1"], d("stage1_complete"));
            assert_eq!(r["voteRound"], d("vote_round_complete"));
            assert_eq!(r["winner"], d("winner_declared"));
        }
        "jury" => {
            assert_eq!(r["jurorSummary"], d("all_jurors_complete"));
            assert_eq!(r["foreman"], d("verdict_complete"));
            let live: Vec<Value> = events
                .iter()
                .filter(|e| e["event"] == "juror_complete")
                .map(|e| e["data"]["data"].clone())
                .collect();
            assert_eq!(r["jurors"], Value::Array(live));
        }
        "debate" => {
            assert_eq!(r["round1LabelMap"], d("revision_start")["labelMap"]);
            assert_eq!(r["revisedLabelMap"], d("vote_start")["revisedLabelMap"]);
            assert_eq!(r["revisions"], d("revision_complete")["revisions"]);
            assert_eq!(r["votes"], d("vote_complete"));
            assert_eq!(r["winner"], d("winner_declared"));
        }
        "delphi" => {
            assert_eq!(r["classification"], d("classify_complete"));
            assert_eq!(r["report"], d("synthesis_complete"));
            let rounds: Vec<&Value> =
                events.iter().filter(|e| e["event"] == "round_complete").collect();
            assert_eq!(r["rounds"].as_array().unwrap().len(), rounds.len());
            for (i, live) in rounds.iter().enumerate() {
                assert_eq!(r["rounds"][i]["stats"], live["data"]["data"]["stats"]);
                assert_eq!(r["rounds"][i]["converged"], live["data"]["data"]["converged"]);
            }
        }
        "clarity" => {
            assert_eq!(r["score"], d("score_complete"));
            assert_eq!(r["evaluations"].as_array().unwrap().len(), 3);
        }
        other => panic!("unknown mode {other}"),
    }
}

/// Runs each mode over the WebSocket and checks that: it completes; the events stored in the
/// database (read by a store of the test's own) are exactly the events that went out live,
/// token deltas aside, which are never stored; so is a watcher's replay; its stored result
/// agrees with those events; and reading it again, through the run or its conversation, gives
/// the same.
async fn check_every_mode(app: &TestApp) {
    let store = Store::start(&app.database_url).expect("store");
    for request in every_mode() {
        let mode = request["mode"].as_str().unwrap().to_string();
        let mut ws = app.ws().await;
        ws.send(json!({ "type": "start", "request": request })).await;
        let (started, _) = ws.until("started", None).await;
        let run = started["runId"].as_str().unwrap().to_string();
        let live = ws.events_until_end(&run).await;
        ws.close().await;
        assert_contiguous(&live, 1);
        let stored = app.wait_done(&run).await;
        assert_eq!(stored["status"], "completed", "{mode}: {stored}");

        let live_stored: Vec<&Value> = live.iter().filter(|e| e["event"] != "token").collect();
        let in_db: Vec<Value> = store
            .events_since(&run, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| json!({ "seq": e.seq, "event": e.event, "data": e.data }))
            .collect();
        let sent: Vec<Value> = live_stored
            .iter()
            .map(|e| json!({ "seq": e["seq"], "event": e["event"], "data": e["data"] }))
            .collect();
        assert_eq!(in_db, sent, "{mode}: the stored events are what went out live");
        let mut ws = app.ws().await;
        ws.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
        let replayed = ws.events_until_end(&run).await;
        ws.close().await;
        let replayed: Vec<&Value> = replayed.iter().filter(|e| e["event"] != "token").collect();
        assert_eq!(replayed, live_stored, "{mode}: a replay is what went out live");

        check_result_matches_events(&mode, &stored["result"], &live);
        assert_eq!(stored["request"]["mode"].as_str().unwrap_or("council"), mode);
        assert!(stored["answer"].as_str().is_some_and(|a| !a.is_empty()), "{mode}: an answer");
        assert!(stored["finishedAt"].as_i64().unwrap() >= stored["createdAt"].as_i64().unwrap());
        assert_eq!(stored["lastSeq"], live.last().unwrap()["seq"], "{mode}");
        let (_, again) = app.get(&format!("/api/deliberations/{run}")).await;
        assert_eq!(again, stored, "{mode}: read twice, the same");
        let conv_id = stored["conversationId"].as_str().unwrap();
        let (_, conv) = app.get(&format!("/api/conversations/{conv_id}")).await;
        assert_eq!(conv["messages"][1]["content"], stored["answer"], "{mode}");
        assert_eq!(conv["runs"][0]["createdAt"], stored["createdAt"], "{mode}");
        assert_eq!(conv["runs"][0]["finishedAt"], stored["finishedAt"], "{mode}");
        let detail = store.get_conversation(conv_id).await.unwrap().unwrap();
        assert_eq!(detail.runs[0].request, stored["request"], "{mode}");
    }
}

#[actix_web::test]
async fn every_mode_completes_and_reloads_identically_on_postgresql() {
    let Some(db) = TempDb::new() else { return };
    let app = app_on(db.url()).await;
    check_every_mode(&app).await;
    app.stop().await;
}

#[actix_web::test]
async fn every_mode_completes_and_reloads_identically_on_sqlite() {
    let app = spawn_app().await;
    check_every_mode(&app).await;
    app.stop().await;
}

// --- The review queue ----------------------------------------------------------------------------

#[actix_web::test]
async fn flagged_runs_reach_the_review_queue_on_postgresql() {
    let Some(db) = TempDb::new() else { return };
    let app = app_on(db.url()).await;
    // Run briefs until one needs the Arbiter (the sim's skeptic disputes about half of them).
    let mut flagged = None;
    for i in 0..16 {
        let started = app
            .start(json!({ "mode": "clarity", "modeConfig": {
                "content": format!("# Brief {i}\n\nTrials reported stable productivity.") } }))
            .await;
        let run = app.wait_done(started["runId"].as_str().unwrap()).await;
        assert_eq!(run["status"], "completed", "{run}");
        if run["review"]["needsHumanReview"] == true {
            flagged = Some(started["runId"].as_str().unwrap().to_string());
            break;
        }
    }
    let flagged = flagged.expect("some brief needed the Arbiter");
    let (_, pending) = app.get("/api/reviews?status=pending").await;
    let entry = pending["reviews"].as_array().unwrap().iter().find(|r| r["runId"] == *flagged);
    assert!(entry.unwrap()["reason"].as_str().unwrap().contains("Arbiter"), "{pending}");
    let before = now_ms();
    let (status, marked) =
        app.post(&format!("/api/reviews/{flagged}"), &json!({ "note": "Checked." })).await;
    assert_eq!(status, 200, "{marked}");
    let reviewed_at = marked["reviewedAt"].as_i64().unwrap();
    assert!((before..=now_ms()).contains(&reviewed_at), "{reviewed_at}");
    let (_, pending) = app.get("/api/reviews?status=pending").await;
    assert!(pending["reviews"].as_array().unwrap().iter().all(|r| r["runId"] != *flagged));
    let (_, reviewed) = app.get("/api/reviews?status=reviewed").await;
    assert_eq!(reviewed["reviews"][0]["runId"], *flagged);
    assert_eq!(reviewed["reviews"][0]["note"], "Checked.");
    let (_, all) = app.get("/api/reviews?status=all").await;
    assert!(all["reviews"].as_array().unwrap().iter().any(|r| r["runId"] == *flagged));
    let (_, run) = app.get(&format!("/api/deliberations/{flagged}")).await;
    assert_eq!(run["review"]["reviewedAt"], reviewed_at, "milliseconds, as stored");
    app.stop().await;
}

// --- Users and tokens ----------------------------------------------------------------------------

async fn check_users_and_tokens(app: &TestApp) {
    let store = Store::start(&app.database_url).expect("store");
    let before = now_ms();
    let token = new_token();
    let ann = store.create_user("ann", false, hash_token(&token), TokenKind::Api, None).await;
    let ann = ann.unwrap();
    assert!((before..=now_ms()).contains(&ann.created_at));
    let again = store.create_user("ann", true, hash_token(&new_token()), TokenKind::Api, None);
    assert!(matches!(again.await, Err(StoreError::Conflict(_))), "a name is taken once");

    let ann_client = client_with(&token);
    let me = ann_client.get(format!("{}/api/me", app.base)).send().await.unwrap();
    assert_eq!(me.status().as_u16(), 200);
    assert_eq!(me.json::<Value>().await.unwrap()["name"], "ann");

    let auth = |hash: String, kinds: Vec<TokenKind>| store.authenticate(hash, kinds);
    let found = auth(hash_token(&token), vec![TokenKind::Api]).await.unwrap();
    assert_eq!(found.map(|(u, k)| (u.name, k)), Some(("ann".into(), TokenKind::Api)));
    assert!(auth(hash_token(&token), vec![TokenKind::Session]).await.unwrap().is_none());

    // A login link works once; an expired session never; a live one until revoked.
    let link = new_token();
    let later = now_ms() + 60_000;
    store
        .create_user("bob", false, hash_token(&link), TokenKind::Login, Some(later))
        .await
        .unwrap();
    assert!(auth(hash_token(&link), vec![TokenKind::Login]).await.unwrap().is_some());
    assert!(auth(hash_token(&link), vec![TokenKind::Login]).await.unwrap().is_none(), "once");
    let expired = new_token();
    let past = Some(now_ms() - 1);
    assert!(store.add_token("ann", hash_token(&expired), TokenKind::Session, past).await.unwrap());
    assert!(auth(hash_token(&expired), vec![TokenKind::Session]).await.unwrap().is_none());
    let session = new_token();
    assert!(store
        .add_token("ann", hash_token(&session), TokenKind::Session, Some(later))
        .await
        .unwrap());
    assert!(auth(hash_token(&session), vec![TokenKind::Session]).await.unwrap().is_some());
    store.revoke_token(hash_token(&session)).await.unwrap();
    assert!(auth(hash_token(&session), vec![TokenKind::Session]).await.unwrap().is_none());

    // Revoking a user ends every token of theirs; the name stays taken.
    let before = now_ms();
    assert!(store.revoke_user("ann").await.unwrap());
    assert!(!store.revoke_user("ann").await.unwrap(), "already revoked");
    assert!(auth(hash_token(&token), vec![TokenKind::Api]).await.unwrap().is_none());
    let me = ann_client.get(format!("{}/api/me", app.base)).send().await.unwrap();
    assert_eq!(me.status().as_u16(), 401);
    assert!(!store.add_token("ann", hash_token(&new_token()), TokenKind::Api, None).await.unwrap());
    let users = store.list_users().await.unwrap();
    let mut names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["ann", "bob", "tester"]);
    let user = |name: &str| users.iter().find(|u| u.name == name).unwrap().clone();
    let revoked_at = user("ann").revoked_at.expect("ann is revoked");
    assert!((before..=now_ms()).contains(&revoked_at));
    assert!(user("bob").revoked_at.is_none());
}

#[actix_web::test]
async fn users_and_tokens_on_postgresql() {
    let Some(db) = TempDb::new() else { return };
    let app = app_on(db.url()).await;
    check_users_and_tokens(&app).await;
    app.stop().await;
}

#[actix_web::test]
async fn users_and_tokens_on_sqlite() {
    let app = spawn_app().await;
    check_users_and_tokens(&app).await;
    app.stop().await;
}

// --- Runs written straight through the store -------------------------------------------------------

fn new_run(id: &str, created_at: i64, lease: Option<(&str, i64)>) -> NewRun {
    NewRun {
        run_id: id.to_string(),
        conversation_id: format!("c-{id}"),
        new_conversation: true,
        user_message_id: format!("u-{id}"),
        message_id: format!("m-{id}"),
        mode: "council".into(),
        question: format!("Question {id}?"),
        request: json!({ "mode": "council", "question": format!("Question {id}?") }),
        owner: Some("tester".into()),
        visibility: conclave::store::Visibility::Team,
        created_at,
        lease: lease.map(|(owner, until)| (owner.to_string(), until)),
        eval_id: None,
        attachments: Vec::new(),
    }
}

fn commit_for(id: &str) -> Commit {
    Commit {
        run_id: id.to_string(),
        message_id: format!("m-{id}"),
        conversation_id: format!("c-{id}"),
        ..Commit::default()
    }
}

/// Two stores (each with its own pool and writer, like two server processes) try to take over
/// each of many runs whose lease ran out, at the same moment: exactly one gets each.
async fn check_claims_are_exclusive(url: &str) {
    let a = Store::start(url).expect("store a");
    let b = Store::start(url).expect("store b");
    let now = now_ms();
    let ids: Vec<String> = (0..24).map(|i| format!("lease-{i}")).collect();
    let (mut won_a, mut won_b) = (0, 0);
    for id in &ids {
        a.create_run(new_run(id, now, Some(("dead", now - 1)))).await.unwrap();
        let until = now + 60_000;
        let (x, y) =
            tokio::join!(a.claim_run(id, "a", now, until), b.claim_run(id, "b", now, until));
        let (x, y) = (x.unwrap(), y.unwrap());
        assert!(x != y, "{id}: exactly one claim wins (a: {x}, b: {y})");
        if x {
            won_a += 1;
        } else {
            won_b += 1;
        }
        assert!(!a.claim_run(id, "a", now + 1, until).await.unwrap(), "the lease is held now");
        assert!(!b.claim_run(id, "b", now + 1, until).await.unwrap(), "the lease is held now");
    }
    eprintln!("claims won: a {won_a}, b {won_b}");
    assert!(a.expired_runs(now).await.unwrap().is_empty(), "every lease is held");
    // Each winner's heartbeat renews exactly its own runs.
    let renewed_a = a.renew_leases("a", now + 120_000).await.unwrap();
    let renewed_b = b.renew_leases("b", now + 120_000).await.unwrap();
    assert_eq!((renewed_a, renewed_b), (won_a, won_b));
    // When the leases run out, the scan lists every run again, oldest first.
    assert!(a.expired_runs(now + 120_000).await.unwrap().is_empty(), "not before it is over");
    let mut expired = a.expired_runs(now + 120_001).await.unwrap();
    expired.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(expired, expected);
}

#[actix_web::test]
async fn a_run_whose_lease_ran_out_is_claimed_by_exactly_one_of_two_stores_on_postgresql() {
    let Some(db) = TempDb::new() else { return };
    check_claims_are_exclusive(db.url()).await;
}

#[actix_web::test]
async fn a_run_whose_lease_ran_out_is_claimed_by_exactly_one_of_two_stores_on_sqlite() {
    let (_dir, url) = sqlite_db();
    check_claims_are_exclusive(&url).await;
}

/// Times before the epoch, around 2000-01-01 (PostgreSQL's own epoch), now, and in year 9999.
const TIMES: [i64; 10] = [
    -946_684_800_001,
    -1,
    0,
    1,
    946_684_799_999,
    946_684_800_000,
    946_684_800_001,
    1_764_000_000_123,
    1_764_000_000_124,
    253_402_300_799_999,
];

/// Every time column keeps its milliseconds exactly, compares to the millisecond, and orders
/// by time; answers what was read back, for comparing backends.
async fn check_timestamps(url: &str) -> Vec<Value> {
    let store = Store::start(url).expect("store");
    let mut read = Vec::new();
    for (i, &t) in TIMES.iter().enumerate() {
        let id = format!("t{i}");
        store.create_run(new_run(&id, t, Some(("p", t + 5)))).await.unwrap();
        let run = store.get_run(&id).await.unwrap().unwrap();
        assert_eq!(run.created_at, t);
        let conv = store.get_conversation(&format!("c-{id}")).await.unwrap().unwrap();
        assert_eq!((conv.conversation.created_at, conv.conversation.updated_at), (t, t));
        assert!(conv.messages.iter().all(|m| m.created_at == t));
        // A lease is over only once `now` is past it, to the millisecond.
        assert!(!store.claim_run(&id, "q", t + 5, t + 10).await.unwrap(), "{t}: not yet");
        assert!(store.claim_run(&id, "q", t + 6, t + 10).await.unwrap(), "{t}: over");
        let finish = RunFinish {
            run_id: id.clone(),
            message_id: format!("m-{id}"),
            status: conclave::store::RunStatus::Completed,
            error: None,
            answer: Some("done".into()),
            prompt_tokens: 1,
            completion_tokens: 2,
            cost: None,
            finished_at: t + 3,
            outcome: Some(format!("outcome of {id}")),
        };
        let mut c = commit_for(&id);
        c.finish = Some(finish);
        store.commit(Arc::new(c)).await.unwrap();
        let run = store.get_run(&id).await.unwrap().unwrap();
        assert_eq!((run.created_at, run.finished_at), (t, Some(t + 3)));
        assert_eq!(run.outcome, Some(format!("outcome of {id}")), "stored with the end");
        read.push(json!([run.created_at, run.finished_at]));
    }
    // Newest first.
    let listed: Vec<i64> =
        store.list_runs(100).await.unwrap().iter().map(|r| r.created_at).collect();
    let mut expected = TIMES.to_vec();
    expected.reverse();
    assert_eq!(listed, expected);
    // Times the store takes itself (`now`) are milliseconds of the moment.
    let before = now_ms();
    let mut c = commit_for("t0");
    c.stages.push((0, StageRow::computed("note", 1, json!({ "n": 1 }))));
    c.flag = Some("check the clock".into());
    store.commit(Arc::new(c)).await.unwrap();
    let reviewed = store.mark_reviewed("t0", "ok").await.unwrap().unwrap();
    let after = now_ms();
    assert!((before..=after).contains(&reviewed.reviewed_at.unwrap()));
    let stages = store.get_stages("m-t0").await.unwrap();
    assert!((before..=after).contains(&stages[0].created_at));
    read
}

#[actix_web::test]
async fn timestamps_round_trip_to_the_millisecond_on_both_backends() {
    let (_dir, sqlite) = sqlite_db();
    let on_sqlite = check_timestamps(&sqlite).await;
    let Some(db) = TempDb::new() else { return };
    let on_postgres = check_timestamps(db.url()).await;
    assert_eq!(on_postgres, on_sqlite);
}

/// Stores text and JSON with NUL characters (which PostgreSQL's `text` and `jsonb` refuse) in
/// every kind of place, and answers everything as it reads back.
async fn store_nul_characters(url: &str) -> Value {
    let store = Store::start(url).expect("store");
    let mut run = new_run("nul", 1_764_000_000_000, None);
    run.question = "What is \0?".into();
    run.request = json!({ "question": "What is \0?", "k\0": ["\0", "\\u0000 is text"] });
    store.create_run(run).await.unwrap();
    let mut c = commit_for("nul");
    c.journal = vec![
        JournalRecord { step: 1, kind: "start".into(), call_key: None, data: json!({ "q": "\0" }) },
        JournalRecord {
            step: 2,
            kind: "reply".into(),
            call_key: Some("stage1:0".into()),
            data: json!({ "text": "a \0 in a reply", "big": 1e16, "small": 0.1, "zero": -0.0,
                          "nested": { "\0key": ["x\0y", 1, null, true] } }),
        },
    ];
    c.stages = vec![(
        0,
        StageRow {
            stage_type: "stage1".into(),
            stage_order: 1,
            model: Some("sim/alpha".into()),
            role: None,
            content: "an answer with \0 in it".into(),
            parsed_data: Some(json!({ "response": "an answer with \0 in it",
                                      "literal": "\\u0000", "both": "\\\0" })),
            response_time_ms: Some(12),
        },
    )];
    c.events = vec![StoredEvent {
        seq: 1,
        event: "stage1_complete".into(),
        data: json!({ "type": "stage1_complete", "data": [{ "response": "\0" }] }),
    }];
    c.title = Some("A title with \0".into());
    store.commit(Arc::new(c)).await.unwrap();

    let journal = store.journal("nul").await.unwrap();
    let stages = store.get_stages("m-nul").await.unwrap();
    let events = store.events_since("nul", 0).await.unwrap();
    let run = store.get_run("nul").await.unwrap().unwrap();
    let conv = store.get_conversation("c-nul").await.unwrap().unwrap();
    json!({
        "journal": journal.iter().map(|j| json!([j.step, j.kind, j.call_key, j.data])).collect::<Vec<_>>(),
        "content": stages[0].row.content,
        "parsed": stages[0].row.parsed_data,
        "events": events,
        "request": run.request,
        "question": conv.messages[0].content,
        "title": conv.conversation.title,
    })
}

#[actix_web::test]
async fn nul_characters_in_text_and_json_store_and_read_back_alike_on_both_backends() {
    let (_dir, sqlite) = sqlite_db();
    let on_sqlite = store_nul_characters(&sqlite).await;
    let r = "\u{FFFD}";
    let expected = json!({
        "journal": [
            [1, "start", null, { "q": r }],
            [2, "reply", "stage1:0", { "text": format!("a {r} in a reply"),
                                       "big": 10_000_000_000_000_000u64, "small": 0.1, "zero": 0.0,
                                       "nested": { format!("{r}key"): [format!("x{r}y"), 1, null, true] } }],
        ],
        "content": format!("an answer with {r} in it"),
        "parsed": { "response": format!("an answer with {r} in it"),
                    "literal": "\\u0000", "both": format!("\\{r}") },
        "events": [{ "seq": 1, "event": "stage1_complete",
                     "data": { "type": "stage1_complete", "data": [{ "response": r }] } }],
        "request": { "question": format!("What is {r}?"), format!("k{r}"): [r, "\\u0000 is text"] },
        "question": format!("What is {r}?"),
        "title": format!("A title with {r}"),
    });
    assert_eq!(on_sqlite, expected);
    assert_eq!(on_sqlite.to_string(), expected.to_string(), "to the letter");
    let Some(db) = TempDb::new() else { return };
    let on_postgres = store_nul_characters(db.url()).await;
    // Every text alike, to the letter; the order of keys in stored JSON is PostgreSQL's own
    // (jsonb sorts them), which JSON does not give a meaning to.
    assert_eq!(on_postgres, on_sqlite);
}

// --- The schema ----------------------------------------------------------------------------------

#[derive(diesel::QueryableByName, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Column {
    #[diesel(sql_type = diesel::sql_types::Text)]
    table_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    column_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    data_type: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    is_nullable: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    column_default: Option<String>,
}

#[derive(diesel::QueryableByName, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Index {
    #[diesel(sql_type = diesel::sql_types::Text)]
    indexname: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    indexdef: String,
}

/// A database's columns and indexes (the migrations table's rows aside).
fn schema_of(url: &str) -> (Vec<Column>, Vec<Index>) {
    let mut conn = diesel::pg::PgConnection::establish(url).expect("pg");
    let columns = diesel::sql_query(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text, \
                column_default::text \
         FROM information_schema.columns WHERE table_schema = current_schema() \
         ORDER BY table_name, column_name",
    )
    .load::<Column>(&mut conn)
    .expect("columns");
    let indexes = diesel::sql_query(
        "SELECT indexname::text, indexdef::text FROM pg_indexes \
         WHERE schemaname = current_schema() ORDER BY indexname",
    )
    .load::<Index>(&mut conn)
    .expect("indexes");
    (columns, indexes)
}

/// The columns whose PostgreSQL type differs from SQLite's, with that type.
const NATIVE: [(&str, &str, &str); 22] = [
    ("conversations", "created_at", "timestamp with time zone"),
    ("conversations", "updated_at", "timestamp with time zone"),
    ("messages", "created_at", "timestamp with time zone"),
    ("runs", "request", "jsonb"),
    ("runs", "lease_until", "timestamp with time zone"),
    ("runs", "created_at", "timestamp with time zone"),
    ("runs", "finished_at", "timestamp with time zone"),
    ("runs", "reviewed_at", "timestamp with time zone"),
    ("runs", "needs_human_review", "boolean"),
    ("deliberation_stages", "parsed_data", "jsonb"),
    ("deliberation_stages", "created_at", "timestamp with time zone"),
    ("run_events", "data", "jsonb"),
    ("run_events", "created_at", "timestamp with time zone"),
    ("run_journal", "data", "jsonb"),
    ("run_journal", "created_at", "timestamp with time zone"),
    ("users", "created_at", "timestamp with time zone"),
    ("users", "revoked_at", "timestamp with time zone"),
    ("users", "is_admin", "boolean"),
    ("api_tokens", "created_at", "timestamp with time zone"),
    ("api_tokens", "expires_at", "timestamp with time zone"),
    ("api_tokens", "revoked_at", "timestamp with time zone"),
    ("runs", "cost", "double precision"),
];

fn check_native_schema(columns: &[Column], indexes: &[Index]) {
    for (table, column, ty) in NATIVE {
        let c = columns.iter().find(|c| c.table_name == table && c.column_name == column);
        let c = c.unwrap_or_else(|| panic!("no column {table}.{column}"));
        assert_eq!(c.data_type, ty, "{table}.{column}");
    }
    // Nothing was left behind in a portable type: no JSON in text, no time in bigint.
    for c in columns {
        let time = c.column_name.ends_with("_at") || c.column_name == "lease_until";
        assert!(!(time && c.data_type == "bigint"), "{c:?}");
        let json = matches!(c.column_name.as_str(), "request" | "parsed_data" | "data");
        assert!(!(json && c.data_type == "text"), "{c:?}");
    }
    let running = indexes.iter().find(|i| i.indexname == "runs_running").expect("runs_running");
    assert!(running.indexdef.contains("WHERE (status = 'running'::text)"), "{running:?}");
}

#[actix_web::test]
async fn postgresql_columns_are_jsonb_timestamptz_and_boolean() {
    let Some(db) = TempDb::new() else { return };
    drop(Store::start(db.url()).expect("store"));
    let (columns, indexes) = schema_of(db.url());
    check_native_schema(&columns, &indexes);
}

/// The migrations both backends shared until PostgreSQL got its own: the same versions as
/// PostgreSQL's first four, with JSON in TEXT and times in BIGINT. They live on unchanged as
/// SQLite's migrations, so a database they made is made here from those.
const SHARED_MIGRATIONS: diesel_migrations::EmbeddedMigrations =
    diesel_migrations::embed_migrations!("migrations/sqlite");

/// Rows as the earlier build stored them: JSON as text (NUL as the escape \u0000, next to the
/// text "\u0000" written as JSON), times as milliseconds.
const OLD_ROWS: &str = r#"
INSERT INTO conversations (id, user_id, title, mode, visibility, created_at, updated_at)
    VALUES ('c1', 'tester', 'An old run', 'council', 'team', 1764000000123, 1764000000456);
INSERT INTO messages (id, conversation_id, position, role, content, created_at)
    VALUES ('u1', 'c1', 0, 'user', 'Old question?', 1764000000123),
           ('m1', 'c1', 1, 'assistant', 'Old answer', 1764000000123);
INSERT INTO runs (id, conversation_id, user_message_id, message_id, mode, status, request, owner,
                  created_at, finished_at, needs_human_review, review_reason, reviewed_at,
                  review_note, prompt_tokens, completion_tokens, last_seq)
    VALUES ('r1', 'c1', 'u1', 'm1', 'council', 'completed',
            '{"mode":"council","question":"Old question?","nul":"a\u0000b","text":"\\u0000","n":[1,0.5]}',
            'tester', 1764000000123, 1764000009999, TRUE, 'flagged', 946684799999, 'seen', 3, 4, 1);
INSERT INTO runs (id, conversation_id, user_message_id, message_id, mode, status, request,
                  created_at, lease_owner, lease_until)
    VALUES ('r2', 'c1', 'u1', 'm1', 'council', 'running', '{}', 1764000000200, 'gone',
            1764000000700);
INSERT INTO deliberation_stages (id, message_id, position, stage_type, stage_order, model, role,
                                 content, parsed_data, response_time_ms, created_at)
    VALUES ('s1', 'm1', 0, 'stage1', 1, 'sim/alpha', NULL, 'Old answer',
            '{"response":"Old answer","x":"\u0000\u0000"}', 42, 1764000000200);
INSERT INTO run_events (run_id, seq, event, data, created_at)
    VALUES ('r1', 1, 'complete', '{"data":{"k\u0000":"\\\u0000"}}', 1764000000300);
INSERT INTO run_journal (run_id, step, kind, call_key, data, created_at)
    VALUES ('r2', 1, 'start', NULL, '{"q":"\u0000"}', 1764000000100);
INSERT INTO users (id, name, is_admin, created_at, revoked_at)
    VALUES ('old', 'olduser', FALSE, 1764000000000, NULL);
"#;

#[actix_web::test]
async fn a_database_made_by_the_shared_migrations_is_converted_to_the_fresh_schema() {
    use diesel_migrations::MigrationHarness;
    let Some(old) = TempDb::new() else { return };
    let Some(fresh) = TempDb::new() else { return };
    let token = new_token();
    {
        let mut conn = diesel::pg::PgConnection::establish(old.url()).expect("pg");
        // Only the four the backends shared: later SQLite migrations (BIGINT times of tables
        // made after the split, such as share_links) never ran on a PostgreSQL database.
        for _ in 0..4 {
            conn.run_next_migration(SHARED_MIGRATIONS).expect("the shared migrations");
        }
        conn.batch_execute(OLD_ROWS).expect("old rows");
        let sql = format!(
            "INSERT INTO api_tokens (id, user_id, token_hash, kind, created_at, expires_at) \
             VALUES ('t1', 'old', '{}', 'api', 1764000000000, 4102444800000)",
            hash_token(&token)
        );
        conn.batch_execute(&sql).expect("old token");
    }

    // The first start converts it; the rows read back as they were written.
    let store = Store::start(old.url()).expect("store on the old database");
    let r = "\u{FFFD}";
    let run = store.get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        run.request,
        json!({ "mode": "council", "question": "Old question?", "nul": format!("a{r}b"),
                "text": "\\u0000", "n": [1, 0.5] })
    );
    assert_eq!(
        (run.created_at, run.finished_at, run.reviewed_at),
        (1764000000123, Some(1764000009999), Some(946684799999))
    );
    assert_eq!((run.prompt_tokens, run.completion_tokens, run.needs_human_review), (3, 4, true));
    let stages = store.get_stages("m1").await.unwrap();
    assert_eq!(
        stages[0].row.parsed_data,
        Some(json!({ "response": "Old answer", "x": format!("{r}{r}") }))
    );
    assert_eq!((stages[0].created_at, stages[0].row.response_time_ms), (1764000000200, Some(42)));
    let events = store.events_since("r1", 0).await.unwrap();
    assert_eq!(events[0].data, json!({ "data": { format!("k{r}"): format!("\\{r}") } }));
    let journal = store.journal("r2").await.unwrap();
    assert_eq!(journal[0].data, json!({ "q": r }));
    let conv = store.get_conversation("c1").await.unwrap().unwrap();
    assert_eq!(
        (conv.conversation.created_at, conv.conversation.updated_at),
        (1764000000123, 1764000000456)
    );
    // The lease of the running run ends at 1764000000700 exactly.
    assert!(store.expired_runs(1764000000700).await.unwrap().is_empty());
    assert_eq!(store.expired_runs(1764000000701).await.unwrap(), ["r2"]);
    let user = store.authenticate(hash_token(&token), vec![TokenKind::Api]).await.unwrap();
    assert_eq!(user.map(|(u, _)| (u.name, u.created_at)), Some(("olduser".into(), 1764000000000)));
    let pending = store.list_reviews(ReviewStatus::Reviewed, 10, None).await.unwrap();
    assert_eq!(pending[0].run.review_note.as_deref(), Some("seen"));

    // Converted, it has exactly the schema of a database made by PostgreSQL's own migrations,
    // and both have run the same migrations.
    drop(Store::start(fresh.url()).expect("store on a fresh database"));
    let (old_columns, old_indexes) = schema_of(old.url());
    let (fresh_columns, fresh_indexes) = schema_of(fresh.url());
    check_native_schema(&old_columns, &old_indexes);
    let old_set: BTreeSet<&Column> = old_columns.iter().collect();
    let fresh_set: BTreeSet<&Column> = fresh_columns.iter().collect();
    assert_eq!(old_set, fresh_set);
    assert_eq!(old_indexes, fresh_indexes);
    #[derive(diesel::QueryableByName)]
    struct Version {
        #[diesel(sql_type = diesel::sql_types::Text)]
        version: String,
    }
    let versions = |url: &str| -> Vec<String> {
        let mut conn = diesel::pg::PgConnection::establish(url).expect("pg");
        diesel::sql_query("SELECT version FROM __diesel_schema_migrations ORDER BY version")
            .load::<Version>(&mut conn)
            .expect("versions")
            .into_iter()
            .map(|v| v.version)
            .collect()
    };
    assert_eq!(versions(old.url()), versions(fresh.url()));
    // Every PostgreSQL migration, each once (a count written here went stale with each new one).
    let all = diesel::migration::MigrationSource::<diesel::pg::Pg>::migrations(
        &conclave::store::db::POSTGRES_MIGRATIONS,
    )
    .expect("the embedded migrations")
    .len();
    assert_eq!(versions(old.url()).len(), all);

    // And the server works on it: the old run reads back over REST, and a new run completes.
    let app = app_on(old.url()).await;
    let (status, view) = app.get("/api/deliberations/r1").await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["request"], json!(run.request));
    assert_eq!(view["createdAt"], 1764000000123i64);
    let started = app.start(council_request("After the conversion?")).await;
    let done = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    app.stop().await;
}

/// Many runs start, then send their steps, at once (so the writer takes them together, in one
/// transaction): every run and step is stored, in order; a write that cannot be stored (a
/// follow-up in a missing conversation, a journal step already written) fails alone, with its
/// reason, and the others sent with it are stored.
async fn check_steps_sent_together(url: &str) {
    let store = Store::start(url).expect("store");
    let now = now_ms();
    let ids: Vec<String> = (0..40).map(|i| format!("batch-{i}")).collect();
    // New runs at once, one of them a follow-up in a conversation that does not exist.
    let mut orphan = new_run("orphan", now, None);
    orphan.new_conversation = false;
    let mut creates: Vec<_> =
        ids.iter().map(|id| store.create_run(new_run(id, now, None))).collect();
    creates.insert(10, store.create_run(orphan));
    let created = futures_util::future::join_all(creates).await;
    assert!(matches!(created[10], Err(StoreError::NotFound(_))), "{:?}", created[10]);
    assert_eq!(created.iter().filter(|c| c.is_ok()).count(), ids.len(), "{created:?}");
    assert!(store.get_run("orphan").await.unwrap().is_none());
    let step = |id: &str, step: i64| {
        let mut c = commit_for(id);
        c.journal = vec![JournalRecord {
            step,
            kind: "reply".into(),
            call_key: Some(format!("stage1:{step}")),
            data: json!({ "text": format!("{id} step {step}") }),
        }];
        Arc::new(c)
    };
    // Each run's first step, all at once, then each run's second step and, for run 7, its
    // first step again (refused: the journal already has it), all at once.
    let first = futures_util::future::join_all(ids.iter().map(|id| store.commit(step(id, 1))));
    assert!(first.await.iter().all(Result::is_ok));
    let mut second: Vec<_> = ids.iter().map(|id| store.commit(step(id, 2))).collect();
    second.insert(20, store.commit(step("batch-7", 1)));
    let outcomes = futures_util::future::join_all(second).await;
    let refused = outcomes.iter().filter(|o| o.is_err()).count();
    assert_eq!(refused, 1, "only the repeated step is refused: {outcomes:?}");
    let e = outcomes[20].as_ref().unwrap_err().to_string();
    assert!(e.to_lowercase().contains("unique") || e.contains("duplicate"), "{e}");
    for id in &ids {
        let journal = store.journal(id).await.unwrap();
        let steps: Vec<i64> = journal.iter().map(|j| j.step).collect();
        assert_eq!(steps, [1, 2], "{id}");
        assert_eq!(journal[0].data, json!({ "text": format!("{id} step 1") }));
    }
}

#[actix_web::test]
async fn steps_of_many_runs_sent_together_are_each_stored_or_refused_on_sqlite() {
    let (_dir, url) = sqlite_db();
    check_steps_sent_together(&url).await;
}

#[actix_web::test]
async fn steps_of_many_runs_sent_together_are_each_stored_or_refused_on_postgresql() {
    let Some(db) = TempDb::new() else { return };
    check_steps_sent_together(db.url()).await;
}
