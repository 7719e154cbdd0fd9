//! Tournament's state machine: the bracket (pure functions of the seeds and the run id), the
//! contestants' answers, the matches round by round and the champion.

use super::*;

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

// ---- the state machine ---------------------------------------------------------------------

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
    decided: Vec<Vec<Match>>,
    /// Decided by a failed judge call, in the current round.
    call_failures: usize,
    ended: bool,
    /// The judgement's reply schema (one for every match and re-ask of the run).
    judgement: Arc<ReplySchema>,
    kit: Kit,
}

impl Tournament {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: TournamentConfig = stored_config("tournament", config)?;
        if !(2..=8).contains(&config.contestant_models.len()) {
            return Err("the stored tournament configuration has no 2 to 8 contestants".into());
        }
        let kit = Kit::new(&ctx, config.timeout_ms);
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
            kit,
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
            out.push(Effect::Store(
                StageRow::new("collect", 0, c.response.clone())
                    .by(&c.model, "contestant")
                    .data(&Seeding { seed: c.seed, contestant: i + 1 })
                    .took(c.response_time_ms),
            ));
            self.contestants.push(c);
        }
        out.push(Effect::event("collect_complete", &Data { data: &self.contestants }));
        let n = self.contestants.len();
        if n < 2 {
            self.ended = true;
            out.extend(self.kit.title.fail(format!(
                "Only {n} of {} contestants answered; a tournament needs at least 2.",
                self.answers.len()
            )));
            return out;
        }
        self.rounds_total = total_rounds(n);
        let first = first_round(n);
        self.byes = first.iter().filter(|p| p.seed_b.is_none()).map(|p| p.seed_a).collect();
        let bracket = Bracket {
            total_rounds: self.rounds_total,
            contestants: self
                .contestants
                .iter()
                .map(|c| Seeded { seed: c.seed, model: c.model.clone() })
                .collect(),
            byes: self.byes.clone(),
            matchups: first
                .iter()
                .map(|p| Matchup { match_index: p.match_index, seed_a: p.seed_a, seed_b: p.seed_b })
                .collect(),
        };
        out.push(Effect::Store(StageRow::computed("bracket_seed", 1, to_json(&bracket))));
        out.push(Effect::event("bracket_seeded", &Data { data: &bracket }));
        for p in first.iter().filter(|p| p.seed_b.is_none()) {
            out.push(Effect::Store(
                StageRow::new(format!("round_1_match_{}", p.match_index), 2, String::new()).data(
                    &ByeRow { is_bye: true, seed: p.seed_a, round: 1, match_index: p.match_index },
                ),
            ));
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
        let matchups = self
            .live
            .iter()
            .map(|m| Shown {
                match_index: m.match_index,
                shown_as_a: m.shown_a,
                shown_as_b: m.shown_b,
            })
            .collect();
        let mut out =
            vec![Effect::event("round_start", &RoundEvent { round, data: Matchups { matchups } })];
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
                strict_prompt(q, a, b, json)
            } else {
                judge_prompt(q, a, b, json)
            }
        });
        let key = if strict {
            format!("r{}m{}:retry", self.round, m.match_index)
        } else {
            format!("r{}m{}", self.round, m.match_index)
        };
        let call = asking.call(
            &self.kit,
            key,
            &self.config.judge_model,
            &format!("round_{}", self.round),
            "judge",
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
                    DecidedBy::DefaultSeed,
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
                            if strict { DecidedBy::JudgeRetry } else { DecidedBy::Judge },
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
                            DecidedBy::CoinFlip,
                            text.clone(),
                        )
                    }
                }
            }
        };
        self.live[idx].done = true;
        let loser = if winner == m.shown_a { m.shown_b } else { m.shown_a };
        let label = if winner == m.shown_a { "Response A" } else { "Response B" };
        let outcome = MatchOutcome {
            shown_as_a: m.shown_a,
            shown_as_b: m.shown_b,
            winner_label: label.to_string(),
            winner_seed: winner,
            winner_model: self.contestant(winner).model.clone(),
            loser_seed: loser,
            loser_model: self.contestant(loser).model.clone(),
            reasoning,
            decided_by,
            response_time_ms: ms,
            // Only a judge's reply that stated a side was read (a coin flip or a failed call
            // decided the others).
            read_from,
        };
        let parsed = Match {
            outcome,
            round: self.round,
            match_index: m.match_index,
            first_reply: m.first_reply.clone(),
        };
        self.decided[self.round - 1].push(Match { first_reply: None, ..parsed.clone() });
        let mut out = vec![
            Effect::Store(
                StageRow::new(
                    format!("round_{}_match_{}", self.round, m.match_index),
                    self.round as i32 + 1,
                    content,
                )
                .by(&reply.model, "judge")
                .data(&parsed)
                .took(ms),
            ),
            Effect::event(
                "matchup_complete",
                &MatchEvent {
                    round: self.round,
                    match_index: m.match_index,
                    data: &parsed.outcome,
                },
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
        matches.sort_by_key(|m| m.match_index);
        let winners: Vec<usize> = matches.iter().map(|m| m.outcome.winner_seed).collect();
        let eliminated: Vec<usize> = matches.iter().map(|m| m.outcome.loser_seed).collect();
        let mut out = vec![Effect::event(
            "round_complete",
            &RoundEvent { round, data: RoundDone { winners: winners.clone(), eliminated } },
        )];
        if self.call_failures == self.live.len() {
            self.ended = true;
            out.extend(self.kit.title.fail(format!(
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
        let all: Vec<Match> = self.decided.iter().flatten().cloned().collect();
        let data = champion(&c, &all, &self.byes, self.rounds_total, &self.contestants);
        let mut event = to_json(&Data { data: &data });
        self.kit.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(
                StageRow::new("winner", 99, c.response.clone())
                    .by(&c.model, "contestant")
                    .data(&data)
                    .took(c.response_time_ms),
            ),
            Effect::emit("winner_declared", event),
        ];
        out.extend(self.kit.title.finish(c.response));
        out
    }
}

/// `winner_declared`'s data for the champion `c`, from every decided match.
fn champion(
    c: &Contestant,
    matches: &[Match],
    byes: &[usize],
    total: usize,
    contestants: &[Contestant],
) -> Champion {
    let mut path: Vec<PathStep> = Vec::new();
    if byes.contains(&c.seed) {
        path.push(PathStep {
            round: 1,
            opponent_seed: None,
            opponent_model: None,
            result: PathResult::Bye,
        });
    }
    let mut won: Vec<&Match> = matches.iter().filter(|m| m.outcome.winner_seed == c.seed).collect();
    won.sort_by_key(|m| m.round);
    for m in &won {
        let opp = m.outcome.loser_seed;
        let model = contestants.get(opp.wrapping_sub(1)).map(|o| o.model.clone());
        path.push(PathStep {
            round: m.round,
            opponent_seed: Some(opp),
            opponent_model: model,
            result: PathResult::Won,
        });
    }
    Champion {
        seed: c.seed,
        model: c.model.clone(),
        response: c.response.clone(),
        bracket_path: path,
        matches_won: won.len(),
        total_rounds: total,
    }
}

impl Staged for Tournament {
    fn stage_order(stage: &str) -> i32 {
        match stage.strip_prefix("round_").and_then(|n| n.parse::<i32>().ok()) {
            Some(r) => r + 1,
            None => 0,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event(
                "tournament_start",
                &RunStart::new(
                    &self.ctx,
                    "tournament",
                    Start {
                        config: StartConfig {
                            contestant_models: &self.config.contestant_models,
                            judge_model: &self.config.judge_model,
                        },
                    },
                ),
            ),
            Effect::event("collect_start", &serde_json::Map::new()),
        ];
        for (i, m) in self.config.contestant_models.iter().enumerate() {
            out.push(Effect::Call(self.kit.ask(
                format!("answer:{i}"),
                m,
                self.ctx.question.clone(),
                "collect",
                "contestant",
            )));
        }
        out.extend(self.kit.ask_title(&self.config.judge_model));
        out
    }

    /// Only a contestant's empty answer is a failed call (a judge's is read as no verdict).
    fn screen(&mut self, reply: CallReply) -> CallReply {
        if reply.key.starts_with("answer:") {
            empty_is_failure(reply)
        } else {
            reply
        }
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        // Every call has answered once the run has ended (a call answers once).
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        let key = routed.reply.key.clone();
        if let Some(i) = indexed(&key, "answer") {
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
        out
    }
}
