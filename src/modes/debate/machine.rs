//! Debate's state machine: the first answers, the revisions and the vote on the revised
//! answers.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Revising,
    Voting,
    Done,
}

pub struct Debate {
    config: DebateConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    round1: Vec<Answer>,
    round1_labels: BTreeMap<String, usize>,
    revisions: Vec<RevisionResponse>,
    revised_labels: BTreeMap<String, usize>,
    /// The debaters' revision schema, built once for the run.
    revision_schema: Arc<ReplySchema>,
    kit: Kit,
}

fn map_models(
    labels: &BTreeMap<String, usize>,
    models: impl Fn(usize) -> String,
) -> BTreeMap<String, String> {
    labels.iter().map(|(l, i)| (l.clone(), models(*i))).collect()
}

impl Debate {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: DebateConfig = stored_config("debate", config)?;
        let kit = Kit::new(&ctx, config.timeout_ms);
        let n = config.models.len();
        Ok(Debate {
            config,
            ctx,
            phase: Phase::Answering,
            batch: Batch::new("round1", n),
            round1: Vec::new(),
            round1_labels: BTreeMap::new(),
            revisions: Vec::new(),
            revised_labels: BTreeMap::new(),
            revision_schema: revision_schema(),
            kit,
        })
    }

    /// The model a member stands for: summaries name members (`m #2` when `m` sits on the
    /// panel twice), calls go to the model.
    fn model_of<'a>(&'a self, member: &'a str) -> &'a str {
        let names = member_names(&self.config.models);
        names.iter().position(|n| n == member).map_or(member, |i| &self.config.models[i])
    }

    fn call(&self, key: String, member: &str, prompt: String, stage: &str, role: &str) -> Effect {
        Effect::Call(self.kit.ask(key, self.model_of(member), prompt, stage, role))
    }

    fn fail(&mut self, message: &str) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message.to_string())
    }

    fn on_round1(&mut self) -> Vec<Effect> {
        self.round1 =
            named(self.batch.take(), &self.config.models).iter().filter_map(answer_of).collect();
        match self.round1.len() {
            0 => return self.fail("All models failed to answer."),
            1 => return self.fail("Only 1 model answered; a debate needs at least 2 responses."),
            _ => {}
        }
        let order = create_label_map(self.round1.len(), self.ctx.seed);
        self.round1_labels = order.iter().enumerate().map(|(k, &i)| (label(k), i)).collect();
        let map = map_models(&self.round1_labels, |i| self.round1[i].model.clone());
        let mut out = vec![Effect::Store(StageRow::computed("round1_label_map", 0, to_json(&map)))];
        out.extend(self.round1.iter().map(|a| {
            Effect::Store(
                StageRow::new("initial_answer", 1, a.response.clone())
                    .by(&a.model, "respondent")
                    .data(&AnswerRow { response_time_ms: a.response_time_ms })
                    .took(a.response_time_ms),
            )
        }));
        out.push(Effect::event("round1_complete", &Data { data: &self.round1 }));
        out.push(Effect::event(
            "revision_start",
            &Data { data: RevisionStart { label_map: &map } },
        ));
        // Each debater gets its own prompt: its answer, and everyone else's under their labels.
        self.batch = Batch::new("revision", self.round1.len());
        for (i, own) in self.round1.iter().enumerate() {
            let others: Vec<(String, String)> = self
                .round1_labels
                .iter()
                .filter(|(_, j)| **j != i)
                .map(|(l, j)| (l.clone(), plain(&self.round1[*j].response)))
                .collect();
            let mine = plain(&own.response);
            // Each prompt is its debater's own, so each is built in the one form it is asked in.
            let model = self.model_of(&own.model).to_string();
            let asked = self.kit.structured.json(&model).then_some(self.revision_schema.as_ref());
            let prompt = revision_prompt(&self.ctx.question, &mine, &others, asked);
            let call = self
                .kit
                .ask(self.batch.key(i), &model, prompt, "revision", "debater")
                .with_schema(&self.revision_schema)
                .quoting(
                    std::iter::once(("your original response".to_string(), mine)).chain(others),
                );
            out.push(Effect::Call(call));
        }
        self.phase = Phase::Revising;
        out
    }

    fn on_revisions(&mut self) -> Vec<Effect> {
        let replies = self.batch.take();
        let mut out = Vec::new();
        self.revisions = Vec::new();
        for (i, original) in self.round1.iter().enumerate() {
            let (rev, text) = revision_of(original, replies.get(i), &self.revision_schema);
            if let Some(text) = text {
                out.push(Effect::Store(
                    StageRow::new("revision", 2, text)
                        .by(&rev.model, "debater")
                        .data(&RevisionRow::of(i, &rev))
                        .took(rev.response_time_ms),
                ));
            }
            self.revisions.push(rev);
        }
        let summary = summarize(&self.revisions);
        out.push(Effect::Store(StageRow::computed("revision_summary", 3, to_json(&summary))));
        let done = RevisionsDone { revisions: &self.revisions, summary: &summary };
        out.push(Effect::event("revision_complete", &Data { data: done }));
        // A fresh shuffle for the vote, so a letter seen during revision says nothing.
        let order = create_label_map(self.revisions.len(), self.ctx.seed ^ VOTE_SALT);
        self.revised_labels = order.iter().enumerate().map(|(k, &i)| (label(k), i)).collect();
        let map = map_models(&self.revised_labels, |i| self.revisions[i].model.clone());
        out.push(Effect::Store(StageRow::computed("revised_label_map", 4, to_json(&map))));
        out.push(Effect::event(
            "vote_start",
            &Data { data: VoteStart { revised_label_map: &map } },
        ));
        let labeled: Vec<(String, String)> = self
            .revised_labels
            .iter()
            .map(|(l, i)| (l.clone(), self.revisions[*i].revised_response.clone()))
            .collect();
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        let asking = Asking::new(vote_schema("debate_vote", &labels), |json| {
            vote_prompt(&self.ctx.question, &labeled, json)
        });
        self.batch = Batch::new("vote", self.revisions.len());
        for i in 0..self.revisions.len() {
            let model = self.model_of(&self.revisions[i].model).to_string();
            let call = asking.call(&self.kit, self.batch.key(i), &model, "vote", "voter");
            out.push(Effect::Call(call.quoting(labeled.clone())));
        }
        let first = self.model_of(&self.round1[0].model).to_string();
        out.extend(self.kit.ask_title(&first));
        self.phase = Phase::Voting;
        out
    }

    fn on_votes(&mut self) -> Vec<Effect> {
        let labels: Vec<String> = self.revised_labels.keys().cloned().collect();
        // Voter `i` is the debater of revision `i` (members whose first answer failed are
        // not in the vote): its ballot goes under that member's name.
        let voters: Vec<CallReply> = self
            .batch
            .take()
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                if let Some(rev) = self.revisions.get(i) {
                    r.model = rev.model.clone();
                }
                r
            })
            .collect();
        let ballots = cast(voters, &labels, &vote_schema("debate_vote", &labels));
        let mut out = ballot_rows(&ballots, "debate_vote", 5);
        let map = map_models(&self.revised_labels, |i| self.revisions[i].model.clone());
        let (result, t) = Round::new(&ballots, RevisedLabelToModel { revised_label_to_model: map });
        out.push(Effect::Store(StageRow::computed("debate_vote_tally", 6, to_json(&t))));
        out.push(Effect::event("vote_complete", &Data { data: result }));
        if let Some(why) = t.no_winner("All votes failed to parse.") {
            out.extend(self.fail(why));
            return out;
        }
        // N-way ties go to the first label alphabetically: peers only, no chairman.
        let (winner_label, tiebroken) = if t.is_tie {
            (first_alphabetically(&t.tied_labels).unwrap_or_default(), true)
        } else {
            (t.winners.first().cloned().unwrap_or_default(), false)
        };
        let Some(&i) = self.revised_labels.get(&winner_label) else {
            out.extend(self.fail("internal error: the winning label is not in the label map"));
            return out;
        };
        let w = &self.revisions[i];
        let winner = DebateWinnerResult {
            winner_label: winner_label.clone(),
            winner_model: w.model.clone(),
            winner_response: w.revised_response.clone(),
            winner_decision: w.decision.clone(),
            vote_count: t.tallies.get(&winner_label).copied().unwrap_or(0),
            total_votes: t.valid_vote_count,
            tiebroken,
            tiebreaker_method: tiebroken.then(|| "alphabetical".to_string()),
        };
        out.push(Effect::Store(
            StageRow::new("debate_winner", 7, w.revised_response.clone())
                .by(&w.model, "winner")
                .data(&without(&winner, "winnerResponse")),
        ));
        let declared = Marked::new(&winner, self.kit.calls.failed());
        out.push(Effect::event("winner_declared", &declared));
        self.phase = Phase::Done;
        out.extend(self.kit.title.finish(winner.winner_response));
        out
    }
}

impl Staged for Debate {
    const EMPTY_IS_FAILURE: bool = false;

    fn stage_order(stage: &str) -> i32 {
        match stage {
            "round1" => 1,
            "revision" => 2,
            _ => 5,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event("debate_start", &RunStart::new(&self.ctx, "debate", ())),
            Effect::empty("round1_start"),
        ];
        for (i, model) in self.config.models.iter().enumerate() {
            out.push(self.call(
                self.batch.key(i),
                model,
                self.ctx.question.clone(),
                "round1",
                "respondent",
            ));
        }
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        if self.phase == Phase::Done || !self.batch.accept(routed.reply) || !self.batch.complete() {
            return Vec::new();
        }
        match self.phase {
            Phase::Answering => self.on_round1(),
            Phase::Revising => self.on_revisions(),
            Phase::Voting => self.on_votes(),
            Phase::Done => Vec::new(),
        }
    }
}
