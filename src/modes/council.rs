//! Council mode (seed 01): every member answers, every member ranks the anonymised answers,
//! the chairman synthesises. A title is generated alongside the synthesis for new
//! conversations.
//!
//! Decisions where the seed is silent:
//! - Every council member ranks in stage 2, including one whose stage-1 answer failed (the
//!   seed: "All council models rank"); a member that fails to rank is simply absent.
//! - The title call goes to the chairman. Its `title_complete` is held until
//!   `stage3_complete` has gone out, so the seed's event order holds whichever finishes first.
//! - A new conversation whose run fails still gets a fallback title (the question's first
//!   words), without a `title_complete` event.
//! - A failing chairman is replaced once by the configured backup (`[fallback] chairman`),
//!   with the same prompt; `stage3` then says `fallbackFrom`. The title stays with the
//!   primary chairman (a failed title falls back to the question anyway).

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    answer_of, create_label_map, label, mark_from_rows, named, role_failed, title_prompt,
    with_history, Batch, Calls, Routed, TitleTracker, TITLE_KEY,
};
use super::ranking;
use super::reading::{answer_text, readable, Unparsed};
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role};
use super::request::ModelId;
use super::schema::{Asking, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, Defaults, Effect, Fallbacks, FieldError, Mode, RunContext,
    StageRow, ValidRequest,
};

/// History a follow-up carries (the seed: "truncated to the last 10 turns").
pub const HISTORY_TURNS: usize = 10;
pub const MIN_MODELS: usize = 2;
pub const MAX_MODELS: usize = 6;
pub const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 10_000..=600_000;

const SIM_DEFAULTS: [&str; 3] = ["sim/alpha", "sim/beta", "sim/gamma"];
const SIM_CHAIRMAN: &str = "sim/alpha";
const SEED_DEFAULTS: [&str; 3] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro"];
const SEED_CHAIRMAN: &str = "anthropic/claude-opus-4-6";

/// The normalised configuration stored with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CouncilConfig {
    pub council_models: Vec<String>,
    pub chairman_model: String,
    pub timeout_ms: u64,
    /// The server's backup chairman (`[fallback] chairman`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chairman_fallback_model: Option<String>,
}

/// Council's settings: in `modeConfig`, or at the top level of the request (the seed's shape).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CouncilRequest {
    /// The council: 2 to 6 models that answer and rank each other's answers (the same model
    /// twice is two members).
    #[schemars(length(min = 2, max = 6))]
    pub council_models: Option<Vec<ModelId>>,
    /// Writes the synthesis; may also sit on the council.
    pub chairman_model: Option<ModelId>,
    /// Per-stage timeout in milliseconds.
    #[schemars(range(min = 10000, max = 600000))]
    pub timeout_ms: Option<i64>,
}

/// The keys Council takes at the top level of a request as well as in `modeConfig`.
const TOP_LEVEL: &[&str] = &["councilModels", "chairmanModel", "timeoutMs"];

