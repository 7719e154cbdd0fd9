//! Confidence-Weighted mode (specs/12-confidence-weighted.md): every model answers and rates
//! its own confidence; the server turns the stated confidences into softmax weights; one
//! synthesizer writes an answer that favours the heavier answers and notes how well each
//! model's confidence seems calibrated. Multi-turn: a follow-up carries the last 10 turns
//! into both prompts, and the earlier answers are the syntheses.
//!
//! Decisions where the spec is silent:
//! - A reply with no answer text once its markers are read (only a confidence line, say) is a
//!   failed call ("no answer in the reply"), like an empty one; so is a synthesis reply with no
//!   synthesis text (the backup is then tried).
//! - A fraction with another denominator (`4/5`, `8 out of 10`) is read as the fraction it
//!   states; the bare-number rules apply only to a number with no suffix.
//! - The title call goes to the synthesis model at the start.
//! - Each answer is stored the moment it arrives, the weights when every answer is in, so a
//!   cancelled or interrupted run keeps what finished.
//! - Structured replies: a respondent whose route takes structured output is asked for
//!   `confidence_weighted_answer` (its reasoning, answer, confidence from 0 to 1 and what it is
//!   sure of) instead of the `RESPONSE:` format. A JSON confidence has no scale to read, so it
//!   is held to 0-1: one outside it does not fit, and the reply goes to the text reader. The
//!   answer says where its confidence was read from (`readFrom`), none when none was stated.
//!   The synthesis is text a person reads.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, member_names, role_failed, title_prompt, with_history, Calls,
    Routed, SplitMix64, TitleTracker, TITLE_KEY,
};
use super::reading::{answer_text, readable};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::ModelId;
use super::schema::{self, ReadFrom, ReplySchema};
use super::{
    request, CallError, CallErrorKind, CallReply, CallSpec, Defaults, Effect, Fallbacks,
    FieldError, Mode, RunContext, StageRow, ValidRequest,
};

/// History a follow-up carries (as Council).
pub const HISTORY_TURNS: usize = 10;
pub const MIN_MODELS: usize = 2;
pub const MAX_MODELS: usize = 6;
pub const TEMPERATURE_RANGE: std::ops::RangeInclusive<f64> = 0.1..=5.0;
pub const DEFAULT_TEMPERATURE: f64 = 1.0;
pub const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 10_000..=300_000;
/// Confidences above this or below [`OUTLIER_LOW`] are flagged for extra scrutiny.
pub const OUTLIER_HIGH: f64 = 0.95;
pub const OUTLIER_LOW: f64 = 0.1;
/// The confidence of a reply that states none.
pub const DEFAULT_CONFIDENCE: f64 = 0.5;

const SIM_DEFAULTS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_DEFAULTS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];

/// Confidence-Weighted's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfidenceWeightedRequest {
    /// The respondents: 2 to 6 models that each answer and rate their own confidence (a model
    /// listed twice answers twice and gets two weights).
    #[schemars(length(min = 2, max = 6))]
    pub models: Option<Vec<ModelId>>,
    /// Writes the weighted synthesis (default: the first model); it may also answer.
    pub synthesis_model: Option<ModelId>,
    /// Softmax temperature turning confidences into weights: 0.1 is near winner-take-all, 5
    /// near equal weights (default 1.0).
    #[schemars(range(min = 0.1, max = 5.0))]
    pub temperature: Option<f64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

/// The normalised configuration stored with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfidenceWeightedConfig {
    pub models: Vec<String>,
    pub synthesis_model: String,
    pub temperature: f64,
    pub timeout_ms: u64,
    /// The server's backup for the synthesizer (`[fallback] chairman`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthesis_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: ConfidenceWeightedRequest =
        request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let models = request::models(
        cfg.models.as_deref(),
        "modeConfig.models",
        MIN_MODELS..=MAX_MODELS,
        Some("Confidence-Weighted needs at least 2 models"),
        Some("Confidence-Weighted takes at most 6 models"),
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_DEFAULTS } else { &SEED_DEFAULTS }));
    let synthesis_model =
        request::model(cfg.synthesis_model.as_ref(), "modeConfig.synthesisModel")?
            .unwrap_or_else(|| models[0].clone());
    let temperature = match cfg.temperature {
        None => DEFAULT_TEMPERATURE,
        Some(t) if t.is_finite() && TEMPERATURE_RANGE.contains(&t) => t,
        Some(_) => {
            return Err(FieldError::new(
                "modeConfig.temperature",
                "must be a number from 0.1 to 5.0",
            ))
        }
    };
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        TIMEOUT_RANGE_MS,
        defaults.stage_timeout_ms,
    )?;
    let synthesis_fallback_model =
        Fallbacks::for_role(&defaults.fallback.chairman, &synthesis_model);
    let all = request::distinct(&[&models], &[&synthesis_model]);
    let config = ConfidenceWeightedConfig {
        models,
        synthesis_model,
        temperature,
        timeout_ms,
        synthesis_fallback_model,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models: all,
    })
}

