//! Jobs: one atomic job x one commit x one run index, the unit an agent
//! leases. This module queues them ([`enqueue_pair`], [`enqueue_more_runs`]),
//! hears the agents ([`handlers`]) and takes jobs back from silent agents
//! ([`reaper`]); every change of a job's, a submission's or a pin's state
//! is [`lifecycle`]'s.
//!
//! States (`kbot_api::agent::JobState`): `queued` -> `leased` ->
//! `building`/`booting`/`running`/`uploading` (reported by the agent, in any
//! order) -> `finished` (result stored) | `failed` | `cancelled`. An expired
//! lease or an `infrastructure` failure puts the job back to `queued` with its
//! attempt counted; past `max_attempts` it fails with the reason recorded.
//! Every change is a row in `job_events`.

use kbot_api::agent::{FailureKind, JobState};
use kbot_core::job::AtomicJob;
use kbot_core::needs::Needs;

use crate::db::{Db, JsonText, Tx};
use crate::error::{Error, Result};
use crate::time::now_ms;

pub mod build_spec;
pub mod ended;
pub mod handlers;
pub mod initramfs;
pub mod lifecycle;
pub mod profile;

use lifecycle::Pinned;
pub mod reaper;
pub mod repro;
pub mod results;
pub mod summaries;

/// The literal behind [`ACTIVE_STATES_SQL`], for constants built from it.
macro_rules! active_states {
    () => {
        "('leased', 'building', 'booting', 'running', 'uploading')"
    };
}
/// States in which a job is held by an agent's lease, as an SQL list.
pub const ACTIVE_STATES_SQL: &str = active_states!();

/// Whether agent `$2` holds a job now: its lease of a job still active.
pub const HOLDS_JOB_SQL: &str = concat!(
    "EXISTS (SELECT 1 FROM jobs h WHERE h.lease_owner = $2 AND h.state IN ",
    active_states!(),
    ")"
);

kbot_api::wire_enum! {
    /// `submissions.state`: `active` until every job is settled (kept here,
    /// beside the jobs, as the comparisons and the cancelling read it too).
    pub enum SubmissionState {
        Active = "active",
        Done = "done",
        Cancelled = "cancelled",
    }
}

kbot_api::wire_enum! {
    /// `submissions.origin` (migration 0029): who queued a submission and
    /// why, so the one feature waiting for its end is told when it ends
    /// (`comparisons::OnEnded`) instead of asking.
    pub enum Origin {
        /// A person's submission (the API, the CLI, the dashboard).
        User = "user",
        /// A watched branch's new head against the last good one.
        Watch = "watch",
        /// A list's series: its base against its tip.
        Series = "series",
        /// Base against one patch of a series whose tip does not build.
        BuildProbe = "build_probe",
        /// A regression's job rerun on a fix or a retest (list commands,
        /// landed fixes).
        Recheck = "recheck",
        /// A bisection's probe runs.
        BisectProbe = "bisect_probe",
        /// A bisection's first bad commit against its parent.
        Verify = "verify",
    }
}

impl Origin {
    /// Whether a settled verdict of its pairs may report or start a
    /// bisection: a probe's or a recheck's is read by what queued it.
    pub fn judged(self) -> bool {
        matches!(self, Origin::User | Origin::Watch | Origin::Series)
    }

    /// The kind users see: only people's, watches' and series' pairs are
    /// judged for reports and bisections.
    pub fn kind(self) -> kbot_api::submissions::SubmissionKind {
        use kbot_api::submissions::SubmissionKind;
        match self {
            Origin::User | Origin::Series => SubmissionKind::User,
            Origin::Watch => SubmissionKind::Watch,
            Origin::BisectProbe => SubmissionKind::Bisect,
            Origin::BuildProbe | Origin::Recheck | Origin::Verify => SubmissionKind::Verify,
        }
    }
}

pub use kbot_api::submissions::Side;

/// Position inside a run: base first, so runs go base, head, base, head.
fn side_offset(side: Side) -> i64 {
    match side {
        Side::Base => 0,
        Side::Head => 1,
    }
}

/// The commits a submission compares; both are `commits.id` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    pub submission_id: i64,
    pub base_commit_id: i64,
    pub head_commit_id: i64,
}

