//! Which queued job an agent gets, and the bounded long-poll around it.
//!
//! The order (stats-free; the statistics decide only how many runs exist):
//! 1. higher `priority` first;
//! 2. jobs of a pair this agent already ran, then pairs nobody ran yet, then
//!    pairs other agents ran: a pair stays on one machine when it can, so
//!    drift hits base and head alike, and idle agents still help out;
//! 3. fair share: the submission with the fewest jobs in flight;
//! 4. `seq` = 2 x run + side, so a pair runs base, head, base, head;
//! 5. age (`id`).
//!
//! Only jobs whose pair is pinned to the agent's tbox group (or not yet
//! pinned) and whose hardware constraints the agent meets are considered;
//! the first lease pins the whole pair to the agent's group. A kexec agent
//! boots the tested kernel on its own hardware: unless the operator marked
//! it disposable at enrolment, it gets no pair of which an end is a commit
//! kbot applied from mail (committed by the robot's address: a list series,
//! its build probes and bisection, a `#kbot test` patch).
//!
//! An agent that cannot build kernels (only the `test` role) gets only
//! jobs whose kernel's build order for its arch is done; asking for work
//! first queues the orders its best queued jobs need
//! ([`crate::builds::orders`]).
//!
//! Ranking the whole queue on every claim would cost O(queue); a claim ranks
//! a window instead (see `candidates_sql`), so fair share and preference
//! act among the 64 first jobs by priority and run order plus the agent's
//! own pairs.
//!
//! A claim is a pick (`SELECT ... LIMIT 1`) and a take (`UPDATE ... WHERE id
//! = $picked AND state = 'queued' RETURNING`): on PostgreSQL both in one
//! transaction, the pick skipping and locking rows (`FOR UPDATE OF j SKIP
//! LOCKED`); on SQLite the pick first runs on a reader and, if another claim
//! took that job meanwhile, again inside the write transaction, where the
//! single writer serialises claims. On both the `state = 'queued'` guard
//! makes a second take of the same row update nothing. A job is never
//! leased twice at once.

use std::time::Duration;

use kbot_api::agent::{BootBackend, JobState, LeasedJob};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, FromRow};

use crate::agents;
use crate::auth::AgentRecord;
use crate::builds::orders;
use crate::db::{Backend, Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::lifecycle::{self, Claim};
use crate::jobs::{self, AnyQuery, Event};
use crate::state::AppState;
use crate::time::now_ms;
use reply::leased_job;

mod reply;
pub mod routes;

/// How often a waiting long-poll retries even without a local wake-up (jobs
/// queued by another replica, leases freed by the reaper).
const POLL_TICK: Duration = Duration::from_millis(500);

/// How long a long-poll waits before trying again after its claim found
/// queued jobs but lost every one of them to concurrent claims: those
/// commit within milliseconds, so waiting a whole [`POLL_TICK`] for a job
/// that is there would only add latency. Jittered up to twice this, so the
/// losers do not collide again.
const CONTENDED_BACKOFF: Duration = Duration::from_millis(5);

/// Waits up to `wait` (already bounded by the caller) for a job for this
/// agent; one that cannot build gets only jobs whose kernel is built.
pub async fn lease_with_wait(
    state: &AppState,
    agent: &AgentRecord,
    wait: Duration,
    can_build: bool,
) -> Result<Option<LeasedJob>> {
    // A host-backend agent boots no kernel: it needs no builds.
    let built = (!can_build && agent.backend != BootBackend::Host)
        .then(|| kbot_api::builds::kernel_arch(&agent.hardware.arch).to_owned());
    let deadline = tokio::time::Instant::now() + wait;
    let mut shutdown = state.shutdown.clone();
    loop {
        // Registered before the attempt, so a wake-up between a failed claim
        // and the wait is not lost.
        let notified = state.queue_changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(arch) = &built {
            let group = orders::PlanFor::Group(&agent.tbox_group);
            orders::plan(&state.db, arch, group).await?;
        }
        let tick = match lease_once(state, agent, built.as_deref()).await? {
            LeaseAttempt::Leased(job) => return Ok(Some(*job)),
            // Each pass fails an attempt of an unusable job, so this ends.
            LeaseAttempt::Unrunnable => continue,
            LeaseAttempt::Contended => CONTENDED_BACKOFF.mul_f64(1.0 + rand::random::<f64>()),
            LeaseAttempt::Empty => POLL_TICK,
        };
        let now = tokio::time::Instant::now();
        if now >= deadline || *shutdown.borrow() {
            return Ok(None);
        }
        let tick = (deadline - now).min(tick);
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => return Ok(None),
        }
    }
}

