//! Clarity mode (specs/clarity-mode.md, seeds/clarity-panel-prd.md): three personas (Skeptic,
//! Advocate, Generalist) score a brief on seven weighted dimensions in parallel; a discussion
//! round lets them revise after seeing each other's verdicts (skipped when all agree within a
//! point, by default); an Arbiter settles dimensions still disputed (spread > 2), weighted 1.5x
//! there, and the run is flagged for human review. The final score, its method and the
//! consolidated top-5 critique are computed here.
//!
//! Decisions where the PRD is silent: scores are read from the reply's JSON object (the last
//! parseable one), else from `Dimension: N` lines; an evaluator needs at least four readable
//! dimensions to count, and the panel needs two; the overall score renormalises the weights of
//! dimensions that have a score; the method is `median` (no discussion), `post_discussion`
//! (the medians of the revised scores) or `arbiter`; if the Arbiter fails the run still
//! completes on the post-discussion medians and stays flagged for review. A failing Arbiter
//! is first replaced once by the configured backup (`[fallback] arbiter`); the arbiter entry
//! then says `fallbackFrom`.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{mark_from_rows, Batch, Calls, Routed, SplitMix64, TitleTracker, TITLE_KEY};
use super::reading::{between, split_reasoning, Unparsed};
use super::registry::{schema_of, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_CONTENT_CHARS, MAX_SHORT_CHARS, MAX_TEXT_CHARS};
use super::schema::{self, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

/// One scoring dimension.
pub struct Dimension {
    pub key: &'static str,
    pub name: &'static str,
    pub weight: f64,
    pub guideline: &'static str,
}

/// The PRD's seven dimensions and weights (summing to 1).
pub const DIMENSIONS: [Dimension; 7] = [
    Dimension { key: "firstPrinciplesCoherence", name: "First-Principles Coherence", weight: 0.20, guideline: "Reasoning builds from clear foundations: 9-10 every conclusion traces to stated premises; 5 some leaps; 0-2 assertions without foundations." },
    Dimension { key: "internalConsistency", name: "Internal Consistency", weight: 0.15, guideline: "No contradictions between sections: 9-10 none; 5 minor tensions; 0-2 sections contradict each other." },
    Dimension { key: "evidenceQuality", name: "Evidence Quality", weight: 0.15, guideline: "Sources are credible, relevant, properly cited: 9-10 every key claim sourced; 5 some unsupported claims; 0-2 no evidence." },
    Dimension { key: "accessibility", name: "Accessibility", weight: 0.15, guideline: "Clear language for the intended reader: 9-10 plain and precise; 5 some jargon; 0-2 impenetrable." },
    Dimension { key: "objectivity", name: "Objectivity", weight: 0.15, guideline: "Balanced perspectives, no obvious bias: 9-10 strongest version of each side; 5 tilted; 0-2 one-sided." },
    Dimension { key: "factualAccuracy", name: "Factual Accuracy", weight: 0.10, guideline: "Claims are verifiable and correctly stated: 9-10 all correct; 5 some errors; 0-2 largely wrong." },
    Dimension { key: "biasDetection", name: "Bias Detection", weight: 0.10, guideline: "Free of subtle framing bias and selective emphasis: 9-10 none found; 5 noticeable framing; 0-2 pervasive." },
];

/// Disagreement: a spread above this on any dimension or overall.
pub const DISAGREEMENT_SPREAD: f64 = 2.0;
/// `discussion: "auto"` skips the round when every spread is at most this.
pub const AGREEMENT_SPREAD: f64 = 1.0;
/// The Arbiter's weight on disputed dimensions.
pub const ARBITER_WEIGHT: f64 = 1.5;

/// An evaluator persona.
pub struct Persona {
    pub role: &'static str,
    pub name: &'static str,
    pub system_prompt: &'static str,
    pub focus: &'static [&'static str],
}

pub const PERSONAS: [Persona; 3] = [
    Persona {
        role: "skeptic",
        name: "Skeptic",
        system_prompt: "You are the Skeptic on a panel that scores policy briefs. You challenge every claim, flag unsupported assertions and ask of each one: what is the evidence? You are not contrarian for its own sake: a well-supported claim earns a high score. You weigh Evidence Quality, Factual Accuracy and First-Principles Coherence most heavily.",
        focus: &["evidenceQuality", "factualAccuracy", "firstPrinciplesCoherence"],
    },
    Persona {
        role: "advocate",
        name: "Advocate",
        system_prompt: "You are the Advocate on a panel that scores policy briefs. You make sure each position appears in its strongest form, catch strawmanning and check that the brief is balanced. You weigh Objectivity, Bias Detection and Internal Consistency most heavily.",
        focus: &["objectivity", "biasDetection", "internalConsistency"],
    },
    Persona {
        role: "generalist",
        name: "Generalist",
        system_prompt: "You are the Generalist on a panel that scores policy briefs. You read as an average, intelligent reader would: you check that the brief is accessible, flag jargon and unexplained terms, and notice where the argument is hard to follow. You weigh Accessibility, Internal Consistency and First-Principles Coherence most heavily.",
        focus: &["accessibility", "internalConsistency", "firstPrinciplesCoherence"],
    },
];

pub const ARBITER_PROMPT: &str = "You are the Arbiter of a panel that scores policy briefs. Three evaluators disagree on some dimensions even after discussing them. You read the brief yourself, weigh their positions and give a definitive score for each disputed dimension, with detailed reasoning.";

const SIM_DEFAULT: &str = "sim/haiku";
const SEED_DEFAULT: &str = "anthropic/claude-haiku-4-5";

/// When the evaluators discuss their scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Discussion {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClarityConfig {
    pub content: String,
    pub context: Option<String>,
    pub title: Option<String>,
    /// skeptic, advocate, generalist, arbiter.
    pub models: BTreeMap<String, String>,
    pub discussion: Discussion,
    pub timeout_ms: u64,
}

/// The key of the stored configuration naming the server's backup Arbiter (`[fallback]
/// arbiter`), when one is configured. Kept beside [`ClarityConfig`] rather than in it, as
/// other code builds that struct for its prompts.
const ARBITER_FALLBACK_KEY: &str = "arbiterFallbackModel";

/// The `stage_order` of a Clarity stage's calls.
fn stage_order(stage: &str) -> i32 {
    match stage {
        "evaluation" => 1,
        "discussion" => 3,
        _ => 4,
    }
}

/// The model of each of Clarity's four roles.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClarityModels {
    /// Looks for what does not hold up.
    pub skeptic: Option<ModelId>,
    /// Looks for what works.
    pub advocate: Option<ModelId>,
    /// Reads as the intended audience would.
    pub generalist: Option<ModelId>,
    /// Settles the dimensions the evaluators still disagree on.
    pub arbiter: Option<ModelId>,
}

/// Clarity's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClarityRequest {
    /// The brief to score (required).
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// The brief's title.
    pub title: Option<Text<MAX_SHORT_CHARS>>,
    /// What the evaluators should know about the brief's setting.
    pub context: Option<Text<MAX_TEXT_CHARS>>,
    /// Each role's model (default: a fast model for all four).
    pub models: Option<ClarityModels>,
    /// The discussion round: `auto` (when the evaluators disagree), `always` or `never`.
    pub discussion: Option<Discussion>,
    /// Per-stage timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

/// `{question?, mode:"clarity", modeConfig: {content, context?, title?, models?: {skeptic,
/// advocate, generalist, arbiter}, discussion?: auto|always|never, timeoutMs?}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let cfg: ClarityRequest = request::typed(&request::mode_config(body, true)?, "modeConfig")?;
    let content = cfg
        .content
        .as_ref()
        .filter(|c| !c.0.trim().is_empty())
        .map(|c| c.0.clone())
        .ok_or_else(|| FieldError::new("modeConfig.content", "Content to score is required"))?;
    let question = match body.get("question") {
        None | Some(Value::Null) => "Score this brief".to_string(),
        _ => request::question(body, "Question is required")?,
    };
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let non_empty = |t: &Option<Text<{ MAX_TEXT_CHARS }>>, field: &str| match t {
        None => Ok(None),
        Some(t) => t.trimmed().map(Some).ok_or_else(|| FieldError::new(field, "must not be empty")),
    };
    let context = non_empty(&cfg.context, "modeConfig.context")?;
    let title = match &cfg.title {
        None => None,
        Some(t) => Some(
            t.trimmed().ok_or_else(|| FieldError::new("modeConfig.title", "must not be empty"))?,
        ),
    };
    let default = if defaults.offline { SIM_DEFAULT } else { SEED_DEFAULT };
    let given = cfg.models.unwrap_or_default();
    let mut models = BTreeMap::new();
    for (role, id) in [
        ("skeptic", &given.skeptic),
        ("advocate", &given.advocate),
        ("generalist", &given.generalist),
        ("arbiter", &given.arbiter),
    ] {
        let m = request::model(id.as_ref(), &format!("modeConfig.models.{role}"))?;
        models.insert(role.to_string(), m.unwrap_or_else(|| default.to_string()));
    }
    let discussion = cfg.discussion.unwrap_or(Discussion::Auto);
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=300_000,
        defaults.stage_timeout_ms,
    )?;
    let all = request::distinct(&[], &models.values().map(String::as_str).collect::<Vec<_>>());
    let arbiter_fallback_model = models
        .get("arbiter")
        .and_then(|arbiter| Fallbacks::for_role(&defaults.fallback.arbiter, arbiter));
    let config = ClarityConfig { content, context, title, models, discussion, timeout_ms };
    let mut config = serde_json::to_value(&config).unwrap_or(Value::Null);
    if let (Some(backup), Some(o)) = (arbiter_fallback_model, config.as_object_mut()) {
        o.insert(ARBITER_FALLBACK_KEY.into(), json!(backup));
    }
    Ok(ValidRequest { mode: SPEC.kind(), question, conversation_id, config, models: all })
}

