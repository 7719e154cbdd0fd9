//! Confidence-Weighted through the whole server: a run watched over the WebSocket and reloaded
//! as it ran, a follow-up, its 400s by field, a cancel that keeps the finished answers, failing
//! models with and without a backup synthesizer.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

fn request(models: &[&str], synth: &str) -> Value {
    json!({ "mode": "confidence_weighted", "question": "What is caffeine's half-life in adults?",
            "modeConfig": { "models": models, "synthesisModel": synth } })
}

/// Every live answer is the stored one, the weights and the synthesis too.
fn assert_same(result: &Value, events: &[Value]) {
    let mut live: Vec<Value> =
        all_of(events, "answer_complete").into_iter().map(|e| e["data"].clone()).collect();
    live.sort_by_key(|a| a["index"].as_u64());
    assert_eq!(result["answers"], json!(live));
    if let Some(w) = all_of(events, "weights_calculated").first() {
        assert_eq!(result["weights"], w["data"]);
    }
    if let Some(s) = all_of(events, "synthesis_complete").first() {
        assert_eq!(result["synthesis"], s["data"]);
        assert_eq!(result["partial"], s["partial"]);
        assert_eq!(result["failedModels"], s["failedModels"]);
    }
}

#[actix_web::test]
async fn confidence_weighted_streams_in_order_reloads_as_it_ran_and_takes_a_follow_up() {
    let app = spawn_app().await;
    let (run, events) =
        watch(&app, request(&["sim/alpha", "sim/beta", "sim/gamma"], "sim/delta")).await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    let mut expected: Vec<String> = vec!["confidence_start".into(), "answers_start".into()];
    expected.extend(std::iter::repeat_n("answer_complete".to_string(), 3));
    for e in [
        "all_answers_complete",
        "weights_calculated",
        "synthesis_start",
        "synthesis_complete",
        "title_complete",
        "complete",
    ] {
        expected.push(e.into());
    }
    assert_eq!(names, expected);
    let start = &all_of(&events, "confidence_start")[0];
    assert_eq!(start["config"]["temperature"], 1.0);
    assert_eq!(start["config"]["synthesisModel"], "sim/delta");
    let w = &all_of(&events, "weights_calculated")[0]["data"];
    let sum: f64 = w["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["normalizedWeight"].as_f64().unwrap())
        .sum();
    assert!((sum - 1.0).abs() < 1e-9, "{w}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(stored["answer"], result["synthesis"]["synthesis"]);
    assert!(stored["outcome"].is_string(), "{stored}");

    // A follow-up in the same conversation: no new title, the history goes along.
    let conv = start["conversationId"].as_str().unwrap();
    let mut body = request(&["sim/alpha", "sim/beta"], "sim/alpha");
    body["conversationId"] = json!(conv);
    body["question"] = json!("And in pregnancy?");
    let (run2, events2) = watch(&app, body).await;
    assert!(!stage_events(&events2).contains(&"title_complete".to_string()));
    let stored2 = app.wait_done(&run2).await;
    assert_eq!(stored2["status"], "completed", "{stored2}");
    // Another mode's conversation takes no confidence-weighted follow-up.
    let (_, chain_events) = watch(
        &app,
        json!({ "mode": "chain", "question": "Write a note.",
                "modeConfig": { "steps": [ { "model": "sim/alpha", "mandate": "draft" },
                                           { "model": "sim/beta", "mandate": "polish_format" } ] } }),
    )
    .await;
    let other = all_of(&chain_events, "chain_start")[0]["conversationId"].clone();
    let mut body = request(&["sim/alpha", "sim/beta"], "sim/alpha");
    body["conversationId"] = other;
    let (status, b) = app.post("/api/deliberations", &body).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("conversationId")), "{b}");
    app.stop().await;
}

#[actix_web::test]
async fn confidence_weighted_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let body =
        |cfg: Value| json!({ "mode": "confidence_weighted", "question": "q", "modeConfig": cfg });
    let cases = [
        (json!({ "models": ["sim/alpha"] }), "modeConfig.models"),
        (json!({ "models": ["a", "b", "c", "d", "e", "f", "g"] }), "modeConfig.models"),
        (json!({ "models": "sim/alpha" }), "modeConfig.models"),
        (json!({ "synthesisModel": " " }), "modeConfig.synthesisModel"),
        (json!({ "temperature": 0.0 }), "modeConfig.temperature"),
        (json!({ "temperature": 6 }), "modeConfig.temperature"),
        (json!({ "temperature": "warm" }), "modeConfig.temperature"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 400000 }), "modeConfig.timeoutMs"),
        (json!({ "weights": [1, 2] }), "modeConfig.weights"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &body(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (status, b) =
        app.post("/api/deliberations", &json!({ "mode": "confidence_weighted" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_answers_that_finished() {
    let app = spawn_app().await;
    let started = app.start(request(&["sim/alpha", "sim/beta", "sim/stall-3"], "sim/alpha")).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let mut answered = 0;
    while answered < 2 {
        ws.until("event", Some("answer_complete")).await;
        answered += 1;
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let answers = stored["result"]["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 2, "{stored}");
    assert!(answers.iter().all(|a| !a["response"].as_str().unwrap().is_empty()));
    assert_eq!(stored["result"]["weights"], Value::Null);
    assert_eq!(stored["result"]["synthesis"], Value::Null);
    app.stop().await;
}

#[actix_web::test]
async fn failing_models_are_listed_and_the_backup_synthesizer_stands_in() {
    let app = spawn_app().await;
    // One respondent fails: the others are weighed, the run is partial.
    let (run, events) =
        watch(&app, request(&["sim/alpha", "sim/fail-2", "sim/empty-3"], "sim/beta")).await;
    let done = &all_of(&events, "all_answers_complete")[0]["data"];
    assert_eq!(*done, json!({ "count": 1, "failedCount": 2 }));
    let s = &all_of(&events, "synthesis_complete")[0];
    assert_eq!(s["data"]["singleAnswer"], true, "one answer stands alone");
    assert_eq!(s["data"]["model"], Value::Null);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["failedModels"].as_array().unwrap().len(), 2);
    assert_same(&stored["result"], &events);

    // The synthesizer fails with no backup: the run fails, answers and weights kept.
    let (run, events) = watch(&app, request(&["sim/alpha", "sim/beta"], "sim/fail-s")).await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("synthesizer"), "{stored}");
    assert_eq!(stored["result"]["answers"].as_array().unwrap().len(), 2);
    assert!(stored["result"]["weights"]["weights"].is_array(), "{stored}");
    app.stop().await;

    // With a backup it stands in.
    let fallback = Fallbacks { chairman: Some("sim/gamma".into()), ..Fallbacks::default() };
    let app = spawn_with(Options { fallback, ..Options::default() }).await;
    let (run, events) = watch(&app, request(&["sim/alpha", "sim/beta"], "sim/fail-s")).await;
    assert!(stage_events(&events).contains(&"fallback_start".to_string()));
    let s = &all_of(&events, "synthesis_complete")[0];
    assert_eq!(s["data"]["model"], "sim/gamma");
    assert_eq!(s["data"]["fallbackFrom"], "sim/fail-s");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["failedModels"][0]["fallbackTo"], "sim/gamma");
    assert_same(&stored["result"], &events);
    app.stop().await;
}
