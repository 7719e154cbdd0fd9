//! Fact-Check driven with fake replies, and its parsers on recorded-style and adversarial
//! outputs.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted_data, call_keyed, ctx, emitted, err, events, failed, finished, offline_defaults,
    ok, rows, schema_name, sim_ask, stage_calls, validate_config,
};
use crate::modes::validate;
use crate::modes::Mode;

fn config(content: Option<&str>, checkers: &[&str]) -> Value {
    let mut c = json!({ "generatorModel": "gen", "extractorModel": "ext", "checkerModels": checkers,
                        "reporterModel": "rep", "maxContentLength": 20000, "timeoutMs": 120000,
                        "globalTimeoutMs": 600000, "chairmanFallbackModel": "spare",
                        "facilitatorFallbackModel": "spare2" });
    if let Some(t) = content {
        c["content"] = json!(t);
    }
    c
}

fn mode(content: Option<&str>, checkers: &[&str]) -> FactCheck {
    FactCheck::new(&config(content, checkers), ctx("Fact-check this", vec![], true)).unwrap()
}

const EXTRACTION: &str = "<think>CLAIM 9: a thought, not a claim</think>Here are the claims.\n\n\
**CLAIM 1:** The tower was completed in 1889.\nContext: The tower was completed in 1889 for the fair.\n\
Type: DATE\n\n### Claim #2 - It is 330 metres tall.\n- **Context:** It is 330 metres tall.\n\
- **Type:** statistic\n\nclaim_3. the tower was  COMPLETED in 1889.\nType: DATE\n\n\
CLAIM 4:\nIt was the tallest structure until 1930.\nType: STATISTIC|COMPARISON\nType: COMPARISON\n\n\
EXTRACTION SUMMARY: 4 claims.\nCLAIM 5: after the summary, still a claim\n";

const CHECK: &str = "<think>VERIFICATION 1: DISPUTED</think>\n\
VERIFICATION 1: **VERIFIED**\nEvidence: Completed March 1889.\nThe fair opened in May.\n\
Correction: N/A\nConfidence: High\n\n## Verification #2 — see verdict\nVerdict: DISPUTED\n\
Evidence: It is 330 m including antennas.\nCorrection: It is 300 m without antennas.\n\
Confidence: medium\n\nVERIFICATION 2: VERIFIED\nEvidence: second block ignored\n\n\
VERIFICATION 7: VERIFIED\nVERIFICATION 3: not verified\nConfidence: HIGH\n";

fn claims(n: usize) -> Vec<Claim> {
    (1..=n)
        .map(|i| Claim {
            id: format!("claim_{i}"),
            number: i,
            text: format!("claim {i}"),
            context: None,
            claim_type: None,
        })
        .collect()
}

// ---- parsers -------------------------------------------------------------------------------

#[test]
fn claims_are_read_where_stated_deduplicated_and_renumbered() {
    let e = read_claims(EXTRACTION);
    let texts: Vec<&str> = e.claims.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "The tower was completed in 1889.",
            "It is 330 metres tall.",
            "It was the tallest structure until 1930.",
            "after the summary, still a claim"
        ]
    );
    assert_eq!(e.claims[0].claim_type.as_deref(), Some("DATE"));
    assert_eq!(e.claims[1].claim_type.as_deref(), Some("STATISTIC"));
    assert_eq!(e.claims[1].context.as_deref(), Some("It is 330 metres tall."));
    // The echoed template is no type, and the first occurrence wins.
    assert_eq!(e.claims[2].claim_type, None);
    assert_eq!(e.claims[3].claim_type, None);
    assert_eq!(
        e.claims.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["claim_1", "claim_2", "claim_3", "claim_4"]
    );
    assert!(e.parse_success());
    assert_eq!(
        to_json(&type_breakdown(&e.claims)),
        json!({ "DATE": 1, "STATISTIC": 1, "UNTYPED": 2 })
    );
}

#[test]
fn none_stated_is_not_the_same_as_unreadable() {
    let none = read_claims("**Claims:** None — the text is opinion only.");
    assert!(none.claims.is_empty() && none.none_stated && none.parse_success());
    let prose = read_claims("I think the text says the tower is tall and old.");
    assert!(prose.claims.is_empty() && !prose.none_stated && !prose.parse_success());
}

#[test]
fn verifications_are_read_where_stated_and_never_guessed() {
    let r = read_check(CHECK, &claims(4));
    assert!(r.parse_success);
    let v = &r.verifications;
    assert_eq!((v[0].verdict.as_str(), v[0].confidence.as_str()), ("VERIFIED", "HIGH"));
    assert_eq!(v[0].evidence.as_deref(), Some("Completed March 1889.\nThe fair opened in May."));
    assert_eq!(v[0].correction, None);
    // The heading names no verdict: the Verdict line does; the first block wins.
    assert_eq!((v[1].verdict.as_str(), v[1].confidence.as_str()), ("DISPUTED", "MEDIUM"));
    assert_eq!(v[1].correction.as_deref(), Some("It is 300 m without antennas."));
    // "not verified" states no verdict: unaddressed, never VERIFIED.
    assert_eq!((v[2].verdict.as_str(), v[2].addressed), ("UNVERIFIABLE", false));
    assert_eq!((v[3].verdict.as_str(), v[3].confidence.as_str()), ("UNVERIFIABLE", "LOW"));
    assert!(!v[3].addressed && !v[3].confidence_stated);
}

#[test]
fn hedges_echoes_and_refusals_state_no_verdict() {
    assert_eq!(verdict_of("VERIFIED|DISPUTED|UNVERIFIABLE"), None);
    assert_eq!(verdict_of("verified or disputed"), None);
    assert_eq!(verdict_of("unverified"), None);
    assert_eq!(verdict_of("**Disputed**"), Some("DISPUTED"));
    assert_eq!(verdict_of("UNVERIFIABLE."), Some("UNVERIFIABLE"));
    assert_eq!(confidence_of("high or low"), None);
    let r = read_check("I cannot verify claims about real events.", &claims(2));
    assert!(!r.parse_success);
    assert!(r.verifications.iter().all(|v| !v.addressed && v.verdict == "UNVERIFIABLE"));
    // A correction on a verified claim is dropped.
    let r = read_check("VERIFICATION 1: VERIFIED\nCorrection: should be 1890", &claims(1));
    assert_eq!(r.verifications[0].correction, None);
    assert!(!r.verifications[0].confidence_stated);
}

