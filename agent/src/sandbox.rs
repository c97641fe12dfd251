//! The kernel build's sandbox: every `make` of a build runs inside
//! bubblewrap (`bwrap`).
//!
//! A posted patch is the attacker's code: `make` runs the patch's Makefile,
//! scripts and host programs. Inside the sandbox that code sees the
//! toolchain and the source read-only, writes only its object directory,
//! its ccache and a tmpfs `/tmp`, has no network, no environment but a
//! short allowlist, and runs as an unprivileged uid outside its namespace
//! too (the agent's `KBOT_BUILD_USER` when the agent is root). The agent's
//! token (`agent.json`), spool, kernel cache and every other object
//! directory are not mounted at all. A root agent runs QEMU as the same
//! user ([`BuildUser::run`], `qemu/runas.rs`).
//!
//! Why bubblewrap: it is what Flatpak runs every application in, it needs
//! no daemon and works unprivileged through user namespaces, and its
//! `--unshare-pid` with `--die-with-parent` ends every process of the build
//! when the build ends or the agent dies, `setsid` and `nohup` ones
//! included (they stay in the pid namespace, whose init is bwrap's). nsjail
//! is not packaged in Debian 12. syzbot sandboxes its kernel builds the same
//! way, with its own unshare code (a dedicated user; new net, ipc, mount,
//! uts and pid namespaces).
//!
//! Resource limits are rlimits set before `exec` (CPU seconds, address
//! space, processes, file size: the last also caps the build log, which is
//! the build's stdout). cgroup v2 limits are not used: a cgroup needs a
//! delegated cgroup v2 subtree, which agents on cgroup v1 or hybrid hosts
//! (Debian 12 under Docker, this project's CI) do not have.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{AgentError, Result};
use crate::process;

/// The build user of a root agent (created by `scripts/install-test-deps`
/// and `scripts/kbot-up` with `useradd --system`).
pub const DEFAULT_BUILD_USER: &str = "kbot-build";
/// CPU seconds of any one process of the build (a compiler, the linker).
pub const DEFAULT_CPU_SECS: u64 = 2 * 3600;
/// Address space of any one process of the build, in MiB.
pub const DEFAULT_ADDRESS_SPACE_MIB: u64 = 16 << 10;
/// Processes of the build user at once (`make -j64` runs a few hundred).
pub const DEFAULT_MAX_PROCESSES: u64 = 4096;
/// The largest file the build may write, in MiB (vmlinux with debug info,
/// the build log).
pub const DEFAULT_MAX_FILE_MIB: u64 = 4 << 10;
/// The size of the build's tmpfs `/tmp`, in MiB.
pub const DEFAULT_TMP_MIB: u64 = 1 << 10;

/// The toolchain, mounted read-only (or re-created as the host's symlink:
/// `/bin -> usr/bin` on a merged-/usr Debian).
const TOOLCHAIN: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The little of `/etc` a build needs: Debian's alternatives (`cc`,
/// `awk`, `ld`) and the dynamic loader's cache.
const ETC: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
];

/// `PATH` inside the sandbox.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// `HOME` inside the sandbox: on its tmpfs, so it is the job's own.
const HOME: &str = "/tmp/home";

/// The build's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub cpu_secs: u64,
    pub address_space_bytes: u64,
    pub processes: u64,
    pub file_size_bytes: u64,
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            cpu_secs: DEFAULT_CPU_SECS,
            address_space_bytes: DEFAULT_ADDRESS_SPACE_MIB << 20,
            processes: DEFAULT_MAX_PROCESSES,
            file_size_bytes: DEFAULT_MAX_FILE_MIB << 20,
            tmp_bytes: DEFAULT_TMP_MIB << 20,
        }
    }
}

impl Limits {
    /// In the child, before `exec`: the rlimits, each no higher than the
    /// inherited hard limit (an unprivileged agent cannot raise it). Only
    /// async-signal-safe calls.
    fn apply(&self) -> io::Result<()> {
        let wanted = [
            (libc::RLIMIT_CPU, self.cpu_secs),
            (libc::RLIMIT_AS, self.address_space_bytes),
            (libc::RLIMIT_NPROC, self.processes),
            (libc::RLIMIT_FSIZE, self.file_size_bytes),
            (libc::RLIMIT_CORE, 0),
        ];
        for (resource, value) in wanted {
            let mut old = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit/setrlimit on a local, initialised struct.
            unsafe {
                if libc::getrlimit(resource, &mut old) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let v = value.min(old.rlim_max);
                let new = libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                };
                if libc::setrlimit(resource, &new) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Who builds and within what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The user a root agent builds as (never root itself).
    pub build_user: String,
    pub limits: Limits,
}

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            build_user: DEFAULT_BUILD_USER.to_string(),
            limits: Limits::default(),
        }
    }
}

