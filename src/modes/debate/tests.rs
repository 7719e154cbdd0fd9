//! Debate mode: the revision parser on real-world shapes, and the state machine through every
//! edge case of the seed's table.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    assert_contains_all, assert_report_free_of, ctx, drive_on_sim_text, emitted, err, events,
    failed, feed, fields, finished, fits_a_closed_think_block, offline_defaults, ok, parsed_of,
    quotes_its_material, rows, sim_ask, stage_calls,
};
use crate::modes::validate;
use crate::modes::Mode;

/// Asserts the decision, reasoning and revised response `parse_revision` reads in `text`.
fn assert_reads(text: &str, decision: &str, reasoning: &str, response: &str) {
    let p = parse_revision(text);
    assert_eq!(p.decision.as_deref(), Some(decision));
    assert_eq!(p.reasoning.as_deref(), Some(reasoning));
    assert_eq!(p.revised_response.as_deref(), Some(response));
}

#[test]
fn reads_a_well_formed_revision() {
    let t = "DECISION: REVISE\nREASONING: Response B covered caching.\n\nREVISED RESPONSE:\nUse a cache.\n\nAnd measure.";
    assert_reads(t, "REVISE", "Response B covered caching.", "Use a cache.\n\nAnd measure.");
}

#[test]
fn tolerates_markdown_case_and_a_quoted_template() {
    let t = "**Decision:** **merge**\n**Reasoning:** both had merit\n\n## Revised Response:\nCombined text";
    assert_reads(t, "MERGE", "both had merit", "Combined text");
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
    .expect("a configuration that fits")
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

/// Starts `d` and answers its first round `original of <model>`: every effect and the revisions.
fn answer_round_one(d: &mut Debate) -> (Vec<Effect>, Vec<CallSpec>) {
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let e1 = feed(d, r1.iter().map(|s| ok(s, &format!("original of {}", s.model))).collect());
    let revs = stage_calls(&e1);
    all.extend(e1);
    (all, revs)
}

/// A debate of m1, m2 and m3 whose first round is answered `answer`: it and its revision calls.
fn past_round_one(answer: impl Fn(&CallSpec) -> String) -> (Debate, Vec<CallSpec>) {
    let mut d = debate(&["m1", "m2", "m3"]);
    let r1 = stage_calls(&d.start());
    let revs = stage_calls(&feed(&mut d, r1.iter().map(|s| ok(s, &answer(s))).collect()));
    (d, revs)
}

#[test]
fn the_full_debate_follows_the_seed() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let (mut all, revs) = answer_round_one(&mut d);
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
        fields(&w, ["winnerDecision", "voteCount", "tiebroken"]),
        [json!("MERGE"), json!(3), json!(false)]
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
    let (mut d, revs) = past_round_one(|s| format!("orig {}", s.model));
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
    let (mut d, revs) = past_round_one(|s| format!("orig {}", s.model));
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
        fields(&w, ["winnerLabel", "tiebroken", "tiebreakerMethod"]),
        [json!("Response A"), json!(true), json!("alphabetical")]
    );
    assert_eq!(
        emitted(&fin, "vote_complete").unwrap()["data"]["tiedLabels"],
        json!(["Response A", "Response B", "Response C"])
    );
}

/// A debate whose debaters all stood by their first answers: it and its vote calls.
fn at_the_vote() -> (Debate, Vec<CallSpec>) {
    let (mut d, revs) = past_round_one(|_| "x".into());
    let votes = stage_calls(&feed(
        &mut d,
        revs.iter().map(|s| ok(s, &revision_text("STAND", "x"))).collect(),
    ));
    (d, votes)
}

#[test]
fn unparseable_votes_are_excluded_and_none_at_all_is_an_error() {
    let (mut d, votes) = at_the_vote();
    let e = feed(&mut d, votes.iter().map(|s| ok(s, "I like them all")).collect());
    assert_eq!(failed(&e).as_deref(), Some("All votes failed to parse."));
    assert_eq!(emitted(&e, "vote_complete").unwrap()["data"]["invalidVoteCount"], 3);
}

