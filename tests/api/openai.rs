//! The OpenAI-compatible client against a fake provider over real HTTP: streaming and plain
//! answers, usage and cost, each class of failure, and the output cap and cost request in
//! the body.

use std::net::TcpListener;

use actix_web::{web, App, HttpResponse, HttpServer};
use conclave::modes::{CallErrorKind, ChatMessage};
use conclave::providers::openai::{OpenAiCompatible, TokenField};
use conclave::providers::{ChatRequest, Provider};
use serde_json::{json, Value};

/// A fake provider: the model id picks the answer.
async fn fake(body: web::Json<Value>, req: actix_web::HttpRequest) -> HttpResponse {
    let model = body["model"].as_str().unwrap_or("").to_string();
    let auth =
        req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let sse = |chunks: &[&str]| {
        HttpResponse::Ok()
            .content_type("text/event-stream")
            .body(chunks.iter().map(|c| format!("data: {c}\n\n")).collect::<String>())
    };
    match model.as_str() {
        "stream-ok" => {
            assert_eq!(body["stream"], true);
            assert_eq!(body["stream_options"]["include_usage"], true);
            sse(&[
                r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
                r#"{"choices":[{"delta":{"content":"Hello"}}]}"#,
                r#"{"choices":[{"delta":{"content":", world"}}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"cost":0.0042}}"#,
                "[DONE]",
            ])
        }
        "plain-ok" => HttpResponse::Ok().json(json!({
            "choices": [{ "message": { "role": "assistant", "content": format!("auth={auth}") } }],
            "usage": { "prompt_tokens": 5, "completion_tokens": 2 }
        })),
        "rate-limited" => HttpResponse::TooManyRequests()
            .json(json!({ "error": { "message": "Rate limit exceeded: slow down" } })),
        "html-error" => HttpResponse::BadGateway().body("<html>bad gateway</html>"),
        "not-json" => HttpResponse::Ok().content_type("application/json").body("{oops"),
        "no-choices" => HttpResponse::Ok().json(json!({ "choices": [] })),
        "stream-empty" => sse(&[r#"{"choices":[{"delta":{"role":"assistant"}}]}"#, "[DONE]"]),
        "stream-error" => sse(&[r#"{"error":{"message":"upstream overloaded"}}"#]),
        // The request body itself, as the answer.
        "echo" => HttpResponse::Ok().json(json!({
            "choices": [{ "message": { "role": "assistant", "content": body.to_string() } }]
        })),
        _ => HttpResponse::NotFound().finish(),
    }
}

fn start_fake() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = HttpServer::new(|| App::new().route("/v1/chat/completions", web::post().to(fake)))
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
    actix_web::rt::spawn(server);
    format!("http://127.0.0.1:{port}/v1")
}

fn ask(model: &str) -> ChatRequest {
    ChatRequest::new(model, vec![ChatMessage::user("hi")])
}

#[actix_web::test]
async fn streams_text_and_records_usage_and_cost() {
    let client = OpenAiCompatible::new(&start_fake(), Some("k".into()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let r = client.chat(ask("stream-ok"), Some(tx)).await.unwrap();
    assert_eq!(r.text, "Hello, world");
    let usage = r.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.cost), (12, 3, Some(0.0042)));
    let mut deltas = Vec::new();
    while let Ok(d) = rx.try_recv() {
        deltas.push(d);
    }
    assert_eq!(deltas, vec!["Hello", ", world"]);
}

#[actix_web::test]
async fn plain_requests_send_the_key_and_read_the_message() {
    let client = OpenAiCompatible::new(&start_fake(), Some("secret".into()));
    let r = client.chat(ask("plain-ok"), None).await.unwrap();
    assert_eq!(r.text, "auth=Bearer secret");
    assert_eq!(r.usage.unwrap().cost, None);
}

#[actix_web::test]
async fn failures_are_classified_with_the_providers_message() {
    let base = start_fake();
    let client = OpenAiCompatible::new(&base, None);
    let e = client.chat(ask("rate-limited"), None).await.unwrap_err();
    assert_eq!((e.kind, e.status), (CallErrorKind::Http, Some(429)));
    assert!(e.message.contains("Rate limit exceeded: slow down"), "{}", e.message);
    let e = client.chat(ask("html-error"), None).await.unwrap_err();
    assert_eq!(e.status, Some(502));
    assert!(e.message.contains("bad gateway"));
    for model in ["not-json", "no-choices"] {
        let e = client.chat(ask(model), None).await.unwrap_err();
        assert_eq!(e.kind, CallErrorKind::Malformed, "{model}: {}", e.message);
    }
    for model in ["stream-empty", "stream-error"] {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let e = client.chat(ask(model), Some(tx)).await.unwrap_err();
        assert_eq!(e.kind, CallErrorKind::Malformed, "{model}: {}", e.message);
    }
    let e = client.chat(ask("missing"), None).await.unwrap_err();
    assert_eq!(e.status, Some(404));
    // Nothing listens on this port.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = OpenAiCompatible::new(&format!("http://127.0.0.1:{closed}/v1"), None);
    let e = dead.chat(ask("x"), None).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Transport, "{}", e.message);
}

/// The body a provider receives carries the output cap in the route's field, and asks
/// OpenRouter (and only OpenRouter) for the call's cost.
#[actix_web::test]
async fn the_body_carries_the_cap_and_asks_openrouter_for_cost() {
    let base = start_fake();
    let sent = |client: OpenAiCompatible| async move {
        let request = ChatRequest { max_tokens: Some(300), ..ask("echo") };
        let text = client.chat(request, None).await.unwrap().text;
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let body = sent(OpenAiCompatible::new(&base, None)).await;
    assert_eq!(body["max_tokens"], 300, "{body}");
    assert!(body.get("max_completion_tokens").is_none() && body.get("usage").is_none(), "{body}");
    let body =
        sent(OpenAiCompatible::new(&base, None).token_field(TokenField::MaxCompletionTokens)).await;
    assert_eq!(body["max_completion_tokens"], 300, "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
    // A route forced to OpenRouter (the real one is known by its host, openrouter.ai).
    let body = sent(OpenAiCompatible::new(&base, None).openrouter(true)).await;
    assert_eq!(body["usage"], json!({ "include": true }), "{body}");
    assert_eq!(body["max_tokens"], 300, "{body}");
}

/// The sim-server streams an answer in pieces spread over its latency, with a keep-alive
/// comment in each pause longer than 100 ms, and the pieces read by the client add up to the
/// very answer the same request gets unstreamed, with its usage.
#[actix_web::test]
async fn the_sim_server_streams_its_answer_over_the_latency_with_keepalives() {
    use conclave::providers::sim::{SimConfig, SimProvider};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let sim = SimProvider::new(SimConfig { latency_ms: 2400, ..SimConfig::default() });
    let (server, _) = conclave::providers::sim_server::build(listener, sim).unwrap();
    actix_web::rt::spawn(server);
    let body = json!({ "model": "sim/alpha", "stream": true,
                       "messages": [{ "role": "user", "content": "Why do streams pause?" }] });
    conclave::providers::openai::install_crypto();
    let started = std::time::Instant::now();
    let raw = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(2400), "the latency is kept");
    let events: Vec<&str> = raw.split("\n\n").filter(|e| !e.is_empty()).collect();
    let keepalives = events.iter().filter(|e| e.starts_with(':')).count();
    let data: Vec<Value> = events
        .iter()
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.last(), Some(&"data: [DONE]"), "{raw}");
    let pieces: Vec<&str> =
        data.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(pieces.len() >= 8, "about a dozen pieces: {pieces:?}");
    assert!(keepalives >= pieces.len() / 2, "keep-alives in the 200 ms pauses: {raw}");
    let usage = &data.last().unwrap()["usage"];
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0, "{raw}");
    let client = OpenAiCompatible::new(&base, None);
    let plain = ChatRequest::new("sim/alpha", vec![ChatMessage::user("Why do streams pause?")]);
    let whole = client.chat(plain, None).await.unwrap();
    assert_eq!(pieces.concat(), whole.text);
    assert_eq!(usage["prompt_tokens"].as_u64(), whole.usage.map(|u| u.prompt_tokens));
}
