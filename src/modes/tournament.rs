//! Tournament mode (specs/11-tournament.md): every contestant answers; the answering ones, in
//! request order, are seeds 1..n of a single-elimination bracket; a judge picks the better of
//! two anonymous answers in each match (a round's matches in parallel, rounds in sequence); the
//! champion's own answer is the answer.
//!
//! The bracket and every match's presentation order and coin flip are pure functions of the
//! seeds and the run id, so a resumed run draws them the same. Each match is stored the moment
//! it is decided, so a cancelled or interrupted run keeps every finished match.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{
    empty_is_failure, mark_from_rows, title_prompt, Calls, SplitMix64, TitleTracker, TITLE_KEY,
};
use super::reading::answer_text;
use super::registry::{schema_of, short, stored_config, ModeSpec, Question, Role, SimAsk};
use super::request::ModelId;
use super::schema::{self, Asking, ReadFrom, ReplySchema};
use super::{
    request, CallReply, CallSpec, ChatMessage, Defaults, Effect, FieldError, Mode, RunContext,
    StageRow, ValidRequest,
};

const SIM_CONTESTANTS: [&str; 4] = ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon"];
const SEED_CONTESTANTS: [&str; 4] =
    ["anthropic/claude-opus-4-6", "openai/o3", "google/gemini-2.5-pro", "perplexity/sonar-pro"];
const SIM_JUDGE: &str = "sim/delta";
const SEED_JUDGE: &str = "anthropic/claude-sonnet-4";

/// Tournament's `modeConfig`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TournamentRequest {
    /// The contestants, 4 to 8, in seed order (a model listed twice is two contestants).
    #[schemars(length(min = 4, max = 8))]
    pub contestant_models: Option<Vec<ModelId>>,
    /// Judges every match; must not be a contestant.
    pub judge_model: Option<ModelId>,
    /// Per-call timeout in milliseconds.
    #[schemars(range(min = 10000, max = 300000))]
    pub timeout_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TournamentConfig {
    pub contestant_models: Vec<String>,
    pub judge_model: String,
    pub timeout_ms: u64,
}

fn validate(body: &Value, defaults: &Defaults) -> Result<ValidRequest, FieldError> {
    let question = request::question(body, "Question is required")?;
    let conversation_id = request::opt_string(body, "conversationId", "conversationId")?;
    let cfg: TournamentRequest = request::typed(&request::mode_config(body, false)?, "modeConfig")?;
    let contestant_models = request::models(
        cfg.contestant_models.as_deref(),
        "modeConfig.contestantModels",
        4..=8,
        Some("A tournament needs at least 4 contestants"),
        Some("A tournament has at most 8 contestants"),
    )?
    .unwrap_or_else(|| {
        request::ids(if defaults.offline { &SIM_CONTESTANTS } else { &SEED_CONTESTANTS })
    });
    let judge_model = request::model(cfg.judge_model.as_ref(), "modeConfig.judgeModel")?
        .unwrap_or_else(|| (if defaults.offline { SIM_JUDGE } else { SEED_JUDGE }).to_string());
    if contestant_models.contains(&judge_model) {
        return Err(FieldError::new(
            "modeConfig.judgeModel",
            format!("the judge ({judge_model}) must not be a contestant"),
        ));
    }
    let timeout_ms = request::timeout(
        cfg.timeout_ms,
        "modeConfig.timeoutMs",
        10_000..=300_000,
        defaults.stage_timeout_ms,
    )?;
    let models = request::distinct(&[&contestant_models], &[&judge_model]);
    let config = TournamentConfig { contestant_models, judge_model, timeout_ms };
    Ok(ValidRequest {
        mode: SPEC.kind(),
        question,
        conversation_id,
        config: serde_json::to_value(&config).unwrap_or(Value::Null),
        models,
    })
}