#[test]
fn no_vote_coming_back_is_an_error_that_says_so() {
    let (mut d, votes) = at_the_vote();
    let e = feed(&mut d, votes.iter().map(err).collect());
    assert_eq!(failed(&e).as_deref(), Some("No vote came back: every voter's call failed."));
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
    let d = offline_defaults();
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

// ---- the corpus: real and adversarial replies, each with the parse a careful reader expects --

/// What a careful reader takes from a revision: the decision, the reasoning, the response and
/// why there is no decision.
type Want = (Option<&'static str>, Option<&'static str>, Option<&'static str>, Option<Unparsed>);

fn check_corpus(cases: &[(&str, &str, Want)]) {
    for (name, text, (decision, reasoning, response, unparsed)) in cases {
        let p = parse_revision(text);
        assert_eq!(p.decision.as_deref(), *decision, "{name}: decision");
        assert_eq!(p.reasoning.as_deref(), *reasoning, "{name}: reasoning");
        assert_eq!(p.revised_response.as_deref(), *response, "{name}: response");
        assert_eq!(p.unparsed, *unparsed, "{name}: unparsed");
        if let Some(r) = &p.revised_response {
            assert!(!r.to_lowercase().contains("<think"), "{name}: a trace in the response");
        }
    }
}

/// Replies of SmolLM2-135M-Instruct to the seed's revision prompt, verbatim
/// (`corpus/debate/SOURCES.md`). It answers with a line of the template ("[Your final response
/// — if STAND, repeat your original]"), a greeting or the prompt's first paragraph repeated:
/// the decision words it writes are mentions, never a decision.
#[test]
fn real_replies_parse_as_a_careful_reader_reads_them() {
    let none: Want = (None, None, None, Some(Unparsed::NoAnswer));
    let cases = [
        ("smollm2-01", include_str!("../corpus/debate/smollm2-01.txt"), none),
        ("smollm2-02", include_str!("../corpus/debate/smollm2-02.txt"), none),
        ("smollm2-03", include_str!("../corpus/debate/smollm2-03.txt"), none),
        ("smollm2-04", include_str!("../corpus/debate/smollm2-04.txt"), none),
        ("smollm2-05", include_str!("../corpus/debate/smollm2-05.txt"), none),
        ("smollm2-06", include_str!("../corpus/debate/smollm2-06.txt"), none),
        ("smollm2-07", include_str!("../corpus/debate/smollm2-07.txt"), none),
        ("smollm2-08", include_str!("../corpus/debate/smollm2-08.txt"), none),
    ];
    check_corpus(&cases);
}

#[test]
fn adversarial_replies_parse_as_a_careful_reader_reads_them() {
    use Unparsed::*;
    let full = "DECISION: REVISE\nREASONING: B covered caching.\n\nREVISED RESPONSE:\nUse a cache.";
    let draft =
        format!("<think>DECISION: STAND is tempting; REVISED RESPONSE: mine</think>\n{full}");
    let after = format!("{full}\n<think>or DECISION: MERGE?</think>");
    let opened = format!("maybe DECISION: MERGE\n</think>\n{full}");
    let inner = "DECISION: REVISE\nREASONING: x\n\nREVISED RESPONSE:\n<think>check the numbers</think>\n100 °C at sea level.";
    let cases: Vec<(&str, &str, Want)> = vec![
        ("well formed", full, (Some("REVISE"), Some("B covered caching."), Some("Use a cache."), None)),
        ("a draft decision in think", &draft, (Some("REVISE"), Some("B covered caching."), Some("Use a cache."), None)),
        ("a think block after the answer", &after, (Some("REVISE"), Some("B covered caching."), Some("Use a cache."), None)),
        ("a template-opened block", &opened, (Some("REVISE"), Some("B covered caching."), Some("Use a cache."), None)),
        ("a trace inside the response", inner, (Some("REVISE"), Some("x"), Some("100 °C at sea level."), None)),
        ("an unclosed trace", "<think>I'll go with DECISION: MERGE and write", (None, None, None, Some(ReasoningOnly))),
        ("an unclosed trace after a decision", "DECISION: STAND\n<think>wait, maybe", (None, None, None, Some(ReasoningOnly))),
        ("cannot decide", "I can't decide whether to revise or stand; both answers have merit.", (None, None, None, Some(Refused))),
        ("a question", "Should I revise? Maybe. I'll stand by it, though I might merge later.", (None, None, None, Some(NoAnswer))),
        ("the template echoed", "DECISION: [REVISE|STAND|MERGE]\nREASONING: [1-2 sentences on why]\n\nREVISED RESPONSE:\n[Your final response]", (None, Some("[1-2 sentences on why]"), Some("[Your final response]"), Some(NoAnswer))),
        ("alternatives", "DECISION: REVISE or MERGE, hard to say.", (None, None, None, Some(NoAnswer))),
        ("a negated decision", "Decision: not STAND. I have nothing to add.", (None, None, None, Some(NoAnswer))),
        ("a hedge, then a decision", "I would not revise; my original stands.\nDECISION: STAND\nREASONING: complete.", (Some("STAND"), Some("complete."), None, None)),
        ("fenced JSON", "```json\n{\"decision\": \"merge\", \"reasoning\": \"both halves\", \"revised_response\": \"Start with a monolith; split later.\"}\n```", (Some("MERGE"), Some("both halves"), Some("Start with a monolith; split later."), None)),
        ("JSON with a hedged decision", "{\"decision\": \"I cannot decide\", \"revised_response\": \"x\"}", (None, None, None, Some(Refused))),
        ("a heading", "## Decision\n**STAND**\n\n## Reasoning\nMine was right.\n\nREVISED RESPONSE:\nNo: a modular monolith.", (Some("STAND"), None, Some("No: a modular monolith."), None)),
        ("an option letter", "Decision: b) STAND\nREASONING: unchanged.", (Some("STAND"), Some("unchanged."), None, None)),
        ("Spanish", "DECISIÓN: MANTENER\nREASONING: la mía era correcta.\n\nREVISED RESPONSE:\n100 °C.", (Some("STAND"), Some("la mía era correcta."), Some("100 °C."), None)),
        ("French", "DÉCISION : FUSIONNER\n\nREVISED RESPONSE:\nLes deux.", (Some("MERGE"), None, Some("Les deux."), None)),
        ("German", "ENTSCHEIDUNG: ÜBERARBEITEN\nDie neue Antwort.", (Some("REVISE"), None, Some("Die neue Antwort."), None)),
    ];
    check_corpus(&cases);
}

#[test]
fn unparsed_revisions_say_why_live_and_from_rows_and_carry_no_trace() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let mut all = d.start();
    let r1 = stage_calls(&all);
    let e1 = feed(
        &mut d,
        vec![
            ok(&r1[0], "<think>hidden plan</think>\norig m1"),
            ok(&r1[1], "orig m2"),
            ok(&r1[2], "orig m3"),
        ],
    );
    let revs = stage_calls(&e1);
    assert!(
        revs.iter().all(|c| !c.messages[0].content.contains("hidden plan")),
        "no trace handed on"
    );
    all.extend(e1);
    let e2 = feed(
        &mut d,
        vec![
            ok(&revs[0], "I can't decide whether to revise or stand."),
            ok(&revs[1], "<think>DECISION: MERGE, then write the merged"),
            ok(
                &revs[2],
                "<think>draft</think>\nDECISION: REVISE\nREASONING: r\n\nREVISED RESPONSE:\nnew m3",
            ),
        ],
    );
    let live = emitted(&e2, "revision_complete").unwrap()["data"]["revisions"].clone();
    assert_eq!(
        live.as_array().unwrap().iter().map(|r| r["unparsed"].clone()).collect::<Vec<_>>(),
        vec![json!("refused"), json!("reasoning_only"), json!(null)]
    );
    assert_eq!(
        live[0]["revisedResponse"], "orig m1",
        "a refusal keeps the original, without its trace"
    );
    assert_eq!(live[1]["revisedResponse"], "orig m2");
    assert_eq!(live[2]["revisedResponse"], "new m3");
    let votes = stage_calls(&e2);
    assert!(!votes[0].messages[0].content.contains("<think"));
    all.extend(e2);
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["revisions"], live);
    let stored = rows(&all);
    let revision = stored.iter().find(|r| r.stage_type == "revision").unwrap();
    assert_eq!(
        revision.content, "I can't decide whether to revise or stand.",
        "the raw text is kept"
    );
}

