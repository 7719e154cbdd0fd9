//! Tournament driven with fake replies: the bracket for 2-8 seeds, presentation order and coin
//! flips, judge failures, re-asks, the stored result; the verdict parser on recorded-style and
//! adversarial replies.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted, ctx, emitted, events, failed, finished, first_asked, offline_defaults, ok,
    quotes_its_material, rows, schema_name, sim_ask, stage_calls, validate_config,
};
use crate::modes::validate;
use crate::modes::Mode;

fn tournament(n: usize) -> Tournament {
    let models: Vec<String> = (1..=n).map(|i| format!("m{i}")).collect();
    let cfg = json!({ "contestantModels": models, "judgeModel": "judge", "timeoutMs": 120000 });
    Tournament::new(&cfg, ctx("Best way to learn Rust?", vec![], true)).unwrap()
}

/// Drives a run: `answer(call)` gives each reply (None: the call fails). Answers are
/// `answer from mK`, so a judge can tell which contestant is shown where.
fn drive(m: &mut Tournament, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    let start = m.start();
    let first = stage_calls(&start);
    crate::modes::testkit::drive_from(m, start, first, first_asked, answer, "Learning Rust")
}

fn contestant_answer(c: &CallSpec) -> String {
    format!("answer from {}", c.model)
}

/// Drives a run whose contestants answer `answer from mK` and whose judges answer `judge`.
fn drive_judged(t: &mut Tournament, judge: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    drive(t, |c| if c.role == "judge" { judge(c) } else { Some(contestant_answer(c)) })
}

/// A judge that always picks the lower model number (m1 beats m2…).
fn fair_judge(c: &CallSpec) -> Option<String> {
    if c.role != "judge" {
        return Some(contestant_answer(c));
    }
    let p = &c.messages[0].content;
    let num = |label: &str| -> usize {
        let s = p.split(&format!("=== {label} ===\nanswer from m")).nth(1).unwrap();
        s.split('\n').next().unwrap().parse().unwrap()
    };
    let side = if num("Response A") < num("Response B") { "A" } else { "B" };
    Some(format!("A is thorough.\n\nREASONING: better.\nWINNER: Response {side}"))
}

#[test]
fn the_bracket_for_every_field_size() {
    assert_eq!(total_rounds(2), 1);
    assert_eq!(total_rounds(5), 3);
    assert_eq!(total_rounds(8), 3);
    let r = first_round(5);
    let played: Vec<_> = r.iter().filter(|p| p.seed_b.is_some()).collect();
    let byes: Vec<usize> = r.iter().filter(|p| p.seed_b.is_none()).map(|p| p.seed_a).collect();
    assert_eq!(played.len(), 1);
    assert_eq!((played[0].seed_a, played[0].seed_b), (1, Some(2)));
    assert_eq!(byes, vec![3, 4, 5]);
    let r6 = first_round(6);
    assert_eq!(
        r6.iter().filter(|p| p.seed_b.is_none()).map(|p| p.seed_a).collect::<Vec<_>>(),
        vec![5, 6]
    );
    assert_eq!(first_round(4).iter().filter(|p| p.seed_b.is_none()).count(), 0);
    // Round 2 of 5: the winner of 1v2, then byes 3, 4, 5.
    let r2 = next_round(&[1, 3, 4, 5]);
    assert_eq!(
        r2.iter().map(|p| (p.seed_a, p.seed_b)).collect::<Vec<_>>(),
        vec![(1, Some(3)), (4, Some(5))]
    );
}

