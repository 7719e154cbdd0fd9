//! Jury mode: score and verdict parsers on the shapes real models write, the conservative
//! majority rules, and the state machine through the seed's edge cases.

use crate::modes::Fallbacks;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::modes::testkit::{
    all_emitted_data, assert_contains_all, assert_report_free_of, ctx, drive_on_sim_text, emitted,
    err, events, failed, feed, finished, fits_a_closed_think_block, offline_defaults, ok,
    parsed_of, quotes_its_material, rows, sim_ask, stage_calls,
};
use crate::modes::validate;
use crate::modes::Mode;

fn scores(a: i64, b: i64, c: i64, d: i64, e: i64) -> DimensionScores {
    Dims {
        accuracy: Some(a),
        completeness: Some(b),
        clarity: Some(c),
        relevance: Some(d),
        actionability: Some(e),
    }
}

const CARD: &str = "## Juror Assessment\n\n### Scores\n\n| Dimension | Score | Justification |\n|---|:---:|---|\n\
| Accuracy | 8 | fine |\n| Completeness | 7 | ok |\n| Clarity | 9 | clear |\n| Relevance | 8 | on topic |\n\
| Actionability | 6 | thin |\n| **Average** | 7.6 | |\n\n### Deliberation Notes\nGood.\n\n### Verdict\nVERDICT: APPROVE\n\n\
### Recommendations\n1. Add error responses\n2. Include examples\n";

#[test]
fn reads_the_seed_format() {
    assert_eq!(parse_scores(CARD), scores(8, 7, 9, 8, 6));
    assert_eq!(parse_verdict(CARD), Some(Verdict::Approve));
    let a = assess("m", CARD, 5);
    assert_eq!(a.average, Some(7.6));
    assert_eq!(a.recommendations, vec!["Add error responses", "Include examples"]);
    assert!(a.parse_success);
}

#[test]
fn reads_what_real_models_write() {
    let bold = "| **Accuracy** | **8/10** | x |\n|  completeness  |   7   | wide spacing | extra col |\n\
                | Clarity | 7.5 | half |\n**Relevance**: 9/10\nActionability — 4\n\nVERDICT: **revise**";
    assert_eq!(parse_scores(bold), scores(8, 7, 8, 9, 4));
    assert_eq!(parse_verdict(bold), Some(Verdict::Revise));
    let headings = "### Accuracy\nScore: 8/10\nGood.\n### Completeness\nScore: 6/10\n### Clarity\nScore: 7/10\n\
                    ### Relevance\nScore: 9/10\n### Actionability\nScore: 5/10\nOverall I lean REJECT? No: REVISE.";
    assert_eq!(parse_scores(headings), scores(8, 6, 7, 9, 5));
}

#[test]
fn the_models_own_scorecard_wins_over_quoted_content() {
    // The content under evaluation is itself a scorecard, quoted before the model's own.
    let text = format!(
        "The content says:\n| Accuracy | 2 | quoted |\nVERDICT: REJECT\n\nMy assessment:\n{CARD}"
    );
    assert_eq!(parse_scores(&text).accuracy, Some(8));
    assert_eq!(parse_verdict(&text), Some(Verdict::Approve));
    // The template's placeholders are not scores.
    assert_eq!(parse_scores("| Accuracy | [1-10] | [justification] |").accuracy, None);
}

#[test]
fn out_of_range_scores_are_null_and_halves_round() {
    let s = parse_scores(
        "| Accuracy | 11 |\n| Completeness | 0 |\n| Clarity | 6.5 |\n| Relevance | 7.4 |",
    );
    assert_eq!(
        (s.accuracy, s.completeness, s.clarity, s.relevance, s.actionability),
        (None, None, Some(7), Some(7), None)
    );
    assert_eq!(average(&s), Some(7.0));
}

#[test]
fn a_verdict_word_that_is_only_mentioned_is_no_verdict() {
    // The seed's fallback (a verdict word near the end) is gone: a mention is not a verdict.
    assert_eq!(parse_verdict("Long notes...\nIn the end I would approve this."), None);
    assert_eq!(parse_verdict("nothing decisive"), None);
    assert_eq!(parse_verdict("APPROVED is not a verdict word; REVISED neither"), None);
}

proptest! {
    #[test]
    fn parsers_never_panic_and_scores_stay_in_range(text in "\\PC{0,500}") {
        let s = parse_scores(&text);
        for i in 0..5 {
            if let Some(v) = s.get(i) {
                prop_assert!((1..=10).contains(v));
            }
        }
        let _ = parse_verdict(&text);
        let _ = section_items(&text, "recommendation");
    }
}

#[test]
fn majority_ties_are_conservative() {
    use Verdict::*;
    let m = |v: &[Verdict]| majority_verdict(&v.iter().map(|x| Some(*x)).collect::<Vec<_>>()).0;
    assert_eq!(m(&[Approve, Approve, Reject]), Some(Approve));
    assert_eq!(m(&[Approve, Reject]), Some(Revise), "APPROVE-REJECT tie");
    assert_eq!(m(&[Approve, Revise]), Some(Revise), "APPROVE-REVISE tie");
    assert_eq!(m(&[Revise, Reject]), Some(Reject), "REVISE-REJECT tie");
    assert_eq!(m(&[Approve, Revise, Reject]), Some(Revise), "three-way");
    assert_eq!(majority_verdict(&[None, None]).0, None);
}

fn juror(model: &str, s: Option<DimensionScores>, verdict: Option<Verdict>) -> JurorAssessment {
    let scores = s.unwrap_or_default();
    JurorAssessment {
        model: model.into(),
        assessment_text: String::new(),
        average: average(&scores),
        parse_success: (0..5).any(|i| scores.get(i).is_some()),
        scores,
        verdict,
        recommendations: vec![],
        response_time_ms: 1,
        unparsed: None,
        read_from: None,
    }
}

#[test]
fn summaries_aggregate_parsed_jurors_and_infer_missing_verdicts() {
    let s = summarize(
        4,
        &[
            juror("a", Some(scores(8, 7, 9, 8, 7)), Some(Verdict::Approve)),
            juror("b", Some(scores(7, 5, 7, 7, 4)), Some(Verdict::Revise)),
            juror("c", None, Some(Verdict::Approve)),
        ],
    );
    assert_eq!((s.juror_count, s.successful_jurors), (4, 3));
    assert_eq!(s.dimension_averages.accuracy, Some(7.5), "the unparsed juror is left out");
    assert_eq!(s.dimension_ranges.actionability, Some(Range { min: 4, max: 7 }));
    assert_eq!(s.majority_verdict, Some(Verdict::Approve));
    assert_eq!(s.vote_tally, VoteTally { approve: 2, revise: 1, reject: 0 });
    let inferred = summarize(
        2,
        &[
            juror("a", Some(scores(3, 3, 3, 3, 3)), None),
            juror("b", Some(scores(4, 3, 3, 3, 3)), None),
        ],
    );
    assert_eq!(
        (inferred.majority_verdict, inferred.verdict_source.as_str()),
        (Some(Verdict::Reject), "scores")
    );
    let blind = summarize(2, &[juror("a", None, None), juror("b", None, None)]);
    assert_eq!(blind.dimension_averages.accuracy, None);
    // Nothing stated, nothing made up: the panel reached no verdict.
    assert_eq!((blind.majority_verdict, blind.verdict_source.as_str()), (None, "none"));
    assert!(!blind.warnings.is_empty());
    assert!(foreman_prompt("c", None, &[], &blind.vote_tally, blind.majority_verdict)
        .contains("Majority Verdict: none"));
}

