//! A run as Markdown a person reads: the question, the answer, the outcome, the models with
//! their roles, tokens and cost, then every stage's replies and computed data in the order
//! they were stored.
//!
//! Generic over modes: stage ids (`stage1`, `chain_step_2`) become words, roles take their
//! label from the registry, and stored data (parsed rankings, verdicts, tallies) is written as
//! lists with its keys in words, never as raw JSON. Model replies keep their own Markdown,
//! their headings moved below this document's, their reasoning trace set apart.

use serde_json::Value;

use super::inert::inert_html;
use super::{ConversationExport, RunExport};
use crate::modes::reading::split_reasoning;
use crate::modes::ModeKind;

/// Model text longer than this inside a stage's data (a revised answer also stored as the
/// row's content) is cut there: the full text is in the row itself or the JSON export.
const DATA_TEXT_CHARS: usize = 400;
/// How deep stored data is written out.
const DATA_DEPTH: usize = 4;

/// The run's Markdown; `level` is its title's heading level (1 alone, 2 in a conversation).
pub fn run_markdown(run: &RunExport, level: usize) -> String {
    let v = &run.view;
    let kind = v["mode"].as_str().and_then(ModeKind::parse);
    let h = |n: usize| "#".repeat((level + n - 1).min(6));
    let mut out = String::new();
    let question = v["question"].as_str().unwrap_or("");
    let title = v["title"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| first_words(question, 80));
    out.push_str(&format!("{} {}\n\n", h(1), one_line(&title)));

    let mut facts: Vec<String> = Vec::new();
    let mode_label = kind.map(|k| k.spec().label.to_string()).unwrap_or_else(|| str_of(&v["mode"]));
    facts.push(format!("**Mode:** {mode_label}"));
    let mut status = format!("**Status:** {}", str_of(&v["status"]));
    if let Some(e) = v["error"].as_str().filter(|e| !e.is_empty()) {
        status.push_str(&format!(" ({})", one_line(e)));
    }
    facts.push(status);
    if let Some(at) = v["createdAt"].as_i64() {
        let mut when = format!("**Started:** {}", utc(at));
        if let Some(ms) = v["durationMs"].as_i64() {
            when.push_str(&format!(" · **took** {}", duration(ms)));
        }
        facts.push(when);
    }
    if let Some(o) = v["outcome"].as_str().filter(|o| !o.is_empty()) {
        facts.push(format!("**Outcome:** {}", one_line(o)));
    }
    let models = models_with_roles(run, kind);
    if !models.is_empty() {
        facts.push(format!("**Models:** {}", models.join(" · ")));
    }
    let files: Vec<String> = v["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .map(|name| format!("`{}`", one_line(name).replace('`', "'")))
        .collect();
    if !files.is_empty() {
        facts.push(format!("**Attached files:** {}", files.join(", ")));
    }
    let u = &v["usage"];
    let cost = match u["cost"].as_f64() {
        Some(c) => format!("${c:.4}"),
        None => "not reported".into(),
    };
    facts.push(format!(
        "**Tokens:** {} prompt, {} completion · **Cost:** {cost}",
        thousands(u["promptTokens"].as_i64().unwrap_or(0)),
        thousands(u["completionTokens"].as_i64().unwrap_or(0)),
    ));
    if v["review"]["needsHumanReview"] == true {
        let reason = v["review"]["reason"].as_str().map(one_line).unwrap_or_default();
        let state = if v["review"]["reviewedAt"].is_null() { "pending" } else { "reviewed" };
        facts.push(format!("**Flagged for human review** ({state}): {reason}"));
    }
    for f in facts {
        out.push_str(&format!("- {f}\n"));
    }
    out.push('\n');

    out.push_str(&format!("{} Question\n\n{}\n\n", h(2), block(question, level + 2)));
    match v["answer"].as_str().filter(|a| !a.trim().is_empty()) {
        Some(answer) => {
            out.push_str(&format!("{} Answer\n\n{}\n\n", h(2), reply(answer, level + 2)));
        }
        None => out.push_str(&format!("{} Answer\n\n_No answer was produced._\n\n", h(2))),
    }

    // The result in the mode's own terms (a verdict table, a bracket, a tally); the stages then
    // give what each model wrote, without their data listed key by key.
    let report = kind.and_then(|k| k.spec().report).map(|r| r(&v["result"]));
    if let Some(r) = report.as_deref().filter(|r| !r.trim().is_empty()) {
        out.push_str(&format!("{} Result\n\n{}\n", h(2), r.trim_end()));
        out.push('\n');
    }

    let usage = usage_per_model(run);
    if !usage.is_empty() {
        out.push_str(&format!("{} Models\n\n", h(2)));
        out.push_str("| model | calls | failed | prompt tokens | completion tokens |\n");
        out.push_str("|---|---:|---:|---:|---:|\n");
        for m in usage {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                cell(&m.model),
                m.calls,
                m.failed,
                thousands(m.prompt),
                thousands(m.completion)
            ));
        }
        out.push('\n');
    }

    if !run.stages.is_empty() {
        out.push_str(&format!("{} Stages\n\n", h(2)));
        let mut current: Option<&str> = None;
        for s in &run.stages {
            let r = &s.row;
            let text = stage_row(r, kind, level + 3, report.is_none());
            if text.is_empty() {
                continue;
            }
            if current != Some(r.stage_type.as_str()) {
                current = Some(r.stage_type.as_str());
                out.push_str(&format!("{} {}\n\n", h(3), stage_words(&r.stage_type)));
            }
            out.push_str(&text);
        }
    }
    // Model text and the mode's report may hold HTML: it is written as text.
    inert_html(out.trim_end()) + "\n"
}

