//! Simulated agents: a build costs nothing and a run's KPI is a function of
//! the leased commit ([`Model`]), so a bisection's path through a range is
//! decided by the test, and the same commit gives the same samples on every
//! server (SQLite, PostgreSQL, before and after a restart).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use kbot_api::agent::{BootBackend, LeasedJob};
use kbot_api::builds::{BuildClaim, ClaimAnswer, Claimant};
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::repo::{Mark, Repo};
use super::Sim;
use crate::builds::{key_of, share_as};
use kbot_testkit::agent::TestAgent;

/// The KPI level of a commit without a planted regression.
pub const GOOD: f64 = 1000.0;
/// Relative run-to-run noise (uniform, ±).
pub const NOISE: f64 = 0.01;
/// How long an agent waits after an empty lease.
const IDLE: Duration = Duration::from_millis(50);
/// The tbox group every simulated agent is in.
pub const GROUP: &str = "sim-group";

/// What the runs of each commit produce.
pub struct Model {
    levels: Mutex<HashMap<String, f64>>,
    failures: Mutex<HashMap<String, &'static str>>,
    /// What a failed run says (the agent's build log tail), by commit.
    details: Mutex<HashMap<String, String>>,
    /// Commits whose first runs spread across both ends: run index -> value.
    noisy: Mutex<HashMap<String, Vec<f64>>>,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

impl Model {
    pub fn new() -> Model {
        Model {
            levels: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            details: Mutex::new(HashMap::new()),
            noisy: Mutex::new(HashMap::new()),
        }
    }

    /// Multiplies the level of `sha` and of every commit containing it by
    /// `factor` (0.8: a 20% regression of a higher-is-better KPI).
    pub fn plant(&self, repo: &Repo, sha: &str, factor: f64) {
        let mut levels = self.levels.lock().expect("lock");
        for c in repo.descendants(sha) {
            *levels.entry(c).or_insert(GOOD) *= factor;
        }
    }

    /// Sets the level of `sha` alone (a commit the server made, which the
    /// test repo does not have).
    pub fn set(&self, sha: &str, level: f64) {
        self.levels
            .lock()
            .expect("lock")
            .insert(sha.to_owned(), level);
    }

    /// [`Model::fail`], saying `detail` (a build log's tail).
    pub fn fail_saying(&self, sha: &str, failure: &'static str, detail: &str) {
        self.fail(sha, failure);
        let mut details = self.details.lock().expect("lock");
        details.insert(sha.to_owned(), detail.to_owned());
    }

    /// What a failed run of `sha` says.
    pub fn detail(&self, sha: &str) -> String {
        let details = self.details.lock().expect("lock");
        details
            .get(sha)
            .cloned()
            .unwrap_or_else(|| "simulated".into())
    }

    /// Every run of `sha` fails with `failure` (`build_failed`, `boot_failed`).
    pub fn fail(&self, sha: &str, failure: &'static str) {
        let mut failures = self.failures.lock().expect("lock");
        failures.insert(sha.to_owned(), failure);
    }

    /// The first runs of `sha` give `values` (run index order), the later
    /// ones its level.
    pub fn noisy(&self, sha: &str, values: Vec<f64>) {
        let mut noisy = self.noisy.lock().expect("lock");
        noisy.insert(sha.to_owned(), values);
    }

    pub fn level(&self, sha: &str) -> f64 {
        let levels = self.levels.lock().expect("lock");
        levels.get(sha).copied().unwrap_or(GOOD)
    }

    /// The KPI of run `run_index` of `sha`, or the failure it reports.
    pub fn outcome(&self, sha: &str, run_index: u32) -> Result<f64, &'static str> {
        if let Some(failure) = self.failures.lock().expect("lock").get(sha) {
            return Err(failure);
        }
        let noisy = self.noisy.lock().expect("lock");
        if let Some(v) = noisy.get(sha).and_then(|v| v.get(run_index as usize)) {
            return Ok(*v);
        }
        // Seeded by the commit and the run, so reruns repeat themselves.
        let seed = u64::from_str_radix(&sha[..16], 16).expect("hex sha") ^ u64::from(run_index);
        let u: f64 = rand::rngs::StdRng::seed_from_u64(seed).gen_range(-1.0..1.0);
        Ok(self.level(sha) * (1.0 + NOISE * u))
    }

    /// What `git bisect` should be told about `sha` under this model.
    pub fn mark(&self, sha: &str) -> Mark {
        match self.outcome(sha, 0) {
            Err(_) => Mark::Skip,
            Ok(_) if self.level(sha) < GOOD * 0.95 => Mark::Bad,
            Ok(_) => Mark::Good,
        }
    }
}

/// One job an agent served.
#[derive(Debug, Clone)]
pub struct Served {
    pub submission_id: i64,
    pub commit: String,
    pub run_index: u32,
    // Part of the record (Debug output of a failing test) though no test reads it.
    #[allow(dead_code)]
    pub failure: Option<&'static str>,
    /// The serving agent's tbox group.
    pub group: &'static str,
}

/// Simulated agents of one tbox group (QEMU backend: they claim to build
/// and boot each commit), played concurrently on the test's task.
pub struct Fleet<'a> {
    sim: &'a Sim<'a>,
    agents: Vec<TestAgent<'a>>,
    /// Each agent's tbox group.
    groups: Vec<&'static str>,
    pub served: RefCell<Vec<Served>>,
    /// Whether the agents get each kernel through the server's shared
    /// builds (claim, then build and share, wait, or download).
    shared_builds: bool,
    /// The commits the agents built (each claim answered `build`).
    pub built: RefCell<Vec<String>>,
}

