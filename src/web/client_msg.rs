//! WebSocket client messages: the text of a frame → a typed [`ClientMsg`], or the error the
//! client is sent. Pure (no socket, no actor), so it is unit-tested and fuzzed on its own; the
//! session in `ws.rs` only executes what this returns.

use serde_json::{json, Value};

/// The longest run id accepted in `watch`, `unwatch` and `cancel` (run ids are 36-character
/// UUIDs): a longer one is refused here rather than looked up, logged and echoed back.
pub const MAX_RUN_ID_CHARS: usize = 100;

/// What a client asks for. The optional `id` of the message travels beside it in [`Decoded`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMsg {
    /// Start a run; `request` is a start body, validated later like `POST /api/deliberations`.
    Start {
        request: Value,
    },
    /// Watch a run from the events after `since` (0: all of them).
    Watch {
        run: String,
        since: i64,
    },
    Unwatch {
        run: String,
    },
    Cancel {
        run: String,
    },
    /// Subscribe to the list of live runs.
    Dashboard,
    Ping,
}

/// A decoded message with the `id` to echo in the direct reply (`Null` when absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub id: Value,
    pub msg: ClientMsg,
}

/// Why a message was refused, as the client is told: `{type:"error", message, field?, id?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub id: Value,
    pub message: String,
    pub field: Option<&'static str>,
}

impl DecodeError {
    fn new(id: &Value, field: Option<&'static str>, message: impl Into<String>) -> Self {
        DecodeError { id: id.clone(), message: message.into(), field }
    }

    /// The error frame sent to the client.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "type": "error", "message": self.message });
        if let Some(f) = self.field {
            v["field"] = json!(f);
        }
        if !self.id.is_null() {
            v["id"] = self.id.clone();
        }
        v
    }
}

/// Decodes one text frame.
pub fn decode(text: &str) -> Result<Decoded, DecodeError> {
    let msg = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => o,
        Ok(_) => {
            return Err(DecodeError::new(
                &Value::Null,
                None,
                "messages must be JSON objects with a `type`",
            ))
        }
        Err(e) => {
            return Err(DecodeError::new(
                &Value::Null,
                None,
                format!("messages must be JSON objects with a `type` (invalid JSON: {e})"),
            ))
        }
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let kind = match msg.get("type") {
        Some(Value::String(t)) => t.as_str(),
        None | Some(Value::Null) => {
            return Err(DecodeError::new(&id, Some("type"), "messages need a `type`"))
        }
        Some(_) => return Err(DecodeError::new(&id, Some("type"), "`type` must be a string")),
    };
    let run = || run_of(&msg, &id, kind);
    let msg = match kind {
        "start" => {
            let request = match msg.get("request") {
                Some(r @ Value::Object(_)) => r.clone(),
                Some(_) => {
                    return Err(DecodeError::new(
                        &id,
                        Some("request"),
                        "`request` must be a JSON object (a start body)",
                    ))
                }
                // The start body may also be inlined in the message itself.
                None => {
                    let mut b = msg.clone();
                    b.remove("type");
                    b.remove("id");
                    Value::Object(b)
                }
            };
            ClientMsg::Start { request }
        }
        "watch" => {
            let since = match msg.get("since") {
                None | Some(Value::Null) => 0,
                Some(v) => match v.as_i64() {
                    Some(n) if n >= 0 => n,
                    _ => {
                        return Err(DecodeError::new(
                            &id,
                            Some("since"),
                            "since must be a non-negative sequence number",
                        ))
                    }
                },
            };
            ClientMsg::Watch { run: run()?, since }
        }
        "unwatch" => ClientMsg::Unwatch { run: run()? },
        "cancel" => ClientMsg::Cancel { run: run()? },
        "dashboard" => ClientMsg::Dashboard,
        "ping" => ClientMsg::Ping,
        other => {
            // Echo at most a short prefix of what the client sent.
            let shown: String = other.chars().take(40).collect();
            return Err(DecodeError::new(
                &id,
                Some("type"),
                format!(
                    "unknown message type {shown:?}; known: start, watch, unwatch, cancel, \
                     dashboard, ping"
                ),
            ));
        }
    };
    Ok(Decoded { id, msg })
}

