//! A pair measured on the `host` backend ran the same running kernel on
//! both sides: its comparison is an A/A test and says so, in
//! `comparisons::booted_commits`, in the REST results and on the dashboard;
//! a pair whose runs booted their commits (a `qemu` agent) carries no such
//! note. Neither is a pair whose sides were measured under different
//! conditions (an icount guest against a wall-clock one): it is neither
//! reported nor bisected.

use std::time::{Duration, Instant};

use kbot_testkit::agent::TestAgent;
use kbot_testkit::{backends, hardware, TestServer, ONE_JOB};
use std::collections::BTreeMap;

use kbot_api::agent::{BootBackend, EnrollRequest, EnrollResponse, LeasedJob};
use kbot_api::submissions::{SubmissionDetail, SubmissionResults};
use kbot_core::conditions;
use kbot_server::comparisons::booted_commits;

const AA_NOTE: &str = "host backend: both sides ran the running kernel 6.1.0; \
                       this is an A/A comparison, not a test of the commits";

async fn enroll_as<'a>(
    t: &'a TestServer,
    name: &str,
    tbox_group: &str,
    backend: BootBackend,
) -> TestAgent<'a> {
    let request = EnrollRequest {
        enrollment_token: t.enrollment_token().await,
        name: name.to_string(),
        tbox_group: tbox_group.to_string(),
        backend,
        hardware: hardware(),
        host: None,
    };
    let response = t
        .http
        .post(t.url("/api/v1/agents/enroll"))
        .json(&request)
        .send()
        .await
        .expect("enroll request");
    assert_eq!(response.status(), 200, "enrolment of {name}");
    let enrolled: EnrollResponse = response.json().await.expect("enroll response");
    TestAgent {
        t,
        token: enrolled.agent_token,
        id: enrolled.agent_id,
    }
}

async fn get<T: serde::de::DeserializeOwned>(t: &TestServer, token: &str, path: &str) -> T {
    let response = t
        .http
        .get(t.url(path))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status(), 200, "GET {path}");
    response.json().await.expect("JSON body")
}

