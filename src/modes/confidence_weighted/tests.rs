//! Confidence-Weighted driven with fake replies: events and rows in order, weights, the single
//! answer, failures and the backup synthesizer, history; the parsers on recorded-style and
//! adversarial replies, and their invariants under proptest.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::modes::testkit::{
    all_emitted_data, assert_contains_all, assert_report_free_of, ctx, emitted, events, failed,
    finished, offline_defaults, rows, sim_ask, stage_calls, validate_config,
};
use crate::modes::Mode;
use crate::modes::{validate, ChatMessage};

fn config(models: &[&str], backup: Option<&str>) -> Value {
    let mut c = json!({ "models": models, "synthesisModel": "synth", "temperature": 1.0,
                        "timeoutMs": 120000 });
    if let Some(b) = backup {
        c["synthesisFallbackModel"] = json!(b);
    }
    c
}

fn cw(models: &[&str], backup: Option<&str>) -> ConfidenceWeighted {
    ConfidenceWeighted::new(
        &config(models, backup),
        ctx("What is caffeine's half-life?", vec![], true),
    )
    .unwrap()
}

fn reply(c: f64) -> String {
    format!("RESPONSE:\nAbout five hours.\n\nCONFIDENCE: {c}\nCONFIDENCE_REASONING: I know it.")
}

/// Drives a run; `answer` gives each call's reply (None: the call fails).
fn drive(m: &mut ConfidenceWeighted, answer: impl Fn(&CallSpec) -> Option<String>) -> Vec<Effect> {
    let start = m.start();
    let mut first = stage_calls(&start);
    first.reverse();
    crate::modes::testkit::drive_from(m, start, first, Vec::pop, answer, "Caffeine Half Life")
}

#[test]
fn a_run_answers_weighs_and_synthesises_and_the_stored_result_equals_the_events() {
    let mut m = cw(&["a", "b", "c"], None);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "answer:0" => Some(reply(0.9)),
        "answer:1" => Some(reply(0.5)),
        "answer:2" => Some("RESPONSE: Six hours.\nCONFIDENCE: 30%".into()),
        "synthesis" => {
            Some("SYNTHESIS:\nAbout five hours.\n\nCONFIDENCE CALIBRATION NOTES:\n- a: fine".into())
        }
        _ => None,
    });
    let ev = events(&all);
    let names: Vec<&str> = ev.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "confidence_start",
            "answers_start",
            "answer_complete",
            "answer_complete",
            "answer_complete",
            "all_answers_complete",
            "weights_calculated",
            "synthesis_start",
            "synthesis_complete",
            "title_complete"
        ]
    );
    let w = emitted(&all, "weights_calculated").unwrap()["data"].clone();
    let list = w["weights"].as_array().unwrap();
    assert_eq!(list[0]["model"], "a");
    assert_eq!(list[2]["model"], "c");
    let sum: f64 = list.iter().map(|x| x["normalizedWeight"].as_f64().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-9);
    // exp(0.9)/exp(0.3) = e^0.6
    let ratio = list[0]["normalizedWeight"].as_f64().unwrap()
        / list[2]["normalizedWeight"].as_f64().unwrap();
    assert!((ratio - 0.6f64.exp()).abs() < 1e-9);
    let s = emitted(&all, "synthesis_complete").unwrap();
    assert_eq!(s["data"]["synthesis"], "About five hours.");
    assert_eq!(s["data"]["calibrationNotes"], "- a: fine");
    assert_eq!(s["data"]["highestWeight"]["model"], "a");
    assert_eq!(s["data"]["lowestWeight"]["model"], "c");
    assert_eq!(s["partial"], false);
    assert_eq!(finished(&all).as_deref(), Some("About five hours."));
    // The synthesis prompt lists the answers heaviest first, with weights and the table.
    let synth =
        crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "synthesis").unwrap();
    let p = &synth.messages.last().unwrap().content;
    let (a, c) = (p.find("--- a (weight").unwrap(), p.find("--- c (weight").unwrap());
    assert!(a < c, "{p}");
    assert!(p.contains("Weight table") && p.contains("temperature 1"));
    // Stored rows rebuild exactly what went out live.
    let stored = rows(&all);
    let r = load_result(&stored);
    assert_eq!(r["weights"], w);
    assert_eq!(r["synthesis"], s["data"]);
    let live: Vec<Value> = all_emitted_data(&all, "answer_complete");
    assert_eq!(r["answers"], json!(live));
    assert_eq!(r["answers"][2]["confidence"], 0.3);
    let a0 = stored.iter().find(|r| r.stage_type == "answer_0").unwrap();
    assert_eq!(a0.stage_order, 0);
    assert_eq!(a0.content, reply(0.9));
    assert!(a0.parsed_data.as_ref().unwrap().get("response").is_none());
}

