//! Chain mode (specs/07-chain.md): 2-6 steps strictly in sequence, each one model with one
//! mandate; step 1 drafts from the question alone, each later step gets only the question, the
//! latest completed version and its mandate, and returns a full improved version. A failed
//! later step is skipped (the next one is told); the answer is the last completed version.
//!
//! Each step is stored the moment it completes or is skipped, so a cancelled or interrupted
//! run keeps (and a resumed one replays) every finished step. Nothing of a reply is parsed but
//! its `[Editor's Note: …]` spans; word counts are the server's.

use std::sync::OnceLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, title_prompt, word_count, Calls, SplitMix64, TitleTracker,
    TITLE_KEY,
};
use super::reading::answer_text;
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::{ModelId, Text};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, FieldError, Mode, RunContext,
    StageRow, ValidRequest,
};

const GLOBAL_TIMER: &str = "global";
/// The row of the chain's plan, stored at the start.
const PLAN: &str = "chain_plan";
const SIM_MODELS: [&str; 4] = ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"];
const SEED_MODELS: [&str; 4] = [
    "anthropic/claude-opus-4-6",
    "openai/o3",
    "google/gemini-2.5-pro",
    "anthropic/claude-sonnet-4",
];
const MAX_CUSTOM_MANDATE: usize = 2000;

/// A step's mandate, from the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mandate {
    Draft,
    StructureDepth,
    AccuracyCompleteness,
    PolishFormat,
    SecurityReview,
    CostAnalysis,
    Accessibility,
    Performance,
    // The step's `customMandate`, verbatim (a doc comment here would make the schema a oneOf).
    Custom,
}

impl Mandate {
    pub fn key(self) -> &'static str {
        self.info().0
    }

    pub fn display(self) -> &'static str {
        self.info().1
    }

    /// What the prompt asks the step to focus on (Custom: its own text).
    pub fn focus(self) -> &'static str {
        self.info().2
    }

    fn info(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Mandate::Draft => ("draft", "Draft", "cover every aspect of the request"),
            Mandate::StructureDepth => (
                "structure_depth",
                "Structure & Depth",
                "reorder for flow, add the sections that are missing, deepen the thin parts and fix the heading hierarchy",
            ),
            Mandate::AccuracyCompleteness => (
                "accuracy_completeness",
                "Accuracy & Completeness",
                "check every claim, fill the gaps, and add caveats and edge cases",
            ),
            Mandate::PolishFormat => (
                "polish_format",
                "Polish & Format",
                "improve readability and grammar, make the formatting consistent and smooth the transitions",
            ),
            Mandate::SecurityReview => (
                "security_review",
                "Security Review",
                "point out risky patterns and vulnerabilities and add hardening advice",
            ),
            Mandate::CostAnalysis => (
                "cost_analysis",
                "Cost Analysis",
                "add cost estimates, pricing, return on investment and the total cost of ownership",
            ),
            Mandate::Accessibility => (
                "accessibility",
                "Accessibility",
                "add WCAG notes and make the language and the design inclusive",
            ),
            Mandate::Performance => (
                "performance",
                "Performance",
                "find the bottlenecks, add estimates and suggest optimisations",
            ),
            Mandate::Custom => ("custom", "Custom", ""),
        }
    }
}

/// One step of a request.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepRequest {
    /// The model that writes this step's version.
    pub model: Option<ModelId>,
    /// What this step improves: draft, structure_depth, accuracy_completeness, polish_format,
    /// security_review, cost_analysis, accessibility, performance or custom.
    #[schemars(with = "Mandate")]
    pub mandate: Option<Mandate>,
    /// The mandate in your own words (1-2 000 characters): only with `custom`.
    pub custom_mandate: Option<Text<MAX_CUSTOM_MANDATE>>,
}

