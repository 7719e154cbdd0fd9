//! The OpenAI-compatible client against a fake provider over real HTTP: streaming and plain
//! answers, usage and cost, each class of failure, the output cap and cost request in the
//! body, and reasoning sent in its own field; then a whole run on a fake reasoning provider.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use actix_web::{web, App, HttpResponse, HttpServer};
use conclave::modes::{CallErrorKind, ChatMessage};
use conclave::providers::openai::{OpenAiCompatible, ReadLimits, TokenField};
use conclave::providers::{ChatRequest, Provider};
use futures_util::StreamExt;
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
        "stream-reasoning" => sse(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":"Two and"}}]}"#,
            r#"{"choices":[{"delta":{"content":null,"reasoning_content":" two..."}}]}"#,
            r#"{"choices":[{"delta":{"content":"It is","reasoning_content":null}}]}"#,
            r#"{"choices":[{"delta":{"content":" 4."}}]}"#,
            "[DONE]",
        ]),
        "stream-reasoning-only" => sse(&[
            r#"{"choices":[{"delta":{"reasoning":"Still thinking when the cap hit"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
            "[DONE]",
        ]),
        "plain-reasoning" => HttpResponse::Ok().json(json!({
            "choices": [{ "message": { "role": "assistant", "content": "It is 4.",
                                       "reasoning": "Two and two." } }]
        })),
        "plain-reasoning-only" => HttpResponse::Ok().json(json!({
            "choices": [{ "message": { "role": "assistant", "content": null,
                                       "reasoning_content": "Hmm." } }]
        })),
        "plain-nothing" => HttpResponse::Ok().json(json!({
            "choices": [{ "message": { "role": "assistant", "content": "", "reasoning": "" } }]
        })),
        // Careless providers that repeat the key they were sent: after 285 characters in a
        // body that is not JSON (so the message is cut at 300, in the middle of the key),
        // changed, and in a stream's error.
        "echo-key-long" => {
            let key = auth.trim_start_matches("Bearer ");
            HttpResponse::Unauthorized().body(format!("{}{key}", "x".repeat(285)))
        }
        "echo-key-changed" => {
            let key = auth.trim_start_matches("Bearer ");
            let message = format!(
                "bad key {} (shortened: {}…, middle: {})",
                key.to_uppercase(),
                &key[..key.len() - 3],
                &key[4..20]
            );
            HttpResponse::Unauthorized().json(json!({ "error": { "message": message } }))
        }
        "echo-key-stream" => {
            let key = auth.trim_start_matches("Bearer ");
            let detail = format!("{}{key}", "y".repeat(250));
            sse(&[&json!({ "error": { "code": 401, "detail": detail } }).to_string()])
        }
        // Servers that never stop sending: an error body, a whole answer, a stream of
        // (ignored) comment lines, and a stream line that never ends.
        "endless-error" => HttpResponse::InternalServerError().streaming(endless(b"x")),
        "endless-body" => {
            HttpResponse::Ok().content_type("application/json").streaming(endless(b" "))
        }
        "endless-stream" => HttpResponse::Ok()
            .content_type("text/event-stream")
            .streaming(endless(b": padding padding padding padding\n\n")),
        "endless-line" => HttpResponse::Ok().content_type("text/event-stream").streaming(
            futures_util::stream::once(async { Ok(web::Bytes::from_static(b"data: ")) })
                .chain(endless(b"x")),
        ),
        _ => HttpResponse::NotFound().finish(),
    }
}

/// A body that repeats `piece` (in 8 KiB chunks) for as long as the client reads.
fn endless(
    piece: &'static [u8],
) -> impl futures_util::Stream<Item = Result<web::Bytes, actix_web::Error>> + 'static {
    let chunk = web::Bytes::from(piece.repeat(8192 / piece.len()));
    futures_util::stream::repeat_with(move || Ok(chunk.clone()))
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

