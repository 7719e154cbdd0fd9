//! `sim/oracle-P` models (`sim/oracle-0.6`, or `sim/oracle-0.6-a` to tell panel members apart):
//! sim models that answer an eval question correctly with probability `P` (0 to 1),
//! independently per call, so that the statistics of `conclave eval` can be tested against
//! exact expectations.
//!
//! The sim sees only prompts. The eval runner, in the same process, registers each question's
//! prompt with its answer key ([`register`]); the answer is never put in the prompt, and an
//! oracle never reads one from it. An oracle whose chat is or quotes a registered prompt (its
//! last user message, else any message) draws right or wrong and answers in the form the
//! mode asking expects, read by that mode's own parsers, stating the answer drawn where the
//! eval's grader reads the mode's answer:
//!
//! - the question itself (Solo; the first stage of Council, Vote, Debate, Tournament) and
//!   Council's synthesis: a reply ending in a `Final answer:` line;
//! - Vote's ballot and its chairman's tiebreak, Debate's vote (`VOTE: Response X`) and
//!   Tournament's match (`WINNER: Response X`): the first response stating the answer drawn
//!   (else the first stating any answer), so the winner's reply holds a `Final answer:` line;
//! - Debate's revision (`DECISION:` STAND when its own answer is the one drawn, else REVISE,
//!   and the answer under `REVISED RESPONSE:`), Confidence-Weighted's answer (`RESPONSE:`,
//!   `CONFIDENCE: P`) and synthesis (`SYNTHESIS:`), Chain's steps (the latest version without
//!   its answer line, then the answer drawn), Specialist Panel's reports (a rating of 4 per
//!   criterion) and synthesis, Peer Review's reviews (a score of 4 per criterion, three
//!   findings) and consolidated report, Decompose's assembly: each in its sections with the
//!   `Final answer:` line last;
//! - Delphi, for `number` questions only: NUMERIC to the classification, `ESTIMATE:` the
//!   answer drawn in every round, and the report ends with it;
//! - Jury's juror (its `ORIGINAL QUESTION:` registered): reads the content's stated answer
//!   with the eval's grader and judges rightly with probability P, APPROVE a right answer and
//!   REJECT a wrong or missing one, else the other of the two ([`juror_reply`]: every score 8
//!   or 2 and the `VERDICT:` line); three jurors of 0.6 reach the right majority with
//!   probability 0.648.
//!
//! Any other prompt (rankings, titles, Decompose's plan and tasks, Delphi on other questions,
//! the modes where a graded answer makes no sense: Brainstorm, Red Team, Fact Check,
//! Blueprint, Clarity) gets the ordinary sim answer. An oracle as an eval `judge` compares the
//! stated answer with the reference. A sim-server in another process has no keys: its oracles
//! answer like `sim/alpha`.
//!
//! Every wrong answer to a question is the same one (its *distractor*: the next letter, the
//! number plus one), so a plurality of oracles is a two-way vote and is right exactly when more
//! than half its members are: three 0.6 members 0.648, five 0.68256 (see
//! [`crate::eval::stats::majority_expectation`]).
//!
//! Draws are seeded by the key's seed (the eval's `--seed`), the model, the prompt and a count
//! of the calls made so far with that model and prompt: independent per call, reproducible for
//! a sequential run.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};

use super::grade::{grade, normalise, number_text, stated_answer, Grade};
use super::questions::{Kind, Question};
use crate::modes::sim_text::{labeled_blocks, section, seed_of};
use crate::modes::{
    chain, confidence_weighted as cw, decompose, peer_review, specialist_panel as panel,
    tournament, ChatMessage,
};

/// What an oracle needs to answer a question.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerKey {
    pub answer: String,
    pub kind: Kind,
    pub seed: u64,
}

#[derive(Default)]
struct Keys {
    by_prompt: HashMap<String, AnswerKey>,
    /// Registered prompts by their first line: wherever a mode quotes a prompt, its first line
    /// ends a line of the quoting text (it may start after `Question: ` or the like).
    by_first_line: HashMap<String, Vec<String>>,
    /// The byte lengths of those first lines.
    first_line_lengths: BTreeSet<usize>,
    calls: HashMap<u64, u64>,
}

