//! Red Team driven with fake replies, and its parsers on recorded and adversarial outputs.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted, all_emitted_data, assert_contains_all, assert_the_backup_synthesizer_failed_too,
    ctx, emitted, err, events, finished, offline_defaults, ok, readable_report, rows, sim_ask,
    sim_call_ask, stage_calls, validate_config,
};
use crate::modes::{validate, Mode};

fn config(rounds: u32) -> Value {
    json!({ "generatorModel": "gen", "attackerModel": "att", "synthesizerModel": "syn",
            "rounds": rounds, "maxInputLength": 25000, "timeoutMs": 120000,
            "globalTimeoutMs": 600000, "chairmanFallbackModel": "spare" })
}

fn mode(rounds: u32) -> RedTeam {
    RedTeam::new(&config(rounds), ctx("Review the login handler", vec![], true)).unwrap()
}

const ATTACK: &str = "Here is my review.\n\n### FINDING 1: SQL injection\n**Severity:** CRITICAL\n\
**Location:** Section 1, `login`\n**Vulnerability:** The query is built with format!.\n\
It spans two lines.\n**Exploit Scenario:** Send `' OR 1=1 --` as the name.\n\n\
FINDING 2 - Plain-text passwords\n- Severity: medium to high\n- Location: Section 1\n\
- Vulnerability: passwords are compared in plain text\n\n\
SUMMARY:\nCritical: 1, High: 1, Medium: 0, Low: 0\nOverall risk: High\n";

const DEFENSE: &str = "RESPONSE TO FINDING 1: SQL injection\nVerdict: ACCEPT\nReasoning: Right.\n\
Revision: Use a prepared statement.\n\nRESPONSE TO FINDING 2: Plain-text passwords\n\
Verdict: REBUT (we do not accept this)\nReasoning: Hashing happens upstream.\nRevision: N/A\n\n\
DEFENSE SUMMARY: one accepted.\n\nREVISED CONTENT:\nfn login() { prepared() }\n";

const SYNTHESIS: &str = "## Hardened Output\n\nfn login() { prepared() }\n\n\
## Vulnerability Audit Summary\n\nAll handled.\nRemaining Risks: none known.\n\
Hardening Confidence: **High**\n";

// ---- parsers -------------------------------------------------------------------------------

#[test]
fn an_attack_report_is_read_by_its_findings_blocks() {
    let a = read_attack(ATTACK);
    assert!(a.parse_success && !a.no_flaws);
    assert_eq!(a.findings.len(), 2);
    let f = &a.findings[0];
    assert_eq!((f.number, f.title.as_str(), f.severity.as_str()), (1, "SQL injection", "CRITICAL"));
    assert_eq!(f.location.as_deref(), Some("Section 1, `login`"));
    assert_eq!(
        f.vulnerability.as_deref(),
        Some("The query is built with format!.\nIt spans two lines.")
    );
    assert_eq!(f.exploit_scenario.as_deref(), Some("Send `' OR 1=1 --` as the name."));
    // The most severe level the value names.
    assert_eq!(
        (a.findings[1].severity.as_str(), a.findings[1].severity_defaulted),
        ("HIGH", false)
    );
    assert_eq!(a.overall_risk.as_deref(), Some("High"));
    assert!(a.reported_summary.as_deref().unwrap().contains("Critical: 1"));
    assert_eq!(
        to_json(&severity_counts(a.findings.iter().map(|f| f.severity.as_str()))),
        json!({"CRITICAL": 1, "HIGH": 1, "MEDIUM": 0, "LOW": 0})
    );
}

#[test]
fn attack_reports_that_state_nothing_are_not_guessed() {
    // Nothing found, said so.
    let a = read_attack("I looked hard.\n\n**FINDINGS: NONE**");
    assert!(a.no_flaws && a.parse_success && a.findings.is_empty());
    // Prose about problems is not a finding.
    let a = read_attack("There is a critical SQL injection and a high severity XSS.");
    assert!(!a.parse_success && !a.no_flaws && a.findings.is_empty());
    // A heading with none of Severity/Location/Vulnerability is ignored; numbering restarts.
    let a = read_attack("FINDING 7: empty\nJust words.\n\nFINDING 9: real\nLocation: here\n");
    assert_eq!(a.findings.len(), 1);
    assert_eq!((a.findings[0].number, a.findings[0].reported_number), (1, 9));
    assert_eq!(
        (a.findings[0].severity.as_str(), a.findings[0].severity_defaulted),
        ("MEDIUM", true)
    );
    // A field's first occurrence wins.
    let a = read_attack("FINDING 1: x\nSeverity: LOW\nSeverity: CRITICAL\n");
    assert_eq!(a.findings[0].severity, "LOW");
    // A reasoning trace is never read: its findings are the model's draft.
    let a = read_attack("<think>FINDING 1: draft\nSeverity: HIGH\n</think>\nFINDINGS: NONE");
    assert!(a.no_flaws && a.findings.is_empty());
    let a = read_attack("<think>FINDING 1: draft\nSeverity: HIGH\n");
    assert!(!a.parse_success);
    // A refusal.
    let a = read_attack("I cannot help with attacking systems.");
    assert!(!a.parse_success);
    // SUMMARY ends a block: fields after it are not the finding's.
    let a = read_attack("FINDING 1: x\nSeverity: LOW\nSUMMARY:\nLocation: elsewhere\nOverall risk: Low\nOverall risk: Medium");
    assert_eq!(a.findings[0].location, None);
    assert_eq!(a.overall_risk.as_deref(), Some("Medium"), "the last line");
}

