//! Backup models for the single-model roles, and partial results, against a real server.

use conclave::modes::Fallbacks;
use serde_json::json;

use crate::helpers::{spawn_app, spawn_with, Options};

#[actix_web::test]
async fn a_failing_chairman_is_replaced_by_the_configured_backup() {
    let fallback = Fallbacks { chairman: Some("sim/beta".into()), ..Fallbacks::default() };
    let app = spawn_with(Options { fallback, ..Options::default() }).await;
    let mut ws = app.ws().await;
    let request = json!({ "mode": "council", "question": "Who synthesises when the chair is out?",
                          "councilModels": ["sim/alpha", "sim/beta", "sim/gamma"],
                          "chairmanModel": "sim/fail1" });
    ws.send(json!({ "type": "start", "request": request })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    let events = ws.events_until_end(&run).await;
    let named = |name: &str| events.iter().find(|e| e["event"] == name).cloned();
    assert_eq!(events.last().unwrap()["event"], "complete", "{events:?}");

    // Live: the primary's failure, the backup call, and the synthesis saying whose it is.
    let failed_call = events
        .iter()
        .find(|e| e["event"] == "call_complete" && e["data"]["key"] == "stage3")
        .expect("the chairman's call ended");
    assert_eq!(failed_call["data"]["ok"], false);
    let start = named("fallback_start").expect("a fallback_start event");
    assert_eq!(start["data"]["key"], "stage3:backup");
    assert_eq!(start["data"]["model"], "sim/beta");
    assert_eq!(start["data"]["fallbackFrom"], "sim/fail1");
    assert!(events.iter().any(|e| e["event"] == "call_start"
        && e["data"]["key"] == "stage3:backup"
        && e["data"]["model"] == "sim/beta"));
    let live = named("stage3_complete").expect("stage3_complete")["data"].clone();
    assert_eq!(live["data"]["model"], "sim/beta");
    assert_eq!(live["data"]["fallbackFrom"], "sim/fail1");
    assert_eq!(live["partial"], true);

    // Stored: the same, rebuilt from the stage rows.
    let (status, stored) = app.get(&format!("/api/deliberations/{run}")).await;
    assert_eq!(status, 200);
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_eq!(result["stage3"], live["data"]);
    assert_eq!(stored["answer"], result["stage3"]["response"]);
    assert_eq!(result["partial"], true);
    assert_eq!(result["failedModels"], live["failedModels"]);
    let failed = result["failedModels"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["model"], "sim/fail1");
    assert_eq!(failed[0]["role"], "chairman");
    assert_eq!(failed[0]["stage"], "stage3");
    assert_eq!(failed[0]["fallbackTo"], "sim/beta");
    assert_eq!(failed[0]["error"]["kind"], "http");
    assert_eq!(failed[0]["error"]["status"], 503);
    // The run's stored configuration names the backup it could use.
    assert_eq!(stored["request"]["config"]["chairmanFallbackModel"], "sim/beta");
    ws.close().await;
    app.stop().await;
}

#[actix_web::test]
async fn a_run_with_a_failed_member_is_marked_partial_and_a_clean_one_is_not() {
    let app = spawn_app().await;
    let degraded = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/fail-x", "sim/beta"],
                       "chairmanModel": "sim/alpha" }))
        .await;
    let clean = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/beta"],
                       "chairmanModel": "sim/alpha" }))
        .await;
    let degraded = app.wait_done(degraded["runId"].as_str().unwrap()).await;
    assert_eq!(degraded["status"], "completed", "{degraded}");
    let result = &degraded["result"];
    assert_eq!(result["partial"], true);
    let stages: Vec<(&str, &str)> = result["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["model"].as_str().unwrap(), f["stage"].as_str().unwrap()))
        .collect();
    assert_eq!(stages, vec![("sim/fail-x", "stage1"), ("sim/fail-x", "stage2")]);
    assert!(result["stage3"].get("fallbackFrom").is_none());
    let clean = app.wait_done(clean["runId"].as_str().unwrap()).await;
    assert_eq!(clean["result"]["partial"], false);
    assert_eq!(clean["result"]["failedModels"], json!([]));
    app.stop().await;
}
