//! Fact-Check's state machine: each claim's consensus (the server's arithmetic), then generate,
//! extract, verify and report.

use super::*;

/// A claim's consensus over the usable checkers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Consensus {
    /// The claim's id (`claim_1`…).
    pub claim_id: String,
    /// VERIFIED, DISPUTED or UNVERIFIABLE: the most given verdict (ties by the tie rule).
    pub verdict: String,
    /// The share of usable checkers that gave the verdict, in percent (0 to 100).
    pub agreement_rate: u32,
    /// HIGH, MEDIUM or LOW: the confidence most stated by the checkers that gave the verdict
    /// (LOW when a tie rule decided).
    pub consensus_confidence: String,
    /// The tie rule that decided, when the checkers tied (`verified=disputed→DISPUTED`…).
    pub tie_rule: Option<String>,
    /// The checkers did not all give the same verdict.
    pub split: bool,
    /// The correction most given by the checkers that disputed it, on a DISPUTED verdict.
    pub correction: Option<String>,
    /// How many usable checkers gave each verdict.
    pub votes: Votes,
}

/// How many usable checkers gave each verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub struct Votes {
    pub verified: usize,
    pub disputed: usize,
    pub unverifiable: usize,
}

/// The verdict counts over the claims' consensus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Claims whose consensus is VERIFIED.
    pub verified: usize,
    /// Claims whose consensus is DISPUTED.
    pub disputed: usize,
    /// Claims whose consensus is UNVERIFIABLE.
    pub unverifiable: usize,
    /// Claims the checkers did not agree on (whatever the consensus).
    pub split: usize,
    /// Every claim.
    pub total: usize,
}

/// One claim's consensus from its verifications, in checker order.
pub fn consensus_of(claim_id: &str, votes: &[&Verification]) -> Consensus {
    let count = |v: &str| votes.iter().filter(|x| x.verdict == v).count();
    let (nv, nd, nu) = (count("VERIFIED"), count("DISPUTED"), count("UNVERIFIABLE"));
    let top = nv.max(nd).max(nu);
    let at_top: Vec<&str> = [("VERIFIED", nv), ("DISPUTED", nd), ("UNVERIFIABLE", nu)]
        .into_iter()
        .filter(|(_, n)| *n == top)
        .map(|(v, _)| v)
        .collect();
    let (verdict, tie_rule) = match at_top.as_slice() {
        [one] => (*one, None),
        ["VERIFIED", "DISPUTED"] => ("DISPUTED", Some("verified=disputed→DISPUTED")),
        ["VERIFIED", "UNVERIFIABLE"] => ("VERIFIED", Some("verified=unverifiable→VERIFIED")),
        ["DISPUTED", "UNVERIFIABLE"] => ("DISPUTED", Some("disputed=unverifiable→DISPUTED")),
        _ => ("DISPUTED", Some("three-way→DISPUTED")),
    };
    let holders: Vec<&&Verification> = votes.iter().filter(|x| x.verdict == verdict).collect();
    let agreement_rate = if votes.is_empty() {
        0
    } else {
        ((100 * holders.len()) as f64 / votes.len() as f64).round() as u32
    };
    let consensus_confidence = if tie_rule.is_some() {
        "LOW"
    } else {
        let mut best: Option<(usize, &str)> = None;
        for c in CONFIDENCES {
            let n = holders.iter().filter(|h| h.confidence == c).count();
            // Ties toward the lower: later (lower) confidences win equal counts.
            if n > 0 && best.is_none_or(|(b, _)| n >= b) {
                best = Some((n, c));
            }
        }
        best.map_or("LOW", |(_, c)| c)
    };
    let correction = (verdict == "DISPUTED")
        .then(|| {
            let corrections: Vec<&str> = votes
                .iter()
                .filter(|x| x.verdict == "DISPUTED")
                .filter_map(|x| x.correction.as_deref())
                .collect();
            let mut best: Option<(usize, &str)> = None;
            for c in &corrections {
                let n = corrections.iter().filter(|o| norm(o) == norm(c)).count();
                if best.is_none_or(|(b, _)| n > b) {
                    best = Some((n, c));
                }
            }
            best.map(|(_, c)| c.to_string())
        })
        .flatten();
    Consensus {
        claim_id: claim_id.to_string(),
        verdict: verdict.into(),
        agreement_rate,
        consensus_confidence: consensus_confidence.into(),
        tie_rule: tie_rule.map(str::to_string),
        split: [nv, nd, nu].iter().filter(|n| **n > 0).count() > 1,
        correction,
        votes: Votes { verified: nv, disputed: nd, unverifiable: nu },
    }
}

