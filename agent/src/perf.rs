//! `perf stat` around each execution and one `perf record -g` profile of the
//! workload, on backends that run on the measured kernel itself (host, kexec).

use std::path::Path;
use std::process::Command;

use std::collections::BTreeMap;

use kbot_core::parsers::{perf_stat, Metrics};

use crate::process;

/// Whether perf can be used here.
pub fn available() -> bool {
    process::on_path("perf")
}

/// The command prefix that runs a command under `perf stat` writing CSV to
/// `out`, counting LKP's perf-stat events (`kbot_core::parsers::perf_stat`).
pub fn stat_prefix(out: &Path) -> Vec<String> {
    vec![
        "perf".into(),
        "stat".into(),
        "-x,".into(),
        "-e".into(),
        perf_stat::LKP_EVENTS.join(","),
        "-o".into(),
        out.display().to_string(),
        "--".into(),
    ]
}

/// Event counts of one `perf stat -x,` output; events the machine cannot
/// count (a VM without a PMU) are left out.
pub fn parse_stat_csv(text: &str) -> BTreeMap<String, f64> {
    perf_stat::counts(text)
}

/// LKP's `perf-stat.*` metrics from the counts summed over the executions
/// and the seconds those executions took.
pub fn stat_metrics(totals: &BTreeMap<String, f64>, seconds: f64) -> Metrics {
    perf_stat::lkp_metrics(totals, seconds)
}

/// Records a system-wide call-graph profile of `argv` and returns
/// `perf-profile.self.<event>.<symbol>` percentages (cycles:pp, or
/// cpu-clock where the machine has no cycle counter).
pub fn profile(argv: &[String], data: &Path) -> Option<Metrics> {
    for (event, name) in [("cycles:pp", "cycles-pp"), ("cpu-clock", "cpu-clock")] {
        let recorded = process::spawn_tied(
            Command::new("perf")
                .args(["record", "-q", "-a", "-g", "-e", event, "-o"])
                .arg(data)
                .arg("--")
                .args(argv)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        )
        .is_ok_and(|mut child| child.wait().is_ok_and(|s| s.success()));
        if !recorded {
            continue;
        }
        let report = process::output(
            Command::new("perf")
                .args([
                    "report",
                    "--stdio",
                    "--no-children",
                    "--sort",
                    "sym",
                    "-g",
                    "none",
                    "-i",
                ])
                .arg(data),
        )
        .ok()?;
        return Some(parse_report(&report, name));
    }
    None
}

/// `perf report --stdio --sort sym -g none` lines (`  12.34%  [k] pipe_write`).
/// As LKP's programs/perf-profile/parse: symbols lose their `.isra.N`,
/// `.constprop.N` and `.part.N` suffixes, rows that then share a name are
/// summed, and sums under 0.05% are dropped.
pub fn parse_report(text: &str, event: &str) -> Metrics {
    let mut sums = Metrics::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let mut w = l.split_whitespace();
        let Some(pct) = w
            .next()
            .and_then(|p| p.strip_suffix('%'))
            .and_then(|p| p.parse::<f64>().ok())
        else {
            continue;
        };
        if !w.next().is_some_and(|s| s.starts_with('[')) {
            continue;
        }
        let Some(sym) = w.next() else {
            continue;
        };
        let name = format!("perf-profile.self.{event}.{}", lkp_symbol(sym));
        *sums.entry(name).or_insert(0.0) += pct;
    }
    // A system-wide profile can hold huge C++/Rust symbols of other
    // processes; the server refuses names it cannot store.
    sums.retain(|name, pct| *pct >= 0.05 && kbot_core::metrics::is_storable_name(name));
    sums
}

/// LKP's `fixup_symbol_name`: removes every `.isra.N`, `.constprop.N` and
/// `.part.N` (compiler clones of one function).
pub fn lkp_symbol(sym: &str) -> String {
    let mut out = String::with_capacity(sym.len());
    let mut rest = sym;
    'scan: while let Some(c) = rest.chars().next() {
        for tag in [".isra.", ".constprop.", ".part."] {
            if let Some(after) = rest.strip_prefix(tag) {
                let digits = after.bytes().take_while(u8::is_ascii_digit).count();
                if digits > 0 {
                    rest = &after[digits..];
                    continue 'scan;
                }
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_csv_becomes_lkp_perf_stat_metrics() {
        let c = parse_stat_csv("# started on\n\n1.49,msec,task-clock,1489540,100.00,0.162,CPUs utilized\n<not supported>,,cpu-cycles,0,100.00,,\n7,,context-switches,1,100.00,,\n");
        assert_eq!(c.get("task-clock"), Some(&1.49));
        assert!(!c.contains_key("cpu-cycles"));
        let m = stat_metrics(&c, 0.5);
        assert_eq!(m.get("perf-stat.ps.context-switches"), Some(&14.0));
        assert_eq!(m.get("perf-stat.ps.task-clock"), Some(&2.98));
        assert!(m.keys().all(|k| k.starts_with("perf-stat.ps.")), "{m:?}");
        let prefix = stat_prefix(Path::new("/tmp/x.csv"));
        assert!(
            prefix[4].starts_with("cpu-cycles,instructions,"),
            "{prefix:?}"
        );
    }

    #[test]
    fn report_lines_become_profile_percentages() {
        let m = parse_report("# Overhead  Symbol\n     2.15%  [k] finish_task_switch.isra.0\n     0.01%  [.] tiny\n    12.00%  [k] pipe_write\n     0.03%  [k] copy_page.part.0\n     0.03%  [k] copy_page.constprop.12\n", "cycles-pp");
        assert_eq!(m.get("perf-profile.self.cycles-pp.pipe_write"), Some(&12.0));
        // LKP's names: clone suffixes dropped, clones summed (0.06%).
        assert_eq!(
            m.get("perf-profile.self.cycles-pp.finish_task_switch"),
            Some(&2.15)
        );
        assert!((m["perf-profile.self.cycles-pp.copy_page"] - 0.06).abs() < 1e-9);
        assert_eq!(m.len(), 3);
        assert_eq!(lkp_symbol("a.isra.0.constprop.3"), "a");
        assert_eq!(lkp_symbol("b.part.x"), "b.part.x");
    }
}
