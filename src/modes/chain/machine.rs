//! The chain's state machine: one step at a time, each stored as it completes or is skipped.

use super::*;
use crate::modes::runner::GLOBAL_TIMER;

pub struct Chain {
    config: ChainConfig,
    ctx: RunContext,
    /// The step in flight (1-based); 0 before the start and after the end.
    current: usize,
    steps: Vec<StepResult>,
    kit: Kit,
}

impl Chain {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: ChainConfig = stored_config("chain", config)?;
        if !(2..=6).contains(&config.steps.len()) {
            return Err("the stored chain configuration has no 2 to 6 steps".into());
        }
        let kit = Kit::new(&ctx, config.timeout_ms);
        Ok(Chain { config, ctx, current: 0, steps: Vec::new(), kit })
    }

    fn total(&self) -> usize {
        self.config.steps.len()
    }

    /// The last completed step.
    fn latest(&self) -> Option<&StepResult> {
        self.steps.iter().rev().find(|s| !s.skipped)
    }

    /// The steps skipped since the last completed one.
    fn skipped_since(&self) -> Vec<&StepResult> {
        let from = self.latest().map_or(0, |l| l.step);
        self.steps.iter().filter(|s| s.skipped && s.step > from).collect()
    }

    fn role(k: usize) -> &'static str {
        if k == 1 {
            "drafter"
        } else {
            "improver"
        }
    }

    fn step_row(&self, s: &StepResult) -> Effect {
        Effect::Store(
            StageRow::new(format!("chain_step_{}", s.step), s.step as i32, s.content.clone())
                .by(&s.model, Self::role(s.step))
                .data(&s.row_data())
                .took(s.response_time_ms),
        )
    }

    /// Step `k` starts (or, past the deadline, it and every later one are skipped).
    fn run_step(&mut self, k: usize) -> Vec<Effect> {
        if k > self.total() {
            return self.complete();
        }
        if self.kit.deadline_passed {
            let mut out = Vec::new();
            for j in k..=self.total() {
                out.extend(self.skip(j, "global timeout", None));
            }
            out.extend(self.complete());
            return out;
        }
        let step = self.config.steps[k - 1].clone();
        let latest = self.latest().cloned();
        let skipped: Vec<Skipped> = self
            .skipped_since()
            .iter()
            .map(|s| {
                let c = &self.config.steps[s.step - 1];
                Skipped {
                    step: s.step,
                    mandate: s.mandate_display.clone(),
                    focus: c.focus().into(),
                }
            })
            .collect();
        let prompt = match &latest {
            None => draft_prompt(&self.ctx.question, self.total(), &step),
            Some(l) => improve_prompt(
                &self.ctx.question,
                k,
                self.total(),
                &step,
                &l.content,
                l.step,
                &skipped,
            ),
        };
        self.current = k;
        let mut out = vec![Effect::event(
            "chain_step_start",
            &StepStart {
                step: k,
                model: step.model.clone(),
                mandate: step.mandate,
                based_on_step: latest.as_ref().map(|l| l.step),
                skipped_before: skipped.iter().map(|s| s.step).collect(),
            },
        )];
        out.push(Effect::Call(self.kit.ask(
            format!("step:{k}"),
            &step.model,
            prompt,
            &format!("chain_step_{k}"),
            Self::role(k),
        )));
        out
    }

    /// Step `k` as done with `text` (None: skipped for `reason`), on the latest version.
    fn result(&self, k: usize, text: Option<String>, reason: &str, ms: Option<i64>) -> StepResult {
        let step = &self.config.steps[k - 1];
        let previous = self.latest().map_or(0, |l| l.word_count);
        let words = text.as_deref().map_or(0, word_count);
        StepResult {
            step: k,
            model: step.model.clone(),
            mandate: step.mandate,
            mandate_display: step.mandate.display().into(),
            custom_mandate: step.custom_mandate.clone(),
            based_on_step: self.latest().map(|l| l.step),
            editor_notes: text.as_deref().map(editor_notes).unwrap_or_default(),
            word_count: words,
            previous_word_count: previous,
            word_count_delta: if text.is_some() { words as i64 - previous as i64 } else { 0 },
            skipped: text.is_none(),
            skip_reason: text.is_none().then(|| reason.to_string()),
            content: text.unwrap_or_default(),
            response_time_ms: ms,
            total_steps: self.total(),
        }
    }

    fn skip(&mut self, k: usize, reason: &str, ms: Option<i64>) -> Vec<Effect> {
        let s = self.result(k, None, reason, ms);
        let step = self.config.steps[k - 1].clone();
        let out = vec![
            self.step_row(&s),
            Effect::event(
                "chain_step_skipped",
                &StepEvent {
                    step: k,
                    data: StepSkipped {
                        model: step.model,
                        mandate: step.mandate,
                        reason: reason.into(),
                    },
                },
            ),
        ];
        self.steps.push(s);
        out
    }

    fn on_step(&mut self, k: usize, reply: CallReply) -> Vec<Effect> {
        let text = match &reply.result {
            Ok(t) => answer_text(t).trim().to_string(),
            Err(e) if k == 1 => {
                self.current = 0;
                return self.kit.title.fail(format!(
                    "The first step ({}) failed: {}; there is nothing to improve.",
                    reply.model, e.message
                ));
            }
            Err(e) => {
                let mut out = self.skip(k, &e.message, Some(reply.response_time_ms as i64));
                out.extend(self.run_step(k + 1));
                return out;
            }
        };
        let mut s = self.result(k, Some(text), "", Some(reply.response_time_ms as i64));
        // The member's name in events, as every mode gives it.
        s.model = reply.model.clone();
        let mut out = vec![
            self.step_row(&s),
            Effect::event("chain_step_complete", &StepEvent { step: k, data: Completed::of(&s) }),
        ];
        self.steps.push(s);
        out.extend(self.run_step(k + 1));
        out
    }

    fn complete(&mut self) -> Vec<Effect> {
        self.current = 0;
        let Some(last) = self.latest().cloned() else {
            return self.kit.title.fail("No step completed.".into());
        };
        let event = Marked::new(summary(&self.steps), self.kit.calls.failed());
        let mut out = vec![Effect::event("chain_complete", &event)];
        out.extend(self.kit.title.finish(last.content));
        out
    }
}

impl Staged for Chain {
    fn stage_order(stage: &str) -> i32 {
        stage.strip_prefix("chain_step_").and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let steps: Vec<PlannedStep> = self
            .config
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| PlannedStep {
                step: i + 1,
                model: s.model.clone(),
                mandate: s.mandate,
                mandate_display: s.mandate.display().into(),
            })
            .collect();
        let mut out = vec![
            Effect::event(
                "chain_start",
                &RunStart::new(&self.ctx, "chain", ChainStart { total_steps: self.total(), steps }),
            ),
            // The plan, so a run that stops before any step is stored still says how long
            // its chain was.
            Effect::Store(
                StageRow::new(PLAN, 0, String::new()).data(&PlanData { total_steps: self.total() }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
        ];
        out.extend(self.run_step(1));
        let model = self.config.steps[0].model.clone();
        out.extend(self.kit.ask_title(&model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let k = self.current;
        if k > 0 && routed.reply.key == format!("step:{k}") {
            return self.on_step(k, routed.reply);
        }
        Vec::new()
    }
}
