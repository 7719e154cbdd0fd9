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
    let labels: Vec<String> = ["Response A", "Response B", "Response C"].map(String::from).into();
    let said = |v: &str| format!("Some working.\n\nFinal answer: {v}");
    // The right answer under B, the wrong one under A, none under C.
    let responses = vec![
        (labels[0].clone(), said(&wrong)),
        (labels[1].clone(), said(&q.answer)),
        (labels[2].clone(), "I could not say.".to_string()),
    ];
    for prompt_of in [vote_prompt, tiebreaker_prompt] {
        let p = prompt_of(&asked, &responses, None);
        assert_eq!(read_vote(&ask("sim/oracle-1", p.clone()), &labels).unwrap(), labels[1]);
        assert_eq!(read_vote(&ask("sim/oracle-0", p), &labels).unwrap(), labels[0]);
    }
    // No response states the answer drawn: a response stating one is chosen.
    let only_wrong = vec![responses[2].clone(), responses[0].clone()];
    let p = vote_prompt(&asked, &only_wrong, None);
    assert_eq!(read_vote(&ask("sim/oracle-1", p), &labels).unwrap(), labels[0]);

    use crate::modes::tournament::{judge_prompt, parse_verdict, Side};
    for (a, b, right_side) in
        [(said(&q.answer), said(&wrong), Side::A), (said(&wrong), said(&q.answer), Side::B)]
    {
        let p = judge_prompt(&asked, &a, &b, None);
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
    let p = revision_prompt(&asked, &own, &others, None);
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
        let a = read_answer(0, model, &ask(model, answer_prompt(&asked, None)), 1);
        assert!(a.parsed_successfully, "{a:?}");
        assert_eq!(a.confidence, confidence);
        assert_eq!(graded(&a.response, &q).as_ref(), Some(value));
        let (synthesis, notes) = parse_synthesis(&ask(model, synthesis_prompt(&asked, &[], 1.0)));
        assert!(!notes.is_empty());
        assert_eq!(graded(&synthesis, &q).as_ref(), Some(value));
    }
}

#[test]
fn delphi_classifies_estimates_and_reports_a_number_question() {
    use crate::modes::delphi::*;
    let (q, asked, wrong) = registered("oracle delphi test");
    let c = parse_classification(&ask("sim/oracle-0", classify_prompt(&asked, None))).unwrap();
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
    let later = round_n_numeric_prompt(&asked, 2, 3, &previous, &stats, 3, None);
    for (model, value) in [("sim/oracle-1", &q.answer), ("sim/oracle-0", &wrong)] {
        for p in [round1_numeric_prompt(&asked, None), later.clone()] {
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
    let p = round1_numeric_prompt(&choice_asked, None);
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
            ChatMessage::system(specialist_system(&specialist, None)),
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
        let review = ask(model, review_prompt(&asked, work(None, &asked), &rubric, None));
        let read = read_review(&review, &rubric);
        assert!(read.parse_success && read.scores.iter().all(|s| s.score == Some(4)), "{review}");
        assert_eq!(read.findings.len(), 3);
        assert_eq!(graded(&review, &q).as_ref(), Some(value));
        let p = consolidation_prompt(&asked, &asked, &rubric, &[], &statistics(&[], &rubric));
        let report = ask(model, p);
        assert_eq!(read_action_items(&report).len(), 1);
        assert_eq!(graded(&report, &q).as_ref(), Some(value));
        let assembled = ask(model, assembly_prompt(&asked, &[], &[], &[]));
        assert_eq!(graded(&assembled, &q).as_ref(), Some(value));
    }
    // Decompose's plan and its tasks are the ordinary sim's; so are titles.
    let plan = crate::modes::decompose::plan_prompt(&asked, 5, None);
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
        let text = ask(model, evaluation_prompt(content, Some(&asked), None));
        let a = assess(model, &text, 1);
        assert_eq!(a.verdict, Some(verdict), "{model} on {content}");
        assert!(a.parse_success && a.unparsed.is_none());
        assert_eq!(Verdict::from_average(a.average.unwrap()), verdict);
    }
    // Content about a question no one registered is left to the sim.
    let p = evaluation_prompt(&right, Some("An unregistered question?"), None);
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
    let mut jury = crate::modes::jury::Jury::new(&config, ctx("Judge it", vec![], true)).unwrap();
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
                    evaluation_prompt(content, Some(&asked), None),
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
        let covered = (0..evals).filter(|s| one_eval(&questions, panel, 0.6, *s, expected)).count();
        // 95% nominal; 200 evals put the count within about ±6 of 190 two times in three.
        assert!(covered >= 180, "{panel} members: {covered} of {evals} intervals cover {expected}");
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
                right += u64::from(
                    plurality(&votes)
                        .is_some_and(|a| a == q.answer || crate::eval::grade::is_correct(&a, q)),
                );
                total += 1;
            }
        }
        let measured = right as f64 / total as f64;
        // 24,000 votes: the standard error is about 0.003.
        assert!((measured - expected).abs() < 0.012, "{panel}: {measured} vs {expected}");
    }
}
