//! The Clarity state machine (evaluation, discussion, arbitration) and what it computes:
//! disagreement, the final scores and the consolidated critique.

use super::*;

use std::collections::BTreeMap;

use crate::modes::reading::Unparsed;

// ---- disagreement, final score, critique ----------------------------------------------------

/// How far the evaluators' scores were apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    /// Some dimension's (or the overall) spread is above 2.
    pub has_disagreement: bool,
    /// The dimensions whose spread is above 2 (the Arbiter's disputed dimensions).
    pub disagreeing_dimensions: Vec<String>,
    /// The largest spread, over the dimensions and the overall score.
    pub max_spread: f64,
    /// The spread of the weighted overall scores.
    pub overall_spread: f64,
    /// The spread (highest minus lowest score) by dimension key.
    pub spreads: BTreeMap<String, f64>,
    /// role -> dimension -> score.
    pub evaluator_positions: BTreeMap<String, BTreeMap<String, Option<f64>>>,
}

fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    if v.len() < 2 {
        return 0.0;
    }
    let max = v.iter().cloned().fold(f64::MIN, f64::max);
    let min = v.iter().cloned().fold(f64::MAX, f64::min);
    ((max - min) * 10.0).round() / 10.0
}

/// The PRD's `detectDisagreement`: a spread > 2 on any dimension or overall.
pub fn detect_disagreement(verdicts: &[Verdict]) -> Disagreement {
    let mut spreads = BTreeMap::new();
    let mut disagreeing = Vec::new();
    for (i, d) in DIMENSIONS.iter().enumerate() {
        let s = spread(verdicts.iter().filter_map(|v| v.scores[i]));
        if s > DISAGREEMENT_SPREAD {
            disagreeing.push(d.key.to_string());
        }
        spreads.insert(d.key.to_string(), s);
    }
    let overall_spread = spread(verdicts.iter().filter_map(|v| v.overall));
    let max_spread = spreads.values().cloned().fold(overall_spread, f64::max);
    let evaluator_positions = verdicts
        .iter()
        .map(|v| {
            (
                v.role.clone(),
                DIMENSIONS.iter().zip(&v.scores).map(|(d, s)| (d.key.to_string(), *s)).collect(),
            )
        })
        .collect();
    Disagreement {
        has_disagreement: !disagreeing.is_empty() || overall_spread > DISAGREEMENT_SPREAD,
        disagreeing_dimensions: disagreeing,
        max_spread,
        overall_spread,
        spreads,
        evaluator_positions,
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n.is_multiple_of(2) { (v[n / 2 - 1] + v[n / 2]) / 2.0 } else { v[n / 2] })
}

/// Per-dimension final scores: the median of the evaluators' (current) scores, except on
/// disputed dimensions the Arbiter scored, where it counts 1.5 times against one each.
pub fn final_scores(verdicts: &[Verdict], arbiter: &BTreeMap<String, f64>) -> [Option<f64>; 7] {
    std::array::from_fn(|i| {
        let values: Vec<f64> = verdicts.iter().filter_map(|v| v.scores[i]).collect();
        let s = match arbiter.get(DIMENSIONS[i].key) {
            Some(a) => Some(
                (values.iter().sum::<f64>() + ARBITER_WEIGHT * a)
                    / (values.len() as f64 + ARBITER_WEIGHT),
            ),
            None => median(values),
        };
        s.map(|x| (x * 10.0).round() / 10.0)
    })
}

/// One of the top issues of the consolidated critique.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CritiqueItem {
    /// The dimension's key.
    pub dimension: String,
    pub issue: String,
    pub suggested_fix: String,
    pub quote: String,
    /// `high`, `medium` or `low`, by how many raised it and how severe they said it was.
    pub priority: String,
    /// The personas that raised it.
    pub flagged_by: Vec<String>,
}

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_string)
        .collect()
}

