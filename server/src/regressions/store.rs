//! The `regressions` and `regression_events` tables.

use kbot_api::bisections::BisectionState;
use kbot_api::regressions::RegressionRow;
use kbot_api::reports::OutboxState;

use crate::auth::UserAuth;
use crate::db::{Backend, Db, NullableF64, Tx};
use crate::error::{Error, Result};
use crate::time::now_ms;

pub use kbot_api::regressions::TriageState;

/// A regression to record.
pub struct NewRegression<'a> {
    pub repo_id: i64,
    pub submission_id: i64,
    pub atomic_job_id: i64,
    pub metric: &'a str,
    pub tbox_group: &'a str,
    pub change_pct: Option<f64>,
    pub bisection_id: Option<i64>,
    pub report_id: Option<i64>,
}

/// Records a regression in the caller's transaction; `None` when this job's
/// metric was recorded before (a re-evaluated pair).
pub async fn record(tx: &mut Tx, r: &NewRegression<'_>) -> Result<Option<i64>> {
    let now = now_ms();
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO regressions (repo_id, submission_id, atomic_job_id, metric, tbox_group, \
             change_pct, bisection_id, bisection_state, report_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (atomic_job_id, metric) DO NOTHING RETURNING id",
    )
    .bind(r.repo_id)
    .bind(r.submission_id)
    .bind(r.atomic_job_id)
    .bind(r.metric)
    .bind(r.tbox_group)
    .bind(NullableF64::from(r.change_pct))
    .bind(r.bisection_id)
    // The bisection was started with it.
    .bind(r.bisection_id.map(|_| BisectionState::Running.as_str()))
    .bind(r.report_id)
    .bind(now)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(id) = id {
        tracing::info!(regression = id, metric = r.metric, "regression recorded");
    }
    Ok(id)
}

