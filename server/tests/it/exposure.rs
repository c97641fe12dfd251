//! What kbot shows and keeps of outsiders' work, and what an enrolment
//! token or an agent may do, on SQLite and PostgreSQL: the server's git
//! answers only agents and users (also behind the sign-in wall), pending
//! reports and recipients are hidden from anonymous readers (on the
//! regression and bisection pages and API too), no answer carries a URL's
//! credentials (repos, lists, git's errors), the retention pass deletes the refs of finished
//! series and old raw replies, enrolment tokens are bound to a name, a job's
//! events are capped, a kexec agent gets no list work unless disposable,
//! and the flame graph is served under a strict CSP and stays valid XML.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kbot_api::agent::{BootBackend, EnrollRequest, FoldedProfile};
use kbot_load::seed;
use kbot_server::mail::outbox::{self, OutboxState};
use kbot_server::repos;
use kbot_server::time::now_ms;
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::gitrepo::{git, linear_repo};
use kbot_testkit::{backends, hardware, TestServer};
use serde_json::json;

use super::profiles::{position, upload, JOB_FILE};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// Registers `dir`'s repository as `name`; returns the user token used.
async fn register(t: &TestServer, name: &str, dir: &Path) -> String {
    let (_, token) = kbot_server::auth::create_user_token(t.db(), "alice", None)
        .await
        .expect("user token");
    let response = t
        .http
        .post(t.url("/api/v1/repos"))
        .bearer_auth(&token)
        .json(&json!({"name": name, "url": dir.display().to_string()}))
        .send()
        .await
        .expect("register");
    assert_eq!(response.status(), 201, "register {name}");
    token
}

/// The mirror's directory of repo `name`.
fn mirror_dir(t: &TestServer, name: &str) -> PathBuf {
    repos::mirror_for(&t.server.state, name)
        .path()
        .to_path_buf()
}

async fn status(t: &TestServer, path: &str, token: Option<&str>) -> u16 {
    let mut request = t.http.get(t.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("GET").status().as_u16()
}

/// `git fetch` of `refspec` from the server's git into a new bare repo,
/// with `token` as the agent sends it; whether git succeeded. (Off the
/// test's runtime, which serves the request.)
async fn fetch(t: &TestServer, repo: &str, refspec: &str, token: Option<&str>) -> bool {
    let url = t.url(&format!("/git/{repo}.git"));
    let (refspec, token) = (refspec.to_owned(), token.map(str::to_owned));
    tokio::task::spawn_blocking(move || fetch_blocking(&url, &refspec, token.as_deref()))
        .await
        .expect("fetch task")
}

fn fetch_blocking(url: &str, refspec: &str, token: Option<&str>) -> bool {
    let tmp = tempfile::tempdir().expect("tempdir");
    git(tmp.path(), &["init", "-q", "--bare", "x.git"]);
    let mut cmd = std::process::Command::new("git");
    cmd.arg("--git-dir").arg(tmp.path().join("x.git"));
    if let Some(token) = token {
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env(
                "GIT_CONFIG_VALUE_0",
                format!("Authorization: Bearer {token}"),
            );
    }
    cmd.args(["fetch", "-q", url, refspec])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git fetch runs")
        .status
        .success()
}

/// With reading behind sign-in, `/git/` is not redirected: an agent's token
/// (or a user's) fetches, anonymous and an enrolment token get 401; with
/// `KBOT_GIT_PUBLIC` anyone fetches.
#[tokio::test]
async fn git_answers_agents_and_users_behind_the_wall() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.access.read_requires_sign_in = true).await;
        let upstream = tempfile::tempdir().expect("tempdir");
        let shas = linear_repo(upstream.path(), &["one", "two"]);
        let user = register(&t, "real", upstream.path()).await;
        repos::mirror_for(&t.server.state, "real")
            .set_ref("refs/kbot/series/l/1", &shas[1])
            .await
            .expect("series ref");
        let agent = t.enroll("box-git", "grp").await;
        let enrolment = t.enrollment_token().await;

        let refs = "/git/real.git/info/refs";
        assert_eq!(status(&t, refs, None).await, 401, "{backend:?}");
        assert_eq!(status(&t, refs, Some(&enrolment)).await, 401);
        assert_eq!(status(&t, refs, Some(&agent.agent_token)).await, 200);
        assert_eq!(status(&t, refs, Some(&user)).await, 200);
        let series = "+refs/kbot/series/l/1:refs/kbot/series/l/1";
        assert!(!fetch(&t, "real", series, None).await, "{backend:?}");
        assert!(fetch(&t, "real", series, Some(&agent.agent_token)).await);
        t.stop().await;

        let t = TestServer::start_with(backend, |c| c.access.git_public = true).await;
        register(&t, "real", upstream.path()).await;
        repos::mirror_for(&t.server.state, "real")
            .set_ref("refs/kbot/series/l/1", &shas[1])
            .await
            .expect("series ref");
        assert_eq!(status(&t, refs, None).await, 200, "{backend:?}");
        assert!(fetch(&t, "real", series, None).await, "{backend:?}");
        t.stop().await;
    }
}