impl<'a> Fleet<'a> {
    pub async fn enroll(sim: &'a Sim<'a>, n: usize) -> Fleet<'a> {
        Fleet::enroll_groups(sim, &[(GROUP, n)]).await
    }

    /// `n` agents in each `(group, n)`, named `<group>-<i>`.
    pub async fn enroll_groups(sim: &'a Sim<'a>, groups: &[(&'static str, usize)]) -> Fleet<'a> {
        let mut agents = Vec::new();
        let mut agent_groups = Vec::new();
        for &(group, n) in groups {
            for i in 0..n {
                let name = if group == GROUP {
                    format!("sim-{i}")
                } else {
                    format!("{group}-{i}")
                };
                let e = sim.t.enroll_as(&name, group, BootBackend::Qemu).await;
                agents.push(TestAgent {
                    t: &sim.t,
                    token: e.agent_token,
                    id: e.agent_id,
                });
                agent_groups.push(group);
            }
        }
        let mut fleet = Fleet::with(sim, agents);
        fleet.groups = agent_groups;
        fleet
    }

    /// `(id, token)` of each agent, for [`Fleet::rejoin`].
    pub fn credentials(&self) -> Vec<(i64, String)> {
        self.agents
            .iter()
            .map(|a| (a.id, a.token.clone()))
            .collect()
    }

    /// The same agents (their tokens are in the store) on a restarted server.
    pub fn rejoin(sim: &'a Sim<'a>, credentials: &[(i64, String)]) -> Fleet<'a> {
        let agents = credentials
            .iter()
            .map(|(id, token)| TestAgent {
                t: &sim.t,
                token: token.clone(),
                id: *id,
            })
            .collect();
        Fleet::with(sim, agents)
    }

    fn with(sim: &'a Sim<'a>, agents: Vec<TestAgent<'a>>) -> Fleet<'a> {
        Fleet {
            sim,
            groups: vec![GROUP; agents.len()],
            agents,
            served: RefCell::new(Vec::new()),
            shared_builds: false,
            built: RefCell::new(Vec::new()),
        }
    }

    /// The same fleet, getting each kernel through the server's shared
    /// builds.
    pub fn sharing_builds(mut self) -> Fleet<'a> {
        self.shared_builds = true;
        self
    }

    /// The job's kernel through the shared builds: built here (and shared)
    /// when this agent is first, downloaded otherwise.
    async fn kernel(&self, agent: &TestAgent<'_>, job: &LeasedJob) {
        let client = agent.client();
        let claim = BuildClaim {
            job_id: Some(job.job_id),
            order_id: None,
            build_key: key_of(&job.commit),
            commit: job.commit.clone(),
            arch: "x86_64".into(),
        };
        loop {
            match client.claim_build(&claim).await.expect("claim") {
                ClaimAnswer::Build => {
                    share_as(&client, Claimant::Job(job.job_id), &job.commit).await;
                    self.built.borrow_mut().push(job.commit.clone());
                    return;
                }
                ClaimAnswer::Wait { .. } => tokio::time::sleep(IDLE).await,
                ClaimAnswer::Ready { .. } => return,
                ClaimAnswer::Failed { build } => panic!("the sim's kernels build: {build:?}"),
            }
        }
    }

    /// Plays every agent until `until` completes; each finishes the job it
    /// holds, so no lease is left behind. Returns what `until` returned.
    pub async fn run_until<T>(&self, until: impl Future<Output = T>) -> T {
        let stop = Cell::new(false);
        let work = futures::future::join_all(
            self.agents
                .iter()
                .zip(&self.groups)
                .map(|(a, g)| self.work(a, g, &stop)),
        );
        let until = async {
            let out = until.await;
            stop.set(true);
            out
        };
        tokio::join!(until, work).0
    }

    /// One lease with the first agent, served if there was a job.
    pub async fn lease_one(&self) -> Option<LeasedJob> {
        let agent = &self.agents[0];
        let job = agent.lease().await?;
        self.serve(agent, self.groups[0], &job).await;
        Some(job)
    }

    async fn work(&self, agent: &TestAgent<'_>, group: &'static str, stop: &Cell<bool>) {
        while !stop.get() {
            match agent.lease().await {
                Some(job) => self.serve(agent, group, &job).await,
                None => tokio::time::sleep(IDLE).await,
            }
        }
    }

    async fn serve(&self, agent: &TestAgent<'_>, group: &'static str, job: &LeasedJob) {
        if self.shared_builds {
            self.kernel(agent, job).await;
        }
        let outcome = self.sim.world.model.outcome(&job.commit, job.run_index);
        let response = match outcome {
            Ok(value) => agent.upload(job.job_id, value).await,
            Err(failure) => {
                let detail = self.sim.world.model.detail(&job.commit);
                let body = json!({"state": "failed", "failure": failure, "detail": detail});
                agent.event(job.job_id, body).await
            }
        };
        let status = response.status();
        assert!(
            status.is_success(),
            "job {} of {}: {status} {:?}",
            job.job_id,
            job.commit,
            response.text().await
        );
        self.served.borrow_mut().push(Served {
            submission_id: job.submission_id,
            commit: job.commit.clone(),
            run_index: job.run_index,
            failure: outcome.err(),
            group,
        });
    }
}
