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
        // The header's name quoted in a sentence after the section (SmolLM2, structured output
        // off) is no second section; a later ranking, or a refusal, after a header in prose is.
        ("FINAL RANKING:\n1. Response C\n2. Response B\n3. Response A\n\nThe FINAL RANKING section is marked with \"FINAL RANKING: FINAL\"",
            places(&[&["C"], &["B"], &["A"]]), None),
        // The same on a header line of its own (a CI run's SmolLM2 reply).
        ("FINAL RANKING:\n1. Response C\n2. Response A\n3. Response B\n\nTo conclude, we must include the final part of the response with a numbered list.\n\nThe FINAL RANKING:\nThe final part of the response must include the number \"3\" and include the phrase \"FINAL RANKING\" or another phrase that describes the FINAL ROUND.",
            places(&[&["C"], &["A"], &["B"]]), None),
        ("FINAL RANKING:\n1. Response A\n2. Response B\n3. Response C\n\nOn reflection, my final ranking: Response C > Response A > Response B",
            places(&[&["C"], &["A"], &["B"]]), None),
        ("FINAL RANKING:\n1. Response A\n2. Response B\n3. Response C\n\nOn reflection, my final ranking: I cannot decide between them.",
            vec![], Some(Unparsed::Refused)),
        ("FINAL RANKING:\n1. Response A\n2. Response B\n3. Response C\n\nOn reflection, my final ranking:\n1. C\n2. A\n3. B",
            places(&[&["C"], &["A"], &["B"]]), None),
        // A label ranked twice is contradictory.
        ("FINAL RANKING:\n1. Response A\n2. Response B\n3. Response A", vec![], Some(Unparsed::Inconsistent)),
    ]
}

