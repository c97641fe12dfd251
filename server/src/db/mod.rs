//! The store: one code path over SQLite and PostgreSQL through sqlx's `Any`
//! driver, with the embedded migrations of `migrations/{sqlite,postgres}`.
//!
//! SQL here and in the other modules is portable: `$1, $2, ...` placeholders
//! used once each and in order, `RETURNING`, `ON CONFLICT`, 64-bit integers,
//! Unix-millisecond times, no booleans, nullable floats bound as
//! [`NullableF64`] (a plain `None::<f64>` breaks PostgreSQL statements; see
//! there). The dialect switches are
//! [`Db::skip_locked`], [`Db::set_full_sync`] and [`join_writes`]; the claim's
//! pick (scheduler) runs at a different place per backend.
//!
//! Rows are read into `#[derive(sqlx::FromRow)]` structs with
//! `sqlx::query_as`, states through enums declared with `kbot_api::wire_enum!`
//! (`#[sqlx(try_from = "String")]`), JSON columns through [`JsonText`] (see
//! `columns`).
//!
//! Why `Any` and not a store per backend: the two backends differ in a
//! handful of places (the switches above), while the stores hold some 180
//! statements; a store per backend would write each of them twice, or make
//! every store function generic over `sqlx::Database` with bounds for each
//! bound and decoded type. What `Any` costs is contained here: nullable
//! floats need [`NullableF64`] (its null binds with the wrong type on
//! PostgreSQL), placeholders are numbered by hand ([`placeholders`],
//! [`value_rows`], [`join_writes`]: `Any` passes the SQL through, and
//! SQLite's `?` is not PostgreSQL's `$N`), JSON goes through TEXT ([`JsonText`]:
//! `Any` has no `Json<T>`), and each row is copied once into `Any`'s own
//! values, which is small beside the statement's round trip. The
//! compile-time checked `query!` macros do not support `Any`; typed rows
//! check the columns' names and types when a row is read instead.
//!
//! SQLite has a single writer. Rather than let connections fight over the
//! write lock (a deferred transaction that reads and then writes gets
//! `SQLITE_BUSY` without waiting), writes go through a one-connection pool and
//! reads through a separate pool. On PostgreSQL both are the same pool.
//! So: **write inside [`Db::begin`] or on [`Db::write`], read on
//! [`Db::read`]**, and never open a second write transaction while holding one.
//! The writer connection lives on a pinned thread of its own (`writer`);
//! hot paths run their whole transaction there with [`Db::on_writer`].

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{Any, AnyPool, Executor, Transaction};

use crate::error::{Error, Result};

mod columns;
mod float;
pub mod schedule;
pub mod sqlite;
mod writer;

pub use columns::{JsonOrDefault, JsonText};
pub use float::NullableF64;

use writer::Writer;

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

