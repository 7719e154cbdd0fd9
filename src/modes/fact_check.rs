//! Fact-Check mode (specs/15-fact-check.md): the content (given, or generated from the
//! question) is cut into numbered, typed, checkable claims; every checker judges every claim
//! on its own, in parallel; the server forms each claim's consensus (models never do this
//! arithmetic); one reporter writes the reliability report.
//!
//! Each stage is stored the moment it completes (generate, extract, each checker, the
//! consensus, the report), so a cancelled or interrupted run keeps what finished. Replies are
//! read only where they state a claim, a verdict, a confidence or a score; what is not stated
//! is reported as such (`type: null`, `parseSuccess: false`, `addressed: false`,
//! `confidenceStated: false`, `reliabilityScore: null`), never guessed.
//!
//! Structured replies: an extractor or checker whose route takes structured output is asked
//! for JSON (`fact_check_claims`, `fact_check_verifications`) instead of the text blocks, read
//! under the same rules, and the extraction and each check say where they were read from
//! (`readFrom`). The generated content and the report are text a person reads.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, role_failed, title_prompt, Batch, Calls, Routed, SplitMix64,
    TitleTracker, TITLE_KEY,
};
use super::reading::answer_text;
use super::reading::{bare, between, re, unmark};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_CONTENT_CHARS};
use super::schema::{self, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

const SIM_CHECKERS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_CHECKERS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const GLOBAL_TIMER: &str = "global";
const GENERATE_ORDER: i32 = 0;
const EXTRACT_ORDER: i32 = 1;
const VERIFY_ORDER: i32 = 10;
const CONSENSUS_ORDER: i32 = 11;
const REPORT_ORDER: i32 = 99;

/// Fact-Check's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FactCheckRequest {
    /// The text to fact-check. Without it the generator answers the question and its answer
    /// is checked.
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// Answers the question when no content is given (default: the first Council model).
    pub generator_model: Option<ModelId>,
    /// Lists the checkable claims (default: the first Council model).
    pub extractor_model: Option<ModelId>,
    /// The checkers, 1 to 4 distinct models; each judges every claim on its own (default:
    /// Council's three).
    #[schemars(length(min = 1, max = 4))]
    pub checker_models: Option<Vec<ModelId>>,
    /// Writes the reliability report (default: the first Council model).
    pub reporter_model: Option<ModelId>,
    /// Longer content is cut to this many characters, with a note: 500 to 50000 (20000).
    #[schemars(range(min = 500, max = 50000))]
    pub max_content_length: Option<i64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (600000): the stage in flight finishes, the
    /// report follows if the checks are done, else the run fails.
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FactCheckConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub generator_model: String,
    pub extractor_model: String,
    pub checker_models: Vec<String>,
    pub reporter_model: String,
    pub max_content_length: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup for the extractor (`[fallback] facilitator`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
    /// The server's backup for the reporter (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

/// A text compared ignoring case and spacing.
pub fn norm(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: FactCheckRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let content = match &cfg.content {
        None => None,
        Some(c) => Some(
            c.trimmed()
                .ok_or_else(|| FieldError::new("modeConfig.content", "must not be empty"))?,
        ),
    };
    let first = || (if defaults.offline { SIM_CHECKERS[0] } else { SEED_CHECKERS[0] }).to_string();
    let generator_model =
        request::model(cfg.generator_model.as_ref(), "modeConfig.generatorModel")?
            .unwrap_or_else(first);
    let extractor_model =
        request::model(cfg.extractor_model.as_ref(), "modeConfig.extractorModel")?
            .unwrap_or_else(first);
    let reporter_model = request::model(cfg.reporter_model.as_ref(), "modeConfig.reporterModel")?
        .unwrap_or_else(first);
    let checker_models = request::models(
        cfg.checker_models.as_deref(),
        "modeConfig.checkerModels",
        1..=4,
        Some("A fact-check needs at least 1 checker"),
        Some("A fact-check has at most 4 checkers"),
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_CHECKERS } else { &SEED_CHECKERS }));
    for (i, m) in checker_models.iter().enumerate() {
        if let Some(j) = checker_models[..i].iter().position(|x| x == m) {
            return Err(FieldError::new(
                "modeConfig.checkerModels",
                format!(
                    "item {i} repeats item {j} ({m}); the checks must be independent, so each \
                     checker is a different model"
                ),
            ));
        }
    }
    let max_content_length = request::whole(
        cfg.max_content_length,
        "modeConfig.maxContentLength",
        500..=50_000,
        20_000,
    )?;
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=180_000,
        defaults.stage_timeout_ms,
    )?;
    let global_timeout_ms = request::timeout(
        cfg.global_timeout_ms,
        "modeConfig.globalTimeoutMs",
        60_000..=1_800_000,
        600_000,
    )?;
    let singles: Vec<&str> = if content.is_none() {
        vec![&generator_model, &extractor_model, &reporter_model]
    } else {
        vec![&extractor_model, &reporter_model]
    };
    let models = request::distinct(&[&checker_models], &singles);
    let config = FactCheckConfig {
        content,
        facilitator_fallback_model: Fallbacks::for_role(
            &defaults.fallback.facilitator,
            &extractor_model,
        ),
        chairman_fallback_model: Fallbacks::for_role(&defaults.fallback.chairman, &reporter_model),
        generator_model,
        extractor_model,
        checker_models,
        reporter_model,
        max_content_length: max_content_length as usize,
        timeout_ms,
        global_timeout_ms,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Fact-Check in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "fact_check",
    label: "Fact-Check",
    description: "Checkable claims are extracted from the content (or a generated answer), 1-4 checkers judge each one independently, the server forms a majority consensus, and a reliability report follows.",
    multi_turn: false,
    question: Question { label: "What to fact-check", required: Some("Question is required") },
    roles: &[
        Role {
            id: "checker",
            label: "Checkers",
            field: Some("checkerModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_CHECKERS,
            default: &SEED_CHECKERS,
        },
        Role {
            id: "generator",
            label: "Generator (answers the question when no content is given)",
            field: Some("generatorModel"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_CHECKERS[0]],
            default: &[SEED_CHECKERS[0]],
        },
        // The reporter before the extractor: `conclave run`'s `--chairman` names the first
        // single-model role with a backup, and the reporter is the one that writes the result.
        Role {
            id: "reporter",
            label: "Reporter",
            field: Some("reporterModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[SIM_CHECKERS[0]],
            default: &[SEED_CHECKERS[0]],
        },
        Role {
            id: "extractor",
            label: "Extractor",
            field: Some("extractorModel"),
            panel: false,
            fallback: Some("facilitator"),
            sim_default: &[SIM_CHECKERS[0]],
            default: &[SEED_CHECKERS[0]],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<FactCheckRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(FactCheck::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("extract", "reading the claims"), ("verify", "checking the claims"), ("checker", "a checker's verdicts"), ("all_checkers", "every check in"), ("report", "the report")],
    report: Some(report),
    example: || {
        json!({ "mode": "fact_check", "question": "Fact-check this paragraph.",
                "modeConfig": { "content": "The Eiffel Tower was completed in 1889 for the World's Fair. It is 330 metres tall and was the tallest man-made structure in the world until 1930.",
                                "checkerModels": ["sim/alpha", "sim/beta", "sim/gamma"] } })
    },
    sim: Some(sim_answer),
};

// ---- prompts -------------------------------------------------------------------------------

pub const GENERATE_HEAD: &str = "You are writing a factual answer that will be fact-checked.";
pub const EXTRACT_HEAD: &str = "You are the claim extractor of a fact-check.";
pub const VERIFY_HEAD: &str = "You are an independent fact-checker.";
pub const REPORT_HEAD: &str = "You are the reporter of a fact-check.";
pub const CONTENT_START: &str = "=== CONTENT ===";
pub const CONTENT_END: &str = "=== END OF CONTENT ===";
pub const CLAIMS_START: &str = "=== CLAIMS ===";
pub const CLAIMS_END: &str = "=== END OF CLAIMS ===";

pub const TYPES: [&str; 6] =
    ["STATISTIC", "DATE", "ATTRIBUTION", "TECHNICAL", "COMPARISON", "CAUSAL"];
pub const VERDICTS: [&str; 3] = ["VERIFIED", "DISPUTED", "UNVERIFIABLE"];
pub const CONFIDENCES: [&str; 3] = ["HIGH", "MEDIUM", "LOW"];

pub fn generate_prompt(question: &str) -> String {
    format!(
        "{GENERATE_HEAD} Answer the question below thoroughly, rich in concrete facts, figures, \
         dates, names and causes, each stated plainly so it can be checked.\n\nQuestion: {question}"
    )
}

pub fn extract_prompt(content: &str) -> String {
    extract_prompt_as(content, None)
}

/// The extraction prompt asking for the spec's `CLAIM <n>:` blocks, or, given the stage's
/// schema, for its JSON instead (the same instructions otherwise).
pub fn extract_prompt_as(content: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with one block per claim, numbered from 1, in exactly this format:\n\n\
                 CLAIM 1: <the claim as worded in the content>\nContext: <the sentence it is \
                 in>\nType: STATISTIC|DATE|ATTRIBUTION|TECHNICAL|COMPARISON|CAUSAL\n\n\
                 End with `EXTRACTION SUMMARY: <one line>`. If there is no checkable claim, reply \
                 only `CLAIMS: NONE`."
            .to_string(),
    };
    format!(
        "{EXTRACT_HEAD} List every checkable claim in the content below: figures, dates, causes, \
         comparisons, attributions and technical statements. Leave out opinions, hedges, \
         definitions and predictions.\n\n{CONTENT_START}\n{content}\n{CONTENT_END}\n\n{format}"
    )
}

fn claims_text(claims: &[Claim]) -> String {
    let mut s = String::new();
    for c in claims {
        s.push_str(&format!("CLAIM {}: {}\n", c.number, c.text));
        if let Some(ctx) = &c.context {
            s.push_str(&format!("Context: {ctx}\n"));
        }
        s.push_str(&format!("Type: {}\n\n", c.claim_type.as_deref().unwrap_or("UNTYPED")));
    }
    s
}

pub fn verify_prompt(content: &str, claims: &[Claim]) -> String {
    verify_prompt_as(content, claims, None)
}

/// The verification prompt asking for the spec's `VERIFICATION <n>:` blocks, or, given the
/// stage's schema, for its JSON instead (the same instructions otherwise).
pub fn verify_prompt_as(content: &str, claims: &[Claim], schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with one block per claim, using its number, in exactly this format:\n\n\
                 VERIFICATION 1: VERIFIED|DISPUTED|UNVERIFIABLE\nEvidence: <what you know that \
                 supports or contradicts it>\nCorrection: <the correct statement if DISPUTED, \
                 else N/A>\nConfidence: HIGH|MEDIUM|LOW"
            .to_string(),
    };
    format!(
        "{VERIFY_HEAD} Judge each numbered claim below on your own knowledge; the content is \
         given for context only.\n\n{CONTENT_START}\n{content}\n{CONTENT_END}\n\n{CLAIMS_START}\n\
         {}{CLAIMS_END}\n\n{format}",
        claims_text(claims)
    )
}

fn consensus_text(claims: &[Claim], consensus: &[Consensus], checks: &[Check]) -> String {
    let mut s = String::new();
    for (c, k) in claims.iter().zip(consensus) {
        s.push_str(&format!(
            "CLAIM {}: {}\nConsensus: {} ({}% agreement, confidence {})\n",
            c.number, c.text, k.verdict, k.agreement_rate, k.consensus_confidence
        ));
        for check in checks.iter().filter(|x| x.parse_success) {
            if let Some(v) = check.verifications.iter().find(|v| v.claim_id == c.id) {
                s.push_str(&format!(
                    "- Checker {} ({}): {} ({}); evidence: {}\n",
                    check.checker_index + 1,
                    check.model,
                    v.verdict,
                    v.confidence,
                    v.evidence.as_deref().unwrap_or("none given")
                ));
            }
        }
        if let Some(corr) = &k.correction {
            s.push_str(&format!("Correction: {corr}\n"));
        }
        s.push('\n');
    }
    s
}

pub fn report_prompt(
    content: &str,
    claims: &[Claim],
    consensus: &[Consensus],
    checks: &[Check],
    counts: &Counts,
) -> String {
    format!(
        "{REPORT_HEAD} Independent checkers judged the claims of the content below; the server \
         formed each claim's consensus. Write the reliability report.\n\n{CONTENT_START}\n\
         {content}\n{CONTENT_END}\n\n{CLAIMS_START}\n{}{CLAIMS_END}\n\nCounts: {} verified, {} \
         disputed, {} unverifiable ({} claims).\n\nReply with these sections:\n\
         ## Content Summary\n## Overall Reliability Score: <a number from 0 to 100>\n(justify \
         it: 90-100 highly reliable, 70-89 mostly reliable, 50-69 mixed, 30-49 many errors, 0-29 \
         unreliable)\n## Evidence Table\n## Detailed Findings\n(grouped by verdict)\n\
         ## Annotated Content\n(the text with [VERIFIED], [DISPUTED] or [UNVERIFIABLE] after \
         each claim)\n## Methodology",
        consensus_text(claims, consensus, checks),
        counts.verified,
        counts.disputed,
        counts.unverifiable,
        counts.total
    )
}

// ---- reading replies -----------------------------------------------------------------------

/// A numbered heading `<word> 3:` (also `#3`, `claim_3`, `Claim 3`, then `:`, `.` or a dash):
/// the number and the rest of the line.
fn numbered(word: &str, line: &str) -> Option<(u64, String)> {
    static CLAIM: OnceLock<Regex> = OnceLock::new();
    static VERIFY: OnceLock<Regex> = OnceLock::new();
    let pattern = |w: &str| {
        format!(
            r"(?i)^{w}\s*(?:\*\*|__)?\s*(?:#\s*|claim[_\s]*)?(\d{{1,6}})\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$"
        )
    };
    let r = match word {
        "claim" => re(&CLAIM, &pattern("claim")),
        _ => re(&VERIFY, &pattern("verification")),
    };
    let c = r.captures(line)?;
    Some((c[1].parse().ok()?, unmark(c.get(2).map_or("", |m| m.as_str()))))
}

/// A `Name: value` field line among `names`: the lower-case name and the value.
fn field<'a>(line: &'a str, names: &str) -> Option<(String, &'a str)> {
    static CLAIM: OnceLock<Regex> = OnceLock::new();
    static CHECK: OnceLock<Regex> = OnceLock::new();
    static SUMMARY: OnceLock<Regex> = OnceLock::new();
    let cell = match names {
        "context|type" => &CLAIM,
        "extraction summary" => &SUMMARY,
        _ => &CHECK,
    };
    let r = re(cell, &format!(r"(?i)^({names})\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?"));
    let c = r.captures(line)?;
    Some((c.get(1)?.as_str().to_lowercase(), &line[c.get(0)?.end()..]))
}

/// One checkable claim, renumbered `claim_1`… in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub id: String,
    pub number: usize,
    pub text: String,
    pub context: Option<String>,
    /// One of [`TYPES`]; null when the type is missing or unknown.
    #[serde(rename = "type")]
    pub claim_type: Option<String>,
}

