//! The ways of stating a ranking without a header: a Markdown table, a line of labels
//! joined by `>`/`=`, a numbered list closing the reply, and a ranking said in prose.

use super::*;

/// A Markdown table with a rank column (`Rank`, `Place`, `Position`, `#`) and the responses,
/// in either order, bold or not: `| Rank | Response |` or `| Response | Rank |` rows. The
/// responses are read from the column headed `Response` (or `Label`, `Model`…) when there is
/// one, where a bare letter (`C`) is a label too; else from the one label the other cells of a
/// row hold. A cell naming two labels tied (`Response B = Response C`) gives them one place;
/// a label in two rows makes the table contradictory.
pub(super) fn from_table(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let lines: Vec<&str> = answer.lines().map(str::trim).collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.replace(['*', '_'], "").trim().to_string())
            .collect()
    };
    let is_rank = |c: &str| {
        let c = c.to_lowercase();
        c.contains("rank") || c.contains("place") || c.contains("position") || c == "#"
    };
    let Some(head) =
        lines.iter().rposition(|l| l.starts_with('|') && cells(l).iter().any(|c| is_rank(c)))
    else {
        return Ok(None);
    };
    let header = cells(lines[head]);
    let Some(rank_col) = header.iter().position(|c| is_rank(c)) else { return Ok(None) };
    let label_col = header.iter().enumerate().position(|(i, c)| {
        let c = c.to_lowercase();
        i != rank_col
            && ["response", "label", "answer", "model", "candidate", "réponse", "respuesta"]
                .iter()
                .any(|w| c.contains(w))
    });
    let mut entries: Vec<(f64, String)> = Vec::new();
    for l in lines[head + 1..].iter().take_while(|l| l.starts_with('|')) {
        let row = cells(l);
        let Some(rank) = row.get(rank_col).and_then(|c| ordinal(c)) else { continue };
        let found: Vec<String> = match label_col.and_then(|i| row.get(i)) {
            Some(cell) => match label_in(cell, labels) {
                Some(one) => vec![one],
                // The cell opens with its label (and those tied to it); what follows may
                // mention others (`Response B (close to Response A)`).
                None => match mentions(cell, labels).first() {
                    Some(m) if cell[..m.start].trim().is_empty() => place_of(cell, labels),
                    _ => Vec::new(),
                },
            },
            None => {
                let found: Vec<String> = row
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != rank_col)
                    .flat_map(|(_, c)| mentions(c, labels).into_iter().filter_map(|m| m.label))
                    .collect();
                if found.len() == 1 {
                    found
                } else {
                    Vec::new()
                }
            }
        };
        entries.extend(found.into_iter().map(|l| (rank, l)));
    }
    ranked_places(entries)
}

/// The last line that is nothing but two or more labels joined by `>` or `=`.
pub(super) fn from_chain_line(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let line = answer.lines().rev().find(|line| {
        let ms = mentions(line, labels);
        if ms.len() < 2 || ms.iter().any(|m| m.label.is_none()) {
            return false;
        }
        let blank = |s: &str| s.chars().all(|c| c.is_whitespace() || "*_`.:-".contains(c));
        if !blank(&line[..ms[0].start]) || !blank(&line[ms[ms.len() - 1].end..]) {
            return false;
        }
        ms.windows(2).all(|w| {
            let between = line[w[0].end..w[1].start]
                .trim_matches(|c: char| c.is_whitespace() || c == '*' || c == '_');
            matches!(between, ">" | ">>" | "≥" | ">=" | "=" | "==" | "»" | "→" | "->")
        })
    });
    let Some(line) = line else { return Ok(None) };
    // A chain that names a label twice (`A > B > A`) contradicts itself.
    each_once(mentions(line, labels).into_iter().filter_map(|m| m.label))?;
    Ok(Some(from_chain(line, labels)))
}

/// A list that states a label twice (`1. B`, `2. A`, `3. B`) contradicts itself: it is
/// `inconsistent`, never read as the order of the labels' first places.
pub(super) fn each_once(stated: impl IntoIterator<Item = String>) -> Result<(), Unparsed> {
    let mut seen = std::collections::HashSet::new();
    for l in stated {
        if !seen.insert(l) {
            return Err(Unparsed::Inconsistent);
        }
    }
    Ok(())
}

