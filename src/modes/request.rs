//! Reading start requests: typed fields with the messages clients see, each naming its field
//! (`question`, `councilModels`, `modeConfig.models`...).
//!
//! [`check_fields`] runs first, for every mode: one table ([`fields`]) lists the keys each
//! mode's request may carry, at the top level, in `modeConfig` and in nested objects, with
//! their types and size limits. An unknown key, a value of the wrong type or a text over its
//! limit is refused there with the field's dotted name; the mode's own `validate` then checks
//! ranges, required fields and rules between fields.

use std::ops::RangeInclusive;

use serde_json::{Map, Value};

use super::{FieldError, ModeKind};

/// The longest `question` accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 20_000;
/// The longest content to judge or score (Jury's and Clarity's `modeConfig.content`).
pub const MAX_CONTENT_CHARS: usize = 200_000;
/// Other free texts: Jury's `originalQuestion`, Clarity's `context`.
pub const MAX_TEXT_CHARS: usize = 20_000;
/// Short texts: a model id, a Delphi option, a Clarity title.
pub const MAX_SHORT_CHARS: usize = 200;
/// Ids and keywords: `conversationId`, `mode`, `visibility`, `questionType`, `discussion`.
pub const MAX_ID_CHARS: usize = 100;
/// Any list in a start body (modes allow far fewer models; this bounds the work before
/// they look).
pub const MAX_LIST_ITEMS: usize = 100;

/// What a field holds. `null` is accepted for every field and means "absent".
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A string of at most this many characters.
    Text(usize),
    /// A list of strings, each of at most this many characters.
    TextList(usize),
    /// An integer (a mode checks its range).
    Whole,
    /// Any number.
    Number,
    /// An object with exactly these fields.
    Object(&'static [Field]),
}

/// One key a start body may carry.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub key: &'static str,
    pub kind: Kind,
}

const fn f(key: &'static str, kind: Kind) -> Field {
    Field { key, kind }
}

const MODEL: Kind = Kind::Text(MAX_SHORT_CHARS);
const MODELS: Kind = Kind::TextList(MAX_SHORT_CHARS);
const ID: Kind = Kind::Text(MAX_ID_CHARS);

/// Top-level keys every mode accepts (`modeConfig` is looked up per mode in [`fields`]).
/// `visibility` is read by the engine, not by the modes.
const SHARED: &[Field] = &[
    f("mode", ID),
    f("question", Kind::Text(MAX_QUESTION_CHARS)),
    f("conversationId", ID),
    f("visibility", ID),
];

const COUNCIL_TOP: &[Field] =
    &[f("councilModels", MODELS), f("chairmanModel", MODEL), f("timeoutMs", Kind::Whole)];
const COUNCIL_CONFIG: &[Field] = &[];

const VOTE_CONFIG: &[Field] =
    &[f("models", MODELS), f("chairmanModel", MODEL), f("timeoutMs", Kind::Whole)];

const JURY_CONFIG: &[Field] = &[
    f("content", Kind::Text(MAX_CONTENT_CHARS)),
    f("originalQuestion", Kind::Text(MAX_TEXT_CHARS)),
    f("jurorModels", MODELS),
    f("foremanModel", MODEL),
    f("timeoutMs", Kind::Whole),
];

const DEBATE_CONFIG: &[Field] = &[f("models", MODELS), f("timeoutMs", Kind::Whole)];

const DELPHI_CONFIG: &[Field] = &[
    f("panelistModels", MODELS),
    f("facilitatorModel", MODEL),
    f("maxRounds", Kind::Whole),
    f("numericConvergenceThreshold", Kind::Number),
    f("qualitativeConvergenceThreshold", Kind::Number),
    f("questionType", ID),
    f("options", Kind::TextList(MAX_SHORT_CHARS)),
    f("timeoutMs", Kind::Whole),
    f("globalTimeoutMs", Kind::Whole),
];

const CLARITY_ROLES: &[Field] =
    &[f("skeptic", MODEL), f("advocate", MODEL), f("generalist", MODEL), f("arbiter", MODEL)];
