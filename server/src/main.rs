use clap::Parser;
use kbot_server::cli::{self, Cli};
use kbot_server::error::error_chain;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match cli::run(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kbot-server: {}", error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
