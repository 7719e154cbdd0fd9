//! Peer Review through the whole server: a run watched over the WebSocket and reloaded as it
//! ran, its 400s by field, a cancel while reviewers are out that keeps the finished reviews,
//! and failing reviewers and consolidators with and without a backup.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

const WORK: &str = "Uploads go from the browser to one API server, which writes them to a local disk and records them in one PostgreSQL instance. A nightly cron job copies the disk to S3.";

fn request(config: Value) -> Value {
    let mut cfg = json!({ "content": WORK });
    for (k, v) in config.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    json!({ "mode": "peer_review", "question": "Review our upload service.", "modeConfig": cfg })
}

/// The stored result is what went out live, review by review.
fn assert_same(result: &Value, events: &[Value]) {
    for r in all_of(events, "reviewer_complete") {
        let i = r["data"]["reviewerIndex"].as_u64().unwrap();
        let stored = result["reviews"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["reviewerIndex"] == i)
            .unwrap_or_else(|| panic!("review {i} is not stored: {result}"));
        assert_eq!(stored, &r["data"], "review {i}");
    }
    if let Some(all) = all_of(events, "all_reviewers_complete").first() {
        assert_eq!(result["reviews"], all["data"]["reviews"]);
        assert_eq!(result["failedReviewers"], all["data"]["failedReviewers"]);
        assert_eq!(result["statistics"], all["data"]["statistics"]);
    }
    if let Some(done) = all_of(events, "consolidation_complete").first() {
        assert_eq!(result["consolidation"], done["data"]);
        assert_eq!(result["failedModels"], done["failedModels"]);
        assert_eq!(result["partial"], done["partial"]);
    }
}

#[actix_web::test]
async fn a_peer_review_streams_in_order_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(json!({}))).await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    let mut expected = vec!["review_start".to_string(), "reviewers_start".into()];
    expected.extend(std::iter::repeat_n("reviewer_complete".to_string(), 3));
    expected.extend(
        ["all_reviewers_complete", "consolidation_start", "consolidation_complete"]
            .map(String::from),
    );
    expected.extend(["title_complete".into(), "complete".into()]);
    assert_eq!(names, expected);
    let start = &all_of(&events, "review_start")[0];
    assert_eq!(
        (start["mode"].clone(), start["reviewType"].clone()),
        (json!("peer_review"), json!("architecture_review"))
    );
    assert_eq!(all_of(&events, "reviewers_start")[0]["totalReviewers"], 3);
    // The consolidator is called only once every review is in.
    let keys: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| matches!(e["event"].as_str(), Some("call_start" | "call_complete")))
        .filter(|e| e["data"]["key"] != "title")
        .map(|e| (e["event"].as_str().unwrap(), e["data"]["key"].as_str().unwrap()))
        .collect();
    let con = keys.iter().position(|k| *k == ("call_start", "consolidation")).unwrap();
    assert_eq!(keys[..con].iter().filter(|k| k.0 == "call_complete").count(), 3);
    let stats = &all_of(&events, "all_reviewers_complete")[0]["data"]["statistics"];
    assert_eq!(stats["consensusScores"].as_array().unwrap().len(), 6, "{stats}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(result["work"], WORK);
    assert_eq!(result["reviewType"], "architecture_review");
    assert_eq!(result["rubric"]["criteria"][0]["name"], "Scalability");
    assert_eq!(stored["answer"], result["consolidation"]["consolidatedReport"]);
    assert!(result["reviews"].as_array().unwrap().iter().all(|r| r["parseSuccess"] == true));
    assert!(!result["consolidation"]["actionItems"].as_array().unwrap().is_empty());
    assert!(
        stored["outcome"].as_str().unwrap().starts_with("3 reviews, consensus"),
        "{}",
        stored["outcome"]
    );
    assert_eq!(result["partial"], false);
    app.stop().await;
}

