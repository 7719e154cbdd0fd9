//! Reading numbers as people and models write them: `42,000,000`, `1 234 567`, `1.234.567`,
//! `3,2 millions`, `3.2 × 10⁶`, `3.2e6`, `$1.2B`, `€3.4 bn`, `34M`, `12.5%`, `−7`, `30-40
//! million`, `between 30 and 40 million, most likely 34 million`.
//!
//! The rules, so that an ambiguous number is read one documented way and a malformed one not
//! at all:
//!
//! - **Grouping.** A `,`, `'` or space (also no-break and thin spaces) followed by exactly three
//!   digits, after a first run of one to three digits not starting with 0, groups thousands:
//!   `1,234` is 1234, `1 234 567` is 1234567. Dots group only when there are two groups or
//!   more (`1.234.567`) or a decimal comma follows (`1.234,5`): a single `1.234` is 1.234.
//! - **Decimals.** Any other single `,` or `.` followed by digits is a decimal point: `3,2` is
//!   3.2, `1,2345` is 1.2345, `0,123` is 0.123; after grouping, the other mark is the decimal
//!   one (`1,234.5`, `1.234.567,89`, `1 234,5`).
//! - **Malformed** runs are no number at all: `1,23,456`, `1.2.3`, `12.05.2023`, `10:30`,
//!   `12/05/2023`, ordinals and decades (`21st`, `1990s`), and digits glued to a word (`A1`,
//!   `H2O`, `COVID-19`).
//! - **Exponents**: `3.2e6`, `3.2 x 10^6`, `3.2 × 10⁶`, `3.2*10**6`, `10^6`, TeX's
//!   `3.2 \times 10^{6}`.
//! - **Scales**: words (`thousand`, `million`, `billion` = 10⁹, `trillion`, `bn`, `mn`, `mln`,
//!   `Mio`, `Mrd`, `Milliarde`, `millones`, `mil millones`, `milhões`, `milioni`, `miliardi`,
//!   `lakh`, `crore`, …, any case, plural or not) and letters: `k` written on the number
//!   (`40k`), `M` and `MM` (`34M`, `34 M`), `B` (`1.2B`), `T` written on the number (`3T`).
//!   Lower-case `m`, `b` and `t` are metres, bits and tonnes unless a currency sign leads
//!   (`$40m`, `€3b`); a spaced `K` is kelvin.
//!   The long-scale words `billón`/`billones` (Spanish) and `Billionen` (German) are 10¹².
//! - **Percent** (`%`, `percent`, `per cent`, `pour cent`, `por ciento`, `Prozent`, …) keeps
//!   the number as written (`12.5%` is 12.5) and says so.
//! - **Currency** signs and codes before the number (`$`, `€`, `£`, `¥`, `₹`, `US$`, `EUR`, …)
//!   are read past; a minus sign may stand before or after them.
//! - Nothing read is ever NaN or infinite: such a number is no number.

/// One number found in a text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number {
    /// The value: sign, exponent and scale applied; a percentage as written.
    pub value: f64,
    /// The scale factor applied (1 without a scale word).
    pub scale: f64,
    /// Written with a percent sign or word.
    pub percent: bool,
    /// A plain whole number from 1000 to 2199 (`2030`): perhaps a year.
    pub year_like: bool,
    /// Byte span in the text.
    pub start: usize,
    pub end: usize,
}

/// What a stated value says: one number, or a range read as its midpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stated {
    pub value: f64,
    /// The range given, when the value is its midpoint (`30-40` → 35).
    pub range: Option<(f64, f64)>,
    pub percent: bool,
    /// The scale written on the value (1 without one): `34M` → 10⁶.
    pub scale: f64,
}

