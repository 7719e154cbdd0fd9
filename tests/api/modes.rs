//! Vote, Jury and Debate through the whole server: the spec's event sequences over the
//! WebSocket, REST starts, the sim in-process and over HTTP, stored results that reload to
//! exactly what went out live, and the request rules that need the database.

use serde_json::{json, Value};

use crate::helpers::*;

fn data_of<'a>(events: &'a [Value], name: &str) -> &'a Value {
    &events.iter().find(|e| e["event"] == name).unwrap_or_else(|| panic!("no {name} event"))["data"]
}

async fn run_over_ws(app: &TestApp, request: Value) -> (Value, Vec<Value>) {
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": request })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    let events = ws.events_until_end(&run).await;
    ws.close().await;
    assert_contiguous(&events, 1);
    let stored = app.wait_done(&run).await;
    (stored, events)
}

fn vote_request() -> Value {
    json!({ "mode": "vote", "question": "Which database for a small team?",
            "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"], "chairmanModel": "sim/delta" } })
}

fn jury_request() -> Value {
    json!({ "mode": "jury", "question": "Evaluate this API documentation",
            "modeConfig": { "content": "## GET /api/users\nReturns users. Accepts limit and offset.",
                            "originalQuestion": "Document the users endpoint",
                            "jurorModels": ["sim/alpha", "sim/beta", "sim/gamma"], "foremanModel": "sim/delta" } })
}

fn debate_request() -> Value {
    json!({ "mode": "debate", "question": "Should companies adopt a 4-day work week?",
            "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"] } })
}