fn answers() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(
            "DECISION: REVISE\nREASONING: B covered caching.\n\nREVISED RESPONSE:\nUse a cache."
                .to_string()
        ),
        Just("```json\n{\"decision\": \"merge\", \"revised_response\": \"both\"}\n```".to_string()),
        Just("I can't decide whether to revise or stand.".to_string()),
        Just("## Decision\nSTAND\n\nMine.".to_string()),
        "[A-Za-z0-9:#*\\-\n ]{1,120}",
    ]
}

proptest! {
    /// Whatever a closed `<think>` block holds, what is parsed after it is what the answer
    /// alone gives.
    #[test]
    fn a_closed_think_block_never_changes_the_parse(inside in "\\PC{0,300}", answer in answers()) {
        prop_assume!(fits_a_closed_think_block(&inside, &answer));
        let text = format!("<think>{inside}</think>\n{answer}");
        prop_assert_eq!(parse_revision(&text), parse_revision(answer.trim()));
    }

    #[test]
    fn no_input_makes_the_parser_panic(text in "(\\PC|<think>|</think>|DECISION: |## Decision\n|REVISED RESPONSE:|REASONING: |\\{|\\}|```|–|\n){0,120}") {
        let p = parse_revision(&text);
        prop_assert_eq!(p.decision.is_none(), p.unparsed.is_some());
    }
}

