//! `kbot-load builds --builders B`: the lab of dedicated builders and
//! machines that only test (`KBOT_AGENT_ROLES=build` and `=test`). The
//! agents lease only jobs whose kernel is built (asking queues the build
//! orders their jobs need); the builders lease those orders, claim each key
//! as its order, build it through a simulated build (heartbeating the
//! order) and share it, or say it does not build. A test agent's claim is
//! then always answered `Ready` or `Failed`: a `Build` or a `Wait` is a
//! violation (it would have had to build, or to wait for a build).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use kbot_api::agent::{BootBackend, EventRequest, FailureKind, JobState, LeasedJob};
use kbot_api::builds::{kernel_arch, BuildClaim, BuildOrder, ClaimAnswer, Claimant, OrderLease};
use kbot_api::client::AgentClient;

use kbot_server::auth;
use kbot_server::db::Db;
use kbot_server::error::Result;

use super::{build_key, BuildsArgs, Plan, Tally, HEARTBEAT, METRICS};
use crate::ms;

/// How long an agent that found nothing sleeps before asking again.
const IDLE: Duration = Duration::from_millis(200);

/// Empty leases in a row after which a test agent gives up (30 s with
/// nothing to lease, while jobs remain: the run is stuck, and says so).
const GIVE_UP_AFTER: u32 = 150;

type Work = Pin<Box<dyn Future<Output = Tally> + Send>>;

/// Enrols `args.agents` test agents and `args.builders` builders, runs
/// them until every job ended; their tallies.
pub(super) async fn run(db: &Db, args: &BuildsArgs, plan: &Arc<Plan>) -> Result<Vec<Tally>> {
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs")
        .fetch_one(db.read())
        .await?;
    let remaining = Arc::new(AtomicI64::new(total));
    let testers = Arc::new(AtomicI64::new(
        i64::try_from(args.agents).unwrap_or(i64::MAX),
    ));
    let http = crate::agents_client(args.agents + args.builders)?;
    let mut work: Vec<Work> = Vec::new();
    for i in 0..args.agents + args.builders {
        let token = auth::create_enrollment_token(db, "kbot-load builds").await?;
        let builder = i >= args.agents;
        let group = if builder {
            "load-builders".to_owned()
        } else {
            format!("load-g{}", i % args.groups)
        };
        let enrolled =
            crate::enroll_as(&http, &args.server, &token, (i, &group), BootBackend::Qemu).await?;
        let agent = LabAgent {
            client: AgentClient::with_http(http.clone(), &args.server, Some(enrolled.agent_token)),
            plan: Arc::clone(plan),
            remaining: Arc::clone(&remaining),
            testers: Arc::clone(&testers),
        };
        work.push(if builder {
            Box::pin(agent.build_orders())
        } else {
            Box::pin(agent.test())
        });
    }
    eprintln!(
        "enrolled {} test agents in {} groups and {} builders; {total} jobs",
        args.agents, args.groups, args.builders
    );
    crate::run_all(work).await
}

struct LabAgent {
    client: AgentClient,
    plan: Arc<Plan>,
    /// Jobs not ended yet, of the whole run: the test agents stop at 0.
    remaining: Arc<AtomicI64>,
    /// Test agents still at work: the builders stop at 0.
    testers: Arc<AtomicI64>,
}

impl LabAgent {
    fn done(&self) -> bool {
        self.remaining.load(Ordering::Relaxed) <= 0
    }

