//! Delphi's sim answers: its schemas in JSON (`ModeSpec::sim`) and the text sim's recognisers
//! for its prompts (its `ModeSpec::sim` tries them through `sim_text::text_answer`).

use super::*;

use crate::modes::sim_text::{between, seed_of, Prompt};

// ---- sim answers ----------------------------------------------------------------------------
//
// The text sim (`modes::sim_text`) answers Delphi's text prompts; these answer its schemas
// the same way: the facilitator spots a quantity in the question, round-1 estimates scatter
// around a value drawn from the question with each model's bias (a few stubborn models far
// out), and later rounds move toward the panel's median (the stubborn ones barely), so runs
// converge as they do in text.

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let schema = ask.schema?;
    let reasoning = |why: &str| -> String {
        let said =
            format!("[simulated reasoning from {}] {why}{}", ask.model, ask.hostile_inline());
        said.chars().take(schema::REASONING_MAX_CHARS).collect()
    };
    let reply = match schema.name.as_str() {
        CLASSIFY_SCHEMA => sim_classify(ask.prompt, &reasoning),
        ESTIMATE_SCHEMA => sim_estimate(ask, &reasoning),
        ANSWER_SCHEMA => sim_choice(ask, schema, &reasoning),
        _ => return None,
    };
    Some(reply.to_string())
}

/// A sim classification in `delphi_classify`.
#[derive(Serialize)]
struct SimClassification<'a> {
    reasoning: String,
    #[serde(rename = "type")]
    kind: &'static str,
    options: &'a [&'a str],
}

/// A sim estimate or answer in `delphi_estimate` or `delphi_answer`.
#[derive(Serialize)]
struct SimEstimate {
    reasoning: String,
    #[serde(flatten)]
    said: Said,
    confidence: &'static str,
}

fn sim_classify(prompt: &str, reasoning: &dyn Fn(&str) -> String) -> Value {
    let q = between(prompt, "QUESTION:\n", "\n\nDetermine:").to_lowercase();
    if asks_for_quantity(&q) {
        let reasoning = reasoning("The question asks for a quantity.");
        return to_json(&SimClassification { reasoning, kind: "NUMERIC", options: &[] });
    }
    let options: &[&str] = if asks_yes_or_no(&q) {
        &["Yes", "Yes with conditions", "No", "It depends"]
    } else {
        &[
            "The established option",
            "The newer option",
            "A hybrid approach",
            "It depends on context",
        ]
    };
    let reasoning = reasoning("The question asks for a choice.");
    to_json(&SimClassification { reasoning, kind: "QUALITATIVE", options })
}

fn sim_estimate(ask: &SimAsk, reasoning: &dyn Fn(&str) -> String) -> Value {
    let p = ask.prompt;
    let stated = |line: &str| {
        parse_estimate(&format!("ESTIMATE: {}", between(p, line, "\n"))).map(|(v, _)| v)
    };
    let (value, round, why) = if p.starts_with("DELPHI ROUND") {
        let round = between(p, "DELPHI ROUND ", " ").parse::<usize>().unwrap_or(2);
        let stubborn = stubborn(ask.model);
        match (stated("YOUR PREVIOUS ESTIMATE: "), stated("- Median: ")) {
            (Some(prev), Some(median)) => {
                let pull = if stubborn { 0.05 } else { 0.65 };
                let why = if stubborn {
                    "I maintain my estimate; the aggregates do not change my reasoning."
                } else {
                    "I moved toward the median, which reflects the panel's information."
                };
                (prev + (median - prev) * pull, round, why)
            }
            (None, Some(median)) => (median, round, "I adopt the panel's median."),
            _ => (1.0, round, "No aggregate to go on."),
        }
    } else {
        let q = between(p, "QUESTION:\n", "\n\nProvide:");
        let s = seed_of(&[q]);
        let base = 10f64.powi(1 + (s % 7) as i32) * (1 + (s >> 8) % 9) as f64;
        // Each model's own bias; stubborn ones sit far out.
        let bias = 0.6 + (seed_of(&[ask.model, q]) % 100) as f64 / 100.0;
        let factor = if stubborn(ask.model) { bias * 2.5 } else { bias };
        (base * factor, 0, "Based on the available indicators and typical growth rates.")
    };
    // In the question's unit, to two decimals, as a JSON number.
    let value = (value * 100.0).round() / 100.0;
    let confidence = level(ask.model, round);
    to_json(&SimEstimate {
        reasoning: reasoning(why),
        said: Said::Estimate(Some(value)),
        confidence,
    })
}

