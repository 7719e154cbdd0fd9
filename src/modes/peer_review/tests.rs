//! Peer Review driven with fake replies, and its parsers on recorded-style and adversarial
//! outputs.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    assert_contains_all, ctx, emitted, err, events, failed, finished, ok, readable_report, rows,
    sim_ask, stage_calls, validate_config,
};
use crate::modes::Mode;

fn rubric() -> Rubric {
    ReviewType::ArchitectureReview.rubric().unwrap()
}

fn config(reviewers: &[&str]) -> Value {
    json!({ "reviewType": "architecture_review", "rubric": rubric(),
            "reviewerModels": reviewers, "consolidatorModel": "con", "timeoutMs": 150000,
            "foremanFallbackModel": "spare" })
}

fn mode(reviewers: &[&str]) -> PeerReview {
    PeerReview::new(&config(reviewers), ctx("Review our upload service", vec![], true)).unwrap()
}

/// A review as a capable model writes it: a table with bold names and `4/5` cells, findings
/// with bold labels, a multi-line description.
const REVIEW: &str = "Here is my review.\n\n### Scores\n\n\
| Criterion | Score (1-5) | Weight | Justification |\n|---|---|---|---|\n\
| **Scalability** | 2/5 | 5 | One server only. |\n| Security | 4 | 5 | Fine. |\n\
| Maintainability | 3.5 | 4 | Simple. |\n| cost  efficiency | 5 | 3 | Cheap. |\n\
| Reliability | 7 | 4 | Out of range. |\n| Vibes | 5 | 1 | Invented. |\n\n\
### Findings\n\n#### FINDING 1: Single server\n**Category:** Scalability\n**Severity:** CRITICAL\n\
**Location:** API tier\n**Description:** Every request goes to one server.\nIt has no replica.\n\
**Impact:** Downtime.\n**Recommendation:** Add a second one.\n\n\
**FINDING 2 - Nightly copies**\n- Category: Reliability and Security\n- Severity: major, maybe minor\n\
- Location: cron\n\nFINDING 3: Diagram\nCategory: Docs\nDescription: none exists\n\n\
### Strengths\n\n- Simple\n* Cheap\n1. Clear scope\n\n### Summary\n\nDecent.\n";

const REPORT: &str = "## Consensus Scores\n\nSee stats.\n\n## Prioritized Action Items\n\n\
1. [CRITICAL] Add a replica — Effort: Medium\n2. **[MAJOR]** Test restores (Effort: low)\n\
3. Write a diagram\n4) [note] Tidy up — Effort: enormous\n\n## Executive Summary\n\n\
5. [CRITICAL] not an item — Effort: Low\n";

// ---- parsers -------------------------------------------------------------------------------

#[test]
fn a_review_is_read_where_it_states_its_scores_findings_and_strengths() {
    let r = read_review(REVIEW, &rubric());
    let scores: Vec<Option<u32>> = r.scores.iter().map(|s| s.score).collect();
    // Scalability 2/5 → 2; 3.5 → 4 half up; spacing and case ignored; 7 is out of range;
    // Performance is not stated; Vibes is not a criterion.
    assert_eq!(scores, [Some(2), Some(4), Some(4), Some(5), None, None]);
    assert_eq!(r.scores[0].justification.as_deref(), Some("One server only."));
    assert_eq!(r.scores[0].weight, 5, "weights come from the rubric");
    assert!(r.parse_success);
    assert_eq!(r.findings.len(), 3);
    let f = &r.findings[0];
    assert_eq!((f.title.as_str(), f.severity.as_str()), ("Single server", "CRITICAL"));
    assert_eq!(f.criterion.as_deref(), Some("Scalability"));
    assert_eq!(
        f.description.as_deref(),
        Some("Every request goes to one server.\nIt has no replica.")
    );
    assert_eq!(f.recommendation.as_deref(), Some("Add a second one."));
    // Two criteria named: none chosen; the most severe word named counts.
    let f = &r.findings[1];
    assert_eq!((f.criterion.clone(), f.severity.as_str()), (None, "MAJOR"));
    assert_eq!(f.category.as_deref(), Some("Reliability and Security"));
    // No severity: MINOR, marked; a category that is no criterion: null.
    let f = &r.findings[2];
    assert_eq!(
        (f.severity.as_str(), f.severity_defaulted, f.criterion.clone()),
        ("MINOR", true, None)
    );
    assert_eq!(r.strengths, ["Simple", "Cheap", "Clear scope"]);
}

#[test]
fn scores_fall_back_to_lines_and_are_never_guessed() {
    let rb = rubric();
    // `Criterion: n` lines, the last one wins; prose numbers elsewhere are not scores.
    let r = read_review("**Security:** 3\nSecurity: 2 after thought\nScalability is a 5 out of 5 concern.\nPerformance: good (4)\n", &rb);
    let by = |n: &str| r.scores.iter().find(|s| s.criterion == n).unwrap().score;
    assert_eq!(by("Security"), Some(2));
    assert_eq!(by("Scalability"), None);
    assert_eq!(by("Performance"), None, "the value must start with the number");
    // A table row beats a line, and the last row wins.
    let r = read_review("Security: 1\n| Security | 2 |\n| Security | 3 |\n", &rb);
    assert_eq!(r.scores[1].score, Some(3));
    // Refusals, hedges, traces and JSON state nothing.
    for text in [
        "I can't review this without more detail.",
        "Overall maybe a 4 out of 5.",
        "<think>| Security | 5 | 5 | x |</think>I would rather not score this.",
        "<think>Security: 5",
        "{\"Security\": 4}",
        "| Security | N/A | 5 | not applicable |",
        "| Security | 0 | 5 | |\n| Scalability | -2 | 5 | |\n| Reliability | 5.6 | 4 | |",
    ] {
        let r = read_review(text, &rb);
        assert!(!r.parse_success, "{text}: {:?}", r.scores);
        assert!(r.scores.iter().all(|s| s.score.is_none()));
    }
    // A header that puts the score elsewhere is followed.
    let r =
        read_review("| Score | Criterion | Weight |\n|---|---|---|\n| 4 | Security | 5 |\n", &rb);
    assert_eq!(r.scores[1].score, None, "the first cell must be the criterion");
    let r =
        read_review("| Criterion | Weight | Score |\n|---|---|---|\n| Security | 5 | 2 |\n", &rb);
    assert_eq!(r.scores[1].score, Some(2));
    // A table whose header names no score states none; a summary row is not a header.
    let r = read_review("| Criterion | Issues found |\n|---|---|\n| Security | 3 |\n", &rb);
    assert_eq!(r.scores[1].score, None);
    let r = read_review("| Criterion | Score | Weight | Why |\n|---|---|---|---|\n| **Overall score** | 3 | | |\n| Security | 4 | 5 | fine |\n", &rb);
    assert_eq!((r.scores[1].score, r.scores[1].justification.as_deref()), (Some(4), Some("fine")));
}

