//! Kernels built once (`kbot_api::builds`): agents of several tbox groups
//! that need the same commits build each once and download it elsewhere; a
//! commit that does not build fails every group's job once; a builder that
//! dies loses its claim with its lease, and the next job builds. Each on
//! SQLite and PostgreSQL, through the agent protocol's client.

use std::time::Duration;

use kbot_api::agent::LeasedJob;
use kbot_api::builds::{
    BuildClaim, BuildFailed, BuildFile, BuildReady, BuildState, ClaimAnswer, Claimant,
};
use kbot_api::client::AgentClient;
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{backends, TestServer, ONE_JOB};
use sha2::{Digest, Sha256};

/// The build key an agent would make for `commit` (the test's agents all
/// use one kconfig, compiler and arch).
pub(super) fn key_of(commit: &str) -> String {
    hex::encode(&Sha256::digest(format!("{commit}\0x86_64").as_bytes())[..12])
}

fn claim_of(job: &LeasedJob) -> BuildClaim {
    BuildClaim {
        job_id: Some(job.job_id),
        order_id: None,
        build_key: key_of(&job.commit),
        commit: job.commit.clone(),
        arch: "x86_64".into(),
    }
}

pub(super) fn image_of(commit: &str) -> Vec<u8> {
    format!("bzImage of {commit}\n").repeat(1000).into_bytes()
}

/// What one agent did for one job's kernel.
#[derive(Debug, PartialEq)]
pub(super) enum Got {
    Built,
    Downloaded,
    DoesNotBuild,
}

