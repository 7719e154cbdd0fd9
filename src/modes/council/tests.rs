//! Council mode on recorded and adversarial model outputs, and driven as a state machine.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::common::seed_from_run_id;
use crate::modes::testkit::{
    self, assert_contains_all, assert_report_free_of, calls, emitted, err, events, feed,
    offline_defaults, ok, rows,
};
use crate::modes::validate;
use crate::modes::Mode;
use crate::modes::{CallSpec, ChatMessage};

fn labels(n: usize) -> Vec<String> {
    (0..n).map(label).collect()
}

#[test]
fn reads_a_realistic_evaluation() {
    let text = "Response A is thorough but verbose. Response B misses the caching angle. \
                Response C is concise and correct.\n\nFINAL RANKING:\n1. Response C\n2. Response A\n3. Response B\n";
    assert_eq!(parse_ranking(text, &labels(3)), vec!["Response C", "Response A", "Response B"]);
}

#[test]
fn tolerates_markdown_and_case() {
    let bold = "Analysis...\n\n**FINAL RANKING:**\n1. **Response B**\n2) *Response A*\n3. Response C - weakest";
    assert_eq!(parse_ranking(bold, &labels(3)), vec!["Response B", "Response A", "Response C"]);
    let heading = "## Final Ranking:\n\n1. response c\n2. response b\n3. response a";
    assert_eq!(parse_ranking(heading, &labels(3)), vec!["Response C", "Response B", "Response A"]);
    let inner = "**Final Ranking**:\n- 1. Response A\n- 2. Response B";
    assert_eq!(parse_ranking(inner, &labels(2)), vec!["Response A", "Response B"]);
}

#[test]
fn the_last_header_wins_over_a_quoted_example() {
    let text = "The prompt's example was:\nFINAL RANKING:\n1. Response C\n2. Response A\n3. Response B\n\n\
                My own view: B is best.\n\nFINAL RANKING:\n1. Response B\n2. Response C\n3. Response A";
    assert_eq!(parse_ranking(text, &labels(3)), vec!["Response B", "Response C", "Response A"]);
}

#[test]
fn unknown_labels_are_dropped_and_a_label_ranked_twice_is_no_ranking() {
    let text = "FINAL RANKING:\n1. Response Z\n2. Response B\n3. Response A";
    assert_eq!(parse_ranking(text, &labels(3)), vec!["Response B", "Response A"]);
    let text = "FINAL RANKING:\n1. Response Z\n2. Response B\n3. Response B\n4. Response A";
    assert!(parse_ranking(text, &labels(3)).is_empty());
}

#[test]
fn labels_under_the_header_without_numbers_are_level_two() {
    let text = "FINAL RANKING:\nResponse B, then Response A, and last Response C.";
    assert_eq!(parse_ranking(text, &labels(3)), vec!["Response B", "Response A", "Response C"]);
}

#[test]
fn without_a_stated_ranking_mentions_are_not_a_ranking() {
    let text = "I prefer Response C over Response A; Response C is also shorter than Response B.";
    assert!(parse_ranking(text, &labels(3)).is_empty());
}

#[test]
fn nothing_recognisable_is_empty() {
    assert!(parse_ranking("They are all fine.", &labels(3)).is_empty());
    assert!(parse_ranking("", &labels(3)).is_empty());
    assert!(parse_ranking("FINAL RANKING:\n1. the first one", &labels(3)).is_empty());
}

#[test]
fn a_longer_label_is_not_read_as_a_shorter_one() {
    let map: Vec<String> = vec!["Response A".into(), "Response AB".into()];
    assert_eq!(
        parse_ranking("FINAL RANKING:\n1. Response AB\n2. Response A", &map),
        vec!["Response AB", "Response A"]
    );
    assert_eq!(parse_ranking("FINAL RANKING:\n1. Response ABC", &map), Vec::<String>::new());
}

proptest! {
    #[test]
    fn parse_ranking_never_panics_and_returns_distinct_known_labels(text in "\\PC{0,400}", n in 1usize..7) {
        let map = labels(n);
        let got = parse_ranking(&text, &map);
        let mut seen = std::collections::HashSet::new();
        for l in &got {
            prop_assert!(map.contains(l));
            prop_assert!(seen.insert(l.clone()));
        }
    }

    #[test]
    fn parse_ranking_reads_any_well_formed_list(perm in Just((0..5usize).collect::<Vec<_>>()).prop_shuffle(), noise in "[a-z .,]{0,80}") {
        let map = labels(5);
        let mut text = format!("{noise}\n\nFINAL RANKING:\n");
        for (i, p) in perm.iter().enumerate() {
            text.push_str(&format!("{}. {}\n", i + 1, map[*p]));
        }
        let expected: Vec<String> = perm.iter().map(|p| map[*p].clone()).collect();
        prop_assert_eq!(parse_ranking(&text, &map), expected);
    }
}

