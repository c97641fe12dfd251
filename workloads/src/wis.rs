//! will-it-scale's harness (main.c) and its pipe testcases: pipe1,
//! context_switch1 and the seed thread's pipen.
//!
//! Each task gets a u64 counter in a MAP_SHARED area, 256 bytes apart. Tasks
//! are pinned to core (i mod #cores) by default, block in `poll` on a start
//! pipe, and run their testcase forever. The parent sleeps 1 s at a time,
//! prints `min:… max:… total:…` of the per-task deltas, discards the warm-up
//! samples (6 in will-it-scale), sums the next `-s` samples and prints
//! `average:` = total / s, i.e. ops per second summed over all tasks. Each
//! sample assumes `sleep(1)` lasted exactly one second, as upstream does.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::TaskMode;
use crate::error::{BenchError, Result};
use crate::placement::PlacementReport;
use crate::report::Output;
use crate::sys::{self, Forked, Pid, SharedCounters};

/// The testcases.
#[derive(Debug, Clone)]
pub enum Testcase {
    /// One task, one pipe: write 1 byte, read it back; 1 op per loop.
    Pipe1,
    /// Task and partner ping-pong 1 byte over two pipes; 2 ops per round trip.
    ContextSwitch1,
    /// Task 2i writes `size` bytes per write into pipe i, task 2i+1 reads it;
    /// both count one op per `size` bytes moved.
    Pipen { size: usize, packet: bool },
}

impl Testcase {
    pub fn description(&self) -> &'static str {
        match self {
            Testcase::Pipe1 => "pipe read/write",
            Testcase::ContextSwitch1 => "Context switch via pipes",
            Testcase::Pipen { .. } => "pipe writer/reader pairs on separate CPUs",
        }
    }
}

#[derive(Debug, Clone)]
pub struct WisOpts {
    pub tasks: usize,
    pub seconds: u32,
    pub mode: TaskMode,
    pub warmup_samples: u32,
    /// Per-task CPU set (None = unpinned).
    pub cpusets: Vec<Option<Vec<usize>>>,
}

#[derive(Debug, Clone)]
pub struct WisResult {
    /// The `average:` line: ops/s summed over tasks.
    pub average: u64,
    /// Per task, ops summed over the measured samples.
    pub task_totals: Vec<u64>,
}

/// Bumps a task's counter. Each counter has a single writer, so a relaxed
/// load and store (a plain increment) is enough, as in the C `(*iterations)++`.
#[inline]
fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

/// Shared state a testcase needs, created before the tasks start
/// (`testcase_prepare`).
struct Prepared {
    /// pipen: one pipe per writer/reader pair.
    pairs: Vec<(RawFd, RawFd)>,
}

fn prepare(test: &Testcase, tasks: usize) -> Result<Prepared> {
    let mut pairs = Vec::new();
    if let Testcase::Pipen { packet, .. } = test {
        for _ in 0..tasks.div_ceil(2) {
            // Packet mode is what stress-ng --pipe uses (pipe2 with O_DIRECT).
            pairs.push(if *packet {
                sys::pipe2(libc::O_DIRECT)?
            } else {
                sys::pipe()?
            });
        }
    }
    Ok(Prepared { pairs })
}

/// The testcase body for task `nr`; never returns. `fail` ends the task (the
/// process in process mode, everything in thread mode) with a message.
fn testcase(test: &Testcase, counter: &AtomicU64, nr: usize, prep: &Prepared, mode: TaskMode) -> ! {
    match test {
        Testcase::Pipe1 => pipe1(counter),
        Testcase::ContextSwitch1 => context_switch1(counter, mode),
        Testcase::Pipen { size, .. } => {
            let (r, w) = prep.pairs[nr / 2];
            if nr.is_multiple_of(2) {
                pipen_writer(counter, w, *size)
            } else {
                pipen_reader(counter, r, *size)
            }
        }
    }
}