/// Confidence-Weighted in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "confidence_weighted",
    label: "Confidence-Weighted",
    description: "Each model answers and rates its own confidence; the server turns the confidences into softmax weights; one model writes a synthesis that favours the heavier answers.",
    multi_turn: true,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role {
            id: "respondent",
            label: "Respondents",
            field: Some("models"),
            panel: true,
            fallback: None,
            sim_default: &SIM_DEFAULTS,
            default: &SEED_DEFAULTS,
        },
        Role {
            id: "synthesizer",
            label: "Synthesizer",
            field: Some("synthesisModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &["sim/alpha"],
            default: &["anthropic/claude-opus-4-6"],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<ConfidenceWeightedRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(ConfidenceWeighted::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let text = r.pointer("/synthesis/synthesis").and_then(Value::as_str)?;
        Some(short(text, 160))
    },
    stages: &[("answers", "the answers"), ("answer", "an answer with its confidence"), ("all_answers", "every answer in"), ("synthesis", "the weighted synthesis")],
    report: Some(report),
    example: || {
        json!({ "mode": "confidence_weighted", "question": "What is caffeine's half-life in adults?",
                "modeConfig": { "models": ["sim/alpha", "sim/beta", "sim/gamma"],
                                "synthesisModel": "sim/alpha", "temperature": 1.0 } })
    },
    sim: Some(sim_answer),
};

// ---- prompts -------------------------------------------------------------------------------

/// Words only the answer prompt holds (the sim recognises it by them).
pub const ANSWER_HEAD: &str = "then rate honestly how confident you are in it.";
/// The synthesis prompt's first words.
pub const SYNTHESIS_HEAD: &str =
    "You are writing one answer from several answers weighted by their authors' confidence.";

pub fn answer_prompt(question: &str) -> String {
    answer_prompt_as(question, None)
}

/// The answer prompt asking for the spec's `RESPONSE:` / `CONFIDENCE:` format, or, given the
/// stage's schema, for its JSON instead (the same instructions otherwise).
pub fn answer_prompt_as(question: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply in exactly this format:\n\nRESPONSE:\n<your answer>\n\nCONFIDENCE: <a \
                 number from 0.0 to 1.0>\nCONFIDENCE_REASONING: <one or two sentences>"
            .to_string(),
    };
    format!(
        "{question}\n\n---\nAnswer the question above, {ANSWER_HEAD} A confidence of 0.0 means a \
         guess and 1.0 means certain. Then say in one or two sentences what you know for sure \
         and what you are unsure of.\n\n{format}"
    )
}

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
                    schema::text(RESPONSE_MAX_CHARS),
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

/// One answer as the synthesis prompt shows it.
pub struct Weighted<'a> {
    pub model: &'a str,
    pub response: &'a str,
    pub weight: &'a Weight,
}

