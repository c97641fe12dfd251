//! Kernels built once for the whole lab: before building, the agent asks
//! the server for the job's build key (`kbot_api::builds`). The first job
//! to ask builds it and uploads the image, config and log; every other job
//! of that key waits for it and downloads the files, checked by SHA-256,
//! into the local build cache; a key that does not build fails every job
//! that needs it once, with the builder's log.
//!
//! The job runs on a blocking thread; the calls go through the daemon's
//! runtime. A claim lives as long as the builder job's lease, which the
//! daemon's heartbeats keep while the job builds or waits.

use std::fs;
use std::path::Path;
use std::time::Duration;

use kbot_api::agent::{FailureKind, JobState, LeasedJob};
use kbot_api::builds::{BuildClaim, BuildFailed, BuildFile, BuildReady, BuildView, ClaimAnswer};
use kbot_api::client::AgentClient;
use sha2::{Digest, Sha256};
use tokio::runtime::Handle;

use crate::build_cache::{BuildKey, BuiltKernel};
use crate::error::{AgentError, Result};
use crate::job_runner::OnState;
use crate::kernel_build::Builder;
use crate::outcome::Failure;
use crate::process::Cancel;

/// The server's shared builds, seen from a job's blocking thread.
#[derive(Clone)]
pub struct SharedBuilds {
    client: AgentClient,
    runtime: Handle,
}

type Built = std::result::Result<BuiltKernel, Failure>;

impl SharedBuilds {
    /// Calls `client` on `runtime` (the daemon's).
    pub fn new(client: AgentClient, runtime: Handle) -> SharedBuilds {
        SharedBuilds { client, runtime }
    }

    /// The kernel of `key` for `job`: from the local build cache, else
    /// built here and shared, or downloaded.
    pub fn kernel(
        &self,
        builder: &Builder,
        job: &LeasedJob,
        key: &BuildKey,
        cancel: &Cancel,
        on_state: OnState,
    ) -> Result<Built> {
        if let Some(k) = builder.cache().get(key)? {
            tracing::info!(commit = %key.commit, "kernel found in the build cache");
            return Ok(Ok(k));
        }
        let claim = BuildClaim {
            job_id: job.job_id,
            build_key: key.id(),
            commit: key.commit.clone(),
            arch: key.arch.clone(),
        };
        let mut waiting_for = None;
        loop {
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            let answer = match self.call(self.client.claim_build(&claim)) {
                Ok(a) => a,
                Err(e) if unreachable(&e) => return local(builder, job, key, cancel, &e),
                Err(e) => return Err(e),
            };
            match answer {
                ClaimAnswer::Build => return self.build_and_share(builder, job, key, cancel),
                ClaimAnswer::Ready { build } => {
                    return match self.download(builder, key, &build) {
                        Err(e) if unreachable(&e) => local(builder, job, key, cancel, &e),
                        other => other,
                    }
                }
                ClaimAnswer::Failed { build } => return Ok(Err(does_not_build(&build))),
                ClaimAnswer::Wait {
                    builder_job_id,
                    retry_after_secs,
                } => {
                    if waiting_for != Some(builder_job_id) {
                        waiting_for = Some(builder_job_id);
                        on_state(
                            JobState::Building,
                            &format!(
                                "waiting for job {builder_job_id} to build {}",
                                claim.build_key
                            ),
                        );
                    }
                    sleep(Duration::from_secs(retry_after_secs.into()), cancel)?;
                }
            }
        }
    }

    /// Builds here, then shares: the files and `ready`, or `failed` for a
    /// commit that does not build. Any other failure (a full disk, a
    /// missing compiler) is this agent's: the claim is left to lapse with
    /// the job, and the next job of the key builds.
    fn build_and_share(
        &self,
        builder: &Builder,
        job: &LeasedJob,
        key: &BuildKey,
        cancel: &Cancel,
    ) -> Result<Built> {
        let built = builder.kernel(&job.repo, key, cancel)?;
        let shared = match &built {
            Ok(kernel) => self.share(key, job.job_id, kernel),
            Err(f) if f.kind == FailureKind::BuildFailed => {
                let failed = BuildFailed {
                    job_id: job.job_id,
                    log_tail: f.detail.clone(),
                };
                self.call(self.client.build_failed(&key.id(), &failed))
                    .map(|_| ())
            }
            Err(_) => Ok(()),
        };
        if let Err(e) = shared {
            // The job still has its kernel; jobs waiting for it build it
            // themselves once this job's lease ends.
            tracing::warn!(build = %key.id(), error = %e, "could not share the build");
        }
        Ok(built)
    }

