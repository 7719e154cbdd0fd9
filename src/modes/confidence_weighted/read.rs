//! Reading the replies: the answer's reply schema, the `RESPONSE:`/`CONFIDENCE:` markers, the
//! stated confidence and the synthesis with its calibration notes.

use super::*;

/// The answer's schema name.
pub const ANSWER_SCHEMA: &str = "confidence_weighted_answer";
/// The longest answer a JSON reply may give: a full answer, bounded so a small model looping
/// inside it still closes its JSON within its output cap.
pub const RESPONSE_MAX_CHARS: usize = 4000;
/// The longest confidence reasoning (the prompt asks for one or two sentences).
pub const CONFIDENCE_REASONING_MAX_CHARS: usize = 400;

/// The answer's reply schema: the model's reasoning, its answer, its confidence (0 to 1) and
/// what it knows for sure and what not. The same for every run, built once per run.
pub fn answer_schema() -> Arc<ReplySchema> {
    ReplySchema::new(
        ANSWER_SCHEMA,
        schema::reasoned([
            (
                "response",
                schema::described(
                    schema::filled_text(RESPONSE_MAX_CHARS),
                    "your answer to the question, in full",
                ),
            ),
            (
                "confidence",
                schema::described(
                    schema::number(0.0, 1.0),
                    "how confident you are in your answer: 0.0 means a guess, 1.0 means certain",
                ),
            ),
            (
                "confidence_reasoning",
                schema::described(
                    schema::text(CONFIDENCE_REASONING_MAX_CHARS),
                    "one or two sentences: what you know for sure and what you are unsure of",
                ),
            ),
        ]),
    )
}

// ---- reading replies -----------------------------------------------------------------------

/// The rest of a line after a marker `name:` (case ignored; leading whitespace, bullets, `#`,
/// `**` and `__` ignored around it), or None when the line is not that marker.
pub fn marker_rest<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let mut s = line.trim_start();
    loop {
        let t = s.trim_start_matches(['#', '-', '*', '+', '•', '>', '_']).trim_start();
        if t.len() == s.len() {
            break;
        }
        s = t;
    }
    let head = s.get(..name.len())?;
    if !head.eq_ignore_ascii_case(name) {
        return None;
    }
    let rest = s[name.len()..].trim_start_matches(['*', '_']).trim_start();
    let rest = rest.strip_prefix(':')?;
    Some(rest.trim_start_matches(['*', '_']).trim())
}

const RESPONSE: &str = "RESPONSE";
const CONFIDENCE: &str = "CONFIDENCE";
const REASONING: [&str; 2] = ["CONFIDENCE_REASONING", "CONFIDENCE REASONING"];
const SYNTHESIS: &str = "SYNTHESIS";
const NOTES: [&str; 2] = ["CONFIDENCE CALIBRATION NOTES", "CALIBRATION NOTES"];

fn is_reasoning(line: &str) -> Option<&str> {
    REASONING.iter().find_map(|n| marker_rest(line, n))
}

fn notes_rest(line: &str) -> Option<&str> {
    NOTES.iter().find_map(|n| marker_rest(line, n))
}

fn is_confidence(line: &str) -> Option<&str> {
    marker_rest(line, CONFIDENCE)
}

/// What a reply states of its confidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confidence {
    /// 0-1; [`DEFAULT_CONFIDENCE`] when none was stated.
    pub value: f64,
    pub parsed_successfully: bool,
    /// The stated number was outside 0-1 on its scale and was clamped.
    pub clamped: bool,
}

/// A number and the suffix that gives its scale, read from the start of a confidence line.
fn number_re() -> &'static Regex {
    regex!(
        r"(?i)(-\s*)?([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*(%|percent\b|/\s*([0-9]+(?:\.[0-9]+)?)|out\s+of\s+([0-9]+(?:\.[0-9]+)?))?"
    )
}

/// A confidence from the rest of a `CONFIDENCE:` line: its first number with its suffix.
pub fn read_confidence_value(rest: &str) -> Option<(f64, bool)> {
    // An echoed placeholder (`<a number from 0.0 to 1.0>`) or a range (`0.6-0.8`) states none.
    if crate::modes::reading::no_single_value(rest) {
        return None;
    }
    let c = number_re().captures(rest)?;
    let n: f64 = c[2].parse().ok()?;
    let n = if c.get(1).is_some() { -n } else { n };
    let denominator = c.get(4).or(c.get(5)).and_then(|d| d.as_str().parse::<f64>().ok());
    let x = match (c.get(3), denominator) {
        (Some(_), Some(d)) if d > 0.0 => n / d,
        // `N/0`: no scale stated.
        (Some(s), None)
            if s.as_str().starts_with('%') || s.as_str().eq_ignore_ascii_case("percent") =>
        {
            n / 100.0
        }
        (Some(_), _) => return None,
        (None, _) => {
            if (0.0..=1.0).contains(&n) {
                n
            } else if n > 1.0 && n <= 10.0 {
                n / 10.0
            } else if n > 10.0 && n <= 100.0 {
                n / 100.0
            } else if n > 100.0 {
                // No scale makes a bare number over 100 a confidence ("CONFIDENCE: as of 2024,
                // high"): clamped, it would weigh as certainty. Not stated.
                return None;
            } else {
                n
            }
        }
    };
    if !x.is_finite() {
        return None;
    }
    if (0.0..=1.0).contains(&x) {
        Some((x, false))
    } else {
        Some((x.clamp(0.0, 1.0), true))
    }
}