/// Chain's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChainRequest {
    /// The steps, in order: 2 to 6, each a model and a mandate (default: draft, structure &
    /// depth, accuracy & completeness, polish & format on four models). Each is an object
    /// `{model, mandate, customMandate?}`: leave this empty for the default chain.
    #[schemars(length(min = 2, max = 6))]
    pub steps: Option<Vec<StepRequest>>,
    /// Per-step timeout in milliseconds.
    #[schemars(range(min = 10000, max = 180000))]
    pub timeout_ms: Option<i64>,
    /// When this many milliseconds have passed, the step in flight finishes and the remaining
    /// steps are skipped (default 600 000).
    #[schemars(range(min = 60000, max = 1800000))]
    pub global_timeout_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepConfig {
    pub model: String,
    pub mandate: Mandate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_mandate: Option<String>,
}

impl StepConfig {
    fn focus(&self) -> &str {
        self.custom_mandate.as_deref().unwrap_or(self.mandate.focus())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChainConfig {
    pub steps: Vec<StepConfig>,
    pub timeout_ms: u64,
    pub global_timeout_ms: u64,
}

fn default_steps(offline: bool) -> Vec<StepConfig> {
    let models = if offline { SIM_MODELS } else { SEED_MODELS };
    [Mandate::Draft, Mandate::StructureDepth, Mandate::AccuracyCompleteness, Mandate::PolishFormat]
        .into_iter()
        .zip(models)
        .map(|(mandate, model)| StepConfig { model: model.into(), mandate, custom_mandate: None })
        .collect()
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: ChainRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let steps = match &cfg.steps {
        None => default_steps(defaults.offline),
        Some(list) => {
            if !(2..=6).contains(&list.len()) {
                return Err(FieldError::new("modeConfig.steps", "A chain has 2 to 6 steps"));
            }
            let mut steps = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                let field = |f: &str| format!("modeConfig.steps[{i}].{f}");
                let model = request::model(s.model.as_ref(), &field("model"))?
                    .ok_or_else(|| FieldError::new(&field("model"), "is required"))?;
                let known: Vec<&str> = MANDATES.iter().map(|m| m.key()).collect();
                let mandate = s.mandate.ok_or_else(|| {
                    FieldError::new(
                        &field("mandate"),
                        format!("is required; known mandates: {}", known.join(", ")),
                    )
                })?;
                let custom_mandate = match (&s.custom_mandate, mandate) {
                    (Some(c), Mandate::Custom) => Some(c.trimmed().ok_or_else(|| {
                        FieldError::new(&field("customMandate"), "must not be empty")
                    })?),
                    (None, Mandate::Custom) => {
                        return Err(FieldError::new(
                            &field("customMandate"),
                            "is required with the custom mandate",
                        ))
                    }
                    (Some(_), _) => {
                        return Err(FieldError::new(
                            &field("customMandate"),
                            "is only allowed with the custom mandate",
                        ))
                    }
                    (None, _) => None,
                };
                steps.push(StepConfig { model, mandate, custom_mandate });
            }
            steps
        }
    };
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
    let models: Vec<String> = steps.iter().map(|s| s.model.clone()).collect();
    let config = ChainConfig { steps, timeout_ms, global_timeout_ms };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models: request::distinct(&[&models], &[]),
    })
}

const MANDATES: [Mandate; 9] = [
    Mandate::Draft,
    Mandate::StructureDepth,
    Mandate::AccuracyCompleteness,
    Mandate::PolishFormat,
    Mandate::SecurityReview,
    Mandate::CostAnalysis,
    Mandate::Accessibility,
    Mandate::Performance,
    Mandate::Custom,
];

