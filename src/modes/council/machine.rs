//! Council's state machine: the answers, the rankings and the chairman's synthesis.

use super::*;

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Ranking,
    Synthesising,
    Done,
}

pub struct Council {
    config: CouncilConfig,
    ctx: RunContext,
    phase: Phase,
    /// Replies of the current stage, by member index.
    batch: Batch,
    stage1: Vec<Stage1Response>,
    label_to_model: BTreeMap<String, String>,
    stage2: Vec<Stage2Response>,
    /// The ranking's reply schema, once the labels are known.
    ranking_schema: Option<Arc<ReplySchema>>,
    kit: Kit,
}

impl Council {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: CouncilConfig = stored_config("council", config)?;
        let members = config.council_models.len();
        let kit = Kit::new(&ctx, config.timeout_ms);
        Ok(Council {
            config,
            ctx,
            phase: Phase::Answering,
            batch: Batch::new("stage1", members),
            stage1: Vec::new(),
            label_to_model: BTreeMap::new(),
            stage2: Vec::new(),
            ranking_schema: None,
            kit,
        })
    }

    fn call(
        &self,
        key: String,
        model: &str,
        prompt_messages: Vec<crate::modes::ChatMessage>,
        stage: &str,
        role: &str,
    ) -> Effect {
        Effect::Call(self.kit.call(key, model, prompt_messages, stage, role))
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message)
    }

    fn on_stage1(&mut self, reply: CallReply) -> Vec<Effect> {
        if !self.batch.accept(reply) || !self.batch.complete() {
            return Vec::new();
        }
        self.stage1 = named(self.batch.take(), &self.config.council_models)
            .iter()
            .filter_map(answer_of)
            .collect();
        match self.stage1.len() {
            0 => return self.fail("All council models failed to respond.".into()),
            1 => {
                return self.fail(
                    "Only 1 council model answered; at least 2 responses are required for ranking."
                        .into(),
                )
            }
            _ => {}
        }
        let mut out: Vec<Effect> = self
            .stage1
            .iter()
            .map(|r| {
                Effect::Store(
                    StageRow::new("stage1", 1, r.response.clone())
                        .by(&r.model, "council")
                        .took(r.response_time_ms),
                )
            })
            .collect();
        out.push(Effect::event("stage1_complete", &Data { data: &self.stage1 }));

        // Stage 2: anonymise with a per-run shuffle and ask every member to rank.
        let order = create_label_map(self.stage1.len(), self.ctx.seed);
        let mut labeled = Vec::with_capacity(order.len());
        for (k, &idx) in order.iter().enumerate() {
            let l = label(k);
            let answer = &self.stage1[idx];
            self.label_to_model.insert(l.clone(), answer.model.clone());
            out.push(Effect::Store(
                StageRow::new("label_map", 2, l.clone())
                    .model(Some(answer.model.clone()))
                    .data(&LabelRow { label: l.clone() }),
            ));
            // Rankers read the answer, not the reasoning behind it.
            labeled.push((l, answer_text(&answer.response).into_owned()));
        }
        out.push(Effect::empty("stage2_start"));
        let labels: Vec<String> = labeled.iter().map(|(l, _)| l.clone()).collect();
        let asking = Asking::new(ranking::ranking_schema("council_ranking", &labels), |json| {
            ranking_prompt(&self.ctx.question, &labeled, json)
        });
        self.batch = Batch::new("stage2", self.config.council_models.len());
        for (i, model) in self.config.council_models.iter().enumerate() {
            let key = self.batch.key(i);
            let call = asking.call(&self.kit, key, model, "stage2", "council");
            out.push(Effect::Call(call.quoting(labeled.clone())));
        }
        self.ranking_schema = Some(asking.schema);
        self.phase = Phase::Ranking;
        out
    }

    fn on_stage2(&mut self, reply: CallReply) -> Vec<Effect> {
        if !self.batch.accept(reply) || !self.batch.complete() {
            return Vec::new();
        }
        let labels: Vec<String> = self.label_to_model.keys().cloned().collect();
        let schema = self
            .ranking_schema
            .clone()
            .unwrap_or_else(|| ranking::ranking_schema("council_ranking", &labels));
        self.stage2 = named(self.batch.take(), &self.config.council_models)
            .into_iter()
            .filter_map(|r| {
                r.result.ok().map(|text| {
                    stage2_response(r.model, text, &labels, &schema, r.response_time_ms)
                })
            })
            .collect();
        let mut out: Vec<Effect> = self
            .stage2
            .iter()
            .map(|r| {
                Effect::Store(
                    StageRow::new("stage2", 2, r.ranking.clone())
                        .by(&r.model, "council")
                        .data(&Stage2Row::of(r))
                        .took(r.response_time_ms),
                )
            })
            .collect();
        let metadata = metadata(&self.stage2, &self.label_to_model);
        out.push(Effect::event(
            "stage2_complete",
            &Stage2Complete { data: &self.stage2, metadata },
        ));

        out.push(Effect::empty("stage3_start"));
        let prompt = synthesis_prompt(&self.ctx.question, &self.stage1, &self.stage2);
        let messages = with_history(&self.ctx.history, &prompt);
        let chairman = self.config.chairman_model.clone();
        let material =
            self.stage1
                .iter()
                .map(|r| (format!("{}'s answer", r.model), answer_text(&r.response).into_owned()))
                .chain(self.stage2.iter().map(|r| {
                    (format!("{}'s ranking", r.model), readable(&r.ranking).into_owned())
                }));
        let spec =
            self.kit.call("stage3", &chairman, messages, "stage3", "chairman").quoting(material);
        let backup = self.config.chairman_fallback_model.clone();
        out.push(self.kit.calls.solo(spec, 3, backup.as_deref()));
        out.extend(self.kit.ask_title(&chairman));
        self.phase = Phase::Synthesising;
        out
    }

    fn on_stage3(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(text) => text.clone(),
            Err(e) => return self.fail(role_failed("chairman", &routed, e)),
        };
        let reply = routed.reply;
        let synthesis = Stage3Response {
            model: reply.model,
            response: text.clone(),
            response_time_ms: reply.response_time_ms as i64,
            fallback_from: routed.fallback_from,
        };
        let mut out = vec![
            Effect::Store(StageRow {
                parsed_data: synthesis
                    .fallback_from
                    .clone()
                    .map(|fallback_from| to_json(&FallbackRow { fallback_from })),
                ..StageRow::new("stage3", 3, &synthesis.response)
                    .by(&synthesis.model, "chairman")
                    .took(synthesis.response_time_ms)
            }),
            Effect::event("stage3_complete", &Marked::new(&synthesis, self.kit.calls.failed())),
        ];
        self.phase = Phase::Done;
        out.extend(self.kit.title.finish(text));
        out
    }
}

impl Staged for Council {
    const EMPTY_IS_FAILURE: bool = false;

    fn stage_order(stage: &str) -> i32 {
        match stage {
            "stage1" => 1,
            "stage2" => 2,
            _ => 3,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let start = Stage1Start {
            conversation_id: &self.ctx.conversation_id,
            message_id: &self.ctx.message_id,
        };
        let mut out = vec![Effect::event("stage1_start", &start)];
        let messages = with_history(&self.ctx.history, &self.ctx.question);
        for (i, model) in self.config.council_models.iter().enumerate() {
            out.push(self.call(
                format!("stage1:{i}"),
                model,
                messages.clone(),
                "stage1",
                "council",
            ));
        }
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Answering => self.on_stage1(routed.reply),
            Phase::Ranking => self.on_stage2(routed.reply),
            Phase::Synthesising if routed.reply.key == "stage3" => self.on_stage3(routed),
            _ => Vec::new(),
        }
    }
}