/// Validates a council request (the seed's schema, plus `timeoutMs`). Its settings may sit at
/// the top level (the seed's shape) or in `modeConfig`, not both; errors name them where
/// they were given.
fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let in_config = request::mode_config(body, false)?;
    let at_top: serde_json::Map<String, Value> = TOP_LEVEL
        .iter()
        .filter_map(|k| body.get(*k).filter(|v| !v.is_null()).map(|v| (k.to_string(), v.clone())))
        .collect();
    let (cfg, prefix) = match (at_top.is_empty(), in_config.is_empty()) {
        (false, false) => {
            return Err(FieldError::new(
                "modeConfig",
                "give Council's settings at the top level or in modeConfig, not both",
            ))
        }
        (false, true) => (at_top, ""),
        _ => (in_config, "modeConfig."),
    };
    let cfg: CouncilRequest = request::typed(&cfg, "modeConfig")?;
    let name = |k: &str| format!("{prefix}{k}");
    let council_models = request::models(
        cfg.council_models.as_deref(),
        &name("councilModels"),
        MIN_MODELS..=MAX_MODELS,
        None,
        None,
    )?
    .unwrap_or_else(|| request::ids(if defaults.offline { &SIM_DEFAULTS } else { &SEED_DEFAULTS }));
    let chairman_model = request::model(cfg.chairman_model.as_ref(), &name("chairmanModel"))?
        .unwrap_or_else(|| {
            (if defaults.offline { SIM_CHAIRMAN } else { SEED_CHAIRMAN }).to_string()
        });
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        &name("timeoutMs"),
        TIMEOUT_RANGE_MS,
        defaults.stage_timeout_ms,
    )?;
    let models = request::distinct(&[&council_models], &[&chairman_model]);
    let chairman_fallback_model = Fallbacks::for_role(&defaults.fallback.chairman, &chairman_model);
    let config =
        CouncilConfig { council_models, chairman_model, timeout_ms, chairman_fallback_model };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Council in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "council",
    label: "Council",
    description:
        "Every member answers, every member ranks the anonymised answers, the chairman synthesises.",
    multi_turn: true,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role {
            id: "council",
            label: "Council members",
            field: Some("councilModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_DEFAULTS,
            default: &SEED_DEFAULTS,
        },
        Role {
            id: "chairman",
            label: "Chairman",
            field: Some("chairmanModel"),
            panel: false,
            fallback: Some("chairman"),
            sim_default: &[SIM_CHAIRMAN],
            default: &[SEED_CHAIRMAN],
        },
        Role::internal("title", "Title"),
    ],
    top_level: TOP_LEVEL,
    schema: schema_of::<CouncilRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Council::new(config, ctx)?)),
    load_result,
    outcome: |r| r.pointer("/stage3/response").and_then(Value::as_str).map(|t| short(t, 160)),
    stages: &[],
    report: Some(report),
    example: || json!({ "mode": "council", "question": "Monolith or microservices for a team of five?" }),
    sim: None,
};

// ---- payloads (one definition for live events and stored results) --------------------------

/// A stage-1 answer (`{model, response, responseTimeMs}`), shared with the other modes.
pub type Stage1Response = super::common::Answer;

/// An evaluator's ranking: its text, and what it states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage2Response {
    pub model: String,
    pub ranking: String,
    /// The labels in the stated order (tied ones in the order written); empty when the
    /// evaluator stated no ranking.
    pub parsed_ranking: Vec<String>,
    /// The stated places, best first; a place holds the labels tied in it.
    #[serde(default)]
    pub places: Vec<Vec<String>>,
    /// The ranking names only some of the labels (the others share the places left).
    #[serde(default)]
    pub partial: bool,
    /// Why no ranking was read, when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<Unparsed>,
    /// Where the ranking was read from (its JSON or its text), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
    pub response_time_ms: i64,
}

