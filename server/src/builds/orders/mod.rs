//! Build orders: kernels queued for a builder ahead of the test jobs that
//! need them (`kbot_api::builds` has the protocol).
//!
//! An order names a kernel by what the server knows: the commit, the job's
//! kconfig name and compiler, the kernel `ARCH=`. The build key (which the
//! agent makes from the resolved kconfig) is the builder's to find: it
//! claims that build as the order, and the order is done when the build is
//! ready or failed. An agent that cannot build leases only jobs whose order
//! for its arch is done ([`built_for`]).
//!
//! Orders are queued by who needs them: an agent that cannot build asks
//! for the kernels of the jobs it could run, a dedicated builder for those
//! of every queued job that a kernel-booting agent of its arch could run.
//! A builder that dies loses the order with its lease, and the next
//! builder leases it again (`leases` counts them). An order lost
//! [`MAX_LEASES`] times is given up: its jobs go to the machines that only
//! test, which fail them (no kernel), instead of waiting for it forever.

use std::time::Duration;

use kbot_api::builds::{machine_arch, BuildOrder, OrderView};
use sqlx::AnyConnection;

use crate::db::{Db, Tx};
use crate::error::{Error, Result};
use crate::jobs::build_spec::{kconfig_named, repo_spec};
use crate::state::AppState;
use crate::time::now_ms;

pub mod routes;

pub use kbot_api::builds::OrderState;

/// How many queued jobs one plan looks at, best first (the scheduler's
/// own window is 64: a plan runs ahead of it).
const PLAN_WINDOW: i64 = 256;

/// Leases an order gets before it is given up (each lost with its builder).
pub const MAX_LEASES: i64 = 3;

/// How often a builder's long-poll looks for a new order.
const POLL_TICK: Duration = Duration::from_millis(500);

/// The condition that job `job`, of atomic job `atomic`, may go to the
/// agent: it builds kernels (`$flag` is 1), or the order of the job's
/// kernel for its kernel `ARCH=` (`$arch`) is done.
pub fn built_for(job: &str, atomic: &str, flag: u32, arch: u32) -> String {
    format!(
        "(${flag} = 1 OR EXISTS (SELECT 1 FROM commits oc CROSS JOIN build_orders bo \
             WHERE oc.id = {job}.commit_id AND bo.commit_sha = oc.sha \
               AND bo.kconfig = {atomic}.kconfig AND bo.compiler = {atomic}.compiler \
               AND bo.arch = ${arch} AND bo.state IN ('done', 'given_up')))"
    )
}

/// Who a plan is for.
pub enum PlanFor<'a> {
    /// An agent that cannot build, of this tbox group.
    Group(&'a str),
    /// A dedicated builder: every group with a kernel-booting agent of the
    /// arch.
    Builders,
}

/// The kernels the best queued jobs of `kernel_arch` need that have no
/// order yet (repo, commit, kconfig, compiler), with the best priority and
/// first queue position of the jobs that need each.
type Wanted = (i64, String, String, String, i64, i64, i64);

