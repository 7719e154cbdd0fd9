use super::*;
use serde_json::json;

#[test]
fn stage_ids_become_words() {
    assert_eq!(stage_words("stage1"), "Answers");
    assert_eq!(stage_words("stage2"), "Peer ranking");
    assert_eq!(stage_words("chain_step_2"), "Chain step 2");
    assert_eq!(stage_words("round_3_stats"), "Round 3 stats");
    assert_eq!(stage_words("label_map"), "Label map");
    assert_eq!(words("labelToModel"), "Label to model");
    assert_eq!(words("stage2Metadata"), "Stage 2 metadata");
}

#[test]
fn labelled_lines_read_as_fields() {
    let out = labelled_lines("ESTIMATE: ~63200 CONFIDENCE: LOW REASONING: Census data.");
    assert!(
        out.contains("**Estimate:** ~63200\n\n**Confidence:** LOW\n\n**Reasoning:** Census data."),
        "{out}"
    );
    let out = labelled_lines("DECISION: **REVISE**\nFINAL RANKING:\n1. Response A");
    assert!(out.contains("**Decision:** REVISE"), "{out}");
    assert!(out.contains("**Final ranking:**\n\n1. Response A"), "{out}");
    for kept in
        ["NASA: founded 1958", "My ANSWER: 42", "```\nESTIMATE: 3\n```", "    VOTE: x", "prose"]
    {
        assert_eq!(labelled_lines(kept), kept);
    }
}

#[test]
fn names_in_the_data_are_written_in_words_and_prose_is_not() {
    assert_eq!(scalar(&Value::from("averageScore")), "Average score");
    assert_eq!(key_words("CRITICAL"), "Critical");
    assert_eq!(key_words("NOT_VERIFIED"), "Not verified");
    assert_eq!(key_words("Response A"), "Response A");
    assert_eq!(key_words("CV"), "CV");
    assert_eq!(scalar(&Value::from("sim/alpha")), "sim/alpha");
    assert_eq!(scalar(&Value::from("Accepted")), "Accepted");
    assert_eq!(scalar(&Value::from("two words")), "two words");
    assert_eq!(scalar(&Value::from("plain")), "plain");
}

#[test]
fn data_is_a_list_never_json() {
    let d = json!({"parsedRanking": ["Response B", "Response A"], "partial": false,
                       "labelToModel": {"Response A": "sim/gamma"}, "unparsed": null,
                       "scores": [{"dimension": "accuracy", "score": 8}, {"dimension": "clarity", "score": 7.5}]});
    let md = data_list(&d, 0);
    assert!(md.contains("- Parsed ranking: Response B, Response A"), "{md}");
    assert!(md.contains("- Partial: no"), "{md}");
    assert!(md.contains("- Label to model: Response A: sim/gamma"), "{md}");
    assert!(md.contains("- Dimension: accuracy; Score: 8"), "{md}");
    assert!(md.contains("Score: 7.5"), "{md}");
    let places = data_list(&json!({"places": [["Response A", "Response C"], ["Response B"]]}), 0);
    assert_eq!(places, "- Places: Response A = Response C; Response B\n");
    assert!(said_in(&json!({"label": "Response A"}), "Response A"));
    assert!(!said_in(&json!({"label": "Response A", "partial": false}), "Response A"));
    let row = crate::modes::StageRow {
        stage_type: "evaluation".into(),
        stage_order: 1,
        model: Some("sim/a".into()),
        role: Some("skeptic".into()),
        content: "{\"scores\": {\"clarity\": 7}}".into(),
        parsed_data: None,
        response_time_ms: Some(8),
    };
    let parsed = json!({"model": "sim/a", "role": "skeptic", "scores": {"clarity": 7},
                            "overall": 7.4, "responseTimeMs": 8});
    assert_eq!(unsaid(&parsed, &row), Some(json!({"overall": 7.4})));
    assert!(!md.contains('{') && !md.contains("Unparsed"), "{md}");
}

#[test]
fn reply_headings_go_below_the_document_s() {
    let text = "# Title\n\nBody\n\n```\n# not a heading\n```\n## Sub";
    assert_eq!(block(text, 4), "#### Title\n\nBody\n\n```\n# not a heading\n```\n##### Sub");
    assert_eq!(block("plain", 4), "plain");
    let r = reply("<think>draft</think>\n\nThe answer.", 4);
    assert!(r.starts_with("> **Reasoning**") && r.ends_with("The answer."), "{r}");
}

#[test]
fn json_in_a_reply_becomes_a_list() {
    let md =
        without_json("My scorecard:\n{\"scores\": {\"clarity\": 7}, \"critique\": \"ok\"}\nDone.");
    assert_eq!(md, "My scorecard:\n\n- Scores: Clarity: 7\n- Critique: ok\n\nDone.");
    let md = without_json("```json\n[{\"a\": 1}]\n```\nafter");
    assert_eq!(md, "- A: 1\n\nafter");
    assert_eq!(without_json("{not json\nplain"), "{not json\nplain");
}

#[test]
fn dates_are_utc() {
    assert_eq!(utc(0), "1970-01-01 00:00 UTC");
    assert_eq!(utc(1_767_225_600_000), "2026-01-01 00:00 UTC");
    assert_eq!(utc(1_709_210_096_000), "2024-02-29 12:34 UTC");
    assert_eq!(thousands(1_234_567), "1,234,567");
}