fn similar(a: &Issue, b: &Issue) -> bool {
    if a.dimension != b.dimension {
        return false;
    }
    let (wa, wb) = (words(&a.issue), words(&b.issue));
    let shared = wa.iter().filter(|w| wb.contains(w)).count();
    shared * 2 >= wa.len().min(wb.len()).max(1)
}

/// Merges the evaluators' issues, de-duplicates similar ones (same dimension, mostly the same
/// words), ranks them by agreement, then severity (how far the dimension's score falls short,
/// times its weight, plus the stated severity), then actionability (a fix and a quote), and
/// keeps the top 5.
pub fn consolidate(verdicts: &[Verdict], scores: &[Option<f64>; 7]) -> Vec<CritiqueItem> {
    let mut groups: Vec<(Issue, Vec<String>)> = Vec::new();
    for v in verdicts {
        for issue in &v.issues {
            match groups.iter_mut().find(|(g, _)| similar(g, issue)) {
                Some((g, by)) => {
                    if !by.contains(&v.role) {
                        by.push(v.role.clone());
                    }
                    if g.suggested_fix.is_empty() {
                        g.suggested_fix = issue.suggested_fix.clone();
                    }
                    if g.quote.is_empty() {
                        g.quote = issue.quote.clone();
                    }
                    if issue.severity == "high" {
                        g.severity = "high".into();
                    }
                }
                None => groups.push((issue.clone(), vec![v.role.clone()])),
            }
        }
    }
    let impact = |i: &Issue| {
        let dim = DIMENSIONS.iter().position(|d| d.key == i.dimension);
        let shortfall =
            dim.and_then(|d| scores[d].map(|s| (10.0 - s) * DIMENSIONS[d].weight)).unwrap_or(0.0);
        let stated = match i.severity.as_str() {
            "high" => 1.0,
            "low" => 0.0,
            _ => 0.5,
        };
        shortfall + stated
    };
    let actionable =
        |i: &Issue| usize::from(!i.suggested_fix.is_empty()) + usize::from(!i.quote.is_empty());
    groups.sort_by(|(a, ba), (b, bb)| {
        bb.len()
            .cmp(&ba.len())
            .then(impact(b).total_cmp(&impact(a)))
            .then(actionable(b).cmp(&actionable(a)))
    });
    groups
        .into_iter()
        .take(5)
        .map(|(i, by)| {
            let priority = if by.len() >= 3 || (by.len() == 2 && i.severity == "high") {
                "high"
            } else if by.len() == 2 || i.severity == "high" {
                "medium"
            } else {
                "low"
            };
            CritiqueItem {
                dimension: i.dimension,
                issue: i.issue,
                suggested_fix: i.suggested_fix,
                quote: i.quote,
                priority: priority.into(),
                flagged_by: by,
            }
        })
        .collect()
}

/// Why a run needs a person: the disputed dimensions and where each evaluator stood.
pub fn review_reason(d: &Disagreement) -> String {
    let parts: Vec<String> = d
        .disagreeing_dimensions
        .iter()
        .map(|k| {
            let name = DIMENSIONS.iter().find(|x| x.key == k).map_or(k.as_str(), |x| x.name);
            let pos: Vec<String> = d
                .evaluator_positions
                .iter()
                .map(|(role, s)| {
                    format!(
                        "{role} {}",
                        s.get(k).copied().flatten().map_or("-".into(), |x| format!("{x}"))
                    )
                })
                .collect();
            format!("{name} ({})", pos.join(", "))
        })
        .collect();
    let dims = if parts.is_empty() { "the overall score".to_string() } else { parts.join("; ") };
    format!("Evaluators still disagreed after discussion (spread above {DISAGREEMENT_SPREAD}) on {dims}; the Arbiter was called.")
}

// ---- the state machine ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Evaluating,
    Discussing,
    Arbitrating,
    Done,
}

