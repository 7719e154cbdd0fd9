//! Specialist Panel driven with fake replies, and its parsers on recorded-style and
//! adversarial outputs.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted_data, assert_contains_all, assert_the_backup_synthesizer_failed_too, ctx, emitted,
    events, failed, fields, finished, offline_defaults, ok, readable_report, rows, sim_ask,
    sim_call_ask, stage_calls, validate_config,
};
use crate::modes::{validate, Mode};

fn crit(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn security() -> Vec<String> {
    crit(&LIBRARY[0].criteria)
}

const REPORT: &str = "<think>Maybe | Data Protection | 1 | draft |</think>\n\
Here is my assessment as the Security Expert.\n\n\
## 1. Key Findings\n\n1. Tokens are long-lived.\n   They never rotate.\n2) No WAF in front of the API.\n\
- Secrets live in environment files.\n\n\
### Risk Assessment (1-5)\n\n\
| Criterion | Rating (1-5) | Notes |\n|:---|:---:|---|\n\
| **Authentication & Authorization** | 4/5 | SSO everywhere |\n\
| Data Protection | 2 | backups unencrypted |\n\
| input validation | 3.5 | schema checks on most routes |\n\
| Attack Surface | 8 | (the model's own scale) |\n\n\
**Top 3 Recommendations:**\n\n1. Rotate tokens.\n2. Add a WAF.\n3. Move secrets to a vault.\n4. Train staff.\n\n\
### Detailed Analysis\n\nThe plan is sound overall. Incident Response Readiness: 3 of the runbooks exist.\n";

// ---- parsers -------------------------------------------------------------------------------

#[test]
fn a_report_is_read_where_it_states_things() {
    let r = read_report(REPORT, &security());
    let scores: Vec<Option<u8>> = r.criteria_scores.iter().map(|c| c.score).collect();
    // 4/5 → 4, 2, 3.5 → 4 (half up), 8 is outside 1-5, and "3 of the runbooks" is prose.
    assert_eq!(scores, [Some(4), Some(2), Some(4), None, None]);
    assert_eq!(r.criteria_scores[0].notes.as_deref(), Some("SSO everywhere"));
    assert_eq!(r.criteria_scores[4].notes, None);
    assert_eq!(r.average_score, Some(3.3));
    assert!(r.parse_success);
    assert_eq!(
        r.key_findings,
        [
            "Tokens are long-lived. They never rotate.",
            "No WAF in front of the API.",
            "Secrets live in environment files."
        ]
    );
    assert_eq!(r.top_recommendations, ["Rotate tokens.", "Add a WAF.", "Move secrets to a vault."]);
}

#[test]
fn ratings_come_from_the_last_row_the_named_column_or_a_stated_line() {
    let c = crit(&["Fault Tolerance", "Latency Under Load", "Resource Efficiency"]);
    let text =
        "| Criterion | Notes | Score |\n|---|---|---|\n| Fault Tolerance | one AZ only | 2 |\n\
        \n| Criterion | Rating | Notes |\n|--|--|--|\n| fault  tolerance | 3 | on reflection |\n\n\
        - **Latency Under Load:** 4/5 — fine at peak\nLatency under load: 5\n\
        Resource Efficiency: 2 main gaps were found\n";
    let s = read_scores(text, &c);
    assert_eq!((s[0].score, s[0].notes.as_deref()), (Some(3), Some("on reflection")));
    assert_eq!(s[1].score, Some(5), "the last line wins");
    assert_eq!(s[2].score, None, "a number in prose is not a rating");
    // A column named Score is read where it stands.
    let s = read_scores(
        "| Criterion | Notes | Score |\n|---|---|---|\n| Fault Tolerance | one AZ | 2 |",
        &c,
    );
    assert_eq!((s[0].score, s[0].notes.as_deref()), (Some(2), Some("one AZ")));
    let s = read_scores("- **Latency Under Load:** 4/5 — fine at peak", &c);
    assert_eq!((s[1].score, s[1].notes.as_deref()), (Some(4), Some("fine at peak")));
}

#[test]
fn what_is_not_stated_is_not_guessed() {
    let c = security();
    for text in [
        "",
        "I'm sorry, but I can't help with assessing security of this plan.",
        "Overall I'd say the security is good, maybe a 4.",
        "| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n| Data Protection | <1-5> | <why> |",
        "| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n| Data Protection | High | risky |",
        "| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n| Data Protection | 0 | none |",
        "| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n| Data Protection | 5.5 | over |",
        "| Authentication and Authorization | 4 | not the criterion's name |",
        "<think>| Data Protection | 4 | x |\nData Protection: 4</think>The end.",
        "```json\n{\"Data Protection\": 4}\n```",
    ] {
        let r = read_report(text, &c);
        assert!(r.criteria_scores.iter().all(|s| s.score.is_none()), "{text:?}: {r:?}");
        assert!(!r.parse_success && r.average_score.is_none(), "{text:?}");
    }
    let r = read_report("no sections here", &c);
    assert!(r.key_findings.is_empty() && r.top_recommendations.is_empty());
}

#[test]
fn headings_match_at_any_level_or_bold_and_lists_without_markers_are_lines() {
    assert_eq!(heading_name("#### key findings").as_deref(), Some("key findings"));
    assert_eq!(heading_name("**Executive Summary:**").as_deref(), Some("Executive Summary"));
    assert_eq!(heading_name("__Divergent Findings__").as_deref(), Some("Divergent Findings"));
    assert_eq!(heading_name("**Data Protection**: 4"), None);
    assert_eq!(heading_name("plain line"), None);
    let s = sections("**KEY FINDINGS**\nA\nB\n#### Detailed analysis\nText", &REPORT_SECTIONS);
    assert_eq!(s[0].as_deref(), Some("A\nB"));
    assert_eq!(s[3].as_deref(), Some("Text"));
    assert_eq!(s[1], None);
    assert_eq!(list_items("A\n\nB"), ["A", "B"]);
    assert_eq!(list_items("Intro:\n• one\n* two\nmore"), ["one", "two more"]);
    assert_eq!(list_items("1.5 million users\n- real"), ["real"], "1.5 is not a marker");
}

const SYNTHESIS: &str = "## Convergent Findings\n1. Secrets handling is weak (Security Expert, DevOps Engineer).\n\
2. Costs are unclear (Cost Analyst, Scalability Architect).\n\n\
## Divergent Findings\n| Finding | One View | Other View | Suggested Resolution |\n|---|---|---|---|\n\
| Rollout pace | slow | fast | two stages |\n| Region | one | two | start with one |\n\n\
## Consolidated Risk Matrix\n| Domain | Risk Level | Concern | Action | Source Roles |\n|---|---|---|---|---|\n\
| Cost | Medium | Egress fees | Measure | Cost Analyst |\n| Security | **HIGH** | Secrets | Vault | Security Expert; DevOps Engineer |\n\
| Data | High | Backups | Encrypt | Security Expert |\n| Ops | unclear | Paging | Rota | DevOps Engineer |\n\n\
## Unified Recommendations\n1. Vault.\n2. Measure costs.\n\n## Executive Summary\nGo, after fixing secrets.";

#[test]
fn a_synthesis_gives_its_sections_counts_and_risk_matrix() {
    let s = read_synthesis(SYNTHESIS);
    assert_eq!(s.sections["executiveSummary"], "Go, after fixing secrets.");
    assert_eq!(
        s.counts,
        Counts {
            convergent_findings: 2,
            divergent_findings: 2,
            risk_matrix: 4,
            unified_recommendations: 2
        }
    );
    assert_eq!(s.risk_matrix[1].level.as_deref(), Some("High"));
    assert_eq!(s.risk_matrix[1].sources, ["Security Expert", "DevOps Engineer"]);
    assert_eq!(s.risk_matrix[1].concern, "Secrets", "Concern, not Risk Level");
    assert_eq!(s.risk_matrix[3].level, None, "a level not stated is null");
    let top = s.top_risk.unwrap();
    assert_eq!((top.domain.as_str(), top.level.as_deref()), ("Security", Some("High")));
    // Nothing in format: every section empty, no risk.
    let s = read_synthesis("The panel agrees it is fine.");
    assert_eq!(s.sections["executiveSummary"], "");
    assert_eq!(s.counts.convergent_findings, 0);
    assert!(s.risk_matrix.is_empty() && s.top_risk.is_none());
}

#[test]
fn custom_keys_are_slugs() {
    assert_eq!(custom_key("  Support Lead "), "custom_support_lead");
    assert_eq!(custom_key("UX/Research-2"), "custom_ux_research_2");
}

proptest! {
    /// A report written in the requested format reads back as written, whatever its markup.
    #[test]
    fn a_report_in_format_reads_back_as_written(
        scores in prop::collection::vec(prop::option::of(1u8..=5), 3..8),
        bold in any::<bool>(),
        suffix in prop::sample::select(vec!["", "/5", ".0", " / 5"]),
        findings in prop::collection::vec("[A-Za-z][a-z ]{0,20}[a-z]", 0..6),
    ) {
        let criteria: Vec<String> = (0..scores.len()).map(|i| format!("Criterion {i} name")).collect();
        let mut text = String::from("### Key Findings\n");
        for (i, f) in findings.iter().enumerate() {
            text.push_str(&format!("{}. {f}\n", i + 1));
        }
        text.push_str("\n### Risk Assessment\n| Criterion | Rating (1-5) | Notes |\n|---|---|---|\n");
        for (c, s) in criteria.iter().zip(&scores) {
            let name = if bold { format!("**{c}**") } else { c.clone() };
            let cell = s.map_or("N/A".to_string(), |s| format!("{s}{suffix}"));
            text.push_str(&format!("| {name} | {cell} | note |\n"));
        }
        let r = read_report(&text, &criteria);
        let read: Vec<Option<u8>> = r.criteria_scores.iter().map(|c| c.score).collect();
        prop_assert_eq!(&read, &scores);
        prop_assert_eq!(r.parse_success, scores.iter().any(Option::is_some));
        prop_assert_eq!(r.key_findings.len(), findings.len());
    }

    /// Any text: no panic, every score 1-5 and stated in the text, the average within 1-5,
    /// at most 3 recommendations, every risk level one of the four.
    #[test]
    fn any_reply_reads_safely(
        text in "(?s).{0,400}",
        extra in "(\\| Data Protection \\| |Data Protection: |### Key Findings\n|### Consolidated Risk Matrix\n\\| a \\| |<think>|\\*\\*)",
    ) {
        let text = format!("{extra}{text}");
        let r = read_report(&text, &security());
        for c in &r.criteria_scores {
            if let Some(s) = c.score {
                prop_assert!((1..=5).contains(&s));
                prop_assert!(text.contains(&s.to_string()) || text.contains('.'));
            }
        }
        if let Some(a) = r.average_score {
            prop_assert!((1.0..=5.0).contains(&a));
        }
        prop_assert!(r.top_recommendations.len() <= 3);
        prop_assert_eq!(r.parse_success, r.average_score.is_some());
        let s = read_synthesis(&text);
        for row in &s.risk_matrix {
            if let Some(l) = &row.level {
                prop_assert!(LEVELS.contains(&l.as_str()));
            }
        }
        prop_assert_eq!(s.top_risk.is_some(), s.risk_matrix.iter().any(|r| r.level.is_some()));
    }
}

// ---- the run -------------------------------------------------------------------------------

fn config(roles: &[&str]) -> Value {
    let specialists: Vec<Value> = roles
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let lib = LIBRARY.iter().find(|l| l.key == *r).unwrap();
            json!(library_role(lib, format!("m{i}")))
        })
        .collect();
    json!({ "specialists": specialists, "synthesizerModel": "syn", "timeoutMs": 150000,
            "chairmanFallbackModel": "spare" })
}

