//! Grading a reply against a question's answer, reading the final answer the way the mode
//! parsers do: reasoning traces (`<think>`) are set aside, an explicit `Final answer:` /
//! `ANSWER:` line is looked for first (the last one counts), then a `\boxed{…}`, then a reply
//! that is nothing but its answer. A reply that states no answer is [`Grade::Unparsed`] and one
//! that declines is [`Grade::Refused`]: both count as wrong and are reported, and neither is
//! ever guessed from a mention. A confident wrong grade is the worst bug an eval can have.
//!
//! Pure: no I/O. A `judge` question is graded by a model; this module writes its prompt
//! ([`judge_prompt`]) and reads its verdict ([`read_verdict`]).

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::questions::{Kind, Question};
use crate::modes::numbers::{read_stated, Lead};
use crate::modes::reading::{declines, split_reasoning, unmark, Unparsed};
use crate::modes::stated::{last_stated, Labels};

/// How one reply was graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grade {
    Correct,
    Wrong,
    /// The model declined to answer: wrong, and reported as a refusal.
    Refused,
    /// The reply states no answer that can be read (or a panel reached no majority): wrong,
    /// and reported as unparsed.
    Unparsed,
    /// A jury did not approve the answer it was given, so the arm gives none: wrong, and
    /// reported with the jury's figures.
    Withheld,
}

impl Grade {
    pub fn as_str(self) -> &'static str {
        match self {
            Grade::Correct => "correct",
            Grade::Wrong => "wrong",
            Grade::Refused => "refused",
            Grade::Unparsed => "unparsed",
            Grade::Withheld => "withheld",
        }
    }

    pub fn parse(s: &str) -> Option<Grade> {
        [Grade::Correct, Grade::Wrong, Grade::Refused, Grade::Unparsed, Grade::Withheld]
            .into_iter()
            .find(|g| g.as_str() == s)
    }
}

/// A graded reply: the grade and the answer read from it, in a canonical form (a letter, a
/// number as digits, a normalised string) that equal answers share, so votes can be counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graded {
    pub grade: Grade,
    pub answer: Option<String>,
}

impl Graded {
    fn unread(why: Unparsed) -> Graded {
        let grade = if why == Unparsed::Refused { Grade::Refused } else { Grade::Unparsed };
        Graded { grade, answer: None }
    }
}

fn final_line_re() -> &'static Regex {
    // `Final answer: 42`, `**ANSWER:** B`, `The final answer is 42`, `Answer = 7`.
    regex!(
        r"(?im)^[ \t>#*_\-]*(?:the[ \t]+)?(?:final[ \t]+answer|answer)[ \t*_]*(?:(?:is|[:：=])[ \t*_]*)+(.*)$"
    )
}

fn boxed_re() -> &'static Regex {
    regex!(r"\\boxed\{([^{}]*)\}")
}

/// The most characters a reply may have to be read as nothing but its answer.
const LONE_ANSWER_CHARS: usize = 40;

/// The text a reply states as its answer, or why there is none.
pub fn stated_answer(reply: &str) -> Result<String, Unparsed> {
    let split = split_reasoning(reply);
    let text = split.answer.trim();
    if split.unclosed || (split.reasoning.is_some() && text.is_empty()) {
        return Err(Unparsed::ReasoningOnly);
    }
    // The last labelled line with a value; a label alone on its line takes the next line.
    let mut found: Option<String> = None;
    for c in final_line_re().captures_iter(text) {
        let (Some(whole), Some(v)) = (c.get(0), c.get(1)) else { continue };
        let value = clean(v.as_str());
        if !value.is_empty() {
            found = Some(value);
        } else if let Some(next) = text[whole.end()..].lines().map(clean).find(|l| !l.is_empty()) {
            found = Some(next);
        }
    }
    if let Some(v) = found {
        return Ok(v);
    }
    if let Some(b) = boxed_re().captures_iter(text).last().and_then(|c| c.get(1)) {
        return Ok(clean(b.as_str()));
    }
    let lone = clean(text);
    if !lone.is_empty() && !lone.contains('\n') && lone.chars().count() <= LONE_ANSWER_CHARS {
        return Ok(lone);
    }
    Err(if declines(text) { Unparsed::Refused } else { Unparsed::NoAnswer })
}

