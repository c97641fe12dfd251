//! The test harness every kbot crate's integration tests share (a
//! dev-dependency only): the real server on 127.0.0.1:0 against a fresh
//! store ([`TestServer`], [`TestStore`]), an agent speaking the protocol
//! ([`agent::TestAgent`]), and the fixtures around them: a small tmpfs that
//! fills up ([`tmpfs`]), real git repositories ([`gitrepo`]), a
//! public-inbox archive ([`inbox`]), an SMTP sink ([`smtp_sink`]), a
//! relay that stops an upload in flight ([`relay`]) and a real
//! S3-compatible server for the artifact bucket ([`s3`]).
//!
//! Every test runs on each backend of [`backends`]: always a temporary SQLite
//! file, and PostgreSQL when `KBOT_TEST_DATABASE_URL` is set (a database
//! named `kbot_test_<random>` is created on that server for the test and
//! dropped afterwards).

pub mod agent;
pub mod gitrepo;
pub mod inbox;
pub mod relay;
pub mod s3;
pub mod smtp_sink;
pub mod tmpfs;

pub use inbox::PublicInbox;

use std::time::Duration;

use kbot_api::agent::{BootBackend, EnrollRequest, EnrollResponse, Hardware};
use kbot_load::seed;
use kbot_server::config::Config;
use kbot_server::db::Db;
use kbot_server::mail::outbox::{NewReport, OutboxState, ReportKind};
use kbot_server::mail::{MailConfig, SmtpSettings};
use kbot_server::server::{RunningServer, Server};
use rand::RngCore;
use sqlx::{Connection, Executor, PgConnection};
use tempfile::TempDir;

/// One bw_pipe atomic job.
pub const ONE_JOB: &str = "testcase: bw_pipe\nbw_pipe:\n  size: 64k\n";

/// One bw_pipe atomic job on one thread, three runs per side.
pub const THREE_RUN_JOB: &str =
    "testcase: bw_pipe\nnr_threads: 1\nruns: 3\nbw_pipe:\n  size: 64k\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The backends to run on: SQLite always, PostgreSQL when configured.
pub fn backends() -> Vec<Backend> {
    let mut list = vec![Backend::Sqlite];
    match std::env::var("KBOT_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => list.push(Backend::Postgres),
        _ => {
            // CI has PostgreSQL (scripts/test sets the URL): never skip it there.
            assert!(
                std::env::var_os("CI").is_none(),
                "KBOT_TEST_DATABASE_URL is not set (scripts/test sets it)"
            );
            eprintln!("KBOT_TEST_DATABASE_URL is not set: skipping the PostgreSQL backend")
        }
    }
    list
}

/// A PostgreSQL database that exists for one test.
pub struct PgTestDatabase {
    admin_url: String,
    name: String,
    pub url: String,
}

impl PgTestDatabase {
    pub async fn create() -> PgTestDatabase {
        let admin_url = std::env::var("KBOT_TEST_DATABASE_URL").expect("KBOT_TEST_DATABASE_URL");
        let mut bytes = [0u8; 8];
        rand::thread_rng().fill_bytes(&mut bytes);
        let name = format!("kbot_test_{}", hex::encode(bytes));
        let mut conn = PgConnection::connect(&admin_url)
            .await
            .expect("connect to KBOT_TEST_DATABASE_URL");
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create test database");
        conn.close().await.ok();
        let mut url = url::Url::parse(&admin_url).expect("KBOT_TEST_DATABASE_URL is a URL");
        url.set_path(&format!("/{name}"));
        PgTestDatabase {
            admin_url,
            name,
            url: url.to_string(),
        }
    }
}

impl Drop for PgTestDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop runs outside async; a scratch runtime on its own thread does the DROP.
        let dropper = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                if let Ok(mut conn) = PgConnection::connect(&admin_url).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    if let Err(err) = conn.execute(sql.as_str()).await {
                        eprintln!("could not drop test database {name}: {err}");
                    }
                }
            });
        });
        let _ = dropper.join();
    }
}

