//! Reading start requests: typed fields with the messages clients see, each naming its field
//! (`question`, `councilModels`, `modeConfig.models`...).
//!
//! [`check_fields`] runs first, for every mode, against the JSON Schema derived from the
//! mode's typed `modeConfig` (see [`super::registry`]): an unknown key, a value of the wrong
//! type, a text over its limit or a number or list beyond its bounds is refused there with the
//! field's dotted name. The mode's own `validate` then reads its typed request ([`typed`]) and
//! checks required fields and rules between fields.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
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

/// A string of at most `MAX` characters (a JSON Schema `maxLength`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Text<const MAX: usize>(pub String);

impl<const MAX: usize> JsonSchema for Text<MAX> {
    fn schema_name() -> Cow<'static, str> {
        format!("Text{MAX}").into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "maxLength": MAX })
    }
}

impl<const MAX: usize> Text<MAX> {
    /// The text without surrounding white space, when any is left.
    pub fn trimmed(&self) -> Option<String> {
        let t = self.0.trim();
        (!t.is_empty()).then(|| t.to_string())
    }
}

/// A model id (`sim/alpha`, `anthropic/claude-opus-4-6`): a string the page offers a model
/// picker for (`format: "model-id"`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(transparent)]
pub struct ModelId(pub String);

impl JsonSchema for ModelId {
    fn schema_name() -> Cow<'static, str> {
        "ModelId".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "maxLength": MAX_SHORT_CHARS, "format": "model-id" })
    }
}

/// The top-level fields every mode's request takes (a mode may accept some of its
/// `modeConfig` fields at the top level too: [`super::registry::ModeSpec::top_level`]).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Common {
    /// The mode (default `council`).
    pub mode: Option<Text<MAX_ID_CHARS>>,
    /// The question, or what the mode's `question` means.
    pub question: Option<Text<MAX_QUESTION_CHARS>>,
    /// A follow-up in an existing conversation of a multi-turn mode.
    pub conversation_id: Option<Text<MAX_ID_CHARS>>,
    /// `private` (default) or `shared`.
    pub visibility: Option<Text<MAX_ID_CHARS>>,
    /// The mode's own settings.
    pub mode_config: Option<Map<String, Value>>,
}

/// The JSON Schema of the top-level body for `mode`: [`Common`], the mode's top-level
/// aliases, and `modeConfig` as the mode's own schema.
pub fn body_schema(mode: ModeKind) -> Value {
    let config = super::registry::config_schema(mode);
    let mut body = super::registry::schema_of::<Common>();
    if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert("modeConfig".into(), config.clone());
        for key in mode.spec().top_level {
            if let Some(s) = config.pointer(&format!("/properties/{key}")) {
                props.insert((*key).to_string(), s.clone());
            }
        }
    }
    body
}

/// Refuses unknown keys, values of the wrong type, texts over their limits, values not in
/// their enumeration, and numbers and lists beyond their bounds, naming the field
/// (`councilModelz`, `modeConfig.contnet`, `modeConfig.models.judge`). The rules are the
/// mode's schema ([`body_schema`]): ranges are written once, as its schemars attributes, and
/// a list's own words for too few or too many as its `x-too-few`/`x-too-many`. A JSON Schema
/// validator (the `jsonschema` crate) compiled once per mode checks them; this only words its
/// first finding for a person, the shape's before the bounds'. A `null` anywhere in an object
/// means "absent". The mode's own `validate` then checks required fields and rules between
/// fields; a text the schema says must not be empty is returned as `Ok(Some(_))`, to be given
/// only if the mode has not said so in its own words first. One validator pass does it all.
pub fn check_fields(
    body: &Map<String, Value>,
    mode: ModeKind,
) -> Result<Option<FieldError>, FieldError> {
    use jsonschema::error::ValidationErrorKind as Kind;
    if let Some(e) = unbounded(body, "") {
        return Err(e);
    }
    let (schema, validator) = compiled(mode);
    let instance = without_nulls(body, schema);
    let findings: Vec<jsonschema::ValidationError> = validator.iter_errors(&instance).collect();
    // A number's range or a list's size (the page's list cap, [`MAX_LIST_ITEMS`], is the
    // shape's).
    let bound = |k: &Kind| {
        matches!(k, Kind::Minimum { .. } | Kind::Maximum { .. } | Kind::MinItems { .. })
            || matches!(k, Kind::MaxItems { limit } if *limit != MAX_LIST_ITEMS as u64)
    };
    let empty = |k: &Kind| matches!(k, Kind::MinLength { .. });
    let find = |wanted: &dyn Fn(&Kind) -> bool| findings.iter().find(|e| wanted(e.kind()));
    let word = |e: &jsonschema::ValidationError| worded(e, schema, &instance, mode);
    if let Some(e) = find(&|k| !bound(k) && !empty(k)).or_else(|| find(&bound)) {
        return Err(word(e));
    }
    Ok(find(&empty).map(word))
}

