//! Reading a step's reply: its `[Editor's Note: …]` spans.

/// Every `[Editor's Note: …]` of a text (up to the first `]`), its words only.
pub fn editor_notes(text: &str) -> Vec<String> {
    regex!(r"(?i)\[\s*editor(?:['’]s|s)?\s+note\s*:?([^\]]*)\]")
        .captures_iter(text)
        .map(|c| c[1].trim().to_string())
        .collect()
}
