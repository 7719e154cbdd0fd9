//! Property tests at scale ("fuzzing" on stable Rust) of everything that reads input Conclave
//! does not control: model output through every mode's parsers and whole state machines,
//! WebSocket client messages, and start requests. Nothing may panic, and parsed values keep
//! their invariants (a ranking names only offered labels, scores stay on their scale, an
//! estimate is a finite number...).
//!
//! The inputs are random text built from the tokens the parsers look for, mixed with random
//! Unicode, huge numbers and markdown; random JSON; and mutations of valid requests. Every file
//! of `tests/fuzz_corpus/` (nasty inputs found or feared, plus a few generated here: 100 KB
//! lines, deep nesting) also goes through every parser and decoder.
//!
//! `CONCLAVE_FUZZ_CASES=N` sets the number of cases of the cheap properties (default 2 000;
//! whole-run properties use a fifth of it). Failures are not persisted: add a case that
//! fails to the corpus instead.

use std::path::PathBuf;
use std::sync::OnceLock;

use conclave::modes::{
    self, blueprint, brainstorm, chain, clarity, common, confidence_weighted, council, debate,
    decompose, delphi, fact_check, jury, peer_review, red_team, specialist_panel, tournament,
    voting, CallError, CallErrorKind, CallReply, Defaults, Effect, ModeKind, RunContext,
};
use conclave::web::client_msg::{self, ClientMsg, MAX_RUN_ID_CHARS};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{json, Map, Value};

fn cases() -> u32 {
    static N: OnceLock<u32> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("CONCLAVE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    })
}

fn config(divisor: u32) -> Config {
    Config {
        cases: (cases() / divisor).max(1),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

// ---- generators -----------------------------------------------------------------------------

/// Pieces the parsers look for, and pieces that have broken parsers elsewhere.
const TOKENS: &[&str] = &[
    "### Risk Assessment",
    "**Key Findings**",
    "### Consolidated Risk Matrix",
    "| Data Protection |",
    "Data Protection:",
    "4/5",
    "3.5",
    "Critical",
    "| Domain | Level | Concern |",
    "FINAL RANKING:",
    "**FINAL RANKING:**",
    "1.",
    "2)",
    "3 -",
    "#",
    "##",
    "**",
    "*",
    "_",
    "`",
    "```json",
    "```",
    "|",
    "---",
    ">",
    "- ",
    "Response A",
    "Response B",
    "Response C",
    "Response Z",
    "response a",
    "Response AA",
    "VOTE:",
    "VOTE: Response",
    "**VOTE:**",
    "VERDICT:",
    "APPROVE",
    "REVISE",
    "REJECT",
    "approve",
    "| **Accuracy** | 8/10 |",
    "| Completeness | 11/10 |",
    "Accuracy:",
    "Clarity: 7.5",
    "Relevance: 0",
    "Actionability: -3",
    "Score: 9/10",
    "Recommendations",
    "Key Strengths",
    "DECISION:",
    "DECISION: REVISE",
    "**Decision:** **MERGE**",
    "Decision - stand",
    "REASONING:",
    "REVISED RESPONSE:",
    "ESTIMATE:",
    "ESTIMATE: ~40",
    "CONFIDENCE:",
    "HIGH",
    "LOW",
    "TYPE: NUMERIC",
    "TYPE: QUALITATIVE",
    "OPTIONS: [\"a\", \"b\"]",
    "OPTIONS:",
    "ANSWER:",
    "ANSWER: 2",
    "Option 3",
    "million",
    "billion",
    "k",
    "M",
    "$",
    "%",
    "~",
    "-",
    "–",
    "to",
    "e",
    "e308",
    "1e308",
    "1e309",
    "-1e308",
    "1.7976931348623157e308",
    "0",
    "-0",
    "00000",
    "42,000,000",
    "4.2e7",
    "35-45",
    "1e308-1e308",
    "1e300 million",
    "999999999999999999999",
    "18446744073709551616",
    "NaN",
    "inf",
    ".5",
    "5.",
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "{\"scores\":",
    "\"evidence_quality\": 7",
    "\"first_principles_coherence\": 11",
    "\"critique\": \"",
    "\"issues\": [",
    "Title:",
    "TITLE:",
    "Evidence Quality: 6",
    "First-Principles Coherence: 8/10",
    "\u{0}",
    "\u{feff}",
    "\u{202e}",
    "\u{200b}",
    "İ",
    "ß",
    "ﬁ",
    "Ǆ",
    "ẞ",
    "😀",
    "👩‍👩‍👧",
    "e\u{301}",
    "\r\n",
    "\r",
    "\t",
    "  ",
    "\n\n",
];

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(TOKENS).prop_map(str::to_string),
        2 => any::<String>(),
        2 => any::<f64>().prop_map(|f| f.to_string()),
        1 => any::<i64>().prop_map(|i| i.to_string()),
        1 => "[0-9]{1,30}(\\.[0-9]{0,20})?",
        1 => "[A-Za-z ]{0,20}",
    ]
}

/// Text shaped like model output: tokens, numbers and noise, joined by spaces and newlines.
fn model_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        (piece(), proptest::sample::select(&["", " ", "\n", ": "][..])),
        0..60,
    )
    .prop_map(|parts| parts.into_iter().map(|(p, sep)| p + sep).collect())
}

