//! The KVM probe: whether guests boot under KVM on this machine, decided once
//! per agent by booting the first kernel with early printk.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::command::SECCOMP;
use super::config::Accel;
use super::runas;
use crate::error::{AgentError, Result};
use crate::process::{kill_group, spawn_tied};
use crate::sandbox::BuildUser;

const KVM: &str = "/dev/kvm";

/// Seconds a KVM probe guest gets to print its first console line.
const PROBE_SECS: u64 = 15;

/// Boots `kernel` under KVM with early printk: on machines where /dev/kvm
/// opens but guests hang (before any output, even in long-mode setup), no
/// `Linux version` line appears and TCG is used instead. /dev/kvm is
/// opened, and the probe guest run, as `user` when QEMU runs as it.
pub(super) fn probe_accel(qemu: &Path, kernel: &Path, user: Option<&BuildUser>) -> (Accel, String) {
    if let Err(why) = kvm_opens(user) {
        return (Accel::Tcg, format!("tcg ({why})"));
    }
    match kvm_boots(qemu, kernel, user) {
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

/// Whether QEMU's user can open /dev/kvm read-write, or why not.
fn kvm_opens(user: Option<&BuildUser>) -> std::result::Result<(), String> {
    let opened = match user {
        None => std::fs::File::options()
            .read(true)
            .write(true)
            .open(KVM)
            .map(drop),
        Some(u) => u.can_open(Path::new(KVM)).map_err(|e| e.to_string())?,
    };
    opened.map_err(|e| match user {
        None => format!("{KVM} is not usable: {e}"),
        Some(u) => format!(
            "{KVM} does not open as {}, the user QEMU runs as: {e}; \
             add it to the group of {KVM} (kvm)",
            u.name
        ),
    })
}

fn kvm_boots(qemu: &Path, kernel: &Path, user: Option<&BuildUser>) -> Result<bool> {
    let mut cmd = Command::new(qemu);
    runas::apply(user, &mut cmd)?;
    cmd.args([
        "-accel",
        "kvm",
        "-cpu",
        "host",
        // The probe boots the first job's kernel: the same filter as a job's QEMU.
        "-sandbox",
        SECCOMP,
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
