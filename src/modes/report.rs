//! What the modes' Markdown reports are made of ([`super::registry::ModeSpec::report`]): a
//! table whose cells cannot break it, and the small words a report repeats.

/// A Markdown table: `head` and `rows` of cells (one line each, `|` escaped); `right`: the
/// columns set right (numbers).
pub fn table(head: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut out =
        format!("| {} |\n|", head.iter().map(|h| cell(h)).collect::<Vec<_>>().join(" | "));
    for i in 0..head.len() {
        out.push_str(if right.contains(&i) { "---:|" } else { "---|" });
    }
    out.push('\n');
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

/// A table cell: on one line, `|` escaped, never empty (`—`).
pub fn cell(text: &str) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
    if one.is_empty() {
        "—".into()
    } else {
        one
    }
}

/// A result read back as its mode's result type, for its outcome line and its report: what
/// they are given is the value that type wrote (in an export, with its model names perhaps
/// anonymised). None when it does not read as `T`, which is logged: a result always reads as
/// the type that wrote it, so a miss is a bug.
pub fn typed<T: serde::de::DeserializeOwned>(result: &serde_json::Value) -> Option<T> {
    T::deserialize(result)
        .map_err(|e| {
            if !result.is_null() {
                log::warn!("a result does not read as {}: {e}", std::any::type_name::<T>());
            }
        })
        .ok()
}

/// `1 claim`, `2 claims`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_survives_pipes_and_line_breaks_in_its_cells() {
        let t = table(&["a", "n"], &[vec!["x | y\nz".into(), "".into()]], &[1]);
        assert_eq!(t, "| a | n |\n|---|---:|\n| x \\| y z | — |\n");
    }
}