impl Keys {
    /// The registered prompt a text is or quotes (the longest, when it quotes several).
    fn find(&self, text: &str) -> Option<(String, AnswerKey)> {
        if let Some((p, k)) = self.by_prompt.get_key_value(text) {
            return Some((p.clone(), k.clone()));
        }
        let mut best: Option<&String> = None;
        for line in text.lines() {
            for n in self.first_line_lengths.range(..=line.len()) {
                let Some(tail) = line.get(line.len() - n..) else { continue };
                for p in self.by_first_line.get(tail).into_iter().flatten() {
                    if best.is_none_or(|b| p.len() > b.len()) && text.contains(p.as_str()) {
                        best = Some(p);
                    }
                }
            }
        }
        let p = best?;
        self.by_prompt.get(p).map(|k| (p.clone(), k.clone()))
    }

    /// The number of the next call of `model` at `prompt`, counted.
    fn next_call(&mut self, model: &str, prompt: &str) -> u64 {
        let counter = self.calls.entry(seed_of(&[model, prompt])).or_insert(0);
        *counter += 1;
        *counter - 1
    }
}

fn keys() -> std::sync::MutexGuard<'static, Keys> {
    static KEYS: OnceLock<Mutex<Keys>> = OnceLock::new();
    KEYS.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets the sim provider ask the oracles first (see [`crate::providers::sim::answer_first`]):
/// the eval sits above the providers, so it hands them its oracles rather than being
/// imported by them. Called by the eval runner and the sim-server; idempotent.
pub fn install() {
    crate::providers::sim::answer_first(answer);
}

/// Registers the answer key of a prompt for the oracles of this process.
pub fn register(prompt: &str, key: AnswerKey) {
    install();
    let mut keys = keys();
    if keys.by_prompt.insert(prompt.to_string(), key).is_none() {
        let first = prompt.lines().next().unwrap_or("");
        if !first.is_empty() {
            keys.first_line_lengths.insert(first.len());
            keys.by_first_line.entry(first.to_string()).or_default().push(prompt.to_string());
        }
    }
}

/// `P` of an oracle's name (`sim/oracle-0.6` → 0.6), None for other models.
pub fn probability(model: &str) -> Option<f64> {
    let rest = model.strip_prefix("sim/oracle-")?;
    // `sim/oracle-0.6-a`: a suffix tells apart panel members of one probability.
    let p: f64 = rest.split_once('-').map_or(rest, |(p, _)| p).parse().ok()?;
    (0.0..=1.0).contains(&p).then_some(p)
}

/// Whether the oracle's draw number `call` at this prompt is right.
pub fn draws_right(model: &str, prompt: &str, seed: u64, call: u64, p: f64) -> bool {
    let h = seed_of(&[model, prompt, &seed.to_string(), &call.to_string(), "oracle"]);
    ((h >> 11) as f64 / (1u64 << 53) as f64) < p
}

/// The one wrong answer oracles give to a question.
pub fn distractor(key: &AnswerKey) -> String {
    match &key.kind {
        Kind::Number { tolerance } => {
            let v = crate::modes::numbers::read_number(&key.answer).unwrap_or(0.0);
            number_text(v + (2.0 * tolerance).max(1.0))
        }
        Kind::Choice { options } => {
            let n = options.len().max(2) as u8;
            let i = key.answer.bytes().next().unwrap_or(b'A').saturating_sub(b'A') % n;
            char::from(b'A' + (i + 1) % n).to_string()
        }
        Kind::Exact | Kind::Judge => format!("not {}", key.answer),
    }
}

/// An oracle's reply, right or wrong.
pub fn reply_text(model: &str, key: &AnswerKey, right: bool) -> String {
    let value = if right { key.answer.clone() } else { distractor(key) };
    format!(
        "[simulated oracle answer from {model}: right with a set probability]\n\n{}",
        worked(&value)
    )
}

/// The oracle's reply to a chat, when `model` is an oracle and its prompt (the last user
/// message, or another message of the chat) is or quotes a registered question in a form it
/// knows (see the module docs); None otherwise, and for a title prompt. Counts the call.
pub fn answer(model: &str, messages: &[ChatMessage]) -> Option<String> {
    let p = probability(model)?;
    let last =
        messages.iter().rev().find(|m| m.role == "user").map(|m| m.content.as_str()).unwrap_or("");
    if last.starts_with(super::grade::JUDGE_OPENING) {
        return Some(judge(model, last, p));
    }
    if last.starts_with("Generate a brief title") {
        return None;
    }
    let (prompt, key) = {
        let keys = keys();
        keys.find(last).or_else(|| messages.iter().find_map(|m| keys.find(&m.content)))?
    };
    let asked = Asked { model, p, last, messages, prompt, key };
    FORMS.iter().find_map(|form| form(&asked))
}