#[test]
fn debaters_of_one_model_are_told_apart_and_their_calls_go_to_the_model() {
    let mut d = debate(&["m", "m", "x", "m"]);
    let r1 = stage_calls(&d.start());
    // The second member's first answer fails: the vote is among the three others.
    let replies =
        r1.iter().enumerate().map(|(i, s)| if i == 1 { err(s) } else { ok(s, "answer") }).collect();
    let e1 = feed(&mut d, replies);
    let names: Vec<String> = emitted(&e1, "round1_complete").unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["m #1", "x", "m #3"]);
    let revs = stage_calls(&e1);
    assert_eq!(revs.iter().map(|s| s.model.as_str()).collect::<Vec<_>>(), vec!["m", "x", "m"]);
    let e2 = feed(&mut d, revs.iter().map(|s| ok(s, &revision_text("STAND", "same"))).collect());
    let votes = stage_calls(&e2);
    assert!(votes.iter().all(|s| s.model == "m" || s.model == "x"));
    let e3 = feed(&mut d, votes.iter().map(|s| ok(s, "VOTE: Response A")).collect());
    let round = emitted(&e3, "debate_vote_complete")
        .or_else(|| emitted(&e3, "vote_complete"))
        .expect("the vote round's event");
    let voters: Vec<&str> = round["data"]["votes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["model"].as_str())
        .collect();
    assert_eq!(voters, vec!["m #1", "x", "m #3"], "each ballot under the member that cast it");
}

// ---- structured replies ---------------------------------------------------------------

/// A debate whose members `json` are asked for JSON (their routes take structured output).
fn structured_debate(models: &[&str], json: &[&str]) -> Debate {
    let mut ctx = ctx("Four-day week?", vec![], false);
    ctx.structured = crate::modes::Structured::models(json);
    Debate::new(&json!({ "models": models, "timeoutMs": 120000 }), ctx)
        .expect("a configuration that fits")
}

/// A debater's JSON revision.
fn json_revision(decision: &str, body: &str) -> String {
    json!({ "reasoning": "Response B covered caching.", "decision": decision, "revised_response": body })
        .to_string()
}

