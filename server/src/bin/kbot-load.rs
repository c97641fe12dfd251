//! `kbot-load`: drives simulated agents against a running kbot-server.
//! See `kbot_server::loadgen` and the "Server" section of BENCHMARKS.md.

use clap::Parser;
use kbot_server::error::error_chain;
use kbot_server::loadgen::{self, LoadArgs};

#[derive(Debug, Parser)]
#[command(
    name = "kbot-load",
    about = "Load test a running kbot-server with simulated agents"
)]
struct Cli {
    #[command(flatten)]
    args: LoadArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match loadgen::run(&cli.args).await {
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
