//! Blueprint driven with fake replies: the outline read from recorded and adversarial texts,
//! the sections written at once and round-robin, failures at each stage and the backups, the
//! stored result equal to what went out live.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted, assert_contains_all, call_keyed, ctx, drive_on_sim_text, emitted, events, failed,
    fields, finished, machine_read_stages, offline_defaults, ok, quotes_its_material,
    readable_report, rows, schema_name, sim_ask, sim_call_ask, stage_calls, validate_config,
};
use crate::modes::{validate, Defaults, Mode};

const OUTLINE: &str = "\
DOCUMENT TITLE: Collaborative Editor Design

SECTION 1: Context and Goals
Description: Why the editor exists.
Key Topics:
- Offline editing
- Presence cursors
Length: Short
Source Coverage: the first paragraph

SECTION 2: Sync Engine
Description: How edits merge.
Key Topics:
- Conflict resolution
- CRDT choice
Length: Long
Source Coverage: requirements

SECTION 3: Comments
Description: Threads on text.
Key Topics: Threading, Notifications
Length: Medium
Source Coverage: comments paragraph

SECTION 4: History
Description: Versions.
Key Topics:
- Snapshots
Length: Short
Source Coverage: history

DOCUMENT SUMMARY:
Total sections: 4
Estimated total length: 3000 words
Key themes: collaboration, reliability; offline";

fn config(authors: &[&str]) -> Value {
    json!({ "documentType": "technical_design_document", "architectModel": "arch",
            "authorModels": authors, "assemblerModel": "asm", "timeoutMs": 300000 })
}

fn blueprint(cfg: Value) -> Blueprint {
    Blueprint::new(&cfg, ctx("Design doc for our collaborative editor", vec![], true)).unwrap()
}

/// Drives a run; `answer` gives each call's reply (None: the call fails). Section calls are
/// answered in reverse order, so completion order differs from outline order.
fn drive(m: &mut Blueprint, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    crate::modes::testkit::drive(m, answer, "Editor Design")
}

fn section_text(c: &CallSpec) -> String {
    let n = c.key.trim_start_matches("section:");
    format!("## Section {n}: x\n\nOffline editing and presence cursors. Conflict resolution. Snapshots of threading.")
}

fn answer_all(c: &CallSpec) -> Option<String> {
    match c.key.trim_end_matches(":backup") {
        "outline" => Some(OUTLINE.into()),
        "assembly" => Some("# Doc\n\n## Executive Summary\n\nText. [TODO: budget figures]".into()),
        _ => Some(section_text(c)),
    }
}

/// The stored rows give back exactly what went out live.
fn assert_reloads(all: &[Effect]) {
    let r = load_result(&rows(all));
    if let Some(o) = emitted(all, "outline_complete") {
        assert_eq!(r["outline"], o["data"]);
        assert_eq!(r["documentType"], o["data"]["documentType"]);
        assert!(r["material"]["text"].is_string());
    }
    for c in all_emitted(all, "section_complete") {
        let n = c["data"]["sectionNumber"].as_u64().unwrap();
        let s = r["sections"].as_array().unwrap().iter().find(|s| s["sectionNumber"] == n);
        assert_eq!(s, Some(&c["data"]), "section {n}");
    }
    if let Some(done) = emitted(all, "all_sections_complete") {
        for (k, v) in done["data"].as_object().unwrap() {
            assert_eq!(&r[k], v, "{k}");
        }
    }
    if let Some(a) = emitted(all, "assembly_complete") {
        assert_eq!(r["assembly"], a["data"]);
        assert_eq!(r["partial"], a["partial"]);
        assert_eq!(r["failedModels"], a["failedModels"]);
        assert_eq!(finished(all).as_deref(), a["data"]["document"].as_str());
    }
}

