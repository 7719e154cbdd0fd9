//! The bus between instances that share one database: Redis pub/sub, when `REDIS_URL` is set.
//!
//! It carries every event frame a run executed here publishes (tokens included) on the run's
//! own channel `<prefix>:run:<id>`, which an instance subscribes to only while its watchers
//! follow that run; and, on the channel `<prefix>:instances` that every instance subscribes to,
//! [`Control`] messages: dashboard summaries, a periodic beat, snapshots and cancel requests.
//! Beside each run's frames it keeps the highest sequence number published (`<prefix>:seq:<id>`)
//! so that an instance taking the run over numbers its events after every number a watcher may
//! have seen on a token (tokens are not stored, so the database cannot tell).
//!
//! A task owns the connections. It never blocks a run: the Hub hands it work without waiting,
//! and what cannot be published (Redis down, the queue full) is dropped and announced when the
//! bus is back, so followers elsewhere catch up from the database. It reconnects with backoff.
//! It does no SQL and holds no state of runs: what arrives is handed on as it is
//! ([`Inbound`]; the engine forwards it to the Hub).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::events::{EventBatch, EventFrame};
use super::summary::RunSummary;

/// What the bus brings this instance, in the order it came. The bus does not know who reads
/// it: the engine forwards these to the Hub.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub enum Inbound {
    /// The bus (re)connected: frames may have been missed meanwhile.
    Up,
    /// Frames another instance published for a run followed here.
    Frames { run_id: String, frames: Vec<Arc<EventFrame>> },
    /// A control message from another instance.
    Control { from: String, msg: Control },
}

/// Work waiting for the bus task. More than this and frames are dropped (and announced).
const QUEUE: usize = 65_536;
/// Commands published in one pipeline at most.
const BATCH: usize = 512;
/// A Redis request that takes longer than this counts as a lost connection.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an idle connection is checked.
const PING_EVERY: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long a cancel request made while Redis is unreachable waits to be sent when it is back.
const HOLD_CANCELS: Duration = Duration::from_secs(60);
/// How long a run's highest published sequence number is kept after its last frame: far
/// longer than any lease, after which nobody takes the run over from those numbers.
const SEQ_TTL_SECS: u64 = 86_400;

/// Where the bus is and what its names start with.
#[derive(Debug, Clone)]
pub struct BusSettings {
    pub url: String,
    pub prefix: String,
}

/// What instances tell each other on the shared channel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Control {
    /// A run executed by the sender changed (as its dashboard shows it), or ended.
    Summary { run: Box<RunSummary> },
    /// The sender is alive and executes these runs (sent every third of a lease).
    Beat { running: Vec<String> },
    /// The sender (re)connected. `resync`: frames it published meanwhile were lost, so runs
    /// followed from elsewhere must be caught up from the database.
    Hello { resync: bool },
    /// The sender's running runs, in answer to a `Hello`.
    Snapshot { runs: Vec<RunSummary> },
    /// Stop this run, wherever it is executed (the sender checked who may).
    Cancel { run: String, reason: String },
}

/// A control message and the instance that sent it.
#[derive(Debug, Serialize, Deserialize)]
struct Envelope {
    from: String,
    #[serde(flatten)]
    msg: Control,
}

enum Command {
    Frames {
        run_id: String,
        frames: EventBatch,
    },
    Control(Control),
    /// Subscribe to a run's channel; answers once Redis confirmed (false when not connected).
    Subscribe {
        run_id: String,
        ack: oneshot::Sender<bool>,
    },
    Unsubscribe {
        run_id: String,
    },
    /// The highest sequence number published for a run (0 when none was; None when Redis
    /// cannot say).
    HighWater {
        run_id: String,
        reply: oneshot::Sender<Option<i64>>,
    },
}

/// A handle to the bus task (cheap to clone).
#[derive(Clone)]
pub struct Bus {
    tx: mpsc::Sender<Command>,
    /// Set when work was dropped; the task announces it at its next connection.
    lost: Arc<AtomicBool>,
}

impl Bus {
    /// Starts the bus task; it connects (and reconnects) in the background. Must run inside
    /// an actix System. The URL is checked here: a malformed one is an error at start-up.
    pub fn start(
        settings: &BusSettings,
        instance: &str,
        inbound: mpsc::UnboundedSender<Inbound>,
    ) -> redis::RedisResult<Bus> {
        let client = redis::Client::open(settings.url.as_str())?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let lost = Arc::new(AtomicBool::new(false));
        let task = Task {
            client,
            names: Names { prefix: settings.prefix.clone() },
            instance: instance.to_string(),
            inbound,
            rx,
            lost: lost.clone(),
            wanted: HashSet::new(),
            held: Vec::new(),
            url: crate::secrets::redact_url(&settings.url),
        };
        actix::spawn(task.run());
        Ok(Bus { tx, lost })
    }

