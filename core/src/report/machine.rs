//! The one-line `test machine:` description built from an agent's hardware fingerprint.

use crate::machine::Hardware;

const GIB: u64 = 1 << 30;

/// `224 threads 2 sockets Intel(R) Xeon(R) (Sapphire Rapids) with 128G memory`.
///
/// Memory is rounded to the nearest GiB: the kernel reserves some of the installed
/// memory, and 0-day prints the nominal size (MemTotal of a 128G box reads ~125.6G).
pub fn describe_machine(hw: &Hardware) -> String {
    let threads = plural(hw.threads, "thread");
    let sockets = plural(hw.sockets, "socket");
    let memory = format_memory(hw.memory_bytes);
    let model = hw.cpu_model.trim();
    if model.is_empty() {
        format!("{threads} {sockets} with {memory} memory")
    } else {
        format!("{threads} {sockets} {model} with {memory} memory")
    }
}

fn plural(n: u32, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn format_memory(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{}G", (bytes + GIB / 2) / GIB)
    } else {
        format!("{}M", (bytes + (1 << 19)) >> 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw(threads: u32, sockets: u32, model: &str, memory_bytes: u64) -> Hardware {
        Hardware {
            arch: "x86_64".into(),
            cpu_model: model.into(),
            sockets,
            cores: threads / 2,
            threads,
            numa_nodes: sockets,
            memory_bytes,
            page_size: 4096,
            microcode: None,
            kernel: "6.1.0".into(),
        }
    }

    #[test]
    fn seed_machine_line() {
        let h = hw(224, 2, "Intel(R) Xeon(R) (Sapphire Rapids)", 128 * GIB);
        assert_eq!(
            describe_machine(&h),
            "224 threads 2 sockets Intel(R) Xeon(R) (Sapphire Rapids) with 128G memory"
        );
    }

    #[test]
    fn memtotal_rounds_to_nominal_and_singulars() {
        let h = hw(1, 1, "", 125 * GIB + 600 * (1 << 20));
        assert_eq!(describe_machine(&h), "1 thread 1 socket with 126G memory");
        let small = hw(2, 1, "QEMU Virtual CPU", 512 << 20);
        assert_eq!(
            describe_machine(&small),
            "2 threads 1 socket QEMU Virtual CPU with 512M memory"
        );
    }
}
