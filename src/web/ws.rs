//! The WebSocket session (`/ws`): one actor per socket.
//!
//! Client messages (JSON, `type` field; an optional `id` is echoed in direct replies):
//! `start` (`request`: a start body), `watch` (`run`, optional `since`), `unwatch` (`run`; it
//! also forgets what was sent of the run, so a later watch replays from its `since`),
//! `cancel` (`run`), `dashboard`. Server messages: events in the envelope
//! `{type:"event", run, seq, event, data}`, `started`, `cancel_result`, `dashboard`,
//! `dashboard_update` and `error` (`{type:"error", message, field?, run?, id?}`).
//!
//! A socket not signed in by its upgrade must send `auth` within the sign-in timeout (10 s by
//! default) or is closed with 1008; one address may hold at most
//! `max_unauthenticated_sockets_per_address` such sockets (16), the next upgrade gets 429.
//!
//! Limits per socket (see [`super::limits`]): a frame over 1 MiB gets an error and a close with
//! 1009 (message too big), checked at the frame's header; more than 50 messages a second
//! (bursts of 100) are dropped with one error, and a flood that goes on is closed with 1008
//! (policy violation). Bad JSON, unknown types, binary and fragmented frames get an error and
//! the socket stays open. Decoding is [`super::client_msg`], pure and fuzzed.
//!
//! This is the only file that uses the deprecated `actix-web-actors` crate, so moving to
//! `actix-ws` later touches nothing else.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_web_actors::ws;
use serde_json::{json, Value};

use super::client_msg::{self, ClientMsg, Decoded};
use super::error::ApiError;
use super::limits::{
    Admit, Flood, FrameGuard, SignInPlace, MAX_FRAME_BYTES, MESSAGES_PER_SECOND, MESSAGE_BURST,
};
use super::AppState;
use crate::engine::events::{after, watcher_channel, Frame, FrameSender};
use crate::engine::{Engine, EngineError, Viewer};

pub async fn connect(
    state: web::Data<AppState>,
    req: HttpRequest,
    stream: web::Payload,
) -> Result<HttpResponse, actix_web::Error> {
    // A page from another site may not open a socket with this browser's cookie.
    if !same_origin(&req) {
        return Err(
            ApiError::Forbidden("cross-origin WebSocket connections are refused".into()).into()
        );
    }
    // Signed in by cookie or header now, or by the first message (`auth`) later.
    let viewer = match super::auth::token_of(&req) {
        Some((token, _)) => super::auth::authenticate(state.engine.store(), &token)
            .await
            .map_err(ApiError::from)?
            .map(|u| Viewer::user(&u.name, u.is_admin)),
        None => None,
    };
    // A socket that has yet to sign in holds one of its address's few places until it does.
    let sign_in_place = match (&viewer, req.peer_addr()) {
        (None, Some(peer)) => match state.unauthenticated.hold(peer.ip()) {
            Some(place) => Some(place),
            None => {
                return Err(ApiError::TooManyRequests {
                    message: format!(
                        "too many sockets from this address are waiting to sign in (at most \
                         {}); sign in on one, or close one",
                        state.unauthenticated.cap()
                    ),
                    retry_after_secs: state.sign_in_timeout.as_secs().max(1),
                }
                .into())
            }
        },
        _ => None,
    };
    let oversized = Arc::new(AtomicBool::new(false));
    let session = WsSession {
        viewer,
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
        flood: Flood::new(state.clock.now()),
        clock: state.clock.clone(),
        oversized: oversized.clone(),
        told_fragments: false,
        sign_in_timeout: state.sign_in_timeout,
        sign_in_place,
        _open: None,
    };
    ws::WsResponseBuilder::new(session, &req, FrameGuard::new(stream, MAX_FRAME_BYTES, oversized))
        .frame_size(MAX_FRAME_BYTES)
        .start()
}

/// A viewer who sees nothing private (a socket whose sign-in has not completed never gets this
/// far; this only keeps the types honest).
fn nobody() -> Viewer {
    Viewer { name: None, is_admin: false }
}