/// The extractor's reply as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    pub claims: Vec<Claim>,
    /// `CLAIMS: NONE` was stated (and no claim listed).
    pub none_stated: bool,
}

impl Extraction {
    /// Claims were listed, or none were said to exist: the reply followed the format.
    pub fn parse_success(&self) -> bool {
        !self.claims.is_empty() || self.none_stated
    }
}

/// The type a value names exactly; None otherwise.
pub fn type_of(value: &str) -> Option<String> {
    let v = unmark(value).trim_end_matches(['.', ',', ';']).trim().to_uppercase();
    TYPES.contains(&v.as_str()).then_some(v)
}

/// Reads the extractor's claims (its answer part only).
pub fn read_claims(reply: &str) -> Extraction {
    static NONE: OnceLock<Regex> = OnceLock::new();
    let none_re = re(&NONE, r"(?i)^claims\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*none\b");
    let text = answer_text(reply);
    struct Block {
        text: String,
        context: Option<String>,
        claim_type: Option<Option<String>>,
    }
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    let mut none_stated = false;
    for raw in text.lines() {
        let line = bare(raw);
        if none_re.is_match(line) {
            none_stated = true;
            open = false;
            continue;
        }
        if let Some((_, rest)) = numbered("claim", line) {
            blocks.push(Block { text: rest, context: None, claim_type: None });
            open = true;
            continue;
        }
        if field(line, "extraction summary").is_some() {
            open = false;
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = field(line, "context|type") {
            if name == "context" && b.context.is_none() {
                let v = unmark(value);
                b.context = Some(v).filter(|v| !v.is_empty());
            } else if name == "type" && b.claim_type.is_none() {
                b.claim_type = Some(type_of(value));
            }
            continue;
        }
        // A heading with its claim on the next line.
        if b.text.is_empty() && !line.trim().is_empty() {
            b.text = unmark(line);
        }
    }
    let claims = numbered_claims(
        blocks.into_iter().map(|b| (b.text, b.context, b.claim_type.flatten())).collect(),
    );
    let none_stated = none_stated && claims.is_empty();
    Extraction { claims, none_stated }
}

/// Claims by type (`UNTYPED` for a null type), in [`TYPES`] order.
pub fn type_breakdown(claims: &[Claim]) -> Value {
    let mut m = serde_json::Map::new();
    for t in TYPES.iter().copied().chain(["UNTYPED"]) {
        let n = claims.iter().filter(|c| c.claim_type.as_deref().unwrap_or("UNTYPED") == t).count();
        if n > 0 {
            m.insert(t.into(), json!(n));
        }
    }
    Value::Object(m)
}

/// The one verdict a text states; None when it states none, several, or a negated one
/// (`not verified`, `unverified`).
pub fn verdict_of(text: &str) -> Option<&'static str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let r = re(&RE, r"(?i)\b(not\s+|un)?(verified|disputed|unverifiable)\b");
    let mut found: Option<&'static str> = None;
    for c in r.captures_iter(text) {
        if c.get(1).is_some() {
            return None;
        }
        let v = VERDICTS.into_iter().find(|v| v.eq_ignore_ascii_case(&c[2]))?;
        match found {
            Some(f) if f != v => return None,
            _ => found = Some(v),
        }
    }
    found
}

