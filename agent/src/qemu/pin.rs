//! Pinning a wall-clock guest's vCPU threads, each to a host CPU of its own,
//! found by the thread names QEMU gives them (`CPU 1/TCG`).

use std::time::{Duration, Instant};

use super::config::{Clock, QemuConfig};
use crate::error::{AgentError, Result};

/// Pins the vCPU threads of QEMU `pid` (wall clock), or says why not.
pub(super) fn pin(cfg: &QemuConfig, pid: u32) -> String {
    match cfg.clock {
        Clock::Icount { .. } => {
            "not pinned: under icount the guest's timing does not depend on host placement"
                .to_string()
        }
        Clock::Wall if !cfg.pin_vcpus => "not pinned (configured)".to_string(),
        Clock::Wall => match pin_vcpu_threads(pid, cfg.topology.cpus()) {
            Ok(note) => note,
            Err(e) => {
                tracing::warn!(error = %e, "could not pin the vCPU threads");
                format!("not pinned: {e}")
            }
        },
    }
}

/// vCPU index of a QEMU thread name (`CPU 1/TCG`, `CPU 0/KVM`).
fn vcpu_index(comm: &str) -> Option<u32> {
    comm.trim()
        .strip_prefix("CPU ")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Which host CPU each vCPU thread goes to: vCPU n on the n-th CPU the
/// agent may use, wrapping when the guest has more vCPUs than that.
fn vcpu_pins(threads: &[(i32, String)], host_cpus: &[usize]) -> Vec<(i32, u32, usize)> {
    if host_cpus.is_empty() {
        return Vec::new();
    }
    let mut pins: Vec<(i32, u32, usize)> = threads
        .iter()
        .filter_map(|(tid, comm)| {
            let n = vcpu_index(comm)?;
            Some((*tid, n, host_cpus[n as usize % host_cpus.len()]))
        })
        .collect();
    pins.sort_by_key(|p| p.1);
    pins
}

/// The threads of process `pid` with their names.
fn threads_of(pid: u32) -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((tid, comm.trim().to_string()))
        })
        .collect()
}

/// Pins the `vcpus` vCPU threads of QEMU `pid` to host CPUs (waiting up to
/// 5 s for QEMU to create them) and says where they went.
fn pin_vcpu_threads(pid: u32, vcpus: u32) -> Result<String> {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let allowed = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| AgentError::Config(format!("sched_getaffinity: {e}")))?;
    let host_cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let pins = loop {
        let pins = vcpu_pins(&threads_of(pid), &host_cpus);
        if pins.len() >= vcpus as usize || Instant::now() >= deadline {
            break pins;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if pins.is_empty() {
        return Err(AgentError::Config(format!(
            "no vCPU threads (`CPU n/...`) found in QEMU process {pid}"
        )));
    }
    let mut placed = Vec::new();
    for (tid, vcpu, cpu) in pins {
        let mut set = CpuSet::new();
        set.set(cpu)
            .map_err(|e| AgentError::Config(format!("CPU {cpu}: {e}")))?;
        sched_setaffinity(Pid::from_raw(tid), &set)
            .map_err(|e| AgentError::Config(format!("pinning vCPU {vcpu}: {e}")))?;
        placed.push(format!("vCPU {vcpu} -> host CPU {cpu}"));
    }
    Ok(format!("vCPU threads pinned: {}", placed.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcpu_threads_go_to_their_own_host_cpus() {
        let threads = vec![
            (100, "qemu-system-x86".to_string()),
            (103, "CPU 1/TCG".to_string()),
            (101, "CPU 0/TCG".to_string()),
            (104, "CPU 2/KVM".to_string()),
            (102, "worker".to_string()),
        ];
        assert_eq!(
            vcpu_pins(&threads, &[2, 5]),
            vec![(101, 0, 2), (103, 1, 5), (104, 2, 2)]
        );
        assert!(vcpu_pins(&threads, &[]).is_empty());
        assert_eq!(vcpu_index("ALL CPUs/TCG"), None);
    }
}
