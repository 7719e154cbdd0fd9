//! Chain through the whole server: a run watched over the WebSocket and reloaded as it ran,
//! its 400s, a cancel between steps that keeps the finished ones, and failing steps.

use serde_json::{json, Value};

use crate::helpers::*;

fn request(models: &[&str]) -> Value {
    let mandates = ["draft", "structure_depth", "accuracy_completeness", "polish_format"];
    let steps: Vec<Value> =
        models.iter().zip(mandates).map(|(m, k)| json!({ "model": m, "mandate": k })).collect();
    json!({ "mode": "chain", "question": "Write a short guide to backing up a home server.",
            "modeConfig": { "steps": steps } })
}

/// Every completed step's event is the stored step, field by field.
fn assert_same(result: &Value, events: &[Value]) {
    for c in all_of(events, "chain_step_complete") {
        let i = c["step"].as_u64().unwrap() as usize - 1;
        for (k, v) in c["data"].as_object().unwrap() {
            assert_eq!(&result["steps"][i][k], v, "step {} {k}", i + 1);
        }
    }
    for s in all_of(events, "chain_step_skipped") {
        let i = s["step"].as_u64().unwrap() as usize - 1;
        assert_eq!(result["steps"][i]["skipped"], true);
        assert_eq!(result["steps"][i]["skipReason"], s["data"]["reason"]);
    }
    if let Some(done) = all_of(events, "chain_complete").first() {
        for (k, v) in done["data"].as_object().unwrap() {
            assert_eq!(&result[k], v, "{k}");
        }
        assert_eq!(result["failedModels"], done["failedModels"]);
    }
}

#[actix_web::test]
async fn a_chain_run_streams_its_steps_in_order_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(
        &app,
        json!({ "mode": "chain", "question": "Write a short guide to backing up a home server." }),
    )
    .await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    let mut expected = vec!["chain_start".to_string()];
    for _ in 0..4 {
        expected.extend(["chain_step_start".into(), "chain_step_complete".into()]);
    }
    expected.extend(["chain_complete".into(), "title_complete".into(), "complete".into()]);
    assert_eq!(names, expected);
    let start = &all_of(&events, "chain_start")[0];
    assert_eq!(start["totalSteps"], 4);
    assert_eq!(start["steps"][1]["mandateDisplay"], "Structure & Depth");
    // One call at a time: each step's call starts after the previous one completed.
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| matches!(e["event"].as_str(), Some("call_start" | "call_complete")))
        .filter(|e| e["data"]["key"] != "title")
        .map(|e| (e["event"].as_str().unwrap(), e["data"]["key"].as_str().unwrap()))
        .collect();
    for (i, pair) in calls.chunks(2).enumerate() {
        let key = format!("step:{}", i + 1);
        assert_eq!(pair, [("call_start", key.as_str()), ("call_complete", key.as_str())]);
    }
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(result["totalSteps"], 4);
    assert_eq!(stored["answer"], result["finalContent"]);
    assert_eq!(result["wordCountProgression"].as_array().unwrap().len(), 4);
    assert!(
        stored["outcome"].as_str().unwrap().starts_with("4 of 4 steps"),
        "{}",
        stored["outcome"]
    );
    app.stop().await;
}

#[actix_web::test]
async fn chain_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let body = |cfg: Value| json!({ "mode": "chain", "question": "q", "modeConfig": cfg });
    let one = json!({ "model": "sim/alpha", "mandate": "draft" });
    let cases = [
        (json!({ "steps": [one] }), "modeConfig.steps"),
        (
            json!({ "steps": [one, { "model": "sim/beta", "mandate": "poetry" }] }),
            "modeConfig.steps[1].mandate",
        ),
        (
            json!({ "steps": [one, { "model": "sim/beta", "mandate": "custom" }] }),
            "modeConfig.steps[1].customMandate",
        ),
        (
            json!({ "steps": [one, { "model": "sim/beta", "mandate": "draft", "customMandate": "x" }] }),
            "modeConfig.steps[1].customMandate",
        ),
        (json!({ "steps": [one, { "mandate": "draft" }] }), "modeConfig.steps[1].model"),
        (json!({ "timeoutMs": 200000 }), "modeConfig.timeoutMs"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &body(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (_, b) = app
        .post(
            "/api/deliberations",
            &body(json!({ "steps": [one, { "model": "sim/beta", "mandate": "poetry" }] })),
        )
        .await;
    assert!(
        b["error"].as_str().unwrap().contains("security_review"),
        "names the known mandates: {b}"
    );
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_steps_that_finished() {
    let app = spawn_app().await;
    let started = app.start(request(&["sim/alpha", "sim/beta", "sim/stall-3", "sim/delta"])).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    loop {
        let (e, _) = ws.until("event", Some("chain_step_start")).await;
        if e["data"]["step"] == 3 {
            break;
        }
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let steps = stored["result"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{stored}");
    assert!(steps
        .iter()
        .all(|s| s["skipped"] == false && !s["content"].as_str().unwrap().is_empty()));
    assert_eq!(stored["result"]["finalStep"], 2, "the latest completed version");
    app.stop().await;
}

#[actix_web::test]
async fn failing_steps_are_skipped_and_a_failing_draft_fails_the_run() {
    let app = spawn_app().await;
    let (run, events) =
        watch(&app, request(&["sim/alpha", "sim/fail-2", "sim/empty-3", "sim/delta"])).await;
    let skipped = all_of(&events, "chain_step_skipped");
    assert_eq!(skipped.iter().map(|s| s["step"].clone()).collect::<Vec<_>>(), [json!(2), json!(3)]);
    let start4 = all_of(&events, "chain_step_start").into_iter().find(|s| s["step"] == 4).unwrap();
    assert_eq!(
        (start4["basedOnStep"].clone(), start4["skippedBefore"].clone()),
        (json!(1), json!([2, 3]))
    );
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["skippedSteps"], json!([2, 3]));
    assert_eq!(stored["result"]["failedModels"].as_array().unwrap().len(), 2);
    assert_same(&stored["result"], &events);

    let (run, events) = watch(&app, request(&["sim/fail-1", "sim/beta"])).await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("nothing to improve"), "{stored}");
    app.stop().await;
}
