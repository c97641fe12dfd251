//! `kbot-load builds`: "build once" at lab scale. N simulated agents in G
//! tbox groups run the jobs of C commits (C/2 base/head pairs, each pair
//! submitted once per group), and get each job's kernel through the shared
//! builds of `kbot_api::builds`: the first job of a build key builds it
//! (heartbeating through a simulated build, then uploading an image and a
//! config, or saying the commit does not build); the others wait and
//! download it, checking its SHA-256, or fail at once with the builder's
//! log.
//!
//! With `--builders B` the run is a lab instead (`lab.rs`): B dedicated
//! builders take build orders and the agents only test.
//!
//! The run holds when every build key was built once (the agents' `Build`
//! answers, the `builds` rows and the claims they count all equal the keys
//! asked for), no claim sent after a key's build had failed was told to
//! wait for it, every job ended, and no call failed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use kbot_api::agent::{EventRequest, FailureKind, JobState, LeasedJob};
use kbot_api::builds::{BuildClaim, BuildFailed, BuildReady, BuildView, ClaimAnswer, Claimant};
use kbot_api::client::AgentClient;
use sha2::{Digest, Sha256};
use sqlx::Row;

use kbot_server::auth;
use kbot_server::db::Db;
use kbot_server::error::Result;
use kbot_server::jobs::ACTIVE_STATES_SQL;

use crate::{ms, percentile, seed};

mod lab;
mod report;

pub use report::{BuildCounts, BuildsReport};

/// The repository the commits are seeded in.
const REPO: &str = "load-builds";

/// One atomic job: one job per commit and submission.
const JOB_FILE: &str = "testcase: bw_pipe\nbw_pipe:\n  size: 64k\n";

/// Empty leases in a row after which an agent stops: nothing is queued
/// for its group any more (every job is queued from the start).
const EMPTY_LEASES_TO_STOP: u32 = 3;

/// Heartbeats during a simulated build. A real agent beats every
/// `heartbeat_interval_secs`; these builds last seconds, and beating once a
/// second puts heartbeats beside the claims, as a lab of long builds does.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Metrics per uploaded result.
const METRICS: usize = 20;

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct BuildsArgs {
    /// Base URL of the running server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    #[command(flatten)]
    pub db: kbot_server::config::DbArgs,
    /// Simulated agents; agent i enrols in tbox group `load-g{i mod groups}`.
    #[arg(long, default_value_t = 20)]
    pub agents: usize,
    /// Tbox groups; each commit pair is submitted once per group.
    #[arg(long, default_value_t = 4)]
    pub groups: usize,
    /// Distinct commits, seeded as commits/2 base/head pairs.
    #[arg(long, default_value_t = 50)]
    pub commits: usize,
    /// Simulated build time, heartbeating through it.
    #[arg(long, default_value_t = 2000)]
    pub build_ms: u64,
    /// Commit i does not build when i mod this is 0 (0: every commit builds).
    #[arg(long, default_value_t = 10)]
    pub fail_every: usize,
    /// Size of the simulated bzImage.
    #[arg(long, default_value_t = 1024)]
    pub image_kib: usize,
    /// Dedicated builders (`KBOT_AGENT_ROLES=build`); with any, the agents
    /// only test (`=test`) and get only jobs whose kernel is built.
    #[arg(long, default_value_t = 0)]
    pub builders: usize,
}

impl BuildsArgs {
    /// The commits seeded: `commits` rounded down to whole pairs.
    pub fn seeded_commits(&self) -> usize {
        self.commits / 2 * 2
    }
}

/// Seeds the commits on a fresh store, enrols the agents, runs them until
/// the queue is drained, counts.
pub async fn run(args: &BuildsArgs) -> Result<BuildsReport> {
    if args.commits < 2 || args.groups == 0 || args.agents == 0 {
        return Err(anyhow!("builds needs 2 commits or more, a group and an agent").into());
    }
    let db = Db::connect(&args.db.resolve()).await?;
    kbot_server::server::migrate(&db).await?;
    ensure_fresh(&db).await?;
    let plan = Arc::new(seed_commits(&db, args).await?);
    super::refresh_planner_stats(&db).await?;
    let started = Instant::now();
    let tallies = if args.builders > 0 {
        lab::run(&db, args, &plan).await?
    } else {
        let agents = enroll_agents(&db, args, &plan).await?;
        eprintln!(
            "enrolled {} agents in {} groups; {} commits seeded",
            agents.len(),
            args.groups,
            args.seeded_commits()
        );
        super::run_all(agents.into_iter().map(Agent::work)).await?
    };
    let mut tally = Tally::default();
    for mine in tallies {
        tally.merge(mine);
    }
    let seconds = started.elapsed().as_secs_f64();
    let counts = count(&db).await?;
    db.close().await;
    let mut report = tally.report(counts);
    report.agents = args.agents;
    report.builders = args.builders;
    report.groups = args.groups;
    report.commits = args.seeded_commits();
    report.failing_commits = plan.failing.len();
    report.seconds = seconds;
    Ok(report)
}

