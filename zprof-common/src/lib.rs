//! Types shared by zprof's eBPF programs and its user-space side.
//!
//! Everything that crosses the user/kernel boundary is defined here once, as
//! `#[repr(C)]` structs made only of `u32`/`u64` fields with explicit padding, so the
//! two sides can never disagree about a layout. `Pod` impls (needed by aya to read
//! maps) live behind the `user` feature, because the eBPF side builds without aya.
#![no_std]

/// Number of latency buckets in a [`Hist`].
///
/// Buckets are log-linear: 8 sub-buckets per power of two (about 6% resolution),
/// from 1 ns up to 2^36 ns (69 s); anything longer lands in the last bucket.
/// Eight sub-buckets per octave merge exactly into the power-of-two buckets that
/// `zpool iostat -w` prints, so the two can be compared bucket for bucket.
pub const HIST_BUCKETS: usize = 273;
/// log2 of the sub-buckets per power of two.
pub const HIST_SUB_BITS: u32 = 3;
/// The largest power of two that still has its own buckets.
pub const HIST_MAX_SHIFT: u32 = 35;

/// Maps a latency in nanoseconds to its bucket index. Loop-free, so the eBPF
/// verifier accepts it, and shared with user space so both agree on bucket edges.
#[inline(always)]
pub fn hist_bucket(value: u64) -> usize {
    const SUB: u64 = 1 << HIST_SUB_BITS;
    if value < SUB {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros() as u64;
    if msb > HIST_MAX_SHIFT as u64 {
        return HIST_BUCKETS - 1;
    }
    let sub = (value >> (msb - HIST_SUB_BITS as u64)) & (SUB - 1);
    ((msb - HIST_SUB_BITS as u64 + 1) * SUB + sub) as usize
}

/// Smallest value that falls into bucket `index` (inverse of [`hist_bucket`]).
pub fn hist_bucket_low(index: usize) -> u64 {
    let sub_count = 1usize << HIST_SUB_BITS;
    if index < sub_count {
        return index as u64;
    }
    let octave = (index / sub_count) as u32 - 1 + HIST_SUB_BITS; // msb of the values
    let sub = (index % sub_count) as u64;
    if octave > HIST_MAX_SHIFT {
        return 1u64 << (HIST_MAX_SHIFT + 1);
    }
    ((1u64 << HIST_SUB_BITS) + sub) << (octave - HIST_SUB_BITS)
}

/// Largest value that falls into bucket `index`.
pub fn hist_bucket_high(index: usize) -> u64 {
    if index + 1 >= HIST_BUCKETS {
        return u64::MAX;
    }
    hist_bucket_low(index + 1) - 1
}

/// What a histogram measures. The numbering is part of the recording format:
/// append, never renumber.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// zio_compress_data: class = algorithm | level << 8; bytes in, bytes out.
    Compress = 1,
    /// zio_decompress_data: class = algorithm.
    Decompress = 2,
    /// zfs_zstd_compress, timed inside zio_compress_data (detail, not additive).
    ZstdCompress = 3,
    /// lz4_compress_zfs, timed inside zio_compress_data (detail, not additive).
    Lz4Compress = 4,
    /// zio_checksum_compute: class = checksum algorithm.
    ChecksumCompute = 5,
    /// zio_checksum_error (read-side verification).
    ChecksumVerify = 6,
    /// Leaf I/O queue wait (io_delta - io_delay): class = type << 8 | priority.
    VdevQueue = 7,
    /// Leaf I/O disk time (io_delay): class = type << 8 | priority.
    VdevDisk = 8,
    /// Leaf I/O total (io_delta): class = type << 8 | priority.
    VdevTotal = 9,
    /// Fallback without struct offsets: vdev_queue_io to vdev_queue_io_done.
    VdevQueueTimed = 10,
    /// zil_commit: one per fsync / O_SYNC write.
    ZilCommit = 11,
    /// spa_sync: one per txg.
    SpaSync = 12,
    /// txg_wait_synced. Class [`TXG_WAIT_IN_ZIL_COMMIT`] when the thread is
    /// inside zil_commit: the commit waited for a txg sync.
    TxgWaitSynced = 13,
    /// dmu_tx_assign: includes the write throttle's delay.
    TxAssign = 14,
    /// dmu_tx_wait: time a writer waited for dirty data to drain or a txg to open.
    TxWait = 15,
    /// zio_flush: cache flushes issued (count only).
    Flush = 16,
    /// Workload writes (dmu_write, or zfs_write/zvol on the kernel): bytes = request size.
    WorkloadWrite = 17,
    /// Workload reads (dmu_read, or zfs_read/zvol on the kernel).
    WorkloadRead = 18,
    /// Per zil_commit: the slowest leaf sync write that completed during the
    /// commit (the log block write on the critical path); class 1 when it went
    /// to a log vdev (SLOG), 0 for the main pool.
    ZilLogWrite = 19,
    /// Per zil_commit: time spent in cache flushes (zio_flush) during the commit.
    ZilFlush = 20,
    /// Per zil_commit: the rest (CPU, taskq hand-offs, wake-ups): the commit's
    /// duration less its log block write and its flushes.
    ZilOther = 21,
    /// Per zil_commit of a thread that wrote since its previous commit: the
    /// time from that commit's return to this one's entry (the thread's writes
    /// and its own work in between), when both were on the same pool. `bytes`
    /// counts the workload writes the thread made in between (the writes this
    /// commit makes durable: its sync writes), `bytes_out` their bytes. A thread's first commit has no
    /// previous one and is not recorded.
    SyncWriteCycle = 22,
    /// Per zil_commit with a log block write: the time the committing thread
    /// waited for its open log block to fill (zfs_commit_timeout_pct of the
    /// last block's latency, in cv_timedwait_hires) before it or another
    /// thread issued it. 0 when it did not wait.
    ZilTimeoutWait = 23,
    /// zio_read entry (count only): a block read from the disks (an ARC
    /// miss, a prefetch, a scrub); `bytes` = its logical size, `bytes_out`
    /// its physical size, class = COUNT_ONLY | log2 of the physical size.
    /// With the leaf reads it gives a read's fan-out (leaf reads per block).
    BlockRead = 24,
    /// Per ZIL log block (kernel only: both functions are static): from
    /// zil_lwb_write_issue's entry, when the block is closed and handed over to
    /// be written (its successor's allocation included), to
    /// zil_lwb_flush_vdevs_done, when it is written and its vdevs flushed and
    /// the commits waiting on it wake up. ZFS's own lwb latency, which sizes
    /// the commit timeout, starts a little later (at the zio's issue).
    ZilLogBlock = 25,
    /// Fallback without struct offsets (kernel only): a leaf I/O's wait in
    /// the vdev queue, from vdev_queue_io to vdev_disk_io_start (or
    /// vdev_file_io_start).
    VdevWaitTimed = 26,
    /// Fallback without struct offsets (kernel only): a leaf I/O's device
    /// time, from vdev_disk_io_start (or vdev_file_io_start) to
    /// vdev_queue_io_done (where ZFS's io_delay also starts and nearly ends).
    VdevDiskTimed = 27,
    /// arc_read (non-embedded block pointers): where the ARC served the
    /// block from. Class: [`arc_read_class`] bits (path, prefetch, waited).
    /// Counted at spa_read_history_add (count-only rows), or, when arc_read
    /// is probed (--full-timing on libzpool), timed: a hit's time is
    /// arc_read's (its callback runs inside); a read that missed and was
    /// waited for (ARC_FLAG_WAIT) is timed to its data; one that missed
    /// without waiting is counted only (its data arrives on another thread).
    /// `bytes` = logical size when timed.
    ArcRead = 28,
    /// ddt_lookup: a block's search in the dedup table (each write of a
    /// block in a dataset with dedup, on the write pipeline's threads; frees
    /// too), table blocks read from disk included. Its pool is unknown.
    DdtLookup = 29,
    /// ddt_sync: the dedup table's changes written at txg sync (inside
    /// spa_sync; on 2.3 the log-based DDT's flush too).
    DdtSync = 30,
    /// Per block read from the disks (zio_read; an ARC miss, a prefetch):
    /// its reuse distance, the bytes of other blocks read from disk since
    /// this block's previous read from disk, in place of a latency (the
    /// histogram's "ns" are bytes here). Class: [`miss_reuse_class`] bits;
    /// a block not read before (or forgotten: see `MISS_BLOCKS_TRACKED`)
    /// has distance 0 and the FIRST bit. `bytes` = physical size. Feeds the
    /// cache what-if; not a stage of the report's table.
    ArcMissReuse = 31,
    /// Fast dedup (2.3 and later), at txg sync: the table's changed entries
    /// appended to the dedup log, from ddt_log_begin's entry to
    /// ddt_log_commit's return. `bytes` = entries appended (ddt_log_begin's
    /// count).
    DdtLogAppend = 32,
    /// Fast dedup (2.3 and later), at txg sync: entries moved from the log
    /// into the table (ddt_sync_flush_log, a static function), from the
    /// first entry ddt_log_take_first takes to ddt_sync's return (the log's
    /// truncation or checkpoint and its swap included). `bytes` = entries
    /// flushed.
    DdtLogFlush = 33,
    /// A phase of a txg's sync (inside spa_sync; class = its
    /// [`sync_phase`] index), timed once per sync that entered it: where
    /// the syncs' time goes, as histograms (serve exports them).
    SyncPhase = 34,
    /// Per transaction the write throttle delayed (kernel only: the probe
    /// function trace_zfs_delay__mintime, which dmu_tx_delay calls just
    /// before it sleeps, with the dirty bytes and the delay it computed):
    /// the computed delay as the value, `bytes` = the pool's dirty bytes.
    ThrottleDelay = 35,
    /// The same transactions, with the pool's dirty bytes in place of a
    /// latency (the histogram's "ns" are bytes): the dirty level the
    /// throttle delayed writers at. Not a stage of the report's table.
    ThrottleDirty = 36,
    /// Per txg, when its sync began: its dirty bytes (txg_stat_t.ndirty, read
    /// where spa_txg_history_fini_io gets it) in place of a latency, by pool:
    /// how full the txgs were against zfs_dirty_data_max. Not a stage of the
    /// report's table.
    TxgDirty = 37,
    /// A block allocation (metaslab_alloc) meant for the special or the
    /// dedup class, counted with its size (class: [`alloc_class`] bits): one
    /// that failed for want of space goes to the normal class instead, the
    /// spill `zpool list -v` shows only as the classes' fill.
    AllocClass = 38,
    /// A `zfs recv` (dmu_recv_stream, in the receiving process's ioctl):
    /// its time and the stream bytes it read, by pool.
    Recv = 39,
    /// Per zil_commit call, by pool: when no other commit was in progress on
    /// the pool, the time since its last commit ended (class 0); when one
    /// was, counted only (class [`COMMIT_OVERLAPPED`], value 0). Whether a
    /// pool's commits run one after another, each writer waiting for the
    /// others' (a database's log flush under its lock: the pool's commit
    /// rate is one commit plus one gap), or side by side (independent
    /// writers, each with its own cycle).
    CommitGap = 40,
}

