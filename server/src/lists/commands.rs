//! `#kbot` command lines in replies to kbot's regression reports, acted on
//! and answered in the thread.
//!
//! The policy (also in `docs/lists.md`): a command is taken only from an
//! address the report was sent to (the author, the committer, the Cc'd
//! people; a list address cannot send mail itself). kbot cannot tell a
//! forged From line from a real one: the policy keeps strangers from
//! spending machine time or closing reports by accident, it is no
//! authentication. Every change of a regression's state keeps the sender as
//! who asked, in the regression's history.

use std::fmt::Write;

use super::answers;
use super::message::{self, Command, ListMessage};
use super::recheck::{self, Found, Reported};
use super::store::{self, ListRow, NewCommand};
use crate::error::Result;
use crate::mail::thread::{self, Answer, ThreadPlace};
use crate::regressions::TriageState;
use crate::repos;
use crate::state::AppState;

/// What taking one command did.
struct Taken {
    name: &'static str,
    argument: String,
    /// `done`, `refused` or `testing`.
    state: &'static str,
    outcome: String,
    submission_id: Option<i64>,
}

impl Taken {
    fn done(name: &'static str, argument: String, outcome: String) -> Taken {
        Taken {
            name,
            argument,
            state: "done",
            outcome,
            submission_id: None,
        }
    }

    fn refused(name: &'static str, argument: String, outcome: String) -> Taken {
        Taken {
            name,
            argument,
            state: "refused",
            outcome,
            submission_id: None,
        }
    }
}

/// Acts on the command lines of a reply to a kbot report; a reply to
/// anything else, or without commands, is a discussion and left alone.
pub async fn take(state: &AppState, l: &ListRow, m: &ListMessage) -> Result<()> {
    let commands = message::commands(&m.body);
    if commands.is_empty() {
        return Ok(());
    }
    let Some(reported) = replied_report(state, m).await? else {
        return Ok(());
    };
    let place = answers::message_place(state, l, &m.message_id).await?;
    for command in &commands {
        let taken = if reported.was_sent_to(&m.from.address) {
            act(state, &reported, m, command).await?
        } else {
            let (name, argument) = describe(command);
            Taken::refused(
                name,
                argument,
                format!(
                    "{} was not a recipient of this report: kbot takes commands from the \
                     people a report was sent to",
                    m.from.address
                ),
            )
        };
        record_and_answer(state, l, m, &reported, &place, taken).await?;
    }
    Ok(())
}