/// Tournament in the registry.
pub static SPEC: ModeSpec = ModeSpec {
    id: "tournament",
    label: "Tournament",
    description: "4-8 models answer; a judge compares them two at a time in a single-elimination bracket; the champion's own answer is the answer.",
    multi_turn: false,
    question: Question { label: "Question", required: Some("Question is required") },
    roles: &[
        Role {
            id: "contestant",
            label: "Contestants",
            field: Some("contestantModels"),
            panel: true,
            fallback: None,
            sim_default: &SIM_CONTESTANTS,
            default: &SEED_CONTESTANTS,
        },
        Role {
            id: "judge",
            label: "Judge",
            field: Some("judgeModel"),
            panel: false,
            fallback: None,
            sim_default: &[SIM_JUDGE],
            default: &[SEED_JUDGE],
        },
        Role::internal("title", "Title"),
    ],
    top_level: &[],
    schema: schema_of::<TournamentRequest>,
    validate,
    build: |config, ctx| Ok(Box::new(Tournament::new(config, ctx)?)),
    load_result,
    outcome: |r| {
        let c = r.get("champion").filter(|c| !c.is_null())?;
        let text = c.get("response").and_then(Value::as_str)?;
        Some(format!(
            "Seed {} ({}) won {} of {} rounds: {}",
            c["seed"],
            c["model"].as_str().unwrap_or(""),
            c["matchesWon"],
            c["totalRounds"],
            short(text, 80)
        ))
    },
    stages: &[("collect", "the contestants' answers")],
    report: Some(report),
    example: || {
        json!({ "mode": "tournament", "question": "What is the best way to learn a new programming language?",
                "modeConfig": { "contestantModels": ["sim/alpha", "sim/beta", "sim/gamma", "sim/epsilon", "sim/zeta"],
                                "judgeModel": "sim/delta" } })
    },
    sim: Some(sim_answer),
};

// ---- the bracket (pure) --------------------------------------------------------------------

/// One pairing of a round: `seed_b` None is a bye.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pairing {
    pub match_index: usize,
    pub seed_a: usize,
    pub seed_b: Option<usize>,
}

/// The number of rounds for `n` seeds: ⌈log2 n⌉.
pub fn total_rounds(n: usize) -> usize {
    let mut p = 1;
    let mut r = 0;
    while p < n {
        p *= 2;
        r += 1;
    }
    r
}

/// Round 1 for seeds 1..=n: adjacent pairs of the first seeds, then a bye for each of the last
/// P − n seeds (in seed order). Match indices are 1-based, byes after the matches.
pub fn first_round(n: usize) -> Vec<Pairing> {
    let p = 1usize << total_rounds(n);
    let playing = n - (p - n);
    let mut out = Vec::new();
    for i in (0..playing).step_by(2) {
        out.push(Pairing { match_index: out.len() + 1, seed_a: i + 1, seed_b: Some(i + 2) });
    }
    for s in playing + 1..=n {
        out.push(Pairing { match_index: out.len() + 1, seed_a: s, seed_b: None });
    }
    out
}

/// A later round: the field (winners in match order, then round 1's byes) paired adjacently.
pub fn next_round(field: &[usize]) -> Vec<Pairing> {
    field
        .chunks(2)
        .enumerate()
        .map(|(i, c)| Pairing { match_index: i + 1, seed_a: c[0], seed_b: c.get(1).copied() })
        .collect()
}

/// A match's draws: whether the better seed is shown as Response A, and whether the coin flip
/// (used only if the judge cannot be read) goes to the better seed.
pub fn match_draws(run_seed: u64, round: usize, match_index: usize) -> (bool, bool) {
    let mut rng = SplitMix64::new(run_seed ^ ((round as u64) << 8 | match_index as u64));
    let better_first = rng.next_u64() & 1 == 0;
    let better_wins_flip = rng.next_u64() & 1 == 0;
    (better_first, better_wins_flip)
}

// ---- prompts and reading -------------------------------------------------------------------

pub const JUDGE_HEAD: &str = "You are the judge of one match in a tournament of answers.";
pub const STRICT_HEAD: &str = "Your previous verdict could not be read.";

fn material(question: &str, a: &str, b: &str) -> String {
    format!(
        "Question: {question}\n\n=== Response A ===\n{a}\n=== End of Response A ===\n\n\
         === Response B ===\n{b}\n=== End of Response B ==="
    )
}

pub fn judge_prompt(question: &str, a: &str, b: &str) -> String {
    judge_prompt_as(question, a, b, None)
}

