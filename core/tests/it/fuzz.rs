//! Hostile input for kbot-core: the job-file parser (with includes), every
//! output parser of `kbot_core::parsers`, the merge of executions, and the
//! e-mail composer with hostile commit metadata. No panic, no hang, bounded
//! memory; what each accepts is well-formed. `cargo test` runs a few cases
//! per target; `scripts/fuzz SECS` runs each for SECS seconds.

use std::collections::BTreeMap;

use kbot_core::job::{parse_job_file, plan_job_file, MAX_ATOMIC_JOBS};
use kbot_core::lkp::IncludeSource;
use kbot_core::machine::Hardware;
use kbot_core::parsers::{self, merge_executions, perf_stat, ParseContext, Parsed, Tool};
use kbot_core::report::{self, mbox, ChangeKind, CommitRef, ReportConfig, ReportData};
use kbot_fuzz::{hostile_text, run};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const JOB_FILES: [&str; 9] = [
    include_str!("../../../jobs/bw_pipe.yaml"),
    include_str!("../../../jobs/hackbench-pipe.yaml"),
    include_str!("../../../jobs/lmbench3-pipe.yaml"),
    include_str!("../../../jobs/perf-bench-sched-messaging.yaml"),
    include_str!("../../../jobs/perf-bench-sched-pipe.yaml"),
    include_str!("../../../jobs/pipebench.yaml"),
    include_str!("../../../jobs/pipen.yaml"),
    include_str!("../../../jobs/stress-ng-pipe.yaml"),
    include_str!("../../../jobs/unixbench-pipe.yaml"),
];

/// Real outputs of each tool (fixtures/README.md), to mutate.
const OUTPUTS: [(Tool, &str); 12] = [
    (
        Tool::Lmbench,
        include_str!("../fixtures/lmbench-bw_pipe.txt"),
    ),
    (
        Tool::Lmbench,
        include_str!("../fixtures/lmbench-results-pipe.txt"),
    ),
    (
        Tool::WillItScale,
        include_str!("../fixtures/will-it-scale-pipe1-processes.txt"),
    ),
    (
        Tool::WillItScale,
        include_str!("../fixtures/will-it-scale-runtest.csv"),
    ),
    (
        Tool::UnixBench,
        include_str!("../fixtures/unixbench-pipe.txt"),
    ),
    (
        Tool::Hackbench,
        include_str!("../fixtures/hackbench-pipe-process-3runs.txt"),
    ),
    (
        Tool::PerfSchedMessaging,
        include_str!("../fixtures/perf-sched-messaging-pipe.txt"),
    ),
    (
        Tool::PerfSchedPipe,
        include_str!("../fixtures/perf-sched-pipe.txt"),
    ),
    (
        Tool::StressNg,
        include_str!("../fixtures/stress-ng-pipe-metrics.txt"),
    ),
    (
        Tool::Pipebench,
        include_str!("../fixtures/pipebench-progress.txt"),
    ),
    (
        Tool::GnuTime,
        include_str!("../fixtures/time-v-hackbench.txt"),
    ),
    (
        Tool::KbotBenchJson,
        r#"{"tool":"pipen","metrics":{"pipen.bandwidth.MB/sec":1234.5,"pipen.time.elapsed_time":2.0}}"#,
    ),
];

