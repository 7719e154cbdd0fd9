//! Client mistakes get a 400 (or a WebSocket error) naming the field, before anything runs.

use serde_json::{json, Value};

use crate::helpers::*;

#[actix_web::test]
async fn bad_requests_name_the_field_and_start_nothing() {
    let app = spawn_app().await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "question": "" }), "question"),
        (json!({ "question": "   " }), "question"),
        (json!({}), "question"),
        (json!({ "question": 42 }), "question"),
        (json!({ "question": "q", "councilModels": ["sim/alpha"] }), "councilModels"),
        (
            json!({ "question": "q", "councilModels": ["sim/a","sim/b","sim/c","sim/d","sim/e","sim/f","sim/g"] }),
            "councilModels",
        ),
        (json!({ "question": "q", "councilModels": "sim/alpha" }), "councilModels"),
        (json!({ "question": "q", "chairmanModel": "" }), "chairmanModel"),
        (json!({ "question": "q", "mode": "poetry" }), "mode"),
        (
            json!({ "question": "q", "councilModels": ["sim/alpha", "nokey/model"] }),
            "councilModels[1]",
        ),
        (json!({ "question": "q", "conversationId": "no-such-conversation" }), "conversationId"),
        (json!([1, 2]), "body"),
    ];
    for (body, field) in cases {
        let (status, v) = app.post("/api/deliberations", &body).await;
        assert_eq!(status, 400, "{body} -> {v}");
        assert_eq!(v["field"], field, "{body} -> {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    let resp = app
        .http
        .post(format!("{}/api/deliberations", app.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let (_, list) = app.get("/api/deliberations").await;
    assert_eq!(list["recent"], json!([]), "nothing was started");

    let mut ws = app.ws().await;
    ws.send(
        json!({ "type": "start", "id": "x", "request": { "question": "q", "councilModels": [] } }),
    )
    .await;
    let v = ws.next().await;
    assert_eq!(v["type"], "error");
    assert_eq!(v["field"], "councilModels");
    assert_eq!(v["id"], "x");
    ws.close().await;

    assert_eq!(app.get("/api/deliberations/nope").await.0, 404);
    assert_eq!(app.get("/api/conversations/nope").await.0, 404);
    assert_eq!(app.get("/api/deliberations?limit=0").await.0, 400);
    assert_eq!(app.get("/api/nothing-here").await.0, 404);
    let (status, health) = app.get("/healthz").await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let (_, models) = app.get("/api/models").await;
    assert_eq!(models["offline"], true);
    assert_eq!(models["modes"]["council"]["chairmanModel"], "sim/alpha");
    assert_eq!(models["modes"]["jury"]["foremanModel"], "sim/delta");
    assert_eq!(models["modes"]["vote"]["models"].as_array().map(Vec::len), Some(3));
    assert_eq!(models["modes"]["debate"]["models"].as_array().map(Vec::len), Some(3));
    assert!(models["modes"]["jury"].get("content").is_none());
    app.stop().await;
}

#[actix_web::test]
async fn a_request_with_no_models_gets_the_offline_defaults() {
    let app = spawn_app().await;
    let started = app.start(json!({ "question": "Defaults?" })).await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    let models: Vec<&str> = run["result"]["stage1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert!(models.iter().all(|m| m.starts_with("sim/")), "{models:?}");
    app.stop().await;
}
