//! A limit on what a run's model calls may use, asked before each call starts: what keeps
//! `conclave eval` within its `--budget`. A guard sees every call's worst case before it goes
//! (its prompt's length and its output cap) and what every call used when it ends; it answers
//! whether the call may start now, must wait for calls in flight to end, or may not start at
//! all (the run is then cancelled, saying why; a title call is dropped instead, and the mode
//! falls back as for any failed title).

use crate::modes::{CallError, CallErrorKind, CallReply, Usage};

/// What a call (or one failed attempt of it) used, as far as is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Used {
    /// The provider reported it.
    Reported(Usage),
    /// Nothing: the provider turned the request away with an error status before any work.
    Nothing,
    /// Not known (a timeout, a broken or stopped stream, a reply without usage): it may have
    /// used as much as its worst case, and is counted so.
    Unknown,
}

impl Used {
    /// What a failed attempt used.
    pub fn of_error(e: &CallError) -> Used {
        match e.kind {
            CallErrorKind::Http => Used::Nothing,
            _ => Used::Unknown,
        }
    }

    /// What a finished call used.
    pub fn of_reply(reply: &CallReply) -> Used {
        match (&reply.usage, &reply.result) {
            (Some(u), _) => Used::Reported(*u),
            (None, Err(e)) => Used::of_error(e),
            (None, Ok(_)) => Used::Unknown,
        }
    }
}

/// What a guard answers for a call about to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Go,
    /// Not now: calls in flight hold the room it needs; ask again once one ends.
    Wait,
    /// Never: even alone it could pass the limit.
    Refuse,
}

/// A call about to start, as a guard weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSize {
    /// The prompt's length in bytes (a token is at least one byte, so this bounds its tokens)
    /// and its number of messages (each may add a few template tokens).
    pub prompt_bytes: usize,
    pub messages: usize,
    /// The call's output cap in tokens.
    pub max_tokens: u32,
}

impl CallSize {
    /// The most tokens the call can use: its prompt's bytes, a few tokens of chat template
    /// per message, and its output cap.
    pub fn worst_tokens(&self) -> u64 {
        self.prompt_bytes as u64 + 16 * self.messages as u64 + u64::from(self.max_tokens)
    }
}

/// A spending limit shared by the runs it is given to.
pub trait SpendGuard: Send + Sync {
    /// Whether the call `key` of run `run` to `model` may start; reserves its worst case when
    /// it may.
    fn admit(&self, run: &str, key: &str, model: &str, size: CallSize) -> Admit;
    /// The call ended (or was stopped): its reservation is released and what it used counted.
    fn settle(&self, run: &str, key: &str, used: Used);
    /// An attempt of the call failed and another is about to start: the failed attempt is
    /// counted, and the next must fit like a new call. False when it does not: the call's
    /// reservation is released and the run is cancelled.
    fn retry(&self, run: &str, key: &str, used: Used) -> bool;
    /// Why a refused call's run was cancelled, in words.
    fn refusal(&self) -> String;
}
