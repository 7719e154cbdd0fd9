//! Debate mode: the revision parser on real-world shapes, and the state machine through every
//! edge case of the seed's table.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    ctx, emitted, err, events, failed, feed, finished, ok, rows, stage_calls,
};
use crate::modes::Fallbacks;

#[test]
fn reads_a_well_formed_revision() {
    let t = "DECISION: REVISE\nREASONING: Response B covered caching.\n\nREVISED RESPONSE:\nUse a cache.\n\nAnd measure.";
    let p = parse_revision(t);
    assert_eq!(p.decision.as_deref(), Some("REVISE"));
    assert_eq!(p.reasoning.as_deref(), Some("Response B covered caching."));
    assert_eq!(p.revised_response.as_deref(), Some("Use a cache.\n\nAnd measure."));
}

#[test]
fn tolerates_markdown_case_and_a_quoted_template() {
    let t = "**Decision:** **merge**\n**Reasoning:** both had merit\n\n## Revised Response:\nCombined text";
    let p = parse_revision(t);
    assert_eq!(p.decision.as_deref(), Some("MERGE"));
    assert_eq!(p.reasoning.as_deref(), Some("both had merit"));
    assert_eq!(p.revised_response.as_deref(), Some("Combined text"));
    // The template quoted first, then the model's own block: the last block counts.
    let quoted = "You asked for:\nDECISION: [REVISE|STAND|MERGE]\nREVISED RESPONSE:\n[...]\n\nDECISION: STAND\nREASONING: Mine was complete.\n\nREVISED RESPONSE:\nOriginal text.";
    let p = parse_revision(quoted);
    assert_eq!(p.decision.as_deref(), Some("STAND"));
    assert_eq!(p.revised_response.as_deref(), Some("Original text."));
}

#[test]
fn without_the_marker_the_text_after_the_reasoning_is_the_response() {
    let p = parse_revision("DECISION: REVISE\nREASONING: better now\nThe improved answer.");
    assert_eq!(p.revised_response.as_deref(), Some("The improved answer."));
    let none = parse_revision("I thought about it and changed nothing.");
    assert_eq!((none.decision, none.revised_response), (None, None));
}

proptest! {
    #[test]
    fn parse_revision_never_panics(text in "\\PC{0,400}") {
        let p = parse_revision(&text);
        if let Some(d) = p.decision {
            prop_assert!(["REVISE", "STAND", "MERGE"].contains(&d.as_str()));
        }
    }
}

fn debate(models: &[&str]) -> Debate {
    Debate::new(
        &json!({ "models": models, "timeoutMs": 120000 }),
        ctx("Four-day week?", vec![], true),
    )
}

fn revision_text(decision: &str, body: &str) -> String {
    format!("DECISION: {decision}\nREASONING: because\n\nREVISED RESPONSE:\n{body}")
}

/// Label of `model` in the revised map announced by `vote_start`.
fn revised_label(effects: &[Effect], model: &str) -> String {
    let map = emitted(effects, "vote_start").unwrap()["data"]["revisedLabelMap"].clone();
    map.as_object()
        .unwrap()
        .iter()
        .find(|(_, v)| **v == json!(model))
        .map(|(k, _)| k.clone())
        .unwrap()
}

#[test]
fn the_full_debate_follows_the_seed() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let e1 = feed(&mut d, r1.iter().map(|s| ok(s, &format!("original of {}", s.model))).collect());
    let revs = stage_calls(&e1);
    all.extend(e1);
    // Unique prompts: each debater sees its own answer and the two others, anonymised.
    assert_eq!(revs.len(), 3);
    let p0 = &revs[0].messages[0].content;
    assert!(p0.contains("YOUR ORIGINAL RESPONSE:\noriginal of m1"));
    assert!(p0.contains("original of m2") && p0.contains("original of m3"));
    assert_eq!(p0.matches("--- Response ").count(), 2);
    assert!(!p0.contains("m2 ---"), "others are anonymised");
    let e2 = feed(
        &mut d,
        vec![
            ok(&revs[0], &revision_text("REVISE", "revised m1")),
            ok(&revs[1], &revision_text("STAND", "original of m2")),
            ok(&revs[2], &revision_text("MERGE", "merged m3")),
        ],
    );
    let summary = emitted(&e2, "revision_complete").unwrap()["data"]["summary"].clone();
    assert_eq!(
        summary,
        json!({ "totalModels": 3, "revised": 1, "stood": 1, "merged": 1, "parseFailed": 0 })
    );
    let votes = stage_calls(&e2);
    all.extend(e2);
    assert!(
        votes[0].messages[0].content.contains("revised m1"),
        "votes are on the revised answers"
    );
    let l3 = revised_label(&all, "m3");
    let e3 = feed(&mut d, votes.iter().map(|s| ok(s, &format!("VOTE: {l3}"))).collect());
    all.extend(e3.clone());
    assert_eq!(finished(&e3).as_deref(), Some("merged m3"));
    let w = emitted(&e3, "winner_declared").unwrap()["data"].clone();
    assert_eq!(
        (w["winnerDecision"].clone(), w["voteCount"].clone(), w["tiebroken"].clone()),
        (json!("MERGE"), json!(3), json!(false))
    );
    assert_eq!(
        events(&all),
        vec![
            "debate_start",
            "round1_start",
            "round1_complete",
            "revision_start",
            "revision_complete",
            "vote_start",
            "vote_complete",
            "winner_declared"
        ]
    );
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["winner"], w);
    assert_eq!(loaded["round1"], emitted(&all, "round1_complete").unwrap()["data"]);
    assert_eq!(
        loaded["revisions"],
        emitted(&all, "revision_complete").unwrap()["data"]["revisions"]
    );
    assert_eq!(loaded["revisionSummary"], summary);
    assert_eq!(loaded["votes"], emitted(&all, "vote_complete").unwrap()["data"]);
    assert_eq!(
        loaded["round1LabelMap"],
        emitted(&all, "revision_start").unwrap()["data"]["labelMap"]
    );
    let declared = emitted(&all, "winner_declared").unwrap();
    assert_eq!((&declared["partial"], &declared["failedModels"]), (&json!(false), &json!([])));
    assert_eq!((&loaded["partial"], &loaded["failedModels"]), (&json!(false), &json!([])));
}