fn panel(roles: &[&str]) -> SpecialistPanel {
    SpecialistPanel::new(&config(roles), ctx("Assess our EKS migration plan", vec![], true))
        .unwrap()
}

const THREE: [&str; 3] = ["security_expert", "scalability_architect", "cost_analyst"];

/// Drives a run; `answer` gives each call's reply (None: the call fails). Replies arrive in
/// reverse call order.
fn drive(m: &mut SpecialistPanel, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    crate::modes::testkit::drive(m, answer, "EKS Migration Review")
}

fn scripted(c: &CallSpec) -> Option<String> {
    Some(if c.key == "synthesis" { SYNTHESIS.into() } else { REPORT.into() })
}

/// The result rebuilt from the rows equals what went out live.
fn assert_reloads(all: &[Effect]) {
    let result = load_result(&rows(all));
    let completes: Vec<Value> = all_emitted_data(all, "specialist_complete");
    let mut sorted = completes.clone();
    sorted.sort_by_key(|c| c["index"].as_u64());
    assert_eq!(result["specialists"], json!(sorted));
    if let Some(a) = emitted(all, "all_specialists_complete") {
        assert_eq!(result["specialists"], a["data"]["specialists"]);
        assert_eq!(result["failedSpecialists"], a["data"]["failedSpecialists"]);
    }
    if let Some(s) = emitted(all, "synthesis_complete") {
        assert_eq!(result["synthesis"], s["data"]);
        assert_eq!(result["partial"], s["partial"]);
        assert_eq!(result["failedModels"], s["failedModels"]);
    }
    let start = emitted(all, "panel_start").unwrap();
    assert_eq!(result["roles"], start["roles"]);
}

