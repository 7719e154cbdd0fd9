//! The red-team state machine: generate, then attack and defend round by round, then synthesize.

use super::*;
use crate::modes::runner::GLOBAL_TIMER;

const SYNTHESIS_ORDER: i32 = 99;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Generating,
    Attacking(u32),
    Defending(u32),
    Synthesizing,
    Done,
}

pub struct RedTeam {
    config: RedTeamConfig,
    ctx: RunContext,
    material: Material,
    phase: Phase,
    structured: String,
    current: String,
    rounds: Vec<Round>,
    stop_reason: Option<&'static str>,
    /// The attack's reply schema (the same every round).
    attack_schema: Arc<ReplySchema>,
    /// The defense's reply schema of the round being defended (it counts that round's
    /// findings).
    defense_schema: Option<Arc<ReplySchema>>,
    kit: Kit,
}

impl RedTeam {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: RedTeamConfig = stored_config("red_team", config)?;
        let material = material(config.content.as_deref(), &ctx.question, config.max_input_length);
        let kit = Kit::new(&ctx, config.timeout_ms);
        Ok(RedTeam {
            config,
            ctx,
            material,
            phase: Phase::Generating,
            structured: String::new(),
            current: String::new(),
            rounds: Vec::new(),
            stop_reason: None,
            attack_schema: attack_schema(),
            defense_schema: None,
            kit,
        })
    }

    fn on_generate(&mut self, reply: CallReply) -> Vec<Effect> {
        let text = reply.result.as_ref().ok().map(|t| answer_text(t).trim().to_string());
        let fallback = text.is_none();
        self.structured = text.unwrap_or_else(|| self.material.text.clone());
        self.current = self.structured.clone();
        let data = Generated {
            model: reply.model.clone(),
            structured_content: Some(self.structured.clone()),
            fallback,
            response_time_ms: reply.response_time_ms,
            material: None,
        };
        let parsed = Generated {
            structured_content: None,
            material: Some(self.material.clone()),
            ..data.clone()
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new("generate", 0, self.structured.clone())
                    .by(&reply.model, "generator")
                    .data(&parsed)
                    .took(reply.response_time_ms as i64),
            ),
            Effect::event("generate_complete", &Data { data }),
        ];
        out.extend(self.next_round(1));
        out
    }

    /// Round `r` starts, unless the rounds are over or the time is up.
    fn next_round(&mut self, r: u32) -> Vec<Effect> {
        if r > self.config.rounds {
            return self.synthesize();
        }
        if self.kit.deadline_passed {
            self.stop_reason = Some("global timeout");
            return self.synthesize();
        }
        let previous = self.rounds.last().map(|p| previous_round_text(&p.findings, &p.responses));
        let asking = Asking::new(self.attack_schema.clone(), |json| {
            attack_prompt(&self.ctx.question, r, &self.current, previous.as_deref(), json)
        });
        self.phase = Phase::Attacking(r);
        let call = asking
            .call(
                &self.kit,
                format!("attack:{r}"),
                &self.config.attacker_model,
                &format!("attack_round_{r}"),
                "attacker",
            )
            .quoting([
                ("the content".to_string(), self.current.clone()),
                ("the previous round".to_string(), previous.unwrap_or_default()),
            ]);
        vec![Effect::event("attack_start", &RoundStart { round: r }), Effect::Call(call)]
    }

    fn on_attack(&mut self, r: u32, reply: CallReply) -> Vec<Effect> {
        let failed = reply.result.is_err();
        let raw = reply.result.clone().unwrap_or_default();
        let (reading, read_from) = if failed {
            let nothing = AttackReading {
                findings: vec![],
                reported_summary: None,
                overall_risk: None,
                no_flaws: false,
                parse_success: false,
            };
            (nothing, None)
        } else {
            read_attack_reply(&raw, &self.attack_schema)
        };
        let data = Attack {
            model: reply.model.clone(),
            findings: reading.findings.clone(),
            severity_counts: severity_counts(reading.findings.iter().map(|f| f.severity.as_str())),
            reported_summary: reading.reported_summary.clone(),
            overall_risk: reading.overall_risk.clone(),
            no_flaws: reading.no_flaws,
            parse_success: reading.parse_success,
            unparsed: (!failed && !reading.parse_success).then(|| Unparsed::of(&raw)),
            failed,
            response_time_ms: reply.response_time_ms,
            read_from,
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new(format!("attack_round_{r}"), (2 * r - 1) as i32, raw.clone())
                    .by(&reply.model, "attacker")
                    .data(&data)
                    .took(reply.response_time_ms as i64),
            ),
            Effect::event("attack_complete", &RoundData { round: r, data }),
        ];
        self.rounds.push(Round {
            round: r,
            findings: reading.findings.clone(),
            responses: unaddressed(&reading.findings),
        });
        if failed {
            self.stop_reason = Some("attacker failed");
            out.extend(self.synthesize());
            return out;
        }
        if reading.no_flaws {
            self.stop_reason = Some("no flaws");
            out.extend(self.synthesize());
            return out;
        }
        if self.kit.deadline_passed {
            self.stop_reason = Some("global timeout");
            out.extend(self.synthesize());
            return out;
        }
        // The raw report goes to the defender only when its findings were not read one by
        // one; a JSON reply reads as fields.
        let report = readable(&raw).into_owned();
        let schema = defense_schema(reading.findings.len(), self.current.chars().count());
        let asking = Asking::new(schema, |json| {
            defend_prompt(&self.ctx.question, &self.current, &reading.findings, &report, json)
        });
        self.phase = Phase::Defending(r);
        let raw_quoted = if reading.findings.is_empty() { report.clone() } else { String::new() };
        let call = asking
            .call(
                &self.kit,
                format!("defend:{r}"),
                &self.config.generator_model,
                &format!("defend_round_{r}"),
                "generator",
            )
            .quoting([
                ("the content".to_string(), self.current.clone()),
                ("the attacker's report".to_string(), raw_quoted),
            ]);
        self.defense_schema = Some(asking.schema);
        out.push(Effect::event("defend_start", &RoundStart { round: r }));
        out.push(Effect::Call(call));
        out
    }

    fn on_defend(&mut self, r: u32, reply: CallReply) -> Vec<Effect> {
        let findings = self.rounds.last().map(|x| x.findings.clone()).unwrap_or_default();
        let failed = reply.result.is_err();
        let raw = reply.result.clone().unwrap_or_default();
        let schema = self
            .defense_schema
            .take()
            .unwrap_or_else(|| defense_schema(findings.len(), self.current.chars().count()));
        let (reading, read_from) = if failed {
            (DefenseReading { responses: unaddressed(&findings), revised_content: None }, None)
        } else {
            read_defense_reply(&raw, &findings, &schema)
        };
        let found = reading.revised_content.is_some();
        if let Some(revised) = &reading.revised_content {
            self.current = revised.clone();
        }
        let count = |v: &str| reading.responses.iter().filter(|r| r.verdict == v).count();
        let data = Defense {
            model: reply.model.clone(),
            responses: reading.responses.clone(),
            accepted: count("ACCEPT"),
            rebutted: count("REBUT"),
            unaddressed: count("UNADDRESSED"),
            revised_content: Some(self.current.clone()),
            revised_content_found: found,
            failed,
            response_time_ms: reply.response_time_ms,
            read_from,
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new(format!("defend_round_{r}"), (2 * r) as i32, raw)
                    .by(&reply.model, "generator")
                    .parsed(data.row(self.current.chars().count()))
                    .took(reply.response_time_ms as i64),
            ),
            Effect::event("defend_complete", &RoundData { round: r, data }),
        ];
        if let Some(last) = self.rounds.last_mut() {
            last.responses = reading.responses;
        }
        out.extend(self.next_round(r + 1));
        out
    }

    fn synthesize(&mut self) -> Vec<Effect> {
        self.phase = Phase::Synthesizing;
        let history: String = self
            .rounds
            .iter()
            .map(|r| {
                format!("Round {}:\n{}", r.round, previous_round_text(&r.findings, &r.responses))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let audit = audit_table(&self.rounds);
        let prompt = synthesize_prompt(
            &self.ctx.question,
            &self.structured,
            &self.current,
            if history.is_empty() { "(no rounds)" } else { &history },
            &audit,
        );
        let spec = self
            .kit
            .ask(
                "synthesis",
                &self.config.synthesizer_model.clone(),
                prompt,
                "synthesis",
                "synthesizer",
            )
            .quoting([
                ("the structured original".to_string(), self.structured.clone()),
                ("the final revision".to_string(), self.current.clone()),
                ("the rounds' findings and responses".to_string(), history),
            ]);
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::empty("synthesize_start"),
            self.kit.calls.solo(spec, SYNTHESIS_ORDER, backup.as_deref()),
        ]
    }

    fn on_synthesis(&mut self, routed: Routed) -> Vec<Effect> {
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.kit.title.fail(role_failed("synthesizer", &routed, e));
            }
        };
        let reply = &routed.reply;
        let reading = read_synthesis(&text);
        let data = Synthesis {
            model: reply.model.clone(),
            hardened_output: reading.hardened_output,
            audit_summary: reading.audit_summary,
            hardening_confidence: reading.hardening_confidence,
            totals: totals(&self.rounds),
            stop_reason: self.stop_reason.map(str::to_string),
            response_time_ms: reply.response_time_ms,
            fallback_from: routed.fallback_from.clone(),
        };
        let event = Marked::new(data.clone(), self.kit.calls.failed());
        self.phase = Phase::Done;
        let mut out = vec![
            Effect::Store(
                StageRow::new("synthesis", SYNTHESIS_ORDER, text.clone())
                    .by(&reply.model, "synthesizer")
                    .data(&data)
                    .took(reply.response_time_ms as i64),
            ),
            Effect::event("synthesize_complete", &event),
        ];
        out.extend(self.kit.title.finish(text));
        out
    }
}