/// One edit of a line-based text.
#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, String),
    Delete(usize),
    Replace(usize, String),
    /// Replaces the `n`th number-looking word of a line.
    Number(usize, usize, String),
    Truncate(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let number = prop_oneof![
        Just("1e309".to_string()),
        Just("-0".to_string()),
        Just("0".to_string()),
        Just("nan".to_string()),
        Just("18446744073709551616".to_string()),
        Just("4.9e-324".to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
    ];
    let edit = prop_oneof![
        (any::<usize>(), hostile_text(80)).prop_map(|(i, s)| Edit::Insert(i, s)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), hostile_text(80)).prop_map(|(i, s)| Edit::Replace(i, s)),
        (any::<usize>(), 0..8usize, number).prop_map(|(i, n, s)| Edit::Number(i, n, s)),
        any::<usize>().prop_map(Edit::Truncate),
    ];
    prop::collection::vec(edit, 0..6)
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
        match e {
            Edit::Insert(i, s) => {
                let i = at(*i, lines.len() + 1);
                lines.insert(i, s.clone());
            }
            Edit::Delete(i) if !lines.is_empty() => {
                let i = at(*i, lines.len());
                lines.remove(i);
            }
            Edit::Replace(i, s) if !lines.is_empty() => {
                let i = at(*i, lines.len());
                lines[i] = s.clone();
            }
            Edit::Number(i, n, s) if !lines.is_empty() => {
                let i = at(*i, lines.len());
                lines[i] = replace_number(&lines[i], *n, s);
            }
            Edit::Truncate(i) => {
                let i = at(*i, lines.len() + 1);
                lines.truncate(i);
            }
            _ => {}
        }
    }
    lines.join("\n")
}

