//! Question sets: JSON lines of `{id, question, answer, kind}` (see the README's "Is the panel
//! worth it?"). Parsing only: nothing here grades or runs anything.
//!
//! A line that does not fit is an error naming its line number and field, never skipped: an
//! eval over a silently shortened set would report figures for questions nobody chose.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::modes::request::MAX_QUESTION_CHARS;

/// How an answer is graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Kind {
    /// A letter among the options (`A`…): the answer is the letter.
    Choice {
        /// The options' texts, in letter order, when the set gives them; an answer may then
        /// also be the option's text.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        options: Vec<String>,
    },
    /// A number, right within `tolerance` (absolute; 0 by default, so `42.0` is `42`).
    Number {
        #[serde(default)]
        tolerance: f64,
    },
    /// A string, right when it equals the answer once both are normalised (case, spaces,
    /// surrounding punctuation).
    Exact,
    /// A judge model grades the reply against the answer as a reference (see
    /// [`super::grade::judge_prompt`]).
    Judge,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Choice { .. } => "choice",
            Kind::Number { .. } => "number",
            Kind::Exact => "exact",
            Kind::Judge => "judge",
        }
    }
}

/// One graded question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    /// The reference answer, as text (`"42"`, `"B"`).
    pub answer: String,
    #[serde(flatten)]
    pub kind: Kind,
}

/// Why a set could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("the question set is empty")]
    Empty,
}

fn line_error(line: usize, message: impl Into<String>) -> SetError {
    SetError::Line { line, message: message.into() }
}

/// The most letters a choice question may have.
pub const MAX_OPTIONS: usize = 26;
/// The most questions a set may hold (an eval runs each through every arm).
pub const MAX_QUESTIONS: usize = 10_000;
/// The longest line of a question set file (a question, its options and answer in JSON).
pub const MAX_LINE_BYTES: u64 = 256 * 1024;
/// The largest question set file read.
pub const MAX_SET_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Whether a line of a set is a question (blank lines and `//` comments are not).
pub fn is_question(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with("//")
}

/// Reads a question set. Blank lines and lines starting with `//` are skipped; every other
/// line is one question.
/// The first `n` questions of a set's text (whole questions, counted as [`parse_set`] counts
/// them: blank lines and `//` comments are none).
pub fn first_questions(text: &str, n: usize) -> String {
    text.lines().filter(|l| is_question(l)).take(n).collect::<Vec<_>>().join("\n")
}

pub fn parse_set(text: &str) -> Result<Vec<Question>, SetError> {
    let mut out: Vec<Question> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let raw = raw.trim();
        if !is_question(raw) {
            continue;
        }
        if out.len() == MAX_QUESTIONS {
            return Err(line_error(line, format!("more than {MAX_QUESTIONS} questions")));
        }
        let q = parse_line(raw).map_err(|m| line_error(line, m))?;
        if !ids.insert(q.id.clone()) {
            return Err(line_error(line, format!("id {:?} is used twice", q.id)));
        }
        let asked = prompt(&q).chars().count();
        if asked > MAX_QUESTION_CHARS {
            return Err(line_error(
                line,
                format!(
                    "question {:?} is {asked} characters with its options and instructions; \
                     at most {MAX_QUESTION_CHARS}",
                    q.id
                ),
            ));
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(SetError::Empty);
    }
    Ok(out)
}

fn text_field(obj: &serde_json::Map<String, Value>, field: &str) -> Result<String, String> {
    match obj.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        // A number's answer may be written as a JSON number; an id too.
        Some(Value::Number(n)) if field != "question" => Ok(n.to_string()),
        Some(Value::String(_)) => Err(format!("{field} is empty")),
        Some(_) => Err(format!("{field} must be a string")),
        None => Err(format!("{field} is missing")),
    }
}

fn parse_line(raw: &str) -> Result<Question, String> {
    let value: Value = serde_json::from_str(raw).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(obj) = value else { return Err("must be a JSON object".into()) };
    let id = text_field(&obj, "id")?;
    let question = text_field(&obj, "question")?;
    let answer = text_field(&obj, "answer")?;
    let kind = match obj.get("kind").and_then(Value::as_str) {
        Some("choice") => {
            let options = match obj.get("options") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|o| o.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("options must be strings")?,
                Some(_) => return Err("options must be an array of strings".into()),
            };
            if options.len() > MAX_OPTIONS {
                return Err(format!("options: at most {MAX_OPTIONS}"));
            }
            let letter = choice_letter(&answer).ok_or("answer must be one letter (A-Z)")?;
            if !options.is_empty() && usize::from(letter - b'A') >= options.len() {
                return Err(format!("answer {answer} is not one of the {} options", options.len()));
            }
            return Ok(Question {
                id,
                question,
                answer: char::from(letter).to_string(),
                kind: Kind::Choice { options },
            });
        }
        Some("number") => {
            let tolerance = match obj.get("tolerance") {
                None | Some(Value::Null) => 0.0,
                Some(v) => v
                    .as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or("tolerance must be a number ≥ 0")?,
            };
            if crate::modes::numbers::read_number(&answer).is_none() {
                return Err(format!("answer {answer:?} is not a number"));
            }
            Kind::Number { tolerance }
        }
        Some("exact") => Kind::Exact,
        Some("judge") => Kind::Judge,
        Some(other) => {
            return Err(format!("kind {other:?} is not one of choice, number, exact, judge"))
        }
        None => return Err("kind is missing (choice, number, exact or judge)".into()),
    };
    Ok(Question { id, question, answer, kind })
}

