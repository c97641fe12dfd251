//! The lab machine that only boots: a builder (`KBOT_AGENT_ROLES=build`)
//! on this host, a QEMU VM standing in for a bare-metal lab machine
//! (`scripts/kexec-standin`: its own kernel and disk, kbot-agent with the
//! kexec backend and the test role only, tbox group `vm-kexec`), and a qemu
//! agent that only tests (tbox group `vm-qemu`).
//!
//! 1. The stand-in's own kernel is h0 on the `qemu-x86_64-kexec` kconfig,
//!    built here with `kbot-agent build` in the builder's work directory.
//! 2. For the stand-in's group, bisection off: h0..panic first (the head
//!    kernel panics at boot; `panic=5` reboots the machine into its own
//!    kernel), h0..hang (the head kernel spins silently; the stand-in's
//!    watchdog power-cycles the VM after 30 s), then h0..ring, two runs a
//!    side; and h0..ring for `vm-qemu`, the same kernels in QEMU guests.
//! 3. The builder builds each kernel once on a build order, for both
//!    groups; the stand-in downloads it, kexecs into it and runs the
//!    workload there; the qemu agent boots it.
//!
//! Passes when the panic and hang runs failed to boot and the machine came
//! back (the hang after a power cycle) and ran jobs after them; every run of
//! h0..ring has metrics, was made by the stand-in with the kexec backend on
//! the kernel of its own commit (its events name the kernel it kexec'd
//! into); the console shows the boots; the vm-qemu pair ran on the qemu
//! agent, which built nothing; and every kernel was built once, by the
//! builder on an order.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kbot_api::agent::{BootBackend, JobState};
use kbot_api::builds::{BuildState, BuildView, OrderState, OrderView};
use kbot_api::submissions::{EventView, Side, SubmissionResults, SubmissionStatus, SubmitRequest};

use crate::lab::{self, AgentSetup, Clock, Crew, Guest, KernelRepo, Lab, Process};

const KCONFIG: &str = "qemu-x86_64-kexec";
const KPI: &str = "perf-bench-sched-pipe.ops_per_sec";
const STANDIN: &str = "vm-kexec-1";
const STANDIN_GROUP: &str = "vm-kexec";
const QEMU_GROUP: &str = "vm-qemu";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds kernels and boots a stand-in VM for minutes: scripts/test runs it"]
async fn a_machine_that_only_boots_kexecs_into_the_builders_kernels_and_comes_back() {
    let clock = Clock::start("e2e-kexec");
    let cache = lab::cache_dir();
    let work = lab::work_dir("e2e-kexec-run");
    // The build user's QEMU opens the agents' run files by name: the
    // run's directory lets others through, not read.
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    clock.say(format!("work directory {}", work.display()));
    let linux = KernelRepo::make(&cache.join("e2e-linux-kexec.git"));
    let builder_dir = cache.join("e2e-kexec-builder");
    let ccache = cache.join("e2e-kexec-ccache");
    let home = own_kernel(&linux, &builder_dir, &ccache, &work);
    clock.say(format!(
        "the stand-in's own kernel: h0 on {KCONFIG}, {home}"
    ));

    let lab = Lab::start(&linux, |_, _| {}).await;
    let (tester_dir, tester_ccache) = (work.join("tester"), work.join("tester-ccache"));
    let mut processes = vec![
        lab.qemu_agent(AgentSetup {
            name: "vm-builder-1",
            tbox_group: "builders",
            work_dir: &builder_dir,
            ccache_dir: &ccache,
            log: &work.join("builder.log"),
            guest: Guest::X86_64,
            roles: "build",
            memory_mib: None,
        })
        .await,
        lab.qemu_agent(AgentSetup {
            name: "vm-qemu-1",
            tbox_group: QEMU_GROUP,
            work_dir: &tester_dir,
            ccache_dir: &tester_ccache,
            log: &work.join("tester.log"),
            guest: Guest::X86_64,
            roles: "test",
            memory_mib: None,
        })
        .await,
    ];
    let mut standin = Command::new(lab::checkout().join("scripts/kexec-standin"));
    standin
        .arg(work.join("standin"))
        .arg(&home)
        .env("KBOT_SERVER_URL", &lab.url)
        .env(
            "KBOT_ENROLLMENT_TOKEN",
            lab.server.enrollment_token_for(STANDIN).await,
        )
        .env("KBOT_AGENT_NAME", STANDIN)
        .env("KBOT_TBOX_GROUP", STANDIN_GROUP)
        .env("KBOT_BENCH", Guest::X86_64.bench())
        .env("KBOT_AGENT_BIN", env!("CARGO_BIN_EXE_kbot-agent"))
        .env("KBOT_STANDIN_HANG_SECS", "30");
    processes.push(Process::spawn(
        standin,
        "the stand-in",
        &work.join("standin.log"),
    ));
    let mut run = Run {
        crew: Crew { clock, processes },
        lab,
        linux,
    };

    let panic = run.submit("panic", STANDIN_GROUP, 1, 10).await;
    let hang = run.submit("hang", STANDIN_GROUP, 1, 5).await;
    run.until_built(&["panic", "hang"]).await;
    let ring = run.submit("ring", STANDIN_GROUP, 2, 0).await;
    let qemu = run.submit("ring", QEMU_GROUP, 2, 0).await;
    run.crew.say(format!(
        "submissions: {panic} h0..panic (first), {hang} h0..hang and {ring} h0..ring for \
         {STANDIN_GROUP}, {qemu} h0..ring for {QEMU_GROUP}"
    ));
    run.until_ended(&[panic, hang, ring, qemu], &work).await;

    let mut problems = Vec::new();
    let failures = run
        .did_not_boot(&[("panic", panic), ("hang", hang)], &mut problems)
        .await;
    let standin_log = std::fs::read_to_string(work.join("standin.log")).unwrap_or_default();
    if !standin_log.contains("power-cycling") {
        problems.push("the stand-in's watchdog did not power-cycle the hung kernel".into());
    }
    run.ran_on_kexec(ring, failures, &mut problems).await;
    run.ran_on_qemu(qemu, &tester_dir, &mut problems).await;
    console_shows_the_boots(&work.join("standin/console.log"), &mut problems);
    run.built_once(&mut problems).await;
    assert!(problems.is_empty(), "the lab's runs: {problems:#?}");
    run.crew.say(
        "the stand-in ran the pair on kexec'd kernels and came back from the kernels that \
         panicked and hung",
    );
}

