//! How long kbot keeps what outsiders' mail made and what it built
//! (`KBOT_KEEP_*`), loaded once with the rest of [`crate::config::Config`]:
//! the git refs of finished series and of `#kbot test` patches, the raw
//! text of list messages that are no patch, and built kernels nobody used.
//! The pruning itself is the retention pass (`lists::retention`, which
//! calls `builds::retention`), run by the server every
//! `KBOT_GC_INTERVAL_HOURS` and once by `kbot-server gc`.

use std::time::Duration;

/// Flags of `kbot-server serve` and `kbot-server gc` for retention.
#[derive(Debug, Clone, clap::Args)]
pub struct RetentionArgs {
    /// Days a finished series keeps its `refs/kbot/series/LIST/ID` refs,
    /// and a `#kbot test` patch its `refs/kbot/tests/...` ref, on the
    /// server's mirror (0: forever).
    #[arg(
        long = "keep-refs-days",
        env = "KBOT_KEEP_REFS_DAYS",
        default_value_t = 90
    )]
    pub keep_refs_days: u32,
    /// Days the raw text of a list message that is no patch (a reply, a
    /// command) is kept; its headers stay (0: forever).
    #[arg(
        long = "keep-raw-mail-days",
        env = "KBOT_KEEP_RAW_MAIL_DAYS",
        default_value_t = 30
    )]
    pub keep_raw_mail_days: u32,
    /// Days a built kernel nobody used stays in the artifact store (its
    /// image, config and log, and its build orders): a job that needs it
    /// later builds it again (0: forever).
    #[arg(
        long = "keep-builds-days",
        env = "KBOT_KEEP_BUILDS_DAYS",
        default_value_t = 30
    )]
    pub keep_builds_days: u32,
    /// How often `serve` runs the retention pass (0: never; `kbot-server gc`
    /// runs it once).
    #[arg(
        long = "gc-interval-hours",
        env = "KBOT_GC_INTERVAL_HOURS",
        default_value_t = 24
    )]
    pub gc_interval_hours: u32,
}

/// The retention settings the server runs with; `None` keeps forever.
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    pub keep_refs: Option<Duration>,
    pub keep_raw_mail: Option<Duration>,
    pub keep_builds: Option<Duration>,
    pub gc_interval: Option<Duration>,
}

impl RetentionConfig {
    /// Refs 90 days, raw replies and unused builds 30 days, a pass a day.
    pub fn defaults() -> RetentionConfig {
        RetentionConfig {
            keep_refs: Some(days(90)),
            keep_raw_mail: Some(days(30)),
            keep_builds: Some(days(30)),
            gc_interval: Some(Duration::from_secs(24 * 3600)),
        }
    }

    pub fn from_args(a: &RetentionArgs) -> RetentionConfig {
        let some = |n: u32, unit: fn(u32) -> Duration| (n > 0).then(|| unit(n));
        RetentionConfig {
            keep_refs: some(a.keep_refs_days, days),
            keep_raw_mail: some(a.keep_raw_mail_days, days),
            keep_builds: some(a.keep_builds_days, days),
            gc_interval: some(a.gc_interval_hours, |h| {
                Duration::from_secs(u64::from(h) * 3600)
            }),
        }
    }
}

fn days(n: u32) -> Duration {
    Duration::from_secs(u64::from(n) * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        retention: RetentionArgs,
    }

    fn parse(args: &[&str]) -> RetentionConfig {
        let cli = Cli::try_parse_from(std::iter::once("kbot").chain(args.iter().copied()))
            .expect("flags parse");
        RetentionConfig::from_args(&cli.retention)
    }

    #[test]
    fn defaults_keep_refs_90_days_and_replies_30_and_zero_keeps_forever() {
        let d = parse(&[]);
        assert_eq!(d.keep_refs, Some(days(90)));
        assert_eq!(d.keep_raw_mail, Some(days(30)));
        assert_eq!(d.keep_builds, Some(days(30)));
        assert_eq!(d.gc_interval, RetentionConfig::defaults().gc_interval);
        let forever = parse(&["--keep-refs-days", "0", "--gc-interval-hours", "0"]);
        assert_eq!((forever.keep_refs, forever.gc_interval), (None, None));
    }
}