#[test]
fn findings_blocks_end_at_headings_and_first_fields_win() {
    let rb = rubric();
    let r = read_review(
        "FINDING 1: a\nSeverity: MINOR\nSeverity: CRITICAL\n## Next\nLocation: outside\n",
        &rb,
    );
    assert_eq!(r.findings[0].severity, "MINOR");
    assert_eq!(r.findings[0].location, None);
    // A finding in a reasoning trace is the model's draft, not its review.
    let r = read_review("<think>FINDING 1: draft\nSeverity: CRITICAL</think>No findings.", &rb);
    assert!(r.findings.is_empty());
    // Numbering restarts at 1; the reported number is kept.
    let r = read_review("FINDING 7: x\nSeverity: SUGGESTION\n", &rb);
    assert_eq!((r.findings[0].number, r.findings[0].reported_number), (1, 7));
    assert_eq!(r.findings[0].severity, "SUGGESTION");
}

#[test]
fn action_items_are_read_under_their_heading_only() {
    let items = read_action_items(REPORT);
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(
        (items[0].severity.as_deref(), items[0].effort.as_deref()),
        (Some("CRITICAL"), Some("Medium"))
    );
    assert_eq!(
        (items[1].severity.as_deref(), items[1].effort.as_deref()),
        (Some("MAJOR"), Some("Low"))
    );
    assert_eq!((items[2].severity.clone(), items[2].effort.clone()), (None, None));
    assert_eq!((items[3].severity.clone(), items[3].effort.clone()), (None, None));
    assert!(
        read_action_items("<think>## Prioritized Action Items\n1. [CRITICAL] x</think>").is_empty()
    );
    assert!(read_action_items("1. [CRITICAL] no heading").is_empty());
}

// ---- statistics ----------------------------------------------------------------------------

fn review(index: usize, scores: &[Option<u32>]) -> Review {
    let rb = rubric();
    let scores: Vec<Score> = rb
        .criteria
        .iter()
        .zip(scores)
        .map(|(c, s)| Score {
            criterion: c.name.clone(),
            score: *s,
            weight: c.weight,
            justification: None,
        })
        .collect();
    Review {
        reviewer_index: index,
        model: format!("m{index}"),
        review_text: String::new(),
        overall_score: overall(&scores).map(|o| round_to(o, 1)),
        scores,
        findings: Vec::new(),
        strengths: Vec::new(),
        parse_success: true,
        unparsed: None,
        read_from: Some(ReadFrom::Text),
        response_time_ms: 1,
    }
}