#[test]
fn failed_debaters_mark_the_run_partial_live_and_from_rows() {
    let mut d = debate(&["m1", "m2", "m3", "m4"]);
    let mut all = d.start();
    let r1 = stage_calls(&all);
    // m4 never answers (a timeout), so it is out of the debate; m1's revision fails.
    let mut timeout = err(&r1[3]);
    timeout.result =
        Err(crate::modes::CallError::new(crate::modes::CallErrorKind::Timeout, None, "timed out"));
    let e1 = feed(
        &mut d,
        vec![ok(&r1[0], "orig m1"), ok(&r1[1], "orig m2"), ok(&r1[2], "orig m3"), timeout],
    );
    let revs = stage_calls(&e1);
    assert_eq!(revs.len(), 3);
    all.extend(e1);
    let e2 = feed(
        &mut d,
        vec![
            err(&revs[0]),
            ok(&revs[1], &revision_text("STAND", "orig m2")),
            ok(&revs[2], &revision_text("STAND", "orig m3")),
        ],
    );
    let votes = stage_calls(&e2);
    all.extend(e2.clone());
    let b = revised_label(&e2, "m2");
    all.extend(feed(&mut d, votes.iter().map(|s| ok(s, &format!("VOTE: {b}"))).collect()));
    let declared = emitted(&all, "winner_declared").unwrap();
    assert_eq!(declared["data"]["winnerModel"], "m2");
    assert_eq!(declared["partial"], true);
    assert_eq!(
        declared["failedModels"],
        json!([
            { "model": "m4", "role": "respondent", "stage": "round1",
              "error": { "kind": "timeout", "status": null, "message": "timed out" } },
            { "model": "m1", "role": "debater", "stage": "revision",
              "error": { "kind": "http", "status": 503, "message": "down" } },
        ])
    );
    let loaded = load_result(&rows(&all));
    assert_eq!(
        (&loaded["partial"], &loaded["failedModels"]),
        (&declared["partial"], &declared["failedModels"])
    );
    assert_eq!(loaded["winner"], declared["data"]);
}

#[test]
fn a_failed_revision_keeps_the_original_and_still_votes() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    let revs = stage_calls(&feed(
        &mut d,
        r1.iter().map(|s| ok(s, &format!("orig {}", s.model))).collect(),
    ));
    let e = feed(
        &mut d,
        vec![
            err(&revs[0]),
            ok(&revs[1], "no decision here"),
            ok(&revs[2], &revision_text("REVISE", "new m3")),
        ],
    );
    let revisions = emitted(&e, "revision_complete").unwrap()["data"]["revisions"].clone();
    assert_eq!(revisions[0]["revisedResponse"], "orig m1");
    assert_eq!(revisions[0]["parseSuccess"], false);
    assert_eq!(revisions[1]["decision"], json!(null));
    assert_eq!(revisions[1]["revisedResponse"], "no decision here", "best effort: the whole text");
    assert_eq!(stage_calls(&e).len(), 3, "the failed reviser still votes");
    let rows = rows(&e);
    assert_eq!(rows.iter().filter(|r| r.stage_type == "revision").count(), 2);
}

#[test]
fn all_revisions_failing_votes_on_the_originals() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let e1 = feed(&mut d, r1.iter().map(|s| ok(s, &format!("orig {}", s.model))).collect());
    let revs = stage_calls(&e1);
    all.extend(e1);
    let e = feed(&mut d, revs.iter().map(err).collect());
    all.extend(e.clone());
    assert_eq!(emitted(&e, "revision_complete").unwrap()["data"]["summary"]["parseFailed"], 3);
    let votes = stage_calls(&e);
    assert!(votes[0].messages[0].content.contains("orig m1"));
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["revisions"][0]["revisedResponse"], "orig m1");
}