#[actix_web::test]
async fn peer_review_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let crit = |name: &str, weight: Value| json!({ "name": name, "description": "a long enough line", "weight": weight });
    let rubric = |criteria: Vec<Value>| json!({ "reviewType": "custom", "customRubric": { "name": "Mine", "description": "ten chars or more", "criteria": criteria } });
    let three = || vec![crit("One", json!(1)), crit("Two", json!(2)), crit("Three", json!(3))];
    let mut dup = three();
    dup[2] = crit("  two ", json!(3));
    let mut heavy = three();
    heavy[1] = crit("Two", json!(6));
    let mut short = three();
    short[0]["description"] = json!("short");
    let cases = [
        (json!({ "reviewerModels": ["sim/alpha"] }), "modeConfig.reviewerModels"),
        (
            json!({ "reviewerModels": ["a", "b", "c", "d", "e", "f", "g"] }),
            "modeConfig.reviewerModels",
        ),
        (json!({ "consolidatorModel": " " }), "modeConfig.consolidatorModel"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 700000 }), "modeConfig.timeoutMs"),
        (json!({ "reviewType": "vibes" }), "modeConfig.reviewType"),
        (json!({ "reviewType": "custom" }), "modeConfig.customRubric"),
        (
            json!({ "reviewType": "code_review", "customRubric": { "name": "x" } }),
            "modeConfig.customRubric",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "ab", "description": "ten chars or more", "criteria": three() } }),
            "modeConfig.customRubric.name",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "too short", "criteria": three() } }),
            "modeConfig.customRubric.description",
        ),
        (rubric(three()[..2].to_vec()), "modeConfig.customRubric.criteria"),
        (rubric(dup), "modeConfig.customRubric.criteria[2].name"),
        (rubric(heavy), "modeConfig.customRubric.criteria[1].weight"),
        (rubric(short), "modeConfig.customRubric.criteria[0].description"),
        (
            rubric(vec![crit("One", json!(1)), crit("Two", json!(2)), crit("X", json!(3))]),
            "modeConfig.customRubric.criteria[2].name",
        ),
        (
            rubric(vec![crit("One", json!(1)), crit("Two", json!(2)), crit("Three", json!(2.5))]),
            "modeConfig.customRubric.criteria[2].weight",
        ),
        (json!({ "content": "" }), "modeConfig.content"),
        (json!({ "reviewerModel": ["a", "b"] }), "modeConfig.reviewerModel"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &request(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (status, b) = app.post("/api/deliberations", &json!({ "mode": "peer_review" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
    // A custom rubric that follows every rule runs, and its criteria are the ones scored.
    let (status, b) = app.post("/api/deliberations", &request(rubric(three()))).await;
    assert!(status == 200 || status == 202, "{status}: {b}");
    let stored = app.wait_done(b["runId"].as_str().unwrap()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["reviewType"], "custom");
    assert_eq!(stored["result"]["rubric"]["name"], "Mine");
    for r in stored["result"]["reviews"].as_array().unwrap() {
        let names: Vec<&str> = r["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["criterion"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["One", "Two", "Three"]);
        assert_eq!(r["parseSuccess"], true, "{r}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_reviews_that_finished() {
    let app = spawn_app().await;
    let started = app
        .start(request(json!({ "reviewerModels": ["sim/alpha", "sim/beta", "sim/stall-3"] })))
        .await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let mut done = 0;
    while done < 2 {
        ws.until("event", Some("reviewer_complete")).await;
        done += 1;
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    assert_eq!(r["reviews"].as_array().unwrap().len(), 2, "{stored}");
    assert!(r["statistics"].is_null() && r["consolidation"].is_null(), "{r}");
    assert_eq!(r["work"], WORK);
    app.stop().await;
}

#[actix_web::test]
async fn failing_reviewers_and_consolidators() {
    let foreman = Fallbacks { foreman: Some("sim/delta".into()), ..Fallbacks::default() };
    let app = spawn_with(Options { fallback: foreman, ..Options::default() }).await;
    // One reviewer of three fails: the run goes on, partial, and says which one.
    let (run, events) =
        watch(&app, request(json!({ "reviewerModels": ["sim/alpha", "sim/fail-2", "sim/gamma"] })))
            .await;
    let all = &all_of(&events, "all_reviewers_complete")[0]["data"];
    assert_eq!(all["failedReviewers"][0]["reviewerIndex"], 2, "{all}");
    assert_eq!(all["reviews"].as_array().unwrap().len(), 2);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["failedModels"][0]["role"], "reviewer");
    assert_same(&stored["result"], &events);

    // The consolidator fails: its backup (`[fallback] foreman`) writes the report.
    let (run, events) = watch(
        &app,
        request(json!({ "reviewerModels": ["sim/alpha", "sim/beta"], "consolidatorModel": "sim/fail-con" })),
    )
    .await;
    assert_eq!(all_of(&events, "fallback_start")[0]["key"], "consolidation:backup");
    let c = &all_of(&events, "consolidation_complete")[0];
    assert_eq!(
        (c["data"]["model"].clone(), c["data"]["fallbackFrom"].clone()),
        (json!("sim/delta"), json!("sim/fail-con"))
    );
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["failedModels"][0]["fallbackTo"], "sim/delta");
    assert_same(&stored["result"], &events);
    app.stop().await;

    // Without a backup a failed consolidator fails the run, reviews and statistics kept.
    let app = spawn_app().await;
    let (run, events) = watch(
        &app,
        request(json!({ "reviewerModels": ["sim/alpha", "sim/beta"], "consolidatorModel": "sim/fail-con" })),
    )
    .await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("consolidator"), "{stored}");
    assert_eq!(stored["result"]["reviews"].as_array().unwrap().len(), 2);
    assert!(stored["result"]["statistics"].is_object());
    assert_same(&stored["result"], &events);

    // Fewer than two reviews: the run fails, the review kept.
    let (run, _) = watch(
        &app,
        request(json!({ "reviewerModels": ["sim/alpha", "sim/fail-2", "sim/empty-3"] })),
    )
    .await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("at least 2"), "{stored}");
    assert_eq!(stored["result"]["reviews"].as_array().unwrap().len(), 1);
    assert_eq!(stored["result"]["failedReviewers"].as_array().unwrap().len(), 2);

    // A malformed reviewer is no failure: its review is kept, marked unparsed.
    let (run, events) =
        watch(&app, request(json!({ "reviewerModels": ["sim/alpha", "sim/malformed-2"] }))).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let messy = &stored["result"]["reviews"][1];
    assert_eq!(messy["parseSuccess"], false, "{messy}");
    assert!(messy["scores"].as_array().unwrap().iter().all(|s| s["score"].is_null()));
    assert_eq!(stored["result"]["partial"], false);
    assert_same(&stored["result"], &events);
    app.stop().await;
}
