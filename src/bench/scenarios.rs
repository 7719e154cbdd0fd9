//! The five scenarios of "Speed, measured". Each starts its own sim-server and server (so one
//! scenario's runs never weigh on the next one's figures), drives runs through the server's
//! WebSocket like a client, checks what the server stored, and answers its rows of the table
//! with the ideal measured in the same run. Targets are the issue's; a missed one is printed
//! as missed, never retried.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use super::client::{self, is_terminal, peek_event, Finished, Rest, Socket};
use super::harness::{machine_cpu, sched, thread_cpu, Sched, SimServer, Workspace};
use super::ideal;
use super::report::{fmt_ms, ms, percentile, Draws, Report};
use super::{BenchError, Scenario, Sizes};

mod attachments;
mod measure;
use measure::*;

/// Longest a single benchmark run may take before the scenario gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(300);
/// The Council of scenarios 1 to 4: four members and a chairman who is not one of them.
const MEMBERS: [&str; 4] = ["sim/alpha", "sim/beta", "sim/gamma", "sim/delta"];
const CHAIRMAN: &str = "sim/epsilon";
/// The targets.
const OVERHEAD_P50_MS: f64 = 5.0;
const CONCURRENT_P95_RATIO: f64 = 1.25;
const PEAK_RSS_MIB: f64 = 300.0;
const RUNS_PER_SECOND: f64 = 300.0;
const DELIVERY_P99_MS: f64 = 250.0;
/// Seed of the latencies drawn in scenario 5, so every run of the benchmark draws the same.
const LATENCY_SEED: u64 = 7;
/// Shape of those log-normal latencies: about 1 in 20 calls takes over 2.7 times the median.
const LATENCY_SIGMA: f64 = 0.6;

pub async fn run(scenario: Scenario, sizes: Sizes) -> Result<Report, BenchError> {
    let result = match scenario {
        Scenario::Overhead => overhead(sizes).await,
        Scenario::Concurrent => concurrent(sizes).await,
        Scenario::Throughput => throughput(sizes).await,
        Scenario::Watchers => watchers(sizes).await,
        Scenario::Modes => modes(sizes).await,
        Scenario::Attachments => attachments::start_with_a_file(sizes).await,
    };
    Ok(result.unwrap_or_else(|e| {
        let mut r = Report::scenario(scenario.number(), scenario.name());
        r.row("error", e.to_string()).target("finishes", false);
        let mut report = r.finish();
        report.failed = true;
        report
    }))
}

fn council(question: &str) -> Value {
    json!({ "mode": "council", "question": question, "councilModels": MEMBERS,
            "chairmanModel": CHAIRMAN })
}

fn fraction(n: usize, of: usize) -> String {
    format!("{n}/{of}")
}

/// Scenario 1: one Council run at a time; overhead = wall time minus the run's own ideal.
async fn overhead(sizes: Sizes) -> Result<Report, BenchError> {
    let latency = sizes.latency.as_millis();
    let n = sizes.sequential_runs;
    let ws = Workspace::new("overhead")?;
    let sim = ws.sim_server(&format!("latency_ms = {latency}"))?;
    let server = ws.server(&sim, "", &sizes)?;
    let mut sock = client::connect(&server.ws_url, &server.token).await?;
    // One run first, not counted: connections to the sim-server, SQLite pages, allocations.
    let warm = council("Warm-up: what is a benchmark?");
    let f = client::drive(&mut sock, &warm, false, RUN_LIMIT).await?;
    ideal::measure(&sim.client, &warm, &f.run_id, sizes.structured).await?;
    let (mut walls, mut ideals, mut overheads, mut completed) = (vec![], vec![], vec![], 0);
    for i in 0..n {
        let req = council(&format!("Question {i}: what are the trade-offs of microservices?"));
        let f = client::drive(&mut sock, &req, false, RUN_LIMIT).await?;
        completed += usize::from(f.completed());
        // The same run again with no engine in between: its own ideal.
        let id = ideal::measure(&sim.client, &req, &f.run_id, sizes.structured).await?;
        walls.push(ms(f.wall));
        ideals.push(ms(id.critical_path));
        overheads.push(ms(f.wall) - ms(id.critical_path));
    }
    let (wall50, ideal50, over50) =
        (percentile(&walls, 0.5), percentile(&ideals, 0.5), percentile(&overheads, 0.5));
    let mut r = Report::scenario(
        1,
        &format!("1 Council run at a time (4 members + chairman), {latency} ms, {n} runs"),
    );
    r.row("runs completed", fraction(completed, n)).target("all", completed == n);
    r.row("wall p50", fmt_ms(wall50)).ideal(fmt_ms(ideal50), wall50 / ideal50);
    r.row("overhead p50 (wall - ideal)", fmt_ms(over50))
        .target(&format!("< {OVERHEAD_P50_MS} ms"), over50 < OVERHEAD_P50_MS);
    r.note(format!(
        "overhead per run: min {}, p90 {}, max {}; each run's ideal is that run replayed straight \
         against the sim-server (3 stages of {latency} ms nominal; delivered p50 {}); one \
         warm-up run not counted",
        fmt_ms(percentile(&overheads, 0.0)),
        fmt_ms(percentile(&overheads, 0.9)),
        fmt_ms(percentile(&overheads, 1.0)),
        fmt_ms(ideal50),
    ));
    Ok(r.finish())
}

