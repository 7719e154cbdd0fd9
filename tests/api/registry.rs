//! The mode registry through the whole server: `GET /api/modes`, and the demonstration mode
//! (`echo`, built only for the tests) run through REST, the WebSocket and the CLI with nothing
//! written for it but its own file and its registry line.

use serde_json::{json, Value};

use crate::cli::conclave;
use crate::helpers::*;

fn echo_request() -> Value {
    json!({ "mode": "echo", "question": "Say hello to the panel.",
            "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"], "shout": true } })
}

#[actix_web::test]
async fn modes_lists_every_mode_with_its_roles_and_settings_schema() {
    let app = spawn_app().await;
    let (status, body) = app.get("/api/modes").await;
    assert_eq!(status, 200, "{body}");
    let modes = body["modes"].as_array().unwrap();
    let ids: Vec<&str> = modes.iter().map(|m| m["id"].as_str().unwrap()).collect();
    // The first six in the order the page lists them, the test-only demonstration last, and
    // each once.
    assert_eq!(ids[..6], ["council", "vote", "jury", "debate", "delphi", "clarity"], "{ids:?}");
    assert_eq!(ids.last(), Some(&"echo"));
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    for later in ["red_team", "chain", "specialist_panel", "blueprint", "peer_review"] {
        assert!(ids.contains(&later), "{ids:?}");
    }
    for m in modes {
        assert!(!m["label"].as_str().unwrap().is_empty());
        assert!(!m["description"].as_str().unwrap().is_empty());
        assert_eq!(m["configSchema"]["type"], "object", "{m}");
        assert!(m["roles"].as_array().is_some_and(|r| !r.is_empty()), "{m}");
        // The shipped modes have views of their own; the demonstration has the generic one.
        assert_eq!(m["view"], m["id"] != "echo", "{m}");
    }
    let council = &modes[0];
    assert_eq!(council["multiTurn"], true);
    assert_eq!(council["roles"][0]["field"], "councilModels");
    assert_eq!(council["roles"][0]["defaultModels"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
    let props = council["configSchema"]["properties"].as_object().unwrap();
    assert_eq!(props.keys().collect::<Vec<_>>(), ["councilModels", "chairmanModel", "timeoutMs"]);
    assert_eq!(props["councilModels"]["maxItems"], 6);
    app.stop().await;
}

#[actix_web::test]
async fn a_mode_from_its_file_alone_runs_over_the_websocket_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": echo_request() })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    let events = ws.events_until_end(&run).await;
    ws.close().await;
    assert_contiguous(&events, 1);
    assert_eq!(stage_events(&events), ["answers_start", "answers_complete", "complete"]);
    let live = &events.iter().find(|e| e["event"] == "answers_complete").unwrap()["data"]["data"];
    assert_eq!(live.as_array().unwrap().len(), 3);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["answers"], *live, "the stored result is what went out live");
    let picked = &stored["result"]["picked"];
    let longest =
        live.as_array().unwrap().iter().map(|a| a["response"].as_str().unwrap().len()).max();
    assert_eq!(picked["response"].as_str().map(str::len), longest);
    assert_eq!(stored["answer"], picked["response"]);
    let outcome = stored["outcome"].as_str().unwrap();
    assert!(
        outcome.starts_with(&format!("{} said: ", picked["model"].as_str().unwrap())),
        "{outcome}"
    );
    // Its own rules, named by field, from its schema and its validate.
    let (status, body) = app
        .post(
            "/api/deliberations",
            &json!({ "mode": "echo", "question": "q", "modeConfig": { "models": ["sim/alpha"] } }),
        )
        .await;
    assert_eq!((status, body["field"].as_str()), (400, Some("modeConfig.models")), "{body}");
    let (status, body) = app
        .post(
            "/api/deliberations",
            &json!({ "mode": "echo", "question": "q", "modeConfig": { "shout": "yes" } }),
        )
        .await;
    assert_eq!((status, body["field"].as_str()), (400, Some("modeConfig.shout")), "{body}");
    let (status, body) = app
        .post(
            "/api/deliberations",
            &json!({ "mode": "echo", "question": "q", "modeConfig": { "shuot": true } }),
        )
        .await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap_or("").contains("did you mean \"shout\""), "{body}");
    app.stop().await;
}

#[actix_web::test]
async fn every_completed_run_carries_its_one_line_outcome_into_the_lists() {
    let app = spawn_app().await;
    // Every mode the server runs, each from its own example request (so a new mode is in).
    let (_, modes) = app.get("/api/modes").await;
    let modes = modes["modes"].as_array().expect("modes").clone();
    assert!(modes.len() >= 14, "{modes:?}");
    let mut completed = 0;
    for mode in &modes {
        let request = mode["example"].clone();
        let started = app.start(request.clone()).await;
        let run_id = started["runId"].as_str().unwrap();
        let stored = app.wait_done(run_id).await;
        // The lists carry the outcome stored with the run's end: the same line the run shows.
        let (_, list) = app.get("/api/deliberations?limit=1").await;
        let listed = &list["recent"][0];
        assert_eq!(listed["id"], run_id);
        assert_eq!(listed["outcome"], stored["outcome"], "{request}: {listed}");
        let (_, convs) = app.get("/api/conversations?limit=1").await;
        let last = &convs["conversations"][0]["lastRun"];
        assert_eq!(last["id"], run_id, "{convs}");
        assert_eq!(last["status"], stored["status"]);
        assert_eq!(last["outcome"], stored["outcome"]);
        if stored["status"] != "completed" {
            // A sim panel may fail a run honestly; such a run has no outcome.
            assert!(stored["outcome"].is_null(), "{stored}");
            continue;
        }
        completed += 1;
        let outcome = stored["outcome"].as_str().unwrap_or_else(|| panic!("{request}: {stored}"));
        assert!(!outcome.trim().is_empty() && outcome.chars().count() <= 200, "{outcome}");
    }
    assert!(completed * 2 > modes.len(), "most sim runs complete: {completed} of {}", modes.len());
    app.stop().await;
}

#[test]
fn the_cli_runs_a_mode_from_its_file_alone_with_flags_from_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("cli.db").display());
    let help = conclave().args(["run", "echo", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--shout") && help.contains("--models <MODELS>"), "{help}");
    let out = conclave()
        .current_dir(dir.path())
        .args([
            "run",
            "echo",
            "Say hello.",
            "--models",
            "sim/alpha,sim/beta",
            "--shout",
            "--json",
            "-q",
        ])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["mode"], "echo");
    assert_eq!(result["result"]["answers"].as_array().map(Vec::len), Some(2), "{result}");
    let bad = conclave()
        .current_dir(dir.path())
        .args(["run", "echo", "q", "--models", "sim/alpha"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // Named by the flag typed.
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("--models: ") && !stderr.contains("modeConfig."), "{stderr}");
}
