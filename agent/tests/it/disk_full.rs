//! The agent's disk full (a small tmpfs holding its work directory): the
//! build cache gives way first, least recently used kernel first, so that a
//! job's outcome can be spooled and a kernel built; what stays impossible
//! fails with an error naming the disk, leaves no half-written or temporary
//! file, loses nothing spooled before, and never blames the commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kbot_agent::build_cache::{BuildCache, BuiltKernel};
use kbot_agent::kernel_build::{BuildConfig, Builder};
use kbot_agent::process::Cancel;
use kbot_agent::spool::{Pending, Spool};
use kbot_api::agent::{FailureKind, RepoSpec, ResultUpload};
use kbot_testkit::tmpfs::Tmpfs;

use super::keys::tiny as key;

const KIB: u64 = 1 << 10;

/// Caches fake kernels of `size` bytes, oldest first, each used later than
/// the one before.
fn cache_kernels(cache: &BuildCache, staging: &Path, commits: &[&str], size: u64) {
    for commit in commits {
        let dir = staging.join(commit);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("bzImage"), vec![1u8; size as usize]).expect("image");
        let kernel = BuiltKernel {
            key: key(commit),
            release: "6.1.0".into(),
            build_id: None,
            build_secs: 1.0,
            size_bytes: 0,
            last_used_ms: 0,
            dir: PathBuf::new(),
        };
        cache.insert(&dir, kernel).expect("cached");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn cached(cache: &BuildCache, commit: &str) -> bool {
    cache.get(&key(commit)).expect("cache read").is_some()
}

fn result(job_id: i64, raw_bytes: u64) -> Pending {
    Pending::Result {
        job_id,
        upload: ResultUpload {
            metrics: BTreeMap::from([("bw_pipe.bandwidth.MB/sec".to_string(), 1.0)]),
            raw_output: "r".repeat(raw_bytes as usize),
            console: None,
            kconfig: None,
            kernel_release: "6.1.0".into(),
            tuning: BTreeMap::new(),
            started_at: 1,
            finished_at: 2,
            profile: None,
        },
    }
}

fn raw_len(p: &Pending) -> usize {
    match p {
        Pending::Result { upload, .. } => upload.raw_output.len(),
        Pending::Failure { .. } => 0,
    }
}

/// Names of the files under `dir` (not its `rejected/`).
fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[test]
fn a_full_disk_evicts_the_oldest_kernels_to_spool_an_outcome() {
    let disk = Tmpfs::mount(4 << 20);
    let cache = BuildCache::open(&disk.path().join("cache"), 1 << 30).expect("cache");
    cache_kernels(
        &cache,
        &disk.path().join("staging"),
        &["c1", "c2", "c3"],
        600 * KIB,
    );
    let spool = Spool::open(&disk.path().join("spool")).expect("spool");
    disk.fill_leaving(200 * KIB);

    let item = result(7, 700 * KIB);
    spool
        .put_making_room(&item, &cache)
        .expect("spooled once the cache made room");
    // The least recently used kernel went, and only as many as needed.
    assert!(!cached(&cache, "c1"));
    assert!(cached(&cache, "c2") && cached(&cache, "c3"));
    let pending = spool.pending().expect("spool");
    assert_eq!(pending.len(), 1);
    assert_eq!(raw_len(&pending[0].1), 700 * KIB as usize);
    assert_eq!(
        names(&disk.path().join("spool")),
        ["000000000007-result.json"]
    );
}

#[test]
fn an_outcome_that_cannot_fit_fails_clearly_and_leaves_no_half_file() {
    let disk = Tmpfs::mount(4 << 20);
    let cache = BuildCache::open(&disk.path().join("cache"), 1 << 30).expect("cache");
    cache_kernels(&cache, &disk.path().join("staging"), &["c1"], 300 * KIB);
    let spool_dir = disk.path().join("spool");
    let spool = Spool::open(&spool_dir).expect("spool");
    spool.put(&result(1, 10 * KIB)).expect("an earlier outcome");
    disk.fill_leaving(100 * KIB);

    let err = spool
        .put_making_room(&result(2, 1 << 20), &cache)
        .expect_err("no room even without the cache");
    assert!(err.is_disk_full(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("no space left on the agent's disk")
            && text.contains("after evicting 1 cached kernels")
            && text.contains(&spool_dir.display().to_string()),
        "{text}"
    );
    assert!(!cached(&cache, "c1"), "the cache gave way first");
    // The earlier outcome is whole; the failed one left nothing behind.
    assert_eq!(names(&spool_dir), ["000000000001-result.json"]);
    let pending = spool.pending().expect("spool");
    assert_eq!(raw_len(&pending[0].1), 10 * KIB as usize);
}

/// A stand-in kernel tree: the make targets the builder runs, and an image
/// of `image` bytes (big enough to fill a small disk).
fn fake_kernel_repo(dir: &Path, image: u64) -> String {
    std::fs::create_dir_all(dir).expect("mkdir");
    let makefile = format!(
        "tinyconfig defconfig:\n\techo CONFIG_FAKE=y > $(O)/.config\n\
         olddefconfig:\n\t@true\n\
         bzImage:\n\tmkdir -p $(O)/arch/x86/boot\n\
         \thead -c {image} /dev/zero > $(O)/arch/x86/boot/bzImage\n\
         \tprintf 'not an ELF\\n' > $(O)/vmlinux\n\
         kernelrelease:\n\t@echo 6.1.0-fake\n"
    );
    std::fs::write(dir.join("Makefile"), makefile).expect("Makefile");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@localhost")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@localhost")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "Makefile"]);
    git(&["commit", "-q", "-m", "fake kernel"]);
    git(&["rev-parse", "HEAD"])
}

