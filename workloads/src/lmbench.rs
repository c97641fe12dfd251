//! lmbench3's `benchmp` timing harness (intel/lmbench src/lib_timing.c).
//!
//! The coordinator forks one benchmark process per unit of parallelism and
//! talks to them over four control pipes (ready/done, start, result, exit).
//! Each benchmark process runs `initialize(0)` (which forks its partner), then
//! loops over "intervals": warm-up batches of one iteration until the start
//! byte arrives, timed intervals until it has `repetitions` samples, then
//! cool-down batches until the coordinator asks for the samples.
//!
//! With one process (`-P 1`, also what LKP's 20% of the CPUs gives on up to 9
//! CPUs) `benchmp` runs a single, self-calibrating phase: an interval counts
//! only if it took more than 0.95 x `enough`, and the iteration count is
//! rescaled whenever an interval falls outside [0.99, 1.2] x `enough`. So an
//! interval that ran fast (the partner happened to be well placed, the
//! machine was quiet) is dropped while a slow one is kept. Only with P > 1 does
//! it first run that calibration with one process and then a measured phase
//! with P processes and the calibrated count fixed, where every interval
//! counts (`benchmp`: `if (parallel > 1)`; `benchmp_interval`:
//! `state->parallel > 1 || result > 0.95 * state->enough`). The result is the
//! median of all measured samples, ordered by time per iteration. lmbench's
//! timer and loop overhead corrections (t_overhead, l_overhead: about a
//! microsecond per 2-second sample) are not subtracted.

use std::os::fd::RawFd;

use crate::error::{BenchError, Result};
use crate::placement::{LmbenchSched, Topology};
use crate::sys::{self, Forked, Pid};

/// lmbench's SHORT and MEDIUM budgets, in microseconds.
pub const SHORT: u64 = 1_000_000;
pub const MEDIUM: u64 = 2_000_000;

/// A benchmark as `benchmp` drives it. All methods run in the forked
/// benchmark process; errors end that process.
pub trait LmBenchmark {
    /// `initialize(0, cookie)`: set up, e.g. create the pipe and fork the partner.
    fn initialize(&mut self, childno: usize, place: &Placer) -> std::result::Result<(), String>;
    /// The benchmarked work, `iterations` times.
    fn run(&mut self, iterations: u64) -> std::result::Result<(), String>;
    /// `cleanup(0, cookie)`: stop the partner.
    fn cleanup(&mut self);
}

/// One timed interval: `u` microseconds for `n` iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub u: u64,
    pub n: u64,
}

/// Pins the processes of a benchmark (lib_sched.c `handle_scheduler`), with
/// optional explicit writer/reader CPUs that take precedence.
#[derive(Debug, Clone)]
pub struct Placer {
    pub sched: LmbenchSched,
    pub topo: Topology,
    /// Explicit CPU for benchproc 0 (the reader / timing side).
    pub main_cpu: Option<usize>,
    /// Explicit CPU for benchproc 1 (the partner: writer / echo side).
    pub partner_cpu: Option<usize>,
}

impl Placer {
    /// The CPU for (childno, benchproc, nbenchprocs), or None when unpinned.
    pub fn cpu_for(&self, childno: usize, benchproc: usize, nbenchprocs: usize) -> Option<usize> {
        let explicit = match (nbenchprocs, benchproc) {
            (0, _) => None,
            (_, 0) => self.main_cpu,
            _ => self.partner_cpu,
        };
        if explicit.is_some() {
            return explicit;
        }
        let ncpus = sys::online_cpus();
        self.sched
            .logical_cpu(childno, benchproc, nbenchprocs, ncpus)
            .map(|i| self.topo.nth_allowed(i))
    }

