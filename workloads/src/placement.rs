//! CPU placement: lmbench's LMBENCH_SCHED modes, will-it-scale's one-task-per-
//! core pinning, and the explicit writer/reader CPUs of the seed thread.

use std::fs;

use serde_json::{json, Value};

use crate::error::{BenchError, Result};
use crate::sys;

/// The CPUs this process may use, grouped into cores the way hwloc does.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Allowed CPUs, ascending.
    pub cpus: Vec<usize>,
    /// Allowed CPUs grouped by physical core (SMT siblings together), in the
    /// order of their lowest CPU number.
    pub cores: Vec<Vec<usize>>,
}

impl Topology {
    /// Reads the affinity mask and, when /sys is mounted, the SMT siblings.
    /// Without /sys (a bare initramfs) every CPU counts as its own core.
    pub fn detect() -> Self {
        let cpus = sys::allowed_cpus();
        let mut cores: Vec<Vec<usize>> = Vec::new();
        for &cpu in &cpus {
            if cores.iter().any(|c| c.contains(&cpu)) {
                continue;
            }
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
            let siblings = fs::read_to_string(path)
                .ok()
                .and_then(|s| parse_cpu_list(s.trim()).ok())
                .unwrap_or_else(|| vec![cpu]);
            let mut core: Vec<usize> = siblings.into_iter().filter(|c| cpus.contains(c)).collect();
            if !core.contains(&cpu) {
                core.push(cpu);
            }
            core.sort_unstable();
            cores.push(core);
        }
        Topology { cpus, cores }
    }

    /// lmbench's `sched_pin(cpu)`: the cpu-th allowed CPU (modulo their count).
    pub fn nth_allowed(&self, index: usize) -> usize {
        self.cpus[index % self.cpus.len()]
    }

    /// will-it-scale's binding for task `i`: the cpuset of core `i mod #cores`,
    /// or of PU `i mod #PUs` with `-m`.
    pub fn wis_cpuset(&self, task: usize, smt: bool) -> Vec<usize> {
        if smt {
            vec![self.cpus[task % self.cpus.len()]]
        } else {
            self.cores[task % self.cores.len()].clone()
        }
    }

    /// Checks that a CPU the user asked for is one we may run on.
    pub fn check_cpu(&self, cpu: usize) -> Result<usize> {
        if self.cpus.contains(&cpu) {
            Ok(cpu)
        } else {
            Err(BenchError::usage(format!(
                "CPU {cpu} is not available (allowed: {})",
                format_cpu_list(&self.cpus)
            )))
        }
    }
}

/// Parses "0-3,5,7-8".
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || BenchError::usage(format!("bad CPU list element '{part}'"));
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if b < a {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| bad())?);
        }
    }
    Ok(out)
}

pub fn format_cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// lmbench's LMBENCH_SCHED policy (lib_sched.c `handle_scheduler`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LmbenchSched {
    Default,
    Single,
    Balanced,
    BalancedSpread,
    Unique,
    UniqueSpread,
    Custom(Vec<usize>),
    CustomUnique(Vec<usize>),
    /// Named in kbot's job model but absent from lib_sched.c, which leaves any
    /// mode it does not know unpinned; so does kbot-bench.
    UniqueLocal,
}