pub fn synthesis_prompt(question: &str, answers: &[Weighted], temperature: f64) -> String {
    let mut p = format!("{SYNTHESIS_HEAD}\n\nQuestion: {question}\n\n");
    p.push_str("The answers, highest weight first:\n\n");
    for a in answers {
        let flag = if a.weight.is_outlier {
            " — OUTLIER confidence: scrutinise this answer more than its weight suggests"
        } else {
            ""
        };
        p.push_str(&format!(
            "--- {} (weight {:.2}%, stated confidence {:.2}){flag} ---\n{}\n\n",
            a.model,
            a.weight.weight_percent,
            a.weight.raw_confidence,
            readable(a.response)
        ));
    }
    p.push_str(&format!("Weight table (softmax of the confidences, temperature {temperature}):\n"));
    for a in answers {
        p.push_str(&format!(
            "- {}: confidence {:.2} → weight {:.2}%{}\n",
            a.model,
            a.weight.raw_confidence,
            a.weight.weight_percent,
            if a.weight.is_outlier { " (outlier)" } else { "" }
        ));
    }
    p.push_str(
        "\nInstructions:\n\
1. Let each answer influence the result in proportion to its weight: an answer at 40% counts about twice one at 20%.\n\
2. A confident answer can still be wrong: check the claims, do not just adopt the heaviest answer.\n\
3. Where a high-weight and a low-weight answer contradict each other, reason out which is right and say why.\n\
4. Flag miscalibration: a model whose stated confidence does not match the quality of its answer.\n\n\
Reply in exactly this format:\n\nSYNTHESIS:\n<the answer to the question>\n\n\
CONFIDENCE CALIBRATION NOTES:\n<a short note per model on how well its confidence matched its answer>",
    );
    p
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
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)(-\s*)?([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*(%|percent\b|/\s*([0-9]+(?:\.[0-9]+)?)|out\s+of\s+([0-9]+(?:\.[0-9]+)?))?",
        )
        .unwrap_or_else(|_| unreachable!())
    })
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

// ---- weights -------------------------------------------------------------------------------

/// One answer's weight (`weights_calculated`'s entries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Weight {
    pub index: usize,
    pub model: String,
    pub raw_confidence: f64,
    pub normalized_weight: f64,
    pub weight_percent: f64,
    pub is_outlier: bool,
}

/// Softmax weights of `(index, model, confidence)` at temperature `t`, heaviest first (ties by
/// index).
pub fn weights(answers: &[(usize, String, f64)], t: f64) -> Vec<Weight> {
    let max = answers.iter().map(|a| a.2).fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = answers.iter().map(|a| ((a.2 - max) / t).exp()).collect();
    let sum: f64 = exps.iter().sum();
    let mut out: Vec<Weight> = answers
        .iter()
        .zip(&exps)
        .map(|((index, model, c), e)| {
            let w = e / sum;
            Weight {
                index: *index,
                model: model.clone(),
                raw_confidence: *c,
                normalized_weight: w,
                weight_percent: (w * 10_000.0).round() / 100.0,
                is_outlier: *c > OUTLIER_HIGH || *c < OUTLIER_LOW,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.normalized_weight.total_cmp(&a.normalized_weight).then(a.index.cmp(&b.index))
    });
    out
}

// ---- the state machine ---------------------------------------------------------------------

/// `answer_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerData {
    pub index: usize,
    pub model: String,
    pub response: String,
    pub confidence: f64,
    pub confidence_reasoning: String,
    pub parsed_successfully: bool,
    pub clamped: bool,
    pub response_time_ms: i64,
    /// Where the confidence was read from (its JSON or its text), when one was stated.
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
    let from_json = schema.read(reply).and_then(|v| {
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
            read_from: Some(ReadFrom::Json),
        })
    });
    from_json.unwrap_or_else(|| {
        let mut a = read_answer(index, model, reply, ms);
        a.read_from = a.parsed_successfully.then_some(ReadFrom::Text);
        a
    })
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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Synthesising,
    Done,
}

pub struct ConfidenceWeighted {
    config: ConfidenceWeightedConfig,
    ctx: RunContext,
    names: Vec<String>,
    phase: Phase,
    /// Answers by index, as they arrive (None: not yet, or failed).
    answers: Vec<Option<AnswerData>>,
    pending: usize,
    failed_count: usize,
    weights: Vec<Weight>,
    /// The answer's reply schema, built once for the run.
    answer_schema: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    match stage {
        "answer" => 0,
        "weights" => 1,
        _ => 2,
    }
}

/// A reply whose answer (or synthesis) is empty once its markers (or its JSON) are read, as a
/// failed call.
fn no_content_is_failure(mut reply: CallReply, synthesis: bool, schema: &ReplySchema) -> CallReply {
    if let Ok(t) = &reply.result {
        let empty = if synthesis {
            parse_synthesis(&answer_text(t)).0.is_empty()
        } else {
            read_answer_reply(0, "", t, 0, schema).response.is_empty()
        };
        if empty {
            let what =
                if synthesis { "no synthesis in the reply" } else { "no answer in the reply" };
            reply.result = Err(CallError::new(CallErrorKind::Malformed, None, what));
        }
    }
    reply
}

