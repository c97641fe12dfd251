//! Every change of a job's state, a submission's state and a pair's pins,
//! in one place: the scheduler's lease, the agents' progress, failures and
//! results, the reaper's and a failure's requeue, cancelling, settling an
//! atomic job and closing a bisection's probes. Other modules call these;
//! none writes `jobs.state`, `submissions.state`/`in_flight` or
//! `atomic_jobs` pins and settlement itself.
//!
//! A submission is done under one condition (`finish_if_done`): nothing
//! of it is queued or held by an agent, and every atomic job of it is
//! settled (its comparison final, or its bisection over). A submission
//! that ends (done or cancelled) becomes due to be told to its origin
//! ([`super::ended`]).
//!
//! Writes lock rows in the order jobs, atomic_jobs, submissions, agents, so
//! concurrent leases and releases cannot deadlock.

use kbot_api::agent::{FailureKind, JobState};

use super::{
    bind_event, failure_str, record_event, truncate, Event, SubmissionState, ACTIVE_STATES_SQL,
    EVENT_SQL, HOLDS_JOB_SQL, MAX_DETAIL_BYTES,
};
use crate::agents;
use crate::db::{join_writes, Tx};
use crate::error::{Error, Result};
use crate::time::now_ms;

/// A queued job an agent took: what its lease needs to know.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claim {
    #[sqlx(rename = "id")]
    pub job_id: i64,
    pub submission_id: i64,
    pub atomic_job_id: i64,
    pub commit_id: i64,
    pub run_index: i64,
    pub attempts: i64,
    pub lease_expires_at: i64,
}