/// Scenario 2: many Council runs started at once; their tail against the ideal, and memory.
async fn concurrent(sizes: Sizes) -> Result<Report, BenchError> {
    let latency = sizes.latency.as_millis();
    let n = sizes.concurrent_runs;
    let ws = Workspace::new("concurrent")?;
    let sim = ws.sim_server(&format!("latency_ms = {latency}"))?;
    let server = ws.server(&sim, "", &sizes)?;
    let mut sockets = client::connect_many(&server.ws_url, &server.token, n, 64).await?;
    let warm = council("Warm-up: what is a benchmark?");
    client::drive(&mut sockets[0], &warm, false, RUN_LIMIT).await?;
    let rss_before = server.proc.rss_kib();
    let barrier = Arc::new(tokio::sync::Barrier::new(n + 1));
    let mut tasks = Vec::with_capacity(n);
    for (i, mut sock) in sockets.into_iter().enumerate() {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let req = council(&format!("Question {i}: how should a team of five pick a database?"));
            barrier.wait().await;
            let f = client::drive(&mut sock, &req, false, RUN_LIMIT).await;
            (f, req, sock)
        }));
    }
    let server_cpu = CpuMeter::start(server.proc.pid());
    let sim_cpu = CpuMeter::start(sim.proc.pid());
    let bench_cpu = CpuMeter::start(std::process::id());
    let machine = MachineMeter::start();
    barrier.wait().await;
    let load_started = Instant::now();
    // What the sim delivers while the server is loaded: one run's calls made straight to it.
    let probe_req = council("Probe: what does the sim deliver under load?");
    let probe = tokio::spawn({
        let client = sim.client.clone();
        let req = probe_req.clone();
        async move {
            ideal::measure(&client, &req, &uuid::Uuid::now_v7().to_string(), sizes.structured).await
        }
    });
    let mut finished: Vec<(Finished, Value)> = Vec::with_capacity(n);
    let mut errors = Vec::new();
    let mut keep = Vec::new();
    for t in tasks {
        match t.await {
            Ok((Ok(f), req, sock)) => {
                finished.push((f, req));
                keep.push(sock);
            }
            Ok((Err(e), _, _)) => errors.push(e.to_string()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let load_took = load_started.elapsed();
    let cpu = format!(
        "machine {}; server {}, busiest threads {}; sim-server {}; this client {}; CPU per run: {}",
        machine.summary(),
        server_cpu.summary(),
        server_cpu.busiest(4),
        sim_cpu.summary(),
        bench_cpu.summary(),
        per_run(&[("server", &server_cpu), ("sim-server", &sim_cpu), ("client", &bench_cpu)], n)
    );
    let peak = server.proc.peak_rss_kib();
    let probe = probe.await.map_err(|e| BenchError::Run(e.to_string()))??;
    drop(keep);
    // Ideals measured one at a time on the idle sim-server, for a sample of the same runs.
    let mut ideals = Vec::new();
    let step = (finished.len() / sizes.ideal_samples.max(1)).max(1);
    for (f, req) in finished.iter().step_by(step).take(sizes.ideal_samples) {
        ideals.push(ms(ideal::measure(&sim.client, req, &f.run_id, sizes.structured)
            .await?
            .critical_path));
    }
    let ideal = percentile(&ideals, 0.5);
    let floor = measure_floor(&sim, &finished, sizes.structured).await?;
    let completed = finished.iter().filter(|(f, _)| f.completed()).count();
    let stored = stored_runs(&server.db_path, MEMBERS.len() as i64)?;
    let walls: Vec<f64> = finished.iter().map(|(f, _)| ms(f.wall)).collect();
    let (p50, p95) = (percentile(&walls, 0.5), percentile(&walls, 0.95));
    let starts: Vec<f64> = finished.iter().map(|(f, _)| ms(f.started_after)).collect();
    let mut r = Report::scenario(2, &format!("{n} concurrent Council runs, {latency} ms"));
    r.row("runs completed", fraction(completed, n))
        .target("all", completed == n && stored.all_stages >= n);
    r.row("wall p50", fmt_ms(p50)).ideal(fmt_ms(ideal), p50 / ideal);
    r.row("wall p95", fmt_ms(p95))
        .ideal(fmt_ms(ideal), p95 / ideal)
        .target(&format!("< {CONCURRENT_P95_RATIO}x"), p95 / ideal < CONCURRENT_P95_RATIO);
    r.row("server peak RSS (VmHWM)", format!("{:.0} MiB", mib(peak)))
        .target(&format!("< {PEAK_RSS_MIB:.0} MB"), mib(peak) < PEAK_RSS_MIB);
    let floor_p95 = percentile(&floor.walls, 0.95);
    r.row("floor p95 (the same runs, no server)", fmt_ms(floor_p95))
        .ideal(fmt_ms(ideal), floor_p95 / ideal);
    r.row("p95 over the floor p95", format!("{:.2}x", p95 / floor_p95));
    r.note(format!(
        "wall max {}; `started` came back after p50 {}, p95 {}; all {n} done {:.2} s after the \
         starts were sent; a run made straight against the sim-server during the load took {} \
         (idle: {}); CPU during the load (2 cores): {cpu}; server RSS {:.0} MiB before the load; \
         {} of {} runs stored with every stage",
        fmt_ms(percentile(&walls, 1.0)),
        fmt_ms(percentile(&starts, 0.5)),
        fmt_ms(percentile(&starts, 0.95)),
        load_took.as_secs_f64(),
        fmt_ms(ms(probe.critical_path)),
        fmt_ms(ideal),
        mib(rss_before),
        stored.all_stages,
        stored.completed,
    ));
    r.note(format!(
        "floor: the same {} runs started at once straight against the sim-server by this \
         process, each driven by its mode's state machine through the server's HTTP client, \
         with no server, database or socket between (what no server could beat on this \
         machine with the sim-server on it): their wall times p50 {}, p95 {}, all done {:.2} s \
         after the start; CPU: sim-server {}, this client {}; CPU per run: {}",
        floor.walls.len(),
        fmt_ms(percentile(&floor.walls, 0.5)),
        fmt_ms(floor_p95),
        floor.took.as_secs_f64(),
        floor.sim_cpu,
        floor.client_cpu,
        floor.per_run,
    ));
    for e in errors.iter().take(3) {
        r.note(format!("run failed: {e}"));
    }
    Ok(r.finish())
}

/// The same runs made straight against the sim-server, all at once: the bound on scenario 2
/// that the machine and the sim-server set, whatever the server does.
struct Floor {
    walls: Vec<f64>,
    took: Duration,
    sim_cpu: String,
    client_cpu: String,
    per_run: String,
}

async fn measure_floor(
    sim: &SimServer,
    runs: &[(Finished, Value)],
    structured: bool,
) -> Result<Floor, BenchError> {
    let sim_cpu = CpuMeter::start(sim.proc.pid());
    let client_cpu = CpuMeter::start(std::process::id());
    let barrier = Arc::new(tokio::sync::Barrier::new(runs.len() + 1));
    let tasks: Vec<_> = runs
        .iter()
        .map(|(f, req)| {
            let (client, req, id, barrier) =
                (sim.client.clone(), req.clone(), f.run_id.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let t = Instant::now();
                ideal::measure(&client, &req, &id, structured).await.map(|_| t.elapsed())
            })
        })
        .collect();
    barrier.wait().await;
    let started = Instant::now();
    let mut walls = Vec::with_capacity(tasks.len());
    for t in tasks {
        let wall = t.await.map_err(|e| BenchError::Run(e.to_string()))??;
        walls.push(ms(wall));
    }
    let took = started.elapsed();
    let per_run = per_run(&[("sim-server", &sim_cpu), ("client", &client_cpu)], runs.len());
    Ok(Floor { walls, took, sim_cpu: sim_cpu.summary(), client_cpu: client_cpu.summary(), per_run })
}

/// One concurrency level of scenario 3.
struct Level {
    clients: usize,
    /// Completed runs per second in the window.
    rate: f64,
    wall50: f64,
    /// Cores used by the server's main thread (the Hub) in the window.
    hub: f64,
    /// Runs completed since the scenario began, at the window's end.
    so_far: u64,
    cpu: String,
}

/// Scenario 3: latency 0, closed-loop clients added until completed runs per second stop
/// growing; then every completed run's stages are counted in the database.
async fn throughput(sizes: Sizes) -> Result<Report, BenchError> {
    let ws = Workspace::new("throughput")?;
    let sim = ws.sim_server("latency_ms = 0")?;
    let server = ws.server(&sim, "", &sizes)?;
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let walls = Arc::new(Mutex::new(Vec::<(usize, f64)>::new()));
    let mut workers = Vec::new();
    let mut levels: Vec<Level> = Vec::new();
    let settle = Duration::from_secs(1);
    for &level in sizes.throughput_levels {
        let more = level.saturating_sub(workers.len());
        let sockets = client::connect_many(&server.ws_url, &server.token, more, 64).await?;
        for mut sock in sockets {
            let (stop, done, failed, errors, walls) =
                (stop.clone(), done.clone(), failed.clone(), errors.clone(), walls.clone());
            let worker = workers.len();
            workers.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let req = council(&format!("Worker {worker}, question {i}: tabs or spaces?"));
                    match client::drive(&mut sock, &req, false, RUN_LIMIT).await {
                        Ok(f) if f.completed() => {
                            done.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut w) = walls.lock() {
                                w.push((worker, ms(f.wall)));
                            }
                        }
                        Ok(f) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut e) = errors.lock() {
                                e.push(format!("run {} ended {}", f.run_id, f.terminal));
                            }
                        }
                        Err(e) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut errs) = errors.lock() {
                                errs.push(e.to_string());
                            }
                            break;
                        }
                    }
                }
            }));
        }
        tokio::time::sleep(settle).await;
        let server_cpu = CpuMeter::start(server.proc.pid());
        let sim_cpu = CpuMeter::start(sim.proc.pid());
        let bench_cpu = CpuMeter::start(std::process::id());
        let machine = MachineMeter::start();
        let (c0, t0) = (done.load(Ordering::Relaxed), Instant::now());
        let w0 = walls.lock().map(|w| w.len()).unwrap_or(0);
        tokio::time::sleep(sizes.throughput_window).await;
        let rate = (done.load(Ordering::Relaxed) - c0) as f64 / t0.elapsed().as_secs_f64();
        let wall50 = walls
            .lock()
            .map(|w| percentile(&w[w0.min(w.len())..].iter().map(|x| x.1).collect::<Vec<_>>(), 0.5))
            .unwrap_or(f64::NAN);
        let runs = (done.load(Ordering::Relaxed) - c0) as usize;
        let cpu = format!(
            "machine {}; server {}, busiest threads {}; sim-server {}; this client {}; CPU per \
             run: {}",
            machine.summary(),
            server_cpu.summary(),
            server_cpu.busiest(4),
            sim_cpu.summary(),
            bench_cpu.summary(),
            per_run(
                &[("server", &server_cpu), ("sim-server", &sim_cpu), ("client", &bench_cpu)],
                runs
            )
        );
        log::info!("  {level} clients: {rate:.0} runs/s (run p50 {}); CPU: {cpu}", fmt_ms(wall50));
        let hub = server_cpu.main_thread();
        let so_far = done.load(Ordering::Relaxed);
        levels.push(Level { clients: level, rate, wall50, hub, so_far, cpu });
        // Saturated once two levels in a row add less than 5 % to the best before them.
        let improved = |i: usize| {
            let before = levels[..i].iter().map(|l| l.rate).fold(0.0, f64::max);
            levels[i].rate >= before * 1.05
        };
        let k = levels.len();
        if failed.load(Ordering::Relaxed) > 0 || (k >= 3 && !improved(k - 1) && !improved(k - 2)) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.await;
    }
    let peak = server.proc.peak_rss_kib();
    let (done, failed) = (done.load(Ordering::Relaxed) as usize, failed.load(Ordering::Relaxed));
    let stored = stored_runs(&server.db_path, MEMBERS.len() as i64)?;
    let best = levels.iter().max_by(|a, b| a.rate.total_cmp(&b.rate));
    let (best_level, best_rate, best_wall, best_cpu) =
        best.map_or((0, 0.0, f64::NAN, ""), |b| (b.clients, b.rate, b.wall50, b.cpu.as_str()));
    let mut r = Report::scenario(3, "Council runs at latency 0, clients added until saturated");
    r.row("completed runs/s", format!("{best_rate:.0} ({best_level} clients)"))
        .target(&format!(">= {RUNS_PER_SECOND:.0}/s"), best_rate >= RUNS_PER_SECOND);
    let started = done + failed as usize;
    r.row("runs completed", fraction(done, started)).target("all", failed == 0);
    r.row("stored with every stage", fraction(stored.all_stages, done))
        .target("all", stored.all_stages == done && stored.completed == done);
    r.row("server peak RSS (VmHWM)", format!("{:.0} MiB", mib(peak)));
    let per_level: Vec<String> = levels
        .iter()
        .map(|l| {
            format!(
                "{} clients {:.0}/s (run p50 {}, server main thread {:.2} cores, {} runs done)",
                l.clients,
                l.rate,
                fmt_ms(l.wall50),
                l.hub,
                l.so_far
            )
        })
        .collect();
    r.note(format!(
        "per level (each measured {:.0} s after {:.0} s settling): {}; at the best level runs took \
         {} each; CPU there (2 cores): {best_cpu}; {} stage rows stored for {} completed runs",
        sizes.throughput_window.as_secs_f64(),
        settle.as_secs_f64(),
        per_level.join("; "),
        fmt_ms(best_wall),
        stored.rows,
        stored.completed,
    ));
    if let Ok(errs) = errors.lock() {
        for e in errs.iter().take(3) {
            r.note(format!("run failed: {e}"));
        }
    }
    Ok(r.finish())
}