/// Clarity in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "clarity",
    label: "Clarity",
    description: "A Skeptic, an Advocate and a Generalist score a brief on seven weighted dimensions; an Arbiter settles lasting disagreement, which is flagged for human review.",
    multi_turn: false,
    question: Question { label: "What to score (optional)", required: None },
    roles: &[
        Role {
            id: "skeptic",
            label: "Skeptic",
            field: Some("models.skeptic"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_DEFAULT],
            default: &[SEED_DEFAULT],
        },
        Role {
            id: "advocate",
            label: "Advocate",
            field: Some("models.advocate"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_DEFAULT],
            default: &[SEED_DEFAULT],
        },
        Role {
            id: "generalist",
            label: "Generalist",
            field: Some("models.generalist"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_DEFAULT],
            default: &[SEED_DEFAULT],
        },
        Role {
            id: "arbiter",
            label: "Arbiter",
            field: Some("models.arbiter"),
            panel: false,
            fallback: Some("arbiter"),
            sim_default: &[SIM_DEFAULT],
            default: &[SEED_DEFAULT],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<ClarityRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Clarity::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let score = r.get("score").filter(|s| !s.is_null())?;
        let mut line = format!("score {:.1}/10", score["score"].as_f64()?);
        if score["needsHumanReview"] == true {
            line.push_str(" · flagged for review");
        }
        Some(line)
    },
    stages: &[("discussion", "the evaluators' discussion"), ("arbiter", "the arbiter's ruling")],
    report: Some(report),
    example: || {
        json!({ "mode": "clarity", "modeConfig": { "content": "Brief: a mobile app for reporting potholes with a photo; the city fixes them within 14 days." } })
    },
    sim: Some(sim_answer),
};

// ---- prompts --------------------------------------------------------------------------------

fn brief_block(cfg: &ClarityConfig) -> String {
    let mut b = String::new();
    if let Some(t) = &cfg.title {
        b.push_str(&format!("TITLE: {t}\n\n"));
    }
    if let Some(c) = &cfg.context {
        b.push_str(&format!("CONTEXT:\n{c}\n\n"));
    }
    b.push_str(&format!("BRIEF:\n{}\n", cfg.content));
    b
}