fn labels() -> impl Strategy<Value = Vec<String>> {
    (1usize..9).prop_map(|n| (0..n).map(common::label).collect())
}

fn options() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(piece(), 0..11)
}

/// Any JSON value, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|i| json!(i)),
        any::<f64>().prop_map(|f| json!(f)),
        piece().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Keys: the ones requests and messages use (so mutations hit real fields) and noise.
fn key() -> impl Strategy<Value = String> {
    const KEYS: &[&str] = &[
        "mode",
        "question",
        "conversationId",
        "modeConfig",
        "visibility",
        "councilModels",
        "chairmanModel",
        "timeoutMs",
        "models",
        "content",
        "originalQuestion",
        "jurorModels",
        "foremanModel",
        "panelistModels",
        "facilitatorModel",
        "maxRounds",
        "numericConvergenceThreshold",
        "qualitativeConvergenceThreshold",
        "questionType",
        "options",
        "globalTimeoutMs",
        "title",
        "context",
        "discussion",
        "skeptic",
        "advocate",
        "generalist",
        "arbiter",
        "type",
        "id",
        "run",
        "since",
        "request",
    ];
    prop_oneof![4 => proptest::sample::select(KEYS).prop_map(str::to_string), 1 => any::<String>()]
}

/// A valid start body for each mode (the registry's example for a mode not listed here).
fn valid_body(mode: ModeKind) -> Value {
    match mode.as_str() {
        "council" => json!({"mode": "council", "question": "q",
            "councilModels": ["sim/a", "sim/b"], "chairmanModel": "sim/a", "timeoutMs": 60000}),
        "vote" => json!({"mode": "vote", "question": "q",
            "modeConfig": {"models": ["sim/a", "sim/b", "sim/c"], "chairmanModel": "sim/d"}}),
        "jury" => json!({"mode": "jury", "question": "q", "modeConfig": {"content": "c",
            "originalQuestion": "o", "jurorModels": ["sim/a", "sim/b", "sim/c"],
            "foremanModel": "sim/d", "timeoutMs": 60000}}),
        "debate" => json!({"mode": "debate", "question": "q",
            "modeConfig": {"models": ["sim/a", "sim/b", "sim/c"], "timeoutMs": 60000}}),
        "delphi" => json!({"mode": "delphi", "question": "q", "modeConfig": {
            "panelistModels": ["sim/a", "sim/b", "sim/c"], "facilitatorModel": "sim/d",
            "maxRounds": 3, "questionType": "qualitative", "options": ["x", "y"]}}),
        "clarity" => json!({"mode": "clarity", "modeConfig": {"content": "c",
            "models": {"skeptic": "sim/a", "arbiter": "sim/b"}, "discussion": "always"}}),
        _ => (mode.spec().example)(),
    }
}

/// A valid body with one field (at the top or in `modeConfig`) replaced, added or removed.
fn mutated_body() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(ModeKind::all()),
        any::<bool>(),
        key(),
        proptest::option::of(json_value()),
    )
        .prop_map(|(mode, in_config, k, v)| {
            let mut body = valid_body(mode);
            let target = match body.get_mut("modeConfig") {
                Some(Value::Object(cfg)) if in_config => cfg,
                _ => body.as_object_mut().expect("an object"),
            };
            match v {
                Some(v) => target.insert(k, v),
                None => target.remove(&k),
            };
            body
        })
}

