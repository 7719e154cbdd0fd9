//! The pieces of event payloads and results that many modes share: a `{data}` wrapper and
//! the `partial`/`failedModels` pair that ends a result and its final event.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::common::{FailedModel, CALL_FAILED};
use super::{RunContext, StageRow};

/// A payload under `data` (`answer_complete`, `generate_complete`, `task_complete`…).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Data<T> {
    pub data: T,
}

/// A run's first event: its conversation and message, its mode, then what the mode says as it
/// starts (`T`'s fields, after these; none for `()`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStart<'a, T = ()> {
    pub conversation_id: &'a str,
    pub message_id: &'a str,
    pub mode: &'static str,
    #[serde(flatten)]
    pub then: T,
}

impl<'a, T> RunStart<'a, T> {
    pub fn new(ctx: &'a RunContext, mode: &'static str, then: T) -> Self {
        RunStart { conversation_id: &ctx.conversation_id, message_id: &ctx.message_id, mode, then }
    }
}

/// Whether some call failed, and which: the last keys of a result and of its final event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Failures {
    /// True when some call failed (even one a backup then replaced).
    pub partial: bool,
    /// The calls that failed (`{model, role, stage, error: {kind, status, message}, fallbackTo?}`).
    pub failed_models: Vec<FailedModel>,
}

impl Failures {
    pub fn new(failed_models: Vec<FailedModel>) -> Self {
        Failures { partial: !failed_models.is_empty(), failed_models }
    }

    /// The failed calls of a run, from its stored rows.
    pub fn of(rows: &[StageRow]) -> Self {
        Failures::new(failed_from_rows(rows))
    }
}

/// A final stage's event (`synthesis_complete`, `verdict_complete`…): its payload under `data`, then `partial` and
/// `failedModels`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Marked<T> {
    pub data: T,
    #[serde(flatten)]
    pub failures: Failures,
}

impl<T> Marked<T> {
    pub fn new(data: T, failed_models: Vec<FailedModel>) -> Self {
        Marked { data, failures: Failures::new(failed_models) }
    }
}

/// A stored row's parsed data read back as the payload type it was written from; None when the
/// row has none or it does not read as `T`.
pub fn parsed<T: DeserializeOwned>(row: &StageRow) -> Option<T> {
    T::deserialize(row.parsed_data.as_ref()?).ok()
}

/// The failed panel calls of a run, from its stored rows (in stored order).
pub fn failed_from_rows(rows: &[StageRow]) -> Vec<FailedModel> {
    let mut f: Vec<(i32, FailedModel)> = rows
        .iter()
        .filter(|r| r.stage_type == CALL_FAILED)
        .filter_map(|r| {
            let m = parsed(r)?;
            Some((r.stage_order, m))
        })
        .collect();
    f.sort_by_key(|(order, _)| *order);
    f.into_iter().map(|(_, m)| m).collect()
}

/// `value` as its stored row has always held it: `taken` (the row's content, kept outside its
/// data) removed the way the first rows were written, its place going to the object's last key.
pub fn without<T: Serialize>(value: &T, taken: &str) -> serde_json::Value {
    let mut v = super::to_json(value);
    if let Some(m) = v.as_object_mut() {
        m.swap_remove(taken);
    }
    v
}

/// `value` as a result has always given it: its stored row's keys ([`without`]), then `taken`
/// last. `None` stays null.
pub fn taken_last<T: Serialize>(value: Option<&T>, taken: &str) -> serde_json::Value {
    let Some(value) = value else { return serde_json::Value::Null };
    let mut v = super::to_json(value);
    if let Some(m) = v.as_object_mut() {
        if let Some(t) = m.swap_remove(taken) {
            m.insert(taken.to_string(), t);
        }
    }
    v
}
