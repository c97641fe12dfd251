//! The host's side of a QEMU run: what else used the host's CPUs while the
//! guest ran, which marks a run as measured under interference.

use super::proc::cpu_line;

/// The host seen from the agent at one moment while a guest runs: the
/// host-wide CPU times (`/proc/stat`), the guest's QEMU process's own CPU
/// time (`/proc/<pid>/stat`, all its threads) and the memory pressure stall
/// total (`/proc/pressure/memory`, where the kernel has PSI).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSample {
    pub stat: String,
    pub process_stat: String,
    pub memory_pressure: String,
    /// Microseconds since an arbitrary start (a monotonic clock).
    pub at_us: u64,
}

impl HostSample {
    /// Reads this host's files for the process `pid`.
    pub fn read(pid: u32, at_us: u64) -> HostSample {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        HostSample {
            stat: read("/proc/stat"),
            process_stat: read(&format!("/proc/{pid}/stat")),
            memory_pressure: read("/proc/pressure/memory"),
            at_us,
        }
    }
}

/// What else the host did while a guest ran, as fractions of the host's
/// whole CPU capacity (all CPUs) over the interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostLoad {
    /// CPUs the host has (the `cpuN` lines of /proc/stat).
    pub host_cpus: usize,
    /// Busy CPU time of everything but the guest's QEMU process.
    pub other: f64,
    /// CPU time the hypervisor below this host took (steal).
    pub steal: f64,
    /// The guest's QEMU process.
    pub guest: f64,
    /// Share of the interval in which some task waited for memory (PSI
    /// `some`), when the host has PSI.
    pub memory_stall: Option<f64>,
    pub seconds: f64,
}

/// When a run counts as measured under interference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterferenceLimits {
    /// Other processes' busy time, as a fraction of all host CPUs.
    pub max_other: f64,
    pub max_steal: f64,
    pub max_memory_stall: f64,
}

impl Default for InterferenceLimits {
    fn default() -> InterferenceLimits {
        InterferenceLimits {
            max_other: 0.10,
            max_steal: 0.05,
            max_memory_stall: 0.05,
        }
    }
}

/// user nice system idle iowait irq softirq steal of the aggregate line.
fn cpu_ticks(stat: &str) -> Option<[u64; 8]> {
    let v = cpu_line(stat)?;
    let mut out = [0u64; 8];
    for (o, x) in out.iter_mut().zip(v.iter()) {
        *o = *x;
    }
    (v.len() >= 8).then_some(out)
}

/// utime + stime of a `/proc/<pid>/stat` line (fields 14 and 15; the
/// command name in parentheses may itself hold spaces and parentheses).
fn process_ticks(process_stat: &str) -> Option<u64> {
    let rest = &process_stat[process_stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The `some ... total=N` microseconds of a PSI file.
fn psi_some_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("total=")?.parse().ok())
}

/// The host's load between two samples, or `None` when the files were
/// unreadable (no /proc, the process already gone).
pub fn host_load(before: &HostSample, after: &HostSample) -> Option<HostLoad> {
    let (b, a) = (cpu_ticks(&before.stat)?, cpu_ticks(&after.stat)?);
    let d: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let total: u64 = d.iter().sum();
    if total == 0 {
        return None;
    }
    // user + nice + system + irq + softirq: busy time on this host's CPUs.
    let busy = d[0] + d[1] + d[2] + d[5] + d[6];
    let guest =
        process_ticks(&after.process_stat)?.saturating_sub(process_ticks(&before.process_stat)?);
    let host_cpus = after
        .stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    let seconds = after.at_us.saturating_sub(before.at_us) as f64 / 1e6;
    let memory_stall = match (
        psi_some_total(&before.memory_pressure),
        psi_some_total(&after.memory_pressure),
    ) {
        (Some(b), Some(a)) if seconds > 0.0 => Some(a.saturating_sub(b) as f64 / 1e6 / seconds),
        _ => None,
    };
    let frac = |t: u64| t as f64 / total as f64;
    Some(HostLoad {
        host_cpus,
        other: frac(busy.saturating_sub(guest)),
        steal: frac(d[7]),
        guest: frac(guest.min(busy)),
        memory_stall,
        seconds,
    })
}

