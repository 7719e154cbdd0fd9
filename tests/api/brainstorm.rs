//! Brainstorm through the whole server: a run watched over the WebSocket and reloaded as it
//! ran, its 400s by field, cancels during ideation and while scorers are out that keep the
//! finished stages, and failing ideators, curators and refiners with and without a backup.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

const CHALLENGE: &str = "How could a small city library attract more teenagers?";

fn request(config: Value) -> Value {
    json!({ "mode": "brainstorm", "question": CHALLENGE, "modeConfig": config })
}

/// The stored result is what went out live, stage by stage.
fn assert_same(result: &Value, events: &[Value]) {
    let ideation: Vec<Value> =
        all_of(events, "ideation_complete").iter().map(|e| e["data"].clone()).collect();
    let mut by_index = ideation.clone();
    by_index.sort_by_key(|d| d["index"].as_u64());
    assert_eq!(result["ideas"]["models"], json!(by_index), "ideas");
    if let Some(all) = all_of(events, "all_ideation_complete").first() {
        for k in ["totalIdeas", "modelCount", "warnings"] {
            assert_eq!(result["ideas"][k], all["data"][k], "{k}");
        }
    }
    match all_of(events, "clustering_complete").first() {
        Some(c) => assert_eq!(result["clustering"], c["data"]),
        None => assert!(result["clustering"].is_null()),
    }
    let mut scores: Vec<Value> =
        all_of(events, "scorer_complete").iter().map(|e| e["data"].clone()).collect();
    scores.sort_by_key(|d| d["index"].as_u64());
    assert_eq!(result["scores"], json!(scores), "scores");
    match all_of(events, "all_scoring_complete").first() {
        Some(r) => assert_eq!(result["ranking"], r["data"]),
        None => assert!(result["ranking"].is_null()),
    }
    if let Some(done) = all_of(events, "refinement_complete").first() {
        assert_eq!(result["refinement"], done["data"]);
        assert_eq!(result["failedModels"], done["failedModels"]);
        assert_eq!(result["partial"], done["partial"]);
    }
}

