//! A root agent's QEMU runs as its build user (issue #35): a real kernel
//! (Debian's, from /boot or where `scripts/install-test-deps` unpacks it)
//! boots under the real QEMU through the backend's own boot path, with the
//! kernel in a directory only root may read, as the build cache keeps it.
//! From the host, every QEMU process of the boot (the KVM probe's too) has
//! the build user's uid and gid while it runs, not root's; the guest's
//! console and its results channel come back all the same.
//!
//! As another user the agent is not root and QEMU runs as that user: the
//! same test then shows QEMU with the agent's own uid.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kbot_agent::process::{on_path, Cancel};
use kbot_agent::qemu::{Accel, QemuBackend, QemuConfig};
use kbot_agent::sandbox::{self, BuildUser, SandboxConfig};
use kbot_core::parsers::{ParseContext, Tool};
use kbot_core::programs::{Invocation, Repeat};

use super::guest::QEMU;
/// Where `scripts/install-test-deps` unpacks Debian's kernel when /boot has none.
const UNPACKED_KERNEL: &str = "/usr/local/lib/kbot/x86_64/vmlinuz";

/// The newest /boot/vmlinuz-*, else the unpacked one.
fn host_kernel() -> PathBuf {
    let mut boot: Vec<PathBuf> = std::fs::read_dir("/boot")
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
                })
                .collect()
        })
        .unwrap_or_default();
    boot.sort();
    let kernel = boot.pop().unwrap_or_else(|| UNPACKED_KERNEL.into());
    assert!(
        kernel.is_file(),
        "no host kernel: neither /boot/vmlinuz-* nor {UNPACKED_KERNEL} (scripts/install-test-deps)"
    );
    kernel
}

/// The uid and gid lines of /proc/PID/status (real, effective, saved, fs)
/// and its supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Creds {
    uids: Vec<u32>,
    gids: Vec<u32>,
    groups: Vec<u32>,
}

fn creds(pid: &str) -> Option<Creds> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<Vec<u32>> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(
            line[name.len()..]
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect(),
        )
    };
    Some(Creds {
        uids: field("Uid:")?,
        gids: field("Gid:")?,
        groups: field("Groups:")?,
    })
}

/// QEMU processes whose command line names `dir`, with their credentials.
fn qemus_in(dir: &Path) -> Vec<(String, Creds)> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.starts_with(QEMU) && text.contains(&needle) {
            if let Some(c) = creds(&pid) {
                found.push((pid, c));
            }
        }
    }
    found
}

fn backend(run_as: Option<BuildUser>) -> QemuBackend {
    QemuBackend::new(QemuConfig {
        // Probed: /dev/kvm is opened as the user QEMU runs as.
        force_accel: None,
        run_as,
        // The plan runs a busybox applet, never kbot-bench.
        ..super::guest::x86_64_config(512)
    })
}

#[test]
fn a_root_agent_boots_its_guest_as_the_build_user() {
    assert!(
        on_path(QEMU),
        "{QEMU} is not installed (scripts/install-test-deps)"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    // The job's directory, as the agent makes it: traversable, not listable.
    let dir = root.join("runs/job-1-run-0");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for d in [root.to_path_buf(), root.join("runs"), dir.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    // The kernel where the build cache keeps it: private to the agent.
    let cache = root.join("build-cache");
    std::fs::create_dir(&cache).expect("mkdir");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let kernel = cache.join("bzImage");
    std::fs::copy(host_kernel(), &kernel).expect("copy the host kernel");
    std::fs::set_permissions(&kernel, std::fs::Permissions::from_mode(0o600)).expect("chmod");

    // As in the agent: bwrap and, for root, the build user, or no start.
    let sandbox_cfg = SandboxConfig::default();
    sandbox::check(&sandbox_cfg, &[&dir])
        .expect("the build sandbox is usable (root: the kbot-build user exists)");
    let user = sandbox_cfg.user().expect("the build user");
    let me = nix::unistd::geteuid().as_raw();
    let (uid, gid) = match &user {
        Some(u) => (u.id.uid, u.id.gid),
        None => (me, nix::unistd::getegid().as_raw()),
    };
    assert_eq!(user.is_some(), me == 0, "only a root agent changes user");

    let backend = Arc::new(backend(user.clone()));
    let plan = vec![Invocation {
        program: "cat".into(),
        args: vec!["/proc/version".into()],
        repeat: Repeat::Times(1),
        parser: Tool::KbotBenchJson,
        context: ParseContext::default(),
    }];
    let done = Arc::new(AtomicBool::new(false));
    let boot = {
        let (backend, kernel, dir, done) =
            (backend.clone(), kernel.clone(), dir.clone(), done.clone());
        std::thread::spawn(move || {
            let rec = backend.boot(&kernel, &plan, 0, &dir, &Cancel::new(), &|_, _| {});
            done.store(true, Ordering::SeqCst);
            rec
        })
    };
    // Every QEMU of the boot, seen from the host while it runs.
    let mut seen: BTreeMap<String, Creds> = BTreeMap::new();
    while !done.load(Ordering::SeqCst) {
        seen.extend(qemus_in(&dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    let rec = boot
        .join()
        .expect("the boot thread")
        .expect("the guest boots");

    assert!(!seen.is_empty(), "no QEMU process was seen running");
    for (pid, c) in &seen {
        assert_eq!(c.uids, [uid; 4], "QEMU {pid}'s uids: {c:?}");
        assert_eq!(c.gids, [gid; 4], "QEMU {pid}'s gids: {c:?}");
        if me == 0 {
            assert!(
                !c.uids.contains(&0) && !c.groups.contains(&0),
                "{pid}: {c:?}"
            );
        }
    }
    assert!(
        qemus_in(&dir).is_empty(),
        "QEMU outlived its boot: {:?}",
        qemus_in(&dir)
    );

    // The guest's console and its results channel, as the build user wrote them.
    assert!(rec.console().contains("Linux version"), "{}", rec.console());
    let runs = rec.executions().expect("the guest ran its plan");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].stdout.starts_with("Linux version"), "{runs:?}");
    let results = std::fs::metadata(dir.join("results.txt")).expect("results.txt");
    assert_eq!((results.uid(), results.gid()), (uid, gid));

    // KVM: what the probe said agrees with what QEMU's user can open.
    let (accel, note) = backend.accel(&kernel);
    if let Some(u) = &user {
        if let Err(e) = u
            .can_open(Path::new("/dev/kvm"))
            .expect("the open probe runs")
        {
            assert_eq!(accel, Accel::Tcg, "{note}");
            assert!(
                note.contains(&format!("/dev/kvm does not open as {}", u.name)),
                "{note} ({e})"
            );
        }
    }
    println!(
        "QEMU ran as uid {uid} ({} processes seen); {note}",
        seen.len()
    );
}