/// How much text may stand before the number in a stated value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    /// Only hedging words (`about`, `~`, `approximately`, `between`, …) and markup: for a value
    /// read from prose (`My estimate is about 40`).
    Strict,
    /// For the rest of a labelled line: hedging words, or a sentence that neither declines nor
    /// hedges (`unknown`, `N/A`, `cannot`, …) and introduces its number with a stating word or
    /// mark (`ESTIMATE: The number will be about 40`, `2030: 45 million`); years are passed
    /// over while another number follows (`ESTIMATE: by 2030, 45 million`).
    Label,
}

const SPACES: [char; 5] = [' ', '\u{a0}', '\u{202f}', '\u{2009}', '\t'];

fn is_space(c: char) -> bool {
    SPACES.contains(&c)
}

fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|r| r.chars().next())
}

fn char_before(s: &str, i: usize) -> Option<char> {
    s.get(..i).and_then(|r| r.chars().next_back())
}

fn digits_end(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    let mut j = i;
    while j < b.len() && b[j].is_ascii_digit() {
        j += 1;
    }
    j
}

fn skip_spaces(s: &str, mut i: usize) -> usize {
    while let Some(c) = char_at(s, i) {
        if !is_space(c) {
            break;
        }
        i += c.len_utf8();
    }
    i
}

/// Currency before a number: its byte length.
fn currency_prefix(s: &str) -> Option<usize> {
    const SIGNS: [&str; 14] =
        ["US$", "R$", "A$", "C$", "USD", "EUR", "GBP", "CHF", "JPY", "$", "€", "£", "¥", "₹"];
    let sign = SIGNS.iter().find(|c| s.starts_with(**c))?;
    let mut n = sign.len();
    let next = char_at(s, n);
    if sign.chars().all(|c| c.is_ascii_uppercase()) && !next.is_some_and(is_space) {
        return None; // `EUR` must be a word of its own
    }
    if next.is_some_and(is_space) {
        n = skip_spaces(s, n);
    }
    Some(n)
}

fn sign_at(s: &str, i: usize) -> Option<(bool, usize)> {
    match char_at(s, i)? {
        '-' | '−' => Some((true, i + char_at(s, i)?.len_utf8())),
        '+' => Some((false, i + 1)),
        _ => None,
    }
}

/// A mantissa at `i`: (`int`, `frac`, end, plain) where plain means digits only. `Err(end)` for a
/// malformed run (skipped whole); `Ok(None)` when no number starts here.
type Mantissa = (String, String, usize, bool);

fn mantissa(s: &str, i: usize) -> Result<Option<Mantissa>, usize> {
    let d0 = digits_end(s, i);
    if d0 == i {
        // `.5`
        if char_at(s, i) == Some('.') {
            let e = digits_end(s, i + 1);
            if e > i + 1 {
                return Ok(Some(("0".into(), s[i + 1..e].into(), e, false)));
            }
        }
        return Ok(None);
    }
    let int0 = &s[i..d0];
    let mut groups: Vec<(char, &str)> = Vec::new();
    let mut k = d0;
    while let Some(c) = char_at(s, k) {
        if !(c == ',' || c == '.' || c == '\'' || is_space(c)) {
            break;
        }
        let after = k + c.len_utf8();
        let e = digits_end(s, after);
        if e == after {
            break;
        }
        let run = &s[after..e];
        if (is_space(c) || c == '\'')
            && (run.len() != 3 || int0.len() > 3 || groups.iter().any(|(g, _)| *g != c))
        {
            break;
        }
        groups.push((c, run));
        k = e;
    }
    if groups.is_empty() {
        return Ok(Some((int0.into(), String::new(), k, true)));
    }
    let g = groups[0].0;
    let may_group = int0.len() <= 3 && !int0.starts_with('0');
    let k3 = if may_group {
        groups.iter().take_while(|(c, r)| *c == g && r.len() == 3).count()
    } else {
        0
    };
    let n = groups.len();
    let joined = |upto: usize| {
        let mut int = int0.to_string();
        for (_, r) in &groups[..upto] {
            int.push_str(r);
        }
        int
    };
    if k3 == n {
        if g == '.' && n == 1 {
            return Ok(Some((int0.into(), groups[0].1.into(), k, false)));
        }
        return Ok(Some((joined(n), String::new(), k, false)));
    }
    if k3 >= 1 && k3 + 1 == n {
        let (dc, frac) = groups[n - 1];
        let fits = match g {
            ',' => dc == '.',
            '.' => dc == ',',
            _ => dc == '.' || dc == ',',
        };
        if fits {
            return Ok(Some((joined(k3), frac.into(), k, false)));
        }
        return Err(k);
    }
    if n == 1 && (g == ',' || g == '.') {
        return Ok(Some((int0.into(), groups[0].1.into(), k, false)));
    }
    Err(k)
}

