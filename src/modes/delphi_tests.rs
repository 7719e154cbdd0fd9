//! Delphi: parsers on what models write, the statistics, and the state machine through the
//! seed's edge cases, including proof that later rounds show only aggregates.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    ctx, emitted, err, events, failed, feed, finished, ok, rows, stage_calls,
};
use crate::modes::validate;

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
    let src = include_str!("corpus/delphi.txt");
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
        (report["totalRounds"].clone(), report["converged"].clone(), report["finalValue"].clone()),
        (json!(2), json!(true), json!(2000.0))
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
    assert_eq!(
        (loaded["converged"].clone(), loaded["convergenceRound"].clone()),
        (json!(true), json!(2))
    );
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
    let rounds_live: Vec<Value> = all
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { event, data } if event == "round_complete" => Some(data.clone()),
            _ => None,
        })
        .collect();
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
    let defaults =
        Defaults { offline: true, stage_timeout_ms: 120_000, fallback: Fallbacks::default() };
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

#[test]
fn qualitative_rounds_consolidate_and_a_failing_facilitator_keeps_the_rounds() {
    let mut d = delphi(json!({ "options": ["Go", "Rust", "Python"] }));
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let e = feed(
        &mut d,
        vec![
            ok(&r1[0], "ANSWER: 1"),
            ok(&r1[1], "ANSWER: rust"),
            ok(&r1[2], "ANSWER: Go"),
            ok(&r1[3], "ANSWER: Python"),
        ],
    );
    let r2 = stage_calls(&e);
    all.extend(e);
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
        offline: true,
        stage_timeout_ms: 120_000,
        fallback: Fallbacks { facilitator: Some("sim/zeta".into()), ..Fallbacks::default() },
    };
    let v = validate(&json!({ "question": "q", "mode": "delphi" }), &defaults).unwrap();
    assert_eq!(v.config["facilitatorFallbackModel"], "sim/zeta");
    assert!(!v.models.contains(&"sim/zeta".to_string()), "checked at start-up instead");
}