#[test]
fn specialists_report_in_parallel_then_one_synthesis() {
    let mut m = panel(&THREE);
    let start = m.start();
    let calls = stage_calls(&start);
    assert_eq!(calls.len(), 3, "every specialist at once");
    assert_eq!(calls[0].messages[0].role, "system");
    let system = &calls[0].messages[0].content;
    assert_contains_all(
        system,
        &[
            "Security Expert",
            "Your lens:",
            "1. Exploitable weaknesses",
            "4. Detecting",
            "- Incident Response Readiness",
            "### Risk Assessment",
        ],
    );
    assert!(calls[0].messages[1].content.contains("Assess our EKS migration plan"));
    assert_eq!(calls[1].stage, "specialist_scalability_architect");
    assert_eq!(calls[1].role, "specialist");
    let mut m = panel(&THREE);
    let all = drive(&mut m, scripted);
    assert_eq!(
        events(&all),
        [
            "panel_start",
            "specialist_start",
            "specialist_complete",
            "specialist_complete",
            "specialist_complete",
            "all_specialists_complete",
            "synthesis_start",
            "synthesis_complete",
            "title_complete",
        ]
    );
    let answer = finished(&all).unwrap();
    assert!(answer.starts_with("## Convergent Findings"));
    let c = emitted(&all, "specialist_complete").unwrap()["data"].clone();
    assert_eq!(c["index"], 2, "the last call answered first");
    assert_eq!(c["roleKey"], "cost_analyst");
    assert!(!c["report"].as_str().unwrap().contains("<think>"), "reasoning is set aside");
    let orders: Vec<(String, i32, Option<String>)> =
        rows(&all).iter().map(|r| (r.stage_type.clone(), r.stage_order, r.role.clone())).collect();
    assert_eq!(orders[0], ("panel".into(), 0, None));
    assert_eq!(orders[1], ("specialist_cost_analyst".into(), 1, Some("cost_analyst".into())));
    assert_eq!(orders[4], ("synthesis".into(), 2, Some("synthesizer".into())));
    let row = &rows(&all)[1];
    assert!(row.parsed_data.as_ref().unwrap().get("report").is_none());
    let synth = crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "synthesis");
    let prompt = synth.unwrap().messages[0].content.clone();
    assert!(prompt.contains("=== REPORT: Security Expert (m0) ==="), "{prompt}");
    assert!(!prompt.contains("missing"));
    let s = emitted(&all, "synthesis_complete").unwrap();
    assert_eq!(s["data"]["topRisk"]["domain"], "Security");
    assert_eq!(s["data"]["integratedAssessment"], answer);
    assert_eq!(s["partial"], false);
    assert_reloads(&all);
    let r = load_result(&rows(&all));
    assert_eq!(r["material"]["source"], "question");
    assert_eq!(r["material"]["text"], "Assess our EKS migration plan");
    assert!(outcome(&r).unwrap().starts_with("3 specialists; top risk High (Security): Go"));
}