#[test]
fn one_answer_stands_alone_with_no_synthesis_call() {
    let mut m = cw(&["a", "b"], None);
    let all = drive(&mut m, |c| (c.key == "answer:1").then(|| reply(0.7)));
    assert!(!crate::modes::testkit::calls(&all).iter().any(|c| c.key == "synthesis"));
    let s = emitted(&all, "synthesis_complete").unwrap();
    assert_eq!(s["data"]["model"], Value::Null);
    assert_eq!(s["data"]["singleAnswer"], true);
    assert_eq!(s["data"]["synthesis"], "About five hours.");
    assert_eq!(s["partial"], true);
    assert_eq!(s["failedModels"][0]["model"], "a");
    let w = emitted(&all, "weights_calculated").unwrap();
    assert_eq!(w["data"]["weights"][0]["weightPercent"], 100.0);
    assert_eq!(load_result(&rows(&all))["synthesis"], s["data"]);
}

#[test]
fn no_answer_fails_the_run_and_empty_or_answerless_replies_are_failures() {
    let mut m = cw(&["a", "b", "c"], None);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "answer:0" => Some("<think>hmm</think>  ".into()),
        "answer:1" => Some("CONFIDENCE: 0.9".into()),
        _ => None,
    });
    assert!(failed(&all).unwrap().contains("No model answered"));
    let done = emitted(&all, "all_answers_complete").unwrap();
    assert_eq!(done["data"], json!({ "count": 0, "failedCount": 3 }));
    assert_eq!(rows(&all).iter().filter(|r| r.stage_type == "call_failed").count(), 3);
}

#[test]
fn a_failing_synthesizer_falls_back_once_then_the_run_fails_keeping_answers_and_weights() {
    let mut m = cw(&["a", "b"], Some("spare"));
    let all = drive(&mut m, |c| match c.key.as_str() {
        "answer:0" | "answer:1" => Some(reply(0.6)),
        "synthesis:backup" => Some("SYNTHESIS: Five hours.\nCALIBRATION NOTES: ok".into()),
        _ => None,
    });
    let s = emitted(&all, "synthesis_complete").unwrap();
    assert_eq!(s["data"]["model"], "spare");
    assert_eq!(s["data"]["fallbackFrom"], "synth");
    assert_eq!(s["partial"], true);
    assert_eq!(load_result(&rows(&all))["synthesis"], s["data"]);

    let mut m = cw(&["a", "b"], Some("spare"));
    let all = drive(&mut m, |c| c.key.starts_with("answer").then(|| reply(0.6)));
    let msg = failed(&all).unwrap();
    assert!(msg.contains("synthesizer") && msg.contains("spare"), "{msg}");
    let r = load_result(&rows(&all));
    assert_eq!(r["answers"].as_array().unwrap().len(), 2);
    assert!(r["weights"]["weights"].is_array());
    assert_eq!(r["synthesis"], Value::Null);
    assert_eq!(r["failedModels"].as_array().unwrap().len(), 2);
}

#[test]
fn a_model_listed_twice_answers_twice_under_two_names() {
    let mut m = cw(&["a", "a"], None);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "answer:0" => Some(reply(0.8)),
        "answer:1" => Some(reply(0.4)),
        _ => Some("SYNTHESIS: x\nCONFIDENCE CALIBRATION NOTES: y".into()),
    });
    let w = emitted(&all, "weights_calculated").unwrap()["data"]["weights"].clone();
    assert_eq!(w[0]["model"], "a #1");
    assert_eq!(w[1]["model"], "a #2");
}