/// The revision calls of a debate whose first answers were `original of <model>`.
fn revision_calls(d: &mut Debate) -> Vec<CallSpec> {
    answer_round_one(d).1
}

#[test]
fn debaters_that_take_json_are_asked_for_the_revision_schema_and_the_others_for_text() {
    let mut d = structured_debate(&["m1", "m2", "m3"], &["m1", "m3"]);
    let revs = revision_calls(&mut d);
    assert!(revs.iter().all(|c| c.schema.as_ref().is_some_and(|s| s.name == "debate_revision")));
    let schema = revs[0].schema.clone().unwrap();
    let keys: Vec<&String> = schema.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "decision", "revised_response"], "reasoning first");
    assert_eq!(
        schema.schema["properties"]["decision"]["enum"],
        json!(["REVISE", "STAND", "MERGE"])
    );
    assert_eq!(
        schema.schema["properties"]["revised_response"]["maxLength"],
        json!(REVISED_RESPONSE_MAX_CHARS),
        "every string is bounded"
    );
    // The JSON prompt keeps the instructions and the three options and swaps the format; the
    // text one is the seed's, verbatim.
    let (json_prompt, text_prompt) = (&revs[0].messages[0].content, &revs[1].messages[0].content);
    assert_contains_all(
        json_prompt,
        &[
            "YOUR ORIGINAL RESPONSE:\noriginal of m1",
            "2. Identify any errors or omissions in your original response.",
            "c) MERGE: Substantially rewrite by combining the best elements of all responses",
        ],
    );
    assert!(json_prompt.contains("Reply with a single JSON object"));
    assert!(
        !json_prompt.contains("DECISION: [REVISE|STAND|MERGE]")
            && !json_prompt.contains("REVISED RESPONSE:")
    );
    assert!(
        text_prompt.contains("DECISION: [REVISE|STAND|MERGE]") && !text_prompt.contains("JSON")
    );
    assert!(text_prompt.starts_with("You previously answered a question."));
    // Its own answer and the others' are named, for fitting into a small context.
    let names: Vec<&str> = revs[0].material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names.len(), 3);
    assert_eq!(names[0], "your original response");
    assert!(names[1..].iter().all(|n| n.starts_with("Response ")), "{names:?}");
    assert!(revs.iter().all(quotes_its_material));
}

#[test]
fn the_schema_accepts_the_decisions_the_reader_reads_and_refuses_others() {
    let schema = revision_schema();
    for decision in ["REVISE", "STAND", "MERGE"] {
        let reply = json_revision(decision, "Use a cache.");
        assert!(schema.read(&reply).is_some(), "{reply}");
        let (p, from) = parse_revision_reply(&reply, &schema);
        assert_eq!((p.decision.as_deref(), from), (Some(decision), Some(ReadFrom::Json)));
    }
    for bad in [
        json!({ "reasoning": "", "decision": "KEEP", "revised_response": "x" }),
        json!({ "reasoning": "", "decision": "revise", "revised_response": "x" }),
        json!({ "reasoning": "", "decision": "REVISE" }),
        json!({ "reasoning": "", "decision": "REVISE", "revised_response": "x", "confidence": 3 }),
        json!({ "reasoning": "", "decision": "REVISE", "revised_response": "x".repeat(REVISED_RESPONSE_MAX_CHARS + 1) }),
    ] {
        assert!(schema.validate(&bad).is_err(), "{bad}");
        assert_ne!(
            parse_revision_reply(&bad.to_string(), &schema).1,
            Some(ReadFrom::Json),
            "{bad}"
        );
    }
}