/// Class of a [`Stage::CommitGap`] row: the commit started while another
/// was in progress on its pool (counted only).
pub const COMMIT_OVERLAPPED: u32 = COUNT_ONLY_CLASS;

/// Slots of the per-stage arrays (one per stage number, with room to grow).
pub const STAGE_SLOTS: u32 = 48;

/// Threads whose current zio's pool is remembered (the pools' zio taskq
/// threads: a few dozen per pool, more on many-CPU hosts).
pub const EXECUTING_THREADS: u32 = 8192;

/// Blocks whose last read from disk the reuse distances remember (an LRU
/// map: 1 GiB of 8k blocks); a block read again after this many others
/// counts as a first read.
pub const MISS_BLOCKS_TRACKED: u32 = 131_072;

/// The class bits of an [`Stage::AllocClass`] row.
pub mod alloc_class {
    /// Meant for the special class (metadata, small blocks).
    pub const SPECIAL: u32 = 1;
    /// Meant for the dedup class (the dedup table).
    pub const DEDUP: u32 = 2;
    /// The class had no room (ENOSPC): ZFS allocates the block in another
    /// class (the normal one, or special for the dedup table).
    pub const FULL: u32 = 4;
}

/// The class bits of an [`Stage::ArcMissReuse`] row.
pub mod miss_reuse_class {
    /// The block had not been read from disk before (as far as zprof knows).
    pub const FIRST: u32 = 1;
    /// Read at a priority other than sync read (prefetch, ZFS's own).
    pub const ASYNC: u32 = 2;
    /// The priority was not read (kernel: zio_read's 8th argument is on the
    /// stack, not read there yet): sync and async together.
    pub const PRIORITY_UNKNOWN: u32 = 4;
}

/// Class bit of the vdev stages' rows (above type << 8 | priority): the
/// leaf is a cache device (L2ARC), as its L2ARC reads and feed writes
/// showed (libzpool; see zprof-ebpf's `mark_cache_vdev`).
pub const VDEV_CACHE_DEVICE: u32 = 1 << 16;

/// The class bits of an [`Stage::ArcRead`] row.
pub mod arc_read_class {
    /// Path mask: how the ARC served the read.
    pub const PATH: u32 = 0b11;
    /// Found in the ARC with its data (ARC_FLAG_CACHED).
    pub const HIT: u32 = 0;
    /// Found while a read of the block was in flight (2.2 and later count
    /// these as iohits; 2.1 marks them cached: see the report's note).
    pub const IN_FLIGHT: u32 = 1;
    /// Read from a cache device (zio_read_phys under arc_read).
    pub const L2: u32 = 2;
    /// Read from the pool's disks (zio_read under arc_read).
    pub const DISK: u32 = 3;
    /// The caller asked for a prefetch (ARC_FLAG_PREFETCH).
    pub const PREFETCH: u32 = 1 << 2;
    /// The caller waited for the data (ARC_FLAG_WAIT).
    pub const WAITED: u32 = 1 << 3;
    /// A hit on a buffer the dbuf layer already held (arc_buf_access, no
    /// arc_read): ZFS counts these as ARC hits too, unless the buffer is
    /// dirty. Its pool is unknown.
    pub const HELD: u32 = 1 << 4;
}

