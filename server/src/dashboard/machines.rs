//! `GET /machines`: every agent with its tbox group, status, fingerprint
//! (the machine under test and, for qemu agents, the host), current job and
//! last heartbeat, then the fleet's recent failures (build, boot, timeout,
//! incomplete runs, infrastructure) with links to their logs. Filtered by
//! `group`, `status` and failure `kind` from the URL; failures are paged.
//!
//! `GET /jobs/{id}/log`: one job's events with their full text (the build
//! log or console tail an agent posts with a failure) and the console of
//! its uploaded result.

use askama::Template;
use axum::extract::{Path, Query, State};
use kbot_core::machine::Hardware;
use serde::Deserialize;

use super::fleet::{self, RunningJob};
use crate::auth::AgentRecord;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::time::{format_time, now_ms};
use crate::web::paging::{filter, Pager, Paging};
use crate::web::{render, short_sha, PageResult, MEDIUM_SHA};

const FAILURES_PER_PAGE: u32 = 25;
/// Longest console shown on a log page; the end of a console says most.
const CONSOLE_TAIL_BYTES: usize = 256 * 1024;

#[derive(Debug, Default, Deserialize)]
pub struct MachinesQuery {
    pub group: Option<String>,
    /// `idle`, `busy` or `offline`.
    pub status: Option<String>,
    /// A failure kind: `build_failed`, `boot_failed`, `timeout`, ...
    pub kind: Option<String>,
    pub page: Option<u32>,
}

#[derive(Template)]
#[template(path = "machines.html")]
struct MachinesPage {
    group: String,
    status: String,
    kind: String,
    agents: Vec<MachineRow>,
    failures: Vec<FailureRow>,
    pager: Pager,
}

