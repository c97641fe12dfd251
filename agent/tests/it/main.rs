//! kbot-agent's integration tests, one binary: a module per area (run one
//! with `cargo test -p kbot-agent --test it AREA::`), on the harness of
//! `kbot-testkit`.
//!
//! The areas share a process: none changes process-wide state beyond what
//! the agent itself keeps once per process (the spawner thread of
//! `kbot_agent::tied`). `tests/no_orphans.rs` stays a binary of its own: it
//! is its own harness, re-running itself as a stand-in agent to SIGKILL.

mod build_command;
mod build_orders;
mod ccache_repos;
mod daemon_against_server;
mod disk_full;
mod guest;
mod guest_hang;
mod keys;
mod qemu_user;
mod refused_results;
mod shared_builds;
