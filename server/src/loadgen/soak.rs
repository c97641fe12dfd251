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

use kbot_api::agent::{EventRequest, JobState, LeaseRequest, LeaseResponse, ResultUpload};
use reqwest::StatusCode;
use sqlx::Row;

use crate::auth;
use crate::db::Db;
use crate::error::Result;
use crate::jobs::ACTIVE_STATES_SQL;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Base URLs of the server replicas; agent i starts on replica i mod n
    /// and fails over to the next one when its replica does not answer.
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    pub servers: Vec<String>,
    #[command(flatten)]
    pub db: crate::config::DbArgs,
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
    db.migrate().await?;
    let per_agent = args.duration_secs.div_ceil(args.work_secs.max(1) / 2 + 1);
    super::queue_jobs(&db, per_agent * args.agents as u64 + 800).await?;
    let http = super::agents_client(args.agents)?;
    let mut agents = Vec::with_capacity(args.agents);
    for i in 0..args.agents {
        let server = &args.servers[i % args.servers.len()];
        let token = auth::create_enrollment_token(&db, "kbot-load soak").await?;
        let enrolled = super::enroll(&http, server, &token, i).await?;
        agents.push(SoakAgent {
            http: http.clone(),
            servers: args.servers.clone(),
            home: i % args.servers.len(),
            token: enrolled.agent_token,
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
enum Outcome {
    Ok(reqwest::Response),
    /// 409: the server took the job back (expired lease, cancelled).
    LeaseLost,
    /// An answer no retry will change.
    Failed(String),
}

struct SoakAgent {
    http: reqwest::Client,
    servers: Vec<String>,
    home: usize,
    token: String,
    heartbeat: Duration,
    work: Duration,
    metrics: usize,
    seed: u64,
}

impl SoakAgent {
    async fn soak(mut self, deadline: Instant) -> SoakReport {
        let mut report = SoakReport::default();
        while Instant::now() < deadline {
            let lease = LeaseRequest { wait_secs: 10 };
            let job = match self
                .request(
                    &mut report,
                    reqwest::Method::POST,
                    "/api/v1/agents/lease",
                    &lease,
                )
                .await
            {
                Outcome::Ok(response) => match response.json::<LeaseResponse>().await {
                    Ok(lease) => lease.job,
                    Err(err) => {
                        report.error(format!("lease body: {err}"));
                        None
                    }
                },
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
        let running = EventRequest {
            state: JobState::Running,
            failure: None,
            detail: "simulated run".into(),
        };
        let path = format!("/api/v1/jobs/{job_id}/events");
        if !self
            .step(report, reqwest::Method::POST, &path, &running)
            .await
        {
            return;
        }
        let work = self.next_work();
        let until = Instant::now() + work;
        let path = format!("/api/v1/jobs/{job_id}/heartbeat");
        while Instant::now() + self.heartbeat < until {
            tokio::time::sleep(self.heartbeat).await;
            report.heartbeats += 1;
            if !self.step(report, reqwest::Method::POST, &path, &()).await {
                return;
            }
        }
        tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
        let upload = self.result(job_id);
        let path = format!("/api/v1/jobs/{job_id}/result");
        match self
            .request(report, reqwest::Method::PUT, &path, &upload)
            .await
        {
            Outcome::Ok(response) => {
                let stored = response
                    .json::<kbot_api::agent::UploadResponse>()
                    .await
                    .map(|r| r.stored);
                match stored {
                    Ok(stored) => {
                        report.acknowledged.insert(job_id);
                        report.resends_answered_stored += u64::from(!stored);
                    }
                    Err(err) => report.error(format!("upload body: {err}")),
                }
            }
            Outcome::LeaseLost => report.leases_lost += 1,
            Outcome::Failed(err) => report.error(err),
        }
    }

    /// One job-scoped request; false when the job is over for this agent.
    async fn step<T: serde::Serialize>(
        &mut self,
        report: &mut SoakReport,
        method: reqwest::Method,
        path: &str,
        body: &T,
    ) -> bool {
        match self.request(report, method, path, body).await {
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

    /// Sends until an answer comes that a retry would not change: a real
    /// agent backs off (1 s doubling to 10 s) and, with several replicas,
    /// tries the next one, as a load balancer would.
    async fn request<T: serde::Serialize>(
        &mut self,
        report: &mut SoakReport,
        method: reqwest::Method,
        path: &str,
        body: &T,
    ) -> Outcome {
        let mut backoff = Duration::from_secs(1);
        let mut replica = self.home;
        loop {
            let url = format!("{}{path}", self.servers[replica]);
            let sent = self
                .http
                .request(method.clone(), url)
                .bearer_auth(&self.token)
                .json(body)
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => return Outcome::Ok(response),
                Ok(response) if response.status() == StatusCode::CONFLICT => {
                    return Outcome::LeaseLost
                }
                Ok(response) if is_transient(response.status()) => {}
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    return Outcome::Failed(format!("{method} {path}: {status} {text}"));
                }
                // Refused, reset or timed out: the replica is down or
                // restarting, which is what this run is about.
                Err(_) => {}
            }
            report.retried += 1;
            if self.servers.len() > 1 {
                replica = (replica + 1) % self.servers.len();
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

fn is_transient(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    )
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
