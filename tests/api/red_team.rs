//! Red Team through the whole server: a run watched over the WebSocket and reloaded as it ran,
//! its 400s, a cancel between steps that keeps the finished rounds, and failing models.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

const CODE: &str = "fn login(user: &str, pass: &str) -> bool {\n    let q = format!(\"SELECT * FROM users WHERE name='{user}' AND pass='{pass}'\");\n    db::query(&q).is_some()\n}";

fn request(config: Value) -> Value {
    let mut cfg = json!({ "content": CODE, "rounds": 2 });
    for (k, v) in config.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    json!({ "mode": "red_team", "question": "Review this login handler.", "modeConfig": cfg })
}

/// The stored result is what went out live, round by round.
fn assert_same(result: &Value, events: &[Value]) {
    assert_eq!(result["generate"], all_of(events, "generate_complete")[0]["data"]);
    let attacks = all_of(events, "attack_complete");
    let rounds = result["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), attacks.len(), "{result}");
    for (r, a) in rounds.iter().zip(&attacks) {
        assert_eq!(r["round"], a["round"]);
        assert_eq!(r["attack"], a["data"]);
    }
    for d in all_of(events, "defend_complete") {
        let i = d["round"].as_u64().unwrap() as usize - 1;
        assert_eq!(rounds[i]["defense"], d["data"]);
    }
    if let Some(s) = all_of(events, "synthesize_complete").first() {
        assert_eq!(result["synthesis"], s["data"]);
        assert_eq!(result["partial"], s["partial"]);
        assert_eq!(result["failedModels"], s["failedModels"]);
    }
}

#[actix_web::test]
async fn a_red_team_run_streams_its_rounds_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(json!({}))).await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    assert_eq!(names[..3], ["redteam_start", "generate_start", "generate_complete"]);
    assert_eq!(
        names[names.len() - 4..],
        ["synthesize_start", "synthesize_complete", "title_complete", "complete"]
    );
    assert_eq!(all_of(&events, "redteam_start")[0]["totalRounds"], 2);
    // Strictly sequential: each attack after the previous round's defense.
    let steps: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with("attack") || n.starts_with("defend"))
        .collect();
    for pair in steps.chunks(2) {
        assert!(pair[0].ends_with("_start") && pair[1].ends_with("_complete"), "{steps:?}");
    }
    let calls = all_of(&events, "call_start");
    let keys: Vec<&str> =
        calls.iter().filter_map(|c| c["key"].as_str()).filter(|k| *k != "title").collect();
    assert_eq!(keys[0], "generate");
    assert_eq!(*keys.last().unwrap(), "synthesis");
    let roles: Vec<(&str, &str)> =
        calls.iter().map(|c| (c["key"].as_str().unwrap(), c["model"].as_str().unwrap())).collect();
    assert!(roles.iter().all(|(k, m)| !k.starts_with("attack") || *m == "sim/beta"), "{roles:?}");
    assert!(roles.iter().all(|(k, m)| !k.starts_with("defend") || *m == "sim/alpha"), "{roles:?}");
    let attack = &all_of(&events, "attack_complete")[0]["data"];
    assert_eq!(attack["parseSuccess"], true, "{attack}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(result["material"]["source"], "content");
    assert_eq!(result["material"]["text"], CODE);
    let synthesis = &all_of(&events, "synthesize_complete")[0]["data"];
    assert!(synthesis["hardenedOutput"].as_str().unwrap().contains("SELECT"), "{synthesis}");
    assert!(stored["answer"].as_str().unwrap().contains("## Hardened Output"));
    assert!(stored["outcome"].as_str().unwrap().contains("findings"), "{}", stored["outcome"]);
    // The mode is listed with its roles and settings.
    let (_, modes) = app.get("/api/modes").await;
    let spec =
        modes["modes"].as_array().unwrap().iter().find(|m| m["id"] == "red_team").unwrap().clone();
    assert_eq!(spec["view"], true);
    assert_eq!(spec["configSchema"]["properties"]["rounds"]["maximum"], 3);
    app.stop().await;
}

