//! Red Team driven with fake replies, and its parsers on recorded and adversarial outputs.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{ctx, emitted, err, events, failed, finished, ok, rows, stage_calls};
use crate::modes::validate;

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
        severity_counts(a.findings.iter().map(|f| f.severity.as_str())),
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
    let mut all = m.start();
    let mut pending = stage_calls(&all);
    while let Some(c) = pending.pop() {
        let reply = match answer(&c) {
            Some(t) => ok(&c, &t),
            None => err(&c),
        };
        let out = m.on_reply(reply);
        pending.extend(stage_calls(&out));
        all.extend(out);
    }
    for c in crate::modes::testkit::calls(&all).into_iter().filter(|c| c.key == "title") {
        all.extend(m.on_reply(ok(&c, "Login Review")));
    }
    all
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
    let attacks: Vec<Value> = all
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { event, data } if event == "attack_complete" => {
                Some(data["data"].clone())
            }
            _ => None,
        })
        .collect();
    let defenses: Vec<Value> = all
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { event, data } if event == "defend_complete" => Some(data.clone()),
            _ => None,
        })
        .collect();
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
    let calls = crate::modes::testkit::calls(&all);
    assert!(calls.iter().any(|c| c.key == "synthesis:backup" && c.model == "spare"));
    let message = failed(&all).unwrap();
    assert!(message.contains("syn") && message.contains("spare"), "{message}");
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
    let defaults =
        Defaults { offline: true, stage_timeout_ms: 120_000, fallback: Default::default() };
    let bad = |cfg: Value| {
        validate(&json!({ "mode": "red_team", "question": "q", "modeConfig": cfg }), &defaults)
            .unwrap_err()
            .field
    };
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

#[test]
fn the_sim_answers_every_step_in_format_and_sometimes_out_of_it() {
    for malformed in [false, true] {
        for seed in 0..8u64 {
            let mut m = mode(3);
            let all = drive(&mut m, |c| {
                sim_answer(&SimAsk {
                    model: &c.model,
                    prompt: &c.messages[0].content,
                    messages: &c.messages,
                    seed: seed * 31 + c.key.len() as u64,
                    malformed,
                    hostile: false,
                })
            });
            assert!(finished(&all).is_some(), "the run completes");
            let a = emitted(&all, "attack_complete").unwrap()["data"].clone();
            assert_eq!(a["parseSuccess"], !malformed, "{a}");
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
    let other = SimAsk {
        model: "sim/a",
        prompt: "What is 2+2?",
        messages: &[],
        seed: 1,
        malformed: false,
        hostile: false,
    };
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
