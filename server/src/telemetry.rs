//! Logging setup: `RUST_LOG` filters (default `info`), human-readable lines
//! on stderr, or JSON lines with `KBOT_LOG_FORMAT=json`.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call is a no-op (tests).
pub fn init(json: bool) {
    let filter = EnvFilter::try_from_default_env()
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
