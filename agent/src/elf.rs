//! Start-up check of the binaries the qemu backend puts into a guest's
//! initramfs (kbot-bench and busybox): the guest has no dynamic loader and no
//! shared libraries, so each must be a statically linked ELF executable for
//! the guest's machine. A dynamic one boots fine and then fails in /init with
//! `kbot-bench: not found` (the kernel cannot find its interpreter) on every
//! run, so the agent refuses to start instead.
//!
//! Only the ELF header, the program headers and the dynamic segment are read
//! (ELF32/ELF64, either byte order); no ELF crate is needed for that.

use std::path::Path;

use crate::error::{AgentError, Result};

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;

/// ELF `e_machine` values of the architectures QEMU and the kernel build know.
const MACHINES: &[(u16, &str)] = &[
    (3, "i386"),
    (8, "mips"),
    (20, "ppc"),
    (21, "ppc64"),
    (22, "s390x"),
    (40, "arm"),
    (62, "x86_64"),
    (183, "aarch64"),
    (243, "riscv"),
    (258, "loongarch64"),
];

/// What the check reads from an ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfFacts {
    /// 32 or 64.
    pub class_bits: u8,
    pub little_endian: bool,
    pub e_type: u16,
    pub e_machine: u16,
    /// The PT_INTERP path (the dynamic loader), if any.
    pub interpreter: Option<String>,
    /// DT_NEEDED entries (shared libraries), counted.
    pub needed: usize,
}

impl ElfFacts {
    /// Runs with nothing but the kernel: no loader, no shared libraries.
    /// Static-pie executables have a dynamic segment (for their own
    /// relocations) but neither of those, so they count as static.
    pub fn is_static(&self) -> bool {
        self.interpreter.is_none() && self.needed == 0
    }

    pub fn is_executable(&self) -> bool {
        matches!(self.e_type, ET_EXEC | ET_DYN)
    }

    /// The architecture name of `e_machine` (`x86_64`, `aarch64`, ...).
    pub fn machine_name(&self) -> String {
        machine_name(self.e_machine, self.class_bits)
    }
}

fn machine_name(e_machine: u16, class_bits: u8) -> String {
    match MACHINES.iter().find(|(m, _)| *m == e_machine) {
        Some((_, "riscv")) => format!("riscv{class_bits}"),
        Some((_, name)) => (*name).to_string(),
        None => format!("ELF machine {e_machine}"),
    }
}

/// The `e_machine` (and class, where one value serves both) of a guest arch
/// as QEMU names it (`qemu-system-<arch>`) or the kernel's `ARCH=` does.
pub fn machine_of_arch(arch: &str) -> Option<(u16, Option<u8>)> {
    Some(match arch {
        "x86_64" | "amd64" => (62, None),
        "i386" | "i486" | "i586" | "i686" | "x86" => (3, None),
        "aarch64" | "arm64" => (183, None),
        "arm" | "armv7" | "armhf" => (40, None),
        "riscv64" => (243, Some(64)),
        "riscv32" => (243, Some(32)),
        "ppc64" | "ppc64le" | "powerpc64" => (21, None),
        "ppc" | "powerpc" => (20, None),
        "s390x" | "s390" => (22, None),
        "mips" | "mipsel" | "mips64" | "mips64el" => (8, None),
        "loongarch64" => (258, None),
        _ => return None,
    })
}

/// Why a file cannot go into the initramfs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfProblem {
    #[error("not an ELF file ({0})")]
    NotElf(String),
    #[error("a truncated or malformed ELF file ({0})")]
    Malformed(&'static str),
    #[error("an ELF file of type {0}, not an executable")]
    NotExecutable(u16),
    #[error(
        "dynamically linked (interpreter {}, shared libraries needed: {needed}): \
         the guest's initramfs has no dynamic loader",
        or_none(.interpreter)
    )]
    Dynamic {
        interpreter: Option<String>,
        needed: usize,
    },
    #[error("built for {found}, but the guest is {guest}")]
    WrongArch { found: String, guest: String },
}

