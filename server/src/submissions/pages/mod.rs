//! The submissions' dashboard pages: the list, one submission with its jobs,
//! events and compare tables ([`index`], [`submission`]), the comparison
//! page with a plot per metric ([`compare`]), and the forms that submit,
//! cancel and resubmit ([`forms`]).

pub mod compare;
pub mod forms;
mod verdicts;
mod views;

use askama::Template;
use axum::extract::State;

use crate::comparisons;
use crate::comparisons::kpi_result::{kpi_results, KpiResult};
use crate::jobs::job_label;
use crate::state::AppState;
use crate::submissions;
use crate::time::now_ms;
use crate::web::{render, Link, PageResult};
use kbot_api::submissions::{ComparisonView, MeasuredBy};
use verdicts::StoredComparison;
use views::{BootNote, ComparisonRow, EventRow, JobRow, SubmissionRow, SubmissionSummary};

#[derive(Template)]
#[template(path = "submissions.html")]
struct SubmissionsPage {
    submissions: Vec<SubmissionRow>,
}

#[derive(Template)]
#[template(path = "submission.html")]
struct SubmissionPage {
    s: SubmissionSummary,
    /// How the row behind the result line was decided, and the mode it was
    /// measured in with what that mode cannot see.
    decided: Option<Decided>,
    /// Its series, watch, bisections, regressions and reports.
    links: Vec<Link>,
    /// (job label, its profile page), one per atomic job.
    profiles: Vec<(String, String)>,
    /// When its last run may be done.
    eta: Option<String>,
    boot_notes: Vec<BootNote>,
    /// (job, why no enrolled agent can take its queued runs).
    waiting: Vec<(String, String)>,
    /// Queued runs served before this pair's first queued run.
    ahead: Option<i64>,
    /// The KPIs and what changed, biggest first.
    comparisons: Vec<ComparisonRow>,
    /// The other metrics (`same`, `unknown`), folded.
    folded: Vec<ComparisonRow>,
    tables: Vec<String>,
    jobs: Vec<JobRow>,
    events: Vec<EventRow>,
}

/// The result line's evidence: why its KPI row's verdict is what it is.
struct Decided {
    how: String,
    measured_by: Option<MeasuredBy>,
    /// A `same` in a mode blind to contention: below its sight.
    blind_same: bool,
}

impl Decided {
    /// From the row the result line names (else the first KPI row).
    fn of(rows: &[ComparisonView], kpi: Option<&KpiResult>, runs_cap: u32) -> Option<Decided> {
        let row = kpi
            .and_then(|k| rows.iter().find(|c| c.metric == k.metric))
            .or_else(|| {
                rows.iter()
                    .find(|c| kbot_core::metrics::report_rank(&c.metric) == 0)
            })?;
        let stored = StoredComparison::from_json(&row.detail);
        let cfg = comparisons::stats_config(runs_cap);
        Some(Decided {
            how: format!(
                "{}: {}",
                row.metric,
                stored.reason(cfg.min_runs, row.base_runs.min(row.head_runs) as usize)
            ),
            blind_same: row.blind_same(),
            measured_by: row.measured_by.clone(),
        })
    }
}

/// Most events shown on a submission page (the API has them all).
const PAGE_EVENTS: u32 = 500;

/// A pair's comparison rows split for the page: the KPIs and the
/// `different` metrics, per job, KPIs first and then the biggest change;
/// and the rest, by name.
fn changed_first(all: &[ComparisonView]) -> (Vec<&ComparisonView>, Vec<&ComparisonView>) {
    let is_kpi = |c: &ComparisonView| kbot_core::metrics::report_rank(&c.metric) == 0;
    let (mut shown, folded): (Vec<&ComparisonView>, Vec<&ComparisonView>) = all
        .iter()
        .partition(|c| is_kpi(c) || c.verdict == kbot_api::submissions::Verdict::Different);
    let size = |c: &ComparisonView| {
        c.change_percent
            .filter(|v| v.is_finite())
            .map_or(0.0, f64::abs)
    };
    shown.sort_by(|x, y| {
        (x.job_index, !is_kpi(x))
            .cmp(&(y.job_index, !is_kpi(y)))
            .then(size(y).total_cmp(&size(x)))
            .then(x.metric.cmp(&y.metric))
    });
    (shown, folded)
}

/// `GET /submissions`: the newest submissions.
pub async fn index(State(state): State<AppState>) -> PageResult {
    let list = submissions::list_submissions(&state.db, 100, None).await?;
    let ids: Vec<i64> = list.iter().map(|s| s.id).collect();
    let kpis = kpi_results(&state.db, &ids).await?;
    render(&SubmissionsPage {
        submissions: list
            .iter()
            .map(|s| SubmissionRow::new(s, kpis.get(&s.id)))
            .collect(),
    })
}

/// `GET /submissions/{id}` (routed through the dashboard, which adds the
/// `links` to the features above this one).
pub async fn submission(state: &AppState, id: i64, links: Vec<Link>) -> PageResult {
    let detail = submissions::detail(state, id).await?;
    let stored = submissions::comparisons(&state.db, id).await?;
    let events = submissions::events(&state.db, id, 0, PAGE_EVENTS).await?;
    let tables = comparisons::submission_tables(state, id).await?;
    let booted = comparisons::booted_commits_by_position(&state.db, id).await?;
    let kpis = kpi_results(&state.db, &[id]).await?;
    let (shown, folded) = changed_first(&stored);
    let ahead = crate::jobs::runs_ahead(&state.db, id).await?;
    let eta = crate::jobs::eta(&state.db, id, ahead, now_ms()).await?;
    let label = |index: u32| job_label(detail.atomic_jobs.get(index as usize));
    render(&SubmissionPage {
        s: SubmissionSummary::new(&detail.submission, kpis.get(&id)),
        decided: Decided::of(&stored, kpis.get(&id), detail.submission.max_runs),
        links,
        profiles: (0..detail.atomic_jobs.len())
            .map(|i| {
                (
                    label(i as u32),
                    format!("/submissions/{id}/jobs/{i}/profile"),
                )
            })
            .collect(),
        eta: eta.map(|e| e.text()),
        boot_notes: booted
            .iter()
            .filter_map(|(position, b)| {
                Some(BootNote {
                    job: label(u32::try_from(*position).ok()?),
                    note: b.note()?,
                })
            })
            .collect(),
        ahead,
        waiting: detail
            .waiting
            .iter()
            .map(|w| (label(w.job_index), w.reason.clone()))
            .collect(),
        comparisons: shown
            .iter()
            .map(|c| ComparisonRow::new(c, label(c.job_index)))
            .collect(),
        folded: folded
            .iter()
            .map(|c| ComparisonRow::new(c, label(c.job_index)))
            .collect(),
        tables: tables
            .iter()
            .map(comparisons::PairComparison::table)
            .collect(),
        jobs: detail
            .jobs
            .iter()
            .map(|j| JobRow::new(j, label(j.job_index)))
            .collect(),
        events: events.iter().map(EventRow::from).collect(),
    })
}
