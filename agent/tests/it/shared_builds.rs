//! Kernels built once across agents ([`kbot_agent::shared_build`]) against
//! the real server: two agents of different tbox groups need one commit;
//! one runs the build (make in the build sandbox, on a tree whose Makefile
//! stands in for the kernel's), the other downloads its files, checked by
//! digest, without running make. A commit that does not build fails the
//! second agent at once with the first one's log; a file changed in the
//! store is refused by the digest.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kbot_agent::build_cache::{BuildCache, BuiltKernel};
use kbot_agent::kernel_build::{BuildConfig, Builder};
use kbot_agent::outcome::Failure;
use kbot_agent::process::Cancel;
use kbot_agent::shared_build::SharedBuilds;
use kbot_api::agent::{FailureKind, JobState, LeasedJob, RepoSpec};
use kbot_testkit::agent::TestAgent;
use kbot_testkit::gitrepo::git;
use kbot_testkit::{TestServer, ONE_JOB};

use super::keys::tiny as key;

/// The kernel build's targets; `bzImage` fails where `broken` exists, and
/// every build leaves a mark in its object directory.
const MAKEFILE: &str = "\
tinyconfig defconfig:
\t@echo CONFIG_PIPE=y > $(O)/.config
olddefconfig:
\t@true
bzImage:
\t@if [ -e $(CURDIR)/broken ]; then echo 'fs/pipe.c:1:1: error: expected ;'; exit 1; fi
\t@mkdir -p $(O)/arch/x86/boot
\t@cat $(CURDIR)/version > $(O)/arch/x86/boot/bzImage
\t@echo built >> $(O)/made
kernelrelease:
\t@echo 6.1.0-kbot
";

/// A tree with a good commit and a broken one after it.
pub(super) fn kernel_tree(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "master"]);
    std::fs::write(dir.join("Makefile"), MAKEFILE).expect("write");
    std::fs::write(dir.join("version"), "kernel image v1\n".repeat(4096)).expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "good"]);
    let good = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("broken"), "").expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "broken"]);
    (good, git(dir, &["rev-parse", "HEAD"]))
}

/// One agent's builder in its own work directory.
pub(super) fn builder(work: &Path) -> Builder {
    std::fs::create_dir_all(work).expect("mkdir");
    let cfg = BuildConfig::x86_64(work, 1);
    cfg.check_sandbox()
        .expect("the build sandbox is usable (root: the kbot-build user exists)");
    let cache = BuildCache::open(&work.join("build-cache"), 64 << 20).expect("cache");
    Builder::new(cfg, cache)
}

/// What one agent got for its job's kernel, on a blocking thread as the
/// daemon runs jobs.
async fn kernel(
    agent: &TestAgent<'_>,
    work: PathBuf,
    job: LeasedJob,
    commit: String,
) -> Result<BuiltKernel, Failure> {
    let shared = SharedBuilds::new(agent.client(), tokio::runtime::Handle::current(), true);
    tokio::task::spawn_blocking(move || {
        let b = builder(&work);
        let on_state = |_: JobState, _: &str| {};
        shared
            .kernel(&b, &job, &key(&commit), &Cancel::new(), &on_state)
            .expect("no agent error")
    })
    .await
    .expect("join")
}

/// How many images make built in `work` (each appends a line to a mark
/// in its object directory).
pub(super) fn made(work: &Path) -> usize {
    let objs = work.join("objs");
    let Ok(dirs) = std::fs::read_dir(&objs) else {
        return 0;
    };
    dirs.flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("made")).ok())
        .map(|m| m.lines().count())
        .sum()
}

