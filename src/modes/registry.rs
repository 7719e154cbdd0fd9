//! The mode registry: every mode the server runs, and all the rest of the server may ask of
//! one. The engine, the store, the web layer, the CLI, the sim and the benchmark ask the
//! registry; none of them names a mode.
//!
//! Adding a mode: write its folder in `src/modes/` with a `pub static SPEC: ModeSpec`, add one
//! line to [`MODES`] and its roles' default models to [`super::defaults::TABLE`], and
//! (optionally) a view in `static/js/modes/`. Its request schema, form,
//! CLI flags and a generic view follow from the spec.

use std::fmt;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::request::{self, ModelId};
use super::{Defaults, FieldError, Mode, RunContext, StageRow, ValidRequest};

/// One role the calls of a mode play (`council`, `chairman`, `juror`…).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    /// The role's name in calls, events, caps (`[max_tokens]`) and stored rows.
    pub id: &'static str,
    /// Words for a person.
    pub label: &'static str,
    /// The `modeConfig` field that names its model or models, when the client chooses them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<&'static str>,
    /// Several models (a panel), or one.
    pub panel: bool,
    /// Set when a backup model may stand in when its call fails: the name the backup is
    /// configured under besides the role's own id (`[fallback] "mode.role"`, see
    /// [`super::defaults`]), an older shared name (`chairman`…) or the role's id itself
    /// ([`Role::backed_up`]). Its default models are in [`super::defaults::TABLE`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<&'static str>,
}

impl Role {
    /// A role whose models the server picks (`title`), or that shares another role's models.
    pub const fn internal(id: &'static str, label: &'static str) -> Role {
        Role { id, label, field: None, panel: false, fallback: None }
    }

    /// A role of one model, named by `field` of `modeConfig`.
    pub const fn model(id: &'static str, label: &'static str, field: &'static str) -> Role {
        Role { id, label, field: Some(field), panel: false, fallback: None }
    }

    /// A role of several models, named by `field` of `modeConfig`.
    pub const fn panel(id: &'static str, label: &'static str, field: &'static str) -> Role {
        Role { id, label, field: Some(field), panel: true, fallback: None }
    }

    /// The same role played by several models.
    pub const fn several(self) -> Role {
        Role { panel: true, ..self }
    }

    /// The same role with a backup model, configured by its own id (`[fallback]
    /// "mode.role"`) or by the older shared name `fallback`.
    pub const fn backed_by(self, fallback: &'static str) -> Role {
        Role { fallback: Some(fallback), ..self }
    }

    /// The same role with a backup model, configured by its own id (`[fallback]
    /// "mode.role"`), and by its id alone where that is one of the older shared names
    /// (`chairman`, `foreman`, `facilitator`, `arbiter`): a new role borrows no name.
    pub const fn backed_up(self) -> Role {
        Role { fallback: Some(self.id), ..self }
    }
}

/// What the run's `question` is in this mode.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// Its label in forms and the CLI's help.
    pub label: &'static str,
    /// The message a request without one gets; `None`: optional (a default is used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<&'static str>,
}

/// Builds a mode's state machine from its stored configuration.
pub type BuildFn = fn(&Value, RunContext) -> Result<Box<dyn Mode>, String>;

