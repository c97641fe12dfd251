//! What the templates show, already formatted: the API types turned into
//! rows of strings.

use kbot_core::table::number;

use crate::comparisons::kpi_result::{KpiResult, ResultLine};
use crate::time::format_time;
use crate::web::{short_sha, SHORT_SHA};
use kbot_api::submissions::{ComparisonView, EventView, JobView, SubmissionView};

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
    pub result: ResultLine,
}

impl SubmissionRow {
    pub fn new(s: &SubmissionView, kpi: Option<&KpiResult>) -> SubmissionRow {
        SubmissionRow {
            result: ResultLine::of_submission(s, kpi),
            id: s.id,
            repo: s.repo.clone(),
            base_short: short_sha(&s.base.sha, SHORT_SHA),
            head_short: short_sha(&s.head.sha, SHORT_SHA),
            head_subject: s.head.subject.clone(),
            state: s.state.to_string(),
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
    pub result: ResultLine,
    /// `user`, `watch`, `bisect` (a bisection's probes) or `verify`.
    pub kind: String,
}

impl SubmissionSummary {
    pub fn new(s: &SubmissionView, kpi: Option<&KpiResult>) -> SubmissionSummary {
        SubmissionSummary {
            result: ResultLine::of_submission(s, kpi),
            kind: s.kind.to_string(),
            id: s.id,
            state: s.state.to_string(),
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
            verdict: c.verdict.to_string(),
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
            side: j.side.to_string(),
            commit_short: short_sha(&j.commit, SHORT_SHA),
            run_index: j.run_index,
            state: j.state.to_string(),
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
            state: e.state.to_string(),
            detail: crate::access::paths_for_viewer(&e.detail),
        }
    }
}
