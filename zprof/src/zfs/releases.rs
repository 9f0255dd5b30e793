//! What differs between OpenZFS releases, as data, in one place.
//!
//! zprof reads OpenZFS's functions, arguments, flag bits and struct members, and
//! these move between releases (see ../shared/notes/openzfs-versions.md): a
//! function renamed or wrapped, an argument shifted, a flag bit taken by a new
//! flag, a flush moved to a taskq. Each release series gets one [`Series`] row
//! saying what zprof must do differently, and each release zprof has run gets a
//! [`Release`] row saying how far it was checked. The next release is a data
//! change here (plus an offsets table for its libzpool), not a code change.
//!
//! A version zprof has no series for, or cannot tell, is "unknown": the stages
//! whose meaning depends on the release (the [`SENSITIVE_GROUPS`]) are then
//! unavailable with the reason, never computed with a guess.

use std::fmt;

use zprof_common::{FLUSH_LEAF_ISSUE_TO_DONE, FLUSH_TIMED_CALL, Semantics};

/// A release series: a range of versions that share the same semantics.
#[derive(Debug)]
pub struct Series {
    /// Name shown in reports, e.g. "2.3".
    pub name: &'static str,
    /// First and last version (inclusive) as (major, minor, patch).
    pub first: (u32, u32, u32),
    /// Last version of the range (inclusive).
    pub last: (u32, u32, u32),
    /// Where these facts come from.
    pub source: &'static str,
    /// Values the eBPF programs take at load time, on libzpool.
    pub libzpool: Semantics,
    /// The same on the kernel module (flushes are asynchronous bios there).
    pub kernel: Semantics,
    /// Catalogue function name (the 2.1 name) -> the names that play its role
    /// in this series, preferred first; the first one the build has is probed.
    pub functions: &'static [(&'static str, &'static [&'static str])],
    /// How zil_commit waits for other writers before issuing a log block
    /// (the SLOG what-if puts that wait back at the log device's latency).
    pub commit_timeout: CommitTimeout,
    /// The SLOG what-if's weight between keeping a commit's non-device time
    /// whole and scaling it per leaf I/O (see `analyze::sync_path`).
    pub per_leaf_weight: f64,
    /// Behaviours a reader of the report should know, one line each.
    pub behaviours: &'static [&'static str],
}

/// zil_commit's wait for more writers to join a log block that is not full:
/// zfs_commit_timeout_pct of the last log block's latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitTimeout {
    /// zfs_commit_timeout_pct's default, as a fraction.
    pub fraction: f64,
    /// Whether a single writer waits too. Up to 2.2.3 it does (unless the wait
    /// would be tiny or the block nearly full); from 2.2.4 a block is issued at
    /// once unless commits arrive in parallel bursts (zl_parallel).
    pub single_writer_waits: bool,
}

const TIMEOUT_2_1: CommitTimeout = CommitTimeout {
    fraction: 0.05,
    single_writer_waits: true,
};
/// The rule assumed for a release zprof does not know (2.1's: the wait the
/// SLOG what-if takes out of the measured commit is then the larger one).
pub const COMMIT_TIMEOUT_ASSUMED: CommitTimeout = TIMEOUT_2_1;
/// The SLOG what-if's per-leaf weight up to 2.2 (see `analyze::sync_path`):
/// chosen on 15 recorded SLOG cases on 2.1.11 and 2.3.2 (AMD VM), 0.6 was
/// within -17%..+20% there; on the Intel VM 2.1.11 came out +6..+31%.
const PER_LEAF_WEIGHT_2_1: f64 = 0.6;
/// From 2.3 libzpool fsyncs a flushed file vdev on a taskq, a hand-off per
/// flush that a log device's commit pays and the run without one hides in
/// its disks' flushes: ZFS saw the lab's delivered 100 us flush take 139-156
/// us on 2.3.2 against 111 on 2.1.11 (Intel VM). At 0.6 the what-if came
/// out +17% to +55% on 2.3.2 there (8 pairs: raidz3:8 4k and 32k, raidz1:4
/// 16k, raidz2:6 8k); at 0.4 +1% to +27%. Fitted on libzpool: on the
/// kernel a commit's other time is kept whole
/// (`analyze::sync_path::KERNEL_PER_LEAF_WEIGHT`).
const PER_LEAF_WEIGHT_2_3: f64 = 0.4;
/// Sync writes larger than this go to a pool without a log device as
/// WR_INDIRECT records (the data written in place by dmu_sync, the log
/// block holding a pointer) and, with one, are copied into the log block:
/// the default of zfs_immediate_write_sz (files: from this size up) and
/// zvol_immediate_write_sz (zvols: above it), 32 KiB from 2.1 to 2.4.
pub const IMMEDIATE_WRITE_BYTES: f64 = 32768.0;

