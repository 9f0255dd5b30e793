//! The probe catalogue: which OpenZFS functions each stage probes, with which eBPF
//! program, on which target.
//!
//! Rows name functions as OpenZFS 2.1 does; what a later release renames, wraps
//! or does differently is in [`crate::zfs::releases`], which picks the name and the
//! flush mode per build. A row whose function is absent from the traced build
//! makes its stage "unavailable" with the reason, and the other stages carry on.

use serde::Serialize;

/// Which targets a probe point applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Targets {
    /// Both the kernel module and libzpool.
    Both,
    /// Only zfs.ko (kprobes).
    Kernel,
    /// Only libzpool (uprobes).
    Libzpool,
}

/// How a point is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Always attached when the function exists.
    Primary,
    /// Needs struct offsets; skipped (with the reason) when there are none.
    NeedsOffsets,
    /// Attached only when offsets are missing, to replace a `NeedsOffsets` point.
    FallbackWithoutOffsets,
    /// Needs the request layer's offsets (bio and zvol members): without
    /// them a bio cannot be told read from write or tied to its zvol.
    NeedsRequestOffsets,
    /// A probe pair per call of a high-rate function (a workload operation, a
    /// block checksum). A uprobe costs about 0.5 us per hit on top of its
    /// program (a trap into the kernel), so on libzpool the pair is attached
    /// only with `--full-timing`; otherwise `UprobeDefault` says what is done.
    PerOp(UprobeDefault),
}

/// What a `PerOp` point does on uprobes without `--full-timing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UprobeDefault {
    /// The named entry-only program counts calls and bytes (one trap per call
    /// instead of two, and no timing).
    Count(&'static str),
    /// Not attached; the text says where the information comes from instead.
    Skip(&'static str),
}

/// One function probed for a stage.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProbePoint {
    /// The report group this point feeds (see [`GROUPS`]).
    pub group: &'static str,
    /// Function name in zfs.ko / libzpool.
    pub function: &'static str,
    /// eBPF program run at entry (without the `_k`/`_u` suffix); `None`
    /// for a point whose return alone says what the stage needs.
    pub entry: Option<&'static str>,
    /// eBPF program run at return, if the duration is measured.
    pub ret: Option<&'static str>,
    /// Where this point applies.
    pub targets: Targets,
    /// Whether it needs offsets or replaces a point that does.
    pub role: Role,
    /// Only where flushes are timed this way (`zprof_common::FLUSH_*`); `None`: always.
    pub flush_mode: Option<u32>,
    /// For a kernel static (in kallsyms, not exported): what the stage gains from it.
    pub kernel_gain: Option<&'static str>,
    /// Optional struct members ("struct.member") its programs cannot do
    /// without: left out, saying so, where the offsets lack one.
    pub needs_members: &'static [&'static str],
}

/// Stage groups in pipeline order, with a one-line description each.
pub const GROUPS: &[(&str, &str)] = &[
    (
        "requests",
        "file and zvol requests as the application sees them, per dataset, process and cgroup, and which took the Direct I/O path (kernel only)",
    ),
    (
        "workload",
        "reads and writes the workload issued (ops, bytes, latency)",
    ),
    (
        "throttle",
        "dmu_tx_assign / dmu_tx_wait: writers delayed by the write throttle; on the kernel each delay it computed, with the dirty data it came from",
    ),
    (
        "compression",
        "zio_compress_data by algorithm, with the achieved ratio, per pool (the pool of the zio its taskq thread runs)",
    ),
    (
        "checksum",
        "checksums computed on write and verified on read",
    ),
    (
        "reads",
        "zio_read: blocks read from the disks (ARC misses, prefetch), for a read's fan-out over leaves; where the ARC served each block (hit, L2ARC, disk)",
    ),
    (
        "vdev",
        "leaf I/O queue wait and disk time, as zpool iostat -l/-w",
    ),
    (
        "flush",
        "cache flushes: zio_flush calls, or each leaf flush from issue to completion where they run on a taskq",
    ),
    ("zil", "zil_commit: the fsync / O_SYNC path"),
    (
        "txg",
        "spa_sync per txg split into its phases (writing out, later passes, frees, dedup, clones, scan, removal, metaslabs, labels, cleanup; the blocks the sync read itself), each txg's open, quiescing and sync times and dirty bytes (as the txgs kstat keeps them), and time spent in txg_wait_synced",
    ),
    (
        "dedup",
        "ddt_lookup per deduped block and ddt_sync per txg, split with fast dedup (2.3 and later) into appending to the dedup log and flushing it: what dedup costs",
    ),
    (
        "alloc",
        "metaslab_alloc in the special and dedup classes: the blocks meant for them, and those that found them full and went to the normal class",
    ),
    (
        "pools",
        "spa_remove: pools exported or destroyed, named in the rows they left and forgotten by serve and top",
    ),
];

