//! `#kbot` command lines in replies to kbot's regression reports, acted on
//! and answered in the thread.
//!
//! The policy (also in `docs/lists.md`): who may do what is
//! [`super::trust`]'s (a DKIM-verified sender with a role; strangers at most
//! `retest`, a few a day). A mail is read for at most [`MAX_COMMANDS`]
//! commands, each recorded before it is acted on and keyed by the mail's
//! Message-ID whatever list carried it, so a mail acts once. kbot reads no
//! command in its own mail, and none from a list address. A refusal is
//! mailed only to a believed sender with a role: a stranger's is recorded on
//! the list page and not mailed (its From may be forged, and kbot must not
//! reflect mail to it or to the addresses it names). Answers go to the
//! sender, the list and those of the mail's recipients the report was sent
//! to. Every change of a regression's state names the sender in its history.

use kbot_api::lists::{CommandName, CommandState, ListEventKind};

use super::answers;
use super::message::{self, Command, ListMessage};
use super::recheck::{self, Reported};
use super::store::{self, ListRow, NewCommand};
use super::trust::{self, Sender};
use crate::error::Result;
use crate::mail::thread::{self, Answer, ThreadPlace};
use crate::regressions::{self, TriageState};
use crate::repos;
use crate::state::AppState;

mod ended;
mod test_patch;

pub use ended::{pair_ended, recovers};
use test_patch::test;

/// Most commands read in one mail (syzbot takes 3 per bug); the rest are
/// answered once as too many.
pub const MAX_COMMANDS: usize = 3;

/// Shortest `#kbot fix:` title: a shorter one matches commits by chance.
pub const MIN_FIX_TITLE: usize = 10;

/// Most `#kbot fix:` titles kbot looks for per regression.
pub const MAX_FIX_TITLES: i64 = 3;

/// What taking one command did.
struct Taken {
    name: CommandName,
    argument: String,
    /// Done, refused or testing.
    state: CommandState,
    outcome: String,
    submission_id: Option<i64>,
}

impl Taken {
    fn done(name: CommandName, argument: String, outcome: String) -> Taken {
        Taken {
            name,
            argument,
            state: CommandState::Done,
            outcome,
            submission_id: None,
        }
    }

    fn refused(name: CommandName, argument: String, outcome: String) -> Taken {
        Taken {
            name,
            argument,
            state: CommandState::Refused,
            outcome,
            submission_id: None,
        }
    }
}

/// One command mail as read: the list, the mail, the report it answers and
/// its checked sender.
struct Mail<'a> {
    l: &'a ListRow,
    m: &'a ListMessage,
    r: &'a Reported,
    sender: Sender,
    /// Where answers go; `None`: nothing is mailed about this mail.
    place: Option<ThreadPlace>,
}

/// Acts on the command lines of a reply to a kbot report; a reply to
/// anything else, or without commands, is a discussion and left alone.
pub async fn take(state: &AppState, l: &ListRow, m: &ListMessage) -> Result<()> {
    let robot = &state.config.mail.report.robot_address;
    if m.from.address.trim().eq_ignore_ascii_case(robot) {
        // kbot's own answers come back through the archive; a `#kbot` line
        // quoted in one is no command.
        return Ok(());
    }
    let commands = distinct(message::commands(&m.body));
    if commands.is_empty() {
        return Ok(());
    }
    let Some(r) = replied_report(state, m).await? else {
        return Ok(());
    };
    // The mail as archived: its DKIM signatures cover these bytes.
    let raw = store::message(&state.db, l.id, &m.message_id).await?.raw;
    let sender = trust::sender(state, l, &r, m, &raw).await?;
    let place = if sender.answerable() {
        Some(answer_place(state, l, m, &r).await?)
    } else {
        None
    };
    let mail = Mail {
        l,
        m,
        r: &r,
        sender,
        place,
    };
    for command in commands.iter().take(MAX_COMMANDS) {
        take_one(state, &mail, command).await?;
    }
    if commands.len() > MAX_COMMANDS {
        too_many(state, &mail, commands.len() - MAX_COMMANDS).await?;
    }
    Ok(())
}

/// The commands of a mail, each kind once (the first of each): the record
/// of a command is keyed by the mail and the kind.
fn distinct(commands: Vec<Command>) -> Vec<Command> {
    let mut out: Vec<Command> = Vec::new();
    for c in commands {
        if !out.iter().any(|o| describe(o).0 == describe(&c).0) {
            out.push(c);
        }
    }
    out
}