#[test]
fn failed_and_empty_reports_are_named_to_the_synthesizer() {
    let mut m = panel(&THREE);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "specialist:0" => None,
        "specialist:1" => Some("<think>all thought, no answer</think>".into()),
        _ => scripted(c),
    });
    // One report is left: the run fails, the report kept.
    assert!(failed(&all).unwrap().contains("Only 1 of 3"));
    let a = emitted(&all, "all_specialists_complete").unwrap()["data"].clone();
    assert_eq!(fields(&a, ["totalSucceeded", "totalFailed"]), [json!(1), json!(2)]);
    assert_eq!(a["failedSpecialists"][1]["error"], "empty reply");
    let r = load_result(&rows(&all));
    assert_eq!(r["specialists"].as_array().unwrap().len(), 1);
    assert_eq!(r["failedSpecialists"][0]["roleKey"], "security_expert");
    assert_eq!(r["synthesis"], Value::Null);
    assert_eq!(r["partial"], true);
    assert_reloads(&all);
    // Two of three: the synthesis goes on and is told who is missing.
    let mut m = panel(&THREE);
    let all = drive(&mut m, |c| if c.key == "specialist:1" { None } else { scripted(c) });
    let synth = crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "synthesis");
    let prompt = synth.unwrap().messages[0].content.clone();
    assert!(prompt.contains("- Scalability Architect (m1)"), "{prompt}");
    let s = emitted(&all, "synthesis_complete").unwrap();
    assert_eq!(s["partial"], true);
    assert_eq!(s["failedModels"][0]["stage"], "specialist_scalability_architect");
    assert_reloads(&all);
}

#[test]
fn an_unparseable_report_still_goes_to_the_synthesizer() {
    let mut m = panel(&THREE);
    let all = drive(&mut m, |c| {
        Some(if c.key == "specialist:2" {
            "I'd rather not rate this.".into()
        } else {
            scripted(c)?
        })
    });
    let a = emitted(&all, "all_specialists_complete").unwrap()["data"].clone();
    let off =
        a["specialists"].as_array().unwrap().iter().find(|s| s["index"] == 2).unwrap().clone();
    assert_eq!(off["parseSuccess"], false);
    assert_eq!(off["unparsed"], "refused", "why no rating was read");
    assert_eq!(off["averageScore"], Value::Null);
    assert!(off["criteriaScores"].as_array().unwrap().iter().all(|c| c["score"].is_null()));
    let synth = crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "synthesis");
    assert!(synth.unwrap().messages[0].content.contains("I'd rather not rate this."));
    assert!(finished(&all).is_some());
}

#[test]
fn the_synthesizer_falls_back_once_and_the_run_fails_when_both_fail() {
    let mut m = panel(&THREE);
    let all = drive(&mut m, |c| if c.stage == "synthesis" { None } else { scripted(c) });
    assert_the_backup_synthesizer_failed_too(&all);
    let r = load_result(&rows(&all));
    assert_eq!(r["specialists"].as_array().unwrap().len(), 3, "stage 1 is kept");
    assert_eq!(r["synthesis"], Value::Null);
    // The backup answers: fallbackFrom.
    let mut m = panel(&THREE);
    let all =
        drive(
            &mut m,
            |c| if c.key == "synthesis" && c.model == "syn" { None } else { scripted(c) },
        );
    let s = emitted(&all, "synthesis_complete").unwrap();
    assert_eq!(s["data"]["fallbackFrom"], "syn");
    assert_eq!(s["data"]["model"], "spare");
    assert_eq!(s["failedModels"][0]["fallbackTo"], "spare");
    assert_reloads(&all);
}

#[test]
fn a_cancelled_run_keeps_the_reports_that_arrived() {
    let mut m = panel(&THREE);
    let start = m.start();
    let calls = stage_calls(&start);
    let mut all = start.clone();
    all.extend(m.on_reply(ok(&calls[1], REPORT)));
    let r = load_result(&rows(&all));
    assert_eq!(r["specialists"].as_array().unwrap().len(), 1);
    assert_eq!(r["specialists"][0]["roleKey"], "scalability_architect");
    assert_eq!(r["synthesis"], Value::Null);
    assert_eq!(r["partial"], false);
    // A reply to a key it never issued, or a second reply to one, changes nothing.
    let mut dup = ok(&calls[1], REPORT);
    assert!(m.on_reply(dup.clone()).is_empty());
    dup.key = "specialist:9".into();
    assert!(m.on_reply(dup).is_empty());
}