/// The page and API of reports, anonymous: a pending report has no link,
/// no Message-ID and no page; a sent one and one written while mail is off
/// (the dashboard is its only copy) have theirs; no recipient appears
/// anywhere. A signed-in user sees all.
#[tokio::test]
async fn anonymous_readers_see_no_pending_report_and_no_recipient() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let pending = "pending.1@kbot.test";
        let sent = "sent.1@kbot.test";
        let off = "off.1@kbot.test";
        for (id, state) in [
            (pending, OutboxState::Pending),
            (sent, OutboxState::Sent),
            (off, OutboxState::MailOff),
        ] {
            let mut tx = t.db().begin().await.expect("begin");
            outbox::insert(&mut tx, &kbot_testkit::outbox_report(id, state))
                .await
                .expect("insert");
            tx.commit().await.expect("commit");
        }
        let text = |path: &str, cookie: Option<String>| {
            let mut request = t.http.get(t.url(path));
            if let Some(cookie) = cookie {
                request = request.header("cookie", cookie);
            }
            async move {
                let response = request.send().await.expect("GET");
                let status = response.status().as_u16();
                (status, response.text().await.expect("body"))
            }
        };

        let (code, list) = text("/reports", None).await;
        assert_eq!(code, 200, "{backend:?}");
        assert!(
            !list.contains(&format!("href=\"/reports/{pending}\"")),
            "{list}"
        );
        assert!(!list.contains(pending), "{list}");
        for public in [sent, off] {
            assert!(
                list.contains(&format!("href=\"/reports/{public}\"")),
                "{list}"
            );
        }
        assert!(!list.contains("dev@example.org"), "{list}");
        assert_eq!(text(&format!("/reports/{pending}"), None).await.0, 404);
        assert_eq!(text(&format!("/reports/{pending}/mbox"), None).await.0, 404);
        for public in [sent, off] {
            let (code, page) = text(&format!("/reports/{public}"), None).await;
            assert_eq!(code, 200, "{page}");
            assert!(!page.contains("dev@example.org"), "{page}");
        }
        let (_, api) = text("/api/v1/reports", None).await;
        assert!(
            !api.contains(pending) && !api.contains("dev@example.org"),
            "{api}"
        );

        let (user_id, token) = kbot_server::auth::create_user_token(t.db(), "ops", None)
            .await
            .expect("user");
        let session =
            kbot_server::access::session::create(t.db(), user_id, Duration::from_secs(600))
                .await
                .expect("session");
        let cookie = format!("{}={session}", kbot_server::access::session::COOKIE);
        let (_, list) = text("/reports", Some(cookie.clone())).await;
        assert!(
            list.contains(&format!("href=\"/reports/{pending}\"")),
            "{list}"
        );
        assert!(list.contains("dev@example.org"), "{list}");
        assert_eq!(
            text(&format!("/reports/{pending}"), Some(cookie)).await.0,
            200
        );
        let api = t.http.get(t.url("/api/v1/reports")).bearer_auth(&token);
        let api = api.send().await.expect("GET").text().await.expect("body");
        assert!(
            api.contains(pending) && api.contains("dev@example.org"),
            "{api}"
        );
        t.stop().await;
    }
}

