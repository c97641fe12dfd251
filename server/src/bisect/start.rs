//! From a settled pair to what follows it: a bisection when a KPI regressed
//! across more than one commit, else a report; and the regression record.

use futures::future::BoxFuture;
use kbot_core::job::AtomicJob;
use kbot_core::metrics::Impact;
use kbot_core::stats::{MetricComparison, Outcome};

use super::store;
use crate::comparisons::{PairComparison, Settled};
use crate::db::Tx;
use crate::error::Result;
use crate::regressions;
use crate::repos::StoredCommit;
use crate::state::AppState;
use crate::submissions;

/// The KPI regression that should start a bisection, if any: the first KPI
/// the job acts on ([`kbot_core::stats::Comparison::acting`]: `different`
/// under the job's one false-alarm budget for all its KPIs) whose change
/// is a regression.
pub fn regressed_kpi(pc: &PairComparison) -> Option<&MetricComparison> {
    pc.comparison
        .acting()
        .find(|m| m.kpi && m.kbot.outcome == Outcome::Different && m.impact == Impact::Regression)
}

/// Whether `base..head` is a single commit: nothing to bisect.
pub fn adjacent(base: &StoredCommit, head: &StoredCommit) -> bool {
    head.view.parents.contains(&base.sha)
}

/// The job's identity for de-duplication: testcase and axes.
fn job_key(job: &AtomicJob) -> String {
    let axes: Vec<String> = job.axes().iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}/{}", job.testcase, axes.join(","))
}

/// Starts a bisection of `metric` between the pair's base (good) and head
/// (bad), in the caller's transaction. `None` when the same range, metric,
/// tbox group and job is already being bisected.
pub async fn start(
    tx: &mut Tx,
    submission_id: i64,
    pc: &PairComparison,
    metric: &str,
) -> Result<Option<i64>> {
    let origin = store::origin_job(tx, pc.atomic_job_id).await?;
    let tbox_group = origin.tbox_group.clone().unwrap_or_default();
    let key = job_key(&pc.job);
    let runs_cap = origin.runs_cap.max(1);
    let dedup_key = format!(
        "{}/{}..{}/{key}/{tbox_group}/{metric}",
        pc.head.repo_id, pc.base.sha, pc.head.sha
    );
    let Some(id) = store::insert(
        tx,
        &store::NewBisection {
            repo_id: pc.head.repo_id,
            origin_submission_id: submission_id,
            origin_atomic_job_id: pc.atomic_job_id,
            good_commit_id: pc.base.id,
            bad_commit_id: pc.head.id,
            metric,
            tbox_group: &tbox_group,
            job_key: &key,
            dedup_key: &dedup_key,
            runs_cap,
        },
    )
    .await?
    else {
        tracing::info!(submission_id, %dedup_key, "already being bisected");
        return Ok(None);
    };
    let probe_submission = submissions::insert_submission(
        tx,
        &submissions::NewSubmission {
            user_id: origin.user_id,
            origin: crate::jobs::Origin::BisectProbe,
            bisect: false,
            watch_id: None,
            branch: None,
            repo_id: pc.head.repo_id,
            job_name: format!("bisect {}", pc.job.testcase),
            job_file: &origin.job_file,
            // Probes run one atomic job the origin queued: nothing skipped.
            skipped: crate::db::JsonText(&[]),
            base_commit_id: pc.base.id,
            head_commit_id: pc.head.id,
            priority: origin.priority,
            runs_cap,
            created_at: crate::time::now_ms(),
        },
    )
    .await?;
    let probe_job = crate::jobs::add_pinned_atomic_job(
        tx,
        probe_submission,
        &pc.job,
        &tbox_group,
        origin.preferred_agent_id,
    )
    .await?;
    store::set_probe(tx, id, probe_submission, probe_job).await?;
    tracing::info!(
        bisection = id,
        submission_id,
        good = %pc.base.sha,
        bad = %pc.head.sha,
        metric,
        "bisection started"
    );
    Ok(Some(id))
}

/// What follows from a settled pair, in the transaction that records its
/// verdict: a bisection when a user or watch pair regressed across more than
/// one commit (and the submission asked for it), else a report of the pair
/// when it is reportable. Bisection and verification pairs are read by their
/// bisection instead; a pair that did not boot its commits blames none.
pub async fn on_pair_settled(tx: &mut Tx, state: &AppState, settled: &Settled<'_>) -> Result<()> {
    let Settled {
        submission_id,
        pc,
        booted,
        head_patch_id,
    } = *settled;
    let origin = store::origin_job(tx, pc.atomic_job_id).await?;
    if !origin.origin.judged() {
        return Ok(());
    }
    if !booted.tests_the_commits() {
        tracing::info!(
            submission_id,
            atomic_job_id = pc.atomic_job_id,
            note = booted.note().unwrap_or_default(),
            "no report: the runs did not boot their commits"
        );
        return Ok(());
    }
    let regressed = regressed_kpi(pc);
    let bisects = origin.bisect && !adjacent(&pc.base, &pc.head);
    let (bisection_id, report_id) = match regressed {
        Some(m) if bisects => {
            let Some(id) = start(tx, submission_id, pc, &m.metric).await? else {
                // The range is being bisected already; its regression is recorded.
                return Ok(());
            };
            (Some(id), None)
        }
        _ => {
            let mail = &state.config.mail;
            // A regression's culprit is its change, found again elsewhere
            // (picked, landed, posted anew) by patch-id.
            let culprit = regressed
                .map(|_| crate::mail::culprit::key(head_patch_id, pc.head.repo_id, &pc.head.sha));
            let report =
                crate::mail::enqueue_pair_report(tx, mail, submission_id, pc, culprit).await?;
            (None, report)
        }
    };
    // No regression: an improvement's report, or nothing, was written.
    let Some(m) = regressed else {
        return Ok(());
    };
    let regression = regressions::NewRegression {
        repo_id: pc.head.repo_id,
        submission_id,
        atomic_job_id: pc.atomic_job_id,
        metric: &m.metric,
        tbox_group: origin.tbox_group.as_deref().unwrap_or_default(),
        // Perf-profile and `%` stats change in points, not percent.
        change_pct: Some(m.change).filter(|c| c.is_finite() && !m.change_is_absolute),
        bisection_id,
        report_id,
    };
    regressions::record(tx, &regression).await?;
    Ok(())
}

/// [`on_pair_settled`] as the comparison worker's
/// [`crate::comparisons::OnSettled`].
pub fn settled<'a>(
    tx: &'a mut Tx,
    state: &'a AppState,
    settled: &'a Settled<'a>,
) -> BoxFuture<'a, Result<()>> {
    Box::pin(on_pair_settled(tx, state, settled))
}
