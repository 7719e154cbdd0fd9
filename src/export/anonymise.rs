//! Model names hidden: every model id a run names becomes `Model A`, `Model B`… (in the order the
//! run first names them), consistently across the record, the request, the result, the stage
//! rows, the events and every text (the answer included), so a shared page still says who said
//! what without saying which model it was.
//!
//! Which strings are model ids is read from the stored data, generically: a stage row's
//! `model`, and every string under a key that names models (`model`, `models`,
//! `chairmanModel`, `labelToModel`, `fallbackFrom`…) in the request, the result and the
//! events. A member told apart as `sim/alpha #2` is the model `sim/alpha`.

use serde_json::{Map, Value};

use super::RunExport;

/// Whether `key` holds model ids (or objects and lists of them).
fn names_models(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.ends_with("model") || k.ends_with("models") || k == "fallbackfrom" || k == "fallbackto"
}

/// `sim/alpha #2` is a member of the model `sim/alpha`.
fn base_id(s: &str) -> &str {
    match s.rsplit_once(" #") {
        Some((id, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => id,
        _ => s,
    }
}

fn push_id(out: &mut Vec<String>, s: &str) {
    let id = base_id(s.trim());
    if !id.is_empty() && id.chars().count() <= 200 && !out.iter().any(|o| o == id) {
        out.push(id.to_string());
    }
}

/// Every string in `v` (a value under a model key).
fn all_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => push_id(out, s),
        Value::Array(items) => items.iter().for_each(|i| all_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| all_strings(i, out)),
        _ => {}
    }
}

/// The strings under model keys anywhere in `v`.
fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Object(map) => {
            for (k, item) in map {
                if names_models(k) {
                    all_strings(item, out);
                } else {
                    collect(item, out);
                }
            }
        }
        _ => {}
    }
}

/// The model ids a run names, in the order it first names them: its request (panels first, as
/// its configuration lists them), then its stage rows, result and events.
pub fn model_ids(run: &RunExport) -> Vec<String> {
    let mut out = Vec::new();
    collect(&run.view["request"], &mut out);
    for s in &run.stages {
        if let Some(m) = &s.row.model {
            push_id(&mut out, m);
        }
        if let Some(p) = &s.row.parsed_data {
            collect(p, &mut out);
        }
    }
    collect(&run.view["result"], &mut out);
    for e in &run.events {
        collect(&e.data, &mut out);
    }
    out
}

/// `Model A`… `Model Z`, then `Model AA`…: the letters of the anonymised labels.
fn alias(i: usize) -> String {
    crate::modes::common::label(i).replacen("Response", "Model", 1)
}

/// A character that may continue a model id: a match next to one is part of a longer word.
fn id_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '@' | ':')
}

/// `text` with each id replaced by its alias where it stands alone (not inside a longer id or
/// word). Longer ids go first, so `sim/alpha-2` is not read as `sim/alpha`.
pub(crate) fn replace_ids(text: &str, names: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (id, alias) in names {
        if !out.contains(id.as_str()) {
            continue;
        }
        let mut next = String::with_capacity(out.len());
        let mut last = 0;
        for (at, _) in out.match_indices(id.as_str()) {
            if at < last {
                continue;
            }
            let before = out[..at].chars().next_back();
            let after = out[at + id.len()..].chars().next();
            if before.is_some_and(id_char) || after.is_some_and(id_char) {
                continue;
            }
            next.push_str(&out[last..at]);
            next.push_str(alias);
            last = at + id.len();
        }
        next.push_str(&out[last..]);
        out = next;
    }
    out
}

fn replace_in(v: &mut Value, names: &[(String, String)]) {
    match v {
        Value::String(s) => *s = replace_ids(s, names),
        Value::Array(items) => items.iter_mut().for_each(|i| replace_in(i, names)),
        Value::Object(map) => {
            let old = std::mem::take(map);
            *map = old
                .into_iter()
                .map(|(k, mut item)| {
                    replace_in(&mut item, names);
                    (replace_ids(&k, names), item)
                })
                .collect::<Map<String, Value>>();
        }
        _ => {}
    }
}

/// Hides every model id of the run (see the module's doc). Answers the aliases given, id to
/// alias, in order.
pub fn anonymise(run: &mut RunExport) -> Vec<(String, String)> {
    let ids = model_ids(run);
    let mut names: Vec<(String, String)> =
        ids.into_iter().enumerate().map(|(i, id)| (id, alias(i))).collect();
    let given = names.clone();
    names.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
    replace_in(&mut run.view, &names);
    for s in &mut run.stages {
        s.row.model = s.row.model.as_deref().map(|m| replace_ids(m, &names));
        s.row.content = replace_ids(&s.row.content, &names);
        if let Some(p) = &mut s.row.parsed_data {
            replace_in(p, &names);
        }
    }
    for e in &mut run.events {
        replace_in(&mut e.data, &names);
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::StageRow;
    use crate::store::StageRecord;
    use serde_json::json;

    fn stage(model: Option<&str>, content: &str, parsed: Option<Value>) -> StageRecord {
        StageRecord {
            id: "s".into(),
            message_id: "m".into(),
            position: 0,
            created_at: 0,
            row: StageRow {
                stage_type: "stage1".into(),
                stage_order: 1,
                model: model.map(str::to_string),
                role: Some("council".into()),
                content: content.into(),
                parsed_data: parsed,
                response_time_ms: None,
            },
        }
    }

    #[test]
    fn ids_are_replaced_only_where_they_stand_alone() {
        assert_eq!(alias(27), "Model AB");
        let names = vec![
            ("sim/alpha-2".to_string(), "Model B".to_string()),
            ("sim/alpha".to_string(), "Model A".to_string()),
        ];
        assert_eq!(
            replace_ids("sim/alpha said, sim/alpha-2 too (sim/alpha #2). xsim/alpha", &names),
            "Model A said, Model B too (Model A #2). xsim/alpha"
        );
    }

    #[test]
    fn every_model_everywhere_becomes_the_same_alias() {
        let mut run = RunExport {
            view: json!({
                "request": {"config": {"councilModels": ["sim/beta", "sim/alpha"], "chairmanModel": "sim/alpha"}},
                "answer": "As sim/alpha put it…",
                "outcome": "Response A (sim/beta) won",
                "result": {"stage2Metadata": {"labelToModel": {"Response A": "sim/beta"}},
                           "byModel": {"sim/alpha": 1}},
            }),
            stages: vec![stage(
                Some("sim/alpha #2"),
                "I am sim/alpha.",
                Some(json!({"votedFor": "Response A"})),
            )],
            events: vec![crate::store::StoredEvent {
                seq: 1,
                event: "call_start".into(),
                data: json!({"model": "sim/gamma", "key": "stage1:0"}),
            }],
        };
        let given = anonymise(&mut run);
        assert_eq!(
            given.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["sim/beta", "sim/alpha", "sim/gamma"]
        );
        let all = format!("{} {:?} {:?}", run.view, run.stages, run.events);
        assert!(!all.contains("sim/"), "{all}");
        assert_eq!(run.view["answer"], "As Model B put it…");
        assert_eq!(run.view["outcome"], "Response A (Model A) won");
        assert_eq!(run.view["result"]["byModel"]["Model B"], 1);
        assert_eq!(run.stages[0].row.model.as_deref(), Some("Model B #2"));
        assert_eq!(run.events[0].data["model"], "Model C");
    }
}
