//! lmbench3 `bw_pipe` and `lat_pipe` (src/bw_pipe.c, src/lat_pipe.c).

use std::os::fd::RawFd;

use crate::error::{BenchError, Result};
use crate::lmbench::{benchmp, BenchmpOpts, LmBenchmark, Placer, MEDIUM, SHORT};
use crate::placement::PlacementReport;
use crate::report::{Output, Report};
use crate::sys::{self, AlignedBuf, Forked, Pid};

/// bw_pipe's options after parsing.
#[derive(Debug, Clone)]
pub struct BwPipeOpts {
    pub xfer: u64,
    pub bytes: u64,
    pub parallel: usize,
    pub warmup_us: u64,
    pub repetitions: usize,
    pub enough: Option<u64>,
}

/// bw_pipe's total-bytes rounding, quirk included: when M is not a multiple
/// of m, lmbench adds `M - M % m` (not `m - M % m`), nearly doubling M.
pub fn round_bytes(xfer: u64, bytes: u64) -> u64 {
    if bytes < xfer {
        xfer
    } else if !bytes.is_multiple_of(xfer) {
        bytes + (bytes - bytes % xfer)
    } else {
        bytes
    }
}

/// Where bw_pipe's reader puts the data: 128 bytes past a page boundary
/// (`state->buf += 128; /* destroy page alignment */`), so the kernel copies
/// to a misaligned destination.
pub const READER_OFFSET: usize = 128;

/// The reader's buffer: `xfer` bytes, pre-faulted, at [`READER_OFFSET`].
pub fn reader_buf(xfer: usize) -> AlignedBuf {
    AlignedBuf::new(xfer, READER_OFFSET)
}

/// The writer's buffer: `valloc(xfer)`, page-aligned and pre-faulted.
pub fn writer_buf(xfer: usize) -> AlignedBuf {
    AlignedBuf::new(xfer, 0)
}

/// What the writer passes to `write` after `done` bytes of a logical write:
/// the rest of the count, but always from the start of the buffer
/// (`write(writefd, buf, xfer - done)`).
pub fn writer_chunk(buf: &[u8], done: usize) -> &[u8] {
    &buf[..buf.len() - done]
}

/// The benchmark process reads; its forked partner writes forever.
struct BwPipe {
    xfer: usize,
    bytes: u64,
    read_fd: RawFd,
    writer: Option<Pid>,
    buf: Option<AlignedBuf>,
}

impl LmBenchmark for BwPipe {
    fn initialize(&mut self, childno: usize, place: &Placer) -> std::result::Result<(), String> {
        let (r, w) = sys::pipe().map_err(|e| e.to_string())?;
        place.apply(childno, 0, 1)?;
        let me = sys::getpid();
        match sys::fork().map_err(|e| e.to_string())? {
            Forked::Child => {
                sys::die_with_parent(me);
                sys::close(r);
                if let Err(e) = place.apply(childno, 1, 1) {
                    sys::write_stderr(format!("kbot-bench: {e}\n").as_bytes());
                    sys::exit_now(1);
                }
                let buf = writer_buf(self.xfer);
                write_forever(w, buf.as_slice())
            }
            Forked::Parent(pid) => {
                sys::close(w);
                self.read_fd = r;
                self.writer = Some(pid);
                self.buf = Some(reader_buf(self.xfer));
                Ok(())
            }
        }
    }

