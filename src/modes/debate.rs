//! Debate mode (seed 04): answer; each model sees the others' answers (anonymised) and may
//! REVISE, STAND or MERGE; everyone votes on the revised answers under a new label map; the
//! plurality winner's revised answer is the result, ties going to the first label
//! alphabetically (no chairman: peers only).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    answer_of, create_label_map, label, mark_from_rows, member_names, named, title_prompt,
    word_count, Answer, Batch, Calls, TitleTracker, TITLE_KEY,
};
use super::reading::{answer_text, between, json_values, split_reasoning, Unparsed};
use super::registry::{schema_of, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::ModelId;
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::stated::{last_stated, Labels};
use super::voting::{
    ballot_rows, ballots_from_rows, cast, first_alphabetically, round, vote_prompt_as, vote_schema,
};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, FieldError, Mode, RunContext,
    StageRow, ValidRequest,
};

const SIM_DEFAULTS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SEED_DEFAULTS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
/// Mixed into the run seed so the vote's label map is a fresh shuffle.
const VOTE_SALT: u64 = 0x5eed_0fd0_be7e;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebateConfig {
    pub models: Vec<String>,
    pub timeout_ms: u64,
}

/// Debate's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebateRequest {
    /// The debaters: 3 to 6 models that answer, revise after reading the others, and vote.
    #[schemars(length(min = 3, max = 6))]
    pub models: Option<Vec<ModelId>>,
    /// Per-stage timeout in milliseconds.
    #[schemars(range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// `{question, modeConfig?: {models (3-6), timeoutMs}}`; follow-ups are refused by the engine
/// (Debate is not multi-turn).
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: DebateRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let models = request::models(
        cfg.models.as_deref(),
        "modeConfig.models",
        3..=6,
        Some("Debate mode requires at least 3 models"),
        Some("Maximum 6 models allowed"),
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_DEFAULTS } else { &SEED_DEFAULTS }));
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=600_000,
        defaults.stage_timeout_ms,
    )?;
    let all = request::distinct(&[&models], &[]);
    let config = DebateConfig { models, timeout_ms };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models: all,
    })
}

/// Debate in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "debate",
    label: "Debate",
    description: "Every model answers, revises after reading the others anonymously, then votes on the revised answers.",
    multi_turn: false,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role {
            id: "respondent",
            label: "Debaters",
            field: Some("models"),
            panel: true,
            fallback: None,
            sim_default: &SIM_DEFAULTS,
            default: &SEED_DEFAULTS,
        },
        Role::internal("debater", "Revisions"),
        Role::internal("voter", "Votes"),
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<DebateRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Debate::new(config, ctx)?)),
    load_result,
    outcome: super::registry::winner_outcome,
    stages: &[("revision", "the revisions"), ("vote", "the vote")],
    report: Some(report),
    example: || json!({ "mode": "debate", "question": "Should companies adopt a 4-day work week?" }),
    sim: Some(sim_answer),
};

/// The seed's revision prompt, verbatim.
pub fn revision_prompt(question: &str, own: &str, others: &[(String, String)]) -> String {
    revision_prompt_as(question, own, others, None)
}

/// The revision prompt asking for the seed's `DECISION:` / `REASONING:` / `REVISED RESPONSE:`
/// sections, or, given the stage's schema, for its JSON instead (the same instructions and
/// three options, the seed's "State your choice…" section swapped for the schema's fields).
pub fn revision_prompt_as(
    question: &str,
    own: &str,
    others: &[(String, String)],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = String::from(
        "You previously answered a question. Now you will see how other respondents answered the same question (anonymously). You may revise your response or stand by your original if you believe it was superior.\n\n",
    );
    p.push_str(&format!(
        "ORIGINAL QUESTION:\n{question}\n\nYOUR ORIGINAL RESPONSE:\n{own}\n\nOTHER RESPONSES:\n"
    ));
    for (l, response) in others {
        p.push_str(&format!("--- {l} ---\n{response}\n\n"));
    }
    p.push_str(
        "Instructions:\n\
1. Carefully consider the other responses. What insights do they offer that yours missed?\n\
2. Identify any errors or omissions in your original response.\n\
3. You have three options:\n   \
a) REVISE: Produce an improved response incorporating insights from others\n   \
b) STAND: Keep your original response unchanged (explain why)\n   \
c) MERGE: Substantially rewrite by combining the best elements of all responses\n\
\n",
    );
    if let Some(schema) = schema {
        p.push_str(&schema.instruction());
        return p;
    }
    p.push_str(
        "State your choice, then provide the response:\n\
\n\
DECISION: [REVISE|STAND|MERGE]\n\
REASONING: [1-2 sentences on why]\n\
\n\
REVISED RESPONSE:\n\
[Your final response — if STAND, repeat your original]",
    );
    p
}

