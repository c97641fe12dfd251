//! The `kexec` boot backend's state machine around the reboot.
//!
//! Before: persist the job and the identity of the built kernel, load it
//! (kexec_file_load(2)), sync and jump; if kexec cannot load or jump, fall
//! back to a normal reboot. After: the systemd unit restarts the agent, which finds the
//! persisted job and checks that the running kernel is the one it built
//! (release string and GNU build id) before running the workload; any other
//! kernel fails the job as `boot_failed`. The machine-changing calls sit
//! behind [`KexecSystem`] so this logic is tested without rebooting.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use kbot_api::agent::{FailureKind, LeasedJob};

use crate::build_cache::{read_json, write_json, BuiltKernel};
use crate::error::{AgentError, Result};
use crate::outcome::Failure;
use crate::process;

/// The calls that change or inspect the running kernel.
pub trait KexecSystem {
    fn running_release(&self) -> Result<String>;
    fn running_build_id(&self) -> Option<String>;
    fn kernel_cmdline(&self) -> String;
    fn kexec_load(&self, kernel: &Path, cmdline: &str) -> Result<()>;
    /// Jumps into the loaded kernel; returns only when that failed.
    fn kexec_exec(&self) -> Result<()>;
    /// A normal reboot; returns only when that failed.
    fn reboot(&self) -> Result<()>;
}

/// How the agent left the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Departure {
    Kexec,
    /// kexec failed; a normal reboot was asked for.
    Reboot,
}

/// What survives the reboot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingBoot {
    pub job: LeasedJob,
    pub release: String,
    pub build_id: Option<String>,
    pub kernel: PathBuf,
    pub departure: Departure,
    /// Why kexec was not used, when it was not.
    pub note: Option<String>,
}

/// What the agent finds after (re)starting.
#[derive(Debug)]
pub enum Resumed {
    /// The built kernel runs: run the workload of this job now.
    Verified(PendingBoot),
    /// Another kernel runs: the job failed to boot.
    WrongKernel(PendingBoot, Failure),
}

/// What [`KexecMachine::boot_into`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum BootStep {
    /// The built kernel already runs; no reboot needed.
    AlreadyRunning,
    /// The machine is going down (in a real system this is never observed).
    Departed(Departure),
}

pub struct KexecMachine<S: KexecSystem> {
    state_file: PathBuf,
    sys: S,
}

impl<S: KexecSystem> KexecMachine<S> {
    pub fn new(state_dir: &Path, sys: S) -> KexecMachine<S> {
        KexecMachine {
            state_file: state_dir.join("kexec-pending.json"),
            sys,
        }
    }

    fn is_running(&self, release: &str, build_id: Option<&str>) -> Result<bool> {
        let running = self.sys.running_release()?;
        let id_matches = match (build_id, self.sys.running_build_id()) {
            (Some(want), Some(have)) => want == have,
            // Without a build id on either side only the release can be checked.
            _ => true,
        };
        Ok(running == release && id_matches)
    }

    /// Leaves the running kernel for `kernel`, persisting `job` first.
    pub fn boot_into(&self, job: &LeasedJob, kernel: &BuiltKernel) -> Result<BootStep> {
        if self.is_running(&kernel.release, kernel.build_id.as_deref())? {
            return Ok(BootStep::AlreadyRunning);
        }
        let mut pending = PendingBoot {
            job: job.clone(),
            release: kernel.release.clone(),
            build_id: kernel.build_id.clone(),
            kernel: kernel.image(),
            departure: Departure::Kexec,
            note: None,
        };
        write_json(&self.state_file, &pending)?;
        let kexec = self
            .sys
            .kexec_load(&kernel.image(), &self.sys.kernel_cmdline())
            .and_then(|()| self.sys.kexec_exec());
        match kexec {
            Ok(()) => Ok(BootStep::Departed(Departure::Kexec)),
            Err(e) => {
                tracing::warn!(error = %e, "kexec failed; falling back to a normal reboot");
                pending.departure = Departure::Reboot;
                pending.note = Some(format!("kexec failed: {e}"));
                write_json(&self.state_file, &pending)?;
                self.sys.reboot()?;
                Ok(BootStep::Departed(Departure::Reboot))
            }
        }
    }