/// A GET of `path`, anonymous or as `who` (a session cookie or a user
/// token): its status and body.
async fn read_as(t: &TestServer, path: &str, who: &Who) -> (u16, String) {
    let mut request = t.http.get(t.url(path));
    match who {
        Who::Anonymous => {}
        Who::Cookie(cookie) => request = request.header("cookie", cookie),
        Who::Token(token) => request = request.bearer_auth(token),
    }
    let response = request.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

enum Who {
    Anonymous,
    Cookie(String),
    Token(String),
}

/// A session cookie and a user token of a new user `name`.
async fn signed_in(t: &TestServer, name: &str) -> (String, String) {
    let (user_id, token) = kbot_server::auth::create_user_token(t.db(), name, None)
        .await
        .expect("user");
    let session = kbot_server::access::session::create(t.db(), user_id, Duration::from_secs(600))
        .await
        .expect("session");
    let cookie = format!("{}={session}", kbot_server::access::session::COOKIE);
    (cookie, token)
}

/// A regression of a seeded pair, found by bisection `b` and reported in
/// report `message_id` (queued `pending`): the regression's id and the
/// bisection's.
async fn reported_regression(t: &TestServer, message_id: &str) -> (i64, i64) {
    let seeded = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
        .await
        .expect("seed");
    let job = seeded.atomic_job_ids[0];
    let mut tx = t.db().begin().await.expect("begin");
    let bisection: i64 = sqlx::query_scalar(
        "INSERT INTO bisections (repo_id, origin_submission_id, origin_atomic_job_id, \
             good_commit_id, bad_commit_id, metric, tbox_group, job_key, dedup_key, state, \
             first_bad_commit_id, runs_cap, created_at, finished_at) \
         SELECT repo_id, id, $1, base_commit_id, head_commit_id, 'bw_pipe.bandwidth', 'grp', \
             'bw_pipe', $2, 'reported', head_commit_id, 10, $3, $4 FROM submissions \
         WHERE id = $5 RETURNING id",
    )
    .bind(job)
    .bind(format!("exposure-{message_id}"))
    .bind(now_ms())
    .bind(now_ms())
    .bind(seeded.submission_id)
    .fetch_one(&mut *tx)
    .await
    .expect("bisection");
    let mut report = kbot_testkit::outbox_report(message_id, OutboxState::Pending);
    report.submission_id = Some(seeded.submission_id);
    report.atomic_job_id = Some(job);
    report.bisection_id = Some(bisection);
    let report_id = outbox::insert(&mut tx, &report)
        .await
        .expect("report")
        .expect("queued");
    let repo_id: i64 = sqlx::query_scalar("SELECT repo_id FROM submissions WHERE id = $1")
        .bind(seeded.submission_id)
        .fetch_one(&mut *tx)
        .await
        .expect("repo");
    let regression = kbot_server::regressions::record(
        &mut tx,
        &kbot_server::regressions::NewRegression {
            repo_id,
            submission_id: seeded.submission_id,
            atomic_job_id: job,
            metric: "bw_pipe.bandwidth",
            tbox_group: "grp",
            change_pct: Some(-9.1),
            bisection_id: Some(bisection),
            report_id: Some(report_id),
        },
    )
    .await
    .expect("regression")
    .expect("recorded");
    tx.commit().await.expect("commit");
    (regression, bisection)
}

/// The regression and bisection pages and their API, anonymous: a pending
/// report's Message-ID (and its text) is nowhere, the pages say a report
/// waits; a signed-in user (session or user token) sees it; once the report
/// is sent anyone does, without its recipients.
#[tokio::test]
async fn anonymous_readers_see_no_message_id_of_a_pending_report() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let message_id = "pending.regression.1@kbot.test";
        let (regression, bisection) = reported_regression(&t, message_id).await;
        let (cookie, token) = signed_in(&t, "ops").await;
        let (cookie, token) = (Who::Cookie(cookie), Who::Token(token));
        // Each names the report; the bisections list names no report.
        let paths = [
            "/regressions".to_owned(),
            format!("/regressions/{regression}"),
            "/api/v1/regressions".to_owned(),
            format!("/bisections/{bisection}"),
            "/api/v1/bisections".to_owned(),
            format!("/api/v1/bisections/{bisection}"),
        ];
        for path in paths.iter().chain(["/bisections".to_owned()].iter()) {
            let (code, body) = read_as(&t, path, &Who::Anonymous).await;
            assert_eq!(code, 200, "{backend:?} {path}: {body}");
            assert!(!body.contains(message_id), "{backend:?} {path}: {body}");
            assert!(!body.contains("dev@example.org"), "{path}: {body}");
        }
        for page in [
            format!("/regressions/{regression}"),
            format!("/bisections/{bisection}"),
        ] {
            let (_, body) = read_as(&t, &page, &Who::Anonymous).await;
            assert!(body.contains("id=\"report-waiting\""), "{page}: {body}");
        }
        let (_, api) = read_as(&t, "/api/v1/regressions", &Who::Anonymous).await;
        let rows: serde_json::Value = serde_json::from_str(&api).expect("json");
        assert_eq!(
            rows[0]["report_message_id"],
            serde_json::Value::Null,
            "{api}"
        );
        assert_eq!(rows[0]["report_state"], "pending", "{api}");
        for who in [&cookie, &token] {
            for path in &paths {
                let (code, body) = read_as(&t, path, who).await;
                assert_eq!(code, 200, "{backend:?} {path}: {body}");
                assert!(body.contains(message_id), "{backend:?} {path}: {body}");
            }
        }
        let (_, page) = read_as(&t, &format!("/regressions/{regression}"), &cookie).await;
        assert!(page.contains("dev@example.org"), "the whole e-mail: {page}");

        sqlx::query("UPDATE report_outbox SET state = 'sent' WHERE message_id = $1")
            .bind(message_id)
            .execute(t.db().write())
            .await
            .expect("sent");
        for path in &paths {
            let (_, body) = read_as(&t, path, &Who::Anonymous).await;
            assert!(body.contains(message_id), "{backend:?} {path}: {body}");
            assert!(!body.contains("dev@example.org"), "{path}: {body}");
        }
        let (_, page) = read_as(&t, &format!("/regressions/{regression}"), &Who::Anonymous).await;
        assert!(
            page.contains("id=\"message\""),
            "the e-mail, public: {page}"
        );
        t.stop().await;
    }
}