#[test]
fn a_follow_up_carries_the_history_into_both_prompts() {
    let history = vec![ChatMessage::user("first q"), ChatMessage::assistant("first synthesis")];
    let mut m =
        ConfidenceWeighted::new(&config(&["a", "b"], None), ctx("and then?", history, false))
            .unwrap();
    let all = drive(&mut m, |c| match c.key.as_str() {
        "synthesis" => Some("SYNTHESIS: s\nCONFIDENCE CALIBRATION NOTES: n".into()),
        _ => Some(reply(0.5)),
    });
    for c in stage_calls(&all) {
        assert_eq!(c.messages[0].content, "first q");
        assert_eq!(c.messages[1].content, "first synthesis");
        assert_eq!(c.messages.len(), 3);
    }
    assert!(!events(&all).contains(&"title_complete".to_string()));
}

#[test]
fn validation_names_each_field() {
    let d = offline_defaults();
    let bad = |cfg: Value| validate_config("confidence_weighted", cfg).unwrap_err().field;
    assert_eq!(bad(json!({ "models": ["a"] })), "modeConfig.models");
    assert_eq!(bad(json!({ "models": ["a", "b", "c", "d", "e", "f", "g"] })), "modeConfig.models");
    assert_eq!(bad(json!({ "models": ["a", " "] })), "modeConfig.models");
    assert_eq!(bad(json!({ "synthesisModel": "" })), "modeConfig.synthesisModel");
    assert_eq!(bad(json!({ "temperature": 0.05 })), "modeConfig.temperature");
    assert_eq!(bad(json!({ "temperature": 5.01 })), "modeConfig.temperature");
    assert_eq!(bad(json!({ "temperature": "hot" })), "modeConfig.temperature");
    assert_eq!(bad(json!({ "timeoutMs": 9999 })), "modeConfig.timeoutMs");
    assert_eq!(bad(json!({ "timeoutMs": 300001 })), "modeConfig.timeoutMs");
    assert_eq!(bad(json!({ "tempreature": 1 })), "modeConfig.tempreature");
    let e = validate(&json!({ "mode": "confidence_weighted" }), &d).unwrap_err();
    assert_eq!(e.field, "question");
    let ok = validate(&json!({ "mode": "confidence_weighted", "question": "q" }), &d).unwrap();
    assert_eq!(ok.config["models"], json!(["sim/alpha", "sim/beta", "sim/gamma"]));
    assert_eq!(ok.config["synthesisModel"], "sim/alpha");
    assert_eq!(ok.config["temperature"], 1.0);
    let ok = validate(
        &json!({ "mode": "confidence_weighted", "question": "q",
                 "modeConfig": { "models": ["x", "y"], "temperature": 0.1, "timeoutMs": 300000 } }),
        &d,
    )
    .unwrap();
    assert_eq!(ok.config["synthesisModel"], "x");
    assert_eq!(ok.models, vec!["x".to_string(), "y".to_string()]);
}

// ---- parsers -------------------------------------------------------------------------------

fn conf(text: &str) -> (f64, bool, bool) {
    let c = parse_confidence(text);
    (c.value, c.parsed_successfully, c.clamped)
}