fn defaults() -> Defaults {
    Defaults {
        offline: true,
        stage_timeout_ms: 120_000,
        fallback: Default::default(),
        ..Default::default()
    }
}

// ---- invariants, shared by the properties and the corpus ------------------------------------

fn check_text_parsers(text: &str, labels: &[String], options: &[String]) {
    let ranking = council::parse_ranking(text, labels);
    for l in &ranking {
        assert!(labels.contains(l), "ranking names {l:?}, not offered");
    }
    let mut seen = ranking.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), ranking.len(), "a label ranked twice: {ranking:?}");

    if let Some(v) = voting::parse_vote(text, labels) {
        assert!(labels.contains(&v), "vote for {v:?}, not offered");
    }

    let scores = jury::parse_scores(text);
    for i in 0..5 {
        if let Some(s) = scores.get(i) {
            assert!((1..=10).contains(s), "juror score {s} off the 1-10 scale");
        }
    }
    let _ = jury::parse_verdict(text);
    let _ = jury::section_items(text, "Recommendations");
    let a = jury::assess("m", text, 1);
    if let Some(avg) = a.average {
        assert!((1.0..=10.0).contains(&avg), "juror average {avg}");
    }

    let r = debate::parse_revision(text);
    if let Some(d) = &r.decision {
        assert!(
            ["REVISE", "STAND", "MERGE"].contains(&d.to_uppercase().as_str()),
            "decision {d:?}"
        );
    }

    if let Some((v, _)) = delphi::parse_estimate(text) {
        assert!(v.is_finite(), "estimate {v} is not finite");
    }
    if let Some(a) = delphi::parse_answer(text, options) {
        if !options.is_empty() {
            assert!(options.contains(&a), "answer {a:?} is not an option");
        }
    }
    if let Some(c) = delphi::parse_classification(text) {
        assert!(c.options.as_ref().is_none_or(|o| o.len() <= 10));
    }
    let _ = delphi::parse_confidence(text);
    let _ = delphi::parse_reasoning(text);

    let (scores, _) = clarity::parse_scores(text);
    for s in scores.iter().flatten() {
        assert!((0.0..=10.0).contains(s), "clarity score {s} off the 0-10 scale");
    }
    if let Some(w) = clarity::weighted(&scores) {
        assert!((0.0..=10.0).contains(&w), "weighted score {w}");
    }
    let _ = clarity::last_json_object(text);
    let reply = CallReply {
        key: "k".into(),
        model: "m".into(),
        response_time_ms: 1,
        result: Ok(text.to_string()),
        usage: None,
    };
    let _ = clarity::read_verdict("skeptic", &reply);

    let attack = red_team::read_attack(text);
    for (i, f) in attack.findings.iter().enumerate() {
        assert_eq!(f.number, i + 1, "findings are numbered 1..k");
        assert!(red_team::SEVERITIES.contains(&f.severity.as_str()), "severity {:?}", f.severity);
    }
    assert!(!attack.no_flaws || attack.findings.is_empty(), "no flaws with findings");
    let defense = red_team::read_defense(text, &attack.findings);
    assert_eq!(defense.responses.len(), attack.findings.len(), "one verdict per finding");
    for r in &defense.responses {
        assert!(
            ["ACCEPT", "REBUT", "UNADDRESSED"].contains(&r.verdict.as_str()),
            "{:?}",
            r.verdict
        );
    }
    let synthesis = red_team::read_synthesis(text);
    assert!(synthesis
        .hardening_confidence
        .as_deref()
        .is_none_or(|c| ["High", "Medium", "Low"].contains(&c)));
    for rubric in
        [peer_review::ReviewType::ArchitectureReview, peer_review::ReviewType::ComplianceAudit]
            .iter()
            .filter_map(|t| t.rubric())
    {
        let review = peer_review::read_review(text, &rubric);
        assert_eq!(review.scores.len(), rubric.criteria.len(), "one score per criterion");
        for (s, c) in review.scores.iter().zip(&rubric.criteria) {
            assert_eq!((&s.criterion, s.weight), (&c.name, c.weight), "the rubric's own");
            assert!(s.score.is_none_or(|v| (1..=5).contains(&v)), "score {:?} off 1-5", s.score);
        }
        assert_eq!(review.parse_success, review.scores.iter().any(|s| s.score.is_some()));
        for (i, f) in review.findings.iter().enumerate() {
            assert_eq!(f.number, i + 1, "findings are numbered 1..k");
            assert!(peer_review::SEVERITIES.contains(&f.severity.as_str()), "{:?}", f.severity);
            assert!(f
                .criterion
                .as_ref()
                .is_none_or(|c| rubric.criteria.iter().any(|k| &k.name == c)));
        }
        if let Some(o) = peer_review::overall(&review.scores) {
            assert!((1.0..=5.0).contains(&o), "overall {o}");
        }
    }
    let extraction = fact_check::read_claims(text);
    for (i, c) in extraction.claims.iter().enumerate() {
        assert_eq!((c.number, c.id.clone()), (i + 1, format!("claim_{}", i + 1)), "renumbered");
        assert!(!c.text.trim().is_empty(), "a claim has its words");
        assert!(c.claim_type.as_deref().is_none_or(|t| fact_check::TYPES.contains(&t)));
    }
    let claims = if extraction.claims.is_empty() {
        fact_check::read_claims("CLAIM 1: a\nCLAIM 2: b").claims
    } else {
        extraction.claims
    };
    let check = fact_check::read_check(text, &claims);
    assert_eq!(check.verifications.len(), claims.len(), "one verification per claim");
    for v in &check.verifications {
        assert!(fact_check::VERDICTS.contains(&v.verdict.as_str()), "{:?}", v.verdict);
        assert!(v.addressed || (v.verdict == "UNVERIFIABLE" && v.confidence == "LOW"));
        assert!(
            v.correction.is_none() || v.verdict == "DISPUTED",
            "a correction only when disputed"
        );
    }
    assert_eq!(check.parse_success, check.verifications.iter().any(|v| v.addressed));
    assert!(fact_check::read_score(text).is_none_or(|s| s <= 100));
    for item in peer_review::read_action_items(text) {
        assert!(item.severity.as_deref().is_none_or(|s| peer_review::SEVERITIES.contains(&s)));
        assert!(item.effort.as_deref().is_none_or(|e| ["Low", "Medium", "High"].contains(&e)));
    }
    let criteria: Vec<String> =
        ["Data Protection", "Attack Surface", "|", ""].iter().map(|s| s.to_string()).collect();
    let report = specialist_panel::read_report(text, &criteria);
    assert_eq!(report.criteria_scores.len(), criteria.len(), "one score per criterion");
    for c in &report.criteria_scores {
        assert!(c.score.is_none_or(|s| (1..=5).contains(&s)), "rating {:?} off 1-5", c.score);
    }
    assert!(report.average_score.is_none_or(|a| (1.0..=5.0).contains(&a)));
    assert_eq!(report.parse_success, report.average_score.is_some());
    assert!(report.top_recommendations.len() <= 3, "at most 3 recommendations");
    let synthesis = specialist_panel::read_synthesis(text);
    for row in &synthesis.risk_matrix {
        let level = row.level.as_deref();
        assert!(level.is_none_or(|l| specialist_panel::LEVELS.contains(&l)), "level {level:?}");
    }
    match &synthesis.top_risk {
        Some(top) => assert!(top.level.is_some() && synthesis.risk_matrix.contains(top)),
        None => assert!(synthesis.risk_matrix.iter().all(|r| r.level.is_none())),
    }
    let c = confidence_weighted::parse_confidence(text);
    assert!((0.0..=1.0).contains(&c.value), "confidence {} off 0-1", c.value);
    assert!(c.parsed_successfully || (c.value == 0.5 && !c.clamped), "a guessed confidence");
    let a = confidence_weighted::read_answer(0, "m", text, 0);
    assert!(a.response.lines().all(|l| text.contains(l.trim())), "an answer line not in the text");
    let (synthesis, notes) = confidence_weighted::parse_synthesis(text);
    assert!(synthesis.len() + notes.len() <= text.len(), "a synthesis longer than its reply");
    let verdict = tournament::parse_verdict(text);
    if let Some(side) = verdict.winner {
        let letter = match side {
            tournament::Side::A => 'a',
            tournament::Side::B => 'b',
        };
        assert!(text.to_lowercase().contains(letter), "a side the reply never names: {side:?}");
    }
    for note in chain::editor_notes(text) {
        assert!(!note.contains(']'), "a note runs past its bracket: {note:?}");
    }
    let outline = blueprint::read_outline(text);
    assert!(outline.sections.len() <= blueprint::MAX_SECTIONS, "over 20 sections kept");
    for (i, s) in outline.sections.iter().enumerate() {
        assert_eq!(s.number, i + 1, "sections are numbered 1..n");
        assert!(!s.title.trim().is_empty(), "an empty section title");
        assert!(s.key_topics.iter().all(|t| !t.trim().is_empty()), "an empty key topic");
        assert!(!s.length_defaulted || s.length == blueprint::Length::Medium, "a guessed length");
        let (covered, missing) = blueprint::topic_coverage(text, &s.key_topics);
        assert_eq!(covered.len() + missing.len(), s.key_topics.len(), "a topic lost or doubled");
    }
    assert!(!outline.document_title.trim().is_empty(), "an empty document title");
    for marker in blueprint::todo_markers(text) {
        assert!(!marker.contains(']'), "a TODO marker runs past its bracket: {marker:?}");
    }

    let ideas = brainstorm::read_ideas(text);
    assert!(ideas.ideas.len() <= brainstorm::MAX_IDEAS, "over ten ideas kept");
    assert!(ideas.ideas.iter().all(|(t, _)| !t.trim().is_empty()), "an idea without a title");
    let known: Vec<brainstorm::Idea> = (1..=4)
        .map(|k| brainstorm::Idea {
            id: format!("model_0_idea_{k}"),
            title: format!("t{k}"),
            description: String::new(),
            model: "m".into(),
            source_label: "Model A".into(),
        })
        .collect();
    let clustering = brainstorm::read_clusters(text, &known, 3);
    assert!(clustering.clusters.len() <= 3, "more clusters than K");
    let placed: usize = clustering.clusters.iter().map(|c| c.idea_ids.len()).sum();
    assert_eq!(placed + clustering.unclustered.len(), known.len(), "an idea placed twice or lost");
    for s in brainstorm::read_scores(text, &clustering.clusters) {
        for v in [s.novelty, s.feasibility, s.impact] {
            assert!((1..=5).contains(&v), "a score off 1-5: {v}");
        }
    }

    let title = common::clean_title(text, text);
    assert!(!title.trim().is_empty(), "an empty title");
    let _ = common::word_count(text);
    let plan = decompose::read_plan(text, decompose::MAX_TASKS);
    assert!(plan.tasks.len() <= decompose::MAX_TASKS, "over maxTasks kept");
    for (i, t) in plan.tasks.iter().enumerate() {
        assert!(plan.tasks[..i].iter().all(|o| o.id != t.id), "a repeated task id");
        assert!(!t.title.trim().is_empty(), "an empty task title");
        for d in &t.dependencies {
            assert!(d != &t.id && plan.tasks.iter().any(|o| &o.id == d), "a dangling dependency");
        }
    }
    let s = decompose::schedule(&plan.tasks, true).expect("a repaired plan always schedules");
    assert!(decompose::unschedulable(&s.tasks).is_empty(), "a repaired plan with a cycle");
}

