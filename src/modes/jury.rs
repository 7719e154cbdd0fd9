//! Jury mode (seed 03): jurors score existing content on five dimensions and give a verdict,
//! each `juror_complete` published as that juror finishes; scores, ranges and the majority
//! verdict (with the seed's conservative tie rules) are computed here, in Rust; the foreman
//! writes the report around them.
//!
//! Decisions where the seed is silent: a juror is `parseSuccess` when at least one dimension
//! parsed (an out-of-range score nulls only its own dimension); when no verdict parses and no
//! score either, the majority verdict defaults to REVISE (the conservative middle) and the
//! summary says so; the dimension analysis's consensus is "Strong agreement" for a spread of
//! at most 2 points, "Mixed" for 3-4 and "Disagreement" beyond; the final verdict is the
//! majority verdict computed here (the foreman is told it and writes the report); a failing
//! foreman is replaced once by the configured backup (`[fallback] foreman`), and the report
//! then says `fallbackFrom`.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    mark_from_rows, member_names, role_failed, Batch, Calls, Routed, SplitMix64, TitleTracker,
    TITLE_KEY,
};
use super::reading::{
    answer_text, between, json_field, json_values, readable, split_reasoning, Unparsed,
};
use super::registry::{schema_of, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_CONTENT_CHARS, MAX_TEXT_CHARS};
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::stated::{last_stated, Labels};

use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

const SIM_JURORS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SIM_FOREMAN: &str = "sim/delta";
const SEED_JURORS: [&str; 3] = ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const SEED_FOREMAN: &str = "perplexity/sonar-pro";