    /// Publishes frames of a run executed here (in order, after any given before).
    pub fn frames(&self, run_id: &str, frames: EventBatch) {
        if self.tx.try_send(Command::Frames { run_id: run_id.to_string(), frames }).is_err() {
            self.lost.store(true, Ordering::SeqCst);
        }
    }

    pub fn control(&self, msg: Control) {
        if self.tx.try_send(Command::Control(msg)).is_err() {
            self.lost.store(true, Ordering::SeqCst);
        }
    }

    /// Subscribes to a run's channel; resolves once frames published from now on will arrive,
    /// or at once (false) while Redis is unreachable.
    pub fn subscribe(&self, run_id: &str) -> impl std::future::Future<Output = bool> {
        let (ack, done) = oneshot::channel();
        let sent = self.tx.try_send(Command::Subscribe { run_id: run_id.to_string(), ack });
        async move {
            match sent {
                Ok(()) => done.await.unwrap_or(false),
                Err(_) => false,
            }
        }
    }

    pub fn unsubscribe(&self, run_id: &str) {
        let _ = self.tx.try_send(Command::Unsubscribe { run_id: run_id.to_string() });
    }

    /// The highest sequence number any instance published for `run_id` (0 when none was), or
    /// None when Redis cannot be asked.
    pub async fn high_water(&self, run_id: &str) -> Option<i64> {
        let (reply, answer) = oneshot::channel();
        self.tx.try_send(Command::HighWater { run_id: run_id.to_string(), reply }).ok()?;
        tokio::time::timeout(REQUEST_TIMEOUT * 2, answer).await.ok()?.ok()?
    }
}

/// Channel and key names.
struct Names {
    prefix: String,
}

impl Names {
    fn control(&self) -> String {
        format!("{}:instances", self.prefix)
    }
    fn run(&self, run_id: &str) -> String {
        format!("{}:run:{run_id}", self.prefix)
    }
    fn seq(&self, run_id: &str) -> String {
        format!("{}:seq:{run_id}", self.prefix)
    }
    /// The run a run channel is for.
    fn run_of<'a>(&self, channel: &'a str) -> Option<&'a str> {
        channel.strip_prefix(self.prefix.as_str())?.strip_prefix(":run:")
    }
}

struct Task {
    client: redis::Client,
    names: Names,
    instance: String,
    /// Where what arrives goes.
    inbound: mpsc::UnboundedSender<Inbound>,
    rx: mpsc::Receiver<Command>,
    lost: Arc<AtomicBool>,
    /// Run channels to be subscribed to (kept across reconnections).
    wanted: HashSet<String>,
    /// Cancel requests made while disconnected: sent once connected (if still recent), as the
    /// instance that received them already answered that the run is being stopped.
    held: Vec<(tokio::time::Instant, Control)>,
    url: String,
}

/// Why a connection ended.
enum Ended {
    /// Every handle is gone: the engine stopped.
    Stopped,
    Failed(String),
}

struct Connection {
    publisher: redis::aio::MultiplexedConnection,
    sink: redis::aio::PubSubSink,
    stream: redis::aio::PubSubStream,
}

