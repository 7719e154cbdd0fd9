//! The chain's sim answers: a draft for step 1, then the latest version with a pass added.

use super::*;

pub(super) fn sim_answer(ask: &SimAsk) -> Option<String> {
    let p = ask.prompt;
    let (head, _) = p.split_once(CHAIN_HEAD)?;
    let step: usize = head.strip_prefix("You are step ")?.split(' ').next()?.parse().ok()?;
    let mut rng = SplitMix64::new(ask.seed);
    let who = ask.model;
    if step == 1 || !p.contains(VERSION_START) {
        let request =
            p.split("Request: ").nth(1).and_then(|r| r.split("\n\n").next()).unwrap_or("");
        let draft = format!(
            "# {request}\n\n[simulated draft from {who}]\n\n## Overview\n\n{}This first version \
             covers the request as a whole: what it asks, why it matters and how to go about it.\n\n\
             ## Steps\n\n1. Understand the goal.\n2. Choose the tools.\n3. Do the work and check it.\n\n\
             ## Pitfalls\n\nCommon mistakes and how to avoid them.",
            ask.hostile_paragraph()
        );
        if ask.malformed {
            return Some(format!(
                "Sure! Here is a first version of what you asked for.\n\n{draft}"
            ));
        }
        return Some(draft);
    }
    let latest = p
        .split_once(VERSION_START)
        .and_then(|(_, rest)| rest.split_once(VERSION_END))
        .map_or("", |(v, _)| v.trim());
    let mandate = p
        .split_once("Your mandate: ")
        .and_then(|(_, rest)| rest.split_once(" — "))
        .map_or("Improvement", |(m, _)| m);
    let note = if rng.below(3) == 0 {
        format!("[Editor's Note: step {step} trimmed a repeated sentence from the overview.]\n\n")
    } else {
        String::new()
    };
    let added = format!(
        "\n\n## {mandate} (step {step})\n\n{}[simulated {mandate} pass by {who}] The text above \
         was reviewed for this mandate; {} points were strengthened.",
        ask.hostile_paragraph(),
        1 + rng.below(4)
    );
    if ask.malformed {
        return Some(format!("Here is the improved version, as requested:\n\n{latest}{added}"));
    }
    Some(format!("{note}{latest}{added}"))
}