const SUPERSCRIPTS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];

/// An exponent written as `^6`, `**6`, `^(−6)` or `⁶`, `⁻³` at `i`: (exponent, end).
fn power(s: &str, i: usize) -> Option<(i32, usize)> {
    let mut j = skip_spaces(s, i);
    let c = char_at(s, j)?;
    if c == '⁻' || c == '⁺' || SUPERSCRIPTS.contains(&c) {
        let neg = c == '⁻';
        if c == '⁻' || c == '⁺' {
            j += c.len_utf8();
        }
        let mut e: i32 = 0;
        let start = j;
        while let Some(d) = char_at(s, j).and_then(|c| SUPERSCRIPTS.iter().position(|x| *x == c)) {
            e = e.checked_mul(10)?.checked_add(d as i32)?;
            j += char_at(s, j)?.len_utf8();
        }
        return (j > start).then_some((if neg { -e } else { e }, j));
    }
    if s[j..].starts_with("**") {
        j += 2;
    } else if c == '^' {
        j += 1;
    } else {
        return None;
    }
    j = skip_spaces(s, j);
    // `^(6)`, and TeX's `^{6}`.
    let close = match char_at(s, j) {
        Some('(') => Some(')'),
        Some('{') => Some('}'),
        _ => None,
    };
    if close.is_some() {
        j += 1;
    }
    let (neg, after_sign) = sign_at(s, j).unwrap_or((false, j));
    let e_end = digits_end(s, after_sign);
    if e_end == after_sign || e_end - after_sign > 4 {
        return None;
    }
    let e: i32 = s[after_sign..e_end].parse().ok()?;
    j = e_end;
    if let Some(close) = close {
        if char_at(s, j) != Some(close) {
            return None;
        }
        j += 1;
    }
    Some((if neg { -e } else { e }, j))
}

/// `e6`, `E+06`, ` x 10^6`, ` × 10⁶`, `*10**6` right after a mantissa.
fn exponent(s: &str, i: usize) -> Option<(i32, usize)> {
    if let Some(c @ ('e' | 'E')) = char_at(s, i) {
        let (neg, after) = sign_at(s, i + c.len_utf8()).unwrap_or((false, i + 1));
        let end = digits_end(s, after);
        let letter_follows = char_at(s, end).is_some_and(char::is_alphabetic);
        if end > after && end - after <= 4 && !letter_follows {
            let e: i32 = s[after..end].parse().ok()?;
            return Some((if neg { -e } else { e }, end));
        }
        return None;
    }
    let j = skip_spaces(s, i);
    let times = char_at(s, j)?;
    let after_times =
        if let Some(tex) = ["\\times", "\\cdot"].iter().find(|t| s[j..].starts_with(**t)) {
            j + tex.len()
        } else if matches!(times, 'x' | 'X' | '×' | '*' | '·' | '⋅') {
            j + times.len_utf8()
        } else {
            return None;
        };
    let j = skip_spaces(s, after_times);
    if !s[j..].starts_with("10") || char_at(s, j + 2).is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    power(s, j + 2)
}