    /// Uploads the kernel's files and says it is ready.
    fn share(&self, key: &BuildKey, job_id: i64, kernel: &BuiltKernel) -> Result<()> {
        let id = key.id();
        let mut files = Vec::new();
        for (name, path) in [
            ("bzImage", kernel.image()),
            ("config", kernel.config()),
            ("build.log", kernel.log()),
        ] {
            let content = match fs::read(&path) {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && name == "build.log" => {
                    continue
                }
                Err(e) => return Err(AgentError::io(format!("reading {}", path.display()), e)),
            };
            files.push(self.call(self.client.upload_build_file(&id, name, job_id, content))?);
        }
        let ready = BuildReady {
            job_id,
            release: kernel.release.clone(),
            build_id: kernel.build_id.clone(),
            build_secs: kernel.build_secs,
            files,
        };
        self.call(self.client.build_ready(&id, &ready))?;
        tracing::info!(build = %id, "kernel shared");
        Ok(())
    }

    /// Downloads a ready build into the local build cache.
    fn download(&self, builder: &Builder, key: &BuildKey, build: &BuildView) -> Result<Built> {
        let staged = builder.download_dir(key);
        let _ = fs::remove_dir_all(&staged);
        fs::create_dir_all(&staged)
            .map_err(|e| AgentError::io(format!("creating {}", staged.display()), e))?;
        for file in &build.files {
            if let Err(why) = self.fetch(&key.id(), file, &staged)? {
                let _ = fs::remove_dir_all(&staged);
                return Ok(Err(Failure::new(FailureKind::Infrastructure, why)));
            }
        }
        let kernel = BuiltKernel {
            key: key.clone(),
            release: build.release.clone().unwrap_or_default(),
            build_id: build.build_id.clone(),
            build_secs: build.build_secs.unwrap_or(0.0),
            size_bytes: 0,
            last_used_ms: 0,
            dir: staged.clone(),
        };
        let kernel = builder.cache().insert(&staged, kernel)?;
        tracing::info!(build = %key.id(), job = ?build.job_id, "kernel downloaded");
        Ok(Ok(kernel))
    }

    /// One file into `dir`, or why its bytes are not the ones built.
    fn fetch(
        &self,
        id: &str,
        file: &BuildFile,
        dir: &Path,
    ) -> Result<std::result::Result<(), String>> {
        let (bytes, header) = self.call(self.client.build_file(id, &file.name))?;
        let got = hex::encode(Sha256::digest(&bytes));
        if got != file.sha256 || header.as_deref() != Some(file.sha256.as_str()) {
            return Ok(Err(format!(
                "build {id}: {} downloaded with sha256 {got} (server says {:?}), built as {}",
                file.name, header, file.sha256
            )));
        }
        let path = dir.join(&file.name);
        fs::write(&path, &bytes)
            .map_err(|e| AgentError::io(format!("writing {}", path.display()), e))?;
        Ok(Ok(()))
    }

    fn call<T>(
        &self,
        f: impl std::future::Future<Output = kbot_api::client::Result<T>>,
    ) -> Result<T> {
        self.runtime.block_on(f).map_err(AgentError::from)
    }
}

/// A server that cannot be reached now (or that has no shared builds, an
/// older one): the job builds its kernel here rather than fail.
fn unreachable(e: &AgentError) -> bool {
    e.is_retryable() || matches!(e, AgentError::Api(api) if api.status() == Some(404))
}

/// Builds here without sharing, after `why` kept the server out of it.
fn local(
    builder: &Builder,
    job: &LeasedJob,
    key: &BuildKey,
    cancel: &Cancel,
    why: &AgentError,
) -> Result<Built> {
    tracing::warn!(build = %key.id(), error = %why, "shared builds unavailable; building here");
    builder.kernel(&job.repo, key, cancel)
}

/// The failure of a job whose key another job found does not build.
fn does_not_build(build: &BuildView) -> Failure {
    let by = build
        .job_id
        .map_or_else(String::new, |j| format!(" (built by job {j})"));
    Failure::new(
        FailureKind::BuildFailed,
        format!(
            "{} does not build for this kconfig, compiler and arch{by}:\n{}",
            build.commit,
            build.log_tail.as_deref().unwrap_or("")
        ),
    )
}

/// Sleeps `total`, waking early when the job is cancelled.
fn sleep(total: Duration, cancel: &Cancel) -> Result<()> {
    let step = Duration::from_millis(200);
    let mut slept = Duration::ZERO;
    while slept < total {
        if cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        std::thread::sleep(step);
        slept += step;
    }
    Ok(())
}
