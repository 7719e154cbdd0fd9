//! Vote mode driven with fake replies: every row of the spec's edge cases.

use crate::modes::Fallbacks;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    ctx, emitted, err, events, failed, feed, fields, finished, offline_defaults, ok, rows,
    stage_calls,
};
use crate::modes::validate;
use crate::modes::Mode;

fn vote_mode(models: &[&str], new_conversation: bool) -> Vote {
    let config = json!({ "models": models, "chairmanModel": "chair", "timeoutMs": 120000 });
    Vote::new(&config, ctx("Which is best?", vec![], new_conversation))
        .expect("a configuration that fits")
}

/// The label each answer got, by answer text.
fn label_of(effects: &[Effect], model: &str) -> String {
    let map = emitted(effects, "vote_round_complete").map(|d| d["data"]["labelToModel"].clone());
    let map = map.or_else(|| {
        rows(effects)
            .iter()
            .find(|r| r.stage_type == "label_map")
            .and_then(|r| r.parsed_data.clone())
    });
    map.and_then(|m| {
        m.as_object()
            .and_then(|o| o.iter().find(|(_, v)| v == &&json!(model)).map(|(k, _)| k.clone()))
    })
    .unwrap_or_default()
}

/// Runs stage 1 with answers named after each model; returns the vote calls and all effects.
fn answered(v: &mut Vote) -> (Vec<CallSpec>, Vec<Effect>) {
    let mut all = v.start();
    let s1 = stage_calls(&all);
    let e = feed(v, s1.iter().map(|s| ok(s, &format!("answer of {}", s.model))).collect());
    let votes = stage_calls(&e);
    all.extend(e);
    (votes, all)
}

#[test]
fn a_plurality_winner_answers_with_its_original_response() {
    let mut v = vote_mode(&["m1", "m2", "m3"], true);
    let (votes, mut all) = answered(&mut v);
    assert_eq!(votes.len(), 3);
    assert!(votes[0].messages[0].content.starts_with("After a round of deliberation"));
    let b = label_of(&all, "m2");
    let e = feed(&mut v, votes.iter().map(|s| ok(s, &format!("Good.\nVOTE: {b}"))).collect());
    all.extend(e.clone());
    assert_eq!(finished(&e).as_deref(), Some("answer of m2"));
    let w = emitted(&e, "winner_declared").unwrap()["data"].clone();
    assert_eq!(
        fields(&w, ["winnerModel", "voteCount", "tiebroken"]),
        [json!("m2"), json!(3), json!(false)]
    );
    assert_eq!(
        events(&all),
        vec![
            "vote_start",
            "stage1_start",
            "stage1_complete",
            "vote_round_start",
            "vote_round_complete",
            "winner_declared"
        ]
    );
    // Rows rebuild the live payloads.
    let result = load_result(&rows(&all));
    assert_eq!(result["winner"], w);
    assert_eq!(result["voteRound"], emitted(&all, "vote_round_complete").unwrap()["data"]);
    assert_eq!(result["stage1"], emitted(&all, "stage1_complete").unwrap()["data"]);
    assert_eq!((&result["partial"], &result["failedModels"]), (&json!(false), &json!([])));
    let types: Vec<String> =
        rows(&all).iter().map(|r| format!("{}:{}", r.stage_type, r.stage_order)).collect();
    assert!(
        types.contains(&"label_map:0".to_string())
            && types.contains(&"vote_tally:3".to_string())
            && types.contains(&"vote_winner:5".to_string())
    );
}

