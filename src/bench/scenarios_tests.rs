use super::*;

#[test]
fn every_mode_request_is_valid_and_every_model_gets_a_latency() {
    let (cases, toml, drawn) = mode_cases(Duration::from_millis(3000));
    let defaults = crate::modes::Defaults {
        offline: true,
        stage_timeout_ms: 120_000,
        fallback: Default::default(),
        ..Default::default()
    };
    assert_eq!(cases.len(), crate::modes::ModeKind::all().len());
    for c in &cases {
        // Every role the request names has models of its own, so its latency is its own.
        let spec = crate::modes::ModeKind::parse(c.mode).unwrap().spec();
        for role in spec.roles.iter().filter(|r| r.field.is_some()) {
            let field = role.field.unwrap().replace('.', "/");
            let given = c.request["modeConfig"].pointer(&format!("/{field}"));
            let text = given.map(Value::to_string).unwrap_or_default();
            assert!(text.contains(&format!("sim/{}-", c.mode)), "{}.{field}: {text}", c.mode);
        }
        let v = crate::modes::validate(&c.request, &defaults);
        assert!(v.is_ok(), "{}: {:?}", c.mode, v.err());
        let mut models = Vec::new();
        collect_models(&c.request, &mut models);
        for m in models {
            assert!(toml.contains(&format!("[sim.models.\"{m}\"]")), "{m}");
        }
    }
    let parsed: toml::Value = toml::from_str(&format!("[sim]\n{toml}")).unwrap();
    assert_eq!(parsed["sim"]["models"].as_table().unwrap().len(), drawn.len());
    let again = mode_cases(Duration::from_millis(3000)).2;
    assert_eq!(drawn, again, "the same seed draws the same latencies");
    assert!(drawn.iter().all(|(_, l)| *l > 0));
}
