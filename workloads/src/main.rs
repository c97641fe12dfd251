use std::io::Write;

use clap::Parser;

use kbot_bench::cli::Cli;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // clap prints usage errors (exit 2) and --help/--version (exit 0).
        Err(e) => e.exit(),
    };
    match kbot_bench::run(&cli) {
        Ok((report, out)) => {
            // A closed stdout (`kbot-bench ... | head`) is not a failure of the run.
            if cli.json {
                let _ = writeln!(std::io::stdout(), "{}", report.to_json(&out));
            }
        }
        Err(e) => {
            eprintln!("kbot-bench: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
