//! Typed configuration, loaded once at start from command-line flags and
//! `KBOT_*` environment variables; handlers only ever see [`Config`].
//!
//! The settings of the e-mail reports ([`mail`]) and of web access
//! ([`access`], with the trusted reverse proxies of [`proxy`]) are here with
//! the rest, so the server's state holds them without naming a feature.

use std::net::SocketAddr;
use std::path::PathBuf;

pub mod access;
pub mod artifacts;
pub mod kcidb;
pub mod lists;
pub mod mail;
pub mod proxy;
pub mod retention;

pub use access::{AccessArgs, AccessConfig};
pub use artifacts::{ArtifactStoreArgs, S3Settings};
pub use kcidb::{KcidbArgs, KcidbConfig};
pub use lists::{AmLimits, ListLimits, ListLimitsArgs};
pub use mail::{MailArgs, MailConfig, SmtpSettings};
pub use retention::{RetentionArgs, RetentionConfig};

/// Where the store lives when neither `KBOT_DATABASE_URL` nor `DATABASE_URL` is set.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./var/kbot.db";

/// The database to use; shared by every subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// `sqlite://PATH` (created on first start) or `postgres://...`.
    /// Falls back to `DATABASE_URL`, then to `sqlite://./var/kbot.db`.
    #[arg(long = "database-url", env = "KBOT_DATABASE_URL")]
    pub database_url: Option<String>,
}

impl DbArgs {
    /// The URL to connect to, after the `DATABASE_URL` and default fallbacks.
    pub fn resolve(&self) -> String {
        self.database_url
            .clone()
            .or_else(|| std::env::var("DATABASE_URL").ok())
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_string())
    }
}

/// Flags of `kbot-server serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Address the HTTP server listens on.
    #[arg(long, env = "KBOT_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Directory for raw outputs, consoles and kernel configs (unless
    /// `KBOT_ARTIFACT_STORE` names a bucket), and for the git mirrors and
    /// list archives.
    #[arg(long, env = "KBOT_ARTIFACT_DIR", default_value = "./var/artifacts")]
    pub artifact_dir: PathBuf,
    /// An S3-compatible bucket for artifacts (`KBOT_ARTIFACT_STORE`, `KBOT_S3_*`).
    #[command(flatten)]
    pub artifact_store: ArtifactStoreArgs,
    /// Largest accepted request body; bigger ones get 413.
    #[arg(long, env = "KBOT_MAX_UPLOAD_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_upload_bytes: usize,
    /// How long a lease lasts without a heartbeat.
    #[arg(long, env = "KBOT_LEASE_SECS", default_value_t = 120)]
    pub lease_secs: u32,
    /// Leases expire after this many attempts and the job fails.
    #[arg(long, env = "KBOT_MAX_ATTEMPTS", default_value_t = 3)]
    pub max_attempts: u32,
    /// Upper bound on a lease long-poll, whatever the agent asks for.
    #[arg(long, env = "KBOT_MAX_LEASE_WAIT_SECS", default_value_t = 30)]
    pub max_lease_wait_secs: u32,
    /// How long a checked agent token is trusted without asking the
    /// database again (0: always ask). A token revoked on another replica
    /// keeps working that long there.
    #[arg(long, env = "KBOT_AGENT_TOKEN_CACHE_SECS", default_value_t = 5)]
    pub agent_token_cache_secs: u32,
    /// How often the reaper looks for expired leases.
    #[arg(long, env = "KBOT_REAPER_INTERVAL_SECS", default_value_t = 5)]
    pub reaper_interval_secs: u32,
    /// Time in-flight requests get to finish after SIGINT/SIGTERM.
    #[arg(long, env = "KBOT_SHUTDOWN_TIMEOUT_SECS", default_value_t = 10)]
    pub shutdown_timeout_secs: u32,
    /// Most events one job records (the server's and its agent's); the
    /// agent's next progress event gets 429 `too_many_events`.
    #[arg(long, env = "KBOT_MAX_EVENTS_PER_JOB", default_value_t = 1000)]
    pub max_events_per_job: u32,
    /// How long series refs and raw replies are kept (`KBOT_KEEP_*`).
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Regression e-mails (`KBOT_MAIL_*`, `KBOT_SMTP_*`).
    #[command(flatten)]
    pub mail: MailArgs,
    /// An lkp-tests checkout that job files' `<< :` includes are resolved
    /// against; unset, a job file with an include is refused.
    #[arg(long, env = "KBOT_LKP_ROOT")]
    pub lkp_root: Option<PathBuf>,
    /// Dashboard sign-in (`KBOT_READ_REQUIRES_SIGN_IN`, `KBOT_SECURE_COOKIES`, ...).
    #[command(flatten)]
    pub access: AccessArgs,
    /// What list mail may cost (`KBOT_LIST_*`, `KBOT_AM_*`).
    #[command(flatten)]
    pub lists: ListLimitsArgs,
    /// Where finished pairs are sent as KCIDB documents (`KBOT_KCIDB_*`).
    #[command(flatten)]
    pub kcidb: KcidbArgs,
}

