//! Blueprint's sim answers: an outline in text or JSON, sections and an assembled document.

use super::*;

const SIM_PARTS: [(&str, &str, [&str; 3]); 9] = [
    (
        "Context and Goals",
        "Why the system exists and what it must achieve.",
        ["Problem statement", "Goals", "Constraints"],
    ),
    (
        "Requirements",
        "What the system must do and how well.",
        ["Functional requirements", "Quality attributes", "Assumptions"],
    ),
    (
        "System Overview",
        "The system at a glance and its main parts.",
        ["Components", "Responsibilities", "Boundaries"],
    ),
    (
        "Data Model",
        "The data the system keeps and how it flows.",
        ["Entities", "Storage", "Data flows"],
    ),
    (
        "Interfaces",
        "How the parts and the outside world talk to each other.",
        ["Public API", "Events", "Versioning"],
    ),
    ("Deployment", "Where and how the system runs.", ["Environments", "Scaling", "Monitoring"]),
    (
        "Security",
        "How the system and its data are protected.",
        ["Authentication", "Authorisation", "Threats"],
    ),
    (
        "Risks and Trade-offs",
        "The decisions taken and what they cost.",
        ["Alternatives considered", "Risks", "Mitigations"],
    ),
    ("Delivery Plan", "How the work is staged.", ["Milestones", "Team", "Open questions"]),
];

/// The sim architect's outline as JSON that fits [`outline_schema`]: the same sections, lengths
/// and summary as its text outline.
fn sim_outline_json(ask: &SimAsk) -> String {
    let mut rng = SplitMix64::new(ask.seed);
    let cut = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
    let material = between(ask.prompt, MATERIAL_START, MATERIAL_END);
    let n = 6 + rng.below(3);
    let sections: Vec<SimSection> = SIM_PARTS
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, (title, desc, topics))| SimSection {
            title,
            description: desc,
            key_topics: topics,
            length: LENGTHS[rng.below(3)],
            source_coverage: if i == 0 {
                "the whole material"
            } else {
                "the parts of the material on this subject"
            },
        })
        .collect();
    let reasoning = format!(
        "{}[simulated outline from {}] The material reads best from its goals to its delivery, \
         one concern per section.",
        ask.hostile_paragraph(),
        ask.model
    );
    to_json(&SimOutline {
        reasoning: cut(&reasoning, schema::REASONING_MAX_CHARS),
        document_title: cut(&first_words(material, 6), TITLE_MAX_CHARS),
        sections,
        estimated_total_length: format!("{} words", n * 600),
        key_themes: ["clarity", "reliability", "delivery"],
    })
    .to_string()
}

/// A section of the sim's outline JSON.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimSection<'a> {
    title: &'a str,
    description: &'a str,
    key_topics: &'a [&'a str; 3],
    length: &'static str,
    source_coverage: &'static str,
}

