//! `perf bench sched pipe`: two tasks ping-pong an int over two pipes.
//!
//! As in tools/perf/bench/sched-pipe.c: the clock starts before the fork (or
//! the thread creation); in process mode the child is task 0 (reads first)
//! and the parent task 1 (writes first); one op is one round trip.

use std::os::fd::RawFd;

use crate::error::{BenchError, Result};
use crate::placement::PlacementReport;
use crate::report::{Output, Report};
use crate::sys::{self, Forked};
use crate::PairCpus;

#[derive(Debug, Clone)]
pub struct SchedPipeOpts {
    pub loops: u64,
    pub threaded: bool,
    pub cpus: PairCpus,
}

#[derive(Clone, Copy)]
struct Task {
    /// 0 reads first, 1 writes first.
    nr: u8,
    read_fd: RawFd,
    write_fd: RawFd,
}

fn worker(task: Task, loops: u64) -> std::result::Result<(), &'static str> {
    let mut m = [0u8; 4];
    for _ in 0..loops {
        if task.nr == 0 {
            if sys::read_raw(task.read_fd, &mut m) != 4 {
                return Err("sched pipe: read");
            }
            if sys::write_raw(task.write_fd, &m) != 4 {
                return Err("sched pipe: write");
            }
        } else {
            if sys::write_raw(task.write_fd, &m) != 4 {
                return Err("sched pipe: write");
            }
            if sys::read_raw(task.read_fd, &mut m) != 4 {
                return Err("sched pipe: read");
            }
        }
    }
    Ok(())
}

fn pin(cpu: Option<usize>) -> Result<()> {
    match cpu {
        Some(c) => sys::set_affinity(&[c]),
        None => Ok(()),
    }
}

pub fn run(opts: &SchedPipeOpts, out: &mut Output, report: &mut Report) -> Result<()> {
    let (p1r, p1w) = sys::pipe()?;
    let (p2r, p2w) = sys::pipe()?;
    let tasks = [
        Task {
            nr: 0,
            read_fd: p1r,
            write_fd: p2w,
        },
        Task {
            nr: 1,
            read_fd: p2r,
            write_fd: p1w,
        },
    ];
    let loops = opts.loops;
    let (reader_cpu, writer_cpu) = (opts.cpus.reader, opts.cpus.writer);
    let start = sys::now_us();
    if opts.threaded {
        let spawn = |task: Task, cpu: Option<usize>| {
            std::thread::spawn(move || -> std::result::Result<(), String> {
                pin(cpu).map_err(|e| e.to_string())?;
                worker(task, loops).map_err(|e| format!("{e}: {}", std::io::Error::last_os_error()))
            })
        };
        let t0 = spawn(tasks[0], reader_cpu);
        let t1 = spawn(tasks[1], writer_cpu);
        for t in [t0, t1] {
            t.join()
                .map_err(|_| BenchError::Child("sched pipe thread panicked".into()))?
                .map_err(BenchError::Child)?;
        }
    } else {
        let parent = sys::getpid();
        match sys::fork()? {
            Forked::Child => {
                sys::die_with_parent(parent);
                if pin(reader_cpu).is_err() {
                    sys::child_fail("sched_setaffinity");
                }
                match worker(tasks[0], loops) {
                    Ok(()) => sys::exit_now(0),
                    Err(what) => sys::child_fail(what),
                }
            }
            Forked::Parent(pid) => {
                pin(writer_cpu)?;
                let res = worker(tasks[1], loops);
                let status = sys::waitpid(pid, 0);
                res.map_err(|w| {
                    BenchError::Child(format!("{w}: {}", std::io::Error::last_os_error()))
                })?;
                match status {
                    Some((_, st)) if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 => {}
                    _ => return Err(BenchError::Child("sched pipe child failed".into())),
                }
            }
        }
    }
    let usecs = sys::now_us() - start;
    for fd in [p1r, p1w, p2r, p2w] {
        sys::close(fd);
    }

    let kind = if opts.threaded {
        "threads"
    } else {
        "processes"
    };
    let (sec, msec) = (usecs / 1_000_000, (usecs % 1_000_000) / 1000);
    let usecs_per_op = usecs as f64 / loops as f64;
    let ops_per_sec = (loops as f64 / (usecs as f64 / 1e6)) as i64;
    out.out("# Running 'sched/pipe' benchmark:\n");
    out.out(&format!(
        "# Executed {loops} pipe operations between two {kind}\n\n"
    ));
    out.out(&format!(" {:>14}: {sec}.{msec:03} [sec]\n\n", "Total time"));
    out.out(&format!(" {usecs_per_op:>14.6} usecs/op\n"));
    out.out(&format!(" {ops_per_sec:>14} ops/sec\n"));

    report.metric("ops_per_sec", ops_per_sec as f64);
    report.metric("usecs_per_op", usecs_per_op);
    report.metric("total_time_sec", usecs as f64 / 1e6);
    report.param("-l", loops);
    report.param("-T", opts.threaded);
    let mut placement = PlacementReport::new(opts.cpus.mode_name());
    placement.add("task0 (reads first)", reader_cpu.map(|c| vec![c]));
    placement.add("task1 (writes first)", writer_cpu.map(|c| vec![c]));
    report.placement = placement;
    Ok(())
}
