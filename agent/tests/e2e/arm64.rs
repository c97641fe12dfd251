//! The arm64 64K-page tbox group: one kbot-agent whose guest is aarch64
//! (`KBOT_GUEST_ARCH=aarch64`: the kernel cross-built with
//! gcc-aarch64-linux-gnu from the same linux-source repository as the
//! x86_64 scenarios, on the `qemu-arm64-64k` kconfig, booted in
//! qemu-system-aarch64 `-M virt` with the static aarch64 kbot-bench and
//! busybox), and a submission of a short pipen job that asks for
//! `arch: aarch64` and `need_page_size: 64K`.
//!
//! Passes when the first run's result arrives at the server: run by the
//! arm64 agent, whose enrolled fingerprint is aarch64 with 65536-byte
//! pages, with the guest's own `uname -m` and page size (checked by the
//! agent after boot) recorded as the run's conditions, pipen's metrics, and
//! the guest's kernel profile (perf-profile rows, with pipe_write in a call
//! chain). A missing part (cross compiler, QEMU, busybox, Rust target)
//! fails the run.

use std::time::Duration;

use kbot_api::agent::JobState;
use kbot_api::submissions::{RunResult, SubmitRequest};

use crate::lab::{self, AgentSetup, Clock, Guest, KernelRepo, Lab};

const AGENT: &str = "vm-arm64-e2e-1";
const GROUP: &str = "vm-arm64-64k";
const JOB: &str = "testcase: pipen\nkconfig: qemu-arm64-64k\ncompiler: gcc-12\narch: aarch64\n\
                   need_page_size: 64K\nruns: 1\npipen:\n  size: 64k\n  runtime: 2s\n  \
                   writer_cpu: 0\n  reader_cpu: 0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "cross-builds and boots an arm64 kernel for minutes: scripts/test runs it"]
async fn an_arm64_64k_guest_runs_pipen_and_says_so() {
    let clock = Clock::start("e2e-arm64");
    let say = |what: String| clock.say(what);
    let cache = lab::cache_dir();
    let work = lab::work_dir("e2e-arm64-run");
    say(format!("work directory {}", work.display()));
    let linux = KernelRepo::make(&cache.join("e2e-linux-arm64.git"));
    let lab = Lab::start(&linux, |_, _| {}).await;
    // Persistent unless KBOT_E2E_COLD is set: reruns reuse the built kernel.
    let keep = if lab::cold() { &work } else { &cache };
    let mut agent = lab
        .qemu_agent(AgentSetup {
            name: AGENT,
            tbox_group: GROUP,
            work_dir: &keep.join("e2e-agent-arm64"),
            ccache_dir: &keep.join("e2e-ccache-arm64"),
            log: &work.join("agent.log"),
            guest: Guest::Aarch64,
            roles: "build,test",
            memory_mib: None,
        })
        .await;
    let submission = lab
        .client
        .submit(&SubmitRequest {
            repo: "linux".into(),
            job_file: JOB.into(),
            base: Some(linux.commit("base").into()),
            head: linux.commit("h0").into(),
            priority: 0,
            max_runs: Some(1),
            bisect: Some(false),
        })
        .await
        .expect("submitting the job")
        .id;
    let detail = lab
        .client
        .submission(submission)
        .await
        .expect("the submission");
    let needs = serde_json::to_value(&detail.atomic_jobs[0]).expect("JSON")["needs"].clone();
    assert_eq!(
        needs,
        serde_json::json!({"arch": "aarch64", "page_size": 65536}),
        "the job's needs"
    );
    say(format!(
        "submission {submission}: pipen 64k on qemu-arm64-64k, base .. h0"
    ));

    let mut last = String::new();
    let run = loop {
        agent.check_alive();
        assert!(!clock.expired(), "timed out waiting for the first result");
        let results = lab.client.results(submission).await.expect("results");
        if let Some(run) = results.runs.into_iter().next() {
            break run;
        }
        let detail = lab
            .client
            .submission(submission)
            .await
            .expect("the submission");
        let events = lab.client.events(submission, 0).await.expect("events");
        let failed: Vec<i64> = detail
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Failed)
            .map(|j| j.id)
            .collect();
        let tail = |e: &kbot_api::submissions::EventView| format!("{}: {}", e.state, e.detail);
        assert!(
            failed.is_empty(),
            "job(s) {failed:?} failed: {}",
            events.iter().map(tail).collect::<Vec<_>>().join("\n")
        );
        let line: String = events
            .last()
            .map(|e| {
                tail(e)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(150)
                    .collect()
            })
            .unwrap_or_else(|| "queued".into());
        if line != last {
            say(line.clone());
            last = line;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    };
    say(format!(
        "first result {}s after the start: job {} ({:?} {}) by {:?} in {:?}: arch {:?}, \
         page size {:?}",
        clock.secs(),
        run.job_id,
        run.side,
        &run.commit[..12],
        run.agent,
        run.tbox_group,
        run.arch,
        run.page_size,
    ));
    for key in [
        "guest_arch",
        "guest_page_size",
        "qemu_clock",
        "guest_cmdline",
        "guest_boot_wall_secs",
        "build_secs",
    ] {
        say(format!("  {key}: {:?}", run.tuning.get(key)));
    }
    for (metric, value) in run.metrics.iter().filter(|(k, _)| k.starts_with("pipen.")) {
        say(format!("  {metric} = {value}"));
    }
    let problems = problems(&run);
    assert!(problems.is_empty(), "the arm64 run: {problems:#?}");
}

/// What the run lacks of an arm64 64K guest's run with a kernel profile.
fn problems(run: &RunResult) -> Vec<String> {
    let mut problems = Vec::new();
    let mut want = |what: &str, got: Option<String>, expected: &str| {
        if got.as_deref() != Some(expected) {
            problems.push(format!("{what} is {got:?}, not {expected:?}"));
        }
    };
    want("agent", run.agent.clone(), AGENT);
    want("tbox group", run.tbox_group.clone(), GROUP);
    want("arch", run.arch.clone(), "aarch64");
    want("page size", run.page_size.map(|p| p.to_string()), "65536");
    want(
        "guest_arch",
        run.tuning.get("guest_arch").cloned(),
        "aarch64",
    );
    want(
        "guest_page_size",
        run.tuning.get("guest_page_size").cloned(),
        "65536",
    );
    let cmdline = run.tuning.get("guest_cmdline").cloned().unwrap_or_default();
    if !cmdline.starts_with("console=ttyAMA0") {
        problems.push(format!("guest_cmdline {cmdline:?} is not the arm64 one"));
    }
    let metric = |prefix: &str| run.metrics.keys().any(|k| k.starts_with(prefix));
    if !metric("pipen.") {
        problems.push("no pipen metric".into());
    }
    // The guest's kernel profile: perf sampled the arm64 kernel by name.
    if !metric("perf-profile.self.cpu-clock.") {
        problems.push("no perf-profile.self.cpu-clock.* metric: no kernel profile".into());
    }
    if !run
        .metrics
        .keys()
        .any(|k| k.starts_with("perf-profile.children.cpu-clock.") && k.ends_with("pipe_write"))
    {
        problems.push("the arm64 profile has no pipe_write in any call chain".into());
    }
    problems
}
