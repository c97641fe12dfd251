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
}