#[actix_web::test]
async fn red_team_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({ "generatorModel": "sim/alpha", "attackerModel": "sim/alpha" }),
            "modeConfig.attackerModel",
        ),
        (json!({ "rounds": 4 }), "modeConfig.rounds"),
        (json!({ "maxInputLength": 60000 }), "modeConfig.maxInputLength"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "globalTimeoutMs": 2000000 }), "modeConfig.globalTimeoutMs"),
        (json!({ "content": "" }), "modeConfig.content"),
        (json!({ "rounds": "two" }), "modeConfig.rounds"),
        (json!({ "attackModel": "sim/x" }), "modeConfig.attackModel"),
    ];
    for (cfg, field) in cases {
        let (status, body) = app.post("/api/deliberations", &request(cfg.clone())).await;
        assert_eq!((status, body["field"].as_str()), (400, Some(field)), "{cfg}: {body}");
    }
    let (status, body) =
        app.post("/api/deliberations", &json!({ "mode": "red_team", "question": " " })).await;
    assert_eq!((status, body["field"].as_str()), (400, Some("question")), "{body}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_rounds_that_finished() {
    let app = spawn_app().await;
    // The rounds finish; the synthesizer stalls.
    let started = app.start(request(json!({ "synthesizerModel": "sim/stall-synth" }))).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let (_, before) = ws.until("event", Some("synthesize_start")).await;
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let result = &stored["result"];
    assert!(result["generate"].is_object(), "{result}");
    assert!(!result["rounds"].as_array().unwrap().is_empty(), "{result}");
    assert!(result["synthesis"].is_null());
    assert_same(result, &before);

    // Cancelled in the middle of round 1's attack: the structure is kept.
    let started = app.start(request(json!({ "attackerModel": "sim/stall-att" }))).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    ws.until("event", Some("attack_start")).await;
    app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    assert!(stored["result"]["generate"]["structuredContent"].is_string(), "{stored}");
    assert_eq!(stored["result"]["rounds"], json!([]));
    app.stop().await;
}

#[actix_web::test]
async fn failing_models_end_rounds_fall_back_or_fail_the_run() {
    let fallback = Fallbacks { chairman: Some("sim/gamma".into()), ..Fallbacks::default() };
    let app = spawn_with(Options { fallback, ..Options::default() }).await;
    // The attacker fails: round 1 is recorded as failed and the synthesis follows.
    let (run, events) = watch(&app, request(json!({ "attackerModel": "sim/fail-att" }))).await;
    let attack = &all_of(&events, "attack_complete")[0];
    assert_eq!(
        (attack["round"].clone(), attack["data"]["failed"].clone()),
        (json!(1), json!(true))
    );
    assert!(all_of(&events, "defend_start").is_empty());
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["failedModels"][0]["role"], "attacker");
    assert_eq!(stored["result"]["synthesis"]["stopReason"], "attacker failed");
    assert_same(&stored["result"], &events);

    // The generator fails: the raw material is used, and its defenses fail too.
    let (run, events) =
        watch(&app, request(json!({ "generatorModel": "sim/fail-gen", "rounds": 1 }))).await;
    let g = &all_of(&events, "generate_complete")[0]["data"];
    assert_eq!((g["fallback"].clone(), g["structuredContent"].clone()), (json!(true), json!(CODE)));
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    if let Some(d) = all_of(&events, "defend_complete").first() {
        assert_eq!(d["data"]["failed"], true);
        assert_eq!(d["data"]["revisedContent"], json!(CODE));
    }
    assert_same(&stored["result"], &events);

    // The synthesizer fails: its backup (`[fallback] chairman`) writes the synthesis.
    let (run, events) =
        watch(&app, request(json!({ "synthesizerModel": "sim/fail-syn", "rounds": 1 }))).await;
    let s = &all_of(&events, "synthesize_complete")[0];
    assert_eq!(s["data"]["model"], "sim/gamma");
    assert_eq!(s["data"]["fallbackFrom"], "sim/fail-syn");
    let stored = app.wait_done(&run).await;
    assert_same(&stored["result"], &events);
    app.stop().await;

    // Without a backup a failed synthesizer fails the run, the rounds kept.
    let app = spawn_app().await;
    let (run, events) =
        watch(&app, request(json!({ "synthesizerModel": "sim/fail-syn", "rounds": 1 }))).await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert_eq!(stored["result"]["rounds"].as_array().unwrap().len(), 1, "{stored}");
    app.stop().await;
}
