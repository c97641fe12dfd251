//! What kind of metric a name is: a KPI, a monitor's, a `<test>.time.*`
//! stat, a perf metric or a function stat in 0-day's sense; and, built on
//! those, a job's primary KPI and the order reports list metrics in.

use super::direction::{direction, Direction};
use super::tables::{tables, MONITOR_PREFIXES, PERF_METRIC_PREFIXES, UPSTREAM_TEST_PREFIXES};

/// The test (or monitor) prefix of a metric: the part before the first dot.
pub fn prefix(metric: &str) -> &str {
    metric.split_once('.').map_or(metric, |(p, _)| p)
}

/// A `<test>.time.*` metric (GNU `time -v` of the whole process tree).
pub fn is_time_metric(metric: &str) -> bool {
    metric
        .split_once('.')
        .is_some_and(|(_, rest)| rest.starts_with("time."))
}

/// A monitor's metric (perf-stat, vmstat, …), not the benchmark's own.
pub fn is_monitor(metric: &str) -> bool {
    MONITOR_PREFIXES.contains(&prefix(metric))
}

/// 0-day's `kpi_stat?`: any `<test>.<x>` of the benchmark itself, except
/// `<test>.time.*`; and, unlike upstream's, except function stats
/// ([`is_function_stat`]: `stress-ng.pipe.pass`, `.fail`): they record
/// whether a test ran, not how fast, and 0-day judges them by a rule of
/// their own, so kbot's verdict never reports or bisects on them.
pub fn is_kpi(metric: &str) -> bool {
    metric.contains('.')
        && !is_monitor(metric)
        && !is_time_metric(metric)
        && !is_function_stat(metric)
}

/// 0-day's `perf_metric?` (lkp-tests' `lib/perf_metrics.rb`): a stat of
/// `etc/perf-metrics-patterns`, one starting with an entry of
/// `etc/perf-metrics-prefixes`, or one of an upstream test
/// (`UPSTREAM_TEST_PREFIXES`). A perf metric needs a 1% change, anything
/// else 5% (`skip_small_change?`).
pub fn is_perf_metric(metric: &str) -> bool {
    tables().perf_patterns.iter().any(|r| r.is_match(metric))
        || PERF_METRIC_PREFIXES.iter().any(|p| metric.starts_with(p))
        || (metric.contains('.') && UPSTREAM_TEST_PREFIXES.contains(&prefix(metric)))
}

/// 0-day's `function_stat?` (lkp-tests' `lib/stats.rb`): a stat that records
/// a pass or a failure rather than a measurement, by the patterns of
/// `etc/failure` and `etc/pass` (`*.pass`, `*.fail`, `*.error`, `*.warn`,
/// `dmesg.*`, ...), unless its name has `.time.`, `.timestamp:` or
/// `.bootstage:`. kbot's are stress-ng's `<stressor>.pass` / `.fail`.
pub fn is_function_stat(metric: &str) -> bool {
    if [".time.", ".timestamp:", ".bootstage:"]
        .iter()
        .any(|s| metric.contains(s))
    {
        return false;
    }
    tables().function.iter().any(|r| r.is_match(metric))
}

/// `perf-profile.*` rows: compared and shown as absolute percentage points.
pub fn is_perf_profile(metric: &str) -> bool {
    prefix(metric) == "perf-profile"
}

/// Rows whose change is shown as an absolute difference (`$stat_absolute_changes`).
pub fn shows_absolute_change(metric: &str) -> bool {
    is_perf_profile(metric) || metric.ends_with('%')
}

/// The job's primary KPI among `names`: the first `PRIMARY` pattern that
/// some KPI matches, else the first KPI with a direction (by name), else
/// the first KPI.
pub fn primary_kpi<'a>(names: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    let patterns = &tables().primary;
    let kpis = names.filter(|n| is_kpi(n));
    let lowest = |it: &mut dyn Iterator<Item = &'a str>| it.min();
    patterns
        .iter()
        .find_map(|p| lowest(&mut kpis.clone().filter(|n| p.is_match(n))))
        .or_else(|| {
            lowest(
                &mut kpis
                    .clone()
                    .filter(|n| direction(n) != Direction::Undefined),
            )
        })
        .or_else(|| lowest(&mut kpis.clone()))
}