/// Scale words, lower case, with their factors.
const SCALE_WORDS: &[(&str, f64)] = &[
    ("hundred", 1e2),
    ("hundreds", 1e2),
    ("thousand", 1e3),
    ("thousands", 1e3),
    ("tsd", 1e3),
    ("tausend", 1e3),
    ("mille", 1e3),
    ("lakh", 1e5),
    ("lakhs", 1e5),
    ("million", 1e6),
    ("millions", 1e6),
    ("mn", 1e6),
    ("mln", 1e6),
    ("mio", 1e6),
    ("millionen", 1e6),
    ("millón", 1e6),
    ("millon", 1e6),
    ("millones", 1e6),
    ("milhão", 1e6),
    ("milhao", 1e6),
    ("milhões", 1e6),
    ("milhoes", 1e6),
    ("milione", 1e6),
    ("milioni", 1e6),
    ("crore", 1e7),
    ("crores", 1e7),
    ("billion", 1e9),
    ("billions", 1e9),
    ("bn", 1e9),
    ("bln", 1e9),
    ("milliard", 1e9),
    ("milliards", 1e9),
    ("milliarde", 1e9),
    ("milliarden", 1e9),
    ("mrd", 1e9),
    ("miliardo", 1e9),
    ("miliardi", 1e9),
    ("bilhão", 1e9),
    ("bilhao", 1e9),
    ("bilhões", 1e9),
    ("bilhoes", 1e9),
    ("trillion", 1e12),
    ("trillions", 1e12),
    ("tn", 1e12),
    ("trn", 1e12),
    ("billón", 1e12),
    ("billones", 1e12),
    ("billionen", 1e12),
];

const PERCENT_WORDS: &[&str] =
    &["percent", "pct", "prozent", "per cent", "pour cent", "por ciento", "per cento", "por cento"];

/// The letters of the word at `i` (alphabetic characters).
fn word_at(s: &str, i: usize) -> &str {
    let end = s[i..].find(|c: char| !c.is_alphabetic()).map_or(s.len(), |n| i + n);
    &s[i..end]
}

/// A scale after a number ending at `i`: (factor, end).
fn scale_after(s: &str, i: usize, currency: bool) -> Option<(f64, usize)> {
    let j = skip_spaces(s, i);
    let attached = j == i;
    if j - i > 2 {
        return None;
    }
    let word = word_at(s, j);
    if word.is_empty() {
        return None;
    }
    let end = j + word.len();
    let factor = match word {
        "k" | "K" if attached => 1e3,
        "M" | "MM" => 1e6,
        "m" if attached && currency => 1e6,
        "B" => 1e9,
        "b" if attached && currency => 1e9,
        "T" if attached || currency => 1e12,
        "t" if attached && currency => 1e12,
        w if w.chars().count() >= 2 => {
            let lower = w.to_lowercase();
            // `mil millones`: a thousand millions.
            if lower == "mil" {
                let k = skip_spaces(s, end);
                let next = word_at(s, k).to_lowercase();
                if k > end && (next == "millones" || next == "millón") {
                    return Some((1e9, k + word_at(s, k).len()));
                }
                return None;
            }
            let (_, f) = SCALE_WORDS.iter().find(|(name, _)| *name == lower)?;
            let end = if ["mio", "mrd", "tsd", "mln", "bln"].contains(&lower.as_str())
                && char_at(s, end) == Some('.')
            {
                end + 1
            } else {
                end
            };
            return Some((*f, end));
        }
        _ => return None,
    };
    Some((factor, end))
}

fn percent_after(s: &str, i: usize) -> Option<usize> {
    let j = skip_spaces(s, i);
    if j - i > 2 {
        return None;
    }
    match char_at(s, j)? {
        '%' | '％' => return Some(j + char_at(s, j)?.len_utf8()),
        _ => {}
    }
    let rest = &s[j..];
    PERCENT_WORDS.iter().find_map(|w| {
        let head = rest.get(..w.len())?;
        let boundary = !char_at(rest, w.len()).is_some_and(char::is_alphabetic);
        (head.eq_ignore_ascii_case(w) && boundary).then_some(j + w.len())
    })
}

