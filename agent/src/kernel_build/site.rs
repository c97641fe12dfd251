//! Where one build happens: the sources it reads, the object directory and
//! ccache it may write, and the work directory's permissions.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::sources::Sources;
use crate::build_cache::BuildKey;
use crate::error::{AgentError, Result};
use crate::process::output;
use crate::sandbox::BuildIdentity;

/// One build's place: its sources, object directory, ccache and user.
pub(super) struct Site<'a> {
    pub(super) src: &'a Sources,
    pub(super) obj: &'a Path,
    pub(super) ccache: Option<Ccache>,
    pub(super) identity: Option<BuildIdentity>,
}

/// The shared ccache, as one build may use it.
pub(super) struct Ccache {
    pub(super) dir: PathBuf,
    pub(super) writable: bool,
}

impl Ccache {
    /// ccache's environment: the operator's `CCACHE_*` settings (the
    /// agent's `KBOT_CCACHE_SIZE` is one), then the directory; a read-only
    /// use keeps no statistics either (they are files in the directory).
    pub(super) fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("CCACHE_"))
            .collect();
        env.push(("CCACHE_DIR".into(), self.dir.display().to_string()));
        env.push(("CCACHE_TEMPDIR".into(), "/tmp/ccache".into()));
        if !self.writable {
            env.push(("CCACHE_READONLY".into(), "1".into()));
            env.push(("CCACHE_NOSTATS".into(), "1".into()));
        }
        env
    }
}

/// The object directory a build writes: the shared one, or (untrusted) a
/// copy of it removed when the build is done, whatever its end.
pub(super) struct ObjectDir {
    pub(super) path: PathBuf,
    pub(super) throw_away: bool,
}

impl ObjectDir {
    pub(super) fn for_build(
        work_dir: &Path,
        shared: &Path,
        key: &BuildKey,
        trusted: bool,
    ) -> Result<ObjectDir> {
        if trusted {
            return Ok(ObjectDir {
                path: shared.to_path_buf(),
                throw_away: false,
            });
        }
        let path = work_dir.join("job-objs").join(key.id());
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(work_dir.join("job-objs"))
            .map_err(|e| AgentError::io("creating job-objs/", e))?;
        // Owners and mtimes kept: make rebuilds only what the commit changed.
        let mut from = shared.as_os_str().to_owned();
        from.push("/.");
        output(
            Command::new("cp")
                .args(["-a", "--reflink=auto", "--"])
                .arg(from)
                .arg(&path),
        )?;
        Ok(ObjectDir {
            path,
            throw_away: true,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ObjectDir {
    fn drop(&mut self) {
        if self.throw_away {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Makes the work directory traversable but not listable by others (the
/// build user mounts its worktrees and object directories through it) and
/// the agent's own state in it private.
pub(super) fn private_work_dir(work_dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(work_dir)
        .map_err(|e| AgentError::io(format!("creating {}", work_dir.display()), e))?;
    let set = |p: &Path, mode: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(mode))
            .map_err(|e| AgentError::io(format!("chmod {mode:o} {}", p.display()), e))
    };
    set(work_dir, 0o711)?;
    for (name, mode) in [
        ("agent.json", 0o600),
        ("spool", 0o700),
        ("build-cache", 0o700),
        ("staging", 0o700),
        ("failed-builds", 0o700),
        // Traversable, not listable: QEMU runs as the build user and opens
        // its job's files there (`qemu/runas.rs`).
        ("runs", 0o711),
    ] {
        let p = work_dir.join(name);
        if p.exists() {
            set(&p, mode)?;
        }
    }
    Ok(())
}

pub(super) fn object_dir_name(key: &BuildKey) -> String {
    let id = BuildKey {
        commit: String::new(),
        kconfig: key.kconfig.clone(),
        compiler: key.compiler.clone(),
        arch: key.arch.clone(),
    }
    .id();
    format!("{}-{}", key.kconfig.name.replace('/', "_"), id)
}