/// Reasoning in its own field becomes a `<think>` block before the answer; streamed, the
/// deltas add up to exactly the final text. A reply with reasoning and no answer keeps its
/// (closed) trace; one with neither is malformed.
#[actix_web::test]
async fn reasoning_fields_become_a_think_block_before_the_answer() {
    use conclave::modes::reading::split_reasoning;
    let client = OpenAiCompatible::new(&start_fake(), None);
    let streamed = |model: &'static str| {
        let client = &client;
        async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let text = client.chat(ask(model), Some(tx)).await.unwrap().text;
            let mut live = String::new();
            while let Ok(d) = rx.try_recv() {
                live.push_str(&d);
            }
            assert_eq!(live, text, "{model}: the live text is the final text");
            text
        }
    };
    let text = streamed("stream-reasoning").await;
    assert_eq!(text, "<think>\nTwo and two...\n</think>\n\nIt is 4.");
    assert_eq!(split_reasoning(&text).answer, "It is 4.");
    let only = streamed("stream-reasoning-only").await;
    assert_eq!(only, "<think>\nStill thinking when the cap hit\n</think>\n\n");
    assert_eq!(split_reasoning(&only).answer, "");
    let plain = client.chat(ask("plain-reasoning"), None).await.unwrap().text;
    assert_eq!(plain, "<think>\nTwo and two.\n</think>\n\nIt is 4.");
    let plain_only = client.chat(ask("plain-reasoning-only"), None).await.unwrap().text;
    assert_eq!(plain_only, "<think>\nHmm.\n</think>\n\n");
    let e = client.chat(ask("plain-nothing"), None).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Malformed, "{}", e.message);
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

/// The request bodies a fake reasoning provider received.
type Received = Arc<Mutex<Vec<Value>>>;

/// A fake reasoning model server, streaming as the engine asks: its trace in
/// `reasoning_content` deltas, then its answer. Votes for Response A after a draft that voted
/// for Response B; titles without a trace.
async fn reasoner(body: web::Json<Value>, received: web::Data<Received>) -> HttpResponse {
    received.lock().unwrap().push(body.0.clone());
    let model = body["model"].as_str().unwrap_or("").to_string();
    let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    let last = last["content"].as_str().unwrap_or("");
    let (reasoning, content) = if last.starts_with("Generate a brief title") {
        (None, "Reasoned Title".to_string())
    } else if last.starts_with("After a round of deliberation") {
        (Some("My draft says\nVOTE: Response B\nbut A is better."), "VOTE: Response A".into())
    } else {
        (Some("Let me weigh this."), format!("The answer of {model}."))
    };
    let chunk = |delta: Value| format!("data: {}\n\n", json!({ "choices": [{ "delta": delta }] }));
    let mut out = String::new();
    if let Some(r) = reasoning {
        for piece in r.split_inclusive(' ') {
            out.push_str(&chunk(json!({ "reasoning_content": piece, "content": null })));
        }
    }
    out.push_str(&chunk(json!({ "content": content })));
    out.push_str("data: [DONE]\n\n");
    HttpResponse::Ok().content_type("text/event-stream").body(out)
}