/// Issue 28 point 4: what a careful reader reads where structured output is off, each with
/// the adversarial twin that must not be read (or not read forwards).
fn finished_text_readers() -> Vec<Case> {
    vec![
        // A ranking in JSON, fenced or bare, as an object or an array.
        ("```json\n[\"Response C\", \"Response A\", \"Response B\"]\n```", places(&[&["C"], &["A"], &["B"]]), None),
        ("My ranking: [\"C\", \"A\", \"B\"]", places(&[&["C"], &["A"], &["B"]]), None),
        ("{\"ranking\": {\"1\": \"Response B\", \"2\": \"Response C\", \"3\": \"Response A\"}}", places(&[&["B"], &["C"], &["A"]]), None),
        ("```\n{\"ranking\": {\"Response A\": 2, \"Response B\": 3, \"Response C\": 1}}\n```", places(&[&["C"], &["A"], &["B"]]), None),
        ("[{\"response\": \"B\", \"rank\": \"2nd\"}, {\"response\": \"A\", \"rank\": \"1st\"}, {\"response\": \"C\", \"rank\": \"3rd\"}]", places(&[&["A"], &["B"], &["C"]]), None),
        ("[\"Response A\", \"Response B\", \"Response A\"]", vec![], Some(Unparsed::Inconsistent)),
        // A label the run lacks is dropped, as in text: what is left is partial.
        ("{\"ranking\": [\"Response A\", \"Response F\", \"Response B\"]}", places(&[&["A"], &["B"]]), None),
        ("{\"ranking\": {\"Response A\": \"good\", \"Response B\": \"bad\"}}", vec![], Some(Unparsed::NoAnswer)),
        ("{\"ranking\": {\"Response A\": 8, \"Response B\": 6, \"Response C\": 9}}", vec![], Some(Unparsed::NoAnswer)),
        ("[{\"label\": \"Response A\", \"score\": 8}, {\"label\": \"Response B\", \"score\": 6}, {\"label\": \"Response C\", \"score\": 9}]", vec![], Some(Unparsed::NoAnswer)),
        ("{\"best\": [\"Response A\"], \"worst\": [\"Response C\"]}", vec![], Some(Unparsed::NoAnswer)),
        ("Answer with [\"Response X\", \"Response Y\", \"Response Z\"], best first.", vec![], Some(Unparsed::NoAnswer)),
        // A Markdown table, rank and response in either order, bold or not.
        ("| Response | Rank |\n|---|---|\n| Response A | 2 |\n| Response C | 1 |\n| Response B | 3 |", places(&[&["C"], &["A"], &["B"]]), None),
        ("| **Rank** | **Response** |\n|:-:|:-:|\n| **1** | **C** |\n| **2** | **B** |\n| **3** | **A** |", places(&[&["C"], &["B"], &["A"]]), None),
        ("| Response | Place | Notes |\n|---|---|---|\n| B | 1st | clearer than Response A |\n| A | 2nd | short |\n| C | 3rd | wrong |", places(&[&["B"], &["A"], &["C"]]), None),
        ("| Rank | Response |\n|---|---|\n| 1 | Response A |\n| 1 | Response C |\n| 3 | Response B |", places(&[&["A", "C"], &["B"]]), None),
        ("| Rank | Response |\n|---|---|\n| 1 | Response A |\n| 2 | Response B and Response C (tied) |", places(&[&["A"], &["B", "C"]]), None),
        ("| Rank | Response |\n|---|---|\n| 1 | Response A |\n| 2 | Response B |\n| 3 | Response A |", vec![], Some(Unparsed::Inconsistent)),
        ("| Response | Score |\n|---|---|\n| Response A | 7 |\n| Response B | 9 |\n| Response C | 4 |", vec![], Some(Unparsed::NoAnswer)),
        // A final ranking in prose, after a <think> draft or without a header, naming every
        // label once.
        ("<think>FINAL RANKING:\n1. Response A\n2. Response B\n3. Response C\nNo, C is best.</think>\nMy ranking from best to worst is: C > A > B", places(&[&["C"], &["A"], &["B"]]), None),
        ("After comparing them, my ranking from best to worst is: C > A > B.", places(&[&["C"], &["A"], &["B"]]), None),
        ("All three try.\n\nFinal answer: A first, then C, and B last.", places(&[&["A"], &["C"], &["B"]]), None),
        ("My final ranking is:\nResponse B, then Response C, then Response A", places(&[&["B"], &["C"], &["A"]]), None),
        ("FINAL RANKING: C > B > A", places(&[&["C"], &["B"], &["A"]]), None),
        ("From worst to best: B, A, C.", places(&[&["C"], &["A"], &["B"]]), None),
        ("My ranking: B, A, C (worst to best)", places(&[&["C"], &["A"], &["B"]]), None),
        ("My ranking is: A = C > B", places(&[&["A", "C"], &["B"]]), None),
        ("Final answer: A and C (tied), then B.", places(&[&["A", "C"], &["B"]]), None),
        // Its adversarial twins: a position word out of place, a direction that makes `>`
        // ambiguous, `<`, a label missing or repeated, prose that only mentions the labels.
        ("My ranking: C first, A second, B third.", places(&[&["C"], &["A"], &["B"]]), None),
        ("FINAL RANKING:\n1. C\n2. **A**\n3. B - short but right", places(&[&["C"], &["A"], &["B"]]), None),
        ("FINAL RANKING:\n1. A clear winner is hard to name\n2. Response B", vec![], Some(Unparsed::NoAnswer)),
        ("Final answer: B last, A first, then C.", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking: C second, A first, B third.", vec![], Some(Unparsed::NoAnswer)),
        ("My answer is: A and B and C", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking: C > A and B", vec![], Some(Unparsed::NoAnswer)),
        ("Final answer: C > A > B, although A and B are close.", vec![], Some(Unparsed::NoAnswer)),
        ("From worst to best: B, A, and C first.", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking from worst to best: B > A > C", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking from best to worst is: C < A < B", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking from best to worst is: C > A", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking from best to worst is: C > A > C > B", vec![], Some(Unparsed::Inconsistent)),
        ("My ranking from best to worst is: C > A > D", vec![], Some(Unparsed::NoAnswer)),
        ("Final answer: A is accurate, B is vague and C is wrong.", vec![], Some(Unparsed::NoAnswer)),
        ("Response A and Response B are both good, and Response C is fine too.", vec![], Some(Unparsed::NoAnswer)),
        ("In no particular order: A, B, C.", vec![], Some(Unparsed::NoAnswer)),
        ("The order: A, B, C is how they were given.", vec![], Some(Unparsed::NoAnswer)),
        // A tie stated as a tie is never a strict order.
        ("FINAL RANKING:\n1. Response A (tie)\n1. Response C (tie)\n3. Response B", places(&[&["A", "C"], &["B"]]), None),
        ("FINAL RANKING:\n1. Response A (tie)\n2. Response C (tie)\n3. Response B", places(&[&["A", "C"], &["B"]]), None),
        ("FINAL RANKING:\n1. Response B\n2. Response A - tied for second\n3. Response C - tied for second", places(&[&["B"], &["A", "C"]]), None),
        ("FINAL RANKING:\n1. Response A\n2. Response B and Response C (tied)", places(&[&["A"], &["B", "C"]]), None),
        ("FINAL RANKING:\n1. Response A\n2. Response B (tie)\n3. Response C", vec![], Some(Unparsed::Inconsistent)),
        // What is not stated stays refused: a draft only inside <think>, an unfinished reply,
        // a refusal.
        ("<think>My ranking from best to worst is: C > A > B</think>", vec![], Some(Unparsed::ReasoningOnly)),
        ("<think>My ranking from best to worst is: C > A > B", vec![], Some(Unparsed::ReasoningOnly)),
        ("My ranking from best to worst is: C > A >", vec![], Some(Unparsed::NoAnswer)),
        ("FINAL RANKING:\n1. Response C\n2. Response A\n3.", vec![], Some(Unparsed::NoAnswer)),
        ("FINAL RANKING:\n1. Response C\n2. Resp", vec![], Some(Unparsed::NoAnswer)),
        ("FINAL RANKING:\n1. [best response]\n2. [second best]\n3. Response A", vec![], Some(Unparsed::NoAnswer)),
        ("My ranking: I cannot rank these, Response A and Response C are too close.", vec![], Some(Unparsed::Refused)),
        // A list without its header, or a chain, that names a label twice contradicts itself
        // (SmolLM2 wrote the first on the CI model; it was read as B > A).
        ("1. Response B\n2. Response A\n3. Response B", vec![], Some(Unparsed::Inconsistent)),
        ("Response B > Response A > Response B", vec![], Some(Unparsed::Inconsistent)),
    ]
}

#[test]
fn the_finished_text_readers_read_what_is_stated_and_nothing_else() {
    let mut wrong = Vec::new();
    for (text, expected, why) in finished_text_readers() {
        let read = read_ranking(text, &labels(3));
        if read.places != expected || read.unparsed != why {
            wrong.push(format!(
                "{text:?}\n  read {:?} {:?}\n  want {expected:?} {why:?}",
                read.places, read.unparsed
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_prose_ranking_of_six_is_read_in_full_and_a_tie_shares_its_places() {
    let read =
        read_ranking("From best to worst: C, then F, then E, then A, then D, then B.", &labels(6));
    assert_eq!(read.places, places(&[&["C"], &["F"], &["E"], &["A"], &["D"], &["B"]]));
    assert_eq!(read.unparsed, None);
    // Five of six named is not the ranking stated in full.
    let read = read_ranking("From best to worst: C, then F, then E, then A, then D.", &labels(6));
    assert_eq!(read.unparsed, Some(Unparsed::NoAnswer));
    // `A = C > B` gives A and C 1.5 each and B 3.
    let l = labels(3);
    let read = read_ranking("My ranking is: A = C > B", &l);
    let p = positions(&read.places, &l);
    assert_eq!((p["Response A"], p["Response C"], p["Response B"]), (1.5, 1.5, 3.0));
    assert!(read.has_ties());
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

/// Text that states no ranking, vote, verdict or number, for the "never guesses" properties
/// of every reader (issue 33 point 11): prose that mentions labels (spelled out and as bare
/// capitals) and number-like tokens in passing, refusals, the prompts' own templates with
/// their placeholders, and drafts that are stated only inside a closed `<think>` block. A
/// reader that took the first labels mentioned as the order, the first label as the vote,
/// the first verdict word or the first digits as the answer reads something from almost
/// every one of these.
pub(crate) fn unstated() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (unstated_fragment(), prop::sample::select(vec![" ", "\n", "\n\n"])),
        1..7,
    )
    .prop_map(|parts| parts.into_iter().map(|(f, sep)| format!("{f}{sep}")).collect::<String>())
}

/// Labels as a reply mentions them: spelled out, bold, as capitals, one the run lacks (D).
fn mention() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "Response A",
        "Response B",
        "Response C",
        "Response D",
        "**Response B**",
        "response c",
        "A",
        "B",
        "C",
        "Réponse A",
    ])
    .prop_map(str::to_string)
}

/// Number-like tokens, never ending a sentence (`3.` is an item number).
fn number_token() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..200).prop_map(|n| n.to_string()),
        (1990u32..2040).prop_map(|n| n.to_string()),
        Just("12.5%".to_string()),
        Just("40k".to_string()),
        Just("$1.2B".to_string()),
        Just("2,000".to_string()),
        Just("3rd".to_string()),
        Just("30-40 million".to_string()),
    ]
}

