//! The sender task: delivers due outbox rows, with retries and backoff.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::outbox::{self, Claimed, Outcome};
use super::smtp::{self, Delivery};
use crate::config::mail::MailConfig;
use crate::db::Db;
use crate::error::Result;
use crate::time::now_ms;
use crate::worker::{self, Pace, Woken, Worker};

/// A sender: its name marks its claims, so replicas never finish each other's.
#[derive(Clone)]
pub struct Sender {
    pub db: Db,
    pub config: Arc<MailConfig>,
    pub name: String,
    /// Wakes the task early (a report was just queued on this replica).
    pub wake: Arc<Notify>,
}

impl Sender {
    pub fn new(db: Db, config: Arc<MailConfig>) -> Sender {
        let name = format!(
            "sender-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        Sender {
            db,
            config,
            name,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Starts the task; it stops after the delivery in progress once
    /// `shutdown` turns true.
    pub fn spawn(self, shutdown: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let name = self.name.clone();
            tracing::info!(sender = %name, "report sender started");
            let pace = Pace::After(self.config.poll_interval);
            let passes = Passes {
                sender: self,
                shutdown: shutdown.clone(),
            };
            worker::run(passes, shutdown, pace).await;
            tracing::info!(sender = %name, "report sender stopped");
        })
    }

    /// Delivers every report due now; returns how many attempts it made.
    pub async fn drain(&self, shutdown: &watch::Receiver<bool>) -> Result<usize> {
        let mut made = 0;
        while !*shutdown.borrow() {
            if !self.attempt_one().await? {
                break;
            }
            made += 1;
        }
        Ok(made)
    }

    /// Claims one due report and makes one delivery attempt; false when none was due.
    pub async fn attempt_one(&self) -> Result<bool> {
        let now = now_ms();
        let abandoned = outbox::settle_abandoned(&self.db, now).await?;
        if abandoned > 0 {
            tracing::error!(
                reports = abandoned,
                "a sender stopped while handing reports to the relay: they are uncertain, \
                 not resent (resend each with `kbot-server report resend`)"
            );
        }
        let ttl = duration_ms(self.config.claim_ttl);
        let limits = outbox::SendLimits {
            per_hour: self.config.max_per_hour,
            per_thread_hour: self.config.max_per_thread_hour,
        };
        let Some(claimed) = outbox::claim(&self.db, &self.name, now, ttl, limits).await? else {
            return Ok(false);
        };
        let started = now_ms();
        let handoff = async {
            match outbox::mark_handed(&self.db, &claimed, &self.name, now_ms()).await {
                Ok(true) => Ok(()),
                Ok(false) => Err("the claim was lost before DATA".to_owned()),
                Err(e) => Err(format!(
                    "cannot record the hand-off: {}",
                    crate::error::error_chain(&e)
                )),
            }
        };
        let delivery = smtp::deliver_with_handoff(
            &self.config.smtp,
            &claimed.envelope_from,
            &claimed.recipients.0,
            &claimed.message,
            handoff,
        )
        .await;
        let finished = now_ms();
        let (outcome, detail) = self.outcome(&claimed, &delivery, finished);
        let kept = outbox::finish(
            &self.db, &claimed, &self.name, started, finished, outcome, &detail,
        )
        .await?;
        log_attempt(&claimed, &delivery, kept);
        Ok(true)
    }

    /// The outbox outcome of `delivery` and the detail recorded with it.
    fn outcome(&self, claimed: &Claimed, delivery: &Delivery, finished: i64) -> (Outcome, String) {
        let attempts = u32::try_from(claimed.attempt).unwrap_or(u32::MAX);
        match delivery {
            Delivery::Sent => (Outcome::Sent, "accepted by the relay".to_owned()),
            Delivery::Transient(why) => (
                Outcome::Transient {
                    next_attempt_at: finished + duration_ms(self.config.backoff(attempts)),
                },
                why.clone(),
            ),
            Delivery::Permanent(why) => (Outcome::Permanent, why.clone()),
            Delivery::Uncertain(why) => (Outcome::Uncertain, why.clone()),
        }
    }
}

fn log_attempt(claimed: &Claimed, delivery: &Delivery, kept: bool) {
    let (id, attempt) = (&claimed.message_id, claimed.attempt);
    match (delivery, kept) {
        (_, false) => tracing::warn!(message_id = %id, "claim lost during delivery"),
        (Delivery::Sent, _) => tracing::info!(message_id = %id, attempt, "report sent"),
        (Delivery::Transient(why), _) => {
            tracing::warn!(message_id = %id, attempt, error = %why, "report delivery deferred")
        }
        (Delivery::Permanent(why), _) => {
            tracing::error!(message_id = %id, attempt, error = %why, "report refused for good")
        }
        (Delivery::Uncertain(why), _) => {
            tracing::error!(message_id = %id, attempt, error = %why, "report delivery uncertain; not resent")
        }
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Starts the sender of a server when mail is enabled.
pub fn spawn_for(state: &crate::state::AppState) -> Option<tokio::task::JoinHandle<()>> {
    if !state.config.mail.enabled {
        return None;
    }
    let sender = Sender::new(state.db.clone(), Arc::new(state.config.mail.clone()));
    Some(sender.spawn(state.shutdown.clone()))
}

/// The sender's loop: a pass delivers every due report; the next one
/// follows a wake-up (a report queued) or the poll interval.
struct Passes {
    sender: Sender,
    shutdown: watch::Receiver<bool>,
}

impl Worker for Passes {
    type Event = ();

    async fn event(&mut self) -> Option<()> {
        self.sender.wake.notified().await;
        Some(())
    }

    async fn pass(&mut self, _: Woken<()>) {
        if let Err(e) = self.sender.drain(&self.shutdown).await {
            tracing::error!(error = %crate::error::error_chain(&e), "report sender pass failed");
        }
    }
}