/// A conversation: its title, then each run in order.
pub fn conversation_markdown(c: &ConversationExport) -> String {
    let title = c
        .conversation
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| {
            c.runs.first().and_then(|r| r.view["question"].as_str()).map(|q| first_words(q, 80))
        })
        .unwrap_or_else(|| "Conversation".into());
    let mut out = format!("# {}\n\n", one_line(&title));
    let label = ModeKind::parse(&c.conversation.mode)
        .map(|k| k.spec().label.to_string())
        .unwrap_or_else(|| c.conversation.mode.clone());
    out.push_str(&format!(
        "- **Mode:** {label}\n- **Started:** {}\n- **Turns:** {}\n\n",
        utc(c.conversation.created_at),
        c.runs.len()
    ));
    for (i, run) in c.runs.iter().enumerate() {
        let md = run_markdown(run, 2);
        // Each turn's heading says which turn it is.
        let md = md.replacen("## ", &format!("## Turn {}: ", i + 1), 1);
        out.push_str(&md);
        out.push('\n');
    }
    // Each run's part is inert already; the title is the conversation's own.
    inert_html(out.trim_end()) + "\n"
}

/// One stage row: a model's reply under its role and model, or the data the mode computed.
/// `with_data`: the data read from a reply, and a data row, are listed (a mode with no report
/// of its own); else only what the models wrote is given.
fn stage_row(
    r: &crate::modes::StageRow,
    kind: Option<ModeKind>,
    level: usize,
    with_data: bool,
) -> String {
    let h = "#".repeat(level.min(6));
    let mut out = String::new();
    let role = r.role.as_deref().map(|id| role_label(kind, id));
    match &r.model {
        Some(model) => {
            let who = match &role {
                Some(role) => format!("{role}: {model}"),
                None => model.clone(),
            };
            let time =
                r.response_time_ms.map(|ms| format!(" ({})", duration(ms))).unwrap_or_default();
            out.push_str(&format!("{h} {}{time}\n\n", one_line(&who)));
            if r.content.trim().is_empty() {
                out.push_str("_No text._\n");
            } else {
                out.push_str(&reply(&r.content, level + 1));
                out.push('\n');
            }
            out.push('\n');
            if let Some(p) = r.parsed_data.as_ref().and_then(|p| unsaid(p, r)).filter(|_| with_data)
            {
                out.push_str("**Read from it:**\n\n");
                out.push_str(&data_list(&p, 0));
                out.push('\n');
            }
        }
        None if !with_data => return String::new(),
        None => {
            if let Some(role) = role {
                out.push_str(&format!("_{role}_\n\n"));
            }
            let data = r.parsed_data.clone().or_else(|| serde_json::from_str(&r.content).ok());
            match data.filter(has_content) {
                Some(d @ (Value::Object(_) | Value::Array(_))) => out.push_str(&data_list(&d, 0)),
                Some(other) => out.push_str(&format!("{}\n", scalar(&other))),
                None if !r.content.trim().is_empty()
                    && serde_json::from_str::<Value>(&r.content).is_err() =>
                {
                    out.push_str(&block(&r.content, level + 1));
                    out.push('\n');
                }
                None => out.push_str("_Nothing recorded._\n"),
            }
            out.push('\n');
        }
    }
    out
}