/// The judge's prompt ending in the spec's `REASONING:`/`WINNER:` lines, or, given the
/// judgement's schema, in its JSON (the same instructions otherwise).
pub fn judge_prompt_as(question: &str, a: &str, b: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => format!("Explain your decision in 2-3 sentences.\n\n{}", s.instruction()),
        None => "Explain your decision in 2-3 sentences, then end your reply with exactly these \
                 two lines:\nREASONING: <your reasoning>\nWINNER: Response A  (or: WINNER: \
                 Response B)"
            .to_string(),
    };
    format!(
        "{JUDGE_HEAD} Two anonymous responses to the same question follow; decide which one is \
         better.\n\n{}\n\nWeigh accuracy, completeness, clarity and practical value. {format}",
        material(question, a, b)
    )
}

pub fn strict_prompt(question: &str, a: &str, b: &str) -> String {
    strict_prompt_as(question, a, b, None)
}

/// The strict re-ask demanding the two lines, or, given the judgement's schema, its JSON.
pub fn strict_prompt_as(question: &str, a: &str, b: &str, schema: Option<&ReplySchema>) -> String {
    let format = match schema {
        Some(s) => s.instruction(),
        None => "Reply with exactly two lines and nothing else:\nREASONING: <one sentence>\n\
                 WINNER: Response A or WINNER: Response B"
            .to_string(),
    };
    format!(
        "{JUDGE_HEAD} {STRICT_HEAD} Read the two responses again.\n\n{}\n\n{format}",
        material(question, a, b)
    )
}

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
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r#"(?i)^[\s*_`"'\[(]*(?:response\s+)?([ab])[\s*_`"'\])]*[.!,;:]*[\s*_`"']*$"#)
            .unwrap_or_else(|_| unreachable!())
    });
    let c = re.captures(value.trim())?;
    Some(if c[1].eq_ignore_ascii_case("a") { Side::A } else { Side::B })
}

/// Words that make a closing paragraph's mention of a side something other than a choice.
fn hedged(text: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\b(?:not|no|neither|nor|cannot|tie|tied|equal|equally|unsure|unclear|if|whether|would|could|might)\b|n['’]t\b")
            .unwrap_or_else(|_| unreachable!())
    })
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
    let from_json = schema.read(reply).and_then(|v| {
        let winner = match v.get("winner")?.as_str()? {
            w if w == Side::A.label() => Side::A,
            w if w == Side::B.label() => Side::B,
            _ => return None,
        };
        let reasoning = v.get(schema::REASONING)?.as_str()?.trim().to_string();
        Some(Verdict { winner: Some(winner), reasoning })
    });
    match from_json {
        Some(v) => (v, Some(ReadFrom::Json)),
        None => {
            let v = parse_verdict(reply);
            let from = v.winner.map(|_| ReadFrom::Text);
            (v, from)
        }
    }
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
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?i)\bresponse\s+([ab])\b[*_]*\s+(?:(?:is|was|seems|looks|appears|remains)\s+(?:(?:the|a|clearly|much|slightly|far|overall|somewhat|definitely)\s+){0,3}(?:clear\s+|overall\s+)?(?:winner|better|stronger|best|superior|preferable|preferred|more\s+(?:accurate|complete|helpful|useful|practical|thorough)|the\s+one\s+i\s+(?:prefer|choose|pick))\b|(?:wins|outperforms|edges\s+out|comes\s+out\s+ahead)\b)|\b(?:prefer|choose|chose|pick|picked|select|selected|favou?r|go\s+with|recommend)\s+(?:\w+\s+)?response\s+([ab])\b",
        )
        .unwrap_or_else(|_| unreachable!())
    });
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
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)\bresponse\s+([ab])\b").unwrap_or_else(|_| unreachable!())
    });
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

// ---- the state machine ---------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Contestant {
    pub seed: usize,
    pub model: String,
    pub response: String,
    pub response_time_ms: Option<i64>,
}

/// A match in flight.
#[derive(Debug, Clone)]
struct Live {
    match_index: usize,
    shown_a: usize,
    shown_b: usize,
    better_wins_flip: bool,
    first_reply: Option<String>,
    done: bool,
}

pub struct Tournament {
    config: TournamentConfig,
    ctx: RunContext,
    /// Replies of the collect stage by request position.
    answers: Vec<Option<CallReply>>,
    contestants: Vec<Contestant>,
    byes: Vec<usize>,
    rounds_total: usize,
    round: usize,
    live: Vec<Live>,
    /// Decided matches by round (the `matchup_complete` data plus `round`, `matchIndex`).
    decided: Vec<Vec<Value>>,
    /// Decided by a failed judge call, in the current round.
    call_failures: usize,
    ended: bool,
    /// The judgement's reply schema (one for every match and re-ask of the run).
    judgement: Arc<ReplySchema>,
    title: TitleTracker,
    calls: Calls,
}