/// The counts only mean something on a store without earlier jobs or builds.
async fn ensure_fresh(db: &Db) -> Result<()> {
    let row = sqlx::query(
        "SELECT (SELECT COUNT(*) FROM jobs) AS jobs, (SELECT COUNT(*) FROM builds) AS builds",
    )
    .fetch_one(db.read())
    .await?;
    let (jobs, builds): (i64, i64) = (row.try_get("jobs")?, row.try_get("builds")?);
    if jobs > 0 || builds > 0 {
        return Err(anyhow!(
            "builds needs a fresh store: this one has {jobs} jobs and {builds} builds"
        )
        .into());
    }
    Ok(())
}

/// Commit `i` of the run.
fn commit_sha(i: usize) -> String {
    format!("{:040x}", 0xb1d5_0000_0000_u64 + i as u64)
}

/// Queues one submission per pair and group; returns the run's plan.
async fn seed_commits(db: &Db, args: &BuildsArgs) -> Result<Plan> {
    for pair in 0..args.commits / 2 {
        let (base, head) = (commit_sha(2 * pair), commit_sha(2 * pair + 1));
        for group in 0..args.groups {
            let user = format!("load-builds-{group}");
            let seeded =
                seed::submission_at(db, REPO, &user, JOB_FILE, 1, 0, (&base, &head)).await?;
            // One job per commit and submission: what is counted is builds,
            // not the adaptive runs an undecided pair would add.
            seed::cap_runs(db, seeded.submission_id, 1).await?;
        }
    }
    let failing = (0..args.seeded_commits())
        .filter(|i| args.fail_every > 0 && i % args.fail_every == 0)
        .map(commit_sha)
        .collect();
    Ok(Plan {
        failing,
        build: Duration::from_millis(args.build_ms),
        image_bytes: args.image_kib * 1024,
        ended: Mutex::default(),
    })
}

async fn enroll_agents(db: &Db, args: &BuildsArgs, plan: &Arc<Plan>) -> Result<Vec<Agent>> {
    let http = super::agents_client(args.agents)?;
    let mut agents = Vec::with_capacity(args.agents);
    for i in 0..args.agents {
        let token = auth::create_enrollment_token(db, "kbot-load builds").await?;
        let group = format!("load-g{}", i % args.groups);
        let enrolled = super::enroll(&http, &args.server, &token, i, &group).await?;
        agents.push(Agent {
            client: AgentClient::with_http(http.clone(), &args.server, Some(enrolled.agent_token)),
            plan: Arc::clone(plan),
        });
    }
    Ok(agents)
}

async fn count(db: &Db) -> Result<BuildCounts> {
    let row = sqlx::query(&format!(
        "SELECT (SELECT COUNT(*) FROM builds) AS builds, \
                (SELECT CAST(COALESCE(SUM(claims), 0) AS BIGINT) FROM builds) AS claims, \
                (SELECT COUNT(*) FROM builds WHERE state = 'ready') AS ready, \
                (SELECT COUNT(*) FROM builds WHERE state = 'failed') AS failed, \
                (SELECT COUNT(DISTINCT commit_id) FROM jobs \
                 WHERE state IN ('finished', 'failed')) AS commits_ended, \
                (SELECT COUNT(*) FROM jobs WHERE state = 'finished') AS finished, \
                (SELECT COUNT(*) FROM jobs \
                 WHERE state = 'failed' AND failure = 'build_failed') AS build_failed, \
                (SELECT COUNT(*) FROM jobs WHERE state = 'queued') AS queued, \
                (SELECT COUNT(*) FROM jobs WHERE state IN {ACTIVE_STATES_SQL}) AS active, \
                (SELECT COUNT(*) FROM build_orders) AS orders, \
                (SELECT CAST(COALESCE(SUM(leases), 0) AS BIGINT) FROM build_orders) \
                 AS order_leases"
    ))
    .fetch_one(db.read())
    .await?;
    Ok(BuildCounts {
        builds: row.try_get("builds")?,
        claims: row.try_get("claims")?,
        ready: row.try_get("ready")?,
        failed: row.try_get("failed")?,
        commits_ended: row.try_get("commits_ended")?,
        finished_jobs: row.try_get("finished")?,
        build_failed_jobs: row.try_get("build_failed")?,
        queued_jobs: row.try_get("queued")?,
        active_jobs: row.try_get("active")?,
        orders: row.try_get("orders")?,
        order_leases: row.try_get("order_leases")?,
    })
}