/// Where a test's state lives; dropping it removes the state.
pub struct TestStore {
    pub backend: Backend,
    pub database_url: String,
    pub dir: TempDir,
    // Never read: held so that its Drop drops the PostgreSQL database with the store.
    #[allow(dead_code)]
    pg: Option<PgTestDatabase>,
}

impl TestStore {
    pub async fn new(backend: Backend) -> TestStore {
        let dir = tempfile::tempdir().expect("temp dir");
        let (database_url, pg) = match backend {
            Backend::Sqlite => (
                format!("sqlite://{}", dir.path().join("kbot.db").display()),
                None,
            ),
            Backend::Postgres => {
                let pg = PgTestDatabase::create().await;
                (pg.url.clone(), Some(pg))
            }
        };
        TestStore {
            backend,
            database_url,
            dir,
            pg,
        }
    }

    /// A store on a PostgreSQL database the test runs itself (a private
    /// cluster it may stop and start); `url` names an existing database.
    pub fn postgres_at(url: &str) -> TestStore {
        TestStore {
            backend: Backend::Postgres,
            database_url: url.to_string(),
            dir: tempfile::tempdir().expect("temp dir"),
            pg: None,
        }
    }

    pub fn config(&self) -> Config {
        let mut config = Config::new(&self.database_url, self.dir.path().join("artifacts"));
        config.bind = "127.0.0.1:0".parse().expect("address");
        config.shutdown_timeout_secs = 2;
        config
    }

    /// A second, independent connection to the same store (another replica).
    pub async fn connect(&self) -> Db {
        let db = Db::connect(&self.database_url).await.expect("connect");
        db.migrate().await.expect("migrate");
        db
    }
}

