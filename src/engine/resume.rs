//! Crash recovery: rebuilding a run's mode from its journal.
//!
//! A mode is deterministic (no clock, no I/O, shuffles seeded by the run id), so feeding it the
//! same inputs in the same order rebuilds the same state. The Deliberation journals every input
//! (the start, each model reply, each timer that fired) in the same transaction as the stage
//! rows and events that input produced. Replaying the journal therefore re-creates exactly the
//! state the dead process had after its last stored step; what the replay asks for that has no
//! answer in the journal (calls in flight, timers not yet fired) is what the resumed run must
//! do again. Nothing the replay produces is written a second time: those rows and events are
//! already stored, and the replay checks their count against the store.

use serde_json::{json, Value};

use crate::modes::{CallError, CallReply, CallSpec, Effect, Mode, StageRow, Usage};
use crate::store::JournalRecord;

pub const START: &str = "start";
pub const REPLY: &str = "reply";
pub const TIMER: &str = "timer";

/// A reply as journaled: everything [`CallReply`] holds.
pub fn reply_data(reply: &CallReply) -> Value {
    let mut v = json!({
        "model": reply.model,
        "responseTimeMs": reply.response_time_ms,
        "usage": reply.usage,
    });
    match &reply.result {
        Ok(text) => v["text"] = json!(text),
        Err(e) => v["error"] = json!(e),
    }
    v
}

/// Reads back a reply journaled by [`reply_data`].
pub fn reply_from(key: &str, data: &Value) -> Result<CallReply, String> {
    let result = match (data.get("text"), data.get("error")) {
        (Some(Value::String(t)), _) => Ok(t.clone()),
        (_, Some(e)) => Err(serde_json::from_value::<CallError>(e.clone())
            .map_err(|e| format!("journaled error of {key}: {e}"))?),
        _ => return Err(format!("journaled reply of {key} has neither text nor error")),
    };
    let usage = match data.get("usage") {
        None | Some(Value::Null) => None,
        Some(u) => Some(
            serde_json::from_value::<Usage>(u.clone())
                .map_err(|e| format!("journaled usage of {key}: {e}"))?,
        ),
    };
    Ok(CallReply {
        key: key.to_string(),
        model: data["model"].as_str().unwrap_or_default().to_string(),
        response_time_ms: data["responseTimeMs"].as_u64().unwrap_or(0),
        result,
        usage,
    })
}

/// Where a replayed run stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// What the resumed run must do: the calls without a journaled reply (in the order they
    /// were asked for), the timers that had not fired, and the answer or failure if the mode
    /// had already produced one.
    pub pending: Vec<Effect>,
    /// The stage rows the replayed steps stored (the mode produces them again as it replays).
    pub rows: Vec<StageRow>,
    /// Steps replayed (the next step is `steps + 1`).
    pub steps: i64,
    pub usage: Usage,
    pub cost_seen: bool,
}

impl Replayed {
    /// How many calls the resumed run starts again.
    pub fn calls(&self) -> usize {
        self.pending.iter().filter(|e| matches!(e, Effect::Call(_))).count()
    }
}

