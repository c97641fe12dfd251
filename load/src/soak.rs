//! `kbot-load soak`: the reliability run of issue #17. N simulated agents
//! work like real ones for a long time: lease a job, heartbeat every few
//! seconds through minutes of simulated work, upload, and keep going when a
//! server is unreachable (back off, fail over to the next replica, resend).
//! At the end the tool counts in the database what was stored against what
//! the server acknowledged, so a lost or doubled result cannot hide behind a
//! throughput figure.
//!
//! Unlike the throughput run, failures are expected here while a replica is
//! killed; they are counted by kind, and only an error response that a real
//! agent would not retry through (anything but a refused connection, a 503
//! or a lost lease) counts as an error.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kbot_api::agent::{EventRequest, JobState, ResultUpload};
use kbot_api::client::{self, AgentClient};
use sqlx::Row;

use kbot_server::auth;
use kbot_server::db::Db;
use kbot_server::error::Result;
use kbot_server::jobs::ACTIVE_STATES_SQL;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Base URLs of the server replicas; agent i starts on replica i mod n
    /// and fails over to the next one when its replica does not answer.
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    pub servers: Vec<String>,
    #[command(flatten)]
    pub db: kbot_server::config::DbArgs,
    #[arg(long, default_value_t = 500)]
    pub agents: usize,
    /// How long agents take new jobs; jobs in hand are finished after it.
    #[arg(long, default_value_t = 1800)]
    pub duration_secs: u64,
    /// Heartbeat interval during a job's simulated work.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_secs: u64,
    /// Mean simulated work per job; each job takes 0.5x to 1.5x of it.
    #[arg(long, default_value_t = 60)]
    pub work_secs: u64,
    /// Metrics per uploaded result.
    #[arg(long, default_value_t = 50)]
    pub metrics: usize,
    /// After the agents stop: how long to wait for leases whose answer was
    /// lost with a killed replica to expire and be requeued by the reaper
    /// (the server's lease time plus a reaper pass).
    #[arg(long, default_value_t = 200)]
    pub settle_secs: u64,
}

/// Outcome counts of the agents, then of the database.
#[derive(Debug, Default)]
pub struct SoakReport {
    pub agents: usize,
    pub seconds: f64,
    pub leased: u64,
    pub heartbeats: u64,
    /// Requests that a real agent retries: refused or reset connections,
    /// timeouts, 502/503/504 (a replica going down or the store away).
    pub retried: u64,
    /// Requests that reached the other replica because the agent's own
    /// did not answer.
    pub failed_over: u64,
    /// Jobs whose lease the server took back before the upload (409).
    pub leases_lost: u64,
    /// Any other error response: must be zero.
    pub errors: u64,
    /// Uploads the server answered 200 for, by job id.
    pub acknowledged: BTreeSet<i64>,
    /// Of those, answered `stored: false` (a resend of a stored result).
    pub resends_answered_stored: u64,
    pub db: DbCounts,
}

/// What the store holds after the run.
#[derive(Debug, Default)]
pub struct DbCounts {
    pub results: i64,
    pub distinct_result_jobs: i64,
    pub done_jobs: i64,
    pub active_jobs: i64,
    /// Acknowledged uploads without a stored result: must be zero.
    pub acknowledged_missing: usize,
    /// Stored results no upload was acknowledged for (the answer was lost
    /// with a killed replica and the job was not resent): reported, not an
    /// error, since the agent would resend from its spool on its next start.
    pub stored_unacknowledged: usize,
}

impl SoakReport {
    /// The run kept every promise: nothing lost, nothing twice, no error.
    pub fn holds(&self) -> bool {
        self.errors == 0
            && self.db.acknowledged_missing == 0
            && self.db.results == self.db.distinct_result_jobs
            && self.db.results == self.db.done_jobs
            && self.db.active_jobs == 0
    }
}

impl std::fmt::Display for SoakReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let db = &self.db;
        writeln!(
            f,
            "agents {} for {:.0} s: {} jobs leased, {} heartbeats",
            self.agents, self.seconds, self.leased, self.heartbeats
        )?;
        writeln!(
            f,
            "retried {} requests ({} failed over to another replica), {} leases lost, {} errors",
            self.retried, self.failed_over, self.leases_lost, self.errors
        )?;
        writeln!(
            f,
            "uploads acknowledged {} ({} answered as already stored)",
            self.acknowledged.len(),
            self.resends_answered_stored
        )?;
        writeln!(
            f,
            "database: {} results for {} distinct jobs, {} jobs done, {} still active",
            db.results, db.distinct_result_jobs, db.done_jobs, db.active_jobs
        )?;
        writeln!(
            f,
            "acknowledged but missing {}, stored but unacknowledged {}",
            db.acknowledged_missing, db.stored_unacknowledged
        )?;
        write!(
            f,
            "verdict: {}",
            if self.holds() { "HOLDS" } else { "BROKEN" }
        )
    }
}

