//! Monitors around a run: snapshots of /proc files taken before and after
//! the workload (on the host, or inside the guest and sent back over the
//! results channel), turned into LKP-named metrics:
//!
//! | monitor | file | metrics | reads |
//! |---|---|---|---|
//! | `proc-vmstat.*` | /proc/vmstat | counters' change, `nr_*` after | before, after |
//! | `vmstat.*` | /proc/stat | cs/in per second, CPU split in % | before, after |
//! | `interrupts.*` | /proc/interrupts | change per source, summed over CPUs | before, after |
//! | `softirqs.*` | /proc/softirqs | change per type (and per CPU up to 16 CPUs) | before, after |
//! | `schedstat.*` | /proc/schedstat | change of the runqueue counters, summed over CPUs | before, after |
//! | `meminfo.*` | /proc/meminfo | values after the runs | after |
//! | `buddyinfo.*` | /proc/buddyinfo | free blocks per zone and order after the runs | after |
//! | `slabinfo.*` | /proc/slabinfo | object counts per cache after the runs | after |
//!
//! Counters ([`Snapshot::COUNTERS`]) are read twice, gauges
//! ([`Snapshot::GAUGES`]) once. A file the
//! kernel lacks gives no metrics; nothing here fails a run. For QEMU guests
//! also the host's side ([`HostSample`], [`host_load`]): what else used the
//! host's CPUs while the guest ran, which marks a run as measured under
//! interference.

mod host;
mod memory;
mod proc;

use kbot_core::parsers::Metrics;

pub use host::{host_load, HostLoad, HostSample, InterferenceLimits};
pub use memory::{buddyinfo, meminfo, slabinfo};
pub use proc::{interrupts, proc_vmstat, schedstat, softirqs, vmstat, SOFTIRQS_PER_CPU_MAX_CPUS};

/// The /proc files, read at one moment. A file the kernel lacks (or that
/// could not be read) is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub vmstat: String,
    pub stat: String,
    pub interrupts: String,
    pub softirqs: String,
    pub schedstat: String,
    pub meminfo: String,
    pub buddyinfo: String,
    pub slabinfo: String,
}

impl Snapshot {
    /// The /proc files whose change over the run is measured: read before
    /// and after the runs.
    pub const COUNTERS: &'static [&'static str] =
        &["vmstat", "stat", "interrupts", "softirqs", "schedstat"];
    /// The /proc files whose value after the runs is reported: the guest
    /// reads them only after the runs (the host backend both times, unused).
    pub const GAUGES: &'static [&'static str] = &["meminfo", "buddyinfo", "slabinfo"];

    /// A snapshot of the files `read` gives, by their name under /proc.
    pub fn from_files(mut read: impl FnMut(&str) -> String) -> Snapshot {
        Snapshot {
            vmstat: read("vmstat"),
            stat: read("stat"),
            interrupts: read("interrupts"),
            softirqs: read("softirqs"),
            schedstat: read("schedstat"),
            meminfo: read("meminfo"),
            buddyinfo: read("buddyinfo"),
            slabinfo: read("slabinfo"),
        }
    }

    /// Reads this machine's files (missing or unreadable ones stay empty: a
    /// tiny kernel may lack some, and /proc/slabinfo is for root only).
    pub fn read_host() -> Snapshot {
        Snapshot::from_files(|f| std::fs::read_to_string(format!("/proc/{f}")).unwrap_or_default())
    }
}

/// All monitor metrics for a run of `elapsed_secs` between two snapshots.
pub fn metrics(before: &Snapshot, after: &Snapshot, elapsed_secs: f64) -> Metrics {
    let mut m = proc_vmstat(&before.vmstat, &after.vmstat);
    m.extend(vmstat(&before.stat, &after.stat, elapsed_secs));
    m.extend(interrupts(&before.interrupts, &after.interrupts));
    m.extend(softirqs(&before.softirqs, &after.softirqs));
    m.extend(schedstat(&before.schedstat, &after.schedstat));
    m.extend(meminfo(&after.meminfo));
    m.extend(buddyinfo(&after.buddyinfo));
    m.extend(slabinfo(&after.slabinfo));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file has a field, read under its own name.
    #[test]
    fn snapshots_read_every_listed_file() {
        let s = Snapshot::from_files(|f| format!("{f}\n"));
        let files: Vec<&str> = Snapshot::COUNTERS
            .iter()
            .chain(Snapshot::GAUGES)
            .copied()
            .collect();
        let fields = [
            &s.vmstat,
            &s.stat,
            &s.interrupts,
            &s.softirqs,
            &s.schedstat,
            &s.meminfo,
            &s.buddyinfo,
            &s.slabinfo,
        ];
        assert_eq!(files.len(), fields.len());
        for f in files {
            assert!(fields.iter().any(|v| v.as_str() == format!("{f}\n")), "{f}");
        }
    }

    #[test]
    fn host_snapshots_move_forward() {
        let a = Snapshot::read_host();
        let b = Snapshot::read_host();
        let m = metrics(&a, &b, 0.01);
        assert!(m.contains_key("vmstat.cpu.id") || m.contains_key("vmstat.system.cs"));
        assert!(m.values().all(|v| v.is_finite()));
    }

    /// This host has more CPUs, interrupts and caches than a guest, and its
    /// whole set still stays far below what a result may carry.
    #[test]
    fn the_metric_count_stays_well_under_the_cap() {
        let a = Snapshot::read_host();
        let m = metrics(&a, &a, 1.0);
        assert!(
            m.len() < kbot_core::metrics::MAX_METRICS_PER_RESULT / 10,
            "{}",
            m.len()
        );
    }
}