/// Compiles every mode's request validator now (a server calls it as it starts), so that no
/// run's start waits for it: made on the first start instead, it took a few milliseconds and
/// every start arriving meanwhile waited behind it.
pub fn prepare() {
    validators();
}

/// The mode's body schema, with every list bounded, and its validator.
fn compiled(mode: ModeKind) -> &'static (Value, jsonschema::Validator) {
    let all = validators();
    // Every registered mode was compiled; the first stands in for none.
    all.iter().find(|(id, _)| *id == mode.as_str()).map_or(&all[0].1, |(_, c)| c)
}

/// Every registered mode's id, body schema and validator.
type Compiled = Vec<(&'static str, (Value, jsonschema::Validator))>;

/// Every registered mode's body schema and validator: made once.
fn validators() -> &'static Compiled {
    static ALL: std::sync::OnceLock<Compiled> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        ModeKind::all()
            .into_iter()
            .map(|m| {
                let mut schema = body_schema(m);
                bound_lists(&mut schema);
                // The schemas are the server's own, made by schemars: one that does not
                // compile is a bug the first request of any mode (and the tests) shows.
                let validator = jsonschema::draft202012::new(&schema)
                    .unwrap_or_else(|e| panic!("{} schema: {e}", m.as_str()));
                (m.as_str(), (schema, validator))
            })
            .collect()
    })
}

/// The schema as checked: every list that sets no `maxItems` takes at most
/// [`MAX_LIST_ITEMS`] (modes allow far fewer; this bounds the work before they look), and a
/// nullable field (`anyOf: [T, {type: null}]`) is read as `T`, since no `null` reaches the
/// validator ([`without_nulls`]) and `T`'s own findings are the ones to tell.
fn bound_lists(schema: &mut Value) {
    match schema {
        Value::Object(o) => {
            // What is required, and in what words, the mode's own `validate` says.
            if o.get("required").is_some_and(Value::is_array) {
                o.remove("required");
            }
            let branch = o.get("anyOf").and_then(Value::as_array).and_then(|branches| {
                let real: Vec<&Value> = branches
                    .iter()
                    .filter(|b| b.get("type") != Some(&Value::from("null")))
                    .collect();
                (branches.len() == 2 && real.len() == 1).then(|| real[0].clone())
            });
            if let (Some(Value::Object(inner)), true) = (branch, o.contains_key("anyOf")) {
                o.remove("anyOf");
                for (k, v) in inner {
                    o.entry(k).or_insert(v);
                }
            }
            let is_array = match o.get("type") {
                Some(Value::String(t)) => t == "array",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
                _ => false,
            };
            if is_array && !o.contains_key("maxItems") {
                o.insert("maxItems".into(), Value::from(MAX_LIST_ITEMS));
            }
            o.values_mut().for_each(bound_lists);
        }
        Value::Array(items) => items.iter_mut().for_each(bound_lists),
        _ => {}
    }
}

/// The body with the `null` fields its schema knows left out ("absent"); a `null` under a key
/// the schema does not know stays, to be refused as unknown, and so does a `null` list item.
fn without_nulls(body: &Map<String, Value>, schema: &Value) -> Value {
    fn object(map: &Map<String, Value>, schema: &Value) -> Value {
        let known = schema.get("properties");
        Value::Object(
            map.iter()
                .filter_map(|(k, v)| {
                    let field = known.and_then(|p| p.get(k));
                    match (v, field) {
                        (Value::Null, Some(_)) => None,
                        _ => Some((k.clone(), strip(v, field.unwrap_or(&Value::Null)))),
                    }
                })
                .collect(),
        )
    }
    fn strip(v: &Value, schema: &Value) -> Value {
        match v {
            Value::Object(m) => object(m, schema),
            Value::Array(items) => {
                let each = schema.get("items").unwrap_or(&Value::Null);
                Value::Array(items.iter().map(|v| strip(v, each)).collect())
            }
            other => other.clone(),
        }
    }
    object(body, schema)
}

