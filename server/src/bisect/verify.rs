//! The end of a bisection: the first bad commit run again against its
//! parent in a fresh `verify` pair; a confirmed regression is reported once
//! per patch-id (a finding on another tbox group or job is a section of
//! that one report: `mail::culprit`), the same patch again on the same job,
//! metric and group is a duplicate, anything else is `not_confirmed`.

use kbot_core::job::AtomicJob;
use kbot_core::metrics::Impact;
use kbot_core::stats::{MetricComparison, Outcome};

use super::store::{self, BisectionRow, BisectionState, Conclusion};
use crate::comparisons::{self, PairComparison};
use crate::db::Tx;
use crate::error::Result;
use crate::jobs::lifecycle::{self, Pinned};
use crate::jobs::SubmissionState;
use crate::regressions;
use crate::repos::{self, StoredCommit};
use crate::state::AppState;
use crate::submissions::{self, NewPair};

/// The first bad commit's parent and the job to run on both.
pub(super) struct VerificationPair {
    parent: StoredCommit,
    job: AtomicJob,
    origin: store::OriginJob,
}

pub(super) async fn verification_pair(
    state: &AppState,
    b: &BisectionRow,
    first_bad: &StoredCommit,
) -> Result<VerificationPair> {
    let repo = repos::repo_by_id(&state.db, b.repo_id).await?;
    let parent = submissions::parent_of(state, &repo, first_bad).await?;
    let probe_job = b
        .probe_atomic_job_id
        .ok_or_else(|| anyhow::anyhow!("bisection {} has no probe job", b.id))?;
    let job = store::job_spec(&state.db, probe_job).await?;
    let mut conn = state.db.read().acquire().await?;
    let origin = store::origin_job(&mut conn, b.origin_atomic_job_id).await?;
    Ok(VerificationPair {
        parent,
        job,
        origin,
    })
}

/// Queues the fresh A/B of the first bad commit against its parent, pinned
/// to the bisection's tbox group.
pub(super) async fn queue_verification(
    state: &AppState,
    tx: &mut Tx,
    b: &BisectionRow,
    first_bad: &StoredCommit,
    pair: &VerificationPair,
) -> Result<i64> {
    let jobs = [pair.job.clone()];
    let id = submissions::queue_pair(
        state,
        tx,
        NewPair {
            by: submissions::Submitter::User(pair.origin.user_id),
            repo_id: b.repo_id,
            job_file: &pair.origin.job_file,
            atomic_jobs: &jobs,
            // One atomic job the original submission ran: nothing skipped.
            skipped: &[],
            base: &pair.parent,
            head: first_bad,
            priority: pair.origin.priority,
            max_runs: u32::try_from(b.runs_cap).unwrap_or(1),
            origin: crate::jobs::Origin::Verify,
            bisect: false,
            watch_id: None,
            branch: None,
        },
    )
    .await?;
    let pinned = Pinned::Submission(id);
    lifecycle::pin(tx, pinned, &b.tbox_group, pair.origin.preferred_agent_id).await?;
    Ok(id)
}

/// Once the verification pair is settled: report, link to an earlier
/// report of the same patch, or say it did not reproduce.
pub(super) async fn check_verification(state: &AppState, b: &BisectionRow) -> Result<()> {
    let Some(verify_id) = b.verify_submission_id else {
        return Err(anyhow::anyhow!("bisection {} verifies nothing", b.id).into());
    };
    let verify_state = store::submission_state(&state.db, verify_id).await?;
    if verify_state == SubmissionState::Active {
        return Ok(());
    }
    let atomic_job_id = store::atomic_job_of(&state.db, verify_id).await?;
    let compared = comparisons::compare_pair(state, atomic_job_id).await?;
    let confirmed = compared.as_ref().and_then(|pc| {
        pc.comparison
            .metrics
            .iter()
            .find(|m| m.metric == b.metric)
            .filter(|m| m.kbot.outcome == Outcome::Different && m.impact == Impact::Regression)
    });
    let mut conclusion = Conclusion::ended(BisectionState::NotConfirmed);
    let mut report = None;
    let mut duplicate = None;
    match (confirmed, &compared) {
        (Some(m), Some(pc)) => {
            let patch_id = repos::patch_id(state, &b.repo_name, &pc.head.sha).await;
            let earlier = match &patch_id {
                Some(p) => store::reported_with_patch(&state.db, p, b).await?,
                None => None,
            };
            conclusion.patch_id = patch_id;
            if let Some(earlier) = earlier {
                duplicate = Some((earlier, pc, m));
                conclusion.state = BisectionState::Duplicate;
                conclusion.duplicate_of = Some(earlier);
                conclusion.reason = Some(format!(
                    "the same patch was reported by bisection {earlier}: no new mail"
                ));
            } else {
                conclusion.state = BisectionState::Reported;
                report = Some((pc, m));
            }
        }
        _ => {
            conclusion.state = BisectionState::NotConfirmed;
            conclusion.reason = Some(not_confirmed_reason(
                verify_state,
                compared.as_ref(),
                &b.metric,
            ));
        }
    }
    // Outside the transaction: git reads where the duplicate landed.
    let landing = match duplicate {
        Some((_, pc, _)) => Some(where_landed(state, b, &pc.head).await?),
        None => None,
    };
    let mut tx = state.db.begin().await?;
    if !store::take(&mut tx, b).await? {
        return Ok(());
    }
    if let Some((pc, m)) = report {
        let still_on = still_on(state, b, &pc.head).await?;
        let culprit =
            crate::mail::culprit::key(conclusion.patch_id.as_deref(), b.repo_id, &pc.head.sha);
        let blame = crate::mail::Blame {
            submission_id: verify_id,
            pc,
            kpi: m,
            bisection_id: Some(b.id),
            still_on,
            culprit: Some(culprit),
        };
        let mail = &state.config.mail;
        if let Some(report) = crate::mail::enqueue_bisection_report(&mut tx, mail, &blame).await? {
            regressions::link_report(&mut tx, b.id, report).await?;
        }
    }
    if conclusion.state == BisectionState::Duplicate {
        let reason = conclusion.reason.as_deref().unwrap_or_default();
        regressions::mark_by_robot(&mut tx, b.id, regressions::TriageState::Duplicate, reason)
            .await?;
        if let (Some((earlier, pc, m)), Some(landing)) = (duplicate, &landing) {
            let found = Duplicate {
                earlier,
                commit: &pc.head,
                verified: m,
                patch_id: conclusion.patch_id.as_deref(),
            };
            answer_duplicate(state, &mut tx, b, &found, landing).await?;
        }
    }
    store::conclude(&mut tx, b, &conclusion).await?;
    tx.commit().await?;
    tracing::info!(
        bisection = b.id,
        state = conclusion.state.as_str(),
        "bisection ended"
    );
    Ok(())
}