/// The models of the run with the roles they played, in the order they first appear.
fn models_with_roles(run: &RunExport, kind: Option<ModeKind>) -> Vec<String> {
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |model: &str, role: Option<&str>| {
        let model = model.trim();
        if model.is_empty() {
            return;
        }
        let i = match seen.iter().position(|(m, _)| m == model) {
            Some(i) => i,
            None => {
                seen.push((model.to_string(), Vec::new()));
                seen.len() - 1
            }
        };
        if let Some(role) = role.filter(|r| *r != "title") {
            let label = role_label(kind, role);
            if !seen[i].1.contains(&label) {
                seen[i].1.push(label);
            }
        }
    };
    for e in &run.events {
        if e.event == "call_start" || e.event == "fallback_start" {
            if let Some(m) = e.data["model"].as_str() {
                add(m, e.data["role"].as_str());
            }
        }
    }
    for s in &run.stages {
        if let Some(m) = &s.row.model {
            add(m, s.row.role.as_deref());
        }
    }
    seen.into_iter()
        .map(|(m, roles)| if roles.is_empty() { m } else { format!("{m} ({})", roles.join(", ")) })
        .collect()
}

struct ModelUsage {
    model: String,
    calls: u64,
    failed: u64,
    prompt: i64,
    completion: i64,
}

/// Calls, failures and tokens per model, from the stored `call_complete` events.
fn usage_per_model(run: &RunExport) -> Vec<ModelUsage> {
    let mut out: Vec<ModelUsage> = Vec::new();
    for e in run.events.iter().filter(|e| e.event == "call_complete") {
        let Some(model) = e.data["model"].as_str() else { continue };
        let i = match out.iter().position(|m| m.model == model) {
            Some(i) => i,
            None => {
                out.push(ModelUsage {
                    model: model.to_string(),
                    calls: 0,
                    failed: 0,
                    prompt: 0,
                    completion: 0,
                });
                out.len() - 1
            }
        };
        let m = &mut out[i];
        m.calls += 1;
        if e.data["ok"] != true {
            m.failed += 1;
        }
        let usage = &e.data["usage"];
        m.prompt += usage["promptTokens"].as_i64().unwrap_or(0);
        m.completion += usage["completionTokens"].as_i64().unwrap_or(0);
    }
    out
}

/// A role's label from the registry (`chairman` → "Chairman"), or its id in words.
fn role_label(kind: Option<ModeKind>, id: &str) -> String {
    kind.and_then(|k| k.spec().roles.iter().find(|r| r.id == id))
        .map(|r| r.label.to_string())
        .unwrap_or_else(|| words(id))
}

/// A stage id in words: the numbered stages of the specs by what they do (`stage1` →
/// "Answers", `stage2` → "Peer ranking", `stage3` → "Synthesis", `round1` → "Opening round"),
/// any other id spelled out: `chain_step_2` → "Chain step 2", `round_3_stats` → "Round 3
/// stats", `call_failed` → "Call failed".
pub fn stage_words(id: &str) -> String {
    match id {
        "stage1" => "Answers".into(),
        "stage2" => "Peer ranking".into(),
        "stage3" => "Synthesis".into(),
        "round1" => "Opening round".into(),
        other => words(other),
    }
}

