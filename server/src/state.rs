//! What every handler gets: the store, the config, and the in-process signals.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch, Notify};

use crate::artifacts::ArtifactStore;
use crate::auth::{AgentTokenCache, AuthState, SignInLimiter};
use crate::config::Config;
use crate::db::Db;

/// A job run whose result was just stored. Subscribers (the comparison
/// worker) use it to check whether a pair is complete; it is a hint, the
/// database stays the truth, and a lagging receiver must re-scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobDone {
    pub job_id: i64,
    pub submission_id: i64,
    pub atomic_job_id: i64,
}

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<Config>,
    /// Raw outputs, consoles and kernel configs (a directory or a bucket).
    pub artifacts: ArtifactStore,
    /// Woken when jobs become leasable, so long-polling agents need not wait
    /// for their next poll tick. Other replicas are reached by that tick.
    pub queue_changed: Arc<Notify>,
    /// Result uploads, as they commit.
    pub job_done: broadcast::Sender<JobDone>,
    /// Woken when a submission is cancelled, so the comparison worker tells
    /// its origin now rather than at its next re-scan.
    pub ended: Arc<Notify>,
    /// Flips to `true` at shutdown; long-polls return early on it.
    pub shutdown: watch::Receiver<bool>,
    /// Agent tokens checked in the last few seconds (see its module).
    pub agent_tokens: Arc<AgentTokenCache>,
    /// Failed web sign-ins per client address and user name.
    pub sign_in_limiter: Arc<SignInLimiter>,
    /// Failed agent enrolments (wrong or used tokens) per client address,
    /// with the sign-in limits: enrolment tokens are guessable otherwise.
    pub enrol_limiter: Arc<SignInLimiter>,
}

impl AppState {
    pub fn new(
        db: Db,
        config: Config,
        artifacts: ArtifactStore,
        shutdown: watch::Receiver<bool>,
    ) -> AppState {
        let (job_done, _) = broadcast::channel(1024);
        let token_ttl = Duration::from_secs(config.agent_token_cache_secs.into());
        let limiter =
            || SignInLimiter::new(config.access.sign_in_attempts, config.access.sign_in_window);
        let (sign_in_limiter, enrol_limiter) = (limiter(), limiter());
        AppState {
            db,
            config: Arc::new(config),
            artifacts,
            queue_changed: Arc::new(Notify::new()),
            job_done,
            ended: Arc::new(Notify::new()),
            shutdown,
            agent_tokens: Arc::new(AgentTokenCache::new(token_ttl)),
            sign_in_limiter: Arc::new(sign_in_limiter),
            enrol_limiter: Arc::new(enrol_limiter),
        }
    }

    /// Call after committing a transaction that cancelled a submission.
    pub fn submission_ended(&self) {
        // A stored permit: a worker busy with a pass sees it next.
        self.ended.notify_one();
    }

    /// Call after committing a transaction that queued jobs.
    pub fn wake_lessees(&self) {
        self.queue_changed.notify_waiters();
    }
}

impl AuthState for AppState {
    fn db(&self) -> &Db {
        &self.db
    }

    fn agent_tokens(&self) -> &AgentTokenCache {
        &self.agent_tokens
    }
}
