//! What a real-kernel scenario stands on: the kernel repository with its
//! planted commits (`plant.rs`), the static kbot-bench, and a kbot-agent process
//! on the QEMU backend enrolled at the test's server.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kbot_api::client::UserClient;
use kbot_api::repos::RepoCreate;
use kbot_server::config::Config;
use kbot_testkit::{Backend, TestServer};

/// The checkout.
pub fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the agent crate sits in the checkout")
        .to_path_buf()
}

/// Where kernel trees, built kernels and agent directories outlive a run
/// (`KBOT_E2E_CACHE`, default `/var/cache/kbot`): the second run reuses
/// the first one's kernels.
pub fn cache_dir() -> PathBuf {
    let dir = std::env::var_os("KBOT_E2E_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kbot"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Whether `KBOT_E2E_COLD` asks for a fresh agent work directory and
/// ccache in the run's own directory (kernels built from nothing), instead
/// of the persistent ones in the cache.
pub fn cold() -> bool {
    std::env::var_os("KBOT_E2E_COLD").is_some_and(|v| !v.is_empty() && v != "0")
}

/// A new directory of the run's own in the cache, `PREFIX.XXXXXX`, kept
/// after the run for its logs.
pub fn work_dir(prefix: &str) -> PathBuf {
    tempfile::Builder::new()
        .prefix(&format!("{prefix}."))
        .tempdir_in(cache_dir())
        .expect("work dir")
        .keep()
}

/// Runs `scripts/NAME ARGS`; its trimmed standard output.
pub fn script(name: &str, args: &[&Path]) -> String {
    let path = checkout().join("scripts").join(name);
    let out = Command::new(&path)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        out.status.success(),
        "scripts/{name} failed: {}",
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .trim()
        .to_owned()
}

/// The bare kernel repository of the robot scenario, `master` at `h0`.
pub struct KernelRepo {
    pub dir: PathBuf,
    commits: HashMap<String, String>,
}

impl KernelRepo {
    /// Made from Debian's linux-source (unpacked once into the cache) at
    /// `dir`, removed first. Its commits are the same on every run.
    pub fn make(dir: &Path) -> KernelRepo {
        KernelRepo::make_with_pages(dir, None)
    }

    /// As `make`, the slowdown zeroing `pages` pages per write instead of
    /// 16.
    pub fn make_with_pages(dir: &Path, pages: Option<&str>) -> KernelRepo {
        let src = script("e2e-kernel-source", &[&cache_dir().join("linux-src")]);
        let pages = pages.map_or(16, |p| p.parse().unwrap_or_else(|_| panic!("pages {p:?}")));
        KernelRepo {
            dir: dir.to_path_buf(),
            commits: crate::plant::plant(Path::new(&src), dir, pages),
        }
    }

    /// The planted commit `name` (`h0`, `slow`, `doc1`, ...).
    pub fn commit(&self, name: &str) -> &str {
        self.commits
            .get(name)
            .unwrap_or_else(|| panic!("no planted commit {name}"))
    }

    /// The name of planted commit `sha`, if it is one.
    pub fn name_of(&self, sha: &str) -> Option<&str> {
        self.commits
            .iter()
            .find(|(_, s)| s.as_str() == sha)
            .map(|(name, _)| name.as_str())
    }

    pub fn has(&self, sha: &str) -> bool {
        has_commit(&self.dir, sha)
    }
}

/// Whether the repository at `git_dir` holds commit `sha`.
pub fn has_commit(git_dir: &Path, sha: &str) -> bool {
    Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "-e", &format!("{sha}^{{commit}}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The architecture of an agent's guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guest {
    /// One socket, two cores, under the instruction-counted clock.
    X86_64,
    /// qemu-system-aarch64 `-M virt`, its kernel cross-built.
    Aarch64,
}

impl Guest {
    /// Its machine name (`uname -m`).
    pub fn name(self) -> &'static str {
        match self {
            Guest::X86_64 => "x86_64",
            Guest::Aarch64 => "aarch64",
        }
    }

    /// The static kbot-bench for the guest that `scripts/build-kbot-bench-static
    /// --arch all` made (`scripts/test` makes both before the tests run).
    pub fn bench(self) -> PathBuf {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| checkout().join("target"));
        let bench = target.join(format!(
            "{}-unknown-linux-gnu/release/kbot-bench",
            self.name()
        ));
        assert!(
            bench.is_file(),
            "no static kbot-bench at {}: run scripts/build-kbot-bench-static --arch {}",
            bench.display(),
            self.name()
        );
        bench
    }

    /// The static busybox of the guest's initramfs (`scripts/install-test-deps`).
    fn busybox(self) -> &'static str {
        match self {
            Guest::X86_64 => "/bin/busybox",
            Guest::Aarch64 => "/usr/local/lib/kbot/aarch64/busybox",
        }
    }
}

