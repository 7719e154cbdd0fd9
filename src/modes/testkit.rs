//! Test helpers for driving modes with fake replies.

use serde_json::Value;

use super::common::seed_from_run_id;
use super::{
    CallError, CallErrorKind, CallReply, CallSpec, ChatMessage, Effect, Mode, RunContext, StageRow,
};

pub fn ctx(question: &str, history: Vec<ChatMessage>, new_conversation: bool) -> RunContext {
    RunContext {
        run_id: "run-1".into(),
        conversation_id: "conv".into(),
        message_id: "msg".into(),
        question: question.into(),
        history,
        new_conversation,
        seed: seed_from_run_id("run-1"),
        structured: Default::default(),
    }
}

pub fn ok(spec: &CallSpec, text: &str) -> CallReply {
    CallReply {
        key: spec.key.clone(),
        model: spec.model.clone(),
        response_time_ms: 10,
        result: Ok(text.into()),
        usage: None,
    }
}

pub fn err(spec: &CallSpec) -> CallReply {
    CallReply {
        key: spec.key.clone(),
        model: spec.model.clone(),
        response_time_ms: 10,
        result: Err(CallError::new(CallErrorKind::Http, Some(503), "down")),
        usage: None,
    }
}

pub fn calls(effects: &[Effect]) -> Vec<CallSpec> {
    effects
        .iter()
        .filter_map(|e| if let Effect::Call(c) = e { Some(c.clone()) } else { None })
        .collect()
}

/// Calls of one stage, leaving out the title call.
pub fn stage_calls(effects: &[Effect]) -> Vec<CallSpec> {
    calls(effects).into_iter().filter(|c| c.key != "title").collect()
}

pub fn events(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| if let Effect::Emit { event, .. } = e { Some(event.clone()) } else { None })
        .collect()
}

pub fn rows(effects: &[Effect]) -> Vec<StageRow> {
    effects
        .iter()
        .filter_map(|e| if let Effect::Store(r) = e { Some(r.clone()) } else { None })
        .collect()
}

pub fn emitted(effects: &[Effect], name: &str) -> Option<Value> {
    effects.iter().find_map(|e| match e {
        Effect::Emit { event, data } if event == name => Some(data.clone()),
        _ => None,
    })
}

pub fn failed(effects: &[Effect]) -> Option<String> {
    effects.iter().find_map(|e| {
        if let Effect::Fail { message } = e {
            Some(message.clone())
        } else {
            None
        }
    })
}

pub fn finished(effects: &[Effect]) -> Option<String> {
    effects.iter().find_map(|e| {
        if let Effect::Finish { answer } = e {
            Some(answer.clone())
        } else {
            None
        }
    })
}

/// Feeds replies and collects every effect.
pub fn feed<M: Mode + ?Sized>(m: &mut M, replies: Vec<CallReply>) -> Vec<Effect> {
    replies.into_iter().flat_map(|r| m.on_reply(r)).collect()
}

/// Runs a mode to its end: `answer` gives each call's reply (None: the call fails). The calls
/// of one batch are answered last first, so arrival order differs from the order they were
/// asked in; the title call is answered `title` after everything else.
pub fn drive<M: Mode + ?Sized>(
    m: &mut M,
    answer: impl Fn(&CallSpec) -> Option<String>,
    title: &str,
) -> Vec<Effect> {
    let mut all = m.start();
    let mut pending = stage_calls(&all);
    while let Some(c) = pending.pop() {
        let out = m.on_reply(match answer(&c) {
            Some(t) => ok(&c, &t),
            None => err(&c),
        });
        pending.extend(stage_calls(&out));
        all.extend(out);
    }
    for c in calls(&all).into_iter().filter(|c| c.key == "title") {
        all.extend(m.on_reply(ok(&c, title)));
    }
    all
}

/// The result's own keys in camelCase, at any depth.
fn camel_keys(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                if k.starts_with(|c: char| c.is_ascii_lowercase())
                    && k.chars().any(|c| c.is_ascii_uppercase())
                {
                    out.push(k.clone());
                }
                camel_keys(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| camel_keys(x, out)),
        _ => {}
    }
}

/// What a reader never sees in a mode's export report: JSON, missing values, the result's
/// keys, headings, and the mode's own protocol words and ids (`also`).
pub fn assert_report_readable(report: &str, result: &serde_json::Value, also: &[&str]) {
    for bad in ["null", "NaN", "undefined", "{\""].iter().chain(also) {
        assert!(!report.contains(bad), "{bad:?} in the report:\n{report}");
    }
    let mut keys = Vec::new();
    camel_keys(result, &mut keys);
    for k in keys {
        assert!(!report.contains(&k), "the key {k:?} in the report:\n{report}");
    }
    assert!(!report.contains("\n#"), "no headings:\n{report}");
}