/// A running server and the store under it.
pub struct TestServer {
    pub server: RunningServer,
    pub http: reqwest::Client,
    pub store: TestStore,
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        TestServer::start_with(backend, |_| {}).await
    }

    /// Starts with a config adjusted by `tweak` (shorter leases, ...).
    pub async fn start_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> TestServer {
        TestServer::start_on(TestStore::new(backend).await, tweak).await
    }

    /// Starts on a given store, with a config adjusted by `tweak`.
    pub async fn start_on(store: TestStore, tweak: impl FnOnce(&mut Config)) -> TestServer {
        // Server-side errors (500s) show up in the test output.
        kbot_server::telemetry::init(false);
        let server = spawn(&store, tweak).await;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        TestServer {
            server,
            http,
            store,
        }
    }

    /// Stops the server and starts a new one on the same database and
    /// artifact dir, its config adjusted by `tweak`.
    pub async fn restart(self, tweak: impl FnOnce(&mut Config)) -> TestServer {
        let TestServer {
            server,
            http,
            store,
        } = self;
        server.stop().await.expect("clean shutdown");
        let server = spawn(&store, tweak).await;
        TestServer {
            server,
            http,
            store,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    pub fn db(&self) -> &Db {
        &self.server.state.db
    }

    /// Queues a submission of `job_file` by `user` on repo `linux` (two
    /// made-up commits), `runs` runs per side, all queued.
    pub async fn seed(&self, user: &str, job_file: &str, runs: u32, priority: i64) -> seed::Seeded {
        seed::submission(self.db(), "linux", user, job_file, runs, priority)
            .await
            .expect("seed")
    }

    pub async fn stop(self) {
        self.server.stop().await.expect("clean shutdown");
    }

    /// A fresh enrolment token, for any name not yet enrolled.
    pub async fn enrollment_token(&self) -> String {
        kbot_server::auth::create_enrollment_token(self.db(), "test")
            .await
            .expect("enrolment token")
    }

    /// A fresh enrolment token bound to the agent name `name` (which may
    /// then enrol again), as an operator issues them.
    pub async fn enrollment_token_for(&self, name: &str) -> String {
        let binding = kbot_server::auth::EnrolmentBinding {
            agent_name: Some(name.to_owned()),
            ..Default::default()
        };
        kbot_server::auth::create_bound_enrollment_token(self.db(), "test", &binding)
            .await
            .expect("enrolment token")
    }

    /// Enrols an agent called `name` in `tbox_group`; returns its id and token.
    pub async fn enroll(&self, name: &str, tbox_group: &str) -> EnrollResponse {
        self.enroll_as(name, tbox_group, BootBackend::Qemu).await
    }

    /// [`TestServer::enroll`] with another boot backend.
    pub async fn enroll_as(
        &self,
        name: &str,
        tbox_group: &str,
        backend: BootBackend,
    ) -> EnrollResponse {
        self.enroll_machine(name, tbox_group, backend, hardware(), None)
            .await
    }

    /// [`TestServer::enroll`] of a given machine under test and host.
    pub async fn enroll_machine(
        &self,
        name: &str,
        tbox_group: &str,
        backend: BootBackend,
        hardware: Hardware,
        host: Option<Hardware>,
    ) -> EnrollResponse {
        let request = EnrollRequest {
            enrollment_token: self.enrollment_token_for(name).await,
            name: name.to_string(),
            tbox_group: tbox_group.to_string(),
            backend,
            hardware,
            host,
        };
        let response = self
            .http
            .post(self.url("/api/v1/agents/enroll"))
            .json(&request)
            .send()
            .await
            .expect("enroll request");
        assert_eq!(response.status(), 200, "enrolment of {name} failed");
        response.json().await.expect("enroll response")
    }
}

/// A server on `store` with its config adjusted by `tweak`.
async fn spawn(store: &TestStore, tweak: impl FnOnce(&mut Config)) -> RunningServer {
    let mut config = store.config();
    tweak(&mut config);
    Server::build(config)
        .await
        .expect("server builds")
        .spawn()
        .expect("server spawns")
}

/// A plausible 2-socket test box.
pub fn hardware() -> Hardware {
    Hardware {
        arch: "x86_64".into(),
        cpu_model: "Intel(R) Xeon(R) Platinum 8321HC CPU @ 1.40GHz".into(),
        sockets: 2,
        cores: 8,
        threads: 16,
        numa_nodes: 2,
        memory_bytes: 64 << 30,
        page_size: 4096,
        microcode: Some("0x700001f".into()),
        kernel: "6.1.0-test".into(),
    }
}

/// SMTP to the loopback sink on `port`: plain, no login.
pub fn loopback_smtp(port: u16) -> SmtpSettings {
    SmtpSettings {
        host: "127.0.0.1".into(),
        port,
        starttls: false,
        credentials: None,
        timeout: Duration::from_secs(10),
    }
}

/// A regression report to dev@example.org as the outbox stores it, in
/// `state`; insert it with `mail::outbox::insert`.
pub fn outbox_report(message_id: &str, state: OutboxState) -> NewReport {
    NewReport {
        message_id: message_id.into(),
        submission_id: None,
        atomic_job_id: None,
        bisection_id: None,
        kind: ReportKind::Regression,
        state,
        subject: "[linux:master] [fs/pipe] f7f4665dc5: pipen.bandwidth 9.1% regression".into(),
        envelope_from: "kbot@kbot.test".into(),
        recipients: vec!["dev@example.org".into()].into(),
        message: format!(
            "From: kbot <kbot@kbot.test>\nTo: dev@example.org\nSubject: regression\n\
             Message-ID: <{message_id}>\n\nHello,\n"
        ),
        created_at: kbot_server::time::now_ms(),
        send_after: kbot_server::time::now_ms(),
        culprit: None,
        facts: None,
        thread: None,
    }
}

/// Mail on, to the loopback sink on `port`, retrying and polling fast.
pub fn loopback_mail(port: u16) -> MailConfig {
    MailConfig {
        enabled: true,
        smtp: loopback_smtp(port),
        retry_base: Duration::from_millis(50),
        retry_max: Duration::from_millis(200),
        poll_interval: Duration::from_millis(20),
        // Sent at once: the tests that gather findings set their own window.
        gather: Duration::ZERO,
        ..MailConfig::disabled()
    }
}

/// Every file under `dir`, recursively, whose name ends in `.EXT` (every
/// file when `ext` is `None`), for tests that read the tree's sources.
pub fn files_under(dir: &std::path::Path, ext: Option<&str>) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
                .path();
            if path.is_dir() {
                dirs.push(path);
            } else if ext.is_none_or(|e| path.extension().is_some_and(|x| x == e)) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