/// Leases job `job_id` to agent `agent_id` until `now + lease_ms` if it is
/// still queued, counting the attempt.
pub async fn lease(
    tx: &mut Tx,
    agent_id: i64,
    job_id: i64,
    lease_ms: i64,
    now: i64,
) -> Result<Option<Claim>> {
    Ok(sqlx::query_as::<_, Claim>(
        "UPDATE jobs SET state = 'leased', lease_owner = $1, lease_expires_at = $2, \
             attempts = attempts + 1, updated_at = $3 \
         WHERE id = $4 AND state = 'queued' \
         RETURNING id, submission_id, atomic_job_id, commit_id, run_index, attempts, lease_expires_at",
    )
    .bind(agent_id)
    .bind(now + lease_ms)
    .bind(now)
    .bind(job_id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// The bookkeeping of a lease (one round trip): the submission's fair-share
/// counter, the agent busy, and `event`.
pub async fn leased(tx: &mut Tx, claim: &Claim, event: Event<'_>, now: i64) -> Result<()> {
    let sql = join_writes(
        tx,
        &[
            "UPDATE submissions SET in_flight = in_flight + 1 WHERE id = $1",
            agents::BUSY_SQL,
            EVENT_SQL,
        ],
    );
    let query = sqlx::query(&sql)
        .bind(claim.submission_id)
        .bind(now)
        .bind(event.agent_id);
    bind_event(query, &event).execute(&mut **tx).await?;
    Ok(())
}

/// What a pin applies to: one atomic job, or every one of a submission.
#[derive(Debug, Clone, Copy)]
pub enum Pinned {
    AtomicJob(i64),
    Submission(i64),
}

/// Pins atomic jobs to `tbox_group`, preferring `agent_id` (a bisection's
/// probe, a verification, a recheck follow the pair onto its machines).
pub async fn pin(tx: &mut Tx, what: Pinned, tbox_group: &str, agent_id: Option<i64>) -> Result<()> {
    let (column, id) = match what {
        Pinned::AtomicJob(id) => ("id", id),
        Pinned::Submission(id) => ("submission_id", id),
    };
    sqlx::query(&format!(
        "UPDATE atomic_jobs SET tbox_group = $1, \
             preferred_agent_id = COALESCE($2, preferred_agent_id) WHERE {column} = $3"
    ))
    .bind(tbox_group)
    .bind(agent_id)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Pins atomic job `atomic_job_id` to the leasing agent's `tbox_group` and
/// to the agent, where not yet pinned; returns the group it is pinned to
/// (another one when a concurrent lease pinned it first).
pub async fn pin_to_agent(
    tx: &mut Tx,
    atomic_job_id: i64,
    tbox_group: &str,
    agent_id: i64,
) -> Result<String> {
    Ok(sqlx::query_scalar(
        "UPDATE atomic_jobs SET \
             tbox_group = COALESCE(tbox_group, $1), \
             preferred_agent_id = COALESCE(preferred_agent_id, $2) \
         WHERE id = $3 RETURNING tbox_group",
    )
    .bind(tbox_group)
    .bind(agent_id)
    .bind(atomic_job_id)
    .fetch_one(&mut **tx)
    .await?)
}

/// The lease's owner reports a phase (`building`, `booting`, ...); false
/// when `agent_id` does not hold the job in an active state.
pub async fn progress(tx: &mut Tx, job_id: i64, agent_id: i64, state: JobState) -> Result<bool> {
    let updated = sqlx::query(&format!(
        "UPDATE jobs SET state = $1, updated_at = $2 \
         WHERE id = $3 AND lease_owner = $4 AND state IN {ACTIVE_STATES_SQL}"
    ))
    .bind(state.as_str())
    .bind(now_ms())
    .bind(job_id)
    .bind(agent_id)
    .execute(&mut **tx)
    .await?;
    Ok(updated.rows_affected() > 0)
}

/// Fails the job agent `agent_id` holds for good (the kernel's fault, not
/// the machine's) and releases its slot.
pub async fn fail(
    tx: &mut Tx,
    (job_id, agent_id, submission_id): (i64, i64, i64),
    failure: FailureKind,
    detail: &str,
) -> Result<()> {
    let now = now_ms();
    sqlx::query(&format!(
        "UPDATE jobs SET state = 'failed', failure = $1, failure_detail = $2, finished_at = $3, \
             updated_at = $4, lease_expires_at = NULL \
         WHERE id = $5 AND lease_owner = $6 AND state IN {ACTIVE_STATES_SQL}"
    ))
    .bind(failure_str(failure))
    .bind(truncate(detail, MAX_DETAIL_BYTES))
    .bind(now)
    .bind(now)
    .bind(job_id)
    .bind(agent_id)
    .execute(&mut **tx)
    .await?;
    let event = Event {
        job_id,
        agent_id: Some(agent_id),
        state: JobState::Failed,
        failure: Some(failure),
        detail,
    };
    release_slot(tx, submission_id, event).await
}

/// Marks the job agent `agent_id` holds finished (its result is stored in
/// this transaction) and releases its slot; returns its atomic job id.
pub async fn finish(tx: &mut Tx, job_id: i64, agent_id: i64, submission_id: i64) -> Result<i64> {
    let now = now_ms();
    let atomic_job_id: i64 = sqlx::query_scalar(&format!(
        "UPDATE jobs SET state = 'finished', finished_at = $1, updated_at = $2, \
             lease_expires_at = NULL \
         WHERE id = $3 AND lease_owner = $4 AND state IN {ACTIVE_STATES_SQL} \
         RETURNING atomic_job_id"
    ))
    .bind(now)
    .bind(now)
    .bind(job_id)
    .bind(agent_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(Error::LeaseLost(job_id))?;
    let event = Event {
        job_id,
        agent_id: Some(agent_id),
        state: JobState::Finished,
        failure: None,
        detail: "result stored",
    };
    release_slot(tx, submission_id, event).await?;
    Ok(atomic_job_id)
}

/// What [`requeue_or_fail`] made of a job.
#[derive(sqlx::FromRow)]
struct Requeued {
    #[sqlx(try_from = "String")]
    state: JobState,
    submission_id: i64,
    attempts: i64,
}

/// Ends an agent's hold on a job without a result: back to `queued` with the
/// attempt counted, or `failed` when the attempts are used up. Returns the
/// new state. The caller has checked the job is active.
pub async fn requeue_or_fail(
    tx: &mut Tx,
    job_id: i64,
    agent_id: Option<i64>,
    failure: FailureKind,
    detail: &str,
) -> Result<JobState> {
    let now = now_ms();
    let row = sqlx::query_as::<_, Requeued>(&format!(
        "UPDATE jobs SET \
             state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
             failure = CASE WHEN attempts >= max_attempts THEN $1 ELSE NULL END, \
             failure_detail = CASE WHEN attempts >= max_attempts THEN $2 ELSE NULL END, \
             finished_at = CASE WHEN attempts >= max_attempts THEN $3 ELSE NULL END, \
             lease_owner = NULL, lease_expires_at = NULL, updated_at = $4 \
         WHERE id = $5 AND state IN {ACTIVE_STATES_SQL} \
         RETURNING state, submission_id, attempts"
    ))
    .bind(failure_str(failure))
    .bind(truncate(detail, MAX_DETAIL_BYTES))
    .bind(now)
    .bind(now)
    .bind(job_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(Error::LeaseLost(job_id))?;
    let Requeued {
        state,
        submission_id,
        attempts,
    } = row;
    let (new_state, event_detail) = if state == JobState::Failed {
        (
            JobState::Failed,
            format!("{detail} (attempt {attempts}, no attempts left)"),
        )
    } else {
        (
            JobState::Queued,
            format!("{detail} (attempt {attempts}, re-queued)"),
        )
    };
    let event = Event {
        job_id,
        agent_id,
        state: new_state,
        failure: Some(failure),
        detail: &event_detail,
    };
    release_slot(tx, submission_id, event).await?;
    Ok(new_state)
}

/// A job left an agent's hands: the submission has one job fewer in flight,
/// the agent (if any) is idle again unless it holds another job, and
/// `event` says why; one round trip.
pub async fn release_slot(tx: &mut Tx, submission_id: i64, event: Event<'_>) -> Result<()> {
    let agent_sql = agents::state_now_sql(HOLDS_JOB_SQL);
    let sql = join_writes(
        tx,
        &[
            "UPDATE submissions SET in_flight = in_flight - 1 WHERE id = $1 AND in_flight > 0",
            &agent_sql,
            EVENT_SQL,
        ],
    );
    let query = sqlx::query(&sql)
        .bind(submission_id)
        .bind(now_ms())
        .bind(event.agent_id);
    bind_event(query, &event).execute(&mut **tx).await?;
    Ok(())
}

/// Cancels a submission and every job of it not yet terminal. Agents holding
/// one learn it from their next heartbeat. Returns the number of jobs
/// cancelled (0 when the submission had already ended).
pub async fn cancel_submission(tx: &mut Tx, submission_id: i64, reason: &str) -> Result<u64> {
    let state: String = sqlx::query_scalar("SELECT state FROM submissions WHERE id = $1")
        .bind(submission_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| Error::not_found("submission", submission_id))?;
    if SubmissionState::try_from(state).map_err(anyhow::Error::msg)? != SubmissionState::Active {
        return Ok(0);
    }
    let now = now_ms();
    // Jobs before the submission row: the lock order of every writer.
    let cancelled: Vec<i64> = sqlx::query_scalar(&format!(
        "UPDATE jobs SET state = 'cancelled', updated_at = $1, finished_at = $2 \
         WHERE submission_id = $3 AND (state = 'queued' OR state IN {ACTIVE_STATES_SQL}) \
         RETURNING id"
    ))
    .bind(now)
    .bind(now)
    .bind(submission_id)
    .fetch_all(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE submissions SET state = 'cancelled', in_flight = 0, finished_at = $1, \
             dispatch_at = $2 WHERE id = $3",
    )
    .bind(now)
    .bind(now)
    .bind(submission_id)
    .execute(&mut **tx)
    .await?;
    for &job_id in &cancelled {
        let event = Event {
            job_id,
            agent_id: None,
            state: JobState::Cancelled,
            failure: None,
            detail: reason,
        };
        record_event(tx, event).await?;
    }
    Ok(cancelled.len() as u64)
}

/// Cancels the queued (not yet leased) runs of one commit of an atomic job:
/// a probe the bisection's range has moved past.
pub async fn cancel_queued_runs(tx: &mut Tx, atomic_job_id: i64, commit_id: i64) -> Result<u64> {
    let now = now_ms();
    let done = sqlx::query(
        "UPDATE jobs SET state = 'cancelled', updated_at = $1, finished_at = $2 \
         WHERE atomic_job_id = $3 AND commit_id = $4 AND state = 'queued'",
    )
    .bind(now)
    .bind(now)
    .bind(atomic_job_id)
    .bind(commit_id)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected())
}

/// Marks an atomic job settled (its comparison is final), and its
/// submission done when that was the last thing it waited for.
pub async fn settle(tx: &mut Tx, submission_id: i64, atomic_job_id: i64) -> Result<()> {
    sqlx::query("UPDATE atomic_jobs SET settled_at = $1 WHERE id = $2")
        .bind(now_ms())
        .bind(atomic_job_id)
        .execute(&mut **tx)
        .await?;
    finish_if_done(tx, submission_id).await
}

/// Closes a bisection's probe submission once the bisection has ended: its
/// queued runs are cancelled and its atomic jobs settled, so it is done as
/// soon as no agent holds a run of it.
pub async fn close_probes(tx: &mut Tx, submission_id: i64) -> Result<()> {
    let now = now_ms();
    sqlx::query(
        "UPDATE jobs SET state = 'cancelled', updated_at = $1, finished_at = $2 \
         WHERE submission_id = $3 AND state = 'queued'",
    )
    .bind(now)
    .bind(now)
    .bind(submission_id)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE atomic_jobs SET settled_at = $1 WHERE submission_id = $2 AND settled_at IS NULL",
    )
    .bind(now)
    .bind(submission_id)
    .execute(&mut **tx)
    .await?;
    finish_if_done(tx, submission_id).await
}

/// The one condition under which an active submission is done: no run of
/// it queued or held by an agent, and every atomic job of it settled.
async fn finish_if_done(tx: &mut Tx, submission_id: i64) -> Result<()> {
    // An ended submission is due to be told to its origin at once (`super::ended`).
    let now = now_ms();
    sqlx::query(&format!(
        "UPDATE submissions SET state = 'done', finished_at = $1, dispatch_at = $2 \
         WHERE id = $3 AND state = 'active' \
           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.submission_id = $4 \
                           AND (j.state = 'queued' OR j.state IN {ACTIVE_STATES_SQL})) \
           AND NOT EXISTS (SELECT 1 FROM atomic_jobs a WHERE a.submission_id = $5 \
                           AND a.settled_at IS NULL)"
    ))
    .bind(now)
    .bind(now)
    .bind(submission_id)
    .bind(submission_id)
    .bind(submission_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