    /// Called at agent start: the job persisted before a reboot, if any.
    pub fn resume(&self) -> Result<Option<Resumed>> {
        let Some(pending) = read_json::<PendingBoot>(&self.state_file)? else {
            return Ok(None);
        };
        if self.is_running(&pending.release, pending.build_id.as_deref())? {
            return Ok(Some(Resumed::Verified(pending)));
        }
        let how = match pending.departure {
            Departure::Kexec => "kexec",
            Departure::Reboot => "reboot",
        };
        let running = identity(
            &self.sys.running_release()?,
            self.sys.running_build_id().as_deref(),
        );
        let built = identity(&pending.release, pending.build_id.as_deref());
        let note = pending
            .note
            .as_ref()
            .map(|n| format!("; {n}"))
            .unwrap_or_default();
        let detail = format!(
            "after the {how} the machine runs {running}, not the built {built}: the kernel did \
             not come up, or did not stay up, and the machine restarted on its own kernel{note}"
        );
        Ok(Some(Resumed::WrongKernel(
            pending,
            Failure::new(FailureKind::BootFailed, detail),
        )))
    }

    /// Forgets the persisted job once its outcome is spooled.
    pub fn finish(&self) -> Result<()> {
        match std::fs::remove_file(&self.state_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(AgentError::io("removing the kexec state", e))
            }
            _ => Ok(()),
        }
    }
}

/// A kernel as the failure detail names it: release and GNU build id.
fn identity(release: &str, build_id: Option<&str>) -> String {
    format!("{release} (build id {})", build_id.unwrap_or("none"))
}

/// The real machine: /proc and /sys, kexec_file_load(2) (kexec-tools'
/// `kexec -l` where the running kernel lacks it), reboot(2).
pub struct RealSystem;

impl KexecSystem for RealSystem {
    fn running_release(&self) -> Result<String> {
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .map_err(|e| AgentError::io("reading /proc/sys/kernel/osrelease", e))
    }

    fn running_build_id(&self) -> Option<String> {
        crate::elf_notes::running_build_id()
    }

