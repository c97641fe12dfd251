//! The seed report (`core/tests/fixtures/seed_001_report.txt`): samples with
//! its means and spreads must give the -18.5% lmbench3.PIPE.bandwidth.MB/sec
//! regression and reproduce its compare table byte for byte.

use crate::common::seed::{axes, runs};
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

/// Offsets of the base runs: mean 0, a long low tail, and 0-day's "median"
/// (`sorted[n/2]`) close to the maximum, as a few slow runs give.
const BASE_Z: [f64; 6] = [-2.0, -0.2, 0.2, 0.4, 0.6, 1.0];

#[test]
fn seed_regression_and_table() {
    let base = runs(&BASE_Z, |r| (r.1, r.2));
    let head = runs(&BASE_Z.map(|v| -v), |r| (r.3, r.4));
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
