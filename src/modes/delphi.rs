//! Delphi mode (seed 05): the facilitator classifies the question (NUMERIC or QUALITATIVE);
//! panelists answer independently, then in later rounds see only aggregate statistics and
//! their own previous answer, until the estimates converge or the rounds run out; the
//! facilitator writes the report. Every statistic is computed here, never by a model.
//!
//! Decisions where the seed is silent: `options` without `questionType` means a qualitative
//! question with those options (no classification call); a qualitative question with no
//! options takes free-form answers, grouped case-insensitively; a panelist whose round-1 answer
//! could not be read stays on the panel (with no previous answer) while one whose call failed
//! is dropped; a round-2+ answer that cannot be read counts as a failure (previous answer
//! carried forward); the numeric final value is the last round's mean (the seed's example);
//! the facilitator may not sit on the panel; the 600 s global cap is `globalTimeoutMs`. A
//! facilitator call (classification or report) that fails is repeated once on the configured
//! backup (`[fallback] facilitator`), which may sit on the panel (it never answers as a
//! panelist); the classification or report it writes says `fallbackFrom`.
//!
//! Structured replies: a model whose route takes structured output is asked for the
//! classification and its estimates as JSON (`delphi_classify`, `delphi_estimate`,
//! `delphi_answer`; see the section below) with the seed's instructions otherwise unchanged;
//! the report is text a person reads. The classification and each round's estimate say where
//! they were read from (`readFrom`); an estimate carried forward says nothing, as it was not
//! read this round.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{mark_from_rows, title_prompt, Batch, Calls, Routed, TitleTracker, TITLE_KEY};
use super::reading::{self, Unparsed};
use super::registry::{schema_of, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_SHORT_CHARS};
use super::schema::{self, ReadFrom, ReplySchema};
use super::{
    numbers, request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError,
    Mode, RunContext, StageRow, ValidRequest,
};

const SIM_PANEL: [&str; 4] = ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"];
const SIM_FACILITATOR: &str = "sim/delta";
const SEED_PANEL: [&str; 4] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro", "perplexity/sonar-pro"];
const SEED_FACILITATOR: &str = "anthropic/claude-sonnet-4";
/// Rounds need at least this many valid estimates.
pub const MIN_ESTIMATES: usize = 3;
const GLOBAL_TIMER: &str = "global";

/// Whether a question asks for a number or for one of some choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QuestionType {
    Numeric,
    Qualitative,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DelphiConfig {
    pub panelist_models: Vec<String>,
    pub facilitator_model: String,
    pub max_rounds: u32,
    pub numeric_convergence_threshold: f64,
    pub qualitative_convergence_threshold: f64,
    pub question_type: Option<QuestionType>,
    pub options: Option<Vec<String>>,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup facilitator (`[fallback] facilitator`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator_fallback_model: Option<String>,
}

/// The `stage_order` of a Delphi stage's calls (`classify`, `round_N`, `synthesis`).
fn stage_order(stage: &str) -> i32 {
    match stage.strip_prefix("round_").and_then(|n| n.parse::<i32>().ok()) {
        Some(n) => 2 * n - 1,
        None if stage == "classify" => 0,
        None => 99,
    }
}

/// A number within `min..=max`, or `default` when absent.
fn number_in(
    n: Option<f64>,
    field: &str,
    min: f64,
    max: f64,
    default: f64,
) -> Result<f64, FieldError> {
    match n {
        None => Ok(default),
        Some(n) if (min..=max).contains(&n) => Ok(n),
        Some(_) => Err(FieldError::new(field, format!("must be a number from {min} to {max}"))),
    }
}

/// Delphi's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DelphiRequest {
    /// The panel: 3 to 7 models that estimate anonymously, round after round.
    #[schemars(length(min = 3, max = 7))]
    pub panelist_models: Option<Vec<ModelId>>,
    /// Classifies the question and writes the report; must not be a panelist.
    pub facilitator_model: Option<ModelId>,
    /// The most rounds (2 to 5; default 5).
    #[schemars(range(min = 2, max = 5))]
    pub max_rounds: Option<i64>,
    /// Numeric questions converge when the spread (coefficient of variation) falls to this
    /// (0.01 to 1; default 0.15).
    #[schemars(range(min = 0.01, max = 1.0))]
    pub numeric_convergence_threshold: Option<f64>,
    /// Qualitative questions converge when this share of the panel agrees, in % (50 to 100;
    /// default 75).
    #[schemars(range(min = 50.0, max = 100.0))]
    pub qualitative_convergence_threshold: Option<f64>,
    /// Skip the classification: `numeric` or `qualitative`.
    pub question_type: Option<QuestionType>,
    /// The choices of a qualitative question (2 to 10).
    #[schemars(length(min = 2, max = 10))]
    pub options: Option<Vec<Text<MAX_SHORT_CHARS>>>,
    /// Per-round timeout in milliseconds.
    #[schemars(range(min = 30000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// The whole run's time limit in milliseconds (default 600 000).
    #[schemars(range(min = 10000, max = 3600000))]
    pub global_timeout_ms: Option<i64>,
}

