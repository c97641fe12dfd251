//! An agent killed with SIGKILL leaves no process behind: its kernel build's
//! whole make tree, its QEMU guest and its host-backend workload die with it.
//!
//! This file is its own test harness (`harness = false`): the test re-runs
//! this binary as a stand-in agent (`KBOT_ORPHAN_HELPER=<path>`) that starts
//! real children through the agent's own spawn paths from a tokio blocking
//! thread, as the daemon does, then SIGKILLs it and watches the children.
//! A control case starts a child with a plain `Command::spawn` and shows the
//! orphan this prevents is real.
//!
//! QEMU runs as a root agent's does, as the build user (as root: CI), and
//! its group's guard is killed before the agent: what ends it then is its
//! own `PR_SET_PDEATHSIG`, which a change of uid after it would have cleared.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kbot_agent::host_backend::{self, HostConfig};
use kbot_agent::process::{self, run_logged, spawn_tied, Cancel};
use kbot_agent::sandbox::SandboxConfig;
use kbot_core::parsers::{ParseContext, Tool};
use kbot_core::programs::{Invocation, Repeat};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const HELPER: &str = "KBOT_ORPHAN_HELPER";
/// A tree like make's: a leader with children of its own.
const TREE: &str = "sleep 300 & sleep 300 & wait";
/// How long the dead agent's children may take to go.
const BOUND: Duration = Duration::from_secs(10);

fn main() {
    match std::env::var(HELPER) {
        Ok(path) => helper(&path),
        Err(_) => {
            build_tree_dies_with_the_agent();
            host_workload_dies_with_the_agent();
            qemu_dies_with_the_agent();
            a_plain_child_is_orphaned();
            println!("no_orphans: 4 passed");
        }
    }
}

/// The stand-in agent: starts one child the way `path` says, from a
/// blocking-pool thread of a tokio runtime, says "ready", and waits.
fn helper(path: &str) -> ! {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let path = path.to_string();
    let job = rt.spawn_blocking(move || start(&path));
    let _ = rt.block_on(job);
    std::process::exit(0)
}

fn start(path: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let long = Duration::from_secs(600);
    let ready = || println!("ready");
    match path {
        "build" => {
            ready();
            let mut make = Command::new("sh");
            make.args(["-c", TREE]);
            let _ = run_logged(&mut make, &dir.path().join("log"), long, &Cancel::new());
        }
        "host" => {
            ready();
            let cfg = HostConfig {
                kbot_bench: "kbot-bench".into(),
                run_timeout: long,
                perf: false,
            };
            let plan = [Invocation {
                program: "sh".into(),
                args: vec!["-c".into(), TREE.into()],
                repeat: Repeat::Times(1),
                parser: Tool::KbotBenchJson,
                context: ParseContext::default(),
            }];
            let _ = host_backend::run(&cfg, &plan, "", dir.path(), &Cancel::new());
        }
        "qemu" => {
            let mut qemu = Command::new("qemu-system-x86_64");
            qemu.args(["-M", "none", "-nographic", "-S", "-monitor", "none"])
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            if let Some(user) = SandboxConfig::default().user().expect("the build user") {
                user.run(&mut qemu).expect("QEMU runs as the build user");
            }
            let mut child = spawn_tied(&mut qemu).expect("qemu starts");
            ready();
            let _ = child.wait();
        }
        "plain" => {
            let _child = Command::new("sleep").arg("300").spawn();
            ready();
            std::thread::sleep(long);
        }
        other => panic!("unknown helper path {other}"),
    }
}

fn build_tree_dies_with_the_agent() {
    let left = kill_agent_mid_job("build", |_, procs| procs.len() >= 4, |_, _| {});
    assert_gone("build", &left);
}

fn host_workload_dies_with_the_agent() {
    let left = kill_agent_mid_job("host", |_, procs| procs.len() >= 4, |_, _| {});
    assert_gone("host", &left);
}

