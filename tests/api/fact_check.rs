//! Fact-Check through the whole server: a run watched over the WebSocket and reloaded as it
//! ran, its 400s by field, a cancel while checkers are out that keeps the finished checks, and
//! failing checkers, extractors and reporters with and without a backup.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

const TEXT: &str = "The Eiffel Tower was completed in 1889 for the World's Fair. It is 330 metres tall. It was the tallest structure in the world until 1930. Many find it beautiful.";

fn request(config: Value) -> Value {
    let mut cfg = json!({ "content": TEXT });
    for (k, v) in config.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    json!({ "mode": "fact_check", "question": "Fact-check this paragraph.", "modeConfig": cfg })
}

/// The stored result is what went out live, check by check.
fn assert_same(result: &Value, events: &[Value]) {
    for c in all_of(events, "checker_complete") {
        let i = c["data"]["checkerIndex"].as_u64().unwrap();
        let stored = result["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["checkerIndex"] == i)
            .unwrap_or_else(|| panic!("check {i} is not stored: {result}"));
        assert_eq!(stored, &c["data"], "check {i}");
    }
    if let Some(e) = all_of(events, "extract_complete").first() {
        assert_eq!(result["extract"], e["data"]);
        assert_eq!(result["claims"], e["data"]["claims"]);
    }
    if let Some(all) = all_of(events, "all_checkers_complete").first() {
        assert_eq!(result["consensus"], all["data"]["consensus"]);
        assert_eq!(result["counts"], all["data"]["counts"]);
    }
    if let Some(done) = all_of(events, "report_complete").first() {
        assert_eq!(result["report"], done["data"]);
        assert_eq!(result["failedModels"], done["failedModels"]);
        assert_eq!(result["partial"], done["partial"]);
    }
}

#[actix_web::test]
async fn a_fact_check_streams_in_order_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(json!({}))).await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    let mut expected: Vec<String> =
        ["factcheck_start", "extract_start", "extract_complete", "verify_start"]
            .map(String::from)
            .to_vec();
    expected.extend(std::iter::repeat_n("checker_complete".to_string(), 3));
    expected.extend(["all_checkers_complete", "report_start", "report_complete"].map(String::from));
    expected.extend(["title_complete".into(), "complete".into()]);
    assert_eq!(names, expected);
    let start = &all_of(&events, "factcheck_start")[0];
    assert_eq!(start["config"]["contentSource"], "user_provided");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(result["content"], TEXT);
    assert_eq!(result["contentSource"], "user_provided");
    assert_eq!(result["claims"].as_array().unwrap().len(), 3, "{result}");
    assert_eq!(result["consensus"].as_array().unwrap().len(), 3);
    assert_eq!(stored["answer"], result["report"]["report"]);
    assert!(result["report"]["reliabilityScore"].is_number(), "{result}");
    assert!(
        stored["outcome"].as_str().unwrap().starts_with("reliability"),
        "{}",
        stored["outcome"]
    );
    assert_eq!(result["partial"], false);

    // Generated content: the generator writes it first; a generator that checks is flagged.
    let (run, events) = watch(
        &app,
        json!({ "mode": "fact_check", "question": "Tell me about the Eiffel Tower.",
                "modeConfig": { "generatorModel": "sim/alpha", "checkerModels": ["sim/alpha", "sim/beta"] } }),
    )
    .await;
    let start = &all_of(&events, "factcheck_start")[0];
    assert_eq!(start["config"]["contentSource"], "generated");
    assert!(start["config"]["biasWarning"].is_string(), "{start}");
    assert_eq!(
        stage_events(&events)[1..3],
        ["generate_start".to_string(), "generate_complete".into()]
    );
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["contentSource"], "generated");
    assert_eq!(
        stored["result"]["content"],
        all_of(&events, "generate_complete")[0]["data"]["content"]
    );
    assert_same(&stored["result"], &events);
    app.stop().await;
}

