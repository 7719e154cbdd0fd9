//! Clarity: parsing scorecards, the PRD's disagreement and scoring rules, the critique, and
//! the state machine down each path (median, post-discussion, arbiter).

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::modes::reading::Unparsed;
use crate::modes::schema::{self, ReadFrom, ReplySchema};
use crate::modes::testkit::{
    all_emitted_data, assert_contains_all, assert_report_free_of, ctx, drive_on_sim_text, emitted,
    err, events, failed, feed, fields, finished, fits_a_closed_think_block, offline_defaults, ok,
    parsed_of, rows, sim_ask, stage_calls,
};
use crate::modes::validate;
use crate::modes::{CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, Mode};

fn card(scores: [f64; 7], issues: &str) -> String {
    let s: Vec<String> =
        DIMENSIONS.iter().zip(scores).map(|(d, v)| format!("\"{}\": {v}", d.key)).collect();
    format!("Here is my verdict.\n```json\n{{\"scores\": {{{}}}, \"critique\": \"ok\", \"issues\": [{issues}]}}\n```\nThanks.", s.join(", "))
}

fn issue(dim: &str, text: &str, sev: &str) -> String {
    format!("{{\"dimension\": \"{dim}\", \"issue\": \"{text}\", \"suggestedFix\": \"fix it\", \"quote\": \"the brief says\", \"severity\": \"{sev}\"}}")
}

#[test]
fn scorecards_are_read_from_json_or_lines() {
    let (s, obj) = parse_scores(&card([8.0, 7.0, 6.5, 9.0, 7.0, 8.0, 6.0], ""));
    assert_eq!(s, [Some(8.0), Some(7.0), Some(6.5), Some(9.0), Some(7.0), Some(8.0), Some(6.0)]);
    assert!(obj.is_some());
    let lines = "- **First-Principles Coherence**: 7\n- Internal Consistency: 8/10\nevidenceQuality = 4\nAccessibility — 11\n";
    let (s, obj) = parse_scores(lines);
    assert_eq!(&s[..4], &[Some(7.0), Some(8.0), Some(4.0), None], "11 is out of range");
    assert!(obj.is_none());
    // A quoted template before the real object: the object with scores counts.
    let t = format!(
        "Template: {{\"scores\": {{\"firstPrinciplesCoherence\": \"0-10\"}}}}\n{}",
        card([5.0; 7], "")
    );
    assert_eq!(parse_scores(&t).0[0], Some(5.0));
}

proptest! {
    #[test]
    fn parsing_never_panics_and_scores_stay_in_range(text in "\\PC{0,400}") {
        for s in parse_scores(&text).0.into_iter().flatten() {
            prop_assert!((0.0..=10.0).contains(&s));
        }
    }
}

/// The search as it was (each `{` scanned forward on its own, quadratic): the reference the
/// one-pass search must agree with.
fn last_json_object_reference(text: &str) -> Option<Value> {
    fn matching_brace(text: &str, start: usize) -> Option<usize> {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for (i, c) in text[start..].char_indices() {
            match (in_string, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => in_string = false,
                (true, false, _) => {}
                (false, _, '"') => in_string = true,
                (false, _, '{') => depth += 1,
                (false, _, '}') => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(start + i);
                    }
                }
                _ => {}
            }
        }
        None
    }
    let starts: Vec<usize> =
        text.char_indices().filter(|(_, c)| *c == '{').map(|(i, _)| i).collect();
    starts.into_iter().rev().find_map(|start| {
        let end = matching_brace(text, start)?;
        match serde_json::from_str::<Value>(&text[start..=end]) {
            Ok(v @ Value::Object(_)) if v.get("scores").is_some_and(Value::is_object) => Some(v),
            _ => None,
        }
    })
}

#[test]
fn the_last_object_with_scores_is_the_one_that_opens_last() {
    let cases: &[(&str, Option<Value>)] = &[
        ("no object", None),
        ("{\"scores\": 7}", None),
        ("{\"scores\": {\"a\": 1}}", Some(json!({"scores": {"a": 1}}))),
        // Code fences, prose and trailing garbage around it; an unclosed `{` after it.
        (
            "Verdict:\n```json\n{\"scores\": {\"a\": 1}}\n```\n} trailing { \"x\"",
            Some(json!({"scores": {"a": 1}})),
        ),
        // The later of two; an invalid later one does not hide an earlier valid one.
        (
            "{\"scores\": {\"a\": 1}} then {\"scores\": {\"a\": 2}}",
            Some(json!({"scores": {"a": 2}})),
        ),
        (
            "{\"scores\": {\"a\": 1}} then {\"scores\": {\"a\": 2},}",
            Some(json!({"scores": {"a": 1}})),
        ),
        // Braces and escaped quotes inside strings do not count.
        (
            "{\"scores\": {\"a\": 1}, \"critique\": \"a } and a \\\" and {\"}",
            Some(json!({"scores": {"a": 1}, "critique": "a } and a \" and {"})),
        ),
        // A nested object with scores opens after the outer one, so it wins even when the
        // outer one has scores too.
        (
            "{\"scores\": {\"a\": 1}, \"inner\": {\"scores\": {\"a\": 2}}}",
            Some(json!({"scores": {"a": 2}})),
        ),
        ("{\"x\": {\"scores\": {\"a\": 3}}}", Some(json!({"scores": {"a": 3}}))),
        // A `{` inside a quoted string of the prose still starts a candidate of its own.
        ("He wrote \"see {\"scores\": {\"a\": 4}}\" twice", Some(json!({"scores": {"a": 4}}))),
        // An escaped key still names `scores`.
        ("{\"sc\\u006fres\": {\"a\": 5}}", Some(json!({"scores": {"a": 5}}))),
        // Found by the property test against broken versions: a scan that sees `\"` as an
        // escape and one that sees a quote opening meet (both in a string from there on).
        ("}{\"scores\":{},\"{\\\"\":\"\"}", Some(json!({"scores": {}, "{\"": ""}))),
        ("{\"scores\": {\"scores\": 1}}", Some(json!({"scores": {"scores": 1}}))),
        // Duplicate keys: the last one counts.
        ("{\"scores\": {\"a\": 1}, \"scores\": 2}", None),
    ];
    for (text, want) in cases {
        assert_eq!(&last_json_object(text), want, "{text}");
        assert_eq!(&last_json_object_reference(text), want, "reference: {text}");
    }
}

