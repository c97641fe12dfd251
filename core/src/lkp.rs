//! LKP's job-file constructs beyond plain YAML: `<< : FILE` includes, the
//! textual merge they imply (a key repeated after an include replaces the
//! included one), `---` documents, and the names of LKP's monitors, setup
//! programs and bookkeeping keys, so a job file written for lkp-tests is
//! read the way lkp-tests reads it.
//!
//! Include files come from an [`IncludeSource`]. [`IncludeDir`] reads them
//! from an lkp-tests checkout (the one piece of file I/O in kbot-core: the
//! server, the agent and the `plan_job` example all resolve includes the
//! same way, so the search order lives here once).

use std::path::{Component, Path, PathBuf};

use serde_yaml::Value;

use crate::{Error, Result};

/// Monitors kbot's agent runs around every workload (`agent/src/monitors/`
/// always, each where the kernel has its /proc file: a SLOB kernel has no
/// slabinfo; `perf-stat` and `perf-profile` where the backend has perf). A
/// job file naming one gets it; options under the key are not honoured.
pub const AGENT_MONITORS: &[&str] = &[
    "vmstat",
    "proc-vmstat",
    "interrupts",
    "softirqs",
    "meminfo",
    "buddyinfo",
    "slabinfo",
    "perf-stat",
    "perf-profile",
];

/// LKP monitors kbot does not run: a job naming one runs without it, and
/// the monitor is listed as skipped. Names are LKP's `programs/*/monitor`
/// and `*-monitor` scripts that job files use.
pub const OTHER_MONITORS: &[&str] = &[
    "bdi_dev_mapping",
    "blktrace",
    "boot-meminfo",
    "boot-slabinfo",
    "boot-time",
    "cpufreq-stats",
    "cpuidle",
    "diskstats",
    "energy",
    "ftrace",
    "heartbeat",
    "iostat",
    "kmemleak",
    "kmsg",
    "lock_stat",
    "mountstats",
    "mpstat",
    "nfsstat",
    "numa-meminfo",
    "numa-numastat",
    "numa-vmstat",
    "oom-killer",
    "pagetypeinfo",
    "perf-c2c",
    "perf-sched",
    "pmeter",
    "proc-stat",
    "sched_debug",
    "syscalls",
    "thermal",
    "top",
    "turbostat",
    "uptime",
    "watchdog",
    "zoneinfo",
];

/// Keys that group monitors (`default-monitors: {vmstat: , ...}`): each
/// monitor under one is treated as if named at the top level.
pub const MONITOR_GROUPS: &[&str] = &["default-monitors", "default-watchdogs", "watchdogs"];

/// LKP setup programs and daemons other than `cpufreq_governor`: they change
/// the machine the workload runs on (cgroups, sysctls, THP, pinning, swap,
/// servers), so a job that names one cannot be run faithfully and is skipped.
pub const UNSUPPORTED_SETUP: &[&str] = &[
    "cgroup",
    "cgroup2",
    "chrt",
    "cpuoffline",
    "disk",
    "drop_caches",
    "fs",
    "fs1",
    "fs2",
    "intel_pstate",
    "iosched",
    "kernel_cmdline",
    "md",
    "numactl",
    "numabalance",
    "nr_instances",
    "nr_threads_by_instance",
    "sched_domain",
    "sched_feature",
    "swap",
    "swapon",
    "sysctl",
    "taskset",
    "transparent_hugepage",
    "x86_energy_perf_policy",
];

/// LKP bookkeeping keys: which machine, rootfs and kernel config LKP would
/// pick, and constraints on them. kbot accepts them and lists them as
/// skipped with the reason; they never change what kbot runs or a result path.
pub const BOOKKEEPING: &[(&str, &str)] = &[
    (
        "rootfs",
        "kbot boots its own minimal initramfs; rootfs is not a run axis",
    ),
    (
        "testbox",
        "kbot leases any agent of the job's tbox_group; pin the group with tbox_group",
    ),
    ("cluster", "kbot runs every job on one machine"),
    ("nr_node", "derived from the agent's hardware"),
    (
        "need_kconfig",
        "the watch or submission's kernel config is used as is",
    ),
    ("need_x", "kbot runs no X server"),
    (
        "need_kernel_version",
        "kbot does not filter commits by version",
    ),
    ("need_kernel_headers", "kbot builds no out-of-tree modules"),
    ("need_modules", "kbot builds no out-of-tree modules"),
    (
        "mail_to",
        "reports go to the watch's or submission's recipients",
    ),
    (
        "mail_cc",
        "reports go to the watch's or submission's recipients",
    ),
    ("constraints", "kbot does not filter agents by constraints"),
    ("timeout", "the agent's lease timeout applies"),
    ("lite_mode", "monitor option, not used"),
];

