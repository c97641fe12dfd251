//! `kbot-load`: drives simulated agents against a running kbot-server, and
//! (subcommands) seeds a store with a long history and measures dashboard
//! page latency. See the `kbot_load` library and BENCHMARKS.md ("Server",
//! "Dashboard").

use clap::Parser;
use kbot_load::cli::{self, Cli};
use kbot_server::error::error_chain;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match cli::run(&Cli::parse()).await {
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