/// A JSON object as a model would write it, with keys `scores`, `a` or short runs of
/// braces, quotes and backslashes (escaped when serialised), nested up to three deep.
fn json_object_text() -> impl Strategy<Value = String> {
    const KEY: &str = "scores|scores|a|[{}\"\\\\]{0,3}";
    let leaf = prop_oneof![
        "[{}\"\\\\a :,]{0,6}".prop_map(Value::from),
        (0..11i32).prop_map(Value::from),
        Just(Value::Null),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(KEY, inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::btree_map(KEY, value, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()).to_string())
}

/// Text made of what the search reacts to: braces, quotes, escapes, `scores` (plain and
/// escaped), JSON punctuation and values, whole objects (with escapes in their strings) and
/// fences, a little prose and Unicode.
fn reply_text() -> impl Strategy<Value = String> {
    #[rustfmt::skip]
    const PIECES: &[&str] = &[
        "{", "{", "{", "}", "}", "}", "\"", "\"", "\\", "\\\"", "\\\\", "\"scores\"", "scores",
        ":", ",", " ", "\n", "[", "]", "1", "7.5", "1e999", "\"x\"", "null", "{}", "```json\n",
        "\n```", "é", "\u{1}", "\"sc\\u006fres\"", "{\"scores\": ", "{\"scores\": {}}",
        "{\"scores\": {\"clarity\": 7}}", "\"scores\": {\"a\": 1}", "{\"scores\": 1}",
        "{\"a\": ", "\"a\": \"{\", ", "{\"sc\\u006fres\": {\"a\": 2}}",
    ];
    let piece = prop_oneof![
        6 => proptest::sample::select(PIECES).prop_map(str::to_string),
        1 => json_object_text(),
    ];
    prop_oneof![
        8 => proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat()),
        1 => "[{}\"\\\\:, a]{0,80}",
        1 => "\\PC{0,200}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]
    #[test]
    fn the_one_pass_search_agrees_with_the_reference(text in reply_text()) {
        prop_assert_eq!(last_json_object(&text), last_json_object_reference(&text));
    }
}

#[test]
fn the_search_agrees_with_the_reference_on_the_fuzz_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    for entry in std::fs::read_dir(dir).unwrap() {
        let text =
            String::from_utf8_lossy(&std::fs::read(entry.unwrap().path()).unwrap()).into_owned();
        assert_eq!(last_json_object(&text), last_json_object_reference(&text));
    }
}

/// What the parser is handed stays linear in the reply: adversarial replies of 80 KB, counted
/// in bytes parsed (no clock).
#[test]
fn the_search_parses_a_linear_amount() {
    let n = 80_000;
    let deep = |inner: String, levels: usize| {
        "{\"scores\": 1, \"x\": ".repeat(levels) + &inner + &"}".repeat(levels)
    };
    let shapes: [(&str, String, usize); 6] = [
        ("open braces", "{".repeat(n), 0),
        ("balanced braces", "{".repeat(n / 2) + &"}".repeat(n / 2), 0),
        ("quoted and escaped braces", "{\"\\\"{\\\\}\"scores".repeat(n / 14), 2),
        // Each level is invalid (`{"scores": }`) and encloses the next.
        ("nested invalid candidates", deep(String::new(), n / 18), 2),
        // Valid objects with scores that is not an object, deeper than serde_json takes.
        ("nested valid candidates", deep("1".into(), n / 18), 2),
        // 127 valid levels around 80 KB: each level is parsed whole, the bounded worst.
        ("deep padding", deep(format!("{{\"p\": \"{}\"}}", "x".repeat(n)), 126), 130),
    ];
    for (name, text, factor) in shapes {
        let mut parsed = 0;
        let found = find_last_object(&text, |s| {
            parsed += s.len();
            serde_json::from_str(s).ok()
        });
        assert_eq!(found, None, "{name}");
        assert!(parsed <= factor * text.len(), "{name}: {parsed} bytes parsed of {}", text.len());
    }
}

fn verdict(role: &str, scores: [f64; 7]) -> Verdict {
    let s = scores.map(Some);
    Verdict {
        role: role.into(),
        model: "m".into(),
        overall: weighted(&s),
        scores: s,
        critique: String::new(),
        issues: vec![],
        justification: None,
        response_time_ms: 1,
        parse_success: true,
        unparsed: None,
        read_from: None,
    }
}

/// The skeptic's, the advocate's and the generalist's verdicts, with these scores.
fn verdicts(scores: [[f64; 7]; 3]) -> [Verdict; 3] {
    let [s, a, g] = scores;
    [verdict("skeptic", s), verdict("advocate", a), verdict("generalist", g)]
}

#[test]
fn weights_sum_to_one_and_scores_are_weighted() {
    assert!((DIMENSIONS.iter().map(|d| d.weight).sum::<f64>() - 1.0).abs() < 1e-9);
    assert_eq!(
        weighted(&[Some(10.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0)]),
        Some(2.0)
    );
    assert_eq!(
        weighted(&[Some(10.0), None, None, None, None, None, None]),
        Some(10.0),
        "renormalised"
    );
}

#[test]
fn disagreement_is_a_spread_above_two_per_dimension_or_overall() {
    let calm = verdicts([[7.0; 7], [8.0; 7], [9.0; 7]]);
    let d = detect_disagreement(&calm);
    assert!(!d.has_disagreement, "a spread of exactly 2 is not disagreement");
    assert_eq!(d.max_spread, 2.0);
    let s = sevens_but(2, 3.0);
    let split = verdicts([s, [7.0; 7], [7.5; 7]]);
    let d = detect_disagreement(&split);
    assert_eq!(
        (d.has_disagreement, d.disagreeing_dimensions.clone()),
        (true, vec!["evidenceQuality".to_string()])
    );
    assert_eq!(d.evaluator_positions["skeptic"]["evidenceQuality"], Some(3.0));
    assert!(review_reason(&d).contains("Evidence Quality (advocate 7, generalist 7.5, skeptic 3)"));
}

#[test]
fn final_scores_use_medians_and_weight_the_arbiter() {
    let v = verdicts([[2.0; 7], [8.0; 7], [6.0; 7]]);
    assert_eq!(final_scores(&v, &BTreeMap::new())[0], Some(6.0));
    let arb: BTreeMap<String, f64> = [("firstPrinciplesCoherence".to_string(), 5.0)].into();
    // (2 + 8 + 6 + 1.5 * 5) / 4.5 = 5.2
    let f = final_scores(&v, &arb);
    assert_eq!((f[0], f[1]), (Some(5.2), Some(6.0)));
}

#[test]
fn the_critique_merges_ranks_and_keeps_five() {
    let mut a = verdict("skeptic", [4.0; 7]);
    let mut b = verdict("advocate", [6.0; 7]);
    let mut c = verdict("generalist", [6.0; 7]);
    let parse = |s: String| {
        issues_of(Some(&serde_json::from_str(&format!("{{\"issues\": [{s}]}}")).unwrap()))
    };
    a.issues = parse(
        [
            issue("evidenceQuality", "Claims lack cited sources", "high"),
            issue("accessibility", "Jargon everywhere", "low"),
        ]
        .join(","),
    );
    b.issues = parse(
        [
            issue("evidenceQuality", "Claims lack any cited sources here", "medium"),
            issue("objectivity", "One side only", "medium"),
        ]
        .join(","),
    );
    let distinct = [
        "Loaded adjectives in the introduction",
        "Selective statistics chosen",
        "Headline casts workers as lazy",
        "Only employer quotes appear",
        "Emotive closing paragraph",
        "Passive voice hides responsibility",
    ];
    c.issues = parse(
        distinct.iter().map(|t| issue("biasDetection", t, "low")).collect::<Vec<_>>().join(","),
    );
    let crit = consolidate(&[a, b, c], &[Some(5.0); 7]);
    assert_eq!(crit.len(), 5, "{crit:#?}");
    assert_eq!(crit[0].dimension, "evidenceQuality", "two evaluators flagged it: first");
    assert_eq!(crit[0].flagged_by, vec!["skeptic", "advocate"]);
    assert_eq!(crit[0].priority, "high");
    assert!(!crit[0].quote.is_empty() && !crit[0].suggested_fix.is_empty());
}

/// Scores of 7 on every dimension but the `i`th, which scores `score`.
fn sevens_but(i: usize, score: f64) -> [f64; 7] {
    let mut s = [7.0; 7];
    s[i] = score;
    s
}

