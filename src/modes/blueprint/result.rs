//! What a blueprint run stores and reads back: the sections, the result, its outcome and the
//! export's report.

use super::*;

/// A section as written, as stored and as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SectionResult {
    pub section_number: usize,
    pub section_title: String,
    pub model: String,
    pub content: String,
    pub word_count: usize,
    pub key_topics_covered: Vec<String>,
    pub key_topics_missing: Vec<String>,
    pub response_time_ms: Option<i64>,
}

/// A section whose author failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedSection {
    pub section_number: usize,
    pub section_title: String,
    pub model: String,
    pub error: String,
}

/// The answer when the assembler and its backup failed: the title, then every section in
/// order under its heading, a missing one as a TODO marker.
pub fn concatenated(title: &str, sections: &[Section], written: &[SectionResult]) -> String {
    let mut doc = format!("# {title}\n");
    for sec in sections {
        doc.push_str(&format!("\n## Section {}: {}\n\n", sec.number, sec.title));
        match written.iter().find(|w| w.section_number == sec.number) {
            Some(w) => doc.push_str(&strip_heading(&w.content, sec.number)),
            None => doc.push_str(&format!("[TODO: Section {} ({}) failed]", sec.number, sec.title)),
        }
        doc.push('\n');
    }
    doc
}

/// A section's text without the `## Section <n>: …` heading it was asked to open with (the
/// concatenation writes its own).
fn strip_heading(text: &str, n: usize) -> String {
    let mut lines = text.lines();
    let first = lines.clone().find(|l| !l.trim().is_empty()).unwrap_or("");
    match section_heading(bare(first)) {
        Some((k, _)) if k == n as u64 => {
            let rest: Vec<&str> =
                lines.by_ref().skip_while(|l| l.trim().is_empty()).skip(1).collect();
            rest.join("\n").trim().to_string()
        }
        _ => text.trim().to_string(),
    }
}

// ---- the stored result ---------------------------------------------------------------------