fn sim_choice(ask: &SimAsk, schema: &ReplySchema, reasoning: &dyn Fn(&str) -> String) -> Value {
    let p = ask.prompt;
    let allowed: Vec<&str> = schema.schema["properties"]["answer"]["enum"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fits = |a: &str| !a.is_empty() && (allowed.is_empty() || allowed.contains(&a));
    let round = between(p, "DELPHI ROUND ", " ").parse::<usize>().unwrap_or(1);
    let answer = if p.starts_with("DELPHI ROUND") {
        // `none (your previous answer could not be read)` is no answer to hold on to.
        let prev = Some(between(p, "YOUR PREVIOUS ANSWER: ", "\n"))
            .filter(|a| !a.starts_with("none ("))
            .unwrap_or("")
            .to_string();
        let top = between(p, "- Distribution:\n", "\n")
            .rsplit_once(": ")
            .map_or("", |(a, _)| a.trim())
            .to_string();
        if (stubborn(ask.model) && fits(&prev)) || !fits(&top) {
            prev
        } else {
            top
        }
    } else if allowed.is_empty() {
        ["A careful, incremental approach", "A bold change", "Wait and see"]
            [(seed_of(&[ask.model, p]) % 3) as usize]
            .to_string()
    } else {
        allowed.iter().max_by_key(|o| seed_of(&[ask.model, p, o])).map_or("", |o| o).to_string()
    };
    // An answer the schema does not take (a previous answer that was not read): the first
    // option, as a model constrained to the enum would give.
    let answer = if fits(&answer) {
        answer
    } else {
        allowed.first().map_or("Wait and see".to_string(), |o| o.to_string())
    };
    let reasoning = reasoning("Weighing the trade-offs and the panel's view.");
    let confidence = level(ask.model, round);
    to_json(&SimEstimate { reasoning, said: Said::Answer(Some(answer)), confidence })
}

// ---- the text sim's recognisers (tried by `sim_text::text_answer`) -------------------------

/// A few models hold their ground in Delphi rounds: panels keep an outlier.
fn stubborn(model: &str) -> bool {
    seed_of(&[model, "stubborn"]).is_multiple_of(4)
}

pub(crate) fn delphi_classify(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("Classify the following question for a Delphi estimation exercise.") {
        return None;
    }
    if p.malformed {
        return Some("I am not sure how to classify this one.".into());
    }
    let q = between(p.last, "QUESTION:\n", "\n\nDetermine:").to_lowercase();
    if asks_for_quantity(&q) {
        return Some(format!(
            "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: The question asks for a quantity.{}",
            p.hostile_inline()
        ));
    }
    let options = if asks_yes_or_no(&q) {
        "Yes, Yes with conditions, No, It depends"
    } else {
        "The established option, The newer option, A hybrid approach, It depends on context"
    };
    Some(format!(
        "TYPE: QUALITATIVE\nOPTIONS: {options}\nREASONING: The question asks for a choice.{}",
        p.hostile_inline()
    ))
}

/// A number in this model's habitual style, so panels exercise the estimate parser.
fn styled(model: &str, v: f64) -> String {
    match seed_of(&[model, "style"]) % 4 {
        0 => crate::modes::delphi::fmt_num(v.round()),
        1 if v.abs() >= 1e6 => format!("{:.1} million", v / 1e6),
        1 if v.abs() >= 1e3 => format!("{:.1} thousand", v / 1e3),
        2 => format!("{v:.3e}"),
        _ => format!("~{}", v.round()),
    }
}

/// A panelist's confidence in a round (0 for round 1).
fn level(model: &str, round: usize) -> &'static str {
    LEVELS[((seed_of(&[model, "confidence"]) % 2) as usize + round).min(2)]
}

pub(crate) fn delphi_numeric(p: &Prompt) -> Option<String> {
    let first = p.last.starts_with("You are participating in a Delphi estimation exercise.");
    let later = p.last.starts_with("DELPHI ROUND") && p.last.contains("YOUR PREVIOUS ESTIMATE:");
    if !(first || later) {
        return None;
    }
    if p.malformed {
        return Some("ESTIMATE: hard to say\nREASONING: Too uncertain to put a number on.".into());
    }
    let parse = |line: &str| {
        crate::modes::delphi::parse_estimate(&format!("ESTIMATE: {}", between(p.last, line, "\n")))
            .map(|(v, _)| v)
    };
    let (value, round, why) = if first {
        let q = between(p.last, "QUESTION:\n", "\n\nProvide:");
        let s = seed_of(&[q]);
        let base = 10f64.powi(1 + (s % 7) as i32) * (1 + (s >> 8) % 9) as f64;
        // Each model's own bias; stubborn ones sit far out.
        let bias = 0.6 + (seed_of(&[p.model, q]) % 100) as f64 / 100.0;
        let factor = if stubborn(p.model) { bias * 2.5 } else { bias };
        (
            base * factor,
            0,
            "Based on the available indicators and typical growth rates.".to_string(),
        )
    } else {
        let prev = parse("YOUR PREVIOUS ESTIMATE: ");
        let median = parse("- Median: ");
        let round = between(p.last, "DELPHI ROUND ", " ").parse::<usize>().unwrap_or(2);
        match (prev, median) {
            (Some(prev), Some(median)) => {
                let pull = if stubborn(p.model) { 0.05 } else { 0.65 };
                let why = if stubborn(p.model) {
                    "I maintain my estimate; the aggregate does not change my reasoning."
                } else {
                    "I moved toward the median, which reflects the panel's information."
                };
                (prev + (median - prev) * pull, round, why.to_string())
            }
            (None, Some(median)) => (median, round, "I adopt the panel's median.".to_string()),
            _ => (1.0, round, "No aggregate to go on.".to_string()),
        }
    };
    Some(format!(
        "[simulated estimate from {}]\nESTIMATE: {}\nCONFIDENCE: {}\nREASONING: {why}{}",
        p.model,
        styled(p.model, value),
        level(p.model, round),
        p.hostile_inline()
    ))
}

