//! Red Team mode (specs/06-red-team.md): the generator lays the material out in numbered
//! sections; then, round after round, the attacker reports severity-rated findings and the
//! generator defends (accepting or rebutting each) and revises the content; the synthesizer
//! writes the hardened output with an audit of every finding.
//!
//! Rounds are strictly sequential and each step is stored the moment it completes, so a
//! cancelled or interrupted run keeps (and a resumed one replays) every finished step. The
//! attacker's and defender's replies are read only where they state their findings and
//! verdicts; what cannot be read is reported as such (`parseSuccess: false`,
//! `severityDefaulted`, `verdictDefaulted`, `revisedContentFound: false`), never guessed.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, role_failed, title_prompt, Calls, Routed, SplitMix64,
    TitleTracker, TITLE_KEY,
};
use super::reading::{answer_text, readable};
use super::reading::{bare, re, unbold};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text, MAX_CONTENT_CHARS};
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, Fallbacks, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

const SIM_GENERATOR: &str = "sim/alpha";
const SIM_ATTACKER: &str = "sim/beta";
const SEED_GENERATOR: &str = "anthropic/claude-opus-4-6";
const SEED_ATTACKER: &str = "openai/o3";
const GLOBAL_TIMER: &str = "global";
const SYNTHESIS_ORDER: i32 = 99;

/// Red Team's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RedTeamRequest {
    /// The material to attack (code, a design, a policy). Without it the question itself is
    /// the material.
    pub content: Option<Text<MAX_CONTENT_CHARS>>,
    /// Lays the material out in sections, then defends it and revises it each round.
    pub generator_model: Option<ModelId>,
    /// Looks for weaknesses each round; must differ from the generator.
    pub attacker_model: Option<ModelId>,
    /// Writes the hardened output and the audit (default: the generator).
    pub synthesizer_model: Option<ModelId>,
    /// Attack-and-defend rounds: 1 to 3 (default 2).
    #[schemars(range(min = 1, max = 3))]
    pub rounds: Option<i64>,
    /// The material is cut to this many characters: 1 000 to 50 000 (default 25 000).
    #[schemars(range(min = 1000, max = 50000))]
    pub max_input_length: Option<i64>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// When this many milliseconds have passed, the call in flight finishes and the synthesis
    /// follows (default 600 000).
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

/// The stored configuration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RedTeamConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub generator_model: String,
    pub attacker_model: String,
    pub synthesizer_model: String,
    pub rounds: u32,
    pub max_input_length: usize,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
    /// The server's backup for the synthesizer (`[fallback] chairman`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: RedTeamRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let content = match &cfg.content {
        None => None,
        Some(c) => Some(
            c.trimmed()
                .ok_or_else(|| FieldError::new("modeConfig.content", "must not be empty"))?,
        ),
    };
    let generator_model =
        request::model(cfg.generator_model.as_ref(), "modeConfig.generatorModel")?.unwrap_or_else(
            || (if defaults.offline { SIM_GENERATOR } else { SEED_GENERATOR }).to_string(),
        );
    let attacker_model = request::model(cfg.attacker_model.as_ref(), "modeConfig.attackerModel")?
        .unwrap_or_else(|| {
            (if defaults.offline { SIM_ATTACKER } else { SEED_ATTACKER }).to_string()
        });
    if attacker_model == generator_model {
        return Err(FieldError::new(
            "modeConfig.attackerModel",
            "The attacker must be a different model from the generator",
        ));
    }
    let synthesizer_model =
        request::model(cfg.synthesizer_model.as_ref(), "modeConfig.synthesizerModel")?
            .unwrap_or_else(|| generator_model.clone());
    let rounds = request::whole(cfg.rounds, "modeConfig.rounds", 1..=3, 2)?;
    let max_input_length =
        request::whole(cfg.max_input_length, "modeConfig.maxInputLength", 1000..=50_000, 25_000)?;
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
    let models = request::distinct(&[], &[&generator_model, &attacker_model, &synthesizer_model]);
    let chairman_fallback_model =
        Fallbacks::for_role(&defaults.fallback.chairman, &synthesizer_model);
    let config = RedTeamConfig {
        content,
        generator_model,
        attacker_model,
        synthesizer_model,
        rounds: rounds as u32,
        max_input_length: max_input_length as usize,
        timeout_ms,
        global_timeout_ms,
        chairman_fallback_model,
    };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Red Team in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "red_team",
    label: "Red Team",
    description: "One model structures and defends the material, another attacks it for 1-3 rounds of severity-rated findings; a synthesis hardens it and audits every finding.",
    multi_turn: false,
    question: Question { label: "What to red-team", required: Some("Question is required") },
    roles: &[
        Role {
            id: "generator",
            label: "Generator (structures and defends)",
            field: Some("generatorModel"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_GENERATOR],
            default: &[SEED_GENERATOR],
        },
        Role {
            id: "attacker",
            label: "Attacker",
            field: Some("attackerModel"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_ATTACKER],
            default: &[SEED_ATTACKER],
        },
        Role {
            id: "synthesizer",
            label: "Synthesizer (default: the generator)",
            field: Some("synthesizerModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[],
            default: &[],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<RedTeamRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(RedTeam::new(config, ctx)?)),
    load_result,
    outcome,
    stages: &[("generate", "laying out the material"), ("attack", "the attack"), ("defend", "the defence"), ("synthesize", "the hardened output")],
    report: Some(report),
    example: || {
        json!({ "mode": "red_team", "question": "Review this login handler for security flaws.",
                "modeConfig": { "content": "fn login(user: &str, pass: &str) -> bool {\n    let q = format!(\"SELECT * FROM users WHERE name='{user}' AND pass='{pass}'\");\n    db::query(&q).is_some()\n}", "rounds": 1 } })
    },
    sim: Some(sim_answer),
};

// ---- the material --------------------------------------------------------------------------

/// What the run red-teams: `content`, else the question, cut to `maxInputLength` characters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Material {
    /// `content` or `question`.
    pub source: String,
    pub text: String,
    pub original_length: usize,
    pub truncated: bool,
    /// Said to the generator when the material was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub fn material(content: Option<&str>, question: &str, max: usize) -> Material {
    let (source, full) = match content {
        Some(c) => ("content", c),
        None => ("question", question),
    };
    let original_length = full.chars().count();
    let truncated = original_length > max;
    let text: String = if truncated { full.chars().take(max).collect() } else { full.into() };
    let note = truncated.then(|| {
        format!("[Note: the material was cut to its first {max} of {original_length} characters.]")
    });
    Material { source: source.into(), text, original_length, truncated, note }
}

// ---- reading replies -----------------------------------------------------------------------

pub const SEVERITIES: [&str; 4] = ["CRITICAL", "HIGH", "MEDIUM", "LOW"];

/// One finding of an attack report, renumbered 1..k in report order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub number: usize,
    /// The number the attacker gave it.
    pub reported_number: u64,
    pub title: String,
    pub severity: String,
    pub severity_defaulted: bool,
    pub location: Option<String>,
    pub vulnerability: Option<String>,
    pub exploit_scenario: Option<String>,
}

/// An attack report as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttackReading {
    pub findings: Vec<Finding>,
    pub reported_summary: Option<String>,
    pub overall_risk: Option<String>,
    pub no_flaws: bool,
    pub parse_success: bool,
}

/// `label:` at the start of a bare line (markup allowed around the label); the value after it.
fn field<'a>(line: &'a str, labels: &Regex) -> Option<(String, &'a str)> {
    let c = labels.captures(line)?;
    let name = c.get(1)?.as_str().to_lowercase();
    let end = c.get(0)?.end();
    Some((name, &line[end..]))
}

fn finding_heading(line: &str) -> Option<(u64, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"(?i)^finding\s*#?\s*(\d{1,6})\s*(?:\*\*|__)?\s*[:.\-–—]\s*(.*)$")
        .captures(line)?;
    Some((c[1].parse().ok()?, unbold(&c[2])))
}

fn attack_field(line: &str) -> Option<(String, &str)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    field(
        line,
        re(
            &RE,
            r"(?i)^(severity|location|vulnerability|exploit\s+scenario)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?",
        ),
    )
}

fn is_summary(line: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"(?i)^summary\s*(?:\*\*|__)?\s*:").is_match(line)
}