#[test]
fn a_revision_is_read_from_json_that_fits_else_by_the_text_reader_and_says_which() {
    let schema = revision_schema();
    let (p, from) = parse_revision_reply(
        &format!("<think>hmm</think>\n{}", json_revision("MERGE", "Both, merged.")),
        &schema,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    assert_eq!(
        (p.decision.as_deref(), p.reasoning.as_deref(), p.revised_response.as_deref(), p.unparsed),
        (Some("MERGE"), Some("Response B covered caching."), Some("Both, merged."), None)
    );
    // JSON that does not fit (a field the schema does not have) but states a decision: the
    // text reader reads it as it reads any JSON revision.
    let extra = json!({ "decision": "STAND", "reasoning": "mine holds", "revised_response": "orig", "confidence": 0.9 });
    let (p, from) = parse_revision_reply(&extra.to_string(), &schema);
    assert_eq!((p.decision.as_deref(), from), (Some("STAND"), Some(ReadFrom::Text)));
    // The seed's text format.
    let (p, from) = parse_revision_reply(&revision_text("REVISE", "better"), &schema);
    assert_eq!((p.decision.as_deref(), from), (Some("REVISE"), Some(ReadFrom::Text)));
    // A decision word the debate does not know, and prose stating none: nothing read.
    let (p, from) = parse_revision_reply(&json_revision("KEEP", "x"), &schema);
    assert_eq!((p.decision, from, p.unparsed), (None, None, Some(Unparsed::NoAnswer)));
    let (p, from) = parse_revision_reply("I can't decide whether to revise or stand.", &schema);
    assert_eq!((p.decision, from, p.unparsed), (None, None, Some(Unparsed::Refused)));
    let (p, from) =
        parse_revision_reply(&format!("<think>{}", json_revision("STAND", "x")), &schema);
    assert_eq!((p.decision, from, p.unparsed), (None, None, Some(Unparsed::ReasoningOnly)));
}

#[test]
fn json_revisions_are_stored_with_read_from_and_a_blank_stand_keeps_the_original() {
    let mut d = structured_debate(&["m1", "m2", "m3"], &["m1", "m2", "m3"]);
    let (mut all, revs) = answer_round_one(&mut d);
    let e2 = feed(
        &mut d,
        vec![
            ok(&revs[0], &json_revision("REVISE", "revised m1")),
            ok(&revs[1], &json_revision("STAND", "")),
            ok(&revs[2], "I have read the others; nothing to add."),
        ],
    );
    let revisions = emitted(&e2, "revision_complete").unwrap()["data"]["revisions"].clone();
    assert_eq!(
        revisions
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.get("readFrom").cloned())
            .collect::<Vec<_>>(),
        vec![Some(json!("json")), Some(json!("json")), None]
    );
    assert_eq!(revisions[0]["revisedResponse"], "revised m1");
    assert_eq!(revisions[0]["reasoning"], "Response B covered caching.");
    assert_eq!(
        revisions[1]["revisedResponse"], "original of m2",
        "a STAND left blank repeats the original"
    );
    assert_eq!(revisions[2]["unparsed"], "no_answer");
    let stored = parsed_of(&e2, |r| r.stage_type == "revision");
    assert_eq!((&stored[0]["readFrom"], &stored[1]["readFrom"]), (&json!("json"), &json!("json")));
    assert!(stored[2].get("readFrom").is_none());
    all.extend(e2);
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["revisions"], revisions, "rebuilt from rows as it went out live");
}

#[test]
fn a_debate_on_the_sim_reads_every_revision_and_vote_from_json() {
    let models = ["sim/alpha", "sim/beta", "sim/gamma", "sim/xss-d"];
    let mut d = structured_debate(&models, &models);
    let all = drive_on_sim_text(&mut d);
    assert!(finished(&all).is_some(), "{:?}", failed(&all));
    let read = parsed_of(&all, |r| r.stage_type == "revision" || r.stage_type == "debate_vote");
    assert_eq!(read.len(), 8);
    assert!(read.iter().all(|pd| pd["readFrom"] == "json"), "{read:?}");
    // The sim's debaters lean differently: a debate shows more than one decision.
    let decisions: std::collections::BTreeSet<String> =
        read.iter().filter_map(|pd| pd["decision"].as_str().map(str::to_string)).collect();
    assert!(decisions.len() > 1, "{decisions:?}");
}

