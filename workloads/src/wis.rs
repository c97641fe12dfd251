//! will-it-scale's harness (main.c) and its pipe testcases: pipe1,
//! context_switch1 and the seed thread's pipen.
//!
//! Each task gets a u64 counter in a MAP_SHARED area, 256 bytes apart. Tasks
//! are pinned to core (i mod #cores) by default, block in `poll` on a start
//! pipe, and run their testcase forever. context_switch1's partner inherits
//! its task's CPUs, so the ping-pong stays on one core: the 10x of a pair
//! that wakes across CPUs is exactly what a lost pinning costs. Every task and
//! partner therefore records the CPUs it really runs on, and the run fails if
//! they are not the ones asked for. The parent sleeps 1 s at a time,
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
    /// Counter increments per loop of the task (the C `(*iterations)++` or
    /// `+= 2`): context_switch1 counts both switches of a round trip.
    pub fn ops_per_loop(&self) -> u64 {
        match self {
            Testcase::ContextSwitch1 => 2,
            Testcase::Pipe1 | Testcase::Pipen { .. } => 1,
        }
    }

    /// Whether each task forks or spawns a partner (`new_task`).
    pub fn has_partner(&self) -> bool {
        matches!(self, Testcase::ContextSwitch1)
    }

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
    /// Where each task (then each partner) ran, as it recorded it.
    pub placed: Vec<Placed>,
}

/// A task's or partner's CPUs: those asked for (None = unpinned, i.e. the
/// harness's own mask) and those it found itself on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Task number.
    pub task: usize,
    /// context_switch1's partner of that task.
    pub partner: bool,
    pub expected: Option<Vec<usize>>,
    pub observed: Vec<usize>,
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
/// `cpus` and `partner_slot` are where context_switch1's partner records its
/// CPUs.
fn testcase(
    test: &Testcase,
    counter: &AtomicU64,
    nr: usize,
    prep: &Prepared,
    mode: TaskMode,
    cpus: &Arc<SharedCounters>,
    partner_slot: usize,
) -> ! {
    match test {
        Testcase::Pipe1 => pipe1(counter),
        Testcase::ContextSwitch1 => context_switch1(counter, mode, Arc::clone(cpus), partner_slot),
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
        bump(counter, Testcase::Pipe1.ops_per_loop());
    }
}

