//! A person at the dashboard, in a real headless Chromium driven through
//! WebDriver (chromedriver), on both backends: sign in, submit a pair from
//! the form (after a mistake the form shows), follow it to done while a
//! simulated agent uploads results, read its comparison, open its report,
//! triage the regression, try a tampered form without its CSRF token
//! (refused), and sign out.
//!
//! Skipped with a notice when Chromium or chromedriver is missing
//! (`scripts/install-test-deps` installs both), except under CI, where that
//! fails the test.

use kbot_testkit::gitrepo;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use kbot_testkit::agent::TestAgent;
use kbot_testkit::{backends, Backend, TestServer};
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const PASSWORD: &str = "hunter2 but longer";
/// One atomic job, three runs per side asked for.
const JOB: &str = "testcase: bw_pipe\nnr_threads: 1\nruns: 3\nbw_pipe:\n  size: 64k\n";
/// The KPI the simulated agent uploads, higher is better: the head is 20%
/// slower, a regression on adjacent commits, reported without a bisection.
const BASE_MB_S: f64 = 1000.0;
const HEAD_MB_S: f64 = 800.0;
/// A build log line, as an agent reports it, with markup in it.
const LOG_LINE: &str = "cc -o <b>pipe</b>.o: warning: \"unused\" & more";
/// A commit subject a careless page would turn into markup.
const SUBJECT: &str = "pipe: <script>alert('x')</script> & \"batch\" wakeups";

/// Whether the browser and its driver are here; under CI they must be.
pub(crate) fn browser_available() -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{missing:?} not installed (scripts/install-test-deps installs them)"
    );
    eprintln!("{missing:?} not installed: skipping the browser test");
    false
}

/// chromedriver on a free port, killed when dropped.
pub(crate) struct Driver {
    child: tokio::process::Child,
    url: String,
}

impl Driver {
    pub(crate) async fn start() -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{url}/status")).await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Driver { child, url }
    }

    /// A fresh headless browser session.
    pub(crate) async fn browser(&self, profile: &Path) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({"goog:chromeOptions": {"binary": CHROMIUM, "args": args}});
        let caps = caps.as_object().cloned().expect("an object");
        ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a WebDriver session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Polls `probe` until it gives a value: a click that submits a form
/// returns before the next page is there, and an element looked up in
/// between may belong to the old one.
pub(crate) async fn until<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the browser shows a page at `path`.
pub(crate) async fn at_path(b: &Client, path: &str) -> url::Url {
    until(path, || async {
        let url = b.current_url().await.ok()?;
        url.path().starts_with(path).then_some(url)
    })
    .await
}

/// The text of `css` once the page has it.
pub(crate) async fn wait_text(b: &Client, css: &str) -> String {
    until(css, || async {
        b.find(Locator::Css(css)).await.ok()?.text().await.ok()
    })
    .await
}

/// A property of `css` once the page has it and it satisfies `ok`.
async fn wait_prop(b: &Client, css: &str, prop: &str, ok: impl Fn(&str) -> bool) -> String {
    until(css, || async {
        let value = b
            .find(Locator::Css(css))
            .await
            .ok()?
            .prop(prop)
            .await
            .ok()??;
        ok(&value).then_some(value)
    })
    .await
}