/// Runs `agent`'s jobs until submission `id` is done, each uploaded with
/// the value and tuning `measure` gives it.
async fn run_until_done(
    t: &TestServer,
    agent: &TestAgent<'_>,
    user: &str,
    id: i64,
    measure: impl Fn(&LeasedJob) -> (f64, BTreeMap<String, String>),
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        while let Some(job) = agent.lease().await {
            let (value, tuning) = measure(&job);
            let response = agent.upload_with(job.job_id, value, tuning).await;
            assert_eq!(response.status(), 200, "upload");
        }
        let detail: SubmissionDetail = get(t, user, &format!("/api/v1/submissions/{id}")).await;
        if detail.submission.state.as_str() == "done" {
            return;
        }
        assert!(Instant::now() < deadline, "submission {id} never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Both sides alike, a little noise, no tuning.
fn unchanged(job: &LeasedJob) -> (f64, BTreeMap<String, String>) {
    (100.0 + f64::from(job.run_index % 7), BTreeMap::new())
}

#[tokio::test]
async fn host_backend_pairs_are_marked_a_a_and_booted_pairs_are_not() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let (_, user) = kbot_server::auth::create_user_token(t.db(), "alice", None)
            .await
            .expect("user token");
        let host = enroll_as(&t, "box-host-1", "box-host", BootBackend::Host).await;
        let qemu = enroll_as(&t, "vm-qemu-1", "vm-qemu", BootBackend::Qemu).await;

        // Each submission's first lease pins it to that agent's tbox group.
        let aa = t.seed("alice", ONE_JOB, 2, 0).await;
        run_until_done(&t, &host, &user, aa.submission_id, unchanged).await;
        let ab = t.seed("alice", ONE_JOB, 2, 0).await;
        run_until_done(&t, &qemu, &user, ab.submission_id, unchanged).await;

        // The function the comparison code calls.
        let on_host = booted_commits(t.db(), aa.atomic_job_ids[0])
            .await
            .expect("booted_commits");
        assert!(!on_host.tests_the_commits(), "{backend:?}: {on_host:?}");
        assert_eq!(on_host.host_runs, on_host.finished_runs);
        assert!(on_host.finished_runs >= 4, "{on_host:?}");
        assert_eq!(on_host.host_kernels, vec!["6.1.0".to_string()]);
        assert_eq!(on_host.note().as_deref(), Some(AA_NOTE));
        let booted = booted_commits(t.db(), ab.atomic_job_ids[0])
            .await
            .expect("booted_commits");
        assert!(booted.tests_the_commits(), "{backend:?}: {booted:?}");
        assert_eq!(booted.booted_runs, booted.finished_runs);
        assert_eq!(booted.note(), None);
        let nothing = booted_commits(t.db(), i64::MAX).await.expect("no runs");
        assert!(!nothing.tests_the_commits() && nothing.finished_runs == 0);

        // REST: every comparison row of the host pair carries the note.
        let results: SubmissionResults = get(
            &t,
            &user,
            &format!("/api/v1/submissions/{}/results", aa.submission_id),
        )
        .await;
        assert!(!results.comparisons.is_empty(), "{backend:?}");
        for c in &results.comparisons {
            assert!(!c.tests_the_commits, "{}", c.metric);
            assert_eq!(c.boot_note.as_deref(), Some(AA_NOTE), "{}", c.metric);
        }
        // Each run says how its machine got the kernel.
        assert!(!results.runs.is_empty());
        for r in &results.runs {
            assert_eq!(r.backend, Some(BootBackend::Host), "run {}", r.job_id);
        }
        let results: SubmissionResults = get(
            &t,
            &user,
            &format!("/api/v1/submissions/{}/results", ab.submission_id),
        )
        .await;
        assert!(!results.comparisons.is_empty());
        for c in &results.comparisons {
            assert!(c.tests_the_commits, "{}", c.metric);
            assert_eq!(c.boot_note, None, "{}", c.metric);
        }
        assert!(!results.runs.is_empty());
        for r in &results.runs {
            assert_eq!(r.backend, Some(BootBackend::Qemu), "run {}", r.job_id);
        }
        let raw: serde_json::Value = get(
            &t,
            &user,
            &format!("/api/v1/submissions/{}/comparisons", aa.submission_id),
        )
        .await;
        assert_eq!(raw[0]["boot_note"], AA_NOTE);
        assert_eq!(raw[0]["tests_the_commits"], false);

        // Dashboard: the note above the table and an A/A mark on the rows.
        let page = |id: i64| {
            let url = t.url(&format!("/submissions/{id}"));
            let http = t.http.clone();
            async move {
                let response = http.get(url).send().await.expect("page");
                assert_eq!(response.status(), 200);
                response.text().await.expect("html")
            }
        };
        let html = page(aa.submission_id).await;
        assert!(html.contains("Not a test of the commits"), "{html}");
        assert!(html.contains("this is an A/A comparison"), "{html}");
        assert!(html.contains("class=\"state state-aa\""), "{html}");
        let html = page(ab.submission_id).await;
        assert!(!html.contains("Not a test of the commits"), "{html}");
        assert!(!html.contains("class=\"state state-aa\""), "{html}");
        t.stop().await;
    }
}

/// Runs `agent`'s jobs until submission `id` is done: the base side at 100
/// under `base_clock`, the head side 30% lower under `head_clock`.
async fn run_regressed_pair(
    t: &TestServer,
    agent: &TestAgent<'_>,
    user: &str,
    id: i64,
    (base_clock, head_clock): (&str, &str),
) {
    let detail: SubmissionDetail = get(t, user, &format!("/api/v1/submissions/{id}")).await;
    let base_sha = detail.submission.base.sha;
    run_until_done(t, agent, user, id, |job| {
        let (level, clock) = if job.commit == base_sha {
            (100.0, base_clock)
        } else {
            (70.0, head_clock)
        };
        let tuning = BTreeMap::from([
            (conditions::QEMU_CLOCK.to_string(), clock.to_string()),
            (
                "guest_boot_wall_secs".to_string(),
                format!("{}", job.run_index),
            ),
        ]);
        (level + f64::from(job.run_index % 3) * 0.1, tuning)
    })
    .await;
}

