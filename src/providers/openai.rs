//! An OpenAI-compatible chat-completions client (OpenRouter by default; Ollama, vLLM,
//! llama.cpp server or the sim-server by route), streaming over SSE or not.
//!
//! Failures are classified for the engine: a non-2xx answer is `Http` with the provider's own
//! message, a connection problem is `Transport`, and a 2xx answer that holds no usable
//! completion is `Malformed`. Dropping the returned future drops the connection.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, ChatRequest, ChatResponse, Provider};
use crate::modes::{CallError, CallErrorKind, Usage};

/// Installs rustls' ring provider once per process (reqwest is built without a default).
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub struct OpenAiCompatible {
    endpoint: String,
    api_key: Option<String>,
    client: Result<reqwest::Client, String>,
}

impl OpenAiCompatible {
    /// `base_url` like `https://openrouter.ai/api/v1`; requests go to `{base_url}/chat/completions`.
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
        let stream = deltas.is_some();
        let mut body =
            json!({ "model": request.model, "messages": request.messages, "stream": stream });
        if stream {
            body["stream_options"] = json!({ "include_usage": true });
        }
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
        if let Some(piece) = v.pointer("/choices/0/delta/content").and_then(Value::as_str) {
            if !piece.is_empty() {
                text.push_str(piece);
                let _ = tx.send(piece.to_string());
            }
        }
        if let Some(u) = usage_of(&v) {
            usage = Some(u);
        }
    }
    if text.is_empty() {
        return Err(error(CallErrorKind::Malformed, None, "the stream ended without any text"));
    }
    Ok(ChatResponse { text, usage })
}
