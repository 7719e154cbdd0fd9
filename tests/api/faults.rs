//! Fault injection: every mode against sim models reached over HTTP through the sim-server,
//! with panels mixing healthy models and injected faults (stalls past the stage timeout, slow
//! first bytes, 429 with `Retry-After`, 503s once or always, connections reset mid-stream,
//! malformed and empty answers).
//!
//! Each run's outcome is recorded (completed, partial = completed with some panel call failed, or
//! failed), and its stored stage rows are checked against what it published: every row a
//! stage-complete event announces exists exactly once in `deliberation_stages`, the result
//! rebuilt from the rows (`GET /api/deliberations/{id}`) equals the events' payloads, and the
//! stored status matches the terminal event. The table is printed (`--nocapture`) and written to
//! `target/fault-report.txt`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use conclave::modes::{CallErrorKind, ChatMessage};
use conclave::providers::openai::OpenAiCompatible;
use conclave::providers::sim::{SimConfig, SimModelConfig, SimProvider};
use conclave::providers::{sim_server, ChatRequest, Provider};
use diesel::{Connection, RunQueryDsl};
use serde_json::{json, Value};

use crate::helpers::*;

fn ask(model: &str, question: &str) -> ChatRequest {
    ChatRequest::new(model, vec![ChatMessage::user(question)])
}

/// The faults as the HTTP client meets them: a reset is a transport error after some text and
/// the retry answers, an empty answer is malformed, a slow start sends no header for a while.
#[actix_web::test]
async fn the_sim_server_serves_each_fault_on_the_wire() {
    conclave::providers::openai::install_crypto();
    let mut models = HashMap::new();
    let slow = SimModelConfig { start_delay_ms: Some(400), ..Default::default() };
    models.insert("sim/slowstart-w".to_string(), slow);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://127.0.0.1:{}/v1", listener.local_addr().unwrap().port());
    let (server, stats) = sim_server::build(
        listener,
        SimProvider::new(SimConfig { latency_ms: 60, models, context_tokens: None }),
    )
    .unwrap();
    actix_web::rt::spawn(server);
    let client = OpenAiCompatible::new(&base, None);

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let e = client.chat(ask("sim/reset-w", "Streamed?"), Some(tx)).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Transport, "{e:?}");
    let mut partial = String::new();
    while let Ok(d) = rx.try_recv() {
        partial.push_str(&d);
    }
    assert!(!partial.is_empty(), "some chunks arrived before the reset");
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let whole = client.chat(ask("sim/reset-w", "Streamed?"), Some(tx)).await.unwrap().text;
    assert!(whole.starts_with(&partial) && whole.len() > partial.len());
    let e = client.chat(ask("sim/reset-w", "Plain?"), None).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Transport, "{e:?}");
    assert!(client.chat(ask("sim/reset-w", "Plain?"), None).await.is_ok(), "the retry answers");
    assert_eq!(stats.snapshot().resets, 2);

    for deltas in [None, Some(tokio::sync::mpsc::unbounded_channel().0)] {
        let e = client.chat(ask("sim/empty-w", "Anything?"), deltas).await.unwrap_err();
        assert_eq!(e.kind, CallErrorKind::Malformed, "{e:?}");
    }
    let raw = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&json!({ "model": "sim/empty-w", "messages": [{ "role": "user", "content": "Q" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "", "200 with empty content");

    let started = Instant::now();
    let resp = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&json!({ "model": "sim/slowstart-w", "stream": true,
                       "messages": [{ "role": "user", "content": "Slow?" }] }))
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(400), "no header before the delay");
    assert!(resp.text().await.unwrap().contains("[DONE]"));
    let s = stats.snapshot();
    assert_eq!((s.in_flight, s.aborted), (0, 0), "{s:?}");
}

/// A route capped at 2 concurrent calls never has more than 2 at the sim-server.
#[actix_web::test]
async fn a_route_capped_at_two_never_has_more_than_two_calls_in_flight() {
    let app = spawn_with(Options {
        sim_over_http: true,
        sim_latency_ms: 300,
        max_concurrent_calls: Some(2),
        ..Options::default()
    })
    .await;
    let models = ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta", "sim/epsilon"];
    let started = app
        .start(
            json!({ "question": "Capped?", "councilModels": models, "chairmanModel": "sim/alpha" }),
        )
        .await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["stage1"].as_array().unwrap().len(), 5);
    let s = app.sim_stats.as_ref().unwrap().snapshot();
    assert_eq!(s.max_in_flight, 2, "five calls at a time were asked for: {s:?}");
    // The fifth answer waited for two waves of 300 ms before its own, but its time (and its
    // timeout) runs from its turn: the wait is not its model being slow.
    let slowest = run["result"]["stage1"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["responseTimeMs"].as_i64())
        .max()
        .unwrap();
    assert!(slowest < 750, "the wait for a permit is not counted in the call's time: {slowest}");
    app.stop().await;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Completed,
    Partial,
    Failed,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Partial => "partial",
            Outcome::Failed => "failed",
        }
    }
}

struct Scenario {
    name: &'static str,
    /// What the panel is expected to do (reported; asserted only for recoverable faults).
    expect: Outcome,
    request: Value,
    /// The server it runs on: which `[fallback]` backups the single-model roles have.
    backups: Backups,
}

/// The `[fallback]` configuration of a server the scenarios run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backups {
    /// No backups: a failing single-model role takes its mode's failure path at once.
    None,
    /// Backups that answer.
    Healthy,
    /// Backups that fail too (a 503, an empty answer).
    Failing,
}

impl Backups {
    const ALL: [Backups; 3] = [Backups::None, Backups::Healthy, Backups::Failing];

    fn fallbacks(self) -> conclave::modes::Fallbacks {
        let (chairman, facilitator) = match self {
            Backups::None => return Default::default(),
            Backups::Healthy => ("sim/zeta", "sim/eta"),
            Backups::Failing => ("sim/fail-bk", "sim/empty-bk"),
        };
        conclave::modes::Fallbacks {
            chairman: Some(chairman.into()),
            facilitator: Some(facilitator.into()),
            ..Default::default()
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Backups::None => "",
            Backups::Healthy => "+backup",
            Backups::Failing => "+backup-fails",
        }
    }
}

/// Non-Delphi stage timeout: the shortest allowed, so stalls end quickly.
const STAGE_MS: u64 = 10_000;
/// Delphi's per-round minimum.
const ROUND_MS: u64 = 30_000;

