//! `kbot-server`: parses the command line and runs it (see [`cli`]).

mod cli;
mod error;
mod output;
mod user;

use clap::Parser;

use crate::error::Error;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match cli::run(cli::Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`kbot-server submissions | head -2`): what
        // it wanted it has, so stop without a word, as Unix tools do.
        Err(Error::ClosedPipe) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kbot-server: {}", kbot_server::error::error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
