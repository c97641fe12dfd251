//! The robot scenario on real kernels, end to end. The kernel repository
//! (`plant.rs`, on Debian's linux-source) has nine commits on
//! the base in `master`: Documentation notes, a build break in kernel/sys.c
//! and its fix, a pipe slowdown in fs/pipe.c by "Pat Pipe
//! <pat@example.org>", a harmless fs/pipe.c comment. The server runs on
//! SQLite. The lab has three x86_64 qemu kbot-agents: a builder
//! (`KBOT_AGENT_ROLES=build`) and two machines that only test (`=test`),
//! in two tbox groups, `vm-qemu-e2e` with 512 MiB guests and
//! `vm-qemu-e2e-1g` with 1 GiB. They boot the kernels the builder made and
//! download them from the server. Each group has a watch on master.
//! Nothing else is done by hand:
//!
//! 1. the watch starts with master at h0 (a Documentation commit on the
//!    base) and tests it against its parent, until the watch's `last_good`
//!    is h0;
//! 2. master moves to the final head, eight commits later (the server's
//!    mirror sees it at the watch's next fetch);
//! 3. the robot tests h0..head on each group and finds the regression. It
//!    bisects on each group: the builder builds each probe once for both
//!    and skips the commit that does not build. It verifies the first bad
//!    commit against its parent and writes one report with both groups'
//!    findings.
//!
//! Passes when:
//! - both bisections are `reported`, their first bad commit the planted
//!   slowdown;
//! - every kernel was built once (claimed once, on an order of the
//!   builder);
//! - the one report is addressed To: the slowdown's author and names both
//!   tbox groups;
//! - the zeroing function leads the profile (the report's and the
//!   dashboard's), with call chains unwound, not guessed.
//!
//! Then three pairs and a reproduction:
//! - the `ring` branch's smaller pipe ring: bw_pipe, more context switches;
//! - the `contend` branch's extra pipe mutex round per write (the seed
//!   report's change): `same` on the 1-vCPU exact clock, and labelled below
//!   that mode's sight;
//! - lkp-tests' stress-ng-part4.yaml as upstream has it (`jobs/upstream/`;
//!   testtime 5s and the lab's kconfig set as `lkp submit -s` would). Its
//!   switch with method pipe runs Debian's stress-ng in the guests and must
//!   give upstream's metric names; its other atomic jobs are skipped with
//!   their reasons;
//! - the report's head run, reproduced to the last digit by its script.
//!
//! With an arm64 group beside them, a fourth agent's guest is aarch64 with
//! 64K pages (the kernel cross-built on the `qemu-arm64-64k` kconfig, booted
//! in qemu-system-aarch64), and a third watch on the same branch asks for
//! `arch: aarch64` and `need_page_size: 64K`. It finds the regression in the
//! same range, bisects it on its own group, and its finding joins the one
//! report (one culprit, one mail).
//!
//! Settings: `KBOT_E2E_COLD` (the builder's work directory and ccache new),
//! `KBOT_E2E_TIMEOUT_SECS` (the whole run: an hour, two with arm64),
//! `KBOT_E2E_RUNS` / `KBOT_E2E_MAX_RUNS` (runs per side to start with / cap),
//! `KBOT_E2E_PAGES` (pages the slowdown zeroes per write),
//! `KBOT_E2E_ICOUNT_SHIFT`, and `KBOT_E2E_WORKLOAD`: `sched-pipe`, the
//! default, or `lmbench3` (0-day's lmbench3 PIPE job, where
//! `KBOT_E2E_PAGES=1` plants a bandwidth change of a few percent).

mod check;
mod pairs;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kbot_api::bisections::{BisectionDetail, BisectionState};
use kbot_api::reports::StoredReport;
use kbot_api::submissions::{SubmissionKind, SubmissionStatus};
use kbot_api::watches::WatchCreate;

use crate::lab::{self, AgentSetup, Clock, Crew, Guest, KernelRepo, Lab};