#[test]
fn a_run_outlines_writes_every_section_at_once_round_robin_and_assembles() {
    let mut m = blueprint(config(&["a", "b", "a"]));
    let start = m.start();
    assert_eq!(events(&start), ["blueprint_start", "outline_start"]);
    assert_eq!(
        emitted(&start, "blueprint_start").unwrap()["documentType"],
        "technical_design_document"
    );
    let outline_call = stage_calls(&start)[0].clone();
    assert_eq!((outline_call.key.as_str(), outline_call.model.as_str()), ("outline", "arch"));
    let p = &outline_call.messages[0].content;
    assert!(
        p.contains("Technical Design Document")
            && p.contains("Design doc for our collaborative editor")
    );
    assert!(
        p.contains("Short = 200-500")
            && p.contains("DOCUMENT SUMMARY:")
            && p.contains("Key themes:")
    );
    let out =
        m.on_reply(ok(&outline_call, &format!("<think>SECTION 9: not this</think>{OUTLINE}")));
    assert_eq!(events(&out), ["outline_complete", "expansion_start"]);
    let sections = stage_calls(&out);
    assert_eq!(
        sections.iter().map(|c| (c.key.as_str(), c.model.as_str())).collect::<Vec<_>>(),
        [("section:1", "a"), ("section:2", "b"), ("section:3", "a"), ("section:4", "a")],
        "every section is issued at once; author i mod n"
    );
    let p2 = &sections[1].messages[0].content;
    assert!(p2.contains("Write ONLY section 2: Sync Engine"), "{p2}");
    assert!(p2.contains("Section 4: History") && p2.contains("Collaborative Editor Design"));
    assert!(p2.contains("1000-2000 words") && p2.contains("- CRDT choice"));
    assert!(p2.contains("## Section 2: Sync Engine") && p2.contains("[Requires additional input]"));
    let o = emitted(&out, "outline_complete").unwrap()["data"].clone();
    assert_eq!(o["documentTitle"], "Collaborative Editor Design");
    assert!(o.get("rawReply").is_none());
    assert_eq!(o["sections"][2]["keyTopics"], json!(["Threading", "Notifications"]));
    assert_eq!(o["sections"][3]["assignedModel"], "a");
    assert_eq!(o["keyThemes"], json!(["collaboration", "reliability", "offline"]));
    assert_eq!(o["estimatedLength"], "3000 words");
    assert!(o["warnings"][0].as_str().unwrap().contains("only 4 sections"), "{o}");

    let mut m = blueprint(config(&["a", "b", "a"]));
    let all = drive(&mut m, answer_all);
    assert_eq!(
        events(&all),
        [
            "blueprint_start",
            "outline_start",
            "outline_complete",
            "expansion_start",
            "section_complete",
            "section_complete",
            "section_complete",
            "section_complete",
            "all_sections_complete",
            "assembly_start",
            "assembly_complete",
            "title_complete",
        ]
    );
    let order: Vec<Value> = all_emitted(&all, "section_complete")
        .iter()
        .map(|s| s["data"]["sectionNumber"].clone())
        .collect();
    assert_eq!(order, [json!(4), json!(3), json!(2), json!(1)], "as they finish");
    let s1 = &all_emitted(&all, "section_complete")[3]["data"];
    assert_eq!(s1["keyTopicsCovered"], json!(["Offline editing", "Presence cursors"]));
    assert_eq!(s1["wordCount"], 14);
    let s3 = all_emitted(&all, "section_complete")[1]["data"].clone();
    assert_eq!(s3["keyTopicsMissing"], json!(["Notifications"]));
    let asm = call_keyed(&all, "assembly");
    let p = &asm.messages[0].content;
    assert!(
        p.contains("--- Section 1: Context and Goals (by a) ---")
            && p.contains("executive summary")
    );
    assert!(p.contains("None: every section was written."));
    let a = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(a["data"]["todoMarkers"], json!(["budget figures"]));
    assert_eq!(
        (a["data"]["fallback"].clone(), a["data"]["condensed"].clone()),
        (Value::Null, json!(false))
    );
    assert_eq!(a["partial"], false);
    let stored = rows(&all);
    assert_eq!(stored[0].stage_type, "blueprint_setup", "the type and material first");
    assert_eq!(stored[0].content, "Design doc for our collaborative editor");
    assert_eq!(
        stored[1..]
            .iter()
            .map(|r| (r.stage_type.clone(), r.stage_order, r.role.clone().unwrap()))
            .collect::<Vec<_>>(),
        [
            ("outline".to_string(), 0, "architect".to_string()),
            ("section_4".into(), 4, "author".into()),
            ("section_3".into(), 3, "author".into()),
            ("section_2".into(), 2, "author".into()),
            ("section_1".into(), 1, "author".into()),
            ("assembly".into(), 99, "assembler".into()),
        ]
    );
    assert_eq!(stored[6].content, finished(&all).unwrap());
    assert_reloads(&all);
    assert!(outcome(&load_result(&stored))
        .unwrap()
        .starts_with("Collaborative Editor Design: 4 sections"));
}

#[test]
fn failed_and_empty_sections_are_listed_and_the_assembler_is_told() {
    let mut m = blueprint(config(&["a", "bad"]));
    let all = drive(&mut m, |c| match c.model.as_str() {
        "bad" if c.key == "section:2" => None,
        "bad" => Some("<think>nothing</think>  ".into()),
        _ => answer_all(c),
    });
    let done = emitted(&all, "all_sections_complete").unwrap()["data"].clone();
    assert_eq!(fields(&done, ["totalSucceeded", "totalFailed"]), [json!(2), json!(2)]);
    assert_eq!(done["failedSections"][0]["sectionTitle"], "Sync Engine");
    assert_eq!(done["failedSections"][1]["error"], "empty reply");
    assert_eq!(all_emitted(&all, "section_failed").len(), 2);
    let asm = call_keyed(&all, "assembly");
    let p = &asm.messages[0].content;
    assert!(p.contains("- Section 2: Sync Engine\n- Section 4: History"), "{p}");
    assert!(!p.contains("(by bad)"));
    let a = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(a["partial"], true);
    assert_eq!(a["failedModels"].as_array().unwrap().len(), 2);
    assert_eq!(a["failedModels"][0]["stage"], "section_2");
    assert_reloads(&all);
}

#[test]
fn every_author_failing_fails_the_run_with_the_outline_kept() {
    let mut m = blueprint(config(&["bad"]));
    let all = drive(&mut m, |c| (c.key == "outline").then(|| OUTLINE.to_string()));
    assert!(failed(&all).unwrap().contains("Every author failed"), "{:?}", failed(&all));
    assert!(stage_calls(&all).iter().all(|c| c.key != "assembly"));
    let r = load_result(&rows(&all));
    assert_eq!(r["outline"]["sections"].as_array().unwrap().len(), 4);
    assert_eq!(r["failedSections"].as_array().unwrap().len(), 4);
    assert_eq!(r["assembly"], Value::Null);
    assert_eq!(r["partial"], true);
    assert_reloads(&all);
}