/// Chain in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "chain",
    label: "Chain",
    description: "2-6 models in sequence, each improving the previous version under its own mandate (draft, structure, accuracy, polish…); the last version is the answer.",
    multi_turn: false,
    question: Question { label: "What to write", required: Some("Question is required") },
    roles: &[
        Role {
            id: "drafter",
            label: "Step 1 (draft)",
            field: None,
            panel: false,
            fallback: None,
            sim_default: &["sim/alpha"],
            default: &["anthropic/claude-opus-4-6"],
        },
        Role {
            id: "improver",
            label: "Steps 2-6 (improve)",
            field: None,
            panel: true,
            fallback: None,
            sim_default: &["sim/beta", "sim/gamma", "sim/delta"],
            default: &["openai/o3", "google/gemini-2.5-pro", "anthropic/claude-sonnet-4"],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<ChainRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Chain::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let text = r.get("finalContent").and_then(Value::as_str)?;
        Some(format!(
            "{} of {} steps, {} words: {}",
            r["completedSteps"],
            r["totalSteps"],
            word_count(text),
            short(text, 100)
        ))
    },
    stages: &[("chain_step", "a step of the chain"), ("chain", "the chain")],
    report: Some(report),
    example: || {
        json!({ "mode": "chain", "question": "Write a short guide to backing up a home server.",
                "modeConfig": { "steps": [
                    { "model": "sim/alpha", "mandate": "draft" },
                    { "model": "sim/beta", "mandate": "security_review" },
                    { "model": "sim/gamma", "mandate": "polish_format" } ] } })
    },
    sim: Some(sim_answer),
};

// ---- prompts and reading -------------------------------------------------------------------

pub const CHAIN_HEAD: &str = "in a writing chain.";
pub const VERSION_START: &str = "=== LATEST VERSION ===";
pub const VERSION_END: &str = "=== END OF VERSION ===";

pub fn draft_prompt(question: &str, total: usize, step: &StepConfig) -> String {
    let focus = match step.mandate {
        Mandate::Draft => String::new(),
        _ => format!("\n\nYour mandate is {}: {}.", step.mandate.display(), step.focus()),
    };
    format!(
        "You are step 1 of {total} {CHAIN_HEAD} Write the first complete version.\n\n\
         Request: {question}\n\nWrite a thorough, well-organised first version that covers every \
         aspect of the request; favour coverage over polish.{focus}\n\n\
         Reply with the text itself only: no meta-commentary."
    )
}

/// A skipped step as the next one is told of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub step: usize,
    pub mandate: String,
    pub focus: String,
}

pub fn improve_prompt(
    question: &str,
    k: usize,
    total: usize,
    step: &StepConfig,
    latest: &str,
    based_on: usize,
    skipped: &[Skipped],
) -> String {
    let missed = if skipped.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = skipped
            .iter()
            .map(|s| format!("- step {} ({}): {}", s.step, s.mandate, s.focus))
            .collect();
        format!(
            "\n\nThese earlier steps were skipped, so cover their mandates too:\n{}",
            list.join("\n")
        )
    };
    format!(
        "You are step {k} of {total} {CHAIN_HEAD} Your mandate: {} — {}.\n\nRequest: {question}\n\n\
         The latest version, written by step {based_on}:\n\n{VERSION_START}\n{latest}\n{VERSION_END}{missed}\n\n\
         Rules: build on this version rather than starting again; keep what already works; \
         integrate your additions into the text; if you remove anything, justify it in a leading \
         [Editor's Note: …]; no meta-commentary. Reply with the complete improved version only.",
        step.mandate.display(),
        step.focus()
    )
}

/// Every `[Editor's Note: …]` of a text (up to the first `]`), its words only.
pub fn editor_notes(text: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\[\s*editor(?:['’]s|s)?\s+note\s*:?([^\]]*)\]")
            .unwrap_or_else(|_| unreachable!())
    })
    .captures_iter(text)
    .map(|c| c[1].trim().to_string())
    .collect()
}

// ---- the state machine ---------------------------------------------------------------------

/// A completed or skipped step, as stored and as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    pub step: usize,
    pub model: String,
    pub mandate: Mandate,
    pub mandate_display: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_mandate: Option<String>,
    pub based_on_step: Option<usize>,
    pub content: String,
    pub word_count: usize,
    pub previous_word_count: usize,
    pub word_count_delta: i64,
    pub editor_notes: Vec<String>,
    pub response_time_ms: Option<i64>,
    pub skipped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    pub total_steps: usize,
}