#[test]
fn a_defense_matches_by_number_then_title_and_defaults_are_marked() {
    let findings = read_attack(ATTACK).findings;
    let d = read_defense(DEFENSE, &findings);
    assert_eq!(d.responses[0].verdict, "ACCEPT");
    assert_eq!(d.responses[0].revision.as_deref(), Some("Use a prepared statement."));
    assert_eq!(d.responses[1].verdict, "REBUT", "REBUT appears first in the value");
    assert_eq!(d.responses[1].revision, None, "N/A is no revision");
    assert_eq!(d.revised_content.as_deref(), Some("fn login() { prepared() }"));
    // By title when the number names no finding; no verdict → REBUT, defaulted; unanswered.
    let by_title = "RESPONSE TO FINDING 12: sql INJECTION\nReasoning: hmm\n\nREVISED CONTENT:\n";
    let d = read_defense(by_title, &findings);
    assert_eq!(
        (d.responses[0].verdict.as_str(), d.responses[0].verdict_defaulted),
        ("REBUT", true)
    );
    assert_eq!(d.responses[1].verdict, "UNADDRESSED");
    assert_eq!(d.revised_content, None, "an empty revision carries the content forward");
    // The last marker wins; markup around it is allowed.
    let d =
        read_defense("REVISED CONTENT: old\n\n**REVISED CONTENT:** new text\nline 2", &findings);
    assert_eq!(d.revised_content.as_deref(), Some("new text\nline 2"));
    // A verdict in a trace is not read.
    let d =
        read_defense("<think>RESPONSE TO FINDING 1: x\nVerdict: ACCEPT</think>Nothing.", &findings);
    assert!(d.responses.iter().all(|r| r.verdict == "UNADDRESSED"));
}

#[test]
fn a_synthesis_gives_its_hardened_output_audit_and_confidence() {
    let s = read_synthesis(SYNTHESIS);
    assert_eq!(s.hardened_output, "fn login() { prepared() }");
    assert!(s.audit_summary.as_deref().unwrap().starts_with("All handled."));
    assert_eq!(s.hardening_confidence.as_deref(), Some("High"));
    let s = read_synthesis("Just a final text.\nHardening Confidence: very");
    assert_eq!(s.hardened_output, "Just a final text.\nHardening Confidence: very");
    assert_eq!(s.hardening_confidence, None, "not a level");
    let s = read_synthesis(
        "**Hardened Output**\nx\nHardening Confidence: Low\nHardening Confidence: medium",
    );
    assert_eq!(
        (s.hardened_output.as_str(), s.hardening_confidence.as_deref()),
        ("x\nHardening Confidence: Low\nHardening Confidence: medium", Some("Medium"))
    );
}

fn severity() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&SEVERITIES[..])
}

proptest! {
    /// A report written in the requested format reads back as written, whatever its markup.
    #[test]
    fn a_report_in_format_reads_back_as_written(
        items in prop::collection::vec(("[A-Za-z][A-Za-z ]{0,20}[A-Za-z]", severity(), "[a-z ]{1,30}"), 0..6),
        markup in prop::sample::select(vec!["", "**", "### ", "- "]),
    ) {
        let mut text = String::from("Review:\n");
        for (i, (title, sev, vuln)) in items.iter().enumerate() {
            text.push_str(&format!("{markup}FINDING {}: {title}\n{markup}Severity: {sev}\nVulnerability: x{vuln}\n\n", i + 1));
        }
        if items.is_empty() {
            text.push_str("FINDINGS: NONE\n");
        }
        let a = read_attack(&text);
        prop_assert!(a.parse_success);
        prop_assert_eq!(a.no_flaws, items.is_empty());
        prop_assert_eq!(a.findings.len(), items.len());
        for (f, (title, sev, _)) in a.findings.iter().zip(&items) {
            prop_assert_eq!(f.title.trim(), title.trim());
            prop_assert_eq!(f.severity.as_str(), *sev);
        }
    }

    /// Any text: no panic, every severity a level, every finding numbered 1..k, every finding
    /// of a defense answered once.
    #[test]
    fn any_reply_reads_safely(text in "(?s).{0,400}", extra in "(FINDING 1: a\nSeverity: |RESPONSE TO FINDING 1: a\nVerdict: |REVISED CONTENT:|SUMMARY:|<think>)") {
        let text = format!("{extra}{text}");
        let a = read_attack(&text);
        for (i, f) in a.findings.iter().enumerate() {
            prop_assert_eq!(f.number, i + 1);
            prop_assert!(SEVERITIES.contains(&f.severity.as_str()));
        }
        let d = read_defense(&text, &a.findings);
        prop_assert_eq!(d.responses.len(), a.findings.len());
        read_synthesis(&text);
    }
}

// ---- the run -------------------------------------------------------------------------------

/// Drives a run; `answer` gives each call's reply (None: the call fails).
fn drive(m: &mut RedTeam, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    crate::modes::testkit::drive(m, answer, "Login Review")
}

fn scripted(c: &CallSpec) -> Option<String> {
    Some(match c.stage.as_str() {
        "generate" => "## 1. Login\nfn login() {}".into(),
        s if s.starts_with("attack") => ATTACK.into(),
        s if s.starts_with("defend") => DEFENSE.into(),
        _ => SYNTHESIS.into(),
    })
}

/// The result rebuilt from the rows equals what went out live.
fn assert_reloads(all: &[Effect]) {
    let result = load_result(&rows(all));
    if let Some(g) = emitted(all, "generate_complete") {
        assert_eq!(result["generate"], g["data"]);
    }
    let attacks: Vec<Value> = all_emitted_data(all, "attack_complete");
    let defenses: Vec<Value> = all_emitted(all, "defend_complete");
    assert_eq!(result["rounds"].as_array().unwrap().len(), attacks.len());
    for (i, a) in attacks.iter().enumerate() {
        assert_eq!(&result["rounds"][i]["attack"], a);
    }
    for d in defenses {
        let r = d["round"].as_u64().unwrap() as usize - 1;
        assert_eq!(result["rounds"][r]["defense"], d["data"]);
    }
    if let Some(s) = emitted(all, "synthesize_complete") {
        assert_eq!(result["synthesis"], s["data"]);
        assert_eq!(result["partial"], s["partial"]);
        assert_eq!(result["failedModels"], s["failedModels"]);
        assert_eq!(result["totals"], s["data"]["totals"]);
    }
}

