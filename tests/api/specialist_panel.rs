//! Specialist Panel through the whole server: a run watched over the WebSocket and reloaded as
//! it ran, its 400s, a cancel that keeps the reports that arrived, and failing models.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

const PLAN: &str = "Move the shop's three services from two VMs to a managed Kubernetes cluster; \
keep PostgreSQL on a managed instance; deploy with GitHub Actions.";

fn request(config: Value) -> Value {
    let mut cfg = json!({ "content": PLAN });
    for (k, v) in config.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    json!({ "mode": "specialist_panel", "question": "Assess our migration plan.", "modeConfig": cfg })
}

fn panel(models: [&str; 3]) -> Value {
    json!([
        { "roleId": "security_expert", "model": models[0] },
        { "roleId": "devops_engineer", "model": models[1] },
        { "roleId": "custom", "model": models[2], "customRole": {
            "title": "Support Lead", "expertiseAreas": "customer support and incident communication",
            "description": "Judges the plan by what customers notice during and after the move.",
            "priorities": ["No downtime customers see", "Clear status updates", "A fast way back"],
            "criteria": ["Customer Impact", "Communication Plan", "Rollback Clarity"] } },
    ])
}

/// The stored result is what went out live, report by report.
fn assert_same(result: &Value, events: &[Value]) {
    let mut live: Vec<Value> =
        all_of(events, "specialist_complete").iter().map(|e| e["data"].clone()).collect();
    live.sort_by_key(|d| d["index"].as_u64());
    assert_eq!(result["specialists"], json!(live), "{result}");
    if let Some(a) = all_of(events, "all_specialists_complete").first() {
        assert_eq!(result["specialists"], a["data"]["specialists"]);
        assert_eq!(result["failedSpecialists"], a["data"]["failedSpecialists"]);
    }
    if let Some(s) = all_of(events, "synthesis_complete").first() {
        assert_eq!(result["synthesis"], s["data"]);
        assert_eq!(result["partial"], s["partial"]);
        assert_eq!(result["failedModels"], s["failedModels"]);
    }
    assert_eq!(result["roles"], all_of(events, "panel_start")[0]["roles"]);
}

