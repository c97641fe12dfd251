//! Who QEMU runs as, and the files it opens made openable by that user.
//!
//! A root agent runs QEMU (the patch's kernel's host) as its build user,
//! not as root: QEMU 7.2's own `-runas` dies under the seccomp filter's
//! `elevateprivileges=deny`, so the agent drops the privileges itself
//! ([`BuildUser::run`]). That user opens, by path:
//! - the kernel: the build cache is private to the agent, so QEMU gets a
//!   copy in the job's directory (an inherited descriptor does not help:
//!   `-kernel` takes a path, and opening `/proc/self/fd/N` checks the
//!   file's mode all the same);
//! - the initramfs the agent writes there, readable by all;
//! - the results channel, created by the agent and given to the user
//!   before QEMU starts (it opens an existing file it owns; it can create
//!   nothing in the directory, which stays the agent's: no file the agent
//!   writes there later can be a link the guest's side planted).
//!
//! The job's directory itself must be reachable by the user; it is the
//! agent's, mode 0711, under the agent's `runs` (0711 too), so the user
//! reaches it without reaching the agent's token, spool or caches.
//!
//! An agent that is not root runs QEMU as itself, on the files as they are.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{AgentError, Result};
use crate::sandbox::BuildUser;

/// The kernel's copy in the job's directory.
const KERNEL_COPY: &str = "kernel";

/// The kernel as QEMU opens it: `kernel` itself for the agent's own user,
/// else a copy in `dir` (checked to be reachable by `user` first).
pub(super) fn kernel(user: Option<&BuildUser>, kernel: &Path, dir: &Path) -> Result<PathBuf> {
    let Some(user) = user else {
        return Ok(kernel.to_path_buf());
    };
    user.reaches(dir)?;
    let copy = dir.join(KERNEL_COPY);
    // Booting the copy again (guest-noise's boots): nothing to do.
    if same_file(kernel, &copy) {
        return Ok(copy);
    }
    remove(&copy)?;
    fs::copy(kernel, &copy).map_err(|e| {
        AgentError::io(
            format!("copying {} to {}", kernel.display(), copy.display()),
            e,
        )
    })?;
    readable_by_all(&copy)?;
    Ok(copy)
}

/// Before each boot: the initramfs readable by `user`, and the results
/// channel a new empty file (the user's, when there is one).
pub(super) fn prepare(user: Option<&BuildUser>, initrd: &Path, results: &Path) -> Result<()> {
    remove(results)?;
    let Some(user) = user else {
        // QEMU creates it.
        return Ok(());
    };
    readable_by_all(initrd)?;
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(results)
        .map_err(|e| AgentError::io(format!("creating {}", results.display()), e))?;
    std::os::unix::fs::fchown(&file, Some(user.id.uid), Some(user.id.gid))
        .map_err(|e| AgentError::io(format!("giving {} to {}", results.display(), user.name), e))
}

/// `cmd` (a QEMU) runs as `user`, when there is one.
pub(super) fn apply(user: Option<&BuildUser>, cmd: &mut Command) -> Result<()> {
    match user {
        Some(u) => u.run(cmd),
        None => Ok(()),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            Err(AgentError::io(format!("removing {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// Whatever the agent's umask made of it.
fn readable_by_all(path: &Path) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))
        .map_err(|e| AgentError::io(format!("chmod 644 {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// The agent's own user: the kernel as it is, QEMU creates the results.
    #[test]
    fn without_a_user_nothing_is_copied_or_created() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let k = tmp.path().join("bzImage");
        fs::write(&k, "k").map_err(|e| AgentError::io("write", e))?;
        let results = tmp.path().join("results.txt");
        fs::write(&results, "an earlier boot's").map_err(|e| AgentError::io("write", e))?;
        assert_eq!(kernel(None, &k, tmp.path())?, k);
        prepare(None, &k, &results)?;
        assert!(!results.exists());
        assert!(!tmp.path().join(KERNEL_COPY).exists());
        Ok(())
    }

    /// A root agent (this test as root, as CI runs it): the kernel copied
    /// readable, the results file new and the user's, a closed directory
    /// refused. A missing build user fails it.
    #[test]
    fn a_root_agent_gives_the_build_user_its_files() -> Result<()> {
        let user = crate::sandbox::SandboxConfig::default().user()?;
        if !nix::unistd::geteuid().is_root() {
            assert_eq!(user, None, "only a root agent changes user");
            return Ok(());
        }
        let user = user.expect("a root agent has its build user");
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let dir = tmp.path();
        let private = dir.join("cache");
        fs::create_dir(&private).map_err(|e| AgentError::io("mkdir", e))?;
        fs::set_permissions(&private, fs::Permissions::from_mode(0o700))
            .map_err(|e| AgentError::io("chmod", e))?;
        let k = private.join("bzImage");
        fs::write(&k, "kernel bytes").map_err(|e| AgentError::io("write", e))?;
        fs::set_permissions(&k, fs::Permissions::from_mode(0o600))
            .map_err(|e| AgentError::io("chmod", e))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| AgentError::io("chmod", e))?;
        let err = kernel(Some(&user), &k, dir).expect_err("a closed directory");
        assert!(err.to_string().contains("cannot reach"), "{err}");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o711))
            .map_err(|e| AgentError::io("chmod", e))?;
        let copy = kernel(Some(&user), &k, dir)?;
        assert_eq!(copy, dir.join(KERNEL_COPY));
        assert_eq!(fs::read(&copy).ok().as_deref(), Some(&b"kernel bytes"[..]));
        assert_eq!(kernel(Some(&user), &copy, dir)?, copy, "the copy again");
        let initrd = dir.join("initramfs.cpio");
        fs::write(&initrd, "cpio").map_err(|e| AgentError::io("write", e))?;
        fs::set_permissions(&initrd, fs::Permissions::from_mode(0o600))
            .map_err(|e| AgentError::io("chmod", e))?;
        let results = dir.join("results.txt");
        fs::write(&results, "an earlier boot's").map_err(|e| AgentError::io("write", e))?;
        prepare(Some(&user), &initrd, &results)?;
        let meta = |p: &Path| fs::metadata(p).map_err(|e| AgentError::io("stat", e));
        let r = meta(&results)?;
        assert_eq!((r.uid(), r.gid(), r.len()), (user.id.uid, user.id.gid, 0));
        assert_eq!(r.mode() & 0o777, 0o600);
        assert_eq!(meta(&initrd)?.mode() & 0o777, 0o644);
        assert_eq!(meta(&copy)?.mode() & 0o777, 0o644);
        // What the user can open, opened as the user.
        assert!(user.can_open(&results)?.is_ok());
        let refused = user
            .can_open(&k)?
            .expect_err("the cache's kernel is not its");
        assert_eq!(refused.kind(), ErrorKind::PermissionDenied, "{refused}");
        Ok(())
    }
}