fn jury(new_conversation: bool) -> Jury {
    let config = json!({ "content": "GET /users returns users.", "originalQuestion": "Document /users",
                         "jurorModels": ["j1", "j2", "j3"], "foremanModel": "f", "timeoutMs": 120000 });
    Jury::new(&config, ctx("Evaluate these docs", vec![], new_conversation))
        .expect("a configuration that fits")
}

#[test]
fn jurors_are_published_as_each_finishes_and_the_foreman_reports() {
    let mut j = jury(true);
    let mut all = j.start();
    let jurors = stage_calls(&all);
    assert!(jurors[0].messages[0].content.contains("ORIGINAL QUESTION:\nDocument /users\n\nCONTENT UNDER EVALUATION:\nGET /users returns users."));
    let first = j.on_reply(ok(&jurors[1], CARD));
    assert_eq!(events(&first), vec!["juror_complete"], "published before the others finish");
    all.extend(first);
    let rest = feed(
        &mut j,
        vec![ok(&jurors[0], &CARD.replace("APPROVE", "REVISE")), ok(&jurors[2], CARD)],
    );
    let foreman = stage_calls(&rest);
    assert_eq!(foreman.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(), vec!["verdict"]);
    let prompt = &foreman[0].messages[0].content;
    assert!(
        prompt.contains("--- Juror 1 (j2) ---") && prompt.contains("- Majority Verdict: APPROVE")
    );
    assert!(prompt.contains("- APPROVE: 2\n- REVISE: 1\n- REJECT: 0"));
    all.extend(rest);
    let report = "## Jury Verdict Report\n### Final Verdict: APPROVE\nGood.\n### Key Strengths (Consensus)\n- Clear\n- Accurate\n\
                  ### Key Weaknesses (Consensus)\n- No errors documented\n### Improvement Recommendations\n1. Add errors\n\
                  ### Dissenting Opinions\nJuror 2 voted REVISE over missing examples.";
    let done = j.on_reply(ok(&foreman[0], report));
    all.extend(done.clone());
    assert_eq!(finished(&done).as_deref(), Some(report));
    let f = emitted(&done, "verdict_complete").unwrap()["data"].clone();
    assert_eq!(f["finalVerdict"], "APPROVE");
    assert_eq!(f["keyStrengths"], json!(["Clear", "Accurate"]));
    assert_eq!(f["dissentingOpinions"], json!(["Juror 2 voted REVISE over missing examples."]));
    assert_eq!(
        f["dimensionAnalysis"][0],
        json!({ "dimension": "Accuracy", "avgScore": 8.0, "minScore": 8, "maxScore": 8, "consensus": "Strong agreement" })
    );
    assert_eq!(
        events(&all).into_iter().filter(|e| e != "juror_complete").collect::<Vec<_>>(),
        vec![
            "jury_start",
            "present_start",
            "present_complete",
            "deliberation_start",
            "all_jurors_complete",
            "verdict_start",
            "verdict_complete"
        ]
    );
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["foreman"], f);
    assert_eq!(loaded["jurorSummary"], emitted(&all, "all_jurors_complete").unwrap()["data"]);
    assert_eq!(loaded["presentation"], emitted(&all, "present_complete").unwrap()["data"]);
    assert_eq!(loaded["jurors"][0], emitted(&all, "juror_complete").unwrap()["data"]);
    assert_eq!(loaded["majorityVerdict"], "APPROVE");
    assert!(f.get("fallbackFrom").is_none());
    let done = emitted(&all, "verdict_complete").unwrap();
    assert_eq!((&done["partial"], &done["failedModels"]), (&json!(false), &json!([])));
    assert_eq!((&loaded["partial"], &loaded["failedModels"]), (&json!(false), &json!([])));
}

#[test]
fn a_foreman_echoing_the_template_states_no_strength_weakness_or_dissent() {
    // SmolLM2-135M's report as the foreman, recorded: the template's bracketed lines written
    // back under each heading, the dissent's grown by a sentence of its own.
    let echoed = "### Key Strengths\n\n[Strengths identified by 2+ jurors — bulleted list]\n\n\
                  ### Key Weaknesses\n\n[Weaknesses identified by 2+ jurors — bulleted list]\n\n\
                  ### Improvement Recommendations\n\n[Priority list — only include if verdict is REVISE or REJECT]\n\n\
                  ### Dissenting Opinions\n\n[If any juror's verdict differed from majority, summarize their \
                  reasoning here. If unanimous, state \"The jury was unanimous. No other jury has voted the \
                  opposite of this jury.\"]\n\n### DISCUSSION\n";
    assert_eq!(dissent(echoed), Vec::<String>::new());
    for heading in ["strength", "weakness", "recommendation"] {
        assert_eq!(section_items(echoed, heading), Vec::<String>::new(), "{heading}");
    }
    // What a foreman states in prose under the heading is still its dissent.
    let stated = echoed.replace(
        "[If any juror's verdict differed from majority, summarize their reasoning here. If \
         unanimous, state \"The jury was unanimous. No other jury has voted the opposite of this \
         jury.\"]",
        "The jury was unanimous.",
    );
    assert_eq!(dissent(&stated), vec!["The jury was unanimous.".to_string()]);
}

fn jury_with_backup() -> Jury {
    let config = json!({ "content": "GET /users returns users.", "jurorModels": ["j1", "j2", "j3"],
                         "foremanModel": "f", "timeoutMs": 120000, "foremanFallbackModel": "f2" });
    Jury::new(&config, ctx("Evaluate these docs", vec![], false))
        .expect("a configuration that fits")
}

