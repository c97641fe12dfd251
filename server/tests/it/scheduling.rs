//! Scheduling order, lease expiry, failures and cancel, on every backend.

use kbot_load::seed;
use kbot_server::scheduler::{self, ClaimOutcome};
use kbot_server::{agents, jobs};
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{backends, TestServer, ONE_JOB};
use serde_json::json;

const TWO_JOBS: &str = "testcase: bw_pipe\nbw_pipe:\n  size: [64k, 4k]\n";

fn side(job: &kbot_api::agent::LeasedJob, seeded: &seed::Seeded) -> &'static str {
    if job.commit == format!("{:040x}", 0xb0) {
        assert_eq!(job.submission_id, seeded.submission_id);
        "base"
    } else {
        "head"
    }
}

#[tokio::test]
async fn one_agent_alternates_base_and_head() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = t.seed("u", ONE_JOB, 3, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let mut order = Vec::new();
        while let Some(job) = a.run_one().await {
            order.push((side(&job, &seeded), job.run_index));
        }
        // The comparison worker may add runs when the verdict is unknown;
        // those alternate too.
        assert_eq!(
            order[..6],
            [
                ("base", 0),
                ("head", 0),
                ("base", 1),
                ("head", 1),
                ("base", 2),
                ("head", 2)
            ],
            "{backend:?}"
        );
        for (i, (side, run)) in order.iter().enumerate() {
            assert_eq!(*side, if i % 2 == 0 { "base" } else { "head" });
            assert_eq!(*run as usize, i / 2);
        }
        t.stop().await;
    }
}

#[tokio::test]
async fn pairs_stick_to_their_agent() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = t.seed("u", TWO_JOBS, 2, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let b = TestAgent::enroll(&t, "b", "g").await;
        let mut seen_a = Vec::new();
        let mut seen_b = Vec::new();
        for _ in 0..4 {
            let ja = a.lease().await.expect("a gets a job");
            let jb = b.lease().await.expect("b gets a job");
            assert_eq!(a.upload(ja.job_id, 1.0).await.status(), 200);
            assert_eq!(b.upload(jb.job_id, 1.0).await.status(), 200);
            seen_a.push((
                ja.job.options["size"].clone(),
                side(&ja, &seeded),
                ja.run_index,
            ));
            seen_b.push((
                jb.job.options["size"].clone(),
                side(&jb, &seeded),
                jb.run_index,
            ));
        }
        // Each agent ran one whole pair, base and head alternating.
        let size_a = seen_a[0].0.clone();
        let size_b = seen_b[0].0.clone();
        assert_ne!(size_a, size_b, "{backend:?}");
        assert!(seen_a.iter().all(|s| s.0 == size_a), "{seen_a:?}");
        assert!(seen_b.iter().all(|s| s.0 == size_b), "{seen_b:?}");
        let sides: Vec<_> = seen_a.iter().map(|s| (s.1, s.2)).collect();
        assert_eq!(sides, [("base", 0), ("head", 0), ("base", 1), ("head", 1)]);
        t.stop().await;
    }
}

#[tokio::test]
async fn priority_then_fair_share() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let low = t.seed("u1", TWO_JOBS, 1, 0).await;
        let other = t.seed("u2", ONE_JOB, 1, 0).await;
        let high = t.seed("u3", ONE_JOB, 1, 5).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let b = TestAgent::enroll(&t, "b", "g").await;
        let c = TestAgent::enroll(&t, "c", "g").await;
        // The high-priority pair goes first, whoever asks.
        let first = a.lease().await.expect("job");
        assert_eq!(first.submission_id, high.submission_id, "{backend:?}");
        let second = b.lease().await.expect("job");
        assert_eq!(second.submission_id, high.submission_id, "{backend:?}");
        // Then `low` (older, lower id) gets one job in flight; the next agent
        // is sent to `other`, which has none, not to low's second pair.
        let third = c.lease().await.expect("job");
        assert_eq!(third.submission_id, low.submission_id, "{backend:?}");
        let d = TestAgent::enroll(&t, "d", "g").await;
        let fourth = d.lease().await.expect("job");
        assert_eq!(fourth.submission_id, other.submission_id, "{backend:?}");
        t.stop().await;
    }
}