/// The most severe level a value names; None when it names none.
pub fn severity_of(value: &str) -> Option<&'static str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let found: Vec<&str> = re(&RE, r"(?i)\b(critical|high|medium|low)\b")
        .find_iter(value)
        .map(|m| m.as_str())
        .collect();
    SEVERITIES.into_iter().find(|s| found.iter().any(|f| f.eq_ignore_ascii_case(s)))
}

/// A heading and the `Label: value` fields under it (names lower-case, single-spaced).
struct FieldBlock<H> {
    head: H,
    fields: Vec<(String, String)>,
}

impl<H> FieldBlock<H> {
    fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|(n, _)| n == name)
    }

    /// A field's value, trimmed, when not empty.
    fn get(&self, name: &str) -> Option<String> {
        let v = self.fields.iter().find(|(n, _)| n == name)?.1.trim();
        (!v.is_empty()).then(|| v.to_string())
    }
}

/// Blocks from a `heading` line to the next heading or an `ends` line. Within a block a
/// field's first occurrence wins; the fields in `multi` span lines until the next field.
fn read_blocks<H>(
    lines: &[&str],
    heading: impl Fn(&str) -> Option<H>,
    field: impl Fn(&str) -> Option<(String, &str)>,
    ends: impl Fn(&str) -> bool,
    multi: &[&str],
) -> Vec<FieldBlock<H>> {
    let mut blocks: Vec<FieldBlock<H>> = Vec::new();
    let mut open = false;
    // The index of the multi-line field being read in the last block.
    let mut spanning: Option<usize> = None;
    for raw in lines {
        let line = bare(raw);
        if let Some(head) = heading(line) {
            blocks.push(FieldBlock { head, fields: Vec::new() });
            (open, spanning) = (true, None);
            continue;
        }
        if ends(line) {
            (open, spanning) = (false, None);
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = field(line) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            spanning = None;
            if !b.has(&name) {
                if multi.contains(&name.as_str()) {
                    spanning = Some(b.fields.len());
                }
                b.fields.push((name, unbold(value)));
            }
            continue;
        }
        if let Some(v) = spanning.and_then(|i| b.fields.get_mut(i)) {
            if !v.1.is_empty() {
                v.1.push('\n');
            }
            v.1.push_str(raw.trim_end());
        }
    }
    blocks
}

/// Reads an attack report (its answer part: a reasoning trace is never read).
pub fn read_attack(reply: &str) -> AttackReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    static NONE: OnceLock<Regex> = OnceLock::new();
    let none_re = re(&NONE, r"(?i)^findings\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*none\b");
    let none_stated = lines.iter().any(|l| none_re.is_match(bare(l)));
    let summary_at = lines.iter().position(|l| is_summary(bare(l)));
    let blocks = read_blocks(
        &lines,
        finding_heading,
        attack_field,
        is_summary,
        &["vulnerability", "exploit scenario"],
    );
    let findings: Vec<Finding> = blocks
        .into_iter()
        .filter(|b| b.has("severity") || b.has("location") || b.has("vulnerability"))
        .enumerate()
        .map(|(i, b)| {
            let named = b.get("severity").as_deref().and_then(severity_of);
            Finding {
                number: i + 1,
                reported_number: b.head.0,
                title: b.head.1.clone(),
                severity: named.unwrap_or("MEDIUM").to_string(),
                severity_defaulted: named.is_none(),
                location: b.get("location"),
                vulnerability: b.get("vulnerability"),
                exploit_scenario: b.get("exploit scenario"),
            }
        })
        .collect();
    let reported_summary = summary_at.map(|i| lines[i..].join("\n").trim().to_string());
    static RISK: OnceLock<Regex> = OnceLock::new();
    let risk_re = re(&RISK, r"(?i)^overall\s+risk\s*(?:\*\*|__)?\s*:\s*(.*)$");
    let overall_risk = lines
        .iter()
        .rev()
        .find_map(|l| risk_re.captures(bare(l)).map(|c| unbold(&c[1])))
        .filter(|r| !r.is_empty());
    let no_flaws = findings.is_empty() && none_stated;
    AttackReading {
        parse_success: !findings.is_empty() || no_flaws,
        findings,
        reported_summary,
        overall_risk,
        no_flaws,
    }
}

/// Counts of findings by severity (every level present, in order of severity).
pub fn severity_counts<'a>(severities: impl Iterator<Item = &'a str>) -> Value {
    let mut counts = serde_json::Map::new();
    for s in SEVERITIES {
        counts.insert(s.into(), json!(0));
    }
    for s in severities {
        if let Some(n) = counts.get_mut(s) {
            *n = json!(n.as_u64().unwrap_or(0) + 1);
        }
    }
    Value::Object(counts)
}

// ---- structured replies --------------------------------------------------------------------

/// The attack's reply schema's name (the sim answers it by this name).
pub const ATTACK_SCHEMA: &str = "red_team_attack";
/// The defense's reply schema's name.
pub const DEFENSE_SCHEMA: &str = "red_team_defense";
/// The most findings an attack may list as JSON: a grammar-bound small model stops there
/// instead of looping, and a real report rarely holds more.
pub const MAX_JSON_FINDINGS: usize = 12;
/// Bounds of the free-text fields (a small model looping inside a string still ends).
const TITLE_CHARS: usize = 120;
const LOCATION_CHARS: usize = 200;
const PROSE_CHARS: usize = 800;
const SUMMARY_CHARS: usize = 400;

/// The verdicts a defense may give a finding.
pub const VERDICTS: [&str; 2] = ["ACCEPT", "REBUT"];

/// The attack as JSON: the reasoning, then every finding with its severity (one of the four
/// levels) and fields, then the overall risk. An empty list states that nothing was found
/// (the text's `FINDINGS: NONE`).
pub fn attack_schema() -> Arc<ReplySchema> {
    let finding = schema::object([
        ("title", schema::described(schema::text(TITLE_CHARS), "a short name for the weakness")),
        ("severity", schema::described(schema::one_of(&SEVERITIES), "how severe the weakness is")),
        (
            "location",
            schema::described(schema::text(LOCATION_CHARS), "where it is (a section number)"),
        ),
        ("vulnerability", schema::described(schema::text(PROSE_CHARS), "what is wrong")),
        (
            "exploitScenario",
            schema::described(schema::text(PROSE_CHARS), "how an attacker exploits it"),
        ),
    ]);
    ReplySchema::new(
        ATTACK_SCHEMA,
        schema::reasoned([
            (
                "findings",
                schema::described(
                    schema::list(finding, 0, MAX_JSON_FINDINGS),
                    "every weakness you found, most severe first; an empty list if you found none",
                ),
            ),
            (
                "overallRisk",
                schema::described(schema::text(SUMMARY_CHARS), "the overall risk, in a sentence"),
            ),
        ]),
    )
}

/// The longest revised content a defense's JSON may carry: room to grow the content it
/// revises (twice its length, at least 4,000 characters), and still a bound.
pub fn revised_max_chars(current_chars: usize) -> usize {
    current_chars.saturating_mul(2).max(4_000)
}

/// The defense as JSON against `findings` findings, revising content of `current_chars`
/// characters: the reasoning, one response per finding (its number 1..k, ACCEPT or REBUT, why,
/// and the change), a summary, and the complete revised content. Without findings read one by
/// one (the defender gets the raw report), there are no responses to give.
pub fn defense_schema(findings: usize, current_chars: usize) -> Arc<ReplySchema> {
    let mut fields = Vec::new();
    if findings > 0 {
        let response = schema::object([
            (
                "finding",
                schema::described(
                    schema::integer(1, findings as i64),
                    "the number of the finding you answer",
                ),
            ),
            (
                "verdict",
                schema::described(
                    schema::one_of(&VERDICTS),
                    "ACCEPT if the finding is valid and you fix it, REBUT if it is not",
                ),
            ),
            ("reasoning", schema::described(schema::text(PROSE_CHARS), "why")),
            (
                "revision",
                schema::described(
                    schema::text(PROSE_CHARS),
                    "the change you make, or an empty string for a rebuttal",
                ),
            ),
        ]);
        fields.push((
            "responses",
            schema::described(
                schema::list(response, findings, findings),
                "one response to every finding, in the order of the findings",
            ),
        ));
    }
    fields.push((
        "summary",
        schema::described(schema::text(SUMMARY_CHARS), "a short summary of your defense"),
    ));
    fields.push((
        "revisedContent",
        schema::described(
            schema::text(revised_max_chars(current_chars)),
            "the complete revised content, all of it, with the accepted fixes applied",
        ),
    ));
    ReplySchema::new(DEFENSE_SCHEMA, schema::reasoned(fields))
}