fn check_decode(text: &str) {
    match client_msg::decode(text) {
        Ok(d) => match d.msg {
            ClientMsg::Watch { run, since } => {
                assert!(since >= 0);
                assert!(!run.is_empty() && run.chars().count() <= MAX_RUN_ID_CHARS);
            }
            ClientMsg::Unwatch { run } | ClientMsg::Cancel { run } => {
                assert!(!run.is_empty() && run.chars().count() <= MAX_RUN_ID_CHARS);
            }
            ClientMsg::Start { request } => assert!(request.is_object()),
            ClientMsg::Dashboard | ClientMsg::Ping => {}
        },
        Err(e) => {
            let v = e.to_json();
            assert_eq!(v["type"], "error");
            assert!(!e.message.is_empty());
            // The error never echoes more than a bounded part of the input.
            assert!(e.message.len() < 1_000, "{} bytes of error", e.message.len());
        }
    }
}

fn check_validate(body: &Value) {
    match modes::validate(body, &defaults()) {
        Ok(req) => {
            assert!(!req.question.trim().is_empty());
            assert!(req.question.chars().count() <= modes::request::MAX_QUESTION_CHARS);
            assert!(!req.models.is_empty());
            assert!(req.models.iter().all(|m| !m.is_empty() && !m.contains('\0')));
            // Every key it accepted is one its schema lists.
            let obj = body.as_object().expect("an accepted body is an object");
            let top = req.mode.spec().top_level;
            for k in obj.keys() {
                let known = ["mode", "question", "conversationId", "modeConfig", "visibility"]
                    .contains(&k.as_str())
                    || top.contains(&k.as_str());
                assert!(known, "accepted unknown key {k:?}");
            }
        }
        Err(e) => {
            assert!(!e.field.is_empty(), "an error names no field");
            assert!(e.field.len() <= 200, "field name of {} bytes", e.field.len());
            assert!(!e.message.is_empty());
        }
    }
}