#[actix_web::test]
async fn a_specialist_panel_run_streams_its_reports_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let body = request(json!({ "specialists": panel(["sim/alpha", "sim/beta", "sim/gamma"]) }));
    let (run, events) = watch(&app, body).await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    assert_eq!(
        names,
        [
            "panel_start",
            "specialist_start",
            "specialist_complete",
            "specialist_complete",
            "specialist_complete",
            "all_specialists_complete",
            "synthesis_start",
            "synthesis_complete",
            "title_complete",
            "complete"
        ]
    );
    let start = &all_of(&events, "panel_start")[0];
    let keys: Vec<&str> =
        start["roles"].as_array().unwrap().iter().map(|r| r["roleKey"].as_str().unwrap()).collect();
    assert_eq!(keys, ["security_expert", "devops_engineer", "custom_support_lead"]);
    assert_eq!(all_of(&events, "specialist_start")[0]["totalSpecialists"], 3);
    // The specialists run at once: every specialist call starts before any completes.
    let first_done = events.iter().position(|e| e["event"] == "call_complete").unwrap();
    let starts = events[..first_done]
        .iter()
        .filter(|e| e["event"] == "call_start" && e["data"]["role"] == "specialist")
        .count();
    assert_eq!(starts, 3);
    for c in all_of(&events, "specialist_complete") {
        assert_eq!(c["data"]["parseSuccess"], true, "{c}");
    }
    let custom = all_of(&events, "specialist_complete")
        .into_iter()
        .find(|c| c["data"]["roleKey"] == "custom_support_lead")
        .unwrap();
    let criteria: Vec<&str> = custom["data"]["criteriaScores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["criterion"].as_str().unwrap())
        .collect();
    assert_eq!(criteria, ["Customer Impact", "Communication Plan", "Rollback Clarity"]);
    let synthesis = &all_of(&events, "synthesis_complete")[0]["data"];
    assert_eq!(synthesis["model"], "sim/alpha", "the first specialist's model synthesizes");
    assert!(synthesis["topRisk"].is_object(), "{synthesis}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(result["material"]["source"], "content");
    assert_eq!(result["material"]["text"], PLAN);
    assert_eq!(stored["answer"], synthesis["integratedAssessment"]);
    assert!(stored["outcome"].as_str().unwrap().starts_with("3 specialists"), "{stored}");
    // The mode is listed with its roles and settings.
    let (_, modes) = app.get("/api/modes").await;
    let spec = modes["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "specialist_panel")
        .unwrap()
        .clone();
    assert_eq!(spec["view"], true);
    assert_eq!(spec["configSchema"]["properties"]["timeoutMs"]["maximum"], 600000);
    // The default panel needs nothing but a question.
    let (run, events) =
        watch(&app, json!({ "mode": "specialist_panel", "question": "Assess a plan." })).await;
    let roles = &all_of(&events, "panel_start")[0]["roles"];
    assert_eq!(roles[0]["roleKey"], "security_expert");
    assert_eq!(roles[2]["model"], "sim/gamma");
    assert_eq!(app.wait_done(&run).await["status"], "completed");
    app.stop().await;
}

#[actix_web::test]
async fn specialist_panel_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let sec = json!({ "roleId": "security_expert", "model": "sim/alpha" });
    let role = |k: &str, v: Value| {
        let mut p = panel(["sim/alpha", "sim/beta", "sim/gamma"]);
        p[2]["customRole"][k] = v;
        json!({ "specialists": p })
    };
    let c = "modeConfig.specialists[2].customRole";
    let cases: Vec<(Value, String)> = vec![
        (json!({ "specialists": [sec] }), "modeConfig.specialists".into()),
        (json!({ "specialists": vec![sec.clone(); 7] }), "modeConfig.specialists".into()),
        (json!({ "specialists": [sec, sec] }), "modeConfig.specialists[1].roleId".into()),
        (
            json!({ "specialists": [sec, { "roleId": "wizard", "model": "sim/beta" }] }),
            "modeConfig.specialists[1].roleId".into(),
        ),
        (
            json!({ "specialists": [sec, { "roleId": "cost_analyst" }] }),
            "modeConfig.specialists[1].model".into(),
        ),
        (
            json!({ "specialists": [sec, { "roleId": "custom", "model": "sim/beta" }] }),
            "modeConfig.specialists[1].customRole".into(),
        ),
        (
            json!({ "specialists": [sec, { "roleId": "cost_analyst", "model": "sim/beta",
                     "customRole": panel(["a", "b", "c"])[2]["customRole"] }] }),
            "modeConfig.specialists[1].customRole".into(),
        ),
        (role("title", json!("ab")), format!("{c}.title")),
        (role("expertiseAreas", json!("short")), format!("{c}.expertiseAreas")),
        (role("description", json!("too short to say")), format!("{c}.description")),
        (role("priorities", json!(["one", "two"])), format!("{c}.priorities")),
        (role("criteria", json!(["Impact", "Comms", "IMPACT"])), format!("{c}.criteria")),
        (role("criteria", json!(vec!["Criterion"; 9])), format!("{c}.criteria")),
        (json!({ "timeoutMs": 9999 }), "modeConfig.timeoutMs".into()),
        (json!({ "timeoutMs": 600001 }), "modeConfig.timeoutMs".into()),
        (json!({ "content": " " }), "modeConfig.content".into()),
        (json!({ "synthesiserModel": "sim/x" }), "modeConfig.synthesiserModel".into()),
    ];
    for (cfg, field) in cases {
        let (status, body) = app.post("/api/deliberations", &request(cfg.clone())).await;
        assert_eq!((status, body["field"].as_str()), (400, Some(field.as_str())), "{cfg}: {body}");
    }
    // Two custom roles whose titles make the same key.
    let mut p = panel(["sim/alpha", "sim/beta", "sim/gamma"]);
    p[1] = p[2].clone();
    p[1]["customRole"]["title"] = json!("support-lead");
    let (status, body) =
        app.post("/api/deliberations", &request(json!({ "specialists": p }))).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "modeConfig.specialists[2].customRole.title", "{body}");
    let (status, body) = app
        .post("/api/deliberations", &json!({ "mode": "specialist_panel", "question": " " }))
        .await;
    assert_eq!((status, body["field"].as_str()), (400, Some("question")), "{body}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_reports_that_arrived() {
    let app = spawn_app().await;
    // Two specialists answer; the third stalls.
    let body = request(json!({ "specialists": panel(["sim/alpha", "sim/beta", "sim/stall-c"]),
                               "timeoutMs": 60000 }));
    let started = app.start(body).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let mut before = Vec::new();
    while all_of(&before, "specialist_complete").len() < 2 {
        let (hit, seen) = ws.until("event", Some("specialist_complete")).await;
        before.extend(seen);
        before.push(hit);
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let result = &stored["result"];
    assert_eq!(result["specialists"].as_array().unwrap().len(), 2, "{result}");
    assert!(result["synthesis"].is_null());
    assert_eq!(result["material"]["text"], PLAN);
    assert_same(result, &before);
    app.stop().await;
}

#[actix_web::test]
async fn failing_models_are_named_fall_back_or_fail_the_run() {
    let fallback = Fallbacks { chairman: Some("sim/gamma".into()), ..Fallbacks::default() };
    let app = spawn_with(Options { fallback, ..Options::default() }).await;
    // One specialist fails: the synthesis goes on without it, the run is partial.
    let (run, events) = watch(
        &app,
        request(json!({ "specialists": panel(["sim/alpha", "sim/fail-b", "sim/gamma"]) })),
    )
    .await;
    let a = &all_of(&events, "all_specialists_complete")[0]["data"];
    assert_eq!((a["totalSucceeded"].clone(), a["totalFailed"].clone()), (json!(2), json!(1)));
    assert_eq!(a["failedSpecialists"][0]["roleKey"], "devops_engineer");
    assert_eq!(a["failedSpecialists"][0]["model"], "sim/fail-b");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["failedModels"][0]["stage"], "specialist_devops_engineer");
    assert_same(&stored["result"], &events);

    // The synthesizer fails: its backup (`[fallback] chairman`) writes the synthesis.
    let (run, events) = watch(
        &app,
        request(json!({ "specialists": panel(["sim/alpha", "sim/beta", "sim/delta"]),
                        "synthesizerModel": "sim/fail-syn" })),
    )
    .await;
    let s = &all_of(&events, "synthesis_complete")[0];
    assert_eq!(s["data"]["model"], "sim/gamma");
    assert_eq!(s["data"]["fallbackFrom"], "sim/fail-syn");
    assert_eq!(s["failedModels"][0]["fallbackTo"], "sim/gamma");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed");
    assert_same(&stored["result"], &events);
    app.stop().await;

    // Without a backup a failed synthesizer fails the run, the reports kept.
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(json!({ "synthesizerModel": "sim/fail-syn" }))).await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert_eq!(stored["result"]["specialists"].as_array().unwrap().len(), 3, "{stored}");
    assert_same(&stored["result"], &events);
    // Fewer than two reports: the run fails, the one report kept.
    let (run, events) = watch(
        &app,
        request(json!({ "specialists": panel(["sim/fail-a", "sim/empty-b", "sim/gamma"]) })),
    )
    .await;
    assert_eq!(events.last().unwrap()["event"], "error");
    assert!(all_of(&events, "synthesis_start").is_empty());
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    let result = &stored["result"];
    assert_eq!(result["specialists"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(result["failedSpecialists"].as_array().unwrap().len(), 2, "{result}");
    assert_eq!(result["partial"], true);
    assert_same(result, &events);
    app.stop().await;
}
