//! Limits on what one WebSocket client may send: the size of a frame ([`FrameGuard`]) and the
//! rate of messages ([`Flood`]), both per socket, so a misbehaving client never slows or
//! closes anyone else's; and how many sockets one address may hold open without signing in
//! ([`Unauthenticated`]). None touches the actor: the session asks and acts on the answer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use actix_web::error::PayloadError;
use bytes::Bytes;
use futures_util::Stream;

/// The largest WebSocket frame a client may send, the same as the largest REST body, so any
/// request `POST /api/deliberations` accepts is also accepted in a `start` message.
pub const MAX_FRAME_BYTES: usize = 1 << 20;

/// Messages per second a socket may send, sustained.
pub const MESSAGES_PER_SECOND: f64 = 50.0;
/// Messages a socket may send at once after a quiet spell.
pub const MESSAGE_BURST: f64 = 100.0;
/// Messages dropped in one flood after which the socket is closed (policy violation).
pub const CLOSE_AFTER_DROPPED: u32 = 400;

/// Watches the raw bytes from the client and fails the stream at the *header* of a frame
/// longer than `limit`. The codec's own size check only fires once the whole frame has been
/// buffered, so without this a client declaring a gigabyte frame would make the server hold
/// a gigabyte. Only header bytes are copied; the payload passes through untouched.
pub struct FrameGuard<S> {
    inner: S,
    limit: u64,
    state: GuardState,
    /// Set when a frame was too long: the session tells the client why the socket closes.
    tripped: Arc<AtomicBool>,
    done: bool,
}

enum GuardState {
    /// Reading a frame header: the bytes seen so far (at most 14).
    Header { buf: [u8; 14], have: usize },
    /// Skipping a frame's payload.
    Payload { remaining: u64 },
}

impl<S> FrameGuard<S> {
    pub fn new(inner: S, limit: usize, tripped: Arc<AtomicBool>) -> Self {
        FrameGuard {
            inner,
            limit: limit as u64,
            state: GuardState::Header { buf: [0; 14], have: 0 },
            tripped,
            done: false,
        }
    }

    /// Follows the frame boundaries through `chunk`; false when a frame is too long.
    fn observe(&mut self, mut chunk: &[u8]) -> bool {
        while !chunk.is_empty() {
            match &mut self.state {
                GuardState::Payload { remaining } => {
                    let n = (*remaining).min(chunk.len() as u64);
                    *remaining -= n;
                    chunk = &chunk[n as usize..];
                    if *remaining == 0 {
                        self.state = GuardState::Header { buf: [0; 14], have: 0 };
                    }
                }
                GuardState::Header { buf, have } => {
                    buf[*have] = chunk[0];
                    *have += 1;
                    chunk = &chunk[1..];
                    let Some(len) = frame_length(&buf[..*have]) else { continue };
                    if len > self.limit {
                        return false;
                    }
                    self.state = if len == 0 {
                        GuardState::Header { buf: [0; 14], have: 0 }
                    } else {
                        GuardState::Payload { remaining: len }
                    };
                }
            }
        }
        true
    }
}

/// The payload length of a frame whose header is `h`, once `h` holds the whole header
/// (2 bytes, the 2- or 8-byte extended length, the 4-byte mask when masked).
fn frame_length(h: &[u8]) -> Option<u64> {
    if h.len() < 2 {
        return None;
    }
    let masked = h[1] & 0x80 != 0;
    let (ext, len7) = match h[1] & 0x7f {
        126 => (2, None),
        127 => (8, None),
        n => (0, Some(u64::from(n))),
    };
    let header = 2 + ext + if masked { 4 } else { 0 };
    if h.len() < header {
        return None;
    }
    Some(len7.unwrap_or_else(|| h[2..2 + ext].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))))
}

impl<S> Stream for FrameGuard<S>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin,
{
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.observe(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.done = true;
                    self.tripped.store(true, Ordering::Relaxed);
                    Poll::Ready(Some(Err(PayloadError::Overflow)))
                }
            }
            other => other,
        }
    }
}

/// What to do with a message from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Handle it.
    Yes,
    /// Drop it and tell the client, once per flood, that it sends too much.
    DropAndWarn,
    /// Drop it silently (the client was already told).
    Drop,
    /// The flood goes on: close the socket.
    Close,
}

/// A token bucket per socket: `MESSAGES_PER_SECOND` sustained, bursts of `MESSAGE_BURST`. A
/// flood lasts until the bucket has filled up again; the client is warned at its first dropped
/// message and the socket closed when it has dropped `CLOSE_AFTER_DROPPED`.
#[derive(Debug, Clone)]
pub struct Flood {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    dropped: u32,
    warned: bool,
}

impl Flood {
    pub fn new(now: Instant) -> Self {
        Flood::with(MESSAGES_PER_SECOND, MESSAGE_BURST, now)
    }

    pub fn with(rate: f64, burst: f64, now: Instant) -> Self {
        Flood { rate, burst, tokens: burst, last: now, dropped: 0, warned: false }
    }

    /// Accounts for one message arriving at `now`.
    pub fn admit(&mut self, now: Instant) -> Admit {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= self.burst {
            // The client has been quiet long enough to refill: any flood is over.
            self.dropped = 0;
            self.warned = false;
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Admit::Yes;
        }
        self.dropped = self.dropped.saturating_add(1);
        if self.dropped >= CLOSE_AFTER_DROPPED {
            Admit::Close
        } else if !self.warned {
            self.warned = true;
            Admit::DropAndWarn
        } else {
            Admit::Drop
        }
    }
}

