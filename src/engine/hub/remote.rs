//! Other instances' runs, as their summaries come over the bus: listed on the dashboards here,
//! counted against their owners' limits, dropped when their instance falls silent; and cancel
//! requests for runs no instance executes, kept in case this one takes the run over. Plain
//! data: the Hub actor owns one and hands it what the bus brings.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::engine::summary::RunSummary;
use crate::store::RunStatus;

/// Another instance's run, as its dashboard shows it.
struct RemoteRun {
    summary: RunSummary,
    instance: String,
    ended_at: Option<Instant>,
}

#[derive(Default)]
pub struct RemoteRuns {
    runs: HashMap<String, RemoteRun>,
    /// When each other instance was last heard from.
    heard: HashMap<String, Instant>,
    /// Cancel requests for runs not executed here, in case this instance takes one over.
    pending_cancels: HashMap<String, (String, Instant)>,
}

impl RemoteRuns {
    pub fn heard_from(&mut self, instance: &str) {
        self.heard.insert(instance.to_string(), Instant::now());
    }

    /// `instance`'s summary of a run it executes.
    pub fn update(&mut self, instance: &str, summary: RunSummary) {
        let ended_at = summary.status.is_over().then(Instant::now);
        let run = RemoteRun { summary, instance: instance.to_string(), ended_at };
        self.runs.insert(run.summary.id.clone(), run);
    }

    /// `instance` executes exactly `running` of the runs it had said it executes.
    pub fn running(&mut self, instance: &str, running: &[String]) {
        let running: HashSet<&str> = running.iter().map(String::as_str).collect();
        self.runs.retain(|id, r| {
            r.instance != instance || r.ended_at.is_some() || running.contains(id.as_str())
        });
    }

    /// The run is executed here now.
    pub fn remove(&mut self, run_id: &str) {
        self.runs.remove(run_id);
    }

    pub fn summaries(&self) -> impl Iterator<Item = &RunSummary> {
        self.runs.values().map(|r| &r.summary)
    }

    /// A cancel for a run no instance here executes, kept for whoever takes it over.
    pub fn keep_cancel(&mut self, run_id: &str, reason: String) {
        self.pending_cancels.insert(run_id.to_string(), (reason, Instant::now()));
    }

    /// The reason of a cancel kept for this run, if any (it is forgotten).
    pub fn take_cancel(&mut self, run_id: &str) -> Option<String> {
        self.pending_cancels.remove(run_id).map(|(reason, _)| reason)
    }

    /// Drops runs that ended a `retention` ago or whose instance has been `silent` too long,
    /// and cancels kept three times that long.
    pub fn tidy(&mut self, retention: Duration, silent: Duration) {
        let heard = &self.heard;
        self.runs.retain(|_, r| match r.ended_at {
            Some(t) => t.elapsed() < retention,
            None => heard.get(&r.instance).is_some_and(|t| t.elapsed() < silent),
        });
        self.heard.retain(|_, t| t.elapsed() < retention.max(silent));
        self.pending_cancels.retain(|_, (_, t)| t.elapsed() < silent * 3);
    }
}

/// Whether a summary is of a running run of `owner`.
pub fn running_of(summary: &RunSummary, owner: &str) -> bool {
    summary.status == RunStatus::Running && summary.owner.as_deref() == Some(owner)
}