/// What a revision says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedRevision {
    pub decision: Option<String>,
    pub reasoning: Option<String>,
    /// From the answer part of the reply: never a reasoning trace.
    pub revised_response: Option<String>,
    /// Why no decision was read (null when one was).
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
}

/// The name of a debater's revision schema.
pub const REVISION_SCHEMA: &str = "debate_revision";

/// The three decisions, as the seed writes them.
const DECISIONS: [&str; 3] = ["REVISE", "STAND", "MERGE"];

/// The longest revised response the schema allows: about 1,500 tokens, inside the default
/// output cap of 2,000 with the reasoning before it, so a small model that loops in the
/// string is stopped by the schema before the server stops it mid-object. A STAND may leave it
/// empty: its original stands, however long.
pub const REVISED_RESPONSE_MAX_CHARS: usize = 6_000;

/// A debater's revision schema: its reasoning (the seed's `REASONING:`), the decision word and
/// the revised response. The same for every run, built once per run.
pub fn revision_schema() -> Arc<ReplySchema> {
    ReplySchema::new(
        REVISION_SCHEMA,
        schema::reasoned([
            (
                "decision",
                schema::described(
                    schema::one_of(&DECISIONS),
                    "REVISE (improve your response with the others' insights), STAND (keep your original response unchanged) or MERGE (rewrite it combining the best elements of all responses)",
                ),
            ),
            (
                "revised_response",
                schema::described(
                    schema::text(REVISED_RESPONSE_MAX_CHARS),
                    "your final response in full (if STAND, repeat your original or leave this empty)",
                ),
            ),
        ]),
    )
}

/// A revision's JSON, when it fits `schema` and states a decision the text reader would read
/// (the schema's words are all such): reasoning and response as stated, blank ones as none.
fn schema_revision(raw: &str, schema: &ReplySchema) -> Option<ParsedRevision> {
    let v = schema.read(raw)?;
    let decision = decision_word(v.get("decision")?.as_str()?)?;
    let field = |k: &str| {
        v.get(k).and_then(Value::as_str).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
    };
    Some(ParsedRevision {
        decision: Some(decision.to_string()),
        reasoning: field(schema::REASONING),
        revised_response: field("revised_response"),
        unparsed: None,
    })
}

/// Reads a revision from its JSON when it fits `schema`, else by its text ([`parse_revision`]);
/// with where its decision was read from, when one was.
pub fn parse_revision_reply(raw: &str, schema: &ReplySchema) -> (ParsedRevision, Option<ReadFrom>) {
    match schema_revision(raw, schema) {
        Some(p) => (p, Some(ReadFrom::Json)),
        None => {
            let p = parse_revision(raw);
            let from = p.decision.is_some().then_some(ReadFrom::Text);
            (p, from)
        }
    }
}

/// Debate's sim answer to its revision schema (None for any other prompt or schema): the text
/// sim's revision in JSON. Each model leans to one decision, nudged by the prompt, so debates
/// show a mix; a STAND repeats the original, a REVISE or MERGE adds to it.
fn sim_answer(ask: &SimAsk) -> Option<String> {
    use crate::modes::sim_text::{labeled_blocks, seed_of};
    let schema = ask.schema.filter(|s| s.name == REVISION_SCHEMA)?;
    let own = between(ask.prompt, "YOUR ORIGINAL RESPONSE:\n", "\n\nOTHER RESPONSES:");
    let labels: Vec<String> = labeled_blocks(ask.prompt).into_iter().map(|(l, _)| l).collect();
    let other = labels.first().cloned().unwrap_or_else(|| "another response".into());
    let lean = (seed_of(&[ask.model, "lean"]) % 3) as usize;
    let nudge = (seed_of(&[ask.model, ask.prompt]) % 4) as usize;
    let decision = DECISIONS[if nudge == 0 { (lean + 1) % 3 } else { lean }];
    let (reason, body) = match decision {
        "STAND" => ("My original answer already covers the points the others raise.".to_string(), own.to_string()),
        "MERGE" => (
            format!("Each response has strengths; combining {} gives the most complete answer.", labels.join(", ")),
            format!("{own}\n\nMerged in from the other responses: their examples and caveats, which round out the answer."),
        ),
        _ => (
            format!("{other} made a point my answer missed."),
            format!("{own}\n\nRevised after reading {other}: one more consideration is how the choice holds up over time."),
        ),
    };
    let hostile = ask.hostile_paragraph();
    let reply = json!({
        "reasoning": format!("[simulated revision from {}] {hostile}{reason}", ask.model)
            .chars().take(schema::REASONING_MAX_CHARS).collect::<String>(),
        "decision": decision,
        "revised_response": body.chars().take(REVISED_RESPONSE_MAX_CHARS).collect::<String>(),
    });
    debug_assert!(schema.validate(&reply).is_ok());
    Some(reply.to_string())
}