/// Seeds jobs, enrols the agents across the replicas, runs them, counts.
pub async fn run(args: &SoakArgs) -> Result<SoakReport> {
    if args.servers.is_empty() {
        return Err(anyhow::anyhow!("--servers is empty").into());
    }
    let db = Db::connect(&args.db.resolve()).await?;
    kbot_server::server::migrate(&db).await?;
    let per_agent = args.duration_secs.div_ceil(args.work_secs.max(1) / 2 + 1);
    super::queue_jobs(&db, per_agent * args.agents as u64 + 800).await?;
    let http = super::agents_client(args.agents)?;
    let mut agents = Vec::with_capacity(args.agents);
    for i in 0..args.agents {
        let server = &args.servers[i % args.servers.len()];
        let token = auth::create_enrollment_token(&db, "kbot-load soak").await?;
        let enrolled = super::enroll(&http, server, &token, i, "load-vm").await?;
        let replicas = args.servers.iter().map(|server| {
            AgentClient::with_http(http.clone(), server, Some(enrolled.agent_token.clone()))
        });
        agents.push(SoakAgent {
            replicas: replicas.collect(),
            home: i % args.servers.len(),
            heartbeat: Duration::from_secs(args.heartbeat_secs.max(1)),
            work: Duration::from_secs(args.work_secs),
            metrics: args.metrics,
            seed: (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        });
    }
    eprintln!(
        "enrolled {} agents over {} replica(s); soaking {} s",
        agents.len(),
        args.servers.len(),
        args.duration_secs
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.duration_secs);
    let mut report = SoakReport::default();
    for mine in super::run_all(agents.into_iter().map(|agent| agent.soak(deadline))).await? {
        report.merge(mine);
    }
    report.agents = args.agents;
    report.seconds = started.elapsed().as_secs_f64();
    report.db = settle(
        &db,
        &report.acknowledged,
        Duration::from_secs(args.settle_secs),
    )
    .await?;
    db.close().await;
    Ok(report)
}

/// Counts once nothing is left leased, or after `patience`: a lease whose
/// answer died with a replica stays active until it expires.
async fn settle(db: &Db, acknowledged: &BTreeSet<i64>, patience: Duration) -> Result<DbCounts> {
    let until = Instant::now() + patience;
    loop {
        let counts = count(db, acknowledged).await?;
        if counts.active_jobs == 0 || Instant::now() >= until {
            return Ok(counts);
        }
        eprintln!(
            "{} jobs still leased; waiting for their leases to expire",
            counts.active_jobs
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

async fn count(db: &Db, acknowledged: &BTreeSet<i64>) -> Result<DbCounts> {
    let pool = db.read();
    let totals = sqlx::query(&format!(
        "SELECT (SELECT COUNT(*) FROM results) AS results, \
                (SELECT COUNT(DISTINCT job_id) FROM results) AS distinct_jobs, \
                (SELECT COUNT(*) FROM jobs WHERE state = 'finished') AS done_jobs, \
                (SELECT COUNT(*) FROM jobs WHERE state IN {ACTIVE_STATES_SQL}) AS active_jobs"
    ))
    .fetch_one(pool)
    .await?;
    let stored: BTreeSet<i64> = sqlx::query("SELECT job_id FROM results")
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| row.try_get::<i64, _>("job_id"))
        .collect::<std::result::Result<_, _>>()?;
    Ok(DbCounts {
        results: totals.try_get("results")?,
        distinct_result_jobs: totals.try_get("distinct_jobs")?,
        done_jobs: totals.try_get("done_jobs")?,
        active_jobs: totals.try_get("active_jobs")?,
        acknowledged_missing: acknowledged.difference(&stored).count(),
        stored_unacknowledged: stored.difference(acknowledged).count(),
    })
}

/// How one request ended, as an agent sees it.
enum Outcome<T> {
    Ok(T),
    /// 409: the server took the job back (expired lease, cancelled).
    LeaseLost,
    /// An answer no retry will change.
    Failed(String),
}

struct SoakAgent {
    /// The same agent's client of each replica, in `--servers` order.
    replicas: Vec<AgentClient>,
    home: usize,
    heartbeat: Duration,
    work: Duration,
    metrics: usize,
    seed: u64,
}

impl SoakAgent {
    async fn soak(mut self, deadline: Instant) -> SoakReport {
        let mut report = SoakReport::default();
        while Instant::now() < deadline {
            let job = match self
                .request(&mut report, "lease", |c| async move { c.lease(10).await })
                .await
            {
                Outcome::Ok(lease) => lease.job,
                Outcome::LeaseLost => None,
                Outcome::Failed(err) => {
                    report.error(err);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    None
                }
            };
            let Some(job) = job else { continue };
            report.leased += 1;
            self.work_on(job.job_id, &mut report).await;
        }
        report
    }

    /// A job's life after its lease: running, heartbeats through the
    /// simulated work, then the upload until the server answers it.
    async fn work_on(&mut self, job_id: i64, report: &mut SoakReport) {
        let running = &EventRequest {
            state: JobState::Running,
            failure: None,
            detail: "simulated run".into(),
        };
        let event = self
            .request(report, "event", |c| async move {
                c.event(job_id, running).await
            })
            .await;
        if !step(report, event) {
            return;
        }
        let work = self.next_work();
        let until = Instant::now() + work;
        while Instant::now() + self.heartbeat < until {
            tokio::time::sleep(self.heartbeat).await;
            report.heartbeats += 1;
            let beat = self
                .request(
                    report,
                    "heartbeat",
                    |c| async move { c.heartbeat(job_id).await },
                )
                .await;
            if !step(report, beat) {
                return;
            }
        }
        tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
        let upload = &self.result(job_id);
        let uploaded = self
            .request(report, "upload", |c| async move {
                c.upload(job_id, upload).await
            })
            .await;
        match uploaded {
            Outcome::Ok(answer) => {
                report.acknowledged.insert(job_id);
                report.resends_answered_stored += u64::from(!answer.stored);
            }
            Outcome::LeaseLost => report.leases_lost += 1,
            Outcome::Failed(err) => report.error(err),
        }
    }

    /// Calls until an answer comes that a retry would not change: a real
    /// agent backs off (1 s doubling to 10 s) and, with several replicas,
    /// tries the next one, as a load balancer would.
    async fn request<T, F, Fut>(&self, report: &mut SoakReport, what: &str, call: F) -> Outcome<T>
    where
        F: Fn(AgentClient) -> Fut,
        Fut: std::future::Future<Output = client::Result<T>>,
    {
        let mut backoff = Duration::from_secs(1);
        let mut replica = self.home;
        loop {
            match call(self.replicas[replica].clone()).await {
                Ok(answer) => return Outcome::Ok(answer),
                Err(err) if err.status() == Some(409) => return Outcome::LeaseLost,
                Err(err) if err.status().is_some_and(is_transient) => {}
                // Refused, reset or timed out: the replica is down or
                // restarting, which is what this run is about.
                Err(client::Error::Http { .. }) => {}
                Err(err) => return Outcome::Failed(format!("{what}: {err}")),
            }
            report.retried += 1;
            if self.replicas.len() > 1 {
                replica = (replica + 1) % self.replicas.len();
                report.failed_over += u64::from(replica != self.home);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }

    /// Work time in [0.5, 1.5) x the mean, from a per-agent xorshift so
    /// that agents drift apart instead of heartbeating in lockstep.
    fn next_work(&mut self) -> Duration {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let unit = (self.seed % 1000) as f64 / 1000.0;
        self.work.mul_f64(0.5 + unit)
    }

    fn result(&self, job_id: i64) -> ResultUpload {
        super::simulated_result(job_id, self.metrics)
    }
}

/// Whether the job goes on after a job-scoped request; false when the job
/// is over for this agent.
fn step<T>(report: &mut SoakReport, outcome: Outcome<T>) -> bool {
    match outcome {
        Outcome::Ok(_) => true,
        Outcome::LeaseLost => {
            report.leases_lost += 1;
            false
        }
        Outcome::Failed(err) => {
            report.error(err);
            false
        }
    }
}

/// 502, 503, 504: a proxy or a replica on its way down or up.
fn is_transient(status: u16) -> bool {
    matches!(status, 502..=504)
}

impl SoakReport {
    fn error(&mut self, err: String) {
        self.errors += 1;
        if self.errors <= 5 {
            eprintln!("agent error: {err}");
        }
    }

    fn merge(&mut self, other: SoakReport) {
        self.leased += other.leased;
        self.heartbeats += other.heartbeats;
        self.retried += other.retried;
        self.failed_over += other.failed_over;
        self.leases_lost += other.leases_lost;
        self.errors += other.errors;
        self.resends_answered_stored += other.resends_answered_stored;
        self.acknowledged.extend(other.acknowledged);
    }
}
