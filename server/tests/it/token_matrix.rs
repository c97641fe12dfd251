//! Every route of the route table (`kbot_server::routes::route_list`) times
//! every credential, with the
//! status each must get, on SQLite and PostgreSQL.
//!
//! Credentials: none, a wrong token, a revoked user token, a revoked agent
//! token (the one a re-enrolment replaced), an unused enrolment token, an
//! agent token, a user token. kbot has no admin role: the admin commands
//! (`enroll-token`, `user-token`) work on the database, not over HTTP.
//! Guards: open routes answer every credential alike (a token is ignored,
//! never an error); user routes answer 401 to no, a wrong or a revoked
//! token and 403 to a token of another kind; agent routes likewise; the
//! enrolment route reads its one-time token from the body.

use kbot_testkit::gitrepo;

use std::collections::BTreeSet;

use kbot_api::agent::{EnrollRequest, EventRequest, JobState, LeaseRequest, ResultUpload};
use kbot_api::builds::OrderLease;
use kbot_load::seed;
use kbot_server::routes::route_list;
use kbot_testkit::agent::TestAgent;
use kbot_testkit::{backends, Backend, TestServer};
use reqwest::Method;
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    Open,
    User,
    Agent,
    /// The enrolment token is in the body.
    Enroll,
    /// A dashboard form: a signed-in session's cookie and its CSRF token,
    /// which no bearer token stands in for (403 to every credential here).
    Session,
    /// The server's git (`KBOT_GIT_PUBLIC` off): an agent or a user token
    /// (or a session); anything else is 401.
    Fetch,
}