fn dimension_list() -> String {
    DIMENSIONS
        .iter()
        .map(|d| {
            format!("- {} (`{}`, weight {:.0}%): {}", d.name, d.key, d.weight * 100.0, d.guideline)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const FORMAT: &str = "Reply with one JSON object and nothing after it:\n\
{\"scores\": {\"firstPrinciplesCoherence\": 0-10, \"internalConsistency\": 0-10, \"evidenceQuality\": 0-10, \"accessibility\": 0-10, \"objectivity\": 0-10, \"factualAccuracy\": 0-10, \"biasDetection\": 0-10},\n \
\"critique\": \"a short paragraph explaining your scores\",\n \
\"issues\": [{\"dimension\": \"<dimension key>\", \"issue\": \"what is wrong\", \"suggestedFix\": \"how to fix it\", \"quote\": \"the exact words of the brief concerned\", \"severity\": \"high|medium|low\"}]}";

pub fn evaluation_prompt(cfg: &ClarityConfig, persona: &Persona) -> String {
    evaluation_prompt_as(cfg, persona, None)
}

/// The evaluation prompt asking for the spec's JSON in words ([`FORMAT`]), or, given the
/// stage's schema, for the schema's fields instead (the same instructions otherwise).
pub fn evaluation_prompt_as(
    cfg: &ClarityConfig,
    persona: &Persona,
    schema: Option<&ReplySchema>,
) -> String {
    let format = schema.map_or_else(|| FORMAT.to_string(), ReplySchema::instruction);
    format!(
        "CLARITY EVALUATION\n\nScore the brief below on seven dimensions, each from 0 to 10, from your perspective as the {}.\n\n{}\nDIMENSIONS:\n{}\n\nYour focus dimensions: {}.\n\n{format}",
        persona.name,
        brief_block(cfg),
        dimension_list(),
        persona.focus.join(", ")
    )
}

fn positions(verdicts: &[Verdict]) -> String {
    DIMENSIONS
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let s: Vec<String> = verdicts
                .iter()
                .map(|v| {
                    format!("{} {}", v.role, v.scores[i].map_or("-".into(), |x| format!("{x}")))
                })
                .collect();
            format!("- {} ({}): {}", d.name, d.key, s.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn discussion_prompt(cfg: &ClarityConfig, persona: &Persona, verdicts: &[Verdict]) -> String {
    discussion_prompt_as(cfg, persona, verdicts, None)
}

/// The critiques the discussion prompt quotes, one line per evaluator.
fn critiques(verdicts: &[Verdict]) -> String {
    verdicts.iter().map(|v| format!("{}: {}", v.role, v.critique)).collect::<Vec<_>>().join("\n")
}

/// The discussion prompt asking for the spec's JSON in words, or, given the stage's schema,
/// for the schema's fields instead (its `justification` among them).
pub fn discussion_prompt_as(
    cfg: &ClarityConfig,
    persona: &Persona,
    verdicts: &[Verdict],
    schema: Option<&ReplySchema>,
) -> String {
    let format = schema.map_or_else(
        || format!("{FORMAT}\nAdd \"justification\": \"why you revised or kept your scores\" to the object."),
        ReplySchema::instruction,
    );
    format!(
        "CLARITY DISCUSSION\n\nYou are the {}. The panel has scored the brief below. Given the other evaluators' perspectives, would you revise any scores? Explain your reasoning.\n\n{}\nSCORES BY EVALUATOR:\n{}\n\nCRITIQUES:\n{}\n\n{format}",
        persona.name,
        brief_block(cfg),
        positions(verdicts),
        critiques(verdicts)
    )
}

pub fn arbiter_prompt(
    cfg: &ClarityConfig,
    verdicts: &[Verdict],
    disputed: &[String],
    summary: &str,
) -> String {
    arbiter_prompt_as(cfg, verdicts, disputed, summary, None)
}

/// The arbiter's prompt asking for the spec's JSON in words, or, given the stage's schema (its
/// scores exactly the disputed dimensions), for the schema's fields instead.
pub fn arbiter_prompt_as(
    cfg: &ClarityConfig,
    verdicts: &[Verdict],
    disputed: &[String],
    summary: &str,
    schema: Option<&ReplySchema>,
) -> String {
    let format = schema.map_or_else(
        || "Reply with one JSON object:\n{\"scores\": {\"<dimension key>\": 0-10}, \"reasoning\": \"your detailed reasoning\"}".to_string(),
        ReplySchema::instruction,
    );
    let names: Vec<String> = disputed
        .iter()
        .filter_map(|k| DIMENSIONS.iter().find(|d| d.key == k))
        .map(|d| format!("{} (`{}`)", d.name, d.key))
        .collect();
    format!(
        "CLARITY ARBITRATION\n\n{}\nSCORES BY EVALUATOR:\n{}\n\nDISPUTED DIMENSIONS: {}\n\nDISCUSSION SUMMARY:\n{summary}\n\n\
Give a definitive 0-10 score for each disputed dimension. {format}",
        brief_block(cfg),
        positions(verdicts),
        names.join(", ")
    )
}

pub fn title_prompt(content: &str) -> String {
    let preview: String = content.chars().take(200).collect();
    format!(
        "Generate a brief title (3-5 words) for a clarity review of this brief:\n\n\"{preview}\"\n\n\
         Reply with ONLY the title. No quotes, no punctuation, no explanation."
    )
}

// ---- parsing --------------------------------------------------------------------------------

/// The scans still looking for their closing `}` that are in one string state. A scan's
/// brace depth is its key plus `shift`, so a brace moves all of them at once; scans of equal
/// depth share an entry, and a scan ends (its depth reaches 0) only from the smallest key.
#[derive(Default)]
struct Scans {
    shift: i64,
    by_key: BTreeMap<i64, Vec<usize>>,
    len: usize,
}

impl Scans {
    /// Both sets of scans, which from here on read the text alike. The smaller moves into the
    /// larger, so no scan moves more than O(log n) times over a text.
    fn merge(a: Scans, b: Scans) -> Scans {
        let (mut big, small) = if a.len >= b.len { (a, b) } else { (b, a) };
        big.len += small.len;
        for (key, ids) in small.by_key {
            big.by_key.entry(key + small.shift - big.shift).or_default().extend(ids);
        }
        big
    }
}

/// A `{` of a reply, as a scan starting there reads the text: braces counted outside `"`
/// strings, `\` escaping the next byte inside them.
struct Opening {
    start: usize,
    /// The `}` that brings the scan back to depth 0, if any.
    end: Option<usize>,
    /// An earlier `{` whose scan is outside a string here and still open (the innermost):
    /// were its text JSON, this `{` would open one of its values, ending at the same `}`.
    around: Option<usize>,
}

/// Every `{` of `text` with where its own scan ends, in one pass: O(n log n), where a scan
/// per `{` is O(n²). A scan from each `{` is in one of three string states (outside, inside,
/// just after a `\` inside); scans in the same state react alike to every byte, so they are
/// moved as a set, and a set takes a brace in O(log n). Braces, quotes and backslashes are
/// ASCII, so bytes are read as characters.
fn openings(text: &str) -> Vec<Opening> {
    let mut found: Vec<Opening> = Vec::new();
    let (mut outside, mut inside, mut escaped) =
        (Scans::default(), Scans::default(), Scans::default());
    for (i, b) in text.bytes().enumerate() {
        if b == b'\\' {
            // Outside a string a backslash is nothing; inside it escapes the next byte.
            std::mem::swap(&mut inside, &mut escaped);
            continue;
        }
        // Any other byte ends an escape.
        let unescaped = std::mem::take(&mut escaped);
        if b == b'"' {
            let opened = Scans::merge(std::mem::take(&mut outside), unescaped);
            outside = std::mem::replace(&mut inside, opened);
            continue;
        }
        inside = Scans::merge(std::mem::take(&mut inside), unescaped);
        if b == b'{' {
            outside.shift += 1;
            let around = outside.by_key.first_key_value().and_then(|(_, ids)| ids.first());
            found.push(Opening { start: i, end: None, around: around.copied() });
            outside.by_key.entry(1 - outside.shift).or_default().push(found.len() - 1);
            outside.len += 1;
        } else if b == b'}' {
            outside.shift -= 1;
            for id in outside.by_key.remove(&-outside.shift).unwrap_or_default() {
                found[id].end = Some(i);
                outside.len -= 1;
            }
        }
    }
    found
}

/// The last JSON object with `scores` in a text (code fences, commentary and a quoted
/// template before it allowed): the model's own answer comes last.
///
/// Exactly: each `{`, from the last back, is taken with the text up to the `}` that closes it
/// when scanning from that `{` alone (braces counted outside `"` strings, `\` escaping inside
/// them); the first such text that parses as a JSON object whose `scores` is an object is it.
/// So an object nested in another counts on its own, and the one that opens last wins.
pub fn last_json_object(text: &str) -> Option<Value> {
    find_last_object(text, |s| serde_json::from_str(s).ok())
}

/// `last_json_object`, with the parser given: tests count what it is handed.
///
/// The parsing stays linear in the text: a candidate that cannot name `scores` (neither
/// `scores` nor a `\`, which could spell it, in it) is not parsed, and the `around` of a
/// candidate that is not JSON cannot be JSON either, so it is not parsed. What is left to
/// parse more than once is (short of crafted escapes, which can hide an `around`) JSON
/// objects nested in each other, at most 128 deep (serde_json's limit): each byte is parsed
/// at most about 128 times.
fn find_last_object(text: &str, mut parse: impl FnMut(&str) -> Option<Value>) -> Option<Value> {
    let found = openings(text);
    let bytes = text.as_bytes();
    let hints: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i] == b'\\' || bytes[i..].starts_with(b"scores"))
        .collect();
    let mut not_json = vec![false; found.len()];
    for (id, o) in found.iter().enumerate().rev() {
        let Some(end) = o.end else { continue };
        if !not_json[id] {
            let first_hint = hints.partition_point(|&h| h < o.start);
            if hints.get(first_hint).is_none_or(|&h| h > end) {
                continue;
            }
            match parse(&text[o.start..=end]) {
                Some(v) if v.get("scores").is_some_and(Value::is_object) => return Some(v),
                Some(_) => continue,
                None => {}
            }
        }
        if let Some(around) = o.around {
            not_json[around] = true;
        }
    }
    None
}

fn score_value(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().trim_end_matches("/10").trim().parse().ok()?,
        _ => return None,
    };
    (0.0..=10.0).contains(&n).then(|| (n * 10.0).round() / 10.0)
}

/// The score a `Name: N` line (or table row `| Name | N |`) states after its name: `7`,
/// `8/10`, `**6.5**`, `7 out of 10`. A range (`7-8`, the guideline's `9-10`) or another scale
/// (`4/5`) states none.
fn line_score(line_rest: &str) -> Option<f64> {
    let rest = line_rest.trim_start_matches([' ', ':', '-', '—', '–', '=', '|', '*', '_', '`']);
    // A minus sign just before the number (`: -3`) makes it negative: no score.
    if line_rest[..line_rest.len() - rest.len()].ends_with(['-', '–'])
        && rest.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    let rest = rest.trim();
    let len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (num, after) = rest.split_at(len);
    let num = num.trim_end_matches('.');
    if num.is_empty() {
        return None;
    }
    let after = after.trim_start_matches(['*', '_', ' ']);
    // A range: `7-8`, `7 – 8`.
    let range = after.strip_prefix(['-', '–']);
    if range.is_some_and(|r| r.trim_start().starts_with(|c: char| c.is_ascii_digit())) {
        return None;
    }
    let scale = after
        .strip_prefix('/')
        .or_else(|| after.strip_prefix("out of"))
        .map(|s| s.trim_start_matches(['*', '_', ' ']));
    if let Some(scale) = scale {
        let n = scale.find(|c: char| !c.is_ascii_digit()).unwrap_or(scale.len());
        if scale[..n] != *"10" {
            return None;
        }
    }
    score_value(&Value::String(num.to_string()))
}

/// Scores by dimension, from the answer part of a reply: the last JSON object with `scores`,
/// else `Dimension: N` lines or table rows (the last line naming a dimension wins). A draft
/// scorecard in a `<think>` block never counts; a reply whose reasoning never closed has
/// none.
pub fn parse_scores(text: &str) -> ([Option<f64>; 7], Option<Value>) {
    let split = split_reasoning(text);
    if split.unclosed {
        return ([None; 7], None);
    }
    let text = split.answer.as_ref();
    if let Some(obj) = last_json_object(text) {
        let scores = &obj["scores"];
        let s = std::array::from_fn(|i| {
            let d = &DIMENSIONS[i];
            scores.get(d.key).or_else(|| scores.get(d.name)).and_then(score_value)
        });
        return (s, Some(obj));
    }
    let s = std::array::from_fn(|i| {
        let d = &DIMENSIONS[i];
        text.lines().rev().find_map(|line| {
            let l = line.trim().trim_start_matches(['-', '*', ' ', '|']).replace("**", "");
            let lower = l.to_lowercase();
            let rest = [d.name.to_lowercase(), d.key.to_lowercase()]
                .iter()
                .find_map(|n| lower.strip_prefix(n.as_str()).map(|r| r.to_string()))?;
            line_score(&rest)
        })
    });
    (s, None)
}

/// One issue an evaluator raised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    pub dimension: String,
    pub issue: String,
    pub suggested_fix: String,
    pub quote: String,
    pub severity: String,
}

fn issues_of(obj: Option<&Value>) -> Vec<Issue> {
    let Some(list) = obj.and_then(|o| o.get("issues")).and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|i| {
            let s = |k: &str| i.get(k).and_then(Value::as_str).unwrap_or("").trim().to_string();
            let issue = s("issue");
            (!issue.is_empty()).then(|| Issue {
                dimension: s("dimension"),
                issue,
                suggested_fix: s("suggestedFix"),
                quote: s("quote"),
                severity: match s("severity").to_lowercase().as_str() {
                    "high" => "high".into(),
                    "low" => "low".into(),
                    _ => "medium".into(),
                },
            })
        })
        .take(20)
        .collect()
}

/// An evaluator's scorecard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub role: String,
    pub model: String,
    #[serde(with = "score_map")]
    pub scores: [Option<f64>; 7],
    pub overall: Option<f64>,
    pub critique: String,
    pub issues: Vec<Issue>,
    pub justification: Option<String>,
    pub response_time_ms: i64,
    pub parse_success: bool,
    /// Why the scorecard could not be read (fewer than four scores): `refused`,
    /// `reasoning_only` or `no_answer`. Null when it was.
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
    /// Where the scorecard was read from (the reply's JSON or its text), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// Scores as `{dimensionKey: score}` in JSON.