fn retry_eintr(mut f: impl FnMut() -> isize) -> isize {
    loop {
        let r = f();
        if r == 1 || sys::errno() != libc::EINTR {
            return r;
        }
    }
}

fn pipe1(counter: &AtomicU64) -> ! {
    let Ok((r, w)) = sys::pipe() else {
        sys::child_fail("pipe1: pipe")
    };
    let mut c = [0u8; 1];
    loop {
        retry_eintr(|| sys::write_raw(w, &c));
        retry_eintr(|| sys::read_raw(r, &mut c));
        bump(counter, 1);
    }
}

fn context_switch1(counter: &AtomicU64, mode: TaskMode) -> ! {
    let (Ok((r1, w1)), Ok((r2, w2))) = (sys::pipe(), sys::pipe()) else {
        sys::child_fail("context_switch1: pipe")
    };
    new_task(mode, move || {
        let mut c = [0u8; 1];
        loop {
            if retry_eintr(|| sys::read_raw(r1, &mut c)) != 1 {
                sys::child_fail("context_switch1: partner read");
            }
            if retry_eintr(|| sys::write_raw(w2, &c)) != 1 {
                sys::child_fail("context_switch1: partner write");
            }
        }
    });
    let mut c = [0u8; 1];
    loop {
        if retry_eintr(|| sys::write_raw(w1, &c)) != 1 {
            sys::child_fail("context_switch1: write");
        }
        if retry_eintr(|| sys::read_raw(r2, &mut c)) != 1 {
            sys::child_fail("context_switch1: read");
        }
        bump(counter, 2);
    }
}

/// will-it-scale's `new_task`: a partner process (inheriting this task's
/// affinity) or a partner thread.
fn new_task(mode: TaskMode, body: impl FnOnce() + Send + 'static) {
    match mode {
        TaskMode::Process => {
            let me = sys::getpid();
            match sys::fork() {
                Ok(Forked::Child) => {
                    sys::die_with_parent(me);
                    body();
                    sys::exit_now(0)
                }
                Ok(Forked::Parent(_)) => {}
                Err(_) => sys::child_fail("fork"),
            }
        }
        TaskMode::Thread => {
            if std::thread::Builder::new().spawn(body).is_err() {
                sys::child_fail("pthread_create");
            }
        }
    }
}

fn pipen_writer(counter: &AtomicU64, w: RawFd, size: usize) -> ! {
    let buf = sys::AlignedBuf::new(size, 0);
    let data = buf.as_slice();
    loop {
        let mut done = 0;
        while done < size {
            let n = sys::write_raw(w, &data[done..]);
            if n < 0 {
                if sys::errno() == libc::EINTR {
                    continue;
                }
                sys::child_fail("pipen: write");
            }
            done += n as usize;
        }
        bump(counter, 1);
    }
}

fn pipen_reader(counter: &AtomicU64, r: RawFd, size: usize) -> ! {
    let mut buf = sys::AlignedBuf::new(size, 0);
    let data = buf.as_mut_slice();
    let mut pending = 0usize;
    loop {
        let n = sys::read_raw(r, data);
        if n <= 0 {
            if n < 0 && sys::errno() == libc::EINTR {
                continue;
            }
            sys::child_fail("pipen: read");
        }
        pending += n as usize;
        if pending >= size {
            bump(counter, (pending / size) as u64);
            pending %= size;
        }
    }
}

