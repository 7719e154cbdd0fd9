//! Blueprint through the whole server: a run watched over the WebSocket and reloaded as it ran,
//! its 400s, a cancel while sections are still being written that keeps the finished ones, and
//! failing architects, authors and assemblers with and without backups.

use conclave::modes::Fallbacks;
use serde_json::{json, Value};

use crate::helpers::*;

fn request(authors: &[&str], assembler: &str) -> Value {
    json!({ "mode": "blueprint", "question": "Design doc for our collaborative editor",
            "modeConfig": { "content": "A web editor where several people edit one document at once.",
                            "architectModel": "sim/alpha", "authorModels": authors,
                            "assemblerModel": assembler } })
}

/// The stored result is what went out live, event by event.
fn assert_same(result: &Value, events: &[Value]) {
    if let Some(o) = all_of(events, "outline_complete").first() {
        assert_eq!(result["outline"], o["data"]);
    }
    for c in all_of(events, "section_complete") {
        let n = &c["data"]["sectionNumber"];
        let stored =
            result["sections"].as_array().unwrap().iter().find(|s| &s["sectionNumber"] == n);
        assert_eq!(stored, Some(&c["data"]), "section {n}");
    }
    if let Some(done) = all_of(events, "all_sections_complete").first() {
        for (k, v) in done["data"].as_object().unwrap() {
            assert_eq!(&result[k], v, "{k}");
        }
    }
    if let Some(a) = all_of(events, "assembly_complete").first() {
        assert_eq!(result["assembly"], a["data"]);
        assert_eq!(result["partial"], a["partial"]);
        assert_eq!(result["failedModels"], a["failedModels"]);
    }
}

#[actix_web::test]
async fn a_blueprint_run_streams_its_stages_and_reloads_as_it_ran() {
    let app = spawn_app().await;
    let (run, events) = watch(
        &app,
        json!({ "mode": "blueprint", "question": "Design doc for our collaborative editor" }),
    )
    .await;
    assert_contiguous(&events, 1);
    let names = stage_events(&events);
    let sections =
        all_of(&events, "outline_complete")[0]["data"]["sections"].as_array().unwrap().len();
    assert!((6..=12).contains(&sections), "{sections}");
    let mut expected: Vec<String> =
        ["blueprint_start", "outline_start", "outline_complete", "expansion_start"]
            .map(String::from)
            .to_vec();
    expected.extend(std::iter::repeat_n("section_complete".to_string(), sections));
    expected.extend(
        [
            "all_sections_complete",
            "assembly_start",
            "assembly_complete",
            "title_complete",
            "complete",
        ]
        .map(String::from),
    );
    assert_eq!(names, expected);
    let start = &all_of(&events, "blueprint_start")[0];
    assert_eq!(
        (start["documentType"].clone(), start["authorModels"].clone()),
        (json!("architecture_blueprint"), json!(["sim/alpha", "sim/beta", "sim/gamma"]))
    );
    // Every section call starts before the first one completes: they run at once.
    let keyed = |kind: &str| {
        events
            .iter()
            .position(|e| {
                e["event"] == kind
                    && e["data"]["key"].as_str().is_some_and(|k| k.starts_with("section:"))
            })
            .unwrap()
    };
    let starts = events
        .iter()
        .filter(|e| {
            e["event"] == "call_start" && e["data"]["key"].as_str().unwrap().starts_with("section:")
        })
        .count();
    assert_eq!(starts, sections);
    let last_start = events
        .iter()
        .rposition(|e| {
            e["event"] == "call_start" && e["data"]["key"].as_str().unwrap().starts_with("section:")
        })
        .unwrap();
    assert!(last_start < keyed("call_complete"), "the sections are written in parallel");
    // Round-robin: section i goes to author i mod 3.
    for s in all_of(&events, "outline_complete")[0]["data"]["sections"].as_array().unwrap() {
        let i = s["number"].as_u64().unwrap() as usize - 1;
        assert_eq!(s["assignedModel"], ["sim/alpha", "sim/beta", "sim/gamma"][i % 3]);
    }
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    assert_same(result, &events);
    assert_eq!(result["material"]["source"], "question");
    assert_eq!(result["documentType"], "architecture_blueprint");
    assert_eq!(stored["answer"], result["assembly"]["document"]);
    assert_eq!(result["sections"].as_array().unwrap().len(), sections);
    let outcome = stored["outcome"].as_str().unwrap();
    assert!(outcome.contains(&format!("{sections} sections")), "{outcome}");
    app.stop().await;
}

