//! Helpers every mode shares: run seeds and label shuffles, history truncation, titles, and
//! the stage-one message list.

use super::ChatMessage;

/// A stable 64-bit seed from a run id (FNV-1a): the same run always shuffles the same way.
pub fn seed_from_run_id(run_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in run_id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64: a tiny deterministic generator, enough for shuffling a handful of labels.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// `Response A`, `Response B`, … `Response Z`, `Response AA`, …
pub fn label(i: usize) -> String {
    let mut n = i;
    let mut letters = Vec::new();
    loop {
        letters.push((b'A' + (n % 26) as u8) as char);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    letters.reverse();
    format!("Response {}", letters.into_iter().collect::<String>())
}

/// Labelled responses as the prompts show them: `--- Response A ---`, the text, a blank line.
pub fn response_blocks(labeled: &[(String, String)]) -> String {
    labeled.iter().map(|(l, response)| format!("--- {l} ---\n{response}\n\n")).collect()
}

/// A shuffled assignment of `n` participants to labels: entry `k` is the participant index
/// shown as `label(k)`. Deterministic from the seed, so a stored run can be explained later.
pub fn create_label_map(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    SplitMix64::new(seed).shuffle(&mut order);
    order
}

/// The last `max_turns` turns of a history. A turn is a user message and the replies after
/// it, so the kept slice always starts with a user message.
pub fn truncate_history(history: &[ChatMessage], max_turns: usize) -> Vec<ChatMessage> {
    let starts: Vec<usize> =
        history.iter().enumerate().filter(|(_, m)| m.role == "user").map(|(i, _)| i).collect();
    if max_turns == 0 || starts.is_empty() {
        return Vec::new();
    }
    let from = starts[starts.len().saturating_sub(max_turns)];
    history[from..].to_vec()
}

/// How many earlier turns a multi-turn mode's follow-up carries (the seed: "truncated to the
/// last 10 turns").
pub const HISTORY_TURNS: usize = 10;

/// The conversation's last [`HISTORY_TURNS`] turns followed by `prompt` as the last user
/// message.
pub fn with_history(history: &[ChatMessage], prompt: &str) -> Vec<ChatMessage> {
    let mut messages = truncate_history(history, HISTORY_TURNS);
    messages.push(ChatMessage::user(prompt));
    messages
}

/// The seed's title prompt, verbatim.
pub fn title_prompt(question: &str) -> String {
    format!(
        "Generate a brief title (3-5 words) for a conversation that starts with this question:\n\n\
         \"{question}\"\n\n\
         Reply with ONLY the title. No quotes, no punctuation, no explanation."
    )
}

const TITLE_MAX_WORDS: usize = 8;
const TITLE_MAX_CHARS: usize = 80;

/// Words a title must not end on: a title ending on one reads as a cut sentence.
const DANGLING: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "at", "for", "with", "by", "from", "into", "about",
    "over", "under", "between", "via", "vs", "versus", "and", "or", "but", "nor", "so", "yet",
    "because", "as", "than", "that", "which", "who", "whom", "whose", "if", "when", "while", "is",
    "are", "was", "were", "be", "been", "being", "do", "does", "did", "has", "have", "had", "it",
    "its", "this", "these", "those", "their", "his", "her", "my", "your", "our", "we", "they", "i",
    "you", "he", "she", "can", "could", "should", "would", "will", "may", "might", "must", "not",
    "very", "more", "most", "de", "la", "le", "les", "des", "du", "el", "los", "las", "y", "et",
    "und", "der", "die", "das", "den", "dem", "zu",
];

/// A usable title from a model's reply: the first non-empty line of its answer (reasoning set
/// aside), without markdown, quotes, a `Title:` prefix or trailing punctuation. A reply longer
/// than a title (a model that answered the question instead) is not used. Falls back to the
/// start of the question, so a conversation always has a title. Either way the title ends at a
/// word boundary and never on a dangling word (`the`, `of`, `because`…).
pub fn clean_title(raw: &str, question: &str) -> String {
    let answer = super::reading::answer_text(raw);
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let t: String = line
        .trim_start_matches('#')
        .chars()
        .filter(|c| !matches!(c, '*' | '_' | '`' | '"' | '“' | '”'))
        .collect();
    let mut t = t.trim().to_string();
    if t.to_lowercase().starts_with("title:") {
        t = t[6..].to_string();
    }
    let t = t.trim().trim_matches('\'').trim_end_matches(['.', '!', '?', ':', ';', ',']).trim();
    if t.split_whitespace().count() <= TITLE_MAX_WORDS && t.chars().count() <= TITLE_MAX_CHARS {
        let cleaned = cap_words(t);
        if !cleaned.is_empty() {
            return cleaned;
        }
    }
    let fallback = cap_words(question.trim().trim_end_matches(['.', '!', '?']));
    if fallback.is_empty() {
        "Untitled".to_string()
    } else {
        fallback
    }
}

/// At most [`TITLE_MAX_WORDS`] words and [`TITLE_MAX_CHARS`] characters, cut at a word
/// boundary, without dangling words or punctuation at the end (unless nothing else is left).
fn cap_words(text: &str) -> String {
    let mut words: Vec<&str> = Vec::new();
    let mut chars = 0;
    for w in text.split_whitespace().take(TITLE_MAX_WORDS) {
        let add = w.chars().count() + usize::from(!words.is_empty());
        if chars + add > TITLE_MAX_CHARS {
            break;
        }
        chars += add;
        words.push(w);
    }
    if words.is_empty() {
        // A single word longer than the limit: cut it.
        return text.trim().chars().take(TITLE_MAX_CHARS).collect::<String>().trim().to_string();
    }
    let bare = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    while words.len() > 1 && words.last().is_some_and(|w| DANGLING.contains(&bare(w).as_str())) {
        words.pop();
    }
    let out = words.join(" ");
    let trimmed = out.trim_end_matches([',', ';', ':', '-', '—', '–', '(', '/', '&']).trim_end();
    if trimmed.is_empty() {
        out
    } else {
        trimmed.to_string()
    }
}

/// A batch's replies (in member order) under the names that tell the members apart.
pub fn named(replies: Vec<super::CallReply>, models: &[String]) -> Vec<super::CallReply> {
    let names = member_names(models);
    replies
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            if let Some(name) = names.get(i) {
                r.model = name.clone();
            }
            r
        })
        .collect()
}

