//! The `qemu` boot backend: boots a built bzImage with the tbox group's
//! topology and the workload's initramfs, watches the console, and reads the
//! results back from the guest's second serial port.
//!
//! One concept per file: `config` (topology, accelerator, clock and the
//! backend's configuration), `run` (the backend: booting, watching QEMU and
//! the host, redoing disturbed runs), `command` (QEMU's command line), `pin`
//! (vCPU pinning), `watch` (the console read while the guest boots, and what
//! watching a boot saw), `kvm`
//! (the KVM probe), `version` (the QEMU release and what it can do under
//! icount), `runas` (the user QEMU runs as and the files it opens)
//! and `assemble` (the guest's output to a result).

mod assemble;
mod command;
mod config;
#[cfg(test)]
mod fixtures;
mod kvm;
mod pin;
mod run;
mod runas;
mod version;
mod watch;

pub use config::{
    guest_topology, Accel, Clock, GuestOutput, QemuConfig, Topology, DEFAULT_CONSOLE_KEEP_KIB,
    DEFAULT_RESULTS_MAX_MIB, ICOUNT_CPUS,
};
pub use run::{BootRecord, QemuBackend};
pub use version::{QemuVersion, ICOUNT_SMP_SINCE};

/// Console lines kept in failure details.
const TAIL_LINES: usize = 40;

/// The initramfs a boot writes in its run directory.
pub const INITRAMFS: &str = "initramfs.cpio";