/// Runs a mode to its end, answering every call with the next of `replies` (cycled; `None`
/// is a failed call) and firing timers when nothing else is pending.
fn run_mode(body: &Value, replies: &[Option<String>]) {
    let req = match modes::validate(body, &defaults()) {
        Ok(r) => r,
        Err(_) => return,
    };
    let ctx = RunContext {
        run_id: "fuzz-run".into(),
        conversation_id: "fuzz-conv".into(),
        message_id: "fuzz-msg".into(),
        question: req.question.clone(),
        history: Vec::new(),
        new_conversation: true,
        seed: common::seed_from_run_id("fuzz-run"),
        structured: Default::default(),
        material: "".into(),
    };
    // A request that passed validation always builds its mode: a validated config that the
    // mode then refuses is a bug the fuzzer must report.
    let mut mode = modes::instantiate(&req, ctx).expect("a validated request builds its mode");
    let mut run = Driver::default();
    run.apply(mode.start());
    let mut next = 0usize;
    // As the engine does: replies until the run fails or nothing is in flight (after a
    // finish, calls in flight such as the title are still answered), timers when idle.
    for _ in 0..10_000 {
        if run.failed {
            break;
        }
        let Some(spec) = run.pending.pop_front() else {
            match run.timers.pop() {
                Some(t) if run.ends == 0 => {
                    let effects = mode.on_timer(&t);
                    run.apply(effects);
                    continue;
                }
                _ => break,
            }
        };
        let answer = if replies.is_empty() { None } else { replies[next % replies.len()].clone() };
        next += 1;
        let result =
            answer.ok_or_else(|| CallError::new(CallErrorKind::Http, Some(500), "fuzzed failure"));
        let reply = CallReply {
            key: spec.key.clone(),
            model: spec.model.clone(),
            response_time_ms: 5,
            result,
            usage: None,
        };
        let effects = mode.on_reply(reply);
        run.apply(effects);
    }
    assert!(run.failed || run.pending.is_empty(), "the run never settled");
    assert_eq!(run.ends, 1, "a run ends exactly once (finished or failed)");
    // The stored rows rebuild a result, as GET /api/deliberations/{id} does.
    let _ = modes::load_result(req.mode, &run.rows).to_string();
}