    fn kernel_cmdline(&self) -> String {
        std::fs::read_to_string("/proc/cmdline")
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn kexec_load(&self, kernel: &Path, cmdline: &str) -> Result<()> {
        let file_load = kexec_file_load(kernel, cmdline);
        match file_load {
            Ok(()) => Ok(()),
            // A kernel without KEXEC_FILE: kexec-tools' kexec_load(2).
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => process::output(
                Command::new("kexec")
                    .arg("-l")
                    .arg(kernel)
                    .arg(format!("--command-line={cmdline}")),
            )
            .map(|_| ()),
            Err(e) => Err(AgentError::io(
                format!("kexec_file_load of {}", kernel.display()),
                e,
            )),
        }
    }

    fn kexec_exec(&self) -> Result<()> {
        // reboot(2) leaves without unmounting: what the agent persisted
        // (the pending job) must be on the disk first.
        // SAFETY: sync(2) and reboot(2) take no pointers.
        unsafe { libc::sync() };
        let rc = unsafe { libc::reboot(libc::LINUX_REBOOT_CMD_KEXEC) };
        Err(AgentError::io(
            "reboot(LINUX_REBOOT_CMD_KEXEC)",
            if rc == 0 {
                std::io::Error::other("returned")
            } else {
                std::io::Error::last_os_error()
            },
        ))
    }

    fn reboot(&self) -> Result<()> {
        // SAFETY: sync(2) takes no pointers.
        unsafe { libc::sync() };
        match process::output(Command::new("systemctl").arg("reboot")) {
            Ok(_) => Ok(()),
            // No systemd (a minimal lab image): the machine's firmware
            // boots its default kernel.
            Err(e) => {
                tracing::warn!(error = %e, "systemctl reboot failed; reboot(2)");
                // SAFETY: reboot(2) takes no pointers.
                unsafe { libc::reboot(libc::LINUX_REBOOT_CMD_RESTART) };
                Err(AgentError::io(
                    "reboot(LINUX_REBOOT_CMD_RESTART)",
                    std::io::Error::last_os_error(),
                ))
            }
        }
    }
}

/// Loads `kernel` with `cmdline` and no initramfs for the next
/// reboot(LINUX_REBOOT_CMD_KEXEC).
fn kexec_file_load(kernel: &Path, cmdline: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const KEXEC_FILE_NO_INITRAMFS: libc::c_ulong = 0x4;
    let image = std::fs::File::open(kernel)?;
    let cmdline = std::ffi::CString::new(cmdline)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let bytes = cmdline.as_bytes_with_nul();
    // SAFETY: the fd is open for the call, and the command line pointer and
    // its length (with the NUL the kernel requires) come from one CString.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kexec_file_load,
            image.as_raw_fd(),
            -1 as libc::c_int,
            bytes.len() as libc::c_ulong,
            bytes.as_ptr(),
            KEXEC_FILE_NO_INITRAMFS,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::build_cache::BuildKey;
    use kbot_api::agent::KconfigSpec;

    /// A machine whose running kernel changes only through kexec or reboot.
    struct Machine {
        running: RefCell<(String, Option<String>)>,
        loaded: RefCell<Option<PathBuf>>,
        kexec_works: bool,
        /// What a normal reboot boots (the distribution's default kernel).
        default_kernel: (String, Option<String>),
        /// The image path → (release, build id) of kernels on disk.
        images: Vec<(PathBuf, String, Option<String>)>,
        calls: RefCell<Vec<String>>,
    }

    impl KexecSystem for &Machine {
        fn running_release(&self) -> Result<String> {
            Ok(self.running.borrow().0.clone())
        }
        fn running_build_id(&self) -> Option<String> {
            self.running.borrow().1.clone()
        }
        fn kernel_cmdline(&self) -> String {
            "console=ttyS0 root=/dev/vda".into()
        }
        fn kexec_load(&self, kernel: &Path, cmdline: &str) -> Result<()> {
            self.calls
                .borrow_mut()
                .push(format!("load {} {cmdline}", kernel.display()));
            *self.loaded.borrow_mut() = Some(kernel.to_path_buf());
            Ok(())
        }
        fn kexec_exec(&self) -> Result<()> {
            self.calls.borrow_mut().push("exec".into());
            if !self.kexec_works {
                return Err(AgentError::Command {
                    command: "kexec -e".into(),
                    detail: "Invalid argument".into(),
                });
            }
            let loaded = self.loaded.borrow().clone();
            let img = self
                .images
                .iter()
                .find(|(p, _, _)| Some(p) == loaded.as_ref());
            if let Some((_, rel, id)) = img {
                *self.running.borrow_mut() = (rel.clone(), id.clone());
            }
            Ok(())
        }
        fn reboot(&self) -> Result<()> {
            self.calls.borrow_mut().push("reboot".into());
            *self.running.borrow_mut() = self.default_kernel.clone();
            Ok(())
        }
    }

    fn job() -> Result<LeasedJob> {
        let text = r#"{"job_id": 7, "submission_id": 1, "attempt": 1, "lease_expires_at": 0, "heartbeat_interval_secs": 10,
            "repo": {"name": "linux", "url": "/srv/linux"}, "commit": "abc", "run_index": 0,
            "job": {"testcase": "lmbench3", "program": "lmbench3", "options": {}, "params": {}, "kconfig": "k", "compiler": "gcc-12", "tbox_group": null, "runs": 1},
            "resolved": {}, "kconfig": {"name": "k", "base": "defconfig", "fragment": "", "full": null}, "result_path": "x"}"#;
        serde_json::from_str(text).map_err(|e| AgentError::parse("job", e.to_string()))
    }

