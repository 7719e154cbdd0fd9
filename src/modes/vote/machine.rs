//! Vote's state machine: the answers, the anonymous vote and the chairman's tiebreak.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Voting,
    Tiebreak,
    Done,
}

pub struct Vote {
    config: VoteConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    answers: Vec<Answer>,
    /// label -> index into `answers`
    labels: BTreeMap<String, usize>,
    ballots: Vec<Ballot>,
    tally: Option<Tally>,
    /// The vote's and the tiebreak's reply schemas, once their labels are known.
    ballot_schema: Option<Arc<ReplySchema>>,
    tiebreak_schema: Option<Arc<ReplySchema>>,
    kit: Kit,
}

impl Vote {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: VoteConfig = stored_config("vote", config)?;
        let kit = Kit::new(&ctx, config.timeout_ms);
        let n = config.models.len();
        Ok(Vote {
            config,
            ctx,
            phase: Phase::Answering,
            batch: Batch::new("stage1", n),
            answers: Vec::new(),
            labels: BTreeMap::new(),
            ballots: Vec::new(),
            tally: None,
            ballot_schema: None,
            tiebreak_schema: None,
            kit,
        })
    }

    fn fail(&mut self, message: &str) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message.to_string())
    }

    fn label_to_model(&self) -> BTreeMap<String, String> {
        self.labels.iter().map(|(l, i)| (l.clone(), self.answers[*i].model.clone())).collect()
    }

    fn on_answers(&mut self) -> Vec<Effect> {
        self.answers =
            named(self.batch.take(), &self.config.models).iter().filter_map(answer_of).collect();
        if self.answers.len() < 2 {
            return self.fail("Fewer than 2 models answered; a vote needs at least 2 responses.");
        }
        let mut out: Vec<Effect> = self
            .answers
            .iter()
            .map(|a| {
                Effect::Store(
                    StageRow::new("initial_answer", 1, a.response.clone())
                        .by(&a.model, "voter")
                        .took(a.response_time_ms),
                )
            })
            .collect();
        out.push(Effect::event("stage1_complete", &Data { data: &self.answers }));
        let order = create_label_map(self.answers.len(), self.ctx.seed);
        self.labels = order.iter().enumerate().map(|(k, &i)| (label(k), i)).collect();
        let map = self.label_to_model();
        out.push(Effect::Store(StageRow::computed("label_map", 0, to_json(&map))));
        out.push(Effect::empty("vote_round_start"));
        let labeled: Vec<(String, String)> = self
            .labels
            .iter()
            .map(|(l, i)| (l.clone(), answer_text(&self.answers[*i].response).into_owned()))
            .collect();
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        let asking = Asking::new(vote_schema("vote_ballot", &labels), |json| {
            vote_prompt(&self.ctx.question, &labeled, json)
        });
        self.batch = Batch::new("vote", self.config.models.len());
        for (i, model) in self.config.models.iter().enumerate() {
            let call = asking.call(&self.kit, self.batch.key(i), model, "vote", "voter");
            out.push(Effect::Call(call.quoting(labeled.clone())));
        }
        self.ballot_schema = Some(asking.schema);
        out.extend(self.kit.ask_title(&self.config.chairman_model));
        self.phase = Phase::Voting;
        out
    }

    fn on_votes(&mut self) -> Vec<Effect> {
        let labels: Vec<String> = self.labels.keys().cloned().collect();
        let schema =
            self.ballot_schema.clone().unwrap_or_else(|| vote_schema("vote_ballot", &labels));
        self.ballots = cast(named(self.batch.take(), &self.config.models), &labels, &schema);
        let mut out = ballot_rows(&self.ballots, "vote", 2);
        let (round, t) =
            Round::new(&self.ballots, LabelToModel { label_to_model: self.label_to_model() });
        out.push(Effect::Store(StageRow::computed("vote_tally", 3, to_json(&t))));
        out.push(Effect::event("vote_round_complete", &Data { data: round }));
        if let Some(why) =
            t.no_winner("All votes were invalid: no vote named a response of this round.")
        {
            out.extend(self.fail(why));
            return out;
        }
        if t.is_tie {
            let tied: Vec<(String, String)> = t
                .tied_labels
                .iter()
                .filter_map(|l| {
                    let answer = |i: &usize| answer_text(&self.answers[*i].response).into_owned();
                    self.labels.get(l).map(|i| (l.clone(), answer(i)))
                })
                .collect();
            let start =
                TiebreakerStart { tied_labels: &t.tied_labels, model: &self.config.chairman_model };
            out.push(Effect::event("tiebreaker_start", &Data { data: start }));
            let chairman = self.config.chairman_model.clone();
            let schema = vote_schema("vote_tiebreak", &t.tied_labels);
            // The backup takes the same prompt: it is asked as the chairman is.
            let asked = self.kit.structured.json(&chairman).then_some(schema.as_ref());
            let prompt = tiebreaker_prompt(&self.ctx.question, &tied, asked);
            let spec = self
                .kit
                .ask("tiebreaker", &chairman, prompt, "tiebreaker", "chairman")
                .with_schema(&schema)
                .quoting(tied.clone());
            self.tiebreak_schema = Some(schema);
            let backup = self.config.chairman_fallback_model.clone();
            out.push(self.kit.calls.solo(spec, 4, backup.as_deref()));
            self.tally = Some(t);
            self.phase = Phase::Tiebreak;
            return out;
        }
        let winner = t.winners.first().cloned().unwrap_or_default();
        self.tally = Some(t);
        out.extend(self.declare(&winner, None));
        out
    }

    fn on_tiebreak(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        // `fallbackFrom` only when the backup answered: a failed backup changes nothing.
        let fallback_from = fallback_from.filter(|_| reply.result.is_ok());
        let tied = self.tally.as_ref().map(|t| t.tied_labels.clone()).unwrap_or_default();
        let schema =
            self.tiebreak_schema.clone().unwrap_or_else(|| vote_schema("vote_tiebreak", &tied));
        let read = reply.result.as_ref().ok().map(|text| read_vote_reply(text, &tied, &schema));
        let chosen = read.clone().and_then(|(r, _)| r.ok());
        let mut out = Vec::new();
        if let Ok(text) = &reply.result {
            let parsed = VoteRow {
                voted_for: chosen.clone(),
                unparsed: read.as_ref().and_then(|(r, _)| r.clone().err()),
                read_from: read.as_ref().filter(|(r, _)| r.is_ok()).and_then(|(_, from)| *from),
                fallback_from: fallback_from.clone(),
            };
            out.push(Effect::Store(
                StageRow::new("tiebreaker", 4, text.clone())
                    .by(&reply.model, "chairman")
                    .data(&parsed)
                    .took(reply.response_time_ms as i64),
            ));
        }
        let (winner, method) = match chosen.clone() {
            Some(l) => (l, "chairman"),
            None => (first_alphabetically(&tied).unwrap_or_default(), "alphabetical"),
        };
        let data = TiebreakerComplete {
            model: &reply.model,
            vote_text: reply.result.as_deref().ok(),
            voted_for: chosen,
            method,
            winner_label: &winner,
            error: reply.result.as_ref().err().map(|e| e.message.as_str()),
            fallback_from,
        };
        out.push(Effect::event("tiebreaker_complete", &Data { data }));
        out.extend(self.declare(&winner, Some(method)));
        out
    }

    fn declare(&mut self, winner_label: &str, method: Option<&str>) -> Vec<Effect> {
        let Some(&i) = self.labels.get(winner_label) else {
            return self.fail("internal error: the winning label is not in the label map");
        };
        let t = self.tally.clone().unwrap_or_else(|| tally(&[]));
        let w = &self.answers[i];
        let result = VoteWinnerResult {
            winner_label: winner_label.to_string(),
            winner_model: w.model.clone(),
            winner_response: w.response.clone(),
            vote_count: t.tallies.get(winner_label).copied().unwrap_or(0),
            total_votes: t.valid_vote_count,
            tiebroken: method.is_some(),
            tiebreaker_method: method.map(str::to_string),
        };
        let answer = w.response.clone();
        let mut out = vec![
            Effect::Store(
                StageRow::new("vote_winner", 5, w.response.clone())
                    .by(&w.model, "winner")
                    .data(&without(&result, "winnerResponse")),
            ),
            Effect::event("winner_declared", &Marked::new(&result, self.kit.calls.failed())),
        ];
        self.phase = Phase::Done;
        out.extend(self.kit.title.finish(answer));
        out
    }
}

impl Staged for Vote {
    const EMPTY_IS_FAILURE: bool = false;

    fn stage_order(stage: &str) -> i32 {
        match stage {
            "stage1" => 1,
            "vote" => 2,
            _ => 4,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event("vote_start", &RunStart::new(&self.ctx, "vote", ())),
            Effect::empty("stage1_start"),
        ];
        let messages = with_history(&self.ctx.history, &self.ctx.question);
        for (i, model) in self.config.models.iter().enumerate() {
            out.push(Effect::Call(self.kit.call(
                self.batch.key(i),
                model,
                messages.clone(),
                "stage1",
                "voter",
            )));
        }
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Tiebreak if routed.reply.key == "tiebreaker" => self.on_tiebreak(routed),
            Phase::Answering | Phase::Voting => {
                if !self.batch.accept(routed.reply) || !self.batch.complete() {
                    Vec::new()
                } else if self.phase == Phase::Answering {
                    self.on_answers()
                } else {
                    self.on_votes()
                }
            }
            _ => Vec::new(),
        }
    }
}
