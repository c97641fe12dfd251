//! SQLite's single writer connection, on a thread of its own pinned to one
//! CPU together with the connection's worker thread.
//!
//! sqlx runs each SQLite connection on a worker thread and every statement
//! is a round trip to it. On this project's 2-vCPU VMs a round trip between
//! threads on different CPUs costs ~78 us (waking an idle vCPU goes through
//! the hypervisor), against ~8 us between threads on one CPU. A write
//! transaction is several round trips made while every other writer waits,
//! so writes run here: a current-thread runtime on a pinned thread, whose
//! connection's worker thread (spawned from it) inherits the pin. Callers
//! hand whole units of work over with [`Writer::run`]: two cross-CPU hops
//! per transaction instead of two per statement.

use std::future::Future;
use std::sync::Arc;

use sqlx::AnyPool;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct Writer {
    handle: Handle,
    pool: AnyPool,
    /// Dropped with the last clone: ends the thread.
    _stop: Arc<oneshot::Sender<()>>,
}

impl Writer {
    /// Starts the thread and opens the one-connection pool from it.
    pub async fn start<F, Fut>(open_pool: F) -> Result<Writer>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<AnyPool>>,
    {
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("kbot-sqlite-writer".into())
            .spawn(move || {
                pin_to_one_cpu();
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = ready_tx.send(Err(Error::Io(err)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let opened = open_pool().await.map(|pool| (pool, Handle::current()));
                    if ready_tx.send(opened).is_ok() {
                        // Serve spawned work until the last `Writer` is dropped.
                        let _ = stop_rx.await;
                    }
                });
            })?;
        let (pool, handle) = ready_rx
            .await
            .map_err(|_| anyhow::anyhow!("the SQLite writer thread died while starting"))??;
        Ok(Writer {
            handle,
            pool,
            _stop: Arc::new(stop_tx),
        })
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Runs `work` on the writer thread and waits for its result.
    pub async fn run<T, Fut>(&self, work: Fut) -> Result<T>
    where
        Fut: Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.handle
            .spawn(work)
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("SQLite write task failed: {e}")))?
    }
}

/// Pins the calling thread to the last CPU it may run on; threads it
/// spawns later inherit that. A failure only costs speed, so it is logged.
fn pin_to_one_cpu() {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let this_thread = Pid::from_raw(0);
    let allowed = match sched_getaffinity(this_thread) {
        Ok(set) => set,
        Err(err) => {
            tracing::warn!(%err, "cannot read the CPU affinity; SQLite writer left unpinned");
            return;
        }
    };
    let Some(cpu) = (0..CpuSet::count())
        .rev()
        .find(|&cpu| allowed.is_set(cpu).unwrap_or(false))
    else {
        return;
    };
    let mut one = CpuSet::new();
    if let Err(err) = one
        .set(cpu)
        .and_then(|()| sched_setaffinity(this_thread, &one))
    {
        tracing::warn!(%err, cpu, "cannot pin the SQLite writer thread");
    }
}
