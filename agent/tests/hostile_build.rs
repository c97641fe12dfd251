//! A posted patch whose build attacks the agent (issue #35): its Makefile
//! runs a script that looks for the agent's secrets, calls out over the
//! network, leaves a daemon behind, writes into what later jobs read, and
//! fails with a compiler-like error. The build sandbox must let the error
//! through and nothing else.
//!
//! A binary of its own: it puts an enrolment token into the process
//! environment, as `scripts/kbot-up` exported one to the agent, which a test
//! sharing its process with others must not do.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kbot_agent::build_cache::{BuildCache, BuildKey, BuiltKernel, DEFAULT_ARCH};
use kbot_agent::kernel_build::{BuildConfig, Builder};
use kbot_agent::process::Cancel;
use kbot_api::agent::{FailureKind, KconfigSpec, RepoSpec};
use kbot_testkit::gitrepo::git;

/// What `sleep` is given: a duration no other process on the machine uses.
const DAEMON_SECS: &str = "600.0731";

/// The patch's build script; `PORT` is the test's listener.
const HOSTILE: &str = r#"#!/bin/sh
echo "--- env"; env
echo "--- secrets"; cat ../../agent.json ../../build-cache/kernels/*/meta.json 2>&1
echo "--- network"
bash -c 'exec 3<>/dev/tcp/127.0.0.1/PORT && echo connected >&3' 2>&1 || echo "no network"
setsid sleep SECS </dev/null >/dev/null 2>&1 &
for d in ../../objs/* ../../build-cache ../../build-cache/kernels/* ../../spool "$CCACHE_DIR"; do
  echo pwned > "$d/marker" 2>&1
done
for f in ../../build-cache/kernels/*/bzImage ../../objs/*/.config; do echo pwned >> "$f"; done 2>&1
echo "uid=$(id -u)"
echo "x.c:1:1: error: FLAG"
exit 1
"#;

fn key(commit: &str, name: &str) -> BuildKey {
    BuildKey {
        commit: commit.into(),
        kconfig: KconfigSpec {
            name: name.into(),
            base: Some("tinyconfig".into()),
            fragment: String::new(),
            full: None,
        },
        compiler: "gcc".into(),
        arch: DEFAULT_ARCH.into(),
    }
}

/// Every file under `dir` (path → content), symlinks as their targets.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("readable").flatten() {
            let p = e.path();
            let t = e.file_type().expect("file type");
            if t.is_dir() {
                todo.push(p.clone());
            }
            let content = if t.is_symlink() {
                std::fs::read_link(&p)
                    .expect("link")
                    .into_os_string()
                    .into_encoded_bytes()
            } else if t.is_file() {
                std::fs::read(&p).expect("readable file")
            } else {
                Vec::new()
            };
            out.insert(p, content);
        }
    }
    out
}

/// Processes whose command line holds `needle` as one argument.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
            if cmdline.split(|b| *b == 0).any(|a| a == needle.as_bytes()) {
                found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
            }
        }
    }
    found
}

/// The hostile series commit, in the server's git under `refs/kbot/`
/// (upstream has only the base): returns (upstream, server git, commit).
fn hostile_series(root: &Path, port: u16) -> (PathBuf, PathBuf, String) {
    let upstream = root.join("upstream");
    std::fs::create_dir_all(&upstream).expect("mkdir");
    git(&upstream, &["init", "-q", "-b", "master"]);
    std::fs::write(upstream.join("Makefile"), "all:\n\t@true\n").expect("write");
    git(&upstream, &["add", "-A"]);
    git(&upstream, &["commit", "-q", "-m", "base"]);
    let server = root.join("server.git");
    let up = upstream.to_str().expect("utf-8");
    git(root, &["clone", "-q", "--mirror", up, "server.git"]);
    let work = root.join("work");
    git(root, &["clone", "-q", up, "work"]);
    let script = HOSTILE
        .replace("PORT", &port.to_string())
        .replace("SECS", DAEMON_SECS);
    std::fs::write(work.join("hostile.sh"), script).expect("write");
    std::fs::write(
        work.join("Makefile"),
        "tinyconfig defconfig olddefconfig bzImage kernelrelease:\n\t@sh ./hostile.sh\n",
    )
    .expect("write");
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "x: a posted patch"]);
    let commit = git(&work, &["rev-parse", "HEAD"]);
    let dest = server.to_str().expect("utf-8");
    git(&work, &["push", "-q", dest, "HEAD:refs/kbot/series/l/1"]);
    (upstream, server, commit)
}

/// The agent's state as a real one has it: its token, a cached kernel,
/// another kconfig's object directory, the ccache and the spool.
fn agent_state(agent: &Path) -> BuildCache {
    std::fs::create_dir_all(agent).expect("mkdir");
    std::fs::write(
        agent.join("agent.json"),
        r#"{"server":"http://127.0.0.1:1","agent_id":1,"agent_token":"kbot_agt_SECRET"}"#,
    )
    .expect("token");
    let cache = BuildCache::open(&agent.join("build-cache"), 1 << 30).expect("cache");
    let staged = agent.join("staged");
    std::fs::create_dir_all(&staged).expect("mkdir");
    std::fs::write(staged.join("bzImage"), "a base commit's kernel").expect("image");
    let base = BuiltKernel {
        key: key("0000000000000000000000000000000000000000", "tiny"),
        release: "6.1.0".into(),
        build_id: None,
        build_secs: 1.0,
        size_bytes: 0,
        last_used_ms: 0,
        dir: PathBuf::new(),
    };
    cache.insert(&staged, base).expect("cached");
    let other = agent.join("objs/other-kconfig");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(other.join(".config"), "CONFIG_OTHER=y\n").expect("write");
    for d in ["ccache", "spool"] {
        std::fs::create_dir_all(agent.join(d)).expect("mkdir");
        std::fs::write(agent.join(d).join("kept"), d).expect("write");
    }
    cache
}

#[test]
fn a_hostile_build_gets_its_error_out_and_nothing_else() {
    std::env::set_var("KBOT_ENROLLMENT_TOKEN", "kbot_enr_SECRET");
    let tmp = tempfile::tempdir().expect("tempdir");
    // The build user (a root agent's) mounts the work directory's parts.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();
    let (upstream, server, commit) = hostile_series(tmp.path(), port);
    let agent = tmp.path().join("agent");
    let cache = agent_state(&agent);
    let mut cfg = BuildConfig::x86_64(&agent, 1);
    cfg.timeout = Duration::from_secs(120);
    cfg.ccache_dir = Some(agent.join("ccache"));
    // A root agent (CI) must have its build user: no skip without it.
    cfg.check_sandbox()
        .expect("the build sandbox is usable (root: the kbot-build user exists)");
    let kept = |a: &Path| {
        [
            "objs/other-kconfig",
            "build-cache/kernels",
            "ccache",
            "spool",
        ]
        .iter()
        .map(|d| snapshot(&a.join(d)))
        .chain([BTreeMap::from([(
            PathBuf::from("agent.json"),
            std::fs::read(a.join("agent.json")).expect("token"),
        )])])
        .collect::<Vec<_>>()
    };
    let before = kept(&agent);
    let builder = Builder::new(cfg, cache);
    let repo = RepoSpec {
        name: "linux".into(),
        url: upstream.display().to_string(),
        series_url: Some(server.display().to_string()),
    };

    let failure = builder
        .kernel(&repo, &key(&commit, "tiny"), &Cancel::new())
        .expect("no agent error")
        .expect_err("the build fails");

    let detail = &failure.detail;
    assert_eq!(failure.kind, FailureKind::BuildFailed, "{detail}");
    assert!(detail.contains("x.c:1:1: error: FLAG"), "{detail}");
    for secret in ["kbot_agt_", "kbot_enr_", "KBOT_"] {
        assert!(!detail.contains(secret), "{secret} leaked:\n{detail}");
    }
    assert!(detail.contains("no network"), "{detail}");
    let err = listener.accept().err().map(|e| e.kind());
    assert_eq!(
        err,
        Some(ErrorKind::WouldBlock),
        "the build reached the host"
    );
    let uid = detail
        .lines()
        .find_map(|l| l.strip_prefix("uid="))
        .and_then(|u| u.trim().parse::<u32>().ok())
        .expect("the script printed its uid");
    assert_ne!(uid, 0, "the build ran as root");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(DAEMON_SECS).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        processes_with(DAEMON_SECS),
        Vec::<String>::new(),
        "the daemon outlived the job"
    );
    assert!(
        before == kept(&agent),
        "the build changed another job's state"
    );
    let markers: Vec<_> = snapshot(&agent)
        .into_keys()
        .filter(|p| p.ends_with("marker"))
        .collect();
    assert!(markers.is_empty(), "{markers:?}");
}