#[test]
fn two_rounds_attack_defend_and_harden_in_order() {
    let mut m = mode(2);
    let all = drive(&mut m, scripted);
    assert_eq!(
        events(&all),
        [
            "redteam_start",
            "generate_start",
            "generate_complete",
            "attack_start",
            "attack_complete",
            "defend_start",
            "defend_complete",
            "attack_start",
            "attack_complete",
            "defend_start",
            "defend_complete",
            "synthesize_start",
            "synthesize_complete",
            "title_complete",
        ]
    );
    assert_eq!(finished(&all).as_deref(), Some(SYNTHESIS));
    let orders: Vec<(String, i32)> =
        rows(&all).iter().map(|r| (r.stage_type.clone(), r.stage_order)).collect();
    assert_eq!(
        orders,
        [
            ("generate".into(), 0),
            ("attack_round_1".into(), 1),
            ("defend_round_1".into(), 2),
            ("attack_round_2".into(), 3),
            ("defend_round_2".into(), 4),
            ("synthesis".into(), 99)
        ]
    );
    let calls = crate::modes::testkit::calls(&all);
    let attack2 = calls.iter().find(|c| c.key == "attack:2").unwrap();
    let prompt = &attack2.messages[0].content;
    assert!(prompt.contains("fn login() { prepared() }"), "the revised content is attacked");
    assert!(prompt.contains("Defense verdict: REBUT") && prompt.contains("Look for NEW"));
    let defend = calls.iter().find(|c| c.key == "defend:1").unwrap();
    assert_eq!(defend.model, "gen", "the generator defends");
    let s = emitted(&all, "synthesize_complete").unwrap();
    assert_eq!(s["data"]["totals"]["findings"], 4);
    assert_eq!(s["data"]["totals"]["accepted"], 2);
    assert_eq!(s["data"]["totals"]["acceptedBySeverity"]["CRITICAL"], 2);
    assert_eq!(s["data"]["hardeningConfidence"], "High");
    assert_eq!(s["partial"], false);
    let d = rows(&all).into_iter().find(|r| r.stage_type == "defend_round_1").unwrap();
    let pd = d.parsed_data.unwrap();
    assert!(pd.get("revisedContent").is_none() && pd["revisedContentLength"] == 25);
    assert_reloads(&all);
}

#[test]
fn no_flaws_ends_the_rounds_without_a_defense() {
    let mut m = mode(3);
    let all = drive(&mut m, |c| {
        Some(if c.stage.starts_with("attack") { "FINDINGS: NONE".into() } else { scripted(c)? })
    });
    assert!(!events(&all).contains(&"defend_start".to_string()));
    let r = load_result(&rows(&all));
    assert_eq!(r["rounds"].as_array().unwrap().len(), 1);
    assert_eq!(r["rounds"][0]["defense"], Value::Null);
    assert_eq!(r["synthesis"]["stopReason"], "no flaws");
    assert_reloads(&all);
}

#[test]
fn a_failed_attacker_ends_the_rounds_and_the_synthesis_follows() {
    let mut m = mode(3);
    let all = drive(&mut m, |c| if c.stage.starts_with("attack") { None } else { scripted(c) });
    let a = emitted(&all, "attack_complete").unwrap();
    assert_eq!((a["round"].clone(), a["data"]["failed"].clone()), (json!(1), json!(true)));
    assert!(finished(&all).is_some());
    let s = emitted(&all, "synthesize_complete").unwrap();
    assert_eq!(s["partial"], true);
    assert_eq!(s["failedModels"][0]["stage"], "attack_round_1");
    assert_eq!(s["failedModels"][0]["role"], "attacker");
    assert_reloads(&all);
}

#[test]
fn a_failed_or_empty_defense_carries_the_content_forward_and_leaves_findings_unaddressed() {
    for reply in [None, Some("<think>hmm</think>  ".to_string())] {
        let mut m = mode(2);
        let all =
            drive(
                &mut m,
                |c| if c.stage.starts_with("defend") { reply.clone() } else { scripted(c) },
            );
        let d = emitted(&all, "defend_complete").unwrap()["data"].clone();
        assert_eq!(d["failed"], true);
        assert_eq!(d["unaddressed"], 2);
        assert_eq!(d["revisedContent"], "## 1. Login\nfn login() {}");
        assert!(events(&all).iter().filter(|e| *e == "attack_start").count() == 2, "rounds go on");
        let s = emitted(&all, "synthesize_complete").unwrap();
        assert_eq!(s["failedModels"].as_array().unwrap().len(), 2);
        assert_reloads(&all);
    }
}

#[test]
fn a_failed_generator_uses_the_raw_material() {
    let mut m = RedTeam::new(
        &json!({ "content": "x".repeat(1500), "generatorModel": "gen", "attackerModel": "att",
                 "synthesizerModel": "gen", "rounds": 1, "maxInputLength": 1000,
                 "timeoutMs": 1000, "globalTimeoutMs": 60000 }),
        ctx("q", vec![], false),
    )
    .unwrap();
    let start = m.start();
    let gen = &stage_calls(&start)[0];
    assert!(gen.messages[0].content.contains("cut to its first 1000 of 1500 characters"));
    let out = m.on_reply(err(gen));
    let g = emitted(&out, "generate_complete").unwrap()["data"].clone();
    assert_eq!(g["fallback"], true);
    assert_eq!(g["structuredContent"].as_str().unwrap().len(), 1000);
    let r = load_result(&rows(&out));
    assert_eq!(r["material"]["truncated"], true);
    assert_eq!(r["material"]["originalLength"], 1500);
    assert_eq!(r["material"]["source"], "content");
}

#[test]
fn the_synthesizer_falls_back_once_and_the_run_fails_when_both_fail() {
    let mut m = mode(1);
    let all = drive(&mut m, |c| if c.stage == "synthesis" { None } else { scripted(c) });
    assert_the_backup_synthesizer_failed_too(&all);
    let r = load_result(&rows(&all));
    assert_eq!(r["rounds"].as_array().unwrap().len(), 1, "the rounds are kept");
    assert_eq!(r["synthesis"], Value::Null);
    // The backup answers: fallbackFrom.
    let mut m = mode(1);
    let mut all = m.start();
    let mut pending = stage_calls(&all);
    while let Some(c) = pending.pop() {
        let out =
            m.on_reply(if c.key == "synthesis" { err(&c) } else { ok(&c, &scripted(&c).unwrap()) });
        pending.extend(stage_calls(&out));
        all.extend(out);
    }
    let s = emitted(&all, "synthesize_complete").unwrap();
    assert_eq!(s["data"]["fallbackFrom"], "syn");
    assert_eq!(s["data"]["model"], "spare");
    assert_reloads(&all);
}