/// A write transaction; helpers that take part in one take `&mut Tx`.
pub type Tx = Transaction<'static, Any>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn from_url(url: &str) -> Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(Error::Config(format!(
                "unsupported database URL {url:?}: use sqlite://PATH or postgres://..."
            )))
        }
    }

    /// The backend a connection talks to.
    pub fn of(conn: &sqlx::AnyConnection) -> Backend {
        match conn.backend_name() {
            "SQLite" => Backend::Sqlite,
            _ => Backend::Postgres,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Handle to the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Db {
    backend: Backend,
    write: AnyPool,
    read: AnyPool,
    relaxed: AnyPool,
    /// SQLite's writer thread; `None` on PostgreSQL.
    writer: Option<Writer>,
    /// The SQLite database file; `None` on PostgreSQL and in memory.
    sqlite_file: Option<std::path::PathBuf>,
}

impl Db {
    /// Connects (creating the SQLite file and its directory if needed).
    /// Does not migrate: call [`Db::migrate`].
    pub async fn connect(url: &str) -> Result<Db> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(url)?;
        match backend {
            Backend::Sqlite => {
                let url = sqlite::prepare_url(url)?;
                let writer_url = url.clone();
                let writer =
                    Writer::start(move || async move { sqlite_pool(&writer_url, 1).await }).await?;
                let read = sqlite_pool(&url, 8).await?;
                Ok(Db {
                    backend,
                    write: writer.pool().clone(),
                    relaxed: writer.pool().clone(),
                    read,
                    writer: Some(writer),
                    sqlite_file: sqlite::file_path(&url),
                })
            }
            Backend::Postgres => {
                let pool = postgres_pool(url, 24, &[]).await?;
                let relaxed = postgres_pool(url, 16, &["SET synchronous_commit = off"]).await?;
                Ok(Db {
                    backend,
                    write: pool.clone(),
                    read: pool,
                    relaxed,
                    writer: None,
                    sqlite_file: None,
                })
            }
        }
    }

    /// Applies the embedded migrations that have not run yet; a process
    /// migrating the same store at once waits (PostgreSQL: sqlx's advisory
    /// lock; SQLite: [`sqlite::MigrationLock`]). The data migrations the
    /// features own are not run: a process opening a store for work calls
    /// `server::migrate`, which runs them through [`Db::migrate_then`].
    pub async fn migrate(&self) -> Result<()> {
        self.migrate_then(|_| async { Ok(()) }).await
    }

    /// [`Db::migrate`], then `data` (data migrations SQL cannot do, e.g. a
    /// job's label parsed from its spec) while the SQLite migration lock is
    /// still held: two processes starting on one new store must not both
    /// run a data migration the schema migrations asked for.
    pub async fn migrate_then<F, Fut>(&self, data: F) -> Result<()>
    where
        F: FnOnce(Db) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATOR,
            Backend::Postgres => &POSTGRES_MIGRATOR,
        };
        let _lock = match &self.sqlite_file {
            Some(file) => Some(sqlite::MigrationLock::acquire(file).await?),
            None => None,
        };
        migrator.run(&self.write).await?;
        data(self.clone()).await
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The pool for reads that need no transaction.
    pub fn read(&self) -> &AnyPool {
        &self.read
    }

    /// The pool for single-statement writes.
    pub fn write(&self) -> &AnyPool {
        &self.write
    }

    /// Starts a write transaction. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`): a deferred transaction that reads first and then
    /// writes fails with `SQLITE_BUSY` instead of waiting when another
    /// process (a second replica, an admin command) wrote in between.
    pub async fn begin(&self) -> Result<Tx> {
        let tx = match self.backend {
            Backend::Sqlite => self.write.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.write.begin().await?,
        };
        Ok(tx)
    }

    /// Runs `work`, which writes, where writing is cheapest: on SQLite on
    /// the writer thread (see `writer`), on PostgreSQL right here. Hot
    /// paths (claims, heartbeats, events, results) put their whole
    /// transaction in `work`.
    pub async fn on_writer<T, Fut>(&self, work: Fut) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        match &self.writer {
            Some(writer) => writer.run(work).await,
            None => work.await,
        }
    }

    /// The pool for single-statement writes whose commit need not wait for
    /// the disk; see [`Db::begin_relaxed`].
    pub fn relaxed(&self) -> &AnyPool {
        &self.relaxed
    }

    /// A write transaction whose commit does not wait for PostgreSQL's WAL
    /// flush (its connections run with `synchronous_commit = off`): for the
    /// agent protocol's frequent, replaceable writes (claims, heartbeats,
    /// progress events), where a flush per commit was most of the
    /// database's time. A database crash may lose the last fraction of a
    /// second of them, never corrupt anything: a lost claim puts the job
    /// back in the queue and its agent is told it lost the lease; a lost
    /// heartbeat or event is sent again. Results, failures, enrolments and
    /// submissions use [`Db::begin`]. On SQLite (WAL, `synchronous =
    /// NORMAL`) no commit waits for a flush, so this is [`Db::begin`].
    pub async fn begin_relaxed(&self) -> Result<Tx> {
        match self.backend {
            Backend::Sqlite => self.begin().await,
            Backend::Postgres => Ok(self.relaxed.begin().await?),
        }
    }

    /// ` FOR UPDATE OF <table> SKIP LOCKED` where the backend has row locks
    /// (only `table`'s rows are locked, not those of joined tables); empty on
    /// SQLite, whose single writer already serialises claims.
    pub fn skip_locked(&self, table: &str) -> String {
        match self.backend {
            Backend::Sqlite => String::new(),
            Backend::Postgres => format!(" FOR UPDATE OF {table} SKIP LOCKED"),
        }
    }

    /// On SQLite, makes the next commits on `conn` wait for the disk
    /// (`synchronous = FULL`) while `full`, and back to the default
    /// (`NORMAL`: a power cut may lose the last commits) after. PostgreSQL's
    /// write pool always waits for the flush, so there it does nothing.
    pub async fn set_full_sync(&self, conn: &mut sqlx::AnyConnection, full: bool) -> Result<()> {
        if self.backend == Backend::Sqlite {
            let pragma = if full {
                "PRAGMA synchronous = FULL"
            } else {
                "PRAGMA synchronous = NORMAL"
            };
            sqlx::query(pragma).execute(&mut *conn).await?;
        }
        Ok(())
    }

    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
        self.relaxed.close().await;
    }
}

async fn sqlite_pool(url: &str, max_connections: u32) -> Result<AnyPool> {
    let options = AnyConnectOptions::from_str(url)?;
    let pool = AnyPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(1)
        // The writer's connection must stay the one opened on the pinned
        // writer thread (see `writer`), so connections are never retired.
        .idle_timeout(None)
        .max_lifetime(None)
        // A SQLite connection is a local file handle that cannot drop out
        // like a socket; pinging it before every use only adds a round trip
        // to its worker thread inside the single writer's hold.
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(30))
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                for pragma in sqlite::CONNECTION_PRAGMAS {
                    conn.execute(*pragma).await?;
                }
                Ok(())
            })
        })
        .connect_with(options)
        .await?;
    Ok(pool)
}

