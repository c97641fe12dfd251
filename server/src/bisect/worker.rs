//! The bisection worker: after a burst of uploads, or every [`TICK`],
//! advances every running bisection once (probe runs end one by one, not
//! with their submission; a verify pair's end is told, `super::verify_ended`).

use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};

use super::{advance, store};
use crate::state::{AppState, JobDone};
use crate::worker::{self, Pace, Woken, Worker};

/// How often the worker looks at running bisections without an upload to wake it.
const TICK: Duration = Duration::from_secs(2);

/// Starts the bisection worker; it runs until the server shuts down.
pub fn spawn_worker(state: AppState) -> tokio::task::JoinHandle<()> {
    let done = state.job_done.subscribe();
    let shutdown = state.shutdown.clone();
    tokio::spawn(worker::run(
        Bisector { state, done },
        shutdown,
        Pace::Every(TICK),
    ))
}

struct Bisector {
    state: AppState,
    done: broadcast::Receiver<JobDone>,
}

impl Worker for Bisector {
    type Event = ();

    async fn event(&mut self) -> Option<()> {
        if matches!(self.done.recv().await, Err(RecvError::Closed)) {
            return None;
        }
        // One look after a burst of uploads is enough.
        while self.done.try_recv().is_ok() {}
        Some(())
    }

    async fn pass(&mut self, _: Woken<()>) {
        advance_all(&self.state).await;
    }
}

/// Advances every running bisection once.
pub async fn advance_all(state: &AppState) {
    let ids = match store::running_ids(&state.db).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::error!(error = %crate::error::error_chain(&e), "listing running bisections failed");
            return;
        }
    };
    for id in ids {
        if let Err(e) = advance(state, id).await {
            tracing::error!(bisection = id, error = %crate::error::error_chain(&e), "bisection step failed");
        }
    }
}