#[test]
fn a_failing_foreman_is_replaced_by_its_backup_and_a_failed_juror_marks_the_run_partial() {
    let mut j = jury_with_backup();
    let mut all = j.start();
    let jurors = stage_calls(&all);
    let e = feed(&mut j, vec![ok(&jurors[0], CARD), err(&jurors[1]), ok(&jurors[2], CARD)]);
    let foreman = stage_calls(&e);
    all.extend(e);
    let e = j.on_reply(err(&foreman[0]));
    assert!(failed(&e).is_none());
    let retry = stage_calls(&e);
    assert_eq!((retry[0].key.as_str(), retry[0].model.as_str()), ("verdict:backup", "f2"));
    assert_eq!((retry[0].stage.as_str(), retry[0].role.as_str()), ("verdict", "foreman"));
    assert_eq!(retry[0].messages, foreman[0].messages);
    all.extend(e);
    let done = j.on_reply(ok(&retry[0], "## Report\nVERDICT: APPROVE"));
    all.extend(done.clone());
    assert_eq!(finished(&done).as_deref(), Some("## Report\nVERDICT: APPROVE"));
    let live = emitted(&done, "verdict_complete").unwrap();
    assert_eq!(
        (&live["data"]["model"], &live["data"]["fallbackFrom"]),
        (&json!("f2"), &json!("f"))
    );
    assert_eq!(live["partial"], true);
    let failed_models: Vec<(String, String)> = live["failedModels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["model"].as_str().unwrap().into(), f["stage"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        failed_models,
        vec![("j2".to_string(), "deliberation".to_string()), ("f".into(), "verdict".into())]
    );
    assert_eq!(live["failedModels"][1]["fallbackTo"], "f2");
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["foreman"], live["data"]);
    assert_eq!(
        (&loaded["partial"], &loaded["failedModels"]),
        (&live["partial"], &live["failedModels"])
    );
}

/// Starts `j` and has every juror answer the seed's card: every effect and the foreman's call.
fn jurors_answer_the_card(j: &mut Jury) -> (Vec<Effect>, Vec<CallSpec>) {
    let mut all = j.start();
    let jurors = stage_calls(&all);
    let e = feed(j, jurors.iter().map(|s| ok(s, CARD)).collect());
    let foreman = stage_calls(&e);
    all.extend(e);
    (all, foreman)
}

#[test]
fn a_failing_backup_foreman_fails_the_run_with_both_named() {
    let mut j = jury_with_backup();
    let (mut all, foreman) = jurors_answer_the_card(&mut j);
    let e = j.on_reply(err(&foreman[0]));
    let retry = stage_calls(&e);
    all.extend(e);
    let out = j.on_reply(err(&retry[0]));
    assert_eq!(failed(&out).as_deref(), Some("The foreman (f) and its backup (f2) failed: down"));
    all.extend(out);
    let loaded = load_result(&rows(&all));
    assert!(loaded["foreman"].is_null());
    assert!(loaded["jurorSummary"].is_object(), "the summary is kept");
    assert_eq!(loaded["partial"], true);
    assert_eq!(loaded["failedModels"].as_array().map(Vec::len), Some(2));
}

#[test]
fn an_unparseable_juror_is_kept_but_left_out_of_the_averages() {
    let mut j = jury(false);
    let jurors = stage_calls(&j.start());
    let e = feed(
        &mut j,
        vec![ok(&jurors[0], CARD), ok(&jurors[1], "It is fine, I suppose."), ok(&jurors[2], CARD)],
    );
    let assessments: Vec<_> = all_emitted_data(&e, "juror_complete");
    assert_eq!(assessments.len(), 3);
    assert_eq!(assessments[1]["parseSuccess"], false);
    let summary = emitted(&e, "all_jurors_complete").unwrap()["data"].clone();
    assert_eq!(summary["dimensionAverages"]["accuracy"], 8.0);
    assert_eq!(summary["successfulJurors"], 3);
}

#[test]
fn fewer_than_two_jurors_or_a_failing_foreman_is_an_error() {
    let mut j = jury(false);
    let jurors = stage_calls(&j.start());
    let e = feed(&mut j, vec![ok(&jurors[0], CARD), err(&jurors[1]), err(&jurors[2])]);
    assert!(failed(&e).is_some_and(|m| m.contains("at least 2")));
    let mut j = jury(false);
    let jurors = stage_calls(&j.start());
    assert_eq!(
        failed(&feed(&mut j, jurors.iter().map(err).collect())).as_deref(),
        Some("All juror evaluations failed.")
    );
    let mut j = jury(true);
    let (all, f) = jurors_answer_the_card(&mut j);
    let out = j.on_reply(err(&f[0]));
    assert!(failed(&out).is_some_and(|m| m.contains("foreman")));
    let stored = rows(&all);
    assert_eq!(
        stored.iter().filter(|r| r.stage_type == "deliberation").count(),
        3,
        "assessments kept"
    );
    assert_eq!(
        stored.iter().filter(|r| r.stage_type == "juror_summary").count(),
        1,
        "summary kept"
    );
}

#[test]
fn validation_follows_the_seed() {
    let d = offline_defaults();
    let body = |cfg: Value| json!({ "question": "Evaluate", "mode": "jury", "modeConfig": cfg });
    let ok = validate(&body(json!({ "content": "x" })), &d).unwrap();
    assert_eq!(ok.config["foremanModel"], "sim/delta");
    let e = |b: Value| validate(&b, &d).unwrap_err();
    assert_eq!(e(json!({ "question": "q", "mode": "jury" })).field, "modeConfig");
    assert_eq!(e(body(json!({ "content": "" }))).message, "Content to evaluate is required");
    assert_eq!(
        e(body(json!({ "content": "x", "jurorModels": ["a", "b"] }))).message,
        "Jury mode requires at least 3 juror models"
    );
    assert_eq!(
        e(body(json!({ "content": "x", "jurorModels": ["1","2","3","4","5","6","7"] }))).message,
        "Maximum 6 juror models allowed"
    );
    let overlap =
        e(body(json!({ "content": "x", "jurorModels": ["a", "b", "c"], "foremanModel": "b" })));
    assert_eq!(
        (overlap.field.as_str(), overlap.message.as_str()),
        ("modeConfig.foremanModel", "Foreman model must not be one of the juror models")
    );
    assert_eq!(
        e(body(json!({ "content": "x", "foremanModel": "" }))).message,
        "Foreman model is required"
    );
    assert_eq!(
        e(body(json!({ "content": "x", "timeoutMs": 300001 }))).field,
        "modeConfig.timeoutMs"
    );
    let backed = Defaults {
        fallback: Fallbacks { foreman: Some("sim/zeta".into()), ..Fallbacks::default() },
        ..d.clone()
    };
    let v = validate(&body(json!({ "content": "x" })), &backed).unwrap();
    assert_eq!(v.config["foremanFallbackModel"], "sim/zeta");
    assert!(validate(&body(json!({ "content": "x" })), &d)
        .unwrap()
        .config
        .get("foremanFallbackModel")
        .is_none());
}

