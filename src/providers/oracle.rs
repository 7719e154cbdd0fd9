//! `sim/oracle-P` models (`sim/oracle-0.6`, or `sim/oracle-0.6-a` to tell panel members apart): sim models that answer an eval question correctly with probability
//! `P` (0 to 1), independently per call, so that the statistics of `conclave eval` can be
//! tested against exact expectations.
//!
//! The sim sees only prompts. The eval runner, in the same process, registers each question's
//! prompt with its answer key ([`register`]); the answer is never put in the prompt. An oracle
//! asked a registered prompt (the question itself, as Solo and Council's first stage ask it,
//! or Council's synthesis, which quotes it) draws right or wrong and answers with a
//! `Final answer:` line; any other prompt (rankings, votes, titles) gets the ordinary sim
//! answer. A sim-server in another process has no keys: its oracles answer like `sim/alpha`.
//!
//! Every wrong answer to a question is the same one (its *distractor*: the next letter, the
//! number plus one), so a plurality of oracles is a two-way vote and is right exactly when more
//! than half its members are: three 0.6 members 0.648, five 0.68256 (see
//! [`crate::eval::stats::majority_expectation`]).
//!
//! Draws are seeded by the key's seed (the eval's `--seed`), the model, the prompt and a count
//! of the calls made so far with that model and prompt: independent per call, reproducible for
//! a sequential run.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::sim_text::seed_of;
use crate::eval::grade::number_text;
use crate::eval::questions::Kind;
use crate::modes::ChatMessage;

/// What an oracle needs to answer a question.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerKey {
    pub answer: String,
    pub kind: Kind,
    pub seed: u64,
}

#[derive(Default)]
struct Keys {
    by_prompt: HashMap<String, AnswerKey>,
    calls: HashMap<u64, u64>,
}

fn keys() -> std::sync::MutexGuard<'static, Keys> {
    static KEYS: OnceLock<Mutex<Keys>> = OnceLock::new();
    KEYS.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Registers the answer key of a prompt for the oracles of this process.
pub fn register(prompt: &str, key: AnswerKey) {
    keys().by_prompt.insert(prompt.to_string(), key);
}

/// `P` of an oracle's name (`sim/oracle-0.6` → 0.6), None for other models.
pub fn probability(model: &str) -> Option<f64> {
    let rest = model.strip_prefix("sim/oracle-")?;
    // `sim/oracle-0.6-a`: a suffix tells apart panel members of one probability.
    let p: f64 = rest.split_once('-').map_or(rest, |(p, _)| p).parse().ok()?;
    (0.0..=1.0).contains(&p).then_some(p)
}

/// Whether the oracle's draw number `call` at this prompt is right.
pub fn draws_right(model: &str, prompt: &str, seed: u64, call: u64, p: f64) -> bool {
    let h = seed_of(&[model, prompt, &seed.to_string(), &call.to_string(), "oracle"]);
    ((h >> 11) as f64 / (1u64 << 53) as f64) < p
}

/// The one wrong answer oracles give to a question.
pub fn distractor(key: &AnswerKey) -> String {
    match &key.kind {
        Kind::Number { tolerance } => {
            let v = crate::modes::numbers::read_number(&key.answer).unwrap_or(0.0);
            number_text(v + (2.0 * tolerance).max(1.0))
        }
        Kind::Choice { options } => {
            let n = options.len().max(2) as u8;
            let i = key.answer.bytes().next().unwrap_or(b'A').saturating_sub(b'A') % n;
            char::from(b'A' + (i + 1) % n).to_string()
        }
        Kind::Exact | Kind::Judge => format!("not {}", key.answer),
    }
}

/// An oracle's reply, right or wrong.
pub fn reply_text(model: &str, key: &AnswerKey, right: bool) -> String {
    let value = if right { key.answer.clone() } else { distractor(key) };
    format!(
        "[simulated oracle answer from {model}: right with a set probability]\n\n\
         Working through the question step by step.\n\nFinal answer: {value}"
    )
}

/// The oracle's reply to a chat, when `model` is an oracle and its prompt a registered
/// question (or a Council synthesis quoting one); None otherwise. Counts the call.
pub fn answer(model: &str, messages: &[ChatMessage]) -> Option<String> {
    let p = probability(model)?;
    let last =
        messages.iter().rev().find(|m| m.role == "user").map(|m| m.content.as_str()).unwrap_or("");
    if last.starts_with(crate::eval::grade::JUDGE_OPENING) {
        return Some(judge(model, last, p));
    }
    let mut keys = keys();
    let (prompt, key) = match keys.by_prompt.get(last) {
        Some(k) => (last.to_string(), k.clone()),
        None if last.starts_with("You are a chairman synthesizing") => keys
            .by_prompt
            .iter()
            .find(|(q, _)| last.contains(q.as_str()))
            .map(|(q, k)| (q.clone(), k.clone()))?,
        None => return None,
    };
    let counter = keys.calls.entry(seed_of(&[model, &prompt])).or_insert(0);
    let call = *counter;
    *counter += 1;
    drop(keys);
    Some(reply_text(model, &key, draws_right(model, &prompt, key.seed, call, p)))
}

