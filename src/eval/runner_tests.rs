use super::*;
use crate::modes::Usage;

fn size(prompt_bytes: usize, max_tokens: u32) -> CallSize {
    CallSize { prompt_bytes, messages: 1, max_tokens }
}

fn used(t: u64) -> Used {
    Used::Reported(Usage { prompt_tokens: t / 2, completion_tokens: t - t / 2, cost: None })
}

#[test]
fn a_call_starts_only_when_its_worst_case_fits_beside_the_calls_in_flight() {
    // Worst case of a call: its prompt's bytes, 16 tokens of template, its output cap.
    assert_eq!(size(100, 200).worst_tokens(), 316);
    let b = Budget::new(Some(1000), None, (100, 0.0));
    assert_eq!(b.admit("r", "a", "m", size(100, 200)), Admit::Go); // 100 + 316
    assert_eq!(b.admit("r", "b", "m", size(100, 200)), Admit::Go); // + 316 = 732
                                                                   // A third would pass 1000 beside them, but fits alone: it waits for room.
    assert_eq!(b.admit("r", "c", "m", size(100, 200)), Admit::Wait);
    b.settle("r", "a", used(50));
    assert_eq!(b.spent(), (150, 0.0), "what a call used is counted, not its worst case");
    assert_eq!(b.admit("r", "c", "m", size(100, 200)), Admit::Go);
    assert!(!b.refused());
    // A call the provider turned away counts nothing; one stopped in flight, or ending
    // without usage, counts its worst case.
    b.settle("r", "b", Used::Nothing);
    assert_eq!(b.spent(), (150, 0.0));
    b.settle("r", "c", Used::Unknown);
    assert_eq!(b.spent(), (466, 0.0));
    // One that could not fit even alone is refused, and the stop says why.
    assert_eq!(b.admit("r", "d", "m", size(400, 200)), Admit::Refuse);
    assert!(b.refused());
    let note = b.stop_note();
    assert!(note.contains("466 of a 1000-token budget used"), "{note}");
    assert!(note.contains("could use up to 616 tokens"), "{note}");
}

#[test]
fn a_failed_attempt_is_counted_and_the_next_must_fit_or_the_run_stops() {
    let b = Budget::new(Some(1000), None, (0, 0.0));
    assert_eq!(b.admit("r", "a", "m", size(100, 200)), Admit::Go); // 316 held
                                                                   // Turned away by the provider: nothing counted, the next attempt fits.
    assert!(b.retry("r", "a", Used::Nothing));
    assert_eq!(b.spent().0, 0);
    // Timed out: it may have used its worst case, and is counted so.
    assert!(b.retry("r", "a", Used::Unknown));
    assert!(b.retry("r", "a", Used::Unknown));
    assert_eq!(b.spent().0, 632);
    // 948 spent and 316 held would pass 1000: no further attempt, its room is released.
    assert!(!b.retry("r", "a", Used::Unknown));
    assert!(b.refused());
    b.settle("r", "a", Used::Unknown);
    assert_eq!(b.spent().0, 948, "the stopped call held nothing more");
}

#[test]
fn a_cost_budget_weighs_each_model_at_its_own_price_bound() {
    let b = Budget::new(None, Some(0.02), (0, 0.0));
    // No price known for model m yet: its first call goes, weighed at no cost, and the
    // next call of m waits until the first has reported one.
    assert_eq!(b.admit("r", "a", "m", size(0, 84)), Admit::Go); // worst 100 tokens
    assert_eq!(b.admit("r", "x", "m", size(0, 84)), Admit::Wait);
    assert_eq!(b.admit("r", "o", "other", size(0, 84)), Admit::Go, "another model's first");
    b.settle("r", "o", Used::Nothing);
    // $0.004 for 50 completion tokens: m's bound is $0.00008 a token, whatever the mix.
    let u = Usage { prompt_tokens: 50, completion_tokens: 50, cost: Some(0.004) };
    b.settle("r", "a", Used::Reported(u));
    assert_eq!(b.spent(), (100, 0.004));
    // 100 tokens of m may now cost $0.008: two fit beside $0.004 spent, a third waits.
    assert_eq!(b.admit("r", "b", "m", size(0, 84)), Admit::Go);
    assert_eq!(b.admit("r", "c", "m", size(0, 84)), Admit::Go);
    assert_eq!(b.admit("r", "d", "m", size(0, 84)), Admit::Wait);
    // 300 tokens ($0.024) would not fit even alone.
    assert_eq!(b.admit("r", "e", "m", size(0, 284)), Admit::Refuse);
    // Without a budget everything goes.
    let free = Budget::new(None, None, (0, 0.0));
    assert_eq!(free.admit("r", "a", "m", size(1 << 30, u32::MAX)), Admit::Go);
}

#[test]
fn a_jury_keeps_the_answer_only_on_its_jurors_stated_approval() {
    let summary = |verdict: &str, source: &str| json!({ "jurorSummary": { "majorityVerdict": verdict, "verdictSource": source } });
    let right = Given { grade: Grade::Correct };
    let g = jury_grade(&right, &summary("APPROVE", "votes"), true);
    assert_eq!((g.grade, g.answer.as_deref()), (Grade::Correct, Some("approve")));
    let wrong = Given { grade: Grade::Wrong };
    assert_eq!(jury_grade(&wrong, &summary("APPROVE", "votes"), true).grade, Grade::Wrong);
    for v in ["REVISE", "REJECT"] {
        assert_eq!(jury_grade(&right, &summary(v, "votes"), true).grade, Grade::Withheld);
    }
    // A verdict inferred from scores, a run that failed, or none at all: no verdict.
    for (result, completed) in [
        (summary("APPROVE", "scores"), true),
        (summary("APPROVE", "votes"), false),
        (json!({ "jurorSummary": { "majorityVerdict": null, "verdictSource": "none" } }), true),
        (json!({}), true),
    ] {
        let g = jury_grade(&right, &result, completed);
        assert_eq!((g.grade, g.answer), (Grade::Unparsed, None), "{result}");
    }
}
