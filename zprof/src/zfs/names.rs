//! Names of OpenZFS enum values (compression and checksum algorithms, zio types
//! and priorities) as they appear in probe arguments and struct members.
//!
//! The numbering is OpenZFS's and can change between releases; these tables hold
//! for 2.0 through 2.3 (the enums only grew at their ends). A number zprof does not
//! know is shown as `<kind>-<number>` rather than guessed.

/// enum zio_compress, in declaration order.
const COMPRESSION: &[&str] = &[
    "inherit", "on", "off", "lzjb", "empty", "gzip-1", "gzip-2", "gzip-3", "gzip-4", "gzip-5",
    "gzip-6", "gzip-7", "gzip-8", "gzip-9", "zle", "lz4", "zstd",
];

/// enum zio_checksum, in declaration order.
const CHECKSUM: &[&str] = &[
    "inherit",
    "on",
    "off",
    "label",
    "gang_header",
    "zilog",
    "fletcher2",
    "fletcher4",
    "sha256",
    "zilog2",
    "noparity",
    "sha512",
    "skein",
    "edonr",
    "blake3",
];

/// vdev_alloc_bias_t (unchanged from 2.1 to 2.3): a top-level vdev's
/// allocation class, as `zpool status` heads its sections (without the "s").
const ALLOC_BIAS: &[&str] = &["normal", "log", "special", "dedup"];

/// The allocation class of a leaf: its top-level vdev's bias, "log" for a
/// log vdev whatever its bias says (a pool from before allocation classes),
/// "cache" for a cache device (which has no bias).
pub fn allocation_class(bias: u32, is_log: bool, is_cache: bool) -> String {
    match ALLOC_BIAS.get(bias as usize) {
        _ if is_cache => "cache".into(),
        Some(&"normal") if is_log => "log".into(),
        Some(name) => (*name).into(),
        None => format!("bias-{bias}"),
    }
}

/// A top-level vdev's name as zpool_influxdb gives it: its type and index
/// ("raidz-0", "mirror-1"; a single disk or file is "disk-2", "file-2").
pub fn top_vdev(vdev_type: &str, id: u64) -> String {
    let vdev_type = if vdev_type.is_empty() {
        "vdev"
    } else {
        vdev_type
    };
    format!("{vdev_type}-{id}")
}

/// zio_priority_t, with the names `zpool iostat -l` uses for its columns.
const PRIORITY: &[&str] = &[
    "sync read",
    "sync write",
    "async read",
    "async write",
    "scrub",
    // ZIO_PRIORITY_REMOVAL: device removal's copies and, from 2.3, RAIDZ
    // expansion's reflow (raidz_reflow_impl reads and writes at it).
    "removal/reflow",
    "initialize",
    "trim",
    "rebuild",
];

/// zio_type_t.
const IO_TYPE: &[&str] = &["null", "read", "write", "free", "claim", "ioctl", "trim"];

/// Name of a compression algorithm; `level` is zio_compress_data's level
/// argument (meaningful for zstd only).
pub fn compression(algorithm: u32, level: u32) -> String {
    match COMPRESSION.get(algorithm as usize) {
        // 0 and 255 (ZIO_COMPLEVEL_DEFAULT) both mean the default level.
        Some(&"zstd") if level == 0 || level == 255 => "zstd".to_owned(),
        Some(&"zstd") => zstd_level(level),
        Some(name) => (*name).to_owned(),
        None => format!("compress-{algorithm}"),
    }
}

/// The zstd-fast levels, in the order of their numbers from
/// [`ZSTD_FAST_FIRST`] on (enum zio_zstd_levels, the property's encoding
/// since zstd came in 2.0).
const ZSTD_FAST_LEVELS: [u32; 21] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 500, 1000,
];

/// ZIO_ZSTD_LEVEL_FAST_1.
const ZSTD_FAST_FIRST: u32 = 103;

