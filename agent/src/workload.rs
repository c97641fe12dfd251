//! The workload of a job: the kbot-bench command lines, or stress-ng's
//! (from `kbot_core::programs`), and the metrics of their outputs.

use std::collections::BTreeMap;

use kbot_core::job::AtomicJob;
use kbot_core::parsers::Metrics;
use kbot_core::programs::{self, Invocation};

use crate::error::Result;

/// The invocations of `job`, in run order
/// ([`programs::guest_invocations`]).
pub fn plan(job: &AtomicJob, resolved: &BTreeMap<String, String>) -> Result<Vec<Invocation>> {
    Ok(programs::guest_invocations(job, resolved)?)
}

pub use kbot_core::guest::Execution;

/// The metrics of the executions ([`kbot_core::guest::metrics`]).
pub fn metrics(plan: &[Invocation], runs: &[Execution]) -> Result<Metrics> {
    Ok(kbot_core::guest::metrics(plan, runs)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbot_core::job::parse_job_file;

    fn planned(text: &str) -> Vec<Invocation> {
        let jobs = parse_job_file(text).expect("plans");
        let two_cpus = kbot_core::machine::Hardware {
            arch: "x86_64".into(),
            cpu_model: "QEMU Virtual CPU".into(),
            sockets: 1,
            cores: 2,
            threads: 2,
            numa_nodes: 1,
            memory_bytes: 512 << 20,
            page_size: 4096,
            microcode: None,
            kernel: "6.1.0".into(),
        };
        let resolved = jobs[0].resolve(&two_cpus).expect("resolves");
        plan(&jobs[0], &resolved).expect("a workload")
    }

    /// stress-ng, which kbot-bench does not reimplement, runs as upstream's
    /// stress-ng with lkp-tests' command line; the pipe programs kbot-bench
    /// has stay kbot-bench's.
    #[test]
    fn stress_ng_runs_upstreams_binary() {
        let p = planned("stress-ng: {test: switch, method: pipe, testtime: 5s}\n");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].program, "stress-ng");
        assert_eq!(
            p[0].args.join(" "),
            "--timeout 5 --times --verify --metrics --no-rand-seed --switch-method pipe --switch 2"
        );
        assert!(p[0].output_includes_stderr());
        let p = planned("perf-bench-sched-pipe: {loops: 100}\n");
        assert_eq!(p[0].program, "kbot-bench");
        assert!(!p[0].output_includes_stderr());
    }
}
