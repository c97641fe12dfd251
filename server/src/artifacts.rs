//! The artifact directory: big text (raw outputs, consoles, kernel configs)
//! kept as files, referenced from the database by relative path.
//!
//! Files are written to a temporary name and renamed, and always before the
//! transaction that references them commits, so the database never points at
//! a missing or half-written file. A failed transaction leaves at worst an
//! unreferenced file, which the next upload of the same run overwrites.

use std::path::{Path, PathBuf};

use crate::error::Result;

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
        tokio::task::spawn_blocking(move || write_atomically(&path, contents.as_bytes()))
            .await
            .map_err(|e| anyhow::anyhow!("artifact writer panicked: {e}"))??;
        Ok(())
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
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}