/// Every claim's consensus over the usable checks, and the counts.
pub fn consensus(claims: &[Claim], checks: &[Check]) -> (Vec<Consensus>, Counts) {
    let usable: Vec<&Check> = checks.iter().filter(|c| c.parse_success).collect();
    let list: Vec<Consensus> = claims
        .iter()
        .map(|c| {
            let votes: Vec<&Verification> = usable
                .iter()
                .filter_map(|k| k.verifications.iter().find(|v| v.claim_id == c.id))
                .collect();
            consensus_of(&c.id, &votes)
        })
        .collect();
    let n = |v: &str| list.iter().filter(|c| c.verdict == v).count();
    let counts = Counts {
        verified: n("VERIFIED"),
        disputed: n("DISPUTED"),
        unverifiable: n("UNVERIFIABLE"),
        split: list.iter().filter(|c| c.split).count(),
        total: list.len(),
    };
    (list, counts)
}

/// The server's report when the reporter and its backup failed: a table and the counts.
pub fn fallback_report(claims: &[Claim], consensus: &[Consensus], counts: &Counts) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut s = String::from(
        "The reporter could not be reached, so this is the server's summary of the checks.\n\n\
         | Claim | Verdict | Agreement | Correction |\n|---|---|---|---|\n",
    );
    for (c, k) in claims.iter().zip(consensus) {
        s.push_str(&format!(
            "| {}. {} | {}{} | {}% | {} |\n",
            c.number,
            cell(&c.text),
            k.verdict,
            if k.tie_rule.is_some() {
                " (no majority: tie rule)"
            } else if k.split {
                " (not unanimous)"
            } else {
                ""
            },
            k.agreement_rate,
            k.correction.as_deref().map_or("—".into(), cell)
        ));
    }
    s.push_str(&format!(
        "\n{} verified, {} disputed, {} unverifiable of {} {}.",
        counts.verified,
        counts.disputed,
        counts.unverifiable,
        counts.total,
        if counts.total == 1 { "claim" } else { "claims" }
    ));
    s
}

// ---- the state machine ---------------------------------------------------------------------

/// One checker's completed check, as `checker_complete` gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// 0-based, in the order of `checkerModels`.
    pub checker_index: usize,
    /// The checker's model.
    pub model: String,
    /// One per claim, in claim order.
    pub verifications: Vec<Verification>,
    /// Verdicts as stated (unaddressed claims count UNVERIFIABLE); null when the call failed.
    pub summary: Option<CheckSummary>,
    /// The check addressed at least one claim (only such checks count in the consensus).
    pub parse_success: bool,
    pub response_time_ms: i64,
    /// The call failed (after the engine's retries): no verifications.
    #[serde(default)]
    pub failed: bool,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the verifications were read from (its JSON or its text), when the check was
    /// usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<ReadFrom>,
}

/// A check's verdicts as stated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckSummary {
    pub verified: usize,
    pub disputed: usize,
    pub unverifiable: usize,
    /// Claims the checker did not address (counted UNVERIFIABLE).
    pub unaddressed: usize,
}