/// Joins independent write statements (each numbering its own placeholders
/// from `$1`) into one statement whose placeholders run on across them, so
/// a transaction pays one round trip for the lot: on SQLite a
/// multi-statement string (sqlx runs each part, binding the arguments in
/// order), on PostgreSQL data-modifying CTEs. Every round trip inside a
/// write transaction is time the single SQLite writer (or a PostgreSQL row
/// lock) is held. The statements run against one snapshot on PostgreSQL, so
/// none may depend on another's effect, and they must not contain `$` other
/// than in placeholders. Only the last statement may return rows; read them
/// with `fetch_all` (sqlx's SQLite driver stops a `fetch_optional` at the
/// first statement's result, before the later statements run).
pub fn join_writes(conn: &sqlx::AnyConnection, statements: &[&str]) -> String {
    join_for(Backend::of(conn), statements)
}

fn join_for(backend: Backend, statements: &[&str]) -> String {
    let mut offset = 0;
    let renumbered: Vec<String> = statements
        .iter()
        .map(|sql| {
            let (out, used) = shift_placeholders(sql, offset);
            offset += used;
            out
        })
        .collect();
    match backend {
        Backend::Sqlite => renumbered.join(";\n"),
        Backend::Postgres => match renumbered.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, firsts)) => {
                let ctes: Vec<String> = firsts
                    .iter()
                    .enumerate()
                    .map(|(i, sql)| format!("w{i} AS ({sql})"))
                    .collect();
                format!("WITH {} {last}", ctes.join(", "))
            }
            None => String::new(),
        },
    }
}

/// `sql` with every `$N` replaced by `$(N + offset)`, and the highest `N`.
/// `$first, $first+1, ...`: `count` placeholders, for an `IN` list or a row.
pub fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($1, ..., $width), ($width+1, ...), ...`: the `VALUES` of an `INSERT`
/// of `rows` rows of `width` values each.
pub fn value_rows(rows: usize, width: usize) -> String {
    (0..rows)
        .map(|r| format!("({})", placeholders(r * width + 1, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn shift_placeholders(sql: &str, offset: usize) -> (String, usize) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut highest = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '$' {
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        if let Ok(n) = digits.parse::<usize>() {
            highest = highest.max(n);
            out.push_str(&(n + offset).to_string());
        }
    }
    (out, highest)
}

/// How long a request waits for a PostgreSQL connection (see `postgres_pool`).
const PG_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// A PostgreSQL pool whose connections run `settings` when they open.
async fn postgres_pool(
    url: &str,
    max_connections: u32,
    settings: &'static [&'static str],
) -> Result<AnyPool> {
    let options = AnyConnectOptions::from_str(url)?;
    let pool = AnyPoolOptions::new()
        .max_connections(max_connections)
        // While PostgreSQL is down sqlx keeps retrying the connection until
        // this timeout: requests then answer 503 after it, so it is short
        // enough for agents' and load balancers' timeouts, and far above
        // the waits of a busy pool (milliseconds, BENCHMARKS.md "Server").
        .acquire_timeout(PG_ACQUIRE_TIMEOUT)
        // No ping before each use: it doubled the round trips of every
        // single-statement read. A connection that died with a database
        // restart fails its next statement once and is then discarded.
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                for setting in settings {
                    conn.execute(*setting).await?;
                }
                Ok(())
            })
        })
        .connect_with(options)
        .await?;
    Ok(pool)
}

/// Whether a path-like SQLite URL names an in-memory database.
pub fn is_memory_url(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

/// Creates the parent directory of a file path, if it has one.
pub(crate) fn ensure_parent_dir(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{join_for, placeholders, shift_placeholders, value_rows, Backend};

    #[test]
    fn value_rows_number_their_placeholders_in_order() {
        assert_eq!(placeholders(4, 3), "$4, $5, $6");
        assert_eq!(value_rows(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(value_rows(0, 3), "");
    }

    #[test]
    fn joined_writes_number_their_placeholders_on() {
        let statements = [
            "UPDATE a SET x = $1 WHERE id = $2",
            "INSERT INTO b (y) VALUES ($1) RETURNING id",
        ];
        assert_eq!(
            join_for(Backend::Sqlite, &statements),
            "UPDATE a SET x = $1 WHERE id = $2;\nINSERT INTO b (y) VALUES ($3) RETURNING id"
        );
        assert_eq!(
            join_for(Backend::Postgres, &statements),
            "WITH w0 AS (UPDATE a SET x = $1 WHERE id = $2) \
             INSERT INTO b (y) VALUES ($3) RETURNING id"
        );
    }

    #[test]
    fn placeholders_shift_by_the_statements_before() {
        assert_eq!(
            shift_placeholders("UPDATE t SET a = $1 WHERE id = $2 AND b = $10", 3),
            (
                "UPDATE t SET a = $4 WHERE id = $5 AND b = $13".to_string(),
                10
            )
        );
        assert_eq!(
            shift_placeholders("SELECT 1", 5),
            ("SELECT 1".to_string(), 0)
        );
    }
}
