//! Brainstorm's state machine: the ranking (the server's arithmetic), then ideation, clustering,
//! scoring and refinement.

use super::*;

/// One cluster in the ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ranked {
    /// 1 for the best.
    pub rank: usize,
    /// The cluster (`cluster_1`…).
    pub id: String,
    /// Its name.
    pub name: String,
    /// HIGH, MEDIUM or LOW, as the curator rated it.
    pub promise: String,
    /// Average novelty over the valid scores of the cluster, two decimals; null when unscored.
    pub average_novelty: Option<f64>,
    /// Average feasibility, likewise.
    pub average_feasibility: Option<f64>,
    /// Average impact, likewise.
    pub average_impact: Option<f64>,
    /// Average total (3-15), likewise.
    pub average_score: Option<f64>,
    /// Valid scores it had.
    pub score_count: usize,
    /// What put it above the next cluster down (`averageScore`, `averageImpact`,
    /// `averageFeasibility`, `promise`, `clusterNumber`, `scored`); null for the last.
    pub decided_by: Option<String>,
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn promise_rank(p: &str) -> u8 {
    match p {
        "HIGH" => 0,
        "MEDIUM" => 1,
        _ => 2,
    }
}

/// The ranking of `clusters` from the valid scorers' `scores`: by scores with 2 valid scorers
/// or more, else by promise (see the spec's "Computation"). Answers the list and the method.
pub fn rank(clusters: &[Cluster], scores: &[Vec<ClusterScore>]) -> (Vec<Ranked>, &'static str) {
    let by_scores = scores.len() >= 2;
    let mut list: Vec<Ranked> = clusters
        .iter()
        .map(|c| {
            let mine: Vec<&ClusterScore> =
                scores.iter().flatten().filter(|s| s.cluster_id == c.id).collect();
            let n = mine.len();
            let avg = |f: fn(&ClusterScore) -> u8| {
                (n > 0)
                    .then(|| round2(mine.iter().map(|s| f64::from(f(s))).sum::<f64>() / n as f64))
            };
            Ranked {
                rank: 0,
                id: c.id.clone(),
                name: c.name.clone(),
                promise: c.promise.clone(),
                average_novelty: avg(|s| s.novelty),
                average_feasibility: avg(|s| s.feasibility),
                average_impact: avg(|s| s.impact),
                average_score: avg(|s| s.total),
                score_count: n,
                decided_by: None,
            }
        })
        .collect();
    let number = |r: &Ranked| {
        r.id.strip_prefix("cluster_").and_then(|n| n.parse::<usize>().ok()).unwrap_or(0)
    };
    // Keys in order, each smaller = better; the name says what it compares.
    let keys = |r: &Ranked| -> Vec<(&'static str, i64)> {
        let neg = |v: Option<f64>| -((v.unwrap_or(0.0) * 100.0).round() as i64);
        let mut k = Vec::new();
        if by_scores {
            k.push(("scored", i64::from(r.score_count == 0)));
            k.push(("averageScore", neg(r.average_score)));
            k.push(("averageImpact", neg(r.average_impact)));
            k.push(("averageFeasibility", neg(r.average_feasibility)));
        }
        k.push(("promise", i64::from(promise_rank(&r.promise))));
        k.push(("clusterNumber", number(r) as i64));
        k
    };
    list.sort_by(|a, b| {
        let (ka, kb) = (keys(a), keys(b));
        ka.iter().map(|x| x.1).cmp(kb.iter().map(|x| x.1))
    });
    for i in 0..list.len() {
        list[i].rank = i + 1;
        if let Some(next) = list.get(i + 1) {
            let (ka, kb) = (keys(&list[i]), keys(next));
            list[i].decided_by =
                ka.iter().zip(&kb).find(|(a, b)| a.1 != b.1).map(|(a, _)| a.0.to_string());
        }
    }
    (list, if by_scores { "scores" } else { "promise" })
}

