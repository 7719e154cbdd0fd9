//! Reading the replies: the claims and each checker's verifications, from their text or their
//! JSON (`fact_check_claims`, `fact_check_verifications`), and the reply score.

use super::*;
use std::collections::HashSet;

/// A numbered heading `<word> 3:` (also `#3`, `claim_3`, `Claim 3`, then `:`, `.` or a dash):
/// the number and the rest of the line.
pub(super) fn numbered(word: &str, line: &str) -> Option<(u64, String)> {
    let pattern = |w: &str| {
        format!(
            r"(?i)^{w}\s*(?:\*\*|__)?\s*(?:#\s*|claim[_\s]*)?(\d{{1,6}})\s*(?:\*\*|__)?\s*(?:[:.\-–—]\s*(.*))?$"
        )
    };
    let r = match word {
        "claim" => regex!(&pattern("claim")),
        _ => regex!(&pattern("verification")),
    };
    let c = r.captures(line)?;
    Some((c[1].parse().ok()?, unmark(c.get(2).map_or("", |m| m.as_str()))))
}

/// A `Name: value` field line among `names`: the lower-case name and the value.
fn field<'a>(line: &'a str, names: &str) -> Option<(String, &'a str)> {
    let pattern = || format!(r"(?i)^({names})\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?");
    let r = match names {
        "context|type" => regex!(pattern()),
        "extraction summary" => regex!(pattern()),
        _ => regex!(pattern()),
    };
    let c = r.captures(line)?;
    Some((c.get(1)?.as_str().to_lowercase(), &line[c.get(0)?.end()..]))
}

/// One checkable claim, renumbered `claim_1`… in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// `claim_1`, `claim_2`…
    pub id: String,
    /// Its number, from 1.
    pub number: usize,
    /// The claim as the extractor stated it.
    pub text: String,
    /// The sentence it comes from, if the extractor gave it.
    pub context: Option<String>,
    /// One of [`TYPES`]; null when the type is missing or unknown.
    #[serde(rename = "type")]
    pub claim_type: Option<String>,
}

/// The extractor's reply as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    pub claims: Vec<Claim>,
    /// `CLAIMS: NONE` was stated (and no claim listed).
    pub none_stated: bool,
}

impl Extraction {
    /// Claims were listed, or none were said to exist: the reply followed the format.
    pub fn parse_success(&self) -> bool {
        !self.claims.is_empty() || self.none_stated
    }
}

/// The type a value names exactly; None otherwise.
pub fn type_of(value: &str) -> Option<String> {
    let v = unmark(value).trim_end_matches(['.', ',', ';']).trim().to_uppercase();
    TYPES.contains(&v.as_str()).then_some(v)
}

/// Reads the extractor's claims (its answer part only).
pub fn read_claims(reply: &str) -> Extraction {
    let none_re = regex!(r"(?i)^claims\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*none\b");
    let text = answer_text(reply);
    struct Block {
        text: String,
        context: Option<String>,
        claim_type: Option<Option<String>>,
    }
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    let mut none_stated = false;
    for raw in text.lines() {
        let line = bare(raw);
        if none_re.is_match(line) {
            none_stated = true;
            open = false;
            continue;
        }
        if let Some((_, rest)) = numbered("claim", line) {
            blocks.push(Block { text: rest, context: None, claim_type: None });
            open = true;
            continue;
        }
        if field(line, "extraction summary").is_some() {
            open = false;
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = field(line, "context|type") {
            if name == "context" && b.context.is_none() {
                let v = unmark(value);
                b.context = Some(v).filter(|v| !v.is_empty());
            } else if name == "type" && b.claim_type.is_none() {
                b.claim_type = Some(type_of(value));
            }
            continue;
        }
        // A heading with its claim on the next line.
        if b.text.is_empty() && !line.trim().is_empty() {
            b.text = unmark(line);
        }
    }
    let claims = numbered_claims(
        blocks.into_iter().map(|b| (b.text, b.context, b.claim_type.flatten())).collect(),
    );
    let none_stated = none_stated && claims.is_empty();
    Extraction { claims, none_stated }
}

/// Claims by type (`UNTYPED` for a null type), in [`TYPES`] order.
pub fn type_breakdown(claims: &[Claim]) -> TypeBreakdown {
    let n = |t: &str| {
        let n = claims.iter().filter(|c| c.claim_type.as_deref().unwrap_or("UNTYPED") == t).count();
        (n > 0).then_some(n)
    };
    TypeBreakdown {
        statistic: n("STATISTIC"),
        date: n("DATE"),
        attribution: n("ATTRIBUTION"),
        technical: n("TECHNICAL"),
        comparison: n("COMPARISON"),
        causal: n("CAUSAL"),
        untyped: n("UNTYPED"),
    }
}

/// The one verdict a text states; None when it states none, several, or a negated one
/// (`not verified`, `unverified`).
pub fn verdict_of(text: &str) -> Option<&'static str> {
    let r = regex!(r"(?i)\b(not\s+|un)?(verified|disputed|unverifiable)\b");
    let mut found: Option<&'static str> = None;
    for c in r.captures_iter(text) {
        if c.get(1).is_some() {
            return None;
        }
        let v = VERDICTS.into_iter().find(|v| v.eq_ignore_ascii_case(&c[2]))?;
        match found {
            Some(f) if f != v => return None,
            _ => found = Some(v),
        }
    }
    found
}