const TIMEOUT_2_2_4: CommitTimeout = CommitTimeout {
    fraction: 0.10,
    single_writer_waits: false,
};

/// How far zprof has checked a release on one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Run end to end here: the test suite compares zprof's counts with the lab's.
    Verified(&'static str),
    /// Known from its source and binaries only; says what that risks.
    Unverified(&'static str),
}

/// A release zprof knows by name.
#[derive(Debug)]
pub struct Release {
    /// "2.3.2".
    pub version: &'static str,
    /// On libzpool (uprobes).
    pub libzpool: Check,
    /// On zfs.ko (kprobes).
    pub kernel: Check,
}

/// Stage groups whose figures depend on the release's semantics: without a
/// series they are unavailable rather than computed with another release's rules.
pub const SENSITIVE_GROUPS: &[(&str, &str)] = &[
    (
        "compression",
        "zio_compress_data's level argument moved between releases",
    ),
    (
        "vdev",
        "the io_flags bit that marks aggregated child I/Os moved between releases",
    ),
    (
        "flush",
        "how and where cache flushes run moved between releases",
    ),
];

const LIBZPOOL_2_1: Semantics = Semantics {
    zio_flag_io_bypass_bit: 21,
    compress_level_arg: 4,
    flush_mode: FLUSH_TIMED_CALL,
    zio_type_flush: 5,
    zio_flag_config_writer_bit: 9,
};
const LIBZPOOL_2_3: Semantics = Semantics {
    zio_flag_io_bypass_bit: 22,
    compress_level_arg: 5,
    flush_mode: FLUSH_LEAF_ISSUE_TO_DONE,
    zio_type_flush: 5,
    zio_flag_config_writer_bit: 9,
};
/// The kernel's flushes are bios completed by an interrupt: zio_flush's
/// (outermost) call is timed as what it costs to issue them, on every release.
const KERNEL_2_3: Semantics = Semantics {
    flush_mode: FLUSH_TIMED_CALL,
    ..LIBZPOOL_2_3
};

const FUNCTIONS_2_1: &[(&str, &[&str])] = &[];
const FUNCTIONS_2_3: &[(&str, &[&str])] = &[
    ("lz4_compress_zfs", &["zfs_lz4_compress"]),
    // 2.3.3 made txg_wait_synced a wrapper of txg_wait_synced_flags, which
    // dmu_tx_wait and dsl_sync_task call directly: probe the inner function.
    (
        "txg_wait_synced",
        &["txg_wait_synced_flags", "txg_wait_synced"],
    ),
    // Leaf flushes end on a vdev_file taskq thread (see flush_done_entry).
    ("zio_interrupt", &["zio_interrupt"]),
];

const FUNCTIONS_2_4: &[(&str, &[&str])] = &[
    ("lz4_compress_zfs", &["zfs_lz4_compress"]),
    ("txg_wait_synced", &["txg_wait_synced_flags"]),
    ("zil_commit", &["zil_commit_flags"]),
    ("zio_interrupt", &["zio_interrupt"]),
];

/// What every 2.2 release does differently from 2.1.
const BEHAVIOURS_2_2: &[&str] = &[
    "zstd early abort (zstd-3 and up, blocks of 128K or more) runs lz4 and zstd-1 trials; the lz4 trial is shown inside zstd, the zstd-1 trial is a second zfs_zstd_compress call at level 1",
    "io_flags is 64 bits wide; ZIO_FLAG_IO_BYPASS is still bit 21",
];

/// What 2.3 added that zprof shows, in 2.3 and every later series.
const BEHAVIOURS_2_3_FEATURES: &[&str] = &[
    "Direct I/O: a file request that reaches dmu_write_uio_direct or dmu_read_uio_direct is flagged direct-path (kernel), beside 'direct' when O_DIRECT was asked: direct=always takes the path for aligned requests, short or misaligned O_DIRECT ones go through the ARC",
    "fast dedup: ddt_sync splits into appending the txg's changed entries to the dedup log (ddt_log_begin to ddt_log_commit) and flushing logged entries into the table (from ddt_log_take_first's first entry to ddt_sync's end)",
];

/// The release series zprof can interpret, oldest first.
pub const SERIES: &[Series] = &[
    Series {
        name: "2.1",
        first: (2, 0, 0),
        last: (2, 1, 99),
        source: "2.1.11 source and Debian 12's libzpool.so.5 and zfs.ko",
        libzpool: LIBZPOOL_2_1,
        kernel: LIBZPOOL_2_1,
        functions: FUNCTIONS_2_1,
        commit_timeout: TIMEOUT_2_1,
        per_leaf_weight: PER_LEAF_WEIGHT_2_1,
        behaviours: &[
            "libzpool fsyncs file vdevs inline: a zio_flush call lasts as long as its leaf flushes",
            "zstd compresses each block in one pass (no early abort)",
        ],
    },
    Series {
        name: "2.2.0-2.2.3",
        first: (2, 2, 0),
        last: (2, 2, 3),
        source: "2.2.0 and 2.2.3 source only (no 2.2 package is reachable here)",
        libzpool: LIBZPOOL_2_1,
        kernel: LIBZPOOL_2_1,
        functions: FUNCTIONS_2_1,
        commit_timeout: TIMEOUT_2_1,
        per_leaf_weight: PER_LEAF_WEIGHT_2_1,
        behaviours: BEHAVIOURS_2_2,
    },
    Series {
        name: "2.2.4-2.2.x",
        first: (2, 2, 4),
        last: (2, 2, 99),
        source: "2.2.4 and 2.2.11 source only (no 2.2 package is reachable here)",
        libzpool: LIBZPOOL_2_1,
        kernel: LIBZPOOL_2_1,
        functions: FUNCTIONS_2_1,
        commit_timeout: TIMEOUT_2_2_4,
        per_leaf_weight: PER_LEAF_WEIGHT_2_1,
        behaviours: &[
            "zio_flush calls itself for each child vdev: only the outermost call is timed; libzpool still fsyncs inline",
            BEHAVIOURS_2_2[0],
            BEHAVIOURS_2_2[1],
            "a single writer's log block is issued at once (no zfs_commit_timeout_pct wait, now 10%, unless commits come in parallel bursts)",
        ],
    },
    Series {
        name: "2.3",
        first: (2, 3, 0),
        last: (2, 3, 99),
        source: "2.3.2 and 2.3.9 source, Debian's libzpool.so.6 builds of both",
        libzpool: LIBZPOOL_2_3,
        kernel: KERNEL_2_3,
        functions: FUNCTIONS_2_3,
        commit_timeout: TIMEOUT_2_2_4,
        per_leaf_weight: PER_LEAF_WEIGHT_2_3,
        behaviours: &[
            "ZIO_FLAG_IO_BYPASS is bit 22 (bit 21 is DONT_PROPAGATE, set on every vdev child I/O)",
            "zio_flush calls itself for each child vdev; libzpool fsyncs each leaf on a vdev_file taskq thread, so each leaf flush is timed from its zio_flush to its zio_interrupt, and a commit's flush time is their span",
            "zio_compress_data takes the level as argument 5; lz4 is zfs_lz4_compress",
            "zstd early abort (zstd-3 and up, blocks of 128K or more) runs an lz4 trial and a zstd-1 trial inside zfs_zstd_compress: both count in the zstd row, the lz4 trial is shown apart and not as an lz4 compression",
            "txg_wait_synced wraps txg_wait_synced_flags from 2.3.3, which is probed instead",
            "a single writer's log block is issued at once (no zfs_commit_timeout_pct wait, 10%, unless commits come in parallel bursts)",
            BEHAVIOURS_2_3_FEATURES[0],
            BEHAVIOURS_2_3_FEATURES[1],
        ],
    },
    Series {
        name: "2.4",
        first: (2, 4, 0),
        // 2.4.99 is master, whose io_flags bits moved up by one again.
        last: (2, 4, 98),
        source: "trixie-backports' 2.4.4 (libzpool7linux and its headers; 2.4.0 source)",
        libzpool: LIBZPOOL_2_3,
        kernel: KERNEL_2_3,
        functions: FUNCTIONS_2_4,
        commit_timeout: TIMEOUT_2_2_4,
        per_leaf_weight: PER_LEAF_WEIGHT_2_3,
        behaviours: &[
            "as 2.3, and: zil_commit wraps zil_commit_flags, which Linux's writepages and sync call directly: probed instead",
            "zio_t offsets moved again (zio_prop_t became bit fields): zprof ships the table of trixie-backports' libzpool 2.4.4; other 2.4 builds need --offsets",
            "dmu_write takes a dmu_flags_t, and vdev_ops_t's vdev_op_type moved 8 bytes on",
            "without a log vdev, log blocks go to a special vdev before the normal class, which then counts as a log device for large writes (zil_special_is_slog): zil_log_write's class says special vdev",
            BEHAVIOURS_2_3_FEATURES[0],
            BEHAVIOURS_2_3_FEATURES[1],
        ],
    },
];

/// Releases zprof has checked, by name.
pub const RELEASES: &[Release] = &[
    Release {
        version: "2.1.11",
        libzpool: Check::Verified(
            "Debian 12's libzpool5linux, by the test suite against zprof-lab's own counts",
        ),
        kernel: Check::Verified(
            "Debian 12's zfs-dkms on Linux 6.1 in a qemu guest, against fio and zpool iostat -w",
        ),
    },
    Release {
        version: "2.3.2",
        libzpool: Check::Verified(
            "bookworm-backports' libzpool6linux, by the test suite against zprof-lab's own counts",
        ),
        kernel: Check::Verified(
            "bookworm-backports' zfs-dkms on Debian 12's Linux 6.12 in a qemu guest, against fio and zpool iostat -w",
        ),
    },
    Release {
        version: "2.3.9",
        libzpool: Check::Unverified(
            "its libzpool needs glibc 2.38 and is not run here: symbols and offsets are checked against the build, the behaviour is the 2.3 series'",
        ),
        kernel: Check::Unverified(
            "zfs.ko 2.3.9 is not run here: probe points and semantics come from its source",
        ),
    },
    Release {
        version: "2.4.4",
        libzpool: Check::Verified(
            "trixie-backports' libzpool7linux (run under trixie's loader), by the test suite against zprof-lab's own counts",
        ),
        kernel: Check::Verified(
            "trixie-backports' zfs-dkms on its Linux 6.17 in a qemu guest, against fio and zpool iostat -w",
        ),
    },
];

/// How the reason of a point absent for a later release's feature begins.
pub const ADDED_LATER: &str = "not in OpenZFS";

/// Functions a feature of a later release brought: on an older build the
/// point says the release has no such feature, rather than that a function
/// is missing. (Function as the catalogue names it, first release, feature.)
pub const ADDED_IN: &[(&str, (u32, u32, u32), &str)] = &[
    ("dmu_write_uio_direct", (2, 3, 0), "Direct I/O"),
    ("dmu_read_uio_direct", (2, 3, 0), "Direct I/O"),
    ("brt_sync", (2, 2, 0), "block cloning"),
    ("ddt_log_begin", (2, 3, 0), "fast dedup's log"),
    ("ddt_log_commit", (2, 3, 0), "fast dedup's log"),
    ("ddt_log_take_first", (2, 3, 0), "fast dedup's log"),
];

/// Instructions at a function's start that a uprobe may be placed after. The
/// kernel emulates a few instructions at a probe (push, jmp, call, nop) and
/// single-steps the rest, which costs several microseconds per hit; these
/// prefixes are single-stepped but change nothing the program reads, so the
/// probe goes on the next instruction instead. `None`: any function.
/// (Function, exact bytes, what they are.)
pub const SKIPPABLE_PROLOGUES: &[(Option<&str>, &[u8], &str)] = &[
    (
        None,
        &[0xf3, 0x0f, 0x1e, 0xfa],
        "endbr64 (a CET marker that changes no register)",
    ),
    // zio_interrupt(zio) is `xor %edx,%edx; mov $2,%esi; jmp zio_taskq_dispatch`
    // in 2.1.11 and 2.3.x alike: the first two set the tail call's other
    // arguments, flush_done_entry reads only the zio in %rdi, and the jmp is
    // emulated. It runs for every leaf I/O, so the saving is per I/O.
    (
        Some("zio_interrupt"),
        &[0x31, 0xd2, 0xbe, 0x02, 0x00, 0x00, 0x00],
        "xor %edx,%edx; mov $2,%esi (set-up of the tail call; the zio in %rdi is untouched)",
    ),
];

/// How many bytes of `function`'s start (`code`) a uprobe can skip, and why
/// (prefixes in sequence: endbr64, then a function's own set-up).
pub fn prologue_skip(function: &str, code: &[u8]) -> Option<(usize, String)> {
    let mut skipped = 0;
    let mut why: Vec<&str> = Vec::new();
    while let Some((_, bytes, what)) = SKIPPABLE_PROLOGUES.iter().find(|(only, bytes, _)| {
        only.is_none_or(|f| f == function) && code[skipped..].starts_with(bytes)
    }) {
        skipped += bytes.len();
        why.push(what);
    }
    (skipped > 0).then(|| (skipped, why.join(", then ")))
}

/// How zprof interprets the traced build.
#[derive(Debug, Clone)]
pub struct Interpretation {
    /// The version traced, when it could be told.
    pub version: Option<String>,
    /// Its series, when zprof has one.
    pub series: Option<&'static Series>,
    /// Whether this release was verified, and how.
    pub status: Status,
}

/// What a report says about the version traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Verified on this target.
    Verified(String),
    /// Interpreted from source with a series' rules, but not run by zprof's tests.
    Unverified(String),
    /// No series applies: the release-dependent stages are unavailable.
    Unknown(String),
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Verified(how) => write!(f, "verified ({how})"),
            Status::Unverified(risk) => write!(f, "unverified: {risk}"),
            Status::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

impl Status {
    /// One word for JSON and tests: verified, unverified or unknown.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Verified(_) => "verified",
            Status::Unverified(_) => "unverified",
            Status::Unknown(_) => "unknown",
        }
    }
}