/// Names that tell a panel's members apart in summaries: a model that is a member once keeps
/// its id; one that is a member twice or more is numbered in panel order (`local/smollm2 #1`,
/// `local/smollm2 #2`, …).
pub fn member_names(models: &[String]) -> Vec<String> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    models
        .iter()
        .map(|m| {
            let total = models.iter().filter(|x| *x == m).count();
            let n = seen.entry(m.as_str()).or_default();
            *n += 1;
            if total > 1 {
                format!("{m} #{n}")
            } else {
                m.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_run_past_z() {
        assert_eq!(label(0), "Response A");
        assert_eq!(label(25), "Response Z");
        assert_eq!(label(26), "Response AA");
        assert_eq!(label(27), "Response AB");
    }

    #[test]
    fn label_maps_are_deterministic_permutations() {
        let a = create_label_map(6, seed_from_run_id("run-1"));
        assert_eq!(a, create_label_map(6, seed_from_run_id("run-1")));
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..6).collect::<Vec<_>>());
        let differs = (0..20).any(|i| create_label_map(6, seed_from_run_id(&format!("r{i}"))) != a);
        assert!(differs, "different runs shuffle differently");
    }

    #[test]
    fn truncation_keeps_whole_turns() {
        let mut h = Vec::new();
        for i in 0..15 {
            h.push(ChatMessage::user(format!("q{i}")));
            h.push(ChatMessage::assistant(format!("a{i}")));
        }
        let t = truncate_history(&h, 10);
        assert_eq!(t.len(), 20);
        assert_eq!(t[0].content, "q5");
        assert_eq!(t.last().map(|m| m.content.as_str()), Some("a14"));
        // An orphan assistant message at the start is dropped.
        let odd =
            vec![ChatMessage::assistant("x"), ChatMessage::user("q"), ChatMessage::assistant("a")];
        assert_eq!(truncate_history(&odd, 10)[0].content, "q");
        assert!(truncate_history(&[], 10).is_empty());
    }

    #[test]
    fn titles_are_cleaned_and_never_empty() {
        assert_eq!(
            clean_title("\"Microservices Versus Monoliths.\"", "q"),
            "Microservices Versus Monoliths"
        );
        assert_eq!(clean_title("**Title:** Rust Memory Safety\nextra", "q"), "Rust Memory Safety");
        assert_eq!(clean_title("   ", "Why is the sky blue?"), "Why is the sky blue");
        assert_eq!(clean_title("", "  "), "Untitled");
        let long = clean_title(&"word ".repeat(40), "q");
        assert!(long.split_whitespace().count() <= TITLE_MAX_WORDS);
    }

    #[test]
    fn a_sentence_is_not_a_title_and_no_title_ends_on_a_dangling_word() {
        // What SmolLM2 answered when asked for a title: the question's answer.
        let answered = "The sky is blue because it reflects the blue light of the sun more than other colours.";
        assert_eq!(clean_title(answered, "Why is the sky blue?"), "Why is the sky blue");
        let q = "What are the main differences between PostgreSQL and MySQL for a small web app?";
        assert_eq!(clean_title("", q), "What are the main differences between PostgreSQL");
        assert_eq!(clean_title("Comparing Rust and the", "q"), "Comparing Rust");
        assert_eq!(
            clean_title("<think>a title? maybe Foo</think>Rust Error Handling", "q"),
            "Rust Error Handling"
        );
        assert_eq!(clean_title("<think>never finished", "Tabs or spaces?"), "Tabs or spaces");
        assert_eq!(clean_title("The", "q"), "The", "a lone word stays");
        let long_word = "x".repeat(200);
        assert_eq!(clean_title("", &long_word).chars().count(), TITLE_MAX_CHARS);
        for t in [answered, q, "Title: A Guide To", "Rust vs Go:"] {
            let title = clean_title(t, q);
            let last = title.split_whitespace().last().unwrap_or("").to_lowercase();
            assert!(!DANGLING.contains(&last.as_str()), "{title}");
            assert!(title.chars().count() <= TITLE_MAX_CHARS);
        }
    }

    #[test]
    fn members_of_one_model_are_numbered() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            member_names(&ids(&["local/smollm2", "sim/a", "local/smollm2", "local/smollm2"])),
            ids(&["local/smollm2 #1", "sim/a", "local/smollm2 #2", "local/smollm2 #3"])
        );
        assert_eq!(member_names(&ids(&["a", "b"])), ids(&["a", "b"]));
    }
}

