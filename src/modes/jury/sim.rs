//! Jury's sim answers: a juror's scorecard in JSON for the juror schema (`ModeSpec::sim`),
//! and the text sim's juror and foreman.

use super::*;
use crate::modes::sim_text::{self, pick, rng, seed_of, Prompt};

/// Jury's sim answer to its juror schema (None for any other prompt or schema): the text sim's
/// juror in JSON. The content sets the level (every juror sees the same), the model its
/// leniency, and the verdict follows the average by the seed's thresholds, so panels split
/// as they do in text.
pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    use crate::modes::sim_text::seed_of;
    let schema = ask.schema.filter(|s| s.name == JUROR_SCHEMA)?;
    let content = between(ask.prompt, "CONTENT UNDER EVALUATION:\n", "\n\nScore each dimension");
    let quality = 3 + (seed_of(&[content]) % 6) as i64;
    let leniency = (seed_of(&[ask.model, "leniency"]) % 5) as i64 - 2;
    let mut r = SplitMix64::new(ask.seed);
    let scores: Vec<i64> =
        (0..5).map(|_| (quality + leniency + r.below(3) as i64 - 1).clamp(1, 10)).collect();
    let avg = scores.iter().sum::<i64>() as f64 / 5.0;
    let verdict = Verdict::from_average(avg);
    let reasoning: String = format!(
        "[simulated assessment from {}] {}The content addresses its task and is organised sensibly. Its main weakness is a lack of concrete examples and error handling; its main strength is clarity.",
        ask.model,
        ask.hostile_paragraph()
    )
    .chars()
    .take(schema::REASONING_MAX_CHARS)
    .collect();
    let recommendations: &[&str] = if verdict == Verdict::Approve {
        &[]
    } else {
        &["Add concrete examples.", "Document error cases.", "Tighten the structure."]
    };
    let reply = to_json(&SimScorecard {
        reasoning,
        scores: Dims::from_fn(|i| scores[i]),
        verdict,
        recommendations,
    });
    debug_assert!(schema.validate(&reply).is_ok());
    Some(reply.to_string())
}

/// A juror's scorecard as the sim writes it (the juror schema's fields).
#[derive(Serialize)]
struct SimScorecard<'a> {
    reasoning: String,
    scores: Dims<i64>,
    verdict: Verdict,
    recommendations: &'a [&'a str],
}

/// A model's leniency as a juror: -2 (strict) to +2 (generous).
fn leniency(model: &str) -> i64 {
    (seed_of(&[model, "leniency"]) % 5) as i64 - 2
}

pub(crate) fn juror(p: &Prompt) -> Option<String> {
    if !p.last.starts_with(crate::modes::jury::JUROR_HEAD) {
        return None;
    }
    if p.malformed {
        return Some(format!(
            "[simulated assessment from {}] The content reads well overall, though parts of it left me unsure.",
            p.model
        ));
    }
    let content =
        sim_text::between(p.last, "CONTENT UNDER EVALUATION:\n", "\n\nScore each dimension");
    // The content sets the level (every juror sees the same), the model its leniency.
    let quality = 3 + (seed_of(&[content]) % 6) as i64;
    let mut r = rng(p, "juror");
    let mut s =
        format!("[simulated assessment from {}]\n\n## Juror Assessment\n\n### Scores\n\n", p.model);
    s.push_str("| Dimension | Score | Justification |\n|-----------|:-----:|---------------|\n");
    let mut total = 0;
    for dim in ["Accuracy", "Completeness", "Clarity", "Relevance", "Actionability"] {
        let score = (quality + leniency(p.model) + r.below(3) as i64 - 1).clamp(1, 10);
        total += score;
        let why = pick(
            &mut r,
            &[
                "Mostly solid, with a gap or two.",
                "Clear strengths, but room to improve.",
                "Does what it sets out to do.",
                "Some claims need support.",
            ],
        );
        s.push_str(&format!("| {dim} | {score} | {why} |\n"));
    }
    let avg = total as f64 / 5.0;
    let verdict = if avg >= 7.0 {
        "APPROVE"
    } else if avg >= 4.0 {
        "REVISE"
    } else {
        "REJECT"
    };
    s.push_str(&format!("| **Average** | {avg:.1} | |\n\n### Deliberation Notes\n"));
    s.push_str("The content addresses its task and is organised sensibly. Its main weakness is a lack of concrete examples and error handling; its main strength is clarity.\n\n");
    s.push_str(&p.hostile_paragraph());
    s.push_str(&format!("### Verdict\nVERDICT: {verdict}\n\n### Recommendations\n"));
    if verdict == "APPROVE" {
        s.push_str("None required.\n");
    } else {
        s.push_str(
            "1. Add concrete examples.\n2. Document error cases.\n3. Tighten the structure.\n",
        );
    }
    Some(s)
}

pub(crate) fn foreman(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("You are the foreman of a jury") {
        return None;
    }
    let majority = sim_text::between(p.last, "- Majority Verdict: ", "\n");
    let count = |v: &str| {
        sim_text::between(p.last, &format!("- {v}: "), "\n").parse::<usize>().unwrap_or(0)
    };
    let counts = [count("APPROVE"), count("REVISE"), count("REJECT")];
    let unanimous = counts.iter().filter(|c| **c > 0).count() <= 1;
    let mut s = format!(
        "[simulated report from {}]\n\n## Jury Verdict Report\n\n### Final Verdict: {majority}\nThe jury reached {majority} by majority.\n\n{}",
        p.model,
        p.hostile_paragraph()
    );
    s.push_str("### Dimension Analysis\n\n(Scores are aggregated by Conclave from the jurors' scorecards.)\n\n");
    s.push_str("### Key Strengths (Consensus)\n- Clear, well-organised structure\n- Addresses the task directly\n\n");
    s.push_str("### Key Weaknesses (Consensus)\n- Too few concrete examples\n- Error cases are not covered\n\n");
    if majority != "APPROVE" {
        s.push_str(
            "### Improvement Recommendations\n1. Add worked examples\n2. Document error cases\n\n",
        );
    }
    s.push_str("### Dissenting Opinions\n");
    if unanimous {
        s.push_str("The jury was unanimous.\n");
    } else {
        s.push_str(
            "- A minority of jurors reached a different verdict, weighing the gaps differently.\n",
        );
    }
    Some(s)
}