#[test]
fn confidences_are_read_with_their_scale_and_only_when_stated() {
    assert_eq!(conf("CONFIDENCE: 0.85"), (0.85, true, false));
    assert_eq!(conf("**Confidence:** 85%"), (0.85, true, false));
    assert_eq!(conf("- confidence: 7/10"), (0.7, true, false));
    assert_eq!(conf("## CONFIDENCE: 70/100 (fairly sure)"), (0.7, true, false));
    assert_eq!(conf("Confidence: 8 out of 10"), (0.8, true, false));
    assert_eq!(conf("CONFIDENCE: 7"), (0.7, true, false));
    assert_eq!(conf("CONFIDENCE: 75"), (0.75, true, false));
    assert_eq!(conf("CONFIDENCE: 1"), (1.0, true, false));
    assert_eq!(conf("CONFIDENCE: .6"), (0.6, true, false));
    // A bare number over 100 fits no scale: not a stated confidence (clamped, it would count
    // as certainty).
    assert_eq!(conf("CONFIDENCE: 250"), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE: as of 2024, high"), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE: -0.3"), (0.0, true, true));
    assert_eq!(conf("CONFIDENCE: 120%"), (1.0, true, true));
    assert_eq!(conf("__Confidence__: 0.4"), (0.4, true, false));
    // Not stated: the default, marked unparsed.
    assert_eq!(conf("CONFIDENCE: high"), (0.5, false, false));
    assert_eq!(conf("I am quite confident: 95% sure."), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE_REASONING: 0.9 because"), (0.5, false, false));
    assert_eq!(conf("Confidence reasoning: 0.9"), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE: 3/0"), (0.5, false, false));
    // The prompt's placeholder echoed back, or a range, states no one confidence.
    assert_eq!(conf("CONFIDENCE: <a number from 0.0 to 1.0>"), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE: 0.6-0.8"), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE: 70% to 80%"), (0.5, false, false));
    assert_eq!(conf("CONFIDENCE: 5-6 hours"), (0.5, false, false));
    assert_eq!(conf(""), (0.5, false, false));
    // The last confidence line counts.
    assert_eq!(conf("CONFIDENCE: 0.2\nlater\nCONFIDENCE: 0.9"), (0.9, true, false));
}

#[test]
fn recorded_style_replies_are_read() {
    let qwen = "<think>The user asks about caffeine. CONFIDENCE: 0.1 maybe?</think>\n\n**RESPONSE:**\nAbout 5 hours in healthy adults (range 3-7).\n\n**CONFIDENCE:** 0.8\n**CONFIDENCE_REASONING:** Well established in pharmacology.\nIt varies with smoking and pregnancy.\n\nThanks!";
    let a = read_answer(0, "m", qwen, 5);
    assert_eq!(a.response, "About 5 hours in healthy adults (range 3-7).");
    assert_eq!(a.confidence, 0.8);
    assert!(a.parsed_successfully);
    assert_eq!(
        a.confidence_reasoning,
        "Well established in pharmacology.\nIt varies with smoking and pregnancy."
    );
    // No RESPONSE marker: the text before the block.
    let plain = "Caffeine's half-life is about 5 hours.\n\nConfidence: 90%\nConfidence reasoning: textbook fact.";
    let a = read_answer(1, "m", plain, 5);
    assert_eq!(a.response, "Caffeine's half-life is about 5 hours.");
    assert_eq!(a.confidence_reasoning, "textbook fact.");
    // No confidence at all: the whole reply, unparsed.
    let refusal = "I can't give medical advice, but sources say about 5 hours.";
    let a = read_answer(2, "m", refusal, 5);
    assert_eq!(a.response, refusal);
    assert!(!a.parsed_successfully);
    assert_eq!(a.confidence, 0.5);
    assert_eq!(a.confidence_reasoning, "");
    // JSON answers are not guessed at.
    let a = read_answer(3, "m", "{\"answer\": \"5h\", \"confidence\": 0.9}", 5);
    assert!(!a.parsed_successfully);
}

#[test]
fn syntheses_are_split_from_their_notes() {
    assert_eq!(
        parse_synthesis("SYNTHESIS:\nFive hours.\n\nCONFIDENCE CALIBRATION NOTES:\n- a ok"),
        ("Five hours.".into(), "- a ok".into())
    );
    assert_eq!(
        parse_synthesis("Intro\n### Calibration Notes:\nnotes"),
        ("Intro".into(), "notes".into())
    );
    assert_eq!(parse_synthesis("just an answer"), ("just an answer".into(), "".into()));
    assert_eq!(parse_synthesis("**Synthesis:** x"), ("x".into(), "".into()));
    // The last notes marker counts; a SYNTHESIS marker after it is not the start.
    assert_eq!(
        parse_synthesis("A\nCALIBRATION NOTES: one\nCALIBRATION NOTES: two"),
        ("A\nCALIBRATION NOTES: one".into(), "two".into())
    );
}

