//! Chain driven with fake replies: the order of steps, what each is told, skips, the global
//! timeout, the stored result; editor notes on recorded and adversarial texts.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted, assert_contains_all, call_keyed, ctx, emitted, events, failed, fields, finished,
    offline_defaults, ok, readable_report, rows, sim_ask, sim_call_ask, stage_calls,
    validate_config,
};
use crate::modes::{validate, Mode};

fn config(mandates: &[&str]) -> Value {
    let steps: Vec<Value> = mandates
        .iter()
        .enumerate()
        .map(|(i, m)| json!({ "model": format!("m{}", i + 1), "mandate": m }))
        .collect();
    json!({ "steps": steps, "timeoutMs": 120000, "globalTimeoutMs": 600000 })
}

fn chain(mandates: &[&str]) -> Chain {
    Chain::new(&config(mandates), ctx("Write a guide to backups", vec![], true)).unwrap()
}

/// Drives a run; `answer` gives each step's reply (None: the call fails).
fn drive(m: &mut Chain, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    crate::modes::testkit::drive(m, answer, "Backup Guide")
}

fn words(n: usize, tag: &str) -> String {
    vec![tag; n].join(" ")
}

fn assert_reloads(all: &[Effect]) {
    let r = load_result(&rows(all));
    let completes: Vec<Value> = all_emitted(all, "chain_step_complete");
    for c in completes {
        let i = c["step"].as_u64().unwrap() as usize - 1;
        let step = &r["steps"][i];
        for (k, v) in c["data"].as_object().unwrap() {
            assert_eq!(&step[k], v, "step {} {k}", i + 1);
        }
        assert_eq!(step["skipped"], false);
    }
    if let Some(done) = emitted(all, "chain_complete") {
        for (k, v) in done["data"].as_object().unwrap() {
            assert_eq!(&r[k], v, "{k}");
        }
        assert_eq!(r["partial"], done["partial"]);
        assert_eq!(r["failedModels"], done["failedModels"]);
    }
}

#[test]
fn steps_run_in_order_each_seeing_only_the_latest_version() {
    let mut m = chain(&["draft", "structure_depth", "accuracy_completeness", "polish_format"]);
    let all = drive(&mut m, |c| {
        let k: usize = c.key.trim_start_matches("step:").parse().unwrap();
        Some(if k == 3 {
            format!("[Editor's Note: cut the intro.] {}", words(5, "v3"))
        } else {
            words(10 * k, &format!("v{k}"))
        })
    });
    assert_eq!(
        events(&all),
        [
            "chain_start",
            "chain_step_start",
            "chain_step_complete",
            "chain_step_start",
            "chain_step_complete",
            "chain_step_start",
            "chain_step_complete",
            "chain_step_start",
            "chain_step_complete",
            "chain_complete",
            "title_complete",
        ]
    );
    let calls = stage_calls(&all);
    let prompt = |k: usize| {
        calls.iter().find(|c| c.key == format!("step:{k}")).unwrap().messages[0].content.clone()
    };
    assert!(prompt(1).starts_with("You are step 1 of 4") && !prompt(1).contains(VERSION_START));
    let p3 = prompt(3);
    assert!(p3.contains("Accuracy & Completeness") && p3.contains("written by step 2"));
    assert!(p3.contains(&words(20, "v2")) && !p3.contains("v1"), "only the latest version");
    assert!(p3.contains("[Editor's Note: …]"));
    let s3 = all.iter().find_map(|e| match e {
        Effect::Emit { event, data } if event == "chain_step_complete" && data["step"] == 3 => {
            Some(data["data"].clone())
        }
        _ => None,
    });
    let s3 = s3.unwrap();
    assert_eq!(
        fields(&s3, ["wordCount", "previousWordCount", "wordCountDelta"]),
        [json!(10), json!(20), json!(-10)]
    );
    assert_eq!(s3["editorNotes"], json!(["cut the intro."]));
    assert_eq!(finished(&all), Some(words(40, "v4")));
    let done = emitted(&all, "chain_complete").unwrap();
    assert_eq!(done["data"]["finalStep"], 4);
    assert_eq!(done["data"]["completedSteps"], 4);
    assert_eq!(done["partial"], false);
    let rows = rows(&all);
    assert_eq!(rows[0].stage_type, "chain_plan", "the plan first");
    assert_eq!(rows[0].parsed_data.as_ref().unwrap()["totalSteps"], 4);
    assert_eq!(
        rows[1..].iter().map(|r| (r.stage_order, r.role.clone().unwrap())).collect::<Vec<_>>(),
        [
            (1, "drafter".into()),
            (2, "improver".into()),
            (3, "improver".into()),
            (4, "improver".into())
        ]
    );
    assert_reloads(&all);
}

