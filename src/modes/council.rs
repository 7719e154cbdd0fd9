//! Council mode (seed 01): collect, rank anonymised answers, synthesise. Placeholder until built.
use super::{CallReply, Defaults, Effect, FieldError, Mode, RunContext, StageRow, ValidRequest};
use serde_json::Value;

pub fn validate(_body: &Value, _defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    Err(FieldError::new("mode", "council mode is not built yet"))
}

pub struct Council;

impl Council {
    pub fn new(_config: &Value, _ctx: RunContext) -> Self {
        Council
    }
}

impl Mode for Council {
    fn start(&mut self) -> Vec<Effect> {
        vec![Effect::Fail { message: "council mode is not built yet".into() }]
    }
    fn on_reply(&mut self, _reply: CallReply) -> Vec<Effect> {
        Vec::new()
    }
}

pub fn load_result(_rows: &[StageRow]) -> Value {
    Value::Null
}
