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
mod tests {
    use super::*;
    use crate::eval::grade::{grade, Grade};
    use crate::eval::questions::{parse_set, prompt, Question};
    use crate::eval::stats::{majority_expectation, plurality, wilson, Z95};

    fn sample() -> Vec<Question> {
        parse_set(crate::eval::SAMPLE).unwrap()
    }

    fn key(q: &Question, seed: u64) -> AnswerKey {
        AnswerKey { answer: q.answer.clone(), kind: q.kind.clone(), seed }
    }

    #[test]
    fn names_and_distractors() {
        assert_eq!(probability("sim/oracle-0.6"), Some(0.6));
        assert_eq!(probability("sim/oracle-1"), Some(1.0));
        assert_eq!(probability("sim/oracle-0.6-b"), Some(0.6));
        assert_eq!(probability("sim/oracle-1.5"), None);
        assert_eq!(probability("sim/alpha"), None);
        for q in sample() {
            let k = key(&q, 0);
            assert_eq!(grade(&reply_text("sim/oracle-1", &k, true), &q).grade, Grade::Correct);
            assert_eq!(grade(&reply_text("sim/oracle-1", &k, false), &q).grade, Grade::Wrong);
        }
    }

    #[test]
    fn a_registered_question_is_answered_and_other_prompts_are_left_to_the_sim() {
        let q = &sample()[0];
        let asked = format!("{} (oracle test)", prompt(q));
        register(&asked, key(q, 1));
        let text = answer("sim/oracle-1", &[ChatMessage::user(asked.clone())]).unwrap();
        assert_eq!(grade(&text, q).grade, Grade::Correct);
        assert!(!asked.contains(&format!("Final answer: {}", q.answer)));
        let synthesis = format!("You are a chairman synthesizing…\n\nOriginal Question: {asked}\n");
        assert!(answer("sim/oracle-0", &[ChatMessage::user(synthesis)]).is_some());
        assert_eq!(answer("sim/oracle-1", &[ChatMessage::user("Rank these")]), None);
        assert_eq!(answer("sim/alpha", &[ChatMessage::user(asked)]), None);
        // As a judge, an oracle of 1 compares the stated answer with the reference.
        let judged = |reply: &str| {
            let q = Question {
                id: "j".into(),
                question: "Capital of France?".into(),
                answer: "Paris".into(),
                kind: crate::eval::questions::Kind::Judge,
            };
            let prompt = crate::eval::grade::judge_prompt(&q, reply);
            crate::eval::grade::read_verdict(
                &answer("sim/oracle-1", &[ChatMessage::user(prompt)]).unwrap(),
            )
        };
        assert_eq!(judged("It is Paris.\nFinal answer: Paris"), Some(true));
        assert_eq!(judged("Final answer: Lyon"), Some(false));
    }

    /// A number question registered under a prompt of its own (tests share the process's
    /// keys), and its distractor.
    fn registered(tag: &str) -> (Question, String, String) {
        let q = sample()[2].clone();
        let asked = format!("{} ({tag})", prompt(&q));
        let k = key(&q, 7);
        register(&asked, k.clone());
        (q, asked, distractor(&k))
    }

    fn ask(model: &str, text: String) -> String {
        answer(model, &[ChatMessage::user(text)]).expect("an oracle answers this form")
    }

    fn graded(text: &str, q: &Question) -> Option<String> {
        grade(text, q).answer
    }