impl Stage {
    /// Every stage, in pipeline order (the order reports print them in).
    pub const ALL: [Stage; 40] = [
        Stage::WorkloadWrite,
        Stage::WorkloadRead,
        Stage::Recv,
        Stage::ArcRead,
        Stage::TxAssign,
        Stage::TxWait,
        Stage::Compress,
        Stage::ZstdCompress,
        Stage::Lz4Compress,
        Stage::Decompress,
        Stage::DdtLookup,
        Stage::BlockRead,
        Stage::ChecksumCompute,
        Stage::ChecksumVerify,
        Stage::VdevQueue,
        Stage::VdevDisk,
        Stage::VdevTotal,
        Stage::VdevQueueTimed,
        Stage::VdevWaitTimed,
        Stage::VdevDiskTimed,
        Stage::Flush,
        Stage::ZilCommit,
        Stage::ZilLogWrite,
        Stage::ZilFlush,
        Stage::ZilTimeoutWait,
        Stage::ZilOther,
        Stage::ZilLogBlock,
        Stage::SyncWriteCycle,
        Stage::CommitGap,
        Stage::TxgWaitSynced,
        Stage::SpaSync,
        Stage::SyncPhase,
        Stage::ThrottleDelay,
        Stage::ThrottleDirty,
        Stage::TxgDirty,
        Stage::AllocClass,
        Stage::DdtSync,
        Stage::DdtLogAppend,
        Stage::DdtLogFlush,
        Stage::ArcMissReuse,
    ];

    /// Whether the stage's histogram holds bytes where the others hold
    /// nanoseconds (reuse distances, dirty levels): never a row of time.
    pub fn values_are_bytes(self) -> bool {
        matches!(
            self,
            Stage::ArcMissReuse | Stage::ThrottleDirty | Stage::TxgDirty
        )
    }

    /// The stage with this number, if it is one.
    pub fn from_u32(value: u32) -> Option<Stage> {
        Stage::ALL.iter().copied().find(|s| *s as u32 == value)
    }
}

/// Key of the in-kernel histogram map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HistKey {
    /// A [`Stage`] number.
    pub stage: u32,
    /// Stage-specific class (algorithm, or io type << 8 | priority); 0 when none.
    pub class: u32,
    /// Address of the pool's spa_t (0 when the stage cannot tell).
    pub pool: u64,
    /// Leaf vdev guid for vdev stages (0 otherwise).
    pub vdev: u64,
}

/// Class bit of a [`HistKey`] whose row is counted at entry only: its count
/// and bytes are real, its latency is not measured (0). Set by the eBPF side
/// (entry-only workload probes, block reads, untimed ARC reads); user space
/// names such rows "count only". Defined here, not on each side, so the two
/// cannot drift apart.
pub const COUNT_ONLY_CLASS: u32 = 0x100;

/// zio_type_t's read and write, the same in every release (the flush's
/// type is not: it is the semantics' `zio_type_flush`).
pub mod zio_type {
    /// ZIO_TYPE_READ.
    pub const READ: u32 = 1;
    /// ZIO_TYPE_WRITE.
    pub const WRITE: u32 = 2;
}

/// One histogram, aggregated per CPU in the kernel and summed in user space.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Hist {
    /// Events recorded.
    pub count: u64,
    /// Sum of latencies (ns).
    pub total_ns: u64,
    /// Sum of the stage's input bytes (request size, logical size).
    pub bytes: u64,
    /// Sum of output bytes (compressed size); 0 where meaningless.
    pub bytes_out: u64,
    /// Largest latency seen (ns).
    pub max_ns: u64,
    /// Latency buckets, see [`hist_bucket`].
    pub buckets: [u64; HIST_BUCKETS],
}

impl Hist {
    /// An empty histogram.
    pub const ZERO: Hist = Hist {
        count: 0,
        total_ns: 0,
        bytes: 0,
        bytes_out: 0,
        max_ns: 0,
        buckets: [0; HIST_BUCKETS],
    };

    /// Adds `other`'s events to this histogram.
    pub fn add(&mut self, other: &Hist) {
        self.count += other.count;
        self.total_ns += other.total_ns;
        self.bytes += other.bytes;
        self.bytes_out += other.bytes_out;
        self.max_ns = self.max_ns.max(other.max_ns);
        for (slot, v) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *slot += v;
        }
    }
}

/// Indexes of the per-CPU `COUNTERS` array: everything that could be lost or
/// mismatched is counted here, so a report can show it.
/// Slots of the eBPF side's TRACKED_SLOTS array, the fast path of the pid
/// filter: a tracked tgid is kept at `tgid % TRACKED_SLOTS` when free.
pub const TRACKED_SLOTS: u32 = 16384;

pub mod counter {
    /// An entry probe could not store its start time (entry map full).
    pub const ENTRY_MAP_FULL: u32 = 0;
    /// A return probe found no start time (attached mid-call, or the entry was lost).
    pub const RETURN_WITHOUT_ENTRY: u32 = 1;
    /// A new histogram key could not be inserted (histogram map full).
    pub const HIST_MAP_FULL: u32 = 2;
    /// A ring-buffer event was dropped (ring buffer full).
    pub const RINGBUF_FULL: u32 = 3;
    /// Reading a ZFS structure failed (bad offset or unmapped memory).
    pub const READ_FAILED: u32 = 4;
    /// An entry probe fired while the same function was already in flight on the
    /// thread (recursion); the inner call is not timed.
    pub const NESTED_ENTRY: u32 = 5;
    /// A leaf I/O reached vdev_stat_update without io_delta/io_delay (not a
    /// queued leaf I/O); counted, not timed.
    pub const VDEV_UNTIMED: u32 = 6;
    /// A forked process could not be added to the filter (map full).
    pub const TRACKED_FULL: u32 = 7;
    /// A CPU sample whose stack could not be stored (stack map full or collision).
    pub const STACK_LOST: u32 = 8;
    /// A CPU sample that could not be counted (sample map full).
    pub const SAMPLE_MAP_FULL: u32 = 9;
    /// CPU samples taken of traced threads.
    pub const SAMPLES: u32 = 10;
    /// A writer's slot (see `WriterSlot`) was taken over by another thread
    /// whose tid shares it: the first thread's writes since its last commit
    /// were not attributed.
    pub const WRITER_SLOT_TAKEN: u32 = 11;
    /// A request could not get a row of its own (request map full): it was
    /// counted in the folded row (no dataset, process or cgroup).
    pub const REQUEST_FOLDED: u32 = 12;
    /// A request's start could not be kept (request in-flight map full).
    pub const REQUEST_START_FULL: u32 = 13;
    /// A dataset, dsl_dir or gone pool's name could not be kept (name map
    /// full): the request still counts, under its dataset's address; a gone
    /// pool's rows under its spa_t address.
    pub const NAME_MAP_FULL: u32 = 14;
    /// A file request returned without a start (attached mid-call, or the
    /// start was lost).
    pub const REQUEST_END_WITHOUT_START: u32 = 15;
    /// A thread blocked off the CPU could not be kept (off-CPU start map full).
    pub const OFFCPU_START_FULL: u32 = 16;
    /// Off-CPU time that found no room for its stacks (off-CPU map full).
    pub const OFFCPU_MAP_FULL: u32 = 17;
    /// A blocked period whose stack could not be stored (off-CPU stack map
    /// full or collision): its time is kept without the stack.
    pub const OFFCPU_STACK_LOST: u32 = 18;
    /// Blocked periods of traced threads (switches out), for the loss share.
    pub const OFFCPU_PERIODS: u32 = 19;
    /// A zil_commit found every slot of its pool's window taken (more
    /// concurrent commits than `COMMIT_SLOTS`): timed whole, its parts not.
    pub const COMMIT_SLOTS_FULL: u32 = 20;
    /// A request's end was never seen (its end program was skipped: the
    /// kernel runs one BPF program at a time per CPU), found when the next
    /// request of its thread or bio address replaced the stale start.
    pub const REQUEST_END_MISSED: u32 = 21;
    /// Number of counters.
    pub const COUNT: u32 = 22;
}