/// Queues an order for each kernel of `kernel_arch` that the best queued
/// jobs for `who` need and nobody ordered, and raises a queued order's
/// priority to its most urgent job's; returns how many it queued or raised.
pub async fn plan(db: &Db, kernel_arch: &str, who: PlanFor<'_>) -> Result<u64> {
    give_up_lost(db, now_ms()).await?;
    let group = match who {
        PlanFor::Group(g) => g,
        PlanFor::Builders => "",
    };
    let machine = machine_arch(kernel_arch);
    // Read first: a plan that finds every kernel ordered (the usual case,
    // asked at every lease) takes no write lock.
    let wanted: Vec<Wanted> = sqlx::query_as(
        "SELECT w.repo_id, w.sha, w.kconfig, w.compiler, w.p, w.f, w.i FROM \
         (SELECT s.repo_id AS repo_id, c.sha AS sha, a.kconfig AS kconfig, \
              a.compiler AS compiler, MAX(j.priority) AS p, MIN(j.seq) AS f, MIN(j.id) AS i \
          FROM \
             (SELECT w.id FROM jobs w CROSS JOIN atomic_jobs wa \
              WHERE wa.id = w.atomic_job_id AND w.state = 'queued' \
                AND (w.need_arch IS NULL OR w.need_arch = $1) \
                AND (($2 <> '' AND (wa.tbox_group IS NULL OR wa.tbox_group = $2)) \
                  OR ($2 = '' AND EXISTS (SELECT 1 FROM agents g WHERE g.arch = $1 \
                      AND g.backend <> 'host' \
                      AND (wa.tbox_group IS NULL OR g.tbox_group = wa.tbox_group)))) \
              ORDER BY w.priority DESC, w.seq, w.id LIMIT $3) AS q \
          JOIN jobs j ON j.id = q.id JOIN atomic_jobs a ON a.id = j.atomic_job_id \
          JOIN submissions s ON s.id = j.submission_id JOIN commits c ON c.id = j.commit_id \
          GROUP BY s.repo_id, c.sha, a.kconfig, a.compiler) AS w \
         WHERE NOT EXISTS (SELECT 1 FROM build_orders o WHERE o.commit_sha = w.sha \
             AND o.kconfig = w.kconfig AND o.compiler = w.compiler AND o.arch = $4 \
             AND (o.state <> 'queued' OR o.priority >= w.p)) \
         ORDER BY w.p DESC, w.f, w.i",
    )
    .bind(machine)
    .bind(group)
    .bind(PLAN_WINDOW)
    .bind(kernel_arch)
    .fetch_all(db.read())
    .await?;
    if wanted.is_empty() {
        return Ok(0);
    }
    // An order carries the best priority of the jobs that want it (raised
    // when a more urgent job wants a queued one), and builders lease the
    // highest first: a plan for one group cannot put its low-priority
    // kernel before another group's urgent ones.
    // One statement per order, each its own transaction: two plans that
    // want the same orders would otherwise each hold one the other's
    // insert waits for (PostgreSQL found the deadlock under 8 agents).
    let now = now_ms();
    let mut queued = 0;
    for (repo, sha, kconfig, compiler, priority, ..) in &wanted {
        queued += sqlx::query(
            "INSERT INTO build_orders (repo_id, commit_sha, kconfig, compiler, arch, state, \
             priority, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $7) \
             ON CONFLICT (commit_sha, kconfig, compiler, arch) DO UPDATE \
             SET priority = excluded.priority, updated_at = excluded.updated_at \
             WHERE build_orders.state = 'queued' AND build_orders.priority < excluded.priority",
        )
        .bind(repo)
        .bind(sha)
        .bind(kconfig)
        .bind(compiler)
        .bind(kernel_arch)
        .bind(priority)
        .bind(now)
        .execute(db.write())
        .await?
        .rows_affected();
    }
    if queued > 0 {
        tracing::info!(arch = kernel_arch, group, queued, "build orders queued");
    }
    Ok(queued)
}

/// The condition that order `o` may be leased at `$now`: queued, or its
/// builder's lease ran out.
fn leasable(now: u32) -> String {
    format!(
        "(state = 'queued' OR (state = 'leased' AND lease_expires_at < ${now} \
          AND leases < {MAX_LEASES}))"
    )
}

/// Gives up the orders whose last lease ran out after [`MAX_LEASES`]
/// (read first: usually there are none, and no write is taken).
async fn give_up_lost(db: &Db, now: i64) -> Result<()> {
    let lost = "state = 'leased' AND lease_expires_at < $1 AND leases >= $2";
    let any: Option<i64> =
        sqlx::query_scalar(&format!("SELECT id FROM build_orders WHERE {lost} LIMIT 1"))
            .bind(now)
            .bind(MAX_LEASES)
            .fetch_optional(db.read())
            .await?;
    if any.is_some() {
        let given = sqlx::query(&format!(
            "UPDATE build_orders SET state = 'given_up', updated_at = $1 WHERE {lost}"
        ))
        .bind(now)
        .bind(MAX_LEASES)
        .execute(db.write())
        .await?
        .rows_affected();
        tracing::warn!(
            given,
            "build orders given up: their builders lost them {MAX_LEASES} times"
        );
    }
    Ok(())
}

/// Waits up to `wait` for an order of `kernel_arch` and leases it to
/// `agent`.
pub async fn lease_with_wait(
    state: &AppState,
    agent: i64,
    kernel_arch: &str,
    wait: Duration,
) -> Result<Option<BuildOrder>> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut shutdown = state.shutdown.clone();
    loop {
        if let Some(order) = lease_once(state, agent, kernel_arch).await? {
            return Ok(Some(order));
        }
        let now = tokio::time::Instant::now();
        if now >= deadline || *shutdown.borrow() {
            return Ok(None);
        }
        tokio::select! {
            () = tokio::time::sleep((deadline - now).min(POLL_TICK)) => {}
            _ = shutdown.changed() => return Ok(None),
        }
    }
}

/// Leases the most urgent leasable order of `kernel_arch` to `agent` (the
/// highest priority, then the oldest), if any.
async fn lease_once(state: &AppState, agent: i64, kernel_arch: &str) -> Result<Option<BuildOrder>> {
    let now = now_ms();
    let any: Option<i64> = sqlx::query_scalar(&format!(
        "SELECT id FROM build_orders WHERE arch = $1 AND {} LIMIT 1",
        leasable(2)
    ))
    .bind(kernel_arch)
    .bind(now)
    .fetch_optional(state.db.read())
    .await?;
    if any.is_none() {
        return Ok(None);
    }
    let lease_ms = i64::from(state.config.lease_secs) * 1000;
    // Two builders may pick the same order; the loser's update finds it
    // leased and matches nothing, and it tries the next one.
    for _ in 0..4 {
        let mut tx = state.db.begin().await?;
        let taken: Option<i64> = sqlx::query_scalar(&format!(
            "UPDATE build_orders SET state = 'leased', agent_id = $1, lease_expires_at = $2, \
             leases = leases + 1, updated_at = $3 \
             WHERE id = (SELECT id FROM build_orders WHERE arch = $4 AND {l} \
                 ORDER BY priority DESC, id LIMIT 1) \
             AND {l} RETURNING id",
            l = leasable(3)
        ))
        .bind(agent)
        .bind(now + lease_ms)
        .bind(now)
        .bind(kernel_arch)
        .fetch_optional(&mut *tx)
        .await?;
        match taken {
            Some(id) => {
                let order = leased_order(state, &mut tx, id).await?;
                tx.commit().await?;
                tracing::info!(order = id, agent, commit = %order.commit, "build order leased");
                return Ok(Some(order));
            }
            None => tx.rollback().await?,
        }
    }
    Ok(None)
}

