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
    // A name that cannot be an id is not found either (the id is shown clipped), through REST,
    // SSE and the WebSocket alike.
    let long = "x".repeat(500);
    let (status, body) = app.get(&format!("/api/deliberations/{long}")).await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().len() < 120, "{body}");
    for path in
        ["/api/deliberations/a%20b", "/api/deliberations/a;b/events", "/api/conversations/%C3%A9"]
    {
        assert_eq!(app.get(path).await.0, 404, "{path}");
    }
    assert_eq!(app.post("/api/deliberations/a%20b/cancel", &json!({})).await.0, 404);
    let mut ws = app.ws().await;
    for kind in ["watch", "cancel"] {
        ws.send(json!({ "type": kind, "id": kind, "run": "a b" })).await;
        let v = ws.next().await;
        assert_eq!(
            (&v["type"], &v["id"], &v["run"]),
            (&json!("error"), &json!(kind), &json!("a b")),
            "{v}"
        );
        assert!(v["message"].as_str().unwrap().contains("not found"), "{v}");
    }
    ws.close().await;
    assert_eq!(app.get("/api/deliberations?limit=0").await.0, 400);
    assert_eq!(app.get("/api/nothing-here").await.0, 404);
    let (status, health) = app.get("/healthz").await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let (_, models) = app.get("/api/models").await;
    assert_eq!(models["offline"], true);
    assert_eq!(models["simDefaults"], true, "a run naming no models runs on the sims");
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

#[actix_web::test]
async fn unknown_fields_wrong_types_and_long_texts_are_refused_by_name() {
    let app = spawn_app().await;
    let big = |n: usize| "x".repeat(n);
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "question": "q", "councilModelz": ["sim/alpha", "sim/beta"] }), "councilModelz"),
        (json!({ "question": "q", "Question": "q" }), "Question"),
        (json!({ "question": "q", "modeConfig": { "models": ["sim/a"] } }), "modeConfig.models"),
        (json!({ "mode": "vote", "question": "q", "councilModels": ["sim/a"] }), "councilModels"),
        (
            json!({ "mode": "vote", "question": "q", "modeConfig": { "model": [] } }),
            "modeConfig.model",
        ),
        (
            json!({ "mode": "jury", "question": "q", "modeConfig": { "contnet": "…" } }),
            "modeConfig.contnet",
        ),
        (
            json!({ "mode": "debate", "question": "q", "modeConfig": { "chairmanModel": "sim/a" } }),
            "modeConfig.chairmanModel",
        ),
        (
            json!({ "mode": "delphi", "question": "q", "modeConfig": { "rounds": 3 } }),
            "modeConfig.rounds",
        ),
        (
            json!({ "mode": "clarity", "modeConfig": { "content": "c", "models": { "judge": "sim/a" } } }),
            "modeConfig.models.judge",
        ),
        (
            json!({ "mode": "clarity", "modeConfig": { "content": "c", "weights": {} } }),
            "modeConfig.weights",
        ),
        // Wrong types.
        (json!({ "question": "q", "timeoutMs": "60000" }), "timeoutMs"),
        (json!({ "question": "q", "councilModels": ["sim/alpha", 7] }), "councilModels"),
        (
            json!({ "mode": "delphi", "question": "q", "modeConfig": { "maxRounds": 2.5 } }),
            "modeConfig.maxRounds",
        ),
        (
            json!({ "mode": "delphi", "question": "q", "modeConfig": { "options": "a,b" } }),
            "modeConfig.options",
        ),
        (
            json!({ "mode": "clarity", "modeConfig": { "content": "c", "models": "sim/a" } }),
            "modeConfig.models",
        ),
        (json!({ "mode": "jury", "question": "q", "modeConfig": "content" }), "modeConfig"),
        (json!({ "question": "q", "visibility": ["team"] }), "visibility"),
        // Sizes.
        (json!({ "question": big(20_001) }), "question"),
        (
            json!({ "mode": "jury", "question": "q", "modeConfig": { "content": big(200_001) } }),
            "modeConfig.content",
        ),
        (
            json!({ "mode": "clarity", "modeConfig": { "content": big(200_001) } }),
            "modeConfig.content",
        ),
        (
            json!({ "mode": "jury", "question": "q", "modeConfig": { "content": "c", "originalQuestion": big(20_001) } }),
            "modeConfig.originalQuestion",
        ),
        (json!({ "question": "q", "chairmanModel": big(201) }), "chairmanModel"),
        (json!({ "question": "nul \u{0} inside" }), "question"),
        // Too many models, per mode.
        (
            json!({ "mode": "vote", "question": "q", "modeConfig": { "models": vec!["sim/a"; 8] } }),
            "modeConfig.models",
        ),
        (
            json!({ "mode": "jury", "question": "q", "modeConfig": { "content": "c", "jurorModels": vec!["sim/a"; 7] } }),
            "modeConfig.jurorModels",
        ),
        (
            json!({ "mode": "debate", "question": "q", "modeConfig": { "models": vec!["sim/a"; 7] } }),
            "modeConfig.models",
        ),
        (
            json!({ "mode": "delphi", "question": "q", "modeConfig": { "panelistModels": vec!["sim/a"; 8] } }),
            "modeConfig.panelistModels",
        ),
        (
            json!({ "mode": "delphi", "question": "q", "modeConfig": { "options": vec!["o"; 11] } }),
            "modeConfig.options",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = app.post("/api/deliberations", &body).await;
        assert_eq!(status, 400, "{field} -> {v}");
        assert_eq!(v["field"], field, "{v}");
        assert!(v["error"].as_str().is_some_and(|e| e.contains(field)), "{v}");
    }
    let (_, v) =
        app.post("/api/deliberations", &json!({ "question": "q", "councilModelz": [] })).await;
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("unknown field") && error.contains("did you mean \"councilModels\""),
        "{v}"
    );
    // Texts at their limits are fine (counted in characters, not bytes).
    let (status, v) = app
        .post(
            "/api/deliberations",
            &json!({ "question": "é".repeat(20_000), "visibility": "team" }),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let run = app.wait_done(v["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed");
    // Over the WebSocket the same rule names the same field.
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "id": 4, "request": { "mode": "jury", "question": "q", "modeConfig": { "contnet": "x" } } })).await;
    let v = ws.next().await;
    assert_eq!(
        (v["type"].as_str(), v["field"].as_str(), v["id"].as_i64()),
        (Some("error"), Some("modeConfig.contnet"), Some(4))
    );
    ws.close().await;
    let (_, list) = app.get("/api/deliberations").await;
    assert_eq!(list["recent"].as_array().map(Vec::len), Some(1), "only the valid run started");
    app.stop().await;
}