/// What the engine would be holding for a run under test.
#[derive(Default)]
struct Driver {
    pending: std::collections::VecDeque<modes::CallSpec>,
    timers: Vec<String>,
    rows: Vec<modes::StageRow>,
    ends: usize,
    failed: bool,
}

impl Driver {
    fn apply(&mut self, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::Call(spec) => self.pending.push_back(spec),
                Effect::Timer { key, .. } => self.timers.push(key),
                Effect::Store(row) => self.rows.push(row),
                Effect::Finish { .. } => self.ends += 1,
                Effect::Fail { .. } => {
                    self.ends += 1;
                    self.failed = true;
                }
                // Every event payload serialises (NaN and infinities included).
                Effect::Emit { data, .. } => drop(data.to_string()),
                Effect::SetTitle(t) => assert!(!t.trim().is_empty(), "an empty title"),
                Effect::FlagForReview { .. } => {}
            }
        }
    }
}

// ---- properties -----------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(1))]

    #[test]
    fn text_parsers_never_panic_and_keep_their_invariants(
        text in model_text(), labels in labels(), options in options()
    ) {
        check_text_parsers(&text, &labels, &options);
    }

    #[test]
    fn text_parsers_take_arbitrary_unicode(text in any::<String>(), labels in labels()) {
        check_text_parsers(&text, &labels, &[]);
    }

    #[test]
    fn delphi_statistics_take_any_finite_numbers(
        values in proptest::collection::vec(
            prop_oneof![any::<f64>().prop_filter("finite", |f| f.is_finite()), Just(0.0), Just(f64::MAX), Just(-f64::MAX)],
            0..12),
        answers in proptest::collection::vec(piece(), 0..12),
    ) {
        let s = delphi::numeric_stats(&values, Default::default());
        let _ = serde_json::to_string(&s).expect("serialisable");
        if !values.is_empty() && s.mean.is_finite() {
            prop_assert!(s.min <= s.max);
        }
        let q = delphi::qualitative_stats(&answers, Default::default());
        let _ = serde_json::to_string(&q).expect("serialisable");
        let _ = delphi::fmt_num(values.first().copied().unwrap_or(0.0));
    }

    #[test]
    fn websocket_messages_decode_or_are_refused(text in prop_oneof![
        any::<String>(),
        json_value().prop_map(|v| v.to_string()),
        (proptest::sample::select(&["start", "watch", "unwatch", "cancel", "dashboard", "ping", "auth", ""][..]),
         proptest::collection::vec((key(), json_value()), 0..5))
            .prop_map(|(t, kv)| {
                let mut m: Map<String, Value> = kv.into_iter().collect();
                m.insert("type".into(), json!(t));
                Value::Object(m).to_string()
            }),
    ]) {
        check_decode(&text);
    }

    #[test]
    fn start_requests_are_validated_or_refused_by_name(body in prop_oneof![
        json_value(),
        mutated_body(),
    ]) {
        check_validate(&body);
    }
}