/// What [`leased_order`] reads.
#[derive(sqlx::FromRow)]
struct OrderRow {
    repo_name: String,
    repo_url: String,
    commit_sha: String,
    kconfig: String,
    compiler: String,
    arch: String,
    leases: i64,
    lease_expires_at: i64,
}

/// Everything the builder needs of order `id`.
async fn leased_order(state: &AppState, tx: &mut Tx, id: i64) -> Result<BuildOrder> {
    let row = sqlx::query_as::<_, OrderRow>(
        "SELECT r.name AS repo_name, r.url AS repo_url, o.commit_sha, o.kconfig, o.compiler, \
         o.arch, o.leases, o.lease_expires_at \
         FROM build_orders o JOIN repos r ON r.id = o.repo_id WHERE o.id = $1",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    Ok(BuildOrder {
        order_id: id,
        repo: repo_spec(state, row.repo_name, row.repo_url),
        commit: row.commit_sha,
        kconfig: kconfig_named(state, tx, &row.kconfig).await?,
        compiler: row.compiler,
        arch: row.arch,
        leases: row.leases,
        lease_expires_at: row.lease_expires_at,
        heartbeat_interval_secs: state.config.heartbeat_interval_secs,
    })
}

/// Checks that `agent` holds order `id`'s lease.
pub async fn check_leased(conn: &mut AnyConnection, id: i64, agent: i64) -> Result<()> {
    let held: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM build_orders WHERE id = $1 AND agent_id = $2 AND state = 'leased' \
         AND lease_expires_at >= $3",
    )
    .bind(id)
    .bind(agent)
    .bind(now_ms())
    .fetch_optional(&mut *conn)
    .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(Error::Conflict(format!(
            "build order {id} is not leased to this agent (done, or its lease ran out)"
        ))),
    }
}

/// Extends the lease `agent` holds on order `id`; returns its new end.
pub async fn heartbeat(db: &Db, id: i64, agent: i64, lease_ms: i64) -> Result<i64> {
    let mut tx = db.begin().await?;
    check_leased(&mut tx, id, agent).await?;
    let until = now_ms() + lease_ms;
    sqlx::query("UPDATE build_orders SET lease_expires_at = $1 WHERE id = $2")
        .bind(until)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(until)
}

/// Order `id` found its build `key` ready or failed.
pub async fn done(tx: &mut Tx, id: i64, key: &str) -> Result<()> {
    sqlx::query(
        "UPDATE build_orders SET state = 'done', build_key = $1, updated_at = $2 WHERE id = $3",
    )
    .bind(key)
    .bind(now_ms())
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// What [`list`] reads of an order.
#[derive(sqlx::FromRow)]
struct ListRow {
    id: i64,
    repo: String,
    commit_sha: String,
    kconfig: String,
    compiler: String,
    arch: String,
    #[sqlx(try_from = "String")]
    state: OrderState,
    agent: Option<String>,
    leases: i64,
    build_key: Option<String>,
    created_at: i64,
    updated_at: i64,
}

/// Orders, newest first: those with an id below `before`.
pub async fn list(
    conn: &mut AnyConnection,
    limit: u32,
    before: Option<i64>,
) -> Result<Vec<OrderView>> {
    let rows = sqlx::query_as::<_, ListRow>(
        "SELECT o.id, r.name AS repo, o.commit_sha, o.kconfig, o.compiler, o.arch, o.state, \
         g.name AS agent, o.leases, o.build_key, o.created_at, o.updated_at \
         FROM build_orders o JOIN repos r ON r.id = o.repo_id \
         LEFT JOIN agents g ON g.id = o.agent_id \
         WHERE o.id < $1 ORDER BY o.id DESC LIMIT $2",
    )
    .bind(before.unwrap_or(i64::MAX))
    .bind(i64::from(limit.clamp(1, 500)))
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| OrderView {
            order_id: r.id,
            repo: r.repo,
            commit: r.commit_sha,
            kconfig: r.kconfig,
            compiler: r.compiler,
            arch: r.arch,
            state: r.state,
            agent: r.agent,
            leases: r.leases,
            build_key: r.build_key,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
        .collect())
}