/// The one confidence a value states (`HIGH`, `medium.`); None otherwise.
pub fn confidence_of(value: &str) -> Option<&'static str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let r = re(&RE, r"(?i)\b(high|medium|low)\b");
    let found: Vec<String> = r.find_iter(value).map(|m| m.as_str().to_uppercase()).collect();
    let first = found.first()?;
    if found.iter().any(|f| f != first) {
        return None;
    }
    CONFIDENCES.into_iter().find(|c| c == first)
}

/// One checker's judgement of one claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub claim_id: String,
    pub verdict: String,
    pub evidence: Option<String>,
    /// Only on a DISPUTED verdict; null when `N/A`, `none`, `-` or empty.
    pub correction: Option<String>,
    pub confidence: String,
    /// False when the reply stated no confidence (LOW is used).
    pub confidence_stated: bool,
    /// False when the checker did not address the claim (UNVERIFIABLE, LOW).
    pub addressed: bool,
}

/// A checker's reply as read against the claims.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReading {
    pub verifications: Vec<Verification>,
    pub parse_success: bool,
}

fn no_correction(v: &str) -> bool {
    let t = v.trim().trim_end_matches('.').trim().to_lowercase();
    matches!(t.as_str(), "" | "n/a" | "na" | "none" | "-" | "—" | "–")
}

/// A claim the checker did not address: UNVERIFIABLE, LOW, `addressed: false`.
fn unaddressed(c: &Claim) -> Verification {
    Verification {
        claim_id: c.id.clone(),
        verdict: "UNVERIFIABLE".into(),
        evidence: None,
        correction: None,
        confidence: "LOW".into(),
        confidence_stated: false,
        addressed: false,
    }
}

/// Reads a checker's verifications (its answer part only), one per claim in claim order.
pub fn read_check(reply: &str, claims: &[Claim]) -> CheckReading {
    struct Block {
        number: usize,
        heading_verdict: Option<&'static str>,
        fields: Vec<(String, String)>,
    }
    let text = answer_text(reply);
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    let mut spanning: Option<usize> = None;
    for raw in text.lines() {
        let line = bare(raw);
        if let Some((n, rest)) = numbered("verification", line) {
            let n = usize::try_from(n).unwrap_or(0);
            open = (1..=claims.len()).contains(&n) && !blocks.iter().any(|b| b.number == n);
            spanning = None;
            if open {
                blocks.push(Block {
                    number: n,
                    heading_verdict: verdict_of(&rest),
                    fields: vec![],
                });
            }
            continue;
        }
        if numbered("claim", line).is_some() {
            (open, spanning) = (false, None);
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = field(line, "verdict|evidence|correction|confidence") {
            spanning = None;
            if !b.fields.iter().any(|(n, _)| *n == name) {
                if name == "evidence" || name == "correction" {
                    spanning = Some(b.fields.len());
                }
                b.fields.push((name, unmark(value)));
            }
            continue;
        }
        if raw.trim_start().starts_with('#') {
            (open, spanning) = (false, None);
            continue;
        }
        if let Some(v) = spanning.and_then(|i| b.fields.get_mut(i)) {
            if !raw.trim().is_empty() {
                if !v.1.is_empty() {
                    v.1.push('\n');
                }
                v.1.push_str(raw.trim());
            }
        }
    }
    let mut addressed_any = false;
    let verifications = claims
        .iter()
        .map(|c| {
            let block = blocks.iter().find(|b| b.number == c.number);
            let get = |name: &str| {
                block.and_then(|b| {
                    b.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.trim().to_string())
                })
            };
            let verdict = block.and_then(|b| {
                b.heading_verdict.or_else(|| get("verdict").and_then(|v| verdict_of(&v)))
            });
            let Some(verdict) = verdict else { return unaddressed(c) };
            addressed_any = true;
            let confidence = get("confidence").as_deref().and_then(confidence_of);
            Verification {
                claim_id: c.id.clone(),
                verdict: verdict.into(),
                evidence: get("evidence").filter(|e| !e.is_empty()),
                correction: get("correction")
                    .filter(|v| verdict == "DISPUTED" && !no_correction(v)),
                confidence: confidence.unwrap_or("LOW").into(),
                confidence_stated: confidence.is_some(),
                addressed: true,
            }
        })
        .collect();
    CheckReading { verifications, parse_success: addressed_any }
}

/// The reliability score the report states: the first number after `Reliability Score` on the
/// last line naming it (rounded, clamped to 0-100); None when that line states none, or only
/// the template's range (`<0-100>`).
pub fn read_score(reply: &str) -> Option<u32> {
    static NAME: OnceLock<Regex> = OnceLock::new();
    static NUM: OnceLock<Regex> = OnceLock::new();
    let name = re(&NAME, r"(?i)reliability\s+score");
    let num = re(&NUM, r"^[^0-9]*?(-?\d+(?:\.\d+)?)\s*(-\s*\d)?");
    let text = answer_text(reply);
    let line = text.lines().rev().find(|l| name.is_match(l))?;
    let at = name.find_iter(line).next()?.end();
    let c = num.captures(&line[at..])?;
    if c.get(2).is_some() {
        return None;
    }
    let v: f64 = c[1].parse().ok()?;
    Some(v.round().clamp(0.0, 100.0) as u32)
}

