//! Which way a metric is better ([`Direction`], by the name tables) and
//! what a change means for it ([`Impact`]): the sign of a verdict, separate
//! from what kind of metric a name is (`classify`).

use serde::{Deserialize, Serialize};

use super::tables::tables;

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