/// The title of a new conversation, generated by a side call that must never delay the
/// answer. Its `title_complete` event is held until the mode's answer has gone out, so the
/// seeds' event order holds whichever finishes first; until a title arrives the conversation
/// is named after its question, and a failed run still gets that fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct TitleTracker {
    state: TitleState,
    /// The text the fallback title is made from (the question, or a content preview).
    source: String,
    answered: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum TitleState {
    NotWanted,
    Idle,
    Pending,
    Arrived(String),
    Sent,
}

/// The key of the title call.
pub const TITLE_KEY: &str = "title";

impl TitleTracker {
    /// `wanted`: the conversation is new. `source`: what a fallback title is made from.
    pub fn new(wanted: bool, source: &str) -> Self {
        TitleTracker {
            state: if wanted { TitleState::Idle } else { TitleState::NotWanted },
            source: source.to_string(),
            answered: false,
        }
    }

    /// The title call with the usual prompt ([`title_prompt`]) over the question it was made
    /// with.
    pub fn ask(&mut self, model: &str, timeout_ms: u64) -> Option<super::Effect> {
        let prompt = title_prompt(&self.source);
        self.call(model, prompt, timeout_ms)
    }

    /// The title call to start (once), if a title is wanted.
    pub fn call(&mut self, model: &str, prompt: String, timeout_ms: u64) -> Option<super::Effect> {
        if self.state != TitleState::Idle {
            return None;
        }
        self.state = TitleState::Pending;
        Some(super::Effect::Call(super::CallSpec::new(
            TITLE_KEY,
            model,
            vec![ChatMessage::user(prompt)],
            "title",
            "title",
            timeout_ms,
        )))
    }

