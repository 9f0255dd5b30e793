//! Turning sampled instruction addresses into function names: user-space
//! addresses through the process's memory map and each mapped file's ELF symbols
//! (libzpool's dynamic symbols, the program's own, and a separate debug file's
//! when one is installed), kernel addresses through /proc/kallsyms (zfs.ko's
//! static functions included). A function without a symbol (a static in a
//! stripped library: the zio pipeline stages, zstd's internals) is found by its
//! unwind entry and named by its place, so its samples still add up.
//!
//! Processes may exit before zprof symbolizes, so their memory maps are
//! snapshotted while they run ([`ProcessMaps::read`]).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// One executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub file_offset: u64,
    /// The mapped file.
    pub path: String,
}

/// A process's executable mappings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessMaps {
    /// Mappings, by start address.
    pub mappings: Vec<Mapping>,
}

impl ProcessMaps {
    /// Reads /proc/PID/maps (executable file mappings only).
    pub fn read(pid: u32) -> Option<ProcessMaps> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
        Some(Self::parse(&text))
    }

    /// Parses the text of a maps file.
    pub fn parse(text: &str) -> ProcessMaps {
        let mut mappings: Vec<Mapping> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let range = fields.next()?;
                let perms = fields.next()?;
                let offset = fields.next()?;
                let _device = fields.next()?;
                let _inode = fields.next()?;
                let path = fields.next()?;
                if !perms.contains('x') || !path.starts_with('/') {
                    return None;
                }
                let (start, end) = range.split_once('-')?;
                Some(Mapping {
                    start: u64::from_str_radix(start, 16).ok()?,
                    end: u64::from_str_radix(end, 16).ok()?,
                    file_offset: u64::from_str_radix(offset, 16).ok()?,
                    path: path.to_owned(),
                })
            })
            .collect();
        mappings.sort_by_key(|m| m.start);
        ProcessMaps { mappings }
    }

    fn find(&self, address: u64) -> Option<&Mapping> {
        let index = self.mappings.partition_point(|m| m.start <= address);
        self.mappings[..index].last().filter(|m| address < m.end)
    }
}

/// Function symbols of one ELF file, by virtual address.
struct ElfSymbols {
    /// The file's name, for frames named by their place.
    file_name: String,
    /// (start, end, name), sorted by start.
    functions: Vec<(u64, u64, String)>,
    /// Where each function starts, symbol or not (from .eh_frame_hdr), sorted.
    function_starts: Vec<u64>,
    /// Loadable segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

/// What an address in a file turned out to be.
enum Found<'a> {
    /// Inside a function with a symbol.
    Named(&'a str),
    /// Inside a function without one, placed by the nearest symbol before it.
    Placed(String),
    /// Nothing known.
    Unknown,
}

impl ElfSymbols {
    fn load(path: &Path, debug_dirs: &[PathBuf]) -> Option<ElfSymbols> {
        // Mapped, not read: a debug build of a program carries hundreds of MiB of
        // DWARF that zprof never touches, and reading it would count in its RSS.
        let data = map_file(path)?;
        let file = object::File::parse(&*data).ok()?;
        let mut functions = function_symbols(&file);
        // A stripped library keeps only its exported symbols; its debug file
        // (a -dbgsym package) has the static ones.
        if let Some(debug) = debug_file(&file, path, debug_dirs).and_then(|p| map_file(&p))
            && let Ok(debug) = object::File::parse(&*debug)
        {
            functions.extend(function_symbols(&debug));
        }
        functions.sort_by_key(|f| (f.0, std::cmp::Reverse(f.1)));
        functions.dedup_by_key(|f| f.0);
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(ElfSymbols {
            file_name,
            functions,
            function_starts: crate::zfs::elf::function_starts(&file),
            segments,
        })
    }

    fn lookup(&self, file_offset: u64) -> Found<'_> {
        let Some((seg_offset, _, vaddr)) = self
            .segments
            .iter()
            .find(|(o, size, _)| file_offset >= *o && file_offset < o + size)
        else {
            return Found::Unknown;
        };
        let address = file_offset - seg_offset + vaddr;
        let before =
            |start: u64| self.functions[..self.functions.partition_point(|f| f.0 <= start)].last();
        if let Some((_, end, name)) = before(address)
            && address < *end
        {
            return Found::Named(name);
        }
        // Past the end of the nearest symbol: a function without one (a static
        // in a stripped library). Its start is known from the unwind table, so
        // every address in it gets the same name.
        let Some(&function) =
            self.function_starts[..self.function_starts.partition_point(|&f| f <= address)].last()
        else {
            return Found::Unknown;
        };
        Found::Placed(match before(function) {
            Some((start, _, name)) => {
                format!("[{}:{name}+{:#x}]", self.file_name, function - start)
            }
            None => format!("[{}+{function:#x}]", self.file_name),
        })
    }
}

fn map_file(path: &Path) -> Option<memmap2::Mmap> {
    let file_handle = std::fs::File::open(path).ok()?;
    unsafe { memmap2::Mmap::map(&file_handle) }.ok()
}

fn function_symbols(file: &object::File) -> Vec<(u64, u64, String)> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            Some((
                s.address(),
                s.address() + s.size().max(1),
                format!("{:#}", rustc_demangle::demangle(name)),
            ))
        })
        .collect()
}

