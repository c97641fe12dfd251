//! The on-disk spool: every outcome is written here before it is sent, and
//! removed only once the server acknowledged it. A server outage or an agent
//! restart loses nothing; sending retries with jittered exponential backoff.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use kbot_api::agent::{EventRequest, FailureKind, JobState, ResultUpload};

use crate::build_cache::{read_json, write_json, BuildCache};
use crate::client::ApiClient;
use crate::error::{AgentError, Result};
use crate::outcome::{Failure, Outcome};

/// One message the server must receive.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum Pending {
    Result { job_id: i64, upload: ResultUpload },
    Failure { job_id: i64, event: EventRequest },
}

impl Pending {
    /// What to send for an outcome. A result the server's rules refuse
    /// (too many metrics, a name too long) is sent as the run's failure with
    /// the reason: uploading it would be refused for good, and the job would
    /// sit leased until its lease expired and then run again, as uselessly.
    pub fn of(job_id: i64, outcome: Outcome) -> Option<Pending> {
        match outcome {
            Outcome::Success(upload) => Some(match upload.check() {
                Ok(()) => Pending::Result { job_id, upload },
                Err(err) => Pending::failure(
                    job_id,
                    FailureKind::Incomplete,
                    format!("the run's result cannot be stored: {err}"),
                ),
            }),
            Outcome::Failed(Failure { kind, detail }) => {
                Some(Pending::failure(job_id, kind, detail))
            }
            Outcome::Rebooting => None,
        }
    }

    fn failure(job_id: i64, kind: FailureKind, detail: String) -> Pending {
        Pending::Failure {
            job_id,
            event: EventRequest {
                state: JobState::Failed,
                failure: Some(kind),
                detail,
            },
        }
    }

    fn file_name(&self) -> String {
        match self {
            Pending::Result { job_id, .. } => format!("{job_id:012}-result.json"),
            Pending::Failure { job_id, .. } => format!("{job_id:012}-failure.json"),
        }
    }
}

pub struct Spool {
    dir: PathBuf,
}

impl Spool {
    pub fn open(dir: &Path) -> Result<Spool> {
        fs::create_dir_all(dir.join("rejected"))
            .map_err(|e| AgentError::io(format!("creating {}", dir.display()), e))?;
        Ok(Spool {
            dir: dir.to_path_buf(),
        })
    }

    /// Persists `item` (atomically) before any attempt to send it.
    pub fn put(&self, item: &Pending) -> Result<PathBuf> {
        let path = self.dir.join(item.file_name());
        write_json(&path, item)?;
        Ok(path)
    }

    /// [`Spool::put`]; on a full disk, evicts least recently used kernels
    /// from `cache` until there is room for the item and tries once more.
    /// An outcome the agent cannot keep is lost with the job, so the cache,
    /// which can always be rebuilt, gives way first.
    pub fn put_making_room(&self, item: &Pending, cache: &BuildCache) -> Result<PathBuf> {
        let source = match self.put(item) {
            Err(AgentError::Io { source, .. }) if crate::error::is_disk_full(&source) => source,
            other => return other,
        };
        let size = serde_json::to_vec_pretty(item).map_or(0, |b| b.len() as u64);
        // The item, and slack for the directory and the filesystem's rounding.
        let evicted = cache.make_room(size + (64 << 10))?;
        tracing::warn!(file = item.file_name(), evicted = evicted.len(), error = %source, "the spool's disk is full; retrying after evicting cached kernels");
        self.put(item).map_err(|e| match e {
            AgentError::Io { source, .. } if crate::error::is_disk_full(&source) => {
                AgentError::DiskFull {
                    what: format!("the spooled outcome {}", item.file_name()),
                    dir: self.dir.clone(),
                    evicted: evicted.len(),
                    source,
                }
            }
            other => other,
        })
    }