/// A numbered list of bare labels that closes the reply (the prompt's format without its
/// header): each item only a label (markup and a trailing full stop allowed).
pub(super) fn from_closing_list(
    answer: &str,
    labels: &[String],
) -> Result<Option<Places>, Unparsed> {
    let lines: Vec<&str> =
        answer.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>();
    let bare = |line: &str| -> Option<(u32, String)> {
        let c = item_re().captures(line)?;
        let whole = c.get(0)?;
        if whole.start() > 0 && !line[..whole.start()].trim().is_empty() {
            return None;
        }
        let n: u32 = c.get(1)?.as_str().parse().ok()?;
        let rest = &line[whole.end()..];
        let ms = mentions(rest, labels);
        let [m] = ms.as_slice() else { return None };
        let outside = format!("{}{}", &rest[..m.start], &rest[m.end..]);
        outside
            .trim_matches(|c: char| c.is_whitespace() || "*_`.".contains(c))
            .is_empty()
            .then(|| m.label.clone())
            .flatten()
            .map(|l| (n, l))
    };
    let tail: Vec<(u32, String)> = lines.iter().rev().map_while(|l| bare(l)).collect();
    if tail.len() < 2 {
        return Ok(None);
    }
    each_once(tail.iter().map(|(_, l)| l.clone()))?;
    let mut places = Places::default();
    let mut last = None;
    for (n, l) in tail.into_iter().rev() {
        if last == Some(n) {
            places.join_last(vec![l]);
        } else {
            places.push(vec![l]);
        }
        last = Some(n);
    }
    Ok(Some(places))
}

/// A ranking introduced in prose: `my ranking from best to worst is:`, `Final answer:`,
/// `from best to worst:`, `I would rank them as follows:`, `ranking (worst to best):`.
pub(super) fn intro_re() -> &'static Regex {
    regex!({
        let dir = r"\(?\s*(?:from\s+)?(?:best|worst|highest|lowest|strongest|weakest)\s+to\s+(?:worst|best|lowest|highest|weakest|strongest)\s*\)?";
        format!(
            r"(?i)(?:\b(?:(?:(?:my|the|our)\s+)?(?:(?:final|overall)\s+)?(?:ranking|answer)|(?:my|final)\s+order(?:ing)?)(?:\s+of\s+the\s+responses)?(?:\s*,?\s*{dir})?|\bI\s+(?:would\s+)?rank\s+them(?:\s+as\s+follows)?(?:\s*,?\s*{dir})?|\b{dir})(?:\s+(?:is|would\s+be)\s*:?|\s*[:=])"
        )
    })
}

/// A label in prose: `Response C`, or the bare letter in capitals (`C`) of one of the run's
/// labels (`(?-i)` : a lower-case `a` is a word).
pub(super) fn prose_label_re() -> &'static Regex {
    regex!(
        r"(?i:\b(?:response|r[ée]ponse|respuesta|resposta|risposta|antwort)[\s*_]+([a-z]{1,3})\b)|\b([A-Z]{1,3})\b"
    )
}

/// The place a position word names (`first` 1, `second` 2, `last` n), if it is one.
pub(super) fn position_word(w: &str, n: usize) -> Option<usize> {
    match w {
        "first" | "best" | "top" => Some(1),
        "second" => Some(2),
        "third" => Some(3),
        "fourth" => Some(4),
        "fifth" => Some(5),
        "sixth" => Some(6),
        "last" | "lastly" | "worst" | "bottom" | "finally" => Some(n),
        _ => None,
    }
}