/// Whether the `Origin` header (sent by browsers) names this server's own host. Clients that
/// send none (curl, scripts) authenticate with a token instead of a cookie.
fn same_origin(req: &HttpRequest) -> bool {
    let Some(origin) = req.headers().get(actix_web::http::header::ORIGIN) else { return true };
    let Ok(origin) = origin.to_str() else { return false };
    let host = req.connection_info().host().to_string();
    origin.split_once("://").is_some_and(|(_, rest)| rest.trim_end_matches('/') == host)
}

pub struct WsSession {
    /// Who is signed in on this socket; `None` until an `auth` message succeeds.
    viewer: Option<Viewer>,
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
    /// The per-socket message rate limit.
    flood: Flood,
    /// The time `flood` goes by.
    clock: crate::engine::limits::Clock,
    /// Set by the [`FrameGuard`] when the client sent a frame over [`MAX_FRAME_BYTES`].
    oversized: Arc<AtomicBool>,
    /// Whether the client was told that fragmented messages are ignored.
    told_fragments: bool,
    /// How long the socket may stay open without signing in.
    sign_in_timeout: std::time::Duration,
    /// This socket's place among its address's unauthenticated sockets, until it signs in.
    sign_in_place: Option<SignInPlace>,
    /// Counts this socket as open (in `conclave_websocket_connections`) from `started` until
    /// the session is dropped, however it ends.
    _open: Option<crate::metrics::WsConnection>,
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
        Self::api_error(ctx, id, run, e.into())
    }

    fn api_error(
        ctx: &mut ws::WebsocketContext<Self>,
        id: &Value,
        run: Option<&str>,
        api: ApiError,
    ) {
        let mut extra = json!({});
        if let ApiError::BadRequest { field: Some(f), .. } = &api {
            extra["field"] = json!(f);
        }
        if let ApiError::TooManyRequests { retry_after_secs, .. } = &api {
            extra["retryAfterSeconds"] = json!(retry_after_secs);
        }
        if let ApiError::StoreUnavailable(_) = &api {
            extra["retryAfterSeconds"] = json!(2);
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
        let r = match super::error::run_id(&run) {
            Ok(r) => r,
            Err(e) => return Self::api_error(ctx, &id, Some(&run), e),
        };
        let engine = self.engine.clone();
        let viewer = self.viewer.clone().unwrap_or_else(nobody);
        let sink = self.sink();
        let watcher = self.watcher;
        // After an unwatch, the marker goes into the channel before the watch reaches the Hub:
        // everything queued ahead of it is stale, everything behind it is the new watch's.
        let rewatch = self.muted.get(&run).map(|&epoch| Frame::Rewatch { run: run.clone(), epoch });
        self.watched.insert(run.clone());
        let ack = (!id.is_null()).then(|| Frame::Watching { run: run.clone(), id: id.clone() });
        ctx.spawn(
            async move {
                if let Some(marker) = rewatch {
                    let _ = sink.send(marker).await;
                }
                engine.watch(&r, since, watcher, sink.clone(), &viewer).await?;
                if let Some(ack) = ack {
                    let _ = sink.send(ack).await;
                }
                Ok(())
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

    /// Before anything else, a socket without a cookie or header must send
    /// `{"type":"auth","token":…}`; every other message is refused until then.
    fn authenticate(&mut self, text: &str, ctx: &mut ws::WebsocketContext<Self>) {
        let msg: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let token = match (msg.get("type").and_then(Value::as_str), msg.get("token")) {
            (Some("auth"), Some(Value::String(t))) => t.clone(),
            _ => {
                return Self::error(
                    ctx,
                    &id,
                    "sign in first: send {\"type\":\"auth\",\"token\":…} or connect with a session cookie or an Authorization header".into(),
                    json!({ "code": "unauthorized" }),
                )
            }
        };
        let store = self.engine.store().clone();
        ctx.spawn(async move { super::auth::authenticate(&store, &token).await }.into_actor(self).map(
            move |res, act, ctx| match res {
                Ok(Some(user)) => {
                    act.viewer = Some(Viewer::user(&user.name, user.is_admin));
                    act.sign_in_place = None;
                    let mut v = json!({ "type": "authenticated", "name": user.name, "isAdmin": user.is_admin });
                    if !id.is_null() {
                        v["id"] = id;
                    }
                    Self::send_json(ctx, v);
                }
                Ok(None) => {
                    Self::error(ctx, &id, "that token is not valid".into(), json!({ "code": "unauthorized" }));
                    ctx.close(Some(ws::CloseReason { code: ws::CloseCode::Policy, description: Some("not signed in".into()) }));
                    ctx.stop();
                }
                Err(e) => {
                    log::error!("websocket sign-in: {e}");
                    Self::error(ctx, &id, "internal error".into(), json!({}));
                }
            },
        ));
    }

    fn handle_client(&mut self, text: &str, ctx: &mut ws::WebsocketContext<Self>) {
        let Some(viewer) = self.viewer.clone() else { return self.authenticate(text, ctx) };
        let Decoded { id, msg } = match client_msg::decode(text) {
            Ok(d) => d,
            Err(e) => return Self::send_json(ctx, e.to_json()),
        };
        match msg {
            ClientMsg::Start { request } => {
                let engine = self.engine.clone();
                ctx.spawn(
                    async move { engine.start_run(&request, &viewer).await }.into_actor(self).map(
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
                                act.watch(started.run_id.into_string(), 0, id, ctx);
                            }
                            Err(e) => Self::engine_error(ctx, &id, None, e),
                        },
                    ),
                );
            }
            ClientMsg::Watch { run, since } => self.watch(run, since, id, ctx),
            ClientMsg::Unwatch { run } => {
                // An id that cannot be a run's was never watched: nothing to undo.
                if let Ok(r) = super::error::run_id(&run) {
                    self.engine.unwatch(&r, self.watcher);
                }
                if self.watched.remove(&run) {
                    self.unwatches += 1;
                    self.last_sent.remove(&run);
                    self.muted.insert(run, self.unwatches);
                }
            }
            ClientMsg::Cancel { run } => {
                let r = match super::error::run_id(&run) {
                    Ok(r) => r,
                    Err(e) => return Self::api_error(ctx, &id, Some(&run), e),
                };
                let engine = self.engine.clone();
                ctx.spawn(async move { engine.cancel(&r, "a WebSocket client", &viewer).await }.into_actor(self).map(
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
            ClientMsg::Dashboard => {
                let sink = self.sink();
                self.engine.subscribe_dashboard(
                    self.watcher,
                    sink,
                    self.viewer.clone().unwrap_or_else(nobody),
                );
            }
            ClientMsg::Ping => Self::send_json(ctx, json!({ "type": "pong", "id": id })),
        }
    }

    /// Applies the per-socket rate limit to one incoming message; false when it is dropped.
    fn admit(&mut self, ctx: &mut ws::WebsocketContext<Self>) -> bool {
        let admit = self.flood.admit(self.clock.now());
        if admit != Admit::Yes {
            crate::metrics::global().ws_message_dropped();
        }
        match admit {
            Admit::Yes => true,
            Admit::DropAndWarn => {
                log::info!("websocket client exceeds the message rate; dropping its messages");
                Self::error(
                    ctx,
                    &Value::Null,
                    format!(
                        "too many messages: at most {MESSAGES_PER_SECOND} per second (bursts of \
                         {MESSAGE_BURST}); messages are dropped until the client slows down, \
                         and a client that keeps flooding is disconnected"
                    ),
                    json!({}),
                );
                false
            }
            Admit::Drop => false,
            Admit::Close => {
                log::warn!("websocket client kept flooding; closing the socket");
                ctx.close(Some(ws::CloseReason {
                    code: ws::CloseCode::Policy,
                    description: Some("too many messages".into()),
                }));
                ctx.stop();
                false
            }
        }
    }
}

impl Actor for WsSession {
    type Context = ws::WebsocketContext<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self._open = Some(crate::metrics::global().ws_opened());
        self.hb(ctx);
        if self.viewer.is_none() {
            ctx.run_later(self.sign_in_timeout, |act, ctx| {
                if act.viewer.is_some() {
                    return;
                }
                log::info!("websocket client did not sign in in time; closing");
                let secs = act.sign_in_timeout.as_secs_f64();
                Self::error(
                    ctx,
                    &Value::Null,
                    format!("sign-in timed out: send {{\"type\":\"auth\",\"token\":…}} within {secs} s of connecting"),
                    json!({ "code": "unauthorized" }),
                );
                ctx.close(Some(ws::CloseReason {
                    code: ws::CloseCode::Policy,
                    description: Some("sign-in timed out".into()),
                }));
                ctx.stop();
            });
        }
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
            // Written in one go: the frames queued in one handling leave in one write.
            Frame::Events(batch) => {
                let Some(run) = batch.first().map(|f| &f.run) else { return };
                if self.muted.contains_key(run) {
                    return;
                }
                if !self.last_sent.contains_key(run) {
                    self.last_sent.insert(run.clone(), 0);
                }
                let Some(last) = self.last_sent.get_mut(run) else { return };
                for f in after(&batch, *last) {
                    *last = f.seq;
                    ctx.text(f.json.clone());
                }
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
                self.engine.subscribe_dashboard(
                    self.watcher,
                    sink,
                    self.viewer.clone().unwrap_or_else(nobody),
                );
            }
            Frame::Rewatch { run, epoch } => {
                if self.muted.get(&run) == Some(&epoch) {
                    self.muted.remove(&run);
                    self.last_sent.remove(&run);
                }
            }
            Frame::Watching { run, id } => {
                Self::send_json(ctx, json!({ "type": "watching", "run": run, "id": id }))
            }
        }
    }

    /// The frame channel never ends while the session lives; keep the socket open.
    fn finished(&mut self, _: &mut Self::Context) {}
}

impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for WsSession {
    fn handle(&mut self, msg: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        self.last_seen = Instant::now();
        let counted = matches!(
            msg,
            Ok(ws::Message::Text(_) | ws::Message::Binary(_) | ws::Message::Ping(_))
                | Ok(ws::Message::Continuation(_))
        );
        if counted && !self.admit(ctx) {
            return;
        }
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
            // Browsers never fragment messages: fragments are ignored, and the client is told
            // so once.
            Ok(ws::Message::Continuation(_)) => {
                if !self.told_fragments {
                    self.told_fragments = true;
                    Self::error(
                        ctx,
                        &Value::Null,
                        "fragmented messages are not supported (and are ignored)".into(),
                        json!({}),
                    );
                }
            }
            Ok(ws::Message::Nop) => {}
            Err(e) => {
                let (code, description) = if self.oversized.load(Ordering::Relaxed)
                    || matches!(e, ws::ProtocolError::Overflow)
                {
                    log::info!("websocket client sent a frame over {MAX_FRAME_BYTES} bytes");
                    Self::error(
                        ctx,
                        &Value::Null,
                        format!("message too large: at most {MAX_FRAME_BYTES} bytes per frame"),
                        json!({}),
                    );
                    (ws::CloseCode::Size, "message too large")
                } else if let ws::ProtocolError::Io(_) = e {
                    // The connection broke off (a closed tab, a lost network): nobody to tell.
                    log::debug!("websocket connection lost: {e}");
                    ctx.stop();
                    return;
                } else {
                    log::warn!("websocket protocol error: {e}");
                    (ws::CloseCode::Protocol, "protocol error")
                };
                ctx.close(Some(ws::CloseReason { code, description: Some(description.into()) }));
                ctx.stop();
            }
        }
    }
}
