//! kbot-server: the store (SQLite or PostgreSQL), the agent protocol, the
//! scheduler, and the REST API and dashboard built on them.
//!
//! A library only: the command line (`kbot-server`, package `kbot-cli`) and
//! the load tool (`kbot-load`) are crates of their own built on it, and the
//! wire types are in `kbot-api`.
//!
//! Module map (one concern each):
//! - [`config`]: typed settings, loaded once from flags and `KBOT_*` variables.
//! - [`error`]: the one error enum and its JSON/HTML responses.
//! - [`db`]: pools for both backends and the embedded migrations.
//! - [`auth`]: tokens (stored hashed) and the agent/user extractors;
//!   [`access`]: web sign-in, sessions, CSRF tokens.
//! - [`agents`]: enrolment of test machines.
//! - [`jobs`]: enqueueing, job state changes, result upload, the lease reaper.
//! - [`scheduler`]: which queued job an agent gets, and the bounded long-poll.
//! - [`routes`]: the single route table; [`server`]: bind, serve, shut down.
//! - [`repos`]: registered repos, their git mirrors, resolved commits.
//! - [`submissions`]: user submissions, their jobs, results; [`comparisons`]:
//!   verdicts per pair and the extra runs `unknown` asks for.
//! - [`bisect`]: from a regressed pair to its verified first bad commit;
//!   [`watches`]: branches the robot follows; [`regressions`]: what the
//!   robot found, and its triage.
//! - [`mail`]: the robot's e-mails, written into an outbox in the transaction
//!   that found them and sent from it; [`artifacts`]: raw outputs, consoles
//!   and kernel configs on disk.
//! - [`dashboard`]: the server-rendered pages and their SVG plots;
//!   [`openapi`]: the OpenAPI document of the REST API.
//! - [`state`]: what every handler shares; [`telemetry`]: logging set-up;
//!   [`time`]: the clock, as Unix milliseconds.

pub mod access;
pub mod agents;
pub mod artifacts;
pub mod auth;
pub mod bisect;
pub mod comparisons;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod error;
pub mod jobs;
pub mod mail;
pub mod openapi;
pub mod regressions;
pub mod repos;
pub mod routes;
pub mod scheduler;
pub mod server;
pub mod state;
pub mod submissions;
pub mod telemetry;
pub mod time;
pub mod watches;

pub use config::Config;
pub use error::{Error, Result};
pub use state::AppState;
