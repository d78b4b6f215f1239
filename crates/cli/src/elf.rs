//! What an executable or a library says about MPI in its ELF file: the libraries it needs and
//! the symbols it imports and defines. Only 64-bit little-endian ELF is read (every Linux target
//! of the shim); anything else reads as "not ELF".

use crate::runs::Mpi;
use std::collections::BTreeSet;
use std::path::Path;

const SHT_SYMTAB: u32 = 2;
const SHT_DYNAMIC: u32 = 6;
const SHT_DYNSYM: u32 = 11;
const DT_NEEDED: u64 = 1;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;

#[derive(Debug, Default, PartialEq)]
pub struct Elf {
    /// Has a dynamic section: the dynamic loader, and so `LD_PRELOAD`, takes part.
    pub dynamic: bool,
    /// `DT_NEEDED` entries (sonames).
    pub needed: Vec<String>,
    /// Undefined global symbols of the dynamic symbol table.
    pub imports: BTreeSet<String>,
    /// Global symbols defined in the dynamic or the full symbol table.
    pub defines: BTreeSet<String>,
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    entry_size: usize,
}

fn bytes<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    bytes(data, at).map(u16::from_le_bytes)
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    bytes(data, at).map(u32::from_le_bytes)
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    bytes(data, at).map(u64::from_le_bytes)
}

/// The NUL-terminated string at `at` of a string table.
fn string(data: &[u8], table: &Section, at: usize) -> Option<String> {
    let start = table.offset.checked_add(at)?;
    let end = table.offset.checked_add(table.size)?.min(data.len());
    let text = data.get(start..end)?;
    let len = text.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&text[..len]).into_owned())
}

impl Elf {
    /// `None` if `path` is not a 64-bit little-endian ELF file (a script, say).
    pub fn read(path: &Path) -> Result<Option<Elf>, String> {
        let data =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(Elf::parse(&data))
    }

    fn parse(data: &[u8]) -> Option<Elf> {
        if data.get(..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        let table = usize::try_from(u64_at(data, 0x28)?).ok()?;
        let header_size = usize::from(u16_at(data, 0x3a)?);
        let count = usize::from(u16_at(data, 0x3c)?);
        let sections: Vec<Section> = (0..count)
            .map(|i| {
                let at = table.checked_add(i.checked_mul(header_size)?)?;
                Some(Section {
                    kind: u32_at(data, at + 4)?,
                    offset: usize::try_from(u64_at(data, at + 24)?).ok()?,
                    size: usize::try_from(u64_at(data, at + 32)?).ok()?,
                    link: u32_at(data, at + 40)? as usize,
                    entry_size: usize::try_from(u64_at(data, at + 56)?).ok()?,
                })
            })
            .collect::<Option<_>>()?;
        let entries = |s: &Section, min: usize| {
            let (offset, size) = (s.offset, s.entry_size.max(min));
            (0..s.size / size).map(move |i| offset + i * size)
        };
        let mut elf = Elf::default();
        for section in &sections {
            let strings = sections.get(section.link);
            match section.kind {
                SHT_DYNAMIC => {
                    elf.dynamic = true;
                    for at in entries(section, 16) {
                        if u64_at(data, at)? == DT_NEEDED {
                            let name = usize::try_from(u64_at(data, at + 8)?).ok()?;
                            elf.needed.push(string(data, strings?, name)?);
                        }
                    }
                }
                SHT_DYNSYM | SHT_SYMTAB => {
                    for at in entries(section, 24) {
                        let binding = data.get(at + 4)? >> 4;
                        if binding != STB_GLOBAL && binding != STB_WEAK {
                            continue;
                        }
                        let name = string(data, strings?, u32_at(data, at)? as usize)?;
                        if name.is_empty() {
                            continue;
                        }
                        let defined = u16_at(data, at + 6)? != 0;
                        if defined {
                            elf.defines.insert(name);
                        } else if section.kind == SHT_DYNSYM {
                            elf.imports.insert(name);
                        }
                    }
                }
                _ => {}
            }
        }
        Some(elf)
    }

    /// The MPI whose library this file needs, by soname: MPICH's ABI is major version 12
    /// (`libmpich.so.12`, `libmpi.so.12`, `libmpifort.so.12`), Open MPI's 40 (`libmpi.so.40`,
    /// `libmpi_mpifh.so.40`).
    pub fn mpi(&self) -> Option<Mpi> {
        self.needed.iter().find_map(|soname| {
            if soname.starts_with("libmpich") {
                return Some(Mpi::Mpich);
            }
            if !soname.starts_with("libmpi") {
                return None;
            }
            match soname.rsplit_once(".so.")?.1.split('.').next()? {
                "12" => Some(Mpi::Mpich),
                "40" => Some(Mpi::Openmpi),
                _ => None,
            }
        })
    }

    /// Needs an MPI library (of any ABI).
    pub fn links_mpi(&self) -> bool {
        self.needed
            .iter()
            .any(|soname| soname.starts_with("libmpi"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needing(sonames: &[&str]) -> Elf {
        Elf {
            needed: sonames.iter().map(|s| s.to_string()).collect(),
            ..Elf::default()
        }
    }

    #[test]
    fn the_mpi_is_told_by_soname() {
        assert_eq!(
            needing(&["libc.so.6", "libmpich.so.12"]).mpi(),
            Some(Mpi::Mpich)
        );
        assert_eq!(needing(&["libmpi.so.12"]).mpi(), Some(Mpi::Mpich));
        assert_eq!(needing(&["libmpi_mpifh.so.40"]).mpi(), Some(Mpi::Openmpi));
        assert_eq!(
            needing(&["libmpi.so.40", "libc.so.6"]).mpi(),
            Some(Mpi::Openmpi)
        );
        assert_eq!(needing(&["libmpi.so.99"]).mpi(), None);
        assert!(needing(&["libmpi.so.99"]).links_mpi());
        assert_eq!(needing(&["libmpfr.so.6"]).mpi(), None);
        assert!(!needing(&["libc.so.6"]).links_mpi());
    }

    #[test]
    fn this_executable_reads_as_dynamic_elf() {
        let me = Elf::read(&std::env::current_exe().unwrap())
            .unwrap()
            .unwrap();
        assert!(me.dynamic);
        assert!(
            me.needed.iter().any(|n| n.starts_with("libc.so")),
            "{:?}",
            me.needed
        );
        assert!(me.imports.contains("malloc"), "{:?}", me.imports);
        assert!(!me.defines.contains("malloc"));
    }

    #[test]
    fn other_files_are_not_elf() {
        assert_eq!(Elf::parse(b"#!/bin/sh\necho hi\n"), None);
        assert_eq!(Elf::parse(b""), None);
        // A truncated header.
        assert_eq!(Elf::parse(b"\x7fELF\x02\x01\x01\0\0"), None);
    }
}