/// Sort key for reports: KPIs first, then the benchmark's side metrics and
/// monitors, then perf-sched, perf-stat and perf-profile, as the robot's
/// compare block orders them (§6 item 10).
pub fn report_rank(metric: &str) -> u8 {
    match prefix(metric) {
        _ if is_kpi(metric) => 0,
        "perf-sched" => 2,
        "perf-stat" => 3,
        "perf-profile" => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kpis_exclude_time_monitors_and_function_stats() {
        assert!(is_kpi("lmbench3.PIPE.bandwidth.MB/sec"));
        assert!(!is_kpi("lmbench3.time.elapsed_time"));
        assert!(!is_kpi("perf-stat.ps.cpu-cycles"));
        assert!(is_kpi("stress-ng.pipe.ops_per_sec"));
        assert!(!is_kpi("stress-ng.pipe.pass"));
        assert!(!is_kpi("stress-ng.pipe.fail"));
        assert!(!is_kpi("stress-ng.pipe.MB_per_sec_pipe_write_rate.fail"));
    }

    #[test]
    fn perf_metrics_are_upstreams() {
        let perf = [
            // etc/perf-metrics-patterns
            "lmbench3.time.user_time",
            "pipen.time.user_time",
            "bw_pipe.time.elapsed_time",
            "hackbench.time_sec",
            "lock_stat.rq->lock.contentions",
            // etc/perf-metrics-prefixes
            "vmstat.system.cs",
            "vmstat.cpu.us",
            "proc-vmstat.pgfault",
            "perf-stat.ps.cpu-cycles",
            "perf-stat.overall.path-length",
            "interrupts.CAL:Function_call_interrupts",
            "perf-profile.children.cycles-pp.native_queued_spin_lock_slowpath",
            "turbostat.Bzy_MHz",
            "iostat.sda.util",
            // upstream tests (lib/perf_metrics.rb)
            "hackbench.throughput",
            "lmbench3.PIPE.bandwidth.MB/sec",
            "perf-bench-sched-pipe.ops_per_sec",
            "perf-bench-sched-messaging.total_time_sec",
            "stress-ng.pipe.ops_per_sec",
            "unixbench.score",
            "will-it-scale.per_process_ops",
        ];
        let not_perf = [
            // No upstream program: kbot-bench's own.
            "pipen.MB/sec",
            "pipen.ops_per_sec",
            "pipebench.MB/sec",
            "bw_pipe.bandwidth.MB/sec",
            // Monitors outside the prefix list.
            "interrupts.LOC:Local_timer_interrupts",
            "perf-profile.self.cycles-pp.pipe_read",
            "vmstat.memory.free",
            "meminfo.MemFree",
            "turbostat.Avg_MHz",
            "softirqs.NET_RX",
            "kmsg.foo",
            "hackbench",
            "lock_stat.rq->lock.holdtime-total",
        ];
        for m in perf {
            assert!(is_perf_metric(m), "{m}");
        }
        for m in not_perf {
            assert!(!is_perf_metric(m), "{m}");
        }
    }

    #[test]
    fn function_stats_follow_etc_failure_and_pass() {
        for m in [
            "stress-ng.pipe.pass",
            "stress-ng.pipe.fail",
            "stress-ng.pipe.MB_per_sec_pipe_write_rate.pass",
            "stress-ng.ring-pipe.pipe_read+write_calls_per_sec.fail",
            "unixbench.test.pass",
            "x.y.error",
            "x.y.warn",
            "x.y.failures",
            "dmesg.boot_failures",
            "last_state.is_incomplete_run",
            "x.oom.killed_by_foo",
        ] {
            assert!(is_function_stat(m), "{m}");
        }
        for m in [
            "stress-ng.pipe.ops",
            "stress-ng.pipe.ops_per_sec",
            "stress-ng.pipe.fail_rate",
            "pass",
            ".pass",
            "x.time.fail",
            "hackbench.throughput",
            "xfail.y",
        ] {
            assert!(!is_function_stat(m), "{m}");
        }
    }
}
