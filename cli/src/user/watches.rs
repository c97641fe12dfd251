//! Watched branches: `watch add`, `list`, `show` and `rm`.

use clap::Subcommand;

use kbot_api::watches::WatchCreate;

use super::{client, parse_interval, read_job_file, Connection};
use crate::error::Result;
use crate::output;

#[derive(Debug, Clone, Subcommand)]
pub enum WatchCommand {
    /// Watch a branch: test each new head with the job file.
    Add {
        #[command(flatten)]
        conn: Connection,
        #[arg(long)]
        repo: String,
        #[arg(long)]
        branch: String,
        /// LKP-style job file (YAML).
        #[arg(long)]
        job: String,
        /// Machine class to run on (default: the first agent's).
        #[arg(long)]
        tbox_group: Option<String>,
        /// How often to fetch: `600`, `30s`, `10m`, `1h`.
        #[arg(long, value_parser = parse_interval)]
        interval: Option<u32>,
        /// Cap on runs per side of each pair.
        #[arg(long)]
        max_runs: Option<u32>,
    },
    /// List watches (JSON).
    List {
        #[command(flatten)]
        conn: Connection,
    },
    /// A watch and what it did (JSON).
    Show {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Stop watching.
    Rm {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
}

pub(super) async fn run(cmd: WatchCommand) -> Result<()> {
    match cmd {
        WatchCommand::Add {
            conn,
            repo,
            branch,
            job,
            tbox_group,
            interval,
            max_runs,
        } => {
            let body = WatchCreate {
                repo,
                branch,
                job_file: read_job_file(&job).await?,
                tbox_group,
                interval_secs: interval,
                max_runs,
            };
            output::json(&client(&conn)?.add_watch(&body).await?)
        }
        WatchCommand::List { conn } => output::json(&client(&conn)?.watches().await?),
        WatchCommand::Show { conn, id } => output::json(&client(&conn)?.watch(id).await?),
        WatchCommand::Rm { conn, id } => output::json(&client(&conn)?.remove_watch(id).await?),
    }
}