/// The separate debug file of an ELF file, where gdb would look: by build-id
/// (`DIR/.build-id/ab/cdef….debug`), then by .gnu_debuglink name beside the
/// file, in its `.debug/`, and under `DIR/` + the file's directory.
fn debug_file(file: &object::File, path: &Path, debug_dirs: &[PathBuf]) -> Option<PathBuf> {
    if let Some(hex) = crate::zfs::elf::build_id_of(file).filter(|hex| hex.len() > 2) {
        for dir in debug_dirs {
            let candidate = dir
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]));
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let (name, _crc) = file.gnu_debuglink().ok().flatten()?;
    let name = std::str::from_utf8(name).ok()?;
    let parent = path.parent().unwrap_or(Path::new("/"));
    let mut candidates = vec![parent.join(name), parent.join(".debug").join(name)];
    for dir in debug_dirs {
        candidates.push(
            dir.join(parent.strip_prefix("/").unwrap_or(parent))
                .join(name),
        );
    }
    candidates.into_iter().find(|c| c.is_file() && c != path)
}

/// Kernel symbols from /proc/kallsyms.
struct KernelSymbols {
    /// (address, name), sorted.
    symbols: Vec<(u64, String)>,
}

impl KernelSymbols {
    fn load() -> KernelSymbols {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut parts = l.split_whitespace();
                let address = u64::from_str_radix(parts.next()?, 16).ok()?;
                let kind = parts.next()?;
                let name = parts.next()?;
                (address != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (address, name.to_owned()))
            })
            .collect();
        symbols.sort();
        KernelSymbols { symbols }
    }

    fn lookup(&self, address: u64) -> Option<&str> {
        let index = self.symbols.partition_point(|s| s.0 <= address);
        self.symbols[..index].last().map(|s| s.1.as_str())
    }
}

/// Symbolizes addresses; counts what it could not name.
pub struct Symbolizer {
    files: HashMap<String, Option<ElfSymbols>>,
    kernel: Option<KernelSymbols>,
    /// Where separate debug files are looked for.
    debug_dirs: Vec<PathBuf>,
    /// Frames that could not be named.
    pub unsymbolized: u64,
    /// Frames in functions without a symbol, named by their place.
    pub placed: u64,
}

/// Where distributions install debug files (Debian's -dbgsym packages).
pub const DEBUG_DIR: &str = "/usr/lib/debug";

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer::with_debug_dirs(vec![PathBuf::from(DEBUG_DIR)])
    }
}

/// The name of a user frame outside every known mapping.
pub const UNKNOWN_FRAME: &str = "[unknown]";

impl Symbolizer {
    /// A symbolizer that looks for debug files in these directories.
    pub fn with_debug_dirs(debug_dirs: Vec<PathBuf>) -> Symbolizer {
        Symbolizer {
            files: HashMap::new(),
            kernel: None,
            debug_dirs,
            unsymbolized: 0,
            placed: 0,
        }
    }

    /// Names a user-space address of a process. A function without a symbol
    /// becomes `[file:nearest_symbol_before+0xoffset_of_its_start]`; an address
    /// outside any function `[file+0xoffset]`, outside every mapping `[unknown]`.
    pub fn user(&mut self, maps: Option<&ProcessMaps>, address: u64) -> String {
        let Some(mapping) = maps.and_then(|m| m.find(address)) else {
            self.unsymbolized += 1;
            return UNKNOWN_FRAME.into();
        };
        let file_offset = address - mapping.start + mapping.file_offset;
        let debug_dirs = &self.debug_dirs;
        let symbols = self
            .files
            .entry(mapping.path.clone())
            .or_insert_with(|| ElfSymbols::load(Path::new(&mapping.path), debug_dirs));
        match symbols
            .as_ref()
            .map_or(Found::Unknown, |s| s.lookup(file_offset))
        {
            Found::Named(name) => name.to_owned(),
            Found::Placed(place) => {
                self.placed += 1;
                place
            }
            Found::Unknown => {
                self.unsymbolized += 1;
                let file = mapping.path.rsplit('/').next().unwrap_or(&mapping.path);
                format!("[{file}+{file_offset:#x}]")
            }
        }
    }

    /// Names a kernel address, marked `_[k]` (the flame graph convention).
    pub fn kernel(&mut self, address: u64) -> String {
        let kernel = self.kernel.get_or_insert_with(KernelSymbols::load);
        match kernel.lookup(address) {
            Some(name) => format!("{name}_[k]"),
            None => {
                self.unsymbolized += 1;
                "[kernel]_[k]".into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_and_keeps_executable_file_mappings() {
        let maps = ProcessMaps::parse(
            "55d0c0000000-55d0c0100000 r--p 00000000 fe:00 1 /usr/bin/prog\n\
             55d0c0100000-55d0c0200000 r-xp 00100000 fe:00 1 /usr/bin/prog\n\
             7f0000000000-7f0000100000 rw-p 00000000 00:00 0 [heap]\n\
             7f1000000000-7f1000200000 r-xp 00010000 fe:00 2 /lib/x86_64-linux-gnu/libzpool.so.5.0.0\n",
        );
        assert_eq!(maps.mappings.len(), 2);
        let m = maps.find(0x7f1000000010).unwrap();
        assert!(m.path.ends_with("libzpool.so.5.0.0"));
        assert!(maps.find(0x7f0000000010).is_none());
    }

    /// Symbolizes this test binary's own code through its real memory map.
    #[test]
    fn names_own_function() {
        let maps = ProcessMaps::read(std::process::id()).unwrap();
        let address = names_own_function as *const () as u64;
        let mut symbolizer = Symbolizer::default();
        let name = symbolizer.user(Some(&maps), address);
        assert!(name.contains("names_own_function"), "{name}");
        assert_eq!(symbolizer.unsymbolized, 0);
    }
}