#[test]
fn failed_and_empty_steps_are_skipped_and_named_to_the_next() {
    let mut m = chain(&["draft", "structure_depth", "security_review", "polish_format"]);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "step:2" => None,
        "step:3" => Some("<think>nothing to add</think>\n  ".into()),
        k => Some(format!("version of {k}")),
    });
    let skipped: Vec<Value> = all_emitted(&all, "chain_step_skipped");
    assert_eq!(skipped.len(), 2);
    assert_eq!(skipped[1]["data"]["reason"], "empty reply");
    let start4 = all.iter().rev().find_map(|e| match e {
        Effect::Emit { event, data } if event == "chain_step_start" => Some(data.clone()),
        _ => None,
    });
    let start4 = start4.unwrap();
    assert_eq!(fields(&start4, ["basedOnStep", "skippedBefore"]), [json!(1), json!([2, 3])]);
    let p4 = call_keyed(&all, "step:4").messages[0].content.clone();
    assert!(p4.contains("step 2 (Structure & Depth)") && p4.contains("step 3 (Security Review)"));
    assert!(p4.contains("version of step:1"));
    let done = emitted(&all, "chain_complete").unwrap();
    assert_eq!(done["data"]["skippedSteps"], json!([2, 3]));
    assert_eq!(done["partial"], true);
    assert_eq!(done["failedModels"].as_array().unwrap().len(), 2);
    // A skipped step's row follows its call_failed row.
    let types: Vec<String> = rows(&all).iter().map(|r| r.stage_type.clone()).collect();
    let at = |t: &str| types.iter().position(|x| x == t).unwrap();
    assert!(
        types.iter().filter(|t| *t == "call_failed").count() == 2
            && at("call_failed") < at("chain_step_2")
    );
    let r = load_result(&rows(&all));
    assert_eq!(r["steps"][1]["skipped"], true);
    assert_eq!(r["steps"][1]["content"], "");
    assert_eq!(
        r["wordCountProgression"],
        json!([{ "step": 1, "wordCount": 3 }, { "step": 4, "wordCount": 3 }])
    );
    assert_reloads(&all);
}

#[test]
fn every_later_step_failing_leaves_the_draft_and_a_failed_draft_fails_the_run() {
    let mut m = chain(&["draft", "polish_format"]);
    let all = drive(&mut m, |c| (c.key == "step:1").then(|| "the draft".to_string()));
    assert_eq!(finished(&all).as_deref(), Some("the draft"));
    assert_eq!(emitted(&all, "chain_complete").unwrap()["partial"], true);
    let mut m = chain(&["draft", "polish_format"]);
    let all = drive(&mut m, |_| None);
    assert!(failed(&all).unwrap().contains("nothing to improve"));
    assert!(stage_calls(&all).iter().all(|c| c.key != "step:2"));
    // Reloaded, the failed run still says how long its chain was.
    assert_eq!(load_result(&rows(&all))["totalSteps"], 2);
}

#[test]
fn the_global_timeout_skips_the_remaining_steps() {
    let mut m = chain(&["draft", "structure_depth", "polish_format"]);
    let start = m.start();
    assert!(start.contains(&Effect::Timer { key: "global".into(), after_ms: 600000 }));
    let first = stage_calls(&start)[0].clone();
    m.on_timer("global");
    let out = m.on_reply(ok(&first, "a draft"));
    assert_eq!(
        events(&out),
        ["chain_step_complete", "chain_step_skipped", "chain_step_skipped", "chain_complete"]
    );
    assert_eq!(emitted(&out, "chain_step_skipped").unwrap()["data"]["reason"], "global timeout");
    assert_eq!(finished(&out).as_deref(), Some("a draft"));
    let r = load_result(&rows(&out));
    assert_eq!(fields(&r, ["totalSteps", "completedSteps"]), [json!(3), json!(1)]);
}

