//! Decompose through the whole server: a run watched over the WebSocket and reloaded as it ran
//! (waves in dependency order), its 400s, a cancel between waves that keeps the first, failing
//! workers, planner and assembler with and without backups, and a planner whose plan has a
//! cycle.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

fn request(workers: &[&str]) -> Value {
    json!({ "mode": "decompose",
            "question": "Plan the launch of a small online bakery: market, menu, pricing and budget.",
            "modeConfig": { "workerModels": workers } })
}

/// Every live event is the stored result, field by field.
fn assert_same(result: &Value, events: &[Value]) {
    if let Some(p) = all_of(events, "plan_complete").first() {
        for (k, v) in p["data"].as_object().unwrap() {
            assert_eq!(&result["plan"][k], v, "plan.{k}");
        }
    }
    if let Some(a) = all_of(events, "assignment_complete").first() {
        assert_eq!(result["assignments"], a["data"]["assignments"]);
    }
    for t in all_of(events, "task_complete") {
        let wave = result["waves"].as_array().unwrap().iter().find(|w| w["wave"] == t["wave"]);
        let stored = wave.unwrap()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["taskId"] == t["data"]["taskId"])
            .unwrap_or_else(|| panic!("task {t} not stored"));
        assert_eq!(stored, &t["data"]);
    }
    if let Some(a) = all_of(events, "assembly_complete").first() {
        assert_eq!(result["assembly"], a["data"]);
        assert_eq!(result["partial"], a["partial"]);
        assert_eq!(result["failedModels"], a["failedModels"]);
    }
}

/// The waves ran in order: each task's wave started after every dependency had ended, and
/// each task ended between its wave's start and end.
fn assert_dependency_order(events: &[Value]) {
    let plan = &all_of(events, "plan_complete")[0]["data"];
    let pos = |name: &str, f: &dyn Fn(&Value) -> bool| {
        events.iter().position(|e| e["event"] == name && f(&e["data"]))
    };
    for task in plan["tasks"].as_array().unwrap() {
        let id = &task["id"];
        let Some(done) = pos("task_complete", &|d| d["data"]["taskId"] == *id) else { continue };
        let wave = events[done]["data"]["wave"].clone();
        let start = pos("wave_start", &|d| d["wave"] == wave).unwrap();
        let end = pos("wave_complete", &|d| d["wave"] == wave).unwrap();
        assert!(start < done && done < end, "{id} outside its wave");
        for dep in task["dependencies"].as_array().unwrap() {
            let dep_done = pos("task_complete", &|d| d["data"]["taskId"] == *dep).unwrap();
            assert!(dep_done < start, "{id} started before its dependency {dep} ended");
        }
    }
}

#[actix_web::test]
async fn a_decomposition_runs_its_waves_in_order_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(&["sim/alpha", "sim/beta", "sim/gamma"])).await;
    assert_contiguous(&events, 1);
    let plan = &all_of(&events, "plan_complete")[0]["data"];
    let waves = plan["executionWaves"].as_array().unwrap().len();
    assert!(waves >= 2, "{plan}");
    let tasks = plan["tasks"].as_array().unwrap().len();
    let names: Vec<String> =
        stage_events(&events).into_iter().filter(|n| n != "task_complete").collect();
    let mut expected: Vec<String> =
        ["decompose_start", "plan_start", "plan_complete", "assignment_complete"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for _ in 0..waves {
        expected.extend(["wave_start".into(), "wave_complete".into()]);
    }
    expected.extend(
        ["assembly_start", "assembly_complete", "title_complete", "complete"].map(String::from),
    );
    assert_eq!(names, expected);
    assert_eq!(all_of(&events, "task_complete").len(), tasks);
    assert_dependency_order(&events);
    let assigned = &all_of(&events, "assignment_complete")[0]["data"]["assignments"];
    assert_eq!(assigned[0]["model"], "sim/alpha");
    assert_eq!(assigned[1]["model"], "sim/beta");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(stored["answer"], result["assembly"]["response"]);
    assert_eq!(result["stats"]["completed"].as_u64(), Some(tasks as u64));
    assert_eq!(result["stats"]["waves"].as_u64(), Some(waves as u64));
    assert_eq!(result["partial"], false);
    let outcome = stored["outcome"].as_str().unwrap();
    assert!(
        outcome.starts_with(&format!("{tasks} of {tasks} sub-tasks in {waves} waves")),
        "{outcome}"
    );
    app.stop().await;
}

#[actix_web::test]
async fn decompose_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({ "workerModels": [] }), "modeConfig.workerModels"),
        (json!({ "workerModels": ["a", "b", "c", "d", "e", "f"] }), "modeConfig.workerModels"),
        (json!({ "workerModels": ["sim/a", ""] }), "modeConfig.workerModels"),
        (json!({ "plannerModel": " " }), "modeConfig.plannerModel"),
        (json!({ "assemblerModel": "" }), "modeConfig.assemblerModel"),
        (json!({ "maxTasks": 2 }), "modeConfig.maxTasks"),
        (json!({ "maxTasks": 9 }), "modeConfig.maxTasks"),
        (json!({ "maxTasks": 4.5 }), "modeConfig.maxTasks"),
        (json!({ "timeoutMs": 5000 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 300001 }), "modeConfig.timeoutMs"),
        (json!({ "globalTimeoutMs": 1000 }), "modeConfig.globalTimeoutMs"),
        (json!({ "globalTimeoutMs": 1800001 }), "modeConfig.globalTimeoutMs"),
        (json!({ "maxTask": 4 }), "modeConfig.maxTask"),
    ];
    assert_refused_by_field(&app, "decompose", &cases).await;
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_between_waves_keeps_the_first_wave() {
    let app = spawn_with(Options { sim_latency_ms: 300, ..Options::default() }).await;
    let started = app.start(request(&["sim/alpha", "sim/beta"])).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let (first, _) = ws.until("event", Some("wave_start")).await;
    let first_wave = first["data"]["data"]["tasks"].as_array().unwrap().len();
    ws.until("event", Some("wave_complete")).await;
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    assert!(r["plan"]["tasks"].as_array().unwrap().len() >= 4, "{r}");
    assert_eq!(r["waves"][0]["tasks"].as_array().unwrap().len(), first_wave, "{r}");
    assert!(r["waves"][0]["tasks"].as_array().unwrap().iter().all(|t| t["status"] == "completed"));
    assert_eq!(r["assembly"], Value::Null);
    app.stop().await;
}

