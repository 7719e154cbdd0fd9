//! The figures of an eval from its graded answers: per arm the accuracy with its 95% Wilson
//! interval, the paired difference to the best single member (bootstrap interval, exact
//! McNemar p), tokens, cost, latency p50/p95 and the unparsed and refused counts; as a table
//! for people or the JSON of `--json`. Pure.
//!
//! Derived arms are computed here from the stored answers: `majority` is the plurality of the
//! members' single answers to a question, `self-consistency` the plurality of the best
//! member's samples (its single answer and the further samples). Their tokens and cost are the
//! sum of the runs voted, their latency the slowest of them (they run side by side). `jury`
//! keeps the best member's answer when its jury approved it: its tokens, cost and latency are
//! that answer's run and the jury's run together (one after the other), and its own figures
//! say how often the jury approved and how often its verdict was right.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::{json, Value};

use super::arms::Arm;
use super::grade::{is_correct, Grade};
use super::questions::Question;
use super::stats::{mcnemar_p, paired_bootstrap, percentile, plurality, wilson, Z95};
use crate::store::EvalRunRecord;

/// One arm's answer to one question: graded, with what it cost and the runs behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answered {
    pub question_id: String,
    pub grade: Grade,
    pub answer: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: Option<f64>,
    pub latency_ms: i64,
    pub run_ids: Vec<String>,
    /// For the jury arm: its verdict on the given answer, and whether that answer was right.
    #[serde(skip)]
    pub jury: Option<JuryCheck>,
}

/// A jury's verdict on one given answer.
#[derive(Debug, Clone, PartialEq)]
pub struct JuryCheck {
    /// `approve`, `revise`, `reject`; None when the jury reached no verdict.
    pub verdict: Option<String>,
    pub given_correct: bool,
}

impl JuryCheck {
    pub fn approved(&self) -> bool {
        self.verdict.as_deref() == Some("approve")
    }

    /// Right when it approves a right answer or turns down a wrong one.
    pub fn right(&self) -> bool {
        self.verdict.is_some() && self.approved() == self.given_correct
    }
}

impl Answered {
    fn of(r: &EvalRunRecord) -> Answered {
        Answered {
            question_id: r.question_id.clone(),
            grade: Grade::parse(&r.grade).unwrap_or(Grade::Unparsed),
            answer: r.answer.clone(),
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            cost: r.cost,
            latency_ms: r.latency_ms,
            run_ids: vec![r.run_id.clone()],
            jury: None,
        }
    }

    /// The jury arm's answer: the given answer (the best member's single reply) when the jury
    /// approved it, graded as it was; else none.
    fn judged(given: &EvalRunRecord, jury: &EvalRunRecord) -> Answered {
        let check = JuryCheck {
            verdict: jury.answer.clone(),
            given_correct: given.grade == Grade::Correct.as_str(),
        };
        let grade = Grade::parse(&jury.grade).unwrap_or(Grade::Unparsed);
        let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        Answered {
            question_id: jury.question_id.clone(),
            grade,
            answer: if check.approved() { given.answer.clone() } else { None },
            prompt_tokens: given.prompt_tokens + jury.prompt_tokens,
            completion_tokens: given.completion_tokens + jury.completion_tokens,
            cost: add(given.cost, jury.cost),
            latency_ms: given.latency_ms + jury.latency_ms,
            run_ids: vec![given.run_id.clone(), jury.run_id.clone()],
            jury: Some(check),
        }
    }