/// Slots of the eBPF side's WRITERS array: a writing thread keeps its
/// [`WriterSlot`] at `tid % WRITER_SLOTS`.
pub const WRITER_SLOTS: u32 = 4096;

/// What one writing thread did since its last zil_commit: how sync writes
/// are told apart from async ones without the benchmark's help (a commit
/// makes durable the writes its thread made before it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WriterSlot {
    /// The thread owning the slot (0: free).
    pub tid: u64,
    /// Workload writes since its last commit.
    pub writes: u64,
    /// Their bytes.
    pub bytes: u64,
    /// When its last zil_commit returned (0: none yet).
    pub last_commit_end_ns: u64,
    /// The pool of that commit: a cycle spans one pool's commits, not the
    /// pause between two jobs on different pools.
    pub last_pool: u64,
}

/// Entry record kept between an entry probe and its return probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct InFlight {
    /// bpf_ktime_get_ns() at entry.
    pub start_ns: u64,
    /// Stage-specific: class at entry.
    pub class: u64,
    /// Stage-specific: bytes at entry.
    pub bytes: u64,
    /// Pool (spa_t address) found at entry.
    pub pool: u64,
    /// Stage-specific extra value (txg for spa_sync).
    pub extra: u64,
}

/// Key of the in-flight map: one call of one probed function on one thread (or,
/// for the vdev queue fallback, one zio).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InFlightKey {
    /// Thread id, or the zio address's high half for per-zio keys.
    pub id: u64,
    /// A [`Stage`] number.
    pub stage: u32,
    /// Padding, always 0.
    pub pad: u32,
}

/// Per-txg event sent through the ring buffer when spa_sync returns: txgs are
/// few (a handful per second), and each one's number and duration matter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TxgEvent {
    /// Pool (spa_t address).
    pub pool: u64,
    /// The txg synced.
    pub txg: u64,
    /// bpf_ktime_get_ns() at spa_sync entry.
    pub start_ns: u64,
    /// Duration of spa_sync (ns).
    pub duration_ns: u64,
    /// Process that ran it (the libzpool process; 0 for the kernel's sync thread).
    pub tgid: u32,
    /// Padding, always 0.
    pub pad: u32,
    /// Where the sync's time went (see [`sync_phase`]).
    pub phases: SyncPhases,
}

/// The phases of a txg's sync: the functions spa_sync calls on its own
/// thread, each timed from its entry to its return. A phase function called
/// inside another (bpobj_iterate inside dsl_scan_sync) counts in the outer
/// one, so the phases never overlap and their sum is at most the sync.
pub mod sync_phase {
    /// dsl_pool_sync's first call: the txg's dirty data written out.
    pub const WRITE_OUT: usize = 0;
    /// dsl_pool_sync in the passes after the first (what the first pass's
    /// writes dirtied: block pointers, space maps of the MOS).
    pub const LATER_PASSES: usize = 1;
    /// Freeing blocks: bplist_iterate and bpobj_iterate called by spa_sync
    /// itself (spa_sync_frees, the deferred frees).
    pub const FREES: usize = 2;
    /// ddt_sync: the dedup table.
    pub const DEDUP: usize = 3;
    /// brt_sync: the block-cloning table (2.2 and later).
    pub const CLONES: usize = 4;
    /// dsl_scan_sync: scrub, resilver and async destroys.
    pub const SCAN: usize = 5;
    /// svr_sync: a device removal's copying.
    pub const REMOVAL: usize = 6;
    /// Metaslabs: spa_flush_metaslabs (log space maps), vdev_sync
    /// (metaslab_sync) and vdev_sync_done (metaslab_sync_done).
    pub const METASLABS: usize = 7;
    /// vdev_config_sync: the uberblock and the labels, with their flushes.
    pub const LABELS: usize = 8;
    /// dsl_pool_sync_done: after the uberblock, the ZIL's cleanup and the
    /// dirty data accounting.
    pub const DONE: usize = 9;
    /// Number of phases.
    pub const COUNT: usize = 10;
    /// The phases' names in reports and recordings, by index.
    pub const NAMES: [&str; COUNT] = [
        "write_out",
        "later_passes",
        "frees",
        "dedup",
        "clones",
        "scan",
        "removal",
        "metaslabs",
        "labels",
        "done",
    ];
    /// No phase open ([`super::SyncPhases::open`]).
    pub const NONE: u32 = u32::MAX;
}

/// A sync's phases so far, on its thread (and in its [`TxgEvent`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SyncPhases {
    /// Time in each phase (ns), by [`sync_phase`] index.
    pub ns: [u64; sync_phase::COUNT],
    /// When the open phase began (programs' clock).
    pub open_start_ns: u64,
    /// The open phase, or [`sync_phase::NONE`].
    pub open: u32,
    /// Phase functions entered inside the open phase, not yet returned.
    pub nested: u32,
    /// dsl_pool_sync calls: the sync's passes.
    pub passes: u32,
    /// Blocks the sync thread itself read (zio_read on it: indirect blocks,
    /// space maps it had to wait for).
    pub reads: u32,
    /// Their bytes.
    pub read_bytes: u64,
    /// The pool syncing (spa_t address).
    pub pool: u64,
    /// Time the sync thread waited in zio_wait for its own reads (ns).
    pub read_wait_ns: u64,
    /// Those waits.
    pub read_waits: u32,
    /// Reads issued since the thread's last wait for reads.
    pub reads_unwaited: u32,
    /// The parent zio of its last read (what dbuf_read and dmu_read wait
    /// on), 0 when it had none.
    pub read_parent: u64,
    /// When its wait for reads began, 0 when it is not waiting.
    pub read_wait_start_ns: u64,
}

impl SyncPhases {
    /// A sync of `pool` just begun: no phase open, nothing timed.
    pub const fn idle(pool: u64) -> SyncPhases {
        SyncPhases {
            ns: [0; sync_phase::COUNT],
            open_start_ns: 0,
            open: sync_phase::NONE,
            nested: 0,
            passes: 0,
            reads: 0,
            read_bytes: 0,
            pool,
            read_wait_ns: 0,
            read_waits: 0,
            reads_unwaited: 0,
            read_parent: 0,
            read_wait_start_ns: 0,
        }
    }
}