fn stage_order(stage: &str) -> i32 {
    match stage.strip_prefix("round_").and_then(|n| n.parse::<i32>().ok()) {
        Some(r) => r + 1,
        None => 0,
    }
}

impl Tournament {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: TournamentConfig = stored_config("tournament", config)?;
        if !(2..=8).contains(&config.contestant_models.len()) {
            return Err("the stored tournament configuration has no 2 to 8 contestants".into());
        }
        let title = TitleTracker::new(ctx.new_conversation, &ctx.question);
        let n = config.contestant_models.len();
        Ok(Tournament {
            config,
            ctx,
            answers: vec![None; n],
            contestants: Vec::new(),
            byes: Vec::new(),
            rounds_total: 0,
            round: 0,
            live: Vec::new(),
            decided: Vec::new(),
            call_failures: 0,
            ended: false,
            judgement: judgement_schema(),
            title,
            calls: Calls::default(),
        })
    }

    fn contestant(&self, seed: usize) -> &Contestant {
        &self.contestants[seed - 1]
    }

    fn on_answer(&mut self, i: usize, reply: CallReply) -> Vec<Effect> {
        if i >= self.answers.len() || self.answers[i].is_some() {
            return Vec::new();
        }
        self.answers[i] = Some(reply);
        if self.answers.iter().any(Option::is_none) {
            return Vec::new();
        }
        self.seed()
    }

    /// Every contestant has answered (or failed): seeds, rows and round 1.
    fn seed(&mut self) -> Vec<Effect> {
        let mut out = Vec::new();
        for (i, r) in self.answers.iter().enumerate() {
            let Some(r) = r else { continue };
            let Ok(text) = &r.result else { continue };
            let c = Contestant {
                seed: self.contestants.len() + 1,
                model: self.config.contestant_models[i].clone(),
                response: answer_text(text).trim().to_string(),
                response_time_ms: Some(r.response_time_ms as i64),
            };
            out.push(Effect::Store(StageRow {
                stage_type: "collect".into(),
                stage_order: 0,
                model: Some(c.model.clone()),
                role: Some("contestant".into()),
                content: c.response.clone(),
                parsed_data: Some(json!({ "seed": c.seed, "contestant": i + 1 })),
                response_time_ms: c.response_time_ms,
            }));
            self.contestants.push(c);
        }
        out.push(Effect::emit("collect_complete", json!({ "data": self.contestants })));
        let n = self.contestants.len();
        if n < 2 {
            self.ended = true;
            out.extend(self.title.fail(format!(
                "Only {n} of {} contestants answered; a tournament needs at least 2.",
                self.answers.len()
            )));
            return out;
        }
        self.rounds_total = total_rounds(n);
        let first = first_round(n);
        self.byes = first.iter().filter(|p| p.seed_b.is_none()).map(|p| p.seed_a).collect();
        let bracket = json!({
            "totalRounds": self.rounds_total,
            "contestants": self.contestants.iter().map(|c| json!({ "seed": c.seed, "model": c.model })).collect::<Vec<_>>(),
            "byes": self.byes,
            "matchups": first.iter().map(|p| json!({ "matchIndex": p.match_index, "seedA": p.seed_a, "seedB": p.seed_b })).collect::<Vec<_>>(),
        });
        out.push(Effect::Store(StageRow::computed("bracket_seed", 1, bracket.clone())));
        out.push(Effect::emit("bracket_seeded", json!({ "data": bracket })));
        for p in first.iter().filter(|p| p.seed_b.is_none()) {
            out.push(Effect::Store(StageRow {
                stage_type: format!("round_1_match_{}", p.match_index),
                stage_order: 2,
                model: None,
                role: None,
                content: String::new(),
                parsed_data: Some(json!({ "isBye": true, "seed": p.seed_a, "round": 1, "matchIndex": p.match_index })),
                response_time_ms: None,
            }));
        }
        let played: Vec<Pairing> = first.into_iter().filter(|p| p.seed_b.is_some()).collect();
        out.extend(self.start_round(1, &played));
        out
    }

    fn start_round(&mut self, round: usize, pairings: &[Pairing]) -> Vec<Effect> {
        self.round = round;
        self.call_failures = 0;
        self.decided.push(Vec::new());
        self.live = pairings
            .iter()
            .map(|p| {
                let (a, b) = (p.seed_a, p.seed_b.unwrap_or(p.seed_a));
                let (better, worse) = (a.min(b), a.max(b));
                let (better_first, better_wins_flip) =
                    match_draws(self.ctx.seed, round, p.match_index);
                let (shown_a, shown_b) =
                    if better_first { (better, worse) } else { (worse, better) };
                Live {
                    match_index: p.match_index,
                    shown_a,
                    shown_b,
                    better_wins_flip,
                    first_reply: None,
                    done: false,
                }
            })
            .collect();
        let matchups: Vec<Value> = self
            .live
            .iter()
            .map(|m| json!({ "matchIndex": m.match_index, "shownAsA": m.shown_a, "shownAsB": m.shown_b }))
            .collect();
        let mut out = vec![Effect::emit(
            "round_start",
            json!({ "round": round, "data": { "matchups": matchups } }),
        )];
        for m in self.live.clone() {
            out.push(self.judge_call(&m, false));
        }
        out
    }

    fn judge_call(&self, m: &Live, strict: bool) -> Effect {
        let a = &self.contestant(m.shown_a).response;
        let b = &self.contestant(m.shown_b).response;
        let q = &self.ctx.question;
        let asking = Asking::new(self.judgement.clone(), |json| {
            if strict {
                strict_prompt_as(q, a, b, json)
            } else {
                judge_prompt_as(q, a, b, json)
            }
        });
        let key = if strict {
            format!("r{}m{}:retry", self.round, m.match_index)
        } else {
            format!("r{}m{}", self.round, m.match_index)
        };
        let call = asking.call(
            &self.ctx,
            key,
            &self.config.judge_model,
            &format!("round_{}", self.round),
            "judge",
            self.config.timeout_ms,
        );
        Effect::Call(call.quoting([
            (Side::A.label().to_string(), a.clone()),
            (Side::B.label().to_string(), b.clone()),
        ]))
    }

    fn on_judge(&mut self, idx: usize, strict: bool, reply: CallReply) -> Vec<Effect> {
        let m = self.live[idx].clone();
        if m.done || (strict != m.first_reply.is_some()) {
            return Vec::new();
        }
        let better = m.shown_a.min(m.shown_b);
        let ms = reply.response_time_ms as i64;
        let mut read_from = None;
        let (winner, reasoning, decided_by, content) = match &reply.result {
            Err(e) => {
                self.call_failures += 1;
                (
                    better,
                    format!("The judge's call failed ({}); the better seed advances.", e.message),
                    "default_seed",
                    e.message.clone(),
                )
            }
            Ok(text) => {
                let (v, from) = read_verdict_reply(text, &self.judgement);
                match (v.winner, strict) {
                    (Some(side), _) => {
                        read_from = from;
                        let seed = if side == Side::A { m.shown_a } else { m.shown_b };
                        (
                            seed,
                            v.reasoning,
                            if strict { "judge_retry" } else { "judge" },
                            text.clone(),
                        )
                    }
                    (None, false) => {
                        self.live[idx].first_reply = Some(text.clone());
                        return vec![self.judge_call(&self.live[idx].clone(), true)];
                    }
                    (None, true) => {
                        let worse = m.shown_a.max(m.shown_b);
                        let seed = if m.better_wins_flip { better } else { worse };
                        (
                            seed,
                            "The judge's verdict could not be read, even when asked again; a coin flip decided.".into(),
                            "coin_flip",
                            text.clone(),
                        )
                    }
                }
            }
        };
        self.live[idx].done = true;
        let loser = if winner == m.shown_a { m.shown_b } else { m.shown_a };
        let label = if winner == m.shown_a { "Response A" } else { "Response B" };
        let mut data = json!({
            "shownAsA": m.shown_a, "shownAsB": m.shown_b, "winnerLabel": label,
            "winnerSeed": winner, "winnerModel": self.contestant(winner).model,
            "loserSeed": loser, "loserModel": self.contestant(loser).model,
            "reasoning": reasoning, "decidedBy": decided_by, "responseTimeMs": ms,
        });
        // Only a judge's reply that stated a side was read (a coin flip or a failed call
        // decided the others).
        if let Some(from) = read_from {
            data["readFrom"] = json!(from);
        }
        let mut parsed = data.clone();
        parsed["round"] = json!(self.round);
        parsed["matchIndex"] = json!(m.match_index);
        if let Some(f) = &m.first_reply {
            parsed["firstReply"] = json!(f);
        }
        let mut stored = parsed.clone();
        if let Some(o) = stored.as_object_mut() {
            o.remove("firstReply");
        }
        self.decided[self.round - 1].push(stored);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: format!("round_{}_match_{}", self.round, m.match_index),
                stage_order: self.round as i32 + 1,
                model: Some(reply.model.clone()),
                role: Some("judge".into()),
                content,
                parsed_data: Some(parsed),
                response_time_ms: Some(ms),
            }),
            Effect::emit(
                "matchup_complete",
                json!({ "round": self.round, "matchIndex": m.match_index, "data": data }),
            ),
        ];
        if self.live.iter().all(|l| l.done) {
            out.extend(self.end_round());
        }
        out
    }

    fn end_round(&mut self) -> Vec<Effect> {
        let round = self.round;
        let mut matches = self.decided[round - 1].clone();
        matches.sort_by_key(|m| m["matchIndex"].as_u64());
        let winners: Vec<usize> =
            matches.iter().filter_map(|m| m["winnerSeed"].as_u64()).map(|s| s as usize).collect();
        let eliminated: Vec<usize> =
            matches.iter().filter_map(|m| m["loserSeed"].as_u64()).map(|s| s as usize).collect();
        let mut out = vec![Effect::emit(
            "round_complete",
            json!({ "round": round, "data": { "winners": winners, "eliminated": eliminated } }),
        )];
        if self.call_failures == self.live.len() {
            self.ended = true;
            out.extend(self.title.fail(format!(
                "The judge ({}) failed every match of round {round}; the bracket so far is kept.",
                self.config.judge_model
            )));
            return out;
        }
        let mut field = winners;
        if round == 1 {
            field.extend(self.byes.iter().copied());
        }
        if field.len() == 1 {
            out.extend(self.declare(field[0]));
            return out;
        }
        let next = next_round(&field);
        out.extend(self.start_round(round + 1, &next));
        out
    }

    fn declare(&mut self, seed: usize) -> Vec<Effect> {
        self.ended = true;
        let c = self.contestant(seed).clone();
        let all: Vec<Value> = self.decided.iter().flatten().cloned().collect();
        let data = champion(&c, &all, &self.byes, self.rounds_total, &self.contestants);
        let mut event = json!({ "data": data });
        self.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(StageRow {
                stage_type: "winner".into(),
                stage_order: 99,
                model: Some(c.model.clone()),
                role: Some("contestant".into()),
                content: c.response.clone(),
                parsed_data: Some(data),
                response_time_ms: c.response_time_ms,
            }),
            Effect::emit("winner_declared", event),
        ];
        out.extend(self.title.on_answer());
        out.push(Effect::Finish { answer: c.response });
        out
    }
}