mod score_map {
    use super::DIMENSIONS;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(s: &[Option<f64>; 7], ser: S) -> Result<S::Ok, S::Error> {
        let m: BTreeMap<&str, Option<f64>> =
            DIMENSIONS.iter().zip(s).map(|(d, v)| (d.key, *v)).collect();
        m.serialize(ser)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<[Option<f64>; 7], D::Error> {
        let m = BTreeMap::<String, Option<f64>>::deserialize(de)?;
        Ok(std::array::from_fn(|i| m.get(DIMENSIONS[i].key).copied().flatten()))
    }
}

/// The weighted overall score over the dimensions that have a score, one decimal.
pub fn weighted(scores: &[Option<f64>; 7]) -> Option<f64> {
    let (sum, weight) = DIMENSIONS
        .iter()
        .zip(scores)
        .filter_map(|(d, s)| s.map(|s| (d.weight * s, d.weight)))
        .fold((0.0, 0.0), |(a, w), (x, y)| (a + x, w + y));
    (weight > 0.0).then(|| ((sum / weight) * 10.0).round() / 10.0)
}

/// An evaluator's scorecard read by the text readers (the JSON object the spec's format asks
/// for, found in any prose, else `Dimension: N` lines); None when the call failed.
pub fn read_verdict(role: &str, reply: &CallReply) -> Option<Verdict> {
    let text = reply.result.as_ref().ok()?;
    let (scores, obj) = parse_scores(text);
    let readable = scores.iter().filter(|s| s.is_some()).count();
    let s =
        |k: &str| obj.as_ref().and_then(|o| o.get(k)).and_then(Value::as_str).map(str::to_string);
    // Without a critique field, the start of the answer (never of the reasoning).
    let answer = split_reasoning(text).answer;
    Some(Verdict {
        role: role.to_string(),
        model: reply.model.clone(),
        overall: weighted(&scores),
        critique: s("critique").unwrap_or_else(|| answer.chars().take(600).collect()),
        issues: issues_of(obj.as_ref()),
        justification: s("justification"),
        scores,
        response_time_ms: reply.response_time_ms as i64,
        parse_success: readable >= 4,
        unparsed: (readable < 4).then(|| Unparsed::of(text)),
        read_from: (readable >= 4).then_some(ReadFrom::Text),
    })
}

/// The name of an evaluator's first scorecard's schema.
pub const SCORECARD_SCHEMA: &str = "clarity_scorecard";
/// The name of a revised scorecard's schema (the discussion round's).
pub const DISCUSSION_SCHEMA: &str = "clarity_discussion";
/// The name of the Arbiter's ruling's schema.
pub const RULING_SCHEMA: &str = "clarity_ruling";

/// The free-text fields' bounds: a critique or justification is "a short paragraph", an
/// issue's fields a sentence or a quote; at most [`MAX_ISSUES`] issues (the consolidated
/// critique keeps five). Bounded so a small model looping in a string or a list still closes
/// the object within its output cap.
const PARAGRAPH_MAX_CHARS: usize = 600;
const SENTENCE_MAX_CHARS: usize = 300;
const MAX_ISSUES: usize = 5;

/// A score from 0 to 10 for each of `keys`, the dimension keys the prompt lists beside their
/// names (a description per score would only repeat that list).
fn scores_schema<'a>(keys: impl IntoIterator<Item = &'a str>) -> serde_json::Value {
    schema::object(keys.into_iter().map(|k| (k, schema::number(0.0, 10.0))))
}

/// An evaluator's scorecard schema: its reasoning, a 0-10 score per dimension, the critique,
/// the issues (each naming one of the dimensions, its severity one of the three words) and,
/// for the discussion round, why it revised or kept its scores.
fn scorecard_schema(name: &str, discussion: bool) -> Arc<ReplySchema> {
    let keys: Vec<&str> = DIMENSIONS.iter().map(|d| d.key).collect();
    let issue = schema::object([
        ("dimension", schema::described(schema::one_of(&keys), "the dimension concerned")),
        ("issue", schema::described(schema::text(SENTENCE_MAX_CHARS), "what is wrong")),
        ("suggestedFix", schema::described(schema::text(SENTENCE_MAX_CHARS), "how to fix it")),
        (
            "quote",
            schema::described(
                schema::text(SENTENCE_MAX_CHARS),
                "the exact words of the brief concerned",
            ),
        ),
        ("severity", schema::one_of(&["high", "medium", "low"])),
    ]);
    let mut fields = vec![
        (
            "scores",
            schema::described(
                scores_schema(keys.iter().copied()),
                "your score from 0 to 10 per dimension",
            ),
        ),
        (
            "critique",
            schema::described(
                schema::text(PARAGRAPH_MAX_CHARS),
                "a short paragraph explaining your scores",
            ),
        ),
        (
            "issues",
            schema::described(
                schema::list(issue, 0, MAX_ISSUES),
                "the brief's problems, most important first",
            ),
        ),
    ];
    if discussion {
        fields.push((
            "justification",
            schema::described(
                schema::text(PARAGRAPH_MAX_CHARS),
                "why you revised or kept your scores",
            ),
        ));
    }
    ReplySchema::new(name, schema::reasoned(fields))
}

/// The first round's scorecard schema (the same for every run and persona).
pub fn evaluation_schema() -> Arc<ReplySchema> {
    scorecard_schema(SCORECARD_SCHEMA, false)
}

/// The discussion round's scorecard schema: the first's, with a `justification`.
pub fn discussion_schema() -> Arc<ReplySchema> {
    scorecard_schema(DISCUSSION_SCHEMA, true)
}

/// The Arbiter's ruling schema: its reasoning, then a 0-10 score for exactly the disputed
/// dimensions.
pub fn ruling_schema(disputed: &[String]) -> Arc<ReplySchema> {
    ReplySchema::new(
        RULING_SCHEMA,
        schema::reasoned([(
            "scores",
            schema::described(
                scores_schema(disputed.iter().map(String::as_str)),
                "your definitive score from 0 to 10 for each disputed dimension",
            ),
        )]),
    )
}

/// A scorecard from the reply's JSON, when it fits `schema` and every score reads as the text
/// reader reads it (0 to 10, one decimal): all seven dimensions, so it always counts.
fn json_verdict(
    role: &str,
    reply: &CallReply,
    text: &str,
    schema: &ReplySchema,
) -> Option<Verdict> {
    let obj = schema.read(text)?;
    let given = obj.get("scores")?;
    let read: Vec<f64> =
        DIMENSIONS.iter().map(|d| given.get(d.key).and_then(score_value)).collect::<Option<_>>()?;
    let scores: [Option<f64>; 7] = std::array::from_fn(|i| Some(read[i]));
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Verdict {
        role: role.to_string(),
        model: reply.model.clone(),
        overall: weighted(&scores),
        critique: s("critique").unwrap_or_default(),
        issues: issues_of(Some(&obj)),
        justification: s("justification"),
        scores,
        response_time_ms: reply.response_time_ms as i64,
        parse_success: true,
        unparsed: None,
        read_from: Some(ReadFrom::Json),
    })
}

/// An evaluator's scorecard read from its JSON when it fits `schema`, else by the text
/// readers ([`read_verdict`]); None when the call failed.
pub fn read_verdict_reply(role: &str, reply: &CallReply, schema: &ReplySchema) -> Option<Verdict> {
    let text = reply.result.as_ref().ok()?;
    json_verdict(role, reply, text, schema).or_else(|| read_verdict(role, reply))
}

/// What the Arbiter ruled: its score per disputed dimension it scored, its reasoning, and
/// where they were read from (None when no disputed dimension was scored).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruling {
    pub scores: BTreeMap<String, f64>,
    pub reasoning: Option<String>,
    pub read_from: Option<ReadFrom>,
}

/// The Arbiter's reply read from its JSON when it fits `schema` (every disputed dimension
/// scored 0-10), else by the text reader, which keeps the disputed dimensions it finds.
pub fn read_ruling(text: &str, disputed: &[String], schema: &ReplySchema) -> Ruling {
    let from_json = schema.read(text).and_then(|obj| {
        let given = obj.get("scores")?;
        let scores = disputed
            .iter()
            .map(|k| given.get(k).and_then(score_value).map(|s| (k.clone(), s)))
            .collect::<Option<BTreeMap<_, _>>>()?;
        let reasoning = obj.get(schema::REASONING).and_then(Value::as_str).map(str::to_string);
        (!scores.is_empty()).then_some(Ruling {
            scores,
            reasoning,
            read_from: Some(ReadFrom::Json),
        })
    });
    if let Some(r) = from_json {
        return r;
    }
    let (scores, obj) = parse_scores(text);
    let scores: BTreeMap<String, f64> = DIMENSIONS
        .iter()
        .zip(scores)
        .filter(|(dim, _)| disputed.iter().any(|k| k == dim.key))
        .filter_map(|(dim, s)| s.map(|s| (dim.key.to_string(), s)))
        .collect();
    let reasoning =
        obj.as_ref().and_then(|o| o.get("reasoning")).and_then(Value::as_str).map(str::to_string);
    let read_from = (!scores.is_empty()).then_some(ReadFrom::Text);
    Ruling { scores, reasoning, read_from }
}

// ---- the sim ----------------------------------------------------------------------------------