/// What one lease attempt came back with.
pub enum LeaseAttempt {
    /// Boxed: a leased job is large, the other outcomes are empty.
    Leased(Box<LeasedJob>),
    /// No queued job fits the agent.
    Empty,
    /// Jobs fit, but concurrent claims held every one of them.
    Contended,
    /// The job it took cannot be prepared and was put back or failed (see
    /// [`Error::Unrunnable`]): try again at once.
    Unrunnable,
}

/// One claim attempt, and the leased job's details when it took one;
/// `built` is the kernel arch of an agent that cannot build.
pub async fn lease_once(
    state: &AppState,
    agent: &AgentRecord,
    built: Option<&str>,
) -> Result<LeaseAttempt> {
    let lease_ms = i64::from(state.config.lease_secs) * 1000;
    let mail_committer = &state.config.mail.report.robot_address;
    let claim = match claim_built(&state.db, agent, lease_ms, mail_committer, built).await? {
        ClaimOutcome::Claimed(claim) => claim,
        ClaimOutcome::Contended => return Ok(LeaseAttempt::Contended),
        ClaimOutcome::Empty => {
            mark_agent_seen(&state.db, agent.id).await?;
            return Ok(LeaseAttempt::Empty);
        }
    };
    match leased_job(state, agent, &claim).await {
        Ok(job) => Ok(LeaseAttempt::Leased(Box::new(job))),
        Err(err @ Error::Unrunnable(_)) => {
            // Fail it (after its attempts) rather than hand it out forever;
            // the agent is not at fault and leases the next job.
            tracing::warn!(job_id = claim.job_id, agent = %agent.name, "{err}");
            let mut tx = state.db.begin().await?;
            lifecycle::requeue_or_fail(
                &mut tx,
                claim.job_id,
                Some(agent.id),
                kbot_api::agent::FailureKind::Infrastructure,
                &err.to_string(),
            )
            .await?;
            tx.commit().await?;
            Ok(LeaseAttempt::Unrunnable)
        }
        Err(err) => Err(err),
    }
}

/// The jobs a claim ranks, so that it never sorts the whole queue: the first
/// [`WINDOW`] queued jobs in index order (priority, then seq: every pair's
/// earliest runs, across submissions) that fit the agent, plus the next
/// queued jobs of pairs this agent already ran ([`own_pairs_sql`]).
/// Parameters $1-$10, $13-$14 of [`mail_work`] and $15-$16 of
/// [`orders::built_for`].
///
/// `CROSS JOIN` is SQLite's way to fix the join order (PostgreSQL plans it
/// as an inner join): the window must walk the queue index in order and stop
/// after 64 rows; left to itself, SQLite 3.46 started from the small
/// atomic_jobs table and sorted the whole queue (20 ms per claim at 30,000
/// queued jobs).
fn candidates_sql(backend: Backend) -> String {
    format!(
        "SELECT id FROM (SELECT w.id FROM jobs w CROSS JOIN atomic_jobs wa \
            WHERE wa.id = w.atomic_job_id AND w.state = 'queued' \
              AND (wa.tbox_group IS NULL OR wa.tbox_group = $1) AND {fits} AND {mail} \
              AND {built} \
            ORDER BY w.priority DESC, w.seq, w.id LIMIT {WINDOW}) AS win \
         UNION \
         SELECT id FROM ({own}) AS own",
        fits = fits("w", 2),
        mail = mail_work("w"),
        built = orders::built_for("w", "wa", 15, 16),
        own = own_pairs_sql(backend),
    )
}

/// The condition that job `alias` is no list work, or that the agent may
/// run list work (`$13` is 1): its pair has no end committed by `$14`, the
/// address kbot commits applied mail with ([`may_run_mail_work`]).
fn mail_work(alias: &str) -> String {
    format!(
        "($13 = 1 OR NOT EXISTS (SELECT 1 FROM submissions ms CROSS JOIN commits mc \
             WHERE ms.id = {alias}.submission_id \
               AND mc.id IN (ms.base_commit_id, ms.head_commit_id) \
               AND mc.committer_email = $14))"
    )
}

