//! The blueprint's state machine: the outline, every section in parallel, then the assembly.

use super::*;

const OUTLINE_ORDER: i32 = 0;
/// After section 20, the most a run writes.
const ASSEMBLY_ORDER: i32 = 99;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Outlining,
    Expanding,
    Assembling,
    Done,
}

pub struct Blueprint {
    config: BlueprintConfig,
    ctx: RunContext,
    phase: Phase,
    material: String,
    title_text: String,
    sections: Vec<Section>,
    written: Vec<SectionResult>,
    failed: Vec<FailedSection>,
    condensed: bool,
    /// The outline's reply schema (built once for the run).
    outline: Arc<ReplySchema>,
    kit: Kit,
}

/// `outline_complete`'s data: what was read, with each section's author; the same in the result.
fn outline_data(
    model: &str,
    kind: DocumentType,
    reading: &OutlineReading,
    sections: &[Section],
    ms: u64,
    read_from: Option<ReadFrom>,
) -> Outline {
    Outline {
        model: model.to_string(),
        document_title: reading.document_title.clone(),
        document_title_defaulted: reading.document_title_defaulted,
        document_type: kind,
        document_type_label: kind.label().to_string(),
        sections: sections.iter().map(OutlineSection::of).collect(),
        estimated_length: reading.estimated_length.clone(),
        total_sections_stated: reading.total_sections_stated,
        key_themes: reading.key_themes.clone(),
        truncated_from: reading.truncated_from,
        warnings: outline_warnings(reading),
        response_time_ms: ms,
        // Only an outline with enough sections to go on was read.
        read_from,
        fallback_from: None,
        raw_reply: None,
        material: None,
    }
}

impl Blueprint {
    pub fn new(config: &Value, ctx: RunContext) -> Result<Self, String> {
        let config: BlueprintConfig = stored_config("blueprint", config)?;
        if !(1..=MAX_AUTHORS).contains(&config.author_models.len()) {
            return Err("the stored blueprint configuration has no 1 to 6 authors".into());
        }
        let material = config.content.clone().unwrap_or_else(|| ctx.question.clone());
        let kit = Kit::new(&ctx, config.timeout_ms);
        Ok(Blueprint {
            config,
            ctx,
            phase: Phase::Outlining,
            material,
            title_text: String::new(),
            sections: Vec::new(),
            written: Vec::new(),
            failed: Vec::new(),
            condensed: false,
            outline: outline_schema(),
            kit,
        })
    }

    fn kind(&self) -> DocumentType {
        self.config.document_type
    }

    fn on_outline(&mut self, routed: Routed) -> Vec<Effect> {
        let reply = &routed.reply;
        let text = match &reply.result {
            Ok(t) => t.clone(),
            Err(e) => {
                self.phase = Phase::Done;
                return self.kit.title.fail(role_failed("architect", &routed, e));
            }
        };
        let (reading, read_from) = read_outline_reply(&text, &self.outline);
        let authors = &self.config.author_models;
        let mut sections = reading.sections.clone();
        for (i, s) in sections.iter_mut().enumerate() {
            s.assigned_model = authors[i % authors.len()].clone();
        }
        let mut data = outline_data(
            &reply.model,
            self.kind(),
            &reading,
            &sections,
            reply.response_time_ms,
            read_from,
        );
        data.fallback_from = routed.fallback_from.clone();
        if sections.len() < MIN_SECTIONS {
            // Too little could be read to go on: what the architect wrote is shown instead.
            data.raw_reply = Some(answer_text(&text).trim().to_string());
        }
        // The material is in the setup row (stored at the start), not here.
        let mut out = vec![
            Effect::Store(
                StageRow::new("outline", OUTLINE_ORDER, text)
                    .by(&reply.model, "architect")
                    .data(&data)
                    .took(reply.response_time_ms as i64),
            ),
            Effect::event("outline_complete", &Data { data: &data }),
        ];
        if sections.len() < MIN_SECTIONS {
            self.phase = Phase::Done;
            out.extend(self.kit.title.fail(format!(
                "The architect's outline ({}) has {} section{} that could be read; at least {MIN_SECTIONS} are needed.",
                reply.model,
                sections.len(),
                if sections.len() == 1 { "" } else { "s" }
            )));
            return out;
        }
        self.title_text = reading.document_title.clone();
        self.sections = sections;
        self.phase = Phase::Expanding;
        let outline = render_outline(&self.title_text, &self.sections);
        out.push(Effect::event(
            "expansion_start",
            &ExpansionStart { total_sections: self.sections.len() },
        ));
        // Every section at once: the engine queues them under the provider's concurrency cap.
        for s in &self.sections {
            let prompt = section_prompt(self.kind(), &self.title_text, &outline, s, &self.material);
            let call = self.kit.ask(
                format!("section:{}", s.number),
                &s.assigned_model,
                prompt,
                &format!("section_{}", s.number),
                "author",
            );
            out.push(Effect::Call(call.quoting([material(&self.material)])));
        }
        out
    }