pub struct Chain {
    config: ChainConfig,
    ctx: RunContext,
    /// The step in flight (1-based); 0 before the start and after the end.
    current: usize,
    steps: Vec<StepResult>,
    deadline_passed: bool,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    stage.strip_prefix("chain_step_").and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl Chain {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: ChainConfig = stored_config("chain", config)?;
        if !(2..=6).contains(&config.steps.len()) {
            return Err("the stored chain configuration has no 2 to 6 steps".into());
        }
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        Ok(Chain {
            config,
            ctx,
            current: 0,
            steps: Vec::new(),
            deadline_passed: false,
            title,
            calls: Calls::default(),
        })
    }

    fn total(&self) -> usize {
        self.config.steps.len()
    }

    /// The last completed step.
    fn latest(&self) -> Option<&StepResult> {
        self.steps.iter().rev().find(|s| !s.skipped)
    }

    /// The steps skipped since the last completed one.
    fn skipped_since(&self) -> Vec<&StepResult> {
        let from = self.latest().map_or(0, |l| l.step);
        self.steps.iter().filter(|s| s.skipped && s.step > from).collect()
    }

    fn role(k: usize) -> &'static str {
        if k == 1 {
            "drafter"
        } else {
            "improver"
        }
    }

    fn step_row(&self, s: &StepResult) -> Effect {
        let mut parsed = json!(s);
        if let Some(o) = parsed.as_object_mut() {
            for k in ["model", "content", "responseTimeMs"] {
                o.remove(k);
            }
        }
        Effect::Store(StageRow {
            stage_type: format!("chain_step_{}", s.step),
            stage_order: s.step as i32,
            model: Some(s.model.clone()),
            role: Some(Self::role(s.step).into()),
            content: s.content.clone(),
            parsed_data: Some(parsed),
            response_time_ms: s.response_time_ms,
        })
    }

    /// Step `k` starts (or, past the deadline, it and every later one are skipped).
    fn run_step(&mut self, k: usize) -> Vec<Effect> {
        if k > self.total() {
            return self.complete();
        }
        if self.deadline_passed {
            let mut out = Vec::new();
            for j in k..=self.total() {
                out.extend(self.skip(j, "global timeout", None));
            }
            out.extend(self.complete());
            return out;
        }
        let step = self.config.steps[k - 1].clone();
        let latest = self.latest().cloned();
        let skipped: Vec<Skipped> = self
            .skipped_since()
            .iter()
            .map(|s| {
                let c = &self.config.steps[s.step - 1];
                Skipped {
                    step: s.step,
                    mandate: s.mandate_display.clone(),
                    focus: c.focus().into(),
                }
            })
            .collect();
        let prompt = match &latest {
            None => draft_prompt(&self.ctx.question, self.total(), &step),
            Some(l) => improve_prompt(
                &self.ctx.question,
                k,
                self.total(),
                &step,
                &l.content,
                l.step,
                &skipped,
            ),
        };
        self.current = k;
        let mut out = vec![Effect::emit(
            "chain_step_start",
            json!({ "step": k, "model": step.model, "mandate": step.mandate,
                    "basedOnStep": latest.as_ref().map(|l| l.step),
                    "skippedBefore": skipped.iter().map(|s| s.step).collect::<Vec<_>>() }),
        )];
        out.push(Effect::Call(CallSpec::new(
            format!("step:{k}"),
            &step.model,
            vec![ChatMessage::user(prompt)],
            &format!("chain_step_{k}"),
            Self::role(k),
            self.config.timeout_ms,
        )));
        out
    }

    /// Step `k` as done with `text` (None: skipped for `reason`), on the latest version.
    fn result(&self, k: usize, text: Option<String>, reason: &str, ms: Option<i64>) -> StepResult {
        let step = &self.config.steps[k - 1];
        let previous = self.latest().map_or(0, |l| l.word_count);
        let words = text.as_deref().map_or(0, word_count);
        StepResult {
            step: k,
            model: step.model.clone(),
            mandate: step.mandate,
            mandate_display: step.mandate.display().into(),
            custom_mandate: step.custom_mandate.clone(),
            based_on_step: self.latest().map(|l| l.step),
            editor_notes: text.as_deref().map(editor_notes).unwrap_or_default(),
            word_count: words,
            previous_word_count: previous,
            word_count_delta: if text.is_some() { words as i64 - previous as i64 } else { 0 },
            skipped: text.is_none(),
            skip_reason: text.is_none().then(|| reason.to_string()),
            content: text.unwrap_or_default(),
            response_time_ms: ms,
            total_steps: self.total(),
        }
    }

    fn skip(&mut self, k: usize, reason: &str, ms: Option<i64>) -> Vec<Effect> {
        let s = self.result(k, None, reason, ms);
        let step = self.config.steps[k - 1].clone();
        let out = vec![
            self.step_row(&s),
            Effect::emit(
                "chain_step_skipped",
                json!({ "step": k, "data": { "model": step.model, "mandate": step.mandate, "reason": reason } }),
            ),
        ];
        self.steps.push(s);
        out
    }

    fn on_step(&mut self, k: usize, reply: CallReply) -> Vec<Effect> {
        let text = match &reply.result {
            Ok(t) => answer_text(t).trim().to_string(),
            Err(e) if k == 1 => {
                self.current = 0;
                return self.title.fail(format!(
                    "The first step ({}) failed: {}; there is nothing to improve.",
                    reply.model, e.message
                ));
            }
            Err(e) => {
                let mut out = self.skip(k, &e.message, Some(reply.response_time_ms as i64));
                out.extend(self.run_step(k + 1));
                return out;
            }
        };
        let mut s = self.result(k, Some(text), "", Some(reply.response_time_ms as i64));
        // The member's name in events, as every mode gives it.
        s.model = reply.model.clone();
        let mut out = vec![
            self.step_row(&s),
            Effect::emit("chain_step_complete", json!({ "step": k, "data": complete_data(&s) })),
        ];
        self.steps.push(s);
        out.extend(self.run_step(k + 1));
        out
    }

    fn complete(&mut self) -> Vec<Effect> {
        self.current = 0;
        let Some(last) = self.latest().cloned() else {
            return self.title.fail("No step completed.".into());
        };
        let mut event = json!({ "data": summary(&self.steps, &last) });
        self.calls.mark(&mut event);
        let mut out = vec![Effect::emit("chain_complete", event)];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: last.content });
        out
    }
}