/// A faithful agent's side of the protocol: claim; build and share, or
/// wait and ask again, or download and check the bytes.
pub(super) async fn kernel_for(client: &AgentClient, job: &LeasedJob, builds: bool) -> Got {
    let claim = claim_of(job);
    loop {
        match client.claim_build(&claim).await.expect("claim") {
            ClaimAnswer::Build if builds => {
                share(client, job).await;
                return Got::Built;
            }
            ClaimAnswer::Build => {
                let failed = BuildFailed {
                    job_id: Some(job.job_id),
                    order_id: None,
                    log_tail: "pipe.c:1: error: expected ';'".into(),
                };
                let view = client
                    .build_failed(&claim.build_key, &failed)
                    .await
                    .expect("failed");
                assert_eq!(view.state, BuildState::Failed);
                return Got::DoesNotBuild;
            }
            ClaimAnswer::Wait {
                retry_after_secs, ..
            } => {
                assert!(retry_after_secs >= 1);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            ClaimAnswer::Ready { build } => {
                let image = build.files.iter().find(|f| f.name == "bzImage");
                let image = image.expect("the image is listed");
                let (bytes, sha) = client
                    .build_file(&claim.build_key, "bzImage")
                    .await
                    .expect("download");
                assert_eq!(bytes.as_ref(), image_of(&job.commit).as_slice());
                assert_eq!(sha.as_deref(), Some(image.sha256.as_str()));
                assert_eq!(hex::encode(Sha256::digest(&bytes)), image.sha256);
                return Got::Downloaded;
            }
            ClaimAnswer::Failed { build } => {
                assert!(build.log_tail.unwrap_or_default().contains("expected ';'"));
                return Got::DoesNotBuild;
            }
        }
    }
}

/// Uploads the job's kernel files and says the build is ready.
async fn share(client: &AgentClient, job: &LeasedJob) {
    share_as(client, Claimant::Job(job.job_id), &job.commit).await;
}

/// Uploads `commit`'s kernel files as `by` and says the build is ready.
pub(super) async fn share_as(client: &AgentClient, by: Claimant, commit: &str) {
    let key = key_of(commit);
    let mut files = Vec::new();
    for (name, content) in [
        ("bzImage", image_of(commit)),
        ("config", b"CONFIG_PIPE=y\n".to_vec()),
        ("build.log", b"  LD vmlinux\n".to_vec()),
    ] {
        files.push(
            client
                .upload_build_file(&key, name, by, content)
                .await
                .expect("upload"),
        );
    }
    let (job_id, order_id) = by.ids();
    let ready = BuildReady {
        job_id,
        order_id,
        release: "6.1.0-kbot".into(),
        build_id: Some("ab12".into()),
        build_secs: 12.5,
        files,
    };
    let view = client.build_ready(&key, &ready).await.expect("ready");
    assert_eq!(view.state, BuildState::Ready);
}

/// Leases and runs every job it can get, returning what it did for each.
pub(super) async fn agent_loop(agent: &TestAgent<'_>, builds: bool) -> Vec<Got> {
    let client = agent.client();
    let mut got = Vec::new();
    while let Some(job) = agent.lease_waiting(1).await {
        let kernel = kernel_for(&client, &job, builds).await;
        if kernel == Got::DoesNotBuild {
            let failure = serde_json::json!({
                "state": "failed", "failure": "build_failed", "detail": "does not build"
            });
            assert_eq!(agent.event(job.job_id, failure).await.status(), 204);
        } else {
            assert_eq!(agent.upload(job.job_id, 100.0).await.status(), 200);
        }
        got.push(kernel);
    }
    got
}

pub(super) async fn get_json<T: serde::de::DeserializeOwned>(t: &TestServer, path: &str) -> T {
    let response = t.http.get(t.url(path)).send().await.expect("get");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("json")
}

pub(super) async fn count(t: &TestServer, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(t.db().read())
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_on_three_tbox_groups_builds_each_commit_once() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        // Three submissions of one pair: each agent's group takes one.
        for user in ["u1", "u2", "u3"] {
            t.seed(user, ONE_JOB, 1, 0).await;
        }
        let a = TestAgent::enroll(&t, "a", "group-a").await;
        let b = TestAgent::enroll(&t, "b", "group-b").await;
        let c = TestAgent::enroll(&t, "c", "group-c").await;
        let (ga, gb, gc) = tokio::join!(
            agent_loop(&a, true),
            agent_loop(&b, true),
            agent_loop(&c, true)
        );
        let all: Vec<&Got> = ga.iter().chain(&gb).chain(&gc).collect();
        let jobs = count(&t, "SELECT COUNT(*) FROM jobs").await;
        assert_eq!(all.len() as i64, jobs, "{backend:?}: {ga:?} {gb:?} {gc:?}");
        let built = all.iter().filter(|g| ***g == Got::Built).count();
        assert_eq!(built, 2, "{backend:?}: one build per commit");
        assert_eq!(
            count(&t, "SELECT COUNT(*) FROM builds WHERE state = 'ready'").await,
            2
        );
        assert_eq!(
            count(&t, "SELECT CAST(SUM(claims) AS BIGINT) FROM builds").await,
            2
        );
        assert_eq!(
            count(&t, "SELECT COUNT(*) FROM jobs WHERE state = 'finished'").await,
            jobs
        );
        // The API lists them, newest first, and by commit.
        let listed: Vec<kbot_api::builds::BuildView> = get_json(&t, "/api/v1/builds").await;
        assert_eq!(listed.len(), 2);
        assert!(listed
            .iter()
            .all(|b| b.state == BuildState::Ready && b.files.len() == 3));
        assert!(listed[0].created_at >= listed[1].created_at);
        let path = format!("/api/v1/builds?commit={}", listed[1].commit);
        let one: Vec<kbot_api::builds::BuildView> = get_json(&t, &path).await;
        assert_eq!(one, vec![listed[1].clone()]);
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_does_not_build_fails_every_groups_job_once() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        for user in ["u1", "u2"] {
            t.seed(user, ONE_JOB, 1, 0).await;
        }
        let a = TestAgent::enroll(&t, "a", "group-a").await;
        let b = TestAgent::enroll(&t, "b", "group-b").await;
        let (ga, gb) = tokio::join!(agent_loop(&a, false), agent_loop(&b, false));
        let all: Vec<&Got> = ga.iter().chain(&gb).collect();
        let jobs = count(&t, "SELECT COUNT(*) FROM jobs").await;
        assert_eq!(all.len() as i64, jobs, "{backend:?}: {ga:?} {gb:?}");
        assert!(all.iter().all(|g| **g == Got::DoesNotBuild));
        assert_eq!(
            count(&t, "SELECT COUNT(*) FROM builds WHERE state = 'failed'").await,
            2
        );
        assert_eq!(
            count(&t, "SELECT CAST(SUM(claims) AS BIGINT) FROM builds").await,
            2
        );
        assert_eq!(
            count(
                &t,
                "SELECT COUNT(*) FROM jobs WHERE state = 'failed' AND failure = 'build_failed'"
            )
            .await,
            jobs,
            "each job failed once, none re-queued"
        );
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_builders_claim_passes_to_the_next_job_once() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        for user in ["u1", "u2", "u3"] {
            t.seed(user, ONE_JOB, 1, 0).await;
        }
        let a = TestAgent::enroll(&t, "a", "group-a").await;
        let b = TestAgent::enroll(&t, "b", "group-b").await;
        let c = TestAgent::enroll(&t, "c", "group-c").await;
        let ja = a.lease().await.expect("a job");
        let jb = b.lease().await.expect("b job");
        let jc = c.lease().await.expect("c job");
        assert!(
            ja.commit == jb.commit && jb.commit == jc.commit,
            "base first"
        );
        assert_eq!(
            a.client().claim_build(&claim_of(&ja)).await.expect("claim"),
            ClaimAnswer::Build
        );
        let wait = b.client().claim_build(&claim_of(&jb)).await.expect("claim");
        assert!(
            matches!(wait, ClaimAnswer::Wait { builder_job_id, .. } if builder_job_id == ja.job_id),
            "{wait:?}"
        );
        // a's machine dies: its lease runs out.
        sqlx::query("UPDATE jobs SET lease_expires_at = 1 WHERE id = $1")
            .bind(ja.job_id)
            .execute(t.db().write())
            .await
            .expect("expire");
        assert_eq!(
            b.client().claim_build(&claim_of(&jb)).await.expect("claim"),
            ClaimAnswer::Build,
            "{backend:?}: b builds instead"
        );
        let wait = c.client().claim_build(&claim_of(&jc)).await.expect("claim");
        assert!(
            matches!(wait, ClaimAnswer::Wait { builder_job_id, .. } if builder_job_id == jb.job_id),
            "{wait:?}"
        );
        // a comes back late: its upload is refused, nothing is recorded.
        let late = a
            .client()
            .upload_build_file(
                &key_of(&ja.commit),
                "bzImage",
                Claimant::Job(ja.job_id),
                b"stale".to_vec(),
            )
            .await
            .expect_err("a lost its claim");
        assert_eq!(late.status(), Some(409), "{late}");
        share(&b.client(), &jb).await;
        assert_eq!(kernel_for(&c.client(), &jc, true).await, Got::Downloaded);
        assert_eq!(count(&t, "SELECT claims FROM builds").await, 2);
        // c's log page names the build, its builder and its files.
        let page = t
            .http
            .get(t.url(&format!("/jobs/{}/log", jc.job_id)))
            .send()
            .await
            .expect("log page")
            .text()
            .await
            .expect("text");
        let key = key_of(&jc.commit);
        for wanted in [
            format!("Build <code>{key}</code>"),
            format!("built by <a href=\"/jobs/{0}/log\">job {0}</a>", jb.job_id),
            "claimed 2 times".to_string(),
            format!("/api/v1/builds/{key}/files/bzImage"),
        ] {
            assert!(page.contains(&wanted), "{wanted} in {page}");
        }
        t.stop().await;
    }
}

