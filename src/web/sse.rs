//! `GET /api/deliberations/{id}/events`: a run's events as Server-Sent Events, for curl and
//! non-browser clients. Each event carries `id: <seq>`, so a client that reconnects with
//! `Last-Event-ID` (or `?since=`) resumes with no gap and no repeat.

use std::fmt::Write;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::stream;
use serde::Deserialize;

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;
use crate::engine::events::{watcher_channel, Frame};
use crate::engine::Engine;
use crate::ids::RunId;

#[derive(Deserialize)]
pub struct SinceQuery {
    since: Option<i64>,
}

/// Unsubscribes when the client goes away.
struct WatchGuard {
    engine: Engine,
    run_id: RunId,
    watcher: u64,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.engine.unwatch(&self.run_id, self.watcher);
    }
}

pub async fn events(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    id: web::Path<String>,
    q: web::Query<SinceQuery>,
) -> Result<HttpResponse, ApiError> {
    let header_since = match req.headers().get("Last-Event-ID") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be a sequence number"))?,
        ),
        None => None,
    };
    let since = header_since.or(q.since).unwrap_or(0).max(0);
    let engine = state.engine.clone();
    let viewer = caller.viewer();
    let id = super::error::run_id(&id)?;
    engine.may_read(&id, &viewer).await?;
    let watcher = engine.watcher_id();
    let (tx, rx) = watcher_channel();
    // Subscribe while the stream is already being read: a replay from the database waits for
    // room in the bounded channel.
    let (e, run) = (engine.clone(), id.clone());
    actix_web::rt::spawn(async move {
        if let Err(err) = e.watch(&run, since, watcher, tx, &viewer).await {
            log::warn!("SSE watch of {run} failed: {err}");
        }
    });
    let guard = WatchGuard { engine, run_id: id, watcher };
    let keepalive = tokio::time::interval(Duration::from_secs(15));
    let body = stream::unfold(
        (rx, guard, keepalive, false),
        |(mut rx, guard, mut ka, done)| async move {
            if done {
                return None;
            }
            tokio::select! {
                frame = rx.recv() => {
                    // A lagging client's stream ends: it reconnects with Last-Event-ID.
                let Some(Frame::Events(batch)) = frame else { return None };
                    let mut text = String::new();
                    for f in batch.iter() {
                        let _ = write!(text, "id: {}\nevent: {}\ndata: {}\n\n", f.seq, f.event, f.json);
                    }
                    let end = batch.iter().any(|f| f.is_terminal());
                    Some((Ok::<_, actix_web::Error>(Bytes::from(text)), (rx, guard, ka, end)))
                }
                _ = ka.tick() => {
                    Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (rx, guard, ka, false)))
                }
            }
        },
    );
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        // Compression would buffer the stream: events must leave as they happen.
        .insert_header(actix_web::http::header::ContentEncoding::Identity)
        .streaming(body))
}
