//! The dashboards watching this instance: each gets the live list once, then every change of
//! a run its viewer may see; one that cannot keep up is told to start over. Plain data: the
//! Hub actor owns one.

use std::collections::HashMap;

use tokio::sync::mpsc::error::TrySendError;

use super::fanout::{send_lagged, WatcherId};
use crate::engine::access::Viewer;
use crate::engine::events::{Frame, FrameSender};
use crate::engine::summary::RunSummary;
use crate::metrics::{self, Feed};

#[derive(Default)]
pub struct Dashboards {
    sinks: HashMap<WatcherId, (FrameSender, Viewer)>,
}

impl Dashboards {
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// Sends the list `runs` (what the viewer may see) and subscribes the dashboard to changes.
    pub fn subscribe(
        &mut self,
        watcher: WatcherId,
        sink: FrameSender,
        viewer: Viewer,
        runs: &[RunSummary],
    ) {
        let text = serde_json::json!({ "type": "dashboard", "runs": runs }).to_string();
        match sink.try_send(Frame::Dashboard(text.into())) {
            Ok(()) => {
                self.sinks.insert(watcher, (sink, viewer));
            }
            Err(TrySendError::Full(_)) => {
                metrics::global().watcher_lagged(Feed::Dashboard);
                send_lagged(sink, Frame::DashboardLagged)
            }
            Err(TrySendError::Closed(_)) => {}
        }
    }

    /// A run changed: every dashboard whose viewer may see it is told.
    pub fn update(&mut self, summary: &RunSummary) {
        if self.sinks.is_empty() {
            return;
        }
        let text = serde_json::json!({ "type": "dashboard_update", "run": summary }).to_string();
        let frame = Frame::Dashboard(text.into());
        self.sinks.retain(|_, (sink, viewer)| {
            if !viewer.can_see(summary.owner.as_deref(), summary.visibility) {
                return true;
            }
            match sink.try_send(frame.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    metrics::global().watcher_lagged(Feed::Dashboard);
                    send_lagged(sink.clone(), Frame::DashboardLagged);
                    false
                }
                Err(TrySendError::Closed(_)) => false,
            }
        });
    }

    pub fn remove(&mut self, watcher: WatcherId) {
        self.sinks.remove(&watcher);
    }
}
