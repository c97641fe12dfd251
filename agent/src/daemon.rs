//! The daemon: enrol once, then lease, run with heartbeats and state events,
//! spool and upload; a background task drains the spool with backoff. An
//! agent with the build role leases build orders first (a dedicated
//! builder only those), one with only the test role only jobs whose kernel
//! is built.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Notify};

use kbot_api::agent::{
    BootBackend, EnrollRequest, EventRequest, FailureKind, Hardware, JobState, LeasedJob,
};
use kbot_api::builds::{BuildOrder, OrderLease};

use crate::build_cache::{read_json, write_json};
use crate::client::{ApiClient, Identity};
use crate::error::{AgentError, Result};
use crate::job_runner::JobRunner;
use crate::outcome::{Failure, Outcome};
use crate::process::Cancel;
use crate::roles::Roles;
use crate::shared_build::{OrderDone, SharedBuilds};
use crate::spool::{backoff, Pending, Spool};

pub struct Daemon {
    pub client: ApiClient,
    pub runner: Arc<JobRunner>,
    pub spool: Arc<Spool>,
    pub lease_wait_secs: u32,
    pub roles: Roles,
    /// Cleared when the server has no build orders (an older one).
    pub orders: AtomicBool,
}

/// What one turn of the daemon's loop did.
enum Turn {
    Worked,
    Idle,
}

/// Everything enrolment needs.
pub struct Enrolment {
    pub identity_file: PathBuf,
    pub server: String,
    pub token: Option<String>,
    pub name: String,
    pub tbox_group: String,
    pub backend: BootBackend,
    pub hardware: Hardware,
    /// The host, when the machine under test is a guest.
    pub host: Option<Hardware>,
}

