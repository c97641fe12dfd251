//! A small real filesystem that fills up: a tmpfs of a few megabytes
//! mounted on a temporary directory, unmounted when dropped.
//!
//! Mounting needs root (or CAP_SYS_ADMIN). Where that is impossible the
//! disk-full tests fail: they are never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub struct Tmpfs {
    dir: TempDir,
}

impl Tmpfs {
    /// A tmpfs of `size` bytes; panics, naming why, when it cannot be mounted.
    pub fn mount(size: u64) -> Tmpfs {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output();
        let why = match out {
            Ok(o) if o.status.success() => return Tmpfs { dir },
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => format!("cannot run mount: {e}"),
        };
        panic!("cannot mount a {size}-byte tmpfs (needs root): {why}");
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes still free for an unprivileged writer.
    pub fn free(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.path())
            .output()
            .expect("df runs");
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df's avail column")
    }

    /// Fills the filesystem until about `leave` bytes are free; returns the filler.
    pub fn fill_leaving(&self, leave: u64) -> PathBuf {
        let filler = self.path().join("filler");
        let free = self.free();
        let size = free.saturating_sub(leave);
        std::fs::write(&filler, vec![0u8; usize::try_from(size).expect("size")])
            .expect("write the filler");
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = Command::new("umount").arg(self.dir.path()).status();
        if !status.is_ok_and(|s| s.success()) {
            // Lazily, if something still holds a file there.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}
