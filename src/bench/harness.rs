//! The processes a scenario measures: `conclave sim-server` and `conclave serve`, started from
//! this very binary on ephemeral ports, with their configuration files and SQLite database in a
//! temporary directory that is removed afterwards; and what is read off them (their URLs, an
//! admin's API token, peak RSS). It starts and stops only its own children, by their ids, and
//! judges no figure.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{BenchError, Sizes};
use crate::providers::openai::OpenAiCompatible;
use crate::providers::Provider;

/// How long a child may take to print the line that says where it listens.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment that would change what a child does behind the benchmark's back.
const CLEARED_ENV: [&str; 7] = [
    "OPENROUTER_API_KEY",
    "OPENROUTER_BASE_URL",
    "CONCLAVE_CONFIG",
    "CONCLAVE_SIM_LATENCY_MS",
    "DATABASE_URL",
    "CONCLAVE_BIND",
    "CONCLAVE_SIM_BIND",
];

/// A temporary directory for one scenario's files, and the binary to start.
pub struct Workspace {
    dir: PathBuf,
    exe: PathBuf,
}

impl Workspace {
    pub fn new(label: &str) -> Result<Self, BenchError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let exe = std::env::current_exe().map_err(BenchError::io("cannot find this binary"))?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("conclave-bench-{}-{n}-{label}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(BenchError::io(format!("cannot create {}", dir.display())))?;
        Ok(Workspace { dir, exe })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, text: &str) -> Result<PathBuf, BenchError> {
        let path = self.path(name);
        std::fs::write(&path, text)
            .map_err(BenchError::io(format!("cannot write {}", path.display())))?;
        Ok(path)
    }

    /// `conclave --config <config> ...` with nothing inherited that would reroute it.
    fn conclave(&self, config: &Path) -> Command {
        self.wrapped(config, None)
    }

    /// The same, behind `wrapper` (a command and its arguments, split at spaces) when given:
    /// `CONCLAVE_BENCH_SERVER_WRAPPER="valgrind --tool=callgrind"` profiles the server.
    fn wrapped(&self, config: &Path, wrapper: Option<&str>) -> Command {
        let mut words = wrapper.unwrap_or_default().split_whitespace();
        let mut c = match words.next() {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(words).arg(&self.exe);
                c
            }
            None => Command::new(&self.exe),
        };
        for k in CLEARED_ENV {
            c.env_remove(k);
        }
        c.current_dir(&self.dir).arg("--config").arg(config);
        c
    }

    /// Starts a sim-server whose `[sim]` section is `sim_toml` (the body after the header).
    pub fn sim_server(&self, sim_toml: &str) -> Result<SimServer, BenchError> {
        let config = self.write("sim.toml", &format!("[sim]\n{sim_toml}"))?;
        let log = self.log_file("sim-server.log")?;
        let mut cmd = self.conclave(&config);
        cmd.args(["sim-server", "--bind", "127.0.0.1:0"]);
        let (proc, line) = Proc::spawn("sim-server", cmd, log)?;
        let url = url_in(&line)
            .ok_or_else(|| BenchError::Child(format!("sim-server printed no URL: {line:?}")))?;
        let client = Arc::new(OpenAiCompatible::new(&url, None));
        Ok(SimServer { proc, base_v1: url, client })
    }

    /// Starts `conclave serve` on a fresh SQLite file, routing `sim/` to `sim`, with the
    /// per-user limits raised for one user starting thousands of runs, `extra` top-level keys
    /// added; makes an admin first and keeps its API token.
    pub fn server(
        &self,
        sim: &SimServer,
        extra: &str,
        sizes: &Sizes,
    ) -> Result<Server, BenchError> {
        let db = self.path("bench.db");
        let structured = if sizes.structured { "json_schema" } else { "off" };
        let text = format!(
            "bind = \"127.0.0.1:0\"\ndatabase_url = \"sqlite://{}\"\n\
             max_runs_per_user = 10000\nmax_starts_per_minute = 100000\n{extra}\n\
             [[routes]]\nprefix = \"sim/\"\nbase_url = \"{}\"\nstrip_prefix = false\n\
             structured_output = \"{structured}\"\n",
            db.display(),
            sim.base_v1
        );
        let config = self.write("server.toml", &text)?;
        let out = self
            .conclave(&config)
            .args(["user", "add", "bench", "--admin"])
            .stdin(Stdio::null())
            .output()
            .map_err(BenchError::io("cannot run `conclave user add`"))?;
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || token.is_empty() {
            return Err(BenchError::Child(format!(
                "`conclave user add` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let log = self.log_file("server.log")?;
        let wrapper = std::env::var("CONCLAVE_BENCH_SERVER_WRAPPER").ok();
        let mut cmd = self.wrapped(&config, wrapper.as_deref());
        cmd.arg("serve");
        let (mut proc, line) = Proc::spawn("server", cmd, log)?;
        if wrapper.is_some() {
            proc.grace = Duration::from_secs(120);
        }
        let base = url_in(&line)
            .ok_or_else(|| BenchError::Child(format!("the server printed no URL: {line:?}")))?;
        let ws_url = format!("{}/ws", base.replacen("http://", "ws://", 1));
        Ok(Server { proc, base, ws_url, token, db_path: db, log_path: self.path("server.log") })
    }

    fn log_file(&self, name: &str) -> Result<std::fs::File, BenchError> {
        let path = self.path(name);
        std::fs::File::create(&path)
            .map_err(BenchError::io(format!("cannot create {}", path.display())))
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if std::env::var_os("CONCLAVE_BENCH_KEEP").is_some() {
            log::info!("kept {}", self.dir.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The first `http://…` word of a line, without a trailing punctuation mark.
fn url_in(line: &str) -> Option<String> {
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .map(|w| w.trim_end_matches([',', '.']).to_string())
}

/// A child process, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Proc {
    child: Child,
    name: &'static str,
    /// How long it gets to exit after SIGTERM when dropped (longer under a profiler, which
    /// writes its output at exit).
    grace: Duration,
}

impl Proc {
    /// Spawns `cmd` with stderr to `log`, and waits for its first line on stdout (where it
    /// says where it listens); the rest of stdout is drained on a thread.
    fn spawn(
        name: &'static str,
        mut cmd: Command,
        log: std::fs::File,
    ) -> Result<(Proc, String), BenchError> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(BenchError::io(format!("cannot start the {name}")))?;
        let stdout = child.stdout.take();
        let proc = Proc { child, name, grace: Duration::from_secs(5) };
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let _ = tx.send(line);
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
            });
        }
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) if !line.is_empty() => Ok((proc, line)),
            _ => Err(BenchError::Child(format!("the {name} did not start (see its log)"))),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `VmHWM` (peak resident set) of the process, in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        status_field(self.pid(), "VmHWM:")
    }

    /// `VmRSS` (resident set now), in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        status_field(self.pid(), "VmRSS:")
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signals our own child, by its id.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        log::warn!("the {} did not stop within {grace:?}; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(self.grace);
    }
}

/// Scheduler figures of a process so far, summed over its threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sched {
    /// Time on a CPU.
    pub cpu: Duration,
    /// Time runnable but waiting for a CPU (`/proc/…/schedstat`): how oversubscribed the
    /// machine's cores were for this process.
    pub waited: Duration,
    /// Of the process's CPU time, the part spent in the kernel (system time: socket reads and
    /// writes, mostly).
    pub kernel: Duration,
}