/// `/api/v1/repos`, `/api/v1/lists`, their pages and the list's events
/// hold no password of a URL registered with one, and neither do the
/// errors of registering an unreachable one (git's words included).
#[tokio::test]
async fn no_response_carries_url_credentials() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        sqlx::query("UPDATE repos SET url = $1 WHERE name = 'linux'")
            .bind("https://bot:s3cret@git.example.org/linux.git")
            .execute(t.db().write())
            .await
            .expect("url");
        let list = insert_list(
            &t,
            "netdev",
            "https://bot:s3cret@lore.example.org/netdev/",
            seeded.submission_id,
        )
        .await;
        let (cookie, user) = signed_in(&t, "ops").await;
        let token = Who::Token(user.clone());
        for who in [&Who::Anonymous, &Who::Cookie(cookie), &token] {
            for path in [
                "/api/v1/repos".to_owned(),
                "/api/v1/repos/linux".to_owned(),
                "/api/v1/lists".to_owned(),
                format!("/api/v1/lists/{list}"),
                "/lists".to_owned(),
            ] {
                let (code, body) = read_as(&t, &path, who).await;
                assert_eq!(code, 200, "{backend:?} {path}: {body}");
                assert!(!body.contains("s3cret"), "{backend:?} {path}: {body}");
            }
        }
        let (_, repos) = read_as(&t, "/api/v1/repos/linux", &token).await;
        assert!(
            repos.contains("https://git.example.org/linux.git"),
            "{repos}"
        );
        let (_, lists) = read_as(&t, "/api/v1/lists", &token).await;
        assert!(
            lists.contains("https://lore.example.org/netdev/"),
            "{lists}"
        );

        // Nothing listens on port 9: git fails, and says where it tried.
        let unreachable = "https://bot:s3cret@127.0.0.1:9/x.git";
        let response = t
            .http
            .post(t.url("/api/v1/repos"))
            .bearer_auth(&user)
            .json(&json!({"name": "private", "url": unreachable}))
            .send()
            .await
            .expect("register");
        assert_eq!(response.status(), 422, "{backend:?}");
        let body = response.text().await.expect("body");
        assert!(body.contains("127.0.0.1:9"), "{body}");
        assert!(!body.contains("s3cret"), "{backend:?}: {body}");
        let response = t
            .http
            .post(t.url("/api/v1/lists"))
            .bearer_auth(&user)
            .json(&json!({
                "name": "private",
                "archive": "https://bot:s3cret@127.0.0.1:9/private/",
                "repo": "linux",
                "job_file": seed::LOAD_JOB_FILE,
            }))
            .send()
            .await
            .expect("add list");
        let status = response.status().as_u16();
        let body = response.text().await.expect("body");
        assert!(status >= 400, "{backend:?}: {status} {body}");
        assert!(!body.contains("s3cret"), "{backend:?}: {body}");
        t.stop().await;
    }
}

