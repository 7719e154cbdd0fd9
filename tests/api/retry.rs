//! Transient model failures are retried inside the call's budget, visibly.

use serde_json::json;

use crate::helpers::*;

#[actix_web::test]
async fn rate_limits_and_server_errors_are_retried_and_the_run_completes() {
    for over_http in [false, true] {
        let app = spawn_with(Options { sim_over_http: over_http, ..Options::default() }).await;
        let mut ws = app.ws().await;
        ws.send(json!({ "type": "start", "request": {
            "question": "Retry?", "councilModels": ["sim/flaky-a", "sim/ratelimit-b", "sim/gamma"], "chairmanModel": "sim/gamma" } }))
            .await;
        let (started, _) = ws.until("started", None).await;
        let run = started["runId"].as_str().unwrap().to_string();
        let events = ws.events_until_end(&run).await;
        ws.close().await;
        assert_eq!(events.last().unwrap()["event"], "complete", "over_http={over_http}");
        let retries: Vec<_> = events.iter().filter(|e| e["event"] == "call_retry").collect();
        let limited = retries
            .iter()
            .find(|e| e["data"]["model"] == "sim/ratelimit-b")
            .expect("the rate limit was retried");
        assert_eq!(limited["data"]["error"]["status"], 429);
        assert_eq!(limited["data"]["delayMs"], 1000, "Retry-After is honoured");
        let flaky = retries
            .iter()
            .find(|e| e["data"]["model"] == "sim/flaky-a")
            .expect("the 503 was retried");
        assert_eq!(
            (flaky["data"]["error"]["status"].clone(), flaky["data"]["attempt"].clone()),
            (json!(503), json!(1))
        );
        let stored = app.wait_done(&run).await;
        assert_eq!(
            stored["result"]["stage1"].as_array().unwrap().len(),
            3,
            "every member answered in the end"
        );
        app.stop().await;
    }
}

#[actix_web::test]
async fn a_wait_beyond_the_budget_is_not_taken_and_the_real_error_is_reported() {
    let app =
        spawn_with(Options { sim_over_http: true, stage_timeout_ms: 1_000, ..Options::default() })
            .await;
    let started = app
        .start(json!({ "question": "Q?", "councilModels": ["sim/ratelimit-x", "sim/alpha", "sim/beta"], "chairmanModel": "sim/alpha" }))
        .await;
    let run = started["runId"].as_str().unwrap();
    let stored = app.wait_done(run).await;
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(stored["result"]["stage1"].as_array().unwrap().len(), 2);
    let url = format!("{}/api/deliberations/{run}/events", app.base);
    let text = app.http.get(url).send().await.unwrap().text().await.unwrap();
    assert!(!text.contains("event: call_retry"), "a 1 s Retry-After does not fit a 1 s budget");
    assert!(
        text.contains("HTTP 429: simulated rate limit of sim/ratelimit-x"),
        "the provider's own error reaches the events"
    );
    app.stop().await;
}
