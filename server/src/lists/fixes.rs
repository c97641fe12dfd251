//! Fix tracking: a commit on a watched branch whose message names an open
//! regression's report (its `Closes:` or `Link:` line carries the report's
//! Message-ID), or whose subject line is exactly a `#kbot fix:` title (the
//! first such commit, once per command), is rerun
//! against the first bad commit; the regression is marked `fixed` only when
//! the KPI comes back, and the report's thread hears either way
//! ([`super::commands::pair_ended`] answers once the pair ended).

use std::time::Duration;

use kbot_api::lists::{CommandName, CommandState};

use super::recheck::{self, Reported};
use super::store::{self, NewCommand};
use crate::error::Result;
use crate::repos;
use crate::state::AppState;

/// How often the watched branches are searched (a `git log` each).
pub const LOOK_EVERY: Duration = Duration::from_secs(10);

/// A fix is looked for in commits up to this long before its report.
const BEFORE_REPORT_MS: i64 = 24 * 3600 * 1000;

/// Searches the watched branches for fixes of open regressions.
pub async fn look(state: &AppState) -> Result<()> {
    let open = recheck::open(&state.db).await?;
    if open.is_empty() {
        return Ok(());
    }
    let titles = store::fix_titles_open(&state.db).await?;
    let watches = crate::watches::list(state).await?;
    for r in &open {
        for w in watches
            .iter()
            .filter(|w| w.state == kbot_api::watches::SourceState::Active)
        {
            let repo = repos::get_repo(&state.db, &w.repo).await?;
            if repo.id != r.repo_id {
                continue;
            }
            let since = (r.report_created_at - BEFORE_REPORT_MS) / 1000;
            let mirror = repos::mirror_for(state, &repo.name);
            // A `Closes:`/`Link:` naming the report: every such commit.
            match mirror
                .grep_log(&w.branch, since, &r.report_message_id)
                .await
            {
                Ok(found) => {
                    for sha in found {
                        let key = format!("{sha}/regression-{}", r.regression_id);
                        recheck_fix(state, r, &repo, &sha, &key).await?;
                    }
                }
                Err(e) => tracing::warn!(watch = w.id, error = %e, "searching for fixes failed"),
            }
            // A `#kbot fix:` title: the first commit with exactly that
            // subject, one rerun per command.
            for t in titles.iter().filter(|t| t.regression_id == r.regression_id) {
                match mirror.titled(&w.branch, since, &t.title).await {
                    Ok(found) => {
                        if let Some(sha) = found.last() {
                            let key = format!("fix-{}/regression-{}", t.id, r.regression_id);
                            recheck_fix(state, r, &repo, sha, &key).await?;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(watch = w.id, error = %e, "searching for fix titles failed")
                    }
                }
            }
        }
    }
    Ok(())
}

/// Queues the fix against the first bad commit once per `key`: the record
/// is made first, and the pair queued only when it was new, in one
/// transaction.
async fn recheck_fix(
    state: &AppState,
    r: &Reported,
    repo: &repos::RepoRow,
    sha: &str,
    key: &str,
) -> Result<()> {
    if store::command_exists(&state.db, r.regression_id, CommandName::Closes, sha).await? {
        return Ok(());
    }
    let fix = repos::resolve_commit(state, repo, sha).await?;
    let first_bad = r.first_bad(state).await?;
    if fix.id == first_bad.id {
        return Ok(());
    }
    let mut tx = state.db.begin().await?;
    let Some(id) = store::insert_command(
        &mut tx,
        &NewCommand {
            list_id: None,
            message_id: key,
            sender: &fix.view.author_email,
            command: CommandName::Closes,
            argument: sha,
            report_id: Some(r.report_id),
            regression_id: Some(r.regression_id),
            state: CommandState::Testing,
            outcome: &format!("rerunning the job on {sha} against the first bad commit"),
            submission_id: None,
            trusted: false,
        },
    )
    .await?
    else {
        return Ok(());
    };
    let submission = recheck::queue(state, &mut tx, r, &first_bad, &fix).await?;
    store::command_taken(
        &mut tx,
        id,
        (
            CommandState::Testing,
            &format!(
                "rerunning the job on {sha} against the first bad commit (submission {submission})"
            ),
        ),
        Some(submission),
    )
    .await?;
    tx.commit().await?;
    state.wake_lessees();
    tracing::info!(regression = r.regression_id, fix = %sha, submission, "a fix landed; rechecking");
    Ok(())
}
