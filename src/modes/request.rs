//! Reading start requests: typed fields with the messages clients see, each naming its field
//! (`question`, `councilModels`, `modeConfig.models`...).

use std::ops::RangeInclusive;

use serde_json::{Map, Value};

use super::FieldError;

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
