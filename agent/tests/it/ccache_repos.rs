//! The same source in two repositories compiles from ccache the second
//! time: the build sees its tree and object directory at fixed paths
//! (`kbot_agent::kernel_build::SRC_INSIDE`, `OBJ_INSIDE`), so the compiler
//! command lines, and ccache's keys, carry no repository's path. A tree
//! whose Makefile compiles a C file with the build's `CC` stands in for the
//! kernel's; the real compiler and ccache run in the real build sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use kbot_agent::build_cache::BuildCache;
use kbot_agent::kernel_build::{BuildConfig, Builder};
use kbot_agent::process::Cancel;
use kbot_api::agent::RepoSpec;
use kbot_testkit::gitrepo::git;

use super::keys::tiny as key;

const MAKEFILE: &str = "\
tinyconfig:
\t@echo CONFIG_PIPE=y > $(O)/.config
olddefconfig:
\t@true
bzImage:
\t@mkdir -p $(O)/arch/x86/boot
\t$(CC) -O2 -c $(CURDIR)/pipe.c -o $(O)/pipe.o
\t@cp $(O)/pipe.o $(O)/arch/x86/boot/bzImage
kernelrelease:
\t@echo 6.1.0-kbot
";

const PIPE_C: &str = "\
#include <stddef.h>
size_t pipe_write(const char *buf, size_t n) { size_t s = 0; while (n--) s += (size_t)*buf++; return s; }
";

/// A repository holding the stand-in tree, committed by `who`; its commit.
pub(super) fn tree(dir: &Path, who: &str) -> String {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "master"]);
    std::fs::write(dir.join("Makefile"), MAKEFILE).expect("write");
    std::fs::write(dir.join("pipe.c"), PIPE_C).expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", who]);
    git(dir, &["rev-parse", "HEAD"])
}

/// ccache's counter `name` in `dir`.
fn ccache_stat(dir: &Path, name: &str) -> u64 {
    let out = Command::new("ccache")
        .env("CCACHE_DIR", dir)
        .arg("--print-stats")
        .output()
        .expect("ccache runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}\t")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_second_repository_of_the_same_source_hits_ccache() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The build user (a root agent's) reaches the work directories.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let first = tree(&tmp.path().join("linux"), "linux");
    let second = tree(&tmp.path().join("linux-stable"), "linux-stable");
    assert_ne!(first, second, "two commits, one source");
    let work = tmp.path().join("agent");
    std::fs::create_dir_all(&work).expect("mkdir");
    let ccache = work.join("ccache");
    let mut cfg = BuildConfig::x86_64(&work, 1);
    cfg.ccache_dir = Some(ccache.clone());
    cfg.check_sandbox()
        .expect("the build sandbox is usable (root: the kbot-build user exists)");
    let cache = BuildCache::open(&work.join("build-cache"), 64 << 20).expect("cache");
    let builder = Builder::new(cfg, cache);
    for (name, commit) in [("linux", &first), ("linux-stable", &second)] {
        let repo = RepoSpec {
            name: name.into(),
            url: tmp.path().join(name).display().to_string(),
            series_url: None,
        };
        let built = builder
            .kernel(&repo, &key(commit), &Cancel::new())
            .expect("no agent error")
            .unwrap_or_else(|f| panic!("{name} builds: {}", f.detail));
        let log = std::fs::read_to_string(built.log()).expect("build log");
        assert!(log.contains("-C /kbot/src O=/kbot/obj"), "{log}");
    }
    let hits =
        ccache_stat(&ccache, "direct_cache_hit") + ccache_stat(&ccache, "preprocessed_cache_hit");
    let misses = ccache_stat(&ccache, "cache_miss");
    assert_eq!(
        (hits, misses),
        (1, 1),
        "the second repository's compile is a hit"
    );
}