/// A decision word, in English or a few other languages (`REVISAR`, `MAINTENIR`,
/// `ZUSAMMENFÜHREN`).
fn decision_word(word: &str) -> Option<&'static str> {
    match word.to_lowercase().as_str() {
        "revise" | "revisar" | "réviser" | "reviser" | "rivedere" | "überarbeiten"
        | "ueberarbeiten" | "herzien" => Some("REVISE"),
        "stand" | "mantener" | "manter" | "maintenir" | "mantenere" | "beibehalten"
        | "behouden" => Some("STAND"),
        "merge" | "fusionar" | "combinar" | "mesclar" | "fundir" | "fusionner" | "unire"
        | "zusammenführen" | "zusammenfuehren" | "samenvoegen" => Some("MERGE"),
        _ => None,
    }
}

fn decision_labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    // `DECISION: REVISE`, `**Decision:** **MERGE**`, `Decision - stand`, `Choice: b) STAND`,
    // `DECISIÓN: REVISAR`, `DÉCISION : MAINTENIR`, `ENTSCHEIDUNG: ZUSAMMENFÜHREN`.
    L.get_or_init(|| {
        Labels::new(
            r"(?:final\s+|my\s+)?(?:decision|choice)|decisión|decisão|décision|decisione|entscheidung|beslissing",
        )
    })
}

fn reasoning_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)reasoning[*_\s]*:[*_\s]*").unwrap_or_else(|_| unreachable!())
    })
}

fn revised_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?im)^[#>*_\s]*revised\s+response[*_\s]*:[*_]*[ \t]*")
            .unwrap_or_else(|_| unreachable!())
    })
}

/// A revision written as JSON: `{"decision": "REVISE", "reasoning": …, "revised_response":
/// …}` (the last object with a decision that reads as one).
fn json_revision(answer: &str) -> Option<ParsedRevision> {
    json_values(answer).into_iter().rev().find_map(|v| {
        let o = v.as_object()?;
        let field = |keys: &[&str]| {
            keys.iter().find_map(|k| {
                o.iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(k))
                    .and_then(|(_, v)| v.as_str())
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            })
        };
        let word = field(&["decision", "choice"])?;
        let decision = decision_word(word.trim_matches(['*', '_', '[', ']', '.', ' ']))?;
        Some(ParsedRevision {
            decision: Some(decision.to_string()),
            reasoning: field(&["reasoning", "reason"]),
            revised_response: field(&[
                "revised_response",
                "revisedResponse",
                "revised response",
                "response",
                "answer",
            ]),
            unparsed: None,
        })
    })
}

