//! Debate's revision prompt (as text or as its schema's JSON).

use super::*;

/// The revision prompt asking for the seed's `DECISION:` / `REASONING:` / `REVISED RESPONSE:`
/// sections, or, given the stage's schema, for its JSON instead (the same instructions and
/// three options, the seed's "State your choice…" section swapped for the schema's fields).
pub fn revision_prompt(
    question: &str,
    own: &str,
    others: &[(String, String)],
    schema: Option<&ReplySchema>,
) -> String {
    let mut p = String::from(
        "You previously answered a question. Now you will see how other respondents answered the same question (anonymously). You may revise your response or stand by your original if you believe it was superior.\n\n",
    );
    p.push_str(&format!(
        "ORIGINAL QUESTION:\n{question}\n\nYOUR ORIGINAL RESPONSE:\n{own}\n\nOTHER RESPONSES:\n"
    ));
    p.push_str(&response_blocks(others));
    p.push_str(
        "Instructions:\n\
1. Carefully consider the other responses. What insights do they offer that yours missed?\n\
2. Identify any errors or omissions in your original response.\n\
3. You have three options:\n   \
a) REVISE: Produce an improved response incorporating insights from others\n   \
b) STAND: Keep your original response unchanged (explain why)\n   \
c) MERGE: Substantially rewrite by combining the best elements of all responses\n\
\n",
    );
    if let Some(schema) = schema {
        p.push_str(&schema.instruction());
        return p;
    }
    p.push_str(
        "State your choice, then provide the response:\n\
\n\
DECISION: [REVISE|STAND|MERGE]\n\
REASONING: [1-2 sentences on why]\n\
\n\
REVISED RESPONSE:\n\
[Your final response — if STAND, repeat your original]",
    );
    p
}
