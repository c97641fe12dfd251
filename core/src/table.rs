//! The 0-day compare table (`lkp compare` / the robot's "Details" block),
//! byte for byte in layout, and the same data as a serde struct for JSON.
//!
//! Layout rules (intel/lkp-tests' `lib/compare.rb`, and the tables of 0-day's reports):
//! axis keys sorted and joined by `/`; the two commits; SHA heads of 16 and
//! 27 characters; rows of `base_mean [± s%]  change  head_mean [± s%]  stat`
//! with the arithmetic mean and the population σ, `± s%` only when above 2%,
//! and an absolute change (no `%`) for perf-profile and `%`-suffixed stats.
//! Function stats (`*.pass`, `*.fail`) come first, in a block of their own:
//! `fail:runs  %reproduction  fail:runs  stat` (`show_failure_change`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metrics;
use crate::stats::{Comparison, MetricComparison, OneSidedMetric, Outcome, ZeroDayVerdict};

/// A commit as the table names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRef {
    /// Full (or at least 27-character) SHA.
    pub sha: String,
    pub subject: String,
}

/// One table row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    pub metric: String,
    pub base_mean: f64,
    pub base_stddev_pct: f64,
    /// Percent, or absolute when `change_is_absolute`.
    pub change: f64,
    pub change_is_absolute: bool,
    pub head_mean: f64,
    pub head_stddev_pct: f64,
    /// A function stat's runs `(base, head)`: the means are then the runs
    /// that failed (or passed) and `change` the change of their share, in
    /// points ([`crate::stats::ZeroDayRow::function_runs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_runs: Option<(usize, usize)>,
}

impl TableRow {
    /// The row `lkp compare` prints for a stat: 0-day's numbers, from every
    /// run with a missing sample as 0 ([`crate::stats::ZeroDayRow`]).
    fn of(metric: &str, change_is_absolute: bool, zero_day: &ZeroDayVerdict) -> Self {
        let r = &zero_day.row;
        TableRow {
            metric: metric.to_owned(),
            base_mean: r.base_mean,
            base_stddev_pct: r.base_stddev_pct,
            change: r.change,
            change_is_absolute,
            head_mean: r.head_mean,
            head_stddev_pct: r.head_stddev_pct,
            function_runs: r.function_runs,
        }
    }
}

impl From<&MetricComparison> for TableRow {
    fn from(m: &MetricComparison) -> Self {
        TableRow::of(&m.metric, m.change_is_absolute, &m.zero_day)
    }
}

impl From<&OneSidedMetric> for TableRow {
    fn from(m: &OneSidedMetric) -> Self {
        TableRow::of(&m.metric, m.change_is_absolute, &m.zero_day)
    }
}

/// Which metrics of a comparison become rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowFilter {
    All,
    /// 0-day's changed stats (what the robot prints).
    ZeroDayChanged,
    /// kbot's `different` metrics.
    KbotDifferent,
    /// Either of the two.
    Changed,
}

/// Everything the table shows; serialize it for the API and the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableInput {
    /// Axis key → value (`compiler: gcc-14`, `testcase: lmbench3`, …);
    /// rendered in key order.
    pub axes: BTreeMap<String, String>,
    pub base: CommitRef,
    pub head: CommitRef,
    /// In display order ([`TableInput::from_comparison`]).
    pub rows: Vec<TableRow>,
    /// Changed rows left out by [`TableInput::within_budget`], per group
    /// (`perf-profile.self`, `proc-vmstat`, ...), shown as one line each.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub omitted: BTreeMap<String, usize>,
}

impl TableInput {
    /// Rows from a comparison in its order (KPIs first). Metrics only one
    /// side has are rows too where 0-day compares them (`All`) or calls them
    /// changed (`ZeroDayChanged`, `Changed`); kbot has no verdict on them.
    pub fn from_comparison(
        axes: BTreeMap<String, String>,
        base: CommitRef,
        head: CommitRef,
        comparison: &Comparison,
        filter: RowFilter,
    ) -> Self {
        let keep = |m: &&MetricComparison| match filter {
            RowFilter::All => true,
            RowFilter::ZeroDayChanged => m.zero_day.changed,
            RowFilter::KbotDifferent => m.kbot.outcome == Outcome::Different,
            RowFilter::Changed => m.zero_day.changed || m.kbot.outcome == Outcome::Different,
        };
        let kbot_different = |m: &OneSidedMetric| {
            m.kbot
                .as_ref()
                .is_some_and(|k| k.outcome == Outcome::Different)
        };
        let keep_one_sided = |m: &&OneSidedMetric| match filter {
            RowFilter::All => true,
            RowFilter::ZeroDayChanged => m.zero_day.changed,
            RowFilter::Changed => m.zero_day.changed || kbot_different(m),
            RowFilter::KbotDifferent => kbot_different(m),
        };
        let mut rows: Vec<TableRow> = comparison
            .metrics
            .iter()
            .filter(keep)
            .map(TableRow::from)
            .chain(
                comparison
                    .one_sided
                    .iter()
                    .filter(keep_one_sided)
                    .map(TableRow::from),
            )
            .collect();
        sort_rows(&mut rows);
        TableInput {
            axes,
            base,
            head,
            rows,
            omitted: BTreeMap::new(),
        }
    }