proptest! {
    #![proptest_config(config(5))]

    #[test]
    fn every_mode_runs_to_one_end_on_any_model_output(
        body in prop_oneof![
            proptest::sample::select(ModeKind::all()).prop_map(valid_body),
            mutated_body(),
        ],
        replies in proptest::collection::vec(proptest::option::weighted(0.85, model_text()), 0..12),
    ) {
        run_mode(&body, &replies);
    }
}

// ---- the corpus -----------------------------------------------------------------------------

fn corpus() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fuzz_corpus")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt" || e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus is missing");
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).expect("corpus file");
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                String::from_utf8_lossy(&bytes).into_owned(),
            )
        })
        .collect();
    // Too big or too regular to check in.
    out.push(("generated: 100 KB line".into(), "Response A ".repeat(10_000)));
    out.push(("generated: 1 MB of digits".into(), "9".repeat(1 << 20)));
    out.push(("generated: 100 KB of newlines".into(), "\n".repeat(100_000)));
    out.push((
        "generated: 10 000 numbered lines".into(),
        (0..10_000).map(|i| format!("{i}. Response {}\n", common::label(i % 30))).collect(),
    ));
    out.push(("generated: deep JSON".into(), "[".repeat(10_000) + &"]".repeat(10_000)));
    out.push((
        "generated: deep object".into(),
        "{\"a\":".repeat(20_000) + "1" + &"}".repeat(20_000),
    ));
    out.push((
        "generated: many headers".into(),
        "FINAL RANKING:\nESTIMATE: 1e308-1e308\n".repeat(5_000),
    ));
    out
}