/// Groups with no probe point on libzpool, and why (shown by `zprof probes`).
pub const ABSENT_ON_LIBZPOOL: &[(&str, &str)] = &[(
    "requests",
    "libzpool has no file system or zvol layer: its workload rows (dmu_write, dmu_read) are its requests",
)];

const fn point(
    group: &'static str,
    function: &'static str,
    entry: &'static str,
    ret: Option<&'static str>,
    targets: Targets,
    role: Role,
) -> ProbePoint {
    ProbePoint {
        group,
        function,
        entry: Some(entry),
        ret,
        targets,
        role,
        flush_mode: None,
        kernel_gain: None,
        needs_members: &[],
    }
}

/// The functions that time each phase of a txg's sync, by their role (as
/// OpenZFS 2.1 names them): a phase is measured where one of them is
/// attached, or where the release has none of them (no block cloning
/// before 2.2: that phase is 0).
pub const SYNC_PHASE_FUNCTIONS: &[(&str, &[usize])] = {
    use zprof_common::sync_phase::*;
    &[
        ("dsl_pool_sync", &[WRITE_OUT, LATER_PASSES]),
        ("bplist_iterate", &[FREES]),
        ("bpobj_iterate", &[FREES]),
        ("ddt_sync", &[DEDUP]),
        ("brt_sync", &[CLONES]),
        ("dsl_scan_sync", &[SCAN]),
        ("svr_sync", &[REMOVAL]),
        ("spa_flush_metaslabs", &[METASLABS]),
        ("vdev_sync", &[METASLABS]),
        ("vdev_sync_done", &[METASLABS]),
        ("vdev_config_sync", &[LABELS]),
        ("dsl_pool_sync_done", &[DONE]),
    ]
};

/// A phase of a txg's sync (see zprof-ebpf's sync_phases): `entry` opens
/// the phase, the shared return program closes it.
const fn sync_phase_point(function: &'static str, entry: &'static str) -> ProbePoint {
    point(
        "txg",
        function,
        entry,
        Some("sync_phase_return"),
        Both,
        Primary,
    )
}

/// A point timed by nothing but its return (what the function returns, or
/// the end of a span an earlier point opened).
const fn return_point(
    group: &'static str,
    function: &'static str,
    ret: &'static str,
) -> ProbePoint {
    ProbePoint {
        group,
        function,
        entry: None,
        ret: Some(ret),
        targets: Both,
        role: Primary,
        flush_mode: None,
        kernel_gain: None,
        needs_members: &[],
    }
}

/// A flush point used only in one flush mode.
const fn flush_point(
    function: &'static str,
    entry: &'static str,
    ret: Option<&'static str>,
    role: Role,
    mode: u32,
) -> ProbePoint {
    ProbePoint {
        group: "flush",
        function,
        entry: Some(entry),
        ret,
        targets: Both,
        role,
        flush_mode: Some(mode),
        kernel_gain: None,
        needs_members: &[],
    }
}

/// A static function only zfs.ko has (kallsyms names it), used where it makes a
/// stage more exact than the exported functions can; `gain` says how.
const fn kernel_static(
    group: &'static str,
    function: &'static str,
    entry: &'static str,
    role: Role,
    gain: &'static str,
) -> ProbePoint {
    ProbePoint {
        group,
        function,
        entry: Some(entry),
        ret: None,
        targets: Kernel,
        role,
        flush_mode: None,
        kernel_gain: Some(gain),
        needs_members: &[],
    }
}