/// An identifier (snake_case, camelCase, letters then digits) as words, the first capitalised.
pub fn words(id: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in id.chars() {
        let split = match prev {
            _ if c == '_' || c == '-' || c == ' ' || c == '.' => {
                if !cur.is_empty() {
                    parts.push(std::mem::take(&mut cur));
                }
                prev = None;
                continue;
            }
            Some(p) => {
                (p.is_ascii_alphabetic() && c.is_ascii_digit())
                    || (p.is_ascii_digit() && c.is_ascii_alphabetic())
                    || (p.is_lowercase() && c.is_uppercase())
            }
            None => false,
        };
        if split && !cur.is_empty() {
            parts.push(std::mem::take(&mut cur));
        }
        cur.push(c);
        prev = Some(c);
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    let mut text = parts
        .iter()
        .map(|p| {
            if p.chars().all(|c| c.is_uppercase()) && p.len() > 1 {
                p.clone()
            } else {
                p.to_lowercase()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(first) = text.chars().next() {
        text = first.to_uppercase().collect::<String>() + &text[first.len_utf8()..];
    }
    text
}

/// Whether everything `v` holds is already written in `content` (a label map's row says its
/// label in its text and in its data; a scorecard's scores are in the reply): then it adds
/// nothing to read.
fn said_in(v: &Value, content: &str) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => content.contains(s.as_str()),
        Value::Number(n) => content.contains(&n.to_string()) || content.contains(&scalar(v)),
        Value::Array(a) => a.iter().all(|i| said_in(i, content)),
        Value::Object(m) => m.values().all(|i| said_in(i, content)),
        Value::Bool(_) => false,
    }
}

/// What a reply's stored data adds to its text and heading: the fields not already written
/// there (the model, role and response time are in the heading). None when nothing is left.
fn unsaid(parsed: &Value, r: &crate::modes::StageRow) -> Option<Value> {
    let keep = |k: &str, v: &Value| {
        let in_heading = k == "responseTimeMs"
            || v.as_str()
                .is_some_and(|s| Some(s) == r.model.as_deref() || Some(s) == r.role.as_deref());
        has_content(v) && !in_heading && !said_in(v, &r.content)
    };
    let left = match parsed {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, v)| keep(k, v)).map(|(k, v)| (k.clone(), v.clone())).collect(),
        ),
        other if keep("", other) => other.clone(),
        _ => return None,
    };
    has_content(&left).then_some(left)
}

fn has_content(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => a.iter().any(has_content),
        Value::Object(m) => m.values().any(has_content),
        _ => true,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        // A name from the data (`averageScore`, `evidenceQuality`) is written in words.
        Value::String(s) if is_identifier(s) => words(s),
        Value::String(s) => {
            let s = one_line(s);
            if s.chars().count() > DATA_TEXT_CHARS {
                format!("{}…", s.chars().take(DATA_TEXT_CHARS).collect::<String>())
            } else {
                s
            }
        }
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => {
                let s = format!("{f:.3}");
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            _ => n.to_string(),
        },
        Value::Null => "none".into(),
        _ => String::new(),
    }
}

/// A camelCase identifier: lower-case letters, then capitalised parts (`evidenceQuality`).
/// Prose never is one word like that.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
        && s.chars().any(|c| c.is_ascii_uppercase())
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// Stored data as a nested list, keys in words: never JSON.
fn data_list(v: &Value, depth: usize) -> String {
    let pad = "  ".repeat(depth);
    let mut out = String::new();
    if depth >= DATA_DEPTH {
        return out;
    }
    match v {
        Value::Object(map) => {
            for (k, item) in map.iter().filter(|(_, i)| has_content(i)) {
                let key = key_words(k);
                out.push_str(&entry(&pad, &key, item, depth));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().filter(|i| has_content(i)).enumerate() {
                if is_scalar(item) {
                    out.push_str(&format!("{pad}- {}\n", scalar(item)));
                } else if let Some(line) = inline_object(item) {
                    out.push_str(&format!("{pad}- {line}\n"));
                } else {
                    out.push_str(&format!("{pad}- {}\n", i + 1));
                    out.push_str(&data_list(item, depth + 1));
                }
            }
        }
        other => out.push_str(&format!("{pad}- {}\n", scalar(other))),
    }
    out
}

fn entry(pad: &str, key: &str, item: &Value, depth: usize) -> String {
    if is_scalar(item) {
        return format!("{pad}- {key}: {}\n", scalar(item));
    }
    if let Value::Array(a) = item {
        if a.iter().all(is_scalar) {
            let joined: Vec<String> = a.iter().filter(|i| has_content(i)).map(scalar).collect();
            return format!("{pad}- {key}: {}\n", joined.join(", "));
        }
        // Groups in order (places with ties): `A = C; B`.
        let groups: Option<Vec<String>> = a
            .iter()
            .map(|g| {
                let g = g.as_array()?;
                g.iter()
                    .all(is_scalar)
                    .then(|| g.iter().map(scalar).collect::<Vec<_>>().join(" = "))
            })
            .collect();
        if let Some(groups) = groups {
            return format!("{pad}- {key}: {}\n", groups.join("; "));
        }
    }
    if let Some(line) = inline_object(item) {
        return format!("{pad}- {key}: {line}\n");
    }
    format!("{pad}- {key}:\n{}", data_list(item, depth + 1))
}

/// A key of stored data in words: a map keyed by data (labels, models) keeps its keys as
/// written; a level in capitals (`CRITICAL`, `VERIFIED`) reads as a word ("Critical").
fn key_words(k: &str) -> String {
    if k.contains(' ') || k.contains('/') {
        k.to_string()
    } else if k.len() >= 3 && k.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
        words(&k.to_lowercase())
    } else {
        words(k)
    }
}

