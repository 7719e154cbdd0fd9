//! Decompose's state machine: the plan (with its re-asks), the waves of tasks and the assembly.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Planning,
    /// The planner was asked once more (the reason is kept in `reasked`).
    Replanning,
    Running,
    Assembling,
    Done,
}

/// A plan as the planner (or its backup) wrote it, and as it was read.
#[derive(Debug, Clone)]
struct PlanReply {
    reply: String,
    reading: PlanReading,
    /// Where its tasks were read from (None: none could be read).
    read_from: Option<ReadFrom>,
    model: String,
    response_time_ms: u64,
    fallback_from: Option<String>,
}

impl PlanReply {
    /// `text`, read as `read`, from `reply`'s call (a backup's for `fallback_from`).
    fn of(
        text: String,
        read: (PlanReading, Option<ReadFrom>),
        reply: &CallReply,
        fallback_from: Option<String>,
    ) -> PlanReply {
        let (reading, read_from) = read;
        let (model, response_time_ms) = (reply.model.clone(), reply.response_time_ms);
        PlanReply { reply: text, reading, read_from, model, response_time_ms, fallback_from }
    }
}

/// The planner's first answer, kept while it is asked again.
#[derive(Debug, Clone)]
struct FirstPlan {
    plan: PlanReply,
    reason: Reask,
}

pub struct Decompose {
    config: DecomposeConfig,
    ctx: RunContext,
    phase: Phase,
    first: Option<FirstPlan>,
    schedule: Option<Schedule>,
    assignments: Vec<Assignment>,
    /// The wave running (1-based; 0 before the first).
    wave: usize,
    /// Every task that ended, in the order it ended.
    outcomes: Vec<Outcome>,
    /// The plan's reply schema (built once for the run, from its `maxTasks`).
    plan: Arc<ReplySchema>,
    kit: Kit,
}

