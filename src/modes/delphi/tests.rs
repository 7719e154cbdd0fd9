//! Delphi: parsers on what models write, the statistics, and the state machine through the
//! seed's edge cases, including proof that later rounds show only aggregates.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::modes::reading::Unparsed;
use crate::modes::schema::{self, ReadFrom, ReplySchema};
use crate::modes::testkit::{
    all_emitted, assert_contains_all, assert_report_free_of, ctx, emitted, err, events, failed,
    feed, fields, finished, offline_defaults, ok, rows, sim_ask, stage_calls,
};
use crate::modes::validate;
use crate::modes::{CallSpec, Defaults, Effect, Fallbacks, Mode, StageRow};

#[test]
fn estimates_are_read_in_every_shape_models_write() {
    let v = |t: &str| parse_estimate(t).map(|(v, _)| v);
    assert_eq!(v("ESTIMATE: 42,000,000"), Some(42_000_000.0));
    assert_eq!(v("ESTIMATE: 42 million"), Some(42_000_000.0));
    assert_eq!(v("ESTIMATE: 4.2e7"), Some(42_000_000.0));
    assert_eq!(v("**ESTIMATE:** $42M"), Some(42_000_000.0));
    assert_eq!(v("ESTIMATE: ~40"), Some(40.0));
    assert_eq!(v("ESTIMATE: 12.5%"), Some(12.5));
    assert_eq!(v("ESTIMATE: approximately 1.5 billion"), Some(1_500_000_000.0));
    assert_eq!(v("Estimate: 3.5 thousand engineers"), Some(3500.0));
    let (mid, note) = parse_estimate("ESTIMATE: 35-45").unwrap();
    assert_eq!(mid, 40.0);
    assert!(note.unwrap().contains("midpoint"));
    assert_eq!(v("ESTIMATE: 35 to 45 million"), Some(40_000_000.0));
    // No stated estimate: a number somewhere in prose is not one.
    assert_eq!(v("I think about 300 units."), None);
    assert_eq!(v("I cannot estimate this; the 2020 data is missing"), None);
    assert_eq!(v("ESTIMATE: unknown\nno idea"), None);
    assert_eq!(v("The last line counts.\nESTIMATE: 1\nESTIMATE: 2"), Some(2.0));
}

#[test]
fn confidence_defaults_to_medium_and_answers_match_options() {
    assert_eq!(parse_confidence("CONFIDENCE: high").0, Confidence::High);
    assert_eq!(parse_confidence("**Confidence:** LOW"), (Confidence::Low, true));
    assert_eq!(parse_confidence("nothing"), (Confidence::Medium, false));
    let opts: Vec<String> =
        ["Monorepo", "Polyrepo", "Hybrid (monorepo for core, polyrepo for services)"]
            .map(String::from)
            .to_vec();
    assert_eq!(parse_answer("ANSWER: 2", &opts).as_deref(), Some("Polyrepo"));
    assert_eq!(parse_answer("ANSWER: Option 3", &opts).as_deref(), Some(opts[2].as_str()));
    assert_eq!(parse_answer("ANSWER: monorepo", &opts).as_deref(), Some("Monorepo"));
    assert_eq!(
        parse_answer("ANSWER: a hybrid approach with services split", &opts).as_deref(),
        Some(opts[2].as_str())
    );
    assert_eq!(parse_answer("ANSWER: 9", &[]).as_deref(), Some("9"));
    assert_eq!(parse_answer("ANSWER: something unrelated entirely", &opts), None);
}

#[test]
fn classification_is_read_and_options_split() {
    let c = parse_classification(
        "TYPE: QUALITATIVE\nOPTIONS: Go, Rust, TypeScript\nREASONING: a choice",
    )
    .unwrap();
    assert_eq!((c.kind, c.options.unwrap().len()), (QuestionType::Qualitative, 3));
    let n = parse_classification("**TYPE:** NUMERIC\nOPTIONS: N/A\nREASONING: a number").unwrap();
    assert_eq!((n.kind, n.options), (QuestionType::Numeric, None));
    assert!(parse_classification("I cannot tell").is_none());
}

// ---- the corpus -----------------------------------------------------------------------------

struct Case {
    name: String,
    keys: BTreeMap<String, String>,
    text: String,
}

impl Case {
    fn key(&self, k: &str) -> Option<&str> {
        self.keys.get(k).map(String::as_str)
    }
}

fn corpus() -> Vec<Case> {
    let src = include_str!("../corpus/delphi.txt");
    src.split("\n=== ")
        .skip(1)
        .map(|chunk| {
            let (head, text) = chunk.split_once("\n---\n").unwrap_or((chunk, ""));
            let mut lines = head.lines();
            let name = lines.next().unwrap_or_default().trim().to_string();
            let keys = lines
                .filter_map(|l| l.split_once(": "))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect();
            Case { name, keys, text: text.trim_end().to_string() }
        })
        .collect()
}

fn list(v: Option<&str>) -> Vec<String> {
    v.filter(|s| !s.is_empty()).map_or(Vec::new(), |s| s.split(" | ").map(String::from).collect())
}

/// What went wrong with one case, if anything.
fn check(case: &Case) -> Vec<String> {
    let mut wrong = Vec::new();
    let expect = case.key("expect").unwrap_or_default();
    let why = expect.strip_prefix("unparsed:");
    let got_why = || json!(Unparsed::of(&case.text)).as_str().unwrap_or_default().to_string();
    match case.key("kind") {
        Some("estimate") => match (parse_estimate(&case.text), why) {
            (None, Some(w)) if got_why() == w => {}
            (None, _) => wrong.push(format!("unparsed ({}), expected {expect}", got_why())),
            (Some((v, note)), None) => {
                let want: f64 = expect.parse().unwrap_or(f64::NAN);
                if (v - want).abs() > want.abs() * 1e-9 {
                    wrong.push(format!("estimate {v}, expected {want}"));
                }
                if case.key("note") == Some("midpoint")
                    && !note.is_some_and(|n| n.contains("midpoint"))
                {
                    wrong.push("no midpoint note".into());
                }
            }
            (Some((v, _)), Some(_)) => wrong.push(format!("estimate {v}, expected {expect}")),
        },
        Some("answer") => {
            let options = list(case.key("options"));
            match (parse_answer(&case.text, &options), why) {
                (None, Some(w)) if got_why() == w => {}
                (got, _) if got.as_deref() == Some(expect) => {}
                (got, _) => {
                    wrong.push(format!("answer {got:?} ({}), expected {expect}", got_why()))
                }
            }
        }
        Some("classify") => match (parse_classification(&case.text), why) {
            (None, Some(w)) if got_why() == w => {}
            (Some(c), None) => {
                if json!(c.kind) != json!(expect) {
                    wrong.push(format!("type {:?}, expected {expect}", c.kind));
                }
                let opts = case.key("opts").map(|o| list(Some(o)));
                if c.options != opts {
                    wrong.push(format!("options {:?}, expected {opts:?}", c.options));
                }
            }
            (got, _) => {
                wrong.push(format!("classification {got:?} ({}), expected {expect}", got_why()))
            }
        },
        other => wrong.push(format!("unknown kind {other:?}")),
    }
    if let Some(c) = case.key("confidence") {
        let want = match c {
            "none" => (Confidence::Medium, false),
            level => (serde_json::from_value(json!(level)).unwrap_or(Confidence::Medium), true),
        };
        let got = parse_confidence(&case.text);
        if got != want {
            wrong.push(format!("confidence {got:?}, expected {want:?}"));
        }
    }
    if let Some(r) = case.key("reasoning") {
        let got = parse_reasoning(&case.text);
        if got != r {
            wrong.push(format!("reasoning {got:?}, expected {r:?}"));
        }
    }
    wrong
}

