//! Thin wrappers over the system calls the workloads use.
//!
//! The benchmarks copy C programs that fork, pipe and pin, so the wrappers stay
//! close to the calls: raw fds, explicit closes, `_exit` in children. Every
//! `fork` here happens while the process is still single-threaded (no workload
//! starts a thread before its last fork), so a child may use the allocator.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::error::{BenchError, Result};

pub type Pid = libc::pid_t;

/// `pipe(2)`: returns (read end, write end).
pub fn pipe() -> Result<(RawFd, RawFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(BenchError::last_os("pipe"));
    }
    Ok((fds[0], fds[1]))
}

/// `pipe2(2)` with flags (O_DIRECT for packet mode).
pub fn pipe2(flags: libc::c_int) -> Result<(RawFd, RawFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(BenchError::last_os("pipe2"));
    }
    Ok((fds[0], fds[1]))
}

/// `socketpair(AF_UNIX, SOCK_STREAM)`.
pub fn socketpair() -> Result<(RawFd, RawFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) } != 0 {
        return Err(BenchError::last_os("socketpair"));
    }
    Ok((fds[0], fds[1]))
}

pub fn close(fd: RawFd) {
    // SAFETY: closing an fd we own; errors are irrelevant here.
    unsafe {
        libc::close(fd);
    }
}

/// Where `fork` returned.
pub enum Forked {
    Child,
    Parent(Pid),
}

/// `fork(2)`. Callers fork only while single-threaded and end the child with
/// [`exit_now`], never by returning into the parent's code.
pub fn fork() -> Result<Forked> {
    // SAFETY: the process is single-threaded at every call site (see module doc).
    match unsafe { libc::fork() } {
        -1 => Err(BenchError::last_os("fork")),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// `_exit(2)`: ends a forked child without running the parent's destructors or
/// flushing its stdio buffers twice.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is always safe to call.
    unsafe { libc::_exit(code) }
}

/// Writes a message to stderr with one `write(2)`, usable in children and
/// signal handlers.
pub fn write_stderr(msg: &[u8]) {
    // SAFETY: msg is a valid slice.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
    }
}

/// Reports a fatal error from a forked child and exits it.
pub fn child_fail(what: &str) -> ! {
    let err = io::Error::last_os_error();
    write_stderr(format!("kbot-bench: {what}: {err}\n").as_bytes());
    exit_now(1)
}

/// One `read(2)`; the raw return value (negative on error).
#[inline]
pub fn read_raw(fd: RawFd, buf: &mut [u8]) -> isize {
    // SAFETY: buf is valid for buf.len() bytes.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }
}

/// One `write(2)`; the raw return value (negative on error).
#[inline]
pub fn write_raw(fd: RawFd, buf: &[u8]) -> isize {
    // SAFETY: buf is valid for buf.len() bytes.
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) }
}

pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Reads exactly `buf.len()` bytes, retrying short reads and EINTR.
pub fn read_full(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = read_raw(fd, &mut buf[done..]);
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        done += n as usize;
    }
    Ok(())
}

/// Writes all of `buf`, retrying short writes and EINTR.
pub fn write_full(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = write_raw(fd, &buf[done..]);
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        done += n as usize;
    }
    Ok(())
}

/// Waits up to `timeout_ms` for `fd` to become readable (or hang up).
pub fn poll_readable(fd: RawFd, timeout_ms: i32) -> Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: pfd is a valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return Err(BenchError::last_os("poll"));
        }
        return Ok(r > 0);
    }
}

/// Blocks in `poll` until `fd` is readable, as the upstream start gates do.
pub fn poll_forever(fd: RawFd) {
    let _ = poll_readable(fd, -1);
}

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is valid for size_of::<cpu_set_t>() bytes.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i < CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Pins the calling thread (and the children it forks later) to `cpus`.
pub fn set_affinity(cpus: &[usize]) -> Result<()> {
    // SAFETY: see allowed_cpus.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(BenchError::usage(format!("CPU {c} out of range")));
        }
        // SAFETY: c < CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(BenchError::last_os("sched_setaffinity"));
    }
    Ok(())
}

extern "C" {
    // In glibc (libc.a too) but not in the libc crate for linux-gnu.
    fn pthread_setcanceltype(kind: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

/// glibc's PTHREAD_CANCEL_ASYNCHRONOUS (and 0 = PTHREAD_CANCEL_DEFERRED).
pub const PTHREAD_CANCEL_ASYNCHRONOUS: libc::c_int = 1;

/// `pthread_setcanceltype(kind, &old)`: returns the previous type. glibc
/// 2.36 wraps every cancellation-point syscall (read, write, poll) of a
/// multi-threaded process in two compare-and-swaps that switch the thread to
/// asynchronous cancellation and back, unless it already is asynchronous.
pub fn set_cancel_type(kind: libc::c_int) -> Result<libc::c_int> {
    let mut old = 0;
    // SAFETY: old is a valid int; kbot-bench never cancels a thread, so the
    // type only selects glibc's wrapper path.
    let r = unsafe { pthread_setcanceltype(kind, &mut old) };
    if r != 0 {
        return Err(BenchError::Sys {
            what: "pthread_setcanceltype",
            source: io::Error::from_raw_os_error(r),
        });
    }
    Ok(old)
}

/// The number of online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)`).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n < 1 {
        4096
    } else {
        n as usize
    }
}

pub fn getrusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