#[test]
fn aggregate_is_the_average_position_over_parsed_rankings() {
    let m: BTreeMap<String, String> = [("Response A", "m1"), ("Response B", "m2")]
        .iter()
        .map(|(l, m)| (l.to_string(), m.to_string()))
        .collect();
    let r = |p: &[&str]| Stage2Response {
        model: "e".into(),
        ranking: String::new(),
        parsed_ranking: p.iter().map(|s| s.to_string()).collect(),
        places: Vec::new(),
        partial: false,
        unparsed: None,
        read_from: None,
        response_time_ms: 0,
    };
    let agg = aggregate_rankings(
        &[
            r(&["Response A", "Response B"]),
            r(&["Response B", "Response A"]),
            r(&["Response A", "Response B"]),
            r(&[]),
        ],
        &m,
    );
    assert_eq!(agg[0].model, "m1");
    assert_eq!(agg[0].average_rank, 1.33);
    assert_eq!(agg[0].rankings_count, 3, "the empty ranking is left out");
    assert_eq!(agg[1].average_rank, 1.67);
    assert!(aggregate_rankings(&[r(&[])], &m).is_empty());
}

#[test]
fn prompts_are_the_seeds_verbatim() {
    let p = ranking_prompt(
        "Q?",
        &[("Response A".into(), "one".into()), ("Response B".into(), "two".into())],
        None,
    );
    assert!(p.starts_with("You are an expert evaluator. Below is a question and several responses from different sources. Your task is to evaluate each response and rank them from best to worst.\n\nQuestion: Q?\n\n--- Response A ---\none\n\n--- Response B ---\ntwo\n\nInstructions:\n1. Evaluate each response"));
    assert!(p.ends_with("FINAL RANKING:\n1. Response C\n2. Response A\n3. Response B\n\nDo not include any other text in the FINAL RANKING section."));
    let s = synthesis_prompt(
        "Q?",
        &[Stage1Response { model: "m1".into(), response: "r1".into(), response_time_ms: 1 }],
        &[Stage2Response {
            model: "m2".into(),
            ranking: "rank".into(),
            parsed_ranking: vec![],
            places: vec![],
            partial: false,
            unparsed: None,
            read_from: None,
            response_time_ms: 1,
        }],
    );
    assert!(s.contains("Original Question: Q?\n\nSTAGE 1 — Individual Responses:\n\n--- m1 ---\nr1\n\nSTAGE 2 — Peer Rankings:\n\n--- Evaluator: m2 ---\nrank\n\n"));
    assert!(s.ends_with("represents the collective intelligence of all the models."));
}

// ---- the state machine ----------------------------------------------------------------

fn ctx(history: Vec<ChatMessage>, new_conversation: bool) -> RunContext {
    testkit::ctx("What is best?", history, new_conversation)
}

fn council(models: &[&str], history: Vec<ChatMessage>, new_conversation: bool) -> Council {
    let config = json!({ "councilModels": models, "chairmanModel": "chair", "timeoutMs": 120000 });
    Council::new(&config, ctx(history, new_conversation)).expect("a configuration that fits")
}

/// A ranking that puts the labels in the given order.
fn ranking(order: &[&str]) -> String {
    let mut s = String::from("Evaluation.\n\nFINAL RANKING:\n");
    for (i, l) in order.iter().enumerate() {
        s.push_str(&format!("{}. {l}\n", i + 1));
    }
    s
}