impl Decompose {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: DecomposeConfig = stored_config("decompose", config)?;
        if !(1..=MAX_WORKERS).contains(&config.worker_models.len()) {
            return Err("the stored decompose configuration has no 1 to 5 workers".into());
        }
        if !(MIN_TASKS..=MAX_TASKS).contains(&config.max_tasks) {
            return Err("the stored decompose configuration has no maxTasks from 3 to 8".into());
        }
        let kit = Kit::new(&ctx, config.timeout_ms);
        let plan = plan_schema(config.max_tasks);
        Ok(Decompose {
            plan,
            config,
            ctx,
            phase: Phase::Planning,
            first: None,
            schedule: None,
            assignments: Vec::new(),
            wave: 0,
            outcomes: Vec::new(),
            kit,
        })
    }

    /// A call of this run; every prompt quotes the question, named for fitting a small context.
    fn call(&self, key: &str, model: &str, messages: Vec<ChatMessage>, stage: &str) -> CallSpec {
        let role = match stage {
            "plan" => "planner",
            "assembly" => "assembler",
            _ => "worker",
        };
        self.kit.call(key, model, messages, stage, role).quoting([self.question()])
    }

    /// The question as quoted material of a prompt (see [`CallSpec::quoting`]).
    fn question(&self) -> (String, String) {
        ("the question".to_string(), self.ctx.question.clone())
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message)
    }

    /// The plan's schema when the planner is asked for its JSON (its route takes structured
    /// output). A backup, and the planner asked again, are asked as the planner was.
    fn plan_json(&self) -> Option<&ReplySchema> {
        self.kit.structured.json(&self.config.planner_model).then_some(self.plan.as_ref())
    }

    /// The planner's reply (or its backup's).
    fn on_plan(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let text = match &reply.result {
            Ok(t) => t.clone(),
            Err(e) => return self.fail(role_failed("planner", &routed, e)),
        };
        let read = read_plan_reply(&text, self.config.max_tasks, &self.plan);
        let plan = PlanReply::of(text, read, reply, routed.fallback_from.clone());
        let tasks = &plan.reading.tasks;
        let reason = if tasks.is_empty() {
            Some(Reask::Format)
        } else if !unschedulable(tasks).is_empty() {
            Some(Reask::Cycle)
        } else {
            None
        };
        let Some(reason) = reason else {
            return self.accept(PlanUse { plan, first: None, set_aside: None });
        };
        let json = self.plan_json();
        let max = self.config.max_tasks;
        let ask = match reason {
            Reask::Format => reminder_prompt(max, json),
            Reask::Cycle => cycle_prompt(&unschedulable(tasks), max, json),
        };
        let first_plan = answer_text(&plan.reply).trim().to_string();
        let messages = vec![
            ChatMessage::user(plan_prompt(&self.ctx.question, max, json)),
            ChatMessage::assistant(first_plan.clone()),
            ChatMessage::user(ask),
        ];
        // Asked of the model that answered (the backup, when it stood in).
        let spec = self
            .call(REPLAN_KEY, &reply.model, messages, "plan")
            .with_schema(&self.plan)
            .quoting([("the first plan".to_string(), first_plan)]);
        self.first = Some(FirstPlan { plan, reason });
        self.phase = Phase::Replanning;
        vec![
            Effect::event(
                "plan_start",
                &Data { data: PlanStart { model: &reply.model, again: Some(reason) } },
            ),
            Effect::Call(spec),
        ]
    }

    /// The planner's second answer: it replaces the first when it parses (and, asked about a
    /// cycle, is acyclic); otherwise the first is used, its cycle repaired, or the run fails
    /// when no task could be read from either.
    fn on_replan(&mut self, reply: CallReply) -> Vec<Effect> {
        let Some(first) = self.first.clone() else { return Vec::new() };
        let fallback_from = first.plan.fallback_from.clone();
        let second = reply.result.as_ref().ok().map(|t| {
            let read = read_plan_reply(t, self.config.max_tasks, &self.plan);
            PlanReply::of(t.clone(), read, &reply, fallback_from.clone())
        });
        let usable = second.as_ref().filter(|p| {
            let tasks = &p.reading.tasks;
            !tasks.is_empty() && (first.reason == Reask::Format || unschedulable(tasks).is_empty())
        });
        if let Some(plan) = usable.cloned() {
            return self.accept(PlanUse { plan, first: Some(first), set_aside: None });
        }
        if first.reason == Reask::Cycle {
            let set_aside = second.map(|p| (p.reply, p.read_from));
            return self.accept(PlanUse {
                plan: first.plan.clone(),
                first: Some(first),
                set_aside,
            });
        }
        // Nothing readable twice: the plan row keeps what the planner wrote, then the run fails.
        let (text, reading) = second
            .map(|p| (p.reply, p.reading))
            .unwrap_or((first.plan.reply.clone(), PlanReading::default()));
        let plan = PlanReply::of(text, (reading, None), &reply, fallback_from);
        let model = first.plan.model.clone();
        let mut out = self.store_plan(&PlanUse { plan, first: Some(first), set_aside: None }, None);
        out.extend(self.fail(format!(
            "No task could be read from the planner's plan ({model}), even after a reminder of \
             the format."
        )));
        out
    }

    /// The `plan` row and `plan_complete` (and `assignment_complete` when there is a schedule).
    fn store_plan(&mut self, plan: &PlanUse, schedule: Option<&Schedule>) -> Vec<Effect> {
        let empty = Schedule {
            tasks: Vec::new(),
            waves: Vec::new(),
            critical_path: Vec::new(),
            max_parallelism: 0,
            dropped: Vec::new(),
        };
        let s = schedule.unwrap_or(&empty);
        let (first, set_aside, plan) = (plan.first.as_ref(), &plan.set_aside, &plan.plan);
        let mut warnings = plan.reading.warnings.clone();
        if !s.dropped.is_empty() {
            warnings.push(format!(
                "The dependencies formed a cycle: {} dependenc{} on later tasks dropped.",
                s.dropped.len(),
                if s.dropped.len() == 1 { "y" } else { "ies" }
            ));
        }
        let replanned = first.is_some_and(|f| f.plan.reply != plan.reply);
        let data = PlanData {
            model: plan.model.clone(),
            tasks: s.tasks.clone(),
            execution_waves: s.waves.clone(),
            critical_path: s.critical_path.clone(),
            max_parallelism: s.max_parallelism,
            warnings,
            replanned,
            reasked: first.map(|f| f.reason),
            dropped_dependencies: s.dropped.clone(),
            response_time_ms: plan.response_time_ms,
            fallback_from: plan.fallback_from.clone(),
            // Only a plan with a task to run was read.
            read_from: plan.read_from,
        };
        let stored = Plan {
            data,
            assignments: self.assignments.clone(),
            first_reply: first.map(|f| f.plan.reply.clone()),
            first_read_from: first.and_then(|f| f.plan.read_from).filter(|_| replanned),
            // The plan asked for again and set aside (the first plan kept): kept too, and how
            // it was read.
            set_aside_reply: set_aside.as_ref().map(|(text, _)| text.clone()),
            set_aside_read_from: set_aside.as_ref().and_then(|(_, from)| *from),
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new("plan", PLAN_ORDER, plan.reply.clone())
                    .by(&plan.model, "planner")
                    .data(&stored)
                    .took(plan.response_time_ms as i64),
            ),
            Effect::event("plan_complete", &Data { data: &stored.data }),
        ];
        if schedule.is_some() {
            out.push(Effect::event(
                "assignment_complete",
                &Data { data: Assignments { assignments: &self.assignments } },
            ));
        }
        out
    }

    /// Runs a plan: scheduled (a cycle repaired), stored, and its first wave started.
    fn accept(&mut self, plan: PlanUse) -> Vec<Effect> {
        let Some(schedule) = schedule(&plan.plan.reading.tasks, true) else { return Vec::new() };
        let tasks = schedule.tasks.clone();
        let index: Vec<Vec<usize>> = schedule
            .waves
            .iter()
            .map(|w| w.iter().filter_map(|id| tasks.iter().position(|t| &t.id == id)).collect())
            .collect();
        self.assignments = assign(&tasks, &index, &self.config.worker_models);
        let mut out = self.store_plan(&plan, Some(&schedule));
        self.schedule = Some(schedule);
        self.phase = Phase::Running;
        out.extend(self.next_wave());
        out
    }

    fn task(&self, id: &str) -> Option<&Task> {
        self.schedule.as_ref()?.tasks.iter().find(|t| t.id == id)
    }

    fn assignment(&self, id: &str) -> Option<&Assignment> {
        self.assignments.iter().find(|a| a.task_id == id)
    }

    fn wave_ids(&self, wave: usize) -> Vec<String> {
        self.schedule
            .as_ref()
            .and_then(|s| s.waves.get(wave.wrapping_sub(1)).cloned())
            .unwrap_or_default()
    }

    fn wave_count(&self) -> usize {
        self.schedule.as_ref().map_or(0, |s| s.waves.len())
    }

    /// The next wave, or the skipped rest and the assembly once the time limit has passed or
    /// every wave has run.
    fn next_wave(&mut self) -> Vec<Effect> {
        if self.kit.deadline_passed {
            let mut out = self.skip_rest();
            out.extend(self.assemble());
            return out;
        }
        if self.wave >= self.wave_count() {
            return self.assemble();
        }
        self.wave += 1;
        let ids = self.wave_ids(self.wave);
        let tasks = ids
            .iter()
            .map(|id| Listed {
                task_id: id,
                title: self.task(id).map(|t| t.title.clone()),
                model: self.assignment(id).map(|a| a.model.clone()),
            })
            .collect();
        let mut out = vec![Effect::event(
            "wave_start",
            &WaveEvent { wave: self.wave, data: WaveTasks { tasks } },
        )];
        for id in ids {
            let (Some(task), Some(a)) = (self.task(&id), self.assignment(&id)) else { continue };
            let order = a.wave as i32;
            let given: Vec<Given> = task
                .dependencies
                .iter()
                .map(|d| Given {
                    id: d.clone(),
                    title: self.task(d).map_or_else(|| d.clone(), |t| t.title.clone()),
                    output: self
                        .outcomes
                        .iter()
                        .find(|o| &o.task_id == d && o.status == Status::Completed)
                        .map(|o| o.output.clone()),
                })
                .collect();
            let prompt = task_prompt(&self.ctx.question, task, &given);
            // The dependencies' outputs, named for fitting a small context.
            let quoted: Vec<(String, String)> = given
                .iter()
                .filter_map(|g| Some((format!("the output of {}", g.id), g.output.clone()?)))
                .collect();
            let call =
                self.call(&format!("task:{id}"), &a.model, vec![ChatMessage::user(prompt)], &id);
            // Registered with its wave as the stage order (a task is its own stage).
            out.push(self.kit.calls.solo(call.quoting(quoted), order, None));
        }
        out
    }

    fn on_task(&mut self, id: &str, reply: CallReply) -> Vec<Effect> {
        let in_wave = self.wave_ids(self.wave).iter().any(|w| w == id);
        if !in_wave || self.outcomes.iter().any(|o| o.task_id == id) {
            return Vec::new();
        }
        let title = self.task(id).map_or_else(|| id.to_string(), |t| t.title.clone());
        let ms = Some(reply.response_time_ms as i64);
        let outcome = match &reply.result {
            Ok(t) => {
                let output = answer_text(t).trim().to_string();
                Outcome {
                    task_id: id.to_string(),
                    title,
                    model: reply.model.clone(),
                    status: Status::Completed,
                    word_count: word_count(&output),
                    output,
                    response_time_ms: ms,
                    error: None,
                }
            }
            Err(e) => Outcome {
                task_id: id.to_string(),
                title,
                model: reply.model.clone(),
                status: Status::Failed,
                output: String::new(),
                word_count: 0,
                response_time_ms: ms,
                error: Some(e.message.clone()),
            },
        };
        let mut out = vec![
            task_row(&outcome, self.wave),
            Effect::event("task_complete", &WaveEvent { wave: self.wave, data: &outcome }),
        ];
        self.outcomes.push(outcome);
        let ids = self.wave_ids(self.wave);
        let ended: Vec<&Outcome> =
            self.outcomes.iter().filter(|o| ids.contains(&o.task_id)).collect();
        if ended.len() == ids.len() {
            let completed = ended.iter().filter(|o| o.status == Status::Completed).count();
            let data = WaveDone { completed, failed: ended.len() - completed };
            out.push(Effect::event("wave_complete", &WaveEvent { wave: self.wave, data }));
            out.extend(self.next_wave());
        }
        out
    }

    /// Every task of the waves not started, stored as skipped (the time limit passed).
    fn skip_rest(&mut self) -> Vec<Effect> {
        let mut out = Vec::new();
        for w in self.wave + 1..=self.wave_count() {
            for id in self.wave_ids(w) {
                let o = Outcome {
                    task_id: id.clone(),
                    title: self.task(&id).map_or_else(|| id.clone(), |t| t.title.clone()),
                    model: self.assignment(&id).map(|a| a.model.clone()).unwrap_or_default(),
                    status: Status::Skipped,
                    output: String::new(),
                    word_count: 0,
                    response_time_ms: None,
                    error: Some(format!(
                        "the run's time limit ({} s) passed before its wave",
                        self.config.global_timeout_ms / 1000
                    )),
                };
                out.push(task_row(&o, w));
                self.outcomes.push(o);
            }
        }
        self.wave = self.wave_count();
        out
    }

    /// The outcomes in schedule order (wave by wave, plan order within a wave).
    fn in_schedule_order(&self) -> Vec<&Outcome> {
        let Some(s) = &self.schedule else { return Vec::new() };
        s.waves
            .iter()
            .flatten()
            .filter_map(|id| self.outcomes.iter().find(|o| &o.task_id == id))
            .collect()
    }

    fn assemble(&mut self) -> Vec<Effect> {
        let ordered: Vec<Outcome> = self.in_schedule_order().into_iter().cloned().collect();
        let produced: Vec<Produced> = ordered
            .iter()
            .filter(|o| o.status == Status::Completed)
            .map(|o| Produced {
                id: o.task_id.clone(),
                title: o.title.clone(),
                model: o.model.clone(),
                output: o.output.clone(),
            })
            .collect();
        if produced.is_empty() {
            let n = self.schedule.as_ref().map_or(0, |s| s.tasks.len());
            return self.fail(format!(
                "No task produced an output ({n} planned: each failed or was skipped); the plan \
                 is kept."
            ));
        }
        let missing: Vec<Missing> = ordered
            .iter()
            .filter(|o| o.status != Status::Completed)
            .map(|o| Missing {
                id: o.task_id.clone(),
                title: o.title.clone(),
                reason: match o.status {
                    Status::Skipped => "skipped: the run's time limit passed first".into(),
                    _ => format!("failed ({})", o.error.as_deref().unwrap_or("no output")),
                },
            })
            .collect();
        let tasks = self.schedule.as_ref().map(|s| s.tasks.clone()).unwrap_or_default();
        let prompt = assembly_prompt(&self.ctx.question, &tasks, &produced, &missing);
        let quoted: Vec<(String, String)> = produced
            .iter()
            .map(|p| (format!("the output of {}", p.id), p.output.clone()))
            .collect();
        let spec = self
            .call(
                "assembly",
                &self.config.assembler_model.clone(),
                vec![ChatMessage::user(prompt)],
                "assembly",
            )
            .quoting(quoted);
        self.phase = Phase::Assembling;
        let skipped: Vec<&str> = ordered
            .iter()
            .filter(|o| o.status == Status::Skipped)
            .map(|o| o.task_id.as_str())
            .collect();
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::event(
                "assembly_start",
                &Data { data: AssemblyStart { model: &self.config.assembler_model, skipped } },
            ),
            self.kit.calls.solo(spec, ASSEMBLY_ORDER, backup.as_deref()),
        ]
    }

    fn on_assembly(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let a = Assembled::of(&routed, || concatenated(&self.in_schedule_order()));
        let data = to_json(&Assembly {
            model: a.model.clone(),
            response: a.text.clone(),
            fallback: a.fallback(),
            response_time_ms: a.response_time_ms,
            fallback_from: a.fallback_from.clone(),
        });
        self.kit.calls.assembled(a, ASSEMBLY_ORDER, data, "response", &mut self.kit.title)
    }
}

