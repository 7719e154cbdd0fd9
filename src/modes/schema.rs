//! Reply schemas: the JSON a machine-read call may be answered in, built by its mode.
//!
//! A call whose reply the server reads (a ranking, a ballot, a verdict, an estimate) carries a
//! [`ReplySchema`] when its model's route asks for structured output
//! (`structured_output = "json_schema"` or `"json_object"`): labels and verdict words are
//! `enum`s of exactly this run's values, counts are `minItems`/`maxItems`, ranges are
//! `minimum`/`maximum`, and every object opens with a free-text `reasoning` field so the model
//! reasons before it commits. Text a person reads (answers, syntheses, reports) carries none.
//!
//! The schemas use the subset of JSON Schema that llama.cpp's grammar converter, Ollama, vLLM,
//! LM Studio, OpenAI's strict mode and OpenRouter all accept: `type`, `properties` (every one
//! `required`, `additionalProperties: false`), `enum`, `items`, `minItems`, `maxItems`,
//! `uniqueItems`, `minimum`, `maximum`, `maxLength` and `description`. [`ReplySchema::validate`]
//! checks exactly that subset, so a reply is read from its JSON only when it fits the schema:
//! a label outside the run, a duplicate or a score out of range is refused here as the text
//! readers refuse it. A server that constrains decoding to a grammar still may not enforce
//! every keyword (llama.cpp cannot enforce `uniqueItems`), which is why nothing is trusted
//! without this check.
//!
//! Schemas are built once per stage and shared by its calls ([`std::sync::Arc`]).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::common::SplitMix64;
use super::reading;

/// The longest `reasoning` a schema lets a model write before it commits: long enough for a
/// real argument, short enough that a small model looping inside the string still reaches the
/// fields that matter within its output cap.
pub const REASONING_MAX_CHARS: usize = 600;

/// The name of the free-text field every object schema opens with.
pub const REASONING: &str = "reasoning";

/// How every JSON form of a prompt asks for its reply ([`ReplySchema::instruction`]).
pub const ASKS_FOR_JSON: &str = "Reply with a single JSON object";

/// The JSON a machine-read call may be answered in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplySchema {
    /// What the shape is (`council_ranking`, `jury_verdict`): sent as
    /// `response_format.json_schema.name` (letters, digits and `_` only), and what the sim
    /// answers by.
    pub name: String,
    /// The JSON Schema of the reply (an object).
    pub schema: Value,
    /// The key of the list that is the reply's answer when each of its items stands on its own
    /// ([`ReplySchema::listing`]): a reply cut off inside that list is read up to the cut.
    #[serde(skip)]
    pub cut_list: Option<&'static str>,
}

/// Whose reply was read, and how: stored in a stage's parsed data as `readFrom`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReadFrom {
    /// The reply was JSON valid against the call's schema.
    Json,
    /// The reply was read by the careful text readers.
    Text,
    /// The reply's JSON was cut off (it reached its token cap inside the object): the complete
    /// items of its list before the cut were read, each valid against the schema.
    JsonCut,
}

impl ReplySchema {
    /// A schema named `name` (anything but letters, digits, `_` and `-` becomes `_`).
    pub fn new(name: &str, schema: Value) -> Arc<ReplySchema> {
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
            .take(64)
            .collect();
        Arc::new(ReplySchema { name, schema, cut_list: None })
    }

    /// This schema, whose answer is the list under `key`, each of its items standing on its own
    /// (claims, findings, ideas — not a ranking, whose half is no ranking): a reply whose JSON
    /// was cut off inside that list (at its token cap) is read from the items complete before
    /// the cut ([`ReplySchema::read_reply`], `readFrom: "json_cut"`).
    pub fn listing(self: Arc<Self>, key: &'static str) -> Arc<ReplySchema> {
        let mut s = Arc::unwrap_or_clone(self);
        s.cut_list = Some(key);
        Arc::new(s)
    }