/// A run of `discussion` whose evaluators sent cards with these scores: it and the effects.
fn evaluated(discussion: &str, scores: [[f64; 7]; 3]) -> (Clarity, Vec<Effect>) {
    let mut c = clarity(discussion);
    let calls = stage_calls(&c.start());
    let e = feed_cards(&mut c, &calls, scores);
    (c, e)
}

/// Feeds the three evaluators' calls their cards with these scores, and no issues.
fn feed_cards(c: &mut Clarity, calls: &[CallSpec], scores: [[f64; 7]; 3]) -> Vec<Effect> {
    feed(c, calls.iter().zip(scores).map(|(s, x)| ok(s, &card(x, ""))).collect())
}

fn clarity(discussion: &str) -> Clarity {
    let cfg = json!({ "content": "The brief text.", "context": null, "title": null, "discussion": discussion, "timeoutMs": 60000,
                      "models": { "skeptic": "s", "advocate": "a", "generalist": "g", "arbiter": "arb" } });
    Clarity::new(&cfg, ctx("Score this brief", vec![], false)).expect("a configuration that fits")
}

#[test]
fn close_scores_skip_the_discussion_and_take_the_median() {
    let mut c = clarity("auto");
    let mut all = c.start();
    let calls = stage_calls(&all);
    assert_eq!(calls.len(), 3);
    assert!(calls[0].messages[0].content.starts_with("You are the Skeptic"));
    let e = feed_cards(&mut c, &calls, [[7.0; 7], [7.5; 7], [8.0; 7]]);
    all.extend(e.clone());
    assert_eq!(events(&e).iter().filter(|x| *x == "evaluator_complete").count(), 3);
    let score = emitted(&e, "score_complete").unwrap()["data"].clone();
    assert_eq!(
        fields(&score, ["method", "score", "needsHumanReview"]),
        [json!("median"), json!(7.5), json!(false)]
    );
    assert!(finished(&e).unwrap().starts_with("Clarity score: 7.5/10"));
    assert!(!events(&all).contains(&"discussion_start".to_string()));
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["score"], score);
    assert_eq!(loaded["evaluations"].as_array().unwrap().len(), 3);
    let done = emitted(&e, "score_complete").unwrap();
    assert_eq!((&done["partial"], &done["failedModels"]), (&json!(false), &json!([])));
    assert_eq!((&loaded["partial"], &loaded["failedModels"]), (&json!(false), &json!([])));
}

#[test]
fn a_discussion_that_resolves_uses_the_revised_scores() {
    let low = sevens_but(2, 3.0);
    let (mut c, e) = evaluated("auto", [low, [7.0; 7], [7.0; 7]]);
    assert!(events(&e).contains(&"disagreement_detected".to_string()));
    let disc = stage_calls(&e);
    assert_eq!(disc.len(), 3);
    assert!(disc[0].messages[1]
        .content
        .contains("would you revise any scores? Explain your reasoning."));
    assert!(disc[0].messages[1]
        .content
        .contains("Evidence Quality (evidenceQuality): skeptic 3, advocate 7, generalist 7"));
    let revised = sevens_but(2, 6.0);
    let e = feed(
        &mut c,
        vec![ok(&disc[0], &card(revised, "")), err(&disc[1]), ok(&disc[2], &card([7.0; 7], ""))],
    );
    let done = emitted(&e, "discussion_complete").unwrap()["data"].clone();
    assert_eq!(done["changes"][0]["changedDimensions"], json!(["evidenceQuality"]));
    assert_eq!(done["changes"][1]["failed"], true, "a failed revision keeps the first verdict");
    let score = emitted(&e, "score_complete").unwrap()["data"].clone();
    assert_eq!(score["method"], "post_discussion");
    assert_eq!(score["breakdown"][2]["score"], 7.0);
    assert!(!e.iter().any(|x| matches!(x, Effect::FlagForReview { .. })));
}

#[test]
fn lasting_disagreement_calls_the_arbiter_and_flags_the_run() {
    for discussion in ["auto", "never"] {
        let low = sevens_but(2, 2.0);
        let (mut c, mut e) = evaluated(discussion, [low, [7.0; 7], [8.0; 7]]);
        if discussion == "auto" {
            let disc = stage_calls(&e);
            e = feed(
                &mut c,
                disc.iter()
                    .enumerate()
                    .map(|(i, s)| ok(s, &card(if i == 0 { low } else { [7.0; 7] }, "")))
                    .collect(),
            );
        }
        let arb = stage_calls(&e);
        assert_eq!((arb[0].key.as_str(), arb[0].model.as_str()), ("arbiter", "arb"));
        assert!(arb[0].messages[1]
            .content
            .contains("DISPUTED DIMENSIONS: Evidence Quality (`evidenceQuality`)"));
        let out = c.on_reply(ok(
            &arb[0],
            "{\"scores\": {\"evidenceQuality\": 5, \"accessibility\": 1}, \"reasoning\": \"r\"}",
        ));
        let score = emitted(&out, "score_complete").unwrap()["data"].clone();
        assert_eq!(score["method"], "arbiter");
        assert_eq!(score["breakdown"][2]["arbiterScore"], 5.0);
        assert_eq!(
            score["breakdown"][3]["arbiterScore"],
            json!(null),
            "only disputed dimensions are arbitrated"
        );
        assert_eq!(score["needsHumanReview"], true);
        assert!(out.iter().any(
            |x| matches!(x, Effect::FlagForReview { reason } if reason.contains("Evidence Quality"))
        ));
    }
}

#[test]
fn a_failing_arbiter_still_scores_and_flags_and_too_few_evaluators_fail() {
    let low = sevens_but(0, 1.0);
    let (mut c, e) = evaluated("never", [low, [7.0; 7], [7.0; 7]]);
    let out = c.on_reply(err(&stage_calls(&e)[0]));
    let score = emitted(&out, "score_complete").unwrap()["data"].clone();
    assert_eq!(fields(&score, ["needsHumanReview", "method"]), [json!(true), json!("median")]);
    let mut c = clarity("auto");
    let calls = stage_calls(&c.start());
    let e = feed(
        &mut c,
        vec![ok(&calls[0], &card([7.0; 7], "")), err(&calls[1]), ok(&calls[2], "no scores at all")],
    );
    assert!(failed(&e).is_some());
}

// ---- backups and partial runs ---------------------------------------------------------------

fn clarity_with_backup() -> Clarity {
    let cfg = json!({ "content": "The brief text.", "context": null, "title": null, "discussion": "never", "timeoutMs": 60000,
                      "models": { "skeptic": "s", "advocate": "a", "generalist": "g", "arbiter": "arb" },
                      "arbiterFallbackModel": "arb2" });
    Clarity::new(&cfg, ctx("Score this brief", vec![], false)).expect("a configuration that fits")
}

/// Two evaluators that disagree on First-Principles Coherence (the Advocate's call fails);
/// returns the arbiter call and all effects.
fn disputed(c: &mut Clarity) -> (CallSpec, Vec<Effect>) {
    let mut all = c.start();
    let calls = stage_calls(&all);
    let low = sevens_but(0, 1.0);
    let e = feed(
        c,
        vec![ok(&calls[0], &card(low, "")), err(&calls[1]), ok(&calls[2], &card([7.0; 7], ""))],
    );
    let arb = stage_calls(&e);
    all.extend(e);
    assert_eq!(arb.len(), 1);
    (arb[0].clone(), all)
}

