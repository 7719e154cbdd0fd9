//! Solo: one model answers the question once, as it would with no panel. It is the baseline a
//! panel is measured against (`conclave eval`'s `single`, `self-consistency` and `majority`
//! arms are Solo runs), and a plain chat with one model from the page.
//!
//! One call, one stored row (`answer`), the reply as the run's answer; a failed call fails
//! the run.

use super::prelude::*;
use super::Mode;

/// The stage (and stored row) of the one answer.
const STAGE: &str = "answer";

/// Solo's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SoloRequest {
    /// The model that answers.
    pub model: Option<ModelId>,
    /// How long the answer may take, in milliseconds.
    #[schemars(range(min = 1000, max = 3600000))]
    pub timeout_ms: Option<i64>,
}

/// Solo's stored configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SoloConfig {
    pub model: String,
    pub timeout_ms: u64,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let cfg: SoloRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let model = SPEC.model_of(cfg.model.as_ref(), "answerer", defaults)?;
    let timeout_ms = request::given(cfg.timeout_ms, defaults.stage_timeout_ms);
    let config = SoloConfig { model: model.clone(), timeout_ms };
    let asked = request::Asked { question, conversation_id: None };
    Ok(asked.valid(SPEC.kind(), &config, vec![model]))
}

/// Solo in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "solo",
    label: "Solo",
    description: "One model answers once, with no panel: the baseline the panels are measured against (conclave eval).",
    multi_turn: false,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[Role::model("answerer", "Model", "model")],
    top_level: &[],
    schema: schema_of::<SoloRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Solo::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let a = r.get("answer").filter(|a| !a.is_null())?;
        Some(short(a["response"].as_str()?, 120))
    },
    stages: &[("answer", "the answer")],
    report: None,
    example: || json!({ "mode": "solo", "question": "What is 17 × 23?" }),
    sim: None,
    result_schema: schema_of::<SoloResult>,
};

/// The one answer: `answer_complete`'s data and the result's `answer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SoloAnswer {
    /// The model that answered (null only for a stored row without one).
    pub model: Option<String>,
    /// Its reply, the run's answer.
    pub response: String,
    /// How long the call took, in milliseconds.
    pub response_time_ms: i64,
}

/// Solo's result.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SoloResult {
    /// The answer; null when the run stored none (its call failed).
    pub answer: Option<SoloAnswer>,
}

/// `answer_start`'s and `answer_complete`'s data: the event's own name, and the answer once
/// there is one.
#[derive(Debug, Clone, Serialize)]
struct SoloEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a SoloAnswer>,
}

fn load_result(rows: &[StageRow]) -> Value {
    let answer = rows.iter().find(|r| r.stage_type == STAGE).map(|r| SoloAnswer {
        model: r.model.clone(),
        response: r.content.clone(),
        response_time_ms: r.response_time_ms.unwrap_or(0),
    });
    to_json(&SoloResult { answer })
}

pub struct Solo {
    config: SoloConfig,
    ctx: RunContext,
    done: bool,
}

impl Solo {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        Ok(Solo { config: stored_config("solo", config)?, ctx, done: false })
    }
}

impl Mode for Solo {
    fn start(&mut self) -> Vec<Effect> {
        vec![
            Effect::event("answer_start", &SoloEvent { kind: "answer_start", data: None }),
            Effect::Call(CallSpec::new(
                STAGE,
                &self.config.model,
                vec![ChatMessage::user(self.ctx.question.clone())],
                STAGE,
                "answerer",
                self.config.timeout_ms,
            )),
        ]
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key != STAGE || self.done {
            return Vec::new();
        }
        self.done = true;
        match reply.result {
            Ok(text) => {
                let ms = reply.response_time_ms as i64;
                let answer = SoloAnswer {
                    model: Some(reply.model.clone()),
                    response: text.clone(),
                    response_time_ms: ms,
                };
                vec![
                    Effect::Store(
                        StageRow::new(STAGE, 1, text.clone()).by(&reply.model, "answerer").took(ms),
                    ),
                    Effect::event(
                        "answer_complete",
                        &SoloEvent { kind: "answer_complete", data: Some(&answer) },
                    ),
                    Effect::Finish { answer: text },
                ]
            }
            Err(e) => {
                vec![Effect::Fail { message: format!("{} failed: {}", reply.model, e.message) }]
            }
        }
    }
}

#[cfg(test)]
mod tests;
