//! Reading a qualitative answer (matched against the options, or free-form) and the
//! facilitator's classification from text.

use super::*;

use crate::modes::reading;

/// Text compared with an option: lower case, markup and quotes gone, spaces collapsed.
fn norm(s: &str) -> String {
    let s: String =
        s.chars().filter(|c| !"*_`\"“”‘’".contains(*c)).collect::<String>().to_lowercase();
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.trim_end_matches(['.', '!', ',', ';', ':']).trim().to_string()
}

fn ends_word(s: &str, at: usize) -> bool {
    !s[at..].starts_with(|c: char| c.is_alphanumeric())
}

/// The longest option `s` starts with.
fn leading_option(s: &str, opts: &[String]) -> Option<usize> {
    opts.iter()
        .enumerate()
        .filter(|(_, o)| !o.is_empty() && s.starts_with(o.as_str()) && ends_word(s, o.len()))
        .max_by_key(|(_, o)| o.len())
        .map(|(i, _)| i)
}

fn option_number_re() -> &'static Regex {
    regex!(
        r"^(?:(?:option|opción|opcion|opção|opcao|opzione|choice|number|no\.?|n°|nº)\s*)?[#(]?\s*(\d{1,2})\b"
    )
}

/// `or 2`, `/ Polyrepo`, `and option 3`: a second choice named right after the first.
fn alternative_re() -> &'static Regex {
    regex!(r"^\s*\)?\s*(?:or|and|/|,|&|vs\.?|versus|-|–|to)\s*(.*)$")
}

fn negation_re() -> &'static Regex {
    regex!(
        r"(?i)\b(?:not|no|never|neither|nor|against|except|instead|rather|without|avoid|don't|do\s+not|none|both)\b"
    )
}

/// Says no option: `none`, `N/A`, `unknown`, `both`, `neither`, or declines.
fn names_nothing(v: &str) -> bool {
    let r = regex!(
        r"(?i)^(?:n/a|none|unknown|unsure|undecided|both|neither|all|no\s+answer|not\s+sure|it\s+is\s+unclear)\b"
    );
    r.is_match(v) || reading::declines(v)
}

/// Whether `rest` names an option other than `i` (by text or number) first.
fn names_other(rest: &str, opts: &[String], i: usize) -> bool {
    let rest = rest.trim_start_matches(|c: char| " .):-–(#".contains(c));
    if let Some(j) = leading_option(rest, opts) {
        return j != i;
    }
    option_number_re()
        .captures(rest)
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse::<usize>().ok())
        .is_some_and(|n| (1..=opts.len()).contains(&n) && n - 1 != i)
}