/// With `KBOT_SCREENSHOT_DIR` set, saves what the browser shows as
/// `NAME.png` there (the README's pictures come from this test).
pub(crate) async fn screenshot(b: &Client, name: &str) {
    let Some(dir) = std::env::var_os("KBOT_SCREENSHOT_DIR") else {
        return;
    };
    let png = b.screenshot().await.expect("screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).expect("save screenshot");
}

/// At 760 px every page fits: the header wraps instead of running its last
/// links off screen, and nothing is wider than the window.
async fn narrow_pages_fit(b: &Client, pages: &[String]) {
    b.set_window_size(760, 900).await.expect("resize");
    for (i, page) in pages.iter().enumerate() {
        b.goto(page).await.expect("goto");
        fits(b, page).await;
        screenshot(b, &format!("narrow-{i}")).await;
    }
    b.set_window_size(1280, 900).await.expect("resize");
}

/// The page the browser shows fits its window: no header link off screen,
/// nothing wider than the window (`what` names it in a failure).
pub(crate) async fn fits(b: &Client, what: &str) {
    let overflow = "const w = document.documentElement.clientWidth; \
        const off = [...document.querySelectorAll('header a, header button')] \
            .filter(e => e.getBoundingClientRect().right > w).map(e => e.textContent); \
        return {width: w, scroll: document.documentElement.scrollWidth, off: off};";
    let got = b.execute(overflow, vec![]).await.expect("script");
    assert_eq!(
        got["off"],
        json!([]),
        "{what}: header links off screen: {got}"
    );
    assert!(
        got["scroll"].as_i64() <= got["width"].as_i64(),
        "{what}: wider than the window: {got}"
    );
}

/// The page's HTML after the browser built it.
pub(crate) async fn html(b: &Client) -> String {
    b.source().await.expect("page source")
}

pub(crate) async fn text_of(b: &Client, css: &str) -> String {
    let element = b.find(Locator::Css(css)).await;
    let element = element.unwrap_or_else(|e| panic!("no {css}: {e}"));
    element.text().await.expect("text")
}

pub(crate) async fn click(b: &Client, css: &str) {
    let element = b.find(Locator::Css(css)).await;
    let element = element.unwrap_or_else(|e| panic!("no {css}: {e}"));
    element.click().await.expect("click");
}

async fn fill(b: &Client, css: &str, value: &str) {
    let element = b.find(Locator::Css(css)).await.expect("field");
    element.clear().await.expect("clear");
    element.send_keys(value).await.expect("type");
}

/// Reloads `url` until its `css` text contains `want`; returns that text.
async fn reload_until(b: &Client, url: &str, css: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        b.goto(url).await.expect("goto");
        let text = text_of(b, css).await;
        if text.contains(want) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{css} never showed {want:?}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Plays an agent until submission `id` has no queued job left: base runs
/// read [`BASE_MB_S`], head runs [`HEAD_MB_S`].
async fn run_agent(agent: &TestAgent<'_>, head: &str, id: i64) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        match agent.lease().await {
            Some(job) => {
                assert_eq!(job.submission_id, id);
                let building = json!({"state": "building", "detail": LOG_LINE});
                let response = agent.event(job.job_id, building).await;
                assert!(response.status().is_success(), "event");
                let value = if job.commit == head {
                    HEAD_MB_S
                } else {
                    BASE_MB_S
                };
                let response = agent.upload(job.job_id, value).await;
                assert_eq!(response.status(), 200, "upload");
            }
            None => {
                let url = agent.t.url(&format!("/api/v1/submissions/{id}"));
                let detail: serde_json::Value = agent
                    .t
                    .http
                    .get(url)
                    .send()
                    .await
                    .expect("GET")
                    .json()
                    .await
                    .expect("JSON");
                if detail["submission"]["state"] == "done" {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    panic!("submission {id} did not finish");
}

/// The server, a repo of two commits, a user with a password and a
/// simulated agent's server-side registration.
async fn world(backend: Backend, repo: &Path) -> (TestServer, Vec<String>) {
    let jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../jobs");
    let t = TestServer::start_with(backend, |c| c.access.jobs_dir = jobs).await;
    let shas = gitrepo::linear_repo(repo, &["pipe: baseline", SUBJECT]);
    let (_, token) = kbot_server::auth::create_user_token(t.db(), "hana", None)
        .await
        .expect("token");
    let body = json!({"name": "linux", "url": repo.to_str()});
    let created = t
        .http
        .post(t.url("/api/v1/repos"))
        .bearer_auth(&token)
        .json(&body);
    assert_eq!(created.send().await.expect("repo add").status(), 201);
    kbot_server::access::password::add_user(t.db(), "hana", None, PASSWORD)
        .await
        .expect("password");
    (t, shas)
}

async fn sign_in(b: &Client, t: &TestServer) {
    b.goto(&t.url("/submit")).await.expect("goto");
    // Not signed in: the form sends the browser to sign in first.
    let here = b.current_url().await.expect("url");
    assert_eq!(here.path(), "/signin", "{here}");
    fill(b, "#name", "hana").await;
    fill(b, "#password", PASSWORD).await;
    click(b, "#signin button[type=submit]").await;
    // Back where sign-in was asked for, signed in.
    at_path(b, "/submit").await;
    assert_eq!(wait_text(b, "#signed-in-as").await, "hana");
}

/// Loads the example, then submits a mistake and the pasted job file.
async fn submit_pair(b: &Client, head: &str) -> i64 {
    b.find(Locator::Css("#example"))
        .await
        .expect("examples")
        .select_by_value("bw_pipe.yaml")
        .await
        .expect("select");
    click(b, "#load").await;
    wait_prop(b, "#job_file", "value", |v| v.contains("testcase: bw_pipe")).await;

    fill(b, "#job_file", JOB).await;
    fill(b, "#head", "no-such-branch").await;
    click(b, "#submit-pair").await;
    let error = wait_text(b, "#submit-error").await;
    assert!(error.contains("no-such-branch"), "{error}");
    screenshot(b, "submit-error").await;
    // What was typed is still there.
    wait_prop(b, "#job_file", "value", |v| v == JOB).await;

    fill(b, "#head", &head[..12]).await;
    click(b, "#submit-pair").await;
    let here = at_path(b, "/submissions/").await;
    let id = here.path().trim_start_matches("/submissions/");
    id.parse().expect("an id")
}

/// Finds the pair's regression in the list (filtered from the URL), checks
/// its links, and confirms it with a note.
async fn triage(b: &Client, t: &TestServer, submission: i64, head: &str) {
    let metric = "bw_pipe.bandwidth.MB%2Fsec";
    b.goto(&t.url(&format!("/regressions?state=new&metric={metric}")))
        .await
        .expect("goto");
    let list = text_of(b, "#regressions").await;
    assert!(
        list.contains(&head[..10]) && list.contains("-20.0%"),
        "{list}"
    );
    assert!(list.contains(SUBJECT), "the subject as text: {list}");
    assert!(!html(b).await.contains("<script>alert"), "escaped");
    assert!(list.contains("lkp-test") && list.contains("new"), "{list}");
    click(b, "#regressions td a").await;
    let links = wait_text(b, "#regression").await;
    assert!(
        links.contains(&format!("submission {submission}")),
        "{links}"
    );
    assert!(
        text_of(b, "#message").await.contains(&head[..10]),
        "the e-mail"
    );
    let mbox = b.find(Locator::Css("#mbox")).await.expect("mbox link");
    let mbox = mbox.prop("href").await.expect("href").expect("a link");
    let mbox = t.http.get(mbox).send().await.expect("GET mbox");
    assert_eq!(mbox.status(), 200);
    assert!(mbox.text().await.expect("mbox").starts_with("From "));

    b.find(Locator::Css("#new-state"))
        .await
        .expect("states")
        .select_by_value("confirmed")
        .await
        .expect("select");
    fill(b, "#note", "reproduced <b>locally</b>").await;
    click(b, "#set-state").await;
    let history = wait_text(b, "#history").await;
    assert!(
        history.contains("hana") && history.contains("new") && history.contains("confirmed"),
        "{history}"
    );
    assert!(
        history.contains("reproduced <b>locally</b>"),
        "escaped, shown as typed"
    );
    assert_eq!(text_of(b, "#state").await, "confirmed");
    screenshot(b, "regression").await;
    b.goto(&t.url("/regressions?state=new"))
        .await
        .expect("goto");
    assert!(
        b.find(Locator::Css("#regressions")).await.is_err(),
        "none new"
    );
    b.goto(&t.url("/regressions?state=confirmed"))
        .await
        .expect("goto");
    assert!(text_of(b, "#regressions").await.contains(&head[..10]));
    screenshot(b, "regressions").await;
}

#[tokio::test]
async fn a_person_signs_in_submits_follows_triages_and_signs_out() {
    if !browser_available() {
        return;
    }
    let driver = Driver::start().await;
    for backend in backends() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (t, shas) = world(backend, &tmp.path().join("repo")).await;
        let agent = TestAgent::enroll(&t, "box1", "lkp-test").await;
        let b = driver.browser(&tmp.path().join("profile")).await;

        sign_in(&b, &t).await;
        let id = submit_pair(&b, &shas[1]).await;
        let page = t.url(&format!("/submissions/{id}"));
        let summary = text_of(&b, "#summary").await;
        assert!(summary.contains(SUBJECT), "{backend:?}: {summary}");
        assert!(!html(&b).await.contains("<script>alert"), "escaped");

        run_agent(&agent, &shas[1], id).await;
        reload_until(&b, &page, "h1", "done").await;
        let comparison = text_of(&b, "#comparisons").await;
        assert!(
            comparison.contains("bw_pipe.bandwidth.MB/sec") && comparison.contains("different"),
            "{backend:?}: {comparison}"
        );
        assert!(comparison.contains("-20.0%"), "{comparison}");
        let events = text_of(&b, "#events").await;
        assert!(events.contains(LOG_LINE), "the log line as text: {events}");
        // The verdict where the pair is: on its page and in the list.
        let result = text_of(&b, "#result").await;
        assert!(
            result.starts_with("regression: bw_pipe.bandwidth.MB/sec −20.0% ("),
            "{backend:?}: {result}"
        );
        b.goto(&t.url("/submissions")).await.expect("goto");
        let listed = text_of(&b, "#submissions").await;
        assert!(listed.contains(&result), "{listed}");
        let narrow = [page.clone(), t.url("/submissions"), t.url("/")];
        narrow_pages_fit(&b, &narrow).await;
        b.goto(&page).await.expect("goto");

        b.goto(&t.url("/reports")).await.expect("goto");
        click(&b, "#reports a").await;
        let report = wait_text(&b, "#report").await;
        assert!(
            report.contains("regression") && report.contains(&shas[1][..10]),
            "{report}"
        );

        triage(&b, &t, id, &shas[1]).await;

        // Submit the same pair again, and cancel that before it runs.
        b.goto(&page).await.expect("goto");
        click(&b, "#resubmit").await;
        let again = until("the new submission", || async {
            let url = b.current_url().await.ok()?;
            (url.path() != format!("/submissions/{id}")).then_some(url)
        })
        .await;
        assert!(text_of(&b, "#summary").await.contains(SUBJECT));
        click(&b, "#cancel").await;
        // The form's POST redirects back to this page; waiting for that page
        // (not reloading it, which could cut the POST off) shows it landed.
        until("the cancelled submission page", || async {
            let h1 = b.find(Locator::Css("h1")).await.ok()?.text().await.ok()?;
            h1.contains("cancelled").then_some(())
        })
        .await;
        assert!(
            b.find(Locator::Css("#cancel")).await.is_err(),
            "no Cancel button once cancelled"
        );
        assert_eq!(b.current_url().await.expect("url").as_str(), again.as_str());

        // A tampered form (its CSRF field removed) is refused.
        b.goto(&page).await.expect("goto");
        let strip =
            "document.querySelectorAll('#actions input[name=csrf]').forEach(e => e.remove())";
        b.execute(strip, vec![]).await.expect("script");
        click(&b, "#resubmit").await;
        let refused = until("the 403 page", || async {
            let text = b.find(Locator::Css("main")).await.ok()?.text().await.ok()?;
            text.contains("403").then_some(text)
        })
        .await;
        assert!(refused.contains("CSRF token"), "{refused}");
        assert!(
            !html(&b).await.contains("Submission 2"),
            "nothing was submitted"
        );

        click(&b, "#sign-out").await;
        wait_text(&b, "#sign-in").await;
        b.goto(&page).await.expect("goto");
        assert!(
            b.find(Locator::Css("#resubmit")).await.is_err(),
            "no buttons signed out"
        );
        b.close().await.expect("close the browser");
        t.stop().await;
    }
}