#[test]
fn the_corpus_parses_as_a_careful_reader_would() {
    let cases = corpus();
    assert!(cases.len() >= 100, "{} cases", cases.len());
    let real = cases.iter().filter(|c| c.name.starts_with("real/")).count();
    assert!(real >= 10, "{real} recorded replies");
    let failures: Vec<String> = cases
        .iter()
        .flat_map(|c| check(c).into_iter().map(move |w| format!("{}: {w}", c.name)))
        .collect();
    assert!(failures.is_empty(), "{} wrong:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn what_counts_as_stating_an_estimate() {
    let v = |t: &str| parse_estimate(t).map(|(v, _)| v);
    // Stated: a label, a JSON field, a final-answer sentence with the number right after it.
    for (t, want) in [
        ("ESTIMATE: 40", 40.0),
        ("Final estimate: 40", 40.0),
        ("1. Your numeric estimate: 40", 40.0),
        ("My best estimate is roughly 40.", 40.0),
        ("Our estimate would be 40", 40.0),
        ("I estimate about 40.", 40.0),
        ("I'd estimate there are about 40 of them.", 40.0),
        ("The answer is 40.", 40.0),
        ("In conclusion, the final estimate is ~40.", 40.0),
        ("{\"estimate\": 40}", 40.0),
        ("ANSWER: 40", 40.0),
        ("Estimate = 40", 40.0),
    ] {
        assert_eq!(v(t), Some(want), "{t}");
    }
    // Not stated: a number that is not the model's own final answer.
    for t in [
        "The 2020 estimate was 300.",
        "My estimate is that by 2030 there will be 40.",
        "The UN estimate is 9.7 billion.",
        "Estimates range widely; 40 is often quoted.",
        "I cannot estimate this; the 2020 data is missing.",
        "40",
        "ESTIMATE: [number]",
        "My estimate is not 40.",
    ] {
        assert_eq!(v(t), None, "{t}");
    }
}

proptest! {
    #[test]
    fn parsers_never_panic(text in "\\PC{0,300}") {
        if let Some((v, _)) = parse_estimate(&text) {
            prop_assert!(v.is_finite());
        }
        let _ = parse_confidence(&text);
        let _ = parse_reasoning(&text);
        let _ = parse_answer(&text, &["A".to_string(), "B".to_string()]);
        let _ = parse_answer(&text, &[]);
        let _ = parse_classification(&text);
    }

    #[test]
    fn label_shaped_text_never_panics(
        text in "(ESTIMATE|ANSWER|CONFIDENCE|TYPE|OPTIONS|REASONING|\\||```|\\{|\"estimate\"|<think>|</think>|[0-9.,e×^%$MBk -]|\n|: ){0,40}"
    ) {
        if let Some((v, _)) = parse_estimate(&text) {
            prop_assert!(v.is_finite());
        }
        let _ = parse_confidence(&text);
        let _ = parse_reasoning(&text);
        let _ = parse_answer(&text, &["Go".to_string(), "Rust".to_string()]);
        let _ = parse_classification(&text);
    }

    /// Whatever a closed reasoning block holds, the estimate, answer, confidence and
    /// classification stated after it are read the same.
    #[test]
    fn nothing_in_a_closed_block_changes_what_follows(
        inside in "[^<>]{0,200}",
        after in prop_oneof![
            (any::<i32>(), 0..3usize).prop_map(|(n, c)| format!(
                "ESTIMATE: {n}\nCONFIDENCE: {}\nREASONING: because",
                ["LOW", "MEDIUM", "HIGH"][c]
            )),
            (1..4usize).prop_map(|n| format!("ANSWER: {n}\nCONFIDENCE: HIGH")),
            Just("TYPE: QUALITATIVE\nOPTIONS: Go, Rust".to_string()),
            "[A-Za-z0-9 :.,%$\n|-]{0,80}",
        ],
    ) {
        let after = after.trim().to_string();
        let text = format!("<think>{inside}</think>\n{after}");
        let opts = ["Go".to_string(), "Rust".to_string(), "Zig".to_string()];
        prop_assert_eq!(parse_estimate(&text), parse_estimate(&after));
        prop_assert_eq!(parse_answer(&text, &opts), parse_answer(&after, &opts));
        prop_assert_eq!(parse_answer(&text, &[]), parse_answer(&after, &[]));
        prop_assert_eq!(parse_confidence(&text), parse_confidence(&after));
        prop_assert_eq!(parse_classification(&text), parse_classification(&after));
    }
}

#[test]
fn statistics_follow_the_seed() {
    let s = numeric_stats(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], ConfidenceCounts::default());
    assert_eq!(
        (s.mean, s.median, s.std_dev, s.min, s.max),
        (5.0, 4.5, 2.0, 2.0, 9.0),
        "population sd"
    );
    assert_eq!(s.cv, 0.4);
    let zero = numeric_stats(&[-1.0, 1.0], ConfidenceCounts::default());
    assert!(zero.cv.is_infinite() && zero.high_variance);
    assert_eq!(json!(zero)["cv"], json!(null), "Infinity has no JSON form");
    let back: NumericStats = serde_json::from_value(json!(zero)).unwrap();
    assert!(back.cv.is_infinite());
    assert!(numeric_stats(&[1.0, 100.0, 1000.0], ConfidenceCounts::default()).cv < 2.0);
    let q = qualitative_stats(
        &["Go".into(), "go".into(), "Rust".into(), "Go".into()],
        ConfidenceCounts::default(),
    );
    assert_eq!((q.mode.as_str(), q.agreement_percentage), ("Go", 75.0));
    assert_eq!(q.distribution[1], Share { answer: "Rust".into(), count: 1, percentage: 25.0 });
}

fn delphi(cfg: Value) -> Delphi {
    let mut base = json!({ "panelistModels": ["p1", "p2", "p3", "p4"], "facilitatorModel": "fac",
        "maxRounds": 3, "numericConvergenceThreshold": 0.15, "qualitativeConvergenceThreshold": 75.0,
        "questionType": null, "options": null, "timeoutMs": 120000, "globalTimeoutMs": 600000 });
    for (k, v) in cfg.as_object().unwrap() {
        base[k] = v.clone();
    }
    Delphi::new(&base, ctx("How many engineers by 2030?", vec![], true))
        .expect("a configuration that fits")
}

fn est(v: &str, c: &str) -> String {
    format!("ESTIMATE: {v}\nCONFIDENCE: {c}\nREASONING: because")
}

#[test]
fn numeric_rounds_show_only_aggregates_and_converge() {
    let mut d = delphi(json!({}));
    let mut all = d.start();
    let classify = stage_calls(&all);
    assert_eq!(classify[0].key, "classify:0");
    let e = d.on_reply(ok(&classify[0], "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: quantity"));
    let r1 = stage_calls(&e);
    all.extend(e);
    assert_eq!(r1.len(), 4);
    assert!(r1[0].messages[0]
        .content
        .starts_with("You are participating in a Delphi estimation exercise."));
    let firsts = ["1000", "1500", "2500", "9999"];
    let e = feed(&mut d, r1.iter().zip(firsts).map(|(s, v)| ok(s, &est(v, "LOW"))).collect());
    let r2 = stage_calls(&e);
    all.extend(e.clone());
    assert_eq!(emitted(&e, "round_complete").unwrap()["data"]["converged"], false);
    // Every round-2 prompt: its own previous estimate and the aggregates, nothing of the others.
    for (i, call) in r2.iter().enumerate() {
        let p = &call.messages[0].content;
        assert!(p.starts_with("DELPHI ROUND 2 of 3"), "{p}");
        assert!(
            p.contains(&format!("YOUR PREVIOUS ESTIMATE: {}", fmt_num(firsts[i].parse().unwrap())))
        );
        for (j, other) in firsts.iter().enumerate() {
            if j != i {
                let shown = fmt_num(other.parse().unwrap());
                let in_aggregates =
                    p.contains(&format!("Range: {shown}")) || p.contains(&format!("— {shown}"));
                assert!(
                    !p.contains(&format!("ESTIMATE: {shown}"))
                        && (in_aggregates || !p.contains(&shown)),
                    "round-2 prompt {i} shows estimate {j}"
                );
            }
        }
        for m in ["p1", "p2", "p3", "p4", "fac"] {
            assert!(!p.contains(m), "a model name in a round-2 prompt: {p}");
        }
        assert!(p.contains("- Median: 2,000") && p.contains("FROM ALL 4 PARTICIPANTS (Round 1)"));
    }
    let e = feed(&mut d, r2.iter().map(|s| ok(s, &est("2000", "HIGH"))).collect());
    all.extend(e.clone());
    assert_eq!(emitted(&e, "convergence_reached").unwrap()["round"], 2);
    let synth = stage_calls(&e);
    assert_eq!(synth[0].key, "synthesis");
    assert!(synth[0].messages[0]
        .content
        .contains("CONVERGENCE STATUS: Converged\nFINAL CONSENSUS VALUE: 2,000"));
    let done = d.on_reply(ok(&synth[0], "## Delphi Consensus Report\n..."));
    all.extend(done.clone());
    assert!(finished(&done).is_some());
    let report = emitted(&done, "synthesis_complete").unwrap()["data"].clone();
    assert_eq!(
        fields(&report, ["totalRounds", "converged", "finalValue"]),
        [json!(2), json!(true), json!(2000.0)]
    );
    assert_eq!(
        events(&all),
        vec![
            "delphi_start",
            "classify_complete",
            "round_start",
            "round_complete",
            "round_start",
            "round_complete",
            "convergence_reached",
            "synthesis_start",
            "synthesis_complete"
        ]
    );
    // Live summaries are anonymous; the stored result names the models.
    let live = emitted(&all, "round_complete").unwrap()["data"]["estimates"].clone();
    assert!(live[0].get("model").is_none() && live[0]["participantIndex"] == 1);
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["rounds"][0]["estimates"][0]["model"], "p1");
    assert_eq!(loaded["rounds"][0]["estimates"][3]["estimate"], 9999.0);
    assert_eq!(loaded["rounds"][1]["estimates"][3]["changed"], true);
    assert_eq!(
        loaded["rounds"][0]["stats"],
        emitted(&all, "round_complete").unwrap()["data"]["stats"]
    );
    assert_eq!(fields(&loaded, ["converged", "convergenceRound"]), [json!(true), json!(2)]);
    assert_eq!(loaded["report"], report);
    let types: Vec<String> =
        rows(&all).iter().map(|r| format!("{}:{}", r.stage_type, r.stage_order)).collect();
    for t in [
        "classify:0",
        "round_1:1",
        "round_1_stats:2",
        "round_2:3",
        "round_2_stats:4",
        "synthesis:99",
    ] {
        assert!(types.contains(&t.to_string()), "{t} in {types:?}");
    }
}

