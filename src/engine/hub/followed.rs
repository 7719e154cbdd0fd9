//! Runs watched here that no actor here executes: another instance runs them (their frames
//! come over the bus), or their process died and they wait to be resumed. A watcher reads the
//! store first and then gets the rest from here; frames lost on the way (a jump in their
//! numbers, a bus that reconnected, a store that stays ahead) send the watchers back to the
//! store. Plain data: the Hub actor owns one and hands it messages.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fanout::{fan_out, replay_and_subscribe, send_lagged, WatcherId, Watchers, Watching};
use crate::engine::events::{EventFrame, Frame, FrameSender};

/// How long a followed run nobody watches any more stays subscribed (a watcher that
/// reconnects at once finds it still there).
pub const FOLLOW_LINGER: Duration = Duration::from_secs(10);

struct Followed {
    /// Frames received since this instance subscribed (or since the last gap): a watcher that
    /// read the store after the subscription finds here every event after what it read.
    log: Vec<Arc<EventFrame>>,
    watchers: Watchers,
    /// Watches between their follow and their park or unfollow.
    pending: usize,
    /// The last frame received (frames come numbered in a row: see [`Followed::receive`]).
    last_seq: i64,
    /// The highest number known here: received, or read from the store by a watcher.
    known: i64,
    /// Changes when frames were lost: a watch that read the store before cannot trust `log`.
    epoch: u64,
    /// The store's last sequence number at the previous verify, when it was ahead.
    suspect: Option<i64>,
    ended: bool,
    /// Since when nobody watches or waits (the entry goes after [`FOLLOW_LINGER`]).
    idle_since: Option<Instant>,
}

impl Followed {
    fn new(epoch: u64) -> Self {
        Followed {
            log: Vec::new(),
            watchers: Watchers::new(),
            pending: 0,
            last_seq: 0,
            known: 0,
            epoch,
            suspect: None,
            ended: false,
            idle_since: None,
        }
    }

    fn touch(&mut self) {
        self.idle_since = if self.watchers.is_empty() && self.pending == 0 {
            Some(self.idle_since.unwrap_or_else(Instant::now))
        } else {
            None
        };
    }

    /// Frames were lost: every watcher catches up from the store (it is told to watch again
    /// from the last event it got) and what was received so far is no longer a whole log.
    fn resync(&mut self, run_id: &str, gaps: &mut u64) {
        for (_, w) in self.watchers.drain() {
            send_lagged(w.sink, Frame::Lagged { run: run_id.to_string(), since: w.last_seq });
        }
        *gaps += 1;
        self.epoch = *gaps;
        self.log.clear();
        self.last_seq = 0;
        self.known = 0;
        self.suspect = None;
        self.touch();
    }

    /// Takes one frame as the next of the run.
    fn receive(&mut self, run_id: &str, frame: Arc<EventFrame>, gaps: &mut u64) {
        if self.ended || frame.seq <= self.last_seq {
            return;
        }
        // One publisher numbers every frame of a run in a row, tokens included (a run taken
        // over continues after the highest number published): a jump means frames were lost.
        if self.last_seq > 0 && frame.seq > self.last_seq + 1 {
            log::warn!(
                "run {run_id}: events {} to {} never came over the bus; its watchers here catch \
                 up from the database",
                self.last_seq + 1,
                frame.seq - 1
            );
            self.resync(run_id, gaps);
        }
        self.last_seq = frame.seq;
        self.known = self.known.max(frame.seq);
        fan_out(&mut self.watchers, run_id, &Arc::from([frame.clone()]));
        let terminal = frame.is_terminal();
        self.log.push(frame);
        if terminal {
            self.ended = true;
            // Closing the channels tells stream-based watchers (SSE) the run is over.
            self.watchers.clear();
            self.touch();
        }
    }
}

#[derive(Default)]
pub struct FollowedRuns {
    runs: HashMap<String, Followed>,
    /// Gaps seen so far (numbers each run's epoch).
    gaps: u64,
}

impl FollowedRuns {
    fn entry(&mut self, run_id: &str) -> &mut Followed {
        let gaps = self.gaps;
        self.runs.entry(run_id.to_string()).or_insert_with(|| Followed::new(gaps))
    }

    /// A watch starts following a run (before it reads the store); answers the epoch its
    /// [`FollowedRuns::park`] brings back.
    pub fn follow(&mut self, run_id: &str) -> u64 {
        let entry = self.entry(run_id);
        entry.pending += 1;
        entry.touch();
        entry.epoch
    }

    /// A follow that ends without a park (the run was over, the watch failed, or the run is
    /// executed here now).
    pub fn unfollow(&mut self, run_id: &str) {
        if let Some(f) = self.runs.get_mut(run_id) {
            f.pending = f.pending.saturating_sub(1);
            f.touch();
        }
    }

    /// A watcher that read the store up to `since` gets the rest from here; with the epoch of
    /// its follow (None without a bus) it is sent back to the store if frames were lost since.
    pub fn park(
        &mut self,
        run_id: &str,
        since: i64,
        epoch: Option<u64>,
        watcher: WatcherId,
        sink: FrameSender,
    ) {
        let entry = self.entry(run_id);
        if epoch.is_some() {
            entry.pending = entry.pending.saturating_sub(1);
        }
        if epoch.is_some_and(|e| e != entry.epoch) {
            // Frames were lost while this watcher read the store: read it again.
            send_lagged(sink, Frame::Lagged { run: run_id.to_string(), since });
        } else {
            entry.known = entry.known.max(since);
            replay_and_subscribe(
                &entry.log,
                entry.ended,
                &mut entry.watchers,
                run_id,
                since,
                watcher,
                sink,
            );
        }
        entry.touch();
    }