#[actix_web::test]
async fn blueprint_requests_are_refused_by_field() {
    let app = spawn_app().await;
    let body = |cfg: Value| json!({ "mode": "blueprint", "question": "q", "modeConfig": cfg });
    let cases = [
        (json!({ "authorModels": [] }), "modeConfig.authorModels"),
        (json!({ "authorModels": vec!["sim/a"; 7] }), "modeConfig.authorModels"),
        (json!({ "authorModels": ["sim/a", ""] }), "modeConfig.authorModels"),
        (json!({ "architectModel": " " }), "modeConfig.architectModel"),
        (json!({ "assemblerModel": "" }), "modeConfig.assemblerModel"),
        (json!({ "documentType": "novel" }), "modeConfig.documentType"),
        (json!({ "content": "   " }), "modeConfig.content"),
        (json!({ "content": "c".repeat(200_001) }), "modeConfig.content"),
        (json!({ "timeoutMs": 9_999 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 600_001 }), "modeConfig.timeoutMs"),
        (json!({ "sections": 8 }), "modeConfig.sections"),
    ];
    for (cfg, field) in cases {
        let (status, b) = app.post("/api/deliberations", &body(cfg.clone())).await;
        assert_eq!((status, b["field"].as_str()), (400, Some(field)), "{cfg}: {b}");
    }
    let (status, b) = app.post("/api/deliberations", &json!({ "mode": "blueprint" })).await;
    assert_eq!((status, b["field"].as_str()), (400, Some("question")), "{b}");
    let (_, b) = app.post("/api/deliberations", &body(json!({ "documentType": "novel" }))).await;
    assert!(b["error"].as_str().unwrap().contains("security_assessment"), "names the types: {b}");
    app.stop().await;
}

#[actix_web::test]
async fn a_cancel_keeps_the_sections_that_were_written() {
    let app = spawn_app().await;
    let started = app.start(request(&["sim/alpha", "sim/stall-1"], "sim/gamma")).await;
    let run = started["runId"].as_str().unwrap();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "watch", "run": run })).await;
    let (outline, _) = ws.until("event", Some("outline_complete")).await;
    let by_alpha = outline["data"]["data"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["assignedModel"] == "sim/alpha")
        .count();
    for _ in 0..by_alpha {
        ws.until("event", Some("section_complete")).await;
    }
    let (status, body) = app.post(&format!("/api/deliberations/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    ws.until("event", Some("cancelled")).await;
    ws.close().await;
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "cancelled");
    let r = &stored["result"];
    let sections = r["sections"].as_array().unwrap();
    assert_eq!(sections.len(), by_alpha, "{r}");
    assert!(sections
        .iter()
        .all(|s| s["model"] == "sim/alpha" && s["wordCount"].as_u64() > Some(0)));
    assert!(r["outline"]["sections"].is_array());
    assert_eq!(r["assembly"], Value::Null);
    app.stop().await;
}

