//! The kernel configuration of a build: the agent's built-in kconfigs, the
//! fragment merged into `.config` (and what `olddefconfig` dropped of it),
//! the compiler, and the build key of a kernel the server names.

use std::fs;
use std::path::Path;

use kbot_api::agent::KconfigSpec;

use super::append;
use crate::build_cache::BuildKey;
use crate::error::{AgentError, Result};
use crate::process;

/// The compiler binary for a job's `compiler:` (`gcc-12`, `gcc`, `clang-14`).
pub fn compiler_command(name: &str) -> std::result::Result<String, String> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
    if ok && process::on_path(name) {
        Ok(name.to_string())
    } else {
        Err(format!("compiler {name:?} is not installed on this agent"))
    }
}

/// Appends the fragment to .config: kconfig takes the last assignment of a
/// symbol, and `olddefconfig` then resolves dependencies.
pub fn merge_fragment(config: &Path, fragment: &str) -> Result<()> {
    if fragment.trim().is_empty() {
        return Ok(());
    }
    let mut text = fs::read_to_string(config).map_err(|e| AgentError::io("reading .config", e))?;
    text.push_str("\n# kbot fragment\n");
    text.push_str(fragment);
    text.push('\n');
    fs::write(config, text).map_err(|e| AgentError::io("writing .config", e))
}

/// Fragment lines that `olddefconfig` did not keep (unmet dependencies):
/// written to the build log, as merge_config.sh warns.
pub fn unmet_fragment_lines(config: &str, fragment: &str) -> Vec<String> {
    let wanted = fragment
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("CONFIG_") || l.starts_with("# CONFIG_"));
    wanted
        .filter(|l| {
            if let Some(sym) = l
                .strip_prefix("# ")
                .and_then(|r| r.strip_suffix(" is not set"))
            {
                config.lines().any(|c| c.starts_with(&format!("{sym}=")))
            } else {
                !config.lines().any(|c| c.trim() == *l)
            }
        })
        .map(str::to_string)
        .collect()
}

pub(super) fn note_unmet_fragment(config: &Path, fragment: &str, log: &Path) -> Result<()> {
    let text = fs::read_to_string(config).map_err(|e| AgentError::io("reading .config", e))?;
    let unmet = unmet_fragment_lines(&text, fragment);
    if unmet.is_empty() {
        return Ok(());
    }
    append(
        log,
        &format!(
            "kbot: fragment values not in the final .config: {}\n",
            unmet.join(", ")
        ),
    )
}

/// kconfig fragments shipped with the agent (agent/kconfigs/), by name.
const BUILTIN_KCONFIGS: &[(&str, &str)] = &[
    (
        "qemu-x86_64-tiny",
        include_str!("../../kconfigs/qemu-x86_64-tiny.config"),
    ),
    (
        "qemu-x86_64-ci",
        include_str!("../../kconfigs/qemu-x86_64-ci.config"),
    ),
    (
        "qemu-arm64-64k",
        include_str!("../../kconfigs/qemu-arm64-64k.config"),
    ),
    (
        "qemu-x86_64-kexec",
        include_str!("../../kconfigs/qemu-x86_64-kexec.config"),
    ),
];

/// A built-in kconfig: `tinyconfig` plus the named fragment.
pub fn builtin_kconfig(name: &str) -> Option<KconfigSpec> {
    BUILTIN_KCONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, fragment)| KconfigSpec {
            name: n.to_string(),
            base: Some("tinyconfig".to_string()),
            fragment: fragment.to_string(),
            full: None,
        })
}

/// The build key of a kernel the server names (a job's or a build order's):
/// its kconfig as [`effective_kconfig`] reads it.
pub fn server_key(commit: &str, kconfig: &KconfigSpec, compiler: &str, arch: &str) -> BuildKey {
    BuildKey {
        commit: commit.to_string(),
        kconfig: effective_kconfig(kconfig),
        compiler: compiler.to_string(),
        arch: arch.to_string(),
    }
}

/// The server sends a kconfig it has no record of as a bare make target of
/// the same name; for the agent's built-in names that means the built-in.
pub fn effective_kconfig(spec: &KconfigSpec) -> KconfigSpec {
    let bare = spec.full.is_none()
        && spec.fragment.trim().is_empty()
        && spec.base.as_deref().is_none_or(|b| b == spec.name);
    match builtin_kconfig(&spec.name) {
        Some(builtin) if bare => builtin,
        _ => spec.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmet_fragment_values_are_found() {
        let config = "CONFIG_SMP=y\n# CONFIG_NUMA is not set\nCONFIG_KASAN=y\n";
        let frag = "CONFIG_SMP=y\nCONFIG_NUMA=y\n# CONFIG_KASAN is not set\n# comment\n";
        assert_eq!(
            unmet_fragment_lines(config, frag),
            vec!["CONFIG_NUMA=y", "# CONFIG_KASAN is not set"]
        );
    }

    #[test]
    fn the_arm64_kconfig_is_built_in_with_64k_pages() {
        let k = builtin_kconfig("qemu-arm64-64k").expect("built in");
        assert_eq!(k.base.as_deref(), Some("tinyconfig"));
        assert!(k.fragment.contains("CONFIG_ARM64_64K_PAGES=y"));
        assert!(k.fragment.contains("CONFIG_VIRTIO_CONSOLE=y"));
        assert!(k.fragment.contains("CONFIG_SERIAL_AMBA_PL011_CONSOLE=y"));
    }

    #[test]
    fn compilers_must_exist_and_be_plain_names() {
        assert!(compiler_command("sh").is_ok());
        assert!(compiler_command("gcc; rm -rf /").is_err());
        assert!(compiler_command("no-such-compiler-42").is_err());
    }

    #[test]
    fn the_builtin_kconfig_is_the_repository_fragment() {
        let k = builtin_kconfig("qemu-x86_64-tiny");
        assert!(k.is_some_and(
            |k| k.fragment.contains("CONFIG_SMP=y") && k.base.as_deref() == Some("tinyconfig")
        ));
        assert!(builtin_kconfig("x86_64-rhel-9.4").is_none());
        let bare = KconfigSpec {
            name: "qemu-x86_64-ci".into(),
            base: Some("qemu-x86_64-ci".into()),
            fragment: String::new(),
            full: None,
        };
        assert_eq!(effective_kconfig(&bare).base.as_deref(), Some("tinyconfig"));
        let defconfig = KconfigSpec {
            name: "defconfig".into(),
            base: Some("defconfig".into()),
            fragment: String::new(),
            full: None,
        };
        assert_eq!(effective_kconfig(&defconfig), defconfig);
    }
}