    /// The run is executed here now: its watchers, each with the last number it was sent.
    pub fn take_watchers(&mut self, run_id: &str) -> Option<Vec<(WatcherId, Watching)>> {
        self.runs.remove(run_id).map(|f| f.watchers.into_iter().collect())
    }

    /// Frames of a followed run (ignored for a run nobody here follows).
    pub fn receive(&mut self, run_id: &str, frames: Vec<Arc<EventFrame>>) {
        let Some(entry) = self.runs.get_mut(run_id) else { return };
        for frame in frames {
            entry.receive(run_id, frame, &mut self.gaps);
        }
    }

    /// The run will not be resumed: its watchers get its terminal event and go.
    pub fn abandon(&mut self, run_id: &str, terminal: Arc<EventFrame>) {
        let gaps = self.gaps;
        let entry = self.runs.entry(run_id.to_string()).or_insert_with(|| Followed::new(gaps));
        // Its last event before the terminal one was stored, not necessarily received: no gap.
        entry.last_seq = entry.last_seq.max(terminal.seq - 1);
        entry.receive(run_id, terminal, &mut self.gaps);
    }

    /// Frames may have been lost for every run (the bus reconnected).
    pub fn resync_all(&mut self) {
        let gaps = &mut self.gaps;
        for (run_id, f) in &mut self.runs {
            if !f.ended {
                f.resync(run_id, gaps);
            }
        }
    }

    /// The runs followed for someone, with the highest number known of each.
    pub fn watched(&self) -> Vec<(String, i64)> {
        self.runs
            .iter()
            .filter(|(_, f)| !f.ended && (!f.watchers.is_empty() || f.pending > 0))
            .map(|(id, f)| (id.clone(), f.known))
            .collect()
    }

    /// What the store says of a followed run: if it stays ahead of what the bus brought for a
    /// whole check period, frames were lost, and the watchers catch up from the store.
    pub fn verify(&mut self, run_id: &str, stored_seq: i64) {
        let Some(f) = self.runs.get_mut(run_id) else { return };
        if f.ended || stored_seq <= f.known {
            f.suspect = None;
            return;
        }
        // The store is ahead: normal for a moment (events are published once stored), not
        // for a whole check period.
        match f.suspect {
            Some(earlier) if f.known < earlier => {
                log::warn!(
                    "run {run_id}: the bus brought nothing after event {} though event {earlier} \
                     was stored a while ago; its watchers here catch up from the database",
                    f.known
                );
                f.resync(run_id, &mut self.gaps);
            }
            _ => f.suspect = Some(stored_seq),
        }
    }

    pub fn unwatch(&mut self, run_id: &str, watcher: WatcherId) {
        if let Some(f) = self.runs.get_mut(run_id) {
            f.watchers.remove(&watcher);
            f.touch();
        }
    }

    pub fn disconnect(&mut self, watcher: WatcherId) {
        for f in self.runs.values_mut() {
            if f.watchers.remove(&watcher).is_some() {
                f.touch();
            }
        }
    }

    /// Drops the runs nobody watched for [`FOLLOW_LINGER`]; `gone` is told each one.
    pub fn tidy(&mut self, mut gone: impl FnMut(&str)) {
        self.runs.retain(|run_id, f| {
            let keep = f.idle_since.is_none_or(|t| t.elapsed() < FOLLOW_LINGER);
            if !keep {
                gone(run_id);
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::events::Frame;
    use tokio::sync::mpsc;

    fn frame(seq: i64, event: &str) -> Arc<EventFrame> {
        Arc::new(EventFrame::new("r", seq, event, serde_json::json!({})))
    }

    /// No actor: frames of a followed run reach its watcher once each after what it read;
    /// a jump in their numbers sends it back to the store and starts a new epoch.
    #[tokio::test]
    async fn a_gap_in_the_frames_sends_watchers_back_to_the_store_without_an_actor() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let mut followed = FollowedRuns::default();
                let epoch = followed.follow("r");
                followed.receive("r", vec![frame(3, "call_start")]);
                let (tx, mut rx) = mpsc::channel(16);
                followed.park("r", 2, Some(epoch), 1, tx);
                followed.receive("r", vec![frame(3, "call_start"), frame(4, "token")]);
                let mut seqs = Vec::new();
                while let Ok(Frame::Events(b)) = rx.try_recv() {
                    seqs.extend(b.iter().map(|f| f.seq));
                }
                assert_eq!(seqs, [3, 4], "after what it read, once each");
                assert_eq!(followed.watched(), [("r".to_string(), 4)]);
                followed.receive("r", vec![frame(6, "token")]);
                let lagged = rx.recv().await;
                assert!(matches!(lagged, Some(Frame::Lagged { since: 4, .. })), "{lagged:?}");
                assert_eq!(followed.follow("r"), epoch + 1, "a new epoch");
            })
            .await;
    }
}
