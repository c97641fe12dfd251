//! Rows a load run (or a test) needs before agents can lease anything: a
//! repository, two commits, a user and submissions with queued job pairs.
//! Written straight to the store with the same functions the server uses.

use kbot_core::job::{parse_job_file, AtomicJob};
use sqlx::Row;

use kbot_server::db::Db;
use kbot_server::error::{Error, Result};
use kbot_server::jobs::{self, Pair};
use kbot_server::time::now_ms;

/// A small real job file: lmbench3's bw_pipe at two message sizes.
pub const LOAD_JOB_FILE: &str = "\
testcase: bw_pipe
bw_pipe:
  size: [64k, 4k]
runs: 3
";

/// What [`submission`] created.
#[derive(Debug, Clone)]
pub struct Seeded {
    pub submission_id: i64,
    pub atomic_job_ids: Vec<i64>,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
}

/// Parses a job file, turning its error into a bad-request error.
pub fn atomic_jobs(job_file: &str) -> Result<Vec<AtomicJob>> {
    parse_job_file(job_file).map_err(|e| Error::BadRequest(e.to_string()))
}

/// Creates (or reuses) repo `repo`, two commits `base`/`head` in it, user
/// `user`, and a submission of `job_file` with `runs` runs per side of
/// every atomic job, all queued.
pub async fn submission(
    db: &Db,
    repo: &str,
    user: &str,
    job_file: &str,
    runs: u32,
    priority: i64,
) -> Result<Seeded> {
    let (base, head) = (format!("{:040x}", 0xb0), format!("{:040x}", 0xb1));
    submission_at(db, repo, user, job_file, runs, priority, (&base, &head)).await
}

/// [`submission`] of the pair `(base_sha, head_sha)`, each commit created
/// in `repo` or reused.
pub async fn submission_at(
    db: &Db,
    repo: &str,
    user: &str,
    job_file: &str,
    runs: u32,
    priority: i64,
    (base_sha, head_sha): (&str, &str),
) -> Result<Seeded> {
    let atomic = atomic_jobs(job_file)?;
    let now = now_ms();
    let mut tx = db.begin().await?;
    let repo_id: i64 = sqlx::query(
        "INSERT INTO repos (name, url, default_branch, created_at) VALUES ($1, $2, 'master', $3) \
         ON CONFLICT (name) DO UPDATE SET url = excluded.url RETURNING id",
    )
    .bind(repo)
    .bind(format!("https://example.invalid/{repo}.git"))
    .bind(now)
    .fetch_one(&mut *tx)
    .await?
    .try_get("id")?;
    let mut commit_ids = Vec::new();
    for (sha, subject) in [(base_sha, "base commit"), (head_sha, "head commit")] {
        let id: i64 = sqlx::query(
            "INSERT INTO commits (repo_id, sha, parents, subject, author_name, author_email, \
                 authored_at, committed_at) \
             VALUES ($1, $2, '', $3, 'Load Tester', 'load@example.invalid', $4, $5) \
             ON CONFLICT (repo_id, sha) DO UPDATE SET subject = excluded.subject RETURNING id",
        )
        .bind(repo_id)
        .bind(sha)
        .bind(subject)
        .bind(now)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?
        .try_get("id")?;
        commit_ids.push(id);
    }
    let user_id: i64 = sqlx::query(
        "INSERT INTO users (name, created_at) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id",
    )
    .bind(user)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?
    .try_get("id")?;
    let submission_id: i64 = sqlx::query(
        "INSERT INTO submissions (user_id, repo_id, job_name, job_file, base_commit_id, \
             head_commit_id, priority, runs_cap, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(user_id)
    .bind(repo_id)
    .bind("load")
    .bind(job_file)
    .bind(commit_ids[0])
    .bind(commit_ids[1])
    .bind(priority)
    .bind(i64::from(runs) * 4)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?
    .try_get("id")?;
    let pair = Pair {
        submission_id,
        base_commit_id: commit_ids[0],
        head_commit_id: commit_ids[1],
    };
    let atomic_job_ids = jobs::enqueue_pair(&mut tx, pair, &atomic, runs, 3).await?;
    tx.commit().await?;
    Ok(Seeded {
        submission_id,
        atomic_job_ids,
        base_commit_id: pair.base_commit_id,
        head_commit_id: pair.head_commit_id,
    })
}

/// Caps a seeded submission at `runs_cap` runs per side; at the runs it has,
/// the comparisons settle each pair on its first results instead of
/// queueing more runs.
pub async fn cap_runs(db: &Db, submission_id: i64, runs_cap: u32) -> Result<()> {
    sqlx::query("UPDATE submissions SET runs_cap = $1 WHERE id = $2")
        .bind(i64::from(runs_cap))
        .bind(submission_id)
        .execute(db.write())
        .await?;
    Ok(())
}