/// Everything the server knows of one mode.
pub struct ModeSpec {
    /// The request's `mode`, the stored run's mode, the page's address (`#/new/<id>`).
    pub id: &'static str,
    pub label: &'static str,
    /// One line for the mode's tab and `conclave run --help`.
    pub description: &'static str,
    /// Whether its conversations take follow-ups.
    pub multi_turn: bool,
    pub question: Question,
    /// The roles its calls play, panels first.
    pub roles: &'static [Role],
    /// `modeConfig` fields a request may also give at the top level (Council's seed shape).
    pub top_level: &'static [&'static str],
    /// The JSON Schema of its `modeConfig` (see [`schema_of`]).
    pub schema: fn() -> Value,
    /// Validates a start request and fills in the defaults.
    pub validate: fn(&Value, &Defaults) -> Result<ValidRequest, FieldError>,
    /// Builds the state machine from a run's stored configuration. A configuration that does
    /// not fit is an error, at start and at resume, never a silent default.
    pub build: BuildFn,
    /// Rebuilds the result from stored stage rows (the same shapes as the live events).
    pub load_result: fn(&[StageRow]) -> Value,
    /// The JSON Schema of that result (see [`schema_of`]): `GET /api/modes` publishes it as
    /// `resultSchema`, so a client knows the shape before a run ends.
    pub result_schema: fn() -> Value,
    /// The one-line outcome of a result (the winner, verdict, score, estimate or the answer's
    /// first words): what lists and dashboards show. None while there is none.
    pub outcome: fn(&Value) -> Option<String>,
    /// Its stages' words for a person, by the stem of their events (`checker` for
    /// `checker_complete` → "a checker's verdicts"): what the CLI prints as a stage starts and
    /// ends. A stem not listed is spelled out from its id; an empty label prints nothing (a
    /// mode's own start, which the run's first line has named).
    pub stages: &'static [(&'static str, &'static str)],
    /// The result in the mode's own terms, as Markdown for the export (a verdict table, a
    /// bracket, a tally): no headings, only bold lead lines, lists and tables, and never a
    /// key-by-key dump. None: the export lists each stage's data instead.
    pub report: Option<fn(&Value) -> String>,
    /// A small valid request, for documentation, the CLI's help and tests.
    pub example: fn() -> Value,
    /// How the offline sim models answer this mode's prompts (in its format, and now and then
    /// in a messy one), or None: the sim's general answers. A mode whose sims read a text prompt
    /// as a `sim_text::Prompt` hands them to `sim_text::text_answer`.
    pub sim: Option<SimFn>,
}

/// What a sim model is asked, for a mode's [`ModeSpec::sim`].
pub struct SimAsk<'a> {
    /// The sim model answering (`sim/alpha`): answers differ by model.
    pub model: &'a str,
    /// The last user message.
    pub prompt: &'a str,
    /// The whole conversation sent.
    pub messages: &'a [super::ChatMessage],
    /// Differs by model and prompt, the same every time for both: seed a
    /// [`super::common::SplitMix64`] or similar with it.
    pub seed: u64,
    /// The sim was asked to answer out of format this time (a `sim/messy` model, or chance).
    pub malformed: bool,
    /// A `sim/xss…` model: put [`SimAsk::hostile_paragraph`] in the prose (never in the labels,
    /// numbers or markers the parsers read), so the page is shown to keep it inert.
    pub hostile: bool,
    /// The reply schema the call asks for, when its route takes structured output: answer
    /// with JSON that fits it (a schema of this mode is known by its name), or None to let
    /// the sim fill it in from the schema alone.
    pub schema: Option<&'a super::ReplySchema>,
}

impl SimAsk<'_> {
    /// Hostile HTML and markdown as a paragraph of its own (ending in a blank line) for a
    /// `sim/xss…` model; else nothing.
    pub fn hostile_paragraph(&self) -> String {
        super::sim_text::hostile_paragraph(self.hostile)
    }

    /// The payload to append to a line of prose, for a hostile model; else nothing.
    pub fn hostile_inline(&self) -> String {
        super::sim_text::hostile_inline(self.hostile)
    }
}

/// A mode's sim answers: Some(text) for a prompt of this mode, None for any other.
pub type SimFn = fn(&SimAsk) -> Option<String>;

impl ModeSpec {
    /// This mode as a handle.
    pub fn kind(&'static self) -> ModeKind {
        ModeKind(self)
    }

    /// Where in a request `role`'s models are named (`modeConfig.checkerModels`), as an error
    /// names it: the field its [`Role`] declares.
    pub fn field_of(&self, role: &str) -> String {
        let field = self.roles.iter().find(|r| r.id == role).and_then(|r| r.field);
        format!("modeConfig.{}", field.unwrap_or(role))
    }

    /// `role`'s models: those the request names (`given`: trimmed, an empty id refused naming
    /// the role's field), else the role's defaults.
    pub fn panel_of(
        &self,
        given: Option<&[ModelId]>,
        role: &str,
        defaults: &Defaults,
    ) -> Result<Vec<String>, FieldError> {
        let named = request::panel(given, &self.field_of(role))?;
        Ok(named.unwrap_or_else(|| defaults.models(self.id, role)))
    }