/// A chain of labels stated in prose after [`intro_re`], on the rest of its line (or the next
/// line when the intro ends its own): `C > A > B`, `A first, then C, and B last`,
/// `Response C, then Response F, then Response E…`, `A = C > B`. Read only when it names every
/// label of the run once, with nothing but ordering words around them, and every position
/// word it uses (`first`, `second`, `last`) stands beside the label in that place, so
/// `B last, A first, then C` is not read as B, A, C. Stated worst to best, it is read
/// reversed; `<` orders nothing. A label named twice makes it contradictory.
pub(super) fn from_prose(answer: &str, labels: &[String]) -> Result<Option<Places>, Unparsed> {
    let Some(intro) = intro_re().find_iter(answer).last() else { return Ok(None) };
    let rest = answer[intro.end()..].trim_start_matches([' ', '\t']);
    let rest = rest.strip_prefix('\n').map_or(rest, |r| r.trim_start());
    let line = rest.split('\n').next().unwrap_or("");
    let direction = regex!(
        r"(?i)\b(best|worst|highest|lowest|strongest|weakest)\s+to\s+(?:worst|best|lowest|highest|weakest|strongest)\b"
    );
    let worst_first = |d: &str| matches!(d.to_lowercase().as_str(), "worst" | "lowest" | "weakest");
    let stated_dir = direction.captures(intro.as_str()).map(|c| worst_first(&c[1]));
    let mut reversed = stated_dir == Some(true);
    // A direction said after the chain: `C > A > B (best to worst)`.
    let trailing = regex!(
        r"(?i)\(?\s*(?:from\s+)?(best|worst|highest|lowest)\s+to\s+(?:worst|best|lowest|highest)\s*\)?"
    );
    let mut chain = line.to_string();
    if let Some(c) = trailing.captures(line) {
        let after = worst_first(&c[1]);
        if stated_dir.is_some_and(|d| d != after) {
            return Ok(None);
        }
        reversed = after;
        chain = format!(
            "{} {}",
            &line[..c.get(0).map_or(0, |m| m.start())],
            &line[c.get(0).map_or(0, |m| m.end())..]
        );
    }
    // `<` orders nothing, and `>` said worst to best could mean either way.
    if chain.contains('<') || (reversed && chain.contains('>')) {
        return Ok(None);
    }
    // The labels, and the gaps between them (gap i stands before label i; the last, after all).
    let mut found: Vec<String> = Vec::new();
    let mut gaps: Vec<&str> = Vec::new();
    let mut at = 0;
    for c in prose_label_re().captures_iter(&chain) {
        let (Some(whole), Some(letters)) = (c.get(0), c.get(1).or(c.get(2))) else { continue };
        let l = format!("Response {}", letters.as_str().to_uppercase());
        if !labels.contains(&l) {
            // A capital that is no label (`I`, `OK`) is a word, and words are checked below.
            if c.get(2).is_some() {
                continue;
            }
            return Ok(None);
        }
        gaps.push(&chain[at..whole.start()]);
        found.push(l);
        at = whole.end();
    }
    gaps.push(&chain[at..]);
    if found.len() < 2 {
        return Ok(None);
    }
    let n = found.len();
    for (g, gap) in gaps.iter().enumerate() {
        for w in gap.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            let w = w.to_lowercase();
            if !CHAIN_WORDS.contains(&w.as_str()) && !["with", "as"].contains(&w.as_str()) {
                return Ok(None);
            }
            if let Some(k) = position_word(&w, n) {
                // Beside the label in place k: just before it (gap k - 1) or after it (gap k).
                if reversed || !(g + 1 == k || g == k) {
                    return Ok(None);
                }
            }
        }
    }
    // `A and B and C` lists them, and `C > A and B` leaves A and B unordered.
    let between = &gaps[1..n];
    let joined_only = between.iter().all(|g| tie_joint_re().is_match(g) && !g.contains('='));
    let ordered = |g: &&str| g.contains(['>', '=']) || tie_word_re().is_match(g);
    if joined_only || (between.iter().any(|g| g.contains('>')) && !between.iter().all(ordered)) {
        return Ok(None);
    }
    for (i, l) in found.iter().enumerate() {
        if found[..i].contains(l) {
            return Err(Unparsed::Inconsistent);
        }
    }
    if found.len() != labels.len() {
        return Ok(None);
    }
    // A label joins the place before it when `=` or `tied with` stands between them, or
    // `and` with a tie word right after it (`A and C (tied), then B`).
    let tied_with = regex!(r"(?i)^\W*(?:tied|equal|equally)\s+(?:with|to)\W*$");
    let tie_after = regex!(r"(?i)^\W*(?:tie|tied|equal|equally)\b");
    let mut places = Places::default();
    for (i, l) in found.into_iter().enumerate() {
        let gap = gaps[i];
        let tied = i > 0
            && (gap.contains('=')
                || tied_with.is_match(gap)
                || (tie_joint_re().is_match(gap) && tie_after.is_match(gaps[i + 1])));
        if tied {
            places.join_last(vec![l]);
        } else {
            places.push(vec![l]);
        }
    }
    if reversed {
        places.places.reverse();
    }
    Ok(Some(places))
}
