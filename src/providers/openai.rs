//! An OpenAI-compatible chat-completions client (OpenRouter by default; Ollama, vLLM,
//! llama.cpp server or the sim-server by route), streaming over SSE or not.
//!
//! Failures are classified for the engine: a non-2xx answer is `Http` with the provider's own
//! message, a connection problem is `Transport`, and a 2xx answer that holds no usable
//! completion is `Malformed`. Dropping the returned future drops the connection.
//!
//! Every request carries the call's output cap, in `max_tokens` or, for servers that want it
//! (OpenAI's newer models), `max_completion_tokens`. OpenRouter is asked for each call's cost.
//!
//! A reasoning trace sent in its own field (`reasoning` or `reasoning_content`, in stream
//! deltas or in the whole message) is kept out of the answer: it becomes a `<think>` block
//! before it ([`with_reasoning`]), so a reply reads the same whichever way its server sends
//! reasoning. Streamed, the block's tags go out as deltas too, so the text watchers saw live
//! is exactly the text returned.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, ChatRequest, ChatResponse, Provider, StructuredOutput};
use crate::modes::reading::with_reasoning;
use crate::modes::{CallError, CallErrorKind, ChatMessage, Usage};
use crate::secrets::{redact_key, Secret};

/// Installs rustls' ring provider once per process (reqwest is built without a default).
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The request field that carries the output cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenField {
    /// `max_tokens`: what OpenAI-compatible servers (OpenRouter, vLLM, llama.cpp, Ollama) read.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models accept instead.
    MaxCompletionTokens,
}

/// How much of a provider's answer is read, at most: a server that sends without end (a
/// broken proxy, a hostile endpoint) must not fill this process's memory. Past a bound the
/// connection is dropped and the call fails with an error that names the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// An error answer's body (its message is cut to 300 characters anyway): what is over it
    /// is not read, and the message is made from what was.
    pub error_body: usize,
    /// A whole answer, or everything a stream sends.
    pub response: usize,
    /// One line of a stream: its parser holds a line until the line ends.
    pub stream_line: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits { error_body: 64 * KIB, response: 64 * MIB, stream_line: MIB }
    }
}

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// `n` bytes in words (`64 KiB`, `1 MiB`, `100 bytes`).
fn size(n: usize) -> String {
    match n {
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n >= KIB && n % KIB == 0 => format!("{} KiB", n / KIB),
        n => format!("{n} bytes"),
    }
}

pub struct OpenAiCompatible {
    endpoint: String,
    /// The server's root (the base URL without a trailing `/v1`): where llama.cpp's `/props`
    /// and Ollama's `/api/show` are.
    root: String,
    /// What the server said of each model's context (None: it did not say), asked once.
    contexts: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Option<u32>>>>,
    limits: ReadLimits,
    api_key: Option<Secret>,
    client: Result<reqwest::Client, String>,
    token_field: TokenField,
    /// Ask for the call's cost (`"usage": {"include": true}`), which only OpenRouter
    /// understands (others may refuse the unknown field).
    openrouter: bool,
}

/// Whether `base_url` is OpenRouter's (host `openrouter.ai` or a subdomain).
pub fn is_openrouter(base_url: &str) -> bool {
    // Parsing lowercases the host.
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h == "openrouter.ai" || h.ends_with(".openrouter.ai")))
        .unwrap_or(false)
}

impl OpenAiCompatible {
    /// `base_url` like `https://openrouter.ai/api/v1`; requests go to `{base_url}/chat/completions`.
    /// The cap goes in `max_tokens`; cost is asked for when the host is OpenRouter's.
    pub fn new(base_url: &str, api_key: Option<Secret>) -> Self {
        install_crypto();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"));
        let base = base_url.trim_end_matches('/');
        OpenAiCompatible {
            endpoint: format!("{base}/chat/completions"),
            root: base.strip_suffix("/v1").unwrap_or(base).to_string(),
            contexts: Default::default(),
            api_key,
            limits: ReadLimits::default(),
            client,
            token_field: TokenField::default(),
            openrouter: is_openrouter(base_url),
        }
    }

