//! A misbehaving WebSocket client (bad JSON, binary and fragmented frames, a frame over the
//! size limit, a flood of messages) gets an error or a clean close, never a crash, and other
//! sockets keep working meanwhile.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::*;

type Raw =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A signed-in socket, without the helpers' wrapper (raw frames, close codes).
async fn raw(app: &TestApp) -> Raw {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = app.ws_url.as_str().into_client_request().expect("ws request");
    req.headers_mut()
        .insert("Authorization", format!("Bearer {}", app.token).parse().expect("header"));
    tokio_tungstenite::connect_async(req).await.expect("ws connect").0
}

/// What the server sent until `quiet` without a message (pings do not count) or the end of the
/// connection: the JSON messages, and the close code if a close frame came.
async fn drain(ws: &mut Raw, quiet: Duration) -> (Vec<Value>, Option<CloseCode>) {
    let mut out = Vec::new();
    let mut deadline = tokio::time::Instant::now() + quiet;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                out.push(serde_json::from_str(t.as_str()).expect("server sends JSON"));
                deadline = tokio::time::Instant::now() + quiet;
            }
            Ok(Some(Ok(Message::Close(frame)))) => return (out, frame.map(|f| f.code)),
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(_))) | Ok(None) | Err(_) => return (out, None),
        }
    }
}

async fn ping(ws: &mut Raw, id: u64) -> bool {
    let msg = json!({ "type": "ping", "id": id }).to_string();
    if ws.send(Message::text(msg)).await.is_err() {
        return false;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Some(Ok(m))) = tokio::time::timeout_at(deadline, ws.next()).await {
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
            if v["type"] == "pong" && v["id"] == id {
                return true;
            }
        }
    }
    false
}

/// The next JSON message (pings are answered and skipped); a close or 10 s of silence fails.
async fn next_json(ws: &mut Raw) -> Value {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return serde_json::from_str(t.as_str()).unwrap(),
            Ok(Some(Ok(Message::Close(f)))) => panic!("closed: {f:?}"),
            Ok(Some(Ok(_))) => {}
            other => panic!("no message: {other:?}"),
        }
    }
}

/// Client messages the server has dropped for flooding, so far.
async fn dropped(app: &TestApp) -> f64 {
    counter(&metrics(app).await, "conclave_websocket_messages_dropped_total")
}