fn scenarios() -> Vec<Scenario> {
    let t = STAGE_MS;
    let council = |q: &str, models: &[&str], chair: &str| {
        json!({ "mode": "council", "question": q, "councilModels": models,
                "chairmanModel": chair, "timeoutMs": t })
    };
    let vote = |q: &str, models: &[&str], chair: &str| {
        json!({ "mode": "vote", "question": q,
                "modeConfig": { "models": models, "chairmanModel": chair, "timeoutMs": t } })
    };
    let jury = |content: &str, jurors: &[&str], foreman: &str| {
        json!({ "mode": "jury", "question": "Evaluate this documentation",
                "modeConfig": { "content": content, "originalQuestion": "Document the endpoint",
                                "jurorModels": jurors, "foremanModel": foreman, "timeoutMs": t } })
    };
    let debate = |q: &str, models: &[&str]| json!({ "mode": "debate", "question": q, "modeConfig": { "models": models, "timeoutMs": t } });
    let delphi = |q: &str, panel: &[&str], facilitator: &str, numeric: bool| {
        let mut c = json!({ "panelistModels": panel, "facilitatorModel": facilitator,
                            "maxRounds": 3, "timeoutMs": ROUND_MS });
        if numeric {
            c["questionType"] = json!("numeric");
        }
        json!({ "mode": "delphi", "question": q, "modeConfig": c })
    };
    let clarity = |content: &str, roles: [&str; 4]| {
        json!({ "mode": "clarity", "question": "Score this brief",
                "modeConfig": { "content": content, "discussion": "auto", "timeoutMs": t,
                                "models": { "skeptic": roles[0], "advocate": roles[1],
                                            "generalist": roles[2], "arbiter": roles[3] } } })
    };
    let red_team = |content: &str, roles: [&str; 3], rounds: u32| {
        json!({ "mode": "red_team", "question": "Review this handler",
                "modeConfig": { "content": content, "generatorModel": roles[0],
                                "attackerModel": roles[1], "synthesizerModel": roles[2],
                                "rounds": rounds, "timeoutMs": t } })
    };
    let chain = |q: &str, models: &[&str]| {
        let mandates = [
            "draft",
            "structure_depth",
            "accuracy_completeness",
            "polish_format",
            "security_review",
            "performance",
        ];
        let steps: Vec<Value> =
            models.iter().zip(mandates).map(|(m, d)| json!({ "model": m, "mandate": d })).collect();
        json!({ "mode": "chain", "question": q, "modeConfig": { "steps": steps, "timeoutMs": t } })
    };
    let blueprint = |content: &str, architect: &str, authors: &[&str], assembler: &str| {
        json!({ "mode": "blueprint", "question": "Design doc for the editor",
                "modeConfig": { "content": content, "architectModel": architect,
                                "authorModels": authors, "assemblerModel": assembler,
                                "timeoutMs": t } })
    };
    let peer_review = |content: &str, reviewers: &[&str], consolidator: &str| {
        json!({ "mode": "peer_review", "question": "Review our architecture",
                "modeConfig": { "content": content, "reviewerModels": reviewers,
                                "consolidatorModel": consolidator, "timeoutMs": t } })
    };
    let specialist_panel = |content: &str, specialists: &[&str], synthesizer: &str| {
        let roles = [
            "security_expert",
            "cost_analyst",
            "scalability_architect",
            "ux_designer",
            "devops_engineer",
            "compliance_officer",
        ];
        let panel: Vec<Value> = specialists
            .iter()
            .zip(roles)
            .map(|(m, r)| json!({ "roleId": r, "model": m }))
            .collect();
        json!({ "mode": "specialist_panel", "question": "Assess our migration plan",
                "modeConfig": { "content": content, "specialists": panel,
                                "synthesizerModel": synthesizer, "timeoutMs": t } })
    };
    let tournament = |q: &str, contestants: &[&str], judge: &str| {
        json!({ "mode": "tournament", "question": q,
                "modeConfig": { "contestantModels": contestants, "judgeModel": judge,
                                "timeoutMs": t } })
    };
    let confidence = |q: &str, models: &[&str], synthesizer: &str| {
        json!({ "mode": "confidence_weighted", "question": q,
                "modeConfig": { "models": models, "synthesisModel": synthesizer,
                                "timeoutMs": t } })
    };
    // Content with checkable claims (the sim lists each sentence stating a number), or `None`
    // for the generator to write it; roles are generator, extractor and reporter.
    let fact_check = |q: &str, content: Option<&str>, roles: [&str; 3], checkers: &[&str]| {
        let mut c = json!({ "generatorModel": roles[0], "extractorModel": roles[1],
                            "reporterModel": roles[2], "checkerModels": checkers,
                            "timeoutMs": t });
        if let Some(content) = content {
            c["content"] = json!(content);
        }
        json!({ "mode": "fact_check", "question": q, "modeConfig": c })
    };
    let bridge = |tag: &str| {
        format!(
            "The bridge ({tag}) opened in 1932. It is 503 metres long. About 4 million cars \
             cross it every year. Many think it is beautiful."
        )
    };
    let decompose = |q: &str, planner: &str, workers: &[&str], assembler: &str| {
        json!({ "mode": "decompose", "question": q,
                "modeConfig": { "plannerModel": planner, "workerModels": workers,
                                "assemblerModel": assembler, "maxTasks": 5, "timeoutMs": t } })
    };
    use Outcome::*;
    let s = |name, expect, request| Scenario { name, expect, request, backups: Backups::None };
    let b = |name, expect, request, backups| Scenario { name, expect, request, backups };
    vec![
        s(
            "council/transient",
            Completed,
            council(
                "Monolith or services (transient)?",
                &["sim/flaky-c", "sim/ratelimit-c", "sim/reset-c", "sim/alpha"],
                "sim/reset-cc",
            ),
        ),
        s(
            "council/broken",
            Partial,
            council(
                "Monolith or services (broken)?",
                &["sim/fail", "sim/malformed", "sim/empty", "sim/alpha", "sim/beta"],
                "sim/alpha",
            ),
        ),
        s(
            "council/timeouts",
            Partial,
            council(
                "Monolith or services (timeouts)?",
                &["sim/stall", "sim/slowstart", "sim/alpha", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "council/chairman",
            Failed,
            council(
                "Monolith or services (chairman)?",
                &["sim/alpha", "sim/beta", "sim/gamma"],
                "sim/fail",
            ),
        ),
        s(
            "vote/transient",
            Completed,
            vote(
                "Which database (transient)?",
                &["sim/flaky-v", "sim/ratelimit-v", "sim/reset-v"],
                "sim/alpha",
            ),
        ),
        s(
            "vote/broken",
            Partial,
            vote(
                "Which database (broken)?",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "vote/timeouts",
            Partial,
            vote(
                "Which database (timeouts)?",
                &["sim/stall", "sim/slowstart-soon", "sim/alpha", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "vote/too-few",
            Failed,
            vote("Which database (too few)?", &["sim/fail", "sim/empty", "sim/alpha"], "sim/beta"),
        ),
        s(
            "jury/transient",
            Completed,
            jury(
                "## GET /users (transient)\nLists users.",
                &["sim/flaky-j", "sim/ratelimit-j", "sim/reset-j"],
                "sim/reset-jf",
            ),
        ),
        s(
            "jury/broken",
            Partial,
            jury(
                "## GET /users (broken)\nLists users.",
                &["sim/fail", "sim/malformed", "sim/empty", "sim/alpha", "sim/beta"],
                "sim/delta",
            ),
        ),
        s(
            "jury/foreman-late",
            Failed,
            jury(
                "## GET /users (timeouts)\nLists users.",
                &["sim/stall", "sim/alpha", "sim/beta"],
                "sim/slowstart",
            ),
        ),
        s(
            "debate/transient",
            Completed,
            debate(
                "A 4-day week (transient)?",
                &["sim/flaky-d", "sim/ratelimit-d", "sim/reset-d", "sim/alpha"],
            ),
        ),
        s(
            "debate/broken",
            Partial,
            debate(
                "A 4-day week (broken)?",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta"],
            ),
        ),
        s(
            "debate/timeouts",
            Partial,
            debate(
                "A 4-day week (timeouts)?",
                &["sim/stall", "sim/slowstart-soon", "sim/alpha", "sim/beta"],
            ),
        ),
        s(
            "delphi/transient",
            Completed,
            delphi(
                "How many engineers by 2030 (transient)?",
                &["sim/flaky-p", "sim/ratelimit-p", "sim/reset-p", "sim/alpha"],
                "sim/delta",
                false,
            ),
        ),
        s(
            "delphi/broken",
            Partial,
            delphi(
                "How many engineers by 2030 (broken)?",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta", "sim/gamma"],
                "sim/delta",
                false,
            ),
        ),
        s(
            "delphi/timeouts",
            Partial,
            delphi(
                "How many engineers by 2030 (timeouts)?",
                &["sim/stall", "sim/slowstart-soon", "sim/alpha", "sim/beta"],
                "sim/epsilon",
                true,
            ),
        ),
        s(
            "delphi/facilitator",
            Failed,
            delphi(
                "How many engineers by 2030 (facilitator)?",
                &["sim/alpha", "sim/beta", "sim/gamma"],
                "sim/fail",
                true,
            ),
        ),
        s(
            "clarity/transient",
            Completed,
            clarity(
                "Brief (transient): ship weekly.",
                ["sim/flaky-l", "sim/ratelimit-l", "sim/reset-l", "sim/alpha"],
            ),
        ),
        s(
            "clarity/broken",
            Failed,
            clarity(
                "Brief (broken): ship weekly.",
                ["sim/fail", "sim/empty", "sim/alpha", "sim/beta"],
            ),
        ),
        s(
            "clarity/unreadable",
            Failed,
            clarity(
                "Brief (unreadable): ship weekly.",
                ["sim/malformed", "sim/stall", "sim/alpha", "sim/beta"],
            ),
        ),
        s(
            "clarity/timeouts",
            Partial,
            clarity(
                "Brief (timeouts): ship weekly.",
                ["sim/stall", "sim/alpha", "sim/gamma", "sim/slowstart"],
            ),
        ),
        s(
            "red_team/transient",
            Completed,
            red_team(
                "fn login(u, p) (transient) { db.query(u + p) }",
                ["sim/flaky-r", "sim/ratelimit-r", "sim/reset-r"],
                2,
            ),
        ),
        s(
            "red_team/generator",
            Partial,
            red_team(
                "fn login(u, p) (generator) { db.query(u + p) }",
                ["sim/fail", "sim/alpha", "sim/beta"],
                2,
            ),
        ),
        s(
            "red_team/attacker",
            Partial,
            red_team(
                "fn login(u, p) (attacker) { db.query(u + p) }",
                ["sim/alpha", "sim/empty", "sim/beta"],
                2,
            ),
        ),
        s(
            "red_team/unreadable",
            Completed,
            red_team(
                "fn login(u, p) (unreadable) { db.query(u + p) }",
                ["sim/malformed", "sim/malformed-a", "sim/flaky-ru"],
                1,
            ),
        ),
        s(
            "red_team/timeouts",
            Partial,
            red_team(
                "fn login(u, p) (timeouts) { db.query(u + p) }",
                ["sim/slowstart-soon", "sim/stall", "sim/alpha"],
                2,
            ),
        ),
        s(
            "red_team/synthesizer",
            Failed,
            red_team(
                "fn login(u, p) (synthesizer) { db.query(u + p) }",
                ["sim/alpha", "sim/beta", "sim/fail"],
                1,
            ),
        ),
        s(
            "chain/transient",
            Completed,
            chain(
                "A deployment guide (transient)",
                &["sim/flaky-h", "sim/ratelimit-h", "sim/reset-h", "sim/alpha"],
            ),
        ),
        s(
            "chain/broken",
            Partial,
            chain(
                "A deployment guide (broken)",
                &["sim/alpha", "sim/fail", "sim/empty", "sim/malformed", "sim/beta"],
            ),
        ),
        s(
            "chain/timeouts",
            Partial,
            chain(
                "A deployment guide (timeouts)",
                &["sim/slowstart-soon", "sim/stall", "sim/beta", "sim/slowstart"],
            ),
        ),
        s(
            "chain/draft",
            Failed,
            chain("A deployment guide (draft)", &["sim/fail", "sim/alpha", "sim/beta"]),
        ),
        s(
            "blueprint/transient",
            Completed,
            blueprint(
                "A shared editor (transient): several people edit one document.",
                "sim/flaky-b",
                &["sim/ratelimit-b", "sim/reset-b", "sim/alpha"],
                "sim/reset-ba",
            ),
        ),
        s(
            "blueprint/broken",
            Partial,
            blueprint(
                "A shared editor (broken): several people edit one document.",
                "sim/malformed",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "blueprint/timeouts",
            Partial,
            blueprint(
                "A shared editor (timeouts): several people edit one document.",
                "sim/slowstart-soon",
                &["sim/stall", "sim/alpha", "sim/beta"],
                "sim/slowstart",
            ),
        ),
        s(
            "blueprint/outline",
            Failed,
            blueprint(
                "A shared editor (outline): several people edit one document.",
                "sim/fail",
                &["sim/alpha", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "blueprint/authors",
            Failed,
            blueprint(
                "A shared editor (authors): several people edit one document.",
                "sim/alpha",
                &["sim/fail", "sim/empty"],
                "sim/gamma",
            ),
        ),
        s(
            "peer_review/transient",
            Completed,
            peer_review(
                "Services behind one gateway (transient).",
                &["sim/flaky-q", "sim/ratelimit-q", "sim/reset-q"],
                "sim/reset-qc",
            ),
        ),
        s(
            "peer_review/broken",
            Partial,
            peer_review(
                "Services behind one gateway (broken).",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "peer_review/timeouts",
            Partial,
            peer_review(
                "Services behind one gateway (timeouts).",
                &["sim/stall", "sim/slowstart-soon", "sim/alpha"],
                "sim/beta",
            ),
        ),
        s(
            "peer_review/too-few",
            Failed,
            peer_review(
                "Services behind one gateway (too few).",
                &["sim/fail", "sim/empty", "sim/alpha"],
                "sim/beta",
            ),
        ),
        s(
            "peer_review/consolidator",
            Failed,
            peer_review(
                "Services behind one gateway (consolidator).",
                &["sim/alpha", "sim/beta", "sim/gamma"],
                "sim/fail",
            ),
        ),
        s(
            "specialist_panel/transient",
            Completed,
            specialist_panel(
                "Move to EKS (transient) in three steps.",
                &["sim/flaky-s", "sim/ratelimit-s", "sim/reset-s"],
                "sim/reset-ss",
            ),
        ),
        s(
            "specialist_panel/broken",
            Partial,
            specialist_panel(
                "Move to EKS (broken) in three steps.",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta"],
                "sim/malformed-ss",
            ),
        ),
        s(
            "specialist_panel/timeouts",
            Partial,
            specialist_panel(
                "Move to EKS (timeouts) in three steps.",
                &["sim/stall", "sim/slowstart", "sim/slowstart-soon", "sim/alpha"],
                "sim/slowstart-soon",
            ),
        ),
        s(
            "specialist_panel/too-few",
            Failed,
            specialist_panel(
                "Move to EKS (too few) in three steps.",
                &["sim/fail", "sim/empty", "sim/alpha"],
                "sim/beta",
            ),
        ),
        s(
            "specialist_panel/synthesizer",
            Failed,
            specialist_panel(
                "Move to EKS (synthesizer) in three steps.",
                &["sim/alpha", "sim/beta", "sim/gamma"],
                "sim/fail",
            ),
        ),
        b(
            "specialist_panel/synthesizer",
            Partial,
            specialist_panel(
                "Move to EKS (synthesizer, backup) in three steps.",
                &["sim/alpha", "sim/beta"],
                "sim/stall",
            ),
            Backups::Healthy,
        ),
        b(
            "specialist_panel/synthesizer",
            Failed,
            specialist_panel(
                "Move to EKS (synthesizer, failing backup) in three steps.",
                &["sim/alpha", "sim/beta"],
                "sim/empty",
            ),
            Backups::Failing,
        ),
        s(
            "tournament/transient",
            Completed,
            tournament(
                "Best way to learn a language (transient)?",
                &["sim/flaky-t", "sim/ratelimit-t", "sim/reset-t", "sim/alpha"],
                "sim/reset-tj",
            ),
        ),
        s(
            "tournament/broken",
            Partial,
            tournament(
                "Best way to learn a language (broken)?",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta", "sim/gamma"],
                "sim/delta",
            ),
        ),
        s(
            "tournament/timeouts",
            Partial,
            tournament(
                "Best way to learn a language (timeouts)?",
                &["sim/stall", "sim/slowstart", "sim/slowstart-soon", "sim/alpha", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "tournament/too-few",
            Failed,
            tournament(
                "Best way to learn a language (too few)?",
                &["sim/fail", "sim/empty", "sim/stall", "sim/alpha"],
                "sim/beta",
            ),
        ),
        s(
            "tournament/judge-unreadable",
            Completed,
            tournament(
                "Best way to learn a language (unreadable judge)?",
                &["sim/flaky-tu", "sim/beta", "sim/gamma", "sim/delta", "sim/epsilon"],
                "sim/malformed-tj",
            ),
        ),
        s(
            "tournament/judge",
            Failed,
            tournament(
                "Best way to learn a language (judge)?",
                &["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"],
                "sim/fail",
            ),
        ),
        b(
            "tournament/judge-late",
            Failed,
            tournament(
                "Best way to learn a language (late judge)?",
                &["sim/alpha", "sim/beta", "sim/gamma", "sim/delta", "sim/epsilon"],
                "sim/slowstart",
            ),
            Backups::Healthy,
        ),
        b(
            "tournament/judge-empty",
            Failed,
            tournament(
                "Best way to learn a language (empty judge)?",
                &["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"],
                "sim/empty",
            ),
            Backups::Failing,
        ),
        s(
            "confidence_weighted/transient",
            Completed,
            confidence(
                "Caffeine's half-life (transient)?",
                &["sim/flaky-k", "sim/ratelimit-k", "sim/reset-k"],
                "sim/reset-ks",
            ),
        ),
        s(
            "confidence_weighted/broken",
            Partial,
            confidence(
                "Caffeine's half-life (broken)?",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/alpha", "sim/beta"],
                "sim/malformed-ks",
            ),
        ),
        s(
            "confidence_weighted/timeouts",
            Partial,
            confidence(
                "Caffeine's half-life (timeouts)?",
                &["sim/stall", "sim/slowstart", "sim/slowstart-soon", "sim/alpha"],
                "sim/slowstart-soon",
            ),
        ),
        s(
            "confidence_weighted/single",
            Partial,
            confidence(
                "Caffeine's half-life (single)?",
                &["sim/fail", "sim/empty", "sim/alpha"],
                "sim/beta",
            ),
        ),
        s(
            "confidence_weighted/none",
            Failed,
            confidence(
                "Caffeine's half-life (none)?",
                &["sim/fail", "sim/empty", "sim/stall"],
                "sim/alpha",
            ),
        ),
        s(
            "confidence_weighted/synthesizer",
            Failed,
            confidence(
                "Caffeine's half-life (synthesizer)?",
                &["sim/alpha", "sim/beta", "sim/gamma"],
                "sim/fail",
            ),
        ),
        b(
            "confidence_weighted/synthesizer",
            Partial,
            confidence(
                "Caffeine's half-life (synthesizer, backup)?",
                &["sim/alpha", "sim/beta"],
                "sim/empty",
            ),
            Backups::Healthy,
        ),
        b(
            "confidence_weighted/synthesizer",
            Failed,
            confidence(
                "Caffeine's half-life (synthesizer, failing backup)?",
                &["sim/alpha", "sim/beta"],
                "sim/stall",
            ),
            Backups::Failing,
        ),
        s(
            "fact_check/transient",
            Completed,
            fact_check(
                "The Eiffel Tower (transient)",
                None,
                ["sim/flaky-f", "sim/ratelimit-f", "sim/reset-fr"],
                &["sim/reset-f", "sim/flaky-fc", "sim/ratelimit-fc"],
            ),
        ),
        s(
            "fact_check/broken",
            Partial,
            fact_check(
                "Check the bridge (broken)",
                Some(bridge("broken").as_str()),
                ["sim/alpha", "sim/alpha", "sim/malformed-fr"],
                &["sim/fail", "sim/empty", "sim/malformed", "sim/beta"],
            ),
        ),
        s(
            "fact_check/timeouts",
            Partial,
            fact_check(
                "The Eiffel Tower (timeouts)",
                None,
                ["sim/slowstart-soon", "sim/alpha", "sim/gamma"],
                &["sim/stall", "sim/slowstart", "sim/slowstart-soon", "sim/beta"],
            ),
        ),
        s(
            "fact_check/unreadable",
            Completed,
            fact_check(
                "The Eiffel Tower (unreadable)",
                None,
                ["sim/flaky-fu", "sim/malformed-fx", "sim/beta"],
                &["sim/beta", "sim/gamma"],
            ),
        ),
        s(
            "fact_check/generator",
            Failed,
            fact_check(
                "The Eiffel Tower (generator)",
                None,
                ["sim/fail", "sim/alpha", "sim/alpha"],
                &["sim/beta", "sim/gamma"],
            ),
        ),
        s(
            "fact_check/checkers",
            Failed,
            fact_check(
                "Check the bridge (checkers)",
                Some(bridge("checkers").as_str()),
                ["sim/alpha", "sim/alpha", "sim/alpha"],
                &["sim/fail", "sim/empty", "sim/malformed"],
            ),
        ),
        s(
            "fact_check/extractor",
            Failed,
            fact_check(
                "Check the bridge (extractor)",
                Some(bridge("extractor").as_str()),
                ["sim/alpha", "sim/fail", "sim/alpha"],
                &["sim/beta", "sim/gamma"],
            ),
        ),
        b(
            "fact_check/extractor",
            Partial,
            fact_check(
                "Check the bridge (extractor, backup)",
                Some(bridge("extractor, backup").as_str()),
                ["sim/alpha", "sim/stall", "sim/alpha"],
                &["sim/beta", "sim/gamma"],
            ),
            Backups::Healthy,
        ),
        b(
            "fact_check/extractor",
            Failed,
            fact_check(
                "Check the bridge (extractor, failing backup)",
                Some(bridge("extractor, failing backup").as_str()),
                ["sim/alpha", "sim/empty", "sim/alpha"],
                &["sim/beta", "sim/gamma"],
            ),
            Backups::Failing,
        ),
        s(
            "fact_check/reporter",
            Partial,
            fact_check(
                "Check the bridge (reporter)",
                Some(bridge("reporter").as_str()),
                ["sim/alpha", "sim/alpha", "sim/fail"],
                &["sim/beta", "sim/gamma"],
            ),
        ),
        b(
            "fact_check/reporter",
            Partial,
            fact_check(
                "Check the bridge (reporter, backup)",
                Some(bridge("reporter, backup").as_str()),
                ["sim/alpha", "sim/alpha", "sim/empty"],
                &["sim/beta", "sim/gamma"],
            ),
            Backups::Healthy,
        ),
        b(
            "fact_check/reporter",
            Partial,
            fact_check(
                "Check the bridge (reporter, failing backup)",
                Some(bridge("reporter, failing backup").as_str()),
                ["sim/alpha", "sim/alpha", "sim/stall"],
                &["sim/beta", "sim/gamma"],
            ),
            Backups::Failing,
        ),
        s(
            "decompose/transient",
            Completed,
            decompose(
                "Plan a bakery launch (transient)",
                "sim/flaky-d",
                &["sim/ratelimit-d", "sim/reset-d", "sim/alpha"],
                "sim/reset-da",
            ),
        ),
        s(
            "decompose/broken",
            Partial,
            decompose(
                "Plan a bakery launch (broken)",
                "sim/malformed",
                &["sim/fail", "sim/empty", "sim/malformed", "sim/beta"],
                "sim/gamma",
            ),
        ),
        s(
            "decompose/timeouts",
            Partial,
            decompose(
                "Plan a bakery launch (timeouts)",
                "sim/slowstart-soon",
                &["sim/stall", "sim/alpha"],
                "sim/slowstart",
            ),
        ),
        s(
            "decompose/planner",
            Failed,
            decompose("Plan a bakery launch (planner)", "sim/fail", &["sim/alpha"], "sim/beta"),
        ),
    ]
}

/// The fault a sim model name injects.
fn fault_of(model: &str) -> Option<&'static str> {
    let name = model.strip_prefix("sim/")?;
    let faults = [
        ("stall", "stall > timeout"),
        ("slowstart-soon", "slow start < timeout"),
        ("slowstart", "slow start > timeout"),
        ("ratelimit", "429 + Retry-After"),
        ("flaky", "503 once"),
        ("fail", "503 always"),
        ("reset", "reset mid-stream"),
        ("malformed", "malformed answer"),
        ("empty", "empty answer"),
    ];
    faults.iter().find(|(p, _)| name.starts_with(p)).map(|(_, f)| *f)
}

/// Every model id a request names.
fn models_of(request: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.starts_with("sim/") => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(request, &mut out);
    out
}

/// A stage row as stored, keyed as finely as its announcing event allows.
type RowKey = (String, Option<String>, Option<String>);

/// The rows a run's events announce, by key: each key's count is how many times it must be
/// stored. A stage type is keyed the same way for every row (model and content when the event
/// carries them, the model alone, or the type alone).
#[derive(Default)]
struct Expected {
    counts: BTreeMap<RowKey, usize>,
    /// Per stage type: whether the key holds the model and the content.
    shape: BTreeMap<String, (bool, bool)>,
}

impl Expected {
    fn add(&mut self, stage: &str, model: Option<&Value>, content: Option<&Value>) {
        let text = |v: Option<&Value>| v.map(|v| v.as_str().map(str::to_string));
        let key = (stage.to_string(), text(model).flatten(), text(content).flatten());
        self.shape.insert(stage.to_string(), (model.is_some(), content.is_some()));
        *self.counts.entry(key).or_default() += 1;
    }
    fn full(&mut self, stage: &str, model: &Value, content: &Value) {
        self.add(stage, Some(model), Some(content));
    }
    fn by_model(&mut self, stage: &str, model: &Value) {
        self.add(stage, Some(model), None);
    }
    fn one(&mut self, stage: &str) {
        self.add(stage, None, None);
    }
}

/// The inner payloads (`data`) of a run's events named `name`.
fn payloads<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).map(|e| &e["data"]).collect()
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// The failed panel calls (the title call is no panel member), as their `call_complete`s.
fn failed_panel_calls(events: &[Value]) -> Vec<&Value> {
    payloads(events, "call_complete")
        .into_iter()
        .filter(|c| c["ok"] != true && c["key"] != "title")
        .collect()
}

fn expected_rows(mode: &str, events: &[Value]) -> Expected {
    let mut x = Expected::default();
    let ev = |name: &str| payloads(events, name);
    // Every mode stores a row per failed panel call, with the error message as its content.
    for c in failed_panel_calls(events) {
        x.full("call_failed", &c["model"], &c["error"]["message"]);
    }
    match mode {
        "council" => {
            for e in ev("stage1_complete") {
                for a in items(&e["data"]) {
                    x.full("stage1", &a["model"], &a["response"]);
                }
            }
            for e in ev("stage2_complete") {
                for r in items(&e["data"]) {
                    x.full("stage2", &r["model"], &r["ranking"]);
                }
                for (label, model) in
                    e["metadata"]["labelToModel"].as_object().into_iter().flatten()
                {
                    x.full("label_map", model, &json!(label));
                }
            }
            for e in ev("stage3_complete") {
                x.full("stage3", &e["data"]["model"], &e["data"]["response"]);
            }
        }
        "vote" => {
            for e in ev("stage1_complete") {
                for a in items(&e["data"]) {
                    x.full("initial_answer", &a["model"], &a["response"]);
                }
                x.one("label_map");
            }
            for e in ev("vote_round_complete") {
                for v in items(&e["data"]["votes"]) {
                    x.full("vote", &v["model"], &v["voteText"]);
                }
                x.one("vote_tally");
            }
            for e in ev("tiebreaker_complete") {
                if e["data"]["voteText"].is_string() {
                    x.full("tiebreaker", &e["data"]["model"], &e["data"]["voteText"]);
                }
            }
            for e in ev("winner_declared") {
                x.full("vote_winner", &e["data"]["winnerModel"], &e["data"]["winnerResponse"]);
            }
        }
        "jury" => {
            for e in ev("present_complete") {
                x.full("present", &Value::Null, &e["data"]["content"]);
            }
            for e in ev("juror_complete") {
                x.full("deliberation", &e["data"]["model"], &e["data"]["assessmentText"]);
            }
            for _ in ev("all_jurors_complete") {
                x.one("juror_summary");
            }
            for e in ev("verdict_complete") {
                x.full("verdict", &e["data"]["model"], &e["data"]["reportText"]);
            }
        }
        "debate" => {
            for e in ev("round1_complete") {
                for a in items(&e["data"]) {
                    x.full("initial_answer", &a["model"], &a["response"]);
                }
                x.one("round1_label_map");
            }
            if !ev("revision_complete").is_empty() {
                // A revision row is the reply's text: stored for each revision call that answered.
                for c in ev("call_complete") {
                    if c["stage"] == "revision" && c["ok"] == true {
                        x.by_model("revision", &c["model"]);
                    }
                }
                x.one("revision_summary");
            }
            for _ in ev("vote_start") {
                x.one("revised_label_map");
            }
            for e in ev("vote_complete") {
                for v in items(&e["data"]["votes"]) {
                    x.full("debate_vote", &v["model"], &v["voteText"]);
                }
                x.one("debate_vote_tally");
            }
            for e in ev("winner_declared") {
                x.full("debate_winner", &e["data"]["winnerModel"], &e["data"]["winnerResponse"]);
            }
        }
        "delphi" => {
            for _ in ev("classify_complete") {
                x.one("classify");
            }
            for e in ev("round_complete") {
                let n = e["round"].as_i64().unwrap_or(0);
                for _ in items(&e["data"]["estimates"]) {
                    x.one(&format!("round_{n}"));
                }
                x.one(&format!("round_{n}_stats"));
            }
            for e in ev("synthesis_complete") {
                x.full("synthesis", &e["data"]["facilitatorModel"], &e["data"]["report"]);
            }
        }
        "clarity" => {
            for _ in ev("clarity_start") {
                x.one("brief");
            }
            for e in ev("evaluator_complete") {
                x.by_model("evaluation", &e["data"]["model"]);
            }
            // The disagreement row is stored once the evaluations are in, whatever follows.
            let after =
                ["disagreement_detected", "discussion_start", "arbiter_start", "score_complete"];
            if after.iter().any(|n| !ev(n).is_empty()) {
                x.one("disagreement");
            }
            for e in ev("discussion_complete") {
                // A revision that was read, or a reply that could not be (kept with why).
                for c in items(&e["data"]["changes"]) {
                    if c["failed"] != true || !c["unparsed"].is_null() {
                        x.one("discussion");
                    }
                }
            }
            for e in ev("arbiter_complete") {
                if e["data"]["error"].is_null() {
                    x.by_model("arbiter", &e["data"]["model"]);
                }
            }
            for _ in ev("score_complete") {
                x.one("score");
            }
        }
        "red_team" => {
            for e in ev("generate_complete") {
                x.full("generate", &e["data"]["model"], &e["data"]["structuredContent"]);
            }
            // The attack and defense rows hold the replies as written (empty when the call
            // failed); the events carry what was read from them.
            for e in ev("attack_complete") {
                x.by_model(&format!("attack_round_{}", e["round"]), &e["data"]["model"]);
            }
            for e in ev("defend_complete") {
                x.by_model(&format!("defend_round_{}", e["round"]), &e["data"]["model"]);
            }
            for e in ev("synthesize_complete") {
                x.by_model("synthesis", &e["data"]["model"]);
            }
        }
        "chain" => {
            for _ in ev("chain_start") {
                x.one("chain_plan");
            }
            for e in ev("chain_step_complete") {
                let stage = format!("chain_step_{}", e["step"]);
                x.full(&stage, &e["data"]["model"], &e["data"]["content"]);
            }
            // A skipped step's row has no version.
            for e in ev("chain_step_skipped") {
                x.full(&format!("chain_step_{}", e["step"]), &e["data"]["model"], &json!(""));
            }
        }
        "blueprint" => {
            for _ in ev("blueprint_start") {
                x.one("blueprint_setup");
            }
            // The outline row holds the architect's reply as written.
            for e in ev("outline_complete") {
                x.by_model("outline", &e["data"]["model"]);
            }
            for e in ev("section_complete") {
                let stage = format!("section_{}", e["data"]["sectionNumber"]);
                x.full(&stage, &e["data"]["model"], &e["data"]["content"]);
            }
            for e in ev("assembly_complete") {
                x.full("assembly", &e["data"]["model"], &e["data"]["document"]);
            }
        }
        "peer_review" => {
            for _ in ev("review_start") {
                x.one("review_setup");
            }
            // A review row holds the reply as written (the event its answer part).
            for e in ev("reviewer_complete") {
                let stage = format!("review_{}", e["data"]["reviewerIndex"]);
                x.by_model(&stage, &e["data"]["model"]);
            }
            // A failed reviewer's row holds the error (no event of its own but the call's).
            for c in failed_panel_calls(events) {
                if c["stage"] == "review" {
                    let i = c["key"].as_str().and_then(|k| k.strip_prefix("review:"));
                    let i: usize = i.and_then(|i| i.parse().ok()).expect("a review call's key");
                    x.full(&format!("review_{}", i + 1), &c["model"], &c["error"]["message"]);
                }
            }
            for _ in ev("all_reviewers_complete") {
                x.one("review_stats");
            }
            for e in ev("consolidation_complete") {
                x.full("consolidation", &e["data"]["model"], &e["data"]["consolidatedReport"]);
            }
        }
        "specialist_panel" => {
            for _ in ev("panel_start") {
                x.one("panel");
            }
            // A report row holds the report as read (the event's `report`); a failed
            // specialist has only its `call_failed` row.
            for e in ev("specialist_complete") {
                let d = &e["data"];
                let stage = format!("specialist_{}", d["roleKey"].as_str().unwrap_or(""));
                x.full(&stage, &d["model"], &d["report"]);
            }
            for e in ev("synthesis_complete") {
                x.full("synthesis", &e["data"]["model"], &e["data"]["integratedAssessment"]);
            }
        }
        "tournament" => {
            for e in ev("collect_complete") {
                for c in items(&e["data"]) {
                    x.full("collect", &c["model"], &c["response"]);
                }
            }
            for e in ev("bracket_seeded") {
                x.one("bracket_seed");
                // A bye is a row of its own, with no model and no text.
                for m in items(&e["data"]["matchups"]).iter().filter(|m| m["seedB"].is_null()) {
                    let stage = format!("round_1_match_{}", m["matchIndex"]);
                    x.full(&stage, &Value::Null, &json!(""));
                }
            }
            let judge = ev("tournament_start")
                .first()
                .map(|s| s["config"]["judgeModel"].clone())
                .unwrap_or(Value::Null);
            // A match row is the judge's deciding reply, or the error of its failed call when
            // the better seed advanced by default.
            for e in ev("matchup_complete") {
                let (r, m) = (&e["round"], &e["matchIndex"]);
                let stage = format!("round_{r}_match_{m}");
                if e["data"]["decidedBy"] == "default_seed" {
                    let key = format!("r{r}m{m}");
                    let retry = format!("{key}:retry");
                    let call = failed_panel_calls(events)
                        .into_iter()
                        .rev()
                        .find(|c| c["key"] == key.as_str() || c["key"] == retry.as_str());
                    match call {
                        Some(c) => x.full(&stage, &judge, &c["error"]["message"]),
                        None => x.by_model(&stage, &judge),
                    }
                } else {
                    x.by_model(&stage, &judge);
                }
            }
            for e in ev("winner_declared") {
                x.full("winner", &e["data"]["model"], &e["data"]["response"]);
            }
        }
        "confidence_weighted" => {
            // An answer row holds the reply as written (the event the answer read from it).
            for e in ev("answer_complete") {
                let stage = format!("answer_{}", e["data"]["index"]);
                x.by_model(&stage, &e["data"]["model"]);
            }
            for _ in ev("weights_calculated") {
                x.one("weights");
            }
            // A single answer stands as the synthesis with no model.
            for e in ev("synthesis_complete") {
                x.full("synthesis", &e["data"]["model"], &e["data"]["synthesis"]);
            }
        }
        "fact_check" => {
            for e in ev("generate_complete") {
                x.full("generate", &e["data"]["model"], &e["data"]["content"]);
            }
            // The extract row holds the extractor's reply as written.
            for e in ev("extract_complete") {
                x.by_model("extract", &e["data"]["model"]);
            }
            // A checker's row holds its reply, or the error of its failed call.
            for e in ev("checker_complete") {
                let d = &e["data"];
                let stage = format!("verify_{}", d["checkerIndex"]);
                if d["failed"] == true {
                    x.full(&stage, &d["model"], &d["error"]);
                } else {
                    x.by_model(&stage, &d["model"]);
                }
            }
            for _ in ev("all_checkers_complete") {
                x.one("consensus");
            }
            // The report row: the reporter's report, the server's table or the no-claims note.
            for e in ev("report_complete") {
                x.full("report", &e["data"]["model"], &e["data"]["report"]);
            }
        }
        "decompose" => {
            // The plan row holds the reply as written; a task row its output ("" when it failed).
            for e in ev("plan_complete") {
                x.by_model("plan", &e["data"]["model"]);
            }
            for e in ev("task_complete") {
                let d = &e["data"];
                x.full(d["taskId"].as_str().unwrap_or(""), &d["model"], &d["output"]);
            }
            for e in ev("assembly_complete") {
                x.full("assembly", &e["data"]["model"], &e["data"]["response"]);
            }
        }
        other => panic!("no row expectations for mode {other}"),
    }
    x
}

/// Empty: what a result holds for a stage that never completed.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn check(out: &mut Vec<String>, field: &str, got: &Value, want: Option<Value>) {
    match want {
        Some(w) if *got != w => out.push(format!("{field}: stored {got} but published {w}")),
        None if !is_empty(got) => out.push(format!("{field}: stored {got} but never published")),
        _ => {}
    }
}

/// Where the result rebuilt from the rows differs from what the events said.
fn result_mismatches(mode: &str, result: &Value, events: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    let one = |name: &str| payloads(events, name).last().copied();
    let r = result;
    let data = |name: &str| one(name).map(|e| e["data"].clone());
    match mode {
        "council" => {
            check(&mut out, "stage1", &r["stage1"], data("stage1_complete"));
            check(&mut out, "stage2", &r["stage2"], data("stage2_complete"));
            let meta = one("stage2_complete").map(|e| e["metadata"].clone());
            check(&mut out, "stage2Metadata", &r["stage2Metadata"], meta);
            check(&mut out, "stage3", &r["stage3"], data("stage3_complete"));
        }
        "vote" => {
            check(&mut out, "stage1", &r["stage1"], data("stage1_complete"));
            check(&mut out, "voteRound", &r["voteRound"], data("vote_round_complete"));
            check(&mut out, "winner", &r["winner"], data("winner_declared"));
        }
        "jury" => {
            check(&mut out, "presentation", &r["presentation"], data("present_complete"));
            let jurors: Vec<Value> =
                payloads(events, "juror_complete").iter().map(|e| e["data"].clone()).collect();
            check(&mut out, "jurors", &r["jurors"], (!jurors.is_empty()).then(|| json!(jurors)));
            check(&mut out, "jurorSummary", &r["jurorSummary"], data("all_jurors_complete"));
            check(&mut out, "foreman", &r["foreman"], data("verdict_complete"));
        }
        "debate" => {
            check(&mut out, "round1", &r["round1"], data("round1_complete"));
            let revisions = one("revision_complete").map(|e| e["data"]["revisions"].clone());
            check(&mut out, "revisions", &r["revisions"], revisions);
            let summary = one("revision_complete").map(|e| e["data"]["summary"].clone());
            check(&mut out, "revisionSummary", &r["revisionSummary"], summary);
            check(&mut out, "votes", &r["votes"], data("vote_complete"));
            check(&mut out, "winner", &r["winner"], data("winner_declared"));
        }
        "delphi" => {
            let rounds = payloads(events, "round_complete");
            let stored = items(&r["rounds"]);
            if stored.len() < rounds.len() {
                out.push(format!("rounds: {} stored, {} published", stored.len(), rounds.len()));
            }
            for (s, e) in stored.iter().zip(&rounds) {
                if s["stats"] != e["data"]["stats"] || s["converged"] != e["data"]["converged"] {
                    out.push(format!("round {}: stored stats differ", e["round"]));
                }
                if items(&s["estimates"]).len() != items(&e["data"]["estimates"]).len() {
                    out.push(format!("round {}: stored estimates differ", e["round"]));
                }
            }
            check(&mut out, "report", &r["report"], data("synthesis_complete"));
        }
        "clarity" => {
            let evals: Vec<Value> =
                payloads(events, "evaluator_complete").iter().map(|e| e["data"].clone()).collect();
            let stored = items(&r["evaluations"]);
            if stored.len() != evals.len() {
                out.push(format!(
                    "evaluations: {} stored, {} published",
                    stored.len(),
                    evals.len()
                ));
            }
            check(&mut out, "score", &r["score"], data("score_complete"));
        }
        "red_team" => {
            check(&mut out, "generate", &r["generate"], data("generate_complete"));
            let attacks = payloads(events, "attack_complete");
            let defenses = payloads(events, "defend_complete");
            let stored = items(&r["rounds"]);
            if stored.len() != attacks.len() {
                out.push(format!("rounds: {} stored, {} published", stored.len(), attacks.len()));
            }
            for (s, a) in stored.iter().zip(&attacks) {
                let n = &a["round"];
                check(&mut out, &format!("round {n} number"), &s["round"], Some(n.clone()));
                check(
                    &mut out,
                    &format!("round {n} attack"),
                    &s["attack"],
                    Some(a["data"].clone()),
                );
                let d = defenses.iter().find(|d| d["round"] == *n).map(|d| d["data"].clone());
                check(&mut out, &format!("round {n} defense"), &s["defense"], d);
            }
            let synthesis = data("synthesize_complete");
            let totals = synthesis.as_ref().map(|s| s["totals"].clone());
            if totals.is_some() {
                check(&mut out, "totals", &r["totals"], totals);
            }
            check(&mut out, "synthesis", &r["synthesis"], synthesis);
        }
        "chain" => {
            let done = payloads(events, "chain_step_complete");
            let skipped = payloads(events, "chain_step_skipped");
            let stored = items(&r["steps"]);
            if stored.len() != done.len() + skipped.len() {
                out.push(format!(
                    "steps: {} stored, {} completed and {} skipped published",
                    stored.len(),
                    done.len(),
                    skipped.len()
                ));
            }
            let step = |k: &Value| stored.iter().find(|s| s["step"] == *k);
            for e in &done {
                let k = &e["step"];
                let Some(s) = step(k) else {
                    out.push(format!("step {k}: published but not stored"));
                    continue;
                };
                if s["skipped"] != false {
                    out.push(format!("step {k}: completed but stored as skipped"));
                }
                for f in e["data"].as_object().into_iter().flatten().map(|(f, _)| f) {
                    let want = Some(e["data"][f].clone());
                    check(&mut out, &format!("step {k} {f}"), &s[f], want);
                }
            }
            for e in &skipped {
                let k = &e["step"];
                let Some(s) = step(k) else {
                    out.push(format!("step {k}: skipped but not stored"));
                    continue;
                };
                if s["skipped"] != true {
                    out.push(format!("step {k}: skipped but stored as completed"));
                }
                check(
                    &mut out,
                    &format!("step {k} model"),
                    &s["model"],
                    Some(e["data"]["model"].clone()),
                );
                check(
                    &mut out,
                    &format!("step {k} mandate"),
                    &s["mandate"],
                    Some(e["data"]["mandate"].clone()),
                );
                check(
                    &mut out,
                    &format!("step {k} skipReason"),
                    &s["skipReason"],
                    Some(e["data"]["reason"].clone()),
                );
            }
            // Each stored step was based on the version its start said it received.
            for e in payloads(events, "chain_step_start") {
                if let Some(s) = step(&e["step"]) {
                    let want = Some(e["basedOnStep"].clone());
                    check(
                        &mut out,
                        &format!("step {} basedOnStep", e["step"]),
                        &s["basedOnStep"],
                        want,
                    );
                }
            }
            match data("chain_complete") {
                Some(d) => {
                    for f in d.as_object().into_iter().flatten().map(|(f, _)| f) {
                        check(&mut out, f, &r[f], Some(d[f].clone()));
                    }
                }
                None if !r["finalContent"].is_null() && done.is_empty() => {
                    out.push(format!(
                        "finalContent: stored {} but no step completed",
                        r["finalContent"]
                    ));
                }
                None => {}
            }
            // The plan row keeps the count even when no step was stored (a failed draft).
            if let Some(start) = one("chain_start") {
                check(&mut out, "totalSteps", &r["totalSteps"], Some(start["totalSteps"].clone()));
            }
        }
        "blueprint" => {
            check(&mut out, "outline", &r["outline"], data("outline_complete"));
            let mut written: Vec<Value> =
                payloads(events, "section_complete").iter().map(|e| e["data"].clone()).collect();
            written.sort_by_key(|s| s["sectionNumber"].as_u64());
            let mut failed: Vec<Value> =
                payloads(events, "section_failed").iter().map(|e| e["data"].clone()).collect();
            failed.sort_by_key(|s| s["sectionNumber"].as_u64());
            if let Some(all) = data("all_sections_complete") {
                if all["sections"] != json!(written) || all["failedSections"] != json!(failed) {
                    out.push("all_sections_complete: differs from the section events".into());
                }
                for f in ["totalSucceeded", "totalFailed"] {
                    check(&mut out, f, &r[f], Some(all[f].clone()));
                }
            }
            check(
                &mut out,
                "sections",
                &r["sections"],
                (!written.is_empty()).then(|| json!(written)),
            );
            check(
                &mut out,
                "failedSections",
                &r["failedSections"],
                (!failed.is_empty()).then(|| json!(failed)),
            );
            check(&mut out, "assembly", &r["assembly"], data("assembly_complete"));
            // The setup row keeps the type even when the architect failed.
            if let Some(start) = one("blueprint_start") {
                let want = Some(start["documentType"].clone());
                check(&mut out, "documentType", &r["documentType"], want);
            }
        }
        "peer_review" => {
            if let Some(start) = one("review_start") {
                check(&mut out, "reviewType", &r["reviewType"], Some(start["reviewType"].clone()));
                check(&mut out, "rubric", &r["rubric"], Some(start["rubric"].clone()));
            }
            let mut reviews: Vec<Value> =
                payloads(events, "reviewer_complete").iter().map(|e| e["data"].clone()).collect();
            reviews.sort_by_key(|v| v["reviewerIndex"].as_u64());
            check(
                &mut out,
                "reviews",
                &r["reviews"],
                (!reviews.is_empty()).then(|| json!(reviews)),
            );
            // The failed reviewers: as all_reviewers_complete said, else from the failed calls.
            let failed = match data("all_reviewers_complete") {
                Some(all) => {
                    if all["reviews"] != json!(reviews) {
                        out.push(
                            "all_reviewers_complete: reviews differ from reviewer_complete".into(),
                        );
                    }
                    check(
                        &mut out,
                        "statistics",
                        &r["statistics"],
                        Some(all["statistics"].clone()),
                    );
                    all["failedReviewers"].clone()
                }
                None => {
                    check(&mut out, "statistics", &r["statistics"], None);
                    let mut f: Vec<Value> = failed_panel_calls(events)
                        .into_iter()
                        .filter(|c| c["stage"] == "review")
                        .filter_map(|c| {
                            let i: u64 =
                                c["key"].as_str()?.strip_prefix("review:")?.parse().ok()?;
                            Some(json!({ "reviewerIndex": i + 1, "model": c["model"],
                                         "error": c["error"]["message"] }))
                        })
                        .collect();
                    f.sort_by_key(|v| v["reviewerIndex"].as_u64());
                    json!(f)
                }
            };
            let failed = (!is_empty(&failed)).then_some(failed);
            check(&mut out, "failedReviewers", &r["failedReviewers"], failed);
            check(&mut out, "consolidation", &r["consolidation"], data("consolidation_complete"));
        }
        "specialist_panel" => {
            let roles = one("panel_start").map(|p| p["roles"].clone());
            check(&mut out, "roles", &r["roles"], roles.clone());
            let mut reports: Vec<Value> =
                payloads(events, "specialist_complete").iter().map(|e| e["data"].clone()).collect();
            reports.sort_by_key(|v| v["index"].as_u64());
            check(
                &mut out,
                "specialists",
                &r["specialists"],
                (!reports.is_empty()).then(|| json!(reports)),
            );
            // The failed specialists: as all_specialists_complete said, else from the calls.
            let failed = match data("all_specialists_complete") {
                Some(all) => {
                    if all["specialists"] != json!(reports) {
                        out.push(
                            "all_specialists_complete: reports differ from specialist_complete"
                                .into(),
                        );
                    }
                    let n = |f: &str| all[f].as_u64().unwrap_or(u64::MAX) as usize;
                    if n("totalSucceeded") != reports.len()
                        || n("totalFailed") != items(&all["failedSpecialists"]).len()
                    {
                        out.push(format!("all_specialists_complete: totals {all}"));
                    }
                    all["failedSpecialists"].clone()
                }
                None => {
                    let roles = roles.unwrap_or(Value::Null);
                    let f: Vec<Value> = items(&roles)
                        .iter()
                        .filter_map(|role| {
                            let key = role["roleKey"].as_str()?;
                            let stage = format!("specialist_{key}");
                            let c = failed_panel_calls(events)
                                .into_iter()
                                .find(|c| c["stage"] == stage.as_str())?;
                            Some(json!({ "roleKey": key, "roleTitle": role["roleTitle"],
                                         "model": c["model"], "error": c["error"]["message"] }))
                        })
                        .collect();
                    json!(f)
                }
            };
            let failed = (!is_empty(&failed)).then_some(failed);
            check(&mut out, "failedSpecialists", &r["failedSpecialists"], failed);
            check(&mut out, "synthesis", &r["synthesis"], data("synthesis_complete"));
        }
        "tournament" => {
            check(&mut out, "contestants", &r["contestants"], data("collect_complete"));
            check(&mut out, "bracket", &r["bracket"], data("bracket_seeded"));
            // The matches as decided, grouped by round: `{round, matchIndex, …data}`.
            let mut matches: Vec<Value> = payloads(events, "matchup_complete")
                .iter()
                .map(|e| {
                    let mut m = e["data"].clone();
                    m["round"] = e["round"].clone();
                    m["matchIndex"] = e["matchIndex"].clone();
                    m
                })
                .collect();
            matches.sort_by_key(|m| (m["round"].as_u64(), m["matchIndex"].as_u64()));
            let mut rounds: Vec<Value> = Vec::new();
            for m in matches {
                match rounds.last_mut() {
                    Some(last) if last["round"] == m["round"] => {
                        if let Some(a) = last["matches"].as_array_mut() {
                            a.push(m);
                        }
                    }
                    _ => rounds.push(json!({ "round": m["round"], "matches": [m] })),
                }
            }
            // Each round's winners and losers, as round_complete said, are its matches'.
            for e in payloads(events, "round_complete") {
                let n = &e["round"];
                let Some(round) = rounds.iter().find(|r| r["round"] == *n) else {
                    out.push(format!("round {n}: completed with no match decided"));
                    continue;
                };
                let seeds = |f: &str| -> Value {
                    items(&round["matches"]).iter().map(|m| m[f].clone()).collect()
                };
                if e["data"]["winners"] != seeds("winnerSeed")
                    || e["data"]["eliminated"] != seeds("loserSeed")
                {
                    out.push(format!("round {n}: round_complete differs from its matches"));
                }
            }
            check(&mut out, "rounds", &r["rounds"], (!rounds.is_empty()).then(|| json!(rounds)));
            check(&mut out, "champion", &r["champion"], data("winner_declared"));
            // The judge has no backup, whatever the server's `[fallback]` says.
            if !payloads(events, "fallback_start").is_empty() {
                out.push("fallback_start: the judge has no backup".into());
            }
        }
        "confidence_weighted" => {
            let mut answers: Vec<Value> =
                payloads(events, "answer_complete").iter().map(|e| e["data"].clone()).collect();
            answers.sort_by_key(|v| v["index"].as_u64());
            check(
                &mut out,
                "answers",
                &r["answers"],
                (!answers.is_empty()).then(|| json!(answers)),
            );
            if let Some(all) = data("all_answers_complete") {
                let failed =
                    failed_panel_calls(events).iter().filter(|c| c["stage"] == "answer").count();
                if all["count"] != json!(answers.len()) || all["failedCount"] != json!(failed) {
                    out.push(format!(
                        "all_answers_complete: {all} with {} answers and {failed} failed calls",
                        answers.len()
                    ));
                }
            }
            check(&mut out, "weights", &r["weights"], data("weights_calculated"));
            // Every answer that arrived is weighed, and nothing else.
            if let Some(w) = data("weights_calculated") {
                let mut weighed: Vec<Value> =
                    items(&w["weights"]).iter().map(|w| w["index"].clone()).collect();
                weighed.sort_by_key(Value::as_u64);
                let arrived: Vec<Value> = answers.iter().map(|a| a["index"].clone()).collect();
                if weighed != arrived {
                    out.push(format!("weights: answers {arrived:?} but weighed {weighed:?}"));
                }
            }
            check(&mut out, "synthesis", &r["synthesis"], data("synthesis_complete"));
        }
        "fact_check" => {
            let start = one("factcheck_start");
            if let Some(start) = start {
                if one("extract_complete").is_some() || one("generate_complete").is_some() {
                    let want = Some(start["config"]["contentSource"].clone());
                    check(&mut out, "contentSource", &r["contentSource"], want);
                }
            }
            check(&mut out, "generate", &r["generate"], data("generate_complete"));
            let extract = data("extract_complete");
            check(&mut out, "extract", &r["extract"], extract.clone());
            let claims = extract.as_ref().map(|e| e["claims"].clone());
            check(&mut out, "claims", &r["claims"], claims);
            // The content checked: the generated answer, when it was generated and read.
            if let (Some(g), Some(_)) = (data("generate_complete"), &extract) {
                check(&mut out, "content", &r["content"], Some(g["content"].clone()));
            }
            let mut checks: Vec<Value> =
                payloads(events, "checker_complete").iter().map(|e| e["data"].clone()).collect();
            checks.sort_by_key(|v| v["checkerIndex"].as_u64());
            check(&mut out, "checks", &r["checks"], (!checks.is_empty()).then(|| json!(checks)));
            // A checker is marked failed exactly when its call failed.
            for c in &checks {
                let key = format!("verify:{}", c["checkerIndex"]);
                let call =
                    failed_panel_calls(events).into_iter().find(|f| f["key"] == key.as_str());
                let want = call.map(|f| f["error"]["message"].clone());
                if (c["failed"] == true) != want.is_some()
                    || want.as_ref().is_some_and(|m| c["error"] != *m)
                {
                    out.push(format!(
                        "checker {}: failed {} but its call said {want:?}",
                        c["checkerIndex"], c["failed"]
                    ));
                }
            }
            let all = data("all_checkers_complete");
            for f in ["consensus", "counts", "usableCheckers"] {
                check(&mut out, f, &r[f], all.as_ref().map(|a| a[f].clone()));
            }
            if let Some(a) = &all {
                let usable = checks.iter().filter(|c| c["parseSuccess"] == true).count();
                if a["usableCheckers"] != json!(usable) {
                    out.push(format!(
                        "usableCheckers: {} but {usable} checks read",
                        a["usableCheckers"]
                    ));
                }
            }
            check(&mut out, "report", &r["report"], data("report_complete"));
            // A report a model wrote says how long it took (the server's own say nothing).
            if let Some(d) = data("report_complete") {
                if d["model"].is_string() != d["responseTimeMs"].is_u64() {
                    out.push(format!(
                        "report: by {} with responseTimeMs {}",
                        d["model"], d["responseTimeMs"]
                    ));
                }
            }
        }
        "decompose" => {
            if let Some(p) = data("plan_complete") {
                for (k, v) in p.as_object().into_iter().flatten() {
                    check(&mut out, &format!("plan.{k}"), &r["plan"][k], Some(v.clone()));
                }
            }
            let assigned = data("assignment_complete").map(|a| a["assignments"].clone());
            check(&mut out, "assignments", &r["assignments"], assigned);
            let stored: Vec<&Value> =
                items(&r["waves"]).iter().flat_map(|w| items(&w["tasks"])).collect();
            let ended = payloads(events, "task_complete");
            if stored.len() != ended.len() {
                out.push(format!(
                    "waves: {} tasks stored, {} published",
                    stored.len(),
                    ended.len()
                ));
            }
            for e in ended {
                let id = &e["data"]["taskId"];
                let got = stored
                    .iter()
                    .find(|t| t["taskId"] == *id)
                    .map_or(Value::Null, |t| (*t).clone());
                check(&mut out, &format!("task {id}"), &got, Some(e["data"].clone()));
            }
            check(&mut out, "assembly", &r["assembly"], data("assembly_complete"));
        }
        _ => {}
    }
    // A backup called in a primary's place: the primary's failure names it, and a stage says it
    // stood in for the primary exactly when it answered.
    for f in payloads(events, "fallback_start") {
        let entry = items(&r["failedModels"])
            .iter()
            .find(|m| m["model"] == f["fallbackFrom"] && m["stage"] == f["stage"]);
        if entry.map(|m| &m["fallbackTo"]) != Some(&f["model"]) {
            out.push(format!(
                "failedModels: {} does not name its backup {}",
                f["fallbackFrom"], f["model"]
            ));
        }
        let answered = payloads(events, "call_complete")
            .iter()
            .any(|c| c["key"] == f["key"] && c["ok"] == true);
        let named = events.iter().any(|e| {
            let d = &e["data"]["data"];
            d["fallbackFrom"] == f["fallbackFrom"] && d["model"] == f["model"]
        });
        if answered != named {
            out.push(format!(
                "backup {}: answered {answered}, but a stage naming it as standing in for {}: {named}",
                f["model"], f["fallbackFrom"]
            ));
        }
    }
    // Which panel calls failed, rebuilt from the call_failed rows, against the call events and
    // against the final stage event that carried them.
    let failed = failed_panel_calls(events);
    let want: Vec<(Value, Value)> =
        failed.iter().map(|c| (c["model"].clone(), c["error"].clone())).collect();
    let mut got: Vec<(Value, Value)> = items(&r["failedModels"])
        .iter()
        .map(|f| (f["model"].clone(), f["error"].clone()))
        .collect();
    let mut want_sorted = want.clone();
    want_sorted.sort_by_key(|p| p.0.to_string() + &p.1.to_string());
    got.sort_by_key(|p| p.0.to_string() + &p.1.to_string());
    if got != want_sorted {
        out.push(format!("failedModels: stored {got:?} but the calls said {want_sorted:?}"));
    }
    if r["partial"] != json!(!failed.is_empty()) {
        out.push(format!("partial: stored {} with {} failed call(s)", r["partial"], failed.len()));
    }
    let carried = events.iter().rev().map(|e| &e["data"]).find(|d| d.get("failedModels").is_some());
    if let Some(d) = carried {
        if d["failedModels"] != r["failedModels"] || d["partial"] != r["partial"] {
            out.push(format!(
                "failedModels: published {} but stored {}",
                d["failedModels"], r["failedModels"]
            ));
        }
    }
    out
}

#[derive(diesel::QueryableByName)]
struct StoredRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    stage_type: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    model: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    content: String,
}

/// The stage rows of a message, straight from the database (SQLite or PostgreSQL).
fn stored_rows(database_url: &str, message_id: &str) -> Vec<StoredRow> {
    let sql = "SELECT stage_type, model, content FROM deliberation_stages WHERE message_id = ";
    if database_url.starts_with("postgres") {
        let mut conn =
            diesel::pg::PgConnection::establish(database_url).expect("open the database");
        diesel::sql_query(format!("{sql}$1"))
            .bind::<diesel::sql_types::Text, _>(message_id)
            .load(&mut conn)
            .expect("read stage rows")
    } else {
        let path = database_url.strip_prefix("sqlite://").expect("a SQLite test database");
        let mut conn =
            diesel::sqlite::SqliteConnection::establish(path).expect("open the test database");
        diesel::sql_query(format!("{sql}?"))
            .bind::<diesel::sql_types::Text, _>(message_id)
            .load(&mut conn)
            .expect("read stage rows")
    }
}

/// What happened to one scenario.
struct Report {
    name: String,
    mode: String,
    faults: Vec<&'static str>,
    expect: Outcome,
    outcome: Outcome,
    calls_failed: usize,
    calls: usize,
    retries: usize,
    rows_expected: usize,
    rows_lost: usize,
    rows_duplicated: usize,
    rows_unannounced: usize,
    problems: Vec<String>,
    seconds: f64,
}

async fn run_scenario(app: &TestApp, s: &Scenario) -> Report {
    let started = Instant::now();
    let mut ws = app.ws().await;
    ws.send(json!({ "type": "start", "request": s.request })).await;
    let (ack, _) = ws.until("started", None).await;
    let run = ack["runId"].as_str().expect("a run id").to_string();
    let message_id = ack["messageId"].as_str().expect("a message id").to_string();
    let events = ws.events_until_end(&run).await;
    ws.close().await;
    let seconds = started.elapsed().as_secs_f64();
    let mut problems = Vec::new();
    assert_contiguous(&events, 1);
    let terminal = events.last().map(|e| e["event"].as_str().unwrap_or("").to_string());
    let stored = app.wait_done(&run).await;
    let want_status = match terminal.as_deref() {
        Some("complete") => "completed",
        Some("error") => "failed",
        other => panic!("{}{}: ended with {other:?}", s.name, s.backups.suffix()),
    };
    if stored["status"] != want_status {
        problems.push(format!("stored status {} after {:?}", stored["status"], terminal));
    }
    let calls = payloads(&events, "call_complete");
    let calls_failed = failed_panel_calls(&events).len();
    let outcome = match (want_status, calls_failed) {
        ("completed", 0) => Outcome::Completed,
        ("completed", _) => Outcome::Partial,
        _ => Outcome::Failed,
    };
    let mode = s.request["mode"].as_str().unwrap_or("council").to_string();
    let expected = expected_rows(&mode, &events);
    let mut got: BTreeMap<RowKey, usize> = BTreeMap::new();
    let mut rows_unannounced = 0;
    for row in stored_rows(&app.database_url, &message_id) {
        let Some(&(m, c)) = expected.shape.get(&row.stage_type) else {
            rows_unannounced += 1;
            continue;
        };
        let key = (row.stage_type, row.model.filter(|_| m), c.then_some(row.content));
        *got.entry(key).or_default() += 1;
    }
    let (mut lost, mut duplicated) = (0, 0);
    for (key, &want) in &expected.counts {
        let have = got.get(key).copied().unwrap_or(0);
        if have < want {
            lost += want - have;
            problems.push(format!("row {} of {:?} lost", key.0, key.1));
        }
    }
    for (key, &have) in &got {
        let want = expected.counts.get(key).copied().unwrap_or(0);
        if have > want {
            duplicated += have - want;
            problems.push(format!(
                "row {} of {:?} stored {have} times, announced {want}",
                key.0, key.1
            ));
        }
    }
    problems.extend(result_mismatches(&mode, &stored["result"], &events));
    Report {
        name: format!("{}{}", s.name, s.backups.suffix()),
        mode,
        faults: {
            // The request's models, and the backups that were called.
            let backups = payloads(&events, "fallback_start")
                .into_iter()
                .filter_map(|b| b["model"].as_str().map(str::to_string));
            let mut f: Vec<&str> = models_of(&s.request)
                .into_iter()
                .chain(backups)
                .filter_map(|m| fault_of(&m))
                .collect();
            f.sort();
            f.dedup();
            f
        },
        expect: s.expect,
        outcome,
        calls_failed,
        calls: calls.len(),
        retries: payloads(&events, "call_retry").len(),
        rows_expected: expected.counts.values().sum(),
        rows_lost: lost,
        rows_duplicated: duplicated,
        rows_unannounced,
        problems,
        seconds,
    }
}

fn render(reports: &[Report], total: Duration) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Fault injection: {} runs over HTTP through the sim-server, {:.1} s",
        reports.len(),
        total.as_secs_f64()
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "{:<44} {:<9} {:<9} {:>5} {:>7} {:>4} {:>4} {:>4} {:>3} {:>5}  faults",
        "scenario", "expected", "outcome", "calls", "failed", "retr", "rows", "lost", "dup", "secs"
    );
    for r in reports {
        let mark = if r.expect == r.outcome { "" } else { " (!)" };
        let _ = writeln!(
            t,
            "{:<44} {:<9} {:<9} {:>5} {:>7} {:>4} {:>4} {:>4} {:>3} {:>5.1}  {}{}",
            r.name,
            r.expect.name(),
            r.outcome.name(),
            r.calls,
            r.calls_failed,
            r.retries,
            r.rows_expected,
            r.rows_lost,
            r.rows_duplicated,
            r.seconds,
            r.faults.join(", "),
            mark
        );
    }
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "{:<22} {:>4} {:>9} {:>7} {:>6} {:>9}",
        "fault injected", "runs", "completed", "partial", "failed", "rows lost"
    );
    let mut kinds: Vec<&str> = reports.iter().flat_map(|r| r.faults.iter().copied()).collect();
    kinds.sort();
    kinds.dedup();
    let line = |t: &mut String, label: &str, rs: &[&Report]| {
        let n = |o: Outcome| rs.iter().filter(|r| r.outcome == o).count();
        let _ = writeln!(
            t,
            "{:<22} {:>4} {:>9} {:>7} {:>6} {:>9}",
            label,
            rs.len(),
            n(Outcome::Completed),
            n(Outcome::Partial),
            n(Outcome::Failed),
            rs.iter().map(|r| r.rows_lost).sum::<usize>()
        );
    };
    for k in kinds {
        let rs: Vec<&Report> = reports.iter().filter(|r| r.faults.contains(&k)).collect();
        line(&mut t, k, &rs);
    }
    let all: Vec<&Report> = reports.iter().collect();
    line(&mut t, "all runs", &all);
    let unannounced: usize = reports.iter().map(|r| r.rows_unannounced).sum();
    let dup: usize = reports.iter().map(|r| r.rows_duplicated).sum();
    let _ = writeln!(
        t,
        "\nrows lost: {}, rows duplicated: {dup}, rows stored without a stage event (a failed stage's partial rows): {unannounced}",
        reports.iter().map(|r| r.rows_lost).sum::<usize>()
    );
    let modes: std::collections::BTreeSet<&str> = reports.iter().map(|r| r.mode.as_str()).collect();
    let _ = writeln!(t, "modes: {}", modes.into_iter().collect::<Vec<_>>().join(", "));
    for r in reports.iter().filter(|r| !r.problems.is_empty()) {
        let _ = writeln!(t, "\n{}:", r.name);
        for p in &r.problems {
            let _ = writeln!(t, "  - {p}");
        }
    }
    t
}

/// Every mode with faults injected, all runs at once (on three servers: without `[fallback]`
/// backups, with backups that answer, and with backups that fail too): no stage row lost or
/// duplicated, results that rebuild to what was published, and every run ended.
#[actix_web::test]
async fn every_mode_keeps_its_rows_under_injected_faults() {
    let mut sim_models = HashMap::new();
    let soon = SimModelConfig { start_delay_ms: Some(1_500), ..Default::default() };
    sim_models.insert("sim/slowstart-soon".to_string(), soon);
    let mut apps = Vec::new();
    for backups in Backups::ALL {
        let app = spawn_with(Options {
            sim_over_http: true,
            sim_latency_ms: 40,
            sim_models: sim_models.clone(),
            fallback: backups.fallbacks(),
            ..Options::default()
        })
        .await;
        apps.push((backups, app));
    }
    let app_for = |b: Backups| &apps.iter().find(|(k, _)| *k == b).expect("a server").1;
    let started = Instant::now();
    let scenarios = scenarios();
    let reports = futures_util::future::join_all(
        scenarios.iter().map(|s| run_scenario(app_for(s.backups), s)),
    )
    .await;
    let total = started.elapsed();
    let table = render(&reports, total);
    println!("{table}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::create_dir_all(&path);
    std::fs::write(path.join("fault-report.txt"), &table).expect("write target/fault-report.txt");

    for (backups, app) in &apps {
        let (_, list) = app.get("/api/deliberations?limit=100").await;
        let running: Vec<&Value> = items(&list["live"])
            .iter()
            .chain(items(&list["recent"]))
            .filter(|r| r["status"] == "running")
            .collect();
        assert!(running.is_empty(), "runs left running ({backups:?}): {running:?}");
        let stats = app.sim_stats.as_ref().unwrap().snapshot();
        let reset_models: std::collections::BTreeSet<String> = scenarios
            .iter()
            .filter(|s| s.backups == *backups)
            .flat_map(|s| models_of(&s.request))
            .filter(|m| m.starts_with("sim/reset"))
            .collect();
        assert!(
            stats.resets >= reset_models.len() as u64,
            "every reset model ({}) broke a connection ({backups:?}): {stats:?}",
            reset_models.len()
        );
    }
    let lost: usize = reports.iter().map(|r| r.rows_lost).sum();
    let dup: usize = reports.iter().map(|r| r.rows_duplicated).sum();
    assert_eq!((lost, dup), (0, 0), "stage rows lost or duplicated:\n{table}");
    let problems: Vec<String> = reports
        .iter()
        .flat_map(|r| r.problems.iter().map(move |p| format!("{}: {p}", r.name)))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}\n{table}");
    for r in reports.iter().filter(|r| r.expect == Outcome::Completed) {
        assert_eq!(
            r.outcome,
            Outcome::Completed,
            "{}: retries recover every transient fault\n{table}",
            r.name
        );
        assert!(r.retries > 0, "{}: the faults were retried", r.name);
    }
    for (_, app) in apps {
        app.stop().await;
    }
}

/// An ended run written straight to the store with `n` events of about 1 KiB: a log whose
/// replay alone is more than a socket's send buffer holds (Linux grows one up to 4 MiB).
async fn seed_long_run(app: &TestApp, n: i64) -> String {
    use conclave::store::{Commit, NewRun, RunFinish, RunStatus, StoredEvent, Visibility};
    let store = app.engine.store();
    let id = uuid::Uuid::new_v4().to_string();
    let now = conclave::store::now_ms();
    let question = "A long log?".to_string();
    let run = NewRun {
        run_id: id.clone(),
        conversation_id: format!("c-{id}"),
        new_conversation: true,
        user_message_id: format!("u-{id}"),
        message_id: format!("m-{id}"),
        mode: "council".into(),
        question: question.clone(),
        request: json!({ "mode": "council", "question": question }),
        owner: None,
        visibility: Visibility::Team,
        created_at: now,
        lease: None,
        eval_id: None,
        attachments: Vec::new(),
    };
    store.create_run(run).await.unwrap();
    let filler = "x".repeat(1000);
    let mut events: Vec<StoredEvent> = (1..n)
        .map(|seq| StoredEvent {
            seq,
            event: "call_start".into(),
            data: json!({ "type": "call_start", "data": { "note": filler } }),
        })
        .collect();
    let end = json!({ "type": "complete", "data": {} });
    events.push(StoredEvent { seq: n, event: "complete".into(), data: end });
    let finish = RunFinish {
        run_id: id.clone(),
        message_id: format!("m-{id}"),
        status: RunStatus::Completed,
        error: None,
        answer: Some("done".into()),
        prompt_tokens: 0,
        completion_tokens: 0,
        cost: None,
        finished_at: now,
        outcome: None,
    };
    let commit = Commit {
        run_id: id.clone(),
        message_id: format!("m-{id}"),
        conversation_id: format!("c-{id}"),
        events,
        finish: Some(finish),
        ..Commit::default()
    };
    store.commit(std::sync::Arc::new(commit)).await.unwrap();
    id
}

/// A watcher that stops reading while two runs of every mode go on, behind the replay of a long
/// log that fills its socket (its TCP receive buffer is a few KiB; the server's send buffer
/// takes what it can, the rest waits in the server): the runs' events then fill its channel,
/// and the server drops it from their watchers (`conclave_watchers_lagged_total`) instead of
/// waiting for it or holding more for it. It is not closed for it, holds up no run, and when
/// it reads again each run's events come from where it stopped, from the store: every stored
/// event once and in order, to the end (only tokens may be missing: they are never stored).
async fn a_watcher_that_stops_reading_catches_up_on_every_mode(app: &TestApp) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message;
    let mut runs = vec![seed_long_run(app, 8000).await];
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let port = app.base.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    let mut req = app.ws_url.as_str().into_client_request().unwrap();
    req.headers_mut().insert("Authorization", format!("Bearer {}", app.token).parse().unwrap());
    let (slow, _) = tokio_tungstenite::client_async(req, stream).await.unwrap();
    let (mut to_server, mut slow) = slow.split();
    let watch =
        |run: &str| Message::text(json!({ "type": "watch", "run": run, "since": 0 }).to_string());
    for body in crate::crash::requests().into_iter().chain(crate::crash::requests()) {
        let started = app.start(body).await;
        let run = started["runId"].as_str().unwrap().to_string();
        to_server.send(watch(&run)).await.unwrap();
        runs.push(run);
    }
    // Last (its watches are read while it can still write), the long log: its replay fills the
    // socket, and the runs' events pile up behind it.
    let lagged = "conclave_watchers_lagged_total{feed=\"run\"}";
    let lagged_before = counter(&metrics(app).await, lagged);
    to_server.send(watch(&runs[0])).await.unwrap();
    // It reads nothing until every run has ended, but it is not silent: a client that says
    // nothing for long is closed, not lagging.
    let alive = actix_web::rt::spawn(async move {
        loop {
            let _ = to_server.send(Message::Pong(Default::default())).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    for run in &runs[1..] {
        assert_eq!(app.wait_done(run).await["status"], "completed", "{run}");
    }
    alive.abort();
    let lagged_after = counter(&metrics(app).await, lagged);
    assert!(lagged_after > lagged_before, "the slow watcher's buffer never filled");
    let mut seen: HashMap<String, Vec<(i64, String)>> = HashMap::new();
    let mut ended = 0;
    while ended < runs.len() {
        let msg = tokio::time::timeout(Duration::from_secs(30), slow.next()).await;
        let msg = msg.expect("the rest of the events within 30 s").unwrap().unwrap();
        let Message::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(text.as_str()).unwrap();
        if v["type"] != "event" || v["event"] == "token" {
            continue;
        }
        let events = seen.entry(v["run"].as_str().unwrap().to_string()).or_default();
        let seq = v["seq"].as_i64().unwrap();
        assert!(events.last().is_none_or(|(last, _)| seq > *last), "seq {seq} again: {v}");
        events.push((seq, v["event"].as_str().unwrap().to_string()));
        let end = matches!(v["event"].as_str(), Some("complete" | "error" | "cancelled"));
        ended += usize::from(end);
    }
    // What it got is what the store holds, as a fresh watcher replays it.
    let mut ws = app.ws().await;
    for run in &runs {
        ws.send(json!({ "type": "watch", "run": run, "since": 0 })).await;
        let stored: Vec<(i64, String)> = ws
            .events_until_end(run)
            .await
            .iter()
            .filter(|e| e["event"] != "token")
            .map(|e| (e["seq"].as_i64().unwrap(), e["event"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(seen.get(run), Some(&stored), "{run}");
    }
    ws.close().await;
}

/// Answers that take 1.5 s: the runs go on (and stream tokens) long after the long log's replay
/// has filled the socket, so their events pile up in the watcher's channel.
fn slow_watcher_options() -> Options {
    Options { sim_latency_ms: 1500, ..Options::default() }
}

#[actix_web::test]
async fn a_watcher_that_stops_reading_catches_up_on_every_mode_on_sqlite() {
    let app = spawn_with(Options { sqlite_only: true, ..slow_watcher_options() }).await;
    a_watcher_that_stops_reading_catches_up_on_every_mode(&app).await;
    app.stop().await;
}

#[actix_web::test]
async fn a_watcher_that_stops_reading_catches_up_on_every_mode_on_postgresql() {
    let Some(url) = crate::postgres::fresh_database() else { return };
    let app =
        spawn_with(Options { database_url: Some(url.clone()), ..slow_watcher_options() }).await;
    a_watcher_that_stops_reading_catches_up_on_every_mode(&app).await;
    app.stop().await;
    crate::postgres::drop_database(&url);
}