/// The verbs a mention sentence uses: none states an order, a choice, a verdict or a value.
const PASSING: &[&str] = &["cites", "lists", "mentions", "counted", "quotes", "skips", "repeats"];
const NOUNS: &[&str] = &["sources", "points", "examples", "steps", "figures", "times"];

fn unstated_fragment() -> impl Strategy<Value = String> {
    let passing = (
        mention(),
        prop::sample::select(PASSING),
        number_token(),
        prop::sample::select(NOUNS),
        mention(),
    )
        .prop_map(|(a, verb, n, noun, b)| format!("{a} {verb} {n} {noun}, unlike {b}."));
    let compare = (mention(), mention(), number_token()).prop_map(|(a, b, n)| {
        format!("Both {a} and {b} discuss the {n} figures; neither is perfect.")
    });
    let refusal = (mention(), mention()).prop_flat_map(|(a, b)| {
        prop::sample::select(vec![
            format!("I cannot rank these fairly; {a} and {b} are both strong."),
            format!("I abstain: {a} and {b} are equally good."),
            format!("I won't choose between {a} and {b}."),
            format!("I am unable to evaluate {a} against {b}."),
            "I cannot give a verdict on this content.".to_string(),
            "I can't estimate this; no reliable data exists.".to_string(),
        ])
    });
    let template = prop::sample::select(vec![
        "FINAL RANKING:\n1. Response X\n2. Response Y\n3. Response Z",
        "FINAL RANKING:\n1. [best response]\n2. [second best]\n3. [worst]",
        "VOTE: Response X",
        "VERDICT: [APPROVE|REVISE|REJECT]",
        "VERDICT: APPROVE, REVISE or REJECT",
        "ESTIMATE: [your number]",
        "CONFIDENCE: [a number]",
        "{\"ranking\": [\"Response X\", \"Response Y\"], \"vote\": \"Response X\"}",
        "| Rank | Response |\n|---|---|\n| [n] | [label] |",
    ])
    .prop_map(str::to_string);
    let draft = (mention(), mention(), mention(), number_token()).prop_flat_map(|(a, b, c, n)| {
        prop::sample::select(vec![
            format!("<think>FINAL RANKING:\n1. {a}\n2. {b}\n3. {c}</think>"),
            format!("<think>My ranking from best to worst is: {a} > {b} > {c}</think>"),
            format!("<think>VOTE: {a}</think>"),
            format!("<think>VERDICT: APPROVE</think>"),
            format!("<think>ESTIMATE: about {n}</think>"),
            format!("<think>{{\"ranking\": [\"{a}\", \"{b}\"], \"vote\": \"{c}\"}}</think>"),
        ])
    });
    prop_oneof![3 => passing, 2 => compare, 2 => refusal, 2 => template, 2 => draft]
}

proptest! {
    /// Issue 33 point 11: text that states no ranking reads as unparsed, whatever labels and
    /// numbers it mentions.
    #[test]
    fn text_that_states_no_ranking_reads_as_unparsed(text in unstated()) {
        let read = read_ranking(&text, &labels(3));
        prop_assert_eq!(read.places, Vec::<Vec<String>>::new(), "{}", text);
        prop_assert!(read.unparsed.is_some());
    }
}
