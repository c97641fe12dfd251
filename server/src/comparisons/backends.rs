//! Whether an atomic job's runs tested the commits they name.
//!
//! The `qemu` and `kexec` backends build each run's commit and boot it; the
//! `host` backend runs the workload on the machine's running kernel as it
//! is, so base and head of a host-backend pair ran the same kernel and their
//! comparison is an A/A test whatever the commits say. [`booted_commits`]
//! tells the two apart from the agents that uploaded the results
//! (`results.agent_id -> agents.backend`), so that a host-backend pair is
//! marked as such wherever its comparison is shown, and never blamed on a
//! commit it did not boot.
//!
//! The same holds for a pair whose runs were measured under different
//! conditions ([`kbot_core::conditions`]: an icount guest on one side and a
//! wall-clock guest on the other, say): their samples differ whatever the
//! commits do.

use std::collections::{BTreeMap, BTreeSet};

use kbot_api::submissions::Side;
use kbot_core::conditions::{self, Mode};

use serde::{Deserialize, Serialize};

use crate::db::Db;
use crate::error::Result;

/// How the finished runs of one atomic job got their kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootedCommits {
    /// Finished runs, both sides.
    pub finished_runs: u32,
    /// Runs on a `qemu` or `kexec` agent: the run's own commit, built and booted.
    pub booted_runs: u32,
    /// Runs on a `host` agent: the machine's running kernel, whatever the commit.
    pub host_runs: u32,
    /// Runs whose agent is no longer registered: how they ran is unknown.
    pub unknown_runs: u32,
    /// The kernel releases the host-backend runs reported, sorted, once each.
    pub host_kernels: Vec<String>,
    /// The measurement conditions ([`conditions::describe`]) the runs of
    /// each side (`base`, `head`) were measured under, once each.
    pub conditions: BTreeMap<Side, BTreeSet<String>>,
    /// The measurement modes of the QEMU runs, both sides, once each.
    #[serde(skip)]
    pub modes: BTreeSet<Mode>,
}

impl BootedCommits {
    /// True when there are finished runs and every one of them booted its
    /// commit's kernel: only then does the comparison test the commits, and
    /// only then may a regression be reported against (or bisected to) one.
    pub fn tests_the_commits(&self) -> bool {
        self.finished_runs > 0 && self.booted_runs == self.finished_runs && self.same_conditions()
    }

    /// True when every finished run, both sides, was measured under the
    /// same conditions.
    pub fn same_conditions(&self) -> bool {
        self.conditions
            .values()
            .flatten()
            .collect::<BTreeSet<_>>()
            .len()
            <= 1
    }

    /// The one mode every finished run was measured in; `None` when the
    /// runs ran outside QEMU or in several modes (then [`Self::note`] says
    /// the comparison is not a test of the commits).
    pub fn mode(&self) -> Option<Mode> {
        match (self.modes.len(), self.modes.first()) {
            (1, Some(mode)) if self.same_conditions() => Some(*mode),
            _ => None,
        }
    }

    /// Why the comparison is not a test of the commits, for people: `None`
    /// when it is one (or when nothing finished yet).
    pub fn note(&self) -> Option<String> {
        if self.finished_runs == 0 || self.tests_the_commits() {
            return None;
        }
        let kernels = match self.host_kernels.as_slice() {
            [] => "kernel".to_string(),
            [one] => format!("kernel {one}"),
            many => format!("kernels {}", many.join(", ")),
        };
        if self.host_runs == 0 && self.unknown_runs == 0 {
            return Some(self.conditions_note());
        }
        if self.host_runs == self.finished_runs {
            return Some(format!(
                "host backend: both sides ran the running {kernels}; \
                 this is an A/A comparison, not a test of the commits"
            ));
        }
        let mut parts = Vec::new();
        if self.host_runs > 0 {
            parts.push(format!(
                "host backend: {} of {} runs ran the running {kernels}, not their commit's",
                self.host_runs, self.finished_runs
            ));
        }
        if self.unknown_runs > 0 {
            parts.push(format!(
                "{} of {} runs came from agents no longer registered, so whether they \
                 booted their commits is unknown",
                self.unknown_runs, self.finished_runs
            ));
        }
        Some(format!(
            "{}; this comparison is not a test of the commits",
            parts.join("; ")
        ))
    }

