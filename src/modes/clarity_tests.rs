//! Clarity: parsing scorecards, the PRD's disagreement and scoring rules, the critique, and
//! the state machine down each path (median, post-discussion, arbiter).

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    ctx, emitted, err, events, failed, feed, finished, ok, rows, stage_calls,
};
use crate::modes::validate;

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
    }
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
    let calm = [
        verdict("skeptic", [7.0; 7]),
        verdict("advocate", [8.0; 7]),
        verdict("generalist", [9.0; 7]),
    ];
    let d = detect_disagreement(&calm);
    assert!(!d.has_disagreement, "a spread of exactly 2 is not disagreement");
    assert_eq!(d.max_spread, 2.0);
    let mut s = [7.0; 7];
    s[2] = 3.0;
    let split =
        [verdict("skeptic", s), verdict("advocate", [7.0; 7]), verdict("generalist", [7.5; 7])];
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
    let v = [
        verdict("skeptic", [2.0; 7]),
        verdict("advocate", [8.0; 7]),
        verdict("generalist", [6.0; 7]),
    ];
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
    let e = feed(
        &mut c,
        vec![
            ok(&calls[0], &card([7.0; 7], "")),
            ok(&calls[1], &card([7.5; 7], "")),
            ok(&calls[2], &card([8.0; 7], "")),
        ],
    );
    all.extend(e.clone());
    assert_eq!(events(&e).iter().filter(|x| *x == "evaluator_complete").count(), 3);
    let score = emitted(&e, "score_complete").unwrap()["data"].clone();
    assert_eq!(
        (score["method"].clone(), score["score"].clone(), score["needsHumanReview"].clone()),
        (json!("median"), json!(7.5), json!(false))
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
    let mut c = clarity("auto");
    let calls = stage_calls(&c.start());
    let mut low = [7.0; 7];
    low[2] = 3.0;
    let e = feed(
        &mut c,
        vec![
            ok(&calls[0], &card(low, "")),
            ok(&calls[1], &card([7.0; 7], "")),
            ok(&calls[2], &card([7.0; 7], "")),
        ],
    );
    assert!(events(&e).contains(&"disagreement_detected".to_string()));
    let disc = stage_calls(&e);
    assert_eq!(disc.len(), 3);
    assert!(disc[0].messages[1]
        .content
        .contains("would you revise any scores? Explain your reasoning."));
    assert!(disc[0].messages[1]
        .content
        .contains("Evidence Quality (evidenceQuality): skeptic 3, advocate 7, generalist 7"));
    let mut revised = [7.0; 7];
    revised[2] = 6.0;
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
        let mut c = clarity(discussion);
        let calls = stage_calls(&c.start());
        let mut low = [7.0; 7];
        low[2] = 2.0;
        let mut e = feed(
            &mut c,
            vec![
                ok(&calls[0], &card(low, "")),
                ok(&calls[1], &card([7.0; 7], "")),
                ok(&calls[2], &card([8.0; 7], "")),
            ],
        );
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
    let mut c = clarity("never");
    let calls = stage_calls(&c.start());
    let mut low = [7.0; 7];
    low[0] = 1.0;
    let e = feed(
        &mut c,
        vec![
            ok(&calls[0], &card(low, "")),
            ok(&calls[1], &card([7.0; 7], "")),
            ok(&calls[2], &card([7.0; 7], "")),
        ],
    );
    let out = c.on_reply(err(&stage_calls(&e)[0]));
    let score = emitted(&out, "score_complete").unwrap()["data"].clone();
    assert_eq!(
        (score["needsHumanReview"].clone(), score["method"].clone()),
        (json!(true), json!("median"))
    );
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
    let mut low = [7.0; 7];
    low[0] = 1.0;
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
    let d = Defaults { offline: true, stage_timeout_ms: 60_000, fallback: Fallbacks::default() };
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
        ("smollm2-01", include_str!("corpus/clarity/smollm2-01.txt"), none, no),
        ("smollm2-02", include_str!("corpus/clarity/smollm2-02.txt"), none, no),
        ("smollm2-03", include_str!("corpus/clarity/smollm2-03.txt"), none, no),
        ("smollm2-04", include_str!("corpus/clarity/smollm2-04.txt"), none, no),
        ("smollm2-05", include_str!("corpus/clarity/smollm2-05.txt"), none, no),
        ("smollm2-06", include_str!("corpus/clarity/smollm2-06.txt"), none, no),
        ("smollm2-07", include_str!("corpus/clarity/smollm2-07.txt"), none, no),
        ("smollm2-08", include_str!("corpus/clarity/smollm2-08.txt"), none, no),
        ("smollm2-09", include_str!("corpus/clarity/smollm2-09.txt"), none, no),
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
    let mut low = [7.0; 7];
    low[2] = 3.0;
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
        let low = inside.to_lowercase();
        prop_assume!(!low.contains("think>") && !low.contains("<think"));
        prop_assume!(!answer.contains('<') && !answer.trim().is_empty());
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