#[test]
fn a_failing_arbiter_is_replaced_by_its_backup_and_a_failed_evaluator_marks_the_run_partial() {
    let mut c = clarity_with_backup();
    let (arb, mut all) = disputed(&mut c);
    let e = c.on_reply(err(&arb));
    let retry = stage_calls(&e);
    assert_eq!((retry[0].key.as_str(), retry[0].model.as_str()), ("arbiter:backup", "arb2"));
    assert_eq!(retry[0].messages, arb.messages, "the same system prompt and brief");
    assert!(emitted(&e, "score_complete").is_none());
    all.extend(e);
    let out = c.on_reply(ok(
        &retry[0],
        "{\"scores\": {\"firstPrinciplesCoherence\": 4}, \"reasoning\": \"r\"}",
    ));
    all.extend(out.clone());
    let arbiter = emitted(&out, "arbiter_complete").unwrap()["data"].clone();
    assert_eq!((&arbiter["model"], &arbiter["fallbackFrom"]), (&json!("arb2"), &json!("arb")));
    let live = emitted(&out, "score_complete").unwrap();
    assert_eq!(live["data"]["method"], "arbiter");
    assert_eq!(live["data"]["breakdown"][0]["arbiterScore"], 4.0);
    assert_eq!(live["partial"], true);
    assert_eq!(
        live["failedModels"],
        json!([
            { "model": "a", "role": "advocate", "stage": "evaluation",
              "error": { "kind": "http", "status": 503, "message": "down" } },
            { "model": "arb", "role": "arbiter", "stage": "arbiter", "fallbackTo": "arb2",
              "error": { "kind": "http", "status": 503, "message": "down" } },
        ])
    );
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["arbiter"], arbiter);
    assert_eq!(loaded["score"], live["data"]);
    assert_eq!(
        (&loaded["partial"], &loaded["failedModels"]),
        (&live["partial"], &live["failedModels"])
    );
}

#[test]
fn a_failing_backup_arbiter_still_scores_and_flags() {
    let mut c = clarity_with_backup();
    let (arb, mut all) = disputed(&mut c);
    let e = c.on_reply(err(&arb));
    let retry = stage_calls(&e);
    all.extend(e);
    let out = c.on_reply(err(&retry[0]));
    all.extend(out.clone());
    let live = emitted(&out, "score_complete").unwrap();
    assert_eq!(
        (&live["data"]["needsHumanReview"], &live["data"]["method"]),
        (&json!(true), &json!("median"))
    );
    assert!(emitted(&out, "arbiter_complete").unwrap()["data"].get("fallbackFrom").is_none());
    assert_eq!(live["failedModels"].as_array().map(Vec::len), Some(3));
    let loaded = load_result(&rows(&all));
    assert!(loaded["arbiter"].is_null());
    assert_eq!(loaded["failedModels"], live["failedModels"]);
}

#[test]
fn validation() {
    let d = Defaults { stage_timeout_ms: 60_000, ..offline_defaults() };
    let v =
        validate(&json!({ "mode": "clarity", "modeConfig": { "content": "brief" } }), &d).unwrap();
    assert_eq!(v.question, "Score this brief");
    assert_eq!(v.config["models"]["arbiter"], "sim/haiku");
    assert_eq!(v.config["discussion"], "auto");
    let field = |cfg: Value| {
        validate(&json!({ "mode": "clarity", "modeConfig": cfg }), &d).unwrap_err().field
    };
    assert_eq!(field(json!({ "content": "" })), "modeConfig.content");
    assert_eq!(
        field(json!({ "content": "x", "discussion": "sometimes" })),
        "modeConfig.discussion"
    );
    assert_eq!(
        field(json!({ "content": "x", "models": { "judge": "m" } })),
        "modeConfig.models.judge"
    );
    assert_eq!(
        field(json!({ "content": "x", "models": { "skeptic": "" } })),
        "modeConfig.models.skeptic"
    );
    assert!(v.config.get("arbiterFallbackModel").is_none());
    let backed = Defaults {
        fallback: Fallbacks { arbiter: Some("sim/sonnet".into()), ..Fallbacks::default() },
        ..d
    };
    let body = json!({ "mode": "clarity", "modeConfig": { "content": "brief" } });
    let v = validate(&body, &backed).unwrap();
    assert_eq!(v.config["arbiterFallbackModel"], "sim/sonnet");
    // The stored configuration still reads as a ClarityConfig, and the run finds its backup.
    assert!(serde_json::from_value::<ClarityConfig>(v.config.clone()).is_ok());
    assert_eq!(
        Clarity::new(&v.config, ctx("q", vec![], false))
            .expect("a configuration that fits")
            .arbiter_fallback
            .as_deref(),
        Some("sim/sonnet")
    );
}

// ---- the corpus: real and adversarial replies, each with the parse a careful reader expects --

fn reply(text: &str) -> CallReply {
    CallReply {
        key: "evaluate:0".into(),
        model: "m".into(),
        response_time_ms: 1,
        result: Ok(text.into()),
        usage: None,
    }
}

/// A case: its name, the reply, the scores and why the scorecard could not be read.
type Case<'a> = (&'a str, &'a str, [Option<f64>; 7], Option<Unparsed>);

fn check_corpus(cases: &[Case]) {
    for (name, text, scores, unparsed) in cases {
        assert_eq!(parse_scores(text).0, *scores, "{name}: scores");
        let v = read_verdict("skeptic", &reply(text)).unwrap();
        assert_eq!(v.unparsed, *unparsed, "{name}: unparsed");
        assert_eq!(v.parse_success, unparsed.is_none(), "{name}: parseSuccess");
        assert!(!v.critique.contains("<think"), "{name}: a trace in the critique");
    }
}

/// Replies of SmolLM2-135M-Instruct to the evaluation prompt (each persona's system prompt
/// and `evaluation_prompt`), verbatim (`corpus/clarity/SOURCES.md`). None has a scorecard:
/// it restates its persona, repeats the brief, or writes a letter. One echoes the guideline
/// (`First-Principles Coherence: 9-10 all correct; …`), a range, not a score.
#[test]
fn real_replies_parse_as_a_careful_reader_reads_them() {
    let none = [None; 7];
    let no = Some(Unparsed::NoAnswer);
    let cases = [
        ("smollm2-01", include_str!("../corpus/clarity/smollm2-01.txt"), none, no),
        ("smollm2-02", include_str!("../corpus/clarity/smollm2-02.txt"), none, no),
        ("smollm2-03", include_str!("../corpus/clarity/smollm2-03.txt"), none, no),
        ("smollm2-04", include_str!("../corpus/clarity/smollm2-04.txt"), none, no),
        ("smollm2-05", include_str!("../corpus/clarity/smollm2-05.txt"), none, no),
        ("smollm2-06", include_str!("../corpus/clarity/smollm2-06.txt"), none, no),
        ("smollm2-07", include_str!("../corpus/clarity/smollm2-07.txt"), none, no),
        ("smollm2-08", include_str!("../corpus/clarity/smollm2-08.txt"), none, no),
        ("smollm2-09", include_str!("../corpus/clarity/smollm2-09.txt"), none, no),
    ];
    check_corpus(&cases);
}

fn json_card(s: [f64; 7]) -> String {
    let pairs: Vec<String> =
        DIMENSIONS.iter().zip(s).map(|(d, v)| format!("\"{}\": {v}", d.key)).collect();
    format!("{{\"scores\": {{{}}}, \"critique\": \"c\", \"issues\": []}}", pairs.join(", "))
}