    /// Applies the placement to the calling process.
    pub fn apply(
        &self,
        childno: usize,
        benchproc: usize,
        nbenchprocs: usize,
    ) -> std::result::Result<(), String> {
        match self.cpu_for(childno, benchproc, nbenchprocs) {
            Some(cpu) => sys::set_affinity(&[cpu]).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BenchmpOpts {
    /// Microseconds per sample.
    pub enough: u64,
    pub parallel: usize,
    pub warmup_us: u64,
    pub repetitions: usize,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    /// The reported sample: median over all measured samples.
    pub median: Sample,
    /// All measured samples, slowest per iteration first.
    pub samples: Vec<Sample>,
    /// With P > 1, the one-process calibration's median (its n is the
    /// measured phase's n); None with P = 1, whose only phase calibrates.
    pub baseline: Option<Sample>,
}

/// One `__benchmp` pass as `benchmp` schedules it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhasePlan {
    /// Benchmark processes.
    pub parallel: usize,
    /// Whether intervals are filtered and the iteration count adapted
    /// (`state->parallel == 1` in benchmp_interval).
    pub calibrate: bool,
}

/// The passes `benchmp(…, parallel, …)` runs: one self-calibrating pass for
/// P = 1; a one-process calibration, then P processes at a fixed count.
pub fn phase_plan(parallel: usize) -> Vec<PhasePlan> {
    let measured = PhasePlan {
        parallel,
        calibrate: parallel == 1,
    };
    if parallel > 1 {
        vec![
            PhasePlan {
                parallel: 1,
                calibrate: true,
            },
            measured,
        ]
    } else {
        vec![measured]
    }
}

/// `benchmp()`. Returns None when not even one interval could be timed
/// (lmbench prints nothing then).
pub fn benchmp<B: LmBenchmark>(
    bench: &mut B,
    place: &Placer,
    opts: &BenchmpOpts,
) -> Result<Option<Outcome>> {
    let mut iterations = 1;
    let mut baseline = None;
    let mut samples = Vec::new();
    for plan in phase_plan(opts.parallel) {
        samples = phase(
            bench,
            place,
            opts,
            plan.parallel,
            iterations,
            plan.calibrate,
        )?;
        let med = median(&samples);
        if med.u == 0 {
            return Ok(None);
        }
        if plan.parallel < opts.parallel {
            baseline = Some(med);
            iterations = med.n;
            if opts.enough < SHORT {
                iterations = (SHORT as f64 * med.n as f64 / med.u as f64) as u64 + 1;
            }
        }
    }
    Ok(Some(Outcome {
        median: median(&samples),
        samples,
        baseline,
    }))
}

/// What benchmp_interval does after a timed interval of `result` µs that ran
/// `iterations` iterations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingStep {
    /// The interval becomes a sample.
    pub record: bool,
    /// Iterations of the next interval.
    pub next: u64,
    /// The count exploded without reaching `enough`: stop timing.
    pub give_up: bool,
}

/// benchmp_interval's `timing_interval` case. Calibrating, only intervals
/// longer than 0.95 x `enough` count, and a count that missed [0.99, 1.2] x
/// `enough` is rescaled to 1.1 x `enough` (or multiplied by 8 when the
/// interval was too short to scale from).
pub fn timing_step(calibrate: bool, result: f64, iterations: u64, enough: f64) -> TimingStep {
    let mut step = TimingStep {
        record: !calibrate || result > 0.95 * enough,
        next: iterations,
        give_up: false,
    };
    if calibrate && (result < 0.99 * enough || result > 1.2 * enough) {
        if result > 150.0 {
            step.next = (iterations as f64 / result * 1.1 * enough + 1.0) as u64;
        } else {
            step.next = iterations << 3;
            step.give_up = step.next > 1 << 27;
        }
    }
    step
}

/// lib_timing.c `insertsort`: keeps samples ordered by time per iteration,
/// biggest first; zero-time samples are dropped.
pub fn insert_sorted(samples: &mut Vec<Sample>, s: Sample) {
    if s.u == 0 {
        return;
    }
    let per = |x: &Sample| x.u as f64 / x.n as f64;
    let pos = samples
        .iter()
        .position(|x| per(&s) > per(x))
        .unwrap_or(samples.len());
    samples.insert(pos, s);
}

/// lib_timing.c `save_median`: the middle sample, or for an even count the
/// integer means of the two middle samples' u and n.
pub fn median(samples: &[Sample]) -> Sample {
    let len = samples.len();
    if len == 0 {
        return Sample { u: 0, n: 1 };
    }
    let i = len / 2;
    if len % 2 == 1 {
        samples[i]
    } else {
        Sample {
            u: (samples[i].u + samples[i - 1].u) / 2,
            n: (samples[i].n + samples[i - 1].n) / 2,
        }
    }
}

struct Control {
    response: (RawFd, RawFd),
    start: (RawFd, RawFd),
    result: (RawFd, RawFd),
    exit: (RawFd, RawFd),
}

impl Control {
    fn new() -> Result<Self> {
        Ok(Control {
            response: sys::pipe()?,
            start: sys::pipe()?,
            result: sys::pipe()?,
            exit: sys::pipe()?,
        })
    }

