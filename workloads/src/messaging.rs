//! hackbench (rt-tests src/hackbench/hackbench.c) and `perf bench sched
//! messaging` (tools/perf/bench/sched-messaging.c): the same algorithm.
//!
//! G groups of F receivers and F senders. Each receiver owns one fd pair
//! (socketpair by default, pipe with `--ipc pipe`); every sender writes one
//! message of S bytes to each of the F receivers, L times; every receiver
//! reads F x L messages. Workers write a byte to a shared "ready" fd and block
//! in `poll` on a shared "wake" fd; the clock starts once every worker is
//! ready, one wake byte releases them all, and stops after the last worker has
//! been reaped (`wait`/`pthread_join`). hackbench makes the ready/wake pair
//! with the same fd type as the data; perf always uses pipes for them.

use std::os::fd::RawFd;
use std::sync::Arc;

use crate::cli::{Ipc, MessagingStyle, TaskMode};
use crate::error::{BenchError, Result};
use crate::placement::PlacementReport;
use crate::report::{Output, Report};
use crate::sys::{self, Forked};

#[derive(Debug, Clone)]
pub struct MessagingOpts {
    pub groups: usize,
    pub fds: usize,
    pub loops: usize,
    pub datasize: usize,
    pub ipc: Ipc,
    pub mode: TaskMode,
    pub style: MessagingStyle,
}

impl MessagingOpts {
    pub fn tasks(&self) -> usize {
        2 * self.fds * self.groups
    }
}

/// Stack size of worker threads: hackbench asks for PTHREAD_STACK_MIN; the
/// Rust runtime needs a little more, and the buffers live on the heap.
const THREAD_STACK: usize = 64 * 1024;

fn fdpair(ipc: Ipc) -> Result<(RawFd, RawFd)> {
    match ipc {
        Ipc::Pipe => sys::pipe(),
        Ipc::Socket => sys::socketpair(),
    }
}

/// Tell the parent we are ready, then wait for the go signal.
fn ready(ready_out: RawFd, wake: RawFd) {
    if sys::write_raw(ready_out, b"*") != 1 {
        sys::child_fail("CLIENT: ready write");
    }
    if !sys::poll_readable(wake, -1).unwrap_or(false) {
        sys::child_fail("poll");
    }
}

/// Sprays `loops` messages down each fd.
fn sender(out_fds: &[RawFd], loops: usize, datasize: usize, ready_out: RawFd, wake: RawFd) {
    ready(ready_out, wake);
    let data = vec![b'-'; datasize];
    for _ in 0..loops {
        for &fd in out_fds {
            let mut done = 0;
            while done < datasize {
                let n = sys::write_raw(fd, &data[done..]);
                if n < 0 {
                    sys::child_fail("SENDER: write");
                }
                done += n as usize;
            }
        }
    }
}

/// Receives `packets` messages of `datasize` bytes.
fn receiver(in_fd: RawFd, packets: usize, datasize: usize, ready_out: RawFd, wake: RawFd) {
    let mut data = vec![0u8; datasize];
    ready(ready_out, wake);
    for _ in 0..packets {
        let mut done = 0;
        while done < datasize {
            let n = sys::read_raw(in_fd, &mut data[done..]);
            if n < 0 {
                sys::child_fail("SERVER: read");
            }
            if n == 0 {
                sys::child_fail("SERVER: read: all senders went away");
            }
            done += n as usize;
        }
    }
}

/// Spawned workers, to be reaped.
enum Workers {
    Processes(usize),
    Threads(Vec<std::thread::JoinHandle<()>>),
}

fn spawn(opts: &MessagingOpts, ready_out: RawFd, wake: RawFd) -> Result<Workers> {
    let (fds, loops, size) = (opts.fds, opts.loops, opts.datasize);
    let me = sys::getpid();
    let mut count = 0usize;
    let mut handles = Vec::new();
    let thread = |f: Box<dyn FnOnce() + Send>, handles: &mut Vec<_>| -> Result<()> {
        let h = std::thread::Builder::new()
            .stack_size(THREAD_STACK)
            .spawn(f)
            .map_err(|e| BenchError::Sys {
                what: "pthread_create",
                source: e,
            })?;
        handles.push(h);
        Ok(())
    };
    for _ in 0..opts.groups {
        let mut out_fds = Vec::with_capacity(fds);
        for _ in 0..fds {
            let (r, w) = fdpair(opts.ipc)?;
            match opts.mode {
                TaskMode::Process => match sys::fork()? {
                    Forked::Child => {
                        sys::die_with_parent(me);
                        sys::close(w);
                        receiver(r, fds * loops, size, ready_out, wake);
                        sys::exit_now(0)
                    }
                    Forked::Parent(_) => {
                        sys::close(r);
                        count += 1;
                    }
                },
                TaskMode::Thread => thread(
                    Box::new(move || receiver(r, fds * loops, size, ready_out, wake)),
                    &mut handles,
                )?,
            }
            out_fds.push(w);
        }
        let out_fds = Arc::new(out_fds);
        for _ in 0..fds {
            match opts.mode {
                TaskMode::Process => match sys::fork()? {
                    Forked::Child => {
                        sys::die_with_parent(me);
                        sender(&out_fds, loops, size, ready_out, wake);
                        sys::exit_now(0)
                    }
                    Forked::Parent(_) => count += 1,
                },
                TaskMode::Thread => {
                    let out_fds = Arc::clone(&out_fds);
                    thread(
                        Box::new(move || sender(&out_fds, loops, size, ready_out, wake)),
                        &mut handles,
                    )?
                }
            }
        }
        if opts.mode == TaskMode::Process {
            for &w in out_fds.iter() {
                sys::close(w);
            }
        }
    }
    Ok(match opts.mode {
        TaskMode::Process => Workers::Processes(count),
        TaskMode::Thread => Workers::Threads(handles),
    })
}