/// Clarity's sim answer to its three schemas (None for any other prompt or schema): the text
/// sim's evaluators and Arbiter in JSON. The brief sets the level, each persona leans on its
/// focus (for about half the briefs the Skeptic finds the evidence far weaker than the others
/// do), a discussion moves each score toward the panel's middle and the Arbiter rules the
/// median, so runs take each path (median, post-discussion, arbiter) as they do in text.
fn sim_answer(ask: &SimAsk) -> Option<String> {
    let schema = ask.schema.filter(|s| {
        [SCORECARD_SCHEMA, DISCUSSION_SCHEMA, RULING_SCHEMA].contains(&s.name.as_str())
    })?;
    let reply = if schema.name == RULING_SCHEMA {
        sim_ruling(ask, schema)
    } else {
        sim_scorecard(ask, schema.name == DISCUSSION_SCHEMA)
    };
    debug_assert!(schema.validate(&reply).is_ok(), "{reply}");
    Some(reply.to_string())
}

/// The scores the panel gave dimension `key`, read back from the prompt's `SCORES BY
/// EVALUATOR:` lines (`- Name (key): skeptic 7, advocate 8, generalist -`).
fn panel_scores(prompt: &str, key: &str) -> Vec<f64> {
    let line = prompt.lines().find(|l| l.contains(&format!("({key}):"))).unwrap_or("");
    let mut v: Vec<f64> = line
        .split(": ")
        .nth(1)
        .unwrap_or("")
        .split(", ")
        .filter_map(|x| x.split(' ').nth(1)?.parse().ok())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// `text` cut to a schema's `maxLength` (in characters, as the schema counts them).
fn cut(text: String, max: usize) -> String {
    text.chars().take(max).collect()
}

/// An evaluator's sim scorecard, its persona read from the system prompt (as the text sim
/// reads it) and its brief from the prompt, so the JSON and text sims score a brief alike.
fn sim_scorecard(ask: &SimAsk, discussion: bool) -> Value {
    use crate::modes::sim_text::seed_of;
    let system =
        ask.messages.iter().find(|m| m.role == "system").map_or("", |m| m.content.as_str());
    let who = PERSONAS
        .iter()
        .find(|p| system.starts_with(p.system_prompt))
        .map_or("Generalist", |p| p.name);
    let end = if discussion { "\nSCORES BY EVALUATOR:" } else { "\nDIMENSIONS:" };
    let brief = between(ask.prompt, "BRIEF:\n", end);
    let level = 5.0 + (seed_of(&[brief]) % 4) as f64;
    let contested = seed_of(&[brief, "contested"]).is_multiple_of(2);
    let mut r = SplitMix64::new(ask.seed);
    let mut scores = serde_json::Map::new();
    for (i, d) in DIMENSIONS.iter().enumerate() {
        let bias = crate::modes::sim_text::clarity_bias(who, i, contested);
        let mut score: f64 = (level + bias + r.below(3) as f64 - 1.0).clamp(0.0, 10.0);
        if discussion {
            let others = panel_scores(ask.prompt, d.key);
            if let Some(mid) = others.get(others.len() / 2) {
                let pull = if who == "Skeptic" { 0.3 } else { 0.6 };
                score = (score + (mid - score) * pull).round();
            }
        }
        scores.insert(d.key.to_string(), json!(score));
    }
    let quote =
        cut(brief.split_whitespace().take(8).collect::<Vec<_>>().join(" "), SENTENCE_MAX_CHARS);
    let (dim, issue, fix) = crate::modes::sim_text::clarity_issue(who);
    let (shared_dim, shared_issue, shared_fix) = crate::modes::sim_text::CLARITY_SHARED_ISSUE;
    let level_word = if level >= 7.0 { "solid" } else { "uneven" };
    let mut reply = json!({
        "reasoning": cut(format!("[simulated {who} scorecard from {}] {}Weighing the brief against each dimension's guideline.", ask.model, ask.hostile_paragraph()), schema::REASONING_MAX_CHARS),
        "scores": scores,
        "critique": cut(format!("As the {who} I find the brief {level_word}. {}", ask.hostile_paragraph()).trim_end().to_string(), PARAGRAPH_MAX_CHARS),
        "issues": [
            { "dimension": dim, "issue": issue, "suggestedFix": fix, "quote": quote, "severity": "high" },
            { "dimension": shared_dim, "issue": shared_issue, "suggestedFix": shared_fix, "quote": quote, "severity": "medium" },
        ],
    });
    if discussion {
        reply["justification"] =
            json!("I moved toward the panel where their reasons were convincing.");
    }
    reply
}

/// The sim Arbiter's ruling: the panel's median on each dimension its schema asks for (the
/// schema names exactly the disputed ones).
fn sim_ruling(ask: &SimAsk, schema: &ReplySchema) -> Value {
    let keys = schema.schema["properties"]["scores"]["properties"].as_object();
    let scores: serde_json::Map<String, Value> = keys
        .into_iter()
        .flatten()
        .map(|(k, _)| {
            let v = panel_scores(ask.prompt, k);
            (k.clone(), json!(v.get(v.len() / 2).copied().unwrap_or(5.0)))
        })
        .collect();
    json!({
        "reasoning": cut(format!("[simulated arbitration from {}] {}Weighing the evaluators' positions against the brief itself.", ask.model, ask.hostile_paragraph()), schema::REASONING_MAX_CHARS),
        "scores": scores,
    })
}

// ---- disagreement, final score, critique ----------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    pub has_disagreement: bool,
    pub disagreeing_dimensions: Vec<String>,
    pub max_spread: f64,
    pub overall_spread: f64,
    pub spreads: BTreeMap<String, f64>,
    /// role -> dimension -> score.
    pub evaluator_positions: BTreeMap<String, BTreeMap<String, Option<f64>>>,
}

fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    if v.len() < 2 {
        return 0.0;
    }
    let max = v.iter().cloned().fold(f64::MIN, f64::max);
    let min = v.iter().cloned().fold(f64::MAX, f64::min);
    ((max - min) * 10.0).round() / 10.0
}

/// The PRD's `detectDisagreement`: a spread > 2 on any dimension or overall.
pub fn detect_disagreement(verdicts: &[Verdict]) -> Disagreement {
    let mut spreads = BTreeMap::new();
    let mut disagreeing = Vec::new();
    for (i, d) in DIMENSIONS.iter().enumerate() {
        let s = spread(verdicts.iter().filter_map(|v| v.scores[i]));
        if s > DISAGREEMENT_SPREAD {
            disagreeing.push(d.key.to_string());
        }
        spreads.insert(d.key.to_string(), s);
    }
    let overall_spread = spread(verdicts.iter().filter_map(|v| v.overall));
    let max_spread = spreads.values().cloned().fold(overall_spread, f64::max);
    let evaluator_positions = verdicts
        .iter()
        .map(|v| {
            (
                v.role.clone(),
                DIMENSIONS.iter().zip(&v.scores).map(|(d, s)| (d.key.to_string(), *s)).collect(),
            )
        })
        .collect();
    Disagreement {
        has_disagreement: !disagreeing.is_empty() || overall_spread > DISAGREEMENT_SPREAD,
        disagreeing_dimensions: disagreeing,
        max_spread,
        overall_spread,
        spreads,
        evaluator_positions,
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n.is_multiple_of(2) { (v[n / 2 - 1] + v[n / 2]) / 2.0 } else { v[n / 2] })
}

