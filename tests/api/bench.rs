//! `conclave bench --quick`: the form of the benchmark a smoke test can afford, run as a user
//! runs it. Asserts that the table has every row and that every run completed; never a timing
//! (machines here are shared and noisy, and the figures are the benchmark's to print).

use std::process::Command;

#[test]
fn quick_bench_prints_every_row_and_every_run_completes() {
    let out = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["bench", "--quick", "1", "2"])
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("CONCLAVE_CONFIG")
        .env_remove("CONCLAVE_SIM_LATENCY_MS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines.first().copied().unwrap_or_default();
    for column in ["scenario", "metric", "value", "ideal", "ratio", "target", "met"] {
        assert!(header.contains(column), "no {column} column: {stdout}");
    }
    let row = |metric: &str| -> Vec<&str> {
        lines.iter().copied().filter(|l| l.contains(metric)).collect()
    };
    // Scenario 1 then scenario 2, each with every row.
    assert!(lines.iter().any(|l| l.starts_with("1  1 Council run at a time")), "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("2  50 concurrent Council runs")), "{stdout}");
    let completed = row("runs completed");
    assert_eq!(completed.len(), 2, "{stdout}");
    assert!(completed[0].contains(" 5/5 ") && completed[0].ends_with("yes"), "{stdout}");
    assert!(completed[1].contains(" 50/50 ") && completed[1].ends_with("yes"), "{stdout}");
    assert_eq!(row("wall p50").len(), 2, "{stdout}");
    for metric in ["overhead p50", "wall p95", "server peak RSS"] {
        assert_eq!(row(metric).len(), 1, "no {metric} row: {stdout}");
    }
    // Scenario 2's floor: the same runs without the server, with the ideal beside it.
    let floor = row("floor p95 (");
    assert!(floor.len() == 1 && floor[0].matches(" ms").count() >= 2, "{stdout}");
    assert_eq!(row("p95 over the floor p95").len(), 1, "{stdout}");
    // Every figure has its ideal beside it, measured in the same run.
    for l in row("wall p") {
        assert!(l.contains("ms") && l.matches(" ms").count() >= 2 && l.contains('x'), "{l}");
    }
    // What the server stored: every completed run with every stage, read from its database.
    let stored = lines
        .iter()
        .flat_map(|l| l.split("; "))
        .find_map(|part| part.trim().strip_suffix(" runs stored with every stage"))
        .and_then(|s| s.split_once(" of "))
        .unwrap_or_else(|| panic!("no stored-runs note: {stdout}"));
    assert_eq!(stored.0, stored.1, "{stdout}");
}