/// A txg's life as ZFS's txgs kstat keeps it (`spa_txg_history_*`), sent
/// when its sync is done (spa_txg_history_fini_io returns). Times of the
/// open and quiescing states are ZFS's own (gethrtime, the arguments it
/// passes); the sync's are the programs' clock (bpf_ktime_get_ns), taken
/// where ZFS takes its own. 0 where zprof was not attached yet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TxgHistoryEvent {
    /// Pool (row key of its spa_t, as [`TxgEvent::pool`]).
    pub pool: u64,
    /// The txg.
    pub txg: u64,
    /// When it was born (opened), ZFS's clock.
    pub birth: u64,
    /// When it stopped being the open txg, ZFS's clock.
    pub opened_until: u64,
    /// When it was quiesced, ZFS's clock.
    pub quiesced: u64,
    /// The same moment on the programs' clock.
    pub quiesced_seen_ns: u64,
    /// When its spa_sync began, programs' clock (ZFS's wait-for-sync stamp
    /// is taken just before).
    pub sync_start_ns: u64,
    /// When its history was closed (ZFS's synced stamp is taken inside).
    pub synced_ns: u64,
    /// Its dirty bytes when its sync began (txg_stat_t.ndirty);
    /// [`DIRTY_UNKNOWN`] without the offset or the kstat (zfs_txg_history 0).
    pub dirty_bytes: u64,
    /// Bytes read, bytes written, reads and writes of its sync, as the
    /// kstat's nread, nwritten, reads and writes (the pool's root vdev stats
    /// at the sync's end less those at its start); [`DIRTY_UNKNOWN`] each
    /// where they could not be read.
    pub io: [u64; 4],
    /// While its history is closed: the txg_stat_t's address, until the
    /// end stats are read (then 0).
    pub txg_stat: u64,
}

/// [`TxgHistoryEvent::dirty_bytes`] when it could not be read.
pub const DIRTY_UNKNOWN: u64 = u64::MAX;

/// Where a leaf vdev sits in its pool (value of the LEAF_PLACES map, keyed
/// by the leaf's guid): its top-level vdev and that vdev's allocation class,
/// read when the leaf is first seen and again when its top-level vdev
/// changes (an attach makes a mirror of a single disk).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LeafPlace {
    /// Address of the pool's spa_t.
    pub pool: u64,
    /// Address of the top-level vdev_t (to notice a change).
    pub top: u64,
    /// The top-level vdev's guid.
    pub top_guid: u64,
    /// Its index among the pool's top-level vdevs (vdev_id).
    pub top_id: u64,
    /// Its allocation bias (vdev_alloc_bias_t).
    pub alloc_bias: u32,
    /// Its vdev_islog.
    pub is_log: u32,
    /// Its type, NUL-terminated ("raidz", "mirror", "draid", "disk", "file").
    pub top_type: [u8; 16],
}

/// Leaves whose place LEAF_PLACES keeps (least recently used evicted: a
/// leaf's next I/O puts it back).
pub const LEAF_PLACES_TRACKED: u32 = 4096;

/// The pool field of a row's key (histograms, txgs, leaf places): the pool's
/// spa_t address, XORed in its top 16 bits with the number of pools removed
/// at that address before it (spa_remove, the POOL_REMOVALS map). A process
/// that exports a pool and creates the next one (the lab, a test script, an
/// installer) often gets the same address again: without this, the second
/// pool's rows would add to the first's and both would carry the last name.
/// The top 16 bits of an address are all 0 (user space) or all 1 (kernel),
/// so keys of different pools never meet.
pub const fn pool_key(spa: u64, removed_before: u64) -> u64 {
    if spa == 0 {
        0
    } else {
        spa ^ (removed_before << 48)
    }
}

/// A pool exported or destroyed (spa_remove), in the GONE_POOLS map keyed by
/// its row key ([`pool_key`]): its name stays known for the rows it left, and a
/// long-running exporter forgets those rows a while after `removed_ns`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GonePool {
    /// bpf_ktime_get_ns() at spa_remove.
    pub removed_ns: u64,
    /// Its name, NUL-terminated.
    pub name: [u8; 64],
}

/// Pool name as read from spa_t (spa_name is its first member).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PoolName {
    /// NUL-terminated name (truncated at 63 bytes).
    pub name: [u8; 64],
}

/// Struct member offsets in the traced ZFS build, set at load time.
///
/// Found at run time: from module BTF for the kernel target, from a table keyed by
/// the library's build-id for libzpool. `valid == 0` means none were found; the
/// programs that need them are then not attached and fallbacks are used.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offsets {
    /// 1 when the offsets below are known.
    pub valid: u32,
    /// zio_t.io_type (enum, 4 bytes).
    pub zio_type: u32,
    /// zio_t.io_priority (enum, 4 bytes).
    pub zio_priority: u32,
    /// zio_t.io_spa (pointer).
    pub zio_spa: u32,
    /// zio_t.io_vd (pointer).
    pub zio_vd: u32,
    /// zio_t.io_delta (hrtime_t).
    pub zio_delta: u32,
    /// zio_t.io_delay (hrtime_t).
    pub zio_delay: u32,
    /// zio_t.io_size (u64).
    pub zio_size: u32,
    /// vdev_t.vdev_guid (u64).
    pub vdev_guid: u32,
    /// zilog_t.zl_spa (pointer).
    pub zilog_spa: u32,
    /// dsl_pool_t.dp_spa (pointer).
    pub dsl_pool_spa: u32,
    /// objset_t.os_spa (pointer).
    pub objset_spa: u32,
    /// dmu_tx_t.tx_pool (pointer).
    pub dmu_tx_pool: u32,
    /// zio_t.io_error (int).
    pub zio_error: u32,
    /// zio_t.io_flags (enum zio_flag; the low 32 bits hold ZIO_FLAG_IO_BYPASS).
    pub zio_flags: u32,
    /// zio_t.io_timestamp (hrtime_t: when the I/O was queued).
    pub zio_timestamp: u32,
    /// vdev_t.vdev_top (pointer to the top-level vdev).
    pub vdev_top: u32,
    /// vdev_t.vdev_islog (set on log top-level vdevs).
    pub vdev_islog: u32,
    /// vdev_t.vdev_children (u64: 0 for a leaf).
    pub vdev_children: u32,
    /// zio_t.io_private (pointer: the lwb of a ZIL block's root zio).
    pub zio_private: u32,
    /// vdev_t.vdev_id (u64: a top-level vdev's index in its pool).
    pub vdev_id: u32,
    /// vdev_t.vdev_alloc_bias (enum: none, log, special, dedup).
    pub vdev_alloc_bias: u32,
    /// vdev_t.vdev_ops (pointer to the vdev type's vdev_ops_t).
    pub vdev_ops: u32,
    /// vdev_ops_t.vdev_op_type (char[16]: "raidz", "mirror", "file"...).
    pub vdev_op_type: u32,
    /// txg_stat_t.ndirty (the txg's dirty bytes as the txgs kstat shows
    /// them); [`OFFSET_UNKNOWN`] where the source of the offsets lacks it
    /// (a table made before zprof read it): the txg's dirty bytes are then
    /// unknown, nothing else.
    pub txg_stat_ndirty: u32,
    /// txg_stat_t.vs1 and .vs2 (the pool's root vdev stats when the txg's
    /// sync began and ended), and vdev_stat_t.vs_ops and .vs_bytes (arrays
    /// by zio type): the txg's reads and writes as the txgs kstat counts
    /// them. [`OFFSET_UNKNOWN`] as `txg_stat_ndirty`: without all four, the
    /// txg's I/O is unknown, nothing else.
    pub txg_stat_vs1: u32,
    /// txg_stat_t.vs2 (see `txg_stat_vs1`).
    pub txg_stat_vs2: u32,
    /// vdev_stat_t.vs_ops (see `txg_stat_vs1`).
    pub vdev_stat_ops: u32,
    /// vdev_stat_t.vs_bytes (see `txg_stat_vs1`).
    pub vdev_stat_bytes: u32,
    /// spa_t.spa_special_class and .spa_dedup_class (metaslab_class_t
    /// pointers): which allocations were meant for those classes.
    /// [`OFFSET_UNKNOWN`] without them: the allocation classes' rows are not
    /// recorded (metaslab_alloc is not attached).
    pub spa_special_class: u32,
    /// spa_t.spa_dedup_class (see `spa_special_class`).
    pub spa_dedup_class: u32,
    /// dmu_recv_cookie_t.drc_os: the objset a `zfs recv` writes, whose
    /// pool its row is. [`OFFSET_UNKNOWN`] without it: dmu_recv_stream is
    /// not attached.
    pub dmu_recv_cookie_os: u32,
}

