//! `perf stat -x,` around a workload, named as LKP's perf-stat monitor
//! names it (`programs/perf-stat/parse`): `perf-stat.ps.<event>` (the count
//! per second of the measured time), `perf-stat.total.instructions`, and
//! the derived `perf-stat.overall.*` rows (miss rates, ipc/cpi, MPKI, ...)
//! from the totals; with the benchmark's workload, LKP's path length
//! ([`add_path_length`]).
//!
//! LKP runs `perf stat -a -I 1000` beside the test and also prints one
//! `i.<event>` row per interval; kbot's agent runs `perf stat` around each
//! execution of the workload (its processes only, no interval mode), sums
//! the counts and divides by the time those executions took, so it has no
//! `i.*` rows.

use std::collections::BTreeMap;

use super::Metrics;

/// The events LKP's monitor asks for by default (without its event groups):
/// the hardware and cache events a PMU may lack, then the software ones.
pub const LKP_EVENTS: &[&str] = &[
    "cpu-cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-instructions",
    "branch-misses",
    "dTLB-loads",
    "dTLB-load-misses",
    "dTLB-stores",
    "dTLB-store-misses",
    "iTLB-loads",
    "iTLB-load-misses",
    "cpu-clock",
    "task-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
];

/// Event counts of one `perf stat -x,` output (`value,unit,event,...`);
/// events perf could not count (`<not supported>`, `<not counted>`) are
/// left out, and a PMU-qualified name (`cpu_core/cpu-cycles/`) is reduced to
/// the event, as LKP's parser does.
pub fn counts(csv: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in csv.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let (Some(value), Some(event)) = (f.first(), f.get(2)) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let mut event = event.trim();
        if let Some(inner) = event.split('/').nth(1).filter(|_| event.ends_with('/')) {
            event = inner;
        }
        if !event.is_empty() && value.is_finite() {
            *out.entry(event.to_string()).or_insert(0.0) += value;
        }
    }
    out
}

/// LKP's perf-stat metrics from event totals over `seconds` of measured time.
pub fn lkp_metrics(totals: &BTreeMap<String, f64>, seconds: f64) -> Metrics {
    let mut m = Metrics::new();
    let mut put = |key: String, value: f64| {
        if value.is_finite() {
            m.insert(format!("perf-stat.{key}"), value);
        }
    };
    if seconds > 0.0 {
        for (event, count) in totals {
            put(format!("ps.{event}"), count / seconds);
        }
    }
    let get = |k: &str| totals.get(k).copied().unwrap_or(0.0);
    let instructions = get("instructions");
    if instructions != 0.0 {
        put("total.instructions".into(), instructions);
    }
    for (event, &value) in totals {
        if let Some(stem) = event.strip_suffix("-misses") {
            // The first of `<stem>s`, `<stem>-references`,
            // `<stem>-instructions` that was counted is the total.
            let total = [
                ("s", true),
                ("-references", false),
                ("-instructions", false),
            ]
            .iter()
            .map(|(suffix, adds)| (get(&format!("{stem}{suffix}")), adds))
            .find(|(v, _)| *v != 0.0)
            .map(|(v, adds)| if *adds { v + value } else { v });
            if let Some(total) = total {
                put(format!("overall.{stem}-miss-rate%"), value * 100.0 / total);
            }
            if value == 0.0 {
                continue;
            }
            if let Some(pre) = event.strip_suffix("iTLB-load-misses") {
                let ins = get(&format!("{pre}instructions"));
                if ins != 0.0 {
                    put(
                        format!("overall.{pre}instructions-per-iTLB-miss"),
                        ins / value,
                    );
                }
            } else if let Some(pre) = event.strip_suffix("cache-misses") {
                let cycles = get(&format!("{pre}cpu-cycles"));
                if cycles != 0.0 {
                    put(
                        format!("overall.{pre}cycles-between-cache-misses"),
                        cycles / value,
                    );
                }
                let ins = get(&format!("{pre}instructions"));
                if ins != 0.0 {
                    put(format!("overall.{pre}MPKI"), value / ins * 1000.0);
                }
            }
        } else if let Some(pre) = event.strip_suffix("cpu-cycles") {
            let ins = get(&format!("{pre}instructions"));
            if ins != 0.0 {
                put(format!("overall.{pre}ipc"), ins / value);
                put(format!("overall.{pre}cpi"), value / ins);
            }
        }
    }
    m
}