impl ConfidenceWeighted {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: ConfidenceWeightedConfig = stored_config("confidence_weighted", config)?;
        if !(MIN_MODELS..=MAX_MODELS).contains(&config.models.len()) {
            return Err("the stored confidence_weighted configuration has no 2 to 6 models".into());
        }
        if !(config.temperature.is_finite() && TEMPERATURE_RANGE.contains(&config.temperature)) {
            return Err("the stored confidence_weighted temperature is out of range".into());
        }
        let n = config.models.len();
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(ConfidenceWeighted {
            names: member_names(&config.models),
            config,
            ctx,
            phase: Phase::Answering,
            answers: vec![None; n],
            pending: n,
            failed_count: 0,
            weights: Vec::new(),
            answer_schema: answer_schema(),
            title,
            calls: Calls::default(),
        })
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message)
    }

    fn on_answer(&mut self, reply: CallReply) -> Vec<Effect> {
        let Some(i) = reply.key.strip_prefix("answer:").and_then(|n| n.parse::<usize>().ok())
        else {
            return Vec::new();
        };
        if i >= self.answers.len() || self.answers[i].is_some() {
            return Vec::new();
        }
        self.pending = self.pending.saturating_sub(1);
        let mut out = Vec::new();
        match &reply.result {
            Ok(text) => {
                let ms = reply.response_time_ms as i64;
                let a = read_answer_reply(i, &self.names[i], text, ms, &self.answer_schema);
                let mut parsed = json!(a);
                if let Some(o) = parsed.as_object_mut() {
                    o.remove("response");
                }
                out.push(Effect::Store(StageRow {
                    stage_type: format!("answer_{i}"),
                    stage_order: 0,
                    model: Some(a.model.clone()),
                    role: Some("respondent".into()),
                    content: text.clone(),
                    parsed_data: Some(parsed),
                    response_time_ms: Some(a.response_time_ms),
                }));
                out.push(Effect::emit("answer_complete", json!({ "data": a })));
                self.answers[i] = Some(a);
            }
            Err(_) => self.failed_count += 1,
        }
        if self.pending == 0 {
            out.extend(self.after_answers());
        }
        out
    }

    fn after_answers(&mut self) -> Vec<Effect> {
        let answered: Vec<AnswerData> = self.answers.iter().flatten().cloned().collect();
        let mut out = vec![Effect::emit(
            "all_answers_complete",
            json!({ "data": { "count": answered.len(), "failedCount": self.failed_count } }),
        )];
        if answered.is_empty() {
            out.extend(self.fail("No model answered.".into()));
            return out;
        }
        let input: Vec<(usize, String, f64)> =
            answered.iter().map(|a| (a.index, a.model.clone(), a.confidence)).collect();
        self.weights = weights(&input, self.config.temperature);
        let data = weights_data(&self.weights, self.config.temperature);
        out.push(Effect::Store(StageRow::computed("weights", 1, data.clone())));
        out.push(Effect::emit("weights_calculated", json!({ "data": data })));
        out.push(Effect::emit("synthesis_start", json!({})));
        if answered.len() == 1 {
            let a = &answered[0];
            let s = SynthesisData {
                model: None,
                synthesis: a.response.clone(),
                calibration_notes: String::new(),
                highest_weight: extreme(&self.weights, true),
                lowest_weight: extreme(&self.weights, false),
                single_answer: true,
                response_time_ms: None,
                fallback_from: None,
            };
            out.extend(self.finish(s));
            return out;
        }
        let shown: Vec<Weighted> = self
            .weights
            .iter()
            .filter_map(|w| {
                let a = answered.iter().find(|a| a.index == w.index)?;
                Some(Weighted { model: &a.model, response: &a.response, weight: w })
            })
            .collect();
        let prompt = synthesis_prompt(&self.ctx.question, &shown, self.config.temperature);
        // The answers as the prompt quotes them: cut first when it would not fit its model.
        let material: Vec<(String, String)> = shown
            .iter()
            .map(|a| (format!("{}'s answer", a.model), readable(a.response).into_owned()))
            .collect();
        let spec = CallSpec::new(
            "synthesis",
            &self.config.synthesis_model,
            with_history(&self.ctx.history, HISTORY_TURNS, &prompt),
            "synthesis",
            "synthesizer",
            self.config.timeout_ms,
        )
        .quoting(material);
        let backup = self.config.synthesis_fallback_model.clone();
        out.push(self.calls.solo(spec, 2, backup.as_deref()));
        self.phase = Phase::Synthesising;
        out
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                let m = role_failed("synthesizer", &routed, e);
                return self.fail(m);
            }
        };
        let (synthesis, notes) = parse_synthesis(&answer_text(&text));
        let s = SynthesisData {
            model: Some(routed.reply.model.clone()),
            synthesis,
            calibration_notes: notes,
            highest_weight: extreme(&self.weights, true),
            lowest_weight: extreme(&self.weights, false),
            single_answer: false,
            response_time_ms: Some(routed.reply.response_time_ms as i64),
            fallback_from: routed.fallback_from,
        };
        self.finish(s)
    }

    fn finish(&mut self, s: SynthesisData) -> Vec<Effect> {
        self.phase = Phase::Done;
        let mut event = json!({ "data": s });
        self.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "synthesis".into(),
                stage_order: 2,
                model: s.model.clone(),
                role: Some("synthesizer".into()),
                content: s.synthesis.clone(),
                parsed_data: Some(synthesis_parsed(&s)),
                response_time_ms: s.response_time_ms,
            }),
            Effect::emit("synthesis_complete", event),
        ];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: s.synthesis });
        out
    }
}