fn reap(workers: Workers) -> Result<()> {
    let mut failed = 0;
    match workers {
        Workers::Processes(n) => {
            for _ in 0..n {
                match sys::waitpid(-1, 0) {
                    Some((_, st)) if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 => {}
                    Some(_) => failed += 1,
                    None => break,
                }
            }
        }
        Workers::Threads(handles) => {
            for h in handles {
                if h.join().is_err() {
                    failed += 1;
                }
            }
        }
    }
    if failed > 0 {
        return Err(BenchError::Child(format!("{failed} workers failed")));
    }
    Ok(())
}

pub fn run(opts: &MessagingOpts, out: &mut Output, report: &mut Report) -> Result<()> {
    sys::raise_nofile_limit();
    let (tasks, fds, groups) = (opts.tasks(), opts.fds, opts.groups);
    let kind = match opts.mode {
        TaskMode::Process => "processes",
        TaskMode::Thread => "threads",
    };
    match opts.style {
        MessagingStyle::Hackbench => {
            let mode = match opts.mode {
                TaskMode::Process => "process",
                TaskMode::Thread => "threaded",
            };
            out.out(&format!(
                "Running in {mode} mode with {groups} groups using {} file descriptors each (== {tasks} tasks)\n",
                2 * fds
            ));
            out.out(&format!(
                "Each sender will pass {} messages of {} bytes\n",
                opts.loops, opts.datasize
            ));
        }
        MessagingStyle::Perf => out.out("# Running 'sched/messaging' benchmark:\n"),
    }
    let control_ipc = match opts.style {
        MessagingStyle::Hackbench => opts.ipc,
        MessagingStyle::Perf => Ipc::Pipe,
    };
    let (ready_r, ready_w) = fdpair(control_ipc)?;
    let (wake_r, wake_w) = fdpair(control_ipc)?;
    let workers = spawn(opts, ready_w, wake_r)?;
    let mut dummy = [0u8; 1];
    for _ in 0..tasks {
        if sys::read_raw(ready_r, &mut dummy) != 1 {
            return Err(BenchError::last_os("Reading for readyfds"));
        }
    }
    let start = sys::now_us();
    if sys::write_raw(wake_w, b"*") != 1 {
        return Err(BenchError::last_os("Writing to start senders"));
    }
    reap(workers)?;
    let usecs = sys::now_us() - start;
    let (sec, msec) = (usecs / 1_000_000, usecs % 1_000_000 / 1000);
    // Both tools print seconds with truncated milliseconds.
    let printed = sec as f64 + msec as f64 / 1000.0;
    match opts.style {
        MessagingStyle::Hackbench => out.out(&format!("Time: {sec}.{msec:03}\n")),
        MessagingStyle::Perf => {
            out.out(&format!("# {fds} sender and receiver {kind} per group\n"));
            out.out(&format!("# {groups} groups == {tasks} {kind} run\n\n"));
            out.out(&format!(" {:>14}: {sec}.{msec:03} [sec]\n", "Total time"));
        }
    }
    for fd in [ready_r, ready_w, wake_r, wake_w] {
        sys::close(fd);
    }
    match opts.style {
        MessagingStyle::Hackbench => {
            // LKP: (tasks * loops * datasize >> 10) / time, a KiB/s-like proxy.
            let kib = ((tasks * opts.loops * opts.datasize) >> 10) as f64;
            let secs = if printed > 0.0 {
                printed
            } else {
                usecs as f64 / 1e6
            };
            report.metric("throughput", kib / secs);
            report.metric("time_sec", printed);
        }
        MessagingStyle::Perf => report.metric("total_time_sec", printed),
    }
    report.param("-g", groups);
    report.param("-f", fds);
    report.param("-l", opts.loops);
    report.param("-s", opts.datasize);
    report.param("ipc", format!("{:?}", opts.ipc).to_lowercase());
    report.param("mode", format!("{:?}", opts.mode).to_lowercase());
    report.param("style", format!("{:?}", opts.style).to_lowercase());
    report.param("elapsed_us", usecs);
    report.placement = PlacementReport::new(format!(
        "unpinned ({tasks} {kind}, none pinned, as upstream)"
    ));
    Ok(())
}