/// `/lists` prints a list's archive URL without its `user:password@`.
#[tokio::test]
async fn archive_urls_are_shown_without_credentials() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let archive = "https://bot:s3cret@lore.example.org/netdev/";
        insert_list(&t, "netdev", archive, seeded.submission_id).await;
        let page = t.http.get(t.url("/lists")).send().await.expect("GET");
        let page = page.text().await.expect("page");
        assert!(page.contains("https://lore.example.org/netdev/"), "{page}");
        assert!(!page.contains("s3cret"), "{backend:?}: {page}");
        t.stop().await;
    }
}

/// A list of the repo and user of submission `of`, never due: the worker
/// leaves it alone. Its id.
async fn insert_list(t: &TestServer, name: &str, archive: &str, of: i64) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO lists (name, archive, archive_kind, repo_id, branch, job_name, job_file, \
             runs_cap, interval_secs, wait_secs, user_id, next_check_at, created_at) \
         SELECT $1, $2, 'mbox', repo_id, 'master', job_name, job_file, 3, 300, 3600, user_id, \
             $3, $4 FROM submissions WHERE id = $5 RETURNING id",
    )
    .bind(name)
    .bind(archive)
    .bind(i64::MAX / 2)
    .bind(now_ms())
    .bind(of)
    .fetch_one(t.db().write())
    .await
    .expect("list")
}

async fn insert_series(t: &TestServer, list_id: i64, key: &str, state: &str, at: i64) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO series (list_id, series_key, version, total, rfc, title, author_name, \
             author_address, state, posted_at, last_part_at, created_at, updated_at) \
         VALUES ($1, $2, 1, 1, 0, 'pipe: a patch', 'Ann', 'ann@example.org', $3, $4, $4, $4, $4) \
         RETURNING id",
    )
    .bind(list_id)
    .bind(key)
    .bind(state)
    .bind(at)
    .fetch_one(t.db().write())
    .await
    .expect("series")
}

async fn insert_message(t: &TestServer, list_id: i64, id: &str, is_patch: bool, read_at: i64) {
    sqlx::query(
        "INSERT INTO list_messages (list_id, message_id, refs, subject, from_name, \
             from_address, recipients, date_ms, is_patch, has_diff, raw, origin, read_at) \
         VALUES ($1, $2, '', 'Re: x', 'Ann', 'ann@example.org', '', $3, $4, 0, $5, 'o', $3)",
    )
    .bind(list_id)
    .bind(id)
    .bind(read_at)
    .bind(i64::from(is_patch))
    .bind(b"From: Ann <ann@example.org>\n\nhello\n".to_vec())
    .execute(t.db().write())
    .await
    .expect("message");
}