#[test]
fn adversarial_replies_parse_as_a_careful_reader_reads_them() {
    use Unparsed::*;
    let (draft, last) = ([2.0; 7], [7.0, 8.0, 6.0, 9.0, 5.0, 7.5, 6.0]);
    let want = last.map(Some);
    let none = [None; 7];
    let in_think = format!(
        "<think>\nFirst try:\n{}\nToo harsh.\n</think>\n\n```json\n{}\n```",
        json_card(draft),
        json_card(last)
    );
    let think_after =
        format!("{}\n<think>Should it be {}?</think>", json_card(last), json_card(draft));
    let opened = format!("{}\n</think>\n{}", json_card(draft), json_card(last));
    let unclosed = format!("<think>\nMy scores would be {} but let me check the", json_card(last));
    let table = "| Dimension | Score |\n|---|:-:|\n| First-Principles Coherence | 7 |\n| Internal Consistency | 8 |\n| Evidence Quality | 6 |\n| Accessibility | 9 |\n| Objectivity | 5 |\n| Factual Accuracy | 7.5 |\n| Bias Detection | 6 |";
    let lines = "- First-Principles Coherence: 7/10\n- **Internal Consistency**: **8**\n- Evidence Quality — 6 out of 10\n- accessibility = 9\n- Objectivity: 5\n- Factual Accuracy: 7.5\n- Bias Detection: 6";
    let odd = "Evidence Quality: 3–4\nAccessibility: 4/5\nObjectivity: -2\nFactual Accuracy: 8\nBias Detection: 10/10\nInternal Consistency: 7\nFirst-Principles Coherence: 9-10 every conclusion traces to stated premises";
    let strings = "Scores below.\n```json\n{\"scores\": {\"firstPrinciplesCoherence\": \"7/10\", \"internalConsistency\": \"8\", \"evidenceQuality\": 6, \"accessibility\": 9, \"objectivity\": 5, \"factualAccuracy\": 7.5, \"biasDetection\": 6}}\n```";
    let dims = dimension_list();
    let cases: Vec<Case> = vec![
        ("a draft scorecard in think", &in_think, want, None),
        ("a think block after the scorecard", &think_after, want, None),
        ("a template-opened block", &opened, want, None),
        ("an unclosed trace", &unclosed, none, Some(ReasoningOnly)),
        ("only reasoning", "<think>7, 8, 6, 9, 5, 7.5, 6</think>", none, Some(ReasoningOnly)),
        (
            "a refusal",
            "I cannot score this brief; scoring policy is outside my role.",
            none,
            Some(Refused),
        ),
        (
            "a refusal naming dimensions",
            "I can't rate Evidence Quality or Objectivity without the sources.",
            none,
            Some(Refused),
        ),
        ("a Markdown table", table, want, None),
        ("lines", lines, want, None),
        (
            "ranges, other scales, a minus",
            odd,
            [None, Some(7.0), None, None, None, Some(8.0), Some(10.0)],
            Some(NoAnswer),
        ),
        ("string scores in a fence", strings, want, None),
        ("the format echoed", FORMAT, none, Some(NoAnswer)),
        ("the dimension list echoed", &dims, none, Some(NoAnswer)),
    ];
    check_corpus(&cases);
}

#[test]
fn unparsed_evaluators_say_why_live_and_from_rows() {
    let mut c = clarity("auto");
    let mut all = c.start();
    let calls = stage_calls(&all);
    let low = sevens_but(2, 3.0);
    let e = feed(
        &mut c,
        vec![
            ok(&calls[0], &format!("<think>{}</think>\n{}", card([1.0; 7], ""), card(low, ""))),
            ok(&calls[1], &card([7.0; 7], "")),
            ok(&calls[2], &card([7.0; 7], "")),
        ],
    );
    let first = emitted(&e, "evaluator_complete").unwrap()["data"].clone();
    assert_eq!(
        (first["scores"]["evidenceQuality"].clone(), first["unparsed"].clone()),
        (json!(3.0), json!(null))
    );
    let disc = stage_calls(&e);
    all.extend(e);
    let e = feed(
        &mut c,
        vec![
            ok(&disc[0], "I cannot revise scores for a brief I consider unfair."),
            ok(&disc[1], "<think>Maybe 6 on evidence"),
            ok(&disc[2], &card([7.0; 7], "")),
        ],
    );
    let done = emitted(&e, "discussion_complete").unwrap()["data"].clone();
    assert_eq!(done["changes"][0]["unparsed"], "refused");
    assert_eq!(done["changes"][1]["unparsed"], "reasoning_only");
    assert_eq!(done["changes"][0]["failed"], true);
    assert_eq!(done["verdicts"][0]["scores"]["evidenceQuality"], 3.0, "the first verdict stands");
    let arb = stage_calls(&e);
    all.extend(e);
    let out = c.on_reply(ok(&arb[0], "I'm unable to judge this; the brief is too short."));
    let arbiter = emitted(&out, "arbiter_complete").unwrap()["data"].clone();
    assert_eq!(arbiter["unparsed"], "refused");
    all.extend(out);
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["evaluations"][0], first);
    assert_eq!(loaded["arbiter"], arbiter);
    let kept: Vec<Value> = loaded["discussion"].as_array().unwrap().clone();
    assert_eq!(kept.len(), 3, "unreadable discussion replies are kept");
    assert_eq!(
        kept.iter().map(|v| v["unparsed"].clone()).collect::<Vec<_>>(),
        vec![json!("refused"), json!("reasoning_only"), json!(null)]
    );
    assert_eq!(loaded["score"], emitted(&all, "score_complete").unwrap()["data"]);
}

fn answers() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(card([7.0, 8.0, 6.0, 9.0, 5.0, 7.5, 6.0], "")),
        Just(
            "- Evidence Quality: 6/10\n- Objectivity: 5\n- Accessibility: 9\n- Bias Detection: 4"
                .to_string()
        ),
        Just("I cannot score this brief.".to_string()),
        "[A-Za-z0-9:{}\"|\\-\n ]{1,120}",
    ]
}

proptest! {
    /// Whatever a closed `<think>` block holds, what is read after it is what the answer
    /// alone gives.
    #[test]
    fn a_closed_think_block_never_changes_the_parse(inside in "\\PC{0,300}", answer in answers()) {
        prop_assume!(fits_a_closed_think_block(&inside, &answer));
        let text = format!("<think>{inside}</think>\n{answer}");
        prop_assert_eq!(parse_scores(&text), parse_scores(answer.trim()));
        prop_assert_eq!(read_verdict("skeptic", &reply(&text)), read_verdict("skeptic", &reply(answer.trim())));
    }

    #[test]
    fn no_input_makes_the_reader_panic(text in "(\\PC|<think>|</think>|\\{\"scores\": |\\}|```|: |Objectivity: |7|–|-|/){0,120}") {
        let v = read_verdict("skeptic", &reply(&text)).unwrap();
        prop_assert_eq!(v.parse_success, v.unparsed.is_none());
    }
}

// ---- structured replies ---------------------------------------------------------------

