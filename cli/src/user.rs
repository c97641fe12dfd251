//! The user subcommands (`submit`, `submissions`, `show`, `events`,
//! `follow`, `cancel`, `results`, `repo`, `watch`, `list`, `series`, `bisections`, `bisect`,
//! `reports`, `report`) and what each one asks the server through
//! [`UserClient`].

use std::time::Duration;

use clap::{Args, Subcommand};

use kbot_api::client::UserClient;
use kbot_api::lists::ListCreate;
use kbot_api::reports::StoredReport;
use kbot_api::repos::{RepoCreate, RepoView};
use kbot_api::submissions::{EventView, JobView, SubmissionView, SubmitRequest};
use kbot_api::watches::WatchCreate;

use crate::error::{Error, Result};
use crate::output;

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

#[derive(Debug, Clone, Subcommand)]
pub enum ReportCommand {
    /// A report: its message as written (with `--json`, also its state,
    /// recipients and delivery attempts).
    Show {
        #[command(flatten)]
        conn: Connection,
        /// The report's id or Message-ID.
        id: String,
    },
    /// Send an `uncertain` report (its sender stopped while handing it to
    /// the relay: it may have arrived) or a `failed` one (again).
    Resend {
        #[command(flatten)]
        conn: Connection,
        /// The report's id or Message-ID.
        id: String,
    },
}

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

