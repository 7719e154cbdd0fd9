//! `conclave eval`: is the panel worth it? A graded question set is run through several
//! *arms* (each member alone, self-consistency, a majority of the members, any mode) and each
//! arm's accuracy, interval, difference to the best single member, tokens, cost and latency
//! are reported.
//!
//! # Layout
//! - [`questions`]: the JSON-lines question sets and the prompt a question is asked with.
//! - [`grade`]: reading a reply's final answer and grading it (pure).
//! - [`stats`]: Wilson intervals, the paired bootstrap, McNemar, plurality votes (pure).
//! - [`arms`]: the arms named on the command line and what each runs.
//! - [`report`]: the figures per arm from graded answers, as a table or JSON (pure).
//! - [`runner`]: drives the engine: every arm's question is a stored run.
//! - `conclave eval`'s flags, progress line and output are the CLI's ([`crate::cli::eval`]).
//!
//! The sim models that make the statistics testable are `sim/oracle-P`
//! ([`oracle`]).

pub mod arms;
pub mod grade;
pub mod oracle;
pub mod questions;
pub mod report;
pub mod runner;
pub mod stats;

/// The sample set shipped for the demo and the tests (`evals/sample.jsonl`): 40 arithmetic
/// questions graded as numbers and 40 multiple-choice questions graded as letters.
pub const SAMPLE: &str = include_str!("../../evals/sample.jsonl");

#[cfg(test)]
mod tests {
    use super::questions::{parse_set, Kind};

    #[test]
    fn the_sample_set_is_40_arithmetic_and_40_choice_questions_with_right_answers() {
        let set = parse_set(super::SAMPLE).unwrap();
        let numbers: Vec<_> =
            set.iter().filter(|q| matches!(q.kind, Kind::Number { .. })).collect();
        let choices: Vec<_> =
            set.iter().filter(|q| matches!(q.kind, Kind::Choice { .. })).collect();
        assert_eq!((numbers.len(), choices.len()), (40, 40));
        for q in numbers {
            // "What is A op B?", recomputed.
            let body = q.question.trim_start_matches("What is ").trim_end_matches('?');
            let parts: Vec<&str> = body.split(' ').collect();
            let [a, op, b] = parts.as_slice() else { panic!("{}", q.question) };
            let (a, b): (i64, i64) = (a.parse().unwrap(), b.parse().unwrap());
            let v = match *op {
                "+" => a + b,
                "-" => a - b,
                "×" => a * b,
                "÷" => {
                    assert_eq!(a % b, 0, "{}", q.question);
                    a / b
                }
                other => panic!("operator {other}"),
            };
            assert_eq!(q.answer, v.to_string(), "{}", q.question);
        }
        for q in choices {
            let Kind::Choice { options } = &q.kind else { unreachable!() };
            assert_eq!(options.len(), 4, "{}", q.id);
            let mut distinct = options.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), 4, "{}", q.id);
        }
    }
}