/// Matches a stated answer to the options: exact text; the text of one option followed by
/// more words; an option's number (`2`, `Option 2`, `#2`); the start of one option's text
/// (`Hybrid`); and, when `loose`, the one option sharing the most words with it. An answer
/// naming two options (`1 or 2`, `Monorepo or Polyrepo`, `1. Polyrepo` when option 1 is
/// Monorepo), declining, or naming none is no answer.
fn match_option(value: &str, options: &[String], loose: bool) -> Option<String> {
    if placeholder(value) {
        return None;
    }
    let v = norm(clean(value));
    if v.is_empty() || names_nothing(&v) {
        return None;
    }
    let opts: Vec<String> = options.iter().map(|o| norm(o)).collect();
    if let Some(i) = opts.iter().position(|o| *o == v) {
        return Some(options[i].clone());
    }
    if let Some(i) = leading_option(&v, &opts) {
        let rest = &v[opts[i].len()..];
        if let Some(alt) = alternative_re().captures(rest).and_then(|c| c.get(1)) {
            if names_other(alt.as_str(), &opts, i) {
                return None;
            }
        }
        return Some(options[i].clone());
    }
    if let Some(c) = option_number_re().captures(&v) {
        let n: usize = c.get(1).and_then(|m| m.as_str().parse().ok()).unwrap_or(0);
        if (1..=opts.len()).contains(&n) {
            let rest = &v[c.get(0).map_or(0, |m| m.end())..];
            if let Some(alt) = alternative_re().captures(rest).and_then(|c| c.get(1)) {
                if names_other(alt.as_str(), &opts, n - 1)
                    || alt.as_str().starts_with(|c: char| c.is_ascii_digit())
                {
                    return None;
                }
            }
            if names_other(rest, &opts, n - 1) {
                return None;
            }
            return Some(options[n - 1].clone());
        }
    }
    let starts: Vec<usize> = (0..opts.len())
        .filter(|&i| {
            v.chars().count() >= 3 && opts[i].starts_with(&v) && ends_word(&opts[i], v.len())
        })
        .collect();
    if let [i] = starts[..] {
        return Some(options[i].clone());
    }
    if !loose || negation_re().is_match(&v) {
        return None;
    }
    const STOP: [&str; 12] = [
        "the", "and", "for", "with", "approach", "option", "answer", "use", "using", "that",
        "this", "are",
    ];
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() > 2 && !STOP.contains(w))
            .map(str::to_string)
            .collect()
    };
    let said = words(&v);
    let mut scored: Vec<(usize, usize)> = opts
        .iter()
        .enumerate()
        .map(|(i, o)| (words(o).iter().filter(|w| said.contains(w)).count(), i))
        .collect();
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    match scored[..] {
        [(best, i), (second, _), ..] if best > 0 && best > second => Some(options[i].clone()),
        [(best, i)] if best > 0 => Some(options[i].clone()),
        _ => None,
    }
}

/// Sentences that state a choice, ending right before it.
fn stated_choice_re() -> &'static Regex {
    regex!(
        r"(?imx)
        (?:^|[.!?]\s)\s*(?:(?:so|thus|therefore|hence|overall|finally|in\s+conclusion|in\s+short|in\s+summary)\s*,?\s+)?
            (?:the|my)\s+(?:(?:final|best)\s+)?(?:answer|choice|recommendation)\s+(?:is|would\s+be|will\s+be)\b\s*:?
        | \bI(?:\s+would|\s+will|'d|’d|'ll|’ll)?\s+(?:choose|pick|select|recommend|go\s+with|vote\s+for|opt\s+for)\b\s*:?"
    )
}

/// An answer without options: what the `ANSWER:` line says, unless it declines or is empty.
pub(super) fn free_answer(value: &str) -> Option<String> {
    if placeholder(value) {
        return None;
    }
    let v = clean(value).trim_end_matches('.').trim();
    // Punctuation alone (",", "-", "...") names nothing either.
    if !v.chars().any(char::is_alphanumeric) || names_nothing(v) {
        return None;
    }
    Some(v.chars().take(120).collect())
}

/// Reads a qualitative answer (see the rules above) and matches it to the options. Without
/// options, a labelled answer (or JSON field) is the answer as written.
pub fn parse_answer(text: &str, options: &[String]) -> Option<String> {
    let answer = answer_part(text)?;
    let l = labels();
    let json = || -> Option<String> {
        match reading::json_field(&answer, ANSWER_KEYS)? {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let (value, loose) = if let Some(h) = stated(&answer, &l.answer) {
        (h.value, true)
    } else if let Some(v) = json() {
        (v, true)
    } else if let Some(h) = stated(&answer, &l.choice) {
        (h.value, true)
    } else if options.is_empty() {
        return None;
    } else {
        (stated_sentence(&answer, stated_choice_re())?.to_string(), false)
    };
    if options.is_empty() {
        free_answer(&value)
    } else {
        match_option(&value, options, loose)
    }
}

fn kind_of(value: &str) -> Option<QuestionType> {
    if value.contains('|') {
        return None;
    }
    let first =
        clean(value).split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty())?.to_lowercase();
    match first.as_str() {
        "numeric" | "numerical" | "quantitative" | "number" | "numérique" | "numerique"
        | "numérico" | "numerico" | "numérica" | "numerica" | "numerisch" => {
            Some(QuestionType::Numeric)
        }
        "qualitative" | "qualitatif" | "cualitativo" | "cualitativa" | "qualitativ"
        | "qualitativo" | "qualitativa" => Some(QuestionType::Qualitative),
        _ => None,
    }
}

fn stated_kind_re() -> &'static Regex {
    regex!(
        r"(?i)\bthis\s+(?:question\s+)?is\s+(?:a|an)\s+(numeric|numerical|quantitative|qualitative)\s+question\b"
    )
}