#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// The small CI kconfig (no ACPI, no NUMA), 5,000 sched-pipe loops a run.
    Ci,
    /// `qemu-x86_64-tiny`, 20,000 loops.
    Full,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds and boots real kernels for minutes: scripts/test runs it"]
async fn a_watched_slowdown_is_bisected_on_two_groups_and_reported_once() {
    run(Form::Ci, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds and boots real kernels for half an hour: run it by hand"]
async fn a_watched_slowdown_in_the_full_form() {
    run(Form::Full, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds x86_64 and arm64 kernels for an hour: run it by hand"]
async fn a_watched_slowdown_beside_an_arm64_64k_group() {
    run(Form::Ci, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds x86_64 and arm64 kernels for an hour: run it by hand"]
async fn a_watched_slowdown_in_the_full_form_beside_an_arm64_64k_group() {
    run(Form::Full, true).await;
}

const MASTER_MOVES_TO: &str = "comment";
const AUTHOR: &str = "pat@example.org";
const LIST: &str = "linux-e2e@example.org";
const BUILDER: &str = "vm-builder-1";

/// The watched pipe job, its kconfig left to each group.
struct Workload {
    /// The job file with `KCONFIG` in place of its kconfig.
    job: String,
    kpi: &'static str,
}

impl Workload {
    fn of(form: Form) -> Workload {
        let runs = env_u32("KBOT_E2E_RUNS", 3);
        let workload = std::env::var("KBOT_E2E_WORKLOAD").unwrap_or_else(|_| "sched-pipe".into());
        match workload.as_str() {
            // A few seconds a run under TCG; 16 zeroed pages per write move
            // it by tens of percent.
            "sched-pipe" => Workload {
                job: format!(
                    "testcase: perf-bench-sched-pipe\nkconfig: KCONFIG\ncompiler: gcc-12\n\
                     runs: {runs}\nperf-bench-sched-pipe:\n  loops: {}\n",
                    if form == Form::Full { 20_000 } else { 5_000 }
                ),
                kpi: "perf-bench-sched-pipe.ops_per_sec",
            },
            // lat_pipe, then bw_pipe's 64 KiB writes: the seed report's KPI.
            "lmbench3" => Workload {
                job: format!(
                    "testcase: lmbench3\nkconfig: KCONFIG\ncompiler: gcc-12\nruns: {runs}\n\
                     nr_threads: 1\nlmbench3:\n  mode: development\n  test: PIPE\n"
                ),
                kpi: "lmbench3.PIPE.bandwidth.MB/sec",
            },
            other => panic!("KBOT_E2E_WORKLOAD is {other:?}: sched-pipe or lmbench3"),
        }
    }
}

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?}")))
        .unwrap_or(default)
}

/// The agent that tests a leg's kernels.
struct Tester {
    name: &'static str,
    guest: Guest,
    /// `KBOT_AGENT_ROLES`: `test` boots the builder's kernels, `build,test`
    /// builds its own.
    roles: &'static str,
    memory_mib: u32,
    dir: PathBuf,
    ccache: PathBuf,
    log: PathBuf,
}

impl Tester {
    fn setup<'a>(&'a self, tbox_group: &'a str) -> AgentSetup<'a> {
        AgentSetup {
            name: self.name,
            tbox_group,
            work_dir: &self.dir,
            ccache_dir: &self.ccache,
            log: &self.log,
            guest: self.guest,
            roles: self.roles,
            memory_mib: Some(self.memory_mib),
        }
    }
}

/// One tbox group of the lab: its agents, watch and what it found.
struct Leg {
    name: &'static str,
    group: &'static str,
    kconfig: &'static str,
    tester: Tester,
    /// Where its kernels are built: the builder's, or the tester's own.
    builder_dir: PathBuf,
    builder_log: PathBuf,
    watch: i64,
    /// The watch's submission of h0..head.
    submission: Option<i64>,
    bisection: Option<i64>,
    /// The bisection, once ended.
    ended: Option<BisectionDetail>,
    report: Option<StoredReport>,
}

impl Leg {
    /// A leg not yet watched; `builder` (its work directory and log) makes
    /// its kernels unless the tester builds them.
    fn new(
        name: &'static str,
        group: &'static str,
        kconfig: &'static str,
        tester: Tester,
        builder: (&Path, &Path),
    ) -> Leg {
        let (builder_dir, builder_log) = if tester.roles.contains("build") {
            (tester.dir.clone(), tester.log.clone())
        } else {
            (builder.0.to_path_buf(), builder.1.to_path_buf())
        };
        Leg {
            name,
            group,
            kconfig,
            tester,
            builder_dir,
            builder_log,
            watch: 0,
            submission: None,
            bisection: None,
            ended: None,
            report: None,
        }
    }

    /// The arch its builds carry at the server (`arm64`, not `aarch64`).
    fn build_arch(&self) -> &'static str {
        kbot_api::builds::kernel_arch(self.tester.guest.name())
    }
}

/// The running lab.
struct Run {
    crew: Crew,
    lab: Lab,
    linux: KernelRepo,
    work: PathBuf,
    kconfig: &'static str,
    kpi: &'static str,
    legs: Vec<Leg>,
}

async fn run(form: Form, arm64: bool) {
    let clock = Clock::start_for("e2e-kernel", if arm64 { 7200 } else { 3600 });
    let cache = lab::cache_dir();
    let work = lab::work_dir("e2e-run");
    // The build user's QEMU opens the test agents' run files by name: the
    // run's directory lets others through, not read.
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    clock.say(format!("work directory {}", work.display()));
    let mode = if form == Form::Full { "full" } else { "ci" };
    let pages = std::env::var("KBOT_E2E_PAGES").ok();
    let linux = KernelRepo::make_with_pages(
        &cache.join(format!("e2e-linux-{mode}.git")),
        pages.as_deref(),
    );
    let range = format!(
        "{}..{}",
        linux.commit("base"),
        linux.commit(MASTER_MOVES_TO)
    );
    let log = Command::new("git")
        .arg("--git-dir")
        .arg(&linux.dir)
        .args(["log", "--format=  %h %an: %s", &range])
        .output()
        .expect("git log");
    eprint!("{}", String::from_utf8_lossy(&log.stdout));
    clock.say(format!(
        "repository {}: master at h0 {}",
        linux.dir.display(),
        &linux.commit("h0")[..12]
    ));

    let mut run = Run::start(form, arm64, clock, work, linux).await;
    let t_watch = run.crew.clock.secs();
    run.first_head().await;
    let t_h0 = run.crew.clock.secs();
    let (t_move, seen_ms) = run.master_moves().await;
    run.until_bisected().await;
    let t_end = run.crew.clock.secs();

    for i in 0..run.legs.len() {
        run.check_leg(i).await;
    }
    run.check_shared_builds("x86_64").await;
    if arm64 {
        run.check_shared_builds("arm64").await;
    }
    let reports = run.lab.client.reports().await.expect("the reports");
    let regressions = reports
        .iter()
        .filter(|r| r.kind == kbot_api::reports::ReportKind::Regression)
        .count();
    assert_eq!(regressions, 1, "regression reports for the one culprit");

    run.ring_and_contend().await;
    let t_sng = run.crew.clock.secs();
    run.upstream_stress_ng().await;
    let t_repro = run.crew.clock.secs();
    run.reproduce().await;

    for leg in &run.legs {
        let report_ms = leg.report.as_ref().map_or(0, |r| r.created_at);
        run.crew.say(format!(
            "wall time ({}): watch submission -> report {}s",
            leg.name,
            (report_ms - seen_ms) / 1000
        ));
    }
    run.crew.say(format!(
        "wall time: phase 1 (h0 vs base) {}s; master moved -> watch submission {}s; \
         bisections {}s; the stress-ng pair {}s; the reproduction {}s",
        t_h0 - t_watch,
        seen_ms / 1000 - t_move,
        t_end - t_h0,
        t_repro - t_sng,
        run.crew.clock.secs() - t_repro,
    ));
}

fn unix_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

impl Run {
    async fn start(form: Form, arm64: bool, clock: Clock, work: PathBuf, linux: KernelRepo) -> Run {
        let lab = Lab::start(&linux, |c, url| {
            c.mail.repo_lists.insert("linux".into(), vec![LIST.into()]);
            c.mail.public_url = url.to_owned();
            c.mail.report.archive_url = format!("{url}/reports");
            c.mail.report.materials_url = format!("{url}/archive");
        })
        .await;
        let cache = lab::cache_dir();
        let mode = if form == Form::Full { "full" } else { "ci" };
        // The builder's and the arm64 agent's work directories and ccache
        // carry over between runs (their kernels are reused) unless cold.
        let keep = if lab::cold() { work.clone() } else { cache };
        let builder_dir = keep.join(format!("e2e-agent-{mode}"));
        let builder_log = work.join("builder.log");
        let kconfig = if form == Form::Full {
            "qemu-x86_64-tiny"
        } else {
            "qemu-x86_64-ci"
        };
        let builder = (builder_dir.as_path(), builder_log.as_path());
        let tester = |name, memory_mib, dir: &str, log: &str| Tester {
            name,
            guest: Guest::X86_64,
            roles: "test",
            memory_mib,
            dir: work.join(dir),
            ccache: work.join(format!("{dir}-ccache")),
            log: work.join(log),
        };
        let mut legs = vec![
            Leg::new(
                "x86_64",
                "vm-qemu-e2e",
                kconfig,
                tester("vm-qemu-e2e-1", 512, "tester", "agent.log"),
                builder,
            ),
            Leg::new(
                "x86_64-1g",
                "vm-qemu-e2e-1g",
                kconfig,
                tester("vm-qemu-e2e-1g-1", 1024, "tester-1g", "agent-1g.log"),
                builder,
            ),
        ];
        if arm64 {
            let tester = Tester {
                name: "vm-arm64-e2e-1",
                guest: Guest::Aarch64,
                roles: "build,test",
                memory_mib: 512,
                dir: keep.join("e2e-agent-arm64"),
                ccache: keep.join("e2e-ccache-arm64"),
                log: work.join("agent-arm64.log"),
            };
            legs.push(Leg::new(
                "aarch64",
                "vm-arm64-64k",
                "qemu-arm64-64k",
                tester,
                builder,
            ));
        }

        let mut processes = vec![
            lab.qemu_agent(AgentSetup {
                name: BUILDER,
                tbox_group: "builders",
                work_dir: &builder_dir,
                ccache_dir: &keep.join(format!("e2e-ccache-{mode}")),
                log: &builder_log,
                guest: Guest::X86_64,
                roles: "build",
                memory_mib: None,
            })
            .await,
        ];
        for l in &legs {
            processes.push(lab.qemu_agent(l.tester.setup(l.group)).await);
        }
        let workload = Workload::of(form);
        let mut run = Run {
            crew: Crew { clock, processes },
            lab,
            linux,
            work,
            kconfig,
            kpi: workload.kpi,
            legs,
        };
        run.add_watches(&workload.job).await;
        run
    }

    /// The same pipe job for each group: its kconfig, and the hardware it
    /// needs.
    async fn add_watches(&mut self, job: &str) {
        let max_runs = env_u32("KBOT_E2E_MAX_RUNS", 6);
        for leg in &mut self.legs {
            let needs = if leg.build_arch() == "arm64" {
                "arch: aarch64\nneed_page_size: 64K\n".to_owned()
            } else {
                format!("arch: x86_64\ntbox_group: {}\n", leg.group)
            };
            let watch = self
                .lab
                .client
                .add_watch(&WatchCreate {
                    repo: "linux".into(),
                    branch: "master".into(),
                    job_file: format!("{}{needs}", job.replace("KCONFIG", leg.kconfig)),
                    tbox_group: None,
                    interval_secs: Some(5),
                    max_runs: Some(max_runs),
                })
                .await
                .unwrap_or_else(|e| panic!("adding the watch of {}: {e}", leg.name));
            leg.watch = watch.id;
            self.crew.clock.say(format!(
                "watch {} on linux:master every 5s: {} on {} for {} (tbox group {}), \
                 at most {max_runs} runs a side",
                watch.id, self.kpi, leg.kconfig, leg.name, leg.group
            ));
        }
    }

    /// Phase 1: each watch tests h0 against the base until h0 is its
    /// `last_good`.
    async fn first_head(&mut self) {
        let h0 = self.linux.commit("h0").to_owned();
        for i in 0..self.legs.len() {
            let (name, id) = (self.legs[i].name, self.legs[i].watch);
            loop {
                self.crew.alive(&format!("watch {id}'s last_good to be h0"));
                let watch = self.lab.client.watch(id).await.expect("the watch").watch;
                if watch.last_good.as_deref() == Some(&h0) {
                    break;
                }
                if let Some(error) = watch.last_error {
                    self.crew.say(format!("watch {id} error: {error}"));
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            self.crew.say(format!(
                "phase 1 ({name}): h0 built, booted and ran: last_good = h0"
            ));
        }
        let submissions = self.lab.client.submissions(50).await.expect("submissions");
        for s in submissions
            .iter()
            .filter(|s| s.kind == SubmissionKind::Watch && s.head.sha == h0)
        {
            eprintln!("{}", self.summary(s.id).await);
        }
        let reports = self.lab.client.reports().await.expect("the reports").len();
        if reports > 0 {
            self.crew.say(format!(
                "warning: {reports} report(s) before master moved (the h0 pair is Documentation only)"
            ));
        }
    }

    /// Phase 2: master moves eight commits ahead; each watch submits
    /// h0..head. The time of the move and of the first submission.
    async fn master_moves(&mut self) -> (i64, i64) {
        let (h0, head) = (self.linux.commit("h0"), self.linux.commit(MASTER_MOVES_TO));
        let status = Command::new("git")
            .arg("--git-dir")
            .arg(&self.linux.dir)
            .args(["update-ref", "refs/heads/master", head, h0])
            .status()
            .expect("git update-ref");
        assert!(status.success(), "moving master");
        let head = head.to_owned();
        let t_move = unix_secs();
        self.crew
            .say(format!("phase 2: master moved to {}", &head[..12]));
        let mut seen_ms = None;
        for i in 0..self.legs.len() {
            let id = self.legs[i].watch;
            let submission = loop {
                self.crew
                    .alive(&format!("watch {id} to submit the new head"));
                let watch = self.lab.client.watch(id).await.expect("the watch").watch;
                match watch.current_submission {
                    Some(s) if watch.last_tested.as_deref() == Some(&head) => break s,
                    _ => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            };
            let created = self
                .lab
                .client
                .submission(submission)
                .await
                .expect("the submission")
                .submission
                .created_at;
            seen_ms.get_or_insert(created);
            self.legs[i].submission = Some(submission);
            self.crew.say(format!(
                "watch {id} ({}) submission {submission}: h0..head, created {}s after the move",
                self.legs[i].name,
                created / 1000 - t_move
            ));
        }
        (t_move, seen_ms.expect("a leg"))
    }

    /// Phase 3: the regression found, bisected, verified and reported, on
    /// every group; their progress printed as it changes.
    async fn until_bisected(&mut self) {
        let mut last = vec![String::new(); self.legs.len()];
        let mut settled_at = vec![None; self.legs.len()];
        loop {
            self.crew.alive("the bisection(s) to finish");
            for i in 0..self.legs.len() {
                if self.legs[i].ended.is_some() {
                    continue;
                }
                let line = self.follow(i, &mut settled_at[i]).await;
                // Printed when it changes, run counts aside.
                let key: String = line
                    .split(" run(s)")
                    .map(|s| s.trim_end_matches(char::is_numeric))
                    .collect();
                if key != last[i] {
                    self.crew.say(format!("{}: {line}", self.legs[i].name));
                    last[i] = key;
                }
            }
            if self.legs.iter().all(|l| l.ended.is_some()) {
                return;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }

    /// One look at leg `i`'s watch submission or its bisection.
    async fn follow(&mut self, i: usize, settled_at: &mut Option<i64>) -> String {
        let submission = self.legs[i].submission.expect("submitted");
        if self.legs[i].bisection.is_none() {
            let bisections = self.lab.client.bisections(50).await.expect("bisections");
            self.legs[i].bisection = bisections
                .iter()
                .find(|b| b.origin_submission == submission)
                .map(|b| b.id);
        }
        let Some(id) = self.legs[i].bisection else {
            let state = self
                .lab
                .client
                .submission(submission)
                .await
                .expect("submission")
                .submission
                .state;
            let running = [SubmissionStatus::Queued, SubmissionStatus::Running];
            if !running.contains(&state) {
                let since = *settled_at.get_or_insert_with(unix_secs);
                assert!(
                    unix_secs() - since < 60,
                    "watch submission {submission} ({}) is {state} and no bisection started from it\n{}",
                    self.legs[i].name,
                    self.summary(submission).await
                );
            }
            return format!("watch submission {submission}: {state}");
        };
        let detail = self.lab.client.bisection(id).await.expect("the bisection");
        let b = &detail.bisection;
        let steps: Vec<String> = detail
            .steps
            .iter()
            .map(|s| format!("{}={}", &s.sha[..7], s.state))
            .collect();
        let line = format!(
            "bisection {}: {}, {} step(s), {} build(s), {} run(s); {}",
            b.id,
            b.state,
            b.steps,
            b.builds,
            b.runs,
            steps.join(" ")
        );
        if ![BisectionState::Running, BisectionState::Verifying].contains(&b.state) {
            self.legs[i].ended = Some(detail);
        }
        line
    }

    /// A pair's runs and its KPI's comparison, as `kbot-server results`
    /// shows them.
    async fn summary(&self, id: i64) -> String {
        let r = self.lab.client.results(id).await.expect("results");
        let s = &r.submission;
        let mut groups: Vec<&str> = r
            .runs
            .iter()
            .map(|r| r.tbox_group.as_deref().unwrap_or("?"))
            .collect();
        groups.sort_unstable();
        groups.dedup();
        let mut out = format!(
            "  submission {} ({}, {}) {}..{}: {} run(s) with metrics on {}; jobs: {} finished, \
             {} failed of {}",
            s.id,
            s.kind,
            s.state,
            &s.base.sha[..12],
            &s.head.sha[..12],
            r.runs.len(),
            groups.join(", "),
            s.jobs.finished,
            s.jobs.failed,
            s.jobs.total,
        );
        for c in r.comparisons.iter().filter(|c| c.metric == self.kpi) {
            out += &format!(
                "\n    {}: {}, {} vs {} runs, means {:?} -> {:?}{}",
                self.kpi,
                c.verdict,
                c.base_runs,
                c.head_runs,
                c.base_mean,
                c.head_mean,
                c.change_percent
                    .map(|p| format!(" ({p:+.1}%)"))
                    .unwrap_or_default()
            );
        }
        out
    }

    /// Waits until submission `id` has ended; fails unless it is done.
    async fn until_done(&mut self, what: &str, id: i64) {
        loop {
            self.crew
                .alive(&format!("the {what} pair, submission {id}"));
            let state = self
                .lab
                .client
                .submission(id)
                .await
                .expect("the submission")
                .submission
                .state;
            match state {
                SubmissionStatus::Done => return,
                SubmissionStatus::Queued | SubmissionStatus::Running => {}
                ended => panic!("the {what} pair ended {ended}\n{}", self.summary(id).await),
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}
