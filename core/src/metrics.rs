//! The metric-name table: which way is better, which metrics are KPIs, which
//! are "perf metrics" in 0-day's sense, and the absolute noise floors.
//!
//! Everything here follows `intel/lkp-tests`: `etc/index-perf-all.yaml`,
//! `etc/index-latency-all.yaml`, `etc/perf-metrics-prefixes`,
//! `etc/perf-metrics-patterns`, `lib/perf_metrics.rb`,
//! `etc/perf-metrics-threshold.yaml`, and `etc/failure` and `etc/pass`
//! (function stats, `lib/stats.rb`), plus the names kbot-bench reports
//! (`workloads/README.md`).

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// Longest metric name the server stores, in bytes. Monitors that name
/// metrics after arbitrary symbols (perf-profile) must drop longer ones.
pub const MAX_METRIC_NAME_LEN: usize = 256;

/// Most metrics one run may upload. perf-profile names one per kernel
/// symbol, a few thousand at most; a body with more is not a run's result.
pub const MAX_METRICS_PER_RESULT: usize = 20_000;

/// Whether `name` can be stored as a metric name.
pub fn is_storable_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_METRIC_NAME_LEN
}

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Throughput-like: a drop is a regression.
    HigherIsBetter,
    /// Time/latency-like: a rise is a regression.
    LowerIsBetter,
    /// No table entry: 0-day prints such changes without calling them either.
    Undefined,
}

impl Direction {
    /// 0-day's `kpi_stat_direction` weight sign: +1, -1 or 0.
    pub fn sign(self) -> f64 {
        match self {
            Direction::HigherIsBetter => 1.0,
            Direction::LowerIsBetter => -1.0,
            Direction::Undefined => 0.0,
        }
    }
}

/// What a change means for a metric of a given direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Impact {
    Regression,
    Improvement,
    /// The metric has no direction entry (0-day: `undefined`).
    Undefined,
    /// A change of 0%, or one that is not a number (both means 0): neither
    /// better nor worse, where `weight × change < 0` alone would call it an
    /// improvement.
    Unchanged,
}

impl Impact {
    /// 0-day's rule: regression when `weight × change < 0`, improvement when
    /// it is above 0.
    pub fn of(direction: Direction, change: f64) -> Impact {
        let s = direction.sign() * change;
        if direction == Direction::Undefined {
            Impact::Undefined
        } else if s < 0.0 {
            Impact::Regression
        } else if s > 0.0 {
            Impact::Improvement
        } else {
            Impact::Unchanged
        }
    }
}