/// The one confidence a value states (`HIGH`, `medium.`); None otherwise.
pub fn confidence_of(value: &str) -> Option<&'static str> {
    let r = regex!(r"(?i)\b(high|medium|low)\b");
    let found: Vec<String> = r.find_iter(value).map(|m| m.as_str().to_uppercase()).collect();
    let first = found.first()?;
    if found.iter().any(|f| f != first) {
        return None;
    }
    CONFIDENCES.into_iter().find(|c| c == first)
}

/// One checker's judgement of one claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// The claim's id.
    pub claim_id: String,
    /// VERIFIED, DISPUTED or UNVERIFIABLE.
    pub verdict: String,
    /// The checker's evidence, as it gave it.
    pub evidence: Option<String>,
    /// Only on a DISPUTED verdict; null when `N/A`, `none`, `-` or empty.
    pub correction: Option<String>,
    /// HIGH, MEDIUM or LOW.
    pub confidence: String,
    /// False when the reply stated no confidence (LOW is used).
    pub confidence_stated: bool,
    /// False when the checker did not address the claim (UNVERIFIABLE, LOW).
    pub addressed: bool,
}

/// A checker's reply as read against the claims.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReading {
    pub verifications: Vec<Verification>,
    pub parse_success: bool,
}

fn no_correction(v: &str) -> bool {
    let t = v.trim().trim_end_matches('.').trim().to_lowercase();
    matches!(t.as_str(), "" | "n/a" | "na" | "none" | "-" | "—" | "–")
}

/// A claim the checker did not address: UNVERIFIABLE, LOW, `addressed: false`.
fn unaddressed(c: &Claim) -> Verification {
    Verification {
        claim_id: c.id.clone(),
        verdict: "UNVERIFIABLE".into(),
        evidence: None,
        correction: None,
        confidence: "LOW".into(),
        confidence_stated: false,
        addressed: false,
    }
}

