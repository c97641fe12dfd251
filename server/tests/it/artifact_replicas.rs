//! The artifact bucket (`KBOT_ARTIFACT_STORE`) on a real S3-compatible
//! server, s3s-fs ([`kbot_testkit::s3`]). On PostgreSQL two replicas share
//! one database and one bucket, each with its own artifact directory: an
//! agent enrolled through one uploads through the other, and both serve the
//! console (the job's log page) and read the raw output and kernel config
//! back byte for byte, from the bucket and from neither directory. On
//! SQLite one server does the same round trip.
//!
//! With s3s-fs killed an upload answers the retryable 503
//! `artifact_store_unavailable` with a Retry-After and stores nothing
//! (no row, no object); the result stored before is intact, and once s3s-fs
//! is back on the same root and port the same upload is stored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use kbot_api::agent::{ResultUpload, UploadResponse};
use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::s3::S3Server;
use kbot_testkit::{
    backends, files_under, Backend, PgTestDatabase, TestServer, TestStore, ONE_JOB,
};
use object_store::ObjectStore;
use sqlx::Row;

/// The servers of one case: replicas A and B on PostgreSQL; on SQLite,
/// one server that is both.
struct Replicas {
    a: TestServer,
    b: Option<TestServer>,
    pg: Option<PgTestDatabase>,
}

impl Replicas {
    async fn start(backend: Backend, s3: &S3Server) -> Replicas {
        let settings = s3.settings();
        let bucket =
            |c: &mut kbot_server::config::Config| c.artifact_store = Some(settings.clone());
        match backend {
            Backend::Sqlite => Replicas {
                a: TestServer::start_with(backend, bucket).await,
                b: None,
                pg: None,
            },
            Backend::Postgres => {
                let pg = PgTestDatabase::create().await;
                // Each store has a temporary directory of its own: the
                // replicas' artifact directories differ.
                let a = TestServer::start_on(TestStore::postgres_at(&pg.url), bucket).await;
                let b = TestServer::start_on(TestStore::postgres_at(&pg.url), bucket).await;
                assert_ne!(artifact_dir(&a), artifact_dir(&b));
                Replicas {
                    a,
                    b: Some(b),
                    pg: Some(pg),
                }
            }
        }
    }

    fn b(&self) -> &TestServer {
        self.b.as_ref().unwrap_or(&self.a)
    }

    fn all(&self) -> Vec<&TestServer> {
        std::iter::once(&self.a).chain(self.b.as_ref()).collect()
    }

    async fn stop(self) {
        self.a.stop().await;
        if let Some(b) = self.b {
            b.stop().await;
        }
        drop(self.pg);
    }
}

fn artifact_dir(t: &TestServer) -> &Path {
    &t.server.state.config.artifact_dir
}

/// The same agent (token and id) speaking to another replica.
fn through<'a>(agent: &TestAgent<'_>, t: &'a TestServer) -> TestAgent<'a> {
    TestAgent {
        t,
        token: agent.token.clone(),
        id: agent.id,
    }
}

/// A result whose artifacts are big and not plain ASCII, tagged `tag`.
fn upload(tag: &str) -> ResultUpload {
    // Raw output is never rendered as HTML: any text goes.
    let raw_output: String = (0..16_000)
        .map(|i| format!("{tag} {i:05} 64k pipe bandwidth: 1234.5 MB/s <µs> & \"naïve\" → ok\n"))
        .collect();
    // The console is shown in the log page's <pre>: no character the page
    // escapes, so the page holds it byte for byte.
    let console: String = (0..2_000)
        .map(|i| format!("[{i:>5}.000000] {tag} Linux version 6.1.0 (kbot@build) µs → ok\n"))
        .collect();
    assert!(!console.contains(['<', '>', '&', '"', '\'']));
    ResultUpload {
        metrics: BTreeMap::from([("bw_pipe.bandwidth.MB/sec".to_string(), 1234.5)]),
        raw_output,
        console: Some(console),
        kconfig: Some(format!("# {tag}\nCONFIG_SMP=y\nCONFIG_HZ_1000=y\n")),
        kernel_release: "6.1.0".into(),
        tuning: BTreeMap::new(),
        started_at: 1,
        finished_at: 2,
        profile: None,
    }
}

