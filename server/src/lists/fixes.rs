//! Fix tracking: a commit on a watched branch whose message names an open
//! regression's report (its `Closes:` or `Link:` line carries the report's
//! Message-ID), or whose subject a `#kbot fix:` command gave, is rerun
//! against the first bad commit; the regression is marked `fixed` only when
//! the KPI comes back, and the report's thread hears either way
//! ([`super::commands::settle_all`] answers).

use std::sync::atomic::{AtomicI64, Ordering};

use super::recheck::{self, Reported};
use super::store::{self, NewCommand};
use crate::error::Result;
use crate::repos;
use crate::state::AppState;
use crate::time::now_ms;

/// How often the watched branches are searched (a `git log --grep` each).
const LOOK_EVERY_MS: i64 = 10_000;

/// A fix is looked for in commits up to this long before its report.
const BEFORE_REPORT_MS: i64 = 24 * 3600 * 1000;

/// Searches the watched branches for fixes of open regressions.
pub async fn look(state: &AppState) -> Result<()> {
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = now_ms();
    if now - LAST.load(Ordering::Relaxed) < LOOK_EVERY_MS {
        return Ok(());
    }
    LAST.store(now, Ordering::Relaxed);
    let open = recheck::open(&state.db).await?;
    if open.is_empty() {
        return Ok(());
    }
    let subjects = store::fix_subjects(&state.db).await?;
    let watches = crate::watches::list(state).await?;
    for r in &open {
        let mut needles = vec![r.report_message_id.clone()];
        needles.extend(
            subjects
                .iter()
                .filter(|(id, _)| *id == r.regression_id)
                .map(|(_, s)| s.clone()),
        );
        for w in watches.iter().filter(|w| w.state == "active") {
            let repo = repos::get_repo(&state.db, &w.repo).await?;
            if repo.id != r.repo_id {
                continue;
            }
            for needle in &needles {
                let since = (r.report_created_at - BEFORE_REPORT_MS) / 1000;
                let mirror = repos::mirror_for(state, &repo.name);
                let found = match mirror.grep_log(&w.branch, since, needle).await {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::warn!(watch = w.id, error = %e, "searching for fixes failed");
                        continue;
                    }
                };
                for sha in found {
                    recheck_fix(state, r, &repo, &sha).await?;
                }
            }
        }
    }
    Ok(())
}

/// Queues the fix against the first bad commit, once per fix and regression.
async fn recheck_fix(
    state: &AppState,
    r: &Reported,
    repo: &repos::RepoRow,
    sha: &str,
) -> Result<()> {
    if store::command_exists(&state.db, r.regression_id, "closes", sha).await? {
        return Ok(());
    }
    let fix = repos::resolve_commit(state, repo, sha).await?;
    let first_bad = r.first_bad(state).await?;
    if fix.id == first_bad.id {
        return Ok(());
    }
    let mut tx = state.db.begin().await?;
    let submission = recheck::queue(state, &mut tx, r, &first_bad, &fix).await?;
    let message_id = format!("{sha}/regression-{}", r.regression_id);
    store::insert_command(
        &mut tx,
        &NewCommand {
            list_id: None,
            message_id: &message_id,
            sender: &fix.view.author_email,
            command: "closes",
            argument: sha,
            report_id: Some(r.report_id),
            regression_id: Some(r.regression_id),
            state: "testing",
            outcome: &format!(
                "rerunning the job on {sha} against the first bad commit (submission {submission})"
            ),
            submission_id: Some(submission),
        },
    )
    .await?;
    tx.commit().await?;
    state.wake_lessees();
    tracing::info!(regression = r.regression_id, fix = %sha, submission, "a fix landed; rechecking");
    Ok(())
}
