//! `conclave eval` with mode arms on oracle sims: every mode an oracle answers in (Vote,
//! Debate, Confidence-Weighted, Delphi, Chain, Specialist Panel, Tournament, Peer Review,
//! Decompose) comes out graded, never unparsed: all right with oracles of 1, all wrong with
//! oracles of 0 (a wrong answer is stated, never missing).

use std::process::Output;

use serde_json::Value;

use crate::cli::conclave;

/// The mode arms oracles answer in.
const ARMS: [&str; 9] = [
    "vote",
    "debate",
    "confidence_weighted",
    "delphi",
    "chain",
    "specialist_panel",
    "tournament",
    "peer_review",
    "decompose",
];

/// An eval of the sample's first 6 questions (all numbers) through every arm, with three
/// oracle members of probability `p`.
fn eval_modes(p: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("eval.db").display());
    let [a, b, c] = ["a", "b", "c"].map(|m| format!("sim/oracle-{p}-{m}"));
    // Settings for the modes whose panel is not a list of models (Chain's steps, Specialist
    // Panel's specialists), whose single role may not sit on the panel (Delphi's
    // facilitator) or both (Tournament: four contestants, a judge apart).
    let chain = format!(
        r#"chain={{"steps": [{{"model": "{a}", "mandate": "draft"}},
            {{"model": "{b}", "mandate": "accuracy_completeness"}},
            {{"model": "{c}", "mandate": "polish_format"}}]}}"#
    );
    let panel = format!(
        r#"specialist_panel={{"specialists": [{{"roleId": "security_expert", "model": "{a}"}},
            {{"roleId": "cost_analyst", "model": "{b}"}},
            {{"roleId": "scalability_architect", "model": "{c}"}}]}}"#
    );
    let d = format!("sim/oracle-{p}-d");
    let delphi = format!(r#"delphi={{"facilitatorModel": "{d}"}}"#);
    let tournament = format!(
        r#"tournament={{"contestantModels": ["{a}", "{b}", "{c}", "{d}"],
            "judgeModel": "sim/oracle-{p}-judge"}}"#
    );
    let out: Output = conclave()
        .env("DATABASE_URL", &db)
        .env("CONCLAVE_SIM_LATENCY_MS", "0")
        .args(["eval", "sample", "--members", &format!("{a},{b},{c}"), "--arms", &ARMS.join(",")])
        .args(["--arm-config", &chain, "--arm-config", &panel, "--arm-config", &delphi])
        .args(["--arm-config", &tournament])
        .args(["--limit", "6", "--json", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}; stderr: {stderr}"))
}

/// Each arm's (correct, unparsed, n).
fn figures(v: &Value) -> Vec<(String, u64, u64, u64)> {
    ARMS.iter()
        .map(|name| {
            let arm = v["arms"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["arm"] == *name)
                .unwrap_or_else(|| panic!("no arm {name}: {v}"));
            let n = arm["n"].as_u64().unwrap();
            (
                name.to_string(),
                arm["correct"].as_u64().unwrap(),
                arm["unparsed"].as_u64().unwrap(),
                n,
            )
        })
        .collect()
}

#[test]
fn eval_modes_with_oracles_of_1_are_all_right_and_of_0_all_wrong_never_unparsed() {
    for (p, right) in [("1", true), ("0", false)] {
        let v = eval_modes(p);
        for (arm, correct, unparsed, n) in figures(&v) {
            assert_eq!(n, 6, "{arm} at {p}: {v}");
            assert_eq!(correct, if right { n } else { 0 }, "{arm} at {p}: {v}");
            assert_eq!(unparsed, 0, "{arm} at {p}: {v}");
        }
    }
}

#[test]
fn eval_modes_votes_and_matches_follow_the_answers_the_oracles_draw() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("eval.db").display());
    // One member always right, two always wrong: a vote is two to one for the wrong answer.
    // In the tournament only the first of four contestants is right, and a judge of 1 always
    // sends it on: the champion is right.
    let members = "sim/oracle-1-a,sim/oracle-0-b,sim/oracle-0-c";
    let tournament = r#"tournament={"contestantModels": ["sim/oracle-1-a", "sim/oracle-0-b",
        "sim/oracle-0-c", "sim/oracle-0-d"], "judgeModel": "sim/oracle-1-judge"}"#;
    let out = conclave()
        .env("DATABASE_URL", &db)
        .env("CONCLAVE_SIM_LATENCY_MS", "0")
        .args(["eval", "sample", "--members", members, "--arms", "vote,debate,tournament"])
        .args(["--arm-config", tournament, "--limit", "6", "--json", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let correct = |name: &str| {
        let arms = v["arms"].as_array().unwrap();
        let arm = arms.iter().find(|a| a["arm"] == name).unwrap();
        assert_eq!((arm["n"].as_u64(), arm["unparsed"].as_u64()), (Some(6), Some(0)), "{v}");
        arm["correct"].as_u64().unwrap()
    };
    assert_eq!(correct("vote"), 0, "{v}");
    assert_eq!(correct("debate"), 0, "{v}");
    assert_eq!(correct("tournament"), 6, "{v}");
}
