//! Host tuning around a measured run: the cpufreq governor set to
//! `performance` where cpufreq exists, and restored afterwards. What could
//! not be set is recorded, never silently skipped.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The governors changed, restored on drop.
pub struct Tuning {
    restore: Vec<(PathBuf, String)>,
    pub notes: BTreeMap<String, String>,
}

impl Tuning {
    /// Applies `governor` (the job's `cpufreq_governor`, default
    /// `performance`) to every CPU under `cpu_root` (/sys/devices/system/cpu).
    pub fn apply(cpu_root: &Path, governor: &str) -> Tuning {
        let mut t = Tuning {
            restore: Vec::new(),
            notes: BTreeMap::new(),
        };
        let files: Vec<PathBuf> = fs::read_dir(cpu_root)
            .map(|l| {
                l.flatten()
                    .map(|e| e.path().join("cpufreq/scaling_governor"))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        if files.is_empty() {
            t.notes.insert(
                "cpufreq_governor".into(),
                "unavailable (no cpufreq on this machine)".into(),
            );
            return t;
        }
        let mut failed = 0;
        for f in &files {
            let before = fs::read_to_string(f).unwrap_or_default().trim().to_string();
            if before == governor {
                continue;
            }
            match fs::write(f, governor) {
                Ok(()) => t.restore.push((f.clone(), before)),
                Err(_) => failed += 1,
            }
        }
        let note = if failed == 0 {
            governor.to_string()
        } else {
            format!(
                "{governor} on {} of {} CPUs (could not write the rest)",
                files.len() - failed,
                files.len()
            )
        };
        t.notes.insert("cpufreq_governor".into(), note);
        t
    }
}

impl Drop for Tuning {
    fn drop(&mut self) {
        for (f, before) in &self.restore {
            if fs::write(f, before).is_err() {
                tracing::warn!(file = %f.display(), "could not restore the cpufreq governor");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn governors_are_set_and_restored() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        for cpu in ["cpu0", "cpu1"] {
            fs::create_dir_all(root.path().join(cpu).join("cpufreq"))?;
            fs::write(
                root.path().join(cpu).join("cpufreq/scaling_governor"),
                "powersave\n",
            )?;
        }
        let gov =
            |cpu: &str| fs::read_to_string(root.path().join(cpu).join("cpufreq/scaling_governor"));
        {
            let t = Tuning::apply(root.path(), "performance");
            assert_eq!(t.notes["cpufreq_governor"], "performance");
            assert_eq!(gov("cpu1")?, "performance");
        }
        assert_eq!(gov("cpu0")?, "powersave");
        Ok(())
    }

    #[test]
    fn a_machine_without_cpufreq_says_so() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        fs::create_dir_all(root.path().join("cpu0"))?;
        let t = Tuning::apply(root.path(), "performance");
        assert!(t.notes["cpufreq_governor"].starts_with("unavailable"));
        Ok(())
    }
}