fn summary_of(vs: &[Verification]) -> CheckSummary {
    let n = |v: &str| vs.iter().filter(|x| x.verdict == v).count();
    CheckSummary {
        verified: n("VERIFIED"),
        disputed: n("DISPUTED"),
        unverifiable: n("UNVERIFIABLE"),
        unaddressed: vs.iter().filter(|x| !x.addressed).count(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Generating,
    Extracting,
    Verifying,
    Reporting,
    Done,
}

pub struct FactCheck {
    config: FactCheckConfig,
    ctx: RunContext,
    phase: Phase,
    /// The content checked (cut to `maxContentLength`), once known.
    content: String,
    truncated: bool,
    claims: Vec<Claim>,
    batch: Batch,
    checks: Vec<Check>,
    consensus: Vec<Consensus>,
    counts: Counts,
    /// The extraction's and the checks' reply schemas, built when their calls are made.
    claims_schema: Option<Arc<ReplySchema>>,
    verify_schema: Option<Arc<ReplySchema>>,
    kit: Kit,
}

/// Content cut to `max` characters: the text and whether it was cut.
pub fn cut(text: &str, max: usize) -> (String, bool) {
    if text.chars().count() > max {
        (text.chars().take(max).collect(), true)
    } else {
        (text.to_string(), false)
    }
}

impl FactCheck {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: FactCheckConfig = stored_config("fact_check", config)?;
        if !(1..=4).contains(&config.checker_models.len()) {
            return Err("the stored fact_check configuration has no 1 to 4 checkers".into());
        }
        let kit = Kit::new(&ctx, config.timeout_ms);
        let batch = Batch::new("verify", config.checker_models.len());
        Ok(FactCheck {
            config,
            ctx,
            phase: Phase::Generating,
            content: String::new(),
            truncated: false,
            claims: Vec::new(),
            batch,
            checks: Vec::new(),
            consensus: Vec::new(),
            counts: Counts::default(),
            claims_schema: None,
            verify_schema: None,
            kit,
        })
    }

    fn source(&self) -> &'static str {
        if self.config.content.is_some() {
            "user_provided"
        } else {
            "generated"
        }
    }

    fn deadline_fail(&mut self, stage: &str) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.kit.title.fail(format!(
            "The fact-check's time limit ({} s) passed during the {stage}; the stages that \
             finished are kept.",
            self.config.global_timeout_ms / 1000
        ))
    }

    fn extract(&mut self, text: &str) -> Vec<Effect> {
        let (content, truncated) = cut(text, self.config.max_content_length);
        self.content = content;
        self.truncated = truncated;
        self.phase = Phase::Extracting;
        let schema = claims_schema();
        let model = self.config.extractor_model.clone();
        // The backup takes the same prompt: it is asked as the extractor is.
        let asked = self.kit.structured.json(&model).then_some(schema.as_ref());
        let spec = self
            .kit
            .ask("extract", &model, extract_prompt(&self.content, asked), "extract", "extractor")
            .with_schema(&schema)
            .quoting([("the content".to_string(), self.content.clone())]);
        self.claims_schema = Some(schema);
        let backup = self.config.facilitator_fallback_model.clone();
        vec![
            Effect::empty("extract_start"),
            self.kit.calls.solo(spec, EXTRACT_ORDER, backup.as_deref()),
        ]
    }

    fn on_generate(&mut self, reply: CallReply) -> Vec<Effect> {
        let text = match &reply.result {
            Ok(t) => answer_text(t).trim().to_string(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.kit.title.fail(format!(
                    "The generator ({}) failed: {}; with no content there is nothing to check.",
                    reply.model, e.message
                ));
            }
        };
        let ms = reply.response_time_ms as i64;
        let data = GenerateEvent {
            model: reply.model.clone(),
            content: text.clone(),
            response_time_ms: ms,
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new("generate", GENERATE_ORDER, text.clone())
                    .by(&reply.model, "generator")
                    .data(&Generated { model: reply.model.clone(), response_time_ms: ms })
                    .took(ms),
            ),
            Effect::event("generate_complete", &Data { data }),
        ];
        if self.kit.deadline_passed {
            out.extend(self.deadline_fail("generation"));
            return out;
        }
        out.extend(self.extract(&text));
        out
    }

    fn on_extract(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let text = match &reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.kit.title.fail(format!(
                    "{}; no claims could be listed.",
                    role_failed("extractor", &routed, e)
                ));
            }
        };
        let schema = self.claims_schema.clone().unwrap_or_else(claims_schema);
        let (reading, read_from) = read_claims_reply(&text, &schema);
        // The content, and the files the run was given (the content may name them).
        let material = format!("{}\n{}", self.content, self.ctx.material);
        let (claims, not_in_content) = stated_in(reading.claims.clone(), &material);
        self.claims = claims;
        let ms = reply.response_time_ms as i64;
        let data = Extracted {
            model: reply.model.clone(),
            claims: self.claims.clone(),
            type_breakdown: type_breakdown(&self.claims),
            truncated: self.truncated,
            parse_success: reading.parse_success(),
            response_time_ms: ms,
            fallback_from: routed.fallback_from.clone(),
            read_from,
            not_in_content: not_in_content.clone(),
            content: None,
            content_source: None,
        };
        let stored = Extracted {
            content: Some(self.content.clone()),
            content_source: Some(self.source().to_string()),
            ..data.clone()
        };
        let mut out = vec![
            Effect::Store(
                StageRow::new("extract", EXTRACT_ORDER, answer_text(&text).trim().to_string())
                    .by(&reply.model, "extractor")
                    .data(&stored)
                    .took(ms),
            ),
            Effect::event("extract_complete", &Data { data }),
        ];
        if self.claims.is_empty() {
            let note = if reading.none_stated {
                "No checkable claims were found in the content: the extractor listed none, so \
                 nothing was checked."
                    .to_string()
            } else if !not_in_content.is_empty() {
                format!(
                    "The extractor listed {}, but the content states none of them (their words \
                     or figures are not in it), so nothing was checked.",
                    match not_in_content.len() {
                        1 => "one claim".to_string(),
                        n => format!("{n} claims"),
                    }
                )
            } else {
                "No checkable claims could be read from the extractor's reply (it did not list \
                 them in the expected format), so nothing was checked."
                    .to_string()
            };
            out.extend(self.finish_report(None, note, None, false, None, None));
            return out;
        }
        if self.kit.deadline_passed {
            out.extend(self.deadline_fail("extraction"));
            return out;
        }
        self.phase = Phase::Verifying;
        let data = VerifyStart {
            checker_count: self.config.checker_models.len(),
            claim_count: self.claims.len(),
        };
        out.push(Effect::event("verify_start", &Data { data }));
        let schema = verifications_schema(self.claims.len());
        let text = verify_prompt(&self.content, &self.claims, None);
        let json = verify_prompt(&self.content, &self.claims, Some(&schema));
        for (i, model) in self.config.checker_models.clone().iter().enumerate() {
            let prompt = self.kit.structured.pick(model, &text, &json).clone();
            let call = self
                .kit
                .ask(self.batch.key(i), model, prompt, "verify", "checker")
                .with_schema(&schema)
                .quoting([("the content".to_string(), self.content.clone())]);
            out.push(Effect::Call(call));
        }
        self.verify_schema = Some(schema);
        out
    }

    fn on_check(&mut self, reply: &CallReply) -> Vec<Effect> {
        let Some(i) = indexed(&reply.key, "verify") else {
            return Vec::new();
        };
        let ms = reply.response_time_ms as i64;
        let model = self.config.checker_models.get(i).cloned().unwrap_or_default();
        let schema =
            self.verify_schema.clone().unwrap_or_else(|| verifications_schema(self.claims.len()));
        let (check, content) = match &reply.result {
            Ok(text) => {
                let (r, read_from) = read_check_reply(text, &self.claims, &schema);
                let check = Check {
                    checker_index: i,
                    model: reply.model.clone(),
                    summary: Some(summary_of(&r.verifications)),
                    verifications: r.verifications,
                    parse_success: r.parse_success,
                    response_time_ms: ms,
                    failed: false,
                    error: None,
                    read_from,
                };
                (check, answer_text(text).trim().to_string())
            }
            Err(e) => (
                Check {
                    checker_index: i,
                    model,
                    verifications: Vec::new(),
                    summary: None,
                    parse_success: false,
                    response_time_ms: ms,
                    failed: true,
                    error: Some(e.message.clone()),
                    read_from: None,
                },
                e.message.clone(),
            ),
        };
        let out = vec![
            Effect::Store(
                StageRow::new(format!("verify_{i}"), VERIFY_ORDER, content)
                    .by(&reply.model, "checker")
                    .data(&check)
                    .took(ms),
            ),
            Effect::event("checker_complete", &Data { data: &check }),
        ];
        self.checks.push(check);
        out
    }

    fn all_checked(&mut self) -> Vec<Effect> {
        self.checks.sort_by_key(|c| c.checker_index);
        let usable = self.checks.iter().filter(|c| c.parse_success).count();
        if usable == 0 {
            self.phase = Phase::Done;
            let checkers = match self.checks.len() {
                1 => "The one checker gave no usable check (it failed or addressed no claim)"
                    .to_string(),
                n => format!(
                    "None of the {n} checkers gave a usable check (each failed or addressed no \
                     claim)"
                ),
            };
            let kept = match self.claims.len() {
                1 => "the claim is kept".to_string(),
                n => format!("the {n} claims are kept"),
            };
            return self.kit.title.fail(format!("{checkers}; {kept}."));
        }
        let (consensus, counts) = consensus(&self.claims, &self.checks);
        self.consensus = consensus;
        self.counts = counts;
        let data = ConsensusData {
            consensus: self.consensus.clone(),
            counts: self.counts.clone(),
            usable_checkers: usable,
        };
        let prompt =
            report_prompt(&self.content, &self.claims, &self.consensus, &self.checks, &self.counts);
        let verdicts = consensus_text(&self.claims, &self.consensus, &self.checks);
        let spec = self
            .kit
            .ask("report", &self.config.reporter_model.clone(), prompt, "report", "reporter")
            .quoting([
                ("the content".to_string(), self.content.clone()),
                ("the checkers' verdicts".to_string(), verdicts),
            ]);
        self.phase = Phase::Reporting;
        let backup = self.config.chairman_fallback_model.clone();
        vec![
            Effect::Store(StageRow::computed("consensus", CONSENSUS_ORDER, to_json(&data))),
            Effect::event("all_checkers_complete", &Data { data }),
            Effect::empty("report_start"),
            self.kit.calls.solo(spec, REPORT_ORDER, backup.as_deref()),
        ]
    }

    fn on_report(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let ms = Some(reply.response_time_ms as i64);
        match &reply.result {
            Ok(text) => {
                let report = answer_text(text).trim().to_string();
                let score = read_score(text);
                let from = routed.fallback_from.clone();
                self.finish_report(Some(reply.model.clone()), report, score, false, ms, from)
            }
            Err(_) => {
                let report = fallback_report(&self.claims, &self.consensus, &self.counts);
                self.finish_report(None, report, None, true, None, None)
            }
        }
    }

    /// The report (the reporter's, the server's table, or the no-claims note), stored, sent,
    /// and the run's answer: `response_time_ms` is the reporter's (or its backup's, which
    /// stood in for `fallback_from`); the server's own reports have neither.
    fn finish_report(
        &mut self,
        model: Option<String>,
        report: String,
        score: Option<u32>,
        fallback: bool,
        response_time_ms: Option<i64>,
        fallback_from: Option<String>,
    ) -> Vec<Effect> {
        self.phase = Phase::Done;
        let note = self.truncated.then(|| {
            format!(
                "The content was longer than {} characters and was cut; only the first {} were \
                 checked.",
                self.config.max_content_length, self.config.max_content_length
            )
        });
        let summary = ReportSummary {
            verified: self.counts.verified,
            disputed: self.counts.disputed,
            unverifiable: self.counts.unverifiable,
            note,
        };
        let data = Report {
            model: model.clone(),
            report: Some(report.clone()),
            reliability_score: score,
            summary,
            fallback,
            response_time_ms,
            fallback_from,
        };
        let stored = data.row();
        let event = Marked::new(data, self.kit.calls.failed());
        let mut out = vec![
            Effect::Store(
                StageRow::new("report", REPORT_ORDER, report.clone())
                    .model(model.clone())
                    .role("reporter")
                    .parsed(stored)
                    .took(response_time_ms),
            ),
            Effect::event("report_complete", &event),
        ];
        out.extend(self.kit.title.finish(report));
        out
    }
}