/// Reads a revision from the answer part of the reply (a draft decision in a `<think>` block
/// never counts; a reply whose reasoning never closed has none). The decision is the last one
/// the answer states (`DECISION: X`, a `## Decision` heading with the word under it, JSON, a
/// few other languages), so a model quoting the prompt's template first is read by its own
/// answer; a decision word only mentioned ("I can't decide whether to revise or stand",
/// `[REVISE|STAND|MERGE]`) is none. A JSON revision with a decision is read from its fields.
/// Otherwise the reasoning runs to a blank line or the `REVISED RESPONSE:` marker; the response is everything after the last marker, or, without one, the
/// text after the decision block.
pub fn parse_revision(raw: &str) -> ParsedRevision {
    let split = split_reasoning(raw);
    let none = |why: Unparsed| ParsedRevision {
        decision: None,
        reasoning: None,
        revised_response: None,
        unparsed: Some(why),
    };
    if split.unclosed {
        return none(Unparsed::ReasoningOnly);
    }
    let text = split.answer.as_ref();
    // A revision written as JSON is read as JSON (its fields, not the text around them).
    if let Some(p) = json_revision(text) {
        return p;
    }
    let stated = last_stated(text, decision_labels(), decision_word);
    let decision = stated.map(|s| s.value.to_string());
    let after_decision = stated.map_or(0, |s| s.end);
    let revised_m = revised_re().find_iter(text).filter(|m| m.start() >= after_decision).last();
    let reasoning =
        reasoning_re().find_iter(text).filter(|m| m.start() >= after_decision).last().and_then(
            |m| {
                let rest = &text[m.end()..];
                let end = [rest.find("\n\n"), revised_re().find(rest).map(|r| r.start())]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(rest.len());
                let r = rest[..end].trim();
                (!r.is_empty()).then(|| r.to_string())
            },
        );
    let revised_response = match revised_m {
        Some(m) => Some(text[m.end()..].trim().to_string()).filter(|s| !s.is_empty()),
        None if decision.is_some() => {
            // No marker: the text after the REASONING line (or the decision line).
            let tail = &text[after_decision..];
            let tail = match reasoning_re().find(tail) {
                Some(r) => tail[r.end()..].split_once('\n').map_or("", |(_, rest)| rest),
                None => tail.split_once('\n').map_or("", |(_, rest)| rest),
            };
            Some(tail.trim().to_string()).filter(|s| !s.is_empty())
        }
        None => None,
    };
    let unparsed = decision.is_none().then(|| Unparsed::of(raw));
    ParsedRevision { decision, reasoning, revised_response, unparsed }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionResponse {
    pub model: String,
    pub decision: Option<String>,
    pub reasoning: Option<String>,
    pub original_response: String,
    pub revised_response: String,
    pub original_word_count: usize,
    pub revised_word_count: usize,
    pub response_time_ms: i64,
    pub parse_success: bool,
    /// Why no decision was read from the debater's reply: `refused`, `reasoning_only` or
    /// `no_answer`. Null when one was, or when the call failed (no reply to read).
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
    /// Where the decision was read from (the reply's JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A round-one answer as others read it and as it stands in for a revision: without its
/// reasoning.
fn plain(response: &str) -> String {
    answer_text(response).into_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSummary {
    pub total_models: usize,
    pub revised: usize,
    pub stood: usize,
    pub merged: usize,
    pub parse_failed: usize,
}

pub fn summarize(revisions: &[RevisionResponse]) -> RevisionSummary {
    let count = |d: &str| revisions.iter().filter(|r| r.decision.as_deref() == Some(d)).count();
    RevisionSummary {
        total_models: revisions.len(),
        revised: count("REVISE"),
        stood: count("STAND"),
        merged: count("MERGE"),
        parse_failed: revisions.iter().filter(|r| r.decision.is_none()).count(),
    }
}

/// The revision of one debater from its reply (or its original answer when the call failed),
/// read from its JSON where it fits `schema`.
fn revision_of(
    original: &Answer,
    reply: Option<&CallReply>,
    schema: &ReplySchema,
) -> (RevisionResponse, Option<String>) {
    let (text, ms) = match reply {
        Some(r) => (r.result.as_ref().ok().cloned(), r.response_time_ms as i64),
        None => (None, 0),
    };
    let read = text.as_deref().map(|t| parse_revision_reply(t, schema));
    let read_from = read.as_ref().and_then(|(_, from)| *from);
    let parsed = read.map(|(p, _)| p);
    let decision = parsed.as_ref().and_then(|p| p.decision.clone());
    let unparsed = parsed.as_ref().and_then(|p| p.unparsed);
    let revised = match (&parsed, decision.as_deref()) {
        // A decision with no response text repeats the original (as the prompt asks of STAND).
        (Some(p), Some(_)) => {
            p.revised_response.clone().unwrap_or_else(|| plain(&original.response))
        }
        // No decision in a readable reply: its answer is the best-effort revision. A refusal
        // or a reply that never finished thinking keeps the original.
        (Some(_), None) if unparsed == Some(Unparsed::NoAnswer) => text
            .as_deref()
            .map(plain)
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| plain(&original.response)),
        _ => plain(&original.response),
    };
    let r = RevisionResponse {
        model: original.model.clone(),
        decision: decision.clone(),
        reasoning: parsed.as_ref().and_then(|p| p.reasoning.clone()),
        original_word_count: word_count(&original.response),
        revised_word_count: word_count(&revised),
        original_response: original.response.clone(),
        revised_response: revised,
        response_time_ms: ms,
        parse_success: decision.is_some(),
        unparsed,
        read_from,
    };
    (r, text)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DebateWinnerResult {
    pub winner_label: String,
    pub winner_model: String,
    pub winner_response: String,
    pub winner_decision: Option<String>,
    pub vote_count: usize,
    pub total_votes: usize,
    pub tiebroken: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiebreaker_method: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Revising,
    Voting,
    Done,
}

pub struct Debate {
    config: DebateConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    round1: Vec<Answer>,
    round1_labels: BTreeMap<String, usize>,
    revisions: Vec<RevisionResponse>,
    revised_labels: BTreeMap<String, usize>,
    /// The debaters' revision schema, built once for the run.
    revision_schema: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

/// The `stage_order` of a debate stage's calls.
fn stage_order(stage: &str) -> i32 {
    match stage {
        "round1" => 1,
        "revision" => 2,
        _ => 5,
    }
}

fn map_models(
    labels: &BTreeMap<String, usize>,
    models: impl Fn(usize) -> String,
) -> BTreeMap<String, String> {
    labels.iter().map(|(l, i)| (l.clone(), models(*i))).collect()
}

impl Debate {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: DebateConfig = stored_config("debate", config)?;
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let n = config.models.len();
        Ok(Debate {
            config,
            ctx,
            phase: Phase::Answering,
            batch: Batch::new("round1", n),
            round1: Vec::new(),
            round1_labels: BTreeMap::new(),
            revisions: Vec::new(),
            revised_labels: BTreeMap::new(),
            revision_schema: revision_schema(),
            title,
            calls: Calls::default(),
        })
    }

    /// The model a member stands for: summaries name members (`m #2` when `m` sits on the
    /// panel twice), calls go to the model.
    fn model_of<'a>(&'a self, member: &'a str) -> &'a str {
        let names = member_names(&self.config.models);
        names.iter().position(|n| n == member).map_or(member, |i| &self.config.models[i])
    }

    fn call(&self, key: String, member: &str, prompt: String, stage: &str, role: &str) -> Effect {
        Effect::Call(CallSpec::new(
            key,
            self.model_of(member),
            vec![ChatMessage::user(prompt)],
            stage,
            role,
            self.config.timeout_ms,
        ))
    }

    fn fail(&mut self, message: &str) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message.to_string())
    }

    fn on_round1(&mut self) -> Vec<Effect> {
        self.round1 =
            named(self.batch.take(), &self.config.models).iter().filter_map(answer_of).collect();
        match self.round1.len() {
            0 => return self.fail("All models failed to answer."),
            1 => return self.fail("Only 1 model answered; a debate needs at least 2 responses."),
            _ => {}
        }
        let order = create_label_map(self.round1.len(), self.ctx.seed);
        self.round1_labels = order.iter().enumerate().map(|(k, &i)| (label(k), i)).collect();
        let map = map_models(&self.round1_labels, |i| self.round1[i].model.clone());
        let mut out = vec![Effect::Store(StageRow::computed("round1_label_map", 0, json!(map)))];
        out.extend(self.round1.iter().map(|a| {
            Effect::Store(StageRow {
                stage_type: "initial_answer".into(),
                stage_order: 1,
                model: Some(a.model.clone()),
                role: Some("respondent".into()),
                content: a.response.clone(),
                parsed_data: Some(json!({ "responseTimeMs": a.response_time_ms })),
                response_time_ms: Some(a.response_time_ms),
            })
        }));
        out.push(Effect::emit("round1_complete", json!({ "data": self.round1 })));
        out.push(Effect::emit("revision_start", json!({ "data": { "labelMap": map } })));
        // Each debater gets its own prompt: its answer, and everyone else's under their labels.
        self.batch = Batch::new("revision", self.round1.len());
        for (i, own) in self.round1.iter().enumerate() {
            let others: Vec<(String, String)> = self
                .round1_labels
                .iter()
                .filter(|(_, j)| **j != i)
                .map(|(l, j)| (l.clone(), plain(&self.round1[*j].response)))
                .collect();
            let mine = plain(&own.response);
            // Each prompt is its debater's own, so each is built in the one form it is asked in.
            let model = self.model_of(&own.model).to_string();
            let asked = self.ctx.structured.json(&model).then_some(self.revision_schema.as_ref());
            let prompt = revision_prompt_as(&self.ctx.question, &mine, &others, asked);
            let call = CallSpec::new(
                self.batch.key(i),
                &model,
                vec![ChatMessage::user(prompt)],
                "revision",
                "debater",
                self.config.timeout_ms,
            )
            .with_schema(&self.revision_schema)
            .quoting(std::iter::once(("your original response".to_string(), mine)).chain(others));
            out.push(Effect::Call(call));
        }
        self.phase = Phase::Revising;
        out
    }

    fn on_revisions(&mut self) -> Vec<Effect> {
        let replies = self.batch.take();
        let mut out = Vec::new();
        self.revisions = Vec::new();
        for (i, original) in self.round1.iter().enumerate() {
            let (rev, text) = revision_of(original, replies.get(i), &self.revision_schema);
            if let Some(text) = text {
                let mut parsed = json!({
                    "debater": i,
                    "decision": rev.decision, "reasoning": rev.reasoning,
                    "originalWordCount": rev.original_word_count,
                    "revisedWordCount": rev.revised_word_count,
                    "revisedResponse": rev.revised_response,
                    "parseSuccess": rev.parse_success,
                    "unparsed": rev.unparsed,
                });
                if let Some(from) = rev.read_from {
                    parsed["readFrom"] = json!(from);
                }
                out.push(Effect::Store(StageRow {
                    stage_type: "revision".into(),
                    stage_order: 2,
                    model: Some(rev.model.clone()),
                    role: Some("debater".into()),
                    content: text,
                    parsed_data: Some(parsed),
                    response_time_ms: Some(rev.response_time_ms),
                }));
            }
            self.revisions.push(rev);
        }
        let summary = summarize(&self.revisions);
        out.push(Effect::Store(StageRow::computed("revision_summary", 3, json!(summary))));
        out.push(Effect::emit(
            "revision_complete",
            json!({ "data": { "revisions": self.revisions, "summary": summary } }),
        ));
        // A fresh shuffle for the vote, so a letter seen during revision says nothing.
        let order = create_label_map(self.revisions.len(), self.ctx.seed ^ VOTE_SALT);
        self.revised_labels = order.iter().enumerate().map(|(k, &i)| (label(k), i)).collect();
        let map = map_models(&self.revised_labels, |i| self.revisions[i].model.clone());
        out.push(Effect::Store(StageRow::computed("revised_label_map", 4, json!(map))));
        out.push(Effect::emit("vote_start", json!({ "data": { "revisedLabelMap": map } })));
        let labeled: Vec<(String, String)> = self
            .revised_labels
            .iter()
            .map(|(l, i)| (l.clone(), self.revisions[*i].revised_response.clone()))
            .collect();
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        let asking = Asking::new(vote_schema("debate_vote", &labels), |json| {
            vote_prompt_as(&self.ctx.question, &labeled, json)
        });
        self.batch = Batch::new("vote", self.revisions.len());
        for i in 0..self.revisions.len() {
            let model = self.model_of(&self.revisions[i].model).to_string();
            let call = asking.call(
                &self.ctx,
                self.batch.key(i),
                &model,
                "vote",
                "voter",
                self.config.timeout_ms,
            );
            out.push(Effect::Call(call.quoting(labeled.clone())));
        }
        let first = self.model_of(&self.round1[0].model).to_string();
        out.extend(self.title.call(
            &first,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        self.phase = Phase::Voting;
        out
    }

    fn on_votes(&mut self) -> Vec<Effect> {
        let labels: Vec<String> = self.revised_labels.keys().cloned().collect();
        // Voter `i` is the debater of revision `i` (members whose first answer failed are
        // not in the vote): its ballot goes under that member's name.
        let voters: Vec<CallReply> = self
            .batch
            .take()
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                if let Some(rev) = self.revisions.get(i) {
                    r.model = rev.model.clone();
                }
                r
            })
            .collect();
        let ballots = cast(voters, &labels, &vote_schema("debate_vote", &labels));
        let mut out = ballot_rows(&ballots, "debate_vote", 5);
        let map = map_models(&self.revised_labels, |i| self.revisions[i].model.clone());
        let (result, t) = round(&ballots, "revisedLabelToModel", &map);
        out.push(Effect::Store(StageRow::computed("debate_vote_tally", 6, json!(t))));
        out.push(Effect::emit("vote_complete", json!({ "data": result })));
        if t.valid_vote_count == 0 {
            out.extend(self.fail("All votes failed to parse."));
            return out;
        }
        // N-way ties go to the first label alphabetically: peers only, no chairman.
        let (winner_label, tiebroken) = if t.is_tie {
            (first_alphabetically(&t.tied_labels).unwrap_or_default(), true)
        } else {
            (t.winners.first().cloned().unwrap_or_default(), false)
        };
        let Some(&i) = self.revised_labels.get(&winner_label) else {
            out.extend(self.fail("internal error: the winning label is not in the label map"));
            return out;
        };
        let w = &self.revisions[i];
        let winner = DebateWinnerResult {
            winner_label: winner_label.clone(),
            winner_model: w.model.clone(),
            winner_response: w.revised_response.clone(),
            winner_decision: w.decision.clone(),
            vote_count: t.tallies.get(&winner_label).copied().unwrap_or(0),
            total_votes: t.valid_vote_count,
            tiebroken,
            tiebreaker_method: tiebroken.then(|| "alphabetical".to_string()),
        };
        let mut parsed = json!(winner);
        if let Some(o) = parsed.as_object_mut() {
            o.remove("winnerResponse");
        }
        out.push(Effect::Store(StageRow {
            stage_type: "debate_winner".into(),
            stage_order: 7,
            model: Some(w.model.clone()),
            role: Some("winner".into()),
            content: w.revised_response.clone(),
            parsed_data: Some(parsed),
            response_time_ms: None,
        }));
        let mut declared = json!({ "data": winner });
        self.calls.mark(&mut declared);
        out.push(Effect::emit("winner_declared", declared));
        self.phase = Phase::Done;
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: winner.winner_response });
        out
    }
}

