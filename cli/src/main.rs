//! `kbot-server`: parses the command line and runs it (see [`kbot_cli::cli`]).

use clap::Parser;

use kbot_cli::error::Error;
use kbot_cli::{cli, renamed};

fn main() -> std::process::ExitCode {
    // Before the runtime's threads: setting variables is only sound alone.
    let renamed = renamed::adopt_in_process();
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kbot-server: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli, &renamed)) {
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
