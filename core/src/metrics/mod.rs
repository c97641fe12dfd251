//! The metric-name table: which way is better, which metrics are KPIs, which
//! are "perf metrics" in 0-day's sense, and the absolute noise floors.
//!
//! Everything here follows `intel/lkp-tests`: `etc/index-perf-all.yaml`,
//! `etc/index-latency-all.yaml`, `etc/perf-metrics-prefixes`,
//! `etc/perf-metrics-patterns`, `lib/perf_metrics.rb`,
//! `etc/perf-metrics-threshold.yaml`, and `etc/failure` and `etc/pass`
//! (function stats, `lib/stats.rb`), plus the names kbot-bench reports
//! (`workloads/README.md`).
//!
//! The code is split by concern: `direction` (which way is better, and
//! what a change means), `classify` (KPI, monitor, perf metric, function
//! stat; the primary KPI and the report order), `floors` (the absolute noise
//! floors), `units` (units and quanta) and `tables` (the name tables
//! themselves, their patterns compiled once).

mod classify;
mod direction;
mod floors;
mod tables;
mod units;

pub use classify::{
    is_function_stat, is_kpi, is_monitor, is_perf_metric, is_perf_profile, is_time_metric, prefix,
    primary_kpi, report_rank, shows_absolute_change,
};
pub use direction::{direction, Direction, Impact};
pub use floors::{absolute_floor, passes_absolute_floor};
pub use units::{quantum, unit, Quantum};

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
