//! SQLite specifics: the URL form, the per-connection settings and the
//! migration lock.

use std::path::{Path, PathBuf};

use crate::error::Result;

/// Run on every new connection: these settings are per connection (except
/// WAL, which sticks to the file but is cheap to assert).
/// `synchronous = NORMAL` is safe with WAL: a power cut may lose the last
/// transactions but never corrupts the file.
pub const CONNECTION_PRAGMAS: &[&str] = &[
    "PRAGMA journal_mode = WAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA busy_timeout = 10000",
    "PRAGMA synchronous = NORMAL",
];

/// The database file of a SQLite URL; `None` for an in-memory database.
pub fn file_path(url: &str) -> Option<PathBuf> {
    if super::is_memory_url(url) {
        return None;
    }
    Some(PathBuf::from(split(url).0))
}

/// A SQLite URL's path and query.
fn split(url: &str) -> (&str, Option<&str>) {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    }
}

/// Holds the migration lock of one SQLite file until dropped.
///
/// sqlx takes no lock around SQLite migrations, so two processes starting on
/// a new file (a server and `kbot-server user add`, two replicas) both saw a
/// migration as pending and the second failed with "table already exists".
/// The lock is an advisory `flock` on a file beside the database: never on
/// the database file itself, whose POSIX locks SQLite drops in this process
/// when any descriptor of that file is closed.
pub struct MigrationLock {
    _file: std::fs::File,
}

impl MigrationLock {
    /// Waits for the lock (off the async runtime).
    pub async fn acquire(db_file: &Path) -> Result<MigrationLock> {
        let mut name = db_file.as_os_str().to_owned();
        name.push(".migrate-lock");
        let path = PathBuf::from(name);
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| anyhow::anyhow!("the migration lock task failed: {e}"))??;
        Ok(MigrationLock { _file: file })
    }
}

/// Normalises `sqlite:PATH`/`sqlite://PATH` so the file is created on first
/// start (`mode=rwc`) and makes sure its directory exists.
pub fn prepare_url(url: &str) -> Result<String> {
    if super::is_memory_url(url) {
        return Ok(url.to_string());
    }
    let (path, query) = split(url);
    super::ensure_parent_dir(Path::new(path))?;
    let url = match query {
        Some(query) if query.contains("mode=") => format!("sqlite://{path}?{query}"),
        Some(query) => format!("sqlite://{path}?{query}&mode=rwc"),
        None => format!("sqlite://{path}?mode=rwc"),
    };
    Ok(url)
}