async fn raw_len(t: &TestServer, id: &str) -> usize {
    let raw: Vec<u8> = sqlx::query_scalar("SELECT raw FROM list_messages WHERE message_id = $1")
        .bind(id)
        .fetch_one(t.db().read())
        .await
        .expect("raw");
    raw.len()
}

/// Ten series finished long ago lose their refs (and an orphan test ref
/// goes); a fresh one and one still testing keep theirs; refs are packed
/// and `info/refs` no longer lists what went. Old raw replies are emptied,
/// patches and fresh replies kept.
#[tokio::test]
async fn retention_deletes_old_series_refs_and_raw_replies() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let upstream = tempfile::tempdir().expect("tempdir");
        let shas = linear_repo(upstream.path(), &["one"]);
        register(&t, "real", upstream.path()).await;
        let repo_id: i64 = sqlx::query_scalar("SELECT id FROM repos WHERE name = 'real'")
            .fetch_one(t.db().read())
            .await
            .expect("repo");
        let seeded = seed::submission(t.db(), "real", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let list = insert_list(&t, "netdev", "/srv/netdev", seeded.submission_id).await;
        assert_eq!(repo_id_of_list(&t, list).await, repo_id);
        let now = now_ms();
        let old = now - 100 * DAY_MS;
        let mirror = repos::mirror_for(&t.server.state, "real");
        for i in 0..10 {
            let id = insert_series(&t, list, &format!("old{i}"), "tested", old).await;
            let name = format!("refs/kbot/series/netdev/{id}");
            mirror.set_ref(&name, &shas[0]).await.expect("ref");
            if i == 0 {
                mirror
                    .set_ref(&format!("{name}-prerequisites"), &shas[0])
                    .await
                    .expect("ref");
            }
        }
        let fresh = insert_series(&t, list, "fresh", "tested", now).await;
        let testing = insert_series(&t, list, "testing", "testing", old).await;
        for id in [fresh, testing] {
            let name = format!("refs/kbot/series/netdev/{id}");
            mirror.set_ref(&name, &shas[0]).await.expect("ref");
        }
        mirror
            .set_ref("refs/kbot/tests/999/0123456789ab", &shas[0])
            .await
            .expect("ref");
        insert_message(&t, list, "old-reply@x", false, old).await;
        insert_message(&t, list, "old-patch@x", true, old).await;
        insert_message(&t, list, "new-reply@x", false, now).await;

        let pruned = kbot_server::lists::retention::prune(&t.server.state, now)
            .await
            .expect("prune");
        assert_eq!((pruned.refs, pruned.raw_mails), (12, 1), "{backend:?}");
        let left = mirror.ref_names("refs/kbot/").await.expect("refs");
        let kept = [
            format!("refs/kbot/series/netdev/{fresh}"),
            format!("refs/kbot/series/netdev/{testing}"),
        ];
        assert_eq!(left, kept, "{backend:?}");
        let dir = mirror_dir(&t, "real");
        assert!(dir.join("packed-refs").is_file(), "refs are packed");
        let info = std::fs::read_to_string(dir.join("info/refs")).expect("info/refs");
        assert_eq!(info.matches("refs/kbot/").count(), 2, "{info}");
        assert_eq!(raw_len(&t, "old-reply@x").await, 0, "{backend:?}");
        assert!(raw_len(&t, "old-patch@x").await > 0);
        assert!(raw_len(&t, "new-reply@x").await > 0);

        let again = kbot_server::lists::retention::prune(&t.server.state, now)
            .await
            .expect("prune");
        assert_eq!((again.refs, again.raw_mails), (0, 0), "a second pass");
        t.stop().await;
    }
}

async fn repo_id_of_list(t: &TestServer, list: i64) -> i64 {
    sqlx::query_scalar("SELECT repo_id FROM lists WHERE id = $1")
        .bind(list)
        .fetch_one(t.db().read())
        .await
        .expect("list repo")
}

fn enrol_request(token: &str, name: &str, group: &str) -> EnrollRequest {
    EnrollRequest {
        enrollment_token: token.into(),
        name: name.into(),
        tbox_group: group.into(),
        backend: BootBackend::Qemu,
        hardware: hardware(),
        host: None,
    }
}

