//! Logging setup: `KBOT_LOG` filters (an `EnvFilter` directive, default
//! `info`), human-readable lines on stderr, or JSON lines with
//! `--log-json` (`KBOT_LOG_JSON=true`).

use tracing_subscriber::EnvFilter;

/// The variable with the log filter, as for the agent.
pub const LOG_FILTER_ENV: &str = "KBOT_LOG";

/// Installs the global subscriber; a second call is a no-op (tests).
pub fn init(json: bool) {
    let filter = EnvFilter::try_from_env(LOG_FILTER_ENV)
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