pub(crate) fn delphi_qualitative(p: &Prompt) -> Option<String> {
    let first = p.last.starts_with("You are participating in a Delphi consensus exercise.");
    let later = p.last.starts_with("DELPHI ROUND") && p.last.contains("YOUR PREVIOUS ANSWER:");
    if !(first || later) {
        return None;
    }
    if p.malformed {
        return Some("I would rather not choose.".into());
    }
    let round = between(p.last, "DELPHI ROUND ", " ").parse::<usize>().unwrap_or(1);
    let answer = if first {
        let options: Vec<&str> = p
            .last
            .lines()
            .skip_while(|l| !l.starts_with("Choose from these options:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_once(". ").map(|(_, o)| o))
            .collect();
        if options.is_empty() {
            ["A careful, incremental approach", "A bold change", "Wait and see"]
                [(seed_of(&[p.model, p.last]) % 3) as usize]
                .to_string()
        } else {
            let pick = options
                .iter()
                .enumerate()
                .max_by_key(|(_, o)| seed_of(&[p.model, p.last, o]))
                .map_or(0, |(i, _)| i);
            // Some models answer with the option's number, others with its text.
            if seed_of(&[p.model, "style"]).is_multiple_of(2) {
                format!("{}", pick + 1)
            } else {
                options[pick].to_string()
            }
        }
    } else {
        let prev = between(p.last, "YOUR PREVIOUS ANSWER: ", "\n").to_string();
        let top = between(p.last, "- Distribution:\n", "\n")
            .trim()
            .split(": ")
            .next()
            .unwrap_or("")
            .to_string();
        if stubborn(p.model) || top.is_empty() {
            prev
        } else {
            top
        }
    };
    Some(format!(
        "[simulated answer from {}]\nANSWER: {answer}\nCONFIDENCE: {}\nREASONING: Weighing the trade-offs and the panel's view.{}",
        p.model,
        level(p.model, round),
        p.hostile_inline()
    ))
}

pub(crate) fn delphi_report(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("You are the facilitator for a Delphi exercise") {
        return None;
    }
    let status = between(p.last, "CONVERGENCE STATUS: ", "\n");
    let value = p
        .last
        .lines()
        .find_map(|l| {
            l.strip_prefix("FINAL CONSENSUS VALUE: ")
                .or_else(|| l.strip_prefix("FINAL MAJORITY ANSWER: "))
        })
        .unwrap_or("?");
    let question = between(p.last, "QUESTION: ", "\n");
    Some(format!(
        "[simulated report from {}]\n\n## Delphi Consensus Report\n\n### Question\n{question}\n\n### Final Consensus\n{value} ({status}).\n\n### Convergence Analysis\n{}Opinions moved toward the centre after the first round.\n\n### Confidence Trajectory\nConfidence rose as the estimates converged.\n\n### Outlier Analysis\nOne participant held a distant position throughout.\n\n### Reliability Assessment\nModerate: a small simulated panel.",
        p.model,
        p.hostile_paragraph()
    ))
}

/// Whether a Delphi question asks for a quantity (the sims classify it NUMERIC).
fn asks_for_quantity(question: &str) -> bool {
    const NUMERIC: &[&str] = &[
        "how many",
        "how much",
        "percentage",
        "percent",
        "estimate",
        "number of",
        "what year",
        "when will",
        "how long",
        "how far",
        "how big",
        "probability",
        "price",
        "cost",
    ];
    NUMERIC.iter().any(|w| question.contains(w))
}

/// Whether a (lower-cased) Delphi question is a yes-or-no one.
fn asks_yes_or_no(question: &str) -> bool {
    ["should", "is ", "will", "can ", "do ", "does", "are "].iter().any(|w| question.starts_with(w))
}