#[test]
fn the_sim_answers_only_its_own_schema() {
    use crate::modes::registry::SimAsk;
    fn asking<'a>(
        prompt: &'a str,
        messages: &'a [ChatMessage],
        schema: Option<&'a ReplySchema>,
        hostile: bool,
    ) -> SimAsk<'a> {
        SimAsk { messages, ..sim_ask("sim/alpha", prompt, 7, hostile, schema) }
    }
    let schema = revision_schema();
    let others = [("Response A".to_string(), "another answer".to_string())];
    let prompt = revision_prompt("Q?", "my answer", &others, Some(&schema));
    let messages = [ChatMessage::user(prompt.clone())];
    for hostile in [false, true] {
        let reply = sim_answer(&asking(&prompt, &messages, Some(&schema), hostile)).unwrap();
        let (p, from) = parse_revision_reply(&reply, &schema);
        assert_eq!(from, Some(ReadFrom::Json), "{reply}");
        assert!(p.revised_response.is_some_and(|r| r.starts_with("my answer")), "{reply}");
    }
    let other = vote_schema("debate_vote", &["Response A".to_string()]);
    assert_eq!(sim_answer(&asking(&prompt, &messages, Some(&other), false)), None);
    assert_eq!(sim_answer(&asking(&prompt, &messages, None, false)), None);
}

proptest! {
    /// Whatever JSON the schema allows is read from it, whole.
    #[test]
    fn any_revision_the_schema_allows_is_read_without_loss(seed in any::<u64>()) {
        let schema = revision_schema();
        let mut rng = crate::modes::common::SplitMix64::new(seed);
        let v = schema::sample(&schema.schema, &mut rng, &|f| format!("words for {f}"));
        let (p, from) = parse_revision_reply(&v.to_string(), &schema);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        prop_assert_eq!(p.decision.as_deref(), v["decision"].as_str());
        prop_assert_eq!(p.reasoning.as_deref(), v["reasoning"].as_str());
        prop_assert_eq!(p.revised_response.as_deref(), v["revised_response"].as_str());
        prop_assert_eq!(p.unparsed, None);
    }
}

/// What no report may show: raw values, JSON, stored keys, protocol words, headings.
fn assert_reads_well(md: &str) {
    assert_report_free_of(md, &["VOTE:", "DECISION", "labelToModel", "winnerLabel"]);
}

#[test]
fn the_report_gives_each_decision_the_vote_and_the_winner() {
    let mut d = debate(&["m1", "m2", "m3"]);
    let (mut all, revs) = answer_round_one(&mut d);
    let e2 = feed(
        &mut d,
        vec![
            ok(&revs[0], &revision_text("REVISE", "revised m1 with more words")),
            ok(&revs[1], &revision_text("STAND", "original of m2")),
            err(&revs[2]),
        ],
    );
    let votes = stage_calls(&e2);
    all.extend(e2);
    let l1 = revised_label(&all, "m1");
    let e3 = feed(
        &mut d,
        vec![
            ok(&votes[0], &format!("VOTE: {l1}")),
            ok(&votes[1], &format!("VOTE: {l1}")),
            ok(&votes[2], "I abstain."),
        ],
    );
    all.extend(e3);
    let result = load_result(&rows(&all));
    let md = report(&result);
    assert_contains_all(
        &md,
        &[
            "|---",
            "1 revised, 1 stood by their answer, 0 merged",
            "| m1 | revised | 3 | 5 |",
            "| m2 | stood by its answer | 3 | 3 |",
            "| m3 | no revision (its call failed; its first answer stands) |",
            &format!("| {l1} | m1 | 2 (winner) |"),
            &format!("**Winner:** {l1} (m1), 2 of 2 votes."),
            "- m3: no readable vote",
            "The winner, m1, had revised its first answer",
        ],
    );
    assert_reads_well(&md);
    // A run that stopped early, or nothing at all: no panic, nothing made up.
    assert!(report(&json!({})).is_empty());
    let early = json!({ "round1": [], "revisions": [], "revisionSummary": null, "votes": null, "winner": null });
    assert!(report(&early).is_empty());
}