/// The five dimensions, as the prompts name them.
pub const DIMENSIONS: [&str; 5] =
    ["Accuracy", "Completeness", "Clarity", "Relevance", "Actionability"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JuryConfig {
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_question: Option<String>,
    pub juror_models: Vec<String>,
    pub foreman_model: String,
    pub timeout_ms: u64,
    /// The server's backup foreman (`[fallback] foreman`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreman_fallback_model: Option<String>,
}

/// The `stage_order` of a jury stage's calls.
fn stage_order(stage: &str) -> i32 {
    if stage == "deliberation" {
        2
    } else {
        4
    }
}

/// Jury's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JuryRequest {
    /// The content the jurors evaluate (required).
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// The question the content answers, when there is one.
    pub original_question: Option<Text<MAX_TEXT_CHARS>>,
    /// The jurors: 3 to 6 models.
    #[schemars(length(min = 3, max = 6))]
    pub juror_models: Option<Vec<ModelId>>,
    /// Writes the verdict report; must not be a juror.
    pub foreman_model: Option<ModelId>,
    /// Per-stage timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

/// `{question, mode:"jury", modeConfig: {content, originalQuestion?, jurorModels (3-6),
/// foremanModel (not a juror), timeoutMs (10 000-300 000)}}`.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Content to evaluate is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: JuryRequest = request::typed(&request::mode_config(body, true)?, "modeConfig")?;
    let content =
        cfg.content.as_ref().filter(|c| !c.0.trim().is_empty()).map(|c| c.0.clone()).ok_or_else(
            || FieldError::new("modeConfig.content", "Content to evaluate is required"),
        )?;
    let original_question =
        match &cfg.original_question {
            None => None,
            Some(q) => Some(q.trimmed().ok_or_else(|| {
                FieldError::new("modeConfig.originalQuestion", "must not be empty")
            })?),
        };
    let juror_models = request::models(
        cfg.juror_models.as_deref(),
        "modeConfig.jurorModels",
        3..=6,
        Some("Jury mode requires at least 3 juror models"),
        Some("Maximum 6 juror models allowed"),
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_JURORS } else { &SEED_JURORS }));
    let foreman_model = match &cfg.foreman_model {
        None => (if defaults.offline { SIM_FOREMAN } else { SEED_FOREMAN }).to_string(),
        Some(m) if m.0.trim().is_empty() => {
            return Err(FieldError::new("modeConfig.foremanModel", "Foreman model is required"))
        }
        Some(m) => m.0.trim().to_string(),
    };
    if juror_models.contains(&foreman_model) {
        return Err(FieldError::new(
            "modeConfig.foremanModel",
            "Foreman model must not be one of the juror models",
        ));
    }
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=300_000,
        defaults.stage_timeout_ms,
    )?;
    let models = request::distinct(&[&juror_models], &[&foreman_model]);
    let foreman_fallback_model = Fallbacks::for_role(&defaults.fallback.foreman, &foreman_model);
    let config = JuryConfig {
        content,
        original_question,
        juror_models,
        foreman_model,
        timeout_ms,
        foreman_fallback_model,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Jury in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "jury",
    label: "Jury",
    description: "Jurors score existing content on five dimensions and give a verdict; the foreman writes the verdict report.",
    multi_turn: false,
    question: Question { label: "What to evaluate", required: Some("Content to evaluate is required") },
    roles: &[
        Role {
            id: "juror",
            label: "Jurors",
            field: Some("jurorModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_JURORS,
            default: &SEED_JURORS,
        },
        Role {
            id: "foreman",
            label: "Foreman",
            field: Some("foremanModel"),
            panel: false,
            fallback: Some("foreman"),
            sim_default: &[SIM_FOREMAN],
            default: &[SEED_FOREMAN],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<JuryRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Jury::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let s = r.get("jurorSummary").filter(|s| !s.is_null())?;
        let verdict = r["foreman"]["finalVerdict"]
            .as_str()
            .or_else(|| s["majorityVerdict"].as_str())
            .unwrap_or("no verdict");
        Some(match s["overallAverage"].as_f64() {
            Some(avg) => format!("{verdict} · average {avg:.1}/10"),
            None => verdict.to_string(),
        })
    },
    stages: &[("present", "presenting the content"), ("deliberation", "the jurors' deliberation"), ("verdict", "the foreman's verdict")],
    report: Some(report),
    example: || {
        json!({ "mode": "jury", "question": "Evaluate this API documentation",
                "modeConfig": { "content": "## GET /api/users\nReturns users. Accepts limit and offset." } })
    },
    sim: Some(sim_answer),
};

// ---- prompts (verbatim from the seed) -------------------------------------------------------

/// How a juror's prompt begins (what the sim models recognise it by).
pub const JUROR_HEAD: &str = "You are a juror evaluating";

pub fn evaluation_prompt(content: &str, original_question: Option<&str>) -> String {
    evaluation_prompt_as(content, original_question, None)
}

/// The juror's prompt asking for the seed's scorecard, or, given the stage's schema, for its
/// JSON instead: the same instructions (dimensions, scale, verdict thresholds), the seed's
/// `Format your response as:` section swapped for the schema's fields.
pub fn evaluation_prompt_as(
    content: &str,
    original_question: Option<&str>,
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = format!(
        "{JUROR_HEAD} the quality of a response. Score it on 5 dimensions (1-10 each) and deliver a verdict.\n\n",
    );
    if let Some(q) = original_question {
        p.push_str(&format!("ORIGINAL QUESTION:\n{q}\n\n"));
    }
    p.push_str(&format!("CONTENT UNDER EVALUATION:\n{content}\n\n"));
    p.push_str(
        "Score each dimension from 1 (terrible) to 10 (exceptional):\n\
\n\
1. **Accuracy** — Are the facts, claims, and technical details correct?\n\
2. **Completeness** — Does it cover all important aspects of the topic?\n\
3. **Clarity** — Is it well-organized, easy to follow, and unambiguous?\n\
4. **Relevance** — Does it directly address the question/task at hand?\n\
5. **Actionability** — Does it provide concrete, usable guidance?\n\
\n\
For each dimension, provide:\n\
- A score (1-10)\n\
- 1-2 sentences of justification\n\
\n\
Then deliver your verdict based on your average score:\n\
- APPROVE (average >= 7): The content is good enough for use\n\
- REVISE (average 4-6.9): The content needs improvement before use\n\
- REJECT (average < 4): The content is fundamentally flawed\n\
\n",
    );
    if let Some(schema) = schema {
        p.push_str(&schema.instruction());
        return p;
    }
    p.push_str(
        "Format your response as:\n\
\n\
## Juror Assessment\n\
\n\
### Scores\n\
\n\
| Dimension | Score | Justification |\n\
|-----------|:-----:|---------------|\n\
| Accuracy | [1-10] | [justification] |\n\
| Completeness | [1-10] | [justification] |\n\
| Clarity | [1-10] | [justification] |\n\
| Relevance | [1-10] | [justification] |\n\
| Actionability | [1-10] | [justification] |\n\
| **Average** | [avg] | |\n\
\n\
### Deliberation Notes\n\
[2-3 paragraphs explaining your overall assessment, key strengths, and key weaknesses]\n\
\n\
### Verdict\n\
VERDICT: [APPROVE|REVISE|REJECT]\n\
\n\
### Recommendations\n\
[If REVISE or REJECT: numbered list of specific improvements needed]",
    );
    p
}

pub fn foreman_prompt(
    content: &str,
    original_question: Option<&str>,
    jurors: &[JurorAssessment],
    tally: &VoteTally,
    majority: Option<Verdict>,
) -> String {
    let mut p = String::from(
        "You are the foreman of a jury that has evaluated the following content. Synthesize all juror assessments into a final verdict report.\n\n",
    );
    p.push_str(&format!("CONTENT EVALUATED:\n{content}\n\n"));
    if let Some(q) = original_question {
        p.push_str(&format!("ORIGINAL QUESTION:\n{q}\n\n"));
    }
    p.push_str("JUROR ASSESSMENTS:\n");
    for (i, j) in jurors.iter().enumerate() {
        p.push_str(&format!("--- Juror {} ({}) ---\n{}\n\n", i + 1, j.model, juror_said(j)));
    }
    p.push_str(&format!(
        "VOTE TALLY:\n- APPROVE: {}\n- REVISE: {}\n- REJECT: {}\n- Majority Verdict: {}\n\n",
        tally.approve,
        tally.revise,
        tally.reject,
        majority.map_or("none (no juror's verdict or scores could be read)", Verdict::as_str)
    ));
    p.push_str(
        "Produce a formal verdict report:\n\
\n\
## Jury Verdict Report\n\
\n\
### Final Verdict: [APPROVE|REVISE|REJECT]\n\
[1-2 sentence summary explaining the jury's decision]\n\
\n\
### Dimension Analysis\n\
\n\
| Dimension | Avg Score | Min | Max | Consensus |\n\
|-----------|:---------:|:---:|:---:|-----------|\n\
| Accuracy | [avg] | [min] | [max] | [agreement note] |\n\
| Completeness | [avg] | [min] | [max] | [agreement note] |\n\
| Clarity | [avg] | [min] | [max] | [agreement note] |\n\
| Relevance | [avg] | [min] | [max] | [agreement note] |\n\
| Actionability | [avg] | [min] | [max] | [agreement note] |\n\
| **Overall** | [avg] | [min] | [max] | |\n\
\n\
### Key Strengths (Consensus)\n\
[Strengths identified by 2+ jurors — bulleted list]\n\
\n\
### Key Weaknesses (Consensus)\n\
[Weaknesses identified by 2+ jurors — bulleted list]\n\
\n\
### Improvement Recommendations\n\
[Prioritized numbered list — only include if verdict is REVISE or REJECT]\n\
\n\
### Dissenting Opinions\n\
[If any juror's verdict differed from the majority, summarize their reasoning here. If unanimous, state \"The jury was unanimous.\"]",
    );
    p
}

/// A juror's assessment as the foreman reads it: its answer without its reasoning block, a
/// JSON scorecard as `Field: value` lines (the foreman, and the person reading its report,
/// should not have to read raw JSON).
fn juror_said(j: &JurorAssessment) -> String {
    readable(&j.assessment_text).into_owned()
}

/// The quoted material of the foreman's prompt, each text exactly as the prompt holds it: what
/// the engine cuts first when the prompt would not fit the foreman's context (on a 4,096-token
/// model the jurors' assessments and the content overflowed it).
pub fn foreman_material(
    content: &str,
    original_question: Option<&str>,
    jurors: &[JurorAssessment],
) -> Vec<(String, String)> {
    let mut m = vec![("the content under review".to_string(), content.to_string())];
    if let Some(q) = original_question {
        m.push(("the original question".to_string(), q.to_string()));
    }
    m.extend(
        jurors
            .iter()
            .enumerate()
            .map(|(i, j)| (format!("Juror {}'s assessment ({})", i + 1, j.model), juror_said(j))),
    );
    m
}

/// The seed's jury title prompt, on the first 200 characters of the content.
pub fn title_prompt(content: &str) -> String {
    let preview: String = content.chars().take(200).collect();
    format!(
        "Generate a brief title (3-5 words) for a jury evaluation session about this content:\n\n\
         \"{preview}\"\n\n\
         Reply with ONLY the title. No quotes, no punctuation, no explanation."
    )
}

// ---- parsing --------------------------------------------------------------------------------

/// A value per dimension (scores, averages or ranges), serialised with the seed's names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dims<T> {
    pub accuracy: T,
    pub completeness: T,
    pub clarity: T,
    pub relevance: T,
    pub actionability: T,
}

impl<T: Clone> Dims<T> {
    pub fn from_fn(mut f: impl FnMut(usize) -> T) -> Self {
        Dims {
            accuracy: f(0),
            completeness: f(1),
            clarity: f(2),
            relevance: f(3),
            actionability: f(4),
        }
    }

    pub fn get(&self, i: usize) -> &T {
        match i {
            0 => &self.accuracy,
            1 => &self.completeness,
            2 => &self.clarity,
            3 => &self.relevance,
            _ => &self.actionability,
        }
    }
}

pub type DimensionScores = Dims<Option<i64>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    pub min: i64,
    pub max: i64,
}