#[test]
fn long_content_is_passed_in_full_and_a_missing_question_is_left_out() {
    let d = offline_defaults();
    let long = "word ".repeat(4_000);
    let v = validate(
        &json!({ "question": "q", "mode": "jury", "modeConfig": { "content": long } }),
        &d,
    )
    .unwrap();
    let mut j = Jury::new(&v.config, ctx("q", vec![], false)).expect("a configuration that fits");
    let prompt = stage_calls(&j.start())[0].messages[0].content.clone();
    assert!(prompt.contains(long.as_str()), "the whole content is sent");
    assert!(!prompt.contains("ORIGINAL QUESTION"), "no question, no block");
    assert!(prompt.contains("and deliver a verdict.\n\nCONTENT UNDER EVALUATION:\n"));
}

// ---- the corpus: real and adversarial replies, each with the parse a careful reader expects --

/// What a careful reader takes from a juror's reply.
struct Expect {
    scores: [Option<i64>; 5],
    verdict: Option<Verdict>,
    /// Why something is missing (None when scores and verdict were both read).
    unparsed: Option<Unparsed>,
}

const NO_SCORES: [Option<i64>; 5] = [None; 5];

fn expect(
    scores: [Option<i64>; 5],
    verdict: Option<Verdict>,
    unparsed: Option<Unparsed>,
) -> Expect {
    Expect { scores, verdict, unparsed }
}

fn check_corpus(cases: &[(&str, &str, Expect)]) {
    for (name, text, want) in cases {
        let a = assess("m", text, 1);
        let got = [
            a.scores.accuracy,
            a.scores.completeness,
            a.scores.clarity,
            a.scores.relevance,
            a.scores.actionability,
        ];
        assert_eq!(got, want.scores, "{name}: scores");
        assert_eq!(a.verdict, want.verdict, "{name}: verdict");
        assert_eq!(a.unparsed, want.unparsed, "{name}: unparsed");
        assert_eq!(a.parse_success, got.iter().any(Option::is_some), "{name}: parseSuccess");
    }
}

/// A corpus case in which a careful reader finds no score, no verdict and no answer.
fn no_answer<'a>(name: &'a str, text: &'a str) -> (&'a str, &'a str, Expect) {
    (name, text, expect(NO_SCORES, None, Some(Unparsed::NoAnswer)))
}

/// Replies of SmolLM2-135M-Instruct (llama.cpp's llama-server) to the seed's juror prompt,
/// verbatim (`corpus/jury/SOURCES.md`). The model rarely follows the format: it echoes the
/// template, drifts off topic or repeats itself to its token cap. A careful reader finds no
/// verdict in any of them, and no score but a last `Accuracy: 0.99` (off the 1-10 scale).
#[test]
fn real_replies_parse_as_a_careful_reader_reads_them() {
    let cases = [
        // A letter to "Your Honor" about a panel of experts.
        no_answer("smollm2-01", include_str!("../corpus/jury/smollm2-01.txt")),
        // The template echoed three times: `[1-10]` is no score, `### Verdict` has no word.
        no_answer("smollm2-02", include_str!("../corpus/jury/smollm2-02.txt")),
        no_answer("smollm2-03", include_str!("../corpus/jury/smollm2-03.txt")),
        // `Accuracy: 1`, then `Accuracy: 0.99` to the end: the last stated value is off the
        // scale, so the dimension is null (and the reply unparsed).
        no_answer("smollm2-04", include_str!("../corpus/jury/smollm2-04.txt")),
        no_answer("smollm2-05", include_str!("../corpus/jury/smollm2-05.txt")),
        no_answer("smollm2-06", include_str!("../corpus/jury/smollm2-06.txt")),
        no_answer("smollm2-07", include_str!("../corpus/jury/smollm2-07.txt")),
        // `| Verdict | [Verdienst] |`: a labelled cell, but no verdict word in it.
        no_answer("smollm2-08", include_str!("../corpus/jury/smollm2-08.txt")),
        // "The content is fundamentally flawed" is the prompt's gloss of REJECT, not a verdict.
        no_answer("smollm2-09", include_str!("../corpus/jury/smollm2-09.txt")),
    ];
    check_corpus(&cases);
}

const FULL: [Option<i64>; 5] = [Some(8), Some(7), Some(9), Some(8), Some(6)];