/// `{question, mode:"delphi", modeConfig?: {panelistModels (3-7), facilitatorModel, maxRounds
/// (2-5), numericConvergenceThreshold (0.01-1), qualitativeConvergenceThreshold (50-100),
/// questionType, options (2-10), timeoutMs (30 000-180 000), globalTimeoutMs}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: DelphiRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let panelist_models = request::models(
        cfg.panelist_models.as_deref(),
        "modeConfig.panelistModels",
        3..=7,
        Some("Delphi mode requires at least 3 panelist models"),
        Some("Maximum 7 panelist models allowed"),
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_PANEL } else { &SEED_PANEL }));
    let facilitator_model =
        request::model(cfg.facilitator_model.as_ref(), "modeConfig.facilitatorModel")?
            .unwrap_or_else(|| {
                (if defaults.offline { SIM_FACILITATOR } else { SEED_FACILITATOR }).to_string()
            });
    if panelist_models.contains(&facilitator_model) {
        return Err(FieldError::new(
            "modeConfig.facilitatorModel",
            "The facilitator must not be one of the panelists",
        ));
    }
    let max_rounds = match cfg.max_rounds {
        None => 5,
        Some(n @ 2..=5) => n as u32,
        Some(_) => {
            return Err(FieldError::new(
                "modeConfig.maxRounds",
                "must be a whole number from 2 to 5",
            ))
        }
    };
    let numeric_convergence_threshold = number_in(
        cfg.numeric_convergence_threshold,
        "modeConfig.numericConvergenceThreshold",
        0.01,
        1.0,
        0.15,
    )?;
    let qualitative_convergence_threshold = number_in(
        cfg.qualitative_convergence_threshold,
        "modeConfig.qualitativeConvergenceThreshold",
        50.0,
        100.0,
        75.0,
    )?;
    let question_type = cfg.question_type;
    let options: Option<Vec<ModelId>> =
        cfg.options.map(|o| o.into_iter().map(|t| ModelId(t.0)).collect());
    let options = match request::models(
        options.as_deref(),
        "modeConfig.options",
        2..=10,
        Some("at least 2 options are required"),
        Some("at most 10 options are allowed"),
    )? {
        // The seed: a numeric override ignores options.
        Some(_) if question_type == Some(QuestionType::Numeric) => None,
        other => other,
    };
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        30_000..=180_000,
        defaults.stage_timeout_ms,
    )?;
    let global_timeout_ms = request::timeout(
        cfg.global_timeout_ms,
        "modeConfig.globalTimeoutMs",
        10_000..=3_600_000,
        600_000,
    )?;
    let models = request::distinct(&[&panelist_models], &[&facilitator_model]);
    let facilitator_fallback_model =
        Fallbacks::for_role(&defaults.fallback.facilitator, &facilitator_model);
    let config = DelphiConfig {
        panelist_models,
        facilitator_model,
        max_rounds,
        numeric_convergence_threshold,
        qualitative_convergence_threshold,
        question_type,
        options,
        timeout_ms,
        global_timeout_ms,
        facilitator_fallback_model,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Delphi in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "delphi",
    label: "Delphi",
    description: "Anonymous estimation rounds on aggregate statistics until the panel converges; the facilitator reports.",
    multi_turn: false,
    question: Question { label: "Question to estimate", required: Some("Question is required") },
    roles: &[
        Role {
            id: "panelist",
            label: "Panelists",
            field: Some("panelistModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_PANEL,
            default: &SEED_PANEL,
        },
        Role {
            id: "facilitator",
            label: "Facilitator",
            field: Some("facilitatorModel"),
            panel: false,
            fallback: Some("facilitator"),
            sim_default: &[SIM_FACILITATOR],
            default: &[SEED_FACILITATOR],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<DelphiRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Delphi::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let value = match &r["finalValue"] {
            Value::Number(n) => fmt_num(n.as_f64()?),
            Value::String(s) => s.clone(),
            _ => return None,
        };
        Some(match r["convergenceRound"].as_u64() {
            Some(round) => format!("{value} (converged in round {round})"),
            None => format!("{value} (no convergence)"),
        })
    },
    stages: &[("delphi", "")],
    report: Some(report),
    example: || {
        json!({ "mode": "delphi", "question": "How many software engineers will be employed globally by 2030?" })
    },
    sim: Some(sim_answer),
};

// ---- prompts (verbatim from the seed) -------------------------------------------------------

pub fn classify_prompt(question: &str) -> String {
    classify_prompt_as(question, None)
}

/// The seed's `Format:` section of the classification prompt.
const CLASSIFY_FORMAT: &str = "Format:\n\
TYPE: [NUMERIC|QUALITATIVE]\n\
OPTIONS: [comma-separated options, or \"N/A\" if NUMERIC]\n\
REASONING: [one sentence explaining your classification]";

/// The classification prompt asking for the seed's `Format:` section, or, given the stage's
/// schema, for its JSON instead (the same instructions otherwise).
pub fn classify_prompt_as(question: &str, schema: Option<&ReplySchema>) -> String {
    format!(
        "Classify the following question for a Delphi estimation exercise.\n\nQUESTION:\n{question}\n\n\
Determine:\n\
1. Is this a NUMERIC question (expects a number, quantity, estimate, percentage, date, or measurable value)?\n\
2. Or is this a QUALITATIVE question (expects a category, recommendation, choice, or opinion)?\n\n\
If QUALITATIVE, suggest 3-6 answer options that cover the reasonable range of responses.\n\n\
{}",
        format_or(schema, CLASSIFY_FORMAT)
    )
}

/// The seed's text format, or the schema's JSON instruction in its place.
fn format_or(schema: Option<&ReplySchema>, text: &str) -> String {
    schema.map_or_else(|| text.to_string(), ReplySchema::instruction)
}

const ROUND1_NUMERIC_FORMAT: &str =
    "Format:\nESTIMATE: [number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [your reasoning]";

pub fn round1_numeric_prompt(question: &str) -> String {
    round1_numeric_prompt_as(question, None)
}

/// [`round1_numeric_prompt`], or its JSON form given the round's schema.
pub fn round1_numeric_prompt_as(question: &str, schema: Option<&ReplySchema>) -> String {
    format!(
        "You are participating in a Delphi estimation exercise. You will provide your independent estimate for a question. In later rounds, you will see aggregate statistics from all participants (but never individual responses).\n\n\
QUESTION:\n{question}\n\n\
Provide:\n1. Your numeric estimate\n2. Your confidence level (LOW/MEDIUM/HIGH)\n3. Your reasoning (2-4 sentences)\n\n{}",
        format_or(schema, ROUND1_NUMERIC_FORMAT)
    )
}

const ROUND1_QUALITATIVE_FORMAT: &str = "Format:\nANSWER: [your answer or option number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [your reasoning]";

pub fn round1_qualitative_prompt(question: &str, options: &[String]) -> String {
    round1_qualitative_prompt_as(question, options, None)
}

/// [`round1_qualitative_prompt`], or its JSON form given the round's schema.
pub fn round1_qualitative_prompt_as(
    question: &str,
    options: &[String],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = format!(
        "You are participating in a Delphi consensus exercise. You will provide your independent assessment. In later rounds, you will see aggregate results from all participants (but never individual responses).\n\n\
QUESTION:\n{question}\n\n"
    );
    if !options.is_empty() {
        p.push_str("Choose from these options:\n");
        for (i, o) in options.iter().enumerate() {
            p.push_str(&format!("{}. {o}\n", i + 1));
        }
        p.push('\n');
    }
    p.push_str(
        "Provide:\n1. Your answer/recommendation\n2. Your confidence level (LOW/MEDIUM/HIGH)\n3. Your reasoning (2-4 sentences)\n\n",
    );
    p.push_str(&format_or(schema, ROUND1_QUALITATIVE_FORMAT));
    p
}

/// Numbers as the prompts show them: whole numbers with separators, others to 3 decimals.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "Infinity".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let digits = format!("{}", v.abs() as i64);
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        return if v < 0.0 { format!("-{out}") } else { out };
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub fn round_n_numeric_prompt(
    question: &str,
    round: u32,
    max: u32,
    prev: &Estimate,
    stats: &NumericStats,
    n: usize,
) -> String {
    round_n_numeric_prompt_as(question, round, max, prev, stats, n, None)
}

const ROUND_N_NUMERIC_FORMAT: &str = "ESTIMATE: [number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [why you revised or maintained — reference the aggregates]";

/// [`round_n_numeric_prompt`], or its JSON form given the round's schema.
pub fn round_n_numeric_prompt_as(
    question: &str,
    round: u32,
    max: u32,
    prev: &Estimate,
    stats: &NumericStats,
    n: usize,
    schema: Option<&ReplySchema>,
) -> String {
    let c = &stats.confidence_counts;
    format!(
        "DELPHI ROUND {round} of {max}\n\nQUESTION: {question}\n\n\
YOUR PREVIOUS ESTIMATE: {}\nYOUR PREVIOUS CONFIDENCE: {}\n\n\
AGGREGATE STATISTICS FROM ALL {n} PARTICIPANTS (Round {}):\n\
- Mean: {}\n- Median: {}\n- Standard Deviation: {}\n- Range: {} — {}\n- Coefficient of Variation: {}\n\
- Confidence Distribution: {} LOW, {} MEDIUM, {} HIGH\n\n\
You may revise your estimate based on these aggregates, or maintain your position if you believe you are correct.\n\n\
{}",
        prev.value.as_number().map_or("none (your previous answer could not be read)".into(), fmt_num),
        prev.confidence.as_str(),
        round - 1,
        fmt_num(stats.mean),
        fmt_num(stats.median),
        fmt_num(stats.std_dev),
        fmt_num(stats.min),
        fmt_num(stats.max),
        fmt_num(stats.cv),
        c.low,
        c.medium,
        c.high,
        format_or(schema, ROUND_N_NUMERIC_FORMAT)
    )
}

pub fn round_n_qualitative_prompt(
    question: &str,
    round: u32,
    max: u32,
    prev: &Estimate,
    stats: &QualitativeStats,
    n: usize,
) -> String {
    round_n_qualitative_prompt_as(question, round, max, prev, stats, n, None)
}

const ROUND_N_QUALITATIVE_FORMAT: &str = "ANSWER: [your answer]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [why you revised or maintained — reference the distribution]";

/// [`round_n_qualitative_prompt`], or its JSON form given the round's schema.
pub fn round_n_qualitative_prompt_as(
    question: &str,
    round: u32,
    max: u32,
    prev: &Estimate,
    stats: &QualitativeStats,
    n: usize,
    schema: Option<&ReplySchema>,
) -> String {
    let mut dist = String::new();
    for d in &stats.distribution {
        dist.push_str(&format!(
            "  {}: {} participants ({}%)\n",
            d.answer,
            d.count,
            fmt_num(d.percentage)
        ));
    }
    let c = &stats.confidence_counts;
    format!(
        "DELPHI ROUND {round} of {max}\n\nQUESTION: {question}\n\n\
YOUR PREVIOUS ANSWER: {}\n\n\
AGGREGATE RESULTS FROM ALL {n} PARTICIPANTS (Round {}):\n- Distribution:\n{dist}\
- Agreement Level: {}%\n- Confidence Distribution: {} LOW, {} MEDIUM, {} HIGH\n\n\
You may revise your answer based on these aggregates, or maintain your position.\n\n\
{}",
        prev.value.as_answer().unwrap_or("none (your previous answer could not be read)"),
        round - 1,
        fmt_num(stats.agreement_percentage),
        c.low,
        c.medium,
        c.high,
        format_or(schema, ROUND_N_QUALITATIVE_FORMAT)
    )
}

pub fn synthesis_prompt(
    question: &str,
    rounds: &[RoundRecord],
    n: usize,
    converged: bool,
    final_value: &FinalValue,
) -> String {
    let mut p = format!(
        "You are the facilitator for a Delphi exercise that ran {} rounds with {n} participants.\n\nQUESTION: {question}\n\nCONVERGENCE TRAJECTORY:\n",
        rounds.len()
    );
    for r in rounds {
        p.push_str(&format!("Round {}:\n", r.round));
        match &r.stats {
            Stats::Numeric(s) => p.push_str(&format!(
                "- Mean: {}, Median: {}, StdDev: {}, CV: {}\n- Range: {} — {}\n",
                fmt_num(s.mean),
                fmt_num(s.median),
                fmt_num(s.std_dev),
                fmt_num(s.cv),
                fmt_num(s.min),
                fmt_num(s.max)
            )),
            Stats::Qualitative(s) => {
                let d: Vec<String> = s
                    .distribution
                    .iter()
                    .map(|d| format!("{} {}%", d.answer, fmt_num(d.percentage)))
                    .collect();
                p.push_str(&format!(
                    "- Distribution: {}\n- Agreement: {}%\n",
                    d.join(", "),
                    fmt_num(s.agreement_percentage)
                ));
            }
        }
        let c = r.stats.confidence_counts();
        p.push_str(&format!("- Confidence: {}L / {}M / {}H\n", c.low, c.medium, c.high));
    }
    let (label, value) = match final_value {
        FinalValue::Number(v) => ("CONSENSUS VALUE", fmt_num(*v)),
        FinalValue::Answer(a) => ("MAJORITY ANSWER", a.clone()),
    };
    p.push_str(&format!(
        "\nCONVERGENCE STATUS: {}\nFINAL {label}: {value}\n\n",
        if converged { "Converged" } else { "Max rounds reached" }
    ));
    p.push_str(&format!(
        "Produce a Delphi Report:\n\n## Delphi Consensus Report\n\n### Question\n{question}\n\n\
### Final Consensus\n[The consensus value/answer with confidence interval if numeric]\n\n\
### Convergence Analysis\n[How opinions shifted across rounds. Did they converge smoothly or oscillate? Which rounds saw the biggest shifts?]\n\n\
### Confidence Trajectory\n[How participant confidence changed across rounds]\n\n\
### Outlier Analysis\n[Were there persistent outliers who never converged? What might their reasoning have been?]\n\n\
### Reliability Assessment\n[How reliable is this consensus? Consider: convergence speed, final CV/agreement, confidence levels, participant count]"
    ));
    p
}

// ---- parsing --------------------------------------------------------------------------------
//
// A reply states its answer only in these forms, read from its answer part (reasoning blocks
// set aside; a reply whose reasoning never closed states nothing), in this order:
//
// 1. A labelled line: `ESTIMATE: 40`, `**Final estimate:** 40`, `1. Your numeric estimate: 40`,
//    `ESTIMACIÓN: 40`, `ESTIMATION : 40`, `SCHÄTZUNG: 40`, an upper-case `ESTIMATE:` inside a
//    line (not `YOUR PREVIOUS ESTIMATE:`), a table row or column headed `Estimate`, or a
//    heading `## Final Estimate` over the value. The last such line decides, unless it only
//    repeats the prompt's placeholder (`[number]`): when what it says cannot be read, the
//    reply is unparsed (an earlier or vaguer statement is not tried instead).
// 2. A JSON object's field: `{"estimate": 34000000, "confidence": "high", "reasoning": "…"}`.
// 3. For a number only: a line `Estimated <what>: 40`, then a labelled `ANSWER:` line.
// 4. A sentence that states it with the value right after: `My estimate is about 40`, `The
//    answer is 4`, `I estimate ~40`, `estimate ≈ 40`; for a choice among options, also
//    `I choose Option 2`.
//
// Anything else, such as a number somewhere in prose, is not an answer: the reply is unparsed
// and the reason ([`Unparsed`]) is stored with its text.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "LOW",
            Confidence::Medium => "MEDIUM",
            Confidence::High => "HIGH",
        }
    }
}

fn re(pattern: &'static str, cell: &'static OnceLock<Regex>) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).unwrap_or_else(|_| unreachable!()))
}

/// Words that may stand before a label: `Final estimate:`, `My answer:`, `Your numeric
/// estimate:` (models echo the prompt's list), `Ma réponse :`.
const QUALIFIERS: &[&str] = &[
    "final",
    "my",
    "your",
    "our",
    "the",
    "best",
    "revised",
    "updated",
    "new",
    "overall",
    "numeric",
    "numerical",
    "point",
    "current",
    "own",
    "ma",
    "mon",
    "mi",
    "la",
    "le",
    "il",
    "mia",
    "mio",
    "minha",
    "meu",
    "meine",
    "mein",
    "die",
    "der",
    "votre",
    "su",
];

const ESTIMATE_LABELS: &[&str] = &[
    "estimate",
    "estimation",
    "estimación",
    "estimacion",
    "estimativa",
    "estimativo",
    "schätzung",
    "schaetzung",
    "stima",
];
const ANSWER_LABELS: &[&str] =
    &["answer", "réponse", "reponse", "respuesta", "resposta", "risposta", "antwort"];
const CHOICE_LABELS: &[&str] = &[
    "chosen option",
    "selected option",
    "recommended option",
    "choice",
    "recommendation",
    "elección",
    "choix",
    "wahl",
    "escolha",
    "scelta",
];
const CONFIDENCE_LABELS: &[&str] = &[
    "confidence level",
    "level of confidence",
    "confidence",
    "niveau de confiance",
    "confiance",
    "nivel de confianza",
    "confianza",
    "nível de confiança",
    "confiança",
    "livello di fiducia",
    "livello di confidenza",
    "fiducia",
    "confidenza",
    "konfidenzniveau",
    "vertrauensniveau",
    "konfidenz",
    "vertrauen",
    "sicherheit",
];
const REASONING_LABELS: &[&str] = &[
    "reasoning",
    "rationale",
    "justification",
    "raisonnement",
    "razonamiento",
    "justificación",
    "begründung",
    "raciocínio",
    "justificativa",
    "ragionamento",
    "motivazione",
];
const TYPE_LABELS: &[&str] = &["question type", "type", "tipo", "typ"];
const OPTIONS_LABELS: &[&str] =
    &["answer options", "options", "opciones", "opções", "opcoes", "opzioni", "optionen"];

const ESTIMATE_KEYS: &[&str] = &[
    "estimate",
    "final_estimate",
    "finalEstimate",
    "best_estimate",
    "bestEstimate",
    "point_estimate",
    "estimation",
    "estimación",
    "schätzung",
    "stima",
    "estimativa",
    "value",
    "answer",
];
const ANSWER_KEYS: &[&str] =
    &["answer", "final_answer", "finalAnswer", "choice", "option", "recommendation", "respuesta"];
const CONFIDENCE_KEYS: &[&str] =
    &["confidence", "confidence_level", "confidenceLevel", "confianza", "confiance"];
const REASONING_KEYS: &[&str] =
    &["reasoning", "rationale", "explanation", "justification", "razonamiento"];

/// Spaces within a line (French typography puts a no-break space before a colon).
fn is_gap(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{a0}' | '\u{202f}')
}