impl Mode for Debate {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::emit(
                "debate_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id, "mode": "debate" }),
            ),
            Effect::emit("round1_start", json!({})),
        ];
        for (i, model) in self.config.models.iter().enumerate() {
            out.push(self.call(
                self.batch.key(i),
                model,
                self.ctx.question.clone(),
                "round1",
                "respondent",
            ));
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
        if self.phase == Phase::Done || !self.batch.accept(routed.reply) || !self.batch.complete() {
            return out;
        }
        out.extend(match self.phase {
            Phase::Answering => self.on_round1(),
            Phase::Revising => self.on_revisions(),
            Phase::Voting => self.on_votes(),
            Phase::Done => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }
}

/// `DebateResult` from stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let of = |t: &'static str| rows.iter().filter(move |r| r.stage_type == t);
    let map_of = |t: &'static str| -> BTreeMap<String, String> {
        of(t)
            .next()
            .and_then(|r| r.parsed_data.clone())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    };
    let round1: Vec<Answer> = of("initial_answer")
        .map(|r| Answer {
            model: r.model.clone().unwrap_or_default(),
            response: r.content.clone(),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        })
        .collect();
    let revised_map = map_of("revised_label_map");
    let revision_rows: Vec<&StageRow> = of("revision").collect();
    // Debaters whose revision call failed have no row: they keep their original answer.
    let revisions: Vec<RevisionResponse> = if of("revision_summary").next().is_none() {
        Vec::new()
    } else {
        round1
            .iter()
            .enumerate()
            .map(|(i, a)| {
                // Rows carry the debater's index: duplicate models stay distinct.
                let row = revision_rows.iter().find(|r| {
                    r.parsed_data.as_ref().and_then(|d| d.get("debater")).and_then(Value::as_u64)
                        == Some(i as u64)
                });
                let pd = row.and_then(|r| r.parsed_data.clone()).unwrap_or(Value::Null);
                let s = |k: &str| pd.get(k).and_then(Value::as_str).map(str::to_string);
                let revised = s("revisedResponse").unwrap_or_else(|| plain(&a.response));
                RevisionResponse {
                    model: a.model.clone(),
                    decision: s("decision"),
                    reasoning: s("reasoning"),
                    original_word_count: word_count(&a.response),
                    revised_word_count: word_count(&revised),
                    original_response: a.response.clone(),
                    revised_response: revised,
                    response_time_ms: row.and_then(|r| r.response_time_ms).unwrap_or(0),
                    parse_success: pd.get("parseSuccess").and_then(Value::as_bool).unwrap_or(false),
                    unparsed: serde_json::from_value(pd["unparsed"].clone()).unwrap_or(None),
                    read_from: serde_json::from_value(pd["readFrom"].clone()).unwrap_or(None),
                }
            })
            .collect()
    };
    let ballots = ballots_from_rows(rows, "debate_vote");
    let votes = of("debate_vote_tally")
        .next()
        .map(|_| round(&ballots, "revisedLabelToModel", &revised_map).0);
    let winner = of("debate_winner").next().map(|r| {
        let mut w = r.parsed_data.clone().unwrap_or(json!({}));
        w["winnerResponse"] = json!(r.content);
        w
    });
    let mut result = json!({
        "round1": round1,
        "round1LabelMap": map_of("round1_label_map"),
        "revisions": revisions,
        "revisionSummary": (!revisions.is_empty()).then(|| summarize(&revisions)),
        "revisedLabelMap": revised_map,
        "votes": votes,
        "winner": winner,
    });
    mark_from_rows(&mut result, rows);
    result
}