/// The bisection `bisection_id` moved to `state`: its regressions show it.
pub async fn bisection_moved(tx: &mut Tx, bisection_id: i64, state: BisectionState) -> Result<()> {
    sqlx::query("UPDATE regressions SET bisection_state = $1 WHERE bisection_id = $2")
        .bind(state.as_str())
        .bind(bisection_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Links the report a bisection wrote to the regression it bisected.
pub async fn link_report(tx: &mut Tx, bisection_id: i64, report_id: i64) -> Result<()> {
    sqlx::query("UPDATE regressions SET report_id = $1, updated_at = $2 WHERE bisection_id = $3")
        .bind(report_id)
        .bind(now_ms())
        .bind(bisection_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Points the bisection's regressions at the regression of bisection
/// `earlier` (the one whose report stands), unless one already points
/// somewhere.
pub async fn robot_duplicate_of(tx: &mut Tx, bisection_id: i64, earlier: i64) -> Result<()> {
    sqlx::query(
        "UPDATE regressions SET duplicate_of = \
             (SELECT MIN(id) FROM regressions WHERE bisection_id = $1) \
         WHERE bisection_id = $2 AND duplicate_of IS NULL",
    )
    .bind(earlier)
    .bind(bisection_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The robot's own triage (no user): moves the bisection's regressions
/// still `new` to `to`, with `note` in their history.
pub async fn mark_by_robot(
    tx: &mut Tx,
    bisection_id: i64,
    to: TriageState,
    note: &str,
) -> Result<()> {
    let new = TriageState::New.as_str();
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM regressions WHERE bisection_id = $1 AND state = $2")
            .bind(bisection_id)
            .bind(new)
            .fetch_all(&mut **tx)
            .await?;
    for id in ids {
        change(tx, id, None, new, to.as_str(), note).await?;
    }
    Ok(())
}

/// A triage change in the caller's transaction (a `#kbot` command by mail,
/// a fix kbot verified): `user_id` is who asked (`None`: the robot). The
/// state it left.
pub async fn change_in(
    tx: &mut Tx,
    id: i64,
    user_id: Option<i64>,
    to: TriageState,
    note: &str,
) -> Result<String> {
    let from: String = sqlx::query_scalar("SELECT state FROM regressions WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| Error::not_found("regression", id))?;
    change(tx, id, user_id, &from, to.as_str(), note.trim()).await?;
    Ok(from)
}

/// Most links of a `duplicate_of` chain followed: longer ones are refused
/// rather than walked (a chain is built one command at a time).
const MAX_DUPLICATE_CHAIN: usize = 100;

/// The regression a `#kbot dup:` argument names: a regression id (`17`,
/// `#17`), or a kbot report by its Message-ID (`<id@host>`, `id@host`, or
/// an archive link ending in it), whose first regression it takes. `None`
/// when it names none that exists.
pub async fn find_target(tx: &mut Tx, argument: &str) -> Result<Option<i64>> {
    let argument = argument.trim();
    if let Ok(id) = argument.trim_start_matches('#').parse::<i64>() {
        let found = sqlx::query_scalar("SELECT id FROM regressions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
        return Ok(found);
    }
    let message_id = argument
        .rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or(argument)
        .trim_matches(['<', '>']);
    Ok(sqlx::query_scalar(
        "SELECT g.id FROM regressions g JOIN report_outbox o ON o.id = g.report_id \
         WHERE o.message_id = $1 ORDER BY g.id LIMIT 1",
    )
    .bind(message_id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Why regressions `ids` may not become duplicates of `target`, or `None`
/// when they may: `target` is one of them, or the regressions it is a
/// duplicate of, link by link, lead back to one of them (a cycle).
pub async fn duplicate_refusal(tx: &mut Tx, ids: &[i64], target: i64) -> Result<Option<String>> {
    if ids.contains(&target) {
        return Ok(Some(format!(
            "regression {target} is this report's own: a regression is no duplicate of itself"
        )));
    }
    let duplicate = TriageState::Duplicate.as_str();
    let mut at = target;
    for _ in 0..MAX_DUPLICATE_CHAIN {
        let link: Option<(String, Option<i64>)> =
            sqlx::query_as("SELECT state, duplicate_of FROM regressions WHERE id = $1")
                .bind(at)
                .fetch_optional(&mut **tx)
                .await?;
        // A link counts while its regression is still a duplicate: one
        // triaged back to `new` duplicates nothing.
        let next = match link {
            Some((state, Some(next))) if state == duplicate => next,
            _ => return Ok(None),
        };
        if ids.contains(&next) {
            return Ok(Some(format!(
                "regression {target} is itself a duplicate of regression {next} of this report: \
                 marking this one a duplicate of it would make a cycle"
            )));
        }
        at = next;
    }
    Ok(Some(format!(
        "regression {target} is at the head of more than {MAX_DUPLICATE_CHAIN} duplicates; \
         name the regression they end at"
    )))
}

/// Key of the PostgreSQL advisory lock [`lock_duplicates`] takes.
const DUPLICATES_LOCK: i64 = 0x006b_626f_7464_7570; // "kbotdup"

/// Serialises `#kbot dup:` commands for the rest of the caller's
/// transaction on PostgreSQL: two crossing commands (A a duplicate of B, B
/// of A) would each see no cycle under READ COMMITTED. SQLite's write
/// transactions run one at a time already.
pub async fn lock_duplicates(tx: &mut Tx, backend: Backend) -> Result<()> {
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(DUPLICATES_LOCK)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Moves regression `id` to `duplicate` of `of` in the caller's
/// transaction (a `#kbot dup:` command, checked by [`duplicate_refusal`]):
/// `user_id` is who asked (`None`: a mail's sender, named in `note`). The
/// state it left.
pub async fn mark_duplicate(
    tx: &mut Tx,
    id: i64,
    of: i64,
    user_id: Option<i64>,
    note: &str,
) -> Result<String> {
    let from = change_in(tx, id, user_id, TriageState::Duplicate, note).await?;
    sqlx::query("UPDATE regressions SET duplicate_of = $1 WHERE id = $2")
        .bind(of)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(from)
}

/// A person's triage: the new state and why.
pub async fn set_state(
    db: &Db,
    id: i64,
    user: &UserAuth,
    to: TriageState,
    note: &str,
) -> Result<()> {
    let mut tx = db.begin().await?;
    let from: String = sqlx::query_scalar("SELECT state FROM regressions WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| Error::not_found("regression", id))?;
    change(
        &mut tx,
        id,
        Some(user.user_id),
        &from,
        to.as_str(),
        note.trim(),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(regression = id, user = %user.user_name, from, to = to.as_str(), "regression triaged");
    Ok(())
}

async fn change(
    tx: &mut Tx,
    id: i64,
    user_id: Option<i64>,
    from: &str,
    to: &str,
    note: &str,
) -> Result<()> {
    let now = now_ms();
    sqlx::query("UPDATE regressions SET state = $1, updated_at = $2 WHERE id = $3")
        .bind(to)
        .bind(now)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    if to != TriageState::Duplicate.as_str() {
        // No longer a duplicate: its link must not count in a cycle check.
        sqlx::query("UPDATE regressions SET duplicate_of = NULL WHERE id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query(
        "INSERT INTO regression_events (regression_id, user_id, at, from_state, to_state, note) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(user_id)
    .bind(now)
    .bind(from)
    .bind(to)
    .bind(note)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

const SELECT: &str = "SELECT g.id, r.name AS repo, g.submission_id, g.metric, g.tbox_group, \
        g.change_pct, g.state, c.sha AS head_sha, c.subject AS head_subject, g.bisection_id, \
        g.bisection_state, g.report_id, o.message_id, o.subject AS report_subject, \
        o.state AS report_state, g.duplicate_of, g.created_at, g.updated_at \
    FROM regressions g \
    JOIN repos r ON r.id = g.repo_id \
    JOIN submissions s ON s.id = g.submission_id \
    JOIN commits c ON c.id = s.head_commit_id \
    LEFT JOIN report_outbox o ON o.id = g.report_id";

/// A [`RegressionRow`] as [`SELECT`] reads it.
#[derive(sqlx::FromRow)]
struct Record {
    id: i64,
    repo: String,
    submission_id: i64,
    metric: String,
    tbox_group: String,
    change_pct: Option<f64>,
    #[sqlx(try_from = "String")]
    state: TriageState,
    head_sha: String,
    head_subject: String,
    bisection_id: Option<i64>,
    bisection_state: Option<String>,
    report_id: Option<i64>,
    message_id: Option<String>,
    report_subject: Option<String>,
    report_state: Option<String>,
    duplicate_of: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

/// A [`Record`] as the API shows it; a state kbot does not know is an error.
fn row(r: Record) -> Result<RegressionRow> {
    RegressionRow::try_from(r).map_err(|e| anyhow::Error::msg(e).into())
}

impl TryFrom<Record> for RegressionRow {
    type Error = String;

    fn try_from(r: Record) -> std::result::Result<RegressionRow, String> {
        let bisection_state = r
            .bisection_state
            .map(BisectionState::try_from)
            .transpose()?;
        let report_state = r.report_state.map(OutboxState::try_from).transpose()?;
        Ok(RegressionRow {
            id: r.id,
            repo: r.repo,
            submission_id: r.submission_id,
            metric: r.metric,
            tbox_group: r.tbox_group,
            change_pct: r.change_pct,
            state: r.state,
            head_sha: r.head_sha,
            head_subject: r.head_subject,
            bisection_id: r.bisection_id,
            bisection_state,
            report_id: r.report_id,
            report_message_id: r.message_id,
            report_subject: r.report_subject,
            report_state,
            duplicate_of: r.duplicate_of,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// The list's filters, from the URL; empty fields do not filter.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Filter {
    #[serde(default)]
    pub repo: String,
    #[serde(default)]
    pub tbox_group: String,
    #[serde(default)]
    pub metric: String,
    #[serde(default)]
    pub state: String,
}

/// Regressions matching `filter`, newest first: `limit` of them from
/// `offset`.
pub async fn list(db: &Db, filter: &Filter, limit: i64, offset: i64) -> Result<Vec<RegressionRow>> {
    let mut conditions = Vec::new();
    let mut values = Vec::new();
    for (column, value) in [
        ("r.name", &filter.repo),
        ("g.tbox_group", &filter.tbox_group),
        ("g.metric", &filter.metric),
        ("g.state", &filter.state),
    ] {
        if !value.trim().is_empty() {
            values.push(value.trim().to_owned());
            conditions.push(format!("{column} = ${}", values.len()));
        }
    }
    let filtered = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    let n = values.len();
    let sql = format!(
        "{SELECT}{filtered} ORDER BY g.id DESC LIMIT ${} OFFSET ${}",
        n + 1,
        n + 2
    );
    let mut query = sqlx::query_as::<_, Record>(&sql);
    for value in values {
        query = query.bind(value);
    }
    let rows = query.bind(limit).bind(offset).fetch_all(db.read()).await?;
    rows.into_iter().map(row).collect()
}

/// One regression.
pub async fn get(db: &Db, id: i64) -> Result<RegressionRow> {
    sqlx::query_as::<_, Record>(&format!("{SELECT} WHERE g.id = $1"))
        .bind(id)
        .fetch_optional(db.read())
        .await?
        .ok_or_else(|| Error::not_found("regression", id))
        .and_then(row)
}

/// One change of a regression's triage state.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HistoryRow {
    pub at: i64,
    /// `None`: the robot.
    #[sqlx(rename = "name")]
    pub user: Option<String>,
    #[sqlx(try_from = "String")]
    pub from_state: TriageState,
    #[sqlx(try_from = "String")]
    pub to_state: TriageState,
    pub note: String,
}

/// Every change of regression `id`, oldest first.
pub async fn history(db: &Db, id: i64) -> Result<Vec<HistoryRow>> {
    Ok(sqlx::query_as::<_, HistoryRow>(
        "SELECT e.at, u.name, e.from_state, e.to_state, e.note FROM regression_events e \
         LEFT JOIN users u ON u.id = e.user_id WHERE e.regression_id = $1 ORDER BY e.id",
    )
    .bind(id)
    .fetch_all(db.read())
    .await?)
}
