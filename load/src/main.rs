//! `kbot-load`: drives simulated agents against a running kbot-server, and
//! (subcommands) seeds a store with a long history and measures dashboard
//! page latency. See the `kbot_load` library and BENCHMARKS.md ("Server",
//! "Dashboard").

use clap::{Parser, Subcommand};
use kbot_load::{self as loadgen, history, pages, soak, LoadArgs};
use kbot_server::error::error_chain;

#[derive(Debug, Parser)]
#[command(
    name = "kbot-load",
    about = "Load test a running kbot-server with simulated agents",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: the agent-protocol load run.
    #[command(flatten)]
    args: LoadArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Fill a store with a watched branch's history (`--samples` in all).
    Seed(history::SeedArgs),
    /// Measure p50/p99 latency of dashboard pages of a running server.
    Pages(pages::PagesArgs),
    /// Long reliability run: agents heartbeat through simulated work across
    /// replicas, then stored results are counted against acknowledged ones.
    Soak(soak::SoakArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        None => loadgen::run(&cli.args).await.map(|r| r.to_string()),
        Some(Command::Seed(args)) => history::run(args).await.map(|s| format!("{s:?}")),
        Some(Command::Soak(args)) => soak::run(args).await.and_then(|report| {
            if report.holds() {
                Ok(report.to_string())
            } else {
                Err(anyhow::anyhow!("{report}").into())
            }
        }),
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
    };
    match outcome {
        Ok(report) => {
            println!("{report}");
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("kbot-load: {}", error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