/// A registered question as an oracle was asked it.
struct Asked<'a> {
    model: &'a str,
    p: f64,
    /// The last user message.
    last: &'a str,
    messages: &'a [ChatMessage],
    /// The registered prompt the chat is or quotes.
    prompt: String,
    key: AnswerKey,
}

impl Asked<'_> {
    /// A draw of this call: right with probability P.
    fn right(&self) -> bool {
        let call = keys().next_call(self.model, &self.prompt);
        draws_right(self.model, &self.prompt, self.key.seed, call, self.p)
    }

    /// The answer this call states: the key's, or the distractor.
    fn draw(&self) -> String {
        if self.right() {
            self.key.answer.clone()
        } else {
            distractor(&self.key)
        }
    }

    fn question(&self) -> Question {
        Question {
            id: String::new(),
            question: self.prompt.clone(),
            answer: self.key.answer.clone(),
            kind: self.key.kind.clone(),
        }
    }

    /// The answer a text states, as the eval's grader reads it (canonical), if any.
    fn stated(&self, text: &str) -> Option<String> {
        grade(text, &self.question()).answer
    }

    /// Whether a text states `value`.
    fn states(&self, text: &str, value: &str) -> bool {
        let wanted = self.stated(&format!("Final answer: {value}"));
        wanted.is_some() && self.stated(text) == wanted
    }

    /// Whether a text states the right answer: graded correct, or for a `judge` question its
    /// stated answer equal to the reference once normalised (as an oracle judge compares).
    fn is_right(&self, text: &str) -> bool {
        match self.key.kind {
            Kind::Judge => states_reference(text, &self.key.answer),
            _ => grade(text, &self.question()).grade == Grade::Correct,
        }
    }

    /// Of several candidates (label, text), the first stating `value`; else the first stating
    /// any answer; else the first.
    fn pick<'c>(&self, candidates: &'c [(String, String)], value: &str) -> Option<&'c str> {
        candidates
            .iter()
            .find(|(_, t)| self.states(t, value))
            .or_else(|| candidates.iter().find(|(_, t)| self.stated(t).is_some()))
            .or(candidates.first())
            .map(|(l, _)| l.as_str())
    }

    /// When `asked`, the reply `write` makes of the answer drawn (the draw is counted only then).
    fn answer_if(&self, asked: bool, write: impl FnOnce(&str) -> String) -> Option<String> {
        asked.then(|| write(&self.draw()))
    }

    fn is_number(&self) -> bool {
        matches!(self.key.kind, Kind::Number { .. })
    }
}

type Form = fn(&Asked) -> Option<String>;

/// The prompt forms an oracle answers, tried in order.
const FORMS: &[Form] = &[
    juror,
    vote,
    revision,
    cw_answer,
    cw_synthesis,
    delphi_classify,
    delphi_estimate,
    delphi_report,
    chain_step,
    specialist,
    specialist_synthesis,
    tournament_judge,
    review,
    consolidation,
    assembly,
    plain,
];

/// The question itself (Solo, Council's first stage, Vote's, Debate's and Tournament's
/// answers) or Council's synthesis, which quotes it: an answer with a `Final answer:` line.
fn plain(a: &Asked) -> Option<String> {
    (a.last == a.prompt || a.last.starts_with("You are a chairman synthesizing"))
        .then(|| reply_text(a.model, &a.key, a.right()))
}

/// The working and the `Final answer:` line every answer of an oracle ends with.
fn worked(value: &str) -> String {
    format!("Working through the question step by step.\n\nFinal answer: {value}")
}

/// Vote's ballot, its chairman's tiebreak and Debate's vote (`VOTE: Response X`): the first
/// response stating the answer drawn.
fn vote(a: &Asked) -> Option<String> {
    let asked = a.last.contains("VOTE: Response X") && a.last.contains("--- Response ");
    let blocks = if asked { labeled_blocks(a.last) } else { Vec::new() };
    a.answer_if(!blocks.is_empty(), |value| {
        let chosen = a.pick(&blocks, value).unwrap_or_default();
        format!(
            "[simulated oracle vote from {}]\n\n{chosen} states the answer I reached, \
             {value}.\n\nVOTE: {chosen}",
            a.model
        )
    })
}