#[actix_web::test]
async fn fact_check_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({ "checkerModels": [] }), "modeConfig.checkerModels"),
        (json!({ "checkerModels": ["a", "b", "c", "d", "e"] }), "modeConfig.checkerModels"),
        (json!({ "checkerModels": ["sim/alpha", "sim/alpha"] }), "modeConfig.checkerModels"),
        (json!({ "maxContentLength": 100 }), "modeConfig.maxContentLength"),
        (json!({ "maxContentLength": 60000 }), "modeConfig.maxContentLength"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 200000 }), "modeConfig.timeoutMs"),
        (json!({ "globalTimeoutMs": 1000 }), "modeConfig.globalTimeoutMs"),
        (json!({ "globalTimeoutMs": 2000000 }), "modeConfig.globalTimeoutMs"),
        (json!({ "reporterModel": " " }), "modeConfig.reporterModel"),
        (json!({ "content": "" }), "modeConfig.content"),
        (json!({ "checkers": ["a"] }), "modeConfig.checkers"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &request(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (status, b) = app.post("/api/deliberations", &json!({ "mode": "fact_check" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_checks_that_finished() {
    let app = spawn_app().await;
    let started = app
        .start(request(json!({ "checkerModels": ["sim/alpha", "sim/beta", "sim/stall-3"] })))
        .await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    for _ in 0..2 {
        ws.until("event", Some("checker_complete")).await;
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    assert_eq!(r["checks"].as_array().unwrap().len(), 2, "{stored}");
    assert_eq!(r["claims"].as_array().unwrap().len(), 3, "{r}");
    assert!(r["consensus"].is_null() && r["report"].is_null(), "{r}");
    assert_eq!(r["content"], TEXT);
    app.stop().await;
}

#[actix_web::test]
async fn failing_checkers_extractors_and_reporters() {
    let backups = Fallbacks {
        chairman: Some("sim/delta".into()),
        facilitator: Some("sim/delta".into()),
        ..Fallbacks::default()
    };
    let app = spawn_with(Options { fallback: backups, ..Options::default() }).await;
    // One checker of three fails: the run goes on, partial, and says which one.
    let (run, events) =
        watch(&app, request(json!({ "checkerModels": ["sim/alpha", "sim/fail-2", "sim/gamma"] })))
            .await;
    let all = &all_of(&events, "all_checkers_complete")[0]["data"];
    assert_eq!(all["usableCheckers"], 2, "{all}");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["failedModels"][0]["role"], "checker");
    assert_eq!(stored["result"]["checks"][1]["failed"], true);
    assert_same(&stored["result"], &events);

    // The extractor and the reporter fail: their backups stand in.
    let (run, events) = watch(
        &app,
        request(json!({ "checkerModels": ["sim/alpha"], "extractorModel": "sim/fail-ext", "reporterModel": "sim/fail-rep" })),
    )
    .await;
    let starts = all_of(&events, "fallback_start");
    let keys: Vec<&str> = starts.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["extract:backup", "report:backup"]);
    let r = &all_of(&events, "report_complete")[0];
    assert_eq!(
        (r["data"]["model"].clone(), r["data"]["fallbackFrom"].clone()),
        (json!("sim/delta"), json!("sim/fail-rep"))
    );
    assert_eq!(all_of(&events, "extract_complete")[0]["data"]["fallbackFrom"], "sim/fail-ext");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_same(&stored["result"], &events);
    app.stop().await;

    // Without backups: a failed reporter leaves the server's table; a failed extractor fails.
    let app = spawn_app().await;
    let (run, events) = watch(
        &app,
        request(json!({ "checkerModels": ["sim/alpha"], "reporterModel": "sim/fail-rep" })),
    )
    .await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let report = &stored["result"]["report"];
    assert_eq!(
        (report["fallback"].clone(), report["reliabilityScore"].clone()),
        (json!(true), Value::Null)
    );
    assert!(stored["answer"]
        .as_str()
        .unwrap()
        .contains("| Claim | Verdict | Agreement | Correction |"));
    assert_eq!(stored["result"]["partial"], true);
    assert_same(&stored["result"], &events);
    let (run, events) = watch(&app, request(json!({ "extractorModel": "sim/fail-ext" }))).await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("extractor"), "{stored}");

    // No usable checker (one fails, one answers out of format): fails, claims kept.
    let (run, _) =
        watch(&app, request(json!({ "checkerModels": ["sim/fail-1", "sim/malformed-2"] }))).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed", "{stored}");
    assert!(stored["error"].as_str().unwrap().contains("usable"), "{stored}");
    assert_eq!(stored["result"]["claims"].as_array().unwrap().len(), 3);
    assert_eq!(stored["result"]["checks"][1]["parseSuccess"], false);

    // A malformed checker beside a good one is no failure: it does not count.
    let (run, events) =
        watch(&app, request(json!({ "checkerModels": ["sim/alpha", "sim/malformed-2"] }))).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(all_of(&events, "all_checkers_complete")[0]["data"]["usableCheckers"], 1);
    assert_eq!(stored["result"]["partial"], false);
    assert_same(&stored["result"], &events);
    app.stop().await;
}
