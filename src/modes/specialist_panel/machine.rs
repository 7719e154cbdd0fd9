//! The panel's state machine: every specialist in parallel, then the synthesis.

use super::*;

const PANEL_ORDER: i32 = 0;
const SPECIALIST_ORDER: i32 = 1;
const SYNTHESIS_ORDER: i32 = 2;

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Reported(Box<SpecialistReport>),
    Failed(FailedSpecialist),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Analysing,
    Synthesizing,
    Done,
}

pub struct SpecialistPanel {
    config: PanelConfig,
    ctx: RunContext,
    material: Material,
    outcomes: Vec<Option<Outcome>>,
    /// Each specialist's report schema (its role's criteria), by specialist.
    schemas: Vec<Arc<ReplySchema>>,
    phase: Phase,
    kit: Kit,
}

/// The roles as `panel_start` and the panel row give them.
fn roles_of(specialists: &[SpecialistConfig]) -> Vec<PanelRole> {
    specialists
        .iter()
        .map(|s| PanelRole {
            role_key: s.role_key.clone(),
            role_title: s.title.clone(),
            model: s.model.clone(),
            criteria: s.criteria.clone(),
        })
        .collect()
}

impl SpecialistPanel {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: PanelConfig = stored_config("specialist_panel", config)?;
        if !(2..=6).contains(&config.specialists.len()) {
            return Err(
                "the stored specialist_panel configuration has no 2 to 6 specialists".into()
            );
        }
        let material = material(config.content.as_deref(), &ctx.question);
        let kit = Kit::new(&ctx, config.timeout_ms);
        let n = config.specialists.len();
        let schemas = config.specialists.iter().map(|s| report_schema(&s.criteria)).collect();
        Ok(SpecialistPanel {
            config,
            ctx,
            material,
            outcomes: vec![None; n],
            schemas,
            phase: Phase::Analysing,
            kit,
        })
    }

    fn reports(&self) -> Vec<&SpecialistReport> {
        self.outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::Reported(r)) => Some(r.as_ref()),
                _ => None,
            })
            .collect()
    }

    fn failures(&self) -> Vec<&FailedSpecialist> {
        self.outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::Failed(f)) => Some(f),
                _ => None,
            })
            .collect()
    }

    fn on_specialist(&mut self, i: usize, reply: CallReply) -> Vec<Effect> {
        let s = self.config.specialists[i].clone();
        let mut out = Vec::new();
        let outcome = match &reply.result {
            Ok(text) => {
                let report = answer_text(text).trim().to_string();
                let reading = read_report_reply(&report, &s.criteria, &self.schemas[i]);
                let r = SpecialistReport {
                    index: i,
                    role_key: s.role_key.clone(),
                    role_title: s.title.clone(),
                    model: reply.model.clone(),
                    report,
                    criteria_scores: reading.criteria_scores,
                    average_score: reading.average_score,
                    key_findings: reading.key_findings,
                    top_recommendations: reading.top_recommendations,
                    parse_success: reading.parse_success,
                    unparsed: (!reading.parse_success).then(|| Unparsed::of(text)),
                    read_from: reading.read_from,
                    response_time_ms: reply.response_time_ms as i64,
                };
                out.push(Effect::Store(
                    StageRow::new(
                        format!("{SPECIALIST_PREFIX}{}", s.role_key),
                        SPECIALIST_ORDER,
                        r.report.clone(),
                    )
                    .by(&r.model, &s.role_key)
                    // The text is the row's content; its data is the rest of the report, in the
                    // order rows have always had (`responseTimeMs` in the text's place).
                    .data(&without(&r, "report"))
                    .took(r.response_time_ms),
                ));
                out.push(Effect::event("specialist_complete", &Data { data: &r }));
                Outcome::Reported(Box::new(r))
            }
            Err(e) => Outcome::Failed(FailedSpecialist {
                role_key: s.role_key.clone(),
                role_title: s.title.clone(),
                model: reply.model.clone(),
                error: e.message.clone(),
            }),
        };
        self.outcomes[i] = Some(outcome);
        if self.outcomes.iter().all(Option::is_some) {
            out.extend(self.all_complete());
        }
        out
    }

    /// Every specialist has answered or failed: the synthesis starts, or the run fails.
    fn all_complete(&mut self) -> Vec<Effect> {
        let reports = self.reports();
        let failures = self.failures();
        let done = AllSpecialistsDone {
            specialists: &reports,
            failed_specialists: &failures,
            total_succeeded: reports.len(),
            total_failed: failures.len(),
        };
        let mut out = vec![Effect::event("all_specialists_complete", &Data { data: done })];
        let (succeeded, total) = (reports.len(), self.outcomes.len());
        if succeeded < 2 {
            self.phase = Phase::Done;
            out.extend(self.kit.title.fail(format!(
                "Only {succeeded} of {total} specialists reported; a synthesis needs at least 2."
            )));
            return out;
        }
        // A JSON report reads as its fields.
        let texts: Vec<String> = reports.iter().map(|r| readable(&r.report).into_owned()).collect();
        let reports_in: Vec<ReportIn> = reports
            .iter()
            .zip(&texts)
            .map(|(r, text)| ReportIn { title: &r.role_title, model: &r.model, report: text })
            .collect();
        let missing: Vec<ReportIn> = failures
            .iter()
            .map(|f| ReportIn { title: &f.role_title, model: &f.model, report: "" })
            .collect();
        let prompt = synthesis_prompt(&self.ctx.question, &self.material, &reports_in, &missing);
        let material = std::iter::once(("the material".to_string(), self.material.text.clone()))
            .chain(
                reports
                    .iter()
                    .zip(&texts)
                    .map(|(r, text)| (format!("the {}'s report", r.role_title), text.clone())),
            )
            .collect::<Vec<_>>();
        let spec = self
            .kit
            .ask(
                SYNTHESIS_KEY,
                &self.config.synthesizer_model,
                prompt,
                SYNTHESIS_KEY,
                "synthesizer",
            )
            .quoting(material);
        self.phase = Phase::Synthesizing;
        let backup = self.config.chairman_fallback_model.clone();
        out.push(Effect::empty("synthesis_start"));
        out.push(self.kit.calls.solo(spec, SYNTHESIS_ORDER, backup.as_deref()));
        out
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let text = match &routed.reply.result {
            Ok(t) => answer_text(t).trim().to_string(),
            Err(e) => return self.kit.title.fail(role_failed("synthesizer", &routed, e)),
        };
        let reply = &routed.reply;
        let reading = read_synthesis(&text);
        let mut data = Synthesis {
            model: reply.model.clone(),
            sections: reading.sections,
            counts: reading.counts,
            risk_matrix: reading.risk_matrix,
            top_risk: reading.top_risk,
            response_time_ms: reply.response_time_ms as i64,
            fallback_from: routed.fallback_from.clone(),
            integrated_assessment: None,
        };
        let row = Effect::Store(
            StageRow::new(SYNTHESIS_KEY, SYNTHESIS_ORDER, text.clone())
                .by(&reply.model, "synthesizer")
                .data(&data)
                .took(reply.response_time_ms as i64),
        );
        data.integrated_assessment = Some(text.clone());
        let event = Marked::new(&data, self.kit.calls.failed());
        let mut out = vec![row, Effect::event("synthesis_complete", &event)];
        out.extend(self.kit.title.finish(text));
        out
    }
}