/// Queues `runs` runs of every atomic job on both commits of `pair`, inside
/// the caller's transaction (the one that inserted the submission row).
///
/// Returns the `atomic_jobs.id` of each atomic job, in order. Jobs take the
/// submission's priority; each pair is pinned to one tbox group (the job
/// file's, or the first agent's to lease it) and ordered base, head, base,
/// head. Call [`crate::AppState::wake_lessees`] after committing.
///
/// Each run carries the atomic job's hardware needs
/// ([`kbot_core::needs::Needs`]), which the scheduler matches.
pub async fn enqueue_pair(
    tx: &mut Tx,
    pair: Pair,
    atomic_jobs: &[AtomicJob],
    runs: u32,
    max_attempts: u32,
) -> Result<Vec<i64>> {
    if runs == 0 {
        return Err(Error::BadRequest("runs must be at least 1".into()));
    }
    let priority = submission_priority(tx, pair.submission_id).await?;
    let first_position = next_position(tx, pair.submission_id).await?;
    let mut ids = Vec::with_capacity(atomic_jobs.len());
    for (i, job) in atomic_jobs.iter().enumerate() {
        let position = first_position + i64::try_from(i).unwrap_or(i64::MAX);
        let atomic_job_id = insert_atomic_job(tx, pair.submission_id, position, job).await?;
        let spec = JobSpec {
            pair,
            atomic_job_id,
            needs: &job.needs,
            priority,
            max_attempts,
        };
        insert_runs(tx, &spec, 0, runs).await?;
        ids.push(atomic_job_id);
    }
    Ok(ids)
}

/// Adds `extra_runs` runs of both sides to an atomic job (an `unknown`
/// verdict asks for more data). Returns how many jobs were queued.
/// An atomic job with its pair and the last run index it has, as
/// [`enqueue_more_runs`] reads it.
#[derive(sqlx::FromRow)]
struct MoreRunsRow {
    spec: String,
    submission_id: i64,
    base_commit_id: i64,
    head_commit_id: i64,
    priority: i64,
    last_run: i64,
}

pub async fn enqueue_more_runs(
    tx: &mut Tx,
    atomic_job_id: i64,
    extra_runs: u32,
    max_attempts: u32,
) -> Result<u64> {
    let row = sqlx::query_as::<_, MoreRunsRow>(
        "SELECT a.spec, s.id AS submission_id, s.base_commit_id, s.head_commit_id, \
                s.priority, (SELECT COALESCE(MAX(j.run_index), -1) FROM jobs j \
                             WHERE j.atomic_job_id = a.id) AS last_run \
         FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id \
         WHERE a.id = $1",
    )
    .bind(atomic_job_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| Error::not_found("atomic job", atomic_job_id))?;
    let job = parse_spec(atomic_job_id, &row.spec)?;
    let pair = Pair {
        submission_id: row.submission_id,
        base_commit_id: row.base_commit_id,
        head_commit_id: row.head_commit_id,
    };
    let spec = JobSpec {
        pair,
        atomic_job_id,
        needs: &job.needs,
        priority: row.priority,
        max_attempts,
    };
    let first = u32::try_from(row.last_run + 1).unwrap_or(0);
    insert_runs(tx, &spec, first, extra_runs).await?;
    Ok(u64::from(extra_runs) * 2)
}

/// A row for `job_events`.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub job_id: i64,
    pub agent_id: Option<i64>,
    pub state: JobState,
    pub failure: Option<FailureKind>,
    pub detail: &'a str,
}

/// Inserts an [`Event`]; binds with [`bind_event`].
pub const EVENT_SQL: &str =
    "INSERT INTO job_events (job_id, agent_id, at, state, failure, detail) \
     VALUES ($1, $2, $3, $4, $5, $6)";

/// Binds the parameters of [`EVENT_SQL`], in order.
pub fn bind_event<'q>(query: AnyQuery<'q>, event: &Event<'q>) -> AnyQuery<'q> {
    query
        .bind(event.job_id)
        .bind(event.agent_id)
        .bind(now_ms())
        .bind(event.state.as_str())
        .bind(event.failure.map(failure_str))
        .bind(truncate(event.detail, MAX_DETAIL_BYTES))
}

/// A query over the `Any` driver, for helpers that bind part of one.
pub type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Appends a row to `job_events`.
pub async fn record_event(tx: &mut Tx, event: Event<'_>) -> Result<()> {
    bind_event(sqlx::query(EVENT_SQL), &event)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Event details are log tails; longer ones are cut (at a char boundary).
pub const MAX_DETAIL_BYTES: usize = 16 * 1024;

pub fn truncate(text: &str, max: usize) -> &str {
    kbot_core::text::head(text, max)
}

pub fn failure_str(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::BuildFailed => "build_failed",
        FailureKind::BootFailed => "boot_failed",
        FailureKind::Timeout => "timeout",
        FailureKind::Incomplete => "incomplete",
        FailureKind::Infrastructure => "infrastructure",
    }
}