impl Stage2Response {
    /// The evaluator's places (rows stored before places were recorded hold only the order).
    fn places(&self) -> Vec<Vec<String>> {
        if self.places.is_empty() {
            self.parsed_ranking.iter().map(|l| vec![l.clone()]).collect()
        } else {
            self.places.clone()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregateRanking {
    pub model: String,
    pub label: String,
    pub average_rank: f64,
    /// Rankings counted for this label (every parsed ranking places every label).
    pub rankings_count: usize,
    /// Of those, the rankings that named it; the rest placed it by the partial rule.
    pub named_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage2Metadata {
    pub label_to_model: BTreeMap<String, String>,
    pub aggregate_rankings: Vec<AggregateRanking>,
    /// Evaluators whose ranking was read and counted.
    pub rankings_counted: usize,
    /// Of those, the ones that named only some labels.
    pub partial_rankings: usize,
    /// Evaluators that answered but stated no ranking (left out of the aggregate).
    pub unparsed_rankings: usize,
}

/// The synthesis (`{model, response, responseTimeMs, fallbackFrom?}`): `model` is the one that
/// wrote it, and `fallbackFrom` the chairman it stood in for when the backup wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage3Response {
    pub model: String,
    pub response: String,
    pub response_time_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// The `stage_order` of a council stage.
fn stage_order(stage: &str) -> i32 {
    match stage {
        "stage1" => 1,
        "stage2" => 2,
        _ => 3,
    }
}

// ---- prompts (verbatim from the seed) -------------------------------------------------------

/// The seed's ranking prompt; `labeled` is (label, response) in label order.
pub fn ranking_prompt(question: &str, labeled: &[(String, String)]) -> String {
    ranking_prompt_as(question, labeled, None)
}

/// The ranking prompt asking for the seed's `FINAL RANKING:` section, or, given the stage's
/// schema, for its JSON instead (the same instructions otherwise).
pub fn ranking_prompt_as(
    question: &str,
    labeled: &[(String, String)],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = String::from(
        "You are an expert evaluator. Below is a question and several responses from different sources. Your task is to evaluate each response and rank them from best to worst.\n\n",
    );
    p.push_str(&format!("Question: {question}\n\n"));
    for (l, response) in labeled {
        p.push_str(&format!("--- {l} ---\n{response}\n\n"));
    }
    p.push_str(
        "Instructions:\n\
1. Evaluate each response for accuracy, completeness, clarity, and helpfulness.\n\
2. Consider the strengths and weaknesses of each response.\n\
3. Provide your ranking from best to worst.\n\
\n",
    );
    match schema {
        Some(schema) => p.push_str(&schema.instruction()),
        None => p.push_str(
            "CRITICAL: You MUST end your response with a section titled \"FINAL RANKING:\" followed by a numbered list. Each item must be ONLY the response label (e.g., \"Response A\"). Example:\n\
\n\
FINAL RANKING:\n\
1. Response C\n\
2. Response A\n\
3. Response B\n\
\n\
Do not include any other text in the FINAL RANKING section.",
        ),
    }
    p
}

/// The seed's synthesis prompt (answers under their real model names).
pub fn synthesis_prompt(
    question: &str,
    stage1: &[Stage1Response],
    stage2: &[Stage2Response],
) -> String {
    let mut p = String::from(
        "You are a chairman synthesizing the best possible answer from multiple AI model responses and their peer evaluations.\n\n",
    );
    p.push_str(&format!("Original Question: {question}\n\nSTAGE 1 — Individual Responses:\n\n"));
    for r in stage1 {
        p.push_str(&format!("--- {} ---\n{}\n\n", r.model, answer_text(&r.response)));
    }
    p.push_str("STAGE 2 — Peer Rankings:\n\n");
    for r in stage2 {
        p.push_str(&format!("--- Evaluator: {} ---\n{}\n\n", r.model, readable(&r.ranking)));
    }
    p.push_str(
        "Synthesize the best possible answer to the original question. Consider:\n\
1. The individual responses and their unique insights\n\
2. The peer rankings and which responses were consistently rated highly\n\
3. Areas of agreement and disagreement across responses\n\
4. Any important nuances or caveats that individual responses captured\n\
\n\
Provide a comprehensive, well-structured synthesis that represents the collective intelligence of all the models.",
    );
    p
}

// ---- parsing and aggregation ----------------------------------------------------------------

/// Reads an evaluator's ranking (see [`super::ranking`]: only a stated ranking counts).
pub use super::ranking::parse_ranking;

/// Average position of each label over the evaluators whose ranking parsed, by the fractional
/// rule of [`super::ranking`] (tied labels share their places' mean; labels a partial ranking
/// leaves out share the places left); sorted best first (ties by label). `label_to_model`
/// names each label's member.
pub fn aggregate_rankings(
    stage2: &[Stage2Response],
    label_to_model: &BTreeMap<String, String>,
) -> Vec<AggregateRanking> {
    let labels: Vec<String> = label_to_model.keys().cloned().collect();
    let rankings: Vec<Vec<Vec<String>>> = stage2.iter().map(Stage2Response::places).collect();
    ranking::aggregate(&rankings, &labels)
        .into_iter()
        .map(|s| AggregateRanking {
            model: label_to_model.get(&s.label).cloned().unwrap_or_default(),
            label: s.label,
            average_rank: s.average_rank,
            rankings_count: s.rankings_count,
            named_count: s.named_count,
        })
        .collect()
}

fn metadata(
    stage2: &[Stage2Response],
    label_to_model: &BTreeMap<String, String>,
) -> Stage2Metadata {
    let counted = stage2.iter().filter(|r| !r.parsed_ranking.is_empty()).count();
    Stage2Metadata {
        label_to_model: label_to_model.clone(),
        aggregate_rankings: aggregate_rankings(stage2, label_to_model),
        rankings_counted: counted,
        partial_rankings: stage2.iter().filter(|r| r.partial).count(),
        unparsed_rankings: stage2.len() - counted,
    }
}

/// An evaluator's reply as a [`Stage2Response`], read from its JSON when it fits `schema`.
fn stage2_response(
    model: String,
    text: String,
    labels: &[String],
    schema: &ReplySchema,
    ms: u64,
) -> Stage2Response {
    let read = ranking::read_ranking_reply(&text, labels, schema);
    Stage2Response {
        model,
        parsed_ranking: read.order(),
        partial: read.partial(labels.len()),
        places: read.places,
        unparsed: read.unparsed,
        read_from: read.read_from,
        ranking: text,
        response_time_ms: ms as i64,
    }
}

/// What a `stage2` row stores as parsed data (the seed's `parsedRanking`, and how it was read).
fn stage2_parsed(r: &Stage2Response) -> Value {
    let mut v =
        json!({ "parsedRanking": r.parsed_ranking, "places": r.places, "partial": r.partial });
    if let Some(u) = r.unparsed {
        v["unparsed"] = json!(u);
    }
    if let Some(from) = r.read_from {
        v["readFrom"] = json!(from);
    }
    v
}

fn stage2_complete(stage2: &[Stage2Response], label_to_model: &BTreeMap<String, String>) -> Value {
    json!({ "data": stage2, "metadata": metadata(stage2, label_to_model) })
}

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Ranking,
    Synthesising,
    Done,
}

pub struct Council {
    config: CouncilConfig,
    ctx: RunContext,
    phase: Phase,
    /// Replies of the current stage, by member index.
    batch: Batch,
    stage1: Vec<Stage1Response>,
    label_to_model: BTreeMap<String, String>,
    stage2: Vec<Stage2Response>,
    /// The ranking's reply schema, once the labels are known.
    ranking_schema: Option<Arc<ReplySchema>>,
    title: TitleTracker,
    calls: Calls,
}

impl Council {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: CouncilConfig = stored_config("council", config)?;
        let members = config.council_models.len();
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(Council {
            config,
            ctx,
            phase: Phase::Answering,
            batch: Batch::new("stage1", members),
            stage1: Vec::new(),
            label_to_model: BTreeMap::new(),
            stage2: Vec::new(),
            ranking_schema: None,
            title,
            calls: Calls::default(),
        })
    }

    fn call(
        &self,
        key: String,
        model: &str,
        prompt_messages: Vec<super::ChatMessage>,
        stage: &str,
        role: &str,
    ) -> Effect {
        Effect::Call(CallSpec::new(
            key,
            model,
            prompt_messages,
            stage,
            role,
            self.config.timeout_ms,
        ))
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.title.fail(message)
    }

    fn on_stage1(&mut self, reply: CallReply) -> Vec<Effect> {
        if !self.batch.accept(reply) || !self.batch.complete() {
            return Vec::new();
        }
        self.stage1 = named(self.batch.take(), &self.config.council_models)
            .iter()
            .filter_map(answer_of)
            .collect();
        match self.stage1.len() {
            0 => return self.fail("All council models failed to respond.".into()),
            1 => {
                return self.fail(
                    "Only 1 council model answered; at least 2 responses are required for ranking."
                        .into(),
                )
            }
            _ => {}
        }
        let mut out: Vec<Effect> = self
            .stage1
            .iter()
            .map(|r| {
                Effect::Store(StageRow {
                    stage_type: "stage1".into(),
                    stage_order: 1,
                    model: Some(r.model.clone()),
                    role: Some("council".into()),
                    content: r.response.clone(),
                    parsed_data: None,
                    response_time_ms: Some(r.response_time_ms),
                })
            })
            .collect();
        out.push(Effect::emit("stage1_complete", json!({ "data": self.stage1 })));

        // Stage 2: anonymise with a per-run shuffle and ask every member to rank.
        let order = create_label_map(self.stage1.len(), self.ctx.seed);
        let mut labeled = Vec::with_capacity(order.len());
        for (k, &idx) in order.iter().enumerate() {
            let l = label(k);
            let answer = &self.stage1[idx];
            self.label_to_model.insert(l.clone(), answer.model.clone());
            out.push(Effect::Store(StageRow {
                stage_type: "label_map".into(),
                stage_order: 2,
                model: Some(answer.model.clone()),
                role: None,
                content: l.clone(),
                parsed_data: Some(json!({ "label": l })),
                response_time_ms: None,
            }));
            // Rankers read the answer, not the reasoning behind it.
            labeled.push((l, answer_text(&answer.response).into_owned()));
        }
        out.push(Effect::emit("stage2_start", json!({})));
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        let asking = Asking::new(ranking::ranking_schema("council_ranking", &labels), |json| {
            ranking_prompt_as(&self.ctx.question, &labeled, json)
        });
        self.batch = Batch::new("stage2", self.config.council_models.len());
        for (i, model) in self.config.council_models.iter().enumerate() {
            let key = self.batch.key(i);
            let call =
                asking.call(&self.ctx, key, model, "stage2", "council", self.config.timeout_ms);
            out.push(Effect::Call(call.quoting(labeled.clone())));
        }
        self.ranking_schema = Some(asking.schema);
        self.phase = Phase::Ranking;
        out
    }

    fn on_stage2(&mut self, reply: CallReply) -> Vec<Effect> {
        if !self.batch.accept(reply) || !self.batch.complete() {
            return Vec::new();
        }
        let labels: Vec<String> = self.label_to_model.keys().cloned().collect();
        let schema = self
            .ranking_schema
            .clone()
            .unwrap_or_else(|| ranking::ranking_schema("council_ranking", &labels));
        self.stage2 = named(self.batch.take(), &self.config.council_models)
            .into_iter()
            .filter_map(|r| {
                r.result.ok().map(|text| {
                    stage2_response(r.model, text, &labels, &schema, r.response_time_ms)
                })
            })
            .collect();
        let mut out: Vec<Effect> = self
            .stage2
            .iter()
            .map(|r| {
                Effect::Store(StageRow {
                    stage_type: "stage2".into(),
                    stage_order: 2,
                    model: Some(r.model.clone()),
                    role: Some("council".into()),
                    content: r.ranking.clone(),
                    parsed_data: Some(stage2_parsed(r)),
                    response_time_ms: Some(r.response_time_ms),
                })
            })
            .collect();
        out.push(Effect::emit(
            "stage2_complete",
            stage2_complete(&self.stage2, &self.label_to_model),
        ));

        out.push(Effect::emit("stage3_start", json!({})));
        let prompt = synthesis_prompt(&self.ctx.question, &self.stage1, &self.stage2);
        let messages = with_history(&self.ctx.history, HISTORY_TURNS, &prompt);
        let chairman = self.config.chairman_model.clone();
        let material =
            self.stage1
                .iter()
                .map(|r| (format!("{}'s answer", r.model), answer_text(&r.response).into_owned()))
                .chain(self.stage2.iter().map(|r| {
                    (format!("{}'s ranking", r.model), readable(&r.ranking).into_owned())
                }));
        let spec = CallSpec::new(
            "stage3",
            &chairman,
            messages,
            "stage3",
            "chairman",
            self.config.timeout_ms,
        )
        .quoting(material);
        let backup = self.config.chairman_fallback_model.clone();
        out.push(self.calls.solo(spec, 3, backup.as_deref()));
        out.extend(self.title.call(
            &chairman,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        self.phase = Phase::Synthesising;
        out
    }

    fn on_stage3(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(text) => text.clone(),
            Err(e) => return self.fail(role_failed("chairman", &routed, e)),
        };
        let reply = routed.reply;
        let synthesis = Stage3Response {
            model: reply.model,
            response: text.clone(),
            response_time_ms: reply.response_time_ms as i64,
            fallback_from: routed.fallback_from,
        };
        let mut done = json!({ "data": synthesis });
        self.calls.mark(&mut done);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "stage3".into(),
                stage_order: 3,
                model: Some(synthesis.model.clone()),
                role: Some("chairman".into()),
                content: synthesis.response.clone(),
                parsed_data: synthesis
                    .fallback_from
                    .as_ref()
                    .map(|from| json!({ "fallbackFrom": from })),
                response_time_ms: Some(synthesis.response_time_ms),
            }),
            Effect::emit("stage3_complete", done),
        ];
        self.phase = Phase::Done;
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: text });
        out
    }
}

