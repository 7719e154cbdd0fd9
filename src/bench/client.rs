//! The client side of the benchmark: WebSocket sockets signed in with the bench admin's token,
//! runs started with a `start` message and followed to their terminal event, and REST reads.
//!
//! Event envelopes are read cheaply ([`peek_event`]: the envelope's fields come before its
//! `data`, in a fixed order), so that with thousands of sockets the figures measure the server
//! rather than this client's JSON parsing. It times what it sees and judges nothing.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::BenchError;

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A socket signed in with `token` (sent as `Authorization: Bearer` on the upgrade).
pub async fn connect(ws_url: &str, token: &str) -> Result<Socket, BenchError> {
    let mut req = ws_url.into_client_request().map_err(|e| BenchError::Ws(e.to_string()))?;
    let auth = format!("Bearer {token}").parse().map_err(|_| BenchError::Ws("bad token".into()))?;
    req.headers_mut().insert("Authorization", auth);
    let (stream, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| BenchError::Ws(format!("cannot connect to {ws_url}: {e}")))?;
    Ok(stream)
}

/// `n` signed-in sockets, at most `parallel` handshakes at a time (a burst of thousands of
/// SYNs would overflow the listen backlog and stall connections for a retransmit timeout).
pub async fn connect_many(
    ws_url: &str,
    token: &str,
    n: usize,
    parallel: usize,
) -> Result<Vec<Socket>, BenchError> {
    let sockets: Vec<Result<Socket, BenchError>> = futures_util::stream::iter(0..n)
        .map(|_| connect(ws_url, token))
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    sockets.into_iter().collect()
}

/// The envelope fields of an event message, read without parsing its `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPeek<'a> {
    pub run: &'a str,
    pub seq: i64,
    pub event: &'a str,
}

/// Reads `{"type":"event","run":R,"seq":N,"event":E,…` (the order the server writes them);
/// `None` for any other message.
pub fn peek_event(text: &str) -> Option<EventPeek<'_>> {
    let rest = text.strip_prefix(r#"{"type":"event","run":""#)?;
    let (run, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(r#","seq":"#)?;
    let end = rest.find(',')?;
    let seq = rest[..end].parse().ok()?;
    let rest = rest[end..].strip_prefix(r#","event":""#)?;
    let (event, _) = rest.split_once('"')?;
    Some(EventPeek { run, seq, event })
}

pub use crate::engine::events::is_terminal;

/// A run followed from its `start` message to its terminal event.
#[derive(Debug, Clone)]
pub struct Finished {
    pub run_id: String,
    /// From sending `start` to receiving the terminal event.
    pub wall: Duration,
    /// From sending `start` to receiving `started` (the run is stored and registered).
    pub started_after: Duration,
    /// `complete`, `error` or `cancelled`.
    pub terminal: String,
    /// Every event message of the run, as received (when asked to keep them).
    pub events: Vec<String>,
}

impl Finished {
    pub fn completed(&self) -> bool {
        self.terminal == "complete"
    }
}

/// Starts `request` on `ws` and reads until the run's terminal event (or `limit` passes).
pub async fn drive(
    ws: &mut Socket,
    request: &Value,
    keep_events: bool,
    limit: Duration,
) -> Result<Finished, BenchError> {
    let start = json!({ "type": "start", "request": request }).to_string();
    let t0 = Instant::now();
    ws.send(Message::text(start)).await.map_err(|e| BenchError::Ws(e.to_string()))?;
    let deadline = tokio::time::Instant::from_std(t0 + limit);
    let mut run_id: Option<String> = None;
    let mut started_after = Duration::ZERO;
    let mut events = Vec::new();
    loop {
        let msg = match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => {
                return Err(BenchError::Run(format!(
                    "run {} did not end within {limit:?}",
                    run_id.as_deref().unwrap_or("(not started)")
                )))
            }
            Ok(None) => return Err(BenchError::Ws("the server closed the socket".into())),
            Ok(Some(Err(e))) => return Err(BenchError::Ws(e.to_string())),
            Ok(Some(Ok(m))) => m,
        };
        let Message::Text(text) = msg else { continue };
        let text = text.as_str();
        if let Some(p) = peek_event(text) {
            if run_id.as_deref() == Some(p.run) {
                if keep_events {
                    events.push(text.to_string());
                }
                if is_terminal(p.event) {
                    return Ok(Finished {
                        run_id: p.run.to_string(),
                        wall: t0.elapsed(),
                        started_after,
                        terminal: p.event.to_string(),
                        events,
                    });
                }
            }
            continue;
        }
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        match v["type"].as_str() {
            Some("started") => {
                started_after = t0.elapsed();
                run_id = v["runId"].as_str().map(str::to_string);
            }
            Some("error") => {
                return Err(BenchError::Run(format!(
                    "the server refused the run: {}",
                    v["message"]
                )))
            }
            _ => {}
        }
    }
}

/// REST calls signed in as the bench admin.
#[derive(Clone)]
pub struct Rest {
    http: reqwest::Client,
    base: String,
}

impl Rest {
    pub fn new(base: &str, token: &str) -> Result<Self, BenchError> {
        let mut headers = reqwest::header::HeaderMap::new();
        let auth =
            format!("Bearer {token}").parse().map_err(|_| BenchError::Http("bad token".into()))?;
        headers.insert(reqwest::header::AUTHORIZATION, auth);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .map_err(|e| BenchError::Http(e.to_string()))?;
        Ok(Rest { http, base: base.to_string() })
    }

    pub async fn get(&self, path: &str) -> Result<Value, BenchError> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .map_err(|e| BenchError::Http(format!("GET {path}: {e}")))?;
        let status = resp.status();
        let v: Value =
            resp.json().await.map_err(|e| BenchError::Http(format!("GET {path}: {e}")))?;
        if !status.is_success() {
            return Err(BenchError::Http(format!("GET {path}: {status} {v}")));
        }
        Ok(v)
    }

    /// Uploads one file as `POST /api/attachments` (multipart/form-data); answers the reply.
    pub async fn upload(&self, name: &str, bytes: Vec<u8>) -> Result<Value, BenchError> {
        let boundary = "conclave-bench-boundary";
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: text/plain\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(&bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let resp = self
            .http
            .post(format!("{}/api/attachments", self.base))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body)
            .send()
            .await
            .map_err(|e| BenchError::Http(format!("upload {name}: {e}")))?;
        let status = resp.status();
        let v: Value =
            resp.json().await.map_err(|e| BenchError::Http(format!("upload {name}: {e}")))?;
        if !status.is_success() {
            return Err(BenchError::Http(format!("upload {name}: {status} {v}")));
        }
        Ok(v)
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, BenchError> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await
            .map_err(|e| BenchError::Http(format!("POST {path}: {e}")))?;
        let status = resp.status();
        let v: Value =
            resp.json().await.map_err(|e| BenchError::Http(format!("POST {path}: {e}")))?;
        if !status.is_success() {
            return Err(BenchError::Http(format!("POST {path}: {status} {v}")));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::events::EventFrame;

    #[test]
    fn envelopes_are_peeked_as_the_server_writes_them() {
        let frame = EventFrame::new("r-1", 12, "stage1_complete", json!({"data": {"event": "x"}}));
        assert_eq!(
            peek_event(&frame.json),
            Some(EventPeek { run: "r-1", seq: 12, event: "stage1_complete" })
        );
        assert_eq!(peek_event(r#"{"type":"started","runId":"r"}"#), None);
        assert_eq!(peek_event(r#"{"conversationId":"c","type":"started"}"#), None);
        assert!(is_terminal("complete") && is_terminal("error") && !is_terminal("token"));
    }
}
