//! Jury's prompts: the juror's scorecard (as text or as its schema's JSON), the foreman's
//! report with what it is given to quote, and the title.

use super::*;

// ---- prompts (verbatim from the seed) -------------------------------------------------------

/// How a juror's prompt begins (what the sim models recognise it by).
pub const JUROR_HEAD: &str = "You are a juror evaluating";

/// The juror's prompt asking for the seed's scorecard, or, given the stage's schema, for its
/// JSON instead: the same instructions (dimensions, scale, verdict thresholds), the seed's
/// `Format your response as:` section swapped for the schema's fields.
pub fn evaluation_prompt(
    content: &str,
    original_question: Option<&str>,
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = format!(
        "{JUROR_HEAD} the quality of a response. Score it on 5 dimensions (1-10 each) and deliver a verdict.\n\n",
    );
    if let Some(q) = original_question {
        p.push_str(&format!("ORIGINAL QUESTION:\n{q}\n\n"));
    }
    p.push_str(&format!("CONTENT UNDER EVALUATION:\n{content}\n\n"));
    p.push_str(
        "Score each dimension from 1 (terrible) to 10 (exceptional):\n\
\n\
1. **Accuracy** — Are the facts, claims, and technical details correct?\n\
2. **Completeness** — Does it cover all important aspects of the topic?\n\
3. **Clarity** — Is it well-organized, easy to follow, and unambiguous?\n\
4. **Relevance** — Does it directly address the question/task at hand?\n\
5. **Actionability** — Does it provide concrete, usable guidance?\n\
\n\
For each dimension, provide:\n\
- A score (1-10)\n\
- 1-2 sentences of justification\n\
\n\
Then deliver your verdict based on your average score:\n\
- APPROVE (average >= 7): The content is good enough for use\n\
- REVISE (average 4-6.9): The content needs improvement before use\n\
- REJECT (average < 4): The content is fundamentally flawed\n\
\n",
    );
    if let Some(schema) = schema {
        p.push_str(&schema.instruction());
        return p;
    }
    p.push_str(
        "Format your response as:\n\
\n\
## Juror Assessment\n\
\n\
### Scores\n\
\n\
| Dimension | Score | Justification |\n\
|-----------|:-----:|---------------|\n\
| Accuracy | [1-10] | [justification] |\n\
| Completeness | [1-10] | [justification] |\n\
| Clarity | [1-10] | [justification] |\n\
| Relevance | [1-10] | [justification] |\n\
| Actionability | [1-10] | [justification] |\n\
| **Average** | [avg] | |\n\
\n\
### Deliberation Notes\n\
[2-3 paragraphs explaining your overall assessment, key strengths, and key weaknesses]\n\
\n\
### Verdict\n\
VERDICT: [APPROVE|REVISE|REJECT]\n\
\n\
### Recommendations\n\
[If REVISE or REJECT: numbered list of specific improvements needed]",
    );
    p
}

pub fn foreman_prompt(
    content: &str,
    original_question: Option<&str>,
    jurors: &[JurorAssessment],
    tally: &VoteTally,
    majority: Option<Verdict>,
) -> String {
    let mut p = String::from(
        "You are the foreman of a jury that has evaluated the following content. Synthesize all juror assessments into a final verdict report.\n\n",
    );
    p.push_str(&format!("CONTENT EVALUATED:\n{content}\n\n"));
    if let Some(q) = original_question {
        p.push_str(&format!("ORIGINAL QUESTION:\n{q}\n\n"));
    }
    p.push_str("JUROR ASSESSMENTS:\n");
    for (i, j) in jurors.iter().enumerate() {
        p.push_str(&format!("--- Juror {} ({}) ---\n{}\n\n", i + 1, j.model, juror_said(j)));
    }
    p.push_str(&format!(
        "VOTE TALLY:\n- APPROVE: {}\n- REVISE: {}\n- REJECT: {}\n- Majority Verdict: {}\n\n",
        tally.approve,
        tally.revise,
        tally.reject,
        majority.map_or("none (no juror's verdict or scores could be read)", Verdict::as_str)
    ));
    p.push_str(
        "Produce a formal verdict report:\n\
\n\
## Jury Verdict Report\n\
\n\
### Final Verdict: [APPROVE|REVISE|REJECT]\n\
[1-2 sentence summary explaining the jury's decision]\n\
\n\
### Dimension Analysis\n\
\n\
| Dimension | Avg Score | Min | Max | Consensus |\n\
|-----------|:---------:|:---:|:---:|-----------|\n\
| Accuracy | [avg] | [min] | [max] | [agreement note] |\n\
| Completeness | [avg] | [min] | [max] | [agreement note] |\n\
| Clarity | [avg] | [min] | [max] | [agreement note] |\n\
| Relevance | [avg] | [min] | [max] | [agreement note] |\n\
| Actionability | [avg] | [min] | [max] | [agreement note] |\n\
| **Overall** | [avg] | [min] | [max] | |\n\
\n\
### Key Strengths (Consensus)\n\
[Strengths identified by 2+ jurors — bulleted list]\n\
\n\
### Key Weaknesses (Consensus)\n\
[Weaknesses identified by 2+ jurors — bulleted list]\n\
\n\
### Improvement Recommendations\n\
[Prioritized numbered list — only include if verdict is REVISE or REJECT]\n\
\n\
### Dissenting Opinions\n\
[If any juror's verdict differed from the majority, summarize their reasoning here. If unanimous, state \"The jury was unanimous.\"]",
    );
    p
}

/// A juror's assessment as the foreman reads it: its answer without its reasoning block, a
/// JSON scorecard as `Field: value` lines (the foreman, and the person reading its report,
/// should not have to read raw JSON).
fn juror_said(j: &JurorAssessment) -> String {
    readable(&j.assessment_text).into_owned()
}

/// The quoted material of the foreman's prompt, each text exactly as the prompt holds it: what
/// the engine cuts first when the prompt would not fit the foreman's context (on a 4,096-token
/// model the jurors' assessments and the content overflowed it).
pub fn foreman_material(
    content: &str,
    original_question: Option<&str>,
    jurors: &[JurorAssessment],
) -> Vec<(String, String)> {
    let mut m = vec![("the content under review".to_string(), content.to_string())];
    if let Some(q) = original_question {
        m.push(("the original question".to_string(), q.to_string()));
    }
    m.extend(
        jurors
            .iter()
            .enumerate()
            .map(|(i, j)| (format!("Juror {}'s assessment ({})", i + 1, j.model), juror_said(j))),
    );
    m
}

/// The seed's jury title prompt, on the first 200 characters of the content.
pub fn title_prompt(content: &str) -> String {
    let preview: String = content.chars().take(200).collect();
    format!(
        "Generate a brief title (3-5 words) for a jury evaluation session about this content:\n\n\
         \"{preview}\"\n\n\
         Reply with ONLY the title. No quotes, no punctuation, no explanation."
    )
}