impl Mode for Council {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![Effect::emit(
            "stage1_start",
            json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id }),
        )];
        let messages = with_history(&self.ctx.history, HISTORY_TURNS, &self.ctx.question);
        for (i, model) in self.config.council_models.iter().enumerate() {
            out.push(self.call(
                format!("stage1:{i}"),
                model,
                messages.clone(),
                "stage1",
                "council",
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
        out.extend(match self.phase {
            Phase::Answering => self.on_stage1(routed.reply),
            Phase::Ranking => self.on_stage2(routed.reply),
            Phase::Synthesising if routed.reply.key == "stage3" => self.on_stage3(routed),
            _ => Vec::new(),
        });
        self.calls.track(&out, stage_order);
        out
    }
}

/// A field of a row's parsed data, when it is there and reads as `T`.
fn parsed_field<T: serde::de::DeserializeOwned>(row: &StageRow, key: &str) -> Option<T> {
    let v = row.parsed_data.as_ref()?.get(key)?;
    serde_json::from_value(v.clone()).ok()
}

/// Rebuilds the seed's `CouncilResult` (without `title`, which lives on the conversation)
/// from stored rows, with the same payload shapes as the live events.
pub fn load_result(rows: &[StageRow]) -> Value {
    fn of<'a>(rows: &'a [StageRow], t: &'a str) -> impl Iterator<Item = &'a StageRow> + 'a {
        rows.iter().filter(move |r| r.stage_type == t)
    }
    let stage1: Vec<Stage1Response> = of(rows, "stage1")
        .map(|r| Stage1Response {
            model: r.model.clone().unwrap_or_default(),
            response: r.content.clone(),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        })
        .collect();
    let label_to_model: BTreeMap<String, String> = of(rows, "label_map")
        .map(|r| {
            let l = r
                .parsed_data
                .as_ref()
                .and_then(|d| d.get("label"))
                .and_then(Value::as_str)
                .unwrap_or(&r.content)
                .to_string();
            (l, r.model.clone().unwrap_or_default())
        })
        .collect();
    let stage2: Vec<Stage2Response> = of(rows, "stage2")
        .map(|r| Stage2Response {
            model: r.model.clone().unwrap_or_default(),
            ranking: r.content.clone(),
            parsed_ranking: parsed_field(r, "parsedRanking").unwrap_or_default(),
            places: parsed_field(r, "places").unwrap_or_default(),
            partial: parsed_field(r, "partial").unwrap_or_default(),
            unparsed: parsed_field(r, "unparsed"),
            read_from: parsed_field(r, "readFrom"),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        })
        .collect();
    let stage3 = of(rows, "stage3").next().map(|r| Stage3Response {
        model: r.model.clone().unwrap_or_default(),
        response: r.content.clone(),
        response_time_ms: r.response_time_ms.unwrap_or(0),
        fallback_from: r
            .parsed_data
            .as_ref()
            .and_then(|d| d.get("fallbackFrom"))
            .and_then(Value::as_str)
            .map(str::to_string),
    });
    let meta = if label_to_model.is_empty() {
        Value::Null
    } else {
        stage2_complete(&stage2, &label_to_model)["metadata"].clone()
    };
    let mut result =
        json!({ "stage1": stage1, "stage2": stage2, "stage2Metadata": meta, "stage3": stage3 });
    mark_from_rows(&mut result, rows);
    result
}