/// An optional member's offset that the traced build's source did not give.
pub const OFFSET_UNKNOWN: u32 = u32::MAX;

/// Members the request layer reads (kernel target only: libzpool has no
/// ZPL or zvol), set at load time like [`Offsets`]; `valid == 0` when the
/// traced build's layouts are unknown: requests are then still timed and
/// counted per process, but not per dataset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestOffsets {
    /// 1 when the offsets below are known.
    pub valid: u32,
    /// Bit number of REQ_FUA in bio.bi_opf (enum req_flag_bits).
    pub req_fua_bit: u32,
    /// Bit number of REQ_PREFLUSH in bio.bi_opf.
    pub req_preflush_bit: u32,
    /// bio.bi_opf (u32: op in the low 8 bits, flags above).
    pub bio_opf: u32,
    /// bio.bi_iter.bi_size (u32: bytes).
    pub bio_size: u32,
    /// bio.bi_bdev (pointer).
    pub bio_bdev: u32,
    /// block_device.bd_disk (pointer).
    pub bdev_disk: u32,
    /// gendisk.private_data (pointer: the zvol_state_t of a zvol).
    pub disk_private: u32,
    /// zvol_state_t.zv_objset (pointer).
    pub zvol_objset: u32,
    /// zvol_state_t.zv_volblocksize (u64).
    pub zvol_volblocksize: u32,
    /// znode_t.z_inode (embedded struct inode).
    pub znode_inode: u32,
    /// inode.i_sb (pointer).
    pub inode_sb: u32,
    /// super_block.s_fs_info (pointer: the zfsvfs_t).
    pub sb_fs_info: u32,
    /// zfsvfs_t.z_os (pointer: the dataset's objset).
    pub zfsvfs_os: u32,
    /// objset_t.os_dsl_dataset (pointer).
    pub objset_dataset: u32,
    /// dsl_dataset_t.ds_dir (pointer).
    pub dataset_dir: u32,
    /// dsl_dir_t.dd_parent (pointer; NULL at the pool's root).
    pub dir_parent: u32,
    /// dsl_dir_t.dd_myname (char[256]: the last component of the name).
    pub dir_name: u32,
    /// zfs_uio_t.uio_resid (bytes left to transfer).
    pub uio_resid: u32,
    /// Padding, always 0.
    pub pad: u32,
}

/// Which layer a request row comes from ([`RequestKey::layer`]).
pub mod request {
    /// A file request on a ZFS file system (zfs_read, zfs_write, zfs_fsync).
    pub const LAYER_FILE: u32 = 1;
    /// A zvol block request (a bio, from zvol_submit_bio to bio_endio).
    pub const LAYER_ZVOL: u32 = 2;
    /// Operations ([`RequestKey::op`]).
    pub const OP_READ: u32 = 0;
    pub const OP_WRITE: u32 = 1;
    /// fsync on a file, an empty flush bio on a zvol.
    pub const OP_FLUSH: u32 = 2;
    pub const OP_DISCARD: u32 = 3;
    /// Any other block operation (write-zeroes, secure erase...).
    pub const OP_OTHER: u32 = 4;
    /// Flags ([`RequestKey::flags`]): a synchronous write (O_SYNC/O_DSYNC on a
    /// file, REQ_FUA on a zvol write).
    pub const FLAG_SYNC: u32 = 1;
    /// Opened with O_DIRECT (file), as requested: whether ZFS honoured it
    /// depends on the dataset's `direct` property (2.3 and later).
    pub const FLAG_DIRECT: u32 = 2;
    /// A zvol write carrying a cache flush before it (REQ_PREFLUSH).
    pub const FLAG_PREFLUSH: u32 = 4;
    /// ZFS took the Direct I/O path for it (2.3 and later: it called
    /// dmu_write_uio_direct or dmu_read_uio_direct), whether or not it was
    /// asked for: `direct=always` takes it for aligned requests without
    /// O_DIRECT, and a short or misaligned O_DIRECT request goes through the
    /// ARC.
    pub const FLAG_DIRECT_PATH: u32 = 8;
    /// open(2) flags of x86-64 Linux, as zfs_write's ioflag carries them.
    pub const O_DSYNC: u64 = 0o10000;
    pub const O_DIRECT: u64 = 0o40000;
    /// Deepest dataset nesting named: the eBPF side reads the name components
    /// ([`DirName`](super::DirName)) of this many dsl_dirs up from a dataset,
    /// and user space joins as many (a deeper name starts with "...").
    pub const MAX_NAME_DEPTH: usize = 8;
}

/// Key of the request histograms: one row per layer, operation, flags,
/// dataset, process and cgroup. Rows beyond the map's size are folded into
/// the row with `dataset`, `tgid` and `cgroup` 0 and comm "[folded]".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestKey {
    /// [`request::LAYER_FILE`] or [`request::LAYER_ZVOL`].
    pub layer: u32,
    /// [`request::OP_READ`]...
    pub op: u32,
    /// [`request::FLAG_SYNC`]...
    pub flags: u32,
    /// Process that issued the request.
    pub tgid: u32,
    /// The dataset's objset_t address (0 when unknown: no offsets).
    pub dataset: u64,
    /// The issuer's cgroup v2 id (the inode number of its cgroup directory).
    pub cgroup: u64,
    /// The issuing thread's name.
    pub comm: [u8; 16],
}

/// A request in progress: when it started and which row it goes to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestStart {
    /// bpf_ktime_get_ns() at submission.
    pub start_ns: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Its row.
    pub key: RequestKey,
    /// The submitting thread's [`ThreadWaits`] at submission (file requests
    /// with `--slower-than`), so a slow request's own waits are the difference.
    pub waits_at_start: ThreadWaits,
}

/// Slots of [`ThreadWaits`]: the timed stages a thread can spend a file
/// request in, in the order reports name them.
pub mod wait {
    pub const ZIL_COMMIT: usize = 0;
    pub const ZIL_LOG_WRITE: usize = 1;
    pub const ZIL_FLUSH: usize = 2;
    pub const ZIL_TIMEOUT_WAIT: usize = 3;
    pub const ZIL_OTHER: usize = 4;
    pub const TXG_WAIT_SYNCED: usize = 5;
    pub const TX_WAIT: usize = 6;
    pub const TX_ASSIGN: usize = 7;
    pub const COUNT: usize = 8;
}

/// Time one thread spent in each timed stage so far (ns), kept only with
/// `--slower-than`: a slow request's breakdown is what grew while it ran.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadWaits {
    /// By [`wait`] slot.
    pub ns: [u64; wait::COUNT],
}

