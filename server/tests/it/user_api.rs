//! The user side end to end, through the real server on both backends:
//! repos and commit resolution against a real git repo, submissions, a
//! simulated agent running the jobs, the comparison with adaptive extra runs,
//! results, cancel, the dashboard pages, and the bad-input errors.

use kbot_testkit::gitrepo;

use std::time::{Duration, Instant};

use kbot_api::repos::{CommitView, RepoView};
use kbot_api::submissions::{SubmissionDetail, SubmissionResults, SubmissionView};
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{backends, Backend, TestServer, THREE_RUN_JOB};
use serde_json::{json, Value};

const KPI: &str = "bw_pipe.bandwidth.MB/sec";

struct Fixture {
    server: TestServer,
    user_token: String,
    shas: Vec<String>,
    _repo_dir: tempfile::TempDir,
}

async fn fixture(backend: Backend) -> Fixture {
    fixture_with(backend, |_| {}).await
}

async fn fixture_with(
    backend: Backend,
    tweak: impl FnOnce(&mut kbot_server::config::Config),
) -> Fixture {
    let server = TestServer::start_with(backend, tweak).await;
    let (_, user_token) = kbot_server::auth::create_user_token(server.db(), "alice", None)
        .await
        .expect("user token");
    let repo_dir = tempfile::tempdir().expect("tempdir");
    let shas = gitrepo::linear_repo(
        repo_dir.path(),
        &[
            "pipe: baseline",
            "pipe: slow down writes",
            "pipe: unrelated",
        ],
    );
    gitrepo::git(repo_dir.path(), &["tag", "v1", &shas[0]]);
    gitrepo::git(repo_dir.path(), &["branch", "feature/writes", &shas[1]]);
    let fixture = Fixture {
        server,
        user_token,
        shas,
        _repo_dir: repo_dir,
    };
    let resp = fixture
        .post(
            "/api/v1/repos",
            &json!({"name": "linux", "url": fixture._repo_dir.path().to_str()}),
        )
        .await;
    assert_eq!(resp.status(), 201, "{:?}", resp.text().await);
    let repo: RepoView = resp.json().await.expect("repo json");
    assert_eq!(repo.default_branch, "main");
    fixture
}

impl Fixture {
    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.server
            .http
            .post(self.server.url(path))
            .bearer_auth(&self.user_token)
            .json(body)
            .send()
            .await
            .expect("request")
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.server
            .http
            .get(self.server.url(path))
            .send()
            .await
            .expect("request")
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let resp = self.get(path).await;
        assert_eq!(resp.status(), 200, "GET {path}");
        resp.json().await.expect("json")
    }

    async fn submit(&self, body: Value) -> SubmissionView {
        let resp = self.post("/api/v1/submissions", &body).await;
        assert_eq!(resp.status(), 201, "{:?}", resp.text().await);
        resp.json().await.expect("submission json")
    }
}

/// Plays an agent until the submission settles: head runs are 20% slower.
async fn run_agent(f: &Fixture, agent: &TestAgent<'_>, head_sha: &str, id: i64) -> SubmissionView {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline,
            "submission did not settle in time"
        );
        if agent.run_slower_head(head_sha).await.is_none() {
            let s: SubmissionDetail = f.get_json(&format!("/api/v1/submissions/{id}")).await;
            if s.submission.state.as_str() != "running" && s.submission.state.as_str() != "queued" {
                return s.submission;
            }
        }
    }
}

