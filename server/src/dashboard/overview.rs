//! `GET /`: the dashboard's front page. The fleet per tbox group (online,
//! busy, offline), the queue and its oldest wait, the running jobs with
//! their phase and elapsed time, the robot's open bisections, and the
//! latest regression reports and bisections. `?group=` narrows the fleet,
//! queue and running jobs to one tbox group.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Query, State};
use serde::Deserialize;

use super::fleet::{self, Status};
use crate::db::Db;
use crate::error::Result;
use crate::state::AppState;
use crate::time::{format_time, now_ms};
use crate::web::paging::filter;
use crate::web::{render, short_sha, PageResult, MEDIUM_SHA};
use kbot_api::bisections::BisectionState;
use kbot_api::reports::{OutboxState, ReportKind};

/// Rows in each "recent" list and running jobs shown.
const RECENT: i64 = 10;
const RUNNING: i64 = 50;

#[derive(Debug, Default, Deserialize)]
pub struct OverviewQuery {
    pub group: Option<String>,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    group: String,
    groups: Vec<GroupRow>,
    queue: Vec<QueueRow>,
    queued_total: i64,
    running: Vec<RunningRow>,
    open_bisections: Vec<BisectionRow>,
    recent_bisections: Vec<BisectionRow>,
    reports: Vec<ReportRow>,
}

#[derive(Default)]
struct GroupRow {
    name: String,
    idle: u32,
    busy: u32,
    offline: u32,
}

struct QueueRow {
    group: String,
    queued: i64,
    oldest_wait: String,
}

struct RunningRow {
    job_id: i64,
    submission_id: i64,
    agent: String,
    group: String,
    testcase: String,
    side: String,
    run: i64,
    sha: String,
    phase: String,
    in_phase: String,
    elapsed: String,
}

struct BisectionRow {
    id: i64,
    state: BisectionState,
    repo: String,
    metric: String,
    group: String,
    created: String,
}

struct ReportRow {
    message_id: String,
    kind: ReportKind,
    subject: String,
    state: OutboxState,
    created: String,
}

pub async fn page(State(state): State<AppState>, Query(q): Query<OverviewQuery>) -> PageResult {
    let group = filter(&q.group);
    let now = now_ms();
    let offline_after = fleet::offline_after_ms(&state.config);
    let agents = fleet::agents(&state.db, group).await?;
    let mut groups: BTreeMap<String, GroupRow> = BTreeMap::new();
    for a in &agents {
        let row = groups
            .entry(a.tbox_group.clone())
            .or_insert_with(|| GroupRow {
                name: a.tbox_group.clone(),
                ..GroupRow::default()
            });
        match fleet::status(a, now, offline_after) {
            Status::Idle => row.idle += 1,
            Status::Busy => row.busy += 1,
            Status::Offline => row.offline += 1,
        }
    }
    let queue = queue(&state.db, group, now).await?;
    let running = fleet::running_jobs(&state.db, group, RUNNING).await?;
    render(&OverviewPage {
        group: group.unwrap_or_default().to_owned(),
        groups: groups.into_values().collect(),
        queued_total: queue.iter().map(|q| q.queued).sum(),
        queue,
        running: running
            .into_iter()
            .map(|j| RunningRow {
                job_id: j.job_id,
                submission_id: j.submission_id,
                agent: j.agent,
                group: j.tbox_group,
                testcase: j.testcase,
                side: j.side,
                run: j.run_index,
                sha: short_sha(&j.sha, MEDIUM_SHA),
                phase: j.phase,
                in_phase: fleet::elapsed(now - j.phase_at),
                elapsed: fleet::elapsed(now - j.leased_at),
            })
            .collect(),
        open_bisections: bisections(&state.db, true).await?,
        recent_bisections: bisections(&state.db, false).await?,
        reports: reports(&state.db).await?,
    })
}

/// Queued jobs per tbox group (a job not yet tied to a group waits for
/// any agent) and how long the oldest has waited.
async fn queue(db: &Db, group: Option<&str>, now: i64) -> Result<Vec<QueueRow>> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT COALESCE(a.tbox_group, '') AS tbox_group, COUNT(*) AS n, \
                MIN(j.created_at) AS oldest \
         FROM jobs j JOIN atomic_jobs a ON a.id = j.atomic_job_id \
         WHERE j.state = 'queued' AND ($1 = '' OR a.tbox_group = $2) \
         GROUP BY COALESCE(a.tbox_group, '') ORDER BY 1",
    )
    .bind(group.unwrap_or(""))
    .bind(group.unwrap_or(""))
    .fetch_all(db.read())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(g, queued, oldest)| QueueRow {
            group: if g.is_empty() { "any".into() } else { g },
            queued,
            oldest_wait: fleet::elapsed(now - oldest),
        })
        .collect())
}

/// A bisection as [`bisections`] reads it.
#[derive(sqlx::FromRow)]
struct StoredBisection {
    id: i64,
    #[sqlx(try_from = "String")]
    state: BisectionState,
    repo: String,
    metric: String,
    tbox_group: String,
    created_at: i64,
}

impl From<StoredBisection> for BisectionRow {
    fn from(row: StoredBisection) -> BisectionRow {
        BisectionRow {
            id: row.id,
            state: row.state,
            repo: row.repo,
            metric: row.metric,
            group: row.tbox_group,
            created: format_time(row.created_at),
        }
    }
}

/// Open (running or verifying) bisections, or the latest of any state.
async fn bisections(db: &Db, open: bool) -> Result<Vec<BisectionRow>> {
    let only_open = if open {
        "WHERE b.state IN ('running', 'verifying')"
    } else {
        ""
    };
    let rows = sqlx::query_as::<_, StoredBisection>(&format!(
        "SELECT b.id, b.state, r.name AS repo, b.metric, b.tbox_group, b.created_at \
         FROM bisections b JOIN repos r ON r.id = b.repo_id {only_open} \
         ORDER BY b.id DESC LIMIT $1"
    ))
    .bind(RECENT)
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(BisectionRow::from).collect())
}

/// A report as [`reports`] reads it.
#[derive(sqlx::FromRow)]
struct StoredReport {
    message_id: String,
    #[sqlx(try_from = "String")]
    kind: ReportKind,
    subject: String,
    #[sqlx(try_from = "String")]
    state: OutboxState,
    created_at: i64,
}

impl From<StoredReport> for ReportRow {
    fn from(row: StoredReport) -> ReportRow {
        ReportRow {
            message_id: row.message_id,
            kind: row.kind,
            subject: row.subject,
            state: row.state,
            created: format_time(row.created_at),
        }
    }
}

/// The latest reports the robot wrote (sent or not).
async fn reports(db: &Db) -> Result<Vec<ReportRow>> {
    let rows = sqlx::query_as::<_, StoredReport>(
        "SELECT message_id, kind, subject, state, created_at FROM report_outbox \
         ORDER BY id DESC LIMIT $1",
    )
    .bind(RECENT)
    .fetch_all(db.read())
    .await?;
    Ok(rows.into_iter().map(ReportRow::from).collect())
}
