//! Confidence-Weighted's state machine: the softmax weights of the stated confidences, the
//! answers, the weights row and the synthesis (with its backup).

use super::*;

/// Softmax weights of `(index, model, confidence)` at temperature `t`, heaviest first (ties by
/// index).
pub fn weights(answers: &[(usize, String, f64)], t: f64) -> Vec<Weight> {
    let max = answers.iter().map(|a| a.2).fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = answers.iter().map(|a| ((a.2 - max) / t).exp()).collect();
    let sum: f64 = exps.iter().sum();
    let mut out: Vec<Weight> = answers
        .iter()
        .zip(&exps)
        .map(|((index, model, c), e)| {
            let w = e / sum;
            Weight {
                index: *index,
                model: model.clone(),
                raw_confidence: *c,
                normalized_weight: w,
                weight_percent: (w * 10_000.0).round() / 100.0,
                is_outlier: *c > OUTLIER_HIGH || *c < OUTLIER_LOW,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.normalized_weight.total_cmp(&a.normalized_weight).then(a.index.cmp(&b.index))
    });
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Answering,
    Synthesising,
    Done,
}

pub struct ConfidenceWeighted {
    config: ConfidenceWeightedConfig,
    ctx: RunContext,
    names: Vec<String>,
    phase: Phase,
    /// Answers by index, as they arrive (None: not yet, or failed).
    answers: Vec<Option<AnswerData>>,
    pending: usize,
    failed_count: usize,
    weights: Vec<Weight>,
    /// The answer's reply schema, built once for the run.
    answer_schema: Arc<ReplySchema>,
    kit: Kit,
}

/// A reply whose answer (or synthesis) is empty once its markers (or its JSON) are read, as a
/// failed call.
fn no_content_is_failure(mut reply: CallReply, synthesis: bool, schema: &ReplySchema) -> CallReply {
    if let Ok(t) = &reply.result {
        let empty = if synthesis {
            parse_synthesis(&answer_text(t)).0.is_empty()
        } else {
            read_answer_reply(0, "", t, 0, schema).response.is_empty()
        };
        if empty {
            let what =
                if synthesis { "no synthesis in the reply" } else { "no answer in the reply" };
            reply.result = Err(CallError::new(CallErrorKind::Malformed, None, what));
        }
    }
    reply
}

impl ConfidenceWeighted {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: ConfidenceWeightedConfig = stored_config("confidence_weighted", config)?;
        if !(MIN_MODELS..=MAX_MODELS).contains(&config.models.len()) {
            return Err("the stored confidence_weighted configuration has no 2 to 6 models".into());
        }
        if !(config.temperature.is_finite() && TEMPERATURE_RANGE.contains(&config.temperature)) {
            return Err("the stored confidence_weighted temperature is out of range".into());
        }
        let n = config.models.len();
        let kit = Kit::new(&ctx, config.timeout_ms);
        Ok(ConfidenceWeighted {
            names: member_names(&config.models),
            config,
            ctx,
            phase: Phase::Answering,
            answers: vec![None; n],
            pending: n,
            failed_count: 0,
            weights: Vec::new(),
            answer_schema: answer_schema(),
            kit,
        })
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message)
    }

    fn on_answer(&mut self, reply: CallReply) -> Vec<Effect> {
        let Some(i) = indexed(&reply.key, "answer") else {
            return Vec::new();
        };
        if i >= self.answers.len() || self.answers[i].is_some() {
            return Vec::new();
        }
        self.pending = self.pending.saturating_sub(1);
        let mut out = Vec::new();
        match &reply.result {
            Ok(text) => {
                let ms = reply.response_time_ms as i64;
                let a = read_answer_reply(i, &self.names[i], text, ms, &self.answer_schema);
                out.push(Effect::Store(
                    StageRow::new(format!("answer_{i}"), 0, text.clone())
                        .by(&a.model, "respondent")
                        // The text is the row's content (read again when the result is rebuilt).
                        .data(&without(&a, "response"))
                        .took(a.response_time_ms),
                ));
                out.push(Effect::event("answer_complete", &Data { data: &a }));
                self.answers[i] = Some(a);
            }
            Err(_) => self.failed_count += 1,
        }
        if self.pending == 0 {
            out.extend(self.after_answers());
        }
        out
    }

    fn after_answers(&mut self) -> Vec<Effect> {
        let answered: Vec<AnswerData> = self.answers.iter().flatten().cloned().collect();
        let count = AnswersCount { count: answered.len(), failed_count: self.failed_count };
        let mut out = vec![Effect::event("all_answers_complete", &Data { data: count })];
        if answered.is_empty() {
            out.extend(self.fail("No model answered.".into()));
            return out;
        }
        let input: Vec<(usize, String, f64)> =
            answered.iter().map(|a| (a.index, a.model.clone(), a.confidence)).collect();
        self.weights = weights(&input, self.config.temperature);
        let data = WeightsData::of(&self.weights, self.config.temperature);
        out.push(Effect::Store(StageRow::computed("weights", 1, to_json(&data))));
        out.push(Effect::event("weights_calculated", &Data { data }));
        out.push(Effect::empty("synthesis_start"));
        if answered.len() == 1 {
            let a = &answered[0];
            let s = SynthesisData {
                model: None,
                synthesis: a.response.clone(),
                calibration_notes: String::new(),
                highest_weight: extreme(&self.weights, true),
                lowest_weight: extreme(&self.weights, false),
                single_answer: true,
                response_time_ms: None,
                fallback_from: None,
            };
            out.extend(self.finish(s));
            return out;
        }
        let shown: Vec<Weighted> = self
            .weights
            .iter()
            .filter_map(|w| {
                let a = answered.iter().find(|a| a.index == w.index)?;
                Some(Weighted { model: &a.model, response: &a.response, weight: w })
            })
            .collect();
        let prompt = synthesis_prompt(&self.ctx.question, &shown, self.config.temperature);
        // The answers as the prompt quotes them: cut first when it would not fit its model.
        let material: Vec<(String, String)> = shown
            .iter()
            .map(|a| (format!("{}'s answer", a.model), readable(a.response).into_owned()))
            .collect();
        let spec = self
            .kit
            .call(
                "synthesis",
                &self.config.synthesis_model,
                with_history(&self.ctx.history, &prompt),
                "synthesis",
                "synthesizer",
            )
            .quoting(material);
        let backup = self.config.synthesis_fallback_model.clone();
        out.push(self.kit.calls.solo(spec, 2, backup.as_deref()));
        self.phase = Phase::Synthesising;
        out
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                let m = role_failed("synthesizer", &routed, e);
                return self.fail(m);
            }
        };
        let (synthesis, notes) = parse_synthesis(&answer_text(&text));
        let s = SynthesisData {
            model: Some(routed.reply.model.clone()),
            synthesis,
            calibration_notes: notes,
            highest_weight: extreme(&self.weights, true),
            lowest_weight: extreme(&self.weights, false),
            single_answer: false,
            response_time_ms: Some(routed.reply.response_time_ms as i64),
            fallback_from: routed.fallback_from,
        };
        self.finish(s)
    }

    fn finish(&mut self, s: SynthesisData) -> Vec<Effect> {
        self.phase = Phase::Done;
        let event = Marked::new(&s, self.kit.calls.failed());
        let mut out = vec![
            Effect::Store(
                StageRow::new("synthesis", 2, s.synthesis.clone())
                    .model(s.model.clone())
                    .role("synthesizer")
                    .data(&SynthesisRow::of(&s))
                    .took(s.response_time_ms),
            ),
            Effect::event("synthesis_complete", &event),
        ];
        out.extend(self.kit.title.finish(s.synthesis));
        out
    }
}

