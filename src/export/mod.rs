//! Exports of a run or a conversation: a JSON document that reads back to the same run record
//! and result the API gives, and Markdown a person reads. Both are built from what is stored
//! (the run record, its question and answer, its stage rows and events), never from a mode's
//! own types, so a new mode needs nothing here.
//!
//! Pure: the engine gathers the pieces (and decides who may have them); this module only
//! shapes them. [`anonymise`] hides model names for a share link that asks it.

mod anonymise;
mod inert;
pub mod markdown;

pub use anonymise::{anonymise, model_ids};
pub use markdown::{conversation_markdown, run_markdown};

use serde_json::{json, Value};

use crate::store::{ConversationRecord, StageRecord, StoredEvent};

/// The `format` of a run's JSON export (a conversation's is [`CONVERSATION_FORMAT`]).
pub const RUN_FORMAT: &str = "conclave.run";
pub const CONVERSATION_FORMAT: &str = "conclave.conversation";
/// Bumped when a field changes meaning (fields may be added without it).
pub const VERSION: u32 = 1;

/// Everything stored of one run, as its reader may see it.
#[derive(Debug, Clone)]
pub struct RunExport {
    /// The run record with its question, answer, outcome and result: `GET
    /// /api/deliberations/{id}`'s body exactly.
    pub view: Value,
    /// Its stage rows, in stage order.
    pub stages: Vec<StageRecord>,
    /// Its stored events (every event but `token`), in order.
    pub events: Vec<StoredEvent>,
}

/// What a run's and a conversation's exports both are: a JSON document and Markdown.
pub trait Export {
    /// The JSON document, with its stored events when `with_events`.
    fn to_json(&self, with_events: bool) -> Value;
    /// Markdown a person reads.
    fn to_markdown(&self) -> String;

    /// The export in `format`, only that one made (the JSON pretty-printed).
    fn render(&self, format: Format, with_events: bool) -> String {
        match format {
            Format::Markdown => self.to_markdown(),
            Format::Json => {
                serde_json::to_string_pretty(&self.to_json(with_events)).unwrap_or_default()
            }
        }
    }
}

impl RunExport {
    /// `view` is the run record as the API gives it (the engine's `run_view`).
    pub fn new(view: Value, stages: Vec<StageRecord>, events: Vec<StoredEvent>) -> Self {
        RunExport { view, stages, events }
    }

    pub fn run_id(&self) -> &str {
        self.view["id"].as_str().unwrap_or("run")
    }
}

impl Export for RunExport {
    /// The run as the API gives it, its stage rows and (with `with_events`) its events.
    fn to_json(&self, with_events: bool) -> Value {
        let mut doc = json!({
            "format": RUN_FORMAT,
            "version": VERSION,
            "run": self.view,
            "stages": self.stages,
        });
        if with_events {
            doc["events"] = json!(self.events);
        }
        doc
    }

    fn to_markdown(&self) -> String {
        run_markdown(self, 1)
    }
}

/// A conversation with each of its runs, oldest first.
#[derive(Debug, Clone)]
pub struct ConversationExport {
    pub conversation: ConversationRecord,
    pub runs: Vec<RunExport>,
}

impl Export for ConversationExport {
    fn to_json(&self, with_events: bool) -> Value {
        let runs: Vec<Value> = self.runs.iter().map(|r| r.to_json(with_events)).collect();
        json!({
            "format": CONVERSATION_FORMAT,
            "version": VERSION,
            "conversation": self.conversation,
            "runs": runs,
        })
    }

    fn to_markdown(&self) -> String {
        conversation_markdown(self)
    }
}

/// What an export is asked for as (`?format=md|json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
}

impl Format {
    /// `md` / `markdown` or `json`; None for anything else.
    pub fn parse(s: &str) -> Option<Format> {
        match s.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(Format::Markdown),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Json => "json",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Markdown => "text/markdown; charset=utf-8",
            Format::Json => "application/json",
        }
    }
}
