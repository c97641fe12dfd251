//! The guest architectures of the qemu backend: what differs between an
//! x86_64 guest (`qemu-system-x86_64`, the PC machine, 8250 serial ports) and
//! an aarch64 guest (`qemu-system-aarch64 -M virt`, a PL011 console and a
//! virtio console as the results channel), and how its kernel is built
//! (`ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-` on an x86_64 host).

use std::path::Path;

use clap::ValueEnum;

/// The architecture of the machine under test, as `uname -m` (and LKP's
/// `arch:`) names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GuestArch {
    #[value(name = "x86_64")]
    X86_64,
    #[value(name = "aarch64")]
    Aarch64,
}

/// Where an aarch64 static busybox goes (scripts/install-test-deps puts
/// Debian's `busybox-static:arm64` there).
pub const AARCH64_BUSYBOX: &str = "/usr/local/lib/kbot/aarch64/busybox";

/// Where scripts/build-guest-perf installs the guests' static perf.
const GUEST_PERF_DIR: &str = "/usr/local/lib/kbot";

/// The QEMU character device id of the aarch64 results channel.
const RESULTS_CHARDEV: &str = "kbot-results";

/// The x86_64 guest kernel's command line. `oops=panic` and `panic=-1`: a broken
/// kernel ends the VM at once. The rest keeps the guest quiet while it
/// measures: `tsc=reliable` stops the clocksource watchdog (a timer every
/// 0.5 s that, under wall-clock TCG, can declare the TSC unstable and switch
/// clocksources in the middle of a run), `nowatchdog` the lockup detectors'
/// per-CPU timers, `audit=0` audit records.
pub const KERNEL_CMDLINE: &str =
    "console=ttyS0 panic=-1 oops=panic rdinit=/init tsc=reliable nowatchdog audit=0";

impl GuestArch {
    /// `uname -m` in the guest.
    pub fn name(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::Aarch64 => "aarch64",
        }
    }

    /// How its kernel is made ([`kbot_core::machine::kernel_image`]).
    fn kernel_image(self) -> kbot_core::machine::KernelImage {
        match kbot_core::machine::kernel_image(self.name()) {
            Some(image) => image,
            None => unreachable!("every GuestArch has a kernel image"),
        }
    }

    /// The kernel build's `ARCH=`.
    pub fn kernel_arch(self) -> &'static str {
        self.kernel_image().make_arch
    }

    /// The kernel build's `CROSS_COMPILE=` on a host of `host_arch`
    /// (`None`: the host's own toolchain).
    pub fn cross_compile(self, host_arch: &str) -> Option<&'static str> {
        (self.name() != host_arch).then(|| self.kernel_image().cross_compile)
    }

    /// The boot image's make target and its path in the object directory.
    pub fn image(self) -> (&'static str, &'static str) {
        let image = self.kernel_image();
        (image.target, image.path)
    }

    /// The QEMU system emulator of this guest.
    pub fn default_qemu(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "qemu-system-x86_64",
            GuestArch::Aarch64 => "qemu-system-aarch64",
        }
    }

    /// QEMU's `-cpu` under TCG (`None`: QEMU's default, qemu64 on x86_64).
    /// cortex-a57 implements the 4K and 64K translation granules and, unlike
    /// `max`, no pointer authentication, which TCG emulates slowly.
    pub fn default_tcg_cpu(self) -> Option<&'static str> {
        match self {
            GuestArch::X86_64 => None,
            GuestArch::Aarch64 => Some("cortex-a57"),
        }
    }

    /// The CPU QEMU's TCG gives the guest when no `-cpu` is given.
    pub fn qemu_default_cpu(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "qemu64",
            // virt's default; never used, as the aarch64 guest always names one.
            GuestArch::Aarch64 => "cortex-a15",
        }
    }

    /// The guest's page size unless configured: what the tbox group's
    /// kconfig builds (qemu-x86_64-*: 4K; qemu-arm64-64k: 64K).
    pub fn default_page_size(self) -> u64 {
        match self {
            GuestArch::X86_64 => 4096,
            GuestArch::Aarch64 => 65536,
        }
    }

    /// The static busybox put into the initramfs unless configured.
    pub fn default_busybox(self) -> &'static Path {
        match self {
            GuestArch::X86_64 => Path::new("/bin/busybox"),
            GuestArch::Aarch64 => Path::new(AARCH64_BUSYBOX),
        }
    }

    /// The static perf of this arch's guests (scripts/build-guest-perf).
    pub fn default_perf(self) -> std::path::PathBuf {
        Path::new(GUEST_PERF_DIR).join(self.name()).join("perf")
    }

    /// The stress-ng tree of this arch's guests
    /// (scripts/build-guest-stress-ng).
    pub fn default_stress_ng(self) -> std::path::PathBuf {
        Path::new(GUEST_PERF_DIR)
            .join(self.name())
            .join("stress-ng")
    }

    /// The kernel console.
    pub fn console(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "ttyS0",
            GuestArch::Aarch64 => "ttyAMA0",
        }
    }

    /// The guest's device of the results channel (/init writes to it).
    pub fn results_device(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "/dev/ttyS1",
            GuestArch::Aarch64 => "/dev/hvc0",
        }
    }

    /// QEMU's machine arguments (`-M`), before the CPU and topology.
    /// aarch64's `virt` puts fresh random `rng-seed` and `kaslr-seed` nodes in
    /// every boot's device tree, and virtio-mmio's ioeventfd serves the
    /// results console on host time: either alone made an exact-clock
    /// guest's results differ boot to boot (bw_pipe 206.2, 197.8, 197.1
    /// MB/s), both off made them identical (BENCHMARKS.md, "Contention").
    pub fn machine_args(self) -> &'static [&'static str] {
        match self {
            GuestArch::X86_64 => &[],
            GuestArch::Aarch64 => &[
                "-M",
                "virt,dtb-randomness=off",
                "-global",
                "virtio-mmio.ioeventfd=off",
            ],
        }
    }

    /// QEMU's console and results-channel arguments: the console on stdio,
    /// the results channel written to `results`. x86_64: the second 8250
    /// port (ttyS1). aarch64: QEMU 7.2's `virt` has one non-secure PL011, so
    /// the results go through a virtio console (hvc0) on virtio-mmio.
    pub fn channel_args(self, results: &Path) -> Vec<String> {
        let mut args = vec!["-serial".to_string(), "stdio".to_string()];
        match self {
            GuestArch::X86_64 => {
                args.extend(["-serial".to_string(), format!("file:{}", results.display())])
            }
            GuestArch::Aarch64 => args.extend([
                "-device".to_string(),
                "virtio-serial-device".to_string(),
                "-chardev".to_string(),
                // QEMU option values escape a comma by doubling it.
                format!(
                    "file,id={RESULTS_CHARDEV},path={}",
                    results.display().to_string().replace(',', ",,")
                ),
                "-device".to_string(),
                format!("virtconsole,chardev={RESULTS_CHARDEV}"),
            ]),
        }
        args
    }

    /// The guest kernel's command line (see [`KERNEL_CMDLINE`] for why each
    /// word is there; `tsc=reliable` is x86's).
    pub fn kernel_cmdline(self) -> &'static str {
        match self {
            GuestArch::X86_64 => KERNEL_CMDLINE,
            GuestArch::Aarch64 => {
                "console=ttyAMA0 panic=-1 oops=panic rdinit=/init nowatchdog audit=0"
            }
        }
    }
}

