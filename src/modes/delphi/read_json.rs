//! Structured replies: the reply schemas for the classification, estimates and answers, and
//! reading a reply from its JSON (else from its text).

use super::*;

// ---- structured replies ---------------------------------------------------------------------
//
// A model whose route takes structured output is asked for JSON instead of the seed's text
// format: the classification as `delphi_classify`, a numeric round's estimate as
// `delphi_estimate`, a qualitative round's answer as `delphi_answer` (its options as an enum
// when there are options). Each opens with the model's reasoning, so it reasons before it
// commits. A reply is read from its JSON when that fits the schema and states what a text
// reply would have to (a free-form answer that does not decline, say); else by the text
// readers above, which read what a model that ignored the schema wrote.

/// The classification's schema name.
pub const CLASSIFY_SCHEMA: &str = "delphi_classify";
/// A numeric round's schema name.
pub const ESTIMATE_SCHEMA: &str = "delphi_estimate";
/// A qualitative round's schema name.
pub const ANSWER_SCHEMA: &str = "delphi_answer";
/// The question types as the classification states them.
pub const TYPE_WORDS: [&str; 2] = ["NUMERIC", "QUALITATIVE"];
/// The confidence levels as a reply states them.
pub const LEVELS: [&str; 3] = ["LOW", "MEDIUM", "HIGH"];
/// The longest option a classification may suggest: a few words, as the seed's examples.
pub const OPTION_MAX_CHARS: usize = 120;
/// The longest free-form answer: what the text reader keeps of one.
pub const FREE_ANSWER_MAX_CHARS: usize = 120;

/// [`schema::reasoned`] with the reasoning described as the seed asks for it in this prompt.
fn reasoned_as<'a>(why: &str, fields: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    let mut v = schema::reasoned(fields);
    v["properties"][schema::REASONING]["description"] = why.into();
    v
}

/// The classification's schema: the reasoning, the type, and the options (none for a
/// numeric question).
pub fn classify_schema() -> Arc<ReplySchema> {
    ReplySchema::new(
        CLASSIFY_SCHEMA,
        reasoned_as(
            "one sentence explaining your classification",
            [
                (
                    "type",
                    schema::described(
                        schema::one_of(&TYPE_WORDS),
                        "NUMERIC if the question expects a number, quantity, estimate, \
                         percentage, date or measurable value; QUALITATIVE if it expects a \
                         category, recommendation, choice or opinion",
                    ),
                ),
                (
                    "options",
                    schema::described(
                        schema::list(schema::text(OPTION_MAX_CHARS), 0, 6),
                        "if QUALITATIVE, 3 to 6 answer options that cover the reasonable \
                         range of responses; an empty list if NUMERIC",
                    ),
                ),
            ],
        ),
    )
}

/// How a round's reasoning is described: round 1 asks for the reasoning, later rounds for why
/// the panelist revised or held its position.
fn round_reasoning(round: u32, of: &str) -> String {
    if round <= 1 {
        "your reasoning (2-4 sentences)".to_string()
    } else {
        format!("why you revised or maintained your position: reference the {of}")
    }
}

fn confidence_field() -> Value {
    schema::described(schema::one_of(&LEVELS), "your confidence level")
}

/// A numeric round's schema: the reasoning, the estimate (a JSON number in the question's own
/// unit) and the confidence.
pub fn estimate_schema(round: u32) -> Arc<ReplySchema> {
    ReplySchema::new(
        ESTIMATE_SCHEMA,
        reasoned_as(
            &round_reasoning(round, "aggregates"),
            [
                (
                    "estimate",
                    schema::described(
                        schema::any_number(),
                        "your numeric estimate: one number in the question's own unit, \
                         written out (42000000, not \"42 million\")",
                    ),
                ),
                ("confidence", confidence_field()),
            ],
        ),
    )
}

/// A qualitative round's schema: the reasoning, the answer (one of the options exactly, or a
/// few words when the question has none) and the confidence.
pub fn answer_schema(options: &[String], round: u32) -> Arc<ReplySchema> {
    let answer = if options.is_empty() {
        schema::described(
            schema::text(FREE_ANSWER_MAX_CHARS),
            "your answer or recommendation, in a few words",
        )
    } else {
        schema::described(schema::one_of(options), "your answer: one of the options, exactly")
    };
    ReplySchema::new(
        ANSWER_SCHEMA,
        reasoned_as(
            &round_reasoning(round, "distribution"),
            [("answer", answer), ("confidence", confidence_field())],
        ),
    )
}

/// The first line of a JSON reply's reasoning, as the text reader keeps a classification's.
fn json_reasoning(v: &Value) -> String {
    v[schema::REASONING].as_str().unwrap_or("").trim().to_string()
}