/// Runs classification (numeric) and round 1 with the given replies.
fn after_round1(d: &mut Delphi, replies: &[Option<&str>]) -> Vec<Effect> {
    let c = stage_calls(&d.start());
    let r1 = stage_calls(&d.on_reply(ok(&c[0], "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: x")));
    feed(
        d,
        r1.iter()
            .zip(replies)
            .map(|(s, r)| match r {
                Some(t) => ok(s, t),
                None => err(s),
            })
            .collect(),
    )
}

#[test]
fn a_panelist_failing_later_carries_its_answer_and_one_failing_round_one_leaves() {
    let mut d = delphi(json!({}));
    let e = after_round1(
        &mut d,
        &[Some(&est("10", "LOW")), None, Some(&est("50", "LOW")), Some(&est("90", "LOW"))],
    );
    let r2 = stage_calls(&e);
    assert_eq!(r2.len(), 3, "the round-1 failure left the panel");
    let e = feed(
        &mut d,
        vec![
            err(&r2[0]),
            ok(&r2[1], &est("60", "MEDIUM")),
            ok(&r2[2], "I decline to give a number"),
        ],
    );
    let round = emitted(&e, "round_complete").unwrap()["data"].clone();
    let est = round["estimates"].as_array().unwrap();
    assert_eq!(est.len(), 3);
    assert_eq!(
        (est[0]["participantIndex"].clone(), est[0]["estimate"].clone(), est[0]["changed"].clone()),
        (json!(1), json!(10.0), json!(false))
    );
    assert_eq!(est[2]["estimate"], 90.0, "unreadable in round 2: carried forward");
    assert_eq!(est[2]["unparsed"], "refused");
    let stored: Vec<StageRow> =
        rows(&e).into_iter().filter(|r| r.stage_type == "round_2").collect();
    assert_eq!(stored[0].parsed_data.as_ref().unwrap()["carriedForward"], true);
}

/// The keys of a live summary, compared with the stored estimate of the same participant.
fn agrees(live: &Value, stored: &Value) -> bool {
    live.as_object().is_some_and(|o| o.iter().all(|(k, v)| &stored[k] == v))
}

#[test]
fn an_unreadable_reply_says_why_live_stored_and_reloaded() {
    let mut d = delphi(json!({}));
    let mut all = after_round1(
        &mut d,
        &[
            Some(&est("10", "LOW")),
            Some("ESTIMATE: 20"),
            Some(&est("30", "HIGH")),
            Some("I cannot estimate this; the 2020 data is missing."),
        ],
    );
    let r1 = emitted(&all, "round_complete").unwrap()["data"]["estimates"].clone();
    assert_eq!(r1[3]["estimate"], Value::Null);
    assert_eq!(r1[3]["unparsed"], "refused", "{r1}");
    assert!(r1[0].get("unparsed").is_none() && r1[0].get("confidenceDefaulted").is_none());
    assert_eq!(r1[1]["confidenceDefaulted"], true, "no CONFIDENCE line: MEDIUM, and it says so");
    let r2 = stage_calls(&all);
    assert_eq!(r2.len(), 4, "an unreadable round-1 answer stays on the panel");
    let e = feed(
        &mut d,
        vec![
            ok(&r2[0], &est("12", "LOW")),
            ok(&r2[1], "<think>The median is 20, so ESTIMATE: 20"),
            ok(&r2[2], "The panel is right; I'd say about 25 now."),
            ok(&r2[3], &est("25", "MEDIUM")),
        ],
    );
    all.extend(e.clone());
    let live = emitted(&e, "round_complete").unwrap()["data"]["estimates"].clone();
    assert_eq!(
        (&live[1]["estimate"], &live[1]["unparsed"]),
        (&json!(20.0), &json!("reasoning_only")),
        "carried forward, and why"
    );
    assert_eq!((&live[2]["estimate"], &live[2]["unparsed"]), (&json!(30.0), &json!("no_answer")));
    let stored: Vec<Value> = rows(&e)
        .into_iter()
        .filter(|r| r.stage_type == "round_2")
        .filter_map(|r| r.parsed_data)
        .collect();
    assert_eq!(
        (&stored[1]["carriedForward"], &stored[1]["unparsed"]),
        (&json!(true), &json!("reasoning_only"))
    );
    // A reload gives back what ran.
    let loaded = load_result(&rows(&all));
    let rounds_live: Vec<Value> = all_emitted(&all, "round_complete");
    for (n, live) in rounds_live.iter().enumerate() {
        let stored = &loaded["rounds"][n];
        assert_eq!(stored["stats"], live["data"]["stats"]);
        for (i, l) in live["data"]["estimates"].as_array().unwrap().iter().enumerate() {
            assert!(
                agrees(l, &stored["estimates"][i]),
                "round {n}: {l} vs {}",
                stored["estimates"][i]
            );
        }
    }
}

#[test]
fn an_unreadable_classification_says_why() {
    let mut d = delphi(json!({}));
    let c = stage_calls(&d.start());
    let all = d.on_reply(ok(&c[0], "I cannot classify this question."));
    let live = emitted(&all, "classify_complete").unwrap()["data"].clone();
    assert_eq!((&live["type"], &live["unparsed"]), (&json!("qualitative"), &json!("refused")));
    assert_eq!(load_result(&rows(&all))["classification"], live);
    // A failed call is a failure, not an unreadable reply.
    let mut d = delphi(json!({}));
    let c = stage_calls(&d.start());
    let e = d.on_reply(err(&c[0]));
    assert!(emitted(&e, "classify_complete").unwrap()["data"].get("unparsed").is_none());
}

#[test]
fn fewer_than_three_valid_estimates_is_an_error() {
    let mut d = delphi(json!({}));
    let e = after_round1(
        &mut d,
        &[Some(&est("10", "LOW")), Some("no number here"), None, Some(&est("12", "LOW"))],
    );
    assert!(failed(&e).is_some_and(|m| m.contains("at least 3")));
    // What the panelists wrote is kept and shown, though the round has no statistics.
    let result = load_result(&rows(&e));
    let round = &result["rounds"][0];
    assert_eq!(round["stats"], Value::Null);
    let texts: Vec<&str> =
        round["estimates"].as_array().unwrap().iter().filter_map(|e| e["text"].as_str()).collect();
    assert!(texts.contains(&"no number here"), "{round}");
    assert_eq!(round["estimates"][1]["unparsed"], "no_answer");
    let mut d = delphi(json!({}));
    let e = after_round1(&mut d, &[None, None, None, None]);
    assert_eq!(failed(&e).as_deref(), Some("All panelists failed in round 1."));
    assert!(
        rows(&e).iter().all(|r| r.stage_type == "classify" || r.stage_type == "call_failed"),
        "no round data saved"
    );
    assert_eq!(rows(&e).iter().filter(|r| r.stage_type == "call_failed").count(), 4);
}