#[tokio::test]
async fn claims_and_files_are_checked() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u1", ONE_JOB, 1, 0).await;
        t.seed("u2", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "a", "group-a").await;
        let b = TestAgent::enroll(&t, "b", "group-b").await;
        let ja = a.lease().await.expect("a job");
        let jb = b.lease().await.expect("b job");
        let key = key_of(&ja.commit);
        let http = reqwest::Client::new();
        let claim = |agent: &TestAgent<'_>, body: serde_json::Value| {
            http.post(t.url("/api/v1/builds/claim"))
                .bearer_auth(&agent.token)
                .json(&body)
                .send()
        };
        // A key that is not a build key, and another agent's job.
        let bad = serde_json::json!({"job_id": ja.job_id, "build_key": "../../x",
            "commit": ja.commit, "arch": "x86_64"});
        let (status, code) = error_code(claim(&a, bad).await.expect("send")).await;
        assert_eq!((status, code.as_str()), (400, "bad_request"));
        // A job claims its own commit's kernel only.
        let other = format!("{:040x}", 0xbad);
        let elsewhere = serde_json::json!({"job_id": ja.job_id, "build_key": key_of(&other),
            "commit": other, "arch": "x86_64"});
        let (status, code) = error_code(claim(&a, elsewhere).await.expect("send")).await;
        assert_eq!((status, code.as_str()), (409, "conflict"), "{backend:?}");
        let theirs = serde_json::json!({"job_id": ja.job_id, "build_key": key,
            "commit": ja.commit, "arch": "x86_64"});
        let (status, _) = error_code(claim(&b, theirs).await.expect("send")).await;
        assert_eq!(status, 403, "{backend:?}");
        // The claimant only, and only the files a build holds.
        assert_eq!(
            a.client().claim_build(&claim_of(&ja)).await.expect("claim"),
            ClaimAnswer::Build
        );
        let not_claimant = b
            .client()
            .upload_build_file(&key, "bzImage", Claimant::Job(jb.job_id), b"evil".to_vec())
            .await
            .expect_err("b does not hold the claim");
        assert_eq!(not_claimant.status(), Some(409));
        let odd_name = a
            .client()
            .upload_build_file(&key, "vmlinux", Claimant::Job(ja.job_id), b"x".to_vec())
            .await
            .expect_err("not a build file");
        assert_eq!(odd_name.status(), Some(400));
        // `ready` must name the digests that were uploaded.
        let stored = a
            .client()
            .upload_build_file(
                &key,
                "bzImage",
                Claimant::Job(ja.job_id),
                image_of(&ja.commit),
            )
            .await
            .expect("upload");
        a.client()
            .upload_build_file(
                &key,
                "config",
                Claimant::Job(ja.job_id),
                b"CONFIG_X=y\n".to_vec(),
            )
            .await
            .expect("upload");
        let lie = BuildReady {
            job_id: Some(ja.job_id),
            order_id: None,
            release: "6.1.0".into(),
            build_id: None,
            build_secs: 1.0,
            files: vec![
                BuildFile {
                    sha256: "0".repeat(64),
                    ..stored.clone()
                },
                BuildFile {
                    name: "config".into(),
                    sha256: hex::encode(Sha256::digest(b"CONFIG_X=y\n")),
                    bytes: 11,
                },
            ],
        };
        let refused = a.client().build_ready(&key, &lie).await.expect_err("lie");
        assert_eq!(refused.status(), Some(409));
        let missing = t
            .http
            .get(t.url(&format!("/api/v1/builds/{key}/files/build.log")))
            .send()
            .await
            .expect("get");
        assert_eq!(missing.status(), 404);
        // The page of a build is open to read.
        let view: serde_json::Value = t
            .http
            .get(t.url(&format!("/api/v1/builds/{key}")))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        assert_eq!(view["state"], "building", "{view}");
        assert_eq!(view["files"].as_array().map(Vec::len), Some(2), "{view}");
        t.stop().await;
    }
}
