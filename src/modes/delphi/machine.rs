//! The Delphi state machine: classification, the rounds until convergence and the
//! facilitator's report.

use super::*;

use crate::modes::reading::Unparsed;
use crate::modes::runner::GLOBAL_TIMER;

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Classifying,
    Round(u32),
    Synthesising,
    Done,
}

pub struct Delphi {
    config: DelphiConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    classification: Option<Classification>,
    /// Panelists still on the panel: (1-based participant index, model).
    panel: Vec<(usize, String)>,
    rounds: Vec<RoundRecord>,
    /// The classification's and the current round's reply schemas, built when their calls
    /// are made.
    classify_schema: Option<Arc<ReplySchema>>,
    round_schema: Option<Arc<ReplySchema>>,
    kit: Kit,
}

impl Delphi {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: DelphiConfig = stored_config("delphi", config)?;
        let timeout_ms = config.timeout_ms;
        let panel =
            config.panelist_models.iter().enumerate().map(|(i, m)| (i + 1, m.clone())).collect();
        Ok(Delphi {
            config,
            phase: Phase::Classifying,
            batch: Batch::new("classify", 1),
            classification: None,
            panel,
            rounds: Vec::new(),
            classify_schema: None,
            round_schema: None,
            kit: Kit::new(&ctx, timeout_ms),
            ctx,
        })
    }

    /// The schema `model` is asked for: `schema` when its route takes structured output.
    fn asked<'a>(&self, model: &str, schema: &'a ReplySchema) -> Option<&'a ReplySchema> {
        self.kit.structured.json(model).then_some(schema)
    }

    /// The schema of a round of this question.
    fn schema_of_round(&self, round: u32) -> Arc<ReplySchema> {
        match self.kind() {
            QuestionType::Numeric => estimate_schema(round),
            QuestionType::Qualitative => answer_schema(&self.options(), round),
        }
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message)
    }

    fn kind(&self) -> QuestionType {
        self.classification.as_ref().map_or(QuestionType::Qualitative, |c| c.kind)
    }

    fn options(&self) -> Vec<String> {
        self.classification.as_ref().and_then(|c| c.options.clone()).unwrap_or_default()
    }

    fn classified(&mut self, c: Classification, row: StageRow) -> Vec<Effect> {
        let mut out =
            vec![Effect::Store(row), Effect::event("classify_complete", &Data { data: &c })];
        self.classification = Some(c);
        out.extend(self.start_round(1));
        out
    }

    fn start_round(&mut self, round: u32) -> Vec<Effect> {
        self.phase = Phase::Round(round);
        self.batch = Batch::new(&format!("round{round}"), self.panel.len());
        let mut out = vec![Effect::event("round_start", &RoundStart { round })];
        let kind = self.kind();
        let options = self.options();
        let previous = self.rounds.last().cloned();
        let schema = self.schema_of_round(round);
        for (i, (participant, model)) in self.panel.clone().into_iter().enumerate() {
            let json = self.asked(&model, &schema);
            // Round 2+: only the aggregates and this panelist's own previous answer.
            let prompt = match (&previous, kind) {
                (None, QuestionType::Numeric) => round1_numeric_prompt(&self.ctx.question, json),
                (None, QuestionType::Qualitative) => {
                    round1_qualitative_prompt(&self.ctx.question, &options, json)
                }
                (Some(prev), _) => {
                    let Some(own) = prev.estimates.iter().find(|e| e.participant == participant)
                    else {
                        continue;
                    };
                    let n = prev.estimates.iter().filter(|e| e.valid()).count();
                    match &prev.stats {
                        Stats::Numeric(s) => round_n_numeric_prompt(
                            &self.ctx.question,
                            round,
                            self.config.max_rounds,
                            own,
                            s,
                            n,
                            json,
                        ),
                        Stats::Qualitative(s) => round_n_qualitative_prompt(
                            &self.ctx.question,
                            round,
                            self.config.max_rounds,
                            own,
                            s,
                            n,
                            json,
                        ),
                    }
                }
            };
            let call = self.kit.ask(
                self.batch.key(i),
                &model,
                prompt,
                &format!("round_{round}"),
                "panelist",
            );
            out.push(Effect::Call(call.with_schema(&schema)));
        }
        self.round_schema = Some(schema);
        out
    }

    /// A panelist's reply as this round's estimate, and where it was read from (None when it
    /// states no answer); None when the call failed.
    fn read(
        &self,
        reply: &CallReply,
        participant: usize,
        round: u32,
        schema: &ReplySchema,
    ) -> Option<(Estimate, Option<ReadFrom>)> {
        let text = reply.result.as_ref().ok()?;
        let Reading { value, confidence, confidence_stated, reasoning, read_from } =
            read_panelist(text, self.kind(), &self.options(), schema);
        let previous = self
            .rounds
            .last()
            .and_then(|r| r.estimates.iter().find(|e| e.participant == participant))
            .map(|e| e.value.clone());
        let changed = round > 1 && previous.as_ref().is_some_and(|p| p != &value);
        let unparsed = matches!(value, EstimateValue::Unreadable).then(|| Unparsed::of(text));
        // Members of one model are told apart (`local/smollm2 #2`) once the panel is revealed.
        let model = crate::modes::common::member_names(&self.config.panelist_models)
            .get(participant.wrapping_sub(1))
            .cloned()
            .unwrap_or_else(|| reply.model.clone());
        let estimate = Estimate {
            unparsed,
            confidence_stated,
            participant,
            model,
            value,
            confidence,
            reasoning,
            previous,
            changed,
            carried: false,
            response_time_ms: reply.response_time_ms as i64,
            text: text.clone(),
        };
        Some((estimate, read_from))
    }

    fn end_round(&mut self, round: u32) -> Vec<Effect> {
        let replies = self.batch.take();
        let prev = self.rounds.last().cloned();
        let schema = self.round_schema.clone().unwrap_or_else(|| self.schema_of_round(round));
        let mut estimates = Vec::new();
        // Where each estimate's reply was read from (None: carried forward, or not read).
        let mut read_from = Vec::new();
        let mut out = Vec::new();
        let mut still_on_panel = Vec::new();
        for (i, (participant, model)) in self.panel.iter().enumerate() {
            let reply = replies.iter().find(|r| r.key == self.batch.key(i));
            let read = reply.and_then(|r| self.read(r, *participant, round, &schema));
            let unparsed = read.as_ref().and_then(|(e, _)| e.unparsed);
            let (e, from) = match (read, &prev) {
                // Round 1: a failed call leaves the panel for good.
                (None, None) => continue,
                (Some(read), None) => read,
                (Some((e, from)), Some(_)) if e.valid() => (e, from),
                // Round 2+: failed or unreadable carries the previous answer forward.
                (_, Some(p)) => match p.estimates.iter().find(|e| e.participant == *participant) {
                    Some(last) => (
                        Estimate {
                            previous: Some(last.value.clone()),
                            changed: false,
                            carried: true,
                            unparsed,
                            response_time_ms: reply.map_or(0, |r| r.response_time_ms as i64),
                            text: reply
                                .and_then(|r| r.result.as_ref().ok().cloned())
                                .unwrap_or_default(),
                            ..last.clone()
                        },
                        None,
                    ),
                    None => continue,
                },
            };
            still_on_panel.push((*participant, model.clone()));
            estimates.push(e);
            read_from.push(from);
        }
        self.panel = still_on_panel;
        let valid = estimates.iter().filter(|e| e.valid()).count();
        let kind = self.kind();
        for (e, from) in estimates.iter().zip(&read_from) {
            let pd = to_json(&EstimateRow { estimate: &e.full(kind, *from), round, kind });
            out.push(Effect::Store(
                StageRow::new(format!("round_{round}"), (2 * round - 1) as i32, e.text.clone())
                    .by(&e.model, "panelist")
                    .parsed(pd)
                    .took(e.response_time_ms),
            ));
        }
        if valid < MIN_ESTIMATES {
            let message = if round == 1 && estimates.is_empty() {
                "All panelists failed in round 1.".to_string()
            } else {
                format!("Only {valid} valid estimate(s) in round {round}; at least {MIN_ESTIMATES} are required.")
            };
            out.extend(self.fail(message));
            return out;
        }
        let stats = stats_of(kind, &estimates);
        let converged = stats.converged(&self.config);
        out.push(Effect::Store(
            StageRow::new(format!("round_{round}_stats"), (2 * round) as i32, stats.summary(round))
                .role("stats")
                .data(&StatsRow { stats: stats.clone(), round, kind: "stats".into(), converged }),
        ));
        let summaries =
            estimates.iter().zip(&read_from).map(|(e, from)| e.summary(kind, *from)).collect();
        let data = RoundData { estimates: summaries, stats: &stats, converged };
        out.push(Effect::event("round_complete", &RoundComplete { round, data }));
        self.rounds.push(RoundRecord { round, estimates, stats: stats.clone(), converged });
        let end = RoundsEnd { round, stats: &stats, reason: None };
        if converged {
            out.push(Effect::event("convergence_reached", &end));
        } else if round >= self.config.max_rounds || self.kit.deadline_passed {
            let reason = if self.kit.deadline_passed { "time limit" } else { "max rounds" };
            out.push(Effect::event(
                "max_rounds_reached",
                &RoundsEnd { reason: Some(reason), ..end },
            ));
        } else {
            out.extend(self.start_round(round + 1));
            return out;
        }
        out.extend(self.synthesise());
        out
    }

    fn final_value(&self) -> FinalValue {
        match self.rounds.last().map(|r| &r.stats) {
            Some(Stats::Numeric(s)) => FinalValue::Number(s.mean),
            Some(Stats::Qualitative(s)) => FinalValue::Answer(s.mode.clone()),
            None => FinalValue::Answer(String::new()),
        }
    }

    fn synthesise(&mut self) -> Vec<Effect> {
        self.phase = Phase::Synthesising;
        let converged = self.rounds.last().is_some_and(|r| r.converged);
        let n = self.rounds.last().map_or(0, |r| r.estimates.iter().filter(|e| e.valid()).count());
        let prompt =
            synthesis_prompt(&self.ctx.question, &self.rounds, n, converged, &self.final_value());
        let facilitator = self.config.facilitator_model.clone();
        let spec = self.kit.ask("synthesis", &facilitator, prompt, "synthesis", "facilitator");
        let backup = self.config.facilitator_fallback_model.clone();
        let mut out = vec![
            Effect::empty("synthesis_start"),
            self.kit.calls.solo(spec, 99, backup.as_deref()),
        ];
        out.extend(self.kit.ask_title(&facilitator));
        out
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        let text = match reply.result {
            Ok(t) => t,
            Err(e) => {
                let who = match &fallback_from {
                    Some(primary) => format!("{primary}, then its backup {}", reply.model),
                    None => reply.model.clone(),
                };
                return self.fail(format!(
                    "The facilitator ({who}) failed to write the report: {}",
                    e.message
                ));
            }
        };
        let converged = self.rounds.last().is_some_and(|r| r.converged);
        let convergence_round = self.rounds.iter().find(|r| r.converged).map(|r| r.round);
        let row = SynthesisRow {
            total_rounds: self.rounds.len(),
            converged,
            convergence_round,
            final_value: self.final_value(),
            fallback_from,
        };
        let time = reply.response_time_ms as i64;
        let report = DelphiReport::of(&reply.model, &text, time, row.clone());
        let mut out = vec![
            Effect::Store(
                StageRow::new("synthesis", 99, text.clone())
                    .by(&reply.model, "facilitator")
                    .data(&row)
                    .took(time),
            ),
            Effect::event("synthesis_complete", &Marked::new(report, self.kit.calls.failed())),
        ];
        self.phase = Phase::Done;
        out.extend(self.kit.title.finish(text));
        out
    }

    fn on_classify(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        let schema = self.classify_schema.clone().unwrap_or_else(classify_schema);
        let parsed =
            reply.result.as_deref().ok().and_then(|text| read_classification(text, &schema));
        let mut c = match parsed {
            Some((c, _)) => c,
            // The seed: fall back to QUALITATIVE when classification fails.
            None => Classification {
                kind: QuestionType::Qualitative,
                options: None,
                reasoning: "Classification failed; falling back to a qualitative question.".into(),
                fallback_from: None,
                // A reply that came but could not be read says why; a failed call is stored
                // as a failure already.
                unparsed: reply.result.as_deref().ok().map(Unparsed::of),
                read_from: None,
            },
        };
        // Only a backup that answered stands in for the facilitator.
        c.fallback_from = fallback_from.filter(|_| reply.result.is_ok());
        // A qualitative override keeps its type even if the facilitator says otherwise; it only
        // asked for options.
        if self.config.question_type == Some(QuestionType::Qualitative) {
            c.kind = QuestionType::Qualitative;
        }
        if c.kind == QuestionType::Numeric {
            c.options = None;
        }
        let row = StageRow::new("classify", 0, reply.result.clone().unwrap_or_default())
            .by(&reply.model, "facilitator")
            .data(&c)
            .took(reply.response_time_ms as i64);
        self.classified(c, row)
    }
}