#[test]
fn requests_are_checked_field_by_field() {
    let d = offline_defaults();
    let bad = |cfg: Value| validate_config("specialist_panel", cfg).unwrap_err();
    let sec = json!({ "roleId": "security_expert", "model": "a" });
    let cost = json!({ "roleId": "cost_analyst", "model": "b" });
    let custom = |role: Value| json!({ "specialists": [sec, { "roleId": "custom", "model": "c", "customRole": role }] });
    let good_role = json!({ "title": "Support Lead", "expertiseAreas": "customer support",
        "description": "what customers notice first", "priorities": ["one", "two", "three"],
        "criteria": ["Impact", "Comms", "Rollback"] });
    let with = |k: &str, v: Value| {
        let mut r = good_role.clone();
        r[k] = v;
        custom(r)
    };
    let f = "modeConfig.specialists[1].customRole";
    let cases: Vec<(Value, String)> = vec![
        (json!({ "specialists": [sec] }), "modeConfig.specialists".into()),
        (json!({ "specialists": vec![sec.clone(); 7] }), "modeConfig.specialists".into()),
        (
            json!({ "specialists": [sec, { "model": "b" }] }),
            "modeConfig.specialists[1].roleId".into(),
        ),
        (
            json!({ "specialists": [sec, { "roleId": "cost_analyst" }] }),
            "modeConfig.specialists[1].model".into(),
        ),
        (
            json!({ "specialists": [sec, { "roleId": "cost_analyst", "model": " " }] }),
            "modeConfig.specialists[1].model".into(),
        ),
        (
            json!({ "specialists": [sec, { "roleId": "poet", "model": "b" }] }),
            "modeConfig.specialists[1].roleId".into(),
        ),
        (json!({ "specialists": [sec, sec] }), "modeConfig.specialists[1].roleId".into()),
        (json!({ "specialists": [sec, { "roleId": "custom", "model": "c" }] }), f.into()),
        (
            json!({ "specialists": [sec, { "roleId": "cost_analyst", "model": "c", "customRole": good_role }] }),
            f.into(),
        ),
        (with("title", json!("ab")), format!("{f}.title")),
        (with("title", json!("   ")), format!("{f}.title")),
        (with("expertiseAreas", json!("too short")), format!("{f}.expertiseAreas")),
        (with("description", json!("nineteen characters")), format!("{f}.description")),
        (with("priorities", json!(["one", "two"])), format!("{f}.priorities")),
        (
            with("priorities", json!(["a", "b", "c", "d", "e", "f", "g"].map(|s| s.repeat(3)))),
            format!("{f}.priorities"),
        ),
        (with("priorities", json!(["one", "two", "ab"])), format!("{f}.priorities")),
        (with("priorities", json!(["one", "two", "ONE "])), format!("{f}.priorities")),
        (with("criteria", json!(["Impact", "Comms"])), format!("{f}.criteria")),
        (with("criteria", json!(vec!["Impact"; 9])), format!("{f}.criteria")),
        (with("criteria", json!(["Impact", "Comms", "im pact"])), format!("{f}.criteria")),
        (with("criteria", json!(["Impact", "Comms", "a|b"])), format!("{f}.criteria")),
        (with("criteria", json!(["Impact", "Comms", "two\nlines"])), format!("{f}.criteria")),
        (with("colour", json!("red")), "modeConfig.specialists[1].customRole.colour".into()),
        (json!({ "timeoutMs": 9999 }), "modeConfig.timeoutMs".into()),
        (json!({ "timeoutMs": 600001 }), "modeConfig.timeoutMs".into()),
        (json!({ "content": "  " }), "modeConfig.content".into()),
        (json!({ "content": "x".repeat(MAX_MATERIAL_CHARS + 1) }), "modeConfig.content".into()),
        (json!({ "synthesizerModel": "" }), "modeConfig.synthesizerModel".into()),
    ];
    for (cfg, field) in cases {
        let e = bad(cfg.clone());
        assert_eq!(e.field, field, "{cfg}: {e}");
    }
    // Two custom roles whose titles slug alike clash.
    let two = json!({ "specialists": [
        { "roleId": "custom", "model": "a", "customRole": good_role },
        { "roleId": "custom", "model": "b", "customRole": { "title": "support-lead", "expertiseAreas": "customer support",
          "description": "what customers notice first", "priorities": ["one", "two", "three"],
          "criteria": ["Impact", "Comms", "Rollback"] } } ] });
    let e = bad(two);
    assert_eq!(e.field, "modeConfig.specialists[1].customRole.title");
    assert!(e.message.contains("custom_support_lead"), "{e}");
    let e = bad(json!({ "specialists": [sec, { "roleId": "poet", "model": "b" }] }));
    assert!(e.message.contains("security_expert") && e.message.contains("custom"), "{e}");
    let e = validate(&json!({ "mode": "specialist_panel" }), &d).unwrap_err();
    assert_eq!(e.field, "question");
    // Defaults: the three roles on Council's models, the first synthesizing.
    let v = validate(&json!({ "mode": "specialist_panel", "question": "q" }), &d).unwrap();
    let keys: Vec<&str> = v.config["specialists"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["roleKey"].as_str().unwrap())
        .collect();
    assert_eq!(keys, THREE);
    assert_eq!(v.config["synthesizerModel"], "sim/alpha");
    assert_eq!(v.config["timeoutMs"], 150000);
    assert_eq!(v.models, ["sim/alpha", "sim/beta", "sim/gamma"]);
    let online = Defaults { offline: false, ..d.clone() };
    let v = validate(&json!({ "mode": "specialist_panel", "question": "q" }), &online).unwrap();
    assert_eq!(v.config["specialists"][1]["model"], "openai/o3");
    // A custom role is stored in full; the same model may hold two roles; the backup is copied.
    let backup = Defaults {
        fallback: crate::modes::Fallbacks {
            chairman: Some("sim/spare".into()),
            ..Default::default()
        },
        ..d
    };
    let v = validate(
        &json!({ "mode": "specialist_panel", "question": "q", "modeConfig": {
            "specialists": [sec, cost, { "roleId": "custom", "model": "a", "customRole": good_role }],
            "content": " the plan ", "timeoutMs": 10000 } }),
        &backup,
    )
    .unwrap();
    assert_eq!(v.config["specialists"][2]["roleKey"], "custom_support_lead");
    assert_eq!(v.config["specialists"][2]["criteria"], json!(["Impact", "Comms", "Rollback"]));
    assert_eq!(v.config["content"], "the plan");
    assert_eq!(v.config["chairmanFallbackModel"], "sim/spare");
    assert_eq!(v.models, ["a", "b"]);
}

#[test]
fn the_sim_reports_in_format_and_sometimes_out_of_it() {
    for malformed in [false, true] {
        for seed in 0..6u64 {
            let mut m =
                panel(&["security_expert", "ux_designer", "data_architect", "cost_analyst"]);
            let all = drive(&mut m, |c| {
                let last = c.messages.last().unwrap();
                sim_answer(&sim_call_ask(
                    c,
                    &last.content,
                    seed * 7 + c.key.len() as u64,
                    malformed,
                    false,
                    None,
                ))
            });
            assert!(finished(&all).is_some(), "the run completes");
            let a = emitted(&all, "all_specialists_complete").unwrap()["data"].clone();
            for s in a["specialists"].as_array().unwrap() {
                assert_eq!(s["parseSuccess"], !malformed, "{s}");
                if !malformed {
                    assert!(s["criteriaScores"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|c| c["score"].is_u64()));
                    assert_eq!(s["topRecommendations"].as_array().unwrap().len(), 3);
                }
            }
            let s = emitted(&all, "synthesis_complete").unwrap()["data"].clone();
            assert_eq!(s["topRisk"].is_object(), !malformed, "{s}");
            if !malformed {
                assert_eq!(s["counts"]["riskMatrix"], 3);
                assert!(s["sections"]["executiveSummary"].as_str().unwrap().contains("workable"));
            }
            assert_reloads(&all);
        }
    }
    let other = sim_ask("sim/a", "What is 2+2?", 1, false, None);
    assert_eq!(sim_answer(&other), None);
}

