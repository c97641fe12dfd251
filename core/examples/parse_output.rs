//! Parses one benchmark output from stdin and prints its metrics.
//!
//! `hackbench -g 2 --pipe | cargo run -p kbot-core --example parse_output -- hackbench hackbench`
//! (parser: lmbench, will-it-scale, unix-bench, hackbench, perf-sched-messaging,
//! perf-sched-pipe, stress-ng, pipebench, gnu-time, kbot-bench-json; then the
//! metric prefix; will-it-scale harness output also needs the task count).

use std::io::Read;
use std::process::ExitCode;

use kbot_core::parsers::{parse, ParseContext, Tool};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (tool, prefix, tasks) = match args.as_slice() {
        [t, p] => (t, p, None),
        [t, p, n] => (t, p, n.parse().ok()),
        _ => {
            eprintln!("usage: parse_output PARSER PREFIX [TASKS] < output");
            return ExitCode::from(2);
        }
    };
    let tool: Tool = match serde_json::from_value(serde_json::Value::String(tool.clone())) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("parse_output: unknown parser {tool:?}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("parse_output: reading stdin: {e}");
        return ExitCode::FAILURE;
    }
    let ctx = ParseContext {
        prefix: prefix.clone(),
        tasks,
        threads: false,
        hackbench_iterations: false,
    };
    match parse(tool, &text, &ctx) {
        Ok(metrics) => {
            for (k, v) in metrics {
                println!("{k}: {v}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("parse_output: {e}");
            ExitCode::FAILURE
        }
    }
}
