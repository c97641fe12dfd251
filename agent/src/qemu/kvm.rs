//! The KVM probe: whether guests boot under KVM on this machine, decided once
//! per agent by booting the first kernel with early printk.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::config::Accel;
use crate::error::{AgentError, Result};
use crate::process::{kill_group, spawn_tied};

/// Seconds a KVM probe guest gets to print its first console line.
const PROBE_SECS: u64 = 15;

/// Boots `kernel` under KVM with early printk: on machines where /dev/kvm
/// opens but guests hang (before any output, even in long-mode setup), no
/// `Linux version` line appears and TCG is used instead.
pub(super) fn probe_accel(qemu: &Path, kernel: &Path) -> (Accel, String) {
    if std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return (Accel::Tcg, "tcg (/dev/kvm is not usable)".to_string());
    }
    match kvm_boots(qemu, kernel) {
        Ok(true) => (
            Accel::Kvm,
            "kvm (probe boot printed its banner)".to_string(),
        ),
        Ok(false) => (
            Accel::Tcg,
            format!("tcg (/dev/kvm opens but a KVM guest printed nothing within {PROBE_SECS} s)"),
        ),
        Err(e) => (Accel::Tcg, format!("tcg (KVM probe failed: {e})")),
    }
}

fn kvm_boots(qemu: &Path, kernel: &Path) -> Result<bool> {
    let mut cmd = Command::new(qemu);
    cmd.args([
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
    ])
    .args([
        "-m",
        "256M",
        "-serial",
        "stdio",
        "-append",
        "console=ttyS0 earlyprintk=serial panic=-1",
    ])
    .arg("-kernel")
    .arg(kernel);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = spawn_tied(&mut cmd)?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| AgentError::Config("qemu has no stdout".into()))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if line.contains("Linux version") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let seen = rx.recv_timeout(Duration::from_secs(PROBE_SECS)).is_ok();
    kill_group(&mut child);
    Ok(seen)
}
