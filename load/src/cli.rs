//! `kbot-load`'s command line: the agent-protocol load run, or one of its
//! subcommands.

use clap::{Parser, Subcommand};

use crate::{self as loadgen, builds, history, pages, soak, LoadArgs};
use kbot_server::error::Result;

#[derive(Debug, Parser)]
#[command(
    name = "kbot-load",
    about = "Load test a running kbot-server with simulated agents",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Without a subcommand: the agent-protocol load run.
    #[command(flatten)]
    pub args: LoadArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fill a store with a watched branch's history (`--samples` in all).
    Seed(history::SeedArgs),
    /// Measure p50/p99 latency of dashboard pages of a running server.
    Pages(pages::PagesArgs),
    /// Long reliability run: agents heartbeat through simulated work across
    /// replicas, then stored results are counted against acknowledged ones.
    Soak(soak::SoakArgs),
    /// Shared kernel builds at lab scale: agents of several tbox groups run
    /// the jobs of many commits; each build key must be built once.
    Builds(builds::BuildsArgs),
}

/// Runs the command line; the report to print.
pub async fn run(cli: &Cli) -> Result<String> {
    match &cli.command {
        None => loadgen::run(&cli.args).await.map(|r| r.to_string()),
        Some(Command::Seed(args)) => history::run(args).await.map(|s| format!("{s:?}")),
        Some(Command::Soak(args)) => {
            let report = soak::run(args).await?;
            verdict(report.holds(), report)
        }
        Some(Command::Builds(args)) => {
            let report = builds::run(args).await?;
            verdict(report.holds(), report)
        }
        Some(Command::Pages(args)) => pages::run(args).await.map(|list| {
            let mut out = format!(
                "{:>8} {:>8} {:>8} {:>9}  path",
                "p50 ms", "p99 ms", "max ms", "bytes"
            );
            for p in list {
                out.push('\n');
                out.push_str(&p.to_string());
            }
            out
        }),
    }
}

/// A run's report to print, or as the error when the run broke its promise.
fn verdict(holds: bool, report: impl std::fmt::Display) -> Result<String> {
    if holds {
        Ok(report.to_string())
    } else {
        Err(anyhow::anyhow!("{report}").into())
    }
}