/// What no request may hold, found before any schema is read: a text with a NUL character
/// (PostgreSQL cannot store them) or a list of more than [`MAX_LIST_ITEMS`] items.
fn unbounded(map: &Map<String, Value>, prefix: &str) -> Option<FieldError> {
    fn within(v: &Value, name: &str, item: Option<usize>) -> Option<FieldError> {
        let what = item.map(|i| format!("item {i} ")).unwrap_or_default();
        match v {
            Value::String(s) if s.contains('\0') => {
                Some(FieldError::new(name, format!("{what}must not contain NUL characters")))
            }
            Value::Array(items) if items.len() > MAX_LIST_ITEMS => {
                Some(FieldError::new(name, format!("at most {MAX_LIST_ITEMS} items are allowed")))
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| match v {
                Value::Object(m) => unbounded(m, &format!("{name}[{i}].")),
                _ => within(v, name, Some(i)),
            }),
            Value::Object(m) => unbounded(m, &format!("{name}.")),
            _ => None,
        }
    }
    map.iter().find_map(|(k, v)| within(v, &format!("{prefix}{k}"), None))
}

/// A field's dotted name and, for a list item, its place, from a JSON Pointer
/// (`/modeConfig/models/2` is item 2 of `modeConfig.models`; a field of a list's item is
/// named with its place, `modeConfig.steps[1].mandate`).
fn field_of(pointer: &str, instance: &Value) -> (String, Option<usize>) {
    let mut name = String::new();
    let mut item = None;
    let mut at = instance;
    for raw in pointer.split('/').skip(1) {
        let key = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Value::Array(items) => {
                let i: usize = key.parse().unwrap_or(0);
                item = Some(i);
                at = items.get(i).unwrap_or(&Value::Null);
            }
            _ => {
                at = at.get(&key).unwrap_or(&Value::Null);
                if let Some(i) = item.take() {
                    name.push_str(&format!("[{i}]"));
                }
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(&key);
            }
        }
    }
    (name, item)
}

/// The validator's finding in the words clients have always had, naming the field.
fn worded(
    error: &jsonschema::ValidationError,
    schema: &Value,
    instance: &Value,
    mode: ModeKind,
) -> FieldError {
    use jsonschema::error::ValidationErrorKind as Kind;
    let (name, item) = field_of(error.instance_path().as_str(), instance);
    let what = item.map(|i| format!("item {i} ")).unwrap_or_default();
    // The schema object the failing keyword sits in (its siblings give the whole range).
    let keyword_path = error.schema_path().as_str();
    let holder = keyword_path.rsplit_once('/').map_or("", |(p, _)| p);
    let rules = schema.pointer(holder).unwrap_or(&Value::Null);
    let message = match error.kind() {
        Kind::AdditionalProperties { unexpected } => {
            let key = unexpected.first().map(String::as_str).unwrap_or_default();
            let place = match name.as_str() {
                "" => format!("{} requests accept", mode.as_str()),
                n => format!("`{n}` accepts"),
            };
            let prefix = if name.is_empty() { String::new() } else { format!("{name}.") };
            return unknown(key, &properties(rules), &prefix, &place);
        }
        Kind::MaxLength { limit } => {
            let got = instance_at(instance, error).as_str().map_or(0, |s| s.chars().count());
            format!("{what}is too long: at most {limit} characters (got {got})")
        }
        Kind::Type { .. } => {
            let value = instance_at(instance, error);
            if value.is_null() {
                format!("{what}must not be null")
            } else {
                format!("{what}{}", expected(&types_of(rules).0))
            }
        }
        Kind::Enum { options } => {
            let list: Vec<&str> = options
                .as_array()
                .map_or(Vec::new(), |o| o.iter().filter_map(Value::as_str).collect());
            format!("{what}must be one of: {}", list.join(", "))
        }
        Kind::MinItems { limit } => list_size(rules, true, *limit),
        Kind::MaxItems { limit } => list_size(rules, false, *limit),
        Kind::Minimum { .. } | Kind::Maximum { .. } => range(rules, &name),
        Kind::MinLength { .. } => format!("{what}must not be empty"),
        _ => format!("{what}{error}"),
    };
    FieldError { field: name, message }
}