// Parsed once per run: the size of `list add`'s flags costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Subcommand)]
pub enum ListCommandArgs {
    /// Read a list: test its series, answer in its threads.
    Add {
        #[command(flatten)]
        conn: Connection,
        /// Short name, used in refs (`refs/kbot/series/NAME/ID`).
        name: String,
        /// A public-inbox (v2 directory or v1 repository), mbox or Maildir
        /// path on the server, or a public-inbox URL.
        #[arg(long)]
        archive: String,
        /// The registered repo the patches apply to, and the branch whose
        /// head at posting time is the base when a series names none.
        #[arg(long, value_name = "REPO[:BRANCH]")]
        tree: String,
        /// LKP-style job file (YAML) run on every series.
        #[arg(long)]
        job: String,
        /// The list's posting address (Cc of every answer).
        #[arg(long)]
        address: Option<String>,
        /// The web archive `patch link:` lines point into.
        #[arg(long)]
        web_url: Option<String>,
        /// Machine class to run on (default: the first agent's).
        #[arg(long)]
        tbox_group: Option<String>,
        /// How often to read: `300`, `30s`, `5m`.
        #[arg(long, value_parser = parse_interval)]
        interval: Option<u32>,
        /// How long a series with missing parts waits: `1h`.
        #[arg(long, value_parser = parse_interval)]
        wait: Option<u32>,
        /// Cap on runs per side of each pair.
        #[arg(long)]
        max_runs: Option<u32>,
        /// Read the archive's history too, not only new mail.
        #[arg(long)]
        from_start: bool,
        /// Take mail without any DKIM signature as from an unverified
        /// sender (an archive that strips signatures); it still needs a
        /// role to command kbot.
        #[arg(long)]
        accept_unsigned: bool,
        /// An address that may command kbot about every report of the
        /// list's patches (repeat for more).
        #[arg(long = "maintainer")]
        maintainers: Vec<String>,
    },
    /// List the lists (JSON).
    #[command(name = "ls")]
    Ls {
        #[command(flatten)]
        conn: Connection,
    },
    /// A list, its series and events (JSON).
    Show {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// The `#kbot` commands read on a list (JSON).
    Commands {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Read the archive now.
    Read {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Stop reading a list.
    Rm {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum BisectCommand {
    /// A bisection and its steps (JSON).
    Show {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
    /// Cancel a bisection and its queued runs.
    Cancel {
        #[command(flatten)]
        conn: Connection,
        id: i64,
    },
}

/// `600`, `30s`, `10m`, `2h` to seconds.
pub fn parse_interval(text: &str) -> Result<u32, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u32 = number
        .parse()
        .map_err(|_| format!("{text:?} is not an interval like 600, 30s, 10m or 1h"))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too long"))
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
    /// Do not bisect a regression between base and head.
    #[arg(long)]
    pub no_bisect: bool,
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
pub async fn run(cmd: UserCommand) -> Result<()> {
    match cmd {
        UserCommand::Submit(args) => submit(args).await,
        UserCommand::Submissions { conn, limit } => {
            let list = client(&conn)?.submissions(limit).await?;
            if conn.json {
                return output::json(&list);
            }
            for s in &list {
                output::line(&summary_line(s))?;
            }
            Ok(())
        }
        UserCommand::Show { conn, id } => {
            let detail = client(&conn)?.submission(id).await?;
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
        UserCommand::Events { conn, id, after } => {
            let events = client(&conn)?.events(id, after).await?;
            if conn.json {
                return output::json(&events);
            }
            for e in &events {
                output::line(&event_line(e))?;
            }
            Ok(())
        }
        UserCommand::Follow { conn, id, interval } => {
            let api = client(&conn)?;
            follow(&api, id, Duration::from_secs(interval.max(1)), conn.json).await
        }
        UserCommand::Cancel { conn, id } => {
            let s = client(&conn)?.cancel(id).await?;
            print_submission(&conn, &s)
        }
        UserCommand::Results { conn, id } => output::json(&client(&conn)?.results(id).await?),
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
            let repo = client(&conn)?.add_repo(&body).await?;
            if conn.json {
                return output::json(&repo);
            }
            output::line(&repo_line(&repo))
        }
        UserCommand::Repo(RepoCommand::List { conn }) => {
            let repos = client(&conn)?.repos().await?;
            if conn.json {
                return output::json(&repos);
            }
            for repo in &repos {
                output::line(&repo_line(repo))?;
            }
            Ok(())
        }
        UserCommand::Watch(cmd) => watch(cmd).await,
        UserCommand::List(cmd) => list_cmd(cmd).await,
        UserCommand::Series { conn } => {
            let series = client(&conn)?.series().await?;
            if conn.json {
                return output::json(&series);
            }
            for s in &series {
                output::line(&format!(
                    "{}\t{}\tv{} {} ({})\t{}\t{}",
                    s.id, s.list, s.version, s.title, s.total, s.author, s.state
                ))?;
            }
            Ok(())
        }
        UserCommand::SeriesShow { conn, id } => output::json(&client(&conn)?.one_series(id).await?),
        UserCommand::Bisections { conn, limit } => {
            output::json(&client(&conn)?.bisections(limit).await?)
        }
        UserCommand::Bisect(BisectCommand::Show { conn, id }) => {
            output::json(&client(&conn)?.bisection(id).await?)
        }
        UserCommand::Bisect(BisectCommand::Cancel { conn, id }) => {
            output::json(&client(&conn)?.cancel_bisection(id).await?)
        }
        UserCommand::Reports { conn } => {
            let reports = client(&conn)?.reports().await?;
            if conn.json {
                return output::json(&reports);
            }
            for r in &reports {
                output::line(&report_line(r))?;
            }
            Ok(())
        }
        UserCommand::Report(ReportCommand::Show { conn, id }) => {
            let detail = client(&conn)?.report(&id).await?;
            if conn.json {
                return output::json(&detail);
            }
            // The message ends with its own line end, as a mail does.
            output::line(detail.report.message.trim_end_matches('\n'))
        }
        UserCommand::Report(ReportCommand::Resend { conn, id }) => {
            let detail = client(&conn)?.resend_report(&id).await?;
            // Through a JSON value, whose keys print sorted, as they did
            // before the answer had a type.
            output::json(&serde_json::to_value(&detail)?)
        }
    }
}

async fn watch(cmd: WatchCommand) -> Result<()> {
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

async fn list_cmd(cmd: ListCommandArgs) -> Result<()> {
    match cmd {
        ListCommandArgs::Add {
            conn,
            name,
            archive,
            tree,
            job,
            address,
            web_url,
            tbox_group,
            interval,
            wait,
            max_runs,
            from_start,
            accept_unsigned,
            maintainers,
        } => {
            let (repo, branch) = match tree.split_once(':') {
                Some((r, b)) => (r.to_owned(), Some(b.to_owned())),
                None => (tree, None),
            };
            let body = ListCreate {
                name,
                archive,
                repo,
                branch,
                job_file: read_job_file(&job).await?,
                address,
                web_url,
                tbox_group,
                interval_secs: interval,
                wait_secs: wait,
                max_runs,
                from_start,
                accept_unsigned,
                maintainers,
            };
            output::json(&client(&conn)?.add_list(&body).await?)
        }
        ListCommandArgs::Ls { conn } => output::json(&client(&conn)?.lists().await?),
        ListCommandArgs::Show { conn, id } => output::json(&client(&conn)?.list(id).await?),
        ListCommandArgs::Commands { conn, id } => {
            output::json(&client(&conn)?.list_commands(id).await?)
        }
        ListCommandArgs::Read { conn, id } => output::json(&client(&conn)?.read_list(id).await?),
        ListCommandArgs::Rm { conn, id } => output::json(&client(&conn)?.remove_list(id).await?),
    }
}

async fn read_job_file(path: &str) -> Result<String> {
    tokio::fs::read_to_string(path)
        .await
        .map_err(|source| Error::ReadFile {
            path: path.to_owned(),
            source,
        })
}

fn client(conn: &Connection) -> Result<UserClient> {
    Ok(UserClient::new(&conn.server, conn.token.clone())?)
}

async fn submit(args: SubmitArgs) -> Result<()> {
    let job_file = read_job_file(&args.job).await?;
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

/// A submission as its summary line, or as JSON with `--json`.
fn print_submission(conn: &Connection, s: &SubmissionView) -> Result<()> {
    if conn.json {
        return output::json(s);
    }
    output::line(&summary_line(s))
}

fn repo_line(repo: &RepoView) -> String {
    format!("{}\t{}\t{}", repo.name, repo.default_branch, repo.url)
}

/// One line per atomic job, monitor or key of the job file that kbot does
/// not run, with the reason.
fn skipped_lines(s: &SubmissionView) -> Vec<String> {
    s.skipped
        .iter()
        .map(|k| format!("skipped {} {}: {}", k.kind.as_str(), k.name, k.reason))
        .collect()
}

async fn follow(api: &UserClient, id: i64, interval: Duration, json: bool) -> Result<()> {
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
        if is_settled(&detail.submission.state) {
            if json {
                return output::json_line(&detail.submission);
            }
            return output::line(&summary_line(&detail.submission));
        }
        tokio::time::sleep(interval).await;
    }
}

fn is_settled(state: &str) -> bool {
    matches!(state, "done" | "failed" | "cancelled")
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

fn report_line(r: &StoredReport) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}",
        r.id,
        r.state,
        kbot_server::time::format_time(r.created_at),
        r.message_id,
        r.subject
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