/// A request slower than `--slower-than`, streamed through the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SlowRequest {
    /// Its row.
    pub key: RequestKey,
    /// bpf_ktime_get_ns() at submission.
    pub start_ns: u64,
    /// How long it took.
    pub duration_ns: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// The thread that submitted it.
    pub tid: u32,
    /// 1 when `waits` holds the request's own stage times (file requests).
    pub joined: u32,
    /// Time in each timed stage while it ran, by [`wait`] slot.
    pub waits: ThreadWaits,
}

/// What zprof knows of a dataset seen in requests (keyed by objset address).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DatasetInfo {
    /// Its dsl_dir_t (names in [`DirName`] entries keyed by address).
    pub dir: u64,
    /// A zvol's volblocksize; 0 for a file system.
    pub volblocksize: u64,
}

/// One component of a dataset name: user space joins them up the parents.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DirName {
    /// The parent dsl_dir_t (0 at the pool's root, whose name is the pool's).
    pub parent: u64,
    /// dd_myname, NUL-terminated.
    pub name: [u8; 256],
}

/// Largest prefix of a zio_t the leaf-I/O probes copy in one read.
pub const ZIO_WINDOW: u32 = 2048;

impl Offsets {
    /// Bytes from the start of a zio_t that hold every zio_t field the
    /// leaf-I/O probes read: they copy that prefix once instead of reading
    /// ten fields one by one. 0 without offsets.
    pub fn zio_read_len(&self) -> u32 {
        if self.valid == 0 {
            return 0;
        }
        [
            self.zio_type + 4,
            self.zio_priority + 4,
            self.zio_error + 4,
            self.zio_flags + 4,
            self.zio_spa + 8,
            self.zio_vd + 8,
            self.zio_delta + 8,
            self.zio_delay + 8,
            self.zio_size + 8,
            self.zio_timestamp + 8,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}

/// Most frames kept of a user or kernel stack: the innermost ones. Deeper
/// stacks are cut (and marked so); 127 frames of a walk gone astray would
/// otherwise make a flame graph ten times taller than its content.
pub const STACK_DEPTH: u32 = 64;

/// Key of the CPU sample counts: who was on the CPU, and where.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SampleKey {
    /// Process (tgid).
    pub tgid: u32,
    /// Stack id of the user stack (in its generation's `CPU_STACKS_n`, or in
    /// `OFFCPU_STACKS`), or a negative error.
    pub user_stack: i32,
    /// Stack id of the kernel stack, or a negative error.
    pub kernel_stack: i32,
    /// The [`Stage`] zprof was timing the thread in (0: none): when it was
    /// sampled, or when it left the CPU, then with [`OFFCPU_RUNNABLE`] when it
    /// left it still runnable.
    pub pad: u32,
    /// Thread name (comm): the taskq a ZFS thread belongs to.
    pub comm: [u8; 16],
    /// Off-CPU time: the generation of the stack maps (`STACK_GENERATION`)
    /// that held the stacks when the thread left the CPU; 0 in CPU samples,
    /// whose map already says it.
    pub generation: u32,
    /// Zero (keeps the key free of implicit padding).
    pub reserved: u32,
}

/// Bit of [`SampleKey::pad`] in off-CPU time: the thread left the CPU still
/// runnable (preempted, or woken before it was switched out): it waited for
/// a CPU, not for what it was waiting in.
pub const OFFCPU_RUNNABLE: u32 = 1 << 16;

/// A traced thread blocked off the CPU: since when, and with which stacks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OffCpuStart {
    /// bpf_ktime_get_ns() when it left the CPU.
    pub start_ns: u64,
    /// Its process, name and stacks.
    pub key: SampleKey,
}

/// zil_commit calls of one pool whose parts are timed at once; a commit
/// beyond them is timed whole and its parts are not
/// ([`counter::COMMIT_SLOTS_FULL`]).
pub const COMMIT_SLOTS: usize = 4;
// The eBPF side finds a slot by masking its index.
const _: () = assert!(COMMIT_SLOTS.is_power_of_two());

/// What one zil_commit in progress waited for: the leaf writes and flushes
/// completed while it ran (those it shares with concurrent committers too).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CommitSlot {
    /// The committing thread (0: free).
    pub tid: u64,
    /// Slowest leaf sync write completed while it ran (ns).
    pub max_write_ns: u64,
    /// Flush time while it ran (ns).
    pub flush_ns: u64,
    /// Leaf sync writes completed while it ran.
    pub writes: u64,
    /// Where those writes went: [`LOG_WENT_TO_LOG_VDEV`] and
    /// [`LOG_WENT_TO_SPECIAL`] bits (none: the main pool only).
    pub log_places: u64,
    /// Earliest start of a leaf flush completed while it ran (flush mode
    /// [`FLUSH_LEAF_ISSUE_TO_DONE`]; 0 when none).
    pub flush_first_ns: u64,
    /// Latest completion of a leaf flush while it ran (same mode).
    pub flush_last_ns: u64,
}

/// A commit's leaf sync write went to a log vdev.
pub const LOG_WENT_TO_LOG_VDEV: u64 = 1;
/// A commit's leaf sync write went to a special vdev (2.4 puts log blocks
/// there before the main pool when the pool has no log vdev).
pub const LOG_WENT_TO_SPECIAL: u64 = 2;
/// vdev_alloc_bias_t's VDEV_BIAS_SPECIAL (the same value from 2.1 to 2.4).
pub const ALLOC_BIAS_SPECIAL: u32 = 2;

/// The class of a commit's log block writes (and of its timeout wait and
/// other time) from its slot's [`CommitSlot::log_places`]: 1 where any went
/// to a log vdev (the large writes a log device's pool writes to the main
/// pool are its data, not its log), else 2 where any went to a special vdev,
/// else 0, the main pool.
pub fn log_place_class(log_places: u64) -> u32 {
    if log_places & LOG_WENT_TO_LOG_VDEV != 0 {
        1
    } else if log_places & LOG_WENT_TO_SPECIAL != 0 {
        2
    } else {
        0
    }
}

/// Per-pool state of the ZIL commits in progress, so the vdev and flush
/// probes can charge their time to each: one slot per commit, because
/// concurrent committers overlap without ever leaving the pool idle, and a
/// window shared by all of them would never close (two fsync writers made a
/// 377 us commit's flushes add up to 130 ms).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CommitWindow {
    /// zil_commit calls in progress on this pool with a slot.
    pub active: u64,
    /// When the last of them ended (ns, monotonic; 0 before the first):
    /// the start of the pool's gap without a commit ([`Stage::CommitGap`]).
    pub last_end_ns: u64,
    /// Their slots.
    pub slots: [CommitSlot; COMMIT_SLOTS],
}

/// A leaf flush in progress (flush mode [`FLUSH_LEAF_ISSUE_TO_DONE`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FlushStart {
    /// When zio_flush reached the leaf (ns, monotonic).
    pub start_ns: u64,
    /// The pool's spa_t (from the parent zio).
    pub pool: u64,
    /// The leaf vdev's guid.
    pub guid: u64,
}

/// Class of a [`Stage::TxgWaitSynced`] histogram: a wait inside zil_commit.
/// Either the ZIL gave up on its log and waited for the txg to sync instead
/// (a suspended ZIL, as while an old pool takes a snapshot; a log block it
/// could not allocate, zil_commit_writer_stall; a failed log write, 2.3's
/// error path: ZFS's kstats count these), or the commit created the log
/// chain anew (zil_create waits for the previous chain's destroy and for
/// the new header's txg: counted by no kstat). Class 0 is any other wait.
pub const TXG_WAIT_IN_ZIL_COMMIT: u32 = 1;