#[tokio::test]
async fn pairs_measured_under_different_conditions_are_not_blamed_on_a_commit() {
    const ICOUNT: &str = "icount shift=3,sleep=off";
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let (_, user) = kbot_server::auth::create_user_token(t.db(), "alice", None)
            .await
            .expect("user token");
        let qemu = enroll_as(&t, "vm-qemu-1", "vm-qemu", BootBackend::Qemu).await;
        let count = |path: &'static str| {
            let (t, user) = (&t, user.clone());
            async move {
                let list: Vec<serde_json::Value> = get(t, &user, path).await;
                list.len()
            }
        };

        // Base measured on an icount guest, head on a wall-clock one.
        let mixed = t.seed("alice", ONE_JOB, 4, 0).await;
        run_regressed_pair(&t, &qemu, &user, mixed.submission_id, (ICOUNT, "wall")).await;
        let booted = booted_commits(t.db(), mixed.atomic_job_ids[0])
            .await
            .expect("booted_commits");
        assert_eq!(booted.booted_runs, booted.finished_runs, "{booted:?}");
        assert!(!booted.same_conditions(), "{backend:?}: {booted:?}");
        assert!(!booted.tests_the_commits(), "{backend:?}: {booted:?}");
        let results: SubmissionResults = get(
            &t,
            &user,
            &format!("/api/v1/submissions/{}/results", mixed.submission_id),
        )
        .await;
        let kpi = results
            .comparisons
            .iter()
            .find(|c| c.metric == "bw_pipe.bandwidth.MB/sec")
            .expect("the KPI's comparison");
        assert_eq!(
            kpi.verdict.as_str(),
            "different",
            "the samples do differ: {kpi:?}"
        );
        assert!(!kpi.tests_the_commits);
        let note = kpi.boot_note.clone().unwrap_or_default();
        assert!(
            note.contains("measured under different conditions")
                && note.contains("base: qemu_clock=icount shift=3,sleep=off")
                && note.contains("head: qemu_clock=wall"),
            "{note}"
        );
        assert_eq!(count("/api/v1/reports").await, 0, "{backend:?}");
        assert_eq!(count("/api/v1/bisections").await, 0, "{backend:?}");

        // The same regression measured alike on both sides is acted on.
        let alike = t.seed("alice", ONE_JOB, 4, 0).await;
        run_regressed_pair(&t, &qemu, &user, alike.submission_id, (ICOUNT, ICOUNT)).await;
        let booted = booted_commits(t.db(), alike.atomic_job_ids[0])
            .await
            .expect("booted_commits");
        assert!(booted.tests_the_commits(), "{backend:?}: {booted:?}");
        // Which mode measured it, and what that mode cannot see.
        let results: SubmissionResults = get(
            &t,
            &user,
            &format!("/api/v1/submissions/{}/results", alike.submission_id),
        )
        .await;
        let measured = results.comparisons[0].measured_by.clone();
        let measured = measured.expect("an icount pair has a mode");
        assert_eq!(measured.mode, "exact clock (icount), 1 vCPU");
        assert!(measured.blind_to_contention, "{measured:?}");
        assert!(measured.blind_to.contains("contention between CPUs"));
        let url = t.url(&format!("/submissions/{}/compare", alike.submission_id));
        let html = t.http.get(url).send().await.expect("page");
        let html = html.text().await.expect("html");
        assert!(
            html.contains("<strong>Measured on the exact clock (icount), 1 vCPU:</strong> cannot see contention between CPUs"),
            "{html}"
        );
        let acted = count("/api/v1/reports").await + count("/api/v1/bisections").await;
        assert!(
            acted >= 1,
            "{backend:?}: the regression was neither reported nor bisected"
        );
        t.stop().await;
    }
}