/// `winner_declared`'s data for the champion `c`, from every decided match.
fn champion(
    c: &Contestant,
    matches: &[Value],
    byes: &[usize],
    total: usize,
    contestants: &[Contestant],
) -> Value {
    let mut path: Vec<Value> = Vec::new();
    if byes.contains(&c.seed) {
        path.push(
            json!({ "round": 1, "opponentSeed": null, "opponentModel": null, "result": "bye" }),
        );
    }
    let mut won: Vec<&Value> =
        matches.iter().filter(|m| m["winnerSeed"].as_u64() == Some(c.seed as u64)).collect();
    won.sort_by_key(|m| m["round"].as_u64());
    for m in &won {
        let opp = m["loserSeed"].as_u64().unwrap_or(0) as usize;
        let model = contestants.get(opp.wrapping_sub(1)).map(|o| o.model.clone());
        path.push(json!({ "round": m["round"], "opponentSeed": opp, "opponentModel": model, "result": "won" }));
    }
    json!({ "seed": c.seed, "model": c.model, "response": c.response, "bracketPath": path,
            "matchesWon": won.len(), "totalRounds": total })
}

impl Mode for Tournament {
    fn start(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::emit(
                "tournament_start",
                json!({ "conversationId": self.ctx.conversation_id, "messageId": self.ctx.message_id,
                        "mode": "tournament",
                        "config": { "contestantModels": self.config.contestant_models,
                                    "judgeModel": self.config.judge_model } }),
            ),
            Effect::emit("collect_start", json!({})),
        ];
        for (i, m) in self.config.contestant_models.iter().enumerate() {
            out.push(Effect::Call(CallSpec::new(
                format!("answer:{i}"),
                m,
                vec![ChatMessage::user(self.ctx.question.clone())],
                "collect",
                "contestant",
                self.config.timeout_ms,
            )));
        }
        let judge = self.config.judge_model.clone();
        out.extend(self.title.call(
            &judge,
            title_prompt(&self.ctx.question),
            self.config.timeout_ms,
        ));
        self.calls.track(&out, stage_order);
        out
    }

    fn on_reply(&mut self, reply: CallReply) -> Vec<Effect> {
        if reply.key == TITLE_KEY {
            return self.title.on_reply(&reply);
        }
        if self.ended {
            return Vec::new();
        }
        let reply = if reply.key.starts_with("answer:") { empty_is_failure(reply) } else { reply };
        let (mut out, routed) = self.calls.route(reply);
        let Some(routed) = routed else { return out };
        let key = routed.reply.key.clone();
        if let Some(i) = key.strip_prefix("answer:").and_then(|i| i.parse().ok()) {
            out.extend(self.on_answer(i, routed.reply));
        } else if let Some(rest) = key.strip_prefix(&format!("r{}m", self.round)) {
            let (m, strict) = match rest.strip_suffix(":retry") {
                Some(m) => (m, true),
                None => (rest, false),
            };
            if let Some(idx) = m
                .parse::<usize>()
                .ok()
                .and_then(|mi| self.live.iter().position(|l| l.match_index == mi))
            {
                out.extend(self.on_judge(idx, strict, routed.reply));
            }
        }
        self.calls.track(&out, stage_order);
        out
    }
}