const CLARITY_CONFIG: &[Field] = &[
    f("content", Kind::Text(MAX_CONTENT_CHARS)),
    f("title", Kind::Text(MAX_SHORT_CHARS)),
    f("context", Kind::Text(MAX_TEXT_CHARS)),
    f("models", Kind::Object(CLARITY_ROLES)),
    f("discussion", ID),
    f("timeoutMs", Kind::Whole),
];

/// The keys a mode's request may carry besides [`SHARED`]: its own top-level keys and its
/// `modeConfig` keys. Every key a mode's `validate` reads must be listed here, or clients
/// cannot send it.
pub fn fields(mode: ModeKind) -> (&'static [Field], &'static [Field]) {
    match mode {
        ModeKind::Council => (COUNCIL_TOP, COUNCIL_CONFIG),
        ModeKind::Vote => (&[], VOTE_CONFIG),
        ModeKind::Jury => (&[], JURY_CONFIG),
        ModeKind::Debate => (&[], DEBATE_CONFIG),
        ModeKind::Delphi => (&[], DELPHI_CONFIG),
        ModeKind::Clarity => (&[], CLARITY_CONFIG),
    }
}

/// Refuses unknown keys, values of the wrong type and texts over their limits, naming the
/// field (`councilModelz`, `modeConfig.contnet`, `modeConfig.models.judge`).
pub fn check_fields(body: &Map<String, Value>, mode: ModeKind) -> Result<(), FieldError> {
    let (top, config) = fields(mode);
    let allowed: Vec<Field> = SHARED.iter().chain(top).copied().collect();
    for (key, value) in body {
        if key == "modeConfig" {
            match value {
                Value::Null => {}
                Value::Object(m) => check_object(m, config, "modeConfig.")?,
                _ => return Err(FieldError::new("modeConfig", "must be an object")),
            }
            continue;
        }
        check_entry(key, value, &allowed, "", Some(mode))?;
    }
    Ok(())
}

fn check_object(
    map: &Map<String, Value>,
    allowed: &[Field],
    prefix: &str,
) -> Result<(), FieldError> {
    for (key, value) in map {
        check_entry(key, value, allowed, prefix, None)?;
    }
    Ok(())
}

fn check_entry(
    key: &str,
    value: &Value,
    allowed: &[Field],
    prefix: &str,
    mode: Option<ModeKind>,
) -> Result<(), FieldError> {
    let Some(field) = allowed.iter().find(|f| f.key == key) else {
        return Err(unknown(key, allowed, prefix, mode));
    };
    let name = format!("{prefix}{key}");
    check_value(value, field.kind, &name)
}

fn unknown(key: &str, allowed: &[Field], prefix: &str, mode: Option<ModeKind>) -> FieldError {
    // A key can be anything the client sent: echo a bounded part of it (and name the empty
    // key visibly).
    let shown: String = match key {
        "" => "\"\"".to_string(),
        _ => key.chars().take(MAX_ID_CHARS).collect(),
    };
    let mut keys: Vec<&str> = allowed.iter().map(|f| f.key).collect();
    if mode.is_some() {
        keys.push("modeConfig");
    }
    let mut message = format!("unknown field {shown:?}");
    if let Some(near) = keys.iter().find(|k| similar(key, k)) {
        message.push_str(&format!(" (did you mean {near:?}?)"));
    }
    let place = match mode {
        Some(m) => format!("{} requests accept", m.as_str()),
        None => format!("`{}` accepts", prefix.trim_end_matches('.')),
    };
    if keys.is_empty() {
        message.push_str(&format!(
            "; `{}` takes no fields in this mode",
            prefix.trim_end_matches('.')
        ));
    } else {
        message.push_str(&format!("; {place} {}", keys.join(", ")));
    }
    FieldError { field: format!("{prefix}{shown}"), message }
}

/// Whether `a` looks like a misspelling of `b`: the same ignoring case, or at most two edits
/// apart (for keys of more than three characters).
fn similar(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len() <= 3 || a.len().abs_diff(b.len()) > 2 || a.len() > 64 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()] <= 2
}

