//! Kernels built once for the whole lab: before building, the agent asks
//! the server for the job's build key (`kbot_api::builds`). The first job
//! to ask builds it and uploads the image, config and log; every other job
//! of that key waits for it and downloads the files, checked by SHA-256,
//! into the local build cache; a key that does not build fails every job
//! that needs it once, with the builder's log.
//!
//! A builder leases build orders instead ([`SharedBuilds::order`]): it
//! claims the order's key as the order, and builds and shares it the same
//! way. An agent that cannot build only downloads: the server gives it
//! only jobs whose kernel is built.
//!
//! The job runs on a blocking thread; the calls go through the daemon's
//! runtime. A claim lives as long as the builder's job or order lease,
//! which the daemon's heartbeats keep while it builds or waits.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kbot_api::agent::{FailureKind, JobState, LeasedJob, RepoSpec};
use kbot_api::builds::{
    BuildClaim, BuildFailed, BuildFile, BuildOrder, BuildReady, BuildView, ClaimAnswer, Claimant,
};
use kbot_api::client::AgentClient;
use sha2::{Digest, Sha256};
use tokio::runtime::Handle;

use crate::build_cache::{BuildKey, BuiltKernel};
use crate::error::{AgentError, Result};
use crate::kernel_build::{server_key, Builder};
use crate::outcome::Failure;
use crate::outcome::OnState;
use crate::process::Cancel;

/// The server's shared builds, seen from a job's blocking thread.
#[derive(Clone)]
pub struct SharedBuilds {
    client: AgentClient,
    runtime: Handle,
    /// False on a machine that only tests: it never builds a kernel.
    can_build: bool,
    /// The initramfs archives this agent has stored with the server.
    initramfs: Arc<Mutex<HashSet<String>>>,
}

type Built = std::result::Result<BuiltKernel, Failure>;

/// A claim's answer once there is nothing to wait for.
enum Final {
    Build,
    Ready(BuildView),
    Failed(BuildView),
}

/// What a build order came to.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderDone {
    /// Built here and shared.
    Built,
    /// Another claimant had built it (or found it does not build).
    Found,
    /// It does not build: shared as failed.
    DoesNotBuild,
    /// This agent could not build it (its own trouble, or the order is for
    /// another arch): the order goes back to the queue with the lease.
    NotHere(String),
}

impl SharedBuilds {
    /// Calls `client` on `runtime` (the daemon's); `can_build` is false on
    /// a machine that only tests.
    pub fn new(client: AgentClient, runtime: Handle, can_build: bool) -> SharedBuilds {
        SharedBuilds {
            client,
            runtime,
            can_build,
            initramfs: Arc::default(),
        }
    }

    /// Builds the kernel of `order` here, or finds another claimant's, and
    /// shares it: the order is done once its build is ready or failed.
    pub fn order(
        &self,
        builder: &Builder,
        order: &BuildOrder,
        cancel: &Cancel,
    ) -> Result<OrderDone> {
        if order.arch != builder.arch() {
            return Ok(OrderDone::NotHere(format!(
                "the order is for ARCH={}, this agent builds ARCH={}",
                order.arch,
                builder.arch()
            )));
        }
        let key = server_key(&order.commit, &order.kconfig, &order.compiler, &order.arch);
        let by = Claimant::Order(order.order_id);
        Ok(match self.claim(by, &key, cancel, &|_, _| {})? {
            Final::Build => match self.build_and_share(builder, by, &order.repo, &key, cancel)? {
                Ok(_) => OrderDone::Built,
                Err(f) if f.kind == FailureKind::BuildFailed => OrderDone::DoesNotBuild,
                Err(f) => OrderDone::NotHere(f.detail),
            },
            _ => OrderDone::Found,
        })
    }