    /// Reads at most this much of each answer (tests use small bounds).
    pub fn read_limits(mut self, limits: ReadLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sends the output cap in `field`.
    pub fn token_field(mut self, field: TokenField) -> Self {
        self.token_field = field;
        self
    }

    /// Treats the server as OpenRouter (asks for each call's cost) or not, whatever its host.
    pub fn openrouter(mut self, yes: bool) -> Self {
        self.openrouter = yes;
        self
    }

    fn body<'a>(&self, request: &'a ChatRequest, stream: bool) -> RequestBody<'a> {
        let cap = |field| request.max_tokens.filter(|_| self.token_field == field);
        RequestBody {
            model: &request.model,
            messages: request.messages.iter().map(Wire).collect(),
            stream,
            stream_options: stream.then_some(StreamOptions { include_usage: true }),
            max_tokens: cap(TokenField::MaxTokens),
            max_completion_tokens: cap(TokenField::MaxCompletionTokens),
            usage: self.openrouter.then_some(UsageOptions { include: true }),
            response_format: match (request.structured, request.sent_schema()) {
                (StructuredOutput::JsonSchema, Some(schema)) => Some(schema.response_format()),
                (StructuredOutput::JsonObject, Some(_)) => {
                    Some(serde_json::json!({ "type": "json_object" }))
                }
                _ => None,
            },
        }
    }
}

/// How long the server may take to say its context size before it counts as not saying.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The context of `model` on the server at `root`, in tokens, as the server says it:
/// llama.cpp's `/props` (`default_generation_settings.n_ctx`, a slot's share of the
/// server's `-c`), else Ollama's `/api/show` (the model's `num_ctx` parameter, else Ollama's
/// default of 4,096 tokens, which it uses whatever the model could hold). None when neither
/// answers.
async fn probe_context(client: reqwest::Client, root: String, model: String) -> Option<u32> {
    let props = small_json(client.get(format!("{root}/props"))).await;
    let said = props.as_ref().and_then(|v| {
        v.pointer("/default_generation_settings/n_ctx").or_else(|| v.get("n_ctx"))?.as_u64()
    });
    if let Some(n) = said {
        return u32::try_from(n).ok().filter(|n| *n > 0);
    }
    let show = client.post(format!("{root}/api/show")).json(&serde_json::json!({ "model": model }));
    let v = small_json(show).await?;
    v.get("model_info")?;
    let stated = v.get("parameters").and_then(Value::as_str).and_then(|p| {
        p.lines().find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u32>().ok()).flatten()
        })
    });
    Some(stated.unwrap_or(OLLAMA_DEFAULT_CONTEXT))
}

/// The JSON a server answers to a small request, read to at most 1 MiB within
/// [`PROBE_TIMEOUT`]; None for anything else.
async fn small_json(request: reqwest::RequestBuilder) -> Option<Value> {
    let resp = request.timeout(PROBE_TIMEOUT).send().await.ok()?.error_for_status().ok()?;
    match read_at_most(resp, MIB).await.ok()? {
        Bounded::Whole(body) => serde_json::from_slice(&body).ok(),
        Bounded::Over(_) => None,
    }
}

/// The context Ollama gives a model whose `num_ctx` is not set.
const OLLAMA_DEFAULT_CONTEXT: u32 = 4096;

fn error(kind: CallErrorKind, status: Option<u16>, message: impl Into<String>) -> CallError {
    CallError::new(kind, status, message)
}

fn transport(e: &reqwest::Error) -> CallError {
    error(CallErrorKind::Transport, None, format!("request failed: {e}"))
}

/// The provider's own message from an error body (`{"error":{"message":…}}`), else the text
/// cut to 300 characters. Echoes of `key` are redacted first: cut first, a key across the cut
/// would leave its head, which no longer matches the key.
fn provider_message(body: &str, key: Option<&str>) -> String {
    let body = scrub(body, key);
    let body = body.as_str();
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let msg = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    msg.unwrap_or_else(|| body.chars().take(300).collect::<String>().trim().to_string())
}

fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        prompt_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        completion_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        cost: u.get("cost").and_then(Value::as_f64),
    })
}