/// Per-dimension final scores: the median of the evaluators' (current) scores, except on
/// disputed dimensions the Arbiter scored, where it counts 1.5 times against one each.
pub fn final_scores(verdicts: &[Verdict], arbiter: &BTreeMap<String, f64>) -> [Option<f64>; 7] {
    std::array::from_fn(|i| {
        let values: Vec<f64> = verdicts.iter().filter_map(|v| v.scores[i]).collect();
        let s = match arbiter.get(DIMENSIONS[i].key) {
            Some(a) => Some(
                (values.iter().sum::<f64>() + ARBITER_WEIGHT * a)
                    / (values.len() as f64 + ARBITER_WEIGHT),
            ),
            None => median(values),
        };
        s.map(|x| (x * 10.0).round() / 10.0)
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CritiqueItem {
    pub dimension: String,
    pub issue: String,
    pub suggested_fix: String,
    pub quote: String,
    pub priority: String,
    /// The personas that raised it.
    pub flagged_by: Vec<String>,
}

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_string)
        .collect()
}

fn similar(a: &Issue, b: &Issue) -> bool {
    if a.dimension != b.dimension {
        return false;
    }
    let (wa, wb) = (words(&a.issue), words(&b.issue));
    let shared = wa.iter().filter(|w| wb.contains(w)).count();
    shared * 2 >= wa.len().min(wb.len()).max(1)
}

/// Merges the evaluators' issues, de-duplicates similar ones (same dimension, mostly the same
/// words), ranks them by agreement, then severity (how far the dimension's score falls short,
/// times its weight, plus the stated severity), then actionability (a fix and a quote), and
/// keeps the top 5.
pub fn consolidate(verdicts: &[Verdict], scores: &[Option<f64>; 7]) -> Vec<CritiqueItem> {
    let mut groups: Vec<(Issue, Vec<String>)> = Vec::new();
    for v in verdicts {
        for issue in &v.issues {
            match groups.iter_mut().find(|(g, _)| similar(g, issue)) {
                Some((g, by)) => {
                    if !by.contains(&v.role) {
                        by.push(v.role.clone());
                    }
                    if g.suggested_fix.is_empty() {
                        g.suggested_fix = issue.suggested_fix.clone();
                    }
                    if g.quote.is_empty() {
                        g.quote = issue.quote.clone();
                    }
                    if issue.severity == "high" {
                        g.severity = "high".into();
                    }
                }
                None => groups.push((issue.clone(), vec![v.role.clone()])),
            }
        }
    }
    let impact = |i: &Issue| {
        let dim = DIMENSIONS.iter().position(|d| d.key == i.dimension);
        let shortfall =
            dim.and_then(|d| scores[d].map(|s| (10.0 - s) * DIMENSIONS[d].weight)).unwrap_or(0.0);
        let stated = match i.severity.as_str() {
            "high" => 1.0,
            "low" => 0.0,
            _ => 0.5,
        };
        shortfall + stated
    };
    let actionable =
        |i: &Issue| usize::from(!i.suggested_fix.is_empty()) + usize::from(!i.quote.is_empty());
    groups.sort_by(|(a, ba), (b, bb)| {
        bb.len()
            .cmp(&ba.len())
            .then(impact(b).total_cmp(&impact(a)))
            .then(actionable(b).cmp(&actionable(a)))
    });
    groups
        .into_iter()
        .take(5)
        .map(|(i, by)| {
            let priority = if by.len() >= 3 || (by.len() == 2 && i.severity == "high") {
                "high"
            } else if by.len() == 2 || i.severity == "high" {
                "medium"
            } else {
                "low"
            };
            CritiqueItem {
                dimension: i.dimension,
                issue: i.issue,
                suggested_fix: i.suggested_fix,
                quote: i.quote,
                priority: priority.into(),
                flagged_by: by,
            }
        })
        .collect()
}

/// Why a run needs a person: the disputed dimensions and where each evaluator stood.
pub fn review_reason(d: &Disagreement) -> String {
    let parts: Vec<String> = d
        .disagreeing_dimensions
        .iter()
        .map(|k| {
            let name = DIMENSIONS.iter().find(|x| x.key == k).map_or(k.as_str(), |x| x.name);
            let pos: Vec<String> = d
                .evaluator_positions
                .iter()
                .map(|(role, s)| {
                    format!(
                        "{role} {}",
                        s.get(k).copied().flatten().map_or("-".into(), |x| format!("{x}"))
                    )
                })
                .collect();
            format!("{name} ({})", pos.join(", "))
        })
        .collect();
    let dims = if parts.is_empty() { "the overall score".to_string() } else { parts.join("; ") };
    format!("Evaluators still disagreed after discussion (spread above {DISAGREEMENT_SPREAD}) on {dims}; the Arbiter was called.")
}

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Evaluating,
    Discussing,
    Arbitrating,
    Done,
}

pub struct Clarity {
    config: ClarityConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    initial: Vec<Verdict>,
    current: Vec<Verdict>,
    first_disagreement: Option<Disagreement>,
    discussion_ran: bool,
    title: TitleTracker,
    calls: Calls,
    /// The backup Arbiter, when the server configures one.
    arbiter_fallback: Option<String>,
    /// The reply schemas of the two scoring rounds, built once for the run, and the Arbiter's,
    /// once the disputed dimensions are known.
    evaluation_schema: Arc<ReplySchema>,
    discussion_schema: Arc<ReplySchema>,
    ruling_schema: Option<Arc<ReplySchema>>,
}