    fn close_parent_ends(&self) {
        for fd in [self.response.1, self.start.0, self.result.0, self.exit.0] {
            sys::close(fd);
        }
    }

    fn close_child_ends(&self) {
        for fd in [self.response.0, self.start.1, self.result.1, self.exit.1] {
            sys::close(fd);
        }
    }

    fn close_rest(&self) {
        for fd in [self.response.0, self.start.1, self.result.1, self.exit.1] {
            sys::close(fd);
        }
    }
}

/// One `__benchmp` pass: fork `parallel` benchmark processes, drive them and
/// collect their samples, merged and sorted.
fn phase<B: LmBenchmark>(
    bench: &mut B,
    place: &Placer,
    opts: &BenchmpOpts,
    parallel: usize,
    iterations: u64,
    calibrate: bool,
) -> Result<Vec<Sample>> {
    let ctl = Control::new()?;
    let me = sys::getpid();
    let mut pids: Vec<Pid> = Vec::with_capacity(parallel);
    for childno in 0..parallel {
        match sys::fork() {
            Ok(Forked::Child) => {
                sys::die_with_parent(me);
                ctl.close_child_ends();
                if let Err(e) = place.apply(childno, 0, 0) {
                    sys::write_stderr(format!("kbot-bench: {e}\n").as_bytes());
                    sys::exit_now(1);
                }
                let child = ChildRun {
                    childno,
                    response: ctl.response.1,
                    start: ctl.start.0,
                    result: ctl.result.0,
                    exit: ctl.exit.0,
                    enough: opts.enough as f64,
                    iterations,
                    repetitions: opts.repetitions,
                    calibrate,
                };
                child.run(bench, place)
            }
            Ok(Forked::Parent(pid)) => pids.push(pid),
            Err(e) => {
                kill_all(&pids);
                return Err(e);
            }
        }
    }
    ctl.close_parent_ends();
    let res = coordinate(&ctl, &pids, opts, parallel);
    if res.is_err() {
        kill_all(&pids);
    }
    for &pid in &pids {
        sys::waitpid(pid, 0);
    }
    ctl.close_rest();
    res
}

fn kill_all(pids: &[Pid]) {
    for &pid in pids {
        sys::kill(pid, libc::SIGKILL);
    }
}

/// benchmp_parent: ready, warm-up, start, done, results, exit.
fn coordinate(
    ctl: &Control,
    pids: &[Pid],
    opts: &BenchmpOpts,
    parallel: usize,
) -> Result<Vec<Sample>> {
    let mut byte = vec![0u8; parallel];
    read_watching(ctl.response.0, &mut byte, pids)?;
    if opts.warmup_us > 0 {
        sys::sleep(std::time::Duration::from_micros(opts.warmup_us));
    }
    sys::write_full(ctl.start.1, &byte).map_err(|e| sys_err("start signal", e))?;
    read_watching(ctl.response.0, &mut byte, pids)?;
    let mut merged = Vec::with_capacity(parallel * opts.repetitions);
    for _ in 0..parallel {
        sys::write_full(ctl.result.1, &[0u8]).map_err(|e| sys_err("result signal", e))?;
        let mut head = [0u8; 4];
        read_watching(ctl.response.0, &mut head, pids)?;
        let count = u32::from_le_bytes(head) as usize;
        if count > opts.repetitions {
            return Err(BenchError::Child(format!(
                "benchmark process sent {count} samples"
            )));
        }
        let mut body = vec![0u8; count * 16];
        read_watching(ctl.response.0, &mut body, pids)?;
        for chunk in body.chunks_exact(16) {
            let u = u64::from_le_bytes(chunk[..8].try_into().unwrap_or_default());
            let n = u64::from_le_bytes(chunk[8..].try_into().unwrap_or_default());
            insert_sorted(&mut merged, Sample { u, n: n.max(1) });
        }
    }
    sys::write_full(ctl.exit.1, &byte).map_err(|e| sys_err("exit signal", e))?;
    Ok(merged)
}

fn sys_err(what: &'static str, e: std::io::Error) -> BenchError {
    BenchError::Sys { what, source: e }
}

/// Reads exactly `buf.len()` bytes from the shared response pipe, checking
/// once a second that no benchmark process has died (benchmp's SIGCHLD check).
fn read_watching(fd: RawFd, buf: &mut [u8], pids: &[Pid]) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        if !sys::poll_readable(fd, 1000)? {
            for &pid in pids {
                if let Some((_, status)) = sys::waitpid(pid, libc::WNOHANG) {
                    return Err(BenchError::Child(format!(
                        "benchmark process {pid} ended early (wait status {status:#x})"
                    )));
                }
            }
            continue;
        }
        let n = sys::read_raw(fd, &mut buf[done..]);
        if n < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            return Err(BenchError::Child(
                "benchmark processes closed the control pipe".into(),
            ));
        }
        done += n as usize;
    }
    Ok(())
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum State {
    Warmup,
    Timing,
    Cooldown,
}

