//! The OpenZFS module parameters zprof exports beside the stages, and how to
//! read them from a module's parameters directory.

/// A module parameter worth setting a stage against.
#[derive(Debug)]
pub struct Tunable {
    /// Its name under /sys/module/zfs/parameters.
    pub parameter: &'static str,
    /// The gauge it is exported as.
    pub metric: &'static str,
    /// The gauge's HELP text.
    pub help: &'static str,
}

/// The tunables `serve` exports (the dashboard draws spa_sync against the
/// first; the write throttle starts from the second).
pub const TUNABLES: &[Tunable] = &[
    Tunable {
        parameter: "zfs_txg_timeout",
        metric: "zfs_txg_timeout_seconds",
        help: "zfs_txg_timeout: the longest a txg stays open",
    },
    Tunable {
        parameter: "zfs_dirty_data_max",
        metric: "zfs_dirty_data_max_bytes",
        help: "zfs_dirty_data_max: dirty data a pool may hold before writers wait",
    },
    Tunable {
        parameter: "zfs_delay_min_dirty_percent",
        metric: "zfs_delay_min_dirty_percent",
        help: "zfs_delay_min_dirty_percent: the share of zfs_dirty_data_max from which the write throttle delays writers",
    },
    Tunable {
        parameter: "zfs_dirty_data_sync_percent",
        metric: "zfs_dirty_data_sync_percent",
        help: "zfs_dirty_data_sync_percent: the share of zfs_dirty_data_max from which a txg sync starts before its timeout",
    },
];

/// What OpenZFS sets the throttle's percentages to unless told otherwise
/// (the same from 2.1 to 2.4): a finding that could not read one says it
/// assumed this.
pub const DEFAULT_PERCENTS: &[(&str, u64)] = &[
    ("zfs_delay_min_dirty_percent", 60),
    ("zfs_dirty_data_sync_percent", 20),
];

/// Reads [`TUNABLES`] from a module's parameters directory; those absent or
/// unreadable are left out.
pub fn read_tunables(parameters: &std::path::Path) -> Vec<(&'static Tunable, f64)> {
    TUNABLES
        .iter()
        .filter_map(|t| {
            std::fs::read_to_string(parameters.join(t.parameter))
                .ok()?
                .trim()
                .parse()
                .ok()
                .map(|v| (t, v))
        })
        .collect()
}

/// Where [`TUNABLES`] lie in a libzpool (its global variables, relative to
/// its load address; a static one, as zfs_dirty_data_sync_percent is from
/// 2.2 on, is not exported and is left out), read once from the file.
#[derive(Debug, Default)]
pub struct LibraryTunables {
    object: std::path::PathBuf,
    /// Parameter, its offset from the load address, its size.
    places: Vec<(&'static Tunable, u64, u64)>,
}

impl LibraryTunables {
    /// The places of the tunables in the library `object`.
    pub fn locate(object: &std::path::Path) -> LibraryTunables {
        let names: Vec<&str> = TUNABLES.iter().map(|t| t.parameter).collect();
        let symbols = super::elf::data_symbols(object, &names).unwrap_or_default();
        let places = TUNABLES
            .iter()
            .filter_map(|t| {
                let (offset, size) = symbols.get(t.parameter)?;
                Some((t, *offset, *size))
            })
            .collect();
        LibraryTunables {
            object: object.to_owned(),
            places,
        }
    }

    /// Reads the tunables from process `pid`'s memory, where it has the
    /// library loaded; none where it has not or cannot be read.
    pub fn read(&self, pid: u32) -> Vec<(&'static Tunable, f64)> {
        let Some(base) = load_address(pid, &self.object) else {
            return Vec::new();
        };
        let Ok(memory) = std::fs::File::open(format!("/proc/{pid}/mem")) else {
            return Vec::new();
        };
        self.places
            .iter()
            .filter_map(|(t, offset, size)| {
                read_unsigned(&memory, base + offset, *size).map(|v| (*t, v as f64))
            })
            .collect()
    }
}

/// Where process `pid` mapped file offset 0 of `object` (/proc/PID/maps).
fn load_address(pid: u32, object: &std::path::Path) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let wanted = std::fs::canonicalize(object).unwrap_or_else(|_| object.to_owned());
    maps.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (range, offset, path) = (fields.first()?, fields.get(2)?, fields.get(5)?);
        if u64::from_str_radix(offset, 16).ok()? != 0 || std::path::Path::new(path) != wanted {
            return None;
        }
        u64::from_str_radix(range.split('-').next()?, 16).ok()
    })
}

/// A little-endian unsigned integer of 4 or 8 bytes at `address`.
fn read_unsigned(memory: &std::fs::File, address: u64, size: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt as _;
    let mut bytes = [0u8; 8];
    let size = usize::try_from(size).ok().filter(|s| *s == 4 || *s == 8)?;
    memory.read_exact_at(&mut bytes[..size], address).ok()?;
    Some(u64::from_le_bytes(bytes))
}
