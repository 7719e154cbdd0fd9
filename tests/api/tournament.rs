//! Tournament through the whole server: a run watched over the WebSocket and reloaded as it
//! ran, its 400s, a cancel between rounds that keeps the finished matches, failing contestants
//! and a failing judge.

use serde_json::{json, Value};

use crate::helpers::*;

fn request(contestants: &[&str], judge: &str) -> Value {
    json!({ "mode": "tournament", "question": "What is the best way to learn a new language?",
            "modeConfig": { "contestantModels": contestants, "judgeModel": judge } })
}

/// Every live event is the stored result, field by field.
fn assert_same(result: &Value, events: &[Value]) {
    for m in all_of(events, "matchup_complete") {
        let round = &result["rounds"].as_array().unwrap().iter().find(|r| r["round"] == m["round"]);
        let stored = round.unwrap()["matches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["matchIndex"] == m["matchIndex"])
            .unwrap_or_else(|| panic!("match {m} not stored"));
        for (k, v) in m["data"].as_object().unwrap() {
            assert_eq!(&stored[k], v, "{k}");
        }
    }
    if let Some(c) = all_of(events, "collect_complete").first() {
        assert_eq!(result["contestants"], c["data"]);
    }
    if let Some(b) = all_of(events, "bracket_seeded").first() {
        assert_eq!(result["bracket"], b["data"]);
    }
    if let Some(w) = all_of(events, "winner_declared").first() {
        assert_eq!(result["champion"], w["data"]);
        assert_eq!(result["partial"], w["partial"]);
        assert_eq!(result["failedModels"], w["failedModels"]);
    }
}

#[actix_web::test]
async fn a_tournament_streams_its_bracket_in_order_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let five = ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon", "sim/zeta"];
    let (run, events) = watch(&app, request(&five, "sim/delta")).await;
    assert_contiguous(&events, 1);
    let names: Vec<String> =
        stage_events(&events).into_iter().filter(|n| n != "matchup_complete").collect();
    let mut expected: Vec<String> =
        ["tournament_start", "collect_start", "collect_complete", "bracket_seeded"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for _ in 0..3 {
        expected.extend(["round_start".into(), "round_complete".into()]);
    }
    expected.extend(["winner_declared".into(), "title_complete".into(), "complete".into()]);
    assert_eq!(names, expected);
    // Each match's event comes between its round's start and end.
    let order = stage_events(&events);
    let starts: Vec<usize> =
        order.iter().enumerate().filter(|(_, n)| *n == "round_start").map(|(i, _)| i).collect();
    let matches: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, n)| *n == "matchup_complete")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(matches.len(), 4);
    assert!(matches[0] > starts[0] && matches[0] < starts[1]);
    let seeded = &all_of(&events, "bracket_seeded")[0]["data"];
    assert_eq!(seeded["byes"], json!([3, 4, 5]));
    assert_eq!(seeded["matchups"][0], json!({ "matchIndex": 1, "seedA": 1, "seedB": 2 }));
    assert_eq!(seeded["matchups"][1]["seedB"], Value::Null);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(stored["answer"], result["champion"]["response"]);
    assert_eq!(result["rounds"].as_array().unwrap().len(), 3);
    let seed = result["champion"]["seed"].as_u64().unwrap() as usize;
    assert_eq!(
        result["contestants"][seed - 1]["response"],
        stored["answer"],
        "the champion's own answer"
    );
    assert!(stored["outcome"].as_str().unwrap().starts_with("Seed "), "{}", stored["outcome"]);
    app.stop().await;
}

