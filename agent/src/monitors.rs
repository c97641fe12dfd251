//! Monitors around a run: /proc/vmstat, /proc/stat and /proc/interrupts
//! snapshots taken before and after the workload (on the host, or inside the
//! guest and sent back over the results channel), turned into LKP-named
//! metrics: `proc-vmstat.*`, `vmstat.*` and `interrupts.*`.

use std::collections::BTreeMap;

use kbot_core::parsers::Metrics;

/// The three files, read at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub vmstat: String,
    pub stat: String,
    pub interrupts: String,
}

impl Snapshot {
    /// Reads this machine's files (missing ones stay empty: a tiny kernel
    /// may lack some).
    pub fn read_host() -> Snapshot {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Snapshot {
            vmstat: read("/proc/vmstat"),
            stat: read("/proc/stat"),
            interrupts: read("/proc/interrupts"),
        }
    }
}

/// All monitor metrics for a run of `elapsed_secs` between two snapshots.
pub fn metrics(before: &Snapshot, after: &Snapshot, elapsed_secs: f64) -> Metrics {
    let mut m = proc_vmstat(&before.vmstat, &after.vmstat);
    m.extend(vmstat(&before.stat, &after.stat, elapsed_secs));
    m.extend(interrupts(&before.interrupts, &after.interrupts));
    m
}

fn counters(text: &str) -> BTreeMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k, v.trim().parse().ok()?))
        })
        .collect()
}

/// `proc-vmstat.<name>`: the change of each event counter, and the final
/// value of the `nr_*` gauges (LKP averages those; two samples is what we have).
pub fn proc_vmstat(before: &str, after: &str) -> Metrics {
    let b = counters(before);
    counters(after)
        .into_iter()
        .map(|(k, a)| {
            let v = if k.starts_with("nr_") {
                a as f64
            } else {
                a.saturating_sub(b.get(k).copied().unwrap_or(0)) as f64
            };
            (format!("proc-vmstat.{k}"), v)
        })
        .collect()
}

/// The aggregate `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal.
fn cpu_line(stat: &str) -> Option<Vec<u64>> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect()
}

fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        l.strip_prefix(key)?
            .strip_prefix(' ')?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// `vmstat.*` as vmstat(8) would show averaged over the run: context
/// switches and interrupts per second, and the CPU time split in percent.
pub fn vmstat(before: &str, after: &str, elapsed_secs: f64) -> Metrics {
    let mut m = Metrics::new();
    if elapsed_secs > 0.0 {
        for (key, name) in [("ctxt", "vmstat.system.cs"), ("intr", "vmstat.system.in")] {
            if let (Some(b), Some(a)) = (stat_value(before, key), stat_value(after, key)) {
                m.insert(name.to_string(), a.saturating_sub(b) as f64 / elapsed_secs);
            }
        }
    }
    if let (Some(b), Some(a)) = (cpu_line(before), cpu_line(after)) {
        let d: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| a.saturating_sub(*b) as f64)
            .collect();
        let field = |i: usize| d.get(i).copied().unwrap_or(0.0);
        let total: f64 = d.iter().take(8).sum();
        if total > 0.0 {
            let pct = |v: f64| 100.0 * v / total;
            m.insert("vmstat.cpu.us".to_string(), pct(field(0) + field(1)));
            m.insert(
                "vmstat.cpu.sy".to_string(),
                pct(field(2) + field(5) + field(6)),
            );
            m.insert("vmstat.cpu.id".to_string(), pct(field(3)));
            m.insert("vmstat.cpu.wa".to_string(), pct(field(4)));
            m.insert("vmstat.cpu.st".to_string(), pct(field(7)));
        }
    }
    m
}

/// Per interrupt source: the sum over CPUs, keyed as LKP's `interrupts`
/// monitor (`LOC:Local_timer_interrupts`, `4:IO-APIC.4-edge.ttyS0`).
fn interrupt_totals(text: &str) -> BTreeMap<String, u64> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_whitespace().count())
        .unwrap_or(0);
    lines
        .filter_map(|l| {
            let (irq, rest) = l.split_once(':')?;
            let mut fields = rest.split_whitespace();
            let counts: Vec<u64> = fields
                .by_ref()
                .take(ncpu)
                .map_while(|f| f.parse().ok())
                .collect();
            let desc: Vec<&str> = fields.collect();
            let name = if desc.is_empty() {
                irq.trim().to_string()
            } else {
                format!("{}:{}", irq.trim(), desc.join("."))
            };
            Some((name.replace(' ', "_"), counts.iter().sum()))
        })
        .collect()
}

/// `interrupts.<source>`: interrupts taken during the run, summed over CPUs.
pub fn interrupts(before: &str, after: &str) -> Metrics {
    let b = interrupt_totals(before);
    interrupt_totals(after)
        .into_iter()
        .map(|(k, a)| {
            let d = a.saturating_sub(b.get(&k).copied().unwrap_or(0));
            (format!("interrupts.{k}"), d as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmstat_counters_are_deltas_and_gauges_are_values() {
        let m = proc_vmstat(
            "nr_free_pages 100\npgfault 1000\n",
            "nr_free_pages 90\npgfault 1500\npgalloc_normal 7\n",
        );
        assert_eq!(m.get("proc-vmstat.pgfault"), Some(&500.0));
        assert_eq!(m.get("proc-vmstat.nr_free_pages"), Some(&90.0));
        assert_eq!(m.get("proc-vmstat.pgalloc_normal"), Some(&7.0));
    }

    #[test]
    fn proc_stat_gives_rates_and_cpu_split() {
        let before = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2\nintr 1000 5 6\nctxt 5000\n";
        let after = "cpu  150 0 250 1000 0 0 0 0 0 0\ncpu0 1 2\nintr 3000 5 6\nctxt 9000\n";
        let m = vmstat(before, after, 2.0);
        assert_eq!(m.get("vmstat.system.cs"), Some(&2000.0));
        assert_eq!(m.get("vmstat.system.in"), Some(&1000.0));
        assert_eq!(m.get("vmstat.cpu.us"), Some(&12.5));
        assert_eq!(m.get("vmstat.cpu.sy"), Some(&37.5));
        assert_eq!(m.get("vmstat.cpu.id"), Some(&50.0));
    }

    #[test]
    fn interrupts_sum_over_cpus() {
        let before = "           CPU0       CPU1\n  4:         10          0   IO-APIC   4-edge      ttyS0\nLOC:        100        200   Local timer interrupts\nERR:          0\n";
        let after = "           CPU0       CPU1\n  4:         15          1   IO-APIC   4-edge      ttyS0\nLOC:        150        260   Local timer interrupts\nERR:          0\n";
        let m = interrupts(before, after);
        assert_eq!(m.get("interrupts.4:IO-APIC.4-edge.ttyS0"), Some(&6.0));
        assert_eq!(m.get("interrupts.LOC:Local.timer.interrupts"), Some(&110.0));
        assert_eq!(m.get("interrupts.ERR"), Some(&0.0));
    }

    #[test]
    fn host_snapshots_move_forward() {
        let a = Snapshot::read_host();
        let b = Snapshot::read_host();
        let m = metrics(&a, &b, 0.01);
        assert!(m.contains_key("vmstat.cpu.id") || m.contains_key("vmstat.system.cs"));
        assert!(m.values().all(|v| v.is_finite()));
    }
}