#[test]
fn identical_round_one_answers_go_straight_to_synthesis() {
    let mut d = delphi(json!({}));
    let same = est("7", "HIGH");
    let e = after_round1(&mut d, &[Some(same.as_str()); 4]);
    assert_eq!(emitted(&e, "convergence_reached").unwrap()["round"], 1);
    assert_eq!(stage_calls(&e)[0].key, "synthesis");
    let s = stage_calls(&e);
    let done = d.on_reply(ok(&s[0], "report"));
    assert_eq!(emitted(&done, "synthesis_complete").unwrap()["data"]["immediateConsensus"], true);
}

#[test]
fn rounds_stop_at_the_maximum_or_the_time_limit() {
    let spread = [
        Some(est("1", "LOW")),
        Some(est("100", "LOW")),
        Some(est("1000", "LOW")),
        Some(est("5", "LOW")),
    ];
    let replies: Vec<Option<&str>> = spread.iter().map(|s| s.as_deref()).collect();
    let mut d = delphi(json!({ "maxRounds": 2 }));
    let e = after_round1(&mut d, &replies);
    let r2 = stage_calls(&e);
    let e =
        feed(&mut d, r2.iter().zip(&spread).map(|(s, t)| ok(s, t.as_deref().unwrap())).collect());
    assert_eq!(emitted(&e, "max_rounds_reached").unwrap()["reason"], "max rounds");
    assert!(stage_calls(&e)[0].prompt_has("CONVERGENCE STATUS: Max rounds reached"));
    // The global cap: the round in flight finishes, then the synthesis.
    let mut d = delphi(json!({ "maxRounds": 5 }));
    let start = d.start();
    assert!(start.contains(&Effect::Timer { key: "global".into(), after_ms: 600_000 }));
    let c = stage_calls(&start);
    let r1 = stage_calls(&d.on_reply(ok(&c[0], "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: x")));
    assert!(d.on_timer("global").is_empty(), "nothing is cut short");
    let e =
        feed(&mut d, r1.iter().zip(&spread).map(|(s, t)| ok(s, t.as_deref().unwrap())).collect());
    assert_eq!(emitted(&e, "max_rounds_reached").unwrap()["reason"], "time limit");
    assert_eq!(stage_calls(&e)[0].key, "synthesis");
}

trait PromptHas {
    fn prompt_has(&self, text: &str) -> bool;
}

impl PromptHas for CallSpec {
    fn prompt_has(&self, text: &str) -> bool {
        self.messages.iter().any(|m| m.content.contains(text))
    }
}

#[test]
fn classification_falls_back_and_overrides_follow_the_conflict_rules() {
    // A classification that cannot be read: qualitative, free-form answers.
    let mut d = delphi(json!({}));
    let c = stage_calls(&d.start());
    let e = d.on_reply(ok(&c[0], "hmm"));
    assert_eq!(emitted(&e, "classify_complete").unwrap()["data"]["type"], "qualitative");
    assert!(stage_calls(&e)[0].prompt_has("You are participating in a Delphi consensus exercise."));
    // A failed classification call: the same fallback.
    let mut d = delphi(json!({}));
    let c = stage_calls(&d.start());
    assert_eq!(
        emitted(&d.on_reply(err(&c[0])), "classify_complete").unwrap()["data"]["type"],
        "qualitative"
    );
    // Options given: qualitative with them, no classification call.
    let mut d = delphi(json!({ "options": ["Monorepo", "Polyrepo"] }));
    let s = d.start();
    let calls = stage_calls(&s);
    assert!(calls.iter().all(|c| c.stage == "round_1"));
    assert!(calls[0].prompt_has("1. Monorepo\n2. Polyrepo"));
    assert_eq!(emitted(&s, "delphi_start").unwrap()["questionType"], "qualitative");
    // Qualitative without options: the facilitator is asked for options, the type stays.
    let mut d = delphi(json!({ "questionType": "qualitative" }));
    let c = stage_calls(&d.start());
    assert_eq!(c[0].key, "classify:0");
    let e = d.on_reply(ok(&c[0], "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: x"));
    assert_eq!(emitted(&e, "classify_complete").unwrap()["data"]["type"], "qualitative");
    // Validation: a numeric override drops options; the facilitator may not sit on the panel.
    let defaults = offline_defaults();
    let v = validate(&json!({ "question": "q", "mode": "delphi", "modeConfig": { "questionType": "numeric", "options": ["a", "b"] } }), &defaults).unwrap();
    assert_eq!(v.config["options"], json!(null));
    let field = |cfg: Value| {
        validate(&json!({ "question": "q", "mode": "delphi", "modeConfig": cfg }), &defaults)
            .unwrap_err()
            .field
    };
    assert_eq!(
        field(json!({ "panelistModels": ["a", "b", "c"], "facilitatorModel": "a" })),
        "modeConfig.facilitatorModel"
    );
    assert_eq!(field(json!({ "maxRounds": 6 })), "modeConfig.maxRounds");
    assert_eq!(field(json!({ "maxRounds": 2.5 })), "modeConfig.maxRounds");
    assert_eq!(field(json!({ "panelistModels": ["a", "b"] })), "modeConfig.panelistModels");
    assert_eq!(
        field(json!({ "numericConvergenceThreshold": 2 })),
        "modeConfig.numericConvergenceThreshold"
    );
    assert_eq!(
        field(json!({ "qualitativeConvergenceThreshold": 40 })),
        "modeConfig.qualitativeConvergenceThreshold"
    );
    assert_eq!(field(json!({ "questionType": "poll" })), "modeConfig.questionType");
    assert_eq!(field(json!({ "options": ["only one"] })), "modeConfig.options");
    assert_eq!(field(json!({ "timeoutMs": 10000 })), "modeConfig.timeoutMs");
}

/// A run over Go, Rust and Python whose first round gave Go twice: it, its effects, round 2 calls.
fn qualitative_round_two() -> (Delphi, Vec<Effect>, Vec<CallSpec>) {
    let mut d = delphi(json!({ "options": ["Go", "Rust", "Python"] }));
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let answers = ["ANSWER: 1", "ANSWER: rust", "ANSWER: Go", "ANSWER: Python"];
    let e = feed(&mut d, r1.iter().zip(answers).map(|(c, a)| ok(c, a)).collect());
    let r2 = stage_calls(&e);
    all.extend(e);
    (d, all, r2)
}

#[test]
fn qualitative_rounds_consolidate_and_a_failing_facilitator_keeps_the_rounds() {
    let (mut d, mut all, r2) = qualitative_round_two();
    let p = &r2[1].messages[0].content;
    assert!(
        p.contains("YOUR PREVIOUS ANSWER: Rust")
            && p.contains("  Go: 2 participants (50%)")
            && p.contains("Agreement Level: 50%")
    );
    let e = feed(&mut d, r2.iter().map(|s| ok(s, "ANSWER: Go\nCONFIDENCE: HIGH")).collect());
    all.extend(e.clone());
    assert_eq!(emitted(&e, "convergence_reached").unwrap()["stats"]["agreementPercentage"], 100.0);
    let s = stage_calls(&e);
    let out = d.on_reply(err(&s[0]));
    assert!(failed(&out).is_some_and(|m| m.contains("facilitator")));
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["rounds"].as_array().unwrap().len(), 2);
    assert_eq!(loaded["rounds"][1]["estimates"][1]["previousAnswer"], "Rust");
    assert!(loaded["report"].is_null());
}

// ---- backups and partial runs ---------------------------------------------------------------

