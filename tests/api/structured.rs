//! Structured replies through the whole server: routes that take structured output ask their
//! models for each machine-read call's JSON (in-process and over HTTP as `response_format`), the
//! replies are read from it and say so (`readFrom`), a server that refuses `response_format` is
//! asked again without it and the run says so, and a prompt is fitted into a model's context
//! instead of being refused for its length.

use serde_json::{json, Value};

use conclave::providers::StructuredOutput;

use crate::helpers::*;

/// Modes whose calls are all text a person reads: none of their replies is machine-read.
const NOTHING_MACHINE_READ: &[&str] = &["chain", "solo", "echo"];

/// A finished run: its record, its stage rows and its stored events (from the JSON export).
async fn finished(app: &TestApp, run_id: &str) -> (Value, Vec<Value>, Vec<Value>) {
    let stored = app.wait_done(run_id).await;
    let (status, export) =
        app.get(&format!("/api/deliberations/{run_id}/export?format=json&events=true")).await;
    assert_eq!(status, 200, "{export}");
    let stages = export["stages"].as_array().cloned().unwrap_or_default();
    let events = export["events"].as_array().cloned().unwrap_or_default();
    (stored, stages, events)
}

/// A test app whose sim route asks for structured output (`json_schema`), its sim models
/// in-process or, `sim_over_http`, behind a sim-server.
async fn json_schema_app(sim_over_http: bool) -> TestApp {
    spawn_with(Options {
        structured: StructuredOutput::JsonSchema,
        sim_over_http,
        ..Options::default()
    })
    .await
}