#[test]
fn weights_follow_the_softmax_and_its_limits() {
    let input = |cs: &[f64]| -> Vec<(usize, String, f64)> {
        cs.iter().enumerate().map(|(i, c)| (i, format!("m{i}"), *c)).collect()
    };
    let w = weights(&input(&[0.5, 0.5, 0.5]), 1.0);
    assert!(w.iter().all(|x| (x.normalized_weight - 1.0 / 3.0).abs() < 1e-12));
    assert_eq!(w.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(w[0].weight_percent, 33.33);
    let w = weights(&input(&[0.0, 1.0]), 1.0);
    assert!((w[0].normalized_weight / w[1].normalized_weight - std::f64::consts::E).abs() < 1e-9);
    assert!(w[0].is_outlier && w[1].is_outlier);
    let w = weights(&input(&[0.2, 0.9]), 0.1);
    assert!(w[0].normalized_weight > 0.99);
    let w = weights(&input(&[0.2, 0.9]), 5.0);
    assert!(w[0].normalized_weight < 0.54);
    assert!(!w[0].is_outlier);
}

#[test]
fn the_sim_answers_in_format_and_messily() {
    let prompt = answer_prompt("Why is the sky blue?", None);
    let ask = |malformed: bool, hostile: bool, seed: u64| {
        let messages = [ChatMessage::user(prompt.clone())];
        sim_answer(&SimAsk {
            messages: &messages,
            malformed,
            ..sim_ask("sim/alpha", &prompt, seed, hostile, None)
        })
        .unwrap()
    };
    let a = read_answer(0, "sim/alpha", &ask(false, false, 1), 1);
    assert!(a.parsed_successfully && a.confidence >= 0.4 && !a.response.is_empty());
    let hostile = ask(false, true, 1);
    let a = read_answer(0, "sim/alpha", &hostile, 1);
    assert!(a.parsed_successfully);
    assert!(a.response.contains(crate::modes::sim_text::XSS_PAYLOAD.lines().next().unwrap()));
    for seed in 0..12 {
        let a = read_answer(0, "sim/alpha", &ask(true, false, seed), 1);
        assert!(!a.response.is_empty());
    }
    let w = weights(&[(0, "sim/alpha".into(), 0.8)], 1.0);
    let sp = synthesis_prompt(
        "q",
        &[Weighted { model: "sim/alpha", response: "r", weight: &w[0] }],
        1.0,
    );
    let messages = [ChatMessage::user(sp.clone())];
    let s = sim_answer(&SimAsk { messages: &messages, ..sim_ask("sim/beta", &sp, 3, false, None) })
        .unwrap();
    let (synth, notes) = parse_synthesis(&s);
    assert!(!synth.is_empty() && notes.contains("sim/alpha"));
    let other = [ChatMessage::user("hello")];
    assert!(sim_answer(&SimAsk { messages: &other, ..sim_ask("sim/a", "hello", 0, false, None) })
        .is_none());
}

proptest! {
    /// Whatever the text, a confidence is in 0-1; an unparsed one is the 0.5 default and never
    /// clamped.
    #[test]
    fn confidences_stay_in_range(text in ".{0,200}") {
        let c = parse_confidence(&text);
        prop_assert!((0.0..=1.0).contains(&c.value));
        if !c.parsed_successfully {
            prop_assert_eq!(c.value, 0.5);
            prop_assert!(!c.clamped);
        }
    }

    /// A stated confidence on the 0-1 scale is read back as written, wherever the line sits.
    #[test]
    fn stated_confidences_are_read_back(
        c in 0u32..=100,
        before in "[a-z .\n]{0,60}",
        after in "[a-z .]{0,40}",
    ) {
        let x = f64::from(c) / 100.0;
        let text = format!("{before}\nCONFIDENCE: {x}\n{after}");
        let got = parse_confidence(&text);
        prop_assert!(got.parsed_successfully);
        prop_assert!((got.value - x).abs() < 1e-12);
    }

    /// Weights sum to one, are ordered heaviest first, follow the confidences, and their ratio
    /// never exceeds e^(Δc/T).
    #[test]
    fn weights_are_a_distribution_in_confidence_order(
        cs in proptest::collection::vec(0.0f64..=1.0, 1..7),
        t in 0.1f64..=5.0,
    ) {
        let input: Vec<(usize, String, f64)> = cs.iter().enumerate().map(|(i, c)| (i, format!("m{i}"), *c)).collect();
        let w = weights(&input, t);
        let sum: f64 = w.iter().map(|x| x.normalized_weight).sum();
        prop_assert!((sum - 1.0).abs() < 1e-9);
        for pair in w.windows(2) {
            prop_assert!(pair[0].normalized_weight >= pair[1].normalized_weight);
            prop_assert!(pair[0].raw_confidence >= pair[1].raw_confidence);
            if pair[0].normalized_weight == pair[1].normalized_weight {
                prop_assert!(pair[0].index < pair[1].index);
            }
        }
        let (hi, lo) = (&w[0], &w[w.len() - 1]);
        let bound = ((hi.raw_confidence - lo.raw_confidence) / t).exp();
        prop_assert!(hi.normalized_weight / lo.normalized_weight <= bound * (1.0 + 1e-9));
    }

    /// The parsed answer and reasoning are parts of the reply; no marker line of the
    /// confidence block leaks into the answer.
    #[test]
    fn parsed_parts_come_from_the_reply(text in "(RESPONSE:|CONFIDENCE:|CONFIDENCE_REASONING:|[a-z0-9 .%/]|\n){0,120}") {
        let r = parse_response(&text);
        for line in r.lines() {
            prop_assert!(text.contains(line.trim()));
            prop_assert!(marker_rest(line, "CONFIDENCE").is_none());
        }
        let reasoning = parse_reasoning(&text);
        for line in reasoning.lines() {
            prop_assert!(text.contains(line.trim()));
        }
        let (s, n) = parse_synthesis(&text);
        prop_assert!(s.len() + n.len() <= text.len());
    }
}

// ---- structured replies ---------------------------------------------------------------------

/// A run whose respondents `json` are asked for JSON (their routes take structured output);
/// `history` makes it a follow-up.
fn structured_cw(models: &[&str], json: &[&str], history: Vec<ChatMessage>) -> ConfidenceWeighted {
    let new = history.is_empty();
    let mut ctx = ctx("What is caffeine's half-life?", history, new);
    ctx.structured = crate::modes::Structured::models(json);
    ConfidenceWeighted::new(&config(models, None), ctx).unwrap()
}

fn json_reply(response: &str, confidence: Value, why: &str) -> String {
    json!({ "reasoning": "Pharmacology texts agree.", "response": response,
            "confidence": confidence, "confidence_reasoning": why })
    .to_string()
}

#[test]
fn the_schema_takes_a_confidence_from_0_to_1_after_the_reasoning() {
    let s = answer_schema();
    assert_eq!(s.name, "confidence_weighted_answer");
    let keys: Vec<&String> = s.schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "response", "confidence", "confidence_reasoning"]);
    let fits =
        |c: Value| s.validate(&serde_json::from_str(&json_reply("5 h", c, "x")).unwrap()).is_ok();
    for c in [json!(0), json!(0.0), json!(0.35), json!(1), json!(1.0)] {
        assert!(fits(c.clone()), "{c}");
    }
    // Out of range, a percentage, words: refused (a text `CONFIDENCE: 80` would be read as
    // 0.8 by its stated scale; JSON states no scale, so it is held to 0-1).
    for c in [json!(-0.1), json!(1.01), json!(80), json!("0.8"), json!("high"), Value::Null] {
        assert!(!fits(c.clone()), "{c}");
    }
    let long = "x".repeat(RESPONSE_MAX_CHARS + 1);
    assert!(s
        .validate(&serde_json::from_str(&json_reply(&long, json!(0.5), "x")).unwrap())
        .is_err());
    // An empty answer fails the call (seen on SmolLM2 held to the schema): the schema asks for
    // at least one character, so a server that holds its reply to it cannot leave it empty.
    assert!(s.validate(&serde_json::from_str(&json_reply("", json!(0.5), "x")).unwrap()).is_err());
    assert_eq!(s.schema["properties"]["response"]["minLength"], 1);
    assert!(
        s.schema["properties"]
            .as_object()
            .unwrap()
            .values()
            .all(|f| f["type"] != "string" || f["maxLength"].is_u64()),
        "every string is bounded"
    );
}

