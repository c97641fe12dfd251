//! The LKP-style job model: job files, atomic jobs, parameter resolution.
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
//! one program key from [`programs::PROGRAMS`], the setup program
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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use crate::machine::Hardware;
use crate::lkp;
use crate::needs::{Needs, NEED_KEYS};
use crate::programs::{self, OptionSpec, ProgramSpec, ValueKind};
use crate::units::{self, Count};
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
/// Upper bound on the atomic jobs one file may expand into.
pub const MAX_ATOMIC_JOBS: usize = 1024;
/// The result-path segment used when an atomic job pins no `tbox_group`.
pub const ANY_TBOX_GROUP: &str = "any";

/// Identity keys of LKP job files that kbot accepts and ignores.
const IGNORED_KEYS: &[&str] = &["suite", "category"];
/// Keys that become [`AtomicJob`] fields rather than parameters.
const JOB_KEYS: &[&str] = &["testcase", "kconfig", "compiler", "tbox_group", "runs"];

/// What kbot makes of an LKP job file: the atomic jobs it runs, in LKP's
/// expansion order, and everything it leaves out, each with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobPlan {
    /// The atomic jobs kbot queues.
    pub jobs: Vec<AtomicJob>,
    /// Atomic jobs, monitors and keys of the file that kbot does not run or
    /// use, in file order.
    pub skipped: Vec<Skipped>,
    /// Monitors the file names that the agent runs (it runs them for every
    /// job; naming them changes nothing).
    pub monitors: Vec<String>,
}

/// One thing of a job file that kbot leaves out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Skipped {
    pub kind: SkipKind,
    /// An atomic job's `testcase/path_params` (its LKP result path head), a
    /// monitor's or a key's name.
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// An atomic job (or a whole document whose program kbot lacks).
    Job,
    /// A monitor the agent does not have.
    Monitor,
    /// A bookkeeping key (`rootfs`, `testbox`, ...), accepted and unused.
    Key,
}

impl SkipKind {
    /// The serialised name: `job`, `monitor` or `key`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipKind::Job => "job",
            SkipKind::Monitor => "monitor",
            SkipKind::Key => "key",
        }
    }
}

/// Parses a job file without includes into the atomic jobs kbot runs; see
/// [`plan_job_file`].
pub fn parse_job_file(text: &str) -> Result<Vec<AtomicJob>> {
    plan_job_file(text, &lkp::NoIncludes).map(|p| p.jobs)
}

/// Plans an LKP job file: `<< :` includes expanded from `includes`, `---`
/// documents split (document 0 alone when it names a program, then document
/// 0 overlaid with each later one, as LKP's `each_jobs`), every document's
/// matrix expanded, and each atomic job either kept or skipped with the
/// reason (a test value, mode or option kbot does not run, an LKP setup
/// program it does not have). Monitors kbot's agent has are listed, the
/// others and LKP's bookkeeping keys are skipped by name.
///
/// Errors: a file that is not YAML, is structurally wrong (two programs in
/// one document, non-scalar values, a bad `runs` or path segment, too many
/// atomic jobs), names a missing include, or in which nothing can run. In
/// the last case the error is the one reason when every skipped job shares
/// it ([`Error::UnknownProgram`], [`Error::UnknownOption`],
/// [`Error::InvalidValue`], ...), else [`Error::NothingRunnable`] naming
/// each skipped job.
pub fn plan_job_file(text: &str, includes: &dyn lkp::IncludeSource) -> Result<JobPlan> {
    let expanded = lkp::expand_includes(text, includes)?;
    let docs = load_documents(&expanded)?;
    let Some((first, rest)) = docs.split_first() else {
        return Err(Error::JobInvalid("the job file is empty".to_string()));
    };
    let mut b = Builder::default();
    // LKP runs document 0 on its own only when it names a program, so a
    // shared header document does not become a job of its own.
    if rest.is_empty() || has_program(first) {
        b.document(first)?;
    }
    for doc in rest {
        let mut merged = first.clone();
        for (k, v) in doc {
            merged.insert(k.clone(), v.clone());
        }
        b.document(&merged)?;
    }
    b.finish()
}