#[actix_web::test]
async fn every_mode_reads_its_replies_from_json_when_its_route_asks_for_it() {
    let app = json_schema_app(false).await;
    let (_, modes) = app.get("/api/modes").await;
    let modes = modes["modes"].as_array().expect("modes").clone();
    let (mut table, mut wrong) = (Vec::new(), Vec::new());
    for mode in &modes {
        let id = mode["id"].as_str().unwrap_or_default().to_string();
        let started = app.start(mode["example"].clone()).await;
        let run_id = started["runId"].as_str().expect("runId").to_string();
        let (stored, stages, events) = finished(&app, &run_id).await;
        let reads = Reads::of(&events, &stages);
        table.push(format!("{id:<20} {:<10} {reads}", stored["status"].as_str().unwrap_or("?")));
        if stored["status"] != "completed" {
            wrong.push(format!("{id} ended {}: {}", stored["status"], stored["error"]));
        } else if NOTHING_MACHINE_READ.contains(&id.as_str()) {
            if reads.machine_read != 0 {
                wrong.push(format!("{id} reads nothing, yet: {reads}"));
            }
        } else if reads.machine_read == 0 {
            wrong.push(format!("{id} asked for no machine-read reply"));
        } else if reads.json_share() < 0.9 {
            wrong.push(format!("{id} read under 90% from JSON: {reads}"));
        }
    }
    eprintln!("mode                 ending     machine-read replies\n{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    app.stop().await;
}

#[actix_web::test]
async fn over_http_the_schema_goes_as_response_format_and_the_reply_is_read_from_it() {
    let app = json_schema_app(true).await;
    for request in [
        council_request("Which queue should a small team run?"),
        json!({ "mode": "vote", "question": "Tabs or spaces?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"] } }),
    ] {
        let started = app.start(request.clone()).await;
        let (stored, stages, events) =
            finished(&app, started["runId"].as_str().expect("runId")).await;
        assert_eq!(stored["status"], "completed", "{stored}");
        let reads = Reads::of(&events, &stages);
        assert!(reads.machine_read >= 3 && reads.json == reads.machine_read, "{request}: {reads}");
        // The stored replies are the JSON the server sent.
        let machine: Vec<&Value> =
            stages.iter().filter(|s| s["parsedData"]["readFrom"] == "json").collect();
        for s in machine {
            let reply: Value = serde_json::from_str(s["content"].as_str().unwrap_or("")).unwrap();
            assert!(reply["reasoning"].is_string(), "{reply}");
        }
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_server_that_refuses_response_format_is_asked_again_without_it_and_the_run_says_so() {
    for sim_over_http in [false, true] {
        let app = json_schema_app(sim_over_http).await;
        refused_then_plain(&app, sim_over_http).await;
        app.stop().await;
    }
}

/// A council of `sim/noformat…` models: their server refuses `response_format` once, then is
/// asked in text. Over HTTP the sim-server, sent no schema, answers as asked in the prompt.
async fn refused_then_plain(app: &TestApp, over_http: bool) {
    let members = ["sim/noformat-a", "sim/noformat-b", "sim/noformat-c"];
    let request = json!({ "mode": "council", "question": "Is SQLite enough for a blog?",
                          "councilModels": members, "chairmanModel": "sim/noformat-a" });
    let started = app.start(request.clone()).await;
    let (stored, stages, events) = finished(app, started["runId"].as_str().unwrap()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let refused: Vec<&Value> =
        events.iter().filter(|e| e["event"] == "structured_output_refused").collect();
    // Said for each call that was sent it before the first refusal came back (the three
    // rankings go out together), and for no call after.
    assert!((1..=3).contains(&refused.len()), "{refused:?}");
    let said = &refused[0]["data"];
    assert_eq!((said["route"].as_str(), said["stage"].as_str()), (Some("sim/"), Some("stage2")));
    assert!(said["message"].as_str().unwrap_or("").contains("response_format"), "{said}");
    // Asked again without it, the models in-process still answered what their prompt asked
    // for; over HTTP the sim-server, sent no schema, could not.
    let reads = Reads::of(&events, &stages);
    assert_eq!(reads.machine_read, 3, "{reads}");
    if !over_http {
        assert_eq!(reads.json, 3, "{reads}");
    }
    // The route no longer sends it: a new run asks for the text format and reads text.
    let started = app.start(request).await;
    let (stored, stages, events) = finished(app, started["runId"].as_str().unwrap()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert!(!events.iter().any(|e| e["event"] == "structured_output_refused"));
    let reads = Reads::of(&events, &stages);
    assert_eq!((reads.json, reads.text), (0, 3), "{reads}");
}

#[actix_web::test]
async fn a_prompt_longer_than_the_models_context_is_fitted_not_refused() {
    // The sim holds 1,200 tokens and refuses longer prompts with llama.cpp's HTTP 400. Its
    // answers quote a long question, so the ranking and synthesis prompts are longer.
    let app = spawn_with(Options { sim_context_tokens: Some(1200), ..Options::default() }).await;
    let question = format!(
        "Summarise the trade-offs of event sourcing for a payments ledger. {}",
        "The ledger records every transfer between accounts and must stay auditable. ".repeat(7)
    );
    let question = question.as_str();
    let started = app.start(council_request(question)).await;
    let (stored, _, events) = finished(&app, started["runId"].as_str().unwrap()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let refusals: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "call_retry" || e["event"] == "call_complete")
        .filter(|e| e["data"]["error"]["message"].as_str().is_some_and(|m| m.contains("context")))
        .collect();
    assert!(refusals.is_empty(), "no call was refused for its length: {refusals:?}");
    let fitted: Vec<&Value> = events.iter().filter(|e| e["event"] == "prompt_fitted").collect();
    assert!(!fitted.is_empty(), "the ranking and synthesis prompts were fitted");
    for f in &fitted {
        let d = &f["data"];
        assert_eq!(d["contextTokens"], 1200);
        assert_eq!(d["fits"], true, "{d}");
        assert_eq!(d["afterRefusal"], false, "fitted before it was sent: {d}");
        let cuts = d["cuts"].as_array().unwrap();
        assert!(!cuts.is_empty(), "{d}");
        for c in cuts {
            assert!(c["toChars"].as_u64() < c["fromChars"].as_u64(), "{c}");
            assert!(!c["what"].as_str().unwrap_or("").is_empty(), "{c}");
        }
    }
    // The rankings were still read: cutting the quoted answers kept the format.
    let stage2 = stored["result"]["stage2Metadata"]["rankingsCounted"].as_u64().unwrap_or(0);
    assert!(stage2 >= 2, "{}", stored["result"]["stage2Metadata"]);
    app.stop().await;
}

#[actix_web::test]
async fn a_reply_cut_off_before_its_json_closes_is_asked_for_once_more() {
    // `sim/cutoff…` models stop halfway through their JSON at a prompt's first attempt, as a
    // model held to a grammar stops at its length cap; asked again, they answer whole.
    for sim_over_http in [false, true] {
        let app = json_schema_app(sim_over_http).await;
        let members = ["sim/cutoff-a", "sim/cutoff-b", "sim/cutoff-c"];
        let request = json!({ "mode": "council", "question": "Is SQLite enough for a blog?",
                              "councilModels": members, "chairmanModel": "sim/cutoff-a" });
        let started = app.start(request).await;
        let (stored, stages, events) = finished(&app, started["runId"].as_str().unwrap()).await;
        assert_eq!(stored["status"], "completed", "{stored}");
        // Every ranking was read from the JSON of its second attempt.
        let reads = Reads::of(&events, &stages);
        assert_eq!((reads.machine_read, reads.json), (3, 3), "over http {sim_over_http}: {reads}");
        // Each was asked again once, saying why, and only the rankings (the answers and the
        // synthesis carry no schema).
        let retries: Vec<&Value> = events.iter().filter(|e| e["event"] == "call_retry").collect();
        assert_eq!(retries.len(), 3, "{retries:?}");
        for r in &retries {
            let d = &r["data"];
            assert_eq!((d["stage"].as_str(), d["attempt"].as_u64()), (Some("stage2"), Some(1)));
            assert_eq!(d["error"]["kind"], "malformed", "{d}");
            assert!(d["error"]["message"].as_str().unwrap_or("").contains("asking once more"));
        }
        // The tokens of both attempts count: the run's totals are its calls' sums, and each
        // re-asked call's usage holds two replies.
        let (mut prompt, mut completion) = (0, 0);
        for e in events.iter().filter(|e| e["event"] == "call_complete") {
            prompt += e["data"]["usage"]["promptTokens"].as_u64().unwrap_or(0);
            completion += e["data"]["usage"]["completionTokens"].as_u64().unwrap_or(0);
        }
        assert_eq!(stored["usage"]["promptTokens"].as_u64(), Some(prompt), "{stored}");
        assert_eq!(stored["usage"]["completionTokens"].as_u64(), Some(completion), "{stored}");
        app.stop().await;
    }
    // Asked for text, the same models are not asked again (their text is read as it is).
    let app = spawn_app().await;
    let request = json!({ "mode": "council", "question": "Is SQLite enough for a blog?",
                          "councilModels": ["sim/cutoff-a", "sim/cutoff-b"], "chairmanModel": "sim/cutoff-a" });
    let started = app.start(request).await;
    let (stored, _, events) = finished(&app, started["runId"].as_str().unwrap()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert!(!events.iter().any(|e| e["event"] == "call_retry"), "no re-ask without a schema");
    app.stop().await;
}