#[tokio::test]
async fn pairs_stay_in_one_tbox_group_and_constraints_filter() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "a", "group-one").await;
        let b = TestAgent::enroll(&t, "b", "group-two").await;
        let job = a.lease().await.expect("a job");
        assert_eq!(job.job.tbox_group.as_deref(), Some("group-one"));
        // The head of the pair is pinned to group-one now.
        assert!(b.lease().await.is_none(), "{backend:?}");
        // Re-enrolled into group-two, `a` still prefers the pair, whose head
        // it can no longer take: that is no job for it, not contention to
        // retry for.
        let moved = TestAgent::enroll(&t, "a", "group-two").await;
        let record = agents::load(t.db().read(), moved.id).await.expect("agent");
        let outcome = scheduler::claim(t.db(), &record, 60_000, "kbot@localhost")
            .await
            .expect("claim");
        assert!(
            matches!(outcome, ClaimOutcome::Empty),
            "{backend:?}: {outcome:?}"
        );
        let a2 = TestAgent::enroll(&t, "a2", "group-one").await;
        assert!(a2.lease().await.is_some());
        t.stop().await;
    }
}

/// An arm64 guest with 64K pages, on an x86_64 host.
fn arm64_64k(page_size: u64) -> kbot_core::machine::Hardware {
    kbot_core::machine::Hardware {
        arch: "aarch64".into(),
        cpu_model: "QEMU cortex-a57 (TCG)".into(),
        sockets: 1,
        cores: 2,
        threads: 2,
        numa_nodes: 1,
        memory_bytes: 1 << 30,
        page_size,
        microcode: None,
        kernel: "built per job".into(),
    }
}

async fn waiting(t: &TestServer, submission_id: i64) -> Vec<serde_json::Value> {
    let detail: serde_json::Value = t
        .http
        .get(t.url(&format!("/api/v1/submissions/{submission_id}")))
        .send()
        .await
        .expect("detail")
        .json()
        .await
        .expect("detail json");
    detail["waiting"].as_array().expect("waiting list").clone()
}

#[tokio::test]
async fn hardware_needs_choose_the_agent_and_say_why_a_job_waits() {
    const ARM64: &str =
        "testcase: pipen\narch: arm64\nneed_page_size: 64K\nneed_cpu: 2\npipen:\n  size: 4k\n";
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = t.seed("u", ARM64, 1, 0).await;
        let x86 = TestAgent::enroll(&t, "vm-1", "vm").await;
        assert!(x86.lease().await.is_none(), "{backend:?}");
        let w = waiting(&t, seeded.submission_id).await;
        assert_eq!(w.len(), 1, "{backend:?}: {w:?}");
        assert_eq!(
            w[0]["reason"],
            "no enrolled agent has arch aarch64, 2 CPUs, 64K pages: \
             vm-1 (vm) lacks arch aarch64 (has x86_64), 64K pages (has 4K)",
            "{backend:?}"
        );
        assert_eq!(w[0]["needs"]["page_size"], 65536);
        // The right arch is not enough: the page size must match too.
        let arm_4k = TestAgent::enroll_guest(&t, "arm4k-1", "arm4k", arm64_64k(4096)).await;
        assert!(arm_4k.lease().await.is_none(), "{backend:?}");
        let arm = TestAgent::enroll_guest(&t, "arm64k-1", "arm64k", arm64_64k(65536)).await;
        assert!(waiting(&t, seeded.submission_id).await.is_empty());
        let job = arm.lease().await.expect("the 64K arm64 agent takes it");
        assert_eq!(job.job.tbox_group.as_deref(), Some("arm64k"), "{backend:?}");
        assert_eq!(job.job.needs.arch.as_deref(), Some("aarch64"));
        // The pair is pinned to arm64k now; its head run waits for no one.
        assert!(waiting(&t, seeded.submission_id).await.is_empty());
        assert!(x86.lease().await.is_none() && arm_4k.lease().await.is_none());
        let head = arm.lease().await.expect("head run");
        assert_eq!(head.job.tbox_group.as_deref(), Some("arm64k"));
        // More memory than any agent of any group: waits, and says so.
        let big = t
            .seed(
                "u",
                "testcase: pipen\nneed_memory: 1T\npipen:\n  size: 4k\n",
                1,
                0,
            )
            .await;
        assert!(x86.lease().await.is_none() && arm.lease().await.is_none());
        let w = waiting(&t, big.submission_id).await;
        assert!(
            w[0]["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("no enrolled agent has 1T memory: ")
                    && r.contains("vm-1 (vm) lacks 1T memory (has 64G)")),
            "{backend:?}: {w:?}"
        );
        t.stop().await;
    }
}