#[tokio::test]
async fn submission_runs_compares_and_settles() {
    for backend in backends() {
        let f = fixture(backend).await;
        let agent = TestAgent::enroll(&f.server, "box1", "lkp-test").await;
        // Single-commit submission: the parent becomes the base.
        let s = f
            .submit(json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": &f.shas[1][..8]}))
            .await;
        assert_eq!(s.head.sha, f.shas[1]);
        assert_eq!(s.base.sha, f.shas[0]);
        assert_eq!(s.head.subject, "pipe: slow down writes");
        assert_eq!(s.head.author_email, "ann@example.org");
        assert_eq!(s.head.committer_name, "Cid Committer");
        // A first batch of 2 runs a side (enough only for an exact clock).
        assert_eq!(
            (s.state.as_str(), s.jobs.total, s.max_runs),
            ("queued", 4, 10)
        );

        let done = run_agent(&f, &agent, &f.shas[1], s.id).await;
        assert_eq!(done.state.as_str(), "done", "{backend:?}");
        // 2 runs per side, then the job's 3 and the first look's 4, then 6:
        // the first look at which Welch's t may decide. 12 jobs.
        assert_eq!(
            (done.jobs.finished, done.jobs.total),
            (12, 12),
            "{backend:?}"
        );

        let results: SubmissionResults = f
            .get_json(&format!("/api/v1/submissions/{}/results", s.id))
            .await;
        assert_eq!(results.runs.len(), 12);
        let kpi = results
            .comparisons
            .iter()
            .find(|c| c.metric == KPI)
            .expect("KPI compared");
        assert_eq!(kpi.verdict.as_str(), "different");
        assert_eq!((kpi.base_runs, kpi.head_runs), (6, 6));
        let change = kpi.change_percent.expect("change");
        assert!((-21.0..-19.0).contains(&change), "change {change}");

        dashboard_pages(&f, s.id, &f.shas[1]).await;
        f.server.stop().await;
    }
}

async fn dashboard_pages(f: &Fixture, id: i64, head: &str) {
    let index = f.get("/submissions").await;
    assert_eq!(index.status(), 200);
    let html = index.text().await.expect("html");
    assert!(
        html.contains(&format!("href=\"/submissions/{id}\"")),
        "{html}"
    );
    assert!(html.contains("pipe: slow down writes"));

    let page = f.get(&format!("/submissions/{id}")).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains(head), "head sha on the page");
    assert!(html.contains("state-different"), "verdict shown");
    assert!(
        html.contains("%stddev     %change         %stddev"),
        "0-day table"
    );
    assert!(html.contains(KPI));
    assert!(html.contains("bw_pipe/"), "job label");

    let agents = f.get("/agents").await;
    assert_eq!(agents.status(), 200);
    let html = agents.text().await.expect("html");
    assert!(html.contains("box1") && html.contains("lkp-test") && html.contains("16 threads"));

    let missing = f.get("/submissions/999999").await;
    assert_eq!(missing.status(), 404);
    let html = missing.text().await.expect("html");
    assert!(
        html.contains("<html") && html.contains("submission 999999 not found"),
        "{html}"
    );
    let nowhere = f.get("/no/such/page").await;
    assert_eq!(nowhere.status(), 404);
    assert!(nowhere.text().await.expect("html").contains("<html"));
    let (status, code) = error_code(f.get("/api/v1/no-such-endpoint").await).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
}

#[tokio::test]
async fn run_cap_settles_an_undecided_pair() {
    for backend in backends() {
        let f = fixture(backend).await;
        let agent = TestAgent::enroll(&f.server, "box1", "lkp-test").await;
        let s = f
            .submit(json!({"repo": "linux", "job_file": THREE_RUN_JOB, "base": "v1", "head": "main", "max_runs": 3}))
            .await;
        assert_eq!(
            (s.base.sha.as_str(), s.head.sha.as_str()),
            (f.shas[0].as_str(), f.shas[2].as_str())
        );
        let done = run_agent(&f, &agent, &f.shas[2], s.id).await;
        assert_eq!(done.state.as_str(), "done");
        // 3 vs 3 runs can never reach p < 0.01: the verdict stays unknown,
        // and the cap of 3 stops the extra runs.
        assert_eq!(done.jobs.total, 6, "{backend:?}");
        let results: SubmissionResults = f
            .get_json(&format!("/api/v1/submissions/{}/results", s.id))
            .await;
        let kpi = results
            .comparisons
            .iter()
            .find(|c| c.metric == KPI)
            .expect("KPI");
        assert_eq!(kpi.verdict.as_str(), "unknown");
        f.server.stop().await;
    }
}