/// `synthesis_complete`'s data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisData {
    /// The model that wrote it; null when a single answer stands as the synthesis.
    pub model: Option<String>,
    pub synthesis: String,
    pub calibration_notes: String,
    pub highest_weight: Option<Weight>,
    pub lowest_weight: Option<Weight>,
    pub single_answer: bool,
    pub response_time_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The heaviest (or lightest) weight: first (or last) in weight order.
fn extreme(weights: &[Weight], highest: bool) -> Option<Weight> {
    if highest { weights.first() } else { weights.last() }.cloned()
}

fn synthesis_parsed(s: &SynthesisData) -> Value {
    let mut v = json!({ "calibrationNotes": s.calibration_notes, "highestWeight": s.highest_weight,
                        "lowestWeight": s.lowest_weight, "singleAnswer": s.single_answer });
    if let Some(f) = &s.fallback_from {
        v["fallbackFrom"] = json!(f);
    }
    v
}

/// `weights_calculated`'s data (and the `weights` row).
fn weights_data(weights: &[Weight], temperature: f64) -> Value {
    json!({ "weights": weights, "temperature": temperature,
            "outlierCount": weights.iter().filter(|w| w.is_outlier).count() })
}

impl Mode for ConfidenceWeighted {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::emit(
                "confidence_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "confidence_weighted",
                        "config": { "models": self.config.models, "synthesisModel": self.config.synthesis_model,
                                    "temperature": self.config.temperature } }),
            ),
            Effect::emit("answers_start", json!({})),
        ];
        let schema = &self.answer_schema;
        let text =
            with_history(&self.ctx.history, HISTORY_TURNS, &answer_prompt(&self.ctx.question));
        let json = with_history(
            &self.ctx.history,
            HISTORY_TURNS,
            &answer_prompt_as(&self.ctx.question, Some(schema)),
        );
        for (i, model) in self.config.models.iter().enumerate() {
            let messages = self.ctx.structured.pick(model, &text, &json).clone();
            let call = CallSpec::new(
                format!("answer:{i}"),
                model,
                messages,
                "answer",
                "respondent",
                self.config.timeout_ms,
            );
            out.push(Effect::Call(call.with_schema(schema)));
        }
        let model = self.config.synthesis_model.clone();
        out.extend(self.title.call(
            &model,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        self.calls.track(&out, stage_order);
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let synthesis = reply.key.starts_with("synthesis");
        let reply = no_content_is_failure(empty_is_failure(reply), synthesis, &self.answer_schema);
        let (mut out, routed) = self.calls.route(reply);
        let Some(routed) = routed else { return out };
        out.extend(match self.phase {
            Phase::Answering => self.on_answer(routed.reply),
            Phase::Synthesising if routed.reply.key == "synthesis" => self.on_synthesis(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }
}

/// `{answers, weights, synthesis, partial, failedModels}` from the stored rows: the answers in
/// request order, the weights and synthesis as their events carried them (null when the run
/// stopped before them).
pub fn load_result(rows: &[StageRow]) -> Value {
    let schema = answer_schema();
    let mut answers: Vec<AnswerData> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("answer_"))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            // The answer is read again from the stored reply, as it was read live.
            v["response"] = json!(read_answer_reply(0, "", &r.content, 0, &schema).response);
            serde_json::from_value(v).ok()
        })
        .collect();
    answers.sort_by_key(|a| a.index);
    let weights = rows
        .iter()
        .find(|r| r.stage_type == "weights")
        .and_then(|r| r.parsed_data.clone())
        .unwrap_or(Value::Null);
    let synthesis = rows.iter().find(|r| r.stage_type == "synthesis").map(|r| {
        let p = r.parsed_data.clone().unwrap_or(Value::Null);
        let mut v = json!({ "model": r.model, "synthesis": r.content,
                            "calibrationNotes": p.get("calibrationNotes").cloned().unwrap_or(json!("")),
                            "highestWeight": p.get("highestWeight").cloned().unwrap_or(Value::Null),
                            "lowestWeight": p.get("lowestWeight").cloned().unwrap_or(Value::Null),
                            "singleAnswer": p.get("singleAnswer").cloned().unwrap_or(json!(false)),
                            "responseTimeMs": r.response_time_ms });
        if let Some(f) = p.get("fallbackFrom") {
            v["fallbackFrom"] = f.clone();
        }
        v
    });
    let mut result = json!({ "answers": answers, "weights": weights, "synthesis": synthesis });
    mark_from_rows(&mut result, rows);
    result
}

