//! Ids that cross layers: a client names a run or a conversation, the web layer checks the
//! name once where it comes in ([`RunId::parse`]), and the engine takes only checked ids, so
//! a run's id cannot be passed where a conversation's is meant, and a malformed one (too long,
//! odd characters) is answered "not found" without reaching the database.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest id accepted (ours are 36-character UUIDs; a little room for older ones).
const MAX_ID_LEN: usize = 64;

/// Whether `s` can be an id: 1-64 ASCII letters, digits, `-` and `_`.
fn well_formed(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A new time-ordered id (UUIDv7).
            pub fn generate() -> Self {
                $name(uuid::Uuid::now_v7().to_string())
            }

            /// The id a client gave, if it can be one; None is answered as not found.
            pub fn parse(s: &str) -> Option<Self> {
                well_formed(s).then(|| $name(s.to_string()))
            }

            /// An id read back from the store or made here: trusted as it is.
            pub fn from_stored(s: String) -> Self {
                $name(s)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }

            /// What a "not found" names: `run 01…`.
            pub fn describe(&self) -> String {
                format!(concat!($what, " {}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
    };
}

id_type!(
    /// A run (one deliberation: a question put to a mode).
    RunId,
    "run"
);
id_type!(
    /// A conversation (a question and its follow-ups, with their runs).
    ConversationId,
    "conversation"
);
id_type!(
    /// An eval (`conclave eval`: a question set run through several arms).
    EvalId,
    "eval"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plausible_ids_are_taken_and_they_read_back_as_given() {
        let id = RunId::generate();
        assert_eq!(RunId::parse(id.as_str()), Some(id.clone()));
        assert_eq!(id.as_str().len(), 36);
        for bad in ["", "a/b", "../etc", "x y", "é", &"a".repeat(65), "1;DROP"] {
            assert_eq!(RunId::parse(bad), None, "{bad:?}");
        }
        assert!(ConversationId::parse("legacy_id-7").is_some());
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""), "a plain string");
        assert_eq!(RunId::parse("r1").unwrap().describe(), "run r1");
    }
}