/// K: the most clusters asked for.
pub fn cluster_limit(max_clusters: usize, ideas: usize) -> usize {
    if ideas >= 10 {
        max_clusters
    } else {
        3.max(max_clusters.min(ideas / 2))
    }
}

pub(super) fn find<'a>(ideas: &'a [Idea], id: &str) -> Option<&'a Idea> {
    ideas.iter().find(|i| i.id == id)
}

/// Ideas grouped by source label, labels in order.
pub(super) fn by_label(ideas: &[Idea]) -> Vec<(String, Vec<&Idea>)> {
    let mut out: Vec<(String, Vec<&Idea>)> = Vec::new();
    let mut sorted: Vec<&Idea> = ideas.iter().collect();
    sorted.sort_by(|a, b| {
        (a.source_label.len(), &a.source_label).cmp(&(b.source_label.len(), &b.source_label))
    });
    for i in sorted {
        match out.last_mut() {
            Some((l, g)) if *l == i.source_label => g.push(i),
            _ => out.push((i.source_label.clone(), vec![i])),
        }
    }
    out
}

/// `Model A`, `Model B`… for label position `k`.
pub fn source_label(k: usize) -> String {
    label(k).replacen("Response", "Model", 1)
}

/// The answer when the refiner and its backup failed: the winning cluster (or every idea)
/// with a note.
pub fn fallback_answer(cluster: Option<&Cluster>, ideas: &[Idea]) -> String {
    let mut s = String::from(
        "The refiner could not be reached, so this is the brainstorm's best material as it \
         stands, without a written proposal.\n\n",
    );
    match cluster {
        Some(c) => {
            s.push_str(&format!("## {}\n\n", c.display_name()));
            if let Some(t) = &c.theme {
                s.push_str(&format!("{t}\n\n"));
            }
            let members: Vec<&Idea> = c.idea_ids.iter().filter_map(|id| find(ideas, id)).collect();
            s.push_str(&idea_lines(&members));
        }
        None => {
            for (label, group) in by_label(ideas) {
                s.push_str(&format!("### Ideas from {label}\n\n{}\n", idea_lines(&group)));
            }
        }
    }
    s.trim_end().to_string()
}

// ---- the state machine ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Ideating,
    Clustering,
    Scoring,
    Refining,
    Done,
}

pub struct Brainstorm {
    config: BrainstormConfig,
    ctx: RunContext,
    phase: Phase,
    /// Label position of each model (by request position).
    labels: Vec<String>,
    ideation: Batch,
    /// `ideation_complete` data by model position.
    ideated: Vec<Option<Ideation>>,
    ideas: Vec<Idea>,
    clusters: Vec<Cluster>,
    scoring: Batch,
    valid_scores: Vec<(usize, Vec<ClusterScore>)>,
    ranked: Vec<Ranked>,
    /// The ideation's reply schema (the same for every ideator).
    ideas_schema: Arc<ReplySchema>,
    /// The clustering's reply schema, over the ideas of this run (built when they are in).
    clusters_schema: Option<Arc<ReplySchema>>,
    /// The scorers' reply schema, over the clusters kept (built when they are read).
    scores_schema: Option<Arc<ReplySchema>>,
    kit: Kit,
}

/// The ideation summary (`all_ideation_complete`'s data) from each model's `ideation_complete`
/// data and the failed ideation calls: the same live and from the stored rows.
pub fn ideation_summary(ideated: &[Ideation], failed: &[FailedModel]) -> IdeationSummary {
    let mut warnings: Vec<String> = Vec::new();
    for d in ideated {
        let n = d.idea_count;
        let who = format!("{} ({})", d.source_label, d.model);
        if n == 0 {
            let why = d.unparsed.as_deref().unwrap_or("gave no readable answer");
            warnings.push(format!("{who} listed no ideas in the expected format ({why})."));
        } else if n < d.ideas_asked {
            let min = d.ideas_asked;
            warnings.push(format!("{who} listed {n} ideas, fewer than the {min} asked for."));
        }
        if let Some(dropped) = d.dropped.filter(|d| *d > 0) {
            warnings.push(format!(
                "{who} listed more than {MAX_IDEAS} ideas; the last {dropped} were left out."
            ));
        }
    }
    for f in failed.iter().filter(|f| f.stage == "ideation") {
        warnings.push(format!("{} failed: {}", f.model, f.error.message));
    }
    IdeationSummary {
        total_ideas: ideated.iter().map(|d| d.idea_count).sum(),
        model_count: ideated.iter().filter(|d| d.idea_count > 0).count(),
        warnings,
    }
}