/// `{contestants, bracket, rounds: [{round, matches}], champion, partial, failedModels}` from
/// the stored rows.
pub fn load_result(rows: &[StageRow]) -> Value {
    let mut contestants: Vec<Contestant> = rows
        .iter()
        .filter(|r| r.stage_type == "collect")
        .filter_map(|r| {
            let seed = r.parsed_data.as_ref()?.get("seed")?.as_u64()? as usize;
            Some(Contestant {
                seed,
                model: r.model.clone()?,
                response: r.content.clone(),
                response_time_ms: r.response_time_ms,
            })
        })
        .collect();
    contestants.sort_by_key(|c| c.seed);
    let bracket = rows
        .iter()
        .find(|r| r.stage_type == "bracket_seed")
        .and_then(|r| r.parsed_data.clone())
        .unwrap_or(Value::Null);
    let mut matches: Vec<Value> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("round_") && r.stage_type.contains("_match_"))
        .filter_map(|r| r.parsed_data.clone())
        .filter(|p| p.get("isBye") != Some(&Value::Bool(true)))
        .map(|mut p| {
            if let Some(o) = p.as_object_mut() {
                o.remove("firstReply");
            }
            p
        })
        .collect();
    matches.sort_by_key(|m| (m["round"].as_u64(), m["matchIndex"].as_u64()));
    let mut rounds: Vec<Value> = Vec::new();
    for m in &matches {
        let r = m["round"].as_u64().unwrap_or(0);
        match rounds.last_mut() {
            Some(last) if last["round"].as_u64() == Some(r) => {
                if let Some(a) = last["matches"].as_array_mut() {
                    a.push(m.clone());
                }
            }
            _ => rounds.push(json!({ "round": r, "matches": [m] })),
        }
    }
    let champion = rows
        .iter()
        .find(|r| r.stage_type == "winner")
        .and_then(|r| r.parsed_data.clone())
        .unwrap_or(Value::Null);
    let mut result = json!({ "contestants": contestants, "bracket": bracket, "rounds": rounds,
                             "champion": champion });
    mark_from_rows(&mut result, rows);
    result
}

