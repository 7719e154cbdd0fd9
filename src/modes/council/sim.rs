//! Council's sim answers: the text sim's ranking of the labelled answers and the
//! chairman's synthesis.

use crate::modes::sim_text::{labeled_blocks, pick, rng, seed_of, Prompt};

pub(crate) fn ranking(p: &Prompt) -> Option<String> {
    if !(p.last.contains("FINAL RANKING:") && p.last.contains("--- Response ")) {
        return None;
    }
    let blocks = labeled_blocks(p.last);
    if p.malformed {
        return Some(format!(
            "[simulated evaluation from {}] Honestly, every answer here has merit and I would not \
             want to put one above another.",
            p.model
        ));
    }
    // Each model scores an answer by its own taste: a hash of (model, answer text). Different
    // models therefore disagree, and the same model is consistent.
    let mut scored: Vec<(u64, &String)> =
        blocks.iter().map(|(l, text)| (seed_of(&[p.model, text.trim()]), l)).collect();
    scored.sort();
    let mut r = rng(p, "ranking");
    let mut s = format!("[simulated evaluation from {}]\n\n{}", p.model, p.hostile_paragraph());
    for (l, text) in &blocks {
        let words = text.split_whitespace().count();
        let verdict = pick(
            &mut r,
            &[
                "is clear and well organised",
                "covers the main points but misses a caveat",
                "is accurate though somewhat terse",
                "is thorough, if a little long",
                "makes a strong argument with good examples",
            ],
        );
        s.push_str(&format!("{l} ({words} words) {verdict}.\n"));
    }
    s.push_str("\nFINAL RANKING:\n");
    for (i, (_, l)) in scored.iter().enumerate() {
        s.push_str(&format!("{}. {l}\n", i + 1));
    }
    Some(s)
}

pub(crate) fn synthesis(p: &Prompt) -> Option<String> {
    if !p.last.starts_with("You are a chairman synthesizing") {
        return None;
    }
    let question = p
        .last
        .lines()
        .find_map(|l| l.strip_prefix("Original Question: "))
        .unwrap_or("the question");
    let stage1 = p.last.split("STAGE 2").next().unwrap_or("");
    let models: Vec<&str> = stage1
        .lines()
        .filter_map(|l| l.trim().strip_prefix("--- ").and_then(|s| s.strip_suffix(" ---")))
        .collect();
    if p.malformed {
        return Some(format!("[simulated synthesis by {}] …", p.model));
    }
    let mut r = rng(p, "synthesis");
    let opener = pick(
        &mut r,
        &[
            "The council broadly agrees",
            "Taken together, the answers converge",
            "Across the panel there is a clear core of agreement",
        ],
    );
    Some(format!(
        "[simulated synthesis by {chair}]\n\n{opener} on \"{question}\".\n\n{hostile}\
         Drawing on the answers of {models}, the strongest points are the ones several members \
         made independently, and the peer rankings favoured the answers that explained their \
         reasoning. Where the members disagreed, the disagreement is about emphasis rather \
         than facts.\n\nIn short: weigh the trade-offs for your own situation; the panel's \
         consensus is a starting point, not a verdict. (This text is simulated: no real model \
         was asked.)",
        chair = p.model,
        models = if models.is_empty() { "the council".to_string() } else { models.join(", ") },
        hostile = p.hostile_paragraph(),
    ))
}