/// The state of one benchmark process (benchmp_child / benchmp_interval).
struct ChildRun {
    childno: usize,
    response: RawFd,
    start: RawFd,
    result: RawFd,
    exit: RawFd,
    enough: f64,
    iterations: u64,
    repetitions: usize,
    calibrate: bool,
}

impl ChildRun {
    fn run<B: LmBenchmark>(mut self, bench: &mut B, place: &Placer) -> ! {
        if let Err(e) = bench.initialize(self.childno, place) {
            sys::write_stderr(format!("kbot-bench: {e}\n").as_bytes());
            sys::exit_now(1);
        }
        let batch = 1u64;
        let mut state = State::Warmup;
        let mut need_warmup = true;
        let mut samples: Vec<Sample> = Vec::with_capacity(self.repetitions);
        let mut recorded = 0usize;
        let mut start_us = 0u64;
        loop {
            let mut iters: u64;
            let mut result = 0.0f64;
            if !need_warmup {
                result = (sys::now_us() - start_us) as f64;
            }
            match state {
                State::Warmup => {
                    iters = batch;
                    if sys::poll_readable(self.start, 0).unwrap_or(false) {
                        state = State::Timing;
                        let _ = sys::read_full(self.start, &mut [0u8]);
                        iters = self.iterations;
                    }
                    if need_warmup {
                        need_warmup = false;
                        self.signal();
                    }
                }
                State::Timing => {
                    let step = timing_step(self.calibrate, result, self.iterations, self.enough);
                    if step.record {
                        insert_sorted(
                            &mut samples,
                            Sample {
                                u: result as u64,
                                n: self.iterations,
                            },
                        );
                        recorded += 1;
                        if recorded >= self.repetitions {
                            state = State::Cooldown;
                        }
                    }
                    if step.give_up {
                        state = State::Cooldown;
                    }
                    iters = step.next;
                    self.iterations = iters;
                    if state == State::Cooldown {
                        self.signal();
                        iters = batch;
                    }
                }
                State::Cooldown => {
                    iters = batch;
                    if sys::poll_readable(self.result, 0).unwrap_or(false) {
                        self.report(bench, &samples);
                    }
                }
            }
            start_us = sys::now_us();
            if let Err(e) = bench.run(iters) {
                bench.cleanup();
                sys::write_stderr(format!("kbot-bench: {e}\n").as_bytes());
                sys::exit_now(1);
            }
        }
    }