/// The build key an agent makes for `commit` (all agents here share one
/// kconfig, compiler and arch).
fn build_key(commit: &str) -> String {
    hex::encode(&Sha256::digest(format!("{commit}\0simulated").as_bytes())[..12])
}

/// What every agent of the run shares.
struct Plan {
    /// Commits that do not build.
    failing: HashSet<String>,
    build: Duration,
    image_bytes: usize,
    /// When each key's build ended, as its builder got the server's answer.
    ended: Mutex<HashMap<String, End>>,
}

#[derive(Debug, Clone, Copy)]
struct End {
    at: Instant,
    failed: bool,
}

impl Plan {
    fn end(&self, key: &str, failed: bool) {
        let end = End {
            at: Instant::now(),
            failed,
        };
        self.lock().insert(key.to_owned(), end);
    }

    fn ended(&self, key: &str) -> Option<End> {
        self.lock().get(key).copied()
    }

    /// A poisoned map only means another agent panicked mid-insert; its
    /// entries are still instants.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, End>> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The simulated bzImage of `commit`: its own bytes, the same for every
    /// builder.
    fn image(&self, commit: &str) -> Vec<u8> {
        commit
            .bytes()
            .cycle()
            .take(self.image_bytes)
            .collect::<Vec<u8>>()
    }
}

/// How a job's kernel turned out.
enum Kernel {
    Booted,
    DoesNotBuild(String),
}

struct Agent {
    client: AgentClient,
    plan: Arc<Plan>,
}