fn check_value(value: &Value, kind: Kind, name: &str) -> Result<(), FieldError> {
    match (kind, value) {
        (_, Value::Null) => Ok(()),
        (Kind::Text(max), Value::String(s)) => check_text(s, max, name, None),
        (Kind::Text(_), _) => Err(FieldError::new(name, "must be a string")),
        (Kind::TextList(max), Value::Array(items)) => {
            if items.len() > MAX_LIST_ITEMS {
                return Err(FieldError::new(
                    name,
                    format!("at most {MAX_LIST_ITEMS} items are allowed"),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => check_text(s, max, name, Some(i))?,
                    _ => return Err(FieldError::new(name, format!("item {i} must be a string"))),
                }
            }
            Ok(())
        }
        (Kind::TextList(_), _) => Err(FieldError::new(name, "must be an array of strings")),
        (Kind::Whole, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(()),
        (Kind::Whole, _) => Err(FieldError::new(name, "must be a whole number")),
        (Kind::Number, Value::Number(_)) => Ok(()),
        (Kind::Number, _) => Err(FieldError::new(name, "must be a number")),
        (Kind::Object(fields), Value::Object(m)) => check_object(m, fields, &format!("{name}.")),
        (Kind::Object(_), _) => Err(FieldError::new(name, "must be an object")),
    }
}

/// A text within its limit, without NUL characters (PostgreSQL cannot store them).
fn check_text(s: &str, max: usize, name: &str, item: Option<usize>) -> Result<(), FieldError> {
    let what = match item {
        Some(i) => format!("item {i} "),
        None => String::new(),
    };
    // Bytes bound characters from above: count only when the bytes could be over.
    if s.len() > max && s.chars().count() > max {
        return Err(FieldError::new(
            name,
            format!("{what}is too long: at most {max} characters (got {})", s.chars().count()),
        ));
    }
    if s.contains('\0') {
        return Err(FieldError::new(name, format!("{what}must not contain NUL characters")));
    }
    Ok(())
}

/// `question`: a non-empty string (`message` is the mode's wording for a missing one).
pub fn question(body: &Value, message: &str) -> Result<String, FieldError> {
    match body.get("question") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(FieldError::new("question", message))
        }
        Some(_) => Err(FieldError::new("question", "must be a string")),
    }
}

/// `modeConfig`: an object, empty when absent (`required`: absent is an error).
pub fn mode_config(body: &Value, required: bool) -> Result<Map<String, Value>, FieldError> {
    match body.get("modeConfig") {
        None | Some(Value::Null) if !required => Ok(Map::new()),
        None | Some(Value::Null) => Err(FieldError::new("modeConfig", "is required for this mode")),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(FieldError::new("modeConfig", "must be an object")),
    }
}

/// An optional non-empty string.
pub fn opt_string(obj: &Value, key: &str, field: &str) -> Result<Option<String>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Some(Value::String(_)) => Err(FieldError::new(field, "must not be empty")),
        Some(_) => Err(FieldError::new(field, "must be a string")),
    }
}

/// A required non-empty string, with the mode's message when missing or empty.
pub fn req_string(
    obj: &Value,
    key: &str,
    field: &str,
    message: &str,
) -> Result<String, FieldError> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(FieldError::new(field, message)),
        Some(_) => Err(FieldError::new(field, "must be a string")),
    }
}

/// An optional list of model ids of a size in `range`; `too_few`/`too_many` are the mode's
/// messages (defaults when None).
pub fn model_list(
    obj: &Value,
    key: &str,
    field: &str,
    range: RangeInclusive<usize>,
    too_few: Option<&str>,
    too_many: Option<&str>,
) -> Result<Option<Vec<String>>, FieldError> {
    let items = match obj.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(FieldError::new(field, "must be an array of model ids")),
    };
    let mut models = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item.as_str().map(str::trim) {
            Some(s) if !s.is_empty() => models.push(s.to_string()),
            _ => {
                return Err(FieldError::new(
                    field,
                    format!("item {i} must be a non-empty model id"),
                ))
            }
        }
    }
    if models.len() < *range.start() {
        let m = too_few
            .map(str::to_string)
            .unwrap_or_else(|| format!("at least {} models are required", range.start()));
        return Err(FieldError::new(field, m));
    }
    if models.len() > *range.end() {
        let m = too_many
            .map(str::to_string)
            .unwrap_or_else(|| format!("at most {} models are allowed", range.end()));
        return Err(FieldError::new(field, m));
    }
    Ok(Some(models))
}