/// Where [`IncludeDir`] looks for `<< : FILE`.
pub trait IncludeSource {
    /// The text of include `file`, named as the job file names it; `from`
    /// is the name of the file holding the include line (`None` for the job
    /// file itself). Returns the included file's name for nested includes
    /// and error messages, and its text.
    fn read(&self, file: &str, from: Option<&str>) -> Result<(String, String)>;
}

/// For callers without an lkp-tests checkout: every include is an error
/// saying so.
pub struct NoIncludes;

impl IncludeSource for NoIncludes {
    fn read(&self, file: &str, _from: Option<&str>) -> Result<(String, String)> {
        Err(Error::JobInvalid(format!(
            "the job file includes {file:?} (<< :), and no LKP include root is configured"
        )))
    }
}

/// Includes resolved against an lkp-tests checkout (LKP_SRC), in LKP's
/// order: `./` and `../` names next to the including file; other names in
/// the including file's directory, then at the root, then anywhere under
/// the root's `jobs/` and the root itself. Absolute names and names that
/// climb out of the root are refused, so a submitted job file cannot read
/// the server's files.
pub struct IncludeDir {
    root: PathBuf,
}

/// How deep a recursive search under the root may go.
const MAX_SEARCH_DEPTH: usize = 8;

impl IncludeDir {
    pub fn new(root: impl Into<PathBuf>) -> IncludeDir {
        IncludeDir { root: root.into() }
    }

    /// `name` as a path under the root, or `None` when it would leave it.
    fn inside(&self, name: &Path) -> Option<PathBuf> {
        let mut parts = Vec::new();
        for c in name.components() {
            match c {
                Component::Normal(p) => parts.push(p.to_owned()),
                Component::CurDir => {}
                Component::ParentDir => {
                    parts.pop()?;
                }
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        let mut path = self.root.clone();
        path.extend(parts);
        Some(path)
    }

    fn find_below(&self, dir: &Path, file: &Path, depth: usize) -> Option<PathBuf> {
        let direct = dir.join(file);
        if direct.is_file() {
            return Some(direct);
        }
        if depth == 0 {
            return None;
        }
        let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        subdirs
            .iter()
            .find_map(|d| self.find_below(d, file, depth - 1))
    }

    fn relative_name(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }
}

impl IncludeSource for IncludeDir {
    fn read(&self, file: &str, from: Option<&str>) -> Result<(String, String)> {
        let missing = |why: &str| {
            Error::JobInvalid(format!(
                "included file {file:?} {why} (LKP include root {})",
                self.root.display()
            ))
        };
        let name = Path::new(file);
        if name.is_absolute() {
            return Err(missing("is an absolute path; name it relative to the root"));
        }
        let from_dir = from
            .map(|f| Path::new(f).parent().unwrap_or(Path::new("")).to_path_buf())
            .unwrap_or_default();
        let explicit_relative = file.starts_with("./") || file.starts_with("../");
        let mut candidates = vec![from_dir.join(name)];
        if !explicit_relative {
            candidates.push(name.to_path_buf());
        }
        let mut found = None;
        for c in &candidates {
            let Some(path) = self.inside(c) else {
                return Err(missing("climbs out of the root"));
            };
            if path.is_file() {
                found = Some(path);
                break;
            }
        }
        if found.is_none() && !explicit_relative {
            found = [self.root.join("jobs"), self.root.clone()]
                .iter()
                .find_map(|d| self.find_below(d, name, MAX_SEARCH_DEPTH));
        }
        let path = found.ok_or_else(|| missing("was not found"))?;
        let text =
            std::fs::read_to_string(&path).map_err(|e| missing(&format!("cannot be read: {e}")))?;
        Ok((self.relative_name(&path), text))
    }
}

/// How deep includes may nest (a cycle stops here with an error).
const MAX_INCLUDE_DEPTH: usize = 8;

/// The job file with every `<< : FILE` line replaced by FILE's text,
/// indented to the include's column, as LKP's `yaml_merge_included_files`
/// does (`ignore:` keys dropped, override keys replaced or appended in
/// every document of FILE). Unlike LKP, includes inside included files are
/// expanded too.
pub fn expand_includes(text: &str, src: &dyn IncludeSource) -> Result<String> {
    expand_in(text, None, src, 0)
}

fn expand_in(
    text: &str,
    from: Option<&str>,
    src: &dyn IncludeSource,
    depth: usize,
) -> Result<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((prefix, content)) = include_line(line) else {
            out.push(line.to_string());
            continue;
        };
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(Error::JobInvalid(format!(
                "includes nest more than {MAX_INCLUDE_DEPTH} deep at {content:?} (a cycle?)"
            )));
        }
        let include = parse_include(content)?;
        let (name, body) = src.read(&include.file, from)?;
        let body = expand_in(&body, Some(&name), src, depth + 1)?;
        let body = apply_include_options(&body, &include)?;
        let indent = " ".repeat(prefix.chars().count());
        out.push(prefix.to_string());
        out.extend(body.lines().map(|l| format!("{indent}{l}")));
    }
    Ok(out.join("\n") + "\n")
}

