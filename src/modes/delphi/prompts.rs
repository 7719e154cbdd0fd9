//! Delphi's prompts, verbatim from the seed: the classification, the first and later rounds
//! (numeric and qualitative) and the facilitator's report, each with its JSON variant.

use super::*;

// ---- prompts (verbatim from the seed) -------------------------------------------------------

/// The seed's `Format:` section of the classification prompt.
const CLASSIFY_FORMAT: &str = "Format:\n\
TYPE: [NUMERIC|QUALITATIVE]\n\
OPTIONS: [comma-separated options, or \"N/A\" if NUMERIC]\n\
REASONING: [one sentence explaining your classification]";

/// The classification prompt asking for the seed's `Format:` section, or, given the stage's
/// schema, for its JSON instead (the same instructions otherwise).
pub fn classify_prompt(question: &str, schema: Option<&ReplySchema>) -> String {
    format!(
        "Classify the following question for a Delphi estimation exercise.\n\nQUESTION:\n{question}\n\n\
Determine:\n\
1. Is this a NUMERIC question (expects a number, quantity, estimate, percentage, date, or measurable value)?\n\
2. Or is this a QUALITATIVE question (expects a category, recommendation, choice, or opinion)?\n\n\
If QUALITATIVE, suggest 3-6 answer options that cover the reasonable range of responses.\n\n\
{}",
        format_or(schema, CLASSIFY_FORMAT)
    )
}

/// The seed's text format, or the schema's JSON instruction in its place.
fn format_or(schema: Option<&ReplySchema>, text: &str) -> String {
    schema.map_or_else(|| text.to_string(), ReplySchema::instruction)
}

const ROUND1_NUMERIC_FORMAT: &str =
    "Format:\nESTIMATE: [number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [your reasoning]";

/// The seed's round-1 prompt for a quantity, or its JSON form given the round's schema.
pub fn round1_numeric_prompt(question: &str, schema: Option<&ReplySchema>) -> String {
    format!(
        "You are participating in a Delphi estimation exercise. You will provide your independent estimate for a question. In later rounds, you will see aggregate statistics from all participants (but never individual responses).\n\n\
QUESTION:\n{question}\n\n\
Provide:\n1. Your numeric estimate\n2. Your confidence level (LOW/MEDIUM/HIGH)\n3. Your reasoning (2-4 sentences)\n\n{}",
        format_or(schema, ROUND1_NUMERIC_FORMAT)
    )
}

const ROUND1_QUALITATIVE_FORMAT: &str = "Format:\nANSWER: [your answer or option number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [your reasoning]";

/// The seed's round-1 prompt for a choice, or its JSON form given the round's schema.
pub fn round1_qualitative_prompt(
    question: &str,
    options: &[String],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = format!(
        "You are participating in a Delphi consensus exercise. You will provide your independent assessment. In later rounds, you will see aggregate results from all participants (but never individual responses).\n\n\
QUESTION:\n{question}\n\n"
    );
    if !options.is_empty() {
        p.push_str("Choose from these options:\n");
        for (i, o) in options.iter().enumerate() {
            p.push_str(&format!("{}. {o}\n", i + 1));
        }
        p.push('\n');
    }
    p.push_str(
        "Provide:\n1. Your answer/recommendation\n2. Your confidence level (LOW/MEDIUM/HIGH)\n3. Your reasoning (2-4 sentences)\n\n",
    );
    p.push_str(&format_or(schema, ROUND1_QUALITATIVE_FORMAT));
    p
}

/// Numbers as the prompts show them: whole numbers with separators, others to 3 decimals.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "Infinity".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let digits = format!("{}", v.abs() as i64);
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        return if v < 0.0 { format!("-{out}") } else { out };
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

const ROUND_N_NUMERIC_FORMAT: &str = "ESTIMATE: [number]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [why you revised or maintained — reference the aggregates]";

/// The seed's later-round prompt for a quantity (the panel's statistics), or its JSON form
/// given the round's schema.
pub fn round_n_numeric_prompt(
    question: &str,
    round: u32,
    max: u32,
    prev: &Estimate,
    stats: &NumericStats,
    n: usize,
    schema: Option<&ReplySchema>,
) -> String {
    let c = &stats.confidence_counts;
    format!(
        "DELPHI ROUND {round} of {max}\n\nQUESTION: {question}\n\n\
YOUR PREVIOUS ESTIMATE: {}\nYOUR PREVIOUS CONFIDENCE: {}\n\n\
AGGREGATE STATISTICS FROM ALL {n} PARTICIPANTS (Round {}):\n\
- Mean: {}\n- Median: {}\n- Standard Deviation: {}\n- Range: {} — {}\n- Coefficient of Variation: {}\n\
- Confidence Distribution: {} LOW, {} MEDIUM, {} HIGH\n\n\
You may revise your estimate based on these aggregates, or maintain your position if you believe you are correct.\n\n\
{}",
        prev.value.as_number().map_or("none (your previous answer could not be read)".into(), fmt_num),
        prev.confidence.as_str(),
        round - 1,
        fmt_num(stats.mean),
        fmt_num(stats.median),
        fmt_num(stats.std_dev),
        fmt_num(stats.min),
        fmt_num(stats.max),
        fmt_num(stats.cv),
        c.low,
        c.medium,
        c.high,
        format_or(schema, ROUND_N_NUMERIC_FORMAT)
    )
}