#[test]
fn the_happy_path_follows_the_seed() {
    let mut c = council(&["m1", "m2", "m3"], vec![], true);
    let mut all = c.start();
    let s1 = calls(&all);
    assert_eq!(s1.len(), 3);
    assert_eq!(s1[0].messages, vec![ChatMessage::user("What is best?")]);
    let e1 = feed(&mut c, s1.iter().map(|s| ok(s, &format!("answer {}", s.key))).collect());
    let s2 = calls(&e1);
    assert_eq!(s2.len(), 3, "every member ranks");
    assert!(s2[0].messages[0].content.contains("--- Response A ---"));
    assert!(!s2[0].messages[0].content.contains("m1"), "rankers see no model names");
    all.extend(e1);
    let e2 = feed(
        &mut c,
        s2.iter().map(|s| ok(s, &ranking(&["Response B", "Response A", "Response C"]))).collect(),
    );
    let s3 = calls(&e2);
    assert_eq!(s3.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), vec!["stage3", "title"]);
    assert!(
        s3[0].messages[0].content.contains("--- answer")
            || s3[0].messages[0].content.contains("--- m1 ---")
    );
    let meta = emitted(&e2, "stage2_complete").unwrap()["metadata"].clone();
    assert_eq!(meta["aggregateRankings"][0]["label"], "Response B");
    assert_eq!(meta["aggregateRankings"][0]["averageRank"], 1.0);
    all.extend(e2);
    let e3 = feed(&mut c, vec![ok(&s3[0], "the synthesis"), ok(&s3[1], "Best Things Compared")]);
    all.extend(e3.clone());
    assert_eq!(
        events(&all),
        vec![
            "stage1_start",
            "stage1_complete",
            "stage2_start",
            "stage2_complete",
            "stage3_start",
            "stage3_complete",
            "title_complete"
        ]
    );
    assert!(e3.contains(&Effect::Finish { answer: "the synthesis".into() }));
    assert!(e3.contains(&Effect::SetTitle("Best Things Compared".into())));
    let stored = rows(&all);
    let types: Vec<&str> = stored.iter().map(|r| r.stage_type.as_str()).collect();
    assert_eq!(
        types,
        vec![
            "stage1",
            "stage1",
            "stage1",
            "label_map",
            "label_map",
            "label_map",
            "stage2",
            "stage2",
            "stage2",
            "stage3"
        ]
    );
    // The stored rows rebuild exactly what went out live.
    let result = load_result(&stored);
    assert_eq!(result["stage1"], emitted(&all, "stage1_complete").unwrap()["data"]);
    assert_eq!(result["stage2"], emitted(&all, "stage2_complete").unwrap()["data"]);
    assert_eq!(result["stage2Metadata"], emitted(&all, "stage2_complete").unwrap()["metadata"]);
    assert_eq!(result["stage3"], emitted(&all, "stage3_complete").unwrap()["data"]);
    assert!(result["stage3"].get("fallbackFrom").is_none(), "no backup was needed");
    let done = emitted(&all, "stage3_complete").unwrap();
    assert_eq!((&done["partial"], &done["failedModels"]), (&json!(false), &json!([])));
    assert_eq!((&result["partial"], &result["failedModels"]), (&json!(false), &json!([])));
}

/// A new two-member council answered `a` and ranked `ranking`: it and its stage 3 calls.
fn at_stage_three(ranking: &str) -> (Council, Vec<CallSpec>) {
    let mut c = council(&["m1", "m2"], vec![], true);
    let s1 = calls(&c.start());
    let s2 = calls(&feed(&mut c, s1.iter().map(|s| ok(s, "a")).collect()));
    let s3 = calls(&feed(&mut c, s2.iter().map(|s| ok(s, ranking)).collect()));
    (c, s3)
}

#[test]
fn a_title_that_arrives_first_waits_for_stage_three() {
    let (mut c, s3) = at_stage_three("no ranking");
    let early = c.on_reply(ok(&s3[1], "Early Title"));
    assert!(events(&early).is_empty(), "held until stage 3");
    let done = c.on_reply(ok(&s3[0], "syn"));
    assert_eq!(events(&done), vec!["stage3_complete", "title_complete"]);
}

#[test]
fn a_failed_title_falls_back_to_the_question() {
    let (mut c, s3) = at_stage_three("x");
    c.on_reply(ok(&s3[0], "syn"));
    let t = c.on_reply(err(&s3[1]));
    assert!(t.contains(&Effect::SetTitle("What is best".into())));
}

#[test]
fn follow_ups_get_no_title_and_carry_ten_turns() {
    let mut history = Vec::new();
    for i in 0..15 {
        history.push(ChatMessage::user(format!("q{i}")));
        history.push(ChatMessage::assistant(format!("a{i}")));
    }
    let mut c = council(&["m1", "m2"], history, false);
    let s1 = calls(&c.start());
    assert_eq!(s1[0].messages.len(), 21);
    assert_eq!(s1[0].messages[0].content, "q5");
    let s2 = calls(&feed(&mut c, s1.iter().map(|s| ok(s, "a")).collect()));
    assert_eq!(s2[0].messages.len(), 1, "rankers get no history");
    let s3 = calls(&feed(&mut c, s2.iter().map(|s| ok(s, "x")).collect()));
    assert_eq!(s3.len(), 1, "no title call for a follow-up");
    assert_eq!(s3[0].messages.len(), 21, "the chairman gets the history too");
}