#[cfg(test)]
#[path = "council_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// An average place in words: at most two decimals (`1`, `1.5`, `2.33`).
fn average_words(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The result as the export's report: the aggregate ranking as a table (rank, answer, whose,
/// average place), each member's ranking in a line, and who wrote the synthesis.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let meta = &result["stage2Metadata"];
    let labels = meta["labelToModel"].as_object().cloned().unwrap_or_default();
    let whose = |label: &str| match labels.get(label).and_then(Value::as_str) {
        Some(m) if !m.is_empty() => format!("{label} ({m})"),
        _ => label.to_string(),
    };
    let aggregate = meta["aggregateRankings"].as_array().cloned().unwrap_or_default();
    let stage2 = result["stage2"].as_array().cloned().unwrap_or_default();
    if !aggregate.is_empty() {
        let counted = meta["rankingsCounted"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "**Aggregate ranking** (the average place each answer was given, over {}):\n\n",
            count(counted, "ranking", "rankings")
        ));
        // Equal averages share a rank.
        let (mut rank, mut last) = (0, None);
        let rows: Vec<Vec<String>> = aggregate
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let avg = a["averageRank"].as_f64();
                if avg.is_none() || avg != last {
                    rank = i + 1;
                    last = avg;
                }
                vec![
                    rank.to_string(),
                    a["label"].as_str().unwrap_or("").to_string(),
                    a["model"].as_str().unwrap_or("").to_string(),
                    avg.map_or(String::new(), average_words),
                ]
            })
            .collect();
        out.push_str(&table(&["rank", "answer", "model", "average place"], &rows, &[0, 3]));
        if let Some(n) = meta["partialRankings"].as_u64().filter(|n| *n > 0) {
            out.push_str(&format!(
                "\n{} named only some of the answers; the answers left out share the places left.\n",
                count(n, "ranking", "rankings")
            ));
        }
        out.push('\n');
    } else if !stage2.is_empty() {
        out.push_str("**No aggregate ranking:** no member's ranking could be read.\n\n");
    }
    if !stage2.is_empty() {
        out.push_str("**Each member's ranking**, best first:\n\n");
        for r in &stage2 {
            let model = r["model"].as_str().filter(|m| !m.is_empty()).unwrap_or("a member");
            let mut places: Vec<Vec<String>> =
                serde_json::from_value(r["places"].clone()).unwrap_or_default();
            if places.is_empty() {
                let order: Vec<String> =
                    serde_json::from_value(r["parsedRanking"].clone()).unwrap_or_default();
                places = order.into_iter().map(|l| vec![l]).collect();
            }
            if places.is_empty() {
                let why = serde_json::from_value::<Unparsed>(r["unparsed"].clone())
                    .map_or(String::new(), |u| format!("; it {}", u.describe()));
                out.push_str(&format!("- {model}: no ranking could be read{why}\n"));
                continue;
            }
            let said: Vec<String> = places
                .iter()
                .map(|p| {
                    let tied: Vec<String> = p.iter().map(|l| whose(l)).collect();
                    if tied.len() > 1 {
                        format!("{} (tied)", tied.join(" and "))
                    } else {
                        tied.join("")
                    }
                })
                .collect();
            let partial = if r["partial"] == true { " (names only some answers)" } else { "" };
            out.push_str(&format!("- {model}: {}{partial}\n", said.join(", then ")));
        }
        out.push('\n');
    }
    if let Some(chair) = result["stage3"]["model"].as_str().filter(|m| !m.is_empty()) {
        let standing_in = result["stage3"]["fallbackFrom"]
            .as_str()
            .map_or(String::new(), |f| format!(", the backup standing in for {f}"));
        out.push_str(&format!("**Synthesis** written by the chairman, {chair}{standing_in}.\n"));
    }
    out
}
