//! The end-to-end scenarios on real kernels: Debian's linux-source with
//! planted commits, built and booted in QEMU by a real kbot-agent process,
//! against the real server on a fresh SQLite store, every mail checked at
//! the harness's SMTP server.
//!
//! Each builds and boots kernels for minutes, so plain `cargo test` leaves
//! them out (`#[ignore]`); `scripts/test` runs the reduced forms:
//!
//! ```text
//! cargo test -p kbot-agent --test e2e -- --ignored --nocapture posted_series
//! ```
//!
//! Built kernels, the kernel tree and the agent's work directory outlive a
//! run in `KBOT_E2E_CACHE` (default `/var/cache/kbot`); the kernel
//! repository of every scenario is `plant.rs`'s.

mod arm64;
mod author;
mod kexec;
mod lab;
mod plant;
mod robot;
mod series;
