//! The dashboard in a real headless Chromium: the browser loads the pages
//! from a test server, and the DOM it built and a screenshot are checked.
//! Skipped, with a notice, when `/usr/bin/chromium` is not installed
//! (`scripts/install-test-deps` installs it), except under CI, where a
//! missing browser fails the test.

use kbot_testkit::gitrepo;

use std::path::Path;
use std::process::Output;

use kbot_testkit::{Backend, TestServer};
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium with its own profile directory; `extra` selects
/// the output (`--dump-dom` or `--screenshot=FILE`).
async fn chromium(profile: &Path, extra: &str, url: &str) -> Output {
    tokio::process::Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(extra)
        .arg(url)
        .kill_on_drop(true)
        .output()
        .await
        .expect("chromium runs")
}

#[tokio::test]
async fn chromium_renders_the_dashboard() {
    if !Path::new(CHROMIUM).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CHROMIUM} is not installed (scripts/install-test-deps installs it)"
        );
        eprintln!("{CHROMIUM} is not installed: skipping the browser test");
        return;
    }
    let server = TestServer::start(Backend::Sqlite).await;
    let (_, token) = kbot_server::auth::create_user_token(server.db(), "carol", None)
        .await
        .expect("token");
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    gitrepo::linear_repo(&repo, &["pipe: baseline", "pipe: batch wakeups"]);
    server.enroll("box1", "lkp-test").await;
    for (path, body) in [
        (
            "/api/v1/repos",
            json!({"name": "linux", "url": repo.to_str()}),
        ),
        (
            "/api/v1/submissions",
            json!({"repo": "linux", "head": "main",
                   "job_file": "testcase: bw_pipe\nbw_pipe:\n  size: 64k\n"}),
        ),
        (
            "/api/v1/watches",
            json!({"repo": "linux", "branch": "main", "interval_secs": 3600,
                   "job_file": "testcase: bw_pipe\nbw_pipe:\n  size: 64k\n"}),
        ),
    ] {
        let resp = server
            .http
            .post(server.url(path))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), 201, "{path}");
    }

    let profile = tmp.path().join("profile");
    let dom = chromium(&profile, "--dump-dom", &server.url("/submissions")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<table id=\"submissions\">"), "{dom}");
    assert!(
        dom.contains("pipe: batch wakeups") && dom.contains("carol"),
        "{dom}"
    );

    let dom = chromium(&profile, "--dump-dom", &server.url("/submissions/1")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("Submission 1") && dom.contains("<table id=\"jobs\">"),
        "{dom}"
    );

    let dom = chromium(&profile, "--dump-dom", &server.url("/agents")).await;
    assert!(String::from_utf8_lossy(&dom.stdout).contains("box1"));

    let dom = chromium(&profile, "--dump-dom", &server.url("/watches")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("<table id=\"watches\">") && dom.contains("bw_pipe"),
        "{dom}"
    );
    let dom = chromium(&profile, "--dump-dom", &server.url("/bisections")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("No regression has been bisected yet"), "{dom}");

    // The reading pages: overview, machines, comparison, trends.
    let dom = chromium(&profile, "--dump-dom", &server.url("/")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("<table id=\"groups\">") && dom.contains("lkp-test"),
        "{dom}"
    );
    assert!(
        dom.contains("Queue: ") && dom.contains(" waiting") && dom.contains("No job is leased"),
        "{dom}"
    );
    let dom = chromium(&profile, "--dump-dom", &server.url("/machines")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("box1") && dom.contains("16 threads (2 sockets × 8 cores)"),
        "{dom}"
    );
    assert!(dom.contains("No failure"), "{dom}");
    let dom = chromium(
        &profile,
        "--dump-dom",
        &server.url("/submissions/1/compare"),
    )
    .await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("Comparison of") && dom.contains("No metric matches"),
        "{dom}"
    );
    let dom = chromium(&profile, "--dump-dom", &server.url("/trends")).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("<form method=\"get\" id=\"filters\"") && dom.contains("No finished run"),
        "{dom}"
    );

    let shot = tmp.path().join("submission.png");
    let out = chromium(
        &profile,
        &format!("--screenshot={}", shot.display()),
        &server.url("/submissions/1"),
    )
    .await;
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    // A blank page compresses to a few kB; a rendered table does not.
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
    if let Ok(dir) = std::env::var("KBOT_SCREENSHOT_DIR") {
        std::fs::copy(&shot, Path::new(&dir).join("submission.png")).expect("keep screenshot");
    }
    server.stop().await;
}
