//! What the scenarios measure with: CPU meters (a process's own, the machine's) and reads of
//! what the benchmark's server stored in its SQLite file.

use super::*;

pub(super) fn mib(kib: Option<u64>) -> f64 {
    kib.map_or(f64::NAN, |k| k as f64 / 1024.0)
}

/// CPU a process uses from `start` on, in cores (1.0: one core all the time), whole and per
/// thread, and the time its threads waited for a core: the evidence of what bounds a figure.
pub(super) struct CpuMeter {
    pub(super) pid: u32,
    pub(super) sched: Sched,
    pub(super) threads: Vec<(u32, String, Duration)>,
    pub(super) at: Instant,
}

impl CpuMeter {
    pub(super) fn start(pid: u32) -> Self {
        CpuMeter { pid, sched: sched(pid), threads: thread_cpu(pid), at: Instant::now() }
    }

    /// Cores busy on average since `start`, and threads waiting for a core on average.
    pub(super) fn cores(&self) -> (f64, f64) {
        let span = self.at.elapsed().as_secs_f64();
        let now = sched(self.pid);
        (
            now.cpu.saturating_sub(self.sched.cpu).as_secs_f64() / span,
            now.waited.saturating_sub(self.sched.waited).as_secs_f64() / span,
        )
    }

    /// CPU time used since `start`.
    pub(super) fn used(&self) -> Duration {
        sched(self.pid).cpu.saturating_sub(self.sched.cpu)
    }

    /// Cores used since `start` by the process's first thread, where actix's System arbiter
    /// (and with it the engine's Hub) runs.
    pub(super) fn main_thread(&self) -> f64 {
        let was = self.threads.iter().find(|t| t.0 == self.pid).map(|t| t.2).unwrap_or_default();
        let now = thread_cpu(self.pid).into_iter().find(|t| t.0 == self.pid).map(|t| t.2);
        now.unwrap_or_default().saturating_sub(was).as_secs_f64() / self.at.elapsed().as_secs_f64()
    }

    /// "1.21 cores, 35 % in the kernel (runnable but waiting for a core: 0.40)".
    pub(super) fn summary(&self) -> String {
        let (cores, waiting) = self.cores();
        let now = sched(self.pid);
        let used = now.cpu.saturating_sub(self.sched.cpu).as_secs_f64();
        let kernel = now.kernel.saturating_sub(self.sched.kernel).as_secs_f64();
        format!(
            "{cores:.2} cores, {:.0} % in the kernel (runnable but waiting for a core: {waiting:.2})",
            (kernel * 100.0 / used).min(100.0)
        )
    }

    /// The busiest threads since `start`, named (`main` is the process's first thread, where
    /// actix's System arbiter runs; other threads are shown by their rank among the threads
    /// and their name), with the cores each used.
    pub(super) fn busiest(&self, n: usize) -> String {
        let span = self.at.elapsed().as_secs_f64();
        let before: HashMap<u32, Duration> =
            self.threads.iter().map(|(tid, _, cpu)| (*tid, *cpu)).collect();
        let mut used: Vec<(String, f64)> = thread_cpu(self.pid)
            .into_iter()
            .enumerate()
            .map(|(rank, (tid, name, cpu))| {
                let was = before.get(&tid).copied().unwrap_or_default();
                let label =
                    if tid == self.pid { "main".to_string() } else { format!("#{rank} {name}") };
                (label, cpu.saturating_sub(was).as_secs_f64() / span)
            })
            .collect();
        used.sort_by(|a, b| b.1.total_cmp(&a.1));
        used.iter().take(n).map(|(l, c)| format!("{l} {c:.2}")).collect::<Vec<_>>().join(", ")
    }
}

/// The whole machine's cores, busy and stolen, from `start` on: whether a figure was bounded by
/// the CPU at all, and by whom (every process on the machine counts, the benchmark's and others').
pub(super) struct MachineMeter {
    pub(super) at: Option<(Duration, Duration, Duration)>,
}

impl MachineMeter {
    pub(super) fn start() -> Self {
        MachineMeter { at: machine_cpu() }
    }

    /// "1.97 of 2 cores busy (0.01 stolen)".
    pub(super) fn summary(&self) -> String {
        let (Some(a), Some(b)) = (self.at, machine_cpu()) else { return "?".into() };
        let (busy, idle, stolen) = (b.0 - a.0, b.1 - a.1, b.2 - a.2);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let total = (busy + idle + stolen).as_secs_f64().max(1e-9);
        format!(
            "{:.2} of {cores:.0} cores busy ({:.2} stolen by the hypervisor)",
            busy.as_secs_f64() / total * cores,
            stolen.as_secs_f64() / total * cores
        )
    }
}