#[actix_web::test]
async fn failing_authors_and_assembler_without_a_backup_give_a_concatenated_document() {
    let app = spawn_app().await;
    let (run, events) = watch(&app, request(&["sim/alpha", "sim/fail-2"], "sim/fail-3")).await;
    let failed = all_of(&events, "section_failed");
    let done = &all_of(&events, "all_sections_complete")[0]["data"];
    assert_eq!(done["totalFailed"].as_u64(), Some(failed.len() as u64));
    assert!(!failed.is_empty() && done["totalSucceeded"].as_u64() > Some(0));
    assert!(failed.iter().all(|f| f["data"]["model"] == "sim/fail-2"));
    let a = &all_of(&events, "assembly_complete")[0];
    assert_eq!(a["data"]["fallback"], "concatenated");
    assert_eq!(a["partial"], true);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let r = &stored["result"];
    assert_same(r, &events);
    let answer = stored["answer"].as_str().unwrap();
    let first = &r["failedSections"][0];
    assert!(
        answer.contains(&format!(
            "[TODO: Section {} ({}) failed]",
            first["sectionNumber"],
            first["sectionTitle"].as_str().unwrap()
        )),
        "{answer}"
    );
    let roles: Vec<&str> =
        r["failedModels"].as_array().unwrap().iter().map(|f| f["role"].as_str().unwrap()).collect();
    assert_eq!(roles.last(), Some(&"assembler"));
    assert_eq!(roles.iter().filter(|r| **r == "author").count(), failed.len());

    // Every author failing fails the run; the outline is kept.
    let (run, events) = watch(&app, request(&["sim/fail-1", "sim/empty-1"], "sim/gamma")).await;
    assert_eq!(events.last().unwrap()["event"], "error");
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(stored["error"].as_str().unwrap().contains("Every author failed"), "{stored}");
    assert!(stored["result"]["outline"]["sections"].is_array());
    app.stop().await;
}

#[actix_web::test]
async fn failing_architect_and_assembler_are_replaced_by_their_backups() {
    let fallback = Fallbacks {
        chairman: Some("sim/beta".into()),
        facilitator: Some("sim/gamma".into()),
        ..Fallbacks::default()
    };
    let app = spawn_with(Options { fallback, ..Options::default() }).await;
    let mut body = request(&["sim/alpha", "sim/beta"], "sim/fail-asm");
    body["modeConfig"]["architectModel"] = json!("sim/fail-arch");
    let (run, events) = watch(&app, body).await;
    let starts = all_of(&events, "fallback_start");
    assert_eq!(
        starts.iter().map(|s| s["key"].as_str().unwrap()).collect::<Vec<_>>(),
        ["outline:backup", "assembly:backup"]
    );
    let o = &all_of(&events, "outline_complete")[0]["data"];
    assert_eq!(
        (o["model"].clone(), o["fallbackFrom"].clone()),
        (json!("sim/gamma"), json!("sim/fail-arch"))
    );
    let a = &all_of(&events, "assembly_complete")[0];
    assert_eq!(
        (
            a["data"]["model"].clone(),
            a["data"]["fallbackFrom"].clone(),
            a["data"]["fallback"].clone()
        ),
        (json!("sim/beta"), json!("sim/fail-asm"), Value::Null)
    );
    assert_eq!(a["partial"], true);
    let stored = app.wait_done(&run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_same(&stored["result"], &events);
    let failed = stored["result"]["failedModels"].as_array().unwrap().clone();
    assert_eq!(failed.len(), 2);
    assert_eq!(
        (failed[0]["role"].clone(), failed[0]["fallbackTo"].clone()),
        (json!("architect"), json!("sim/gamma"))
    );
    assert_eq!(
        (failed[1]["role"].clone(), failed[1]["fallbackTo"].clone()),
        (json!("assembler"), json!("sim/beta"))
    );

    // Without a backup a failing architect fails the run.
    let app2 = spawn_app().await;
    let mut body = request(&["sim/alpha"], "sim/beta");
    body["modeConfig"]["architectModel"] = json!("sim/fail-arch");
    let (run, _) = watch(&app2, body).await;
    let stored = app2.wait_done(&run).await;
    assert_eq!(stored["status"], "failed");
    assert!(
        stored["error"].as_str().unwrap().starts_with("The architect (sim/fail-arch) failed"),
        "{stored}"
    );
    app2.stop().await;
    app.stop().await;
}