    fn send(&mut self, title: String) -> Vec<super::Effect> {
        self.state = TitleState::Sent;
        vec![
            super::Effect::emit(
                "title_complete",
                serde_json::json!({ "data": { "title": title } }),
            ),
            super::Effect::SetTitle(title),
        ]
    }

    /// The title call answered (or failed: the fallback is used).
    pub fn on_reply(&mut self, reply: &super::CallReply) -> Vec<super::Effect> {
        let raw = reply.result.as_deref().unwrap_or("");
        let title = clean_title(raw, &self.source);
        if self.answered {
            self.send(title)
        } else {
            self.state = TitleState::Arrived(title);
            Vec::new()
        }
    }

    /// The mode's answer event has just been emitted.
    fn on_answer(&mut self) -> Vec<super::Effect> {
        self.answered = true;
        match self.state.clone() {
            TitleState::Arrived(title) => self.send(title),
            // The title call may never answer: name the conversation now, replace it later.
            TitleState::Pending | TitleState::Idle => {
                vec![super::Effect::SetTitle(clean_title("", &self.source))]
            }
            TitleState::NotWanted | TitleState::Sent => Vec::new(),
        }
    }

    /// The effects of a run's answer, once its answer event is out: the title (for a new
    /// conversation), then `Finish`.
    pub fn finish(&mut self, answer: String) -> Vec<super::Effect> {
        let mut out = self.on_answer();
        out.push(super::Effect::Finish { answer });
        out
    }

    /// The effects of a failing run: the fallback title (for a new conversation), then `Fail`.
    pub fn fail(&mut self, message: String) -> Vec<super::Effect> {
        let mut out = self.on_fail();
        out.push(super::Effect::Fail { message });
        out
    }

    /// The run is failing: a new conversation still gets a name.
    fn on_fail(&mut self) -> Vec<super::Effect> {
        match self.state {
            TitleState::NotWanted | TitleState::Sent => Vec::new(),
            _ => {
                self.state = TitleState::Sent;
                vec![super::Effect::SetTitle(clean_title("", &self.source))]
            }
        }
    }
}

/// Stage-1 answers in a shape every mode shares (`Stage1Response` of the seeds).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub model: String,
    pub response: String,
    pub response_time_ms: i64,
}

impl Answer {
    /// An answer as its row stored it (the text is the row's content).
    pub fn of_row(r: &super::StageRow) -> Self {
        Answer {
            model: r.model.clone().unwrap_or_default(),
            response: r.content.clone(),
            response_time_ms: r.response_time_ms.unwrap_or(0),
        }
    }
}

/// The participant index of a call keyed `{prefix}:{index}` (`review:2` is 2 of `review`).
pub fn indexed(key: &str, prefix: &str) -> Option<usize> {
    key.strip_prefix(prefix)?.strip_prefix(':')?.parse().ok()
}

/// Collects one reply per participant of a batch; `complete` once every slot has one.
#[derive(Debug, Clone)]
pub struct Batch {
    prefix: String,
    replies: Vec<Option<super::CallReply>>,
}

impl Batch {
    /// A batch whose calls are keyed `{prefix}:{index}` for `size` participants.
    pub fn new(prefix: &str, size: usize) -> Self {
        Batch { prefix: prefix.to_string(), replies: vec![None; size] }
    }

    pub fn key(&self, i: usize) -> String {
        format!("{}:{i}", self.prefix)
    }