/// A Vote run on a fake reasoning provider, through the real server: each call asks for its
/// role's cap (the title 300, the rest the default 2 000 unless configured per mode and role),
/// each stored answer and vote holds its trace in a `<think>` block, the same text the
/// watchers saw streamed, and the votes are the answers', not the drafts'.
#[actix_web::test]
async fn a_run_on_a_reasoning_provider_stores_the_trace_and_counts_the_answer() {
    use conclave::app::Application;
    use conclave::config::Config;
    use conclave::modes::reading::split_reasoning;

    let received: Received = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let fake = format!("http://{}/v1", listener.local_addr().unwrap());
    let data = web::Data::new(received.clone());
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).route("/v1/chat/completions", web::post().to(reasoner))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    actix_web::rt::spawn(server);

    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::defaults();
    config.bind = "127.0.0.1:0".into();
    config.database_url = format!("sqlite://{}", dir.path().join("t.db").display());
    config.token_flush = std::time::Duration::from_millis(20);
    let file: conclave::config::FileConfig = toml::from_str(&format!(
        "[max_tokens]\n\"vote.voter\" = 1500\n\
         [[routes]]\nprefix = \"think/\"\nbase_url = \"{fake}\"\nstrip_prefix = false"
    ))
    .unwrap();
    let parsed = Config::from_parts(file, &Default::default(), None, None, None).unwrap();
    config.max_tokens = parsed.max_tokens;
    config.routes = parsed.routes;
    let app = Application::build(config).await.unwrap();
    let token = crate::helpers::add_user(app.engine().store(), "tester", true).await;
    let url = format!("ws://127.0.0.1:{}/ws", app.port());
    let base = format!("http://127.0.0.1:{}", app.port());
    let handle = app.handle();
    actix_web::rt::spawn(app.run_until_stopped());

    let mut ws = crate::helpers::Ws::connect(&url, &token).await;
    let request = json!({ "mode": "vote", "question": "Which is best?",
                          "modeConfig": { "models": ["think/a", "think/b", "think/c"],
                                          "chairmanModel": "think/a" } });
    ws.send(json!({ "type": "start", "request": request })).await;
    let (started, _) = ws.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();
    let events = ws.events_until_end(&run).await;
    assert_eq!(events.last().unwrap()["event"], "complete", "{events:?}");
    let mut live: std::collections::BTreeMap<String, String> = Default::default();
    for e in events.iter().filter(|e| e["event"] == "token") {
        let key = e["data"]["key"].as_str().unwrap().to_string();
        live.entry(key).or_default().push_str(e["data"]["delta"].as_str().unwrap());
    }

    // Every call asked for its cap.
    let bodies = received.lock().unwrap().clone();
    let title = |b: &&Value| b["messages"][0]["content"].as_str().unwrap().starts_with("Generate");
    let caps: Vec<(bool, u64)> =
        bodies.iter().map(|b| (title(&b), b["max_tokens"].as_u64().unwrap())).collect();
    assert_eq!(caps.len(), 7, "three answers, three votes and a title: {caps:?}");
    assert!(caps.iter().all(|&(t, cap)| cap == if t { 300 } else { 1500 }), "{caps:?}");
    assert!(bodies.iter().all(|b| b.get("usage").is_none()), "no cost asked of a local server");

    let client = crate::helpers::client_with(&token);
    let stored: Value = client
        .get(format!("{base}/api/deliberations/{run}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stored["status"], "completed", "{stored}");
    let result = &stored["result"];
    let model_of = |key: &str| {
        let start = events.iter().find(|e| e["event"] == "call_start" && e["data"]["key"] == key);
        start.unwrap()["data"]["model"].as_str().unwrap().to_string()
    };
    // Stored whole, trace included, exactly as streamed; read without the trace.
    for answer in result["stage1"].as_array().unwrap() {
        let text = answer["response"].as_str().unwrap();
        let model = answer["model"].as_str().unwrap();
        assert_eq!(
            text,
            format!("<think>\nLet me weigh this.\n</think>\n\nThe answer of {model}.")
        );
        assert_eq!(split_reasoning(text).answer, format!("The answer of {model}."));
    }
    let votes = result["voteRound"]["votes"].as_array().unwrap();
    assert_eq!(votes.len(), 3);
    for vote in votes {
        let text = vote["voteText"].as_str().unwrap();
        let split = split_reasoning(text);
        assert!(split.reasoning.unwrap().contains("VOTE: Response B"), "the draft is kept: {text}");
        assert_eq!(split.answer, "VOTE: Response A");
        assert_eq!(vote["votedFor"], "Response A", "the answer's vote, not the draft's");
    }
    assert_eq!(result["winner"]["winnerLabel"], "Response A");
    assert_eq!(result["title"], "Reasoned Title");
    let streamed = |key: &str| live.get(key).cloned().unwrap_or_default();
    for key in live.keys().filter(|k| k.starts_with("stage1:")) {
        let model = model_of(key);
        let stored = result["stage1"].as_array().unwrap().iter().find(|a| a["model"] == model);
        assert_eq!(streamed(key), stored.unwrap()["response"].as_str().unwrap(), "{key}");
    }
    for key in live.keys().filter(|k| k.starts_with("vote:")) {
        let model = model_of(key);
        let stored = votes.iter().find(|v| v["model"] == model).unwrap();
        assert_eq!(streamed(key), stored["voteText"].as_str().unwrap(), "{key}");
    }
    assert_eq!(live.keys().filter(|k| *k != "title").count(), 6, "{:?}", live.keys());
    handle.stop(false).await;
}

/// `sim/thinker` through the sim-server sends its trace in `reasoning_content` deltas (and
/// the message's `reasoning_content`), and the client puts it back together as exactly the
/// text the in-process sim answers; a cap cuts it as in-process.
#[actix_web::test]
async fn the_sim_thinker_sends_its_trace_apart_over_http() {
    use conclave::providers::sim::{SimConfig, SimProvider};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let sim = SimProvider::new(SimConfig { latency_ms: 20, ..SimConfig::default() });
    let (server, _) = conclave::providers::sim_server::build(listener, sim.clone()).unwrap();
    actix_web::rt::spawn(server);
    let question = || ChatRequest::new("sim/thinker", vec![ChatMessage::user("Why think?")]);
    let in_process = sim.chat(question(), None).await.unwrap().text;
    assert!(in_process.starts_with("<think>\n"), "{in_process}");

    let body = json!({ "model": "sim/thinker", "stream": true,
                       "messages": [{ "role": "user", "content": "Why think?" }] });
    let raw = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let deltas: Vec<Value> = raw
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["choices"][0]["delta"].clone())
        .filter(|d| d.is_object())
        .collect();
    let reasoning = deltas.iter().filter(|d| d.get("reasoning_content").is_some()).count();
    let first_content = deltas.iter().position(|d| d.get("content").is_some()).unwrap();
    assert!(reasoning > 1 && first_content == reasoning, "trace first, then the answer: {raw}");
    assert!(!raw.contains("<think>"), "no inline tags on the wire: {raw}");

    let client = OpenAiCompatible::new(&base, None);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let streamed = client.chat(question(), Some(tx)).await.unwrap().text;
    let mut live = String::new();
    while let Ok(d) = rx.try_recv() {
        live.push_str(&d);
    }
    assert_eq!((streamed.as_str(), live.as_str()), (in_process.as_str(), in_process.as_str()));
    assert_eq!(client.chat(question(), None).await.unwrap().text, in_process);
    let capped = ChatRequest { max_tokens: Some(20), ..question() };
    let short = client.chat(capped.clone(), None).await.unwrap().text;
    let short_here = sim.chat(capped, None).await.unwrap().text;
    assert!(short.len() < in_process.len() && short_here.len() < in_process.len());
    assert_eq!(short, format!("{}\n</think>\n\n", short_here.trim_end()), "cut inside the trace");
}