    /// `role`'s one model: the one the request names, else the role's default.
    pub fn model_of(
        &self,
        given: Option<&ModelId>,
        role: &str,
        defaults: &Defaults,
    ) -> Result<String, FieldError> {
        Ok(self.named(given, role)?.unwrap_or_else(|| defaults.model(self.id, role)))
    }

    /// `role`'s one model: the one the request names, else `[defaults]`'s for it, else
    /// `derived` (the built-in default of a role that shares another role's model).
    pub fn model_or(
        &self,
        given: Option<&ModelId>,
        role: &str,
        defaults: &Defaults,
        derived: &str,
    ) -> Result<String, FieldError> {
        Ok(self.named(given, role)?.unwrap_or_else(|| defaults.model_or(self.id, role, derived)))
    }

    /// `role`'s one model when the request names one (trimmed; an empty id refused, naming the
    /// role's field): a mode whose role defaults to another role's model takes that one else.
    pub fn named(&self, given: Option<&ModelId>, role: &str) -> Result<Option<String>, FieldError> {
        request::model(given, &self.field_of(role))
    }
}

/// Every mode, in the order the page shows them.
pub static MODES: &[&ModeSpec] = &[
    &super::council::SPEC,
    &super::vote::SPEC,
    &super::jury::SPEC,
    &super::debate::SPEC,
    &super::delphi::SPEC,
    &super::clarity::SPEC,
    &super::red_team::SPEC,
    &super::chain::SPEC,
    &super::specialist_panel::SPEC,
    &super::blueprint::SPEC,
    &super::peer_review::SPEC,
    &super::tournament::SPEC,
    &super::confidence_weighted::SPEC,
    &super::decompose::SPEC,
    &super::brainstorm::SPEC,
    &super::fact_check::SPEC,
    &super::solo::SPEC,
    // A demonstration mode the test suite turns on (the `demo-mode` feature); not shipped.
    #[cfg(feature = "demo-mode")]
    &super::demo::SPEC,
];

/// A handle on one registered mode: copied freely, compared and serialised by its id.
#[derive(Clone, Copy)]
pub struct ModeKind(&'static ModeSpec);

impl ModeKind {
    /// The registered mode with this id.
    pub fn parse(id: &str) -> Option<Self> {
        MODES.iter().find(|m| m.id == id).map(|m| ModeKind(m))
    }

    /// Every registered mode.
    pub fn all() -> Vec<ModeKind> {
        MODES.iter().map(|m| ModeKind(m)).collect()
    }

    /// The mode a request that names none gets.
    pub fn default_mode() -> ModeKind {
        ModeKind(MODES[0])
    }

    pub fn as_str(self) -> &'static str {
        self.0.id
    }

    pub fn spec(self) -> &'static ModeSpec {
        self.0
    }

    /// Whether a conversation of this mode takes follow-ups.
    pub fn multi_turn(self) -> bool {
        self.0.multi_turn
    }
}

impl PartialEq for ModeKind {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ModeKind {}

impl std::hash::Hash for ModeKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state);
    }
}

impl fmt::Debug for ModeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModeKind({})", self.0.id)
    }
}

impl fmt::Display for ModeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.id)
    }
}

impl Serialize for ModeKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.id)
    }
}

/// The JSON Schema of a request type, with nested types inlined (the page and the CLI read
/// it without resolving references).
pub fn schema_of<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

/// Each mode's `modeConfig` schema, made once.
pub fn config_schema(mode: ModeKind) -> &'static Value {
    static SCHEMAS: std::sync::OnceLock<Vec<(&'static str, Value)>> = std::sync::OnceLock::new();
    let all = SCHEMAS.get_or_init(|| MODES.iter().map(|m| (m.id, (m.schema)())).collect());
    all.iter().find(|(id, _)| *id == mode.as_str()).map_or(&Value::Null, |(_, s)| s)
}

/// A stored configuration read back as the mode's type; the error says what does not fit.
pub fn stored_config<T: DeserializeOwned>(mode: &str, config: &Value) -> Result<T, String> {
    serde_json::from_value(config.clone())
        .map_err(|e| format!("the stored {mode} configuration does not fit this server: {e}"))
}