/// A process the scenario started, its output in a log: stopped with
/// SIGTERM when dropped (a script cleans up its own children then), killed
/// if it has not exited 10 s later.
pub struct Process {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Process {
    /// Starts `command` with its output into a new file at `log`.
    pub fn spawn(mut command: Command, what: &str, log: &Path) -> Process {
        let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let child = command
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
        Process {
            child,
            what: what.to_owned(),
            log: log.to_path_buf(),
        }
    }

    /// Panics with the end of its log when the process has exited.
    pub fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); the end of {}:\n{}",
                self.what,
                self.log.display(),
                tail(&self.log, 30)
            );
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        for _ in 0..100 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Who an agent is, where it keeps its state and what it does.
pub struct AgentSetup<'a> {
    pub name: &'a str,
    pub tbox_group: &'a str,
    pub work_dir: &'a Path,
    pub ccache_dir: &'a Path,
    pub log: &'a Path,
    pub guest: Guest,
    /// `KBOT_AGENT_ROLES`: `build,test`, `build` or `test`.
    pub roles: &'a str,
    /// The guests' memory; `None`: `KBOT_GUEST_MEMORY_MIB`, or 512 MiB.
    pub memory_mib: Option<u32>,
}

/// A kbot-agent daemon on the QEMU backend that enrols at `server` with
/// `enrollment_token`.
fn qemu_agent(server: &str, enrollment_token: &str, setup: AgentSetup<'_>) -> Process {
    std::fs::create_dir_all(setup.work_dir).expect("agent work dir");
    std::fs::create_dir_all(setup.ccache_dir).expect("ccache dir");
    // A new server: the agent enrols again.
    let _ = std::fs::remove_file(setup.work_dir.join("agent.json"));
    let guest_memory_mib = setup.memory_mib.map_or_else(
        || std::env::var("KBOT_GUEST_MEMORY_MIB").unwrap_or_else(|_| "512".into()),
        |m| m.to_string(),
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_kbot-agent"));
    match setup.guest {
        Guest::X86_64 => command
            .env("KBOT_GUEST_SOCKETS", "1")
            .env("KBOT_GUEST_CORES", "2")
            .env("KBOT_QEMU_ICOUNT_SHIFT", icount_shift().to_string()),
        Guest::Aarch64 => command.env("KBOT_GUEST_ARCH", "aarch64"),
    };
    command
        .arg("daemon")
        .env("KBOT_SERVER_URL", server)
        .env("KBOT_ENROLLMENT_TOKEN", enrollment_token)
        .env("KBOT_AGENT_NAME", setup.name)
        .env("KBOT_TBOX_GROUP", setup.tbox_group)
        .env("KBOT_AGENT_ROLES", setup.roles)
        .env("KBOT_BACKEND", "qemu")
        .env("KBOT_WORK_DIR", setup.work_dir)
        .env("KBOT_CCACHE_DIR", setup.ccache_dir)
        .env("KBOT_BENCH", setup.guest.bench())
        .env("KBOT_BUSYBOX", setup.guest.busybox())
        .env("KBOT_GUEST_MEMORY_MIB", guest_memory_mib)
        .env("KBOT_LEASE_WAIT_SECS", "10");
    Process::spawn(command, &format!("the agent {}", setup.name), setup.log)
}

/// The last `n` lines of the file at `path`.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The whole scenario's time limit (`KBOT_E2E_TIMEOUT_SECS`, default an
/// hour), how long it has run, and its progress lines (`TAG[SECSs]: ...`
/// on stderr).
pub struct Clock {
    tag: &'static str,
    start: Instant,
    deadline: Instant,
}

impl Clock {
    pub fn start(tag: &'static str) -> Clock {
        Clock::start_for(tag, 3600)
    }

    /// A scenario whose default limit is `default_secs`.
    pub fn start_for(tag: &'static str, default_secs: u64) -> Clock {
        let secs = std::env::var("KBOT_E2E_TIMEOUT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default_secs);
        let start = Instant::now();
        Clock {
            tag,
            start,
            deadline: start + Duration::from_secs(secs),
        }
    }

    pub fn say(&self, what: impl std::fmt::Display) {
        eprintln!("{}[{}s]: {what}", self.tag, self.secs());
    }

    pub fn secs(&self) -> u64 {
        self.start.elapsed().as_secs()
    }

    pub fn expired(&self) -> bool {
        Instant::now() > self.deadline
    }
}

/// A scenario's clock and the processes it started: what every wait
/// checks, so that a dead agent or server fails the test at once, with the
/// end of its log, instead of at the time limit.
pub struct Crew {
    pub clock: Clock,
    pub processes: Vec<Process>,
}

impl Crew {
    pub fn say(&self, what: impl std::fmt::Display) {
        self.clock.say(what);
    }

    /// Panics when a process has exited or the time is up.
    pub fn alive(&mut self, waiting_for: &str) {
        for p in &mut self.processes {
            p.check_alive();
        }
        assert!(!self.clock.expired(), "timed out waiting for {waiting_for}");
    }
}

/// The x86_64 agent's `KBOT_QEMU_ICOUNT_SHIFT` (`KBOT_E2E_ICOUNT_SHIFT`,
/// default 3).
fn icount_shift() -> u32 {
    std::env::var("KBOT_E2E_ICOUNT_SHIFT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

/// The server of a scenario: on a fresh SQLite store, with a user token,
/// the kernel repository registered as `linux`.
pub struct Lab {
    pub server: TestServer,
    pub url: String,
    pub token: String,
    pub client: UserClient,
}

impl Lab {
    /// A kbot-agent daemon on the QEMU backend, enrolled at this server
    /// with a token bound to its name.
    pub async fn qemu_agent(&self, setup: AgentSetup<'_>) -> Process {
        let token = self.server.enrollment_token_for(setup.name).await;
        qemu_agent(&self.url, &token, setup)
    }

    /// GET `path` at the server (its pages and API need no token to read),
    /// as text.
    pub async fn page(&self, path: &str) -> String {
        reqwest::get(format!("{}{path}", self.url))
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .text()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// GET `path` at the server, as JSON.
    pub async fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let text = self.page(path).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
    }

    /// `tweak` adjusts the config, knowing the server's URL (the mails
    /// carry it): the port is chosen before the server binds it.
    pub async fn start(linux: &KernelRepo, tweak: impl FnOnce(&mut Config, &str)) -> Lab {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let server = TestServer::start_with(Backend::Sqlite, |c| {
            c.bind = SocketAddr::from(([127, 0, 0, 1], port));
            tweak(c, &url);
        })
        .await;
        let (_, token) = kbot_server::auth::create_user_token(server.db(), "e2e", None)
            .await
            .expect("a user token");
        let client = UserClient::new(&url, Some(token.clone())).expect("client");
        client
            .add_repo(&RepoCreate {
                name: "linux".into(),
                url: linux.dir.to_str().expect("utf-8").into(),
                default_branch: None,
            })
            .await
            .expect("registering the repository");
        Lab {
            server,
            url,
            token,
            client,
        }
    }
}