#[test]
fn statistics_are_the_servers_arithmetic() {
    let a = review(1, &[Some(2), Some(4), Some(3), Some(5), None, Some(1)]);
    let b = review(2, &[Some(4), Some(4), Some(5), Some(1), None, None]);
    let s = to_json(&statistics(&[a, b], &rubric()));
    let c = &s["consensusScores"];
    assert_eq!(c[0]["average"], 3.0);
    assert_eq!(c[0]["stddev"], 1.0);
    assert_eq!(c[0]["agreement"], "Medium");
    assert_eq!(c[1]["stddev"], 0.0);
    assert_eq!(c[1]["agreement"], "High");
    assert_eq!(
        (c[3]["stddev"].clone(), c[3]["agreement"].clone(), c[3]["disputed"].clone()),
        (json!(2.0), json!("Low"), json!(true))
    );
    // No scores: no mean; one score: a mean without a spread.
    assert_eq!(
        (c[4]["average"].clone(), c[4]["stddev"].clone(), c[4]["agreement"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
    assert_eq!(
        (c[5]["average"].clone(), c[5]["stddev"].clone(), c[5]["disputed"].clone()),
        (json!(1.0), Value::Null, json!(false))
    );
    // Reviewer 1: (2·5 + 4·5 + 3·4 + 5·3 + 1·3) / 20 = 3.0; reviewer 2: (20+20+20+3)/17 = 3.7.
    assert_eq!(s["reviewerOverallScores"][0]["overallScore"], 3.0);
    assert_eq!(s["reviewerOverallScores"][1]["overallScore"], 3.7);
    // Means 3, 4, 4, 3, -, 1 weighted 5, 5, 4, 3, 3 → 63/20 = 3.15 → 3.2.
    assert_eq!(s["consensusOverall"], 3.2);
    assert_eq!(s["meanStdDev"], 1.0, "(1 + 0 + 1 + 2) / 4: only criteria with a spread count");
}

#[test]
fn agreement_thresholds_are_the_specs() {
    assert_eq!(agreement(0.49), "High");
    assert_eq!(agreement(0.5), "Medium");
    assert_eq!(agreement(1.5), "Medium");
    assert_eq!(agreement(1.51), "Low");
    assert_eq!(score_of("3.5"), Some(4));
    assert_eq!(score_of("2.5"), Some(3));
    assert_eq!(score_of("4/5"), Some(4));
    assert_eq!(score_of("0.5"), None);
    assert_eq!(score_of("five"), None);
    // The template's placeholder echoed back, or a range, states no one score.
    assert_eq!(score_of("<1-5>"), None);
    assert_eq!(score_of("3-4"), None);
    assert_eq!(score_of("**3 – 4**"), None);
    assert_eq!(score_of("[score]"), None);
    assert_eq!(score_of("4 - solid"), Some(4));
}

// ---- validation ----------------------------------------------------------------------------

fn check(cfg: Value) -> Result<ValidRequest, FieldError> {
    validate_config("peer_review", cfg)
}

fn criteria(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({ "name": format!("Crit {i}"), "description": "a long enough line", "weight": 3 }))
        .collect()
}

fn custom(criteria: Vec<Value>) -> Value {
    json!({ "reviewType": "custom", "customRubric": { "name": "Mine", "description": "ten chars or more", "criteria": criteria } })
}

#[test]
fn defaults_are_councils_three_and_the_first_reviewer_consolidates() {
    let v = check(json!({})).unwrap();
    let c: PeerReviewConfig = serde_json::from_value(v.config).unwrap();
    assert_eq!(c.reviewer_models, ["sim/alpha", "sim/beta", "sim/gamma"]);
    assert_eq!(c.consolidator_model, "sim/alpha");
    assert_eq!(c.timeout_ms, 150_000);
    assert_eq!(c.review_type, ReviewType::ArchitectureReview);
    assert_eq!(c.rubric.criteria.len(), 6);
    let v = check(custom(criteria(3))).unwrap();
    let c: PeerReviewConfig = serde_json::from_value(v.config).unwrap();
    assert_eq!(c.rubric.name, "Mine");
}

#[test]
fn every_rule_is_a_400_on_its_field() {
    let mut long = criteria(3);
    long[1]["name"] = json!("crit  0");
    let cases = [
        (json!({ "reviewerModels": ["a"] }), "modeConfig.reviewerModels"),
        (
            json!({ "reviewerModels": ["a", "b", "c", "d", "e", "f", "g"] }),
            "modeConfig.reviewerModels",
        ),
        (json!({ "reviewerModels": ["a", " "] }), "modeConfig.reviewerModels"),
        (json!({ "consolidatorModel": "" }), "modeConfig.consolidatorModel"),
        (json!({ "timeoutMs": 9999 }), "modeConfig.timeoutMs"),
        (json!({ "timeoutMs": 600001 }), "modeConfig.timeoutMs"),
        (json!({ "content": "  " }), "modeConfig.content"),
        (json!({ "reviewType": "poetry" }), "modeConfig.reviewType"),
        (json!({ "reviewType": "custom" }), "modeConfig.customRubric"),
        (json!({ "customRubric": { "name": "abc" } }), "modeConfig.customRubric"),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "ab", "description": "ten chars or more", "criteria": criteria(3) } }),
            "modeConfig.customRubric.name",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "short", "criteria": criteria(3) } }),
            "modeConfig.customRubric.description",
        ),
        (custom(criteria(2)), "modeConfig.customRubric.criteria"),
        (custom(criteria(11)), "modeConfig.customRubric.criteria"),
        (custom(long), "modeConfig.customRubric.criteria[1].name"),
        (
            custom(vec![json!({ "name": "A", "description": "long enough text", "weight": 1 })]),
            "modeConfig.customRubric.criteria",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "ten chars or more", "criteria": [criteria(1)[0], criteria(2)[1], { "name": "X", "description": "long enough text", "weight": 2 }] } }),
            "modeConfig.customRubric.criteria[2].name",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "ten chars or more", "criteria": [criteria(1)[0], criteria(2)[1], { "name": "Xy", "description": "short", "weight": 2 }] } }),
            "modeConfig.customRubric.criteria[2].description",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "ten chars or more", "criteria": [criteria(1)[0], criteria(2)[1], { "name": "Xy", "description": "long enough text", "weight": 6 }] } }),
            "modeConfig.customRubric.criteria[2].weight",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "ten chars or more", "criteria": [criteria(1)[0], criteria(2)[1], { "name": "Xy", "description": "long enough text" }] } }),
            "modeConfig.customRubric.criteria[2].weight",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "ten chars or more", "criteria": [criteria(1)[0], criteria(2)[1], { "name": "Xy", "description": "long enough text", "weight": 2.5 }] } }),
            "modeConfig.customRubric.criteria[2].weight",
        ),
        (
            json!({ "reviewType": "custom", "customRubric": { "name": "abc", "description": "ten chars or more", "criteria": [criteria(1)[0], criteria(2)[1], { "name": "X | y", "description": "long enough text", "weight": 2 }] } }),
            "modeConfig.customRubric.criteria[2].name",
        ),
        (json!({ "reviewers": ["a", "b"] }), "modeConfig.reviewers"),
    ];
    for (cfg, field) in cases {
        let e = check(cfg.clone()).expect_err(&cfg.to_string());
        assert_eq!(e.field, field, "{cfg}: {e}");
    }
}

// ---- the state machine ---------------------------------------------------------------------

