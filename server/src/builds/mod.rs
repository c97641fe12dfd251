//! Kernels built once: the first leased job that needs a build key claims
//! it and builds; every other job of that key, on any agent of the arch,
//! waits for it and downloads the files from the artifact store
//! (`kbot_api::builds` documents the protocol).
//!
//! A claim is held by a job or a build order ([`orders`]), not an agent: it
//! lasts while that job or order holds its lease. A builder that dies loses
//! its lease, and the next job or order to ask claims the build again
//! (`claims` counts the claims). A key that does not build is `failed` for
//! good: every job that needs it fails at once with the builder's log,
//! instead of building it again.

use kbot_api::builds::{BuildFile, BuildView, ClaimAnswer, Claimant};
use sqlx::AnyConnection;

use crate::db::{NullableF64, Tx};
use crate::error::{Error, Result};
use crate::jobs::ACTIVE_STATES_SQL;
use crate::time::now_ms;

pub mod orders;
pub mod retention;
pub mod routes;

pub use kbot_api::builds::BuildState;

/// Most of a failed build's log kept (the compiler's last lines).
pub const MAX_LOG_TAIL: usize = 64 * 1024;

/// A build row with whether its claim is still held.
#[derive(Debug, Clone, sqlx::FromRow)]
struct BuildRow {
    id: i64,
    build_key: String,
    commit_sha: String,
    arch: String,
    #[sqlx(try_from = "String")]
    state: BuildState,
    job_id: Option<i64>,
    order_id: Option<i64>,
    claims: i64,
    release: Option<String>,
    build_id: Option<String>,
    build_secs: Option<f64>,
    log_tail: Option<String>,
    created_at: i64,
    updated_at: i64,
    /// 1 while `job_id` (or `order_id`) is active and its lease has not
    /// expired.
    held: i64,
}

/// The build of key `$1`, its claim held at time `$2`.
fn select_build() -> String {
    format!(
        "SELECT b.id, b.build_key, b.commit_sha, b.arch, b.state, b.job_id, b.order_id, \
         b.claims, b.release, b.build_id, b.build_secs, b.log_tail, b.created_at, \
         b.updated_at, \
         CASE WHEN j.id IS NOT NULL AND j.lease_expires_at > $2 \
              AND j.state IN {ACTIVE_STATES_SQL} THEN 1 \
              WHEN o.id IS NOT NULL AND o.state = 'leased' AND o.lease_expires_at > $2 THEN 1 \
              ELSE 0 END AS held \
         FROM builds b LEFT JOIN jobs j ON j.id = b.job_id \
         LEFT JOIN build_orders o ON o.id = b.order_id WHERE b.build_key = $1"
    )
}

/// A build key as agents make them: 24 lowercase hex digits.
pub fn check_key(key: &str) -> Result<()> {
    let ok = key.len() == 24 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "build key {key:?} is not 24 lowercase hex digits"
        )))
    }
}

/// A file name a build may hold.
pub fn check_file(name: &str) -> Result<()> {
    if kbot_api::builds::BUILD_FILES.contains(&name) {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "build file {name:?} is not one of {:?}",
            kbot_api::builds::BUILD_FILES
        )))
    }
}

/// Where a build's file lives in the artifact store.
pub fn object_key(build_key: &str, name: &str) -> String {
    format!("builds/{build_key}/{name}")
}

async fn load(conn: &mut AnyConnection, key: &str) -> Result<Option<BuildRow>> {
    Ok(sqlx::query_as::<_, BuildRow>(&select_build())
        .bind(key)
        .bind(now_ms())
        .fetch_optional(&mut *conn)
        .await?)
}