impl Brainstorm {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: BrainstormConfig = stored_config("brainstorm", config)?;
        let n = config.models.len();
        if !(2..=6).contains(&n) {
            return Err("the stored brainstorm configuration has no 2 to 6 models".into());
        }
        if !(3..=10).contains(&config.min_ideas_per_model)
            || !(3..=8).contains(&config.max_clusters)
        {
            return Err("the stored brainstorm configuration has its limits out of range".into());
        }
        let map = create_label_map(n, ctx.seed);
        let mut labels = vec![String::new(); n];
        for (k, &i) in map.iter().enumerate() {
            labels[i] = source_label(k);
        }
        let kit = Kit::new(&ctx, config.timeout_ms);
        Ok(Brainstorm {
            ideas_schema: ideas_schema(config.min_ideas_per_model),
            ideation: Batch::new("ideate", n),
            scoring: Batch::new("score", n),
            ideated: vec![None; n],
            config,
            ctx,
            phase: Phase::Ideating,
            labels,
            ideas: Vec::new(),
            clusters: Vec::new(),
            valid_scores: Vec::new(),
            ranked: Vec::new(),
            clusters_schema: None,
            scores_schema: None,
            kit,
        })
    }

    fn index_of(key: &str) -> Option<usize> {
        key.rsplit_once(':').and_then(|(_, n)| n.parse().ok())
    }

    fn on_ideation(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = Self::index_of(&reply.key).filter(|i| *i < self.ideated.len()) else {
            return Vec::new();
        };
        let Ok(text) = &reply.result else { return Vec::new() };
        let (list, read_from) = read_ideas_reply(text, &self.ideas_schema);
        let ms = reply.response_time_ms as i64;
        let label = self.labels[i].clone();
        let ideas: Vec<Idea> = list
            .ideas
            .iter()
            .enumerate()
            .map(|(k, (title, description))| Idea {
                id: format!("model_{i}_idea_{}", k + 1),
                title: title.clone(),
                description: description.clone(),
                model: reply.model.clone(),
                source_label: label.clone(),
            })
            .collect();
        let data = Ideation {
            index: i,
            model: reply.model.clone(),
            source_label: label,
            idea_count: ideas.len(),
            ideas_asked: self.config.min_ideas_per_model,
            response_time_ms: ms,
            dropped: (list.dropped > 0).then_some(list.dropped),
            read_from,
            unparsed: ideas.is_empty().then(|| Unparsed::of(text).describe().into()),
            ideas,
        };
        let out = vec![
            member_row((format!("ideation_{i}"), IDEATION_ORDER, "ideator"), reply, text, &data),
            Effect::event("ideation_complete", &Data { data: &data }),
        ];
        self.ideated[i] = Some(data);
        out
    }

    fn all_ideated(&mut self) -> Vec<Effect> {
        let datas: Vec<Ideation> = self.ideated.iter().flatten().cloned().collect();
        self.ideas = datas.iter().flat_map(|d| d.ideas.clone()).collect();
        let summary = ideation_summary(&datas, &self.kit.calls.failed());
        let producing = summary.model_count;
        let mut out = vec![Effect::event("all_ideation_complete", &Data { data: summary })];
        if producing < 2 {
            self.phase = Phase::Done;
            out.extend(self.kit.title.fail(format!(
                "Only {producing} of {} models produced ideas; a brainstorm needs at least 2.",
                self.config.models.len()
            )));
            return out;
        }
        if self.kit.deadline_passed {
            out.extend(self.clustered(
                None,
                Vec::new(),
                Some("The time limit passed before the ideas could be clustered."),
                None,
            ));
            return out;
        }
        let k = cluster_limit(self.config.max_clusters, self.ideas.len());
        let listed: Vec<&Idea> = by_label(&self.ideas).into_iter().flat_map(|(_, g)| g).collect();
        let ids: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
        let asking = Asking::new(clusters_schema(&ids, k), |json| {
            cluster_prompt(&self.ctx.question, &listed, producing, k, json)
        });
        let spec = asking
            .call(&self.kit, "cluster", &self.config.curator_model, "clustering", "curator")
            .quoting([("the ideas".to_string(), ideas_text(&listed))]);
        self.clusters_schema = Some(asking.schema);
        self.phase = Phase::Clustering;
        let backup = self.config.facilitator_fallback_model.clone();
        let data = ClusteringStart { max_clusters: k, total_ideas: self.ideas.len() };
        out.push(Effect::event("clustering_start", &Data { data }));
        out.push(self.kit.calls.solo(spec, CLUSTERING_ORDER, backup.as_deref()));
        out
    }

    fn on_clustering(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let ms = Some(reply.response_time_ms as i64);
        match &reply.result {
            Err(e) => {
                let note = match &routed.fallback_from {
                    Some(p) => format!("The curator ({p}) and its backup ({}) failed: {}; the refiner works from all the ideas.", reply.model, e.message),
                    None => format!("The curator ({}) failed: {}; the refiner works from all the ideas.", reply.model, e.message),
                };
                self.clustered(None, Vec::new(), Some(&note), None)
            }
            Ok(text) => {
                let k = cluster_limit(self.config.max_clusters, self.ideas.len());
                let schema = self.clusters_schema.clone().unwrap_or_else(|| {
                    let ids: Vec<&str> = self.ideas.iter().map(|i| i.id.as_str()).collect();
                    clusters_schema(&ids, k)
                });
                let (c, read_from) = read_clusters_reply(text, &self.ideas, k, &schema);
                let note = c.clusters.is_empty().then_some(
                    "No cluster could be read from the curator's reply; the refiner works from all the ideas.",
                );
                self.clustered(
                    Some((
                        reply.model.clone(),
                        answer_text(text).trim().to_string(),
                        ms,
                        routed.fallback_from.clone(),
                    )),
                    c.clusters,
                    note,
                    read_from,
                )
            }
        }
    }

    /// The clustering is settled (read, failed or skipped): stored, sent, and the next stage.
    fn clustered(
        &mut self,
        reply: Option<(String, String, Option<i64>, Option<String>)>,
        clusters: Vec<Cluster>,
        note: Option<&str>,
        read_from: Option<ReadFrom>,
    ) -> Vec<Effect> {
        let fallback = clusters.is_empty();
        let placed: Vec<&String> = clusters.iter().flat_map(|c| &c.idea_ids).collect();
        let unclustered: Vec<String> =
            self.ideas.iter().map(|i| i.id.clone()).filter(|id| !placed.contains(&id)).collect();
        let (model, content, ms, from) = match reply {
            Some((m, c, ms, from)) => (Some(m), c, ms, from),
            None => (None, String::new(), None, None),
        };
        let data = ClusteringData {
            model: model.clone(),
            clusters,
            unclustered_ids: unclustered,
            fallback,
            response_time_ms: ms,
            fallback_from: from,
            note: note.map(str::to_string),
            read_from,
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new("clustering", CLUSTERING_ORDER, content)
                    .model(model)
                    .role("curator")
                    .data(&data)
                    .took(ms),
            ),
            Effect::event("clustering_complete", &Data { data: &data }),
        ];
        self.clusters = data.clusters;
        if fallback {
            out.extend(self.refine());
            return out;
        }
        if self.clusters.len() == 1 {
            out.extend(self.ranking(Some("single_cluster")));
            return out;
        }
        if self.kit.deadline_passed {
            out.extend(self.ranking(Some("timeout")));
            return out;
        }
        self.phase = Phase::Scoring;
        let data = ScoringStart { cluster_count: self.clusters.len() };
        out.push(Effect::event("scoring_start", &Data { data }));
        let asking = Asking::new(scores_schema(self.clusters.len()), |json| {
            score_prompt(&self.ctx.question, &self.clusters, &self.ideas, json)
        });
        let listed = clusters_text(&self.clusters, &self.ideas);
        for (i, model) in self.config.models.iter().enumerate() {
            let call = asking.call(&self.kit, self.scoring.key(i), model, "scoring", "scorer");
            out.push(Effect::Call(call.quoting([("the clusters".to_string(), listed.clone())])));
        }
        self.scores_schema = Some(asking.schema);
        out
    }

    fn on_score(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = Self::index_of(&reply.key).filter(|i| *i < self.config.models.len()) else {
            return Vec::new();
        };
        let Ok(text) = &reply.result else { return Vec::new() };
        let schema =
            self.scores_schema.clone().unwrap_or_else(|| scores_schema(self.clusters.len()));
        let (scores, read_from) = read_scores_reply(text, &self.clusters, &schema);
        let valid = !scores.is_empty();
        let ms = reply.response_time_ms as i64;
        let data = Scoring {
            index: i,
            model: reply.model.clone(),
            scores,
            valid,
            response_time_ms: ms,
            read_from,
            unparsed: (!valid).then(|| Unparsed::of(text).describe().into()),
        };
        let out = vec![
            member_row((format!("scoring_{i}"), SCORING_ORDER, "scorer"), reply, text, &data),
            Effect::event("scorer_complete", &Data { data: &data }),
        ];
        if valid {
            self.valid_scores.push((i, data.scores));
        }
        out
    }

    /// The server's ranking (stored and sent), then the refinement. `skipped`: why no scores
    /// were asked for.
    fn ranking(&mut self, skipped: Option<&str>) -> Vec<Effect> {
        self.valid_scores.sort_by_key(|(i, _)| *i);
        let scores: Vec<Vec<ClusterScore>> =
            self.valid_scores.iter().map(|(_, s)| s.clone()).collect();
        let (ranked, method) = rank(&self.clusters, &scores);
        self.ranked = ranked;
        let data = Ranking {
            ranked_clusters: self.ranked.clone(),
            ranking_method: method.into(),
            valid_scorers: scores.len(),
            scoring_skipped: skipped.map(str::to_string),
        };
        let mut out = vec![
            Effect::Store(StageRow::computed("ranking", RANKING_ORDER, to_json(&data))),
            Effect::event("all_scoring_complete", &Data { data }),
        ];
        out.extend(self.refine());
        out
    }

    fn winner(&self) -> Option<&Cluster> {
        let top = self.ranked.first()?;
        self.clusters.iter().find(|c| c.id == top.id)
    }

    fn refine(&mut self) -> Vec<Effect> {
        self.phase = Phase::Refining;
        let (prompt, cluster, quoted) = match self.winner() {
            Some(c) => {
                let ideas: Vec<&Idea> =
                    c.idea_ids.iter().filter_map(|id| find(&self.ideas, id)).collect();
                let ranking = self.ranked.first();
                let prompt = refine_prompt(&self.ctx.question, c, &self.ideas, ranking);
                let quoted = ("the cluster's ideas".to_string(), idea_lines(&ideas));
                (prompt, Some(Winner { cluster: c, ideas, ranking }), quoted)
            }
            None => (
                refine_all_prompt(&self.ctx.question, &self.ideas),
                None,
                ("the ideas".to_string(), grouped_ideas(&self.ideas)),
            ),
        };
        let spec = self
            .kit
            .ask("refine", &self.config.refiner_model.clone(), prompt, "refinement", "refiner")
            .quoting([quoted]);
        let backup = self.config.chairman_fallback_model.clone();
        let data = RefinementStart { all_ideas: cluster.is_none(), cluster };
        let start = Effect::event("refinement_start", &Data { data });
        vec![start, self.kit.calls.solo(spec, REFINEMENT_ORDER, backup.as_deref())]
    }

    fn on_refinement(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let reply = &routed.reply;
        let winner = self.winner().cloned();
        let (model, proposal, fallback, ms, from) = match &reply.result {
            Ok(text) => (
                Some(reply.model.clone()),
                answer_text(text).trim().to_string(),
                false,
                Some(reply.response_time_ms as i64),
                routed.fallback_from.clone(),
            ),
            Err(_) => (None, fallback_answer(winner.as_ref(), &self.ideas), true, None, None),
        };
        let data = Refinement {
            model: model.clone(),
            proposal: proposal.clone(),
            fallback,
            response_time_ms: ms,
            cluster_id: winner.as_ref().map(|c| c.id.clone()),
            cluster_name: winner.as_ref().map(|c| c.name.clone()),
            fallback_from: from,
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new("refinement", REFINEMENT_ORDER, proposal.clone())
                    .model(model)
                    .role("refiner")
                    .data(&without(&data, "proposal"))
                    .took(ms),
            ),
            Effect::event("refinement_complete", &Marked::new(data, self.kit.calls.failed())),
        ];
        out.extend(self.kit.title.finish(proposal));
        out
    }
}

