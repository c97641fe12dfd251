//! What the qemu backend is configured with: the guest's [`Topology`], the
//! accelerator ([`Accel`]), how time passes in the guest ([`Clock`]), and
//! [`QemuConfig`], with the topology and CPU model a guest gets from it.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{AgentError, Result};
use crate::guest_arch::GuestArch;
use crate::monitors::InterferenceLimits;
use crate::sandbox::BuildUser;

use super::version::QemuVersion;

/// The guest machine of a tbox group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub numa_nodes: u32,
    pub memory_mib: u64,
}

impl Topology {
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }

    /// QEMU's `-smp`, `-m` and NUMA arguments. NUMA nodes split the sockets
    /// (and memory) evenly; a node count that does not divide the sockets
    /// is a configuration error.
    pub fn qemu_args(&self) -> Result<Vec<String>> {
        if self.cpus() == 0 || self.sockets.checked_rem(self.numa_nodes) != Some(0) {
            return Err(AgentError::Config(format!(
                "guest topology {self:?}: need at least one CPU and NUMA nodes that divide the sockets"
            )));
        }
        let mut args = vec![
            "-m".to_string(),
            format!("{}M", self.memory_mib),
            "-smp".to_string(),
            format!(
                "cpus={},sockets={},cores={},threads={}",
                self.cpus(),
                self.sockets,
                self.cores_per_socket,
                self.threads_per_core
            ),
        ];
        if self.numa_nodes > 1 {
            let per_node_cpus = self.cpus() / self.numa_nodes;
            let per_node_mem = self.memory_mib / u64::from(self.numa_nodes);
            for n in 0..self.numa_nodes {
                let first = n * per_node_cpus;
                args.extend([
                    "-object".to_string(),
                    format!("memory-backend-ram,id=mem{n},size={per_node_mem}M"),
                    "-numa".to_string(),
                    format!(
                        "node,nodeid={n},cpus={first}-{},memdev=mem{n}",
                        first + per_node_cpus - 1
                    ),
                ]);
            }
        }
        Ok(args)
    }
}

/// Where the guest's CPUs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub(super) fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// How time passes in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// `-icount shift=N,sleep=off` on single-threaded TCG: every guest
    /// instruction advances the guest's clock by 2^N ns and idle time is
    /// skipped, so what the guest measures is instructions executed, the
    /// same on every boot whatever else the host does. One vCPU, unless
    /// `smp` asks for the tbox group's on a QEMU that can (see
    /// [`guest_topology`]).
    Icount { shift: u32, smp: bool },
    /// The host's clock (multi-threaded TCG, or KVM where it works): the
    /// guest measures host time, with the host's noise.
    Wall,
}

impl Clock {
    /// The `qemu_clock` entry of each result's tuning map: both sides of a
    /// pair must show the same.
    pub fn describe(self) -> String {
        match self {
            Clock::Icount { shift, .. } => format!("icount shift={shift},sleep=off"),
            Clock::Wall => "wall".to_string(),
        }
    }
}

/// What the backend needs besides the kernel.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub qemu: PathBuf,
    /// `qemu --version`, probed once (`None`: unknown, treated as a release
    /// without icount SMP).
    pub version: Option<QemuVersion>,
    /// The guest's architecture (machine, console, results channel).
    pub arch: GuestArch,
    /// QEMU's `-cpu` under TCG (`None`: QEMU's default).
    pub tcg_cpu: Option<String>,
    /// The page size the guest kernel must run with (checked after boot).
    pub page_size: u64,
    pub topology: Topology,
    /// Static busybox and kbot-bench put into the initramfs.
    pub busybox: PathBuf,
    pub kbot_bench: PathBuf,
    /// The static perf that profiles one extra execution per invocation
    /// ([`crate::guest_profile`]); `None`: no profile.
    pub perf: Option<PathBuf>,
    /// The guest's stress-ng tree (`bin/stress-ng`, its shared libraries and
    /// loader under their paths; scripts/build-guest-stress-ng), put into
    /// the initramfs of a job that runs stress-ng; `None`: such jobs fail.
    pub stress_ng: Option<PathBuf>,
    /// `None`: probe KVM and fall back to TCG (wall clock only: icount is TCG).
    pub force_accel: Option<Accel>,
    pub boot_timeout: Duration,
    pub run_timeout: Duration,
    pub clock: Clock,
    /// Pin each vCPU thread to its own host CPU (wall clock only).
    pub pin_vcpus: bool,
    /// Executions of each invocation run and discarded before the measured ones.
    pub warmup_runs: u32,
    /// When a wall-clock run counts as measured under host interference.
    pub interference: InterferenceLimits,
    /// Wall clock: how often a run measured under interference is redone
    /// before the job is reported as an infrastructure failure.
    pub interference_retries: u32,
    /// How much of the guest's output the agent keeps.
    pub output: GuestOutput,
    /// The user QEMU runs as: a root agent's build user (`runas.rs`);
    /// `None`: the agent's own user.
    pub run_as: Option<BuildUser>,
}