#[test]
fn a_full_run_of_five_follows_the_bracket_and_the_best_seed_wins() {
    let mut t = tournament(5);
    let all = drive(&mut t, fair_judge);
    assert_eq!(finished(&all).as_deref(), Some("answer from m1"));
    let ev = events(&all);
    let pos = |e: &str| ev.iter().position(|x| x == e).unwrap();
    assert!(pos("tournament_start") < pos("collect_start"));
    assert!(pos("collect_complete") < pos("bracket_seeded"));
    assert!(pos("bracket_seeded") < pos("round_start"));
    assert!(pos("winner_declared") < pos("title_complete"));
    let seeded = emitted(&all, "bracket_seeded").unwrap();
    assert_eq!(seeded["data"]["totalRounds"], 3);
    assert_eq!(seeded["data"]["byes"], json!([3, 4, 5]));
    assert_eq!(all_emitted(&all, "matchup_complete").len(), 4);
    assert_eq!(all_emitted(&all, "round_complete").len(), 3);
    let w = emitted(&all, "winner_declared").unwrap();
    assert_eq!(w["data"]["seed"], 1);
    assert_eq!(w["data"]["matchesWon"], 3);
    assert_eq!(w["partial"], false);
    // Seed 3 had a bye: its path would start with it; the champion's starts with a win.
    assert_eq!(w["data"]["bracketPath"][0]["result"], "won");
    assert_eq!(w["data"]["bracketPath"][0]["opponentSeed"], 2);
    let r = rows(&all);
    assert!(r.iter().any(|r| r.stage_type == "round_1_match_2"
        && r.parsed_data.as_ref().unwrap()["isBye"] == true
        && r.model.is_none()));
    assert_reloads(&all);
}