/// The settings the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: String,
    pub bind: SocketAddr,
    pub artifact_dir: PathBuf,
    /// Artifacts in a bucket instead of `artifact_dir`.
    pub artifact_store: Option<S3Settings>,
    pub max_upload_bytes: usize,
    pub lease_secs: u32,
    /// What agents are told; a third of the lease so two heartbeats may be lost.
    pub heartbeat_interval_secs: u32,
    pub max_attempts: u32,
    pub max_lease_wait_secs: u32,
    pub reaper_interval_secs: u32,
    pub agent_token_cache_secs: u32,
    pub shutdown_timeout_secs: u32,
    pub max_events_per_job: u32,
    pub retention: RetentionConfig,
    pub mail: MailConfig,
    /// Where job files' includes come from (see [`ServeArgs::lkp_root`]).
    pub lkp_root: Option<PathBuf>,
    /// Who may read and change things from the web.
    pub access: AccessConfig,
    /// What list mail may cost.
    pub lists: ListLimits,
    /// Where finished pairs are sent as KCIDB documents.
    pub kcidb: KcidbConfig,
}

impl Config {
    /// Defaults for everything but the two places state lives.
    pub fn new(database_url: impl Into<String>, artifact_dir: impl Into<PathBuf>) -> Config {
        Config {
            database_url: database_url.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            artifact_dir: artifact_dir.into(),
            artifact_store: None,
            max_upload_bytes: 64 * 1024 * 1024,
            lease_secs: 120,
            heartbeat_interval_secs: 40,
            max_attempts: 3,
            max_lease_wait_secs: 30,
            reaper_interval_secs: 5,
            agent_token_cache_secs: 5,
            shutdown_timeout_secs: 10,
            max_events_per_job: 1000,
            retention: RetentionConfig::defaults(),
            mail: MailConfig::disabled(),
            lkp_root: None,
            access: AccessConfig::open(),
            lists: ListLimits::default(),
            kcidb: KcidbConfig::default(),
        }
    }
}

impl From<ServeArgs> for Config {
    fn from(args: ServeArgs) -> Config {
        let access = AccessConfig::from_args(args.access, args.mail.public_url.as_deref());
        Config {
            database_url: args.db.resolve(),
            bind: args.bind,
            artifact_dir: args.artifact_dir,
            artifact_store: args.artifact_store.into_settings(),
            max_upload_bytes: args.max_upload_bytes,
            lease_secs: args.lease_secs.max(3),
            heartbeat_interval_secs: (args.lease_secs / 3).max(1),
            max_attempts: args.max_attempts.max(1),
            max_lease_wait_secs: args.max_lease_wait_secs,
            reaper_interval_secs: args.reaper_interval_secs.max(1),
            agent_token_cache_secs: args.agent_token_cache_secs,
            shutdown_timeout_secs: args.shutdown_timeout_secs,
            max_events_per_job: args.max_events_per_job.max(1),
            retention: RetentionConfig::from_args(&args.retention),
            mail: MailConfig::from_args(args.mail, args.bind),
            lkp_root: args.lkp_root,
            access,
            lists: args.lists.into(),
            kcidb: args.kcidb.into(),
        }
    }
}