/// A clarity run whose roles' models `json` are asked for JSON (their routes take structured
/// output).
fn structured_clarity(discussion: &str, json: &[&str]) -> Clarity {
    let cfg = json!({ "content": "The brief text.", "context": "For a city council.", "title": null, "discussion": discussion, "timeoutMs": 60000,
                      "models": { "skeptic": "s", "advocate": "a", "generalist": "g", "arbiter": "arb" },
                      "arbiterFallbackModel": "arb2" });
    let mut ctx = ctx("Score this brief", vec![], false);
    ctx.structured = crate::modes::Structured::models(json);
    Clarity::new(&cfg, ctx).expect("a configuration that fits")
}

/// A scorecard as the schema asks for it.
fn schema_card(scores: [f64; 7], justification: Option<&str>) -> String {
    let mut v = json!({
        "reasoning": "The evidence is thin.",
        "scores": DIMENSIONS.iter().zip(scores).map(|(d, s)| (d.key.to_string(), json!(s))).collect::<serde_json::Map<_, _>>(),
        "critique": "Solid structure, weak sourcing.",
        "issues": [{ "dimension": "evidenceQuality", "issue": "No sources", "suggestedFix": "Cite them",
                     "quote": "The brief text.", "severity": "high" }],
    });
    if let Some(j) = justification {
        v["justification"] = json!(j);
    }
    v.to_string()
}

#[test]
fn roles_that_take_json_are_asked_for_their_schemas_and_the_others_for_text() {
    let mut c = structured_clarity("always", &["s", "g", "arb"]);
    let evals = stage_calls(&c.start());
    assert!(evals.iter().all(|e| e.schema.as_ref().is_some_and(|s| s.name == "clarity_scorecard")));
    let schema = evals[0].schema.clone().unwrap();
    let props = &schema.schema["properties"];
    let keys: Vec<&String> = props.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "scores", "critique", "issues"], "reasoning first");
    let dims: Vec<&String> = props["scores"]["properties"].as_object().unwrap().keys().collect();
    assert_eq!(dims, DIMENSIONS.iter().map(|d| d.key).collect::<Vec<_>>());
    let score = &props["scores"]["properties"]["objectivity"];
    assert_eq!((score["minimum"].as_f64(), score["maximum"].as_f64()), (Some(0.0), Some(10.0)));
    assert_eq!(
        props["issues"]["items"]["properties"]["severity"]["enum"],
        json!(["high", "medium", "low"])
    );
    // The JSON prompt keeps the instructions and the system prompt, and swaps the format; the
    // text one is the spec's.
    let (json_prompt, text_prompt) = (&evals[0].messages[1].content, &evals[1].messages[1].content);
    assert!(evals[0].messages[0].content.starts_with("You are the Skeptic"));
    assert_contains_all(
        json_prompt,
        &[
            "CLARITY EVALUATION",
            "DIMENSIONS:\n- First-Principles Coherence",
            "Your focus dimensions: evidenceQuality",
        ],
    );
    assert!(
        json_prompt.contains("Reply with a single JSON object")
            && !json_prompt.contains("0-10, \"internalConsistency\"")
    );
    let cfg: ClarityConfig = serde_json::from_value(
        json!({ "content": "The brief text.", "context": "For a city council.", "title": null,
        "models": {}, "discussion": "always", "timeoutMs": 60000 }),
    )
    .unwrap();
    assert_eq!(
        text_prompt,
        &evaluation_prompt(&cfg, &PERSONAS[1], None),
        "the text form is the spec's"
    );
    // The brief and its context are named, for fitting into a small context.
    let names: Vec<&str> = evals[0].material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["the brief", "the brief's context"]);
    // The discussion asks for its own schema, with the justification, and quotes the critiques.
    let disc = stage_calls(&feed(
        &mut c,
        evals.iter().map(|e| ok(e, &schema_card([7.0; 7], None))).collect(),
    ));
    assert!(disc.iter().all(|d| d.schema.as_ref().is_some_and(|s| s.name == "clarity_discussion")));
    let keys: Vec<String> = disc[0].schema.as_ref().unwrap().schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["reasoning", "scores", "critique", "issues", "justification"]);
    assert!(disc[0].messages[1]
        .content
        .contains("\"justification\": why you revised or kept your scores"));
    assert!(
        disc[1].messages[1].content.contains("Add \"justification\""),
        "the Advocate is asked in text"
    );
    assert!(disc[0].material.iter().any(|m| m.name == "the critiques"));
    assert!(disc
        .iter()
        .chain(&evals)
        .all(|c| c.material.iter().all(|m| c.messages[1].content.contains(&*m.text))));
}

#[test]
fn the_arbiter_and_its_backup_are_asked_for_exactly_the_disputed_dimensions() {
    let mut c = structured_clarity("never", &["s", "a", "g", "arb"]);
    let evals = stage_calls(&c.start());
    let low = sevens_but(2, 2.0);
    let e = feed(
        &mut c,
        vec![
            ok(&evals[0], &schema_card(low, None)),
            ok(&evals[1], &schema_card([7.0; 7], None)),
            ok(&evals[2], &schema_card([8.0; 7], None)),
        ],
    );
    let arb = stage_calls(&e);
    let schema = arb[0].schema.clone().unwrap();
    assert_eq!(schema.name, "clarity_ruling");
    let keys: Vec<&String> = schema.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "scores"]);
    let dims: Vec<&String> =
        schema.schema["properties"]["scores"]["properties"].as_object().unwrap().keys().collect();
    assert_eq!(dims, ["evidenceQuality"]);
    assert_eq!(arb[0].messages[0].content, ARBITER_PROMPT);
    let prompt = &arb[0].messages[1].content;
    assert!(prompt.contains(
        "Give a definitive 0-10 score for each disputed dimension. Reply with a single JSON object"
    ));
    assert!(arb[0].material.iter().any(|m| m.name == "the discussion summary"));
    // The Arbiter fails: its backup is asked the same, schema included.
    let out = c.on_reply(err(&arb[0]));
    let backup = stage_calls(&out);
    assert_eq!(backup[0].model, "arb2");
    assert_eq!((backup[0].schema.as_ref(), &backup[0].messages), (Some(&schema), &arb[0].messages));
    let out = c.on_reply(ok(
        &backup[0],
        r#"{"reasoning": "The sources are thin.", "scores": {"evidenceQuality": 4.5}}"#,
    ));
    let data = emitted(&out, "arbiter_complete").unwrap()["data"].clone();
    assert_eq!(
        (&data["scores"], &data["readFrom"], &data["reasoning"]),
        (&json!({ "evidenceQuality": 4.5 }), &json!("json"), &json!("The sources are thin."))
    );
    let stored = rows(&out);
    let row = stored.iter().find(|r| r.stage_type == "arbiter").unwrap();
    assert_eq!(row.parsed_data.as_ref().unwrap()["readFrom"], "json");
}

