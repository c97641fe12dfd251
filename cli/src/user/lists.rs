//! Mailing lists and their series: `list add|ls|show|commands|read|rm`, `series`, `series-show`.

use clap::Subcommand;

use kbot_api::lists::{ListCreate, PatchworkSettings, SeriesView};

use super::{client, parse_interval, read_job_file, Connection};
use crate::error::Result;
use crate::output;

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
        /// A subject tag and the tree it names, `TAG=REPO[:BRANCH]`
        /// (`net-next=net-next:main`): a `[PATCH TAG]` series without a
        /// usable base-commit is based there (repeat for more).
        #[arg(long = "tree-tag", value_name = "TAG=REPO[:BRANCH]", value_parser = parse_tree_tag)]
        tree_tags: Vec<(String, String)>,
        /// A patchwork instance that gets a check on every tested patch
        /// (with --patchwork-project and KBOT_PATCHWORK_TOKEN).
        #[arg(long, requires = "patchwork_project")]
        patchwork_url: Option<String>,
        /// The patchwork project's link name (`netdevbpf`).
        #[arg(long, requires = "patchwork_url")]
        patchwork_project: Option<String>,
        /// The patchwork API token (a user with the check permission).
        #[arg(long, env = "KBOT_PATCHWORK_TOKEN", hide_env_values = true)]
        patchwork_token: Option<String>,
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

pub(super) async fn run(cmd: ListCommandArgs) -> Result<()> {
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
            tree_tags,
            patchwork_url,
            patchwork_project,
            patchwork_token,
        } => {
            let patchwork = match (patchwork_url, patchwork_project) {
                (Some(url), Some(project)) => Some(PatchworkSettings {
                    url,
                    project,
                    token: patchwork_token.unwrap_or_default(),
                }),
                _ => None,
            };
            let (repo, branch) = split_tree(tree);
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
                tree_tags: tree_tags.into_iter().collect(),
                patchwork,
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

/// `--tree REPO[:BRANCH]` as the repo and its branch, if named.
fn split_tree(tree: String) -> (String, Option<String>) {
    match tree.split_once(':') {
        Some((r, b)) => (r.to_owned(), Some(b.to_owned())),
        None => (tree, None),
    }
}

pub(super) async fn series(conn: &Connection) -> Result<()> {
    let series = client(conn)?.series().await?;
    if conn.json {
        return output::json(&series);
    }
    for s in &series {
        output::line(&series_line(s))?;
    }
    Ok(())
}

pub(super) async fn series_show(conn: &Connection, id: i64) -> Result<()> {
    output::json(&client(conn)?.one_series(id).await?)
}

fn series_line(s: &SeriesView) -> String {
    format!(
        "{}\t{}\tv{} {} ({})\t{}\t{}",
        s.id, s.list, s.version, s.title, s.total, s.author, s.state
    )
}

/// `TAG=REPO[:BRANCH]`.
fn parse_tree_tag(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((tag, tree)) if !tag.trim().is_empty() && !tree.trim().is_empty() => {
            Ok((tag.trim().to_owned(), tree.trim().to_owned()))
        }
        _ => Err(format!("{s:?} is not TAG=REPO[:BRANCH]")),
    }
}
