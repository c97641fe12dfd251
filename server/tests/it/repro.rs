//! One run reproduced from its script: the agent stores the initramfs it
//! booted and records its QEMU line; `GET /api/v1/jobs/{id}/repro` writes
//! the script from them and the run's `.config`; the initramfs downloads
//! byte for byte; `POST /api/v1/jobs/{id}/repro/check` reads a results
//! channel as the agent did and says whether it gives the run's numbers. (A
//! real kernel's reproduction is the robot end-to-end test's, `agent/tests/e2e/robot/`.)

use std::collections::BTreeMap;

use kbot_api::agent::ResultUpload;
use kbot_core::conditions;
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{backends, TestServer};

const JOB_FILE: &str = "\
testcase: perf-bench-sched-pipe
perf-bench-sched-pipe:
  loops: 5000
runs: 1
";

/// What the guest's /init writes for one execution of sched-pipe
/// (`kbot-bench sched-pipe --json`).
fn channel(ops: &str) -> String {
    format!(
        "@@KBOT-BEGIN uname\n6.1.0\n@@KBOT-END uname rc=0\n\
         @@KBOT-BEGIN output.0.0\n\
         {{\"tool\": \"sched-pipe\", \"metrics\": {{\"perf-bench-sched-pipe.ops_per_sec\": {ops}}}}}\n\
         @@KBOT-END output.0.0 rc=0\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_reproduced_by_its_script() {
    for backend in backends() {
        let t = TestServer::start(backend).await;
        t.seed("alice", JOB_FILE, 1, 0).await;
        let agent = TestAgent::enroll(&t, "box-a", "vm-qemu").await;
        let job = agent.lease().await.expect("a job");

        // The initramfs: only the lease holder may store it.
        let archive = b"070701 a newc archive, as far as this test cares".to_vec();
        let other = TestAgent::enroll(&t, "box-b", "vm-qemu").await;
        let refused = other
            .client()
            .upload_initramfs(job.job_id, archive.clone())
            .await
            .expect_err("not its job");
        assert_eq!(refused.status(), Some(403), "{backend:?}: {refused}");
        let stored = agent
            .client()
            .upload_initramfs(job.job_id, archive.clone())
            .await
            .expect("stored");
        assert_eq!(stored.bytes, archive.len() as i64);

        let written = channel("81234");
        let run_metrics = {
            let sections = kbot_core::guest::sections(&written);
            let runs = kbot_core::guest::executions(&sections).expect("runs");
            let resolved = job.job.resolve(&kbot_testkit::hardware()).expect("resolve");
            let plan = kbot_core::programs::guest_invocations(&job.job, &resolved).expect("plan");
            kbot_core::guest::metrics(&plan, &runs).expect("metrics")
        };
        assert_eq!(run_metrics["perf-bench-sched-pipe.ops_per_sec"], 81234.0);
        let argv = serde_json::to_string(&[
            "qemu-system-x86_64",
            "-icount",
            "shift=3,sleep=off",
            "-kernel",
            conditions::QEMU_KERNEL,
            "-initrd",
            conditions::QEMU_INITRD,
            "-serial",
            "stdio",
            "-serial",
            &format!("file:{}", conditions::QEMU_RESULTS),
        ])
        .expect("json");
        let tuning = BTreeMap::from([
            (conditions::QEMU_ARGV.to_string(), argv),
            (
                conditions::INITRAMFS_SHA256.to_string(),
                stored.sha256.clone(),
            ),
            (conditions::GUEST_ARCH.to_string(), "x86_64".to_string()),
            (
                conditions::QEMU_CLOCK.to_string(),
                "icount shift=3,sleep=off".to_string(),
            ),
        ]);
        let upload = ResultUpload {
            metrics: run_metrics,
            raw_output: written.clone(),
            console: None,
            kconfig: Some("CONFIG_64BIT=y\nCONFIG_PIPE_TEST=\"$HOME\"\n".into()),
            kernel_release: "6.1.0".into(),
            tuning,
            started_at: 1,
            finished_at: 2,
            profile: None,
        };
        let put = agent.put_result(job.job_id, &upload).await;
        assert!(put.status().is_success(), "{backend:?}: {}", put.status());

        let script = reqwest::get(t.url(&format!("/api/v1/jobs/{}/repro", job.job_id)))
            .await
            .expect("script");
        assert_eq!(script.status(), 200, "{backend:?}");
        let script = script.text().await.expect("text");
        assert!(
            script.contains(&format!("commit={}\n", job.commit)),
            "{script}"
        );
        assert!(
            script
                .contains("<<'END_OF_KERNEL_CONFIG'\nCONFIG_64BIT=y\nCONFIG_PIPE_TEST=\"$HOME\"\n"),
            "{script}"
        );
        assert!(script.contains(&stored.sha256), "{script}");
        assert!(script.contains("'-icount' 'shift=3,sleep=off'"), "{script}");
        assert!(script.contains("'file:'\"$results\""), "{script}");

        let initramfs = reqwest::get(t.url(&format!("/api/v1/initramfs/{}", stored.sha256)))
            .await
            .expect("initramfs");
        assert_eq!(initramfs.status(), 200);
        assert_eq!(initramfs.bytes().await.expect("bytes").to_vec(), archive);
        let missing = reqwest::get(t.url(&format!("/api/v1/initramfs/{}", "0".repeat(64))))
            .await
            .expect("missing");
        assert_eq!(error_code(missing).await.0, 404);

        let check = |body: String| {
            let url = t.url(&format!("/api/v1/jobs/{}/repro/check", job.job_id));
            async move {
                let answer = reqwest::Client::new()
                    .post(url)
                    .body(body)
                    .send()
                    .await
                    .expect("check");
                assert_eq!(answer.status(), 200);
                answer.text().await.expect("text")
            }
        };
        let same = check(written.clone()).await;
        assert!(same.contains("reproduced: yes"), "{backend:?}: {same}");
        assert!(same.contains("perf-bench-sched-pipe.ops_per_sec"), "{same}");
        let off = check(channel("81235")).await;
        assert!(
            off.contains("differs") && off.contains("reproduced: no"),
            "{backend:?}: {off}"
        );
        let broken = check("@@KBOT-BEGIN output.0.0\nkilled\n".into()).await;
        assert!(broken.contains("reproduced: no"), "{broken}");

        // A run without a QEMU line (the host backend's) has no script.
        t.seed("alice", JOB_FILE, 1, 0).await;
        let host_job = agent.lease().await.expect("another job");
        let put = agent.upload(host_job.job_id, 1.0).await;
        assert!(put.status().is_success());
        let none = reqwest::get(t.url(&format!("/api/v1/jobs/{}/repro", host_job.job_id)))
            .await
            .expect("no script");
        let (status, _) = error_code(none).await;
        assert_eq!(status, 409, "{backend:?}");
        t.stop().await;
    }
}