/// Recorded-style and adversarial replies: refusals and hedges that name verdicts, drafts in
/// reasoning blocks, unclosed traces, JSON, tables, half-followed formats, other languages.
#[test]
fn adversarial_replies_parse_as_a_careful_reader_reads_them() {
    use Unparsed::*;
    use Verdict::*;
    let card = CARD;
    let think_draft = format!(
        "<think>\nFirst pass: | Accuracy | 9 |, VERDICT: APPROVE. But the errors are missing...\n</think>\n\n{}",
        card.replace("VERDICT: APPROVE", "VERDICT: REVISE")
    );
    let think_after = format!("{card}\n<think>Maybe VERDICT: REJECT and | Accuracy | 2 |?</think>");
    let template_opened = format!("Accuracy: 2, VERDICT: REJECT, I think\n</think>\n{card}");
    let unclosed = "<think>\nThe table would be | Accuracy | 8 |, so VERDICT: APPROVE. Let me double-check the";
    let json_fenced = "Here is my assessment.\n```json\n{\"scores\": {\"accuracy\": 8, \"completeness\": 7, \"clarity\": \"9/10\", \"relevance\": 8, \"actionability\": {\"score\": 6, \"why\": \"thin\"}}, \"verdict\": \"approve\"}\n```";
    let json_bare_hedge = "{\"scores\": {\"Accuracy\": 8, \"Completeness\": 7, \"Clarity\": 9, \"Relevance\": 8, \"Actionability\": 6}, \"verdict\": \"I cannot decide\"}";
    let json_list = "```json\n[{\"dimension\": \"Accuracy\", \"score\": 8}, {\"dimension\": \"Completeness\", \"score\": 7}, {\"dimension\": \"Clarity\", \"score\": 9}, {\"dimension\": \"Relevance\", \"score\": 8}, {\"dimension\": \"Actionability\", \"score\": 6}]\n```\nVERDICT: APPROVE";
    let score_last = "| Dimension | Justification | Score |\n|---|---|:-:|\n| Accuracy | right | 8 |\n| Completeness | most | 7 |\n| Clarity | clear | 9 |\n| Relevance | yes | 8 |\n| Actionability | some | 6 |\n\n**Final verdict:** Reject";
    let transposed = "| Accuracy | Completeness | Clarity | Relevance | Actionability |\n|---|---|---|---|---|\n| 8 | 7 | 9 | 8 | 6 |\n\n### Verdict\n\n**REVISE**\n";
    let inline_forms = "Accuracy: 8 out of 10\n**Completeness**: **7**\nClarity - 9/10\nRelevance (8/10): on topic\nActionability: 4/5\n\nVERDICT: REVISE";
    let ranges = "Accuracy: 7-8\nCompleteness: 11/10\nClarity: 0.5\nRelevance: 10\nActionability: -3\nVERDICT: REVISE";
    let scored_refusal =
        format!("{}\nI can't give a verdict on this.", card.replace("VERDICT: APPROVE", ""));
    let cases: Vec<(&str, &str, Expect)> = vec![
        ("the seed's card", card, expect(FULL, Some(Approve), None)),
        // Refusals and hedges that name the verdict words.
        ("cannot approve or reject", "I cannot approve or reject this without the full text.", expect(NO_SCORES, None, Some(Refused))),
        ("would not approve", "I would not approve this in its current form; it needs work.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("neither nor", "Neither approve nor reject: the content is off-topic for the question.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("a mention at the end", "The scores are mixed. Some readers would approve, others reject.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("the template's verdict line", "### Verdict\nVERDICT: [APPROVE|REVISE|REJECT]", expect(NO_SCORES, None, Some(NoAnswer))),
        ("alternatives", "VERDICT: APPROVE or REVISE — I'm torn.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("a negated label", "No verdict: APPROVE would be premature.", expect(NO_SCORES, None, Some(Refused))),
        ("a question", "Verdict: APPROVE? Hard to say.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("a negated value", "Final verdict: not approved.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("a conditional", "If I had to give a verdict: REJECT.", expect(NO_SCORES, None, Some(NoAnswer))),
        ("a refusal that still states one", "I can't verify every fact here.\n\nVERDICT: REVISE", expect(NO_SCORES, Some(Revise), Some(Refused))),
        ("a scored refusal", &scored_refusal, expect(FULL, None, Some(Refused))),
        // Reasoning blocks.
        ("a draft in think", &think_draft, expect(FULL, Some(Revise), None)),
        ("a think block after the answer", &think_after, expect(FULL, Some(Approve), None)),
        ("a template-opened block", &template_opened, expect(FULL, Some(Approve), None)),
        ("an unclosed trace", unclosed, expect(NO_SCORES, None, Some(ReasoningOnly))),
        ("only reasoning", "<think>8, 7, 9, 8, 6: APPROVE</think>", expect(NO_SCORES, None, Some(ReasoningOnly))),
        ("scores only in think", "<think>| Accuracy | 8 |</think>\nVERDICT: APPROVE", expect(NO_SCORES, Some(Approve), Some(NoAnswer))),
        // JSON and tables.
        ("fenced JSON", json_fenced, expect(FULL, Some(Approve), None)),
        ("JSON with a hedged verdict", json_bare_hedge, expect(FULL, None, Some(Refused))),
        ("a JSON list", json_list, expect(FULL, Some(Approve), None)),
        ("the score in the last column", score_last, expect(FULL, Some(Reject), None)),
        ("a transposed table and a heading", transposed, expect(FULL, Some(Revise), None)),
        ("a verdict row", "| Accuracy | 8 |\n| Verdict | REJECT |", expect([Some(8), None, None, None, None], Some(Reject), None)),
        // Half-followed formats.
        ("inline forms", inline_forms, expect([Some(8), Some(7), Some(9), Some(8), None], Some(Revise), None)),
        ("ranges and off-scale numbers", ranges, expect([None, None, None, Some(10), None], Some(Revise), None)),
        ("the template echoed", "| Accuracy | [1-10] | [justification] |\n| **Average** | [avg] | |\nVERDICT: [APPROVE|REVISE|REJECT]", expect(NO_SCORES, None, Some(NoAnswer))),
        ("a heading per dimension", "### Accuracy\nGood facts.\n### Completeness\nScore: 6/10\n### Clarity\nScore: 7/10\nVERDICT: REVISE", expect([None, Some(6), Some(7), None, None], Some(Revise), None)),
        // Other languages.
        ("Spanish", "VEREDICTO: APROBAR", expect(NO_SCORES, Some(Approve), Some(NoAnswer))),
        ("French", "VERDICT : REJETER", expect(NO_SCORES, Some(Reject), Some(NoAnswer))),
        ("German", "URTEIL: ABLEHNEN", expect(NO_SCORES, Some(Reject), Some(NoAnswer))),
        ("a Spanish heading", "### Veredicto final\n\n**REVISAR**", expect(NO_SCORES, Some(Revise), Some(NoAnswer))),
        ("Italian", "Verdetto: approvare", expect(NO_SCORES, Some(Approve), Some(NoAnswer))),
    ];
    check_corpus(&cases);
}

/// Answers to place after a reasoning block: the seed's card and shapes of the corpus.
fn answers() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(CARD.to_string()),
        Just("Accuracy: 8 out of 10\nClarity - 9/10\nVERDICT: REVISE".to_string()),
        Just("```json\n{\"scores\": {\"accuracy\": 3}, \"verdict\": \"reject\"}\n```".to_string()),
        Just("I cannot approve or reject this.".to_string()),
        Just("### Verdict\n\nREJECT\n### Recommendations\n1. Add errors".to_string()),
        "[A-Za-z0-9|:#*\\-\n ]{1,120}",
    ]
}

proptest! {
    /// Whatever a closed `<think>` block holds, what is parsed after it is what the answer
    /// alone gives.
    #[test]
    fn a_closed_think_block_never_changes_the_parse(
        inside in "\\PC{0,300}",
        answer in answers(),
    ) {
        prop_assume!(fits_a_closed_think_block(&inside, &answer));
        let text = format!("<think>{inside}</think>\n{answer}");
        let (with, alone) = (assess("m", &text, 1), assess("m", answer.trim(), 1));
        prop_assert_eq!(&with.scores, &alone.scores);
        prop_assert_eq!(with.verdict, alone.verdict);
        prop_assert_eq!(with.unparsed, alone.unparsed);
        prop_assert_eq!(&with.recommendations, &alone.recommendations);
        prop_assert_eq!(dissent(&text), dissent(answer.trim()));
    }

    /// Issue 33 point 11: text that states no verdict (verdict words mentioned, the template's
    /// `[APPROVE|REVISE|REJECT]`, a draft verdict inside `<think>`, refusals) has none.
    #[test]
    fn text_that_states_no_verdict_reads_as_unparsed(
        text in crate::modes::ranking::tests::unstated(),
        mention in prop::sample::select(vec![
            "", "I would not approve this as it stands.", "Approve or reject? Hard to say.",
            "Neither approve nor reject fits.", "no verdict: APPROVE would be premature.",
            "If I had to give a verdict: REVISE, maybe.", "### Verdict\nAPPROVE\nREVISE\nREJECT",
        ]),
    ) {
        let text = format!("{text}\n{mention}");
        prop_assert_eq!(parse_verdict(&text), None, "{}", text);
    }

    /// No input makes the parsers panic, a draft verdict or a scorecard inside a block
    /// included.
    #[test]
    fn no_input_makes_a_parser_panic(text in "(\\PC|<think>|</think>|\\||VERDICT: |Accuracy: |### Verdict\n|\\{|\\}|```|7|–|-|/|\n){0,120}") {
        let _ = assess("m", &text, 1);
        let _ = dissent(&text);
    }
}

#[test]
fn unparsed_jurors_say_why_live_and_from_rows_and_reasoning_is_not_handed_on() {
    let mut j = jury(false);
    let mut all = j.start();
    let jurors = stage_calls(&all);
    let thinking = format!("<think>Secret draft: VERDICT: REJECT</think>\n{CARD}");
    let e = feed(
        &mut j,
        vec![
            ok(&jurors[0], &thinking),
            ok(&jurors[1], "I cannot approve or reject this without the full text."),
            ok(&jurors[2], "<think>Accuracy 8, so APPROVE, but"),
        ],
    );
    let live: Vec<Value> = all_emitted_data(&e, "juror_complete");
    assert_eq!(
        live.iter().map(|a| a["unparsed"].clone()).collect::<Vec<_>>(),
        vec![json!(null), json!("refused"), json!("reasoning_only")]
    );
    assert_eq!(live[1]["verdict"], json!(null), "a refusal naming verdicts is no verdict");
    assert_eq!(live[0]["assessmentText"], thinking, "the raw text is kept");
    let stored = rows(&e);
    let pd: Vec<Value> = stored
        .iter()
        .filter(|r| r.stage_type == "deliberation")
        .map(|r| r.parsed_data.clone().unwrap())
        .collect();
    assert_eq!(pd[2]["unparsed"], "reasoning_only");
    let summary = emitted(&e, "all_jurors_complete").unwrap()["data"].clone();
    assert_eq!(summary["voteTally"], json!({ "approve": 1, "revise": 0, "reject": 0 }));
    let foreman = stage_calls(&e);
    let prompt = &foreman[0].messages[0].content;
    assert!(!prompt.contains("Secret draft") && !prompt.contains("<think>"), "{prompt}");
    all.extend(e);
    let report = "<think>draft report</think>\n## Jury Verdict Report\n### Final Verdict: APPROVE";
    let done = j.on_reply(ok(&foreman[0], report));
    assert_eq!(
        finished(&done).as_deref(),
        Some("## Jury Verdict Report\n### Final Verdict: APPROVE")
    );
    all.extend(done);
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["jurors"], json!(live));
    assert_eq!(loaded["foreman"]["reportText"], report, "the row keeps the whole reply");
}

// ---- structured replies ---------------------------------------------------------------

/// A jury whose jurors `json` are asked for JSON (their routes take structured output).
fn structured_jury(json: &[&str]) -> Jury {
    let config = json!({ "content": "GET /users returns users.", "originalQuestion": "Document /users",
                         "jurorModels": ["j1", "j2", "j3"], "foremanModel": "f", "timeoutMs": 120000 });
    let mut ctx = ctx("Evaluate these docs", vec![], false);
    ctx.structured = crate::modes::Structured::models(json);
    Jury::new(&config, ctx).expect("a configuration that fits")
}

/// A juror's JSON reply.
fn json_card(scores: [i64; 5], verdict: &str) -> String {
    json!({
        "reasoning": "Accurate but thin on examples.",
        "scores": { "accuracy": scores[0], "completeness": scores[1], "clarity": scores[2],
                    "relevance": scores[3], "actionability": scores[4] },
        "verdict": verdict,
        "recommendations": ["Add examples", "Document errors"],
    })
    .to_string()
}

#[test]
fn jurors_that_take_json_are_asked_for_the_verdict_schema_and_the_others_for_text() {
    let mut j = structured_jury(&["j1", "j3"]);
    let jurors = stage_calls(&j.start());
    assert!(jurors.iter().all(|c| c.schema.as_ref().is_some_and(|s| s.name == "jury_verdict")));
    let schema = jurors[0].schema.clone().unwrap();
    let keys: Vec<&String> = schema.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "scores", "verdict", "recommendations"], "reasoning first");
    assert_eq!(
        schema.schema["properties"]["verdict"]["enum"],
        json!(["APPROVE", "REVISE", "REJECT"])
    );
    let dims = &schema.schema["properties"]["scores"]["properties"];
    let names: Vec<&String> = dims.as_object().unwrap().keys().collect();
    assert_eq!(names, ["accuracy", "completeness", "clarity", "relevance", "actionability"]);
    assert_eq!(
        (dims["clarity"]["minimum"].as_i64(), dims["clarity"]["maximum"].as_i64()),
        (Some(1), Some(10))
    );
    // The JSON prompt keeps the instructions and swaps the format; the text one is the seed's.
    let (json_prompt, text_prompt) =
        (&jurors[0].messages[0].content, &jurors[1].messages[0].content);
    assert_contains_all(
        json_prompt,
        &[
            "5. **Actionability** — Does it provide concrete",
            "- A score (1-10)",
            "- REJECT (average < 4)",
        ],
    );
    assert!(json_prompt.contains("Reply with a single JSON object"));
    assert!(!json_prompt.contains("Format your response as") && !json_prompt.contains("VERDICT:"));
    assert_eq!(
        text_prompt,
        &evaluation_prompt("GET /users returns users.", Some("Document /users"), None),
        "the text form is the seed's, verbatim"
    );
    assert_eq!(&jurors[2].messages[0].content, json_prompt);
    // The content (and the question) are named, for fitting into a small context.
    let named: Vec<&str> = jurors[0].material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(named, ["the content under review", "the original question"]);
    assert!(jurors.iter().all(quotes_its_material));
}