/// Reads the number that starts exactly at `i` (sign, currency, digits). `Err(end)` when a
/// malformed run starts there (to be skipped whole), `Ok(None)` when no number does.
fn number_at(s: &str, i: usize) -> Result<Option<Number>, usize> {
    let mut j = i;
    let mut neg = false;
    let signed = sign_at(s, j);
    if let Some((n, after)) = signed {
        neg = n;
        j = after;
    }
    let currency = match currency_prefix(&s[j..]) {
        Some(len) => {
            j += len;
            true
        }
        None => false,
    };
    // `$-5` as well as `-$5`.
    if signed.is_none() && currency {
        if let Some((n, after)) = sign_at(s, j) {
            neg = n;
            j = after;
        }
    }
    let Some((int, frac, mut k, plain)) = mantissa(s, j)? else { return Ok(None) };
    // Times, ratios and dates are no numbers to read.
    if char_at(s, k) == Some(':') && char_at(s, k + 1).is_some_and(|c| c.is_ascii_digit()) {
        return Err(digits_end(s, k + 1));
    }
    if char_at(s, k) == Some('/') && char_at(s, k + 1).is_some_and(|c| c.is_ascii_digit()) {
        let d_end = digits_end(s, k + 1);
        let date = char_at(s, d_end) == Some('/');
        let den: f64 = s[k + 1..d_end].parse().unwrap_or(0.0);
        if !plain || date || den == 0.0 {
            let mut end = d_end;
            while char_at(s, end) == Some('/') {
                end = digits_end(s, end + 1);
            }
            return Err(end);
        }
        let num: f64 = int.parse().map_err(|_| d_end)?;
        let v = if neg { -num / den } else { num / den };
        return Ok(v.is_finite().then_some(Number {
            value: v,
            scale: 1.0,
            percent: false,
            year_like: false,
            start: i,
            end: d_end,
        }));
    }
    let mut exp = 0i32;
    // `10^6`, `10⁶`: a power of ten alone.
    if int == "10" && plain {
        if let Some((e, end)) = power(s, k).filter(|_| !char_at(s, k).is_some_and(is_space)) {
            exp = e - 1;
            k = end;
        }
    }
    if exp == 0 {
        if let Some((e, end)) = exponent(s, k) {
            exp = e;
            k = end;
        }
    }
    let mut scale = 1.0;
    if let Some((f, end)) = scale_after(s, k, currency) {
        scale = f;
        k = end;
    }
    let mut percent = false;
    if let Some(end) = percent_after(s, k) {
        percent = true;
        k = end;
    }
    if scale == 1.0 && !percent {
        // Ordinals and decades: `21st`, `1990s`.
        let w = word_at(s, k).to_lowercase();
        if ["st", "nd", "rd", "th", "s"].contains(&w.as_str()) {
            return Err(k + w.len());
        }
    }
    let literal = format!("{int}.{}e{exp}", if frac.is_empty() { "0" } else { &frac });
    let Ok(mut v) = literal.parse::<f64>() else { return Err(k) };
    v = scale_by(v, scale);
    if neg {
        v = -v;
    }
    if !v.is_finite() {
        return Err(k);
    }
    let year_like = plain
        && exp == 0
        && scale == 1.0
        && !percent
        && !neg
        && !currency
        && int.len() == 4
        && (1000.0..=2199.0).contains(&v);
    Ok(Some(Number { value: v, scale, percent, year_like, start: i, end: k }))
}

/// May a number start at `i`? Not inside a word (`A1`, `H2O`), not after a hyphen that joins
/// it to a word (`COVID-19`), not as the tail of another number (`1.2.3`, `10:30`).
fn may_start(s: &str, i: usize) -> bool {
    let Some(c) = char_at(s, i) else { return false };
    let starts = c.is_ascii_digit()
        || (c == '.' && char_at(s, i + 1).is_some_and(|d| d.is_ascii_digit()))
        || matches!(c, '-' | '−' | '+')
        || currency_prefix(&s[i..]).is_some();
    if !starts {
        return false;
    }
    match char_before(s, i) {
        None => true,
        Some(p) if p.is_alphanumeric() || p == '_' => false,
        Some(p @ ('-' | '.' | ',' | ':' | '/' | '\'')) => {
            let before = char_before(s, i - p.len_utf8());
            // `COVID-19`, `1.2.3`: glued to what stands before.
            !before.is_some_and(|b| b.is_alphanumeric())
        }
        Some(_) => true,
    }
}

