//! The kernel build's sandbox flags (`KBOT_BUILD_*`), flattened into
//! [`AgentArgs`](super::AgentArgs), and the [`SandboxConfig`] they make.

use clap::Args;

use crate::sandbox::{self, Limits, SandboxConfig};

/// The kernel build's sandbox (see `sandbox.rs` and the README's "Test
/// machines" section).
#[derive(Debug, Clone, Args)]
pub struct BuildSandboxArgs {
    /// The user a root agent builds kernels as (it must exist; a non-root
    /// agent builds as itself).
    #[arg(long, env = "KBOT_BUILD_USER", default_value = sandbox::DEFAULT_BUILD_USER, global = true)]
    pub build_user: String,
    /// CPU seconds of any one process of a build.
    #[arg(long, env = "KBOT_BUILD_CPU_SECS", default_value_t = sandbox::DEFAULT_CPU_SECS, global = true)]
    pub build_cpu_secs: u64,
    /// Address space of any one process of a build, in MiB.
    #[arg(long, env = "KBOT_BUILD_ADDRESS_SPACE_MIB", default_value_t = sandbox::DEFAULT_ADDRESS_SPACE_MIB, global = true)]
    pub build_address_space_mib: u64,
    /// Processes the build user may run at once.
    #[arg(long, env = "KBOT_BUILD_MAX_PROCESSES", default_value_t = sandbox::DEFAULT_MAX_PROCESSES, global = true)]
    pub build_max_processes: u64,
    /// The largest file a build may write (the build log included), in MiB.
    #[arg(long, env = "KBOT_BUILD_MAX_FILE_MIB", default_value_t = sandbox::DEFAULT_MAX_FILE_MIB, global = true)]
    pub build_max_file_mib: u64,
    /// The size of a build's tmpfs /tmp, in MiB.
    #[arg(long, env = "KBOT_BUILD_TMP_MIB", default_value_t = sandbox::DEFAULT_TMP_MIB, global = true)]
    pub build_tmp_mib: u64,
}

impl BuildSandboxArgs {
    pub fn sandbox(&self) -> SandboxConfig {
        SandboxConfig {
            build_user: self.build_user.clone(),
            limits: Limits {
                cpu_secs: self.build_cpu_secs,
                address_space_bytes: self.build_address_space_mib << 20,
                processes: self.build_max_processes,
                file_size_bytes: self.build_max_file_mib << 20,
                tmp_bytes: self.build_tmp_mib << 20,
            },
        }
    }
}