// ---- structured replies ----------------------------------------------------------------------
//
// A model whose route takes structured output is asked for JSON instead of the text blocks:
// the extractor for `fact_check_claims` (each claim with its sentence and its type), a checker
// for `fact_check_verifications` (one judgement per claim, by its number, its evidence before
// its verdict so the model weighs before it commits). A reply is read from its JSON when that
// fits the schema and states what the text would have to (a claim with words, a judgement of
// a claim of this run); else by the text readers above. The JSON is held to the text's rules:
// a repeated claim keeps its first wording, a claim judged twice keeps its first judgement, a
// correction stands only on a DISPUTED verdict.

/// The extraction's schema name.
pub const CLAIMS_SCHEMA: &str = "fact_check_claims";
/// A check's schema name.
pub const VERIFICATIONS_SCHEMA: &str = "fact_check_verifications";
/// The most claims a JSON extraction may list.
pub const MAX_CLAIMS: usize = 30;
/// The longest claim, as worded in the content.
pub const CLAIM_MAX_CHARS: usize = 300;
/// The longest context sentence and the longest evidence.
pub const CONTEXT_MAX_CHARS: usize = 500;
/// The longest correction.
pub const CORRECTION_MAX_CHARS: usize = 300;

/// The extraction's schema: the reasoning, then the claims (none when there is none).
pub fn claims_schema() -> Arc<ReplySchema> {
    let claim = schema::object([
        (
            "claim",
            schema::described(schema::text(CLAIM_MAX_CHARS), "the claim as worded in the content"),
        ),
        ("context", schema::described(schema::text(CONTEXT_MAX_CHARS), "the sentence it is in")),
        ("type", schema::described(schema::one_of(&TYPES), "what kind of claim it is")),
    ]);
    ReplySchema::new(
        CLAIMS_SCHEMA,
        schema::reasoned([(
            "claims",
            schema::described(
                schema::list(claim, 0, MAX_CLAIMS),
                "every checkable claim in the content, in order (an empty list when there is \
                 none)",
            ),
        )]),
    )
}

/// A check's schema for `n` claims: the reasoning, then one judgement per claim.
pub fn verifications_schema(n: usize) -> Arc<ReplySchema> {
    let n = n.max(1);
    let judgement = schema::object([
        (
            "claim",
            schema::described(schema::integer(1, n as i64), "the number of the claim judged"),
        ),
        (
            "evidence",
            schema::described(
                schema::text(CONTEXT_MAX_CHARS),
                "what you know that supports or contradicts it",
            ),
        ),
        ("verdict", schema::described(schema::one_of(&VERDICTS), "your verdict on the claim")),
        (
            "correction",
            schema::described(
                schema::text(CORRECTION_MAX_CHARS),
                "the correct statement if DISPUTED, else \"N/A\"",
            ),
        ),
        ("confidence", schema::described(schema::one_of(&CONFIDENCES), "your confidence")),
    ]);
    ReplySchema::new(
        VERIFICATIONS_SCHEMA,
        schema::reasoned([(
            "verifications",
            schema::described(
                schema::list(judgement, n, n),
                "one judgement per claim, in the order of the claims",
            ),
        )]),
    )
}

/// Claims as stated (text, context, type), each kept once (ignoring case and spacing) and
/// numbered in order.
fn numbered_claims(stated: Vec<(String, Option<String>, Option<String>)>) -> Vec<Claim> {
    let mut claims: Vec<Claim> = Vec::new();
    for (text, context, claim_type) in stated {
        let t = text.trim().trim_matches('"').trim().to_string();
        if t.is_empty() || claims.iter().any(|c| norm(&c.text) == norm(&t)) {
            continue;
        }
        let n = claims.len() + 1;
        claims.push(Claim { id: format!("claim_{n}"), number: n, text: t, context, claim_type });
    }
    claims
}

/// The extractor's reply read from its JSON when it fits `schema` and lists claims (or says
/// there are none with an empty list), else by its text ([`read_claims`]); with where it was
/// read from when it followed a format.
pub fn read_claims_reply(reply: &str, schema: &ReplySchema) -> (Extraction, Option<ReadFrom>) {
    let from_json = schema.read(reply).and_then(|v| {
        let items = v.get("claims")?.as_array()?;
        let stated = items
            .iter()
            .map(|c| {
                let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
                let context = Some(field("context").trim().to_string()).filter(|c| !c.is_empty());
                (field("claim").to_string(), context, type_of(field("type")))
            })
            .collect();
        let e = Extraction { claims: numbered_claims(stated), none_stated: items.is_empty() };
        e.parse_success().then_some(e)
    });
    match from_json {
        Some(e) => (e, Some(ReadFrom::Json)),
        None => {
            let e = read_claims(reply);
            let from = e.parse_success().then_some(ReadFrom::Text);
            (e, from)
        }
    }
}

/// A checker's reply read from its JSON when it fits `schema`, else by its text
/// ([`read_check`]); with where it was read from when it was usable.
pub fn read_check_reply(
    reply: &str,
    claims: &[Claim],
    schema: &ReplySchema,
) -> (CheckReading, Option<ReadFrom>) {
    let from_json = schema.read(reply).and_then(|v| {
        let items = v.get("verifications")?.as_array()?;
        let verifications: Vec<Verification> = claims
            .iter()
            .map(|c| {
                // A claim judged twice keeps its first judgement, as in text.
                let item = items
                    .iter()
                    .find(|i| i.get("claim").and_then(Value::as_u64) == Some(c.number as u64));
                let field = |k: &str| {
                    item.and_then(|i| i.get(k))
                        .and_then(Value::as_str)
                        .map(|s| s.trim().to_string())
                };
                let verdict = field("verdict").and_then(|v| VERDICTS.into_iter().find(|x| *x == v));
                let confidence =
                    field("confidence").and_then(|v| CONFIDENCES.into_iter().find(|x| *x == v));
                match (verdict, confidence) {
                    (Some(verdict), Some(confidence)) => Verification {
                        claim_id: c.id.clone(),
                        verdict: verdict.into(),
                        evidence: field("evidence").filter(|e| !e.is_empty()),
                        correction: field("correction")
                            .filter(|v| verdict == "DISPUTED" && !no_correction(v)),
                        confidence: confidence.into(),
                        confidence_stated: true,
                        addressed: true,
                    },
                    _ => unaddressed(c),
                }
            })
            .collect();
        let parse_success = verifications.iter().any(|v| v.addressed);
        parse_success.then_some(CheckReading { verifications, parse_success })
    });
    match from_json {
        Some(r) => (r, Some(ReadFrom::Json)),
        None => {
            let r = read_check(reply, claims);
            let from = r.parse_success.then_some(ReadFrom::Text);
            (r, from)
        }
    }
}

// ---- consensus -----------------------------------------------------------------------------

/// A claim's consensus over the usable checkers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Consensus {
    pub claim_id: String,
    pub verdict: String,
    pub agreement_rate: u32,
    pub consensus_confidence: String,
    /// The tie rule that decided, when the checkers tied (`verified=disputed→DISPUTED`…).
    pub tie_rule: Option<String>,
    /// The checkers did not all give the same verdict.
    pub split: bool,
    pub correction: Option<String>,
    /// How many usable checkers gave each verdict.
    pub votes: Value,
}

/// The verdict counts over the claims' consensus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub verified: usize,
    pub disputed: usize,
    pub unverifiable: usize,
    /// Claims the checkers did not agree on (whatever the consensus).
    pub split: usize,
    pub total: usize,
}