#[test]
fn a_tie_goes_to_the_chairman() {
    let mut v = vote_mode(&["m1", "m2"], false);
    let (votes, all) = answered(&mut v);
    let (a, b) = (label_of(&all, "m1"), label_of(&all, "m2"));
    let e = feed(
        &mut v,
        vec![ok(&votes[0], &format!("VOTE: {a}")), ok(&votes[1], &format!("VOTE: {b}"))],
    );
    assert!(events(&e).contains(&"tiebreaker_start".to_string()));
    let tb = stage_calls(&e);
    assert_eq!((tb[0].key.as_str(), tb[0].model.as_str()), ("tiebreaker", "chair"));
    let prompt = &tb[0].messages[0].content;
    assert!(prompt.contains(&format!("--- {a} ---")) && prompt.contains(&format!("--- {b} ---")));
    let fin = v.on_reply(ok(&tb[0], &format!("The second is better.\nVOTE: {b}")));
    let w = emitted(&fin, "winner_declared").unwrap()["data"].clone();
    assert_eq!(
        fields(&w, ["winnerModel", "tiebroken", "tiebreakerMethod"]),
        [json!("m2"), json!(true), json!("chairman")]
    );
    assert!(rows(&fin).iter().any(|r| r.stage_type == "tiebreaker" && r.stage_order == 4));
}

#[test]
fn a_failing_or_unparseable_chairman_falls_back_to_the_first_label() {
    for chairman_fails in [true, false] {
        let mut v = vote_mode(&["m1", "m2", "m3"], false);
        let (votes, all) = answered(&mut v);
        let labels: Vec<String> = ["m1", "m2", "m3"].iter().map(|m| label_of(&all, m)).collect();
        let e = feed(
            &mut v,
            votes.iter().zip(&labels).map(|(s, l)| ok(s, &format!("VOTE: {l}"))).collect(),
        );
        let tb = stage_calls(&e);
        let reply = if chairman_fails { err(&tb[0]) } else { ok(&tb[0], "I refuse to choose.") };
        let fin = v.on_reply(reply);
        let w = emitted(&fin, "winner_declared").unwrap()["data"].clone();
        assert_eq!(w["winnerLabel"], "Response A");
        assert_eq!(w["tiebreakerMethod"], "alphabetical");
    }
}

// ---- backups and partial runs ---------------------------------------------------------------

fn vote_with_backup(models: &[&str], backup: &str) -> Vote {
    let config = json!({ "models": models, "chairmanModel": "chair", "timeoutMs": 120000,
                         "chairmanFallbackModel": backup });
    Vote::new(&config, ctx("Which is best?", vec![], false)).expect("a configuration that fits")
}

/// A three-way tie; returns the tiebreaker call, all effects and the labels of m1..m3.
fn tied(v: &mut Vote) -> (CallSpec, Vec<Effect>, Vec<String>) {
    let (votes, mut all) = answered(v);
    let labels: Vec<String> = ["m1", "m2", "m3"].iter().map(|m| label_of(&all, m)).collect();
    let e = feed(v, votes.iter().zip(&labels).map(|(s, l)| ok(s, &format!("VOTE: {l}"))).collect());
    let tb = stage_calls(&e);
    all.extend(e);
    (tb[0].clone(), all, labels)
}

#[test]
fn a_failing_tiebreak_goes_to_the_backup_chairman_first() {
    let mut v = vote_with_backup(&["m1", "m2", "m3"], "backup");
    let (tb, mut all, labels) = tied(&mut v);
    let e = v.on_reply(err(&tb));
    assert!(emitted(&e, "winner_declared").is_none(), "the backup decides first");
    let retry = stage_calls(&e);
    assert_eq!((retry[0].key.as_str(), retry[0].model.as_str()), ("tiebreaker:backup", "backup"));
    assert_eq!(retry[0].messages, tb.messages);
    assert_eq!(emitted(&e, "fallback_start").unwrap()["fallbackFrom"], "chair");
    all.extend(e);
    let fin = v.on_reply(ok(&retry[0], &format!("VOTE: {}", labels[2])));
    all.extend(fin.clone());
    let t = emitted(&fin, "tiebreaker_complete").unwrap()["data"].clone();
    assert_eq!((&t["model"], &t["fallbackFrom"]), (&json!("backup"), &json!("chair")));
    let declared = emitted(&fin, "winner_declared").unwrap();
    assert_eq!(declared["data"]["winnerModel"], "m3");
    assert_eq!(declared["data"]["tiebreakerMethod"], "chairman");
    assert_eq!(declared["partial"], true);
    assert_eq!(declared["failedModels"][0]["model"], "chair");
    assert_eq!(declared["failedModels"][0]["stage"], "tiebreaker");
    assert_eq!(declared["failedModels"][0]["fallbackTo"], "backup");
    let result = load_result(&rows(&all));
    assert_eq!(result["tiebreaker"]["fallbackFrom"], "chair");
    assert_eq!(result["tiebreaker"]["model"], "backup");
    assert_eq!(result["winner"], declared["data"]);
    assert_eq!(result["partial"], declared["partial"]);
    assert_eq!(result["failedModels"], declared["failedModels"]);
}