/// Every number in a text, in order (malformed runs left out).
pub fn find_numbers(text: &str) -> Vec<Number> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if may_start(text, i) {
            match number_at(text, i) {
                Ok(Some(n)) => {
                    out.push(n);
                    i = n.end;
                    continue;
                }
                Err(end) if end > i => {
                    i = end;
                    continue;
                }
                _ => {}
            }
        }
        i += char_at(text, i).map_or(1, char::len_utf8);
    }
    out
}

/// Words that may stand before a value read from prose.
const HEDGES_ALLOWED: &[&str] = &[
    "a",
    "about",
    "almost",
    "an",
    "approx",
    "approximately",
    "around",
    "at",
    "be",
    "between",
    "c",
    "ca",
    "circa",
    "close",
    "estimated",
    "from",
    "is",
    "just",
    "least",
    "less",
    "more",
    "most",
    "nearly",
    "of",
    "over",
    "roughly",
    "some",
    "than",
    "to",
    "total",
    "under",
    "up",
    "will",
    "would",
    // French, Spanish, Portuguese, German, Italian.
    "environ",
    "entre",
    "de",
    "aproximadamente",
    "alrededor",
    "cerca",
    "etwa",
    "ungefähr",
    "rund",
    "zwischen",
    "intorno",
    "tra",
    "fra",
];

/// Words that open a range whose ends are joined by `and` (`between 30 and 40`).
const BETWEEN: &[&str] = &["between", "entre", "zwischen", "tra", "fra"];

/// The last word before byte `end` (lower case), looking back a little way only.
fn last_word(s: &str, end: usize) -> Option<String> {
    let mut from = end.saturating_sub(40);
    while !s.is_char_boundary(from) {
        from += 1;
    }
    let tail = &s[from..end];
    // A word cut by the look-back window is not a word.
    let cut = from > 0 && tail.starts_with(|c: char| c.is_alphanumeric());
    let w = words(tail);
    if cut && w.len() <= 1 {
        return None;
    }
    w.last().cloned()
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn hedge_re() -> &'static regex::Regex {
    regex!(
        r"(?ix)\b(?:unknown|unclear|uncertain|unsure|undetermined|n/a|none|tbd|
            not\s+(?:sure|known|available|possible|applicable|clear|certain|enough)|
            no\s+(?:idea|data|estimate|answer|number|way|reliable)|
            cannot|can't|can’t|unable|impossible|insufficient|hard\s+to\s+(?:say|tell)|
            don't\s+know|do\s+not\s+know|inconnu|desconocido|unbekannt|sconosciuto|desconhecido)\b
            |\?"
    )
}

/// `v` times a power of ten, rounded as the decimal written would be (`2.03` × 10⁶ is
/// 2 030 000, not 2 029 999.999…).
pub fn scale_by(v: f64, factor: f64) -> f64 {
    let e = factor.log10().round() as i32;
    if factor == 1.0 || 10f64.powi(e) != factor {
        return v * factor;
    }
    format!("{v}e{e}").parse().unwrap_or(v * factor)
}

/// The factor of a scale word (`million`, `Mrd`, `bn`, `MM`, …), as in a label's unit
/// (`ESTIMATE (in millions):`); upper-case `K`, `M`, `B` alone count too.
pub fn scale_word(word: &str) -> Option<f64> {
    match word {
        "K" => Some(1e3),
        "M" | "MM" => Some(1e6),
        "B" => Some(1e9),
        w => {
            let lower = w.to_lowercase();
            SCALE_WORDS.iter().find(|(name, _)| *name == lower).map(|(_, f)| *f)
        }
    }
}