#[test]
fn respondents_that_take_json_are_asked_for_it_with_the_history_kept() {
    let history = vec![ChatMessage::user("first q"), ChatMessage::assistant("first synthesis")];
    let mut m = structured_cw(&["a", "b"], &["a"], history);
    let calls = stage_calls(&m.start());
    assert!(calls
        .iter()
        .all(|c| c.schema.as_ref().is_some_and(|s| s.name == "confidence_weighted_answer")));
    let (json_p, text_p) = (&calls[0].messages, &calls[1].messages);
    assert_eq!(
        (json_p.len(), &json_p[0].content, &json_p[1].content),
        (3, &"first q".to_string(), &"first synthesis".to_string())
    );
    let p = &json_p[2].content;
    assert!(p.contains("A confidence of 0.0 means a guess and 1.0 means certain."), "{p}");
    assert!(
        p.contains("Reply with a single JSON object") && !p.contains("RESPONSE:\n<your answer>"),
        "{p}"
    );
    assert!(p.find("\"reasoning\"").unwrap() < p.find("\"confidence\"").unwrap(), "{p}");
    assert_eq!(text_p[2].content, answer_prompt("What is caffeine's half-life?", None));
}

#[test]
fn answers_are_read_from_json_when_it_fits_else_from_text_and_say_which() {
    let mut m = structured_cw(&["a", "b", "c", "d"], &["a", "b", "c", "d"], vec![]);
    let all = drive(&mut m, |c| match c.key.as_str() {
        "answer:0" => Some(json_reply("About five hours.", json!(0.9), "Textbook figure.")),
        // Out of range: refused; its text states no `CONFIDENCE:` line, so it is unparsed.
        "answer:1" => Some(json_reply("Six hours.", json!(80), "Sure.")),
        // A model that ignored the schema and wrote the spec's format.
        "answer:2" => Some(reply(0.4)),
        // JSON whose answer is empty states no answer: a failed call, as in text.
        "answer:3" => Some(json_reply("  ", json!(0.9), "")),
        "synthesis" => {
            Some("SYNTHESIS:\nAbout five hours.\n\nCONFIDENCE CALIBRATION NOTES:\n- a: fine".into())
        }
        _ => None,
    });
    let live: Vec<Value> = all_emitted_data(&all, "answer_complete");
    assert_eq!(live.len(), 3, "the empty JSON answer is a failure");
    assert_eq!(
        (
            &live[0]["response"],
            &live[0]["confidence"],
            &live[0]["confidenceReasoning"],
            &live[0]["readFrom"]
        ),
        (&json!("About five hours."), &json!(0.9), &json!("Textbook figure."), &json!("json"))
    );
    assert_eq!(
        (&live[1]["parsedSuccessfully"], &live[1]["confidence"]),
        (&json!(false), &json!(0.5))
    );
    assert!(live[1].get("readFrom").is_none(), "{}", live[1]);
    assert_eq!((&live[2]["confidence"], &live[2]["readFrom"]), (&json!(0.4), &json!("text")));
    assert_eq!(emitted(&all, "all_answers_complete").unwrap()["data"]["failedCount"], 1);
    // The synthesizer reads the answers, not the JSON; a reply that was not read is quoted as
    // fields, not as raw JSON; the answers are named for fitting into a small context.
    let synth =
        crate::modes::testkit::calls(&all).into_iter().find(|c| c.key == "synthesis").unwrap();
    let p = &synth.messages.last().unwrap().content;
    assert!(p.contains("---\nAbout five hours.\n\n"), "{p}");
    assert!(!p.contains("\"response\"") && p.contains("Response: Six hours."), "{p}");
    assert_eq!(synth.material.len(), 3);
    assert!(synth.material.iter().all(|m| p.contains(&*m.text)));
    // Stored rows say it too, and the result rebuilt from them matches what went out.
    let stored = rows(&all);
    let a0 = stored.iter().find(|r| r.stage_type == "answer_0").unwrap();
    assert_eq!(a0.parsed_data.as_ref().unwrap()["readFrom"], "json");
    assert_eq!(load_result(&stored)["answers"], json!(live));
}