const ROUND_N_QUALITATIVE_FORMAT: &str = "ANSWER: [your answer]\nCONFIDENCE: [LOW|MEDIUM|HIGH]\nREASONING: [why you revised or maintained — reference the distribution]";

/// The seed's later-round prompt for a choice (the panel's distribution), or its JSON form
/// given the round's schema.
pub fn round_n_qualitative_prompt(
    question: &str,
    round: u32,
    max: u32,
    prev: &Estimate,
    stats: &QualitativeStats,
    n: usize,
    schema: Option<&ReplySchema>,
) -> String {
    let mut dist = String::new();
    for d in &stats.distribution {
        dist.push_str(&format!(
            "  {}: {} participants ({}%)\n",
            d.answer,
            d.count,
            fmt_num(d.percentage)
        ));
    }
    let c = &stats.confidence_counts;
    format!(
        "DELPHI ROUND {round} of {max}\n\nQUESTION: {question}\n\n\
YOUR PREVIOUS ANSWER: {}\n\n\
AGGREGATE RESULTS FROM ALL {n} PARTICIPANTS (Round {}):\n- Distribution:\n{dist}\
- Agreement Level: {}%\n- Confidence Distribution: {} LOW, {} MEDIUM, {} HIGH\n\n\
You may revise your answer based on these aggregates, or maintain your position.\n\n\
{}",
        prev.value.as_answer().unwrap_or("none (your previous answer could not be read)"),
        round - 1,
        fmt_num(stats.agreement_percentage),
        c.low,
        c.medium,
        c.high,
        format_or(schema, ROUND_N_QUALITATIVE_FORMAT)
    )
}

pub fn synthesis_prompt(
    question: &str,
    rounds: &[RoundRecord],
    n: usize,
    converged: bool,
    final_value: &FinalValue,
) -> String {
    let mut p = format!(
        "You are the facilitator for a Delphi exercise that ran {} rounds with {n} participants.\n\nQUESTION: {question}\n\nCONVERGENCE TRAJECTORY:\n",
        rounds.len()
    );
    for r in rounds {
        p.push_str(&format!("Round {}:\n", r.round));
        match &r.stats {
            Stats::Numeric(s) => p.push_str(&format!(
                "- Mean: {}, Median: {}, StdDev: {}, CV: {}\n- Range: {} — {}\n",
                fmt_num(s.mean),
                fmt_num(s.median),
                fmt_num(s.std_dev),
                fmt_num(s.cv),
                fmt_num(s.min),
                fmt_num(s.max)
            )),
            Stats::Qualitative(s) => p.push_str(&format!(
                "- Distribution: {}\n- Agreement: {}%\n",
                s.shares(),
                fmt_num(s.agreement_percentage)
            )),
        }
        let c = r.stats.confidence_counts();
        p.push_str(&format!("- Confidence: {}L / {}M / {}H\n", c.low, c.medium, c.high));
    }
    let (label, value) = match final_value {
        FinalValue::Number(v) => ("CONSENSUS VALUE", fmt_num(*v)),
        FinalValue::Answer(a) => ("MAJORITY ANSWER", a.clone()),
    };
    p.push_str(&format!(
        "\nCONVERGENCE STATUS: {}\nFINAL {label}: {value}\n\n",
        if converged { "Converged" } else { "Max rounds reached" }
    ));
    p.push_str(&format!(
        "Produce a Delphi Report:\n\n## Delphi Consensus Report\n\n### Question\n{question}\n\n\
### Final Consensus\n[The consensus value/answer with confidence interval if numeric]\n\n\
### Convergence Analysis\n[How opinions shifted across rounds. Did they converge smoothly or oscillate? Which rounds saw the biggest shifts?]\n\n\
### Confidence Trajectory\n[How participant confidence changed across rounds]\n\n\
### Outlier Analysis\n[Were there persistent outliers who never converged? What might their reasoning have been?]\n\n\
### Reliability Assessment\n[How reliable is this consensus? Consider: convergence speed, final CV/agreement, confidence levels, participant count]"
    ));
    p
}