/// The value a finding is about.
fn instance_at<'v>(instance: &'v Value, error: &jsonschema::ValidationError) -> &'v Value {
    instance.pointer(error.instance_path().as_str()).unwrap_or(&Value::Null)
}

/// A list of the wrong size: the mode's own words when its schema has them (`x-too-few`,
/// `x-too-many`), else "at least 3 models are required".
fn list_size(rules: &Value, least: bool, limit: u64) -> String {
    let own = if least { "x-too-few" } else { "x-too-many" };
    if let Some(words) = rules.get(own).and_then(Value::as_str) {
        return words.to_string();
    }
    let models = rules.pointer("/items/format") == Some(&Value::from("model-id"));
    let noun = match (models, limit == 1) {
        (true, true) => "model is",
        (true, false) => "models are",
        (false, true) => "item is",
        (false, false) => "items are",
    };
    match least {
        true => format!("at least {limit} {noun} required"),
        false => format!("at most {limit} {noun} allowed"),
    }
}

/// A number out of its range, with the whole range: a `…Ms` field in milliseconds.
fn range(rules: &Value, name: &str) -> String {
    let bound = |k: &str| rules.get(k).map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    let (min, max) = (bound("minimum"), bound("maximum"));
    let whole = types_of(rules).0.contains(&"integer");
    match (name.ends_with("Ms"), whole) {
        (true, _) => format!("must be a whole number of milliseconds from {min} to {max}"),
        (false, true) => format!("must be a whole number from {min} to {max}"),
        (false, false) => format!("must be a number from {min} to {max}"),
    }
}

/// The keys an object schema accepts, with their schemas.
fn properties(schema: &Value) -> Vec<(&str, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

/// The types a schema allows, `null` left out (null always means "absent"); a nullable
/// subschema (`anyOf: [T, {type: null}]`) is read through.
fn types_of(schema: &Value) -> (Vec<&str>, &Value) {
    if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
        if let Some(b) = branches.iter().find(|b| b.get("type") != Some(&Value::from("null"))) {
            return types_of(b);
        }
    }
    let types = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    (types.into_iter().filter(|t| *t != "null").collect(), schema)
}

fn unknown(key: &str, allowed: &[(&str, &Value)], prefix: &str, place: &str) -> FieldError {
    // A key can be anything the client sent: echo a bounded part of it (and name the empty
    // key visibly).
    let shown: String = match key {
        "" => "\"\"".to_string(),
        _ => key.chars().take(MAX_ID_CHARS).collect(),
    };
    let keys: Vec<&str> = allowed.iter().map(|(k, _)| *k).collect();
    let mut message = format!("unknown field {shown:?}");
    if let Some(near) = keys.iter().find(|k| similar(key, k)) {
        message.push_str(&format!(" (did you mean {near:?}?)"));
    }
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

/// What a value of the wrong type should have been, in words.
fn expected(types: &[&str]) -> &'static str {
    match types.first().copied() {
        Some("string") => "must be a string",
        Some("integer") => "must be a whole number",
        Some("number") => "must be a number",
        Some("boolean") => "must be true or false",
        Some("array") => "must be an array",
        Some("object") => "must be an object",
        _ => "has the wrong type",
    }
}

/// What every mode's request says before its own settings: the question and the conversation
/// it continues. [`start`] reads it; [`Asked::valid`] makes the checked request.
#[derive(Debug)]
pub struct Asked {
    pub question: String,
    pub conversation_id: Option<String>,
}

/// The start of every mode's `validate`: the question (`missing`: the mode's words when there
/// is none), the conversation it continues, and `modeConfig` read as the mode's typed request
/// (`config_required`: an absent one is an error), in that order.
pub fn start<T: serde::de::DeserializeOwned>(
    body: &Value,
    missing: &str,
    config_required: bool,
) -> Result<(Asked, T), FieldError> {
    let question = question(body, missing)?;
    let conversation_id = opt_string(body, "conversationId", "conversationId")?;
    let cfg = typed(&mode_config(body, config_required)?, "modeConfig")?;
    Ok((Asked { question, conversation_id }, cfg))
}