/// `chain_step_complete`'s data.
fn complete_data(s: &StepResult) -> Value {
    json!({ "model": s.model, "mandate": s.mandate, "mandateDisplay": s.mandate_display,
            "content": s.content, "wordCount": s.word_count,
            "previousWordCount": s.previous_word_count, "wordCountDelta": s.word_count_delta,
            "editorNotes": s.editor_notes, "responseTimeMs": s.response_time_ms })
}

/// `chain_complete`'s data: the final version and the progression.
fn summary(steps: &[StepResult], last: &StepResult) -> Value {
    let done: Vec<&StepResult> = steps.iter().filter(|s| !s.skipped).collect();
    json!({
        "finalStep": last.step, "finalContent": last.content, "completedSteps": done.len(),
        "skippedSteps": steps.iter().filter(|s| s.skipped).map(|s| s.step).collect::<Vec<_>>(),
        "wordCountProgression": done.iter().map(|s| json!({ "step": s.step, "wordCount": s.word_count })).collect::<Vec<_>>(),
    })
}

impl Mode for Chain {
    fn start(&mut self) -> Vec<Effect> {
        let steps: Vec<Value> = self
            .config
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| json!({ "step": i + 1, "model": s.model, "mandate": s.mandate, "mandateDisplay": s.mandate.display() }))
            .collect();
        let mut out = vec![
            Effect::emit(
                "chain_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "chain", "totalSteps": self.total(), "steps": steps }),
            ),
            // The plan, so a run that stops before any step is stored still says how long
            // its chain was.
            Effect::Store(StageRow {
                stage_type: PLAN.into(),
                stage_order: 0,
                model: None,
                role: None,
                content: String::new(),
                parsed_data: Some(json!({ "totalSteps": self.total() })),
                response_time_ms: None,
            }),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
        ];
        out.extend(self.run_step(1));
        let model = self.config.steps[0].model.clone();
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
        let k = self.current;
        if k > 0 && routed.reply.key == format!("step:{k}") {
            out.extend(self.on_step(k, routed.reply));
        }
        self.calls.track(&out, stage_order);
        out
    }

    /// The global cap: the step in flight finishes, the remaining ones are skipped.
    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.deadline_passed = true;
        }
        Vec::new()
    }
}