fn audit_table(rounds: &[Round]) -> String {
    let mut s = String::new();
    for r in rounds {
        for resp in &r.responses {
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                resp.title, resp.severity, resp.verdict, r.round
            ));
        }
    }
    if s.is_empty() {
        s.push_str("(no findings)\n");
    }
    s
}

impl Staged for RedTeam {
    fn stage_order(stage: &str) -> i32 {
        let n = |p: &str| stage.strip_prefix(p).and_then(|n| n.parse::<i32>().ok());
        match (n("attack_round_"), n("defend_round_")) {
            (Some(r), _) => 2 * r - 1,
            (_, Some(r)) => 2 * r,
            _ if stage == "synthesis" => SYNTHESIS_ORDER,
            _ => 0,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event(
                "redteam_start",
                &RunStart::new(
                    &self.ctx,
                    "red_team",
                    RedTeamStart { total_rounds: self.config.rounds },
                ),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
            Effect::empty("generate_start"),
        ];
        let prompt = generate_prompt(&self.ctx.question, &self.material);
        let model = self.config.generator_model.clone();
        let spec = self
            .kit
            .ask("generate", &model, prompt, "generate", "generator")
            .quoting([("the material".to_string(), self.material.text.clone())]);
        out.push(Effect::Call(spec));
        out.extend(self.kit.ask_title(&model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let key = routed.reply.key.clone();
        match self.phase {
            Phase::Generating if key == "generate" => self.on_generate(routed.reply),
            Phase::Attacking(r) if key == format!("attack:{r}") => self.on_attack(r, routed.reply),
            Phase::Defending(r) if key == format!("defend:{r}") => self.on_defend(r, routed.reply),
            Phase::Synthesizing if key == "synthesis" => self.on_synthesis(routed),
            _ => Vec::new(),
        }
    }
}
