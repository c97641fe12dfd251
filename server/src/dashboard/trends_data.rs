//! The trend page's queries: the watched branches, a branch's tested
//! commits in order, their runs' samples of one metric, and the reports
//! and bisections that point at them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sqlx::Row;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::jobs::parse_spec;

use super::views::job_label;

/// A watched branch.
pub struct Watched {
    pub repo: String,
    pub branch: String,
}

pub async fn watched(db: &Db) -> Result<Vec<Watched>> {
    let rows = sqlx::query(
        "SELECT DISTINCT r.name AS repo, w.branch FROM watches w JOIN repos r ON r.id = w.repo_id \
         ORDER BY r.name, w.branch",
    )
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Watched {
                repo: row.try_get("repo")?,
                branch: row.try_get("branch")?,
            })
        })
        .collect()
}

/// The tbox groups a branch's runs used.
pub async fn groups(db: &Db, repo: &str, branch: &str) -> Result<Vec<String>> {
    let rows = sqlx::query(
        "SELECT DISTINCT a.tbox_group AS g FROM watches w JOIN repos r ON r.id = w.repo_id \
         JOIN submissions s ON s.watch_id = w.id JOIN atomic_jobs a ON a.submission_id = s.id \
         WHERE r.name = $1 AND w.branch = $2 AND s.kind = 'watch' AND a.tbox_group IS NOT NULL \
         ORDER BY 1",
    )
    .bind(repo)
    .bind(branch)
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| row.try_get::<String, _>("g").map_err(Error::from))
        .collect()
}

/// A commit of the branch the robot tested.
#[derive(Debug, Clone)]
pub struct TrendCommit {
    pub id: i64,
    pub sha: String,
    pub subject: String,
    /// The watch submissions it is a side of.
    pub submissions: Vec<i64>,
}

/// The branch's tested commits in the order the robot tested them (a
/// watch compares each new head with the last good one): every watch
/// pair's base, then its head, oldest pair first.
pub async fn commits(db: &Db, repo: &str, branch: &str, group: &str) -> Result<Vec<TrendCommit>> {
    // Through the watches (index submissions_watch), never by scanning
    // every finished job; `$3`/`$4` narrow to one tbox group ('' for any).
    let rows = sqlx::query(
        "SELECT s.id, s.base_commit_id, cb.sha AS base_sha, cb.subject AS base_subject, \
                s.head_commit_id, ch.sha AS head_sha, ch.subject AS head_subject \
         FROM watches w JOIN repos r ON r.id = w.repo_id \
         JOIN submissions s ON s.watch_id = w.id \
         JOIN commits cb ON cb.id = s.base_commit_id JOIN commits ch ON ch.id = s.head_commit_id \
         WHERE r.name = $1 AND w.branch = $2 AND s.kind = 'watch' \
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
    let mut index: HashMap<i64, usize> = HashMap::new();
    for row in &rows {
        let submission: i64 = row.try_get("id")?;
        for side in ["base", "head"] {
            let id: i64 = row.try_get(format!("{side}_commit_id").as_str())?;
            let at = match index.get(&id) {
                Some(&at) => at,
                None => {
                    out.push(TrendCommit {
                        id,
                        sha: row.try_get(format!("{side}_sha").as_str())?,
                        subject: row.try_get(format!("{side}_subject").as_str())?,
                        submissions: Vec::new(),
                    });
                    index.insert(id, out.len() - 1);
                    out.len() - 1
                }
            };
            out[at].submissions.push(submission);
        }
    }
    Ok(out)
}

/// Samples of the window's commits: per job label, per commit id, per
/// metric, one value per run; and every metric name seen.
#[derive(Debug, Default)]
pub struct WindowSamples {
    pub by_job: BTreeMap<String, HashMap<i64, BTreeMap<String, Vec<f64>>>>,
    pub metrics: BTreeSet<String>,
}

/// Loads the finished runs of `commits` (a window of at most a few
/// hundred) on `group`, through their watch submissions.
pub async fn samples(db: &Db, group: &str, commits: &[TrendCommit]) -> Result<WindowSamples> {
    let mut out = WindowSamples::default();
    let wanted: BTreeSet<i64> = commits.iter().map(|c| c.id).collect();
    let submissions: BTreeSet<i64> = commits
        .iter()
        .flat_map(|c| c.submissions.iter().copied())
        .collect();
    if submissions.is_empty() {
        return Ok(out);
    }
    // Placeholders after the group's two; the ids are bound, not spliced.
    let list = (0..submissions.len())
        .map(|i| format!("${}", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT j.commit_id, a.id AS atomic_job_id, a.spec, res.id AS result_id, res.metrics \
         FROM jobs j JOIN atomic_jobs a ON a.id = j.atomic_job_id \
         JOIN results res ON res.job_id = j.id \
         WHERE j.submission_id IN ({list}) AND j.state = 'finished' \
           AND ($1 = '' OR a.tbox_group = $2)"
    );
    let mut query = sqlx::query(&sql).bind(group).bind(group);
    for id in &submissions {
        query = query.bind(*id);
    }
    let rows = query.fetch_all(db.read()).await?;
    let mut labels: HashMap<i64, String> = HashMap::new();
    for row in &rows {
        let commit_id: i64 = row.try_get("commit_id")?;
        if !wanted.contains(&commit_id) {
            continue;
        }
        let atomic_job_id: i64 = row.try_get("atomic_job_id")?;
        if let std::collections::hash_map::Entry::Vacant(e) = labels.entry(atomic_job_id) {
            let job = parse_spec(atomic_job_id, &row.try_get::<String, _>("spec")?)?;
            e.insert(job_label(Some(&job)));
        }
        let label = labels.get(&atomic_job_id).cloned().unwrap_or_default();
        let result_id: i64 = row.try_get("result_id")?;
        let metrics =
            crate::jobs::results::parse_metrics(result_id, &row.try_get::<String, _>("metrics")?)?;
        let commit = out
            .by_job
            .entry(label)
            .or_default()
            .entry(commit_id)
            .or_default();
        for (name, value) in metrics {
            out.metrics.insert(name.clone());
            commit.entry(name).or_default().push(value);
        }
    }
    Ok(out)
}

/// What a commit's ◆ links to: (commit id, href, description).
pub async fn links(
    db: &Db,
    repo: &str,
    branch: &str,
    group: &str,
    metric: &str,
) -> Result<Vec<(i64, String, String)>> {
    let mut out = Vec::new();
    let bisections = sqlx::query(
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
    for row in &bisections {
        let id: i64 = row.try_get("id")?;
        let state: String = row.try_get("state")?;
        out.push((
            row.try_get("commit_id")?,
            format!("/bisections/{id}"),
            format!("bisection {id} ({state})"),
        ));
    }
    let reports = sqlx::query(
        "SELECT o.message_id, o.subject, s.head_commit_id FROM report_outbox o \
         JOIN submissions s ON s.id = o.submission_id JOIN watches w ON w.id = s.watch_id \
         JOIN repos r ON r.id = w.repo_id \
         WHERE o.kind = 'regression' AND r.name = $1 AND w.branch = $2 ORDER BY o.id",
    )
    .bind(repo)
    .bind(branch)
    .fetch_all(db.read())
    .await?;
    for row in &reports {
        let message_id: String = row.try_get("message_id")?;
        let subject: String = row.try_get("subject")?;
        out.push((
            row.try_get("head_commit_id")?,
            format!("/reports/{message_id}"),
            format!("report: {subject}"),
        ));
    }
    Ok(out)
}