async fn enrol(t: &TestServer, request: &EnrollRequest) -> reqwest::Response {
    t.http
        .post(t.url("/api/v1/agents/enroll"))
        .json(request)
        .send()
        .await
        .expect("enroll")
}

async fn bound_token(t: &TestServer, name: Option<&str>, group: Option<&str>) -> String {
    let binding = kbot_server::auth::EnrolmentBinding {
        agent_name: name.map(str::to_owned),
        tbox_group: group.map(str::to_owned),
        disposable: false,
    };
    kbot_server::auth::create_bound_enrollment_token(t.db(), "test", &binding)
        .await
        .expect("token")
}

/// A token bound to agent-a enrols no other name or group (401); an
/// unbound token cannot take over agent-a (409, agent-a's token keeps
/// working, and the refused token stays unused); a token bound to agent-a
/// enrols it again.
#[tokio::test]
async fn enrolment_tokens_are_bound_to_a_name() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let a = t.enroll("agent-a", "grp").await;
        let agent_a = TestAgent {
            t: &t,
            token: a.agent_token.clone(),
            id: a.agent_id,
        };

        let for_a = bound_token(&t, Some("agent-a"), Some("grp")).await;
        let other_name = enrol(&t, &enrol_request(&for_a, "agent-b", "grp")).await;
        assert_eq!(error_code(other_name).await.0, 401, "{backend:?}");
        let other_group = enrol(&t, &enrol_request(&for_a, "agent-a", "grp-2")).await;
        assert_eq!(error_code(other_group).await.0, 401, "{backend:?}");

        let unbound = t.enrollment_token().await;
        let taken = enrol(&t, &enrol_request(&unbound, "agent-a", "grp")).await;
        let (code, kind) = error_code(taken).await;
        assert_eq!((code, kind.as_str()), (409, "conflict"), "{backend:?}");
        assert!(
            agent_a.lease().await.is_none(),
            "agent-a's token still works"
        );
        let new_name = enrol(&t, &enrol_request(&unbound, "agent-c", "grp")).await;
        assert_eq!(new_name.status(), 200, "the refused token was not used up");

        let again = enrol(&t, &enrol_request(&for_a, "agent-a", "grp")).await;
        assert_eq!(again.status(), 200, "{backend:?}");
        t.stop().await;
    }
}

/// Past `KBOT_MAX_EVENTS_PER_JOB` events of a job (its lease is one), the
/// next progress event is 429 `too_many_events`; a failure is still taken.
#[tokio::test]
async fn events_per_job_are_capped() {
    for backend in backends() {
        let t = TestServer::start_with(backend, |c| c.max_events_per_job = 10).await;
        seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let agent = TestAgent::enroll(&t, "box-ev", "grp").await;
        let job = agent.lease().await.expect("a job");
        let running = json!({"state": "running", "detail": "step"});
        for n in 2..=10 {
            let response = agent.event(job.job_id, running.clone()).await;
            assert_eq!(response.status(), 204, "event {n}, {backend:?}");
        }
        let refused = agent.event(job.job_id, running.clone()).await;
        let (code, kind) = error_code(refused).await;
        assert_eq!(
            (code, kind.as_str()),
            (429, "too_many_events"),
            "{backend:?}"
        );
        let failed = json!({"state": "failed", "failure": "boot_failed", "detail": "x"});
        assert_eq!(agent.event(job.job_id, failed).await.status(), 204);
        t.stop().await;
    }
}