pub struct Clarity {
    config: ClarityConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    initial: Vec<Verdict>,
    current: Vec<Verdict>,
    first_disagreement: Option<Disagreement>,
    discussion_ran: bool,
    kit: Kit,
    /// The backup Arbiter, when the server configures one.
    pub(super) arbiter_fallback: Option<String>,
    /// The reply schemas of the two scoring rounds, built once for the run, and the Arbiter's,
    /// once the disputed dimensions are known.
    evaluation_schema: Arc<ReplySchema>,
    discussion_schema: Arc<ReplySchema>,
    ruling_schema: Option<Arc<ReplySchema>>,
}

impl Clarity {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let arbiter_fallback =
            config.get(ARBITER_FALLBACK_KEY).and_then(Value::as_str).map(str::to_string);
        let config: ClarityConfig = stored_config("clarity", config)?;
        let timeout_ms = config.timeout_ms;
        Ok(Clarity {
            config,
            kit: Kit::new(&ctx, timeout_ms),
            ctx,
            phase: Phase::Evaluating,
            batch: Batch::new("evaluate", 3),
            initial: Vec::new(),
            current: Vec::new(),
            first_disagreement: None,
            discussion_ran: false,
            arbiter_fallback,
            evaluation_schema: evaluation_schema(),
            discussion_schema: discussion_schema(),
            ruling_schema: None,
        })
    }

    fn model(&self, role: &str) -> String {
        self.config.models.get(role).cloned().unwrap_or_else(|| SIM_DEFAULT.into())
    }

    /// A call of `role`'s model under its persona's `system` prompt, asked `prompt` in the form
    /// its route takes (`prompt(None)` the spec's, `prompt(Some(schema))` the schema's) and read
    /// by `schema`; the brief and `quoted` named as its quoted material.
    fn call(
        &self,
        spec: (String, &str, &str),
        prompt: impl Fn(Option<&ReplySchema>) -> String,
        schema: &Arc<ReplySchema>,
        quoted: Vec<(String, String)>,
    ) -> CallSpec {
        let (key, role, stage) = spec;
        let model = self.model(role);
        let system =
            PERSONAS.iter().find(|p| p.role == role).map_or(ARBITER_PROMPT, |p| p.system_prompt);
        let asked = self.kit.structured.json(&model).then_some(schema.as_ref());
        self.kit
            .call(
                key,
                &model,
                vec![ChatMessage::system(system), ChatMessage::user(prompt(asked))],
                stage,
                role,
            )
            .with_schema(schema)
            .quoting(self.brief_material().into_iter().chain(quoted))
    }

    /// The brief (and its context) as every Clarity prompt quotes it.
    fn brief_material(&self) -> Vec<(String, String)> {
        let mut m = vec![("the brief".to_string(), self.config.content.clone())];
        if let Some(c) = &self.config.context {
            m.push(("the brief's context".to_string(), c.clone()));
        }
        m
    }

    fn fail(&mut self, message: String) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(message)
    }

    fn verdict_row(stage_type: &str, order: i32, v: &Verdict, text: &str) -> Effect {
        Effect::Store(
            StageRow::new(stage_type, order, text.to_string())
                .by(&v.model, &v.role)
                .data(v)
                .took(v.response_time_ms),
        )
    }

    fn on_evaluation(&mut self, reply: CallReply) -> Vec<Effect> {
        let mut out = Vec::new();
        let index = indexed(&reply.key, "evaluate").unwrap_or(0);
        let schema = self.evaluation_schema.clone();
        if let Some(v) =
            PERSONAS.get(index).and_then(|p| read_verdict_reply(p.role, &reply, &schema))
        {
            out.push(Self::verdict_row("evaluation", 1, &v, reply.result.as_deref().unwrap_or("")));
            out.push(Effect::event("evaluator_complete", &Data { data: &v }));
        }
        if !self.batch.accept(reply) || !self.batch.complete() {
            return out;
        }
        let replies = self.batch.take();
        self.initial = replies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| read_verdict_reply(PERSONAS[i].role, r, &schema))
            .filter(|v| v.parse_success)
            .collect();
        if self.initial.len() < 2 {
            out.extend(self.fail("Fewer than 2 evaluators returned readable scores.".into()));
            return out;
        }
        self.current = self.initial.clone();
        let d = detect_disagreement(&self.initial);
        out.push(Effect::Store(StageRow::computed("disagreement", 2, to_json(&d))));
        if d.has_disagreement {
            out.push(Effect::event("disagreement_detected", &Data { data: &d }));
        }
        let discuss = match self.config.discussion {
            Discussion::Always => true,
            Discussion::Never => false,
            Discussion::Auto => d.max_spread > AGREEMENT_SPREAD,
        };
        self.first_disagreement = Some(d.clone());
        if discuss {
            self.discussion_ran = true;
            self.phase = Phase::Discussing;
            self.batch = Batch::new("discuss", self.current.len());
            out.push(Effect::event(
                "discussion_start",
                &Data { data: DiscussionStart { max_spread: d.max_spread } },
            ));
            let schema = self.discussion_schema.clone();
            let quoted = vec![("the critiques".to_string(), critiques(&self.current))];
            for (i, v) in self.current.iter().enumerate() {
                let Some(p) = PERSONAS.iter().find(|p| p.role == v.role) else { continue };
                let call = self.call(
                    (self.batch.key(i), p.role, "discussion"),
                    |json| discussion_prompt(&self.config, p, &self.current, json),
                    &schema,
                    quoted.clone(),
                );
                out.push(Effect::Call(call));
            }
            return out;
        }
        out.extend(self.after_discussion(d));
        out
    }

    fn on_discussion(&mut self) -> Vec<Effect> {
        let replies = self.batch.take();
        let mut out = Vec::new();
        let mut changes = Vec::new();
        let evaluators = self.current.clone();
        for (i, before) in evaluators.iter().enumerate() {
            let reply = replies.get(i);
            let read =
                reply.and_then(|r| read_verdict_reply(&before.role, r, &self.discussion_schema));
            match read {
                Some(mut v) if v.parse_success => {
                    // A dimension left out of the revision keeps its earlier score.
                    for k in 0..7 {
                        if v.scores[k].is_none() {
                            v.scores[k] = before.scores[k];
                        }
                    }
                    v.overall = weighted(&v.scores);
                    let changed: Vec<&str> = DIMENSIONS
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| v.scores[*k] != before.scores[*k])
                        .map(|(_, d)| d.key)
                        .collect();
                    changes.push(Change {
                        role: &before.role,
                        changed_dimensions: changed,
                        justification: v.justification.clone(),
                        failed: None,
                        unparsed: None,
                    });
                    out.push(Self::verdict_row(
                        "discussion",
                        3,
                        &v,
                        replies[i].result.as_deref().unwrap_or(""),
                    ));
                    self.current[i] = v;
                }
                // A reply that could not be read is kept (its raw text and why), and the
                // evaluator keeps its first verdict.
                Some(v) => {
                    changes.push(Change {
                        role: &before.role,
                        changed_dimensions: Vec::new(),
                        justification: None,
                        failed: Some(true),
                        unparsed: Some(v.unparsed),
                    });
                    out.push(Self::verdict_row(
                        "discussion",
                        3,
                        &v,
                        replies[i].result.as_deref().unwrap_or(""),
                    ));
                }
                None => changes.push(Change {
                    role: &before.role,
                    changed_dimensions: Vec::new(),
                    justification: None,
                    failed: Some(true),
                    unparsed: None,
                }),
            }
        }
        let d = detect_disagreement(&self.current);
        out.push(Effect::event(
            "discussion_complete",
            &Data { data: DiscussionDone { verdicts: &self.current, changes, disagreement: &d } },
        ));
        out.extend(self.after_discussion(d));
        out
    }

    fn after_discussion(&mut self, d: Disagreement) -> Vec<Effect> {
        if !d.has_disagreement {
            return self.score(&BTreeMap::new(), None, &d);
        }
        // Dimensions to arbitrate: those still above the spread, or all when only the overall
        // score is disputed.
        let disputed = if d.disagreeing_dimensions.is_empty() {
            DIMENSIONS.iter().map(|x| x.key.to_string()).collect()
        } else {
            d.disagreeing_dimensions.clone()
        };
        let summary: Vec<String> = self
            .current
            .iter()
            .map(|v| {
                format!(
                    "{}: {}",
                    v.role,
                    v.justification.clone().unwrap_or_else(|| v.critique.clone())
                )
            })
            .collect();
        self.phase = Phase::Arbitrating;
        self.first_disagreement =
            Some(Disagreement { disagreeing_dimensions: disputed.clone(), ..d });
        let summary = summary.join("\n");
        let schema = ruling_schema(&disputed);
        // The backup takes the same prompt and schema: it is asked as the Arbiter is.
        let spec = self.call(
            ("arbiter".to_string(), "arbiter", "arbiter"),
            |json| arbiter_prompt(&self.config, &self.current, &disputed, &summary, json),
            &schema,
            vec![("the discussion summary".to_string(), summary.clone())],
        );
        self.ruling_schema = Some(schema);
        let backup = self.arbiter_fallback.clone();
        vec![
            Effect::event(
                "arbiter_start",
                &Data {
                    data: ArbiterStart {
                        disputed_dimensions: &disputed,
                        model: self.model("arbiter"),
                    },
                },
            ),
            self.kit.calls.solo(spec, 4, backup.as_deref()),
        ]
    }

    fn on_arbiter(&mut self, routed: Routed) -> Vec<Effect> {
        let Routed { reply, fallback_from } = routed;
        let Some(d) = self.first_disagreement.clone() else {
            return self.fail("internal error: no disagreement".into());
        };
        let mut out = Vec::new();
        let disputed = &d.disagreeing_dimensions;
        let schema = self.ruling_schema.clone().unwrap_or_else(|| ruling_schema(disputed));
        let ruling = reply
            .result
            .as_deref()
            .map(|text| read_ruling(text, disputed, &schema))
            .unwrap_or_default();
        let arbiter = ruling.scores;
        let data = ArbiterRuling {
            model: reply.model.clone(),
            scores: arbiter.clone(),
            reasoning: ruling.reasoning,
            response_time_ms: reply.response_time_ms,
            error: reply.result.as_ref().err().map(|e| e.message.clone()),
            read_from: ruling.read_from,
            // An Arbiter that answered without a readable score for a disputed dimension: why.
            unparsed: match &reply.result {
                Ok(text) if arbiter.is_empty() => Some(Unparsed::of(text)),
                _ => None,
            },
            // Only a backup that answered stands in for the Arbiter.
            fallback_from: fallback_from.filter(|_| reply.result.is_ok()),
        };
        if let Ok(text) = &reply.result {
            out.push(Effect::Store(
                StageRow::new("arbiter", 4, text.clone())
                    .by(&reply.model, "arbiter")
                    .data(&data)
                    .took(reply.response_time_ms as i64),
            ));
        }
        out.push(Effect::event("arbiter_complete", &Data { data: &data }));
        out.extend(self.score(&arbiter, Some(review_reason(&d)), &d));
        out
    }

    fn score(
        &mut self,
        arbiter: &BTreeMap<String, f64>,
        review: Option<String>,
        last: &Disagreement,
    ) -> Vec<Effect> {
        let scores = final_scores(&self.current, arbiter);
        let method = if review.is_some() && !arbiter.is_empty() {
            Method::Arbiter
        } else if self.discussion_ran {
            Method::PostDiscussion
        } else {
            Method::Median
        };
        let overall = weighted(&scores).unwrap_or(0.0);
        let breakdown: Vec<DimensionScore> = DIMENSIONS
            .iter()
            .enumerate()
            .map(|(i, d)| DimensionScore {
                dimension: d.key.to_string(),
                name: d.name.to_string(),
                weight: d.weight,
                score: scores[i],
                evaluator_scores: self
                    .current
                    .iter()
                    .map(|v| (v.role.clone(), v.scores[i]))
                    .collect(),
                arbiter_score: arbiter.get(d.key).copied(),
            })
            .collect();
        let critique = consolidate(&self.current, &scores);
        let mut answer = format!("Clarity score: {overall:.1}/10 (method: {})\n\n", method.words());
        for (i, d) in DIMENSIONS.iter().enumerate() {
            answer.push_str(&format!(
                "- {} ({:.0}%): {}\n",
                d.name,
                d.weight * 100.0,
                scores[i].map_or("-".into(), |s| format!("{s:.1}"))
            ));
        }
        if !critique.is_empty() {
            answer.push_str("\nTop issues:\n");
            for (n, c) in critique.iter().enumerate() {
                answer.push_str(&format!(
                    "{}. [{}] {}: {} Fix: {}\n",
                    n + 1,
                    c.priority,
                    // The dimension by its name for people; a key the list does not know, as is.
                    DIMENSIONS
                        .iter()
                        .find(|d| d.key == c.dimension)
                        .map_or(c.dimension.as_str(), |d| d.name),
                    c.issue,
                    c.suggested_fix
                ));
            }
        }
        if let Some(r) = &review {
            answer.push_str(&format!("\nFlagged for human review: {r}\n"));
        }
        let result = Score {
            score: overall,
            method,
            breakdown,
            critique,
            needs_human_review: review.is_some(),
            review_reason: review.clone(),
            discussion_ran: self.discussion_ran,
            initial_disagreement: self.first_disagreement_initial(),
            final_disagreement: last.clone(),
            verdicts: self.current.clone(),
        };
        let mut out = vec![
            Effect::Store(StageRow::computed("score", 5, to_json(&result))),
            Effect::emit("score_complete", {
                let mut done = to_json(&Data { data: &result });
                self.kit.calls.mark(&mut done);
                done
            }),
        ];
        if let Some(r) = review {
            out.push(Effect::FlagForReview { reason: r });
        }
        self.phase = Phase::Done;
        out.extend(self.kit.title.finish(answer));
        out
    }

    /// The disagreement found before any discussion.
    fn first_disagreement_initial(&self) -> Disagreement {
        detect_disagreement(&self.initial)
    }
}