/// Every route with its guard; checked against the route table below.
const ROUTES: &[(&str, &str, Guard)] = &[
    ("POST", "/api/v1/agents/enroll", Guard::Enroll),
    ("POST", "/api/v1/agents/lease", Guard::Agent),
    ("POST", "/api/v1/jobs/{id}/heartbeat", Guard::Agent),
    ("POST", "/api/v1/jobs/{id}/events", Guard::Agent),
    ("PUT", "/api/v1/jobs/{id}/result", Guard::Agent),
    ("PUT", "/api/v1/jobs/{id}/initramfs", Guard::Agent),
    ("POST", "/api/v1/builds/claim", Guard::Agent),
    ("PUT", "/api/v1/builds/{key}/files/{name}", Guard::Agent),
    ("POST", "/api/v1/builds/{key}/ready", Guard::Agent),
    ("POST", "/api/v1/builds/{key}/failed", Guard::Agent),
    ("POST", "/api/v1/builds/orders/lease", Guard::Agent),
    ("POST", "/api/v1/builds/orders/{id}/heartbeat", Guard::Agent),
    ("GET", "/api/v1/builds", Guard::Open),
    ("GET", "/api/v1/builds/orders", Guard::Open),
    ("GET", "/api/v1/builds/{key}", Guard::Open),
    ("GET", "/api/v1/builds/{key}/files/{name}", Guard::Open),
    ("POST", "/api/v1/repos", Guard::User),
    ("GET", "/api/v1/repos", Guard::Open),
    ("GET", "/api/v1/repos/{name}", Guard::Open),
    ("GET", "/api/v1/repos/{name}/commits/{*rev}", Guard::Open),
    ("GET", "/api/v1/repos/{name}/revlist", Guard::Open),
    ("POST", "/api/v1/submissions", Guard::User),
    ("GET", "/api/v1/submissions", Guard::Open),
    ("GET", "/api/v1/submissions/{id}", Guard::Open),
    ("GET", "/api/v1/submissions/{id}/events", Guard::Open),
    ("POST", "/api/v1/submissions/{id}/cancel", Guard::User),
    ("GET", "/api/v1/submissions/{id}/results", Guard::Open),
    ("GET", "/api/v1/submissions/{id}/comparisons", Guard::Open),
    ("GET", "/api/v1/submissions/{id}/kcidb", Guard::Open),
    ("GET", "/api/v1/jobs/{id}/repro", Guard::Open),
    // A run's folded kernel stacks, as its profile page shows them.
    ("GET", "/api/v1/jobs/{id}/profile", Guard::Open),
    // Reads what a reproduction's guest wrote; stores nothing.
    ("POST", "/api/v1/jobs/{id}/repro/check", Guard::Open),
    ("GET", "/api/v1/initramfs/{sha256}", Guard::Open),
    ("GET", "/api/v1/bisections", Guard::Open),
    ("GET", "/api/v1/bisections/{id}", Guard::Open),
    ("POST", "/api/v1/bisections/{id}/cancel", Guard::User),
    ("POST", "/api/v1/watches", Guard::User),
    ("GET", "/api/v1/watches", Guard::Open),
    ("GET", "/api/v1/watches/{id}", Guard::Open),
    ("DELETE", "/api/v1/watches/{id}", Guard::User),
    ("POST", "/api/v1/lists", Guard::User),
    ("GET", "/api/v1/lists", Guard::Open),
    ("GET", "/api/v1/lists/{id}", Guard::Open),
    ("GET", "/api/v1/lists/{id}/commands", Guard::Open),
    ("POST", "/api/v1/lists/{id}/read", Guard::User),
    ("DELETE", "/api/v1/lists/{id}", Guard::User),
    ("GET", "/api/v1/series", Guard::Open),
    ("GET", "/api/v1/series/{id}", Guard::Open),
    ("GET", "/api/v1/regressions", Guard::Open),
    ("POST", "/api/v1/regressions/{id}/state", Guard::User),
    ("GET", "/", Guard::Open),
    ("GET", "/submissions", Guard::Open),
    ("GET", "/machines", Guard::Open),
    ("GET", "/jobs/{id}/log", Guard::Open),
    ("GET", "/trends", Guard::Open),
    ("GET", "/submissions/{id}", Guard::Open),
    ("GET", "/submissions/{id}/compare", Guard::Open),
    ("GET", "/agents", Guard::Open),
    ("GET", "/bisections", Guard::Open),
    ("GET", "/bisections/{id}", Guard::Open),
    ("GET", "/watches", Guard::Open),
    ("GET", "/lists", Guard::Open),
    ("GET", "/series/{id}", Guard::Open),
    ("GET", "/git/{repo}/{*path}", Guard::Fetch),
    ("GET", "/commits/{repo}/{sha}", Guard::Fetch),
    (
        "GET",
        "/submissions/{id}/jobs/{position}/profile",
        Guard::Open,
    ),
    (
        "GET",
        "/submissions/{id}/jobs/{position}/profile.svg",
        Guard::Open,
    ),
    ("GET", "/bisections/{id}/steps/{index}/profile", Guard::Open),
    (
        "GET",
        "/bisections/{id}/steps/{index}/profile.svg",
        Guard::Open,
    ),
    ("GET", "/signin", Guard::Open),
    // Sign-in reads its name, password and CSRF cookie from the form: a
    // bearer token changes nothing.
    ("POST", "/signin", Guard::Open),
    ("POST", "/signout", Guard::Session),
    ("GET", "/submit", Guard::Open),
    ("POST", "/submit", Guard::Session),
    ("POST", "/submissions/{id}/cancel", Guard::Session),
    ("POST", "/submissions/{id}/resubmit", Guard::Session),
    ("GET", "/regressions", Guard::Open),
    ("GET", "/regressions/{id}", Guard::Open),
    ("POST", "/regressions/{id}/state", Guard::Session),
    ("GET", "/reports", Guard::Open),
    ("GET", "/reports/{message_id}", Guard::Open),
    ("GET", "/reports/{message_id}/mbox", Guard::Open),
    ("POST", "/reports/{message_id}/resend", Guard::Session),
    ("GET", "/archive/{day}/{message_id}", Guard::Open),
    ("GET", "/api/v1/reports", Guard::Open),
    ("GET", "/api/v1/reports/{message_id}", Guard::Open),
    ("POST", "/api/v1/reports/{message_id}/resend", Guard::User),
    ("GET", "/healthz", Guard::Open),
    ("GET", "/api/openapi.json", Guard::Open),
];

#[test]
fn the_matrix_lists_every_route() {
    let listed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    let table = route_list();
    assert!(table.len() >= 30, "{table:?}");
    assert_eq!(
        listed, table,
        "the matrix (left) and the route table (right) differ"
    );
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Nobody,
    Wrong,
    RevokedUser,
    RevokedAgent,
    Enrollment,
    Agent,
    /// An agent of another tbox group, which does not hold the job.
    OtherAgent,
    User,
}

const EVERYONE: [Who; 8] = [
    Who::Nobody,
    Who::Wrong,
    Who::RevokedUser,
    Who::RevokedAgent,
    Who::Enrollment,
    Who::Agent,
    Who::OtherAgent,
    Who::User,
];

