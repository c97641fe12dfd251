//! 0-day's absolute noise floors (`etc/perf-metrics-threshold.yaml`) and
//! its built-in rules for metrics no floor names (`reasonable_perf_change?`):
//! the longest table of the metric names, kept apart from the others.

use std::sync::OnceLock;

use regex::Regex;

use super::tables::compile;

/// One absolute noise floor of `etc/perf-metrics-threshold.yaml`.
pub(super) struct Floor {
    pub(super) pattern: &'static str,
    pub(super) value: f64,
    /// Integer thresholds also reject `delta < value / 2`.
    pub(super) integer: bool,
}

/// 0-day's absolute floors, in the order LKP's threshold table lists them:
/// the first pattern that matches the whole name decides (later rows and the
/// built-in rules are not consulted), so `.*vmstat.*nr_.*` takes
/// `proc-vmstat.nr_*` and the slow-path row never matches past
/// `perf-profile.*`. Patterns are regular expressions (an unescaped `.` is
/// any character), as upstream's are.
pub(super) const FLOORS: &[Floor] = &[
    Floor {
        pattern: r".*.time.elapsed_time.*",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.file_system_inputs",
        value: 10000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.file_system_outputs",
        value: 10000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.involuntary_context_switches",
        value: 1000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.major_page_faults",
        value: 1000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.minor_page_faults",
        value: 1000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.socket_messages_received",
        value: 10000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.socket_messages_sent",
        value: 10000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.swaps",
        value: 1000.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.system_time",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.user_time",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r".*.time.voluntary_context_switches",
        value: 1000.0,
        integer: true,
    },
    Floor {
        pattern: r".*vmstat.*nr_.*",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"dd.kill_time",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"dd.startup_time",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"interrupts.*",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"iostat.*.avgrq-sz",
        value: 200.0,
        integer: true,
    },
    Floor {
        pattern: r"iostat.*.await",
        value: 50.0,
        integer: true,
    },
    Floor {
        pattern: r"iostat.*.util",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"iostat.*.[rw]/s",
        value: 50.0,
        integer: true,
    },
    Floor {
        pattern: r"iostat.*.[rw]kB/s",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"iostat.*.[rw]_await",
        value: 50.0,
        integer: true,
    },
    Floor {
        pattern: r"perf-c2c.HITM.total",
        value: 3000.0,
        integer: true,
    },
    Floor {
        pattern: r"perf-profile.*",
        value: 1.0,
        integer: true,
    },
    Floor {
        pattern: r"perf-profile.children.cycles-pp.native_queued_spin_lock_slowpath",
        value: 2.00,
        integer: false,
    },
    Floor {
        pattern: r"proc-vmstat.allocstall",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.compact_fail",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.compact_stall",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.htlb_buddy_alloc_fail",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.kswapd_high_wmark_hit_quickly",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.kswapd_low_wmark_hit_quickly",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.nr_vmscan_immediate_reclaim",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.nr_vmscan_write",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"proc-vmstat.pgmigrate_fail",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"sysbench-fileio.latency_95th_ms",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.cpu.id",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.cpu.st",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.cpu.sy",
        value: 50.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.cpu.us",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.cpu.wa",
        value: 10.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.io.bi",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.io.bo",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.system.cs",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"vmstat.system.in",
        value: 100.0,
        integer: true,
    },
    Floor {
        pattern: r"xfstests.*.seconds",
        value: 10.0,
        integer: true,
    },
];

/// Absolute floor `(value, integer)` of `etc/perf-metrics-threshold.yaml`.
pub fn absolute_floor(metric: &str) -> Option<(f64, bool)> {
    static COMPILED: OnceLock<Vec<(Regex, f64, bool)>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            FLOORS
                .iter()
                .map(|f| (compile(&format!("^(?:{})$", f.pattern)), f.value, f.integer))
                .collect()
        })
        .iter()
        .find(|(r, _, _)| r.is_match(metric))
        .map(|(_, v, i)| (*v, *i))
}

