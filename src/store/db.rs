//! Connections: the backend is chosen by the database URL's scheme, that backend's own
//! migrations run at start, and SQLite gets its pragmas on every pooled connection.

use diesel::connection::SimpleConnection;
use diesel::pg::PgConnection;
use diesel::r2d2::{CustomizeConnection, Pool};
use diesel::sqlite::SqliteConnection;
use diesel::Connection;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};

use super::StoreError;
use crate::secrets::{redact_url, redact_url_in};

/// SQLite's schema: portable types (JSON as TEXT, times as BIGINT milliseconds). These are the
/// migrations both backends once shared, unchanged, so existing SQLite files stay current.
pub const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/sqlite");

/// PostgreSQL's schema: the same tables with `jsonb` and `timestamptz` columns. Its first four
/// versions are those of the shared migrations; the fifth converts a database they made.
pub const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// A connection to either backend. PostgreSQL is listed first because `establish` tries the
/// variants in order and SQLite accepts any string as a path; we pick the variant from the URL
/// scheme ourselves anyway (see [`Backend::from_url`]) so errors name the real cause.
#[derive(diesel::MultiConnection)]
pub enum AnyConnection {
    Postgresql(PgConnection),
    Sqlite(SqliteConnection),
}

/// How long a request waits for a pooled connection before it is told the database is
/// unavailable (503): a database that refuses or does not answer is known in seconds, not in
/// r2d2's default half-minute.
pub const POOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

/// Makes the pool's connections with the backend the URL names, so a failure says what libpq
/// or SQLite said (`Connection refused`), not diesel's "Invalid connection url for
/// multiconnection" (its multi-connection tries every backend and keeps none of their errors).
pub struct Manager {
    backend: Backend,
}

impl diesel::r2d2::ManageConnection for Manager {
    type Connection = AnyConnection;
    type Error = diesel::r2d2::Error;

    fn connect(&self) -> Result<AnyConnection, Self::Error> {
        match &self.backend {
            Backend::Postgres(url) => PgConnection::establish(url).map(AnyConnection::Postgresql),
            Backend::Sqlite(path) => SqliteConnection::establish(path).map(AnyConnection::Sqlite),
        }
        .map_err(diesel::r2d2::Error::ConnectionError)
    }

    fn is_valid(&self, conn: &mut AnyConnection) -> Result<(), Self::Error> {
        diesel::r2d2::R2D2Connection::ping(conn).map_err(diesel::r2d2::Error::QueryError)
    }

    fn has_broken(&self, conn: &mut AnyConnection) -> bool {
        std::thread::panicking() || diesel::r2d2::R2D2Connection::is_broken(conn)
    }
}

/// Logs the pool's failures to connect with the URL's password redacted (r2d2's own handler
/// logs them as they are, and libpq may quote pieces of a malformed URL).
struct LogRedacted {
    url: String,
}

impl std::fmt::Debug for LogRedacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogRedacted({})", redact_url(&self.url))
    }
}

impl diesel::r2d2::HandleError<diesel::r2d2::Error> for LogRedacted {
    fn handle_error(&self, error: diesel::r2d2::Error) {
        log::error!(
            "cannot connect to the database: {}",
            redact_url_in(&error.to_string(), &self.url)
        );
    }
}

/// The connection pool. A connection it cannot give (within [`POOL_TIMEOUT`]) is refused
/// with the cause, the URL's password redacted.
#[derive(Clone)]
pub struct DbPool {
    pool: Pool<Manager>,
    url: std::sync::Arc<str>,
}

pub type PooledConnection = diesel::r2d2::PooledConnection<Manager>;

impl DbPool {
    pub fn get(&self) -> Result<PooledConnection, StoreError> {
        self.pool.get().map_err(|e| StoreError::Pool(redact_url_in(&e.to_string(), &self.url)))
    }
}

/// The database a URL names. Not `Debug`: a PostgreSQL URL may hold a password.
#[derive(Clone, PartialEq, Eq)]
pub enum Backend {
    /// A `postgres://` or `postgresql://` URL, passed to libpq as is.
    Postgres(String),
    /// A file path (from `sqlite://PATH`, `sqlite:PATH` or a bare path), or `:memory:`.
    Sqlite(String),
}

impl Backend {
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Backend::Postgres(url.to_string()));
        }
        let path =
            url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
        if path.is_empty() {
            return Err(StoreError::Config(format!(
                "database URL {:?} names no file",
                redact_url(url)
            )));
        }
        if path.contains("://") {
            return Err(StoreError::Config(format!(
                "unsupported database URL {:?}: use sqlite://PATH or postgres://...",
                redact_url(url)
            )));
        }
        Ok(Backend::Sqlite(path.to_string()))
    }

    pub fn is_sqlite(&self) -> bool {
        matches!(self, Backend::Sqlite(_))
    }

    fn conn_string(&self) -> &str {
        match self {
            Backend::Postgres(s) | Backend::Sqlite(s) => s,
        }
    }
}

/// Order matters: busy_timeout first so the WAL switch itself waits instead of failing with
/// "database is locked" when r2d2 opens connections in parallel.
const SQLITE_PRAGMAS: &str = "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;";

#[derive(Debug)]
struct SqlitePragmas;

impl CustomizeConnection<AnyConnection, diesel::r2d2::Error> for SqlitePragmas {
    fn on_acquire(&self, conn: &mut AnyConnection) -> Result<(), diesel::r2d2::Error> {
        if let AnyConnection::Sqlite(c) = conn {
            c.batch_execute(SQLITE_PRAGMAS).map_err(diesel::r2d2::Error::QueryError)?;
        }
        Ok(())
    }
}

/// Connects with the concrete backend (for a precise error), runs pending migrations, then
/// builds the pool.
pub fn connect(url: &str, pool_size: u32) -> Result<DbPool, StoreError> {
    let backend = Backend::from_url(url)?;
    match &backend {
        Backend::Postgres(u) => {
            // libpq's messages name the host, and may quote pieces of a malformed URL.
            let failed = |e: &dyn std::fmt::Display| redact_url_in(&e.to_string(), u);
            let mut c = PgConnection::establish(u).map_err(|e| {
                StoreError::Connect(format!("PostgreSQL at {}: {}", redact_url(u), failed(&e)))
            })?;
            c.run_pending_migrations(POSTGRES_MIGRATIONS)
                .map_err(|e| StoreError::Migration(failed(&e)))?;
        }
        Backend::Sqlite(path) => {
            let mut c = SqliteConnection::establish(path)
                .map_err(|e| StoreError::Connect(format!("SQLite file {path}: {e}")))?;
            c.batch_execute(SQLITE_PRAGMAS).map_err(StoreError::from)?;
            c.run_pending_migrations(SQLITE_MIGRATIONS)
                .map_err(|e| StoreError::Migration(e.to_string()))?;
        }
    }
    let url = backend.conn_string().to_string();
    let mut builder = Pool::builder()
        .max_size(pool_size)
        .connection_timeout(POOL_TIMEOUT)
        .error_handler(Box::new(LogRedacted { url: url.clone() }));
    if backend.is_sqlite() {
        builder = builder.connection_customizer(Box::new(SqlitePragmas));
    }
    let pool = builder
        .build(Manager { backend })
        .map_err(|e| StoreError::Connect(redact_url_in(&e.to_string(), &url)))?;
    Ok(DbPool { pool, url: url.into() })
}