#[actix_web::test]
async fn failing_workers_leave_gaps_and_the_planner_and_assembler_fall_back() {
    let app = spawn_app().await;
    // Every other task goes to a worker that fails; the run still assembles.
    let (run, events) = watch(&app, request(&["sim/alpha", "sim/fail-w"])).await;
    let failed: Vec<Value> = all_of(&events, "task_complete")
        .into_iter()
        .filter(|t| t["data"]["status"] == "failed")
        .collect();
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|t| t["data"]["model"] == "sim/fail-w" && t["data"]["output"] == ""));
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["partial"], true);
    assert_eq!(stored["result"]["stats"]["failed"].as_u64(), Some(failed.len() as u64));
    let models: Vec<&str> = stored["result"]["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["model"].as_str().unwrap())
        .collect();
    assert_eq!(models.len(), failed.len());
    assert!(models.iter().all(|m| *m == "sim/fail-w"));
    assert_same(&stored["result"], &events);

    // Only failing workers: no output, the run fails with the plan kept.
    let (run, _) = watch(&app, request(&["sim/fail-a", "sim/empty-b"])).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("No task produced an output"), "{stored}");
    assert!(stored["result"]["plan"]["tasks"].as_array().unwrap().len() >= 4);

    // No backups: a dead planner fails the run; a dead assembler leaves the outputs joined.
    let mut body = request(&["sim/alpha"]);
    body["modeConfig"]["plannerModel"] = json!("sim/fail-p");
    let (run, _) = watch(&app, body).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().starts_with("The planner (sim/fail-p) failed"));
    let mut body = request(&["sim/alpha"]);
    body["modeConfig"]["assemblerModel"] = json!("sim/fail-a");
    let (run, events) = watch(&app, body).await;
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let a = &stored["result"]["assembly"];
    assert_eq!(a["fallback"], "concatenated");
    assert!(stored["answer"].as_str().unwrap().starts_with("## task_1: "), "{}", stored["answer"]);
    assert!(stored["answer"].as_str().unwrap().contains("\n\n---\n\n"));
    assert_same(&stored["result"], &events);
    app.stop().await;

    // With backups, both stand in.
    let fallback = Fallbacks {
        chairman: Some("sim/beta".into()),
        facilitator: Some("sim/gamma".into()),
        ..Fallbacks::default()
    };
    let app = spawn_with(Options { fallback, ..Options::default() }).await;
    let mut body = request(&["sim/alpha", "sim/beta"]);
    body["modeConfig"]["plannerModel"] = json!("sim/fail-p");
    body["modeConfig"]["assemblerModel"] = json!("sim/fail-a");
    let (run, events) = watch(&app, body).await;
    let starts: Vec<Value> =
        all_of(&events, "fallback_start").iter().map(|s| s["key"].clone()).collect();
    assert_eq!(starts, [json!("plan:backup"), json!("assembly:backup")]);
    let p = &all_of(&events, "plan_complete")[0]["data"];
    assert_eq!(
        (p["model"].clone(), p["fallbackFrom"].clone()),
        (json!("sim/gamma"), json!("sim/fail-p"))
    );
    let a = &all_of(&events, "assembly_complete")[0];
    assert_eq!(
        (
            a["data"]["model"].clone(),
            a["data"]["fallbackFrom"].clone(),
            a["data"]["fallback"].clone()
        ),
        (json!("sim/beta"), json!("sim/fail-a"), Value::Null)
    );
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_same(&stored["result"], &events);
    let roles: Vec<Value> = stored["result"]["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| json!([f["role"], f["fallbackTo"]]))
        .collect();
    assert_eq!(roles, [json!(["planner", "sim/gamma"]), json!(["assembler", "sim/beta"])]);
    app.stop().await;
}

#[actix_web::test]
async fn a_plan_with_a_cycle_is_asked_about_again_or_repaired_never_run_as_written() {
    let app = spawn_app().await;
    let mut body = request(&["sim/alpha", "sim/beta"]);
    body["modeConfig"]["plannerModel"] = json!("sim/cyclic-p");
    let (run, events) = watch(&app, body).await;
    let starts = all_of(&events, "plan_start");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1]["data"]["again"], "cycle");
    let p = &all_of(&events, "plan_complete")[0]["data"];
    assert_eq!(
        (p["replanned"].clone(), p["droppedDependencies"].clone()),
        (json!(true), json!([]))
    );
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_same(&stored["result"], &events);
    assert_dependency_order(&events);

    let mut body = request(&["sim/alpha", "sim/beta"]);
    body["modeConfig"]["plannerModel"] = json!("sim/loop-p");
    let (run, events) = watch(&app, body).await;
    let p = &all_of(&events, "plan_complete")[0]["data"];
    assert_eq!(p["replanned"], false);
    assert_eq!(p["droppedDependencies"], json!([{ "taskId": "task_2", "dependency": "task_3" }]));
    assert_dependency_order(&events);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert!(stored["result"]["plan"]["firstReply"].is_string());
    assert_same(&stored["result"], &events);
    app.stop().await;
}