impl Staged for FactCheck {
    fn stage_order(stage: &str) -> i32 {
        match stage {
            "generate" => GENERATE_ORDER,
            "extract" => EXTRACT_ORDER,
            "verify" => VERIFY_ORDER,
            "report" => REPORT_ORDER,
            _ => 0,
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let generated = self.config.content.is_none();
        let generator = &self.config.generator_model;
        let config = StartConfig {
            content_source: self.source(),
            extractor_model: self.config.extractor_model.clone(),
            checker_models: self.config.checker_models.clone(),
            reporter_model: self.config.reporter_model.clone(),
            max_content_length: self.config.max_content_length,
            generator_model: generated.then(|| generator.clone()),
            bias_warning: (generated && self.config.checker_models.contains(generator)).then(
                || {
                    format!(
                    "{generator} wrote the content and also checks it; its checks may favour its \
                     own answer."
                )
                },
            ),
        };
        let mut out = vec![
            Effect::event(
                "factcheck_start",
                &RunStart::new(&self.ctx, "fact_check", FactCheckStart { config }),
            ),
            Effect::Timer { key: GLOBAL_TIMER.into(), after_ms: self.config.global_timeout_ms },
        ];
        let title_model = match &self.config.content {
            Some(content) => {
                let content = content.clone();
                out.extend(self.extract(&content));
                self.config.extractor_model.clone()
            }
            None => {
                out.push(Effect::empty("generate_start"));
                let model = self.config.generator_model.clone();
                out.push(Effect::Call(self.kit.ask(
                    "generate",
                    &model,
                    generate_prompt(&self.ctx.question),
                    "generate",
                    "generator",
                )));
                model
            }
        };
        out.extend(self.kit.ask_title(&title_model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let mut out = Vec::new();
        let key = routed.reply.key.clone();
        match self.phase {
            Phase::Generating if key == "generate" => out.extend(self.on_generate(routed.reply)),
            Phase::Extracting if key == "extract" => out.extend(self.on_extract(routed)),
            Phase::Verifying
                if key.starts_with("verify:") && self.batch.accept(routed.reply.clone()) =>
            {
                out.extend(self.on_check(&routed.reply));
                if self.batch.complete() {
                    out.extend(self.all_checked());
                }
            }
            Phase::Reporting if key == "report" => out.extend(self.on_report(routed)),
            _ => {}
        }
        out
    }
}