const DISK_START_GAIN: &str = "without offsets, the queue wait and disk time split where the leaf I/O starts, instead of one queue-to-done span";
const LWB_GAIN: &str = "each ZIL log block timed from issue to written and flushed: the commit's own I/O, not inferred";

use Role::{FallbackWithoutOffsets, NeedsOffsets, NeedsRequestOffsets, PerOp, Primary};
use Targets::{Both, Kernel, Libzpool};
use UprobeDefault::{Count, Skip};
use zprof_common::{FLUSH_LEAF_ISSUE_TO_DONE, FLUSH_TIMED_CALL};

const TX_ASSIGN_SKIPPED: &str = "a probe pair per write (about 1.5 us on uprobes); dmu_tx_wait measures throttling; --full-timing adds it";
const CHECKSUM_SKIPPED: &str = "a probe pair per block (about 1.5 us on uprobes; a count alone would still cost 0.8 us, \
     1.4% of a 4k write's CPU); checksum CPU comes from the CPU samples; --full-timing counts and times every block";

const EXECUTE_SKIPPED: &str = "a uprobe per zio a taskq thread runs (about ten per block written: 74,000/s, the busiest \
     program, at 150 MiB/s of 128k writes), which only names the pool of compressions and dedup lookups; --full-timing splits \
     them by pool";

const ARC_PATHS_SKIPPED: &str = "a uprobe per ARC read and per access to a buffer the dbuf layer holds (several per write: \
     with them the lab's sync writes lost up to a fifth of their rate and the SLOG what-if overshot 2.3's by 68%); \
     --full-timing counts where the ARC served each block (the kernel always does)";

const ZIO_WAIT_SKIPPED: &str = "a probe pair per read call of every thread (dmu_read waits on a zio each time, cached or \
     not) to time the sync thread's waits for its own reads; they are counted without it; --full-timing times them";

const ALLOC_SKIPPED: &str = "a probe pair per block allocation (every block written) to see the special and dedup classes fill; \
     --full-timing counts them";

const ARC_READ_SKIPPED: &str = "a probe pair per ARC read (hundreds of thousands a second when the ARC serves a workload); \
     spa_read_history_add counts each read by path with one probe; --full-timing times hits and waited misses";

/// A request-layer point (kernel only: libzpool has neither the ZPL nor zvols).
const fn request_point(
    function: &'static str,
    entry: &'static str,
    ret: Option<&'static str>,
    role: Role,
) -> ProbePoint {
    ProbePoint {
        group: "requests",
        function,
        entry: Some(entry),
        ret,
        targets: Kernel,
        role,
        flush_mode: None,
        kernel_gain: None,
        needs_members: &[],
    }
}