/// The uid and gid a build runs as outside its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildIdentity {
    pub uid: u32,
    pub gid: u32,
}

impl SandboxConfig {
    /// The build user when the agent is root; `None` when the agent is not
    /// (it builds as itself). A root agent without its build user is a
    /// configuration error, never a build as root.
    pub fn identity(&self) -> Result<Option<BuildIdentity>> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        let user = nix::unistd::User::from_name(&self.build_user)
            .map_err(|e| AgentError::Config(format!("looking up {}: {e}", self.build_user)))?
            .ok_or_else(|| {
                AgentError::Config(format!(
                    "the build user {} does not exist: a root agent builds kernels as it \
                     (create it with `useradd --system --no-create-home --shell \
                     /usr/sbin/nologin {}`, or name another in KBOT_BUILD_USER)",
                    self.build_user, self.build_user
                ))
            })?;
        if user.uid.is_root() {
            return Err(AgentError::Config(format!(
                "the build user {} is root: kernels are never built as root",
                self.build_user
            )));
        }
        Ok(Some(BuildIdentity {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        }))
    }

    /// [`SandboxConfig::identity`] with the user's name.
    pub fn user(&self) -> Result<Option<BuildUser>> {
        Ok(self.identity()?.map(|id| BuildUser {
            name: self.build_user.clone(),
            id,
        }))
    }
}

/// The build user by name, for what else a root agent runs as it (QEMU,
/// see `qemu/runas.rs`) and for the messages that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildUser {
    pub name: String,
    pub id: BuildIdentity,
}

impl BuildUser {
    /// Makes `cmd` run as this user, with its uid, its primary group and
    /// its supplementary groups (`kvm`, for QEMU's /dev/kvm). Not
    /// `Command::uid`: std then clears the supplementary groups, and
    /// stable std cannot set them. The credentials change in a `pre_exec`
    /// closure registered now, so it runs before those registered later
    /// (std runs them in order): `spawn_tied`'s `PR_SET_PDEATHSIG` comes
    /// after it, and a change of uid would have cleared it.
    pub fn run(&self, cmd: &mut Command) -> Result<()> {
        let name = CString::new(self.name.as_str())
            .map_err(|e| AgentError::Config(format!("the build user {:?}: {e}", self.name)))?;
        let groups: Vec<libc::gid_t> =
            nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(self.id.gid))
                .map_err(|e| {
                    AgentError::Config(format!("the groups of the build user {}: {e}", self.name))
                })?
                .into_iter()
                .map(|g| g.as_raw())
                .collect();
        let BuildIdentity { uid, gid } = self.id;
        // SAFETY: `become_user` makes only async-signal-safe system calls
        // on values prepared before the fork; it allocates nothing.
        unsafe { cmd.pre_exec(move || become_user(uid, gid, &groups)) };
        Ok(())
    }

    /// Whether this user can open `path` read-write (a device: /dev/kvm),
    /// tried for real in a child that has become the user, so that a
    /// container's device rules count as well as the file's mode.
    pub fn can_open(&self, path: &Path) -> Result<io::Result<()>> {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|e| AgentError::Config(format!("{}: {e}", path.display())))?;
        let mut cmd = Command::new("true");
        self.run(&mut cmd)?;
        // SAFETY: open and close are async-signal-safe; the path was
        // made before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(c_path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                libc::close(fd);
                Ok(())
            })
        };
        // The closure's error comes back as spawn's.
        Ok(match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(io::Error::other(format!("the probe `true` ended with {s}"))),
            Err(e) => Err(e),
        })
    }

    /// Refuses a directory this user cannot walk into (it opens files
    /// there by path).
    pub fn reaches(&self, dir: &Path) -> Result<()> {
        reachable_by(dir, self.id, &self.name)
    }
}