/// The stored rows give back the result that went out live.
fn assert_reloads(all: &[Effect]) {
    let r = load_result(&rows(all));
    let live: Vec<Value> = all_emitted(all, "matchup_complete");
    let stored: Vec<&Value> = r["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["matches"].as_array().unwrap())
        .collect();
    assert_eq!(live.len(), stored.len());
    for l in &live {
        let s = stored
            .iter()
            .find(|s| s["round"] == l["round"] && s["matchIndex"] == l["matchIndex"])
            .unwrap();
        for (k, v) in l["data"].as_object().unwrap() {
            assert_eq!(&s[k], v, "{k}");
        }
    }
    if let Some(b) = emitted(all, "bracket_seeded") {
        assert_eq!(r["bracket"], b["data"]);
    }
    if let Some(c) = emitted(all, "collect_complete") {
        assert_eq!(r["contestants"], c["data"]);
    }
    if let Some(w) = emitted(all, "winner_declared") {
        assert_eq!(r["champion"], w["data"]);
        assert_eq!(r["partial"], w["partial"]);
        assert_eq!(r["failedModels"], w["failedModels"]);
    }
}

#[test]
fn presentation_order_and_coin_flips_vary_by_match() {
    let seed = seed_from("run-1");
    let draws: Vec<(bool, bool)> =
        (1..=3).flat_map(|r| (1..=4).map(move |m| match_draws(seed, r, m))).collect();
    assert!(draws.iter().any(|d| d.0) && draws.iter().any(|d| !d.0));
    assert!(draws.iter().any(|d| d.1) && draws.iter().any(|d| !d.1));
    assert_eq!(match_draws(seed, 2, 1), match_draws(seed, 2, 1));
}

fn seed_from(id: &str) -> u64 {
    crate::modes::common::seed_from_run_id(id)
}

#[test]
fn an_unreadable_judge_is_asked_again_then_a_coin_flip_decides() {
    let mut t = tournament(4);
    let all = drive_judged(&mut t, |c| {
        if c.key.ends_with(":retry") && c.key.starts_with("r1m1") {
            return Some("REASONING: clearer.\nWINNER: Response B".into());
        }
        Some("Both are good in different ways.".into())
    });
    let m = all_emitted(&all, "matchup_complete");
    let first = m.iter().find(|m| m["round"] == 1 && m["matchIndex"] == 1).unwrap();
    assert_eq!(first["data"]["decidedBy"], "judge_retry");
    assert_eq!(first["data"]["winnerSeed"], first["data"]["shownAsB"]);
    let second = m.iter().find(|m| m["round"] == 1 && m["matchIndex"] == 2).unwrap();
    assert_eq!(second["data"]["decidedBy"], "coin_flip");
    let (better_first, better_wins) = match_draws(seed_from("run-1"), 1, 2);
    let _ = better_first;
    assert_eq!(second["data"]["winnerSeed"], if better_wins { 3 } else { 4 });
    let row = rows(&all).into_iter().find(|r| r.stage_type == "round_1_match_1").unwrap();
    assert_eq!(row.parsed_data.unwrap()["firstReply"], "Both are good in different ways.");
    assert!(finished(&all).is_some());
    assert_reloads(&all);
}

#[test]
fn a_failed_judge_call_advances_the_better_seed_and_a_dead_judge_fails_the_run() {
    // Only round 1 match 2's call fails: seed 3 advances by default.
    let mut t = tournament(4);
    let all = drive(&mut t, |c| if c.key == "r1m2" { None } else { fair_judge(c) });
    let m = all_emitted(&all, "matchup_complete");
    let d = m.iter().find(|m| m["round"] == 1 && m["matchIndex"] == 2).unwrap();
    assert_eq!(d["data"]["decidedBy"], "default_seed");
    assert_eq!(d["data"]["winnerSeed"], 3);
    let w = emitted(&all, "winner_declared").unwrap();
    assert_eq!(w["partial"], true);
    assert_eq!(w["failedModels"][0]["model"], "judge");
    assert!(rows(&all).iter().any(|r| r.stage_type == "call_failed"));
    assert_reloads(&all);

    // Every judge call fails: the run fails after round 1, its matches kept.
    let mut t = tournament(4);
    let all = drive(&mut t, |c| if c.role == "judge" { None } else { fair_judge(c) });
    assert!(failed(&all).unwrap().contains("failed every match"));
    assert_eq!(rows(&all).iter().filter(|r| r.stage_type.starts_with("round_1_match_")).count(), 2);
    assert!(finished(&all).is_none());
}

#[test]
fn failed_contestants_are_not_seeded_and_fewer_than_two_answers_fail() {
    let mut t = tournament(5);
    let all =
        drive(&mut t, |c| if c.model == "m2" || c.model == "m4" { None } else { fair_judge(c) });
    let seeded = emitted(&all, "bracket_seeded").unwrap();
    assert_eq!(
        seeded["data"]["contestants"],
        json!([{ "seed": 1, "model": "m1" }, { "seed": 2, "model": "m3" }, { "seed": 3, "model": "m5" }])
    );
    assert_eq!(seeded["data"]["byes"], json!([3]));
    assert_eq!(finished(&all).as_deref(), Some("answer from m1"));
    assert_reloads(&all);

    // An empty reply counts as a failure.
    let mut t = tournament(4);
    let all = drive(&mut t, |c| {
        if c.model == "m1" {
            Some("  <think>x</think> ".into())
        } else if c.role == "judge" {
            fair_judge(c)
        } else {
            None
        }
    });
    assert!(failed(&all).unwrap().contains("Only 0 of 4"));

    // Exactly two answers: one final.
    let mut t = tournament(4);
    let all =
        drive(&mut t, |c| if c.model == "m3" || c.model == "m4" { None } else { fair_judge(c) });
    assert_eq!(emitted(&all, "bracket_seeded").unwrap()["data"]["totalRounds"], 1);
    assert_eq!(all_emitted(&all, "matchup_complete").len(), 1);
    assert!(finished(&all).is_some());
}

#[test]
fn a_model_listed_twice_is_two_seeds() {
    let cfg =
        json!({ "contestantModels": ["x", "x", "y", "z"], "judgeModel": "j", "timeoutMs": 60000 });
    let mut t = Tournament::new(&cfg, ctx("q", vec![], false)).unwrap();
    let all = drive(&mut t, |c| {
        if c.role == "judge" {
            Some("WINNER: Response A".into())
        } else {
            Some(format!("{} says hi", c.key))
        }
    });
    let seeded = emitted(&all, "bracket_seeded").unwrap();
    assert_eq!(seeded["data"]["contestants"][1], json!({ "seed": 2, "model": "x" }));
    assert!(finished(&all).is_some());
    assert_reloads(&all);
}

#[test]
fn a_cancelled_run_keeps_its_finished_matches() {
    let mut t = tournament(4);
    let mut all = t.start();
    let collect = stage_calls(&all);
    for c in &collect {
        all.extend(t.on_reply(ok(c, &contestant_answer(c))));
    }
    let judges: Vec<CallSpec> =
        stage_calls(&all).into_iter().filter(|c| c.role == "judge").collect();
    assert_eq!(judges.len(), 2);
    all.extend(t.on_reply(ok(&judges[0], "WINNER: A")));
    let r = load_result(&rows(&all));
    assert_eq!(r["rounds"][0]["matches"].as_array().unwrap().len(), 1);
    assert_eq!(r["champion"], Value::Null);
    assert_eq!(r["contestants"].as_array().unwrap().len(), 4);
}

#[test]
fn validation_names_each_field() {
    let d = offline_defaults();
    let v = |cfg: Value| validate_config("tournament", cfg);
    let ok = v(json!({})).unwrap();
    assert_eq!(
        ok.config["contestantModels"],
        json!(["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"])
    );
    assert_eq!(ok.config["judgeModel"], "sim/delta");
    let field = |cfg: Value| v(cfg).unwrap_err().field;
    assert_eq!(
        field(json!({ "contestantModels": ["a", "b", "c"] })),
        "modeConfig.contestantModels"
    );
    assert_eq!(
        field(json!({ "contestantModels": ["a", "b", "c", "d", "e", "f", "g", "h", "i"] })),
        "modeConfig.contestantModels"
    );
    assert_eq!(
        field(json!({ "contestantModels": ["a", "b", " ", "d"] })),
        "modeConfig.contestantModels"
    );
    assert_eq!(
        field(json!({ "contestantModels": ["a", "b", "c", "d"], "judgeModel": "c" })),
        "modeConfig.judgeModel"
    );
    assert_eq!(field(json!({ "judgeModel": "sim/alpha" })), "modeConfig.judgeModel");
    assert_eq!(field(json!({ "judgeModel": "" })), "modeConfig.judgeModel");
    assert_eq!(field(json!({ "timeoutMs": 9999 })), "modeConfig.timeoutMs");
    assert_eq!(field(json!({ "timeoutMs": 300001 })), "modeConfig.timeoutMs");
    assert_eq!(field(json!({ "rounds": 2 })), "modeConfig.rounds");
    let q = validate(&json!({ "mode": "tournament", "question": " " }), &d).unwrap_err();
    assert_eq!(q.field, "question");
}

// ---- the verdict parser --------------------------------------------------------------------

fn winner(text: &str) -> Option<Side> {
    parse_verdict(text).winner
}

#[test]
fn verdicts_as_real_judges_write_them() {
    assert_eq!(winner("Both fine.\n\nREASONING: B is concise.\nWINNER: Response B"), Some(Side::B));
    assert_eq!(winner("**WINNER:** Response A"), Some(Side::A));
    assert_eq!(winner("**Winner**: **Response B**."), Some(Side::B));
    assert_eq!(winner("- winner: a"), Some(Side::A));
    assert_eq!(winner("### WINNER: B!"), Some(Side::B));
    assert_eq!(
        winner("<think>WINNER: Response A</think>\nREASONING: x\nWINNER: Response B"),
        Some(Side::B)
    );
    // The last WINNER line counts (a template quoted first).
    assert_eq!(
        winner("Format: WINNER: Response A\nI read both.\nWINNER: Response B"),
        Some(Side::B)
    );
    // Closing paragraph, no WINNER line.
    assert_eq!(winner("A is long.\n\nOverall, Response A is stronger."), Some(Side::A));
    assert_eq!(winner("Both help.\n\nI prefer Response B: it gives an example."), Some(Side::B));
    assert_eq!(winner("Both help.\n\nResponse A is the clear winner here."), Some(Side::A));
    assert_eq!(winner("Both help.\n\n**Response B** wins on clarity."), Some(Side::B));
    let v = parse_verdict(
        "Intro text.\nREASONING: A covers edge cases\nand is correct.\nWINNER: Response A",
    );
    assert_eq!(v.reasoning, "A covers edge cases\nand is correct.");
    let v = parse_verdict("A covers more.\nWINNER: A");
    assert_eq!(v.reasoning, "A covers more.");
}

#[test]
fn unreadable_verdicts_are_never_guessed() {
    for text in [
        "",
        "WINNER: Response A|B",
        "WINNER: Response A or Response B",
        "WINNER: tie",
        "WINNER: Response A (narrowly), though B is close",
        "WINNER: both",
        "WINNER:",
        "Response A is better than Response B.",
        "I would not pick Response A.",
        "Neither: Response B is also weak.",
        "| Criterion | A | B |\n|---|---|---|\n| Winner | x | |",
        "I cannot decide.",
        "Response A.\nWINNER: unclear",
        "<think>WINNER: Response A</think>",
        // Naming one side last is not choosing it (a small model's reply, cut off at its cap).
        "Response A is more important because it avoids code that is too complex.\n\n\
         Response B is a good way to present good design because it demonstrates how good \
         design can be implemented. When you write a code that is both maintainable and",
        "The first one lists steps.\n\nResponse B explains the idea with an example.",
        "Both are fine.\n\nResponse B describes the best practices for clean code.",
        "Both are fine.\n\nResponse A is good, but the other one is better.",
    ] {
        assert_eq!(winner(text), None, "{text:?}");
    }
}

proptest! {
    /// Any reply whose last WINNER line states one side is read as that side, whatever came
    /// before it.
    #[test]
    fn a_stated_last_verdict_wins(prefix in "[a-zA-Z .,\n]{0,200}", b in any::<bool>()) {
        let side = if b { "B" } else { "A" };
        let text = format!("{prefix}\nREASONING: r\nWINNER: Response {side}");
        prop_assert_eq!(winner(&text), Some(if b { Side::B } else { Side::A }));
    }

    /// A reply naming both sides in its last paragraph without a WINNER line is unreadable.
    #[test]
    fn both_sides_named_is_unreadable(prefix in "[a-z .,\n]{0,100}", mid in "[a-z ,]{0,40}") {
        let text = format!("{prefix}\n\nResponse A {mid} Response B");
        prop_assert_eq!(winner(&text), None);
    }

    /// The parser never panics and only ever returns a side the reply names.
    #[test]
    fn parse_never_panics(text in "\\PC{0,300}") {
        let v = parse_verdict(&text);
        if v.winner.is_some() {
            let lower = text.to_lowercase();
            prop_assert!(lower.contains('a') || lower.contains('b'));
        }
    }

    /// Every field of 2-8 seeds gives each seed at most one bye, power-of-two later rounds and
    /// exactly one champion.
    #[test]
    fn brackets_are_well_formed(n in 2usize..=8) {
        let first = first_round(n);
        let mut seen: Vec<usize> = first.iter().flat_map(|p| [Some(p.seed_a), p.seed_b]).flatten().collect();
        seen.sort();
        prop_assert_eq!(seen, (1..=n).collect::<Vec<_>>());
        let mut field: Vec<usize> = first.iter().filter(|p| p.seed_b.is_some()).map(|p| p.seed_a).collect();
        field.extend(first.iter().filter(|p| p.seed_b.is_none()).map(|p| p.seed_a));
        let mut rounds = 1;
        while field.len() > 1 {
            prop_assert!(field.len().is_power_of_two());
            field = next_round(&field).iter().map(|p| p.seed_a).collect();
            rounds += 1;
        }
        prop_assert_eq!(rounds, total_rounds(n));
    }
}

#[test]
fn sim_answers_are_read_by_the_parser() {
    let prompt = judge_prompt("q", "a", "b", None);
    for seed in 0..20u64 {
        let ask = sim_ask("sim/delta", &prompt, seed, true, None);
        let text = sim_answer(&ask).unwrap();
        assert!(winner(&text).is_some(), "{text}");
        let strict = strict_prompt("q", "a", "b", None);
        let ask = SimAsk { malformed: true, ..sim_ask("sim/delta", &strict, seed, false, None) };
        assert!(winner(&sim_answer(&ask).unwrap()).is_some());
    }
    let ask = sim_ask("sim/alpha", "q", 1, false, None);
    assert!(sim_answer(&ask).is_none());
}

// ---- structured replies --------------------------------------------------------------------

/// A tournament whose judge is asked for JSON (its route takes structured output).
fn structured(n: usize) -> Tournament {
    let models: Vec<String> = (1..=n).map(|i| format!("m{i}")).collect();
    let cfg = json!({ "contestantModels": models, "judgeModel": "judge", "timeoutMs": 120000 });
    let mut c = ctx("Best way to learn Rust?", vec![], true);
    c.structured = crate::modes::Structured::models(["judge"]);
    Tournament::new(&cfg, c).unwrap()
}

fn judgement(reasoning: &str, winner: &str) -> String {
    json!({ "reasoning": reasoning, "winner": winner }).to_string()
}

/// The side a fair judge picks (the lower model number), as `fair_judge` reads the prompt.
fn fair_side(c: &CallSpec) -> &'static str {
    let p = &c.messages[0].content;
    let num = |label: &str| -> usize {
        let s = p.split(&format!("=== {label} ===\nanswer from m")).nth(1).unwrap();
        s.split('\n').next().unwrap().parse().unwrap()
    };
    if num("Response A") < num("Response B") {
        "Response A"
    } else {
        "Response B"
    }
}