impl Provider for OpenAiCompatible {
    fn chat(
        &self,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
    ) -> BoxFuture<'static, Result<ChatResponse, CallError>> {
        let client = match &self.client {
            Ok(c) => c.clone(),
            Err(e) => {
                let e = e.clone();
                return Box::pin(async move { Err(error(CallErrorKind::Transport, None, e)) });
            }
        };
        let body = self.body(&request, deltas.is_some());
        let mut rb = client
            .post(&self.endpoint)
            .header("HTTP-Referer", "https://github.com/conclave")
            .header("X-Title", "Conclave")
            .json(&body);
        if let Some(key) = &self.api_key {
            rb = rb.bearer_auth(key.expose());
        }
        let key = self.api_key.clone();
        let sent = key.clone();
        let limits = self.limits;
        let call = async move {
            let key = sent.as_ref().map(Secret::expose);
            let resp = rb.send().await.map_err(|e| transport(&e))?;
            let status = resp.status();
            if !status.is_success() {
                // `Retry-After` in seconds (the HTTP-date form is rare for model APIs).
                let retry_after_ms = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| (s * 1000.0) as u64);
                let (text, whole) = match read_at_most(resp, limits.error_body).await {
                    Ok(Bounded::Whole(body)) => (body, true),
                    Ok(Bounded::Over(head)) => (head, false),
                    Err(_) => (Vec::new(), true),
                };
                let text = String::from_utf8_lossy(&text);
                let more = if whole {
                    String::new()
                } else {
                    format!(
                        " (the error body is over {}; the rest was not read)",
                        size(limits.error_body)
                    )
                };
                let mut e = error(
                    CallErrorKind::Http,
                    Some(status.as_u16()),
                    format!("HTTP {}: {}{more}", status.as_u16(), provider_message(&text, key)),
                );
                e.retry_after_ms = retry_after_ms;
                return Err(e);
            }
            match deltas {
                Some(tx) => read_stream(resp, tx, key, limits).await,
                None => {
                    let text = match read_at_most(resp, limits.response).await {
                        Ok(Bounded::Whole(body)) => body,
                        Ok(Bounded::Over(_)) => return Err(too_large("response", limits.response)),
                        Err(e) => return Err(transport(&e)),
                    };
                    let v: Value = serde_json::from_slice(&text).map_err(|e| {
                        error(
                            CallErrorKind::Malformed,
                            None,
                            format!("the response is not JSON: {e}"),
                        )
                    })?;
                    let text = message_text(&v).ok_or_else(|| {
                        error(
                            CallErrorKind::Malformed,
                            None,
                            "the response holds no completion text",
                        )
                    })?;
                    Ok(ChatResponse { text, usage: usage_of(&v) })
                }
            }
        };
        Box::pin(async move { call.await.map_err(|e| redact(e, key.as_ref().map(Secret::expose))) })
    }

    fn context_tokens(&self, model: &str) -> BoxFuture<'static, Option<u32>> {
        // OpenRouter says nothing of the kind, and its models hold far more than a prompt.
        if self.openrouter {
            return Box::pin(async { None });
        }
        let known = self.contexts.lock().ok().and_then(|c| c.get(model).copied());
        if let Some(known) = known {
            return Box::pin(async move { known });
        }
        let Ok(client) = self.client.clone() else { return Box::pin(async { None }) };
        let (root, model, contexts) = (self.root.clone(), model.to_string(), self.contexts.clone());
        Box::pin(async move {
            let found = probe_context(client, root, model.clone()).await;
            if let Ok(mut c) = contexts.lock() {
                c.insert(model, found);
            }
            found
        })
    }
}

/// What [`read_at_most`] read.
enum Bounded {
    /// The whole body.
    Whole(Vec<u8>),
    /// The first `limit` bytes of a longer one (the rest was not read).
    Over(Vec<u8>),
}

/// Reads a body up to `limit` bytes; one byte more and it stops (dropping the response drops
/// the connection).
async fn read_at_most(mut resp: reqwest::Response, limit: usize) -> reqwest::Result<Bounded> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > limit {
            body.extend_from_slice(&chunk[..limit - body.len()]);
            return Ok(Bounded::Over(body));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bounded::Whole(body))
}

/// The error of an answer over a bound: `Malformed` (trying again would read as much again).
fn too_large(what: &str, limit: usize) -> CallError {
    error(
        CallErrorKind::Malformed,
        None,
        format!("the provider's {what} is over {}: stopped reading it", size(limit)),
    )
}

/// A provider's message may repeat the key it was sent ("Incorrect API key provided: …"),
/// whole, cut short or upper-cased; errors travel into events, stored rows and logs, so every
/// echo is cut out of them here (see [`redact_key`]).
fn redact(mut e: CallError, key: Option<&str>) -> CallError {
    e.message = scrub(&e.message, key);
    e
}