/// A value without markup around it (bold, code, `$…$`, `\boxed{}`) and trailing full stops.
fn clean(v: &str) -> String {
    let mut s = unmark(v.trim()).trim().to_string();
    if let Some(c) = boxed_re().captures(&s).and_then(|c| c.get(1)) {
        s = c.as_str().to_string();
    }
    s.trim_matches(|c: char| c == '$' || c.is_whitespace())
        .trim_end_matches(['.', '!'])
        .trim()
        .to_string()
}

/// Grades a reply. A `judge` question is graded by its judge: here it reads only whether the
/// reply states an answer (Unparsed, Refused), and its grade is left `Wrong` until the judge
/// has spoken ([`read_verdict`]).
pub fn grade(reply: &str, q: &Question) -> Graded {
    let value = match stated_answer(reply) {
        Ok(v) => v,
        Err(why) => return Graded::unread(why),
    };
    if declines(&value) {
        return Graded::unread(Unparsed::Refused);
    }
    match canonical(&value, &q.kind) {
        Ok(answer) => {
            let grade = if is_correct(&answer, q) { Grade::Correct } else { Grade::Wrong };
            Graded { grade, answer: Some(answer) }
        }
        Err(why) => Graded::unread(why),
    }
}

/// Whether a canonical answer (as [`grade`] reads it) is right.
pub fn is_correct(answer: &str, q: &Question) -> bool {
    match &q.kind {
        Kind::Number { tolerance } => {
            let (Ok(a), Some(r)) =
                (answer.parse::<f64>(), crate::modes::numbers::read_number(&q.answer))
            else {
                return false;
            };
            // A little room for the float's own rounding, not for the model's.
            (a - r).abs() <= tolerance + 1e-9 * r.abs().max(1.0)
        }
        Kind::Choice { .. } => answer == q.answer,
        Kind::Exact => answer == normalise(&q.answer),
        Kind::Judge => false,
    }
}

/// The canonical form of a stated value for a kind of question.
fn canonical(value: &str, kind: &Kind) -> Result<String, Unparsed> {
    match kind {
        Kind::Number { .. } => {
            let stated = read_stated(value, Lead::Label).ok_or(Unparsed::NoAnswer)?;
            if stated.range.is_some() {
                // `30-40`: a range is not an answer.
                return Err(Unparsed::NoAnswer);
            }
            // A calculation states its result last (`17 × 23 = 391`).
            let result = value.rsplit('=').next().unwrap_or(value);
            if numbers_in(result) > 1 {
                // `391 or 392`, `maybe 391, maybe 12`: more than one number is no one answer.
                return Err(Unparsed::Inconsistent);
            }
            Ok(number_text(stated.value))
        }
        Kind::Choice { options } => choice(value, options),
        Kind::Exact | Kind::Judge => {
            let n = normalise(value);
            if n.is_empty() {
                Err(Unparsed::NoAnswer)
            } else {
                Ok(n)
            }
        }
    }
}

/// How many different numbers a stated value writes (`1,131` is one, `391 or 392` two).
fn numbers_in(value: &str) -> usize {
    let number = regex!(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?");
    let mut seen: Vec<String> =
        number.find_iter(value).map(|m| m.as_str().replace(',', "")).collect();
    seen.sort();
    seen.dedup();
    seen.len()
}

/// A number as digits: whole numbers without a fraction, others as Rust prints them.
pub fn number_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn letter_re() -> &'static Regex {
    // `B`, `(B)`, `B)`, `B.`, `B: Paris`, `Option B`, `b` alone.
    regex!(r"^(?i:option|choice|letter)?[ \t]*[(\[]?([A-Za-z])(?:[)\].:,]|[ \t]|$)")
}

