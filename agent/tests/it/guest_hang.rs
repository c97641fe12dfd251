//! Guests that misbehave under the real QEMU, each a multiboot kernel of a
//! few bytes (no kernel to build or download):
//! - one that hangs at boot (halts with interrupts off): the boot timeout
//!   fires, QEMU is killed (no process is left), and the run fails as
//!   `boot_failed` with the reason and the limit;
//! - one that writes its results channel forever (the attacker's kernel,
//!   for a posted patch): QEMU is killed past the channel's size limit and
//!   the run fails saying so.

use std::path::Path;
use std::time::{Duration, Instant};

use kbot_agent::outcome::{Failure, Outcome};
use kbot_agent::process::{on_path, Cancel};
use kbot_agent::qemu::{GuestOutput, QemuBackend, QemuConfig};
use kbot_api::agent::FailureKind;
use kbot_core::parsers::{ParseContext, Tool};
use kbot_core::programs::{Invocation, Repeat};

use super::guest::QEMU;
const BOOT_TIMEOUT: Duration = Duration::from_secs(3);

/// A multiboot (a.out kludge) image loaded at 1 MiB whose entry is
/// `cli; hlt; jmp .-1`: it never gets anywhere.
fn hanging_kernel(path: &Path) {
    multiboot_kernel(path, &[0xfa, 0xf4, 0xeb, 0xfd]);
}

/// A multiboot image whose entry is `mov dx, 0x2f8; mov al, 'A'; out dx,
/// al; jmp .-1`: the second serial port (the results channel) forever.
fn flooding_kernel(path: &Path) {
    multiboot_kernel(
        path,
        &[0x66, 0xba, 0xf8, 0x02, 0xb0, 0x41, 0xee, 0xeb, 0xfd],
    );
}

/// A multiboot (a.out kludge) image loaded at 1 MiB running `code`.
fn multiboot_kernel(path: &Path, code: &[u8]) {
    const MAGIC: u32 = 0x1BAD_B002;
    const FLAGS: u32 = 1 << 16; // the load addresses below are valid
    const LOAD: u32 = 0x0010_0000;
    let header = [
        MAGIC,
        FLAGS,
        0u32.wrapping_sub(MAGIC.wrapping_add(FLAGS)),
        LOAD,      // header_addr
        LOAD,      // load_addr
        0,         // load_end_addr: the whole file
        0,         // bss_end_addr: none
        LOAD + 32, // entry_addr: right after this header
    ];
    let mut image: Vec<u8> = header.iter().flat_map(|w| w.to_le_bytes()).collect();
    image.extend_from_slice(code);
    std::fs::write(path, image).expect("write the kernel");
}

/// Processes whose command line mentions `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(needle) {
                found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// The x86_64 TCG backend these guests run on.
fn backend(boot_timeout: Duration, output: GuestOutput) -> QemuBackend {
    QemuBackend::new(QemuConfig {
        // Never run: the guest halts before anything of the initramfs.
        busybox: "/bin/sh".into(),
        kbot_bench: "/bin/sh".into(),
        boot_timeout,
        run_timeout: Duration::from_secs(3),
        output,
        ..super::guest::x86_64_config(256)
    })
}

/// Runs `kernel` (a guest that never gets to /init) and returns how its
/// run failed and how long it took.
fn failed_run(backend: &QemuBackend, kernel: &Path, dir: &Path) -> (Failure, Duration) {
    let plan = [Invocation {
        program: "kbot-bench".into(),
        args: vec![],
        repeat: Repeat::Times(1),
        parser: Tool::KbotBenchJson,
        context: ParseContext::default(),
    }];
    let start = Instant::now();
    let out = backend
        .run(kernel, &plan, dir, &Cancel::new(), &|_, _| {})
        .expect("the run ends with an outcome");
    let Outcome::Failed(failure) = out else {
        panic!("a misbehaving guest produced a result");
    };
    (failure, start.elapsed())
}

fn qemu_installed() -> bool {
    if on_path(QEMU) {
        return true;
    }
    let why = format!("{QEMU} is not installed (scripts/install-test-deps)");
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
    false
}

#[test]
fn a_guest_hung_at_boot_times_out_and_its_qemu_is_killed() {
    if !qemu_installed() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kernel = dir.path().join("hang.bin");
    hanging_kernel(&kernel);
    let backend = backend(BOOT_TIMEOUT, GuestOutput::default());
    let (failure, took) = failed_run(&backend, &kernel, dir.path());
    assert_eq!(failure.kind, FailureKind::BootFailed, "{}", failure.detail);
    assert!(
        failure
            .detail
            .starts_with("timed out after 3 s in boot: no /init ran; QEMU was killed"),
        "{}",
        failure.detail
    );
    assert!(
        took >= BOOT_TIMEOUT && took < BOOT_TIMEOUT + Duration::from_secs(10),
        "{took:?}"
    );
    let left = processes_with(&kernel.display().to_string());
    assert!(left.is_empty(), "QEMU outlived its timeout: {left:?}");
}

#[test]
fn a_guest_flooding_its_results_channel_is_stopped_at_the_limit() {
    if !qemu_installed() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kernel = dir.path().join("flood.bin");
    flooding_kernel(&kernel);
    let limit = 64 << 10;
    let backend = backend(
        Duration::from_secs(60),
        GuestOutput {
            console_keep_bytes: 1 << 20,
            results_max_bytes: limit,
        },
    );
    let (failure, took) = failed_run(&backend, &kernel, dir.path());
    assert_eq!(failure.kind, FailureKind::Incomplete, "{}", failure.detail);
    assert!(
        failure.detail.starts_with(&format!(
            "the guest wrote more than {limit} bytes to its results channel"
        )),
        "{}",
        failure.detail
    );
    assert!(
        took < Duration::from_secs(30),
        "stopped at the limit, not the timeout: {took:?}"
    );
    let written = std::fs::metadata(dir.path().join("results.txt")).map(|m| m.len());
    assert!(written.as_ref().is_ok_and(|n| *n < 64 << 20), "{written:?}");
    let left = processes_with(&kernel.display().to_string());
    assert!(left.is_empty(), "QEMU outlived the flood: {left:?}");
}
