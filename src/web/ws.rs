//! The WebSocket session (`/ws`): one actor per socket.
//!
//! Client messages (JSON, `type` field; an optional `id` is echoed in direct replies):
//! `start` (`request`: a start body), `watch` (`run`, optional `since`), `unwatch` (`run`; it
//! also forgets what was sent of the run, so a later watch replays from its `since`),
//! `cancel` (`run`), `dashboard`. Server messages: events in the envelope
//! `{type:"event", run, seq, event, data}`, `started`, `cancel_result`, `dashboard`,
//! `dashboard_update` and `error` (`{type:"error", message, field?, run?, id?}`).
//!
//! This is the only file that uses the deprecated `actix-web-actors` crate, so moving to
//! `actix-ws` later touches nothing else.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use actix::prelude::*;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_web_actors::ws;
use serde_json::{json, Value};

use super::error::ApiError;
use super::AppState;
use crate::engine::events::{watcher_channel, Frame, FrameSender};
use crate::engine::{Engine, EngineError};

pub async fn connect(
    state: web::Data<AppState>,
    req: HttpRequest,
    stream: web::Payload,
) -> Result<HttpResponse, actix_web::Error> {
    let session = WsSession {
        engine: state.engine.clone(),
        watcher: state.engine.watcher_id(),
        last_seen: Instant::now(),
        heartbeat: state.heartbeat_interval,
        timeout: state.client_timeout,
        sink: None,
        last_sent: HashMap::new(),
        watched: HashSet::new(),
        muted: HashMap::new(),
        unwatches: 0,
    };
    ws::start(session, &req, stream)
}

pub struct WsSession {
    engine: Engine,
    watcher: u64,
    last_seen: Instant,
    heartbeat: std::time::Duration,
    timeout: std::time::Duration,
    sink: Option<FrameSender>,
    /// The last sequence number sent per run: overlapping watches never send an event twice.
    /// An unwatch forgets the run's entry, so a later watch can replay it from the start.
    last_sent: HashMap<String, i64>,
    /// Runs this socket watches (an unwatch of any other run has nothing to undo).
    watched: HashSet<String>,
    /// Runs unwatched and not yet watched again, with the number of their last unwatch: frames
    /// of these runs still queued from the dropped subscription are discarded until the
    /// [`Frame::Rewatch`] marker of a new watch comes through, so they can neither reach the
    /// client after the unwatch nor fill `last_sent` and swallow the new watch's replay.
    muted: HashMap<String, u64>,
    /// Unwatches so far (numbers the entries of `muted`).
    unwatches: u64,
}

impl WsSession {
    /// Pings on an interval and drops a client that has been silent too long.
    fn hb(&self, ctx: &mut ws::WebsocketContext<Self>) {
        ctx.run_interval(self.heartbeat, |act, ctx| {
            if act.last_seen.elapsed() > act.timeout {
                log::info!("websocket client timed out");
                ctx.stop();
                return;
            }
            ctx.ping(b"");
        });
    }

    fn send_json(ctx: &mut ws::WebsocketContext<Self>, value: Value) {
        ctx.text(value.to_string());
    }