impl Agent {
    /// Leases and runs jobs until the queue has none for its group.
    async fn work(self) -> Tally {
        let mut tally = Tally::default();
        let mut empty = 0;
        while empty < EMPTY_LEASES_TO_STOP {
            match self.client.lease(1).await {
                Ok(lease) => match lease.job {
                    Some(job) => {
                        empty = 0;
                        if let Err(err) = self.run_job(&job, &mut tally).await {
                            tally.error(err);
                        }
                    }
                    None => empty += 1,
                },
                Err(err) => {
                    tally.error(anyhow!("lease: {err}"));
                    empty += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        tally
    }

    /// The kernel, then the result or the build failure.
    async fn run_job(&self, job: &LeasedJob, tally: &mut Tally) -> anyhow::Result<()> {
        tally.jobs += 1;
        match self.kernel(job, tally).await? {
            Kernel::Booted => {
                let result = super::simulated_result(job.job_id, METRICS);
                self.client.upload(job.job_id, &result).await?;
            }
            Kernel::DoesNotBuild(log_tail) => {
                let event = EventRequest {
                    state: JobState::Failed,
                    failure: Some(FailureKind::BuildFailed),
                    detail: log_tail,
                };
                self.client.event(job.job_id, &event).await?;
            }
        }
        Ok(())
    }

    /// The claim loop: build it, wait as told, download it, or fail.
    async fn kernel(&self, job: &LeasedJob, tally: &mut Tally) -> anyhow::Result<Kernel> {
        let claim = BuildClaim {
            job_id: Some(job.job_id),
            order_id: None,
            build_key: build_key(&job.commit),
            commit: job.commit.clone(),
            arch: std::env::consts::ARCH.into(),
        };
        let key = claim.build_key.as_str();
        tally.keys.insert(claim.build_key.clone());
        let mut waited = false;
        loop {
            let sent = Instant::now();
            let answer = self.client.claim_build(&claim).await?;
            tally.claim_ms.push(ms(sent.elapsed()));
            match answer {
                ClaimAnswer::Build => {
                    tally.build_answers += 1;
                    return self.build(job, key, tally).await;
                }
                ClaimAnswer::Wait {
                    retry_after_secs, ..
                } => {
                    self.wait(job.job_id, (key, sent), retry_after_secs, tally)
                        .await?;
                    waited = true;
                }
                ClaimAnswer::Ready { build } => {
                    self.lagged(key, waited, tally);
                    download(&self.client, &self.plan, (&job.commit, &build), tally).await?;
                    return Ok(Kernel::Booted);
                }
                ClaimAnswer::Failed { build } => {
                    self.lagged(key, waited, tally);
                    tally.failed_answers += 1;
                    return Ok(Kernel::DoesNotBuild(build.log_tail.unwrap_or_default()));
                }
            }
        }
    }

    /// A `Wait` to a claim `sent` for `key`: a violation if the key's build
    /// had failed before the claim left; sleeps as told, heartbeats.
    async fn wait(
        &self,
        job_id: i64,
        (key, sent): (&str, Instant),
        retry_after_secs: u32,
        tally: &mut Tally,
    ) -> anyhow::Result<()> {
        tally.wait_answers += 1;
        tally.retry_hints.insert(retry_after_secs);
        if self
            .plan
            .ended(key)
            .is_some_and(|end| end.failed && end.at < sent)
        {
            tally.violations += 1;
        }
        let pause = Duration::from_secs(u64::from(retry_after_secs.max(1)));
        tokio::time::sleep(pause).await;
        tally.waited += pause;
        self.heartbeat(job_id, tally).await
    }

    /// How long after its build's end a job that `waited` heard of it.
    fn lagged(&self, key: &str, waited: bool, tally: &mut Tally) {
        if let Some(end) = self.plan.ended(key).filter(|_| waited) {
            tally.lag_ms.push(ms(end.at.elapsed()));
        }
    }

    /// This job builds: the simulated build, then its files and `ready`, or
    /// `failed`.
    async fn build(&self, job: &LeasedJob, key: &str, tally: &mut Tally) -> anyhow::Result<Kernel> {
        self.heartbeat_through(job.job_id, self.plan.build, tally)
            .await?;
        let by = Claimant::Job(job.job_id);
        Ok(
            match end_build(&self.client, &self.plan, (key, by, &job.commit), tally).await? {
                Some(log_tail) => Kernel::DoesNotBuild(log_tail),
                None => Kernel::Booted,
            },
        )
    }

    /// Sleeps `span`, heartbeating every [`HEARTBEAT`] and at its end.
    async fn heartbeat_through(
        &self,
        job_id: i64,
        span: Duration,
        tally: &mut Tally,
    ) -> anyhow::Result<()> {
        let until = Instant::now() + span;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            tokio::time::sleep(left.min(HEARTBEAT)).await;
            self.heartbeat(job_id, tally).await?;
        }
    }

    async fn heartbeat(&self, job_id: i64, tally: &mut Tally) -> anyhow::Result<()> {
        let beat = self.client.heartbeat(job_id).await?;
        tally.heartbeats += 1;
        if beat.cancelled {
            bail!("job {job_id} was cancelled");
        }
        Ok(())
    }
}

/// The end of `commit`'s simulated build of `key`, claimed `by` a job or an
/// order: `failed` for a commit that does not build (its log tail
/// returned), else its image and config uploaded and `ready`.
async fn end_build(
    client: &AgentClient,
    plan: &Plan,
    (key, by, commit): (&str, Claimant, &str),
    tally: &mut Tally,
) -> anyhow::Result<Option<String>> {
    let (job_id, order_id) = by.ids();
    if plan.failing.contains(commit) {
        let log_tail = format!("fs/pipe.c:1: error: expected ';' (simulated, {key})");
        let failed = BuildFailed {
            job_id,
            order_id,
            log_tail: log_tail.clone(),
        };
        client.build_failed(key, &failed).await?;
        plan.end(key, true);
        tally.builds_failed += 1;
        return Ok(Some(log_tail));
    }
    let mut files = Vec::new();
    for (name, content) in [
        ("bzImage", plan.image(commit)),
        ("config", b"CONFIG_PIPE=y\n".to_vec()),
    ] {
        files.push(client.upload_build_file(key, name, by, content).await?);
    }
    let ready = BuildReady {
        job_id,
        order_id,
        release: "6.1.0-kbot-load".into(),
        build_id: None,
        build_secs: plan.build.as_secs_f64(),
        files,
    };
    client.build_ready(key, &ready).await?;
    plan.end(key, false);
    Ok(None)
}

/// Downloads `commit`'s image of `build` and checks it against the listed
/// digest, the one the server sent, and the builder's bytes.
async fn download(
    client: &AgentClient,
    plan: &Plan,
    (commit, build): (&str, &BuildView),
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let key = build.build_key.as_str();
    let listed = build
        .files
        .iter()
        .find(|f| f.name == "bzImage")
        .ok_or_else(|| anyhow!("build {key} lists no bzImage"))?;
    let (bytes, sent) = client.build_file(key, "bzImage").await?;
    tally.downloads += 1;
    tally.downloaded_bytes += bytes.len() as u64;
    let got = hex::encode(Sha256::digest(&bytes));
    let expected = hex::encode(Sha256::digest(plan.image(commit)));
    if got != listed.sha256 || sent.as_deref() != Some(got.as_str()) || got != expected {
        bail!(
            "build {key}: image SHA-256 {got}, listed {}, sent {sent:?}, built {expected}",
            listed.sha256
        );
    }
    tally.sha_checks += 1;
    Ok(())
}

/// One agent's counts, merged at the end.
#[derive(Debug, Default)]
struct Tally {
    jobs: u64,
    heartbeats: u64,
    build_answers: u64,
    builds_failed: u64,
    downloads: u64,
    downloaded_bytes: u64,
    sha_checks: u64,
    wait_answers: u64,
    waited: Duration,
    retry_hints: BTreeSet<u32>,
    failed_answers: u64,
    violations: u64,
    errors: u64,
    keys: HashSet<String>,
    claim_ms: Vec<f64>,
    lag_ms: Vec<f64>,
    /// Leases of agents that only test (the plan of build orders included).
    lease_ms: Vec<f64>,
    /// Build orders the builders leased.
    order_leases: u64,
}

impl Tally {
    fn error(&mut self, err: anyhow::Error) {
        self.errors += 1;
        if self.errors <= 5 {
            eprintln!("agent error: {err:#}");
        }
    }

    fn merge(&mut self, other: Tally) {
        self.jobs += other.jobs;
        self.heartbeats += other.heartbeats;
        self.build_answers += other.build_answers;
        self.builds_failed += other.builds_failed;
        self.downloads += other.downloads;
        self.downloaded_bytes += other.downloaded_bytes;
        self.sha_checks += other.sha_checks;
        self.wait_answers += other.wait_answers;
        self.waited += other.waited;
        self.retry_hints.extend(other.retry_hints);
        self.failed_answers += other.failed_answers;
        self.violations += other.violations;
        self.errors += other.errors;
        self.keys.extend(other.keys);
        self.claim_ms.extend(other.claim_ms);
        self.lag_ms.extend(other.lag_ms);
        self.lease_ms.extend(other.lease_ms);
        self.order_leases += other.order_leases;
    }

    /// The agents' side of the report, beside the store's `db`.
    fn report(mut self, db: BuildCounts) -> BuildsReport {
        BuildsReport {
            jobs: self.jobs,
            heartbeats: self.heartbeats,
            build_answers: self.build_answers,
            builds_failed: self.builds_failed,
            downloads: self.downloads,
            downloaded_bytes: self.downloaded_bytes,
            sha_checks: self.sha_checks,
            wait_answers: self.wait_answers,
            wait_secs: self.waited.as_secs_f64(),
            failed_answers: self.failed_answers,
            violations: self.violations,
            errors: self.errors,
            keys_asked: self.keys.len(),
            claim_p50_ms: percentile(&mut self.claim_ms, 0.50),
            claim_p99_ms: percentile(&mut self.claim_ms, 0.99),
            lag_p50_ms: percentile(&mut self.lag_ms, 0.50),
            lag_max_ms: percentile(&mut self.lag_ms, 1.0),
            lease_p50_ms: percentile(&mut self.lease_ms, 0.50),
            lease_p99_ms: percentile(&mut self.lease_ms, 0.99),
            order_leases: self.order_leases,
            retry_hints: self.retry_hints,
            db,
            ..BuildsReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{build_key, commit_sha};

    #[test]
    fn build_keys_are_24_lowercase_hex_digits_per_commit() {
        let (a, b) = (build_key(&commit_sha(0)), build_key(&commit_sha(1)));
        assert_eq!(a.len(), 24);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_ne!(a, b);
        assert_eq!(commit_sha(1).len(), 40);
    }
}