/// An oracle as a `judge`: the graded reply's stated answer against the reference, normalised
/// (right with probability P, else the other verdict).
fn judge(model: &str, prompt: &str, p: f64) -> String {
    use crate::eval::grade::{judge_parts, normalise, stated_answer};
    let same = judge_parts(prompt).is_some_and(|(reference, graded)| {
        stated_answer(graded).is_ok_and(|a| normalise(&a) == normalise(reference))
    });
    let mut keys = keys();
    let counter = keys.calls.entry(seed_of(&[model, prompt])).or_insert(0);
    let call = *counter;
    *counter += 1;
    drop(keys);
    let right = draws_right(model, prompt, 0, call, p);
    let verdict = if same == right { "CORRECT" } else { "INCORRECT" };
    format!("[simulated oracle judge {model}]\n\nVERDICT: {verdict}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::grade::{grade, Grade};
    use crate::eval::questions::{parse_set, prompt, Question};
    use crate::eval::stats::{majority_expectation, plurality, wilson, Z95};

    fn sample() -> Vec<Question> {
        parse_set(crate::eval::SAMPLE).unwrap()
    }

    fn key(q: &Question, seed: u64) -> AnswerKey {
        AnswerKey { answer: q.answer.clone(), kind: q.kind.clone(), seed }
    }

    #[test]
    fn names_and_distractors() {
        assert_eq!(probability("sim/oracle-0.6"), Some(0.6));
        assert_eq!(probability("sim/oracle-1"), Some(1.0));
        assert_eq!(probability("sim/oracle-0.6-b"), Some(0.6));
        assert_eq!(probability("sim/oracle-1.5"), None);
        assert_eq!(probability("sim/alpha"), None);
        for q in sample() {
            let k = key(&q, 0);
            assert_eq!(grade(&reply_text("sim/oracle-1", &k, true), &q).grade, Grade::Correct);
            assert_eq!(grade(&reply_text("sim/oracle-1", &k, false), &q).grade, Grade::Wrong);
        }
    }

    #[test]
    fn a_registered_question_is_answered_and_other_prompts_are_left_to_the_sim() {
        let q = &sample()[0];
        let asked = format!("{} (oracle test)", prompt(q));
        register(&asked, key(q, 1));
        let text = answer("sim/oracle-1", &[ChatMessage::user(asked.clone())]).unwrap();
        assert_eq!(grade(&text, q).grade, Grade::Correct);
        assert!(!asked.contains(&format!("Final answer: {}", q.answer)));
        let synthesis = format!("You are a chairman synthesizing…\n\nOriginal Question: {asked}\n");
        assert!(answer("sim/oracle-0", &[ChatMessage::user(synthesis)]).is_some());
        assert_eq!(answer("sim/oracle-1", &[ChatMessage::user("Rank these")]), None);
        assert_eq!(answer("sim/alpha", &[ChatMessage::user(asked)]), None);
        // As a judge, an oracle of 1 compares the stated answer with the reference.
        let judged = |reply: &str| {
            let q = Question {
                id: "j".into(),
                question: "Capital of France?".into(),
                answer: "Paris".into(),
                kind: crate::eval::questions::Kind::Judge,
            };
            let prompt = crate::eval::grade::judge_prompt(&q, reply);
            crate::eval::grade::read_verdict(
                &answer("sim/oracle-1", &[ChatMessage::user(prompt)]).unwrap(),
            )
        };
        assert_eq!(judged("It is Paris.\nFinal answer: Paris"), Some(true));
        assert_eq!(judged("Final answer: Lyon"), Some(false));
    }

    /// Accuracy measured over one simulated eval of `questions` × `panel` oracles at `p`,
    /// graded and voted by the eval's own code, and whether its 95% Wilson interval covers
    /// `expected`.
    fn one_eval(questions: &[Question], panel: usize, p: f64, seed: u64, expected: f64) -> bool {
        let model = format!("sim/oracle-{p}");
        let mut correct = 0;
        for q in questions {
            let k = key(q, seed);
            let p_text = prompt(q);
            let votes: Vec<Option<String>> = (0..panel)
                .map(|m| {
                    let right = draws_right(&model, &p_text, seed, m as u64, p);
                    grade(&reply_text(&model, &k, right), q).answer
                })
                .collect();
            let voted = plurality(&votes);
            if voted.is_some_and(|a| crate::eval::grade::is_correct(&a, q)) {
                correct += 1;
            }
        }
        let (lo, hi) = wilson(correct, questions.len() as u64, Z95);
        lo <= expected && expected <= hi
    }

    #[test]
    fn wilson_intervals_cover_the_exact_majority_expectation_at_their_rate() {
        let questions = sample();
        for (panel, expected) in [(1, 0.6), (3, 0.648), (5, 0.68256)] {
            assert!((majority_expectation(panel as u32, 0.6) - expected).abs() < 1e-9);
            let evals = 200;
            let covered =
                (0..evals).filter(|s| one_eval(&questions, panel, 0.6, *s, expected)).count();
            // 95% nominal; 200 evals put the count within about ±6 of 190 two times in three.
            assert!(
                covered >= 180,
                "{panel} members: {covered} of {evals} intervals cover {expected}"
            );
            assert!(covered < 200, "{panel} members: every interval covered: too wide?");
        }
    }

    #[test]
    fn measured_accuracy_converges_on_the_expectation() {
        let questions = sample();
        let model = "sim/oracle-0.6";
        for (panel, expected) in [(3usize, 0.648), (5, 0.68256)] {
            let (mut right, mut total) = (0u64, 0u64);
            for seed in 0..300u64 {
                for q in &questions {
                    let p_text = prompt(q);
                    let votes: Vec<Option<String>> = (0..panel)
                        .map(|m| {
                            let r = draws_right(model, &p_text, seed, m as u64, 0.6);
                            grade(&reply_text(model, &key(q, seed), r), q).answer
                        })
                        .collect();
                    right +=
                        u64::from(plurality(&votes).is_some_and(|a| {
                            a == q.answer || crate::eval::grade::is_correct(&a, q)
                        }));
                    total += 1;
                }
            }
            let measured = right as f64 / total as f64;
            // 24,000 votes: the standard error is about 0.003.
            assert!((measured - expected).abs() < 0.012, "{panel}: {measured} vs {expected}");
        }
    }
}