#[test]
fn a_stored_configuration_that_does_not_fit_is_an_error() {
    let mut c = config(&THREE);
    c["specialists"] = json!([c["specialists"][0]]);
    assert!(SpecialistPanel::new(&c, ctx("q", vec![], false)).is_err());
    let mut c = config(&THREE);
    c["extra"] = json!(1);
    assert!(SpecialistPanel::new(&c, ctx("q", vec![], false)).is_err());
}

#[test]
fn thousands_of_table_rows_are_read_to_the_last_row_of_each_criterion() {
    // 20,000 rows naming 8 criteria in turn, each with its own rating and notes: every
    // criterion takes the rating of the last row naming it (how fast belongs in the bench).
    let criteria: Vec<String> = (0..8).map(|i| format!("Criterion {i}")).collect();
    let n = 20_000;
    let text: String =
        (0..n).map(|i| format!("| Criterion {} | {} | row {i} |\n", i % 8, 1 + i % 5)).collect();
    let r = read_report(&text, &criteria);
    let last = |k: usize| (0..n).rev().find(|i| i % 8 == k).unwrap();
    let expected: Vec<(Option<u8>, Option<String>)> =
        (0..8).map(|k| (Some(1 + (last(k) % 5) as u8), Some(format!("row {}", last(k))))).collect();
    let got: Vec<(Option<u8>, Option<String>)> =
        r.criteria_scores.iter().map(|c| (c.score, c.notes.clone())).collect();
    assert_eq!(got, expected);
    assert!(r.parse_success);
}

#[test]
fn a_small_model_s_half_followed_format_is_read_where_it_follows_it() {
    // Bold headings, a table without outer bars, a rating in words, a missing row, a fifth
    // recommendation, and the criteria repeated in prose afterwards.
    let reply = "**Key Findings:**\n* The plan lacks encryption at rest.\n* No MFA for admins.\n\n\
        **Risk Assessment:**\n\nCriterion | Rating (1-5) | Notes\n--- | --- | ---\n\
        Authentication & Authorization | 2 | No MFA\nData Protection | 2/5 |\n\
        Input Validation | Not assessed |\nAttack Surface | 3 | \n\n\
        **Top 3 Recommendations:**\n1. Add MFA\n2. Encrypt data\n3. Review access\n4. Extra\n\n\
        In short, Incident Response Readiness is about a 2 in my view.";
    let r = read_report(reply, &security());
    let got: Vec<(Option<u8>, Option<&str>)> =
        r.criteria_scores.iter().map(|c| (c.score, c.notes.as_deref())).collect();
    assert_eq!(
        got,
        [(Some(2), Some("No MFA")), (Some(2), None), (None, None), (Some(3), None), (None, None)]
    );
    assert_eq!(r.average_score, Some(2.3));
    assert_eq!(r.key_findings, ["The plan lacks encryption at rest.", "No MFA for admins."]);
    assert_eq!(r.top_recommendations, ["Add MFA", "Encrypt data", "Review access"]);
    // A refusal after a reasoning trace that drafted a table: nothing is read.
    let refusal = "<think>| Data Protection | 4 | fine |</think>\nI can't provide a security \
        assessment of this material.";
    let r = read_report(refusal, &security());
    assert!(!r.parse_success && r.key_findings.is_empty());
}

// ---- structured replies --------------------------------------------------------------------

/// A panel whose specialists `json` are asked for JSON (their routes take structured output).
fn structured_panel(roles: &[&str], json: &[&str]) -> SpecialistPanel {
    let mut c = ctx("Assess our EKS migration plan", vec![], true);
    c.structured = crate::modes::Structured::models(json);
    SpecialistPanel::new(&config(roles), c).unwrap()
}

fn rating(criterion: &str, rating: u64, notes: &str) -> (String, Value) {
    (criterion.to_string(), json!({ "rating": rating, "notes": notes }))
}

fn json_report(ratings: Vec<(String, Value)>) -> String {
    let ratings: serde_json::Map<String, Value> = ratings.into_iter().collect();
    json!({
        "reasoning": "weighed each criterion",
        "keyFindings": ["Tokens are long-lived.", " No WAF. ", "Secrets in env files."],
        "ratings": ratings,
        "topRecommendations": ["Rotate tokens.", "Add a WAF.", "Use a vault."],
        "detailedAnalysis": "The plan is sound overall.",
    })
    .to_string()
}

/// Ratings for the security expert's five criteria, in order.
fn security_ratings(scores: [u64; 5]) -> Vec<(String, Value)> {
    security().iter().zip(scores).map(|(c, s)| rating(c, s, "why")).collect()
}