    #[test]
    fn votes_tiebreaks_and_matches_pick_the_response_stating_the_answer_drawn() {
        use crate::modes::voting::{read_vote, tiebreaker_prompt, vote_prompt};
        let (q, asked, wrong) = registered("oracle vote test");
        let labels: Vec<String> =
            ["Response A", "Response B", "Response C"].map(String::from).into();
        let said = |v: &str| format!("Some working.\n\nFinal answer: {v}");
        // The right answer under B, the wrong one under A, none under C.
        let responses = vec![
            (labels[0].clone(), said(&wrong)),
            (labels[1].clone(), said(&q.answer)),
            (labels[2].clone(), "I could not say.".to_string()),
        ];
        for prompt_of in [vote_prompt, tiebreaker_prompt] {
            let p = prompt_of(&asked, &responses);
            assert_eq!(read_vote(&ask("sim/oracle-1", p.clone()), &labels).unwrap(), labels[1]);
            assert_eq!(read_vote(&ask("sim/oracle-0", p), &labels).unwrap(), labels[0]);
        }
        // No response states the answer drawn: a response stating one is chosen.
        let only_wrong = vec![responses[2].clone(), responses[0].clone()];
        let p = vote_prompt(&asked, &only_wrong);
        assert_eq!(read_vote(&ask("sim/oracle-1", p), &labels).unwrap(), labels[0]);

        use crate::modes::tournament::{judge_prompt, parse_verdict, Side};
        for (a, b, right_side) in
            [(said(&q.answer), said(&wrong), Side::A), (said(&wrong), said(&q.answer), Side::B)]
        {
            let p = judge_prompt(&asked, &a, &b);
            let wrong_side = if right_side == Side::A { Side::B } else { Side::A };
            assert_eq!(parse_verdict(&ask("sim/oracle-1", p.clone())).winner, Some(right_side));
            assert_eq!(parse_verdict(&ask("sim/oracle-0", p)).winner, Some(wrong_side));
        }
    }

    #[test]
    fn debate_revisions_state_the_answer_drawn_and_stand_on_their_own() {
        use crate::modes::debate::{parse_revision, revision_prompt};
        let (q, asked, wrong) = registered("oracle debate test");
        let own = format!("Final answer: {}", q.answer);
        let others = vec![("Response A".to_string(), format!("Final answer: {wrong}"))];
        let p = revision_prompt(&asked, &own, &others);
        let right = parse_revision(&ask("sim/oracle-1", p.clone()));
        assert_eq!(right.decision.as_deref(), Some("STAND"));
        assert_eq!(graded(&right.revised_response.unwrap(), &q), Some(q.answer.clone()));
        let wrong_rev = parse_revision(&ask("sim/oracle-0", p));
        assert_eq!(wrong_rev.decision.as_deref(), Some("REVISE"));
        assert_eq!(graded(&wrong_rev.revised_response.unwrap(), &q), Some(wrong));
    }

    #[test]
    fn confidence_weighted_answers_and_syntheses_read_with_the_modes_parsers() {
        use crate::modes::confidence_weighted::{
            answer_prompt, parse_synthesis, read_answer, synthesis_prompt,
        };
        let (q, asked, wrong) = registered("oracle confidence test");
        for (model, value, confidence) in
            [("sim/oracle-1", &q.answer, 1.0), ("sim/oracle-0", &wrong, 0.0)]
        {
            let a = read_answer(0, model, &ask(model, answer_prompt(&asked)), 1);
            assert!(a.parsed_successfully, "{a:?}");
            assert_eq!(a.confidence, confidence);
            assert_eq!(graded(&a.response, &q).as_ref(), Some(value));
            let (synthesis, notes) =
                parse_synthesis(&ask(model, synthesis_prompt(&asked, &[], 1.0)));
            assert!(!notes.is_empty());
            assert_eq!(graded(&synthesis, &q).as_ref(), Some(value));
        }
    }

    #[test]
    fn delphi_classifies_estimates_and_reports_a_number_question() {
        use crate::modes::delphi::*;
        let (q, asked, wrong) = registered("oracle delphi test");
        let c = parse_classification(&ask("sim/oracle-0", classify_prompt(&asked))).unwrap();
        assert_eq!(c.kind, QuestionType::Numeric);
        let stats = numeric_stats(&[1.0, 2.0, 3.0], ConfidenceCounts::default());
        let previous = Estimate {
            participant: 1,
            model: "m".into(),
            value: EstimateValue::Number(1.0),
            confidence: Confidence::Low,
            reasoning: String::new(),
            previous: None,
            changed: false,
            carried: false,
            unparsed: None,
            confidence_stated: true,
            response_time_ms: 1,
            text: String::new(),
        };
        let later = round_n_numeric_prompt(&asked, 2, 3, &previous, &stats, 3);
        for (model, value) in [("sim/oracle-1", &q.answer), ("sim/oracle-0", &wrong)] {
            for p in [round1_numeric_prompt(&asked), later.clone()] {
                let (estimate, _) = parse_estimate(&ask(model, p)).unwrap();
                assert_eq!(number_text(estimate), *value);
            }
            let report = synthesis_prompt(&asked, &[], 3, true, &FinalValue::Number(1.0));
            assert_eq!(graded(&ask(model, report), &q).as_ref(), Some(value));
        }
        // A choice question is not Delphi's: its prompts go to the ordinary sim.
        let choice = sample()[45].clone();
        let choice_asked = format!("{} (oracle delphi test)", prompt(&choice));
        register(&choice_asked, key(&choice, 7));
        let p = round1_numeric_prompt(&choice_asked);
        assert_eq!(answer("sim/oracle-1", &[ChatMessage::user(p)]), None);
    }