// ---- sim answers ---------------------------------------------------------------------------

fn sim_answer(ask: &SimAsk) -> Option<String> {
    // Asked for another mode's schema: not this mode's prompt.
    if ask.schema.is_some_and(|s| s.name != ANSWER_SCHEMA) {
        return None;
    }
    if ask.prompt.starts_with(SYNTHESIS_HEAD) {
        return Some(sim_synthesis(ask));
    }
    let (question, _) =
        ask.prompt.split_once(&format!("\n\n---\nAnswer the question above, {ANSWER_HEAD}"))?;
    let mut rng = SplitMix64::new(ask.seed);
    let confidence = 40 + rng.below(60);
    let who = ask.model;
    let first: String = question.chars().take(80).collect();
    let body = format!(
        "[simulated answer from {who}] On \"{first}\": the short answer depends on a few facts, \
         which this answer states in turn.\n\n{}- The main point, stated plainly.\n- A caveat \
         worth knowing.",
        ask.hostile_paragraph()
    );
    if ask.schema.is_some() {
        return Some(
            json!({
                "reasoning": format!("[simulated reasoning from {who}] The main point is well \
                                      known; the caveat is less certain."),
                "response": body.trim_end(),
                "confidence": confidence as f64 / 100.0,
                "confidence_reasoning": "I know the main point well; the caveat is where I am \
                                         less sure.",
            })
            .to_string(),
        );
    }
    if ask.malformed {
        return Some(match rng.below(3) {
            0 => format!("Sure! {body}\n\n**Confidence:** {confidence}%\n\nI'm fairly sure of the main point."),
            1 => format!("{body}\n\nI would say I'm moderately confident in this."),
            _ => format!(
                "<think>Let me weigh this.</think>\n## Response:\n{body}\n\n- Confidence: {}/10\n- Confidence reasoning: the caveat is the part I am least sure of.",
                confidence / 10
            ),
        });
    }
    Some(format!(
        "RESPONSE:\n{body}\n\nCONFIDENCE: 0.{confidence:02}\nCONFIDENCE_REASONING: I know the main \
         point well; the caveat is where I am less sure."
    ))
}

fn sim_synthesis(ask: &SimAsk) -> String {
    let models: Vec<&str> = ask
        .prompt
        .lines()
        .filter_map(|l| l.strip_prefix("--- "))
        .filter_map(|l| l.split(" (weight ").next())
        .collect();
    let heaviest = models.first().copied().unwrap_or("the first answer");
    let body = format!(
        "[simulated synthesis by {}] Weighing the answers by their stated confidence, the main \
         point stands, as {heaviest} put it most confidently; the caveat the others raise is \
         kept.\n\n{}",
        ask.model,
        ask.hostile_paragraph()
    );
    let notes: Vec<String> = models
        .iter()
        .map(|m| format!("- {m}: its confidence looks about right for what it said."))
        .collect();
    if ask.malformed {
        return format!("Here is the combined answer.\n\n{body}");
    }
    format!("SYNTHESIS:\n{body}\n\nCONFIDENCE CALIBRATION NOTES:\n{}", notes.join("\n"))
}

