//! A run started with a spending guard (what keeps `conclave eval` within its budget), on the
//! in-process engine with sim models: every call is asked before it starts and settled when it
//! ends, a call told to wait starts later, a refused panel call cancels the run saying why, a
//! refused title call is dropped and the run still answers, and a retry the guard will not
//! cover stops the run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use conclave::engine::spend::{Admit, CallSize, SpendGuard, Used};
use conclave::engine::Viewer;
use conclave::eval::runner::follow;
use conclave::store::RunStatus;

use crate::helpers::{spawn_with, Options};

/// A guard that records what it is asked and answers by rule.
#[derive(Default)]
struct Recorder {
    /// Calls whose role is one of these are refused.
    refuse_roles: Vec<&'static str>,
    /// The first this many asks are told to wait.
    wait_first: AtomicUsize,
    /// Whether a failed attempt may be tried again.
    retry_ok: bool,
    admitted: Mutex<Vec<String>>,
    settled: Mutex<Vec<(String, Used)>>,
    retries: Mutex<Vec<(String, Used)>>,
}

impl SpendGuard for Recorder {
    fn admit(&self, _run: &str, key: &str, _model: &str, size: CallSize) -> Admit {
        assert!(size.prompt_bytes > 0 && size.max_tokens > 0, "{size:?}");
        let role_refused = self.refuse_roles.iter().any(|r| key.starts_with(r));
        if role_refused {
            return Admit::Refuse;
        }
        if self.wait_first.load(Ordering::SeqCst) > 0 {
            self.wait_first.fetch_sub(1, Ordering::SeqCst);
            return Admit::Wait;
        }
        self.admitted.lock().unwrap().push(key.to_string());
        Admit::Go
    }

    fn settle(&self, _run: &str, key: &str, used: Used) {
        self.settled.lock().unwrap().push((key.to_string(), used));
    }

    fn retry(&self, _run: &str, key: &str, used: Used) -> bool {
        self.retries.lock().unwrap().push((key.to_string(), used));
        self.retry_ok
    }

    fn refusal(&self) -> String {
        "the test's budget would not cover its next model call".into()
    }
}

fn council(models: &[&str]) -> serde_json::Value {
    json!({ "mode": "council", "question": "What is 2 + 2?",
            "modeConfig": { "councilModels": models, "chairmanModel": "sim/beta" } })
}

async fn run(guard: Arc<Recorder>, body: serde_json::Value) -> conclave::engine::RunDetail {
    let app = spawn_with(Options { sim_latency_ms: 5, ..Default::default() }).await;
    let engine = app.engine.clone();
    let viewer = Viewer::local();
    let g: Arc<dyn SpendGuard> = guard;
    let started = engine.start_eval_run(&body, &viewer, "an-eval", Some(g)).await.unwrap();
    follow(&engine, &started.run_id).await.unwrap();
    engine.result(&started.run_id, &viewer).await.unwrap()
}

fn keys(v: &Mutex<Vec<(String, Used)>>) -> Vec<String> {
    let mut k: Vec<String> = v.lock().unwrap().iter().map(|(k, _)| k.clone()).collect();
    k.sort();
    k
}

#[actix_web::test]
async fn every_call_is_admitted_then_settled_with_what_it_used_and_waiting_calls_go_later() {
    let guard = Arc::new(Recorder { wait_first: AtomicUsize::new(5), ..Default::default() });
    let d = run(guard.clone(), council(&["sim/alpha", "sim/beta", "sim/gamma"])).await;
    assert_eq!(d.run.status, RunStatus::Completed, "calls told to wait went on: {:?}", d.run);
    assert!(d.answer.is_some());
    let mut admitted = guard.admitted.lock().unwrap().clone();
    admitted.sort();
    assert!(admitted.len() >= 7, "3 answers, 3 rankings, the synthesis: {admitted:?}");
    // Nothing leaks: every admitted call was settled once, with the usage it reported.
    assert_eq!(keys(&guard.settled), admitted);
    for (key, used) in guard.settled.lock().unwrap().iter() {
        assert!(matches!(used, Used::Reported(u) if u.prompt_tokens > 0), "{key}: {used:?}");
    }
}

#[actix_web::test]
async fn a_refused_panel_call_cancels_the_run_saying_why() {
    let guard = Arc::new(Recorder { refuse_roles: vec!["stage2"], ..Default::default() });
    let d = run(guard.clone(), council(&["sim/alpha", "sim/beta", "sim/gamma"])).await;
    assert_eq!(d.run.status, RunStatus::Cancelled);
    let why = d.run.error.clone().unwrap_or_default();
    assert!(why.contains("would not cover its next model call"), "{why}");
    assert!(guard.admitted.lock().unwrap().iter().all(|k| !k.starts_with("stage2")));
    // What was admitted was settled, the title too if it was still going when the run ended.
    assert_eq!(keys(&guard.settled), {
        let mut a = guard.admitted.lock().unwrap().clone();
        a.sort();
        a
    });
}

#[actix_web::test]
async fn a_refused_title_is_dropped_and_the_run_still_answers() {
    let guard = Arc::new(Recorder { refuse_roles: vec!["title"], ..Default::default() });
    let d = run(guard.clone(), council(&["sim/alpha", "sim/beta", "sim/gamma"])).await;
    assert_eq!(d.run.status, RunStatus::Completed, "{:?}", d.run.error);
    assert!(d.answer.is_some());
    // The title falls back to the question.
    assert_eq!(d.title.as_deref(), Some("What is 2 + 2"));
}

#[actix_web::test]
async fn a_retry_the_guard_will_not_cover_stops_the_run() {
    // sim/flaky answers 503 to a prompt's first attempt: the provider turned it away, so the
    // failed attempt used nothing, and the guard refuses the next one.
    let guard = Arc::new(Recorder::default());
    let d = run(guard.clone(), council(&["sim/alpha", "sim/flaky", "sim/gamma"])).await;
    assert_eq!(d.run.status, RunStatus::Cancelled);
    let retries = guard.retries.lock().unwrap().clone();
    assert!(!retries.is_empty() && retries.iter().all(|(_, u)| *u == Used::Nothing), "{retries:?}");

    // Allowed, the retry goes and the run answers.
    let guard = Arc::new(Recorder { retry_ok: true, ..Default::default() });
    let d = run(guard.clone(), council(&["sim/alpha", "sim/flaky", "sim/gamma"])).await;
    assert_eq!(d.run.status, RunStatus::Completed, "{:?}", d.run.error);
}