/// What one place in a reply says about a dimension: `None` when it holds no score, else the
/// stated score (`Some(None)` when it is out of the 1-10 range, which nulls the dimension).
type Found = Option<Option<i64>>;

fn inline_res() -> &'static [Regex; 5] {
    static RE: OnceLock<[Regex; 5]> = OnceLock::new();
    RE.get_or_init(|| {
        DIMENSIONS.map(|d| {
            // `Accuracy: 8`, `**Accuracy**: 8/10`, `Accuracy — 7.5`, `Accuracy score = 9`,
            // `**Accuracy:** **8**`, `Accuracy (8/10)`.
            Regex::new(&format!(
                r"(?i)\b{d}\b[*_]*[ \t]*(?:score)?[*_]*[ \t]*[:=—–(-][ \t*_]*(-?\d+(?:\.\d+)?)"
            ))
            .unwrap_or_else(|_| unreachable!())
        })
    })
}

fn heading_score_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\bscore[*_]*[ \t]*[:=—–-][ \t*_]*(-?\d+(?:\.\d+)?)")
            .unwrap_or_else(|_| unreachable!())
    })
}

fn tail_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // What may follow a number: a scale (`/10`, ` out of 10`, ` of 10`) or a range (`-8`).
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)^[ \t*_]*(?:(?:/|out[ \t]+of\b|of\b)[ \t*_]*(\d+(?:\.\d+)?)|([-–][ \t]*\d))",
        )
        .unwrap_or_else(|_| unreachable!())
    })
}

/// A score: null outside 1-10 (`0.99`, `10.5`, `11`), else rounded to the nearest integer
/// (`7.5` → 8).
fn score_of(text: &str) -> Option<i64> {
    let v: f64 = text.parse().ok()?;
    (1.0..=10.0).contains(&v).then_some(v.round() as i64)
}

/// A stated number read with what follows it: `8`, `8/10`, `8 out of 10` are scores; a
/// range (`7-8`) or another scale (`4/5`) states none.
fn score_at(number: &str, after: &str) -> Found {
    if let Some(c) = tail_re().captures(after) {
        if c.get(2).is_some() {
            return None;
        }
        if c.get(1).is_some_and(|d| d.as_str().parse::<f64>().ok() != Some(10.0)) {
            return None;
        }
    }
    Some(score_of(number))
}

fn number_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^-?\d+(?:\.\d+)?").unwrap_or_else(|_| unreachable!()))
}

/// A table cell or JSON string holding a score: `8`, `**8/10**`, `8 out of 10`.
fn cell_score(cell: &str) -> Found {
    let t = cell.trim().trim_start_matches(['*', '_', ' ']);
    let m = number_re().find(t)?;
    let after = &t[m.end()..];
    // Only a number (with its scale) and markup or a note: not `8 jurors`.
    let rest = tail_re().find(after).map_or(after, |s| &after[s.end()..]);
    let rest = rest.trim_start_matches(['*', '_', ' ']);
    if !(rest.is_empty() || rest.starts_with(['(', '-', '–', '—', ',', '.', ';'])) {
        return None;
    }
    score_at(m.as_str(), after)
}

/// The dimension a cell or key names: `Accuracy`, `**Clarity**`, `3. Relevance`, `accuracy
/// score`.
fn dimension_of(name: &str) -> Option<usize> {
    let t = name.trim().trim_matches(['*', '_', ' ', ':']);
    let t = t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ')').trim();
    let t = t.trim_matches(['*', '_', ' ', ':']).to_lowercase();
    let t = t.strip_suffix(" score").unwrap_or(&t);
    DIMENSIONS.iter().position(|d| d.eq_ignore_ascii_case(t))
}

fn table_cells(line: &str) -> Option<Vec<&str>> {
    let t = line.trim();
    if !t.contains('|') {
        return None;
    }
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    Some(t.split('|').map(str::trim).collect())
}

fn is_rule(cells: &[&str]) -> bool {
    cells.iter().all(|c| c.contains('-') && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// Scores in Markdown tables, the last row naming a dimension winning: rows (`| Accuracy |
/// 8 | … |`, the score under the header's `Score` column, else just after the name) or
/// columns (a header naming the dimensions over a row of scores).
fn table_scores(answer: &str) -> [Found; 5] {
    let mut out = [None; 5];
    let lines: Vec<&str> = answer.lines().collect();
    let mut header: Option<Vec<&str>> = None;
    for (i, line) in lines.iter().enumerate() {
        let Some(cells) = table_cells(line) else {
            header = None;
            continue;
        };
        if is_rule(&cells) {
            continue;
        }
        if lines.get(i + 1).and_then(|l| table_cells(l)).is_some_and(|c| is_rule(&c)) {
            header = Some(cells);
            continue;
        }
        if let Some(d) = cells.first().and_then(|c| dimension_of(c)) {
            let col = header
                .as_ref()
                .and_then(|h| h.iter().position(|c| c.to_lowercase().contains("score")))
                .filter(|&k| k > 0)
                .unwrap_or(1);
            if let Some(f) = cells.get(col).and_then(|c| cell_score(c)) {
                out[d] = Some(f);
            }
        } else if let Some(h) = &header {
            for (k, name) in h.iter().enumerate() {
                if let (Some(d), Some(f)) =
                    (dimension_of(name), cells.get(k).and_then(|c| cell_score(c)))
                {
                    out[d] = Some(f);
                }
            }
        }
    }
    out
}

/// A JSON score: a number, a string (`"8/10"`) or an object with a `score`.
fn json_score(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_f64().and_then(|x| score_of(&x.to_string())),
        Value::String(s) => cell_score(s).flatten(),
        Value::Object(o) => {
            o.iter().find(|(k, _)| k.eq_ignore_ascii_case("score")).and_then(|(_, v)| json_score(v))
        }
        _ => None,
    }
}

/// Scores in the last JSON value that has any: `{"scores": {"accuracy": 8, …}}`, the
/// dimensions at the top level, or a list of `{"dimension": …, "score": …}`.
fn json_scores(answer: &str) -> [Found; 5] {
    let field = |o: &serde_json::Map<String, Value>, key: &str| {
        o.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.clone())
    };
    for v in json_values(answer).into_iter().rev() {
        let mut out: [Found; 5] = [None; 5];
        let scores = match &v {
            Value::Object(o) => field(o, "scores").unwrap_or_else(|| v.clone()),
            _ => v.clone(),
        };
        match &scores {
            Value::Object(o) => {
                for (k, s) in o {
                    if let Some(d) = dimension_of(k) {
                        out[d] = Some(json_score(s));
                    }
                }
            }
            Value::Array(items) => {
                for item in items.iter().filter_map(Value::as_object) {
                    let name = field(item, "dimension").or_else(|| field(item, "name"));
                    if let Some(d) = name.as_ref().and_then(Value::as_str).and_then(dimension_of) {
                        out[d] = Some(field(item, "score").as_ref().and_then(json_score));
                    }
                }
            }
            _ => {}
        }
        if out.iter().any(Option::is_some) {
            return out;
        }
    }
    [None; 5]
}

