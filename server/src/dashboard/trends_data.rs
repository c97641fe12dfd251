//! The trend page's queries: the branches the robot measures (watched, or
//! a list's base), a branch's tested commits in order, their runs' values of one metric (from the per-commit
//! summaries kept at upload, `jobs::summaries`), and the reports and
//! bisections that point at them.

use std::collections::{HashMap, HashSet};

use kbot_core::stats::describe::sorted;
use sqlx::any::AnyRow;

use crate::access::Reader;
use crate::db::{self, Db};
use crate::error::Result;
use crate::jobs::summaries;
use crate::mail::outbox;

/// A branch the robot measures: watched, or the base of a list's series.
#[derive(sqlx::FromRow)]
pub struct Branch {
    pub repo: String,
    pub branch: String,
}

pub async fn branches(db: &Db) -> Result<Vec<Branch>> {
    Ok(sqlx::query_as::<_, Branch>(
        "SELECT r.name AS repo, w.branch FROM watches w JOIN repos r ON r.id = w.repo_id \
         UNION SELECT r.name AS repo, l.branch FROM lists l JOIN repos r ON r.id = l.repo_id \
         ORDER BY 1, 2",
    )
    .fetch_all(db.read())
    .await?)
}

/// The tbox groups a branch's runs used.
pub async fn groups(db: &Db, repo: &str, branch: &str) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT DISTINCT a.tbox_group AS g FROM repos r \
         JOIN submissions s ON s.repo_id = r.id JOIN atomic_jobs a ON a.submission_id = s.id \
         WHERE r.name = $1 AND s.branch = $2 AND a.tbox_group IS NOT NULL \
         ORDER BY 1",
    )
    .bind(repo)
    .bind(branch)
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(|(g,)| g).collect())
}

/// A commit of the branch the robot tested.
#[derive(Debug, Clone)]
pub struct TrendCommit {
    pub id: i64,
    pub sha: String,
    pub subject: String,
}

/// A branch pair's two commits as [`commits`] reads them.
#[derive(sqlx::FromRow)]
struct BranchPairRow {
    kind: String,
    base_commit_id: i64,
    base_sha: String,
    base_subject: String,
    head_commit_id: i64,
    head_sha: String,
    head_subject: String,
}

/// The branch's tested commits in the order the robot tested them (a
/// watch compares each new head with the last good one): every pair's
/// base, then a watch pair's head (a series pair's head is a patch, not
/// the branch's), oldest pair first.
pub async fn commits(db: &Db, repo: &str, branch: &str, group: &str) -> Result<Vec<TrendCommit>> {
    // Through the pairs on the branch (index submissions_branch), never by
    // scanning every finished job; `$3`/`$4` narrow to one tbox group ('' for any).
    let rows = sqlx::query_as::<_, BranchPairRow>(
        "SELECT s.kind, s.base_commit_id, cb.sha AS base_sha, cb.subject AS base_subject, \
                s.head_commit_id, ch.sha AS head_sha, ch.subject AS head_subject \
         FROM repos r JOIN submissions s ON s.repo_id = r.id \
         JOIN commits cb ON cb.id = s.base_commit_id JOIN commits ch ON ch.id = s.head_commit_id \
         WHERE r.name = $1 AND s.branch = $2 \
           AND ($3 = '' OR EXISTS (SELECT 1 FROM atomic_jobs a \
                                   WHERE a.submission_id = s.id AND a.tbox_group = $4)) \
         ORDER BY s.id",
    )
    .bind(repo)
    .bind(branch)
    .bind(group)
    .bind(group)
    .fetch_all(db.read())
    .await?;
    let mut out: Vec<TrendCommit> = Vec::new();
    let mut seen: HashSet<i64> = HashSet::new();
    for row in rows {
        let on_branch = row.kind == "watch";
        let pair = [
            Some((row.base_commit_id, row.base_sha, row.base_subject)),
            on_branch.then_some((row.head_commit_id, row.head_sha, row.head_subject)),
        ];
        for (id, sha, subject) in pair.into_iter().flatten() {
            if seen.insert(id) {
                out.push(TrendCommit { id, sha, subject });
            }
        }
    }
    Ok(out)
}

/// A branch's line: repo, branch and tbox group ('' when the branch's jobs
/// have none).
pub type Line<'a> = (&'a str, &'a str, &'a str);

/// The columns [`window_rows`] narrows to, in order: the job, the metric.
const NARROWED: [&str; 2] = ["m.job", "m.metric"];

