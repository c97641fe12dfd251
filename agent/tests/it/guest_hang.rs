//! A guest that hangs at boot under the real QEMU: the boot timeout fires,
//! QEMU is killed (no process is left), and the run fails as `boot_failed`
//! with the reason and the limit. The guest is a 36-byte multiboot kernel
//! that halts with interrupts off: a boot that never reaches /init, with
//! no kernel to build or download.

use std::path::Path;
use std::time::{Duration, Instant};

use kbot_agent::guest_arch::GuestArch;
use kbot_agent::monitors::InterferenceLimits;
use kbot_agent::outcome::Outcome;
use kbot_agent::process::{on_path, Cancel};
use kbot_agent::qemu::{Accel, Clock, QemuBackend, QemuConfig, Topology};
use kbot_api::agent::FailureKind;
use kbot_core::parsers::{ParseContext, Tool};
use kbot_core::programs::{Invocation, Repeat};

const QEMU: &str = "qemu-system-x86_64";
const BOOT_TIMEOUT: Duration = Duration::from_secs(3);

/// A multiboot (a.out kludge) image loaded at 1 MiB whose entry is
/// `cli; hlt; jmp .-1`: it never gets anywhere.
fn hanging_kernel(path: &Path) {
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
    image.extend_from_slice(&[0xfa, 0xf4, 0xeb, 0xfd]);
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

#[test]
fn a_guest_hung_at_boot_times_out_and_its_qemu_is_killed() {
    if !on_path(QEMU) {
        let why = format!("{QEMU} is not installed (scripts/install-test-deps)");
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kernel = dir.path().join("hang.bin");
    hanging_kernel(&kernel);
    let backend = QemuBackend::new(QemuConfig {
        qemu: QEMU.into(),
        arch: GuestArch::X86_64,
        tcg_cpu: None,
        page_size: 4096,
        topology: Topology {
            sockets: 1,
            cores_per_socket: 1,
            threads_per_core: 1,
            numa_nodes: 1,
            memory_mib: 256,
        },
        // Never run: the guest halts before anything of the initramfs.
        busybox: "/bin/sh".into(),
        kbot_bench: "/bin/sh".into(),
        perf: None,
        force_accel: Some(Accel::Tcg),
        boot_timeout: BOOT_TIMEOUT,
        run_timeout: Duration::from_secs(3),
        clock: Clock::Wall,
        pin_vcpus: false,
        warmup_runs: 0,
        interference: InterferenceLimits::default(),
        interference_retries: 0,
    });
    let plan = [Invocation {
        program: "kbot-bench".into(),
        args: vec![],
        repeat: Repeat::Times(1),
        parser: Tool::KbotBenchJson,
        context: ParseContext::default(),
    }];
    let start = Instant::now();
    let out = backend
        .run(&kernel, &plan, dir.path(), &Cancel::new(), &|_, _| {})
        .expect("the run ends with an outcome");
    let took = start.elapsed();
    let Outcome::Failed(failure) = out else {
        panic!("a hung guest produced a result");
    };
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