#[test]
fn the_architect_falls_back_and_an_unreadable_outline_fails_the_run() {
    let mut cfg = config(&["a"]);
    cfg["facilitatorFallbackModel"] = json!("spare");
    let mut m = blueprint(cfg);
    let all = drive(&mut m, |c| match (c.key.as_str(), c.model.as_str()) {
        ("outline", "arch") => None,
        _ => answer_all(c),
    });
    let fb = emitted(&all, "fallback_start").unwrap();
    assert_eq!(fields(&fb, ["key", "model"]), [json!("outline:backup"), json!("spare")]);
    let o = emitted(&all, "outline_complete").unwrap()["data"].clone();
    assert_eq!(fields(&o, ["model", "fallbackFrom"]), [json!("spare"), json!("arch")]);
    assert!(finished(&all).is_some());
    assert_eq!(emitted(&all, "assembly_complete").unwrap()["partial"], true);
    assert_reloads(&all);

    // No backup: the run fails and names the architect.
    let mut m = blueprint(config(&["a"]));
    let all = drive(&mut m, |_| None);
    assert!(failed(&all).unwrap().starts_with("The architect (arch) failed"));
    assert!(rows(&all)
        .iter()
        .all(|r| matches!(r.stage_type.as_str(), "call_failed" | "blueprint_setup")));
    // Reloaded, the failed run still has its document type and material.
    let reloaded = load_result(&rows(&all));
    assert_eq!(reloaded["documentType"], "technical_design_document", "{reloaded}");
    assert!(reloaded["material"]["text"].is_string(), "{reloaded}");

    // A refusal, JSON or a table: fewer than 3 sections read. The outline is kept.
    for reply in [
        "I can't help with planning this document.",
        r#"{"title": "X", "sections": [{"title": "A"}, {"title": "B"}, {"title": "C"}]}"#,
        "| # | Section |\n|---|---|\n| 1 | Intro |\n| 2 | Body |\n| 3 | End |",
        "DOCUMENT TITLE: X\nSECTION 1: A\nSECTION 2: B",
    ] {
        let mut m = blueprint(config(&["a"]));
        let all = drive(&mut m, |c| (c.key == "outline").then(|| reply.to_string()));
        assert!(failed(&all).unwrap().contains("at least 3 are needed"), "{reply}");
        assert!(stage_calls(&all).iter().all(|c| !c.key.starts_with("section:")));
        let r = load_result(&rows(&all));
        assert_eq!(r["outline"], emitted(&all, "outline_complete").unwrap()["data"]);
        assert_eq!(rows(&all)[1].content, reply);
        assert_eq!(r["outline"]["rawReply"], reply, "what was written is shown instead");
    }
}

#[test]
fn the_assembler_falls_back_then_the_sections_are_concatenated() {
    let mut cfg = config(&["a", "b"]);
    cfg["chairmanFallbackModel"] = json!("spare");
    let mut m = blueprint(cfg);
    let all = drive(&mut m, |c| match c.model.as_str() {
        "asm" => None,
        "b" if c.key.starts_with("section") => None,
        _ => answer_all(c),
    });
    let a = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(
        (a["data"]["model"].clone(), a["data"]["fallbackFrom"].clone()),
        (json!("spare"), json!("asm"))
    );
    assert_reloads(&all);

    let mut m = blueprint(config(&["a", "b"]));
    let all = drive(&mut m, |c| match c.model.as_str() {
        "asm" => None,
        "b" if c.key.starts_with("section") => None,
        _ => answer_all(c),
    });
    let a = emitted(&all, "assembly_complete").unwrap();
    assert_eq!(a["data"]["fallback"], "concatenated");
    assert_eq!(a["data"]["model"], Value::Null);
    assert_eq!(a["partial"], true);
    let doc = finished(&all).unwrap();
    assert!(
        doc.starts_with(
            "# Collaborative Editor Design\n\n## Section 1: Context and Goals\n\nOffline"
        ),
        "{doc}"
    );
    assert!(doc.contains("[TODO: Section 2 (Sync Engine) failed]"));
    assert!(doc.contains("## Section 3: Comments"));
    assert_eq!(doc.matches("## Section 3").count(), 1, "the author's own heading is not repeated");
    assert_eq!(
        a["data"]["todoMarkers"],
        json!(["Section 2 (Sync Engine) failed", "Section 4 (History) failed"])
    );
    assert_reloads(&all);
}

#[test]
fn huge_sections_go_to_the_assembler_condensed() {
    let mut m = blueprint(config(&["a"]));
    let long = "word ".repeat(30_000);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "outline" | "assembly" => answer_all(c),
        _ => Some(format!("## Section\n\n{long}")),
    });
    let asm = call_keyed(&all, "assembly");
    let p = &asm.messages[0].content;
    assert!(
        p.contains("first 200 words")
            && p.contains("Key topics: Offline editing; Presence cursors")
    );
    assert!(p.len() < 4 * 2_000 + 20_000, "{}", p.len());
    assert_eq!(emitted(&all, "assembly_start").unwrap()["condensed"], true);
    assert_eq!(emitted(&all, "assembly_complete").unwrap()["data"]["condensed"], true);
    assert_reloads(&all);
}