/// The builder of a work directory on `disk`, its cache holding three old
/// kernels of `cached` bytes each; the repo is built from outside the disk.
fn builder_on(disk: &Tmpfs, cached: u64) -> Builder {
    let work = disk.path().join("work");
    let cache = BuildCache::open(&work.join("cache"), 1 << 30).expect("cache");
    if cached > 0 {
        cache_kernels(&cache, &work.join("old"), &["o1", "o2", "o3"], cached);
    }
    let mut cfg = BuildConfig::x86_64(&work, 1);
    cfg.ccache_dir = None;
    cfg.timeout = Duration::from_secs(60);
    Builder::new(cfg, cache)
}

fn build(
    builder: &Builder,
    repo_dir: &Path,
    commit: &str,
) -> Result<BuiltKernel, (FailureKind, String)> {
    let repo = RepoSpec {
        name: "linux".into(),
        url: repo_dir.display().to_string(),
        series_url: None,
    };
    let got = builder
        .kernel(&repo, &key(commit), &Cancel::new())
        .expect("no agent error");
    got.map_err(|f| (f.kind, f.detail))
}

/// Clones and checks out the repo first, so that only the build meets the full disk.
fn prime(builder: &Builder, repo_dir: &Path, commit: &str) {
    let mut other = key(commit);
    other.kconfig.name = "prime".into();
    other.kconfig.base = Some("no-such-target".into());
    let repo = RepoSpec {
        name: "linux".into(),
        url: repo_dir.display().to_string(),
        series_url: None,
    };
    let _ = builder.kernel(&repo, &other, &Cancel::new());
}

#[test]
fn a_build_that_fills_the_disk_evicts_the_cache_and_builds_again() {
    let disk = Tmpfs::mount(4 << 20);
    let src = tempfile::tempdir().expect("repo dir");
    let commit = fake_kernel_repo(src.path(), 600 * KIB);
    let builder = builder_on(&disk, 500 * KIB);
    prime(&builder, src.path(), &commit);
    disk.fill_leaving(400 * KIB);

    let kernel = build(&builder, src.path(), &commit).expect("built after making room");
    assert_eq!(kernel.release, "6.1.0-fake");
    assert_eq!(
        std::fs::metadata(kernel.image()).map(|m| m.len()).ok(),
        Some(600 * KIB),
        "the whole image"
    );
    let ids: Vec<String> = builder
        .cache()
        .entries()
        .expect("entries")
        .iter()
        .map(|k| k.key.commit.clone())
        .collect();
    assert_eq!(
        ids,
        std::slice::from_ref(&commit),
        "the old kernels made room"
    );
    assert!(builder
        .cache()
        .unbuildable(&key(&commit))
        .expect("read")
        .is_none());
}

#[test]
fn a_build_with_no_room_at_all_is_the_agents_failure_not_the_commits() {
    let disk = Tmpfs::mount(4 << 20);
    let src = tempfile::tempdir().expect("repo dir");
    let commit = fake_kernel_repo(src.path(), 600 * KIB);
    let builder = builder_on(&disk, 0);
    prime(&builder, src.path(), &commit);
    disk.fill_leaving(400 * KIB);

    let (kind, detail) = build(&builder, src.path(), &commit).expect_err("no room");
    assert_eq!(kind, FailureKind::Infrastructure, "{detail}");
    assert!(
        detail.contains("no space left on the agent's disk")
            && detail.contains(&disk.path().join("work").display().to_string()),
        "{detail}"
    );
    assert!(
        builder
            .cache()
            .unbuildable(&key(&commit))
            .expect("read")
            .is_none(),
        "a full disk says nothing about the commit"
    );
    assert!(builder.cache().entries().expect("entries").is_empty());
    // No staged half-build is left to hold the space.
    let staging = disk.path().join("work/staging");
    let left: Vec<_> = std::fs::read_dir(&staging)
        .map(|l| l.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
