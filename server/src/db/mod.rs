//! The store: one code path over SQLite and PostgreSQL through sqlx's `Any`
//! driver, with the embedded migrations of `migrations/{sqlite,postgres}`.
//!
//! SQL here and in the other modules is portable: `$1, $2, ...` placeholders
//! used once each and in order, `RETURNING`, `ON CONFLICT`, 64-bit integers,
//! Unix-millisecond times, no booleans. The only dialect switch is
//! [`Db::skip_locked`].
//!
//! SQLite has a single writer. Rather than let connections fight over the
//! write lock (a deferred transaction that reads and then writes gets
//! `SQLITE_BUSY` without waiting), writes go through a one-connection pool and
//! reads through a separate pool. On PostgreSQL both are the same pool.
//! So: **write inside [`Db::begin`] or on [`Db::write`], read on
//! [`Db::read`]**, and never open a second write transaction while holding one.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{Any, AnyPool, Executor, Transaction};

use crate::error::{Error, Result};

pub mod sqlite;

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
            Err(Error::BadRequest(format!(
                "unsupported database URL {url:?}: use sqlite://PATH or postgres://..."
            )))
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
                let write = sqlite_pool(&url, 1).await?;
                let read = sqlite_pool(&url, 8).await?;
                Ok(Db {
                    backend,
                    write,
                    read,
                })
            }
            Backend::Postgres => {
                let options = AnyConnectOptions::from_str(url)?;
                let pool = AnyPoolOptions::new()
                    .max_connections(24)
                    .acquire_timeout(Duration::from_secs(30))
                    .connect_with(options)
                    .await?;
                Ok(Db {
                    backend,
                    write: pool.clone(),
                    read: pool,
                })
            }
        }
    }

    /// Applies the embedded migrations that have not run yet.
    pub async fn migrate(&self) -> Result<()> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATOR,
            Backend::Postgres => &POSTGRES_MIGRATOR,
        };
        migrator.run(&self.write).await?;
        Ok(())
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

    /// ` FOR UPDATE OF <table> SKIP LOCKED` where the backend has row locks
    /// (only `table`'s rows are locked, not those of joined tables); empty on
    /// SQLite, whose single writer already serialises claims.
    pub fn skip_locked(&self, table: &str) -> String {
        match self.backend {
            Backend::Sqlite => String::new(),
            Backend::Postgres => format!(" FOR UPDATE OF {table} SKIP LOCKED"),
        }
    }

    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
    }
}

async fn sqlite_pool(url: &str, max_connections: u32) -> Result<AnyPool> {
    let options = AnyConnectOptions::from_str(url)?;
    let pool = AnyPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(1)
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