/// CPU time used so far by each thread of `pid`: (thread id, name, time), in thread-id order.
pub fn thread_cpu(pid: u32) -> Vec<(u32, String, Duration)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, String, Duration)> = dir
        .filter_map(|e| {
            let tid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let path = format!("/proc/{pid}/task/{tid}");
            let name = std::fs::read_to_string(format!("{path}/comm")).ok()?;
            let cpu = cpu_of_stat(&std::fs::read_to_string(format!("{path}/stat")).ok()?)?;
            Some((tid, name.trim().to_string(), cpu))
        })
        .collect();
    out.sort_by_key(|t| t.0);
    out
}

/// [`Sched`] of `pid`, from the `schedstat` of each of its threads (threads that ended are not
/// counted).
pub fn sched(pid: u32) -> Sched {
    let mut total = Sched::default();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return total };
    for e in dir.flatten() {
        let path = e.path().join("schedstat");
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let f: Vec<u64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if let [cpu, waited, ..] = f[..] {
            total.cpu += Duration::from_nanos(cpu);
            total.waited += Duration::from_nanos(waited);
        }
    }
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        total.kernel = stat_times(&stat).map(|t| t.1).unwrap_or_default();
    }
    total
}

/// The machine's CPU time so far, from `/proc/stat`: (busy, idle, stolen by the hypervisor),
/// summed over its cores.
pub fn machine_cpu() -> Option<(Duration, Duration, Duration)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let field = |i: usize| f.get(i).copied().unwrap_or(0);
    let busy = field(0) + field(1) + field(2) + field(5) + field(6);
    let idle = field(3) + field(4);
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let secs = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz.max(1) as f64);
    Some((secs(busy), secs(idle), secs(field(7))))
}

/// User + system time from a `/proc/…/stat` line.
fn cpu_of_stat(stat: &str) -> Option<Duration> {
    stat_times(stat).map(|(user, kernel)| user + kernel)
}

/// (user, system) time from a `/proc/…/stat` line.
fn stat_times(stat: &str) -> Option<(Duration, Duration)> {
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (user, kernel) = (f.get(11)?.parse::<u64>().ok()?, f.get(12)?.parse::<u64>().ok()?);
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let secs = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz as f64);
    (hz > 0).then(|| (secs(user), secs(kernel)))
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// A running `conclave sim-server`.
pub struct SimServer {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_v1: String,
    /// The HTTP client the ideal's replays share, as the server shares its own: a replay
    /// reuses pooled connections, and none pays for building a client.
    pub client: Arc<dyn Provider>,
}

/// A running `conclave serve`.
pub struct Server {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub ws_url: String,
    /// The API token of the admin `bench`.
    pub token: String,
    pub db_path: PathBuf,
    pub log_path: PathBuf,
}

/// Raises this process's soft limit on open files to its hard limit (children inherit it):
/// thousands of sockets need thousands of descriptors. Answers the limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        if rl.rlim_cur < rl.rlim_max {
            let raised = libc::rlimit { rlim_cur: rl.rlim_max, rlim_max: rl.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                rl = raised;
            }
        }
    }
    rl.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::url_in;

    #[test]
    fn urls_are_read_off_the_ready_lines() {
        assert_eq!(
            url_in("sim models served at http://127.0.0.1:4242/v1 (OpenAI-compatible)\n"),
            Some("http://127.0.0.1:4242/v1".into())
        );
        assert_eq!(
            url_in("Conclave listening on http://127.0.0.1:9 — database sqlite://x, sim"),
            Some("http://127.0.0.1:9".into())
        );
        assert_eq!(url_in("nothing here"), None);
    }
}