/// `{steps, finalStep, finalContent, totalSteps, completedSteps, skippedSteps,
/// wordCountProgression, partial, failedModels}` from the stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut steps: Vec<StepResult> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("chain_step_"))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            v["model"] = json!(r.model);
            v["content"] = json!(r.content);
            v["responseTimeMs"] = json!(r.response_time_ms);
            serde_json::from_value(v).ok()
        })
        .collect();
    steps.sort_by_key(|s| s.step);
    // The plan row (stored at the start), else the steps (runs stored before it existed).
    let planned = rows
        .iter()
        .find(|r| r.stage_type == PLAN)
        .and_then(|r| r.parsed_data.as_ref()?.get("totalSteps")?.as_u64())
        .map(|n| n as usize);
    let total = planned.or(steps.first().map(|s| s.total_steps)).unwrap_or(0);
    let last = steps.iter().rev().find(|s| !s.skipped).cloned();
    let mut result = match &last {
        Some(l) => summary(&steps, l),
        None => json!({ "finalStep": null, "finalContent": null, "completedSteps": 0,
                        "skippedSteps": [], "wordCountProgression": [] }),
    };
    let list: Vec<Value> = steps
        .iter()
        .map(|s| {
            let mut v = json!(s);
            if let Some(o) = v.as_object_mut() {
                o.remove("totalSteps");
            }
            v
        })
        .collect();
    result["steps"] = json!(list);
    result["totalSteps"] = json!(total);
    mark_from_rows(&mut result, rows);
    result
}

// ---- sim answers ---------------------------------------------------------------------------

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let (head, _) = p.split_once(CHAIN_HEAD)?;
    let step: usize = head.strip_prefix("You are step ")?.split(' ').next()?.parse().ok()?;
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    if step == 1 || !p.contains(VERSION_START) {
        let request =
            p.split("Request: ").nth(1).and_then(|r| r.split("\n\n").next()).unwrap_or("");
        let draft = format!(
            "# {request}\n\n[simulated draft from {who}]\n\n## Overview\n\n{}This first version \
             covers the request as a whole: what it asks, why it matters and how to go about it.\n\n\
             ## Steps\n\n1. Understand the goal.\n2. Choose the tools.\n3. Do the work and check it.\n\n\
             ## Pitfalls\n\nCommon mistakes and how to avoid them.",
            ask.hostile_paragraph()
        );
        if ask.malformed {
            return Some(format!(
                "Sure! Here is a first version of what you asked for.\n\n{draft}"
            ));
        }
        return Some(draft);
    }
    let latest = p
        .split_once(VERSION_START)
        .and_then(|(_, rest)| rest.split_once(VERSION_END))
        .map_or("", |(v, _)| v.trim());
    let mandate = p
        .split_once("Your mandate: ")
        .and_then(|(_, rest)| rest.split_once(" — "))
        .map_or("Improvement", |(m, _)| m);
    let note = if rng.below(3) == 0 {
        format!("[Editor's Note: step {step} trimmed a repeated sentence from the overview.]\n\n")
    } else {
        String::new()
    };
    let added = format!(
        "\n\n## {mandate} (step {step})\n\n{}[simulated {mandate} pass by {who}] The text above \
         was reviewed for this mandate; {} points were strengthened.",
        ask.hostile_paragraph(),
        1 + rng.below(4)
    );
    if ask.malformed {
        return Some(format!("Here is the improved version, as requested:\n\n{latest}{added}"));
    }
    Some(format!("{note}{latest}{added}"))
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// What a step was asked to do: its mandate and what that asks for (a custom mandate in its
/// own words).
fn asked_to(step: &Value) -> String {
    let mandate: Option<Mandate> = serde_json::from_value(step["mandate"].clone()).ok();
    let name = step["mandateDisplay"]
        .as_str()
        .map(str::to_string)
        .or_else(|| mandate.map(|m| m.display().to_string()))
        .unwrap_or_default();
    let focus = match (step["customMandate"].as_str(), mandate) {
        (Some(c), _) => c.to_string(),
        (None, Some(m)) if m != Mandate::Custom => m.focus().to_string(),
        _ => String::new(),
    };
    match (name.is_empty(), focus.is_empty()) {
        (false, false) => format!("{name}: {focus}"),
        (false, true) => name,
        _ => focus,
    }
}