    #[test]
    fn chain_steps_draft_then_restate_the_answer_drawn() {
        use crate::modes::chain::{draft_prompt, improve_prompt, Mandate, StepConfig};
        let (q, asked, wrong) = registered("oracle chain test");
        let step = |mandate| StepConfig { model: "m".into(), mandate, custom_mandate: None };
        let draft = ask("sim/oracle-0", draft_prompt(&asked, 2, &step(Mandate::Draft)));
        assert_eq!(graded(&draft, &q), Some(wrong.clone()));
        let p = improve_prompt(&asked, 2, 2, &step(Mandate::PolishFormat), &draft, 1, &[]);
        let improved = ask("sim/oracle-1", p);
        assert_eq!(graded(&improved, &q), Some(q.answer.clone()));
        assert_eq!(improved.matches("Final answer").count(), 1, "{improved}");
    }

    #[test]
    fn specialist_reports_and_syntheses_read_with_the_modes_parsers() {
        use crate::modes::specialist_panel::*;
        let (q, asked, wrong) = registered("oracle specialist test");
        let specialist = SpecialistConfig {
            role_key: "security_expert".into(),
            role_id: RoleId::SecurityExpert,
            model: "m".into(),
            title: "Security Expert".into(),
            expertise_areas: "security".into(),
            description: "threats".into(),
            priorities: vec!["one".into()],
            criteria: vec!["Threat Model".into(), "Data Protection".into()],
        };
        let m = material(None, &asked);
        for (model, value) in [("sim/oracle-1", &q.answer), ("sim/oracle-0", &wrong)] {
            let messages = [
                ChatMessage::system(specialist_system(&specialist)),
                ChatMessage::user(specialist_user(&asked, &m)),
            ];
            let report = answer(model, &messages).unwrap();
            let read = read_report(&report, &specialist.criteria);
            assert!(read.parse_success && read.criteria_scores.iter().all(|c| c.score == Some(4)));
            assert_eq!(read.top_recommendations.len(), 3);
            assert_eq!(graded(&report, &q).as_ref(), Some(value));
            let shown = [ReportIn { title: "Security Expert", model, report: &report }];
            let synthesis = ask(model, synthesis_prompt(&asked, &m, &shown, &[]));
            let read = read_synthesis(&synthesis);
            assert_eq!(read.risk_matrix.len(), 1);
            assert!(read.sections["executiveSummary"].as_str().unwrap().contains(value.as_str()));
            assert_eq!(graded(&synthesis, &q).as_ref(), Some(value));
        }
    }