/// A member's reply (an ideator's list, a scorer's scores) as its row: its answer without the
/// reasoning, under `(stage, order, role)`, with what was read from it.
fn member_row<T: Serialize>(
    (stage, order, role): (String, i32, &str),
    reply: &CallReply,
    text: &str,
    data: &T,
) -> Effect {
    Effect::Store(
        StageRow::new(stage, order, answer_text(text).trim())
            .by(&reply.model, role)
            .data(data)
            .took(reply.response_time_ms as i64),
    )
}

impl Staged for Brainstorm {
    fn stage_order(stage: &str) -> i32 {
        match stage {
            "ideation" => IDEATION_ORDER,
            "clustering" => CLUSTERING_ORDER,
            "scoring" => SCORING_ORDER,
            "refinement" => REFINEMENT_ORDER,
            _ => 0,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let c = &self.config;
        let labels = c.models.iter().zip(&self.labels);
        let start = RunStart::new(
            &self.ctx,
            "brainstorm",
            BrainstormStart {
                config: StartConfig {
                    models: &c.models,
                    curator_model: &c.curator_model,
                    refiner_model: &c.refiner_model,
                    min_ideas_per_model: c.min_ideas_per_model,
                    max_clusters: c.max_clusters,
                    labels: labels
                        .map(|(model, source_label)| SourceLabel { model, source_label })
                        .collect(),
                },
            },
        );
        let mut out = vec![
            Effect::event("brainstorm_start", &start),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
            Effect::empty("ideation_start"),
        ];
        let min = self.config.min_ideas_per_model;
        let asking = Asking::new(self.ideas_schema.clone(), |json| {
            ideate_prompt(&self.ctx.question, min, json)
        });
        for (i, model) in self.config.models.iter().enumerate() {
            out.push(Effect::Call(asking.call(
                &self.kit,
                self.ideation.key(i),
                model,
                "ideation",
                "ideator",
            )));
        }
        out.extend(self.kit.ask_title(&self.config.curator_model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let mut out = Vec::new();
        let key = routed.reply.key.clone();
        match self.phase {
            Phase::Ideating
                if key.starts_with("ideate:") && self.ideation.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_ideation(&routed.reply));
                if self.ideation.complete() {
                    out.extend(self.all_ideated());
                }
            }
            Phase::Clustering if key == "cluster" => out.extend(self.on_clustering(routed)),
            Phase::Scoring
                if key.starts_with("score:") && self.scoring.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_score(&routed.reply));
                if self.scoring.complete() {
                    out.extend(self.ranking(None));
                }
            }
            Phase::Refining if key == "refine" => out.extend(self.on_refinement(routed)),
            _ => {}
        }
        out
    }
}