/// One claim's consensus from its verifications, in checker order.
pub fn consensus_of(claim_id: &str, votes: &[&Verification]) -> Consensus {
    let count = |v: &str| votes.iter().filter(|x| x.verdict == v).count();
    let (nv, nd, nu) = (count("VERIFIED"), count("DISPUTED"), count("UNVERIFIABLE"));
    let top = nv.max(nd).max(nu);
    let at_top: Vec<&str> = [("VERIFIED", nv), ("DISPUTED", nd), ("UNVERIFIABLE", nu)]
        .into_iter()
        .filter(|(_, n)| *n == top)
        .map(|(v, _)| v)
        .collect();
    let (verdict, tie_rule) = match at_top.as_slice() {
        [one] => (*one, None),
        ["VERIFIED", "DISPUTED"] => ("DISPUTED", Some("verified=disputed→DISPUTED")),
        ["VERIFIED", "UNVERIFIABLE"] => ("VERIFIED", Some("verified=unverifiable→VERIFIED")),
        ["DISPUTED", "UNVERIFIABLE"] => ("DISPUTED", Some("disputed=unverifiable→DISPUTED")),
        _ => ("DISPUTED", Some("three-way→DISPUTED")),
    };
    let holders: Vec<&&Verification> = votes.iter().filter(|x| x.verdict == verdict).collect();
    let agreement_rate = if votes.is_empty() {
        0
    } else {
        ((100 * holders.len()) as f64 / votes.len() as f64).round() as u32
    };
    let consensus_confidence = if tie_rule.is_some() {
        "LOW"
    } else {
        let mut best: Option<(usize, &str)> = None;
        for c in CONFIDENCES {
            let n = holders.iter().filter(|h| h.confidence == c).count();
            // Ties toward the lower: later (lower) confidences win equal counts.
            if n > 0 && best.is_none_or(|(b, _)| n >= b) {
                best = Some((n, c));
            }
        }
        best.map_or("LOW", |(_, c)| c)
    };
    let correction = (verdict == "DISPUTED")
        .then(|| {
            let corrections: Vec<&str> = votes
                .iter()
                .filter(|x| x.verdict == "DISPUTED")
                .filter_map(|x| x.correction.as_deref())
                .collect();
            let mut best: Option<(usize, &str)> = None;
            for c in &corrections {
                let n = corrections.iter().filter(|o| norm(o) == norm(c)).count();
                if best.is_none_or(|(b, _)| n > b) {
                    best = Some((n, c));
                }
            }
            best.map(|(_, c)| c.to_string())
        })
        .flatten();
    Consensus {
        claim_id: claim_id.to_string(),
        verdict: verdict.into(),
        agreement_rate,
        consensus_confidence: consensus_confidence.into(),
        tie_rule: tie_rule.map(str::to_string),
        split: [nv, nd, nu].iter().filter(|n| **n > 0).count() > 1,
        correction,
        votes: json!({ "VERIFIED": nv, "DISPUTED": nd, "UNVERIFIABLE": nu }),
    }
}

/// Every claim's consensus over the usable checks, and the counts.
pub fn consensus(claims: &[Claim], checks: &[Check]) -> (Vec<Consensus>, Counts) {
    let usable: Vec<&Check> = checks.iter().filter(|c| c.parse_success).collect();
    let list: Vec<Consensus> = claims
        .iter()
        .map(|c| {
            let votes: Vec<&Verification> = usable
                .iter()
                .filter_map(|k| k.verifications.iter().find(|v| v.claim_id == c.id))
                .collect();
            consensus_of(&c.id, &votes)
        })
        .collect();
    let n = |v: &str| list.iter().filter(|c| c.verdict == v).count();
    let counts = Counts {
        verified: n("VERIFIED"),
        disputed: n("DISPUTED"),
        unverifiable: n("UNVERIFIABLE"),
        split: list.iter().filter(|c| c.split).count(),
        total: list.len(),
    };
    (list, counts)
}

/// The server's report when the reporter and its backup failed: a table and the counts.
pub fn fallback_report(claims: &[Claim], consensus: &[Consensus], counts: &Counts) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut s = String::from(
        "The reporter could not be reached, so this is the server's summary of the checks.\n\n\
         | Claim | Verdict | Agreement | Correction |\n|---|---|---|---|\n",
    );
    for (c, k) in claims.iter().zip(consensus) {
        s.push_str(&format!(
            "| {}. {} | {}{} | {}% | {} |\n",
            c.number,
            cell(&c.text),
            k.verdict,
            if k.tie_rule.is_some() {
                " (no majority: tie rule)"
            } else if k.split {
                " (not unanimous)"
            } else {
                ""
            },
            k.agreement_rate,
            k.correction.as_deref().map_or("—".into(), cell)
        ));
    }
    s.push_str(&format!(
        "\n{} verified, {} disputed, {} unverifiable of {} {}.",
        counts.verified,
        counts.disputed,
        counts.unverifiable,
        counts.total,
        if counts.total == 1 { "claim" } else { "claims" }
    ));
    s
}

// ---- the state machine ---------------------------------------------------------------------

/// One checker's completed check, as `checker_complete` gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// 0-based, in the order of `checkerModels`.
    pub checker_index: usize,
    pub model: String,
    pub verifications: Vec<Verification>,
    /// Verdicts as stated (unaddressed claims count UNVERIFIABLE).
    pub summary: Value,
    pub parse_success: bool,
    pub response_time_ms: i64,
    /// The call failed (after the engine's retries): no verifications.
    #[serde(default)]
    pub failed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the verifications were read from (its JSON or its text), when the check was
    /// usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

fn summary_of(vs: &[Verification]) -> Value {
    let n = |v: &str| vs.iter().filter(|x| x.verdict == v).count();
    json!({ "verified": n("VERIFIED"), "disputed": n("DISPUTED"), "unverifiable": n("UNVERIFIABLE"),
            "unaddressed": vs.iter().filter(|x| !x.addressed).count() })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Generating,
    Extracting,
    Verifying,
    Reporting,
    Done,
}

pub struct FactCheck {
    config: FactCheckConfig,
    ctx: RunContext,
    phase: Phase,
    /// The content checked (cut to `maxContentLength`), once known.
    content: String,
    truncated: bool,
    claims: Vec<Claim>,
    batch: Batch,
    checks: Vec<Check>,
    consensus: Vec<Consensus>,
    counts: Counts,
    /// The extraction's and the checks' reply schemas, built when their calls are made.
    claims_schema: Option<Arc<ReplySchema>>,
    verify_schema: Option<Arc<ReplySchema>>,
    deadline_passed: bool,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    match stage {
        "generate" => GENERATE_ORDER,
        "extract" => EXTRACT_ORDER,
        "verify" => VERIFY_ORDER,
        "report" => REPORT_ORDER,
        _ => 0,
    }
}

/// Content cut to `max` characters: the text and whether it was cut.
pub fn cut(text: &str, max: usize) -> (String, bool) {
    if text.chars().count() > max {
        (text.chars().take(max).collect(), true)
    } else {
        (text.to_string(), false)
    }
}

