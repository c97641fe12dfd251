//! The user subcommands and what each one asks the server.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::{ApiClient, ClientError};
use crate::submissions::types::{
    EventView, RepoCreate, RepoView, SubmissionDetail, SubmissionResults, SubmissionView,
    SubmitRequest,
};

/// Where the server is and who is asking; shared by every user subcommand.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of the kbot server.
    #[arg(long, env = "KBOT_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// User API token (created with the admin subcommand).
    #[arg(long, env = "KBOT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// User subcommands, flattened into `kbot-server`'s own command enum.
#[derive(Debug, Clone, Subcommand)]
pub enum UserCommand {
    /// Submit a job file for a base/head pair, or for one commit against its parent.
    Submit(SubmitArgs),
    /// List recent submissions.
    Submissions {
        #[command(flatten)]
        conn: Connection,
        /// How many, newest first.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Print a submission's events as they happen, until it is done.
    Follow {
        #[command(flatten)]
        conn: Connection,
        id: i64,
        /// Seconds between polls.
        #[arg(long, default_value_t = 2)]
        interval: u64,
    },
    /// Cancel a submission: queued jobs are dropped, running ones told to stop.
    Cancel {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Print a submission's per-run metrics and comparisons as JSON.
    Results {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Manage registered git repositories.
    #[command(subcommand)]
    Repo(RepoCommand),
}

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
}

#[derive(Debug, Clone, Subcommand)]
pub enum RepoCommand {
    /// Register a repo (git URL or server-side path) and mirror it.
    Add {
        #[command(flatten)]
        conn: Connection,
        name: String,
        url: String,
        #[arg(long)]
        default_branch: Option<String>,
    },
    /// List registered repos.
    List {
        #[command(flatten)]
        conn: Connection,
    },
}

/// Runs one user subcommand, printing its answer on stdout.
pub async fn run(cmd: UserCommand) -> Result<(), ClientError> {
    match cmd {
        UserCommand::Submit(args) => submit(args).await,
        UserCommand::Submissions { conn, limit } => {
            let list: Vec<SubmissionView> = client(&conn)?
                .get(&format!("/submissions?limit={limit}"))
                .await?;
            for s in &list {
                println!("{}", summary_line(s));
            }
            Ok(())
        }
        UserCommand::Follow { conn, id, interval } => {
            follow(&client(&conn)?, id, Duration::from_secs(interval.max(1))).await
        }
        UserCommand::Cancel { conn, id } => {
            let s: SubmissionView = client(&conn)?
                .post(&format!("/submissions/{id}/cancel"), &())
                .await?;
            println!("{}", summary_line(&s));
            Ok(())
        }
        UserCommand::Results { conn, id } => {
            let r: SubmissionResults = client(&conn)?
                .get(&format!("/submissions/{id}/results"))
                .await?;
            println!("{}", serde_json::to_string_pretty(&r)?);
            Ok(())
        }
        UserCommand::Repo(RepoCommand::Add {
            conn,
            name,
            url,
            default_branch,
        }) => {
            let body = RepoCreate {
                name,
                url,
                default_branch,
            };
            let repo: RepoView = client(&conn)?.post("/repos", &body).await?;
            println!("{}\t{}\t{}", repo.name, repo.default_branch, repo.url);
            Ok(())
        }
        UserCommand::Repo(RepoCommand::List { conn }) => {
            let repos: Vec<RepoView> = client(&conn)?.get("/repos").await?;
            for repo in repos {
                println!("{}\t{}\t{}", repo.name, repo.default_branch, repo.url);
            }
            Ok(())
        }
    }
}

fn client(conn: &Connection) -> Result<ApiClient, ClientError> {
    ApiClient::new(&conn.server, conn.token.clone())
}

async fn submit(args: SubmitArgs) -> Result<(), ClientError> {
    let job_file = tokio::fs::read_to_string(&args.job)
        .await
        .map_err(|source| ClientError::ReadFile {
            path: args.job.clone(),
            source,
        })?;
    let body = SubmitRequest {
        repo: args.repo,
        job_file,
        base: args.base,
        head: args.head,
        priority: args.priority,
        max_runs: args.max_runs,
    };
    let s: SubmissionView = client(&args.conn)?.post("/submissions", &body).await?;
    println!("{}", summary_line(&s));
    Ok(())
}

async fn follow(api: &ApiClient, id: i64, interval: Duration) -> Result<(), ClientError> {
    let mut after = 0_i64;
    loop {
        let events: Vec<EventView> = api
            .get(&format!("/submissions/{id}/events?after={after}"))
            .await?;
        for e in &events {
            println!(
                "{}\tjob {}\t{}\t{}",
                crate::dashboard::format_time(e.at),
                e.job_id,
                e.state,
                e.detail
            );
            after = after.max(e.id);
        }
        let detail: SubmissionDetail = api.get(&format!("/submissions/{id}")).await?;
        if is_settled(&detail.submission.state) {
            println!("{}", summary_line(&detail.submission));
            return Ok(());
        }
        tokio::time::sleep(interval).await;
    }
}

fn is_settled(state: &str) -> bool {
    matches!(state, "done" | "failed" | "cancelled")
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