    /// Claims `key` as `by` until the answer is not to wait: build it,
    /// download it, or it does not build.
    fn claim(
        &self,
        by: Claimant,
        key: &BuildKey,
        cancel: &Cancel,
        on_state: OnState,
    ) -> Result<Final> {
        let (job_id, order_id) = by.ids();
        let claim = BuildClaim {
            job_id,
            order_id,
            build_key: key.id(),
            commit: key.commit.clone(),
            arch: key.arch.clone(),
        };
        let mut waiting_for = None;
        loop {
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            match self.call(self.client.claim_build(&claim))? {
                ClaimAnswer::Wait {
                    builder_job_id,
                    builder_order_id,
                    retry_after_secs,
                } => {
                    let builder = match builder_order_id {
                        Some(o) => format!("build order {o}"),
                        None => format!("job {builder_job_id}"),
                    };
                    if waiting_for.as_ref() != Some(&builder) {
                        on_state(
                            JobState::Building,
                            &format!("waiting for {builder} to build {}", claim.build_key),
                        );
                        waiting_for = Some(builder);
                    }
                    sleep(Duration::from_secs(retry_after_secs.into()), cancel)?;
                }
                ClaimAnswer::Build => return Ok(Final::Build),
                ClaimAnswer::Ready { build } => return Ok(Final::Ready(build)),
                ClaimAnswer::Failed { build } => return Ok(Final::Failed(build)),
            }
        }
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
        let by = Claimant::Job(job.job_id);
        let answer = match self.claim(by, key, cancel, on_state) {
            Err(e) if unreachable(&e) => return self.local(builder, job, key, cancel, e),
            other => other?,
        };
        match answer {
            Final::Build if self.can_build => {
                self.build_and_share(builder, by, &job.repo, key, cancel)
            }
            Final::Build => Ok(Err(Failure::new(
                FailureKind::Infrastructure,
                format!(
                    "no build of {} (key {}) is ready, and this agent does not build kernels \
                     (KBOT_AGENT_ROLES has no build)",
                    key.commit,
                    key.id()
                ),
            ))),
            Final::Ready(build) => match self.download(builder, key, &build) {
                Err(e) if unreachable(&e) => self.local(builder, job, key, cancel, e),
                other => other,
            },
            Final::Failed(build) => Ok(Err(does_not_build(&build))),
        }
    }

    /// Builds here without sharing, after `why` kept the server out of it;
    /// a machine that does not build has no kernel then.
    fn local(
        &self,
        builder: &Builder,
        job: &LeasedJob,
        key: &BuildKey,
        cancel: &Cancel,
        why: AgentError,
    ) -> Result<Built> {
        if !self.can_build {
            return Err(why);
        }
        tracing::warn!(build = %key.id(), error = %why, "shared builds unavailable; building here");
        builder.kernel(&job.repo, key, cancel)
    }

    /// Builds here, then shares: the files and `ready`, or `failed` for a
    /// commit that does not build. Any other failure (a full disk, a
    /// missing compiler) is this agent's: the claim is left to lapse with
    /// the job, and the next job of the key builds.
    fn build_and_share(
        &self,
        builder: &Builder,
        by: Claimant,
        repo: &RepoSpec,
        key: &BuildKey,
        cancel: &Cancel,
    ) -> Result<Built> {
        let built = builder.kernel(repo, key, cancel)?;
        let (job_id, order_id) = by.ids();
        let shared = match &built {
            Ok(kernel) => self.share(key, by, kernel),
            Err(f) if f.kind == FailureKind::BuildFailed => {
                let failed = BuildFailed {
                    job_id,
                    order_id,
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
    fn share(&self, key: &BuildKey, by: Claimant, kernel: &BuiltKernel) -> Result<()> {
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
            files.push(self.call(self.client.upload_build_file(&id, name, by, content))?);
        }
        let (job_id, order_id) = by.ids();
        let ready = BuildReady {
            job_id,
            order_id,
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

    /// Stores the initramfs a leased job's guest booted with the server
    /// and gives its SHA-256; one upload per distinct archive per agent run
    /// (every run of a job boots the same bytes).
    pub fn share_initramfs(&self, job_id: i64, path: &Path) -> Result<String> {
        let content =
            fs::read(path).map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
        let sha256 = hex::encode(Sha256::digest(&content));
        let mut shared = self
            .initramfs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !shared.contains(&sha256) {
            let stored = self.call(self.client.upload_initramfs(job_id, content))?;
            if stored.sha256 != sha256 {
                return Err(AgentError::parse(
                    "the server's answer to the initramfs upload",
                    format!("stored as {}, not {sha256}", stored.sha256),
                ));
            }
            shared.insert(sha256.clone());
        }
        Ok(sha256)
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