#[test]
fn the_judgement_schema_takes_the_two_labels_and_opens_with_the_reasoning() {
    let s = judgement_schema();
    assert_eq!(s.name, JUDGEMENT_SCHEMA);
    let keys: Vec<&String> = s.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "winner"], "the reasoning comes first");
    assert_eq!(s.schema["properties"]["winner"]["enum"], json!(["Response A", "Response B"]));
    // What the reader takes from JSON fits; a side outside the two, another spelling, a
    // missing or foreign field, an unbounded reasoning do not.
    for side in ["Response A", "Response B"] {
        assert!(s.validate(&json!({ "reasoning": "why", "winner": side })).is_ok());
    }
    let long = "x".repeat(schema::REASONING_MAX_CHARS + 1);
    for bad in [
        json!({ "reasoning": "", "winner": "Response C" }),
        json!({ "reasoning": "", "winner": "B" }),
        json!({ "reasoning": "", "winner": "response a" }),
        json!({ "reasoning": "" }),
        json!({ "winner": "Response A" }),
        json!({ "reasoning": "", "winner": "Response A", "confidence": 1 }),
        json!({ "reasoning": long, "winner": "Response A" }),
    ] {
        assert!(s.validate(&bad).is_err(), "{bad}");
    }
}

#[test]
fn a_judgement_is_read_from_json_when_it_fits_else_from_text() {
    let s = judgement_schema();
    let read = |t: &str| {
        let (v, from) = read_verdict_reply(t, &s);
        (v.winner, v.reasoning, from)
    };
    assert_eq!(
        read(&judgement(" B is concrete. ", "Response B")),
        (Some(Side::B), "B is concrete.".to_string(), Some(ReadFrom::Json))
    );
    // Fenced, after a closed reasoning block.
    let fenced =
        format!("<think>A or B?</think>```json\n{}\n```", judgement("A holds", "Response A"));
    assert_eq!(read(&fenced), (Some(Side::A), "A holds".to_string(), Some(ReadFrom::Json)));
    // A side outside the two is refused, and the text states none either: unparsed.
    assert_eq!(read(&judgement("C wins", "Response C")).0, None);
    assert_eq!(read(&judgement("C wins", "Response C")).2, None);
    // JSON that does not fit (a bare letter) with a WINNER line after it: the text reader
    // reads the line.
    let mixed = format!("{}\nWINNER: Response B", json!({ "reasoning": "", "winner": "A" }));
    assert_eq!((read(&mixed).0, read(&mixed).2), (Some(Side::B), Some(ReadFrom::Text)));
    // A model that ignored the schema and wrote the text format.
    let text = "A is fine.\n\nREASONING: A is complete.\nWINNER: Response A";
    assert_eq!(read(text), (Some(Side::A), "A is complete.".to_string(), Some(ReadFrom::Text)));
    // An unfinished JSON reply, or one only inside an unclosed reasoning block: nothing.
    for nothing in [
        r#"{"reasoning": "B is better", "winner": "Resp"#,
        "<think>{\"reasoning\": \"\", \"winner\": \"Response A\"}",
        "Both have merits.",
    ] {
        assert_eq!((read(nothing).0, read(nothing).2), (None, None), "{nothing}");
    }
}