fn load_documents(text: &str) -> Result<Vec<Mapping>> {
    let mut docs = Vec::new();
    for (i, doc) in lkp::documents(text).into_iter().enumerate() {
        let value: Value =
            serde_yaml::from_str(&doc.text).map_err(|e| yaml_error(e, doc.first_line - 1))?;
        match value {
            Value::Null => {}
            Value::Mapping(m) => docs.push(m),
            other => {
                return Err(Error::JobInvalid(format!(
                    "document {i} is a {}, not a mapping of keys to values",
                    type_name(&other)
                )))
            }
        }
    }
    Ok(docs)
}

fn yaml_error(e: serde_yaml::Error, line_offset: usize) -> Error {
    let loc = e.location();
    let line = loc.as_ref().map(|l| l.line() + line_offset);
    let message = match line {
        Some(line) if line_offset > 0 => format!("{e} (line {line} of the file)"),
        _ => e.to_string(),
    };
    Error::JobYaml {
        message,
        line,
        column: loc.as_ref().map(|l| l.column()),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Sequence(_) => "list",
        Value::Mapping(_) => "mapping",
        Value::Tagged(_) => "tagged value",
    }
}

fn has_program(doc: &Mapping) -> bool {
    doc.keys()
        .any(|k| k.as_str().is_some_and(|k| programs::lookup(k).is_some()))
}

fn too_many_jobs() -> Error {
    Error::JobInvalid(format!(
        "the job file expands into more than {MAX_ATOMIC_JOBS} atomic jobs"
    ))
}

/// Where a dimension of the matrix lives in the atomic job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Job,
    /// A hardware requirement ([`Needs`]).
    Need,
    Param,
    Option,
    /// A key the program does not take: every job with it is skipped.
    Unknown,
}

/// One key of the job with its candidate values (one unless it was a list).
#[derive(Debug)]
struct Dim {
    slot: Slot,
    key: String,
    values: Vec<String>,
}

/// The plan under construction, with the error of each skipped job kept
/// for when nothing runs.
#[derive(Default)]
struct Builder {
    plan: JobPlan,
    errors: Vec<Error>,
    expanded: usize,
}

impl Builder {
    fn skip(&mut self, kind: SkipKind, name: &str, reason: String) {
        let dup = self
            .plan
            .skipped
            .iter()
            .any(|s| s.kind == kind && s.name == name && s.reason == reason);
        if !dup {
            self.plan.skipped.push(Skipped {
                kind,
                name: name.to_string(),
                reason,
            });
        }
    }

    fn skip_job(&mut self, name: &str, err: Error) {
        self.skip(SkipKind::Job, name, err.to_string());
        self.errors.push(err);
    }

    fn monitor(&mut self, name: &str) {
        if lkp::AGENT_MONITORS.contains(&name) {
            if !self.plan.monitors.iter().any(|m| m == name) {
                self.plan.monitors.push(name.to_string());
            }
        } else {
            self.skip(
                SkipKind::Monitor,
                name,
                "kbot's agent does not have this monitor; the job runs without it".to_string(),
            );
        }
    }