// ---- sim answers ---------------------------------------------------------------------------

fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    if !p.starts_with(JUDGE_HEAD) {
        return None;
    }
    let mut rng = SplitMix64::new(ask.seed);
    let side = if rng.below(2) == 0 { "A" } else { "B" };
    let other = if side == "A" { "B" } else { "A" };
    match ask.schema {
        // Asked for the judgement's JSON: the same verdict, as JSON that fits.
        Some(s) if s.name == JUDGEMENT_SCHEMA => {
            let reasoning: String = format!(
                "{}Response {side} is more accurate, more complete and more useful in practice \
                 than Response {other}. [simulated judgement by {}]",
                ask.hostile_paragraph(),
                ask.model
            )
            .chars()
            .take(schema::REASONING_MAX_CHARS)
            .collect();
            return Some(
                json!({ "reasoning": reasoning, "winner": format!("Response {side}") }).to_string(),
            );
        }
        Some(_) => return None,
        None => {}
    }
    if p.contains(STRICT_HEAD) {
        return Some(format!(
            "REASONING: {}Response {side} is the more complete and practical of the two.\nWINNER: Response {side}",
            ask.hostile_paragraph()
        ));
    }
    let prose = format!(
        "Response {side} is more accurate and covers the question more completely, with \
         concrete steps a reader can follow. Response {other} is clear but leaves out practical \
         detail. [simulated judgement by {}]",
        ask.model
    );
    if ask.malformed {
        return Some(match rng.below(3) {
            // No verdict line: only the closing paragraph names a side.
            0 => format!("{prose}\n\nOverall I prefer Response {side}."),
            // A table and an echoed template: unreadable, the judge is asked again.
            1 => format!(
                "| Criterion | A | B |\n|---|---|---|\n| Accuracy | 4 | 3 |\n\n{prose}\n\nWINNER: Response A|B"
            ),
            _ => format!("**Reasoning:** {}{prose}\n\n**Winner:** {side}.", ask.hostile_paragraph()),
        });
    }
    Some(format!(
        "{prose}\n\nREASONING: {}Response {side} is more accurate, more complete and more useful in practice.\nWINNER: Response {side}",
        ask.hostile_paragraph()
    ))
}

