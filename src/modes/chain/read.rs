//! Reading a step's reply: its `[Editor's Note: …]` spans.

use super::*;

/// Every `[Editor's Note: …]` of a text (up to the first `]`), its words only.
pub fn editor_notes(text: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\[\s*editor(?:['’]s|s)?\s+note\s*:?([^\]]*)\]")
            .unwrap_or_else(|_| unreachable!())
    })
    .captures_iter(text)
    .map(|c| c[1].trim().to_string())
    .collect()
}