/// A JSON string field, trimmed, when not empty.
fn json_text(v: &Value, key: &str) -> Option<String> {
    let t = v.get(key)?.as_str()?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Reads an attack report: from its JSON when it fits `schema` (its findings in order,
/// numbered 1..k; none listed is no flaws), else by its text ([`read_attack`]). Says where
/// it was read from; None when nothing was read (`parseSuccess: false`).
pub fn read_attack_reply(reply: &str, schema: &ReplySchema) -> (AttackReading, Option<ReadFrom>) {
    let from_json = schema.read(reply).and_then(|v| {
        let findings = v
            .get("findings")?
            .as_array()?
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let severity = f.get("severity")?.as_str()?;
                let severity = SEVERITIES.into_iter().find(|s| *s == severity)?;
                Some(Finding {
                    number: i + 1,
                    reported_number: i as u64 + 1,
                    title: json_text(f, "title").unwrap_or_default(),
                    severity: severity.to_string(),
                    severity_defaulted: false,
                    location: json_text(f, "location"),
                    vulnerability: json_text(f, "vulnerability"),
                    exploit_scenario: json_text(f, "exploitScenario"),
                })
            })
            .collect::<Option<Vec<Finding>>>()?;
        let no_flaws = findings.is_empty();
        Some(AttackReading {
            findings,
            reported_summary: None,
            overall_risk: json_text(&v, "overallRisk"),
            no_flaws,
            parse_success: true,
        })
    });
    match from_json {
        Some(r) => (r, Some(ReadFrom::Json)),
        None => {
            let r = read_attack(reply);
            let from = r.parse_success.then_some(ReadFrom::Text);
            (r, from)
        }
    }
}

/// A revision that says there is none (`N/A`, `none`, `-`, empty).
fn no_revision(r: &str) -> bool {
    matches!(r.to_lowercase().trim_end_matches('.'), "" | "n/a" | "na" | "none" | "-" | "—")
}

/// Reads a defense against `findings`: from its JSON when it fits `schema` (each finding
/// answered by the first response naming its number, as in text; the revised content), else
/// by its text ([`read_defense`]). Says where it was read from; None when it answered no
/// finding and gave no revised content.
pub fn read_defense_reply(
    reply: &str,
    findings: &[Finding],
    schema: &ReplySchema,
) -> (DefenseReading, Option<ReadFrom>) {
    let from_json = schema.read(reply).map(|v| {
        let given: Vec<&Value> =
            v.get("responses").and_then(Value::as_array).into_iter().flatten().collect();
        let responses = findings
            .iter()
            .map(|f| {
                let base = Response {
                    finding: f.number,
                    title: f.title.clone(),
                    severity: f.severity.clone(),
                    verdict: "UNADDRESSED".into(),
                    verdict_defaulted: false,
                    reasoning: None,
                    revision: None,
                };
                let answer = given.iter().find(|r| r["finding"].as_u64() == Some(f.number as u64));
                let Some(a) = answer else { return base };
                let verdict =
                    a["verdict"].as_str().and_then(|v| VERDICTS.into_iter().find(|x| *x == v));
                Response {
                    verdict: verdict.unwrap_or("REBUT").into(),
                    verdict_defaulted: verdict.is_none(),
                    reasoning: json_text(a, "reasoning"),
                    revision: json_text(a, "revision").filter(|r| !no_revision(r)),
                    ..base
                }
            })
            .collect();
        DefenseReading { responses, revised_content: json_text(&v, "revisedContent") }
    });
    match from_json {
        Some(r) => (r, Some(ReadFrom::Json)),
        None => {
            let r = read_defense(reply, findings);
            let answered = r.responses.iter().any(|x| x.verdict != "UNADDRESSED");
            let from = (answered || r.revised_content.is_some()).then_some(ReadFrom::Text);
            (r, from)
        }
    }
}

/// The defender's answer to one finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// The finding's number (1..k).
    pub finding: usize,
    pub title: String,
    pub severity: String,
    /// ACCEPT, REBUT or UNADDRESSED (no response matched the finding).
    pub verdict: String,
    pub verdict_defaulted: bool,
    pub reasoning: Option<String>,
    pub revision: Option<String>,
}

/// A defense as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefenseReading {
    /// One per finding, in finding order.
    pub responses: Vec<Response>,
    /// The complete revised content, when the reply gave one.
    pub revised_content: Option<String>,
}

fn response_heading(line: &str) -> Option<(Option<u64>, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(
        &RE,
        r"(?i)^response\s+to\s+finding\s*#?\s*(\d{1,6})?\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$",
    )
    .captures(line)?;
    let number = c.get(1).and_then(|n| n.as_str().parse().ok());
    let title = c.get(2).map(|t| unbold(t.as_str())).unwrap_or_default();
    if number.is_none() && title.is_empty() {
        return None;
    }
    Some((number, title))
}

fn defense_field(line: &str) -> Option<(String, &str)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    field(line, re(&RE, r"(?i)^(verdict|reasoning|revision)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?"))
}

fn revised_marker(line: &str) -> Option<usize> {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"(?i)^revised\s+content\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?").find(line).map(|m| m.end())
}

fn is_defense_summary(line: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    re(&RE, r"(?i)^defen[cs]e\s+summary\s*(?:\*\*|__)?\s*:").is_match(line)
}

/// ACCEPT or REBUT, whichever the value names first.
fn verdict_of(value: &str) -> Option<&'static str> {
    let v = value.to_uppercase();
    match (v.find("ACCEPT"), v.find("REBUT")) {
        (Some(a), Some(r)) => Some(if a < r { "ACCEPT" } else { "REBUT" }),
        (Some(_), None) => Some("ACCEPT"),
        (None, Some(_)) => Some("REBUT"),
        (None, None) => None,
    }
}

/// Reads a defense against `findings` (its answer part).
pub fn read_defense(reply: &str, findings: &[Finding]) -> DefenseReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    // The revised content: everything after the marker on the last marker line.
    let mut revised_content = None;
    let mut end = lines.len();
    if let Some((i, at)) = lines.iter().enumerate().rev().find_map(|(i, l)| {
        let b = bare(l);
        revised_marker(b).map(|m| (i, l.len() - b.len() + m))
    }) {
        let mut rest = lines[i][at..].to_string();
        for l in &lines[i + 1..] {
            rest.push('\n');
            rest.push_str(l);
        }
        let rest = rest.trim();
        revised_content = (!rest.is_empty()).then(|| rest.to_string());
        end = i;
    }
    let answered = read_blocks(
        &lines[..end],
        response_heading,
        defense_field,
        is_defense_summary,
        &["reasoning", "revision"],
    );
    // Each finding takes the first response naming its number, else the first with its title
    // (a response naming another finding's number is that finding's). Queues by number and by
    // title keep this linear, however many blocks an adversarial reply holds.
    use std::collections::{HashMap, HashSet, VecDeque};
    let numbers: HashSet<u64> = findings.iter().map(|f| f.number as u64).collect();
    let mut by_number: HashMap<u64, VecDeque<usize>> = HashMap::new();
    let mut by_title: HashMap<String, VecDeque<usize>> = HashMap::new();
    for (j, a) in answered.iter().enumerate() {
        match a.head.0.filter(|n| numbers.contains(n)) {
            Some(n) => by_number.entry(n).or_default().push_back(j),
            None => by_title.entry(a.head.1.to_lowercase()).or_default().push_back(j),
        }
    }
    let mut matched: Vec<Option<usize>> = findings
        .iter()
        .map(|f| by_number.get_mut(&(f.number as u64)).and_then(VecDeque::pop_front))
        .collect();
    for (f, slot) in findings.iter().zip(matched.iter_mut()) {
        let title = f.title.trim().to_lowercase();
        if slot.is_none() && !title.is_empty() {
            *slot = by_title.get_mut(&title).and_then(VecDeque::pop_front);
        }
    }
    let responses = findings
        .iter()
        .zip(matched)
        .map(|(f, m)| {
            let base = Response {
                finding: f.number,
                title: f.title.clone(),
                severity: f.severity.clone(),
                verdict: "UNADDRESSED".into(),
                verdict_defaulted: false,
                reasoning: None,
                revision: None,
            };
            let Some(j) = m else { return base };
            let a = &answered[j];
            let verdict = a.get("verdict").as_deref().and_then(verdict_of);
            let revision = a.get("revision").filter(|r| !no_revision(r));
            Response {
                verdict: verdict.unwrap_or("REBUT").into(),
                verdict_defaulted: verdict.is_none(),
                reasoning: a.get("reasoning"),
                revision,
                ..base
            }
        })
        .collect();
    DefenseReading { responses, revised_content }
}