pub fn kill(pid: Pid, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// `waitpid(pid, &status, flags)`: Some((pid, status)) or None when nothing
/// (more) can be waited for.
pub fn waitpid(pid: Pid, flags: libc::c_int) -> Option<(Pid, libc::c_int)> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid int.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            return None;
        }
        return Some((r, status));
    }
}

/// Reaps every remaining descendant (children and, thanks to the subreaper
/// flag, orphaned grandchildren) so their rusage lands in RUSAGE_CHILDREN.
pub fn reap_all() {
    while waitpid(-1, 0).is_some() {}
}

/// Makes orphaned grandchildren re-parent to this process instead of init, so
/// that their CPU time is counted in the process tree's rusage.
pub fn set_child_subreaper() {
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// In a forked child: die with SIGKILL when the parent dies, so a killed
/// kbot-bench leaves no spinning benchmark processes behind.
pub fn die_with_parent(parent: Pid) {
    // SAFETY: prctl with integer arguments; getppid has no preconditions.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
}

pub fn getpid() -> Pid {
    // SAFETY: no preconditions.
    unsafe { libc::getpid() }
}

/// Raises the open-file soft limit to the hard limit (lmbench's `morefds`):
/// hackbench with many groups needs thousands of fds.
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is valid.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Microseconds on the monotonic clock (the C tools use gettimeofday; both
/// have microsecond resolution here, and this one never jumps).
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// Seconds since the epoch on the wall clock.
pub fn wall_secs() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec
}

pub fn sleep(d: Duration) {
    std::thread::sleep(d);
}

pub fn sync() {
    // SAFETY: no preconditions.
    unsafe { libc::sync() };
}

/// A MAP_SHARED anonymous mapping that survives `fork`: the per-task counters
/// of will-it-scale live here, one per 256-byte slot to avoid false sharing.
pub struct SharedCounters {
    ptr: *mut u8,
    len: usize,
    slots: usize,
}

/// Distance between two counters (will-it-scale's CACHELINE_SIZE).
pub const COUNTER_STRIDE: usize = 256;

impl SharedCounters {
    pub fn new(slots: usize) -> Result<Self> {
        let page = page_size();
        let len = (slots.max(1) * COUNTER_STRIDE).div_ceil(page) * page;
        // SAFETY: anonymous shared mapping, no fd; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(BenchError::last_os("mmap"));
        }
        Ok(SharedCounters {
            ptr: ptr.cast(),
            len,
            slots,
        })
    }

    /// The counter of slot `i`.
    pub fn get(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.slots, "counter slot out of range");
        // SAFETY: the slot lies inside the mapping, is 8-aligned (page-aligned
        // base, 256-byte stride) and is only accessed atomically.
        unsafe { &*(self.ptr.add(i * COUNTER_STRIDE) as *const AtomicU64) }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Word `w` of slot `i` (a slot holds COUNTER_STRIDE / 8 words).
    pub fn word(&self, i: usize, w: usize) -> &AtomicU64 {
        assert!(w < COUNTER_STRIDE / 8, "word out of range");
        assert!(i < self.slots, "counter slot out of range");
        // SAFETY: as in `get`, with the word still inside the slot.
        unsafe { &*(self.ptr.add(i * COUNTER_STRIDE + w * 8) as *const AtomicU64) }
    }

    /// Stores the calling thread's allowed CPUs in slot `i`: a bitmap of
    /// CPU_SETSIZE bits in words 0..16, word 16 set once it is complete.
    /// Tasks record where they actually run, so the harness can check it.
    pub fn record_cpus(&self, i: usize) {
        let mut bits = [0u64; 16];
        for c in allowed_cpus() {
            bits[c / 64] |= 1 << (c % 64);
        }
        for (w, b) in bits.iter().enumerate() {
            self.word(i, w)
                .store(*b, std::sync::atomic::Ordering::Relaxed);
        }
        self.word(i, 16)
            .store(1, std::sync::atomic::Ordering::Release);
    }

    /// The CPUs recorded in slot `i`, or None if nothing was recorded yet.
    pub fn recorded_cpus(&self, i: usize) -> Option<Vec<usize>> {
        if self.word(i, 16).load(std::sync::atomic::Ordering::Acquire) != 1 {
            return None;
        }
        let mut cpus = Vec::new();
        for w in 0..16 {
            let b = self.word(i, w).load(std::sync::atomic::Ordering::Relaxed);
            cpus.extend((0..64).filter(|k| b & (1 << k) != 0).map(|k| w * 64 + k));
        }
        Some(cpus)
    }
}

// SAFETY: the mapping holds only atomics.
unsafe impl Sync for SharedCounters {}
// SAFETY: the mapping is not tied to a thread.
unsafe impl Send for SharedCounters {}

impl Drop for SharedCounters {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from mmap.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// A buffer whose usable part starts `offset` bytes past a page boundary, like
/// lmbench's `valloc(size) + offset`; pre-faulted one byte per page (`touch`).
pub struct AlignedBuf {
    mem: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize, offset: usize) -> Self {
        let page = page_size();
        let mut mem = vec![0u8; len + offset + page];
        let misalign = mem.as_ptr() as usize % page;
        let start = if misalign == 0 { 0 } else { page - misalign } + offset;
        let mut i = 0;
        while i < mem.len() {
            mem[i] = 1;
            i += page;
        }
        AlignedBuf { mem, start, len }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.mem[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.mem[self.start..self.start + self.len]
    }
}