/// `B`, `b`, `(B)`: the capital letter a choice answer names.
fn choice_letter(answer: &str) -> Option<u8> {
    let t = answer.trim().trim_matches(|c| c == '(' || c == ')');
    match t.as_bytes() {
        [b] if b.is_ascii_alphabetic() => Some(b.to_ascii_uppercase()),
        _ => None,
    }
}

/// The prompt a model is asked for a question: the question, its options, and how to state the
/// answer (a `Final answer:` line, which the graders read first). The answer is never in it.
pub fn prompt(q: &Question) -> String {
    let mut s = q.question.clone();
    match &q.kind {
        Kind::Choice { options } if !options.is_empty() => {
            s.push_str("\n\n");
            for (i, o) in options.iter().enumerate() {
                s.push_str(&format!("{}) {o}\n", char::from(b'A' + i as u8)));
            }
            s.push_str(
                "\nEnd your reply with a line \"Final answer: X\", X the letter of your choice.",
            );
        }
        Kind::Choice { .. } => {
            s.push_str(
                "\n\nEnd your reply with a line \"Final answer: X\", X the letter of your choice.",
            );
        }
        Kind::Number { .. } => {
            s.push_str("\n\nEnd your reply with a line \"Final answer: N\", N the number alone.");
        }
        Kind::Exact | Kind::Judge => {
            s.push_str("\n\nEnd your reply with a line \"Final answer: …\" stating your answer.");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_each_kind_and_names_the_line_of_a_bad_one() {
        let set = parse_set(
            r#"{"id":"a","question":"2+2?","answer":"4","kind":"number"}

// a comment
{"id":"b","question":"Pick","answer":"b","kind":"choice","options":["x","y"]}
{"id":3,"question":"Capital of France?","answer":"Paris","kind":"exact"}
{"id":"d","question":"About 1/3?","answer":0.333,"kind":"number","tolerance":0.001}"#,
        )
        .unwrap();
        assert_eq!(set.len(), 4);
        assert_eq!(set[1].answer, "B");
        assert_eq!(set[1].kind, Kind::Choice { options: vec!["x".into(), "y".into()] });
        assert_eq!(set[2].id, "3");
        assert_eq!(set[3].kind, Kind::Number { tolerance: 0.001 });
        let bad = |text: &str| parse_set(text).unwrap_err().to_string();
        assert_eq!(
            bad("{\"id\":\"a\",\"question\":\"q\",\"answer\":\"4\",\"kind\":\"number\"}\n{"),
            format!("line 2: not JSON: {}", serde_json::from_str::<Value>("{").unwrap_err())
        );
        let line = r#"{"id":"a","question":"q","answer":"C","kind":"choice","options":["x","y"]}"#;
        assert_eq!(bad(line), "line 1: answer C is not one of the 2 options");
        assert!(bad(r#"{"id":"a","question":"q","answer":"x","kind":"number"}"#)
            .contains("not a number"));
        assert!(bad(r#"{"id":"a","question":"q","answer":"1","kind":"essay"}"#)
            .contains("kind \"essay\""));
        assert!(bad(r#"{"id":"a","question":"","answer":"1","kind":"exact"}"#)
            .contains("question is empty"));
        let twice = r#"{"id":"a","question":"q","answer":"1","kind":"exact"}"#;
        assert_eq!(bad(&format!("{twice}\n{twice}")), "line 2: id \"a\" is used twice");
        assert_eq!(parse_set("\n\n").unwrap_err(), SetError::Empty);
    }

    #[test]
    fn the_prompt_lists_options_and_never_holds_the_answer() {
        let q = Question {
            id: "x".into(),
            question: "Which is largest?".into(),
            answer: "C".into(),
            kind: Kind::Choice { options: vec!["1".into(), "2".into(), "3".into()] },
        };
        let p = prompt(&q);
        assert!(p.contains("A) 1\nB) 2\nC) 3") && p.contains("Final answer: X"));
        let q = Question {
            id: "y".into(),
            question: "17 × 23?".into(),
            answer: "391".into(),
            kind: Kind::Number { tolerance: 0.0 },
        };
        assert!(!prompt(&q).contains("391"));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_errs_without_panicking(s in "\\PC{0,200}") {
            let _ = parse_set(&s);
        }
    }
}