/// Records that job `job_id` runs the kernel of build `build_id` (not
/// written again when unchanged: a waiting job asks every few seconds).
pub async fn link_build(tx: &mut Tx, job_id: i64, build_id: i64) -> Result<()> {
    sqlx::query(
        "UPDATE jobs SET build_id = $1 WHERE id = $2 AND (build_id IS NULL OR build_id <> $1)",
    )
    .bind(build_id)
    .bind(job_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// How many queued runs (of any tbox group) the scheduler serves before
/// the first queued run of submission `id`; `None` when it has none queued.
pub async fn runs_ahead(db: &Db, id: i64) -> Result<Option<i64>> {
    let first: Option<(i64, i64, i64)> = sqlx::query_as(
        "SELECT priority, seq, id FROM jobs WHERE submission_id = $1 AND state = 'queued' \
         ORDER BY priority DESC, seq, id LIMIT 1",
    )
    .bind(id)
    .fetch_optional(db.read())
    .await?;
    let Some((priority, seq, job)) = first else {
        return Ok(None);
    };
    let ahead: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM jobs WHERE state = 'queued' AND (priority > $1 \
         OR (priority = $1 AND (seq < $2 OR (seq = $2 AND id < $3))))",
    )
    .bind(priority)
    .bind(seq)
    .bind(job)
    .fetch_one(db.read())
    .await?;
    Ok(Some(ahead))
}

/// When a submission's last run may be done, at the lab's recent pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eta {
    /// Runs to go: queued runs served before this submission's, and its own
    /// runs not yet finished.
    pub runs: i64,
    /// Runs the whole lab finished in the last hour.
    pub per_hour: i64,
}

impl Eta {
    /// Seconds until the submission's last run is done at that pace.
    pub fn secs(&self) -> i64 {
        self.runs * 3600 / self.per_hour.max(1)
    }

    /// `about 25 min (47 runs to go at the 110 runs an hour the lab finished
    /// in the last hour)`.
    pub fn text(&self) -> String {
        let secs = self.secs();
        let when = match secs {
            s if s < 90 => String::from("about a minute"),
            s if s < 5400 => format!("about {} min", (s + 30) / 60),
            s => format!("about {:.1} h", s as f64 / 3600.0),
        };
        format!(
            "{when} ({} run{} to go at the {} run{} an hour the lab finished in the last hour)",
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            self.per_hour,
            if self.per_hour == 1 { "" } else { "s" },
        )
    }
}

/// [`Eta`] of submission `id` at `now_ms`, with `ahead` its
/// [`runs_ahead`]: `None` when it has no run left, or when no run finished
/// anywhere in the last hour (no pace to go by).
pub async fn eta(db: &Db, id: i64, ahead: Option<i64>, now_ms: i64) -> Result<Option<Eta>> {
    let own: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM jobs WHERE submission_id = $1 \
         AND (state = 'queued' OR state IN {ACTIVE_STATES_SQL})"
    ))
    .bind(id)
    .fetch_one(db.read())
    .await?;
    if own == 0 {
        return Ok(None);
    }
    let per_hour: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM jobs WHERE finished_at >= $1 AND state IN ('finished', 'failed')",
    )
    .bind(now_ms - 3_600_000)
    .fetch_one(db.read())
    .await?;
    if per_hour == 0 {
        return Ok(None);
    }
    Ok(Some(Eta {
        runs: ahead.unwrap_or(0) + own,
        per_hour,
    }))
}

/// `testcase/path_params` (LKP's result-path naming of an atomic job): the
/// job label pages show and the per-commit summaries are keyed by.
pub fn job_label(job: Option<&AtomicJob>) -> String {
    match job {
        Some(job) => format!("{}/{}", job.testcase, job.path_params()),
        None => String::from("?"),
    }
}

/// An `atomic_jobs.spec` as stored (the atomic job as JSON).
pub fn parse_spec(atomic_job_id: i64, spec: &str) -> Result<AtomicJob> {
    serde_json::from_str(spec).map_err(|e| {
        anyhow::anyhow!("stored atomic job {atomic_job_id} is not valid JSON: {e}").into()
    })
}

struct JobSpec<'a> {
    pair: Pair,
    atomic_job_id: i64,
    needs: &'a Needs,
    priority: i64,
    max_attempts: u32,
}

async fn insert_runs(tx: &mut Tx, spec: &JobSpec<'_>, first_run: u32, runs: u32) -> Result<()> {
    for run in first_run..first_run.saturating_add(runs) {
        for side in [Side::Base, Side::Head] {
            let commit_id = match side {
                Side::Base => spec.pair.base_commit_id,
                Side::Head => spec.pair.head_commit_id,
            };
            insert_job(tx, spec, commit_id, side, run).await?;
        }
    }
    Ok(())
}

