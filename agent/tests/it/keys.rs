//! The build key the areas' stand-in kernels are built under.

use kbot_agent::build_cache::{BuildKey, DEFAULT_ARCH};
use kbot_api::agent::KconfigSpec;

/// `commit` built from tinyconfig with gcc for x86_64.
pub fn tiny(commit: &str) -> BuildKey {
    BuildKey {
        commit: commit.to_string(),
        kconfig: KconfigSpec {
            name: "tiny".into(),
            base: Some("tinyconfig".into()),
            fragment: String::new(),
            full: None,
        },
        compiler: "gcc".into(),
        arch: DEFAULT_ARCH.into(),
    }
}