fn qemu_dies_with_the_agent() {
    if !process::on_path("qemu-system-x86_64") {
        assert!(std::env::var_os("CI").is_none(), "qemu is not installed");
        eprintln!("skipping the qemu case: qemu-system-x86_64 is not installed");
        return;
    }
    let is_qemu = |helper: i32, p: &Proc| p.ppid == helper && p.comm.starts_with("qemu-system");
    let user = SandboxConfig::default().user().expect("the build user");
    let want = user.map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.id.uid);
    let left = kill_agent_mid_job(
        "qemu",
        |helper, procs| procs.iter().any(|p| is_qemu(helper, p)),
        |helper, procs| {
            for p in procs {
                if is_qemu(helper, p) {
                    assert_eq!(uid_of(p.pid), Some(want), "QEMU's uid");
                } else if p.ppid == helper {
                    // The group's guard: only the death signal is left.
                    let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
                }
            }
        },
    );
    assert_gone("qemu", &left);
}

/// Without the agent's spawn path a child outlives its parent: the test
/// above would see it, and this is the orphan the agent used to leave.
fn a_plain_child_is_orphaned() {
    let left = kill_agent_mid_job("plain", |_, procs| !procs.is_empty(), |_, _| {});
    let sleeper = left.iter().find(|p| p.comm == "sleep").expect("sleep ran");
    let alive = running(sleeper);
    let _ = kill(Pid::from_raw(sleeper.pid), Signal::SIGKILL);
    assert!(alive, "a plain child outlives its SIGKILLed parent");
}

/// One process of the stand-in agent's tree, as /proc says.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    /// Field 22 of /proc/PID/stat: tells a reused pid from the original.
    start: u64,
    state: char,
    comm: String,
}

fn read_proc(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = tail.split_whitespace().collect();
    Some(Proc {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
        state: f.first()?.chars().next()?,
        comm,
    })
}

fn all_procs() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(read_proc)
        .collect()
}

/// The helper's descendants: its children and their process groups.
fn descendants(helper: i32) -> Vec<Proc> {
    let procs = all_procs();
    let children: BTreeSet<i32> = procs
        .iter()
        .filter(|p| p.ppid == helper)
        .map(|p| p.pid)
        .collect();
    let mut found: BTreeSet<Proc> = BTreeSet::new();
    for p in &procs {
        if children.contains(&p.pid) || children.contains(&p.pgrp) || children.contains(&p.ppid) {
            found.insert(p.clone());
        }
    }
    found.into_iter().collect()
}

/// Alive and not a zombie waiting for a reaper (PID 1 here may not reap).
fn running(p: &Proc) -> bool {
    read_proc(p.pid).is_some_and(|now| now.start == p.start && now.state != 'Z')
}

/// The real uid of `pid`.
fn uid_of(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts the helper on `path`, waits until `started` holds for its
/// descendants, calls `before` on them, SIGKILLs the helper, and returns the
/// descendants it had.
fn kill_agent_mid_job(
    path: &str,
    started: impl Fn(i32, &[Proc]) -> bool,
    before: impl Fn(i32, &[Proc]),
) -> Vec<Proc> {
    let exe = std::env::current_exe().expect("the test binary");
    let mut helper = Command::new(exe)
        .env(HELPER, path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the helper starts");
    let pid = i32::try_from(helper.id()).expect("a pid");
    let mut out = BufReader::new(helper.stdout.take().expect("piped"));
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    assert_eq!(line.trim(), "ready", "{path}: the helper did not start");
    let since = Instant::now();
    let mut procs = descendants(pid);
    while !started(pid, &procs) {
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "{path}: children never appeared: {procs:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        procs = descendants(pid);
    }
    before(pid, &procs);
    kill(Pid::from_raw(pid), Signal::SIGKILL).expect("SIGKILL the helper");
    let _ = helper.wait();
    procs
}

fn assert_gone(path: &str, procs: &[Proc]) {
    let since = Instant::now();
    let mut left: Vec<&Proc> = procs.iter().filter(|p| running(p)).collect();
    while !left.is_empty() && since.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(20));
        left.retain(|p| running(p));
    }
    for p in &left {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "{path}: still running {BOUND:?} after the agent died: {left:?}"
    );
    let names: Vec<&str> = procs.iter().map(|p| p.comm.as_str()).collect();
    println!(
        "{path}: {} processes {names:?} gone {:?} after SIGKILL",
        procs.len(),
        since.elapsed()
    );
}
