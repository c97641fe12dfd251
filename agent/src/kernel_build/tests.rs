//! The build's tests: compiler errors found in a log, a series commit fetched from the
//! server's git, the arm64 cross-compile settings.

use super::*;

#[test]
fn compiler_errors_are_found_above_the_tail() {
    let log = [
        "  CC      kernel/sys.o",
        "../kernel/sys.c: In function 'kbot_e2e_helper':",
        "../kernel/sys.c:10:9: error: 'kbot_e2e_limit' undeclared",
        "   10 |  return kbot_e2e_limit;",
        "      |         ^~~~~~~~~~~~~~",
        "  CC      arch/x86/kernel/smp.o",
        "make: *** [Makefile:250: __sub-make] Error 2",
    ]
    .join("\n");
    let errors = compiler_errors(&log);
    assert!(
        errors.starts_with("../kernel/sys.c: In function"),
        "{errors}"
    );
    assert!(errors.contains("'kbot_e2e_limit' undeclared"), "{errors}");
    assert!(errors.contains("^~~"), "{errors}");
    assert!(
        !errors.contains("smp.o") && !errors.contains("Error 2"),
        "{errors}"
    );
    assert_eq!(compiler_errors("  CC      a.o\nmake: *** Error 2"), "");
}

/// A series commit the upstream repo does not have is fetched from the
/// server's git (`series_url`), under `refs/kbot/`.
#[test]
fn series_commits_come_from_the_servers_git() {
    use kbot_testkit::gitrepo::git;
    let tmp = tempfile::tempdir().expect("tempdir");
    let upstream = tmp.path().join("upstream");
    std::fs::create_dir_all(&upstream).expect("mkdir");
    git(&upstream, &["init", "-q", "-b", "master"]);
    std::fs::write(upstream.join("pipe.c"), "base\n").expect("write");
    git(&upstream, &["add", "-A"]);
    git(&upstream, &["commit", "-q", "-m", "base"]);
    let server = tmp.path().join("server.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--mirror",
            upstream.to_str().expect("utf-8"),
            "server.git",
        ],
    );
    let work = tmp.path().join("work");
    git(
        tmp.path(),
        &["clone", "-q", upstream.to_str().expect("utf-8"), "work"],
    );
    std::fs::write(work.join("pipe.c"), "series\n").expect("write");
    git(&work, &["commit", "-q", "-am", "pipe: a posted patch"]);
    let series = git(&work, &["rev-parse", "HEAD"]);
    git(
        &work,
        &[
            "push",
            "-q",
            server.to_str().expect("utf-8"),
            "HEAD:refs/kbot/series/l/1",
        ],
    );
    let b = Builder::new(
        BuildConfig::x86_64(&tmp.path().join("agent"), 1),
        BuildCache::open(&tmp.path().join("cache"), 1 << 20).expect("cache"),
    );
    let mut repo = RepoSpec {
        name: "linux".into(),
        url: upstream.to_string_lossy().into_owned(),
        series_url: None,
    };
    assert!(
        b.mirror(&repo, &series).is_err(),
        "upstream lacks the series commit"
    );
    repo.series_url = Some(server.to_string_lossy().into_owned());
    let mirror = b
        .mirror(&repo, &series)
        .expect("fetched from the server's git");
    assert!(has_commit(&mirror, &series));
    let base = git(&upstream, &["rev-parse", "HEAD"]);
    assert!(on_watched_tree(&mirror, &base), "upstream's own commit");
    assert!(
        !on_watched_tree(&mirror, &series),
        "a series commit is only under refs/kbot/: not trusted"
    );
}

/// An arm64 build on an x86_64 host: ARCH=arm64, Debian's cross
/// compiler for the kernel, the plain one for host programs, the Image.
#[test]
fn an_arm64_build_cross_compiles() {
    let cfg = BuildConfig::for_guest(GuestArch::Aarch64, Path::new("/w"), 2);
    assert_eq!(cfg.arch, "arm64");
    assert_eq!(cfg.image_path, "arch/arm64/boot/Image");
    if std::env::consts::ARCH == "x86_64" {
        assert_eq!(cfg.cross_compile.as_deref(), Some("aarch64-linux-gnu-"));
        assert_eq!(cfg.kernel_cc("gcc-12"), "aarch64-linux-gnu-gcc-12");
        assert_eq!(cfg.kernel_cc("clang-14"), "clang-14");
        let b = Builder::new(
            cfg,
            BuildCache::open(&std::env::temp_dir().join("kbot-cross-test"), 1).expect("cache"),
        );
        let src = Sources {
            worktree: "/src".into(),
            mirror: "/src.git".into(),
            trusted: true,
        };
        let site = Site {
            src: &src,
            obj: Path::new("/obj"),
            ccache: Some(Ccache {
                dir: "/ccache".into(),
                writable: true,
            }),
            identity: None,
        };
        let make = b.make(
            &site,
            &("gcc-12".into(), "aarch64-linux-gnu-gcc-12".into()),
            &["Image"],
        );
        let line = sandbox::describe(&make);
        // The source and object directories at their fixed places inside.
        assert!(line.starts_with("make -C /kbot/src O=/kbot/obj"), "{line}");
        let binds: Vec<String> = make
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(binds
            .windows(3)
            .any(|w| w == ["--ro-bind", "/src", "/kbot/src"]));
        assert!(binds
            .windows(3)
            .any(|w| w == ["--bind", "/obj", "/kbot/obj"]));
        assert!(
            line.contains("ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- CC="),
            "{line}"
        );
        assert!(line.contains("aarch64-linux-gnu-gcc-12 HOSTCC="), "{line}");
        assert!(
            !line.contains("HOSTCC=aarch64") && !line.contains("HOSTCC=ccache aarch64"),
            "{line}"
        );
    }
    let x86 = BuildConfig::x86_64(Path::new("/w"), 2);
    assert_eq!(
        (x86.arch.as_str(), x86.image_target.as_str()),
        ("x86_64", "bzImage")
    );
    assert_eq!(x86.cross_compile, None);
    assert_eq!(x86.kernel_cc("gcc-12"), "gcc-12");
}