fn another_letter_re() -> &'static Regex {
    regex!(r"(?i)(?:\bor\b|\band\b|/|,)[ \t]*[(\[]?[A-Z]\b[)\]]?")
}

/// The letter a choice answer names. A lower-case letter counts only alone (`b`, `(b)`): in
/// `a dog` it is an article. Letters offered together (`B or C`) are no answer.
fn choice(value: &str, options: &[String]) -> Result<String, Unparsed> {
    let in_range = |l: char| options.is_empty() || ((l as u8 - b'A') as usize) < options.len();
    if let Some(c) = letter_re().captures(value) {
        let Some(l) = c.get(1) else { return Err(Unparsed::NoAnswer) };
        let rest = &value[l.end()..];
        let raw = l.as_str().chars().next().unwrap_or('?');
        let alone = value.trim_matches(|c: char| "()[].:, \t".contains(c)).len() == 1;
        let letter = raw.to_ascii_uppercase();
        // A letter followed by words is a sentence ("A lot depends on it", "A good guess is
        // C"), unless the words are that option's own text ("B Paris").
        let words_after = rest.starts_with([' ', '\t']) && !rest.trim().is_empty();
        let own_text = |i: usize| options.get(i).is_some_and(|o| normalise(o) == normalise(rest));
        let sentence = words_after && !own_text((letter as u8).wrapping_sub(b'A') as usize);
        if (raw.is_ascii_uppercase() || alone) && in_range(letter) && !sentence {
            if another_letter_re().is_match(rest) {
                return Err(Unparsed::Inconsistent);
            }
            return Ok(letter.to_string());
        }
    }
    // The option's text itself.
    let n = normalise(value);
    let hits: Vec<usize> =
        options.iter().enumerate().filter(|(_, o)| normalise(o) == n).map(|(i, _)| i).collect();
    match hits.as_slice() {
        [i] => Ok(char::from(b'A' + *i as u8).to_string()),
        _ => Err(Unparsed::NoAnswer),
    }
}

/// Lower case, spaces collapsed, quotes and surrounding punctuation removed.
pub fn normalise(s: &str) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    words.join(" ").to_lowercase().trim_matches(|c: char| !c.is_alphanumeric()).to_string()
}

/// How a judge's prompt starts (the oracle sims recognise it).
pub const JUDGE_OPENING: &str =
    "You are grading an answer to a question against a reference answer.";

/// The prompt a judge model is asked for a `judge` question (documented in docs/evals.md).
pub fn judge_prompt(q: &Question, reply: &str) -> String {
    let answer = split_reasoning(reply).answer.into_owned();
    format!(
        "{JUDGE_OPENING}\n\n\
         QUESTION:\n{}\n\nREFERENCE ANSWER:\n{}\n\nANSWER TO GRADE:\n{}\n\n\
         Does the answer to grade state the same final answer as the reference? Ignore wording, \
         formatting and the reasoning shown; an answer that hedges between several answers, \
         or states none, is incorrect.\n\
         Reply with one line: \"VERDICT: CORRECT\" or \"VERDICT: INCORRECT\".",
        q.question, q.answer, answer
    )
}

/// The reference and the graded answer of a judge's prompt, as [`judge_prompt`] wrote them.
pub fn judge_parts(prompt: &str) -> Option<(&str, &str)> {
    let reference = prompt.split_once("\n\nREFERENCE ANSWER:\n")?.1;
    let (reference, rest) = reference.split_once("\n\nANSWER TO GRADE:\n")?;
    let graded = rest.split_once("\n\nDoes the answer to grade state")?.0;
    Some((reference, graded))
}

