//! Reading the traced library's ELF file once: its defined function symbols (as
//! file offsets, ready for uprobes) and its GNU build-id (which identifies the
//! build, and so the struct layouts, far better than a version string). Also
//! where every function starts, symbol or not, from the unwind table.
//!
//! aya can resolve a symbol per attach, but it re-reads the whole file each time;
//! resolving all symbols in one pass keeps attaching well under a second.

use std::{collections::HashMap, path::Path};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

/// What zprof needs from a shared library.
#[derive(Debug, Clone)]
pub struct LibraryInfo {
    /// Function symbol name to its file offset (what a uprobe attaches to).
    pub functions: HashMap<String, u64>,
    /// GNU build-id, lower-case hex, when the file has one.
    pub build_id: Option<String>,
    /// OpenZFS version from the `zfs-X.Y.Z-...` git revision string that
    /// OpenZFS builds into its libraries (ZFS_META_GITREV), when present.
    pub zfs_version: Option<String>,
}

/// Finds the first `zfs-<major>.<minor>.<patch>` followed by `-` in `data`.
pub fn find_zfs_version(data: &[u8]) -> Option<String> {
    let mut from = 0;
    while let Some(at) = data[from..].windows(4).position(|w| w == b"zfs-") {
        let start = from + at + 4;
        let rest = &data[start..data.len().min(start + 24)];
        let end = rest
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'.'))
            .unwrap_or(rest.len());
        let candidate = &rest[..end];
        let dots = candidate.iter().filter(|b| **b == b'.').count();
        if dots == 2 && rest.get(end) == Some(&b'-') && candidate[0].is_ascii_digit() {
            return Some(String::from_utf8_lossy(candidate).into_owned());
        }
        from = start;
    }
    None
}

/// Errors reading a library.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not an ELF object zprof can parse.
    #[error("{path} is not an ELF shared library: {source}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        source: object::Error,
    },
}

/// A library file mapped read-only, for parsing.
fn map_library(path: &Path) -> Result<memmap2::Mmap, ElfError> {
    let read_error = |source| ElfError::Read {
        path: path.display().to_string(),
        source,
    };
    let file_handle = std::fs::File::open(path).map_err(read_error)?;
    // SAFETY: read-only map of a library file; zprof does not modify it.
    unsafe { memmap2::Mmap::map(&file_handle) }.map_err(read_error)
}

/// `data` parsed as an ELF object, or the error naming `path`.
fn parse_library<'d>(path: &Path, data: &'d [u8]) -> Result<object::File<'d>, ElfError> {
    object::File::parse(data).map_err(|source| ElfError::Parse {
        path: path.display().to_string(),
        source,
    })
}