/// The last inline `Dimension: N` that states a score.
fn inline_score(answer: &str, i: usize) -> Found {
    inline_res()[i]
        .captures_iter(answer)
        .filter_map(|c| {
            let m = c.get(1)?;
            score_at(m.as_str(), &answer[m.end()..])
        })
        .last()
}

/// A `Score: N` on one of the three lines under a line naming the dimension (a heading per
/// dimension), before any line naming another dimension or another heading.
fn heading_score(answer: &str, i: usize) -> Found {
    let lines: Vec<&str> = answer.lines().collect();
    let names = |l: &str| {
        let lower = l.to_lowercase();
        (0..5).filter(|&k| contains_word(&lower, &DIMENSIONS[k].to_lowercase())).collect::<Vec<_>>()
    };
    let mut found = None;
    for (n, line) in lines.iter().enumerate() {
        if names(line) != [i] {
            continue;
        }
        for next in lines.iter().skip(n + 1).take(3) {
            if next.trim_start().starts_with('#') || !names(next).is_empty() {
                break;
            }
            if let Some(m) = heading_score_re().captures(next).and_then(|c| c.get(1)) {
                if let Some(f) = score_at(m.as_str(), &next[m.end()..]) {
                    found = Some(f);
                }
                break;
            }
        }
    }
    found
}

fn contains_word(haystack: &str, word: &str) -> bool {
    haystack.match_indices(word).any(|(at, _)| {
        let before = haystack[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = haystack[at + word.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        before && after
    })
}

/// Reads the five scores from the answer part of a reply (a draft scorecard in a `<think>`
/// block never counts; a reply whose reasoning never closed has none). Per dimension, the
/// first form that states it: JSON, else the last table row (or column) naming it, else the
/// last inline `Dimension: N`, else a `Score: N` under a line naming it. The last match of a
/// form wins, so a model that quotes a template or the content before its own scorecard is
/// read by its scorecard. A stated number outside 1-10 nulls its dimension; a range (`7-8`)
/// or another scale (`4/5`) is not a score.
pub fn parse_scores(text: &str) -> DimensionScores {
    let split = split_reasoning(text);
    if split.unclosed {
        return Dims::default();
    }
    let answer = split.answer.as_ref();
    let json = json_scores(answer);
    let table = table_scores(answer);
    Dims::from_fn(|i| {
        json[i]
            .or(table[i])
            .or_else(|| inline_score(answer, i))
            .or_else(|| heading_score(answer, i))
            .flatten()
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Approve,
    Revise,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "APPROVE",
            Verdict::Revise => "REVISE",
            Verdict::Reject => "REJECT",
        }
    }

    /// The seed's thresholds: >= 7 APPROVE, >= 4 REVISE, else REJECT.
    pub fn from_average(avg: f64) -> Self {
        if avg >= 7.0 {
            Verdict::Approve
        } else if avg >= 4.0 {
            Verdict::Revise
        } else {
            Verdict::Reject
        }
    }
}

/// A verdict word, in English or a few other languages (`APROBAR`, `REJETER`, `ABLEHNEN`).
fn verdict_word(word: &str) -> Option<Verdict> {
    match word.to_lowercase().as_str() {
        "approve" | "approved" | "aprobar" | "aprobado" | "aprovar" | "aprovado" | "approuver"
        | "approuvé" | "approvare" | "approvato" | "annehmen" | "angenommen" | "genehmigen"
        | "genehmigt" | "goedkeuren" | "goedgekeurd" | "zatwierdzić" => Some(Verdict::Approve),
        "revise" | "revisar" | "réviser" | "reviser" | "rivedere" | "revisionare"
        | "überarbeiten" | "ueberarbeiten" | "herzien" | "poprawić" => Some(Verdict::Revise),
        "reject" | "rejected" | "rechazar" | "rechazado" | "rejeitar" | "rejeitado" | "rejeter"
        | "rejeté" | "respingere" | "respinto" | "rifiutare" | "ablehnen" | "abgelehnt"
        | "afwijzen" | "afgewezen" | "odrzucić" => Some(Verdict::Reject),
        _ => None,
    }
}

fn verdict_labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    L.get_or_init(|| {
        Labels::new(
            r"(?:(?:final|my|the\s+jury's)\s+)?verdict(?:\s+final)?|final_?verdict|veredicto(?:\s+final)?|veredito(?:\s+final)?|verdetto(?:\s+finale)?|(?:end)?urteil|oordeel|werdykt",
        )
    })
}

/// Reads a verdict, only where the answer part of the reply states one: the last labelled
/// `VERDICT: X` (also `**Final verdict:** Reject`, `| Verdict | APPROVE |`, a `### Verdict`
/// heading with the word alone under it, `VEREDICTO: APROBAR`, `VERDICT : REJETER`,
/// `URTEIL: ABLEHNEN`), else a JSON `{"verdict": "approve"}`. A verdict word that is only
/// mentioned ("I would not approve", "neither approve nor reject", `[APPROVE|REVISE|REJECT]`)
/// is none, and so is anything inside a reasoning block.
pub fn parse_verdict(text: &str) -> Option<Verdict> {
    let split = split_reasoning(text);
    if split.unclosed {
        return None;
    }
    let answer = split.answer.as_ref();
    if let Some(s) = last_stated(answer, verdict_labels(), verdict_word) {
        return Some(s.value);
    }
    let v = json_field(answer, &["verdict", "finalVerdict", "final_verdict"])?;
    let word = v.as_str()?.trim().trim_matches(['*', '_', '[', ']', '.', ' ']);
    verdict_word(word)
}

/// Items (numbered or bulleted lines) of the last section whose heading contains `heading`.
/// Read on the answer part of the reply: a draft inside a reasoning block has none.
pub fn section_items(text: &str, heading: &str) -> Vec<String> {
    let split = split_reasoning(text);
    if split.unclosed {
        return Vec::new();
    }
    let lines: Vec<&str> = split.answer.lines().collect();
    let h = heading.to_lowercase();
    let is_heading = |l: &str| {
        let t = l.trim();
        t.starts_with('#') || (t.starts_with("**") && t.ends_with("**") && t.len() > 4)
    };
    let Some(start) = lines.iter().rposition(|l| is_heading(l) && l.to_lowercase().contains(&h))
    else {
        return Vec::new();
    };
    let item_re = item_re();
    lines[start + 1..]
        .iter()
        .take_while(|l| !is_heading(l))
        .filter_map(|l| {
            item_re.captures(l).and_then(|c| c.get(1)).map(|m| m.as_str().trim().to_string())
        })
        .filter(|s| !s.is_empty() && !s.starts_with('['))
        .collect()
}

fn item_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$").unwrap_or_else(|_| unreachable!())
    })
}