    /// A machine that only tests: leases (without waiting, so the lease's
    /// cost is what is timed), downloads, uploads.
    async fn test(self) -> Tally {
        let mut tally = Tally::default();
        let mut empty = 0;
        while !self.done() {
            if empty >= GIVE_UP_AFTER {
                tally.error(anyhow!(
                    "nothing to lease for {empty} tries while jobs remain"
                ));
                break;
            }
            let sent = Instant::now();
            let lease = self.client.lease_as(0, false).await;
            tally.lease_ms.push(ms(sent.elapsed()));
            match lease {
                Ok(lease) => match lease.job {
                    Some(job) => {
                        empty = 0;
                        if let Err(err) = self.run_job(&job, &mut tally).await {
                            tally.error(err);
                        }
                        self.remaining.fetch_sub(1, Ordering::Relaxed);
                    }
                    None => {
                        empty += 1;
                        tokio::time::sleep(IDLE).await;
                    }
                },
                Err(err) => {
                    tally.error(anyhow!("lease: {err}"));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        self.testers.fetch_sub(1, Ordering::Relaxed);
        tally
    }

    async fn run_job(&self, job: &LeasedJob, tally: &mut Tally) -> anyhow::Result<()> {
        tally.jobs += 1;
        let key = build_key(&job.commit);
        tally.keys.insert(key.clone());
        let claim = BuildClaim {
            job_id: Some(job.job_id),
            order_id: None,
            build_key: key.clone(),
            commit: job.commit.clone(),
            arch: std::env::consts::ARCH.into(),
        };
        let sent = Instant::now();
        let answer = self.client.claim_build(&claim).await?;
        tally.claim_ms.push(ms(sent.elapsed()));
        let failure = match answer {
            ClaimAnswer::Ready { build } => {
                super::download(&self.client, &self.plan, (&job.commit, &build), tally).await?;
                None
            }
            ClaimAnswer::Failed { build } => {
                tally.failed_answers += 1;
                Some((FailureKind::BuildFailed, build.log_tail.unwrap_or_default()))
            }
            ClaimAnswer::Build | ClaimAnswer::Wait { .. } => {
                tally.violations += 1;
                let why = format!("no build of {key} is ready for a machine that only tests");
                Some((FailureKind::Infrastructure, why))
            }
        };
        match failure {
            None => {
                let result = crate::simulated_result(job.job_id, METRICS);
                self.client.upload(job.job_id, &result).await?;
            }
            Some((kind, detail)) => {
                let event = EventRequest {
                    state: JobState::Failed,
                    failure: Some(kind),
                    detail,
                };
                self.client.event(job.job_id, &event).await?;
            }
        }
        Ok(())
    }

    /// A dedicated builder: leases orders (planning ahead) until every job
    /// ended.
    async fn build_orders(self) -> Tally {
        let mut tally = Tally::default();
        let req = OrderLease {
            arch: kernel_arch(std::env::consts::ARCH).to_owned(),
            wait_secs: 1,
            plan: true,
        };
        while self.testers.load(Ordering::Relaxed) > 0 {
            match self.client.lease_order(&req).await {
                Ok(resp) => {
                    if let Some(order) = resp.order {
                        tally.order_leases += 1;
                        if let Err(err) = self.build(&order, &mut tally).await {
                            tally.error(err);
                        }
                    }
                }
                Err(err) => {
                    tally.error(anyhow!("order lease: {err}"));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        tally
    }

    /// Claims the order's key as the order; builds and shares it, or says
    /// it does not build.
    async fn build(&self, order: &BuildOrder, tally: &mut Tally) -> anyhow::Result<()> {
        let key = build_key(&order.commit);
        let by = Claimant::Order(order.order_id);
        let claim = BuildClaim {
            job_id: None,
            order_id: Some(order.order_id),
            build_key: key.clone(),
            commit: order.commit.clone(),
            arch: order.arch.clone(),
        };
        if self.client.claim_build(&claim).await? != ClaimAnswer::Build {
            return Ok(());
        }
        tally.build_answers += 1;
        let until = Instant::now() + self.plan.build;
        while Instant::now() < until {
            tokio::time::sleep(HEARTBEAT.min(until - Instant::now())).await;
            self.client.order_heartbeat(order.order_id).await?;
            tally.heartbeats += 1;
        }
        super::end_build(&self.client, &self.plan, (&key, by, &order.commit), tally).await?;
        Ok(())
    }
}