#[tokio::test]
async fn a_head_that_never_builds_settles_without_a_comparison() {
    for backend in backends() {
        let f = fixture(backend).await;
        let agent = TestAgent::enroll(&f.server, "box1", "lkp-test").await;
        let s = f
            .submit(json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": "main"}))
            .await;
        let deadline = Instant::now() + Duration::from_secs(60);
        let settled = loop {
            assert!(Instant::now() < deadline, "did not settle");
            let Some(job) = agent.lease_waiting(1).await else {
                let d: SubmissionDetail =
                    f.get_json(&format!("/api/v1/submissions/{}", s.id)).await;
                if d.submission.state.as_str() != "running" {
                    break d.submission;
                }
                continue;
            };
            let response = if job.commit == f.shas[2] {
                let body = json!({"state": "failed", "failure": "build_failed", "detail": "error: pipe.c"});
                agent.event(job.job_id, body).await
            } else {
                agent.upload(job.job_id, 1000.0).await
            };
            assert!(response.status().is_success());
        };
        // No extra runs for a side that cannot produce any: the first batch
        // of 2 + 2 jobs only.
        assert_eq!(settled.state.as_str(), "done", "{backend:?}");
        assert_eq!(
            (
                settled.jobs.finished,
                settled.jobs.failed,
                settled.jobs.total
            ),
            (2, 2, 4)
        );
        let results: SubmissionResults = f
            .get_json(&format!("/api/v1/submissions/{}/results", s.id))
            .await;
        assert!(results.comparisons.is_empty());
        f.server.stop().await;
    }
}

#[tokio::test]
async fn cancel_and_follow_events() {
    for backend in backends() {
        let f = fixture(backend).await;
        let s = f
            .submit(json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": "main"}))
            .await;
        let resp = f
            .post(&format!("/api/v1/submissions/{}/cancel", s.id), &json!({}))
            .await;
        assert_eq!(resp.status(), 200);
        let cancelled: SubmissionView = resp.json().await.expect("json");
        assert_eq!(
            (cancelled.state.as_str(), cancelled.jobs.cancelled),
            ("cancelled", 4)
        );
        let events: Vec<Value> = f
            .get_json(&format!("/api/v1/submissions/{}/events?after=0", s.id))
            .await;
        assert_eq!(events.len(), 4);
        assert!(events
            .iter()
            .all(|e| e["state"] == "cancelled"
                && e["detail"].as_str().unwrap_or("").contains("alice")));
        let last = events.last().and_then(|e| e["id"].as_i64()).expect("id");
        let none: Vec<Value> = f
            .get_json(&format!("/api/v1/submissions/{}/events?after={last}", s.id))
            .await;
        assert!(none.is_empty());
        let list: Vec<SubmissionView> = f.get_json("/api/v1/submissions?limit=5").await;
        assert_eq!(list.first().map(|s| s.id), Some(s.id));
        f.server.stop().await;
    }
}

#[tokio::test]
async fn commits_resolve_and_bad_input_gets_stable_codes() {
    for backend in backends() {
        let f = fixture(backend).await;
        let c: CommitView = f.get_json("/api/v1/repos/linux/commits/main").await;
        assert_eq!(c.sha, f.shas[2]);
        assert_eq!(c.parents, vec![f.shas[1].clone()]);
        let c: CommitView = f
            .get_json(&format!("/api/v1/repos/linux/commits/{}", &f.shas[0][..7]))
            .await;
        assert!(c.parents.is_empty());
        // The rev is the route's wildcard: a branch name may hold `/`.
        let c: CommitView = f
            .get_json("/api/v1/repos/linux/commits/feature/writes")
            .await;
        assert_eq!(c.sha, f.shas[1]);
        let range: Value = f
            .get_json(&format!(
                "/api/v1/repos/linux/revlist?base={}&head=main",
                f.shas[0]
            ))
            .await;
        assert_eq!(range["commits"], json!([f.shas[1], f.shas[2]]));
        let doc: Value = f.get_json("/api/openapi.json").await;
        let submissions = &doc["paths"]["/api/v1/submissions"];
        assert!(
            submissions["get"].is_object() && submissions["post"].is_object(),
            "{submissions}"
        );
        assert!(doc["paths"]["/api/v1/repos/{name}/commits/{rev}"]["get"].is_object());

        let cases: Vec<(reqwest::Response, u16, &str)> = vec![
            (f.get("/api/v1/repos/linux/commits/nope").await, 404, "unknown_commit"),
            (f.get("/api/v1/repos/nope/commits/main").await, 404, "unknown_repo"),
            (f.post("/api/v1/submissions", &json!({"repo": "nope", "job_file": THREE_RUN_JOB, "head": "main"})).await, 404, "unknown_repo"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": "deadbeef"})).await, 404, "unknown_commit"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": "--all"})).await, 400, "invalid_revision"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": &f.shas[0]})).await, 400, "bad_request"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": "testcase: [", "head": "main"})).await, 400, "invalid_yaml"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": "testcase: x\nnosuchprog: {a: 1}\n", "head": "main"})).await, 400, "unknown_program"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": "testcase: bw_pipe\nbw_pipe: {colour: red}\n", "head": "main"})).await, 400, "unknown_option"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": "main", "max_runs": 0})).await, 400, "bad_request"),
            (f.post("/api/v1/submissions", &json!({"repo": "linux"})).await, 400, "invalid_json"),
            (f.post("/api/v1/repos", &json!({"name": "linux", "url": "/x"})).await, 409, "conflict"),
            (f.post("/api/v1/repos", &json!({"name": "../etc", "url": "/x"})).await, 400, "bad_request"),
            (f.post("/api/v1/repos", &json!({"name": "ghost", "url": "/nonexistent/repo"})).await, 422, "repo_unreachable"),
        ];
        for (i, (resp, status, code)) in cases.into_iter().enumerate() {
            assert_eq!(
                error_code(resp).await,
                (status, code.to_owned()),
                "case {i} on {backend:?}"
            );
        }
        // Nothing was half-written by the refused submissions.
        let list: Vec<SubmissionView> = f.get_json("/api/v1/submissions").await;
        assert!(list.is_empty());

        // No anonymous writes; agent tokens are refused on user endpoints.
        let anon = f
            .server
            .http
            .post(f.server.url("/api/v1/submissions"))
            .json(&json!({"repo": "linux", "job_file": THREE_RUN_JOB, "head": "main"}))
            .send()
            .await
            .expect("request");
        assert_eq!(error_code(anon).await, (401, "unauthorized".to_owned()));
        let agent = f.server.enroll("box1", "lkp-test").await;
        let wrong = f
            .server
            .http
            .post(f.server.url("/api/v1/repos"))
            .bearer_auth(&agent.agent_token)
            .json(&json!({"name": "x", "url": "/x"}))
            .send()
            .await
            .expect("request");
        assert_eq!(
            error_code(wrong).await,
            (403, "wrong_token_kind".to_owned())
        );
        f.server.stop().await;
    }
}