    /// Checks `value` against the schema; the error names the first place that does not fit.
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        check(&self.schema, value, "$")
    }

    /// The JSON object a reply states and that fits the schema: the reply's answer part (a
    /// reasoning block set aside) when it is that object, possibly in a code fence; else the
    /// last JSON object in the text that fits. None when there is none.
    pub fn read(&self, text: &str) -> Option<Value> {
        let split = reading::split_reasoning(text);
        if split.unclosed {
            return None;
        }
        let answer = split.answer.trim();
        let whole = unfenced(answer);
        if let Ok(v) = serde_json::from_str::<Value>(whole) {
            if self.validate(&v).is_ok() {
                return Some(v);
            }
        }
        reading::json_values(answer).into_iter().rev().find(|v| self.validate(v).is_ok())
    }

    /// Reads a machine-read reply the one way every mode reads one. A reply that states a JSON
    /// object fitting the schema ([`ReplySchema::read`]) is read from that object's fields
    /// alone (`from_json`), and when they hold nothing usable (`from_json` gives None) it
    /// states nothing: the reading is what `from_text` makes of no text. The text readers never
    /// see such a reply: its reasoning may name an answer in passing, and a lenient reader
    /// would take the JSON's own keys and punctuation for one. A reply of a
    /// [`ReplySchema::listing`] whose JSON was cut off inside its list is read from the items
    /// complete before the cut, when each fits the list's item schema and they are usable
    /// (a text reader would take the JSON's words for an answer). Any other reply is read by
    /// `from_text`. The second value says where a reading was taken from, when `usable` says
    /// there is one.
    pub fn read_reply<T>(
        &self,
        reply: &str,
        from_json: impl FnOnce(&Value) -> Option<T>,
        from_text: impl FnOnce(&str) -> T,
        usable: impl Fn(&T) -> bool,
    ) -> (T, Option<ReadFrom>) {
        let (reading, from) = match self.read(reply) {
            Some(v) => (from_json(&v).unwrap_or_else(|| from_text("")), ReadFrom::Json),
            None => match self.read_cut(reply).and_then(|v| from_json(&v)).filter(&usable) {
                Some(cut) => (cut, ReadFrom::JsonCut),
                None => (from_text(reply), ReadFrom::Text),
            },
        };
        let from = usable(&reading).then_some(from);
        (reading, from)
    }

    /// The object `{key: [items]}` of a cut-off reply's complete items, each valid against the
    /// list's item schema; None when the schema is no listing, the reply was not cut off inside
    /// its list, or an item does not fit.
    fn read_cut(&self, reply: &str) -> Option<Value> {
        let key = self.cut_list?;
        let split = reading::split_reasoning(reply);
        if split.unclosed {
            return None;
        }
        let items = reading::cut_list_items(&split.answer, key)?;
        let item_schema = self.schema.get("properties")?.get(key)?.get("items")?;
        items.iter().all(|i| check(item_schema, i, "$").is_ok()).then(|| {
            let mut v = Map::new();
            v.insert(key.to_string(), Value::Array(items));
            Value::Object(v)
        })
    }

    /// What the prompt says instead of a seed's text format: answer with this JSON and
    /// nothing else, its fields in order with what each must hold.
    pub fn instruction(&self) -> String {
        let mut out = format!(
            "{ASKS_FOR_JSON} and nothing else (no text before or after it). Its fields, in this \
             order:\n"
        );
        if let Some(props) = self.schema.get("properties").and_then(Value::as_object) {
            for (name, field) in props {
                out.push_str(&format!("- \"{name}\": {}\n", describe(field)));
            }
        }
        out.push_str("\nIts shape (each <…> stands for your own value):\n");
        out.push_str(&placeholders(&self.schema));
        out
    }

    /// The `response_format` of a `json_schema` request (OpenAI's shape, which llama.cpp,
    /// Ollama, vLLM, LM Studio and OpenRouter read too).
    pub fn response_format(&self) -> Value {
        json!({
            "type": "json_schema",
            "json_schema": { "name": self.name, "strict": true, "schema": self.schema },
        })
    }
}

/// A machine-read stage's prompt in both forms, built once: the seed's text format, and the
/// JSON of its schema for the models whose routes take structured output.
#[derive(Debug, Clone)]
pub struct Asking {
    pub schema: Arc<ReplySchema>,
    text: String,
    json: String,
}

impl Asking {
    /// `prompt(None)` is the text form, `prompt(Some(schema))` the JSON one.
    pub fn new(schema: Arc<ReplySchema>, prompt: impl Fn(Option<&ReplySchema>) -> String) -> Self {
        let text = prompt(None);
        let json = prompt(Some(&schema));
        Asking { schema, text, json }
    }

    /// The form `model` is asked in.
    pub fn prompt(&self, structured: &super::Structured, model: &str) -> &str {
        structured.pick(model, &self.text, &self.json)
    }