/// The first scale word in a text (`in millions of people` → 10⁶).
pub fn scale_in(text: &str) -> Option<f64> {
    text.split(|c: char| !c.is_alphabetic()).find_map(scale_word)
}

/// The text declines or hedges instead of giving a number.
fn hedges(text: &str) -> bool {
    hedge_re().is_match(text) || super::reading::declines(text)
}

fn likely_re() -> &'static regex::Regex {
    regex!(
        r"(?ix)\b(?:most\s+likely|likeliest|most\s+probabl[ey]|best\s+(?:estimate|guess)|
            point\s+estimate|central\s+estimate|median\s+estimate|expected\s+value|
            más\s+probable|plus\s+probable|am\s+wahrscheinlichsten|più\s+probabile|mais\s+provável)
            (?:\s+(?:value|figure|number))?
            (?:\s*(?:[:=≈~(]|is|of|at|would\s+be|around|about|roughly|approximately))*"
    )
}

/// Only hedging words and markup stand in `lead`.
fn only_hedging(lead: &str) -> bool {
    words(lead).iter().all(|w| HEDGES_ALLOWED.contains(&w.as_str()))
}

/// The second end of a range whose first end is `first`: `30-40`, `30 to 40`, `between 30 and
/// 40`, `de 30 à 40`, `zwischen 30 und 40`.
fn range_end(s: &str, first: &Number, lead: &str) -> Option<Number> {
    let j = skip_spaces(s, first.end);
    let spaced = j > first.end;
    let rest = &s[j..];
    let opener = last_word(lead, lead.len());
    let opened_by_between = opener.as_deref().is_some_and(|w| BETWEEN.contains(&w));
    let opened_by_from =
        opener.as_deref().is_some_and(|w| ["from", "de", "von", "da", "desde"].contains(&w));
    let mut k = None;
    for dash in ["-", "–", "—"] {
        if let Some(r) = rest.strip_prefix(dash) {
            // `30 -40` is two numbers, the second negative.
            if !(spaced && r.starts_with(|c: char| c.is_ascii_digit())) {
                k = Some(j + dash.len());
            }
        }
    }
    if k.is_none() {
        let w = word_at(s, j).to_lowercase();
        let joins = match w.as_str() {
            "to" | "through" | "bis" | "à" => true,
            "a" | "al" | "até" => opened_by_from || opened_by_between,
            "and" | "und" | "y" | "e" | "et" => opened_by_between,
            _ => false,
        };
        if joins && spaced {
            k = Some(j + w.len());
        }
    }
    let k = skip_spaces(s, k?);
    number_at(s, k).ok().flatten()
}

/// Reads the value stated in `span` (what follows `ESTIMATE:` or `My estimate is`): one number,
/// or a range as its midpoint, unless a most likely value is stated with it (`between 30 and 40
/// million, most likely 34 million` is 34 million). `lead` says what may stand before it.
pub fn read_stated(span: &str, lead: Lead) -> Option<Stated> {
    let nums = find_numbers(span);
    let first_lead = &span[..nums.first()?.start];
    let acceptable = match lead {
        Lead::Strict => only_hedging(first_lead),
        Lead::Label => !hedges(first_lead),
    };
    if !acceptable {
        return None;
    }
    // A calculation states its result: `2.9M × 0.7 = 2.03M`.
    if let Some(result) = calculation_result(span, &nums) {
        return read_stated(result, Lead::Strict);
    }
    // A stated most likely value wins over the range around it.
    let likely = likely_re().find_iter(span).filter_map(|m| {
        let n = nums.get(nums.partition_point(|n| n.start < m.end()))?;
        only_hedging(&span[m.end()..n.start]).then_some(*n)
    });
    if let Some(n) = likely.last() {
        return Some(Stated { value: n.value, range: None, percent: n.percent, scale: n.scale });
    }
    // `2030: 45 million`: a year labelling the value.
    let labelled_year = nums[0].year_like
        && nums.len() > 1
        && char_at(span, skip_spaces(span, nums[0].end)) == Some(':');
    let idx = if only_hedging(first_lead) && !labelled_year { 0 } else { introduced(span, &nums)? };
    let first = nums[idx];
    let lead_text = &span[..first.start];
    if hedges(lead_text) {
        return None;
    }
    if let Some(second) = range_end(span, &first, lead_text) {
        // `30-40 million`: the scale of the second end applies to the first, unless the first
        // is already the larger number as written (`1,000 to 2 million`).
        let shared =
            first.scale == 1.0 && second.scale != 1.0 && first.value <= second.value / second.scale;
        let a = if shared { scale_by(first.value, second.scale) } else { first.value };
        let b = second.value;
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        // Halves first: `lo + hi` overflows near f64::MAX.
        let mid = lo / 2.0 + hi / 2.0;
        if !(a.is_finite() && mid.is_finite()) {
            return None;
        }
        return Some(Stated {
            value: mid,
            range: Some((a, b)),
            percent: first.percent || second.percent,
            scale: second.scale.max(first.scale),
        });
    }
    Some(Stated { value: first.value, range: None, percent: first.percent, scale: first.scale })
}

