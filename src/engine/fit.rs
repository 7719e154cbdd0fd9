//! Fitting a prompt into its model's context before it is sent.
//!
//! A server whose context is smaller than a prompt plus the reply's cap refuses the request
//! (llama.cpp: `HTTP 400: request (6568 tokens) exceeds the available context size`) or,
//! worse, silently drops the prompt's start (Ollama). When the context is known (a route's
//! `context_tokens`, or what the server says), a call's prompt is fitted first: the longest
//! quoted material the mode named ([`crate::modes::CallSpec::material`]: earlier answers,
//! reports) is cut down to the same length, the longest first, each cut said where it was
//! made; then, if that is not enough, the conversation's earliest messages are left out. The
//! instructions and the format are never cut. What was cut is reported, and the run says so
//! in a `prompt_fitted` event.
//!
//! Tokens are not counted here (that needs the model's tokenizer): a text is weighed by
//! [`weigh`], which errs on the long side for English, code and other scripts alike
//! (measured on SmolLM2's tokenizer: English 4.5 bytes a token, code 3.2, French 2.8, Chinese
//! 1.8). A server that still refuses a fitted prompt for its length says by how much, and the
//! prompt is fitted again at that rate ([`overflow`]).

use serde::Serialize;

use crate::modes::{CallError, CallErrorKind, ChatMessage, Material};

/// What a chat template adds per message, and per request, in tokens.
const MESSAGE_OVERHEAD: u64 = 8;
const REQUEST_OVERHEAD: u64 = 32;
/// A cut piece of material keeps at least this many bytes of its start.
const MIN_KEPT: usize = 120;

/// The tokens a text is weighed at (at `scale` 1): a token per 3.2 ASCII bytes and two per
/// other character.
pub fn weigh(text: &str) -> f64 {
    let ascii = text.bytes().filter(u8::is_ascii).count();
    let other = text.chars().filter(|c| !c.is_ascii()).count();
    ascii as f64 / 3.2 + other as f64 * 2.0
}

/// One cut, for the `prompt_fitted` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cut {
    /// What was cut, in words for a person (`Response B`, `an earlier message`).
    pub what: String,
    pub from_chars: usize,
    pub to_chars: usize,
}

/// A prompt fitted to a context.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub messages: Vec<ChatMessage>,
    /// The reply's cap: the call's own, lowered to a quarter of the context (at least 256
    /// tokens, at most half) when it is more: a small model's context goes to its prompt.
    pub max_tokens: u32,
    /// Empty when the prompt fitted as it was.
    pub cuts: Vec<Cut>,
    /// False when even every cut left it too long (the server will say so).
    pub fits: bool,
}

/// The tokens `messages` are weighed at, times `scale` (1 unless a server said otherwise).
pub fn estimate(messages: &[ChatMessage], scale: f64) -> u64 {
    REQUEST_OVERHEAD
        + messages
            .iter()
            .map(|m| (weigh(&m.content) * scale).ceil() as u64 + MESSAGE_OVERHEAD)
            .sum::<u64>()
}

fn marker(left_out: usize) -> String {
    format!("[… {left_out} more characters cut to fit the context]")
}