/// Markup around a label: spaces, quotes, emphasis.
fn is_mark(c: char) -> bool {
    is_gap(c) || "\"'`*_".contains(c)
}

fn skip(s: &str, mut i: usize, f: impl Fn(char) -> bool) -> usize {
    while let Some(c) = s[i..].chars().next().filter(|c| f(*c)) {
        i += c.len_utf8();
    }
    i
}

/// `name` at byte `i` of `s`, in any case (a space in it stands for any run of spaces): the
/// byte after it.
fn name_at(s: &str, i: usize, name: &str) -> Option<usize> {
    let mut j = i;
    for n in name.chars() {
        if n == ' ' {
            let k = skip(s, j, is_gap);
            if k == j {
                return None;
            }
            j = k;
            continue;
        }
        let c = s[j..].chars().next()?;
        if !c.to_lowercase().eq(n.to_lowercase()) {
            return None;
        }
        j += c.len_utf8();
    }
    Some(j)
}

/// List marks, quotes, headings and numbering before a label: `- `, `> `, `## `, `1. `, `2) `.
fn skip_lead(line: &str) -> usize {
    let mut i = 0;
    loop {
        let j = skip(line, i, |c| is_gap(c) || ">*_#•+|-–".contains(c));
        let d = skip(line, j, |c| c.is_ascii_digit());
        let numbered = (1..=2).contains(&(d - j))
            && line[d..].starts_with(['.', ')'])
            && line[d + 1..].chars().next().is_none_or(is_gap);
        let next = if numbered { d + 1 } else { j };
        if next == i {
            return i;
        }
        i = next;
    }
}

/// The ways one label is written: at the start of a line, in any case, after list marks,
/// markup and qualifiers (`**Final estimate:**`, `1. Your numeric estimate:`, `ESTIMACIÓN :`),
/// with a parenthesis that may give a unit (`ESTIMATE (in millions):`); in upper case inside a
/// line (`… so ESTIMATE: 40`); alone in a table cell or a heading. Matched by hand: a set of
/// case-insensitive regexes for these took a noticeable time to build on a run's first reply.
struct Family {
    names: &'static [&'static str],
    upper: Vec<String>,
}

impl Family {
    fn new(names: &'static [&'static str]) -> Family {
        Family { names, upper: names.iter().map(|n| n.to_uppercase()).collect() }
    }

    /// The label at byte `i` (after markup and qualifiers): the byte after it (and its
    /// markup and parenthesis), and the parenthesis.
    fn label_at<'a>(&self, s: &'a str, i: usize) -> Option<(usize, Option<&'a str>)> {
        let mut i = skip(s, i, is_mark);
        loop {
            if let Some(end) = self.names.iter().filter_map(|n| name_at(s, i, n)).max() {
                let end = if s[end..].starts_with('s') { end + 1 } else { end };
                if s[end..].starts_with(char::is_alphanumeric) {
                    return None; // `Estimated`, `Typed`
                }
                let mut j = skip(s, end, is_mark);
                let mut unit = None;
                if s[j..].starts_with('(') {
                    let close = s[j..].find([')', '\n']).filter(|&k| k <= 61)?;
                    if !s[j + close..].starts_with(')') {
                        return None;
                    }
                    unit = Some(&s[j + 1..j + close]);
                    j = skip(s, j + close + 1, is_mark);
                }
                return Some((j, unit));
            }
            let after = QUALIFIERS
                .iter()
                .find_map(|q| name_at(s, i, q).filter(|&e| s[e..].starts_with(is_gap)))?;
            i = skip(s, after, is_gap);
        }
    }

    /// The label at the start of `line`: the byte after its separator, and its parenthesis.
    fn at_start<'a>(&self, line: &'a str) -> Option<(usize, Option<&'a str>)> {
        let (j, unit) = self.label_at(line, skip_lead(line))?;
        let c = line[j..].chars().next().filter(|c| ":=≈~：".contains(*c))?;
        Some((j + c.len_utf8(), unit))
    }

    /// A table cell or heading holding only the label (and a colon): its parenthesis.
    fn alone<'a>(&self, cell: &'a str) -> Option<Option<&'a str>> {
        let (j, unit) = self.label_at(cell, 0)?;
        cell[j..].chars().all(|c| c == ':' || is_mark(c)).then_some(unit)
    }

    /// Upper-case labels inside a line, in order: (where the label starts, the byte after its
    /// colon).
    fn inline(&self, line: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for u in &self.upper {
            for (at, _) in line.match_indices(u.as_str()) {
                let before = line[..at].chars().next_back();
                if !before.is_none_or(|c| is_gap(c) || "([{,;.!?*_".contains(c)) {
                    continue;
                }
                let j = skip(line, at + u.len(), |c| c == '*' || c == '_');
                let j = skip(line, j, is_gap);
                if let Some(c) = line[j..].chars().next().filter(|c| matches!(c, ':' | '：')) {
                    out.push((at, j + c.len_utf8()));
                }
            }
        }
        out.sort_unstable();
        out
    }
}

struct Labels {
    estimate: Family,
    answer: Family,
    choice: Family,
    confidence: Family,
    reasoning: Family,
    kind: Family,
    options: Family,
}

impl Labels {
    fn families(&self) -> [&Family; 7] {
        [
            &self.estimate,
            &self.answer,
            &self.choice,
            &self.confidence,
            &self.reasoning,
            &self.kind,
            &self.options,
        ]
    }

    fn is_label_line(&self, line: &str) -> bool {
        self.families().iter().any(|f| f.at_start(line).is_some())
    }
}

fn labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    L.get_or_init(|| Labels {
        estimate: Family::new(ESTIMATE_LABELS),
        answer: Family::new(ANSWER_LABELS),
        choice: Family::new(CHOICE_LABELS),
        confidence: Family::new(CONFIDENCE_LABELS),
        reasoning: Family::new(REASONING_LABELS),
        kind: Family::new(TYPE_LABELS),
        options: Family::new(OPTIONS_LABELS),
    })
}

/// Where a label stands and what follows it.
#[derive(Debug, Clone)]
struct Hit {
    /// The value: the rest of the line up to another label (or the next line, when the
    /// label's line holds nothing else).
    value: String,
    /// What the label's parenthesis says (`in millions`).
    unit: Option<String>,
    /// The line of the label and the byte where its value starts.
    line: usize,
    col: usize,
    /// The value stands on a line of its own under the label (`## Estimate` then `42
    /// million`): only hedging words may stand before a number in it.
    strict: bool,
}

/// The value up to the next upper-case label on its line (`40 CONFIDENCE: HIGH`).
fn cut(value: &str) -> &str {
    let next =
        labels().families().iter().filter_map(|f| f.inline(value).first().map(|h| h.0)).min();
    &value[..next.unwrap_or(value.len())]
}

/// A value with the markup around it removed: `**40**`, `[40]`, `"Go"`.
fn clean(value: &str) -> &str {
    let t = value.trim().trim_matches(|c: char| "*_`\"'“”".contains(c) || c.is_whitespace());
    let t = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(t);
    t.trim()
}

/// The prompt's template repeated instead of filled in: `[number]`, `[LOW|MEDIUM|HIGH]`,
/// `[your answer or option number]`, `<number>`.
fn placeholder(value: &str) -> bool {
    let t = value.trim().trim_matches(|c: char| "*_`.".contains(c) || c.is_whitespace());
    if t.is_empty() || t.contains('|') {
        return true;
    }
    let inner = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .or_else(|| t.strip_prefix('<').and_then(|x| x.strip_suffix('>')));
    let Some(inner) = inner else { return false };
    let lower = inner.to_lowercase();
    !inner.chars().any(|c| c.is_ascii_digit())
        && [
            "your",
            "number",
            "answer",
            "option",
            "reasoning",
            "estimate",
            "comma-separated",
            "sentence",
            "value",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

fn table_cells(line: &str) -> Option<Vec<&str>> {
    let t = line.trim();
    let inner = t.strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    Some(inner.split('|').map(str::trim).collect())
}

fn is_separator_row(line: &str) -> bool {
    table_cells(line).is_some_and(|cells| {
        cells.iter().all(|c| {
            let c = c.trim_matches(':');
            c.len() >= 2 && c.chars().all(|x| x == '-')
        })
    })
}

/// A label in a table: a row `| Estimate | 40 |`, or a column headed `Estimate` over exactly
/// one row of values.
fn table_hit(lines: &[&str], i: usize, fam: &Family) -> Option<Hit> {
    let cells = table_cells(lines[i])?;
    let (k, unit) = cells.iter().enumerate().find_map(|(k, c)| Some((k, fam.alone(c)?)))?;
    let unit = unit.map(str::to_string);
    if lines.get(i + 1).is_some_and(|l| is_separator_row(l)) {
        let data = lines.get(i + 2).and_then(|l| table_cells(l))?;
        if lines.get(i + 3).is_some_and(|l| table_cells(l).is_some()) {
            return None; // several rows of values: no one value
        }
        let value = data.get(k)?.to_string();
        return Some(Hit { value, unit, line: i + 2, col: 0, strict: false });
    }
    let value = cells.get(k + 1)?.to_string();
    Some(Hit { value, unit, line: i, col: 0, strict: false })
}

/// Whether the words before an upper-case label make it the prompt's echo of the previous
/// round (`YOUR PREVIOUS ESTIMATE:`).
fn echoes_previous(before: &str) -> bool {
    let last = before.trim_end().rsplit(|c: char| !c.is_alphanumeric()).next().unwrap_or("");
    ["previous", "prior", "old", "initial", "last", "earlier"]
        .iter()
        .any(|w| last.eq_ignore_ascii_case(w))
}

/// A heading (`## Final Estimate`) or a line in bold (`**Estimate**`) holding only the label.
fn is_heading(line: &str, fam: &Family) -> bool {
    let t = line.trim();
    let marked = t.starts_with('#') || (t.starts_with("**") && t.ends_with("**") && t.len() > 4);
    marked && fam.alone(t.trim_start_matches('#')).is_some()
}

/// Every place the label stands in `text`, in order.
fn hits(text: &str, fam: &Family) -> Vec<Hit> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if table_cells(line).is_some() {
            out.extend(table_hit(&lines, i, fam));
            continue;
        }
        let start = fam.at_start(line);
        let from = start.map_or(0, |(end, _)| end);
        // Not `YOUR PREVIOUS ESTIMATE:` (a round-2 prompt repeated).
        let inline = fam
            .inline(&line[from..])
            .into_iter()
            .rfind(|(at, _)| !echoes_previous(&line[..from + at]))
            .map(|(_, end)| from + end);
        let heading = start.is_none() && inline.is_none() && is_heading(line, fam);
        let (col, unit) = match (inline, &start) {
            (Some(col), _) => (col, None),
            (None, Some((_, unit))) => (from, unit.map(str::to_string)),
            (None, None) if heading => (line.len(), None),
            (None, None) => continue,
        };
        let mut value = cut(&line[col..]).to_string();
        let mut strict = false;
        if clean(&value).is_empty() {
            // `ESTIMATE:` alone on its line, or a heading: the value is on the next one.
            if let Some(next) = lines[i + 1..].iter().find(|l| !l.trim().is_empty()) {
                if !labels().is_label_line(next) {
                    value = cut(next).to_string();
                    strict = true;
                }
            }
        }
        out.push(Hit { value, unit, line: i, col, strict });
    }
    out
}

/// The label's last statement that is not a placeholder: the one that decides.
fn stated(text: &str, fam: &Family) -> Option<Hit> {
    hits(text, fam).into_iter().rev().find(|h| !placeholder(&h.value))
}

/// The answer part of a reply; None when its reasoning never closed.
fn answer_part(text: &str) -> Option<String> {
    let split = reading::split_reasoning(text);
    (!split.unclosed).then(|| split.answer.into_owned())
}

