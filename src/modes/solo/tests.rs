//! Solo driven with fake replies: the question as asked, the stored answer, a failed call.

use super::*;
use crate::modes::testkit::{calls, ctx, err, ok};

/// The first call among `effects`.
fn call(effects: &[Effect]) -> CallSpec {
    calls(effects).into_iter().next().unwrap()
}

#[test]
fn one_model_answers_the_question_as_asked() {
    let config = json!({ "model": "m", "timeoutMs": 1000 });
    let mut m = Solo::new(&config, ctx("What is 2+2?", vec![], true)).unwrap();
    let c = call(&m.start());
    assert_eq!(c.model, "m");
    assert_eq!(c.messages.last().unwrap().content, "What is 2+2?", "no wrapping of the question");
    let end = m.on_reply(ok(&c, "Final answer: 4"));
    assert!(end
        .iter()
        .any(|e| matches!(e, Effect::Finish { answer } if answer == "Final answer: 4")));
    let rows: Vec<StageRow> = end
        .into_iter()
        .filter_map(|e| match e {
            Effect::Store(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(load_result(&rows)["answer"]["response"], "Final answer: 4");
    let mut m = Solo::new(&config, ctx("q", vec![], true)).unwrap();
    let c = call(&m.start());
    assert!(m.on_reply(err(&c)).iter().any(|e| matches!(e, Effect::Fail { .. })));
}