proptest! {
    /// Whatever fits the schema is read whole: the answer, the confidence and its reasoning.
    #[test]
    fn any_json_that_fits_is_read_without_loss(seed in any::<u64>()) {
        let s = answer_schema();
        let mut rng = SplitMix64::new(seed);
        let v = schema::sample(&s.schema, &mut rng, &|f| format!("{f} {seed:x}"));
        let a = read_answer_reply(0, "m", &v.to_string(), 1, &s);
        prop_assert_eq!(a.read_from, Some(ReadFrom::Json));
        prop_assert!(a.parsed_successfully && !a.clamped);
        prop_assert_eq!(json!(a.response), v["response"].clone());
        prop_assert_eq!(json!(a.confidence), v["confidence"].clone());
        prop_assert_eq!(json!(a.confidence_reasoning), v["confidence_reasoning"].clone());
    }
}

#[test]
fn the_sim_answers_the_schema_in_json_and_the_text_prompt_in_text() {
    let s = answer_schema();
    let prompt = answer_prompt("What is caffeine's half-life?", Some(&s));
    for hostile in [false, true] {
        let ask = sim_ask("sim/beta", &prompt, 9, hostile, Some(&s));
        let text = sim_answer(&ask).unwrap();
        let a = read_answer_reply(0, "sim/beta", &text, 1, &s);
        assert_eq!(a.read_from, Some(ReadFrom::Json), "{text}");
        assert!((0.4..1.0).contains(&a.confidence) && !a.response.is_empty());
    }
    let other = ReplySchema::new("council_ranking", json!({}));
    let ask = sim_ask("sim/beta", &prompt, 9, false, Some(&other));
    assert!(sim_answer(&ask).is_none());
}