/// Reads a checker's verifications (its answer part only), one per claim in claim order.
pub fn read_check(reply: &str, claims: &[Claim]) -> CheckReading {
    struct Block {
        number: usize,
        heading_verdict: Option<&'static str>,
        fields: Vec<(String, String)>,
    }
    let text = answer_text(reply);
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    let mut spanning: Option<usize> = None;
    for raw in text.lines() {
        let line = bare(raw);
        if let Some((n, rest)) = numbered("verification", line) {
            let n = usize::try_from(n).unwrap_or(0);
            open = (1..=claims.len()).contains(&n) && !blocks.iter().any(|b| b.number == n);
            spanning = None;
            if open {
                blocks.push(Block {
                    number: n,
                    heading_verdict: verdict_of(&rest),
                    fields: vec![],
                });
            }
            continue;
        }
        if numbered("claim", line).is_some() {
            (open, spanning) = (false, None);
            continue;
        }
        let Some(b) = blocks.last_mut().filter(|_| open) else { continue };
        if let Some((name, value)) = field(line, "verdict|evidence|correction|confidence") {
            spanning = None;
            if !b.fields.iter().any(|(n, _)| *n == name) {
                if name == "evidence" || name == "correction" {
                    spanning = Some(b.fields.len());
                }
                b.fields.push((name, unmark(value)));
            }
            continue;
        }
        if raw.trim_start().starts_with('#') {
            (open, spanning) = (false, None);
            continue;
        }
        if let Some(v) = spanning.and_then(|i| b.fields.get_mut(i)) {
            if !raw.trim().is_empty() {
                if !v.1.is_empty() {
                    v.1.push('\n');
                }
                v.1.push_str(raw.trim());
            }
        }
    }
    let mut addressed_any = false;
    let verifications = claims
        .iter()
        .map(|c| {
            let block = blocks.iter().find(|b| b.number == c.number);
            let get = |name: &str| {
                block.and_then(|b| {
                    b.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.trim().to_string())
                })
            };
            let verdict = block.and_then(|b| {
                b.heading_verdict.or_else(|| get("verdict").and_then(|v| verdict_of(&v)))
            });
            let Some(verdict) = verdict else { return unaddressed(c) };
            addressed_any = true;
            let confidence = get("confidence").as_deref().and_then(confidence_of);
            Verification {
                claim_id: c.id.clone(),
                verdict: verdict.into(),
                evidence: get("evidence").filter(|e| !e.is_empty()),
                correction: get("correction")
                    .filter(|v| verdict == "DISPUTED" && !no_correction(v)),
                confidence: confidence.unwrap_or("LOW").into(),
                confidence_stated: confidence.is_some(),
                addressed: true,
            }
        })
        .collect();
    CheckReading { verifications, parse_success: addressed_any }
}

/// The reliability score the report states: the first number after `Reliability Score` on the
/// last line naming it (rounded, clamped to 0-100); None when that line states none, or only
/// the template's range (`<0-100>`).
pub fn read_score(reply: &str) -> Option<u32> {
    let name = regex!(r"(?i)reliability\s+score");
    let num = regex!(r"^[^0-9]*?(-?\d+(?:\.\d+)?)\s*(-\s*\d)?");
    let text = answer_text(reply);
    let line = text.lines().rev().find(|l| name.is_match(l))?;
    let at = name.find_iter(line).next()?.end();
    let c = num.captures(&line[at..])?;
    if c.get(2).is_some() {
        return None;
    }
    let v: f64 = c[1].parse().ok()?;
    Some(v.round().clamp(0.0, 100.0) as u32)
}

// ---- structured replies ----------------------------------------------------------------------
//
// A model whose route takes structured output is asked for JSON instead of the text blocks:
// the extractor for `fact_check_claims` (each claim with its sentence and its type), a checker
// for `fact_check_verifications` (one judgement per claim, by its number, its evidence before
// its verdict so the model weighs before it commits). A reply is read from its JSON when that
// fits the schema and states what the text would have to (a claim with words, a judgement of
// a claim of this run); else by the text readers above. The JSON is held to the text's rules:
// a repeated claim keeps its first wording, a claim judged twice keeps its first judgement, a
// correction stands only on a DISPUTED verdict.

/// The extraction's schema name.
pub const CLAIMS_SCHEMA: &str = "fact_check_claims";
/// A check's schema name.
pub const VERIFICATIONS_SCHEMA: &str = "fact_check_verifications";
/// The most claims a JSON extraction may list.
pub const MAX_CLAIMS: usize = 30;
/// The longest claim, as worded in the content.
pub const CLAIM_MAX_CHARS: usize = 300;
/// The longest context sentence and the longest evidence.
pub const CONTEXT_MAX_CHARS: usize = 500;
/// The longest correction.
pub const CORRECTION_MAX_CHARS: usize = 300;