/// Builds the state machine for a validated request.
pub fn instantiate(req: &ValidRequest, ctx: RunContext) -> Result<Box<dyn Mode>, String> {
    (req.mode.spec().build)(&req.config, ctx)
}

/// Rebuilds a mode's result object from its stored stage rows (ordered by stage_order, then
/// insertion). A run that stopped early yields a partial result: missing stages are `null`.
pub fn load_result(mode: ModeKind, rows: &[StageRow]) -> Value {
    (mode.spec().load_result)(rows)
}

/// The outcome of a result with a `winner` (Vote, Debate): who won, with how many votes.
pub fn winner_outcome(result: &Value) -> Option<String> {
    let w = result.get("winner").filter(|w| !w.is_null())?;
    Some(format!(
        "{} ({}) won with {} of {} votes",
        w["winnerLabel"].as_str()?,
        w["winnerModel"].as_str().unwrap_or("?"),
        w["voteCount"],
        w["totalVotes"]
    ))
}

/// The text of a result's outcome, cut at a word boundary to about `max` characters.
pub fn short(text: &str, max: usize) -> String {
    let text = super::reading::answer_text(text);
    let line = text
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= max {
        return line.to_string();
    }
    let mut out = String::new();
    for w in line.split_whitespace() {
        if out.chars().count() + w.chars().count() + 1 > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    format!("{}…", out.trim_end_matches([',', ';', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_every_mode_validates_its_own_example() {
        let mut ids: Vec<&str> = MODES.iter().map(|m| m.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), MODES.len());
        let defaults = Defaults {
            offline: true,
            stage_timeout_ms: 120_000,
            fallback: Default::default(),
            ..Default::default()
        };
        for kind in ModeKind::all() {
            let spec = kind.spec();
            let example = (spec.example)();
            let req = super::super::validate(&example, &defaults)
                .unwrap_or_else(|e| panic!("{}'s example: {e}", spec.id));
            assert_eq!(req.mode, kind);
            let schema = (spec.schema)();
            assert_eq!(schema["type"], "object", "{}: {schema}", spec.id);
            assert!(!spec.roles.is_empty());
        }
    }

    /// An empty model id in a role's field is refused naming that field, the one the role
    /// declares (`field_of`), in every mode.
    #[test]
    fn an_empty_model_id_is_refused_naming_the_roles_own_field() {
        let defaults = Defaults { offline: true, stage_timeout_ms: 120_000, ..Default::default() };
        let mut checked = 0;
        for kind in ModeKind::all() {
            let spec = kind.spec();
            for role in spec.roles.iter().filter(|r| r.field.is_some()) {
                let mut body = (spec.example)();
                let path: Vec<&str> = role.field.unwrap_or_default().split('.').collect();
                let mut at = &mut body["modeConfig"];
                for key in &path[..path.len() - 1] {
                    at = &mut at[*key];
                }
                let last = path[path.len() - 1];
                at[last] = if role.panel {
                    let mut ids = at[last].as_array().cloned().unwrap_or_else(|| {
                        defaults.models(spec.id, role.id).into_iter().map(Value::from).collect()
                    });
                    let end = ids.len() - 1;
                    ids[end] = Value::from(" ");
                    Value::Array(ids)
                } else {
                    Value::from(" ")
                };
                let e = super::super::validate(&body, &defaults)
                    .err()
                    .unwrap_or_else(|| panic!("{}.{}: an empty id was taken", spec.id, role.id));
                assert_eq!(e.field, spec.field_of(role.id), "{}.{}: {e}", spec.id, role.id);
                checked += 1;
            }
        }
        assert!(checked >= 30, "{checked} roles checked");
    }

    #[test]
    fn a_stored_configuration_that_does_not_fit_is_an_error_not_a_default() {
        let ctx = super::super::testkit::ctx("q", vec![], false);
        for kind in ModeKind::all() {
            let built = (kind.spec().build)(&serde_json::json!({"unexpected": true}), ctx.clone());
            assert!(built.is_err(), "{} built from a configuration that does not fit", kind);
        }
    }

    #[test]
    fn short_outcomes_end_at_a_word() {
        assert_eq!(short("# Title\n\nbody", 80), "Title");
        assert_eq!(short("one two three four", 9), "one two…");
        assert_eq!(short("<think>x</think>Answer", 80), "Answer");
    }
}
