//! The seed report's figures (`core/tests/fixtures/seed_001_report.txt`) as
//! samples, shared by the statistics/table test and the e-mail test.

use std::collections::BTreeMap;

/// (metric, base mean, base %σ, head mean, head %σ). The printed `± s%`
/// values are rounded, so the spreads sit 0.2-0.3 above them; the head of
/// the KPI prints no `±`, so its spread is below the 2% display floor.
pub const ROWS: &[(&str, f64, f64, f64, f64)] = &[
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

/// One run per entry of `z`, each metric at `mean * (1 + pct/100 * z/σ(z))`:
/// exactly the given mean and population %σ when `z` has mean 0.
pub fn runs(
    z: &[f64],
    side: impl Fn(&(&str, f64, f64, f64, f64)) -> (f64, f64),
) -> Vec<BTreeMap<String, f64>> {
    let sd = (z.iter().map(|v| v * v).sum::<f64>() / z.len() as f64).sqrt();
    z.iter()
        .map(|zi| {
            ROWS.iter()
                .map(|r| {
                    let (mean, pct) = side(r);
                    (r.0.to_string(), mean * (1.0 + pct / 100.0 * zi / sd))
                })
                .collect()
        })
        .collect()
}

/// The seed's axes (the `compiler/cpufreq_governor/...` header).
pub fn axes() -> BTreeMap<String, String> {
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