fn replace_number(line: &str, n: usize, with: &str) -> String {
    let mut seen = 0;
    line.split(' ')
        .map(|w| {
            if w.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                seen += 1;
                if seen == n + 1 {
                    return with.to_string();
                }
            }
            w.to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Includes that answer with hostile text, or with the file itself (a cycle).
struct HostileIncludes(String);

impl IncludeSource for HostileIncludes {
    fn read(&self, file: &str, _from: Option<&str>) -> kbot_core::Result<(String, String)> {
        Ok((file.to_string(), self.0.clone()))
    }
}

fn check_jobs(jobs: &[kbot_core::job::AtomicJob]) -> Result<(), TestCaseError> {
    prop_assert!(jobs.len() <= MAX_ATOMIC_JOBS, "{} jobs", jobs.len());
    Ok(())
}

#[test]
fn job_file_parser_survives_any_text() {
    run("job_file_text", hostile_text(4096), |text| {
        if let Ok(jobs) = parse_job_file(&text) {
            check_jobs(&jobs)?;
        }
        Ok(())
    });
}

#[test]
fn job_file_parser_survives_edited_job_files() {
    let input = (0..JOB_FILES.len(), edits(), hostile_text(200));
    run("job_file_edited", input, |(i, edits, include)| {
        let text = apply(JOB_FILES[i], &edits);
        if let Ok(jobs) = parse_job_file(&text) {
            check_jobs(&jobs)?;
        }
        // The same text behind an include line, and includes of hostile text.
        let with_include = format!("<< : include.yaml\n{text}");
        if let Ok(plan) = plan_job_file(&with_include, &HostileIncludes(include)) {
            check_jobs(&plan.jobs)?;
        }
        if let Ok(plan) = plan_job_file(&with_include, &HostileIncludes(with_include.clone())) {
            check_jobs(&plan.jobs)?;
        }
        Ok(())
    });
}

fn context() -> impl Strategy<Value = ParseContext> {
    (
        prop_oneof![Just(String::new()), "[a-z0-9.-]{1,12}", hostile_text(20)],
        prop::option::of(prop_oneof![Just(0u64), 1..300u64, Just(u64::MAX)]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(prefix, tasks, threads, hackbench_iterations)| ParseContext {
                prefix,
                tasks,
                threads,
                hackbench_iterations,
            },
        )
}

fn check_metrics(m: &parsers::Metrics) -> Result<(), TestCaseError> {
    for (name, value) in m {
        prop_assert!(
            kbot_core::metrics::is_storable_name(name),
            "a metric name the server cannot store: {name:?}"
        );
        prop_assert!(value.is_finite(), "{name} = {value}");
    }
    Ok(())
}

#[test]
fn output_parsers_survive_edited_outputs() {
    let input = (0..OUTPUTS.len(), edits(), context());
    run("parsers_edited", input, |(i, edits, ctx)| {
        let (tool, text) = OUTPUTS[i];
        if let Ok(m) = parsers::parse(tool, &apply(text, &edits), &ctx) {
            check_metrics(&m)?;
        }
        Ok(())
    });
}

#[test]
fn output_parsers_survive_any_text() {
    let tools = OUTPUTS.map(|(t, _)| t).to_vec();
    let input = (prop::sample::select(tools), hostile_text(2048), context());
    run("parsers_text", input, |(tool, text, ctx)| {
        if let Ok(m) = parsers::parse(tool, &text, &ctx) {
            check_metrics(&m)?;
        }
        let counts = perf_stat::counts(&text);
        prop_assert!(counts.values().all(|v| v.is_finite()));
        Ok(())
    });
}

fn metric_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        -1e12..1e12f64,
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ]
}

#[test]
fn perf_stat_metrics_are_finite_for_any_totals() {
    let names = perf_stat::LKP_EVENTS.to_vec();
    let totals = prop::collection::btree_map(prop::sample::select(names), metric_value(), 0..19);
    run(
        "perf_stat_totals",
        (totals, metric_value()),
        |(totals, secs)| {
            let totals: BTreeMap<String, f64> = totals
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            check_metrics(&perf_stat::lkp_metrics(&totals, secs))
        },
    );
}

#[test]
fn merging_executions_survives_any_metrics() {
    let names = prop::sample::select(vec![
        "wis.workload",
        "wis.per_process_ops",
        "wis.per_thread_ops",
        "wis.time.elapsed_time",
        "wis.time.maximum_resident_set_size",
        "wis.throughput",
        "other.metric",
    ]);
    let execution = (
        0..4usize,
        context(),
        prop::collection::btree_map(names, metric_value(), 0..6),
    );
    run(
        "merge_executions",
        prop::collection::vec(execution, 0..8),
        |execs| {
            let contexts: Vec<ParseContext> = execs
                .iter()
                .map(|(_, c, _)| ParseContext {
                    prefix: if c.prefix.len() % 2 == 0 {
                        "wis".into()
                    } else {
                        c.prefix.clone()
                    },
                    ..c.clone()
                })
                .collect();
            let parsed: Vec<Parsed<'_>> = execs
                .iter()
                .zip(&contexts)
                .map(|((inv, _, m), context)| Parsed {
                    invocation: *inv,
                    context,
                    metrics: m.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                })
                .collect();
            if let Ok(m) = merge_executions(&parsed) {
                check_metrics(&m)?;
            }
            Ok(())
        },
    );
}

fn report_config() -> ReportConfig {
    ReportConfig {
        robot_name: "kernel test robot".into(),
        robot_address: "kbot@kbot.example.org".into(),
        message_id_domain: "kbot@kbot.example.org".into(),
        archive_url: "https://kbot.example.org/reports".into(),
        materials_url: "https://kbot.example.org/archive/".into(),
        disclaimer: report::DEFAULT_DISCLAIMER.into(),
        signature: report::DEFAULT_SIGNATURE.into(),
    }
}

/// A report whose commit metadata and names come from `hostile`.
fn report_data(subject: String, tree: String, branch: String) -> ReportData {
    ReportData {
        tree,
        branch,
        repo_url: "https://example.org/linux.git".into(),
        commit: CommitRef {
            sha: "f7f4665dc520fd8bbc1db20e59945773e03744a0".into(),
            subject,
        },
        base: CommitRef {
            sha: "c610d2d0787961cd5b1e4a0d3c9f2e1a7b6c5d4e".into(),
            subject: "base".into(),
        },
        metric: "lmbench3.PIPE.bandwidth.MB/sec".into(),
        change_percent: -18.5,
        kind: ChangeKind::Regression,
        still_on: vec![],
        testcase: "lmbench3".into(),
        kconfig: "x86_64-rhel-9.4".into(),
        compiler: "gcc-14".into(),
        machine: Hardware {
            arch: "x86_64".into(),
            cpu_model: "QEMU".into(),
            sockets: 1,
            cores: 1,
            threads: 1,
            numa_nodes: 1,
            memory_bytes: 1 << 30,
            page_size: 4096,
            microcode: None,
            kernel: "6.1".into(),
        },
        measured_by: Some(
            "exact clock (icount), 1 vCPU; cannot see contention between CPUs".into(),
        ),
        parameters: vec![("mode".into(), "development".into())],
        other_impacts: vec![],
        compare_table: "table\n".into(),
        recorded_at_ms: 1_793_801_070_000,
        identity_key: "linux/a..b/x".into(),
        preface: None,
        posted: None,
    }
}

/// The headers every report has, and those its addressing adds.
const HEADERS: [&str; 9] = [
    "From",
    "To",
    "Cc",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
];

/// The header block is exactly kbot's headers, each once, folded lines only
/// by kbot; no line is longer than SMTP allows; the wire form has no bare
/// CR or LF (no SMTP smuggling).
fn check_message(message: &str) -> Result<(), TestCaseError> {
    let (head, _) = message
        .split_once("\n\n")
        .ok_or_else(|| TestCaseError::fail("no header/body separator"))?;
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for line in head.split('\n') {
        prop_assert!(
            !line.contains(|c: char| c.is_control() && c != '\t'),
            "control in {line:?}"
        );
        if line.starts_with('\t') || line.starts_with(' ') {
            continue;
        }
        let name = line.split_once(": ").map(|(n, _)| n).unwrap_or(line);
        prop_assert!(HEADERS.contains(&name), "injected header {line:?}");
        *seen.entry(name).or_default() += 1;
    }
    prop_assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    prop_assert!(
        message.lines().all(|l| l.len() <= 998),
        "a line over 998 octets"
    );
    let wire = mbox::to_wire(message);
    for (i, b) in wire.iter().enumerate() {
        match b {
            b'\r' => prop_assert_eq!(wire.get(i + 1), Some(&b'\n'), "bare CR at {}", i),
            b'\n' => prop_assert!(i > 0 && wire[i - 1] == b'\r', "bare LF at {}", i),
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn composer_keeps_hostile_commit_metadata_out_of_the_headers() {
    let address = prop_oneof![
        4 => "[a-z0-9._+-]{1,20}@[a-z0-9-]{1,20}\\.[a-z]{2,6}",
        1 => hostile_text(40),
    ];
    let input = (
        (hostile_text(1600), hostile_text(30), hostile_text(30)),
        (
            hostile_text(300),
            address.clone(),
            hostile_text(80),
            address,
        ),
    );
    run(
        "email_composer",
        input,
        |((subject, tree, branch), (name, addr, cc_name, cc))| {
            let data = report_data(subject, tree, branch);
            let rendered = report::render(&data, &report_config())
                .map_err(|e| TestCaseError::fail(format!("render: {e}")))?;
            let addressing = mbox::Addressing {
                from: mbox::Mailbox::new("kernel test robot", "kbot@kbot.example.org"),
                to: vec![mbox::Mailbox::new(name, addr.clone())],
                cc: vec![mbox::Mailbox::new(cc_name, cc.clone())],
                date_ms: 1_793_801_070_000,
                in_reply_to: None,
                references: Vec::new(),
            };
            // An address lettre (the server's SMTP client) can send to.
            let plain = |a: &str| a.len() <= 254 && a.parse::<lettre::Address>().is_ok();
            match mbox::message(&rendered, &addressing) {
                Ok(message) => check_message(&message)?,
                // Only an address SMTP cannot carry may stop a report: hostile
                // names and subjects are made safe, never a reason to drop it.
                Err(e) => prop_assert!(!(plain(&addr) && plain(&cc)), "refused: {e}"),
            }
            Ok(())
        },
    );
}