impl FactCheck {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: FactCheckConfig = stored_config("fact_check", config)?;
        if !(1..=4).contains(&config.checker_models.len()) {
            return Err("the stored fact_check configuration has no 1 to 4 checkers".into());
        }
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let batch = Batch::new("verify", config.checker_models.len());
        Ok(FactCheck {
            config,
            ctx,
            phase: Phase::Generating,
            content: String::new(),
            truncated: false,
            claims: Vec::new(),
            batch,
            checks: Vec::new(),
            consensus: Vec::new(),
            counts: Counts::default(),
            claims_schema: None,
            verify_schema: None,
            deadline_passed: false,
            title,
            calls: Calls::default(),
        })
    }

    fn source(&self) -> &'static str {
        if self.config.content.is_some() {
            "user_provided"
        } else {
            "generated"
        }
    }

    fn call(&self, key: &str, model: &str, prompt: String, stage: &str, role: &str) -> CallSpec {
        CallSpec::new(
            key,
            model,
            vec![ChatMessage::user(prompt)],
            stage,
            role,
            self.config.timeout_ms,
        )
    }

    fn deadline_fail(&mut self, stage: &str) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(format!(
            "The fact-check's time limit ({} s) passed during the {stage}; the stages that \
             finished are kept.",
            self.config.global_timeout_ms / 1000
        ))
    }

    fn extract(&mut self, text: &str) -> Vec<Effect> {
        let (content, truncated) = cut(text, self.config.max_content_length);
        self.content = content;
        self.truncated = truncated;
        self.phase = Phase::Extracting;
        let schema = claims_schema();
        let model = self.config.extractor_model.clone();
        // The backup takes the same prompt: it is asked as the extractor is.
        let asked = self.ctx.structured.json(&model).then_some(schema.as_ref());
        let spec = self
            .call(
                "extract",
                &model,
                extract_prompt_as(&self.content, asked),
                "extract",
                "extractor",
            )
            .with_schema(&schema)
            .quoting([("the content".to_string(), self.content.clone())]);
        self.claims_schema = Some(schema);
        let backup = self.config.facilitator_fallback_model.clone();
        vec![
            Effect::emit("extract_start", json!({})),
            self.calls.solo(spec, EXTRACT_ORDER, backup.as_deref()),
        ]
    }

    fn on_generate(&mut self, reply: CallReply) -> Vec<Effect> {
        let text = match &reply.result {
            Ok(t) => answer_text(t).trim().to_string(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.title.fail(format!(
                    "The generator ({}) failed: {}; with no content there is nothing to check.",
                    reply.model, e.message
                ));
            }
        };
        let ms = reply.response_time_ms as i64;
        let data = json!({ "model": reply.model, "content": text, "responseTimeMs": ms });
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "generate".into(),
                stage_order: GENERATE_ORDER,
                model: Some(reply.model.clone()),
                role: Some("generator".into()),
                content: text.clone(),
                parsed_data: Some(json!({ "model": reply.model, "responseTimeMs": ms })),
                response_time_ms: Some(ms),
            }),
            Effect::emit("generate_complete", json!({ "data": data })),
        ];
        if self.deadline_passed {
            out.extend(self.deadline_fail("generation"));
            return out;
        }
        out.extend(self.extract(&text));
        out
    }

    fn on_extract(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let text = match &reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.title.fail(format!(
                    "{}; no claims could be listed.",
                    role_failed("extractor", &routed, e)
                ));
            }
        };
        let schema = self.claims_schema.clone().unwrap_or_else(claims_schema);
        let (reading, read_from) = read_claims_reply(&text, &schema);
        self.claims = reading.claims.clone();
        let ms = reply.response_time_ms as i64;
        let mut data = json!({
            "model": reply.model, "claims": self.claims, "typeBreakdown": type_breakdown(&self.claims),
            "truncated": self.truncated, "parseSuccess": reading.parse_success(),
            "responseTimeMs": ms,
        });
        if let Some(from) = &routed.fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        let mut stored = data.clone();
        stored["content"] = json!(self.content);
        stored["contentSource"] = json!(self.source());
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "extract".into(),
                stage_order: EXTRACT_ORDER,
                model: Some(reply.model.clone()),
                role: Some("extractor".into()),
                content: answer_text(&text).trim().to_string(),
                parsed_data: Some(stored),
                response_time_ms: Some(ms),
            }),
            Effect::emit("extract_complete", json!({ "data": data })),
        ];
        if self.claims.is_empty() {
            let note = if reading.none_stated {
                "No checkable claims were found in the content: the extractor listed none, so \
                 nothing was checked."
            } else {
                "No checkable claims could be read from the extractor's reply (it did not list \
                 them in the expected format), so nothing was checked."
            };
            out.extend(self.finish_report(None, note.to_string(), None, false, None, None));
            return out;
        }
        if self.deadline_passed {
            out.extend(self.deadline_fail("extraction"));
            return out;
        }
        self.phase = Phase::Verifying;
        out.push(Effect::emit(
            "verify_start",
            json!({ "data": { "checkerCount": self.config.checker_models.len(),
                              "claimCount": self.claims.len() } }),
        ));
        let schema = verifications_schema(self.claims.len());
        let text = verify_prompt(&self.content, &self.claims);
        let json = verify_prompt_as(&self.content, &self.claims, Some(&schema));
        for (i, model) in self.config.checker_models.clone().iter().enumerate() {
            let prompt = self.ctx.structured.pick(model, &text, &json).clone();
            let call = self
                .call(&self.batch.key(i), model, prompt, "verify", "checker")
                .with_schema(&schema)
                .quoting([("the content".to_string(), self.content.clone())]);
            out.push(Effect::Call(call));
        }
        self.verify_schema = Some(schema);
        out
    }

    fn on_check(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = reply.key.strip_prefix("verify:").and_then(|n| n.parse::<usize>().ok())
        else {
            return Vec::new();
        };
        let ms = reply.response_time_ms as i64;
        let model = self.config.checker_models.get(i).cloned().unwrap_or_default();
        let schema =
            self.verify_schema.clone().unwrap_or_else(|| verifications_schema(self.claims.len()));
        let (check, content) = match &reply.result {
            Ok(text) => {
                let (r, read_from) = read_check_reply(text, &self.claims, &schema);
                let check = Check {
                    checker_index: i,
                    model: reply.model.clone(),
                    summary: summary_of(&r.verifications),
                    verifications: r.verifications,
                    parse_success: r.parse_success,
                    response_time_ms: ms,
                    failed: false,
                    error: None,
                    read_from,
                };
                (check, answer_text(text).trim().to_string())
            }
            Err(e) => (
                Check {
                    checker_index: i,
                    model,
                    verifications: Vec::new(),
                    summary: Value::Null,
                    parse_success: false,
                    response_time_ms: ms,
                    failed: true,
                    error: Some(e.message.clone()),
                    read_from: None,
                },
                e.message.clone(),
            ),
        };
        let out = vec![
            Effect::Store(StageRow {
                stage_type: format!("verify_{i}"),
                stage_order: VERIFY_ORDER,
                model: Some(reply.model.clone()),
                role: Some("checker".into()),
                content,
                parsed_data: Some(json!(check)),
                response_time_ms: Some(ms),
            }),
            Effect::emit("checker_complete", json!({ "data": check })),
        ];
        self.checks.push(check);
        out
    }

    fn all_checked(&mut self) -> Vec<Effect> {
        self.checks.sort_by_key(|c| c.checker_index);
        let usable = self.checks.iter().filter(|c| c.parse_success).count();
        if usable == 0 {
            self.phase = Phase::Done;
            return self.title.fail(format!(
                "None of the {} checkers gave a usable check (each failed or addressed no \
                 claim); the {} claims are kept.",
                self.checks.len(),
                self.claims.len()
            ));
        }
        let (consensus, counts) = consensus(&self.claims, &self.checks);
        self.consensus = consensus;
        self.counts = counts;
        let data = json!({ "consensus": self.consensus, "counts": self.counts,
                           "usableCheckers": usable });
        let prompt =
            report_prompt(&self.content, &self.claims, &self.consensus, &self.checks, &self.counts);
        let verdicts = consensus_text(&self.claims, &self.consensus, &self.checks);
        let spec = self
            .call("report", &self.config.reporter_model.clone(), prompt, "report", "reporter")
            .quoting([
                ("the content".to_string(), self.content.clone()),
                ("the checkers' verdicts".to_string(), verdicts),
            ]);
        self.phase = Phase::Reporting;
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::Store(StageRow::computed("consensus", CONSENSUS_ORDER, data.clone())),
            Effect::emit("all_checkers_complete", json!({ "data": data })),
            Effect::emit("report_start", json!({})),
            self.calls.solo(spec, REPORT_ORDER, backup.as_deref()),
        ]
    }

    fn on_report(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let ms = Some(reply.response_time_ms as i64);
        match &reply.result {
            Ok(text) => {
                let report = answer_text(text).trim().to_string();
                let score = read_score(text);
                let from = routed.fallback_from.clone();
                self.finish_report(Some(reply.model.clone()), report, score, false, ms, from)
            }
            Err(_) => {
                let report = fallback_report(&self.claims, &self.consensus, &self.counts);
                self.finish_report(None, report, None, true, None, None)
            }
        }
    }

    /// The report (the reporter's, the server's table, or the no-claims note), stored, sent,
    /// and the run's answer: `response_time_ms` is the reporter's (or its backup's, which
    /// stood in for `fallback_from`); the server's own reports have neither.
    fn finish_report(
        &mut self,
        model: Option<String>,
        report: String,
        score: Option<u32>,
        fallback: bool,
        response_time_ms: Option<i64>,
        fallback_from: Option<String>,
    ) -> Vec<Effect> {
        self.phase = Phase::Done;
        let mut summary = json!({ "verified": self.counts.verified, "disputed": self.counts.disputed,
                                  "unverifiable": self.counts.unverifiable });
        if self.truncated {
            summary["note"] = json!(format!(
                "The content was longer than {} characters and was cut; only the first {} were \
                 checked.",
                self.config.max_content_length, self.config.max_content_length
            ));
        }
        let mut data = json!({
            "model": model, "report": report, "reliabilityScore": score, "summary": summary,
            "fallback": fallback,
            "responseTimeMs": response_time_ms,
        });
        if let Some(from) = &fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        let mut stored = data.clone();
        if let Some(o) = stored.as_object_mut() {
            o.remove("report");
        }
        let mut event = json!({ "data": data });
        self.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "report".into(),
                stage_order: REPORT_ORDER,
                model: model.clone(),
                role: Some("reporter".into()),
                content: report.clone(),
                parsed_data: Some(stored),
                response_time_ms,
            }),
            Effect::emit("report_complete", event),
        ];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: report });
        out
    }
}