#[test]
fn the_schema_accepts_what_the_reader_reads_and_refuses_what_it_refuses() {
    let schema = juror_schema();
    let good: Value = serde_json::from_str(&json_card([1, 10, 7, 8, 5], "REVISE")).unwrap();
    assert_eq!(schema.validate(&good), Ok(()));
    let a = assess_reply("m", &good.to_string(), 1, &schema);
    assert_eq!((a.verdict, a.scores.clone()), (Some(Verdict::Revise), scores(1, 10, 7, 8, 5)));
    let with = |path: &[&str], v: Value| {
        let mut card = good.clone();
        let mut at = &mut card;
        for p in &path[..path.len() - 1] {
            at = &mut at[*p];
        }
        at[path[path.len() - 1]] = v;
        card
    };
    for bad in [
        // Out of the 1-10 range, or not a whole score: the text reader nulls or rounds these.
        with(&["scores", "accuracy"], json!(0)),
        with(&["scores", "clarity"], json!(11)),
        with(&["scores", "relevance"], json!(7.5)),
        with(&["scores", "relevance"], json!("8/10")),
        // A verdict word outside the seed's three.
        with(&["verdict"], json!("MAYBE")),
        with(&["verdict"], json!("approve")),
        // A dimension outside the five, or one missing.
        with(&["scores", "style"], json!(5)),
        json!({ "reasoning": "", "scores": { "accuracy": 8 }, "verdict": "APPROVE", "recommendations": [] }),
        // Too many recommendations, a reasoning too long to be bounded.
        with(&["recommendations"], json!(["a", "b", "c", "d", "e", "f"])),
        with(&["reasoning"], json!("x".repeat(schema::REASONING_MAX_CHARS + 1))),
    ] {
        assert!(schema.validate(&bad).is_err(), "{bad}");
        assert_ne!(
            assess_reply("m", &bad.to_string(), 1, &schema).read_from,
            Some(ReadFrom::Json),
            "{bad}"
        );
    }
}