#[test]
fn a_first_step_with_another_mandate_gets_its_focus_and_custom_is_verbatim() {
    let cfg = json!({ "steps": [ { "model": "a", "mandate": "security_review" },
                                 { "model": "a", "mandate": "custom", "customMandate": "Add three case studies" } ],
                      "timeoutMs": 1000, "globalTimeoutMs": 60000 });
    let mut m = Chain::new(&cfg, ctx("q", vec![], false)).unwrap();
    let start = m.start();
    let p1 = stage_calls(&start)[0].messages[0].content.clone();
    assert!(p1.contains("Security Review"));
    let out = m.on_reply(ok(&stage_calls(&start)[0], "draft"));
    let p2 = stage_calls(&out)[0].messages[0].content.clone();
    assert!(p2.contains("Custom — Add three case studies"), "{p2}");
    // The same model in consecutive steps is allowed; identical output is a valid step.
    let end = m.on_reply(ok(&stage_calls(&out)[0], "draft"));
    let d = emitted(&end, "chain_step_complete").unwrap()["data"].clone();
    assert_eq!(d["wordCountDelta"], 0);
    assert_eq!(rows(&out)[0].parsed_data.as_ref().unwrap().get("customMandate"), None);
    assert_eq!(
        rows(&end)[0].parsed_data.as_ref().unwrap()["customMandate"],
        "Add three case studies"
    );
}

#[test]
fn editor_notes_are_read_where_written() {
    assert_eq!(
        editor_notes("[Editor's Note: removed X] text [editor’s note: moved Y]"),
        ["removed X", "moved Y"]
    );
    assert_eq!(editor_notes("[EDITORS NOTE: a] [Editor note b]"), ["a", "b"]);
    assert!(editor_notes("The editor's note said nothing.").is_empty());
    assert_eq!(editor_notes("[Editor's Note: unclosed"), Vec::<String>::new());
    assert_eq!(
        editor_notes("<think>[Editor's Note: x]</think>")[0],
        "x",
        "a raw text is read as given"
    );
}

proptest! {
    #[test]
    fn word_counts_and_notes_never_panic(text in "(?s).{0,300}") {
        let notes = editor_notes(&text);
        prop_assert!(notes.len() <= text.matches(']').count());
        prop_assert_eq!(word_count(&text), text.split_whitespace().count());
    }
}

#[test]
fn requests_are_checked_field_by_field() {
    let d = offline_defaults();
    let bad = |cfg: Value| validate_config("chain", cfg).unwrap_err();
    let one = json!({ "model": "a", "mandate": "draft" });
    assert_eq!(bad(json!({ "steps": [one] })).field, "modeConfig.steps");
    assert_eq!(bad(json!({ "steps": vec![one.clone(); 7] })).field, "modeConfig.steps");
    let e = bad(json!({ "steps": [one, { "model": "b", "mandate": "poetry" }] }));
    assert!(e.message.contains("draft") && e.message.contains("custom"), "{e}");
    assert_eq!(
        bad(json!({ "steps": [one, { "model": "b", "mandate": "custom" }] })).field,
        "modeConfig.steps[1].customMandate"
    );
    assert_eq!(
        bad(json!({ "steps": [one, { "model": "b", "mandate": "draft", "customMandate": "x" }] }))
            .field,
        "modeConfig.steps[1].customMandate"
    );
    assert_eq!(
        bad(json!({ "steps": [one, { "model": " ", "mandate": "draft" }] })).field,
        "modeConfig.steps[1].model"
    );
    assert_eq!(
        bad(json!({ "steps": [one, { "mandate": "draft" }] })).field,
        "modeConfig.steps[1].model"
    );
    assert_eq!(bad(json!({ "steps": [one, { "model": "b", "mandate": "custom", "customMandate": "x".repeat(2001) }] })).field, "modeConfig.steps[1].customMandate");
    assert_eq!(bad(json!({ "timeoutMs": 9999 })).field, "modeConfig.timeoutMs");
    assert_eq!(bad(json!({ "globalTimeoutMs": 1800001 })).field, "modeConfig.globalTimeoutMs");
    let v = validate(&json!({ "mode": "chain", "question": "q" }), &d).unwrap();
    let steps = v.config["steps"].as_array().unwrap();
    assert_eq!(
        steps.iter().map(|s| s["mandate"].as_str().unwrap()).collect::<Vec<_>>(),
        ["draft", "structure_depth", "accuracy_completeness", "polish_format"]
    );
    assert_eq!(v.models, ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"]);
}

#[test]
fn the_sim_drafts_and_improves_and_sometimes_adds_meta_commentary() {
    for malformed in [false, true] {
        for seed in 0..6u64 {
            let mut m =
                chain(&["draft", "structure_depth", "accuracy_completeness", "polish_format"]);
            let all = drive(&mut m, |c| {
                sim_answer(&sim_call_ask(
                    c,
                    &c.messages[0].content,
                    seed + c.key.len() as u64,
                    malformed,
                    false,
                    None,
                ))
            });
            let answer = finished(&all).unwrap();
            assert!(answer.contains("simulated draft"), "the draft is built on, not replaced");
            assert!(answer.contains("Accuracy & Completeness (step 3)"));
            let progression =
                emitted(&all, "chain_complete").unwrap()["data"]["wordCountProgression"].clone();
            let counts: Vec<u64> = progression
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["wordCount"].as_u64().unwrap())
                .collect();
            assert!(counts.windows(2).all(|w| w[1] > w[0]), "{counts:?}");
            assert_reloads(&all);
        }
    }
    let other = sim_ask("sim/a", "Write a poem.", 1, false, None);
    assert_eq!(sim_answer(&other), None);
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, mandate key or result key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["structure_depth", "polish_format", "step:"])
}