/// The plan a run goes on with (or stores before it fails).
struct PlanUse {
    plan: PlanReply,
    first: Option<FirstPlan>,
    /// The reply asked for again, when it was set aside for the first (it still had a cycle,
    /// or could not be read): its text and where it was read from.
    set_aside: Option<(String, Option<ReadFrom>)>,
}

/// A task's row: its id as the stage type, its wave as the stage order.
fn task_row(o: &Outcome, wave: usize) -> Effect {
    let parsed = TaskRow {
        task_id: o.task_id.clone(),
        title: o.title.clone(),
        wave,
        status: o.status,
        word_count: o.word_count,
        error: o.error.clone(),
    };
    Effect::Store(
        StageRow::new(o.task_id.clone(), wave as i32, o.output.clone())
            .model(Some(o.model.clone()).filter(|m| !m.is_empty()))
            .role("worker")
            .data(&parsed)
            .took(o.response_time_ms),
    )
}

/// The answer when the assembler and its backup failed: the outputs in schedule order, each
/// under `## <id>: <title>`, separated by `---`.
pub fn concatenated(ordered: &[&Outcome]) -> String {
    ordered
        .iter()
        .filter(|o| o.status == Status::Completed)
        .map(|o| format!("## {}: {}\n\n{}", o.task_id, o.title, o.output))
        .collect::<Vec<_>>()
        .join("\n\n---\n\n")
}