/// Leased jobs of one commit for `agents`, each job's repository the tree.
async fn jobs(agents: &[&TestAgent<'_>], tree: &Path) -> Vec<LeasedJob> {
    let mut out = Vec::new();
    for a in agents {
        let mut job = a.lease().await.expect("a job");
        job.repo = RepoSpec {
            name: "linux".into(),
            url: tree.display().to_string(),
            series_url: None,
        };
        out.push(job);
    }
    out
}

/// Ends the agents' jobs: a result, or the build failure.
async fn finish(agents: &[&TestAgent<'_>], jobs: &[LeasedJob], built: bool) {
    for (a, job) in agents.iter().zip(jobs) {
        let status = if built {
            a.upload(job.job_id, 100.0).await.status()
        } else {
            let failure = serde_json::json!({
                "state": "failed", "failure": "build_failed", "detail": "does not build"
            });
            a.event(job.job_id, failure).await.status()
        };
        assert!(status.is_success(), "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_agent_builds_and_the_other_downloads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The build user (a root agent's) reaches the work directories.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let (good, broken) = kernel_tree(&tmp.path().join("linux"));
    let artifacts = tmp.path().join("artifacts");
    let dir = artifacts.clone();
    let t = TestServer::start_with(kbot_testkit::Backend::Sqlite, |c| c.artifact_dir = dir).await;
    // The pairs test the tree's two commits: a claim is for its job's
    // commit only.
    for user in ["u1", "u2", "u3", "u4", "u5"] {
        kbot_load::seed::submission_at(t.db(), "linux", user, ONE_JOB, 1, 0, (&good, &broken))
            .await
            .expect("seed");
    }
    let a = TestAgent::enroll(&t, "a", "group-a").await;
    let b = TestAgent::enroll(&t, "b", "group-b").await;
    let (wa, wb) = (tmp.path().join("agent-a"), tmp.path().join("agent-b"));
    let leased = jobs(&[&a, &b], &tmp.path().join("linux")).await;

    let (ka, kb) = tokio::join!(
        kernel(&a, wa.clone(), leased[0].clone(), good.clone()),
        kernel(&b, wb.clone(), leased[1].clone(), good.clone()),
    );
    let (ka, kb) = (ka.expect("a's kernel"), kb.expect("b's kernel"));
    finish(&[&a, &b], &leased, true).await;
    assert_eq!(made(&wa) + made(&wb), 1, "exactly one image was built");
    let image = |k: &BuiltKernel| std::fs::read(k.image()).expect("image");
    assert_eq!(image(&ka), image(&kb));
    assert_eq!(image(&ka), "kernel image v1\n".repeat(4096).into_bytes());
    assert_eq!(ka.release, "6.1.0-kbot");
    assert_eq!(kb.release, "6.1.0-kbot");
    assert_eq!(
        std::fs::read_to_string(kb.config()).ok().as_deref(),
        Some("CONFIG_PIPE=y\n")
    );

    // The broken commit: one build, and the other agent fails at once with
    // its log.
    let leased = jobs(&[&a, &b], &tmp.path().join("linux")).await;
    let b_made = made(&wb);
    let fa = kernel(&a, wa.clone(), leased[0].clone(), broken.clone())
        .await
        .expect_err("does not build");
    assert_eq!(fa.kind, FailureKind::BuildFailed);
    let fb = kernel(&b, wb.clone(), leased[1].clone(), broken.clone())
        .await
        .expect_err("does not build");
    assert_eq!(fb.kind, FailureKind::BuildFailed);
    assert!(fb.detail.contains("error: expected ;"), "{}", fb.detail);
    let by_a = format!("built by job {}", leased[0].job_id);
    assert!(
        fb.detail.contains(&by_a),
        "a's log, from the server: {}",
        fb.detail
    );
    finish(&[&a, &b], &leased, false).await;
    assert_eq!(made(&wb), b_made, "b never ran make");

    // A third agent finds the stored image changed: refused by its digest.
    let id = key(&good).id();
    std::fs::write(artifacts.join("builds").join(&id).join("bzImage"), "evil").expect("tamper");
    let c = TestAgent::enroll(&t, "c", "group-c").await;
    let leased = jobs(&[&c], &tmp.path().join("linux")).await;
    let wc = tmp.path().join("agent-c");
    let fc = kernel(&c, wc.clone(), leased[0].clone(), good.clone())
        .await
        .expect_err("a changed image is not booted");
    assert_eq!(fc.kind, FailureKind::Infrastructure);
    assert!(fc.detail.contains("sha256"), "{}", fc.detail);
    assert_eq!(made(&wc), 0);

    // No server to ask: the agent builds the kernel itself.
    let wd = tmp.path().join("agent-d");
    let offline = kbot_api::client::AgentClient::new("http://127.0.0.1:1", Some(c.token.clone()))
        .expect("client");
    let shared = SharedBuilds::new(offline, tokio::runtime::Handle::current(), true);
    let (job, commit, dir) = (leased[0].clone(), good.clone(), wd.clone());
    let built = tokio::task::spawn_blocking(move || {
        let on_state = |_: JobState, _: &str| {};
        shared.kernel(
            &builder(&dir),
            &job,
            &key(&commit),
            &Cancel::new(),
            &on_state,
        )
    })
    .await
    .expect("join")
    .expect("no agent error");
    assert!(built.is_ok(), "built here");
    assert_eq!(made(&wd), 1);
    t.stop().await;
}