    /// At most `per_group` rows of each monitor or profile group (the KPI
    /// rows all stay), the biggest movers; what is left out is counted in
    /// [`TableInput::omitted`]. A mail's compare table stays readable and
    /// within its size however many symbols moved.
    pub fn within_budget(mut self, per_group: usize) -> Self {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut omitted: BTreeMap<String, usize> = BTreeMap::new();
        self.rows.retain(|r| {
            if metrics::report_rank(&r.metric) == 0 || r.function_runs.is_some() {
                return true;
            }
            let group = group_of(&r.metric);
            let n = seen.entry(group.clone()).or_insert(0);
            *n += 1;
            if *n <= per_group {
                true
            } else {
                *omitted.entry(group).or_insert(0) += 1;
                false
            }
        });
        self.omitted = omitted;
        self
    }
}

/// 0-day's sections, the KPI first, then the workload's own stats and the
/// monitors, perf-stat and perf-profile (self before children). The
/// workload's rows keep 0-day's name order; monitor and profile rows come
/// biggest movers first, so where the time went heads its section.
fn sort_rows(rows: &mut [TableRow]) {
    let by_mover = |m: &str| metrics::is_monitor(m) || metrics::is_perf_profile(m);
    rows.sort_by(|x, y| {
        let (mx, my) = (by_mover(&x.metric), by_mover(&y.metric));
        let movers = if mx && my {
            y.change.abs().total_cmp(&x.change.abs())
        } else {
            std::cmp::Ordering::Equal
        };
        section_of(&x.metric)
            .cmp(&section_of(&y.metric))
            .then(mx.cmp(&my))
            .then(movers)
            .then(x.metric.cmp(&y.metric))
    });
}

/// A row's report section: its rank, then for profiles self (0) before
/// children (1) before the rest.
fn section_of(metric: &str) -> (u8, u8) {
    let kind = match metric.split('.').nth(1) {
        _ if !metrics::is_perf_profile(metric) => 0,
        Some("self") => 0,
        Some("children") => 1,
        _ => 2,
    };
    (metrics::report_rank(metric), kind)
}

/// The group a row counts against in [`TableInput::within_budget`]: the
/// metric's prefix, and for perf-profile its kind (`perf-profile.self`).
fn group_of(metric: &str) -> String {
    let mut parts = metric.split('.');
    let first = parts.next().unwrap_or_default();
    match parts.next() {
        Some(kind) if metrics::is_perf_profile(metric) => format!("{first}.{kind}"),
        _ => first.to_string(),
    }
}

const RULE_WIDTH: usize = 89;
const BASE_SHA_WIDTH: usize = 16;
const HEAD_SHA_WIDTH: usize = 27;
const SHORT_SHA: usize = 10;
/// `± s%` only above this (in percent).
const STDDEV_SHOWN_ABOVE: f64 = 2.0;