/// "2.3.2" or "2.3.2-2~bpo12+2" -> (2, 3, 2).
pub fn parse_version(version: &str) -> Option<(u32, u32, u32)> {
    let core = version
        .trim()
        .trim_start_matches("zfs-")
        .split(['-', '~', '+', '_'])
        .next()?;
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some((major, minor, patch))
}

/// Interprets a version (None when it could not be told) on a target.
pub fn interpret(version: Option<&str>, kernel: bool) -> Interpretation {
    let Some(text) = version else {
        return Interpretation {
            version: None,
            series: None,
            status: Status::Unknown(
                "the build names no OpenZFS version (no zfs-X.Y.Z string, no known build-id, no package): pass --zfs-version X.Y.Z if you know it".into(),
            ),
        };
    };
    let Some(parsed) = parse_version(text) else {
        return Interpretation {
            version: Some(text.to_owned()),
            series: None,
            status: Status::Unknown(format!(
                "'{text}' is not a version zprof can read (expected X.Y.Z)"
            )),
        };
    };
    let series = SERIES
        .iter()
        .find(|s| s.first <= parsed && parsed <= s.last);
    let normalized = format!("{}.{}.{}", parsed.0, parsed.1, parsed.2);
    let release = RELEASES.iter().find(|r| r.version == normalized);
    let status = match (series, release) {
        (None, _) => Status::Unknown(format!(
            "OpenZFS {normalized} is outside the series zprof knows ({}); the stages that depend on the release are unavailable",
            SERIES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )),
        (Some(_), Some(r)) => match if kernel { r.kernel } else { r.libzpool } {
            Check::Verified(how) => Status::Verified(how.to_owned()),
            Check::Unverified(risk) => Status::Unverified(risk.to_owned()),
        },
        (Some(s), None) => Status::Unverified(format!(
            "interpreted with the {} series' rules (from {}); a patch release can still move a struct or a call zprof relies on",
            s.name, s.source
        )),
    };
    Interpretation {
        version: Some(normalized),
        series,
        status,
    }
}