    /// A call of `model` with the prompt as its one message, in the form its route takes,
    /// read by the schema.
    pub fn call(
        &self,
        kit: &super::runner::Kit,
        key: impl Into<String>,
        model: &str,
        stage: &str,
        role: &str,
    ) -> super::CallSpec {
        kit.ask(key, model, self.prompt(&kit.structured, model), stage, role)
            .with_schema(&self.schema)
    }
}

/// A fenced block's body when `text` is one fenced block (```` ```json … ``` ````); else `text`.
fn unfenced(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let Some(body_start) = rest.find('\n') else { return text };
    let body = &rest[body_start + 1..];
    match body.trim_end().strip_suffix("```") {
        Some(inner) => inner.trim(),
        None => text,
    }
}

// ---- building ---------------------------------------------------------------------------------

/// An object of `fields` (in order), every one required and nothing else allowed.
pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, schema) in fields {
        required.push(Value::String(name.to_string()));
        props.insert(name.to_string(), schema);
    }
    json!({
        "type": "object",
        "properties": Value::Object(props),
        "required": required,
        "additionalProperties": false,
    })
}

/// An object with one field per key of `keys` (in order, each required, nothing else), each
/// holding `item`: what a list of `{key, …}` items is when every key must be given once, as a
/// grammar can hold a model to fields but not to a list's distinct items.
pub fn keyed<S: AsRef<str>>(keys: &[S], item: Value) -> Value {
    object(keys.iter().map(|k| (k.as_ref(), item.clone())))
}

/// The keys of a [`keyed`] object's schema (or any object schema's fields), in order.
pub fn keys_of(schema: &Value) -> Vec<String> {
    schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
}

/// [`object`] opening with the free-text `reasoning` field, so the model reasons first.
pub fn reasoned<'a>(fields: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    let reasoning = described(
        text(REASONING_MAX_CHARS),
        "your reasoning, briefly, before you commit to an answer",
    );
    object(std::iter::once((REASONING, reasoning)).chain(fields))
}

/// A string of at most `max_chars` characters.
pub fn text(max_chars: usize) -> Value {
    json!({ "type": "string", "maxLength": max_chars })
}

/// A string of 1 to `max_chars` characters, for a field whose emptiness fails the call (an
/// answer): a server that holds its reply to the schema cannot leave it empty, and a reply from
/// one that does not is asked for again.
pub fn filled_text(max_chars: usize) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max_chars })
}

/// One of `values`, exactly as written.
pub fn one_of<S: AsRef<str>>(values: &[S]) -> Value {
    let values: Vec<&str> = values.iter().map(AsRef::as_ref).collect();
    json!({ "type": "string", "enum": values })
}

/// A whole number from `min` to `max`.
pub fn integer(min: i64, max: i64) -> Value {
    json!({ "type": "integer", "minimum": min, "maximum": max })
}

/// A number from `min` to `max`.
pub fn number(min: f64, max: f64) -> Value {
    json!({ "type": "number", "minimum": min, "maximum": max })
}

/// Any number (an estimate in the question's own unit).
pub fn any_number() -> Value {
    json!({ "type": "number" })
}

/// `true` or `false`.
pub fn boolean() -> Value {
    json!({ "type": "boolean" })
}

/// A list of `min` to `max` items of `items`.
pub fn list(items: Value, min: usize, max: usize) -> Value {
    json!({ "type": "array", "items": items, "minItems": min, "maxItems": max })
}

/// [`list`] whose items are all different (a ranking: each label once).
pub fn distinct(items: Value, min: usize, max: usize) -> Value {
    let mut v = list(items, min, max);
    v["uniqueItems"] = Value::Bool(true);
    v
}

/// `schema` with a description: what the prompt tells the model the field holds.
pub fn described(mut schema: Value, description: &str) -> Value {
    if let Some(o) = schema.as_object_mut() {
        o.insert("description".into(), Value::String(description.to_string()));
    }
    schema
}

// ---- fitting the reply's cap -----------------------------------------------------------------

/// Characters a reply is reckoned to take per token when a schema is fitted to a cap: fewer
/// than English prose (about 4.5), as JSON's quotes, braces and keys tokenize poorly.
const CHARS_PER_TOKEN: f64 = 3.0;

/// The shortest a fitted string may become.
const MIN_FITTED_CHARS: u64 = 40;

/// What an unbounded string or list is reckoned to hold at most.
const UNBOUNDED_CHARS: u64 = 400;
const UNBOUNDED_ITEMS: u64 = 8;