/// `select` over the summaries (migration 0014) of `line` on the window's
/// commits, narrowed to the values in `narrow` (the job, then the metric),
/// each row read as a `T` of the selected columns.
async fn window_rows<T>(
    db: &Db,
    select: &str,
    (repo, branch, group): Line<'_>,
    narrow: &[&str],
    commits: &[TrendCommit],
) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
{
    if commits.is_empty() {
        return Ok(Vec::new());
    }
    let filter: String = NARROWED
        .iter()
        .take(narrow.len())
        .enumerate()
        .map(|(i, column)| format!(" AND {column} = ${}", i + 4))
        .collect();
    let list = db::placeholders(4 + narrow.len(), commits.len());
    let sql = format!(
        "SELECT {select} FROM metric_summaries m JOIN repos r ON r.id = m.repo_id \
         WHERE r.name = $1 AND m.branch = $2 AND m.tbox_group = $3{filter} \
           AND m.commit_id IN ({list}) ORDER BY 1"
    );
    let mut query = sqlx::query_as::<_, T>(&sql)
        .bind(repo)
        .bind(branch)
        .bind(group);
    for value in narrow {
        query = query.bind(*value);
    }
    for c in commits {
        query = query.bind(c.id);
    }
    Ok(query.fetch_all(db.read()).await?)
}

/// The distinct texts `select` (one column) yields over the window.
async fn texts(
    db: &Db,
    select: &str,
    line: Line<'_>,
    narrow: &[&str],
    commits: &[TrendCommit],
) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = window_rows(db, select, line, narrow, commits).await?;
    Ok(rows.into_iter().map(|(text,)| text).collect())
}

/// The job labels with a finished run on a commit of the window.
pub async fn jobs(db: &Db, line: Line<'_>, commits: &[TrendCommit]) -> Result<Vec<String>> {
    texts(db, "DISTINCT m.job", line, &[], commits).await
}

/// The metrics `job`'s runs on the window's commits have, KPIs first.
pub async fn metrics(
    db: &Db,
    line: Line<'_>,
    job: &str,
    commits: &[TrendCommit],
) -> Result<Vec<String>> {
    let mut names = texts(db, "DISTINCT m.metric", line, &[job], commits).await?;
    names.sort_by_key(|m| (kbot_core::metrics::report_rank(m), m.clone()));
    Ok(names)
}

/// Per commit id of the window, its runs' values of `metric`, ascending.
pub async fn values(
    db: &Db,
    line: Line<'_>,
    (job, metric): (&str, &str),
    commits: &[TrendCommit],
) -> Result<HashMap<i64, Vec<f64>>> {
    let select = "m.commit_id, m.run_values";
    let rows: Vec<(i64, String)> = window_rows(db, select, line, &[job, metric], commits).await?;
    let mut out = HashMap::new();
    for (commit_id, run_values) in rows {
        let values = summaries::parse_values(&run_values)?;
        out.insert(commit_id, sorted(&values));
    }
    Ok(out)
}

/// What a commit's ◆ links to: (commit id, href, description). A report
/// is linked only for a `reader` who may see its Message-ID
/// ([`outbox::readable`]).
pub async fn links(
    db: &Db,
    (repo, branch, group, metric): (&str, &str, &str, &str),
    reader: Reader,
) -> Result<Vec<(i64, String, String)>> {
    let mut out = Vec::new();
    let bisections: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT b.id, b.state, COALESCE(b.first_bad_commit_id, b.bad_commit_id) AS commit_id \
         FROM bisections b JOIN repos r ON r.id = b.repo_id \
         WHERE r.name = $1 AND b.metric = $2 AND ($3 = '' OR b.tbox_group = $4) ORDER BY b.id",
    )
    .bind(repo)
    .bind(metric)
    .bind(group)
    .bind(group)
    .fetch_all(db.read())
    .await?;
    for (id, state, commit_id) in bisections {
        out.push((
            commit_id,
            format!("/bisections/{id}"),
            format!("bisection {id} ({state})"),
        ));
    }
    let reports: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT o.message_id, o.subject, o.state, s.head_commit_id FROM report_outbox o \
         JOIN submissions s ON s.id = o.submission_id JOIN watches w ON w.id = s.watch_id \
         JOIN repos r ON r.id = w.repo_id \
         WHERE o.kind = 'regression' AND r.name = $1 AND w.branch = $2 ORDER BY o.id",
    )
    .bind(repo)
    .bind(branch)
    .fetch_all(db.read())
    .await?;
    let readable = reports
        .into_iter()
        .filter(|(_, _, state, _)| outbox::readable_text(reader, state));
    for (message_id, subject, _, head_commit_id) in readable {
        out.push((
            head_commit_id,
            format!("/reports/{message_id}"),
            format!("report: {subject}"),
        ));
    }
    Ok(out)
}
