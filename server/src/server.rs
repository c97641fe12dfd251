//! Start-up and shutdown: connect, migrate, bind, serve, stop cleanly.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::artifacts::ArtifactStore;
use crate::config::Config;
use crate::db::Db;
use crate::error::Result;
use crate::jobs::{reaper, summaries};
use crate::routes;
use crate::state::AppState;

/// Brings a store to the current schema and runs the data migrations the
/// schema migrations asked for (the per-commit summaries' backfill), under
/// the migration lock: what every process that opens a store for work does
/// (the server at start-up, the admin commands, the load tool).
pub async fn migrate(db: &Db) -> Result<()> {
    db.migrate_then(|db| async move { summaries::backfill_pending(&db).await })
        .await
}

/// A bound, migrated server, not yet serving. Binding first lets tests use
/// port 0 and learn the real port before any request.
pub struct Server {
    listener: TcpListener,
    state: AppState,
    shutdown_tx: watch::Sender<bool>,
}

impl Server {
    /// Connects to the store, applies migrations, creates the artifact
    /// directory and binds `config.bind`.
    pub async fn build(config: Config) -> Result<Server> {
        let db = Db::connect(&config.database_url).await?;
        migrate(&db).await?;
        tokio::fs::create_dir_all(&config.artifact_dir).await?;
        let artifacts = ArtifactStore::open(&config)?;
        tracing::info!(store = artifacts.location(), "artifacts");
        let listener = TcpListener::bind(config.bind).await?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let state = AppState::new(db, config, artifacts, shutdown_rx);
        Ok(Server {
            listener,
            state,
            shutdown_tx,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `signal` resolves, then gives in-flight requests
    /// `shutdown_timeout_secs` to finish (long-polls end at once).
    pub async fn run_until(self, signal: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let Server {
            listener,
            state,
            shutdown_tx,
        } = self;
        let grace = Duration::from_secs(u64::from(state.config.shutdown_timeout_secs));
        let reaper = tokio::spawn(reaper::run(state.clone()));
        let comparer = crate::comparisons::spawn_worker(
            state.clone(),
            crate::bisect::settled,
            crate::robot::ended,
        );
        let bisector = crate::bisect::spawn_worker(state.clone());
        let watcher = crate::watches::spawn_worker(state.clone());
        let reader = crate::lists::spawn_worker(state.clone());
        let collector = crate::lists::retention::spawn_worker(state.clone());
        let mailer = crate::mail::sender::spawn_for(&state);
        let kcidb = crate::submissions::kcidb_send::spawn_worker(state.clone());
        let app = routes::router(state.clone());
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let notify_stop = async move {
            signal.await;
            tracing::info!("shutting down");
            let _ = shutdown_tx.send(true);
            let _ = stop_tx.send(true);
        };
        // The peer address reaches handlers (sign-in is rate-limited by it).
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        let serve = axum::serve(listener, app).with_graceful_shutdown(notify_stop);
        let grace_timer = async move {
            let _ = stop_rx.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            served = serve.into_future() => served?,
            () = grace_timer => tracing::warn!("in-flight requests outlived the shutdown timeout"),
        }
        reaper.abort();
        comparer.abort();
        bisector.abort();
        watcher.abort();
        reader.abort();
        if let Some(kcidb) = kcidb {
            kcidb.abort();
        }
        if let Some(collector) = collector {
            // It stops between passes; a pass under way is let finish its git
            // commands (a killed pack-refs would leave its lock behind).
            let _ = tokio::time::timeout(grace, collector).await;
        }
        if let Some(mailer) = mailer {
            // The sender stops after the delivery in progress; never abort mid-SMTP.
            let _ = tokio::time::timeout(grace, mailer).await;
        }
        state.db.close().await;
        Ok(())
    }

    /// Serves in a background task; for tests and the load tool.
    pub fn spawn(self) -> Result<RunningServer> {
        let addr = self.local_addr()?;
        let state = self.state.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(self.run_until(async move {
            let _ = stop_rx.await;
        }));
        Ok(RunningServer {
            addr,
            state,
            stop: Some(stop_tx),
            task,
        })
    }
}

/// A server serving in the background.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: JoinHandle<Result<()>>,
}

impl RunningServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Stops serving and waits for the shutdown to complete.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task)
            .await
            .map_err(|e| anyhow::anyhow!("server task panicked: {e}"))?
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(%err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sig) => {
                sig.recv().await;
            }
            Err(err) => {
                tracing::error!(%err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