/// Debate's revision: the answer drawn as the revised response, standing when it is the
/// debater's own.
fn revision(a: &Asked) -> Option<String> {
    let own = Some(a.last)
        .filter(|l| l.contains("DECISION: [REVISE|STAND|MERGE]"))
        .and_then(|l| section(l, "YOUR ORIGINAL RESPONSE:\n", "\n\nOTHER RESPONSES:\n"));
    a.answer_if(own.is_some(), |value| {
        let (decision, why) = if own.is_some_and(|o| a.states(o, value)) {
            ("STAND", "My original answer holds up against the others.")
        } else {
            ("REVISE", "Checking the question again changed my answer.")
        };
        format!(
            "DECISION: {decision}\nREASONING: {why}\n\nREVISED RESPONSE:\n[simulated oracle \
             revision from {}]\n\n{}",
            a.model,
            worked(value)
        )
    })
}

/// Confidence-Weighted's answer: the answer drawn, at a stated confidence of P.
fn cw_answer(a: &Asked) -> Option<String> {
    a.answer_if(a.last.contains(cw::ANSWER_HEAD), |value| {
        format!(
            "RESPONSE:\n[simulated oracle answer from {}]\n\n{}\n\nCONFIDENCE: \
             {:.2}\nCONFIDENCE_REASONING: I am right this often.",
            a.model,
            worked(value),
            a.p
        )
    })
}

/// Confidence-Weighted's synthesis: the answer drawn.
fn cw_synthesis(a: &Asked) -> Option<String> {
    a.answer_if(a.last.starts_with(cw::SYNTHESIS_HEAD), |value| {
        format!(
            "SYNTHESIS:\n[simulated oracle synthesis from {}]\n\n{}\n\nCONFIDENCE CALIBRATION \
             NOTES:\n- Each answer's confidence was read as stated.",
            a.model,
            worked(value)
        )
    })
}

/// Delphi's classification of a number question: NUMERIC (no draw).
fn delphi_classify(a: &Asked) -> Option<String> {
    (a.is_number() && a.last.starts_with("Classify the following question for a Delphi"))
        .then(|| "TYPE: NUMERIC\nOPTIONS: N/A\nREASONING: The question asks for one number.".into())
}

/// Delphi's estimate of a number question, in the first round or a later one: the answer
/// drawn.
fn delphi_estimate(a: &Asked) -> Option<String> {
    a.answer_if(a.is_number() && a.last.contains("\nESTIMATE: [number]"), |value| {
        format!(
            "ESTIMATE: {value}\nCONFIDENCE: HIGH\nREASONING: Worked through step by step \
             [simulated oracle estimate from {}].",
            a.model
        )
    })
}

/// Delphi's report on a number question: the answer drawn as the final consensus.
fn delphi_report(a: &Asked) -> Option<String> {
    let asked = a.last.starts_with("You are the facilitator for a Delphi exercise");
    a.answer_if(a.is_number() && asked, |value| {
        format!(
            "## Delphi Consensus Report\n\n[simulated oracle report from {}]\n\n### Final \
             Consensus\nThe panel's estimates, checked once more.\n\n### Convergence \
             Analysis\nAs the statistics show.\n\n### Confidence Trajectory\nSteady.\n\n### \
             Outlier Analysis\nNone of note.\n\n### Reliability Assessment\nAs reliable as its \
             panelists.\n\n{}",
            a.model,
            worked(value)
        )
    })
}

/// A step of Chain: the draft, or the latest version without its answer line, then the
/// answer drawn.
fn chain_step(a: &Asked) -> Option<String> {
    let asked = a.last.starts_with("You are step ") && a.last.contains(chain::CHAIN_HEAD);
    a.answer_if(asked, |value| {
        let latest = section(a.last, &format!("{}\n", chain::VERSION_START), chain::VERSION_END)
            .map(|v| {
                let kept: Vec<&str> = v
                    .lines()
                    .filter(|l| !l.trim_start().to_lowercase().starts_with("final answer"))
                    .collect();
                format!("{}\n\n", kept.join("\n").trim())
            })
            .unwrap_or_default();
        format!("{latest}[simulated oracle step from {}]\n\n{}", a.model, worked(value))
    })
}