fn or_none(interpreter: &Option<String>) -> &str {
    interpreter.as_deref().unwrap_or("none")
}

/// Reads the ELF facts of `data`.
pub fn parse(data: &[u8]) -> std::result::Result<ElfFacts, ElfProblem> {
    if data.get(..4) != Some(b"\x7fELF".as_slice()) {
        let head = String::from_utf8_lossy(data.get(..16).unwrap_or(data)).into_owned();
        return Err(ElfProblem::NotElf(format!("starts with {head:?}")));
    }
    let class_bits = match data.get(4) {
        Some(1) => 32,
        Some(2) => 64,
        _ => return Err(ElfProblem::Malformed("unknown ELF class")),
    };
    let r = Reader {
        data,
        little: match data.get(5) {
            Some(1) => true,
            Some(2) => false,
            _ => return Err(ElfProblem::Malformed("unknown byte order")),
        },
        wide: class_bits == 64,
    };
    let header = "ELF header";
    let e_type = r.u16(16).ok_or(ElfProblem::Malformed(header))?;
    let e_machine = r.u16(18).ok_or(ElfProblem::Malformed(header))?;
    let (phoff, phentsize, phnum) = if r.wide {
        (r.u64(0x20), r.u16(0x36), r.u16(0x38))
    } else {
        (r.u32(0x1C).map(u64::from), r.u16(0x2A), r.u16(0x2C))
    };
    let (phoff, phentsize, phnum) = match (phoff, phentsize, phnum) {
        (Some(o), Some(s), Some(n)) => (o, u64::from(s), u64::from(n)),
        _ => return Err(ElfProblem::Malformed(header)),
    };
    let mut facts = ElfFacts {
        class_bits,
        little_endian: r.little,
        e_type,
        e_machine,
        interpreter: None,
        needed: 0,
    };
    let ph_problem = ElfProblem::Malformed("program header");
    for i in 0..phnum {
        let ph = i
            .checked_mul(phentsize)
            .and_then(|o| o.checked_add(phoff))
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(ph_problem.clone())?;
        let p_type = r.u32(ph).ok_or(ph_problem.clone())?;
        let (offset, size) = if r.wide {
            (r.u64(ph + 8), r.u64(ph + 0x20))
        } else {
            (r.u32(ph + 4).map(u64::from), r.u32(ph + 16).map(u64::from))
        };
        let (Some(offset), Some(size)) = (offset, size) else {
            return Err(ph_problem);
        };
        match p_type {
            PT_INTERP => {
                let bytes = r
                    .slice(offset, size)
                    .ok_or(ElfProblem::Malformed("PT_INTERP"))?;
                let path = bytes.split(|b| *b == 0).next().unwrap_or(bytes);
                facts.interpreter = Some(String::from_utf8_lossy(path).into_owned());
            }
            PT_DYNAMIC => {
                let dynamic = r
                    .slice(offset, size)
                    .ok_or(ElfProblem::Malformed("PT_DYNAMIC"))?;
                facts.needed += r.needed_entries(dynamic);
            }
            _ => {}
        }
    }
    Ok(facts)
}

/// Checks that `data` can run as a guest binary on `guest_arch`.
pub fn check_guest_binary(
    data: &[u8],
    guest_arch: &str,
) -> std::result::Result<ElfFacts, ElfProblem> {
    let facts = parse(data)?;
    if !facts.is_executable() {
        return Err(ElfProblem::NotExecutable(facts.e_type));
    }
    if !facts.is_static() {
        return Err(ElfProblem::Dynamic {
            interpreter: facts.interpreter.clone(),
            needed: facts.needed,
        });
    }
    let arch_ok = match machine_of_arch(guest_arch) {
        Some((machine, class)) => {
            machine == facts.e_machine && class.is_none_or(|c| c == facts.class_bits)
        }
        // An arch this table does not know: compare names.
        None => facts.machine_name() == guest_arch,
    };
    if !arch_ok {
        return Err(ElfProblem::WrongArch {
            found: facts.machine_name(),
            guest: guest_arch.to_string(),
        });
    }
    Ok(facts)
}

