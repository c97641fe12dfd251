//! The lease reply: everything an agent needs to run the job a claim took
//! (the atomic job resolved on its machine, the repo and commit, the kernel
//! config with its stored full config), read at once.

use kbot_api::agent::LeasedJob;
use kbot_core::job::AtomicJob;

use crate::auth::AgentRecord;
use crate::error::{Error, Result};
use crate::jobs::build_spec::{kconfig_spec, repo_spec, KconfigRow};
use crate::jobs::lifecycle::Claim;
use crate::state::AppState;

/// What [`leased_job`] reads: the atomic job, where its commit is, and its
/// kernel config's `kconfigs` columns (NULL when the table does not know
/// the name: then it is taken as a make target, `defconfig`, `tinyconfig`,
/// ...).
#[derive(sqlx::FromRow)]
struct LeaseRow {
    spec: String,
    repo_name: String,
    repo_url: String,
    sha: String,
    #[sqlx(flatten)]
    kconfig: KconfigRow,
}

/// Everything the agent needs to run the claimed job, read at once with
/// its kernel config's row (the job's `kconfig` names it).
pub(super) async fn leased_job(
    state: &AppState,
    agent: &AgentRecord,
    claim: &Claim,
) -> Result<LeasedJob> {
    let row = sqlx::query_as::<_, LeaseRow>(
        "SELECT a.spec, r.name AS repo_name, r.url AS repo_url, c.sha, \
                k.id AS kconfig_id, k.base, k.fragment, k.full_artifact \
         FROM atomic_jobs a \
         JOIN submissions s ON s.id = a.submission_id \
         JOIN repos r ON r.id = s.repo_id \
         JOIN commits c ON c.id = $1 \
         LEFT JOIN kconfigs k ON k.name = a.kconfig \
         WHERE a.id = $2",
    )
    .bind(claim.commit_id)
    .bind(claim.atomic_job_id)
    .fetch_one(state.db.read())
    .await?;
    let mut job: AtomicJob = serde_json::from_str(&row.spec)
        .map_err(|e| Error::Unrunnable(format!("stored atomic job is not valid: {e}")))?;
    // Results of different machine classes must never share a result path.
    job.tbox_group = Some(agent.tbox_group.clone());
    let resolved = job
        .resolve(&agent.hardware)
        .map_err(|e| Error::Unrunnable(e.to_string()))?;
    let kconfig = kconfig_spec(state, &job.kconfig, &row.kconfig).await?;
    let commit = row.sha;
    Ok(LeasedJob {
        job_id: claim.job_id,
        submission_id: claim.submission_id,
        attempt: u32::try_from(claim.attempts).unwrap_or(u32::MAX),
        lease_expires_at: claim.lease_expires_at,
        heartbeat_interval_secs: state.config.heartbeat_interval_secs,
        repo: repo_spec(state, row.repo_name, row.repo_url),
        result_path: job.result_path(&commit),
        commit,
        run_index: u32::try_from(claim.run_index).unwrap_or(u32::MAX),
        job,
        resolved,
        kconfig,
    })
}
