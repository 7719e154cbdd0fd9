//! The words every mode speaks, in one import: a mode's `mod.rs` says `use super::prelude::*;`
//! (its other files `use super::*;`) and names only what is its own besides. What is here is
//! what most modes use: serde and schemars for their typed requests, results and payloads, the
//! registry's spec types, the shared payload pieces, the request readers, the runner, reply
//! schemas and readers, and the effects a state machine returns.

pub use std::sync::{Arc, OnceLock};

pub use regex::Regex;
pub use schemars::JsonSchema;
pub use serde::{Deserialize, Serialize};
pub use serde_json::{json, Value};

pub use super::common::{indexed, role_failed, Batch, Routed, SplitMix64};
pub use super::payload::{parsed, taken_last, without, Data, Failures, Marked, RunStart};
pub use super::reading::{answer_text, bare, echoed_placeholder, readable};
pub use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
pub use super::report::typed;
pub use super::request::{self, ModelId, Text, MAX_CONTENT_CHARS};
pub use super::runner::{Kit, Staged};
pub use super::schema::{self, Asking, ReadFrom, ReplySchema};
pub use super::{
    to_json, CallReply, CallSpec, ChatMessage, Defaults, Effect, FieldError, RunContext, StageRow,
    ValidRequest,
};
