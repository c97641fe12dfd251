//! Registered git repositories: `repo add` and `repo list`.

use clap::Subcommand;

use kbot_api::repos::{RepoCreate, RepoView};

use super::{client, Connection};
use crate::error::Result;
use crate::output;

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

pub(super) async fn run(cmd: RepoCommand) -> Result<()> {
    match cmd {
        RepoCommand::Add {
            conn,
            name,
            url,
            default_branch,
        } => {
            let body = RepoCreate {
                name,
                url,
                default_branch,
            };
            add(&conn, &body).await
        }
        RepoCommand::List { conn } => list(&conn).await,
    }
}

async fn add(conn: &Connection, body: &RepoCreate) -> Result<()> {
    let repo = client(conn)?.add_repo(body).await?;
    if conn.json {
        return output::json(&repo);
    }
    output::line(&repo_line(&repo))
}

async fn list(conn: &Connection) -> Result<()> {
    let repos = client(conn)?.repos().await?;
    if conn.json {
        return output::json(&repos);
    }
    for repo in &repos {
        output::line(&repo_line(repo))?;
    }
    Ok(())
}

fn repo_line(repo: &RepoView) -> String {
    format!("{}\t{}\t{}", repo.name, repo.default_branch, repo.url)
}