    /// Records a reply of this batch; returns false for a key that is not one of its calls.
    pub fn accept(&mut self, reply: super::CallReply) -> bool {
        match indexed(&reply.key, &self.prefix).and_then(|i| self.replies.get_mut(i)) {
            Some(slot) if slot.is_none() => {
                *slot = Some(reply);
                true
            }
            _ => false,
        }
    }

    pub fn complete(&self) -> bool {
        self.replies.iter().all(Option::is_some)
    }

    /// The replies by participant index (all present once `complete`).
    pub fn take(&mut self) -> Vec<super::CallReply> {
        std::mem::take(&mut self.replies).into_iter().flatten().collect()
    }
}

/// A successful reply as an [`Answer`].
pub fn answer_of(reply: &super::CallReply) -> Option<Answer> {
    reply.result.as_ref().ok().map(|text| Answer {
        model: reply.model.clone(),
        response: text.clone(),
        response_time_ms: reply.response_time_ms as i64,
    })
}

/// Words in a text (for word-count fields).
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

// ---- failed calls and backup models ---------------------------------------------------------

/// Stage type of the row stored for each panel call that failed.
///
/// Why a row per failed call rather than a field of an existing summary row: not every stage
/// has a summary row (Council's stage 3, Vote's tiebreak, Delphi's classification), a run that
/// fails must still say which calls failed, and the row is written the moment the failure is
/// known, so a crash or a cancel keeps it like any other completed stage. It is stored at the
/// `stage_order` of the stage the call belonged to; `parsedData` is the [`FailedModel`] itself
/// and `content` the error message. Rows are generic, so this needs no schema change.
pub const CALL_FAILED: &str = "call_failed";
/// Appended to a call's key for the call to its backup model (`stage3` → `stage3:backup`), so
/// its progress events are distinct from the primary's.
pub const BACKUP_SUFFIX: &str = ":backup";

/// A panel member whose call failed after the engine's retries, or timed out: one entry of a
/// result's `failedModels` (`{model, role, stage, error: {kind, status, message}, fallbackTo?}`).
/// The title call is not a panel member and never appears here.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedModel {
    pub model: String,
    /// The call's role (`council`, `chairman`, `juror`, `foreman`, `panelist`, `skeptic`...).
    pub role: String,
    /// The call's stage, as in its progress events (`stage1`, `vote`, `round_2`...).
    pub stage: String,
    /// The same object as `call_complete`'s `error`.
    pub error: super::CallError,
    /// The backup model that was called in its place (single-model roles with a configured
    /// backup); the stage it answered for says `fallbackFrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_to: Option<String>,
}

#[derive(Debug, Clone)]
struct Tracked {
    role: String,
    stage: String,
    order: i32,
    /// For a single-model role: the same call to its backup model, made if this one fails.
    backup: Option<super::CallSpec>,
    /// For a backup call: the primary model it stands in for.
    fallback_from: Option<String>,
    /// The key the mode issued (the primary's, for a backup call).
    mode_key: String,
}

/// A reply as the mode should see it, after [`Calls::route`].
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// Under the key the mode issued, even when it came from the backup model.
    pub reply: super::CallReply,
    /// Set when the reply is the backup's: the primary model it stands in for.
    pub fallback_from: Option<String>,
}

/// Every panel call of a run: which ones failed (for `partial` and `failedModels`), and the
/// backup calls of the single-model roles. Modes pass each reply through [`Calls::route`]
/// first and register the calls they start with [`Calls::track`] or [`Calls::solo`].
#[derive(Debug, Clone, Default)]
pub struct Calls {
    tracked: std::collections::HashMap<String, Tracked>,
    /// In the order the failures were seen, with their stage order.
    failed: Vec<(i32, FailedModel)>,
}