/// Whether `agent` may run code posted to a list: any agent whose kernel
/// runs in a guest or is not booted at all, a kexec one only when marked
/// disposable.
fn may_run_mail_work(agent: &AgentRecord) -> bool {
    agent.backend != BootBackend::Kexec || agent.disposable
}

/// The condition that job `alias` needs no more than the agent has: its
/// arch, threads, memory and page size bound to `$first` .. `$first+3`
/// ([`bind_hardware`]).
fn fits(alias: &str, first: u32) -> String {
    let [arch, threads, memory, page] = [first, first + 1, first + 2, first + 3];
    format!(
        "({alias}.need_arch IS NULL OR {alias}.need_arch = ${arch}) \
         AND ({alias}.need_threads IS NULL OR {alias}.need_threads <= ${threads}) \
         AND ({alias}.need_memory_bytes IS NULL OR {alias}.need_memory_bytes <= ${memory}) \
         AND ({alias}.need_page_size IS NULL OR {alias}.need_page_size = ${page})"
    )
}

/// The next 16 queued jobs of the pairs this agent already ran. It must
/// start from the agent's atomic jobs and read each pair's queued runs in
/// order (`jobs_pair_queue`). SQLite keeps the written `CROSS JOIN` order.
/// PostgreSQL, given the same join, may instead walk the whole queue in
/// order and filter for the agent's pairs, betting that 16 matches come
/// early: for an agent whose pair sits deep in the queue that read 24,000
/// queued jobs, 15 ms per claim, in the load tool's runs. `LATERAL` takes
/// that plan off the table: at most 16 runs per pair, each from the index.
fn own_pairs_sql(backend: Backend) -> String {
    match backend {
        Backend::Sqlite => format!(
            "SELECT p.id FROM atomic_jobs pa CROSS JOIN jobs p \
             WHERE p.atomic_job_id = pa.id AND pa.preferred_agent_id = $6 AND p.state = 'queued' \
               AND {fits} AND {mail} AND {built} \
             ORDER BY p.priority DESC, p.seq, p.id LIMIT 16",
            fits = fits("p", 7),
            mail = mail_work("p"),
            built = orders::built_for("p", "pa", 15, 16),
        ),
        Backend::Postgres => format!(
            "SELECT p.id FROM atomic_jobs pa CROSS JOIN LATERAL \
                 (SELECT q.id, q.priority, q.seq FROM jobs q \
                  WHERE q.atomic_job_id = pa.id AND q.state = 'queued' AND {fits} AND {mail} \
                    AND {built} \
                  ORDER BY q.priority DESC, q.seq, q.id LIMIT 16) AS p \
             WHERE pa.preferred_agent_id = $6 \
             ORDER BY p.priority DESC, p.seq, p.id LIMIT 16",
            fits = fits("q", 7),
            mail = mail_work("q"),
            built = orders::built_for("q", "pa", 15, 16),
        ),
    }
}

/// Size of the ranked window; see `candidates_sql`.
pub const WINDOW: usize = 64;

/// What a claim did.
#[derive(Debug)]
pub enum ClaimOutcome {
    /// Took this job.
    Claimed(Claim),
    /// No queued job fits the agent.
    Empty,
    /// Jobs fit, but each try lost them to concurrent claims.
    Contended,
}

/// Takes the best matching queued job for `agent`, if it can;
/// `mail_committer` is the address kbot commits patches from mail with
/// (`KBOT_MAIL_FROM`), whose pairs only some agents run.
pub async fn claim(
    db: &Db,
    agent: &AgentRecord,
    lease_ms: i64,
    mail_committer: &str,
) -> Result<ClaimOutcome> {
    claim_built(db, agent, lease_ms, mail_committer, None).await
}

/// [`claim`], for an agent that cannot build when `built` names its
/// kernel arch: only jobs whose kernel is built for it.
pub async fn claim_built(
    db: &Db,
    agent: &AgentRecord,
    lease_ms: i64,
    mail_committer: &str,
    built: Option<&str>,
) -> Result<ClaimOutcome> {
    let (owned_db, agent) = (db.clone(), agent.clone());
    let mail_committer = mail_committer.to_owned();
    let built = built.map(str::to_owned);
    db.on_writer(async move {
        // Two agents of different groups may claim the two sides of an
        // unpinned pair at the same moment; the loser's claim is rolled
        // back and retried (as is a take that found its pick gone).
        for attempt in 0..4u64 {
            let who = Who {
                agent: &agent,
                mail_committer: &mail_committer,
                built: built.as_deref(),
            };
            match try_claim(&owned_db, &who, lease_ms).await? {
                TryOutcome::Claimed(claim) => return Ok(ClaimOutcome::Claimed(claim)),
                TryOutcome::Empty => return Ok(ClaimOutcome::Empty),
                // A few milliseconds for the claims in the way to commit.
                TryOutcome::Retry => {
                    tokio::time::sleep(Duration::from_millis(attempt * 2)).await;
                }
            }
        }
        Ok(ClaimOutcome::Contended)
    })
    .await
}