/// `prefix << : content` where content is not an anchor (`*REF`) or a list.
fn include_line(line: &str) -> Option<(&str, &str)> {
    let at = line.find("<<")?;
    let (prefix, rest) = line.split_at(at);
    let rest = rest[2..].trim_start_matches(' ');
    let rest = rest.strip_prefix(':')?;
    if !rest.starts_with(' ') {
        return None;
    }
    let content = rest.trim();
    if content.is_empty() || content.starts_with('*') || content.starts_with('[') {
        return None;
    }
    Some((prefix, content))
}

struct Include {
    file: String,
    ignore: Vec<String>,
    overrides: Vec<(String, Value)>,
}

fn parse_include(content: &str) -> Result<Include> {
    if content.starts_with('{') {
        if let Ok(Value::Mapping(m)) = serde_yaml::from_str::<Value>(content) {
            if let Some(file) = m.get("file").and_then(Value::as_str) {
                let mut inc = Include {
                    file: file.to_string(),
                    ignore: Vec::new(),
                    overrides: Vec::new(),
                };
                for (k, v) in &m {
                    let Some(k) = k.as_str() else { continue };
                    match k {
                        "file" => {}
                        "ignore" => {
                            inc.ignore = match v {
                                Value::Sequence(s) => s.iter().filter_map(scalar_text).collect(),
                                other => scalar_text(other).into_iter().collect(),
                            }
                        }
                        _ => inc.overrides.push((k.to_string(), v.clone())),
                    }
                }
                return Ok(inc);
            }
        }
    }
    let unquoted = ['\'', '"']
        .iter()
        .find_map(|q| content.strip_prefix(*q).and_then(|c| c.strip_suffix(*q)))
        .unwrap_or(content);
    Ok(Include {
        file: unquoted.to_string(),
        ignore: Vec::new(),
        overrides: Vec::new(),
    })
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn top_key(line: &str) -> Option<&str> {
    if line.starts_with([' ', '\t', '#', '-', '%']) || line.is_empty() {
        return None;
    }
    let (key, _) = line.split_once(':')?;
    Some(key.trim().trim_matches(|c| c == '\'' || c == '"'))
}

fn apply_include_options(body: &str, inc: &Include) -> Result<String> {
    let kept: Vec<&str> = body
        .lines()
        .filter(|l| {
            !inc.ignore.iter().any(|k| {
                l.strip_prefix(k.as_str())
                    .is_some_and(|r| r.trim_start().starts_with(':'))
            })
        })
        .collect();
    if inc.overrides.is_empty() {
        return Ok(kept.join("\n"));
    }
    let mut docs: Vec<Vec<String>> = vec![Vec::new()];
    for l in kept {
        if is_document_separator(l) {
            docs.push(Vec::new());
        } else if let Some(d) = docs.last_mut() {
            d.push(l.to_string());
        }
    }
    for (key, value) in &inc.overrides {
        let dumped = serde_yaml::to_string(value)
            .map_err(|e| Error::JobInvalid(format!("include override {key}: {e}")))?;
        let line = format!("{key}: {}", dumped.trim_end());
        for doc in &mut docs {
            if doc.iter().all(|l| l.trim().is_empty()) {
                continue;
            }
            let mut replaced = false;
            for l in doc.iter_mut() {
                if top_key(l) == Some(key.as_str()) {
                    l.clone_from(&line);
                    replaced = true;
                }
            }
            if !replaced {
                doc.push(line.clone());
            }
        }
    }
    Ok(docs
        .iter()
        .map(|d| d.join("\n"))
        .collect::<Vec<_>>()
        .join("\n---\n"))
}

fn is_document_separator(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|r| r.trim_matches([' ', '\t']).is_empty())
}