/// Builds, newest first: those with an id below `before`, of `commit`
/// when it is given.
pub async fn list(
    conn: &mut AnyConnection,
    limit: u32,
    before: Option<i64>,
    commit: Option<&str>,
) -> Result<Vec<BuildView>> {
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT build_key FROM builds WHERE id < $1 AND ($2 = '' OR commit_sha = $2) \
         ORDER BY id DESC LIMIT $3",
    )
    .bind(before.unwrap_or(i64::MAX))
    .bind(commit.unwrap_or(""))
    .bind(i64::from(limit.clamp(1, 500)))
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        out.push(view(conn, &key).await?);
    }
    Ok(out)
}

/// The build of `key` as the API shows it.
pub async fn view(conn: &mut AnyConnection, key: &str) -> Result<BuildView> {
    let row = load(conn, key)
        .await?
        .ok_or_else(|| Error::not_found("build", key))?;
    to_view(conn, row).await
}

async fn to_view(conn: &mut AnyConnection, row: BuildRow) -> Result<BuildView> {
    let files = files(conn, row.id).await?;
    Ok(BuildView {
        build_key: row.build_key,
        commit: row.commit_sha,
        arch: row.arch,
        state: row.state,
        job_id: row.job_id,
        order_id: row.order_id,
        claims: row.claims,
        release: row.release,
        build_id: row.build_id,
        build_secs: row.build_secs,
        log_tail: row.log_tail,
        files,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

async fn files(conn: &mut AnyConnection, build: i64) -> Result<Vec<BuildFile>> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT name, sha256, bytes FROM build_files WHERE build_id = $1 ORDER BY name",
    )
    .bind(build)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, sha256, bytes)| BuildFile {
            name,
            sha256,
            bytes,
        })
        .collect())
}

/// The object key and digest of a stored file of a build.
pub async fn stored_file(
    conn: &mut AnyConnection,
    key: &str,
    name: &str,
) -> Result<(String, String)> {
    sqlx::query_as(
        "SELECT f.object_key, f.sha256 FROM build_files f JOIN builds b ON b.id = f.build_id \
         WHERE b.build_key = $1 AND f.name = $2",
    )
    .bind(key)
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| Error::not_found("build file", format!("{key}/{name}")))
}

/// What the claim by `by` of the build `key` gets; see the module doc.
pub async fn claim(
    tx: &mut Tx,
    by: Claimant,
    (key, commit, arch): (&str, &str, &str),
    retry_after_secs: u32,
) -> Result<ClaimAnswer> {
    check_commit(tx, by, commit, arch).await?;
    let now = now_ms();
    let (job, order) = by.ids();
    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO builds (build_key, commit_sha, arch, state, job_id, order_id, claims, \
         created_at, updated_at) VALUES ($1, $2, $3, 'building', $4, $5, 1, $6, $6) \
         ON CONFLICT (build_key) DO NOTHING RETURNING id",
    )
    .bind(key)
    .bind(commit)
    .bind(arch)
    .bind(job)
    .bind(order)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(build) = inserted {
        link(tx, by, build, key).await?;
        return Ok(ClaimAnswer::Build);
    }
    let row = load(tx, key)
        .await?
        .ok_or_else(|| Error::not_found("build", key))?;
    link(tx, by, row.id, key).await?;
    if row.commit_sha != commit || row.arch != arch {
        return Err(Error::Conflict(format!(
            "build {key} is commit {} for {}, not {commit} for {arch}",
            row.commit_sha, row.arch
        )));
    }
    match row.state {
        BuildState::Ready | BuildState::Failed => {
            if let Claimant::Order(order) = by {
                orders::done(tx, order, key).await?;
            }
            let ready = row.state == BuildState::Ready;
            let build = to_view(tx, row).await?;
            Ok(if ready {
                ClaimAnswer::Ready { build }
            } else {
                ClaimAnswer::Failed { build }
            })
        }
        BuildState::Building if holds(&row, by) => Ok(ClaimAnswer::Build),
        BuildState::Building if row.held == 1 => Ok(ClaimAnswer::Wait {
            builder_job_id: row.job_id.unwrap_or_default(),
            builder_order_id: row.order_id,
            retry_after_secs,
        }),
        BuildState::Building => take_over(tx, &row, by, retry_after_secs).await,
    }
}