fn read_hit(hit: &Hit) -> Option<numbers::Stated> {
    let lead = if hit.strict { numbers::Lead::Strict } else { numbers::Lead::Label };
    let mut s = numbers::read_stated(clean(&hit.value), lead)?;
    // `ESTIMATE (in millions): 42`.
    if let Some(f) = hit.unit.as_deref().and_then(numbers::scale_in) {
        if s.scale == 1.0 {
            s.value = numbers::scale_by(s.value, f);
            s.range = s.range.map(|(a, b)| (numbers::scale_by(a, f), numbers::scale_by(b, f)));
        }
    }
    s.value.is_finite().then_some(s)
}

fn json_number(v: &Value) -> Option<numbers::Stated> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()).map(|value| numbers::Stated {
            value,
            range: None,
            percent: false,
            scale: 1.0,
        }),
        Value::String(s) => numbers::read_stated(s, numbers::Lead::Label),
        _ => None,
    }
}

fn estimated_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(r"(?im)^(?:[\s>*_#•+\-–]|\d{1,2}[.)]\s)*[*_\s]*estimated(?:\s+[^\s:]+){1,10}?[*_\s]*:", &RE)
}

/// Sentences that state an estimate, ending right before the value.
fn stated_estimate_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(
        r"(?imx)
        \b(?:my|our)\s+(?:(?:final|best|revised|updated|overall|current|own|point|numeric)\s+)*
            (?:estimate|guess|answer|prediction|forecast)\s*(?:is\b|would\s+be\b|will\s+be\b|remains\b|stands\s+at\b|:)
        | (?:^|[.!?]\s)\s*(?:(?:so|thus|therefore|hence|overall|finally|in\s+conclusion|in\s+short|in\s+summary)\s*,?\s+)?
            (?:the\s+)?(?:(?:final|best)\s+)?(?:estimate|answer)\s+(?:is|would\s+be|will\s+be)\b
        | \bI(?:\s+would|'d|’d)?\s+estimate\s+(?:that\s+)?
            (?:(?:it|this|the\s+(?:number|total|value|figure))\s+(?:at|to\s+be|is|will\s+be|would\s+be)\s+
              |there\s+(?:are|is|will\s+be|would\s+be)\s+)?
        | \b(?:estimate|answer)\s*[≈=]",
        &RE,
    )
}

/// The last sentence stating a value: the rest of its line.
fn stated_sentence<'a>(text: &'a str, re: &Regex) -> Option<&'a str> {
    let m = re.find_iter(text).last()?;
    let rest = &text[m.end()..];
    Some(&rest[..rest.find('\n').unwrap_or(rest.len())])
}

/// Reads an estimate (see the rules above). A range (`35-45`, `35 to 45`) gives its midpoint
/// and says so; a stated most likely value within it wins.
pub fn parse_estimate(text: &str) -> Option<(f64, Option<String>)> {
    let answer = answer_part(text)?;
    let l = labels();
    let s = if let Some(h) = stated(&answer, &l.estimate) {
        read_hit(&h)
    } else if let Some(v) = reading::json_field(&answer, ESTIMATE_KEYS) {
        json_number(&v)
    } else if let Some(m) = estimated_line().find_iter(&answer).last() {
        let rest = &answer[m.end()..];
        let value = cut(&rest[..rest.find('\n').unwrap_or(rest.len())]);
        numbers::read_stated(clean(value), numbers::Lead::Label)
    } else if let Some(h) = stated(&answer, &l.answer) {
        read_hit(&h)
    } else {
        stated_sentence(&answer, stated_estimate_re())
            .and_then(|v| numbers::read_stated(v, numbers::Lead::Strict))
    }?;
    if !s.value.is_finite() {
        return None;
    }
    let note = s.range.map(|(a, b)| {
        format!(
            "range {} to {} given; the midpoint {} was used",
            fmt_num(a),
            fmt_num(b),
            fmt_num(s.value)
        )
    });
    Some((s.value, note))
}

fn level_of(word: &str) -> Option<Confidence> {
    match word {
        "high" | "élevée" | "élevé" | "elevee" | "eleve" | "haute" | "haut" | "alta" | "alto"
        | "hoch" | "elevata" | "elevato" => Some(Confidence::High),
        "medium" | "med" | "moderate" | "mid" | "moyenne" | "moyen" | "media" | "medio"
        | "média" | "médio" | "mittel" | "mittlere" | "moderata" | "moderato" => {
            Some(Confidence::Medium)
        }
        "low" | "faible" | "basse" | "bas" | "baja" | "bajo" | "baixa" | "baixo" | "niedrig"
        | "gering" | "bassa" | "basso" => Some(Confidence::Low),
        _ => None,
    }
}

/// One confidence level, named first: `HIGH`, `very high`, `Moderate`, `ÉLEVÉE`. Two levels
/// (`MEDIUM-HIGH`, `low to medium`) or a number (`80%`) name none.
fn level(value: &str) -> Option<Confidence> {
    let words: Vec<String> = value
        .split(|c: char| !c.is_alphanumeric() && c != '%' && c != '.')
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    let mut it = words.iter().skip_while(|w| {
        ["very", "quite", "fairly", "rather", "relatively", "reasonably", "très", "muy", "sehr"]
            .contains(&w.as_str())
    });
    let first = level_of(it.next()?)?;
    let mut rest =
        it.skip_while(|w| ["to", "or", "and", "à", "a", "bis", "ou", "o"].contains(&w.as_str()));
    if rest.next().is_some_and(|w| level_of(w).is_some()) {
        return None;
    }
    Some(first)
}

/// The stated confidence and whether it was stated: MEDIUM (and `false`) when the reply names
/// no one level.
pub fn parse_confidence(text: &str) -> (Confidence, bool) {
    let Some(answer) = answer_part(text) else { return (Confidence::Medium, false) };
    let value = match stated(&answer, &labels().confidence) {
        Some(h) => Some(cut(&h.value).to_string()),
        None => reading::json_field(&answer, CONFIDENCE_KEYS)
            .and_then(|v| v.as_str().map(str::to_string)),
    };
    match value.as_deref().map(clean).and_then(level) {
        Some(c) => (c, true),
        None => (Confidence::Medium, false),
    }
}

/// The reasoning after the last `REASONING:` label, up to the next labelled line (or the JSON
/// `reasoning` field); empty when there is none.
pub fn parse_reasoning(text: &str) -> String {
    let Some(answer) = answer_part(text) else { return String::new() };
    let l = labels();
    if let Some(h) = stated(&answer, &l.reasoning) {
        if h.col > 0 {
            let lines: Vec<&str> = answer.lines().collect();
            let mut out = vec![cut(&lines[h.line][h.col..]).trim()];
            for line in &lines[h.line + 1..] {
                if l.families()
                    .iter()
                    .any(|f| !std::ptr::eq(*f, &l.reasoning) && f.at_start(line).is_some())
                {
                    break;
                }
                out.push(line);
            }
            return out.join("\n").trim().trim_matches(['*', '_']).trim().to_string();
        }
        return clean(&h.value).to_string();
    }
    match reading::json_field(&answer, REASONING_KEYS) {
        Some(Value::String(s)) => s.trim().to_string(),
        _ => String::new(),
    }
}

/// Text compared with an option: lower case, markup and quotes gone, spaces collapsed.
fn norm(s: &str) -> String {
    let s: String =
        s.chars().filter(|c| !"*_`\"“”‘’".contains(*c)).collect::<String>().to_lowercase();
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.trim_end_matches(['.', '!', ',', ';', ':']).trim().to_string()
}

fn ends_word(s: &str, at: usize) -> bool {
    !s[at..].starts_with(|c: char| c.is_alphanumeric())
}

/// The longest option `s` starts with.
fn leading_option(s: &str, opts: &[String]) -> Option<usize> {
    opts.iter()
        .enumerate()
        .filter(|(_, o)| !o.is_empty() && s.starts_with(o.as_str()) && ends_word(s, o.len()))
        .max_by_key(|(_, o)| o.len())
        .map(|(i, _)| i)
}

fn option_number_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(
        r"^(?:(?:option|opción|opcion|opção|opcao|opzione|choice|number|no\.?|n°|nº)\s*)?[#(]?\s*(\d{1,2})\b",
        &RE,
    )
}

/// `or 2`, `/ Polyrepo`, `and option 3`: a second choice named right after the first.
fn alternative_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(r"^\s*\)?\s*(?:or|and|/|,|&|vs\.?|versus|-|–|to)\s*(.*)$", &RE)
}

fn negation_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(
        r"(?i)\b(?:not|no|never|neither|nor|against|except|instead|rather|without|avoid|don't|do\s+not|none|both)\b",
        &RE,
    )
}

/// Says no option: `none`, `N/A`, `unknown`, `both`, `neither`, or declines.
fn names_nothing(v: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let r = re(
        r"(?i)^(?:n/a|none|unknown|unsure|undecided|both|neither|all|no\s+answer|not\s+sure|it\s+is\s+unclear)\b",
        &RE,
    );
    r.is_match(v) || reading::declines(v)
}

/// Whether `rest` names an option other than `i` (by text or number) first.
fn names_other(rest: &str, opts: &[String], i: usize) -> bool {
    let rest = rest.trim_start_matches(|c: char| " .):-–(#".contains(c));
    if let Some(j) = leading_option(rest, opts) {
        return j != i;
    }
    option_number_re()
        .captures(rest)
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse::<usize>().ok())
        .is_some_and(|n| (1..=opts.len()).contains(&n) && n - 1 != i)
}

/// Matches a stated answer to the options: exact text; the text of one option followed by
/// more words; an option's number (`2`, `Option 2`, `#2`); the start of one option's text
/// (`Hybrid`); and, when `loose`, the one option sharing the most words with it. An answer
/// naming two options (`1 or 2`, `Monorepo or Polyrepo`, `1. Polyrepo` when option 1 is
/// Monorepo), declining, or naming none is no answer.
fn match_option(value: &str, options: &[String], loose: bool) -> Option<String> {
    if placeholder(value) {
        return None;
    }
    let v = norm(clean(value));
    if v.is_empty() || names_nothing(&v) {
        return None;
    }
    let opts: Vec<String> = options.iter().map(|o| norm(o)).collect();
    if let Some(i) = opts.iter().position(|o| *o == v) {
        return Some(options[i].clone());
    }
    if let Some(i) = leading_option(&v, &opts) {
        let rest = &v[opts[i].len()..];
        if let Some(alt) = alternative_re().captures(rest).and_then(|c| c.get(1)) {
            if names_other(alt.as_str(), &opts, i) {
                return None;
            }
        }
        return Some(options[i].clone());
    }
    if let Some(c) = option_number_re().captures(&v) {
        let n: usize = c.get(1).and_then(|m| m.as_str().parse().ok()).unwrap_or(0);
        if (1..=opts.len()).contains(&n) {
            let rest = &v[c.get(0).map_or(0, |m| m.end())..];
            if let Some(alt) = alternative_re().captures(rest).and_then(|c| c.get(1)) {
                if names_other(alt.as_str(), &opts, n - 1)
                    || alt.as_str().starts_with(|c: char| c.is_ascii_digit())
                {
                    return None;
                }
            }
            if names_other(rest, &opts, n - 1) {
                return None;
            }
            return Some(options[n - 1].clone());
        }
    }
    let starts: Vec<usize> = (0..opts.len())
        .filter(|&i| {
            v.chars().count() >= 3 && opts[i].starts_with(&v) && ends_word(&opts[i], v.len())
        })
        .collect();
    if let [i] = starts[..] {
        return Some(options[i].clone());
    }
    if !loose || negation_re().is_match(&v) {
        return None;
    }
    const STOP: [&str; 12] = [
        "the", "and", "for", "with", "approach", "option", "answer", "use", "using", "that",
        "this", "are",
    ];
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() > 2 && !STOP.contains(w))
            .map(str::to_string)
            .collect()
    };
    let said = words(&v);
    let mut scored: Vec<(usize, usize)> = opts
        .iter()
        .enumerate()
        .map(|(i, o)| (words(o).iter().filter(|w| said.contains(w)).count(), i))
        .collect();
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    match scored[..] {
        [(best, i), (second, _), ..] if best > 0 && best > second => Some(options[i].clone()),
        [(best, i)] if best > 0 => Some(options[i].clone()),
        _ => None,
    }
}