    fn built(dir: &Path) -> BuiltKernel {
        BuiltKernel {
            key: BuildKey {
                commit: "abc".into(),
                kconfig: KconfigSpec {
                    name: "k".into(),
                    base: None,
                    fragment: String::new(),
                    full: None,
                },
                compiler: "gcc-12".into(),
                arch: "x86_64".into(),
            },
            release: "6.1.0-kbot".into(),
            build_id: Some("1234".into()),
            build_secs: 1.0,
            size_bytes: 0,
            last_used_ms: 0,
            dir: dir.to_path_buf(),
        }
    }

    fn machine(dir: &Path, kexec_works: bool, built_id: &str) -> Machine {
        Machine {
            running: RefCell::new(("6.1.0-debian".into(), Some("ffff".into()))),
            loaded: RefCell::new(None),
            kexec_works,
            default_kernel: ("6.1.0-debian".into(), Some("ffff".into())),
            images: vec![(
                dir.join("bzImage"),
                "6.1.0-kbot".into(),
                Some(built_id.into()),
            )],
            calls: RefCell::new(Vec::new()),
        }
    }

    #[test]
    fn kexec_then_restart_verifies_the_kernel_and_resumes_the_job() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let m = machine(tmp.path(), true, "1234");
        let step = KexecMachine::new(tmp.path(), &m).boot_into(&job()?, &built(tmp.path()))?;
        assert_eq!(step, BootStep::Departed(Departure::Kexec));
        assert_eq!(
            m.calls.borrow()[0],
            format!(
                "load {} console=ttyS0 root=/dev/vda",
                tmp.path().join("bzImage").display()
            )
        );
        // The agent process restarts: a fresh state machine reads the persisted job.
        let after = KexecMachine::new(tmp.path(), &m);
        match after.resume()? {
            Some(Resumed::Verified(p)) => {
                assert_eq!((p.job.job_id, p.departure), (7, Departure::Kexec))
            }
            other => panic!("expected a verified kernel, got {other:?}"),
        }
        after.finish()?;
        assert!(
            after.resume()?.is_none(),
            "the job is forgotten once finished"
        );
        Ok(())
    }

    #[test]
    fn a_failed_kexec_falls_back_to_reboot_and_the_wrong_kernel_fails_the_boot() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let m = machine(tmp.path(), false, "1234");
        let step = KexecMachine::new(tmp.path(), &m).boot_into(&job()?, &built(tmp.path()))?;
        assert_eq!(step, BootStep::Departed(Departure::Reboot));
        assert_eq!(m.calls.borrow().last().map(String::as_str), Some("reboot"));
        match KexecMachine::new(tmp.path(), &m).resume()? {
            Some(Resumed::WrongKernel(p, f)) => {
                assert_eq!(p.departure, Departure::Reboot);
                assert_eq!(f.kind, FailureKind::BootFailed);
                assert!(
                    f.detail.contains("6.1.0-debian") && f.detail.contains("kexec failed"),
                    "{}",
                    f.detail
                );
            }
            other => panic!("expected the wrong kernel, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn a_kernel_with_the_right_release_but_another_build_id_is_rejected() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let m = machine(tmp.path(), true, "9999");
        KexecMachine::new(tmp.path(), &m).boot_into(&job()?, &built(tmp.path()))?;
        assert!(matches!(
            KexecMachine::new(tmp.path(), &m).resume()?,
            Some(Resumed::WrongKernel(..))
        ));
        Ok(())
    }

    #[test]
    fn the_running_kernel_needs_no_reboot() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let m = machine(tmp.path(), true, "1234");
        *m.running.borrow_mut() = ("6.1.0-kbot".into(), Some("1234".into()));
        let step = KexecMachine::new(tmp.path(), &m).boot_into(&job()?, &built(tmp.path()))?;
        assert_eq!(step, BootStep::AlreadyRunning);
        assert!(m.calls.borrow().is_empty());
        Ok(())
    }

    #[test]
    fn the_real_system_reads_this_kernel() -> Result<()> {
        let release = RealSystem.running_release()?;
        assert_eq!(release, crate::hwinfo::read_host()?.kernel);
        Ok(())
    }
}