    /// The plurality of several answers to `q`, graded. A tie, or no readable answer, is
    /// unparsed (refused when every one of them refused).
    fn voted(q: &Question, parts: &[&EvalRunRecord]) -> Answered {
        let answers: Vec<Option<String>> = parts.iter().map(|r| r.answer.clone()).collect();
        let winner = plurality(&answers);
        // A judged answer's grade is its judge's: the grade of a run that gave it.
        let judged_right =
            |a: &str| parts.iter().any(|r| r.answer.as_deref() == Some(a) && r.grade == "correct");
        let grade = match &winner {
            Some(a) if is_correct(a, q) || judged_right(a) => Grade::Correct,
            Some(_) => Grade::Wrong,
            None if !parts.is_empty() && parts.iter().all(|r| r.grade == "refused") => {
                Grade::Refused
            }
            None => Grade::Unparsed,
        };
        let costs: Vec<f64> = parts.iter().filter_map(|r| r.cost).collect();
        Answered {
            question_id: q.id.clone(),
            grade,
            answer: winner,
            prompt_tokens: parts.iter().map(|r| r.prompt_tokens).sum(),
            completion_tokens: parts.iter().map(|r| r.completion_tokens).sum(),
            cost: (!costs.is_empty()).then(|| costs.iter().sum()),
            latency_ms: parts.iter().map(|r| r.latency_ms).max().unwrap_or(0),
            run_ids: parts.iter().map(|r| r.run_id.clone()).collect(),
            jury: None,
        }
    }
}

/// The answers of every arm, by arm name, each in question order. A question an arm has not
/// answered (yet) is left out of it; `majority` needs every member's answer to the question.
pub fn answers_by_arm(
    arms: &[Arm],
    members: &[String],
    questions: &[Question],
    rows: &[EvalRunRecord],
    best: Option<&str>,
    samples: usize,
) -> Vec<(String, Vec<Answered>)> {
    let mut by: HashMap<(&str, &str), Vec<&EvalRunRecord>> = HashMap::new();
    for r in rows {
        by.entry((r.arm.as_str(), r.question_id.as_str())).or_default().push(r);
    }
    let single = |m: &str, q: &str| -> Option<&EvalRunRecord> {
        by.get(&(format!("single:{m}").as_str(), q))
            .and_then(|v| v.iter().find(|r| r.sample == 0))
            .copied()
    };
    let mut out = Vec::new();
    for arm in arms {
        let name = arm.name();
        let mut list = Vec::new();
        for q in questions {
            let one = match arm {
                Arm::Single(m) => single(m, &q.id).map(Answered::of),
                Arm::Mode(_) => by
                    .get(&(name.as_str(), q.id.as_str()))
                    .and_then(|v| v.first())
                    .map(|r| Answered::of(r)),
                Arm::Majority => {
                    let parts: Option<Vec<&EvalRunRecord>> =
                        members.iter().map(|m| single(m, &q.id)).collect();
                    parts.map(|p| Answered::voted(q, &p))
                }
                Arm::SelfConsistency => best.and_then(|b| {
                    let mut parts: Vec<&EvalRunRecord> = single(b, &q.id).into_iter().collect();
                    if let Some(more) = by.get(&(name.as_str(), q.id.as_str())) {
                        parts.extend(more.iter().copied());
                    }
                    (parts.len() >= samples).then(|| Answered::voted(q, &parts))
                }),
                Arm::Jury => best.and_then(|b| {
                    let jury = by.get(&(name.as_str(), q.id.as_str()))?.first()?;
                    Some(Answered::judged(single(b, &q.id)?, jury))
                }),
            };
            list.extend(one);
        }
        out.push((name, list));
    }
    out
}

/// The single member with the highest accuracy over the questions every member answered
/// (the first named, of equals); None without single answers.
pub fn best_single(
    members: &[String],
    questions: &[Question],
    rows: &[EvalRunRecord],
) -> Option<String> {
    let arms: Vec<Arm> = members.iter().map(|m| Arm::Single(m.clone())).collect();
    let answers = answers_by_arm(&arms, members, questions, rows, None, 1);
    let mut best: Option<(usize, &str)> = None;
    for (m, (_, list)) in members.iter().zip(&answers) {
        if list.is_empty() {
            continue;
        }
        let right = list.iter().filter(|a| a.grade == Grade::Correct).count();
        if best.is_none_or(|(b, _)| right > b) {
            best = Some((right, m));
        }
    }
    best.map(|(_, m)| m.to_string())
}