/// The criteria a specialist's system message asks it to rate (`| name | <1-5> | <why> |`).
fn specialist_criteria(system: &str) -> Vec<String> {
    system
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.strip_suffix(" | <1-5> | <why> |"))
        .map(str::to_string)
        .collect()
}

/// A specialist's report on the question as its material: its sections, a rating of 4 on
/// each criterion, and the answer drawn.
fn specialist(a: &Asked) -> Option<String> {
    let system = a
        .messages
        .iter()
        .find(|m| m.role == "system" && m.content.contains(panel::SPECIALIST_HEAD));
    a.answer_if(system.is_some() && a.last.contains(panel::MATERIAL_START), |value| {
        let rows: String = specialist_criteria(system.map_or("", |s| s.content.as_str()))
            .iter()
            .map(|c| format!("| {c} | 4 | The question is clear on this. |\n"))
            .collect();
        format!(
            "[simulated oracle report from {}]\n\n### Key Findings\n1. The material is a \
             question with one answer.\n2. Its answer, worked through, is {value}.\n3. Nothing \
             in it needs a specialist's caution.\n\n### Risk Assessment\n| Criterion | Rating \
             (1-5) | Notes |\n|---|---|---|\n{rows}\n### Top 3 Recommendations\n1. Take the \
             answer below.\n2. Check the working once.\n3. Keep the question as it is.\n\n### \
             Detailed Analysis\n{}",
            a.model,
            worked(value)
        )
    })
}

/// Specialist Panel's synthesis: its sections, and the answer drawn.
fn specialist_synthesis(a: &Asked) -> Option<String> {
    a.answer_if(a.last.starts_with(panel::SYNTHESIS_HEAD), |value| {
        format!(
            "[simulated oracle synthesis from {}]\n\n### Convergent Findings\n1. The \
             specialists agree the material is a question with one answer.\n\n### Divergent \
             Findings\n| Finding | One View | Other View | Suggested Resolution \
             |\n|---|---|---|---|\n| The answer | As stated | Otherwise | Work it through |\n\n\
             ### Consolidated Risk Matrix\n| Domain | Level | Concern | Action | Source Roles \
             |\n|---|---|---|---|---|\n| Accuracy | Low | A wrong answer | Check the working | \
             All |\n\n### Unified Recommendations\n1. Take the answer below.\n\n### Executive \
             Summary\n{}",
            a.model,
            worked(value)
        )
    })
}

/// Tournament's match: the response stating the answer drawn wins.
fn tournament_judge(a: &Asked) -> Option<String> {
    let side = |s: &str| {
        let start = format!("=== Response {s} ===\n");
        section(a.last, &start, &format!("\n=== End of Response {s} ==="))
            .map(|t| (format!("Response {s}"), t.to_string()))
    };
    let candidates: Vec<(String, String)> = if a.last.starts_with(tournament::JUDGE_HEAD) {
        ["A", "B"].iter().filter_map(|s| side(s)).collect()
    } else {
        Vec::new()
    };
    a.answer_if(candidates.len() == 2, |value| {
        let winner = a.pick(&candidates, value).unwrap_or_default();
        format!(
            "[simulated oracle judgement from {}] {winner} states the answer I reached.\n\n\
             REASONING: {winner} states {value}.\nWINNER: {winner}",
            a.model
        )
    })
}

/// A peer review of the question as the work: a score of 4 per criterion, three findings,
/// and the answer drawn in the summary.
fn review(a: &Asked) -> Option<String> {
    a.answer_if(a.last.starts_with(peer_review::REVIEW_HEAD), |value| {
        let criteria = peer_review::prompt_criteria(a.last);
        let rows: String = criteria
            .iter()
            .map(|(c, w)| format!("| {c} | 4 | {w} | The question is clear on this. |\n"))
            .collect();
        let category = criteria.first().map_or("General", |c| c.0.as_str());
        let findings: String = (1..=3)
            .map(|n| {
                format!(
                    "#### FINDING {n}: Point {n} to check\nCategory: {category}\nSeverity: \
                     SUGGESTION\nLocation: the question\nDescription: A step of the working to \
                     check.\nImpact: A wrong answer if it is skipped.\nRecommendation: Work it \
                     through.\n\n"
                )
            })
            .collect();
        format!(
            "[simulated oracle review from {}]\n\n### Scores\n\n| Criterion | Score (1-5) | \
             Weight | Justification |\n|---|---|---|---|\n{rows}\n### Findings\n\n{findings}\
             ### Strengths\n\n- It is a clear question.\n- It has one answer.\n- It is \
             short.\n\n### Summary\n\n{}",
            a.model,
            worked(value)
        )
    })
}