#[test]
fn the_score_is_the_last_line_naming_it_and_never_the_template() {
    assert_eq!(read_score("## Overall Reliability Score: 85/100\n"), Some(85));
    assert_eq!(
        read_score("Reliability Score: 40%\n\n**Overall reliability score:** 72.6"),
        Some(73)
    );
    assert_eq!(read_score("## Overall Reliability Score: <0-100>"), None);
    assert_eq!(read_score("## Overall Reliability Score: N/A"), None);
    assert_eq!(read_score("Reliability score: 140"), Some(100));
    assert_eq!(read_score("<think>Reliability Score: 10</think>no score here"), None);
}

fn v(verdict: &str, confidence: &str, correction: Option<&str>) -> Verification {
    Verification {
        claim_id: "claim_1".into(),
        verdict: verdict.into(),
        evidence: None,
        correction: correction.map(str::to_string),
        confidence: confidence.into(),
        confidence_stated: true,
        addressed: true,
    }
}

#[test]
fn consensus_follows_the_tie_rules() {
    let c = |vs: Vec<Verification>| {
        let refs: Vec<&Verification> = vs.iter().collect();
        consensus_of("claim_1", &refs)
    };
    let k = c(vec![
        v("VERIFIED", "HIGH", None),
        v("VERIFIED", "LOW", None),
        v("DISPUTED", "HIGH", Some("x")),
    ]);
    assert_eq!((k.verdict.as_str(), k.agreement_rate, k.tie_rule.clone()), ("VERIFIED", 67, None));
    assert_eq!(k.consensus_confidence, "LOW", "ties toward the lower");
    assert!(k.split);
    let k = c(vec![v("VERIFIED", "HIGH", None), v("DISPUTED", "HIGH", Some("It is 300 m"))]);
    assert_eq!((k.verdict.as_str(), k.consensus_confidence.as_str()), ("DISPUTED", "LOW"));
    assert_eq!(k.tie_rule.as_deref(), Some("verified=disputed→DISPUTED"));
    assert_eq!(k.correction.as_deref(), Some("It is 300 m"));
    let k = c(vec![v("VERIFIED", "HIGH", None), v("UNVERIFIABLE", "HIGH", None)]);
    assert_eq!(k.verdict, "VERIFIED");
    let k = c(vec![v("DISPUTED", "HIGH", None), v("UNVERIFIABLE", "HIGH", None)]);
    assert_eq!((k.verdict.as_str(), k.correction.clone()), ("DISPUTED", None));
    let k = c(vec![
        v("VERIFIED", "HIGH", None),
        v("UNVERIFIABLE", "HIGH", None),
        v("DISPUTED", "HIGH", None),
    ]);
    assert_eq!((k.verdict.as_str(), k.agreement_rate), ("DISPUTED", 33));
    assert_eq!(k.tie_rule.as_deref(), Some("three-way→DISPUTED"));
    let k = c(vec![
        v("DISPUTED", "HIGH", Some("b")),
        v("DISPUTED", "HIGH", Some("a  A")),
        v("DISPUTED", "MEDIUM", Some("aa")),
    ]);
    assert_eq!((k.correction.as_deref(), k.consensus_confidence.as_str()), (Some("a  A"), "HIGH"));
    assert!(!k.split);
}

proptest! {
    /// Whatever a reply says, every claim gets exactly one verification, unaddressed ones are
    /// UNVERIFIABLE/LOW, corrections only on DISPUTED, and the consensus is one of the verdicts
    /// with an agreement in 0-100.
    #[test]
    fn parsers_never_invent(text in "(?s)(VERIFICATION [0-9]: (VERIFIED|DISPUTED|maybe)\n(Correction|Confidence|Evidence): [a-zA-Z/ ]{0,12}\n|CLAIM [0-9]: [a-z ]{0,10}\n|.{0,20}\n){0,12}") {
        let cs = claims(3);
        let r = read_check(&text, &cs);
        prop_assert_eq!(r.verifications.len(), 3);
        for x in &r.verifications {
            prop_assert!(VERDICTS.contains(&x.verdict.as_str()));
            prop_assert!(x.addressed || (x.verdict == "UNVERIFIABLE" && x.confidence == "LOW"));
            prop_assert!(x.correction.is_none() || x.verdict == "DISPUTED");
        }
        prop_assert_eq!(r.parse_success, r.verifications.iter().any(|x| x.addressed));
        let e = read_claims(&text);
        for (i, c) in e.claims.iter().enumerate() {
            prop_assert_eq!(c.number, i + 1);
            prop_assert!(!c.text.is_empty());
        }
        let check = Check { checker_index: 0, model: "m".into(), summary: None,
            verifications: r.verifications.clone(), parse_success: true, response_time_ms: 1,
            failed: false, error: None, read_from: None };
        let (list, counts) = consensus(&cs, &[check]);
        prop_assert_eq!(counts.total, 3);
        prop_assert_eq!(counts.verified + counts.disputed + counts.unverifiable, 3);
        for k in list {
            prop_assert!(k.agreement_rate <= 100);
        }
        let s = read_score(&text);
        prop_assert!(s.is_none_or(|s| s <= 100));
    }
}

// ---- validation ----------------------------------------------------------------------------

fn field_of(cfg: Value) -> String {
    validate_config("fact_check", cfg).unwrap_err().field
}