impl Staged for Delphi {
    const EMPTY_IS_FAILURE: bool = false;

    fn stage_order(stage: &str) -> i32 {
        stage_order(stage)
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let cfg = self.config.clone();
        // Options alone imply a qualitative question.
        let known = match (cfg.question_type, &cfg.options) {
            (Some(QuestionType::Numeric), _) => Some(QuestionType::Numeric),
            (_, Some(_)) => Some(QuestionType::Qualitative),
            _ => None,
        };
        let mut out = vec![
            Effect::event(
                "delphi_start",
                &DelphiStart {
                    conversation_id: &self.ctx.conversation_id,
                    message_id: &self.ctx.message_id,
                    question_type: known,
                },
            ),
            // The global cap: the current round finishes, then the synthesis.
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: cfg.global_timeout_ms },
        ];
        if let Some(kind) = known {
            let c = Classification {
                kind,
                options: cfg.options.clone(),
                reasoning: "Set by the request.".into(),
                fallback_from: None,
                unparsed: None,
                read_from: None,
            };
            let row =
                StageRow::new("classify", 0, "Set by the request.").role("facilitator").data(&c);
            out.extend(self.classified(c, row));
            return out;
        }
        // The backup takes the same prompt: it is asked as the facilitator is.
        let schema = classify_schema();
        let prompt =
            classify_prompt(&self.ctx.question, self.asked(&cfg.facilitator_model, &schema));
        let spec = self
            .kit
            .ask(self.batch.key(0), &cfg.facilitator_model, prompt, "classify", "facilitator")
            .with_schema(&schema);
        self.classify_schema = Some(schema);
        out.push(self.kit.calls.solo(spec, 0, cfg.facilitator_fallback_model.as_deref()));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Classifying => {
                if self.batch.accept(routed.reply.clone()) {
                    self.batch.take();
                    self.on_classify(routed)
                } else {
                    Vec::new()
                }
            }
            Phase::Round(n) => {
                if self.batch.accept(routed.reply) && self.batch.complete() {
                    self.end_round(n)
                } else {
                    Vec::new()
                }
            }
            Phase::Synthesising if routed.reply.key == "synthesis" => self.on_synthesis(routed),
            _ => Vec::new(),
        }
    }
}