/// The status `who` must get on `path` with `guard`; `None` when any
/// answer past authentication will do (it must not be 401, 403 or 5xx).
fn expected(path: &str, guard: Guard, who: Who) -> Option<u16> {
    let a_job = path.starts_with("/api/v1/jobs/");
    match (guard, who) {
        (Guard::Open | Guard::Enroll, _) => None,
        (Guard::Session, _) => Some(403),
        (Guard::Fetch, Who::Agent | Who::OtherAgent | Who::User) => None,
        (Guard::Fetch, _) => Some(401),
        (_, Who::Nobody | Who::Wrong | Who::RevokedUser | Who::RevokedAgent) => Some(401),
        (Guard::User, Who::User) | (Guard::Agent, Who::Agent) => None,
        // Authenticated, but the job is another agent's.
        (Guard::Agent, Who::OtherAgent) if a_job => Some(403),
        (Guard::Agent, Who::OtherAgent) => None,
        (Guard::User | Guard::Agent, _) => Some(403),
    }
}

struct Credentials {
    revoked_user: String,
    revoked_agent: String,
    enrollment: String,
    agent: String,
    other_agent: String,
    other_agent_id: i64,
    user: String,
    /// A job the agent holds, for the job routes.
    job_id: i64,
    /// What that job runs: its pair's other side stays in the agent's group.
    job: kbot_core::job::AtomicJob,
    submission_id: i64,
    /// A registered repository with real commits.
    _repo: tempfile::TempDir,
}

impl Credentials {
    fn token(&self, who: Who) -> Option<&str> {
        match who {
            Who::Nobody => None,
            Who::Wrong => {
                Some("kbot_usr_0000000000000000000000000000000000000000000000000000000000000000")
            }
            Who::RevokedUser => Some(&self.revoked_user),
            Who::RevokedAgent => Some(&self.revoked_agent),
            Who::Enrollment => Some(&self.enrollment),
            Who::Agent => Some(&self.agent),
            Who::OtherAgent => Some(&self.other_agent),
            Who::User => Some(&self.user),
        }
    }
}

async fn credentials(t: &TestServer) -> Credentials {
    let seeded = seed::submission(t.db(), "linux", "alice", seed::LOAD_JOB_FILE, 1, 0)
        .await
        .expect("seed");
    let agent = t.enroll("box-a", "grp").await;
    let other = t.enroll("box-b", "grp-b").await;
    let old = t.enroll("box-r", "grp").await;
    // Re-enrolment replaces box-r's token: the old one is revoked.
    t.enroll("box-r", "grp").await;
    let (_, user) = kbot_server::auth::create_user_token(t.db(), "alice", None)
        .await
        .expect("user token");
    let (_, revoked_user) = kbot_server::auth::create_user_token(t.db(), "mallory", None)
        .await
        .expect("user token");
    sqlx::query("UPDATE tokens SET revoked_at = 1 WHERE token_hash = $1")
        .bind(kbot_server::auth::hash_token(&revoked_user))
        .execute(t.db().write())
        .await
        .expect("revoke");
    let leased = agent_of(t, &agent.agent_token, agent.agent_id)
        .lease()
        .await;
    let repo = tempfile::tempdir().expect("temp dir");
    gitrepo::linear_repo(repo.path(), &["one", "two"]);
    let registered = t
        .http
        .post(t.url("/api/v1/repos"))
        .bearer_auth(&user)
        .json(&json!({"name": "real", "url": repo.path().display().to_string()}))
        .send()
        .await
        .expect("register a repo");
    assert_eq!(registered.status(), 201);
    let job = leased.expect("a queued job");
    Credentials {
        _repo: repo,
        other_agent: other.agent_token,
        other_agent_id: other.agent_id,
        job_id: job.job_id,
        job: job.job,
        revoked_user,
        revoked_agent: old.agent_token,
        enrollment: t.enrollment_token().await,
        agent: agent.agent_token,
        user,
        submission_id: seeded.submission_id,
    }
}

/// The tests' agent client for an enrolled agent.
fn agent_of<'a>(t: &'a TestServer, token: &str, id: i64) -> TestAgent<'a> {
    TestAgent {
        t,
        token: token.to_string(),
        id,
    }
}

fn concrete(path: &str, c: &Credentials) -> String {
    let id = if path.starts_with("/api/v1/jobs/") {
        c.job_id
    } else {
        c.submission_id
    };
    path.replace("{id}", &id.to_string())
        .replace("{name}", "real")
        .replace("{*rev}", "HEAD")
        .replace("{message_id}", "1")
        .replace("{day}", "20261201")
        .replace("{position}", "0")
        .replace("{index}", "1")
        .replace("{sha256}", &"0".repeat(64))
}