/// Runs the harness: start the tasks, sample once a second, print the
/// upstream lines, return the average and per-task totals.
pub fn run(test: &Testcase, opts: &WisOpts, out: &mut Output) -> Result<WisResult> {
    let tasks = opts.tasks;
    let counters = Arc::new(SharedCounters::new(tasks)?);
    let (start_r, start_w) = sys::pipe()?;
    let prep = Arc::new(prepare(test, tasks)?);
    let mut pids: Vec<Pid> = Vec::new();
    let original = sys::allowed_cpus();
    for nr in 0..tasks {
        let cpuset = opts.cpusets.get(nr).cloned().flatten();
        match opts.mode {
            TaskMode::Process => {
                // Like new_task_affinity: fork under the task's mask so the
                // child starts where it belongs, then restore ours.
                if let Some(set) = &cpuset {
                    sys::set_affinity(set)?;
                }
                let me = sys::getpid();
                let forked = sys::fork();
                if cpuset.is_some() {
                    sys::set_affinity(&original)?;
                }
                match forked? {
                    Forked::Child => {
                        sys::die_with_parent(me);
                        sys::poll_forever(start_r);
                        testcase(test, counters.get(nr), nr, &prep, opts.mode)
                    }
                    Forked::Parent(pid) => pids.push(pid),
                }
            }
            TaskMode::Thread => {
                let (counters, prep, test) =
                    (Arc::clone(&counters), Arc::clone(&prep), test.clone());
                let mode = opts.mode;
                std::thread::Builder::new()
                    .spawn(move || {
                        if let Some(set) = &cpuset {
                            if sys::set_affinity(set).is_err() {
                                sys::child_fail("sched_setaffinity");
                            }
                        }
                        sys::poll_forever(start_r);
                        testcase(&test, counters.get(nr), nr, &prep, mode)
                    })
                    .map_err(|e| BenchError::Sys {
                        what: "pthread_create",
                        source: e,
                    })?;
            }
        }
    }
    if sys::write_raw(start_w, &[0u8]) != 1 {
        return Err(BenchError::last_os("write start pipe"));
    }
    let result = sample(&counters, opts, test, out, &pids);
    for &pid in &pids {
        sys::kill(pid, libc::SIGTERM);
    }
    result
}

fn sample(
    counters: &SharedCounters,
    opts: &WisOpts,
    test: &Testcase,
    out: &mut Output,
    pids: &[Pid],
) -> Result<WisResult> {
    let tasks = opts.tasks;
    let warm = opts.warmup_samples as usize;
    let secs = opts.seconds as usize;
    out.out(&format!("testcase:{}\n", test.description()));
    out.out("warmup\n");
    if warm == 0 {
        out.out("measurement\n");
    }
    let mut prev = vec![0u64; tasks];
    let mut task_totals = vec![0u64; tasks];
    let mut total = 0u64;
    for k in 0..warm + secs {
        sys::sleep(Duration::from_secs(1));
        check_alive(pids)?;
        let (mut min, mut max, mut sum) = (u64::MAX, 0u64, 0u64);
        for (i, p) in prev.iter_mut().enumerate() {
            let val = counters.get(i).load(Ordering::Relaxed);
            let diff = val.wrapping_sub(*p);
            *p = val;
            min = min.min(diff);
            max = max.max(diff);
            sum += diff;
            if k >= warm {
                task_totals[i] += diff;
            }
        }
        out.out(&format!("min:{min} max:{max} total:{sum}\n"));
        if warm > 0 && k + 1 == warm {
            out.out("measurement\n");
        }
        if k >= warm {
            total += sum;
        }
    }
    let average = total / secs as u64;
    out.out(&format!("average:{average}\n"));
    Ok(WisResult {
        average,
        task_totals,
    })
}

/// A task that died (bad fd, fork failure) would silently stop counting.
fn check_alive(pids: &[Pid]) -> Result<()> {
    for &pid in pids {
        if let Some((_, status)) = sys::waitpid(pid, libc::WNOHANG) {
            return Err(BenchError::Child(format!(
                "task {pid} died (wait status {status:#x})"
            )));
        }
    }
    Ok(())
}

/// The placement report for a will-it-scale run.
pub fn placement(mode: &str, opts: &WisOpts, role: impl Fn(usize) -> String) -> PlacementReport {
    let mut p = PlacementReport::new(mode);
    for nr in 0..opts.tasks {
        p.add(role(nr), opts.cpusets.get(nr).cloned().flatten());
    }
    p
}