/// A zstd level as the compression property names it: `zstd-3`,
/// `zstd-fast-1`.
pub fn zstd_level(level: u32) -> String {
    if (1..=19).contains(&level) {
        return format!("zstd-{level}");
    }
    match level
        .checked_sub(ZSTD_FAST_FIRST)
        .and_then(|i| ZSTD_FAST_LEVELS.get(i as usize))
    {
        Some(fast) => format!("zstd-fast-{fast}"),
        None => format!("zstd-level{level}"),
    }
}

/// Name of a checksum algorithm.
pub fn checksum(algorithm: u32) -> String {
    CHECKSUM
        .get(algorithm as usize)
        .map(|name| (*name).to_owned())
        .unwrap_or_else(|| format!("checksum-{algorithm}"))
}

/// Name of an I/O class `io_type << 8 | priority` as used by the vdev stages.
pub fn io_class(class: u32) -> String {
    let name = io_class_of_any_leaf(class & !zprof_common::VDEV_CACHE_DEVICE);
    if class & zprof_common::VDEV_CACHE_DEVICE != 0 {
        format!("{name}, cache device")
    } else {
        name
    }
}

fn io_class_of_any_leaf(class: u32) -> String {
    let io_type = class >> 8;
    let priority = class & 0xff;
    let priority_name = PRIORITY
        .get(priority as usize)
        .map(|p| (*p).to_owned())
        .unwrap_or_else(|| format!("priority-{priority}"));
    match IO_TYPE.get(io_type as usize) {
        // The priority already says read or write for the common classes.
        Some(&"read") | Some(&"write") if priority <= 3 => priority_name,
        Some(name) => format!("{priority_name} ({name})"),
        None => format!("{priority_name} (type-{io_type})"),
    }
}

/// ZIO_PRIORITY_SCRUB: scrub and resilver reads.
pub const PRIORITY_SCRUB: u32 = 4;
/// ZIO_PRIORITY_REMOVAL: device removal's copies and RAIDZ expansion's reflow.
pub const PRIORITY_REMOVAL: u32 = 5;

/// The zio priority of an I/O class (the cache-device bit aside).
pub fn io_class_priority(class: u32) -> u32 {
    class & 0xff
}

/// Whether an I/O class is a write (io_type WRITE).
pub fn io_class_is_write(class: u32) -> bool {
    (class >> 8) & 0xff == 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_classes_and_top_level_vdevs() {
        assert_eq!(allocation_class(0, false, false), "normal");
        assert_eq!(allocation_class(1, true, false), "log");
        assert_eq!(
            allocation_class(0, true, false),
            "log",
            "a log vdev without a bias"
        );
        assert_eq!(allocation_class(2, false, false), "special");
        assert_eq!(allocation_class(3, false, false), "dedup");
        assert_eq!(allocation_class(0, false, true), "cache");
        assert_eq!(allocation_class(7, false, false), "bias-7");
        assert_eq!(top_vdev("raidz", 0), "raidz-0");
        assert_eq!(top_vdev("", 3), "vdev-3");
    }

    #[test]
    fn compression_names() {
        assert_eq!(compression(15, 0), "lz4");
        assert_eq!(compression(16, 3), "zstd-3");
        // zstd-fast's default, as the 6.17-2.4.4 guest's receive with
        // compression=zstd-fast recorded it.
        assert_eq!(compression(16, 103), "zstd-fast-1");
        assert_eq!(compression(16, 113), "zstd-fast-20");
        assert_eq!(compression(16, 123), "zstd-fast-1000");
        assert_eq!(compression(16, 124), "zstd-level124");
        assert_eq!(compression(2, 0), "off");
        assert_eq!(compression(9, 0), "gzip-5");
        assert_eq!(compression(99, 0), "compress-99");
    }

    #[test]
    fn checksum_names() {
        assert_eq!(checksum(7), "fletcher4");
        assert_eq!(checksum(8), "sha256");
        assert_eq!(checksum(200), "checksum-200");
    }

    #[test]
    fn io_class_names() {
        assert_eq!(io_class(2 << 8 | 3), "async write");
        assert_eq!(io_class(1 << 8), "sync read");
        assert_eq!(io_class(2 << 8 | 7), "trim (write)");
        assert!(io_class_is_write(2 << 8 | 1));
        assert!(!io_class_is_write(1 << 8 | 1));
    }
}
