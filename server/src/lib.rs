//! kbot-server: the store (SQLite or PostgreSQL), the agent protocol, the
//! scheduler, and the REST API and dashboard built on them.
//!
//! A library only: the command line (`kbot-server`, package `kbot-cli`) and
//! the load tool (`kbot-load`) are crates of their own built on it, and the
//! wire types are in `kbot-api`.
//!
//! # Layers
//!
//! Each module belongs to one layer and names only modules of the layers
//! under it, or of its own layer as the list allows; `tests/it/layering.rs`
//! reads this list and the sources' `crate::` paths and fails on a path that
//! points up, or on any import circle between top-level modules.
//!
//! 1. base: `error`, `db`, `config`, `time`, `telemetry`, `artifacts`,
//!    `auth`, `state`, `worker`
//! 2. web: `web`
//! 3. features: `access`, `agents`, `repos`, `profiles`, `jobs`, `builds`,
//!    `scheduler`, `comparisons`, `submissions`, `mail`, `regressions`, `bisect`,
//!    `watches`, `lists`, `robot`, `dashboard`
//! 4. assembly: `lib`, `server`, `routes`, `openapi`
//!
//! Base modules name only base modules; `web` names base modules; a
//! feature names base modules, `web`, and the features before it in the
//! order above; the assembly names anything. The wire types are
//! `kbot-api`'s.
//!
//! The order is the code's: a result's kernel profile (`profiles`) is
//! stored by the upload (`jobs`), and the pages that compare profiles are
//! the dashboard's (`dashboard::profiles`), which reads the pairs and
//! bisection steps they compare; a job is enqueued (`jobs`) before it is leased
//! (`scheduler`); a settled pair (`comparisons`) decides what follows
//! through a function the server passes in ([`comparisons::OnSettled`],
//! [`bisect::settled`]), so comparisons come before what they start;
//! submissions show their comparisons, reports (`mail`) quote them,
//! regressions link reports, bisections record regressions and send
//! reports, watches start bisections, and lists queue pairs whose
//! bisections answer in the patch's thread. A submission that ended is
//! told to the feature that queued it through another function the server
//! passes in ([`comparisons::OnEnded`], [`robot::ended`]), by its
//! [`jobs::Origin`]. `dashboard` holds only the pages that span features.
//!
//! # Modules
//!
//! - [`error`]: the one error enum, its JSON and HTML responses, and the
//!   OpenAPI error-response sets of the handlers.
//! - [`db`]: pools for both backends and the embedded migrations.
//! - [`config`]: typed settings (with those of mail and web access), loaded
//!   once from flags and `KBOT_*` variables.
//! - [`time`]: the clock, as Unix milliseconds, and how it is printed.
//! - [`telemetry`]: logging set-up; [`artifacts`]: raw outputs, consoles,
//!   kernel configs and built kernels, in a directory or an S3 bucket.
//! - [`auth`]: tokens (stored hashed), the agent and user extractors, the
//!   agent record, the limiter of failed attempts.
//! - [`state`]: what every handler shares; [`worker`]: the shape of the
//!   background loops.
//! - [`web`]: template rendering, paging, SVG plots, short commit ids.
//! - [`access`]: web sign-in, sessions, CSRF tokens.
//! - [`agents`]: enrolment of test machines, the agents page.
//! - [`repos`]: registered repos, their git mirrors, resolved commits.
//! - [`profiles`]: results' kernel profiles (folded stacks), stored with
//!   the result (served by `jobs::profile`, compared by
//!   `dashboard::profiles`).
//! - [`jobs`]: enqueueing, job state changes, result upload, the lease
//!   reaper, per-commit summaries.
//! - [`builds`]: kernels built once per build key by the first leased job
//!   that needs one, their files in the artifact store, downloaded by the
//!   other agents of the arch.
//! - [`scheduler`]: which queued job an agent gets, the bounded long-poll,
//!   the lease endpoint and reply.
//! - [`comparisons`]: verdicts per pair and the extra runs `unknown` asks
//!   for; [`submissions`]: user submissions, their jobs, results and pages.
//! - [`mail`]: the robot's e-mails, written into an outbox in the
//!   transaction that found them and sent from it.
//! - [`regressions`]: what the robot found, and its triage.
//! - [`bisect`]: from a regressed pair to its verified first bad commit;
//!   [`watches`]: branches the robot follows; [`lists`]: mailing lists
//!   whose patch series it tests and whose threads it answers.
//! - [`robot`]: a submission's end told to the feature that queued it.
//! - [`dashboard`]: the overview, machines, trends and profile comparison
//!   pages, and a submission's neighbours.
//! - [`routes`]: the single route table; [`openapi`]: the OpenAPI document
//!   of the REST API; [`server`]: migrate, bind, serve, shut down.

/// The owners of each table of the store: only they write it, and a module
/// reads it only when an owner sits in its layer or below (the dashboard
/// reads anything). `tests/it/table_owners.rs` holds the code to this list
/// and names the breaks still left.
pub const TABLE_OWNERS: &[(&str, &[&str])] = &[
    ("users", &["auth", "access"]),
    ("tokens", &["auth"]),
    ("web_sessions", &["access"]),
    // `auth` reads an agent's record by its token; `agents` enrols it.
    ("agents", &["auth", "agents"]),
    ("repos", &["repos"]),
    ("commits", &["repos"]),
    ("result_profiles", &["profiles"]),
    ("jobs", &["jobs"]),
    ("atomic_jobs", &["jobs"]),
    ("job_events", &["jobs"]),
    ("results", &["jobs"]),
    ("kconfigs", &["jobs"]),
    ("metric_summaries", &["jobs"]),
    ("pending_backfills", &["jobs"]),
    ("builds", &["builds"]),
    ("build_files", &["builds"]),
    ("build_orders", &["builds"]),
    ("comparisons", &["comparisons"]),
    // `jobs::lifecycle` writes a submission's state; `submissions` the rest.
    ("submissions", &["jobs", "submissions"]),
    ("report_outbox", &["mail"]),
    ("posted_patches", &["mail"]),
    ("mail_followers", &["mail"]),
    ("report_attempts", &["mail"]),
    ("regressions", &["regressions"]),
    ("regression_events", &["regressions"]),
    ("bisections", &["bisect"]),
    ("bisection_steps", &["bisect"]),
    ("watches", &["watches"]),
    ("watch_events", &["watches"]),
    ("lists", &["lists"]),
    ("list_messages", &["lists"]),
    ("list_events", &["lists"]),
    ("list_commands", &["lists"]),
    ("list_quota_notices", &["lists"]),
    ("series", &["lists"]),
    ("series_parts", &["lists"]),
    ("series_build_probes", &["lists"]),
    ("patchwork_checks", &["lists"]),
];

pub mod access;
pub mod agents;
pub mod artifacts;
pub mod auth;
pub mod bisect;
pub mod builds;
pub mod comparisons;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod error;
pub mod jobs;
pub mod lists;
pub mod mail;
pub mod openapi;
pub mod profiles;
pub mod regressions;
pub mod repos;
pub mod robot;
pub mod routes;
pub mod scheduler;
pub mod server;
pub mod state;
pub mod submissions;
pub mod telemetry;
pub mod time;
pub mod watches;
pub mod web;
pub mod worker;

pub use config::Config;
pub use error::{Error, Result};
pub use state::AppState;