/// Adds `perf-stat.overall.path-length` to a run's metrics, as lkp-tests'
/// `lib/matrix.rb` (`add_path_length`) adds it to a run's stats:
/// `perf-stat.total.instructions` over the run's one `*.workload` stat (the
/// benchmark's total work: will-it-scale's ops, unixbench's loops), the
/// instructions spent per unit of work. Nothing is added when the run has no
/// instructions count, no `*.workload` or several, or a workload of 0
/// (upstream would store Infinity). kbot's instructions are the workload's
/// own processes' (see the module's note), where LKP counts the whole system.
pub fn add_path_length(metrics: &mut Metrics) {
    let mut workloads = metrics.iter().filter(|(k, _)| k.ends_with(".workload"));
    let (Some((_, &workload)), None) = (workloads.next(), workloads.next()) else {
        return;
    };
    let Some(&instructions) = metrics.get("perf-stat.total.instructions") else {
        return;
    };
    let path_length = instructions / workload;
    if workload != 0.0 && path_length.is_finite() {
        metrics.insert("perf-stat.overall.path-length".to_string(), path_length);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "# started on\n\n\
        1500.00,msec,task-clock,1500000000,100.00,1.000,CPUs utilized\n\
        <not supported>,,dTLB-loads,0,100.00,,\n\
        4000000000,,cpu_core/cpu-cycles/,1500000000,100.00,,\n\
        6000000000,,instructions,1500000000,100.00,1.50,insn per cycle\n\
        1000000,,cache-references,1500000000,100.00,,\n\
        250000,,cache-misses,1500000000,100.00,25.00,of all cache refs\n\
        1000000000,,branch-instructions,1500000000,100.00,,\n\
        10000000,,branch-misses,1500000000,100.00,1.00,of all branches\n\
        300,,context-switches,1500000000,100.00,,\n";

    #[test]
    fn lkp_names_and_values() {
        let c = counts(CSV);
        assert_eq!(c["cpu-cycles"], 4e9);
        assert!(!c.contains_key("dTLB-loads"));
        let m = lkp_metrics(&c, 2.0);
        assert_eq!(m["perf-stat.ps.context-switches"], 150.0);
        assert_eq!(m["perf-stat.ps.task-clock"], 750.0);
        assert_eq!(m["perf-stat.total.instructions"], 6e9);
        assert_eq!(m["perf-stat.overall.ipc"], 1.5);
        assert_eq!(m["perf-stat.overall.cache-miss-rate%"], 25.0);
        assert_eq!(m["perf-stat.overall.branch-miss-rate%"], 1.0);
        assert_eq!(m["perf-stat.overall.cycles-between-cache-misses"], 16_000.0);
        assert!((m["perf-stat.overall.MPKI"] - 250_000.0 / 6e9 * 1000.0).abs() < 1e-12);
        assert!(m
            .keys()
            .all(|k| !k.starts_with("perf-stat.total.") || k.ends_with("instructions")));
    }

    #[test]
    fn load_misses_count_against_loads_plus_misses() {
        let c = BTreeMap::from([
            ("dTLB-loads".to_string(), 900.0),
            ("dTLB-load-misses".to_string(), 100.0),
        ]);
        let m = lkp_metrics(&c, 1.0);
        assert_eq!(m["perf-stat.overall.dTLB-load-miss-rate%"], 10.0);
        // No time measured: no per-second rows.
        assert!(lkp_metrics(&c, 0.0).keys().all(|k| !k.contains(".ps.")));
    }

    #[test]
    fn path_length_is_instructions_per_unit_of_workload() {
        let mut m = lkp_metrics(&counts(CSV), 2.0);
        m.insert("will-it-scale.workload".into(), 3e6);
        m.insert("will-it-scale.per_process_ops".into(), 1e6);
        add_path_length(&mut m);
        assert_eq!(m["perf-stat.overall.path-length"], 2000.0);

        // No workload, two workloads, a zero workload, no instructions:
        // upstream adds nothing (or Infinity, which kbot does not store).
        let base = lkp_metrics(&counts(CSV), 2.0);
        let mut none = base.clone();
        add_path_length(&mut none);
        let mut two = base.clone();
        two.insert("a.workload".into(), 1.0);
        two.insert("b.workload".into(), 1.0);
        add_path_length(&mut two);
        let mut zero = base.clone();
        zero.insert("a.workload".into(), 0.0);
        add_path_length(&mut zero);
        let mut no_ins = Metrics::from([("a.workload".to_string(), 5.0)]);
        add_path_length(&mut no_ins);
        for m in [none, two, zero, no_ins] {
            assert!(!m.contains_key("perf-stat.overall.path-length"), "{m:?}");
        }
    }
}
