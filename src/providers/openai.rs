//! An OpenAI-compatible chat-completions client (OpenRouter by default; Ollama, vLLM,
//! llama.cpp server or the sim-server by route), streaming over SSE or not.
//!
//! Failures are classified for the engine: a non-2xx answer is `Http` with the provider's own
//! message, a connection problem is `Transport`, and a 2xx answer that holds no usable
//! completion is `Malformed`. Dropping the returned future drops the connection.
//!
//! Every request carries the call's output cap, in `max_tokens` or, for servers that want it
//! (OpenAI's newer models), `max_completion_tokens`. OpenRouter is asked for each call's cost.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, ChatRequest, ChatResponse, Provider};
use crate::modes::{CallError, CallErrorKind, ChatMessage, Usage};

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

pub struct OpenAiCompatible {
    endpoint: String,
    api_key: Option<String>,
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
    pub fn new(base_url: &str, api_key: Option<String>) -> Self {
        install_crypto();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"));
        OpenAiCompatible {
            endpoint: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
            client,
            token_field: TokenField::default(),
            openrouter: is_openrouter(base_url),
        }
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
            messages: &request.messages,
            stream,
            stream_options: stream.then_some(StreamOptions { include_usage: true }),
            max_tokens: cap(TokenField::MaxTokens),
            max_completion_tokens: cap(TokenField::MaxCompletionTokens),
            usage: self.openrouter.then_some(UsageOptions { include: true }),
        }
    }
}

fn error(kind: CallErrorKind, status: Option<u16>, message: impl Into<String>) -> CallError {
    CallError::new(kind, status, message)
}

fn transport(e: &reqwest::Error) -> CallError {
    error(CallErrorKind::Transport, None, format!("request failed: {e}"))
}

/// The provider's own message from an error body (`{"error":{"message":…}}`), else the text.
fn provider_message(body: &str) -> String {
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
            rb = rb.bearer_auth(key);
        }
        let key = self.api_key.clone();
        let call = async move {
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
                let text = resp.text().await.unwrap_or_default();
                let mut e = error(
                    CallErrorKind::Http,
                    Some(status.as_u16()),
                    format!("HTTP {}: {}", status.as_u16(), provider_message(&text)),
                );
                e.retry_after_ms = retry_after_ms;
                return Err(e);
            }
            match deltas {
                Some(tx) => read_stream(resp, tx).await,
                None => {
                    let text = resp.text().await.map_err(|e| transport(&e))?;
                    let v: Value = serde_json::from_str(&text).map_err(|e| {
                        error(
                            CallErrorKind::Malformed,
                            None,
                            format!("the response is not JSON: {e}"),
                        )
                    })?;
                    let content = v
                        .pointer("/choices/0/message/content")
                        .and_then(Value::as_str)
                        .filter(|c| !c.is_empty())
                        .ok_or_else(|| {
                            error(
                                CallErrorKind::Malformed,
                                None,
                                "the response holds no completion text",
                            )
                        })?;
                    Ok(ChatResponse { text: content.to_string(), usage: usage_of(&v) })
                }
            }
        };
        Box::pin(async move { call.await.map_err(|e| redact(e, key.as_deref())) })
    }
}

/// A provider's message may repeat the key it was sent ("Incorrect API key provided: …");
/// errors travel into events, stored rows and logs, so the key is cut out of them here.
fn redact(mut e: CallError, key: Option<&str>) -> CallError {
    if let Some(key) = key.map(str::trim).filter(|k| k.len() >= 8) {
        if e.message.contains(key) {
            e.message = e.message.replace(key, "[redacted]");
        }
    }
    e
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOptions>,
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

/// The text and usage a stream chunk carries, or the provider's error sent mid-stream.
fn read_chunk(data: &str) -> Result<(Option<String>, Option<Usage>), CallError> {
    let v: Value = serde_json::from_str(data).map_err(|e| {
        error(CallErrorKind::Malformed, None, format!("a stream chunk is not JSON: {e}"))
    })?;
    if v.get("error").is_some() {
        return Err(error(
            CallErrorKind::Malformed,
            None,
            format!("provider error mid-stream: {}", provider_message(data)),
        ));
    }
    let piece = v.pointer("/choices/0/delta/content").and_then(Value::as_str);
    Ok((piece.map(str::to_string), usage_of(&v)))
}

async fn read_stream(
    resp: reqwest::Response,
    tx: UnboundedSender<String>,
) -> Result<ChatResponse, CallError> {
    let mut events = resp.bytes_stream().eventsource();
    let mut text = String::new();
    let mut usage = None;
    while let Some(event) = events.next().await {
        let event = event
            .map_err(|e| error(CallErrorKind::Transport, None, format!("stream broke: {e}")))?;
        let data = event.data.trim();
        if data == "[DONE]" {
            break;
        }
        if data.is_empty() {
            continue;
        }
        let (piece, chunk_usage) = read_chunk(data)?;
        if let Some(piece) = piece.filter(|p| !p.is_empty()) {
            text.push_str(&piece);
            let _ = tx.send(piece);
        }
        if let Some(u) = chunk_usage {
            usage = Some(u);
        }
    }
    if text.is_empty() {
        return Err(error(CallErrorKind::Malformed, None, "the stream ended without any text"));
    }
    Ok(ChatResponse { text, usage })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunks_that_matter_are_read() {
        let text = r#"{"choices":[{"index":0,"delta":{"content":"a \"b\""}}]}"#;
        assert_eq!(read_chunk(text).unwrap(), (Some("a \"b\"".into()), None));
        let usage =
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"cost":0.5}}"#;
        let expected = Usage { prompt_tokens: 3, completion_tokens: 4, cost: Some(0.5) };
        assert_eq!(read_chunk(usage).unwrap(), (None, Some(expected)));
        let failed = r#"{"error":{"message":"overloaded"}}"#;
        assert!(read_chunk(failed).unwrap_err().message.contains("overloaded"));
        assert!(read_chunk("{").unwrap_err().message.contains("not JSON"));
    }

    #[test]
    fn the_body_carries_the_cap_in_the_routes_field_and_asks_openrouter_for_cost() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("q")],
            max_tokens: Some(300),
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
