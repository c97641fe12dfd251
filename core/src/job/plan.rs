//! The planner: an LKP job file (YAML, with includes and `---` documents)
//! expanded into the atomic jobs kbot runs, and what it leaves out with the
//! reason ([`JobPlan`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use crate::job::model::{
    AtomicJob, DEFAULT_COMPILER, DEFAULT_KCONFIG, DEFAULT_RUNS, JOB_KEYS, KPI_KEY,
};
use crate::job::validate::{
    check_kpi, check_param, invalid, parse_kpi_list, parse_runs, unknown_option, validate_job_key,
};
use crate::lkp;
use crate::needs::{Needs, NEED_KEYS};
use crate::programs::table::{self, ProgramSpec};
use crate::{Error, Result};

/// Upper bound on the atomic jobs one file may expand into.
pub const MAX_ATOMIC_JOBS: usize = 1024;

/// Identity keys of LKP job files that kbot accepts and ignores.
const IGNORED_KEYS: &[&str] = &["suite", "category"];

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
        .any(|k| k.as_str().is_some_and(|k| table::lookup(k).is_some()))
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
        let mut kpi: Vec<String> = Vec::new();
        for (k, v) in doc {
            let key = key_str(k)?;
            if key == KPI_KEY {
                // A list that names metrics, not a matrix dimension.
                kpi = parse_kpi_list(v)?;
            } else if let Some(spec) = table::lookup(key) {
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
                Some(p) => table::unknown_program(p),
                None => Error::JobInvalid(format!(
                    "no program key; known programs: {}",
                    table::program_names().join(", ")
                )),
            };
            self.expanded += 1;
            self.skip_job(name, err);
            return Ok(());
        };
        if let Some(p) = unknown_programs.first() {
            doc_skip.get_or_insert(table::unknown_program(p));
        }
        let mut dims = Vec::new();
        for (key, v) in rest {
            let slot = if JOB_KEYS.contains(&key) {
                Slot::Job
            } else if NEED_KEYS.contains(&key) {
                Slot::Need
            } else if table::option_spec(program, key).is_some() {
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
            let mut job = build_job(program, &dims, &choice)?;
            // A KPI the job cannot write is a slip in the file, not a job
            // kbot cannot run: the file is refused.
            for name in &kpi {
                check_kpi(program, &job.testcase, name)?;
            }
            job.kpi = kpi.clone();
            let name = format!("{}/{}", job.testcase, job.path_params());
            let problem = dims
                .iter()
                .zip(&choice)
                .find_map(|(d, &i)| validate(program, d.slot, &d.key, &d.values[i]).err())
                .or_else(|| table::check_combination(&job).err());
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
    table::PROGRAMS
        .iter()
        .any(|p| table::option_spec(p, key).is_some())
}

fn key_str(k: &Value) -> Result<&str> {
    k.as_str()
        .ok_or_else(|| Error::JobInvalid(format!("keys must be strings, found a {}", type_name(k))))
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

fn validate(program: &ProgramSpec, slot: Slot, key: &str, value: &str) -> Result<()> {
    match slot {
        Slot::Job | Slot::Need => Ok(()),
        Slot::Unknown => Err(unknown_option(program, key)),
        Slot::Param | Slot::Option => check_param(program, key, value),
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
        kpi: Vec::new(),
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