#[actix_web::test]
async fn a_brainstorm_streams_in_order_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(
        &app,
        request(
            json!({ "models": ["sim/alpha", "sim/beta", "sim/gamma"], "curatorModel": "sim/delta",
                        "refinerModel": "sim/delta" }),
        ),
    )
    .await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    let mut expected: Vec<String> = vec!["brainstorm_start".into(), "ideation_start".into()];
    expected.extend(std::iter::repeat_n("ideation_complete".to_string(), 3));
    expected.extend(
        ["all_ideation_complete", "clustering_start", "clustering_complete"].map(String::from),
    );
    let scored = names.iter().any(|n| n == "scoring_start");
    if scored {
        expected.push("scoring_start".into());
        expected.extend(std::iter::repeat_n("scorer_complete".to_string(), 3));
    }
    expected.extend(
        [
            "all_scoring_complete",
            "refinement_start",
            "refinement_complete",
            "title_complete",
            "complete",
        ]
        .map(String::from),
    );
    assert_eq!(names, expected);
    let start = &all_of(&events, "brainstorm_start")[0];
    assert_eq!(start["config"]["minIdeasPerModel"], 5);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert!(result["ideas"]["totalIdeas"].as_u64().unwrap() >= 10, "{result}");
    let clusters = result["clustering"]["clusters"].as_array().unwrap();
    assert!(clusters.len() >= 3, "{result}");
    let winner = &result["ranking"]["rankedClusters"][0];
    assert_eq!(result["refinement"]["clusterId"], winner["id"]);
    assert_eq!(stored["answer"], result["refinement"]["proposal"]);
    assert!(stored["answer"].as_str().unwrap().starts_with("## Proposal:"), "{}", stored["answer"]);
    assert!(
        stored["outcome"].as_str().unwrap().starts_with("Proposal from the cluster \""),
        "{}",
        stored["outcome"]
    );
    assert_eq!(result["partial"], false);
    // The labels are the run's: each idea carries its model's.
    let labels = &start["config"]["labels"];
    for m in result["ideas"]["models"].as_array().unwrap() {
        let i = m["index"].as_u64().unwrap() as usize;
        assert_eq!(m["sourceLabel"], labels[i]["sourceLabel"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn brainstorm_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({ "models": ["sim/a", "sim/b"] }), "modeConfig.models"),
        (
            json!({ "models": ["sim/a", "sim/b", "sim/c", "sim/d", "sim/e", "sim/f", "sim/g"] }),
            "modeConfig.models",
        ),
        (json!({ "models": ["sim/a", " ", "sim/c"] }), "modeConfig.models"),
        (json!({ "curatorModel": "" }), "modeConfig.curatorModel"),
        (json!({ "refinerModel": " " }), "modeConfig.refinerModel"),
        (json!({ "minIdeasPerModel": 2 }), "modeConfig.minIdeasPerModel"),
        (json!({ "minIdeasPerModel": 11 }), "modeConfig.minIdeasPerModel"),
        (json!({ "minIdeasPerModel": "five" }), "modeConfig.minIdeasPerModel"),
        (json!({ "maxClusters": 2 }), "modeConfig.maxClusters"),
        (json!({ "maxClusters": 9 }), "modeConfig.maxClusters"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 180001 }), "modeConfig.timeoutMs"),
        (json!({ "globalTimeoutMs": 1000 }), "modeConfig.globalTimeoutMs"),
        (json!({ "globalTimeoutMs": 2000000 }), "modeConfig.globalTimeoutMs"),
        (json!({ "clusters": 3 }), "modeConfig.clusters"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &request(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (status, b) = app.post("/api/deliberations", &json!({ "mode": "brainstorm" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_stages_that_finished() {
    let app = spawn_app().await;
    let started =
        app.start(request(json!({ "models": ["sim/alpha", "sim/beta", "sim/stall-3"] }))).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    // The stalling model never lists its ideas: cancel once the other two have.
    for _ in 0..2 {
        ws.until("event", Some("ideation_complete")).await;
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    assert_eq!(r["ideas"]["models"].as_array().unwrap().len(), 2, "{r}");
    assert!(r["clustering"].is_null() && r["refinement"].is_null(), "{r}");
    app.stop().await;

    // Cancelled while the scorers are out: the ideas and the clusters are kept.
    let app = spawn_with(Options { sim_latency_ms: 300, ..Options::default() }).await;
    let started = app.start(request(json!({}))).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    ws.until("event", Some("scoring_start")).await;
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    assert_eq!(r["ideas"]["models"].as_array().unwrap().len(), 3, "{r}");
    assert!(!r["clustering"]["clusters"].as_array().unwrap().is_empty(), "{r}");
    assert!(r["scores"].as_array().unwrap().len() < 3, "{r}");
    assert!(r["refinement"].is_null(), "{r}");
    app.stop().await;
}

#[actix_web::test]
async fn failing_ideators_curators_and_refiners() {
    let backups = Fallbacks {
        chairman: Some("sim/delta".into()),
        facilitator: Some("sim/delta".into()),
        ..Fallbacks::default()
    };
    let app = spawn_with(Options { fallback: backups, ..Options::default() }).await;
    // One ideator fails; curator and refiner fail and their backups stand in.
    let (run, events) = watch(
        &app,
        request(json!({ "models": ["sim/alpha", "sim/fail-2", "sim/gamma"],
                        "curatorModel": "sim/fail-cur", "refinerModel": "sim/fail-ref" })),
    )
    .await;
    let starts = all_of(&events, "fallback_start");
    let keys: Vec<&str> = starts.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["cluster:backup", "refine:backup"]);
    let summary = &all_of(&events, "all_ideation_complete")[0]["data"];
    assert_eq!(summary["modelCount"], 2);
    assert!(summary["warnings"].to_string().contains("sim/fail-2 failed"), "{summary}");
    let c = &all_of(&events, "clustering_complete")[0]["data"];
    assert_eq!(
        (c["model"].clone(), c["fallbackFrom"].clone()),
        (json!("sim/delta"), json!("sim/fail-cur"))
    );
    let r = &all_of(&events, "refinement_complete")[0];
    assert_eq!(
        (r["data"]["model"].clone(), r["data"]["fallbackFrom"].clone()),
        (json!("sim/delta"), json!("sim/fail-ref"))
    );
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    let roles: Vec<&str> = stored["result"]["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["role"].as_str().unwrap())
        .collect();
    assert!(
        roles.contains(&"ideator") && roles.contains(&"curator") && roles.contains(&"refiner"),
        "{roles:?}"
    );
    assert_same(&stored["result"], &events);
    app.stop().await;

    // Without backups: a dead curator leaves the refiner every idea; a dead refiner leaves the
    // best material with a note.
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(json!({ "curatorModel": "sim/fail-cur" }))).await;
    let c = &all_of(&events, "clustering_complete")[0]["data"];
    assert_eq!(c["fallback"], true);
    assert!(all_of(&events, "scoring_start").is_empty());
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["refinement"]["clusterId"], Value::Null);
    assert_same(&stored["result"], &events);
    let (run, events) = watch(&app, request(json!({ "refinerModel": "sim/fail-ref" }))).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["refinement"]["fallback"], true);
    assert!(stored["answer"].as_str().unwrap().contains("The refiner could not be reached"));
    assert_same(&stored["result"], &events);
    // Two ideators of three fail (an empty reply is a failure): the run fails, the one list
    // kept.
    let (run, _) =
        watch(&app, request(json!({ "models": ["sim/alpha", "sim/fail-1", "sim/empty-2"] }))).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed", "{stored}");
    assert!(stored["error"].as_str().unwrap().contains("at least 2"), "{stored}");
    assert_eq!(stored["result"]["ideas"]["models"].as_array().unwrap().len(), 1);
    assert_eq!(stored["result"]["failedModels"].as_array().unwrap().len(), 2);
    app.stop().await;
}
