//! Event counters of /proc read before and after the measured runs: the
//! metrics are their change over the run (and `vmstat.*` rates from it).
//! /proc/vmstat, /proc/stat, /proc/interrupts, /proc/softirqs and
//! /proc/schedstat.

use std::collections::BTreeMap;

use kbot_core::parsers::Metrics;

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
pub(super) fn cpu_line(stat: &str) -> Option<Vec<u64>> {
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
            let irq = irq.trim();
            // LKP's programs/interrupts/parse: a numbered line joins its
            // chip, hwirq and device with `.` (dropping `.` after a comma),
            // a named one (`LOC`, `CAL`) its description with `_`.
            let name = if desc.is_empty() {
                irq.to_string()
            } else if irq.bytes().all(|b| b.is_ascii_digit()) {
                format!("{irq}:{}", desc.join(".").replace(",.", ","))
            } else {
                format!("{irq}:{}", desc.join("_"))
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

/// Per-CPU `softirqs.CPU<n>.<type>` metrics are given up to this many CPUs
/// (10 types each: 160 metrics at most); on larger machines only the
/// per-type totals.
pub const SOFTIRQS_PER_CPU_MAX_CPUS: usize = 16;

/// /proc/softirqs: the CPU column titles and, per softirq type, its count on
/// each CPU.
type SoftirqTable<'a> = (Vec<&'a str>, BTreeMap<&'a str, Vec<u64>>);

fn softirq_table(text: &str) -> Option<SoftirqTable<'_>> {
    let mut lines = text.lines();
    let cpus: Vec<&str> = lines.next()?.split_whitespace().collect();
    if cpus.is_empty() || !cpus.iter().all(|c| c.starts_with("CPU")) {
        return None;
    }
    let rows = lines
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let counts: Vec<u64> = rest
                .split_whitespace()
                .map(|v| v.parse().ok())
                .collect::<Option<_>>()?;
            Some((name.trim(), counts))
        })
        .collect();
    Some((cpus, rows))
}

/// `softirqs.<type>` (LKP's names: `softirqs.NET_RX`, `softirqs.SCHED`,
/// `softirqs.RCU`, ...): softirqs raised during the run, summed over CPUs;
/// and, on machines with up to [`SOFTIRQS_PER_CPU_MAX_CPUS`] CPUs, LKP's
/// per-CPU `softirqs.CPU<n>.<type>` too. Nothing without both snapshots.
pub fn softirqs(before: &str, after: &str) -> Metrics {
    let (Some((bcpus, b)), Some((acpus, a))) = (softirq_table(before), softirq_table(after)) else {
        return Metrics::new();
    };
    let mut m = Metrics::new();
    let per_cpu = acpus.len() <= SOFTIRQS_PER_CPU_MAX_CPUS;
    for (name, counts) in &a {
        let old = b.get(name);
        let total = |c: &[u64]| c.iter().sum::<u64>();
        let d = total(counts).saturating_sub(old.map_or(0, |o| total(o)));
        m.insert(format!("softirqs.{name}"), d as f64);
        if !per_cpu {
            continue;
        }
        for (cpu, now) in acpus.iter().zip(counts) {
            // Columns are matched by title: a CPU that came online during
            // the run counts from zero.
            let was = bcpus
                .iter()
                .position(|c| c == cpu)
                .and_then(|i| old?.get(i).copied())
                .unwrap_or(0);
            m.insert(
                format!("softirqs.{cpu}.{name}"),
                now.saturating_sub(was) as f64,
            );
        }
    }
    m
}

/// The fields of a `cpu<N>` line of /proc/schedstat (version 15, kernels
/// 4.19 to 6.x), in order; `None` is the legacy field that is always 0.
const SCHEDSTAT_CPU_FIELDS: [Option<&str>; 9] = [
    Some("yld_count"),
    None,
    Some("sched_count"),
    Some("sched_goidle"),
    Some("ttwu_count"),
    Some("ttwu_local"),
    Some("rq_cpu_time"),
    Some("run_delay"),
    Some("pcount"),
];