#[test]
fn the_corpus_goes_through_every_parser_and_decoder() {
    let labels: Vec<String> = (0..5).map(common::label).collect();
    let options = vec!["Yes".to_string(), "No".to_string(), "İ".to_string()];
    for (name, text) in corpus() {
        let r = std::panic::catch_unwind(|| {
            check_text_parsers(&text, &labels, &options);
            check_text_parsers(&text, &[], &[]);
            check_decode(&text);
            // Whole runs take the first 20 KB (a run calls the parsers dozens of times).
            let reply: String = text.chars().take(20_000).collect();
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                check_validate(&v);
                check_decode(&json!({"type": "start", "request": v}).to_string());
                run_mode(&v, &[Some(reply.clone())]);
            }
            // The text as every string field of every mode's request, and as a whole run's
            // model output.
            for mode in ModeKind::all() {
                let mut body = valid_body(mode);
                body["question"] = json!(text);
                check_validate(&body);
                if let Some(cfg) = body.get_mut("modeConfig").and_then(Value::as_object_mut) {
                    cfg.insert("content".into(), json!(text));
                }
                check_validate(&body);
                run_mode(&valid_body(mode), &[Some(reply.clone()), None]);
            }
        });
        assert!(r.is_ok(), "corpus input {name} made a parser panic");
    }
}

/// Found by the fuzzer: a range whose ends are finite but whose sum is not (`1e308-1e308`),
/// or a scale word that takes a finite number past f64::MAX (`1e300-2e300 trillion`), gives an
/// infinite estimate, and the round's mean and spread follow (`null` in the JSON).
#[test]
fn delphi_estimates_stay_finite() {
    // What each reads as, stated: a check of only the estimates that were read would pass on a
    // parser that reads nothing. None: no finite estimate is there to read.
    let cases: [(&str, Option<f64>); 5] = [
        ("1e308-1e308 0", None),
        ("ESTIMATE: 1e308-1e308", Some(1e308)),
        ("ESTIMATE: 1e307-2e307", Some(1.5e307)),
        ("ESTIMATE: 1.7976931348623157e308-1.7976931348623157e308", Some(f64::MAX)),
        // The scaled upper end is past f64::MAX: only the lower end is read.
        ("ESTIMATE: 1e300-2e300 trillion", Some(1e300)),
    ];
    for (text, expected) in cases {
        let read = delphi::parse_estimate(text).map(|(v, _)| v);
        assert_eq!(read, expected, "{text:?}");
        assert!(read.is_none_or(f64::is_finite), "{text:?} -> {read:?}");
    }
}

/// Found by the fuzzer: `clarity::last_json_object` tried every `{` as the start of the
/// scorecard and scanned forward for its match, so an evaluator's reply of `n` open braces
/// cost about n² steps (80 KB: about 3 s in release; 1 MB: minutes, on the actor's thread).
/// Each shape of reply, at 80 KB, must take about what 16 replies of 5 KB of that shape take
/// (a quadratic search takes 16 times that): compared with a baseline measured here, the best
/// of three of each, so that a busy machine does not decide.
#[test]
fn clarity_json_search_is_not_quadratic() {
    use std::time::{Duration, Instant};
    const N: usize = 80_000;
    const PIECES: usize = 16;
    let nested = |n: usize, inner: &str| {
        let levels = n / 19;
        "{\"scores\": 1, \"x\": ".repeat(levels) + inner + &"}".repeat(levels)
    };
    let shapes: [(&str, &dyn Fn(usize) -> String); 6] = [
        ("open braces", &|n| "{".repeat(n)),
        ("balanced braces", &|n| "{".repeat(n / 2) + &"}".repeat(n / 2)),
        ("quoted braces", &|n| "\"{".repeat(n / 2)),
        ("escaped quotes", &|n| "{\\\"".repeat(n / 3)),
        ("nested invalid objects", &|n| nested(n, "")),
        ("nested valid objects", &|n| nested(n, "1")),
    ];
    let time = |texts: &[String]| {
        let t0 = Instant::now();
        for text in texts {
            std::hint::black_box(clarity::parse_scores(text));
        }
        t0.elapsed()
    };
    for (name, make) in shapes {
        let whole = [make(N)];
        let pieces: Vec<String> = (0..PIECES).map(|_| make(N / PIECES)).collect();
        let (mut t_whole, mut t_pieces) = (Duration::MAX, Duration::MAX);
        for _ in 0..3 {
            t_pieces = t_pieces.min(time(&pieces));
            t_whole = t_whole.min(time(&whole));
        }
        eprintln!("{name}: 80 KB in {t_whole:?}, 16 x 5 KB in {t_pieces:?}");
        assert!(
            t_whole <= 6 * t_pieces.max(Duration::from_micros(100)),
            "{name}: 80 KB took {t_whole:?}, 16 x 5 KB {t_pieces:?}"
        );
    }
}
