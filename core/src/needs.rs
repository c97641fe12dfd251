//! What hardware an atomic job needs, and whether a machine has it.
//!
//! LKP's job files say it with `arch` (the test box's `uname -m`),
//! `need_cpu` (logical CPUs) and `need_memory` (LKP's filters compare it
//! with the box's memory); kbot adds `need_page_size` (LKP has no key for
//! it: its jobs ask for a kernel config). The scheduler leases a job only to
//! an agent whose fingerprint ([`Hardware`], for the qemu backend the guest
//! it boots) satisfies all of them; [`Needs::unmet`] says why one does not.

use serde::{Deserialize, Serialize};

use crate::machine::Hardware;
use crate::units::size;
use crate::{Error, Result};

/// Sizes are written as [`crate::units`] reads them; re-exported for the
/// callers that print a machine's memory and page size.
pub use crate::units::human_size;

/// The job-file keys that become [`Needs`].
pub const NEED_KEYS: &[&str] = &["arch", "need_cpu", "need_memory", "need_page_size"];

/// An atomic job's hardware requirements; `None` is "any".
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Needs {
    /// `uname -m` of the machine under test: `x86_64`, `aarch64`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// At least this many logical CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// At least this much memory, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Exactly this base page size, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u64>,
}

impl Needs {
    pub fn is_empty(&self) -> bool {
        *self == Needs::default()
    }

    /// Sets the requirement `key` (one of [`NEED_KEYS`]) from its job-file
    /// value, checked.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        match key {
            "arch" => self.arch = Some(arch(value)?),
            "need_cpu" => {
                self.cpus = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| invalid(key, value, "expected a number of CPUs"))?,
                )
            }
            "need_memory" => {
                self.memory_bytes = Some(
                    size(value)
                        .ok_or_else(|| invalid(key, value, "expected a size like 512M or 4G"))?,
                )
            }
            "need_page_size" => {
                self.page_size =
                    Some(size(value).filter(|n| n.is_power_of_two()).ok_or_else(|| {
                        invalid(key, value, "expected a power-of-two size like 4K or 64K")
                    })?)
            }
            _ => return Err(invalid(key, value, "not a hardware requirement")),
        }
        Ok(())
    }

    /// The requirements as job-file entries, in [`NEED_KEYS`] order.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(a) = &self.arch {
            out.push(("arch", a.clone()));
        }
        if let Some(n) = self.cpus {
            out.push(("need_cpu", n.to_string()));
        }
        if let Some(b) = self.memory_bytes {
            out.push(("need_memory", human_size(b)));
        }
        if let Some(p) = self.page_size {
            out.push(("need_page_size", human_size(p)));
        }
        out
    }

    /// What `hw` lacks, one phrase per unmet requirement; empty when it
    /// satisfies them all.
    pub fn unmet(&self, hw: &Hardware) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(a) = self.arch.as_deref().filter(|a| *a != hw.arch) {
            out.push(format!("arch {a} (has {})", hw.arch));
        }
        if let Some(n) = self.cpus.filter(|n| *n > hw.threads) {
            out.push(format!("{n} CPUs (has {})", hw.threads));
        }
        if let Some(b) = self.memory_bytes.filter(|b| *b > hw.memory_bytes) {
            out.push(format!(
                "{} memory (has {})",
                human_size(b),
                human_size(hw.memory_bytes)
            ));
        }
        if let Some(p) = self.page_size.filter(|p| *p != hw.page_size) {
            out.push(format!(
                "{} pages (has {})",
                human_size(p),
                human_size(hw.page_size)
            ));
        }
        out
    }

    /// One line for people: `arch aarch64, 64K pages`, or `any machine`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .entries()
            .into_iter()
            .map(|(k, v)| match k {
                "arch" => format!("arch {v}"),
                "need_cpu" => format!("{v} CPUs"),
                "need_memory" => format!("{v} memory"),
                _ => format!("{v} pages"),
            })
            .collect();
        if parts.is_empty() {
            "any machine".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// `uname -m` spellings; Debian's and the kernel's names of the same
/// architectures are taken as aliases, so `arch: arm64` means `aarch64`.
fn arch(value: &str) -> Result<String> {
    let canonical = match value {
        "arm64" => "aarch64",
        "amd64" | "x86-64" => "x86_64",
        other => other,
    };
    let ok = !canonical.is_empty()
        && canonical.len() <= 32
        && canonical
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(canonical.to_string())
    } else {
        Err(invalid(
            "arch",
            value,
            "expected an architecture as uname -m prints it (x86_64, aarch64, ...)",
        ))
    }
}

fn invalid(key: &str, value: &str, reason: &str) -> Error {
    Error::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw(arch: &str, threads: u32, memory_gib: u64, page_size: u64) -> Hardware {
        Hardware {
            arch: arch.into(),
            cpu_model: "test".into(),
            sockets: 1,
            cores: threads,
            threads,
            numa_nodes: 1,
            memory_bytes: memory_gib << 30,
            page_size,
            microcode: None,
            kernel: "test".into(),
        }
    }

    fn needs(pairs: &[(&str, &str)]) -> Needs {
        let mut n = Needs::default();
        for (k, v) in pairs {
            n.set(k, v).expect("valid requirement");
        }
        n
    }

    #[test]
    fn a_machine_meets_what_it_has_and_says_what_it_lacks() {
        let n = needs(&[
            ("arch", "arm64"),
            ("need_cpu", "2"),
            ("need_memory", "1G"),
            ("need_page_size", "64K"),
        ]);
        assert_eq!(n.arch.as_deref(), Some("aarch64"));
        assert!(n.unmet(&hw("aarch64", 2, 1, 65536)).is_empty());
        assert!(n.unmet(&hw("aarch64", 8, 16, 65536)).is_empty());
        assert_eq!(
            n.unmet(&hw("x86_64", 1, 24, 4096)),
            [
                "arch aarch64 (has x86_64)",
                "2 CPUs (has 1)",
                "64K pages (has 4K)"
            ]
        );
        assert_eq!(n.describe(), "arch aarch64, 2 CPUs, 1G memory, 64K pages");
        assert_eq!(Needs::default().describe(), "any machine");
        assert!(Needs::default()
            .unmet(&hw("riscv64", 1, 1, 4096))
            .is_empty());
    }

    #[test]
    fn bad_requirements_are_refused_with_the_key() {
        let mut n = Needs::default();
        for (k, v) in [
            ("need_cpu", "0"),
            ("need_cpu", "many"),
            ("need_memory", "plenty"),
            ("need_page_size", "3K"),
            ("arch", "x86 64"),
        ] {
            let err = n.set(k, v).expect_err(v).to_string();
            assert!(err.contains(k), "{err}");
        }
        assert!(n.is_empty());
    }

    #[test]
    fn entries_read_back_into_the_same_needs() {
        let n = needs(&[("arch", "x86_64"), ("need_memory", "300M")]);
        let mut again = Needs::default();
        for (k, v) in n.entries() {
            again.set(k, &v).expect("entry reads back");
        }
        assert_eq!(again, n);
    }
}