#[test]
fn all_members_failing_aborts() {
    let mut c = council(&["m1", "m2"], vec![], false);
    let s1 = calls(&c.start());
    let e = feed(&mut c, s1.iter().map(err).collect());
    assert!(
        matches!(e.last(), Some(Effect::Fail { message }) if message.contains("All council models failed"))
    );
    // Only the failures are stored: a row per failed call.
    assert!(rows(&e).iter().all(|r| r.stage_type == "call_failed"));
    assert_eq!(rows(&e).len(), 2);
}

#[test]
fn one_answer_is_not_enough() {
    let mut c = council(&["m1", "m2", "m3"], vec![], false);
    let s1 = calls(&c.start());
    let e = feed(&mut c, vec![ok(&s1[0], "a"), err(&s1[1]), err(&s1[2])]);
    assert!(matches!(e.last(), Some(Effect::Fail { .. })));
}

#[test]
fn some_failures_continue_with_fewer_labels() {
    let mut c = council(&["m1", "m2", "m3"], vec![], false);
    let s1 = calls(&c.start());
    let e = feed(&mut c, vec![ok(&s1[0], "a"), err(&s1[1]), ok(&s1[2], "c")]);
    let s2 = calls(&e);
    assert_eq!(s2.len(), 3);
    assert!(s2[0].messages[0].content.contains("--- Response B ---"));
    assert!(!s2[0].messages[0].content.contains("--- Response C ---"));
    let map: Vec<String> = rows(&e)
        .iter()
        .filter(|r| r.stage_type == "label_map")
        .filter_map(|r| r.model.clone())
        .collect();
    assert_eq!(map.len(), 2);
    assert!(!map.contains(&"m2".to_string()));
}

#[test]
fn unparseable_rankings_still_reach_the_chairman() {
    let mut c = council(&["m1", "m2"], vec![], false);
    let s1 = calls(&c.start());
    let s2 = calls(&feed(&mut c, s1.iter().map(|s| ok(s, "a")).collect()));
    let e = feed(&mut c, s2.iter().map(|s| ok(s, "all good")).collect());
    assert_eq!(emitted(&e, "stage2_complete").unwrap()["metadata"]["aggregateRankings"], json!([]));
    assert_eq!(calls(&e).len(), 1);
}

#[test]
fn a_failing_chairman_fails_after_stages_one_and_two_were_stored() {
    let mut c = council(&["m1", "m2"], vec![], true);
    let mut all = c.start();
    let s1 = calls(&all);
    let e1 = feed(&mut c, s1.iter().map(|s| ok(s, "a")).collect());
    let s2 = calls(&e1);
    all.extend(e1);
    let e2 =
        feed(&mut c, s2.iter().map(|s| ok(s, &ranking(&["Response A", "Response B"]))).collect());
    let s3 = calls(&e2);
    all.extend(e2);
    let e3 = c.on_reply(err(&s3[0]));
    assert!(matches!(e3.last(), Some(Effect::Fail { message }) if message.contains("chairman")));
    assert!(
        e3.iter().any(|e| matches!(e, Effect::SetTitle(_))),
        "the new conversation still gets a title"
    );
    let stored = rows(&all);
    assert_eq!(stored.iter().filter(|r| r.stage_type == "stage1").count(), 2);
    assert_eq!(stored.iter().filter(|r| r.stage_type == "stage2").count(), 2);
    let partial = load_result(&stored);
    assert!(partial["stage3"].is_null());
    assert_eq!(partial["stage2Metadata"]["aggregateRankings"].as_array().map(Vec::len), Some(2));
}

#[test]
fn the_label_map_follows_the_run_seed() {
    let map_for = |run: &str| {
        let mut ctx = ctx(vec![], false);
        ctx.seed = seed_from_run_id(run);
        let mut c = Council::new(
            &json!({ "councilModels": ["m1","m2","m3","m4"], "chairmanModel": "c", "timeoutMs": 120000 }),
            ctx,
        ).expect("a configuration that fits");
        let s1 = calls(&c.start());
        let e = feed(&mut c, s1.iter().map(|s| ok(s, &s.model)).collect());
        rows(&e)
            .into_iter()
            .filter(|r| r.stage_type == "label_map")
            .filter_map(|r| r.model)
            .collect::<Vec<_>>()
    };
    assert_eq!(map_for("r1"), map_for("r1"));
    assert!((2..30).any(|i| map_for(&format!("r{i}")) != map_for("r1")));
}

