//! KernelCI's KCIDB I/O schema, v5.3 (the `kcidb-io` package): the shape in
//! which CI systems share what they built and tested. kbot writes one
//! document per pair: the two commits as checkouts, the kernels as builds,
//! and every measured metric of every run as a test whose `number` holds the
//! value (status `DONE`: a performance number says nothing of pass or fail
//! by itself). The pair's verdict on a metric rides in the head side's
//! tests' `misc`.
//!
//! Ids are `kbot:` and kbot's own id, as the schema asks (`origin:local`).

use chrono::{TimeZone, Utc};
use serde::Serialize;
use serde_json::Value;

/// The CI system's name in every id and `origin`.
pub const ORIGIN: &str = "kbot";

/// The schema version written.
pub const VERSION: Version = Version { major: 5, minor: 3 };

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

/// One KCIDB I/O document.
#[derive(Debug, Clone, Serialize)]
pub struct Document {
    pub version: Version,
    pub checkouts: Vec<Checkout>,
    pub builds: Vec<Build>,
    pub tests: Vec<Test>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Checkout {
    pub id: String,
    pub origin: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_repository_url: Option<String>,
    pub git_commit_hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_repository_branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// Whether the checkout could be built and tested at all.
    pub valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misc: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Build {
    pub id: String,
    pub origin: &'static str,
    pub checkout_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_excerpt: Option<String>,
    /// `None` when kbot did not build it (the host's own kernel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misc: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Test {
    pub id: String,
    pub origin: &'static str,
    pub build_id: String,
    /// Dot-separated, `[a-zA-Z0-9_-]` per segment ([`test_path`]).
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misc: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Number {
    pub value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misc: Option<Value>,
}

/// KCIDB's status words.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Fail,
    Error,
    Miss,
    Pass,
    Done,
    Skip,
}

/// `kbot:KIND-LOCAL`.
pub fn id(kind: &str, local: impl std::fmt::Display) -> String {
    format!("{ORIGIN}:{kind}-{local}")
}

/// The test path of a metric: `kbot.` and its name with every character a
/// path segment may not hold made `_` (`lmbench3.PIPE.bandwidth.MB/sec`
/// becomes `kbot.lmbench3.PIPE.bandwidth.MB_sec`).
pub fn test_path(metric: &str) -> String {
    let segments = metric.split('.').map(|s| {
        let clean: String = s
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if clean.is_empty() {
            "_".to_owned()
        } else {
            clean
        }
    });
    std::iter::once(ORIGIN.to_owned())
        .chain(segments)
        .collect::<Vec<_>>()
        .join(".")
}

/// The unit a metric's name ends with, when it names one
/// (`.../sec` stays in the name: `MB/sec`, `us`, `ops_per_sec`...).
pub fn unit_of(metric: &str) -> Option<String> {
    let last = metric.rsplit('.').next()?;
    let unit = match last {
        "MB/sec" => "MB/s",
        "us" => "us",
        "ms" => "ms",
        "ns" => "ns",
        "ops_per_sec" | "throughput" => "ops/s",
        "usec_per_op" | "usecs_per_op" => "us/op",
        _ => return None,
    };
    Some(unit.to_owned())
}

/// `url` when KCIDB takes it as `git_repository_url` (an `https://` URL:
/// the schema allows no other).
pub fn repository_url(url: &str) -> Option<String> {
    url.starts_with("https://").then(|| url.to_owned())
}

/// `text` without NUL characters, which no KCIDB string may hold.
pub fn text(text: &str) -> String {
    text.replace('\0', "")
}

/// RFC 3339 of Unix milliseconds, as the schema's `date-time`.
pub fn time(ms: i64) -> Option<String> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_dot_separated_names() {
        assert_eq!(
            test_path("lmbench3.PIPE.bandwidth.MB/sec"),
            "kbot.lmbench3.PIPE.bandwidth.MB_sec"
        );
        assert_eq!(test_path("a..b c"), "kbot.a._.b_c");
        let re = regex::Regex::new(r"^([a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*)?$").expect("regex");
        for m in [
            "vmstat.system.cs",
            "perf-profile.calltrace.cycles-pp.x/y",
            "é.ü",
        ] {
            assert!(re.is_match(&test_path(m)), "{m}");
        }
    }

    #[test]
    fn times_and_units() {
        assert_eq!(
            time(1_700_000_000_123).as_deref(),
            Some("2023-11-14T22:13:20.123+00:00")
        );
        assert_eq!(
            unit_of("lmbench3.PIPE.bandwidth.MB/sec").as_deref(),
            Some("MB/s")
        );
        assert_eq!(unit_of("vmstat.system.cs"), None);
        let status = serde_json::to_string(&Status::Done).expect("json");
        assert_eq!(status, "\"DONE\"");
    }
}