    fn error(ctx: &mut ws::WebsocketContext<Self>, id: &Value, message: String, extra: Value) {
        let mut v = json!({ "type": "error", "message": message });
        if !id.is_null() {
            v["id"] = id.clone();
        }
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in e {
                o.insert(k.clone(), val.clone());
            }
        }
        Self::send_json(ctx, v);
    }

    fn engine_error(
        ctx: &mut ws::WebsocketContext<Self>,
        id: &Value,
        run: Option<&str>,
        e: EngineError,
    ) {
        let api: ApiError = e.into();
        let mut extra = json!({});
        if let ApiError::BadRequest { field: Some(f), .. } = &api {
            extra["field"] = json!(f);
        }
        if let Some(r) = run {
            extra["run"] = json!(r);
        }
        let message = match &api {
            ApiError::Internal(d) => {
                log::error!("websocket request failed: {d}");
                "internal error".to_string()
            }
            other => other.to_string(),
        };
        Self::error(ctx, id, message, extra);
    }

    fn sink(&mut self) -> FrameSender {
        self.sink.clone().unwrap_or_else(|| watcher_channel().0)
    }

    fn watch(&mut self, run: String, since: i64, id: Value, ctx: &mut ws::WebsocketContext<Self>) {
        let engine = self.engine.clone();
        let sink = self.sink();
        let watcher = self.watcher;
        let r = run.clone();
        // After an unwatch, the marker goes into the channel before the watch reaches the Hub:
        // everything queued ahead of it is stale, everything behind it is the new watch's.
        let rewatch = self.muted.get(&run).map(|&epoch| Frame::Rewatch { run: run.clone(), epoch });
        self.watched.insert(run.clone());
        ctx.spawn(
            async move {
                if let Some(marker) = rewatch {
                    let _ = sink.send(marker).await;
                }
                engine.watch(&r, since, watcher, sink).await
            }
            .into_actor(self)
            .map(move |res, act, ctx| {
                if let Err(e) = res {
                    act.watched.remove(&run);
                    Self::engine_error(ctx, &id, Some(&run), e);
                }
            }),
        );
    }

    fn handle_client(&mut self, text: &str, ctx: &mut ws::WebsocketContext<Self>) {
        let msg: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return Self::error(
                    ctx,
                    &Value::Null,
                    "messages must be JSON objects with a `type`".into(),
                    json!({}),
                )
            }
        };
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let run = msg.get("run").and_then(Value::as_str).map(str::to_string);
        match msg.get("type").and_then(Value::as_str).unwrap_or("") {
            "start" => {
                let body = match msg.get("request") {
                    Some(b) => b.clone(),
                    None => {
                        let mut b = msg.clone();
                        if let Some(o) = b.as_object_mut() {
                            o.remove("type");
                            o.remove("id");
                        }
                        b
                    }
                };
                let engine = self.engine.clone();
                ctx.spawn(async move { engine.start_run(&body, None).await }.into_actor(self).map(
                    move |res, act, ctx| match res {
                        Ok(started) => {
                            let mut v = json!({ "type": "started" });
                            if let (Some(o), Ok(Value::Object(s))) =
                                (v.as_object_mut(), serde_json::to_value(&started))
                            {
                                o.extend(s);
                            }
                            if !id.is_null() {
                                v["id"] = id.clone();
                            }
                            Self::send_json(ctx, v);
                            act.watch(started.run_id, 0, id, ctx);
                        }
                        Err(e) => Self::engine_error(ctx, &id, None, e),
                    },
                ));
            }
            "watch" => {
                let Some(run) = run else {
                    return Self::error(
                        ctx,
                        &id,
                        "watch needs `run`".into(),
                        json!({"field": "run"}),
                    );
                };
                let since = match msg.get("since") {
                    None | Some(Value::Null) => 0,
                    Some(v) => match v.as_i64() {
                        Some(n) if n >= 0 => n,
                        _ => {
                            return Self::error(
                                ctx,
                                &id,
                                "since must be a non-negative sequence number".into(),
                                json!({"field": "since"}),
                            )
                        }
                    },
                };
                self.watch(run, since, id, ctx);
            }
            "unwatch" => {
                let Some(run) = run else {
                    return Self::error(
                        ctx,
                        &id,
                        "unwatch needs `run`".into(),
                        json!({"field": "run"}),
                    );
                };
                self.engine.unwatch(&run, self.watcher);
                if self.watched.remove(&run) {
                    self.unwatches += 1;
                    self.last_sent.remove(&run);
                    self.muted.insert(run, self.unwatches);
                }
            }
            "cancel" => {
                let Some(run) = run else {
                    return Self::error(
                        ctx,
                        &id,
                        "cancel needs `run`".into(),
                        json!({"field": "run"}),
                    );
                };
                let engine = self.engine.clone();
                let r = run.clone();
                ctx.spawn(async move { engine.cancel(&r, "a WebSocket client").await }.into_actor(self).map(
                    move |res, _, ctx| match res {
                        Ok(cancelled) => {
                            let mut v = json!({ "type": "cancel_result", "run": run, "cancelled": cancelled });
                            if !id.is_null() {
                                v["id"] = id;
                            }
                            Self::send_json(ctx, v);
                        }
                        Err(e) => Self::engine_error(ctx, &id, Some(&run), e),
                    },
                ));
            }
            "dashboard" => {
                let sink = self.sink();
                self.engine.subscribe_dashboard(self.watcher, sink);
            }
            "ping" => Self::send_json(ctx, json!({ "type": "pong", "id": id })),
            other => Self::error(ctx, &id, format!("unknown message type {other:?}"), json!({})),
        }
    }
}

impl Actor for WsSession {
    type Context = ws::WebsocketContext<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.hb(ctx);
        let (tx, rx) = watcher_channel();
        self.sink = Some(tx);
        ctx.add_stream(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|f| (f, rx))
        }));
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        self.engine.disconnect(self.watcher);
        Running::Stop
    }
}

impl StreamHandler<Frame> for WsSession {
    fn handle(&mut self, frame: Frame, ctx: &mut Self::Context) {
        match frame {
            Frame::Event(f) => {
                if self.muted.contains_key(&f.run) {
                    return;
                }
                let last = self.last_sent.entry(f.run.clone()).or_insert(0);
                if f.seq <= *last {
                    return;
                }
                *last = f.seq;
                ctx.text(&*f.json);
            }
            Frame::Dashboard(text) => ctx.text(&*text),
            // This socket fell behind and was unsubscribed; everything before the marker has
            // now gone out, so resubscribe from the last event sent: the client sees no gap.
            Frame::Lagged { run, since } => {
                if self.muted.contains_key(&run) {
                    return;
                }
                let from = self.last_sent.get(&run).copied().unwrap_or(since);
                self.watch(run, from, Value::Null, ctx);
            }
            Frame::DashboardLagged => {
                let sink = self.sink();
                self.engine.subscribe_dashboard(self.watcher, sink);
            }
            Frame::Rewatch { run, epoch } => {
                if self.muted.get(&run) == Some(&epoch) {
                    self.muted.remove(&run);
                    self.last_sent.remove(&run);
                }
            }
        }
    }

    /// The frame channel never ends while the session lives; keep the socket open.
    fn finished(&mut self, _: &mut Self::Context) {}
}

impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for WsSession {
    fn handle(&mut self, msg: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        self.last_seen = Instant::now();
        match msg {
            Ok(ws::Message::Text(text)) => self.handle_client(&text, ctx),
            Ok(ws::Message::Ping(p)) => ctx.pong(&p),
            Ok(ws::Message::Pong(_)) => {}
            Ok(ws::Message::Binary(_)) => Self::error(
                ctx,
                &Value::Null,
                "binary messages are not supported".into(),
                json!({}),
            ),
            Ok(ws::Message::Close(reason)) => {
                ctx.close(reason);
                ctx.stop();
            }
            Ok(ws::Message::Continuation(_)) | Ok(ws::Message::Nop) => {}
            Err(e) => {
                log::warn!("websocket protocol error: {e}");
                ctx.stop();
            }
        }
    }
}
