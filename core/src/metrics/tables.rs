//! The name tables as lkp-tests writes them (directions, monitors,
//! perf-metric prefixes and patterns, `etc/failure` and `etc/pass`, the
//! headline KPIs), and `tables()`, which compiles their patterns once (the
//! floors and the quanta compile their own with [`compile`]).

use std::sync::OnceLock;

use regex::Regex;

/// Higher-is-better patterns: `etc/index-perf-all.yaml` entries with weight
/// +1 that concern pipe/IPC tests, the generic suffixes the issue lists, and
/// kbot-bench's own names (`pipen.MB/sec`, `pipen.ops_per_sec`,
/// `pipebench.MB/sec` are covered by the suffixes).
pub(super) const HIGHER: &[&str] = &[
    r"^will-it-scale\..+_ops$",
    // index-perf-all.yaml `will-it-scale\.scalability: 1`: the share of
    // linear scaling reached at the largest task count.
    r"^will-it-scale\.scalability$",
    r"^lmbench3\..+\.MB/sec$",
    r"\.MB/sec$",
    r"_ops$",
    r"\.throughput$",
    // programs/hackbench/parse's throughputs from the best, mean and worst
    // iteration time. etc/index-perf-all.yaml's `.+\.throughput` does not
    // reach them (upstream leaves them without a direction); like
    // `throughput`, they are work per second.
    r"^hackbench\.throughput_(best|avg|worst)$",
    r"\.score$",
    r"ops_per_sec$",
    r"^stress-ng\..+_per_sec$",
];

/// Lower-is-better patterns: `etc/index-latency-all.yaml` (`*.latency.us`),
/// `kbuild\..+_per_iteration: -1`, the issue's `*.total_time_sec` and
/// `*.time.elapsed_time`, kbot-bench's `hackbench.time_sec` and
/// `perf-bench-sched-pipe.usecs_per_op`, and `perf-stat.overall.path-length`.
pub(super) const LOWER: &[&str] = &[
    r"\.latency\.us$",
    r"\.latency_us$",
    r"\.total_time_sec$",
    r"\.time\.elapsed_time$",
    r"^kbuild\..+_per_iteration$",
    r"^hackbench\.time_sec$",
    r"\.usecs_per_op$",
    // lib/matrix.rb's instructions per unit of the workload: fewer is a
    // cheaper path through the kernel (upstream's index tables have no
    // entry for it).
    r"^perf-stat\.overall\.path-length$",
];

/// Monitors: lkp-tests programs that run beside the benchmark (most of them
/// switched on by `include/category/benchmark`, §8). Their stats are never a
/// benchmark's KPI. This is not the perf-metric set ([`is_perf_metric`](super::is_perf_metric)).
pub(super) const MONITOR_PREFIXES: &[&str] = &[
    "boot-time",
    "buddyinfo",
    "cpufreq-stats",
    "cpuidle",
    "diskstats",
    "heartbeat",
    "interrupts",
    "iostat",
    "lock_stat",
    "meminfo",
    "mpstat",
    "nfsstat",
    "numa-meminfo",
    "numa-numastat",
    "numa-vmstat",
    "perf-c2c",
    "perf-profile",
    "perf-sched",
    "perf-stat",
    "proc-stat",
    "proc-vmstat",
    "sched_debug",
    // kbot's agent's /proc/schedstat monitor (lkp-tests has none).
    "schedstat",
    "slabinfo",
    "softirqs",
    "turbostat",
    "uptime",
    "vmstat",
];

/// lkp-tests' `etc/perf-metrics-prefixes`, as written: a stat whose name
/// starts with one of these is a perf metric.
pub(super) const PERF_METRIC_PREFIXES: &[&str] = &[
    "boot-meminfo.DirectMap1G",
    "boot-meminfo.DirectMap2M",
    "boot-meminfo.DirectMap4k",
    "boot-meminfo.KernelStack",
    "boot-meminfo.MemFree",
    "boot-meminfo.MemTotal",
    "boot-meminfo.PageTables",
    "boot-meminfo.Slab",
    "boot-meminfo.VmallocUsed",
    "boot-memory.bootmem",
    "boot-memory.code",
    "boot-memory.init",
    "boot-slabinfo.",
    "boot-time.",
    "energy.",
    "interrupts.CAL:Function_call_interrupts",
    "iostat.",
    "perf-c2c.HITM.total",
    "perf-profile.children.cycles-pp.native_queued_spin_lock_slowpath",
    "perf-stat.",
    "pmeter.",
    "proc-vmstat.",
    "turbostat.%Busy",
    "turbostat.Bzy_MHz",
    "turbostat.C1%",
    "turbostat.C1E%",
    "turbostat.CorWatt",
    "turbostat.Pk%pc10",
    "turbostat.Pkg%pc2",
    "turbostat.Pkg%pc3",
    "turbostat.Pkg%pc6",
    "turbostat.Pkg%pc7",
    "turbostat.Pkg%pc8",
    "turbostat.Pkg%pc9",
    "turbostat.PkgTmp",
    "turbostat.PkgWatt",
    "turbostat.POLL%",
    "turbostat.RAMWatt",
    "turbostat.SYS%LPI",
    "vmstat.cpu.",
    "vmstat.io.",
    "vmstat.swap.",
    "vmstat.system.",
];