/// A judge's verdict: Some(true) correct, Some(false) incorrect, None when it states neither.
pub fn read_verdict(reply: &str) -> Option<bool> {
    static LABELS: OnceLock<Labels> = OnceLock::new();
    let labels = LABELS.get_or_init(|| Labels::new("verdict"));
    let answer = split_reasoning(reply).answer;
    last_stated(&answer, labels, |w| match w.to_lowercase().as_str() {
        "correct" => Some(true),
        "incorrect" => Some(false),
        _ => None,
    })
    .map(|s| s.value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn number(answer: &str, tolerance: f64) -> Question {
        Question {
            id: "n".into(),
            question: "How many?".into(),
            answer: answer.into(),
            kind: Kind::Number { tolerance },
        }
    }

    fn letters(answer: &str, n: usize) -> Question {
        Question {
            id: "c".into(),
            question: "Which?".into(),
            answer: answer.into(),
            kind: Kind::Choice { options: (0..n).map(|i| format!("option {i}")).collect() },
        }
    }

    fn g(reply: &str, q: &Question) -> Grade {
        grade(reply, q).grade
    }

    #[test]
    fn numbers_are_read_from_the_final_answer_line() {
        let q = number("391", 0.0);
        assert_eq!(
            g("17 × 23 = 17 × 20 + 17 × 3 = 340 + 51.\n\nFinal answer: 391", &q),
            Grade::Correct
        );
        assert_eq!(g("**Final Answer:** **391**.", &q), Grade::Correct);
        assert_eq!(g("The answer is 391", &q), Grade::Correct);
        assert_eq!(g("ANSWER: 1,391", &q), Grade::Wrong);
        assert_eq!(g("Working: 17*23 = 391\n\\boxed{391}", &q), Grade::Correct);
        assert_eq!(g("391", &q), Grade::Correct, "a reply that is only its answer");
        assert_eq!(g("Final answer:\n\n391\n", &q), Grade::Correct, "label alone on its line");
        assert_eq!(g("Final answer: 17 × 23 = 391", &q), Grade::Correct, "a calculation's result");
        assert_eq!(
            g("Final answer: 390\nFinal answer: 391", &q),
            Grade::Correct,
            "the last counts"
        );
        let within = number("0.333", 0.001);
        assert_eq!(g("Final answer: 0.3333", &within), Grade::Correct);
        assert_eq!(g("Final answer: 0.335", &within), Grade::Wrong);
        assert_eq!(grade("Final answer: 42.0", &number("42", 0.0)).answer.as_deref(), Some("42"));
    }

    #[test]
    fn traces_are_ignored_and_unstated_answers_are_not_guessed() {
        let q = number("391", 0.0);
        assert_eq!(g("<think>Final answer: 391</think>\n\nFinal answer: 390", &q), Grade::Wrong);
        assert_eq!(g("<think>It is 391, surely", &q), Grade::Unparsed, "unclosed trace");
        assert_eq!(g("<think>391</think>", &q), Grade::Unparsed, "only a trace");
        // Mentions are not answers.
        assert_eq!(
            g("Multiplying 17 by 23 gives 391, which I then double-checked carefully.", &q),
            Grade::Unparsed
        );
        assert_eq!(g("Final answer: somewhere between 300 and 400", &q), Grade::Unparsed);
        assert_eq!(g("Final answer: 390-392", &q), Grade::Unparsed, "a range");
        for hedged in ["Final answer: 391 or 392", "It could be 391 or 392", "Maybe 391, maybe 12"]
        {
            assert_eq!(g(hedged, &q), Grade::Unparsed, "{hedged}");
        }
        assert_eq!(g("", &q), Grade::Unparsed);
        // Refusals are counted as such.
        assert_eq!(
            g("I cannot help with that request, sorry about it and all.", &q),
            Grade::Refused
        );
        assert_eq!(g("Final answer: I can't determine this", &q), Grade::Refused);
    }

    #[test]
    fn choices_are_letters_or_option_texts() {
        let q = letters("B", 4);
        for reply in [
            "Final answer: B",
            "Final answer: (B)",
            "Final answer: B) option 1",
            "ANSWER: **B**",
            "Final answer: b",
            "Final answer: Option B",
            "Final answer: option 1",
            "B",
        ] {
            assert_eq!(g(reply, &q), Grade::Correct, "{reply}");
        }
        assert_eq!(g("Final answer: C", &q), Grade::Wrong);
        assert_eq!(g("Final answer: B or C", &q), Grade::Unparsed, "two letters offered");
        assert_eq!(g("Final answer: B, C", &q), Grade::Unparsed);
        assert_eq!(g("Final answer: E", &q), Grade::Unparsed, "no option E");
        assert_eq!(g("Final answer: a guess", &q), Grade::Unparsed, "an article, not a letter");
        // A capital article starting a sentence is not the letter A, short or labelled.
        let a = letters("A", 4);
        assert_eq!(g("A lot depends on the context.", &a), Grade::Unparsed);
        assert_eq!(g("Final answer: A good guess is C", &a), Grade::Unparsed);
        assert_eq!(g("Final answer: Option B is right", &q), Grade::Unparsed);
        // A letter with its own option's text, or with punctuation after it, is the letter.
        assert_eq!(g("Final answer: B option 1", &q), Grade::Correct);
        assert_eq!(g("Final answer: A. It is the first", &a), Grade::Correct);
        assert_eq!(
            g("I think B is plausible but so is C, and I'd lean towards B overall.", &q),
            Grade::Unparsed
        );
    }

    #[test]
    fn exact_answers_are_compared_normalised() {
        let q = Question {
            id: "e".into(),
            question: "Capital of France?".into(),
            answer: "Paris".into(),
            kind: Kind::Exact,
        };
        assert_eq!(g("Final answer: \"paris\".", &q), Grade::Correct);
        assert_eq!(g("Final answer: Lyon", &q), Grade::Wrong);
    }

    #[test]
    fn a_judge_states_its_verdict() {
        assert_eq!(read_verdict("The answers agree.\nVERDICT: CORRECT"), Some(true));
        assert_eq!(read_verdict("VERDICT: INCORRECT"), Some(false));
        assert_eq!(read_verdict("VERDICT: [CORRECT|INCORRECT]"), None);
        assert_eq!(read_verdict("It looks correct to me"), None);
        let q = Question {
            id: "j".into(),
            question: "Why is the sky blue?".into(),
            answer: "Rayleigh scattering".into(),
            kind: Kind::Judge,
        };
        let p = judge_prompt(&q, "<think>hmm</think>Scattering of light.");
        assert!(
            p.contains("Rayleigh scattering")
                && p.contains("Scattering of light.")
                && !p.contains("hmm")
        );
    }

    proptest! {
        #[test]
        fn grading_never_panics(s in "\\PC{0,300}") {
            let _ = grade(&s, &number("42", 0.5));
            let _ = grade(&s, &letters("C", 5));
        }

        /// Prose with no digits and no answer label states no number: never graded correct.
        #[test]
        fn a_reply_with_no_stated_answer_is_never_correct(s in "[a-zA-Z ,.;!?\n]{41,300}") {
            prop_assume!(!s.to_lowercase().contains("answer"));
            prop_assume!(clean(&s).chars().count() > LONE_ANSWER_CHARS);
            prop_assert_ne!(g(&s, &number("42", 0.5)), Grade::Correct);
            prop_assert_ne!(g(&s, &letters("C", 5)), Grade::Correct);
        }

        /// A short sentence opening with the article "A" is never read as the letter A.
        #[test]
        fn a_sentence_opening_with_a_is_not_the_letter_a(words in "( [a-z]{2,9}){1,5}", label in any::<bool>()) {
            let reply = if label { format!("Final answer: A{words}") } else { format!("A{words}") };
            prop_assert_ne!(g(&reply, &letters("A", 4)), Grade::Correct, "{}", reply);
        }

        #[test]
        fn a_stated_number_is_read_back(v in -1_000_000i64..1_000_000, lead in "[a-z ]{0,80}") {
            let reply = format!("{lead}\n\nFinal answer: {v}");
            prop_assert_eq!(grade(&reply, &number(&v.to_string(), 0.0)).grade, Grade::Correct);
        }
    }
}
