//! Reading a debater's revision: its decision, reasoning and revised response, from its text
//! or its schema's JSON, and the revision a debater's reply makes.

use super::*;

/// What a revision says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedRevision {
    pub decision: Option<String>,
    pub reasoning: Option<String>,
    /// From the answer part of the reply: never a reasoning trace.
    pub revised_response: Option<String>,
    /// Why no decision was read (null when one was).
    #[serde(default)]
    pub unparsed: Option<Unparsed>,
}

/// The name of a debater's revision schema.
pub const REVISION_SCHEMA: &str = "debate_revision";

/// The three decisions, as the seed writes them.
pub(super) const DECISIONS: [&str; 3] = ["REVISE", "STAND", "MERGE"];

/// The longest revised response the schema allows: about 1,500 tokens, inside the default
/// output cap of 2,000 with the reasoning before it, so a small model that loops in the
/// string is stopped by the schema before the server stops it mid-object. A STAND may leave it
/// empty: its original stands, however long.
pub const REVISED_RESPONSE_MAX_CHARS: usize = 6_000;

/// A debater's revision schema: its reasoning (the seed's `REASONING:`), the decision word and
/// the revised response. The same for every run, built once per run.
pub fn revision_schema() -> Arc<ReplySchema> {
    ReplySchema::new(
        REVISION_SCHEMA,
        schema::reasoned([
            (
                "decision",
                schema::described(
                    schema::one_of(&DECISIONS),
                    "REVISE (improve your response with the others' insights), STAND (keep your original response unchanged) or MERGE (rewrite it combining the best elements of all responses)",
                ),
            ),
            (
                "revised_response",
                schema::described(
                    schema::text(REVISED_RESPONSE_MAX_CHARS),
                    "your final response in full (if STAND, repeat your original or leave this empty)",
                ),
            ),
        ]),
    )
}

/// A revision from a reply's JSON (one fitting the schema), when it states a decision the text
/// reader would read (the schema's words are all such): reasoning and response as stated, blank
/// ones as none.
fn schema_revision(v: &Value) -> Option<ParsedRevision> {
    let decision = decision_word(v.get("decision")?.as_str()?)?;
    let field = |k: &str| {
        v.get(k).and_then(Value::as_str).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
    };
    Some(ParsedRevision {
        decision: Some(decision.to_string()),
        reasoning: field(schema::REASONING),
        revised_response: field("revised_response"),
        unparsed: None,
    })
}

/// Reads a revision from its JSON when it fits `schema`, else by its text ([`parse_revision`]);
/// with where its decision was read from, when one was.
pub fn parse_revision_reply(raw: &str, schema: &ReplySchema) -> (ParsedRevision, Option<ReadFrom>) {
    schema.read_reply(raw, schema_revision, parse_revision, |p| p.decision.is_some())
}

/// A decision word, in English or a few other languages (`REVISAR`, `MAINTENIR`,
/// `ZUSAMMENFÜHREN`).
fn decision_word(word: &str) -> Option<&'static str> {
    match word.to_lowercase().as_str() {
        "revise" | "revisar" | "réviser" | "reviser" | "rivedere" | "überarbeiten"
        | "ueberarbeiten" | "herzien" => Some("REVISE"),
        "stand" | "mantener" | "manter" | "maintenir" | "mantenere" | "beibehalten"
        | "behouden" => Some("STAND"),
        "merge" | "fusionar" | "combinar" | "mesclar" | "fundir" | "fusionner" | "unire"
        | "zusammenführen" | "zusammenfuehren" | "samenvoegen" => Some("MERGE"),
        _ => None,
    }
}

fn decision_labels() -> &'static Labels {
    static L: OnceLock<Labels> = OnceLock::new();
    // `DECISION: REVISE`, `**Decision:** **MERGE**`, `Decision - stand`, `Choice: b) STAND`,
    // `DECISIÓN: REVISAR`, `DÉCISION : MAINTENIR`, `ENTSCHEIDUNG: ZUSAMMENFÜHREN`.
    L.get_or_init(|| {
        Labels::new(
            r"(?:final\s+|my\s+)?(?:decision|choice)|decisión|decisão|décision|decisione|entscheidung|beslissing",
        )
    })
}

fn reasoning_re() -> &'static Regex {
    regex!(r"(?i)reasoning[*_\s]*:[*_\s]*")
}

fn revised_re() -> &'static Regex {
    regex!(r"(?im)^[#>*_\s]*revised\s+response[*_\s]*:[*_]*[ \t]*")
}