impl Mode for FactCheck {
    fn start(&mut self) -> Vec<Effect> {
        let mut config = json!({
            "contentSource": self.source(), "extractorModel": self.config.extractor_model,
            "checkerModels": self.config.checker_models, "reporterModel": self.config.reporter_model,
            "maxContentLength": self.config.max_content_length,
        });
        if self.config.content.is_none() {
            config["generatorModel"] = json!(self.config.generator_model);
            if self.config.checker_models.contains(&self.config.generator_model) {
                config["biasWarning"] = json!(format!(
                    "{} wrote the content and also checks it; its checks may favour its own \
                     answer.",
                    self.config.generator_model
                ));
            }
        }
        let mut out = vec![
            Effect::emit(
                "factcheck_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "fact_check", "config": config }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
        ];
        let title_model = match &self.config.content {
            Some(content) => {
                let content = content.clone();
                out.extend(self.extract(&content));
                self.config.extractor_model.clone()
            }
            None => {
                out.push(Effect::emit("generate_start", json!({})));
                let model = self.config.generator_model.clone();
                out.push(Effect::Call(self.call(
                    "generate",
                    &model,
                    generate_prompt(&self.ctx.question),
                    "generate",
                    "generator",
                )));
                model
            }
        };
        out.extend(self.title.call(
            &title_model,
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
        let (mut out, routed) = self.calls.route(empty_is_failure(reply));
        let Some(routed) = routed else { return out };
        let key = routed.reply.key.clone();
        match self.phase {
            Phase::Generating if key == "generate" => out.extend(self.on_generate(routed.reply)),
            Phase::Extracting if key == "extract" => out.extend(self.on_extract(routed)),
            Phase::Verifying
                if key.starts_with("verify:") && self.batch.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_check(&routed.reply));
                if self.batch.complete() {
                    out.extend(self.all_checked());
                }
            }
            Phase::Reporting if key == "report" => out.extend(self.on_report(routed)),
            _ => {}
        }
        self.calls.track(&out, stage_order);
        out
    }

    /// The global cap: the stage in flight finishes; the report follows if the checks are
    /// done, else the run fails.
    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.deadline_passed = true;
        }
        Vec::new()
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{content, contentSource, generate, extract, claims, checks, consensus, counts, report,
/// partial, failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let generate = row("generate").map(|g| {
        let mut d = g.parsed_data.clone().unwrap_or(json!({}));
        d["content"] = json!(g.content);
        d
    });
    let extract_row = row("extract");
    let mut extract = extract_row.and_then(|r| r.parsed_data.clone());
    let content = extract
        .as_ref()
        .map(|e| e["content"].clone())
        .or_else(|| generate.as_ref().map(|g| g["content"].clone()));
    let source = match &extract {
        Some(e) => e["contentSource"].clone(),
        None if generate.is_some() => json!("generated"),
        None => Value::Null,
    };
    if let Some(o) = extract.as_mut().and_then(Value::as_object_mut) {
        o.remove("content");
        o.remove("contentSource");
    }
    let claims = extract.as_ref().map_or(json!([]), |e| e["claims"].clone());
    let mut checks: Vec<Check> = rows
        .iter()
        .filter(|r| {
            r.stage_type.strip_prefix("verify_").is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .filter_map(|r| serde_json::from_value(r.parsed_data.clone()?).ok())
        .collect();
    checks.sort_by_key(|c| c.checker_index);
    let consensus = row("consensus").and_then(|r| r.parsed_data.clone());
    let report = row("report").map(|r| {
        let mut d = r.parsed_data.clone().unwrap_or(json!({}));
        d["report"] = json!(r.content);
        d
    });
    let mut result = json!({
        "content": content, "contentSource": source, "generate": generate, "extract": extract,
        "claims": claims, "checks": checks,
        "consensus": consensus.as_ref().map_or(Value::Null, |c| c["consensus"].clone()),
        "counts": consensus.as_ref().map_or(Value::Null, |c| c["counts"].clone()),
        "usableCheckers": consensus.as_ref().map_or(Value::Null, |c| c["usableCheckers"].clone()),
        "report": report,
    });
    mark_from_rows(&mut result, rows);
    result
}

fn outcome(result: &Value) -> Option<String> {
    let r = result.get("report").filter(|r| !r.is_null())?;
    let c = &result["counts"];
    let score = match &r["reliabilityScore"] {
        Value::Null => "no reliability score".to_string(),
        v => format!("reliability {v}/100"),
    };
    if c.is_null() {
        return Some(format!(
            "no checkable claims: {}",
            short(r["report"].as_str().unwrap_or(""), 60)
        ));
    }
    let noun = if c["total"] == 1 { "claim" } else { "claims" };
    Some(format!(
        "{score}: {} verified, {} disputed, {} unverifiable of {} {noun}",
        c["verified"], c["disputed"], c["unverifiable"], c["total"]
    ))
}

// ---- sim answers ---------------------------------------------------------------------------

/// The sentences of a text that state a number (the sim's "checkable claims").
fn sim_claims(content: &str) -> Vec<String> {
    // A sentence ends at `.`, `!` or `?` followed by a space or the end: the point of `2.1` is
    // no sentence's end.
    let mut sentences: Vec<&str> = Vec::new();
    let mut start = 0;
    let bytes = content.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?')
            && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace())
        {
            sentences.push(&content[start..=i]);
            start = i + 1;
        }
    }
    sentences.push(&content[start..]);
    sentences
        .into_iter()
        .map(str::trim)
        .filter(|s| s.chars().any(|c| c.is_ascii_digit()) && s.len() > 12 && !s.contains('<'))
        .map(|s| s.replace('\n', " "))
        .take(8)
        .collect()
}