/// A small object of scalars on one line: `Response A: sim/gamma; Response B: sim/alpha`.
fn inline_object(v: &Value) -> Option<String> {
    let map = v.as_object()?;
    let shown: Vec<(&String, &Value)> = map.iter().filter(|(_, i)| has_content(i)).collect();
    if shown.is_empty() || shown.len() > 8 || !shown.iter().all(|(_, i)| is_scalar(i)) {
        return None;
    }
    let line: Vec<String> = shown
        .iter()
        .map(|(k, i)| {
            let key = key_words(k);
            format!("{key}: {}", scalar(i))
        })
        .collect();
    let line = line.join("; ");
    (line.chars().count() <= 600).then_some(line)
}

/// A model's reply: its answer with headings moved below `min_level`, and its reasoning trace
/// (when it has one) folded before it.
fn reply(text: &str, min_level: usize) -> String {
    let split = split_reasoning(text);
    let mut out = String::new();
    if let Some(r) = split.reasoning.as_deref().filter(|r| !r.trim().is_empty()) {
        let quoted: Vec<String> =
            r.lines().map(|l| format!("> {l}").trim_end().to_string()).collect();
        out.push_str(&format!("> **Reasoning**\n>\n{}\n\n", quoted.join("\n")));
    }
    out.push_str(&block(&labelled_lines(&without_json(&split.answer)), min_level));
    out
}

/// Labels a mode's prompt asks for that a model may run together on one line ("ESTIMATE: ~63
/// CONFIDENCE: LOW REASONING: …"). The page reads replies the same way (`static/js/ui.js`,
/// `formatLabelledLines`).
const SHARED_LINE_LABELS: &[&str] = &[
    "ESTIMATE",
    "ANSWER",
    "CONFIDENCE",
    "CONFIDENCE_REASONING",
    "REASONING",
    "DECISION",
    "VERDICT",
    "VOTE",
    "WINNER",
    "SCORE",
    "RATIONALE",
    "TYPE",
    "OPTIONS",
];
/// Labels of under five letters that are a mode's format, not an abbreviation ("NASA: …").
const SHORT_LABELS: &[&str] = &["TYPE", "TASK", "VOTE", "RANK", "NAME", "ROLE", "CLAIM"];

/// A reply's labelled format lines for a reader: each `LABEL: value` line its own paragraph
/// headed by the label in words (`**Estimate:** ~63`), labels run together on one line split
/// apart. Fenced and indented code, prose and labels mid-sentence stay as written.
fn labelled_lines(text: &str) -> String {
    let line_re = regex!(
        r"^(\s*)(?:\*\*|__)?([A-Z]+(?:[ _][A-Z]+){0,4})(?:\*\*|__)?\s*:(?:\*\*|__)?[ \t]*(.*)$"
    );
    let split_re =
        regex!(format!(r"\s+(?:\*\*)?(?:{})(?:\*\*)?\s*:", SHARED_LINE_LABELS.join("|")));
    let is_label = |key: &str| {
        key.len() >= 5 || SHORT_LABELS.contains(&key) || SHARED_LINE_LABELS.contains(&key)
    };
    let mut out: Vec<String> = Vec::new();
    let mut fenced = false;
    for raw in text.split('\n') {
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
        }
        let code = fenced || raw.starts_with("    ") || raw.starts_with('\t');
        let head = if code { None } else { line_re.captures(raw) };
        if !head.is_some_and(|c| is_label(&c[2])) {
            out.push(raw.to_string());
            continue;
        }
        // Split where a known label starts again on the same line (one leads it).
        let mut parts: Vec<&str> = Vec::new();
        let mut from = 0;
        for m in split_re.find_iter(raw) {
            parts.push(&raw[from..m.start()]);
            from = m.start() + (m.as_str().len() - m.as_str().trim_start().len());
        }
        parts.push(&raw[from..]);
        out.push(String::new());
        for part in parts {
            match line_re.captures(part).filter(|c| is_label(&c[2])) {
                Some(c) => {
                    let value = c[3].trim().trim_start_matches("**").trim_end_matches("**").trim();
                    let label = words(&c[2].to_lowercase().replace(' ', "_"));
                    let line = if value.is_empty() {
                        format!("**{label}:**")
                    } else {
                        format!("**{label}:** {value}")
                    };
                    out.push(line);
                }
                None => out.push(part.to_string()),
            }
            out.push(String::new());
        }
    }
    out.join("\n")
}