/// In the child, before exec: the supplementary groups, then the gid, then
/// the uid (after it nothing else may change). Only async-signal-safe calls.
fn become_user(uid: libc::uid_t, gid: libc::gid_t, groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: plain system calls on values owned by the caller.
    unsafe {
        if libc::setgroups(groups.len(), groups.as_ptr()) != 0
            || libc::setresgid(gid, gid, gid) != 0
            || libc::setresuid(uid, uid, uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What one sandboxed command sees of the host.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Mounted read-only at the same path.
    pub read_only: Vec<PathBuf>,
    /// Mounted writable at the same path.
    pub writable: Vec<PathBuf>,
    /// Mounted at another path.
    pub placed: Vec<Placed>,
    /// The environment beyond the fixed allowlist.
    pub env: Vec<(String, String)>,
    /// The working directory inside.
    pub chdir: PathBuf,
}

/// A host directory mounted at a path of its own inside.
#[derive(Debug, Clone)]
pub struct Placed {
    pub host: PathBuf,
    pub inside: PathBuf,
    pub writable: bool,
}

/// `program args` inside the sandbox: bwrap as the group leader, the
/// environment cleared to the allowlist, the rlimits, and the build user's
/// uid and gid when `identity` names one.
pub fn command(
    cfg: &SandboxConfig,
    identity: Option<BuildIdentity>,
    view: &View,
    program: &str,
    args: &[String],
) -> Command {
    let mut cmd = Command::new("bwrap");
    cmd.args(bwrap_args(view, &host_toolchain(), cfg.limits.tmp_bytes));
    cmd.arg(program).args(args);
    cmd.env_clear().envs(environment(view));
    if let Some(id) = identity {
        // std drops the supplementary groups too when it leaves root.
        cmd.uid(id.uid).gid(id.gid);
    }
    let limits = cfg.limits;
    // SAFETY: `apply` makes only async-signal-safe system calls on locals.
    unsafe { cmd.pre_exec(move || limits.apply()) };
    cmd
}

/// The environment inside: the allowlist, then the view's own.
pub fn environment(view: &View) -> Vec<(String, String)> {
    let fixed = [
        ("PATH", PATH),
        ("HOME", HOME),
        ("TMPDIR", "/tmp"),
        ("LC_ALL", "C"),
        // The source and its git are another uid's; the kernel's
        // setlocalversion reads them with git.
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "safe.directory"),
        ("GIT_CONFIG_VALUE_0", "*"),
    ];
    fixed
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(view.env.iter().cloned())
        .collect()
}

/// How a toolchain path is on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPath {
    Dir(PathBuf),
    Symlink { path: PathBuf, target: PathBuf },
}

/// The toolchain directories of this host, as they are.
pub fn host_toolchain() -> Vec<HostPath> {
    TOOLCHAIN
        .iter()
        .filter_map(|p| {
            let path = PathBuf::from(p);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).ok()?;
                Some(HostPath::Symlink { path, target })
            } else {
                meta.is_dir().then_some(HostPath::Dir(path))
            }
        })
        .collect()
}

/// bwrap's options for `view`, up to the `--` before the program.
pub fn bwrap_args(view: &View, toolchain: &[HostPath], tmp_bytes: u64) -> Vec<OsString> {
    let mut a: Vec<OsString> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "kbot-build",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let mut push = |words: &[&std::ffi::OsStr]| a.extend(words.iter().map(OsString::from));
    for t in toolchain {
        match t {
            HostPath::Dir(p) => push(&["--ro-bind".as_ref(), p.as_ref(), p.as_ref()]),
            HostPath::Symlink { path, target } => {
                push(&["--symlink".as_ref(), target.as_ref(), path.as_ref()])
            }
        }
    }
    for e in ETC {
        push(&["--ro-bind-try".as_ref(), e.as_ref(), e.as_ref()]);
    }
    let size = tmp_bytes.to_string();
    push(&[
        "--proc".as_ref(),
        "/proc".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--size".as_ref(),
        size.as_ref(),
        "--tmpfs".as_ref(),
        "/tmp".as_ref(),
        "--dir".as_ref(),
        HOME.as_ref(),
    ]);
    for p in &view.read_only {
        push(&["--ro-bind".as_ref(), p.as_ref(), p.as_ref()]);
    }
    for p in &view.writable {
        push(&["--bind".as_ref(), p.as_ref(), p.as_ref()]);
    }
    for p in &view.placed {
        let how = if p.writable { "--bind" } else { "--ro-bind" };
        push(&[how.as_ref(), p.host.as_ref(), p.inside.as_ref()]);
    }
    push(&["--chdir".as_ref(), view.chdir.as_ref(), "--".as_ref()]);
    a
}

