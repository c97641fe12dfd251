//! No job is ever leased twice at once: many concurrent claimers, through
//! the HTTP API of one server and straight through a second, independent
//! store connection (another replica), on every backend.

use std::collections::HashSet;
use std::sync::Arc;

use kbot_api::agent::{LeaseRequest, LeaseResponse};
use kbot_load::seed;
use kbot_server::agents;
use kbot_server::scheduler::{self, ClaimOutcome};
use kbot_testkit::{backends, TestServer};

/// 4 atomic jobs x 2 sides x 25 runs.
const JOB_FILE: &str = "testcase: bw_pipe\nbw_pipe:\n  size: [64k, 4k, 1k, 512]\n";
const RUNS: u32 = 25;
const TOTAL: usize = 4 * 2 * RUNS as usize;
const HTTP_CLAIMERS: usize = 24;
const DIRECT_CLAIMERS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_never_share_a_job() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        seed::submission(t.db(), "linux", "u", JOB_FILE, RUNS, 0)
            .await
            .expect("seed");
        let replica = t.store.connect().await;

        let mut tokens = Vec::new();
        for i in 0..HTTP_CLAIMERS {
            tokens.push(t.enroll(&format!("http-{i}"), "g").await.agent_token);
        }
        let mut direct = Vec::new();
        for i in 0..DIRECT_CLAIMERS {
            let id = t.enroll(&format!("direct-{i}"), "g").await.agent_id;
            direct.push(agents::load(replica.read(), id).await.expect("agent"));
        }

        let start = Arc::new(tokio::sync::Barrier::new(HTTP_CLAIMERS + DIRECT_CLAIMERS));
        let mut tasks = Vec::new();
        for token in tokens {
            let (http, url, start) = (t.http.clone(), t.url("/api/v1/agents/lease"), start.clone());
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let mut mine = Vec::new();
                loop {
                    let response = http
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&LeaseRequest {
                            wait_secs: 0,
                            can_build: true,
                        })
                        .send()
                        .await
                        .expect("lease");
                    assert_eq!(response.status(), 200);
                    let body: LeaseResponse = response.json().await.expect("body");
                    match body.job {
                        Some(job) => mine.push((job.job_id, job.attempt)),
                        None => return mine,
                    }
                }
            }));
        }
        for agent in direct {
            let (db, start) = (replica.clone(), start.clone());
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let mut mine = Vec::new();
                loop {
                    match scheduler::claim(&db, &agent, 600_000, "kbot@localhost")
                        .await
                        .expect("claim")
                    {
                        ClaimOutcome::Claimed(claim) => mine.push((
                            claim.job_id,
                            u32::try_from(claim.attempts).expect("attempts"),
                        )),
                        ClaimOutcome::Contended => continue,
                        ClaimOutcome::Empty => return mine,
                    }
                }
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("claimer"));
        }
        let unique: HashSet<i64> = all.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            all.len(),
            TOTAL,
            "{backend:?}: every job leased once, none twice"
        );
        assert_eq!(unique.len(), TOTAL, "{backend:?}");
        assert!(all.iter().all(|(_, attempt)| *attempt == 1));

        let (leased, events, in_flight): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND attempts = 1), \
                    (SELECT COUNT(*) FROM job_events WHERE state = 'leased'), \
                    (SELECT CAST(SUM(in_flight) AS BIGINT) FROM submissions)",
        )
        .fetch_one(t.db().read())
        .await
        .expect("counts");
        assert_eq!(
            (leased, events, in_flight),
            (TOTAL as i64, TOTAL as i64, TOTAL as i64)
        );
        replica.close().await;
        t.stop().await;
    }
}