/// Mean of present values, rounded to one decimal.
fn mean(values: &[i64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(((values.iter().sum::<i64>() as f64 / values.len() as f64) * 10.0).round() / 10.0)
}

pub fn average(scores: &DimensionScores) -> Option<f64> {
    let v: Vec<i64> = (0..5).filter_map(|i| *scores.get(i)).collect();
    mean(&v)
}

// ---- payloads -------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JurorAssessment {
    pub model: String,
    pub assessment_text: String,
    pub scores: DimensionScores,
    pub average: Option<f64>,
    pub verdict: Option<Verdict>,
    pub recommendations: Vec<String>,
    pub response_time_ms: i64,
    pub parse_success: bool,
    /// Why the verdict or the scores (whichever is missing) could not be read: the juror
    /// `refused`, stopped in `reasoning_only`, or wrote `no_answer` in a readable form. Null
    /// when both were read.
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
    /// Where the scores and verdict were read from (the reply's JSON or its text), when any
    /// was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

pub fn assess(model: &str, text: &str, response_time_ms: i64) -> JurorAssessment {
    let scores = parse_scores(text);
    let parse_success = (0..5).any(|i| scores.get(i).is_some());
    let verdict = parse_verdict(text);
    JurorAssessment {
        model: model.to_string(),
        assessment_text: text.to_string(),
        average: average(&scores),
        verdict,
        recommendations: section_items(text, "recommendation"),
        scores,
        response_time_ms,
        parse_success,
        unparsed: (!parse_success || verdict.is_none()).then(|| Unparsed::of(text)),
        read_from: (parse_success || verdict.is_some()).then_some(ReadFrom::Text),
    }
}

/// The name of a juror's reply schema.
pub const JUROR_SCHEMA: &str = "jury_verdict";

/// The five dimensions as the schema and the stored scores name them.
const DIMENSION_KEYS: [&str; 5] =
    ["accuracy", "completeness", "clarity", "relevance", "actionability"];

/// The verdict words, as the seed writes them.
const VERDICT_WORDS: [&str; 3] = ["APPROVE", "REVISE", "REJECT"];

/// At most this many recommendations, each at most this long: enough for the seed's
/// "numbered list of specific improvements", bounded so a small model looping in a list or a
/// string still closes the object within its output cap.
const MAX_RECOMMENDATIONS: usize = 5;
const RECOMMENDATION_MAX_CHARS: usize = 200;

/// A juror's reply schema: its reasoning (the justifications and deliberation notes the seed
/// asks for), a whole score from 1 to 10 per dimension, the verdict word, and the
/// recommendations. The same for every run (the dimensions and verdicts are the seed's), built
/// once per run.
pub fn juror_schema() -> Arc<ReplySchema> {
    let scores = schema::object(DIMENSION_KEYS.map(|k| (k, schema::integer(1, 10))));
    ReplySchema::new(
        JUROR_SCHEMA,
        schema::reasoned([
            (
                "scores",
                schema::described(
                    scores,
                    "a score from 1 (terrible) to 10 (exceptional) per dimension",
                ),
            ),
            (
                "verdict",
                schema::described(
                    schema::one_of(&VERDICT_WORDS),
                    "APPROVE (average >= 7), REVISE (average 4-6.9) or REJECT (average < 4)",
                ),
            ),
            (
                "recommendations",
                schema::described(
                    schema::list(schema::text(RECOMMENDATION_MAX_CHARS), 0, MAX_RECOMMENDATIONS),
                    "if REVISE or REJECT: the specific improvements needed (none if APPROVE)",
                ),
            ),
        ]),
    )
}

/// What a juror's JSON states, when it fits the schema and every score and the verdict read as
/// the text reader reads them (a score outside 1-10 or a word that is no verdict is refused,
/// and the text reader then has its say). Recommendations are kept as stated, blank ones left
/// out; the text reader's rule against `[placeholders]` is for the seed's template, which a
/// JSON reply has no copy of.
fn json_assessment(v: &Value) -> Option<(DimensionScores, Verdict, Vec<String>)> {
    let scores = v.get("scores")?;
    let read: Vec<i64> = DIMENSION_KEYS
        .iter()
        .map(|k| scores.get(*k).and_then(Value::as_i64).filter(|s| (1..=10).contains(s)))
        .collect::<Option<_>>()?;
    let verdict = v.get("verdict").and_then(Value::as_str).and_then(verdict_word)?;
    let recommendations = v
        .get("recommendations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect();
    Some((Dims::from_fn(|i| Some(read[i])), verdict, recommendations))
}

/// A juror's reply read from its JSON when it fits `schema` ([`json_assessment`]), else by the
/// text readers ([`assess`]); `read_from` says which, when anything was read.
pub fn assess_reply(
    model: &str,
    text: &str,
    response_time_ms: i64,
    schema: &ReplySchema,
) -> JurorAssessment {
    let Some((scores, verdict, recommendations)) =
        schema.read(text).as_ref().and_then(json_assessment)
    else {
        return assess(model, text, response_time_ms);
    };
    JurorAssessment {
        model: model.to_string(),
        assessment_text: text.to_string(),
        average: average(&scores),
        verdict: Some(verdict),
        recommendations,
        scores,
        response_time_ms,
        parse_success: true,
        unparsed: None,
        read_from: Some(ReadFrom::Json),
    }
}

/// Jury's sim answer to its juror schema (None for any other prompt or schema): the text sim's
/// juror in JSON. The content sets the level (every juror sees the same), the model its
/// leniency, and the verdict follows the average by the seed's thresholds, so panels split
/// as they do in text.
fn sim_answer(ask: &SimAsk) -> Option<String> {
    use crate::modes::sim_text::seed_of;
    let schema = ask.schema.filter(|s| s.name == JUROR_SCHEMA)?;
    let content = between(ask.prompt, "CONTENT UNDER EVALUATION:\n", "\n\nScore each dimension");
    let quality = 3 + (seed_of(&[content]) % 6) as i64;
    let leniency = (seed_of(&[ask.model, "leniency"]) % 5) as i64 - 2;
    let mut r = SplitMix64::new(ask.seed);
    let scores: Vec<i64> =
        (0..5).map(|_| (quality + leniency + r.below(3) as i64 - 1).clamp(1, 10)).collect();
    let avg = scores.iter().sum::<i64>() as f64 / 5.0;
    let verdict = Verdict::from_average(avg);
    let reasoning: String = format!(
        "[simulated assessment from {}] {}The content addresses its task and is organised sensibly. Its main weakness is a lack of concrete examples and error handling; its main strength is clarity.",
        ask.model,
        ask.hostile_paragraph()
    )
    .chars()
    .take(schema::REASONING_MAX_CHARS)
    .collect();
    let recommendations: &[&str] = if verdict == Verdict::Approve {
        &[]
    } else {
        &["Add concrete examples.", "Document error cases.", "Tighten the structure."]
    };
    let reply = json!({
        "reasoning": reasoning,
        "scores": DIMENSION_KEYS.iter().zip(&scores).map(|(k, s)| (k.to_string(), json!(s))).collect::<serde_json::Map<_, _>>(),
        "verdict": verdict.as_str(),
        "recommendations": recommendations,
    });
    debug_assert!(schema.validate(&reply).is_ok());
    Some(reply.to_string())
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteTally {
    pub approve: usize,
    pub revise: usize,
    pub reject: usize,
}

/// The majority verdict with the seed's conservative ties: APPROVE–REJECT → REVISE,
/// APPROVE–REVISE → REVISE, REVISE–REJECT → REJECT, three-way → REVISE. None without votes.
pub fn majority_verdict(verdicts: &[Option<Verdict>]) -> (Option<Verdict>, VoteTally) {
    let count = |v: Verdict| verdicts.iter().filter(|x| **x == Some(v)).count();
    let t = VoteTally {
        approve: count(Verdict::Approve),
        revise: count(Verdict::Revise),
        reject: count(Verdict::Reject),
    };
    let max = t.approve.max(t.revise).max(t.reject);
    if max == 0 {
        return (None, t);
    }
    let (a, v, r) = (t.approve == max, t.revise == max, t.reject == max);
    let verdict = match (a, v, r) {
        (true, false, false) => Verdict::Approve,
        (false, true, false) => Verdict::Revise,
        (false, false, true) => Verdict::Reject,
        (false, true, true) => Verdict::Reject,
        _ => Verdict::Revise,
    };
    (Some(verdict), t)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JurorSummary {
    /// Jurors asked (including ones whose call failed).
    pub juror_count: usize,
    pub successful_jurors: usize,
    /// None when no juror's verdict or scores could be read: the panel reached no verdict,
    /// and none is made up for it.
    pub majority_verdict: Option<Verdict>,
    /// `votes`, `scores` (no verdict parsed: inferred from the average) or `none`.
    pub verdict_source: String,
    pub vote_tally: VoteTally,
    pub dimension_averages: Dims<Option<f64>>,
    pub dimension_ranges: Dims<Option<Range>>,
    pub overall_average: Option<f64>,
    pub warnings: Vec<String>,
}

pub fn summarize(juror_count: usize, jurors: &[JurorAssessment]) -> JurorSummary {
    let scored: Vec<&JurorAssessment> = jurors.iter().filter(|j| j.parse_success).collect();
    let column =
        |i: usize| -> Vec<i64> { scored.iter().filter_map(|j| *j.scores.get(i)).collect() };
    let dimension_averages = Dims::from_fn(|i| mean(&column(i)));
    let dimension_ranges = Dims::from_fn(|i| {
        let c = column(i);
        Some(Range { min: *c.iter().min()?, max: *c.iter().max()? })
    });
    let avgs: Vec<f64> = (0..5).filter_map(|i| *dimension_averages.get(i)).collect();
    let overall_average = (!avgs.is_empty())
        .then(|| ((avgs.iter().sum::<f64>() / avgs.len() as f64) * 10.0).round() / 10.0);
    let (majority, vote_tally) =
        majority_verdict(&jurors.iter().map(|j| j.verdict).collect::<Vec<_>>());
    let mut warnings = Vec::new();
    if scored.is_empty() {
        warnings
            .push("No juror's scores could be parsed: dimension averages are null.".to_string());
    }
    let (majority_verdict, verdict_source) = match (majority, overall_average) {
        (Some(v), _) => (Some(v), "votes"),
        (None, Some(avg)) => {
            warnings.push("No verdict could be parsed: the majority verdict is inferred from the average score.".into());
            (Some(Verdict::from_average(avg)), "scores")
        }
        (None, None) => {
            warnings.push(
                "Neither verdicts nor scores could be read: the panel reached no verdict.".into(),
            );
            (None, "none")
        }
    };
    JurorSummary {
        juror_count,
        successful_jurors: jurors.len(),
        majority_verdict,
        verdict_source: verdict_source.into(),
        vote_tally,
        dimension_averages,
        dimension_ranges,
        overall_average,
        warnings,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DimensionAnalysisRow {
    pub dimension: String,
    pub avg_score: f64,
    pub min_score: i64,
    pub max_score: i64,
    pub consensus: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForemanReport {
    pub model: String,
    pub report_text: String,
    pub final_verdict: Option<Verdict>,
    pub dimension_analysis: Vec<DimensionAnalysisRow>,
    pub key_strengths: Vec<String>,
    pub key_weaknesses: Vec<String>,
    pub recommendations: Vec<String>,
    pub dissenting_opinions: Vec<String>,
    pub response_time_ms: i64,
    /// The foreman this report's model stood in for, when the backup wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

fn consensus(spread: i64) -> &'static str {
    match spread {
        0..=2 => "Strong agreement",
        3..=4 => "Mixed",
        _ => "Disagreement",
    }
}

/// The dissent section: its items, or its sentences when it has no list.
fn dissent(text: &str) -> Vec<String> {
    let items = section_items(text, "dissent");
    if !items.is_empty() {
        return items;
    }
    let split = split_reasoning(text);
    if split.unclosed {
        return Vec::new();
    }
    let lines: Vec<&str> = split.answer.lines().collect();
    let Some(start) = lines
        .iter()
        .rposition(|l| l.trim().starts_with('#') && l.to_lowercase().contains("dissent"))
    else {
        return Vec::new();
    };
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| !l.trim().starts_with('#'))
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if body.is_empty() {
        Vec::new()
    } else {
        vec![body.join(" ")]
    }
}

pub fn foreman_report(
    model: &str,
    text: &str,
    response_time_ms: i64,
    summary: &JurorSummary,
) -> ForemanReport {
    let dimension_analysis = (0..5)
        .filter_map(|i| {
            let avg = (*summary.dimension_averages.get(i))?;
            let r = (*summary.dimension_ranges.get(i))?;
            Some(DimensionAnalysisRow {
                dimension: DIMENSIONS[i].to_string(),
                avg_score: avg,
                min_score: r.min,
                max_score: r.max,
                consensus: consensus(r.max - r.min).to_string(),
            })
        })
        .collect();
    ForemanReport {
        model: model.to_string(),
        report_text: text.to_string(),
        final_verdict: summary.majority_verdict,
        dimension_analysis,
        key_strengths: section_items(text, "strength"),
        key_weaknesses: section_items(text, "weakness"),
        recommendations: section_items(text, "recommendation"),
        dissenting_opinions: dissent(text),
        response_time_ms,
        fallback_from: None,
    }
}

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Deliberating,
    Verdict,
    Done,
}

pub struct Jury {
    config: JuryConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    /// Successful assessments, in the order they arrived (as published).
    jurors: Vec<JurorAssessment>,
    summary: Option<JurorSummary>,
    /// The jurors' reply schema, built once for the run.
    juror_schema: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

impl Jury {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: JuryConfig = stored_config("jury", config)?;
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let n = config.juror_models.len();
        Ok(Jury {
            config,
            ctx,
            phase: Phase::Deliberating,
            batch: Batch::new("juror", n),
            jurors: Vec::new(),
            summary: None,
            juror_schema: juror_schema(),
            title,
            calls: Calls::default(),
        })
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message)
    }

    /// One juror finished: publish its assessment now, not with the batch.
    fn on_juror(&mut self, reply: CallReply) -> Vec<Effect> {
        let mut out = Vec::new();
        if let Ok(text) = &reply.result {
            // Jurors of one model are told apart (`m #2`); the key says which juror this is.
            let index = reply.key.rsplit(':').next().and_then(|n| n.parse::<usize>().ok());
            let names = member_names(&self.config.juror_models);
            let name = index.and_then(|i| names.get(i)).unwrap_or(&reply.model);
            let a = assess_reply(name, text, reply.response_time_ms as i64, &self.juror_schema);
            let mut parsed = json!({
                "scores": a.scores, "average": a.average, "verdict": a.verdict,
                "recommendations": a.recommendations, "parseSuccess": a.parse_success,
                "unparsed": a.unparsed,
            });
            if let Some(from) = a.read_from {
                parsed["readFrom"] = json!(from);
            }
            out.push(Effect::Store(StageRow {
                stage_type: "deliberation".into(),
                stage_order: 2,
                model: Some(a.model.clone()),
                role: Some("juror".into()),
                content: a.assessment_text.clone(),
                parsed_data: Some(parsed),
                response_time_ms: Some(a.response_time_ms),
            }));
            out.push(Effect::emit("juror_complete", json!({ "data": a })));
            self.jurors.push(a);
        }
        if !self.batch.accept(reply) || !self.batch.complete() {
            return out;
        }
        self.batch.take();
        match self.jurors.len() {
            0 => {
                out.extend(self.fail("All juror evaluations failed.".into()));
                return out;
            }
            1 => {
                out.extend(
                    self.fail("Only 1 juror evaluation succeeded; at least 2 are required.".into()),
                );
                return out;
            }
            _ => {}
        }
        let summary = summarize(self.config.juror_models.len(), &self.jurors);
        out.push(Effect::Store(StageRow::computed("juror_summary", 3, json!(summary))));
        out.push(Effect::emit("all_jurors_complete", json!({ "data": summary })));
        out.push(Effect::emit("verdict_start", json!({})));
        let prompt = foreman_prompt(
            &self.config.content,
            self.config.original_question.as_deref(),
            &self.jurors,
            &summary.vote_tally,
            summary.majority_verdict,
        );
        let material = foreman_material(
            &self.config.content,
            self.config.original_question.as_deref(),
            &self.jurors,
        );
        let foreman = self.config.foreman_model.clone();
        // The report is text a person reads: no schema.
        let spec = CallSpec::new(
            "verdict",
            &foreman,
            vec![ChatMessage::user(prompt)],
            "verdict",
            "foreman",
            self.config.timeout_ms,
        )
        .quoting(material);
        let backup = self.config.foreman_fallback_model.clone();
        out.push(self.calls.solo(spec, 4, backup.as_deref()));
        out.extend(self.title.call(
            &foreman,
            title_prompt(&self.config.content),
            self.config.timeout_ms,
        ));
        self.summary = Some(summary);
        self.phase = Phase::Verdict;
        out
    }

    fn on_verdict(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => return self.fail(role_failed("foreman", &routed, e)),
        };
        let Some(summary) = self.summary.clone() else {
            return self.fail("internal error: no juror summary".into());
        };
        let reply = routed.reply;
        let mut report =
            foreman_report(&reply.model, &text, reply.response_time_ms as i64, &summary);
        report.fallback_from = routed.fallback_from;
        let mut parsed = json!(report);
        if let Some(o) = parsed.as_object_mut() {
            o.remove("reportText");
        }
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "verdict".into(),
                stage_order: 4,
                model: Some(report.model.clone()),
                role: Some("foreman".into()),
                content: text.clone(),
                parsed_data: Some(parsed),
                response_time_ms: Some(report.response_time_ms),
            }),
            Effect::emit("verdict_complete", {
                let mut done = json!({ "data": report });
                self.calls.mark(&mut done);
                done
            }),
        ];
        self.phase = Phase::Done;
        out.extend(self.title.on_answer());
        // The conversation keeps the report without its reasoning (the row keeps it all).
        let answer = answer_text(&text);
        let answer = if answer.trim().is_empty() { text.clone() } else { answer.into_owned() };
        out.push(Effect::Finish { answer });
        out
    }
}