enum TryOutcome {
    Claimed(Claim),
    Empty,
    Retry,
}

/// Who a claim is for: the agent, the address of list work, and the kernel
/// arch of an agent that cannot build.
struct Who<'a> {
    agent: &'a AgentRecord,
    mail_committer: &'a str,
    built: Option<&'a str>,
}

async fn try_claim(db: &Db, who: &Who<'_>, lease_ms: i64) -> Result<TryOutcome> {
    let agent = who.agent;
    let now = now_ms();
    // Pick, then take. On PostgreSQL the pick runs inside the transaction
    // and locks its row (`SKIP LOCKED`: concurrent claimers pick different
    // rows). On SQLite it first runs on a reader, before the transaction:
    // WAL readers run beside the single writer, and the pick is the
    // costliest statement of a claim, so the writer is mostly held for the
    // take alone. When another claim took that job in between (the take's
    // `state = 'queued'` guard), the pick runs again under the writer, where
    // nothing can move. (One UPDATE with the pick as a subquery made
    // SQLite's planner scan the queue.)
    let optimistic = db.backend() == Backend::Sqlite;
    let (mut tx, mut picked) = if optimistic {
        let mut reader = db.read().acquire().await?;
        let picked = pick(db, reader.as_mut(), who).await?;
        if picked.is_none() {
            // Nothing queued for this agent as of the last commit: no
            // reason to take the writer.
            return Ok(TryOutcome::Empty);
        }
        (db.begin_relaxed().await?, picked)
    } else {
        let mut tx = db.begin_relaxed().await?;
        let picked = pick(db, &mut tx, who).await?;
        (tx, picked)
    };
    let mut retake = optimistic;
    let (claim, needs_pin) = loop {
        let Some(job) = picked else {
            tx.rollback().await?;
            if !optimistic && queued_for(db, who).await? {
                // Every candidate is locked by a concurrent claim: those
                // commit in a moment, so try again rather than long-poll.
                return Ok(TryOutcome::Retry);
            }
            return Ok(TryOutcome::Empty);
        };
        let (job_id, needs_pin) = picked_job(&job, agent);
        if let Some(claim) = lifecycle::lease(&mut tx, agent.id, job_id, lease_ms, now).await? {
            break (claim, needs_pin);
        }
        if !retake {
            tx.rollback().await?;
            return Ok(TryOutcome::Retry);
        }
        retake = false;
        picked = pick(db, &mut tx, who).await?;
    };
    if !record_claim(&mut tx, agent, &claim, needs_pin, now).await? {
        tx.rollback().await?;
        return Ok(TryOutcome::Retry);
    }
    tx.commit().await?;
    Ok(TryOutcome::Claimed(claim))
}

/// A job the pick chose, with its pair's pins.
#[derive(sqlx::FromRow)]
struct Picked {
    id: i64,
    pinned_group: Option<String>,
    pinned_agent: Option<i64>,
}

/// The best queued job for `agent` by the order in the module docs, with
/// its pair's pins; on PostgreSQL its row stays locked for the transaction.
async fn pick(db: &Db, conn: &mut AnyConnection, who: &Who<'_>) -> Result<Option<Picked>> {
    let sql = pick_sql(db.backend(), &db.skip_locked("j"));
    let picked = bind_pick(sqlx::query(&sql), who)
        .try_map(|row: AnyRow| Picked::from_row(&row))
        .fetch_optional(conn)
        .await?;
    Ok(picked)
}

