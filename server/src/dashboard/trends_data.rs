//! The trend page's queries: the watched branches, a branch's tested
//! commits in order, their runs' samples of one metric, and the reports
//! and bisections that point at them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sqlx::Row;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::jobs::parse_spec;

use super::views::job_label;

/// The finished jobs of one watched branch (`$1` repo, `$2` branch) on one
/// tbox group (`$3`, `$4`; '' for any): [`BRANCH_FROM`], then any joins,
/// then [`BRANCH_WHERE`].
const BRANCH_FROM: &str = "FROM jobs j JOIN submissions s ON s.id = j.submission_id \
     JOIN watches w ON w.id = s.watch_id JOIN repos r ON r.id = w.repo_id \
     JOIN atomic_jobs a ON a.id = j.atomic_job_id";
const BRANCH_WHERE: &str = "WHERE r.name = $1 AND w.branch = $2 AND s.kind = 'watch' \
     AND j.state = 'finished' AND ($3 = '' OR a.tbox_group = $4)";

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
    let rows = sqlx::query(&format!(
        "SELECT DISTINCT COALESCE(a.tbox_group, '') AS g {BRANCH_FROM} {BRANCH_WHERE} ORDER BY 1"
    ))
    .bind(repo)
    .bind(branch)
    .bind("")
    .bind("")
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| row.try_get::<String, _>("g").map_err(Error::from))
        .filter(|g| g.as_ref().map_or(true, |g| !g.is_empty()))
        .collect()
}

/// A commit of the branch that has runs.
#[derive(Debug, Clone)]
pub struct TrendCommit {
    pub id: i64,
    pub sha: String,
    pub subject: String,
}

/// The branch's commits with finished runs, in the order the robot first
/// ran them (a watch tests each new head after the last one).
pub async fn commits(db: &Db, repo: &str, branch: &str, group: &str) -> Result<Vec<TrendCommit>> {
    let rows = sqlx::query(&format!(
        "SELECT t.commit_id, c.sha, c.subject FROM \
           (SELECT j.commit_id, MIN(j.id) AS first_job {BRANCH_FROM} {BRANCH_WHERE} \
            GROUP BY j.commit_id) t \
         JOIN commits c ON c.id = t.commit_id ORDER BY t.first_job"
    ))
    .bind(repo)
    .bind(branch)
    .bind(group)
    .bind(group)
    .fetch_all(db.read())
    .await?;
    rows.iter()
        .map(|row| {
            Ok(TrendCommit {
                id: row.try_get("commit_id")?,
                sha: row.try_get("sha")?,
                subject: row.try_get("subject")?,
            })
        })
        .collect()
}

/// Samples of the window's commits: per job label, per commit id, per
/// metric, one value per run; and every metric name seen.
#[derive(Debug, Default)]
pub struct WindowSamples {
    pub by_job: BTreeMap<String, HashMap<i64, BTreeMap<String, Vec<f64>>>>,
    pub metrics: BTreeSet<String>,
}

/// Loads the runs of `commit_ids` (a window of at most a few hundred).
pub async fn samples(
    db: &Db,
    repo: &str,
    branch: &str,
    group: &str,
    commit_ids: &[i64],
) -> Result<WindowSamples> {
    let mut out = WindowSamples::default();
    if commit_ids.is_empty() {
        return Ok(out);
    }
    // Placeholders after BRANCH_WHERE's four; the ids are bound, not spliced.
    let list = (0..commit_ids.len())
        .map(|i| format!("${}", i + 5))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT j.commit_id, a.id AS atomic_job_id, a.spec, res.id AS result_id, res.metrics \
         {BRANCH_FROM} JOIN results res ON res.job_id = j.id \
         {BRANCH_WHERE} AND j.commit_id IN ({list})"
    );
    let mut query = sqlx::query(&sql)
        .bind(repo)
        .bind(branch)
        .bind(group)
        .bind(group);
    for id in commit_ids {
        query = query.bind(*id);
    }
    let rows = query.fetch_all(db.read()).await?;
    let mut labels: HashMap<i64, String> = HashMap::new();
    for row in &rows {
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
            .entry(row.try_get("commit_id")?)
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