/// The sockets open and not yet signed in, per client address: at most `cap` each, so one
/// address cannot hold the server's sockets open without an account (each is also closed at
/// the sign-in deadline). A place is held by a [`SignInPlace`] and given back when it drops.
#[derive(Debug)]
pub struct Unauthenticated {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Unauthenticated {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Unauthenticated { cap, open: Mutex::new(HashMap::new()) })
    }

    /// A place for one more socket from `addr` that has yet to sign in; None when `addr`
    /// already holds `cap`.
    pub fn hold(self: &Arc<Self>, addr: IpAddr) -> Option<SignInPlace> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(addr).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(SignInPlace { owner: self.clone(), addr })
    }

    /// Sockets one address may hold open without signing in.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Sockets from `addr` not yet signed in.
    pub fn count(&self, addr: IpAddr) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).get(&addr).copied().unwrap_or(0)
    }
}

/// One socket's place among its address's unauthenticated ones, until it signs in or closes.
#[derive(Debug)]
pub struct SignInPlace {
    owner: Arc<Unauthenticated>,
    addr: IpAddr,
}

impl Drop for SignInPlace {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.addr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;

    use super::*;

    fn frame(len: usize, masked: bool) -> Vec<u8> {
        let mut f = vec![0x81];
        let m = if masked { 0x80 } else { 0 };
        if len < 126 {
            f.push(m | len as u8);
        } else if len <= 0xffff {
            f.push(m | 126);
            f.extend((len as u16).to_be_bytes());
        } else {
            f.push(m | 127);
            f.extend((len as u64).to_be_bytes());
        }
        if masked {
            f.extend([1, 2, 3, 4]);
        }
        f.extend(std::iter::repeat_n(b'x', len));
        f
    }

    async fn run(chunks: Vec<Vec<u8>>, limit: usize) -> (usize, bool) {
        let tripped = Arc::new(AtomicBool::new(false));
        let inner = futures_util::stream::iter(
            chunks.into_iter().map(|c| Ok::<_, PayloadError>(Bytes::from(c))),
        );
        let guard = FrameGuard::new(inner, limit, tripped.clone());
        let items: Vec<_> = guard.collect().await;
        (items.iter().filter(|i| i.is_ok()).count(), tripped.load(Ordering::Relaxed))
    }

    #[actix_web::test]
    async fn frames_within_the_limit_pass_in_any_chunking() {
        let mut bytes = Vec::new();
        for len in [0, 5, 125, 126, 300, 65_535, 65_536, 70_000] {
            bytes.extend(frame(len, true));
            bytes.extend(frame(len, false));
        }
        for size in [1, 2, 3, 7, 13, 1000, bytes.len()] {
            let chunks: Vec<Vec<u8>> = bytes.chunks(size).map(<[u8]>::to_vec).collect();
            let n = chunks.len();
            assert_eq!(run(chunks, 70_000).await, (n, false), "chunks of {size}");
        }
    }

    #[actix_web::test]
    async fn a_long_frame_fails_at_its_header() {
        let mut bytes = frame(10, true);
        // Only the header of the long frame: it is refused before its payload arrives.
        bytes.extend(&frame(2_000_000, true)[..14]);
        for size in [1, 5, bytes.len()] {
            let chunks: Vec<Vec<u8>> = bytes.chunks(size).map(<[u8]>::to_vec).collect();
            let (ok, tripped) = run(chunks, 1 << 20).await;
            assert!(tripped, "chunks of {size}");
            assert!(ok < bytes.len().div_ceil(size));
        }
        let huge = [0x81u8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4];
        assert!(run(vec![huge.to_vec()], 1 << 20).await.1);
    }

    #[test]
    fn a_burst_passes_a_flood_is_warned_once_then_closed() {
        let t0 = Instant::now();
        let mut f = Flood::with(50.0, 100.0, t0);
        assert!((0..100).all(|_| f.admit(t0) == Admit::Yes));
        assert_eq!(f.admit(t0), Admit::DropAndWarn);
        for _ in 2..CLOSE_AFTER_DROPPED {
            assert_eq!(f.admit(t0), Admit::Drop);
        }
        assert_eq!(f.admit(t0), Admit::Close);
        // A quiet spell refills the bucket and forgives the flood.
        let later = t0 + Duration::from_secs(2);
        assert_eq!(f.admit(later), Admit::Yes);
        assert!((0..99).all(|_| f.admit(later) == Admit::Yes));
        assert_eq!(f.admit(later), Admit::DropAndWarn);
    }

    #[test]
    fn each_address_holds_at_most_its_cap_of_unauthenticated_sockets() {
        let gate = Unauthenticated::new(2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = gate.hold(a).unwrap();
        let _second = gate.hold(a).unwrap();
        assert!(gate.hold(a).is_none(), "a third from one address");
        let _other = gate.hold(b).expect("another address has places of its own");
        drop(first);
        assert_eq!(gate.count(a), 1, "a place comes back when its socket signs in or closes");
        assert!(gate.hold(a).is_some());
    }

    #[test]
    fn a_steady_rate_within_the_limit_is_never_dropped() {
        let t0 = Instant::now();
        let mut f = Flood::with(50.0, 100.0, t0);
        for i in 0..10_000u64 {
            assert_eq!(f.admit(t0 + Duration::from_millis(i * 21)), Admit::Yes);
        }
    }
}