/// The command line for messages and the build log: a sandboxed command
/// is shown as what runs inside (the bwrap options are the same for every
/// step and would bury it).
pub fn describe(cmd: &Command) -> String {
    if cmd.get_program() != "bwrap" {
        return process::describe(cmd);
    }
    let inner: Vec<_> = cmd
        .get_args()
        .skip_while(|a| *a != "--")
        .skip(1)
        .map(|s| s.to_string_lossy())
        .collect();
    inner.join(" ")
}

/// Start-up check of a sandboxed builder: bwrap is installed, and the build
/// user can reach every directory it gets mounted (`dirs`: the work
/// directory, the ccache directory).
pub fn check(cfg: &SandboxConfig, dirs: &[&Path]) -> Result<Option<BuildIdentity>> {
    if !process::on_path("bwrap") {
        return Err(AgentError::Config(
            "bubblewrap (bwrap) is not installed: every kernel build runs in it \
             (Debian: apt-get install bubblewrap)"
                .into(),
        ));
    }
    let identity = cfg.identity()?;
    if let Some(id) = identity {
        for dir in dirs {
            reachable_by(dir, id, &cfg.build_user)?;
        }
    }
    let view = View {
        chdir: "/".into(),
        ..View::default()
    };
    process::output(&mut command(cfg, identity, &view, "true", &[])).map_err(|e| {
        AgentError::Config(format!(
            "bubblewrap cannot set up a build sandbox here (it needs unprivileged user \
             namespaces: sysctl kernel.unprivileged_userns_clone=1 where that exists, and \
             a container that allows them): {e}"
        ))
    })?;
    Ok(identity)
}

/// Refuses a directory the build user cannot walk into: bwrap opens what
/// it mounts as that user.
fn reachable_by(dir: &Path, id: BuildIdentity, user: &str) -> Result<()> {
    for d in dir.ancestors().filter(|d| d.exists()) {
        let meta = std::fs::metadata(d).map_err(|e| AgentError::io(d.display().to_string(), e))?;
        let mode = meta.permissions().mode();
        let bit = if meta.uid() == id.uid {
            0o100
        } else if meta.gid() == id.gid {
            0o010
        } else {
            0o001
        };
        if mode & bit == 0 {
            return Err(AgentError::Config(format!(
                "the build user {user} cannot reach {}: {} is mode {:o}; \
                 let others through it (chmod o+x) or choose another KBOT_WORK_DIR",
                dir.display(),
                d.display(),
                mode & 0o7777
            )));
        }
    }
    Ok(())
}

/// Makes `dir` the build user's (it writes there), recursively when it is
/// not yet: an object directory or ccache left by an agent that built as
/// root. `chown -R` does not follow the symlinks it meets.
pub fn give_to(dir: &Path, id: Option<BuildIdentity>) -> Result<()> {
    let Some(id) = id else {
        return Ok(());
    };
    let meta = std::fs::metadata(dir).map_err(|e| AgentError::io(dir.display().to_string(), e))?;
    if meta.uid() == id.uid && meta.gid() == id.gid {
        return Ok(());
    }
    process::output(
        Command::new("chown")
            .args(["-R", &format!("{}:{}", id.uid, id.gid), "--"])
            .arg(dir),
    )
    .map(|_| ())
}

