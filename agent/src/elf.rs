//! Start-up check of the binaries the qemu backend puts into a guest's
//! initramfs (kbot-bench and busybox): the guest has no dynamic loader and no
//! shared libraries, so each must be a statically linked ELF executable for
//! the guest's machine. A dynamic one boots fine and then fails in /init with
//! `kbot-bench: not found` (the kernel cannot find its interpreter) on every
//! run, so the agent refuses to start instead.
//!
//! The `object` crate reads the ELF header, the program headers and the
//! dynamic segment (ELF32/ELF64, either byte order); this module judges them.

use std::path::Path;

use object::elf::{
    FileHeader32, FileHeader64, DT_NEEDED, DT_NULL, ELFCLASS32, ELFCLASS64, ELFDATA2LSB,
    ELFDATA2MSB, EM_386, EM_AARCH64, EM_ARM, EM_LOONGARCH, EM_MIPS, EM_PPC, EM_PPC64, EM_RISCV,
    EM_S390, EM_X86_64, ET_DYN, ET_EXEC, PT_DYNAMIC, PT_INTERP,
};
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::{Endianness, ReadRef};

use crate::error::{AgentError, Result};

/// ELF `e_machine` values of the architectures QEMU and the kernel build know.
const MACHINES: &[(u16, &str)] = &[
    (EM_386.0, "i386"),
    (EM_MIPS.0, "mips"),
    (EM_PPC.0, "ppc"),
    (EM_PPC64.0, "ppc64"),
    (EM_S390.0, "s390x"),
    (EM_ARM.0, "arm"),
    (EM_X86_64.0, "x86_64"),
    (EM_AARCH64.0, "aarch64"),
    (EM_RISCV.0, "riscv"),
    (EM_LOONGARCH.0, "loongarch64"),
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
        self.e_type == ET_EXEC.0 || self.e_type == ET_DYN.0
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
    let (machine, class) = match arch {
        "x86_64" | "amd64" => (EM_X86_64, None),
        "i386" | "i486" | "i586" | "i686" | "x86" => (EM_386, None),
        "aarch64" | "arm64" => (EM_AARCH64, None),
        "arm" | "armv7" | "armhf" => (EM_ARM, None),
        "riscv64" => (EM_RISCV, Some(64)),
        "riscv32" => (EM_RISCV, Some(32)),
        "ppc64" | "ppc64le" | "powerpc64" => (EM_PPC64, None),
        "ppc" | "powerpc" => (EM_PPC, None),
        "s390x" | "s390" => (EM_S390, None),
        "mips" | "mipsel" | "mips64" | "mips64el" => (EM_MIPS, None),
        "loongarch64" => (EM_LOONGARCH, None),
        _ => return None,
    };
    Some((machine.0, class))
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
    let class_bits = match data.get(4).copied() {
        Some(c) if c == ELFCLASS32.0 => 32,
        Some(c) if c == ELFCLASS64.0 => 64,
        _ => return Err(ElfProblem::Malformed("unknown ELF class")),
    };
    let little_endian = match data.get(5).copied() {
        Some(d) if d == ELFDATA2LSB.0 => true,
        Some(d) if d == ELFDATA2MSB.0 => false,
        _ => return Err(ElfProblem::Malformed("unknown byte order")),
    };
    let endian = if little_endian {
        Endianness::Little
    } else {
        Endianness::Big
    };
    if class_bits == 64 {
        facts::<FileHeader64<Endianness>>(data, endian)
    } else {
        facts::<FileHeader32<Endianness>>(data, endian)
    }
}

/// [`parse`] past the identification bytes, in the file's class (`Elf`) and
/// byte order.
fn facts<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    endian: Endianness,
) -> std::result::Result<ElfFacts, ElfProblem> {
    // Read in place, not with `FileHeader::parse`, which also refuses an
    // `EI_VERSION` other than 1: the kernel's loader ignores that byte.
    let header: &Elf = data
        .read_at(0)
        .map_err(|()| ElfProblem::Malformed("ELF header"))?;
    let mut facts = ElfFacts {
        class_bits: if header.is_type_64() { 64 } else { 32 },
        little_endian: endian == Endianness::Little,
        e_type: header.e_type(endian).0,
        e_machine: header.e_machine(endian).0,
        interpreter: None,
        needed: 0,
    };
    let program_headers = header
        .program_headers(endian, data)
        .map_err(|_| ElfProblem::Malformed("program header"))?;
    for ph in program_headers {
        let p_type = ph.p_type(endian);
        if p_type == PT_INTERP {
            let bytes = ph
                .data(endian, data)
                .map_err(|()| ElfProblem::Malformed("PT_INTERP"))?;
            let path = bytes.split(|b| *b == 0).next().unwrap_or(bytes);
            facts.interpreter = Some(String::from_utf8_lossy(path).into_owned());
        } else if p_type == PT_DYNAMIC {
            let entries = ph
                .dynamic(endian, data)
                .map_err(|_| ElfProblem::Malformed("PT_DYNAMIC"))?
                .unwrap_or_default();
            facts.needed += entries
                .iter()
                .map(|entry| entry.d_tag(endian))
                .take_while(|tag| *tag != DT_NULL)
                .filter(|tag| *tag == DT_NEEDED)
                .count();
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
        f[16..18].copy_from_slice(&ET_EXEC.0.to_be_bytes());
        f[18..20].copy_from_slice(&20u16.to_be_bytes()); // EM_PPC
        f[0x1C..0x20].copy_from_slice(&52u32.to_be_bytes()); // e_phoff
        f[0x2A..0x2C].copy_from_slice(&32u16.to_be_bytes()); // e_phentsize
        f[0x2C..0x2E].copy_from_slice(&1u16.to_be_bytes()); // e_phnum
        f[52..56].copy_from_slice(&PT_INTERP.0.to_be_bytes());
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