impl Task {
    async fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        let mut connected_once = false;
        loop {
            match self.connect().await {
                Ok(conn) => {
                    if connected_once {
                        log::warn!("reconnected to Redis at {}", self.url);
                    } else {
                        log::info!(
                            "connected to Redis at {} (prefix {})",
                            self.url,
                            self.names.prefix
                        );
                    }
                    connected_once = true;
                    backoff = BACKOFF_MIN;
                    match self.serve(conn).await {
                        Ended::Stopped => return,
                        Ended::Failed(e) => {
                            self.lost.store(true, Ordering::SeqCst);
                            log::error!("lost the connection to Redis at {}: {e}", self.url)
                        }
                    }
                }
                Err(e) => log::error!(
                    "cannot reach Redis at {}: {e}; retrying in {} ms",
                    self.url,
                    backoff.as_millis()
                ),
            }
            if !self.wait_disconnected(backoff).await {
                return;
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    async fn connect(&mut self) -> Result<Connection, String> {
        let setup = async {
            let publisher = self.client.get_multiplexed_async_connection().await?;
            let (mut sink, stream) = self.client.get_async_pubsub().await?.split();
            let mut channels = vec![self.names.control()];
            channels.extend(self.wanted.iter().map(|r| self.names.run(r)));
            sink.subscribe(channels).await?;
            Ok::<_, redis::RedisError>(Connection { publisher, sink, stream })
        };
        let mut conn = match tokio::time::timeout(REQUEST_TIMEOUT, setup).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("timed out".into()),
        };
        // Frames may have been dropped while disconnected: say so, so followers catch up.
        let resync = self.lost.swap(false, Ordering::SeqCst);
        let hello = self.envelope(Control::Hello { resync });
        publish(&mut conn.publisher, redis::cmd("PUBLISH").arg(self.names.control()).arg(hello))
            .await?;
        let held: Vec<String> = (self.held.iter())
            .filter(|(at, _)| at.elapsed() < HOLD_CANCELS)
            .map(|(_, cancel)| self.envelope(cancel.clone()))
            .collect();
        for text in held {
            let cmd = redis::cmd("PUBLISH").arg(self.names.control()).arg(text).clone();
            publish(&mut conn.publisher, &cmd).await?;
        }
        self.held.clear();
        let _ = self.inbound.send(Inbound::Up);
        Ok(conn)
    }

    fn envelope(&self, msg: Control) -> String {
        let env = Envelope { from: self.instance.clone(), msg };
        serde_json::to_string(&env).unwrap_or_default()
    }

    /// Serves one connection until it fails or the engine stops.
    async fn serve(&mut self, mut conn: Connection) -> Ended {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                msg = conn.stream.next() => match msg {
                    Some(msg) => self.deliver(&msg),
                    None => return Ended::Failed("the subscription connection closed".into()),
                },
                cmd = self.rx.recv() => {
                    let Some(first) = cmd else { return Ended::Stopped };
                    let mut batch = vec![first];
                    while batch.len() < BATCH {
                        match self.rx.try_recv() {
                            Ok(c) => batch.push(c),
                            Err(_) => break,
                        }
                    }
                    if let Err(e) = self.execute(batch, &mut conn).await {
                        return Ended::Failed(e);
                    }
                }
                _ = ping.tick() => {
                    let pong = tokio::time::timeout(REQUEST_TIMEOUT, conn.sink.ping::<String>());
                    match pong.await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return Ended::Failed(e.to_string()),
                        Err(_) => return Ended::Failed("no answer to a ping".into()),
                    }
                }
            }
        }
    }

    /// Runs a batch of commands: publications go out in one pipeline, in order; the
    /// highest sequence number of each run is written before its frames, so a number is
    /// never seen on the bus without being recorded.
    async fn execute(&mut self, batch: Vec<Command>, conn: &mut Connection) -> Result<(), String> {
        let mut pipe = redis::pipe();
        let mut publishing = false;
        for cmd in batch {
            match cmd {
                Command::Frames { run_id, frames } => {
                    let Some(top) = frames.iter().map(|f| f.seq).max() else { continue };
                    pipe.cmd("SET")
                        .arg(self.names.seq(&run_id))
                        .arg(top)
                        .arg("EX")
                        .arg(SEQ_TTL_SECS)
                        .ignore();
                    let channel = self.names.run(&run_id);
                    for f in frames.iter() {
                        pipe.cmd("PUBLISH").arg(&channel).arg(f.json.as_bytes().as_ref()).ignore();
                    }
                    publishing = true;
                }
                Command::Control(msg) => {
                    pipe.cmd("PUBLISH").arg(self.names.control()).arg(self.envelope(msg)).ignore();
                    publishing = true;
                }
                Command::Subscribe { run_id, ack } => {
                    let channel = self.names.run(&run_id);
                    if !self.wanted.contains(&run_id) {
                        let sub =
                            tokio::time::timeout(REQUEST_TIMEOUT, conn.sink.subscribe(&channel));
                        match sub.await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => return Err(e.to_string()),
                            Err(_) => return Err("no answer to a subscription".into()),
                        }
                        self.wanted.insert(run_id);
                    }
                    let _ = ack.send(true);
                }
                Command::Unsubscribe { run_id } => {
                    if self.wanted.remove(&run_id) {
                        let channel = self.names.run(&run_id);
                        let unsub =
                            tokio::time::timeout(REQUEST_TIMEOUT, conn.sink.unsubscribe(&channel));
                        match unsub.await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => return Err(e.to_string()),
                            Err(_) => return Err("no answer to an unsubscription".into()),
                        }
                    }
                }
                Command::HighWater { run_id, reply } => {
                    let get = redis::cmd("GET").arg(self.names.seq(&run_id)).clone();
                    let got = tokio::time::timeout(
                        REQUEST_TIMEOUT,
                        get.query_async::<Option<i64>>(&mut conn.publisher),
                    )
                    .await;
                    match got {
                        Ok(Ok(v)) => {
                            let _ = reply.send(Some(v.unwrap_or(0)));
                        }
                        Ok(Err(e)) => return Err(e.to_string()),
                        Err(_) => return Err("no answer to GET".into()),
                    }
                }
            }
        }
        if publishing {
            let sent = tokio::time::timeout(REQUEST_TIMEOUT, pipe.exec_async(&mut conn.publisher));
            match sent.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("no answer to a publication".into()),
            }
        }
        Ok(())
    }

    /// Hands on what arrived.
    fn deliver(&self, msg: &redis::Msg) {
        let channel = msg.get_channel_name();
        let Ok(text) = std::str::from_utf8(msg.get_payload_bytes()) else { return };
        if let Some(run_id) = self.names.run_of(channel) {
            match frame_of(run_id, text) {
                Some(frame) => {
                    let _ = self.inbound.send(Inbound::Frames {
                        run_id: run_id.to_string(),
                        frames: vec![Arc::new(frame)],
                    });
                }
                None => log::warn!("bus: an unreadable frame on {channel}"),
            }
        } else if channel == self.names.control() {
            match serde_json::from_str::<Envelope>(text) {
                Ok(env) if env.from == self.instance => {}
                Ok(env) => {
                    let _ = self.inbound.send(Inbound::Control { from: env.from, msg: env.msg });
                }
                Err(e) => log::warn!("bus: an unreadable control message ({e})"),
            }
        }
    }

    /// Between connections: keeps the queue moving so nothing waits on Redis, dropping
    /// publications (noted in `lost`) and remembering subscriptions. False when the engine
    /// stopped.
    async fn wait_disconnected(&mut self, pause: Duration) -> bool {
        let until = tokio::time::Instant::now() + pause;
        loop {
            tokio::select! {
                cmd = self.rx.recv() => match cmd {
                    None => return false,
                    Some(Command::Control(cancel @ Control::Cancel { .. })) => {
                        self.held.push((tokio::time::Instant::now(), cancel));
                    }
                    Some(Command::Frames { .. } | Command::Control(_)) => {
                        self.lost.store(true, Ordering::SeqCst);
                    }
                    Some(Command::Subscribe { run_id, ack }) => {
                        self.wanted.insert(run_id);
                        let _ = ack.send(false);
                    }
                    Some(Command::Unsubscribe { run_id }) => {
                        self.wanted.remove(&run_id);
                    }
                    Some(Command::HighWater { reply, .. }) => {
                        let _ = reply.send(None);
                    }
                },
                _ = tokio::time::sleep_until(until) => return true,
            }
        }
    }
}