fn scrub(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => redact_key(text, key),
        None => text.to_string(),
    }
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<Wire<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
}

/// A message as the server reads it: its text alone, or (with images) a list of parts, the
/// text first and each image as a `data:` URL.
struct Wire<'a>(&'a ChatMessage);

impl Serialize for Wire<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        use serde::ser::SerializeMap;
        let m = self.0;
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", &m.role)?;
        if m.images.is_empty() {
            map.serialize_entry("content", &m.content)?;
        } else {
            let mut parts = vec![serde_json::json!({ "type": "text", "text": m.content })];
            parts.extend(m.images.iter().map(|i| {
                let data = base64::engine::general_purpose::STANDARD.encode(&i.bytes);
                let url = format!("data:{};base64,{data}", i.media_type);
                serde_json::json!({ "type": "image_url", "image_url": { "url": url } })
            }));
            map.serialize_entry("content", &parts)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// OpenRouter's usage accounting: `include` adds the call's `cost` to its `usage`.
#[derive(Serialize)]
struct UsageOptions {
    include: bool,
}

/// A reasoning trace in its own field of a delta or message: `reasoning_content` (DeepSeek,
/// vLLM, llama.cpp) or `reasoning` (OpenRouter, newer vLLM). Servers that send both send the
/// same trace twice, so only the first is taken.
fn reasoning_of(v: &Value) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str).filter(|r| !r.is_empty()))
}

/// The text of a whole (unstreamed) response: its content, after its reasoning as a `<think>`
/// block when it sent one; `None` when it holds neither.
fn message_text(v: &Value) -> Option<String> {
    let message = v.pointer("/choices/0/message")?;
    let content = message.get("content").and_then(Value::as_str).unwrap_or("");
    match reasoning_of(message).filter(|r| !r.trim().is_empty()) {
        Some(reasoning) => Some(with_reasoning(reasoning, content)),
        None => Some(content.to_string()).filter(|c| !c.is_empty()),
    }
}

/// What one stream chunk carries.
#[derive(Debug, Default, PartialEq)]
struct Chunk {
    reasoning: Option<String>,
    content: Option<String>,
    usage: Option<Usage>,
}

/// The text and usage a stream chunk carries, or the provider's error sent mid-stream.
fn read_chunk(data: &str, key: Option<&str>) -> Result<Chunk, CallError> {
    let v: Value = serde_json::from_str(data).map_err(|e| {
        error(CallErrorKind::Malformed, None, format!("a stream chunk is not JSON: {e}"))
    })?;
    if v.get("error").is_some() {
        return Err(error(
            CallErrorKind::Malformed,
            None,
            format!("provider error mid-stream: {}", provider_message(data, key)),
        ));
    }
    let delta = v.pointer("/choices/0/delta");
    let field = |f: fn(&Value) -> Option<&str>| {
        delta.and_then(f).filter(|p| !p.is_empty()).map(str::to_string)
    };
    Ok(Chunk {
        reasoning: field(reasoning_of),
        content: field(|d| d.get("content").and_then(Value::as_str)),
        usage: usage_of(&v),
    })
}

/// Opens and closes the `<think>` block of a streamed reply: `<think>\n` before the first
/// reasoning delta, `\n</think>\n\n` before the first answer delta after it (or at the end).
/// Each method answers what to send on; `text` is everything sent, the reply's whole text.
#[derive(Debug, Default)]
struct Transcript {
    text: String,
    thinking: bool,
}

impl Transcript {
    const OPEN: &'static str = "<think>\n";
    const CLOSE: &'static str = "\n</think>\n\n";

    fn reasoning(&mut self, piece: &str) -> String {
        let mut out = String::new();
        if !self.thinking {
            // A trace resumed after some answer starts a block of its own.
            if !self.text.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(Self::OPEN);
            self.thinking = true;
        }
        out.push_str(piece);
        self.text.push_str(&out);
        out
    }

    fn answer(&mut self, piece: &str) -> String {
        let mut out = self.close().unwrap_or_default();
        out.push_str(piece);
        self.text.push_str(piece);
        out
    }

    /// Closes an open block (at the first answer delta, or at the end of the stream).
    fn close(&mut self) -> Option<String> {
        if !self.thinking {
            return None;
        }
        self.thinking = false;
        self.text.push_str(Self::CLOSE);
        Some(Self::CLOSE.to_string())
    }
}