    /// Why runs measured under different conditions do not compare.
    fn conditions_note(&self) -> String {
        let sides = self
            .conditions
            .iter()
            .map(|(side, set)| {
                let list = set
                    .iter()
                    .map(|c| if c.is_empty() { "none recorded" } else { c })
                    .collect::<Vec<_>>()
                    .join(" | ");
                format!("{side}: {list}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        format!(
            "the runs were measured under different conditions ({sides}); \
             their samples differ whatever the commits do, so this comparison is \
             not a test of the commits"
        )
    }

    fn add(&mut self, run: RunGroup) {
        let RunGroup {
            side,
            backend,
            kernel_release,
            tuning,
            runs,
        } = run;
        let tuning: BTreeMap<String, String> = serde_json::from_str(&tuning).unwrap_or_default();
        self.modes.extend(Mode::of(&tuning));
        self.conditions
            .entry(side)
            .or_default()
            .insert(conditions::describe(&tuning));
        self.finished_runs += runs;
        match backend.as_deref() {
            Some("qemu" | "kexec") => self.booted_runs += runs,
            Some("host") => {
                self.host_runs += runs;
                if !kernel_release.is_empty() && !self.host_kernels.contains(&kernel_release) {
                    self.host_kernels.push(kernel_release);
                    self.host_kernels.sort();
                }
            }
            // A deleted agent (`ON DELETE SET NULL`) or a backend this
            // server does not know: not proven booted.
            _ => self.unknown_runs += runs,
        }
    }
}

/// Finished runs that agree on side, backend, kernel and tuning.
struct RunGroup {
    side: Side,
    backend: Option<String>,
    kernel_release: String,
    /// The result's tuning map, as stored (JSON).
    tuning: String,
    runs: u32,
}

/// A row of [`JOB_RUNS_BY_BACKEND`] or [`SUBMISSION_RUNS_BY_BACKEND`].
#[derive(sqlx::FromRow)]
struct RunGroupRow {
    k: i64,
    #[sqlx(try_from = "String")]
    side: Side,
    backend: Option<String>,
    kernel_release: String,
    tuning: String,
    n: i64,
}

/// The finished runs of an atomic job, by side, backend, kernel release and
/// tuning.
const JOB_RUNS_BY_BACKEND: &str = "SELECT j.atomic_job_id AS k, j.side, ag.backend, \
        r.kernel_release, r.tuning, COUNT(*) AS n \
    FROM jobs j JOIN results r ON r.job_id = j.id LEFT JOIN agents ag ON ag.id = r.agent_id \
    WHERE j.atomic_job_id = $1 AND j.state = 'finished' \
    GROUP BY j.atomic_job_id, j.side, ag.backend, r.kernel_release, r.tuning";

/// The same for every atomic job of a submission, keyed by position.
const SUBMISSION_RUNS_BY_BACKEND: &str = "SELECT a.position AS k, j.side, ag.backend, \
        r.kernel_release, r.tuning, COUNT(*) AS n \
    FROM jobs j JOIN atomic_jobs a ON a.id = j.atomic_job_id \
    JOIN results r ON r.job_id = j.id LEFT JOIN agents ag ON ag.id = r.agent_id \
    WHERE j.submission_id = $1 AND j.state = 'finished' \
    GROUP BY a.position, j.side, ag.backend, r.kernel_release, r.tuning";

/// Whether every finished run of the atomic job booted its commit's kernel
/// (qemu or kexec), or some ran on the host backend (or on an agent that is
/// gone). See [`BootedCommits::tests_the_commits`] and [`BootedCommits::note`].
pub async fn booted_commits(db: &Db, atomic_job_id: i64) -> Result<BootedCommits> {
    let rows = sqlx::query_as::<_, RunGroupRow>(JOB_RUNS_BY_BACKEND)
        .bind(atomic_job_id)
        .fetch_all(db.read())
        .await?;
    Ok(fold(rows).remove(&atomic_job_id).unwrap_or_default())
}

/// [`booted_commits`] of every atomic job of a submission that has finished
/// runs, by the atomic job's position (the API's `job_index`), in one query.
pub async fn booted_commits_by_position(
    db: &Db,
    submission_id: i64,
) -> Result<BTreeMap<i64, BootedCommits>> {
    let rows = sqlx::query_as::<_, RunGroupRow>(SUBMISSION_RUNS_BY_BACKEND)
        .bind(submission_id)
        .fetch_all(db.read())
        .await?;
    Ok(fold(rows))
}

fn fold(rows: Vec<RunGroupRow>) -> BTreeMap<i64, BootedCommits> {
    let mut out: BTreeMap<i64, BootedCommits> = BTreeMap::new();
    for row in rows {
        out.entry(row.k).or_default().add(RunGroup {
            side: row.side,
            backend: row.backend,
            kernel_release: row.kernel_release,
            tuning: row.tuning,
            runs: u32::try_from(row.n).unwrap_or(u32::MAX),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ICOUNT: &str =
        r#"{"qemu_clock":"icount shift=3,sleep=off","guest_boot_wall_secs":"4.1"}"#;

    fn group(side: Side, backend: Option<&str>, release: &str, tuning: &str, n: u32) -> RunGroup {
        RunGroup {
            side,
            backend: backend.map(str::to_string),
            kernel_release: release.to_string(),
            tuning: tuning.to_string(),
            runs: n,
        }
    }

    /// Runs of one backend and release, alike on both sides.
    fn of(runs: &[(Option<&str>, &str, u32)]) -> BootedCommits {
        let mut b = BootedCommits::default();
        for (backend, release, n) in runs {
            b.add(group(Side::Base, *backend, release, "{}", *n));
        }
        b
    }

    #[test]
    fn runs_under_different_conditions_do_not_test_the_commits() {
        let mut b = BootedCommits::default();
        b.add(group(Side::Base, Some("qemu"), "6.1.0-kbot", ICOUNT, 3));
        b.add(group(
            Side::Head,
            Some("qemu"),
            "6.1.0-kbot",
            r#"{"qemu_clock":"icount shift=3,sleep=off","guest_boot_wall_secs":"3.7"}"#,
            3,
        ));
        assert!(b.same_conditions(), "a boot's wall time is not a condition");
        assert!(b.tests_the_commits());
        assert_eq!(b.mode(), Some(Mode::ExactOneCpu), "no guest_cpus: one");
        b.add(group(
            Side::Head,
            Some("qemu"),
            "6.1.0-kbot",
            r#"{"qemu_clock":"wall"}"#,
            1,
        ));
        assert!(!b.same_conditions());
        assert!(!b.tests_the_commits());
        assert_eq!(b.mode(), None, "two modes are no one mode");
        let note = b.note().unwrap_or_default();
        assert!(
            note.starts_with(
                "the runs were measured under different conditions \
                 (base: qemu_clock=icount shift=3,sleep=off; \
                 head: qemu_clock=icount shift=3,sleep=off | qemu_clock=wall)"
            ),
            "{note}"
        );
        assert!(note.ends_with("not a test of the commits"), "{note}");
    }

    #[test]
    fn booted_runs_test_the_commits_and_need_no_note() {
        let b = of(&[(Some("qemu"), "6.1.0-kbot", 3), (Some("kexec"), "6.1.0", 3)]);
        assert!(b.tests_the_commits());
        assert_eq!(b.note(), None);
        assert!(!BootedCommits::default().tests_the_commits());
        assert_eq!(BootedCommits::default().note(), None);
    }

    #[test]
    fn host_runs_are_an_a_a_comparison() {
        let b = of(&[(Some("host"), "6.1.0-18-amd64", 4)]);
        assert!(!b.tests_the_commits());
        assert_eq!(
            b.note().as_deref(),
            Some(
                "host backend: both sides ran the running kernel 6.1.0-18-amd64; \
                 this is an A/A comparison, not a test of the commits"
            )
        );
        let rebooted = of(&[(Some("host"), "6.1.0-18", 2), (Some("host"), "6.1.0-17", 2)]);
        assert!(rebooted
            .note()
            .is_some_and(|n| n.contains("running kernels 6.1.0-17, 6.1.0-18;")));
    }

    #[test]
    fn one_host_run_or_a_lost_agent_is_enough_to_disqualify() {
        let mixed = of(&[(Some("qemu"), "6.1.0-kbot", 5), (Some("host"), "6.1.0", 1)]);
        assert!(!mixed.tests_the_commits());
        let note = mixed.note().unwrap_or_default();
        assert!(note.starts_with("host backend: 1 of 6 runs"), "{note}");
        assert!(note.ends_with("not a test of the commits"), "{note}");
        let lost = of(&[(Some("qemu"), "6.1.0-kbot", 2), (None, "6.1.0-kbot", 2)]);
        assert!(!lost.tests_the_commits());
        assert!(lost
            .note()
            .is_some_and(|n| n.contains("2 of 4 runs came from agents no longer registered")));
    }
}