/// A reply with each JSON document in it (standing at the start of a line, or fenced as
/// `json`) written as a list instead, as stored data is: a scorecard a model answered in JSON
/// reads as its fields.
fn without_json(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = &rest[..line_end];
        let t = line.trim_start();
        let fenced_json = t.starts_with("```json") || t.starts_with("~~~json");
        let (start, skip_after) = if fenced_json {
            (line_end, Some(&t[..3]))
        } else if t.starts_with('{') || t.starts_with('[') {
            (line.len() - t.len(), None)
        } else {
            (usize::MAX, None)
        };
        if start != usize::MAX {
            let mut stream =
                serde_json::Deserializer::from_str(&rest[start..]).into_iter::<Value>();
            if let Some(Ok(doc @ (Value::Object(_) | Value::Array(_)))) = stream.next() {
                let mut used = start + stream.byte_offset();
                let after = &rest[used..];
                let closed = match skip_after {
                    // The fence must close right after the document.
                    Some(fence) => {
                        let a = after.trim_start();
                        a.starts_with(fence).then(|| {
                            let fence_end = used + (after.len() - a.len()) + fence.len();
                            fence_end
                                + rest[fence_end..]
                                    .find('\n')
                                    .map_or(rest.len() - fence_end, |i| i + 1)
                        })
                    }
                    None => Some(used + after.find('\n').map_or(after.len(), |i| i + 1)),
                };
                if let Some(end) = closed {
                    used = end;
                    if !out.is_empty() && !out.ends_with("\n\n") {
                        out.push('\n');
                    }
                    out.push_str(&data_list(&doc, 0));
                    out.push('\n');
                    rest = &rest[used..];
                    continue;
                }
            }
        }
        out.push_str(line);
        rest = &rest[line_end..];
    }
    out
}

/// Text with its ATX headings moved down so that none is above `min_level` (outside code
/// fences), so a reply's own `# Title` does not break the document's outline.
fn block(text: &str, min_level: usize) -> String {
    let min_level = min_level.min(6);
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let top = lines.iter().filter_map(|l| heading_level(l)).min().unwrap_or(min_level);
    let shift = min_level.saturating_sub(top);
    for line in lines {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            out.push(line.to_string());
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            out.push(line.to_string());
            continue;
        }
        match heading_level(line) {
            Some(n) if shift > 0 => {
                let level = (n + shift).min(6);
                out.push(format!("{}{}", "#".repeat(level), &t[n..]));
            }
            _ => out.push(line.to_string()),
        }
    }
    out.join("\n")
}

fn heading_level(line: &str) -> Option<usize> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let n = t.chars().take_while(|c| *c == '#').count();
    let rest = &t[n..];
    ((1..=6).contains(&n) && (rest.is_empty() || rest.starts_with(' '))).then_some(n)
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cell(s: &str) -> String {
    one_line(s).replace('|', "\\|")
}

/// The first words of a text's first line, for a title.
fn first_words(s: &str, max: usize) -> String {
    let words = crate::modes::registry::short(s, max);
    if words.is_empty() {
        "Deliberation".into()
    } else {
        words
    }
}

fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn duration(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// Milliseconds since the epoch as `2026-11-27 00:31 UTC`.
fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, (rem % 3600) / 60)
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