/// The per-runqueue fields counted only while schedstats are enabled
/// (`schedstats=enable` or kernel.sched_schedstats = 1); the other three
/// come from CONFIG_SCHED_INFO and are always counted.
const SCHEDSTAT_GATED: [&str; 5] = [
    "yld_count",
    "sched_count",
    "sched_goidle",
    "ttwu_count",
    "ttwu_local",
];

/// The `cpu<N>` lines' fields summed over CPUs; `None` when there are none.
fn schedstat_totals(text: &str) -> Option<BTreeMap<&'static str, u64>> {
    let mut totals = BTreeMap::new();
    let mut seen = false;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let is_cpu = words
            .next()
            .and_then(|w| w.strip_prefix("cpu"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !is_cpu {
            continue;
        }
        let values: Option<Vec<u64>> = words.map(|w| w.parse().ok()).collect();
        let Some(values) = values.filter(|v| v.len() >= SCHEDSTAT_CPU_FIELDS.len()) else {
            continue;
        };
        seen = true;
        for (field, v) in SCHEDSTAT_CPU_FIELDS.iter().zip(values) {
            if let Some(field) = field {
                *totals.entry(*field).or_insert(0) += v;
            }
        }
    }
    seen.then_some(totals)
}

/// `schedstat.<field>`: the change during the run of /proc/schedstat's
/// per-runqueue counters, summed over CPUs: `yld_count`, `sched_count`,
/// `sched_goidle`, `ttwu_count`, `ttwu_local` (events), `rq_cpu_time` and
/// `run_delay` (nanoseconds) and `pcount` (tasks run). lkp-tests has no
/// parser for /proc/schedstat; the names are the kernel's (those of its
/// sched_debug `cpu#N` block, which LKP reports as `sched_debug.cpu.*`).
/// The sched-domain lines are left out. When the kernel counted no
/// `sched_count` at all, schedstats were disabled and only the three
/// SCHED_INFO fields, which are always counted, are given.
pub fn schedstat(before: &str, after: &str) -> Metrics {
    let (Some(b), Some(a)) = (schedstat_totals(before), schedstat_totals(after)) else {
        return Metrics::new();
    };
    let enabled = a.get("sched_count").is_some_and(|n| *n > 0);
    a.iter()
        .filter(|(k, _)| enabled || !SCHEDSTAT_GATED.contains(k))
        .map(|(k, v)| {
            let d = v.saturating_sub(b.get(k).copied().unwrap_or(0));
            (format!("schedstat.{k}"), d as f64)
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
        assert_eq!(m.get("interrupts.LOC:Local_timer_interrupts"), Some(&110.0));
        assert_eq!(m.get("interrupts.ERR"), Some(&0.0));
        // A shared line: LKP drops the `.` after the comma.
        let shared = |n: u64| {
            format!("           CPU0       CPU1\n 16:  {n}  1   IO-APIC  16-fasteoi   i801_smbus, i915\n")
        };
        let m = interrupts(&shared(2), &shared(5));
        assert_eq!(
            m.get("interrupts.16:IO-APIC.16-fasteoi.i801_smbus,i915"),
            Some(&3.0)
        );
    }

    /// This host's /proc/softirqs (the format is the same on 6.1).
    const SOFTIRQS_BEFORE: &str = "                    CPU0       CPU1       
          HI:          0          0
       TIMER:      53630      59901
      NET_TX:          5          0
      NET_RX:       7258      10553
       BLOCK:          0     228078
    IRQ_POLL:          0          0
     TASKLET:        290         15
       SCHED:      56582      55545
     HRTIMER:          0          0
         RCU:     168212     171856
";

    #[test]
    fn softirqs_sum_over_cpus_and_keep_each_cpu() {
        let after = SOFTIRQS_BEFORE
            .replace("53630      59901", "53700      60001")
            .replace("56582      55545", "56600      55645")
            .replace("168212     171856", "168213     171856");
        let m = softirqs(SOFTIRQS_BEFORE, &after);
        assert_eq!(m.len(), 30, "{m:?}");
        assert_eq!(m.get("softirqs.TIMER"), Some(&170.0));
        assert_eq!(m.get("softirqs.CPU0.TIMER"), Some(&70.0));
        assert_eq!(m.get("softirqs.CPU1.TIMER"), Some(&100.0));
        assert_eq!(m.get("softirqs.SCHED"), Some(&118.0));
        assert_eq!(m.get("softirqs.CPU1.SCHED"), Some(&100.0));
        assert_eq!(m.get("softirqs.RCU"), Some(&1.0));
        assert_eq!(m.get("softirqs.NET_RX"), Some(&0.0));
        assert_eq!(m.get("softirqs.IRQ_POLL"), Some(&0.0));
        // No before (or no file): no metrics rather than totals since boot.
        assert!(softirqs("", &after).is_empty());
        assert!(softirqs(&after, "").is_empty());
    }

    #[test]
    fn softirqs_of_many_cpus_are_totals_only() {
        let table = |n: u64| {
            let cpus = SOFTIRQS_PER_CPU_MAX_CPUS + 1;
            let head: String = (0..cpus).map(|c| format!(" CPU{c}")).collect();
            let row: String = (0..cpus).map(|_| format!(" {n}")).collect();
            format!("{head}\n SCHED:{row}\n RCU:{row}\n")
        };
        let m = softirqs(&table(1), &table(3));
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m.get("softirqs.SCHED"), Some(&34.0));
    }

    /// /proc/schedstat of a 2-CPU 6.1 guest (version 15; this host's
    /// kernel has no CONFIG_SCHEDSTATS): two runqueue lines and their
    /// sched-domain lines, which are left out.
    const SCHEDSTAT_BEFORE: &str = "version 15
timestamp 4294938552
cpu0 3 0 2170 813 1220 604 1834072201 251083712 1357
domain0 03 18 18 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu1 0 0 1925 754 1015 498 1711045112 190022004 1171
domain0 03 20 20 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    const SCHEDSTAT_AFTER: &str = "version 15
timestamp 4294941052
cpu0 5 0 12170 3813 6220 2604 11834072201 261083712 6357
domain0 03 38 38 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu1 0 0 11925 4754 5015 1498 11711045112 200022004 6171
domain0 03 40 40 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn schedstat_sums_runqueue_counters_over_cpus() {
        let m = schedstat(SCHEDSTAT_BEFORE, SCHEDSTAT_AFTER);
        let want = [
            ("schedstat.yld_count", 2.0),
            ("schedstat.sched_count", 20000.0),
            ("schedstat.sched_goidle", 7000.0),
            ("schedstat.ttwu_count", 9000.0),
            ("schedstat.ttwu_local", 3000.0),
            ("schedstat.rq_cpu_time", 20000000000.0),
            ("schedstat.run_delay", 20000000.0),
            ("schedstat.pcount", 10000.0),
        ];
        let got: Vec<(&str, f64)> = m.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let mut want = want.to_vec();
        want.sort_by(|a, b| a.0.cmp(b.0));
        assert_eq!(got, want);
        assert!(schedstat("", SCHEDSTAT_AFTER).is_empty());
        assert!(schedstat(SCHEDSTAT_BEFORE, "cat: can't open '/proc/schedstat'\n").is_empty());
    }

    /// With schedstats disabled the gated counters stay 0: only the
    /// SCHED_INFO fields are reported, not zeros that look like a result.
    #[test]
    fn schedstat_without_schedstats_enabled_gives_sched_info_only() {
        let off = |s: &str| {
            s.lines()
                .map(|l| match l.split_once(' ') {
                    Some((cpu, rest)) if cpu.starts_with("cpu") => {
                        let f: Vec<&str> = rest.split(' ').collect();
                        format!("{cpu} 0 0 0 0 0 0 {}", f[6..].join(" "))
                    }
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let m = schedstat(&off(SCHEDSTAT_BEFORE), &off(SCHEDSTAT_AFTER));
        let names: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "schedstat.pcount",
                "schedstat.rq_cpu_time",
                "schedstat.run_delay"
            ]
        );
        assert_eq!(m.get("schedstat.run_delay"), Some(&20000000.0));
    }
}