/// The extraction's schema: the reasoning, then the claims (none when there is none).
pub fn claims_schema() -> Arc<ReplySchema> {
    let claim = schema::object([
        (
            "claim",
            schema::described(schema::text(CLAIM_MAX_CHARS), "the claim as worded in the content"),
        ),
        ("context", schema::described(schema::text(CONTEXT_MAX_CHARS), "the sentence it is in")),
        ("type", schema::described(schema::one_of(&TYPES), "what kind of claim it is")),
    ]);
    ReplySchema::new(
        CLAIMS_SCHEMA,
        schema::reasoned([(
            "claims",
            schema::described(
                schema::list(claim, 0, MAX_CLAIMS),
                "every checkable claim in the content, in order (an empty list when there is \
                 none)",
            ),
        )]),
    )
    .listing("claims")
}

/// A check's schema for `n` claims: the reasoning, then one judgement per claim.
pub fn verifications_schema(n: usize) -> Arc<ReplySchema> {
    let n = n.max(1);
    let judgement = schema::object([
        (
            "claim",
            schema::described(schema::integer(1, n as i64), "the number of the claim judged"),
        ),
        (
            "evidence",
            schema::described(
                schema::text(CONTEXT_MAX_CHARS),
                "what you know that supports or contradicts it",
            ),
        ),
        ("verdict", schema::described(schema::one_of(&VERDICTS), "your verdict on the claim")),
        (
            "correction",
            schema::described(
                schema::text(CORRECTION_MAX_CHARS),
                "the correct statement if DISPUTED, else \"N/A\"",
            ),
        ),
        ("confidence", schema::described(schema::one_of(&CONFIDENCES), "your confidence")),
    ]);
    ReplySchema::new(
        VERIFICATIONS_SCHEMA,
        schema::reasoned([(
            "verifications",
            schema::described(
                schema::list(judgement, n, n),
                "one judgement per claim, in the order of the claims",
            ),
        )]),
    )
    .listing("verifications")
}

/// Claims as stated (text, context, type), each kept once (ignoring case and spacing) and
/// numbered in order.
fn numbered_claims(stated: Vec<(String, Option<String>, Option<String>)>) -> Vec<Claim> {
    let mut claims: Vec<Claim> = Vec::new();
    for (text, context, claim_type) in stated {
        let t = text.trim().trim_matches('"').trim().to_string();
        if t.is_empty() || claims.iter().any(|c| norm(&c.text) == norm(&t)) {
            continue;
        }
        let n = claims.len() + 1;
        claims.push(Claim { id: format!("claim_{n}"), number: n, text: t, context, claim_type });
    }
    claims
}

/// The share of a claim's words the content must hold for the claim to be the content's.
pub const IN_CONTENT_SHARE: f64 = 0.6;

/// A text's words, lower-cased, for comparing a claim with the content: runs of letters or
/// digits, a thousands separator inside a figure dropped (`10,100` is `10100`).
fn words_of(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let separator = c == ','
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1..i + 4).is_some_and(|d| d.iter().all(char::is_ascii_digit))
            && !chars.get(i + 4).is_some_and(char::is_ascii_digit);
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !separator && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether `content` states `claim`, as the extractor is asked to word it: the claim's words
/// stand in the content as they are (a quote, also in a script written without spaces), or
/// every figure the claim gives is in the content and at least [`IN_CONTENT_SHARE`] of its
/// words are. A small model may list claims the content never makes (a figure it made up, a
/// sentence in another language); checking those would report on what the content did not say.
pub fn in_content(claim: &str, content: &str) -> bool {
    Stated::of(content).states(claim)
}

/// A content's words, read once for all its claims ([`in_content`]).
struct Stated {
    /// Its words, one space between each.
    joined: String,
    held: HashSet<String>,
}

impl Stated {
    fn of(content: &str) -> Stated {
        let words = words_of(content);
        Stated { joined: words.join(" "), held: words.into_iter().collect() }
    }

    fn states(&self, claim: &str) -> bool {
        let words = words_of(claim);
        if words.is_empty() {
            return false;
        }
        if quoted(&words.join(" "), &self.joined) {
            return true;
        }
        let held = &self.held;
        let figures_held = words
            .iter()
            .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
            .all(|w| held.contains(w));
        let share = words.iter().filter(|w| held.contains(*w)).count() as f64 / words.len() as f64;
        figures_held && share >= IN_CONTENT_SHARE
    }
}

