//! The load tool behind `kbot-load`: N simulated agents drive a running
//! server through the whole agent protocol (enrol, then lease, heartbeat,
//! a `running` event and a result upload of M metrics, over and over, each
//! through [`AgentClient`]) and the tool reports cycles per second and lease
//! latency percentiles.
//!
//! It seeds queued jobs straight into the server's database (same URL)
//! through the server library, so it needs no other part of the user API.
//! [`soak`] is the long reliability run across replicas, [`history`] fills
//! a store with a watched branch's history, [`pages`] measures dashboard
//! latency, [`seed`] queues submissions, [`builds`] checks that each kernel
//! is built once across tbox groups.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kbot_api::agent::{
    BootBackend, EnrollRequest, EnrollResponse, EventRequest, Hardware, JobState, ResultUpload,
};
use kbot_api::client::AgentClient;

use kbot_server::auth;
use kbot_server::db::Db;
use kbot_server::error::Result;

pub mod builds;
pub mod cli;
pub mod history;
pub mod pages;
pub mod seed;
pub mod soak;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Base URL of the running server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    #[command(flatten)]
    pub db: kbot_server::config::DbArgs,
    /// Simulated agents, each one connection-reusing HTTP client task.
    #[arg(long, default_value_t = 100)]
    pub agents: usize,
    /// Measured time, after enrolment and seeding.
    #[arg(long, default_value_t = 30)]
    pub duration_secs: u64,
    /// Metrics per uploaded result.
    #[arg(long, default_value_t = 200)]
    pub metrics: usize,
    /// Jobs to queue before starting (0: enough for 1,500 cycles/s).
    #[arg(long, default_value_t = 0)]
    pub jobs: u64,
}

/// Per-agent tallies, merged at the end.
#[derive(Debug, Default)]
struct Tally {
    cycles: u64,
    empty_leases: u64,
    errors: u64,
    lease_ms: Vec<f64>,
    upload_ms: Vec<f64>,
    cycle_ms: Vec<f64>,
}

/// The measured outcome.
#[derive(Debug)]
pub struct Report {
    pub agents: usize,
    pub seconds: f64,
    pub cycles: u64,
    pub empty_leases: u64,
    pub errors: u64,
    pub lease_p50_ms: f64,
    pub lease_p99_ms: f64,
    pub lease_max_ms: f64,
    pub upload_p50_ms: f64,
    pub upload_p99_ms: f64,
    pub cycle_p50_ms: f64,
}

impl Report {
    pub fn cycles_per_sec(&self) -> f64 {
        self.cycles as f64 / self.seconds
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "agents:             {}", self.agents)?;
        writeln!(f, "measured:           {:.1} s", self.seconds)?;
        writeln!(
            f,
            "cycles:             {} ({:.0}/s)",
            self.cycles,
            self.cycles_per_sec()
        )?;
        writeln!(f, "empty leases:       {}", self.empty_leases)?;
        writeln!(f, "errors:             {}", self.errors)?;
        writeln!(
            f,
            "lease latency:      p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            self.lease_p50_ms, self.lease_p99_ms, self.lease_max_ms
        )?;
        writeln!(
            f,
            "upload latency:     p50 {:.1} ms, p99 {:.1} ms",
            self.upload_p50_ms, self.upload_p99_ms
        )?;
        write!(f, "whole cycle:        p50 {:.1} ms", self.cycle_p50_ms)
    }
}

/// Seeds, enrols, drives the agents for the measured time, reports.
pub async fn run(args: &LoadArgs) -> Result<Report> {
    let db = Db::connect(&args.db.resolve()).await?;
    kbot_server::server::migrate(&db).await?;
    let wanted = if args.jobs > 0 {
        args.jobs
    } else {
        1_500 * args.duration_secs
    };
    queue_jobs(&db, wanted).await?;
    let http = agents_client(args.agents)?;
    let mut agents = Vec::with_capacity(args.agents);
    for i in 0..args.agents {
        let token = auth::create_enrollment_token(&db, "kbot-load").await?;
        agents.push(enroll(&http, &args.server, &token, i, "load-vm").await?);
    }
    db.close().await;
    eprintln!(
        "enrolled {} agents; measuring {} s",
        agents.len(),
        args.duration_secs
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.duration_secs);
    let drivers = agents.into_iter().map(|agent| {
        let driver = Driver {
            client: AgentClient::with_http(http.clone(), &args.server, Some(agent.agent_token)),
            metrics: args.metrics,
        };
        async move { driver.drive(deadline).await }
    });
    let mut tally = Tally::default();
    for mine in run_all(drivers).await? {
        tally.merge(mine);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(tally.report(args.agents, seconds))
}

/// Queues at least `wanted` jobs and gives the planner its statistics.
async fn queue_jobs(db: &Db, wanted: u64) -> Result<()> {
    let queued = seed_jobs(db, wanted).await?;
    refresh_planner_stats(db).await?;
    eprintln!("queued {queued} jobs");
    Ok(())
}

/// One HTTP client for all simulated agents, a kept-alive connection each.
fn agents_client(agents: usize) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(agents)
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| anyhow::anyhow!("http client: {e}"))?)
}

/// Runs every simulated agent on its own task and returns what each
/// returned, in order.
async fn run_all<T, F>(agents: impl IntoIterator<Item = F>) -> Result<Vec<T>>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = agents.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(
            task.await
                .map_err(|e| anyhow::anyhow!("agent task failed: {e}"))?,
        );
    }
    Ok(out)
}

