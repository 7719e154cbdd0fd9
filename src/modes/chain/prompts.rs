//! Chain's prompts: step 1's draft and each later step's improvement of the latest version.

use super::*;

pub const CHAIN_HEAD: &str = "in a writing chain.";
pub const VERSION_START: &str = "=== LATEST VERSION ===";
pub const VERSION_END: &str = "=== END OF VERSION ===";

pub fn draft_prompt(question: &str, total: usize, step: &StepConfig) -> String {
    let focus = match step.mandate {
        Mandate::Draft => String::new(),
        _ => format!("\n\nYour mandate is {}: {}.", step.mandate.display(), step.focus()),
    };
    format!(
        "You are step 1 of {total} {CHAIN_HEAD} Write the first complete version.\n\n\
         Request: {question}\n\nWrite a thorough, well-organised first version that covers every \
         aspect of the request; favour coverage over polish.{focus}\n\n\
         Reply with the text itself only: no meta-commentary."
    )
}

/// A skipped step as the next one is told of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub step: usize,
    pub mandate: String,
    pub focus: String,
}

pub fn improve_prompt(
    question: &str,
    k: usize,
    total: usize,
    step: &StepConfig,
    latest: &str,
    based_on: usize,
    skipped: &[Skipped],
) -> String {
    let missed = if skipped.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = skipped
            .iter()
            .map(|s| format!("- step {} ({}): {}", s.step, s.mandate, s.focus))
            .collect();
        format!(
            "\n\nThese earlier steps were skipped, so cover their mandates too:\n{}",
            list.join("\n")
        )
    };
    format!(
        "You are step {k} of {total} {CHAIN_HEAD} Your mandate: {} — {}.\n\nRequest: {question}\n\n\
         The latest version, written by step {based_on}:\n\n{VERSION_START}\n{latest}\n{VERSION_END}{missed}\n\n\
         Rules: build on this version rather than starting again; keep what already works; \
         integrate your additions into the text; if you remove anything, justify it in a leading \
         [Editor's Note: …]; no meta-commentary. Reply with the complete improved version only.",
        step.mandate.display(),
        step.focus()
    )
}
