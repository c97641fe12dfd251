//! SQLite specifics: the URL form and the per-connection settings.

use std::path::Path;

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

/// Normalises `sqlite:PATH`/`sqlite://PATH` so the file is created on first
/// start (`mode=rwc`) and makes sure its directory exists.
pub fn prepare_url(url: &str) -> Result<String> {
    if super::is_memory_url(url) {
        return Ok(url.to_string());
    }
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    super::ensure_parent_dir(Path::new(path))?;
    let url = match query {
        Some(query) if query.contains("mode=") => format!("sqlite://{path}?{query}"),
        Some(query) => format!("sqlite://{path}?{query}&mode=rwc"),
        None => format!("sqlite://{path}?mode=rwc"),
    };
    Ok(url)
}