#[test]
fn a_run_reviews_in_parallel_then_consolidates_and_stores_what_it_sent() {
    let mut m = mode(&["a", "b", "a"]);
    let start = m.start();
    assert_eq!(events(&start)[..2], ["review_start", "reviewers_start"]);
    assert_eq!(emitted(&start, "review_start").unwrap()["reviewType"], "architecture_review");
    let calls = stage_calls(&start);
    assert_eq!(calls.len(), 3, "every reviewer at once");
    assert!(calls[0].messages[0].content.contains("Cost Efficiency (weight 3)"));
    let mut all = start.clone();
    let out = m.on_reply(ok(&calls[2], REVIEW));
    assert_eq!(events(&out), ["reviewer_complete"]);
    assert_eq!(emitted(&out, "reviewer_complete").unwrap()["data"]["reviewerIndex"], 3);
    all.extend(out);
    all.extend(m.on_reply(ok(&calls[0], "<think>scratch</think>| Security | 5 | 5 | ok |")));
    let out = m.on_reply(ok(&calls[1], "I will not score this."));
    assert_eq!(
        events(&out),
        ["reviewer_complete", "all_reviewers_complete", "consolidation_start"]
    );
    let done = emitted(&out, "all_reviewers_complete").unwrap();
    assert_eq!(done["data"]["reviews"][1]["parseSuccess"], false);
    // It says why none was read; a review that was read says nothing of the kind.
    assert_eq!(done["data"]["reviews"][1]["unparsed"], "refused");
    assert!(done["data"]["reviews"][0].get("unparsed").is_none());
    assert_eq!(done["data"]["reviews"][0]["reviewText"], "| Security | 5 | 5 | ok |");
    all.extend(out.clone());
    let con = stage_calls(&out);
    assert_eq!(con[0].model, "con");
    let prompt = &con[0].messages[0].content;
    assert!(prompt.contains("### Reviewer 3 (a)") && prompt.contains("final"));
    assert!(prompt.contains("Security (weight 5): scores [R1=5, R3=4], mean 4.5"), "{prompt}");
    let out = m.on_reply(ok(&con[0], REPORT));
    let answer = finished(&out).unwrap();
    assert!(answer.starts_with("## Consensus Scores"));
    let complete = emitted(&out, "consolidation_complete").unwrap();
    assert_eq!(complete["partial"], false);
    assert_eq!(complete["data"]["actionItems"].as_array().unwrap().len(), 4);
    all.extend(out);
    let stored = rows(&all);
    let types: Vec<&str> = stored.iter().map(|r| r.stage_type.as_str()).collect();
    assert_eq!(
        types,
        ["review_setup", "review_3", "review_1", "review_2", "review_stats", "consolidation"]
    );
    let mut sorted = stored.clone();
    sorted.sort_by_key(|r| r.stage_order);
    let result = load_result(&sorted);
    assert_eq!(result["reviews"], done["data"]["reviews"]);
    assert_eq!(result["statistics"], done["data"]["statistics"]);
    assert_eq!(result["consolidation"], complete["data"]);
    assert_eq!(result["work"], "Review our upload service");
    assert_eq!(result["rubric"]["criteria"][0]["name"], "Scalability");
    assert_eq!(result["failedModels"], json!([]));
    assert!(outcome(&result).unwrap().starts_with("3 reviews, consensus"));
}

#[test]
fn a_failed_reviewer_is_recorded_and_fewer_than_two_reviews_fail_the_run() {
    let mut m = mode(&["a", "b", "c"]);
    let calls = stage_calls(&m.start());
    let mut all = m.on_reply(err(&calls[0]));
    all.extend(m.on_reply(ok(&calls[1], REVIEW)));
    let out = m.on_reply(ok(&calls[2], "")); // empty: a failed call
    assert!(failed(&out).unwrap().contains("Only 1 of 3 reviews"), "{out:?}");
    all.extend(out);
    let result = load_result(&rows(&all));
    assert_eq!(result["reviews"].as_array().unwrap().len(), 1, "the review is kept");
    assert_eq!(result["failedReviewers"].as_array().unwrap().len(), 2);
    assert_eq!(result["failedModels"].as_array().unwrap().len(), 2);
    assert_eq!(result["partial"], true);
    assert_eq!(result["statistics"], Value::Null);

    // Two of three: the run goes on, partial.
    let mut m = mode(&["a", "b", "c"]);
    let calls = stage_calls(&m.start());
    m.on_reply(err(&calls[1]));
    m.on_reply(ok(&calls[0], REVIEW));
    let out = m.on_reply(ok(&calls[2], REVIEW));
    let done = emitted(&out, "all_reviewers_complete").unwrap();
    assert_eq!(done["data"]["failedReviewers"][0]["reviewerIndex"], 2);
    let con = stage_calls(&out);
    let out = m.on_reply(ok(&con[0], REPORT));
    assert_eq!(emitted(&out, "consolidation_complete").unwrap()["partial"], true);
}

#[test]
fn the_consolidator_falls_back_once_then_the_run_fails_keeping_the_reviews() {
    let mut m = mode(&["a", "b"]);
    let calls = stage_calls(&m.start());
    let mut all = m.on_reply(ok(&calls[0], REVIEW));
    all.extend(m.on_reply(ok(&calls[1], REVIEW)));
    let con = stage_calls(&all);
    let out = m.on_reply(err(&con[0]));
    assert!(emitted(&out, "fallback_start").is_some());
    let backup = stage_calls(&out);
    assert_eq!(
        (backup[0].key.as_str(), backup[0].model.as_str()),
        ("consolidation:backup", "spare")
    );
    all.extend(out);
    let out = m.on_reply(ok(&backup[0], REPORT));
    let data = emitted(&out, "consolidation_complete").unwrap();
    assert_eq!(
        (data["data"]["model"].clone(), data["data"]["fallbackFrom"].clone()),
        (json!("spare"), json!("con"))
    );
    all.extend(out);
    let result = load_result(&rows(&all));
    assert_eq!(result["consolidation"], data["data"]);
    assert_eq!(result["failedModels"][0]["fallbackTo"], "spare");

    let mut m = mode(&["a", "b"]);
    let calls = stage_calls(&m.start());
    m.on_reply(ok(&calls[0], REVIEW));
    let con = stage_calls(&m.on_reply(ok(&calls[1], REVIEW)));
    let backup = stage_calls(&m.on_reply(err(&con[0])));
    let out = m.on_reply(err(&backup[0]));
    let message = failed(&out).unwrap();
    assert!(message.contains("consolidator") && message.contains("kept"), "{message}");
}

