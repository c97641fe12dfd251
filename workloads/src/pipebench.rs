//! pipebench 0.40 (ThomasHabets/pipebench pipebench.c): copy stdin to stdout
//! in `-b`-byte chunks and meter it.
//!
//! Each chunk is a stdio `fread` (read until the buffer is full or EOF) and an
//! `fwrite`; after each chunk a progress line goes to stderr (or the status
//! file) and, when the wall-clock second changed, the per-second rate is
//! updated. The summary rate is total bytes over the time from start to the
//! last chunk, computed in single precision as pipebench does. Units are base
//! 1024 unless `-I`.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::RawFd;

use crate::calendar::Tm;
use crate::error::{BenchError, Result};
use crate::placement::PlacementReport;
use crate::report::{Output, Report};
use crate::sys::{self, Forked};

#[derive(Debug, Clone)]
pub struct PipebenchOpts {
    pub bufsize: usize,
    pub quiet: bool,
    pub summary: bool,
    pub fancy: bool,
    pub errout: bool,
    pub unit: u64,
    pub dounit: bool,
    /// (path, append)
    pub status_file: Option<(String, bool)>,
    /// Internal feeder: total bytes and block size.
    pub feed: Option<(u64, usize)>,
}

/// pipebench's `unitify`: two decimals and a k/M/G/… prefix, with its
/// truncating integer scaling.
pub fn unitify(input: u64, nunit: u64, dounit: bool) -> String {
    const UNITS: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    if !dounit {
        return format!("{:7.0} ", input as f64);
    }
    let mut e = 0usize;
    let mut n = input;
    if n > nunit * nunit {
        e += 1;
        n /= nunit;
    }
    n = n.wrapping_mul(100);
    while n > 100 * nunit {
        e += 1;
        n /= nunit;
    }
    while e > 0 && e >= UNITS.len() {
        e -= 1;
        n = n.wrapping_mul(nunit);
    }
    format!("{:7.2} {}", n as f64 / 100.0, UNITS[e])
}

/// pipebench's `time_diff`: "00h00m01.23s".
pub fn time_diff(start_us: i64, end_us: i64) -> String {
    let d = (end_us - start_us).max(0);
    let (sec, usec) = (d / 1_000_000, d % 1_000_000);
    format!(
        "{:02}h{:02}m{:02}.{:02}s",
        sec / 3600,
        sec / 60 % 60,
        sec % 60,
        usec / 10_000
    )
}

fn wall_us() -> i64 {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    // SAFETY: tv is valid.
    unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) };
    tv.tv_sec * 1_000_000 + tv.tv_usec
}

/// Reads until `buf` is full or EOF (stdio `fread`); returns (bytes, eof).
fn fill(fd: RawFd, buf: &mut [u8]) -> std::io::Result<(usize, bool)> {
    let mut done = 0;
    while done < buf.len() {
        let n = sys::read_raw(fd, &mut buf[done..]);
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Ok((done, true));
        }
        done += n as usize;
    }
    Ok((done, false))
}

/// Where progress and summary lines go.
enum Status {
    Stderr,
    File(std::fs::File),
}

impl Status {
    fn write(&mut self, out: &mut Output, text: &str) -> Result<()> {
        match self {
            Status::Stderr => {
                out.err(text);
                Ok(())
            }
            Status::File(f) => f.write_all(text.as_bytes()).map_err(|e| BenchError::Sys {
                what: "pipebench: status file",
                source: e,
            }),
        }
    }

    fn eol(&self) -> char {
        match self {
            Status::Stderr => '\r',
            Status::File(_) => '\n',
        }
    }
}

/// The kbot extension: a child writing `total` zero bytes in `bs` blocks into
/// a pipe, like `dd if=/dev/zero bs=… count=…`. Returns the read end.
fn start_feeder(total: u64, bs: usize) -> Result<RawFd> {
    let (r, w) = sys::pipe()?;
    let me = sys::getpid();
    match sys::fork()? {
        Forked::Child => {
            sys::die_with_parent(me);
            sys::close(r);
            let block = vec![0u8; bs];
            let mut left = total;
            while left > 0 {
                let n = left.min(bs as u64) as usize;
                if sys::write_full(w, &block[..n]).is_err() {
                    sys::exit_now(1);
                }
                left -= n as u64;
            }
            sys::exit_now(0)
        }
        Forked::Parent(_) => {
            sys::close(w);
            Ok(r)
        }
    }
}

