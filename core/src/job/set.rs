//! Job variables set from the command line, as LKP's `lkp submit -s
//! 'KEY: VALUE'` sets them: a lab runs an upstream job file unchanged with
//! its own `testtime`, `runs` or `kconfig`. The value goes into the first
//! document (which every job of the file starts from) and replaces the key
//! in any later document that sets it, so every atomic job of the file gets
//! it. Only top-level keys; comments of the file are not kept.

use serde_yaml::{Mapping, Value};

use crate::{Error, Result};

/// `KEY=VALUE` or LKP's `KEY: VALUE`; the value is read as YAML (`5s` a
/// string, `1` a number, `[1, 2]` a list).
pub fn parse_set(arg: &str) -> Result<(String, Value)> {
    let bad = |why: &str| Error::JobInvalid(format!("--set {arg:?}: {why}"));
    let (key, value) = match (arg.find('='), arg.find(": ")) {
        (Some(e), Some(c)) if c < e => (&arg[..c], &arg[c + 2..]),
        (Some(e), _) => (&arg[..e], &arg[e + 1..]),
        (None, Some(c)) => (&arg[..c], &arg[c + 2..]),
        (None, None) => return Err(bad("give KEY=VALUE or 'KEY: VALUE'")),
    };
    let key = key.trim();
    if key.is_empty() || key.contains(|c: char| c.is_whitespace() || c == '.') {
        return Err(bad("the key must be one top-level job key"));
    }
    let value = serde_yaml::from_str(value.trim()).map_err(|e| bad(&format!("not YAML: {e}")))?;
    Ok((key.to_string(), value))
}

/// `text` with each `(key, value)` set in every job it makes.
pub fn set_variables(text: &str, sets: &[(String, Value)]) -> Result<String> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = serde::Deserialize::deserialize(doc)
            .map_err(|e| Error::JobInvalid(format!("the job file is not YAML: {e}")))?;
        docs.push(value);
    }
    if docs.is_empty() {
        docs.push(Value::Mapping(Mapping::new()));
    }
    for (i, doc) in docs.iter_mut().enumerate() {
        if doc.is_null() {
            *doc = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(map) = doc else {
            return Err(Error::JobInvalid(format!(
                "document {} of the job file is not a mapping of keys",
                i + 1
            )));
        };
        for (key, value) in sets {
            let key = Value::String(key.clone());
            if i == 0 || map.contains_key(&key) {
                map.insert(key, value.clone());
            }
        }
    }
    let mut out = String::new();
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(
            &serde_yaml::to_string(doc)
                .map_err(|e| Error::JobInvalid(format!("writing the job file: {e}")))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::parse_job_file;

    #[test]
    fn both_spellings_parse_as_yaml_values() {
        let (k, v) = parse_set("testtime=5s").expect("k=v");
        assert_eq!((k.as_str(), v), ("testtime", Value::String("5s".into())));
        let (k, v) = parse_set("runs: 1").expect("k: v");
        assert_eq!((k.as_str(), v.as_u64()), ("runs", Some(1)));
        let (k, v) = parse_set("kconfig: a=b").expect("lkp form with = in the value");
        assert_eq!((k.as_str(), v), ("kconfig", Value::String("a=b".into())));
        assert!(parse_set("testtime").is_err());
        assert!(parse_set("stress-ng.test=pipe").is_err());
        assert!(parse_set("=1").is_err());
    }

    #[test]
    fn every_job_of_the_file_gets_the_value() {
        let file = "testcase: stress-ng\ntesttime: 60s\n---\nstress-ng:\n  test: pipe\n---\ntesttime: 10s\nstress-ng:\n  test: pipeherd\n";
        let sets = [
            parse_set("testtime=5s").expect("set"),
            parse_set("runs=1").expect("set"),
        ];
        let out = set_variables(file, &sets).expect("set");
        let jobs = parse_job_file(&out).expect("plans");
        assert_eq!(jobs.len(), 2, "{out}");
        for job in &jobs {
            assert_eq!(
                job.params.get("testtime").map(String::as_str),
                Some("5s"),
                "{out}"
            );
            assert_eq!(job.runs, 1, "{out}");
        }
        assert_eq!(set_variables(file, &[]).expect("unchanged"), file);
        assert!(set_variables("- a list\n", &sets).is_err());
    }

    #[test]
    fn the_upstream_stress_ng_file_plans_with_the_labs_values() {
        let file = include_str!("../../../jobs/upstream/stress-ng-part4.yaml");
        let sets = [
            parse_set("testtime=5s").expect("set"),
            parse_set("runs: 1").expect("set"),
            parse_set("kconfig=qemu-x86_64-ci").expect("set"),
        ];
        let out = set_variables(file, &sets).expect("set");
        let plan = crate::job::plan_job_file(&out, &crate::lkp::NoIncludes).expect("plans");
        assert_eq!(plan.jobs.len(), 1, "switch with method pipe");
        let job = &plan.jobs[0];
        assert_eq!(job.params.get("testtime").map(String::as_str), Some("5s"));
        assert_eq!((job.runs, job.kconfig.as_str()), (1, "qemu-x86_64-ci"));
    }
}