/// The sim's outline JSON.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SimOutline<'a> {
    reasoning: String,
    document_title: String,
    sections: Vec<SimSection<'a>>,
    estimated_total_length: String,
    key_themes: [&'static str; 3],
}

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    // Asked for the outline's JSON: the outline, as JSON that fits; no other schema is ours.
    if let Some(s) = ask.schema {
        return (s.name == OUTLINE_SCHEMA && p.starts_with(OUTLINE_HEAD))
            .then(|| sim_outline_json(ask));
    }
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    if p.starts_with(OUTLINE_HEAD) {
        let material = between(p, MATERIAL_START, MATERIAL_END);
        let subject: String = first_words(material, 6);
        let n = 6 + rng.below(3);
        let mut s = format!("[simulated outline from {who}]\n\n");
        if ask.malformed {
            // A half-followed format: bold headings with dashes, topics on one line, no
            // lengths, no summary.
            s.push_str(&format!("Sure! Here is an outline.\n\n**Document Title:** {subject}\n\n"));
            for (i, (title, desc, topics)) in SIM_PARTS.iter().take(n).enumerate() {
                s.push_str(&format!(
                    "**Section {} — {title}**\n- Description: {desc}\n- Key Topics: {}\n\n",
                    i + 1,
                    topics.join(", ")
                ));
            }
            return Some(s);
        }
        s.push_str(&format!("DOCUMENT TITLE: {subject}\n\n"));
        let lengths = ["Short", "Medium", "Long"];
        for (i, (title, desc, topics)) in SIM_PARTS.iter().take(n).enumerate() {
            s.push_str(&format!(
                "SECTION {}: {title}\nDescription: {desc}\nKey Topics:\n{}\nLength: {}\nSource Coverage: {}\n\n",
                i + 1,
                topics.iter().map(|t| format!("- {t}")).collect::<Vec<_>>().join("\n"),
                lengths[rng.below(3)],
                if i == 0 { "the whole material" } else { "the parts of the material on this subject" }
            ));
        }
        s.push_str(&format!(
            "DOCUMENT SUMMARY:\nTotal sections: {n}\nEstimated total length: {} words\nKey themes: clarity, reliability, delivery",
            n * 600
        ));
        return Some(s);
    }
    if p.starts_with(SECTION_HEAD) {
        let c = regex!(r"Write ONLY section (\d+): (.*)").captures(p)?;
        let (n, title) = (c[1].to_string(), c[2].trim_end_matches('.').to_string());
        let topics: Vec<String> = p
            .split_once("Key topics:\n")
            .map(|(_, rest)| {
                rest.lines().map_while(|l| l.strip_prefix("- ")).map(str::to_string).collect()
            })
            .unwrap_or_default();
        // Now and then a planned topic is left out, so coverage has something to report.
        let skip = if topics.len() > 1 && rng.below(3) == 0 {
            Some(rng.below(topics.len()))
        } else {
            None
        };
        let mut s = String::new();
        if ask.malformed {
            s.push_str(&format!("Sure! Here is section {n}, as requested.\n\n{title}\n\n"));
        } else {
            s.push_str(&format!("## Section {n}: {title}\n\n"));
        }
        s.push_str(&format!(
            "[simulated section from {who}] This section sets out {} for the document.\n\n{}",
            title.to_lowercase(),
            ask.hostile_paragraph()
        ));
        for (i, t) in topics.iter().enumerate() {
            if Some(i) == skip {
                continue;
            }
            s.push_str(&format!(
                "### {t}\n\n{t} is treated here in the depth the material allows. The approach \
                 is stated, its reasons are given and its limits are named. See Section 1 for \
                 the context.\n\n"
            ));
        }
        if rng.below(2) == 0 {
            s.push_str("Budget figures: [Requires additional input]\n");
        }
        return Some(s);
    }
    if p.starts_with(ASSEMBLY_HEAD) {
        let title =
            regex!(r#"titled "(.*)"\."#).captures(p).map_or(String::new(), |c| c[1].to_string());
        let body = between(p, SECTIONS_START, SECTIONS_END);
        let sec = regex!(
            r"(?s)--- Section (\d+): (.*?) \(by [^\n]*\) ---\n(.*?)\n--- end of section \d+ ---"
        );
        let mut parts: Vec<(usize, String, String)> = sec
            .captures_iter(body)
            .filter_map(|c| Some((c[1].parse().ok()?, c[2].to_string(), c[3].to_string())))
            .collect();
        let missing: Vec<(usize, String)> = p
            .split_once("Sections that are missing (their authors failed):\n")
            .map(|(_, rest)| {
                rest.lines()
                    .map_while(|l| l.strip_prefix("- Section "))
                    .filter_map(|l| {
                        let (n, t) = l.split_once(": ")?;
                        Some((n.parse().ok()?, t.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (n, t) in &missing {
            parts.push((*n, t.clone(), format!("[TODO: Section {n} ({t}) was not written]")));
        }
        parts.sort_by_key(|(n, _, _)| *n);
        let toc: Vec<String> = parts.iter().map(|(n, t, _)| format!("{n}. {t}")).collect();
        let mut s = String::new();
        if ask.malformed {
            s.push_str("Here is the assembled document:\n\n");
        }
        s.push_str(&format!(
            "# {title}\n\n[simulated assembly by {who}]\n\n## Executive Summary\n\n{}This \
             document brings {} sections together into one plan.\n\nIt states the goals, the \
             design and the risks in turn.\n\nWhere information was missing it says so.\n\n\
             ## Table of Contents\n\n{}\n\n",
            ask.hostile_paragraph(),
            parts.len(),
            toc.join("\n")
        ));
        for (_, _, text) in parts {
            s.push_str(&text);
            s.push_str("\n\n");
        }
        return Some(s.trim_end().to_string());
    }
    None
}