    fn run(&mut self, iterations: u64) -> std::result::Result<(), String> {
        let buf = match self.buf.as_mut() {
            Some(b) => b.as_mut_slice(),
            None => return Err("bw_pipe: reader not initialized".into()),
        };
        for _ in 0..iterations {
            let mut done = 0u64;
            while done < self.bytes {
                let n = sys::read_raw(self.read_fd, buf);
                if n < 0 {
                    return Err(format!(
                        "bw_pipe: reader: error in read: {}",
                        std::io::Error::last_os_error()
                    ));
                }
                if n == 0 {
                    return Err("bw_pipe: reader: the writer went away".into());
                }
                done += n as u64;
            }
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        sys::close(self.read_fd);
        if let Some(pid) = self.writer.take() {
            sys::kill(pid, libc::SIGKILL);
            sys::waitpid(pid, 0);
        }
    }
}

/// bw_pipe's writer: `xfer` bytes per logical write, short writes retried
/// from the start of the buffer, until the pipe breaks.
fn write_forever(fd: RawFd, buf: &[u8]) -> ! {
    let xfer = buf.len();
    loop {
        let mut done = 0;
        while done < xfer {
            let n = sys::write_raw(fd, writer_chunk(buf, done));
            if n < 0 {
                sys::exit_now(0);
            }
            done += n as usize;
        }
    }
}

fn placement_report(place: &Placer, parallel: usize, roles: [&str; 2]) -> PlacementReport {
    let mut mode = place.sched.name();
    if place.main_cpu.is_some() || place.partner_cpu.is_some() {
        mode = format!("{mode} + explicit writer/reader CPUs");
    }
    let mut p = PlacementReport::new(format!("LMBENCH_SCHED={mode}"));
    for child in 0..parallel {
        p.add(
            format!("{} {child}", roles[0]),
            place.cpu_for(child, 0, 1).map(|c| vec![c]),
        );
        p.add(
            format!("{} {child}", roles[1]),
            place.cpu_for(child, 1, 1).map(|c| vec![c]),
        );
    }
    p
}

pub fn run_bw_pipe(
    opts: &BwPipeOpts,
    place: &Placer,
    out: &mut Output,
    report: &mut Report,
) -> Result<()> {
    if opts.xfer == 0 {
        return Err(BenchError::usage("bw_pipe: -m must be at least 1 byte"));
    }
    let xfer =
        usize::try_from(opts.xfer).map_err(|_| BenchError::usage("bw_pipe: -m too large"))?;
    let bytes = round_bytes(opts.xfer, opts.bytes);
    let mut bench = BwPipe {
        xfer,
        bytes,
        read_fd: -1,
        writer: None,
        buf: None,
    };
    let bopts = BenchmpOpts {
        enough: opts.enough.unwrap_or(MEDIUM),
        parallel: opts.parallel,
        warmup_us: opts.warmup_us,
        repetitions: opts.repetitions,
    };
    report.placement = placement_report(place, opts.parallel, ["reader", "writer"]);
    report.param("-m", opts.xfer);
    report.param("-M", bytes);
    report.param("-P", opts.parallel);
    report.param("-W", opts.warmup_us);
    report.param("-N", opts.repetitions);
    report.param("enough_us", bopts.enough);
    let Some(outcome) = benchmp(&mut bench, place, &bopts)? else {
        return Err(BenchError::NoResult(
            "bw_pipe: no interval could be timed".into(),
        ));
    };
    let m = outcome.median;
    let total = m.n as f64 * opts.parallel as f64 * bytes as f64;
    let mb_per_sec = total / (m.u as f64 / 1e6) / 1e6;
    out.err(&format!("Pipe bandwidth: {mb_per_sec:.2} MB/sec\n"));
    report.metric("PIPE.bandwidth.MB/sec", mb_per_sec);
    report.param("iterations_per_sample", m.n);
    report.param("median_sample_us", m.u);
    report.param("samples", outcome.samples.len());
    Ok(())
}

/// lat_pipe: the benchmark process writes one byte and waits for the echo.
struct LatPipe {
    to_partner: RawFd,
    from_partner: RawFd,
    partner: Option<Pid>,
}

impl LmBenchmark for LatPipe {
    fn initialize(&mut self, childno: usize, place: &Placer) -> std::result::Result<(), String> {
        let (p1r, p1w) = sys::pipe().map_err(|e| e.to_string())?;
        let (p2r, p2w) = sys::pipe().map_err(|e| e.to_string())?;
        place.apply(childno, 0, 1)?;
        let me = sys::getpid();
        match sys::fork().map_err(|e| e.to_string())? {
            Forked::Child => {
                sys::die_with_parent(me);
                if let Err(e) = place.apply(childno, 1, 1) {
                    sys::write_stderr(format!("kbot-bench: {e}\n").as_bytes());
                    sys::exit_now(1);
                }
                sys::close(p1w);
                sys::close(p2r);
                echo_forever(p1r, p2w)
            }
            Forked::Parent(pid) => {
                sys::close(p1r);
                sys::close(p2w);
                self.to_partner = p1w;
                self.from_partner = p2r;
                self.partner = Some(pid);
                // One round trip to make sure both processes are running.
                self.run(1).map_err(|e| format!("(i) {e}"))
            }
        }
    }