impl Asked {
    /// The checked request: the mode's stored `config` and every model the run may call.
    pub fn valid(
        self,
        mode: super::ModeKind,
        config: &impl serde::Serialize,
        models: Vec<String>,
    ) -> super::ValidRequest {
        super::ValidRequest {
            mode,
            question: self.question,
            conversation_id: self.conversation_id,
            config: serde_json::to_value(config).unwrap_or(Value::Null),
            models,
        }
    }
}

/// A required text, as given (not trimmed), refused with `missing` when absent or blank.
pub fn required<const MAX: usize>(
    text: Option<&Text<MAX>>,
    field: &str,
    missing: &str,
) -> Result<String, FieldError> {
    text.filter(|t| !t.0.trim().is_empty())
        .map(|t| t.0.clone())
        .ok_or_else(|| FieldError::new(field, missing))
}

/// An optional text: trimmed, and not empty when given.
pub fn opt_text<const MAX: usize>(
    text: Option<&Text<MAX>>,
    field: &str,
) -> Result<Option<String>, FieldError> {
    match text {
        None => Ok(None),
        Some(t) => t.trimmed().map(Some).ok_or_else(|| FieldError::new(field, "must not be empty")),
    }
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

/// A mode's typed request read from its `modeConfig` object. [`check_fields`] has already
/// checked the object against the same type's schema, so an error here means the schema and
/// the type disagree: it is named after `field` all the same.
pub fn typed<T: serde::de::DeserializeOwned>(
    cfg: &Map<String, Value>,
    field: &str,
) -> Result<T, FieldError> {
    serde_json::from_value(Value::Object(cfg.clone()))
        .map_err(|e| FieldError::new(field, e.to_string()))
}

/// An optional list of model ids, trimmed (its size the schema has held): an empty id is
/// refused, naming its place.
pub fn panel(list: Option<&[ModelId]>, field: &str) -> Result<Option<Vec<String>>, FieldError> {
    let Some(list) = list else { return Ok(None) };
    let trimmed = list.iter().enumerate().map(|(i, item)| match item.0.trim() {
        "" => Err(FieldError::new(field, format!("item {i} must be a non-empty model id"))),
        s => Ok(s.to_string()),
    });
    trimmed.collect::<Result<Vec<_>, _>>().map(Some)
}

/// A whole number the schema has held to its range (a timeout in milliseconds, a count), or
/// `default` when absent.
pub fn given(n: Option<i64>, default: u64) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or(default)
}

