//! The x86_64 guest the QEMU tests boot: one vCPU on the wall clock, no
//! pinning, no retries, the agent's own user; each test changes what it is
//! about with struct-update syntax.

use std::time::Duration;

use kbot_agent::guest_arch::GuestArch;
use kbot_agent::monitors::InterferenceLimits;
use kbot_agent::qemu::{Accel, Clock, GuestOutput, QemuConfig, QemuVersion, Topology};

pub const QEMU: &str = "qemu-system-x86_64";

pub fn x86_64_config(memory_mib: u64) -> QemuConfig {
    QemuConfig {
        qemu: QEMU.into(),
        version: QemuVersion::probe(QEMU.as_ref()),
        arch: GuestArch::X86_64,
        tcg_cpu: None,
        page_size: 4096,
        topology: Topology {
            sockets: 1,
            cores_per_socket: 1,
            threads_per_core: 1,
            numa_nodes: 1,
            memory_mib,
        },
        busybox: "/bin/busybox".into(),
        kbot_bench: "/bin/busybox".into(),
        perf: None,
        stress_ng: None,
        force_accel: Some(Accel::Tcg),
        boot_timeout: Duration::from_secs(240),
        run_timeout: Duration::from_secs(120),
        clock: Clock::Wall,
        pin_vcpus: false,
        warmup_runs: 0,
        interference: InterferenceLimits::default(),
        interference_retries: 0,
        output: GuestOutput::default(),
        run_as: None,
    }
}