    /// Sorts out one document's keys, then expands and checks its matrix.
    fn document(&mut self, doc: &Mapping) -> Result<()> {
        let mut program: Option<(&'static ProgramSpec, &Value)> = None;
        // A reason every atomic job of the document is skipped for.
        let mut doc_skip: Option<Error> = None;
        let mut unknown_programs: Vec<&str> = Vec::new();
        let mut rest: Vec<(&str, &Value)> = Vec::new();
        for (k, v) in doc {
            let key = key_str(k)?;
            if let Some(spec) = programs::lookup(key) {
                if let Some((prev, _)) = program {
                    return Err(Error::JobInvalid(format!(
                        "a job runs one program, found {} and {}",
                        prev.name, spec.name
                    )));
                }
                program = Some((spec, v));
            } else if IGNORED_KEYS.contains(&key) {
            } else if lkp::AGENT_MONITORS.contains(&key) || lkp::OTHER_MONITORS.contains(&key) {
                self.monitor(key);
            } else if lkp::MONITOR_GROUPS.contains(&key) {
                if let Value::Mapping(m) = v {
                    for name in m.keys().filter_map(Value::as_str) {
                        self.monitor(name);
                    }
                }
            } else if let Some((_, why)) = lkp::BOOKKEEPING.iter().find(|(k, _)| *k == key) {
                self.skip(SkipKind::Key, key, (*why).to_string());
            } else if NEED_KEYS.contains(&key) {
                rest.push((key, v));
            } else if key.starts_with("need_") {
                self.skip(
                    SkipKind::Key,
                    key,
                    format!(
                        "kbot matches agents by {}, not by this constraint",
                        NEED_KEYS.join(", ")
                    ),
                );
            } else if lkp::UNSUPPORTED_SETUP.contains(&key) {
                doc_skip.get_or_insert(Error::JobInvalid(format!(
                    "LKP setup {key:?} changes the machine the workload runs on, and kbot does not apply it"
                )));
            } else if v.is_mapping()
                || v.is_null() && !JOB_KEYS.contains(&key) && !is_option_anywhere(key)
            {
                unknown_programs.push(key);
            } else {
                rest.push((key, v));
            }
        }
        let Some((program, program_value)) = program else {
            let name = unknown_programs
                .first()
                .copied()
                .or_else(|| doc.get("testcase").and_then(Value::as_str))
                .unwrap_or("job");
            let err = match unknown_programs.first() {
                Some(p) => programs::unknown_program(p),
                None => Error::JobInvalid(format!(
                    "no program key; known programs: {}",
                    programs::program_names().join(", ")
                )),
            };
            self.expanded += 1;
            self.skip_job(name, err);
            return Ok(());
        };
        if let Some(p) = unknown_programs.first() {
            doc_skip.get_or_insert(programs::unknown_program(p));
        }
        let mut dims = Vec::new();
        for (key, v) in rest {
            let slot = if JOB_KEYS.contains(&key) {
                Slot::Job
            } else if NEED_KEYS.contains(&key) {
                Slot::Need
            } else if programs::option_spec(program, key).is_some() {
                Slot::Param
            } else {
                // Kept as a dimension so the skipped jobs' names carry it, as
                // LKP's result paths would.
                Slot::Unknown
            };
            push_dim(&mut dims, slot, key, v)?;
        }
        if let Value::Mapping(opts) = program_value {
            for (k, v) in opts {
                let key = key_str(k)?;
                let slot = if program.option(key).is_some() {
                    Slot::Option
                } else {
                    Slot::Unknown
                };
                if dims.iter().any(|d| d.key == key) {
                    return Err(Error::JobInvalid(format!(
                        "option {key:?} is set both at the top level and under {}",
                        program.name
                    )));
                }
                push_dim(&mut dims, slot, key, v)?;
            }
        } else if !program_value.is_null() {
            return Err(Error::JobInvalid(format!(
                "program {} must map option names to values, not be a {}",
                program.name,
                type_name(program_value)
            )));
        }
        // Reported after any wrong key or value, which is the likelier slip.
        let mut missing = None;
        for required in program.required {
            if !dims.iter().any(|d| d.key == *required) {
                missing.get_or_insert(Error::JobInvalid(format!(
                    "program {} needs option {required:?}",
                    program.name
                )));
            }
        }
        let count = dims
            .iter()
            .try_fold(1usize, |acc, d| acc.checked_mul(d.values.len()))
            .and_then(|c| c.checked_add(self.expanded));
        match count {
            Some(c) if c <= MAX_ATOMIC_JOBS => self.expanded = c,
            _ => return Err(too_many_jobs()),
        }
        for choice in product(&dims) {
            let job = build_job(program, &dims, &choice)?;
            let name = format!("{}/{}", job.testcase, job.path_params());
            let problem = dims
                .iter()
                .zip(&choice)
                .find_map(|(d, &i)| validate(program, d.slot, &d.key, &d.values[i]).err());
            match doc_skip.clone().or(problem).or_else(|| missing.clone()) {
                Some(err) => self.skip_job(&name, err),
                None => self.plan.jobs.push(job),
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<JobPlan> {
        if !self.plan.jobs.is_empty() {
            return Ok(self.plan);
        }
        let jobs: Vec<&Skipped> = self
            .plan
            .skipped
            .iter()
            .filter(|s| s.kind == SkipKind::Job)
            .collect();
        let one_reason = jobs.windows(2).all(|w| w[0].reason == w[1].reason);
        if one_reason && !self.errors.is_empty() {
            return Err(self.errors.swap_remove(0));
        }
        Err(Error::NothingRunnable {
            skipped: jobs
                .iter()
                .map(|s| format!("{}: {}", s.name, s.reason))
                .collect(),
        })
    }
}

/// Whether `key` is an option of any program (so `key:` with no value is
/// an unset option, not a program name).
fn is_option_anywhere(key: &str) -> bool {
    programs::PROGRAMS
        .iter()
        .any(|p| programs::option_spec(p, key).is_some())
}

fn key_str(k: &Value) -> Result<&str> {
    k.as_str()
        .ok_or_else(|| Error::JobInvalid(format!("keys must be strings, found a {}", type_name(k))))
}

fn unknown_option(program: &ProgramSpec, key: &str) -> Error {
    let mut valid = program.option_names();
    valid.extend(programs::SETUP_PROGRAMS.iter().map(|o| o.name.to_string()));
    valid.extend(JOB_KEYS.iter().map(|k| k.to_string()));
    Error::UnknownOption {
        program: program.name.to_string(),
        option: key.to_string(),
        valid,
    }
}

/// Adds a dimension; values are checked against the program per atomic job,
/// except the job keys, whose bad values are structural errors.
fn push_dim(dims: &mut Vec<Dim>, slot: Slot, key: &str, v: &Value) -> Result<()> {
    let values = match v {
        Value::Sequence(items) if items.is_empty() => {
            return Err(invalid(key, "[]", "an empty list expands into no jobs"))
        }
        Value::Sequence(items) => items
            .iter()
            .map(|i| scalar(key, i))
            .collect::<Result<Vec<_>>>()?,
        // LKP skips options whose value is nil (`key:` with nothing after).
        Value::Null => return Ok(()),
        other => vec![scalar(key, other)?],
    };
    for value in &values {
        match slot {
            Slot::Job => validate_job_key(key, value)?,
            Slot::Need => Needs::default().set(key, value)?,
            _ => {}
        }
    }
    dims.push(Dim {
        slot,
        key: key.to_string(),
        values,
    });
    Ok(())
}

fn scalar(key: &str, v: &Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(Error::JobInvalid(format!(
            "{key} must be a scalar or a list of scalars, found a {}",
            type_name(other)
        ))),
    }
}

fn invalid(key: &str, value: &str, reason: &str) -> Error {
    Error::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Characters LKP keeps in path parameters; kbot requires them in the
/// other result-path segments too, so a path never escapes its directory.
fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-+=:.%_".contains(c)
}

fn validate_job_key(key: &str, value: &str) -> Result<()> {
    if key == "runs" {
        return parse_runs(value).map(drop);
    }
    if value.is_empty() || value.starts_with('.') || !value.chars().all(is_path_char) {
        return Err(invalid(
            key,
            value,
            "must be non-empty, not start with '.', and use only [-a-zA-Z0-9+=:.%_]",
        ));
    }
    Ok(())
}

fn validate(program: &ProgramSpec, slot: Slot, key: &str, value: &str) -> Result<()> {
    match slot {
        Slot::Job | Slot::Need => Ok(()),
        Slot::Unknown => Err(unknown_option(program, key)),
        Slot::Param | Slot::Option => match programs::option_spec(program, key) {
            Some(spec) => check_value(spec, value),
            None => Err(unknown_option(program, key)),
        },
    }
}

fn parse_runs(value: &str) -> Result<u32> {
    match value.parse::<u32>() {
        Ok(n) if (1..=MAX_RUNS).contains(&n) => Ok(n),
        _ => Err(invalid(
            "runs",
            value,
            &format!("must be an integer from 1 to {MAX_RUNS}"),
        )),
    }
}

/// Checks a literal value against its option's kind, without hardware.
fn check_value(spec: &OptionSpec, value: &str) -> Result<()> {
    let ok = match spec.kind {
        ValueKind::Choice(words) => {
            if !words.contains(&value) {
                return Err(invalid(
                    spec.name,
                    value,
                    &format!("kbot runs: {}", words.join(", ")),
                ));
            }
            true
        }
        ValueKind::Count => Count::parse(value).is_some(),
        ValueKind::Size => units::size(value).is_some(),
        ValueKind::MemorySize => units::percent(value).is_some() || units::size(value).is_some(),
        ValueKind::Duration => units::seconds(value).is_some(),
        ValueKind::Integer => units::leading_integer(value).is_some(),
        ValueKind::Flag => value == "0" || value == "1",
    };
    if ok {
        Ok(())
    } else {
        Err(invalid(spec.name, value, kind_hint(spec.kind)))
    }
}

fn kind_hint(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Choice(_) => "not one of the valid values",
        ValueKind::Count => "expected a count: N, N% (of the CPUs) or Nc (cores per socket)",
        ValueKind::Size => "expected a size: N with an optional k, m, g or t suffix",
        ValueKind::MemorySize => "expected a size (N[kmgt]) or N% of memory",
        ValueKind::Duration => "expected a duration: N with an optional s, m, h or d suffix",
        ValueKind::Integer => "expected a non-negative integer",
        ValueKind::Flag => "expected 0 or 1",
    }
}

/// All combinations of one value per dimension, first dimension outermost.
fn product(dims: &[Dim]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for d in dims {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..d.values.len()).map(move |i| {
                    let mut next = prefix.clone();
                    next.push(i);
                    next
                })
            })
            .collect();
    }
    out
}

