//! The atomic job: one point of a job file's matrix (a program with scalar
//! options and parameters, the build it runs on and the hardware it needs),
//! and what names it: its LKP result path and its 0-day report axes, and
//! the one-document job file it writes back as.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use crate::needs::Needs;
use crate::{Error, Result};

/// One point of a job file's matrix: a single program with scalar options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
    /// The hardware the job needs (`arch`, `need_cpu`, `need_memory`,
    /// `need_page_size`); not part of the result path, as in LKP.
    #[serde(default, skip_serializing_if = "Needs::is_empty")]
    pub needs: Needs,
    /// The job's KPIs as its file names them (`kpi:`), the first the
    /// primary: the metrics whose verdicts may act on the job, under one
    /// false-alarm budget (`stats::family`). Empty: every benchmark KPI,
    /// the primary by `metrics::primary_kpi`. Not part of the result path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kpi: Vec<String>,
}

/// `kconfig` when the job file names none.
pub const DEFAULT_KCONFIG: &str = "defconfig";
/// `compiler` when the job file names none.
pub const DEFAULT_COMPILER: &str = "gcc";
/// `runs` when the job file names none: LKP compares only with at least 3
/// runs on one side.
pub const DEFAULT_RUNS: u32 = 3;
/// Upper bound on `runs` (the robot's flaky-issue reruns go up to 200).
pub const MAX_RUNS: u32 = 200;
/// The result-path segment used when an atomic job pins no `tbox_group`.
pub const ANY_TBOX_GROUP: &str = "any";

/// The key of a job file's KPI list ([`AtomicJob::kpi`]): a list that names
/// metrics, not a matrix dimension.
pub(crate) const KPI_KEY: &str = "kpi";

/// Keys that become [`AtomicJob`] fields rather than parameters.
pub(crate) const JOB_KEYS: &[&str] = &["testcase", "kconfig", "compiler", "tbox_group", "runs"];

impl AtomicJob {
    /// All parameters that name the run: the program's options wherever the
    /// job set them, plus setup programs; literal values.
    pub(crate) fn all_params(&self) -> impl Iterator<Item = (&String, &String)> {
        self.params.iter().chain(self.options.iter())
    }

    /// LKP's `Job#path_params`: the parameter values sorted by parameter
    /// name, each cut to 31 characters, joined with `-`, every character
    /// outside `[-a-zA-Z0-9+=:.%]` replaced by `_`; `defaults` when there
    /// are none. E.g. `performance-development-20%-PIPE-50%` for the
    /// lmbench3 seed job.
    pub fn path_params(&self) -> String {
        let mut sorted: Vec<_> = self.all_params().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        if sorted.is_empty() {
            return "defaults".to_string();
        }
        sorted
            .iter()
            .map(|(_, v)| v.chars().take(31).collect::<String>())
            .collect::<Vec<_>>()
            .join("-")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-+=:.%".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// The tbox group segment: the pinned group or [`ANY_TBOX_GROUP`]. The
    /// server sets `tbox_group` to the leasing agent's group on the leased
    /// copy, so results of different machine classes never share a path.
    pub fn tbox_group_or_any(&self) -> &str {
        self.tbox_group.as_deref().unwrap_or(ANY_TBOX_GROUP)
    }

    /// LKP's `_result_root` without the leading `/result` and without the
    /// rootfs segment (kbot has no rootfs axis):
    /// `testcase/path_params/tbox_group/kconfig/compiler/commit`. The commit
    /// is sanitised like path parameters so the path stays one directory
    /// per segment.
    pub fn result_path(&self, commit: &str) -> String {
        let commit: String = commit
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!(
            "{}/{}/{}/{}/{}/{}",
            self.testcase,
            self.path_params(),
            self.tbox_group_or_any(),
            self.kconfig,
            self.compiler,
            commit
        )
    }

    /// The 0-day report header axes, sorted by key: every path parameter
    /// (literal value, e.g. `nr_threads: 20%`), `testcase`, `kconfig`,
    /// `compiler` and `tbox_group` (when pinned). No `rootfs`.
    pub fn axes(&self) -> BTreeMap<String, String> {
        let mut axes: BTreeMap<String, String> = self
            .all_params()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        axes.insert("testcase".to_string(), self.testcase.clone());
        axes.insert("kconfig".to_string(), self.kconfig.clone());
        axes.insert("compiler".to_string(), self.compiler.clone());
        if let Some(g) = &self.tbox_group {
            axes.insert("tbox_group".to_string(), g.clone());
        }
        axes
    }

    /// The two header lines of a 0-day compare block:
    /// (`compiler/cpufreq_governor/kconfig/...`, `gcc-14/performance/...`).
    pub fn axes_header(&self) -> (String, String) {
        let axes = self.axes();
        let keys: Vec<&str> = axes.keys().map(String::as_str).collect();
        let values: Vec<&str> = axes.values().map(String::as_str).collect();
        (keys.join("/"), values.join("/"))
    }

    /// The job as a one-document LKP job file that [`parse_job_file`](super::parse_job_file) reads
    /// back into exactly this job (for `kbot-agent run JOBFILE` and the
    /// reproduction bundle).
    pub fn to_yaml(&self) -> Result<String> {
        let mut m = Mapping::new();
        let s = |v: &str| Value::String(v.to_string());
        m.insert(s("testcase"), s(&self.testcase));
        m.insert(s("kconfig"), s(&self.kconfig));
        m.insert(s("compiler"), s(&self.compiler));
        if let Some(g) = &self.tbox_group {
            m.insert(s("tbox_group"), s(g));
        }
        m.insert(s("runs"), Value::Number(self.runs.into()));
        if !self.kpi.is_empty() {
            let names = self.kpi.iter().map(|k| s(k)).collect();
            m.insert(s(KPI_KEY), Value::Sequence(names));
        }
        for (k, v) in self.needs.entries() {
            m.insert(s(k), s(&v));
        }
        for (k, v) in &self.params {
            m.insert(s(k), s(v));
        }
        let opts: Mapping = self.options.iter().map(|(k, v)| (s(k), s(v))).collect();
        let program_value = if opts.is_empty() {
            Value::Null
        } else {
            Value::Mapping(opts)
        };
        m.insert(s(&self.program), program_value);
        serde_yaml::to_string(&m).map_err(|e| Error::JobInvalid(format!("cannot write YAML: {e}")))
    }
}