/// The first `bytes` of `text`, ended at a character boundary.
fn head(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `messages` with every piece of `present` longer than `level` bytes cut to it; the cuts.
fn cut_to(
    messages: &[ChatMessage],
    present: &[&Material],
    level: usize,
) -> (Vec<ChatMessage>, Vec<Cut>) {
    let mut out = messages.to_vec();
    let mut cuts = Vec::new();
    for m in present.iter().filter(|m| m.text.len() > level) {
        let kept = head(&m.text, level);
        let left_out = m.text[kept.len()..].chars().count();
        let cut_text = format!("{kept}{}", marker(left_out));
        for msg in out.iter_mut() {
            if msg.content.contains(&*m.text) {
                msg.content = msg.content.replace(&*m.text, &cut_text);
            }
        }
        cuts.push(Cut {
            what: m.name.clone(),
            from_chars: m.text.chars().count(),
            to_chars: kept.chars().count(),
        });
    }
    (out, cuts)
}

/// Fits `messages` into `context` tokens with room for the reply (see the module's doc);
/// `scale` corrects the weighing when a server has said what a prompt really took.
pub fn fit(
    messages: &[ChatMessage],
    material: &[Material],
    context: u32,
    max_tokens: u32,
    scale: f64,
) -> Fitted {
    let max_tokens = max_tokens.min((context / 4).max(256)).min(context / 2).max(1);
    let budget = u64::from(context).saturating_sub(u64::from(max_tokens));
    let fits = |msgs: &[ChatMessage]| estimate(msgs, scale) <= budget;
    if fits(messages) {
        return Fitted { messages: messages.to_vec(), max_tokens, cuts: Vec::new(), fits: true };
    }
    // Material that stands in the messages (each text once), longest first.
    let mut present: Vec<&Material> = Vec::new();
    for m in material {
        if m.text.len() > MIN_KEPT
            && !present.iter().any(|p| p.text == m.text)
            && messages.iter().any(|msg| msg.content.contains(&*m.text))
        {
            present.push(m);
        }
    }
    present.sort_by_key(|m| std::cmp::Reverse(m.text.len()));
    // The longest level every piece may keep: the pieces longer than it are cut to it.
    let (mut out, mut cuts) = match present.first() {
        Some(longest) if fits(&cut_to(messages, &present, MIN_KEPT).0) => {
            let (mut lo, mut hi) = (MIN_KEPT, longest.text.len());
            while lo + 1 < hi {
                let mid = lo + (hi - lo) / 2;
                if fits(&cut_to(messages, &present, mid).0) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            cut_to(messages, &present, lo)
        }
        Some(_) => cut_to(messages, &present, MIN_KEPT),
        None => (messages.to_vec(), Vec::new()),
    };
    // The conversation's earliest messages, while it is still too long (never the last).
    while !fits(&out) && out.len() > 1 {
        let Some(at) = out.iter().position(|m| m.role != "system") else { break };
        if at + 1 >= out.len() {
            break;
        }
        let gone = out.remove(at);
        cuts.push(Cut {
            what: "an earlier message of the conversation".into(),
            from_chars: gone.content.chars().count(),
            to_chars: 0,
        });
    }
    let fits = fits(&out);
    Fitted { messages: out, max_tokens, cuts, fits }
}

/// What a server said when it refused a prompt for its length: the tokens the prompt took and
/// the context it has, as far as the message tells (llama.cpp: `request (6568 tokens) exceeds
/// the available context size (4096 tokens)`; OpenAI and vLLM: `maximum context length is
/// 4096 tokens … resulted in 5000 tokens` / `(4500 in the messages, …)`). None when the error
/// is not about length.
pub fn overflow(e: &CallError) -> Option<(Option<u64>, Option<u32>)> {
    if e.kind != CallErrorKind::Http || !matches!(e.status, Some(400 | 413 | 422)) {
        return None;
    }
    let m = e.message.to_lowercase();
    let about_length = m.contains("exceeds the available context size")
        || m.contains("maximum context length")
        || m.contains("context length exceeded")
        || m.contains("context_length_exceeded");
    if !about_length {
        return None;
    }
    let number_after = |marker: &str| -> Option<u64> {
        let at = m.find(marker)? + marker.len();
        let digits: String = m[at..]
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let prompt = number_after("request (")
        .or_else(|| {
            let at = m.find(" in the messages")?;
            let before = &m[..at];
            let start = before.rfind('(')? + 1;
            before[start..].trim().parse().ok()
        })
        .or_else(|| number_after("resulted in"));
    let context = number_after("context size (")
        .or_else(|| number_after("maximum context length is"))
        .and_then(|n| u32::try_from(n).ok());
    Some((prompt, context))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn material(name: &str, text: &str) -> Material {
        Material { name: name.into(), text: text.into() }
    }

    #[test]
    fn a_prompt_that_fits_is_left_alone() {
        let msgs = vec![ChatMessage::user("short question")];
        let f = fit(&msgs, &[], 4096, 256, 1.0);
        assert_eq!(f.messages, msgs);
        assert!(f.cuts.is_empty() && f.fits);
        assert_eq!(f.max_tokens, 256);
    }

    #[test]
    fn the_longest_material_is_cut_first_and_the_cut_is_said() {
        let long = "a".repeat(9_000);
        let mid = "b".repeat(3_000);
        let short = "c".repeat(500);
        let prompt = format!(
            "Judge these.\n--- A ---\n{long}\n--- B ---\n{mid}\n--- C ---\n{short}\nEnd with VERDICT:"
        );
        let msgs = vec![ChatMessage::user(prompt)];
        let mats = [
            material("Response A", &long),
            material("Response B", &mid),
            material("Response C", &short),
        ];
        let f = fit(&msgs, &mats, 2048, 256, 1.0);
        assert!(f.fits, "{:?}", f.cuts);
        assert!(estimate(&f.messages, 1.0) + 256 <= 2048);
        // As long as it may be: one byte more of each cut piece would not fit.
        let more = cut_to(&msgs, &[&mats[0], &mats[1]], f.cuts[0].to_chars + 1).0;
        assert!(estimate(&more, 1.0) + 256 > 2048);
        let text = &f.messages[0].content;
        assert!(text.starts_with("Judge these.") && text.ends_with("End with VERDICT:"));
        assert!(text.contains(&short), "the short one is kept whole");
        assert_eq!(f.cuts[0].what, "Response A");
        assert_eq!(f.cuts[0].from_chars, 9_000);
        assert!(f.cuts[0].to_chars < 9_000);
        assert!(text.contains("more characters cut to fit the context]"));
        // Pieces longer than the level are cut to the same length.
        if let [a, b] = f.cuts.as_slice() {
            assert_eq!(a.to_chars, b.to_chars);
        }
    }

    #[test]
    fn the_reply_cap_is_a_quarter_of_a_small_context_and_history_goes_when_material_is_not_enough()
    {
        let mut msgs = Vec::new();
        for i in 0..6 {
            msgs.push(ChatMessage::user(format!("earlier question {i} {}", "x".repeat(1_000))));
            msgs.push(ChatMessage::assistant("y".repeat(1_000)));
        }
        msgs.push(ChatMessage::user("the question now"));
        let f = fit(&msgs, &[], 1024, 4_000, 1.0);
        assert_eq!(f.max_tokens, 256);
        assert_eq!(fit(&msgs, &[], 8192, 4_000, 1.0).max_tokens, 2048);
        assert_eq!(fit(&msgs, &[], 8192, 300, 1.0).max_tokens, 300);
        assert!(f.fits);
        assert_eq!(f.messages.last().map(|m| m.content.as_str()), Some("the question now"));
        assert!(f.cuts.iter().all(|c| c.to_chars == 0 && c.what.contains("earlier message")));
        // Nothing left to cut: it says it does not fit.
        let huge = vec![ChatMessage::user("z".repeat(50_000))];
        let f = fit(&huge, &[], 1024, 256, 1.0);
        assert!(!f.fits && f.cuts.is_empty());
    }

    #[test]
    fn cuts_end_at_character_boundaries() {
        let text = "é".repeat(5_000);
        let msgs = vec![ChatMessage::user(format!("Q\n{text}\nFORMAT"))];
        let f = fit(&msgs, &[material("the report", &text)], 1024, 128, 1.0);
        assert!(f.fits);
        assert!(f.messages[0].content.ends_with("FORMAT"));
    }

    #[test]
    fn length_refusals_are_read_with_their_figures() {
        let http = |m: &str| CallError::new(CallErrorKind::Http, Some(400), m);
        assert_eq!(
            overflow(&http("HTTP 400: request (6568 tokens) exceeds the available context size (4096 tokens), try increasing it")),
            Some((Some(6568), Some(4096)))
        );
        assert_eq!(
            overflow(&http("HTTP 400: This model's maximum context length is 8192 tokens. However, your messages resulted in 9012 tokens.")),
            Some((Some(9012), Some(8192)))
        );
        assert_eq!(
            overflow(&http("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4500 in the messages, 500 in the completion).")),
            Some((Some(4500), Some(4096)))
        );
        assert_eq!(overflow(&http("HTTP 400: invalid model")), None);
        let timeout = CallError::new(CallErrorKind::Timeout, None, "maximum context length");
        assert_eq!(overflow(&timeout), None);
    }
}