/// Every probe point, named as in OpenZFS 2.1.
pub const POINTS: &[ProbePoint] = &[
    request_point(
        "zfs_read",
        "file_read_start",
        Some("file_request_done"),
        Primary,
    ),
    request_point(
        "zfs_write",
        "file_write_start",
        Some("file_request_done"),
        Primary,
    ),
    request_point(
        "zfs_fsync",
        "file_fsync_start",
        Some("file_request_done"),
        Primary,
    ),
    // Direct I/O (2.3 and later): the file requests that took ZFS's direct
    // path, whatever they asked for.
    request_point("dmu_write_uio_direct", "direct_path_entry", None, Primary),
    request_point("dmu_read_uio_direct", "direct_path_entry", None, Primary),
    // A zvol's submit_bio (static): where a bio enters, in its submitter's context.
    request_point("zvol_submit_bio", "zvol_submit", None, NeedsRequestOffsets),
    // The kernel's own (not zfs.ko's): where any bio ends; only zvol bios are kept.
    request_point("bio_endio", "zvol_bio_done", None, NeedsRequestOffsets),
    // zfs recv: the stream it read and its time, by pool (once per receive).
    ProbePoint {
        needs_members: &["dmu_recv_cookie.drc_os"],
        ..point(
            "workload",
            "dmu_recv_stream",
            "recv_stream_entry",
            Some("recv_stream_return"),
            Both,
            Primary,
        )
    },
    point(
        "workload",
        "dmu_write",
        "dmu_write_entry",
        Some("write_return"),
        Libzpool,
        PerOp(Count("dmu_write_count")),
    ),
    point(
        "workload",
        "dmu_read",
        "dmu_read_entry",
        Some("read_return"),
        Libzpool,
        PerOp(Count("dmu_read_count")),
    ),
    point(
        "workload",
        "dmu_write_uio_dnode",
        "uio_write_entry",
        Some("write_return"),
        Kernel,
        Primary,
    ),
    point(
        "workload",
        "dmu_read_uio_dnode",
        "uio_read_entry",
        Some("read_return"),
        Kernel,
        Primary,
    ),
    point(
        "throttle",
        "dmu_tx_assign",
        "tx_assign_entry",
        Some("tx_assign_return"),
        Both,
        PerOp(Skip(TX_ASSIGN_SKIPPED)),
    ),
    point(
        "throttle",
        "dmu_tx_wait",
        "tx_wait_entry",
        Some("tx_wait_return"),
        Both,
        Primary,
    ),
    // Each delay the throttle computed, with the dirty bytes it came from:
    // dmu_tx_delay is static (inlined in the kernels zprof runs on), but
    // calls this DTRACE probe function, a real noinline function in zfs.ko
    // built without tracepoints; libzpool compiles the probe to nothing.
    point(
        "throttle",
        "trace_zfs_delay__mintime",
        "tx_delay_entry",
        None,
        Kernel,
        Primary,
    ),
    point(
        "compression",
        "zio_compress_data",
        "compress_entry",
        Some("compress_return"),
        Both,
        Primary,
    ),
    point(
        "compression",
        "zfs_zstd_compress",
        "zstd_entry",
        Some("zstd_return"),
        Both,
        Primary,
    ),
    point(
        "compression",
        "lz4_compress_zfs",
        "lz4_entry",
        Some("lz4_return"),
        Both,
        Primary,
    ),
    point("reads", "zio_read", "block_read_entry", None, Both, Primary),
    // Where the ARC served each block from: counted where every arc_read
    // ends (its flags by value), the path from the block read it issued.
    point(
        "reads",
        "spa_read_history_add",
        "arc_read_end_entry",
        None,
        Both,
        PerOp(Skip(ARC_PATHS_SKIPPED)),
    ),
    point(
        "reads",
        "zio_read_phys",
        "arc_l2_read_entry",
        None,
        Both,
        Primary,
    ),
    // The L2ARC feed's writes: which leaves are cache devices (libzpool).
    point(
        "reads",
        "zio_write_phys",
        "l2_feed_write_entry",
        None,
        Libzpool,
        Primary,
    ),
    // Reads of blocks whose buffers the dbuf layer holds: ZFS's other hits.
    point(
        "reads",
        "arc_buf_access",
        "arc_held_hit_entry",
        None,
        Both,
        PerOp(Skip(ARC_PATHS_SKIPPED)),
    ),
    // Timed (libzpool, --full-timing): arc_flags is a stack argument, read
    // through the entry's stack pointer, not yet checked under kprobes.
    point(
        "reads",
        "arc_read",
        "arc_read_entry",
        Some("arc_read_return"),
        Libzpool,
        PerOp(Skip(ARC_READ_SKIPPED)),
    ),
    // The pool of the zio a taskq thread runs, for the (de)compressions
    // on that thread, which are given no zio.
    point(
        "compression",
        "zio_execute",
        "zio_execute_entry",
        None,
        Both,
        PerOp(Skip(EXECUTE_SKIPPED)),
    ),
    point(
        "compression",
        "zio_decompress_data",
        "decompress_entry",
        Some("decompress_return"),
        Both,
        Primary,
    ),
    point(
        "checksum",
        "zio_checksum_compute",
        "checksum_entry",
        Some("checksum_return"),
        Both,
        PerOp(Skip(CHECKSUM_SKIPPED)),
    ),
    point(
        "checksum",
        "zio_checksum_error",
        "verify_entry",
        Some("verify_return"),
        Both,
        Primary,
    ),
    point(
        "vdev",
        "vdev_stat_update",
        "vdev_stat_entry",
        None,
        Kernel,
        NeedsOffsets,
    ),
    point(
        "vdev",
        "vdev_queue_io_done",
        "vdev_done_entry",
        None,
        Libzpool,
        NeedsOffsets,
    ),
    point(
        "vdev",
        "vdev_queue_io",
        "vdev_queue_entry",
        None,
        Both,
        FallbackWithoutOffsets,
    ),
    point(
        "vdev",
        "vdev_queue_io_done",
        "vdev_queue_done_entry",
        None,
        Both,
        FallbackWithoutOffsets,
    ),
    point(
        "vdev",
        "zio_vdev_io_bypass",
        "vdev_bypass_entry",
        None,
        Both,
        FallbackWithoutOffsets,
    ),
    kernel_static(
        "vdev",
        "vdev_disk_io_start",
        "vdev_disk_start_entry",
        FallbackWithoutOffsets,
        DISK_START_GAIN,
    ),
    kernel_static(
        "vdev",
        "vdev_file_io_start",
        "vdev_disk_start_entry",
        FallbackWithoutOffsets,
        DISK_START_GAIN,
    ),
    flush_point(
        "zio_flush",
        "flush_entry",
        Some("flush_return"),
        Primary,
        FLUSH_TIMED_CALL,
    ),
    flush_point(
        "zio_flush",
        "flush_leaf_entry",
        None,
        NeedsOffsets,
        FLUSH_LEAF_ISSUE_TO_DONE,
    ),
    flush_point(
        "zio_interrupt",
        "flush_done_entry",
        None,
        NeedsOffsets,
        FLUSH_LEAF_ISSUE_TO_DONE,
    ),
    point(
        "zil",
        "zil_commit",
        "zil_commit_entry",
        Some("zil_commit_return"),
        Both,
        Primary,
    ),
    // zil_commit_waiter's timed wait for its log block to fill (spl's on the kernel).
    point(
        "zil",
        "cv_timedwait_hires",
        "timed_wait_entry",
        Some("timed_wait_return"),
        Both,
        Primary,
    ),
    kernel_static(
        "zil",
        "zil_lwb_write_issue",
        "lwb_issue_entry",
        NeedsOffsets,
        LWB_GAIN,
    ),
    kernel_static(
        "zil",
        "zil_lwb_flush_vdevs_done",
        "lwb_done_entry",
        NeedsOffsets,
        LWB_GAIN,
    ),
    point(
        "txg",
        "spa_sync",
        "spa_sync_entry",
        Some("spa_sync_return"),
        Both,
        Primary,
    ),
    // Where each sync's time goes: the functions spa_sync calls on its own
    // thread, a phase each (zprof_common::sync_phase; ddt_sync's programs
    // above time the dedup phase too). One return program ends them all.
    sync_phase_point("dsl_pool_sync", "sync_pool_entry"),
    // Allocations meant for the special and dedup classes, and those
    // that found the class full (ENOSPC: the block goes to the normal
    // class); the classes are told apart by the pool's class pointers.
    ProbePoint {
        needs_members: &["spa.spa_special_class", "spa.spa_dedup_class"],
        ..point(
            "alloc",
            "metaslab_alloc",
            "alloc_class_entry",
            Some("alloc_class_return"),
            Both,
            PerOp(Skip(ALLOC_SKIPPED)),
        )
    },
    // The sync thread's waits for the blocks it read itself (counted at
    // zio_read): timed from zio_wait's entry to its return on that thread.
    point(
        "txg",
        "zio_wait",
        "sync_read_wait_entry",
        Some("sync_read_wait_return"),
        Both,
        PerOp(Skip(ZIO_WAIT_SKIPPED)),
    ),
    sync_phase_point("bplist_iterate", "sync_frees_entry"),
    sync_phase_point("bpobj_iterate", "sync_frees_entry"),
    sync_phase_point("brt_sync", "sync_clones_entry"),
    sync_phase_point("dsl_scan_sync", "sync_scan_entry"),
    sync_phase_point("svr_sync", "sync_removal_entry"),
    sync_phase_point("spa_flush_metaslabs", "sync_metaslabs_entry"),
    sync_phase_point("vdev_sync", "sync_metaslabs_entry"),
    sync_phase_point("vdev_sync_done", "sync_metaslabs_entry"),
    sync_phase_point("vdev_config_sync", "sync_labels_entry"),
    sync_phase_point("dsl_pool_sync_done", "sync_done_entry"),
    // Each txg's life as the txgs kstat keeps it (txg_history): its birth
    // and quiesced stamps as ZFS passes them (a few calls per txg), and the
    // close of its history after spa_sync, where its dirty bytes are read
    // (txg_stat_t, with the offsets; without them the times only).
    point(
        "txg",
        "spa_txg_history_add",
        "txg_born_entry",
        None,
        Both,
        Primary,
    ),
    point(
        "txg",
        "spa_txg_history_set",
        "txg_state_entry",
        None,
        Both,
        Primary,
    ),
    point(
        "txg",
        "spa_txg_history_fini_io",
        "txg_synced_entry",
        Some("txg_synced_return"),
        Both,
        Primary,
    ),
    // Inside fini_io, vdev_get_stats fills the stats at the sync's end; its
    // return reads them (other callers' returns are ignored), for the
    // txg's bytes read and written as the kstat counts them.
    return_point("txg", "vdev_get_stats", "txg_io_return"),
    // Dedup: called only where a dataset dedups, so free elsewhere.
    point(
        "dedup",
        "ddt_lookup",
        "ddt_lookup_entry",
        Some("ddt_lookup_return"),
        Both,
        Primary,
    ),
    point(
        "dedup",
        "ddt_sync",
        "ddt_sync_entry",
        Some("ddt_sync_return"),
        Both,
        Primary,
    ),
    // Fast dedup's log (2.3 and later), inside ddt_sync: the txg's changes
    // appended, then logged entries flushed into the table.
    point(
        "dedup",
        "ddt_log_begin",
        "ddt_log_begin_entry",
        None,
        Both,
        Primary,
    ),
    return_point("dedup", "ddt_log_commit", "ddt_log_commit_return"),
    return_point("dedup", "ddt_log_take_first", "ddt_log_take_return"),
    point(
        "txg",
        "txg_wait_synced",
        "txg_wait_entry",
        Some("txg_wait_return"),
        Both,
        Primary,
    ),
    point(
        "pools",
        "spa_remove",
        "spa_remove_entry",
        None,
        Both,
        Primary,
    ),
];

/// Whether a point applies to the kernel (`true`) or libzpool (`false`) target.
pub fn applies(point: &ProbePoint, kernel: bool) -> bool {
    match point.targets {
        Both => true,
        Kernel => kernel,
        Libzpool => !kernel,
    }
}

/// The program name for a target: `_k` (kprobe) or `_u` (uprobe) suffix.
pub fn program_name(base: &str, kernel: bool) -> String {
    format!("{base}_{}", if kernel { "k" } else { "u" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_names_a_known_group() {
        for p in POINTS {
            assert!(
                GROUPS.iter().any(|(g, _)| *g == p.group),
                "{} has group {}",
                p.function,
                p.group
            );
        }
    }

    #[test]
    fn each_target_has_a_workload_source() {
        for kernel in [false, true] {
            assert!(
                POINTS
                    .iter()
                    .any(|p| p.group == "workload" && applies(p, kernel))
            );
        }
    }

    #[test]
    fn program_names_have_target_suffix() {
        assert_eq!(program_name("zil_commit_entry", true), "zil_commit_entry_k");
        assert_eq!(
            program_name("zil_commit_entry", false),
            "zil_commit_entry_u"
        );
    }
}