/// A synthesis as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisReading {
    pub hardened_output: String,
    pub audit_summary: Option<String>,
    pub hardening_confidence: Option<String>,
}

fn heading_named(line: &str, name: &str) -> bool {
    let t = line.trim();
    if !t.starts_with('#') && !t.starts_with("**") && !t.starts_with("__") {
        return false;
    }
    let inner = bare(t).trim_end().trim_end_matches(['*', '_', ':']).trim();
    inner.eq_ignore_ascii_case(name)
}

/// Reads the synthesis (its answer part).
pub fn read_synthesis(reply: &str) -> SynthesisReading {
    let text = answer_text(reply);
    let lines: Vec<&str> = text.lines().collect();
    let hardened = lines.iter().position(|l| heading_named(l, "hardened output"));
    let audit = lines.iter().position(|l| heading_named(l, "vulnerability audit summary"));
    let join = |from: usize, to: usize| lines[from..to].join("\n").trim().to_string();
    let hardened_output = match (hardened, audit) {
        (Some(h), Some(a)) if a > h => join(h + 1, a),
        (Some(h), _) => join(h + 1, lines.len()),
        (None, Some(a)) if a > 0 => join(0, a),
        _ => text.trim().to_string(),
    };
    let audit_summary = audit.map(|a| join(a + 1, lines.len())).filter(|s| !s.is_empty());
    static RE: OnceLock<Regex> = OnceLock::new();
    let conf = re(&RE, r"(?i)^hardening\s+confidence\s*(?:\*\*|__)?\s*:\s*(.*)$");
    let hardening_confidence = lines
        .iter()
        .rev()
        .find_map(|l| conf.captures(bare(l)).map(|c| unbold(&c[1])))
        .and_then(|v| {
            let word = v.split(|c: char| !c.is_alphabetic()).next().unwrap_or("").to_lowercase();
            match word.as_str() {
                "high" => Some("High".to_string()),
                "medium" => Some("Medium".to_string()),
                "low" => Some("Low".to_string()),
                _ => None,
            }
        });
    SynthesisReading { hardened_output, audit_summary, hardening_confidence }
}

// ---- prompts -------------------------------------------------------------------------------

pub const GENERATE_HEAD: &str = "You are the GENERATOR in a red-team exercise.";
pub const ATTACK_HEAD: &str = "You are the ATTACKER in a red-team exercise.";
pub const DEFEND_HEAD: &str = "You are the DEFENDER in a red-team exercise.";
pub const SYNTHESIZE_HEAD: &str = "You are the SYNTHESIZER of a red-team exercise.";
/// The content a prompt carries sits between these lines (the sim reads it back).
pub const CONTENT_START: &str = "=== CONTENT ===";
pub const CONTENT_END: &str = "=== END CONTENT ===";

fn enclosed(text: &str) -> String {
    format!("{CONTENT_START}\n{text}\n{CONTENT_END}")
}

pub fn generate_prompt(question: &str, m: &Material) -> String {
    let note = m.note.as_deref().map(|n| format!("\n{n}\n")).unwrap_or_default();
    format!(
        "{GENERATE_HEAD}\n\nRequest: {question}\n\nLay the material below out in numbered sections \
         (`## 1. …`, `## 2. …`) so that findings can point at them. Keep code whole, in fenced \
         blocks. Do not add, drop or change any substance: only structure it.\n{note}\n{}",
        enclosed(&m.text)
    )
}

fn finding_text(f: &Finding) -> String {
    let mut s = format!("FINDING {}: {}\nSeverity: {}\n", f.number, f.title, f.severity);
    for (label, v) in [
        ("Location", &f.location),
        ("Vulnerability", &f.vulnerability),
        ("Exploit Scenario", &f.exploit_scenario),
    ] {
        if let Some(v) = v {
            s.push_str(&format!("{label}: {v}\n"));
        }
    }
    s
}

/// The previous round rebuilt per finding: what it claimed and how it was answered.
fn previous_round_text(findings: &[Finding], responses: &[Response]) -> String {
    let mut s = String::new();
    for f in findings {
        s.push_str(&finding_text(f));
        match responses.iter().find(|r| r.finding == f.number) {
            Some(r) => {
                s.push_str(&format!("Defense verdict: {}\n", r.verdict));
                if let Some(why) = &r.reasoning {
                    s.push_str(&format!("Defense reasoning: {why}\n"));
                }
                if let Some(rev) = &r.revision {
                    s.push_str(&format!("Defense revision: {rev}\n"));
                }
            }
            None => s.push_str("Defense verdict: UNADDRESSED\n"),
        }
        s.push('\n');
    }
    s
}

pub fn attack_prompt(question: &str, round: u32, content: &str, previous: Option<&str>) -> String {
    attack_prompt_as(question, round, content, previous, None)
}

/// The attack prompt asking for the spec's finding blocks, or, given the attack's schema, for
/// its JSON (the same instructions otherwise).
pub fn attack_prompt_as(
    question: &str,
    round: u32,
    content: &str,
    previous: Option<&str>,
    schema: Option<&ReplySchema>,
) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Report each finding exactly so:\n\nFINDING <n>: <title>\n\
                 Severity: CRITICAL|HIGH|MEDIUM|LOW\nLocation: <where>\n\
                 Vulnerability: <what is wrong>\nExploit Scenario: <how it is exploited>\n\n\
                 Then:\nSUMMARY:\nCritical: n, High: n, Medium: n, Low: n\n\
                 Overall risk: <text>\n\nIf you find nothing, reply with the line FINDINGS: NONE"
            .to_string(),
    };
    let earlier = match previous {
        Some(p) => format!(
            "\n\nThis is round {round}. The previous round's findings and the defense:\n\n{p}\n\
             Look for NEW weaknesses, or explain why a defense falls short. Do not repeat \
             findings that were settled."
        ),
        None => String::new(),
    };
    format!(
        "{ATTACK_HEAD}\n\nRequest: {question}\n\nFind the weaknesses of the content below: flaws, \
         vulnerabilities, wrong assumptions, missing cases.{earlier}\n\n{}\n\n{format}",
        enclosed(content)
    )
}

pub fn defend_prompt(question: &str, content: &str, findings: &[Finding], raw: &str) -> String {
    defend_prompt_as(question, content, findings, raw, None)
}

/// What the defend prompt lists: the findings one by one, else the raw report.
fn listed_findings(findings: &[Finding], raw: &str) -> String {
    if findings.is_empty() {
        format!("The attacker's report (its findings could not be read one by one):\n\n{raw}")
    } else {
        findings.iter().map(finding_text).collect::<Vec<_>>().join("\n")
    }
}

/// The defend prompt asking for the spec's response blocks and revised content, or, given
/// the defense's schema, for its JSON (the same instructions otherwise).
pub fn defend_prompt_as(
    question: &str,
    content: &str,
    findings: &[Finding],
    raw: &str,
    schema: Option<&ReplySchema>,
) -> String {
    let listed = listed_findings(findings, raw);
    let format = match schema {
        Some(s) => format!(
            "Answer every finding, then give the complete revised content (all of it, with the \
             accepted fixes applied).\n\n{}",
            s.instruction()
        ),
        None => "Answer every finding exactly so:\n\nRESPONSE TO FINDING <n>: <title>\n\
                 Verdict: ACCEPT|REBUT\nReasoning: <why>\nRevision: <the change, or N/A for a \
                 rebuttal>\n\nThen a line DEFENSE SUMMARY: with a short summary, and last a line \
                 REVISED CONTENT: followed by the complete revised content (all of it, with the \
                 accepted fixes applied)."
            .to_string(),
    };
    format!(
        "{DEFEND_HEAD}\n\nRequest: {question}\n\nYour content:\n\n{}\n\nThe attacker's findings:\n\n\
         {listed}\n\n{format}",
        enclosed(content)
    )
}

