//! The hardware fingerprint of this machine, read from /proc and /sys.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use kbot_core::machine::Hardware;

use crate::error::{AgentError, Result};

/// Reads the fingerprint of the running machine.
pub fn read_host() -> Result<Hardware> {
    let cpuinfo = read("/proc/cpuinfo")?;
    let meminfo = read("/proc/meminfo")?;
    let cpu = parse_cpuinfo(&cpuinfo);
    let uts = nix::sys::utsname::uname().map_err(|e| AgentError::io("uname", e.into()))?;
    let page_size = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(4096);
    Ok(Hardware {
        arch: uts.machine().to_string_lossy().into_owned(),
        cpu_model: cpu.model,
        sockets: cpu.sockets.max(1),
        cores: cpu.cores.max(1),
        threads: cpu.threads.max(1),
        numa_nodes: count_numa_nodes(Path::new("/sys/devices/system/node")).max(1),
        memory_bytes: parse_memtotal(&meminfo)?,
        page_size,
        microcode: cpu.microcode,
        kernel: uts.release().to_string_lossy().into_owned(),
    })
}

fn read(path: &str) -> Result<String> {
    fs::read_to_string(path).map_err(|e| AgentError::io(format!("reading {path}"), e))
}

/// What /proc/cpuinfo tells about the processors.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CpuSummary {
    pub model: String,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub microcode: Option<String>,
}

/// Counts sockets (`physical id`), cores (`physical id`, `core id` pairs) and
/// logical CPUs (`processor` lines). Architectures without those fields
/// (arm64 lists only `processor`) count one socket and one core per CPU.
pub fn parse_cpuinfo(text: &str) -> CpuSummary {
    let mut threads = 0u32;
    let mut model = None;
    let mut microcode = None;
    let mut sockets = BTreeSet::new();
    let mut cores = BTreeSet::new();
    let mut physical = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => {
                threads += 1;
                physical = None;
            }
            "model name" | "Processor" | "cpu model" if model.is_none() => {
                model = Some(value.to_string())
            }
            "microcode" if microcode.is_none() => microcode = Some(value.to_string()),
            "physical id" => {
                sockets.insert(value.to_string());
                physical = Some(value.to_string());
            }
            "core id" => {
                cores.insert((physical.clone().unwrap_or_default(), value.to_string()));
            }
            _ => {}
        }
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    CpuSummary {
        model: model.unwrap_or_else(|| "unknown".to_string()),
        sockets: if sockets.is_empty() {
            1
        } else {
            count(sockets.len())
        },
        cores: if cores.is_empty() {
            threads
        } else {
            count(cores.len())
        },
        threads,
        microcode,
    }
}

/// `MemTotal` of /proc/meminfo in bytes.
pub fn parse_memtotal(text: &str) -> Result<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| AgentError::parse("/proc/meminfo", "no MemTotal line"))
}

/// `node<N>` directories under /sys/devices/system/node (0 when absent).
pub fn count_numa_nodes(dir: &Path) -> u32 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let n = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("node")
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The report's `test machine:` style one-liner.
pub fn describe(hw: &Hardware) -> String {
    let memory = if hw.memory_bytes >= 1 << 30 {
        format!("{}G", hw.memory_bytes >> 30)
    } else {
        format!("{}M", hw.memory_bytes >> 20)
    };
    format!(
        "{} threads {} sockets {} ({} cores) with {memory} memory, {} with {}K pages, kernel {}",
        hw.threads,
        hw.sockets,
        hw.cpu_model,
        hw.cores,
        hw.arch,
        hw.page_size >> 10,
        hw.kernel
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_SOCKETS: &str = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold\nmicrocode\t: 0x2007006\nphysical id\t: 0\ncore id\t\t: 0\n\n\
processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold\nphysical id\t: 0\ncore id\t\t: 0\n\n\
processor\t: 2\nmodel name\t: Intel(R) Xeon(R) Gold\nphysical id\t: 1\ncore id\t\t: 0\n\n\
processor\t: 3\nmodel name\t: Intel(R) Xeon(R) Gold\nphysical id\t: 1\ncore id\t\t: 1\n";

    #[test]
    fn cpuinfo_counts_sockets_cores_and_threads() {
        let s = parse_cpuinfo(TWO_SOCKETS);
        assert_eq!(
            s,
            CpuSummary {
                model: "Intel(R) Xeon(R) Gold".to_string(),
                sockets: 2,
                cores: 3,
                threads: 4,
                microcode: Some("0x2007006".to_string()),
            }
        );
    }

    #[test]
    fn cpuinfo_without_topology_counts_a_core_per_cpu() {
        let s = parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50\n\nprocessor\t: 1\n");
        assert_eq!((s.sockets, s.cores, s.threads), (1, 2, 2));
        assert_eq!(s.model, "unknown");
    }

    #[test]
    fn memtotal_is_in_bytes_and_required() {
        assert_eq!(
            parse_memtotal("MemTotal:       1024 kB\n").ok(),
            Some(1024 * 1024)
        );
        assert!(parse_memtotal("MemFree: 1 kB\n").is_err());
    }

    #[test]
    fn this_machine_has_a_consistent_fingerprint() -> Result<()> {
        let hw = read_host()?;
        assert!(hw.threads >= 1 && hw.cores >= 1 && hw.cores <= hw.threads);
        assert!(hw.sockets <= hw.cores);
        assert!(hw.memory_bytes > 64 << 20);
        assert!(hw.page_size.is_power_of_two());
        let release = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_err(|e| AgentError::io("osrelease", e))?;
        assert_eq!(hw.kernel, release.trim());
        Ok(())
    }
}