/// Words after which a number in a sentence is the value stated (`will be about 45 million`,
/// `there are 40`, `in 2035`).
const STATING: &[&str] = &[
    "is",
    "are",
    "be",
    "was",
    "will",
    "would",
    "of",
    "at",
    "to",
    "about",
    "around",
    "approx",
    "approximately",
    "roughly",
    "circa",
    "ca",
    "nearly",
    "almost",
    "some",
    "over",
    "under",
    "than",
    "least",
    "most",
    "between",
    "from",
    "estimate",
    "estimated",
    "reach",
    "reaches",
    "total",
    "totals",
    "equals",
    "in",
    "by",
    "de",
    "entre",
    "environ",
    "aproximadamente",
    "etwa",
    "ungefähr",
    "rund",
    "sera",
    "será",
    "sarà",
    "wird",
    "est",
    "es",
    "é",
    "è",
];

/// In a sentence after a label (`The number will be about 45 million`), the number it states:
/// the first that a stating word or mark introduces, years passed over while another number
/// follows (`by 2030, about 45 million`, `2030: 45 million`). None when the first candidate is
/// not introduced so (`The 2020 census counted 300; growth suggests 400`).
fn introduced(span: &str, nums: &[Number]) -> Option<usize> {
    for (i, n) in nums.iter().enumerate() {
        if n.year_like && i + 1 < nums.len() {
            continue;
        }
        let before = span[..n.start].trim_end_matches(|c: char| is_space(c) || "*_(".contains(c));
        let marked = before.ends_with([':', '=', '≈', '~', '：']);
        let worded = last_word(before, before.len()).is_some_and(|w| STATING.contains(&w.as_str()));
        return (marked || worded).then_some(i);
    }
    None
}

/// The text after the last `=` (or `≈`) that ends a calculation: one whose left side ends in
/// a number and holds two numbers or more.
fn calculation_result<'a>(span: &'a str, nums: &[Number]) -> Option<&'a str> {
    let eq = span.rfind(['=', '≈'])?;
    let before = span[..eq].trim_end_matches(|c: char| is_space(c) || c == ')');
    let left: Vec<&Number> = nums.iter().filter(|n| n.end <= eq).collect();
    let ends_in_number = left.last().is_some_and(|n| n.end == before.len());
    let after = &span[eq + span[eq..].chars().next()?.len_utf8()..];
    (left.len() >= 2 && ends_in_number && nums.iter().any(|n| n.start > eq)).then_some(after)
}

/// The one number `text` states, read strictly (only hedging words before it).
pub fn read_number(text: &str) -> Option<f64> {
    read_stated(text, Lead::Strict).map(|s| s.value)
}

#[cfg(test)]
#[path = "numbers_tests.rs"]
mod tests;
