//! The artifact directory: big text (raw outputs, consoles, kernel configs)
//! kept as files, referenced from the database by relative path.
//!
//! Files are written to a temporary name and renamed, and always before the
//! transaction that references them commits, so the database never points at
//! a missing or half-written file. A failed transaction leaves at worst an
//! unreferenced file, which the next upload of the same run overwrites.
//! A write that fails (a full disk) removes its temporary file, and a full
//! disk is [`Error::InsufficientStorage`], which the agent retries later.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
}

impl ArtifactStore {
    pub fn new(root: impl Into<PathBuf>) -> ArtifactStore {
        ArtifactStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `contents` at `relative` (e.g. `results/42/output.txt`) atomically.
    pub async fn put(&self, relative: &str, contents: String) -> Result<()> {
        let path = self.root.join(relative);
        let written =
            tokio::task::spawn_blocking(move || write_atomically(&path, contents.as_bytes()))
                .await
                .map_err(|e| anyhow::anyhow!("artifact writer panicked: {e}"))?;
        written.map_err(|source| match source.kind() {
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded => Error::InsufficientStorage {
                dir: self.root.clone(),
                source,
            },
            _ => Error::Io(source),
        })
    }

    /// Reads an artifact back as text.
    pub async fn get(&self, relative: &str) -> Result<String> {
        Ok(tokio::fs::read_to_string(self.root.join(relative)).await?)
    }
}

fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp.{:016x}", rand::random::<u64>()));
    let written = std::fs::write(&tmp, contents).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // Half a file (the disk filled up under it) is nobody's artifact.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
