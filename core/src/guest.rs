//! What a guest's /init writes on its results channel, read back: the
//! `@@KBOT-BEGIN <name>` ... `@@KBOT-END <name> [rc=N]` sections, the
//! measured executions among them (`output.<i>.<n>`), and the metrics of
//! those executions. The agent reads a boot with it, and the server reads
//! the channel a reproduction script sends back, so both compute a run's
//! metrics the same way.

use std::collections::BTreeMap;

use crate::parsers::{self, Metrics};
use crate::programs::Invocation;
use crate::Result;

pub const BEGIN: &str = "@@KBOT-BEGIN ";
pub const END: &str = "@@KBOT-END ";

/// One section of the results channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub body: String,
    /// `rc=N` on the END line: the exit code of the command that produced it.
    pub rc: Option<i32>,
    /// The END line was seen (a guest that died mid-section leaves it open).
    pub complete: bool,
}

/// Splits the results channel into named sections (carriage returns, which
/// the guest tty adds, removed). A name seen twice keeps the later body.
pub fn sections(channel: &str) -> BTreeMap<String, Section> {
    let mut out = BTreeMap::new();
    let mut open: Option<(String, String)> = None;
    let unfinished = |body| Section {
        body,
        rc: None,
        complete: false,
    };
    for raw in channel.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some(name) = line.strip_prefix(BEGIN) {
            if let Some((prev, body)) = open.take() {
                out.insert(prev, unfinished(body));
            }
            open = Some((name.trim().to_string(), String::new()));
        } else if let Some(rest) = line.strip_prefix(END) {
            let mut words = rest.split_whitespace();
            let name = words.next().unwrap_or_default();
            let rc = words.find_map(|w| w.strip_prefix("rc=")?.parse().ok());
            if let Some((open_name, body)) = open.take() {
                let complete = open_name == name;
                out.insert(open_name, Section { body, rc, complete });
            }
        } else if let Some((_, body)) = open.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((name, body)) = open {
        out.insert(name, unfinished(body));
    }
    out
}

/// A section's body, or nothing.
pub fn body(sections: &BTreeMap<String, Section>, name: &str) -> String {
    sections
        .get(name)
        .map(|s| s.body.clone())
        .unwrap_or_default()
}

/// One execution of one invocation.
#[derive(Debug, Clone)]
pub struct Execution {
    /// Index into the plan.
    pub invocation: usize,
    pub stdout: String,
}

/// The `output.<i>.<n>` sections in order; a failed or cut-short execution
/// makes the run incomplete (with the last lines of its stderr).
pub fn executions(
    sections: &BTreeMap<String, Section>,
) -> std::result::Result<Vec<Execution>, String> {
    let mut runs = Vec::new();
    for (name, s) in sections {
        let Some(rest) = name.strip_prefix("output.") else {
            continue;
        };
        let invocation = rest
            .split('.')
            .next()
            .and_then(|i| i.parse().ok())
            .unwrap_or(usize::MAX);
        if !s.complete || s.rc != Some(0) {
            let stderr = body(sections, &format!("stderr.{rest}"));
            return Err(format!(
                "{name} exited with {:?}: {}",
                s.rc,
                crate::text::last_lines(&stderr, 20)
            ));
        }
        let number = rest
            .rsplit('.')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        runs.push((
            (invocation, number),
            Execution {
                invocation,
                stdout: s.body.clone(),
            },
        ));
    }
    if runs.is_empty() {
        return Err("the guest produced no workload output".to_string());
    }
    runs.sort_by_key(|r| r.0);
    Ok(runs.into_iter().map(|(_, e)| e).collect())
}

/// Parses every execution and merges the metrics of the whole workload
/// ([`parsers::merge_executions`]: times add up, a will-it-scale sweep gives
/// LKP's results for the sweep, repeated runs are averaged).
pub fn metrics(plan: &[Invocation], runs: &[Execution]) -> Result<Metrics> {
    let mut parsed = Vec::new();
    for run in runs {
        let Some(inv) = plan.get(run.invocation) else {
            continue;
        };
        parsed.push(parsers::Parsed {
            invocation: run.invocation,
            context: &inv.context,
            metrics: parsers::parse(inv.parser, &run.stdout, &inv.context)?,
        });
    }
    parsers::merge_executions(&parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_split_with_exit_codes() {
        let ch = "noise\r\n@@KBOT-BEGIN uname\r\n6.1.0\r\n@@KBOT-END uname\r\n@@KBOT-BEGIN output.0\r\n{\"a\":1}\r\n@@KBOT-END output.0 rc=3\r\n@@KBOT-BEGIN vmstat.after\r\npgfault 1\r\n";
        let s = sections(ch);
        assert_eq!(
            s["uname"],
            Section {
                body: "6.1.0\n".into(),
                rc: None,
                complete: true
            }
        );
        assert_eq!(s["output.0"].rc, Some(3));
        assert_eq!(s["output.0"].body, "{\"a\":1}\n");
        assert!(!s["vmstat.after"].complete);
        assert_eq!(s["vmstat.after"].body, "pgfault 1\n");
    }

    #[test]
    fn executions_come_in_plan_then_run_order() {
        let ch = "@@KBOT-BEGIN output.1.0\nc\n@@KBOT-END output.1.0 rc=0\n\
                  @@KBOT-BEGIN output.0.10\nb\n@@KBOT-END output.0.10 rc=0\n\
                  @@KBOT-BEGIN output.0.2\na\n@@KBOT-END output.0.2 rc=0\n";
        let runs = executions(&sections(ch)).expect("complete");
        let order: Vec<_> = runs
            .iter()
            .map(|r| (r.invocation, r.stdout.trim()))
            .collect();
        assert_eq!(order, vec![(0, "a"), (0, "b"), (1, "c")]);
    }

    #[test]
    fn a_failed_execution_names_its_stderr() {
        let ch = "@@KBOT-BEGIN output.0.0\n@@KBOT-END output.0.0 rc=1\n\
                  @@KBOT-BEGIN stderr.0.0\nno such file\n@@KBOT-END stderr.0.0 rc=0\n";
        let err = executions(&sections(ch)).expect_err("failed");
        assert!(
            err.contains("Some(1)") && err.contains("no such file"),
            "{err}"
        );
        assert!(executions(&sections("")).is_err());
    }
}
