//! Sending a run's events to its watchers: one message per step to each, the tokens of a
//! watcher that cannot keep up dropped for it alone, and a watcher whose buffer is full on a
//! durable event told to resume from the store (so one slow reader never holds up the run or
//! the others). Plain functions over the watchers' channels: no actor is involved.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc::error::TrySendError;

use crate::engine::events::{after, is_transient, EventBatch, EventFrame, Frame, FrameSender};
use crate::metrics::{self, Feed};

/// Identifies a watcher's channel (a WebSocket session, an SSE stream, the CLI).
pub type WatcherId = u64;

/// How many events of a replay go in one message.
pub const REPLAY_BATCH: usize = 256;

/// A subscribed watcher and the last sequence number it was sent.
pub struct Watching {
    pub sink: FrameSender,
    pub last_seq: i64,
}

/// The watchers of one run.
pub type Watchers = HashMap<WatcherId, Watching>;

/// Tells a slow watcher to resume, once it has read what it already has (the send waits for
/// room, off the Hub's mailbox, on the same thread: a task of the local set the Hub runs in).
pub fn send_lagged(sink: FrameSender, frame: Frame) {
    tokio::task::spawn_local(async move {
        let _ = sink.send(frame).await;
    });
}

/// What offering a batch to a watcher did.
enum Offer {
    Sent,
    /// The buffer is full and the batch held only tokens: dropped for this watcher only.
    Dropped(usize),
    /// The buffer is full on a durable event: the watcher must resume later.
    Lagged,
    Closed,
}

fn offer(sink: &FrameSender, batch: EventBatch) -> Offer {
    match sink.try_send(Frame::Events(batch)) {
        Ok(()) => Offer::Sent,
        Err(TrySendError::Full(Frame::Events(b))) if b.iter().all(|f| is_transient(&f.event)) => {
            Offer::Dropped(b.len())
        }
        Err(TrySendError::Full(_)) => Offer::Lagged,
        Err(TrySendError::Closed(_)) => Offer::Closed,
    }
}

/// The events of `batch` after `last_seq`: the batch itself when the watcher has none of it
/// (the usual case: every watcher shares one allocation), else a copy of its tail.
fn unsent(batch: &EventBatch, last_seq: i64) -> Option<EventBatch> {
    let rest = after(batch, last_seq);
    if rest.is_empty() {
        None
    } else if rest.len() == batch.len() {
        Some(batch.clone())
    } else {
        Some(rest.into())
    }
}

/// Sends every watcher of a run, in one message, the events of `batch` it has not had,
/// dropping the watchers that are gone or too slow (told to resume).
pub fn fan_out(watchers: &mut Watchers, run_id: &str, batch: &EventBatch) {
    let Some(last) = batch.last().map(|f| f.seq) else { return };
    watchers.retain(|_, w| {
        let Some(unsent) = unsent(batch, w.last_seq) else { return true };
        match offer(&w.sink, unsent) {
            Offer::Sent => {
                w.last_seq = last;
                true
            }
            Offer::Dropped(n) => {
                metrics::global().tokens_dropped(n);
                true
            }
            Offer::Lagged => {
                metrics::global().watcher_lagged(Feed::Run);
                send_lagged(
                    w.sink.clone(),
                    Frame::Lagged { run: run_id.to_string(), since: w.last_seq },
                );
                false
            }
            Offer::Closed => false,
        }
    });
}

/// Replays `log` after `since` to a watcher and subscribes it unless `ended`, in one step so
/// no event can fall between the two. The replay goes out in pieces of [`REPLAY_BATCH`]
/// events; one that finds the watcher's buffer full stops there, and the watcher is told to
/// resume where it stopped. Answers whether that happened.
pub fn replay_and_subscribe(
    log: &[Arc<EventFrame>],
    ended: bool,
    watchers: &mut Watchers,
    run_id: &str,
    since: i64,
    watcher: WatcherId,
    sink: FrameSender,
) -> bool {
    let mut last_seq = since;
    for piece in after(log, since).chunks(REPLAY_BATCH) {
        match sink.try_send(Frame::Events(piece.into())) {
            Ok(()) => last_seq = piece.last().map_or(last_seq, |f| f.seq),
            Err(TrySendError::Full(_)) => {
                metrics::global().watcher_lagged(Feed::Run);
                send_lagged(sink, Frame::Lagged { run: run_id.to_string(), since: last_seq });
                return true;
            }
            Err(TrySendError::Closed(_)) => return false,
        }
    }
    if !ended {
        watchers.insert(watcher, Watching { sink, last_seq });
    }
    false
}