/// Splits `Go, Rust, "Hybrid (core, services)"` at commas and semicolons outside brackets.
fn split_options(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in value.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if (c == ',' || c == ';') && depth <= 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

fn list_item_re() -> &'static Regex {
    regex!(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+(.+)$")
}

/// The options under `OPTIONS:`: on its line, comma-separated, or as a list below it.
fn parse_options(answer: &str) -> Option<Vec<String>> {
    let fam = &labels().options;
    let lines: Vec<&str> = answer.lines().collect();
    let mut raw: Vec<String> = Vec::new();
    if let Some(h) = stated(answer, fam) {
        let on_line = if h.col > 0 { cut(&lines[h.line][h.col..]) } else { h.value.as_str() };
        if clean(on_line).is_empty() && h.col > 0 {
            for line in lines[h.line + 1..].iter().skip_while(|l| l.trim().is_empty()) {
                match list_item_re().captures(line).and_then(|c| c.get(1)) {
                    Some(item) => raw.push(item.as_str().to_string()),
                    None => break,
                }
            }
        } else {
            let v = clean(on_line);
            raw = split_options(v);
        }
    } else if let Some(Value::Array(items)) = reading::json_field(answer, &["options"]) {
        raw = items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect();
    }
    tidy_options(raw)
}

/// Options as stated, tidied: markup and list marks gone, empty and `N/A` ones and repeats
/// (ignoring case) left out, at most 10; None when fewer than two are left (answers are then
/// free-form).
pub(super) fn tidy_options(raw: Vec<String>) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for o in raw {
        let o = clean(&o);
        let o = list_item_re().captures(o).and_then(|c| c.get(1)).map_or(o, |m| m.as_str());
        let o = clean(o).trim_end_matches('.').trim();
        if o.is_empty()
            || placeholder(o)
            || o.eq_ignore_ascii_case("n/a")
            || o.eq_ignore_ascii_case("none")
        {
            continue;
        }
        if !out.iter().any(|x| x.eq_ignore_ascii_case(o)) {
            out.push(o.to_string());
        }
    }
    out.truncate(10);
    (out.len() >= 2).then_some(out)
}

/// The facilitator's classification; None when it cannot be read. Qualitative options come
/// from `OPTIONS:` (fewer than two: free-form answers).
pub fn parse_classification(text: &str) -> Option<Classification> {
    let answer = answer_part(text)?;
    let l = labels();
    let kind = if let Some(h) = stated(&answer, &l.kind) {
        kind_of(&h.value)?
    } else if let Some(v) = reading::json_field(&answer, &["type", "question_type", "questionType"])
    {
        kind_of(v.as_str()?)?
    } else {
        // `This question is a NUMERIC question`, said the same way every time.
        let mut kinds = stated_kind_re()
            .captures_iter(&answer)
            .filter_map(|c| c.get(1).and_then(|m| kind_of(m.as_str())));
        let first = kinds.next()?;
        if kinds.any(|k| k != first) {
            return None;
        }
        first
    };
    let options = match kind {
        QuestionType::Numeric => None,
        QuestionType::Qualitative => parse_options(&answer),
    };
    Some(Classification {
        kind,
        options,
        reasoning: parse_reasoning(&answer).lines().next().unwrap_or("").trim().to_string(),
        fallback_from: None,
        unparsed: None,
        read_from: None,
    })
}