#[test]
fn the_global_timeout_lets_the_call_in_flight_finish_then_synthesizes() {
    let mut m = mode(3);
    let start = m.start();
    assert!(start.contains(&Effect::Timer { key: "global".into(), after_ms: 600000 }));
    let gen = stage_calls(&start)[0].clone();
    let out = m.on_reply(ok(&gen, "## 1. x"));
    let attack = stage_calls(&out)[0].clone();
    assert!(m.on_timer("global").is_empty());
    let out = m.on_reply(ok(&attack, ATTACK));
    assert!(events(&out).ends_with(&["attack_complete".into(), "synthesize_start".into()]));
    let synth = stage_calls(&out)[0].clone();
    let out = m.on_reply(ok(&synth, SYNTHESIS));
    let s = emitted(&out, "synthesize_complete").unwrap()["data"].clone();
    assert_eq!(s["stopReason"], "global timeout");
    assert_eq!(s["totals"]["unaddressed"], 2);
}

#[test]
fn requests_are_checked_field_by_field() {
    let defaults = offline_defaults();
    let bad = |cfg: Value| validate_config("red_team", cfg).unwrap_err().field;
    assert_eq!(
        bad(json!({ "generatorModel": "a", "attackerModel": "a" })),
        "modeConfig.attackerModel"
    );
    assert_eq!(bad(json!({ "attackerModel": "sim/alpha" })), "modeConfig.attackerModel");
    assert_eq!(bad(json!({ "rounds": 4 })), "modeConfig.rounds");
    assert_eq!(bad(json!({ "rounds": 0 })), "modeConfig.rounds");
    assert_eq!(bad(json!({ "maxInputLength": 999 })), "modeConfig.maxInputLength");
    assert_eq!(bad(json!({ "timeoutMs": 200000 })), "modeConfig.timeoutMs");
    assert_eq!(bad(json!({ "globalTimeoutMs": 59999 })), "modeConfig.globalTimeoutMs");
    assert_eq!(bad(json!({ "content": "  " })), "modeConfig.content");
    assert_eq!(bad(json!({ "synthesizerModel": "" })), "modeConfig.synthesizerModel");
    assert_eq!(bad(json!({ "rouns": 2 })), "modeConfig.rouns");
    let e = validate(&json!({ "mode": "red_team" }), &defaults).unwrap_err();
    assert_eq!(e.field, "question");
    let ok = validate(&json!({ "mode": "red_team", "question": "q" }), &defaults).unwrap();
    assert_eq!(ok.config["generatorModel"], "sim/alpha");
    assert_eq!(ok.config["attackerModel"], "sim/beta");
    assert_eq!(ok.config["synthesizerModel"], "sim/alpha");
    assert_eq!(
        (ok.config["rounds"].clone(), ok.config["maxInputLength"].clone()),
        (json!(2), json!(25000))
    );
    assert_eq!(ok.models, ["sim/alpha", "sim/beta"]);
    let online = Defaults { offline: false, ..defaults.clone() };
    let ok = validate(&json!({ "mode": "red_team", "question": "q" }), &online).unwrap();
    assert_eq!(ok.config["attackerModel"], "openai/o3");
    // The synthesizer may be the attacker; the chairman backup is copied in.
    let with_backup = Defaults {
        fallback: crate::modes::Fallbacks {
            chairman: Some("sim/spare".into()),
            ..Default::default()
        },
        ..defaults
    };
    let ok = validate(
        &json!({ "mode": "red_team", "question": "q", "modeConfig": { "synthesizerModel": "sim/beta" } }),
        &with_backup,
    )
    .unwrap();
    assert_eq!(ok.config["chairmanFallbackModel"], "sim/spare");
}

/// The sim's reply to call `c` of the run seeded `seed`, reading its first message.
fn sim_reply(
    c: &CallSpec,
    seed: u64,
    malformed: bool,
    hostile: bool,
    schema: Option<&ReplySchema>,
) -> Option<String> {
    let seed = seed * 31 + c.key.len() as u64;
    sim_answer(&sim_call_ask(c, &c.messages[0].content, seed, malformed, hostile, schema))
}

#[test]
fn the_sim_answers_every_step_in_format_and_sometimes_out_of_it() {
    for malformed in [false, true] {
        for seed in 0..8u64 {
            let mut m = mode(3);
            let all = drive(&mut m, |c| sim_reply(c, seed, malformed, false, None));
            assert!(finished(&all).is_some(), "the run completes");
            let a = emitted(&all, "attack_complete").unwrap()["data"].clone();
            assert_eq!(a["parseSuccess"], !malformed, "{a}");
            assert_eq!(a.get("unparsed").is_some(), malformed, "{a}");
            if !malformed {
                let s = emitted(&all, "synthesize_complete").unwrap()["data"].clone();
                assert!(s["hardeningConfidence"].is_string(), "{s}");
                assert!(s["hardenedOutput"].as_str().unwrap().contains("## 1. Material"), "{s}");
                if let Some(d) = emitted(&all, "defend_complete") {
                    assert_eq!(d["data"]["revisedContentFound"], true);
                    assert_eq!(d["data"]["unaddressed"], 0);
                }
            }
            assert_reloads(&all);
        }
    }
    let other = sim_ask("sim/a", "What is 2+2?", 1, false, None);
    assert_eq!(sim_answer(&other), None);
}

#[test]
fn thousands_of_findings_and_responses_are_read_in_one_pass() {
    // Matching was a search per finding over every response; an adversarial reply of
    // thousands of blocks must not take minutes.
    let n = 3000;
    let attack: String = (1..=n).map(|i| format!("FINDING {i}: t{i}\nSeverity: LOW\n")).collect();
    let findings = read_attack(&attack).findings;
    assert_eq!(findings.len(), n);
    let defense: String = (1..=n)
        .rev()
        .map(|i| format!("RESPONSE TO FINDING {}: T{i}\nVerdict: ACCEPT\n", i + n))
        .collect();
    let d = read_defense(&defense, &findings);
    assert!(d.responses.iter().all(|r| r.verdict == "ACCEPT"), "matched by title");
}