impl ReplySchema {
    /// This schema, or a copy whose every reply fits `max_tokens`: a model held to a schema by
    /// a grammar (llama.cpp, Ollama) fills its free-text fields up to their `maxLength`, and a
    /// reply cut off at the cap is no JSON at all. When the longest reply the schema allows
    /// would not fit, strings are shortened first (never under 40 characters), then lists
    /// (never under their `minItems`); labels, ranges and required fields are untouched, so
    /// every reply valid against the copy is valid against this schema, which is what the
    /// reader checks it by. Called once per call, not per token.
    pub fn within(self: &Arc<Self>, max_tokens: u32) -> Arc<ReplySchema> {
        let budget = f64::from(max_tokens) * CHARS_PER_TOKEN * 0.9;
        if longest(&self.schema) <= budget {
            return self.clone();
        }
        let mut schema = self.schema.clone();
        // Each pass scales by what is still over; the fixed parts (keys, labels, numbers) and
        // the floors make one pass fall short, so a few are taken.
        for scale in [scale_strings as fn(&mut Value, f64), scale_lists] {
            for _ in 0..6 {
                let over = longest(&schema) / budget;
                if over <= 1.0 {
                    break;
                }
                scale(&mut schema, 1.0 / over);
            }
        }
        Arc::new(ReplySchema { name: self.name.clone(), schema, cut_list: self.cut_list })
    }
}

/// The most characters a reply valid against `schema` can take, written compactly with a
/// space after each separator.
fn longest(schema: &Value) -> f64 {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let widest = values.iter().map(|v| v.to_string().chars().count()).max().unwrap_or(0);
        return widest as f64;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => (int_of(schema, "maxLength").unwrap_or(UNBOUNDED_CHARS) + 2) as f64,
        Some("integer" | "number") => 12.0,
        Some("boolean") => 5.0,
        Some("array") => {
            let n = int_of(schema, "maxItems")
                .unwrap_or_else(|| int_of(schema, "minItems").unwrap_or(0).max(UNBOUNDED_ITEMS));
            let item = schema.get("items").map_or(UNBOUNDED_CHARS as f64, longest);
            2.0 + n as f64 * (item + 2.0)
        }
        Some("object") => {
            let fields = schema.get("properties").and_then(Value::as_object);
            2.0 + fields.map_or(0.0, |f| {
                f.iter().map(|(k, v)| k.chars().count() as f64 + 6.0 + longest(v)).sum()
            })
        }
        _ => UNBOUNDED_CHARS as f64,
    }
}

/// Every free-text string's `maxLength` times `factor` (at least [`MIN_FITTED_CHARS`], never
/// more than it was).
fn scale_strings(schema: &mut Value, factor: f64) {
    visit(schema, &mut |node| {
        let free = node.get("type").and_then(Value::as_str) == Some("string")
            && node.get("enum").is_none();
        if free {
            let was = int_of(node, "maxLength").unwrap_or(UNBOUNDED_CHARS);
            let to = ((was as f64 * factor) as u64).max(MIN_FITTED_CHARS).min(was);
            node["maxLength"] = json!(to);
        }
    });
}

/// Every list's `maxItems` times `factor` (at least its `minItems` and 1, never more than it
/// was).
fn scale_lists(schema: &mut Value, factor: f64) {
    visit(schema, &mut |node| {
        if node.get("type").and_then(Value::as_str) == Some("array") {
            let least = int_of(node, "minItems").unwrap_or(0).max(1);
            let was = int_of(node, "maxItems").unwrap_or(UNBOUNDED_ITEMS.max(least));
            let to = ((was as f64 * factor) as u64).max(least).min(was);
            node["maxItems"] = json!(to);
        }
    });
}

fn visit(node: &mut Value, f: &mut impl FnMut(&mut Value)) {
    f(node);
    if let Some(items) = node.get_mut("items") {
        visit(items, f);
    }
    if let Some(fields) = node.get_mut("properties").and_then(Value::as_object_mut) {
        for v in fields.values_mut() {
            visit(v, f);
        }
    }
}

// ---- checking ---------------------------------------------------------------------------------