/// What one watcher saw: when it got its first message after `watch`, and each durable event.
struct Watched {
    first: Option<Instant>,
    events: Vec<(i64, Instant)>,
    /// Messages received, `token` events among them.
    messages: usize,
    tokens: usize,
}

/// Watches `run` on `sock` until its terminal event; answers what it saw and the socket, left
/// open (closing thousands of sockets while the others still read would weigh on the figures).
async fn watch_one(mut sock: Socket, run: String, limit: Duration) -> (Watched, Socket) {
    let mut seen = Watched { first: None, events: Vec::new(), messages: 0, tokens: 0 };
    let watch = json!({ "type": "watch", "run": run }).to_string();
    if sock.send(Message::text(watch)).await.is_err() {
        return (seen, sock);
    }
    // One timer for the whole watch, not one per message: ten thousand of these sockets
    // stand in for browsers on other machines, so they should take as little of this one's
    // CPU from the server as they can.
    let read = async {
        while let Some(Ok(msg)) = sock.next().await {
            let Message::Text(text) = msg else { continue };
            let now = Instant::now();
            seen.first.get_or_insert(now);
            seen.messages += 1;
            let Some(p) = peek_event(text.as_str()) else { continue };
            if p.event == "token" {
                seen.tokens += 1;
            }
            if p.run != run || p.event == "token" {
                continue;
            }
            seen.events.push((p.seq, now));
            if is_terminal(p.event) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(limit, read).await;
    (seen, sock)
}

/// Scenario 4: one run watched by many sockets; every durable event must reach every one, and
/// each arrives this long after it reached the first.
async fn watchers(sizes: Sizes) -> Result<Report, BenchError> {
    let n = sizes.watchers;
    // The members answer slowly enough for every watcher to subscribe during stage 1, so the
    // events after it are live for all of them (the ones before it are replayed).
    let hold = Duration::from_millis((n as u64 * 3 / 2).max(3000));
    let members = ["sim/w1", "sim/w2", "sim/w3", "sim/w4"];
    let mut sim_toml = format!("latency_ms = {}\n", sizes.latency.as_millis());
    for m in members {
        sim_toml.push_str(&format!("[sim.models.\"{m}\"]\nlatency_ms = {}\n", hold.as_millis()));
    }
    let ws = Workspace::new("watchers")?;
    let sim = ws.sim_server(&sim_toml)?;
    let server = ws.server(&sim, "", &sizes)?;
    let t = Instant::now();
    let sockets = client::connect_many(&server.ws_url, &server.token, n, 128).await?;
    let connect_took = t.elapsed();
    let rest = Rest::new(&server.base, &server.token)?;
    let request = json!({ "mode": "council", "question": "What should ten thousand people watch?",
                          "councilModels": members, "chairmanModel": CHAIRMAN });
    let started = rest.post("/api/deliberations", &request).await?;
    let run = started["runId"].as_str().unwrap_or_default().to_string();
    let watch_sent = Instant::now();
    let server_cpu = CpuMeter::start(server.proc.pid());
    let bench_cpu = CpuMeter::start(std::process::id());
    let machine = MachineMeter::start();
    let limit = hold * 2 + RUN_LIMIT;
    let tasks: Vec<_> =
        sockets.into_iter().map(|s| tokio::spawn(watch_one(s, run.clone(), limit))).collect();
    let mut seen = Vec::with_capacity(n);
    let mut open = Vec::with_capacity(n);
    for t in tasks {
        let (w, sock) = t.await.map_err(|e| BenchError::Run(e.to_string()))?;
        seen.push(w);
        open.push(sock);
    }
    let messages: usize = seen.iter().map(|w| w.messages).sum();
    let tokens: usize = seen.iter().map(|w| w.tokens).sum();
    let per_message = |m: &CpuMeter| ms(m.used()) * 1000.0 / messages.max(1) as f64;
    let cpu = format!(
        "machine {}; server {}, busiest threads {}; this client {}; {messages} messages sent to \
         the watchers \
         ({tokens} of them `token` events), CPU per message: server {:.1} µs, client {:.1} µs",
        machine.summary(),
        server_cpu.summary(),
        server_cpu.busiest(4),
        bench_cpu.summary(),
        per_message(&server_cpu),
        per_message(&bench_cpu),
    );
    let peak = server.proc.peak_rss_kib();
    drop(open);
    let status = rest.get(&format!("/api/deliberations/{run}")).await?;
    let truth = stored_seqs(&server.db_path, &run)?;
    let complete = seen
        .iter()
        .filter(|w| {
            let got: std::collections::HashSet<i64> = w.events.iter().map(|e| e.0).collect();
            truth.iter().all(|s| got.contains(s))
        })
        .count();
    // Every watcher is subscribed once it has its first message (the replay): events that
    // first arrived anywhere after that were live for all.
    let all_subscribed = seen.iter().filter_map(|w| w.first).max();
    let mut by_seq: HashMap<i64, Vec<Instant>> = HashMap::new();
    for w in &seen {
        for (seq, at) in &w.events {
            by_seq.entry(*seq).or_default().push(*at);
        }
    }
    let mut delays = Vec::new();
    let mut live = 0;
    let mut worst: Vec<(f64, i64)> = Vec::new();
    for (seq, times) in &by_seq {
        let first = times.iter().min().copied();
        if let (Some(first), Some(sub)) = (first, all_subscribed) {
            if first > sub {
                live += 1;
                let d: Vec<f64> = times.iter().map(|t| ms(t.duration_since(first))).collect();
                worst.push((percentile(&d, 0.99), *seq));
                delays.extend(d);
            }
        }
    }
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let events = stored_events(&server.db_path, &run)?;
    let worst: Vec<String> = worst
        .iter()
        .take(3)
        .map(|(p99, seq)| {
            let (name, bytes) = events.get(seq).cloned().unwrap_or_default();
            format!("seq {seq} {name} ({bytes} B of data): p99 {}", fmt_ms(*p99))
        })
        .collect();
    let p99 = percentile(&delays, 0.99);
    let mut r = Report::scenario(4, &format!("1 Council run watched by {n} WebSocket clients"));
    r.row("run status", status["status"].as_str().unwrap_or("?").to_string())
        .target("completed", status["status"] == "completed");
    r.row("clients with every stage event", fraction(complete, n)).target("all", complete == n);
    r.row("delivery p50 after the first client", fmt_ms(percentile(&delays, 0.5)));
    r.row("delivery p99 after the first client", fmt_ms(p99))
        .target(&format!("< {DELIVERY_P99_MS:.0} ms"), live > 0 && p99 < DELIVERY_P99_MS);
    r.row("server peak RSS (VmHWM)", format!("{:.0} MiB", mib(peak)));
    r.note(format!(
        "{} durable events stored (every event but `token`); delivery measured on the {live} that \
         went out after all {n} were subscribed (max {}); connecting took {:.1} s, subscribing \
         {:.1} s (stage 1 held for {:.0} s so that they could); open-file limit {}; slowest \
         events: {}; CPU from the watches to the end (2 cores): {cpu}",
        truth.len(),
        fmt_ms(percentile(&delays, 1.0)),
        connect_took.as_secs_f64(),
        all_subscribed.map_or(f64::NAN, |s| s.duration_since(watch_sent).as_secs_f64()),
        hold.as_secs_f64(),
        super::harness::raise_fd_limit(),
        worst.join("; "),
    ));
    Ok(r.finish())
}

/// One mode's request in scenario 5, and the latency drawn for each of its models.
struct ModeCase {
    mode: &'static str,
    request: Value,
}

/// Sets `value` at a dotted path (`models.skeptic`) of an object, making objects on the way.
fn set_path(target: &mut Value, path: &str, value: Value) {
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(map) = target else { return };
    match path.split_once('.') {
        None => {
            map.insert(path.to_string(), value);
        }
        Some((key, rest)) => set_path(map.entry(key).or_insert(Value::Null), rest, value),
    }
}

/// Each registered mode's example request, with models of its own for every role the request
/// names (a panel of four, or as near as the mode allows), and the sim configuration giving
/// each model a latency drawn from a log-normal (fixed seed): frontier models around `median`,
/// Clarity's fast models (its default role models are fast ones) around half of it.
fn mode_cases(median: Duration) -> (Vec<ModeCase>, String, Vec<(String, u64)>) {
    let m = |mode: &str, role: &str| format!("sim/{mode}-{role}");
    let mut cases = Vec::new();
    for kind in crate::modes::ModeKind::all() {
        let spec = kind.spec();
        let schema = crate::modes::registry::config_schema(kind);
        let mut request = (spec.example)();
        let mut config = request.get("modeConfig").cloned().unwrap_or_else(|| json!({}));
        for role in spec.roles {
            let Some(field) = role.field else { continue };
            let value = if role.panel {
                let limits = schema.pointer(&format!("/properties/{field}"));
                let min = limits.and_then(|l| l["minItems"].as_u64()).unwrap_or(1);
                let max = limits.and_then(|l| l["maxItems"].as_u64()).unwrap_or(4);
                let n = 4u64.clamp(min, max.max(min));
                json!((1..=n).map(|i| m(spec.id, &i.to_string())).collect::<Vec<_>>())
            } else {
                json!(m(spec.id, role.id))
            };
            set_path(&mut config, field, value);
        }
        request["modeConfig"] = config;
        cases.push(ModeCase { mode: spec.id, request });
    }
    let mut models: Vec<String> = Vec::new();
    for c in &cases {
        collect_models(&c.request, &mut models);
    }
    let mut draws = Draws::new(LATENCY_SEED);
    let median = ms(median);
    let mut toml = String::from("latency_ms = 1000\n");
    let mut drawn = Vec::new();
    for model in models {
        let center = if model.starts_with("sim/clarity-") { median / 2.0 } else { median };
        let latency = draws.log_normal(center, LATENCY_SIGMA).round().max(1.0) as u64;
        toml.push_str(&format!("[sim.models.\"{model}\"]\nlatency_ms = {latency}\n"));
        drawn.push((model, latency));
    }
    (cases, toml, drawn)
}

/// Every `sim/…` string in a request, in order, once each.
fn collect_models(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.starts_with("sim/") && !out.contains(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_models(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_models(i, out)),
        _ => {}
    }
}

/// Scenario 5: each mode once, all at the same time, with realistic latencies.
async fn modes(sizes: Sizes) -> Result<Report, BenchError> {
    let (cases, sim_toml, drawn) = mode_cases(sizes.mode_latency_median);
    let ws = Workspace::new("modes")?;
    let sim = ws.sim_server(&sim_toml)?;
    let server = ws.server(&sim, "", &sizes)?;
    let sockets = client::connect_many(&server.ws_url, &server.token, cases.len(), 8).await?;
    let tasks: Vec<_> = cases
        .iter()
        .zip(sockets)
        .map(|(c, mut sock)| {
            let req = c.request.clone();
            tokio::spawn(async move { client::drive(&mut sock, &req, false, RUN_LIMIT).await })
        })
        .collect();
    let mut finished = Vec::new();
    for t in tasks {
        finished.push(t.await.map_err(|e| BenchError::Run(e.to_string()))??);
    }
    // Their ideals, all at once too: the same runs straight against the idle sim-server.
    let ideals: Vec<_> = cases
        .iter()
        .zip(&finished)
        .map(|(c, f)| {
            let (client, req, id) = (sim.client.clone(), c.request.clone(), f.run_id.clone());
            tokio::spawn(async move { ideal::measure(&client, &req, &id, sizes.structured).await })
        })
        .collect();
    let mut measured = Vec::new();
    for t in ideals {
        measured.push(t.await.map_err(|e| BenchError::Run(e.to_string()))??);
    }
    let median = ms(sizes.mode_latency_median);
    let mut r = Report::scenario(
        5,
        &format!(
            "each mode once, all at once, log-normal latencies (median {:.1} s, fast {:.1} s)",
            median / 1000.0,
            median / 2000.0
        ),
    );
    let budget = ms(super::CLARITY_BUDGET);
    for ((c, f), id) in cases.iter().zip(&finished).zip(&measured) {
        let (wall, ideal) = (ms(f.wall), ms(id.critical_path));
        r.row(&format!("{} wall", c.mode), fmt_ms(wall))
            .ideal(fmt_ms(ideal), wall / ideal)
            .target("completes", f.completed());
        if c.mode == "clarity" {
            r.row(
                "clarity wall vs its 15 s budget",
                format!("{:.0}% of the budget", wall * 100.0 / budget),
            )
            .target("<= 15 s", wall <= budget);
        }
    }
    let calls: Vec<String> =
        cases.iter().zip(&measured).map(|(c, id)| format!("{} {}", c.mode, id.calls)).collect();
    // What a run waited before the server said `started`: the runs are started at once, in
    // this order, so a short run started late shows it in its ratio.
    let starts: Vec<String> = cases
        .iter()
        .zip(&finished)
        .map(|(c, f)| format!("{} {:.1} ms", c.mode, ms(f.started_after)))
        .collect();
    let latencies: Vec<String> =
        drawn.iter().map(|(m, l)| format!("{} {:.1} s", &m[4..], *l as f64 / 1000.0)).collect();
    r.note(format!(
        "latencies drawn (seed {LATENCY_SEED}, sigma {LATENCY_SIGMA}): {}; calls per run: {}",
        latencies.join(", "),
        calls.join(", ")
    ));
    r.note(format!("from sending start to started: {}", starts.join(", ")));
    // The same overhead is a larger ratio on a short run: Solo's one call is under a second,
    // and its ideal itself varies by a few percent between runs of this scenario.
    let over: Vec<String> = cases
        .iter()
        .zip(&finished)
        .zip(&measured)
        .map(|((c, f), id)| format!("{} {:.1} ms", c.mode, ms(f.wall) - ms(id.critical_path)))
        .collect();
    r.note(format!("wall over the ideal: {}", over.join(", ")));
    Ok(r.finish())
}

#[cfg(test)]
#[path = "scenarios_tests.rs"]
mod tests;
