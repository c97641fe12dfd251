//! What a metric's name says about its values: the unit it is measured in
//! (for axis labels) and, for tools whose printing is known, the step its
//! values are read at ([`Quantum`]).

use super::classify::is_perf_profile;
use std::sync::OnceLock;

use regex::Regex;

use super::tables::compile;

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
pub(super) const QUANTA: &[(&str, Quantum)] = &[
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
    static COMPILED: OnceLock<Vec<(Regex, Quantum)>> = OnceLock::new();
    COMPILED
        .get_or_init(|| QUANTA.iter().map(|(p, q)| (compile(p), *q)).collect())
        .iter()
        .find(|(r, _)| r.is_match(metric))
        .map(|(_, q)| *q)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