proptest! {
    /// Whatever JSON the schema allows is read as given: the side and the reasoning.
    #[test]
    fn any_judgement_the_schema_allows_is_read_whole(seed in any::<u64>(), words in "\\PC{0,80}") {
        let s = judgement_schema();
        let mut rng = SplitMix64::new(seed);
        let v = schema::sample(&s.schema, &mut rng, &|_| words.clone());
        let (verdict, from) = read_verdict_reply(&v.to_string(), &s);
        prop_assert_eq!(from, Some(ReadFrom::Json));
        prop_assert_eq!(verdict.winner.map(Side::label), v["winner"].as_str());
        prop_assert_eq!(verdict.reasoning.as_str(), v["reasoning"].as_str().unwrap().trim());
    }
}

#[test]
fn the_json_prompts_keep_the_instructions_and_swap_the_format() {
    let s = judgement_schema();
    let (json, text) = (judge_prompt("q", "a", "b", Some(&s)), judge_prompt("q", "a", "b", None));
    for kept in [
        JUDGE_HEAD,
        "=== Response A ===\na\n=== End of Response A ===",
        "Weigh accuracy, completeness, clarity and practical value.",
        "Explain your decision in 2-3 sentences",
    ] {
        assert!(json.contains(kept) && text.contains(kept), "{kept}");
    }
    assert!(json.contains("Reply with a single JSON object") && !json.contains("WINNER:"));
    assert!(json.find("\"reasoning\"").unwrap() < json.find("\"winner\"").unwrap());
    assert!(text.ends_with(
        "then end your reply with exactly these two lines:\nREASONING: <your reasoning>\n\
         WINNER: Response A  (or: WINNER: Response B)"
    ));
    assert!(!text.contains("JSON"));
    let (json, text) = (strict_prompt("q", "a", "b", Some(&s)), strict_prompt("q", "a", "b", None));
    assert!(json.contains(STRICT_HEAD) && json.contains("=== Response B ===\nb\n"));
    assert!(json.contains("Reply with a single JSON object") && !json.contains("WINNER:"));
    assert!(text.ends_with(
        "Reply with exactly two lines and nothing else:\nREASONING: <one sentence>\n\
         WINNER: Response A or WINNER: Response B"
    ));
}