async fn insert_job(
    tx: &mut Tx,
    spec: &JobSpec<'_>,
    commit_id: i64,
    side: Side,
    run: u32,
) -> Result<()> {
    let now = now_ms();
    sqlx::query(
        "INSERT INTO jobs (submission_id, atomic_job_id, commit_id, side, run_index, seq, \
             need_arch, need_threads, need_memory_bytes, need_page_size, priority, state, \
             attempts, max_attempts, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'queued', 0, $12, $13, $14)",
    )
    .bind(spec.pair.submission_id)
    .bind(spec.atomic_job_id)
    .bind(commit_id)
    .bind(side.as_str())
    .bind(i64::from(run))
    .bind(2 * i64::from(run) + side_offset(side))
    .bind(spec.needs.arch.as_deref())
    .bind(spec.needs.cpus.map(i64::from))
    .bind(spec.needs.memory_bytes.map(saturating_i64))
    .bind(spec.needs.page_size.map(saturating_i64))
    .bind(spec.priority)
    .bind(i64::from(spec.max_attempts.max(1)))
    .bind(now)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Adds an atomic job to a submission without queueing runs, pinned to a
/// tbox group and preferring an agent (a bisection's probe job follows the
/// pair it bisects onto the same machines). Returns its id.
pub async fn add_pinned_atomic_job(
    tx: &mut Tx,
    submission_id: i64,
    job: &AtomicJob,
    tbox_group: &str,
    preferred_agent_id: Option<i64>,
) -> Result<i64> {
    let position = next_position(tx, submission_id).await?;
    let id = insert_atomic_job(tx, submission_id, position, job).await?;
    lifecycle::pin(tx, Pinned::AtomicJob(id), tbox_group, preferred_agent_id).await?;
    Ok(id)
}

/// Queues `runs` more runs of one commit of an atomic job (a bisection
/// probe), numbered after the runs that commit already has. Returns how many
/// were queued.
/// An atomic job with the last run index one commit has, as
/// [`enqueue_commit_runs`] reads it.
#[derive(sqlx::FromRow)]
struct CommitRunsRow {
    spec: String,
    submission_id: i64,
    priority: i64,
    last_run: i64,
}

pub async fn enqueue_commit_runs(
    tx: &mut Tx,
    atomic_job_id: i64,
    commit_id: i64,
    runs: u32,
    max_attempts: u32,
) -> Result<u32> {
    let row = sqlx::query_as::<_, CommitRunsRow>(
        "SELECT a.spec, a.submission_id, s.priority, (SELECT COALESCE(MAX(j.run_index), -1) \
             FROM jobs j WHERE j.atomic_job_id = a.id AND j.commit_id = $1) AS last_run \
         FROM atomic_jobs a JOIN submissions s ON s.id = a.submission_id WHERE a.id = $2",
    )
    .bind(commit_id)
    .bind(atomic_job_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| Error::not_found("atomic job", atomic_job_id))?;
    let job = parse_spec(atomic_job_id, &row.spec)?;
    let spec = JobSpec {
        pair: Pair {
            submission_id: row.submission_id,
            base_commit_id: commit_id,
            head_commit_id: commit_id,
        },
        atomic_job_id,
        needs: &job.needs,
        priority: row.priority,
        max_attempts,
    };
    let first = u32::try_from(row.last_run + 1).unwrap_or(0);
    for run in first..first.saturating_add(runs) {
        insert_job(tx, &spec, commit_id, Side::Head, run).await?;
    }
    Ok(runs)
}

async fn submission_priority(tx: &mut Tx, submission_id: i64) -> Result<i64> {
    sqlx::query_scalar("SELECT priority FROM submissions WHERE id = $1")
        .bind(submission_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| Error::not_found("submission", submission_id))
}

async fn next_position(tx: &mut Tx, submission_id: i64) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COALESCE(MAX(position), -1) + 1 AS next FROM atomic_jobs WHERE submission_id = $1",
    )
    .bind(submission_id)
    .fetch_one(&mut **tx)
    .await?)
}

async fn insert_atomic_job(
    tx: &mut Tx,
    submission_id: i64,
    position: i64,
    job: &AtomicJob,
) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO atomic_jobs (submission_id, position, spec, testcase, tbox_group, kconfig, compiler) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
    )
    .bind(submission_id)
    .bind(position)
    .bind(JsonText(job))
    .bind(&job.testcase)
    .bind(job.tbox_group.as_deref())
    .bind(&job.kconfig)
    .bind(&job.compiler)
    .fetch_one(&mut **tx)
    .await?)
}

/// A byte count as a BIGINT column holds it.
pub fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("hello", 10), "hello");
    }

    #[test]
    fn eta_reads_in_minutes_then_hours() {
        let eta = |runs, per_hour| Eta { runs, per_hour }.text();
        assert_eq!(
            eta(47, 110),
            "about 26 min (47 runs to go at the 110 runs an hour the lab finished in the last hour)"
        );
        assert!(
            eta(1, 120).starts_with("about a minute (1 run to go"),
            "{}",
            eta(1, 120)
        );
        assert!(eta(300, 60).starts_with("about 5.0 h"), "{}", eta(300, 60));
    }
}