/// Bounds on what the guest (the attacker's kernel, for a posted patch)
/// makes the agent keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestOutput {
    /// The console kept in memory: its first and its last this many bytes.
    pub console_keep_bytes: usize,
    /// The results channel's file: QEMU is killed past this size.
    pub results_max_bytes: u64,
}

/// The default [`GuestOutput::console_keep_bytes`], in KiB.
pub const DEFAULT_CONSOLE_KEEP_KIB: usize = 1024;
/// The default [`GuestOutput::results_max_bytes`], in MiB.
pub const DEFAULT_RESULTS_MAX_MIB: u64 = 64;

impl Default for GuestOutput {
    fn default() -> GuestOutput {
        GuestOutput {
            console_keep_bytes: DEFAULT_CONSOLE_KEEP_KIB << 10,
            results_max_bytes: DEFAULT_RESULTS_MAX_MIB << 20,
        }
    }
}

impl QemuConfig {
    /// The guest machine QEMU is given (see [`guest_topology`]).
    pub fn guest_topology(&self) -> Topology {
        guest_topology(&self.topology, self.clock, self.version)
    }

    /// Why the guest cannot use KVM whatever the configuration says: a
    /// guest of another architecture than the host's.
    pub(super) fn kvm_impossible(&self) -> Option<String> {
        let host = std::env::consts::ARCH;
        (self.arch.name() != host).then(|| {
            format!(
                "tcg (an {} guest on an {host} host: TCG emulates it)",
                self.arch
            )
        })
    }

    /// The fingerprint's `cpu_model`: the CPU QEMU gives the guest, not the
    /// host's (except under KVM's `-cpu host`, which passes the host's on).
    pub fn cpu_model(&self, host_model: &str) -> String {
        let tcg = format!(
            "QEMU {} (TCG)",
            self.tcg_cpu
                .as_deref()
                .unwrap_or_else(|| self.arch.qemu_default_cpu())
        );
        let kvm = format!("{host_model} (QEMU KVM -cpu host)");
        if matches!(self.clock, Clock::Icount { .. }) || self.kvm_impossible().is_some() {
            return tcg;
        }
        match self.force_accel {
            Some(Accel::Tcg) => tcg,
            Some(Accel::Kvm) => kvm,
            None => format!("{kvm}, or {tcg} where KVM does not boot"),
        }
    }
}

/// vCPUs of an exact-clock guest: one, so every run executes the same
/// instructions in the same order. QEMU runs several in turns, and measured
/// that way the seed's contention plant moved by less than the spread of the
/// runs (README, "Measuring in QEMU guests"); `icount-smp` asks for them.
pub const ICOUNT_CPUS: u32 = 1;

/// The topology a guest gets: the tbox group's, except an icount guest,
/// which gets one CPU unless its clock asks for SMP and QEMU can run it
/// (a QEMU before [`ICOUNT_SMP_SINCE`](super::version::ICOUNT_SMP_SINCE)
/// starves every vCPU but the first, `version.rs`).
pub fn guest_topology(topology: &Topology, clock: Clock, qemu: Option<QemuVersion>) -> Topology {
    let smp = qemu.is_some_and(QemuVersion::icount_smp);
    match clock {
        Clock::Icount { smp: asked, .. } if !(asked && smp) => Topology {
            sockets: 1,
            cores_per_socket: ICOUNT_CPUS,
            threads_per_core: 1,
            numa_nodes: 1,
            memory_mib: topology.memory_mib,
        },
        _ => topology.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::topo;
    use super::*;

    #[test]
    fn topology_becomes_smp_and_numa_arguments() -> Result<()> {
        let args = topo(2, 2).qemu_args()?.join(" ");
        assert!(
            args.contains("-smp cpus=4,sockets=2,cores=2,threads=1"),
            "{args}"
        );
        assert!(
            args.contains("memory-backend-ram,id=mem1,size=512M"),
            "{args}"
        );
        assert!(
            args.contains("node,nodeid=1,cpus=2-3,memdev=mem1"),
            "{args}"
        );
        assert!(topo(3, 2).qemu_args().is_err());
        Ok(())
    }
}