/// The regression report the mail answers: its In-Reply-To, else the
/// nearest of its References.
async fn replied_report(state: &AppState, m: &ListMessage) -> Result<Option<Reported>> {
    for id in m.in_reply_to.iter().chain(m.references.iter().rev()) {
        if let Some(r) = recheck::by_message_id(&state.db, id).await? {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

fn describe(command: &Command) -> (&'static str, String) {
    match command {
        Command::Test { repo, rev } => (
            "test",
            [repo.as_deref(), rev.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Command::Retest => ("retest", String::new()),
        Command::Invalid => ("invalid", String::new()),
        Command::Dup(x) => ("dup", x.clone()),
        Command::Fix(x) => ("fix", x.clone()),
        Command::Unknown(x) => ("unknown", x.clone()),
    }
}

async fn act(state: &AppState, r: &Reported, m: &ListMessage, command: &Command) -> Result<Taken> {
    let (name, argument) = describe(command);
    let who = &m.from.address;
    let note = |what: &str| format!("{what} by {who} (mail <{}>)", m.message_id);
    // Triage covers every regression the report is about (one culprit on
    // several tbox groups or jobs is one report).
    let triage = |to: TriageState, what: String| async move {
        let mut tx = state.db.begin().await?;
        let user = crate::auth::upsert_user(&mut tx, who, Some(who)).await?;
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM regressions WHERE report_id = $1 ORDER BY id")
                .bind(r.report_id)
                .fetch_all(&mut *tx)
                .await?;
        let mut moved = Vec::new();
        for id in ids {
            let from =
                crate::regressions::change_in(&mut tx, id, Some(user), to, &note(&what)).await?;
            moved.push(format!(
                "regression {id} moved from {from} to {}",
                to.as_str()
            ));
        }
        tx.commit().await?;
        Ok::<String, crate::error::Error>(moved.join("; "))
    };
    Ok(match command {
        Command::Invalid => Taken::done(
            name,
            argument,
            triage(TriageState::Invalid, "#kbot invalid".into()).await?,
        ),
        Command::Dup(of) if !of.trim().is_empty() => {
            let outcome = triage(TriageState::Duplicate, format!("#kbot dup: {of}")).await?;
            Taken::done(name, argument, format!("{outcome} (a duplicate of {of})"))
        }
        Command::Fix(subject) if !subject.trim().is_empty() => Taken::done(
            name,
            argument,
            format!(
                "when a commit titled \"{}\" reaches a watched tree, kbot reruns the job on it \
                 against the first bad commit and closes the regression if the KPI is back",
                subject.trim()
            ),
        ),
        Command::Retest => {
            let (base, first_bad) = (r.base(state).await?, r.first_bad(state).await?);
            let id = queue_check(state, r, &base, &first_bad).await?;
            testing(
                name,
                argument,
                id,
                format!(
                    "{} against {} again",
                    short(&first_bad.sha),
                    short(&base.sha)
                ),
            )
        }
        Command::Test { repo, rev } => {
            test(
                state,
                r,
                m,
                (name, argument),
                repo.as_deref(),
                rev.as_deref(),
            )
            .await?
        }
        Command::Dup(_) | Command::Fix(_) => {
            Taken::refused(name, argument, format!("#kbot {name}: needs an argument"))
        }
        Command::Unknown(line) => Taken::refused(
            name,
            argument,
            format!(
                "unknown command {line:?}; kbot knows #kbot test, test REPO BRANCH|COMMIT, \
                 retest, invalid, dup: REPORT, fix: SUBJECT"
            ),
        ),
    })
}

fn testing(name: &'static str, argument: String, submission_id: i64, what: String) -> Taken {
    Taken {
        name,
        argument,
        state: "testing",
        outcome: format!(
            "testing {what} (submission {submission_id}); the result follows in this thread"
        ),
        submission_id: Some(submission_id),
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

async fn queue_check(
    state: &AppState,
    r: &Reported,
    base: &repos::StoredCommit,
    head: &repos::StoredCommit,
) -> Result<i64> {
    let mut tx = state.db.begin().await?;
    let id = recheck::queue(state, &mut tx, r, base, head).await?;
    tx.commit().await?;
    state.wake_lessees();
    Ok(id)
}

/// `#kbot test`: the patch in the mail on top of the first bad commit, or
/// the named commit of the report's repo, against the first bad commit.
async fn test(
    state: &AppState,
    r: &Reported,
    m: &ListMessage,
    (name, argument): (&'static str, String),
    repo_name: Option<&str>,
    rev: Option<&str>,
) -> Result<Taken> {
    let repo = r.repo(&state.db).await?;
    let first_bad = r.first_bad(state).await?;
    let fix = match (repo_name, rev) {
        (Some(named), Some(rev)) => {
            if named != repo.name {
                return Ok(Taken::refused(
                    name,
                    argument,
                    format!(
                    "the report is about repo {}; kbot compares commits within one registered repo",
                    repo.name
                ),
                ));
            }
            match repos::resolve_commit(state, &repo, rev).await {
                Ok(c) => c,
                Err(e) => {
                    return Ok(Taken::refused(
                        name,
                        argument,
                        crate::error::error_chain(&e),
                    ))
                }
            }
        }
        (None, None) if m.patch.is_some() => {
            let mirror = repos::mirror_for(state, &repo.name);
            let raw = reply_mbox(m)?;
            let paths = super::series::touched_paths(m.patch.as_deref().unwrap_or_default());
            let robot = &state.config.mail.report.robot_address;
            match mirror
                .am(&first_bad.sha, raw, &paths, ("kbot", robot))
                .await?
            {
                Ok(tip) => {
                    let ref_name = format!("refs/kbot/tests/{}/{}", r.regression_id, short(&tip));
                    mirror.set_ref(&ref_name, &tip).await?;
                    repos::resolve_commit(state, &repo, &tip).await?
                }
                Err(why) => {
                    return Ok(Taken::refused(
                        name,
                        argument,
                        format!(
                            "the patch does not apply on the first bad commit {}:\n{why}",
                            first_bad.sha
                        ),
                    ))
                }
            }
        }
        _ => return Ok(Taken::refused(
            name,
            argument,
            "#kbot test needs a patch in the mail (inline or attached), or REPO and BRANCH|COMMIT"
                .into(),
        )),
    };
    let id = queue_check(state, r, &first_bad, &fix).await?;
    Ok(testing(
        name,
        argument,
        id,
        format!(
            "{} against the first bad commit {}",
            short(&fix.sha),
            short(&first_bad.sha)
        ),
    ))
}

/// The reply itself as a one-message mbox: git am takes the patch from it
/// (the reply's text becomes the commit message, as with any posted patch).
fn reply_mbox(m: &ListMessage) -> Result<Vec<u8>> {
    let mut text = format!(
        "From: {} <{}>\nSubject: {}\nDate: {}\n\n",
        if m.from.name.is_empty() {
            &m.from.address
        } else {
            &m.from.name
        },
        m.from.address,
        m.subject.replace(['\r', '\n'], " "),
        chrono::DateTime::from_timestamp_millis(m.date_ms.unwrap_or(0))
            .unwrap_or_default()
            .to_rfc2822()
    );
    let body = m
        .body
        .split(m.patch.as_deref().unwrap_or("\u{0}"))
        .next()
        .unwrap_or_default();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('>') && !l.trim_start().starts_with("#kbot"))
    {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("---\n");
    text.push_str(m.patch.as_deref().unwrap_or_default());
    super::series::mboxrd(&[text])
}

async fn record_and_answer(
    state: &AppState,
    l: &ListRow,
    m: &ListMessage,
    r: &Reported,
    place: &ThreadPlace,
    taken: Taken,
) -> Result<()> {
    let mut tx = state.db.begin().await?;
    let Some(id) = store::insert_command(
        &mut tx,
        &NewCommand {
            list_id: Some(l.id),
            message_id: &m.message_id,
            sender: &m.from.address,
            command: taken.name,
            argument: &taken.argument,
            report_id: Some(r.report_id),
            regression_id: Some(r.regression_id),
            state: taken.state,
            outcome: &taken.outcome,
            submission_id: taken.submission_id,
        },
    )
    .await?
    else {
        return Ok(());
    };
    let body = format!(
        "> #kbot {} {}\n\n{}\n{}",
        taken.name,
        taken.argument,
        taken.outcome,
        thread::signature(&state.config.mail)
    );
    let answer = Answer {
        place,
        identity_key: format!("command/{id}/{}", taken.state),
        body,
        submission_id: taken.submission_id,
    };
    thread::enqueue_answer(&mut tx, &state.config.mail, &answer).await?;
    store::event(
        &mut tx,
        l.id,
        "command",
        &format!(
            "#kbot {} from {}: {}",
            taken.name, m.from.address, taken.state
        ),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(list = l.id, command = taken.name, sender = %m.from.address, state = taken.state, "command taken");
    Ok(())
}

/// Answers every command (and found fix) whose pair ended.
pub async fn settle_all(state: &AppState) -> Result<()> {
    for c in store::running_commands(&state.db).await? {
        let Some(regression_id) = c.regression_id else {
            continue;
        };
        let r = recheck::by_regression(&state.db, regression_id).await?;
        let Some(found) = recheck::found(state, c.submission_id, &r.metric).await? else {
            continue;
        };
        let place = match c.list_id {
            Some(list_id) => {
                let l = store::get(&state.db, list_id).await?;
                answers::message_place(state, &l, &c.message_id).await?
            }
            None => r.place(),
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
        Some(f) if c.command == "retest" => {
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
    if fixed && c.command == "closes" {
        let note = format!(
            "fixed by {} (verified by kbot, submission {})",
            c.argument, c.submission_id
        );
        crate::regressions::change_in(&mut tx, r.regression_id, None, TriageState::Fixed, &note)
            .await?;
        let _ = write!(text, "\nRegression {} is marked fixed.", r.regression_id);
    }
    store::command_done(&mut tx, c.id, "tested", &text).await?;
    let heading = match c.command.as_str() {
        "closes" => format!("Commit {} says it closes this report. kbot reran the job on it against the first bad commit:\n\n", c.argument),
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