pub fn synthesize_prompt(
    question: &str,
    structured: &str,
    final_content: &str,
    history: &str,
    audit: &str,
) -> String {
    format!(
        "{SYNTHESIZE_HEAD}\n\nRequest: {question}\n\nThe structured original:\n\n{structured}\n\n\
         The final revision:\n\n{}\n\nEvery round's findings and responses:\n\n{history}\n\n\
         Audit table (title | severity | verdict | round):\n{audit}\n\n\
         Write `## Hardened Output`: the final content with the accepted fixes applied, valid \
         rebuttals respected and weak defenses strengthened. Then `## Vulnerability Audit Summary`: \
         every finding and what became of it, ending with the lines `Remaining Risks: <text>` and \
         `Hardening Confidence: High|Medium|Low`.",
        enclosed(final_content)
    )
}

// ---- the state machine ---------------------------------------------------------------------

/// One round as it went out live (`attack_complete`'s and `defend_complete`'s data).
#[derive(Debug, Clone, PartialEq)]
struct Round {
    round: u32,
    findings: Vec<Finding>,
    attack: Value,
    defense: Option<Value>,
    responses: Vec<Response>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Generating,
    Attacking(u32),
    Defending(u32),
    Synthesizing,
    Done,
}

pub struct RedTeam {
    config: RedTeamConfig,
    ctx: RunContext,
    material: Material,
    phase: Phase,
    structured: String,
    current: String,
    rounds: Vec<Round>,
    stop_reason: Option<&'static str>,
    deadline_passed: bool,
    /// The attack's reply schema (the same every round).
    attack_schema: Arc<ReplySchema>,
    /// The defense's reply schema of the round being defended (it counts that round's
    /// findings).
    defense_schema: Option<Arc<ReplySchema>>,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    let n = |p: &str| stage.strip_prefix(p).and_then(|n| n.parse::<i32>().ok());
    match (n("attack_round_"), n("defend_round_")) {
        (Some(r), _) => 2 * r - 1,
        (_, Some(r)) => 2 * r,
        _ if stage == "synthesis" => SYNTHESIS_ORDER,
        _ => 0,
    }
}

impl RedTeam {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: RedTeamConfig = stored_config("red_team", config)?;
        let material = material(config.content.as_deref(), &ctx.question, config.max_input_length);
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(RedTeam {
            config,
            ctx,
            material,
            phase: Phase::Generating,
            structured: String::new(),
            current: String::new(),
            rounds: Vec::new(),
            stop_reason: None,
            deadline_passed: false,
            attack_schema: attack_schema(),
            defense_schema: None,
            title,
            calls: Calls::default(),
        })
    }

    fn call(&self, key: String, model: &str, prompt: String, stage: &str, role: &str) -> CallSpec {
        CallSpec::new(
            key,
            model,
            vec![ChatMessage::user(prompt)],
            stage,
            role,
            self.config.timeout_ms,
        )
    }

    fn on_generate(&mut self, reply: CallReply) -> Vec<Effect> {
        let text = reply.result.as_ref().ok().map(|t| answer_text(t).trim().to_string());
        let fallback = text.is_none();
        self.structured = text.unwrap_or_else(|| self.material.text.clone());
        self.current = self.structured.clone();
        let data = json!({ "model": reply.model, "structuredContent": self.structured,
                           "fallback": fallback, "responseTimeMs": reply.response_time_ms });
        let mut parsed = data.clone();
        parsed["structuredContent"] = Value::Null;
        parsed["material"] = json!(self.material);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "generate".into(),
                stage_order: 0,
                model: Some(reply.model.clone()),
                role: Some("generator".into()),
                content: self.structured.clone(),
                parsed_data: Some(parsed),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("generate_complete", json!({ "data": data })),
        ];
        out.extend(self.next_round(1));
        out
    }

    /// Round `r` starts, unless the rounds are over or the time is up.
    fn next_round(&mut self, r: u32) -> Vec<Effect> {
        if r > self.config.rounds {
            return self.synthesize();
        }
        if self.deadline_passed {
            self.stop_reason = Some("global timeout");
            return self.synthesize();
        }
        let previous = self.rounds.last().map(|p| previous_round_text(&p.findings, &p.responses));
        let asking = Asking::new(self.attack_schema.clone(), |json| {
            attack_prompt_as(&self.ctx.question, r, &self.current, previous.as_deref(), json)
        });
        self.phase = Phase::Attacking(r);
        let call = asking
            .call(
                &self.ctx,
                format!("attack:{r}"),
                &self.config.attacker_model,
                &format!("attack_round_{r}"),
                "attacker",
                self.config.timeout_ms,
            )
            .quoting([
                ("the content".to_string(), self.current.clone()),
                ("the previous round".to_string(), previous.unwrap_or_default()),
            ]);
        vec![Effect::emit("attack_start", json!({ "round": r })), Effect::Call(call)]
    }

    fn on_attack(&mut self, r: u32, reply: CallReply) -> Vec<Effect> {
        let failed = reply.result.is_err();
        let raw = reply.result.clone().unwrap_or_default();
        let (reading, read_from) = if failed {
            let nothing = AttackReading {
                findings: vec![],
                reported_summary: None,
                overall_risk: None,
                no_flaws: false,
                parse_success: false,
            };
            (nothing, None)
        } else {
            read_attack_reply(&raw, &self.attack_schema)
        };
        let mut data = json!({
            "model": reply.model, "findings": reading.findings,
            "severityCounts": severity_counts(reading.findings.iter().map(|f| f.severity.as_str())),
            "reportedSummary": reading.reported_summary, "overallRisk": reading.overall_risk,
            "noFlaws": reading.no_flaws, "parseSuccess": reading.parse_success, "failed": failed,
            "responseTimeMs": reply.response_time_ms,
        });
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: format!("attack_round_{r}"),
                stage_order: (2 * r - 1) as i32,
                model: Some(reply.model.clone()),
                role: Some("attacker".into()),
                content: raw.clone(),
                parsed_data: Some(data.clone()),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("attack_complete", json!({ "round": r, "data": data })),
        ];
        self.rounds.push(Round {
            round: r,
            findings: reading.findings.clone(),
            attack: data,
            defense: None,
            responses: unaddressed(&reading.findings),
        });
        if failed {
            self.stop_reason = Some("attacker failed");
            out.extend(self.synthesize());
            return out;
        }
        if reading.no_flaws {
            self.stop_reason = Some("no flaws");
            out.extend(self.synthesize());
            return out;
        }
        if self.deadline_passed {
            self.stop_reason = Some("global timeout");
            out.extend(self.synthesize());
            return out;
        }
        // The raw report goes to the defender only when its findings were not read one by
        // one; a JSON reply reads as fields.
        let report = readable(&raw).into_owned();
        let schema = defense_schema(reading.findings.len(), self.current.chars().count());
        let asking = Asking::new(schema, |json| {
            defend_prompt_as(&self.ctx.question, &self.current, &reading.findings, &report, json)
        });
        self.phase = Phase::Defending(r);
        let raw_quoted = if reading.findings.is_empty() { report.clone() } else { String::new() };
        let call = asking
            .call(
                &self.ctx,
                format!("defend:{r}"),
                &self.config.generator_model,
                &format!("defend_round_{r}"),
                "generator",
                self.config.timeout_ms,
            )
            .quoting([
                ("the content".to_string(), self.current.clone()),
                ("the attacker's report".to_string(), raw_quoted),
            ]);
        self.defense_schema = Some(asking.schema);
        out.push(Effect::emit("defend_start", json!({ "round": r })));
        out.push(Effect::Call(call));
        out
    }

    fn on_defend(&mut self, r: u32, reply: CallReply) -> Vec<Effect> {
        let findings = self.rounds.last().map(|x| x.findings.clone()).unwrap_or_default();
        let failed = reply.result.is_err();
        let raw = reply.result.clone().unwrap_or_default();
        let schema = self
            .defense_schema
            .take()
            .unwrap_or_else(|| defense_schema(findings.len(), self.current.chars().count()));
        let (reading, read_from) = if failed {
            (DefenseReading { responses: unaddressed(&findings), revised_content: None }, None)
        } else {
            read_defense_reply(&raw, &findings, &schema)
        };
        let found = reading.revised_content.is_some();
        if let Some(revised) = &reading.revised_content {
            self.current = revised.clone();
        }
        let mut data = defense_data(
            &reply.model,
            &reading.responses,
            &self.current,
            found,
            failed,
            reply.response_time_ms,
        );
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        let mut parsed = data.clone();
        if let Some(o) = parsed.as_object_mut() {
            o.remove("revisedContent");
            o.insert("revisedContentLength".into(), json!(self.current.chars().count()));
        }
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: format!("defend_round_{r}"),
                stage_order: (2 * r) as i32,
                model: Some(reply.model.clone()),
                role: Some("generator".into()),
                content: raw,
                parsed_data: Some(parsed),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("defend_complete", json!({ "round": r, "data": data })),
        ];
        if let Some(last) = self.rounds.last_mut() {
            last.defense = Some(data);
            last.responses = reading.responses;
        }
        out.extend(self.next_round(r + 1));
        out
    }

    fn synthesize(&mut self) -> Vec<Effect> {
        self.phase = Phase::Synthesizing;
        let history: String = self
            .rounds
            .iter()
            .map(|r| {
                format!("Round {}:\n{}", r.round, previous_round_text(&r.findings, &r.responses))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let audit = audit_table(&self.rounds);
        let prompt = synthesize_prompt(
            &self.ctx.question,
            &self.structured,
            &self.current,
            if history.is_empty() { "(no rounds)" } else { &history },
            &audit,
        );
        let spec = self
            .call(
                "synthesis".into(),
                &self.config.synthesizer_model.clone(),
                prompt,
                "synthesis",
                "synthesizer",
            )
            .quoting([
                ("the structured original".to_string(), self.structured.clone()),
                ("the final revision".to_string(), self.current.clone()),
                ("the rounds' findings and responses".to_string(), history),
            ]);
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::emit("synthesize_start", json!({})),
            self.calls.solo(spec, SYNTHESIS_ORDER, backup.as_deref()),
        ]
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.title.fail(role_failed("synthesizer", &routed, e));
            }
        };
        let reply = &routed.reply;
        let reading = read_synthesis(&text);
        let mut data = json!({
            "model": reply.model, "hardenedOutput": reading.hardened_output,
            "auditSummary": reading.audit_summary, "hardeningConfidence": reading.hardening_confidence,
            "totals": totals(&self.rounds), "stopReason": self.stop_reason,
            "responseTimeMs": reply.response_time_ms,
        });
        if let Some(from) = &routed.fallback_from {
            data["fallbackFrom"] = json!(from);
        }
        let mut event = json!({ "data": data });
        self.calls.mark(&mut event);
        self.phase = Phase::Done;
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "synthesis".into(),
                stage_order: SYNTHESIS_ORDER,
                model: Some(reply.model.clone()),
                role: Some("synthesizer".into()),
                content: text.clone(),
                parsed_data: Some(data),
                response_time_ms: Some(reply.response_time_ms as i64),
            }),
            Effect::emit("synthesize_complete", event),
        ];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: text });
        out
    }
}