#[test]
fn a_stored_configuration_must_fit() {
    assert!(PeerReview::new(&json!({}), ctx("q", vec![], false)).is_err());
    let mut c = config(&["a"]);
    assert!(PeerReview::new(&c, ctx("q", vec![], false)).is_err());
    c["reviewerModels"] = json!(["a", "b"]);
    assert!(PeerReview::new(&c, ctx("q", vec![], false)).is_ok());
}

// ---- sim answers ---------------------------------------------------------------------------

fn sim(prompt: &str, model: &str, malformed: bool, hostile: bool) -> String {
    let messages = [ChatMessage::user(prompt)];
    sim_answer(&SimAsk {
        messages: &messages,
        malformed,
        ..sim_ask(model, prompt, 7, hostile, None)
    })
    .unwrap()
}

#[test]
fn sim_reviews_and_reports_are_in_the_modes_format() {
    let rb = rubric();
    let prompt = review_prompt("q", "the work", &rb, None);
    let r = read_review(&sim(&prompt, "sim/alpha", false, false), &rb);
    assert!(r.parse_success && r.scores.iter().all(|s| s.score.is_some()));
    assert!(r.findings.len() >= 3 && r.findings.iter().all(|f| f.criterion.is_some()));
    assert_eq!(r.strengths.len(), 3);
    let messy = read_review(&sim(&prompt, "sim/messy", true, false), &rb);
    assert!(!messy.parse_success && messy.findings.is_empty());
    let hostile = sim(&prompt, "sim/xss", false, true);
    assert!(hostile.contains("<script>"));
    let hr = read_review(&hostile, &rb);
    assert!(hr.parse_success);
    assert!(hr.findings.iter().all(|f| !f.title.contains('<')), "the payload stays in prose");
    let schema = review_schema(&rb);
    let review =
        review_of(1, "sim/alpha", &sim(&prompt, "sim/alpha", false, false), &rb, &schema, 1);
    let stats = statistics(&[review.clone(), review.clone()], &rb);
    let cp = consolidation_prompt("q", "the work", &rb, &[review.clone(), review], &stats);
    let items = read_action_items(&sim(&cp, "sim/beta", false, false));
    assert!(!items.is_empty() && items.iter().all(|i| i.severity.is_some() && i.effort.is_some()));
    assert!(sim_answer(&sim_ask("sim/a", "hello", 1, false, None)).is_none());
}

// ---- properties ----------------------------------------------------------------------------

proptest! {
    /// Whatever a reply says, scores are 1-5 or null, one per criterion in rubric order with
    /// the rubric's weights; severities are the four levels; a criterion is the rubric's.
    #[test]
    fn parsed_values_are_always_in_range(text in "(\\|? ?(Security|Scalability|FINDING 1:|Severity:|Category:|### Strengths|- |\\d|\\.|/| |\\n|<think>|</think>|CRITICAL|major|Effort: (Low|High)|\\[MINOR\\]|## Prioritized Action Items|[a-z]{1,5}))*") {
        let rb = rubric();
        let r = read_review(&text, &rb);
        prop_assert_eq!(r.scores.len(), rb.criteria.len());
        for (s, c) in r.scores.iter().zip(&rb.criteria) {
            prop_assert_eq!(&s.criterion, &c.name);
            prop_assert_eq!(s.weight, c.weight);
            prop_assert!(s.score.is_none_or(|v| (1..=5).contains(&v)));
        }
        prop_assert_eq!(r.parse_success, r.scores.iter().any(|s| s.score.is_some()));
        for (i, f) in r.findings.iter().enumerate() {
            prop_assert_eq!(f.number, i + 1);
            prop_assert!(SEVERITIES.contains(&f.severity.as_str()));
            prop_assert!(f.criterion.as_ref().is_none_or(|c| rb.criteria.iter().any(|k| &k.name == c)));
        }
        for a in read_action_items(&text) {
            prop_assert!(a.severity.as_deref().is_none_or(|s| SEVERITIES.contains(&s)));
            prop_assert!(a.effort.as_deref().is_none_or(|e| ["Low", "Medium", "High"].contains(&e)));
        }
    }

    /// A stated score is read back exactly, whatever markup surrounds it.
    #[test]
    fn a_stated_score_is_read_back(score in 1u32..=5, bold in any::<bool>(), slash in any::<bool>(), table in any::<bool>()) {
        let rb = rubric();
        let cell = format!("{}{score}{}{}", if bold { "**" } else { "" }, if slash { "/5" } else { "" }, if bold { "**" } else { "" });
        let text = if table { format!("| Reliability | {cell} | 4 | why |") } else { format!("- **Reliability:** {cell}") };
        let r = read_review(&text, &rb);
        prop_assert_eq!(r.scores[4].score, Some(score));
        prop_assert_eq!(r.scores.iter().filter(|s| s.score.is_some()).count(), 1);
    }

    /// Statistics stay within the scale and the spread's bounds.
    #[test]
    fn statistics_stay_in_bounds(all in proptest::collection::vec(proptest::collection::vec(proptest::option::of(1u32..=5), 6), 2..6)) {
        let reviews: Vec<Review> = all.iter().enumerate().map(|(i, s)| review(i + 1, s)).collect();
        let s = to_json(&statistics(&reviews, &rubric()));
        for c in s["consensusScores"].as_array().unwrap() {
            if let Some(a) = c["average"].as_f64() { prop_assert!((1.0..=5.0).contains(&a)); }
            if let Some(sd) = c["stddev"].as_f64() {
                prop_assert!((0.0..=2.0).contains(&sd));
                prop_assert_eq!(c["disputed"].as_bool(), Some(sd > 1.5));
            } else {
                prop_assert!(c["scores"].as_array().unwrap().len() < 2);
            }
        }
        if let Some(o) = s["consensusOverall"].as_f64() { prop_assert!((1.0..=5.0).contains(&o)); }
    }
}