/// The pick's query; `lock` is the row-locking clause, if any.
fn pick_sql(backend: Backend, lock: &str) -> String {
    format!(
        "SELECT j.id, a.tbox_group AS pinned_group, a.preferred_agent_id AS pinned_agent \
         FROM ({candidates}) AS c \
         CROSS JOIN jobs j CROSS JOIN submissions s CROSS JOIN atomic_jobs a \
         WHERE j.id = c.id AND s.id = j.submission_id AND a.id = j.atomic_job_id \
           AND j.state = 'queued' AND s.state = 'active' \
           AND (a.tbox_group IS NULL OR a.tbox_group = $11) \
         ORDER BY j.priority DESC, \
             CASE WHEN a.preferred_agent_id = $12 THEN 0 \
                  WHEN a.preferred_agent_id IS NULL THEN 1 ELSE 2 END, \
             s.in_flight, j.seq, j.id \
         LIMIT 1{lock}",
        candidates = candidates_sql(backend),
    )
}

/// Binds the pick's parameters for `who`.
fn bind_pick<'q>(query: AnyQuery<'q>, who: &Who<'q>) -> AnyQuery<'q> {
    let agent = who.agent;
    bind_candidates(query, agent)
        // ... ranked by the full order ...
        .bind(&agent.tbox_group)
        .bind(agent.id)
        // ... list work only where it may run ...
        .bind(i64::from(may_run_mail_work(agent)))
        .bind(who.mail_committer)
        // ... and kernels built for an agent that cannot build.
        .bind(i64::from(who.built.is_none()))
        .bind(who.built.unwrap_or(""))
}

/// Binds [`candidates_sql`]'s parameters $1-$10 for `agent`.
fn bind_candidates<'q>(query: AnyQuery<'q>, agent: &'q AgentRecord) -> AnyQuery<'q> {
    // The window of the best queued jobs by the indexed order ...
    let query = bind_hardware(query.bind(&agent.tbox_group), agent);
    // ... plus this agent's own pairs.
    bind_hardware(query.bind(agent.id), agent)
}

/// Binds the four parameters of one [`fits`] condition.
fn bind_hardware<'q>(query: AnyQuery<'q>, agent: &'q AgentRecord) -> AnyQuery<'q> {
    let hw = &agent.hardware;
    query
        .bind(&hw.arch)
        .bind(i64::from(hw.threads))
        .bind(jobs::saturating_i64(hw.memory_bytes))
        .bind(jobs::saturating_i64(hw.page_size))
}

/// Whether the pick would find a job for `agent` if no other claim held
/// any (PostgreSQL's pick skips rows other claims hold). The same query as
/// the pick, so a job the pick can never take (its pair pinned to another
/// group) does not count and the caller does not retry for it.
async fn queued_for(db: &Db, who: &Who<'_>) -> Result<bool> {
    let sql = pick_sql(db.backend(), "");
    let row = bind_pick(sqlx::query(&sql), who)
        .fetch_optional(db.read())
        .await?;
    Ok(row.is_some())
}

/// The picked job's id, and whether its pair still needs pinning. Pins are
/// never undone: a pair already pinned to this group (and to a preferred
/// agent) needs no write to its atomic_jobs row, which would otherwise be a
/// hot row every claim of the pair waits for.
fn picked_job(picked: &Picked, agent: &AgentRecord) -> (i64, bool) {
    let needs_pin = picked.pinned_group.as_deref() != Some(agent.tbox_group.as_str())
        || picked.pinned_agent.is_none();
    (picked.id, needs_pin)
}

/// The bookkeeping of a claim, in its transaction: pair pinning to this
/// agent and its tbox group, then the fair-share counter, the agent's state
/// and the event ([`lifecycle::leased`]). Returns false when the pair got
/// pinned to another tbox group meanwhile.
async fn record_claim(
    tx: &mut Tx,
    agent: &AgentRecord,
    claim: &Claim,
    needs_pin: bool,
    now: i64,
) -> Result<bool> {
    if needs_pin {
        let group =
            lifecycle::pin_to_agent(tx, claim.atomic_job_id, &agent.tbox_group, agent.id).await?;
        if group != agent.tbox_group {
            return Ok(false);
        }
    }
    let detail = format!("leased by {} (attempt {})", agent.name, claim.attempts);
    let event = Event {
        job_id: claim.job_id,
        agent_id: Some(agent.id),
        state: JobState::Leased,
        failure: None,
        detail: &detail,
    };
    lifecycle::leased(tx, claim, event, now).await?;
    Ok(true)
}

async fn mark_agent_seen(db: &Db, agent_id: i64) -> Result<()> {
    sqlx::query(&agents::state_now_sql(jobs::HOLDS_JOB_SQL))
        .bind(now_ms())
        .bind(agent_id)
        .execute(db.write())
        .await?;
    Ok(())
}