impl Staged for Clarity {
    const EMPTY_IS_FAILURE: bool = false;

    fn stage_order(stage: &str) -> i32 {
        stage_order(stage)
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event(
                "clarity_start",
                &RunStart::new(&self.ctx, "clarity", Start { models: &self.config.models }),
            ),
            Effect::Store(StageRow::new("brief", 0, self.config.content.clone()).data(&BriefRow {
                title: self.config.title.clone(),
                context: self.config.context.clone(),
            })),
        ];
        let schema = self.evaluation_schema.clone();
        for (i, p) in PERSONAS.iter().enumerate() {
            let call = self.call(
                (self.batch.key(i), p.role, "evaluation"),
                |json| evaluation_prompt(&self.config, p, json),
                &schema,
                Vec::new(),
            );
            out.push(Effect::Call(call));
        }
        let model = self.model("generalist");
        out.extend(self.kit.ask_title_with(&model, title_prompt(&self.config.content)));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Evaluating => self.on_evaluation(routed.reply),
            Phase::Discussing => {
                if self.batch.accept(routed.reply) && self.batch.complete() {
                    self.on_discussion()
                } else {
                    Vec::new()
                }
            }
            Phase::Arbitrating if routed.reply.key == "arbiter" => self.on_arbiter(routed),
            _ => Vec::new(),
        }
    }
}
