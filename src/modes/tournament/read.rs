//! Reading a judge's reply: the judgement's reply schema and the verdict (which response won)
//! read from its JSON or its text.

use super::*;

/// The name of the judgement's reply schema (the sim answers it by this name).
pub const JUDGEMENT_SCHEMA: &str = "tournament_judgement";

/// The judge's reply as JSON: its reasoning, then the side it picks (only the two labels).
pub fn judgement_schema() -> Arc<ReplySchema> {
    ReplySchema::new(
        JUDGEMENT_SCHEMA,
        schema::reasoned([(
            "winner",
            schema::described(
                schema::one_of(&[Side::A.label(), Side::B.label()]),
                "the better of the two responses",
            ),
        )]),
    )
}

/// A side of a match as the judge sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::A => "Response A",
            Side::B => "Response B",
        }
    }
}

/// A judge's reply as read: the side it states (None: unparseable) and its reasoning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub winner: Option<Side>,
    pub reasoning: String,
}

/// A line without leading white space, bullets, `#`, `**`, `__` (and `>` quotes).
fn bare(line: &str) -> &str {
    let mut s = line.trim();
    loop {
        let t = s.trim_start_matches(['-', '*', '+', '•', '#', '>', '_']).trim_start();
        if t.len() == s.len() {
            return s;
        }
        s = t;
    }
}

fn strip_ci_prefix<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

/// The side a `WINNER:` value names: `Response A`, `Response B`, bare `A` or `B`, with
/// markup around it and trailing punctuation allowed; anything else names none.
fn side_of_value(value: &str) -> Option<Side> {
    let re = regex!(r#"(?i)^[\s*_`"'\[(]*(?:response\s+)?([ab])[\s*_`"'\])]*[.!,;:]*[\s*_`"']*$"#);
    let c = re.captures(value.trim())?;
    Some(if c[1].eq_ignore_ascii_case("a") { Side::A } else { Side::B })
}

/// Words that make a closing paragraph's mention of a side something other than a choice.
fn hedged(text: &str) -> bool {
    regex!(r"(?i)\b(?:not|no|neither|nor|cannot|tie|tied|equal|equally|unsure|unclear|if|whether|would|could|might)\b|n['’]t\b")
    .is_match(text)
}

/// Reads a judge's reply (see the spec's "Parsing"; reasoning traces set aside).
pub fn parse_verdict(reply: &str) -> Verdict {
    let text = answer_text(reply);
    let text = text.trim();
    let lines: Vec<&str> = text.lines().collect();
    let winner_line = lines.iter().rposition(|l| {
        strip_ci_prefix(bare(l).trim_start_matches(['*', '_']), "WINNER")
            .is_some_and(|r| r.trim_start_matches(['*', '_', ' ']).starts_with(':'))
    });
    let winner = match winner_line {
        Some(i) => {
            let l = bare(lines[i]).trim_start_matches(['*', '_']);
            let rest = &l["WINNER".len()..];
            let rest = rest.trim_start_matches(['*', '_', ' ']);
            side_of_value(&rest[1..])
        }
        None => {
            let last = text.rsplit("\n\n").next().unwrap_or("").trim();
            last_paragraph_side(last)
        }
    };
    let upto = winner_line.map_or(lines.len(), |i| i);
    let before = lines[..upto].join("\n");
    let reasoning = match find_last_ci(&before, "REASONING:") {
        Some(at) => {
            before[at + "REASONING:".len()..].trim().trim_matches(['*', '_']).trim().to_string()
        }
        None => {
            let mut rest: Vec<&str> = lines[..upto].to_vec();
            if let Some(i) = winner_line {
                rest.extend(&lines[i + 1..]);
            }
            rest.join("\n").trim().to_string()
        }
    };
    Verdict { winner, reasoning }
}

/// Reads a judge's reply: from its JSON when it fits `schema` (the side it picks, its
/// reasoning), else by its text ([`parse_verdict`]). Says where the side was read from; None
/// when no side was read.
pub fn read_verdict_reply(reply: &str, schema: &ReplySchema) -> (Verdict, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let winner = match v.get("winner")?.as_str()? {
            w if w == Side::A.label() => Side::A,
            w if w == Side::B.label() => Side::B,
            _ => return None,
        };
        let reasoning = v.get(schema::REASONING)?.as_str()?.trim().to_string();
        Some(Verdict { winner: Some(winner), reasoning })
    };
    schema.read_reply(reply, from_json, parse_verdict, |v| v.winner.is_some())
}

fn find_last_ci(hay: &str, needle: &str) -> Option<usize> {
    let lower = hay.to_ascii_lowercase();
    lower.rfind(&needle.to_ascii_lowercase())
}

/// The sides a closing paragraph says are preferred, each in a phrase that ties the choice to
/// the side: `Response A is better`, `Response B is the clear winner`, `Response A wins`,
/// `I prefer Response B`, `I would pick Response A`. A side only described ("Response B is a
/// good way to…", "Response B shows the best practices") or praised less than an unnamed one
/// ("Response A is good, but the other one is better") is not chosen.
fn preferred_sides(p: &str) -> Vec<Side> {
    let re = regex!(
        r"(?i)\bresponse\s+([ab])\b[*_]*\s+(?:(?:is|was|seems|looks|appears|remains)\s+(?:(?:the|a|clearly|much|slightly|far|overall|somewhat|definitely)\s+){0,3}(?:clear\s+|overall\s+)?(?:winner|better|stronger|best|superior|preferable|preferred|more\s+(?:accurate|complete|helpful|useful|practical|thorough)|the\s+one\s+i\s+(?:prefer|choose|pick))\b|(?:wins|outperforms|edges\s+out|comes\s+out\s+ahead)\b)|\b(?:prefer|choose|chose|pick|picked|select|selected|favou?r|go\s+with|recommend)\s+(?:\w+\s+)?response\s+([ab])\b"
    );
    re.captures_iter(p)
        .filter_map(|c| c.get(1).or(c.get(2)))
        .map(|m| if m.as_str().eq_ignore_ascii_case("a") { Side::A } else { Side::B })
        .collect()
}

/// A closing paragraph that names exactly one of `Response A`/`Response B` and says, of that
/// side, that it is preferred (see [`preferred_sides`]), without hedging. Naming a side is not
/// choosing it: a reply that describes Response B last (or was cut off while doing so) states
/// no winner.
fn last_paragraph_side(p: &str) -> Option<Side> {
    let re = regex!(r"(?i)\bresponse\s+([ab])\b");
    let mut found = None;
    for c in re.captures_iter(p) {
        let s = if c[1].eq_ignore_ascii_case("a") { Side::A } else { Side::B };
        match found {
            None => found = Some(s),
            Some(f) if f == s => {}
            Some(_) => return None,
        }
    }
    let side = found?;
    if hedged(p) || !preferred_sides(p).contains(&side) {
        return None;
    }
    Some(side)
}