#[test]
fn a_recorded_style_outline_is_read_where_it_states_things() {
    // Markdown headings, bold labels, a reasoning trace, a dash after the number, blank lines
    // inside the topic list, a description on the next line, numbered topics, a length with
    // two names, a missing title and source coverage, a stray summary earlier on.
    let text = "<think>DOCUMENT TITLE: Wrong\nSECTION 1: Hidden</think>\n\
        Sure — here is the outline you asked for.\n\n\
        **DOCUMENT TITLE:** Offline-First Editor\n\n\
        ## SECTION 1: Overview\n**Description:**\nThe big picture\nof the system.\n\n\
        **Key Topics:** ignored, since a list follows\n- Goals\n\n- **Scope**\n\
        **Length:** Short (200-500 words)\n\n\
        ### Section 2 — Architecture\nDescription: Components.\nKey Topics:\n1. Client\n2) Server\nLength: Medium to Long\n\
        Source Coverage: all of it\n\n\
        Section 3.\nDescription: first\nDescription: second\nLength: LONG\nTotal sections: 9\n\n\
        SECTION 7: Risks\nKey Topics: Latency; data loss, \n\n\
        DOCUMENT SUMMARY:\nTotal sections: 4\nEstimated total length: about 4,000 words\nKey themes: offline; sync, ,trust";
    let o = read_outline(text);
    assert_eq!(o.document_title, "Offline-First Editor");
    assert!(!o.document_title_defaulted);
    let s = &o.sections;
    assert_eq!(s.len(), 4);
    assert_eq!(s.iter().map(|s| s.number).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(s[3].reported_number, 7);
    assert_eq!(s[0].description.as_deref(), Some("The big picture of the system."));
    assert_eq!(s[0].key_topics, ["Goals", "Scope"]);
    assert_eq!((s[0].length, s[0].length_defaulted), (Length::Short, false));
    assert_eq!(s[0].source_coverage, None);
    assert_eq!(s[1].title, "Architecture");
    assert_eq!(s[1].key_topics, ["Client", "Server"]);
    assert_eq!(
        (s[1].length, s[1].length_defaulted),
        (Length::Medium, true),
        "two names: not stated"
    );
    assert_eq!((s[2].title.as_str(), s[2].title_defaulted), ("Section 3", true));
    assert_eq!(s[2].description.as_deref(), Some("first"), "a field's first line wins");
    assert_eq!(s[2].length, Length::Long);
    assert!(s[2].key_topics.is_empty());
    assert_eq!(s[3].key_topics, ["Latency", "data loss"]);
    assert_eq!(o.total_sections_stated, Some(4), "the last line wins");
    assert_eq!(o.estimated_length.as_deref(), Some("about 4,000 words"));
    assert_eq!(o.key_themes, ["offline", "sync", "trust"]);
    let w = outline_warnings(&o);
    assert!(w.iter().any(|w| w.contains("section 2")), "{w:?}");
}

#[test]
fn an_echoed_template_states_nothing_and_the_summary_lists_no_new_sections() {
    // A small model echoing the requested format back, then the real outline, then a summary
    // that lists the sections again.
    let text = "DOCUMENT TITLE: <title>\n\nSECTION 1: <section title>\n\
        Description: <what this section says, in one or two sentences>\n\
        Key Topics:\n- <topic>\n- <topic>\nLength: Short|Medium|Long\n\
        Source Coverage: <which part of the material it draws on>\n\n\
        SECTION 2: Storage\nKey Topics:\n- **Retention**: thirty days\n- __Encryption__\n\n\
        SECTION 3: Alerts\n\n\
        DOCUMENT SUMMARY:\nTotal sections: 3\nSections:\n- Section 1: Intro\n- Section 2: Storage\n\
        Key themes: <theme>, safety";
    let o = read_outline(text);
    assert_eq!(o.sections.len(), 3, "{:?}", o.sections);
    assert!(o.document_title_defaulted);
    let s = &o.sections[0];
    assert!(s.title_defaulted && s.description.is_none() && s.source_coverage.is_none());
    assert!(s.key_topics.is_empty() && s.length_defaulted, "{s:?}");
    assert_eq!(o.sections[1].key_topics, ["Retention: thirty days", "Encryption"]);
    assert_eq!(o.key_themes, ["safety"]);
    assert_eq!(o.total_sections_stated, Some(3));
}

#[test]
fn too_many_sections_are_cut_and_a_missing_title_is_said() {
    let many: String = (1..=23).map(|i| format!("SECTION {i}: S{i}\nLength: Short\n\n")).collect();
    let o = read_outline(&many);
    assert_eq!((o.sections.len(), o.truncated_from), (20, Some(23)));
    assert_eq!(
        (o.document_title.as_str(), o.document_title_defaulted),
        ("Untitled Document", true)
    );
    let w = outline_warnings(&o);
    assert!(w[0].contains("23 sections") && w.iter().any(|w| w.contains("no document title")));
    let fifteen: String = (1..=15).map(|i| format!("SECTION {i}: S{i}\n")).collect();
    let o = read_outline(&format!("DOCUMENT TITLE: T\n{fifteen}"));
    assert_eq!((o.sections.len(), o.truncated_from), (15, None));
    assert!(outline_warnings(&o)[0].contains("15 sections, more than"));
    // Mentions are not headings.
    let o = read_outline("See Section 2 for more.\nSections 1-3: overview\nSECTION <n>: <title>");
    assert!(o.sections.is_empty());
}

#[test]
fn topics_are_covered_only_when_their_long_words_occur() {
    let text = "We use a CRDT for conflict resolution; the UI shows presence.";
    let topics: Vec<String> = [
        "Conflict resolution",
        "CRDT choice",
        "UI",
        "CI/CD",
        "Resolving conflicts",
        "Presence cursors",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (covered, missing) = topic_coverage(text, &topics);
    assert_eq!(covered, ["Conflict resolution", "UI"]);
    assert_eq!(missing, ["CRDT choice", "CI/CD", "Resolving conflicts", "Presence cursors"]);
    assert_eq!(topic_coverage("", &["".to_string()]).1, [""], "an empty topic is never covered");
}

#[test]
fn todo_markers_are_collected_where_written() {
    assert_eq!(
        todo_markers("a [TODO: add costs] b [todo:  owner? ] [TODO unclosed"),
        ["add costs", "owner?"]
    );
    assert!(todo_markers("TODO: not a marker").is_empty());
}

#[test]
fn requests_are_checked_field_by_field() {
    let d = offline_defaults();
    let bad = |cfg: Value| validate_config("blueprint", cfg).unwrap_err();
    assert_eq!(bad(json!({ "authorModels": [] })).field, "modeConfig.authorModels");
    assert_eq!(bad(json!({ "authorModels": vec!["a"; 7] })).field, "modeConfig.authorModels");
    assert_eq!(bad(json!({ "authorModels": ["a", " "] })).field, "modeConfig.authorModels");
    assert_eq!(bad(json!({ "architectModel": "" })).field, "modeConfig.architectModel");
    assert_eq!(bad(json!({ "assemblerModel": " " })).field, "modeConfig.assemblerModel");
    assert_eq!(bad(json!({ "content": "  " })).field, "modeConfig.content");
    assert_eq!(bad(json!({ "content": "x".repeat(200_001) })).field, "modeConfig.content");
    let e = bad(json!({ "documentType": "novel" }));
    assert_eq!(e.field, "modeConfig.documentType");
    assert!(e.message.contains("security_assessment"), "{e}");
    assert_eq!(bad(json!({ "timeoutMs": 9_999 })).field, "modeConfig.timeoutMs");
    assert_eq!(bad(json!({ "timeoutMs": 600_001 })).field, "modeConfig.timeoutMs");
    assert_eq!(bad(json!({ "rounds": 2 })).field, "modeConfig.rounds");
    let e = validate(&json!({ "mode": "blueprint", "question": " " }), &d).unwrap_err();
    assert_eq!(e.field, "question");
    let v = validate(&json!({ "mode": "blueprint", "question": "q" }), &d).unwrap();
    assert_eq!(v.config["architectModel"], "sim/alpha");
    assert_eq!(v.config["assemblerModel"], "sim/alpha");
    assert_eq!(v.config["authorModels"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
    assert_eq!(v.config["documentType"], "architecture_blueprint");
    assert_eq!(v.config["timeoutMs"], 300_000);
    assert_eq!(v.models, ["sim/alpha", "sim/beta", "sim/gamma"]);
    let fallback = crate::modes::Fallbacks {
        chairman: Some("spare-c".into()),
        facilitator: Some("spare-f".into()),
        ..Default::default()
    };
    let d = Defaults { offline: false, fallback, ..d };
    let v = validate(
        &json!({ "mode": "blueprint", "question": "q",
                 "modeConfig": { "authorModels": ["x", "x"], "assemblerModel": "y" } }),
        &d,
    )
    .unwrap();
    assert_eq!(v.config["architectModel"], "anthropic/claude-opus-4-6");
    assert_eq!(v.config["authorModels"], json!(["x", "x"]), "an author may take two turns");
    assert_eq!(
        (v.config["facilitatorFallbackModel"].clone(), v.config["chairmanFallbackModel"].clone()),
        (json!("spare-f"), json!("spare-c"))
    );
    assert_eq!(v.models, ["x", "anthropic/claude-opus-4-6", "y"]);
}

#[test]
fn the_sim_plans_writes_and_assembles_and_now_and_then_half_follows_the_format() {
    for malformed in [false, true] {
        for seed in 0..6u64 {
            let mut m = blueprint(config(&["sim/a", "sim/b"]));
            let all = drive(&mut m, |c| {
                let call_seed = seed + c.key.len() as u64;
                let prompt = &c.messages[0].content;
                sim_answer(&sim_call_ask(c, prompt, call_seed, malformed, seed == 3, None))
            });
            let doc = finished(&all).unwrap_or_else(|| panic!("{:?}", failed(&all)));
            assert!(doc.contains("Executive Summary") && doc.contains("simulated section"));
            let o = emitted(&all, "outline_complete").unwrap()["data"].clone();
            let n = o["sections"].as_array().unwrap().len();
            assert!((6..=8).contains(&n));
            assert_eq!(
                o["sections"][0]["lengthDefaulted"], malformed,
                "the messy outline states no lengths"
            );
            assert_eq!(doc.matches("## Section ").count(), if malformed { 0 } else { n });
            if seed == 3 {
                assert!(doc.contains("<script>"));
            }
            assert_reloads(&all);
        }
    }
    assert_eq!(sim_answer(&sim_ask("sim/a", "Write a poem.", 1, false, None)), None);
}

proptest! {
    /// Whatever the text, the outline holds at most 20 sections numbered 1..n, no empty topic,
    /// and a length is defaulted exactly when it is Medium for want of one stated name.
    #[test]
    fn outlines_read_from_any_text_keep_their_invariants(
        lines in proptest::collection::vec(
            prop_oneof![
                "(?s).{0,40}",
                "(SECTION|Section|## Section|\\*\\*Section) [0-9]{1,3}[:.—-] ?[a-z ]{0,10}",
                "(Key Topics|Length|Description|Source Coverage|Total sections|Key themes): ?[a-zA-Z ,;]{0,20}",
                "[-*] [a-z]{0,8}",
                "(Short|Medium|Long|short or long)",
                "DOCUMENT (TITLE|SUMMARY): ?[a-z]{0,8}",
            ],
            0..60,
        ),
    ) {
        let text = lines.join("\n");
        let o = read_outline(&text);
        prop_assert!(o.sections.len() <= MAX_SECTIONS);
        for (i, s) in o.sections.iter().enumerate() {
            prop_assert_eq!(s.number, i + 1);
            prop_assert!(!s.title.is_empty());
            prop_assert!(s.key_topics.iter().all(|t| !t.trim().is_empty()));
            prop_assert!(!s.length_defaulted || s.length == Length::Medium);
            prop_assert!(s.description.as_ref().is_none_or(|d| !d.trim().is_empty()));
        }
        prop_assert!(!o.document_title_defaulted || o.document_title == "Untitled Document");
        prop_assert!(!o.document_title.is_empty());
        let (covered, missing) = topic_coverage(&text, &o.sections.iter().flat_map(|s| s.key_topics.clone()).collect::<Vec<_>>());
        prop_assert_eq!(covered.len() + missing.len(), o.sections.iter().map(|s| s.key_topics.len()).sum::<usize>());
        prop_assert!(todo_markers(&text).len() <= text.matches(']').count());
    }
}

// ---- structured replies --------------------------------------------------------------------

/// A run whose architect is asked for JSON (its route takes structured output).
fn structured(cfg: Value) -> Blueprint {
    let mut c = ctx("Design doc for our collaborative editor", vec![], true);
    c.structured = crate::modes::Structured::models(["arch"]);
    Blueprint::new(&cfg, c).unwrap()
}

fn json_section(title: &str, topics: &[&str], length: &str) -> Value {
    json!({ "title": title, "description": format!("All about {title}."), "keyTopics": topics,
            "length": length, "sourceCoverage": "the requirements" })
}

fn json_outline(sections: Vec<Value>) -> Value {
    json!({ "reasoning": "from the goals to the delivery", "documentTitle": "Collaborative Editor Design",
            "sections": sections, "estimatedTotalLength": "3000 words",
            "keyThemes": ["collaboration", "offline, first"] })
}

fn four_sections() -> Vec<Value> {
    vec![
        json_section("Context and Goals", &["Offline editing", "Presence cursors"], "Short"),
        json_section("Sync Engine", &["Conflict resolution", "CRDT choice"], "Long"),
        json_section("Comments", &["Threading", "Notifications"], "Medium"),
        json_section("History", &["Snapshots"], "Short"),
    ]
}

#[test]
fn the_outline_schema_takes_what_the_reader_takes_and_refuses_the_rest() {
    let s = outline_schema();
    assert_eq!(s.name, OUTLINE_SCHEMA);
    let keys: Vec<&String> = s.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["reasoning", "documentTitle", "sections", "estimatedTotalLength", "keyThemes"],
        "the reasoning comes first"
    );
    let sections = &s.schema["properties"]["sections"];
    assert_eq!(
        (sections["minItems"].as_u64(), sections["maxItems"].as_u64()),
        (Some(MIN_SECTIONS as u64), Some(MAX_SECTIONS as u64)),
        "the reader goes on from 3 sections and keeps 20"
    );
    assert_eq!(
        sections["items"]["properties"]["length"]["enum"],
        json!(["Short", "Medium", "Long"])
    );
    assert!(s.validate(&json_outline(four_sections())).is_ok());
    // Three sections, the fewest the run goes on with; twenty, the most it keeps.
    let n = |k: usize| (0..k).map(|i| json_section(&format!("S{i}"), &["x"], "Medium")).collect();
    assert!(s.validate(&json_outline(n(MIN_SECTIONS))).is_ok());
    assert!(s.validate(&json_outline(n(MAX_SECTIONS))).is_ok());
    let mut bad = vec![
        // Too few or too many sections.
        json_outline(n(MIN_SECTIONS - 1)),
        json_outline(n(MAX_SECTIONS + 1)),
        // A length outside the three, or not as written.
        json_outline(vec![
            json_section("A", &[], "Huge"),
            json_section("B", &[], "Short"),
            json_section("C", &[], "Short"),
        ]),
        json_outline(vec![
            json_section("A", &[], "short"),
            json_section("B", &[], "Short"),
            json_section("C", &[], "Short"),
        ]),
        // Too many topics, an unbounded title.
        json_outline(vec![
            json_section("A", &["t"; MAX_TOPICS + 1], "Short"),
            json_section("B", &[], "Short"),
            json_section("C", &[], "Short"),
        ]),
        json_outline(vec![
            json_section(&"x".repeat(TITLE_MAX_CHARS + 1), &[], "Short"),
            json_section("B", &[], "Short"),
            json_section("C", &[], "Short"),
        ]),
    ];
    // A missing field, a foreign field.
    let mut v = json_outline(four_sections());
    v.as_object_mut().unwrap().remove("reasoning");
    bad.push(v);
    let mut v = json_outline(four_sections());
    v["sections"][1].as_object_mut().unwrap().remove("length");
    bad.push(v);
    let mut v = json_outline(four_sections());
    v["sections"][0]["number"] = json!(1);
    bad.push(v);
    for b in bad {
        assert!(s.validate(&b).is_err(), "{b}");
    }
}

#[test]
fn an_outline_is_read_from_json_when_it_fits_else_from_text() {
    let s = outline_schema();
    let (o, from) = read_outline_reply(&json_outline(four_sections()).to_string(), &s);
    assert_eq!(from, Some(ReadFrom::Json));
    // What the text outline of the same plan gives.
    let (t, text_from) = read_outline_reply(OUTLINE, &s);
    assert_eq!(text_from, Some(ReadFrom::Text));
    assert_eq!(o.document_title, t.document_title);
    let shape = |o: &OutlineReading| -> Vec<(usize, String, Vec<String>, Length, bool)> {
        o.sections
            .iter()
            .map(|s| {
                (s.number, s.title.clone(), s.key_topics.clone(), s.length, s.length_defaulted)
            })
            .collect()
    };
    assert_eq!(shape(&o), shape(&t));
    assert_eq!(o.sections[1].description.as_deref(), Some("All about Sync Engine."));
    assert_eq!(o.sections[1].source_coverage.as_deref(), Some("the requirements"));
    assert_eq!(o.estimated_length.as_deref(), Some("3000 words"));
    // A theme is one item of the list, commas and all.
    assert_eq!(o.key_themes, ["collaboration", "offline, first"]);
    assert_eq!(o.total_sections_stated, None, "the JSON states no count of its own");
    assert!(outline_warnings(&o).iter().any(|w| w.contains("only 4 sections")));

    // Held to the text's rules: an echoed placeholder or an empty field states nothing.
    let mut v = json_outline(four_sections());
    v["documentTitle"] = json!("<text>");
    v["sections"][0]["title"] = json!("  ");
    v["sections"][0]["description"] = json!("");
    v["sections"][0]["sourceCoverage"] = json!("<text>");
    v["sections"][1]["keyTopics"] = json!(["**CRDT choice**", " ", "<text>"]);
    let (o, from) = read_outline_reply(&format!("<think>plan</think>```json\n{v}\n```"), &s);
    assert_eq!(from, Some(ReadFrom::Json));
    assert!(o.document_title_defaulted && o.document_title == "Untitled Document");
    let first = &o.sections[0];
    assert!(first.title_defaulted && first.title == "Section 1");
    assert_eq!((first.description.clone(), first.source_coverage.clone()), (None, None));
    assert_eq!(o.sections[1].key_topics, ["CRDT choice"]);

    // JSON that does not fit: the text reader, which finds no section in it.
    for unfit in [
        json_outline(four_sections()[..2].to_vec()).to_string(),
        json_outline(vec![json_section("A", &[], "Huge"); 4]).to_string(),
        r#"{"reasoning": "", "documentTitle": "X", "sections": [{"title": "A""#.to_string(),
        format!("<think>{}", json_outline(four_sections())),
    ] {
        let (o, from) = read_outline_reply(&unfit, &s);
        assert_eq!((o.sections.len(), from), (0, None), "{unfit}");
    }
    // JSON that does not fit, with the text format after it: the text is read.
    let mixed = format!("{}\n\n{OUTLINE}", json_outline(four_sections()[..2].to_vec()));
    let (o, from) = read_outline_reply(&mixed, &s);
    assert_eq!((o.sections.len(), from), (4, Some(ReadFrom::Text)));
}

proptest! {
    /// Whatever JSON the schema allows is read whole: the title, every section with its
    /// fields in order, the summary.
    #[test]
    fn any_outline_the_schema_allows_is_read_without_loss(seed in any::<u64>()) {
        let s = outline_schema();
        let n = std::cell::Cell::new(0u64);
        let words = |f: &str| { n.set(n.get() + 1); format!("{f} {seed:x} {}", n.get()) };
        let mut rng = SplitMix64::new(seed);
        let mut v = schema::sample(&s.schema, &mut rng, &words);
        // More sections than the sampler's fewest, up to the most the schema allows.
        let extra = rng.below(MAX_SECTIONS - MIN_SECTIONS + 1);
        for _ in 0..extra {
            let item = schema::sample(&s.schema["properties"]["sections"]["items"], &mut rng, &words);
            v["sections"].as_array_mut().unwrap().push(item);
        }
        prop_assert!(s.validate(&v).is_ok(), "{}", v);
        let (o, from) = read_outline_reply(&v.to_string(), &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        prop_assert_eq!(json!(o.document_title), v["documentTitle"].clone());
        prop_assert!(!o.document_title_defaulted);
        let stated = v["sections"].as_array().unwrap();
        prop_assert_eq!(o.sections.len(), stated.len());
        for (i, (got, x)) in o.sections.iter().zip(stated).enumerate() {
            prop_assert_eq!(got.number, i + 1);
            prop_assert_eq!(json!(got.title), x["title"].clone());
            prop_assert_eq!(json!(got.description), x["description"].clone());
            prop_assert_eq!(json!(got.key_topics), x["keyTopics"].clone());
            prop_assert_eq!(json!(got.length), x["length"].clone());
            prop_assert!(!got.length_defaulted);
            prop_assert_eq!(json!(got.source_coverage), x["sourceCoverage"].clone());
        }
        prop_assert_eq!(json!(o.estimated_length), v["estimatedTotalLength"].clone());
        prop_assert_eq!(json!(o.key_themes), v["keyThemes"].clone());
    }
}

#[test]
fn the_json_prompt_keeps_the_rules_and_swaps_the_format() {
    let s = outline_schema();
    let kind = DocumentType::TechnicalDesignDocument;
    let (json, text) =
        (outline_prompt(kind, "the notes", Some(&s)), outline_prompt(kind, "the notes", None));
    for kept in [
        OUTLINE_HEAD,
        "Plan a Technical Design Document from the source material below.",
        "=== SOURCE MATERIAL ===\nthe notes\n=== END OF SOURCE MATERIAL ===",
        "- 6 to 12 sections, in a logical order, with no overlap between them.",
        "Short = 200-500 words, Medium = 500-1000 words",
    ] {
        assert!(json.contains(kept) && text.contains(kept), "{kept}");
    }
    assert!(json.contains("Reply with a single JSON object"), "{json}");
    assert!(!json.contains("DOCUMENT TITLE:") && !json.contains("SECTION 1:"), "{json}");
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"sections\"").unwrap());
    assert!(json.contains(r#""Short", "Medium", "Long""#), "{json}");
    assert!(text.ends_with("Key themes: <theme>, <theme>, <theme>") && !text.contains("JSON"));
}

#[test]
fn an_architect_that_takes_json_is_asked_for_it_and_read_from_it() {
    let mut m = structured(config(&["a", "b"]));
    let start = m.start();
    let outline = call_keyed(&start, "outline");
    assert_eq!(schema_name(&outline), Some(OUTLINE_SCHEMA));
    let p = &outline.messages[0].content;
    assert!(p.contains("Reply with a single JSON object") && !p.contains("DOCUMENT TITLE:"));
    // The material is named, for fitting a small context.
    let names: Vec<&str> = outline.material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["the source material"]);
    assert!(p.contains(&*outline.material[0].text));

    let all = drive(&mut m, |c| match c.key.as_str() {
        "outline" => Some(json_outline(four_sections()).to_string()),
        _ => answer_all(c),
    });
    let o = emitted(&all, "outline_complete").unwrap()["data"].clone();
    assert_eq!(o["readFrom"], "json");
    assert_eq!(o["documentTitle"], "Collaborative Editor Design");
    assert_eq!(o["sections"][1]["keyTopics"], json!(["Conflict resolution", "CRDT choice"]));
    assert_eq!(o["sections"][1]["assignedModel"], "b");
    let row = rows(&all).into_iter().find(|r| r.stage_type == "outline").unwrap();
    assert_eq!(row.parsed_data.unwrap()["readFrom"], "json");
    // Sections and the assembly are text a person reads: no schema, their material named.
    let calls = stage_calls(&all);
    let sections: Vec<&CallSpec> = calls.iter().filter(|c| c.key.starts_with("section:")).collect();
    assert_eq!(sections.len(), 4);
    for c in &sections {
        assert!(c.schema.is_none());
        assert!(c.messages[0].content.starts_with(SECTION_HEAD));
        assert_eq!(c.material.len(), 1);
        assert!(c.messages[0].content.contains(&*c.material[0].text));
    }
    let asm = calls.iter().find(|c| c.key == "assembly").unwrap();
    assert!(asm.schema.is_none());
    let names: Vec<&str> = asm.material.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names[..2], ["Section 1: Context and Goals", "Section 2: Sync Engine"]);
    assert_eq!(names.last(), Some(&"the source material"));
    assert!(quotes_its_material(asm));
    assert!(finished(&all).is_some());
    assert_reloads(&all);

    // An architect whose route takes no structured output: the text prompt, the schema still
    // named (the engine sends it only where the route takes it), read from the text.
    let mut m = blueprint(config(&["a"]));
    let all = drive(&mut m, answer_all);
    let outline = call_keyed(&all, "outline");
    assert_eq!(schema_name(&outline), Some(OUTLINE_SCHEMA));
    assert!(outline.messages[0].content.contains("DOCUMENT TITLE: <title>"));
    assert_eq!(emitted(&all, "outline_complete").unwrap()["data"]["readFrom"], "text");

    // JSON with too few sections to go on: nothing read, no readFrom, the run fails.
    let mut m = structured(config(&["a"]));
    let all = drive(&mut m, |c| {
        (c.key == "outline").then(|| json_outline(four_sections()[..2].to_vec()).to_string())
    });
    assert!(failed(&all).unwrap().contains("at least 3 are needed"));
    assert!(emitted(&all, "outline_complete").unwrap()["data"].get("readFrom").is_none());
}

#[test]
fn a_blueprint_run_on_the_sim_reads_its_outline_from_json() {
    for n in 0..4 {
        let cfg = json!({ "documentType": "architecture_blueprint", "architectModel": "sim/alpha",
                          "authorModels": ["sim/beta", "sim/xss-gamma"], "assemblerModel": "sim/alpha",
                          "timeoutMs": 300000, "content": format!("Notes {n}: an editor for teams, offline first.") });
        let mut c = ctx("Design doc for our collaborative editor", vec![], true);
        c.structured = crate::modes::Structured::models(["sim/alpha", "sim/beta", "sim/xss-gamma"]);
        let mut m = Blueprint::new(&cfg, c).unwrap();
        let all = drive_on_sim_text(&mut m);
        let doc = finished(&all).unwrap_or_else(|| panic!("{:?}", failed(&all)));
        assert!(doc.contains("Executive Summary"));
        let o = emitted(&all, "outline_complete").unwrap()["data"].clone();
        assert_eq!(o["readFrom"], "json", "{o}");
        assert!((6..=8).contains(&o["sections"].as_array().unwrap().len()));
        assert_eq!(o["documentTitle"], format!("Notes {n}: an editor for teams,"));
        // Only the outline is machine-read: one row says so.
        assert_eq!(machine_read_stages(&all), ["outline"]);
        assert_reloads(&all);
    }
}

#[test]
fn the_sim_architect_answers_its_schema_in_json_and_no_other() {
    let s = outline_schema();
    let prompt =
        outline_prompt(DocumentType::Custom, "Six words of material for the title here", Some(&s));
    for (seed, hostile) in (0..12u64).zip([false, true].into_iter().cycle()) {
        let reply = sim_answer(&sim_ask("sim/alpha", &prompt, seed, hostile, Some(&s))).unwrap();
        let (o, from) = read_outline_reply(&reply, &s);
        assert_eq!(from, Some(ReadFrom::Json), "{reply}");
        assert_eq!(o.document_title, "Six words of material for the");
        assert!(o.sections.iter().all(|s| s.key_topics.len() == 3 && s.description.is_some()));
    }
    let other = ReplySchema::new("decompose_plan", schema::reasoned([]));
    assert_eq!(sim_answer(&sim_ask("sim/alpha", &prompt, 1, false, Some(&other))), None);
}

// ---- the export's report -------------------------------------------------------------------

/// The report of `result`, checked to show no JSON, missing value, type key or result key.
fn readable(result: &Value) -> String {
    readable_report(result, report, &["technical_design_document", "section_", "TODO"])
}

#[test]
fn the_report_tables_the_outlines_sections_and_who_wrote_each() {
    let mut m = blueprint(config(&["a", "b", "a"]));
    let all = drive(&mut m, answer_all);
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("|---"), "{r}");
    assert!(
        r.contains(
            "**Document:** Collaborative Editor Design (Technical Design Document), outlined by \
             arch; 4 sections."
        ),
        "{r}"
    );
    assert_contains_all(
        &r,
        &[
            "**Assembled by:** asm, 9 words.",
            "| 1 | Context and Goals | short (200-500 words) | a | 14 | 2 of 2 | written |",
            "| 2 | Sync Engine | long (1000-2000 words) | b | 14 | 1 of 2 | written |",
            "**Key topics a section left out:**\n\n- section 2 (Sync Engine): CRDT choice",
            "- The outline has only 4 sections",
            "| 2 | Sync Engine | long (1000-2000 words) | b |",
        ],
    );
    assert!(r.contains("| 4 | History | short (200-500 words) | a |"), "round-robin: {r}");
    assert!(r.contains("**Still to do in the document:**\n\n- budget figures"), "{r}");

    // Failed and empty sections: named with their author and why.
    let mut m = blueprint(config(&["a", "bad"]));
    let all = drive(&mut m, |c| match c.model.as_str() {
        "bad" if c.key == "section:2" => None,
        "bad" => Some("<think>nothing</think>  ".into()),
        _ => answer_all(c),
    });
    let r = readable(&load_result(&rows(&all)));
    assert_contains_all(
        &r,
        &[
            "| 2 | Sync Engine | long (1000-2000 words) | bad | — | — | failed (down) |",
            "| 4 | History | short (200-500 words) | bad | — | — | failed (empty reply) |",
        ],
    );
}

#[test]
fn an_empty_or_partial_result_reports_what_there_is() {
    assert_eq!(report(&json!({})), "");
    // The architect failed: the document type, and no outline.
    let mut m = blueprint(config(&["a"]));
    let all = drive(&mut m, |_| None);
    let r = readable(&load_result(&rows(&all)));
    assert_eq!(r, "**Document:** Technical Design Document; no outline was written.\n\n");
    // Every author failed: the outline's sections, each failed; nothing assembled.
    let mut m = blueprint(config(&["bad"]));
    let all = drive(&mut m, |c| (c.key == "outline").then(|| OUTLINE.to_string()));
    let r = readable(&load_result(&rows(&all)));
    assert!(r.contains("|---") && r.contains("failed (down)") && !r.contains("Assembled"), "{r}");
    // The outline stored, no section written yet.
    let mut m = blueprint(config(&["a"]));
    let mut all = m.start();
    all.extend(m.on_reply(ok(&call_keyed(&all, "outline"), OUTLINE)));
    let r = readable(&load_result(&rows(&all)));
    assert!(
        r.contains("| 1 | Context and Goals | short (200-500 words) | a | — | — | not written |"),
        "{r}"
    );
}