// ---- backups and partial runs ---------------------------------------------------------------

fn council_with_backup(models: &[&str], backup: &str) -> Council {
    let config = json!({ "councilModels": models, "chairmanModel": "chair", "timeoutMs": 120000,
                         "chairmanFallbackModel": backup });
    Council::new(&config, ctx(vec![], false)).expect("a configuration that fits")
}

/// Runs stages 1 and 2 (every answer and ranking as given) and returns the effects so far and
/// the chairman's call.
fn up_to_stage3(c: &mut Council, failing: &[usize]) -> (Vec<Effect>, CallSpec) {
    let mut all = c.start();
    let s1 = calls(&all);
    let e1 = feed(
        c,
        s1.iter()
            .enumerate()
            .map(|(i, s)| if failing.contains(&i) { err(s) } else { ok(s, "an answer") })
            .collect(),
    );
    let s2 = calls(&e1);
    all.extend(e1);
    let e2 = feed(c, s2.iter().map(|s| ok(s, &ranking(&["Response A", "Response B"]))).collect());
    let s3 = calls(&e2);
    all.extend(e2);
    assert_eq!(s3.len(), 1);
    (all, s3[0].clone())
}

#[test]
fn a_failing_chairman_is_replaced_by_its_backup_and_the_result_says_so() {
    let mut c = council_with_backup(&["m1", "m2"], "backup");
    let (mut all, chair) = up_to_stage3(&mut c, &[]);
    assert_eq!((chair.key.as_str(), chair.model.as_str()), ("stage3", "chair"));
    let e = c.on_reply(err(&chair));
    assert!(testkit::failed(&e).is_none(), "not a failure while the backup can answer");
    let retry = calls(&e);
    assert_eq!(retry.len(), 1);
    assert_eq!((retry[0].key.as_str(), retry[0].model.as_str()), ("stage3:backup", "backup"));
    assert_eq!(retry[0].messages, chair.messages, "the same prompt");
    assert_eq!((retry[0].stage.as_str(), retry[0].role.as_str()), ("stage3", "chairman"));
    let start = emitted(&e, "fallback_start").unwrap();
    assert_eq!(start["fallbackFrom"], "chair");
    assert_eq!(start["model"], "backup");
    assert_eq!(start["error"]["status"], 503);
    all.extend(e);
    let done = c.on_reply(ok(&retry[0], "the backup's synthesis"));
    assert!(done.contains(&Effect::Finish { answer: "the backup's synthesis".into() }));
    all.extend(done);
    let live = emitted(&all, "stage3_complete").unwrap();
    assert_eq!(live["data"]["model"], "backup");
    assert_eq!(live["data"]["fallbackFrom"], "chair");
    assert_eq!(live["partial"], true);
    assert_eq!(
        live["failedModels"],
        json!([{ "model": "chair", "role": "chairman", "stage": "stage3", "fallbackTo": "backup",
                 "error": { "kind": "http", "status": 503, "message": "down" } }])
    );
    let stored = rows(&all);
    let s3 = stored.iter().find(|r| r.stage_type == "stage3").unwrap();
    assert_eq!(s3.model.as_deref(), Some("backup"));
    assert_eq!(s3.parsed_data, Some(json!({ "fallbackFrom": "chair" })));
    let failed: Vec<_> = stored.iter().filter(|r| r.stage_type == "call_failed").collect();
    assert_eq!(failed.len(), 1);
    assert_eq!((failed[0].stage_order, failed[0].model.as_deref()), (3, Some("chair")));
    let result = load_result(&stored);
    assert_eq!(result["stage3"], live["data"]);
    assert_eq!(result["partial"], live["partial"]);
    assert_eq!(result["failedModels"], live["failedModels"]);
}