#[test]
fn a_failing_facilitator_is_replaced_by_its_backup_for_classification_and_report() {
    let mut d = delphi(json!({ "facilitatorFallbackModel": "fac2" }));
    let mut all = d.start();
    let c = stage_calls(&all);
    let e = d.on_reply(err(&c[0]));
    let retry = stage_calls(&e);
    assert_eq!((retry[0].key.as_str(), retry[0].model.as_str()), ("classify:0:backup", "fac2"));
    assert_eq!(retry[0].messages, c[0].messages);
    assert!(emitted(&e, "classify_complete").is_none(), "the backup classifies first");
    all.extend(e);
    let e = d.on_reply(ok(&retry[0], "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: a count"));
    let classified = emitted(&e, "classify_complete").unwrap()["data"].clone();
    assert_eq!(
        (&classified["type"], &classified["fallbackFrom"]),
        (&json!("numeric"), &json!("fac"))
    );
    let r1 = stage_calls(&e);
    all.extend(e);
    // One panelist fails in round 1; the other three agree at once.
    let e = feed(
        &mut d,
        vec![
            ok(&r1[0], &est("100", "HIGH")),
            ok(&r1[1], &est("100", "HIGH")),
            err(&r1[2]),
            ok(&r1[3], &est("100", "HIGH")),
        ],
    );
    let s = stage_calls(&e);
    assert_eq!(s[0].key, "synthesis");
    all.extend(e);
    let e = d.on_reply(err(&s[0]));
    let retry = stage_calls(&e);
    assert_eq!((retry[0].key.as_str(), retry[0].model.as_str()), ("synthesis:backup", "fac2"));
    all.extend(e);
    let done = d.on_reply(ok(&retry[0], "The panel agrees on 100."));
    all.extend(done.clone());
    assert_eq!(finished(&done).as_deref(), Some("The panel agrees on 100."));
    let live = emitted(&done, "synthesis_complete").unwrap();
    assert_eq!(live["data"]["facilitatorModel"], "fac2");
    assert_eq!(live["data"]["fallbackFrom"], "fac");
    assert_eq!(live["partial"], true);
    let stages: Vec<(String, String, Value)> = live["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["model"].as_str().unwrap().into(),
                f["stage"].as_str().unwrap().into(),
                f["fallbackTo"].clone(),
            )
        })
        .collect();
    assert_eq!(
        stages,
        vec![
            ("fac".to_string(), "classify".to_string(), json!("fac2")),
            ("p3".into(), "round_1".into(), Value::Null),
            ("fac".into(), "synthesis".into(), json!("fac2")),
        ]
    );
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["report"], live["data"]);
    assert_eq!(loaded["classification"], classified);
    assert_eq!(
        (&loaded["partial"], &loaded["failedModels"]),
        (&live["partial"], &live["failedModels"])
    );
}

#[test]
fn a_failing_backup_facilitator_keeps_todays_failure_paths() {
    // Classification: both fail, so the question falls back to qualitative as before.
    let mut d = delphi(json!({ "facilitatorFallbackModel": "fac2" }));
    let c = stage_calls(&d.start());
    let retry = stage_calls(&d.on_reply(err(&c[0])));
    let e = d.on_reply(err(&retry[0]));
    let classified = emitted(&e, "classify_complete").unwrap()["data"].clone();
    assert_eq!(classified["type"], "qualitative");
    assert!(classified.get("fallbackFrom").is_none());
    // The report: both fail, so the run fails with the rounds kept.
    let mut d = delphi(json!({ "facilitatorFallbackModel": "fac2", "questionType": "numeric" }));
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let e = feed(&mut d, r1.iter().map(|s| ok(s, &est("7", "HIGH"))).collect());
    let s = stage_calls(&e);
    all.extend(e);
    let e = d.on_reply(err(&s[0]));
    let retry = stage_calls(&e);
    all.extend(e);
    let out = d.on_reply(err(&retry[0]));
    assert_eq!(
        failed(&out).as_deref(),
        Some("The facilitator (fac, then its backup fac2) failed to write the report: down")
    );
    all.extend(out);
    let loaded = load_result(&rows(&all));
    assert!(loaded["report"].is_null());
    assert_eq!(loaded["rounds"].as_array().map(Vec::len), Some(1));
    assert_eq!(loaded["partial"], true);
    assert_eq!(loaded["failedModels"].as_array().map(Vec::len), Some(2));
}

#[test]
fn the_backup_facilitator_comes_from_the_server_configuration() {
    let defaults = Defaults {
        fallback: Fallbacks { facilitator: Some("sim/zeta".into()), ..Fallbacks::default() },
        ..offline_defaults()
    };
    let v = validate(&json!({ "question": "q", "mode": "delphi" }), &defaults).unwrap();
    assert_eq!(v.config["facilitatorFallbackModel"], "sim/zeta");
    assert!(!v.models.contains(&"sim/zeta".to_string()), "checked at start-up instead");
}

// ---- structured replies ---------------------------------------------------------------------

/// A Delphi run whose models `json` are asked for JSON (their routes take structured output).
fn structured_delphi(cfg: Value, json: &[&str]) -> Delphi {
    let mut base = json!({ "panelistModels": ["p1", "p2", "p3", "p4"], "facilitatorModel": "fac",
        "maxRounds": 3, "numericConvergenceThreshold": 0.15, "qualitativeConvergenceThreshold": 75.0,
        "questionType": null, "options": null, "timeoutMs": 120000, "globalTimeoutMs": 600000 });
    for (k, v) in cfg.as_object().unwrap() {
        base[k] = v.clone();
    }
    let mut ctx = ctx("How many engineers by 2030?", vec![], true);
    ctx.structured = crate::modes::Structured::models(json);
    Delphi::new(&base, ctx).expect("a configuration that fits")
}