impl Calls {
    /// The call of a single-model role, to be repeated once with the same prompt on `backup`
    /// (if any, and not the primary model itself) when it fails.
    pub fn solo(
        &mut self,
        spec: super::CallSpec,
        order: i32,
        backup: Option<&str>,
    ) -> super::Effect {
        let backup =
            backup.filter(|b| !b.is_empty() && *b != spec.model).map(|b| super::CallSpec {
                key: format!("{}{BACKUP_SUFFIX}", spec.key),
                model: b.to_string(),
                ..spec.clone()
            });
        self.tracked.insert(
            spec.key.clone(),
            Tracked {
                role: spec.role.clone(),
                stage: spec.stage.clone(),
                order,
                backup,
                fallback_from: None,
                mode_key: spec.key.clone(),
            },
        );
        super::Effect::Call(spec)
    }

    /// Registers the panel calls among `effects` that are not registered yet (the title call
    /// is left out); `order` maps a call's stage to its `stage_order`.
    pub fn track(&mut self, effects: &[super::Effect], order: impl Fn(&str) -> i32) {
        for e in effects {
            if let super::Effect::Call(spec) = e {
                if spec.key != TITLE_KEY && !self.tracked.contains_key(&spec.key) {
                    self.tracked.insert(
                        spec.key.clone(),
                        Tracked {
                            role: spec.role.clone(),
                            stage: spec.stage.clone(),
                            order: order(&spec.stage),
                            backup: None,
                            fallback_from: None,
                            mode_key: spec.key.clone(),
                        },
                    );
                }
            }
        }
    }

    /// Takes a reply before the mode sees it. A failed panel call is recorded (its
    /// `call_failed` row is among the effects returned); a failed call with a backup starts
    /// the backup (`fallback_start`, then the call) and the mode sees nothing until the
    /// backup answers. Otherwise the mode gets the reply under the key it issued.
    pub fn route(&mut self, reply: super::CallReply) -> (Vec<super::Effect>, Option<Routed>) {
        let Some(t) = self.tracked.get(&reply.key).cloned() else {
            return (Vec::new(), Some(Routed { reply, fallback_from: None }));
        };
        let mut out = Vec::new();
        if let Err(e) = &reply.result {
            let failed = FailedModel {
                model: reply.model.clone(),
                role: t.role.clone(),
                stage: t.stage.clone(),
                error: e.clone(),
                fallback_to: t.backup.as_ref().map(|b| b.model.clone()),
            };
            out.push(super::Effect::Store(
                super::StageRow::new(CALL_FAILED, t.order, e.message.clone())
                    .by(&failed.model, &failed.role)
                    .parsed(serde_json::json!(failed))
                    .took(reply.response_time_ms as i64),
            ));
            self.failed.push((t.order, failed));
            if let Some(backup) = t.backup.clone() {
                out.push(super::Effect::emit(
                    "fallback_start",
                    serde_json::json!({
                        "key": backup.key, "model": backup.model, "stage": t.stage,
                        "role": t.role, "fallbackFrom": reply.model, "error": e,
                    }),
                ));
                self.tracked.insert(
                    backup.key.clone(),
                    Tracked { backup: None, fallback_from: Some(reply.model.clone()), ..t },
                );
                out.push(super::Effect::Call(backup));
                return (out, None);
            }
        }
        let mut reply = reply;
        reply.key = t.mode_key;
        (out, Some(Routed { reply, fallback_from: t.fallback_from }))
    }

    /// The failed panel calls so far, by stage order (then as seen): the same order as their
    /// stored rows come back in.
    pub fn failed(&self) -> Vec<FailedModel> {
        let mut f = self.failed.clone();
        f.sort_by_key(|(order, _)| *order);
        f.into_iter().map(|(_, m)| m).collect()
    }

    /// Adds `partial` and `failedModels` to an object (a final stage event's payload).
    pub fn mark(&self, v: &mut serde_json::Value) {
        mark_with(v, &self.failed());
    }
}

/// `partial` is true exactly when some panel call failed, even one a backup then replaced.
fn mark_with(v: &mut serde_json::Value, failed: &[FailedModel]) {
    if let Some(o) = v.as_object_mut() {
        o.insert("partial".into(), serde_json::Value::Bool(!failed.is_empty()));
        o.insert("failedModels".into(), serde_json::json!(failed));
    }
}