/// The start-up check of one initramfs binary: `what` names it and `hint`
/// says how to get a good one, both for the refusal message.
pub fn require_guest_binary(
    what: &str,
    path: &Path,
    guest_arch: &str,
    hint: &str,
) -> Result<ElfFacts> {
    let data = std::fs::read(path).map_err(|e| {
        AgentError::Config(format!(
            "{what} for the guest's initramfs, {}, cannot be read ({e}); {hint}",
            path.display()
        ))
    })?;
    let facts = check_guest_binary(&data, guest_arch).map_err(|problem| {
        AgentError::Config(format!(
            "{what} for the guest's initramfs, {}, is {problem}; {hint}",
            path.display()
        ))
    })?;
    tracing::info!(
        binary = what,
        path = %path.display(),
        arch = %facts.machine_name(),
        "static guest binary checked"
    );
    Ok(facts)
}

/// The guest architecture a QEMU binary emulates, from its name
/// (`qemu-system-x86_64` -> `x86_64`).
pub fn qemu_arch(qemu: &Path) -> Option<String> {
    qemu.file_name()?
        .to_str()?
        .strip_prefix("qemu-system-")
        .filter(|a| !a.is_empty())
        .map(str::to_string)
}

/// Bounds-checked reads in the file's class and byte order.
struct Reader<'a> {
    data: &'a [u8],
    little: bool,
    wide: bool,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        let end = at.checked_add(N)?;
        self.data.get(at..end)?.try_into().ok()
    }

    fn u16(&self, at: usize) -> Option<u16> {
        let b = self.bytes::<2>(at)?;
        Some(if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    }

    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.bytes::<4>(at)?;
        Some(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn u64(&self, at: usize) -> Option<u64> {
        let b = self.bytes::<8>(at)?;
        Some(if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }

    /// The class-sized word at `at` (ELF64: 8 bytes, ELF32: 4).
    fn word(&self, at: usize) -> Option<u64> {
        if self.wide {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }

    fn slice(&self, offset: u64, size: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        self.data.get(start..end)
    }

    /// DT_NEEDED entries of a dynamic segment, up to DT_NULL.
    fn needed_entries(&self, dynamic: &[u8]) -> usize {
        let sub = Reader {
            data: dynamic,
            little: self.little,
            wide: self.wide,
        };
        let entry = if self.wide { 16 } else { 8 };
        let half = entry / 2;
        let mut needed = 0;
        for at in (0..dynamic.len() / entry).map(|i| i * entry) {
            match sub.word(at) {
                Some(DT_NULL) | None => break,
                Some(DT_NEEDED) if sub.word(at + half).is_some() => needed += 1,
                Some(_) => {}
            }
        }
        needed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn read(p: &Path) -> Vec<u8> {
        std::fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
    }

    /// The static kbot-bench that scripts/build-kbot-bench-static builds.
    fn static_kbot_bench() -> Option<PathBuf> {
        static_kbot_bench_for("x86_64")
    }

    /// The static kbot-bench of `arch` (`--arch aarch64` for the other).
    fn static_kbot_bench_for(arch: &str) -> Option<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        ["release", "debug"]
            .iter()
            .map(|p| {
                target
                    .join(format!("{arch}-unknown-linux-gnu"))
                    .join(p)
                    .join("kbot-bench")
            })
            .find(|p| p.is_file())
    }

    fn host_arch() -> &'static str {
        std::env::consts::ARCH
    }

    #[test]
    fn bin_sh_is_dynamic_and_refused() {
        // /bin/sh is dash or bash from the distribution: dynamically linked.
        let sh = std::fs::canonicalize("/bin/sh").expect("/bin/sh exists");
        let facts = parse(&read(&sh)).expect("/bin/sh is ELF");
        assert!(facts.is_executable());
        let interp = facts.interpreter.clone().expect("/bin/sh has PT_INTERP");
        assert!(interp.contains("ld-"), "interpreter {interp}");
        assert!(facts.needed >= 1, "/bin/sh needs libc: {facts:?}");
        assert!(!facts.is_static());
        assert_eq!(facts.machine_name(), host_arch());
        match check_guest_binary(&read(&sh), host_arch()) {
            Err(ElfProblem::Dynamic { interpreter, .. }) => {
                assert_eq!(interpreter.as_deref(), Some(interp.as_str()))
            }
            other => panic!("/bin/sh must be refused as dynamic, got {other:?}"),
        }
    }

    #[test]
    fn the_static_kbot_bench_passes_and_only_for_its_arch() {
        let Some(bench) = static_kbot_bench() else {
            crate::process::skip_outside_ci(
                "no static kbot-bench: run scripts/build-kbot-bench-static",
            );
            return;
        };
        let data = read(&bench);
        let facts = check_guest_binary(&data, "x86_64").expect("the static kbot-bench passes");
        assert!(facts.is_static() && facts.class_bits == 64 && facts.little_endian);
        assert_eq!(facts.interpreter, None);
        assert_eq!(
            check_guest_binary(&data, "aarch64"),
            Err(ElfProblem::WrongArch {
                found: "x86_64".into(),
                guest: "aarch64".into()
            })
        );
        assert!(matches!(
            check_guest_binary(&data, "i386"),
            Err(ElfProblem::WrongArch { .. })
        ));
    }

    /// The cross-built aarch64 kbot-bench (scripts/build-kbot-bench-static
    /// --arch aarch64) is a static aarch64 executable, refused for x86_64.
    #[test]
    fn the_static_aarch64_kbot_bench_passes_only_for_aarch64() {
        let Some(bench) = static_kbot_bench_for("aarch64") else {
            crate::process::skip_outside_ci(
                "no static aarch64 kbot-bench: run scripts/build-kbot-bench-static --arch aarch64",
            );
            return;
        };
        let data = read(&bench);
        let facts = check_guest_binary(&data, "aarch64").expect("the aarch64 kbot-bench passes");
        assert!(facts.is_static() && facts.class_bits == 64 && facts.little_endian);
        assert_eq!(facts.machine_name(), "aarch64");
        assert_eq!(
            check_guest_binary(&data, "x86_64"),
            Err(ElfProblem::WrongArch {
                found: "aarch64".into(),
                guest: "x86_64".into()
            })
        );
    }

    /// A dynamically linked Rust binary (what kbot-up used to pass as
    /// kbot-bench; this test binary is one) is refused with a message that
    /// says how to build the static one.
    #[test]
    fn a_dynamic_rust_binary_is_refused_with_the_fix() {
        let bench = std::env::current_exe().expect("current_exe");
        let err = require_guest_binary("kbot-bench", &bench, "x86_64", "run the script")
            .expect_err("a dynamic binary is refused");
        let msg = err.to_string();
        assert!(msg.contains("dynamically linked"), "{msg}");
        assert!(msg.contains(&bench.display().to_string()), "{msg}");
        assert!(msg.ends_with("run the script"), "{msg}");
    }

    /// The verdict agrees with file(1) on every real binary at hand: the
    /// test binary itself (dynamic), /bin/sh, busybox and the static kbot-bench.
    #[test]
    fn static_or_not_agrees_with_file() {
        if !crate::process::on_path("file") {
            crate::process::skip_outside_ci("file(1) is not installed (scripts/install-test-deps)");
            return;
        }
        let mut binaries = vec![
            std::env::current_exe().expect("current_exe"),
            std::fs::canonicalize("/bin/sh").expect("/bin/sh exists"),
        ];
        binaries.extend(static_kbot_bench());
        binaries.extend(
            ["/bin/busybox", "/usr/bin/busybox"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file()),
        );
        for bin in binaries {
            let out = std::process::Command::new("file")
                .arg("-L")
                .arg(&bin)
                .output()
                .expect("file runs");
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            let file_static = said.contains("statically linked") || said.contains("static-pie");
            let facts = parse(&read(&bin)).expect("a real binary parses");
            assert_eq!(facts.is_static(), file_static, "{}: {said}", bin.display());
        }
    }

    #[test]
    fn a_text_file_and_garbage_are_not_elf() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("kbot-bench");
        std::fs::write(&script, "#!/bin/sh\necho kbot-bench\n").expect("write");
        assert!(matches!(
            check_guest_binary(&read(&script), "x86_64"),
            Err(ElfProblem::NotElf(_))
        ));
        let err = require_guest_binary("kbot-bench", &script, "x86_64", "hint")
            .expect_err("a script is refused");
        assert!(err.to_string().contains("not an ELF file"), "{err}");
        assert!(matches!(parse(b""), Err(ElfProblem::NotElf(_))));
        // An ELF magic with nothing behind it.
        assert!(matches!(
            parse(b"\x7fELF\x02\x01\x01"),
            Err(ElfProblem::Malformed(_))
        ));
        let missing = dir.path().join("absent");
        let err = require_guest_binary("busybox", &missing, "x86_64", "install busybox-static")
            .expect_err("a missing file is refused");
        assert!(err.to_string().contains("cannot be read"), "{err}");
    }

    /// A truncated real binary: the program headers point past the end.
    #[test]
    fn a_truncated_binary_is_malformed() {
        let sh = std::fs::canonicalize("/bin/sh").expect("/bin/sh exists");
        let data = read(&sh);
        assert!(matches!(parse(&data[..70]), Err(ElfProblem::Malformed(_))));
    }

    /// A hand-built big-endian ELF32 header with one PT_INTERP: the reader
    /// follows the file's class and byte order.
    #[test]
    fn elf32_big_endian_headers_parse() {
        let mut f = vec![0u8; 52 + 32 + 16];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 1; // ELFCLASS32
        f[5] = 2; // big endian
        f[16..18].copy_from_slice(&ET_EXEC.to_be_bytes());
        f[18..20].copy_from_slice(&20u16.to_be_bytes()); // EM_PPC
        f[0x1C..0x20].copy_from_slice(&52u32.to_be_bytes()); // e_phoff
        f[0x2A..0x2C].copy_from_slice(&32u16.to_be_bytes()); // e_phentsize
        f[0x2C..0x2E].copy_from_slice(&1u16.to_be_bytes()); // e_phnum
        f[52..56].copy_from_slice(&PT_INTERP.to_be_bytes());
        f[56..60].copy_from_slice(&84u32.to_be_bytes()); // p_offset
        f[68..72].copy_from_slice(&8u32.to_be_bytes()); // p_filesz
        f[84..92].copy_from_slice(b"/lib/ld\0");
        let facts = parse(&f).expect("parses");
        assert_eq!(facts.class_bits, 32);
        assert!(!facts.little_endian);
        assert_eq!(facts.interpreter.as_deref(), Some("/lib/ld"));
        assert_eq!(facts.machine_name(), "ppc");
        assert!(matches!(
            check_guest_binary(&f, "ppc"),
            Err(ElfProblem::Dynamic { .. })
        ));
    }

    #[test]
    fn qemu_binaries_name_their_arch() {
        assert_eq!(
            qemu_arch(Path::new("/usr/bin/qemu-system-x86_64")).as_deref(),
            Some("x86_64")
        );
        assert_eq!(
            qemu_arch(Path::new("qemu-system-aarch64")).as_deref(),
            Some("aarch64")
        );
        assert_eq!(qemu_arch(Path::new("/opt/qemu/bin/my-qemu")), None);
        assert_eq!(machine_of_arch("riscv64"), Some((243, Some(64))));
        assert_eq!(machine_of_arch("sparc"), None);
    }
}