#[test]
fn the_schemas_accept_what_the_readers_read_and_refuse_what_they_refuse() {
    let schema = evaluation_schema();
    let good: Value =
        serde_json::from_str(&schema_card([0.0, 10.0, 6.5, 7.0, 7.0, 7.0, 7.0], None)).unwrap();
    assert_eq!(schema.validate(&good), Ok(()));
    let with = |path: &[&str], v: Value| {
        let mut card = good.clone();
        let mut at = &mut card;
        for p in &path[..path.len() - 1] {
            at = if let Ok(i) = p.parse::<usize>() { &mut at[i] } else { &mut at[*p] };
        }
        at[path[path.len() - 1]] = v;
        card
    };
    for bad in [
        // Out of the 0-10 range, or not a number: the text reader refuses these too.
        with(&["scores", "objectivity"], json!(10.5)),
        with(&["scores", "objectivity"], json!(-1)),
        with(&["scores", "objectivity"], json!("7")),
        // A dimension outside the seven, or one missing.
        with(&["scores", "style"], json!(5)),
        json!({ "reasoning": "", "scores": { "objectivity": 5 }, "critique": "", "issues": [] }),
        // An issue naming a foreign dimension or severity.
        with(&["issues", "0", "dimension"], json!("style")),
        with(&["issues", "0", "severity"], json!("critical")),
        // A justification in the first round.
        with(&["justification"], json!("why")),
    ] {
        assert!(schema.validate(&bad).is_err(), "{bad}");
    }
    // The discussion's requires the justification; the ruling takes only the disputed keys.
    assert!(discussion_schema().validate(&good).is_err());
    let ruling = ruling_schema(&["evidenceQuality".to_string(), "objectivity".to_string()]);
    assert!(ruling
        .validate(
            &json!({ "reasoning": "", "scores": { "evidenceQuality": 4, "objectivity": 6.5 } })
        )
        .is_ok());
    for bad in [
        json!({ "reasoning": "", "scores": { "evidenceQuality": 4 } }),
        json!({ "reasoning": "", "scores": { "evidenceQuality": 4, "objectivity": 6, "accessibility": 1 } }),
        json!({ "reasoning": "", "scores": { "evidenceQuality": 11, "objectivity": 6 } }),
    ] {
        assert!(ruling.validate(&bad).is_err(), "{bad}");
    }
}

#[test]
fn scorecards_are_read_from_json_that_fits_else_by_the_text_readers_and_say_which() {
    let schema = evaluation_schema();
    let v = read_verdict_reply(
        "skeptic",
        &reply(&format!("<think>x</think>{}", schema_card([6.0; 7], None))),
        &schema,
    )
    .unwrap();
    assert_eq!(v.read_from, Some(ReadFrom::Json));
    assert_eq!(
        (v.overall, v.critique.as_str(), v.issues.len()),
        (Some(6.0), "Solid structure, weak sourcing.", 1)
    );
    assert_eq!(v.issues[0].severity, "high");
    assert!(v.parse_success && v.unparsed.is_none());
    // A score out of range: the schema refuses it and the text reader reads the rest of the
    // object (six dimensions count).
    let mut high = [6.0; 7];
    high[3] = 11.0;
    let v = read_verdict_reply("skeptic", &reply(&schema_card(high, None)), &schema).unwrap();
    assert_eq!((v.read_from, v.scores[3], v.parse_success), (Some(ReadFrom::Text), None, true));
    // The spec's own format (a JSON object in prose) is text to this reader.
    let v = read_verdict_reply("skeptic", &reply(&card([7.0; 7], "")), &schema).unwrap();
    assert_eq!(v.read_from, Some(ReadFrom::Text));
    // Nothing readable: unparsed, and no readFrom.
    let v = read_verdict_reply("skeptic", &reply("A fine brief overall."), &schema).unwrap();
    assert_eq!((v.read_from, v.unparsed), (None, Some(Unparsed::NoAnswer)));
    let v = read_verdict_reply(
        "skeptic",
        &reply(&format!("<think>{}", schema_card([6.0; 7], None))),
        &schema,
    )
    .unwrap();
    assert_eq!((v.read_from, v.unparsed), (None, Some(Unparsed::ReasoningOnly)));
    // The Arbiter: JSON naming a dimension outside the dispute is refused, and the text reader
    // keeps only the disputed one.
    let disputed = ["evidenceQuality".to_string()];
    let ruling = ruling_schema(&disputed);
    let r =
        read_ruling(r#"{"reasoning": "r", "scores": {"evidenceQuality": 5}}"#, &disputed, &ruling);
    assert_eq!((r.scores.get("evidenceQuality"), r.read_from), (Some(&5.0), Some(ReadFrom::Json)));
    let r = read_ruling(
        r#"{"scores": {"evidenceQuality": 5, "accessibility": 1}, "reasoning": "r"}"#,
        &disputed,
        &ruling,
    );
    assert_eq!(
        (r.scores.len(), r.read_from, r.reasoning.as_deref()),
        (1, Some(ReadFrom::Text), Some("r"))
    );
    let r = read_ruling("I would not score this.", &disputed, &ruling);
    assert_eq!((r.scores.len(), r.read_from), (0, None));
}

#[test]
fn json_scorecards_are_stored_with_read_from_live_and_from_rows() {
    let mut c = structured_clarity("always", &["s", "a", "g"]);
    let mut all = c.start();
    let evals = stage_calls(&all);
    let e = feed(
        &mut c,
        vec![
            ok(&evals[0], &schema_card([5.0; 7], None)),
            ok(&evals[1], &card([6.0; 7], "")),
            ok(&evals[2], &schema_card([7.0; 7], None)),
        ],
    );
    let live: Vec<Value> = all_emitted_data(&e, "evaluator_complete");
    assert_eq!(
        live.iter().map(|v| v["readFrom"].clone()).collect::<Vec<_>>(),
        vec![json!("json"), json!("text"), json!("json")]
    );
    let disc = stage_calls(&e);
    all.extend(e);
    let e = feed(
        &mut c,
        vec![
            ok(&disc[0], &schema_card([6.0; 7], Some("Moved toward the panel."))),
            ok(&disc[1], "I keep my scores."),
            ok(&disc[2], &schema_card([6.5; 7], Some("Kept mostly."))),
        ],
    );
    let done = emitted(&e, "discussion_complete").unwrap()["data"].clone();
    assert_eq!(done["changes"][0]["justification"], "Moved toward the panel.");
    let stored = parsed_of(&e, |r| r.stage_type == "discussion");
    assert_eq!(
        stored.iter().map(|v| v.get("readFrom").cloned()).collect::<Vec<_>>(),
        vec![Some(json!("json")), None, Some(json!("json"))]
    );
    all.extend(e);
    assert!(finished(&all).is_some());
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["evaluations"], json!(live), "rebuilt from rows as it went out live");
    assert_eq!(loaded["discussion"], json!(stored));
}

#[test]
fn a_clarity_run_on_the_sim_reads_every_reply_from_json() {
    // Briefs vary in how much the Skeptic disputes the evidence: some reach the Arbiter.
    let mut arbitrated = 0;
    for n in 0..8 {
        let cfg = json!({ "content": format!("Brief {n}: a mobile app for reporting potholes."), "context": null, "title": null,
                          "discussion": "auto", "timeoutMs": 60000,
                          "models": { "skeptic": "sim/a", "advocate": "sim/b", "generalist": "sim/xss-c", "arbiter": "sim/d" } });
        let mut ctx = ctx("Score this brief", vec![], false);
        ctx.structured = crate::modes::Structured::models(["sim/a", "sim/b", "sim/xss-c", "sim/d"]);
        let mut c = Clarity::new(&cfg, ctx).unwrap();
        let all = drive_on_sim_text(&mut c);
        assert!(finished(&all).is_some(), "{:?}", failed(&all));
        let read = parsed_of(&all, |r| r.model.is_some());
        assert!(read.len() >= 3);
        assert!(read.iter().all(|pd| pd["readFrom"] == "json"), "{read:?}");
        arbitrated += usize::from(rows(&all).iter().any(|r| r.stage_type == "arbiter"));
    }
    assert!(arbitrated > 0 && arbitrated < 8, "{arbitrated} of 8 reached the Arbiter");
}

