//! Children that die with the agent, even when it is SIGKILLed.
//!
//! A QEMU guest or a kernel build left running after the agent dies keeps
//! the machine busy and measures beside the next agent's runs. Two kernel
//! mechanisms make the agent's death end its children:
//!
//! - the direct child asks for `PR_SET_PDEATHSIG(SIGKILL)` before `exec`.
//!   Linux sends that signal when the *thread* that forked the child exits,
//!   not the process, so every child is forked by one spawner thread that
//!   lives as long as the agent (tokio's blocking threads come and go);
//! - the child leads its own process group (make's tree: sub-makes,
//!   compilers), and a small guard process, forked by the same thread and
//!   itself signalled on the agent's death, SIGKILLs that whole group.
//!
//! Dropping a [`TiedChild`] also ends what is left of its group: a job's
//! processes do not outlive the job.

use std::io;
use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::OnceLock;

use nix::sys::prctl;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, getppid, ForkResult, Pid};

use crate::error::{AgentError, Result};

/// A running child of the agent, the leader of its own process group, with
/// the guard that ends the group if the agent dies.
#[derive(Debug)]
pub struct TiedChild {
    child: Child,
    /// The child's process group: its own pid.
    group: Pid,
    guard: Pid,
}

impl TiedChild {
    pub fn group(&self) -> Pid {
        self.group
    }
}

impl Deref for TiedChild {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for TiedChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for TiedChild {
    fn drop(&mut self) {
        // Stray members (a daemonised helper, a compiler whose make was
        // killed) go with the job; the group may well be empty already.
        let _ = killpg(self.group, Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = kill(self.guard, Signal::SIGKILL);
        let _ = waitpid(self.guard, None);
    }
}

/// What the spawner thread is asked to do, and where it answers. The command
/// travels back so the caller keeps using it (for messages).
struct Request {
    cmd: Command,
    reply: mpsc::SyncSender<(Command, io::Result<TiedChild>)>,
}

/// Starts `cmd` in its own process group, tied to the agent's life.
pub fn spawn_tied(cmd: &mut Command) -> Result<TiedChild> {
    let parent = Pid::this();
    cmd.process_group(0);
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe system calls (prctl, getppid), allocating nothing.
    unsafe { cmd.pre_exec(move || die_with(parent)) };
    let what = describe(cmd);
    let fail = |detail: &str| AgentError::Command {
        command: what.clone(),
        detail: detail.to_string(),
    };
    let (reply, answer) = mpsc::sync_channel(1);
    let owned = std::mem::replace(cmd, Command::new(""));
    spawner()
        .send(Request { cmd: owned, reply })
        .map_err(|_| fail("the spawner thread is gone"))?;
    let (back, spawned) = answer
        .recv()
        .map_err(|_| fail("the spawner thread did not answer"))?;
    *cmd = back;
    spawned.map_err(|e| AgentError::io(format!("starting `{what}`"), e))
}

/// The command line, for messages.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// In the child, before exec: die when the agent's spawner thread does.
fn die_with(parent: Pid) -> io::Result<()> {
    prctl::set_pdeathsig(Signal::SIGKILL)?;
    // The agent may have died between fork and prctl: then no signal comes.
    if getppid() != parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// The spawner thread's queue; the thread starts on first use and, since its
/// sender lives in a static, runs until the process ends.
fn spawner() -> &'static mpsc::Sender<Request> {
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        let started = std::thread::Builder::new()
            .name("kbot-spawner".into())
            .spawn(move || {
                for Request { mut cmd, reply } in rx {
                    let spawned = spawn_with_guard(&mut cmd);
                    let _ = reply.send((cmd, spawned));
                }
            });
        if let Err(e) = started {
            // The requests then fail with "the spawner thread is gone".
            tracing::error!(error = %e, "cannot start the spawner thread");
        }
        tx
    })
}

/// Spawns `cmd` (on the spawner thread) and forks its group's guard.
fn spawn_with_guard(cmd: &mut Command) -> io::Result<TiedChild> {
    let mut child = cmd.spawn()?;
    let group = i32::try_from(child.id()).map_err(io::Error::other)?;
    let parent = Pid::this().as_raw();
    // SAFETY: the child branch runs only `guard`, which makes only
    // async-signal-safe system calls and never returns.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => unsafe { guard(group, parent) },
        Ok(ForkResult::Parent { child: guard }) => Ok(TiedChild {
            child,
            group: Pid::from_raw(group),
            guard,
        }),
        Err(e) => {
            let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
            let _ = child.wait();
            Err(e.into())
        }
    }
}

/// The guard process: waits for the agent's death (its SIGTERM death
/// signal), then SIGKILLs `group`; leaves by itself once the group is empty.
///
/// # Safety
/// Runs in the child of a fork of a multi-threaded process: only
/// async-signal-safe calls, no allocation, no locks.
unsafe fn guard(group: libc::pid_t, parent: libc::pid_t) -> ! {
    // SAFETY: plain system calls on local, initialised values.
    unsafe {
        let mut term: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut term);
        libc::sigaddset(&mut term, libc::SIGTERM);
        // Blocked, so it waits in sigtimedwait whatever the agent's handlers.
        libc::sigprocmask(libc::SIG_BLOCK, &term, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() != parent {
            libc::kill(-group, libc::SIGKILL);
            libc::_exit(0);
        }
        // Inherited descriptors (another thread's pipe ends, sockets) would
        // keep their peers from seeing EOF while the job runs.
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..4096 {
                libc::close(fd);
            }
        }
        let poll = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        loop {
            if libc::sigtimedwait(&term, std::ptr::null_mut(), &poll) == libc::SIGTERM {
                libc::kill(-group, libc::SIGKILL);
                libc::_exit(0);
            }
            let gone = libc::kill(-group, 0) != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if gone {
                libc::_exit(0);
            }
        }
    }
}
