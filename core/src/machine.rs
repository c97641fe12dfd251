//! The facts of a test machine ([`Hardware`]): what the agent reads from
//! /proc and /sys, what jobs' needs are matched against and what the
//! report's `test machine:` line describes.
//!
//! A leaf: it names no other kbot module, so the job model, the needs, the
//! program table, the report and the wire types can all use it without
//! importing each other.

use serde::{Deserialize, Serialize};

/// How a kernel for a guest of `uname -m` `arch` is made: kbuild's `ARCH=`,
/// the boot image's make target and its path in the object directory, and
/// the toolchain prefix on a host of another arch. The agent builds with it,
/// and a reproduction script says the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelImage {
    pub make_arch: &'static str,
    pub target: &'static str,
    pub path: &'static str,
    pub cross_compile: &'static str,
}

/// The build identity every kernel kbot builds gets (`make`'s environment):
/// the version string `uname -v` prints and the boot log shows is the same
/// for every build of a commit, so two builds of it boot the same bytes.
pub const BUILD_ENV: &[(&str, &str)] = &[
    ("KBUILD_BUILD_USER", "kbot"),
    ("KBUILD_BUILD_HOST", "kbot-agent"),
    ("KBUILD_BUILD_TIMESTAMP", "Thu Jan  1 00:00:00 UTC 2026"),
    ("KBUILD_BUILD_VERSION", "1"),
];

/// [`KernelImage`] of the guest arches kbot boots (`x86_64`, `aarch64`).
pub fn kernel_image(arch: &str) -> Option<KernelImage> {
    match arch {
        "x86_64" => Some(KernelImage {
            make_arch: "x86_64",
            target: "bzImage",
            path: "arch/x86/boot/bzImage",
            cross_compile: "x86_64-linux-gnu-",
        }),
        "aarch64" => Some(KernelImage {
            make_arch: "arm64",
            target: "Image",
            path: "arch/arm64/boot/Image",
            cross_compile: "aarch64-linux-gnu-",
        }),
        _ => None,
    }
}

/// Hardware fingerprint of a test machine, read by the agent from /proc and /sys.
///
/// Jobs are matched to agents by `tbox_group` and by these facts, and the
/// report's `test machine:` line is built from them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