#[test]
fn ties_go_to_the_first_label_alphabetically() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    let revs = stage_calls(&feed(
        &mut d,
        r1.iter().map(|s| ok(s, &format!("orig {}", s.model))).collect(),
    ));
    let e = feed(
        &mut d,
        revs.iter().map(|s| ok(s, &revision_text("STAND", &format!("orig {}", s.model)))).collect(),
    );
    let votes = stage_calls(&e);
    // Everyone votes for themselves: a three-way tie.
    let fin = feed(
        &mut d,
        votes.iter().map(|s| ok(s, &format!("VOTE: {}", revised_label(&e, &s.model)))).collect(),
    );
    let w = emitted(&fin, "winner_declared").unwrap()["data"].clone();
    assert_eq!(
        (w["winnerLabel"].clone(), w["tiebroken"].clone(), w["tiebreakerMethod"].clone()),
        (json!("Response A"), json!(true), json!("alphabetical"))
    );
    assert_eq!(
        emitted(&fin, "vote_complete").unwrap()["data"]["tiedLabels"],
        json!(["Response A", "Response B", "Response C"])
    );
}

#[test]
fn unparseable_votes_are_excluded_and_none_at_all_is_an_error() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    let revs = stage_calls(&feed(&mut d, r1.iter().map(|s| ok(s, "x")).collect()));
    let votes = stage_calls(&feed(
        &mut d,
        revs.iter().map(|s| ok(s, &revision_text("STAND", "x"))).collect(),
    ));
    let e = feed(&mut d, votes.iter().map(|s| ok(s, "I like them all")).collect());
    assert_eq!(failed(&e).as_deref(), Some("All votes failed to parse."));
    assert_eq!(emitted(&e, "vote_complete").unwrap()["data"]["invalidVoteCount"], 3);
}

#[test]
fn two_answers_are_enough_and_one_is_not() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    let e = feed(&mut d, vec![ok(&r1[0], "a"), err(&r1[1]), ok(&r1[2], "c")]);
    let revs = stage_calls(&e);
    assert_eq!(revs.len(), 2);
    assert_eq!(
        revs[0].messages[0].content.matches("--- Response ").count(),
        1,
        "each sees the one other"
    );
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    assert!(failed(&feed(&mut d, vec![ok(&r1[0], "a"), err(&r1[1]), err(&r1[2])])).is_some());
}

#[test]
fn validation_follows_the_seed() {
    let d = Defaults { offline: true, stage_timeout_ms: 120_000, fallback: Fallbacks::default() };
    assert!(validate(&json!({ "question": "q", "mode": "debate" }), &d).is_ok());
    let field = |b: Value| validate(&b, &d).unwrap_err().field;
    assert_eq!(
        field(json!({ "question": "q", "modeConfig": { "models": ["a", "b"] } })),
        "modeConfig.models"
    );
    assert_eq!(
        field(
            json!({ "question": "q", "modeConfig": { "models": ["1","2","3","4","5","6","7"] } })
        ),
        "modeConfig.models"
    );
    assert_eq!(field(json!({ "question": "" })), "question");
}

#[test]
fn all_models_failing_in_round_one_stores_only_the_failures() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    let e = feed(&mut d, r1.iter().map(err).collect());
    assert!(failed(&e).is_some());
    assert!(rows(&e).iter().all(|r| r.stage_type == "call_failed"));
    let loaded = load_result(&rows(&e));
    assert_eq!(loaded["partial"], true);
    assert_eq!(loaded["failedModels"].as_array().map(Vec::len), Some(3));
    assert_eq!(loaded["failedModels"][0]["stage"], "round1");
    assert_eq!(loaded["failedModels"][0]["role"], "respondent");
}

#[test]
fn a_decision_with_no_response_text_keeps_the_original() {
    let mut d = debate(&["m1", "m1", "m2"]);
    let r1 = stage_calls(&d.start());
    assert_eq!(r1.len(), 3, "duplicate models are separate debaters");
    let revs = stage_calls(&feed(
        &mut d,
        r1.iter().enumerate().map(|(i, s)| ok(s, &format!("orig {i}"))).collect(),
    ));
    let e = feed(
        &mut d,
        vec![
            ok(&revs[0], "DECISION: REVISE\nREASONING: x\n\nREVISED RESPONSE:\n"),
            ok(&revs[1], &revision_text("STAND", "orig 1")),
            ok(&revs[2], &revision_text("MERGE", "merged")),
        ],
    );
    let revisions = emitted(&e, "revision_complete").unwrap()["data"]["revisions"].clone();
    assert_eq!(revisions[0]["revisedResponse"], "orig 0");
    assert_eq!(revisions[0]["decision"], "REVISE");
    assert_eq!(revisions.as_array().map(Vec::len), Some(3));
}
