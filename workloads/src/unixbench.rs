//! UnixBench "Pipe Throughput" (src/pipe.c, src/timeit.c and the Run script).
//!
//! One pass runs `copies` copies of the pipe program at once. Each copy is a
//! single process writing 512 bytes into its own pipe and reading them back,
//! counting loops until SIGALRM after `duration` seconds prints
//! `COUNT|<n>|1|lps` and exits. Like Run, the coordinator times each copy
//! from just before it is started until its output reaches EOF; a pass sums
//! the copies' counts and averages their times. Before each pass Run does
//! `sync; sleep 1; sync; sleep 2`. The passes are combined by dropping the
//! lowest third (by count) and taking the geometric mean of count/time; the
//! index is score / 12440 x 10.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use crate::calendar::Tm;
use crate::error::{BenchError, Result};
use crate::placement::PlacementReport;
use crate::report::{Output, Report};
use crate::sys::{self, Forked, Pid};

/// pgms/index.base: `pipe|10|lps|12440|12440|2`.
pub const BASELINE_LPS: f64 = 12440.0;
const TEST_NAME: &str = "Pipe Throughput";

#[derive(Debug, Clone)]
pub struct UnixbenchOpts {
    pub duration: u32,
    pub copies: usize,
    pub passes: usize,
    pub settle_secs: u32,
}

/// One pass: counts summed over copies, elapsed averaged over copies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pass {
    pub count: u64,
    pub time: f64,
}

/// Run's `combinePassResults`: (score, mean time, passes kept).
pub fn combine_passes(passes: &[Pass]) -> Option<(f64, f64, usize)> {
    let mut sorted = passes.to_vec();
    sorted.sort_by_key(|p| p.count);
    let ndump = sorted.len() / 3;
    let kept = &sorted[ndump..];
    let mut product = 0.0;
    let mut total_time = 0.0;
    for p in kept {
        if p.time > 0.0 {
            if p.count > 0 {
                product += (p.count as f64).ln() - p.time.ln();
            }
        } else if p.count > 0 {
            product += (p.count as f64).ln();
        }
        total_time += p.time;
    }
    if kept.is_empty() {
        return None;
    }
    let k = kept.len() as f64;
    Some(((product / k).exp(), total_time / k, kept.len()))
}

// The pipe program's state, read by its SIGALRM handler.
static ITER: AtomicU64 = AtomicU64::new(0);
static OUT_FD: AtomicI32 = AtomicI32::new(2);

/// timeit.c's `report()`: print the count and exit. Only async-signal-safe
/// work: digits into a stack buffer, one write, _exit.
extern "C" fn report_and_exit(_sig: libc::c_int) {
    let mut buf = [0u8; 64];
    let mut len = 0;
    for &b in b"COUNT|" {
        buf[len] = b;
        len += 1;
    }
    let mut digits = [0u8; 20];
    let mut n = ITER.load(Ordering::Relaxed);
    let mut d = 0;
    loop {
        digits[d] = b'0' + (n % 10) as u8;
        d += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        buf[len] = digits[d];
        len += 1;
    }
    for &b in b"|1|lps\n" {
        buf[len] = b;
        len += 1;
    }
    // SAFETY: write and _exit are async-signal-safe; buf is valid.
    unsafe {
        libc::write(OUT_FD.load(Ordering::Relaxed), buf.as_ptr().cast(), len);
        libc::_exit(0);
    }
}

