//! Test helpers for driving modes with fake replies.

use serde_json::Value;

use super::common::seed_from_run_id;
use super::registry::SimAsk;
use super::{
    validate, CallError, CallErrorKind, CallReply, CallSpec, ChatMessage, Defaults, Effect,
    FieldError, Mode, ReplySchema, RunContext, StageRow, ValidRequest,
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
        material: "".into(),
    }
}

/// Offline defaults with a stage timeout of 120 s and no backup models.
pub fn offline_defaults() -> Defaults {
    Defaults { offline: true, stage_timeout_ms: 120_000, ..Default::default() }
}

/// Validates a request of `mode` asking "q" with the modeConfig `cfg`, under offline defaults.
pub fn validate_config(mode: &str, cfg: Value) -> Result<ValidRequest, FieldError> {
    validate(
        &serde_json::json!({ "mode": mode, "question": "q", "modeConfig": cfg }),
        &offline_defaults(),
    )
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

/// The stage call keyed `key` among `effects`; there must be one.
pub fn call_keyed(effects: &[Effect], key: &str) -> CallSpec {
    stage_calls(effects).into_iter().find(|c| c.key == key).unwrap()
}

/// The name of the schema `c` asks for, if any.
pub fn schema_name(c: &CallSpec) -> Option<&str> {
    c.schema.as_ref().map(|s| s.name.as_str())
}

/// Whether the first message of `c` quotes every piece of its material.
pub fn quotes_its_material(c: &CallSpec) -> bool {
    c.material.iter().all(|m| c.messages[0].content.contains(&*m.text))
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

/// The values of `keys` in `v`, in that order.
pub fn fields<const N: usize>(v: &Value, keys: [&str; N]) -> [Value; N] {
    keys.map(|k| v[k].clone())
}

/// The data of every `name` event, in the order they went out.
pub fn all_emitted(effects: &[Effect], name: &str) -> Vec<Value> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { event, data } if event == name => Some(data.clone()),
            _ => None,
        })
        .collect()
}

/// The inner `data` of every `name` event, in the order they went out.
pub fn all_emitted_data(effects: &[Effect], name: &str) -> Vec<Value> {
    all_emitted(effects, name).into_iter().map(|d| d["data"].clone()).collect()
}

pub fn failed(effects: &[Effect]) -> Option<String> {
    effects.iter().find_map(|e| match e {
        Effect::Fail { message } => Some(message.clone()),
        _ => None,
    })
}

pub fn finished(effects: &[Effect]) -> Option<String> {
    effects.iter().find_map(|e| match e {
        Effect::Finish { answer } => Some(answer.clone()),
        _ => None,
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
    let all = m.start();
    let pending = stage_calls(&all);
    drive_from(m, all, pending, Vec::pop, answer, title)
}

/// Takes out the first of the `pending` calls: for [`drive_from`] to answer them in asked order.
pub fn first_asked(pending: &mut Vec<CallSpec>) -> Option<CallSpec> {
    (!pending.is_empty()).then(|| pending.remove(0))
}

/// Runs a mode on from its effects `all` like [`drive`], `take` picking the next `pending` call.
pub fn drive_from<M: Mode + ?Sized>(
    m: &mut M,
    mut all: Vec<Effect>,
    mut pending: Vec<CallSpec>,
    take: fn(&mut Vec<CallSpec>) -> Option<CallSpec>,
    answer: impl Fn(&CallSpec) -> Option<String>,
    title: &str,
) -> Vec<Effect> {
    while let Some(c) = take(&mut pending) {
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

/// Runs a mode to its end with every call answered by the sim's text replies, in format.
pub fn drive_on_sim_text<M: Mode + ?Sized>(m: &mut M) -> Vec<Effect> {
    use super::sim_text::respond_to;
    drive(m, |c| Some(respond_to(&c.model, &c.messages, false, c.schema.as_deref())), "t")
}

/// The stage types of the stored rows whose parsed data says what it was read from.
pub fn machine_read_stages(effects: &[Effect]) -> Vec<String> {
    let read = |r: &&StageRow| r.parsed_data.as_ref().is_some_and(|d| d.get("readFrom").is_some());
    rows(effects).iter().filter(read).map(|r| r.stage_type.clone()).collect()
}

/// The parsed data of the stored rows that `keep` picks, each row having some.
pub fn parsed_of(effects: &[Effect], keep: impl Fn(&StageRow) -> bool) -> Vec<Value> {
    rows(effects).iter().filter(|r| keep(r)).map(|r| r.parsed_data.clone().unwrap()).collect()
}

/// What a sim is asked for one prompt with no conversation, in format.
pub fn sim_ask<'a>(
    model: &'a str,
    prompt: &'a str,
    seed: u64,
    hostile: bool,
    schema: Option<&'a ReplySchema>,
) -> SimAsk<'a> {
    SimAsk { model, prompt, messages: &[], seed, malformed: false, hostile, schema }
}

/// What a sim is asked by a run's call `c`: its model and conversation, `prompt` the message read.
pub fn sim_call_ask<'a>(
    c: &'a CallSpec,
    prompt: &'a str,
    seed: u64,
    malformed: bool,
    hostile: bool,
    schema: Option<&'a ReplySchema>,
) -> SimAsk<'a> {
    SimAsk { model: &c.model, prompt, messages: &c.messages, seed, malformed, hostile, schema }
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

/// Asserts that `text` contains each of `parts`, showing the text when one is missing.
pub fn assert_contains_all(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} is missing from:\n{text}");
    }
}

/// Asserts that `report` holds no JSON, no missing value, none of `also`, and no heading line.
pub fn assert_report_free_of(report: &str, also: &[&str]) {
    for bad in ["null", "NaN", "undefined", "{\""].iter().chain(also) {
        assert!(!report.contains(bad), "{bad:?} in the report: {report}");
    }
    assert!(!report.lines().any(|l| l.starts_with('#')), "a heading in the report: {report}");
}

/// What `report` makes of `result`, checked readable (see [`assert_report_readable`]).
pub fn readable_report(result: &Value, report: fn(&Value) -> String, also: &[&str]) -> String {
    let r = report(result);
    assert_report_readable(&r, result, also);
    r
}

/// Whether `inside` holds no think tag and `answer` no tag and some text: for a closed block.
pub fn fits_a_closed_think_block(inside: &str, answer: &str) -> bool {
    let low = inside.to_lowercase();
    !low.contains("think>")
        && !low.contains("<think")
        && !answer.contains('<')
        && !answer.trim().is_empty()
}

/// Asserts that the failed synthesis went to the backup `spare` and the run failed, naming both.
pub fn assert_the_backup_synthesizer_failed_too(effects: &[Effect]) {
    let calls = calls(effects);
    assert!(calls.iter().any(|c| c.key == "synthesis:backup" && c.model == "spare"));
    let message = failed(effects).unwrap();
    assert!(message.contains("syn") && message.contains("spare"), "{message}");
}