#[test]
fn the_sim_answers_only_its_own_schemas() {
    use crate::modes::registry::SimAsk;
    fn asking<'a>(
        prompt: &'a str,
        messages: &'a [ChatMessage],
        schema: Option<&'a ReplySchema>,
    ) -> SimAsk<'a> {
        SimAsk { messages, ..sim_ask("sim/a", prompt, 7, true, schema) }
    }
    let cfg: ClarityConfig = serde_json::from_value(
        json!({ "content": "The brief text.", "context": null, "title": null,
        "models": {}, "discussion": "always", "timeoutMs": 60000 }),
    )
    .unwrap();
    let disputed = vec!["objectivity".to_string()];
    let v = [verdict("skeptic", [3.0; 7]), verdict("advocate", [9.0; 7])];
    for (schema, prompt) in [
        (evaluation_schema(), evaluation_prompt(&cfg, &PERSONAS[0], Some(&evaluation_schema()))),
        (
            discussion_schema(),
            discussion_prompt(&cfg, &PERSONAS[0], &v, Some(&discussion_schema())),
        ),
        (
            ruling_schema(&disputed),
            arbiter_prompt(&cfg, &v, &disputed, "s", Some(&ruling_schema(&disputed))),
        ),
    ] {
        let messages =
            [ChatMessage::system(PERSONAS[0].system_prompt), ChatMessage::user(prompt.clone())];
        let reply = sim_answer(&asking(&prompt, &messages, Some(&schema))).unwrap();
        assert!(schema.read(&reply).is_some(), "{}: {reply}", schema.name);
        assert_eq!(sim_answer(&asking(&prompt, &messages, None)), None);
    }
    let other = ReplySchema::new("jury_verdict", schema::reasoned([]));
    assert_eq!(sim_answer(&asking("x", &[], Some(&other))), None);
}

proptest! {
    /// Whatever JSON each schema allows is read from it, whole.
    #[test]
    fn any_reply_the_schemas_allow_is_read_without_loss(seed in any::<u64>(), discussion in any::<bool>(), k in 1usize..8) {
        let schema = if discussion { discussion_schema() } else { evaluation_schema() };
        let mut rng = crate::modes::common::SplitMix64::new(seed);
        let v = schema::sample(&schema.schema, &mut rng, &|f| format!("words for {f}"));
        let got = read_verdict_reply("skeptic", &reply(&v.to_string()), &schema).unwrap();
        prop_assert_eq!(got.read_from, Some(ReadFrom::Json));
        for (i, d) in DIMENSIONS.iter().enumerate() {
            prop_assert_eq!(got.scores[i], v["scores"][d.key].as_f64());
        }
        prop_assert_eq!(Some(got.critique.as_str()), v["critique"].as_str());
        prop_assert_eq!(got.justification.as_deref(), v.get("justification").and_then(Value::as_str));
        let issues = v["issues"].as_array().unwrap();
        prop_assert_eq!(got.issues.len(), issues.len());
        for (a, b) in got.issues.iter().zip(issues) {
            prop_assert_eq!(Some(a.dimension.as_str()), b["dimension"].as_str());
            prop_assert_eq!(Some(a.issue.as_str()), b["issue"].as_str());
            prop_assert_eq!(Some(a.suggested_fix.as_str()), b["suggestedFix"].as_str());
            prop_assert_eq!(Some(a.quote.as_str()), b["quote"].as_str());
            prop_assert_eq!(Some(a.severity.as_str()), b["severity"].as_str());
        }
        // The ruling over any `k` disputed dimensions.
        let disputed: Vec<String> = DIMENSIONS.iter().take(k).map(|d| d.key.to_string()).collect();
        let ruling = ruling_schema(&disputed);
        let v = schema::sample(&ruling.schema, &mut rng, &|f| format!("words for {f}"));
        let r = read_ruling(&v.to_string(), &disputed, &ruling);
        prop_assert_eq!(r.read_from, Some(ReadFrom::Json));
        prop_assert_eq!(r.reasoning.as_deref(), v["reasoning"].as_str());
        for k in &disputed {
            prop_assert_eq!(r.scores.get(k).copied(), v["scores"][k].as_f64());
        }
    }
}

/// What no report may show: raw values, JSON, stored keys, headings.
fn assert_reads_well(md: &str) {
    assert_report_free_of(
        md,
        &["evidenceQuality", "needsHumanReview", "post_discussion", "parseSuccess"],
    );
}

#[test]
fn the_report_gives_the_scorecards_the_arbiters_ruling_and_the_review_flag() {
    let mut c = clarity("auto");
    let calls = stage_calls(&c.start());
    let mut all = Vec::new();
    let low = sevens_but(2, 2.0);
    let skeptic = card(low, &issue("evidenceQuality", "No sources for the key claim", "high"));
    let e = feed(
        &mut c,
        vec![
            ok(&calls[0], &skeptic),
            ok(
                &calls[1],
                &card([7.0; 7], &issue("evidenceQuality", "The key claim has no sources", "low")),
            ),
            ok(&calls[2], &card([8.0; 7], "")),
        ],
    );
    let disc = stage_calls(&e);
    all.extend(e);
    let e = feed(
        &mut c,
        vec![
            ok(&disc[0], &skeptic),
            ok(&disc[1], "I will keep my view."),
            ok(&disc[2], &card([7.0; 7], "")),
        ],
    );
    let arb = stage_calls(&e);
    all.extend(e);
    all.extend(
        c.on_reply(ok(&arb[0], "{\"scores\": {\"evidenceQuality\": 5}, \"reasoning\": \"r\"}")),
    );
    let result = load_result(&rows(&all));
    let md = report(&result);
    assert!(md.contains("|---"), "{md}");
    let total = result["score"]["score"].as_f64().unwrap();
    assert_contains_all(
        &md,
        &[
            &format!("**Clarity score:** {total}/10, the evaluators' scores with the Arbiter's"),
            "**Flagged for human review:** Evaluators still disagreed",
            "| dimension | weight | Skeptic (s) | Advocate (a) | Generalist (g) | Arbiter | final |",
            "| Evidence Quality | 15% | 2 | 7 | 7 (was 8) | 5 | 5.2 |",
            "| Accessibility | 15% | 7 | 7 | 7 (was 8) | — | 7 |",
            "- Advocate (a): its revised scorecard could not be read",
            "**Arbiter** (arb): ruled Evidence Quality 5.",
            "1. Evidence Quality (high priority, raised by Skeptic and Advocate): No sources for the key claim; suggested fix: fix it",
        ],
    );
    assert_reads_well(&md);

    // Close scores: the median, not flagged.
    let (_, e) = evaluated("auto", [[7.0; 7], [7.5; 7], [8.0; 7]]);
    let md = report(&load_result(&rows(&e)));
    assert_contains_all(
        &md,
        &[
            "**Clarity score:** 7.5/10, the median of the evaluators' scores",
            "**Not flagged for review:**",
            "| overall | 100% | 7 | 7.5 | 8 | 7.5 |",
        ],
    );
    assert_reads_well(&md);

    // A run that stopped early, or nothing at all: no panic, nothing made up.
    assert!(report(&json!({})).is_empty());
    let early = json!({ "brief": null, "evaluations": [], "discussion": [], "arbiter": null, "score": null });
    assert!(report(&early).is_empty());
}