/// lkp-tests' `etc/perf-metrics-patterns`, matched anywhere in the name as
/// `LKP::PerfMetricsPatterns` does (both start with `^`): every `time`
/// stat (`<test>.time.*`, `hackbench.time_sec`) and lock_stat contentions.
pub(super) const PERF_METRIC_PATTERNS: &[&str] =
    &[r"^(.*\.)?time..*", r"^lock_stat..*..contentions"];

/// `lib/perf_metrics.rb` also adds `<test>.` for each upstream test: a
/// program with both a parser and a run script (`programs/<p>/parse`,
/// `programs/<p>/run`) that `etc/linux-test-cases` and
/// `etc/other-test-cases` do not list. Of the programs kbot runs, these
/// are upstream tests; pipen and pipebench have no upstream program, and
/// bw_pipe and lat_pipe are lmbench3's binaries, so their stats are not
/// perf metrics unless a pattern above takes them (`pipen.time.*`).
pub(super) const UPSTREAM_TEST_PREFIXES: &[&str] = &[
    "hackbench",
    "lmbench3",
    "perf-bench-sched-messaging",
    "perf-bench-sched-pipe",
    "stress-ng",
    "unixbench",
    "will-it-scale",
];

/// lkp-tests' `etc/failure`: stats that record a failure. `lib/stats.rb`
/// anchors each at the start only (`%r{^#{pattern}}`).
pub(super) const FAILURE_PATTERNS: &[&str] = &[
    r".+killed_by.*",
    r".+\.(error|warn|fail)[^_]*$",
    r"dmesg.*",
    r"kmemleak\..+unreferenced_object\..+",
    r"kmsg.*",
    r"last_state.*",
    r"locktoture\..+lock_hotplug",
    r"rcutoture\..+rcu_hotplug",
    r"stderr.*",
    r"xfstests\..+fail$",
];

/// lkp-tests' `etc/pass`: stats that record a pass.
pub(super) const PASS_PATTERNS: &[&str] = &[r".+\.pass$"];

/// Each benchmark's headline KPI, most specific first: the figure 0-day's
/// reports lead with for it (`lmbench3.PIPE.bandwidth.MB/sec` in the seed
/// report, will-it-scale's `per_process_ops`, UnixBench's `score`, ...).
pub(super) const PRIMARY: &[&str] = &[
    r"^lmbench3\.PIPE\.bandwidth\.MB/sec$",
    r"^will-it-scale\.per_process_ops$",
    r"^will-it-scale\.per_thread_ops$",
    r"^unixbench\.score$",
    r"^hackbench\.throughput$",
    r"\.ops_per_sec$",
    r"\.MB/sec$",
    r"\.throughput$",
    r"\.total_time_sec$",
];

pub(super) struct Tables {
    pub(super) higher: Vec<Regex>,
    pub(super) lower: Vec<Regex>,
    pub(super) primary: Vec<Regex>,
    pub(super) perf_patterns: Vec<Regex>,
    pub(super) function: Vec<Regex>,
}

pub(super) fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        higher: HIGHER.iter().map(|p| compile(p)).collect(),
        lower: LOWER.iter().map(|p| compile(p)).collect(),
        primary: PRIMARY.iter().map(|p| compile(p)).collect(),
        perf_patterns: PERF_METRIC_PATTERNS.iter().map(|p| compile(p)).collect(),
        function: FAILURE_PATTERNS
            .iter()
            .chain(PASS_PATTERNS)
            .map(|p| compile(&format!("^(?:{p})")))
            .collect(),
    })
}

/// A pattern of a table. The patterns are compile-time constants covered by
/// unit tests, so a failure here is a programming error, never bad input.
pub(super) fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static metric pattern compiles")
}