/// An arm's paired difference to the best single member.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    pub arm: String,
    pub against: String,
    /// Questions both answered.
    pub n: usize,
    pub diff: f64,
    pub diff_low: f64,
    pub diff_high: f64,
    pub mcnemar_p: f64,
}

/// One arm's figures (the JSON of `--json`'s `arms`, exactly).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmFigures {
    pub arm: String,
    pub n: usize,
    pub correct: usize,
    pub accuracy: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub unparsed: usize,
    #[serde(skip)]
    pub refused: usize,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: Option<f64>,
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
    /// The jury arm's own figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jury: Option<JuryFigures>,
}

/// How the jury judged the answers it was given.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JuryFigures {
    /// Answers judged.
    pub judged: usize,
    /// Answers it approved, and of those the right ones.
    pub approved: usize,
    pub approved_correct: usize,
    /// Verdicts that were right (a right answer approved, a wrong one turned down), their share
    /// and its 95% Wilson interval.
    pub verdicts_right: usize,
    pub verdict_accuracy: f64,
    pub verdict_ci_low: f64,
    pub verdict_ci_high: f64,
    /// Runs in which the jury reached no verdict.
    pub no_verdict: usize,
}

fn jury_figures(answers: &[Answered]) -> Option<JuryFigures> {
    let checks: Vec<&JuryCheck> = answers.iter().filter_map(|a| a.jury.as_ref()).collect();
    if checks.is_empty() {
        return None;
    }
    let n = checks.len();
    let approved = checks.iter().filter(|c| c.approved()).count();
    let approved_correct = checks.iter().filter(|c| c.approved() && c.given_correct).count();
    let right = checks.iter().filter(|c| c.right()).count();
    let (lo, hi) = wilson(right as u64, n as u64, Z95);
    Some(JuryFigures {
        judged: n,
        approved,
        approved_correct,
        verdicts_right: right,
        verdict_accuracy: right as f64 / n as f64,
        verdict_ci_low: lo,
        verdict_ci_high: hi,
        no_verdict: checks.iter().filter(|c| c.verdict.is_none()).count(),
    })
}

/// The figures of one arm's answers.
pub fn figures(arm: &str, answers: &[Answered]) -> ArmFigures {
    let n = answers.len();
    let count = |g: Grade| answers.iter().filter(|a| a.grade == g).count();
    let correct = count(Grade::Correct);
    let (ci_low, ci_high) = wilson(correct as u64, n as u64, Z95);
    let costs: Vec<f64> = answers.iter().filter_map(|a| a.cost).collect();
    let latencies: Vec<u64> = answers.iter().map(|a| a.latency_ms.max(0) as u64).collect();
    ArmFigures {
        arm: arm.to_string(),
        n,
        correct,
        accuracy: if n == 0 { 0.0 } else { correct as f64 / n as f64 },
        ci_low,
        ci_high,
        unparsed: count(Grade::Unparsed),
        refused: count(Grade::Refused),
        prompt_tokens: answers.iter().map(|a| a.prompt_tokens).sum(),
        completion_tokens: answers.iter().map(|a| a.completion_tokens).sum(),
        cost: (!costs.is_empty()).then(|| costs.iter().sum()),
        latency_p50_ms: percentile(&latencies, 0.5),
        latency_p95_ms: percentile(&latencies, 0.95),
        jury: jury_figures(answers),
    }
}