    #[test]
    fn peer_reviews_consolidations_and_assemblies_read_with_the_modes_parsers() {
        use crate::modes::decompose::assembly_prompt;
        use crate::modes::peer_review::*;
        let (q, asked, wrong) = registered("oracle review test");
        let rubric = ReviewType::CodeReview.rubric().unwrap();
        for (model, value) in [("sim/oracle-1", &q.answer), ("sim/oracle-0", &wrong)] {
            let review = ask(model, review_prompt(&asked, work(None, &asked), &rubric));
            let read = read_review(&review, &rubric);
            assert!(
                read.parse_success && read.scores.iter().all(|s| s.score == Some(4)),
                "{review}"
            );
            assert_eq!(read.findings.len(), 3);
            assert_eq!(graded(&review, &q).as_ref(), Some(value));
            let p = consolidation_prompt(&asked, &asked, &rubric, &[], &serde_json::json!({}));
            let report = ask(model, p);
            assert_eq!(read_action_items(&report).len(), 1);
            assert_eq!(graded(&report, &q).as_ref(), Some(value));
            let assembled = ask(model, assembly_prompt(&asked, &[], &[], &[]));
            assert_eq!(graded(&assembled, &q).as_ref(), Some(value));
        }
        // Decompose's plan and its tasks are the ordinary sim's; so are titles.
        let plan = crate::modes::decompose::plan_prompt(&asked, 5);
        assert_eq!(answer("sim/oracle-1", &[ChatMessage::user(plan)]), None);
        let title = crate::modes::common::title_prompt(&asked);
        assert_eq!(answer("sim/oracle-1", &[ChatMessage::user(title)]), None);
    }

    #[test]
    fn a_juror_approves_a_right_answer_and_rejects_a_wrong_or_missing_one() {
        use crate::modes::jury::{assess, evaluation_prompt, Verdict};
        let (q, asked, wrong) = registered("oracle juror test");
        let right = format!("Working.\n\nFinal answer: {}", q.answer);
        let wrong = format!("Working.\n\nFinal answer: {wrong}");
        let cases = [
            ("sim/oracle-1", &right, Verdict::Approve),
            ("sim/oracle-1", &wrong, Verdict::Reject),
            ("sim/oracle-1", &"It depends.".to_string(), Verdict::Reject),
            ("sim/oracle-0", &right, Verdict::Reject),
            ("sim/oracle-0", &wrong, Verdict::Approve),
        ];
        for (model, content, verdict) in cases {
            let text = ask(model, evaluation_prompt(content, Some(&asked)));
            let a = assess(model, &text, 1);
            assert_eq!(a.verdict, Some(verdict), "{model} on {content}");
            assert!(a.parse_success && a.unparsed.is_none());
            assert_eq!(Verdict::from_average(a.average.unwrap()), verdict);
        }
        // Content about a question no one registered is left to the sim.
        let p = evaluation_prompt(&right, Some("An unregistered question?"));
        assert_eq!(answer("sim/oracle-1", &[ChatMessage::user(p)]), None);
    }

    /// A whole Jury run of three oracle jurors on `content`, answered as the sim provider
    /// answers (an oracle's reply where it has one, else the ordinary sim's): the panel's
    /// majority verdict.
    fn jury_verdict(p: &str, content: &str, asked: &str) -> Option<crate::modes::jury::Verdict> {
        use crate::modes::testkit::{ctx, drive, emitted};
        let jurors: Vec<String> =
            ["a", "b", "c"].iter().map(|m| format!("sim/oracle-{p}-{m}")).collect();
        let config = serde_json::json!({ "content": content, "originalQuestion": asked,
            "jurorModels": jurors, "foremanModel": "sim/alpha", "timeoutMs": 120000 });
        let mut jury =
            crate::modes::jury::Jury::new(&config, ctx("Judge it", vec![], true)).unwrap();
        let effects = drive(
            &mut jury,
            |c| {
                answer(&c.model, &c.messages)
                    .or_else(|| Some(crate::modes::sim_text::respond(&c.model, &c.messages, false)))
            },
            "Title",
        );
        let summary = emitted(&effects, "all_jurors_complete").expect("the jurors finished");
        serde_json::from_value(summary["data"]["majorityVerdict"].clone()).unwrap()
    }

    #[test]
    fn a_jury_of_oracles_reaches_the_verdict_its_jurors_draw() {
        use crate::modes::jury::Verdict;
        let (q, asked, wrong) = registered("oracle jury run test");
        let right = format!("Final answer: {}", q.answer);
        let wrong = format!("Final answer: {wrong}");
        assert_eq!(jury_verdict("1", &right, &asked), Some(Verdict::Approve));
        assert_eq!(jury_verdict("1", &wrong, &asked), Some(Verdict::Reject));
        assert_eq!(jury_verdict("0", &right, &asked), Some(Verdict::Reject));
        assert_eq!(jury_verdict("0", &wrong, &asked), Some(Verdict::Approve));
    }