/// What no report may show: raw values, JSON, stored keys, protocol words, headings.
fn assert_reads_well(md: &str) {
    assert_report_free_of(md, &["CONFIDENCE:", "parsedSuccessfully", "weightPercent"]);
}

#[test]
fn the_report_gives_each_answers_confidence_and_weight() {
    let mut m = cw(&["a", "b", "c"], None);
    let all = drive(&mut m, |c| {
        match c.key.as_str() {
        "answer:0" => Some(reply(0.99)),
        "answer:1" => Some(reply(0.6)),
        "answer:2" => Some("RESPONSE: Six hours.".into()),
        "synthesis" => Some(
            "SYNTHESIS:\nAbout five hours.\n\nCONFIDENCE CALIBRATION NOTES:\n## Notes\n- a: sure and right"
                .into(),
        ),
        _ => None,
    }
    });
    let result = load_result(&rows(&all));
    let md = report(&result);
    let w = |i: usize| result["weights"]["weights"][i]["weightPercent"].as_f64().unwrap();
    assert_contains_all(&md, &["|---", "| model | confidence | weight | confidence stated |"]);
    assert!(md.contains(&format!("| a | 99% (unusually high) | {}% | yes |", w(0))), "{md}");
    assert!(md.contains(&format!("| b | 60% | {}% | yes |", w(1))), "{md}");
    assert!(md.contains(&format!("| c | not stated | {}% | no |", w(2))), "{md}");
    assert!(md.contains(&format!("the heaviest answer is a's, at {}%", w(0))), "{md}");
    assert_contains_all(
        &md,
        &[
            "weighed at the default of 50%",
            "**Synthesis** written by synth, favouring the heavier answers.",
            "> Notes\n> - a: sure and right\n",
        ],
    );
    assert_reads_well(&md);

    // One answer stands alone.
    let mut m = cw(&["a", "b"], None);
    let all = drive(&mut m, |c| (c.key == "answer:1").then(|| reply(0.7)));
    let md = report(&load_result(&rows(&all)));
    assert_contains_all(&md, &["| b | 70% | 100% | yes |", "**Synthesis:** only b answered"]);
    assert_reads_well(&md);

    // A run that stopped early, or nothing at all: no panic, nothing made up.
    assert!(report(&json!({})).is_empty());
    let early = json!({ "answers": [], "weights": null, "synthesis": null });
    assert!(report(&early).is_empty());
}