/// The sim's JSON for this mode's schemas: the claims are the content's sentences that state
/// a number (as in text), and every listed claim is judged.
fn sim_json(ask: &SimAsk, schema: &ReplySchema) -> Option<String> {
    let p = ask.prompt;
    let who = ask.model;
    let mut rng = SplitMix64::new(ask.seed);
    let hostile = ask.hostile_paragraph();
    let reasoning = |why: &str| -> String {
        format!("[simulated reasoning from {who}] {why} {}", hostile.trim())
            .trim()
            .chars()
            .take(schema::REASONING_MAX_CHARS)
            .collect()
    };
    let cut = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
    let reply = match schema.name.as_str() {
        CLAIMS_SCHEMA if p.starts_with(EXTRACT_HEAD) => {
            let found = sim_claims(between(p, CONTENT_START, CONTENT_END));
            let claims: Vec<Value> = found
                .iter()
                .take(MAX_CLAIMS)
                .map(|c| {
                    json!({ "claim": cut(c, CLAIM_MAX_CHARS), "context": cut(c, CONTEXT_MAX_CHARS),
                            "type": TYPES[rng.below(3)] })
                })
                .collect();
            json!({ "reasoning": reasoning("The sentences that state a figure or a date can be checked."),
                    "claims": claims })
        }
        VERIFICATIONS_SCHEMA if p.starts_with(VERIFY_HEAD) => {
            let listed = between(p, CLAIMS_START, CLAIMS_END);
            let judged: Vec<Value> = listed
                .lines()
                .filter_map(|l| numbered("claim", l).map(|(n, _)| n))
                .map(|n| {
                    let (verdict, correction) = match rng.below(10) {
                        0..=5 => ("VERIFIED", "N/A"),
                        6..=7 => ("DISPUTED", "The figure is stated differently in the sources."),
                        _ => ("UNVERIFIABLE", "N/A"),
                    };
                    json!({ "claim": n,
                            "evidence": format!("Simulated evidence for claim {n}; no source was consulted."),
                            "verdict": verdict, "correction": correction,
                            "confidence": CONFIDENCES[rng.below(3)] })
                })
                .collect();
            json!({ "reasoning": reasoning("Each claim weighed against what is commonly recorded."),
                    "verifications": judged })
        }
        _ => return None,
    };
    Some(reply.to_string())
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    if let Some(schema) = ask.schema {
        return sim_json(ask, schema);
    }
    let p = ask.prompt;
    let who = ask.model;
    let mut rng = SplitMix64::new(ask.seed);
    if p.starts_with(GENERATE_HEAD) {
        if ask.malformed {
            return Some(format!("[simulated answer from {who}] It depends; opinions differ."));
        }
        return Some(format!(
            "[simulated answer from {who}]\n\nThe Eiffel Tower was completed in 1889 for the \
             World's Fair in Paris. It is about 330 metres tall. It was the tallest man-made \
             structure in the world until 1930, when the Chrysler Building passed it. About 7 \
             million people visit it every year.\n\n{}Many consider it beautiful. (This answer is \
             simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
    }
    if p.starts_with(EXTRACT_HEAD) {
        let content = between(p, CONTENT_START, CONTENT_END);
        let found = sim_claims(content);
        if found.is_empty() {
            return Some("CLAIMS: NONE".into());
        }
        if ask.malformed {
            return Some(format!(
                "[simulated extraction from {who}] The text makes a few claims, mostly about \
                 dates and sizes: {}",
                found.join(" ")
            ));
        }
        let mut s = String::new();
        for (i, c) in found.iter().enumerate() {
            let t = TYPES[rng.below(3)];
            s.push_str(&format!("**CLAIM {}:** {c}\nContext: {c}\nType: {t}\n\n", i + 1));
        }
        s.push_str(&format!("EXTRACTION SUMMARY: {} claims.", found.len()));
        return Some(s);
    }
    if p.starts_with(VERIFY_HEAD) {
        let listed = between(p, CLAIMS_START, CLAIMS_END);
        let numbers: Vec<u64> =
            listed.lines().filter_map(|l| numbered("claim", l).map(|(n, _)| n)).collect();
        if ask.malformed {
            return Some(format!(
                "[simulated check from {who}] Most of this looks right to me, though I am not \
                 sure about the height."
            ));
        }
        let mut s = format!("[simulated check from {who}]\n\n");
        for n in numbers {
            let roll = rng.below(10);
            let (verdict, correction) = match roll {
                0..=5 => ("VERIFIED", "N/A"),
                6..=7 => ("DISPUTED", "The figure is stated differently in the sources."),
                _ => ("UNVERIFIABLE", "N/A"),
            };
            let confidence = CONFIDENCES[rng.below(3)];
            s.push_str(&format!(
                "VERIFICATION {n}: {verdict}\nEvidence: Simulated evidence for claim {n}; no \
                 source was consulted.\nCorrection: {correction}\nConfidence: {confidence}\n\n"
            ));
        }
        s.push_str(&ask.hostile_paragraph());
        return Some(s);
    }
    if p.starts_with(REPORT_HEAD) {
        if ask.malformed {
            return Some(format!(
                "[simulated report from {who}] Broadly reliable, with a few shaky figures."
            ));
        }
        let score = 50 + rng.below(46);
        return Some(format!(
            "[simulated report from {who}]\n\n## Content Summary\n\n{}The content makes dated, \
             numeric claims.\n\n## Overall Reliability Score: {score}/100\n\nMost claims held up \
             under the checks.\n\n## Evidence Table\n\nAs computed by the server.\n\n\
             ## Detailed Findings\n\nSee the verdicts per claim.\n\n## Annotated Content\n\nThe \
             text with its verdicts.\n\n## Methodology\n\nIndependent checkers, majority \
             consensus. (This report is simulated: no real model was asked.)",
            ask.hostile_paragraph()
        ));
    }
    None
}

#[cfg(test)]
#[path = "fact_check_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A verdict in words.
fn verdict_word(v: &str) -> &str {
    match v {
        "VERIFIED" => "verified",
        "DISPUTED" => "disputed",
        "UNVERIFIABLE" => "unverifiable",
        other => other,
    }
}

/// The result as the export's report: the score, a table of the claims with their consensus,
/// and each checker's verdicts in a line.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    if let Some(score) = result["report"]["reliabilityScore"].as_i64() {
        out.push_str(&format!("**Reliability:** {score}/100\n\n"));
    }
    let claims = result["claims"].as_array().cloned().unwrap_or_default();
    let consensus = result["consensus"].as_array().cloned().unwrap_or_default();
    if claims.is_empty() {
        out.push_str("No checkable claims were found.\n");
        return out;
    }
    let rows: Vec<Vec<String>> = claims
        .iter()
        .map(|c| {
            let k = consensus.iter().find(|k| k["claimId"] == c["id"]);
            let verdict = k.and_then(|k| k["verdict"].as_str()).map_or("not checked", verdict_word);
            let how = k.map_or(String::new(), |k| {
                let votes = &k["votes"];
                let split: Vec<String> = ["VERIFIED", "DISPUTED", "UNVERIFIABLE"]
                    .iter()
                    .filter_map(|v| {
                        votes[*v]
                            .as_u64()
                            .filter(|n| *n > 0)
                            .map(|n| format!("{n} {}", verdict_word(v)))
                    })
                    .collect();
                if k["split"] == true {
                    format!(" (split: {})", split.join(", "))
                } else {
                    String::new()
                }
            });
            vec![
                c["number"].to_string(),
                c["text"].as_str().unwrap_or("").to_string(),
                format!("{verdict}{how}"),
                k.and_then(|k| k["agreementRate"].as_u64())
                    .map_or("—".into(), |a| format!("{a}%")),
                k.and_then(|k| k["consensusConfidence"].as_str())
                    .map_or("—".into(), str::to_lowercase),
                k.and_then(|k| k["correction"].as_str()).unwrap_or("—").to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "claim", "verdict", "agreement", "confidence", "correction"],
        &rows,
        &[0, 3],
    ));
    let c = &result["counts"];
    let total = c["total"].as_u64().unwrap_or(claims.len() as u64);
    out.push_str(&format!(
        "\n{} verified, {} disputed, {} unverifiable of {}.\n",
        c["verified"].as_u64().unwrap_or(0),
        c["disputed"].as_u64().unwrap_or(0),
        c["unverifiable"].as_u64().unwrap_or(0),
        count(total, "claim", "claims")
    ));
    let checks = result["checks"].as_array().cloned().unwrap_or_default();
    if !checks.is_empty() {
        out.push_str("\n**The checkers:**\n\n");
        for ch in &checks {
            let model = ch["model"].as_str().unwrap_or("a checker");
            let line = if ch["failed"] == true {
                "its call failed".to_string()
            } else if ch["parseSuccess"] == false {
                "no verdict could be read from its reply".to_string()
            } else {
                let s = &ch["summary"];
                let mut l = format!(
                    "{} verified, {} disputed, {} unverifiable",
                    s["verified"].as_u64().unwrap_or(0),
                    s["disputed"].as_u64().unwrap_or(0),
                    s["unverifiable"].as_u64().unwrap_or(0)
                );
                if let Some(n) = s["unaddressed"].as_u64().filter(|n| *n > 0) {
                    l.push_str(&format!(", {} not addressed", count(n, "claim", "claims")));
                }
                l
            };
            out.push_str(&format!("- {model}: {line}\n"));
        }
    }
    out
}
