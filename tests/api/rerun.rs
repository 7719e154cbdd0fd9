//! "Run again": `POST /api/deliberations/{id}/rerun` starts a new run from a stored run's
//! request (its normalised configuration, server backups included), for whoever may see that
//! run, under the same limits as a start.

use serde_json::{json, Value};

use crate::helpers::*;

/// A council run whose calls take long enough to cancel it mid-way (three stages of 300 ms).
fn app_options() -> Options {
    let fallback =
        conclave::modes::Fallbacks { chairman: Some("sim/backup".into()), ..Default::default() };
    Options { sim_latency_ms: 300, fallback, ..Options::default() }
}

/// Starts `body` as `client` over REST; answers the 202 body.
async fn start_as(app: &TestApp, client: &reqwest::Client, body: &Value) -> Value {
    let r = client.post(format!("{}/api/deliberations", app.base)).json(body).send().await.unwrap();
    assert_eq!(r.status(), 202);
    r.json().await.unwrap()
}

/// `POST …/rerun` of `run` as `client`: the status and the body.
async fn rerun_as(app: &TestApp, client: &reqwest::Client, run: &str) -> (u16, Value) {
    let r = client
        .post(format!("{}/api/deliberations/{run}/rerun", app.base))
        .send()
        .await
        .expect("rerun");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Starts `body`, cancels it once its first call has started, and answers its id once it has
/// ended cancelled.
async fn cancelled_run(app: &TestApp, body: Value) -> String {
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": body })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    ws.until("event", Some("call_start")).await;
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    let events = ws.events_until_end(&run).await;
    assert_eq!(events.last().unwrap()["event"], "cancelled");
    ws.close().await;
    run
}

/// Watches `run` to its end and answers its stored detail.
async fn finished(app: &TestApp, run: &str) -> Value {
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    ws.events_until_end(run).await;
    ws.close().await;
    let (status, detail) = app.get(&format!("/api/deliberations/{run}")).await;
    assert_eq!(status, 200, "{detail}");
    detail
}

#[actix_web::test]
async fn a_cancelled_run_runs_again_with_the_same_mode_question_and_models() {
    let app = spawn_with(app_options()).await;
    let old = cancelled_run(&app, council_request("Is a rerun the same request?")).await;
    let (_, before) = app.get(&format!("/api/deliberations/{old}")).await;
    // The stored configuration holds the server's backup chairman, which a client may not send.
    assert_eq!(before["request"]["config"]["chairmanFallbackModel"], "sim/backup", "{before}");

    let (status, started) = rerun_as(&app, &app.http, &old).await;
    assert_eq!(status, 202, "{started}");
    let new = started["runId"].as_str().unwrap();
    assert_ne!(new, old);
    assert_eq!(started["mode"], "council");
    let after = finished(&app, new).await;
    assert_eq!(after["status"], "completed", "{after}");
    assert_eq!(after["question"], "Is a rerun the same request?");
    assert_eq!(after["mode"], before["mode"]);
    assert_eq!(after["request"]["config"], before["request"]["config"], "same models and backup");
    assert_eq!(after["result"]["stage1"].as_array().unwrap().len(), 3);
    // A first question starts a conversation of its own; the cancelled one stays as it was.
    assert_ne!(after["conversationId"], before["conversationId"]);
    assert_eq!(started["conversationId"], after["conversationId"]);
    let (_, old_now) = app.get(&format!("/api/deliberations/{old}")).await;
    assert_eq!(old_now["status"], "cancelled");
    app.stop().await;
}

#[actix_web::test]
async fn a_follow_up_runs_again_in_its_conversation() {
    let app = spawn_with(app_options()).await;
    let first = app.start(council_request("First question?")).await;
    let conversation = first["conversationId"].as_str().unwrap().to_string();
    finished(&app, first["runId"].as_str().unwrap()).await;
    let mut follow_up = council_request("And a follow-up?");
    follow_up["conversationId"] = json!(conversation);
    let old = cancelled_run(&app, follow_up).await;

    let (status, started) = rerun_as(&app, &app.http, &old).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["conversationId"], conversation.as_str());
    let new = started["runId"].as_str().unwrap();
    let after = finished(&app, new).await;
    assert_eq!(after["status"], "completed", "{after}");
    assert_eq!(after["question"], "And a follow-up?");
    let (_, conv) = app.get(&format!("/api/conversations/{conversation}")).await;
    let runs: Vec<&str> =
        conv["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(runs, vec![first["runId"].as_str().unwrap(), old.as_str(), new]);
    app.stop().await;
}

#[actix_web::test]
async fn only_runs_the_caller_may_see_run_again() {
    let app = spawn_with(app_options()).await;
    let alice = client_with(&app.user("alice", false).await);
    let bob = client_with(&app.user("bob", false).await);
    let mut private = council_request("Alice's private question?");
    private["visibility"] = json!("private");
    let mut team = council_request("Alice's team question?");
    team["visibility"] = json!("team");
    let private = start_as(&app, &alice, &private).await["runId"].as_str().unwrap().to_string();
    let team = start_as(&app, &alice, &team).await["runId"].as_str().unwrap().to_string();
    finished(&app, &private).await;
    finished(&app, &team).await;

    // Bob may not see alice's private run: it is not found, as for reading it.
    let (status, body) = rerun_as(&app, &bob, &private).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = rerun_as(&app, &bob, "0192e8f0-0000-7000-8000-000000000000").await;
    assert_eq!(status, 404, "an unknown run");
    let (status, _) = rerun_as(&app, &bob, "not-a-run-id").await;
    assert_eq!(status, 404, "an id that cannot be one");
    // A team run he may read he may also run again: the new run is his, with its visibility.
    let (status, started) = rerun_as(&app, &bob, &team).await;
    assert_eq!(status, 202, "{started}");
    let mine = finished(&app, started["runId"].as_str().unwrap()).await;
    assert_eq!((mine["owner"].as_str(), mine["visibility"].as_str()), (Some("bob"), Some("team")));
    // Alice runs her private one again: still private.
    let (status, started) = rerun_as(&app, &alice, &private).await;
    assert_eq!(status, 202, "{started}");
    let (_, again) =
        app.get(&format!("/api/deliberations/{}", started["runId"].as_str().unwrap())).await;
    assert_eq!(again["visibility"], "private");
    app.stop().await;
}

#[actix_web::test]
async fn a_running_run_is_not_run_twice_and_reruns_use_the_start_budget() {
    let user_limits =
        conclave::engine::limits::UserLimits { concurrent_runs: 1000, starts_per_minute: 2 };
    let app = spawn_with(Options { sim_latency_ms: 60_000, user_limits, ..app_options() }).await;
    let alice = client_with(&app.user("alice", false).await);
    let run = start_as(&app, &alice, &council_request("Still going?")).await;
    let run = run["runId"].as_str().unwrap().to_string();
    let (status, body) = rerun_as(&app, &alice, &run).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("still running"), "{body}");

    // Cancelled, it may run again: the second start of alice's budget of two a minute.
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let cancel = alice.post(format!("{}/api/deliberations/{run}/cancel", app.base)).send();
    assert_eq!(cancel.await.unwrap().status(), 202);
    assert_eq!(ws.events_until_end(&run).await.last().unwrap()["event"], "cancelled");
    ws.close().await;
    let (status, body) = rerun_as(&app, &alice, &run).await;
    assert_eq!(status, 202, "{body}");
    // A third start in the minute is over it: 429 with when to retry, as a start would be.
    let (status, body) = rerun_as(&app, &alice, &run).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["retryAfterSeconds"].as_u64().unwrap() >= 1, "{body}");
    app.stop().await;
}