async fn publish(
    conn: &mut redis::aio::MultiplexedConnection,
    cmd: &redis::Cmd,
) -> Result<(), String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, cmd.exec_async(conn)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// Rebuilds a frame from its envelope as published, keeping the exact text so every
/// instance sends the same bytes.
fn frame_of(run_id: &str, text: &str) -> Option<EventFrame> {
    #[derive(Deserialize)]
    struct Head {
        run: String,
        seq: i64,
        event: String,
    }
    let head: Head = serde_json::from_str(text).ok()?;
    if head.run != run_id {
        return None;
    }
    Some(EventFrame {
        run: head.run,
        seq: head.seq,
        event: head.event,
        json: text.into(),
        mark: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_carry_their_sender_and_kind() {
        let env = Envelope {
            from: "i1".into(),
            msg: Control::Cancel { run: "r".into(), reason: "a REST request".into() },
        };
        let text = serde_json::to_string(&env).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({ "from": "i1", "kind": "cancel", "run": "r", "reason": "a REST request" })
        );
        let back: Envelope = serde_json::from_str(&text).unwrap();
        assert_eq!((back.from.as_str(), back.msg), ("i1", env.msg));
    }

    #[test]
    fn frames_keep_their_exact_text_and_must_match_their_channel() {
        let f = EventFrame::new("r1", 7, "stage1_start", serde_json::json!({"a": 1}));
        let back = frame_of("r1", &f.json).unwrap();
        assert_eq!((back.seq, back.event.as_str(), &*back.json), (7, "stage1_start", &*f.json));
        assert!(frame_of("r2", &f.json).is_none(), "a frame of another run is refused");
        assert!(frame_of("r1", "not json").is_none());
    }

    #[test]
    fn names_are_prefixed() {
        let n = Names { prefix: "t1".into() };
        assert_eq!(n.run("abc"), "t1:run:abc");
        assert_eq!(n.run_of("t1:run:abc"), Some("abc"));
        assert_eq!(n.run_of("t2:run:abc"), None);
        assert_eq!(n.run_of("t1:instances"), None);
    }
}
