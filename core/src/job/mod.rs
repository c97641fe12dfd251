//! The LKP-style job model: job files, atomic jobs, parameter resolution.
//!
//! `model.rs` holds the atomic job and what names it (result path, report
//! axes), `plan.rs` reads a job file into atomic jobs, `validate.rs` checks
//! values that need no machine, and `resolve.rs` turns literal values into
//! numbers against one machine; the values themselves are written in the
//! grammar of [`crate::units`].
//!
//! A job file (YAML) names a testcase, one program key with its options, and
//! global parameters; list values expand into the cartesian product of
//! [`AtomicJob`]s. `N%` values stay literal here and in the result path, and
//! are resolved against the leasing agent's hardware.
//!
//! ```yaml
//! testcase: lmbench3
//! nr_threads: 20%
//! test_memory_size: 50%
//! cpufreq_governor: performance
//! lmbench3:
//!   mode: development
//!   test: PIPE
//! ```
//!
//! Top-level keys are: `suite`, `testcase`, `category` (identity; `suite`
//! and `category` are accepted and dropped), `kconfig`, `compiler`,
//! `tbox_group`, `runs` (dimensions of the run, not program parameters),
//! `kpi` (the metrics the job is about, a list, not a dimension: the first
//! is the primary KPI; [`AtomicJob::kpi`]),
//! one program key from [`crate::programs::PROGRAMS`], the setup program
//! `cpufreq_governor`, and options of the chosen program (LKP lets a program
//! option be set at the top level: `nr_threads: 20%`). [`plan_job_file`]
//! reads the rest of LKP's constructs ([`crate::lkp`]): `<< :` includes,
//! `---` documents, monitors, `default-monitors`-style groups, bookkeeping
//! keys and setup programs. A matrix that mixes what kbot runs with what it
//! does not expands fully; the atomic jobs kbot cannot run faithfully (a
//! test value, option or setup it lacks) are skipped with the reason, and a
//! file is refused only when nothing in it can run. `{{ }}` and ERB
//! templates are not supported, and kbot boots its own minimal initramfs,
//! so the rootfs axis is omitted from result paths and report axes.

pub(crate) mod model;
pub(crate) mod plan;
pub(crate) mod resolve;
pub mod set;
pub(crate) mod validate;

pub use model::{
    AtomicJob, ANY_TBOX_GROUP, DEFAULT_COMPILER, DEFAULT_KCONFIG, DEFAULT_RUNS, MAX_RUNS,
};
pub use plan::{parse_job_file, plan_job_file, JobPlan, SkipKind, Skipped, MAX_ATOMIC_JOBS};