/// "server 5.9 ms + sim-server 2.3 ms + client 0.3 ms = 8.5 ms": CPU per run of each
/// process, the figure that bounds throughput on a machine with a fixed number of cores.
pub(super) fn per_run(meters: &[(&str, &CpuMeter)], runs: usize) -> String {
    let each: Vec<(String, f64)> = meters
        .iter()
        .map(|(name, m)| (name.to_string(), ms(m.used()) / runs.max(1) as f64))
        .collect();
    let total: f64 = each.iter().map(|e| e.1).sum();
    let parts: Vec<String> = each.iter().map(|(n, v)| format!("{n} {v:.2} ms")).collect();
    format!("{} = {total:.2} ms", parts.join(" + "))
}

/// What the database holds of the benchmark's Council runs.
pub(super) struct Stored {
    /// Runs whose status is `completed`.
    pub(super) completed: usize,
    /// Completed runs with every stage row: one `stage1` and one `stage2` per member, a
    /// `stage3`.
    pub(super) all_stages: usize,
    /// Stage rows of completed runs (label maps included).
    pub(super) rows: usize,
}

#[derive(diesel::QueryableByName)]
pub(super) struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(super) n: i64,
}

pub(super) fn open_db(path: &Path) -> Result<diesel::sqlite::SqliteConnection, BenchError> {
    use diesel::connection::SimpleConnection;
    use diesel::Connection;
    let path = path.to_str().ok_or_else(|| BenchError::Db("path is not UTF-8".into()))?;
    let mut conn = diesel::sqlite::SqliteConnection::establish(path)
        .map_err(|e| BenchError::Db(e.to_string()))?;
    conn.batch_execute("PRAGMA busy_timeout = 10000;")
        .map_err(|e| BenchError::Db(e.to_string()))?;
    Ok(conn)
}

/// Reads straight from the SQLite file what the server stored (it is still running: WAL lets
/// a reader in beside its writer).
pub(super) fn stored_runs(path: &Path, members: i64) -> Result<Stored, BenchError> {
    use diesel::RunQueryDsl;
    let mut conn = open_db(path)?;
    let mut count = |sql: &str| -> Result<usize, BenchError> {
        let c: Count = diesel::sql_query(sql)
            .get_result(&mut conn)
            .map_err(|e| BenchError::Db(e.to_string()))?;
        Ok(c.n as usize)
    };
    Ok(Stored {
        completed: count("SELECT COUNT(*) AS n FROM runs WHERE status = 'completed'")?,
        all_stages: count(&format!(
            "SELECT COUNT(*) AS n FROM (SELECT r.id FROM runs r \
             JOIN deliberation_stages s ON s.message_id = r.message_id \
             WHERE r.status = 'completed' GROUP BY r.id \
             HAVING SUM(s.stage_type = 'stage1') = {members} \
             AND SUM(s.stage_type = 'stage2') = {members} AND SUM(s.stage_type = 'stage3') = 1)"
        ))?,
        rows: count(
            "SELECT COUNT(*) AS n FROM deliberation_stages s \
             JOIN runs r ON s.message_id = r.message_id WHERE r.status = 'completed'",
        )?,
    })
}

/// The sequence numbers of a run's stored (durable) events.
pub(super) fn stored_seqs(path: &Path, run_id: &str) -> Result<Vec<i64>, BenchError> {
    use diesel::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Seq {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        seq: i64,
    }
    let mut conn = open_db(path)?;
    let rows: Vec<Seq> =
        diesel::sql_query("SELECT seq FROM run_events WHERE run_id = ? ORDER BY seq")
            .bind::<diesel::sql_types::Text, _>(run_id)
            .load(&mut conn)
            .map_err(|e| BenchError::Db(e.to_string()))?;
    Ok(rows.into_iter().map(|s| s.seq).collect())
}

/// Each stored event of a run by seq: its name and the size of its data.
pub(super) fn stored_events(
    path: &Path,
    run_id: &str,
) -> Result<HashMap<i64, (String, usize)>, BenchError> {
    use diesel::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Ev {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        seq: i64,
        #[diesel(sql_type = diesel::sql_types::Text)]
        event: String,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        bytes: i64,
    }
    let mut conn = open_db(path)?;
    let rows: Vec<Ev> = diesel::sql_query(
        "SELECT seq, event, length(data) AS bytes FROM run_events WHERE run_id = ?",
    )
    .bind::<diesel::sql_types::Text, _>(run_id)
    .load(&mut conn)
    .map_err(|e| BenchError::Db(e.to_string()))?;
    Ok(rows.into_iter().map(|e| (e.seq, (e.event, e.bytes as usize))).collect())
}