// ---- structured replies --------------------------------------------------------------------

/// A run whose generator and attacker are asked for JSON (their routes take structured
/// output).
fn structured_mode(rounds: u32) -> RedTeam {
    let mut c = ctx("Review the login handler", vec![], true);
    c.structured = crate::modes::Structured::models(["gen", "att"]);
    RedTeam::new(&config(rounds), c).unwrap()
}

fn json_finding(title: &str, severity: &str) -> Value {
    json!({ "title": title, "severity": severity, "location": "Section 1",
            "vulnerability": "The query is built with format!.", "exploitScenario": "Send a quote." })
}

fn json_attack(findings: Vec<Value>) -> String {
    json!({ "reasoning": "read every section", "findings": findings, "overallRisk": "High" })
        .to_string()
}

fn json_defense(responses: Vec<Value>, revised: &str) -> String {
    json!({ "reasoning": "weighed each", "responses": responses, "summary": "done",
            "revisedContent": revised })
    .to_string()
}

fn json_response(finding: u64, verdict: &str, revision: &str) -> Value {
    json!({ "finding": finding, "verdict": verdict, "reasoning": "because", "revision": revision })
}

#[test]
fn the_schemas_take_what_the_readers_take_and_refuse_the_rest() {
    let a = attack_schema();
    assert_eq!(a.name, ATTACK_SCHEMA);
    let keys: Vec<&String> = a.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "findings", "overallRisk"], "the reasoning comes first");
    let item = &a.schema["properties"]["findings"]["items"];
    assert_eq!(item["properties"]["severity"]["enum"], json!(SEVERITIES));
    let ok = |f: Vec<Value>| serde_json::from_str::<Value>(&json_attack(f)).unwrap();
    assert!(a.validate(&ok(vec![json_finding("SQL injection", "CRITICAL")])).is_ok());
    assert!(a.validate(&ok(vec![])).is_ok(), "nothing found is a stated empty list");
    for bad in [
        ok(vec![json_finding("x", "SEVERE")]),
        ok(vec![json_finding("x", "critical")]),
        ok(vec![json_finding(&"t".repeat(TITLE_CHARS + 1), "LOW")]),
        ok((0..=MAX_JSON_FINDINGS).map(|_| json_finding("x", "LOW")).collect()),
        json!({ "reasoning": "", "findings": [] }),
    ] {
        assert!(a.validate(&bad).is_err(), "{bad}");
    }

    let d = defense_schema(2, 100);
    assert_eq!(d.name, DEFENSE_SCHEMA);
    let keys: Vec<&String> = d.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "responses", "summary", "revisedContent"]);
    let parse = |t: String| serde_json::from_str::<Value>(&t).unwrap();
    let two = vec![json_response(1, "ACCEPT", "fix"), json_response(2, "REBUT", "")];
    assert!(d.validate(&parse(json_defense(two.clone(), "fn login() {}"))).is_ok());
    for bad in [
        // A finding that is not in the round, a verdict that is not one of the two, one
        // response for two findings, a revised content past its bound.
        json_defense(vec![json_response(1, "ACCEPT", ""), json_response(3, "REBUT", "")], "x"),
        json_defense(vec![json_response(0, "ACCEPT", ""), json_response(1, "REBUT", "")], "x"),
        json_defense(vec![json_response(1, "MAYBE", ""), json_response(2, "REBUT", "")], "x"),
        json_defense(vec![json_response(1, "ACCEPT", "")], "x"),
        json_defense(two, &"c".repeat(revised_max_chars(100) + 1)),
    ] {
        assert!(d.validate(&parse(bad.clone())).is_err(), "{bad}");
    }
    // Findings not read one by one: nothing to respond to, the revised content still asked.
    let none = defense_schema(0, 100);
    assert!(none.schema["properties"].get("responses").is_none());
    assert!(none
        .validate(&json!({ "reasoning": "", "summary": "", "revisedContent": "all of it" }))
        .is_ok());
    assert_eq!(revised_max_chars(10), 4_000);
    assert_eq!(revised_max_chars(30_000), 60_000);
}

