//! Bisections as the API, the CLI and the dashboard show them.

use super::samples::{metric_values, Samples};
use super::store::{self, BisectionRow, CommitRuns};
use crate::access::Reader;
use crate::error::Result;
use crate::mail::outbox;
use crate::repos::commit_by_id;
use crate::state::AppState;
use crate::time::now_ms;
use kbot_api::bisections::{BisectionDetail, BisectionView, StepView};

pub async fn list(state: &AppState, limit: u32, reader: Reader) -> Result<Vec<BisectionView>> {
    let rows = store::list(&state.db, i64::from(limit.clamp(1, 500))).await?;
    let mut out = Vec::with_capacity(rows.len());
    for b in &rows {
        out.push(view(state, b, reader).await?);
    }
    Ok(out)
}

pub async fn detail(state: &AppState, id: i64, reader: Reader) -> Result<BisectionDetail> {
    let b = store::get(&state.db, id).await?;
    let samples = Samples::load(state, &b).await?;
    Ok(BisectionDetail {
        bisection: view(state, &b, reader).await?,
        steps: steps(state, &b, &samples).await?,
        good_samples: samples.good,
        bad_samples: samples.bad,
    })
}

/// `b` as `reader` may see it: its report's Message-ID only once the
/// report is public, unless the reader is signed in.
pub async fn view(state: &AppState, b: &BisectionRow, reader: Reader) -> Result<BisectionView> {
    let read = state.db.read();
    let first_bad = match b.first_bad_commit_id {
        Some(id) => Some(commit_by_id(read, id).await?.view),
        None => None,
    };
    let (builds, runs) = store::effort(&state.db, b).await?;
    let steps = store::steps(&state.db, b.id).await?.len();
    let end = b.finished_at.unwrap_or_else(now_ms);
    let report = store::report_of(&state.db, b.id).await?;
    Ok(BisectionView {
        id: b.id,
        repo: b.repo_name.clone(),
        state: b.state,
        good: commit_by_id(read, b.good_commit_id).await?.sha,
        bad: commit_by_id(read, b.bad_commit_id).await?.sha,
        metric: b.metric.clone(),
        tbox_group: b.tbox_group.clone(),
        job_name: b.job_key.clone(),
        origin_submission: b.origin_submission_id,
        probe_submission: b.probe_submission_id,
        verify_submission: b.verify_submission_id,
        first_bad,
        report_id: report.as_ref().map(|(id, _, _)| *id),
        report: report
            .filter(|(_, _, st)| outbox::readable_text(reader, st))
            .map(|(_, m, _)| m),
        duplicate_of: b.duplicate_of,
        reason: b.reason.clone(),
        remaining: b.remaining.split_whitespace().map(str::to_owned).collect(),
        steps: u32::try_from(steps).unwrap_or(u32::MAX),
        builds: u32::try_from(builds).unwrap_or(0),
        runs: u32::try_from(runs).unwrap_or(0),
        wall_secs: u64::try_from((end - b.created_at) / 1000).unwrap_or(0),
        created_at: b.created_at,
        finished_at: b.finished_at,
    })
}

async fn steps(state: &AppState, b: &BisectionRow, samples: &Samples) -> Result<Vec<StepView>> {
    let rows = store::steps(&state.db, b.id).await?;
    Ok(rows
        .into_iter()
        .map(|s| {
            let none = CommitRuns::default();
            let r = samples.probes.get(&s.commit_id).unwrap_or(&none);
            StepView {
                index: u32::try_from(s.idx).unwrap_or(0),
                sha: s.sha,
                subject: s.subject,
                state: s.state,
                runs: u32::try_from(r.finished.len()).unwrap_or(u32::MAX),
                failed_runs: r.failed,
                samples: metric_values(r, &b.metric),
                failure: r.failure.clone(),
                change_percent: s.change_pct,
                detail: s.detail,
                started_at: s.started_at,
                finished_at: s.finished_at,
            }
        })
        .collect())
}
