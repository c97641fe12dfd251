//! Submissions: `submit`, `submissions`, `show`, `events`, `follow`, `cancel` and `results`.

use std::time::Duration;

use clap::Args;

use kbot_api::client::UserClient;
use kbot_api::submissions::{EventView, JobView, SubmissionStatus, SubmissionView, SubmitRequest};

use super::{client, read_job_file, Connection};
use crate::error::Result;
use crate::output;

#[derive(Debug, Clone, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub conn: Connection,
    /// Registered repo name.
    #[arg(long)]
    pub repo: String,
    /// LKP-style job file (YAML).
    #[arg(long)]
    pub job: String,
    /// Base commit (branch, tag or sha); default: the head's parent.
    #[arg(long)]
    pub base: Option<String>,
    /// Head commit (branch, tag or sha).
    #[arg(long)]
    pub head: String,
    #[arg(long, default_value_t = 0)]
    pub priority: i32,
    /// Cap on runs per side when the verdict is `unknown`.
    #[arg(long)]
    pub max_runs: Option<u32>,
    /// Do not bisect a regression between base and head.
    #[arg(long)]
    pub no_bisect: bool,
    /// Set a job variable in every job of the file, as LKP's `lkp submit -s`:
    /// `testtime=5s` or `'testtime: 5s'` (repeatable; top-level keys).
    #[arg(short = 's', long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

pub(super) async fn submit(args: SubmitArgs) -> Result<()> {
    let sets = args
        .set
        .iter()
        .map(|s| kbot_core::job::set::parse_set(s))
        .collect::<kbot_core::Result<Vec<_>>>()?;
    let job_file = kbot_core::job::set::set_variables(&read_job_file(&args.job).await?, &sets)?;
    let body = SubmitRequest {
        repo: args.repo,
        job_file,
        base: args.base,
        head: args.head,
        priority: args.priority,
        max_runs: args.max_runs,
        bisect: Some(!args.no_bisect),
    };
    let api = client(&args.conn)?;
    let s = api.submit(&body).await?;
    print_submission(&args.conn, &s)?;
    // On stderr: scripts read the one summary line from stdout.
    for line in skipped_lines(&s) {
        eprintln!("{line}");
    }
    let detail = api.submission(s.id).await?;
    for w in &detail.waiting {
        eprintln!("waiting job {}: {}", w.job_index, w.reason);
    }
    Ok(())
}

pub(super) async fn list(conn: &Connection, limit: u32) -> Result<()> {
    let list = client(conn)?.submissions(limit).await?;
    if conn.json {
        return output::json(&list);
    }
    for s in &list {
        output::line(&summary_line(s))?;
    }
    Ok(())
}

pub(super) async fn show(conn: &Connection, id: i64) -> Result<()> {
    let detail = client(conn)?.submission(id).await?;
    if conn.json {
        return output::json(&detail);
    }
    output::line(&summary_line(&detail.submission))?;
    for job in &detail.jobs {
        output::line(&job_line(job))?;
    }
    for w in &detail.waiting {
        output::line(&format!("waiting job {}: {}", w.job_index, w.reason))?;
    }
    Ok(())
}

pub(super) async fn events(conn: &Connection, id: i64, after: i64) -> Result<()> {
    let events = client(conn)?.events(id, after).await?;
    if conn.json {
        return output::json(&events);
    }
    for e in &events {
        output::line(&event_line(e))?;
    }
    Ok(())
}

pub(super) async fn follow(conn: &Connection, id: i64, interval: u64) -> Result<()> {
    let api = client(conn)?;
    follow_events(&api, id, Duration::from_secs(interval.max(1)), conn.json).await
}

pub(super) async fn cancel(conn: &Connection, id: i64) -> Result<()> {
    let s = client(conn)?.cancel(id).await?;
    print_submission(conn, &s)
}

pub(super) async fn results(conn: &Connection, id: i64) -> Result<()> {
    output::json(&client(conn)?.results(id).await?)
}

pub(super) async fn repro(conn: &Connection, job: i64) -> Result<()> {
    let script = client(conn)?.repro(job).await?;
    output::line(script.strip_suffix('\n').unwrap_or(&script))
}

async fn follow_events(api: &UserClient, id: i64, interval: Duration, json: bool) -> Result<()> {
    let mut after = 0_i64;
    loop {
        let events = api.events(id, after).await?;
        for e in &events {
            if json {
                output::json_line(e)?;
            } else {
                output::line(&event_line(e))?;
            }
            after = after.max(e.id);
        }
        let detail = api.submission(id).await?;
        if is_settled(detail.submission.state) {
            if json {
                return output::json_line(&detail.submission);
            }
            return output::line(&summary_line(&detail.submission));
        }
        tokio::time::sleep(interval).await;
    }
}

fn is_settled(state: SubmissionStatus) -> bool {
    matches!(
        state,
        SubmissionStatus::Done | SubmissionStatus::Failed | SubmissionStatus::Cancelled
    )
}

/// A submission as its summary line, or as JSON with `--json`.
fn print_submission(conn: &Connection, s: &SubmissionView) -> Result<()> {
    if conn.json {
        return output::json(s);
    }
    output::line(&summary_line(s))
}

/// One line per atomic job, monitor or key of the job file that kbot does
/// not run, with the reason.
fn skipped_lines(s: &SubmissionView) -> Vec<String> {
    s.skipped
        .iter()
        .map(|k| format!("skipped {} {}: {}", k.kind.as_str(), k.name, k.reason))
        .collect()
}

fn event_line(e: &EventView) -> String {
    format!(
        "{}\tjob {}\t{}\t{}",
        kbot_server::time::format_time(e.at),
        e.job_id,
        e.state,
        e.detail
    )
}

fn job_line(j: &JobView) -> String {
    format!(
        "job {id}\t#{index} {side} {commit:.12} run {run}\t{state}\t{agent}",
        id = j.id,
        index = j.job_index,
        side = j.side,
        commit = j.commit,
        run = j.run_index,
        state = j.state,
        agent = j.agent.as_deref().unwrap_or("-"),
    )
}

fn summary_line(s: &SubmissionView) -> String {
    format!(
        "{id}\t{state}\t{repo}\t{base:.12}..{head:.12}\t{fin}/{total} finished, {failed} failed\t{subject}",
        id = s.id,
        state = s.state,
        repo = s.repo,
        base = s.base.sha,
        head = s.head.sha,
        fin = s.jobs.finished,
        total = s.jobs.total,
        failed = s.jobs.failed,
        subject = s.head.subject,
    )
}
