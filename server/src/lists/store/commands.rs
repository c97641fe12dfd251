//! SQL of the `#kbot` commands read in replies and the fixes found on watched trees.

use super::MAX_DETAIL_BYTES;
use crate::db::{Db, Tx};
use crate::error::Result;
use crate::jobs::truncate;
use crate::time::now_ms;
use kbot_api::lists::{CommandName, CommandState, ListCommand};

/// A command to record.
pub struct NewCommand<'a> {
    /// `None` for a fix found on a watched tree.
    pub list_id: Option<i64>,
    pub message_id: &'a str,
    pub sender: &'a str,
    pub command: CommandName,
    pub argument: &'a str,
    pub report_id: Option<i64>,
    pub regression_id: Option<i64>,
    pub state: CommandState,
    pub outcome: &'a str,
    pub submission_id: Option<i64>,
    /// Whether the sender was believed (its answers may go To it).
    pub trusted: bool,
}

/// Records a command once; `None` when this mail's command was taken before.
pub async fn insert_command(tx: &mut Tx, c: &NewCommand<'_>) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "INSERT INTO list_commands (list_id, message_id, sender, command, argument, report_id, \
             regression_id, state, outcome, submission_id, created_at, trusted) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (message_id, command) DO NOTHING RETURNING id",
    )
    .bind(c.list_id)
    .bind(c.message_id)
    .bind(c.sender)
    .bind(c.command.as_str())
    .bind(c.argument)
    .bind(c.report_id)
    .bind(c.regression_id)
    .bind(c.state.as_str())
    .bind(truncate(c.outcome, MAX_DETAIL_BYTES))
    .bind(c.submission_id)
    .bind(now_ms())
    .bind(i64::from(c.trusted))
    .fetch_optional(&mut **tx)
    .await?)
}

/// What a claimed command did: its state, outcome and pair.
pub async fn command_taken(
    tx: &mut Tx,
    id: i64,
    (state, outcome): (CommandState, &str),
    submission_id: Option<i64>,
) -> Result<()> {
    sqlx::query(
        "UPDATE list_commands SET state = $1, outcome = $2, submission_id = $3 WHERE id = $4",
    )
    .bind(state.as_str())
    .bind(truncate(outcome, MAX_DETAIL_BYTES))
    .bind(submission_id)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn command_done(tx: &mut Tx, id: i64, state: CommandState, outcome: &str) -> Result<()> {
    sqlx::query("UPDATE list_commands SET state = $1, outcome = $2 WHERE id = $3")
        .bind(state.as_str())
        .bind(truncate(outcome, MAX_DETAIL_BYTES))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct CommandRecord {
    id: i64,
    message_id: String,
    sender: String,
    #[sqlx(try_from = "String")]
    command: CommandName,
    argument: String,
    #[sqlx(try_from = "String")]
    state: CommandState,
    outcome: String,
    regression_id: Option<i64>,
    submission_id: Option<i64>,
    created_at: i64,
}

impl From<CommandRecord> for ListCommand {
    fn from(r: CommandRecord) -> ListCommand {
        ListCommand {
            id: r.id,
            message_id: r.message_id,
            sender: r.sender,
            command: r.command,
            argument: r.argument,
            state: r.state,
            outcome: r.outcome,
            regression: r.regression_id,
            submission: r.submission_id,
            created_at: r.created_at,
        }
    }
}

const COMMAND_SELECT: &str = "SELECT id, message_id, sender, command, argument, state, outcome, \
     regression_id, submission_id, created_at FROM list_commands";

pub async fn commands(db: &Db, list_id: i64, limit: i64) -> Result<Vec<ListCommand>> {
    let rows = sqlx::query_as::<_, CommandRecord>(&format!(
        "{COMMAND_SELECT} WHERE list_id = $1 ORDER BY id DESC LIMIT $2"
    ))
    .bind(list_id)
    .bind(limit)
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(ListCommand::from).collect())
}

/// A command (or a found fix) whose pair is running.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunningCommand {
    pub id: i64,
    pub list_id: Option<i64>,
    pub message_id: String,
    #[sqlx(try_from = "String")]
    pub command: CommandName,
    pub argument: String,
    pub regression_id: Option<i64>,
    pub submission_id: i64,
    /// 1 when the sender was believed (see [`NewCommand::trusted`]).
    pub trusted: i64,
}

/// The commands (and found fixes) still testing on pair `submission_id`.
pub async fn testing_commands_of(db: &Db, submission_id: i64) -> Result<Vec<RunningCommand>> {
    Ok(sqlx::query_as::<_, RunningCommand>(
        "SELECT id, list_id, message_id, command, argument, regression_id, submission_id, \
         trusted FROM list_commands WHERE state = $1 AND submission_id = $2 ORDER BY id",
    )
    .bind(CommandState::Testing.as_str())
    .bind(submission_id)
    .fetch_all(db.read())
    .await?)
}

/// Whether a command or found fix about this regression was recorded with
/// this argument (a `Closes:` commit is rechecked once).
pub async fn command_exists(
    db: &Db,
    regression_id: i64,
    command: CommandName,
    argument: &str,
) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM list_commands WHERE regression_id = $1 AND command = $2          AND argument = $3",
    )
    .bind(regression_id)
    .bind(command.as_str())
    .bind(argument)
    .fetch_one(db.read())
    .await?;
    Ok(n > 0)
}

/// A `#kbot fix:` title given for an open regression.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FixTitle {
    /// The command's row: its rerun is keyed by it (one per command).
    pub id: i64,
    pub regression_id: i64,
    pub title: String,
}

/// `#kbot fix:` titles given for open regressions.
pub async fn fix_titles_open(db: &Db) -> Result<Vec<FixTitle>> {
    Ok(sqlx::query_as(
        "SELECT c.id, c.regression_id, c.argument AS title FROM list_commands c \
         JOIN regressions g ON g.id = c.regression_id \
         WHERE c.command = 'fix' AND c.state = 'done' \
         AND g.state IN ('new', 'confirmed', 'reported') ORDER BY c.id",
    )
    .fetch_all(db.read())
    .await?)
}

/// How many `#kbot fix:` titles are recorded for a regression.
pub async fn fix_titles(db: &Db, regression_id: i64) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM list_commands WHERE regression_id = $1 AND command = 'fix' \
         AND state = 'done'",
    )
    .bind(regression_id)
    .fetch_one(db.read())
    .await?)
}