#[test]
fn a_failing_backup_keeps_the_alphabetical_rule() {
    let mut v = vote_with_backup(&["m1", "m2", "m3"], "backup");
    let (tb, mut all, _) = tied(&mut v);
    let e = v.on_reply(err(&tb));
    let retry = stage_calls(&e);
    all.extend(e);
    let fin = v.on_reply(err(&retry[0]));
    all.extend(fin.clone());
    let w = emitted(&fin, "winner_declared").unwrap();
    assert_eq!(w["data"]["winnerLabel"], "Response A");
    assert_eq!(w["data"]["tiebreakerMethod"], "alphabetical");
    assert!(emitted(&fin, "tiebreaker_complete").unwrap()["data"].get("fallbackFrom").is_none());
    assert_eq!(w["failedModels"].as_array().map(Vec::len), Some(2));
    let result = load_result(&rows(&all));
    assert!(result["tiebreaker"].is_null());
    assert_eq!(result["failedModels"], w["failedModels"]);
}

#[test]
fn a_failed_voter_marks_the_run_partial() {
    let mut v = vote_mode(&["m1", "m2", "m3"], false);
    let (votes, mut all) = answered(&mut v);
    let b = label_of(&all, "m2");
    let e = feed(
        &mut v,
        vec![
            ok(&votes[0], &format!("VOTE: {b}")),
            err(&votes[1]),
            ok(&votes[2], &format!("VOTE: {b}")),
        ],
    );
    all.extend(e);
    let declared = emitted(&all, "winner_declared").unwrap();
    assert_eq!(declared["partial"], true);
    assert_eq!(
        declared["failedModels"],
        json!([{ "model": "m2", "role": "voter", "stage": "vote",
                 "error": { "kind": "http", "status": 503, "message": "down" } }])
    );
    let stored = rows(&all);
    assert!(stored.iter().any(|r| r.stage_type == "call_failed" && r.stage_order == 2));
    let result = load_result(&stored);
    assert_eq!(
        (&result["partial"], &result["failedModels"]),
        (&declared["partial"], &declared["failedModels"])
    );
}

#[test]
fn all_votes_invalid_is_an_error_with_answers_kept() {
    let mut v = vote_mode(&["m1", "m2", "m3"], true);
    let (votes, all) = answered(&mut v);
    let e = feed(
        &mut v,
        vec![ok(&votes[0], "VOTE: Response Q"), ok(&votes[1], "no idea"), err(&votes[2])],
    );
    assert!(failed(&e).is_some_and(|m| m.contains("invalid")));
    assert_eq!(rows(&all).iter().filter(|r| r.stage_type == "initial_answer").count(), 3);
    let round = emitted(&e, "vote_round_complete").unwrap()["data"].clone();
    assert_eq!(fields(&round, ["validVoteCount", "invalidVoteCount"]), [json!(0), json!(2)]);
    assert!(
        e.iter().any(|x| matches!(x, Effect::SetTitle(_))),
        "the new conversation still gets a title"
    );
}