/// Whether `quote` stands in `text` without cutting a run of Latin letters or digits (`188` is no
/// quote of `1889`; a part of a sentence written without spaces is).
fn quoted(quote: &str, text: &str) -> bool {
    let cuts = |a: Option<char>, b: Option<char>| {
        a.zip(b).is_some_and(|(a, b)| a.is_ascii_alphanumeric() && b.is_ascii_alphanumeric())
    };
    text.match_indices(quote).any(|(at, _)| {
        let end = at + quote.len();
        !cuts(text[..at].chars().next_back(), quote.chars().next())
            && !cuts(quote.chars().next_back(), text[end..].chars().next())
    })
}

/// The claims `content` states ([`in_content`]), renumbered in order, and the wording of those
/// it does not, set aside.
pub fn stated_in(claims: Vec<Claim>, content: &str) -> (Vec<Claim>, Vec<String>) {
    let stated = Stated::of(content);
    let (kept, aside): (Vec<Claim>, Vec<Claim>) =
        claims.into_iter().partition(|c| stated.states(&c.text));
    let kept =
        numbered_claims(kept.into_iter().map(|c| (c.text, c.context, c.claim_type)).collect());
    (kept, aside.into_iter().map(|c| c.text).collect())
}

/// The extractor's reply read from its JSON when it fits `schema` and lists claims (or says
/// there are none with an empty list), from the claims complete before the cut when its JSON
/// was cut off, else by its text ([`read_claims`]); with where it was read from when it
/// followed a format.
pub fn read_claims_reply(reply: &str, schema: &ReplySchema) -> (Extraction, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let items = v.get("claims")?.as_array()?;
        let stated = items
            .iter()
            .map(|c| {
                let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
                let context = Some(field("context").trim().to_string()).filter(|c| !c.is_empty());
                (field("claim").to_string(), context, type_of(field("type")))
            })
            .collect();
        Some(Extraction { claims: numbered_claims(stated), none_stated: items.is_empty() })
    };
    schema.read_reply(reply, from_json, read_claims, Extraction::parse_success)
}

/// A checker's reply read from its JSON when it fits `schema`, from the judgements complete
/// before the cut when its JSON was cut off (at its token cap: the claims after it are not
/// addressed), else by its text ([`read_check`]); with where it was read from when it was
/// usable.
pub fn read_check_reply(
    reply: &str,
    claims: &[Claim],
    schema: &ReplySchema,
) -> (CheckReading, Option<ReadFrom>) {
    let from_json = |v: &Value| {
        let items = v.get("verifications")?.as_array()?;
        let verifications: Vec<Verification> = claims
            .iter()
            .map(|c| {
                // A claim judged twice keeps its first judgement, as in text.
                let item = items
                    .iter()
                    .find(|i| i.get("claim").and_then(Value::as_u64) == Some(c.number as u64));
                let field = |k: &str| {
                    item.and_then(|i| i.get(k))
                        .and_then(Value::as_str)
                        .map(|s| s.trim().to_string())
                };
                let verdict = field("verdict").and_then(|v| VERDICTS.into_iter().find(|x| *x == v));
                let confidence =
                    field("confidence").and_then(|v| CONFIDENCES.into_iter().find(|x| *x == v));
                match (verdict, confidence) {
                    (Some(verdict), Some(confidence)) => Verification {
                        claim_id: c.id.clone(),
                        verdict: verdict.into(),
                        evidence: field("evidence").filter(|e| !e.is_empty()),
                        correction: field("correction")
                            .filter(|v| verdict == "DISPUTED" && !no_correction(v)),
                        confidence: confidence.into(),
                        confidence_stated: true,
                        addressed: true,
                    },
                    _ => unaddressed(c),
                }
            })
            .collect();
        let parse_success = verifications.iter().any(|v| v.addressed);
        Some(CheckReading { verifications, parse_success })
    };
    schema.read_reply(reply, from_json, |t| read_check(t, claims), |r| r.parse_success)
}