/// The classification a reply states, and where it was read from: its JSON when that fits
/// `schema`, else its text ([`parse_classification`]). None when neither states one.
pub fn read_classification(text: &str, schema: &ReplySchema) -> Option<(Classification, ReadFrom)> {
    let from_json = |v: &Value| {
        let kind = match v["type"].as_str()? {
            "NUMERIC" => QuestionType::Numeric,
            "QUALITATIVE" => QuestionType::Qualitative,
            _ => return None,
        };
        let options = match kind {
            QuestionType::Numeric => None,
            QuestionType::Qualitative => tidy_options(
                v["options"]
                    .as_array()?
                    .iter()
                    .filter_map(|o| o.as_str().map(str::to_string))
                    .collect(),
            ),
        };
        let reasoning = json_reasoning(v).lines().next().unwrap_or("").trim().to_string();
        Some(Some(Classification {
            kind,
            options,
            reasoning,
            fallback_from: None,
            unparsed: None,
            read_from: None,
        }))
    };
    let (c, from) = schema.read_reply(text, from_json, parse_classification, Option::is_some);
    let (mut c, from) = (c?, from?);
    c.read_from = Some(from);
    Some((c, from))
}

/// What a panelist's reply states.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// [`EstimateValue::Unreadable`] when the reply states no answer.
    pub value: EstimateValue,
    pub confidence: Confidence,
    /// False when no one level was stated (MEDIUM is used).
    pub confidence_stated: bool,
    pub reasoning: String,
    /// Where the answer was read from, when one was.
    pub read_from: Option<ReadFrom>,
}

/// A panelist's reply read from its JSON when that fits `schema` (no answer when its fields
/// hold no usable one), else from its text: an estimate for a numeric question, an answer
/// among `options` (or a free-form one when there are none) for a qualitative one.
pub fn read_panelist(
    text: &str,
    kind: QuestionType,
    options: &[String],
    schema: &ReplySchema,
) -> Reading {
    if let Some(v) = schema.read(text) {
        // A reply that fits its schema states its answer in its fields; when they hold no
        // usable one it has none (its reasoning may name an answer in passing, and the text
        // readers would read the JSON's own punctuation).
        return panelist_json(&v, kind, options).unwrap_or_else(|| {
            let (confidence, confidence_stated) = match json_confidence(&v) {
                Some(c) => (c, true),
                None => (Confidence::Medium, false),
            };
            let reasoning = json_reasoning(&v);
            let value = EstimateValue::Unreadable;
            Reading { value, confidence, confidence_stated, reasoning, read_from: None }
        });
    }
    let (confidence, confidence_stated) = parse_confidence(text);
    let mut reasoning = parse_reasoning(text);
    let value = match kind {
        QuestionType::Numeric => match parse_estimate(text) {
            Some((v, note)) => {
                if let Some(n) = note {
                    reasoning = if reasoning.is_empty() {
                        format!("({n})")
                    } else {
                        format!("{reasoning} ({n})")
                    };
                }
                EstimateValue::Number(v)
            }
            None => EstimateValue::Unreadable,
        },
        QuestionType::Qualitative => match parse_answer(text, options) {
            Some(a) => EstimateValue::Answer(a),
            None => EstimateValue::Unreadable,
        },
    };
    let read_from = (!matches!(value, EstimateValue::Unreadable)).then_some(ReadFrom::Text);
    Reading { value, confidence, confidence_stated, reasoning, read_from }
}

/// The confidence a reply's JSON states.
fn json_confidence(v: &Value) -> Option<Confidence> {
    match v.get("confidence")?.as_str()? {
        "LOW" => Some(Confidence::Low),
        "MEDIUM" => Some(Confidence::Medium),
        "HIGH" => Some(Confidence::High),
        _ => None,
    }
}

fn panelist_json(v: &Value, kind: QuestionType, options: &[String]) -> Option<Reading> {
    let value = match kind {
        QuestionType::Numeric => {
            EstimateValue::Number(v.get("estimate")?.as_f64().filter(|x| x.is_finite())?)
        }
        // The schema holds the options as an enum; a free answer is checked as in text.
        QuestionType::Qualitative if options.is_empty() => {
            EstimateValue::Answer(free_answer(v.get("answer")?.as_str()?)?)
        }
        QuestionType::Qualitative => {
            let a = v.get("answer")?.as_str()?;
            EstimateValue::Answer(options.iter().find(|o| o.as_str() == a)?.clone())
        }
    };
    Some(Reading {
        value,
        confidence: json_confidence(v)?,
        confidence_stated: true,
        reasoning: json_reasoning(v),
        read_from: Some(ReadFrom::Json),
    })
}