/// The answer's place: In-Reply-To the command mail, To its sender, Cc the
/// list and only those of the mail's recipients the report went to.
async fn answer_place(
    state: &AppState,
    l: &ListRow,
    m: &ListMessage,
    r: &Reported,
) -> Result<ThreadPlace> {
    let mut place = answers::message_place(state, l, &m.message_id).await?;
    let list = l.address.as_deref().unwrap_or_default().trim();
    place
        .cc
        .retain(|c| c.address.eq_ignore_ascii_case(list) || r.was_sent_to(&c.address));
    Ok(place)
}

async fn take_one(state: &AppState, mail: &Mail<'_>, command: &Command) -> Result<()> {
    let (name, argument) = describe(command);
    let Some(id) = claim(state, mail, name, &argument).await? else {
        return Ok(());
    };
    let retests = trust::retests_today(state, mail.r.regression_id).await?;
    let cap = state.config.mail.stranger_retests_per_day;
    let taken = match mail.sender.may(command, retests, cap) {
        Ok(()) => act(state, mail.r, mail.m, command).await?,
        Err(why) => Taken::refused(name, argument, why),
    };
    settle(state, mail, id, taken).await
}

/// Records the command before it is acted on: the row is its only claim,
/// so a mail read twice (two lists, a re-read) acts once. `None` when it
/// was recorded before. Until [`settle`] the row says kbot stopped first.
async fn claim(
    state: &AppState,
    mail: &Mail<'_>,
    name: CommandName,
    argument: &str,
) -> Result<Option<i64>> {
    let mut tx = state.db.begin().await?;
    let id = store::insert_command(
        &mut tx,
        &NewCommand {
            list_id: Some(mail.l.id),
            message_id: &mail.m.message_id,
            sender: &mail.m.from.address,
            command: name,
            argument,
            report_id: Some(mail.r.report_id),
            regression_id: Some(mail.r.regression_id),
            state: CommandState::Refused,
            outcome: "kbot stopped before it acted on this command",
            submission_id: None,
            trusted: mail.sender.answerable(),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// More than [`MAX_COMMANDS`] kinds of command in one mail: recorded (and
/// answered) once.
async fn too_many(state: &AppState, mail: &Mail<'_>, unread: usize) -> Result<()> {
    let Some(id) = claim(state, mail, CommandName::TooMany, "").await? else {
        return Ok(());
    };
    let why = format!(
        "too many commands: kbot takes at most {MAX_COMMANDS} a mail; {unread} more were not read"
    );
    settle(
        state,
        mail,
        id,
        Taken::refused(CommandName::TooMany, String::new(), why),
    )
    .await
}

/// The regression report the mail answers: its In-Reply-To, else the
/// nearest of its References.
async fn replied_report(state: &AppState, m: &ListMessage) -> Result<Option<Reported>> {
    let ids: Vec<String> = m
        .in_reply_to
        .iter()
        .chain(m.references.iter().rev())
        .cloned()
        .collect();
    recheck::by_message_ids(&state.db, &ids).await
}

fn describe(command: &Command) -> (CommandName, String) {
    match command {
        Command::Test { repo, rev } => (
            CommandName::Test,
            [repo.as_deref(), rev.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Command::Retest => (CommandName::Retest, String::new()),
        Command::Invalid => (CommandName::Invalid, String::new()),
        Command::Dup(x) => (CommandName::Dup, x.clone()),
        Command::Fix(x) => (CommandName::Fix, x.clone()),
        Command::Unknown(x) => (CommandName::Unknown, x.clone()),
    }
}

async fn act(state: &AppState, r: &Reported, m: &ListMessage, command: &Command) -> Result<Taken> {
    let (name, argument) = describe(command);
    let who = &m.from.address;
    let note = |what: &str| format!("{what} by {who} (mail <{}>)", m.message_id);
    // Triage covers every regression the report is about (one culprit on
    // several tbox groups or jobs is one report). The sender is named in the
    // note, never made a user: a mail address is no kbot account.
    let triage = |to: TriageState, what: String| async move {
        let mut tx = state.db.begin().await?;
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM regressions WHERE report_id = $1 ORDER BY id")
                .bind(r.report_id)
                .fetch_all(&mut *tx)
                .await?;
        let mut moved = Vec::new();
        for id in ids {
            let from = crate::regressions::change_in(&mut tx, id, None, to, &note(&what)).await?;
            moved.push(format!(
                "regression {id} moved from {from} to {}",
                to.as_str()
            ));
        }
        tx.commit().await?;
        Ok::<String, crate::error::Error>(moved.join("; "))
    };
    if matches!(command, Command::Test { .. } | Command::Retest) && r.is_closed() {
        return Ok(Taken::refused(
            name,
            argument,
            format!(
                "regression {} is {}: kbot tests no fixed, invalid or duplicate regression",
                r.regression_id, r.state
            ),
        ));
    }
    Ok(match command {
        Command::Invalid => Taken::done(
            name,
            argument,
            triage(TriageState::Invalid, "#kbot invalid".into()).await?,
        ),
        Command::Dup(of) if !of.trim().is_empty() => {
            dup(
                state,
                r,
                (name, argument),
                of.trim(),
                &note(&format!("#kbot dup: {of}")),
            )
            .await?
        }
        Command::Fix(title) if !title.trim().is_empty() => {
            fix(state, r, (name, argument), title.trim()).await?
        }
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
                "unknown command {line:?}; kbot knows #kbot test, test REPO BRANCH|TAG|COMMIT, \
                 retest, invalid, dup: REGRESSION, fix: COMMIT TITLE"
            ),
        ),
    })
}

/// `#kbot dup: REGRESSION`: the report's regressions become duplicates of
/// the one named ([`regressions::find_target`]), unless it is unknown, is
/// one of them, or is itself a duplicate of one of them, link by link (a
/// cycle). Checked and moved in one transaction.
async fn dup(
    state: &AppState,
    r: &Reported,
    (name, argument): (CommandName, String),
    of: &str,
    note: &str,
) -> Result<Taken> {
    let mut tx = state.db.begin().await?;
    regressions::lock_duplicates(&mut tx, state.db.backend()).await?;
    let Some(target) = regressions::find_target(&mut tx, of).await? else {
        return Ok(Taken::refused(
            name,
            argument,
            format!(
                "#kbot dup: {of:?} names no regression kbot knows: give a regression's number \
                 (as on its dashboard page) or the Message-ID of its report"
            ),
        ));
    };
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM regressions WHERE report_id = $1 ORDER BY id")
            .bind(r.report_id)
            .fetch_all(&mut *tx)
            .await?;
    if let Some(why) = regressions::duplicate_refusal(&mut tx, &ids, target).await? {
        return Ok(Taken::refused(name, argument, why));
    }
    let mut moved = Vec::new();
    for id in ids {
        let from = regressions::mark_duplicate(&mut tx, id, target, None, note).await?;
        moved.push(format!(
            "regression {id} moved from {from} to duplicate of regression {target}"
        ));
    }
    tx.commit().await?;
    Ok(Taken::done(name, argument, moved.join("; ")))
}

/// `#kbot fix: TITLE`: recorded for [`super::fixes`], which looks for a
/// commit with exactly that subject line; a title too short to name one
/// commit, or past the per-regression cap, is refused.
async fn fix(
    state: &AppState,
    r: &Reported,
    (name, argument): (CommandName, String),
    title: &str,
) -> Result<Taken> {
    if title.chars().count() < MIN_FIX_TITLE {
        return Ok(Taken::refused(
            name,
            argument,
            format!(
                "#kbot fix: needs the fixing commit's whole title (its subject line, at least \
                 {MIN_FIX_TITLE} characters)"
            ),
        ));
    }
    if store::fix_titles(&state.db, r.regression_id).await? >= MAX_FIX_TITLES {
        return Ok(Taken::refused(
            name,
            argument,
            format!("kbot looks for at most {MAX_FIX_TITLES} fix titles per regression"),
        ));
    }
    Ok(Taken::done(
        name,
        argument,
        format!(
            "when a commit titled \"{title}\" reaches a watched tree, kbot reruns the job on it \
             against the first bad commit and closes the regression if the KPI is back"
        ),
    ))
}

fn testing(name: CommandName, argument: String, submission_id: i64, what: String) -> Taken {
    Taken {
        name,
        argument,
        state: CommandState::Testing,
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

/// Records what the command did, in the row [`claim`] made, as a list event
/// and, when the sender may be answered, as an answer in the thread.
async fn settle(state: &AppState, mail: &Mail<'_>, id: i64, taken: Taken) -> Result<()> {
    let mut tx = state.db.begin().await?;
    store::command_taken(
        &mut tx,
        id,
        (taken.state, &taken.outcome),
        taken.submission_id,
    )
    .await?;
    let answered = if let Some(place) = &mail.place {
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
        thread::enqueue_answer(&mut tx, &state.config.mail, &answer)
            .await?
            .is_some()
    } else {
        false
    };
    let from = &mail.m.from.address;
    let detail = match (taken.state, answered) {
        (CommandState::Refused, false) => format!(
            "#kbot {} from {from} refused, not answered: {}",
            taken.name, taken.outcome
        ),
        (state, _) => format!("#kbot {} from {from}: {state}", taken.name),
    };
    store::event(&mut tx, mail.l.id, ListEventKind::Command, &detail).await?;
    tx.commit().await?;
    tracing::info!(list = mail.l.id, command = taken.name.as_str(), sender = %from, state = taken.state.as_str(), answered, "command taken");
    Ok(())
}