/// A claimant builds only its own kernel: a job's commit, an order's
/// commit and arch. (A claim for another commit would put a kernel of the
/// claimant's choosing under a key other jobs download.)
async fn check_commit(tx: &mut Tx, by: Claimant, commit: &str, arch: &str) -> Result<()> {
    let (sql, id) = match by {
        Claimant::Job(job) => (
            "SELECT c.sha, CAST(NULL AS TEXT) AS arch FROM jobs j JOIN commits c ON c.id = j.commit_id \
             WHERE j.id = $1",
            job,
        ),
        Claimant::Order(order) => (
            "SELECT commit_sha AS sha, arch FROM build_orders WHERE id = $1",
            order,
        ),
    };
    let (sha, want_arch): (String, Option<String>) = sqlx::query_as(sql)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| Error::not_found("claimant", by.to_string()))?;
    if sha != commit || want_arch.as_deref().is_some_and(|a| a != arch) {
        return Err(Error::Conflict(format!(
            "{by} builds {sha}{}, not {commit} for {arch}",
            want_arch.map(|a| format!(" for {a}")).unwrap_or_default()
        )));
    }
    Ok(())
}

/// Whether `by` holds (or last held) `row`'s claim.
fn holds(row: &BuildRow, by: Claimant) -> bool {
    (row.job_id, row.order_id) == by.ids()
}

/// Records that `by`'s kernel is `build`'s (once: a waiter asks again
/// every few seconds, and an unchanged row is not written again).
async fn link(tx: &mut Tx, by: Claimant, build: i64, key: &str) -> Result<()> {
    match by {
        Claimant::Job(job) => crate::jobs::link_build(tx, job, build).await?,
        Claimant::Order(order) => {
            sqlx::query(
                "UPDATE build_orders SET build_key = (SELECT build_key FROM builds WHERE id = $1) \
                 WHERE id = $2 AND build_key IS NULL",
            )
            .bind(build)
            .bind(order)
            .execute(&mut **tx)
            .await?;
        }
    }
    tracing::debug!(build = %key, %by, "linked");
    Ok(())
}

/// The build of `job`'s kernel, if it asked for one.
pub async fn of_job(conn: &mut AnyConnection, job: i64) -> Result<Option<BuildView>> {
    let key: Option<String> = sqlx::query_scalar(
        "SELECT b.build_key FROM builds b JOIN jobs j ON j.build_id = b.id WHERE j.id = $1",
    )
    .bind(job)
    .fetch_optional(&mut *conn)
    .await?;
    match key {
        Some(key) => Ok(Some(view(conn, &key).await?)),
        None => Ok(None),
    }
}

/// The claim of a job or order that lost its lease passes to `by`, unless
/// another claimant took it first (then `by` waits for that one).
async fn take_over(
    tx: &mut Tx,
    row: &BuildRow,
    by: Claimant,
    retry_after_secs: u32,
) -> Result<ClaimAnswer> {
    let (job, order) = by.ids();
    let taken = sqlx::query(
        "UPDATE builds SET job_id = $1, order_id = $2, claims = claims + 1, updated_at = $3 \
         WHERE id = $4 AND state = 'building' AND COALESCE(job_id, 0) = $5 \
         AND COALESCE(order_id, 0) = $6",
    )
    .bind(job)
    .bind(order)
    .bind(now_ms())
    .bind(row.id)
    .bind(row.job_id.unwrap_or(0))
    .bind(row.order_id.unwrap_or(0))
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if taken == 1 {
        tracing::info!(build = %row.build_key, %by, lost_job = ?row.job_id,
            lost_order = ?row.order_id, "the build's claimant lost its lease; building it again");
        Ok(ClaimAnswer::Build)
    } else {
        Ok(ClaimAnswer::Wait {
            builder_job_id: 0,
            builder_order_id: None,
            retry_after_secs,
        })
    }
}