// ---- structured replies --------------------------------------------------------------------

/// A run whose reviewers `json` are asked for JSON (their routes take structured output).
fn structured_mode(reviewers: &[&str], json: &[&str]) -> PeerReview {
    let mut c = ctx("Review our upload service", vec![], true);
    c.structured = crate::modes::Structured::models(json);
    PeerReview::new(&config(reviewers), c).unwrap()
}

fn json_score(criterion: &str, score: u64) -> (String, Value) {
    (
        criterion.to_string(),
        json!({ "score": score, "justification": format!("{criterion} judged.") }),
    )
}

fn json_finding(title: &str, category: &str, severity: &str) -> Value {
    json!({ "title": title, "category": category, "severity": severity, "location": "API tier",
            "description": "One server.", "impact": "Downtime.", "recommendation": "Add one." })
}

/// The architecture rubric's six criteria scored in order.
fn all_scores(scores: [u64; 6]) -> Vec<(String, Value)> {
    rubric().criteria.iter().zip(scores).map(|(c, s)| json_score(&c.name, s)).collect()
}

fn three_findings() -> Vec<Value> {
    vec![
        json_finding("Single server", "Scalability", "CRITICAL"),
        json_finding(" Nightly copies ", "Reliability", "MAJOR"),
        json_finding("Diagram", "Maintainability", "SUGGESTION"),
    ]
}

fn json_review(scores: Vec<(String, Value)>, findings: Vec<Value>) -> String {
    let scores: serde_json::Map<String, Value> = scores.into_iter().collect();
    json!({ "reasoning": "read the work twice", "scores": scores, "findings": findings,
            "strengths": ["Simple", " Cheap ", "Clear scope"], "summary": "Decent." })
    .to_string()
}

#[test]
fn the_review_schema_names_the_rubric_and_opens_with_the_reasoning() {
    let s = review_schema(&rubric());
    assert_eq!(s.name, REVIEW_SCHEMA);
    let keys: Vec<&String> = s.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "scores", "findings", "strengths", "summary"]);
    let names: Vec<String> = rubric().criteria.iter().map(|c| c.name.clone()).collect();
    // Every criterion is a field of its own, required: a grammar gives each exactly once.
    let scores = &s.schema["properties"]["scores"];
    assert_eq!(schema::keys_of(scores), names);
    assert_eq!(scores["required"], json!(names));
    assert_eq!(scores["additionalProperties"], false);
    let finding = &s.schema["properties"]["findings"]["items"]["properties"];
    assert_eq!(finding["severity"]["enum"], json!(SEVERITIES));
    assert_eq!(finding["category"]["enum"], json!(names));
    let parse = |t: String| serde_json::from_str::<Value>(&t).unwrap();
    assert!(s
        .validate(&parse(json_review(all_scores([1, 2, 3, 4, 5, 5]), three_findings())))
        .is_ok());
    let mut invented = all_scores([3; 6]);
    invented[5] = json_score("Vibes", 5);
    let mut foreign_category = three_findings();
    foreign_category[2] = json_finding("Diagram", "Docs", "MINOR");
    let mut foreign_severity = three_findings();
    foreign_severity[0] = json_finding("x", "Scalability", "BLOCKER");
    for bad in [
        // Out of 1-5, an invented criterion, too few scores, too few findings, a category or
        // a severity outside the rubric's.
        json_review(all_scores([3, 3, 3, 7, 3, 3]), three_findings()),
        json_review(all_scores([3, 3, 3, 0, 3, 3]), three_findings()),
        json_review(invented, three_findings()),
        json_review(all_scores([3; 6])[..5].to_vec(), three_findings()),
        json_review(all_scores([3; 6]), three_findings()[..2].to_vec()),
        json_review(all_scores([3; 6]), foreign_category),
        json_review(all_scores([3; 6]), foreign_severity),
    ] {
        assert!(s.validate(&parse(bad.clone())).is_err(), "{bad}");
    }
}

#[test]
fn a_review_is_read_from_json_when_it_fits_else_from_text() {
    let rb = rubric();
    let s = review_schema(&rb);
    let r =
        read_review_reply(&json_review(all_scores([2, 4, 4, 5, 3, 1]), three_findings()), &rb, &s);
    assert_eq!(r.read_from, Some(ReadFrom::Json));
    let scores: Vec<Option<u32>> = r.scores.iter().map(|s| s.score).collect();
    assert_eq!(scores, [Some(2), Some(4), Some(4), Some(5), Some(3), Some(1)]);
    assert_eq!(r.scores[0].weight, 5, "weights come from the rubric");
    assert_eq!(r.scores[0].justification.as_deref(), Some("Scalability judged."));
    let f: Vec<(usize, &str, Option<&str>, &str)> = r
        .findings
        .iter()
        .map(|f| (f.number, f.title.as_str(), f.criterion.as_deref(), f.severity.as_str()))
        .collect();
    assert_eq!(
        f,
        [
            (1, "Single server", Some("Scalability"), "CRITICAL"),
            (2, "Nightly copies", Some("Reliability"), "MAJOR"),
            (3, "Diagram", Some("Maintainability"), "SUGGESTION"),
        ]
    );
    assert!(r.findings.iter().all(|f| !f.severity_defaulted));
    assert_eq!(r.strengths, ["Simple", "Cheap", "Clear scope"]);
    // A criterion given twice (its last value kept by the JSON parser) leaves another out:
    // the JSON does not fit, and no score is guessed from it.
    let twice = r#"{"reasoning": "", "scores": {"Scalability": {"score": 2, "justification": ""},
        "Scalability": {"score": 5, "justification": ""}}, "findings": [], "strengths": [], "summary": ""}"#;
    let r = read_review_reply(twice, &rb, &s);
    assert!(!r.parse_success && r.read_from.is_none(), "{r:?}");
    // A score out of range is refused, and the text states none: unparsed.
    let r =
        read_review_reply(&json_review(all_scores([2, 4, 9, 5, 3, 1]), three_findings()), &rb, &s);
    assert!(!r.parse_success && r.read_from.is_none() && r.findings.is_empty());
    // The text format, from a model that ignored the schema.
    let r = read_review_reply(REVIEW, &rb, &s);
    assert_eq!(r, read_review(REVIEW, &rb));
    assert_eq!(r.read_from, Some(ReadFrom::Text));
}

