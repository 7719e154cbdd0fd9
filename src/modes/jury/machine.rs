//! Jury's state machine: the jurors' deliberation, then the foreman's verdict.

use super::*;

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Deliberating,
    Verdict,
    Done,
}

pub struct Jury {
    config: JuryConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    /// Successful assessments, in the order they arrived (as published).
    jurors: Vec<JurorAssessment>,
    summary: Option<JurorSummary>,
    /// The jurors' reply schema, built once for the run.
    juror_schema: Arc<ReplySchema>,
    kit: Kit,
}

impl Jury {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: JuryConfig = stored_config("jury", config)?;
        let kit = Kit::new(&ctx, config.timeout_ms);
        let n = config.juror_models.len();
        Ok(Jury {
            config,
            ctx,
            phase: Phase::Deliberating,
            batch: Batch::new("juror", n),
            jurors: Vec::new(),
            summary: None,
            juror_schema: juror_schema(),
            kit,
        })
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message)
    }

    /// One juror finished: publish its assessment now, not with the batch.
    fn on_juror(&mut self, reply: CallReply) -> Vec<Effect> {
        let mut out = Vec::new();
        if let Ok(text) = &reply.result {
            // Jurors of one model are told apart (`m #2`); the key says which juror this is.
            let index = reply.key.rsplit(':').next().and_then(|n| n.parse::<usize>().ok());
            let names = member_names(&self.config.juror_models);
            let name = index.and_then(|i| names.get(i)).unwrap_or(&reply.model);
            let a = assess_reply(name, text, reply.response_time_ms as i64, &self.juror_schema);
            out.push(Effect::Store(
                StageRow::new("deliberation", 2, a.assessment_text.clone())
                    .by(&a.model, "juror")
                    .data(&JurorRow::of(&a))
                    .took(a.response_time_ms),
            ));
            out.push(Effect::event("juror_complete", &Data { data: &a }));
            self.jurors.push(a);
        }
        if !self.batch.accept(reply) || !self.batch.complete() {
            return out;
        }
        self.batch.take();
        match self.jurors.len() {
            0 => {
                out.extend(self.fail("All juror evaluations failed.".into()));
                return out;
            }
            1 => {
                out.extend(
                    self.fail("Only 1 juror evaluation succeeded; at least 2 are required.".into()),
                );
                return out;
            }
            _ => {}
        }
        let summary = summarize(self.config.juror_models.len(), &self.jurors);
        out.push(Effect::Store(StageRow::computed("juror_summary", 3, to_json(&summary))));
        out.push(Effect::event("all_jurors_complete", &Data { data: &summary }));
        out.push(Effect::empty("verdict_start"));
        let prompt = foreman_prompt(
            &self.config.content,
            self.config.original_question.as_deref(),
            &self.jurors,
            &summary.vote_tally,
            summary.majority_verdict,
        );
        let material = foreman_material(
            &self.config.content,
            self.config.original_question.as_deref(),
            &self.jurors,
        );
        let foreman = self.config.foreman_model.clone();
        // The report is text a person reads: no schema.
        let spec =
            self.kit.ask("verdict", &foreman, prompt, "verdict", "foreman").quoting(material);
        let backup = self.config.foreman_fallback_model.clone();
        out.push(self.kit.calls.solo(spec, 4, backup.as_deref()));
        out.extend(self.kit.ask_title_with(&foreman, title_prompt(&self.config.content)));
        self.summary = Some(summary);
        self.phase = Phase::Verdict;
        out
    }

    fn on_verdict(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => return self.fail(role_failed("foreman", &routed, e)),
        };
        let Some(summary) = self.summary.clone() else {
            return self.fail("internal error: no juror summary".into());
        };
        let reply = routed.reply;
        let mut report =
            foreman_report(&reply.model, &text, reply.response_time_ms as i64, &summary);
        report.fallback_from = routed.fallback_from;
        let mut out = vec![
            Effect::Store(
                StageRow::new("verdict", 4, text.clone())
                    .by(&report.model, "foreman")
                    .data(&without(&report, "reportText"))
                    .took(report.response_time_ms),
            ),
            Effect::event("verdict_complete", &Marked::new(&report, self.kit.calls.failed())),
        ];
        self.phase = Phase::Done;
        // The conversation keeps the report without its reasoning (the row keeps it all).
        let answer = answer_text(&text);
        let answer = if answer.trim().is_empty() { text.clone() } else { answer.into_owned() };
        out.extend(self.kit.title.finish(answer));
        out
    }
}

impl Staged for Jury {
    const EMPTY_IS_FAILURE: bool = false;

    fn stage_order(stage: &str) -> i32 {
        if stage == "deliberation" {
            2
        } else {
            4
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let presentation = Presentation {
            content: self.config.content.clone(),
            original_question: self.config.original_question.clone(),
        };
        let mut out = vec![
            Effect::event("jury_start", &RunStart::new(&self.ctx, "jury", ())),
            Effect::empty("present_start"),
            Effect::Store(
                StageRow::new("present", 1, self.config.content.clone())
                    .data(&PresentRow { original_question: self.config.original_question.clone() }),
            ),
            Effect::event("present_complete", &Data { data: presentation }),
            Effect::empty("deliberation_start"),
        ];
        let (content, question) = (&self.config.content, self.config.original_question.as_deref());
        let asking = Asking::new(self.juror_schema.clone(), |json| {
            evaluation_prompt(content, question, json)
        });
        let mut material = vec![("the content under review".to_string(), content.clone())];
        if let Some(q) = question {
            material.push(("the original question".to_string(), q.to_string()));
        }
        for (i, model) in self.config.juror_models.iter().enumerate() {
            let call = asking.call(&self.kit, self.batch.key(i), model, "deliberation", "juror");
            out.push(Effect::Call(call.quoting(material.clone())));
        }
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Deliberating => self.on_juror(routed.reply),
            Phase::Verdict if routed.reply.key == "verdict" => self.on_verdict(routed),
            _ => Vec::new(),
        }
    }
}
