//! What the dashboard says about agents and running jobs, shared by the
//! overview and the machines page: whether an agent is online, and which
//! phase a leased job is in (from the events its agent posted).

use std::collections::HashMap;

use crate::auth::{AgentRecord, AgentRow, AgentState, AGENT_COLUMNS};
use crate::config::Config;
use crate::db::Db;
use crate::error::Result;
use crate::jobs::ACTIVE_STATES_SQL;

/// An agent's status as a reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Idle,
    Busy,
    /// Not heard from for longer than any healthy agent stays quiet.
    Offline,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Busy => "busy",
            Status::Offline => "offline",
        }
    }
}

/// How long an agent may be silent before it counts as offline: a busy
/// agent heartbeats every third of a lease, an idle one long-polls for at
/// most `max_lease_wait_secs`; a minute more covers a slow network.
pub fn offline_after_ms(config: &Config) -> i64 {
    let quiet = config.lease_secs.max(config.max_lease_wait_secs);
    (i64::from(quiet) + 60) * 1000
}

pub fn status(agent: &AgentRecord, now_ms: i64, offline_after_ms: i64) -> Status {
    if agent.state == AgentState::Offline || now_ms - agent.last_seen_at > offline_after_ms {
        Status::Offline
    } else if agent.state == AgentState::Busy {
        Status::Busy
    } else {
        Status::Idle
    }
}

/// Every agent, by tbox group and name; `group` restricts to one group.
pub async fn agents(db: &Db, group: Option<&str>) -> Result<Vec<AgentRecord>> {
    let rows = sqlx::query_as::<_, AgentRow>(&format!(
        "SELECT {AGENT_COLUMNS} FROM agents WHERE ($1 = '' OR tbox_group = $2) \
         ORDER BY tbox_group, name"
    ))
    .bind(group.unwrap_or(""))
    .bind(group.unwrap_or(""))
    .fetch_all(db.read())
    .await?;
    rows.into_iter().map(AgentRecord::try_from).collect()
}

/// A job an agent holds now.
#[derive(Debug, Clone)]
pub struct RunningJob {
    pub job_id: i64,
    pub submission_id: i64,
    pub agent_id: Option<i64>,
    pub agent: String,
    pub tbox_group: String,
    pub testcase: String,
    pub side: String,
    pub run_index: i64,
    pub sha: String,
    /// `leased` until the agent posts its first progress event.
    pub phase: String,
    /// When the current lease began and when the phase did (Unix ms).
    pub leased_at: i64,
    pub phase_at: i64,
}

/// A leased job as [`running_jobs`] reads it.
#[derive(sqlx::FromRow)]
struct RunningJobRow {
    id: i64,
    submission_id: i64,
    side: String,
    run_index: i64,
    updated_at: i64,
    lease_owner: Option<i64>,
    sha: String,
    testcase: String,
    agent: String,
    tbox_group: String,
}

impl From<RunningJobRow> for RunningJob {
    fn from(row: RunningJobRow) -> RunningJob {
        RunningJob {
            job_id: row.id,
            submission_id: row.submission_id,
            agent_id: row.lease_owner,
            agent: row.agent,
            tbox_group: row.tbox_group,
            testcase: row.testcase,
            side: row.side,
            run_index: row.run_index,
            sha: row.sha,
            phase: String::from("leased"),
            leased_at: row.updated_at,
            phase_at: row.updated_at,
        }
    }
}

/// The leased jobs (at most `limit`), oldest lease first, each with the
/// phase its agent last reported.
pub async fn running_jobs(db: &Db, group: Option<&str>, limit: i64) -> Result<Vec<RunningJob>> {
    let rows = sqlx::query_as::<_, RunningJobRow>(&format!(
        "SELECT j.id, j.submission_id, j.side, j.run_index, j.updated_at, j.lease_owner, \
                c.sha, a.testcase, COALESCE(ag.name, '') AS agent, \
                COALESCE(ag.tbox_group, a.tbox_group, '') AS tbox_group \
         FROM jobs j JOIN atomic_jobs a ON a.id = j.atomic_job_id \
         JOIN commits c ON c.id = j.commit_id \
         LEFT JOIN agents ag ON ag.id = j.lease_owner \
         WHERE j.state IN {ACTIVE_STATES_SQL} \
           AND ($1 = '' OR COALESCE(ag.tbox_group, a.tbox_group, '') = $2) \
         ORDER BY j.id LIMIT $3"
    ))
    .bind(group.unwrap_or(""))
    .bind(group.unwrap_or(""))
    .bind(limit)
    .fetch_all(db.read())
    .await?;
    let mut jobs: Vec<RunningJob> = rows.into_iter().map(RunningJob::from).collect();
    apply_events(db, &mut jobs).await?;
    Ok(jobs)
}

/// Sets each job's lease start and phase from its events: the last
/// `leased` event starts the current attempt, the progress events after
/// it name the phase.
async fn apply_events(db: &Db, jobs: &mut [RunningJob]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let rows: Vec<(i64, String, i64)> = sqlx::query_as(&format!(
        "SELECT e.job_id, e.state, e.at FROM job_events e JOIN jobs j ON j.id = e.job_id \
         WHERE j.state IN {ACTIVE_STATES_SQL} ORDER BY e.job_id, e.id"
    ))
    .fetch_all(db.read())
    .await?;
    let index: HashMap<i64, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.job_id, i))
        .collect();
    for (job_id, state, at) in rows {
        let Some(job) = index.get(&job_id).and_then(|&i| jobs.get_mut(i)) else {
            continue;
        };
        match state.as_str() {
            "leased" => {
                job.leased_at = at;
                job.phase = state;
                job.phase_at = at;
            }
            "building" | "booting" | "running" | "uploading" => {
                job.phase = state;
                job.phase_at = at;
            }
            _ => {}
        }
    }
    Ok(())
}

/// `1h 02m`, `3m 07s`, `12s`: an elapsed time at a glance.
pub fn elapsed(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_reads_at_a_glance() {
        assert_eq!(elapsed(12_400), "12s");
        assert_eq!(elapsed(187_000), "3m 07s");
        assert_eq!(elapsed(3_720_000), "1h 02m");
        assert_eq!(elapsed(-5), "0s");
    }
}