#[actix_web::test]
async fn a_key_the_provider_repeats_is_redacted_whole_cut_or_changed() {
    const KEY: &str = "sk-test-ECHOED-key-0123456789";
    let client = OpenAiCompatible::new(&start_fake(), Some(KEY.into()));
    let lower = KEY.to_lowercase();
    for (model, stream) in
        [("echo-key-long", false), ("echo-key-changed", false), ("echo-key-stream", true)]
    {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let e = client.chat(ask(model), stream.then_some(tx)).await.unwrap_err();
        assert!(e.message.contains("[redact"), "{model}: {}", e.message);
        // No 12 characters of the key in a row, in any case.
        let message = e.message.to_lowercase();
        for i in 0..=lower.len() - 12 {
            let part = &lower[i..i + 12];
            assert!(!message.contains(part), "{model}: {part:?} in {}", e.message);
        }
    }
}

#[actix_web::test]
async fn what_a_provider_sends_is_read_up_to_a_bound() {
    let limits = ReadLimits { error_body: 1024, response: 256 * 1024, stream_line: 16 * 1024 };
    let client = OpenAiCompatible::new(&start_fake(), None).read_limits(limits);
    // Unbounded, these calls would read forever: a guard turns that into a failure.
    let call = |model: &'static str, stream: bool| {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let call = client.chat(ask(model), stream.then_some(tx));
        async move {
            let guard = std::time::Duration::from_secs(120);
            tokio::time::timeout(guard, call).await.expect("the read stopped at its bound")
        }
    };
    // An error body: the message is made from its first KiB, and says the rest was not read.
    let e = call("endless-error", false).await.unwrap_err();
    assert_eq!((e.kind, e.status), (CallErrorKind::Http, Some(500)));
    assert!(
        e.message.ends_with("(the error body is over 1 KiB; the rest was not read)"),
        "{}",
        e.message
    );
    assert!(e.message.len() < 400, "{}", e.message);
    let cases = [
        ("endless-body", false, "the provider's response is over 256 KiB: stopped reading it"),
        ("endless-stream", true, "the provider's stream is over 256 KiB: stopped reading it"),
        ("endless-line", true, "the provider's stream line is over 16 KiB: stopped reading it"),
    ];
    for (model, stream, expected) in cases {
        let e = call(model, stream).await.unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (CallErrorKind::Malformed, expected), "{model}");
    }
    // Answers within the bounds are read as before.
    assert_eq!(call("stream-ok", true).await.unwrap().text, "Hello, world");
    assert_eq!(
        ReadLimits::default(),
        ReadLimits { error_body: 65_536, response: 67_108_864, stream_line: 1_048_576 }
    );
}