/// Render the compare block, every line ending in `\n`.
pub fn render(t: &TableInput) -> String {
    let mut out = String::new();
    let mut line = |s: &str| {
        out.push_str(s);
        out.push('\n');
    };
    line(&"=".repeat(RULE_WIDTH));
    let keys: Vec<&str> = t.axes.keys().map(String::as_str).collect();
    let values: Vec<&str> = t.axes.values().map(String::as_str).collect();
    line(&format!("{}:", keys.join("/")));
    line(&format!("  {}", values.join("/")));
    line("");
    line("commit: ");
    for c in [&t.base, &t.head] {
        line(&format!(
            "  {} (\"{}\")",
            prefix(&c.sha, SHORT_SHA),
            c.subject
        ));
    }
    line("");
    line(&format!(
        "{:<bw$} {:<hw$}",
        prefix(&t.base.sha, BASE_SHA_WIDTH),
        prefix(&t.head.sha, HEAD_SHA_WIDTH),
        bw = BASE_SHA_WIDTH,
        hw = HEAD_SHA_WIDTH
    ));
    line(&format!(
        "{} {} ",
        "-".repeat(BASE_SHA_WIDTH),
        "-".repeat(HEAD_SHA_WIDTH)
    ));
    let (function, perf): (Vec<&TableRow>, Vec<&TableRow>) =
        t.rows.iter().partition(|r| r.function_runs.is_some());
    if !function.is_empty() {
        line("       fail:runs  %reproduction    fail:runs");
        line("           |             |             |    ");
        for r in &function {
            line(&render_function_row(r));
        }
    }
    if !perf.is_empty() || function.is_empty() {
        line("         %stddev     %change         %stddev");
        line("             \\          |                \\  ");
        for r in perf {
            line(&render_row(r));
        }
    }
    for (group, n) in &t.omitted {
        line(&format!(
            "      ({n} more changed {group}.* rows: the full table is on the dashboard)"
        ));
    }
    out
}

/// `show_failure_change`: each side's count (blank when 0) and runs, the
/// change of the share in points between them.
fn render_function_row(r: &TableRow) -> String {
    let (base_runs, head_runs) = r.function_runs.unwrap_or_default();
    let side = |count: f64, runs: usize| {
        let count = if count == 0.0 {
            String::new()
        } else {
            format!("{}", count.round() as i64)
        };
        format!("{count:>11}:{runs:<4}")
    };
    format!(
        "{}{:>10.0}% {}  {}",
        side(r.base_mean, base_runs),
        r.change,
        side(r.head_mean, head_runs),
        r.metric
    )
}

fn render_row(r: &TableRow) -> String {
    let change = if r.change.abs() < 0.05 { 0.0 } else { r.change };
    let unit = if r.change_is_absolute { " " } else { "%" };
    format!(
        "{:>10}{}{:>+10.1}{}{:>11}{}  {}",
        number(r.base_mean),
        stddev(r.base_stddev_pct),
        change,
        unit,
        number(r.head_mean),
        stddev(r.head_stddev_pct),
        r.metric
    )
}

fn stddev(pct: f64) -> String {
    if pct > STDDEV_SHOWN_ABOVE {
        format!(" ±{:>3.0}%", pct)
    } else {
        " ".repeat(6)
    }
}