impl std::fmt::Display for GuestArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A page size as bytes (`65536`) or with a binary suffix (`64K`, `64k`,
/// `64KiB`), in the size grammar of [`kbot_core::units`].
pub fn parse_page_size(s: &str) -> Result<u64, String> {
    let n = kbot_core::units::size(s)
        .ok_or_else(|| format!("{s:?} is not a page size (bytes, or e.g. 64K)"))?;
    if n < 4096 || !n.is_power_of_two() {
        return Err(format!(
            "{s:?} is not a page size: a power of two of at least 4096 bytes"
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_parse_as_bytes_or_kib() {
        assert_eq!(parse_page_size("65536"), Ok(65536));
        assert_eq!(parse_page_size("64K"), Ok(65536));
        assert_eq!(parse_page_size("4k"), Ok(4096));
        assert_eq!(parse_page_size("64KiB"), Ok(65536));
        assert!(parse_page_size("3000").is_err());
        assert!(parse_page_size("1K").is_err());
        assert!(parse_page_size("big").is_err());
    }

    #[test]
    fn each_arch_names_its_toolchain_image_and_devices() {
        let a = GuestArch::Aarch64;
        assert_eq!(a.kernel_arch(), "arm64");
        assert_eq!(a.cross_compile("x86_64"), Some("aarch64-linux-gnu-"));
        assert_eq!(a.cross_compile("aarch64"), None);
        assert_eq!(GuestArch::X86_64.cross_compile("x86_64"), None);
        assert_eq!(a.image(), ("Image", "arch/arm64/boot/Image"));
        assert_eq!(a.default_qemu(), "qemu-system-aarch64");
        assert!(a.kernel_cmdline().starts_with("console=ttyAMA0 "));
        assert!(!a.kernel_cmdline().contains("tsc="));
        let ch = a.channel_args(Path::new("/r/a,b.txt")).join(" ");
        assert_eq!(
            ch,
            "-serial stdio -device virtio-serial-device -chardev \
             file,id=kbot-results,path=/r/a,,b.txt -device virtconsole,chardev=kbot-results"
        );
        assert_eq!(
            GuestArch::X86_64
                .channel_args(Path::new("/r/results.txt"))
                .join(" "),
            "-serial stdio -serial file:/r/results.txt"
        );
    }
}
