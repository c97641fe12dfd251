//! One job from lease to outcome: build (qemu, kexec), boot, run, measure.

use std::path::{Path, PathBuf};

use kbot_api::agent::{FailureKind, JobState, LeasedJob};
use kbot_core::conditions;

use crate::build_cache::{BuildKey, BuiltKernel};
use crate::error::{AgentError, Result};
use crate::host_backend::{self, HostConfig};
use crate::kernel_build::{server_key, Builder};
use crate::kexec::{BootStep, KexecMachine, RealSystem};
use crate::outcome::{Failure, OnState, Outcome};
use crate::process::Cancel;
use crate::qemu::{QemuBackend, INITRAMFS};
use crate::shared_build::SharedBuilds;
use crate::workload;

pub enum Backend {
    Qemu(QemuBackend),
    Kexec,
    Host,
}

pub struct JobRunner {
    pub backend: Backend,
    pub builder: Builder,
    pub host: HostConfig,
    /// Per-job scratch directories (console, initramfs, perf data).
    pub runs_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl JobRunner {
    /// Runs `job` to its outcome, its kernel built once for the lab through
    /// `shared` when the agent has a server. Errors are the agent's own
    /// trouble and become `infrastructure` failures at the caller.
    pub fn run(
        &self,
        job: &LeasedJob,
        cancel: &Cancel,
        on_state: OnState,
        shared: Option<&SharedBuilds>,
    ) -> Result<Outcome> {
        let plan = match workload::plan(&job.job, &job.resolved) {
            Ok(p) => p,
            Err(e) => {
                return Ok(Outcome::Failed(Failure::new(
                    FailureKind::Infrastructure,
                    format!("no workload for this job: {e}"),
                )))
            }
        };
        let dir = run_dir(&self.runs_dir, job);
        make_run_dir(&dir)?;
        let governor = governor(job);
        match &self.backend {
            Backend::Host => {
                on_state(JobState::Running, "host backend: running kernel as is");
                host_backend::run(&self.host, &plan, governor, &dir, cancel)
            }
            Backend::Qemu(qemu) => {
                let kernel = match self.kernel(job, cancel, on_state, shared)? {
                    Ok(k) => k,
                    Err(f) => return Ok(Outcome::Failed(f)),
                };
                let out = qemu.run(&kernel.image(), &plan, &dir, cancel, on_state)?;
                let out = with_initramfs(out, job, &dir.join(INITRAMFS), shared);
                Ok(with_kconfig(out, &kernel))
            }
            Backend::Kexec => {
                let kernel = match self.kernel(job, cancel, on_state, shared)? {
                    Ok(k) => k,
                    Err(f) => return Ok(Outcome::Failed(f)),
                };
                on_state(JobState::Booting, &kexec_detail(&kernel));
                match KexecMachine::new(&self.state_dir, RealSystem).boot_into(job, &kernel)? {
                    BootStep::AlreadyRunning => {
                        on_state(JobState::Running, "the built kernel is already running");
                        let out = host_backend::run(&self.host, &plan, governor, &dir, cancel)?;
                        Ok(with_kconfig(out, &kernel))
                    }
                    BootStep::Departed(_) => Ok(Outcome::Rebooting),
                }
            }
        }
    }

    /// The built kernel for the job, or why there is none: from the local
    /// build cache, else shared by the server, else built here.
    fn kernel(
        &self,
        job: &LeasedJob,
        cancel: &Cancel,
        on_state: OnState,
        shared: Option<&SharedBuilds>,
    ) -> Result<std::result::Result<BuiltKernel, Failure>> {
        let key = job_key(job, self.builder.arch());
        on_state(
            JobState::Building,
            &format!(
                "{} {} {} ARCH={}",
                short(&key.commit),
                key.kconfig.name,
                key.compiler,
                key.arch
            ),
        );
        match shared {
            Some(shared) => shared.kernel(&self.builder, job, &key, cancel, on_state),
            None => self.builder.kernel(&job.repo, &key, cancel),
        }
    }

    /// After a kexec restart: runs the persisted job on the verified kernel.
    pub fn resume_after_kexec(&self, cancel: &Cancel) -> Result<Option<(LeasedJob, Outcome)>> {
        let machine = KexecMachine::new(&self.state_dir, RealSystem);
        let Some(resumed) = machine.resume()? else {
            return Ok(None);
        };
        let out = match resumed {
            crate::kexec::Resumed::WrongKernel(p, f) => (p.job, Outcome::Failed(f)),
            crate::kexec::Resumed::Verified(p) => {
                let plan = workload::plan(&p.job.job, &p.job.resolved)?;
                let dir = run_dir(&self.runs_dir, &p.job);
                make_run_dir(&dir)?;
                let out = host_backend::run(&self.host, &plan, governor(&p.job), &dir, cancel)?;
                (p.job, out)
            }
        };
        Ok(Some(out))
    }

    /// Forgets the kexec'd job once its outcome is spooled.
    pub fn finish_kexec(&self) -> Result<()> {
        KexecMachine::new(&self.state_dir, RealSystem).finish()
    }
}

/// The build key of `job`'s kernel for `ARCH=arch`.
pub fn job_key(job: &LeasedJob, arch: &str) -> BuildKey {
    server_key(&job.commit, &job.kconfig, &job.job.compiler, arch)
}

fn with_kconfig(out: Outcome, kernel: &BuiltKernel) -> Outcome {
    match out {
        Outcome::Success(mut r) => {
            r.kconfig = std::fs::read_to_string(kernel.config()).ok();
            r.tuning
                .insert("build_secs".into(), format!("{:.1}", kernel.build_secs));
            Outcome::Success(r)
        }
        other => other,
    }
}

/// Records the initramfs the guest booted, once shared with the server, so
/// that a reproduction script boots the same bytes; a run whose initramfs
/// could not be shared still counts (its script then says so).
fn with_initramfs(
    out: Outcome,
    job: &LeasedJob,
    initramfs: &Path,
    shared: Option<&SharedBuilds>,
) -> Outcome {
    let (mut r, shared) = match (out, shared) {
        (Outcome::Success(r), Some(s)) => (r, s),
        (out, _) => return out,
    };
    match shared.share_initramfs(job.job_id, initramfs) {
        Ok(sha256) => {
            r.tuning
                .insert(conditions::INITRAMFS_SHA256.to_string(), sha256);
        }
        Err(e) => tracing::warn!(job = job.job_id, error = %e, "could not share the initramfs"),
    }
    Outcome::Success(r)
}

/// The job's `cpufreq_governor`, or `performance` when it names none: what
/// 0-day's machines run with, and the least noisy choice.
fn governor(job: &LeasedJob) -> &str {
    job.job
        .params
        .get("cpufreq_governor")
        .map_or("performance", String::as_str)
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The event before a kexec: which kernel, so a run's log names the kernel
/// its machine left for (releases repeat from commit to commit).
fn kexec_detail(kernel: &BuiltKernel) -> String {
    format!(
        "kexec into {} ({} on {}, build id {})",
        kernel.release,
        short(&kernel.key.commit),
        kernel.key.kconfig.name,
        kernel.build_id.as_deref().map_or("none", short)
    )
}

/// Creates a run's directory: traversable, not listable, by others (a root
/// agent's QEMU runs as the build user and opens its files there by name,
/// whatever the agent's umask).
fn make_run_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)
        .map_err(|e| AgentError::io(format!("creating {}", dir.display()), e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| AgentError::io(format!("chmod 711 {}", dir.display()), e))
}

/// The scratch directory of one run of one job.
pub fn run_dir(root: &Path, job: &LeasedJob) -> PathBuf {
    root.join(format!("job-{}-run-{}", job.job_id, job.run_index))
}