    fn signal(&self) {
        if sys::write_full(self.response, &[0u8]).is_err() {
            sys::exit_now(1);
        }
    }

    /// Sends the samples, stops the partner and waits for the exit byte.
    fn report<B: LmBenchmark>(&self, bench: &mut B, samples: &[Sample]) -> ! {
        let _ = sys::read_full(self.result, &mut [0u8]);
        let mut msg = Vec::with_capacity(4 + samples.len() * 16);
        msg.extend_from_slice(&(samples.len() as u32).to_le_bytes());
        for s in samples {
            msg.extend_from_slice(&s.u.to_le_bytes());
            msg.extend_from_slice(&s.n.to_le_bytes());
        }
        let sent = sys::write_full(self.response, &msg);
        bench.cleanup();
        if sent.is_err() {
            sys::exit_now(1);
        }
        let _ = sys::read_full(self.exit, &mut [0u8]);
        sys::exit_now(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_sort_slowest_first_and_median_matches_save_median() {
        let mut v = Vec::new();
        for (u, n) in [(100, 10), (300, 10), (200, 10), (0, 10)] {
            insert_sorted(&mut v, Sample { u, n });
        }
        assert_eq!(
            v.iter().map(|s| s.u).collect::<Vec<_>>(),
            vec![300, 200, 100]
        );
        assert_eq!(median(&v), Sample { u: 200, n: 10 });
        insert_sorted(&mut v, Sample { u: 50, n: 11 });
        // even count: integer mean of the two middle samples
        assert_eq!(median(&v), Sample { u: 150, n: 10 });
    }

    #[test]
    fn one_process_runs_one_self_calibrating_phase() {
        // A second, unfiltered phase at P = 1 counted fast intervals that
        // lmbench drops, and read higher than bw_pipe under load.
        assert_eq!(
            phase_plan(1),
            vec![PhasePlan {
                parallel: 1,
                calibrate: true
            }]
        );
        assert_eq!(
            phase_plan(3),
            vec![
                PhasePlan {
                    parallel: 1,
                    calibrate: true
                },
                PhasePlan {
                    parallel: 3,
                    calibrate: false
                }
            ]
        );
    }

    #[test]
    fn calibrating_drops_short_intervals_and_rescales() {
        let enough = 2_000_000.0;
        // 0.9 x enough: dropped and rescaled to 1.1 x enough.
        let s = timing_step(true, 1_800_000.0, 1000, enough);
        assert!(!s.record);
        assert_eq!(s.next, (1000.0 / 1_800_000.0 * 1.1 * enough + 1.0) as u64);
        // 1.1 x enough: kept, count unchanged.
        let s = timing_step(true, 2_200_000.0, 1000, enough);
        assert!(s.record);
        assert_eq!(s.next, 1000);
        // 1.3 x enough: kept (it is slow, not short) but rescaled.
        let s = timing_step(true, 2_600_000.0, 1000, enough);
        assert!(s.record);
        assert!(s.next < 1000);
        // Too short to scale from: x8, until the count explodes.
        assert_eq!(timing_step(true, 100.0, 1, enough).next, 8);
        assert!(timing_step(true, 100.0, 1 << 25, enough).give_up);
        // The fixed-count phase of P > 1 keeps every interval as it is.
        let s = timing_step(false, 1_000.0, 1000, enough);
        assert_eq!(
            s,
            TimingStep {
                record: true,
                next: 1000,
                give_up: false
            }
        );
    }
}