/// 0-day's `reasonable_perf_change?`: the first floor of the table that
/// matches decides alone (`max` at least the floor, and for an integer floor
/// `delta` at least half of it, halved as integers: a floor of 1 asks
/// nothing of `delta`); a metric no floor matches gets the built-in rules
/// for iostat, pagetypeinfo, buddyinfo, slabinfo, proc-vmstat, meminfo,
/// lock_stat, interrupts and softirqs. `max` is the largest value on either
/// side and `delta` the absolute difference of the two means.
pub fn passes_absolute_floor(metric: &str, max: f64, delta: f64) -> bool {
    if let Some((v, integer)) = absolute_floor(metric) {
        let half = if integer { (v / 2.0).floor() } else { 0.0 };
        return max >= v && !(integer && delta < half);
    }
    let starts = |p: &str| metric.starts_with(p);
    if starts("iostat") {
        max > 1.0
    } else if starts("pagetypeinfo") || starts("buddyinfo") || starts("slabinfo") {
        delta > 100.0
    } else if starts("proc-vmstat") || metric.contains("meminfo") {
        max > 1000.0
    } else if starts("lock_stat") {
        // Upstream also compares the whole name with `waittime-total` and
        // `holdtime-total`, which a `lock_stat.` name never equals.
        if metric.contains("time") {
            delta > 1000.0
        } else {
            delta > 10_000.0
        }
    } else if starts("interrupts") || starts("softirqs") {
        max > 10_000.0
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_follow_the_threshold_table() {
        assert_eq!(
            absolute_floor("lmbench3.time.user_time"),
            Some((10.0, true))
        );
        assert!(!passes_absolute_floor("lmbench3.time.user_time", 9.0, 3.0));
        assert!(!passes_absolute_floor("lmbench3.time.user_time", 60.0, 4.0));
        assert!(passes_absolute_floor("lmbench3.time.user_time", 60.0, 5.0));
        assert!(passes_absolute_floor(
            "lmbench3.PIPE.bandwidth.MB/sec",
            1.0,
            0.1
        ));
        // sy is 50 and st 10 upstream (kbot had them swapped).
        assert_eq!(absolute_floor("vmstat.cpu.sy"), Some((50.0, true)));
        assert_eq!(absolute_floor("vmstat.cpu.st"), Some((10.0, true)));
        assert_eq!(absolute_floor("vmstat.cpu.us"), Some((10.0, true)));
        assert_eq!(absolute_floor("vmstat.cpu.gu"), None);
        assert_eq!(absolute_floor("vmstat.system.in"), Some((100.0, true)));
        // interrupts.* has a floor of 100, and a matched floor decides alone:
        // the built-in "max above 10000" rule is never reached for it.
        assert_eq!(
            absolute_floor("interrupts.CAL:Function_call_interrupts"),
            Some((100.0, true))
        );
        assert!(passes_absolute_floor(
            "interrupts.LOC:Local_timer_interrupts",
            500.0,
            60.0
        ));
        assert!(!passes_absolute_floor(
            "interrupts.LOC:Local_timer_interrupts",
            500.0,
            49.0
        ));
        assert!(!passes_absolute_floor("softirqs.TIMER", 500.0, 400.0));
        // proc-vmstat.nr_* is taken by the earlier .*vmstat.*nr_.* row (100).
        assert!(passes_absolute_floor(
            "proc-vmstat.nr_free_pages",
            900.0,
            500.0
        ));
        assert!(!passes_absolute_floor("proc-vmstat.pgfault", 900.0, 500.0));
        assert!(passes_absolute_floor("proc-vmstat.pgfault", 1001.0, 1.0));
        // perf-profile.*: 1 is an integer floor whose half is 0.
        assert!(passes_absolute_floor(
            "perf-profile.self.cycles-pp.pipe_read",
            1.0,
            0.1
        ));
        assert!(!passes_absolute_floor(
            "perf-profile.self.cycles-pp.pipe_read",
            0.9,
            0.5
        ));
        assert_eq!(
            absolute_floor("perf-profile.children.cycles-pp.native_queued_spin_lock_slowpath"),
            Some((1.0, true)),
            "the earlier perf-profile.* row wins"
        );
        // Whole-name matches: a suffix is not enough.
        assert_eq!(absolute_floor("vmstat.system.csx"), None);
        assert_eq!(absolute_floor("x.vmstat.system.cs"), None);
        assert_eq!(absolute_floor("fio.time.swaps"), Some((1000.0, true)));
        assert_eq!(absolute_floor("iostat.sda.r/s"), Some((50.0, true)));
        assert!(!passes_absolute_floor("iostat.sda.foo", 1.0, 1.0));
        assert!(passes_absolute_floor(
            "lock_stat.x.waittime-total",
            1.0,
            1001.0
        ));
        assert!(!passes_absolute_floor(
            "lock_stat.x.contentions",
            1.0,
            9000.0
        ));
    }
}