#[test]
fn every_judge_call_carries_the_schema_and_the_prompt_its_route_takes() {
    // A judge whose route takes no structured output: the text prompt, the schema still
    // named (the engine sends it only where the route takes it).
    let mut t = tournament(4);
    let all = drive(&mut t, fair_judge);
    let judges: Vec<CallSpec> =
        crate::modes::testkit::calls(&all).into_iter().filter(|c| c.role == "judge").collect();
    assert_eq!(judges.len(), 3);
    for c in &judges {
        assert_eq!(schema_name(c), Some(JUDGEMENT_SCHEMA));
        assert!(c.messages[0].content.contains("WINNER: Response A"));
        // The two answers are named, for fitting a small context.
        let names: Vec<&str> = c.material.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["Response A", "Response B"]);
        assert!(quotes_its_material(c));
    }
    let m = all_emitted(&all, "matchup_complete");
    assert!(m.iter().all(|m| m["data"]["readFrom"] == "text"), "{m:?}");
    // Contestants' answers are text a person reads.
    assert!(crate::modes::testkit::calls(&all)
        .iter()
        .filter(|c| c.role == "contestant")
        .all(|c| c.schema.is_none()));
}

#[test]
fn a_judge_that_takes_json_is_read_from_it_and_each_match_says_how() {
    let mut t = structured(4);
    let all = drive_judged(&mut t, |c| {
        assert!(c.messages[0].content.contains("Reply with a single JSON object"));
        Some(match c.key.as_str() {
            // Unreadable, then read from the text of the re-ask.
            "r1m2" => "Both are good in different ways.".into(),
            "r1m2:retry" => format!("REASONING: clearer.\nWINNER: {}", fair_side(c)),
            _ => judgement("the lower number is better", fair_side(c)),
        })
    });
    assert_eq!(finished(&all).as_deref(), Some("answer from m1"));
    let m = all_emitted(&all, "matchup_complete");
    let at = |r: u64, i: u64| m.iter().find(|m| m["round"] == r && m["matchIndex"] == i).unwrap();
    assert_eq!(at(1, 1)["data"]["readFrom"], "json");
    assert_eq!(at(1, 1)["data"]["reasoning"], "the lower number is better");
    assert_eq!(
        (&at(1, 2)["data"]["readFrom"], &at(1, 2)["data"]["decidedBy"]),
        (&json!("text"), &json!("judge_retry"))
    );
    assert_eq!(at(2, 1)["data"]["readFrom"], "json");
    // Stored with the match's row, and the result rebuilt from the rows is what went out.
    let stored = rows(&all);
    let row = stored.iter().find(|r| r.stage_type == "round_1_match_1").unwrap();
    assert_eq!(row.parsed_data.as_ref().unwrap()["readFrom"], "json");
    assert_reloads(&all);

    // A coin flip or a failed call read nothing: no readFrom.
    let mut t = structured(4);
    let all = drive(&mut t, |c| match c.key.as_str() {
        "r1m1" | "r1m1:retry" => Some(json!({ "reasoning": "", "winner": "neither" }).to_string()),
        "r1m2" => None,
        _ if c.role == "judge" => Some(judgement("", fair_side(c))),
        _ => Some(contestant_answer(c)),
    });
    let m = all_emitted(&all, "matchup_complete");
    for (i, how) in [(1, "coin_flip"), (2, "default_seed")] {
        let d = &m.iter().find(|m| m["round"] == 1 && m["matchIndex"] == i).unwrap()["data"];
        assert_eq!(d["decidedBy"], how);
        assert!(d.get("readFrom").is_none(), "{d}");
    }
    assert_reloads(&all);
}

#[test]
fn the_sim_judge_answers_its_schema_in_json_and_no_other() {
    let s = judgement_schema();
    let prompt = judge_prompt("q", "a", "b", Some(&s));
    for (seed, hostile) in (0..20u64).zip([false, true].into_iter().cycle()) {
        let ask = sim_ask("sim/delta", &prompt, seed, hostile, Some(&s));
        let reply = sim_answer(&ask).unwrap();
        let (v, from) = read_verdict_reply(&reply, &s);
        assert_eq!(from, Some(ReadFrom::Json), "{reply}");
        assert!(v.winner.is_some());
    }
    let other = ReplySchema::new("council_ranking", schema::reasoned([]));
    let ask = sim_ask("sim/delta", &prompt, 1, false, Some(&other));
    assert_eq!(sim_answer(&ask), None);
}