impl Mode for Jury {
    fn start(&mut self) -> Vec<Effect> {
        let presentation = match &self.config.original_question {
            Some(q) => json!({ "content": self.config.content, "originalQuestion": q }),
            None => json!({ "content": self.config.content }),
        };
        let mut out = vec![
            Effect::emit(
                "jury_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id, "mode": "jury" }),
            ),
            Effect::emit("present_start", json!({})),
            Effect::Store(StageRow {
                stage_type: "present".into(),
                stage_order: 1,
                model: None,
                role: None,
                content: self.config.content.clone(),
                parsed_data: Some(json!({ "originalQuestion": self.config.original_question })),
                response_time_ms: None,
            }),
            Effect::emit("present_complete", json!({ "data": presentation })),
            Effect::emit("deliberation_start", json!({})),
        ];
        let (content, question) = (&self.config.content, self.config.original_question.as_deref());
        let asking = Asking::new(self.juror_schema.clone(), |json| {
            evaluation_prompt_as(content, question, json)
        });
        let mut material = vec![("the content under review".to_string(), content.clone())];
        if let Some(q) = question {
            material.push(("the original question".to_string(), q.to_string()));
        }
        for (i, model) in self.config.juror_models.iter().enumerate() {
            let call = asking.call(
                &self.ctx,
                self.batch.key(i),
                model,
                "deliberation",
                "juror",
                self.config.timeout_ms,
            );
            out.push(Effect::Call(call.quoting(material.clone())));
        }
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
            Phase::Deliberating => self.on_juror(routed.reply),
            Phase::Verdict if routed.reply.key == "verdict" => self.on_verdict(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }
}

/// `JuryResult` from stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let presentation = of("present").next().map(|r| {
        let q =
            r.parsed_data.as_ref().and_then(|d| d.get("originalQuestion")).filter(|v| !v.is_null());
        match q {
            Some(q) => json!({ "content": r.content, "originalQuestion": q }),
            None => json!({ "content": r.content }),
        }
    });
    let jurors: Vec<JurorAssessment> = of("deliberation")
        .map(|r| {
            let pd = r.parsed_data.clone().unwrap_or(Value::Null);
            JurorAssessment {
                model: r.model.clone().unwrap_or_default(),
                assessment_text: r.content.clone(),
                scores: serde_json::from_value(pd["scores"].clone()).unwrap_or_default(),
                average: pd["average"].as_f64(),
                verdict: serde_json::from_value(pd["verdict"].clone()).ok(),
                recommendations: serde_json::from_value(pd["recommendations"].clone())
                    .unwrap_or_default(),
                response_time_ms: r.response_time_ms.unwrap_or(0),
                parse_success: pd["parseSuccess"].as_bool().unwrap_or(false),
                unparsed: serde_json::from_value(pd["unparsed"].clone()).unwrap_or(None),
                read_from: serde_json::from_value(pd["readFrom"].clone()).unwrap_or(None),
            }
        })
        .collect();
    let summary: Option<JurorSummary> = of("juror_summary")
        .next()
        .and_then(|r| r.parsed_data.clone())
        .and_then(|v| serde_json::from_value(v).ok());
    let foreman = of("verdict").next().map(|r| {
        let mut f = r.parsed_data.clone().unwrap_or(json!({}));
        f["reportText"] = json!(r.content);
        f
    });
    let mut result = json!({
        "presentation": presentation,
        "jurors": jurors,
        "jurorSummary": summary,
        "foreman": foreman,
        "majorityVerdict": summary.as_ref().map(|s| s.majority_verdict),
        "voteTally": summary.as_ref().map(|s| s.vote_tally),
        "dimensionAverages": summary.as_ref().map(|s| s.dimension_averages.clone()),
    });
    mark_from_rows(&mut result, rows);
    result
}