/// pipe.c's main loop in a forked child; ends in the SIGALRM handler.
fn pipe_program(duration: u32, out_fd: RawFd) -> ! {
    OUT_FD.store(out_fd, Ordering::Relaxed);
    ITER.store(0, Ordering::Relaxed);
    let Ok((r, w)) = sys::pipe() else {
        sys::child_fail("pipe")
    };
    // SAFETY: installing a handler that only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = report_and_exit as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
        libc::alarm(duration);
    }
    let mut buf = [0u8; 512];
    loop {
        if sys::write_raw(w, &buf) != 512 {
            let e = sys::errno();
            if e != libc::EINTR && e != 0 {
                sys::write_stderr(format!("write failed, error {e}\n").as_bytes());
            }
        }
        if sys::read_raw(r, &mut buf) != 512 {
            let e = sys::errno();
            if e != libc::EINTR && e != 0 {
                sys::write_stderr(format!("read failed, error {e}\n").as_bytes());
            }
        }
        ITER.store(ITER.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

struct Copy {
    pid: Pid,
    fd: RawFd,
    start_us: u64,
    end_us: Option<u64>,
    text: Vec<u8>,
}

/// Runs the copies of one pass at once and returns (count, elapsed s) each.
fn run_pass(opts: &UnixbenchOpts) -> Result<Vec<(u64, f64, String)>> {
    let mut copies: Vec<Copy> = Vec::with_capacity(opts.copies);
    let me = sys::getpid();
    for _ in 0..opts.copies {
        let (r, w) = sys::pipe()?;
        let start_us = sys::now_us();
        match sys::fork()? {
            Forked::Child => {
                sys::die_with_parent(me);
                sys::close(r);
                for c in &copies {
                    sys::close(c.fd);
                }
                pipe_program(opts.duration, w)
            }
            Forked::Parent(pid) => {
                sys::close(w);
                copies.push(Copy {
                    pid,
                    fd: r,
                    start_us,
                    end_us: None,
                    text: Vec::new(),
                });
            }
        }
    }
    collect_output(&mut copies)?;
    let mut results = Vec::with_capacity(copies.len());
    for c in &copies {
        sys::close(c.fd);
        let status = sys::waitpid(c.pid, 0).map(|(_, s)| s);
        let text = String::from_utf8_lossy(&c.text).into_owned();
        let count = parse_count(&text).ok_or_else(|| {
            BenchError::Child(format!(
                "pipe copy printed no COUNT line (status {status:?}): {text:?}"
            ))
        })?;
        let elapsed = (c.end_us.unwrap_or(c.start_us) - c.start_us) as f64 / 1e6;
        results.push((count, elapsed, text));
    }
    Ok(results)
}

/// Reads every copy's output until EOF, noting when each EOF happened.
fn collect_output(copies: &mut [Copy]) -> Result<()> {
    let mut buf = [0u8; 4096];
    while copies.iter().any(|c| c.end_us.is_none()) {
        let mut pfds: Vec<libc::pollfd> = copies
            .iter()
            .filter(|c| c.end_us.is_none())
            .map(|c| libc::pollfd {
                fd: c.fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: pfds is a valid array of pollfd.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
        if r < 0 {
            if sys::errno() == libc::EINTR {
                continue;
            }
            return Err(BenchError::last_os("poll"));
        }
        for p in pfds.iter().filter(|p| p.revents != 0) {
            let Some(c) = copies.iter_mut().find(|c| c.fd == p.fd) else {
                continue;
            };
            let n = sys::read_raw(c.fd, &mut buf);
            if n > 0 {
                c.text.extend_from_slice(&buf[..n as usize]);
            } else if n == 0 || sys::errno() != libc::EINTR {
                c.end_us = Some(sys::now_us());
            }
        }
    }
    Ok(())
}

/// The count of a `COUNT|<n>|1|lps` line.
pub fn parse_count(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("COUNT|"))
        .and_then(|rest| rest.split('|').next())
        .and_then(|n| n.trim().parse().ok())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub fn run(opts: &UnixbenchOpts, out: &mut Output, report: &mut Report) -> Result<()> {
    let started = sys::wall_secs();
    let mut passes = Vec::with_capacity(opts.passes);
    for _ in 0..opts.passes {
        if opts.settle_secs > 0 {
            sys::sync();
            sys::sleep(Duration::from_secs(u64::from(opts.settle_secs)));
            sys::sync();
        }
        let copies = run_pass(opts)?;
        let mut count = 0;
        let mut time = 0.0;
        for (c, t, text) in &copies {
            out.err(text);
            count += c;
            time += t;
        }
        passes.push(Pass {
            count,
            time: time / copies.len() as f64,
        });
    }
    let ended = sys::wall_secs();
    let (score, time, kept) =
        combine_passes(&passes).ok_or_else(|| BenchError::NoResult("no measured passes".into()))?;
    let index = score / BASELINE_LPS * 10.0;
    let (t0, t1) = (Tm::from_epoch(started), Tm::from_epoch(ended));
    out.out("------------------------------------------------------------------------\n");
    out.out(&format!(
        "Benchmark Run: {} {} - {}\n",
        t0.date(),
        t0.hms(),
        t1.hms()
    ));
    out.out(&format!(
        "{} in system; running {} of tests\n\n",
        plural(sys::online_cpus(), "CPU", "CPUs"),
        plural(opts.copies, "parallel copy", "parallel copies")
    ));
    out.out(&format!(
        "{TEST_NAME:<40} {score:>12.1} {:<5} ({time:.1} s, {kept} samples)\n\n",
        "lps"
    ));
    out.out(&format!(
        "{:<40} {:>12} {:>12} {:>8}\n",
        "System Benchmarks Partial Index", "BASELINE", "RESULT", "INDEX"
    ));
    out.out(&format!(
        "{TEST_NAME:<40} {BASELINE_LPS:>12.1} {score:>12.1} {index:>8.1}\n"
    ));
    out.out(&format!(
        "{:<40} {:>12} {:>12} {:>8}\n",
        "", "", "", "========"
    ));
    out.out(&format!(
        "{:<66} {index:>8.1}\n\n",
        "System Benchmarks Index Score (Partial Only)"
    ));

    report.metric("throughput", score);
    report.metric("score", index);
    report.param("test", "pipe");
    report.param("duration", opts.duration);
    report.param("-c", opts.copies);
    report.param("-i", opts.passes);
    report.param("settle_secs", opts.settle_secs);
    report.param("passes_kept", kept);
    let mut p = PlacementReport::new("unpinned (UnixBench does not pin)");
    for i in 0..opts.copies {
        p.add(format!("copy {i}"), None);
    }
    report.placement = p;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_third_dropped_and_geometric_mean_taken() {
        let passes: Vec<Pass> = [100u64, 1, 400, 2, 100, 400]
            .iter()
            .map(|&c| Pass {
                count: c,
                time: 1.0,
            })
            .collect();
        let (score, time, kept) = combine_passes(&passes).unwrap_or_default();
        assert_eq!(kept, 4);
        assert!((score - 200.0).abs() < 1e-9, "{score}");
        assert!((time - 1.0).abs() < 1e-12);
    }

    #[test]
    fn count_lines_parse() {
        assert_eq!(parse_count("COUNT|493023|1|lps\n"), Some(493023));
        assert_eq!(parse_count("garbage"), None);
    }
}