struct MachineRow {
    name: String,
    group: String,
    backend: String,
    status: String,
    guest: Vec<(&'static str, String)>,
    host: Option<Vec<(&'static str, String)>>,
    current: Option<(i64, i64, String)>,
    heartbeat: String,
    ago: String,
}

struct FailureRow {
    job_id: i64,
    submission_id: i64,
    at: String,
    kind: String,
    agent: String,
    group: String,
    testcase: String,
    sha: String,
    summary: String,
}

pub async fn page(State(state): State<AppState>, Query(q): Query<MachinesQuery>) -> PageResult {
    let (group, status, kind) = (filter(&q.group), filter(&q.status), filter(&q.kind));
    let now = now_ms();
    let offline_after = fleet::offline_after_ms(&state.config);
    let running = fleet::running_jobs(&state.db, group, i64::MAX).await?;
    let agents: Vec<MachineRow> = fleet::agents(&state.db, group)
        .await?
        .iter()
        .map(|a| {
            let s = fleet::status(a, now, offline_after).as_str();
            machine_row(a, s, &running, now)
        })
        .filter(|m| status.is_none_or(|s| m.status == s))
        .collect();
    let paging = Paging::new(q.page, FAILURES_PER_PAGE);
    let mut failures = failures(&state.db, group, kind, paging).await?;
    let has_next = failures.len() > FAILURES_PER_PAGE as usize;
    failures.truncate(FAILURES_PER_PAGE as usize);
    let filters = [
        ("group", q.group.clone().unwrap_or_default()),
        ("status", q.status.clone().unwrap_or_default()),
        ("kind", q.kind.clone().unwrap_or_default()),
    ];
    render(&MachinesPage {
        group: group.unwrap_or_default().to_owned(),
        status: status.unwrap_or_default().to_owned(),
        kind: kind.unwrap_or_default().to_owned(),
        agents,
        failures,
        pager: Pager::new("/machines", &filters, paging, has_next),
    })
}

fn machine_row(a: &AgentRecord, status: &str, running: &[RunningJob], now: i64) -> MachineRow {
    let current = running.iter().find(|j| j.agent_id == Some(a.id)).map(|j| {
        (
            j.job_id,
            j.submission_id,
            format!("{} {}", j.testcase, j.phase),
        )
    });
    MachineRow {
        name: a.name.clone(),
        group: a.tbox_group.clone(),
        backend: crate::auth::backend_str(a.backend).to_owned(),
        status: status.to_owned(),
        guest: fingerprint(&a.hardware),
        host: a.host.as_ref().map(fingerprint),
        current,
        heartbeat: format_time(a.last_seen_at),
        ago: fleet::elapsed(now - a.last_seen_at),
    }
}

/// The fingerprint as (field, value) pairs.
fn fingerprint(hw: &Hardware) -> Vec<(&'static str, String)> {
    vec![
        ("arch", hw.arch.clone()),
        ("CPU", hw.cpu_model.clone()),
        (
            "CPUs",
            format!(
                "{} threads ({} sockets × {} cores)",
                hw.threads, hw.sockets, hw.cores
            ),
        ),
        ("NUMA nodes", hw.numa_nodes.to_string()),
        ("memory", kbot_core::needs::human_size(hw.memory_bytes)),
        ("page size", kbot_core::needs::human_size(hw.page_size)),
        ("kernel", hw.kernel.clone()),
    ]
}

/// A failure event as [`failures`] reads it.
#[derive(sqlx::FromRow)]
struct FailureEventRow {
    job_id: i64,
    at: i64,
    failure: String,
    detail: String,
    submission_id: i64,
    testcase: String,
    sha: String,
    agent: String,
    tbox_group: String,
}

impl From<FailureEventRow> for FailureRow {
    fn from(row: FailureEventRow) -> FailureRow {
        FailureRow {
            job_id: row.job_id,
            submission_id: row.submission_id,
            at: format_time(row.at),
            kind: row.failure,
            agent: row.agent,
            group: row.tbox_group,
            testcase: row.testcase,
            sha: short_sha(&row.sha, MEDIUM_SHA),
            summary: crate::access::paths_for_viewer(&last_line(&row.detail)),
        }
    }
}

/// A page of failure events, newest first (one row more than a page).
async fn failures(
    db: &Db,
    group: Option<&str>,
    kind: Option<&str>,
    paging: Paging,
) -> Result<Vec<FailureRow>> {
    let rows = sqlx::query_as::<_, FailureEventRow>(
        "SELECT e.job_id, e.at, e.failure, e.detail, j.submission_id, a.testcase, c.sha, \
                COALESCE(ag.name, '') AS agent, COALESCE(ag.tbox_group, '') AS tbox_group \
         FROM job_events e JOIN jobs j ON j.id = e.job_id \
         JOIN atomic_jobs a ON a.id = j.atomic_job_id JOIN commits c ON c.id = j.commit_id \
         LEFT JOIN agents ag ON ag.id = e.agent_id \
         WHERE e.failure IS NOT NULL AND ($1 = '' OR ag.tbox_group = $2) \
           AND ($3 = '' OR e.failure = $4) \
         ORDER BY e.id DESC LIMIT $5 OFFSET $6",
    )
    .bind(group.unwrap_or(""))
    .bind(group.unwrap_or(""))
    .bind(kind.unwrap_or(""))
    .bind(kind.unwrap_or(""))
    .bind(paging.limit_probe())
    .bind(paging.offset())
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(FailureRow::from).collect())
}

/// The last non-empty line of a log tail, cut to a table cell's width.
fn last_line(detail: &str) -> String {
    let line = detail
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out: String = line.chars().take(160).collect();
    if line.chars().count() > 160 {
        out.push('…');
    }
    out
}

#[derive(Template)]
#[template(path = "job_log.html")]
struct JobLogPage {
    job_id: i64,
    submission_id: i64,
    side: String,
    sha: String,
    state: String,
    failure: String,
    events: Vec<(String, String, String, String)>,
    console: Option<String>,
    /// The build the job's kernel came from.
    build: Option<kbot_api::builds::BuildView>,
    /// The run has a reproduction script ([`crate::jobs::repro`]).
    reproducible: bool,
    public_url: String,
}

/// The job a log page is about.
#[derive(sqlx::FromRow)]
struct JobLogRow {
    submission_id: i64,
    side: String,
    state: String,
    failure: String,
    sha: String,
    console_path: Option<String>,
    tuning: Option<String>,
}

/// `GET /jobs/{id}/log`.
pub async fn job_log(State(state): State<AppState>, Path(id): Path<i64>) -> PageResult {
    let job = sqlx::query_as::<_, JobLogRow>(
        "SELECT j.submission_id, j.side, j.state, COALESCE(j.failure, '') AS failure, c.sha, \
                r.console_path, r.tuning \
         FROM jobs j JOIN commits c ON c.id = j.commit_id \
         LEFT JOIN results r ON r.job_id = j.id WHERE j.id = $1",
    )
    .bind(id)
    .fetch_optional(state.db.read())
    .await
    .map_err(Error::from)?
    .ok_or_else(|| Error::not_found("job", id))?;
    let events: Vec<(i64, String, String, String)> = sqlx::query_as(
        "SELECT e.at, e.state, COALESCE(e.failure, '') AS failure, e.detail \
         FROM job_events e WHERE e.job_id = $1 ORDER BY e.id",
    )
    .bind(id)
    .fetch_all(state.db.read())
    .await
    .map_err(Error::from)?;
    let events = events
        .into_iter()
        .map(|(at, state, failure, detail)| {
            let detail = crate::access::paths_for_viewer(&detail);
            (format_time(at), state, failure, detail)
        })
        .collect();
    let console = match job.console_path {
        Some(path) => Some(tail(&state.artifacts.get(&path).await?)),
        None => None,
    };
    let mut conn = state.db.read().acquire().await.map_err(Error::from)?;
    let build = crate::builds::of_job(&mut conn, id).await?;
    render(&JobLogPage {
        job_id: id,
        submission_id: job.submission_id,
        side: job.side,
        sha: job.sha,
        state: job.state,
        failure: job.failure,
        events,
        console,
        build,
        reproducible: job
            .tuning
            .as_deref()
            .is_some_and(crate::jobs::repro::reproducible),
        public_url: state.config.mail.public_url.clone(),
    })
}

/// The last [`CONSOLE_TAIL_BYTES`] of `text`, cut at a character boundary.
fn tail(text: &str) -> String {
    let kept = kbot_core::text::tail(text, CONSOLE_TAIL_BYTES);
    if kept.len() == text.len() {
        return text.to_owned();
    }
    format!("[… {} bytes before]\n{kept}", text.len() - kept.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_take_the_last_line() {
        assert_eq!(last_line("make: ***\nerror: foo\n\n"), "error: foo");
        assert_eq!(last_line(""), "");
        assert!(last_line(&"x".repeat(300)).ends_with('…'));
        let long = format!("{}é", "a".repeat(CONSOLE_TAIL_BYTES));
        assert!(tail(&long).starts_with("[… 2 bytes before]"));
    }
}