impl HostLoad {
    /// Why this run counts as measured under interference, if it does.
    pub fn interference(&self, limits: &InterferenceLimits) -> Option<String> {
        let mut why = Vec::new();
        if self.other > limits.max_other {
            why.push(format!(
                "other processes used {:.0}% of the host's {} CPUs (limit {:.0}%)",
                100.0 * self.other,
                self.host_cpus,
                100.0 * limits.max_other
            ));
        }
        if self.steal > limits.max_steal {
            why.push(format!(
                "steal {:.0}% (limit {:.0}%)",
                100.0 * self.steal,
                100.0 * limits.max_steal
            ));
        }
        if let Some(m) = self.memory_stall.filter(|m| *m > limits.max_memory_stall) {
            why.push(format!(
                "tasks stalled on memory {:.0}% of the time (limit {:.0}%)",
                100.0 * m,
                100.0 * limits.max_memory_stall
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// One line for the result's tuning map.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "over {:.0} s: guest's QEMU {:.0}%, other processes {:.0}%, steal {:.0}% of {} host CPUs",
            self.seconds,
            100.0 * self.guest,
            100.0 * self.other,
            100.0 * self.steal,
            self.host_cpus
        );
        if let Some(m) = self.memory_stall {
            s.push_str(&format!(", memory stall {:.0}%", 100.0 * m));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(cpu: &str, proc_ticks: (u64, u64), psi_total: u64, at_s: u64) -> HostSample {
        HostSample {
            stat: format!("cpu  {cpu} 0 0\ncpu0 1 1 1 1 1 1 1 1\ncpu1 1 1 1 1 1 1 1 1\nctxt 5\n"),
            process_stat: format!(
                "4242 (qemu-system-x86 (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 {} {} 0 0 20 0 5 0 100\n",
                proc_ticks.0, proc_ticks.1
            ),
            memory_pressure: format!(
                "some avg10=0.00 avg60=0.00 avg300=0.00 total={psi_total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
            at_us: at_s * 1_000_000,
        }
    }

    /// 10 s on 2 CPUs = 2,000 ticks. The guest's QEMU used 1,000 of them,
    /// the host was busy 1,050: 2.5% other, a quiet host.
    #[test]
    fn a_quiet_host_is_no_interference() {
        let before = sample("1000 0 1000 5000 0 0 0 0", (100, 50), 0, 0);
        let after = sample("1800 0 1250 5950 0 0 0 0", (900, 250), 10_000, 10);
        let load = host_load(&before, &after).expect("load");
        assert_eq!(load.host_cpus, 2);
        assert!((load.guest - 0.5).abs() < 1e-9, "{load:?}");
        assert!((load.other - 0.025).abs() < 1e-9, "{load:?}");
        assert_eq!(load.memory_stall, Some(0.001));
        assert_eq!(load.interference(&InterferenceLimits::default()), None);
    }

    /// A compiler on the other CPU: the host is fully busy but the guest's
    /// QEMU only accounts for half of it.
    #[test]
    fn another_process_busy_during_the_run_is_interference() {
        let before = sample("1000 0 1000 5000 0 0 0 0", (100, 50), 0, 0);
        let after = sample("2500 0 1500 5000 0 0 0 0", (900, 250), 0, 10);
        let load = host_load(&before, &after).expect("load");
        assert!((load.other - 0.5).abs() < 1e-9, "{load:?}");
        let why = load
            .interference(&InterferenceLimits::default())
            .unwrap_or_default();
        assert!(
            why.contains("other processes used 50% of the host's 2 CPUs"),
            "{why}"
        );
    }

    #[test]
    fn steal_and_memory_stalls_are_interference() {
        let before = sample("1000 0 1000 5000 0 0 0 0", (100, 50), 0, 0);
        let after = sample("1800 0 1200 5800 0 0 0 200", (900, 250), 3_000_000, 10);
        let load = host_load(&before, &after).expect("load");
        assert!((load.steal - 0.1).abs() < 1e-9, "{load:?}");
        let why = load
            .interference(&InterferenceLimits::default())
            .unwrap_or_default();
        assert!(why.contains("steal 10%"), "{why}");
        assert!(why.contains("stalled on memory 30%"), "{why}");
        // Unreadable files give no judgement rather than a wrong one.
        assert_eq!(host_load(&HostSample::default(), &after), None);
    }
}