/// A pair whose head kbot applied from mail (committed by the robot's
/// address) is not leased to a kexec agent, which still gets other work; a
/// kexec agent enrolled with a `disposable` token gets it.
#[tokio::test]
async fn list_work_goes_to_no_kexec_agent_unless_disposable() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let robot = t.server.state.config.mail.report.robot_address.clone();
        let mail = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 5)
            .await
            .expect("seed");
        // The head becomes a commit kbot made with `git am`.
        let applied: i64 = sqlx::query_scalar(
            "INSERT INTO commits (repo_id, sha, parents, subject, author_name, author_email, \
                 authored_at, committed_at, committer_name, committer_email) \
             SELECT repo_id, $1, sha, 'pipe: a posted patch', 'Ann', 'ann@example.org', \
                 authored_at, committed_at, 'kbot', $2 FROM commits WHERE id = $3 RETURNING id",
        )
        .bind(format!("{:040x}", 0xa11ed))
        .bind(&robot)
        .bind(mail.base_commit_id)
        .fetch_one(t.db().write())
        .await
        .expect("applied commit");
        sqlx::query("UPDATE submissions SET head_commit_id = $1 WHERE id = $2")
            .bind(applied)
            .bind(mail.submission_id)
            .execute(t.db().write())
            .await
            .expect("mail pair");

        let kexec = t.enroll_as("metal-1", "metal", BootBackend::Kexec).await;
        let kexec = TestAgent {
            t: &t,
            token: kexec.agent_token,
            id: kexec.agent_id,
        };
        assert!(
            kexec.lease().await.is_none(),
            "{backend:?}: list work leased"
        );

        let user = seed::submission(t.db(), "linux", "bob", seed::LOAD_JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let leased = kexec.lease().await.expect("user work");
        assert_eq!(leased.submission_id, user.submission_id, "{backend:?}");

        let binding = kbot_server::auth::EnrolmentBinding {
            agent_name: Some("metal-2".into()),
            tbox_group: Some("metal-spare".into()),
            disposable: true,
        };
        let token = kbot_server::auth::create_bound_enrollment_token(t.db(), "spare", &binding)
            .await
            .expect("token");
        let mut request = enrol_request(&token, "metal-2", "metal-spare");
        request.backend = BootBackend::Kexec;
        let spare = enrol(&t, &request).await;
        assert_eq!(spare.status(), 200);
        let spare: kbot_api::agent::EnrollResponse = spare.json().await.expect("body");
        let spare = TestAgent {
            t: &t,
            token: spare.agent_token,
            id: spare.agent_id,
        };
        let leased = spare.lease().await.expect("list work");
        assert_eq!(leased.submission_id, mail.submission_id, "{backend:?}");
        t.stop().await;
    }
}

/// A profile whose frames hold markup and a control character: the flame
/// graph escapes the markup, replaces the control, parses as XML, and is
/// served with a CSP that runs nothing.
#[tokio::test]
async fn the_flame_graph_of_hostile_symbols_is_inert_valid_xml() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = seed::submission(t.db(), "linux", "alice", JOB_FILE, 1, 0)
            .await
            .expect("seed");
        let agent = TestAgent::enroll(&t, "box-svg", "grp").await;
        let folded = "main;\"><script>x</script> 30\nmain;a\u{1}b 20\nmain;ok 10\n";
        for _ in 0..2 {
            let job = agent.lease().await.expect("a job");
            let profile = FoldedProfile {
                event: "cpu-clock".into(),
                folded: folded.into(),
            };
            let stored = agent.put_result(job.job_id, &upload(Some(profile))).await;
            let stored: serde_json::Value = stored.json().await.expect("body");
            assert_eq!(stored["stored"], true, "{backend:?}: {stored}");
        }
        let path = format!(
            "/submissions/{}/jobs/{}/profile.svg",
            seeded.submission_id,
            position(&t, seeded.submission_id).await
        );
        let response = t.http.get(t.url(&path)).send().await.expect("GET");
        if response.status() != 200 {
            let body = response.text().await.unwrap_or_default();
            panic!("{backend:?}: {path}: {body}");
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(
            header("content-security-policy"),
            "default-src 'none'; style-src 'unsafe-inline'"
        );
        assert_eq!(header("content-disposition"), "inline");
        let svg = response.text().await.expect("svg");
        assert!(svg.contains("&lt;script&gt;"), "{svg}");
        assert!(!svg.contains("<script"), "{svg}");
        assert!(!svg.contains('\u{1}'), "the control character is left");
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        roxmltree::Document::parse_with_options(&svg, options).expect("well-formed XML");
        t.stop().await;
    }
}
