//! The QEMU release the agent boots guests with, and whether it can give an
//! exact-clock (`-icount`) guest more than one vCPU.
//!
//! Under `-icount` QEMU runs every vCPU in turn on one thread. Before QEMU
//! 8.1 the first vCPU of each round got the whole budget up to the next
//! timer: when it busy-waits with interrupts off for another vCPU (Linux's
//! SMP bring-up, a TLB shootdown), that vCPU never runs and the guest
//! live-locks. x86_64 guests stop after `x86: Booting SMP configuration`.
//! QEMU 8.1 shares each budget among the vCPUs ("accel/tcg: ensure fairness
//! with icount", Jamie Iles, 2023), and 2- and 4-vCPU guests boot and
//! measure the same on every boot.

use std::path::Path;
use std::process::Command;

/// The first QEMU release whose round-robin TCG shares the icount budget.
pub const ICOUNT_SMP_SINCE: QemuVersion = QemuVersion {
    major: 8,
    minor: 1,
    patch: 0,
};

/// A QEMU release, as `qemu-system-* --version` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QemuVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl std::fmt::Display for QemuVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl QemuVersion {
    /// Whether an icount guest may have more than one vCPU.
    pub fn icount_smp(self) -> bool {
        self >= ICOUNT_SMP_SINCE
    }

    /// The release from `--version`'s first line (`QEMU emulator version
    /// 10.0.2 (Debian 1:10.0.2+ds-2...)`).
    pub fn parse(version_output: &str) -> Option<QemuVersion> {
        let rest = version_output.lines().next()?.split_once("version ")?.1;
        let number = rest
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()?;
        let mut parts = number.split('.').map(str::parse::<u32>);
        Some(QemuVersion {
            major: parts.next()?.ok()?,
            minor: parts.next()?.ok()?,
            patch: parts.next().and_then(|p| p.ok()).unwrap_or(0),
        })
    }

    /// Runs `qemu --version`; `None` when it does not run or says nothing
    /// this can read (the guest then gets what every release can do).
    pub fn probe(qemu: &Path) -> Option<QemuVersion> {
        let out = Command::new(qemu).arg("--version").output().ok()?;
        if !out.status.success() {
            return None;
        }
        QemuVersion::parse(&String::from_utf8_lossy(&out.stdout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_and_upstream_version_lines_parse() {
        let debian = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\n\
                      Copyright (c) 2003-2025 Fabrice Bellard and the QEMU Project developers\n";
        let v = QemuVersion::parse(debian);
        assert_eq!(
            v,
            Some(QemuVersion {
                major: 10,
                minor: 0,
                patch: 2
            })
        );
        assert!(v.is_some_and(QemuVersion::icount_smp));
        let bookworm =
            QemuVersion::parse("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)");
        assert_eq!(bookworm.map(|v| v.to_string()).as_deref(), Some("7.2.22"));
        assert!(!bookworm.is_some_and(QemuVersion::icount_smp));
        assert_eq!(
            QemuVersion::parse("QEMU emulator version 8.1\n").map(QemuVersion::icount_smp),
            Some(true)
        );
        assert_eq!(QemuVersion::parse("not qemu"), None);
        assert_eq!(QemuVersion::parse(""), None);
    }

    #[test]
    fn a_missing_binary_has_no_version() {
        assert_eq!(QemuVersion::probe(Path::new("/nonexistent/qemu")), None);
    }
}