#[cfg(test)]
#[path = "confidence_weighted_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A percentage with at most `places` decimals (`90%`, `45.26%`).
fn percent(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    format!("{s}%")
}

/// The result as the export's report: how the weights were made, a table of the answers
/// (heaviest first: whose, the confidence it stated, its weight, whether a confidence was
/// stated), who wrote the synthesis, and the synthesizer's notes on calibration.
pub fn report(result: &Value) -> String {
    use super::report::table;
    let mut out = String::new();
    let answers = result["answers"].as_array().cloned().unwrap_or_default();
    let weights = &result["weights"];
    let list = weights["weights"].as_array().cloned().unwrap_or_default();
    let answer_of = |index: &Value| answers.iter().find(|a| a["index"] == *index);
    if let Some(heaviest) = list.first() {
        let t = weights["temperature"]
            .as_f64()
            .map_or(String::new(), |t| format!(" at temperature {}", fmt_temperature(t)));
        let at = heaviest["weightPercent"]
            .as_f64()
            .map_or(String::new(), |w| format!(", at {}", percent(w, 2)));
        out.push_str(&format!(
            "**Weights** from the confidence each model stated (a softmax{t}): the heaviest answer is {}'s{at}.\n\n",
            heaviest["model"].as_str().unwrap_or("one model"),
        ));
    }
    // Heaviest first when weighed; else the answers in the order asked.
    let rows_of: Vec<(Value, Option<Value>)> = if list.is_empty() {
        answers.iter().map(|a| (a.clone(), None)).collect()
    } else {
        list.iter()
            .filter_map(|w| Some((answer_of(&w["index"])?.clone(), Some(w.clone()))))
            .collect()
    };
    let mut defaulted = false;
    let rows: Vec<Vec<String>> = rows_of
        .iter()
        .map(|(a, w)| {
            let stated = a["parsedSuccessfully"] == true;
            let confidence = match a["confidence"].as_f64().filter(|_| stated) {
                Some(c) => {
                    let mut s = percent(c * 100.0, 1);
                    if c > OUTLIER_HIGH {
                        s.push_str(" (unusually high)");
                    } else if c < OUTLIER_LOW {
                        s.push_str(" (unusually low)");
                    }
                    s
                }
                None => "not stated".to_string(),
            };
            let said = match (stated, a["clamped"] == true) {
                (true, true) => "yes, outside the scale and held to it",
                (true, false) => "yes",
                (false, _) => {
                    defaulted = true;
                    "no"
                }
            };
            vec![
                a["model"].as_str().unwrap_or("").to_string(),
                confidence,
                w.as_ref()
                    .and_then(|w| w["weightPercent"].as_f64())
                    .map_or(String::new(), |p| percent(p, 2)),
                said.to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["model", "confidence", "weight", "confidence stated"],
            &rows,
            &[1, 2],
        ));
        if defaulted {
            out.push_str(&format!(
                "\nAn answer that stated no confidence was weighed at the default of {}.\n",
                percent(DEFAULT_CONFIDENCE * 100.0, 1)
            ));
        }
        out.push('\n');
    }
    let s = &result["synthesis"];
    if s["singleAnswer"] == true {
        let who = answers.first().and_then(|a| a["model"].as_str()).unwrap_or("one model");
        out.push_str(&format!(
            "**Synthesis:** only {who} answered, so its answer stands as the synthesis.\n"
        ));
    } else if let Some(model) = s["model"].as_str().filter(|m| !m.is_empty()) {
        let standing_in = s["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!(
            "**Synthesis** written by {model}{standing_in}, favouring the heavier answers.\n"
        ));
    }
    let notes = s["calibrationNotes"].as_str().unwrap_or("").trim();
    if !notes.is_empty() {
        out.push_str("\n**Calibration notes** from the synthesizer:\n\n");
        for line in notes.lines() {
            // Quoted as written, without the headings a model may open a line with.
            let t = line.trim_start();
            let line =
                if t.starts_with('#') { t.trim_start_matches('#').trim_start() } else { line };
            out.push_str(&format!("> {line}\n").replace("> \n", ">\n"));
        }
    }
    out
}

/// A temperature as set (`1`, `0.5`).
fn fmt_temperature(t: f64) -> String {
    let s = format!("{t:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