/// Every finding without a response.
fn unaddressed(findings: &[Finding]) -> Vec<Response> {
    read_defense("", findings).responses
}

fn defense_data(
    model: &str,
    responses: &[Response],
    revised: &str,
    found: bool,
    failed: bool,
    ms: u64,
) -> Value {
    let count = |v: &str| responses.iter().filter(|r| r.verdict == v).count();
    json!({
        "model": model, "responses": responses, "accepted": count("ACCEPT"),
        "rebutted": count("REBUT"), "unaddressed": count("UNADDRESSED"),
        "revisedContent": revised, "revisedContentFound": found, "failed": failed,
        "responseTimeMs": ms,
    })
}

fn audit_table(rounds: &[Round]) -> String {
    let mut s = String::new();
    for r in rounds {
        for resp in &r.responses {
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                resp.title, resp.severity, resp.verdict, r.round
            ));
        }
    }
    if s.is_empty() {
        s.push_str("(no findings)\n");
    }
    s
}

/// Totals over every round: findings, by severity, verdicts, accepted by severity.
fn totals(rounds: &[Round]) -> Value {
    let all: Vec<&Response> = rounds.iter().flat_map(|r| r.responses.iter()).collect();
    let count = |v: &str| all.iter().filter(|r| r.verdict == v).count();
    json!({
        "findings": all.len(),
        "bySeverity": severity_counts(all.iter().map(|r| r.severity.as_str())),
        "accepted": count("ACCEPT"), "rebutted": count("REBUT"), "unaddressed": count("UNADDRESSED"),
        "acceptedBySeverity": severity_counts(
            all.iter().filter(|r| r.verdict == "ACCEPT").map(|r| r.severity.as_str())),
    })
}

