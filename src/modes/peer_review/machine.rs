//! The peer review's state machine: every reviewer in parallel, the server's statistics, then
//! the consolidation.

use super::*;

const REVIEW_ORDER: i32 = 1;
const STATS_ORDER: i32 = 2;
const CONSOLIDATION_ORDER: i32 = 3;

pub(super) fn review_of(
    index: usize,
    model: &str,
    raw: &str,
    rubric: &Rubric,
    schema: &ReplySchema,
    ms: i64,
) -> Review {
    let reading = read_review_reply(raw, rubric, schema);
    Review {
        reviewer_index: index,
        model: model.to_string(),
        review_text: answer_text(raw).trim().to_string(),
        overall_score: overall(&reading.scores).map(|o| round_to(o, 1)),
        scores: reading.scores,
        findings: reading.findings,
        strengths: reading.strengths,
        parse_success: reading.parse_success,
        unparsed: (!reading.parse_success).then(|| Unparsed::of(raw)),
        read_from: reading.read_from,
        response_time_ms: ms,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Reviewing,
    Consolidating,
    Done,
}

pub struct PeerReview {
    config: PeerReviewConfig,
    ctx: RunContext,
    phase: Phase,
    batch: Batch,
    reviews: Vec<Review>,
    failed_reviewers: Vec<FailedReviewer>,
    /// The review's reply schema (the run's rubric), shared by every reviewer.
    review_schema: Arc<ReplySchema>,
    kit: Kit,
}

impl PeerReview {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: PeerReviewConfig = stored_config("peer_review", config)?;
        if !(2..=6).contains(&config.reviewer_models.len()) {
            return Err("the stored peer_review configuration has no 2 to 6 reviewers".into());
        }
        if config.rubric.criteria.is_empty() {
            return Err("the stored peer_review configuration has an empty rubric".into());
        }
        let kit = Kit::new(&ctx, config.timeout_ms);
        let batch = Batch::new("review", config.reviewer_models.len());
        let review_schema = review_schema(&config.rubric);
        Ok(PeerReview {
            review_schema,
            config,
            ctx,
            phase: Phase::Reviewing,
            batch,
            reviews: Vec::new(),
            failed_reviewers: Vec::new(),
            kit,
        })
    }

    fn work(&self) -> &str {
        work(self.config.content.as_deref(), &self.ctx.question)
    }

    /// One reviewer's reply, stored and announced on arrival.
    fn on_review(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = indexed(&reply.key, "review") else {
            return Vec::new();
        };
        let index = i + 1;
        let ms = reply.response_time_ms as i64;
        let model = self.config.reviewer_models.get(i).cloned().unwrap_or_default();
        match &reply.result {
            Ok(text) => {
                let review = review_of(
                    index,
                    &reply.model,
                    text,
                    &self.config.rubric,
                    &self.review_schema,
                    ms,
                );
                // The row keeps the review's text as its content.
                let parsed = without(&review, "reviewText");
                let out = vec![
                    Effect::Store(
                        StageRow::new(format!("review_{index}"), REVIEW_ORDER, text.clone())
                            .by(&reply.model, "reviewer")
                            .parsed(parsed)
                            .took(ms),
                    ),
                    Effect::event("reviewer_complete", &Data { data: &review }),
                ];
                self.reviews.push(review);
                out
            }
            Err(e) => {
                let failed =
                    FailedReviewer { reviewer_index: index, model, error: e.message.clone() };
                let data = to_json(&FailedRow { reviewer: &failed, failed: true });
                self.failed_reviewers.push(failed);
                vec![Effect::Store(
                    StageRow::new(format!("review_{index}"), REVIEW_ORDER, e.message.clone())
                        .by(&reply.model, "reviewer")
                        .parsed(data)
                        .took(ms),
                )]
            }
        }
    }

    fn all_reviewed(&mut self) -> Vec<Effect> {
        self.reviews.sort_by_key(|r| r.reviewer_index);
        self.failed_reviewers.sort_by_key(|r| r.reviewer_index);
        if self.reviews.len() < 2 {
            self.phase = Phase::Done;
            return self.kit.title.fail(format!(
                "Only {} of {} reviews arrived; a peer review needs at least 2. The reviews that \
                 arrived are kept.",
                self.reviews.len(),
                self.config.reviewer_models.len()
            ));
        }
        let stats = statistics(&self.reviews, &self.config.rubric);
        let stats_row = to_json(&StatsRow {
            statistics: &stats,
            failed_reviewers: self.failed_reviewers.clone(),
        });
        let prompt = consolidation_prompt(
            &self.ctx.question,
            self.work(),
            &self.config.rubric,
            &self.reviews,
            &stats,
        );
        let material =
            std::iter::once(("the work under review".to_string(), self.work().to_string()))
                .chain(
                    self.reviews.iter().map(|r| {
                        (format!("Reviewer {}'s review", r.reviewer_index), quoted_review(r))
                    }),
                )
                .collect::<Vec<_>>();
        let spec = self
            .kit
            .ask(
                CONSOLIDATION_KEY,
                &self.config.consolidator_model,
                prompt,
                "consolidation",
                "consolidator",
            )
            .quoting(material);
        self.phase = Phase::Consolidating;
        let backup = self.config.foreman_fallback_model.clone();
        vec![
            Effect::Store(StageRow::computed("review_stats", STATS_ORDER, stats_row)),
            Effect::event(
                "all_reviewers_complete",
                &Data {
                    data: AllReviewed {
                        reviews: &self.reviews,
                        failed_reviewers: &self.failed_reviewers,
                        statistics: &stats,
                    },
                },
            ),
            Effect::event("consolidation_start", &serde_json::Map::new()),
            self.kit.calls.solo(spec, CONSOLIDATION_ORDER, backup.as_deref()),
        ]
    }

    fn on_consolidation(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let text = match &routed.reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                return self.kit.title.fail(format!(
                    "{}; the reviews and statistics are kept.",
                    role_failed("consolidator", &routed, e)
                ))
            }
        };
        let reply = &routed.reply;
        let report = answer_text(&text).trim().to_string();
        let data = Consolidation {
            model: reply.model.clone(),
            consolidated_report: report.clone(),
            action_items: read_action_items(&text),
            response_time_ms: reply.response_time_ms,
            fallback_from: routed.fallback_from.clone(),
        };
        // The row keeps the report as its content.
        let stored = without(&data, "consolidatedReport");
        let mut event = to_json(&Data { data });
        self.kit.calls.mark(&mut event);
        let mut out = vec![
            Effect::Store(
                StageRow::new("consolidation", CONSOLIDATION_ORDER, report.clone())
                    .by(&reply.model, "consolidator")
                    .parsed(stored)
                    .took(reply.response_time_ms as i64),
            ),
            Effect::emit("consolidation_complete", event),
        ];
        out.extend(self.kit.title.finish(report));
        out
    }
}