async fn check_vote(app: &TestApp) {
    let (stored, events) = run_over_ws(app, vote_request()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let mut expected = vec![
        "vote_start",
        "stage1_start",
        "stage1_complete",
        "vote_round_start",
        "vote_round_complete",
    ];
    let round = &data_of(&events, "vote_round_complete")["data"];
    if round["isTie"] == true {
        expected.extend(["tiebreaker_start", "tiebreaker_complete"]);
    }
    expected.extend(["winner_declared", "title_complete", "complete"]);
    assert_eq!(stage_events(&events), expected);
    assert_eq!(data_of(&events, "vote_start")["mode"], "vote");
    let r = &stored["result"];
    assert_eq!(r["voteRound"], *round);
    assert_eq!(r["winner"], data_of(&events, "winner_declared")["data"]);
    assert_eq!(r["stage1"], data_of(&events, "stage1_complete")["data"]);
    assert_eq!(stored["answer"], r["winner"]["winnerResponse"]);
    assert_eq!(round["votes"].as_array().unwrap().len(), 3);
}

async fn check_jury(app: &TestApp) {
    let (stored, events) = run_over_ws(app, jury_request()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let names = stage_events(&events);
    assert_eq!(names.iter().filter(|e| *e == "juror_complete").count(), 3);
    let without_jurors: Vec<&String> = names.iter().filter(|e| *e != "juror_complete").collect();
    assert_eq!(
        without_jurors,
        [
            "jury_start",
            "present_start",
            "present_complete",
            "deliberation_start",
            "all_jurors_complete",
            "verdict_start",
            "verdict_complete",
            "title_complete",
            "complete"
        ]
    );
    // Each juror is published before the summary.
    let pos = |n: &str| names.iter().position(|e| e == n).unwrap();
    assert!(
        names.iter().rposition(|e| e == "juror_complete").unwrap() < pos("all_jurors_complete")
    );
    let r = &stored["result"];
    assert_eq!(r["jurorSummary"], data_of(&events, "all_jurors_complete")["data"]);
    assert_eq!(r["foreman"], data_of(&events, "verdict_complete")["data"]);
    assert_eq!(r["presentation"]["originalQuestion"], "Document the users endpoint");
    let live_jurors: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "juror_complete")
        .map(|e| &e["data"]["data"])
        .collect();
    assert_eq!(r["jurors"].as_array().unwrap().iter().collect::<Vec<_>>(), live_jurors);
    assert!(r["dimensionAverages"]["accuracy"].is_number());
    assert_eq!(stored["answer"], r["foreman"]["reportText"]);
}

async fn check_debate(app: &TestApp) {
    let (stored, events) = run_over_ws(app, debate_request()).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(
        stage_events(&events),
        [
            "debate_start",
            "round1_start",
            "round1_complete",
            "revision_start",
            "revision_complete",
            "vote_start",
            "vote_complete",
            "winner_declared",
            "title_complete",
            "complete"
        ]
    );
    let r = &stored["result"];
    assert_eq!(r["round1LabelMap"], data_of(&events, "revision_start")["data"]["labelMap"]);
    assert_eq!(r["revisedLabelMap"], data_of(&events, "vote_start")["data"]["revisedLabelMap"]);
    assert_eq!(r["revisions"], data_of(&events, "revision_complete")["data"]["revisions"]);
    assert_eq!(r["votes"], data_of(&events, "vote_complete")["data"]);
    assert_eq!(r["winner"], data_of(&events, "winner_declared")["data"]);
    assert_eq!(r["revisions"].as_array().unwrap().len(), 4);
    // Revision prompts were unique per debater: four revision calls.
    let revision_calls = events
        .iter()
        .filter(|e| e["event"] == "call_start" && e["data"]["stage"] == "revision")
        .count();
    assert_eq!(revision_calls, 4);
}

#[actix_web::test]
async fn vote_jury_and_debate_complete_in_process() {
    let app = spawn_app().await;
    check_vote(&app).await;
    check_jury(&app).await;
    check_debate(&app).await;
    app.stop().await;
}

#[actix_web::test]
async fn vote_jury_and_debate_complete_through_the_sim_server() {
    let app = spawn_with(Options { sim_over_http: true, ..Options::default() }).await;
    check_vote(&app).await;
    check_jury(&app).await;
    check_debate(&app).await;
    assert!(app.sim_stats.as_ref().unwrap().snapshot().completed > 20);
    app.stop().await;
}

#[actix_web::test]
async fn modes_start_over_rest_too_and_keep_their_failing_members_out() {
    let app = spawn_app().await;
    // A failing juror and one whose scorecard cannot be read.
    let started = app
        .start(json!({ "mode": "jury", "question": "Evaluate",
                       "modeConfig": { "content": "Some text to judge.",
                                       "jurorModels": ["sim/alpha", "sim/fail-j", "sim/malformed-j", "sim/beta"],
                                       "foremanModel": "sim/delta" } }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    let jurors = run["result"]["jurors"].as_array().unwrap();
    assert_eq!(jurors.len(), 3, "the failing juror is out");
    let garbled = jurors.iter().find(|j| j["model"] == "sim/malformed-j").unwrap();
    assert_eq!(garbled["parseSuccess"], false);
    assert_eq!(run["result"]["jurorSummary"]["jurorCount"], 4);
    // A debater whose answers are malformed: its revision has no decision, its vote is invalid.
    let started = app
        .start(json!({ "mode": "debate", "question": "Tabs or spaces?",
                       "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/malformed-d"] } }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["revisionSummary"]["parseFailed"], 1);
    assert_eq!(run["result"]["votes"]["invalidVoteCount"], 1);
    // Every juror failing is an error, with the presentation kept.
    let started = app
        .start(json!({ "mode": "jury", "question": "Evaluate",
                       "modeConfig": { "content": "x", "jurorModels": ["sim/fail-1", "sim/fail-2", "sim/fail-3"], "foremanModel": "sim/delta" } }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(
        (run["status"].as_str(), run["error"].as_str()),
        (Some("failed"), Some("All juror evaluations failed."))
    );
    assert_eq!(run["result"]["presentation"]["content"], "x");
    app.stop().await;
}

#[actix_web::test]
async fn mode_rules_that_need_the_conversation_are_enforced() {
    let app = spawn_app().await;
    let debate = app.start(debate_request()).await;
    app.wait_done(debate["runId"].as_str().unwrap()).await;
    // No follow-up on a debate.
    let mut follow = debate_request();
    follow["conversationId"] = debate["conversationId"].clone();
    let (status, body) = app.post("/api/deliberations", &follow).await;
    assert_eq!((status, body["field"].as_str()), (400, Some("conversationId")), "{body}");
    // A vote in a debate conversation: mode mismatch.
    let mut vote = vote_request();
    vote["conversationId"] = debate["conversationId"].clone();
    let (status, body) = app.post("/api/deliberations", &vote).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("debate"));
    // Vote is multi-turn: a follow-up in a vote conversation works.
    let first = app.start(vote_request()).await;
    app.wait_done(first["runId"].as_str().unwrap()).await;
    let mut again = vote_request();
    again["conversationId"] = first["conversationId"].clone();
    let second = app.start(again).await;
    assert_eq!(app.wait_done(second["runId"].as_str().unwrap()).await["status"], "completed");
    // Validation errors name the field, before anything runs.
    let cases = [
        (
            json!({ "mode": "jury", "question": "q", "modeConfig": { "content": "x", "jurorModels": ["sim/a", "sim/b", "sim/c"], "foremanModel": "sim/a" } }),
            "modeConfig.foremanModel",
        ),
        (
            json!({ "mode": "jury", "question": "q", "modeConfig": { "content": "" } }),
            "modeConfig.content",
        ),
        (json!({ "mode": "jury", "question": "q" }), "modeConfig"),
        (
            json!({ "mode": "debate", "question": "q", "modeConfig": { "models": ["sim/a", "sim/b"] } }),
            "modeConfig.models",
        ),
        (
            json!({ "mode": "vote", "question": "q", "modeConfig": { "models": ["sim/a", "sim/b", "x/y"] } }),
            "modeConfig.models[2]",
        ),
        (
            json!({ "mode": "vote", "question": "q", "modeConfig": { "timeoutMs": 5 } }),
            "modeConfig.timeoutMs",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = app.post("/api/deliberations", &body).await;
        assert_eq!((status, v["field"].as_str()), (400, Some(field)), "{body} -> {v}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn stalled_jurors_time_out_and_a_stalled_foreman_fails_the_run() {
    let app = spawn_with(Options { stage_timeout_ms: 1_000, ..Options::default() }).await;
    let started = app
        .start(json!({ "mode": "jury", "question": "Evaluate",
                       "modeConfig": { "content": "text", "jurorModels": ["sim/alpha", "sim/stall-j", "sim/beta"], "foremanModel": "sim/delta" } }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["jurorSummary"]["successfulJurors"], 2);
    let started = app
        .start(json!({ "mode": "jury", "question": "Evaluate",
                       "modeConfig": { "content": "text", "jurorModels": ["sim/alpha", "sim/beta", "sim/gamma"], "foremanModel": "sim/stall-f" } }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "failed");
    assert!(run["error"].as_str().unwrap().contains("no answer within"), "{run}");
    assert_eq!(run["result"]["jurors"].as_array().unwrap().len(), 3, "juror data preserved");
    assert!(run["result"]["jurorSummary"].is_object());
    app.stop().await;
}

async fn check_delphi(app: &TestApp, question: &str, kind: &str) {
    let request = json!({ "mode": "delphi", "question": question,
                          "modeConfig": { "panelistModels": ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"],
                                          "facilitatorModel": "sim/delta", "maxRounds": 4 } });
    let (stored, events) = run_over_ws(app, request).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let names = stage_events(&events);
    assert_eq!(&names[..2], ["delphi_start", "classify_complete"]);
    assert_eq!(data_of(&events, "classify_complete")["data"]["type"], kind);
    let rounds: Vec<&Value> = events.iter().filter(|e| e["event"] == "round_complete").collect();
    assert!(!rounds.is_empty() && rounds.len() <= 4);
    assert!(
        names.contains(&"convergence_reached".to_string())
            || names.contains(&"max_rounds_reached".to_string())
    );
    assert_eq!(
        &names[names.len() - 4..],
        ["synthesis_start", "synthesis_complete", "title_complete", "complete"]
    );
    // Live estimates are anonymous; the stored result reveals the models.
    for r in &rounds {
        for e in r["data"]["data"]["estimates"].as_array().unwrap() {
            assert!(e.get("model").is_none() && e["participantIndex"].is_number(), "{e}");
        }
    }
    let result = &stored["result"];
    assert_eq!(result["rounds"].as_array().unwrap().len(), rounds.len());
    for (i, r) in rounds.iter().enumerate() {
        assert_eq!(result["rounds"][i]["stats"], r["data"]["data"]["stats"]);
        assert_eq!(result["rounds"][i]["converged"], r["data"]["data"]["converged"]);
        assert!(result["rounds"][i]["estimates"][0]["model"].as_str().unwrap().starts_with("sim/"));
    }
    assert_eq!(result["report"], data_of(&events, "synthesis_complete")["data"]);
    assert_eq!(result["classification"], data_of(&events, "classify_complete")["data"]);
    assert_eq!(stored["answer"], result["report"]["report"]);
}

#[actix_web::test]
async fn delphi_runs_numeric_and_qualitative_questions_live_and_reloads() {
    let app = spawn_app().await;
    check_delphi(&app, "How many software engineers will be employed globally by 2030?", "numeric")
        .await;
    check_delphi(&app, "Should our company adopt a monorepo?", "qualitative").await;
    app.stop().await;
}

#[actix_web::test]
async fn delphi_runs_through_the_sim_server_and_refuses_bad_requests() {
    let app = spawn_with(Options { sim_over_http: true, ..Options::default() }).await;
    check_delphi(&app, "What percentage of code will be AI-written in 2028?", "numeric").await;
    let started = app
        .start(json!({ "mode": "delphi", "question": "Monorepo or polyrepo?",
                       "modeConfig": { "questionType": "qualitative", "options": ["Monorepo", "Polyrepo", "Hybrid"], "maxRounds": 3 } }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        run["result"]["classification"]["options"],
        json!(["Monorepo", "Polyrepo", "Hybrid"])
    );
    let answers: Vec<&str> = run["result"]["rounds"][0]["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["answer"].as_str())
        .collect();
    assert!(answers.iter().all(|a| ["Monorepo", "Polyrepo", "Hybrid"].contains(a)), "{answers:?}");
    let mut follow = json!({ "mode": "delphi", "question": "again?" });
    follow["conversationId"] = started["conversationId"].clone();
    let (status, body) = app.post("/api/deliberations", &follow).await;
    assert_eq!((status, body["field"].as_str()), (400, Some("conversationId")));
    let (status, body) = app
        .post(
            "/api/deliberations",
            &json!({ "mode": "delphi", "question": "q", "modeConfig": { "maxRounds": 9 } }),
        )
        .await;
    assert_eq!((status, body["field"].as_str()), (400, Some("modeConfig.maxRounds")));
    app.stop().await;
}

const BRIEF: &str = "# The UK four-day work week\n\nTrials in 2022 across 61 companies reported stable productivity and lower burnout. Critics argue the sample was self-selected.";

#[actix_web::test]
async fn clarity_scores_a_brief_and_flagged_runs_reach_the_review_queue() {
    let app = spawn_with(Options { sim_over_http: true, ..Options::default() }).await;
    let request =
        json!({ "mode": "clarity", "modeConfig": { "content": BRIEF, "title": "Four-day week" } });
    let (stored, events) = run_over_ws(&app, request).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    let names = stage_events(&events);
    assert_eq!(names[0], "clarity_start");
    assert_eq!(names.iter().filter(|e| *e == "evaluator_complete").count(), 3);
    let score = data_of(&events, "score_complete")["data"].clone();
    assert_eq!(stored["result"]["score"], score, "the result reloads from the rows");
    assert_eq!(stored["result"]["evaluations"].as_array().unwrap().len(), 3);
    let s = score["score"].as_f64().unwrap();
    assert!((0.0..=10.0).contains(&s) && (s * 10.0).fract() == 0.0, "0-10 with one decimal: {s}");
    assert_eq!(score["breakdown"].as_array().unwrap().len(), 7);
    assert!(score["critique"].as_array().unwrap().len() <= 5);
    let method = score["method"].as_str().unwrap();
    assert_eq!(
        names.contains(&"arbiter_start".to_string()),
        method == "arbiter" || score["needsHumanReview"] == true
    );
    // Run briefs until one needs the Arbiter (the sim's skeptic disputes about half of them).
    let mut flagged = None;
    for i in 0..12 {
        let started = app
            .start(json!({ "mode": "clarity", "modeConfig": { "content": format!("{BRIEF}\n\nVariant {i}.") } }))
            .await;
        let run = app.wait_done(started["runId"].as_str().unwrap()).await;
        assert_eq!(run["status"], "completed", "{run}");
        if run["result"]["score"]["needsHumanReview"] == true {
            assert_eq!(run["result"]["score"]["method"], "arbiter");
            assert!(run["result"]["arbiter"].is_object());
            assert_eq!(run["review"]["needsHumanReview"], true);
            flagged = Some(started["runId"].as_str().unwrap().to_string());
            break;
        }
    }
    let flagged = flagged.expect("some brief needed the Arbiter");
    let (_, pending) = app.get("/api/reviews").await;
    let entry = pending["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["runId"] == flagged.as_str())
        .unwrap()
        .clone();
    assert!(entry["reason"].as_str().unwrap().contains("Arbiter"));
    // The queue says what each flagged run was about, and how it came out.
    let (_, detail) = app.get(&format!("/api/deliberations/{flagged}")).await;
    assert_eq!(entry["title"], detail["title"], "{entry}");
    assert_eq!(entry["question"], detail["question"], "{entry}");
    assert_eq!(entry["outcome"], detail["outcome"]);
    assert!(entry["outcome"].is_string(), "{entry}");
    let (status, marked) = app
        .post(
            &format!("/api/reviews/{flagged}"),
            &json!({ "note": "Checked: the skeptic had a point." }),
        )
        .await;
    assert_eq!(status, 200, "{marked}");
    assert!(marked["reviewedAt"].is_number());
    let (_, pending) = app.get("/api/reviews?status=pending").await;
    assert!(pending["reviews"].as_array().unwrap().iter().all(|r| r["runId"] != flagged.as_str()));
    let (_, reviewed) = app.get("/api/reviews?status=reviewed").await;
    assert_eq!(reviewed["reviews"][0]["note"], "Checked: the skeptic had a point.");
    assert_eq!(app.post("/api/reviews/not-a-run", &json!({ "note": "x" })).await.0, 404);
    assert_eq!(app.post(&format!("/api/reviews/{flagged}"), &json!({ "nope": 1 })).await.0, 400);
    assert_eq!(app.get("/api/reviews?status=maybe").await.0, 400);
    let (status, body) = app
        .post(
            "/api/deliberations",
            &json!({ "mode": "clarity", "modeConfig": { "content": "x", "discussion": "often" } }),
        )
        .await;
    assert_eq!((status, body["field"].as_str()), (400, Some("modeConfig.discussion")));
    app.stop().await;
}