/// A file the build made, at `rel` under `dir`, for the agent to read or
/// replace: refused when it is not a regular file or when a symlink (the
/// build's own) leads out of `dir`. The build has ended, so nothing
/// changes it between this check and the use.
pub fn inside(dir: &Path, rel: &str) -> std::result::Result<PathBuf, String> {
    let path = dir.join(rel);
    let refuse = |why: &str| format!("the build's {rel} {why}: refused");
    let root = dir.canonicalize().map_err(|e| refuse(&e.to_string()))?;
    let real = match path.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(&path).is_ok() {
                return Err(refuse("is a dangling symlink"));
            }
            return Ok(path);
        }
        Err(e) => return Err(refuse(&e.to_string())),
    };
    if !real.starts_with(&root) {
        return Err(refuse("leads outside the object directory"));
    }
    if !real.is_file() {
        return Err(refuse("is not a regular file"));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn window(args: &[String], words: &[&str]) -> bool {
        args.windows(words.len()).any(|w| w == words)
    }

    /// The argument list: every namespace, the toolchain read-only, the
    /// host's symlinks re-created, the source read-only, only the object
    /// directory writable, a sized tmpfs, and nothing else of the host.
    #[test]
    fn bwrap_mounts_only_the_view() {
        let view = View {
            read_only: vec!["/w/worktrees/linux".into()],
            writable: vec!["/w/objs/tiny".into()],
            placed: vec![Placed {
                host: "/w/worktrees/linux-next".into(),
                inside: "/kbot/src".into(),
                writable: false,
            }],
            env: vec![("KBUILD_BUILD_USER".into(), "kbot".into())],
            chdir: "/w/objs/tiny".into(),
        };
        let toolchain = [
            HostPath::Dir("/usr".into()),
            HostPath::Symlink {
                path: "/bin".into(),
                target: "usr/bin".into(),
            },
        ];
        let args: Vec<String> = bwrap_args(&view, &toolchain, 1 << 20)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for ns in ["user", "pid", "net", "ipc", "uts"] {
            assert!(args.contains(&format!("--unshare-{ns}")), "{ns}: {args:?}");
        }
        assert!(args.contains(&"--die-with-parent".to_string()));
        assert!(window(&args, &["--ro-bind", "/usr", "/usr"]));
        assert!(window(&args, &["--symlink", "usr/bin", "/bin"]));
        assert!(window(&args, &["--size", "1048576", "--tmpfs", "/tmp"]));
        assert!(window(
            &args,
            &["--ro-bind", "/w/worktrees/linux", "/w/worktrees/linux"]
        ));
        assert!(window(&args, &["--bind", "/w/objs/tiny", "/w/objs/tiny"]));
        assert!(window(
            &args,
            &["--ro-bind", "/w/worktrees/linux-next", "/kbot/src"]
        ));
        let writable: Vec<_> = args
            .windows(2)
            .filter(|w| w[0] == "--bind")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(writable, ["/w/objs/tiny"]);
        assert!(!args.iter().any(|a| a == "/w" || a.contains("agent.json")));
        assert_eq!(args.last().map(String::as_str), Some("--"));
    }

    /// The command: bwrap, a cleared environment with only the allowlist
    /// and the view's variables, and the inner command line for the log.
    #[test]
    fn the_environment_is_the_allowlist() {
        std::env::var_os("PATH").expect("PATH is set for the test");
        let view = View {
            env: vec![("CCACHE_DIR".into(), "/w/ccache".into())],
            chdir: "/".into(),
            ..View::default()
        };
        let cmd = command(
            &SandboxConfig::default(),
            None,
            &view,
            "make",
            &["-C".into(), "/src".into()],
        );
        assert_eq!(cmd.get_program(), "bwrap");
        let env: Vec<String> = cmd
            .get_envs()
            .filter_map(|(k, v)| {
                v.map(|v| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            })
            .collect();
        assert!(env.contains(&"HOME=/tmp/home".to_string()), "{env:?}");
        assert!(env.contains(&"CCACHE_DIR=/w/ccache".to_string()), "{env:?}");
        assert!(!env.iter().any(|e| e.starts_with("KBOT_")), "{env:?}");
        let mut probe = Command::new("env");
        probe.env_clear().envs(environment(&view));
        let printed = process::output(&mut probe).expect("env runs");
        assert!(
            !printed.contains("KBOT_") && printed.contains("LC_ALL=C"),
            "{printed}"
        );
        assert_eq!(describe(&cmd), "make -C /src");
        assert!(args_of(&cmd).contains(&"--unshare-net".to_string()));
    }

    #[test]
    fn files_of_the_build_stay_inside_its_directory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let obj = tmp.path().join("obj");
        std::fs::create_dir_all(obj.join("arch")).expect("mkdir");
        std::fs::write(obj.join("arch/bzImage"), "k").expect("write");
        std::fs::write(tmp.path().join("agent.json"), "secret").expect("write");
        std::os::unix::fs::symlink("../agent.json", obj.join(".config")).expect("symlink");
        std::os::unix::fs::symlink("/nonexistent", obj.join("vmlinux")).expect("symlink");
        assert!(inside(&obj, "arch/bzImage").is_ok());
        assert!(inside(&obj, "new-file").is_ok());
        let out = inside(&obj, ".config").expect_err("a symlink out");
        assert!(out.contains("leads outside"), "{out}");
        assert!(inside(&obj, "vmlinux").is_err());
        assert!(inside(&obj, "arch").is_err(), "a directory");
    }
}