/// The report once a three-step chain's draft is in, the run's time limit passed before or not.
fn report_after_the_draft(time_limit_passed: bool) -> String {
    let mut m = chain(&["draft", "structure_depth", "polish_format"]);
    let mut all = m.start();
    if time_limit_passed {
        m.on_timer("global");
    }
    let out = m.on_reply(ok(&stage_calls(&all)[0], "a draft"));
    all.extend(out);
    readable(&load_result(&rows(&all)))
}

#[test]
fn the_report_tables_each_step_what_it_was_asked_and_how_it_ended() {
    let mut m = chain(&["draft", "structure_depth", "security_review", "polish_format"]);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "step:2" => None,
        "step:3" => Some(format!("[Editor's Note: cut the intro.] {}", words(5, "v3"))),
        k => Some(words(if k == "step:1" { 10 } else { 12 }, "w")),
    });
    let r = readable(&load_result(&rows(&all)));
    assert_contains_all(
        &r,
        &[
            "|---",
            "**Final version:** step 4 of 4 (Polish & Format, m4); 3 of 4 steps completed.",
            "| 1 | m1 | Draft: cover every aspect of the request | 10 | done |",
            "| 2 | m2 | Structure & Depth: reorder for flow",
            "| — | skipped: its call failed (down) |",
            "| 3 | m3 | Security Review: point out risky patterns",
        ],
    );
    assert!(r.contains("| 10 (+0) | done |"), "the note's words count too: {r}");
    assert_contains_all(
        &r,
        &["| 12 (+2) | done |", "**Editor's notes:**\n\n- step 3: cut the intro."],
    );

    // The time limit: the steps left are skipped, said so.
    let r = report_after_the_draft(true);
    assert_contains_all(
        &r,
        &["skipped: the run's time limit passed first", "1 of 3 steps completed"],
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // A failed draft: no step completed, the plan says how long the chain was.
    let mut m = chain(&["draft", "polish_format"]);
    let all = drive(&mut m, |_| None);
    let r = readable(&load_result(&rows(&all)));
    assert_eq!(r, "**No step completed.**\n\n");
    // A cancelled run: the steps that ran, and those that never did.
    let r = report_after_the_draft(false);
    assert_contains_all(
        &r,
        &[
            "**Final version:** step 1 of 3 (Draft, m1); 1 of 3 steps completed.",
            "2 steps of the 3 never ran.",
        ],
    );
    // Rows with no completed step (the draft's row lost): no final version, the skipped steps
    // listed.
    let mut m = chain(&["draft", "structure_depth", "polish_format"]);
    let all = drive(&mut m, |c| (c.key == "step:1").then(|| "a draft".to_string()));
    let kept: Vec<StageRow> =
        rows(&all).into_iter().filter(|r| r.stage_type != "chain_step_1").collect();
    let r = readable(&load_result(&kept));
    assert!(r.contains("**No step completed.**") && r.contains("| 2 |"), "{r}");
}
