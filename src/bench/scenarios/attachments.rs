//! Scenario 6: what a 10 MB text file adds to a run's start. Runs of one sim model are started
//! alternately without a file and with one (uploaded once before), and each start is timed
//! from sending `start` to the server's `started` (the run stored, its file read and checked,
//! the run registered): the difference of the medians is what the file adds.

use super::*;

/// The target: what the file may add to a start.
const ADDED_P50_MS: f64 = 50.0;
/// The file: 10 MB of text, the default per-file limit.
const FILE_BYTES: usize = 10 * crate::attachments::MB as usize;

pub(super) async fn start_with_a_file(sizes: Sizes) -> Result<Report, BenchError> {
    let ws = Workspace::new("attachments")?;
    let sim = ws.sim_server("latency_ms = 20")?;
    let server = ws.server(&sim, "", &sizes)?;
    let rest = Rest::new(&server.base, &server.token)?;
    let line = "The ledger records every transfer between accounts, with its time and amount.\n";
    let text: String = line.repeat(FILE_BYTES / line.len() + 1).chars().take(FILE_BYTES).collect();
    let t0 = Instant::now();
    let up = rest.upload("ledger.txt", text.into_bytes()).await?;
    let upload_ms = ms(t0.elapsed());
    let id = up["attachments"][0]["id"]
        .as_str()
        .ok_or_else(|| BenchError::Run(format!("the upload answered no id: {up}")))?
        .to_string();
    let mut sock = client::connect(&server.ws_url, &server.token).await?;
    let solo = |i: usize, file: bool| {
        let mut body = json!({ "mode": "solo", "question": format!("Question {i}: what does the ledger record?"),
                               "modeConfig": { "model": "sim/alpha" } });
        if file {
            body["attachments"] = json!([id]);
        }
        body
    };
    // One of each first, not counted.
    for file in [false, true] {
        client::drive(&mut sock, &solo(0, file), false, RUN_LIMIT).await?;
    }
    let n = sizes.attachment_runs;
    let (mut plain, mut with_file, mut completed) = (Vec::new(), Vec::new(), 0);
    for i in 0..n {
        for file in [false, true] {
            let f = client::drive(&mut sock, &solo(i + 1, file), false, RUN_LIMIT).await?;
            completed += usize::from(f.completed());
            let into = if file { &mut with_file } else { &mut plain };
            into.push(ms(f.started_after));
        }
    }
    let (plain50, file50) = (percentile(&plain, 0.5), percentile(&with_file, 0.5));
    let added = file50 - plain50;
    let mut r = Report::scenario(
        6,
        &format!("a run's start with a 10 MB text file attached, {n} runs with it and {n} without"),
    );
    r.row("runs completed", fraction(completed, 2 * n)).target("all", completed == 2 * n);
    r.row("start p50 with the file", fmt_ms(file50)).ideal(fmt_ms(plain50), file50 / plain50);
    r.row("added by the file (p50 with - p50 without)", fmt_ms(added))
        .target(&format!("< {ADDED_P50_MS} ms"), added < ADDED_P50_MS);
    r.note(format!(
        "a start is timed from sending `start` to `started` (stored, file read and checked, \
         registered); the ideal column is the same start without the file; uploading the 10 MB \
         file once took {} (not part of a start); start with the file: min {}, max {}",
        fmt_ms(upload_ms),
        fmt_ms(percentile(&with_file, 0.0)),
        fmt_ms(percentile(&with_file, 1.0)),
    ));
    Ok(r.finish())
}