fn int_of(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return Err(format!("{at}: {value} is not one of the allowed values"));
        }
    }
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "object" => {
            let obj = value.as_object().ok_or_else(|| format!("{at}: not an object"))?;
            let props = schema.get("properties").and_then(Value::as_object);
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let name = name.as_str().unwrap_or_default();
                if !obj.contains_key(name) {
                    return Err(format!("{at}: \"{name}\" is missing"));
                }
            }
            for (name, v) in obj {
                match props.and_then(|p| p.get(name)) {
                    Some(s) => check(s, v, &format!("{at}.{name}"))?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return Err(format!("{at}: \"{name}\" is not a field of this reply"));
                    }
                    None => {}
                }
            }
        }
        "array" => {
            let items = value.as_array().ok_or_else(|| format!("{at}: not a list"))?;
            if int_of(schema, "minItems").is_some_and(|m| (items.len() as u64) < m) {
                return Err(format!("{at}: {} item(s), too few", items.len()));
            }
            if int_of(schema, "maxItems").is_some_and(|m| items.len() as u64 > m) {
                return Err(format!("{at}: {} item(s), too many", items.len()));
            }
            if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                for (i, a) in items.iter().enumerate() {
                    if items[..i].contains(a) {
                        return Err(format!("{at}: {a} appears twice"));
                    }
                }
            }
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    check(item, v, &format!("{at}[{i}]"))?;
                }
            }
        }
        "string" => {
            let s = value.as_str().ok_or_else(|| format!("{at}: not a string"))?;
            if int_of(schema, "maxLength").is_some_and(|m| s.chars().count() as u64 > m) {
                return Err(format!("{at}: longer than allowed"));
            }
            if int_of(schema, "minLength").is_some_and(|m| (s.chars().count() as u64) < m) {
                return Err(format!("{at}: shorter than allowed"));
            }
        }
        "integer" | "number" => {
            let n = value.as_f64().ok_or_else(|| format!("{at}: not a number"))?;
            if kind == "integer" && !(value.is_i64() || value.is_u64()) {
                return Err(format!("{at}: {value} is not a whole number"));
            }
            let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
            if bound("minimum").is_some_and(|m| n < m) || bound("maximum").is_some_and(|m| n > m) {
                return Err(format!("{at}: {value} is out of range"));
            }
        }
        "boolean" => {
            value.as_bool().ok_or_else(|| format!("{at}: not true or false"))?;
        }
        _ => {}
    }
    Ok(())
}

// ---- describing -------------------------------------------------------------------------------

fn quoted(values: &[Value]) -> String {
    values.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")
}

/// A field's schema in words: its description, then what it must hold.
fn describe(schema: &Value) -> String {
    let what = shape(schema);
    match schema.get("description").and_then(Value::as_str) {
        Some(d) => format!("{d} ({what})"),
        None => what,
    }
}

fn shape(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return format!("one of {}", quoted(values));
    }
    let range = || {
        let min = schema.get("minimum").map(Value::to_string);
        let max = schema.get("maximum").map(Value::to_string);
        match (min, max) {
            (Some(a), Some(b)) => format!(" from {a} to {b}"),
            (Some(a), None) => format!(" of at least {a}"),
            (None, Some(b)) => format!(" of at most {b}"),
            (None, None) => String::new(),
        }
    };
    match schema.get("type").and_then(Value::as_str).unwrap_or("") {
        "string" => match int_of(schema, "maxLength") {
            Some(n) => format!("text, at most {n} characters"),
            None => "text".into(),
        },
        "integer" => format!("a whole number{}", range()),
        "number" => format!("a number{}", range()),
        "boolean" => "true or false".into(),
        "array" => {
            let (min, max) = (int_of(schema, "minItems"), int_of(schema, "maxItems"));
            let count = match (min, max) {
                (Some(a), Some(b)) if a == b => format!("exactly {a}"),
                (Some(a), Some(b)) => format!("{a} to {b}"),
                (Some(a), None) => format!("at least {a}"),
                (None, Some(b)) => format!("at most {b}"),
                (None, None) => "any number of".into(),
            };
            let each = if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                ", each a different one"
            } else {
                ""
            };
            let item = schema.get("items").map(describe).unwrap_or_default();
            format!("a list of {count} items{each}; each item: {item}")
        }
        "object" => {
            let names: Vec<String> = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.iter().map(|(k, v)| format!("\"{k}\": {}", describe(v))).collect())
                .unwrap_or_default();
            format!("an object with {}", names.join("; "))
        }
        _ => "a value".into(),
    }
}