    #[test]
    fn three_jurors_of_0_6_reach_the_right_majority_at_0_648() {
        use crate::modes::jury::{evaluation_prompt, majority_verdict, parse_verdict, Verdict};
        let (q, asked, wrong) = registered("oracle jury majority test");
        let contents = [format!("Final answer: {}", q.answer), format!("Final answer: {wrong}")];
        let trials = 4_000u64;
        let mut right = 0;
        for t in 0..trials {
            let content = &contents[(t % 2) as usize];
            let expected = if t % 2 == 0 { Verdict::Approve } else { Verdict::Reject };
            let verdicts: Vec<Option<Verdict>> = ["a", "b", "c"]
                .iter()
                .map(|m| {
                    let text = ask(
                        &format!("sim/oracle-0.6-{m}"),
                        evaluation_prompt(content, Some(&asked)),
                    );
                    parse_verdict(&text)
                })
                .collect();
            right += u64::from(majority_verdict(&verdicts).0 == Some(expected));
        }
        let (lo, hi) = wilson(right, trials, Z95);
        assert!(lo <= 0.648 && 0.648 <= hi, "{right} of {trials}: [{lo}, {hi}]");
        assert!(hi - lo < 0.04, "the interval is too wide to tell 0.648 from 0.6: [{lo}, {hi}]");
    }

    /// Accuracy measured over one simulated eval of `questions` × `panel` oracles at `p`,
    /// graded and voted by the eval's own code, and whether its 95% Wilson interval covers
    /// `expected`.
    fn one_eval(questions: &[Question], panel: usize, p: f64, seed: u64, expected: f64) -> bool {
        let model = format!("sim/oracle-{p}");
        let mut correct = 0;
        for q in questions {
            let k = key(q, seed);
            let p_text = prompt(q);
            let votes: Vec<Option<String>> = (0..panel)
                .map(|m| {
                    let right = draws_right(&model, &p_text, seed, m as u64, p);
                    grade(&reply_text(&model, &k, right), q).answer
                })
                .collect();
            let voted = plurality(&votes);
            if voted.is_some_and(|a| crate::eval::grade::is_correct(&a, q)) {
                correct += 1;
            }
        }
        let (lo, hi) = wilson(correct, questions.len() as u64, Z95);
        lo <= expected && expected <= hi
    }

    #[test]
    fn wilson_intervals_cover_the_exact_majority_expectation_at_their_rate() {
        let questions = sample();
        for (panel, expected) in [(1, 0.6), (3, 0.648), (5, 0.68256)] {
            assert!((majority_expectation(panel as u32, 0.6) - expected).abs() < 1e-9);
            let evals = 200;
            let covered =
                (0..evals).filter(|s| one_eval(&questions, panel, 0.6, *s, expected)).count();
            // 95% nominal; 200 evals put the count within about ±6 of 190 two times in three.
            assert!(
                covered >= 180,
                "{panel} members: {covered} of {evals} intervals cover {expected}"
            );
            assert!(covered < 200, "{panel} members: every interval covered: too wide?");
        }
    }

    #[test]
    fn measured_accuracy_converges_on_the_expectation() {
        let questions = sample();
        let model = "sim/oracle-0.6";
        for (panel, expected) in [(3usize, 0.648), (5, 0.68256)] {
            let (mut right, mut total) = (0u64, 0u64);
            for seed in 0..300u64 {
                for q in &questions {
                    let p_text = prompt(q);
                    let votes: Vec<Option<String>> = (0..panel)
                        .map(|m| {
                            let r = draws_right(model, &p_text, seed, m as u64, 0.6);
                            grade(&reply_text(model, &key(q, seed), r), q).answer
                        })
                        .collect();
                    right +=
                        u64::from(plurality(&votes).is_some_and(|a| {
                            a == q.answer || crate::eval::grade::is_correct(&a, q)
                        }));
                    total += 1;
                }
            }
            let measured = right as f64 / total as f64;
            // 24,000 votes: the standard error is about 0.003.
            assert!((measured - expected).abs() < 0.012, "{panel}: {measured} vs {expected}");
        }
    }
}