#[actix_web::test]
async fn tournament_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let body = |cfg: Value| json!({ "mode": "tournament", "question": "q", "modeConfig": cfg });
    let four = json!(["sim/a", "sim/b", "sim/c", "sim/d"]);
    let cases = [
        (json!({ "contestantModels": ["sim/a", "sim/b", "sim/c"] }), "modeConfig.contestantModels"),
        (
            json!({ "contestantModels": ["a", "b", "c", "d", "e", "f", "g", "h", "i"] }),
            "modeConfig.contestantModels",
        ),
        (
            json!({ "contestantModels": ["sim/a", "", "sim/c", "sim/d"] }),
            "modeConfig.contestantModels",
        ),
        (json!({ "contestantModels": four, "judgeModel": "sim/c" }), "modeConfig.judgeModel"),
        (json!({ "judgeModel": "sim/alpha" }), "modeConfig.judgeModel"),
        (json!({ "judgeModel": " " }), "modeConfig.judgeModel"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 300001 }), "modeConfig.timeoutMs"),
        (json!({ "bracketSize": 8 }), "modeConfig.bracketSize"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &body(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (status, b) =
        app.post("/api/deliberations", &json!({ "mode": "tournament", "question": "" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_between_rounds_keeps_the_finished_matches() {
    let app = spawn_with(Options { sim_latency_ms: 300, ..Options::default() }).await;
    let eight = ["sim/a", "sim/b", "sim/c", "sim/d", "sim/e", "sim/f", "sim/g", "sim/h"];
    let started = app.start(request(&eight, "sim/delta")).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    loop {
        let (e, _) = ws.until("event", Some("round_start")).await;
        if e["data"]["round"] == 2 {
            break;
        }
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    assert_eq!(r["contestants"].as_array().unwrap().len(), 8, "{r}");
    assert_eq!(r["rounds"][0]["matches"].as_array().unwrap().len(), 4, "{r}");
    assert!(r["rounds"][1]["matches"].as_array().is_none_or(|m| m.len() < 2), "{r}");
    assert_eq!(r["champion"], Value::Null);
    app.stop().await;
}

#[actix_web::test]
async fn failing_contestants_are_left_out_and_a_dead_judge_fails_the_run() {
    let app = spawn_app().await;
    let (run, events) = watch(
        &app,
        request(&["sim/alpha", "sim/fail-1", "sim/empty-2", "sim/beta", "sim/gamma"], "sim/delta"),
    )
    .await;
    let seeded = &all_of(&events, "bracket_seeded")[0]["data"];
    assert_eq!(
        seeded["contestants"],
        json!([{ "seed": 1, "model": "sim/alpha" }, { "seed": 2, "model": "sim/beta" },
               { "seed": 3, "model": "sim/gamma" }])
    );
    assert_eq!(seeded["byes"], json!([3]));
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    let mut failed: Vec<&str> = stored["result"]["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["model"].as_str().unwrap())
        .collect();
    failed.sort();
    assert_eq!(failed, ["sim/empty-2", "sim/fail-1"]);
    assert_same(&stored["result"], &events);

    // The judge fails every call: the better seeds advance in round 1, then the run fails.
    let (run, events) =
        watch(&app, request(&["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"], "sim/fail-j"))
            .await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let decided: Vec<Value> = all_of(&events, "matchup_complete")
        .iter()
        .map(|m| m["data"]["decidedBy"].clone())
        .collect();
    assert_eq!(decided, [json!("default_seed"), json!("default_seed")]);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("failed every match"), "{stored}");
    assert_eq!(stored["result"]["rounds"][0]["matches"].as_array().unwrap().len(), 2);

    // Fewer than two answers: the run fails.
    let (run, _) =
        watch(&app, request(&["sim/alpha", "sim/fail-1", "sim/fail-2", "sim/fail-3"], "sim/delta"))
            .await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("at least 2"), "{stored}");
    app.stop().await;
}

#[actix_web::test]
async fn a_messy_judge_is_asked_again_or_the_coin_decides_and_both_are_stored() {
    let app = spawn_app().await;
    let eight = ["sim/a", "sim/b", "sim/c", "sim/d", "sim/e", "sim/f", "sim/g", "sim/h"];
    let (run, events) = watch(&app, request(&eight, "sim/malformed-judge")).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_same(&stored["result"], &events);
    for m in all_of(&events, "matchup_complete") {
        let d = m["data"]["decidedBy"].as_str().unwrap();
        assert!(["judge", "judge_retry", "coin_flip"].contains(&d), "{m}");
    }
    app.stop().await;
}