fn build_job(program: &ProgramSpec, dims: &[Dim], choice: &[usize]) -> Result<AtomicJob> {
    let mut job = AtomicJob {
        testcase: program.name.to_string(),
        program: program.name.to_string(),
        options: BTreeMap::new(),
        params: BTreeMap::new(),
        kconfig: DEFAULT_KCONFIG.to_string(),
        compiler: DEFAULT_COMPILER.to_string(),
        tbox_group: None,
        runs: DEFAULT_RUNS,
        needs: Needs::default(),
    };
    for (d, &i) in dims.iter().zip(choice) {
        let value = d.values[i].clone();
        match (d.slot, d.key.as_str()) {
            (Slot::Job, "testcase") => job.testcase = value,
            (Slot::Job, "kconfig") => job.kconfig = value,
            (Slot::Job, "compiler") => job.compiler = value,
            (Slot::Job, "tbox_group") => job.tbox_group = Some(value),
            (Slot::Job, _) => job.runs = parse_runs(&value)?,
            (Slot::Need, key) => job.needs.set(key, &value)?,
            (Slot::Param, _) => {
                job.params.insert(d.key.clone(), value);
            }
            (Slot::Option | Slot::Unknown, _) => {
                job.options.insert(d.key.clone(), value);
            }
        }
    }
    Ok(job)
}

impl AtomicJob {
    fn spec(&self) -> Result<&'static ProgramSpec> {
        programs::lookup(&self.program).ok_or_else(|| programs::unknown_program(&self.program))
    }

    /// All parameters that name the run: the program's options wherever the
    /// job set them, plus setup programs; literal values.
    fn all_params(&self) -> impl Iterator<Item = (&String, &String)> {
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
            let o = programs::option_spec(spec, k).ok_or_else(|| unknown_option(spec, k))?;
            out.insert(k.clone(), resolve_value(o, v, hw)?);
        }
        out.insert("nr_cpu".to_string(), hw.threads.to_string());
        programs::derive_params(self, hw, &mut out)?;
        Ok(out)
    }

    /// The job as a one-document LKP job file that [`parse_job_file`] reads
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