/// The build `key` claimed by `by`, which must still hold the claim.
async fn claimed(conn: &mut AnyConnection, key: &str, by: Claimant) -> Result<BuildRow> {
    let row = load(conn, key)
        .await?
        .ok_or_else(|| Error::not_found("build", key))?;
    if row.state != BuildState::Building {
        return Err(Error::Conflict(format!(
            "build {key} is already {}",
            row.state
        )));
    }
    if !holds(&row, by) {
        return Err(Error::Conflict(format!(
            "build {key} is claimed by job {:?} or order {:?}, not {by}",
            row.job_id, row.order_id
        )));
    }
    Ok(row)
}

/// Records a file the claimant stored at [`object_key`].
pub async fn record_file(tx: &mut Tx, key: &str, by: Claimant, file: &BuildFile) -> Result<()> {
    let row = claimed(tx, key, by).await?;
    sqlx::query(
        "INSERT INTO build_files (build_id, name, object_key, sha256, bytes) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (build_id, name) DO UPDATE SET \
         object_key = excluded.object_key, sha256 = excluded.sha256, bytes = excluded.bytes",
    )
    .bind(row.id)
    .bind(&file.name)
    .bind(object_key(key, &file.name))
    .bind(&file.sha256)
    .bind(file.bytes)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Checks that the claimant may write to `key` before it uploads a file.
pub async fn check_claim(conn: &mut AnyConnection, key: &str, by: Claimant) -> Result<()> {
    claimed(conn, key, by).await.map(|_| ())
}

/// The claimant built the kernel: every file it names must be stored with
/// its digest, and the boot image and config among them.
pub async fn ready(
    tx: &mut Tx,
    key: &str,
    by: Claimant,
    req: &kbot_api::builds::BuildReady,
) -> Result<BuildView> {
    let row = claimed(tx, key, by).await?;
    let stored = files(tx, row.id).await?;
    for name in ["bzImage", "config"] {
        if !req.files.iter().any(|f| f.name == name) {
            return Err(Error::BadRequest(format!("a ready build needs its {name}")));
        }
    }
    for f in &req.files {
        if !stored.contains(f) {
            return Err(Error::Conflict(format!(
                "build {key}: {} was not uploaded with sha256 {} and {} bytes",
                f.name, f.sha256, f.bytes
            )));
        }
    }
    if !req.build_secs.is_finite() {
        return Err(Error::BadRequest(
            "build_secs must be a finite number".into(),
        ));
    }
    sqlx::query(
        "UPDATE builds SET state = 'ready', release = $1, build_id = $2, build_secs = $3, \
         updated_at = $4 WHERE id = $5",
    )
    .bind(&req.release)
    .bind(&req.build_id)
    .bind(NullableF64::finite(req.build_secs))
    .bind(now_ms())
    .bind(row.id)
    .execute(&mut **tx)
    .await?;
    if let Claimant::Order(order) = by {
        orders::done(tx, order, key).await?;
    }
    view(tx, key).await
}

/// The claimant found that the key does not build.
pub async fn failed(tx: &mut Tx, key: &str, by: Claimant, log_tail: &str) -> Result<BuildView> {
    let row = claimed(tx, key, by).await?;
    let tail = kbot_core::text::tail(log_tail, MAX_LOG_TAIL);
    sqlx::query("UPDATE builds SET state = 'failed', log_tail = $1, updated_at = $2 WHERE id = $3")
        .bind(tail)
        .bind(now_ms())
        .bind(row.id)
        .execute(&mut **tx)
        .await?;
    if let Claimant::Order(order) = by {
        orders::done(tx, order, key).await?;
    }
    view(tx, key).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_names_are_checked() {
        assert!(check_key("0123456789abcdef01234567").is_ok());
        assert!(check_key("0123456789ABCDEF01234567").is_err());
        assert!(check_key("../../etc/passwd00000000").is_err());
        assert!(check_key("abc").is_err());
        assert!(check_file("bzImage").is_ok());
        assert!(check_file("../bzImage").is_err());
    }
}