proptest! {
    /// Whatever review the schema allows is read as given: each criterion's score, the
    /// findings in order with their fields, the strengths.
    #[test]
    fn any_review_the_schema_allows_is_read_whole(seed in any::<u64>(), words in "\\PC{0,40}") {
        let rb = rubric();
        let s = review_schema(&rb);
        let v = schema::sample(&s.schema, &mut SplitMix64::new(seed), &|f| format!("{words} {f}"));
        let r = read_review_reply(&v.to_string(), &rb, &s);
        prop_assert_eq!(r.read_from, Some(ReadFrom::Json));
        let trimmed = |x: &Value| x.as_str().map(str::trim).filter(|t| !t.is_empty()).map(str::to_string);
        for sc in &r.scores {
            let given = &v["scores"][sc.criterion.as_str()];
            prop_assert_eq!(sc.score.map(u64::from), given["score"].as_u64());
            prop_assert_eq!(&sc.justification, &trimmed(&given["justification"]));
        }
        let findings = v["findings"].as_array().unwrap();
        prop_assert_eq!(r.findings.len(), findings.len());
        for (f, g) in r.findings.iter().zip(findings) {
            prop_assert_eq!(Some(f.title.clone()).filter(|t| !t.is_empty()), trimmed(&g["title"]));
            prop_assert_eq!(f.criterion.as_deref(), g["category"].as_str());
            prop_assert_eq!(Some(f.severity.as_str()), g["severity"].as_str());
            prop_assert_eq!(&f.location, &trimmed(&g["location"]));
            prop_assert_eq!(&f.description, &trimmed(&g["description"]));
            prop_assert_eq!(&f.impact, &trimmed(&g["impact"]));
            prop_assert_eq!(&f.recommendation, &trimmed(&g["recommendation"]));
        }
        let strengths: Vec<String> = v["strengths"].as_array().unwrap().iter().filter_map(trimmed).collect();
        prop_assert_eq!(r.strengths, strengths);
    }
}

#[test]
fn the_json_prompt_keeps_the_work_and_rubric_and_swaps_the_format() {
    let rb = rubric();
    let s = review_schema(&rb);
    let (json, text) =
        (review_prompt("q", "the work", &rb, Some(&s)), review_prompt("q", "the work", &rb, None));
    for kept in [
        REVIEW_HEAD,
        "=== WORK UNDER REVIEW ===\nthe work\n=== END OF WORK ===",
        "- Cost Efficiency (weight 3): ",
        SCALE,
        SEVERITY_TEXT,
    ] {
        assert!(json.contains(kept) && text.contains(kept), "{kept}");
    }
    assert!(json.contains("Reply with a single JSON object"));
    assert!(!json.contains("### Scores") && !json.contains("FINDING 1:"));
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"scores\"").unwrap());
    assert!(
        text.contains("Reply in exactly this format:\n\n### Scores\n") && !text.contains("JSON")
    );
    assert!(text.ends_with(
        "### Strengths\n\n- 3 to 5 items\n\n### Summary\n\n<a short overall assessment>"
    ));
}

#[test]
fn reviews_are_read_from_json_or_text_and_say_which_and_the_consolidator_reads_fields() {
    let mut m = structured_mode(&["a", "b", "c"], &["a", "b"]);
    let start = m.start();
    let calls = stage_calls(&start);
    assert!(calls.iter().all(|c| c.schema.as_ref().is_some_and(|s| s.name == REVIEW_SCHEMA)));
    assert!(calls[0].messages[0].content.contains("Reply with a single JSON object"));
    assert!(calls[2].messages[0].content.contains("### Scores"), "c's route takes text");
    assert_eq!(&*calls[0].material[0].text, "Review our upload service");
    let mut all = start.clone();
    all.extend(
        m.on_reply(ok(&calls[0], &json_review(all_scores([2, 4, 4, 5, 3, 1]), three_findings()))),
    );
    // Ignored the schema and wrote the text format; states nothing.
    all.extend(m.on_reply(ok(&calls[1], REVIEW)));
    let out = m.on_reply(ok(&calls[2], "I will not score this."));
    all.extend(out.clone());
    let done = emitted(&out, "all_reviewers_complete").unwrap();
    let reviews = &done["data"]["reviews"];
    assert_eq!(
        (&reviews[0]["readFrom"], &reviews[1]["readFrom"]),
        (&json!("json"), &json!("text"))
    );
    assert!(reviews[2].get("readFrom").is_none());
    assert_eq!(done["data"]["statistics"]["findingTotals"]["total"], 6);
    let con = stage_calls(&out);
    assert!(con[0].schema.is_none(), "the consolidated report is text a person reads");
    let prompt = &con[0].messages[0].content;
    assert!(
        prompt.contains("### Reviewer 1 (a)\n\nReasoning: read the work twice\nScores:"),
        "{prompt}"
    );
    assert!(!prompt.contains("\"scores\""));
    assert_eq!(con[0].material.len(), 4, "the work and three reviews");
    assert!(con[0].material.iter().all(|m| prompt.contains(&*m.text)));
    all.extend(m.on_reply(ok(&con[0], REPORT)));
    let stored = rows(&all);
    let read: Vec<(&str, &Value)> = stored
        .iter()
        .filter_map(|r| Some((r.stage_type.as_str(), r.parsed_data.as_ref()?.get("readFrom")?)))
        .collect();
    assert_eq!(read, [("review_1", &json!("json")), ("review_2", &json!("text"))]);
    let mut sorted = stored.clone();
    sorted.sort_by_key(|r| r.stage_order);
    assert_eq!(load_result(&sorted)["reviews"], done["data"]["reviews"]);
}