impl Mode for RedTeam {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::emit(
                "redteam_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "red_team", "totalRounds": self.config.rounds }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
            Effect::emit("generate_start", json!({})),
        ];
        let prompt = generate_prompt(&self.ctx.question, &self.material);
        let model = self.config.generator_model.clone();
        let spec = self
            .call("generate".into(), &model, prompt, "generate", "generator")
            .quoting([("the material".to_string(), self.material.text.clone())]);
        out.push(Effect::Call(spec));
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
        let (mut out, routed) = self.calls.route(empty_is_failure(reply));
        let Some(routed) = routed else { return out };
        let key = routed.reply.key.clone();
        out.extend(match self.phase {
            Phase::Generating if key == "generate" => self.on_generate(routed.reply),
            Phase::Attacking(r) if key == format!("attack:{r}") => self.on_attack(r, routed.reply),
            Phase::Defending(r) if key == format!("defend:{r}") => self.on_defend(r, routed.reply),
            Phase::Synthesizing if key == "synthesis" => self.on_synthesis(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }

    /// The global cap: the call in flight finishes, then the synthesis.
    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.deadline_passed = true;
        }
        Vec::new()
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{material, generate, rounds: [{round, attack, defense}], totals, synthesis, partial,
/// failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let gen = row("generate");
    let material = gen.and_then(|g| g.parsed_data.as_ref()).map(|p| p["material"].clone());
    let generate = gen.map(|g| {
        let mut d = g.parsed_data.clone().unwrap_or(json!({}));
        if let Some(o) = d.as_object_mut() {
            o.remove("material");
        }
        d["structuredContent"] = json!(g.content);
        d
    });
    let mut current = gen.map(|g| g.content.clone()).unwrap_or_default();
    let mut rounds: Vec<Round> = Vec::new();
    for r in 1..=3u32 {
        let Some(a) = row(&format!("attack_round_{r}")) else { break };
        let attack = a.parsed_data.clone().unwrap_or(Value::Null);
        let findings: Vec<Finding> =
            serde_json::from_value(attack["findings"].clone()).unwrap_or_default();
        let mut round =
            Round { round: r, responses: unaddressed(&findings), findings, attack, defense: None };
        if let Some(d) = row(&format!("defend_round_{r}")) {
            let mut data = d.parsed_data.clone().unwrap_or(json!({}));
            let responses: Vec<Response> =
                serde_json::from_value(data["responses"].clone()).unwrap_or_default();
            // The revised text is the reply's own (read again, by the schema it was read by),
            // else the content carried forward.
            if data["revisedContentFound"] == true {
                let schema = defense_schema(round.findings.len(), current.chars().count());
                if let Some(t) =
                    read_defense_reply(&d.content, &round.findings, &schema).0.revised_content
                {
                    current = t;
                }
            }
            if let Some(o) = data.as_object_mut() {
                o.remove("revisedContentLength");
            }
            data["revisedContent"] = json!(current);
            round.responses = responses;
            round.defense = Some(data);
        }
        rounds.push(round);
    }
    let synthesis = row("synthesis").map(|s| s.parsed_data.clone().unwrap_or(Value::Null));
    let list: Vec<Value> = rounds
        .iter()
        .map(|r| json!({ "round": r.round, "attack": r.attack, "defense": r.defense }))
        .collect();
    let mut result = json!({
        "material": material, "generate": generate, "rounds": list,
        "totals": totals(&rounds), "synthesis": synthesis,
    });
    mark_from_rows(&mut result, rows);
    result
}

fn outcome(result: &Value) -> Option<String> {
    let s = result.get("synthesis").filter(|s| !s.is_null())?;
    let t = &result["totals"];
    let confidence = s["hardeningConfidence"].as_str().unwrap_or("not stated");
    Some(format!(
        "{} findings ({} accepted, {} rebutted, {} unaddressed); hardening confidence {confidence}: {}",
        t["findings"],
        t["accepted"],
        t["rebutted"],
        t["unaddressed"],
        short(s["hardenedOutput"].as_str().unwrap_or(""), 60)
    ))
}

// ---- sim answers ---------------------------------------------------------------------------

/// The content a prompt carries.
fn carried(prompt: &str) -> &str {
    prompt
        .split_once(CONTENT_START)
        .and_then(|(_, rest)| rest.split_once(CONTENT_END))
        .map_or("", |(c, _)| c.trim())
}

const SIM_FLAWS: [(&str, &str, &str, &str); 6] = [
    (
        "Unvalidated input",
        "HIGH",
        "user-supplied fields are used without checks",
        "send a crafted value that the code trusts",
    ),
    (
        "Injection through string building",
        "CRITICAL",
        "queries or commands are built by string formatting",
        "close the quote and append a command of one's own",
    ),
    (
        "Secrets in plain text",
        "HIGH",
        "credentials are stored or compared in plain text",
        "read the store or a log and reuse the secret",
    ),
    (
        "No rate limiting",
        "MEDIUM",
        "repeated attempts are not slowed or counted",
        "guess passwords by brute force",
    ),
    (
        "Error messages leak detail",
        "LOW",
        "failures say which part was wrong",
        "enumerate valid names from the errors",
    ),
    (
        "Missing audit trail",
        "MEDIUM",
        "nothing records who did what",
        "act without leaving a trace",
    ),
];

/// `text` cut to the `maxLength` of `field` in an object schema (the sim's JSON always fits).
fn fit(schema: &ReplySchema, field: &str, text: &str) -> String {
    let max = schema.schema["properties"][field]["maxLength"].as_u64().unwrap_or(u64::MAX);
    text.chars().take(max.min(usize::MAX as u64) as usize).collect()
}

/// The sim attacker's findings as JSON: the same draws as its text report.
fn sim_attack_json(ask: &SimAsk, schema: &ReplySchema) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let later = ask.prompt.contains("This is round ");
    let n = if later { rng.below(3) } else { 1 + rng.below(3) };
    let mut picks: Vec<usize> = (0..SIM_FLAWS.len()).collect();
    if n > 0 {
        rng.shuffle(&mut picks);
    }
    let findings: Vec<Value> = picks
        .iter()
        .take(n)
        .map(|&k| {
            let (title, severity, vuln, exploit) = SIM_FLAWS[k];
            json!({ "title": title, "severity": severity,
                    "location": format!("Section {}", 1 + rng.below(2)),
                    "vulnerability": format!("The {vuln}."),
                    "exploitScenario": format!("An attacker could {exploit}.") })
        })
        .collect();
    let critical = findings.iter().any(|f| f["severity"] == "CRITICAL");
    let reasoning = format!(
        "{}[simulated attack from {}] Each section was read for untrusted input, secrets and \
         missing limits.",
        ask.hostile_paragraph(),
        ask.model
    );
    json!({
        "reasoning": fit(schema, schema::REASONING, &reasoning),
        "findings": findings,
        "overallRisk": match (n, critical) {
            (0, _) => "Low: nothing found",
            (_, true) => "High, fix before release",
            _ => "Moderate",
        },
    })
    .to_string()
}

/// The sim defender's answer as JSON: each finding the prompt lists accepted (two times in
/// three) or rebutted, and the content it carries with the accepted fixes noted.
fn sim_defense_json(ask: &SimAsk, schema: &ReplySchema) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let p = ask.prompt;
    let titles: Vec<(u64, String)> = p.lines().filter_map(|l| finding_heading(bare(l))).collect();
    let k = schema.schema["properties"]["responses"]["maxItems"].as_u64().unwrap_or(0);
    let mut fixes = Vec::new();
    let responses: Vec<Value> = (1..=k)
        .map(|n| {
            let title = titles
                .iter()
                .find(|(m, _)| *m == n)
                .map_or_else(|| format!("finding {n}"), |(_, t)| t.clone());
            if rng.below(3) > 0 {
                let revision = format!("Guard against: {title}.");
                fixes.push(title);
                json!({ "finding": n, "verdict": "ACCEPT", "reasoning": "The finding is valid.",
                        "revision": revision })
            } else {
                json!({ "finding": n, "verdict": "REBUT",
                        "reasoning": "The section already handles this case.", "revision": "" })
            }
        })
        .collect();
    let mut revised = carried(p).to_string();
    for f in &fixes {
        revised.push_str(&format!("\n- Hardening: {f} addressed."));
    }
    let reasoning = format!(
        "{}[simulated defense from {}] Each finding was weighed against the content.",
        ask.hostile_paragraph(),
        ask.model
    );
    // The schema's fields in order; responses only where the schema asks for them.
    let mut reply = serde_json::Map::new();
    reply.insert(schema::REASONING.into(), json!(fit(schema, schema::REASONING, &reasoning)));
    if schema.schema["properties"].get("responses").is_some() {
        reply.insert("responses".into(), json!(responses));
    }
    reply.insert("summary".into(), json!(format!("Accepted {} of {k} findings.", fixes.len())));
    reply.insert("revisedContent".into(), json!(fit(schema, "revisedContent", revised.trim())));
    Value::Object(reply).to_string()
}

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    // Asked for a schema: this mode's own in JSON; another mode's is not ours to answer.
    match ask.schema {
        Some(s) if s.name == ATTACK_SCHEMA && p.starts_with(ATTACK_HEAD) => {
            return Some(sim_attack_json(ask, s))
        }
        Some(s) if s.name == DEFENSE_SCHEMA && p.starts_with(DEFEND_HEAD) => {
            return Some(sim_defense_json(ask, s))
        }
        Some(_) => return None,
        None => {}
    }
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    if p.starts_with(GENERATE_HEAD) {
        if ask.malformed {
            return Some(format!("[simulated structure from {who}] Looks fine to me as it is."));
        }
        let body = carried(p);
        let mut s = format!("[simulated structure from {who}]\n\n## 1. Material\n\n");
        if body.contains('\n') || body.contains('{') {
            s.push_str(&format!("```\n{body}\n```\n"));
        } else {
            s.push_str(body);
            s.push('\n');
        }
        s.push_str(&format!(
            "\n## 2. Scope\n\n{}The material above, as given.",
            ask.hostile_paragraph()
        ));
        return Some(s);
    }
    if p.starts_with(ATTACK_HEAD) {
        if ask.malformed {
            return Some(format!(
                "[simulated attack from {who}] There may be some issues with input handling and \
                 perhaps the secrets, but overall it is hard to say."
            ));
        }
        let later = p.contains("This is round ");
        let n = if later { rng.below(3) } else { 1 + rng.below(3) };
        if n == 0 {
            return Some(format!("[simulated attack from {who}]\n\nFINDINGS: NONE"));
        }
        let mut picks: Vec<usize> = (0..SIM_FLAWS.len()).collect();
        rng.shuffle(&mut picks);
        let mut s = format!("[simulated attack from {who}]\n\n{}", ask.hostile_paragraph());
        let mut sev = Vec::new();
        for (i, &k) in picks.iter().take(n).enumerate() {
            let (title, severity, vuln, exploit) = SIM_FLAWS[k];
            sev.push(severity);
            s.push_str(&format!(
                "### FINDING {}: {title}\n**Severity:** {severity}\n**Location:** Section {}\n\
                 **Vulnerability:** The {vuln}.\n**Exploit Scenario:** An attacker could {exploit}.\n\n",
                i + 1,
                1 + rng.below(2)
            ));
        }
        let c = |l: &str| sev.iter().filter(|s| **s == l).count();
        s.push_str(&format!(
            "SUMMARY:\nCritical: {}, High: {}, Medium: {}, Low: {}\nOverall risk: {}",
            c("CRITICAL"),
            c("HIGH"),
            c("MEDIUM"),
            c("LOW"),
            if c("CRITICAL") > 0 { "High, fix before release" } else { "Moderate" }
        ));
        return Some(s);
    }
    if p.starts_with(DEFEND_HEAD) {
        let content = carried(p);
        if ask.malformed {
            return Some(format!("[simulated defense from {who}] I think it holds up. All good."));
        }
        let titles: Vec<(u64, String)> =
            p.lines().filter_map(|l| finding_heading(bare(l))).collect();
        let mut s = format!("[simulated defense from {who}]\n\n{}", ask.hostile_paragraph());
        let mut fixes = Vec::new();
        for (n, title) in &titles {
            let accept = rng.below(3) > 0;
            let (verdict, reasoning, revision) = if accept {
                fixes.push(title.clone());
                ("ACCEPT", "The finding is valid.".to_string(), format!("Guard against: {title}."))
            } else {
                ("REBUT", "The section already handles this case.".to_string(), "N/A".to_string())
            };
            s.push_str(&format!(
                "RESPONSE TO FINDING {n}: {title}\nVerdict: {verdict}\nReasoning: {reasoning}\nRevision: {revision}\n\n"
            ));
        }
        s.push_str(&format!(
            "DEFENSE SUMMARY: accepted {} of {} findings.\n\nREVISED CONTENT:\n{content}\n",
            fixes.len(),
            titles.len()
        ));
        for f in fixes {
            s.push_str(&format!("\n- Hardening: {f} addressed."));
        }
        return Some(s);
    }
    if p.starts_with(SYNTHESIZE_HEAD) {
        let content = carried(p);
        if ask.malformed {
            return Some(format!(
                "[simulated synthesis from {who}] Here is the final version.\n\n{content}"
            ));
        }
        let level = ["High", "Medium", "Low"][rng.below(3)];
        return Some(format!(
            "[simulated synthesis from {who}]\n\n## Hardened Output\n\n{content}\n\n\
             ## Vulnerability Audit Summary\n\n{}Every finding was weighed; accepted fixes are applied \
             above. (This text is simulated: no real model was asked.)\n\n\
             Remaining Risks: untested edge cases.\nHardening Confidence: {level}",
            ask.hostile_paragraph()
        ));
    }
    None
}