/// Higher-is-better patterns: `etc/index-perf-all.yaml` entries with weight
/// +1 that concern pipe/IPC tests, the generic suffixes the issue lists, and
/// kbot-bench's own names (`pipen.MB/sec`, `pipen.ops_per_sec`,
/// `pipebench.MB/sec` are covered by the suffixes).
const HIGHER: &[&str] = &[
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
const LOWER: &[&str] = &[
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
/// benchmark's KPI. This is not the perf-metric set ([`is_perf_metric`]).
const MONITOR_PREFIXES: &[&str] = &[
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
const PERF_METRIC_PREFIXES: &[&str] = &[
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
const PERF_METRIC_PATTERNS: &[&str] = &[r"^(.*\.)?time..*", r"^lock_stat..*..contentions"];

/// `lib/perf_metrics.rb` also adds `<test>.` for each upstream test: a
/// program with both a parser and a run script (`programs/<p>/parse`,
/// `programs/<p>/run`) that `etc/linux-test-cases` and
/// `etc/other-test-cases` do not list. Of the programs kbot runs, these
/// are upstream tests; pipen and pipebench have no upstream program, and
/// bw_pipe and lat_pipe are lmbench3's binaries, so their stats are not
/// perf metrics unless a pattern above takes them (`pipen.time.*`).
const UPSTREAM_TEST_PREFIXES: &[&str] = &[
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
const FAILURE_PATTERNS: &[&str] = &[
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
const PASS_PATTERNS: &[&str] = &[r".+\.pass$"];

/// One absolute noise floor of `etc/perf-metrics-threshold.yaml`.
struct Floor {
    pattern: &'static str,
    value: f64,
    /// Integer thresholds also reject `delta < value / 2`.
    integer: bool,
}

/// 0-day's absolute floors, in the order LKP's threshold table lists them:
/// the first pattern that matches the whole name decides (later rows and the
/// built-in rules are not consulted), so `.*vmstat.*nr_.*` takes
/// `proc-vmstat.nr_*` and the slow-path row never matches past
/// `perf-profile.*`. Patterns are regular expressions (an unescaped `.` is
/// any character), as upstream's are.
const FLOORS: &[Floor] = &[
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

struct Tables {
    higher: Vec<Regex>,
    lower: Vec<Regex>,
    floors: Vec<(Regex, f64, bool)>,
    primary: Vec<Regex>,
    quanta: Vec<(Regex, Quantum)>,
    perf_patterns: Vec<Regex>,
    function: Vec<Regex>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        // The patterns are compile-time constants covered by unit tests, so a
        // failure here is a programming error, never bad input.
        let compile = |p: &str| Regex::new(p).expect("static metric pattern compiles");
        Tables {
            higher: HIGHER.iter().map(|p| compile(p)).collect(),
            lower: LOWER.iter().map(|p| compile(p)).collect(),
            floors: FLOORS
                .iter()
                .map(|f| (compile(&format!("^(?:{})$", f.pattern)), f.value, f.integer))
                .collect(),
            primary: PRIMARY.iter().map(|p| compile(p)).collect(),
            quanta: QUANTA.iter().map(|(p, q)| (compile(p), *q)).collect(),
            perf_patterns: PERF_METRIC_PATTERNS.iter().map(|p| compile(p)).collect(),
            function: FAILURE_PATTERNS
                .iter()
                .chain(PASS_PATTERNS)
                .map(|p| compile(&format!("^(?:{p})")))
                .collect(),
        }
    })
}

/// The test (or monitor) prefix of a metric: the part before the first dot.
pub fn prefix(metric: &str) -> &str {
    metric.split_once('.').map_or(metric, |(p, _)| p)
}

/// Direction from the name table; lower-is-better patterns win because the
/// generic higher suffixes (`_ops`) would otherwise catch e.g. `usecs_per_op`
/// look-alikes.
pub fn direction(metric: &str) -> Direction {
    let t = tables();
    if t.lower.iter().any(|r| r.is_match(metric)) {
        Direction::LowerIsBetter
    } else if t.higher.iter().any(|r| r.is_match(metric)) {
        Direction::HigherIsBetter
    } else {
        Direction::Undefined
    }
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

/// Absolute floor `(value, integer)` of `etc/perf-metrics-threshold.yaml`.
pub fn absolute_floor(metric: &str) -> Option<(f64, bool)> {
    tables()
        .floors
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

/// Unit suffixes of metric names, most specific first: LKP names carry
/// their unit in the last component (`lmbench3.PIPE.bandwidth.MB/sec`,
/// `*.latency.us`, `hackbench.time_sec`, `*.time.elapsed_time`).
const UNIT_SUFFIXES: &[(&str, &str)] = &[
    ("MB/sec", "MB/s"),
    ("GB/sec", "GB/s"),
    ("KB/sec", "KB/s"),
    ("usecs_per_op", "µs/op"),
    ("nsecs_per_op", "ns/op"),
    ("ops_per_sec", "ops/s"),
    ("_per_sec", "/s"),
    (".latency.us", "µs"),
    ("latency_us", "µs"),
    (".us", "µs"),
    (".ns", "ns"),
    (".ms", "ms"),
    ("time.elapsed_time", "s"),
    ("time.user_time", "s"),
    ("time.system_time", "s"),
    ("time.maximum_resident_set_size", "KiB"),
    ("time_sec", "s"),
    ("_sec", "s"),
    ("_secs", "s"),
    (".bytes", "bytes"),
    ("_ops", "ops"),
    ("_percent", "%"),
    ("%", "%"),
];

/// The unit a metric's name states (`MB/s`, `µs`, `s`, `%`, ...), for axis
/// labels; `None` when the name does not say (counts, scores, ratios).
/// perf-profile stats are percentages of cycles.
pub fn unit(metric: &str) -> Option<&'static str> {
    if is_perf_profile(metric) {
        return Some("%");
    }
    UNIT_SUFFIXES
        .iter()
        .find(|(suffix, _)| metric.ends_with(suffix))
        .map(|(_, unit)| *unit)
}

/// The step a metric's values are read at, where the tool that writes it
/// is known: what lets identical runs count as an exact clock
/// (`stats::verdict`). The values alone cannot tell: a tool that prints two
/// decimals writes `1000` for `1000.00`, and a throughput computed from a
/// time printed in milliseconds has a fine decimal tail but moves in steps
/// of one millisecond of that time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantum {
    /// The tool prints the value itself at this step, in the metric's units
    /// (lmbench's `%.2f MB/sec`).
    Printed(f64),
    /// The value is computed from a clock reading the tool prints at `step`
    /// seconds; the reading is the run's metric `<testcase>.<clock>`
    /// (hackbench's throughputs are `kb / Time:`, `Time:` in milliseconds,
    /// and `time_sec` is that reading). One step of the clock moves the
    /// value by `step / reading` of itself.
    Clock { clock: &'static str, step: f64 },
}

/// `(pattern, quantum)`, first match wins. Only tools whose printing is
/// known are listed; any other metric's step is inferred from its values.
const QUANTA: &[(&str, Quantum)] = &[
    // lmbench's bw_pipe `%.2f MB/sec`, lat_pipe `%.4f microseconds`
    // (kbot-bench prints them alike and writes the unrounded value to its
    // JSON, finer still: the printed step bounds both). The bw_pipe and
    // lat_pipe programs are kbot-bench's alone, which prints nothing else
    // to read them by, so their step is the values'.
    (r"^lmbench3\.(.*\.)?MB/sec$", Quantum::Printed(0.01)),
    (r"^lmbench3\.(.*\.)?us$", Quantum::Printed(0.0001)),
    // hackbench's `Time: %.3f`: every throughput is kb over it.
    (
        r"^hackbench\.throughput(_best|_avg|_worst)?$",
        Quantum::Clock {
            clock: "time_sec",
            step: 0.001,
        },
    ),
    (r"^hackbench\.time_sec$", Quantum::Printed(0.001)),
    // perf bench's `Total time: %.3f [sec]`.
    (
        r"^perf-bench-sched-(pipe|messaging)\.total_time_sec$",
        Quantum::Printed(0.001),
    ),
];

/// The step `metric`'s values are read at, when the tool's printing is
/// known ([`Quantum`]); `None` leaves it to the values.
pub fn quantum(metric: &str) -> Option<Quantum> {
    tables()
        .quanta
        .iter()
        .find(|(r, _)| r.is_match(metric))
        .map(|(_, q)| *q)
}

/// Each benchmark's headline KPI, most specific first: the figure 0-day's
/// reports lead with for it (`lmbench3.PIPE.bandwidth.MB/sec` in the seed
/// report, will-it-scale's `per_process_ops`, UnixBench's `score`, ...).
const PRIMARY: &[&str] = &[
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
    fn directions_of_pipe_metrics() {
        use Direction::*;
        let cases = [
            ("lmbench3.PIPE.bandwidth.MB/sec", HigherIsBetter),
            ("lmbench3.PIPE.latency.us", LowerIsBetter),
            ("will-it-scale.per_thread_ops", HigherIsBetter),
            ("will-it-scale.per_process_ops", HigherIsBetter),
            ("unixbench.throughput", HigherIsBetter),
            ("unixbench.score", HigherIsBetter),
            ("hackbench.throughput", HigherIsBetter),
            ("hackbench.throughput_best", HigherIsBetter),
            ("hackbench.throughput_avg", HigherIsBetter),
            ("hackbench.throughput_worst", HigherIsBetter),
            ("hackbench.throughput_median", Undefined),
            ("hackbench.time_sec", LowerIsBetter),
            ("perf-bench-sched-pipe.ops_per_sec", HigherIsBetter),
            ("perf-bench-sched-pipe.usecs_per_op", LowerIsBetter),
            ("perf-bench-sched-messaging.total_time_sec", LowerIsBetter),
            ("stress-ng.pipe.ops_per_sec", HigherIsBetter),
            ("pipen.MB/sec", HigherIsBetter),
            ("pipen.ops_per_sec", HigherIsBetter),
            ("pipebench.MB/sec", HigherIsBetter),
            ("lmbench3.time.elapsed_time", LowerIsBetter),
            ("lmbench3.time.voluntary_context_switches", Undefined),
            ("vmstat.system.cs", Undefined),
            ("perf-stat.overall.path-length", LowerIsBetter),
            ("perf-stat.overall.ipc", Undefined),
        ];
        for (m, d) in cases {
            assert_eq!(direction(m), d, "{m}");
        }
    }

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

    #[test]
    fn units_come_from_the_name() {
        assert_eq!(unit("lmbench3.PIPE.bandwidth.MB/sec"), Some("MB/s"));
        assert_eq!(unit("lmbench3.PIPE.latency.us"), Some("µs"));
        assert_eq!(unit("perf-bench-sched-pipe.usecs_per_op"), Some("µs/op"));
        assert_eq!(unit("pipen.ops_per_sec"), Some("ops/s"));
        assert_eq!(unit("hackbench.time_sec"), Some("s"));
        assert_eq!(unit("bw_pipe.time.elapsed_time"), Some("s"));
        assert_eq!(unit("will-it-scale.per_thread_ops"), Some("ops"));
        assert_eq!(unit("perf-profile.self.cycles-pp.pipe_read"), Some("%"));
        assert_eq!(unit("will-it-scale.scalability"), None);
        assert_eq!(unit("vmstat.cpu.id"), None);
    }

    #[test]
    fn impact_follows_direction() {
        assert_eq!(
            Impact::of(Direction::HigherIsBetter, -18.5),
            Impact::Regression
        );
        assert_eq!(
            Impact::of(Direction::LowerIsBetter, -3.0),
            Impact::Improvement
        );
        assert_eq!(Impact::of(Direction::Undefined, -3.0), Impact::Undefined);
        for d in [Direction::HigherIsBetter, Direction::LowerIsBetter] {
            assert_eq!(Impact::of(d, 0.0), Impact::Unchanged);
            assert_eq!(Impact::of(d, -0.0), Impact::Unchanged);
            assert_eq!(Impact::of(d, f64::NAN), Impact::Unchanged);
        }
        assert_eq!(
            Impact::of(Direction::HigherIsBetter, f64::INFINITY),
            Impact::Improvement
        );
    }
}
