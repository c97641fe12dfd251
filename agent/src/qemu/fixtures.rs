//! Configurations the qemu module's unit tests share.

use std::path::PathBuf;
use std::time::Duration;

use super::{Clock, GuestOutput, QemuConfig, Topology};
use crate::guest_arch::GuestArch;
use crate::monitors::InterferenceLimits;

pub(super) fn topo(sockets: u32, numa: u32) -> Topology {
    Topology {
        sockets,
        cores_per_socket: 2,
        threads_per_core: 1,
        numa_nodes: numa,
        memory_mib: 1024,
    }
}

pub(super) fn config(clock: Clock) -> QemuConfig {
    QemuConfig {
        qemu: PathBuf::from("qemu-system-x86_64"),
        version: None,
        arch: GuestArch::X86_64,
        tcg_cpu: None,
        page_size: 4096,
        topology: topo(1, 1),
        busybox: PathBuf::from("/bin/busybox"),
        kbot_bench: PathBuf::from("kbot-bench"),
        perf: None,
        stress_ng: None,
        force_accel: None,
        boot_timeout: Duration::from_secs(60),
        run_timeout: Duration::from_secs(60),
        clock,
        pin_vcpus: true,
        warmup_runs: 0,
        interference: InterferenceLimits::default(),
        interference_retries: 2,
        output: GuestOutput::default(),
        run_as: None,
    }
}

pub(super) fn aarch64_config(clock: Clock) -> QemuConfig {
    QemuConfig {
        qemu: PathBuf::from("qemu-system-aarch64"),
        version: None,
        arch: GuestArch::Aarch64,
        tcg_cpu: Some("cortex-a57".into()),
        page_size: 65536,
        ..config(clock)
    }
}