/// A body the route accepts, so what is refused is refused for the caller:
/// a lease, an event, a result; `{}` elsewhere (a user route may refuse it, after
/// authentication).
fn body(path: &str) -> serde_json::Value {
    if path.ends_with("/orders/lease") {
        json!(OrderLease {
            arch: "x86_64".into(),
            wait_secs: 0,
            plan: true,
        })
    } else if path.ends_with("/lease") {
        json!(LeaseRequest {
            wait_secs: 0,
            can_build: true,
        })
    } else if path.ends_with("/events") {
        json!(EventRequest {
            state: JobState::Running,
            failure: None,
            detail: "matrix".into(),
        })
    } else if path.ends_with("/result") {
        json!(ResultUpload {
            metrics: [("m".to_string(), 1.0)].into(),
            raw_output: String::new(),
            console: None,
            kconfig: None,
            kernel_release: "6.1".into(),
            tuning: Default::default(),
            started_at: 1,
            finished_at: 2,
            profile: None,
        })
    } else {
        json!({})
    }
}

async fn call(t: &TestServer, method: &str, path: &str, token: Option<&str>, guard: Guard) -> u16 {
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = t.http.request(method, t.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    // Dashboard forms post form fields, as a browser does (a JSON body would
    // be refused before the session and CSRF checks).
    let request = if guard == Guard::Session {
        request.form(&[("state", "confirmed"), ("note", "matrix")])
    } else {
        request.json(&body(path))
    };
    request.send().await.expect("request").status().as_u16()
}

async fn enroll_with(t: &TestServer, token: &str, name: &str) -> u16 {
    let body = EnrollRequest {
        enrollment_token: token.to_string(),
        name: name.into(),
        tbox_group: "grp".into(),
        backend: kbot_api::agent::BootBackend::Qemu,
        hardware: kbot_testkit::hardware(),
        host: None,
    };
    t.http
        .post(t.url("/api/v1/agents/enroll"))
        .json(&body)
        .send()
        .await
        .expect("enroll")
        .status()
        .as_u16()
}

/// The enrolment route: only an unused enrolment token in the body, once.
async fn enrolment_cases(t: &TestServer, c: &Credentials, backend: Backend) {
    for who in EVERYONE {
        if who == Who::Enrollment {
            continue;
        }
        let token = c.token(who).unwrap_or("");
        let status = enroll_with(t, token, "box-x").await;
        assert_eq!(status, 401, "{backend:?}: enrol with {who:?}");
    }
    assert_eq!(enroll_with(t, &c.enrollment, "box-e").await, 200);
    assert_eq!(
        enroll_with(t, &c.enrollment, "box-f").await,
        401,
        "used once"
    );
}

/// The agent of another tbox group leases what is left, but never the
/// other side of the pair the first agent started: that stays in its group.
async fn other_group_cannot_take_the_pair(t: &TestServer, c: &Credentials, backend: Backend) {
    let mut taken = 0;
    loop {
        let Some(job) = agent_of(t, &c.other_agent, c.other_agent_id).lease().await else {
            break;
        };
        assert_ne!(job.job, c.job, "{backend:?}: the pair left its tbox group");
        assert_eq!(job.job.tbox_group.as_deref(), Some("grp-b"));
        taken += 1;
        assert!(taken < 100, "{backend:?}: leases never run out");
    }
}

async fn matrix(backend: Backend) {
    let t = TestServer::start(backend).await;
    let c = credentials(&t).await;
    let mut lines = Vec::new();
    for (method, path, guard) in ROUTES {
        if *guard == Guard::Enroll {
            continue;
        }
        let url = concrete(path, &c);
        let mut open_status = None;
        let mut row = Vec::new();
        for who in EVERYONE {
            let status = call(&t, method, &url, c.token(who), *guard).await;
            row.push(status);
            let what = format!("{backend:?} {method} {url} as {who:?}: {status}");
            match expected(path, *guard, who) {
                Some(want) => assert_eq!(status, want, "{what}"),
                None => assert!(
                    !matches!(status, 401 | 403) && status < 500,
                    "{what}: authentication must pass and nothing break"
                ),
            }
            if *guard == Guard::Open {
                // A token on an open route changes nothing.
                assert_eq!(*open_status.get_or_insert(status), status, "{what}");
            }
        }
        lines.push(format!("{method:6} {path:45} {guard:?}: {row:?}"));
    }
    enrolment_cases(&t, &c, backend).await;
    other_group_cannot_take_the_pair(&t, &c, backend).await;
    println!(
        "{backend:?}: statuses for {EVERYONE:?}\n{}",
        lines.join("\n")
    );
    t.stop().await;
}

#[tokio::test]
async fn every_route_times_every_credential() {
    for backend in backends() {
        matrix(backend).await;
    }
}
