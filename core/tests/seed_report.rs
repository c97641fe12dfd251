//! The seed report (`shared/seeds/001_b7174dea78e4e81b.txt`): samples with
//! its means and spreads must give the -18.5% lmbench3.PIPE.bandwidth.MB/sec
//! regression and reproduce its compare table byte for byte.

use std::collections::BTreeMap;

use kbot_core::metrics::Impact;
use kbot_core::stats::{compare_runs, Outcome, StatsConfig};
use kbot_core::table::{render, CommitRef, RowFilter, TableInput};

/// Lines 36-54 of the seed e-mail (the "Details" compare block).
const SEED_TABLE: &str = "\
=========================================================================================
compiler/cpufreq_governor/kconfig/mode/nr_threads/rootfs/tbox_group/test/test_memory_size/testcase:
  gcc-14/performance/x86_64-rhel-9.4/development/20%/debian-13-x86_64-20250902.cgz/lkp-spr-2sp2/PIPE/50%/lmbench3

commit: 
  c610d2d078 (\"fs: annotate inode timestamp accessors\")
  f7f4665dc5 (\"fs/pipe: unify the page pools into a single per-pipe pool\")

c610d2d0787961cd f7f4665dc520fd8bbc1db20e599
---------------- --------------------------- 
         %stddev     %change         %stddev
             \\          |                \\  
     29142 ±  2%     -18.5%      23737        lmbench3.PIPE.bandwidth.MB/sec
    191.80 ±  8%     +54.1%     295.65 ±  5%  lmbench3.time.elapsed_time
    191.80 ±  8%     +54.1%     295.65 ±  5%  lmbench3.time.elapsed_time.max
     23261 ± 16%     +19.3%      27743 ±  5%  lmbench3.time.involuntary_context_switches
      9853 ± 16%     +27.9%      12605 ±  5%  lmbench3.time.system_time
     51.80 ±  2%     +11.6%      57.80 ±  3%  lmbench3.time.user_time
 2.928e+08 ±  3%     +26.6%  3.706e+08 ±  4%  lmbench3.time.voluntary_context_switches
";

/// (metric, base mean, base %σ, head mean, head %σ). The printed `± s%`
/// values are rounded, so the spreads sit 0.2-0.3 above them; the head of
/// the KPI prints no `±`, so its spread is below the 2% display floor.
const ROWS: &[(&str, f64, f64, f64, f64)] = &[
    ("lmbench3.PIPE.bandwidth.MB/sec", 29142.0, 2.3, 23737.0, 1.5),
    ("lmbench3.time.elapsed_time", 191.80, 8.2, 295.65, 5.2),
    ("lmbench3.time.elapsed_time.max", 191.80, 8.2, 295.65, 5.2),
    (
        "lmbench3.time.involuntary_context_switches",
        23261.0,
        16.2,
        27743.0,
        5.2,
    ),
    ("lmbench3.time.system_time", 9853.0, 16.2, 12605.0, 5.2),
    ("lmbench3.time.user_time", 51.80, 2.3, 57.80, 3.2),
    (
        "lmbench3.time.voluntary_context_switches",
        2.928e8,
        3.2,
        3.706e8,
        4.2,
    ),
];

/// Offsets of the base runs: mean 0, a long low tail, and 0-day's "median"
/// (`sorted[n/2]`) close to the maximum, as a few slow runs give.
const BASE_Z: [f64; 6] = [-2.0, -0.2, 0.2, 0.4, 0.6, 1.0];

/// Six runs with exactly the given mean and population %σ, shaped by `z`
/// (the head uses the mirror image of [`BASE_Z`]).
fn runs(
    z: [f64; 6],
    side: impl Fn(&(&str, f64, f64, f64, f64)) -> (f64, f64),
) -> Vec<BTreeMap<String, f64>> {
    let sd = (z.iter().map(|v| v * v).sum::<f64>() / z.len() as f64).sqrt();
    (0..z.len())
        .map(|i| {
            ROWS.iter()
                .map(|r| {
                    let (mean, pct) = side(r);
                    (r.0.to_string(), mean * (1.0 + pct / 100.0 * z[i] / sd))
                })
                .collect()
        })
        .collect()
}

fn axes() -> BTreeMap<String, String> {
    [
        ("compiler", "gcc-14"),
        ("cpufreq_governor", "performance"),
        ("kconfig", "x86_64-rhel-9.4"),
        ("mode", "development"),
        ("nr_threads", "20%"),
        ("rootfs", "debian-13-x86_64-20250902.cgz"),
        ("tbox_group", "lkp-spr-2sp2"),
        ("test", "PIPE"),
        ("test_memory_size", "50%"),
        ("testcase", "lmbench3"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[test]
fn seed_regression_and_table() {
    let base = runs(BASE_Z, |r| (r.1, r.2));
    let head = runs(BASE_Z.map(|v| -v), |r| (r.3, r.4));
    let cmp = compare_runs(&base, &head, &StatsConfig::default()).expect("valid samples");

    let kpi = &cmp.metrics[0];
    assert_eq!(kpi.metric, "lmbench3.PIPE.bandwidth.MB/sec");
    assert_eq!(format!("{:.1}", kpi.change), "-18.5");
    assert_eq!(kpi.impact, Impact::Regression);
    assert!(kpi.zero_day.changed, "{:?}", kpi.zero_day);
    assert_eq!(kpi.kbot.outcome, Outcome::Different, "{:?}", kpi.kbot);
    assert!(
        cmp.metrics.iter().all(|m| m.zero_day.changed),
        "every seed row is a 0-day change"
    );

    let table = TableInput::from_comparison(
        axes(),
        CommitRef {
            sha: "c610d2d0787961cd".into(),
            subject: "fs: annotate inode timestamp accessors".into(),
        },
        CommitRef {
            sha: "f7f4665dc520fd8bbc1db20e59945773e03744a0".into(),
            subject: "fs/pipe: unify the page pools into a single per-pipe pool".into(),
        },
        &cmp,
        RowFilter::ZeroDayChanged,
    );
    assert_eq!(render(&table), SEED_TABLE);

    let json = serde_json::to_string(&table).expect("serializable");
    let back: TableInput = serde_json::from_str(&json).expect("round trip");
    assert_eq!(render(&back), SEED_TABLE);
}
