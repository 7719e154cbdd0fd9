use super::*;

#[test]
fn unroutable_models_are_reported_where_the_client_wrote_them() {
    let body = json!({"question": "q", "councilModels": ["sim/a", "x/y"], "chairmanModel": "z"});
    assert_eq!(field_naming(&body, "x/y"), "councilModels[1]");
    assert_eq!(field_naming(&body, "z"), "chairmanModel");
    assert_eq!(field_naming(&body, "default/model"), "models");
}

#[test]
fn history_skips_turns_that_never_got_an_answer() {
    let msg = |role: &str, content: &str, position| MessageRecord {
        id: format!("m{position}"),
        conversation_id: "c".into(),
        position,
        role: role.into(),
        content: content.into(),
        created_at: 0,
    };
    let messages = vec![
        msg("user", "q1", 0),
        msg("assistant", "a1", 1),
        msg("user", "q2", 2),
        msg("assistant", "", 3),
        msg("user", "q3", 4),
        msg("assistant", "<think>draft a3</think>\n\na3", 5),
    ];
    let h = history_of(&messages);
    let contents: Vec<&str> = h.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, vec!["q1", "a1", "q3", "a3"], "answers go back without their traces");
}