/// Peer Review's consolidated report: its sections, one action item, and the answer drawn.
fn consolidation(a: &Asked) -> Option<String> {
    a.answer_if(a.last.starts_with(peer_review::CONSOLIDATE_HEAD), |value| {
        format!(
            "[simulated oracle consolidation from {}]\n\n## Consensus Scores\n\nAs computed by \
             the server.\n\n### Consensus Findings\n\nThe working should be checked.\n\n### \
             Unique Findings\n\nNone of note.\n\n### Disputed Assessments\n\nNone of note.\n\n\
             ## Inter-Reviewer Agreement\n\nSee the statistics.\n\n## Prioritized Action \
             Items\n\n1. [SUGGESTION] Check the working — Effort: Low\n\n## Executive \
             Summary\n\n{}",
            a.model,
            worked(value)
        )
    })
}

/// Decompose's assembly: the answer drawn.
fn assembly(a: &Asked) -> Option<String> {
    a.answer_if(a.last.starts_with(decompose::ASSEMBLY_HEAD), |value| {
        format!("[simulated oracle answer from {}]\n\n{}", a.model, worked(value))
    })
}

/// Jury's juror on content answering a registered question: judges rightly with probability
/// P (APPROVE a right answer, REJECT a wrong or missing one), else the other of the two.
fn juror(a: &Asked) -> Option<String> {
    if !a.last.starts_with(crate::modes::jury::JUROR_HEAD) {
        return None;
    }
    let content = a.last.split_once("CONTENT UNDER EVALUATION:\n")?.1;
    let content = content.rsplit_once("\n\nScore each dimension from 1").map_or(content, |c| c.0);
    Some(juror_reply(a.model, a.is_right(content) == a.right()))
}

/// A juror's reply in Jury's format: every dimension 8 and APPROVE, or every dimension 2 and
/// REJECT.
fn juror_reply(model: &str, approve: bool) -> String {
    let (score, verdict, note, recommendations) = if approve {
        (8, "APPROVE", "It states the right answer.", "None required.")
    } else {
        (2, "REJECT", "It does not state the right answer.", "1. Work the question through again.")
    };
    let rows: String = crate::modes::jury::DIMENSIONS
        .iter()
        .map(|d| format!("| {d} | {score} | {note} |\n"))
        .collect();
    format!(
        "[simulated oracle juror {model}]\n\n## Juror Assessment\n\n### Scores\n\n| Dimension | \
         Score | Justification |\n|-----------|:-----:|---------------|\n{rows}| **Average** | \
         {score}.0 | |\n\n### Deliberation Notes\n{note}\n\n### Verdict\nVERDICT: \
         {verdict}\n\n### Recommendations\n{recommendations}\n"
    )
}

/// Whether a reply states the reference answer, once both are normalised (how an oracle
/// judges a `judge` question's answer).
fn states_reference(reply: &str, reference: &str) -> bool {
    stated_answer(reply).is_ok_and(|a| normalise(&a) == normalise(reference))
}

/// An oracle as a `judge`: the graded reply's stated answer against the reference, normalised
/// (right with probability P, else the other verdict).
fn judge(model: &str, prompt: &str, p: f64) -> String {
    use crate::eval::grade::judge_parts;
    let same =
        judge_parts(prompt).is_some_and(|(reference, graded)| states_reference(graded, reference));
    let call = keys().next_call(model, prompt);
    let right = draws_right(model, prompt, 0, call, p);
    let verdict = if same == right { "CORRECT" } else { "INCORRECT" };
    format!("[simulated oracle judge {model}]\n\nVERDICT: {verdict}")
}

#[cfg(test)]
#[path = "oracle_tests.rs"]
mod tests;
