//! The measurement conditions of a run: the entries of a result's tuning map
//! that change what a number means, so that two samples compared against each
//! other must agree on them.
//!
//! An icount guest counts instructions while a wall-clock guest measures the
//! host's time; a one-vCPU guest puts the pipe's reader and writer on one CPU
//! where a two-vCPU guest may not. Samples taken under different conditions
//! differ whatever the commits do, so a pair whose runs disagree here is not a
//! test of its commits. Entries that vary from run to run without changing
//! the meaning (`guest_boot_wall_secs`) are not conditions.

use std::collections::BTreeMap;
use std::fmt;

/// The tuning keys (as the agent writes them) that a pair's runs must share.
pub const CONDITION_KEYS: &[&str] = &[
    ACCEL,
    QEMU_CLOCK,
    GUEST_CPUS,
    GUEST_CMDLINE,
    WARMUP_RUNS,
    GUEST_ARCH,
    GUEST_PAGE_SIZE,
];

/// How QEMU executed the guest (`tcg ...`, `kvm ...`).
pub const ACCEL: &str = "accel";
/// The guest's clock: `icount shift=N,sleep=off` or `wall`.
pub const QEMU_CLOCK: &str = "qemu_clock";
/// The guest's CPUs, online of configured.
pub const GUEST_CPUS: &str = "guest_cpus";
/// The guest kernel's command line.
pub const GUEST_CMDLINE: &str = "guest_cmdline";
/// Executions discarded before the measured ones (warm caches or cold).
pub const WARMUP_RUNS: &str = "warmup_runs";
/// The guest's architecture as it reported it (`uname -m`): an x86_64 and an
/// aarch64 guest run different kernels' code on different CPUs.
pub const GUEST_ARCH: &str = "guest_arch";
/// The guest kernel's page size in bytes as it reported it: a pipe buffer is
/// a page, so 4K and 64K pages move different amounts per buffer.
pub const GUEST_PAGE_SIZE: &str = "guest_page_size";

/// Not conditions: what a reproduction needs. QEMU's arguments as a JSON
/// array, with the run's own files as [`QEMU_KERNEL`], [`QEMU_INITRD`] and
/// [`QEMU_RESULTS`].
pub const QEMU_ARGV: &str = "qemu_argv";
/// The SHA-256 of the initramfs the guest booted, as the server stores it
/// (`GET /api/v1/initramfs/{sha256}`); absent when it was not shared.
pub const INITRAMFS_SHA256: &str = "initramfs_sha256";
/// The placeholders of [`QEMU_ARGV`], within words (`file:@RESULTS@`).
pub const QEMU_KERNEL: &str = "@KERNEL@";
pub const QEMU_INITRD: &str = "@INITRD@";
pub const QEMU_RESULTS: &str = "@RESULTS@";

