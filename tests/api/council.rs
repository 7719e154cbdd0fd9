//! Council mode through the whole server: REST start, stored result, edge cases.

use serde_json::json;

use crate::helpers::*;

#[actix_web::test]
async fn council_completes_and_its_stored_result_rebuilds_the_seed_shape() {
    let app = spawn_app().await;
    let started = app.start(council_request("What are the trade-offs of microservices?")).await;
    let run_id = started["runId"].as_str().unwrap();
    assert!(started["conversationId"].is_string() && started["messageId"].is_string());
    let run = app.wait_done(run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let result = &run["result"];
    assert_eq!(result["stage1"].as_array().unwrap().len(), 3);
    assert_eq!(result["stage2"].as_array().unwrap().len(), 3);
    let label_map = result["stage2Metadata"]["labelToModel"].as_object().unwrap();
    assert_eq!(label_map.len(), 3);
    let mut models: Vec<&str> = label_map.values().filter_map(|v| v.as_str()).collect();
    models.sort();
    assert_eq!(models, vec!["sim/alpha", "sim/beta", "sim/gamma"], "de-anonymised");
    let agg = result["stage2Metadata"]["aggregateRankings"].as_array().unwrap();
    assert_eq!(agg.len(), 3, "every sim ranking parses: {result}");
    assert_eq!(result["stage3"]["model"], "sim/alpha");
    let synthesis = result["stage3"]["response"].as_str().unwrap();
    assert!(!synthesis.is_empty());
    assert_eq!(run["answer"].as_str(), Some(synthesis), "the synthesis is the assistant message");
    assert!(result["title"].as_str().is_some_and(|t| !t.is_empty()), "{result}");
    assert!(run["finishedAt"].as_i64().is_some());
    assert!(run["usage"]["completionTokens"].as_i64().unwrap() > 0);

    let conv_id = started["conversationId"].as_str().unwrap();
    let (status, conv) = app.get(&format!("/api/conversations/{conv_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(conv["messages"].as_array().unwrap().len(), 2);
    assert_eq!(conv["conversation"]["mode"], "council");
    assert_eq!(conv["conversation"]["title"], result["title"]);

    let (_, list) = app.get("/api/deliberations").await;
    assert!(list["recent"].as_array().unwrap().iter().any(|r| r["id"] == run_id));
    let (_, convs) = app.get("/api/conversations").await;
    assert!(convs["conversations"].as_array().unwrap().iter().any(|c| c["id"] == conv_id));
    app.stop().await;
}

#[actix_web::test]
async fn a_follow_up_continues_the_conversation_without_a_new_title() {
    let app = spawn_app().await;
    let first = app.start(council_request("What is Rust?")).await;
    app.wait_done(first["runId"].as_str().unwrap()).await;
    let conv = first["conversationId"].as_str().unwrap();
    let second = app
        .start(json!({ "question": "And how does it compare to Go?", "conversationId": conv,
                       "councilModels": ["sim/alpha", "sim/beta"], "chairmanModel": "sim/beta" }))
        .await;
    assert_eq!(second["conversationId"], conv);
    let run = app.wait_done(second["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(run["result"].get("title").is_none(), "no title for a follow-up");
    let (_, c) = app.get(&format!("/api/conversations/{conv}")).await;
    let roles: Vec<&str> =
        c["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["user", "assistant", "user", "assistant"]);
    assert_eq!(c["runs"].as_array().unwrap().len(), 2);
    app.stop().await;
}

#[actix_web::test]
async fn failing_members_are_left_out_and_the_council_goes_on() {
    let app = spawn_app().await;
    let started = app
        .start(
            json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/fail-one", "sim/beta"],
                       "chairmanModel": "sim/gamma" }),
        )
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    let stage1 = run["result"]["stage1"].as_array().unwrap();
    assert_eq!(stage1.len(), 2);
    assert!(stage1.iter().all(|r| r["model"] != "sim/fail-one"));
    assert_eq!(run["result"]["stage2Metadata"]["labelToModel"].as_object().unwrap().len(), 2);
    app.stop().await;
}

#[actix_web::test]
async fn when_every_member_fails_the_run_fails_with_an_error() {
    let app = spawn_app().await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/fail-a", "sim/fail-b"], "chairmanModel": "sim/alpha" }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "failed");
    assert!(run["error"].as_str().unwrap().to_lowercase().contains("fail"), "{run}");
    assert!(run["answer"].is_null());
    app.stop().await;
}

#[actix_web::test]
async fn one_answer_is_not_enough_to_rank() {
    let app = spawn_app().await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/fail-b"], "chairmanModel": "sim/alpha" }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "failed", "{run}");
    app.stop().await;
}

#[actix_web::test]
async fn a_failing_chairman_fails_the_run_but_keeps_stages_one_and_two() {
    let app = spawn_app().await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/beta"], "chairmanModel": "sim/fail-chair" }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["result"]["stage1"].as_array().unwrap().len(), 2);
    assert_eq!(run["result"]["stage2"].as_array().unwrap().len(), 2);
    assert!(run["result"]["stage3"].is_null());
    app.stop().await;
}

#[actix_web::test]
async fn a_stalled_member_times_out_and_the_rest_continue() {
    let app = spawn_with(Options { stage_timeout_ms: 1_000, ..Options::default() }).await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/alpha", "sim/stall", "sim/beta"], "chairmanModel": "sim/alpha" }))
        .await;
    let t = std::time::Instant::now();
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(t.elapsed().as_secs() < 10);
    assert_eq!(run["result"]["stage1"].as_array().unwrap().len(), 2);
    app.stop().await;
}

#[actix_web::test]
async fn unparseable_rankings_leave_an_empty_aggregate_and_the_synthesis_proceeds() {
    let app = spawn_app().await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/malformed-a", "sim/malformed-b"], "chairmanModel": "sim/alpha" }))
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["stage2Metadata"]["aggregateRankings"], json!([]));
    assert!(run["result"]["stage3"]["response"].is_string());
    app.stop().await;
}

#[actix_web::test]
async fn the_sim_works_through_the_sim_server_over_http() {
    let app = spawn_with(Options { sim_over_http: true, ..Options::default() }).await;
    let started = app.start(council_request("Is HTTP the same as in-process?")).await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["stage2Metadata"]["aggregateRankings"].as_array().unwrap().len(), 3);
    let stats = app.sim_stats.as_ref().unwrap().snapshot();
    assert!(
        stats.requests >= 7,
        "3 answers + 3 rankings + chairman + title went over HTTP: {stats:?}"
    );
    app.stop().await;
}

#[actix_web::test]
async fn calls_queued_behind_a_capped_server_wait_their_turn_instead_of_timing_out() {
    // One call at a time, 700 ms each, a 1 s call timeout: a stage's third call (and the
    // title's) waits longer than the timeout for its turn, then answers well within it.
    let app = spawn_with(Options {
        sim_latency_ms: 700,
        stage_timeout_ms: 1_000,
        max_concurrent_calls: Some(1),
        ..Options::default()
    })
    .await;
    let (id, events) = watch(&app, council_request("Trade-offs of microservices?")).await;
    let (_, run) = app.get(&format!("/api/deliberations/{id}")).await;
    assert_eq!(run["status"], "completed", "{run}");
    // Watchers see which calls wait, and when each is sent: for a call, its start, that it
    // waits (on the sim's route), that it is sent, and its end, in that order.
    let waiting = all_of(&events, "call_waiting");
    assert!(waiting.len() >= 2, "calls queued behind one slot say so: {waiting:?}");
    for w in &waiting {
        assert_eq!(w["route"], "sim/", "{w}");
        let key = &w["key"];
        let of_call: Vec<&str> = events
            .iter()
            .filter(|e| e["data"]["key"] == *key && e["event"] != "token")
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(of_call, ["call_start", "call_waiting", "call_turn", "call_complete"], "{key}");
    }
    let result = &run["result"];
    for stage in ["stage1", "stage2"] {
        let rows = result[stage].as_array().unwrap();
        assert_eq!(rows.len(), 3, "no call timed out in its queue: {result}");
        for r in rows {
            let ms = r["responseTimeMs"].as_u64().unwrap();
            assert!(ms < 1_000, "timed from its turn, not from the queue: {r}");
        }
    }
    assert_eq!(result["stage3"]["model"], "sim/alpha", "{result}");
    app.stop().await;
}