/// The heaviest (or lightest) weight: first (or last) in weight order.
fn extreme(weights: &[Weight], highest: bool) -> Option<Weight> {
    if highest { weights.first() } else { weights.last() }.cloned()
}

impl Staged for ConfidenceWeighted {
    fn stage_order(stage: &str) -> i32 {
        match stage {
            "answer" => 0,
            "weights" => 1,
            _ => 2,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event(
                "confidence_start",
                &RunStart::new(
                    &self.ctx,
                    "confidence_weighted",
                    ConfidenceStart {
                        config: StartConfig {
                            models: &self.config.models,
                            synthesis_model: &self.config.synthesis_model,
                            temperature: self.config.temperature,
                        },
                    },
                ),
            ),
            Effect::empty("answers_start"),
        ];
        let schema = &self.answer_schema;
        let text = with_history(&self.ctx.history, &answer_prompt(&self.ctx.question, None));
        let json =
            with_history(&self.ctx.history, &answer_prompt(&self.ctx.question, Some(schema)));
        for (i, model) in self.config.models.iter().enumerate() {
            let messages = self.kit.structured.pick(model, &text, &json).clone();
            let call =
                self.kit.call(format!("answer:{i}"), model, messages, "answer", "respondent");
            out.push(Effect::Call(call.with_schema(schema)));
        }
        out.extend(self.kit.ask_title(&self.config.synthesis_model));
        out
    }

    fn screen(&mut self, reply: CallReply) -> CallReply {
        let synthesis = reply.key.starts_with("synthesis");
        no_content_is_failure(empty_is_failure(reply), synthesis, &self.answer_schema)
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Answering => self.on_answer(routed.reply),
            Phase::Synthesising if routed.reply.key == "synthesis" => self.on_synthesis(routed),
            _ => Vec::new(),
        }
    }
}