impl Clarity {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let arbiter_fallback =
            config.get(ARBITER_FALLBACK_KEY).and_then(Value::as_str).map(str::to_string);
        let config: ClarityConfig = stored_config("clarity", config)?;
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(Clarity {
            config,
            ctx,
            phase: Phase::Evaluating,
            batch: Batch::new("evaluate", 3),
            initial: Vec::new(),
            current: Vec::new(),
            first_disagreement: None,
            discussion_ran: false,
            title,
            calls: Calls::default(),
            arbiter_fallback,
            evaluation_schema: evaluation_schema(),
            discussion_schema: discussion_schema(),
            ruling_schema: None,
        })
    }

    fn model(&self, role: &str) -> String {
        self.config.models.get(role).cloned().unwrap_or_else(|| SIM_DEFAULT.into())
    }

    /// A call of `role`'s model under its persona's `system` prompt, asked `prompt` in the form
    /// its route takes (`prompt(None)` the spec's, `prompt(Some(schema))` the schema's) and read
    /// by `schema`; the brief and `quoted` named as its quoted material.
    fn call(
        &self,
        spec: (String, &str, &str),
        prompt: impl Fn(Option<&ReplySchema>) -> String,
        schema: &Arc<ReplySchema>,
        quoted: Vec<(String, String)>,
    ) -> CallSpec {
        let (key, role, stage) = spec;
        let model = self.model(role);
        let system =
            PERSONAS.iter().find(|p| p.role == role).map_or(ARBITER_PROMPT, |p| p.system_prompt);
        let asked = self.ctx.structured.json(&model).then_some(schema.as_ref());
        CallSpec::new(
            key,
            &model,
            vec![ChatMessage::system(system), ChatMessage::user(prompt(asked))],
            stage,
            role,
            self.config.timeout_ms,
        )
        .with_schema(schema)
        .quoting(self.brief_material().into_iter().chain(quoted))
    }

    /// The brief (and its context) as every Clarity prompt quotes it.
    fn brief_material(&self) -> Vec<(String, String)> {
        let mut m = vec![("the brief".to_string(), self.config.content.clone())];
        if let Some(c) = &self.config.context {
            m.push(("the brief's context".to_string(), c.clone()));
        }
        m
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message)
    }

    fn verdict_row(stage_type: &str, order: i32, v: &Verdict, text: &str) -> Effect {
        Effect::Store(StageRow {
            stage_type: stage_type.into(),
            stage_order: order,
            model: Some(v.model.clone()),
            role: Some(v.role.clone()),
            content: text.to_string(),
            parsed_data: Some(json!(v)),
            response_time_ms: Some(v.response_time_ms),
        })
    }

    fn on_evaluation(&mut self, reply: CallReply) -> Vec<Effect> {
        let mut out = Vec::new();
        let index =
            reply.key.strip_prefix("evaluate:").and_then(|i| i.parse::<usize>().ok()).unwrap_or(0);
        let schema = self.evaluation_schema.clone();
        if let Some(v) =
            PERSONAS.get(index).and_then(|p| read_verdict_reply(p.role, &reply, &schema))
        {
            out.push(Self::verdict_row("evaluation", 1, &v, reply.result.as_deref().unwrap_or("")));
            out.push(Effect::emit("evaluator_complete", json!({ "data": v })));
        }
        if !self.batch.accept(reply) || !self.batch.complete() {
            return out;
        }
        let replies = self.batch.take();
        self.initial = replies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| read_verdict_reply(PERSONAS[i].role, r, &schema))
            .filter(|v| v.parse_success)
            .collect();
        if self.initial.len() < 2 {
            out.extend(self.fail("Fewer than 2 evaluators returned readable scores.".into()));
            return out;
        }
        self.current = self.initial.clone();
        let d = detect_disagreement(&self.initial);
        out.push(Effect::Store(StageRow::computed("disagreement", 2, json!(d))));
        if d.has_disagreement {
            out.push(Effect::emit("disagreement_detected", json!({ "data": d })));
        }
        let discuss = match self.config.discussion {
            Discussion::Always => true,
            Discussion::Never => false,
            Discussion::Auto => d.max_spread > AGREEMENT_SPREAD,
        };
        self.first_disagreement = Some(d.clone());
        if discuss {
            self.discussion_ran = true;
            self.phase = Phase::Discussing;
            self.batch = Batch::new("discuss", self.current.len());
            out.push(Effect::emit(
                "discussion_start",
                json!({ "data": { "maxSpread": d.max_spread } }),
            ));
            let schema = self.discussion_schema.clone();
            let quoted = vec![("the critiques".to_string(), critiques(&self.current))];
            for (i, v) in self.current.iter().enumerate() {
                let Some(p) = PERSONAS.iter().find(|p| p.role == v.role) else { continue };
                let call = self.call(
                    (self.batch.key(i), p.role, "discussion"),
                    |json| discussion_prompt_as(&self.config, p, &self.current, json),
                    &schema,
                    quoted.clone(),
                );
                out.push(Effect::Call(call));
            }
            return out;
        }
        out.extend(self.after_discussion(d));
        out
    }

    fn on_discussion(&mut self) -> Vec<Effect> {
        let replies = self.batch.take();
        let mut out = Vec::new();
        let mut changes = Vec::new();
        for (i, before) in self.current.clone().iter().enumerate() {
            let reply = replies.get(i);
            let read =
                reply.and_then(|r| read_verdict_reply(&before.role, r, &self.discussion_schema));
            match read {
                Some(mut v) if v.parse_success => {
                    // A dimension left out of the revision keeps its earlier score.
                    for k in 0..7 {
                        if v.scores[k].is_none() {
                            v.scores[k] = before.scores[k];
                        }
                    }
                    v.overall = weighted(&v.scores);
                    let changed: Vec<&str> =
                        DIMENSIONS.iter().enumerate().filter(|(k, _)| v.scores[*k] != before.scores[*k]).map(|(_, d)| d.key).collect();
                    changes.push(json!({ "role": v.role, "changedDimensions": changed, "justification": v.justification }));
                    out.push(Self::verdict_row("discussion", 3, &v, replies[i].result.as_deref().unwrap_or("")));
                    self.current[i] = v;
                }
                // A reply that could not be read is kept (its raw text and why), and the
                // evaluator keeps its first verdict.
                Some(v) => {
                    changes.push(json!({ "role": before.role, "changedDimensions": [], "justification": null, "failed": true, "unparsed": v.unparsed }));
                    out.push(Self::verdict_row("discussion", 3, &v, replies[i].result.as_deref().unwrap_or("")));
                }
                None => changes.push(json!({ "role": before.role, "changedDimensions": [], "justification": null, "failed": true })),
            }
        }
        let d = detect_disagreement(&self.current);
        out.push(Effect::emit(
            "discussion_complete",
            json!({ "data": { "verdicts": self.current, "changes": changes, "disagreement": d } }),
        ));
        out.extend(self.after_discussion(d));
        out
    }

    fn after_discussion(&mut self, d: Disagreement) -> Vec<Effect> {
        if !d.has_disagreement {
            return self.score(&BTreeMap::new(), None, &d);
        }
        // Dimensions to arbitrate: those still above the spread, or all when only the overall
        // score is disputed.
        let disputed = if d.disagreeing_dimensions.is_empty() {
            DIMENSIONS.iter().map(|x| x.key.to_string()).collect()
        } else {
            d.disagreeing_dimensions.clone()
        };
        let summary: Vec<String> = self
            .current
            .iter()
            .map(|v| {
                format!(
                    "{}: {}",
                    v.role,
                    v.justification.clone().unwrap_or_else(|| v.critique.clone())
                )
            })
            .collect();
        self.phase = Phase::Arbitrating;
        self.first_disagreement =
            Some(Disagreement { disagreeing_dimensions: disputed.clone(), ..d });
        let summary = summary.join("\n");
        let schema = ruling_schema(&disputed);
        // The backup takes the same prompt and schema: it is asked as the Arbiter is.
        let spec = self.call(
            ("arbiter".to_string(), "arbiter", "arbiter"),
            |json| arbiter_prompt_as(&self.config, &self.current, &disputed, &summary, json),
            &schema,
            vec![("the discussion summary".to_string(), summary.clone())],
        );
        self.ruling_schema = Some(schema);
        let backup = self.arbiter_fallback.clone();
        vec![
            Effect::emit(
                "arbiter_start",
                json!({ "data": { "disputedDimensions": disputed, "model": self.model("arbiter") } }),
            ),
            self.calls.solo(spec, 4, backup.as_deref()),
        ]
    }

    fn on_arbiter(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        let Some(d) = self.first_disagreement.clone() else {
            return self.fail("internal error: no disagreement".into());
        };
        let mut out = Vec::new();
        let disputed = &d.disagreeing_dimensions;
        let schema = self.ruling_schema.clone().unwrap_or_else(|| ruling_schema(disputed));
        let ruling = reply
            .result
            .as_deref()
            .map(|text| read_ruling(text, disputed, &schema))
            .unwrap_or_default();
        let arbiter = ruling.scores;
        let mut data = json!({ "model": reply.model, "scores": arbiter, "reasoning": ruling.reasoning,
                           "responseTimeMs": reply.response_time_ms,
                           "error": reply.result.as_ref().err().map(|e| e.message.clone()) });
        if let Some(from) = ruling.read_from {
            data["readFrom"] = json!(from);
        }
        // An Arbiter that answered without a readable score for a disputed dimension: why.
        data["unparsed"] = match &reply.result {
            Ok(text) if arbiter.is_empty() => json!(Unparsed::of(text)),
            _ => Value::Null,
        };
        // Only a backup that answered stands in for the Arbiter.
        if let Some(from) = fallback_from.filter(|_| reply.result.is_ok()) {
            data["fallbackFrom"] = json!(from);
        }
        if let Ok(text) = &reply.result {
            out.push(Effect::Store(StageRow {
                stage_type: "arbiter".into(),
                stage_order: 4,
                model: Some(reply.model.clone()),
                role: Some("arbiter".into()),
                content: text.clone(),
                parsed_data: Some(data.clone()),
                response_time_ms: Some(reply.response_time_ms as i64),
            }));
        }
        out.push(Effect::emit("arbiter_complete", json!({ "data": data })));
        out.extend(self.score(&arbiter, Some(review_reason(&d)), &d));
        out
    }

    fn score(
        &mut self,
        arbiter: &BTreeMap<String, f64>,
        review: Option<String>,
        last: &Disagreement,
    ) -> Vec<Effect> {
        let scores = final_scores(&self.current, arbiter);
        let method = if review.is_some() && !arbiter.is_empty() {
            "arbiter"
        } else if self.discussion_ran {
            "post_discussion"
        } else {
            "median"
        };
        let overall = weighted(&scores).unwrap_or(0.0);
        let breakdown: Vec<Value> = DIMENSIONS
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let by: BTreeMap<&str, Option<f64>> =
                    self.current.iter().map(|v| (v.role.as_str(), v.scores[i])).collect();
                json!({ "dimension": d.key, "name": d.name, "weight": d.weight, "score": scores[i],
                        "evaluatorScores": by, "arbiterScore": arbiter.get(d.key) })
            })
            .collect();
        let critique = consolidate(&self.current, &scores);
        let result = json!({
            "score": overall, "method": method, "breakdown": breakdown, "critique": critique,
            "needsHumanReview": review.is_some(), "reviewReason": review,
            "discussionRan": self.discussion_ran,
            "initialDisagreement": self.first_disagreement_initial(), "finalDisagreement": last,
            "verdicts": self.current,
        });
        let mut answer =
            format!("Clarity score: {overall:.1}/10 (method: {})\n\n", method.replace('_', "-"));
        for (i, d) in DIMENSIONS.iter().enumerate() {
            answer.push_str(&format!(
                "- {} ({:.0}%): {}\n",
                d.name,
                d.weight * 100.0,
                scores[i].map_or("-".into(), |s| format!("{s:.1}"))
            ));
        }
        if !critique.is_empty() {
            answer.push_str("\nTop issues:\n");
            for (n, c) in critique.iter().enumerate() {
                answer.push_str(&format!(
                    "{}. [{}] {}: {} Fix: {}\n",
                    n + 1,
                    c.priority,
                    // The dimension by its name for people; a key the list does not know, as is.
                    DIMENSIONS
                        .iter()
                        .find(|d| d.key == c.dimension)
                        .map_or(c.dimension.as_str(), |d| d.name),
                    c.issue,
                    c.suggested_fix
                ));
            }
        }
        if let Some(r) = &review {
            answer.push_str(&format!("\nFlagged for human review: {r}\n"));
        }
        let mut out = vec![
            Effect::Store(StageRow::computed("score", 5, result.clone())),
            Effect::emit("score_complete", {
                let mut done = json!({ "data": result });
                self.calls.mark(&mut done);
                done
            }),
        ];
        if let Some(r) = review {
            out.push(Effect::FlagForReview { reason: r });
        }
        self.phase = Phase::Done;
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer });
        out
    }

    /// The disagreement found before any discussion.
    fn first_disagreement_initial(&self) -> Disagreement {
        detect_disagreement(&self.initial)
    }
}

impl Mode for Clarity {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::emit(
                "clarity_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id, "mode": "clarity",
                        "models": self.config.models }),
            ),
            Effect::Store(StageRow {
                stage_type: "brief".into(),
                stage_order: 0,
                model: None,
                role: None,
                content: self.config.content.clone(),
                parsed_data: Some(
                    json!({ "title": self.config.title, "context": self.config.context }),
                ),
                response_time_ms: None,
            }),
        ];
        let schema = self.evaluation_schema.clone();
        for (i, p) in PERSONAS.iter().enumerate() {
            let call = self.call(
                (self.batch.key(i), p.role, "evaluation"),
                |json| evaluation_prompt_as(&self.config, p, json),
                &schema,
                Vec::new(),
            );
            out.push(Effect::Call(call));
        }
        let model = self.model("generalist");
        out.extend(self.title.call(
            &model,
            title_prompt(&self.config.content),
            self.config.timeout_ms,
        ));
        self.calls.track(&out, stage_order);
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let (mut out, routed) = self.calls.route(reply);
        let Some(routed) = routed else { return out };
        out.extend(match self.phase {
            Phase::Evaluating => self.on_evaluation(routed.reply),
            Phase::Discussing => {
                if self.batch.accept(routed.reply) && self.batch.complete() {
                    self.on_discussion()
                } else {
                    Vec::new()
                }
            }
            Phase::Arbitrating if routed.reply.key == "arbiter" => self.on_arbiter(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }
}

/// The clarity result from stored rows: the brief, every evaluator's verdict before and after
/// discussion, the Arbiter, and the score with its method.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let pd = |r: &StageRow| r.parsed_data.clone().unwrap_or(Value::Null);
    let brief = of("brief").next().map(
        |r| json!({ "content": r.content, "title": pd(r)["title"], "context": pd(r)["context"] }),
    );
    let evaluations: Vec<Value> = of("evaluation").map(pd).collect();
    let discussion: Vec<Value> = of("discussion").map(pd).collect();
    let score = of("score").next().map(pd);
    let mut result = json!({
        "brief": brief,
        "evaluations": evaluations,
        "initialDisagreement": of("disagreement").next().map(pd),
        "discussion": discussion,
        "arbiter": of("arbiter").next().map(pd),
        "score": score,
    });
    mark_from_rows(&mut result, rows);
    result
}