fn run_of(
    msg: &serde_json::Map<String, Value>,
    id: &Value,
    kind: &str,
) -> Result<String, DecodeError> {
    match msg.get("run") {
        Some(Value::String(r)) if !r.is_empty() && r.chars().count() <= MAX_RUN_ID_CHARS => {
            Ok(r.clone())
        }
        Some(Value::String(r)) if !r.is_empty() => Err(DecodeError::new(
            id,
            Some("run"),
            format!("`run` is not a run id (at most {MAX_RUN_ID_CHARS} characters)"),
        )),
        None | Some(Value::Null) => {
            Err(DecodeError::new(id, Some("run"), format!("{kind} needs `run`")))
        }
        Some(_) => Err(DecodeError::new(id, Some("run"), "`run` must be a non-empty string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_decodes() {
        let d = decode(r#"{"type":"watch","run":"R","since":3,"id":7}"#).unwrap();
        assert_eq!(
            d,
            Decoded { id: json!(7), msg: ClientMsg::Watch { run: "R".into(), since: 3 } }
        );
        let d = decode(r#"{"type":"start","request":{"question":"q"}}"#).unwrap();
        assert_eq!(d.msg, ClientMsg::Start { request: json!({"question": "q"}) });
        let d = decode(r#"{"type":"start","id":1,"question":"q"}"#).unwrap();
        assert_eq!(d.msg, ClientMsg::Start { request: json!({"question": "q"}) });
        assert_eq!(decode(r#"{"type":"ping"}"#).unwrap().msg, ClientMsg::Ping);
        assert_eq!(decode(r#"{"type":"dashboard"}"#).unwrap().msg, ClientMsg::Dashboard);
        assert_eq!(
            decode(r#"{"type":"cancel","run":"R"}"#).unwrap().msg,
            ClientMsg::Cancel { run: "R".into() }
        );
        assert_eq!(
            decode(r#"{"type":"unwatch","run":"R"}"#).unwrap().msg,
            ClientMsg::Unwatch { run: "R".into() }
        );
    }

    #[test]
    fn mistakes_name_the_field_and_keep_the_id() {
        let cases = [
            (r#"{"type":"watch","id":"a"}"#, Some("run")),
            (r#"{"type":"watch","run":5,"id":"a"}"#, Some("run")),
            (r#"{"type":"watch","run":"","id":"a"}"#, Some("run")),
            (r#"{"type":"watch","run":"R","since":-1,"id":"a"}"#, Some("since")),
            (r#"{"type":"watch","run":"R","since":"1","id":"a"}"#, Some("since")),
            (r#"{"type":"frobnicate","id":"a"}"#, Some("type")),
            (r#"{"type":42,"id":"a"}"#, Some("type")),
            (r#"{"id":"a"}"#, Some("type")),
            (r#"{"type":"start","request":[1],"id":"a"}"#, Some("request")),
        ];
        for (text, field) in cases {
            let e = decode(text).unwrap_err();
            assert_eq!(e.field, field, "{text}");
            assert_eq!(e.id, json!("a"), "{text}");
            assert_eq!(e.to_json()["id"], "a");
        }
        let long = format!(r#"{{"type":"cancel","run":"{}"}}"#, "r".repeat(MAX_RUN_ID_CHARS + 1));
        assert_eq!(decode(&long).unwrap_err().field, Some("run"));
        for text in ["", "nul\0", "[1]", "\"s\"", "{", "null", "1e999"] {
            let e = decode(text).unwrap_err();
            assert_eq!(e.id, Value::Null);
            assert_eq!(e.to_json()["type"], "error");
        }
    }

    #[test]
    fn an_unknown_type_is_echoed_only_in_part() {
        let text = format!(r#"{{"type":"{}"}}"#, "x".repeat(10_000));
        assert!(decode(&text).unwrap_err().message.len() < 200);
    }
}
