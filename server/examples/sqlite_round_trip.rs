//! How long one statement round trip to a sqlx SQLite connection takes, the
//! figure behind the pinned writer thread (`server/src/db/writer.rs`).
//!
//! ```sh
//! cargo run --release -p kbot-server --example sqlite_round_trip
//! taskset -c 0 target/release/examples/sqlite_round_trip
//! ```
//!
//! sqlx runs each SQLite connection on a worker thread; each statement is a
//! message to it and a wake-up back. Unpinned, the two threads usually sit
//! on different CPUs; under `taskset -c 0` they share one.

use std::time::Instant;

use sqlx::any::AnyPoolOptions;
use sqlx::Executor;

const STATEMENTS: u32 = 5_000;

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir()?;
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("probe.db").display()
        );
        let pool = AnyPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await?;
        let mut conn = pool.acquire().await?;
        for _ in 0..100 {
            conn.execute("SELECT 1").await?;
        }
        let started = Instant::now();
        for _ in 0..STATEMENTS {
            conn.execute("SELECT 1").await?;
        }
        let per_trip = started.elapsed().as_secs_f64() * 1e6 / f64::from(STATEMENTS);
        println!("{per_trip:.1} us per statement round trip ({STATEMENTS} statements)");
        Ok(())
    })
}
