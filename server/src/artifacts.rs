//! The artifact store: big text (raw outputs, consoles, kernel configs)
//! kept as objects, referenced from the database by key
//! (`results/42/output.txt`). The artifact directory by default; an
//! S3-compatible bucket when `KBOT_ARTIFACT_STORE` names one, so that
//! server replicas share artifacts without sharing a filesystem.
//!
//! An object is written whole before the transaction that references it
//! commits, so the database never points at a missing or half-written
//! object: in the directory through a staged file renamed into place, in a
//! bucket by a single PUT. A failed transaction leaves at worst an
//! unreferenced object, which the next upload of the same run overwrites.
//! A directory whose disk is full gets [`Error::InsufficientStorage`] (its
//! staged file removed), which the agent retries later; a bucket that
//! cannot be reached gets [`Error::ArtifactStore`], a retryable 503.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as Key;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, PutPayload, RetryConfig};

use crate::config::{Config, S3Settings};
use crate::error::{error_chain, Error, Result};

#[derive(Debug, Clone)]
pub struct ArtifactStore {
    store: Arc<dyn ObjectStore>,
    /// Where it is, for errors and the log: the directory or `s3://...`.
    location: String,
}

impl ArtifactStore {
    /// The store `config` names.
    pub fn open(config: &Config) -> Result<ArtifactStore> {
        match &config.artifact_store {
            None => ArtifactStore::directory(&config.artifact_dir),
            Some(s3) => ArtifactStore::bucket(s3),
        }
    }

    /// Objects as files under `dir`, created if missing (at start-up).
    pub fn directory(dir: &Path) -> Result<ArtifactStore> {
        std::fs::create_dir_all(dir)?;
        let store = LocalFileSystem::new_with_prefix(dir).map_err(|e| {
            Error::Config(format!(
                "artifact directory {}: {}",
                dir.display(),
                error_chain(&e)
            ))
        })?;
        Ok(ArtifactStore {
            store: Arc::new(store),
            location: dir.display().to_string(),
        })
    }

    /// Objects in an S3-compatible bucket.
    pub fn bucket(s3: &S3Settings) -> Result<ArtifactStore> {
        let (bucket, prefix) = s3.bucket_and_prefix().map_err(Error::Config)?;
        // The agent retries a 503 itself: a store that does not answer
        // fails the request in seconds, not after object_store's default
        // of ten retries over three minutes.
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(10),
            ..RetryConfig::default()
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&bucket)
            .with_region(&s3.region)
            .with_retry(retry);
        if let Some(endpoint) = &s3.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"))
                // Self-hosted stores (MinIO and the like) take the bucket in the path.
                .with_virtual_hosted_style_request(false);
        }
        if let Some((id, secret)) = &s3.credentials {
            builder = builder
                .with_access_key_id(id)
                .with_secret_access_key(secret);
        } else {
            builder = builder.with_skip_signature(true);
        }
        let store = builder
            .build()
            .map_err(|e| Error::Config(format!("{}: {}", s3.url, error_chain(&e))))?;
        let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
            Arc::new(store)
        } else {
            Arc::new(PrefixStore::new(store, prefix.as_str()))
        };
        Ok(ArtifactStore {
            store,
            location: s3.url.clone(),
        })
    }

    /// Where the objects are: a directory or an `s3://` URL.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Writes `contents` at `key` (e.g. `results/42/output.txt`), whole or not at all.
    pub async fn put(&self, key: &str, contents: String) -> Result<()> {
        self.put_bytes(key, Bytes::from(contents.into_bytes()))
            .await
    }

    /// [`Self::put`] for any bytes (a kernel image).
    pub async fn put_bytes(&self, key: &str, contents: Bytes) -> Result<()> {
        let key = parse_key(key)?;
        match self.store.put(&key, PutPayload::from(contents)).await {
            Ok(_) => Ok(()),
            Err(e) if disk_full(&e) => Err(Error::InsufficientStorage {
                store: self.location.clone(),
                source: e,
            }),
            Err(source) => Err(Error::ArtifactStore {
                key: key.to_string(),
                source,
            }),
        }
    }

    /// Reads an artifact back as text.
    pub async fn get(&self, key: &str) -> Result<String> {
        let bytes = self.get_bytes(key).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Deletes an artifact; one that is not there is already deleted.
    pub async fn delete(&self, key: &str) -> Result<()> {
        let key = parse_key(key)?;
        match self.store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(Error::ArtifactStore {
                key: key.to_string(),
                source,
            }),
        }
    }

    /// Reads an artifact back whole.
    pub async fn get_bytes(&self, key: &str) -> Result<Bytes> {
        let key = parse_key(key)?;
        let read = async { self.store.get(&key).await?.bytes().await };
        read.await.map_err(|source| Error::ArtifactStore {
            key: key.to_string(),
            source,
        })
    }
}

/// A key the database holds: relative, `/`-separated, no `..`.
fn parse_key(key: &str) -> Result<Key> {
    Key::parse(key).map_err(|e| anyhow::anyhow!("artifact key {key:?}: {e}").into())
}

/// Whether the store failed for want of space (a full disk or quota).
fn disk_full(e: &object_store::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded) {
                return true;
            }
        }
        cause = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_directory_store_writes_whole_files_under_its_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ArtifactStore::directory(dir.path()).expect("store");
        store
            .put("results/7/output.txt", "ran\n".into())
            .await
            .expect("put");
        let on_disk = std::fs::read_to_string(dir.path().join("results/7/output.txt"));
        assert_eq!(on_disk.ok().as_deref(), Some("ran\n"));
        assert_eq!(
            store.get("results/7/output.txt").await.ok().as_deref(),
            Some("ran\n")
        );
        let staged: Vec<_> = std::fs::read_dir(dir.path().join("results/7"))
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(staged, vec![std::ffi::OsString::from("output.txt")]);
    }

    #[tokio::test]
    async fn keys_cannot_leave_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ArtifactStore::directory(dir.path()).expect("store");
        for key in ["../escape", "a/../../b", "results//x"] {
            assert!(store.put(key, "x".into()).await.is_err(), "{key}");
        }
    }
}