/// The difference of `arm` to `against` on the questions both answered.
pub fn difference(
    arm: &str,
    answers: &[Answered],
    against: &str,
    base: &[Answered],
    seed: u64,
) -> Difference {
    let base: HashMap<&str, bool> =
        base.iter().map(|a| (a.question_id.as_str(), a.grade == Grade::Correct)).collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in answers {
        if let Some(y) = base.get(x.question_id.as_str()) {
            a.push(x.grade == Grade::Correct);
            b.push(*y);
        }
    }
    let (diff, diff_low, diff_high) = paired_bootstrap(&a, &b, seed);
    let only_a = a.iter().zip(&b).filter(|(x, y)| **x && !**y).count() as u64;
    let only_b = a.iter().zip(&b).filter(|(x, y)| !**x && **y).count() as u64;
    Difference {
        arm: arm.to_string(),
        against: against.to_string(),
        n: a.len(),
        diff,
        diff_low,
        diff_high,
        mcnemar_p: mcnemar_p(only_a, only_b),
    }
}

/// A whole eval's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub eval_id: String,
    pub arms: Vec<ArmFigures>,
    pub best_single: Option<String>,
    pub differences: Vec<Difference>,
    /// Questions where the arms' grades differ: question id → arm → (grade, runs).
    pub disagreements: BTreeMap<String, BTreeMap<String, (Grade, Vec<String>)>>,
    /// Why the eval stopped before its end, if it did.
    pub stopped: Option<String>,
}

/// The report of an eval's answers.
pub fn report(
    eval_id: &str,
    answers: &[(String, Vec<Answered>)],
    best: Option<&str>,
    seed: u64,
    stopped: Option<String>,
) -> Report {
    let arms: Vec<ArmFigures> = answers.iter().map(|(a, l)| figures(a, l)).collect();
    let base = best.and_then(|b| {
        let name = format!("single:{b}");
        answers.iter().find(|(a, _)| *a == name).map(|(a, l)| (a.clone(), l))
    });
    let differences = match &base {
        Some((name, base)) => answers
            .iter()
            .filter(|(a, _)| a != name)
            .map(|(a, l)| difference(a, l, name, base, seed))
            .collect(),
        None => Vec::new(),
    };
    let mut by_q: BTreeMap<String, BTreeMap<String, (Grade, Vec<String>)>> = BTreeMap::new();
    for (arm, list) in answers {
        for a in list {
            by_q.entry(a.question_id.clone())
                .or_default()
                .insert(arm.clone(), (a.grade, a.run_ids.clone()));
        }
    }
    by_q.retain(|_, arms| {
        let right = arms.values().filter(|(g, _)| *g == Grade::Correct).count();
        right > 0 && right < arms.len()
    });
    Report {
        eval_id: eval_id.to_string(),
        arms,
        best_single: best.map(str::to_string),
        differences,
        disagreements: by_q,
        stopped,
    }
}

impl Report {
    /// `--json`: `{evalId, arms: [...]}`, then the differences to the best single member and
    /// why the eval stopped early (if it did).
    pub fn to_json(&self) -> Value {
        json!({
            "evalId": self.eval_id,
            "arms": self.arms,
            "bestSingle": self.best_single,
            "differences": self.differences,
            "stopped": self.stopped,
        })
    }