/// An optional model id: trimmed, and not empty when given.
pub fn model(id: Option<&ModelId>, field: &str) -> Result<Option<String>, FieldError> {
    match id {
        None => Ok(None),
        Some(m) if !m.0.trim().is_empty() => Ok(Some(m.0.trim().to_string())),
        Some(_) => Err(FieldError::new(field, "must not be empty")),
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
        check_fields(obj, mode.unwrap_or_else(ModeKind::default_mode)).map(|_| ())
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
        assert!(
            e.message.ends_with("`modeConfig` accepts councilModels, chairmanModel, timeoutMs"),
            "{}",
            e.message
        );
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
        // A null under a key no schema knows is still an unknown key.
        assert_eq!(field(json!({"question": "q", "bogus": null})), "bogus");
        assert_eq!(
            field(json!({"mode": "jury", "modeConfig": {"contnet": null}})),
            "modeConfig.contnet"
        );
    }

    #[test]
    fn the_schemas_bounds_are_held_and_worded() {
        let ranges = |body: Value| {
            let obj = body.as_object().unwrap().clone();
            let mode = obj.get("mode").and_then(Value::as_str).and_then(ModeKind::parse);
            check_fields(&obj, mode.unwrap_or_else(ModeKind::default_mode)).unwrap_err()
        };
        let e = ranges(json!({"question": "q", "timeoutMs": 5}));
        assert_eq!(e.field, "timeoutMs");
        assert_eq!(e.message, "must be a whole number of milliseconds from 10000 to 600000");
        let e = ranges(json!({"mode": "delphi", "modeConfig": {"maxRounds": 9}}));
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("modeConfig.maxRounds", "must be a whole number from 2 to 5")
        );
        let e = ranges(json!({"question": "q", "councilModels": vec!["a"; 7]}));
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("councilModels", "at most 6 models are allowed")
        );
        // Within bounds: nothing to say.
        let ok = json!({"question": "q", "timeoutMs": 10_000, "councilModels": ["a", "b"]});
        assert!(check_fields(ok.as_object().unwrap(), ModeKind::default_mode()).is_ok());
    }

    #[test]
    fn every_number_beyond_its_schemas_bound_is_refused_on_its_field() {
        // For each mode, each number in its settings set one past its maximum (or below its
        // minimum) is refused by the whole validation, naming that field: a bound written in
        // the schema is one the server holds.
        let defaults = super::super::Defaults {
            offline: true,
            stage_timeout_ms: 120_000,
            ..Default::default()
        };
        let mut checked = 0;
        for mode in ModeKind::all() {
            let schema = super::super::registry::config_schema(mode);
            for (key, field) in properties(schema) {
                let (types, field) = types_of(field);
                let whole = types.contains(&"integer");
                if !whole && !types.contains(&"number") {
                    continue;
                }
                let past = match (field.get("maximum"), field.get("minimum")) {
                    (Some(max), _) if whole => json!(max.as_i64().unwrap() + 1),
                    (Some(max), _) => json!(max.as_f64().unwrap() + 0.5),
                    (None, Some(min)) if whole => json!(min.as_i64().unwrap() - 1),
                    (None, Some(min)) => json!(min.as_f64().unwrap() - 0.5),
                    (None, None) => continue,
                };
                let mut body = (mode.spec().example)();
                body["modeConfig"][key] = past.clone();
                let e = super::super::validate(&body, &defaults)
                    .expect_err(&format!("{mode}: {key} = {past} was accepted"));
                assert_eq!(e.field, format!("modeConfig.{key}"), "{mode}: {key} = {past}: {e}");
                checked += 1;
            }
        }
        assert!(checked >= 20, "only {checked} bounded numbers found");
    }

    #[test]
    fn every_field_of_a_schema_is_one_its_mode_accepts() {
        // A body carrying every field of the mode's schema, each with a valid value, passes
        // the mode's own validation: the schema lists nothing the mode would refuse.
        fn value(schema: &Value, key: &str, n: &mut usize) -> Value {
            let (types, schema) = types_of(schema);
            if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.last())
            {
                return first.clone();
            }
            match types.first().copied() {
                Some("string") => {
                    *n += 1;
                    // As long as the schema's `minLength` asks, if it asks for more.
                    let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
                    let text = format!("{key}-{n}");
                    let pad = (min as usize).saturating_sub(text.chars().count());
                    json!(format!("{text}{}", "x".repeat(pad)))
                }
                Some("integer") => schema.get("maximum").cloned().unwrap_or(json!(1)),
                Some("number") => schema.get("minimum").cloned().unwrap_or(json!(1.0)),
                Some("boolean") => json!(true),
                Some("array") => {
                    let count = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1);
                    let each = schema.get("items").cloned().unwrap_or(Value::Null);
                    Value::Array((0..count).map(|_| value(&each, key, n)).collect())
                }
                Some("object") => Value::Object(
                    properties(schema)
                        .iter()
                        .map(|(k, s)| (k.to_string(), value(s, k, n)))
                        .collect(),
                ),
                _ => Value::Null,
            }
        }
        let defaults = super::super::Defaults {
            offline: true,
            stage_timeout_ms: 120_000,
            fallback: Default::default(),
            ..Default::default()
        };
        for mode in ModeKind::all() {
            let schema = super::super::registry::config_schema(mode);
            let mut n = 0;
            let cfg = value(schema, "x", &mut n);
            assert!(!cfg.as_object().is_some_and(|o| o.is_empty()), "{mode}: {schema}");
            let body = json!({"mode": mode.as_str(), "question": "q", "modeConfig": cfg});
            super::super::validate(&body, &defaults)
                .unwrap_or_else(|e| panic!("{mode}: {e}\n{body}"));
        }
    }
}