#[test]
fn a_juror_is_read_from_json_that_fits_else_by_the_text_readers_and_says_which() {
    let schema = juror_schema();
    // JSON that fits, after a closed reasoning block.
    let a = assess_reply(
        "m",
        &format!("<think>hmm</think>{}", json_card([8, 7, 9, 8, 6], "APPROVE")),
        3,
        &schema,
    );
    assert_eq!(a.read_from, Some(ReadFrom::Json));
    assert_eq!(
        (a.scores.clone(), a.verdict, a.average),
        (scores(8, 7, 9, 8, 6), Some(Verdict::Approve), Some(7.6))
    );
    assert_eq!(a.recommendations, ["Add examples", "Document errors"]);
    assert!(a.parse_success && a.unparsed.is_none());
    // JSON with a score out of range: refused, and the text reader reads it as it reads any
    // JSON (that dimension null, the others kept).
    let a = assess_reply("m", &json_card([8, 7, 11, 8, 6], "REVISE"), 3, &schema);
    assert_eq!(a.read_from, Some(ReadFrom::Text));
    assert_eq!(
        (a.scores.clarity, a.scores.accuracy, a.verdict),
        (None, Some(8), Some(Verdict::Revise))
    );
    // A model that ignored the schema and wrote the seed's format.
    let a = assess_reply("m", CARD, 3, &schema);
    assert_eq!((a.read_from, a.verdict), (Some(ReadFrom::Text), Some(Verdict::Approve)));
    // JSON naming no verdict the jury knows, and prose with no scores: nothing is read from
    // it, so it stays unparsed and says nothing of where it was read from.
    let a = assess_reply("m", r#"{"reasoning": "fine", "verdict": "MAYBE"}"#, 3, &schema);
    assert_eq!((a.read_from, a.verdict, a.parse_success), (None, None, false));
    assert_eq!(a.unparsed, Some(Unparsed::NoAnswer));
    let a = assess_reply("m", "I cannot judge this.", 3, &schema);
    assert_eq!((a.read_from, a.unparsed), (None, Some(Unparsed::Refused)));
    // Only inside an unclosed reasoning block: nothing.
    let a =
        assess_reply("m", &format!("<think>{}", json_card([8, 7, 9, 8, 6], "APPROVE")), 3, &schema);
    assert_eq!((a.read_from, a.unparsed), (None, Some(Unparsed::ReasoningOnly)));
}

#[test]
fn json_jurors_are_stored_with_read_from_and_the_foreman_reads_them_as_fields() {
    let mut j = structured_jury(&["j1", "j2", "j3"]);
    let mut all = j.start();
    let jurors = stage_calls(&all);
    let e = feed(
        &mut j,
        vec![
            ok(&jurors[0], &json_card([8, 7, 9, 8, 6], "APPROVE")),
            ok(&jurors[1], CARD),
            ok(&jurors[2], "Looks fine to me."),
        ],
    );
    let live: Vec<Value> = all_emitted_data(&e, "juror_complete");
    assert_eq!(
        live.iter().map(|a| a.get("readFrom").cloned()).collect::<Vec<_>>(),
        vec![Some(json!("json")), Some(json!("text")), None]
    );
    let pd = parsed_of(&e, |r| r.stage_type == "deliberation");
    assert_eq!(pd[0]["readFrom"], "json");
    assert_eq!(pd[1]["readFrom"], "text");
    assert!(pd[2].get("readFrom").is_none() && pd[2]["unparsed"] == "no_answer");
    let summary = emitted(&e, "all_jurors_complete").unwrap()["data"].clone();
    assert_eq!(summary["voteTally"], json!({ "approve": 2, "revise": 0, "reject": 0 }));
    // The foreman reads the JSON scorecard as fields, and its quoted material is named.
    let foreman = stage_calls(&e);
    assert!(foreman[0].schema.is_none(), "the report is text a person reads");
    let prompt = &foreman[0].messages[0].content;
    assert_contains_all(
        prompt,
        &[
            "--- Juror 1 (j1) ---\nReasoning: Accurate but thin on examples.\nScores:\n  Accuracy: 8\n",
            "Verdict: APPROVE\nRecommendations:\n1. Add examples",
        ],
    );
    assert!(!prompt.contains(r#"{"reasoning""#), "{prompt}");
    let names: Vec<&str> = foreman[0].material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "the content under review",
            "the original question",
            "Juror 1's assessment (j1)",
            "Juror 2's assessment (j2)",
            "Juror 3's assessment (j3)"
        ]
    );
    assert!(foreman[0].material.iter().all(|m| prompt.contains(&*m.text)));
    all.extend(e);
    all.extend(j.on_reply(ok(&foreman[0], "## Jury Verdict Report\n### Final Verdict: APPROVE")));
    // Rebuilt from the rows, the jurors are what went out live.
    let loaded = load_result(&rows(&all));
    assert_eq!(loaded["jurors"], json!(live));
}

#[test]
fn a_jury_on_the_sim_reads_every_juror_from_json_and_verdicts_follow_scores() {
    let config = json!({ "content": "## GET /api/users\nReturns users.", "jurorModels": ["sim/alpha", "sim/beta", "sim/gamma", "sim/xss-d"],
                         "foremanModel": "sim/delta", "timeoutMs": 120000 });
    let mut ctx = ctx("Evaluate", vec![], false);
    ctx.structured = crate::modes::Structured::models([
        "sim/alpha",
        "sim/beta",
        "sim/gamma",
        "sim/xss-d",
        "sim/delta",
    ]);
    let mut j = Jury::new(&config, ctx).unwrap();
    let all = drive_on_sim_text(&mut j);
    assert!(finished(&all).is_some(), "{:?}", failed(&all));
    let jurors = parsed_of(&all, |r| r.stage_type == "deliberation");
    assert_eq!(jurors.len(), 4);
    for pd in &jurors {
        assert_eq!(pd["readFrom"], "json", "{pd}");
        let avg = pd["average"].as_f64().unwrap();
        assert_eq!(pd["verdict"], json!(Verdict::from_average(avg)), "{pd}");
    }
}

#[test]
fn the_sim_answers_only_its_own_schema() {
    use crate::modes::registry::SimAsk;
    let prompt = evaluation_prompt("Some content.", None, Some(&juror_schema()));
    let messages = [ChatMessage::user(prompt.clone())];
    fn asking<'a>(
        prompt: &'a str,
        messages: &'a [ChatMessage],
        schema: Option<&'a ReplySchema>,
        hostile: bool,
    ) -> SimAsk<'a> {
        SimAsk { messages, ..sim_ask("sim/alpha", prompt, 7, hostile, schema) }
    }
    let ask = |schema, hostile| asking(&prompt, &messages, schema, hostile);
    let schema = juror_schema();
    for hostile in [false, true] {
        let reply = sim_answer(&ask(Some(&schema), hostile)).unwrap();
        assert!(schema.read(&reply).is_some(), "{reply}");
        assert_eq!(assess_reply("m", &reply, 1, &schema).read_from, Some(ReadFrom::Json));
    }
    let other = ReplySchema::new("council_ranking", schema::reasoned([]));
    assert_eq!(sim_answer(&ask(Some(&other), false)), None);
    assert_eq!(sim_answer(&ask(None, false)), None);
}

