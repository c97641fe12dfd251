//! The GNU build id of a kernel: from the built vmlinux (its SHT_NOTE
//! sections) and from the running kernel (/sys/kernel/notes), so an agent
//! that kexec'd can tell it runs the kernel it built. The `object` crate
//! reads the section headers and walks the notes.

use std::path::Path;

use object::elf::{FileHeader64, ELF_NOTE_GNU, NT_GNU_BUILD_ID};
use object::read::elf::{FileHeader, NoteIterator, SectionHeader};
use object::LittleEndian;

use crate::error::{AgentError, Result};

/// The build id among `notes`, as hex.
fn gnu_build_id(mut notes: NoteIterator<'_, FileHeader64<LittleEndian>>) -> Option<String> {
    // A malformed note ends the walk (`next` then fails) without an id.
    while let Ok(Some(note)) = notes.next() {
        if note.name() == ELF_NOTE_GNU && note.n_type(LittleEndian) == NT_GNU_BUILD_ID {
            return Some(hex::encode(note.desc()));
        }
    }
    None
}

/// The build id in a raw ELF note blob (little-endian), as hex.
pub fn build_id_in_notes(notes: &[u8]) -> Option<String> {
    gnu_build_id(NoteIterator::new(LittleEndian, 4, notes).ok()?)
}

/// The build id of an ELF64 little-endian file (vmlinux), if it has one.
pub fn build_id_of_file(path: &Path) -> Result<Option<String>> {
    let data = std::fs::read(path)
        .map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
    Ok(build_id_of_elf(&data))
}

/// The build id in the SHT_NOTE sections of `data`, an ELF64 little-endian
/// file; `None` for any other file.
pub fn build_id_of_elf(data: &[u8]) -> Option<String> {
    let header = FileHeader64::<LittleEndian>::parse(data).ok()?;
    // `LittleEndian` reads any file as little-endian: refuse a big-endian one.
    let endian = header.endian().ok()?;
    let sections = header.section_headers(endian, data).ok()?;
    sections.iter().find_map(|section| {
        // Not SHT_NOTE (`Ok(None)`), or its data out of the file: next one.
        gnu_build_id(section.notes(endian, data).ok()??)
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

    fn align4(n: usize) -> usize {
        (n + 3) & !3
    }

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
