//! PostgreSQL stopped and started under a running server: meanwhile every
//! request that needs the store answers 503 `database_unavailable` with a
//! Retry-After (so agents back off and retry: 5xx is retryable for them),
//! `/healthz` says so, nothing acknowledged before is lost, and the server
//! recovers without a restart; an upload sent again after the outage is
//! stored once.
//!
//! The test runs its own PostgreSQL cluster (initdb in a temporary
//! directory, on a free port) so that stopping it disturbs no other test.
//! The PostgreSQL server binaries are part of every machine kbot tests on;
//! without them the test fails rather than skips.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kbot_testkit::agent::{error_code, TestAgent};
use kbot_testkit::{TestServer, TestStore, THREE_RUN_JOB};
use sqlx::Row;
use tempfile::TempDir;

/// A PostgreSQL cluster of the test's own, stopped when dropped.
struct PgCluster {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
    /// initdb and pg_ctl refuse to run as root: they run as `postgres` then.
    as_postgres: bool,
}

impl PgCluster {
    fn start() -> PgCluster {
        let bin = postgres_bin_dir();
        let dir = tempfile::tempdir().expect("temp dir");
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown").arg("postgres:").arg(dir.path()));
        }
        let port = free_port();
        let cluster = PgCluster {
            bin,
            dir,
            port,
            as_postgres,
        };
        let data = cluster.data();
        cluster.pg(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        cluster.pg_ctl_start();
        cluster
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn pg_ctl_start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("postgres.log").display().to_string();
        self.pg(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    fn pg_ctl_stop(&self) {
        self.pg("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    /// Runs a PostgreSQL program of `bin`; it must succeed.
    fn pg(&self, program: &str, args: &[&str]) {
        run(self.command(program).args(args));
    }

    /// A PostgreSQL program of `bin`, run as `postgres` when we are root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        command.current_dir(self.dir.path());
        command
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "stop"];
        let _ = self.command("pg_ctl").args(args).output();
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with `pg_ctl`.
fn postgres_bin_dir() -> PathBuf {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("the PostgreSQL server binaries (/usr/lib/postgresql) are installed")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop()
        .expect("a /usr/lib/postgresql/<version>/bin/pg_ctl")
        .1
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

fn run(command: &mut Command) {
    let out = command.output().expect("command runs");
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn healthz(t: &TestServer) -> (u16, String) {
    let response = t.http.get(t.url("/healthz")).send().await.expect("healthz");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Waits until `/healthz` answers 200 again; returns how long it took.
async fn wait_healthy(t: &TestServer, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if healthz(t).await.0 == 200 {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "the server did not recover in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn stored_results(t: &TestServer) -> Vec<(i64, i64)> {
    sqlx::query("SELECT job_id, agent_id FROM results ORDER BY job_id")
        .fetch_all(t.db().read())
        .await
        .expect("results")
        .iter()
        .map(|row| (row.get("job_id"), row.get("agent_id")))
        .collect()
}

fn assert_unavailable(what: &str, status: u16, code: &str) {
    assert_eq!(
        (status, code),
        (503, "database_unavailable"),
        "{what} while PostgreSQL is down"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_is_503_and_the_server_recovers_without_a_restart() {
    let cluster = PgCluster::start();
    let t = TestServer::start_on(TestStore::postgres_at(&cluster.url()), |_| {}).await;
    t.seed("alice", THREE_RUN_JOB, 3, 0).await;
    let agent = TestAgent::enroll(&t, "vm-outage-1", "vm-outage").await;

    // Acknowledged before the outage: one result.
    let first = agent.run_one().await.expect("a queued job");
    // Leased before the outage, uploaded after it.
    let held = agent.lease().await.expect("a second queued job");
    assert_eq!(stored_results(&t).await, vec![(first.job_id, agent.id)]);

    cluster.pg_ctl_stop();
    let (status, body) = healthz(&t).await;
    assert_eq!(status, 503, "healthz while PostgreSQL is down: {body}");
    assert!(
        body.contains("database_unavailable"),
        "healthz says why: {body}"
    );

    let response = agent.upload(held.job_id, 100.0).await;
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or_default().to_string());
    let (status, code) = error_code(response).await;
    assert_unavailable("the upload", status, &code);
    assert_eq!(
        retry_after.as_deref(),
        Some("5"),
        "a 503 says when to retry"
    );
    let response = agent.heartbeat(held.job_id).await;
    let (status, code) = error_code(response).await;
    assert_unavailable("a heartbeat", status, &code);
    let response = t
        .http
        .get(t.url("/api/v1/submissions"))
        .send()
        .await
        .expect("list");
    let (status, code) = error_code(response).await;
    assert_unavailable("a read", status, &code);

    // Once the pool's old connections are used up, new ones are refused:
    // still 503, not 500.
    let mut slowest = Duration::ZERO;
    for _ in 0..8 {
        let start = Instant::now();
        let (status, body) = healthz(&t).await;
        slowest = slowest.max(start.elapsed());
        assert_eq!(status, 503, "healthz with no connection left: {body}");
    }
    eprintln!("healthz while down answered 503 in at most {slowest:?}");
    let start = Instant::now();
    let (status, code) = error_code(agent.upload(held.job_id, 100.0).await).await;
    assert_unavailable("an upload with no connection left", status, &code);
    eprintln!(
        "an upload with no connection left: 503 in {:?}",
        start.elapsed()
    );

    cluster.pg_ctl_start();
    let took = wait_healthy(&t, Duration::from_secs(60)).await;
    eprintln!("the server answered healthz 200 {took:?} after PostgreSQL was back");

    // The agent's spool sends the upload again (a connection that died with
    // the restart may fail one more statement first: 503, retried).
    let mut status = 0;
    for _ in 0..10 {
        status = agent.upload(held.job_id, 100.0).await.status().as_u16();
        if status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(status, 200, "the upload after the outage");
    // A resend of an upload that was stored is acknowledged, not stored twice.
    assert_eq!(agent.upload(held.job_id, 100.0).await.status(), 200);
    assert_eq!(
        stored_results(&t).await,
        vec![(first.job_id, agent.id), (held.job_id, agent.id)],
        "the result from before the outage is kept and the resent one is stored once"
    );
    // The server goes on leasing without a restart.
    assert!(agent.run_one().await.is_some(), "a lease after the outage");
    t.stop().await;
    drop(cluster);
}