proptest! {
    /// Whatever JSON the schema allows is read from it, whole.
    #[test]
    fn any_reply_the_schema_allows_is_read_without_loss(seed in any::<u64>()) {
        let schema = juror_schema();
        let mut rng = crate::modes::common::SplitMix64::new(seed);
        let v = schema::sample(&schema.schema, &mut rng, &|f| format!("words for {f}"));
        let a = assess_reply("m", &v.to_string(), 1, &schema);
        prop_assert_eq!(a.read_from, Some(ReadFrom::Json));
        for (i, k) in ["accuracy", "completeness", "clarity", "relevance", "actionability"].iter().enumerate() {
            prop_assert_eq!(*a.scores.get(i), v["scores"][*k].as_i64());
        }
        prop_assert_eq!(a.verdict.map(|v| v.as_str()), v["verdict"].as_str());
        let recs: Vec<String> = serde_json::from_value(v["recommendations"].clone()).unwrap();
        prop_assert_eq!(a.recommendations, recs);
        prop_assert!(a.parse_success && a.unparsed.is_none());
    }
}

#[test]
fn the_foremans_prompt_fits_a_small_context_by_cutting_what_it_quotes() {
    // On the CI model (4,096 tokens a slot) the foreman's prompt of long content and long
    // assessments overflowed the context; its quoted material is what the engine cuts.
    let content = "The endpoint returns users, paged by limit and offset. ".repeat(200);
    let config = json!({ "content": content, "jurorModels": ["j1", "j2", "j3"], "foremanModel": "f", "timeoutMs": 120000 });
    let mut ctx = ctx("Evaluate", vec![], false);
    ctx.structured = crate::modes::Structured::models(["j1"]);
    let mut j = Jury::new(&config, ctx).unwrap();
    let jurors = stage_calls(&j.start());
    let long_notes = format!(
        "{CARD}\n\n### Deliberation Notes (more)\n{}",
        "It reads well but lacks examples. ".repeat(150)
    );
    let e = feed(
        &mut j,
        vec![
            ok(&jurors[0], &json_card([8, 7, 9, 8, 6], "APPROVE")),
            ok(&jurors[1], &long_notes),
            ok(&jurors[2], &long_notes.replace("APPROVE", "REVISE")),
        ],
    );
    let foreman = stage_calls(&e);
    let spec = &foreman[0];
    let before = crate::engine::fit::estimate(&spec.messages, 1.0);
    assert!(before > 4_096, "the prompt is too long as it stands: {before}");
    let fitted = crate::engine::fit::fit(&spec.messages, &spec.material, 4_096, 2_000, 1.0);
    assert!(fitted.fits, "{:?}", fitted.cuts);
    let prompt = &fitted.messages[0].content;
    // What was cut is the quoted material; the instructions, the tally and the format stay.
    assert!(fitted.cuts.iter().any(|c| c.what == "the content under review"), "{:?}", fitted.cuts);
    assert_contains_all(
        prompt,
        &[
            "VOTE TALLY:\n- APPROVE: 2\n- REVISE: 1",
            "- Majority Verdict: APPROVE",
            "### Dissenting Opinions",
            "--- Juror 3 (j3) ---",
        ],
    );
}

/// What no report may show: raw values, JSON, stored keys, protocol words, headings.
fn assert_reads_well(md: &str) {
    assert_report_free_of(md, &["parseSuccess", "majorityVerdict", "APPROVE"]);
}

#[test]
fn the_report_gives_the_verdict_the_jurors_scores_and_the_foremans_findings() {
    let mut j = jury(false);
    let mut all = j.start();
    let jurors = stage_calls(&all);
    let e = feed(
        &mut j,
        vec![ok(&jurors[0], CARD), ok(&jurors[1], CARD), ok(&jurors[2], "It is fine, I suppose.")],
    );
    let foreman = stage_calls(&e);
    all.extend(e);
    let text = "## Jury Verdict Report\n### Key Strengths (Consensus)\n- Clear\n\
                ### Key Weaknesses (Consensus)\n- No errors documented\n### Dissenting Opinions\n- Juror 3 gave no scores.";
    all.extend(j.on_reply(ok(&foreman[0], text)));
    let result = load_result(&rows(&all));
    let md = report(&result);
    assert_contains_all(
        &md,
        &[
            "|---",
            "**Verdict:** approve (the jurors' votes: 2 approve, 0 revise, 0 reject)",
            "**Overall average:** 7.6/10",
            "| juror | accuracy | completeness | clarity | relevance | actionability | average | verdict |",
            "| j1 | 8 | 7 | 9 | 8 | 6 | 7.6 | approve |",
            "| j3 | unread | unread | unread | unread | unread | — | unread |",
            "| panel average | 8.0 | 7.0 | 9.0 | 8.0 | 6.0 | 7.6 | approve |",
            "- j3: neither scores nor a verdict could be read; it gave no readable answer",
            "**Foreman's report** by f: final verdict approve.",
            "Key strengths:\n\n- Clear\n",
            "Dissenting opinions:\n\n- Juror 3 gave no scores.\n",
        ],
    );
    assert_reads_well(&md);
    // A run that stopped early, or nothing at all: no panic, nothing made up.
    assert!(report(&json!({})).is_empty());
    let early =
        json!({ "jurors": [], "jurorSummary": null, "foreman": null, "majorityVerdict": null });
    assert!(report(&early).is_empty());
}