/// A revision written as JSON: `{"decision": "REVISE", "reasoning": …, "revised_response":
/// …}` (the last object with a decision that reads as one).
fn json_revision(answer: &str) -> Option<ParsedRevision> {
    json_values(answer).into_iter().rev().find_map(|v| {
        let o = v.as_object()?;
        let field = |keys: &[&str]| {
            keys.iter().find_map(|k| {
                o.iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(k))
                    .and_then(|(_, v)| v.as_str())
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            })
        };
        let word = field(&["decision", "choice"])?;
        let decision = decision_word(word.trim_matches(['*', '_', '[', ']', '.', ' ']))?;
        Some(ParsedRevision {
            decision: Some(decision.to_string()),
            reasoning: field(&["reasoning", "reason"]),
            revised_response: field(&[
                "revised_response",
                "revisedResponse",
                "revised response",
                "response",
                "answer",
            ]),
            unparsed: None,
        })
    })
}

/// Reads a revision from the answer part of the reply (a draft decision in a `<think>` block
/// never counts; a reply whose reasoning never closed has none). The decision is the last one
/// the answer states (`DECISION: X`, a `## Decision` heading with the word under it, JSON, a
/// few other languages), so a model quoting the prompt's template first is read by its own
/// answer; a decision word only mentioned ("I can't decide whether to revise or stand",
/// `[REVISE|STAND|MERGE]`) is none. A JSON revision with a decision is read from its fields.
/// Otherwise the reasoning runs to a blank line or the `REVISED RESPONSE:` marker; the response is everything after the last marker, or, without one, the
/// text after the decision block.
pub fn parse_revision(raw: &str) -> ParsedRevision {
    let split = split_reasoning(raw);
    let none = |why: Unparsed| ParsedRevision {
        decision: None,
        reasoning: None,
        revised_response: None,
        unparsed: Some(why),
    };
    if split.unclosed {
        return none(Unparsed::ReasoningOnly);
    }
    let text = split.answer.as_ref();
    // A revision written as JSON is read as JSON (its fields, not the text around them).
    if let Some(p) = json_revision(text) {
        return p;
    }
    let stated = last_stated(text, decision_labels(), decision_word);
    let decision = stated.map(|s| s.value.to_string());
    let after_decision = stated.map_or(0, |s| s.end);
    let revised_m = revised_re().find_iter(text).filter(|m| m.start() >= after_decision).last();
    let reasoning =
        reasoning_re().find_iter(text).filter(|m| m.start() >= after_decision).last().and_then(
            |m| {
                let rest = &text[m.end()..];
                let end = [rest.find("\n\n"), revised_re().find(rest).map(|r| r.start())]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(rest.len());
                let r = rest[..end].trim();
                (!r.is_empty()).then(|| r.to_string())
            },
        );
    let revised_response = match revised_m {
        Some(m) => Some(text[m.end()..].trim().to_string()).filter(|s| !s.is_empty()),
        None if decision.is_some() => {
            // No marker: the text after the REASONING line (or the decision line).
            let tail = &text[after_decision..];
            let tail = match reasoning_re().find(tail) {
                Some(r) => tail[r.end()..].split_once('\n').map_or("", |(_, rest)| rest),
                None => tail.split_once('\n').map_or("", |(_, rest)| rest),
            };
            Some(tail.trim().to_string()).filter(|s| !s.is_empty())
        }
        None => None,
    };
    let unparsed = decision.is_none().then(|| Unparsed::of(raw));
    ParsedRevision { decision, reasoning, revised_response, unparsed }
}

/// The revision of one debater from its reply (or its original answer when the call failed),
/// read from its JSON where it fits `schema`.
pub(super) fn revision_of(
    original: &Answer,
    reply: Option<&CallReply>,
    schema: &ReplySchema,
) -> (RevisionResponse, Option<String>) {
    let (text, ms) = match reply {
        Some(r) => (r.result.as_ref().ok().cloned(), r.response_time_ms as i64),
        None => (None, 0),
    };
    let read = text.as_deref().map(|t| parse_revision_reply(t, schema));
    let read_from = read.as_ref().and_then(|(_, from)| *from);
    let parsed = read.map(|(p, _)| p);
    let decision = parsed.as_ref().and_then(|p| p.decision.clone());
    let unparsed = parsed.as_ref().and_then(|p| p.unparsed);
    let revised = match (&parsed, decision.as_deref()) {
        // A decision with no response text repeats the original (as the prompt asks of STAND).
        (Some(p), Some(_)) => {
            p.revised_response.clone().unwrap_or_else(|| plain(&original.response))
        }
        // No decision in a readable reply: its answer is the best-effort revision. A refusal
        // or a reply that never finished thinking keeps the original.
        (Some(_), None) if unparsed == Some(Unparsed::NoAnswer) => text
            .as_deref()
            .map(plain)
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| plain(&original.response)),
        _ => plain(&original.response),
    };
    let r = RevisionResponse {
        model: original.model.clone(),
        decision: decision.clone(),
        reasoning: parsed.as_ref().and_then(|p| p.reasoning.clone()),
        original_word_count: word_count(&original.response),
        revised_word_count: word_count(&revised),
        original_response: original.response.clone(),
        revised_response: revised,
        response_time_ms: ms,
        parse_success: decision.is_some(),
        unparsed,
        read_from,
    };
    (r, text)
}
