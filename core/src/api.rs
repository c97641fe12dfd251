//! Machine facts shared by the job model and the wire protocol.
//!
//! The wire types themselves live in the `kbot-api` crate.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Hardware fingerprint of a test machine, read by the agent from /proc and /sys.
///
/// Jobs are matched to agents by `tbox_group` and by these facts, and the
/// report's `test machine:` line is built from them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Hardware {
    /// `uname -m`: `x86_64`, `aarch64`, ...
    pub arch: String,
    /// `model name` from /proc/cpuinfo, e.g. `Intel(R) Xeon(R) Platinum 8321HC CPU @ 1.40GHz`.
    pub cpu_model: String,
    pub sockets: u32,
    /// Physical cores in the whole machine.
    pub cores: u32,
    /// Logical CPUs (hardware threads) online.
    pub threads: u32,
    pub numa_nodes: u32,
    pub memory_bytes: u64,
    pub page_size: u64,
    pub microcode: Option<String>,
    /// Release of the running kernel (`uname -r`).
    pub kernel: String,
}