/// One `---` document of a job file: its text with repeated top-level keys
/// resolved (the last one wins, as when LKP's text merge puts a key after
/// an include that also sets it), and its first line in the whole file.
pub struct Document {
    pub text: String,
    pub first_line: usize,
}

/// Splits a job file (includes already expanded) into documents.
pub fn documents(text: &str) -> Vec<Document> {
    let mut docs = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    let mut first_line = 1;
    for (i, line) in text.lines().enumerate() {
        if is_document_separator(line) {
            docs.push(Document {
                text: last_key_wins(&lines),
                first_line,
            });
            lines.clear();
            first_line = i + 2;
        } else {
            lines.push(line);
        }
    }
    docs.push(Document {
        text: last_key_wins(&lines),
        first_line,
    });
    docs
}

/// Drops every top-level key block that a later block with the same key
/// replaces. Blank lines keep their places so YAML error lines still match.
fn last_key_wins(lines: &[&str]) -> String {
    let mut owner: Vec<Option<&str>> = Vec::with_capacity(lines.len());
    let mut current = None;
    for l in lines {
        if let Some(k) = top_key(l) {
            current = Some(k);
        }
        owner.push(current);
    }
    let last_start = |key: &str| {
        lines
            .iter()
            .rposition(|l| top_key(l) == Some(key))
            .unwrap_or(0)
    };
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| match owner[i] {
            Some(k) if i < last_start(k) => "",
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_lines_are_recognised_as_lkp_does() {
        assert_eq!(include_line("<<: base.yaml"), Some(("", "base.yaml")));
        assert_eq!(include_line("<< : base.yaml"), Some(("", "base.yaml")));
        assert_eq!(include_line("  << : x"), Some(("  ", "x")));
        assert_eq!(include_line("<<: *REF"), None);
        assert_eq!(include_line("<<: [a, b]"), None);
        assert_eq!(include_line("a: b"), None);
        assert_eq!(include_line("<<:x"), None);
    }

    #[test]
    fn a_later_key_replaces_an_earlier_one() {
        let docs = documents("a: 1\nb:\n  - x\nc: 3\nb: 2\n---\nd: 4\n");
        assert_eq!(docs.len(), 2);
        let v: Value = serde_yaml::from_str(&docs[0].text).expect("yaml");
        assert_eq!(v["b"], Value::from(2));
        assert_eq!(v["a"], Value::from(1));
        assert_eq!(docs[0].text.lines().count(), 5, "line numbers kept");
        assert_eq!(docs[1].first_line, 7);
    }

    #[test]
    fn overrides_reach_every_document() {
        let inc = Include {
            file: "f".into(),
            ignore: vec!["x".into()],
            overrides: vec![("n".into(), Value::from(4))],
        };
        let out = apply_include_options("x: 1\nn: 1\n---\nm: 2\n", &inc).expect("applies");
        assert_eq!(out, "n: 4\n---\nm: 2\nn: 4");
    }
}