/// Why a verification did not confirm the regression.
fn not_confirmed_reason(
    verify_state: SubmissionState,
    pc: Option<&PairComparison>,
    metric: &str,
) -> String {
    match pc.and_then(|pc| pc.comparison.metrics.iter().find(|m| m.metric == metric)) {
        _ if verify_state == SubmissionState::Cancelled => "the verification was cancelled".into(),
        None => {
            "the verification pair has no finished run on a side (build or boot failure)".into()
        }
        Some(m) => format!(
            "the first bad commit against its parent: {} {:+.1}% (not a confirmed regression)",
            m.kbot.outcome.as_str(),
            m.change
        ),
    }
}

/// A confirmed regression whose patch was reported by bisection `earlier`.
struct Duplicate<'a> {
    earlier: i64,
    commit: &'a StoredCommit,
    verified: &'a MetricComparison,
    patch_id: Option<&'a str>,
}

/// The tree a commit is on, and its branches that hold it.
struct Landed {
    tree: String,
    branches: Vec<String>,
}

async fn where_landed(state: &AppState, b: &BisectionRow, commit: &StoredCommit) -> Result<Landed> {
    let repo = repos::repo_by_id(&state.db, b.repo_id).await?;
    let branches = match repos::mirror_for(state, &repo.name)
        .branches_containing(&commit.sha)
        .await
    {
        Ok(branches) => branches,
        Err(e) => {
            // The answer still names the tree and the commit.
            tracing::warn!(bisection = b.id, sha = %commit.sha, error = %e, "no branches");
            Vec::new()
        }
    };
    Ok(Landed {
        tree: crate::repos::public_tree(&state.config.mail, &repo.name, &repo.url),
        branches,
    })
}

/// The report that stands takes the duplicate: its regression is linked to
/// that report and to the regression reported, and the report's author
/// hears where the change was found again ([`crate::mail::landed`]).
async fn answer_duplicate(
    state: &AppState,
    tx: &mut Tx,
    b: &BisectionRow,
    found: &Duplicate<'_>,
    landed: &Landed,
) -> Result<()> {
    let Some(report) = crate::mail::landed::report_of_bisection(tx, found.earlier).await? else {
        return Ok(());
    };
    regressions::link_report(tx, b.id, report.id).await?;
    regressions::robot_duplicate_of(tx, b.id, found.earlier).await?;
    let landing = crate::mail::landed::Landing {
        commit: found.commit,
        tree: &landed.tree,
        branches: &landed.branches,
        patch_id: found.patch_id,
        measured: found.verified,
    };
    crate::mail::landed::answer(tx, &state.config.mail, &landing, &report).await
}

/// `[still regression on repo/branch head]`: the bad end, when it is a later
/// commit than the first bad one.
async fn still_on(
    state: &AppState,
    b: &BisectionRow,
    first_bad: &StoredCommit,
) -> Result<Vec<kbot_core::report::StillOn>> {
    let bad_end = repos::commit_by_id(state.db.read(), b.bad_commit_id).await?;
    if bad_end.id == first_bad.id {
        return Ok(Vec::new());
    }
    let repo = repos::repo_by_id(&state.db, b.repo_id).await?;
    Ok(vec![kbot_core::report::StillOn {
        tree_branch: format!("{}/{}", repo.name, repo.default_branch),
        sha: bad_end.sha,
    }])
}