/// Reads the defined function symbols (dynamic and static tables) and build-id.
pub fn read_library(path: &Path) -> Result<LibraryInfo, ElfError> {
    let data = map_library(path)?;
    let file = parse_library(path, &data)?;
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .map(|s| (s.address(), s.size(), s.file_range().0))
        .collect();
    let mut functions = HashMap::new();
    for symbol in file.dynamic_symbols().chain(file.symbols()) {
        if symbol.kind() != SymbolKind::Text || symbol.is_undefined() || symbol.address() == 0 {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        let address = symbol.address();
        // Uprobes take a file offset; translate the virtual address through the
        // loadable segment that contains it.
        let offset = segments
            .iter()
            .find(|(start, size, _)| address >= *start && address < start + size)
            .map(|(start, _, file_offset)| address - start + file_offset);
        if let Some(offset) = offset {
            functions.entry(name.to_owned()).or_insert(offset);
        }
    }
    let build_id = build_id_of(&file);
    let zfs_version = find_zfs_version(&data);
    Ok(LibraryInfo {
        functions,
        build_id,
        zfs_version,
    })
}

/// Where named data objects (global variables) of a library lie once it is
/// loaded: their addresses relative to the load address of the mapping at
/// file offset 0, and their sizes in bytes. Those absent are left out.
pub fn data_symbols(path: &Path, names: &[&str]) -> Result<HashMap<String, (u64, u64)>, ElfError> {
    let data = map_library(path)?;
    let file = parse_library(path, &data)?;
    // The segment mapped from file offset 0 is where the loader puts the
    // library's base (its address is normally 0 in a shared library).
    let base = file
        .segments()
        .find(|s| s.file_range().0 == 0)
        .map_or(0, |s| s.address());
    let mut found = HashMap::new();
    for symbol in file.dynamic_symbols().chain(file.symbols()) {
        if symbol.kind() != SymbolKind::Data || symbol.is_undefined() {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        if names.contains(&name) {
            found
                .entry(name.to_owned())
                .or_insert((symbol.address().wrapping_sub(base), symbol.size()));
        }
    }
    Ok(found)
}

/// The GNU build-id of an ELF file's bytes (a library, a kernel module), lower-case hex.
pub fn build_id(data: &[u8]) -> Option<String> {
    build_id_of(&object::File::parse(data).ok()?)
}

/// The GNU build-id of a parsed ELF file, lower-case hex.
pub fn build_id_of(file: &object::File) -> Option<String> {
    file.build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
}

/// Up to `len` bytes of `path` at file offset `offset` (fewer at the end of
/// the file, none when it cannot be read): a function's first instructions.
pub fn read_bytes(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt as _;
    let mut buf = vec![0u8; len];
    let read = std::fs::File::open(path)
        .and_then(|f| f.read_at(&mut buf, offset))
        .unwrap_or(0);
    buf.truncate(read);
    buf
}

/// The start address of every function that has an unwind entry, sorted: the
/// binary-search table of `.eh_frame_hdr`, which stripping keeps (unwinding
/// needs it). Empty when the section is missing or encoded unusually.
pub fn function_starts(file: &object::File) -> Vec<u64> {
    let Some(section) = file.section_by_name(".eh_frame_hdr") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let mut starts = eh_frame_hdr_table(data, section.address()).unwrap_or_default();
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// Decodes the table of an `.eh_frame_hdr` loaded at `base`: version 1, any
/// 4- or 8-byte pointer encoding for the frame pointer, a udata4 count, and
/// the table in datarel sdata4 (what GNU ld and lld write).
fn eh_frame_hdr_table(data: &[u8], base: u64) -> Option<Vec<u64>> {
    const UDATA4: u8 = 0x03;
    const DATAREL_SDATA4: u8 = 0x3b;
    let &[
        version,
        frame_pointer_encoding,
        count_encoding,
        table_encoding,
        ..,
    ] = data
    else {
        return None;
    };
    if version != 1 || count_encoding != UDATA4 || table_encoding != DATAREL_SDATA4 {
        return None;
    }
    let pointer_size = match frame_pointer_encoding & 0x0f {
        0x03 | 0x0b => 4,
        0x04 | 0x0c | 0x00 => 8,
        _ => return None,
    };
    let word = |at: usize| -> Option<i32> {
        Some(i32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
    };
    let count_at = 4 + pointer_size;
    let count = word(count_at)? as u32 as usize;
    let table = count_at + 4;
    (0..count)
        .map(|i| word(table + i * 8).map(|start| base.wrapping_add_signed(start as i64)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary itself is a real ELF file with a build-id and symbols.
    #[test]
    fn reads_own_executable() {
        let exe = std::env::current_exe().unwrap();
        let info = read_library(&exe).unwrap();
        assert!(!info.functions.is_empty());
        assert!(
            info.functions.contains_key("main"),
            "no main in {}",
            exe.display()
        );
    }

    #[test]
    fn finds_gitrev_version() {
        assert_eq!(
            find_zfs_version(b"..zfs-utils..zfs-2.1.11-0-ge25f9131d-dist\0"),
            Some("2.1.11".into())
        );
        assert_eq!(find_zfs_version(b"zfs-1.2 zfs-x.y.z- zfs-10.20-"), None);
    }

    #[test]
    fn non_elf_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("zprof-elf-{}", std::process::id()));
        std::fs::write(&dir, b"not an elf file at all").unwrap();
        let err = read_library(&dir).unwrap_err().to_string();
        std::fs::remove_file(&dir).unwrap();
        assert!(err.contains("is not an ELF shared library"), "{err}");
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = read_library(Path::new("/nonexistent/libzpool.so.5"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot read /nonexistent/libzpool.so.5"),
            "{err}"
        );
    }
}