/// lkp's number format: 4 significant digits in exponent form from 1e5,
/// integers from 1000, two decimals below.
pub fn number(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        format!("{x}")
    } else if a >= 1e5 {
        let s = format!("{x:.3e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => {
                let e: i32 = exp.parse().unwrap_or(0);
                format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            }
            None => s,
        }
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn prefix(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_like_lkp() {
        assert_eq!(number(29142.4), "29142");
        assert_eq!(number(191.8), "191.80");
        assert_eq!(number(292_800_000.0), "2.928e+08");
        assert_eq!(number(0.004), "0.00");
        assert_eq!(number(123_456.0), "1.235e+05");
    }

    #[test]
    fn a_vanished_metric_is_a_zero_day_row() {
        use crate::stats::{compare_runs, StatsConfig};
        let run = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let base: Vec<_> = [100.0, 101.0, 102.0]
            .iter()
            .map(|v| run(&[("x.ops", 10.0), ("x.gone_ops", *v)]))
            .collect();
        let head: Vec<_> = (0..3).map(|_| run(&[("x.ops", 10.0)])).collect();
        let c = compare_runs(&base, &head, &StatsConfig::default()).expect("compare");
        let commit = |sha: &str| CommitRef {
            sha: sha.repeat(40),
            subject: "s".into(),
        };
        let table = |filter| {
            TableInput::from_comparison(BTreeMap::new(), commit("a"), commit("b"), &c, filter)
        };
        let rows = table(RowFilter::ZeroDayChanged).rows;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(
            render_row(&rows[0]),
            "    101.00          -100.0%       0.00        x.gone_ops"
        );
        let all: Vec<String> = table(RowFilter::All)
            .rows
            .into_iter()
            .map(|r| r.metric)
            .collect();
        assert_eq!(all, ["x.gone_ops", "x.ops"]);
        assert!(table(RowFilter::KbotDifferent).rows.is_empty());
    }

    #[test]
    fn absolute_change_row() {
        let r = TableRow {
            metric: "perf-profile.self.cycles-pp.pipe_read".into(),
            base_mean: 10.63,
            base_stddev_pct: 1.0,
            change: -2.1,
            change_is_absolute: true,
            head_mean: 8.53,
            head_stddev_pct: 3.2,
            function_runs: None,
        };
        assert_eq!(
            render_row(&r),
            "     10.63            -2.1        8.53 ±  3%  perf-profile.self.cycles-pp.pipe_read"
        );
    }

    #[test]
    fn function_stats_get_lkps_failure_block() {
        let row = |metric: &str, base: f64, head: f64, change: f64| TableRow {
            metric: metric.into(),
            base_mean: base,
            base_stddev_pct: 0.0,
            change,
            change_is_absolute: false,
            head_mean: head,
            head_stddev_pct: 0.0,
            function_runs: Some((3, 3)),
        };
        let t = TableInput {
            axes: BTreeMap::from([("testcase".to_string(), "stress-ng".to_string())]),
            base: CommitRef {
                sha: "a".repeat(40),
                subject: "base".into(),
            },
            head: CommitRef {
                sha: "b".repeat(40),
                subject: "head".into(),
            },
            omitted: BTreeMap::new(),
            rows: vec![
                row("stress-ng.pipe.fail", 0.0, 3.0, 100.0),
                TableRow {
                    function_runs: None,
                    ..row("stress-ng.pipe.ops_per_sec", 1000.0, 900.0, -10.0)
                },
            ],
        };
        let text = render(&t);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains("fail:runs"))
            .expect("failure header");
        assert_eq!(lines[at], "       fail:runs  %reproduction    fail:runs");
        assert_eq!(
            lines[at + 1],
            "           |             |             |    "
        );
        assert_eq!(
            lines[at + 2],
            "           :3          100%           3:3     stress-ng.pipe.fail"
        );
        assert_eq!(
            lines[at + 3],
            "         %stddev     %change         %stddev"
        );
        assert!(lines[at + 5].ends_with("stress-ng.pipe.ops_per_sec"));
    }

    /// The KPI, then the workload's stats by name and the monitors, then
    /// the profile (self, then children), monitor and profile rows biggest
    /// movers first; the budget keeps the top rows of
    /// each group and says how many it left out.
    #[test]
    fn sections_put_the_biggest_movers_first_within_a_budget() {
        let row = |metric: &str, change: f64| TableRow {
            metric: metric.into(),
            base_mean: 1.0,
            base_stddev_pct: 0.0,
            change,
            change_is_absolute: metrics::is_perf_profile(metric),
            head_mean: 1.0,
            head_stddev_pct: 0.0,
            function_runs: None,
        };
        let mut rows = vec![
            row("perf-profile.children.cpu-clock.pipe_write", 30.0),
            row("perf-profile.self.cpu-clock.pipe_read", -1.5),
            row("perf-profile.self.cpu-clock.clear_page_erms", 25.0),
            row("perf-profile.self.cpu-clock.memset", 0.8),
            row("vmstat.system.cs", -3.0),
            row("proc-vmstat.pgalloc_normal", 400.0),
            row("perf-bench-sched-pipe.ops_per_sec", -40.0),
            row(
                "perf-bench-sched-pipe.time.voluntary_context_switches",
                90.0,
            ),
            row("perf-bench-sched-pipe.time.elapsed_time", 20.0),
        ];
        sort_rows(&mut rows);
        let order: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
        assert_eq!(
            order,
            [
                "perf-bench-sched-pipe.ops_per_sec",
                "perf-bench-sched-pipe.time.elapsed_time",
                "perf-bench-sched-pipe.time.voluntary_context_switches",
                "proc-vmstat.pgalloc_normal",
                "vmstat.system.cs",
                "perf-profile.self.cpu-clock.clear_page_erms",
                "perf-profile.self.cpu-clock.pipe_read",
                "perf-profile.self.cpu-clock.memset",
                "perf-profile.children.cpu-clock.pipe_write",
            ]
        );
        let t = TableInput {
            axes: BTreeMap::new(),
            base: CommitRef {
                sha: "a".repeat(40),
                subject: "base".into(),
            },
            head: CommitRef {
                sha: "b".repeat(40),
                subject: "head".into(),
            },
            rows,
            omitted: BTreeMap::new(),
        }
        .within_budget(2);
        assert_eq!(t.rows.len(), 8);
        assert!(!t.rows.iter().any(|r| r.metric.ends_with(".memset")));
        assert_eq!(
            t.omitted,
            BTreeMap::from([("perf-profile.self".to_string(), 1)])
        );
        assert!(render(&t).contains("(1 more changed perf-profile.self.* rows"));
    }
}
