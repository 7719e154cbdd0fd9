//! Markdown whose HTML is text: every `<` outside code becomes `&lt;`, so a model's
//! `<script>` or `<img onerror=…>` reads as what it wrote wherever the export is opened and
//! runs nowhere, while code (fenced blocks, inline spans) keeps its `<` as written.
//!
//! Where it cannot be sure a `<` is inside code (a span that may cross lines, a table row whose
//! pipes split spans, an indented block), it escapes: a stray `&lt;` in code is the worst case.

/// An open fenced code block: its character, how many `>` quote it, and its indentation.
struct Fence {
    ch: char,
    quotes: usize,
    indent: usize,
}

/// A line's container prefix: spaces before any `>`, the `>` markers (each with one optional
/// space), the spaces after them, and the rest.
fn prefix(line: &str) -> (usize, usize, usize, &str) {
    let outer = line.len() - line.trim_start_matches(' ').len();
    let mut rest = &line[outer..];
    let mut quotes = 0;
    while let Some(r) = rest.strip_prefix('>') {
        quotes += 1;
        rest = r.strip_prefix(' ').unwrap_or(r);
    }
    let inner = rest.len() - rest.trim_start_matches(' ').len();
    (outer, quotes, inner, &rest[inner..])
}

/// The fence a line opens, if it surely opens one (at most three spaces in, three or more
/// backticks or tildes, and for backticks no backtick after them: that is an inline span).
fn opens(line: &str) -> Option<Fence> {
    let (outer, quotes, inner, rest) = prefix(line);
    let indent = if quotes == 0 { outer } else { inner };
    if outer > 3 || (quotes > 0 && inner > 3) {
        return None;
    }
    let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = rest.chars().take_while(|c| *c == ch).count();
    let info = &rest[run..];
    (run >= 3 && !(ch == '`' && info.contains('`'))).then_some(Fence { ch, quotes, indent })
}

/// Whether `line` ends `fence`, as a renderer would or earlier (ending it early only escapes
/// what is still code): a fence line of its character, a line outside its quotes, or a line
/// indented less than it (its list item ended).
fn closes(fence: &Fence, line: &str) -> bool {
    let (outer, quotes, inner, rest) = prefix(line);
    if quotes < fence.quotes {
        return true;
    }
    let indent = if fence.quotes == 0 { outer } else { inner };
    let fence_run: String = std::iter::repeat_n(fence.ch, 3).collect();
    rest.starts_with(&fence_run) || (!rest.trim().is_empty() && indent < fence.indent)
}

/// One line outside fences: its text made inert ([`inert_text`]), except inside inline code
/// spans that open and close on this line (`spans`). Answers whether a backtick run was left
/// open (a span the renderer may close on a later line).
fn escape_line(line: &str, spans: bool, out: &mut String) -> bool {
    let mut open = false;
    let mut plain = 0;
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        if rest.starts_with("\\`") {
            i += 2;
            continue;
        }
        if !rest.starts_with('`') {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let run = rest.len() - rest.trim_start_matches('`').len();
        match spans.then(|| closing_run(&rest[run..], run)).flatten() {
            Some(end) => {
                inert_text(&line[plain..i], out);
                out.push_str(&rest[..run + end]);
                i += run + end;
                plain = i;
            }
            None => {
                open = true;
                i += run;
            }
        }
    }
    inert_text(&line[plain..], out);
    open
}

/// Text outside code: `<` as `&lt;` (no tag, comment or autolink is left), and a link to a
/// `javascript:`, `vbscript:` or `data:` address left as the text it was written as.
fn inert_text(text: &str, out: &mut String) {
    const SCHEMES: &str = r"\s*(?:&lt;)?\s*(?:javascript|vbscript|data):";
    let link = regex!(format!(r"(?i)\]\(({SCHEMES})"));
    let definition = regex!(format!(r"(?i)^([\s>]*)\[([^\]]*\]:{SCHEMES})"));
    let text = text.replace('<', "&lt;");
    let text = link.replace_all(&text, "]\\($1");
    out.push_str(&definition.replace_all(&text, "$1\\[$2"));
}

