//! The checks of a job file's values that need no machine: job keys (path
//! segments, `runs`), option values against their kind, and the errors that
//! name what is wrong.

use crate::job::model::{JOB_KEYS, KPI_KEY, MAX_RUNS};
use crate::metrics;
use crate::programs::table::{self, OptionSpec, ProgramSpec, ValueKind};
use crate::units::{self, Count};
use crate::{Error, Result};

pub(crate) fn unknown_option(program: &ProgramSpec, key: &str) -> Error {
    let mut valid = program.option_names();
    valid.extend(table::SETUP_PROGRAMS.iter().map(|o| o.name.to_string()));
    valid.extend(JOB_KEYS.iter().map(|k| k.to_string()));
    Error::UnknownOption {
        program: program.name.to_string(),
        option: key.to_string(),
        valid,
    }
}

pub(crate) fn invalid(key: &str, value: &str, reason: &str) -> Error {
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

pub(crate) fn validate_job_key(key: &str, value: &str) -> Result<()> {
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

/// Checks `value` of the program option or setup program `key`.
pub(crate) fn check_param(program: &ProgramSpec, key: &str, value: &str) -> Result<()> {
    match table::option_spec(program, key) {
        Some(spec) => check_value(spec, value),
        None => Err(unknown_option(program, key)),
    }
}

pub(crate) fn parse_runs(value: &str) -> Result<u32> {
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

pub(crate) fn kind_hint(kind: ValueKind) -> &'static str {
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

/// Reads a job file's `kpi:`: a list of metric names (one name alone is a
/// list of one), each a non-empty string without blanks, none twice.
/// Whether each is a KPI of the job's benchmark is [`check_kpi`]'s.
pub(crate) fn parse_kpi_list(v: &serde_yaml::Value) -> Result<Vec<String>> {
    use serde_yaml::Value;
    let items: Vec<&Value> = match v {
        Value::Sequence(items) if !items.is_empty() => items.iter().collect(),
        Value::String(_) => vec![v],
        _ => {
            return Err(Error::JobInvalid(format!(
                "{KPI_KEY} must be a list of metric names (the first is the primary KPI), \
                 e.g. [lmbench3.PIPE.bandwidth.MB/sec, lmbench3.PIPE.latency.us]"
            )))
        }
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Value::String(name) = item else {
            return Err(Error::JobInvalid(format!(
                "{KPI_KEY} names metrics: {item:?} is not a metric name"
            )));
        };
        if !metrics::is_storable_name(name) || name.chars().any(char::is_whitespace) {
            return Err(invalid(
                KPI_KEY,
                name,
                &format!(
                    "a metric name is 1 to {} bytes without blanks",
                    metrics::MAX_METRIC_NAME_LEN
                ),
            ));
        }
        if names.contains(name) {
            return Err(invalid(KPI_KEY, name, "named twice"));
        }
        names.push(name.clone());
    }
    Ok(names)
}

/// Checks that `name` is a KPI that `program` writes under `testcase`:
/// `<testcase>.<key>`, a KPI ([`metrics::is_kpi`]: not `.time.*`, not a
/// monitor, not a pass/fail stat), and a key the program's parsers write
/// ([`ProgramSpec::metrics`]).
pub(crate) fn check_kpi(program: &ProgramSpec, testcase: &str, name: &str) -> Result<()> {
    let known = || {
        program
            .metrics
            .iter()
            .map(|k| format!("{testcase}.{k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(key) = name
        .strip_prefix(testcase)
        .and_then(|rest| rest.strip_prefix('.'))
    else {
        return Err(invalid(
            KPI_KEY,
            name,
            &format!(
                "not a metric of testcase {testcase}: its KPIs are {}",
                known()
            ),
        ));
    };
    if !metrics::is_kpi(name) {
        return Err(invalid(
            KPI_KEY,
            name,
            "not a KPI: GNU time's <testcase>.time.*, monitors and pass/fail stats never \
             act on a job",
        ));
    }
    if !program
        .metrics
        .iter()
        .any(|pattern| key_matches(pattern, key))
    {
        return Err(invalid(
            KPI_KEY,
            name,
            &format!(
                "{} writes no such metric; its KPIs are {}",
                program.name,
                known()
            ),
        ));
    }
    Ok(())
}

/// `pattern` with `*` for one dot-free, non-empty segment.
fn key_matches(pattern: &str, key: &str) -> bool {
    let (p, k): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), key.split('.').collect());
    // A `*` segment matches one segment; names like `MB/sec` have no dot.
    p.len() == k.len()
        && p.iter()
            .zip(&k)
            .all(|(p, k)| (*p == "*" && !k.is_empty()) || p == k)
}