#[cfg(test)]
#[path = "tournament_tests.rs"]
mod tests;

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the champion, then the bracket round by round (each
/// match, who won and what decided it).
pub fn report(result: &Value) -> String {
    use super::report::{count, table};
    let seed = |n: &Value, model: &Value| match model.as_str() {
        Some(m) => format!("seed {n} ({m})"),
        None => format!("seed {n}"),
    };
    let model_of = |n: &Value| {
        result["contestants"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["seed"] == *n))
            .map_or(Value::Null, |c| c["model"].clone())
    };
    let mut out = String::new();
    let champ = &result["champion"];
    if !champ.is_null() {
        out.push_str(&format!(
            "**Champion:** {}, {} won\n\n",
            seed(&champ["seed"], &champ["model"]),
            count(champ["matchesWon"].as_u64().unwrap_or(0), "match", "matches")
        ));
    }
    let byes: Vec<String> = result["bracket"]["byes"]
        .as_array()
        .map(|b| b.iter().map(|s| seed(s, &model_of(s))).collect())
        .unwrap_or_default();
    if !byes.is_empty() {
        out.push_str(&format!("Through to round 2 without a match: {}.\n\n", byes.join(", ")));
    }
    for r in result["rounds"].as_array().cloned().unwrap_or_default() {
        out.push_str(&format!("**Round {}**\n\n", r["round"]));
        let rows: Vec<Vec<String>> = r["matches"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|m| {
                let decided = match m["decidedBy"].as_str() {
                    Some("judge") => "the judge",
                    Some("judge_retry") => "the judge, asked again",
                    Some("coin_flip") => "a coin flip (the judge's verdict could not be read)",
                    Some("default_seed") => "the better seed (the judge's call failed)",
                    _ => "—",
                };
                vec![
                    m["matchIndex"].to_string(),
                    seed(&m["shownAsA"], &model_of(&m["shownAsA"])),
                    seed(&m["shownAsB"], &model_of(&m["shownAsB"])),
                    seed(&m["winnerSeed"], &m["winnerModel"]),
                    decided.to_string(),
                    m["reasoning"].as_str().unwrap_or("").to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &["match", "shown as Response A", "shown as Response B", "winner", "decided by", "why"],
            &rows,
            &[0],
        ));
        out.push('\n');
    }
    out
}