#[test]
fn every_rule_is_a_400_naming_its_field() {
    assert_eq!(field_of(json!({ "checkerModels": ["a", "a"] })), "modeConfig.checkerModels");
    assert_eq!(field_of(json!({ "checkerModels": [] })), "modeConfig.checkerModels");
    assert_eq!(
        field_of(json!({ "checkerModels": ["a", "b", "c", "d", "e"] })),
        "modeConfig.checkerModels"
    );
    assert_eq!(field_of(json!({ "maxContentLength": 499 })), "modeConfig.maxContentLength");
    assert_eq!(field_of(json!({ "maxContentLength": 50001 })), "modeConfig.maxContentLength");
    assert_eq!(field_of(json!({ "timeoutMs": 9999 })), "modeConfig.timeoutMs");
    assert_eq!(field_of(json!({ "timeoutMs": 180001 })), "modeConfig.timeoutMs");
    assert_eq!(field_of(json!({ "globalTimeoutMs": 59999 })), "modeConfig.globalTimeoutMs");
    assert_eq!(field_of(json!({ "globalTimeoutMs": 1800001 })), "modeConfig.globalTimeoutMs");
    assert_eq!(field_of(json!({ "content": "   " })), "modeConfig.content");
    assert_eq!(field_of(json!({ "extractorModel": " " })), "modeConfig.extractorModel");
    assert_eq!(field_of(json!({ "bogus": 1 })), "modeConfig.bogus");
    let ok =
        validate(&json!({ "mode": "fact_check", "question": "q" }), &offline_defaults()).unwrap();
    assert_eq!(ok.config["checkerModels"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
    assert_eq!(ok.config["maxContentLength"], 20000);
    assert_eq!(ok.config["globalTimeoutMs"], 600000);
}

// ---- the state machine ---------------------------------------------------------------------

#[test]
fn a_generated_run_goes_generate_extract_verify_consensus_report() {
    let mut m = mode(None, &["gen", "c2"]);
    let start = m.start();
    let cfg = emitted(&start, "factcheck_start").unwrap()["config"].clone();
    assert_eq!(cfg["contentSource"], "generated");
    assert!(cfg["biasWarning"].is_string(), "the generator also checks");
    let gen = stage_calls(&start);
    assert_eq!(gen[0].key, "generate");
    let out = m.on_reply(ok(&gen[0], "The tower was completed in 1889."));
    assert_eq!(events(&out), ["generate_complete", "extract_start"]);
    let ext = stage_calls(&out);
    let out = m.on_reply(ok(&ext[0], "CLAIM 1: The tower was completed in 1889.\nType: DATE"));
    assert_eq!(events(&out), ["extract_complete", "verify_start"]);
    let checks = stage_calls(&out);
    assert_eq!(checks.len(), 2);
    let a =
        m.on_reply(ok(&checks[1], "VERIFICATION 1: DISPUTED\nCorrection: 1887\nConfidence: HIGH"));
    assert_eq!(events(&a), ["checker_complete"]);
    let b = m.on_reply(ok(&checks[0], "VERIFICATION 1: VERIFIED\nConfidence: HIGH"));
    assert_eq!(events(&b), ["checker_complete", "all_checkers_complete", "report_start"]);
    let all = emitted(&b, "all_checkers_complete").unwrap();
    assert_eq!(all["data"]["consensus"][0]["verdict"], "DISPUTED");
    assert_eq!(all["data"]["consensus"][0]["split"], true);
    let rep = stage_calls(&b);
    let out = m.on_reply(ok(&rep[0], "## Overall Reliability Score: 55\nMixed."));
    let done = emitted(&out, "report_complete").unwrap();
    assert_eq!(done["data"]["reliabilityScore"], 55);
    assert_eq!(done["partial"], false);
    assert!(finished(&out).unwrap().contains("Mixed"));
    let mut all_rows = rows(&start);
    for o in [&a, &b, &out] {
        all_rows.extend(rows(o));
    }
    all_rows.sort_by_key(|r| r.stage_order);
    let result = load_result(&all_rows);
    assert_eq!(result["consensus"], all["data"]["consensus"]);
    assert_eq!(result["report"], done["data"]);
}

#[test]
fn the_run_is_stored_as_it_goes_and_reloads_as_it_ran() {
    let mut m = mode(Some("The tower was completed in 1889. It is 330 m tall."), &["a", "b"]);
    let mut all = m.start();
    let ext = stage_calls(&all);
    assert_eq!(ext[0].key, "extract");
    let out = m.on_reply(ok(&ext[0], "CLAIM 1: completed in 1889\nCLAIM 2: 330 m tall"));
    all.extend(out.clone());
    let checks = stage_calls(&out);
    let out = m.on_reply(err(&checks[0]));
    all.extend(out.clone());
    let out = m.on_reply(ok(&checks[1], "VERIFICATION 1: VERIFIED\nVERIFICATION 2: DISPUTED"));
    all.extend(out.clone());
    let rep = stage_calls(&out);
    let out = m.on_reply(ok(&rep[0], "Reliability Score: 60"));
    all.extend(out.clone());
    let mut stored = rows(&all);
    stored.sort_by_key(|r| r.stage_order);
    let result = load_result(&stored);
    let live_checks: Vec<Value> = all_emitted_data(&all, "checker_complete");
    let mut sorted = live_checks.clone();
    sorted.sort_by_key(|c| c["checkerIndex"].as_u64());
    assert_eq!(result["checks"], json!(sorted));
    assert_eq!(result["contentSource"], "user_provided");
    assert_eq!(result["claims"].as_array().unwrap().len(), 2);
    let done = emitted(&all, "report_complete").unwrap();
    assert_eq!(result["report"], done["data"]);
    assert_eq!(result["partial"], true);
    assert_eq!(result["failedModels"], done["failedModels"]);
    assert_eq!(result["failedModels"][0]["model"], "a");
}

#[test]
fn no_claims_means_no_checks_and_a_server_note() {
    let mut m = mode(Some("I love it."), &["a"]);
    let ext = stage_calls(&m.start());
    let out = m.on_reply(ok(&ext[0], "CLAIMS: NONE"));
    assert!(stage_calls(&out).is_empty());
    let done = emitted(&out, "report_complete").unwrap();
    assert_eq!(done["data"]["reliabilityScore"], Value::Null);
    assert!(finished(&out).unwrap().contains("No checkable claims"));
}

#[test]
fn failures_fail_where_the_spec_says_and_keep_the_rest() {
    // The generator has no backup.
    let mut m = mode(None, &["a"]);
    let gen = stage_calls(&m.start());
    assert!(failed(&m.on_reply(err(&gen[0]))).unwrap().contains("generator"));
    // The extractor falls back, then fails.
    let mut m = mode(Some("x 1"), &["a"]);
    let ext = stage_calls(&m.start());
    let out = m.on_reply(err(&ext[0]));
    let backup = stage_calls(&out);
    assert_eq!(backup[0].model, "spare2");
    assert!(failed(&m.on_reply(err(&backup[0]))).unwrap().contains("extractor"));
    // No usable checker: fail, claims kept.
    let mut m = mode(Some("x 1"), &["a", "b"]);
    let ext = stage_calls(&m.start());
    let checks = stage_calls(&m.on_reply(ok(&ext[0], "CLAIM 1: x is 1")));
    m.on_reply(err(&checks[0]));
    let out = m.on_reply(ok(&checks[1], "No idea."));
    assert_eq!(
        failed(&out).unwrap(),
        "None of the 2 checkers gave a usable check (each failed or addressed no claim); the \
         claim is kept."
    );
    // Reporter and its backup fail: the server's table, fallback, no score.
    let mut m = mode(Some("x 1"), &["a"]);
    let ext = stage_calls(&m.start());
    let checks = stage_calls(&m.on_reply(ok(&ext[0], "CLAIM 1: x is 1")));
    let rep =
        stage_calls(&m.on_reply(ok(&checks[0], "VERIFICATION 1: DISPUTED\nCorrection: x is 2")));
    let backup = stage_calls(&m.on_reply(err(&rep[0])));
    let out = m.on_reply(err(&backup[0]));
    let done = emitted(&out, "report_complete").unwrap();
    assert_eq!(
        (done["data"]["fallback"].clone(), done["partial"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(done["data"]["reliabilityScore"], Value::Null);
    let answer = finished(&out).unwrap();
    assert!(answer.contains("| 1. x is 1 | DISPUTED | 100% | x is 2 |"), "{answer}");
}

#[test]
fn the_report_says_how_long_its_reporter_took_backup_or_not() {
    let to_report = |m: &mut FactCheck| {
        let ext = stage_calls(&m.start());
        let checks = stage_calls(&m.on_reply(ok(&ext[0], "CLAIM 1: x is 1")));
        stage_calls(&m.on_reply(ok(&checks[0], "VERIFICATION 1: VERIFIED")))
    };
    // The reporter answers: its time is in the event and the row alike.
    let mut m = mode(Some("x 1"), &["a"]);
    let rep = to_report(&mut m);
    let out =
        m.on_reply(CallReply { response_time_ms: 42, ..ok(&rep[0], "Reliability Score: 70") });
    let done = emitted(&out, "report_complete").unwrap();
    assert_eq!(done["data"]["model"], "rep");
    assert_eq!(done["data"]["responseTimeMs"], 42);
    assert!(done["data"].get("fallbackFrom").is_none());
    let row = rows(&out).into_iter().find(|r| r.stage_type == "report").unwrap();
    assert_eq!(row.response_time_ms, Some(42));
    assert_eq!(load_result(&rows(&out))["report"], done["data"]);
    // Its backup answers: the backup's time, and whom it stood in for.
    let mut m = mode(Some("x 1"), &["a"]);
    let rep = to_report(&mut m);
    let backup = stage_calls(&m.on_reply(err(&rep[0])));
    let out =
        m.on_reply(CallReply { response_time_ms: 7, ..ok(&backup[0], "Reliability Score: 70") });
    let done = emitted(&out, "report_complete").unwrap();
    assert_eq!(done["data"]["responseTimeMs"], 7);
    assert_eq!(done["data"]["fallbackFrom"], "rep");
}

#[test]
fn the_global_timeout_lets_the_stage_finish_then_fails_or_reports() {
    let mut m = mode(Some("x 1"), &["a"]);
    let ext = stage_calls(&m.start());
    m.on_timer("global");
    let out = m.on_reply(ok(&ext[0], "CLAIM 1: x is 1"));
    assert!(emitted(&out, "extract_complete").is_some());
    assert!(failed(&out).unwrap().contains("time limit"));
    let mut m = mode(Some("x 1"), &["a"]);
    let ext = stage_calls(&m.start());
    let checks = stage_calls(&m.on_reply(ok(&ext[0], "CLAIM 1: x is 1")));
    m.on_timer("global");
    let out = m.on_reply(ok(&checks[0], "VERIFICATION 1: VERIFIED"));
    assert!(failed(&out).is_none());
    assert_eq!(stage_calls(&out)[0].key, "report");
}

#[test]
fn long_content_is_cut_with_a_note() {
    let long = "The year was 1900. ".repeat(100);
    let mut cfg = config(Some(&long), &["a"]);
    cfg["maxContentLength"] = json!(500);
    let mut m = FactCheck::new(&cfg, ctx("q", vec![], false)).unwrap();
    let ext = stage_calls(&m.start());
    assert!(ext[0].messages[0].content.len() < 1200);
    let out = m.on_reply(ok(&ext[0], "CLAIMS: NONE"));
    assert_eq!(emitted(&out, "extract_complete").unwrap()["data"]["truncated"], true);
    assert!(emitted(&out, "report_complete").unwrap()["data"]["summary"]["note"].is_string());
}

#[test]
fn sim_answers_follow_the_format_and_the_messy_ones_do_not_mislead() {
    let content = "The tower was completed in 1889. It is 330 metres tall. It is lovely.";
    let ask = |prompt: &str, malformed: bool| {
        let s = SimAsk { malformed, ..sim_ask("sim/beta", prompt, 7, true, None) };
        sim_answer(&s).unwrap()
    };
    let e = read_claims(&ask(&extract_prompt(content, None), false));
    assert_eq!(e.claims.len(), 2);
    assert!(!read_claims(&ask(&extract_prompt(content, None), true)).parse_success());
    let r = read_check(&ask(&verify_prompt(content, &e.claims, None), false), &e.claims);
    assert!(r.parse_success && r.verifications.iter().all(|v| v.addressed));
    assert!(
        !read_check(&ask(&verify_prompt(content, &e.claims, None), true), &e.claims).parse_success
    );
    let (k, counts) = consensus(&e.claims, &[]);
    let report = ask(&report_prompt(content, &e.claims, &k, &[], &counts), false);
    assert!(read_score(&report).is_some());
    assert!(report.contains("<script") || report.contains("<img"));
}

// ---- structured replies ---------------------------------------------------------------------

/// A run on `content` whose models `json` are asked for JSON (their routes take structured
/// output).
fn structured(content: &str, checkers: &[&str], json: &[&str]) -> FactCheck {
    let mut ctx = ctx("Fact-check this", vec![], true);
    ctx.structured = crate::modes::Structured::models(json);
    FactCheck::new(&config(Some(content), checkers), ctx).unwrap()
}

fn judgement(n: u64, verdict: &str, correction: &str, confidence: &str) -> Value {
    json!({ "claim": n, "evidence": format!("evidence {n}"), "verdict": verdict,
            "correction": correction, "confidence": confidence })
}

fn check_reply(items: Vec<Value>) -> String {
    json!({ "reasoning": "weighed each", "verifications": items }).to_string()
}

#[test]
fn the_schemas_take_what_the_readers_take_and_refuse_the_rest() {
    let c = claims_schema();
    assert_eq!(c.name, "fact_check_claims");
    let keys: Vec<&String> = c.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "claims"]);
    let claim = |t: &str| json!({ "claim": "It is 330 m tall.", "context": "It is 330 m tall.", "type": t });
    assert!(c
        .validate(&json!({ "reasoning": "", "claims": [claim("STATISTIC"), claim("DATE")] }))
        .is_ok());
    assert!(c.validate(&json!({ "reasoning": "none here", "claims": [] })).is_ok(), "no claims");
    assert!(
        c.validate(&json!({ "reasoning": "", "claims": [claim("OPINION")] })).is_err(),
        "a type outside the six"
    );
    assert!(c.validate(&json!({ "reasoning": "", "claims": [claim("statistic")] })).is_err());
    let many: Vec<Value> = (0..=MAX_CLAIMS).map(|_| claim("DATE")).collect();
    assert!(c.validate(&json!({ "reasoning": "", "claims": many })).is_err());

    let v = verifications_schema(3);
    assert_eq!(v.name, "fact_check_verifications");
    let item = &v.schema["properties"]["verifications"];
    assert_eq!((item["minItems"].as_u64(), item["maxItems"].as_u64()), (Some(3), Some(3)));
    let order: Vec<&String> = item["items"]["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        order,
        ["claim", "evidence", "verdict", "correction", "confidence"],
        "evidence before the verdict"
    );
    let fits =
        |items: Vec<Value>| v.validate(&serde_json::from_str(&check_reply(items)).unwrap()).is_ok();
    assert!(fits(vec![
        judgement(1, "VERIFIED", "N/A", "HIGH"),
        judgement(2, "DISPUTED", "300 m", "LOW"),
        judgement(3, "UNVERIFIABLE", "N/A", "MEDIUM")
    ]));
    // A claim outside the run, a verdict or confidence outside the words, too few or too many.
    assert!(!fits(vec![
        judgement(1, "VERIFIED", "N/A", "HIGH"),
        judgement(2, "VERIFIED", "N/A", "HIGH"),
        judgement(4, "VERIFIED", "N/A", "HIGH")
    ]));
    assert!(!fits(vec![
        judgement(0, "VERIFIED", "N/A", "HIGH"),
        judgement(2, "VERIFIED", "N/A", "HIGH"),
        judgement(3, "VERIFIED", "N/A", "HIGH")
    ]));
    assert!(!fits(vec![
        judgement(1, "TRUE", "N/A", "HIGH"),
        judgement(2, "VERIFIED", "N/A", "HIGH"),
        judgement(3, "VERIFIED", "N/A", "HIGH")
    ]));
    assert!(!fits(vec![
        judgement(1, "VERIFIED", "N/A", "SURE"),
        judgement(2, "VERIFIED", "N/A", "HIGH"),
        judgement(3, "VERIFIED", "N/A", "HIGH")
    ]));
    assert!(!fits(vec![
        judgement(1, "VERIFIED", "N/A", "HIGH"),
        judgement(2, "VERIFIED", "N/A", "HIGH")
    ]));
}

#[test]
fn models_that_take_json_are_asked_for_it_and_the_content_is_named() {
    let content = "The tower was completed in 1889. It is 330 metres tall.";
    let mut m = structured(content, &["a", "b"], &["ext", "a"]);
    let ext = stage_calls(&m.start());
    assert_eq!(schema_name(&ext[0]), Some("fact_check_claims"));
    let p = &ext[0].messages[0].content;
    assert!(
        p.contains("Leave out opinions, hedges, definitions and predictions.")
            && p.contains(content)
    );
    assert!(
        p.contains("Reply with a single JSON object") && !p.contains("CLAIM 1: <the claim"),
        "{p}"
    );
    assert!(p.find("\"reasoning\"").unwrap() < p.find("\"claims\"").unwrap());
    assert_eq!(ext[0].material.len(), 1);
    assert!(p.contains(&*ext[0].material[0].text));
    let reply = json!({ "reasoning": "two figures", "claims": [
        { "claim": "The tower was completed in 1889.", "context": "The tower was completed in 1889.", "type": "DATE" },
        { "claim": "It is 330 metres tall.", "context": "", "type": "STATISTIC" } ] });
    let out = m.on_reply(ok(&ext[0], &reply.to_string()));
    let checks = stage_calls(&out);
    assert!(checks
        .iter()
        .all(|c| c.schema.as_ref().is_some_and(|s| s.name == "fact_check_verifications")));
    let (json_p, text_p) = (&checks[0].messages[0].content, &checks[1].messages[0].content);
    assert!(
        json_p.contains("CLAIM 2: It is 330 metres tall.")
            && json_p.contains("Reply with a single JSON object")
    );
    assert!(!json_p.contains("VERIFICATION 1: VERIFIED|DISPUTED|UNVERIFIABLE"));
    assert!(
        text_p.contains("VERIFICATION 1: VERIFIED|DISPUTED|UNVERIFIABLE")
            && !text_p.contains("JSON")
    );
    assert!(checks
        .iter()
        .all(|c| c.material.len() == 1 && c.messages[0].content.contains(&*c.material[0].text)));
}

#[test]
fn replies_are_read_from_json_when_it_fits_else_from_text_and_say_which() {
    let content = "The tower was completed in 1889. It is 330 metres tall. It opened in 1889.";
    let mut m = structured(content, &["a", "b", "c", "d"], &["ext", "a", "b", "c", "d"]);
    let mut all = m.start();
    let ext = stage_calls(&all);
    // A repeated claim keeps its first wording (as in text); an empty one is no claim.
    let reply = json!({ "reasoning": "three figures", "claims": [
        { "claim": "The tower was completed in 1889.", "context": "The tower was completed in 1889.", "type": "DATE" },
        { "claim": "the tower was  COMPLETED in 1889.", "context": "", "type": "DATE" },
        { "claim": "  ", "context": "", "type": "DATE" },
        { "claim": "It is 330 metres tall.", "context": "", "type": "STATISTIC" } ] });
    let out = m.on_reply(ok(&ext[0], &reply.to_string()));
    all.extend(out.clone());
    let extracted = emitted(&out, "extract_complete").unwrap()["data"].clone();
    assert_eq!(extracted["readFrom"], "json");
    let texts: Vec<&str> = extracted["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["The tower was completed in 1889.", "It is 330 metres tall."]);
    assert_eq!(
        (&extracted["claims"][1]["context"], &extracted["claims"][1]["id"]),
        (&Value::Null, &json!("claim_2"))
    );
    let checks = stage_calls(&out);
    let replies = vec![
        // Fits: a correction on a verified claim is dropped, as in text.
        ok(&checks[0], &check_reply(vec![judgement(1, "VERIFIED", "should be 1887", "HIGH"), judgement(2, "DISPUTED", "300 m without antennas", "MEDIUM")])),
        // A claim judged twice keeps its first judgement; the other is unaddressed.
        ok(&checks[1], &check_reply(vec![judgement(1, "DISPUTED", "N/A", "LOW"), judgement(1, "VERIFIED", "N/A", "HIGH")])),
        // Does not fit (a verdict word outside the three): its text states nothing.
        ok(&checks[2], &check_reply(vec![judgement(1, "TRUE", "N/A", "HIGH"), judgement(2, "TRUE", "N/A", "HIGH")])),
        // A model that ignored the schema and wrote the text blocks.
        ok(&checks[3], "VERIFICATION 1: VERIFIED\nConfidence: HIGH\n\nVERIFICATION 2: VERIFIED\nConfidence: LOW"),
    ];
    let mut live = Vec::new();
    for r in replies {
        let out = m.on_reply(r);
        live.push(emitted(&out, "checker_complete").unwrap()["data"].clone());
        all.extend(out);
    }
    assert_eq!(live[0]["readFrom"], "json");
    assert_eq!(live[0]["verifications"][0]["correction"], Value::Null);
    assert_eq!(live[0]["verifications"][1]["correction"], "300 m without antennas");
    assert_eq!(
        (&live[0]["verifications"][1]["evidence"], &live[0]["verifications"][1]["confidence"]),
        (&json!("evidence 2"), &json!("MEDIUM"))
    );
    assert_eq!(live[1]["readFrom"], "json");
    assert_eq!(live[1]["verifications"][0]["verdict"], "DISPUTED");
    assert_eq!(
        (&live[1]["verifications"][1]["addressed"], &live[1]["verifications"][1]["verdict"]),
        (&json!(false), &json!("UNVERIFIABLE"))
    );
    assert_eq!(live[2]["parseSuccess"], false);
    assert!(live[2].get("readFrom").is_none(), "{}", live[2]);
    assert_eq!(live[3]["readFrom"], "text");
    assert_eq!(emitted(&all, "all_checkers_complete").unwrap()["data"]["usableCheckers"], 3);
    // The report quotes the content and the verdicts, each named for fitting.
    let rep = call_keyed(&all, "report");
    assert!(rep.schema.is_none(), "the report is text a person reads");
    assert_eq!(rep.material.len(), 2);
    assert!(rep.material.iter().all(|x| rep.messages[0].content.contains(&*x.text)));
    // Rows: one readFrom per reply read; the reloaded result is what went out.
    let stored = rows(&all);
    let from: Vec<(&str, Option<&Value>)> = stored
        .iter()
        .map(|r| (r.stage_type.as_str(), r.parsed_data.as_ref().and_then(|d| d.get("readFrom"))))
        .collect();
    assert_eq!(from.iter().filter(|(_, f)| f.is_some()).count(), 4, "{from:?}");
    let result = load_result(&stored);
    assert_eq!(result["checks"], json!(live));
    assert_eq!(result["extract"]["readFrom"], "json");
}

#[test]
fn an_empty_json_list_says_there_are_no_claims_and_prose_says_nothing() {
    let s = claims_schema();
    let (e, from) = read_claims_reply(r#"{"reasoning": "all opinion", "claims": []}"#, &s);
    assert!(e.claims.is_empty() && e.none_stated && e.parse_success());
    assert_eq!(from, Some(ReadFrom::Json));
    // Only empty claims: not read from JSON, and the text states none either.
    let (e, from) = read_claims_reply(
        r#"{"reasoning": "", "claims": [{"claim": " ", "context": "", "type": "DATE"}]}"#,
        &s,
    );
    assert!(!e.parse_success() && from.is_none());
    // Not JSON that fits (a type outside the six): the text reader, which reads nothing here.
    let (e, from) = read_claims_reply(
        r#"{"reasoning": "", "claims": [{"claim": "x is 1", "context": "", "type": "NUMBER"}]}"#,
        &s,
    );
    assert!(!e.parse_success() && from.is_none());
    let (e, from) = read_claims_reply("CLAIM 1: x is 1\nType: STATISTIC", &s);
    assert_eq!((e.claims.len(), from), (1, Some(ReadFrom::Text)));
}

proptest! {
    /// Whatever fits the schemas is read whole: every claim with its context and type, every
    /// judgement with its verdict, evidence, confidence and (on a DISPUTED verdict) correction.
    #[test]
    fn any_json_that_fits_is_read_without_loss(seed in any::<u64>(), n in 1usize..6) {
        let n_words = std::cell::Cell::new(0u64);
        let words = |f: &str| { n_words.set(n_words.get() + 1); format!("{f} {seed:x} {}", n_words.get()) };
        let mut rng = SplitMix64::new(seed);
        let s = claims_schema();
        let v = schema::sample(&s.schema, &mut rng, &words);
        let (e, from) = read_claims_reply(&v.to_string(), &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        let stated = v["claims"].as_array().unwrap();
        prop_assert_eq!(e.claims.len(), stated.len());
        for (c, x) in e.claims.iter().zip(stated) {
            prop_assert_eq!(json!(c.text), x["claim"].clone());
            prop_assert_eq!(json!(c.context), x["context"].clone());
            prop_assert_eq!(json!(c.claim_type), x["type"].clone());
        }
        let cs = claims(n);
        let s = verifications_schema(n);
        let v = schema::sample(&s.schema, &mut rng, &words);
        let (r, from) = read_check_reply(&v.to_string(), &cs, &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        prop_assert!(r.parse_success);
        for (c, got) in cs.iter().zip(&r.verifications) {
            let first = v["verifications"].as_array().unwrap().iter().find(|i| i["claim"] == json!(c.number));
            match first {
                None => prop_assert!(!got.addressed),
                Some(x) => {
                    prop_assert!(got.addressed && got.confidence_stated);
                    prop_assert_eq!(json!(got.verdict), x["verdict"].clone());
                    prop_assert_eq!(json!(got.confidence), x["confidence"].clone());
                    prop_assert_eq!(json!(got.evidence), x["evidence"].clone());
                    let correction = (x["verdict"] == "DISPUTED").then(|| x["correction"].clone());
                    prop_assert_eq!(json!(got.correction), correction.unwrap_or(Value::Null));
                }
            }
        }
    }
}

#[test]
fn the_sim_answers_its_schemas_with_claims_from_the_content() {
    let content = "The tower was completed in 1889. It is 330 metres tall. It is lovely.";
    let ask = |prompt: &str, schema: &ReplySchema| {
        let s = sim_ask("sim/beta", prompt, 7, true, Some(schema));
        sim_answer(&s).unwrap()
    };
    let s = claims_schema();
    let (e, from) = read_claims_reply(&ask(&extract_prompt(content, Some(&s)), &s), &s);
    assert_eq!(from, Some(ReadFrom::Json));
    let texts: Vec<&str> = e.claims.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["The tower was completed in 1889.", "It is 330 metres tall."]);
    let v = verifications_schema(e.claims.len());
    let (r, from) =
        read_check_reply(&ask(&verify_prompt(content, &e.claims, Some(&v)), &v), &e.claims, &v);
    assert_eq!(from, Some(ReadFrom::Json));
    assert!(r.verifications.iter().all(|x| x.addressed));
    // Another mode's schema is not this sim's to answer.
    let other = ReplySchema::new("council_ranking", json!({}));
    let p = extract_prompt(content, None);
    assert!(sim_answer(&sim_ask("sim/beta", &p, 7, false, Some(&other))).is_none());
}

/// The offline sim's claims are the content's sentences that state a number; a decimal point
/// ends no sentence.
#[test]
fn the_sims_claims_are_whole_sentences() {
    let claims = super::sim_claims(
        "The tower is 330 metres tall. Paris has 2.1 million people. No number here.",
    );
    assert_eq!(claims, ["The tower is 330 metres tall.", "Paris has 2.1 million people."]);
}

/// What SmolLM2 listed as claims of a three-sentence paragraph about the Eiffel Tower (run with
/// structured output, November 2026): a claim the content makes is checked, one it never makes
/// (a made-up figure, words in another language) is set aside.
const EIFFEL: &str = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It \
                      is about 330 metres tall. It weighs about 10,100 tonnes.";

#[test]
fn a_claim_is_checked_only_when_the_content_states_it() {
    for (claim, stated) in [
        ("The Eiffel Tower was completed in 1889", true),
        ("the tower is about 330 metres tall.", true),
        // A paraphrase that keeps the figures and most words.
        ("The Eiffel Tower was finished in 1889 for the World's Fair", true),
        ("It weighs about 10100 tonnes", true),
        ("It weighs 10,100 tonnes", true),
        // A figure the content never gives.
        ("The Eiffel Tower is the third largest, 2", false),
        ("It is about 300 metres tall", false),
        ("The Eiffel Tower was completed in 1887", false),
        // Words the content does not hold.
        ("Cours de la Complication en développe de", false),
        ("L'art de leur construction", false),
        ("", false),
    ] {
        assert_eq!(in_content(claim, EIFFEL), stated, "{claim}");
    }
    // A script written without spaces: a quote of part of a sentence is stated, a made-up
    // figure is not.
    let content = "埃菲尔铁塔于1889年建成，高约330米。";
    assert!(in_content("埃菲尔铁塔于1889年建成", content));
    assert!(in_content("铁塔于1889年建成", content));
    assert!(!in_content("埃菲尔铁塔于1887年建成", content));
    assert!(!in_content("889年建成", content));
    // A quote never cuts a figure or a word short.
    assert!(!in_content("It was completed in 188", "It was completed in 1889."));
    assert!(!in_content("ower was completed in 1889 2", "The tower was completed in 1889."));
}

#[test]
fn claims_the_content_does_not_make_are_set_aside_and_said() {
    let mut m = mode(Some(EIFFEL), &["a"]);
    let ext = stage_calls(&m.start());
    let out = m.on_reply(ok(
        &ext[0],
        "CLAIM 1: Cours de la Complication en développe de\nType: COMPARISON\n\n\
         CLAIM 2: It is about 330 metres tall.\nType: STATISTIC\n\n\
         CLAIM 3: The Eiffel Tower is the third largest, 2\nType: STATISTIC",
    ));
    let data = &emitted(&out, "extract_complete").unwrap()["data"];
    assert_eq!(data["claims"].as_array().unwrap().len(), 1, "{data}");
    assert_eq!(data["claims"][0]["id"], "claim_1");
    assert_eq!(data["claims"][0]["text"], "It is about 330 metres tall.");
    assert_eq!(
        data["notInContent"],
        json!([
            "Cours de la Complication en développe de",
            "The Eiffel Tower is the third largest, 2"
        ])
    );
    assert_eq!(data["parseSuccess"], true);
    let checks = stage_calls(&out);
    assert_eq!(checks.len(), 1);
    let prompt = &checks[0].messages[0].content;
    assert!(prompt.contains("CLAIM 1: It is about 330 metres tall."), "{prompt}");
    assert!(!prompt.contains("third largest") && !prompt.contains("CLAIM 2"), "{prompt}");

    // None of them stated: nothing is checked, and the note says why.
    let mut m = mode(Some(EIFFEL), &["a"]);
    let ext = stage_calls(&m.start());
    let out = m.on_reply(ok(&ext[0], "CLAIM 1: L'art de leur construction\nType: COMPARISON"));
    assert!(stage_calls(&out).is_empty());
    let answer = finished(&out).unwrap();
    assert!(answer.contains("listed one claim, but the content states none of them"), "{answer}");
    // A claim from a file the run was given is the content's too (the content may only name
    // the file).
    let mut ctx = ctx("Fact-check this", vec![], true);
    ctx.material =
        "<attachment name=\"tower.txt\">\nThe tower has 1,665 steps.\n</attachment>".into();
    let mut m = FactCheck::new(&config(Some("The attached file tower.txt."), &["a"]), ctx).unwrap();
    let ext = stage_calls(&m.start());
    let out = m.on_reply(ok(&ext[0], "CLAIM 1: The tower has 1665 steps.\nType: STATISTIC"));
    let data = &emitted(&out, "extract_complete").unwrap()["data"];
    assert_eq!(data["claims"][0]["text"], "The tower has 1665 steps.", "{data}");
    assert_eq!(stage_calls(&out).len(), 1);
    // One that says it lists none keeps its own note.
    let mut m = mode(Some(EIFFEL), &["a"]);
    let ext = stage_calls(&m.start());
    let answer = finished(&m.on_reply(ok(&ext[0], "CLAIMS: NONE"))).unwrap();
    assert!(answer.contains("the extractor listed none"), "{answer}");
}

#[test]
fn a_reply_cut_off_inside_its_json_is_read_up_to_the_cut() {
    // What a small model does with many claims and a token cap: its JSON stops mid-judgement.
    let claims = read_claims(
        "CLAIM 1: The tower was completed in 1889.\nCLAIM 2: It is 330 metres tall.\n\
         CLAIM 3: It weighs 10,100 tonnes.",
    )
    .claims;
    assert_eq!(claims.len(), 3);
    let schema = verifications_schema(3);
    let cut = r#"{"reasoning": "two I know", "verifications": [{"claim": 1, "evidence": "Opened in 1889.", "verdict": "VERIFIED", "correction": "N/A", "confidence": "HIGH"}, {"claim": 2, "evidence": "300 m without antennas.", "verdict": "DISPUTED", "correction": "It is 300 metres without antennas.", "confidence": "MEDIUM"}, {"claim": 3, "evidence": "It wei"#;
    let (reading, from) = read_check_reply(cut, &claims, &schema);
    assert_eq!(from, Some(ReadFrom::JsonCut));
    assert!(reading.parse_success);
    let v = &reading.verifications;
    assert_eq!((v[0].verdict.as_str(), v[0].addressed), ("VERIFIED", true));
    assert_eq!(
        (v[1].verdict.as_str(), v[1].correction.as_deref()),
        ("DISPUTED", Some("It is 300 metres without antennas."))
    );
    // The claim the cut reached is not judged: unaddressed, as a skipped claim is.
    assert_eq!(
        (v[2].verdict.as_str(), v[2].confidence.as_str(), v[2].addressed),
        ("UNVERIFIABLE", "LOW", false)
    );
    // An item the schema refuses (claim 9 of 3) reads nothing from the cut.
    let bad = cut.replace(r#""claim": 2"#, r#""claim": 9"#);
    assert_ne!(read_check_reply(&bad, &claims, &schema).1, Some(ReadFrom::JsonCut));
    // A whole reply that does not fit (two judgements of three) is not a cut one.
    let whole = format!("{}]}}", cut.rsplit_once(", {\"claim\": 3").unwrap().0);
    assert!(serde_json::from_str::<Value>(&whole).is_ok(), "{whole}");
    assert_ne!(read_check_reply(&whole, &claims, &schema).1, Some(ReadFrom::JsonCut));
    // The extraction, cut in its third claim: the two before it.
    let cut = r#"{"reasoning": "figures", "claims": [{"claim": "The tower was completed in 1889.", "context": "", "type": "DATE"}, {"claim": "It is 330 metres tall.", "context": "", "type": "STATISTIC"}, {"claim": "It weighs"#;
    let (reading, from) = read_claims_reply(cut, &claims_schema());
    assert_eq!(from, Some(ReadFrom::JsonCut));
    let texts: Vec<&str> = reading.claims.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["The tower was completed in 1889.", "It is 330 metres tall."]);
}