#[test]
fn the_sim_answers_its_review_schema_in_json_and_no_other() {
    let rb = rubric();
    let s = review_schema(&rb);
    let prompt = review_prompt("q", "the work", &rb, Some(&s));
    let messages = [ChatMessage::user(prompt.as_str())];
    let ask = |seed: u64, hostile: bool, schema: &ReplySchema| {
        sim_answer(&SimAsk {
            messages: &messages,
            ..sim_ask("sim/alpha", &prompt, seed, hostile, Some(schema))
        })
    };
    let mut reviews = Vec::new();
    for seed in 0..10u64 {
        let reply = ask(seed, seed % 2 == 0, &s).unwrap();
        let r = read_review_reply(&reply, &rb, &s);
        assert_eq!(r.read_from, Some(ReadFrom::Json), "{reply}");
        assert!(r.scores.iter().all(|s| s.score.is_some()) && r.findings.len() >= 3);
        reviews.push(review_of(reviews.len() + 1, "sim/alpha", &reply, &rb, &s, 1));
    }
    // The sim consolidator finds the JSON reviews' findings as they read.
    let stats = statistics(&reviews, &rb);
    let cp = consolidation_prompt("q", "the work", &rb, &reviews, &stats);
    let items = read_action_items(&sim(&cp, "sim/beta", false, false));
    assert!(!items.is_empty() && items.iter().all(|i| i.severity.is_some()));
    let other = ReplySchema::new("council_ranking", schema::reasoned([]));
    assert_eq!(ask(1, false, &other), None);
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, protocol word or key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["CRITICAL", "MAJOR", "Effort: Medium"])
}

/// A run of three reviewers (the second's review unreadable) and its consolidation.
fn reviewed_run() -> Vec<Effect> {
    let mut m = mode(&["a", "b", "a"]);
    let start = m.start();
    let calls = stage_calls(&start);
    let mut all = start.clone();
    all.extend(m.on_reply(ok(&calls[2], REVIEW)));
    all.extend(
        m.on_reply(ok(&calls[0], "| Security | 5 | 5 | ok |\n| Scalability | 4 | 5 | ok |")),
    );
    let out = m.on_reply(ok(&calls[1], "I will not score this."));
    let con = stage_calls(&out);
    all.extend(out);
    all.extend(m.on_reply(ok(&con[0], REPORT)));
    all
}

#[test]
fn the_report_tables_the_scores_per_criterion_and_the_action_items() {
    let all = reviewed_run();
    let mut stored = rows(&all);
    stored.sort_by_key(|r| r.stage_order);
    let result = load_result(&stored);
    let r = readable(&result);
    assert_contains_all(
        &r,
        &[
            "|---",
            "| criterion | weight | reviewer 1 (a) | reviewer 2 (b) | reviewer 3 (a) | average | agreement |",
            "| Scalability | 5 | 4 | unread | 2 | 3 | medium |",
            "| Security | 5 | 5 | unread | 4 | 4.5 | medium |",
            "| Reliability | 4 | unread | unread | unread | — | — |",
            "| overall (weighted) | — | 4.5 | unread |",
            "- reviewer 2 (b): no score could be read from the review",
            "**Consensus:** 4 of 5 overall",
            "medium agreement between the reviewers (mean standard deviation 0.75)",
            "weighted by the Architecture Review rubric",
            "**Findings:** 3 findings in all the reviews: 1 critical,",
            "**Action items (by con):**",
            "| 1 | critical | Add a replica | medium |",
            "| 2 | major | Test restores | low |",
            "| 3 | not stated | Write a diagram | not stated |",
        ],
    );
    assert!(
        r.contains("| 4 | not stated | [note] Tidy up — Effort: enormous | not stated |"),
        "what was not read stays as written: {r}"
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // Too few reviews: the one review and the failed reviewers, no statistics.
    let mut m = mode(&["a", "b", "c"]);
    let calls = stage_calls(&m.start());
    let mut all = m.on_reply(err(&calls[0]));
    all.extend(m.on_reply(ok(&calls[1], REVIEW)));
    all.extend(m.on_reply(ok(&calls[2], "")));
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("|---") && r.contains("reviewer 2 (b)"), "{r}");
    assert!(r.contains("- reviewer 1 (a): the call failed (down)"), "{r}");
    assert!(!r.contains("Consensus") && !r.contains("Action items"), "{r}");
    // A consolidation with no action items read says so.
    let mut m = mode(&["a", "b"]);
    let calls = stage_calls(&m.start());
    let mut all = m.on_reply(ok(&calls[0], REVIEW));
    all.extend(m.on_reply(ok(&calls[1], REVIEW)));
    let c = stage_calls(&all);
    all.extend(m.on_reply(ok(&c[0], "The reviews agree; nothing to add.")));
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("**Action items (by "), "{r}");
    assert!(r.contains("none could be read from the consolidated report"), "{r}");
}
