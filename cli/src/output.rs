//! Printing answers on stdout: text lines or, with `--json`, JSON.
//!
//! `println!` panics when stdout is a pipe its reader closed; these return
//! [`Error::ClosedPipe`] instead, which `main` turns into a quiet exit.

use std::io::Write;

use serde::Serialize;

use crate::error::{Error, Result};

/// Prints `text` and a newline.
pub fn line(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Error::ClosedPipe,
            _ => Error::Stdout(e),
        })
}

/// Prints `value` as indented JSON.
pub fn json<T: Serialize>(value: &T) -> Result<()> {
    line(&serde_json::to_string_pretty(value)?)
}

/// Prints `value` as one line of JSON (a stream of records, as `follow
/// --json` prints events).
pub fn json_line<T: Serialize>(value: &T) -> Result<()> {
    line(&serde_json::to_string(value)?)
}