#[test]
fn no_vote_coming_back_is_an_error_that_says_so() {
    let mut v = vote_mode(&["m1", "m2", "m3"], true);
    let (votes, all) = answered(&mut v);
    let e = feed(&mut v, votes.iter().map(err).collect());
    assert_eq!(failed(&e).as_deref(), Some("No vote came back: every voter's call failed."));
    assert_eq!(rows(&all).iter().filter(|r| r.stage_type == "initial_answer").count(), 3);
}

#[test]
fn fewer_than_two_answers_is_an_error() {
    let mut v = vote_mode(&["m1", "m2", "m3"], false);
    let s1 = stage_calls(&v.start());
    let e = feed(&mut v, vec![ok(&s1[0], "a"), err(&s1[1]), err(&s1[2])]);
    assert!(failed(&e).is_some());
}

#[test]
fn duplicate_models_are_separate_participants() {
    let mut v = vote_mode(&["m1", "m1", "m2"], false);
    let s1 = stage_calls(&v.start());
    assert_eq!(s1.len(), 3);
    let e =
        feed(&mut v, s1.iter().enumerate().map(|(i, s)| ok(s, &format!("answer {i}"))).collect());
    assert_eq!(emitted(&e, "stage1_complete").unwrap()["data"].as_array().map(Vec::len), Some(3));
    let votes = stage_calls(&e);
    assert_eq!(votes.len(), 3);
    // Summaries tell the two members of m1 apart; the calls still go to m1.
    let names: Vec<String> = emitted(&e, "stage1_complete").unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["m1 #1", "m1 #2", "m2"]);
    assert_eq!(votes[1].model, "m1");
    let map: Vec<String> = rows(&e)
        .iter()
        .filter(|r| r.stage_type == "label_map")
        .flat_map(|r| {
            r.parsed_data
                .clone()
                .unwrap()
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(map.contains(&"m1 #2".to_string()), "{map:?}");
    let e = feed(
        &mut v,
        votes.iter().map(|s| ok(s, "I abstain; Response A and C are both good")).collect(),
    );
    let round = emitted(&e, "vote_round_complete").unwrap();
    assert_eq!(round["data"]["votes"][1]["model"], "m1 #2");
    assert_eq!(round["data"]["votes"][1]["unparsed"], "refused");
    assert_eq!(round["data"]["invalidVoteCount"], 3, "a mention is no vote");
}

#[test]
fn validation_follows_the_spec() {
    let d = offline_defaults();
    let ok = validate(&json!({ "question": "q", "mode": "vote" }), &d).unwrap();
    assert_eq!(ok.config["models"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
    let field = |b: Value| validate(&b, &d).unwrap_err().field;
    assert_eq!(
        field(json!({ "question": "q", "modeConfig": { "models": ["a", "b"] } })),
        "modeConfig.models"
    );
    assert_eq!(
        field(
            json!({ "question": "q", "modeConfig": { "models": ["1","2","3","4","5","6","7","8"] } })
        ),
        "modeConfig.models"
    );
    assert_eq!(
        field(json!({ "question": "q", "modeConfig": { "timeoutMs": 9999 } })),
        "modeConfig.timeoutMs"
    );
    assert_eq!(
        field(json!({ "question": "q", "modeConfig": { "chairmanModel": "" } })),
        "modeConfig.chairmanModel"
    );
    assert_eq!(field(json!({ "question": "q", "modeConfig": 3 })), "modeConfig");
    assert!(ok.config.get("chairmanFallbackModel").is_none());
    let backed = Defaults {
        fallback: Fallbacks { chairman: Some("sim/zeta".into()), ..Fallbacks::default() },
        ..d
    };
    let v = validate(&json!({ "question": "q", "mode": "vote" }), &backed).unwrap();
    assert_eq!(v.config["chairmanFallbackModel"], "sim/zeta");
}
