//! The shared runner: what every staged mode repeats, written once.
//!
//! A mode that implements [`Staged`] is a [`Mode`] (a blanket implementation): the runner takes
//! each reply first, answers the title call itself, records a failed panel call and starts its
//! backup ([`Calls::route`]), counts an empty reply as a failure where the mode's spec says so,
//! registers every call the mode starts ([`Calls::track`]), and keeps the global deadline. The
//! mode is left with what is its own: its first stage ([`Staged::begin`]), what a reply means in
//! its phase ([`Staged::on_routed`]), and what it does once the deadline has passed.

use super::common::{empty_is_failure, Calls, Routed, TitleTracker, TITLE_KEY};
use super::{CallReply, CallSpec, ChatMessage, Effect, Mode, RunContext, Structured};

/// The key of the timer that ends a run's time (`globalTimeoutMs`).
pub const GLOBAL_TIMER: &str = "global";

/// What the runner keeps for a mode: its title call, its panel calls, each call's time limit
/// and its deadline.
#[derive(Debug, Clone)]
pub struct Kit {
    pub title: TitleTracker,
    pub calls: Calls,
    /// Each call's time limit (the run's `timeoutMs`).
    pub timeout_ms: u64,
    /// The models asked for JSON (the run's, copied once): where a mode picks a prompt's form.
    pub structured: Structured,
    /// The global deadline has passed: the stage in flight finishes, and no new one starts
    /// except the one that answers.
    pub deadline_passed: bool,
}

impl Kit {
    /// A run's kit, its title asked for (from the question) when the conversation is new, each
    /// call given `timeout_ms`.
    pub fn new(ctx: &RunContext, timeout_ms: u64) -> Kit {
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let structured = ctx.structured.clone();
        Kit { title, calls: Calls::default(), timeout_ms, structured, deadline_passed: false }
    }

    /// A call of this run with the run's time limit.
    pub fn call(
        &self,
        key: impl Into<String>,
        model: &str,
        messages: Vec<ChatMessage>,
        stage: &str,
        role: &str,
    ) -> CallSpec {
        CallSpec::new(key, model, messages, stage, role, self.timeout_ms)
    }

    /// A call of this run that sends one user message, `prompt`.
    pub fn ask(
        &self,
        key: impl Into<String>,
        model: &str,
        prompt: impl Into<String>,
        stage: &str,
        role: &str,
    ) -> CallSpec {
        self.call(key, model, vec![ChatMessage::user(prompt)], stage, role)
    }

    /// The title call, by `model` with the run's time limit, when the run needs a title.
    pub fn ask_title(&mut self, model: &str) -> Option<Effect> {
        self.title.ask(model, self.timeout_ms)
    }

    /// The title call with a prompt of the mode's own (a title of the material, not of the
    /// question), when the run needs a title.
    pub fn ask_title_with(&mut self, model: &str, prompt: String) -> Option<Effect> {
        self.title.call(model, prompt, self.timeout_ms)
    }
}

/// A mode run by the shared runner (see the module documentation).
pub trait Staged: Send {
    /// An empty reply (nothing outside its reasoning trace) is a failed call.
    const EMPTY_IS_FAILURE: bool = true;

    /// Where a call's stage stands among the stored rows (its failed-call row's order).
    fn stage_order(stage: &str) -> i32;

    /// The runner's part of the mode.
    fn kit(&mut self) -> &mut Kit;

    /// The first effects of the run: its start event and first calls (the title call too).
    fn begin(&mut self) -> Vec<Effect>;

    /// A reply as the mode should see it: under the key the mode issued, a backup's answer in
    /// its primary's place; failed calls are already recorded.
    fn on_routed(&mut self, routed: Routed) -> Vec<Effect>;

    /// A reply before the runner routes it (the default counts an empty one as failed when
    /// [`Staged::EMPTY_IS_FAILURE`]); a mode with a stricter rule adds it here.
    fn screen(&mut self, reply: CallReply) -> CallReply {
        if Self::EMPTY_IS_FAILURE {
            empty_is_failure(reply)
        } else {
            reply
        }
    }

    /// The global deadline passed ([`Kit::deadline_passed`] is already set).
    fn on_deadline(&mut self) -> Vec<Effect> {
        Vec::new()
    }

    /// A timer of the mode's own ran out.
    fn on_own_timer(&mut self, _key: &str) -> Vec<Effect> {
        Vec::new()
    }
}

impl<M: Staged> Mode for M {
    fn start(&mut self) -> Vec<Effect> {
        let out = self.begin();
        self.kit().calls.track(&out, M::stage_order);
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.kit().title.on_reply(&reply);
        }
        let reply = self.screen(reply);
        let (mut out, routed) = self.kit().calls.route(reply);
        let Some(routed) = routed else { return out };
        out.extend(self.on_routed(routed));
        self.kit().calls.track(&out, M::stage_order);
        out
    }

    fn on_timer(&mut self, key: &str) -> Vec<Effect> {
        if key == GLOBAL_TIMER {
            self.kit().deadline_passed = true;
            return self.on_deadline();
        }
        self.on_own_timer(key)
    }
}