impl LmbenchSched {
    /// Parses the LMBENCH_SCHED syntax, case-insensitively:
    /// `DEFAULT`, `SINGLE`, `BALANCED[_SPREAD]`, `UNIQUE[_SPREAD]`,
    /// `CUSTOM <ids>`, `CUSTOM_UNIQUE <ids>` (ids separated by anything
    /// that is not a digit, as lmbench's `custom()` reads them).
    pub fn parse(s: &str) -> Result<Self> {
        let t = s.trim();
        let upper = t.to_ascii_uppercase();
        let ids = |rest: &str| -> Result<Vec<usize>> {
            let v: Vec<usize> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|p| !p.is_empty())
                .map(|p| {
                    p.parse()
                        .map_err(|_| BenchError::usage(format!("bad CPU id '{p}'")))
                })
                .collect::<Result<_>>()?;
            if v.is_empty() {
                return Err(BenchError::usage(format!("--sched '{s}' lists no CPU ids")));
            }
            Ok(v)
        };
        Ok(match upper.as_str() {
            "" | "DEFAULT" => LmbenchSched::Default,
            "SINGLE" => LmbenchSched::Single,
            "BALANCED" => LmbenchSched::Balanced,
            "BALANCED_SPREAD" => LmbenchSched::BalancedSpread,
            "UNIQUE" => LmbenchSched::Unique,
            "UNIQUE_SPREAD" => LmbenchSched::UniqueSpread,
            "UNIQUE_LOCAL" => LmbenchSched::UniqueLocal,
            _ if upper.starts_with("CUSTOM_UNIQUE") => {
                LmbenchSched::CustomUnique(ids(&t["CUSTOM_UNIQUE".len()..])?)
            }
            _ if upper.starts_with("CUSTOM") => LmbenchSched::Custom(ids(&t["CUSTOM".len()..])?),
            _ => {
                return Err(BenchError::usage(format!(
                    "unknown --sched mode '{s}' (DEFAULT, SINGLE, BALANCED, BALANCED_SPREAD, \
                     UNIQUE, UNIQUE_SPREAD, 'CUSTOM ids', 'CUSTOM_UNIQUE ids')"
                )))
            }
        })
    }

    pub fn name(&self) -> String {
        match self {
            LmbenchSched::Default => "DEFAULT".into(),
            LmbenchSched::Single => "SINGLE".into(),
            LmbenchSched::Balanced => "BALANCED".into(),
            LmbenchSched::BalancedSpread => "BALANCED_SPREAD".into(),
            LmbenchSched::Unique => "UNIQUE".into(),
            LmbenchSched::UniqueSpread => "UNIQUE_SPREAD".into(),
            LmbenchSched::Custom(v) => format!("CUSTOM {}", format_cpu_list(v)),
            LmbenchSched::CustomUnique(v) => format!("CUSTOM_UNIQUE {}", format_cpu_list(v)),
            LmbenchSched::UniqueLocal => "UNIQUE_LOCAL (unknown to lib_sched.c: unpinned)".into(),
        }
    }

    /// `handle_scheduler(childno, benchproc, nbenchprocs)`: the logical CPU
    /// index to pin to, or None for "let the scheduler decide".
    pub fn logical_cpu(
        &self,
        childno: usize,
        benchproc: usize,
        nbenchprocs: usize,
        ncpus: usize,
    ) -> Option<usize> {
        let unique = childno * (nbenchprocs + 1) + benchproc;
        let cpu = match self {
            LmbenchSched::Default | LmbenchSched::UniqueLocal => return None,
            LmbenchSched::Single => 0,
            LmbenchSched::Balanced => childno,
            LmbenchSched::BalancedSpread => reverse_bits(childno, ncpus),
            LmbenchSched::Unique => unique,
            LmbenchSched::UniqueSpread => reverse_bits(unique, ncpus),
            LmbenchSched::Custom(v) => v[childno % v.len()],
            LmbenchSched::CustomUnique(v) => v[unique % v.len()],
        };
        Some(cpu % ncpus.max(1))
    }
}

/// lib_sched.c `reverse_bits`: spreads sequential ids across the machine.
fn reverse_bits(cpu: usize, ncpus: usize) -> usize {
    let max = ncpus.saturating_sub(1);
    let mut nbits = 1;
    let mut i = max >> 1;
    while i > 0 {
        i >>= 1;
        nbits += 1;
    }
    let mut rev = 0;
    for b in 0..nbits {
        if cpu & (1 << b) != 0 {
            rev |= 1 << (nbits - b - 1);
        }
    }
    rev
}

/// Where each task of a run was placed, for the `--json` report.
#[derive(Debug, Clone, Default)]
pub struct PlacementReport {
    pub mode: String,
    pub tasks: Vec<(String, Option<Vec<usize>>)>,
}

impl PlacementReport {
    pub fn new(mode: impl Into<String>) -> Self {
        PlacementReport {
            mode: mode.into(),
            tasks: Vec::new(),
        }
    }

    pub fn add(&mut self, role: impl Into<String>, cpus: Option<Vec<usize>>) {
        self.tasks.push((role.into(), cpus));
    }

    pub fn to_json(&self) -> Value {
        let mut all: Vec<usize> = self
            .tasks
            .iter()
            .filter_map(|(_, c)| c.clone())
            .flatten()
            .collect();
        all.sort_unstable();
        all.dedup();
        let tasks: Vec<Value> = self
            .tasks
            .iter()
            .map(|(role, cpus)| json!({"role": role, "cpus": cpus}))
            .collect();
        json!({"mode": self.mode, "cpus": all, "tasks": tasks})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-2,5").ok(), Some(vec![0, 1, 2, 5]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn lmbench_modes_follow_lib_sched() {
        let unique = LmbenchSched::parse("unique").ok();
        assert_eq!(unique, Some(LmbenchSched::Unique));
        let u = LmbenchSched::Unique;
        // reader of pair 1 on CPU 2, its writer on CPU 3 (8 CPUs)
        assert_eq!(u.logical_cpu(1, 0, 1, 8), Some(2));
        assert_eq!(u.logical_cpu(1, 1, 1, 8), Some(3));
        assert_eq!(LmbenchSched::Balanced.logical_cpu(3, 1, 1, 8), Some(3));
        assert_eq!(LmbenchSched::Default.logical_cpu(3, 1, 1, 8), None);
        assert_eq!(
            LmbenchSched::parse("UNIQUE_LOCAL").ok(),
            Some(LmbenchSched::UniqueLocal)
        );
        assert_eq!(LmbenchSched::UniqueLocal.logical_cpu(1, 1, 1, 8), None);
        let custom = LmbenchSched::parse("CUSTOM_UNIQUE 1 0").ok();
        assert_eq!(custom, Some(LmbenchSched::CustomUnique(vec![1, 0])));
        assert_eq!(
            LmbenchSched::CustomUnique(vec![1, 0]).logical_cpu(0, 1, 1, 2),
            Some(0)
        );
        assert_eq!(reverse_bits(1, 8), 4);
        assert!(LmbenchSched::parse("bogus").is_err());
        assert!(LmbenchSched::parse("CUSTOM").is_err());
    }
}
