//! Echo: a demonstration mode, built only with the `demo-mode` feature (the test suite turns it
//! on; the shipped server has no such mode). It proves that a mode is this one file and one
//! registry line: the request, its 400s, the page's form and view, the CLI's flags, storage,
//! reload and the outcome all come from the [`SPEC`] below, with no view of its own.
//!
//! Every model answers the question once; the longest answer is picked.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{indexed, Answer};
use super::payload::parsed;
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role};
use super::request::ModelId;
use super::{
    request, to_json, CallReply, CallSpec, ChatMessage, Defaults, Effect, FieldError, Mode,
    RunContext, StageRow, ValidRequest,
};

/// Echo's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EchoRequest {
    /// The models that answer: 2 to 4.
    #[schemars(length(min = 2, max = 4))]
    pub models: Option<Vec<ModelId>>,
    /// Ask for the answer in capitals.
    pub shout: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EchoConfig {
    pub models: Vec<String>,
    pub shout: bool,
    pub timeout_ms: u64,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let cfg: EchoRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let models = request::panel(cfg.models.as_deref(), "modeConfig.models")?
        .unwrap_or_else(|| defaults.models(SPEC.id, "answerer"));
    let config = EchoConfig {
        models: models.clone(),
        shout: cfg.shout.unwrap_or(false),
        timeout_ms: defaults.stage_timeout_ms,
    };
    let asked = request::Asked { question, conversation_id: None };
    Ok(asked.valid(SPEC.kind(), &config, request::distinct(&[&models], &[])))
}

/// Echo in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "echo",
    label: "Echo",
    description: "A demonstration: every model answers once and the longest answer is picked.",
    multi_turn: false,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[Role::panel("answerer", "Answerers", "models")],
    top_level: &[],
    schema: schema_of::<EchoRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Echo::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let p = r.get("picked").filter(|p| !p.is_null())?;
        Some(format!("{} said: {}", p["model"].as_str()?, short(p["response"].as_str()?, 120)))
    },
    stages: &[],
    report: None,
    example: || json!({ "mode": "echo", "question": "Say hello." }),
    sim: None,
    result_schema: schema_of::<EchoResult<'static>>,
};

/// The longest answer (the first of equals).
fn pick(answers: &[Answer]) -> Option<&Answer> {
    answers.iter().fold(None, |best: Option<&Answer>, a| match best {
        Some(b) if b.response.len() >= a.response.len() => Some(b),
        _ => Some(a),
    })
}

/// Echo's result: every answer, and the one picked.
#[derive(Serialize, JsonSchema)]
struct EchoResult<'a> {
    /// The answers, in the panel's order.
    answers: &'a [Answer],
    /// The longest answer; null when no model answered.
    picked: Option<&'a Answer>,
}

/// An answer's stored row: its place in the panel.
#[derive(Serialize, Deserialize)]
struct Place {
    index: usize,
}

/// `answers_start`'s and `answers_complete`'s payload: the event's name, then the answers.
#[derive(Serialize)]
struct Stage<'a> {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a [Answer]>,
}

fn load_result(rows: &[StageRow]) -> Value {
    // Rows are stored as replies arrive; the live event lists them in call order.
    let mut rows: Vec<&StageRow> = rows.iter().filter(|r| r.stage_type == "answers").collect();
    rows.sort_by_key(|r| parsed::<Place>(r).map(|p| p.index));
    let answers: Vec<Answer> = rows.iter().map(|r| Answer::of_row(r)).collect();
    to_json(&EchoResult { answers: &answers, picked: pick(&answers) })
}

pub struct Echo {
    config: EchoConfig,
    ctx: RunContext,
    replies: Vec<Option<Answer>>,
    pending: usize,
}

impl Echo {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: EchoConfig = stored_config("echo", config)?;
        let n = config.models.len();
        Ok(Echo { config, ctx, replies: vec![None; n], pending: n })
    }
}

impl Mode for Echo {
    fn start(&mut self) -> Vec<Effect> {
        let ask = if self.config.shout {
            format!("{}\n\nAnswer in capital letters.", self.ctx.question)
        } else {
            self.ctx.question.clone()
        };
        let mut out =
            vec![Effect::event("answers_start", &Stage { r#type: "answers_start", data: None })];
        for (i, model) in self.config.models.iter().enumerate() {
            out.push(Effect::Call(CallSpec::new(
                format!("answers:{i}"),
                model,
                vec![ChatMessage::user(ask.clone())],
                "answers",
                "answerer",
                self.config.timeout_ms,
            )));
        }
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        let Some(i) = indexed(&reply.key, "answers") else {
            return Vec::new();
        };
        if i >= self.replies.len() || self.pending == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Ok(text) = reply.result {
            let answer = Answer {
                model: reply.model.clone(),
                response: text.clone(),
                response_time_ms: reply.response_time_ms as i64,
            };
            out.push(Effect::Store(
                StageRow::new("answers", 1, text)
                    .by(&reply.model, "answerer")
                    .data(&Place { index: i })
                    .took(reply.response_time_ms as i64),
            ));
            self.replies[i] = Some(answer);
        }
        self.pending -= 1;
        if self.pending > 0 {
            return out;
        }
        let answers: Vec<Answer> = self.replies.iter().flatten().cloned().collect();
        let done = Stage { r#type: "answers_complete", data: Some(&answers) };
        out.push(Effect::event("answers_complete", &done));
        match pick(&answers) {
            Some(best) => out.push(Effect::Finish { answer: best.response.clone() }),
            None => out.push(Effect::Fail { message: "Every model failed to answer".into() }),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::testkit::{ctx, err, ok};

    fn calls(effects: &[Effect]) -> Vec<CallSpec> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Call(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    fn finished(effects: &[Effect]) -> Option<&str> {
        effects.iter().find_map(|e| match e {
            Effect::Finish { answer } => Some(answer.as_str()),
            _ => None,
        })
    }

    #[test]
    fn the_longest_answer_is_picked_and_a_failed_panel_fails() {
        let config = json!({ "models": ["a", "b"], "shout": false, "timeoutMs": 1000 });
        let mut m = Echo::new(&config, ctx("q", vec![], false)).unwrap();
        let c = calls(&m.start());
        assert_eq!(c.len(), 2);
        assert_eq!(finished(&m.on_reply(ok(&c[0], "short"))), None);
        assert_eq!(finished(&m.on_reply(ok(&c[1], "the longer one"))), Some("the longer one"));
        let mut m = Echo::new(&config, ctx("q", vec![], false)).unwrap();
        let c = calls(&m.start());
        m.on_reply(err(&c[0]));
        let end = m.on_reply(err(&c[1]));
        assert!(end.iter().any(|e| matches!(e, Effect::Fail { .. })));
    }
}
