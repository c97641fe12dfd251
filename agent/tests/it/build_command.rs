//! `kbot-agent build`: one kernel built without a server (a lab machine's
//! own kernel), its image's path printed; the second time from the build
//! cache; a commit the repository lacks is an error that names it. The
//! kernel tree is `ccache_repos`'s stand-in, built in the real sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use super::ccache_repos::tree;

fn build(work: &Path, repo: &Path, commit: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbot-agent"))
        .env("KBOT_WORK_DIR", work)
        .env("KBOT_CCACHE_DIR", work.join("ccache"))
        .env("KBOT_BACKEND", "qemu")
        .env("KBOT_LOG", "info")
        .args(["build", "--repo"])
        .arg(repo)
        .args([
            "--commit",
            commit,
            "--kconfig",
            "tinyconfig",
            "--compiler",
            "gcc",
        ])
        .output()
        .expect("kbot-agent runs")
}

#[test]
fn build_prints_the_image_then_finds_it_in_the_cache() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The build user (a root agent's) reaches the work directories.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let repo = tmp.path().join("linux");
    let commit = tree(&repo, "linux");
    let work = tmp.path().join("agent");

    let first = build(&work, &repo, &commit);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    let image = String::from_utf8_lossy(&first.stdout).trim().to_string();
    assert!(image.starts_with(&work.display().to_string()), "{image}");
    assert!(image.ends_with("/bzImage"), "{image}");
    assert!(Path::new(&image).is_file(), "{image} exists");

    let again = build(&work, &repo, &commit);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&again.stdout).trim(), image);
    assert!(
        stderr.contains("kernel found in the build cache"),
        "{stderr}"
    );

    let missing = "0123456789abcdef0123456789abcdef01234567";
    let bad = build(&work, &repo, missing);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "a missing commit fails");
    assert!(bad.stdout.is_empty(), "no path printed");
    assert!(stderr.contains(&missing[..12]), "{stderr}");
}