/// Why a stream was cut off before its parser: the transport's error, or a bound.
#[derive(Debug)]
enum StreamRead {
    Transport(reqwest::Error),
    TooLarge(CallError),
}

impl std::fmt::Display for StreamRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamRead::Transport(e) => e.fmt(f),
            StreamRead::TooLarge(e) => f.write_str(&e.message),
        }
    }
}

async fn read_stream(
    resp: reqwest::Response,
    tx: UnboundedSender<String>,
    key: Option<&str>,
    limits: ReadLimits,
) -> Result<ChatResponse, CallError> {
    // Counted before the parser, which would hold an endless line in memory.
    let (mut total, mut line) = (0usize, 0usize);
    let bounded = resp.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(StreamRead::Transport)?;
        total += chunk.len();
        line = match chunk.iter().rposition(|b| *b == b'\n' || *b == b'\r') {
            Some(end) => chunk.len() - end - 1,
            None => line + chunk.len(),
        };
        if total > limits.response {
            return Err(StreamRead::TooLarge(too_large("stream", limits.response)));
        }
        if line > limits.stream_line {
            return Err(StreamRead::TooLarge(too_large("stream line", limits.stream_line)));
        }
        Ok(chunk)
    });
    let mut events = bounded.eventsource();
    let mut transcript = Transcript::default();
    let mut usage = None;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| match e {
            EventStreamError::Transport(StreamRead::TooLarge(e)) => e,
            e => error(CallErrorKind::Transport, None, format!("stream broke: {e}")),
        })?;
        let data = event.data.trim();
        if data == "[DONE]" {
            break;
        }
        if data.is_empty() {
            continue;
        }
        let chunk = read_chunk(data, key)?;
        if let Some(piece) = chunk.reasoning {
            let _ = tx.send(transcript.reasoning(&piece));
        }
        if let Some(piece) = chunk.content {
            let _ = tx.send(transcript.answer(&piece));
        }
        if let Some(u) = chunk.usage {
            usage = Some(u);
        }
    }
    if let Some(close) = transcript.close() {
        let _ = tx.send(close);
    }
    if transcript.text.is_empty() {
        return Err(error(CallErrorKind::Malformed, None, "the stream ended without any text"));
    }
    Ok(ChatResponse { text: transcript.text, usage })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunks_that_matter_are_read() {
        let text = r#"{"choices":[{"index":0,"delta":{"content":"a \"b\""}}]}"#;
        let content = Chunk { content: Some("a \"b\"".into()), ..Chunk::default() };
        assert_eq!(read_chunk(text, None).unwrap(), content);
        let usage =
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"cost":0.5}}"#;
        let expected = Usage { prompt_tokens: 3, completion_tokens: 4, cost: Some(0.5) };
        assert_eq!(
            read_chunk(usage, None).unwrap(),
            Chunk { usage: Some(expected), ..Chunk::default() }
        );
        let failed = r#"{"error":{"message":"overloaded"}}"#;
        assert!(read_chunk(failed, None).unwrap_err().message.contains("overloaded"));
        assert!(read_chunk("{", None).unwrap_err().message.contains("not JSON"));
    }

    #[test]
    fn reasoning_deltas_are_read_apart_from_the_answer() {
        let chunk = |delta: Value| json!({ "choices": [{ "delta": delta }] }).to_string();
        let deepseek = chunk(json!({ "reasoning_content": "hmm", "content": null }));
        let read = read_chunk(&deepseek, None).unwrap();
        assert_eq!((read.reasoning.as_deref(), read.content), (Some("hmm"), None));
        let openrouter = chunk(json!({ "reasoning": "so", "content": "" }));
        let read = read_chunk(&openrouter, None).unwrap();
        assert_eq!((read.reasoning.as_deref(), read.content), (Some("so"), None));
        // vLLM sends both names with the same trace: read once.
        let both = chunk(json!({ "reasoning_content": "x", "reasoning": "x", "content": "A" }));
        let read = read_chunk(&both, None).unwrap();
        assert_eq!((read.reasoning.as_deref(), read.content.as_deref()), (Some("x"), Some("A")));
    }

    #[test]
    fn a_streamed_trace_is_wrapped_so_the_deltas_add_up_to_the_text() {
        let mut t = Transcript::default();
        let sent = [
            t.reasoning("Let me"),
            t.reasoning(" think."),
            t.answer("The answer"),
            t.answer(" is 4."),
        ]
        .concat()
            + &t.close().unwrap_or_default();
        assert_eq!(sent, "<think>\nLet me think.\n</think>\n\nThe answer is 4.");
        assert_eq!(sent, t.text);
        let split = crate::modes::reading::split_reasoning(&t.text);
        assert_eq!(split.answer, "The answer is 4.");
        assert_eq!(split.reasoning.as_deref(), Some("Let me think."));
        // Only reasoning: the block is closed at the end and nothing follows it.
        let mut t = Transcript::default();
        let sent = t.reasoning("only thinking") + &t.close().unwrap_or_default();
        assert_eq!(
            (sent.as_str(), t.text.as_str()),
            ("<think>\nonly thinking\n</think>\n\n", sent.as_str())
        );
        // No reasoning: the answer as sent.
        let mut t = Transcript::default();
        assert_eq!(t.answer("plain"), "plain");
        assert_eq!((t.close(), t.text.as_str()), (None, "plain"));
    }

    #[test]
    fn a_whole_message_puts_its_reasoning_in_a_think_block() {
        let response = |message: Value| json!({ "choices": [{ "message": message }] });
        let text = message_text(&response(json!({ "content": "4", "reasoning_content": "2+2" })));
        assert_eq!(text.as_deref(), Some("<think>\n2+2\n</think>\n\n4"));
        let text = message_text(&response(json!({ "content": "4", "reasoning": "sum" })));
        assert_eq!(text.as_deref(), Some("<think>\nsum\n</think>\n\n4"));
        let only = message_text(&response(json!({ "content": null, "reasoning": "hmm" })));
        assert_eq!(only.as_deref(), Some("<think>\nhmm\n</think>\n\n"));
        assert_eq!(message_text(&response(json!({ "content": "4" }))).as_deref(), Some("4"));
        assert_eq!(message_text(&response(json!({ "content": "", "reasoning": "" }))), None);
        assert_eq!(message_text(&response(json!({ "content": null }))), None);
        assert_eq!(message_text(&json!({ "choices": [] })), None);
    }

    #[test]
    fn the_body_carries_the_cap_in_the_routes_field_and_asks_openrouter_for_cost() {
        let request = ChatRequest {
            max_tokens: Some(300),
            ..ChatRequest::new("m", vec![ChatMessage::user("q")])
        };
        let local = OpenAiCompatible::new("http://127.0.0.1:8080/v1", None);
        let body = serde_json::to_value(local.body(&request, false)).unwrap();
        assert_eq!(body["max_tokens"], 300);
        assert!(body.get("max_completion_tokens").is_none() && body.get("usage").is_none());
        assert!(body.get("stream_options").is_none());
        let openai = OpenAiCompatible::new("https://api.openai.com/v1", None)
            .token_field(TokenField::MaxCompletionTokens);
        let body = serde_json::to_value(openai.body(&request, true)).unwrap();
        assert_eq!(body["max_completion_tokens"], 300);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["stream_options"]["include_usage"], true);
        let openrouter = OpenAiCompatible::new("https://openrouter.ai/api/v1", None);
        let body = serde_json::to_value(openrouter.body(&request, true)).unwrap();
        assert_eq!(body["usage"], json!({ "include": true }));
        assert_eq!(body["max_tokens"], 300);
        let forced = local.openrouter(true);
        assert_eq!(
            serde_json::to_value(forced.body(&request, false)).unwrap()["usage"]["include"],
            true
        );
        let uncapped = ChatRequest { max_tokens: None, ..request };
        let body =
            serde_json::to_value(openrouter.openrouter(false).body(&uncapped, false)).unwrap();
        assert!(body.get("max_tokens").is_none() && body.get("usage").is_none());
    }

    #[test]
    fn openrouter_is_known_by_its_host() {
        assert!(is_openrouter("https://openrouter.ai/api/v1"));
        assert!(is_openrouter("https://eu.OpenRouter.ai/api/v1/"));
        assert!(!is_openrouter("https://openrouter.ai.example.com/v1"));
        assert!(!is_openrouter("http://127.0.0.1:9090/v1"));
        assert!(!is_openrouter("not a url"));
    }
}
