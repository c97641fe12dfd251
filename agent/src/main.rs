use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = kbot_agent::config::Cli::parse();
    // Read into `cli` once; no child inherits it (a kernel build gets a
    // cleared environment anyway), before any thread reads the environment.
    std::env::remove_var("KBOT_ENROLLMENT_TOKEN");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kbot-agent: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: kbot_agent::config::Cli) -> std::process::ExitCode {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KBOT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr);
    if cli.agent.log_json {
        logs.json().init();
    } else {
        logs.init();
    }
    match kbot_agent::run_cli(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kbot-agent: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
