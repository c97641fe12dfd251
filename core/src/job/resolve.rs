//! Resolution of an atomic job against one machine: its literal values
//! (`20%`, `5m`, `2GiB`) turned into the numbers a run uses, and the
//! parameters LKP's run scripts compute from the machine.

use std::collections::BTreeMap;

use crate::job::model::AtomicJob;
use crate::job::validate::{invalid, kind_hint, unknown_option};
use crate::machine::Hardware;
use crate::programs::table::{self, OptionSpec, ProgramSpec, ValueKind};
use crate::units::{self, Count};
use crate::{Error, Result};

impl AtomicJob {
    fn spec(&self) -> Result<&'static ProgramSpec> {
        table::lookup(&self.program).ok_or_else(|| table::unknown_program(&self.program))
    }

    /// Resolves the job's parameters against one machine, as LKP's
    /// `params/*` maps do at job2sh time: program defaults filled in,
    /// counts (`nr_threads`, `nr_task`: `N%` of the logical CPUs, `Nc` cores
    /// per socket) to integers, sizes to bytes (`test_memory_size: 50%` of
    /// memory), durations (`300s`, `5m`) to seconds; `nr_cpu` added.
    ///
    /// One deviation: LKP truncates `20%` of 2 CPUs to 0; a count of 0
    /// cannot run, so kbot resolves counts to at least 1.
    pub fn resolve(&self, hw: &Hardware) -> Result<BTreeMap<String, String>> {
        let spec = self.spec()?;
        if hw.threads == 0 {
            return Err(invalid("nr_cpu", "0", "the machine reports no CPUs"));
        }
        let mut out = BTreeMap::new();
        for o in spec.options {
            if let Some(d) = o.default {
                out.insert(o.name.to_string(), resolve_value(o, d, hw)?);
            }
        }
        for (k, v) in self.all_params() {
            let o = table::option_spec(spec, k).ok_or_else(|| unknown_option(spec, k))?;
            out.insert(k.clone(), resolve_value(o, v, hw)?);
        }
        out.insert("nr_cpu".to_string(), hw.threads.to_string());
        derive_params(self, hw, &mut out)?;
        Ok(out)
    }
}

fn resolve_value(o: &OptionSpec, v: &str, hw: &Hardware) -> Result<String> {
    let bad = || invalid(o.name, v, kind_hint(o.kind));
    Ok(match o.kind {
        ValueKind::Count => Count::parse(v)
            .ok_or_else(bad)?
            .resolve(hw.threads, hw.cores / hw.sockets.max(1))
            .to_string(),
        ValueKind::Size => units::size(v).ok_or_else(bad)?.to_string(),
        ValueKind::MemorySize => match units::percent(v) {
            Some(pct) => ((pct * hw.memory_bytes as f64 / 100.0) as u64).to_string(),
            None => units::size(v).ok_or_else(bad)?.to_string(),
        },
        ValueKind::Duration => units::seconds(v).ok_or_else(bad)?.to_string(),
        ValueKind::Integer => units::leading_integer(v).ok_or_else(bad)?.to_string(),
        ValueKind::Choice(_) | ValueKind::Flag => v.to_string(),
    })
}

/// Parameters LKP's run scripts compute from the machine rather than the
/// job: will-it-scale without `nr_task` sweeps task counts as
/// `programs/will-it-scale/run` does through `lib/sysinfo.sh`
/// (`setup_threads_to_iterate`, then `setup_params`).
fn derive_params(
    job: &AtomicJob,
    hw: &Hardware,
    resolved: &mut BTreeMap<String, String>,
) -> Result<()> {
    if job.program != "will-it-scale" || resolved.contains_key("nr_task") {
        return Ok(());
    }
    let nr_node = u64::from(hw.numa_nodes.max(1));
    let tasks = threads_to_iterate(hw)?;
    // setup_params: `runtime` shared out over 3 + nr_node iterations,
    // halved, less the 5 warm-up seconds, at least 5 s.
    let runtime: i64 = resolved
        .get("runtime")
        .and_then(|r| r.parse().ok())
        .unwrap_or(300);
    let iterations = 3 + nr_node as i64;
    let duration = (runtime / iterations / 2 - 5).max(5);
    let list: Vec<String> = tasks.iter().map(u64::to_string).collect();
    resolved.insert("threads_to_iterate".to_string(), list.join(" "));
    resolved.insert("duration".to_string(), duration.to_string());
    Ok(())
}

/// `setup_threads_to_iterate` of lkp-tests' `lib/sysinfo.sh`: 1, the cores
/// of one last-level cache, each node's worth of cores (1, 2, ... nodes),
/// and from 4 CPUs on also `nr_cpu * 3 / 4` and `nr_cpu`; then `sort -un`
/// (ascending, each count once). Upstream takes the cores per LLC from
/// lscpu's L2 and L3 instance counts; kbot's hardware record has no cache
/// topology, so one LLC per socket stands for them.
fn threads_to_iterate(hw: &Hardware) -> Result<Vec<u64>> {
    let nr_node = u64::from(hw.numa_nodes.max(1));
    let nr_cpu = u64::from(hw.threads);
    let threads_per_core = (nr_cpu / u64::from(hw.cores.max(1))).max(1);
    let cores_per_node = nr_cpu / nr_node / threads_per_core;
    if cores_per_node == 0 {
        return Err(Error::InvalidValue {
            key: "nr_task".to_string(),
            value: String::new(),
            reason: format!(
                "the sweep needs at least one core per node ({nr_cpu} CPUs, {nr_node} nodes)"
            ),
        });
    }
    let cores_per_llc = u64::from(hw.cores / hw.sockets.max(1)).max(1);
    let mut tasks = vec![1, cores_per_llc];
    tasks.extend((1..=nr_node).map(|i| i * cores_per_node));
    if nr_cpu >= 4 {
        tasks.extend([nr_cpu * 3 / 4, nr_cpu]);
    }
    tasks.sort_unstable();
    tasks.dedup();
    Ok(tasks)
}