#[cfg(test)]
#[path = "clarity_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A score in words: one decimal at most (`7`, `7.5`).
fn score_words(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").unwrap_or(&s).to_string()
}

/// A persona's role (`skeptic`) by its name (`Skeptic`); the arbiter and unknown roles as is.
fn role_name(role: &str) -> String {
    match PERSONAS.iter().find(|p| p.role == role) {
        Some(p) => p.name.to_string(),
        None if role == "arbiter" => "Arbiter".to_string(),
        None => role.to_string(),
    }
}

/// A dimension's key (`evidenceQuality`) by its name (`Evidence Quality`).
fn dimension_name(key: &str) -> &str {
    DIMENSIONS.iter().find(|d| d.key == key).map_or(key, |d| d.name)
}

/// The result as the export's report: the score and how it was reached, whether the run was
/// flagged for human review and why, the scorecards as a table (each dimension with its
/// weight, each evaluator's score, changes made in discussion, the Arbiter's ruling and the
/// final score), the scorecards that could not be read, and the top issues.
pub fn report(result: &Value) -> String {
    use super::report::table;
    let mut out = String::new();
    let score = &result["score"];
    if let Some(total) = score["score"].as_f64() {
        let method = match score["method"].as_str() {
            Some("median") => "the median of the evaluators' scores on each dimension, weighted",
            Some("post_discussion") => {
                "the median of the evaluators' scores on each dimension after their discussion, weighted"
            }
            Some("arbiter") => {
                "the evaluators' scores with the Arbiter's counted one and a half times on the disputed dimensions, weighted"
            }
            _ => "the dimensions' scores, weighted",
        };
        out.push_str(&format!("**Clarity score:** {}/10, {method}.\n", score_words(total)));
        if score["needsHumanReview"] == true {
            let reason = score["reviewReason"].as_str().unwrap_or("").trim();
            out.push_str(&format!("\n**Flagged for human review:** {reason}\n"));
        } else if score["needsHumanReview"] == false {
            out.push_str(&format!(
                "\n**Not flagged for review:** the evaluators' scores were within {} points of each other on every dimension.\n",
                score_words(DISAGREEMENT_SPREAD)
            ));
        }
        out.push('\n');
    }
    let evaluations = result["evaluations"].as_array().cloned().unwrap_or_default();
    // The scorecards that count: as they stood at the end, else the first readable ones.
    let current: Vec<Value> = match score["verdicts"].as_array() {
        Some(v) if !v.is_empty() => v.clone(),
        _ => evaluations.iter().filter(|e| e["parseSuccess"] == true).cloned().collect(),
    };
    if !current.is_empty() {
        let first = |role: &Value| evaluations.iter().find(|e| e["role"] == *role);
        let breakdown = score["breakdown"].as_array().cloned().unwrap_or_default();
        let arbiter: Vec<Option<f64>> = DIMENSIONS
            .iter()
            .map(|d| {
                breakdown
                    .iter()
                    .find(|b| b["dimension"] == d.key)
                    .and_then(|b| b["arbiterScore"].as_f64())
            })
            .collect();
        let ruled = arbiter.iter().any(Option::is_some);
        let mut head: Vec<String> = vec!["dimension".into(), "weight".into()];
        for v in &current {
            let role = role_name(v["role"].as_str().unwrap_or("evaluator"));
            head.push(match v["model"].as_str().filter(|m| !m.is_empty()) {
                Some(m) => format!("{role} ({m})"),
                None => role,
            });
        }
        if ruled {
            head.push("Arbiter".into());
        }
        if !breakdown.is_empty() {
            head.push("final".into());
        }
        let mut rows: Vec<Vec<String>> = DIMENSIONS
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut row = vec![d.name.to_string(), format!("{:.0}%", d.weight * 100.0)];
                for v in &current {
                    let now = v["scores"][d.key].as_f64();
                    let before = first(&v["role"]).and_then(|e| e["scores"][d.key].as_f64());
                    row.push(match (now, before) {
                        (Some(n), Some(b)) if n != b => {
                            format!("{} (was {})", score_words(n), score_words(b))
                        }
                        (Some(n), _) => score_words(n),
                        (None, _) => "unread".into(),
                    });
                }
                if ruled {
                    row.push(arbiter[i].map_or(String::new(), score_words));
                }
                if !breakdown.is_empty() {
                    let fin = breakdown
                        .iter()
                        .find(|b| b["dimension"] == d.key)
                        .and_then(|b| b["score"].as_f64());
                    row.push(fin.map_or("unread".into(), score_words));
                }
                row
            })
            .collect();
        let mut overall = vec!["overall".to_string(), "100%".to_string()];
        for v in &current {
            overall.push(v["overall"].as_f64().map_or(String::new(), score_words));
        }
        if ruled {
            overall.push(String::new());
        }
        if !breakdown.is_empty() {
            overall.push(score["score"].as_f64().map_or(String::new(), score_words));
        }
        rows.push(overall);
        let right: Vec<usize> = (1..head.len()).collect();
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        out.push_str(&table(&head, &rows, &right));
        if score["discussionRan"] == true {
            out.push_str(
                "\nThe evaluators discussed their scores after reading each other's; a score they changed shows what it was.\n",
            );
        }
        out.push('\n');
    }
    let mut unread = Vec::new();
    for (list, what) in [
        (&result["evaluations"], "its scorecard could not be read"),
        (
            &result["discussion"],
            "its revised scorecard could not be read, so its first scores stand",
        ),
    ] {
        for v in list.as_array().into_iter().flatten().filter(|v| v["parseSuccess"] == false) {
            let role = role_name(v["role"].as_str().unwrap_or("evaluator"));
            let who = match v["model"].as_str().filter(|m| !m.is_empty()) {
                Some(m) => format!("{role} ({m})"),
                None => role,
            };
            let why = serde_json::from_value::<Unparsed>(v["unparsed"].clone())
                .map_or(String::new(), |u| format!("; it {}", u.describe()));
            unread.push(format!("- {who}: {what}{why}\n"));
        }
    }
    if !unread.is_empty() {
        out.push_str("**Not read:**\n\n");
        out.push_str(&unread.concat());
        out.push('\n');
    }
    let arb = &result["arbiter"];
    if let Some(model) = arb["model"].as_str() {
        let standing_in = arb["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        let ruled: Vec<String> = arb["scores"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        Some(format!("{} {}", dimension_name(k), score_words(v.as_f64()?)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let said = if ruled.is_empty() {
            let why = serde_json::from_value::<Unparsed>(arb["unparsed"].clone())
                .map_or(String::new(), |u| format!("; it {}", u.describe()));
            format!("no ruling could be read{why}, so the evaluators' scores stand")
        } else {
            format!("ruled {}", ruled.join(", "))
        };
        out.push_str(&format!("**Arbiter** ({model}{standing_in}): {said}.\n\n"));
    } else if score["needsHumanReview"] == true {
        out.push_str(
            "**Arbiter:** no ruling (its call failed), so the evaluators' scores stand.\n\n",
        );
    }
    let critique = score["critique"].as_array().cloned().unwrap_or_default();
    if !critique.is_empty() {
        out.push_str("**Top issues:**\n\n");
        for (n, c) in critique.iter().enumerate() {
            let flat = |k: &str| {
                c[k].as_str().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ")
            };
            let by: Vec<String> = c["flaggedBy"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(role_name).collect())
                .unwrap_or_default();
            let mut about = Vec::new();
            if let Some(p) = c["priority"].as_str() {
                about.push(format!("{p} priority"));
            }
            if !by.is_empty() {
                let by = match by.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    _ => by.concat(),
                };
                about.push(format!("raised by {by}"));
            }
            let about =
                if about.is_empty() { String::new() } else { format!(" ({})", about.join(", ")) };
            let mut line = format!(
                "{}. {}{about}: {}",
                n + 1,
                dimension_name(&flat("dimension")),
                flat("issue")
            );
            let fix = flat("suggestedFix");
            if !fix.is_empty() {
                line.push_str(&format!("; suggested fix: {fix}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