fn errors(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .filter(|m| m["type"] == "error")
        .map(|m| m["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[actix_web::test]
async fn bad_frames_get_an_error_and_the_socket_stays_usable() {
    let app = spawn_app().await;
    let mut ws = raw(&app).await;
    let cases: Vec<(Message, &str)> = vec![
        (Message::text("{not json"), "JSON"),
        (Message::text(""), "JSON"),
        (Message::text("\u{0}\u{1}"), "JSON"),
        (Message::text("[1,2,3]"), "JSON objects"),
        (Message::text(r#"{"type":"frobnicate"}"#), "unknown message type"),
        (Message::text(r#"{"id":3}"#), "type"),
        (Message::text(r#"{"type":"watch","run":{"x":1}}"#), "run"),
        (Message::text(r#"{"type":"watch","run":"r","since":-5}"#), "since"),
        (Message::text(r#"{"type":"start","request":"q"}"#), "request"),
        (Message::binary(vec![0u8, 159, 146, 150]), "binary"),
    ];
    for (msg, expect) in cases {
        let shown = format!("{msg:?}");
        ws.send(msg).await.expect("send");
        let (msgs, close) = drain(&mut ws, Duration::from_millis(300)).await;
        assert_eq!(close, None, "{shown} closed the socket");
        let errs = errors(&msgs);
        assert_eq!(errs.len(), 1, "{shown} -> {msgs:?}");
        assert!(errs[0].contains(expect), "{shown} -> {:?}", errs[0]);
    }
    // A start body with a bad field is answered like REST: the field is named.
    ws.send(Message::text(
        json!({ "type": "start", "id": 9, "request": { "question": "q", "councilModels": [1] } })
            .to_string(),
    ))
    .await
    .unwrap();
    let (msgs, _) = drain(&mut ws, Duration::from_millis(500)).await;
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(
        (msgs[0]["field"].as_str(), msgs[0]["id"].as_i64()),
        (Some("councilModels"), Some(9))
    );
    // A fragmented message: refused once, ignored, and the socket goes on.
    let first = Frame::message(&b"{\"type\":"[..], OpCode::Data(Data::Text), false);
    let last = Frame::message(&b"\"ping\"}"[..], OpCode::Data(Data::Continue), true);
    ws.send(Message::Frame(first)).await.unwrap();
    ws.send(Message::Frame(last)).await.unwrap();
    let (msgs, close) = drain(&mut ws, Duration::from_millis(300)).await;
    assert_eq!(close, None);
    assert!(errors(&msgs).iter().any(|e| e.contains("fragmented")), "{msgs:?}");
    assert!(ping(&mut ws, 1).await, "the socket still answers");
    app.stop().await;
}

#[actix_web::test]
async fn a_frame_over_the_limit_closes_that_socket_with_1009_and_no_other() {
    let app = spawn_app().await;
    let mut bystander = raw(&app).await;
    let mut ws = raw(&app).await;
    // Just under the limit passes the size check and reaches validation.
    let big = json!({ "type": "start", "id": 1, "request": {
        "question": "q", "mode": "jury",
        "modeConfig": { "content": "x".repeat(1_000_000) } } });
    ws.send(Message::text(big.to_string())).await.unwrap();
    let (msgs, close) = drain(&mut ws, Duration::from_millis(1000)).await;
    assert_eq!(close, None);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["field"], "modeConfig.content", "{msgs:?}");
    // Over it: an error saying why, then a close with "message too big".
    let _ = ws.send(Message::text("x".repeat((1 << 20) + 1))).await;
    let (msgs, close) = drain(&mut ws, Duration::from_secs(3)).await;
    assert_eq!(close, Some(CloseCode::Size), "{msgs:?}");
    assert!(errors(&msgs).iter().any(|e| e.contains("too large")), "{msgs:?}");
    // A frame declaring a huge length is refused at its header, before any payload, even
    // before the socket has signed in.
    let mut ws = tokio_tungstenite::connect_async(&app.ws_url).await.expect("ws connect").0;
    let mut header = vec![0x81u8, 0xff];
    header.extend((1u64 << 40).to_be_bytes());
    header.extend([1, 2, 3, 4]);
    let tcp = ws.get_mut();
    if let tokio_tungstenite::MaybeTlsStream::Plain(tcp) = tcp {
        use tokio::io::AsyncWriteExt;
        tcp.write_all(&header).await.unwrap();
        tcp.write_all(&[0u8; 4096]).await.unwrap();
    }
    let (msgs, close) = drain(&mut ws, Duration::from_secs(3)).await;
    assert_eq!(close, Some(CloseCode::Size), "{msgs:?}");
    assert!(ping(&mut bystander, 2).await, "other sockets are unaffected");
    app.stop().await;
}

#[actix_web::test]
async fn a_flood_is_dropped_with_one_warning_and_a_sustained_one_closes_the_socket() {
    // The rate limit's clock stands still until the test moves it: what passes is exact.
    let clock = conclave::engine::limits::Clock::manual();
    let app =
        spawn_with(Options { sim_latency_ms: 50, clock: clock.clone(), ..Options::default() })
            .await;
    // A bystander runs a deliberation and keeps pinging while another socket floods.
    let mut bystander = app.ws().await;
    bystander.send(json!({ "type": "start", "request": council_request("Floods?") })).await;
    let (started, _) = bystander.until("started", None).await;
    let run = started["runId"].as_str().unwrap().to_string();

    let mut ws = raw(&app).await;
    let dropped_before = dropped(&app).await;
    // A burst of 150: the first 100 (the burst) pass, the other 50 are dropped with one warning.
    for i in 0..150 {
        ws.feed(Message::text(json!({ "type": "ping", "id": i }).to_string())).await.unwrap();
    }
    ws.flush().await.unwrap();
    let pongs = |msgs: &[Value]| msgs.iter().filter(|m| m["type"] == "pong").count();
    let mut msgs = Vec::new();
    while pongs(&msgs) < 100 || errors(&msgs).is_empty() {
        msgs.push(next_json(&mut ws).await);
    }
    let errs = errors(&msgs);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("too many messages"), "{errs:?}");
    // The clock moves only once the server has read the whole burst (dropped are counted):
    // moved earlier, a busy server would let the burst's tail through on the refilled bucket.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while dropped(&app).await < dropped_before + 50.0 {
        assert!(tokio::time::Instant::now() < deadline, "the server never read the whole burst");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Two seconds on, the bucket has refilled: the socket is as good as new, and the next
    // message it answers is this ping (nothing of the burst past the 100 was let through).
    clock.advance(Duration::from_millis(2100));
    ws.send(Message::text(json!({ "type": "ping", "id": 1000 }).to_string())).await.unwrap();
    let next = next_json(&mut ws).await;
    assert_eq!((&next["type"], &next["id"]), (&json!("pong"), &json!(1000)), "{next}");

    // A flood that goes on is cut off with a policy-violation close.
    for i in 0..700 {
        if ws.feed(Message::text(json!({ "type": "ping", "id": i }).to_string())).await.is_err() {
            break;
        }
    }
    let _ = ws.flush().await;
    let (msgs, close) = drain(&mut ws, Duration::from_secs(3)).await;
    assert_eq!(close, Some(CloseCode::Policy), "{} messages", msgs.len());
    assert_eq!(errors(&msgs).len(), 1, "warned once");

    // The bystander saw its whole run, and still answers.
    let events = bystander.events_until_end(&run).await;
    assert_eq!(events.last().unwrap()["event"], "complete");
    bystander.send(json!({ "type": "ping", "id": 5 })).await;
    let (pong, _) = bystander.until("pong", None).await;
    assert_eq!(pong["id"], 5);
    // A new socket is accepted as usual.
    let mut again = raw(&app).await;
    assert!(ping(&mut again, 6).await);
    app.stop().await;
}

/// A socket that never signs in, though it answers every ping, is closed at the sign-in
/// deadline (1008, with an error saying why); one that signed in before it is not.
#[actix_web::test]
async fn a_socket_that_never_signs_in_is_closed_at_the_deadline() {
    let app =
        spawn_with(Options { sign_in_timeout: Duration::from_millis(300), ..Options::default() })
            .await;
    let mut signed = app.ws_anonymous().await;
    signed.send(json!({ "type": "auth", "token": app.token })).await;
    signed.until("authenticated", None).await;
    let (mut silent, _) = tokio_tungstenite::connect_async(&app.ws_url).await.unwrap();
    // Reading answers the server's pings (every 500 ms here); the close must come regardless.
    let (msgs, close) = drain(&mut silent, Duration::from_secs(10)).await;
    assert_eq!(close, Some(CloseCode::Policy), "{msgs:?}");
    let errs = errors(&msgs);
    assert!(errs.iter().any(|e| e.contains("sign-in timed out")), "{errs:?}");
    // Its deadline, set earlier, passed before the silent socket's: it is still served.
    signed.send(json!({ "type": "ping", "id": 7 })).await;
    assert_eq!(signed.until("pong", None).await.0["id"], 7);
    app.stop().await;
}

/// One address may hold only so many sockets that have not signed in: the next upgrade gets
/// 429; a socket that signs in gives its place back; sockets signed in on the upgrade do not
/// count.
#[actix_web::test]
async fn unauthenticated_sockets_are_capped_per_address() {
    use tokio_tungstenite::tungstenite::Error as WsError;
    let app =
        spawn_with(Options { max_unauthenticated_per_address: 3, ..Options::default() }).await;
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(app.ws_anonymous().await);
    }
    match tokio_tungstenite::connect_async(&app.ws_url).await {
        Err(WsError::Http(resp)) => assert_eq!(resp.status(), 429),
        other => panic!("a fourth socket without sign-in: {:?}", other.map(|_| ())),
    }
    let mut signed_on_upgrade = raw(&app).await;
    assert!(ping(&mut signed_on_upgrade, 1).await, "a signed-in socket is not held back");
    waiting[0].send(json!({ "type": "auth", "token": app.token })).await;
    waiting[0].until("authenticated", None).await;
    let mut fourth = app.ws_anonymous().await;
    fourth.send(json!({ "type": "auth", "token": app.token })).await;
    fourth.until("authenticated", None).await;
    app.stop().await;
}