#[test]
fn a_failing_backup_takes_the_usual_failure_path() {
    let mut c = council_with_backup(&["m1", "m2"], "backup");
    let (mut all, chair) = up_to_stage3(&mut c, &[]);
    let e = c.on_reply(err(&chair));
    let retry = calls(&e);
    all.extend(e);
    let e = c.on_reply(err(&retry[0]));
    let message = testkit::failed(&e).unwrap();
    assert!(message.contains("chair") && message.contains("backup"), "{message}");
    assert!(calls(&e).is_empty(), "one backup only");
    all.extend(e);
    let result = load_result(&rows(&all));
    assert!(result["stage3"].is_null());
    assert_eq!(result["partial"], true);
    let failed = result["failedModels"].as_array().unwrap();
    assert_eq!(failed.len(), 2);
    assert_eq!(
        (&failed[0]["model"], &failed[0]["fallbackTo"]),
        (&json!("chair"), &json!("backup"))
    );
    assert_eq!(failed[1]["model"], "backup");
    assert!(failed[1].get("fallbackTo").is_none());
}

#[test]
fn without_a_backup_a_failing_chairman_fails_as_before() {
    let mut c = council(&["m1", "m2"], vec![], false);
    let s1 = calls(&c.start());
    let s2 = calls(&feed(&mut c, s1.iter().map(|s| ok(s, "a")).collect()));
    let s3 = calls(&feed(&mut c, s2.iter().map(|s| ok(s, "x")).collect()));
    let e = c.on_reply(err(&s3[0]));
    assert_eq!(testkit::failed(&e).as_deref(), Some("The chairman (chair) failed: down"));
    assert!(emitted(&e, "fallback_start").is_none());
}

#[test]
fn a_failed_member_marks_the_run_partial_live_and_from_rows() {
    let mut c = council(&["m1", "m2", "m3"], vec![], false);
    let mut all = c.start();
    let s1 = calls(&all);
    let e1 = feed(&mut c, vec![ok(&s1[0], "a"), err(&s1[1]), ok(&s1[2], "c")]);
    let s2 = calls(&e1);
    all.extend(e1);
    // The same member fails again at ranking: two entries, one per failed call.
    let e2 =
        feed(&mut c, vec![ok(&s2[0], &ranking(&["Response A"])), err(&s2[1]), ok(&s2[2], "x")]);
    let s3 = calls(&e2);
    all.extend(e2);
    all.extend(c.on_reply(ok(&s3[0], "syn")));
    let live = emitted(&all, "stage3_complete").unwrap();
    assert_eq!(live["partial"], true);
    let failed = live["failedModels"].as_array().unwrap();
    assert_eq!(failed.len(), 2);
    assert_eq!((&failed[0]["model"], &failed[0]["stage"]), (&json!("m2"), &json!("stage1")));
    assert_eq!((&failed[1]["role"], &failed[1]["stage"]), (&json!("council"), &json!("stage2")));
    let result = load_result(&rows(&all));
    assert_eq!(result["failedModels"], live["failedModels"]);
    assert_eq!(result["partial"], true);
    assert_eq!(result["stage3"], live["data"]);
}

#[test]
fn the_backup_chairman_comes_from_the_server_configuration() {
    let mut d = offline_defaults();
    let plain = validate(&json!({ "question": "q" }), &d).unwrap();
    assert!(plain.config.get("chairmanFallbackModel").is_none());
    d.fallback.chairman = Some("sim/beta".into());
    let v = validate(&json!({ "question": "q" }), &d).unwrap();
    assert_eq!(v.config["chairmanFallbackModel"], "sim/beta");
    // A request cannot choose it (the field is refused by name), and a backup equal to the
    // chairman is no backup.
    let body =
        json!({ "question": "q", "chairmanModel": "sim/beta", "chairmanFallbackModel": "x" });
    assert_eq!(validate(&body, &d).unwrap_err().field, "chairmanFallbackModel");
    let body = json!({ "question": "q", "chairmanModel": "sim/beta" });
    assert!(validate(&body, &d).unwrap().config.get("chairmanFallbackModel").is_none());
}

