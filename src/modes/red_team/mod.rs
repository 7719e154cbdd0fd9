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

mod machine;
mod prompts;
mod read;
mod result;
mod sim;
#[cfg(test)]
mod tests;

pub use machine::*;
pub use prompts::*;
pub use read::*;
pub use result::*;
use sim::*;

use super::prelude::*;
use super::reading::{unbold, Unparsed};

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
    let (asked, cfg): (_, RedTeamRequest) = request::start(body, "Question is required", false)?;
    let content = request::opt_text(cfg.content.as_ref(), "modeConfig.content")?;
    let generator_model = SPEC.model_of(cfg.generator_model.as_ref(), "generator", defaults)?;
    let attacker_model = SPEC.model_of(cfg.attacker_model.as_ref(), "attacker", defaults)?;
    if attacker_model == generator_model {
        return Err(FieldError::new(
            "modeConfig.attackerModel",
            "The attacker must be a different model from the generator",
        ));
    }
    let synthesizer_model = SPEC
        .named(cfg.synthesizer_model.as_ref(), "synthesizer")?
        .unwrap_or_else(|| generator_model.clone());
    let rounds = cfg.rounds.unwrap_or(2);
    let max_input_length = cfg.max_input_length.unwrap_or(25_000);
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let global_timeout_ms = request::given(cfg.global_timeout_ms, 600_000);
    let models = request::distinct(&[], &[&generator_model, &attacker_model, &synthesizer_model]);
    let chairman_fallback_model = defaults.backup(SPEC.id, "synthesizer", &synthesizer_model);
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
    Ok(asked.valid(SPEC.kind(), &config, models))
}

/// Red Team in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "red_team",
    label: "Red Team",
    description: "One model structures and defends the material, another attacks it for 1-3 rounds of severity-rated findings; a synthesis hardens it and audits every finding.",
    multi_turn: false,
    question: Question { label: "What to red-team", required: Some("Question is required") },
    roles: &[
        Role::model("generator", "Generator (structures and defends)", "generatorModel"),
        Role::model("attacker", "Attacker", "attackerModel"),
        Role::model("synthesizer", "Synthesizer (default: the generator)", "synthesizerModel").backed_by("chairman"),
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
    result_schema: schema_of::<RedTeamResult>,
};

// ---- the material --------------------------------------------------------------------------

/// What the run red-teams: `content`, else the question, cut to `maxInputLength` characters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Material {
    /// `content` or `question`.
    pub source: String,
    /// The material, as cut.
    pub text: String,
    /// Its length in characters before it was cut.
    pub original_length: usize,
    /// It was cut to `maxInputLength` characters.
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