#[actix_web::test]
async fn bodies_too_large_not_json_or_malformed_get_413_415_and_400() {
    let app = spawn_app().await;
    let url = format!("{}/api/deliberations", app.base);
    let send = |body: String, content_type: Option<&'static str>| {
        let mut req = app.http.post(&url).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        async move {
            let resp = req.send().await.expect("post");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    // Over 1 MiB: 413, whatever is inside.
    let huge = json!({ "question": "q", "modeConfig": { "content": "x".repeat(1 << 20) } });
    let (status, v) = send(huge.to_string(), Some("application/json")).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["field"], "body");
    assert!(v["error"].as_str().unwrap().contains("1048576"), "{v}");
    // Not sent as JSON: 415.
    let body = json!({ "question": "q" }).to_string();
    for ct in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let (status, v) = send(body.clone(), ct).await;
        assert_eq!(status, 415, "{ct:?} -> {v}");
        assert!(v["error"].as_str().unwrap().contains("application/json"), "{v}");
    }
    // Malformed: 400 naming the body, with where it broke.
    for bad in ["{not json", "", "{\"question\": \"q\"", "[1,", "\u{0}"] {
        let (status, v) = send(bad.to_string(), Some("application/json")).await;
        assert_eq!(status, 400, "{bad:?} -> {v}");
        assert_eq!(v["field"], "body", "{bad:?} -> {v}");
        assert!(v["error"].as_str().unwrap().starts_with("invalid JSON body"), "{v}");
    }
    // Typed bodies name their unknown or missing fields too.
    let (status, v) = app.post("/api/reviews/some-run", &json!({ "notes": "ok" })).await;
    assert_eq!((status, v["field"].as_str()), (400, Some("notes")), "{v}");
    let (status, v) = app.post("/api/reviews/some-run", &json!({})).await;
    assert_eq!((status, v["field"].as_str()), (400, Some("note")), "{v}");
    let (_, list) = app.get("/api/deliberations").await;
    assert_eq!(list["recent"], json!([]), "nothing was started");
    app.stop().await;
}