/// The persisted identity, or a new one from the server (once).
pub async fn enrol(e: &Enrolment) -> Result<Identity> {
    if let Some(id) = read_json::<Identity>(&e.identity_file)? {
        // The server labels every result with the backend the agent enrolled
        // with (a host-backend pair is an A/A test, a qemu one tests the
        // commits): an identity must not carry results of another backend.
        // Enrolling again under the same name would relabel the old results,
        // so a changed backend needs a new name and work directory.
        if let Some(old) = id.backend.filter(|b| *b != e.backend) {
            return Err(AgentError::Config(format!(
                "the agent in {} enrolled with the {} backend, not {}: the server \
                 labels every result with its agent's backend; give this backend its own \
                 agent name and work dir (KBOT_AGENT_NAME, KBOT_WORK_DIR)",
                e.identity_file.display(),
                backend_name(old),
                backend_name(e.backend)
            )));
        }
        if id.server == e.server {
            return Ok(id);
        }
        tracing::warn!(old = %id.server, new = %e.server, "server changed; enrolling again");
    }
    let token = e.token.clone().ok_or_else(|| {
        AgentError::Config(
            "not enrolled yet: give --enrollment-token (KBOT_ENROLLMENT_TOKEN)".into(),
        )
    })?;
    let client = ApiClient::new(&e.server, None)?;
    let req = EnrollRequest {
        enrollment_token: token,
        name: e.name.clone(),
        tbox_group: e.tbox_group.clone(),
        backend: e.backend,
        hardware: e.hardware.clone(),
        host: e.host.clone(),
    };
    let mut attempt = 0;
    let resp = loop {
        match client.enroll(&req).await {
            Ok(r) => break r,
            Err(err) if err.is_retryable() => {
                let wait = backoff(attempt, Duration::from_secs(1), Duration::from_secs(60));
                tracing::warn!(error = %err, ?wait, "enrolment failed; retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    };
    let id = Identity {
        server: e.server.clone(),
        agent_id: resp.agent_id,
        agent_token: resp.agent_token,
        backend: Some(e.backend),
    };
    write_json(&e.identity_file, &id)?;
    tracing::info!(agent_id = id.agent_id, "enrolled");
    Ok(id)
}

fn backend_name(b: BootBackend) -> &'static str {
    match b {
        BootBackend::Qemu => "qemu",
        BootBackend::Kexec => "kexec",
        BootBackend::Host => "host",
    }
}

impl Daemon {
    /// A daemon with `roles`.
    pub fn new(
        client: ApiClient,
        runner: Arc<JobRunner>,
        spool: Arc<Spool>,
        lease_wait_secs: u32,
        roles: Roles,
    ) -> Daemon {
        Daemon {
            client,
            runner,
            spool,
            lease_wait_secs,
            roles,
            orders: AtomicBool::new(true),
        }
    }

    /// Runs until the process is stopped; `max_jobs` (jobs and build
    /// orders) bounds it for tests.
    pub async fn run(&self, max_jobs: Option<usize>) -> Result<()> {
        let wake = Arc::new(Notify::new());
        let uploader = tokio::spawn(drain_forever(
            self.spool.clone(),
            self.client.clone(),
            wake.clone(),
        ));
        self.resume_kexec(&wake).await?;
        let mut done = 0usize;
        let mut attempt = 0;
        while max_jobs.is_none_or(|m| done < m) {
            match self.turn(&wake).await {
                Ok(turn) => {
                    attempt = 0;
                    if let Turn::Worked = turn {
                        done += 1;
                    }
                }
                Err(e) if e.is_retryable() => {
                    let wait = backoff(attempt, Duration::from_secs(1), Duration::from_secs(120));
                    tracing::warn!(error = %e, ?wait, "lease failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
        // Give the uploader a last chance before returning (tests, shutdown).
        wake.notify_one();
        for _ in 0..600 {
            if self.spool.pending()?.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        uploader.abort();
        Ok(())
    }

    /// Leases and runs one build order or job, as the roles say: orders
    /// first (without waiting when the agent also tests), then jobs.
    async fn turn(&self, wake: &Notify) -> Result<Turn> {
        if self.roles.build && self.orders.load(Ordering::Relaxed) {
            let req = OrderLease {
                arch: self.runner.builder.arch().to_string(),
                wait_secs: if self.roles.test {
                    0
                } else {
                    self.lease_wait_secs
                },
                plan: !self.roles.test,
            };
            match self.client.lease_order(&req).await {
                Ok(resp) => {
                    if let Some(order) = resp.order {
                        self.run_order(order).await?;
                        return Ok(Turn::Worked);
                    }
                }
                Err(AgentError::Api(e)) if e.status() == Some(404) && self.roles.test => {
                    tracing::warn!("the server has no build orders; leasing jobs only");
                    self.orders.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        if !self.roles.test {
            return Ok(Turn::Idle);
        }
        let resp = self
            .client
            .lease(self.lease_wait_secs, self.roles.build)
            .await?;
        match resp.job {
            Some(job) => {
                self.run_job(job, wake).await?;
                Ok(Turn::Worked)
            }
            None => Ok(Turn::Idle),
        }
    }

    /// Builds (or finds) one ordered kernel and shares it, keeping the
    /// order's lease with heartbeats.
    async fn run_order(&self, order: BuildOrder) -> Result<()> {
        let id = order.order_id;
        tracing::info!(order = id, commit = %order.commit, kconfig = %order.kconfig.name,
            leases = order.leases, "build order leased");
        let cancel = Cancel::new();
        let beats = tokio::spawn(order_heartbeat(
            self.client.clone(),
            id,
            order.heartbeat_interval_secs,
            cancel.clone(),
        ));
        let runner = self.runner.clone();
        let shared = SharedBuilds::new(
            self.client.inner().clone(),
            tokio::runtime::Handle::current(),
            true,
        );
        let c = cancel.clone();
        let done = tokio::task::spawn_blocking(move || shared.order(&runner.builder, &order, &c))
            .await
            .map_err(|e| AgentError::Config(format!("build order task: {e}")))?;
        beats.abort();
        match done {
            Ok(OrderDone::NotHere(why)) => {
                tracing::warn!(order = id, %why, "build order not built here; it goes back with its lease");
            }
            Ok(d) => tracing::info!(order = id, done = ?d, "build order done"),
            Err(AgentError::Cancelled) => tracing::warn!(order = id, "build order lost"),
            // The agent's own trouble: the order's lease runs out and
            // another builder takes it.
            Err(e) => tracing::warn!(order = id, error = %e, "build order not done"),
        }
        Ok(())
    }

    async fn resume_kexec(&self, wake: &Notify) -> Result<()> {
        let runner = self.runner.clone();
        let resumed =
            tokio::task::spawn_blocking(move || runner.resume_after_kexec(&Cancel::new()))
                .await
                .map_err(|e| AgentError::Config(format!("kexec resume task: {e}")))??;
        if let Some((job, outcome)) = resumed {
            if let Some(p) = Pending::of(job.job_id, outcome) {
                self.spool_outcome(job.job_id, &p)?;
            }
            self.runner.finish_kexec()?;
            wake.notify_one();
        }
        Ok(())
    }

    /// Runs one leased job with heartbeats and events, and spools its outcome.
    async fn run_job(&self, job: LeasedJob, wake: &Notify) -> Result<()> {
        let job_id = job.job_id;
        tracing::info!(job = job_id, commit = %job.commit, run = job.run_index, "leased");
        let cancel = Cancel::new();
        let (tx, rx) = mpsc::unbounded_channel::<EventRequest>();
        let events = tokio::spawn(forward_events(self.client.clone(), job_id, rx));
        let beats = tokio::spawn(heartbeat(
            self.client.clone(),
            job_id,
            job.heartbeat_interval_secs,
            cancel.clone(),
        ));
        let runner = self.runner.clone();
        let c = cancel.clone();
        let etx = tx.clone();
        let shared = SharedBuilds::new(
            self.client.inner().clone(),
            tokio::runtime::Handle::current(),
            self.roles.build,
        );
        let result = tokio::task::spawn_blocking(move || {
            let on_state = move |state: JobState, detail: &str| {
                let _ = etx.send(EventRequest {
                    state,
                    failure: None,
                    detail: detail.to_string(),
                });
            };
            runner.run(&job, &c, &on_state, Some(&shared))
        })
        .await
        .map_err(|e| AgentError::Config(format!("job task: {e}")))?;
        let outcome = match result {
            Ok(o) => o,
            Err(AgentError::Cancelled) => {
                tracing::info!(job = job_id, "cancelled by the server");
                beats.abort();
                drop(tx);
                let _ = events.await;
                return Ok(());
            }
            Err(e) => Outcome::Failed(Failure::new(FailureKind::Infrastructure, e.to_string())),
        };
        if matches!(outcome, Outcome::Rebooting) {
            tracing::info!(job = job_id, "leaving for the built kernel");
            std::future::pending::<()>().await;
        }
        if matches!(outcome, Outcome::Success(_)) {
            let _ = tx.send(EventRequest {
                state: JobState::Uploading,
                failure: None,
                detail: String::new(),
            });
        }
        drop(tx);
        let _ = events.await;
        beats.abort();
        if let Some(p) = Pending::of(job_id, outcome) {
            self.spool_outcome(job_id, &p)?;
        }
        wake.notify_one();
        Ok(())
    }

    /// Spools a job's outcome, making room in the build cache if the disk is
    /// full; an outcome that cannot be kept stops the agent with the reason.
    fn spool_outcome(&self, job_id: i64, p: &Pending) -> Result<()> {
        match self.spool.put_making_room(p, self.runner.builder.cache()) {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::error!(job = job_id, error = %e, "cannot spool the job's outcome");
                Err(e)
            }
        }
    }
}

/// Posts state events in order; they are progress notes, so a lost one is logged, not retried.
async fn forward_events(
    client: ApiClient,
    job_id: i64,
    mut rx: mpsc::UnboundedReceiver<EventRequest>,
) {
    while let Some(ev) = rx.recv().await {
        if let Err(e) = client.event(job_id, &ev).await {
            tracing::warn!(job = job_id, state = ?ev.state, error = %e, "event not delivered");
        }
    }
}

async fn heartbeat(client: ApiClient, job_id: i64, interval_secs: u32, cancel: Cancel) {
    let mut tick = tokio::time::interval(Duration::from_secs(u64::from(interval_secs.max(1))));
    tick.tick().await;
    loop {
        tick.tick().await;
        match client.heartbeat(job_id).await {
            Ok(hb) if hb.cancelled => {
                cancel.cancel();
                return;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(job = job_id, error = %e, "heartbeat failed"),
        }
    }
}

/// Keeps a build order's lease; a lost order cancels its build (another
/// builder has it, or it is done).
async fn order_heartbeat(client: ApiClient, order_id: i64, interval_secs: u32, cancel: Cancel) {
    let mut tick = tokio::time::interval(Duration::from_secs(u64::from(interval_secs.max(1))));
    tick.tick().await;
    loop {
        tick.tick().await;
        match client.order_heartbeat(order_id).await {
            Ok(_) => {}
            Err(AgentError::Api(e)) if e.status() == Some(409) => {
                cancel.cancel();
                return;
            }
            Err(e) => tracing::warn!(order = order_id, error = %e, "order heartbeat failed"),
        }
    }
}

/// Sends spooled items whenever woken, and keeps retrying with backoff while the server is away.
async fn drain_forever(spool: Arc<Spool>, client: ApiClient, wake: Arc<Notify>) {
    let mut attempt = 0;
    loop {
        match spool.drain(&client).await {
            Ok(_) => {
                attempt = 0;
                let _ = tokio::time::timeout(Duration::from_secs(30), wake.notified()).await;
            }
            Err(e) => {
                let wait = backoff(attempt, Duration::from_secs(1), Duration::from_secs(300));
                tracing::warn!(error = %e, ?wait, "upload failed; the spool keeps it");
                attempt += 1;
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enrolment(dir: &std::path::Path, backend: BootBackend) -> Enrolment {
        Enrolment {
            identity_file: dir.join("agent.json"),
            server: "http://127.0.0.1:9".into(),
            token: Some("unused".into()),
            name: "box-1".into(),
            tbox_group: "box".into(),
            backend,
            hardware: crate::hwinfo::read_host().expect("hwinfo"),
            host: None,
        }
    }

    #[tokio::test]
    async fn an_identity_keeps_its_backend() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut id = Identity {
            server: "http://127.0.0.1:9".into(),
            agent_id: 7,
            agent_token: "secret".into(),
            backend: Some(BootBackend::Host),
        };
        write_json(&dir.path().join("agent.json"), &id).expect("write");
        let same = enrol(&enrolment(dir.path(), BootBackend::Host))
            .await
            .expect("the same backend reuses the identity");
        assert_eq!(same.agent_id, 7);
        let err = enrol(&enrolment(dir.path(), BootBackend::Qemu))
            .await
            .expect_err("a host identity is not reused for qemu");
        let msg = err.to_string();
        assert!(
            msg.contains("the host backend, not qemu") && msg.contains("KBOT_WORK_DIR"),
            "{msg}"
        );
        // Identities from before the backend was recorded are kept.
        id.backend = None;
        write_json(&dir.path().join("agent.json"), &id).expect("write");
        let old = enrol(&enrolment(dir.path(), BootBackend::Qemu))
            .await
            .expect("an identity without a backend is reused");
        assert_eq!(old.agent_token, "secret");
    }
}