#[cfg(test)]
#[path = "red_team_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// A severity as a reader reads it: `critical`, or `not stated (medium used)` when the attacker
/// stated none.
fn severity_words(f: &Value) -> String {
    let s = f["severity"].as_str().unwrap_or("").to_lowercase();
    if f["severityDefaulted"] == true {
        format!("not stated ({s} used)")
    } else if s.is_empty() {
        "not stated".into()
    } else {
        s
    }
}

/// `2 critical, 1 high` from severity counts (the levels with none left out).
fn by_severity(counts: &Value) -> String {
    SEVERITIES
        .iter()
        .filter_map(|s| {
            counts[*s].as_u64().filter(|n| *n > 0).map(|n| format!("{n} {}", s.to_lowercase()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The defender's verdict on one finding and what it said: `accepted` with the revision,
/// `rebutted` with the reasoning.
fn defense_words(response: Option<&Value>, defended: bool) -> (String, String) {
    let Some(r) = response else {
        let v = if defended { "not answered" } else { "no defense" };
        return (v.into(), String::new());
    };
    let text = |k: &str| r[k].as_str().unwrap_or("").to_string();
    match r["verdict"].as_str() {
        Some("ACCEPT") => ("accepted".into(), text("revision")),
        Some("REBUT") if r["verdictDefaulted"] == true => {
            ("rebutted (no verdict stated)".into(), text("reasoning"))
        }
        Some("REBUT") => ("rebutted".into(), text("reasoning")),
        _ => ("not answered".into(), String::new()),
    }
}

/// The result as the export's report: who hardened the content and how confidently, why the
/// rounds ended early, each round's findings as a table (severity, finding, where, the
/// defender's verdict and answer), and the totals.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let s = &result["synthesis"];
    if s.is_object() {
        let confidence =
            s["hardeningConfidence"].as_str().map_or("not stated".into(), str::to_lowercase);
        match s["model"].as_str() {
            Some(m) => out.push_str(&format!(
                "**Hardened output:** by {m}; hardening confidence {confidence}.\n\n"
            )),
            None => out.push_str(&format!("**Hardening confidence:** {confidence}.\n\n")),
        }
        let stop = match s["stopReason"].as_str() {
            Some("no flaws") => Some("the attacker found no flaws"),
            Some("attacker failed") => Some("the attacker's call failed"),
            Some("global timeout") => Some("the run's time limit passed"),
            _ => None,
        };
        if let Some(why) = stop {
            out.push_str(&format!("**The rounds ended early:** {why}.\n\n"));
        }
    }
    let rounds = result["rounds"].as_array().cloned().unwrap_or_default();
    for (i, r) in rounds.iter().enumerate() {
        let number = r["round"].as_u64().unwrap_or(i as u64 + 1);
        let (a, d) = (&r["attack"], &r["defense"]);
        let mut lead = format!("**Round {number}**");
        let who: Vec<String> = [("attacker", &a["model"]), ("defender", &d["model"])]
            .iter()
            .filter_map(|(role, m)| m.as_str().map(|m| format!("{role} {m}")))
            .collect();
        if !who.is_empty() {
            lead.push_str(&format!(" ({})", who.join(", ")));
        }
        out.push_str(&format!("{lead}\n\n"));
        let findings = a["findings"].as_array().cloned().unwrap_or_default();
        if a["failed"] == true {
            out.push_str("The attacker's call failed.\n\n");
            continue;
        }
        if findings.is_empty() {
            out.push_str(if a["noFlaws"] == true {
                "The attacker found no flaws.\n\n"
            } else {
                "No finding could be read from the attacker's report.\n\n"
            });
            continue;
        }
        let responses = d["responses"].as_array().cloned().unwrap_or_default();
        let rows: Vec<Vec<String>> = findings
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let n = f["number"].as_u64().unwrap_or(k as u64 + 1);
                let resp = responses.iter().find(|x| x["finding"].as_u64() == Some(n));
                let (verdict, answer) = defense_words(resp, d.is_object());
                vec![
                    n.to_string(),
                    severity_words(f),
                    f["title"].as_str().unwrap_or("").to_string(),
                    f["location"].as_str().unwrap_or("").to_string(),
                    verdict,
                    answer,
                ]
            })
            .collect();
        out.push_str(&table(
            &["#", "severity", "finding", "where", "defense", "the defender's answer"],
            &rows,
            &[0],
        ));
        out.push('\n');
        let mut notes = Vec::new();
        if let Some(risk) = a["overallRisk"].as_str() {
            notes.push(format!("Overall risk as the attacker put it: {}.", risk.to_lowercase()));
        }
        if d["failed"] == true {
            notes.push("The defender's call failed: the findings went unanswered.".into());
        } else if d.is_object() && d["revisedContentFound"] == false {
            notes.push(
                "The defender gave no revised content: the content went on as it was.".into(),
            );
        } else if d.is_object() {
            notes.push("The defender revised the content.".into());
        }
        if !notes.is_empty() {
            out.push_str(&format!("{}\n\n", notes.join(" ")));
        }
    }
    let t = &result["totals"];
    if let Some(n) = t["findings"].as_u64().filter(|n| *n > 0) {
        let severities = by_severity(&t["bySeverity"]);
        let severities =
            if severities.is_empty() { String::new() } else { format!(" ({severities})") };
        out.push_str(&format!(
            "**Totals:** {}{severities}: {} accepted, {} rebutted, {} not answered.\n",
            count(n, "finding", "findings"),
            t["accepted"].as_u64().unwrap_or(0),
            t["rebutted"].as_u64().unwrap_or(0),
            t["unaddressed"].as_u64().unwrap_or(0),
        ));
    }
    out
}
