//! TLS to Redis (`rediss://`) and to PostgreSQL (`sslmode=require`, `verify-full`), each
//! against a private server this test starts with a certificate it makes: a throwaway
//! certificate authority and a server certificate for 127.0.0.1, made with the `openssl`
//! command. Skipped with a printed reason when `openssl`, `redis-server` or PostgreSQL's
//! `initdb` is missing (`CONCLAVE_REQUIRE_REDIS` / `CONCLAVE_REQUIRE_PG` turn the skip into a
//! failure).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::helpers::*;

/// Says why the test is skipped, or fails when `require` names a variable that is set.
fn skip(require: &str, reason: String) {
    if std::env::var(require).is_ok() {
        panic!("{require} is set but {reason}");
    }
    eprintln!("skipping TLS test: {reason}");
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// A port nothing listens on now.
fn spare_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `ca.pem` (a throwaway authority) and `server.pem` / `server.key` (127.0.0.1 and
/// localhost, signed by it) in `dir`.
fn certificates(dir: &Path) -> Result<(), String> {
    let openssl = || {
        let mut c = Command::new("openssl");
        c.current_dir(dir);
        c
    };
    let ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
               extendedKeyUsage=serverAuth\n";
    std::fs::write(dir.join("server.ext"), ext).map_err(|e| e.to_string())?;
    run(openssl().args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]).args([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=conclave test CA",
    ]))?;
    run(openssl().args(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key"]).args([
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]))?;
    run(openssl().args(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey"]).args([
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        "server.pem",
        "-extfile",
        "server.ext",
    ]))
}

/// A child process killed when the test ends, whether it passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_server_reaches_redis_over_tls_and_checks_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    if let Err(e) = certificates(dir.path()) {
        return skip("CONCLAVE_REQUIRE_REDIS", format!("cannot make certificates: {e}"));
    }
    let port = spare_port().to_string();
    let redis = Command::new("redis-server")
        .current_dir(dir.path())
        .args(["--port", "0", "--tls-port", &port, "--bind", "127.0.0.1", "--save", ""])
        .args(["--appendonly", "no", "--tls-auth-clients", "no", "--tls-cert-file", "server.pem"])
        .args(["--tls-key-file", "server.key", "--tls-ca-cert-file", "ca.pem"])
        .stdout(Stdio::null())
        .spawn();
    let _redis = match redis {
        Ok(child) => Killed(child),
        Err(e) => return skip("CONCLAVE_REQUIRE_REDIS", format!("cannot start redis-server: {e}")),
    };
    // Until it listens (a bounded wait: it fails the test rather than hang).
    let listening = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok()
    });
    assert!(listening, "redis-server did not listen on {port}");
    let url = format!("rediss://127.0.0.1:{port}/0");
    let ca = dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    let sqlite = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    // Trusting the test's authority (SSL_CERT_FILE), the server connects and subscribes.
    let said = crate::secrets::printed(
        &["serve", "--bind", "127.0.0.1:0"],
        &sqlite("a.db"),
        Some(&url),
        &[("SSL_CERT_FILE", ca)],
        "connected to Redis at",
    );
    assert!(said.contains(&format!("connected to Redis at {url}")), "{said}");
    // Trusting only the system's authorities, it refuses the certificate.
    let said = crate::secrets::printed(
        &["serve", "--bind", "127.0.0.1:0"],
        &sqlite("b.db"),
        Some(&url),
        &[("SSL_CERT_FILE", "/nonexistent/ca.pem")],
        "Redis at",
    );
    assert!(said.contains(&format!("cannot reach Redis at {url}")), "{said}");
    assert!(!said.contains("connected to Redis"), "{said}");
}

/// PostgreSQL's programs (`initdb`, `pg_ctl`), from the newest version installed.
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// Runs a PostgreSQL program as the `postgres` user when this is root (initdb refuses root).
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false)
}

/// A private PostgreSQL cluster that accepts only TLS connections (`hostssl` alone in its
/// pg_hba.conf), stopped when dropped. Nothing in it needs to last: no fsync, so it costs the
/// other tests running beside it as little as it can.
struct TlsPostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

fn tls_postgres(dir: &Path) -> Result<TlsPostgres, String> {
    let bin = postgres_bin().ok_or("no initdb under /usr/lib/postgresql")?;
    certificates(dir)?;
    // The postgres user must reach and own the cluster (and its key).
    let data = dir.join("data");
    run(Command::new("chmod").arg("755").arg(dir))?;
    std::fs::create_dir(&data).map_err(|e| e.to_string())?;
    if is_root() {
        run(Command::new("chown").arg("postgres").arg(&data))?;
    }
    run(as_postgres(&bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["--no-sync", "-A", "trust", "-U"])
        .arg("postgres"))?;
    for file in ["server.pem", "server.key"] {
        std::fs::copy(dir.join(file), data.join(file)).map_err(|e| e.to_string())?;
    }
    run(Command::new("chmod").arg("600").arg(data.join("server.key")))?;
    if is_root() {
        run(Command::new("chown").arg("-R").arg("postgres").arg(&data))?;
    }
    std::fs::write(data.join("pg_hba.conf"), "hostssl all all 127.0.0.1/32 trust\n")
        .map_err(|e| e.to_string())?;
    let port = spare_port();
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c ssl=on \
         -c ssl_cert_file=server.pem -c ssl_key_file=server.key -c fsync=off",
        data.display()
    );
    let cluster = TlsPostgres { bin: bin.clone(), data: data.clone(), port };
    run(as_postgres(&bin.join("pg_ctl"))
        .arg("-D")
        .arg(&data)
        .args(["-o", &options, "-l"])
        .arg(data.join("log"))
        .args(["-w", "start"]))?;
    Ok(cluster)
}

#[actix_web::test]
async fn the_store_reaches_postgresql_over_tls_and_verifies_it() {
    let dir = tempfile::tempdir().unwrap();
    let pg = match tls_postgres(dir.path()) {
        Ok(pg) => pg,
        Err(e) => return skip("CONCLAVE_REQUIRE_PG", format!("no TLS PostgreSQL: {e}")),
    };
    let ca = dir.path().join("ca.pem");
    let base = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port);
    let migrate = |query: &str| {
        let out = crate::cli::conclave()
            .current_dir(dir.path())
            .arg("migrate")
            .env("DATABASE_URL", format!("{base}?{query}"))
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    };
    // Without TLS the server refuses (its pg_hba.conf has hostssl alone).
    let (ok, said) = migrate("sslmode=disable");
    assert!(!ok && said.contains("no encryption"), "{said}");
    // With TLS, encrypted only, or verified against the test's authority.
    let (ok, said) = migrate("sslmode=require");
    assert!(ok, "{said}");
    let verified = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let (ok, said) = migrate(&verified);
    assert!(ok, "{said}");
    // verify-full checks the certificate: the system's authorities do not know this one.
    let (ok, said) = migrate("sslmode=verify-full&sslrootcert=system");
    assert!(!ok && said.contains("certificate verify failed"), "{said}");
    // A server on it: a run completes, written and read back over TLS.
    let app = spawn_with(Options {
        database_url: Some(format!("{base}?{verified}")),
        ..Options::default()
    })
    .await;
    let started = app.start(council_request("Over TLS?")).await;
    let done = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    app.stop().await;
}