/// The conditions a run was measured under, as one line (`qemu_clock=wall,
/// guest_cpus=2 online of 2 configured`), in [`CONDITION_KEYS`] order; only
/// the keys present. An empty string for a run that records none (the host
/// backend, older agents).
pub fn describe(tuning: &BTreeMap<String, String>) -> String {
    CONDITION_KEYS
        .iter()
        .filter_map(|k| tuning.get(*k).map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a QEMU run was measured, read from its conditions: what its numbers
/// can show and what no number of runs in it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// `-icount` on one vCPU: instructions executed, the same every boot.
    /// The pipe's reader and writer share the one CPU.
    ExactOneCpu,
    /// `-icount` on `cpus` vCPUs, which QEMU runs in turns on one thread.
    ExactSmp { cpus: u32 },
    /// Multi-threaded TCG on the host's clock.
    WallTcg { cpus: u32 },
    /// KVM: the host's own CPUs run the guest.
    Kvm { cpus: u32 },
}

impl Mode {
    /// The mode of a run's tuning map; `None` for a run outside QEMU (the
    /// host or kexec backends: the machine itself, which sees everything).
    pub fn of(tuning: &BTreeMap<String, String>) -> Option<Mode> {
        let clock = tuning.get(QEMU_CLOCK)?;
        let cpus = tuning
            .get(GUEST_CPUS)
            .and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok())
            .unwrap_or(1);
        let kvm = tuning.get(ACCEL).is_some_and(|a| a.starts_with("kvm"));
        Some(match (clock.starts_with("icount"), cpus, kvm) {
            (true, 0 | 1, _) => Mode::ExactOneCpu,
            (true, cpus, _) => Mode::ExactSmp { cpus },
            (false, cpus, true) => Mode::Kvm { cpus },
            (false, cpus, false) => Mode::WallTcg { cpus },
        })
    }

    /// True when a change that costs only as CPUs contend (a lock handed
    /// between them, a cache line bouncing) cannot move this mode's numbers.
    /// The exact clock with more vCPUs is too: QEMU runs them in turns, so a
    /// lock handed between them costs instructions, never a CPU waiting
    /// (measured: the seed report's extra mutex round per write moved a
    /// 2-vCPU guest's bw_pipe by -0.43%, inside its 0.6% spread of runs).
    pub fn blind_to_contention(self) -> bool {
        matches!(self, Mode::ExactOneCpu | Mode::ExactSmp { .. })
    }

    /// What this mode cannot see, for a report's reader.
    pub fn blind_to(self) -> &'static str {
        match self {
            Mode::ExactOneCpu => {
                "contention between CPUs (the reader and the writer share one CPU), \
                 cache and TLB misses, false sharing"
            }
            Mode::ExactSmp { .. } => {
                "cache and TLB misses, cache-line transfers and false sharing (no cache is \
                 modelled), and the timing of CPUs that run at once (QEMU runs the vCPUs \
                 in turns), so contention between CPUs costs instructions, not waiting"
            }
            Mode::WallTcg { .. } => {
                "the guest CPU's caches (TCG models none), and changes smaller than the \
                 host's noise"
            }
            Mode::Kvm { .. } => "changes smaller than the host's noise",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vcpus = |n: u32| {
            if n == 1 {
                "1 vCPU".to_string()
            } else {
                format!("{n} vCPUs")
            }
        };
        match *self {
            Mode::ExactOneCpu => write!(f, "exact clock (icount), 1 vCPU"),
            Mode::ExactSmp { cpus } => write!(f, "exact clock (icount), {}", vcpus(cpus)),
            Mode::WallTcg { cpus } => write!(f, "wall clock (TCG), {}", vcpus(cpus)),
            Mode::Kvm { cpus } => write!(f, "wall clock (KVM), {}", vcpus(cpus)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_conditions_are_described_in_a_fixed_order() {
        let tuning: BTreeMap<String, String> = [
            (GUEST_CPUS, "1 online of 1 configured"),
            ("guest_boot_wall_secs", "3.2"),
            (QEMU_CLOCK, "icount shift=3,sleep=off"),
            ("cpufreq_governor", "unavailable"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            describe(&tuning),
            "qemu_clock=icount shift=3,sleep=off, guest_cpus=1 online of 1 configured"
        );
        let mut other_boot = tuning.clone();
        other_boot.insert("guest_boot_wall_secs".into(), "9.9".into());
        assert_eq!(describe(&tuning), describe(&other_boot));
        assert_eq!(describe(&BTreeMap::new()), "");
    }

    fn tuning(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_mode_comes_from_the_clock_the_cpus_and_the_accelerator() {
        let icount = "icount shift=3,sleep=off";
        let tcg = "tcg (icount: instruction counting is TCG's)";
        let one = tuning(&[
            (ACCEL, tcg),
            (QEMU_CLOCK, icount),
            (GUEST_CPUS, "1 online of 1 configured"),
        ]);
        assert_eq!(Mode::of(&one), Some(Mode::ExactOneCpu));
        assert!(Mode::ExactOneCpu.blind_to_contention());
        assert!(Mode::ExactOneCpu
            .blind_to()
            .contains("contention between CPUs"));
        let smp = tuning(&[
            (ACCEL, tcg),
            (QEMU_CLOCK, icount),
            (GUEST_CPUS, "2 online of 2 configured"),
        ]);
        assert_eq!(Mode::of(&smp), Some(Mode::ExactSmp { cpus: 2 }));
        assert!(Mode::ExactSmp { cpus: 2 }.blind_to_contention());
        assert_eq!(
            Mode::ExactSmp { cpus: 2 }.to_string(),
            "exact clock (icount), 2 vCPUs"
        );
        let kvm = tuning(&[
            (ACCEL, "kvm (probe boot printed its banner)"),
            (QEMU_CLOCK, "wall"),
            (GUEST_CPUS, "4 online of 4 configured"),
        ]);
        assert_eq!(Mode::of(&kvm), Some(Mode::Kvm { cpus: 4 }));
        let wall = tuning(&[(ACCEL, "tcg (forced)"), (QEMU_CLOCK, "wall")]);
        assert_eq!(Mode::of(&wall), Some(Mode::WallTcg { cpus: 1 }));
        // The host and kexec backends record no QEMU clock: no mode.
        assert_eq!(
            Mode::of(&tuning(&[("cpufreq_governor", "performance")])),
            None
        );
    }
}