#[test]
fn validation_follows_the_schema() {
    let d = offline_defaults();
    let v = validate(&json!({ "question": " Why? " }), &d).unwrap();
    assert_eq!(v.question, "Why?");
    assert_eq!(v.config["councilModels"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
    assert_eq!(v.models, vec!["sim/alpha", "sim/beta", "sim/gamma"]);
    let online = Defaults { offline: false, ..offline_defaults() };
    assert_eq!(
        validate(&json!({ "question": "q" }), &online).unwrap().config["chairmanModel"],
        "anthropic/claude-opus-4-6"
    );
    let field = |body: Value| validate(&body, &d).unwrap_err().field;
    assert_eq!(field(json!({ "question": "" })), "question");
    assert_eq!(field(json!({ "question": "q", "councilModels": ["a"] })), "councilModels");
    assert_eq!(field(json!({ "question": "q", "councilModels": ["a", ""] })), "councilModels");
    assert_eq!(
        field(json!({ "question": "q", "councilModels": ["1","2","3","4","5","6","7"] })),
        "councilModels"
    );
    assert_eq!(field(json!({ "question": "q", "chairmanModel": 3 })), "chairmanModel");
    assert_eq!(field(json!({ "question": "q", "timeoutMs": 5 })), "timeoutMs");
    assert_eq!(field(json!({ "question": "q", "conversationId": "" })), "conversationId");
}

// ---- structured replies ---------------------------------------------------------------

/// A council whose members `json` are asked for JSON (their routes take structured output).
fn structured_council(models: &[&str], json: &[&str]) -> Council {
    let config = json!({ "councilModels": models, "chairmanModel": "chair", "timeoutMs": 120000 });
    let mut ctx = ctx(vec![], false);
    ctx.structured = crate::modes::Structured::models(json);
    Council::new(&config, ctx).expect("a configuration that fits")
}

#[test]
fn members_that_take_json_are_asked_for_the_ranking_schema_and_the_others_for_text() {
    let mut c = structured_council(&["m1", "m2", "m3"], &["m1", "m3"]);
    let s1 = calls(&c.start());
    assert!(s1.iter().all(|s| s.schema.is_none()), "answers are text a person reads");
    let s2 = calls(&feed(&mut c, s1.iter().map(|s| ok(s, &format!("answer {}", s.key))).collect()));
    assert!(s2.iter().all(|s| s.schema.is_some()), "every ranking is read by the schema");
    let schema = s2[0].schema.clone().unwrap();
    assert_eq!(schema.name, "council_ranking");
    let ranking = &schema.schema["properties"]["ranking"];
    assert_eq!(ranking["items"]["enum"], json!(["Response A", "Response B", "Response C"]));
    assert_eq!((ranking["minItems"].as_u64(), ranking["maxItems"].as_u64()), (Some(3), Some(3)));
    let keys: Vec<&String> = schema.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "ranking"], "the reasoning comes first");
    // The JSON prompt keeps the instructions and swaps the format; the text one is the seed's.
    let (json_prompt, text_prompt) = (&s2[0].messages[0].content, &s2[1].messages[0].content);
    assert!(json_prompt.contains("3. Provide your ranking from best to worst."));
    assert!(
        json_prompt.contains("Reply with a single JSON object")
            && !json_prompt.contains("FINAL RANKING")
    );
    assert!(text_prompt.contains("FINAL RANKING:") && !text_prompt.contains("JSON"));
    // The quoted answers are named, for fitting into a small context.
    assert_eq!(s2[0].material.len(), 3);
    assert!(s2[0].material.iter().all(|m| json_prompt.contains(&*m.text)));
}

#[test]
fn rankings_are_read_from_json_when_it_fits_else_from_text_and_say_which() {
    let mut c = structured_council(&["m1", "m2", "m3", "m4"], &["m1", "m2", "m3", "m4"]);
    let s1 = calls(&c.start());
    let s2 = calls(&feed(&mut c, s1.iter().map(|s| ok(s, "an answer")).collect()));
    let replies = vec![
        // JSON that fits.
        ok(
            &s2[0],
            r#"{"reasoning": "B explains", "ranking": ["Response B", "Response A", "Response D", "Response C"]}"#,
        ),
        // JSON naming a label outside the run: refused, and its text states nothing else.
        ok(
            &s2[1],
            r#"{"reasoning": "", "ranking": ["Response B", "Response A", "Response E", "Response C"]}"#,
        ),
        // A duplicate: refused as in text.
        ok(
            &s2[2],
            r#"{"reasoning": "", "ranking": ["Response B", "Response B", "Response D", "Response C"]}"#,
        ),
        // A model that ignored the schema and wrote the text format.
        ok(&s2[3], &ranking(&["Response C", "Response D", "Response A", "Response B"])),
    ];
    let e2 = feed(&mut c, replies);
    let data = emitted(&e2, "stage2_complete").unwrap()["data"].clone();
    assert_eq!(
        data[0]["parsedRanking"],
        json!(["Response B", "Response A", "Response D", "Response C"])
    );
    assert_eq!(data[0]["readFrom"], "json");
    // As in text, the foreign label is dropped: what is left is a partial ranking.
    assert_eq!(data[1]["parsedRanking"], json!(["Response B", "Response A", "Response C"]));
    assert_eq!((&data[1]["partial"], &data[1]["readFrom"]), (&json!(true), &json!("text")));
    // As in text, a label ranked twice is no ranking.
    assert_eq!(data[2]["parsedRanking"], json!([]), "{}", data[2]);
    assert!(data[2].get("readFrom").is_none());
    assert_eq!(data[2]["unparsed"], "inconsistent");
    assert_eq!(data[3]["readFrom"], "text");
    assert_eq!(emitted(&e2, "stage2_complete").unwrap()["metadata"]["rankingsCounted"], 3);
    // Stored rows say it too, and the result rebuilt from them matches what went out.
    let stored = rows(&e2);
    let r0 = stored.iter().find(|r| r.stage_type == "stage2").unwrap();
    assert_eq!(r0.parsed_data.as_ref().unwrap()["readFrom"], "json");
    // The chairman reads the JSON rankings as fields, not as raw JSON.
    let s3 = calls(&e2);
    let synthesis = &s3[0].messages.last().unwrap().content;
    assert!(synthesis.contains("Reasoning: B explains\nRanking:\n1. Response B"), "{synthesis}");
}