/// An optional timeout in milliseconds within `range`.
pub fn timeout_ms(
    obj: &Value,
    key: &str,
    field: &str,
    range: RangeInclusive<u64>,
    default: u64,
) -> Result<u64, FieldError> {
    match obj.get(key) {
        // The server's configured default is trusted; the range limits what clients ask for.
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(ms) if range.contains(&ms) => Ok(ms),
            _ => Err(FieldError::new(
                field,
                format!(
                    "must be a whole number of milliseconds from {} to {}",
                    range.start(),
                    range.end()
                ),
            )),
        },
    }
}

/// The models a run may call: `lists` then `singles`, each once, in first-seen order.
pub fn distinct(lists: &[&[String]], singles: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in lists.iter().flat_map(|l| l.iter().map(String::as_str)).chain(singles.iter().copied())
    {
        if !out.iter().any(|o| o == m) {
            out.push(m.to_string());
        }
    }
    out
}

/// Model ids as owned strings.
pub fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(body: Value) -> Result<(), FieldError> {
        let obj = body.as_object().unwrap();
        let mode = obj.get("mode").and_then(Value::as_str).and_then(ModeKind::parse);
        check_fields(obj, mode.unwrap_or(ModeKind::Council))
    }

    fn field(body: Value) -> String {
        check(body.clone()).expect_err(&body.to_string()).field
    }

    #[test]
    fn unknown_keys_are_named_with_their_path() {
        let e = check(json!({"question": "q", "councilModelz": []})).unwrap_err();
        assert_eq!(e.field, "councilModelz");
        assert!(e.message.starts_with("unknown field"), "{}", e.message);
        assert!(e.message.contains("did you mean \"councilModels\""), "{}", e.message);
        let e = check(json!({"mode": "jury", "modeConfig": {"contnet": "x"}})).unwrap_err();
        assert_eq!(e.field, "modeConfig.contnet");
        assert!(e.message.contains("did you mean \"content\""), "{}", e.message);
        assert_eq!(
            field(json!({"mode": "clarity", "modeConfig": {"models": {"judge": "m"}}})),
            "modeConfig.models.judge"
        );
        let e = check(json!({"mode": "council", "modeConfig": {"models": []}})).unwrap_err();
        assert_eq!(e.field, "modeConfig.models");
        assert!(e.message.ends_with("`modeConfig` takes no fields in this mode"), "{}", e.message);
        let e = check(json!({"mode": "debate", "modeConfig": {"model": []}})).unwrap_err();
        assert!(e.message.ends_with("`modeConfig` accepts models, timeoutMs"), "{}", e.message);
        // A mode's keys are not another's.
        assert_eq!(
            field(json!({"mode": "vote", "councilModels": ["a", "b", "c"]})),
            "councilModels"
        );
        assert_eq!(
            field(json!({"mode": "debate", "modeConfig": {"chairmanModel": "a"}})),
            "modeConfig.chairmanModel"
        );
        assert_eq!(field(json!({"question": "q", "": 1})), "\"\"");
        assert_eq!(field(json!({"mode": "vote", "modeConfig": {"": 1}})), "modeConfig.\"\"");
        // A huge key is echoed only in part.
        let key = "k".repeat(10_000);
        assert!(field(json!({ key: 1 })).len() <= MAX_ID_CHARS);
    }

    #[test]
    fn wrong_types_and_long_texts_are_named() {
        let cases = [
            (json!({"question": 1}), "question"),
            (json!({"question": "q", "councilModels": "a"}), "councilModels"),
            (json!({"question": "q", "councilModels": ["a", 2]}), "councilModels"),
            (json!({"question": "q", "timeoutMs": "1000"}), "timeoutMs"),
            (json!({"question": "q", "timeoutMs": 1.5}), "timeoutMs"),
            (json!({"question": "q", "modeConfig": 3}), "modeConfig"),
            (json!({"mode": "delphi", "modeConfig": {"maxRounds": true}}), "modeConfig.maxRounds"),
            (
                json!({"mode": "delphi", "modeConfig": {"numericConvergenceThreshold": "0.1"}}),
                "modeConfig.numericConvergenceThreshold",
            ),
            (json!({"mode": "clarity", "modeConfig": {"models": ["a"]}}), "modeConfig.models"),
            (
                json!({"mode": "clarity", "modeConfig": {"models": {"skeptic": 1}}}),
                "modeConfig.models.skeptic",
            ),
            (json!({"question": "q".repeat(MAX_QUESTION_CHARS + 1)}), "question"),
            (json!({"question": "nul\u{0}byte"}), "question"),
            (
                json!({"mode": "jury", "modeConfig": {"content": "c".repeat(MAX_CONTENT_CHARS + 1)}}),
                "modeConfig.content",
            ),
            (
                json!({"question": "q", "chairmanModel": "m".repeat(MAX_SHORT_CHARS + 1)}),
                "chairmanModel",
            ),
            (
                json!({"question": "q", "councilModels": vec!["a"; MAX_LIST_ITEMS + 1]}),
                "councilModels",
            ),
            (json!({"question": "q", "visibility": 7}), "visibility"),
        ];
        for (body, name) in cases {
            assert_eq!(field(body.clone()), name, "{body}");
        }
    }

    #[test]
    fn limits_count_characters_not_bytes_and_null_is_absent() {
        assert!(check(json!({"question": "é".repeat(MAX_QUESTION_CHARS)})).is_ok());
        assert!(check(
            json!({"mode": "jury", "modeConfig": {"content": "ü".repeat(MAX_CONTENT_CHARS)}})
        )
        .is_ok());
        assert!(check(json!({"question": "q", "councilModels": null, "modeConfig": null, "visibility": "private"})).is_ok());
    }

    #[test]
    fn every_listed_field_is_one_its_mode_accepts() {
        // A body carrying every field of the table, each with a valid value, passes the
        // mode's own validation: the table lists nothing a mode would refuse as unknown.
        fn value(kind: Kind, key: &str) -> Value {
            match (kind, key) {
                (Kind::TextList(_), "options") => json!(["yes", "no"]),
                (Kind::TextList(_), _) => json!(["sim/a", "sim/b", "sim/c"]),
                (Kind::Text(_), "questionType") => json!("qualitative"),
                (Kind::Text(_), "discussion") => json!("auto"),
                (Kind::Text(_), "foremanModel" | "facilitatorModel") => json!("sim/z"),
                (Kind::Text(_), _) => json!("sim/x"),
                (Kind::Whole, "maxRounds") => json!(3),
                (Kind::Whole, "globalTimeoutMs") => json!(600_000),
                (Kind::Whole, _) => json!(60_000),
                (Kind::Number, "numericConvergenceThreshold") => json!(0.2),
                (Kind::Number, _) => json!(80),
                (Kind::Object(fields), _) => Value::Object(
                    fields.iter().map(|f| (f.key.to_string(), value(f.kind, f.key))).collect(),
                ),
            }
        }
        let defaults = super::super::Defaults {
            offline: true,
            stage_timeout_ms: 120_000,
            fallback: Default::default(),
        };
        for &mode in ModeKind::all() {
            let (top, config) = fields(mode);
            let mut body = json!({"mode": mode.as_str(), "question": "q"});
            for f in top {
                body[f.key] = value(f.kind, f.key);
            }
            let cfg: Map<String, Value> =
                config.iter().map(|f| (f.key.to_string(), value(f.kind, f.key))).collect();
            body["modeConfig"] = Value::Object(cfg);
            super::super::validate(&body, &defaults).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        }
    }
}
