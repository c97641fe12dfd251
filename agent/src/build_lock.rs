//! The lock on a kernel object directory, held by the build itself.
//!
//! Two `make O=dir` runs in one object directory corrupt each other's
//! dependency files (`fixdep: error opening file: fs/.eventpoll.o.d`), and
//! the failure is then blamed on the commit being built. An agent that is
//! stopped in the middle of a build leaves its make tree running (it is its
//! own process group), so the next agent on the machine would start a second
//! build in the same directory. The lock is therefore taken on a descriptor
//! that make and everything it starts inherit: it is released only when the
//! agent has finished with it *and* the last process of the build has exited,
//! and a new build waits for an orphaned one to end instead of racing it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag, Flock, FlockArg};

use crate::error::{AgentError, Result};
use crate::process::Cancel;

/// The lock file inside an object directory.
const LOCK_FILE: &str = ".kbot-build.lock";

/// How often a waiting build looks again.
const POLL: Duration = Duration::from_millis(500);

/// An object directory's build lock; the build's children inherit it.
/// Dropping it unlocks (held for that, never read).
#[derive(Debug)]
pub struct BuildLock {
    _flock: Flock<File>,
}

/// Takes `obj`'s build lock, waiting (until `cancel`) for another build of
/// that directory, this agent's or an orphaned one, to end.
pub fn lock(obj: &Path, cancel: &Cancel) -> Result<BuildLock> {
    let mut waiting_since: Option<Instant> = None;
    loop {
        if let Some(lock) = try_lock(obj)? {
            if let Some(since) = waiting_since {
                tracing::info!(dir = %obj.display(), waited_secs = since.elapsed().as_secs(),
                    "the earlier build in this object directory ended");
            }
            return Ok(lock);
        }
        if cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        if waiting_since.is_none() {
            tracing::warn!(dir = %obj.display(),
                "another build (an earlier agent's, still running) holds this object directory; waiting for it to end");
            waiting_since = Some(Instant::now());
        }
        std::thread::sleep(POLL);
    }
}

/// The lock if it is free now, `None` if a build holds it.
pub fn try_lock(obj: &Path) -> Result<Option<BuildLock>> {
    let path = obj.join(LOCK_FILE);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| AgentError::io(format!("opening {}", path.display()), e))?;
    // Rust opens files close-on-exec; the build must inherit this one.
    fcntl(file.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::empty()))
        .map_err(|e| AgentError::io(format!("making {} inheritable", path.display()), e.into()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(flock) => Ok(Some(BuildLock { _flock: flock })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(AgentError::io(
            format!("locking {}", path.display()),
            e.into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn an_orphaned_build_keeps_the_directory_locked_until_it_ends() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let held = try_lock(dir.path())?.expect("a fresh directory is free");
        assert!(try_lock(dir.path())?.is_none(), "one build at a time");

        // The build's process inherits the lock's descriptor ...
        let mut make = Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .map_err(|e| AgentError::io("spawning sleep", e))?;
        // ... and the agent dies without unlocking: its descriptor is just closed.
        let fd = held._flock.as_raw_fd();
        std::mem::forget(held);
        nix::unistd::close(fd).map_err(|e| AgentError::io("closing", e.into()))?;
        assert!(
            try_lock(dir.path())?.is_none(),
            "the orphaned build still holds the directory"
        );
        assert!(matches!(
            lock_with_cancel(dir.path()),
            Err(AgentError::Cancelled)
        ));

        make.kill().map_err(|e| AgentError::io("kill", e))?;
        make.wait().map_err(|e| AgentError::io("wait", e))?;
        let again = lock(dir.path(), &Cancel::new())?;
        drop(again);
        assert!(
            try_lock(dir.path())?.is_some(),
            "unlocked when the agent is done"
        );
        Ok(())
    }

    /// [`lock`] with the job already cancelled: it gives up instead of waiting.
    fn lock_with_cancel(obj: &Path) -> Result<BuildLock> {
        let cancel = Cancel::new();
        cancel.cancel();
        lock(obj, &cancel)
    }
}