#[test]
fn an_attack_is_read_from_json_when_it_fits_else_from_text() {
    let s = attack_schema();
    let (a, from) = read_attack_reply(
        &json_attack(vec![
            json_finding(" SQL injection ", "CRITICAL"),
            json_finding("Logs", "LOW"),
        ]),
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    assert!(a.parse_success && !a.no_flaws);
    let f = &a.findings[0];
    assert_eq!((f.number, f.reported_number, f.title.as_str()), (1, 1, "SQL injection"));
    assert_eq!((f.severity.as_str(), f.severity_defaulted), ("CRITICAL", false));
    assert_eq!(f.exploit_scenario.as_deref(), Some("Send a quote."));
    assert_eq!((a.findings[1].number, a.findings[1].severity.as_str()), (2, "LOW"));
    assert_eq!(a.overall_risk.as_deref(), Some("High"));
    // An empty list states that nothing was found.
    let (a, from) = read_attack_reply(&json_attack(vec![]), &s);
    assert!(a.no_flaws && a.parse_success && from == Some(ReadFrom::Json));
    // A severity outside the four is refused, and the text states nothing: unparsed.
    let (a, from) = read_attack_reply(&json_attack(vec![json_finding("x", "SEVERE")]), &s);
    assert!(!a.parse_success && a.findings.is_empty() && from.is_none());
    // The text format, from a model that ignored the schema.
    let (a, from) = read_attack_reply(ATTACK, &s);
    assert_eq!((a.findings.len(), from), (2, Some(ReadFrom::Text)));
    let (a, from) = read_attack_reply("FINDINGS: NONE", &s);
    assert!(a.no_flaws && from == Some(ReadFrom::Text));
    // Unfinished JSON states nothing: cut before its first finding closed, it is neither a
    // finding nor "no flaws".
    let cut = &json_attack(vec![json_finding("x", "LOW")])[..40];
    let (a, from) = read_attack_reply(cut, &s);
    assert!(from.is_none() && !a.parse_success && !a.no_flaws, "{cut}");
    // Cut off at its token cap inside its second finding: the first is read.
    let whole =
        json_attack(vec![json_finding("SQL injection", "HIGH"), json_finding("Logs", "LOW")]);
    let cut = &whole[..whole.find("Logs").unwrap()];
    let (a, from) = read_attack_reply(cut, &s);
    assert_eq!(from, Some(ReadFrom::JsonCut), "{cut}");
    assert!(a.parse_success && !a.no_flaws);
    let titles: Vec<&str> = a.findings.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(titles, ["SQL injection"]);
}

#[test]
fn a_defense_is_read_from_json_when_it_fits_else_from_text() {
    let findings = read_attack(ATTACK).findings;
    let s = defense_schema(findings.len(), 20);
    let (d, from) = read_defense_reply(
        &json_defense(
            vec![
                json_response(2, "REBUT", "N/A"),
                json_response(1, "ACCEPT", " Use a statement. "),
            ],
            " fn login() { prepared() } ",
        ),
        &findings,
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    let r: Vec<(usize, &str, Option<&str>)> = d
        .responses
        .iter()
        .map(|r| (r.finding, r.verdict.as_str(), r.revision.as_deref()))
        .collect();
    assert_eq!(r, [(1, "ACCEPT", Some("Use a statement.")), (2, "REBUT", None)]);
    assert_eq!(d.responses[0].title, "SQL injection");
    assert!(d.responses.iter().all(|r| !r.verdict_defaulted));
    assert_eq!(d.revised_content.as_deref(), Some("fn login() { prepared() }"));
    // A finding answered twice: the first response counts (as in text); the other finding
    // is unaddressed. An empty revised content carries the content forward.
    let (d, from) = read_defense_reply(
        &json_defense(vec![json_response(1, "REBUT", ""), json_response(1, "ACCEPT", "x")], " "),
        &findings,
        &s,
    );
    assert_eq!(from, Some(ReadFrom::Json));
    let v: Vec<&str> = d.responses.iter().map(|r| r.verdict.as_str()).collect();
    assert_eq!(v, ["REBUT", "UNADDRESSED"]);
    assert_eq!(d.revised_content, None);
    // Cut off at its token cap inside its responses (SmolLM2 filled each string with
    // "A.S.R.A.K.…" until the cap): the response complete before the cut is read.
    let whole =
        json_defense(vec![json_response(1, "ACCEPT", "x"), json_response(2, "REBUT", "")], "y");
    let cut =
        &whole[..whole.find("\"finding\": 2").or_else(|| whole.find("\"finding\":2")).unwrap() + 5];
    let (d, from) = read_defense_reply(cut, &findings, &s);
    assert_eq!(from, Some(ReadFrom::JsonCut), "{cut}");
    let v: Vec<&str> = d.responses.iter().map(|r| r.verdict.as_str()).collect();
    assert_eq!(v, ["ACCEPT", "UNADDRESSED"]);
    assert_eq!(d.revised_content, None);
    // A finding outside the round is refused, and the text states nothing: unparsed.
    let (d, from) = read_defense_reply(
        &json_defense(vec![json_response(1, "ACCEPT", ""), json_response(3, "REBUT", "")], "x"),
        &findings,
        &s,
    );
    assert!(from.is_none() && d.revised_content.is_none());
    assert!(d.responses.iter().all(|r| r.verdict == "UNADDRESSED"));
    // The text format, from a model that ignored the schema.
    let (d, from) = read_defense_reply(DEFENSE, &findings, &s);
    assert_eq!((d.responses[0].verdict.as_str(), from), ("ACCEPT", Some(ReadFrom::Text)));
    assert_eq!(read_defense_reply("I think it holds up.", &findings, &s).1, None);
}

/// Text for a sampled string field: `words`, with the field's name so fields differ.
fn words_for(words: String) -> impl Fn(&str) -> String {
    move |field: &str| format!("{words} {field}")
}

fn trimmed(v: &Value) -> Option<String> {
    let t = v.as_str()?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

proptest! {
    /// Whatever attack the schema allows is read as given, finding by finding.
    #[test]
    fn any_attack_the_schema_allows_is_read_whole(seed in any::<u64>(), words in "\\PC{0,40}") {
        let s = attack_schema();
        // The sampler lists the fewest findings allowed (none): ask for some too.
        let mut some = s.schema.clone();
        some["properties"]["findings"]["minItems"] = json!(1 + seed % 4);
        for shape in [&s.schema, &some] {
            let v = schema::sample(shape, &mut SplitMix64::new(seed), &words_for(words.clone()));
            prop_assert!(s.validate(&v).is_ok());
            let (a, from) = read_attack_reply(&v.to_string(), &s);
            prop_assert_eq!(from, Some(ReadFrom::Json));
            let given = v["findings"].as_array().unwrap();
            prop_assert_eq!(a.findings.len(), given.len());
            prop_assert_eq!(a.no_flaws, given.is_empty());
            for (f, g) in a.findings.iter().zip(given) {
                prop_assert_eq!(Some(f.title.clone()).filter(|t| !t.is_empty()), trimmed(&g["title"]));
                prop_assert_eq!(Some(f.severity.as_str()), g["severity"].as_str());
                prop_assert_eq!(&f.location, &trimmed(&g["location"]));
                prop_assert_eq!(&f.vulnerability, &trimmed(&g["vulnerability"]));
                prop_assert_eq!(&f.exploit_scenario, &trimmed(&g["exploitScenario"]));
            }
            prop_assert_eq!(a.overall_risk, trimmed(&v["overallRisk"]));
        }
    }

    /// Whatever defense the schema allows is read as given: each finding's first response.
    #[test]
    fn any_defense_the_schema_allows_is_read_whole(seed in any::<u64>(), k in 0usize..5, words in "\\PC{0,40}") {
        let attack: String = (1..=k).map(|i| format!("FINDING {i}: t{i}\nSeverity: LOW\n")).collect();
        let findings = read_attack(&attack).findings;
        let s = defense_schema(k, 50);
        let v = schema::sample(&s.schema, &mut SplitMix64::new(seed), &words_for(words));
        let (d, from) = read_defense_reply(&v.to_string(), &findings, &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        let given: Vec<&Value> = v["responses"].as_array().into_iter().flatten().collect();
        prop_assert_eq!(d.responses.len(), k);
        for r in &d.responses {
            match given.iter().find(|g| g["finding"] == json!(r.finding)) {
                Some(g) => {
                    prop_assert_eq!(Some(r.verdict.as_str()), g["verdict"].as_str());
                    prop_assert_eq!(&r.reasoning, &trimmed(&g["reasoning"]));
                    let revision = trimmed(&g["revision"]).filter(|t| !no_revision(t));
                    prop_assert_eq!(&r.revision, &revision);
                }
                None => prop_assert_eq!(r.verdict.as_str(), "UNADDRESSED"),
            }
        }
        prop_assert_eq!(d.revised_content, trimmed(&v["revisedContent"]));
    }
}

#[test]
fn the_json_prompts_keep_the_instructions_and_swap_the_format() {
    let a = attack_schema();
    let previous = "FINDING 1: x\nSeverity: LOW\nDefense verdict: REBUT\n";
    let (json, text) = (
        attack_prompt("q", 2, "fn login() {}", Some(previous), Some(&a)),
        attack_prompt("q", 2, "fn login() {}", Some(previous), None),
    );
    for kept in [
        ATTACK_HEAD,
        "Find the weaknesses of the content below",
        "This is round 2.",
        "Look for NEW weaknesses",
        "=== CONTENT ===\nfn login() {}\n=== END CONTENT ===",
    ] {
        assert!(json.contains(kept) && text.contains(kept), "{kept}");
    }
    assert!(json.contains("Reply with a single JSON object"));
    assert!(!json.contains("FINDING <n>") && !json.contains("FINDINGS: NONE"));
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"findings\"").unwrap());
    assert!(json.contains("an empty list if you found none"));
    assert!(text.ends_with(
        "Report each finding exactly so:\n\nFINDING <n>: <title>\nSeverity: CRITICAL|HIGH|MEDIUM|LOW\n\
         Location: <where>\nVulnerability: <what is wrong>\nExploit Scenario: <how it is exploited>\n\n\
         Then:\nSUMMARY:\nCritical: n, High: n, Medium: n, Low: n\nOverall risk: <text>\n\n\
         If you find nothing, reply with the line FINDINGS: NONE"
    ));
    assert!(!text.contains("JSON"));

    let findings = read_attack(ATTACK).findings;
    let d = defense_schema(findings.len(), 13);
    let (json, text) = (
        defend_prompt("q", "fn login() {}", &findings, "raw", Some(&d)),
        defend_prompt("q", "fn login() {}", &findings, "raw", None),
    );
    for kept in
        [DEFEND_HEAD, "FINDING 1: SQL injection\nSeverity: CRITICAL", "FINDING 2: Plain-text"]
    {
        assert!(json.contains(kept) && text.contains(kept), "{kept}");
    }
    assert!(json.contains("complete revised content") && json.contains("Reply with a single JSON"));
    assert!(!json.contains("RESPONSE TO FINDING") && !json.contains("REVISED CONTENT:"));
    assert!(json.contains("a whole number from 1 to 2"), "the round's findings by number");
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"responses\"").unwrap());
    assert!(text.ends_with(
        "Answer every finding exactly so:\n\nRESPONSE TO FINDING <n>: <title>\n\
         Verdict: ACCEPT|REBUT\nReasoning: <why>\nRevision: <the change, or N/A for a rebuttal>\n\n\
         Then a line DEFENSE SUMMARY: with a short summary, and last a line REVISED CONTENT: \
         followed by the complete revised content (all of it, with the accepted fixes applied)."
    ));
}