/// The stand-in's own kernel, h0, built here (or taken from the builder's
/// cache); its image's path.
fn own_kernel(linux: &KernelRepo, builder_dir: &Path, ccache: &Path, work: &Path) -> String {
    let log = work.join("home-build.log");
    let out = Command::new(env!("CARGO_BIN_EXE_kbot-agent"))
        .args(["build", "--repo"])
        .arg(&linux.dir)
        .args(["--commit", linux.commit("h0"), "--kconfig", KCONFIG])
        .env("KBOT_WORK_DIR", builder_dir)
        .env("KBOT_CCACHE_DIR", ccache)
        .env("KBOT_BACKEND", "qemu")
        .stderr(std::fs::File::create(&log).expect("build log"))
        .output()
        .expect("kbot-agent build");
    assert!(
        out.status.success(),
        "building the stand-in's kernel: {}",
        lab::tail(&log, 20)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The running lab.
struct Run {
    /// The builder, the qemu agent and the stand-in.
    crew: Crew,
    lab: Lab,
    linux: KernelRepo,
}

impl Run {
    /// h0..`head` for `group`, `runs` a side, bisection off.
    async fn submit(&self, head: &str, group: &str, runs: u32, priority: i32) -> i64 {
        let job = format!(
            "testcase: perf-bench-sched-pipe\nkconfig: {KCONFIG}\ncompiler: gcc-12\nruns: {runs}\n\
             tbox_group: {group}\narch: x86_64\nperf-bench-sched-pipe:\n  loops: 20000\n"
        );
        self.lab
            .client
            .submit(&SubmitRequest {
                repo: "linux".into(),
                job_file: job,
                base: Some(self.linux.commit("h0").into()),
                head: self.linux.commit(head).into(),
                priority,
                max_runs: Some(runs),
                bisect: Some(false),
            })
            .await
            .unwrap_or_else(|e| panic!("submitting h0..{head}: {e}"))
            .id
    }

    /// Waits until the kernels of `heads` are built (or failed to build).
    async fn until_built(&mut self, heads: &[&str]) {
        let shas: Vec<String> = heads
            .iter()
            .map(|h| self.linux.commit(h).to_owned())
            .collect();
        loop {
            self.crew.alive("the panic and hang kernels");
            let builds: Vec<BuildView> = self.lab.json("/api/v1/builds?limit=100").await;
            let done = builds
                .iter()
                .filter(|b| shas.contains(&b.commit) && b.state != BuildState::Building)
                .count();
            if done >= shas.len() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }

    /// Waits until every submission of `ids` has ended; prints their states
    /// and the stand-in's boots as they change.
    async fn until_ended(&mut self, ids: &[i64], work: &Path) {
        let mut last = String::new();
        loop {
            self.crew.alive("the submissions to end");
            let mut states = Vec::new();
            for id in ids {
                let s = self.lab.client.submission(*id).await.expect("a submission");
                states.push(s.submission.state);
            }
            let console =
                std::fs::read_to_string(work.join("standin/console.log")).unwrap_or_default();
            let now = format!(
                "{states:?}, boots: {}",
                console.matches("kbot-standin: up on").count()
            );
            if now != last {
                self.crew.say(&now);
                last = now;
            }
            let running = [SubmissionStatus::Queued, SubmissionStatus::Running];
            if !states.iter().any(|s| running.contains(s)) {
                return;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }

    /// The head runs of `pairs` failed to boot; their last failure events.
    async fn did_not_boot(
        &self,
        pairs: &[(&str, i64)],
        problems: &mut Vec<String>,
    ) -> Vec<EventView> {
        let mut failures = Vec::new();
        for (name, id) in pairs {
            let detail = self.lab.client.submission(*id).await.expect("a submission");
            let heads: Vec<i64> = detail
                .jobs
                .iter()
                .filter(|j| j.side == Side::Head)
                .map(|j| j.id)
                .collect();
            let events = self.lab.client.events(*id, 0).await.expect("events");
            let failed: Vec<EventView> = events
                .into_iter()
                .filter(|e| e.state == JobState::Failed && heads.contains(&e.job_id))
                .collect();
            match failed
                .iter()
                .rev()
                .find(|e| e.detail.contains("not the built"))
            {
                Some(e) => {
                    self.crew.say(format!(
                        "{name} kernel: {}",
                        e.detail.chars().take(240).collect::<String>()
                    ));
                    failures.push(e.clone());
                }
                None => problems.push(format!(
                    "the {name} kernel's run did not fail to boot: {:?}",
                    failed.iter().map(|e| &e.detail).collect::<Vec<_>>()
                )),
            }
        }
        failures
    }

    /// Every run of h0..ring on the stand-in, kexec'd into its own commit's
    /// kernel, after the kernels that did not boot.
    async fn ran_on_kexec(&self, ring: i64, failures: Vec<EventView>, problems: &mut Vec<String>) {
        let results: SubmissionResults = self.lab.client.results(ring).await.expect("results");
        let events = self.lab.client.events(ring, 0).await.expect("events");
        for (side, commit) in [("base", "h0"), ("head", "ring")] {
            let sha = self.linux.commit(commit);
            let runs: Vec<_> = results.runs.iter().filter(|r| r.commit == sha).collect();
            if runs.len() < 2 {
                problems.push(format!(
                    "{side}: {} run(s) with metrics, want 2",
                    runs.len()
                ));
            }
        }
        for r in &results.runs {
            if r.agent.as_deref() != Some(STANDIN) || r.backend != Some(BootBackend::Kexec) {
                problems.push(format!(
                    "run {}: agent {:?}, backend {:?}",
                    r.job_id, r.agent, r.backend
                ));
            }
            if !r.metrics.contains_key(KPI) {
                problems.push(format!("run {} has no {KPI}", r.job_id));
            }
            let booted: Vec<&str> = events
                .iter()
                .filter(|e| e.job_id == r.job_id)
                .map(|e| e.detail.as_str())
                .filter(|d| d.starts_with("kexec into ") || d.contains("already running"))
                .collect();
            match booted.last() {
                None => problems.push(format!("run {}: no kexec event", r.job_id)),
                Some(d)
                    if d.starts_with("kexec into ")
                        && !d.contains(&format!("({} on ", &r.commit[..12])) =>
                {
                    problems.push(format!(
                        "run {} of {} kexec'd into another kernel: {d}",
                        r.job_id,
                        &r.commit[..12]
                    ));
                }
                Some(d) => self.crew.say(format!(
                    "run {} {:?} {} on {STANDIN}: {KPI} {:?}; {d}",
                    r.job_id,
                    r.side,
                    &r.commit[..12],
                    r.metrics.get(KPI)
                )),
            }
        }
        if let Some(c) = results.comparisons.iter().find(|c| c.metric == KPI) {
            self.crew.say(format!(
                "{KPI}: {:?} -> {:?}, {:?}",
                c.base_mean, c.head_mean, c.verdict
            ));
        }
        let last_failure = failures.iter().map(|e| e.at).max();
        if let Some(last) = last_failure.filter(|_| !results.runs.is_empty()) {
            let ran_after = events
                .iter()
                .any(|e| e.at > last && e.state == JobState::Running);
            if !ran_after {
                problems
                    .push("the stand-in ran nothing after the kernels that did not boot".into());
            }
        }
    }

    /// The vm-qemu pair ran on the qemu agent, which built nothing.
    async fn ran_on_qemu(&self, qemu: i64, tester_dir: &Path, problems: &mut Vec<String>) {
        let runs = self.lab.client.results(qemu).await.expect("results").runs;
        let wrong = runs.iter().any(|r| {
            r.agent.as_deref() != Some("vm-qemu-1")
                || r.backend != Some(BootBackend::Qemu)
                || !r.metrics.contains_key(KPI)
        });
        if runs.len() < 4 || wrong {
            problems.push(format!(
                "vm-qemu runs: {:?}",
                runs.iter()
                    .map(|r| (&r.agent, r.backend))
                    .collect::<Vec<_>>()
            ));
        }
        self.crew.say(format!("{QEMU_GROUP}: {} runs", runs.len()));
        if tester_dir.join("objs").is_dir() {
            problems.push("the qemu agent that only tests built a kernel".into());
        }
    }

    /// Four kernels (h0, ring, panic, hang), each claimed once, built on
    /// four orders done by the builder.
    async fn built_once(&self, problems: &mut Vec<String>) {
        let builds: Vec<BuildView> = self.lab.json("/api/v1/builds?limit=100").await;
        let orders: Vec<OrderView> = self.lab.json("/api/v1/builds/orders?limit=100").await;
        let builds: Vec<_> = builds.into_iter().filter(|b| b.arch == "x86_64").collect();
        let orders: Vec<_> = orders.into_iter().filter(|o| o.arch == "x86_64").collect();
        let mut commits: Vec<&str> = builds.iter().map(|b| &b.commit[..12]).collect();
        commits.sort();
        commits.dedup();
        self.crew.say(format!(
            "builds: {} ({}); orders: {:?}",
            builds.len(),
            commits.join(", "),
            orders
                .iter()
                .map(|o| (&o.commit[..12], o.state, &o.agent, o.leases))
                .collect::<Vec<_>>()
        ));
        if builds.len() != 4 || commits.len() != 4 || builds.iter().any(|b| b.claims != 1) {
            problems.push(
                "want four builds (h0, ring, panic, hang) for both groups, each claimed once"
                    .into(),
            );
        }
        let by_builder = |o: &OrderView| {
            o.state == OrderState::Done && o.agent.as_deref() == Some("vm-builder-1")
        };
        if orders.len() != 4 || !orders.iter().all(by_builder) {
            problems.push("want four orders, each done by vm-builder-1".into());
        }
    }
}

/// The stand-in's console: its own boot, a reset after the panic, the
/// kexecs, and both planted failures.
fn console_shows_the_boots(console: &Path, problems: &mut Vec<String>) {
    let text = String::from_utf8_lossy(&std::fs::read(console).unwrap_or_default()).into_owned();
    let boots = text.matches("kbot-standin: up on").count();
    eprintln!("e2e-kexec: stand-in boots: {boots}");
    if boots < 3 {
        problems.push(format!(
            "{boots} boots on the stand-in's console; want its own, a panic reset and kexecs"
        ));
    }
    for planted in [
        "kbot e2e: a planted boot failure",
        "kbot e2e: a planted hang",
    ] {
        if !text.contains(planted) {
            problems.push(format!("'{planted}' is not on the stand-in's console"));
        }
    }
}