#[test]
fn the_report_schema_names_the_role_s_criteria_and_opens_with_the_reasoning() {
    let s = report_schema(&security());
    assert_eq!(s.name, REPORT_SCHEMA);
    let keys: Vec<&String> = s.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["reasoning", "keyFindings", "ratings", "topRecommendations", "detailedAnalysis"],
        "the reasoning first, then the text format's sections in order"
    );
    // Every criterion is a field of its own, required: a grammar gives each exactly once.
    let ratings = &s.schema["properties"]["ratings"];
    assert_eq!(schema::keys_of(ratings), security());
    assert_eq!(ratings["required"], json!(security()));
    assert_eq!(ratings["additionalProperties"], false);
    let parse = |t: String| serde_json::from_str::<Value>(&t).unwrap();
    assert!(s.validate(&parse(json_report(security_ratings([1, 2, 3, 4, 5])))).is_ok());
    let mut foreign = security_ratings([3; 5]);
    foreign[4] = rating("Cost", 3, "");
    let mut half = security_ratings([3; 5]);
    half[0].1["rating"] = json!(3.5);
    for bad in [
        // A rating out of 1-5, a criterion not of this role, not a whole number, too few.
        json_report(security_ratings([3, 3, 6, 3, 3])),
        json_report(security_ratings([0, 3, 3, 3, 3])),
        json_report(foreign),
        json_report(half),
        json_report(security_ratings([3; 5])[..4].to_vec()),
    ] {
        assert!(s.validate(&parse(bad.clone())).is_err(), "{bad}");
    }
}

#[test]
fn a_report_is_read_from_json_when_it_fits_else_from_text() {
    let criteria = security();
    let s = report_schema(&criteria);
    let r = read_report_reply(&json_report(security_ratings([4, 2, 3, 1, 5])), &criteria, &s);
    assert_eq!(r.read_from, Some(ReadFrom::Json));
    let got: Vec<Option<u8>> = r.criteria_scores.iter().map(|c| c.score).collect();
    assert_eq!(got, [Some(4), Some(2), Some(3), Some(1), Some(5)]);
    assert_eq!(r.criteria_scores[0].notes.as_deref(), Some("why"));
    assert_eq!(r.average_score, Some(3.0));
    assert_eq!(r.key_findings, ["Tokens are long-lived.", "No WAF.", "Secrets in env files."]);
    assert_eq!(r.top_recommendations.len(), 3);
    // A criterion rated twice leaves another out: the JSON does not fit, and no rating is
    // guessed from it.
    let mut twice = security_ratings([4, 2, 3, 1, 5]);
    twice[4] = rating(&criteria[0], 1, "on reflection");
    let r = read_report_reply(&json_report(twice), &criteria, &s);
    assert!(!r.parse_success && r.read_from.is_none(), "{r:?}");
    // A rating out of range is refused, and the text states none: unparsed.
    let r = read_report_reply(&json_report(security_ratings([4, 2, 9, 1, 5])), &criteria, &s);
    assert!(!r.parse_success && r.read_from.is_none());
    assert!(r.criteria_scores.iter().all(|c| c.score.is_none()));
    // The text format, from a model that ignored the schema.
    let r = read_report_reply(REPORT, &criteria, &s);
    assert_eq!((r.parse_success, r.read_from), (true, Some(ReadFrom::Text)));
    assert_eq!(r, read_report(REPORT, &criteria));
}

proptest! {
    /// Whatever report the schema allows is read as given: each criterion's rating, its
    /// notes, the findings and the first three recommendations.
    #[test]
    fn any_report_the_schema_allows_is_read_whole(seed in any::<u64>(), n in 3usize..9, words in "\\PC{0,40}") {
        let criteria: Vec<String> = (0..n).map(|i| format!("Criterion {i}")).collect();
        let s = report_schema(&criteria);
        let v = schema::sample(&s.schema, &mut SplitMix64::new(seed), &|f| format!("{words} {f}"));
        let r = read_report_reply(&v.to_string(), &criteria, &s);
        prop_assert_eq!(r.read_from, Some(ReadFrom::Json));
        for c in &r.criteria_scores {
            let given = &v["ratings"][c.criterion.as_str()];
            prop_assert_eq!(c.score.map(u64::from), given["rating"].as_u64());
            let notes = given["notes"].as_str().map(str::trim).filter(|t| !t.is_empty());
            prop_assert_eq!(c.notes.as_deref(), notes);
        }
        let items = |k: &str| -> Vec<String> {
            v[k].as_array().unwrap().iter().filter_map(|x| x.as_str()).map(str::trim)
                .filter(|t| !t.is_empty()).map(str::to_string).collect()
        };
        prop_assert_eq!(&r.key_findings, &items("keyFindings"));
        prop_assert_eq!(&r.top_recommendations, &items("topRecommendations"));
    }
}

#[test]
fn a_specialist_that_takes_json_is_asked_for_its_report_schema_in_the_system_message() {
    let mut m = structured_panel(&THREE, &["m0", "m2"]);
    let calls = stage_calls(&m.start());
    assert!(calls.iter().all(|c| c.schema.as_ref().is_some_and(|s| s.name == REPORT_SCHEMA)));
    // Each specialist's schema rates its own role's criteria.
    let enum_of = |c: &CallSpec| {
        json!(schema::keys_of(&c.schema.as_ref().unwrap().schema["properties"]["ratings"]))
    };
    assert_eq!(enum_of(&calls[0]), json!(security()));
    assert_eq!(enum_of(&calls[2]), json!(LIBRARY[1].criteria));
    let (json, text) = (&calls[0].messages[0].content, &calls[1].messages[0].content);
    assert_contains_all(
        json,
        &[
            "Security Expert",
            "Your lens:",
            "1. Exploitable weaknesses",
            "- Incident Response Readiness",
        ],
    );
    assert!(
        json.contains("Reply with a single JSON object") && !json.contains("### Risk Assessment")
    );
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"ratings\"").unwrap());
    assert!(text.contains("### Risk Assessment") && !text.contains("JSON"));
    assert_eq!(text, &specialist_system(&library_role(&LIBRARY[2], "m1".into()), None));
    // The user message and the quoted material are the same for both.
    assert_eq!(calls[0].messages[1], calls[1].messages[1]);
    assert_eq!(&*calls[0].material[0].text, "Assess our EKS migration plan");
}