/// Class of a [`Stage::Lz4Compress`] histogram: lz4 run as zstd's early-abort
/// trial inside the zstd compression of a block (OpenZFS 2.2 and later), not
/// an lz4 compression of its own. Class 0 is plain lz4.
pub const LZ4_CLASS_ZSTD_EARLY_ABORT: u32 = 1;

/// Load-time configuration (a global constant in the eBPF object).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// 1 on the kernel target (kprobes), 0 on libzpool (uprobes).
    pub kernel: u32,
    /// 1 when only tracked processes count (see TRACKED on the eBPF side).
    pub filter_tgid: u32,
    /// task_newtask record: offset of the child's pid.
    pub newtask_pid_offset: u32,
    /// task_newtask record: offset of the clone flags.
    pub newtask_flags_offset: u32,
    /// Bytes of a zio_t the leaf-I/O probes copy (see [`Offsets::zio_read_len`]).
    pub zio_read_len: u32,
    /// Requests at least this long (us) are streamed one by one (0: none).
    pub slow_request_us: u32,
    /// sched:sched_switch record: offset of prev_state.
    pub switch_prev_state_offset: u32,
    /// sched:sched_switch record: offset of next_pid.
    pub switch_next_pid_offset: u32,
    /// What differs between OpenZFS releases (zprof's `openzfs` module says which).
    pub semantics: Semantics,
    /// Struct member offsets of the traced build.
    pub offsets: Offsets,
    /// What the request layer reads (kernel target).
    pub request: RequestOffsets,
}

/// The OpenZFS release's semantics the programs need, set at load time from
/// zprof's release catalogue: nothing release-specific is hard-coded on the
/// eBPF side.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Semantics {
    /// Bit number of ZIO_FLAG_IO_BYPASS in io_flags (21 up to 2.2, 22 from 2.3);
    /// always below 32, so the low word of io_flags holds it.
    pub zio_flag_io_bypass_bit: u32,
    /// Argument index of zio_compress_data's level (4 up to 2.2, 5 from 2.3).
    pub compress_level_arg: u32,
    /// How cache flushes are timed: [`FLUSH_TIMED_CALL`] or [`FLUSH_LEAF_ISSUE_TO_DONE`].
    pub flush_mode: u32,
    /// zio_type of a cache flush zio (ZIO_TYPE_IOCTL, later ZIO_TYPE_FLUSH: 5).
    pub zio_type_flush: u32,
    /// Bit number of ZIO_FLAG_CONFIG_WRITER (9 from 2.1 to 2.4): the label
    /// and uberblock writes of a txg sync, which no commit waits for.
    pub zio_flag_config_writer_bit: u32,
}

/// Flushes are timed as zio_flush calls: the leaf flushes run inside the call
/// (libzpool up to 2.2, where vdev_file fsyncs inline).
pub const FLUSH_TIMED_CALL: u32 = 0;
/// Each leaf flush is timed from its zio_flush call (where its zio is made) to
/// zio_interrupt of that zio (libzpool 2.3, whose vdev_file fsyncs on a taskq):
/// zio_flush recurses over the vdev tree and returns long before the flush ends.
pub const FLUSH_LEAF_ISSUE_TO_DONE: u32 = 1;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C), made of integers with no implicit padding.
    unsafe impl aya::Pod for super::HistKey {}
    unsafe impl aya::Pod for super::Hist {}
    unsafe impl aya::Pod for super::InFlight {}
    unsafe impl aya::Pod for super::InFlightKey {}
    unsafe impl aya::Pod for super::TxgEvent {}
    unsafe impl aya::Pod for super::SyncPhases {}
    unsafe impl aya::Pod for super::PoolName {}
    unsafe impl aya::Pod for super::LeafPlace {}
    unsafe impl aya::Pod for super::GonePool {}
    unsafe impl aya::Pod for super::Offsets {}
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::Semantics {}
    unsafe impl aya::Pod for super::CommitWindow {}
    unsafe impl aya::Pod for super::CommitSlot {}
    unsafe impl aya::Pod for super::FlushStart {}
    unsafe impl aya::Pod for super::SampleKey {}
    unsafe impl aya::Pod for super::RequestOffsets {}
    unsafe impl aya::Pod for super::RequestKey {}
    unsafe impl aya::Pod for super::RequestStart {}
    unsafe impl aya::Pod for super::DatasetInfo {}
    unsafe impl aya::Pod for super::DirName {}
    unsafe impl aya::Pod for super::OffCpuStart {}
    unsafe impl aya::Pod for super::ThreadWaits {}
    unsafe impl aya::Pod for super::SlowRequest {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_has_a_slot_in_the_per_stage_arrays() {
        assert!(Stage::ALL.iter().all(|s| (*s as u32) < STAGE_SLOTS));
    }

    #[test]
    fn zio_read_len_covers_the_last_field_read() {
        // Debian's libzpool 2.1.11 layout (zprof/offsets/libzpool-2.1.11-debian.json):
        // io_error (4 bytes at 812) ends last.
        let offsets = Offsets {
            valid: 1,
            zio_type: 112,
            zio_priority: 128,
            zio_spa: 144,
            zio_vd: 592,
            zio_delta: 656,
            zio_delay: 664,
            zio_size: 576,
            zio_error: 812,
            zio_flags: 784,
            zio_timestamp: 632,
            ..Offsets::default()
        };
        assert_eq!(offsets.zio_read_len(), 816);
        assert_eq!(
            Offsets {
                valid: 0,
                ..offsets
            }
            .zio_read_len(),
            0
        );
    }

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        let mut previous_high = None;
        for index in 0..HIST_BUCKETS {
            let low = hist_bucket_low(index);
            let high = hist_bucket_high(index);
            assert!(low <= high, "bucket {index}: {low} > {high}");
            if let Some(prev) = previous_high {
                assert_eq!(low, prev + 1, "gap before bucket {index}");
            }
            assert_eq!(hist_bucket(low), index, "low edge of {index}");
            if index + 1 < HIST_BUCKETS {
                assert_eq!(hist_bucket(high), index, "high edge of {index}");
            }
            previous_high = Some(high);
        }
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    }

    #[test]
    fn bucket_resolution_is_within_one_eighth() {
        for value in [
            9u64,
            100,
            1_000,
            12_345,
            1_000_000,
            7_777_777,
            60_000_000_000,
        ] {
            let index = hist_bucket(value);
            let width = hist_bucket_high(index) - hist_bucket_low(index) + 1;
            assert!(width * 8 <= value + 8, "value {value} bucket width {width}");
        }
    }

    #[test]
    fn power_of_two_edges_align() {
        // Every power of two starts a bucket: needed to merge into zpool iostat -w's.
        for shift in 3..=HIST_MAX_SHIFT {
            let index = hist_bucket(1u64 << shift);
            assert_eq!(hist_bucket_low(index), 1u64 << shift);
        }
    }

    #[test]
    fn stage_numbers_round_trip() {
        for stage in Stage::ALL {
            assert_eq!(Stage::from_u32(stage as u32), Some(stage));
        }
        assert_eq!(Stage::from_u32(0), None);
    }
}