/// Feeds `journal` into a freshly built `mode`. Fails when the journal does not fit the mode
/// (a reply to a call it never asked for, a missing start): such a run cannot be resumed.
pub fn replay(mode: &mut dyn Mode, journal: &[JournalRecord]) -> Result<Replayed, String> {
    let mut calls: Vec<CallSpec> = Vec::new();
    let mut timers: Vec<(String, u64)> = Vec::new();
    let mut end: Option<Effect> = None;
    let mut out = Replayed {
        pending: Vec::new(),
        rows: Vec::new(),
        steps: 0,
        usage: Usage::default(),
        cost_seen: false,
    };
    for (i, entry) in journal.iter().enumerate() {
        if entry.step != i as i64 + 1 {
            return Err(format!("journal step {} where {} was expected", entry.step, i + 1));
        }
        if matches!(end, Some(Effect::Fail { .. })) {
            return Err("journal continues after the run failed".into());
        }
        let effects = match (entry.kind.as_str(), i) {
            (START, 0) => mode.start(),
            (START, _) | (_, 0) => return Err("the journal does not begin with the start".into()),
            (REPLY, _) => {
                let key = entry.call_key.as_deref().unwrap_or_default();
                let at = calls
                    .iter()
                    .position(|c| c.key == key)
                    .ok_or_else(|| format!("a reply to {key:?}, a call the mode never made"))?;
                calls.remove(at);
                let reply = reply_from(key, &entry.data)?;
                if let Some(u) = reply.usage {
                    out.usage = out.usage.plus(u);
                    out.cost_seen |= u.cost.is_some();
                }
                mode.on_reply(reply)
            }
            (TIMER, _) => {
                let key = entry.call_key.as_deref().unwrap_or_default();
                let at = timers
                    .iter()
                    .position(|(k, _)| k == key)
                    .ok_or_else(|| format!("timer {key:?} fired but was never set"))?;
                timers.remove(at);
                mode.on_timer(key)
            }
            (other, _) => return Err(format!("unknown journal entry {other:?}")),
        };
        out.steps += 1;
        for effect in effects {
            match effect {
                Effect::Call(spec) => calls.push(spec),
                Effect::Timer { key, after_ms } => timers.push((key, after_ms)),
                Effect::Store(row) => out.rows.push(row),
                Effect::Finish { .. } if end.is_none() => end = Some(effect),
                Effect::Fail { .. } => {
                    end = Some(effect);
                    break;
                }
                _ => {}
            }
        }
    }
    if journal.is_empty() {
        return Err("the journal is empty".into());
    }
    out.pending.extend(calls.into_iter().map(Effect::Call));
    out.pending.extend(timers.into_iter().map(|(key, after_ms)| Effect::Timer { key, after_ms }));
    out.pending.extend(end);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::{self, CallErrorKind, RunContext};

    fn ctx() -> RunContext {
        RunContext {
            run_id: "0196a1b2-run".into(),
            conversation_id: "c".into(),
            message_id: "m".into(),
            question: "Which sorting algorithm should a beginner learn first?".into(),
            history: Vec::new(),
            new_conversation: true,
            seed: modes::common::seed_from_run_id("0196a1b2-run"),
            structured: Default::default(),
            material: "".into(),
        }
    }

    fn council() -> Box<dyn Mode> {
        let defaults = modes::Defaults {
            offline: true,
            stage_timeout_ms: 60_000,
            fallback: Default::default(),
            ..Default::default()
        };
        let body = json!({
            "question": ctx().question,
            "councilModels": ["sim/a", "sim/b", "sim/c"],
            "chairmanModel": "sim/d",
        });
        let req = modes::validate(&body, &defaults).unwrap();
        assert_eq!(req.mode.as_str(), "council");
        modes::instantiate(&req, ctx()).expect("council builds")
    }

    /// Answers calls the way a sim model would (deterministic, well-formed).
    fn answer(spec: &CallSpec) -> CallReply {
        let text = crate::modes::sim_text::respond(&spec.model, &spec.messages, false);
        CallReply {
            key: spec.key.clone(),
            model: spec.model.clone(),
            response_time_ms: 7,
            result: Ok(text),
            usage: Some(Usage { prompt_tokens: 3, completion_tokens: 5, cost: None }),
        }
    }

    /// The reply a call gets in these tests: sim answers, except that sim/b's stage-2
    /// ranking fails.
    fn reply_for(spec: &CallSpec) -> CallReply {
        if spec.model == "sim/b" && spec.stage == "stage2" {
            let e = CallError::new(CallErrorKind::Http, Some(503), "overloaded");
            CallReply { result: Err(e), ..answer(spec) }
        } else {
            answer(spec)
        }
    }

    /// What a run stored and answered, and the calls it has in flight.
    #[derive(Default)]
    struct Trace {
        rows: Vec<StageRow>,
        queue: Vec<CallSpec>,
        answer: Option<String>,
    }

    impl Trace {
        fn absorb(&mut self, effects: Vec<Effect>) {
            for e in effects {
                match e {
                    Effect::Call(s) => self.queue.push(s),
                    Effect::Store(r) => self.rows.push(r),
                    Effect::Finish { answer } => self.answer = Some(answer),
                    _ => {}
                }
            }
        }

        /// Answers the oldest call in flight; returns its journal entry.
        fn step(&mut self, mode: &mut dyn Mode, step: i64) -> JournalRecord {
            let spec = self.queue.remove(0);
            let reply = reply_for(&spec);
            let entry = JournalRecord {
                step,
                kind: REPLY.into(),
                call_key: Some(spec.key.clone()),
                data: reply_data(&reply),
            };
            self.absorb(mode.on_reply(reply));
            entry
        }
    }

    /// Runs a council live for `steps` replies, journaling as the Deliberation does.
    fn live(steps: usize) -> (Vec<JournalRecord>, Trace) {
        let mut mode = council();
        let mut journal =
            vec![JournalRecord { step: 1, kind: START.into(), call_key: None, data: json!({}) }];
        let mut trace = Trace::default();
        trace.absorb(mode.start());
        for _ in 0..steps {
            let step = journal.len() as i64 + 1;
            journal.push(trace.step(mode.as_mut(), step));
        }
        (journal, trace)
    }

    fn keys(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Call(s) => Some(s.key.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_replayed_run_asks_again_for_exactly_the_calls_that_were_in_flight() {
        // A council of 3 + chairman + title: 4 first calls; replies 1..=6 cross into stage 2.
        for steps in 0..=6 {
            let (journal, trace) = live(steps);
            let r = replay(council().as_mut(), &journal).unwrap();
            let expected: Vec<String> = trace.queue.iter().map(|s| s.key.clone()).collect();
            assert_eq!(keys(&r.pending), expected, "after {steps} replies");
            assert_eq!(r.rows.len(), trace.rows.len(), "after {steps} replies");
            assert_eq!(r.steps, steps as i64 + 1);
            assert_eq!(r.usage.prompt_tokens, 3 * steps as u64);
        }
    }

    #[test]
    fn a_run_resumed_after_any_step_stores_and_answers_what_an_uninterrupted_one_does() {
        let (_, mut straight) = live(0);
        let mut mode = council();
        mode.start();
        while !straight.queue.is_empty() {
            straight.step(mode.as_mut(), 0);
        }
        let signature = |rows: &[StageRow]| {
            rows.iter().map(|r| serde_json::to_string(r).unwrap()).collect::<Vec<_>>()
        };
        assert!(straight.answer.is_some());
        for steps in 1..12 {
            let (journal, mut before) = live(steps);
            if before.queue.is_empty() {
                break;
            }
            // The crash: a new mode, rebuilt from the journal, finishes the run.
            let mut mode = council();
            let r = replay(mode.as_mut(), &journal).unwrap();
            let mut after = Trace { queue: Vec::new(), ..Trace::default() };
            after.absorb(r.pending.clone());
            while !after.queue.is_empty() {
                after.step(mode.as_mut(), 0);
            }
            before.rows.extend(after.rows);
            assert_eq!(
                signature(&before.rows),
                signature(&straight.rows),
                "rows after a crash at step {steps}"
            );
            assert_eq!(after.answer, straight.answer, "answer after a crash at step {steps}");
        }
    }

    #[test]
    fn a_journal_that_does_not_fit_the_mode_is_refused() {
        let (mut journal, _) = live(2);
        journal[1].call_key = Some("stage9:0".into());
        assert!(replay(council().as_mut(), &journal).unwrap_err().contains("never made"));
        let (mut journal, _) = live(2);
        journal.remove(0);
        assert!(replay(council().as_mut(), &journal).is_err(), "no start");
        let (mut journal, _) = live(3);
        journal[2].step = 7;
        assert!(replay(council().as_mut(), &journal).is_err(), "a gap");
        assert!(replay(council().as_mut(), &[]).is_err(), "empty");
    }

    #[test]
    fn journaled_replies_read_back_whole() {
        let ok = CallReply {
            key: "stage1:0".into(),
            model: "sim/a".into(),
            response_time_ms: 1234,
            result: Ok("text with \u{0} and ünïcode".into()),
            usage: Some(Usage { prompt_tokens: 1, completion_tokens: 2, cost: Some(0.5) }),
        };
        assert_eq!(reply_from("stage1:0", &reply_data(&ok)).unwrap(), ok);
        let mut err = CallError::new(CallErrorKind::Http, Some(429), "slow down");
        err.retry_after_ms = Some(2000);
        let failed = CallReply { result: Err(err), usage: None, ..ok };
        assert_eq!(reply_from("stage1:0", &reply_data(&failed)).unwrap(), failed);
    }
}