/// Issue 28 point 4: a tie stated in text is stored as a tie (a place holding both labels)
/// and counted as one (A = C > B gives A and C 1.5 each, B 3), never as a strict order.
#[test]
fn a_stated_tie_is_stored_as_a_tie_and_shares_its_places() {
    let l = labels(3);
    let schema = ranking::ranking_schema("council_ranking", &l);
    let map: BTreeMap<String, String> =
        l.iter().enumerate().map(|(i, x)| (x.clone(), format!("m{i}"))).collect();
    for text in [
        "My ranking is: A = C > B",
        "FINAL RANKING:\n1. Response A (tie)\n2. Response C (tie)\n3. Response B",
        "| Rank | Response |\n|---|---|\n| 1 | Response C |\n| 1 | Response A |\n| 3 | Response B |",
    ] {
        let r = stage2_response("m".into(), text.into(), &l, &schema, 1);
        let stored = to_json(&Stage2Row::of(&r));
        let places = stored["places"].as_array().unwrap();
        assert_eq!(places.len(), 2, "{text}: {stored}");
        assert_eq!(places[0].as_array().unwrap().len(), 2, "{text}: {stored}");
        assert_eq!(places[1], json!(["Response B"]), "{text}");
        assert_eq!(stored["partial"], json!(false));
        let agg = aggregate_rankings(&[r], &map);
        let rank = |x: &str| agg.iter().find(|a| a.label == x).unwrap().average_rank;
        assert_eq!((rank("Response A"), rank("Response C"), rank("Response B")), (1.5, 1.5, 3.0));
    }
}

/// What no report may show: raw values, JSON, stored keys, headings.
fn assert_reads_well(md: &str) {
    assert_report_free_of(md, &["parsedRanking", "labelToModel", "averageRank"]);
}

#[test]
fn the_report_gives_the_aggregate_ranking_and_each_members_ranking() {
    let mut c = council(&["m1", "m2", "m3"], vec![], false);
    let mut all = c.start();
    let s1 = calls(&all);
    let e1 = feed(&mut c, s1.iter().map(|s| ok(s, &format!("answer {}", s.key))).collect());
    let s2 = calls(&e1);
    all.extend(e1);
    let e2 = feed(
        &mut c,
        vec![
            ok(&s2[0], &ranking(&["Response B", "Response A", "Response C"])),
            ok(&s2[1], &ranking(&["Response B", "Response C", "Response A"])),
            ok(&s2[2], "They are all fine."),
        ],
    );
    let s3 = calls(&e2);
    all.extend(e2);
    all.extend(feed(&mut c, vec![ok(&s3[0], "the synthesis")]));
    let result = load_result(&rows(&all));
    let md = report(&result);
    assert!(md.contains("|---"), "{md}");
    let b = result["stage2Metadata"]["labelToModel"]["Response B"].as_str().unwrap();
    assert_contains_all(
        &md,
        &[
            &format!("| 1 | Response B | {b} | 1 |"),
            "over 2 rankings",
            &format!("- m1: Response B ({b}), then Response A"),
            "- m3: no ranking could be read; it gave no readable answer",
            "written by the chairman, chair",
        ],
    );
    assert_reads_well(&md);
    // A run that stopped early, or nothing at all: no panic, nothing made up.
    for partial in [json!({}), json!({ "stage2": [], "stage2Metadata": null, "stage3": null })] {
        let md = report(&partial);
        assert!(md.is_empty(), "{md}");
    }
}
