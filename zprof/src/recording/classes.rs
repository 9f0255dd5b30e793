//! The words for a row's class: what the eBPF side's class numbers mean per
//! stage (compression algorithm and level, I/O class, ARC read path, block
//! size...), as recordings store them and every later layer reads them.

use zprof_common::Stage;

use crate::zfs::names;

/// Class name (or suffix) of rows counted at entry only (no latency).
pub const COUNT_ONLY: &str = "count only";
/// The class bit the eBPF side sets on rows counted at entry only (one
/// definition for both sides, in zprof-common).
pub use zprof_common::COUNT_ONLY_CLASS;

/// Class name of lz4 trials run by zstd's early abort (not lz4 compressions).
pub const ZSTD_EARLY_ABORT_TRIAL: &str = "zstd early-abort trial";

/// Physical block sizes read from disk, as powers of two: "<=16K" holds
/// compressed blocks of 8K to 16K.
fn block_size_class(class: u32) -> String {
    let size = block_class_bytes(class);
    let words = if size >= 1 << 20 {
        format!("{}M", size >> 20)
    } else if size >= 1024 {
        format!("{}K", size >> 10)
    } else {
        format!("{size}B")
    };
    format!("<={words}")
}

/// Physical size bound of a blocks-read row's class (see [`block_size_class`]).
pub fn block_class_bytes(class: u32) -> u64 {
    1u64 << (class & 0xff).min(40)
}

/// An ARC read row's words: for whom, where it was served from (iohit: found
/// being read, as 2.2's arcstats call it), whether a timed miss was waited for
/// (--full-timing), and "count only" when the row has no latency.
pub fn arc_read_class_name(class: u32) -> String {
    use zprof_common::arc_read_class as c;
    let path = match class & c::PATH {
        c::HIT if class & c::HELD != 0 => "held hit",
        c::HIT => "hit",
        c::IN_FLIGHT => "iohit",
        c::L2 => "L2ARC",
        _ => "disk",
    };
    let asked = if class & c::PREFETCH != 0 {
        "prefetch "
    } else {
        ""
    };
    let waited = if class & c::PATH != c::HIT && class & c::WAITED != 0 {
        " waited"
    } else {
        ""
    };
    let counted = if class & COUNT_ONLY_CLASS != 0 {
        format!(" {COUNT_ONLY}")
    } else {
        String::new()
    };
    format!("{asked}{path}{waited}{counted}")
}

/// The words for a stage's class number.
pub fn class_name(stage: Stage, class: u32) -> String {
    match stage {
        Stage::Compress => names::compression(class & 0xff, class >> 8),
        Stage::Decompress => names::compression(class & 0xff, 0),
        Stage::ZstdCompress => names::zstd_level(class),
        Stage::Lz4Compress if class == zprof_common::LZ4_CLASS_ZSTD_EARLY_ABORT => {
            ZSTD_EARLY_ABORT_TRIAL.into()
        }
        Stage::Lz4Compress => "lz4".into(),
        Stage::VdevQueue | Stage::VdevDisk | Stage::VdevTotal => names::io_class(class),
        Stage::ZilLogWrite if class == 1 => "log vdev".into(),
        Stage::ZilLogWrite if class == 2 => "special vdev".into(),
        Stage::BlockRead => format!("{} {COUNT_ONLY}", block_size_class(class)),
        Stage::ArcRead => arc_read_class_name(class),
        Stage::ArcMissReuse => miss_reuse_class_name(class),
        Stage::AllocClass => alloc_class_name(class),
        Stage::WorkloadWrite | Stage::WorkloadRead if class & COUNT_ONLY_CLASS != 0 => {
            COUNT_ONLY.into()
        }
        Stage::ChecksumCompute => names::checksum(class & 0xff),
        Stage::ZilLogWrite => "main pool".into(),
        Stage::SyncPhase => zprof_common::sync_phase::NAMES
            .get(class as usize)
            .map_or_else(|| format!("phase {class}"), |name| (*name).to_owned()),
        Stage::CommitGap if class == zprof_common::COMMIT_OVERLAPPED => {
            format!("overlapped {COUNT_ONLY}")
        }
        Stage::TxgWaitSynced if class == zprof_common::TXG_WAIT_IN_ZIL_COMMIT => {
            "in zil commit".into()
        }
        _ => String::new(),
    }
}

/// `special`, `dedup`, `special, full: to another class` (all counted only).
fn alloc_class_name(class: u32) -> String {
    use zprof_common::alloc_class as c;
    let meant = if class & c::DEDUP != 0 {
        "dedup"
    } else {
        "special"
    };
    let full = if class & c::FULL != 0 {
        ", full: to another class"
    } else {
        ""
    };
    format!("{meant}{full} {COUNT_ONLY}")
}

/// `sync read again`, `async first read`, `read again` (priority unknown).
fn miss_reuse_class_name(class: u32) -> String {
    use zprof_common::miss_reuse_class as c;
    let again = if class & c::FIRST != 0 {
        "first read"
    } else {
        "read again"
    };
    match (class & c::PRIORITY_UNKNOWN != 0, class & c::ASYNC != 0) {
        (true, _) => again.to_owned(),
        (false, true) => format!("async {again}"),
        (false, false) => format!("sync {again}"),
    }
}