    fn run(&mut self, iterations: u64) -> std::result::Result<(), String> {
        let mut c = [0u8; 1];
        for _ in 0..iterations {
            if sys::write_raw(self.to_partner, &c) != 1
                || sys::read_raw(self.from_partner, &mut c) != 1
            {
                return Err(format!(
                    "read/write on pipe: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        if let Some(pid) = self.partner.take() {
            sys::kill(pid, libc::SIGKILL);
            sys::waitpid(pid, 0);
        }
    }
}

fn echo_forever(r: RawFd, w: RawFd) -> ! {
    let mut c = [0u8; 1];
    loop {
        if sys::read_raw(r, &mut c) != 1 || sys::write_raw(w, &c) != 1 {
            sys::exit_now(0);
        }
    }
}

pub struct LatPipeOpts {
    pub parallel: usize,
    pub warmup_us: u64,
    pub repetitions: usize,
    pub enough: Option<u64>,
}

pub fn run_lat_pipe(
    opts: &LatPipeOpts,
    place: &Placer,
    out: &mut Output,
    report: &mut Report,
) -> Result<()> {
    let mut bench = LatPipe {
        to_partner: -1,
        from_partner: -1,
        partner: None,
    };
    let bopts = BenchmpOpts {
        enough: opts.enough.unwrap_or(SHORT),
        parallel: opts.parallel,
        warmup_us: opts.warmup_us,
        repetitions: opts.repetitions,
    };
    report.placement = placement_report(place, opts.parallel, ["timer", "echo"]);
    report.param("-P", opts.parallel);
    report.param("-W", opts.warmup_us);
    report.param("-N", opts.repetitions);
    report.param("enough_us", bopts.enough);
    let Some(outcome) = benchmp(&mut bench, place, &bopts)? else {
        return Err(BenchError::NoResult(
            "lat_pipe: no interval could be timed".into(),
        ));
    };
    let m = outcome.median;
    let usecs = m.u as f64 / m.n as f64;
    out.err(&format!("Pipe latency: {usecs:.4} microseconds\n"));
    report.metric("PIPE.latency.us", usecs);
    report.param("iterations_per_sample", m.n);
    report.param("median_sample_us", m.u);
    report.param("samples", outcome.samples.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_placed_as_in_bw_pipe_c() {
        let page = sys::page_size();
        let xfer = 64 * 1024;
        let mut r = reader_buf(xfer);
        let rs = r.as_mut_slice();
        assert_eq!(rs.len(), xfer);
        assert_eq!(rs.as_ptr() as usize % page, 128);
        let w = writer_buf(xfer);
        assert_eq!(w.as_slice().len(), xfer);
        assert_eq!(w.as_slice().as_ptr() as usize % page, 0);
        // A short write is retried with the remaining count from offset 0.
        let chunk = writer_chunk(w.as_slice(), 4096);
        assert_eq!(chunk.as_ptr(), w.as_slice().as_ptr());
        assert_eq!(chunk.len(), xfer - 4096);
    }

    #[test]
    fn round_up_quirk_is_copied() {
        assert_eq!(round_bytes(3000, 10000), 19000);
        assert_eq!(round_bytes(65536, 10 * 1024 * 1024), 10 * 1024 * 1024);
        assert_eq!(round_bytes(65536, 100), 65536);
    }
}