    fn on_section(&mut self, n: usize, reply: CallReply) -> Vec<Effect> {
        let Some(sec) = self.sections.get(n - 1).cloned() else { return Vec::new() };
        if self.written.iter().any(|w| w.section_number == n)
            || self.failed.iter().any(|f| f.section_number == n)
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        match &reply.result {
            Ok(t) => {
                let content = answer_text(t).trim().to_string();
                let (covered, missing) = topic_coverage(&content, &sec.key_topics);
                let s = SectionResult {
                    section_number: n,
                    section_title: sec.title.clone(),
                    model: reply.model.clone(),
                    word_count: word_count(&content),
                    content,
                    key_topics_covered: covered,
                    key_topics_missing: missing,
                    response_time_ms: Some(reply.response_time_ms as i64),
                };
                out.push(section_row(&s));
                out.push(Effect::event("section_complete", &Data { data: &s }));
                self.written.push(s);
            }
            Err(e) => {
                let f = FailedSection {
                    section_number: n,
                    section_title: sec.title.clone(),
                    model: reply.model.clone(),
                    error: e.message.clone(),
                };
                out.push(Effect::event("section_failed", &Data { data: &f }));
                self.failed.push(f);
            }
        }
        if self.written.len() + self.failed.len() == self.sections.len() {
            out.extend(self.all_written());
        }
        out
    }

    fn all_written(&mut self) -> Vec<Effect> {
        self.written.sort_by_key(|s| s.section_number);
        self.failed.sort_by_key(|s| s.section_number);
        let mut out = vec![Effect::event(
            "all_sections_complete",
            &Data { data: Sections::of(self.written.clone(), self.failed.clone()) },
        )];
        if self.written.is_empty() {
            self.phase = Phase::Done;
            out.extend(self.kit.title.fail(format!(
                "Every author failed: none of the {} sections was written.",
                self.sections.len()
            )));
            return out;
        }
        self.phase = Phase::Assembling;
        let total: usize = self.written.iter().map(|s| s.content.chars().count()).sum();
        self.condensed = total > CONDENSE_ABOVE_CHARS;
        let written: Vec<Written> = self
            .written
            .iter()
            .map(|s| {
                let sec = &self.sections[s.section_number - 1];
                let text = if self.condensed {
                    format!(
                        "{} […]\nKey topics: {}",
                        first_words(&s.content, CONDENSED_WORDS),
                        sec.key_topics.join("; ")
                    )
                } else {
                    s.content.clone()
                };
                Written {
                    number: s.section_number,
                    title: s.section_title.clone(),
                    model: s.model.clone(),
                    text,
                }
            })
            .collect();
        let missing: Vec<&Section> =
            self.failed.iter().filter_map(|f| self.sections.get(f.section_number - 1)).collect();
        let prompt = assembly_prompt(
            self.kind(),
            &self.title_text,
            &render_outline(&self.title_text, &self.sections),
            &self.material,
            &written,
            &missing,
            self.condensed,
        );
        // The sections, then the material, named for fitting a small context.
        let quoted: Vec<(String, String)> = written
            .iter()
            .map(|w| (format!("Section {}: {}", w.number, w.title), w.text.clone()))
            .chain([material(&self.material)])
            .collect();
        let spec = self
            .kit
            .ask("assembly", &self.config.assembler_model, prompt, "assembly", "assembler")
            .quoting(quoted);
        let backup = self.config.chairman_fallback_model.clone();
        out.push(Effect::event(
            "assembly_start",
            &AssemblyStart {
                model: &self.config.assembler_model,
                condensed: self.condensed,
                missing_sections: self.failed.iter().map(|f| f.section_number).collect(),
            },
        ));
        out.push(self.kit.calls.solo(spec, ASSEMBLY_ORDER, backup.as_deref()));
        out
    }