#[test]
fn a_run_asks_for_json_where_the_route_takes_it_and_says_how_each_reply_was_read() {
    let mut m = structured_mode(2);
    let all = drive(&mut m, |c| {
        Some(match c.stage.as_str() {
            "generate" => "## 1. Login\nfn login() {}".into(),
            "attack_round_1" => json_attack(vec![
                json_finding("SQL injection", "CRITICAL"),
                json_finding("Plain-text passwords", "HIGH"),
            ]),
            "defend_round_1" => json_defense(
                vec![
                    json_response(1, "ACCEPT", "prepared statements"),
                    json_response(2, "REBUT", ""),
                ],
                "## 1. Login\nfn login() { prepared() }",
            ),
            // The second round's attacker ignores the schema; its defender states nothing.
            "attack_round_2" => ATTACK.into(),
            "defend_round_2" => "It all holds up.".into(),
            _ => SYNTHESIS.into(),
        })
    });
    assert_eq!(finished(&all).as_deref(), Some(SYNTHESIS));
    let calls = crate::modes::testkit::calls(&all);
    let schema_of = |key: &str| {
        calls.iter().find(|c| c.key == key).unwrap().schema.as_ref().map(|s| s.name.clone())
    };
    assert_eq!(schema_of("attack:1").as_deref(), Some(ATTACK_SCHEMA));
    assert_eq!(schema_of("defend:1").as_deref(), Some(DEFENSE_SCHEMA));
    assert_eq!((schema_of("generate"), schema_of("synthesis")), (None, None), "text people read");
    let attack2 = calls.iter().find(|c| c.key == "attack:2").unwrap();
    let prompt = &attack2.messages[0].content;
    assert!(prompt.contains("Reply with a single JSON object"));
    assert!(prompt.contains("fn login() { prepared() }"), "the JSON's revised content is attacked");
    assert!(attack2.material.iter().any(|m| &*m.text == "## 1. Login\nfn login() { prepared() }"));
    // The defense's schema counts the round's findings.
    let defend1 = calls.iter().find(|c| c.key == "defend:1").unwrap();
    assert_eq!(defend1.schema.as_ref().unwrap().schema["properties"]["responses"]["maxItems"], 2);

    let attacks: Vec<Value> = all_emitted(&all, "attack_complete");
    assert_eq!(attacks[0]["data"]["readFrom"], "json");
    assert_eq!(attacks[0]["data"]["severityCounts"]["CRITICAL"], 1);
    assert_eq!(attacks[1]["data"]["readFrom"], "text");
    let defenses: Vec<Value> = all_emitted(&all, "defend_complete");
    assert_eq!(defenses[0]["data"]["readFrom"], "json");
    assert_eq!(
        (defenses[0]["data"]["accepted"].as_u64(), defenses[0]["data"]["rebutted"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(defenses[1]["data"].get("readFrom").is_none(), "nothing read: unparsed");
    assert_eq!(defenses[1]["data"]["unaddressed"], 2);
    // The rows say it, once per reply, and the result rebuilt from them is what went out
    // (the JSON's revised content read again by the schema it was read by).
    let stored = rows(&all);
    let read: Vec<(&str, &Value)> = stored
        .iter()
        .filter_map(|r| Some((r.stage_type.as_str(), r.parsed_data.as_ref()?.get("readFrom")?)))
        .collect();
    assert_eq!(
        read,
        [
            ("attack_round_1", &json!("json")),
            ("defend_round_1", &json!("json")),
            ("attack_round_2", &json!("text")),
        ]
    );
    assert_reloads(&all);
    let r = load_result(&stored);
    assert_eq!(
        r["rounds"][0]["defense"]["revisedContent"],
        "## 1. Login\nfn login() { prepared() }"
    );
}

#[test]
fn a_report_the_defender_gets_raw_reads_as_fields() {
    // JSON that does not fit (a severity outside the four) and that the text reader cannot
    // read: the defender gets the raw report, read as fields, not as JSON.
    let mut m = structured_mode(1);
    let all = drive(&mut m, |c| {
        Some(match c.stage.as_str() {
            "attack_round_1" => json_attack(vec![json_finding("SQL injection", "SEVERE")]),
            s if s.starts_with("defend") => {
                json!({ "reasoning": "", "summary": "", "revisedContent": "fixed" }).to_string()
            }
            _ => scripted(c)?,
        })
    });
    let defend =
        crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "defend:1").unwrap();
    let prompt = &defend.messages[0].content;
    assert!(prompt.contains("Severity: SEVERE") && !prompt.contains("\"severity\""), "{prompt}");
    assert!(defend.schema.as_ref().unwrap().schema["properties"].get("responses").is_none());
    let d = emitted(&all, "defend_complete").unwrap();
    assert_eq!(
        (&d["data"]["readFrom"], &d["data"]["revisedContent"]),
        (&json!("json"), &json!("fixed"))
    );
    assert_reloads(&all);
}

#[test]
fn the_sim_answers_its_schemas_in_json_and_no_other() {
    for seed in 0..8u64 {
        let mut m = structured_mode(3);
        let all = drive(&mut m, |c| {
            sim_reply(
                c,
                seed,
                false,
                seed % 2 == 1,
                c.schema.as_deref().filter(|_| c.model != "syn"),
            )
        });
        assert!(finished(&all).is_some(), "the run completes");
        for e in &all {
            if let Effect::Emit { event, data } = e {
                if event == "attack_complete" || event == "defend_complete" {
                    assert_eq!(data["data"]["readFrom"], "json", "{data}");
                }
                if event == "defend_complete" {
                    assert_eq!(data["data"]["revisedContentFound"], true);
                    assert_eq!(data["data"]["unaddressed"], 0);
                    assert!(data["data"]["revisedContent"]
                        .as_str()
                        .unwrap()
                        .contains("## 1. Material"));
                }
            }
        }
        assert_reloads(&all);
    }
    let other = ReplySchema::new("council_ranking", schema::reasoned([]));
    let prompt = attack_prompt("q", 1, "x", None, None);
    let ask = sim_ask("sim/beta", &prompt, 1, false, Some(&other));
    assert_eq!(sim_answer(&ask), None);
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, protocol word or key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["FINDING", "SEVERITY", "ACCEPT", "REBUT"])
}

#[test]
fn the_report_tables_each_rounds_findings_with_the_defense_and_the_totals() {
    let mut m = mode(2);
    let all = drive(&mut m, scripted);
    let r = readable(&load_result(&rows(&all)));
    assert_contains_all(
        &r,
        &[
            "|---",
            "**Hardened output:** by syn; hardening confidence high.",
            "**Round 1** (attacker att, defender gen)",
            "**Round 2**",
            "| 1 | critical | SQL injection | Section 1, `login` | accepted | Use a prepared statement. |",
            "| 2 | high | Plain-text passwords | Section 1 | rebutted | Hashing happens upstream. |",
            "Overall risk as the attacker put it: high.",
            "**Totals:** 4 findings (2 critical, 2 high): 2 accepted, 2 rebutted, 0 not answered.",
        ],
    );
    assert!(!r.contains("ended early"), "{r}");

    // No flaws in round 1: said, and why the rounds ended.
    let mut m = mode(3);
    let all = drive(&mut m, |c| {
        Some(if c.stage.starts_with("attack") { "FINDINGS: NONE".into() } else { scripted(c)? })
    });
    let r = readable(&load_result(&rows(&all)));
    assert_contains_all(
        &r,
        &[
            "The attacker found no flaws.",
            "**The rounds ended early:** the attacker found no flaws.",
        ],
    );

    // A failed defense, a severity not stated: unanswered, and said to be unread.
    let mut m = mode(1);
    let attack = "FINDING 1: Open redirect\nLocation: /next\n";
    let all = drive(&mut m, |c| match c.stage.as_str() {
        s if s.starts_with("attack") => Some(attack.into()),
        s if s.starts_with("defend") => None,
        _ => scripted(c),
    });
    let r = readable(&load_result(&rows(&all)));
    assert_contains_all(
        &r,
        &[
            "| 1 | not stated (medium used) | Open redirect | /next | not answered | — |",
            "The defender's call failed",
        ],
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // An attack report with no finding that can be read says so.
    let mut m = mode(1);
    let prose = || Some("There is a critical SQL injection and a high severity XSS.".into());
    let all = drive(&mut m, |c| if c.stage.starts_with("attack") { prose() } else { scripted(c) });
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("**Round 1**") && r.contains("No finding could be read"), "{r}");
    // A run stopped before its synthesis: the rounds as far as they went.
    let mut m = mode(2);
    let all = drive(&mut m, |c| if c.stage == "synthesis" { None } else { scripted(c) });
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("|---") && !r.contains("Hardened output"), "{r}");
}