#[cfg(test)]
#[path = "debate_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: each debater's decision after reading the others (a
/// table, with the length of its answer before and after), then the vote on the revised
/// answers (Vote's tally: each answer, whose, its votes, the winner and how a tie was broken,
/// each vote) and what the winner's debater had done.
pub fn report(result: &Value) -> String {
    use super::report::table;
    let mut out = String::new();
    let revisions = result["revisions"].as_array().cloned().unwrap_or_default();
    if !revisions.is_empty() {
        let s = &result["revisionSummary"];
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        let mut parts = vec![
            format!("{} revised", n("revised")),
            format!("{} stood by their answer", n("stood")),
            format!("{} merged", n("merged")),
        ];
        if n("parseFailed") > 0 {
            parts.push(format!("{} without a readable decision", n("parseFailed")));
        }
        out.push_str(&format!(
            "**Revisions** after reading the others' answers: {}.\n\n",
            parts.join(", ")
        ));
        let rows: Vec<Vec<String>> = revisions
            .iter()
            .map(|r| {
                let decision = match r["decision"].as_str() {
                    Some("REVISE") => "revised".to_string(),
                    Some("STAND") => "stood by its answer".to_string(),
                    Some("MERGE") => "merged".to_string(),
                    Some(other) => other.to_lowercase(),
                    None => match serde_json::from_value::<Unparsed>(r["unparsed"].clone()) {
                        Ok(u) => format!("unread (it {})", u.describe()),
                        Err(_) => "no revision (its call failed; its first answer stands)".into(),
                    },
                };
                let words = |k: &str| r[k].as_u64().map_or(String::new(), |n| n.to_string());
                vec![
                    r["model"].as_str().unwrap_or("").to_string(),
                    decision,
                    words("originalWordCount"),
                    words("revisedWordCount"),
                ]
            })
            .collect();
        out.push_str(&table(
            &["debater", "decision", "words before", "words after"],
            &rows,
            &[2, 3],
        ));
        out.push('\n');
    }
    let votes = &result["votes"];
    if votes.is_object() {
        let mut round = votes.clone();
        round["labelToModel"] = votes["revisedLabelToModel"].clone();
        if !round["labelToModel"].is_object() {
            round["labelToModel"] = result["revisedLabelMap"].clone();
        }
        let winner = &result["winner"];
        out.push_str("**The vote on the revised answers:**\n\n");
        out.push_str(&super::voting::tally_report(&round, winner, &Value::Null));
        let done = match winner["winnerDecision"].as_str() {
            Some("REVISE") => Some("revised its first answer after reading the others"),
            Some("STAND") => Some("stood by its first answer"),
            Some("MERGE") => Some("merged the others' points into its answer"),
            _ => None,
        };
        if let (Some(model), Some(done)) = (winner["winnerModel"].as_str(), done) {
            out.push_str(&format!("\nThe winner, {model}, had {done}.\n"));
        }
    }
    out
}