/// A reply with nothing outside its reasoning trace as a failed call (`malformed`, "empty
/// reply"), for the modes whose spec counts an empty reply as a failure: it is then recorded
/// like any other failed call ([`Calls::route`]).
pub fn empty_is_failure(mut reply: super::CallReply) -> super::CallReply {
    if matches!(&reply.result, Ok(t) if super::reading::answer_text(t).trim().is_empty()) {
        reply.result =
            Err(super::CallError::new(super::CallErrorKind::Malformed, None, "empty reply"));
    }
    reply
}

/// The failure message of a single-model role: names the backup too when it was tried.
pub fn role_failed(role: &str, routed: &Routed, error: &super::CallError) -> String {
    match &routed.fallback_from {
        Some(primary) => format!(
            "The {role} ({primary}) and its backup ({}) failed: {}",
            routed.reply.model, error.message
        ),
        None => format!("The {role} ({}) failed: {}", routed.reply.model, error.message),
    }
}

/// What a run's assembler gave: its answer, or, when it and its backup failed, the server's
/// stand-in (the parts as written, in order).
pub struct Assembled {
    pub text: String,
    /// The model that wrote it; None for the stand-in.
    pub model: Option<String>,
    pub response_time_ms: Option<i64>,
    /// The assembler its backup stood in for, when the backup wrote it.
    pub fallback_from: Option<String>,
}

impl Assembled {
    /// The assembler's reply, or `stand_in()` when the call failed.
    pub fn of(routed: &Routed, stand_in: impl FnOnce() -> String) -> Assembled {
        let reply = &routed.reply;
        match &reply.result {
            Ok(t) => Assembled {
                text: super::reading::answer_text(t).trim().to_string(),
                model: Some(reply.model.clone()),
                response_time_ms: Some(reply.response_time_ms as i64),
                fallback_from: routed.fallback_from.clone(),
            },
            Err(_) => Assembled {
                text: stand_in(),
                model: None,
                response_time_ms: None,
                fallback_from: None,
            },
        }
    }

    /// The parts stand in for the assembly.
    pub fn stood_in(&self) -> bool {
        self.model.is_none()
    }

    /// What stood in for the assembly, when something did.
    pub fn fallback(&self) -> Option<Fallback> {
        self.stood_in().then_some(Fallback::Concatenated)
    }
}

/// What stood in for an assembly.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// The assembler failed: the parts as written stand in, in order.
    Concatenated,
}

impl Calls {
    /// The last effects of a run that ends in an assembly: its `assembly` row (`order`; the
    /// answer its content, `data` less `text_key` its data), `assembly_complete` (`data` with
    /// `partial` and `failedModels`), the title held back until now, then the answer.
    pub fn assembled(
        &self,
        a: Assembled,
        order: i32,
        data: serde_json::Value,
        text_key: &str,
        title: &mut TitleTracker,
    ) -> Vec<super::Effect> {
        let mut event = serde_json::json!({ "data": data });
        self.mark(&mut event);
        let mut stored = data;
        if let Some(o) = stored.as_object_mut() {
            o.remove(text_key);
        }
        let mut out = vec![
            super::Effect::Store(
                super::StageRow::new("assembly", order, &a.text)
                    .model(a.model)
                    .role("assembler")
                    .parsed(stored)
                    .took(a.response_time_ms),
            ),
            super::Effect::emit("assembly_complete", event),
        ];
        out.extend(title.finish(a.text));
        out
    }
}