/// The result as the export's report: the final version's step, then each step as a table
/// row (its model, what it was asked to do, its length, done or skipped and why), the steps
/// never run, and the editors' notes.
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let mut out = String::new();
    let steps = result["steps"].as_array().cloned().unwrap_or_default();
    let total = result["totalSteps"].as_u64().filter(|n| *n > 0).unwrap_or(steps.len() as u64);
    let done = steps.iter().filter(|s| s["skipped"] == false).count() as u64;
    if let Some(k) = result["finalStep"].as_u64() {
        let last = steps.iter().find(|s| s["step"].as_u64() == Some(k));
        let by = last
            .map(|s| {
                let parts: Vec<&str> =
                    [&s["mandateDisplay"], &s["model"]].iter().filter_map(|v| v.as_str()).collect();
                if parts.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", parts.join(", "))
                }
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "**Final version:** step {k} of {total}{by}; {done} of {} completed.\n\n",
            count(total, "step", "steps")
        ));
    } else if !steps.is_empty() || total > 0 {
        out.push_str("**No step completed.**\n\n");
    }
    if steps.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let skipped = s["skipped"] == true;
            let words = match (skipped, s["wordCount"].as_u64()) {
                (true, _) | (_, None) => String::new(),
                (false, Some(w)) => match (s["basedOnStep"].as_u64(), s["wordCountDelta"].as_i64())
                {
                    (Some(_), Some(d)) => format!("{w} ({d:+})"),
                    _ => w.to_string(),
                },
            };
            let state = if skipped {
                match s["skipReason"].as_str() {
                    Some("global timeout") => "skipped: the run's time limit passed first".into(),
                    Some(why) => format!("skipped: its call failed ({why})"),
                    None => "skipped".into(),
                }
            } else {
                "done".to_string()
            };
            vec![
                s["step"].as_u64().unwrap_or(i as u64 + 1).to_string(),
                s["model"].as_str().unwrap_or("").to_string(),
                asked_to(s),
                words,
                state,
            ]
        })
        .collect();
    out.push_str(&table(&["step", "model", "asked to", "words", "result"], &rows, &[0, 3]));
    let missing = total.saturating_sub(steps.len() as u64);
    if missing > 0 {
        out.push_str(&format!("\n{} of the {total} never ran.\n", count(missing, "step", "steps")));
    }
    let notes: Vec<String> = steps
        .iter()
        .flat_map(|s| {
            let k = s["step"].as_u64().unwrap_or(0);
            s["editorNotes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(move |n| n.as_str().map(|n| format!("- step {k}: {n}")))
        })
        .collect();
    if !notes.is_empty() {
        out.push_str(&format!("\n**Editor's notes:**\n\n{}\n", notes.join("\n")));
    }
    out
}