/// The confidence a reply states: its last `CONFIDENCE:` line's first number.
pub fn parse_confidence(text: &str) -> Confidence {
    let line = text.lines().rev().find_map(is_confidence);
    match line.and_then(read_confidence_value) {
        Some((value, clamped)) => Confidence { value, parsed_successfully: true, clamped },
        None => {
            Confidence { value: DEFAULT_CONFIDENCE, parsed_successfully: false, clamped: false }
        }
    }
}

fn is_answer_marker(line: &str) -> bool {
    marker_rest(line, RESPONSE).is_some()
        || is_confidence(line).is_some()
        || is_reasoning(line).is_some()
}

/// The reasoning of a reply: its last `CONFIDENCE_REASONING:` line and the non-empty lines
/// after it, up to a blank line or another marker; "" when there is none.
pub fn parse_reasoning(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = lines.iter().rposition(|l| is_reasoning(l).is_some()) else {
        return String::new();
    };
    let mut out = vec![is_reasoning(lines[at]).unwrap_or("").to_string()];
    for l in &lines[at + 1..] {
        if l.trim().is_empty() || is_answer_marker(l) {
            break;
        }
        out.push(l.trim().to_string());
    }
    out.iter().filter(|s| !s.is_empty()).cloned().collect::<Vec<_>>().join("\n")
}

/// The answer of a reply: after the first `RESPONSE:` marker up to the confidence block; with
/// no `RESPONSE:`, the text before that block; with no confidence line, the whole reply.
pub fn parse_response(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let block = |from: usize| {
        lines[from..]
            .iter()
            .position(|l| is_confidence(l).is_some() || is_reasoning(l).is_some())
            .map(|p| p + from)
    };
    let start = lines.iter().position(|l| marker_rest(l, RESPONSE).is_some());
    let (first, from) = match start {
        Some(i) => (marker_rest(lines[i], RESPONSE).unwrap_or("").to_string(), i + 1),
        None => (String::new(), 0),
    };
    // `RESPONSE: CONFIDENCE: 0.9` on one line: the block starts at once.
    if is_confidence(&first).is_some() || is_reasoning(&first).is_some() {
        return String::new();
    }
    let end = block(from).unwrap_or(lines.len());
    let mut body = vec![first];
    body.extend(lines[from..end].iter().map(|l| l.to_string()));
    body.join("\n").trim().to_string()
}

/// A synthesis reply: the synthesis and the calibration notes.
pub fn parse_synthesis(text: &str) -> (String, String) {
    let lines: Vec<&str> = text.lines().collect();
    let notes_at = lines.iter().rposition(|l| notes_rest(l).is_some());
    let end = notes_at.unwrap_or(lines.len());
    let notes = match notes_at {
        Some(i) => {
            let mut v = vec![notes_rest(lines[i]).unwrap_or("").to_string()];
            v.extend(lines[i + 1..].iter().map(|l| l.to_string()));
            v.join("\n").trim().to_string()
        }
        None => String::new(),
    };
    let synth = match lines[..end].iter().position(|l| marker_rest(l, SYNTHESIS).is_some()) {
        Some(i) => {
            let mut v = vec![marker_rest(lines[i], SYNTHESIS).unwrap_or("").to_string()];
            v.extend(lines[i + 1..end].iter().map(|l| l.to_string()));
            v.join("\n")
        }
        None => lines[..end].join("\n"),
    };
    (synth.trim().to_string(), notes)
}

/// `answer_complete`'s data, and an answer of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerData {
    /// The answer's place in the request's model list (from 0).
    pub index: usize,
    /// The model that answered.
    pub model: String,
    /// The answer's text (its confidence lines read off).
    #[serde(default)]
    pub response: String,
    /// The confidence it stated, 0 to 1 (the default when it stated none).
    pub confidence: f64,
    /// What it said of its confidence.
    pub confidence_reasoning: String,
    /// A confidence was stated and read.
    pub parsed_successfully: bool,
    /// The stated confidence was outside the scale and held to it.
    pub clamped: bool,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
    /// Where the confidence was read from (`json` or `text`), when one was stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A reply read as an answer: from its JSON when it fits `schema` (the answer, the confidence
/// and its reasoning as the fields state them), else by its text ([`read_answer`]).
pub fn read_answer_reply(
    index: usize,
    model: &str,
    reply: &str,
    ms: i64,
    schema: &ReplySchema,
) -> AnswerData {
    let from_json = |v: &Value| {
        let confidence = v.get("confidence")?.as_f64().filter(|c| (0.0..=1.0).contains(c))?;
        let field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").trim().to_string();
        Some(AnswerData {
            index,
            model: model.to_string(),
            response: field("response"),
            confidence,
            confidence_reasoning: field("confidence_reasoning"),
            parsed_successfully: true,
            clamped: false,
            response_time_ms: ms,
            read_from: None,
        })
    };
    let read = |t: &str| read_answer(index, model, t, ms);
    let (mut answer, from) = schema.read_reply(reply, from_json, read, |a| a.parsed_successfully);
    answer.read_from = from;
    answer
}

/// A reply read as an answer by its text.
pub fn read_answer(index: usize, model: &str, reply: &str, ms: i64) -> AnswerData {
    let text = answer_text(reply);
    let c = parse_confidence(&text);
    AnswerData {
        index,
        model: model.to_string(),
        response: parse_response(&text),
        confidence: c.value,
        confidence_reasoning: parse_reasoning(&text),
        parsed_successfully: c.parsed_successfully,
        clamped: c.clamped,
        response_time_ms: ms,
        read_from: None,
    }
}