    /// Spooled items, oldest job first.
    pub fn pending(&self) -> Result<Vec<(PathBuf, Pending)>> {
        let mut files: Vec<PathBuf> = fs::read_dir(&self.dir)
            .map_err(|e| AgentError::io(format!("listing {}", self.dir.display()), e))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            if let Some(p) = read_json::<Pending>(&f)? {
                out.push((f, p));
            }
        }
        Ok(out)
    }

    /// Sends everything spooled. Stops at the first retryable error (the
    /// server is down: try again later); an item the server refuses for good
    /// (4xx) moves to `rejected/` so it cannot block the rest.
    pub async fn drain(&self, client: &ApiClient) -> Result<usize> {
        let mut sent = 0;
        for (path, item) in self.pending()? {
            let res = match &item {
                Pending::Result { job_id, upload } => client.upload(*job_id, upload).await.map(|r| {
                    tracing::info!(job = job_id, result = r.result_id, stored = r.stored, "result acknowledged");
                }),
                Pending::Failure { job_id, event } => client.event(*job_id, event).await.map(|()| {
                    tracing::info!(job = job_id, failure = ?event.failure, "failure acknowledged");
                }),
            };
            match res {
                Ok(()) => {
                    fs::remove_file(&path)
                        .map_err(|e| AgentError::io(format!("removing {}", path.display()), e))?;
                    sent += 1;
                }
                Err(e) if e.is_retryable() => return Err(e),
                Err(e) => {
                    tracing::error!(file = %path.display(), error = %e, "the server refused a spooled item; kept in rejected/");
                    let to = self
                        .dir
                        .join("rejected")
                        .join(path.file_name().unwrap_or_default());
                    fs::rename(&path, &to)
                        .map_err(|e| AgentError::io("moving a rejected item", e))?;
                    if let Pending::Result { job_id, .. } = &item {
                        self.report_refused(client, *job_id, &e).await?;
                    }
                }
            }
        }
        Ok(sent)
    }

    /// A result refused for good (say 413: bigger than the server takes)
    /// ends its job as failed with the server's reason, so the job is not
    /// left leased until its lease expires and then run again for nothing.
    /// The failure is spooled like any other and sent at once.
    async fn report_refused(
        &self,
        client: &ApiClient,
        job_id: i64,
        err: &AgentError,
    ) -> Result<()> {
        let failure = Pending::failure(
            job_id,
            FailureKind::Incomplete,
            format!("the server refused the run's result: {err}"),
        );
        let path = self.put(&failure)?;
        if let Pending::Failure { event, .. } = &failure {
            match client.event(job_id, event).await {
                Ok(()) => fs::remove_file(&path)
                    .map_err(|e| AgentError::io(format!("removing {}", path.display()), e))?,
                Err(e) if e.is_retryable() => return Err(e),
                Err(e) => {
                    tracing::warn!(job = job_id, error = %e, "the failure of a refused result was refused too")
                }
            }
        }
        Ok(())
    }
}

/// Exponential backoff with ±50% jitter, so agents that lost the server at
/// the same moment do not return in lockstep.
pub fn backoff(attempt: u32, base: Duration, max: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(16)).min(max);
    exp.mul_f64(rand::thread_rng().gen_range(0.5..1.5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbot_api::agent::FailureKind;
    use std::collections::BTreeMap;

    fn upload() -> ResultUpload {
        ResultUpload {
            metrics: BTreeMap::from([("lmbench3.PIPE.bandwidth.MB/sec".to_string(), 1234.5)]),
            raw_output: "{}".into(),
            console: None,
            kconfig: None,
            kernel_release: "6.1.0".into(),
            tuning: BTreeMap::new(),
            started_at: 1,
            finished_at: 2,
            profile: None,
        }
    }

    #[test]
    fn spooled_items_survive_reopening() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let spool = Spool::open(tmp.path())?;
        if let Some(p) = Pending::of(9, Outcome::Success(upload())) {
            spool.put(&p)?;
        }
        if let Some(p) = Pending::of(
            3,
            Outcome::Failed(Failure::new(FailureKind::BootFailed, "panic")),
        ) {
            spool.put(&p)?;
        }
        let again = Spool::open(tmp.path())?.pending()?;
        assert_eq!(again.len(), 2);
        assert!(
            matches!(&again[0].1, Pending::Failure { job_id: 3, event } if event.failure == Some(FailureKind::BootFailed))
        );
        assert!(
            matches!(&again[1].1, Pending::Result { job_id: 9, upload } if upload.metrics.len() == 1)
        );
        Ok(())
    }

    #[tokio::test]
    async fn an_unreachable_server_keeps_the_spool() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let spool = Spool::open(tmp.path())?;
        if let Some(p) = Pending::of(1, Outcome::Success(upload())) {
            spool.put(&p)?;
        }
        // A port nothing listens on: bind, learn the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| AgentError::io("bind", e))?
            .port();
        let client = ApiClient::new(&format!("http://127.0.0.1:{port}"), Some("t".into()))?;
        let err = spool.drain(&client).await.err();
        assert!(err.is_some_and(|e| e.is_retryable()));
        assert_eq!(spool.pending()?.len(), 1);
        Ok(())
    }

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        let d0 = backoff(0, base, max);
        assert!(d0 >= Duration::from_millis(500) && d0 <= Duration::from_millis(1500));
        let d10 = backoff(10, base, max);
        assert!(d10 >= Duration::from_secs(30) && d10 <= Duration::from_secs(90));
    }
}
