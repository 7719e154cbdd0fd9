//! Reasoning models end to end on the sim: `sim/thinker` in a run (its trace stored with its
//! answer and set aside when the answer is read) and in the terminal client.

use serde_json::json;

use crate::cli::conclave;
use crate::helpers::*;

/// A Council whose chairman reasons: the synthesis is stored whole, trace first, and the
/// run's answer is the same text; in-process and through the sim-server alike.
#[actix_web::test]
async fn a_thinking_chairman_stores_its_trace_with_its_synthesis() {
    use conclave::modes::reading::split_reasoning;
    for sim_over_http in [false, true] {
        let app = spawn_with(Options { sim_over_http, ..Options::default() }).await;
        let started = app
            .start(json!({ "mode": "council", "question": "Should we think first?",
                           "councilModels": ["sim/alpha", "sim/beta", "sim/gamma"],
                           "chairmanModel": "sim/thinker" }))
            .await;
        let run = app.wait_done(started["runId"].as_str().unwrap()).await;
        assert_eq!(run["status"], "completed", "{run}");
        let synthesis = run["result"]["stage3"]["response"].as_str().unwrap();
        let split = split_reasoning(synthesis);
        assert!(synthesis.starts_with("<think>\n") && !split.unclosed, "{synthesis}");
        assert!(split.reasoning.unwrap().contains("A first draft"), "{synthesis}");
        assert!(split.answer.starts_with("[simulated synthesis by sim/thinker]"), "{synthesis}");
        assert_eq!(run["answer"], synthesis);
        app.stop().await;
    }
}

/// `conclave run` prints the answer without its trace, and with it on `--show-reasoning`.
#[test]
fn the_cli_prints_the_answer_without_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("cli.db").display());
    let run = |extra: &[&str]| {
        let out = conclave()
            .current_dir(dir.path())
            .args(["run", "council", "Think first?", "--quiet"])
            .args(["--models", "sim/alpha,sim/beta,sim/gamma", "--chairman", "sim/thinker"])
            .args(extra)
            .env("DATABASE_URL", &db)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = run(&[]);
    assert!(plain.starts_with("[simulated synthesis by sim/thinker]"), "{plain}");
    assert!(!plain.contains("<think>") && !plain.contains("A first draft"), "{plain}");
    let shown = run(&["--show-reasoning"]);
    assert!(shown.starts_with("<think>\n") && shown.contains("A first draft"), "{shown}");
}