/// A live PostgreSQL has statistics from autovacuum; a table seeded a moment
/// ago has none, and without them the planner took the claim's 64-job window
/// as a scan of every queued job (35 ms per claim at 30,000 jobs), which
/// measured the missing statistics rather than the server. SQLite's claim
/// fixes its join order instead, so it is left without `sqlite_stat1`.
pub(crate) async fn refresh_planner_stats(db: &Db) -> Result<()> {
    if db.backend() == kbot_server::db::Backend::Postgres {
        sqlx::query("ANALYZE").execute(db.write()).await?;
    }
    Ok(())
}

async fn seed_jobs(db: &Db, wanted: u64) -> Result<u64> {
    // 2 atomic jobs x 2 sides x 200 runs per submission.
    let per_submission = 2 * 2 * 200;
    let mut queued = 0;
    let mut n = 0;
    while queued < wanted {
        seed::submission(
            db,
            "load-linux",
            &format!("load-{}", n % 8),
            seed::LOAD_JOB_FILE,
            200,
            0,
        )
        .await?;
        queued += per_submission;
        n += 1;
    }
    Ok(queued)
}

/// Enrols agent `load-agent-INDEX` in tbox group `group`.
async fn enroll(
    http: &reqwest::Client,
    server: &str,
    token: &str,
    index: usize,
    group: &str,
) -> Result<EnrollResponse> {
    enroll_as(http, server, token, (index, group), BootBackend::Host).await
}

/// [`enroll`] with `backend` (a qemu agent boots the kernels it tests).
async fn enroll_as(
    http: &reqwest::Client,
    server: &str,
    token: &str,
    (index, group): (usize, &str),
    backend: BootBackend,
) -> Result<EnrollResponse> {
    let request = EnrollRequest {
        enrollment_token: token.to_string(),
        name: format!("load-agent-{index}"),
        tbox_group: group.into(),
        backend,
        hardware: Hardware {
            arch: std::env::consts::ARCH.into(),
            cpu_model: "simulated".into(),
            sockets: 1,
            cores: 2,
            threads: 2,
            numa_nodes: 1,
            memory_bytes: 4 << 30,
            page_size: 4096,
            microcode: None,
            kernel: "simulated".into(),
        },
        host: None,
    };
    Ok(AgentClient::with_http(http.clone(), server, None)
        .enroll(&request)
        .await
        .map_err(|e| anyhow::anyhow!("enrol: {e}"))?)
}

struct Driver {
    client: AgentClient,
    metrics: usize,
}

impl Driver {
    async fn drive(&self, deadline: Instant) -> Tally {
        let mut tally = Tally::default();
        while Instant::now() < deadline {
            let cycle = Instant::now();
            match self.cycle(&mut tally).await {
                Ok(true) => {
                    tally.cycles += 1;
                    tally.cycle_ms.push(ms(cycle.elapsed()));
                }
                Ok(false) => tally.empty_leases += 1,
                Err(err) => {
                    tally.errors += 1;
                    if tally.errors <= 3 {
                        eprintln!("agent error: {err:#}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        tally
    }

    /// One lease + heartbeat + event + upload; false when no job came.
    async fn cycle(&self, tally: &mut Tally) -> anyhow::Result<bool> {
        let start = Instant::now();
        let lease = self.client.lease(1).await?;
        tally.lease_ms.push(ms(start.elapsed()));
        let Some(job) = lease.job else {
            return Ok(false);
        };
        let id = job.job_id;
        self.client.heartbeat(id).await?;
        let event = EventRequest {
            state: JobState::Running,
            failure: None,
            detail: "simulated run".into(),
        };
        self.client.event(id, &event).await?;
        let upload = self.result(id);
        let start = Instant::now();
        self.client.upload(id, &upload).await?;
        tally.upload_ms.push(ms(start.elapsed()));
        Ok(true)
    }

    fn result(&self, job_id: i64) -> ResultUpload {
        simulated_result(job_id, self.metrics)
    }
}

/// A run's result as a simulated agent uploads it: `metrics` values that
/// differ per job, a line of raw output.
fn simulated_result(job_id: i64, metrics: usize) -> ResultUpload {
    let metrics: BTreeMap<String, f64> = (0..metrics)
        .map(|i| {
            (
                format!("load.metric{i:03}"),
                (job_id as f64) * 0.5 + i as f64,
            )
        })
        .collect();
    ResultUpload {
        metrics,
        raw_output: format!("simulated output of job {job_id}\n"),
        console: None,
        kconfig: None,
        kernel_release: "simulated".into(),
        tuning: BTreeMap::new(),
        started_at: 0,
        finished_at: 1,
        profile: None,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.cycles += other.cycles;
        self.empty_leases += other.empty_leases;
        self.errors += other.errors;
        self.lease_ms.extend(other.lease_ms);
        self.upload_ms.extend(other.upload_ms);
        self.cycle_ms.extend(other.cycle_ms);
    }

    fn report(&mut self, agents: usize, seconds: f64) -> Report {
        Report {
            agents,
            seconds,
            cycles: self.cycles,
            empty_leases: self.empty_leases,
            errors: self.errors,
            lease_p50_ms: percentile(&mut self.lease_ms, 0.50),
            lease_p99_ms: percentile(&mut self.lease_ms, 0.99),
            lease_max_ms: percentile(&mut self.lease_ms, 1.0),
            upload_p50_ms: percentile(&mut self.upload_ms, 0.50),
            upload_p99_ms: percentile(&mut self.upload_ms, 0.99),
            cycle_p50_ms: percentile(&mut self.cycle_ms, 0.50),
        }
    }
}

/// Nearest-rank percentile; NaN for no samples.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let rank = (p * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.5), 50.0);
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut v, 1.0), 100.0);
        assert!(percentile(&mut [], 0.5).is_nan());
    }
}