/// lkp-tests' lmbench3 list in LKP's own form: an include from the LKP root,
/// tests kbot does not run next to PIPE, a monitor the agent lacks.
const MIXED_LMBENCH3: &str = "\
<< : include/testbox/any

testcase: lmbench3
runs: 2
turbostat:
nr_threads: 1
lmbench3:
  mode: development
  test:
    - CONNECT
    - PIPE
";

#[tokio::test]
async fn a_mixed_matrix_queues_what_runs_and_lists_the_rest() {
    for backend in backends() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("include/testbox")).expect("mkdir");
        std::fs::write(
            root.path().join("include/testbox/any"),
            "rootfs: debian-12-x86_64.cgz\n",
        )
        .expect("write include");
        let lkp_root = root.path().to_path_buf();
        let f = fixture_with(backend, move |c| c.lkp_root = Some(lkp_root)).await;
        let s = f
            .submit(json!({"repo": "linux", "job_file": MIXED_LMBENCH3, "head": "main"}))
            .await;
        // PIPE only: 1 atomic job x 2 runs x 2 sides.
        assert_eq!(s.jobs.total, 4, "{s:?}");
        let skipped: Vec<(&str, &str, &str)> = s
            .skipped
            .iter()
            .map(|k| (k.kind.as_str(), k.name.as_str(), k.reason.as_str()))
            .collect();
        assert!(
            skipped.contains(&(
                "job",
                "lmbench3/development-1-CONNECT",
                "invalid value \"CONNECT\" for test: kbot runs: PIPE"
            )),
            "{skipped:?}"
        );
        assert!(
            skipped
                .iter()
                .any(|k| k.0 == "monitor" && k.1 == "turbostat"),
            "{skipped:?}"
        );
        assert!(
            skipped.iter().any(|k| k.0 == "key" && k.1 == "rootfs"),
            "{skipped:?}"
        );
        assert_eq!(skipped.len(), 3, "{skipped:?}");

        // Stored: the submission reads back with the same list, and its page shows it.
        let detail: SubmissionDetail = f.get_json(&format!("/api/v1/submissions/{}", s.id)).await;
        assert_eq!(detail.submission.skipped, s.skipped);
        assert_eq!(detail.atomic_jobs.len(), 1);
        assert_eq!(detail.atomic_jobs[0].options["test"], "PIPE");
        let page = f.get(&format!("/submissions/{}", s.id)).await;
        assert_eq!(page.status(), 200);
        let html = page.text().await.expect("html");
        assert!(
            html.contains("id=\"skipped\"") && html.contains("lmbench3/development-1-CONNECT"),
            "{html}"
        );
        assert!(html.contains("kbot runs: PIPE"), "{html}");

        // Refused only when nothing can run, with the reasons or the missing file.
        let cases: Vec<(&str, &str, &str)> = vec![
            (
                "lmbench3: {mode: development, test: [CONNECT, TCP]}\n",
                "nothing_runnable",
                "lmbench3/development-TCP",
            ),
            (
                "<< : jobs/none.yaml\npipen:\n",
                "invalid_job_file",
                "included file \"jobs/none.yaml\" was not found",
            ),
        ];
        for (job_file, code, text) in cases {
            let resp = f
                .post(
                    "/api/v1/submissions",
                    &json!({"repo": "linux", "job_file": job_file, "head": "main"}),
                )
                .await;
            assert_eq!(resp.status(), 400, "{job_file}");
            let body: Value = resp.json().await.expect("error json");
            assert_eq!(body["error"]["code"], code, "{body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(text), "{body}");
        }
        f.server.stop().await;
    }
}

#[tokio::test]
async fn an_include_without_an_lkp_root_is_refused_by_name() {
    let f = fixture(Backend::Sqlite).await;
    let resp = f
        .post(
            "/api/v1/submissions",
            &json!({"repo": "linux", "job_file": MIXED_LMBENCH3, "head": "main"}),
        )
        .await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.expect("error json");
    assert!(
        body.to_string().contains("include/testbox/any")
            && body.to_string().contains("no LKP include root"),
        "{body}"
    );
    f.server.stop().await;
}
