//! Why a submission's queued jobs wait when no enrolled agent can ever take
//! them: a pair pinned to a tbox group with no agent, or hardware needs
//! (`arch`, `need_cpu`, `need_memory`, `need_page_size`) no agent of the
//! group meets. Computed when read, so an agent enrolling later clears it.

use kbot_core::job::AtomicJob;

use crate::auth::{AgentRecord, AgentRow, AGENT_COLUMNS};
use crate::db::Db;
use crate::error::Result;
use crate::jobs;
use kbot_api::submissions::WaitingJob;

/// How many agents a reason names before it says "and N more".
const NAMED_AGENTS: usize = 3;

/// An atomic job with queued runs, as [`waiting_jobs`] reads it.
#[derive(sqlx::FromRow)]
struct QueuedJob {
    id: i64,
    position: i64,
    spec: String,
    tbox_group: Option<String>,
}

/// The atomic jobs of `submission_id` with queued runs that no enrolled
/// agent (one holding a live agent token) can lease, each with the reason.
pub async fn waiting_jobs(db: &Db, submission_id: i64) -> Result<Vec<WaitingJob>> {
    let queued = sqlx::query_as::<_, QueuedJob>(
        "SELECT a.id, a.position, a.spec, a.tbox_group FROM atomic_jobs a \
         WHERE a.submission_id = $1 AND EXISTS \
             (SELECT 1 FROM jobs j WHERE j.atomic_job_id = a.id AND j.state = 'queued') \
         ORDER BY a.position",
    )
    .bind(submission_id)
    .fetch_all(db.read())
    .await?;
    if queued.is_empty() {
        return Ok(Vec::new());
    }
    let agents = enrolled_agents(db).await?;
    let mut out = Vec::new();
    for row in queued {
        let job = jobs::parse_spec(row.id, &row.spec)?;
        let pinned = row.tbox_group;
        if let Some(reason) = why_waiting(&job, pinned.as_deref(), &agents) {
            out.push(WaitingJob {
                job_index: u32::try_from(row.position).unwrap_or(u32::MAX),
                tbox_group: pinned,
                needs: job.needs.clone(),
                reason,
            });
        }
    }
    Ok(out)
}

/// Agents that can still lease: enrolled, with an unrevoked agent token.
async fn enrolled_agents(db: &Db) -> Result<Vec<AgentRecord>> {
    let rows = sqlx::query_as::<_, AgentRow>(&format!(
        "SELECT {AGENT_COLUMNS} FROM agents ag WHERE EXISTS \
             (SELECT 1 FROM tokens t WHERE t.agent_id = ag.id AND t.kind = 'agent' \
              AND t.revoked_at IS NULL) \
         ORDER BY tbox_group, name"
    ))
    .fetch_all(db.read())
    .await?;
    rows.into_iter().map(AgentRecord::try_from).collect()
}

/// Why no agent of `agents` can lease `job` (pinned to `pinned`, if so);
/// `None` when one can.
pub fn why_waiting(
    job: &AtomicJob,
    pinned: Option<&str>,
    agents: &[AgentRecord],
) -> Option<String> {
    let in_group: Vec<&AgentRecord> = agents
        .iter()
        .filter(|a| pinned.is_none_or(|g| a.tbox_group == g))
        .collect();
    if in_group.is_empty() {
        return Some(match pinned {
            Some(g) => {
                format!("no enrolled agent is in tbox group {g}, which the job is pinned to")
            }
            None => "no agent has enrolled".to_string(),
        });
    }
    let lacking: Vec<String> = in_group
        .iter()
        .map(|a| (a, job.needs.unmet(&a.hardware)))
        .filter_map(|(a, unmet)| {
            (!unmet.is_empty())
                .then(|| format!("{} ({}) lacks {}", a.name, a.tbox_group, unmet.join(", ")))
        })
        .collect();
    if lacking.len() < in_group.len() {
        return None;
    }
    let mut named = lacking[..lacking.len().min(NAMED_AGENTS)].join("; ");
    if lacking.len() > NAMED_AGENTS {
        named.push_str(&format!("; and {} more", lacking.len() - NAMED_AGENTS));
    }
    Some(format!(
        "no enrolled agent{} has {}: {named}",
        pinned
            .map(|g| format!(" of tbox group {g}"))
            .unwrap_or_default(),
        job.needs.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbot_api::agent::{BootBackend, Hardware};
    use kbot_core::job::parse_job_file;

    fn agent(name: &str, group: &str, arch: &str, page_size: u64) -> AgentRecord {
        AgentRecord {
            id: 1,
            name: name.into(),
            tbox_group: group.into(),
            backend: BootBackend::Qemu,
            hardware: Hardware {
                arch: arch.into(),
                cpu_model: "QEMU".into(),
                sockets: 1,
                cores: 2,
                threads: 2,
                numa_nodes: 1,
                memory_bytes: 1 << 30,
                page_size,
                microcode: None,
                kernel: "built per job".into(),
            },
            host: None,
            state: crate::auth::AgentState::Idle,
            last_seen_at: 0,
            disposable: false,
        }
    }

    fn job(text: &str) -> AtomicJob {
        parse_job_file(text).expect("job file").remove(0)
    }

    #[test]
    fn a_job_waits_only_when_no_agent_can_take_it() {
        let arm = job("arch: aarch64\nneed_page_size: 64K\npipen:\n  size: 4k\n");
        let x86 = [agent("vm-1", "vm", "x86_64", 4096)];
        let both = [
            agent("vm-1", "vm", "x86_64", 4096),
            agent("arm-1", "arm", "aarch64", 65536),
        ];
        assert_eq!(
            why_waiting(&arm, None, &x86).as_deref(),
            Some(
                "no enrolled agent has arch aarch64, 64K pages: \
                 vm-1 (vm) lacks arch aarch64 (has x86_64), 64K pages (has 4K)"
            )
        );
        assert_eq!(why_waiting(&arm, None, &both), None);
        assert_eq!(
            why_waiting(&arm, Some("vm"), &both).as_deref(),
            Some(
                "no enrolled agent of tbox group vm has arch aarch64, 64K pages: \
                 vm-1 (vm) lacks arch aarch64 (has x86_64), 64K pages (has 4K)"
            )
        );
        assert_eq!(
            why_waiting(&arm, Some("big"), &both).as_deref(),
            Some("no enrolled agent is in tbox group big, which the job is pinned to")
        );
        assert_eq!(
            why_waiting(&job("pipen:\n  size: 4k\n"), None, &[]).as_deref(),
            Some("no agent has enrolled")
        );
    }

    #[test]
    fn a_long_fleet_is_named_in_part() {
        let big = job("need_cpu: 64\npipen:\n  size: 4k\n");
        let fleet: Vec<AgentRecord> = (0..5)
            .map(|i| agent(&format!("vm-{i}"), "vm", "x86_64", 4096))
            .collect();
        let reason = why_waiting(&big, None, &fleet).expect("waits");
        assert!(
            reason.contains("vm-2 (vm) lacks 64 CPUs (has 2); and 2 more"),
            "{reason}"
        );
    }
}