impl Staged for Decompose {
    /// A call's stage → the stage order of its rows: the plan 0, the assembly 99 (a task's
    /// call is registered with its wave when it starts).
    fn stage_order(stage: &str) -> i32 {
        match stage {
            "assembly" => ASSEMBLY_ORDER,
            _ => PLAN_ORDER,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let c = &self.config;
        let mut out = vec![
            Effect::event(
                "decompose_start",
                &RunStart::new(
                    &self.ctx,
                    "decompose",
                    Start {
                        config: StartConfig {
                            planner_model: &c.planner_model,
                            worker_models: &c.worker_models,
                            assembler_model: &c.assembler_model,
                            max_tasks: c.max_tasks,
                            timeout_ms: c.timeout_ms,
                            global_timeout_ms: c.global_timeout_ms,
                        },
                    },
                ),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: c.global_timeout_ms },
            Effect::event(
                "plan_start",
                &Data { data: PlanStart { model: &c.planner_model, again: None } },
            ),
        ];
        // Asked for the plan's JSON when the planner's route takes it (the backup takes the
        // same prompt: it is asked as the planner is).
        let (q, max) = (&self.ctx.question, self.config.max_tasks);
        let asking = Asking::new(self.plan.clone(), |json| plan_prompt(q, max, json));
        let spec = asking
            .call(&self.kit, "plan", &self.config.planner_model, "plan", "planner")
            .quoting([self.question()]);
        let backup = self.config.facilitator_fallback_model.clone();
        out.push(self.kit.calls.solo(spec, PLAN_ORDER, backup.as_deref()));
        out.extend(self.kit.ask_title(&self.config.planner_model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let key = routed.reply.key.clone();
        let task = key.strip_prefix("task:").map(str::to_string);
        match (self.phase, task) {
            (Phase::Planning, _) if key == "plan" => self.on_plan(routed),
            (Phase::Replanning, _) if key == REPLAN_KEY => self.on_replan(routed.reply),
            (Phase::Running, Some(id)) => self.on_task(&id, routed.reply),
            (Phase::Assembling, _) if key == "assembly" => self.on_assembly(routed),
            _ => Vec::new(),
        }
    }
}