/// `{material, documentType, outline, sections, failedSections, assembly, partial,
/// failedModels}` from the stored rows, as the events gave them.
pub fn load_result(rows: &[StageRow]) -> Value {
    let row = |t: &str| rows.iter().find(|r| r.stage_type == t);
    let outline = row("outline").and_then(|o| o.parsed_data.clone());
    let planned: Vec<(usize, String)> = outline
        .as_ref()
        .and_then(|o| o["sections"].as_array())
        .map(|list| {
            list.iter()
                .filter_map(|s| {
                    Some((s["number"].as_u64()? as usize, s["title"].as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut written: Vec<SectionResult> = rows
        .iter()
        .filter(|r| r.stage_type.starts_with("section_"))
        .filter_map(|r| {
            let mut v = r.parsed_data.clone()?;
            v["model"] = json!(r.model);
            v["content"] = json!(r.content);
            v["responseTimeMs"] = json!(r.response_time_ms);
            serde_json::from_value(v).ok()
        })
        .collect();
    written.sort_by_key(|s| s.section_number);
    let mut failed: Vec<FailedSection> = rows
        .iter()
        .filter(|r| r.stage_type == CALL_FAILED)
        .filter_map(|r| {
            let f: crate::modes::common::FailedModel =
                serde_json::from_value(r.parsed_data.clone()?).ok()?;
            let n: usize = f.stage.strip_prefix("section_")?.parse().ok()?;
            let title = planned.iter().find(|(k, _)| *k == n).map(|(_, t)| t.clone())?;
            Some(FailedSection {
                section_number: n,
                section_title: title,
                model: f.model,
                error: f.error.message,
            })
        })
        .collect();
    failed.sort_by_key(|s| s.section_number);
    let assembly = row("assembly").map(|a| {
        let mut d = a.parsed_data.clone().unwrap_or(json!({}));
        d["document"] = json!(a.content);
        d
    });
    let setup = row(SETUP);
    let kind = setup
        .and_then(|s| s.parsed_data.as_ref())
        .or(outline.as_ref())
        .map(|o| o["documentType"].clone())
        .unwrap_or(Value::Null);
    let mut outline = outline;
    // Runs stored before the setup row kept the material in the outline's row.
    let old_material =
        outline.as_mut().and_then(|o| o.as_object_mut()).and_then(|o| o.remove("material"));
    let material = match setup {
        Some(s) => json!({
            "source": s.parsed_data.as_ref().map_or(Value::Null, |d| d["source"].clone()),
            "characters": s.content.chars().count(), "text": s.content,
        }),
        None => old_material.unwrap_or(Value::Null),
    };
    let mut result = json!({
        "material": material,
        "documentType": kind,
        "outline": outline,
        "sections": written,
        "failedSections": failed,
        "totalSucceeded": written.len(),
        "totalFailed": failed.len(),
        "assembly": assembly,
    });
    mark_from_rows(&mut result, rows);
    result
}

pub(super) fn outcome(result: &Value) -> Option<String> {
    let a = result.get("assembly").filter(|a| !a.is_null())?;
    let title = result.pointer("/outline/documentTitle").and_then(Value::as_str).unwrap_or("");
    let failed = result["totalFailed"].as_u64().unwrap_or(0);
    let written = result["totalSucceeded"].as_u64().unwrap_or(0);
    let mut s = format!("{}: {} sections, {} words", short(title, 80), written, a["wordCount"]);
    if failed > 0 {
        s.push_str(&format!(", {failed} missing"));
    }
    if a["fallback"] == "concatenated" {
        s.push_str(" (not assembled)");
    }
    Some(s)
}

// ---- the export's report -------------------------------------------------------------------

/// The result as the export's report: the document (its title, type and who outlined and
/// assembled it), the outline's sections as a table (length, author, words, topics covered,
/// written or failed), the key topics a section left out, the TODOs the document still holds
/// and what the outline did not state.
pub fn report(result: &Value) -> String {
    use crate::modes::report::{count, table};
    let mut out = String::new();
    let o = &result["outline"];
    let planned = o["sections"].as_array().cloned().unwrap_or_default();
    let kind = o["documentTypeLabel"].as_str().map(str::to_string).or_else(|| {
        serde_json::from_value::<DocumentType>(result["documentType"].clone())
            .ok()
            .map(|k| k.label().to_string())
    });
    if o.is_object() {
        let title = match o["documentTitle"].as_str() {
            Some(t) if o["documentTitleDefaulted"] != true => t.to_string(),
            _ => "no title stated".to_string(),
        };
        let mut line = format!("**Document:** {title}");
        if let Some(k) = &kind {
            line.push_str(&format!(" ({k})"));
        }
        if let Some(m) = o["model"].as_str() {
            line.push_str(&format!(", outlined by {m}"));
            if let Some(f) = o["fallbackFrom"].as_str() {
                line.push_str(&format!(" in place of {f}"));
            }
        }
        line.push_str(&format!("; {}.", count(planned.len() as u64, "section", "sections")));
        out.push_str(&format!("{line}\n\n"));
    } else if let Some(k) = &kind {
        out.push_str(&format!("**Document:** {k}; no outline was written.\n\n"));
    }
    let a = &result["assembly"];
    if a.is_object() {
        let words = a["wordCount"].as_u64().map(|w| count(w, "word", "words"));
        if a["fallback"] == "concatenated" {
            out.push_str(
                "**Not assembled:** the assembler failed, so the document is the sections as \
                 written, in order.\n\n",
            );
        } else if let Some(m) = a["model"].as_str() {
            let mut line = format!("**Assembled by:** {m}");
            if let Some(f) = a["fallbackFrom"].as_str() {
                line.push_str(&format!(" (in place of {f})"));
            }
            if let Some(w) = &words {
                line.push_str(&format!(", {w}"));
            }
            if a["condensed"] == true {
                line.push_str(
                    "; the sections were too long to give whole and went to it condensed",
                );
            }
            out.push_str(&format!("{line}.\n\n"));
        }
    }
    let written = result["sections"].as_array().cloned().unwrap_or_default();
    let failed = result["failedSections"].as_array().cloned().unwrap_or_default();
    let of = |list: &[Value], n: u64| {
        list.iter().find(|s| s["sectionNumber"].as_u64() == Some(n)).cloned()
    };
    let mut left_out = Vec::new();
    let rows: Vec<Vec<String>> = planned
        .iter()
        .enumerate()
        .map(|(i, sec)| {
            let n = sec["number"].as_u64().unwrap_or(i as u64 + 1);
            let title = sec["title"].as_str().unwrap_or("").to_string();
            let length = sec["length"].as_str().unwrap_or("").to_lowercase();
            let length = match (sec["lengthDefaulted"] == true, sec["targetWords"].as_str()) {
                (true, _) => format!("not stated ({length} used)"),
                (false, Some(w)) => format!("{length} ({w} words)"),
                (false, None) => length,
            };
            let (w, f) = (of(&written, n), of(&failed, n));
            let author = w
                .as_ref()
                .or(f.as_ref())
                .and_then(|x| x["model"].as_str())
                .or(sec["assignedModel"].as_str())
                .unwrap_or("")
                .to_string();
            let (words, topics, state) = match (&w, &f) {
                (Some(w), _) => {
                    let covered = w["keyTopicsCovered"].as_array().map_or(0, Vec::len);
                    let missing: Vec<&str> = w["keyTopicsMissing"]
                        .as_array()
                        .map(|m| m.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if !missing.is_empty() {
                        left_out.push(format!("- section {n} ({title}): {}", missing.join("; ")));
                    }
                    (
                        w["wordCount"].as_u64().map_or(String::new(), |c| c.to_string()),
                        format!("{covered} of {}", covered + missing.len()),
                        "written".to_string(),
                    )
                }
                (None, Some(f)) => (
                    String::new(),
                    String::new(),
                    match f["error"].as_str() {
                        Some(e) => format!("failed ({e})"),
                        None => "failed".into(),
                    },
                ),
                (None, None) => (String::new(), String::new(), "not written".into()),
            };
            vec![n.to_string(), title, length, author, words, topics, state]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["#", "section", "length", "author", "words", "key topics covered", "state"],
            &rows,
            &[0, 4],
        ));
        out.push('\n');
    }
    if !left_out.is_empty() {
        out.push_str(&format!("**Key topics a section left out:**\n\n{}\n\n", left_out.join("\n")));
    }
    let todos: Vec<&str> = a["todoMarkers"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !todos.is_empty() {
        let list: Vec<String> = todos.iter().map(|t| format!("- {t}")).collect();
        out.push_str(&format!("**Still to do in the document:**\n\n{}\n\n", list.join("\n")));
    }
    let warnings: Vec<&str> = o["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !warnings.is_empty() {
        let list: Vec<String> = warnings.iter().map(|w| format!("- {w}")).collect();
        out.push_str(&format!("**About the outline:**\n\n{}\n", list.join("\n")));
    }
    out
}