#[cfg(test)]
#[path = "jury_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A stored verdict (`APPROVE`) as a word (`approve`).
fn verdict_in_words(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_lowercase)
}

/// A one-decimal figure (`7.6`, `8.0`).
fn one_decimal(v: &Value) -> Option<String> {
    v.as_f64().filter(|x| x.is_finite()).map(|x| format!("{x:.1}"))
}

/// The result as the export's report: the panel's verdict and how it was reached, a table of
/// the jurors (their score per dimension, average and verdict, with the panel's averages and
/// ranges), the jurors whose assessment could not be read, and the foreman's report (strengths,
/// weaknesses, recommendations, dissent).
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let summary = &result["jurorSummary"];
    let foreman = &result["foreman"];
    let verdict = verdict_in_words(&foreman["finalVerdict"])
        .or_else(|| verdict_in_words(&summary["majorityVerdict"]));
    if summary.is_object() {
        let t = &summary["voteTally"];
        let tally = format!(
            "{} approve, {} revise, {} reject",
            t["approve"].as_u64().unwrap_or(0),
            t["revise"].as_u64().unwrap_or(0),
            t["reject"].as_u64().unwrap_or(0)
        );
        match (verdict.as_deref(), summary["verdictSource"].as_str()) {
            (Some(v), Some("scores")) => out.push_str(&format!(
                "**Verdict:** {v}, inferred from the average score (no juror's verdict could be read).\n"
            )),
            (Some(v), _) => out.push_str(&format!("**Verdict:** {v} (the jurors' votes: {tally}).\n")),
            (None, _) => out.push_str(
                "**No verdict:** neither the jurors' verdicts nor their scores could be read.\n",
            ),
        }
        if let Some(avg) = one_decimal(&summary["overallAverage"]) {
            out.push_str(&format!("\n**Overall average:** {avg}/10\n"));
        }
        out.push('\n');
    }
    let jurors = result["jurors"].as_array().cloned().unwrap_or_default();
    if !jurors.is_empty() {
        let dims: Vec<String> = DIMENSIONS.iter().map(|d| d.to_lowercase()).collect();
        let mut head = vec!["juror"];
        head.extend(dims.iter().map(String::as_str));
        head.extend(["average", "verdict"]);
        let mut rows: Vec<Vec<String>> = jurors
            .iter()
            .map(|j| {
                let mut row = vec![j["model"].as_str().unwrap_or("").to_string()];
                for d in &dims {
                    let score = &j["scores"][d];
                    row.push(score.as_i64().map_or("unread".into(), |s| s.to_string()));
                }
                row.push(one_decimal(&j["average"]).unwrap_or_default());
                row.push(verdict_in_words(&j["verdict"]).unwrap_or("unread".into()));
                row
            })
            .collect();
        if summary.is_object() {
            let mut avg = vec!["panel average".to_string()];
            let mut range = vec!["range".to_string()];
            for key in &dims {
                avg.push(one_decimal(&summary["dimensionAverages"][key]).unwrap_or_default());
                let r = &summary["dimensionRanges"][key];
                range.push(match (r["min"].as_i64(), r["max"].as_i64()) {
                    (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
                    (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
                    _ => String::new(),
                });
            }
            avg.push(one_decimal(&summary["overallAverage"]).unwrap_or_default());
            avg.push(verdict.clone().unwrap_or_default());
            range.extend([String::new(), String::new()]);
            rows.push(avg);
            rows.push(range);
        }
        out.push_str(&table(&head, &rows, &[1, 2, 3, 4, 5, 6]));
        let unread: Vec<String> = jurors
            .iter()
            .filter(|j| j["parseSuccess"] != true || j["verdict"].is_null())
            .map(|j| {
                let model = j["model"].as_str().unwrap_or("a juror");
                let what = match (j["parseSuccess"] == true, j["verdict"].is_null()) {
                    (false, true) => "neither scores nor a verdict could be read",
                    (false, false) => "no scores could be read",
                    _ => "no verdict could be read",
                };
                let why = serde_json::from_value::<Unparsed>(j["unparsed"].clone())
                    .map_or(String::new(), |u| format!("; it {}", u.describe()));
                format!("- {model}: {what}{why}\n")
            })
            .collect();
        if !unread.is_empty() {
            out.push_str("\n**Could not be read in full:**\n\n");
            out.push_str(&unread.concat());
        }
        if let (Some(asked), Some(done)) =
            (summary["jurorCount"].as_u64(), summary["successfulJurors"].as_u64())
        {
            if done < asked {
                out.push_str(&format!(
                    "\n{} of {} answered.\n",
                    done,
                    count(asked, "juror", "jurors")
                ));
            }
        }
        out.push('\n');
    }
    if let Some(model) = foreman["model"].as_str().filter(|m| !m.is_empty()) {
        let standing_in = foreman["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        let said = match verdict_in_words(&foreman["finalVerdict"]) {
            Some(v) => format!(": final verdict {v}"),
            None => String::new(),
        };
        out.push_str(&format!("**Foreman's report** by {model}{standing_in}{said}.\n"));
        for (key, lead) in [
            ("keyStrengths", "Key strengths"),
            ("keyWeaknesses", "Key weaknesses"),
            ("recommendations", "Recommendations"),
            ("dissentingOpinions", "Dissenting opinions"),
        ] {
            let items: Vec<String> = foreman[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
                        .filter(|t| !t.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            if !items.is_empty() {
                out.push_str(&format!("\n{lead}:\n\n"));
                for i in items {
                    out.push_str(&format!("- {i}\n"));
                }
            }
        }
    }
    out
}
