//! Rankings as real models write them: recorded from SmolLM2 and written by hand after what
//! larger models do (refusals, reasoning traces, JSON, tables, ties, partial lists, other
//! languages), each with the reading a careful person would give it.

use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::modes::common::label;

fn labels(n: usize) -> Vec<String> {
    (0..n).map(label).collect()
}

fn places(p: &[&[&str]]) -> Vec<Vec<String>> {
    p.iter().map(|place| place.iter().map(|l| format!("Response {l}")).collect()).collect()
}

/// A text, the places a careful reader finds in it, and why none, when none.
type Case = (&'static str, Vec<Vec<String>>, Option<Unparsed>);

fn hand_written() -> Vec<Case> {
    vec![
        // Refusals and hedges that mention labels.
        ("I can't rank these fairly; Response A and B are both strong and Response C is close.", vec![], Some(Unparsed::Refused)),
        ("I abstain; Response A and C are both good", vec![], Some(Unparsed::Refused)),
        ("FINAL RANKING:\nI cannot rank these; Response A and Response B say the same thing.", vec![], Some(Unparsed::Refused)),
        // A stray mention is not a ranking (what the sim never showed: `--- Response A` echoed).
        ("--- Response A", vec![], Some(Unparsed::NoAnswer)),
        ("Response A is accurate. Response B is vague. Response C is wrong.", vec![], Some(Unparsed::NoAnswer)),
        ("1. Response A: accurate and complete.\n2. Response B: vague.\n3. Response C: wrong.\n\nOverall they are all useful.", vec![], Some(Unparsed::NoAnswer)),
        // Reasoning traces.
        ("<think>Draft:\nFINAL RANKING:\n1. Response A\n2. Response B\n3. Response C\nHmm, C is better.</think>\nFINAL RANKING:\n1. Response C\n2. Response A\n3. Response B",
            places(&[&["C"], &["A"], &["B"]]), None),
        ("<think>Let me compare. FINAL RANKING:\n1. Response B\n2. Response A", vec![], Some(Unparsed::ReasoningOnly)),
        ("Okay, weighing them.\n</think>\n\nFINAL RANKING:\n1. Response B\n2. Response C\n3. Response A",
            places(&[&["B"], &["C"], &["A"]]), None),
        // Structured answers.
        ("Here is my evaluation.\n```json\n{\"final_ranking\": [\"Response B\", \"Response C\", \"Response A\"]}\n```",
            places(&[&["B"], &["C"], &["A"]]), None),
        ("{\"ranking\": [{\"label\": \"Response C\", \"rank\": 1}, {\"label\": \"Response A\", \"rank\": 2}, {\"label\": \"Response B\", \"rank\": 2}]}",
            places(&[&["C"], &["A", "B"]]), None),
        ("| Rank | Response | Why |\n|---|---|---|\n| 1 | **Response B** | complete |\n| 2 | Response A | short |\n| 3 | Response C | wrong |",
            places(&[&["B"], &["A"], &["C"]]), None),
        // Ties and partial rankings.
        ("Both A and C are excellent.\n\nResponse A = Response C > Response B", places(&[&["A", "C"], &["B"]]), None),
        ("FINAL RANKING:\n1. Response A and Response C (tie)\n2. Response B", places(&[&["A", "C"], &["B"]]), None),
        ("FINAL RANKING:\n1. Response B\n1. Response A\n3. Response C", places(&[&["B", "A"], &["C"]]), None),
        ("FINAL RANKING:\n1. Response C\n2. Response A", places(&[&["C"], &["A"]]), None),
        ("FINAL RANKING: 1. Response B 2. Response A 3. Response C", places(&[&["B"], &["A"], &["C"]]), None),
        ("FINAL RANKING:\nResponse B, then Response A, and last Response C.", places(&[&["B"], &["A"], &["C"]]), None),
        // Prose that could order them either way is not read.
        ("FINAL RANKING:\nResponse B is worse than Response A, which beats Response C.", vec![], Some(Unparsed::NoAnswer)),
        // A final section headed in another language.
        ("Évaluation faite.\n\nCLASSEMENT FINAL :\n1. Réponse C\n2. Réponse A\n3. Réponse B", places(&[&["C"], &["A"], &["B"]]), None),
        ("CLASIFICACIÓN FINAL:\n1. Respuesta B\n2. Respuesta C\n3. Respuesta A", places(&[&["B"], &["C"], &["A"]]), None),
        ("ENDGÜLTIGE RANGFOLGE:\n1. Antwort A\n2. Antwort C\n3. Antwort B", places(&[&["A"], &["C"], &["B"]]), None),
        // The prompt's list without its header, closing the reply.
        ("C is the most accurate.\n\n1. Response C\n2. Response B\n3. Response A", places(&[&["C"], &["B"], &["A"]]), None),
        // A label ranked twice is contradictory.
        ("FINAL RANKING:\n1. Response A\n2. Response B\n3. Response A", vec![], Some(Unparsed::Inconsistent)),
    ]
}

#[test]
fn hand_written_outputs_read_as_a_careful_person_would() {
    for (text, expected, why) in hand_written() {
        let read = read_ranking(text, &labels(3));
        assert_eq!(read.places, expected, "{text}");
        assert_eq!(read.unparsed, why, "{text}");
    }
}

#[test]
fn recorded_smollm2_rankings_read_as_a_careful_person_would() {
    let corpus: Vec<Value> =
        serde_json::from_str(include_str!("corpus/council_rankings_smollm2.json")).unwrap();
    assert!(corpus.len() >= 8);
    for case in corpus {
        let text = case["text"].as_str().unwrap();
        let n = case["labels"].as_u64().unwrap() as usize;
        let read = read_ranking(text, &labels(n));
        let expected: Vec<Vec<String>> =
            serde_json::from_value(case["places"].clone()).unwrap_or_default();
        assert_eq!(read.places, expected, "{}: {text}", case["note"]);
        let why = read.unparsed.map(|u| serde_json::to_value(u).unwrap());
        assert_eq!(why.unwrap_or(Value::Null), case["unparsed"], "{}", case["note"]);
    }
}

#[test]
fn partial_and_tied_rankings_are_marked() {
    let read = read_ranking("FINAL RANKING:\n1. Response C", &labels(3));
    assert!(read.partial(3));
    assert!(!read.has_ties());
    let read = read_ranking("Response A = Response C > Response B", &labels(3));
    assert!(!read.partial(3));
    assert!(read.has_ties());
}

#[test]
fn fractional_positions_share_ties_and_the_places_a_partial_ranking_leaves() {
    let l = labels(3);
    let p = positions(&places(&[&["A"]]), &l);
    assert_eq!((p["Response A"], p["Response B"], p["Response C"]), (1.0, 2.5, 2.5));
    let p = positions(&places(&[&["A", "C"], &["B"]]), &l);
    assert_eq!((p["Response A"], p["Response B"], p["Response C"]), (1.5, 3.0, 1.5));
    let p = positions(&places(&[&["B"], &["C"], &["A"]]), &l);
    assert_eq!((p["Response A"], p["Response B"], p["Response C"]), (3.0, 1.0, 2.0));
    assert!(positions(&[], &l).is_empty());
}

#[test]
fn one_partial_ranking_does_not_weigh_like_a_full_one() {
    let l = labels(3);
    // Two full rankings put B first; one ranking names only A.
    let rankings = vec![
        places(&[&["B"], &["A"], &["C"]]),
        places(&[&["B"], &["C"], &["A"]]),
        places(&[&["A"]]),
    ];
    let agg = aggregate(&rankings, &l);
    assert_eq!(agg[0].label, "Response B");
    assert_eq!(agg[0].average_rank, 1.5, "1, 1 and 2.5");
    assert_eq!(agg[0].named_count, 2);
    assert_eq!(agg[0].rankings_count, 3);
    let a = agg.iter().find(|s| s.label == "Response A").unwrap();
    assert_eq!(a.average_rank, 2.0);
    // The issue's case: the only counted ranking names A alone; A leads, but not at 1.0 for
    // all three, and the others are not left out.
    let agg = aggregate(&[places(&[&["A"]])], &l);
    assert_eq!(agg.len(), 3);
    assert_eq!((agg[0].label.as_str(), agg[0].average_rank), ("Response A", 1.0));
    assert_eq!(agg[1].average_rank, 2.5);
    assert!(aggregate(&[vec![]], &l).is_empty());
}

proptest! {
    /// No input makes the reader panic; what it returns are distinct labels of the run.
    #[test]
    fn any_text_reads_to_distinct_known_labels(text in "\\PC{0,400}", n in 1usize..7) {
        let map = labels(n);
        let read = read_ranking(&text, &map);
        let order = read.order();
        let mut seen = std::collections::HashSet::new();
        for l in &order {
            prop_assert!(map.contains(l));
            prop_assert!(seen.insert(l.clone()));
        }
        prop_assert_eq!(read.unparsed.is_some(), order.is_empty());
    }

    /// Nothing inside a closed `<think>` block changes the ranking stated after it.
    #[test]
    fn a_closed_trace_never_changes_the_ranking(
        inside in "[A-Za-z0-9 .:>=\\n]{0,200}",
        perm in Just((0..4usize).collect::<Vec<_>>()).prop_shuffle(),
        draft in Just((0..4usize).collect::<Vec<_>>()).prop_shuffle(),
    ) {
        let map = labels(4);
        let list = |p: &[usize]| p.iter().enumerate().map(|(i, x)| format!("{}. {}\n", i + 1, map[*x])).collect::<String>();
        let after = format!("FINAL RANKING:\n{}", list(&perm));
        let with_trace = format!("<think>{inside}\nFINAL RANKING:\n{}</think>\n{after}", list(&draft));
        prop_assert_eq!(read_ranking(&with_trace, &map), read_ranking(&after, &map));
        let expected: Vec<String> = perm.iter().map(|p| map[*p].clone()).collect();
        prop_assert_eq!(read_ranking(&with_trace, &map).order(), expected);
    }

    /// The aggregate gives every label a position in every counted ranking, and the positions
    /// of one ranking always sum to 1 + 2 + … + n.
    #[test]
    fn positions_always_sum_to_the_full_ranking(
        perm in Just((0..5usize).collect::<Vec<_>>()).prop_shuffle(),
        named in 1usize..6,
        tie_at in 0usize..5,
    ) {
        let map = labels(5);
        let mut ps: Vec<Vec<String>> = perm.iter().take(named).map(|i| vec![map[*i].clone()]).collect();
        if tie_at + 1 < ps.len() {
            let next = ps.remove(tie_at + 1);
            ps[tie_at].extend(next);
        }
        let pos = positions(&ps, &map);
        prop_assert_eq!(pos.len(), 5);
        let sum: f64 = pos.values().sum();
        prop_assert!((sum - 15.0).abs() < 1e-9);
    }
}