/// Sentences that state a choice, ending right before it.
fn stated_choice_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(
        r"(?imx)
        (?:^|[.!?]\s)\s*(?:(?:so|thus|therefore|hence|overall|finally|in\s+conclusion|in\s+short|in\s+summary)\s*,?\s+)?
            (?:the|my)\s+(?:(?:final|best)\s+)?(?:answer|choice|recommendation)\s+(?:is|would\s+be|will\s+be)\b\s*:?
        | \bI(?:\s+would|\s+will|'d|’d|'ll|’ll)?\s+(?:choose|pick|select|recommend|go\s+with|vote\s+for|opt\s+for)\b\s*:?",
        &RE,
    )
}

/// An answer without options: what the `ANSWER:` line says, unless it declines or is empty.
fn free_answer(value: &str) -> Option<String> {
    if placeholder(value) {
        return None;
    }
    let v = clean(value).trim_end_matches('.').trim();
    if v.is_empty() || names_nothing(v) {
        return None;
    }
    Some(v.chars().take(120).collect())
}

/// Reads a qualitative answer (see the rules above) and matches it to the options. Without
/// options, a labelled answer (or JSON field) is the answer as written.
pub fn parse_answer(text: &str, options: &[String]) -> Option<String> {
    let answer = answer_part(text)?;
    let l = labels();
    let json = || -> Option<String> {
        match reading::json_field(&answer, ANSWER_KEYS)? {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let (value, loose) = if let Some(h) = stated(&answer, &l.answer) {
        (h.value, true)
    } else if let Some(v) = json() {
        (v, true)
    } else if let Some(h) = stated(&answer, &l.choice) {
        (h.value, true)
    } else if options.is_empty() {
        return None;
    } else {
        (stated_sentence(&answer, stated_choice_re())?.to_string(), false)
    };
    if options.is_empty() {
        free_answer(&value)
    } else {
        match_option(&value, options, loose)
    }
}

fn kind_of(value: &str) -> Option<QuestionType> {
    if value.contains('|') {
        return None;
    }
    let first =
        clean(value).split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty())?.to_lowercase();
    match first.as_str() {
        "numeric" | "numerical" | "quantitative" | "number" | "numérique" | "numerique"
        | "numérico" | "numerico" | "numérica" | "numerica" | "numerisch" => {
            Some(QuestionType::Numeric)
        }
        "qualitative" | "qualitatif" | "cualitativo" | "cualitativa" | "qualitativ"
        | "qualitativo" | "qualitativa" => Some(QuestionType::Qualitative),
        _ => None,
    }
}

fn stated_kind_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(
        r"(?i)\bthis\s+(?:question\s+)?is\s+(?:a|an)\s+(numeric|numerical|quantitative|qualitative)\s+question\b",
        &RE,
    )
}

/// Splits `Go, Rust, "Hybrid (core, services)"` at commas and semicolons outside brackets.
fn split_options(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in value.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if (c == ',' || c == ';') && depth <= 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

fn list_item_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+(.+)$", &RE)
}

/// The options under `OPTIONS:`: on its line, comma-separated, or as a list below it.
fn parse_options(answer: &str) -> Option<Vec<String>> {
    let fam = &labels().options;
    let lines: Vec<&str> = answer.lines().collect();
    let mut raw: Vec<String> = Vec::new();
    if let Some(h) = stated(answer, fam) {
        let on_line = if h.col > 0 { cut(&lines[h.line][h.col..]) } else { h.value.as_str() };
        if clean(on_line).is_empty() && h.col > 0 {
            for line in lines[h.line + 1..].iter().skip_while(|l| l.trim().is_empty()) {
                match list_item_re().captures(line).and_then(|c| c.get(1)) {
                    Some(item) => raw.push(item.as_str().to_string()),
                    None => break,
                }
            }
        } else {
            let v = clean(on_line);
            raw = split_options(v);
        }
    } else if let Some(Value::Array(items)) = reading::json_field(answer, &["options"]) {
        raw = items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect();
    }
    tidy_options(raw)
}

/// Options as stated, tidied: markup and list marks gone, empty and `N/A` ones and repeats
/// (ignoring case) left out, at most 10; None when fewer than two are left (answers are then
/// free-form).
fn tidy_options(raw: Vec<String>) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for o in raw {
        let o = clean(&o);
        let o = list_item_re().captures(o).and_then(|c| c.get(1)).map_or(o, |m| m.as_str());
        let o = clean(o).trim_end_matches('.').trim();
        if o.is_empty()
            || placeholder(o)
            || o.eq_ignore_ascii_case("n/a")
            || o.eq_ignore_ascii_case("none")
        {
            continue;
        }
        if !out.iter().any(|x| x.eq_ignore_ascii_case(o)) {
            out.push(o.to_string());
        }
    }
    out.truncate(10);
    (out.len() >= 2).then_some(out)
}

/// The facilitator's classification; None when it cannot be read. Qualitative options come
/// from `OPTIONS:` (fewer than two: free-form answers).
pub fn parse_classification(text: &str) -> Option<Classification> {
    let answer = answer_part(text)?;
    let l = labels();
    let kind = if let Some(h) = stated(&answer, &l.kind) {
        kind_of(&h.value)?
    } else if let Some(v) = reading::json_field(&answer, &["type", "question_type", "questionType"])
    {
        kind_of(v.as_str()?)?
    } else {
        // `This question is a NUMERIC question`, said the same way every time.
        let mut kinds = stated_kind_re()
            .captures_iter(&answer)
            .filter_map(|c| c.get(1).and_then(|m| kind_of(m.as_str())));
        let first = kinds.next()?;
        if kinds.any(|k| k != first) {
            return None;
        }
        first
    };
    let options = match kind {
        QuestionType::Numeric => None,
        QuestionType::Qualitative => parse_options(&answer),
    };
    Some(Classification {
        kind,
        options,
        reasoning: parse_reasoning(&answer).lines().next().unwrap_or("").trim().to_string(),
        fallback_from: None,
        unparsed: None,
        read_from: None,
    })
}

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
    v["properties"][schema::REASONING]["description"] = json!(why);
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
    let from_json = schema.read(text).and_then(|v| {
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
        let reasoning = json_reasoning(&v).lines().next().unwrap_or("").trim().to_string();
        Some(Classification {
            kind,
            options,
            reasoning,
            fallback_from: None,
            unparsed: None,
            read_from: None,
        })
    });
    let (mut c, from) = match from_json {
        Some(c) => (c, ReadFrom::Json),
        None => (parse_classification(text)?, ReadFrom::Text),
    };
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