fn keys(schema: &ReplySchema) -> Vec<String> {
    schema.schema["properties"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn the_schemas_take_what_the_readers_take_and_refuse_the_rest() {
    let c = classify_schema();
    assert_eq!(
        (c.name.as_str(), keys(&c)),
        ("delphi_classify", vec!["reasoning".into(), "type".into(), "options".into()])
    );
    let fits = |s: &ReplySchema, v: Value| s.validate(&v).is_ok();
    assert!(fits(&c, json!({ "reasoning": "a quantity", "type": "NUMERIC", "options": [] })));
    assert!(fits(
        &c,
        json!({ "reasoning": "", "type": "QUALITATIVE", "options": ["Go", "Rust", "Python"] })
    ));
    assert!(
        !fits(&c, json!({ "reasoning": "", "type": "BOTH", "options": [] })),
        "a type outside the two"
    );
    assert!(!fits(&c, json!({ "reasoning": "", "type": "NUMERIC" })), "a missing field");
    let seven: Vec<String> = (1..=7).map(|i| format!("option {i}")).collect();
    assert!(
        !fits(&c, json!({ "reasoning": "", "type": "QUALITATIVE", "options": seven })),
        "3-6 options"
    );
    let long = "x".repeat(OPTION_MAX_CHARS + 1);
    assert!(!fits(&c, json!({ "reasoning": "", "type": "QUALITATIVE", "options": ["a", long] })));

    let e = estimate_schema(1);
    assert_eq!(
        (e.name.as_str(), keys(&e)),
        ("delphi_estimate", vec!["reasoning".into(), "estimate".into(), "confidence".into()])
    );
    for n in [json!(42_000_000), json!(-3.5), json!(0), json!(1e-9)] {
        assert!(fits(&e, json!({ "reasoning": "", "estimate": n, "confidence": "LOW" })), "{n}");
    }
    for bad in [
        json!({ "reasoning": "", "estimate": "42 million", "confidence": "LOW" }),
        json!({ "reasoning": "", "estimate": null, "confidence": "LOW" }),
        json!({ "reasoning": "", "estimate": 4, "confidence": "VERY HIGH" }),
        json!({ "reasoning": "", "estimate": 4, "confidence": "low" }),
        json!({ "reasoning": "", "estimate": 4, "confidence": "LOW", "unit": "people" }),
    ] {
        assert!(!fits(&e, bad.clone()), "{bad}");
    }
    // Later rounds ask why the estimate moved or held, referring to the aggregates.
    let later = estimate_schema(2);
    assert!(later.schema["properties"]["reasoning"]["description"]
        .as_str()
        .unwrap()
        .contains("aggregates"));

    let opts: Vec<String> = ["Monorepo", "Polyrepo", "Hybrid"].map(String::from).to_vec();
    let a = answer_schema(&opts, 1);
    assert_eq!(
        (a.name.as_str(), keys(&a)),
        ("delphi_answer", vec!["reasoning".into(), "answer".into(), "confidence".into()])
    );
    assert!(fits(&a, json!({ "reasoning": "", "answer": "Polyrepo", "confidence": "HIGH" })));
    for foreign in ["polyrepo", "Option 2", "2", "Monorepo or Polyrepo", "Microservices"] {
        assert!(
            !fits(&a, json!({ "reasoning": "", "answer": foreign, "confidence": "HIGH" })),
            "{foreign}"
        );
    }
    // Without options the answer is free, a few words at most.
    let free = answer_schema(&[], 1);
    assert!(fits(&free, json!({ "reasoning": "", "answer": "Go", "confidence": "HIGH" })));
    let long = "y".repeat(FREE_ANSWER_MAX_CHARS + 1);
    assert!(!fits(&free, json!({ "reasoning": "", "answer": long, "confidence": "HIGH" })));
}

#[test]
fn models_that_take_json_are_asked_for_the_schema_and_the_others_for_the_seeds_format() {
    let mut d = structured_delphi(json!({}), &["fac", "p1", "p3"]);
    let c = stage_calls(&d.start());
    let schema = c[0].schema.clone().expect("the classification is machine-read");
    assert_eq!(schema.name, "delphi_classify");
    let p = &c[0].messages[0].content;
    assert!(p.contains("If QUALITATIVE, suggest 3-6 answer options"), "{p}");
    assert!(
        p.contains("Reply with a single JSON object") && !p.contains("TYPE: [NUMERIC|QUALITATIVE]"),
        "{p}"
    );
    assert!(p.find("\"reasoning\"").unwrap() < p.find("\"type\"").unwrap(), "reasoning first: {p}");
    let r1 = stage_calls(
        &d.on_reply(ok(&c[0], r#"{"reasoning": "a count", "type": "NUMERIC", "options": []}"#)),
    );
    assert!(r1.iter().all(|s| s.schema.as_ref().is_some_and(|s| s.name == "delphi_estimate")));
    let (json_prompt, text_prompt) = (&r1[0].messages[0].content, &r1[1].messages[0].content);
    assert!(json_prompt.contains("Provide:\n1. Your numeric estimate"), "{json_prompt}");
    assert!(
        json_prompt.contains("Reply with a single JSON object")
            && !json_prompt.contains("ESTIMATE: [number]")
    );
    assert!(json_prompt.contains("in the question's own unit"), "{json_prompt}");
    assert_eq!(text_prompt, &round1_numeric_prompt("How many engineers by 2030?", None));
    // Round 2: the aggregates and the panelist's own previous estimate, in either form.
    let e = feed(
        &mut d,
        r1.iter()
            .zip(["1000", "1500", "2500", "9999"])
            .map(|(s, v)| {
                ok(s, &format!(r#"{{"reasoning": "trend", "estimate": {v}, "confidence": "LOW"}}"#))
            })
            .collect(),
    );
    let r2 = stage_calls(&e);
    let p = &r2[0].messages[0].content;
    assert!(
        p.starts_with("DELPHI ROUND 2 of 3") && p.contains("YOUR PREVIOUS ESTIMATE: 1,000"),
        "{p}"
    );
    assert!(p.contains("- Median: 2,000") && p.contains("Reply with a single JSON object"), "{p}");
    assert!(p.contains("reference the aggregates") && !p.contains("ESTIMATE: [number]"), "{p}");
    assert!(r2[1].messages[0]
        .content
        .contains("ESTIMATE: [number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]"));
    for m in ["p2", "p3", "p4", "fac"] {
        assert!(!p.contains(m), "a model name in a round-2 prompt: {p}");
    }
}

#[test]
fn replies_are_read_from_json_when_it_fits_else_from_text_and_say_which() {
    let mut d = structured_delphi(json!({}), &["fac", "p1", "p2", "p3", "p4"]);
    let mut all = d.start();
    let c = stage_calls(&all);
    let e = d.on_reply(ok(
        &c[0],
        r#"```json
{"reasoning": "It asks for a count.\nMore.", "type": "NUMERIC", "options": ["ignored", "here"]}
```"#,
    ));
    let classified = emitted(&e, "classify_complete").unwrap()["data"].clone();
    assert_eq!(
        classified,
        json!({ "type": "numeric", "options": null, "reasoning": "It asks for a count.", "readFrom": "json" })
    );
    let r1 = stage_calls(&e);
    all.extend(e);
    let e = feed(
        &mut d,
        vec![
            // JSON that fits.
            ok(
                &r1[0],
                r#"{"reasoning": "Growth trends.", "estimate": 1000, "confidence": "HIGH"}"#,
            ),
            // JSON that does not (a number as words): the text reader reads what it states.
            ok(
                &r1[1],
                r#"{"reasoning": "", "estimate": "about 1.5 thousand", "confidence": "LOW"}"#,
            ),
            // JSON without its reasoning does not fit: the text reader reads its fields as it
            // reads any JSON a reply states.
            ok(&r1[2], r#"{"estimate": 2500, "confidence": "MEDIUM"}"#),
            // JSON that does not fit and states no estimate: unparsed, as in text.
            ok(&r1[3], r#"{"reasoning": "I cannot say.", "estimate": null, "confidence": "LOW"}"#),
        ],
    );
    all.extend(e.clone());
    let live = emitted(&e, "round_complete").unwrap()["data"]["estimates"].clone();
    assert_eq!(
        (&live[0]["estimate"], &live[0]["readFrom"], &live[0]["confidence"]),
        (&json!(1000.0), &json!("json"), &json!("HIGH"))
    );
    assert_eq!((&live[1]["estimate"], &live[1]["readFrom"]), (&json!(1500.0), &json!("text")));
    assert_eq!((&live[2]["estimate"], &live[2]["readFrom"]), (&json!(2500.0), &json!("text")));
    assert_eq!(live[3]["estimate"], Value::Null);
    assert!(live[3].get("readFrom").is_none() && live[3]["unparsed"].is_string(), "{}", live[3]);
    let stored: Vec<Value> = rows(&e)
        .into_iter()
        .filter(|r| r.stage_type == "round_1")
        .filter_map(|r| r.parsed_data)
        .collect();
    assert_eq!(stored[0]["reasoning"], "Growth trends.");
    assert_eq!(stored.iter().filter(|r| r["readFrom"] == "json").count(), 1);
    assert_eq!(stored.iter().filter(|r| r["readFrom"] == "text").count(), 2);
    // Round 2: a JSON reply that fits; an unreadable one is carried forward, with no readFrom.
    let r2 = stage_calls(&e);
    let e = feed(
        &mut d,
        vec![
            ok(
                &r2[0],
                r#"{"reasoning": "Toward the median.", "estimate": 1800, "confidence": "MEDIUM"}"#,
            ),
            ok(&r2[1], r#"{"reasoning": "", "estimate": "no idea", "confidence": "LOW"}"#),
            // A model that ignored the schema and wrote the seed's format.
            ok(&r2[2], &est("2,100", "HIGH")),
            ok(&r2[3], r#"{"reasoning": "", "estimate": 1900, "confidence": "HIGH"}"#),
        ],
    );
    all.extend(e.clone());
    let live2 = emitted(&e, "round_complete").unwrap()["data"]["estimates"].clone();
    assert_eq!((&live2[0]["readFrom"], &live2[0]["changed"]), (&json!("json"), &json!(true)));
    assert_eq!((&live2[2]["estimate"], &live2[2]["readFrom"]), (&json!(2100.0), &json!("text")));
    assert_eq!(live2[1]["estimate"], 1500.0, "carried forward");
    assert!(live2[1].get("readFrom").is_none(), "{}", live2[1]);
    // Stored rows and the reloaded result say the same as the live events.
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["classification"], classified);
    for (n, live) in [live, live2].iter().enumerate() {
        for (i, l) in live.as_array().unwrap().iter().enumerate() {
            assert!(
                agrees(l, &loaded["rounds"][n]["estimates"][i]),
                "{l} vs {}",
                loaded["rounds"][n]["estimates"][i]
            );
        }
    }
}

#[test]
fn qualitative_json_answers_are_held_to_the_options() {
    let mut d = structured_delphi(
        json!({ "options": ["Go", "Rust", "Python"] }),
        &["p1", "p2", "p3", "p4"],
    );
    let r1 = stage_calls(&d.start());
    let schema = r1[0].schema.clone().unwrap();
    assert_eq!(schema.schema["properties"]["answer"]["enum"], json!(["Go", "Rust", "Python"]));
    let p = &r1[0].messages[0].content;
    assert!(
        p.contains("Choose from these options:\n1. Go\n2. Rust\n3. Python")
            && p.contains("\"Go\", \"Rust\", \"Python\""),
        "{p}"
    );
    let e = feed(
        &mut d,
        vec![
            ok(&r1[0], r#"{"reasoning": "fast", "answer": "Go", "confidence": "HIGH"}"#),
            // An answer outside the options does not fit; the text reader matches it as it would
            // match `ANSWER: rust`.
            ok(&r1[1], r#"{"reasoning": "", "answer": "rust", "confidence": "LOW"}"#),
            // Outside the options and matching none: unparsed.
            ok(&r1[2], r#"{"reasoning": "", "answer": "Haskell", "confidence": "LOW"}"#),
            ok(&r1[3], "ANSWER: 3\nCONFIDENCE: LOW"),
        ],
    );
    let live = emitted(&e, "round_complete").unwrap()["data"]["estimates"].clone();
    assert_eq!((&live[0]["answer"], &live[0]["readFrom"]), (&json!("Go"), &json!("json")));
    assert_eq!((&live[1]["answer"], &live[1]["readFrom"]), (&json!("Rust"), &json!("text")));
    assert_eq!(live[2]["answer"], Value::Null);
    assert!(live[2].get("readFrom").is_none());
    assert_eq!((&live[3]["answer"], &live[3]["readFrom"]), (&json!("Python"), &json!("text")));
    // Free-form answers: one that declines is no answer, from JSON as from text.
    let free = answer_schema(&[], 1);
    let r = read_panelist(
        r#"{"reasoning": "", "answer": "none", "confidence": "LOW"}"#,
        QuestionType::Qualitative,
        &[],
        &free,
    );
    assert_eq!((r.value, r.read_from), (EstimateValue::Unreadable, None));
    let r = read_panelist(
        r#"{"reasoning": "r", "answer": "Wait and see", "confidence": "LOW"}"#,
        QuestionType::Qualitative,
        &[],
        &free,
    );
    assert_eq!(
        (r.value, r.read_from),
        (EstimateValue::Answer("Wait and see".into()), Some(ReadFrom::Json))
    );
}

#[test]
fn a_classification_in_json_that_does_not_fit_is_read_as_text_or_not_at_all() {
    let s = classify_schema();
    // Fits: options read and tidied as the text reader tidies them.
    let (c, from) = read_classification(r#"{"reasoning": "a choice", "type": "QUALITATIVE", "options": ["Go", "go", "N/A", "Rust"]}"#, &s).unwrap();
    assert_eq!(
        (c.kind, c.options, from),
        (QuestionType::Qualitative, Some(vec!["Go".into(), "Rust".into()]), ReadFrom::Json)
    );
    // A type outside the two: the text reader reads the JSON's `type` as it would, and finds none.
    assert!(
        read_classification(r#"{"reasoning": "", "type": "BOTH", "options": []}"#, &s).is_none()
    );
    // Lower case does not fit the schema; the text reader reads it.
    let (c, from) =
        read_classification(r#"{"reasoning": "", "type": "numeric", "options": []}"#, &s).unwrap();
    assert_eq!((c.kind, from), (QuestionType::Numeric, ReadFrom::Text));
    // Only inside an unclosed reasoning block: nothing.
    assert!(read_classification(
        r#"<think>{"reasoning": "", "type": "NUMERIC", "options": []}"#,
        &s
    )
    .is_none());
}

/// Free text for sampled string fields: distinct, plain words (so reading them loses nothing).
fn distinct_words(seed: u64) -> impl Fn(&str) -> String {
    let n = std::cell::Cell::new(0u64);
    move |field: &str| {
        n.set(n.get() + 1);
        format!("{field} {seed:x} {}", n.get())
    }
}

proptest! {
    /// Whatever fits a schema is read whole: the type, options and reasoning of a
    /// classification; the estimate or answer, confidence and reasoning of a round.
    #[test]
    fn any_json_that_fits_is_read_without_loss(seed in any::<u64>(), n in 0usize..7, round in 1u32..5) {
        use crate::modes::common::SplitMix64;
        let mut rng = SplitMix64::new(seed);
        let words = distinct_words(seed);
        let c = classify_schema();
        let v = schema::sample(&c.schema, &mut rng, &words);
        let (read, from) = read_classification(&v.to_string(), &c).expect("read");
        prop_assert_eq!(from, ReadFrom::Json);
        prop_assert_eq!(read.kind == QuestionType::Numeric, v["type"] == "NUMERIC");
        prop_assert_eq!(json!(read.reasoning), v["reasoning"].clone());
        let stated: Vec<String> = serde_json::from_value(v["options"].clone()).unwrap();
        let expected = (read.kind == QuestionType::Qualitative && stated.len() >= 2).then_some(stated);
        prop_assert_eq!(read.options, expected);

        let e = estimate_schema(round);
        let v = schema::sample(&e.schema, &mut rng, &words);
        let r = read_panelist(&v.to_string(), QuestionType::Numeric, &[], &e);
        prop_assert_eq!(r.read_from, Some(ReadFrom::Json));
        prop_assert_eq!(json!(r.value.as_number()), v["estimate"].clone());
        prop_assert_eq!(r.confidence.as_str(), v["confidence"].as_str().unwrap());
        prop_assert!(r.confidence_stated);
        prop_assert_eq!(json!(r.reasoning), v["reasoning"].clone());

        let options: Vec<String> = (0..n).map(|i| format!("Option {i} {seed:x}")).collect();
        let a = answer_schema(&options, round);
        let v = schema::sample(&a.schema, &mut rng, &words);
        let r = read_panelist(&v.to_string(), QuestionType::Qualitative, &options, &a);
        prop_assert_eq!(r.read_from, Some(ReadFrom::Json));
        prop_assert_eq!(json!(r.value.as_answer()), v["answer"].clone());
        prop_assert_eq!(r.confidence.as_str(), v["confidence"].as_str().unwrap());
    }
}

proptest! {
    /// Any options that fit the classification's schema are read as stated, tidied only as the
    /// text reader tidies them (a repeat in another case once, `none` never): the sampler draws
    /// one option, so the lists are drawn here.
    #[test]
    fn any_options_that_fit_are_read_without_loss(
        options in proptest::collection::vec("[A-Za-z][A-Za-z ]{0,20}[a-z]", 0..=6),
        reasoning in "[A-Za-z][A-Za-z ,.]{0,80}",
    ) {
        let s = classify_schema();
        let v = json!({ "reasoning": reasoning, "type": "QUALITATIVE", "options": options });
        prop_assert!(s.validate(&v).is_ok());
        let (c, from) = read_classification(&v.to_string(), &s).expect("read");
        prop_assert_eq!((c.kind, from), (QuestionType::Qualitative, ReadFrom::Json));
        prop_assert_eq!(c.reasoning, reasoning.trim().to_string());
        let mut kept: Vec<String> = Vec::new();
        for o in options.iter().filter(|o| !o.eq_ignore_ascii_case("none")) {
            if !kept.iter().any(|k| k.eq_ignore_ascii_case(o)) {
                kept.push(o.clone());
            }
        }
        prop_assert_eq!(c.options, (kept.len() >= 2).then_some(kept));
    }
}

#[test]
fn the_sim_answers_its_schemas_and_converges() {
    let ask = |model: &str, prompt: &str, schema: &ReplySchema| {
        let s = sim_ask(model, prompt, 1, false, Some(schema));
        sim_answer(&s).expect("an answer")
    };
    let q = "How many cats live in Rome?";
    let c = classify_schema();
    let (cl, from) =
        read_classification(&ask("sim/alpha", &classify_prompt(q, Some(&c)), &c), &c).unwrap();
    assert_eq!((cl.kind, from), (QuestionType::Numeric, ReadFrom::Json));
    let e = estimate_schema(1);
    let p1 = round1_numeric_prompt(q, Some(&e));
    let first: Vec<f64> = ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"]
        .iter()
        .map(|m| {
            let r = read_panelist(&ask(m, &p1, &e), QuestionType::Numeric, &[], &e);
            assert_eq!(r.read_from, Some(ReadFrom::Json));
            r.value.as_number().unwrap()
        })
        .collect();
    // Round 2: each moves toward the median (a stubborn one barely).
    let stats = numeric_stats(&first, ConfidenceCounts::default());
    let e2 = estimate_schema(2);
    for (m, before) in ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"].iter().zip(&first) {
        let prev = Estimate {
            participant: 1,
            model: m.to_string(),
            value: EstimateValue::Number(*before),
            confidence: Confidence::Low,
            reasoning: String::new(),
            previous: None,
            changed: false,
            carried: false,
            unparsed: None,
            confidence_stated: true,
            response_time_ms: 1,
            text: String::new(),
        };
        let p = round_n_numeric_prompt(q, 2, 3, &prev, &stats, 4, Some(&e2));
        let after = read_panelist(&ask(m, &p, &e2), QuestionType::Numeric, &[], &e2)
            .value
            .as_number()
            .unwrap();
        assert!(
            (after - stats.median).abs() <= (before - stats.median).abs() + 0.01,
            "{m}: {before} -> {after}, median {}",
            stats.median
        );
    }
    // Qualitative: an option exactly; another mode's schema or no schema: not this sim's.
    let opts: Vec<String> = ["Go", "Rust"].map(String::from).to_vec();
    let a = answer_schema(&opts, 1);
    let r = read_panelist(
        &ask("sim/beta", &round1_qualitative_prompt("Which?", &opts, Some(&a)), &a),
        QuestionType::Qualitative,
        &opts,
        &a,
    );
    assert!(
        opts.iter().any(|o| r.value.as_answer() == Some(o)) && r.read_from == Some(ReadFrom::Json)
    );
    let other = ReplySchema::new("council_ranking", json!({}));
    assert!(sim_answer(&sim_ask("sim/alpha", &p1, 1, false, Some(&other))).is_none());
    assert!(sim_answer(&sim_ask("sim/alpha", &p1, 1, false, None)).is_none());
}

/// What no report may show: raw values, JSON, stored keys, protocol words, headings.
fn assert_reads_well(md: &str) {
    assert_report_free_of(
        md,
        &[
            "Infinity",
            "ESTIMATE:",
            "CONFIDENCE:",
            "previousEstimate",
            "confidenceDefaulted",
            "HIGH",
            "MEDIUM",
        ],
    );
}

#[test]
fn the_report_gives_each_rounds_estimates_and_where_they_converged() {
    let mut d = delphi(json!({}));
    let mut all = d.start();
    let classify = stage_calls(&all);
    let e = d.on_reply(ok(&classify[0], "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: quantity"));
    let r1 = stage_calls(&e);
    all.extend(e);
    let e = feed(
        &mut d,
        vec![
            ok(&r1[0], &est("1000", "LOW")),
            ok(&r1[1], &est("1500", "LOW")),
            ok(&r1[2], &est("2500", "LOW")),
            ok(&r1[3], "I decline to give a number."),
        ],
    );
    let r2 = stage_calls(&e);
    all.extend(e);
    let e = feed(
        &mut d,
        vec![
            ok(&r2[0], &est("2000", "HIGH")),
            ok(&r2[1], &est("2000", "HIGH")),
            ok(&r2[2], &est("2000", "HIGH")),
            ok(&r2[3], "ESTIMATE: 2000\nREASONING: the median"),
        ],
    );
    let synth = stage_calls(&e);
    all.extend(e);
    all.extend(d.on_reply(ok(&synth[0], "## Delphi Consensus Report\n...")));
    let result = load_result(&rows(&all));
    let md = report(&result);
    assert_contains_all(
        &md,
        &[
            "|---",
            "**Consensus:** 2,000, converged in round 2",
            "**Question** read as numeric.",
            "**Round 1**\n\n| panelist | estimate | confidence | note |",
            "| p1 | 1,000 | low | — |",
            "| p4 | unread |",
            "declined to answer",
            "| p1 | 2,000 | high | changed from 1,000 |",
            "| p4 | 2,000 | not stated |",
            "range 1,000 to 2,500",
        ],
    );
    assert!(md.contains(": not converged.") && md.contains(": converged."), "{md}");
    assert!(md.contains("**Report** written by the facilitator, fac."), "{md}");
    assert_reads_well(&md);
    // A run that stopped early, or nothing at all: no panic, nothing made up.
    assert!(report(&json!({})).is_empty());
    let early = load_result(&rows(&delphi(json!({})).start()));
    assert!(report(&early).is_empty());
}

#[test]
fn the_report_of_a_qualitative_run_gives_the_answers_and_the_agreement() {
    let (mut d, mut all, r2) = qualitative_round_two();
    let e = feed(&mut d, r2.iter().map(|s| ok(s, "ANSWER: Go\nCONFIDENCE: HIGH")).collect());
    let s = stage_calls(&e);
    all.extend(e);
    // The facilitator fails: the rounds stand, and so does their consensus.
    all.extend(d.on_reply(err(&s[0])));
    let md = report(&load_result(&rows(&all)));
    assert_contains_all(
        &md,
        &[
            "**Consensus:** Go, converged in round 2",
            "| panelist | answer | confidence | note |",
            "| p2 | Rust | not stated | — |",
            "Agreement 50% (Go 50%, Python 25%, Rust 25%): not converged.",
            "Agreement 100% (Go 100%): converged.",
        ],
    );
    assert!(!md.contains("**Report**"), "{md}");
    assert_reads_well(&md);
}

#[test]
fn a_json_reply_that_states_no_answer_is_not_read_from_its_punctuation() {
    // The real model once answered a free-form question with an empty JSON answer; the text
    // reader then read the JSON's own syntax and reported "," as the panelist's answer.
    let free = answer_schema(&[], 1);
    for reply in [
        r#"{"reasoning": "The answer is 3.", "answer": "", "confidence": "LOW"}"#,
        r#"{"reasoning": "", "answer": ",", "confidence": "MEDIUM"}"#,
        r#"{"answer": "-", "confidence": "LOW", "reasoning": "unsure"}"#,
        "ANSWER: ,\nCONFIDENCE: LOW",
        "ANSWER: ...\nCONFIDENCE: LOW",
    ] {
        let r = read_panelist(reply, QuestionType::Qualitative, &[], &free);
        assert_eq!((&r.value, r.read_from), (&EstimateValue::Unreadable, None), "{reply}");
    }
    // A reply that fits its schema states its answer in its field, not in its reasoning.
    let reply =
        r#"{"reasoning": "The answer is Tokyo, I think.", "answer": "", "confidence": "HIGH"}"#;
    let r = read_panelist(reply, QuestionType::Qualitative, &[], &free);
    assert_eq!((&r.value, r.read_from), (&EstimateValue::Unreadable, None));
    assert_eq!((r.confidence, r.confidence_stated), (Confidence::High, true));
    assert_eq!(r.reasoning, "The answer is Tokyo, I think.");
}

/// A qualitative round's shares read the same in the round's summary and in the facilitator's
/// trajectory: most common first, answers grouped whatever their case.
#[test]
fn a_qualitative_round_is_summed_up_most_common_first_in_the_summary_and_the_synthesis_prompt() {
    let answers: Vec<String> = ["Yes", "No", "yes"].iter().map(|s| s.to_string()).collect();
    let counts = ConfidenceCounts { low: 1, medium: 1, high: 1 };
    let stats = Stats::Qualitative(qualitative_stats(&answers, counts));
    assert_eq!(stats.summary(2), "Round 2 Statistics: Yes 66.7%, No 33.3%. Agreement: 66.7%.");
    let round = RoundRecord { round: 2, estimates: Vec::new(), stats, converged: false };
    let p = synthesis_prompt("Ship it?", &[round], 3, false, &FinalValue::Answer("Yes".into()));
    assert!(
        p.contains("Round 2:\n- Distribution: Yes 66.7%, No 33.3%\n- Agreement: 66.7%\n- Confidence: 1L / 1M / 1H\n"),
        "{p}"
    );
}
