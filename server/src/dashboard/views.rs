//! What the templates show, already formatted: the API types turned into
//! rows of strings.

use kbot_core::job::AtomicJob;
use kbot_core::report::describe_machine;
use kbot_core::table::number;

use crate::agents::AgentRecord;
use kbot_api::submissions::{ComparisonView, EventView, JobView, SubmissionView};

/// Characters of a sha shown in tables (0-day prints 10).
const SHORT_SHA: usize = 10;

pub struct SubmissionRow {
    pub id: i64,
    pub repo: String,
    pub base_short: String,
    pub head_short: String,
    pub head_subject: String,
    pub state: String,
    pub jobs_finished: u32,
    pub jobs_failed: u32,
    pub jobs_total: u32,
    pub submitter: String,
    pub created: String,
}

impl From<&SubmissionView> for SubmissionRow {
    fn from(s: &SubmissionView) -> SubmissionRow {
        SubmissionRow {
            id: s.id,
            repo: s.repo.clone(),
            base_short: short(&s.base.sha),
            head_short: short(&s.head.sha),
            head_subject: s.head.subject.clone(),
            state: s.state.clone(),
            jobs_finished: s.jobs.finished,
            jobs_failed: s.jobs.failed,
            jobs_total: s.jobs.total,
            submitter: s.submitter.clone(),
            created: format_time(s.created_at),
        }
    }
}

pub struct SubmissionSummary {
    pub id: i64,
    pub state: String,
    pub repo: String,
    pub base_sha: String,
    pub base_subject: String,
    pub head_sha: String,
    pub head_subject: String,
    pub submitter: String,
    pub created: String,
    pub jobs_finished: u32,
    pub jobs_failed: u32,
    pub jobs_total: u32,
    pub max_runs: u32,
    /// What the job file has that kbot does not run: (kind, name, reason).
    pub skipped: Vec<(&'static str, String, String)>,
}

impl From<&SubmissionView> for SubmissionSummary {
    fn from(s: &SubmissionView) -> SubmissionSummary {
        SubmissionSummary {
            id: s.id,
            state: s.state.clone(),
            repo: s.repo.clone(),
            base_sha: s.base.sha.clone(),
            base_subject: s.base.subject.clone(),
            head_sha: s.head.sha.clone(),
            head_subject: s.head.subject.clone(),
            submitter: s.submitter.clone(),
            created: format_time(s.created_at),
            jobs_finished: s.jobs.finished,
            jobs_failed: s.jobs.failed,
            jobs_total: s.jobs.total,
            max_runs: s.max_runs,
            skipped: s
                .skipped
                .iter()
                .map(|k| (k.kind.as_str(), k.name.clone(), k.reason.clone()))
                .collect(),
        }
    }
}

pub struct ComparisonRow {
    pub job: String,
    pub metric: String,
    pub base_mean: String,
    pub head_mean: String,
    pub change: String,
    pub verdict: String,
    pub base_runs: u32,
    pub head_runs: u32,
    /// The runs did not boot the commits (host backend): the verdict is A/A.
    pub not_a_commit_test: bool,
}

impl ComparisonRow {
    pub fn new(c: &ComparisonView, job: String) -> ComparisonRow {
        let absolute = kbot_core::metrics::shows_absolute_change(&c.metric);
        ComparisonRow {
            job,
            metric: c.metric.clone(),
            base_mean: c.base_mean.map(number).unwrap_or_default(),
            head_mean: c.head_mean.map(number).unwrap_or_default(),
            change: match c.change_percent {
                Some(x) if absolute => format!("{x:+.1}"),
                Some(x) => format!("{x:+.1}%"),
                None => String::new(),
            },
            verdict: c.verdict.clone(),
            base_runs: c.base_runs,
            head_runs: c.head_runs,
            not_a_commit_test: c.boot_note.is_some(),
        }
    }
}

/// A job whose runs did not all boot their commits, and why.
pub struct BootNote {
    pub job: String,
    pub note: String,
}

pub struct JobRow {
    pub id: i64,
    pub job: String,
    pub side: String,
    pub commit_short: String,
    pub run_index: u32,
    pub state: String,
    pub attempts: u32,
    pub agent: String,
}

impl JobRow {
    pub fn new(j: &JobView, job: String) -> JobRow {
        JobRow {
            id: j.id,
            job,
            side: j.side.clone(),
            commit_short: short(&j.commit),
            run_index: j.run_index,
            state: j.state.clone(),
            attempts: j.attempts,
            agent: j.agent.clone().unwrap_or_default(),
        }
    }
}

pub struct EventRow {
    pub at: String,
    pub job_id: i64,
    pub state: String,
    pub detail: String,
}

impl From<&EventView> for EventRow {
    fn from(e: &EventView) -> EventRow {
        EventRow {
            at: format_time(e.at),
            job_id: e.job_id,
            state: e.state.clone(),
            detail: e.detail.clone(),
        }
    }
}

pub struct AgentRow {
    pub name: String,
    pub tbox_group: String,
    pub machine: String,
    pub state: String,
    pub last_heartbeat: String,
}

impl From<&AgentRecord> for AgentRow {
    fn from(a: &AgentRecord) -> AgentRow {
        AgentRow {
            name: a.name.clone(),
            tbox_group: a.tbox_group.clone(),
            machine: machine_line(a),
            state: a.state.clone(),
            last_heartbeat: format_time(a.last_seen_at),
        }
    }
}

/// The machine under test with its arch, page size and kernel; for a qemu
/// agent the guest, then the host it runs on.
fn machine_line(a: &AgentRecord) -> String {
    let one = |hw: &kbot_core::api::Hardware| {
        format!(
            "{} ({}, {} pages, kernel {})",
            describe_machine(hw),
            hw.arch,
            kbot_core::needs::human_size(hw.page_size),
            hw.kernel
        )
    };
    match &a.host {
        Some(host) => format!("guest: {}; host: {}", one(&a.hardware), one(host)),
        None => one(&a.hardware),
    }
}

/// `testcase/path_params` (LKP's result-path naming of an atomic job).
pub fn job_label(job: Option<&AtomicJob>) -> String {
    match job {
        Some(job) => format!("{}/{}", job.testcase, job.path_params()),
        None => String::from("?"),
    }
}

fn short(sha: &str) -> String {
    sha.chars().take(SHORT_SHA).collect()
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_utc() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        // 2024-02-29 12:34:56 UTC, a leap day.
        assert_eq!(format_time(1_709_210_096_000), "2024-02-29 12:34:56 UTC");
        assert_eq!(format_time(-1000), "1969-12-31 23:59:59 UTC");
    }
}