fn open_devnull() -> Result<RawFd> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY) };
    if fd < 0 {
        return Err(BenchError::last_os("open /dev/null"));
    }
    Ok(fd)
}

pub fn run(opts: &PipebenchOpts, out: &mut Output, report: &mut Report) -> Result<()> {
    let mut status = match &opts.status_file {
        None => Status::Stderr,
        Some((path, append)) => {
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .append(*append)
                .truncate(!*append)
                .open(path)
                .map_err(|e| BenchError::Sys {
                    what: "pipebench: fopen(status file)",
                    source: e,
                })?;
            Status::File(f)
        }
    };
    let (in_fd, out_fd) = match opts.feed {
        Some((total, bs)) => (start_feeder(total, bs)?, open_devnull()?),
        None => (0, 1),
    };
    let mut buf = vec![0u8; opts.bufsize];
    let (mut datalen, mut last_datalen, mut speed) = (0u64, 0u64, 0u64);
    let start = wall_us();
    let mut tv = start;
    let mut tv2;
    let eol = status.eol();
    loop {
        let (n, eof) = match fill(in_fd, &mut buf) {
            Ok(r) => r,
            Err(e) if opts.errout => {
                return Err(BenchError::Sys {
                    what: "pipebench: fread()",
                    source: e,
                })
            }
            Err(_) => (0, true),
        };
        datalen += n as u64;
        sys::write_full(out_fd, &buf[..n]).map_err(|e| BenchError::Sys {
            what: "pipebench: fwrite()",
            source: e,
        })?;
        tv2 = wall_us();
        if opts.fancy && !opts.quiet {
            let line = format!(
                "{}: {}B {}B/second ({}){eol}",
                time_diff(start, tv2),
                unitify(datalen, opts.unit, opts.dounit),
                unitify(speed, opts.unit, opts.dounit),
                Tm::from_epoch(tv2 / 1_000_000).ctime()
            );
            status.write(out, &line)?;
        }
        if tv / 1_000_000 != tv2 / 1_000_000 {
            speed = datalen - last_datalen;
            last_datalen = datalen;
            tv = wall_us();
            if !opts.fancy {
                status.write(out, &format!("{speed}\n"))?;
            }
        }
        if eof {
            break;
        }
    }
    if in_fd != 0 {
        sys::close(in_fd);
        sys::close(out_fd);
    }
    // pipebench divides a u64 by a float: single precision.
    let secs = ((tv2 - start) as f64 / 1e6) as f32;
    let rate = if secs != 0.0 {
        (datalen as f32 / secs) as u64
    } else {
        0
    };
    if opts.summary {
        let text = format!(
            "{}{eol}Summary:\nPiped {}B in {}: {}B/second\n",
            " ".repeat(79),
            unitify(datalen, opts.unit, opts.dounit),
            time_diff(start, tv2),
            unitify(rate, opts.unit, opts.dounit)
        );
        status.write(out, &text)?;
    }
    let exact_secs = (tv2 - start) as f64 / 1e6;
    let unit2 = (opts.unit * opts.unit) as f64;
    let mbs = if exact_secs > 0.0 {
        datalen as f64 / exact_secs / unit2
    } else {
        0.0
    };
    report.metric("MB/sec", mbs);
    report.metric("bytes", datalen as f64);
    report.metric("elapsed_sec", exact_secs);
    report.param("-b", opts.bufsize);
    report.param("unit", opts.unit);
    if let Some((total, bs)) = opts.feed {
        report.param("--feed", total);
        report.param("--feed-bs", bs);
    }
    report.placement = PlacementReport::new("unpinned (pipebench does not pin)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unitify_matches_pipebench() {
        assert_eq!(unitify(0, 1024, true), "   0.00 ");
        assert_eq!(unitify(1024, 1024, true), "1024.00 ");
        // 14.91 GiB as in the seed thread's output
        assert_eq!(unitify(16_013_942_784, 1024, true), "  14.91 G");
        assert_eq!(unitify(170_000_000, 1024, true), " 162.12 M");
        assert_eq!(unitify(1_000_000, 1000, true), "1000.00 k");
    }

    #[test]
    fn time_diff_format() {
        assert_eq!(time_diff(0, 94_200_000), "00h01m34.20s");
    }
}