impl Staged for PeerReview {
    fn stage_order(stage: &str) -> i32 {
        match stage {
            "review" => REVIEW_ORDER,
            "consolidation" => CONSOLIDATION_ORDER,
            _ => 0,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let mut out = vec![
            Effect::event(
                "review_start",
                &RunStart::new(
                    &self.ctx,
                    "peer_review",
                    Start {
                        review_type: self.config.review_type.key(),
                        rubric: &self.config.rubric,
                    },
                ),
            ),
            Effect::Store(StageRow::new(SETUP, 0, self.work().to_string()).data(&Setup {
                review_type: self.config.review_type.key().to_string(),
                rubric: self.config.rubric.clone(),
                source:
                    if self.config.content.is_some() { "content" } else { "question" }.to_string(),
            })),
            Effect::event(
                "reviewers_start",
                &ReviewersStart { total_reviewers: self.config.reviewer_models.len() },
            ),
        ];
        let asking = Asking::new(self.review_schema.clone(), |json| {
            review_prompt(&self.ctx.question, self.work(), &self.config.rubric, json)
        });
        for (i, model) in self.config.reviewer_models.iter().enumerate() {
            let call = asking
                .call(&self.kit, self.batch.key(i), model, "review", "reviewer")
                .quoting([("the work under review".to_string(), self.work().to_string())]);
            out.push(Effect::Call(call));
        }
        out.extend(self.kit.ask_title(&self.config.consolidator_model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        match self.phase {
            Phase::Reviewing
                if routed.reply.key.starts_with("review:")
                    && self.batch.accept(routed.reply.clone()) =>
            {
                let mut out = self.on_review(&routed.reply);
                if self.batch.complete() {
                    out.extend(self.all_reviewed());
                }
                out
            }
            Phase::Consolidating if routed.reply.key == CONSOLIDATION_KEY => {
                self.on_consolidation(routed)
            }
            _ => Vec::new(),
        }
    }
}