/// The result row's artifact keys: raw output, console, kconfig.
async fn artifact_keys(t: &TestServer, job_id: i64) -> Option<[String; 3]> {
    let row = sqlx::query(
        "SELECT raw_output_path, console_path, kconfig_path FROM results WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_optional(t.db().read())
    .await
    .expect("result row")?;
    let key = |column: &str| -> String {
        row.get::<Option<String>, _>(column)
            .unwrap_or_else(|| panic!("job {job_id}: no {column}"))
    };
    Some([
        key("raw_output_path"),
        key("console_path"),
        key("kconfig_path"),
    ])
}

/// The console as the job's log page shows it (`<pre id="console">`).
async fn console_page(t: &TestServer, job_id: i64) -> (u16, Option<String>) {
    let response = t
        .http
        .get(t.url(&format!("/jobs/{job_id}/log")))
        .send()
        .await
        .expect("log page");
    let status = response.status().as_u16();
    let page = response.text().await.expect("log page body");
    let console = page
        .split_once("id=\"console\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(text, _)| text.to_string());
    (status, console)
}

/// The objects in the bucket, as s3s-fs keeps them on disk.
fn bucket_files(s3: &S3Server) -> BTreeSet<String> {
    let bucket = s3.object_path("");
    files_under(&bucket, None)
        .iter()
        .map(|p| {
            let key = p.strip_prefix(&bucket).expect("under the bucket");
            key.display().to_string()
        })
        .collect()
}

/// Every replica serves the artifacts of `job_id` as `sent`, from the bucket.
async fn assert_served(replicas: &Replicas, s3: &S3Server, job_id: i64, sent: &ResultUpload) {
    let keys = artifact_keys(&replicas.a, job_id).await.expect("a result");
    let console = sent.console.clone().expect("a console");
    let kconfig = sent.kconfig.clone().expect("a kconfig");
    let texts = [sent.raw_output.as_str(), &console, &kconfig];
    for (key, text) in keys.iter().zip(texts) {
        // The object is a file under s3s-fs's root, and S3 serves it.
        let on_disk = std::fs::read(s3.object_path(key));
        assert_eq!(
            on_disk.ok().as_deref(),
            Some(text.as_bytes()),
            "{key} in the bucket's directory"
        );
        let object = s3.client().get(&key.as_str().into()).await;
        let object = object.expect("GET from S3").bytes().await.expect("body");
        assert_eq!(&object[..], text.as_bytes(), "{key} through S3");
        for (i, t) in replicas.all().into_iter().enumerate() {
            let read = t.server.state.artifacts.get(key).await.expect("read back");
            assert!(read == text, "replica {i} reads {key} back changed");
        }
    }
    for (i, t) in replicas.all().into_iter().enumerate() {
        let (status, shown) = console_page(t, job_id).await;
        assert_eq!(status, 200, "replica {i}: /jobs/{job_id}/log");
        assert!(
            shown.as_deref() == Some(console.as_str()),
            "replica {i}: /jobs/{job_id}/log shows another console"
        );
        // Nothing of it in the replica's own directory.
        let dir = artifact_dir(t);
        assert!(!dir.join("results").exists(), "{}", dir.display());
        let local: Vec<_> = files_under(dir, None)
            .into_iter()
            .filter(|p| p.components().any(|c| c.as_os_str() == "results"))
            .collect();
        assert!(local.is_empty(), "replica {i} kept {local:?}");
    }
}

async fn stored(t: &TestServer, job_id: i64) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM results WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(t.db().read())
        .await
        .expect("count")
        .get(0)
}

/// The job's kernel shared through B (a claim, its files, `ready`) is
/// served byte for byte by every replica, from the bucket.
async fn kernel_through_b(
    replicas: &Replicas,
    s3: &S3Server,
    agent: &TestAgent<'_>,
    job: &kbot_api::agent::LeasedJob,
) {
    use kbot_api::builds::{BuildClaim, BuildReady, ClaimAnswer, Claimant};
    let b = through(agent, replicas.b()).client();
    let key = "0123456789abcdef01234567";
    let claim = BuildClaim {
        job_id: Some(job.job_id),
        order_id: None,
        build_key: key.into(),
        commit: job.commit.clone(),
        arch: "x86_64".into(),
    };
    assert_eq!(
        b.claim_build(&claim).await.expect("claim"),
        ClaimAnswer::Build
    );
    let image: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut files = Vec::new();
    for (name, content) in [
        ("bzImage", image.clone()),
        ("config", b"CONFIG_PIPE=y\n".to_vec()),
    ] {
        files.push(
            b.upload_build_file(key, name, Claimant::Job(job.job_id), content)
                .await
                .expect("upload"),
        );
    }
    let ready = BuildReady {
        job_id: Some(job.job_id),
        order_id: None,
        release: "6.1.0".into(),
        build_id: None,
        build_secs: 60.0,
        files,
    };
    b.build_ready(key, &ready).await.expect("ready");
    for t in replicas.all() {
        let (bytes, _) = through(agent, t)
            .client()
            .build_file(key, "bzImage")
            .await
            .expect("download");
        assert!(
            bytes.as_ref() == image.as_slice(),
            "the image from every replica"
        );
        assert!(
            !artifact_dir(t).join("builds").exists(),
            "no build in a directory"
        );
    }
    assert!(bucket_files(s3).contains(&format!("builds/{key}/bzImage")));
}

/// Leases through A, uploads through B (the same server on SQLite).
async fn round_trip(backend: Backend) {
    let s3 = S3Server::start().await;
    let replicas = Replicas::start(backend, &s3).await;
    replicas.a.seed("dev", ONE_JOB, 1, 0).await;
    let agent = TestAgent::enroll(&replicas.a, "box-s3", "lkp-s3").await;
    let job = agent.lease().await.expect("a job");
    kernel_through_b(&replicas, &s3, &agent, &job).await;
    let sent = upload("round-trip");
    let response = through(&agent, replicas.b())
        .put_result(job.job_id, &sent)
        .await;
    assert_eq!(response.status(), 200, "{backend:?}: the upload through B");
    let answer: UploadResponse = response.json().await.expect("upload body");
    assert!(answer.stored, "{backend:?}");
    assert_served(&replicas, &s3, job.job_id, &sent).await;
    replicas.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_serve_what_either_stored_in_one_bucket() {
    for backend in backends() {
        round_trip(backend).await;
    }
}

/// s3s-fs killed between two uploads, then started again.
async fn outage(backend: Backend) {
    let mut s3 = S3Server::start().await;
    let replicas = Replicas::start(backend, &s3).await;
    replicas.a.seed("dev", ONE_JOB, 1, 0).await;
    let enrolled = TestAgent::enroll(&replicas.a, "box-s3-down", "lkp-s3").await;
    let agent = through(&enrolled, replicas.b());

    let first = enrolled.lease().await.expect("a job");
    let kept = upload("before");
    assert_eq!(agent.put_result(first.job_id, &kept).await.status(), 200);
    let held = enrolled.lease().await.expect("a second job");
    let before = bucket_files(&s3);

    s3.kill();
    let sent = upload("during");
    let start = Instant::now();
    let refused = agent.put_result(held.job_id, &sent).await;
    let took = start.elapsed();
    let retry_after = refused
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or_default().to_string());
    let (status, code) = error_code(refused).await;
    assert_eq!(
        (status, code.as_str()),
        (503, "artifact_store_unavailable"),
        "{backend:?}: an upload with the bucket down"
    );
    assert_eq!(retry_after.as_deref(), Some("5"), "{backend:?}");
    eprintln!("{backend:?}: the upload with the bucket down answered 503 in {took:?}");
    // Nothing half-stored: no row, no object, nothing in a directory.
    assert_eq!(stored(&replicas.a, held.job_id).await, 0, "{backend:?}");
    assert_eq!(bucket_files(&s3), before, "{backend:?}: the bucket");
    for t in replicas.all() {
        assert!(!artifact_dir(t).join("results").exists(), "{backend:?}");
        // Reading an artifact meanwhile is a 503 too, not a 500.
        assert_eq!(console_page(t, first.job_id).await.0, 503, "{backend:?}");
    }
    // The lease stands: the refusal is the server's trouble, not the run's.
    assert!(!agent.heartbeat_ok(held.job_id).await.cancelled);

    s3.restart().await;
    // The result from before the outage is intact, on every replica.
    assert_served(&replicas, &s3, first.job_id, &kept).await;
    let response = agent.put_result(held.job_id, &sent).await;
    assert_eq!(response.status(), 200, "{backend:?}: the upload sent again");
    let answer: UploadResponse = response.json().await.expect("upload body");
    assert!(answer.stored, "{backend:?}");
    assert_eq!(stored(&replicas.a, held.job_id).await, 1, "{backend:?}");
    assert_served(&replicas, &s3, held.job_id, &sent).await;
    assert_served(&replicas, &s3, first.job_id, &kept).await;
    replicas.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_down_is_a_503_and_nothing_is_half_stored() {
    for backend in backends() {
        outage(backend).await;
    }
}
