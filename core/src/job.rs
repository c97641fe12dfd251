//! The LKP-style job model: job files, atomic jobs, parameter resolution.
//!
//! A job file (YAML) names a testcase, one program key with its options, and
//! global parameters; list values expand into the cartesian product of
//! [`AtomicJob`]s. `N%` values stay literal here and in the result path, and
//! are resolved against the leasing agent's hardware.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One point of a job file's matrix: a single program with scalar options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AtomicJob {
    /// `testcase:` (e.g. `lmbench3`, `will-it-scale`); names the metric prefix.
    pub testcase: String,
    /// The program key (e.g. `lmbench3`, `will-it-scale`, `bw_pipe`).
    pub program: String,
    /// The program's options, literal (`mode: development`, `test: PIPE`).
    pub options: BTreeMap<String, String>,
    /// Global parameters, literal (`nr_threads: 20%`, `runtime: 300s`, `cpufreq_governor: performance`).
    pub params: BTreeMap<String, String>,
    pub kconfig: String,
    pub compiler: String,
    pub tbox_group: Option<String>,
    /// Runs per commit requested by the job file.
    pub runs: u32,
}