/// Where the run of exactly `n` backticks that closes a span ends in `text`, if any.
fn closing_run(text: &str, n: usize) -> Option<usize> {
    let mut i = 0;
    while let Some(at) = text[i..].find('`') {
        let start = i + at;
        let run = text[start..].len() - text[start..].trim_start_matches('`').len();
        if run == n {
            return Some(start + run);
        }
        i = start + run;
    }
    None
}

/// `md` with its HTML made text (see the module's comment).
pub fn inert_html(md: &str) -> String {
    let mut out = String::with_capacity(md.len() + md.len() / 16);
    let mut fence: Option<Fence> = None;
    // A backtick run left open earlier in this paragraph: spans are not trusted until it ends.
    let mut unsure = false;
    for (n, line) in md.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        if let Some(f) = fence.take() {
            if !closes(&f, line) {
                fence = Some(f);
                out.push_str(line);
                continue;
            }
            if prefix(line).3.starts_with(f.ch) {
                out.push_str(line);
                continue;
            }
        }
        if let Some(f) = opens(line) {
            fence = Some(f);
            unsure = false;
            out.push_str(line);
            continue;
        }
        if line.trim().is_empty() {
            unsure = false;
        }
        let spans = !unsure && !line.contains('|');
        unsure |= escape_line(line, spans, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::inert_html;

    #[test]
    fn html_outside_code_becomes_text() {
        assert_eq!(
            inert_html("Hi <script>alert(1)</script> & <img src=x onerror=alert(1)>"),
            "Hi &lt;script>alert(1)&lt;/script> & &lt;img src=x onerror=alert(1)>"
        );
        assert_eq!(
            inert_html("> <b>quoted</b>\n- <i>x</i>"),
            "> &lt;b>quoted&lt;/b>\n- &lt;i>x&lt;/i>"
        );
        // Links that would run something stay text; others stay links.
        assert_eq!(
            inert_html("[a](javascript:x()) [b]( <JavaScript:y>) [c](https://e.org)"),
            "[a]\\(javascript:x()) [b]\\( &lt;JavaScript:y>) [c](https://e.org)"
        );
        assert_eq!(inert_html("[x]: data:text/html,1"), "\\[x]: data:text/html,1");
    }

    #[test]
    fn code_keeps_its_angle_brackets() {
        let kept = [
            "```rust\nlet v: Vec<u8> = x;\n```",
            "~~~\n<div>\n~~~",
            "> ```html\n> <p>in a quote</p>\n> ```",
            "Use `Vec<T>` or ``Option<`T`>``.",
            "```<img>``` is a span, not a fence",
        ];
        for text in kept {
            assert_eq!(inert_html(text), text);
        }
    }

    #[test]
    fn what_may_not_be_code_is_escaped() {
        let cases = [
            // Not fences: indented four spaces, or a span on one line.
            ("    ```\n<img>", "    ```\n&lt;img>"),
            // An escaped backtick opens no span.
            ("\\`<img>`", "\\`&lt;img>`"),
            // A span that may cross lines: nothing after it in the paragraph is trusted.
            ("a `start\nend` <img> `x`", "a `start\nend` &lt;img> `x`"),
            // A table's pipes split spans.
            ("| `a | <img> | b` |", "| `a | &lt;img> | b` |"),
            // A fence in a quote ends with the quote, one in a list item with the item.
            ("> ```\n> x\n<script>", "> ```\n> x\n&lt;script>"),
            ("- item\n  ```\n<script>", "- item\n  ```\n&lt;script>"),
            // An unclosed fence holds the rest (a renderer shows it as code).
            ("```\n<b>", "```\n<b>"),
        ];
        for (text, expected) in cases {
            assert_eq!(inert_html(text), expected, "{text}");
        }
    }
}