impl Interpretation {
    /// Load-time semantics for the eBPF programs (zeroes without a series: the
    /// programs of the sensitive groups are then not attached).
    pub fn semantics(&self, kernel: bool) -> Semantics {
        self.series.map_or_else(Semantics::default, |s| {
            if kernel { s.kernel } else { s.libzpool }
        })
    }

    /// The function that plays `function`'s role (named as in the 2.1 catalogue)
    /// in this build: the series' preferred name that `present` has, else the
    /// name itself.
    pub fn function_name<'a>(&self, function: &'a str, present: impl Fn(&str) -> bool) -> &'a str
    where
        'static: 'a,
    {
        let Some(series) = self.series else {
            return function;
        };
        match series.functions.iter().find(|(name, _)| *name == function) {
            Some((_, candidates)) => candidates
                .iter()
                .copied()
                .find(|c| present(c))
                .unwrap_or(candidates[0]),
            None => function,
        }
    }

    /// Why a build has no `function` when a later release brought it: the
    /// feature it belongs to came after the traced version (the reason
    /// begins with [`ADDED_LATER`]).
    pub fn added_later(&self, function: &str) -> Option<String> {
        let (_, since, feature) = ADDED_IN.iter().find(|(f, _, _)| *f == function)?;
        let version = self.version.as_deref()?;
        let parsed = parse_version(version)?;
        (parsed < *since).then(|| {
            format!(
                "{ADDED_LATER} {version}: {feature} came in {}.{}",
                since.0, since.1
            )
        })
    }

    /// Why `group` cannot be measured on this build, if it cannot.
    pub fn unavailable(&self, group: &str) -> Option<String> {
        if self.series.is_some() {
            return None;
        }
        let (_, why) = SENSITIVE_GROUPS.iter().find(|(g, _)| *g == group)?;
        Some(format!(
            "{why}, and this build's release is {}",
            self.status
        ))
    }

    /// A version the user gave (`--zfs-version`) is not one zprof identified:
    /// the build itself was not verified, whatever its release.
    pub fn given_by_user(mut self, given: bool) -> Self {
        if given && let Status::Verified(_) = self.status {
            self.status = Status::Unverified(format!(
                "release {} given with --zfs-version; zprof verified its Debian build, not this one",
                self.version_text()
            ));
        }
        self
    }

    /// The version as reports print it.
    pub fn version_text(&self) -> String {
        self.version
            .clone()
            .unwrap_or_else(|| "unknown version".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_packages_and_git_strings() {
        assert_eq!(parse_version("2.1.11"), Some((2, 1, 11)));
        assert_eq!(parse_version("2.3.2-2~bpo12+2"), Some((2, 3, 2)));
        assert_eq!(parse_version("zfs-2.3.9-0-g4c0eb72"), Some((2, 3, 9)));
        assert_eq!(parse_version("2.4"), Some((2, 4, 0)));
        assert_eq!(parse_version("92f430b"), None);
    }

    #[test]
    fn each_version_gets_its_series_and_status() {
        let v2111 = interpret(Some("2.1.11"), false);
        assert_eq!(v2111.series.unwrap().name, "2.1");
        assert_eq!(v2111.status.word(), "verified");
        let v232 = interpret(Some("2.3.2"), false);
        assert_eq!(v232.semantics(false).zio_flag_io_bypass_bit, 22);
        assert_eq!(v232.semantics(false).compress_level_arg, 5);
        assert_eq!(v232.status.word(), "verified");
        assert_eq!(
            interpret(Some("2.3.2"), true).status.word(),
            "verified",
            "by the 6.12-2.3.2 guest cell"
        );
        assert_eq!(
            interpret(Some("2.4.4"), true).status.word(),
            "verified",
            "by the 6.17-2.4.4 guest cell"
        );
        assert_eq!(interpret(Some("2.3.9"), false).status.word(), "unverified");
        assert_eq!(interpret(Some("2.3.9"), true).status.word(), "unverified");
        let v225 = interpret(Some("2.2.5"), false);
        assert_eq!(v225.series.unwrap().name, "2.2.4-2.2.x");
        assert!(!v225.series.unwrap().commit_timeout.single_writer_waits);
        assert!(
            interpret(Some("2.2.3"), false)
                .series
                .unwrap()
                .commit_timeout
                .single_writer_waits
        );
        assert_eq!(v225.semantics(false).zio_flag_io_bypass_bit, 21);
        assert_eq!(v225.status.word(), "unverified");
    }

    #[test]
    fn unknown_versions_make_sensitive_stages_unavailable() {
        for version in [None, Some("2.4.99"), Some("0.8.6"), Some("garbage")] {
            let it = interpret(version, false);
            assert_eq!(it.status.word(), "unknown", "{version:?}");
            assert_eq!(it.semantics(false), Semantics::default());
            assert!(it.unavailable("vdev").is_some());
            assert!(
                it.unavailable("zil").is_none(),
                "zil_commit is read the same way in every release"
            );
        }
        assert!(
            interpret(Some("2.3.2"), false)
                .unavailable("vdev")
                .is_none()
        );
    }

    #[test]
    fn renamed_and_wrapped_functions_resolve_per_build() {
        let v232 = interpret(Some("2.3.2"), false);
        let has = |names: &'static [&'static str]| move |f: &str| names.contains(&f);
        assert_eq!(
            v232.function_name("lz4_compress_zfs", has(&["zfs_lz4_compress"])),
            "zfs_lz4_compress"
        );
        // 2.3.2 has no txg_wait_synced_flags; 2.3.9 does, and it is preferred.
        assert_eq!(
            v232.function_name("txg_wait_synced", has(&["txg_wait_synced"])),
            "txg_wait_synced"
        );
        let both = has(&["txg_wait_synced", "txg_wait_synced_flags"]);
        assert_eq!(
            v232.function_name("txg_wait_synced", both),
            "txg_wait_synced_flags"
        );
        let v2111 = interpret(Some("2.1.11"), false);
        assert_eq!(
            v2111.function_name("lz4_compress_zfs", has(&["lz4_compress_zfs"])),
            "lz4_compress_zfs"
        );
    }

    #[test]
    fn prologues_are_skipped_only_where_the_bytes_match() {
        let endbr_push = [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5];
        assert_eq!(
            prologue_skip("zil_commit", &endbr_push).map(|s| s.0),
            Some(4)
        );
        assert_eq!(prologue_skip("zil_commit", &[0x55, 0x48, 0x89, 0xe5]), None);
        let interrupt = [
            0x31, 0xd2, 0xbe, 0x02, 0x00, 0x00, 0x00, 0xe9, 0xa4, 0x66, 0xff, 0xff,
        ];
        assert_eq!(
            prologue_skip("zio_interrupt", &interrupt).map(|s| s.0),
            Some(7)
        );
        // The same bytes elsewhere may set an argument the program reads.
        assert_eq!(prologue_skip("zio_flush", &interrupt), None);
        // Another immediate is another call: not skipped.
        let other = [0x31, 0xd2, 0xbe, 0x03, 0x00, 0x00, 0x00, 0xe9];
        assert_eq!(prologue_skip("zio_interrupt", &other), None);
        // A CET build's zio_interrupt: endbr64, then the same set-up.
        let cet: Vec<u8> = [0xf3, 0x0f, 0x1e, 0xfa]
            .iter()
            .chain(&interrupt)
            .copied()
            .collect();
        assert_eq!(prologue_skip("zio_interrupt", &cet).map(|s| s.0), Some(11));
    }

    #[test]
    fn series_do_not_overlap_and_bits_stay_in_the_low_word() {
        for pair in SERIES.windows(2) {
            assert!(
                pair[0].last < pair[1].first,
                "{} overlaps {}",
                pair[0].name,
                pair[1].name
            );
        }
        for s in SERIES {
            assert!(s.libzpool.zio_flag_io_bypass_bit < 32 && s.kernel.zio_flag_io_bypass_bit < 32);
        }
        for r in RELEASES {
            let parsed = parse_version(r.version).unwrap();
            assert!(
                SERIES.iter().any(|s| s.first <= parsed && parsed <= s.last),
                "{} has no series",
                r.version
            );
        }
    }
}
