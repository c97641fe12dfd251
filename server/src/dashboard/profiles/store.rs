//! The profiles of each side of a comparison (`result_profiles`, written
//! by `profiles::insert`), and the pairs and bisection steps compared.

use crate::db::Db;
use crate::error::{Error, Result};
use crate::repos::{commit_by_id, StoredCommit};

/// The runs of one side of a comparison: those of any of `atomic_job_ids`
/// at `commit_id`.
#[derive(Debug, Clone)]
pub struct Side {
    pub atomic_job_ids: Vec<i64>,
    pub commit_id: i64,
}

/// A stored profile.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredProfile {
    pub event: String,
    pub folded: String,
}

/// The profiles of a side's finished runs, in run order.
pub async fn profiles(db: &Db, side: &Side) -> Result<Vec<StoredProfile>> {
    let mut out = Vec::new();
    for &atomic_job_id in &side.atomic_job_ids {
        let rows = sqlx::query_as::<_, StoredProfile>(
            "SELECT p.event, p.folded FROM jobs j \
             JOIN results r ON r.job_id = j.id \
             JOIN result_profiles p ON p.result_id = r.id \
             WHERE j.atomic_job_id = $1 AND j.commit_id = $2 AND j.state = 'finished' \
             ORDER BY j.id",
        )
        .bind(atomic_job_id)
        .bind(side.commit_id)
        .fetch_all(db.read())
        .await?;
        out.extend(rows);
    }
    Ok(out)
}

/// Two sides to compare, with what the page says of them.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The job (`testcase/params`, or a bisection's job key).
    pub job: String,
    pub base: Side,
    pub head: Side,
    pub base_commit: StoredCommit,
    pub head_commit: StoredCommit,
}

/// Runs of either side of `c` still queued or under way: a page without a
/// profile says it is not there yet rather than that none was taken.
pub async fn pending_runs(db: &Db, c: &Comparison) -> Result<i64> {
    let mut pending = 0;
    for side in [&c.base, &c.head] {
        for atomic in &side.atomic_job_ids {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM jobs WHERE atomic_job_id = $1 AND commit_id = $2 \
                 AND state NOT IN ('finished', 'failed', 'cancelled')",
            )
            .bind(atomic)
            .bind(side.commit_id)
            .fetch_one(db.read())
            .await?;
            pending += n;
        }
    }
    Ok(pending)
}

/// What [`pair`] reads.
#[derive(sqlx::FromRow)]
struct PairRow {
    atomic_job_id: i64,
    spec: String,
    base_commit_id: i64,
    head_commit_id: i64,
}

/// The pair of the atomic job at `position` of submission `submission_id`:
/// its runs at the submission's base against those at its head.
pub async fn pair(db: &Db, submission_id: i64, position: i64) -> Result<Comparison> {
    let row = sqlx::query_as::<_, PairRow>(
        "SELECT a.id AS atomic_job_id, a.spec, s.base_commit_id, s.head_commit_id \
         FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id \
         WHERE a.submission_id = $1 AND a.position = $2",
    )
    .bind(submission_id)
    .bind(position)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("job", format!("{position} of submission {submission_id}")))?;
    Ok(Comparison {
        job: job_label(row.atomic_job_id, &row.spec)?,
        base: Side {
            atomic_job_ids: vec![row.atomic_job_id],
            commit_id: row.base_commit_id,
        },
        head: Side {
            atomic_job_ids: vec![row.atomic_job_id],
            commit_id: row.head_commit_id,
        },
        base_commit: commit_by_id(db.read(), row.base_commit_id).await?,
        head_commit: commit_by_id(db.read(), row.head_commit_id).await?,
    })
}

/// What [`step`] reads.
#[derive(sqlx::FromRow)]
struct StepRow {
    origin_atomic_job_id: i64,
    probe_atomic_job_id: Option<i64>,
    good_commit_id: i64,
    commit_id: i64,
    job_key: String,
    tbox_group: String,
}

/// Step `index` of bisection `bisection_id`: the runs at the range's good
/// end (the origin pair's and any probe's there) against the probe runs at
/// the step's commit, as the step's change is measured.
pub async fn step(db: &Db, bisection_id: i64, index: i64) -> Result<Comparison> {
    let row = sqlx::query_as::<_, StepRow>(
        "SELECT b.origin_atomic_job_id, b.probe_atomic_job_id, b.good_commit_id, s.commit_id, \
                b.job_key, b.tbox_group \
         FROM bisection_steps s JOIN bisections b ON b.id = s.bisection_id \
         WHERE s.bisection_id = $1 AND s.idx = $2",
    )
    .bind(bisection_id)
    .bind(index)
    .fetch_optional(db.read())
    .await?
    .ok_or_else(|| Error::not_found("step", format!("{index} of bisection {bisection_id}")))?;
    let jobs: Vec<i64> = std::iter::once(row.origin_atomic_job_id)
        .chain(row.probe_atomic_job_id)
        .collect();
    Ok(Comparison {
        job: format!("{} on {}", row.job_key, row.tbox_group),
        base: Side {
            atomic_job_ids: jobs.clone(),
            commit_id: row.good_commit_id,
        },
        head: Side {
            atomic_job_ids: jobs,
            commit_id: row.commit_id,
        },
        base_commit: commit_by_id(db.read(), row.good_commit_id).await?,
        head_commit: commit_by_id(db.read(), row.commit_id).await?,
    })
}

/// `testcase/path_params`, the label every page gives an atomic job (as
/// `jobs::job_label`, a feature this one comes before).
fn job_label(atomic_job_id: i64, spec: &str) -> Result<String> {
    let job: kbot_core::job::AtomicJob = serde_json::from_str(spec).map_err(|e| {
        Error::Other(anyhow::anyhow!(
            "stored atomic job {atomic_job_id} is not valid JSON: {e}"
        ))
    })?;
    Ok(format!("{}/{}", job.testcase, job.path_params()))
}
