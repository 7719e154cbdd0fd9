//! Cancelling runs: over the WebSocket and REST, with in-flight HTTP requests dropped.

use std::time::Duration;

use serde_json::json;

use crate::helpers::*;

/// How quickly a cancel lands is the benchmark's to measure (`conclave bench`): here the
/// `cancelled` event must come (within the WebSocket helper's wait), and the model server must
/// see its requests dropped.
#[actix_web::test]
async fn cancel_over_websocket_drops_in_flight_requests() {
    let app = spawn_with(Options { sim_over_http: true, ..Options::default() }).await;
    let mut ws = app.ws().await;
    // Two stalled members: stage 1 never finishes on its own.
    ws.send(json!({ "type": "start", "request": {
        "question": "Will this be cancelled?",
        "councilModels": ["sim/stall-a", "sim/stall-b", "sim/alpha"], "chairmanModel": "sim/alpha" } }))
        .await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    ws.until("event", Some("call_start")).await;
    let stats = app.sim_stats.clone().unwrap();
    // Wait until the stalled requests reached the model server.
    for _ in 0..500 {
        if stats.snapshot().requests >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ws.send(json!({ "type": "cancel", "run": run, "id": "c1" })).await;
    let (ev, _) = ws.until("event", Some("cancelled")).await;
    assert_eq!(ev["run"], run.as_str());
    // The sim-server saw both stalled connections close.
    let mut aborted = 0;
    for _ in 0..500 {
        aborted = stats.snapshot().aborted;
        if aborted >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(aborted >= 2, "the model server saw {aborted} aborted requests");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "cancelled");
    // A second cancel finds it over.
    let (status, _) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 409);
    ws.close().await;
    app.stop().await;
}

#[actix_web::test]
async fn cancel_over_rest_keeps_the_stages_completed_so_far() {
    let app = spawn_app().await;
    // Stage 1 completes; the chairman stalls in stage 3.
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/beta"], "chairmanModel": "sim/stall-chair" }))
        .await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    ws.until("event", Some("stage3_start")).await;
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    assert_eq!(stored["result"]["stage1"].as_array().unwrap().len(), 2);
    assert_eq!(stored["result"]["stage2"].as_array().unwrap().len(), 2);
    assert!(stored["result"]["stage3"].is_null());
    let (status, _) = app.post("/api/deliberations/unknown/cancel", &json!({})).await;
    assert_eq!(status, 404);
    ws.close().await;
    app.stop().await;
}