#[test]
fn reports_are_read_from_json_or_text_and_say_which_and_the_synthesizer_reads_fields() {
    let mut m = structured_panel(&THREE, &["m0", "m1", "m2"]);
    let all = drive(&mut m, |c| {
        Some(match c.key.as_str() {
            "specialist:0" => json_report(security_ratings([4, 2, 3, 1, 5])),
            // Ignored the schema and wrote the text format.
            "specialist:1" => {
                REPORT.replace("Authentication & Authorization", "Horizontal Scalability")
            }
            // States nothing.
            "specialist:2" => "Looks fine to me.".into(),
            "synthesis" => SYNTHESIS.into(),
            _ => "EKS".into(),
        })
    });
    let a = emitted(&all, "all_specialists_complete").unwrap()["data"]["specialists"].clone();
    assert_eq!(a[0]["readFrom"], "json");
    assert_eq!(a[0]["averageScore"], 3.0);
    assert_eq!(a[1]["readFrom"], "text");
    assert!(a[2].get("readFrom").is_none() && a[2]["parseSuccess"] == false);
    // Stored once per read reply, and the result rebuilt from the rows is what went out.
    let stored = rows(&all);
    let read: Vec<(&str, &Value)> = stored
        .iter()
        .filter_map(|r| Some((r.stage_type.as_str(), r.parsed_data.as_ref()?.get("readFrom")?)))
        .collect();
    assert_eq!(read.len(), 2, "{read:?}");
    assert_reloads(&all);
    // The synthesizer reads the JSON report as fields, and the reports are named material.
    let synth =
        crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "synthesis").unwrap();
    let prompt = &synth.messages[0].content;
    assert!(prompt.contains("Key findings:\n1. Tokens are long-lived."), "{prompt}");
    assert!(!prompt.contains("\"keyFindings\""));
    assert!(synth.schema.is_none(), "the synthesis is text a person reads");
    assert_eq!(synth.material.len(), 4, "the material and three reports");
    assert!(synth.material.iter().all(|m| prompt.contains(&*m.text)));
}

#[test]
fn the_sim_answers_its_report_schema_in_json_and_no_other() {
    for seed in 0..6u64 {
        let mut m = structured_panel(
            &["security_expert", "ux_designer", "data_architect", "cost_analyst"],
            &["m0", "m1", "m2", "m3"],
        );
        let all = drive(&mut m, |c| {
            sim_answer(&sim_call_ask(
                c,
                &c.messages.last().unwrap().content,
                seed * 7 + c.key.len() as u64,
                false,
                seed % 2 == 0,
                c.schema.as_deref(),
            ))
        });
        assert!(finished(&all).is_some(), "the run completes");
        let a = emitted(&all, "all_specialists_complete").unwrap()["data"].clone();
        for s in a["specialists"].as_array().unwrap() {
            assert_eq!(s["readFrom"], "json", "{s}");
            assert!(s["criteriaScores"].as_array().unwrap().iter().all(|c| c["score"].is_u64()));
            assert_eq!(s["topRecommendations"].as_array().unwrap().len(), 3);
        }
        assert_reloads(&all);
    }
    let other = ReplySchema::new("council_ranking", schema::reasoned([]));
    let s = library_role(&LIBRARY[0], "m".into());
    let messages = [
        ChatMessage::system(specialist_system(&s, None)),
        ChatMessage::user(specialist_user("q", &material(None, "q"))),
    ];
    let ask = SimAsk {
        messages: &messages,
        ..sim_ask("sim/a", &messages[1].content, 1, false, Some(&other))
    };
    assert_eq!(sim_answer(&ask), None);
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, role key or result key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["security_expert", "cost_analyst", "HIGH"])
}

#[test]
fn the_report_tables_the_ratings_and_the_risk_matrix() {
    let mut m = panel(&THREE);
    let all = drive(&mut m, |c| if c.key == "specialist:2" { None } else { scripted(c) });
    let r = readable(&load_result(&rows(&all)));
    assert_contains_all(
        &r,
        &[
            "|---",
            "**Top risk:** high, Security, Secrets.",
            "| Security Expert (m0) | Authentication & Authorization | 4 | SSO everywhere |",
        ],
    );
    assert!(r.contains("| Security Expert (m0) | Input Validation | 4 |"), "3.5 half up: {r}");
    assert_contains_all(
        &r,
        &[
            "| Security Expert (m0) | Attack Surface | unread | (the model's own scale) |",
            "- Security Expert (m0): 3.3 of 5, over the 3 ratings read (2 unread)",
        ],
    );
    assert!(
        r.contains("- Scalability Architect (m1): no rating could be read from the report"),
        "the security report rates none of the architect's criteria: {r}"
    );
    assert_contains_all(
        &r,
        &[
            "**Did not report:**\n\n- Cost Analyst (m2): the call failed (down)",
            "| Security | high | Secrets | Vault | Security Expert, DevOps Engineer |",
            "| Ops | not stated | Paging | Rota | DevOps Engineer |",
            "**Synthesis** by syn: 2 convergent findings, 2 divergent findings and 2 recommendations.",
        ],
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // A cancelled run: the reports that arrived, no synthesis.
    let mut m = panel(&THREE);
    let start = m.start();
    let calls = stage_calls(&start);
    let mut all = start.clone();
    all.extend(m.on_reply(ok(&calls[0], REPORT)));
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("|---") && !r.contains("Synthesis") && !r.contains("Top risk"), "{r}");
    // A synthesis with no matrix in format.
    let mut m = panel(&THREE);
    let prose = |c: &CallSpec| {
        Some(if c.key == "synthesis" {
            "The panel agrees it is fine.".into()
        } else {
            REPORT.into()
        })
    };
    let r = readable(&load_result(&rows(&drive(&mut m, prose))));
    assert!(r.contains("none could be read") && r.contains("0 convergent findings"), "{r}");
}