    /// The table for people.
    pub fn table(&self) -> String {
        let mut rows: Vec<Vec<String>> = vec![[
            "arm",
            "n",
            "accuracy",
            "95% CI",
            "Δ vs best single",
            "unparsed",
            "refused",
            "tokens",
            "cost",
            "p50",
            "p95",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()];
        for a in &self.arms {
            let diff = self.differences.iter().find(|d| d.arm == a.arm && d.n > 0).map_or_else(
                || {
                    let base =
                        self.best_single.as_ref().is_some_and(|b| a.arm == format!("single:{b}"));
                    if base && a.n > 0 {
                        "(baseline)".to_string()
                    } else {
                        "—".to_string()
                    }
                },
                |d| {
                    format!(
                        "{} pt [{}, {}] {}",
                        points(d.diff),
                        points(d.diff_low),
                        points(d.diff_high),
                        p_value(d.mcnemar_p)
                    )
                },
            );
            let diff = if self.best_single.is_none() { "—".to_string() } else { diff };
            let pct = |k: usize| {
                if a.n == 0 {
                    "—".into()
                } else {
                    // Whole percents, half up, as the page prints them.
                    format!("{}%", ((k as f64 / a.n as f64) * 100.0 + 0.5).floor())
                }
            };
            rows.push(vec![
                a.arm.clone(),
                a.n.to_string(),
                if a.n == 0 { "—".into() } else { format!("{}%", percent(a.accuracy)) },
                if a.n == 0 {
                    "—".into()
                } else {
                    format!("{}–{}%", percent(a.ci_low), percent(a.ci_high))
                },
                diff,
                pct(a.unparsed),
                pct(a.refused),
                (a.prompt_tokens + a.completion_tokens).to_string(),
                a.cost.map_or("—".into(), |c| format!("${c:.4}")),
                duration(a.latency_p50_ms),
                duration(a.latency_p95_ms),
            ]);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for (i, r) in rows.iter().enumerate() {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (s, w))| {
                    let pad = w - s.chars().count();
                    if c == 0 {
                        format!("{s}{}", " ".repeat(pad))
                    } else {
                        format!("{}{s}", " ".repeat(pad))
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
            if i == 0 {
                out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
                out.push('\n');
            }
        }
        match &self.best_single {
            Some(b) => out.push_str(&format!(
                "Δ: paired difference to the best single member ({b}) on the same questions, \
                 95% bootstrap interval, exact McNemar p.\n"
            )),
            None => out.push_str("Δ: no single member was run, so there is no baseline.\n"),
        }
        out.push_str(&format!(
            "{} question(s) where the arms disagree. Eval {}.\n",
            self.disagreements.len(),
            self.eval_id
        ));
        for a in &self.arms {
            if let (Some(j), Some(b)) = (&a.jury, &self.best_single) {
                out.push_str(&format!("{}: {}\n", a.arm, j.sentence(b)));
            }
        }
        if let Some(why) = &self.stopped {
            out.push_str(&format!("Stopped early: {why}. What is done is above.\n"));
        }
        out
    }
}

impl JuryFigures {
    /// The jury's figures in a sentence, for the table's notes.
    pub fn sentence(&self, given: &str) -> String {
        let share = |k: usize, n: usize| {
            if n == 0 {
                "—".to_string()
            } else {
                format!("{}%", percent(k as f64 / n as f64))
            }
        };
        let mut s = format!(
            "the jurors judged {given}'s answers and approved {} of {}; {} of those were right \
             ({}); a verdict was right {} of the time (95% {}–{}%)",
            self.approved,
            self.judged,
            self.approved_correct,
            share(self.approved_correct, self.approved),
            share(self.verdicts_right, self.judged),
            percent(self.verdict_ci_low),
            percent(self.verdict_ci_high),
        );
        if self.no_verdict > 0 {
            s.push_str(&format!("; no verdict on {}", self.no_verdict));
        }
        s.push_str(". An answer it did not approve counts as none.");
        s
    }
}

/// A fraction's percentage to one decimal (`0.7625` → `76.3`), rounded half up from the
/// fraction times 1,000: the eval page (`static/js/evals.js`) rounds the same way, so the
/// table and the page print the same figure.
pub fn percent(x: f64) -> String {
    format!("{:.1}", tenths(x))
}

/// `x` × 100 to the nearest tenth, half up (`Math.round(x * 1000) / 10` in the page).
fn tenths(x: f64) -> f64 {
    // `+ 0.0` makes a negative zero positive: no `-0.0` printed.
    ((x * 1000.0) + 0.5).floor() / 10.0 + 0.0
}

/// A difference of two fractions in percentage points, signed (`+3.8`, `-1.3`, `0.0`).
pub fn points(x: f64) -> String {
    let v = tenths(x);
    if v > 0.0 {
        format!("+{v:.1}")
    } else {
        format!("{v:.1}")
    }
}

/// A McNemar p-value as the table and the page print it: `p<0.01`, else to two decimals.
pub fn p_value(p: f64) -> String {
    if p < 0.01 {
        "p<0.01".to_string()
    } else {
        format!("p={:.2}", ((p * 100.0) + 0.5).floor() / 100.0)
    }
}

/// `850 ms`, `12.3 s`.
fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::questions::Kind;

    fn q(id: &str, answer: &str) -> Question {
        Question {
            id: id.into(),
            question: format!("{id}?"),
            answer: answer.into(),
            kind: Kind::Number { tolerance: 0.0 },
        }
    }

    fn row(arm: &str, qid: &str, sample: i32, answer: Option<&str>, grade: Grade) -> EvalRunRecord {
        EvalRunRecord {
            eval_id: "e".into(),
            arm: arm.into(),
            question_id: qid.into(),
            sample,
            run_id: format!("{arm}-{qid}-{sample}"),
            grade: grade.as_str().into(),
            answer: answer.map(str::to_string),
            prompt_tokens: 10,
            completion_tokens: 5,
            cost: None,
            latency_ms: 100 * (sample as i64 + 1),
        }
    }

    /// The table rounds as the page does (`Math.floor(x * 1000 + 0.5) / 10`): halves up, never
    /// `-0.0`, p-values under 0.01 as `p<0.01`.
    #[test]
    fn figures_are_rounded_half_up_as_the_page_rounds_them() {
        // 0.7625 × 1000 is 762.5: up, where `{:.1}` of 76.25 printed 76.2.
        assert_eq!(percent(0.7625), "76.3");
        assert_eq!(percent(61.0 / 80.0), "76.3");
        assert_eq!(percent(1.0), "100.0");
        assert_eq!(percent(0.0), "0.0");
        assert_eq!(points(0.038), "+3.8");
        assert_eq!(points(-0.0125), "-1.2");
        assert_eq!(points(-0.00001), "0.0");
        assert_eq!(points(0.0), "0.0");
        assert_eq!(p_value(0.004), "p<0.01");
        assert_eq!(p_value(0.125), "p=0.13");
        assert_eq!(p_value(1.0), "p=1.00");
    }

    #[test]
    fn majority_votes_the_members_single_answers_and_figures_add_up() {
        use Grade::*;
        let members: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let questions = vec![q("q1", "4"), q("q2", "9")];
        let rows = vec![
            row("single:a", "q1", 0, Some("4"), Correct),
            row("single:b", "q1", 0, Some("5"), Wrong),
            row("single:c", "q1", 0, Some("4"), Correct),
            row("single:a", "q2", 0, Some("8"), Wrong),
            row("single:b", "q2", 0, Some("9"), Correct),
            row("single:c", "q2", 0, None, Unparsed),
        ];
        assert_eq!(best_single(&members, &questions, &rows).as_deref(), Some("a"));
        let arms = crate::eval::arms::parse_arms("single,majority", &members).unwrap();
        let answers = answers_by_arm(&arms, &members, &questions, &rows, Some("a"), 1);
        let majority = &answers.iter().find(|(a, _)| a == "majority").unwrap().1;
        assert_eq!(majority[0].grade, Correct);
        assert_eq!(majority[1].grade, Unparsed, "8 against 9 is a tie: no majority");
        assert_eq!(majority[0].prompt_tokens, 30, "three runs' tokens");
        assert_eq!(majority[0].run_ids.len(), 3);
        let r = report("e", &answers, Some("a"), 1, None);
        let m = r.arms.iter().find(|a| a.arm == "majority").unwrap();
        assert_eq!((m.n, m.correct, m.unparsed), (2, 1, 1));
        let json = r.to_json();
        let keys: Vec<&String> = json["arms"][0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "arm",
                "n",
                "correct",
                "accuracy",
                "ciLow",
                "ciHigh",
                "unparsed",
                "promptTokens",
                "completionTokens",
                "cost",
                "latencyP50Ms",
                "latencyP95Ms"
            ]
        );
        assert!(r.table().contains("majority"));
        assert_eq!(r.disagreements.len(), 2, "both questions split the arms");
    }
}