#[tokio::test]
async fn expired_leases_requeue_then_fail() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("u", ONE_JOB, 1, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;
        let far_future = kbot_server::time::now_ms() + 10_000_000;
        let mut job_id = None;
        for attempt in 1..=3u32 {
            let job = a.lease().await.expect("job");
            assert_eq!(job.attempt, attempt, "{backend:?}");
            assert_eq!(job.run_index, 0);
            assert!(job_id.is_none() || job_id == Some(job.job_id));
            job_id = Some(job.job_id);
            let reaped = jobs::reaper::reap_expired(t.db(), far_future)
                .await
                .expect("reap");
            assert_eq!(reaped, 1);
        }
        let job_id = job_id.expect("job id");
        let (state, failure, detail): (String, Option<String>, Option<String>) =
            sqlx::query_as("SELECT state, failure, failure_detail FROM jobs WHERE id = $1")
                .bind(job_id)
                .fetch_one(t.db().read())
                .await
                .expect("job row");
        assert_eq!(state, "failed");
        assert_eq!(failure.as_deref(), Some("infrastructure"));
        assert!(detail.unwrap_or_default().contains("lease expired"));
        // The agent that lost the lease is told so.
        assert_eq!(
            error_code(a.heartbeat(job_id).await).await,
            (409, "lease_lost".into())
        );
        // The head job is next; the failed base is not handed out again.
        let next = a.lease().await.expect("head job");
        assert_ne!(next.job_id, job_id);
        t.stop().await;
    }
}

#[tokio::test]
async fn failures_and_cancel() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        let seeded = t.seed("u", TWO_JOBS, 2, 0).await;
        let a = TestAgent::enroll(&t, "a", "g").await;

        // A build failure fails the job for good.
        let job = a.lease().await.expect("job");
        let r = a
            .event(
                job.job_id,
                json!({"state": "failed", "failure": "build_failed", "detail": "error: foo.c"}),
            )
            .await;
        assert_eq!(r.status(), 204);
        let state: (String,) = sqlx::query_as("SELECT state FROM jobs WHERE id = $1")
            .bind(job.job_id)
            .fetch_one(t.db().read())
            .await
            .expect("state");
        assert_eq!(state.0, "failed");

        // Machine trouble re-queues it with the attempt counted.
        let job = a.lease().await.expect("job");
        let r = a
            .event(
                job.job_id,
                json!({"state": "failed", "failure": "infrastructure", "detail": "disk full"}),
            )
            .await;
        assert_eq!(r.status(), 204);
        let again = a.lease().await.expect("same job again");
        assert_eq!(again.job_id, job.job_id, "{backend:?}");
        assert_eq!(again.attempt, 2);

        // Bad events.
        let r = a
            .event(
                again.job_id,
                json!({"state": "failed", "failure": null, "detail": ""}),
            )
            .await;
        assert_eq!(error_code(r).await, (400, "bad_request".into()));
        let r = a
            .event(
                again.job_id,
                json!({"state": "finished", "failure": null, "detail": ""}),
            )
            .await;
        assert_eq!(error_code(r).await, (400, "bad_request".into()));
        let r = a
            .event(again.job_id, json!({"state": "exploded", "detail": ""}))
            .await;
        assert_eq!(error_code(r).await, (400, "invalid_json".into()));

        // Cancel: the holder learns it on its heartbeat, its upload is refused,
        // nothing else of the submission is handed out.
        let mut tx = t.db().begin().await.expect("tx");
        let n =
            jobs::lifecycle::cancel_submission(&mut tx, seeded.submission_id, "cancelled by test")
                .await
                .expect("cancel");
        tx.commit().await.expect("commit");
        assert_eq!(n, 7, "{backend:?}");
        assert!(a.heartbeat_ok(again.job_id).await.cancelled);
        assert_eq!(
            error_code(a.upload(again.job_id, 1.0).await).await,
            (409, "conflict".into())
        );
        assert!(a.lease().await.is_none());
        t.stop().await;
    }
}