#[cfg(test)]
mod calls_tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::modes::payload::failed_from_rows;
    use crate::modes::testkit::{err, ok, rows};
    use crate::modes::{CallSpec, Effect};

    fn spec(key: &str, model: &str, stage: &str) -> CallSpec {
        CallSpec::new(key, model, vec![ChatMessage::user("p")], stage, "member", 1000)
    }

    /// A participant's reply is known by its key's prefix and index, and only by both.
    #[test]
    fn a_call_key_gives_its_index_only_under_its_own_prefix() {
        assert_eq!(indexed("review:2", "review"), Some(2));
        assert_eq!(indexed("review:10", "review"), Some(10));
        for other in ["review2", "reviews:1", "review:", "review:x", "review:-1", "answer:1"] {
            assert_eq!(indexed(other, "review"), None, "{other}");
        }
    }

    #[test]
    fn a_solo_call_falls_back_once_and_the_title_is_not_a_panel_member() {
        let mut calls = Calls::default();
        let primary = spec("final", "chair", "final");
        let effect = calls.solo(primary.clone(), 7, Some("spare"));
        assert_eq!(effect, Effect::Call(primary.clone()));
        let (out, routed) = calls.route(err(&primary));
        assert!(routed.is_none(), "the mode waits for the backup");
        let backup = crate::modes::testkit::calls(&out);
        assert_eq!((backup[0].key.as_str(), backup[0].model.as_str()), ("final:backup", "spare"));
        let (out, routed) = calls.route(ok(&backup[0], "done"));
        assert!(out.is_empty());
        let routed = routed.unwrap();
        assert_eq!(routed.reply.key, "final", "the mode sees the key it issued");
        assert_eq!(routed.reply.model, "spare");
        assert_eq!(routed.fallback_from.as_deref(), Some("chair"));
        // A backup equal to the primary, or none, means no second call.
        let mut calls = Calls::default();
        calls.solo(spec("x", "chair", "s"), 1, Some("chair"));
        let (out, routed) = calls.route(err(&spec("x", "chair", "s")));
        assert!(routed.is_some() && crate::modes::testkit::calls(&out).is_empty());
        // Title failures are not recorded.
        let mut calls = Calls::default();
        let title = spec(TITLE_KEY, "chair", "title");
        calls.track(&[Effect::Call(title.clone())], |_| 0);
        let (out, _) = calls.route(err(&title));
        assert!(out.is_empty());
        let mut v = json!({});
        calls.mark(&mut v);
        assert_eq!(v, json!({ "partial": false, "failedModels": [] }));
    }

    proptest! {
        /// Whatever the order replies arrive in, the failures a mode reports live are the
        /// ones its stored rows give back, in the same order (rows come back by stage order,
        /// then as written).
        #[test]
        fn live_failures_equal_the_ones_rebuilt_from_rows(
            calls_in in proptest::collection::vec((0i32..4, any::<bool>()), 1..12),
            arrival in Just(()).prop_perturb(|_, mut rng| rng.next_u64()),
        ) {
            let mut calls = Calls::default();
            let specs: Vec<CallSpec> = calls_in
                .iter()
                .enumerate()
                .map(|(i, (order, _))| spec(&format!("s{order}:{i}"), &format!("m{i}"), &format!("stage{order}")))
                .collect();
            let effects: Vec<Effect> = specs.iter().cloned().map(Effect::Call).collect();
            calls.track(&effects, |stage| stage.trim_start_matches("stage").parse().unwrap_or(0));
            let mut order: Vec<usize> = (0..specs.len()).collect();
            SplitMix64::new(arrival).shuffle(&mut order);
            let mut stored = Vec::new();
            for i in order {
                let reply = if calls_in[i].1 { ok(&specs[i], "fine") } else { err(&specs[i]) };
                let (out, routed) = calls.route(reply);
                prop_assert!(routed.is_some());
                stored.extend(rows(&out));
            }
            // The store hands rows back by stage order, then in the order they were written.
            stored.sort_by_key(|r| r.stage_order);
            let live = calls.failed();
            prop_assert_eq!(&live, &failed_from_rows(&stored));
            prop_assert_eq!(live.len(), calls_in.iter().filter(|(_, ok)| !ok).count());
            let mut a = json!({});
            calls.mark(&mut a);
            prop_assert_eq!(&a["failedModels"], &json!(live));
            prop_assert_eq!(a["partial"].as_bool(), Some(!live.is_empty()));
        }
    }
}