fn context_switch1(
    counter: &AtomicU64,
    mode: TaskMode,
    cpus: Arc<SharedCounters>,
    partner_slot: usize,
) -> ! {
    let (Ok((r1, w1)), Ok((r2, w2))) = (sys::pipe(), sys::pipe()) else {
        sys::child_fail("context_switch1: pipe")
    };
    new_task(mode, move || {
        cpus.record_cpus(partner_slot);
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
        bump(counter, Testcase::ContextSwitch1.ops_per_loop());
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
    // Slot i: task i's CPUs; slot tasks + i: its partner's.
    let cpus = Arc::new(SharedCounters::new(2 * tasks)?);
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
                // Only the parent restores its mask: the child keeps the
                // task's CPUs, and its context_switch1 partner inherits them
                // (new_task_affinity's child never returns to the restore).
                if cpuset.is_some() && !matches!(forked, Ok(Forked::Child)) {
                    sys::set_affinity(&original)?;
                }
                match forked? {
                    Forked::Child => {
                        sys::die_with_parent(me);
                        cpus.record_cpus(nr);
                        sys::poll_forever(start_r);
                        testcase(
                            test,
                            counters.get(nr),
                            nr,
                            &prep,
                            opts.mode,
                            &cpus,
                            tasks + nr,
                        )
                    }
                    Forked::Parent(pid) => pids.push(pid),
                }
            }
            TaskMode::Thread => {
                let (counters, prep, test, cpus) = (
                    Arc::clone(&counters),
                    Arc::clone(&prep),
                    test.clone(),
                    Arc::clone(&cpus),
                );
                let mode = opts.mode;
                std::thread::Builder::new()
                    .spawn(move || {
                        if let Err(e) = task_thread_setup(cpuset.as_deref()) {
                            sys::child_fail(&e.to_string());
                        }
                        cpus.record_cpus(nr);
                        sys::poll_forever(start_r);
                        testcase(&test, counters.get(nr), nr, &prep, mode, &cpus, tasks + nr)
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
    let result = sample(&counters, opts, test, out, &pids).and_then(|mut r| {
        r.placed = check_placement(test, opts, &cpus, &original)?;
        Ok(r)
    });
    for &pid in &pids {
        sys::kill(pid, libc::SIGTERM);
    }
    result
}

/// What main.c's `pre_trampoline` does in a task thread before the testcase:
/// bind it (`hwloc_set_thread_cpubind`) and make it asynchronously
/// cancellable (`pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS)`, so that
/// `kill_tasks` can cancel it). The latter also makes glibc skip two atomic
/// compare-and-swaps around each read and write: ~5% of pipe1's loop. The
/// context_switch1 partner thread (`new_task`) keeps the deferred type.
fn task_thread_setup(cpuset: Option<&[usize]>) -> Result<()> {
    if let Some(set) = cpuset {
        sys::set_affinity(set)?;
    }
    sys::set_cancel_type(sys::PTHREAD_CANCEL_ASYNCHRONOUS)?;
    Ok(())
}

/// Reads back where every task and partner ran and fails the run if that is
/// not where it was asked to run (unpinned ones: the harness's own mask).
fn check_placement(
    test: &Testcase,
    opts: &WisOpts,
    cpus: &SharedCounters,
    original: &[usize],
) -> Result<Vec<Placed>> {
    let mut placed = Vec::new();
    for partner in [false, true] {
        if partner && !test.has_partner() {
            break;
        }
        for nr in 0..opts.tasks {
            let expected = opts.cpusets.get(nr).cloned().flatten();
            let who = if partner {
                "the partner of task"
            } else {
                "task"
            };
            let slot = if partner { opts.tasks + nr } else { nr };
            let observed = cpus
                .recorded_cpus(slot)
                .ok_or_else(|| BenchError::Child(format!("{who} {nr} never started")))?;
            let want = expected.clone().unwrap_or_else(|| original.to_vec());
            if observed != want {
                return Err(BenchError::Child(format!(
                    "{who} {nr} ran on CPUs {observed:?}, not {want:?}"
                )));
            }
            placed.push(Placed {
                task: nr,
                partner,
                expected,
                observed,
            });
        }
    }
    Ok(placed)
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
        placed: Vec::new(),
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

/// The placement report for a will-it-scale run: the CPUs each task (and
/// partner) found itself on, `null` for the unpinned.
pub fn placement(mode: &str, placed: &[Placed], role: impl Fn(usize) -> String) -> PlacementReport {
    let mut p = PlacementReport::new(mode);
    for t in placed {
        let name = if t.partner {
            format!("partner {}", t.task)
        } else {
            role(t.task)
        };
        p.add(name, t.expected.as_ref().map(|_| t.observed.clone()));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_loop_counts_as_in_the_c_testcases() {
        // context_switch1.c: `(*iterations) += 2` per round trip; pipe1.c and
        // the pipen sides count one per loop.
        assert_eq!(Testcase::ContextSwitch1.ops_per_loop(), 2);
        assert_eq!(Testcase::Pipe1.ops_per_loop(), 1);
        let pipen = Testcase::Pipen {
            size: 4096,
            packet: false,
        };
        assert_eq!(pipen.ops_per_loop(), 1);
        assert!(Testcase::ContextSwitch1.has_partner());
        assert!(!Testcase::Pipe1.has_partner() && !pipen.has_partner());
    }

    #[test]
    fn task_threads_are_asynchronously_cancellable_partners_not() {
        let me = sys::allowed_cpus();
        let types = std::thread::spawn(move || {
            let task = task_thread_setup(Some(&me[..1])).map(|()| sys::allowed_cpus());
            let (tx, rx) = std::sync::mpsc::channel();
            // The partner thread as new_task creates it.
            new_task(TaskMode::Thread, move || {
                let _ = tx.send(sys::set_cancel_type(0));
            });
            (task, sys::set_cancel_type(0), rx.recv().ok())
        })
        .join()
        .expect("thread");
        assert_eq!(types.0.ok(), Some(vec![sys::allowed_cpus()[0]]));
        assert_eq!(types.1.ok(), Some(sys::PTHREAD_CANCEL_ASYNCHRONOUS));
        assert_eq!(types.2.and_then(|r| r.ok()), Some(0));
    }

    #[test]
    fn recorded_cpus_round_trip_and_mismatch_fails() {
        let cpus = SharedCounters::new(4).expect("mmap");
        assert_eq!(cpus.recorded_cpus(0), None);
        cpus.record_cpus(0);
        let mine = sys::allowed_cpus();
        assert_eq!(cpus.recorded_cpus(0), Some(mine.clone()));
        cpus.record_cpus(2);
        let opts = WisOpts {
            tasks: 2,
            seconds: 1,
            mode: TaskMode::Process,
            warmup_samples: 0,
            cpusets: vec![None, None],
        };
        // Task 1 never recorded: not started.
        assert!(check_placement(&Testcase::Pipe1, &opts, &cpus, &mine).is_err());
        cpus.record_cpus(1);
        let placed = check_placement(&Testcase::Pipe1, &opts, &cpus, &mine).expect("placed");
        assert_eq!(placed.len(), 2);
        // Partner 1 (slot 3) missing.
        assert!(check_placement(&Testcase::ContextSwitch1, &opts, &cpus, &mine).is_err());
        cpus.record_cpus(3);
        assert_eq!(
            check_placement(&Testcase::ContextSwitch1, &opts, &cpus, &mine)
                .map(|p| p.len())
                .ok(),
            Some(4)
        );
        // A task asked to run elsewhere than where it recorded itself fails
        // the run (the lost pinning of the process-mode fork).
        let elsewhere: Vec<usize> = vec![mine.iter().max().copied().unwrap_or(0) + 1];
        let pinned = WisOpts {
            cpusets: vec![Some(elsewhere), None],
            ..opts
        };
        assert!(check_placement(&Testcase::Pipe1, &pinned, &cpus, &mine).is_err());
    }
}
