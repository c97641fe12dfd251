//! The user subcommands (`submit`, `submissions`, `show`, `events`,
//! `follow`, `cancel`, `results`, `repo`, `watch`, `list`, `series`, `bisections`, `bisect`,
//! `reports`, `report`) and what each one asks the server through
//! [`UserClient`], one module per resource as `kbot_api` has them
//! (`submissions`, `repos`, `watches`, `lists` with their series,
//! `bisections`, `reports`); here, the command enum, its dispatch and what
//! the modules share.

mod bisections;
mod lists;
mod reports;
mod repos;
mod submissions;
mod watches;

use clap::{Args, Subcommand};

use kbot_api::client::UserClient;

use crate::error::{Error, Result};

pub use bisections::BisectCommand;
pub use lists::ListCommandArgs;
pub use reports::ReportCommand;
pub use repos::RepoCommand;
pub use submissions::SubmitArgs;
pub use watches::WatchCommand;

/// Where the server is and who is asking; shared by every user subcommand.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of the kbot server (`KBOT_SERVER`, its old name, is still read).
    #[arg(long, env = "KBOT_SERVER_URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// User API token (created with the admin subcommand).
    #[arg(long, env = "KBOT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the answer as JSON (the API's own objects) instead of text
    /// lines; `follow` prints one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// User subcommands, flattened into `kbot-server`'s own command enum.
// Parsed once per run, as `ListCommandArgs`: its size costs nothing.
#[allow(clippy::large_enum_variant)]
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
    /// A submission: its pair, state, atomic jobs, job rows and the jobs no
    /// agent can take.
    Show {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Print a submission's events so far, oldest first, and return
    /// (`follow` waits for more).
    Events {
        #[command(flatten)]
        conn: Connection,
        id: i64,
        /// Only the events after this event id.
        #[arg(long, default_value_t = 0)]
        after: i64,
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
    /// Print the shell script that reproduces a finished run (a job id): it
    /// fetches the commit, builds the kernel with the run's .config, boots
    /// the initramfs the run booted with the run's QEMU line, and prints
    /// each metric beside the run's (equal to the last digit on an icount
    /// clock).
    Repro {
        #[command(flatten)]
        conn: Connection,
        /// The job id of the run (`kbot-server results` lists them).
        job: i64,
    },
    /// Manage registered git repositories.
    #[command(subcommand)]
    Repo(RepoCommand),
    /// Branches the robot follows: every new head is tested, regressions bisected.
    #[command(subcommand)]
    Watch(WatchCommand),
    /// Mailing lists the robot reads: posted series tested, threads answered.
    #[command(subcommand)]
    List(ListCommandArgs),
    /// Recent patch series of every list (JSON with --json; a line each otherwise).
    Series {
        #[command(flatten)]
        conn: Connection,
    },
    /// A series and its parts (JSON).
    SeriesShow {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// List recent bisections (JSON).
    Bisections {
        #[command(flatten)]
        conn: Connection,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Show or cancel a bisection.
    #[command(subcommand)]
    Bisect(BisectCommand),
    /// List the latest regression reports, newest first.
    Reports {
        #[command(flatten)]
        conn: Connection,
    },
    /// Show or resend a regression report.
    #[command(subcommand)]
    Report(ReportCommand),
}

/// Runs one user subcommand, printing its answer on stdout.
pub async fn run(cmd: UserCommand) -> Result<()> {
    match cmd {
        UserCommand::Submit(args) => submissions::submit(args).await,
        UserCommand::Submissions { conn, limit } => submissions::list(&conn, limit).await,
        UserCommand::Show { conn, id } => submissions::show(&conn, id).await,
        UserCommand::Events { conn, id, after } => submissions::events(&conn, id, after).await,
        UserCommand::Follow { conn, id, interval } => {
            submissions::follow(&conn, id, interval).await
        }
        UserCommand::Cancel { conn, id } => submissions::cancel(&conn, id).await,
        UserCommand::Results { conn, id } => submissions::results(&conn, id).await,
        UserCommand::Repro { conn, job } => submissions::repro(&conn, job).await,
        UserCommand::Repo(cmd) => repos::run(cmd).await,
        UserCommand::Watch(cmd) => watches::run(cmd).await,
        UserCommand::List(cmd) => lists::run(cmd).await,
        UserCommand::Series { conn } => lists::series(&conn).await,
        UserCommand::SeriesShow { conn, id } => lists::series_show(&conn, id).await,
        UserCommand::Bisections { conn, limit } => bisections::list(&conn, limit).await,
        UserCommand::Bisect(cmd) => bisections::run(cmd).await,
        UserCommand::Reports { conn } => reports::list(&conn).await,
        UserCommand::Report(cmd) => reports::run(cmd).await,
    }
}

/// `600`, `30s`, `10m`, `2h` to seconds, as [`kbot_core::units::seconds`]
/// reads them, within the API's `u32`.
pub fn parse_interval(text: &str) -> Result<u32, String> {
    let secs = kbot_core::units::seconds(text)
        .ok_or_else(|| format!("{text:?} is not an interval like 600, 30s, 10m or 1h"))?;
    u32::try_from(secs).map_err(|_| format!("{text:?} is too long"))
}

fn client(conn: &Connection) -> Result<UserClient> {
    Ok(UserClient::new(&conn.server, conn.token.clone())?)
}

async fn read_job_file(path: &str) -> Result<String> {
    tokio::fs::read_to_string(path)
        .await
        .map_err(|source| Error::ReadFile {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::parse_interval;

    #[test]
    fn intervals_take_units() {
        assert_eq!(parse_interval("600"), Ok(600));
        assert_eq!(parse_interval("30s"), Ok(30));
        assert_eq!(parse_interval("10m"), Ok(600));
        assert_eq!(parse_interval("2h"), Ok(7200));
        assert!(parse_interval("10 parsecs").is_err());
        assert!(parse_interval("m").is_err());
        assert!(parse_interval("99999999d").is_err());
    }
}
