//! Limits on the work a posted mail can cause (`KBOT_LIST_*`, `KBOT_AM_*`),
//! loaded once with the rest of [`crate::config::Config`]. Anyone who can
//! post to a watched list chooses what kbot applies and tests, so every
//! cost a mail can raise has a bound here.

use std::time::Duration;

/// Flags of `kbot-server serve` that bound what list mail may cost.
#[derive(Debug, Clone, clap::Args)]
pub struct ListLimitsArgs {
    /// Most patches of a series kbot tests; a larger series ends
    /// `too_large` with one answer (netdev asks for 15 at most).
    #[arg(
        long = "list-max-parts",
        env = "KBOT_LIST_MAX_PARTS",
        default_value_t = 50
    )]
    pub max_parts: u32,
    /// Largest patch mail kbot applies; a series with a larger one ends
    /// `too_large`.
    #[arg(
        long = "list-max-patch-bytes",
        env = "KBOT_LIST_MAX_PATCH_BYTES",
        default_value_t = 1 << 20
    )]
    pub max_patch_bytes: u64,
    /// Pairs a day (any 24 hours) one sender's series may queue on one list;
    /// the next series ends `over_quota`, and the sender hears so once a day.
    #[arg(
        long = "list-sender-daily-pairs",
        env = "KBOT_LIST_SENDER_DAILY_PAIRS",
        default_value_t = 10
    )]
    pub sender_daily_pairs: u32,
    /// Pairs a day (any 24 hours) one list's series may queue.
    #[arg(
        long = "list-daily-pairs",
        env = "KBOT_LIST_DAILY_PAIRS",
        default_value_t = 100
    )]
    pub list_daily_pairs: u32,
    /// Priority of the pairs list mail queues (users' and watches' pairs
    /// are 0 unless a user asks otherwise; higher runs first).
    #[arg(
        long = "list-priority",
        env = "KBOT_LIST_PRIORITY",
        default_value_t = -1,
        allow_negative_numbers = true
    )]
    pub priority: i32,
    /// Most bytes the `literal`/`delta` blocks of a series' binary patches
    /// may declare together; more is refused before `git am` runs.
    #[arg(
        long = "am-max-binary-bytes",
        env = "KBOT_AM_MAX_BINARY_BYTES",
        default_value_t = 10 << 20
    )]
    pub am_max_binary_bytes: u64,
    /// Address space `git am` may use (its RLIMIT_AS).
    #[arg(
        long = "am-memory-bytes",
        env = "KBOT_AM_MEMORY_BYTES",
        default_value_t = 4 << 30
    )]
    pub am_memory_bytes: u64,
    /// Longest one `git am` of mailed patches may take.
    #[arg(
        long = "am-timeout-secs",
        env = "KBOT_AM_TIMEOUT_SECS",
        default_value_t = 300
    )]
    pub am_timeout_secs: u32,
}

/// What one `git am` of mailed patches may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmLimits {
    /// Sum of the sizes the binary patches declare.
    pub max_binary_bytes: u64,
    /// RLIMIT_AS of the `git am` process.
    pub memory_bytes: u64,
    pub timeout: Duration,
}

impl Default for AmLimits {
    fn default() -> AmLimits {
        AmLimits {
            max_binary_bytes: 10 << 20,
            memory_bytes: 4 << 30,
            timeout: Duration::from_secs(300),
        }
    }
}

/// The bounds on list mail the server runs with (see [`ListLimitsArgs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListLimits {
    pub max_parts: u32,
    pub max_patch_bytes: u64,
    pub sender_daily_pairs: u32,
    pub list_daily_pairs: u32,
    pub priority: i32,
    pub am: AmLimits,
}

impl Default for ListLimits {
    fn default() -> ListLimits {
        ListLimits {
            max_parts: 50,
            max_patch_bytes: 1 << 20,
            sender_daily_pairs: 10,
            list_daily_pairs: 100,
            priority: -1,
            am: AmLimits::default(),
        }
    }
}

impl From<ListLimitsArgs> for ListLimits {
    fn from(a: ListLimitsArgs) -> ListLimits {
        ListLimits {
            max_parts: a.max_parts.max(1),
            max_patch_bytes: a.max_patch_bytes,
            sender_daily_pairs: a.sender_daily_pairs,
            list_daily_pairs: a.list_daily_pairs,
            priority: a.priority,
            am: AmLimits {
                max_binary_bytes: a.am_max_binary_bytes,
                memory_bytes: a.am_memory_bytes,
                timeout: Duration::from_secs(u64::from(a.am_timeout_secs.max(1))),
            },
        }
    }
}
