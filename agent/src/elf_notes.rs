//! The GNU build id of a kernel: from the built vmlinux (its SHT_NOTE
//! sections) and from the running kernel (/sys/kernel/notes), so an agent
//! that kexec'd can tell it runs the kernel it built.

use std::path::Path;

use crate::error::{AgentError, Result};

const NT_GNU_BUILD_ID: u32 = 3;
const SHT_NOTE: u32 = 7;

/// The build id in a raw ELF note blob (little-endian), as hex.
pub fn build_id_in_notes(mut notes: &[u8]) -> Option<String> {
    let u32_at = |b: &[u8], i: usize| {
        b.get(i..i + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    while notes.len() >= 12 {
        let namesz = u32_at(notes, 0)? as usize;
        let descsz = u32_at(notes, 4)? as usize;
        let kind = u32_at(notes, 8)?;
        let name_end = 12 + namesz;
        let desc_start = 12 + align4(namesz);
        let desc_end = desc_start + descsz;
        let name = notes.get(12..name_end)?;
        let desc = notes.get(desc_start..desc_end)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return Some(hex::encode(desc));
        }
        notes = notes.get(desc_start + align4(descsz)..)?;
    }
    None
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The build id of an ELF64 little-endian file (vmlinux), if it has one.
pub fn build_id_of_file(path: &Path) -> Result<Option<String>> {
    let data = std::fs::read(path)
        .map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
    Ok(build_id_of_elf(&data))
}

pub fn build_id_of_elf(data: &[u8]) -> Option<String> {
    if data.get(0..4)? != b"\x7fELF" || *data.get(4)? != 2 || *data.get(5)? != 1 {
        return None;
    }
    let u16_at = |i: usize| {
        data.get(i..i + 2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
    };
    let u32_at = |i: usize| {
        data.get(i..i + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    let u64_at = |i: usize| {
        data.get(i..i + 8)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .and_then(|b| usize::try_from(u64::from_le_bytes(b)).ok())
    };
    let shoff = u64_at(0x28)?;
    let shentsize = u16_at(0x3A)?;
    let shnum = u16_at(0x3C)?;
    (0..shnum).find_map(|i| {
        let sh = shoff + i * shentsize;
        if u32_at(sh + 4)? != SHT_NOTE {
            return None;
        }
        let (off, size) = (u64_at(sh + 0x18)?, u64_at(sh + 0x20)?);
        build_id_in_notes(data.get(off..off + size)?)
    })
}

/// The running kernel's build id.
pub fn running_build_id() -> Option<String> {
    std::fs::read("/sys/kernel/notes")
        .ok()
        .and_then(|n| build_id_in_notes(&n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_le_bytes());
        v.extend((desc.len() as u32).to_le_bytes());
        v.extend(kind.to_le_bytes());
        v.extend(name);
        v.resize(12 + align4(name.len()), 0);
        v.extend(desc);
        v.resize(v.len() + (align4(desc.len()) - desc.len()), 0);
        v
    }

    #[test]
    fn the_gnu_build_id_note_is_found_after_others() {
        let mut blob = note(b"Xen\0", 1, &[1, 2, 3]);
        blob.extend(note(b"GNU\0", 3, &[0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(build_id_in_notes(&blob), Some("deadbeef".to_string()));
        assert_eq!(build_id_in_notes(&blob[..10]), None);
    }

    /// The agent binary itself is an ELF file that carries a build id when
    /// the linker adds one; the running kernel's notes must parse when present.
    #[test]
    fn real_elf_files_and_kernel_notes_parse() -> Result<()> {
        let exe = std::env::current_exe().map_err(|e| AgentError::io("current_exe", e))?;
        let ok = build_id_of_file(&exe)?.is_none_or(|id| id.len() >= 16);
        assert!(ok);
        if let Ok(n) = std::fs::read("/sys/kernel/notes") {
            let id = build_id_in_notes(&n);
            assert!(
                id.is_some_and(|i| i.len() == 40),
                "running kernel has a SHA-1 build id"
            );
        }
        Ok(())
    }
}