    fn on_assembly(&mut self, routed: Routed) -> Vec<Effect> {
        self.phase = Phase::Done;
        let a = Assembled::of(&routed, || {
            concatenated(&self.title_text, &self.sections, &self.written)
        });
        let data = to_json(&Assembly {
            model: a.model.clone(),
            document: a.text.clone(),
            word_count: word_count(&a.text),
            todo_markers: todo_markers(&a.text),
            condensed: self.condensed,
            fallback: a.fallback(),
            response_time_ms: a.response_time_ms,
            fallback_from: a.fallback_from.clone(),
        });
        self.kit.calls.assembled(a, ASSEMBLY_ORDER, data, "document", &mut self.kit.title)
    }
}

/// The source material as quoted material of a prompt (see [`CallSpec::quoting`]).
fn material(text: &str) -> (String, String) {
    ("the source material".to_string(), text.to_string())
}

fn section_row(s: &SectionResult) -> Effect {
    let parsed = to_json(&SectionRow {
        section_number: s.section_number,
        section_title: s.section_title.clone(),
        key_topics_covered: s.key_topics_covered.clone(),
        key_topics_missing: s.key_topics_missing.clone(),
        word_count: s.word_count,
    });
    Effect::Store(
        StageRow::new(
            format!("section_{}", s.section_number),
            s.section_number as i32,
            s.content.clone(),
        )
        .by(&s.model, "author")
        .parsed(parsed)
        .took(s.response_time_ms),
    )
}

impl Staged for Blueprint {
    fn stage_order(stage: &str) -> i32 {
        match stage {
            "outline" => OUTLINE_ORDER,
            "assembly" => ASSEMBLY_ORDER,
            s => s.strip_prefix("section_").and_then(|n| n.parse().ok()).unwrap_or(0),
        }
    }

    fn kit(&mut self) -> &mut Kit {
        &mut self.kit
    }

    fn begin(&mut self) -> Vec<Effect> {
        let kind = self.kind();
        let source = if self.config.content.is_some() { Source::Content } else { Source::Question };
        let mut out = vec![
            Effect::event(
                "blueprint_start",
                &RunStart::new(
                    &self.ctx,
                    "blueprint",
                    Start {
                        document_type: kind,
                        document_type_label: kind.label(),
                        architect_model: &self.config.architect_model,
                        author_models: &self.config.author_models,
                        assembler_model: &self.config.assembler_model,
                        material_source: source,
                    },
                ),
            ),
            // The document type and the material, so a run whose architect fails still has
            // them when it is reloaded.
            Effect::Store(
                StageRow::new(SETUP, OUTLINE_ORDER, self.material.clone())
                    .data(&SetupRow { document_type: kind, source: Some(source) }),
            ),
            Effect::event("outline_start", &ModelStart { model: &self.config.architect_model }),
        ];
        // Asked for the outline's JSON when the architect's route takes it (the backup takes
        // the same prompt: it is asked as the architect is).
        let asking =
            Asking::new(self.outline.clone(), |json| outline_prompt(kind, &self.material, json));
        let spec = asking
            .call(&self.kit, "outline", &self.config.architect_model, "outline", "architect")
            .quoting([material(&self.material)]);
        let backup = self.config.facilitator_fallback_model.clone();
        out.push(self.kit.calls.solo(spec, OUTLINE_ORDER, backup.as_deref()));
        out.extend(self.kit.ask_title(&self.config.architect_model));
        out
    }

    fn on_routed(&mut self, routed: Routed) -> Vec<Effect> {
        let key = routed.reply.key.clone();
        let section = indexed(&key, "section");
        match (self.phase, section) {
            (Phase::Outlining, _) if key == "outline" => self.on_outline(routed),
            (Phase::Expanding, Some(n)) => self.on_section(n, routed.reply),
            (Phase::Assembling, _) if key == "assembly" => self.on_assembly(routed),
            _ => Vec::new(),
        }
    }
}