#[actix_web::test]
async fn a_schema_goes_in_response_format_as_the_route_asks_for_it() {
    use conclave::modes::schema::{one_of, reasoned, ReplySchema};
    use conclave::providers::StructuredOutput;
    conclave::providers::openai::install_crypto();
    let client = OpenAiCompatible::new(&start_fake(), None);
    let schema = ReplySchema::new("vote_ballot", reasoned([("vote", one_of(&["Response A"]))]));
    let sent = |structured| {
        let request = ChatRequest { schema: Some(schema.clone()), structured, ..ask("echo") };
        let client = &client;
        async move {
            let text = client.chat(request, None).await.unwrap().text;
            serde_json::from_str::<Value>(&text).unwrap()
        }
    };
    let body = sent(StructuredOutput::JsonSchema).await;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "vote_ballot");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema.schema);
    let body = sent(StructuredOutput::JsonObject).await;
    assert_eq!(body["response_format"], json!({ "type": "json_object" }));
    let body = sent(StructuredOutput::Off).await;
    assert!(body.get("response_format").is_none(), "{body}");
    // No schema, no response_format, whatever the route says.
    let request = ChatRequest { structured: StructuredOutput::JsonSchema, ..ask("echo") };
    let text = client.chat(request, None).await.unwrap().text;
    assert!(serde_json::from_str::<Value>(&text).unwrap().get("response_format").is_none());
}

/// A server with `route` answering `GET` (llama.cpp's `/props`) or `POST` (Ollama's
/// `/api/show`) with `answer`, counting the asks.
fn context_server(route: &'static str, answer: Value, asked: Arc<Mutex<u32>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = HttpServer::new(move || {
        let (answer, asked) = (answer.clone(), asked.clone());
        let handler = move || {
            let (answer, asked) = (answer.clone(), asked.clone());
            async move {
                *asked.lock().unwrap() += 1;
                HttpResponse::Ok().json(answer)
            }
        };
        App::new()
            .route(route, web::get().to(handler.clone()))
            .route(route, web::post().to(handler))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    actix_web::rt::spawn(server);
    format!("http://127.0.0.1:{port}/v1")
}

#[actix_web::test]
async fn the_context_is_read_from_llama_cpp_and_ollama_once_per_model() {
    conclave::providers::openai::install_crypto();
    let asked = Arc::new(Mutex::new(0));
    let llama = context_server(
        "/props",
        json!({ "default_generation_settings": { "n_ctx": 4096 }, "total_slots": 3 }),
        asked.clone(),
    );
    let client = OpenAiCompatible::new(&llama, None);
    assert_eq!(client.context_tokens("smollm2").await, Some(4096));
    assert_eq!(client.context_tokens("smollm2").await, Some(4096));
    assert_eq!(*asked.lock().unwrap(), 1, "asked once, then remembered");
    let ollama = |parameters: &str| {
        context_server(
            "/api/show",
            json!({ "model_info": { "llama.context_length": 131072 }, "parameters": parameters }),
            Arc::new(Mutex::new(0)),
        )
    };
    let set = OpenAiCompatible::new(&ollama("stop \"<|eot|>\"\nnum_ctx 8192"), None);
    assert_eq!(set.context_tokens("llama3.2").await, Some(8192));
    // Not set: Ollama's own default, whatever the model could hold.
    let unset = OpenAiCompatible::new(&ollama("temperature 0.7"), None);
    assert_eq!(unset.context_tokens("llama3.2").await, Some(4096));
    // A server that says neither (the chat fake has no such routes): nothing is fitted.
    let silent = OpenAiCompatible::new(&start_fake(), None);
    assert_eq!(silent.context_tokens("m").await, None);
    // OpenRouter is not asked.
    let openrouter = OpenAiCompatible::new(&llama, None).openrouter(true);
    assert_eq!(openrouter.context_tokens("other").await, None);
    assert_eq!(*asked.lock().unwrap(), 1);
}
