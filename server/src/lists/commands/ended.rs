//! A recheck pair ended: the commands it tested answered, a regression
//! fixed or still there.

use std::fmt::Write;

use kbot_api::lists::{CommandName, CommandState};

use crate::error::Result;
use crate::lists::answers;
use crate::lists::recheck::{self, Found, Reported};
use crate::lists::store;
use crate::mail::thread::{self, Answer, ThreadPlace};
use crate::regressions::TriageState;
use crate::state::AppState;

/// A recheck pair ended (`robot::ended`): answers the commands (and found
/// fixes) it tested.
pub async fn pair_ended(state: &AppState, submission_id: i64) -> Result<()> {
    for c in store::testing_commands_of(&state.db, submission_id).await? {
        let Some(regression_id) = c.regression_id else {
            continue;
        };
        let r = recheck::by_regression(&state.db, regression_id).await?;
        let Some(found) = recheck::found(state, c.submission_id, &r.metric).await? else {
            continue;
        };
        let place = match c.list_id {
            // An untrusted sender's retest is answered under the report,
            // never To the mail's From.
            Some(list_id) if c.trusted != 0 => {
                let l = store::get(&state.db, list_id).await?;
                answers::message_place(state, &l, &c.message_id).await?
            }
            _ => r.place(),
        };
        conclude(state, &c, &r, &place, found.as_ref()).await?;
    }
    Ok(())
}

/// Whether the head (a fix) brought the metric back: `different` in the
/// good direction against the first bad commit.
pub fn recovers(found: &Found) -> bool {
    found.outcome == kbot_core::stats::Outcome::Different
        && found.impact == kbot_core::metrics::Impact::Improvement
}

async fn conclude(
    state: &AppState,
    c: &store::RunningCommand,
    r: &Reported,
    place: &ThreadPlace,
    found: Option<&Found>,
) -> Result<()> {
    let mut text = String::new();
    let fixed = match found {
        None => {
            let _ = write!(text, "The pair (submission {}) has no finished run on a side: the kernel did not build or boot.", c.submission_id);
            false
        }
        Some(f) if c.command == CommandName::Retest => {
            let again = f.outcome == kbot_core::stats::Outcome::Different
                && f.impact == kbot_core::metrics::Impact::Regression;
            let _ = write!(
                text,
                "{}\n\nThe regression {}.",
                f.line(&r.metric),
                if again {
                    "reproduces"
                } else {
                    "does not reproduce this time"
                }
            );
            false
        }
        Some(f) => {
            let fixed = recovers(f);
            let _ = write!(
                text,
                "{}\n\n{}",
                f.line(&r.metric),
                if fixed {
                    "The change brings the metric back: the regression is fixed by it."
                } else {
                    "The change does not bring the metric back: the regression is still there."
                }
            );
            fixed
        }
    };
    let mut tx = state.db.begin().await?;
    if fixed && c.command == CommandName::Closes {
        let note = format!(
            "fixed by {} (verified by kbot, submission {})",
            c.argument, c.submission_id
        );
        crate::regressions::change_in(&mut tx, r.regression_id, None, TriageState::Fixed, &note)
            .await?;
        let _ = write!(text, "\nRegression {} is marked fixed.", r.regression_id);
    }
    store::command_done(&mut tx, c.id, CommandState::Tested, &text).await?;
    let heading = match c.command {
        CommandName::Closes => format!("Commit {} says it closes this report. kbot reran the job on it against the first bad commit:\n\n", c.argument),
        _ => format!("> #kbot {} {}\n\n", c.command, c.argument),
    };
    let answer = Answer {
        place,
        identity_key: format!("command/{}/tested", c.id),
        body: format!("{heading}{text}\n{}", thread::signature(&state.config.mail)),
        submission_id: Some(c.submission_id),
    };
    thread::enqueue_answer(&mut tx, &state.config.mail, &answer).await?;
    tx.commit().await?;
    tracing::info!(command = c.id, fixed, "command pair answered");
    Ok(())
}