/// The schema's shape for the prompt, every value a placeholder (`<text>`, `<number>`,
/// `<one of the values above>`): a model copies a literal example's values (a first label, a
/// 0.0) as its answer, so the shape shows none.
fn placeholders(schema: &Value) -> String {
    if schema.get("enum").is_some() {
        return "<one of the values listed>".into();
    }
    match schema.get("type").and_then(Value::as_str).unwrap_or("") {
        "object" => {
            let fields: Vec<String> = schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("\"{k}\": {}", placeholders(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        "array" => {
            let item = schema.get("items").map(placeholders).unwrap_or_else(|| "<value>".into());
            let min = int_of(schema, "minItems").unwrap_or(0);
            let max = int_of(schema, "maxItems");
            let shown = min.clamp(1, 3) as usize;
            let more = max.is_none_or(|m| m > shown as u64);
            let mut items = vec![item; shown];
            if more {
                items.push("…".into());
            }
            format!("[{}]", items.join(", "))
        }
        "string" => "<text>".into(),
        "integer" => "<whole number>".into(),
        "number" => "<number>".into(),
        "boolean" => "<true or false>".into(),
        _ => "<value>".into(),
    }
}

// ---- sampling ---------------------------------------------------------------------------------

/// A value that fits `schema`, drawn from `rng`: what the sim answers a schema it has no
/// answer of its own for, and what the property tests feed the readers. `words(field)` gives
/// free text for a string field (cut to its `maxLength`).
pub fn sample(schema: &Value, rng: &mut SplitMix64, words: &dyn Fn(&str) -> String) -> Value {
    sample_at(schema, rng, words, REASONING)
}

fn sample_at(
    schema: &Value,
    rng: &mut SplitMix64,
    words: &dyn Fn(&str) -> String,
    field: &str,
) -> Value {
    if let Some(values) = schema.get("enum").and_then(Value::as_array).filter(|v| !v.is_empty()) {
        return values[rng.below(values.len())].clone();
    }
    let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
    match schema.get("type").and_then(Value::as_str).unwrap_or("") {
        "object" => {
            let mut o = Map::new();
            for (k, v) in schema.get("properties").and_then(Value::as_object).into_iter().flatten()
            {
                o.insert(k.clone(), sample_at(v, rng, words, k));
            }
            Value::Object(o)
        }
        "array" => {
            let item = schema.get("items").cloned().unwrap_or(Value::Null);
            let min = int_of(schema, "minItems").unwrap_or(0) as usize;
            let max = int_of(schema, "maxItems").map_or(min.max(3), |m| m as usize).max(min);
            let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
            if let Some(values) = item.get("enum").and_then(Value::as_array) {
                if unique {
                    let mut pool = values.clone();
                    rng.shuffle(&mut pool);
                    let top = max.min(pool.len());
                    let n = if top <= min { top } else { min + rng.below(top - min + 1) };
                    pool.truncate(n);
                    return Value::Array(pool);
                }
            }
            // Free-form items: the fewest allowed, at least one where one is allowed.
            let n = min.max(usize::from(max > 0)).min(max);
            Value::Array((0..n).map(|_| sample_at(&item, rng, words, field)).collect())
        }
        "string" => {
            let mut s = words(field);
            if let Some(max) = int_of(schema, "maxLength") {
                s = s.chars().take(max as usize).collect();
            }
            Value::String(s)
        }
        "integer" => {
            let lo = bound("minimum").unwrap_or(0.0) as i64;
            let hi = (bound("maximum").unwrap_or(lo as f64 + 10.0) as i64).max(lo);
            json!(lo + rng.below((hi - lo + 1) as usize) as i64)
        }
        "number" => {
            let lo = bound("minimum").unwrap_or(0.0);
            let hi = bound("maximum").unwrap_or(lo + 100.0).max(lo);
            let t = rng.below(1001) as f64 / 1000.0;
            json!(((lo + (hi - lo) * t) * 10.0).round() / 10.0)
        }
        "boolean" => Value::Bool(rng.below(2) == 1),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A review: reasoning, 3-10 findings of two long strings, a summary.
    fn review_schema() -> Arc<ReplySchema> {
        ReplySchema::new(
            "review",
            reasoned([
                (
                    "findings",
                    list(
                        object([
                            ("severity", one_of(&["MAJOR", "MINOR"])),
                            ("text", text(300)),
                            ("fix", text(300)),
                        ]),
                        3,
                        10,
                    ),
                ),
                ("summary", text(1000)),
            ]),
        )
    }

    #[test]
    fn a_schema_whose_longest_reply_would_pass_the_cap_is_fitted_to_it() {
        let review = review_schema();
        // Room enough: the very schema, shared.
        assert!(Arc::ptr_eq(&review.within(4096), &review));
        for cap in [256u32, 512, 768, 1024] {
            let fitted = review.within(cap);
            assert_eq!(fitted.name, review.name);
            let longest_reply = longest(&fitted.schema);
            assert!(
                longest_reply <= f64::from(cap) * CHARS_PER_TOKEN,
                "{cap}: {longest_reply} chars: {}",
                fitted.schema
            );
            // Only bounds moved: labels, required fields and minimum counts are as they were.
            let findings = &fitted.schema["properties"]["findings"];
            assert_eq!(findings["minItems"], 3);
            assert_eq!(
                findings["items"]["properties"]["severity"]["enum"],
                json!(["MAJOR", "MINOR"])
            );
            assert_eq!(fitted.schema["required"], review.schema["required"]);
            // The longest reply the fitted schema allows is valid against the original, which
            // the reader checks it by.
            let n = findings["maxItems"].as_u64().unwrap() as usize;
            let len = |v: &Value| v["maxLength"].as_u64().unwrap() as usize;
            let item = json!({
                "severity": "MAJOR",
                "text": "x".repeat(len(&findings["items"]["properties"]["text"])),
                "fix": "y".repeat(len(&findings["items"]["properties"]["fix"])),
            });
            let reply = json!({
                "reasoning": "r".repeat(len(&fitted.schema["properties"]["reasoning"])),
                "findings": vec![item; n],
                "summary": "s".repeat(len(&fitted.schema["properties"]["summary"])),
            });
            fitted.validate(&reply).unwrap();
            review.validate(&reply).unwrap();
        }
        // Strings are shortened before lists: at 1024 tokens the ten findings stay.
        assert_eq!(review.within(1024).schema["properties"]["findings"]["maxItems"], 10);
    }

    fn labels() -> Vec<String> {
        ["Response A", "Response B", "Response C"].iter().map(|s| s.to_string()).collect()
    }

    fn ranking_schema() -> Arc<ReplySchema> {
        let labels = labels();
        ReplySchema::new(
            "ranking",
            reasoned([("ranking", distinct(one_of(&labels), labels.len(), labels.len()))]),
        )
    }

    #[test]
    fn a_reply_that_fits_is_read_and_one_that_does_not_is_refused() {
        let s = ranking_schema();
        let good = r#"{"reasoning": "C is clearest", "ranking": ["Response C", "Response A", "Response B"]}"#;
        assert!(s.read(good).is_some());
        // In a fence, after a closed reasoning block, or after prose.
        assert!(s.read(&format!("```json\n{good}\n```")).is_some());
        assert!(s.read(&format!("<think>hmm</think>{good}")).is_some());
        assert!(s.read(&format!("Here it is:\n{good}\nThanks")).is_some());
        for bad in [
            // A label outside the run.
            r#"{"reasoning": "", "ranking": ["Response C", "Response A", "Response D"]}"#,
            // A duplicate.
            r#"{"reasoning": "", "ranking": ["Response C", "Response C", "Response B"]}"#,
            // Too few.
            r#"{"reasoning": "", "ranking": ["Response C", "Response A"]}"#,
            // A missing field, a foreign field, a wrong type.
            r#"{"ranking": ["Response C", "Response A", "Response B"]}"#,
            r#"{"reasoning": "", "ranking": ["Response C", "Response A", "Response B"], "x": 1}"#,
            r#"{"reasoning": 3, "ranking": ["Response C", "Response A", "Response B"]}"#,
            // Unfinished, or only inside an unclosed reasoning block.
            r#"{"reasoning": "C is clearest", "ranking": ["Response C", "Resp"#,
            "<think>{\"reasoning\": \"\", \"ranking\": [\"Response C\", \"Response A\", \"Response B\"]}",
        ] {
            assert_eq!(s.read(bad), None, "{bad}");
        }
    }

    #[test]
    fn ranges_whole_numbers_and_lengths_are_checked() {
        let s = ReplySchema::new("score", reasoned([("score", integer(1, 10))]));
        assert!(s.validate(&json!({"reasoning": "", "score": 10})).is_ok());
        for v in [json!(0), json!(11), json!(7.5), json!("7")] {
            assert!(s.validate(&json!({"reasoning": "", "score": v})).is_err(), "{v}");
        }
        let long = "x".repeat(REASONING_MAX_CHARS + 1);
        assert!(s.validate(&json!({"reasoning": long, "score": 5})).is_err());
        let n = ReplySchema::new("n", object([("estimate", number(0.0, 1.0))]));
        assert!(n.validate(&json!({"estimate": 0.5})).is_ok());
        assert!(n.validate(&json!({"estimate": 1.5})).is_err());
    }

    #[test]
    fn the_instruction_names_every_field_in_order_with_its_values() {
        let text = ranking_schema().instruction();
        let r = text.find("\"reasoning\"").unwrap();
        let k = text.find("\"ranking\"").unwrap();
        assert!(r < k, "{text}");
        assert!(text.contains(r#""Response A", "Response B", "Response C""#), "{text}");
        assert!(text.contains("exactly 3"), "{text}");
        // The shape shows placeholders, no value a model could copy as its answer.
        assert!(text.ends_with(
            r#"{"reasoning": <text>, "ranking": [<one of the values listed>, <one of the values listed>, <one of the values listed>]}"#
        ), "{text}");
        assert!(text.contains("each a different one"), "{text}");
    }

    #[test]
    fn names_are_safe_for_response_format() {
        assert_eq!(ReplySchema::new("jury verdict/2", json!({})).name, "jury_verdict_2");
        let f = ranking_schema().response_format();
        assert_eq!(f["type"], "json_schema");
        assert_eq!(f["json_schema"]["name"], "ranking");
        assert_eq!(f["json_schema"]["schema"]["properties"]["ranking"]["maxItems"], 3);
    }

    /// A reader that notes every text it is given and reads a ranking's first label from it.
    fn noting_reader(
        seen: &std::cell::RefCell<Vec<String>>,
    ) -> impl Fn(&str) -> Option<String> + '_ {
        |t: &str| {
            seen.borrow_mut().push(t.to_string());
            ["Response A", "Response B", "Response C"]
                .into_iter()
                .find(|l| t.contains(l))
                .map(str::to_string)
        }
    }

    #[test]
    fn a_reply_that_fits_is_read_from_its_fields_alone() {
        let s = ranking_schema();
        let seen = std::cell::RefCell::new(Vec::new());
        let first = |v: &Value| Some(v["ranking"][0].as_str().map(str::to_string));
        let fitting =
            r#"{"reasoning": "B is weak", "ranking": ["Response C", "Response A", "Response B"]}"#;
        let read = s.read_reply(fitting, first, noting_reader(&seen), Option::is_some);
        assert_eq!(read, (Some("Response C".to_string()), Some(ReadFrom::Json)));
        // Its fields hold nothing the mode can use: nothing is read, and the text reader,
        // which would find a label in the reasoning, is given no text.
        let refuse = |_: &Value| None::<Option<String>>;
        let read = s.read_reply(fitting, refuse, noting_reader(&seen), Option::is_some);
        assert_eq!(read, (None, None));
        assert_eq!(*seen.borrow(), vec![String::new()]);
        // Text, or JSON that does not fit, goes to the text reader.
        let unfit = r#"{"reasoning": "B is weak", "ranking": ["Response C"]}"#;
        let read = s.read_reply(unfit, first, noting_reader(&seen), Option::is_some);
        assert_eq!(read, (Some("Response C".to_string()), Some(ReadFrom::Text)));
        let read =
            s.read_reply("I cannot rank these.", first, noting_reader(&seen), Option::is_some);
        assert_eq!(read, (None, None));
        assert_eq!(seen.borrow().len(), 3);
    }

    proptest! {
        /// Whatever the sampler draws fits the schema and is read back whole.
        #[test]
        fn samples_fit_and_are_read_back(seed in any::<u64>(), n in 1usize..8) {
            let labels: Vec<String> = (0..n).map(super::super::common::label).collect();
            let schema = ReplySchema::new("s", reasoned([
                ("ranking", distinct(one_of(&labels), n, n)),
                ("score", integer(1, 5)),
                ("confidence", number(0.0, 1.0)),
                ("notes", list(text(40), 0, 3)),
                ("ok", boolean()),
            ]));
            let mut rng = SplitMix64::new(seed);
            let v = sample(&schema.schema, &mut rng, &|f| format!("words for {f}"));
            prop_assert!(schema.validate(&v).is_ok(), "{}", v);
            prop_assert_eq!(schema.read(&v.to_string()), Some(v.clone()));
            let ranked: Vec<String> = serde_json::from_value(v["ranking"].clone()).unwrap();
            let mut sorted = ranked.clone();
            sorted.sort();
            prop_assert_eq!(sorted, labels);
        }
    }
}