impl Staged for SpecialistPanel {
    fn stage_order(stage: &str) -> i32 {
        if stage.starts_with(SPECIALIST_PREFIX) {
            SPECIALIST_ORDER
        } else if stage == SYNTHESIS_KEY {
            SYNTHESIS_ORDER
        } else {
            PANEL_ORDER
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let roles = roles_of(&self.config.specialists);
        let mut out = vec![
            Effect::event(
                "panel_start",
                &RunStart::new(&self.ctx, "specialist_panel", PanelStart { roles: &roles }),
            ),
            Effect::Store(StageRow::computed(
                PANEL_STAGE,
                PANEL_ORDER,
                to_json(&PanelRow {
                    material: self.material.clone(),
                    roles,
                    synthesizer_model: self.config.synthesizer_model.clone(),
                }),
            )),
            Effect::event(
                "specialist_start",
                &SpecialistStart { total_specialists: self.config.specialists.len() },
            ),
        ];
        let user = specialist_user(&self.ctx.question, &self.material);
        for (i, s) in self.config.specialists.iter().enumerate() {
            // The system message states the reply's format: the sections, or the report's
            // JSON for a model whose route takes structured output.
            let schema = &self.schemas[i];
            let (text, json) = (specialist_system(s, None), specialist_system(s, Some(schema)));
            let system = self.kit.structured.pick(&s.model, &text, &json);
            let call = self
                .kit
                .call(
                    format!("specialist:{i}"),
                    &s.model,
                    vec![ChatMessage::system(system.as_str()), ChatMessage::user(user.clone())],
                    &format!("{SPECIALIST_PREFIX}{}", s.role_key),
                    "specialist",
                )
                .with_schema(schema)
                .quoting([("the material".to_string(), self.material.text.clone())]);
            out.push(Effect::Call(call));
        }
        out.extend(self.kit.ask_title(&self.config.synthesizer_model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let key = routed.reply.key.clone();
        let index = indexed(&key, "specialist");
        match (self.phase, index) {
            (Phase::Analysing, Some(i))
                if i < self.outcomes.len() && self.outcomes[i].is_none() =>
            {
                self.on_specialist(i, routed.reply)
            }
            (Phase::Synthesizing, None) if key == SYNTHESIS_KEY => self.on_synthesis(routed),
            _ => Vec::new(),
        }
    }
}