/// A panelist's reply read from its JSON when that fits `schema` and states an answer, else
/// from its text: an estimate for a numeric question, an answer among `options` (or a
/// free-form one when there are none) for a qualitative one.
pub fn read_panelist(
    text: &str,
    kind: QuestionType,
    options: &[String],
    schema: &ReplySchema,
) -> Reading {
    if let Some(r) = panelist_json(text, kind, options, schema) {
        return r;
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

fn panelist_json(
    text: &str,
    kind: QuestionType,
    options: &[String],
    schema: &ReplySchema,
) -> Option<Reading> {
    let v = schema.read(text)?;
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
    let confidence = match v.get("confidence")?.as_str()? {
        "LOW" => Confidence::Low,
        "MEDIUM" => Confidence::Medium,
        "HIGH" => Confidence::High,
        _ => return None,
    };
    Some(Reading {
        value,
        confidence,
        confidence_stated: true,
        reasoning: json_reasoning(&v),
        read_from: Some(ReadFrom::Json),
    })
}

// ---- statistics -----------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfidenceCounts {
    pub low: usize,
    pub medium: usize,
    pub high: usize,
}

fn count_confidence(estimates: &[&Estimate]) -> ConfidenceCounts {
    let n = |c: Confidence| estimates.iter().filter(|e| e.confidence == c).count();
    ConfidenceCounts {
        low: n(Confidence::Low),
        medium: n(Confidence::Medium),
        high: n(Confidence::High),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumericStats {
    pub mean: f64,
    pub median: f64,
    pub std_dev: f64,
    pub min: f64,
    pub max: f64,
    /// stdDev / |mean|; infinite when the mean is 0 (JSON: null, with `highVariance`).
    #[serde(serialize_with = "finite_or_null", deserialize_with = "null_is_infinite")]
    pub cv: f64,
    pub high_variance: bool,
    pub confidence_counts: ConfidenceCounts,
}

fn finite_or_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

fn null_is_infinite<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// The seed's numeric statistics: population standard deviation, CV = stdDev/|mean|.
pub fn numeric_stats(values: &[f64], confidence: ConfidenceCounts) -> NumericStats {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = match sorted.len() {
        0 => 0.0,
        l if l % 2 == 0 => (sorted[l / 2 - 1] + sorted[l / 2]) / 2.0,
        l => sorted[l / 2],
    };
    let std_dev = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let cv = if mean != 0.0 { std_dev / mean.abs() } else { f64::INFINITY };
    NumericStats {
        mean,
        median,
        std_dev,
        min: sorted.first().copied().unwrap_or(0.0),
        max: sorted.last().copied().unwrap_or(0.0),
        cv,
        high_variance: cv > 2.0,
        confidence_counts: confidence,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub answer: String,
    pub count: usize,
    pub percentage: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QualitativeStats {
    /// Most common first (ties by answer).
    pub distribution: Vec<Share>,
    pub agreement_percentage: f64,
    pub mode: String,
    pub confidence_counts: ConfidenceCounts,
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The seed's qualitative statistics; answers are grouped case-insensitively.
pub fn qualitative_stats(answers: &[String], confidence: ConfidenceCounts) -> QualitativeStats {
    let mut groups: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for a in answers {
        groups.entry(a.to_lowercase()).or_insert_with(|| (a.clone(), 0)).1 += 1;
    }
    let total = answers.len().max(1) as f64;
    let mut distribution: Vec<Share> = groups
        .into_values()
        .map(|(answer, count)| Share {
            answer,
            count,
            percentage: round1(count as f64 * 100.0 / total),
        })
        .collect();
    distribution.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.answer.cmp(&b.answer)));
    QualitativeStats {
        agreement_percentage: distribution.first().map_or(0.0, |d| d.percentage),
        mode: distribution.first().map(|d| d.answer.clone()).unwrap_or_default(),
        distribution,
        confidence_counts: confidence,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stats {
    Numeric(NumericStats),
    Qualitative(QualitativeStats),
}

impl Stats {
    fn confidence_counts(&self) -> ConfidenceCounts {
        match self {
            Stats::Numeric(s) => s.confidence_counts,
            Stats::Qualitative(s) => s.confidence_counts,
        }
    }

    /// The convergence rule with the run's thresholds.
    pub fn converged(&self, cfg: &DelphiConfig) -> bool {
        match self {
            Stats::Numeric(s) => s.cv < cfg.numeric_convergence_threshold,
            Stats::Qualitative(s) => {
                s.agreement_percentage >= cfg.qualitative_convergence_threshold
            }
        }
    }

    fn summary(&self, round: u32) -> String {
        match self {
            Stats::Numeric(s) => format!(
                "Round {round} Statistics: Mean={} Median={} StdDev={} CV={} Range={}-{}",
                fmt_num(s.mean),
                fmt_num(s.median),
                fmt_num(s.std_dev),
                fmt_num(s.cv),
                fmt_num(s.min),
                fmt_num(s.max)
            ),
            Stats::Qualitative(s) => {
                let d: Vec<String> = s
                    .distribution
                    .iter()
                    .map(|d| format!("{} {}%", d.answer, fmt_num(d.percentage)))
                    .collect();
                format!(
                    "Round {round} Statistics: {}. Agreement: {}%.",
                    d.join(", "),
                    fmt_num(s.agreement_percentage)
                )
            }
        }
    }
}

// ---- estimates and rounds -------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EstimateValue {
    Number(f64),
    Answer(String),
    /// The answer could not be read.
    Unreadable,
}

impl EstimateValue {
    fn as_number(&self) -> Option<f64> {
        if let EstimateValue::Number(v) = self {
            Some(*v)
        } else {
            None
        }
    }
    fn as_answer(&self) -> Option<&str> {
        if let EstimateValue::Answer(a) = self {
            Some(a)
        } else {
            None
        }
    }
}

/// One panelist's answer in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// 1-based position in the configured panel: stable across rounds.
    pub participant: usize,
    pub model: String,
    pub value: EstimateValue,
    pub confidence: Confidence,
    pub reasoning: String,
    pub previous: Option<EstimateValue>,
    pub changed: bool,
    /// Carried forward from the previous round (the call failed or was unreadable).
    pub carried: bool,
    /// Why this round's reply gave no answer, when it came but could not be read (its value
    /// is then unreadable, or carried forward from the previous round).
    pub unparsed: Option<Unparsed>,
    /// The reply named its confidence; when it did not, `confidence` is the default MEDIUM.
    pub confidence_stated: bool,
    pub response_time_ms: i64,
    pub text: String,
}

impl Estimate {
    fn valid(&self) -> bool {
        !matches!(self.value, EstimateValue::Unreadable)
    }

    /// The seed's `DelphiEstimate` (with model name: for the stored result); `read_from` is
    /// where this round's reply was read from, when it was.
    fn full(&self, kind: QuestionType, read_from: Option<ReadFrom>) -> Value {
        let mut v = json!({
            "participantIndex": self.participant, "model": self.model,
            "confidence": self.confidence, "reasoning": self.reasoning,
            "changed": self.changed, "carriedForward": self.carried,
            "responseTimeMs": self.response_time_ms,
        });
        self.mark(&mut v, read_from);
        let prev = self.previous.as_ref().filter(|p| !matches!(p, EstimateValue::Unreadable));
        match kind {
            QuestionType::Numeric => {
                v["estimate"] = json!(self.value.as_number());
                v["previousEstimate"] = json!(prev.and_then(EstimateValue::as_number));
            }
            QuestionType::Qualitative => {
                v["answer"] = json!(self.value.as_answer());
                v["previousAnswer"] = json!(prev.and_then(|p| p.as_answer()));
            }
        }
        v
    }

    /// The seed's anonymous `DelphiEstimateSummary` for live events.
    fn summary(&self, kind: QuestionType, read_from: Option<ReadFrom>) -> Value {
        let mut v = json!({ "participantIndex": self.participant, "confidence": self.confidence, "changed": self.changed });
        match kind {
            QuestionType::Numeric => v["estimate"] = json!(self.value.as_number()),
            QuestionType::Qualitative => v["answer"] = json!(self.value.as_answer()),
        }
        self.mark(&mut v, read_from);
        v
    }

    /// `unparsed` (why the reply gave no answer), `confidenceDefaulted` and `readFrom`, when
    /// they apply.
    fn mark(&self, v: &mut Value, read_from: Option<ReadFrom>) {
        if let Some(why) = self.unparsed {
            v["unparsed"] = json!(why);
        }
        if !self.confidence_stated {
            v["confidenceDefaulted"] = json!(true);
        }
        if let Some(from) = read_from {
            v["readFrom"] = json!(from);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Classification {
    #[serde(rename = "type")]
    pub kind: QuestionType,
    pub options: Option<Vec<String>>,
    pub reasoning: String,
    /// The facilitator the backup stood in for, when the backup classified the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
    /// Why the facilitator's reply could not be read, when the fallback type was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the facilitator's classification was read from (its JSON or its text), when it
    /// was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub round: u32,
    pub estimates: Vec<Estimate>,
    pub stats: Stats,
    pub converged: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FinalValue {
    Number(f64),
    Answer(String),
}

fn stats_of(kind: QuestionType, estimates: &[Estimate]) -> Stats {
    let valid: Vec<&Estimate> = estimates.iter().filter(|e| e.valid()).collect();
    let conf = count_confidence(&valid);
    match kind {
        QuestionType::Numeric => Stats::Numeric(numeric_stats(
            &valid.iter().filter_map(|e| e.value.as_number()).collect::<Vec<_>>(),
            conf,
        )),
        QuestionType::Qualitative => Stats::Qualitative(qualitative_stats(
            &valid
                .iter()
                .filter_map(|e| e.value.as_answer().map(str::to_string))
                .collect::<Vec<_>>(),
            conf,
        )),
    }
}

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Classifying,
    Round(u32),
    Synthesising,
    Done,
}

pub struct Delphi {
    config: DelphiConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    classification: Option<Classification>,
    /// Panelists still on the panel: (1-based participant index, model).
    panel: Vec<(usize, String)>,
    rounds: Vec<RoundRecord>,
    /// The classification's and the current round's reply schemas, built when their calls
    /// are made.
    classify_schema: Option<Arc<ReplySchema>>,
    round_schema: Option<Arc<ReplySchema>>,
    deadline_passed: bool,
    title: TitleTracker,
    calls: Calls,
}

impl Delphi {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: DelphiConfig = stored_config("delphi", config)?;
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let panel =
            config.panelist_models.iter().enumerate().map(|(i, m)| (i + 1, m.clone())).collect();
        Ok(Delphi {
            config,
            ctx,
            phase: Phase::Classifying,
            batch: Batch::new("classify", 1),
            classification: None,
            panel,
            rounds: Vec::new(),
            classify_schema: None,
            round_schema: None,
            deadline_passed: false,
            title,
            calls: Calls::default(),
        })
    }

    /// The schema `model` is asked for: `schema` when its route takes structured output.
    fn asked<'a>(&self, model: &str, schema: &'a ReplySchema) -> Option<&'a ReplySchema> {
        self.ctx.structured.json(model).then_some(schema)
    }

    /// The schema of a round of this question.
    fn schema_of_round(&self, round: u32) -> Arc<ReplySchema> {
        match self.kind() {
            QuestionType::Numeric => estimate_schema(round),
            QuestionType::Qualitative => answer_schema(&self.options(), round),
        }
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message)
    }

    fn kind(&self) -> QuestionType {
        self.classification.as_ref().map_or(QuestionType::Qualitative, |c| c.kind)
    }

    fn options(&self) -> Vec<String> {
        self.classification.as_ref().and_then(|c| c.options.clone()).unwrap_or_default()
    }

    fn classified(&mut self, c: Classification, row: StageRow) -> Vec<Effect> {
        let mut out =
            vec![Effect::Store(row), Effect::emit("classify_complete", json!({ "data": c }))];
        self.classification = Some(c);
        out.extend(self.start_round(1));
        out
    }

    fn start_round(&mut self, round: u32) -> Vec<Effect> {
        self.phase = Phase::Round(round);
        self.batch = Batch::new(&format!("round{round}"), self.panel.len());
        let mut out = vec![Effect::emit("round_start", json!({ "round": round }))];
        let kind = self.kind();
        let options = self.options();
        let previous = self.rounds.last().cloned();
        let schema = self.schema_of_round(round);
        for (i, (participant, model)) in self.panel.clone().into_iter().enumerate() {
            let json = self.asked(&model, &schema);
            // Round 2+: only the aggregates and this panelist's own previous answer.
            let prompt = match (&previous, kind) {
                (None, QuestionType::Numeric) => round1_numeric_prompt_as(&self.ctx.question, json),
                (None, QuestionType::Qualitative) => {
                    round1_qualitative_prompt_as(&self.ctx.question, &options, json)
                }
                (Some(prev), _) => {
                    let Some(own) = prev.estimates.iter().find(|e| e.participant == participant)
                    else {
                        continue;
                    };
                    let n = prev.estimates.iter().filter(|e| e.valid()).count();
                    match &prev.stats {
                        Stats::Numeric(s) => round_n_numeric_prompt_as(
                            &self.ctx.question,
                            round,
                            self.config.max_rounds,
                            own,
                            s,
                            n,
                            json,
                        ),
                        Stats::Qualitative(s) => round_n_qualitative_prompt_as(
                            &self.ctx.question,
                            round,
                            self.config.max_rounds,
                            own,
                            s,
                            n,
                            json,
                        ),
                    }
                }
            };
            let call = CallSpec::new(
                self.batch.key(i),
                &model,
                vec![ChatMessage::user(prompt)],
                &format!("round_{round}"),
                "panelist",
                self.config.timeout_ms,
            );
            out.push(Effect::Call(call.with_schema(&schema)));
        }
        self.round_schema = Some(schema);
        out
    }

    /// A panelist's reply as this round's estimate, and where it was read from (None when it
    /// states no answer); None when the call failed.
    fn read(
        &self,
        reply: &CallReply,
        participant: usize,
        round: u32,
        schema: &ReplySchema,
    ) -> Option<(Estimate, Option<ReadFrom>)> {
        let text = reply.result.as_ref().ok()?;
        let Reading { value, confidence, confidence_stated, reasoning, read_from } =
            read_panelist(text, self.kind(), &self.options(), schema);
        let previous = self
            .rounds
            .last()
            .and_then(|r| r.estimates.iter().find(|e| e.participant == participant))
            .map(|e| e.value.clone());
        let changed = round > 1 && previous.as_ref().is_some_and(|p| p != &value);
        let unparsed = matches!(value, EstimateValue::Unreadable).then(|| Unparsed::of(text));
        // Members of one model are told apart (`local/smollm2 #2`) once the panel is revealed.
        let model = super::common::member_names(&self.config.panelist_models)
            .get(participant.wrapping_sub(1))
            .cloned()
            .unwrap_or_else(|| reply.model.clone());
        let estimate = Estimate {
            unparsed,
            confidence_stated,
            participant,
            model,
            value,
            confidence,
            reasoning,
            previous,
            changed,
            carried: false,
            response_time_ms: reply.response_time_ms as i64,
            text: text.clone(),
        };
        Some((estimate, read_from))
    }

    fn end_round(&mut self, round: u32) -> Vec<Effect> {
        let replies = self.batch.take();
        let prev = self.rounds.last().cloned();
        let schema = self.round_schema.clone().unwrap_or_else(|| self.schema_of_round(round));
        let mut estimates = Vec::new();
        // Where each estimate's reply was read from (None: carried forward, or not read).
        let mut read_from = Vec::new();
        let mut out = Vec::new();
        let mut still_on_panel = Vec::new();
        for (i, (participant, model)) in self.panel.iter().enumerate() {
            let reply = replies.iter().find(|r| r.key == self.batch.key(i));
            let read = reply.and_then(|r| self.read(r, *participant, round, &schema));
            let unparsed = read.as_ref().and_then(|(e, _)| e.unparsed);
            let (e, from) = match (read, &prev) {
                // Round 1: a failed call leaves the panel for good.
                (None, None) => continue,
                (Some(read), None) => read,
                (Some((e, from)), Some(_)) if e.valid() => (e, from),
                // Round 2+: failed or unreadable carries the previous answer forward.
                (_, Some(p)) => match p.estimates.iter().find(|e| e.participant == *participant) {
                    Some(last) => (
                        Estimate {
                            previous: Some(last.value.clone()),
                            changed: false,
                            carried: true,
                            unparsed,
                            response_time_ms: reply.map_or(0, |r| r.response_time_ms as i64),
                            text: reply
                                .and_then(|r| r.result.as_ref().ok().cloned())
                                .unwrap_or_default(),
                            ..last.clone()
                        },
                        None,
                    ),
                    None => continue,
                },
            };
            still_on_panel.push((*participant, model.clone()));
            estimates.push(e);
            read_from.push(from);
        }
        self.panel = still_on_panel;
        let valid = estimates.iter().filter(|e| e.valid()).count();
        let kind = self.kind();
        for (e, from) in estimates.iter().zip(&read_from) {
            let mut pd = e.full(kind, *from);
            pd["round"] = json!(round);
            pd["type"] = json!(kind);
            out.push(Effect::Store(StageRow {
                stage_type: format!("round_{round}"),
                stage_order: (2 * round - 1) as i32,
                model: Some(e.model.clone()),
                role: Some("panelist".into()),
                content: e.text.clone(),
                parsed_data: Some(pd),
                response_time_ms: Some(e.response_time_ms),
            }));
        }
        if valid < MIN_ESTIMATES {
            let message = if round == 1 && estimates.is_empty() {
                "All panelists failed in round 1.".to_string()
            } else {
                format!("Only {valid} valid estimate(s) in round {round}; at least {MIN_ESTIMATES} are required.")
            };
            out.extend(self.fail(message));
            return out;
        }
        let stats = stats_of(kind, &estimates);
        let converged = stats.converged(&self.config);
        let mut pd = json!(stats);
        pd["round"] = json!(round);
        pd["type"] = json!("stats");
        pd["converged"] = json!(converged);
        out.push(Effect::Store(StageRow {
            stage_type: format!("round_{round}_stats"),
            stage_order: (2 * round) as i32,
            model: None,
            role: Some("stats".into()),
            content: stats.summary(round),
            parsed_data: Some(pd),
            response_time_ms: None,
        }));
        let summaries: Vec<Value> =
            estimates.iter().zip(&read_from).map(|(e, from)| e.summary(kind, *from)).collect();
        out.push(Effect::emit(
            "round_complete",
            json!({ "round": round, "data": { "estimates": summaries, "stats": stats, "converged": converged } }),
        ));
        self.rounds.push(RoundRecord { round, estimates, stats: stats.clone(), converged });
        if converged {
            out.push(Effect::emit(
                "convergence_reached",
                json!({ "round": round, "stats": stats }),
            ));
        } else if round >= self.config.max_rounds || self.deadline_passed {
            let reason = if self.deadline_passed { "time limit" } else { "max rounds" };
            out.push(Effect::emit(
                "max_rounds_reached",
                json!({ "round": round, "stats": stats, "reason": reason }),
            ));
        } else {
            out.extend(self.start_round(round + 1));
            return out;
        }
        out.extend(self.synthesise());
        out
    }

    fn final_value(&self) -> FinalValue {
        match self.rounds.last().map(|r| &r.stats) {
            Some(Stats::Numeric(s)) => FinalValue::Number(s.mean),
            Some(Stats::Qualitative(s)) => FinalValue::Answer(s.mode.clone()),
            None => FinalValue::Answer(String::new()),
        }
    }

    fn synthesise(&mut self) -> Vec<Effect> {
        self.phase = Phase::Synthesising;
        let converged = self.rounds.last().is_some_and(|r| r.converged);
        let n = self.rounds.last().map_or(0, |r| r.estimates.iter().filter(|e| e.valid()).count());
        let prompt =
            synthesis_prompt(&self.ctx.question, &self.rounds, n, converged, &self.final_value());
        let facilitator = self.config.facilitator_model.clone();
        let spec = CallSpec::new(
            "synthesis",
            &facilitator,
            vec![ChatMessage::user(prompt)],
            "synthesis",
            "facilitator",
            self.config.timeout_ms,
        );
        let backup = self.config.facilitator_fallback_model.clone();
        let mut out = vec![
            Effect::emit("synthesis_start", json!({})),
            self.calls.solo(spec, 99, backup.as_deref()),
        ];
        out.extend(self.title.call(
            &facilitator,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        out
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        let text = match reply.result {
            Ok(t) => t,
            Err(e) => {
                let who = match &fallback_from {
                    Some(primary) => format!("{primary}, then its backup {}", reply.model),
                    None => reply.model.clone(),
                };
                return self.fail(format!(
                    "The facilitator ({who}) failed to write the report: {}",
                    e.message
                ));
            }
        };
        let converged = self.rounds.last().is_some_and(|r| r.converged);
        let convergence_round = self.rounds.iter().find(|r| r.converged).map(|r| r.round);
        let mut report = json!({
            "facilitatorModel": reply.model, "report": text, "totalRounds": self.rounds.len(),
            "converged": converged, "convergenceRound": convergence_round,
            "immediateConsensus": convergence_round == Some(1),
            "finalValue": self.final_value(), "responseTimeMs": reply.response_time_ms,
        });
        let mut parsed = json!({
            "totalRounds": self.rounds.len(), "converged": converged,
            "convergenceRound": convergence_round, "finalValue": self.final_value(),
        });
        if let Some(from) = &fallback_from {
            report["fallbackFrom"] = json!(from);
            parsed["fallbackFrom"] = json!(from);
        }
        let mut done = json!({ "data": report });
        self.calls.mark(&mut done);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "synthesis".into(),
                stage_order: 99,
                model: Some(reply.model.clone()),
                role: Some("facilitator".into()),
                content: text.clone(),
                parsed_data: Some(parsed),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("synthesis_complete", done),
        ];
        self.phase = Phase::Done;
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: text });
        out
    }

    fn on_classify(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        let schema = self.classify_schema.clone().unwrap_or_else(classify_schema);
        let parsed =
            reply.result.as_deref().ok().and_then(|text| read_classification(text, &schema));
        let mut c = match parsed {
            Some((c, _)) => c,
            // The seed: fall back to QUALITATIVE when classification fails.
            None => Classification {
                kind: QuestionType::Qualitative,
                options: None,
                reasoning: "Classification failed; falling back to a qualitative question.".into(),
                fallback_from: None,
                // A reply that came but could not be read says why; a failed call is stored
                // as a failure already.
                unparsed: reply.result.as_deref().ok().map(Unparsed::of),
                read_from: None,
            },
        };
        // Only a backup that answered stands in for the facilitator.
        c.fallback_from = fallback_from.filter(|_| reply.result.is_ok());
        // A qualitative override keeps its type even if the facilitator says otherwise; it only
        // asked for options.
        if self.config.question_type == Some(QuestionType::Qualitative) {
            c.kind = QuestionType::Qualitative;
        }
        if c.kind == QuestionType::Numeric {
            c.options = None;
        }
        let row = StageRow {
            stage_type: "classify".into(),
            stage_order: 0,
            model: Some(reply.model.clone()),
            role: Some("facilitator".into()),
            content: reply.result.clone().unwrap_or_default(),
            parsed_data: Some(json!(c)),
            response_time_ms: Some(reply.response_time_ms as i64),
        };
        self.classified(c, row)
    }
}

impl Mode for Delphi {
    fn start(&mut self) -> Vec<Effect> {
        let cfg = self.config.clone();
        // Options alone imply a qualitative question.
        let known = match (cfg.question_type, &cfg.options) {
            (Some(QuestionType::Numeric), _) => Some(QuestionType::Numeric),
            (_, Some(_)) => Some(QuestionType::Qualitative),
            _ => None,
        };
        let mut out = vec![
            Effect::emit(
                "delphi_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id, "questionType": known }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: cfg.global_timeout_ms },
        ];
        if let Some(kind) = known {
            let c = Classification {
                kind,
                options: cfg.options.clone(),
                reasoning: "Set by the request.".into(),
                fallback_from: None,
                unparsed: None,
                read_from: None,
            };
            let row = StageRow {
                stage_type: "classify".into(),
                stage_order: 0,
                model: None,
                role: Some("facilitator".into()),
                content: "Set by the request.".into(),
                parsed_data: Some(json!(c)),
                response_time_ms: None,
            };
            out.extend(self.classified(c, row));
            self.calls.track(&out, stage_order);
            return out;
        }
        // The backup takes the same prompt: it is asked as the facilitator is.
        let schema = classify_schema();
        let prompt =
            classify_prompt_as(&self.ctx.question, self.asked(&cfg.facilitator_model, &schema));
        let spec = CallSpec::new(
            self.batch.key(0),
            &cfg.facilitator_model,
            vec![ChatMessage::user(prompt)],
            "classify",
            "facilitator",
            cfg.timeout_ms,
        )
        .with_schema(&schema);
        self.classify_schema = Some(schema);
        out.push(self.calls.solo(spec, 0, cfg.facilitator_fallback_model.as_deref()));
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        let (mut out, routed) = self.calls.route(reply);
        let Some(routed) = routed else { return out };
        out.extend(match self.phase {
            Phase::Classifying => {
                if self.batch.accept(routed.reply.clone()) {
                    self.batch.take();
                    self.on_classify(routed)
                } else {
                    Vec::new()
                }
            }
            Phase::Round(n) => {
                if self.batch.accept(routed.reply) && self.batch.complete() {
                    self.end_round(n)
                } else {
                    Vec::new()
                }
            }
            Phase::Synthesising if routed.reply.key == "synthesis" => self.on_synthesis(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }

    /// The global cap: the current round finishes, then the synthesis.
    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.deadline_passed = true;
        }
        Vec::new()
    }
}

/// `DelphiResult` from stored rows; estimates carry model names (the run is over).
pub fn load_result(rows: &[StageRow]) -> Value {
    let classification: Option<Classification> = rows
        .iter()
        .find(|r| r.stage_type == "classify")
        .and_then(|r| r.parsed_data.clone())
        .and_then(|v| serde_json::from_value(v).ok());
    let mut rounds = Vec::new();
    for n in 1..=5u32 {
        let stats = rows.iter().find(|r| r.stage_type == format!("round_{n}_stats"));
        // A round that failed (too few valid estimates) has no statistics, but what its
        // panelists wrote is stored and shown.
        if stats.is_none() && !rows.iter().any(|r| r.stage_type == format!("round_{n}")) {
            break;
        }
        let pd = stats.and_then(|s| s.parsed_data.clone()).unwrap_or(Value::Null);
        let converged = pd["converged"].as_bool().unwrap_or(false);
        let mut st = pd.clone();
        if let Some(o) = st.as_object_mut() {
            for k in ["round", "type", "converged"] {
                o.remove(k);
            }
        }
        let estimates: Vec<Value> = rows
            .iter()
            .filter(|r| r.stage_type == format!("round_{n}"))
            .filter_map(|r| {
                let mut e = r.parsed_data.clone()?;
                if let Some(o) = e.as_object_mut() {
                    o.remove("round");
                    o.remove("type");
                    // What the panelist wrote, kept whole beside what was read from it.
                    o.insert("text".into(), json!(r.content));
                }
                Some(e)
            })
            .collect();
        rounds.push(json!({ "roundNumber": n, "estimates": estimates, "stats": st, "converged": converged }));
    }
    let synthesis = rows.iter().find(|r| r.stage_type == "synthesis");
    let report = synthesis.map(|r| {
        let pd = r.parsed_data.clone().unwrap_or(Value::Null);
        let mut report = json!({
            "facilitatorModel": r.model, "report": r.content, "totalRounds": pd["totalRounds"],
            "converged": pd["converged"], "convergenceRound": pd["convergenceRound"],
            "immediateConsensus": pd["convergenceRound"] == json!(1),
            "finalValue": pd["finalValue"], "responseTimeMs": r.response_time_ms,
        });
        if let Some(from) = pd.get("fallbackFrom") {
            report["fallbackFrom"] = from.clone();
        }
        report
    });
    let convergence_round =
        rounds.iter().find(|r| r["converged"] == true).map(|r| r["roundNumber"].clone());
    let mut result = json!({
        "classification": classification,
        "rounds": rounds,
        "converged": rounds.last().is_some_and(|r| r["converged"] == true),
        "convergenceRound": convergence_round,
        "finalValue": report.as_ref().map(|r| r["finalValue"].clone()),
        "report": report,
    });
    mark_from_rows(&mut result, rows);
    result
}

// ---- sim answers ----------------------------------------------------------------------------
//
// The text sim (`modes::sim_text`) answers Delphi's text prompts; these answer its schemas
// the same way: the facilitator spots a quantity in the question, round-1 estimates scatter
// around a value drawn from the question with each model's bias (a few stubborn models far
// out), and later rounds move toward the panel's median (the stubborn ones barely), so runs
// converge as they do in text.

/// A sim model that holds its ground in later rounds (as the text sim's).
fn sim_stubborn(model: &str) -> bool {
    crate::modes::sim_text::seed_of(&[model, "stubborn"]).is_multiple_of(4)
}

/// A sim panelist's confidence in a round (0 for round 1), as the text sim's.
fn sim_level(model: &str, round: usize) -> &'static str {
    let seed = crate::modes::sim_text::seed_of(&[model, "confidence"]);
    LEVELS[((seed % 2) as usize + round).min(2)]
}

/// The text after `start` up to `end` in `text`, trimmed ("" when `start` is not in it).
fn sim_between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    crate::modes::sim_text::section(text, start, end).map_or("", str::trim)
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let schema = ask.schema?;
    let reasoning = |why: &str| -> String {
        let said = format!("[simulated reasoning from {}] {why}{}", ask.model, sim_hostile(ask));
        said.chars().take(schema::REASONING_MAX_CHARS).collect()
    };
    let reply = match schema.name.as_str() {
        CLASSIFY_SCHEMA => sim_classify(ask.prompt, &reasoning),
        ESTIMATE_SCHEMA => sim_estimate(ask, &reasoning),
        ANSWER_SCHEMA => sim_choice(ask, schema, &reasoning),
        _ => return None,
    };
    Some(reply.to_string())
}

/// The hostile payload a `sim/xss…` model puts in its prose (here: its reasoning).
fn sim_hostile(ask: &SimAsk) -> String {
    if ask.hostile {
        format!(" {}", crate::modes::sim_text::XSS_PAYLOAD)
    } else {
        String::new()
    }
}

fn sim_classify(prompt: &str, reasoning: &dyn Fn(&str) -> String) -> Value {
    let q = sim_between(prompt, "QUESTION:\n", "\n\nDetermine:").to_lowercase();
    if crate::modes::sim_text::asks_for_quantity(&q) {
        return json!({ "reasoning": reasoning("The question asks for a quantity."),
                       "type": "NUMERIC", "options": [] });
    }
    let options: &[&str] = if crate::modes::sim_text::asks_yes_or_no(&q) {
        &["Yes", "Yes with conditions", "No", "It depends"]
    } else {
        &[
            "The established option",
            "The newer option",
            "A hybrid approach",
            "It depends on context",
        ]
    };
    json!({ "reasoning": reasoning("The question asks for a choice."),
            "type": "QUALITATIVE", "options": options })
}

fn sim_estimate(ask: &SimAsk, reasoning: &dyn Fn(&str) -> String) -> Value {
    use crate::modes::sim_text::seed_of;
    let p = ask.prompt;
    let stated = |line: &str| {
        parse_estimate(&format!("ESTIMATE: {}", sim_between(p, line, "\n"))).map(|(v, _)| v)
    };
    let (value, round, why) = if p.starts_with("DELPHI ROUND") {
        let round = sim_between(p, "DELPHI ROUND ", " ").parse::<usize>().unwrap_or(2);
        let stubborn = sim_stubborn(ask.model);
        match (stated("YOUR PREVIOUS ESTIMATE: "), stated("- Median: ")) {
            (Some(prev), Some(median)) => {
                let pull = if stubborn { 0.05 } else { 0.65 };
                let why = if stubborn {
                    "I maintain my estimate; the aggregates do not change my reasoning."
                } else {
                    "I moved toward the median, which reflects the panel's information."
                };
                (prev + (median - prev) * pull, round, why)
            }
            (None, Some(median)) => (median, round, "I adopt the panel's median."),
            _ => (1.0, round, "No aggregate to go on."),
        }
    } else {
        let q = sim_between(p, "QUESTION:\n", "\n\nProvide:");
        let s = seed_of(&[q]);
        let base = 10f64.powi(1 + (s % 7) as i32) * (1 + (s >> 8) % 9) as f64;
        // Each model's own bias; stubborn ones sit far out.
        let bias = 0.6 + (seed_of(&[ask.model, q]) % 100) as f64 / 100.0;
        let factor = if sim_stubborn(ask.model) { bias * 2.5 } else { bias };
        (base * factor, 0, "Based on the available indicators and typical growth rates.")
    };
    // In the question's unit, to two decimals, as a JSON number.
    let value = (value * 100.0).round() / 100.0;
    json!({ "reasoning": reasoning(why), "estimate": value,
            "confidence": sim_level(ask.model, round) })
}

fn sim_choice(ask: &SimAsk, schema: &ReplySchema, reasoning: &dyn Fn(&str) -> String) -> Value {
    use crate::modes::sim_text::seed_of;
    let p = ask.prompt;
    let allowed: Vec<&str> = schema.schema["properties"]["answer"]["enum"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fits = |a: &str| !a.is_empty() && (allowed.is_empty() || allowed.contains(&a));
    let round = sim_between(p, "DELPHI ROUND ", " ").parse::<usize>().unwrap_or(1);
    let answer = if p.starts_with("DELPHI ROUND") {
        // `none (your previous answer could not be read)` is no answer to hold on to.
        let prev = Some(sim_between(p, "YOUR PREVIOUS ANSWER: ", "\n"))
            .filter(|a| !a.starts_with("none ("))
            .unwrap_or("")
            .to_string();
        let top = sim_between(p, "- Distribution:\n", "\n")
            .rsplit_once(": ")
            .map_or("", |(a, _)| a.trim())
            .to_string();
        if (sim_stubborn(ask.model) && fits(&prev)) || !fits(&top) {
            prev
        } else {
            top
        }
    } else if allowed.is_empty() {
        ["A careful, incremental approach", "A bold change", "Wait and see"]
            [(seed_of(&[ask.model, p]) % 3) as usize]
            .to_string()
    } else {
        allowed.iter().max_by_key(|o| seed_of(&[ask.model, p, o])).map_or("", |o| o).to_string()
    };
    // An answer the schema does not take (a previous answer that was not read): the first
    // option, as a model constrained to the enum would give.
    let answer = if fits(&answer) {
        answer
    } else {
        allowed.first().map_or("Wait and see".to_string(), |o| o.to_string())
    };
    json!({ "reasoning": reasoning("Weighing the trade-offs and the panel's view."),
            "answer": answer, "confidence": sim_level(ask.model, round) })
}

#[cfg(test)]
#[path = "delphi_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A share as a percentage (`12.5%`, `100%`).
fn percent_words(v: f64) -> String {
    format!("{}%", fmt_num((v * 10.0).round() / 10.0))
}

/// A stored estimate or answer as the reader read it; None when it was not read.
fn value_words(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_f64().map(fmt_num),
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// A round's statistics in a sentence.
fn stats_words(stats: &Value, converged: bool) -> Option<String> {
    let verdict = if converged { "converged" } else { "not converged" };
    if let Some(dist) = stats["distribution"].as_array().filter(|d| !d.is_empty()) {
        let shares: Vec<String> = dist
            .iter()
            .filter_map(|d| {
                Some(format!(
                    "{} {}",
                    d["answer"].as_str()?,
                    percent_words(d["percentage"].as_f64()?)
                ))
            })
            .collect();
        let agreement = stats["agreementPercentage"].as_f64().map(percent_words)?;
        return Some(format!("Agreement {agreement} ({}): {verdict}.", shares.join(", ")));
    }
    let n = |k: &str| stats[k].as_f64().map(fmt_num);
    let (mean, median, sd) = (n("mean")?, n("median")?, n("stdDev")?);
    let mut line = format!("Mean {mean}, median {median}, standard deviation {sd}");
    if let (Some(lo), Some(hi)) = (n("min"), n("max")) {
        line.push_str(&format!(", range {lo} to {hi}"));
    }
    match stats["cv"].as_f64() {
        Some(cv) => line.push_str(&format!(
            "; the spread (standard deviation over the mean) is {}",
            percent_words(cv * 100.0)
        )),
        None => line.push_str("; the spread cannot be measured against a mean of 0"),
    }
    if stats["highVariance"] == true {
        line.push_str(", a high variance");
    }
    Some(format!("{line}: {verdict}."))
}

/// The result as the export's report: the consensus (the final value, and the round it
/// converged in or that it did not), how the question was read, then each round's estimates
/// as a table (panelist, estimate or answer, confidence, what changed) with its statistics.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let rounds = result["rounds"].as_array().cloned().unwrap_or_default();
    let qualitative = result["classification"]["type"] == "qualitative"
        || rounds.iter().any(|r| r["stats"]["distribution"].is_array());
    // The final value: the report's, else the last round's (the same rule: its mean or its
    // most common answer).
    let last_stats = rounds.last().map(|r| &r["stats"]);
    let final_value = value_words(&result["finalValue"]).or_else(|| {
        let s = last_stats?;
        if qualitative {
            value_words(&s["mode"])
        } else {
            value_words(&s["mean"])
        }
    });
    let how =
        if qualitative { "the answer most panelists gave" } else { "the mean of the estimates" };
    if let Some(v) = final_value {
        match result["convergenceRound"].as_u64() {
            Some(n) => out.push_str(&format!(
                "**Consensus:** {v}, converged in round {n} ({how} in that round).\n"
            )),
            None => out.push_str(&format!(
                "**Final value:** {v}, without convergence after {} ({how} in the last round).\n",
                count(rounds.len() as u64, "round", "rounds")
            )),
        }
    }
    let c = &result["classification"];
    if let Some(kind) = c["type"].as_str() {
        let options: Vec<&str> = c["options"]
            .as_array()
            .map(|o| o.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut line = if options.is_empty() {
            format!("**Question** read as {kind}.")
        } else {
            format!("**Question** read as {kind}, with the options {}.", options.join(", "))
        };
        if c["unparsed"].is_string() {
            line.push_str(
                " (The facilitator's classification could not be read; this is the fallback.)",
            );
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line);
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    let value_key = if qualitative { "answer" } else { "estimate" };
    let previous_key = if qualitative { "previousAnswer" } else { "previousEstimate" };
    for r in &rounds {
        let estimates = r["estimates"].as_array().cloned().unwrap_or_default();
        let Some(n) = r["roundNumber"].as_u64() else { continue };
        out.push_str(&format!("**Round {n}**\n\n"));
        if !estimates.is_empty() {
            let rows: Vec<Vec<String>> = estimates
                .iter()
                .map(|e| {
                    let why = serde_json::from_value::<Unparsed>(e["unparsed"].clone()).ok();
                    let value = value_words(&e[value_key]);
                    let confidence = if e["confidenceDefaulted"] == true {
                        "not stated".to_string()
                    } else {
                        e["confidence"].as_str().map(str::to_lowercase).unwrap_or_default()
                    };
                    let note = if e["carriedForward"] == true {
                        match why {
                            Some(u) => format!(
                                "carried over from the previous round: this round's reply was unread (it {})",
                                u.describe()
                            ),
                            None => "carried over from the previous round: no reply".to_string(),
                        }
                    } else if value.is_none() {
                        why.map_or(String::new(), |u| format!("it {}", u.describe()))
                    } else if n > 1 {
                        match (e["changed"] == true, value_words(&e[previous_key])) {
                            (true, Some(p)) => format!("changed from {p}"),
                            (true, None) => "changed".to_string(),
                            (false, _) => "unchanged".to_string(),
                        }
                    } else {
                        String::new()
                    };
                    vec![
                        e["model"].as_str().unwrap_or("").to_string(),
                        value.unwrap_or_else(|| "unread".to_string()),
                        confidence,
                        note,
                    ]
                })
                .collect();
            let right: &[usize] = if qualitative { &[] } else { &[1] };
            out.push_str(&table(&["panelist", value_key, "confidence", "note"], &rows, right));
            out.push('\n');
        }
        let converged = r["converged"] == true;
        match stats_words(&r["stats"], converged) {
            Some(line) => out.push_str(&format!("{line}\n\n")),
            None => out.push_str("Too few estimates could be read for the round to count.\n\n"),
        }
    }
    if let Some(model) = result["report"]["facilitatorModel"].as_str() {
        let standing_in = result["report"]["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!("**Report** written by the facilitator, {model}{standing_in}.\n"));
    }
    out
}
