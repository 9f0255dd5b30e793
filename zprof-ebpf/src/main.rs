//! zprof's eBPF programs: per-stage latency of OpenZFS's I/O path.
//!
//! One set of programs serves both targets. Each probed function gets an entry
//! handler (and a return handler when its duration matters); the `probes!` macro
//! emits every handler twice, once in a `kprobe` section (zfs.ko) and once in a
//! `uprobe` section (libzpool), because aya picks the attach method from the
//! section. Program names end in `_k` or `_u`; user space loads only one kind.
//!
//! Aggregation happens here, in per-CPU histograms keyed by stage, class, pool and
//! vdev (`HIST`): the vdev and compression stages fire tens of thousands of times a
//! second, and summing in the kernel costs nothing in user space and cannot lose
//! events. Only spa_sync, a few times a second, streams each txg through the ring
//! buffer, because its txg number and start time matter individually. Everything
//! that can go wrong (full maps, unmatched returns, failed reads) is counted in
//! `COUNTERS`.
#![no_std]
#![no_main]
// atomic_xadd for the request rows (see requests.rs); the eBPF build is nightly anyway.
#![allow(internal_features)]
#![feature(core_intrinsics)]

use aya_ebpf::{
    EbpfContext,
    bindings::BPF_NOEXIST,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_probe_read_kernel_str_bytes, bpf_probe_read_user, bpf_probe_read_user_str_bytes,
    },
    macros::{kprobe, kretprobe, map, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
};
use zprof_common::{
    CommitWindow, Config, FLUSH_LEAF_ISSUE_TO_DONE, FlushStart, GonePool, HIST_BUCKETS, Hist,
    HistKey, InFlight, InFlightKey, LEAF_PLACES_TRACKED, LZ4_CLASS_ZSTD_EARLY_ABORT, LeafPlace,
    Offsets, PoolName, RequestOffsets, Semantics, Stage, TxgEvent, VDEV_CACHE_DEVICE, WRITER_SLOTS,
    WriterSlot, ZIO_WINDOW, arc_read_class, counter, hist_bucket, miss_reuse_class,
};

mod offcpu;
mod requests;
mod stacks;

/// Load-time configuration, patched by user space before loading (`set_global`).
#[unsafe(no_mangle)]
static CONFIG: Config = Config {
    kernel: 0,
    filter_tgid: 0,
    newtask_pid_offset: 0,
    newtask_flags_offset: 0,
    zio_read_len: 0,
    slow_request_us: 0,
    switch_prev_state_offset: 0,
    switch_next_pid_offset: 0,
    semantics: Semantics {
        zio_flag_io_bypass_bit: 0,
        compress_level_arg: 0,
        flush_mode: 0,
        zio_type_flush: 0,
    },
    offsets: Offsets {
        valid: 0,
        zio_type: 0,
        zio_priority: 0,
        zio_spa: 0,
        zio_vd: 0,
        zio_delta: 0,
        zio_delay: 0,
        zio_size: 0,
        vdev_guid: 0,
        zilog_spa: 0,
        dsl_pool_spa: 0,
        objset_spa: 0,
        dmu_tx_pool: 0,
        zio_error: 0,
        zio_flags: 0,
        zio_timestamp: 0,
        vdev_top: 0,
        vdev_islog: 0,
        vdev_children: 0,
        zio_private: 0,
        vdev_id: 0,
        vdev_alloc_bias: 0,
        vdev_ops: 0,
        vdev_op_type: 0,
    },
    request: RequestOffsets {
        valid: 0,
        req_fua_bit: 0,
        req_preflush_bit: 0,
        bio_opf: 0,
        bio_size: 0,
        bio_bdev: 0,
        bdev_disk: 0,
        disk_private: 0,
        zvol_objset: 0,
        zvol_volblocksize: 0,
        znode_inode: 0,
        inode_sb: 0,
        sb_fs_info: 0,
        zfsvfs_os: 0,
        objset_dataset: 0,
        dataset_dir: 0,
        dir_parent: 0,
        dir_name: 0,
        uio_resid: 0,
        pad: 0,
    },
};

/// Per-CPU histograms; user space sums the CPUs. Size set by `--hist-entries`.
#[map]
static HIST: PerCpuHashMap<HistKey, Hist> = PerCpuHashMap::with_max_entries(2048, 0);

/// A zeroed histogram to insert new keys from (too large for the 512-byte stack).
#[map]
static ZERO: PerCpuArray<Hist> = PerCpuArray::with_max_entries(1, 0);

/// Calls in flight: start time and what the entry probe learnt.
#[map]
static INFLIGHT: HashMap<InFlightKey, InFlight> = HashMap::with_max_entries(16384, 0);

/// Loss and mismatch counters, indexed by `zprof_common::counter`.
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// The ZIL commit in progress per pool (spa_t address).
#[map]
static COMMITS: HashMap<u64, CommitWindow> = HashMap::with_max_entries(256, 0);

/// Writing threads: what each wrote since its last zil_commit, at slot
/// `tid % WRITER_SLOTS` (an array for the same reason as `INTERNAL`).
#[map]
static WRITERS: Array<WriterSlot> = Array::with_max_entries(WRITER_SLOTS, 0);

/// Returns without an entry, per stage number: says which probe pair mismatched.
#[map]
static UNMATCHED: PerCpuArray<u64> = PerCpuArray::with_max_entries(32, 0);

/// Per-txg events (spa_sync returns).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Pool names by spa_t address, filled when spa_sync runs.
#[map]
static POOL_NAMES: LruHashMap<u64, PoolName> = LruHashMap::with_max_entries(1024, 0);

/// Processes whose calls count when `filter_tgid` is set: the traced pid or
/// command, and every process it forks (fio and ztest fork their workers).
/// A plain hash map: an LRU map can evict early (per-CPU free lists) and
/// would silently drop a traced process. Only processes are added, not threads.
#[map]
static TRACKED: HashMap<u32, u32> = HashMap::with_max_entries(16384, 0);

/// A fast path in front of `TRACKED`, read by every probe: slot
/// `tgid % TRACKED_SLOTS` holds a tracked tgid. The verifier inlines array
/// lookups, which saves a hash lookup (about 50 ns) per event for the traced
/// processes; a tgid whose slot another took is still found in `TRACKED`.
#[map]
static TRACKED_SLOTS: Array<u32> = Array::with_max_entries(zprof_common::TRACKED_SLOTS, 0);

/// Threads inside spa_sync or zil_commit, whose dmu_write/dmu_read calls are
/// ZFS's own: slot `tid % INTERNAL_SLOTS` holds the tid while it is inside.
/// An array, not a hash map, because it is read on every workload write and
/// the verifier inlines array lookups (a hash lookup costs about 50 ns). Two
/// internal threads whose tids share a slot at the same moment would let the
/// second one's few metadata writes count as the workload's; tids are handed
/// out in sequence, so that needs thousands of threads.
#[map]
static INTERNAL: Array<u32> = Array::with_max_entries(INTERNAL_SLOTS, 0);
const INTERNAL_SLOTS: u32 = 4096;

/// The last objset seen by the workload probes on this CPU, its spa_t and the
/// `SYNC_GENERATION` it was read in, so that a write does not re-read os_spa
/// from the traced process (one bpf_probe_read_user less per write).
#[map]
static OBJSET_SPA: PerCpuArray<[u64; 3]> = PerCpuArray::with_max_entries(1, 0);

/// Bumped by every spa_sync: an entry of `OBJSET_SPA` is only trusted within
/// the generation it was read in. A pool is synced when it is created and
/// when it is exported, so an objset freed with one pool and reallocated at
/// the same address in the next cannot carry the old pool's spa_t over.
#[map]
static SYNC_GENERATION: Array<u64> = Array::with_max_entries(1, 0);

/// This CPU's copy of the zio_t a leaf-I/O probe is looking at (see
/// `read_leaf_zio`): too large for the 512-byte stack.
#[map]
static ZIO_COPY: PerCpuArray<[u8; ZIO_WINDOW as usize]> = PerCpuArray::with_max_entries(1, 0);

/// Class bit of histograms counted at entry only (no latency measured).
const COUNT_ONLY_CLASS: u32 = 0x100;

/// enum zio_compress's ZIO_COMPRESS_ZSTD (the same from 2.0 to 2.3).
const ZIO_COMPRESS_ZSTD: u64 = 16;

/// Leaf flushes in progress, by leaf vdev_t address (flush mode
/// `FLUSH_LEAF_ISSUE_TO_DONE`): LRU, because a flush that never completes
/// through zio_interrupt (a vdev with its write cache off) must not hold a slot.
#[map]
static FLUSH_STARTS: LruHashMap<u64, FlushStart> = LruHashMap::with_max_entries(4096, 0);

#[inline(always)]
fn config_u32(field: &u32) -> u32 {
    // Volatile: the value is patched into .rodata at load time, so the compiler
    // must not fold the default it sees here.
    unsafe { core::ptr::read_volatile(field) }
}

#[inline(always)]
fn is_kernel() -> bool {
    config_u32(&CONFIG.kernel) != 0
}

#[inline(always)]
fn offsets_valid() -> bool {
    config_u32(&CONFIG.offsets.valid) != 0
}

#[inline(always)]
fn bump(index: u32) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        unsafe { *slot += 1 };
    }
}

/// Reads a value of the traced code's memory (kernel or user, per target), or
/// `fallback` when the read fails.
///
/// Returns a plain value, not an `Option`: with an `Option`, LLVM may compute on
/// the (undefined) payload of `None` and mask the result afterwards, leaving a
/// register the verifier sees as never written ("R1 !read_ok"). Kernels from
/// about 6.10 hide this by proving the counter lookup in `bump` non-null;
/// 6.1 rejected vdev_stat_entry_k (found in the qemu guest, issue 4).
#[inline(always)]
fn read_or<T>(addr: u64, fallback: T) -> T {
    if addr == 0 {
        return fallback;
    }
    let ptr = addr as *const T;
    let result = if is_kernel() {
        unsafe { bpf_probe_read_kernel(ptr) }
    } else {
        unsafe { bpf_probe_read_user(ptr) }
    };
    match result {
        Ok(value) => value,
        Err(_) => {
            bump(counter::READ_FAILED);
            fallback
        }
    }
}

/// Reads a pointer member at `offset` of the struct at `base`, if offsets are known.
#[inline(always)]
fn member_u64(base: u64, offset: &u32) -> u64 {
    if !offsets_valid() || base == 0 {
        return 0;
    }
    read_or::<u64>(base + config_u32(offset) as u64, 0)
}

/// A 4-byte member (an int, an enum, a boolean_t): reading 8 would take in
/// the next member too.
#[inline(always)]
fn member_u32(base: u64, offset: &u32) -> u32 {
    if !offsets_valid() || base == 0 {
        return 0;
    }
    read_or::<u32>(base + config_u32(offset) as u64, 0)
}

#[inline(always)]
fn thread_id() -> u64 {
    bpf_get_current_pid_tgid() & 0xffff_ffff
}

/// Whether this call belongs to the traced workload. Pool-side stages on the
/// kernel target run in ZFS's own kernel threads, so they are never filtered.
#[inline(always)]
fn wanted(workload_side: bool) -> bool {
    if config_u32(&CONFIG.filter_tgid) == 0 || (is_kernel() && !workload_side) {
        return true;
    }
    is_tracked((bpf_get_current_pid_tgid() >> 32) as u32)
}

#[inline(always)]
fn is_tracked(tgid: u32) -> bool {
    TRACKED_SLOTS
        .get(tgid % zprof_common::TRACKED_SLOTS)
        .is_some_and(|slot| *slot == tgid)
        || unsafe { TRACKED.get(&tgid).is_some() }
}

/// Adds one event to the histogram for `key`.
#[inline(always)]
fn record(key: &HistKey, duration_ns: u64, bytes: u64, bytes_out: u64) {
    let mut slot = HIST.get_ptr_mut(key);
    if slot.is_none() {
        // A new key is rare: a good moment to learn its pool's name, for pools
        // that spa_sync has not (yet) named.
        learn_pool_name(key.pool);
        let Some(zero) = ZERO.get(0) else { return };
        if HIST.insert(key, zero, BPF_NOEXIST as u64).is_err() {
            // Either another CPU inserted it first (fine) or the map is full.
            slot = HIST.get_ptr_mut(key);
            if slot.is_none() {
                bump(counter::HIST_MAP_FULL);
                return;
            }
        } else {
            slot = HIST.get_ptr_mut(key);
        }
    }
    requests::note_thread_wait(key.stage, duration_ns);
    let Some(hist) = slot else { return };
    let hist = unsafe { &mut *hist };
    hist.count += 1;
    hist.total_ns += duration_ns;
    hist.bytes += bytes;
    hist.bytes_out += bytes_out;
    if duration_ns > hist.max_ns {
        hist.max_ns = duration_ns;
    }
    // black_box keeps the bound check: the compiler can prove it redundant and
    // drop it, but the verifier needs to see it before the array access.
    let bucket = core::hint::black_box(hist_bucket(duration_ns));
    if bucket < HIST_BUCKETS {
        hist.buckets[bucket] += 1;
    }
}

#[inline(always)]
fn stage_key(stage: Stage, class: u32, pool: u64, vdev: u64) -> HistKey {
    HistKey {
        stage: stage as u32,
        class,
        pool,
        vdev,
    }
}

/// The in-flight key of `stage`'s call on this thread.
#[inline(always)]
fn thread_key(stage: Stage) -> InFlightKey {
    span_key(stage, thread_id())
}

/// The in-flight key of `stage`'s span for `id` (a thread, a zio, a log block).
#[inline(always)]
fn span_key(stage: Stage, id: u64) -> InFlightKey {
    InFlightKey {
        id,
        stage: stage as u32,
        pad: 0,
    }
}

/// Remembers the start of a call; the matching `leave` turns it into a histogram entry.
#[inline(always)]
fn enter(stage: Stage, id: u64, class: u64, bytes: u64, pool: u64, extra: u64) {
    let key = span_key(stage, id);
    let value = InFlight {
        start_ns: unsafe { bpf_ktime_get_ns() },
        class,
        bytes,
        pool,
        extra,
    };
    match INFLIGHT.insert(&key, &value, BPF_NOEXIST as u64) {
        Ok(()) => {}
        Err(err) if err == -17 => bump(counter::NESTED_ENTRY), // EEXIST
        Err(_) => bump(counter::ENTRY_MAP_FULL),
    }
}

/// Ends a call started by `enter`; returns what the entry saw and the duration.
#[inline(always)]
fn leave(stage: Stage, id: u64) -> Option<(InFlight, u64)> {
    let ended = take(span_key(stage, id));
    if ended.is_none() {
        count_unmatched(stage);
    }
    ended
}

/// Ends the call under `key` if one started: `leave` without counting a
/// missing start, for spans that only some calls open.
#[inline(always)]
fn take(key: InFlightKey) -> Option<(InFlight, u64)> {
    let entry = (unsafe { INFLIGHT.get(&key) }).copied()?;
    let _ = INFLIGHT.remove(&key);
    let now = unsafe { bpf_ktime_get_ns() };
    Some((entry, now.saturating_sub(entry.start_ns)))
}

/// An end of a span whose start was not seen (attached mid-call, or the start
/// was lost): counted in total and per stage.
#[inline(always)]
fn count_unmatched(stage: Stage) {
    bump(counter::RETURN_WITHOUT_ENTRY);
    if let Some(slot) = UNMATCHED.get_ptr_mut(stage as u32) {
        unsafe { *slot += 1 };
    }
}

#[inline(always)]
fn leave_and_record(stage: Stage, bytes_out: u64) {
    // Entries filtered out (other processes) left nothing to match: not a loss.
    if !wanted(matches!(
        stage,
        Stage::ZilCommit
            | Stage::TxgWaitSynced
            | Stage::TxAssign
            | Stage::TxWait
            | Stage::WorkloadWrite
            | Stage::WorkloadRead
    )) {
        return;
    }
    if let Some((entry, duration)) = leave(stage, thread_id()) {
        let key = stage_key(stage, entry.class as u32, entry.pool, 0);
        record(&key, duration, entry.bytes, bytes_out);
    }
}

#[inline(always)]
fn arg(ctx: &ProbeContext, n: usize) -> u64 {
    ctx.arg::<u64>(n).unwrap_or(0)
}

/// zio_compress_data's level: argument 4 or 5 per release (a load-time
/// constant). Both are read and the value chosen afterwards: a context read at
/// a computed offset is rejected by the verifier, and black_box keeps LLVM
/// from turning the choice of values back into a choice of offsets.
#[inline(always)]
fn compress_level(ctx: &ProbeContext) -> u64 {
    let fourth = core::hint::black_box(arg(ctx, 4));
    let fifth = core::hint::black_box(arg(ctx, 5));
    if config_u32(&CONFIG.semantics.compress_level_arg) == 5 {
        fifth
    } else {
        fourth
    }
}

// --- Handlers: what each probed function's entry and return learn. ------------

/// zio_compress_data(enum zio_compress c, abd_t *src, ..., size_t s_len, ..., uint8_t level):
/// the level's position differs between releases (`compress_level_arg`).
fn compress_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let algorithm = arg(ctx, 0) & 0xff;
    let level = compress_level(ctx) & 0xff;
    enter(
        Stage::Compress,
        thread_id(),
        algorithm | level << 8,
        arg(ctx, 3),
        0,
        0,
    );
}

/// Returns the compressed size (psize), or s_len when it did not compress.
fn compress_return(ctx: &RetProbeContext) {
    let out: u64 = ctx.ret();
    leave_and_record(Stage::Compress, out);
}

/// zio_decompress_data(enum zio_compress c, abd_t *src, void *dst, size_t s_len, size_t d_len, ...)
fn decompress_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    enter(
        Stage::Decompress,
        thread_id(),
        arg(ctx, 0) & 0xff,
        arg(ctx, 4),
        0,
        0,
    );
}

fn decompress_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::Decompress, 0);
}

/// zfs_zstd_compress(void *s, void *d, size_t s_len, size_t d_len, int level)
fn zstd_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    enter(
        Stage::ZstdCompress,
        thread_id(),
        arg(ctx, 4) & 0xff,
        arg(ctx, 2),
        0,
        0,
    );
}

fn zstd_return(ctx: &RetProbeContext) {
    let out: u64 = ctx.ret();
    leave_and_record(Stage::ZstdCompress, out);
}

/// lz4_compress_zfs / zfs_lz4_compress(src, dst, size_t s_len, size_t d_len, int n).
/// zstd's early abort (2.2 and later, zstd-3 and up on blocks of 128K or more)
/// runs lz4 as a trial inside the zstd compression of a block: such a pass is
/// kept apart (class `LZ4_CLASS_ZSTD_EARLY_ABORT`), shown inside the zstd row
/// and never counted as an lz4 compression of its own.
fn lz4_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let inside_zstd = unsafe { INFLIGHT.get(&thread_key(Stage::Compress)) }
        .is_some_and(|outer| outer.class & 0xff == ZIO_COMPRESS_ZSTD);
    let class = if inside_zstd {
        LZ4_CLASS_ZSTD_EARLY_ABORT as u64
    } else {
        0
    };
    enter(Stage::Lz4Compress, thread_id(), class, arg(ctx, 2), 0, 0);
}

fn lz4_return(ctx: &RetProbeContext) {
    let out: u64 = ctx.ret();
    leave_and_record(Stage::Lz4Compress, out);
}

/// zio_checksum_compute(zio_t *zio, enum zio_checksum checksum, abd_t *abd, uint64_t size)
fn checksum_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa);
    enter(
        Stage::ChecksumCompute,
        thread_id(),
        arg(ctx, 1) & 0xff,
        arg(ctx, 3),
        pool,
        0,
    );
}

fn checksum_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::ChecksumCompute, 0);
}

/// zio_checksum_error(zio_t *zio, zio_bad_cksum_t *info)
fn verify_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let zio = arg(ctx, 0);
    let pool = member_u64(zio, &CONFIG.offsets.zio_spa);
    let size = member_u64(zio, &CONFIG.offsets.zio_size);
    enter(Stage::ChecksumVerify, thread_id(), 0, size, pool, 0);
}

fn verify_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::ChecksumVerify, 0);
}

/// The zio_t fields the leaf-I/O probes use.
struct LeafZio {
    timestamp: u64,
    delta: u64,
    delay: u64,
    error: u32,
    flags: u32,
    io_type: u32,
    priority: u32,
    vd: u64,
    spa: u64,
    size: u64,
}

/// Copies the start of a zio_t (`zio_read_len` bytes, which hold every field
/// used) in one read, then picks the fields out of the copy: one helper call
/// instead of ten, on the stage that fires for every leaf I/O.
#[inline(always)]
fn read_leaf_zio(zio: u64) -> Option<LeafZio> {
    let len = config_u32(&CONFIG.zio_read_len);
    if zio == 0 || len == 0 || len > ZIO_WINDOW {
        return None;
    }
    let copy = ZIO_COPY.get_ptr_mut(0)?;
    let dst = copy as *mut core::ffi::c_void;
    let src = zio as *const core::ffi::c_void;
    let result = unsafe {
        if is_kernel() {
            aya_ebpf::helpers::generated::bpf_probe_read_kernel(dst, len, src)
        } else {
            aya_ebpf::helpers::generated::bpf_probe_read_user(dst, len, src)
        }
    };
    if result != 0 {
        bump(counter::READ_FAILED);
        return None;
    }
    let copy = unsafe { &*copy };
    let o = &CONFIG.offsets;
    Some(LeafZio {
        timestamp: field(copy, &o.zio_timestamp),
        delta: field(copy, &o.zio_delta),
        delay: field(copy, &o.zio_delay),
        error: field(copy, &o.zio_error),
        flags: field(copy, &o.zio_flags),
        io_type: field(copy, &o.zio_type),
        priority: field(copy, &o.zio_priority),
        vd: field(copy, &o.zio_vd),
        spa: field(copy, &o.zio_spa),
        size: field(copy, &o.zio_size),
    })
}

/// A field of the zio_t copy at `offset` (zero if it lies outside the copy,
/// which user space rules out).
#[inline(always)]
fn field<T: Copy + Default>(copy: &[u8; ZIO_WINDOW as usize], offset: &u32) -> T {
    let offset = config_u32(offset) as usize;
    if offset > ZIO_WINDOW as usize - core::mem::size_of::<T>() {
        return T::default();
    }
    unsafe { core::ptr::read_unaligned(copy.as_ptr().add(offset) as *const T) }
}

/// vdev_stat_update(zio_t *zio, uint64_t psize): entry only. ZFS has already set
/// io_delta (queue + disk) and io_delay (disk) on leaf I/Os, exactly what
/// `zpool iostat -l/-w` reads, so no probe pair is needed per I/O.
fn vdev_stat_entry(ctx: &ProbeContext) {
    if !offsets_valid() || !wanted(false) {
        return;
    }
    let Some(zio) = read_leaf_zio(arg(ctx, 0)) else {
        return;
    };
    record_leaf_io(&zio, zio.delta);
}

/// vdev_queue_io_done(zio_t *zio), entry only: libzpool's cheaper source of the
/// same figures. vdev_stat_update runs for every zio (logical ones too: about 3
/// per 4k write), this only for leaf I/Os that went through the queue, so it
/// fires several times less often, and a uprobe costs about 0.5 us per hit. At
/// its entry io_delay is final; io_delta is computed inside, so it is computed
/// here the same way: now minus io_timestamp, both gethrtime(), which in user
/// space is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns. (In the kernel
/// gethrtime is the raw monotonic clock, so the kernel target keeps
/// vdev_stat_update, where kprobes are cheap anyway.)
fn vdev_done_entry(ctx: &ProbeContext) {
    if !offsets_valid() || !wanted(false) {
        return;
    }
    let Some(zio) = read_leaf_zio(arg(ctx, 0)) else {
        return;
    };
    if zio.timestamp == 0 {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    record_leaf_io(&zio, now.saturating_sub(zio.timestamp));
}

/// Records one leaf I/O's queue and disk time (`delta` is queue + disk), with
/// the conditions zpool iostat's histograms use.
#[inline(always)]
fn record_leaf_io(zio: &LeafZio, delta: u64) {
    let delay = zio.delay;
    if delta == 0 || delay == 0 {
        // Not a leaf I/O that went through the queue (or it failed early).
        return;
    }
    // No error, and not a member of an aggregated I/O (the aggregate itself is
    // counted once).
    let bypass = 1u32 << (config_u32(&CONFIG.semantics.zio_flag_io_bypass_bit) & 31);
    if zio.error != 0 || zio.flags & bypass != 0 {
        return;
    }
    let guid = member_u64(zio.vd, &CONFIG.offsets.vdev_guid);
    let mut class = (zio.io_type & 0xff) << 8 | (zio.priority & 0xff);
    if unsafe { CACHE_VDEVS.get(&zio.vd) }.is_some() {
        class |= VDEV_CACHE_DEVICE;
    }
    let queue = delta.saturating_sub(delay);
    // Read once: the leaf's place and the commit's log test both need it.
    let top = leaf_top(zio.vd);
    learn_leaf_place(top, guid, zio.spa);
    // ZIO_TYPE_WRITE at ZIO_PRIORITY_SYNC_WRITE: a log block write (or another
    // sync write) that a commit in progress may be waiting for.
    if zio.io_type == 2 && zio.priority == 1 {
        charge_commit_write(zio.spa, top, delta);
    }
    record(
        &stage_key(Stage::VdevTotal, class, zio.spa, guid),
        delta,
        zio.size,
        0,
    );
    record(
        &stage_key(Stage::VdevDisk, class, zio.spa, guid),
        delay,
        zio.size,
        0,
    );
    record(
        &stage_key(Stage::VdevQueue, class, zio.spa, guid),
        queue,
        zio.size,
        0,
    );
}

/// Charges a leaf sync write (on the top-level vdev `top`) to the pool's
/// commit in progress, if any.
#[inline(always)]
fn charge_commit_write(pool: u64, top: u64, total_ns: u64) {
    let Some(window) = COMMITS.get_ptr_mut(&pool) else {
        return;
    };
    let window = unsafe { &mut *window };
    if window.active == 0 {
        return;
    }
    window.writes += 1;
    if total_ns > window.max_write_ns {
        window.max_write_ns = total_ns;
    }
    if member_u32(top, &CONFIG.offsets.vdev_islog) != 0 {
        window.to_log = 1;
    }
}

/// Where each leaf sits in its pool, by leaf guid: what `serve` labels its
/// rows with (top-level vdev, allocation class).
#[map]
static LEAF_PLACES: LruHashMap<u64, LeafPlace> =
    LruHashMap::with_max_entries(LEAF_PLACES_TRACKED, 0);

/// A leaf's top-level vdev; a cache device (or a spare) is its own.
#[inline(always)]
fn leaf_top(vd: u64) -> u64 {
    match member_u64(vd, &CONFIG.offsets.vdev_top) {
        0 => vd,
        top => top,
    }
}

/// Reads a leaf's top-level vdev `top` (guid, index, type, allocation bias)
/// the first time the leaf is seen, and again if its top-level vdev changed:
/// one lookup per leaf I/O otherwise.
#[inline(always)]
fn learn_leaf_place(top: u64, guid: u64, pool: u64) {
    let o = &CONFIG.offsets;
    if unsafe { LEAF_PLACES.get(&guid) }.is_some_and(|known| known.top == top) {
        return;
    }
    let mut place = LeafPlace {
        pool,
        top,
        top_guid: member_u64(top, &o.vdev_guid),
        top_id: member_u64(top, &o.vdev_id),
        alloc_bias: member_u32(top, &o.vdev_alloc_bias),
        is_log: member_u32(top, &o.vdev_islog),
        top_type: [0; 16],
    };
    let ops = member_u64(top, &o.vdev_ops);
    if ops != 0 {
        let name = (ops + config_u32(&o.vdev_op_type) as u64) as *const u8;
        let read = if is_kernel() {
            unsafe { bpf_probe_read_kernel_str_bytes(name, &mut place.top_type) }.is_ok()
        } else {
            unsafe { bpf_probe_read_user_str_bytes(name, &mut place.top_type) }.is_ok()
        };
        if !read {
            bump(counter::READ_FAILED);
        }
    }
    let _ = LEAF_PLACES.insert(&guid, &place, 0);
}

/// vdev_queue_io(zio_t *zio): fallback timing without offsets, keyed by the zio.
/// A zio the queue held passes here a second time when it is issued: the first
/// start stands, so the second insert's EEXIST is expected, not a nesting.
fn vdev_queue_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let key = span_key(Stage::VdevQueueTimed, arg(ctx, 0));
    let value = InFlight {
        start_ns: unsafe { bpf_ktime_get_ns() },
        class: 0,
        bytes: 0,
        pool: 0,
        extra: 0,
    };
    match INFLIGHT.insert(&key, &value, BPF_NOEXIST as u64) {
        Ok(()) | Err(-17) => {}
        Err(_) => bump(counter::ENTRY_MAP_FULL),
    }
}

/// zio_vdev_io_bypass(zio_t *zio): a child merged into an aggregate never
/// reaches vdev_queue_io_done (the aggregate does), so its spans end here
/// unrecorded, as ZFS leaves aggregated children out of its own histograms.
fn vdev_bypass_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let zio = arg(ctx, 0);
    let _ = take(span_key(Stage::VdevQueueTimed, zio));
    let _ = take(span_key(Stage::VdevDiskTimed, zio));
}

/// vdev_disk_io_start / vdev_file_io_start(zio_t *zio), kernel statics: where a
/// queued leaf I/O goes to the device, splitting the fallback span into queue
/// wait and disk time.
fn vdev_disk_start_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let zio = arg(ctx, 0);
    let Some(queued) = (unsafe { INFLIGHT.get(&span_key(Stage::VdevQueueTimed, zio)) }) else {
        return; // not through the queue (flushes, probes): no split to make
    };
    let now = unsafe { bpf_ktime_get_ns() };
    record(
        &stage_key(Stage::VdevWaitTimed, 0, 0, 0),
        now.saturating_sub(queued.start_ns),
        0,
        0,
    );
    let key = span_key(Stage::VdevDiskTimed, zio);
    let value = InFlight {
        start_ns: now,
        class: 0,
        bytes: 0,
        pool: 0,
        extra: 0,
    };
    if INFLIGHT.insert(&key, &value, 0).is_err() {
        bump(counter::ENTRY_MAP_FULL);
    }
}

/// vdev_queue_io_done(zio_t *zio): entry of the completion ends the fallback span.
fn vdev_queue_done_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let zio = arg(ctx, 0);
    if let Some((_, duration)) = take(span_key(Stage::VdevDiskTimed, zio)) {
        record(&stage_key(Stage::VdevDiskTimed, 0, 0, 0), duration, 0, 0);
    }
    if let Some((entry, duration)) = leave(Stage::VdevQueueTimed, zio) {
        record(
            &stage_key(Stage::VdevQueueTimed, 0, entry.pool, 0),
            duration,
            0,
            0,
        );
    }
}

/// zil_lwb_write_issue(zilog_t *zilog, lwb_t *lwb), kernel static: a log block
/// goes to disk. Its done callback below ends the span.
fn lwb_issue_entry(ctx: &ProbeContext) {
    if !offsets_valid() {
        return;
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zilog_spa);
    enter(Stage::ZilLogBlock, arg(ctx, 1), 0, 0, pool, 0);
}

/// zil_lwb_flush_vdevs_done(zio_t *zio), kernel static: the log block is
/// written and its vdevs flushed; the lwb is the zio's io_private.
fn lwb_done_entry(ctx: &ProbeContext) {
    if !offsets_valid() {
        return;
    }
    let lwb = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_private);
    if let Some((entry, duration)) = leave(Stage::ZilLogBlock, lwb) {
        record(
            &stage_key(Stage::ZilLogBlock, 0, entry.pool, 0),
            duration,
            0,
            0,
        );
    }
}

/// zio_flush(zio_t *pio, vdev_t *vd), timed as a call (`FLUSH_TIMED_CALL`): in
/// libzpool up to 2.2 the leaf flushes (fsync) run inside it. From 2.2.4 it
/// calls itself for each child vdev, so only the outermost call is timed and
/// nested ones deepen it (the entry's `bytes` holds the depth).
fn flush_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    if let Some(outer) = INFLIGHT.get_ptr_mut(&thread_key(Stage::Flush)) {
        unsafe { (*outer).bytes += 1 };
        return;
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa);
    let guid = member_u64(arg(ctx, 1), &CONFIG.offsets.vdev_guid);
    enter(Stage::Flush, thread_id(), 0, 0, pool, guid);
}

fn flush_return(_ctx: &RetProbeContext) {
    if !wanted(false) {
        return;
    }
    if let Some(outer) = INFLIGHT.get_ptr_mut(&thread_key(Stage::Flush)) {
        let depth = unsafe { &mut (*outer).bytes };
        if *depth > 0 {
            *depth -= 1;
            return;
        }
    }
    if let Some((entry, duration)) = leave(Stage::Flush, thread_id()) {
        record(
            &stage_key(Stage::Flush, 0, entry.pool, entry.extra),
            duration,
            0,
            0,
        );
        if let Some(window) = COMMITS.get_ptr_mut(&entry.pool) {
            let window = unsafe { &mut *window };
            if window.active > 0 {
                window.flush_ns += duration;
            }
        }
    }
}

/// zio_flush(zio_t *pio, vdev_t *vd) entry in `FLUSH_LEAF_ISSUE_TO_DONE` mode
/// (libzpool 2.3): at a leaf (no children) zio_flush makes the flush zio, which
/// a vdev_file taskq thread completes later; its start is kept by vdev.
fn flush_leaf_entry(ctx: &ProbeContext) {
    if !offsets_valid() || !wanted(false) {
        return;
    }
    let vd = arg(ctx, 1);
    if vd == 0 || member_u64(vd, &CONFIG.offsets.vdev_children) != 0 {
        return;
    }
    let start = FlushStart {
        start_ns: unsafe { bpf_ktime_get_ns() },
        pool: member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa),
        guid: member_u64(vd, &CONFIG.offsets.vdev_guid),
    };
    if FLUSH_STARTS.insert(&vd, &start, 0).is_err() {
        bump(counter::ENTRY_MAP_FULL);
    }
}

/// zio_interrupt(zio_t *zio) entry in `FLUSH_LEAF_ISSUE_TO_DONE` mode: the end
/// of a leaf flush started in `flush_leaf_entry`, on whichever thread ran it.
/// Other zios (every leaf read and write also ends here) return after one read.
fn flush_done_entry(ctx: &ProbeContext) {
    if !offsets_valid() {
        return;
    }
    let zio = arg(ctx, 0);
    if zio == 0 {
        return;
    }
    let io_type: u32 = read_or(zio + config_u32(&CONFIG.offsets.zio_type) as u64, 0);
    if io_type != config_u32(&CONFIG.semantics.zio_type_flush) {
        return;
    }
    let vd = member_u64(zio, &CONFIG.offsets.zio_vd);
    let Some(start) = (unsafe { FLUSH_STARTS.get(&vd) }).copied() else {
        count_unmatched(Stage::Flush);
        return;
    };
    let _ = FLUSH_STARTS.remove(&vd);
    let now = unsafe { bpf_ktime_get_ns() };
    let duration = now.saturating_sub(start.start_ns);
    record(
        &stage_key(Stage::Flush, 0, start.pool, start.guid),
        duration,
        0,
        0,
    );
    // Leaf flushes run in parallel on the taskq: a commit waits for their span
    // (first issue to last completion), not for their sum.
    let Some(window) = COMMITS.get_ptr_mut(&start.pool) else {
        return;
    };
    let window = unsafe { &mut *window };
    if window.active > 0 {
        if window.flush_first_ns == 0 || start.start_ns < window.flush_first_ns {
            window.flush_first_ns = start.start_ns;
        }
        if now > window.flush_last_ns {
            window.flush_last_ns = now;
        }
    }
}

/// zil_commit(zilog_t *zilog, uint64_t foid)
fn zil_commit_entry(ctx: &ProbeContext) {
    if !wanted(true) {
        return;
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zilog_spa);
    close_write_cycle(pool);
    enter(Stage::ZilCommit, thread_id(), 0, 0, pool, 0);
    internal_begin();
    // Open (or join) the pool's commit window. Concurrent committers share one
    // window, as they share the log block writes and flushes ZFS does for them.
    match COMMITS.get_ptr_mut(&pool) {
        Some(window) => {
            let window = unsafe { &mut *window };
            if window.active == 0 {
                *window = CommitWindow {
                    active: 1,
                    ..CommitWindow::default()
                };
            } else {
                window.active += 1;
            }
        }
        None => {
            let _ = COMMITS.insert(
                &pool,
                &CommitWindow {
                    active: 1,
                    ..CommitWindow::default()
                },
                0,
            );
        }
    }
}

fn zil_commit_return(_ctx: &RetProbeContext) {
    if !wanted(true) {
        return;
    }
    internal_end();
    let Some((entry, duration)) = leave(Stage::ZilCommit, thread_id()) else {
        return;
    };
    record(
        &stage_key(Stage::ZilCommit, 0, entry.pool, 0),
        duration,
        0,
        0,
    );
    if let Some(slot) = writer_slot() {
        slot.last_commit_end_ns = unsafe { bpf_ktime_get_ns() };
        slot.last_pool = entry.pool;
    }
    let Some(window) = COMMITS.get_ptr_mut(&entry.pool) else {
        return;
    };
    let window = unsafe { &mut *window };
    if window.writes > 0 {
        let key = stage_key(Stage::ZilLogWrite, window.to_log as u32, entry.pool, 0);
        record(&key, window.max_write_ns, window.writes, 0);
    }
    if config_u32(&CONFIG.semantics.flush_mode) == FLUSH_LEAF_ISSUE_TO_DONE
        && window.flush_last_ns > 0
    {
        window.flush_ns = window
            .flush_last_ns
            .saturating_sub(window.flush_first_ns)
            .min(duration);
    }
    record(
        &stage_key(Stage::ZilFlush, 0, entry.pool, 0),
        window.flush_ns,
        0,
        0,
    );
    if window.writes > 0 {
        // The commit's timed wait (entry.extra) is its own; the log write and
        // flushes it shares with concurrent committers.
        let waited = entry.extra.min(duration);
        record(
            &stage_key(Stage::ZilTimeoutWait, window.to_log as u32, entry.pool, 0),
            waited,
            0,
            0,
        );
        // Per commit, so its median is exact where a difference of medians
        // would be mostly bucket rounding.
        let other = duration.saturating_sub(window.max_write_ns + window.flush_ns + waited);
        record(
            &stage_key(Stage::ZilOther, window.to_log as u32, entry.pool, 0),
            other,
            0,
            0,
        );
    }
    window.active = window.active.saturating_sub(1);
}

/// cv_timedwait_hires(kcondvar_t *cv, kmutex_t *mp, hrtime_t tim, ...):
/// inside zil_commit, zil_commit_waiter's wait for its open log block to
/// fill (the commit timeout); other callers are left alone.
fn timed_wait_entry(_ctx: &ProbeContext) {
    if unsafe { INFLIGHT.get(&thread_key(Stage::ZilCommit)) }.is_none() {
        return;
    }
    enter(Stage::ZilTimeoutWait, thread_id(), 0, 0, 0, 0);
}

/// Adds the wait to the commit in progress (its `extra`). Waits outside a
/// commit opened no span: nothing to end, and nothing unmatched.
fn timed_wait_return(_ctx: &RetProbeContext) {
    let Some((_, waited)) = take(thread_key(Stage::ZilTimeoutWait)) else {
        return;
    };
    if let Some(entry) = INFLIGHT.get_ptr_mut(&thread_key(Stage::ZilCommit)) {
        unsafe { (*entry).extra += waited };
    }
}

/// Reads spa_name (the first member of spa_t) once per pool.
#[inline(always)]
fn learn_pool_name(spa: u64) {
    if spa != 0 && unsafe { POOL_NAMES.get(&spa) }.is_none() {
        let mut name = PoolName { name: [0; 64] };
        let read = if is_kernel() {
            unsafe { bpf_probe_read_kernel_str_bytes(spa as *const u8, &mut name.name) }.is_ok()
        } else {
            unsafe { bpf_probe_read_user_str_bytes(spa as *const u8, &mut name.name) }.is_ok()
        };
        if read {
            let _ = POOL_NAMES.insert(&spa, &name, 0);
        } else {
            bump(counter::READ_FAILED);
        }
    }
}

/// Pools exported or destroyed, with their names (see [`GonePool`]).
#[map]
static GONE_POOLS: HashMap<u64, GonePool> = HashMap::with_max_entries(256, 0);

/// spa_remove(spa_t *spa): the pool is gone (exported or destroyed). Its name
/// moves to GONE_POOLS, so that a pool created later at the same address
/// learns its own name, and its commit window is dropped.
fn spa_remove_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let spa = arg(ctx, 0);
    if spa == 0 {
        return;
    }
    learn_pool_name(spa);
    let Some(name) = (unsafe { POOL_NAMES.get(&spa) }) else {
        return;
    };
    let gone = GonePool {
        removed_ns: unsafe { bpf_ktime_get_ns() },
        name: name.name,
    };
    if GONE_POOLS.insert(&spa, &gone, 0).is_err() {
        bump(counter::NAME_MAP_FULL);
    }
    let _ = POOL_NAMES.remove(&spa);
    let _ = COMMITS.remove(&spa);
}

/// spa_sync(spa_t *spa, uint64_t txg): also learns the pool's name.
fn spa_sync_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let spa = arg(ctx, 0);
    let txg = arg(ctx, 1);
    learn_pool_name(spa);
    enter(Stage::SpaSync, thread_id(), 0, 0, spa, txg);
    internal_begin();
    if let Some(generation) = SYNC_GENERATION.get_ptr_mut(0) {
        unsafe { *generation += 1 };
    }
}

fn spa_sync_return(_ctx: &RetProbeContext) {
    if !wanted(false) {
        return;
    }
    internal_end();
    let Some((entry, duration)) = leave(Stage::SpaSync, thread_id()) else {
        return;
    };
    record(&stage_key(Stage::SpaSync, 0, entry.pool, 0), duration, 0, 0);
    let event = TxgEvent {
        pool: entry.pool,
        txg: entry.extra,
        start_ns: entry.start_ns,
        duration_ns: duration,
        tgid: (bpf_get_current_pid_tgid() >> 32) as u32,
        pad: 0,
    };
    if EVENTS.output::<TxgEvent>(&event, 0).is_err() {
        bump(counter::RINGBUF_FULL);
    }
}

/// txg_wait_synced(dsl_pool_t *dp, uint64_t txg)
fn txg_wait_entry(ctx: &ProbeContext) {
    if !wanted(true) {
        return;
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.dsl_pool_spa);
    enter(Stage::TxgWaitSynced, thread_id(), 0, 0, pool, 0);
}

fn txg_wait_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::TxgWaitSynced, 0);
}

#[inline(always)]
fn tx_pool(tx: u64) -> u64 {
    let dp = member_u64(tx, &CONFIG.offsets.dmu_tx_pool);
    member_u64(dp, &CONFIG.offsets.dsl_pool_spa)
}

/// dmu_tx_assign(dmu_tx_t *tx, uint64_t txg_how): includes throttle delays.
fn tx_assign_entry(ctx: &ProbeContext) {
    if !wanted(true) {
        return;
    }
    enter(Stage::TxAssign, thread_id(), 0, 0, tx_pool(arg(ctx, 0)), 0);
}

fn tx_assign_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::TxAssign, 0);
}

/// dmu_tx_wait(dmu_tx_t *tx)
fn tx_wait_entry(ctx: &ProbeContext) {
    if !wanted(true) {
        return;
    }
    enter(Stage::TxWait, thread_id(), 0, 0, tx_pool(arg(ctx, 0)), 0);
}

fn tx_wait_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::TxWait, 0);
}

/// Whether this thread is inside ZFS's own machinery rather than the workload:
/// spa_sync writes metadata (space maps) with dmu_write, and zil_commit's
/// get_data callback reads the data it logs with dmu_read.
#[inline(always)]
fn in_zfs_internal() -> bool {
    let tid = thread_id() as u32;
    INTERNAL
        .get(tid % INTERNAL_SLOTS)
        .is_some_and(|slot| *slot == tid)
}

/// Marks this thread as inside spa_sync or zil_commit (see `INTERNAL`).
#[inline(always)]
fn internal_begin() {
    let tid = thread_id() as u32;
    if let Some(slot) = INTERNAL.get_ptr_mut(tid % INTERNAL_SLOTS) {
        unsafe { *slot = tid };
    }
}

#[inline(always)]
fn internal_end() {
    let tid = thread_id() as u32;
    if let Some(slot) = INTERNAL.get_ptr_mut(tid % INTERNAL_SLOTS) {
        if unsafe { *slot } == tid {
            unsafe { *slot = 0 };
        }
    }
}

/// The spa_t of objset `os`, from this CPU's one-entry cache when it is the
/// same objset as last time (a workload writes to one or a few datasets).
#[inline(always)]
fn objset_spa(os: u64) -> u64 {
    let Some(cache) = OBJSET_SPA.get_ptr_mut(0) else {
        return member_u64(os, &CONFIG.offsets.objset_spa);
    };
    let cache = unsafe { &mut *cache };
    let generation = SYNC_GENERATION.get(0).copied().unwrap_or(0);
    if cache[0] == os && cache[2] == generation && os != 0 {
        return cache[1];
    }
    let spa = member_u64(os, &CONFIG.offsets.objset_spa);
    *cache = [os, spa, generation];
    spa
}

/// This thread's writer slot, taken over (and counted) if another thread held it.
#[inline(always)]
fn writer_slot() -> Option<&'static mut WriterSlot> {
    let tid = thread_id();
    let slot = unsafe { &mut *WRITERS.get_ptr_mut(tid as u32 % WRITER_SLOTS)? };
    if slot.tid != tid {
        if slot.tid != 0 && slot.writes > 0 {
            bump(counter::WRITER_SLOT_TAKEN);
        }
        *slot = WriterSlot {
            tid,
            ..WriterSlot::default()
        };
    }
    Some(slot)
}

/// A workload write: remembered until this thread's next zil_commit, which
/// makes it a sync write.
#[inline(always)]
fn note_write(stage: Stage, bytes: u64) {
    if !matches!(stage, Stage::WorkloadWrite) {
        return;
    }
    if let Some(slot) = writer_slot() {
        slot.writes += 1;
        slot.bytes += bytes;
    }
}

/// At zil_commit entry: the cycle since this thread's previous commit, with
/// the writes this commit makes durable.
#[inline(always)]
fn close_write_cycle(pool: u64) {
    let Some(slot) = writer_slot() else { return };
    if slot.last_commit_end_ns != 0 && slot.last_pool == pool {
        let cycle = unsafe { bpf_ktime_get_ns() }.saturating_sub(slot.last_commit_end_ns);
        record(
            &stage_key(Stage::SyncWriteCycle, 0, pool, 0),
            cycle,
            slot.writes,
            slot.bytes,
        );
    }
    slot.writes = 0;
    slot.bytes = 0;
}

/// dmu_write/dmu_read(objset_t *os, uint64_t object, uint64_t offset, uint64_t size, ...)
fn workload_dmu(ctx: &ProbeContext, stage: Stage) {
    if !wanted(true) || in_zfs_internal() {
        return;
    }
    let pool = objset_spa(arg(ctx, 0));
    note_write(stage, arg(ctx, 3));
    enter(stage, thread_id(), 0, arg(ctx, 3), pool, 0);
}

/// Entry-only variant: counts operations and bytes without timing them (class 1
/// marks "count only"), one uprobe per operation instead of two.
fn workload_count(ctx: &ProbeContext, stage: Stage) {
    if !wanted(true) || in_zfs_internal() {
        return;
    }
    let pool = objset_spa(arg(ctx, 0));
    note_write(stage, arg(ctx, 3));
    record(
        &stage_key(stage, COUNT_ONLY_CLASS, pool, 0),
        0,
        arg(ctx, 3),
        0,
    );
}

/// zio_read(zio_t *pio, spa_t *spa, const blkptr_t *bp, abd_t *data,
/// uint64_t lsize, ...): a block read from the disks, counted at entry.
/// Not per workload request (ARC hits never get here), so cheap next to the
/// disk read it starts; ZFS's own threads issue prefetches, so they count on
/// the kernel too. `bytes` is the logical size, `bytes_out` the physical size
/// from the block pointer (an on-disk format, the same in every release), and
/// the class carries log2 of the physical size. With the leaf reads, the
/// count gives the fan-out of a block over a raidz's data columns. Embedded
/// block pointers (data in the pointer) are not counted.
fn block_read_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let logical = arg(ctx, 4);
    let bp = arg(ctx, 2);
    let prop = if bp == 0 {
        0
    } else {
        read_or::<u64>(bp + BLKPTR_PROP_OFFSET, 0)
    };
    // An embedded block pointer holds its data: zio_read copies it out
    // without touching a disk.
    if prop & BLKPTR_EMBEDDED != 0 {
        return;
    }
    let physical = if prop == 0 {
        logical
    } else {
        (((prop >> 16) & 0xffff) + 1) << 9
    };
    let size_class = if physical <= 1 {
        0
    } else {
        64 - (physical - 1).leading_zeros() as u32
    };
    record(
        &stage_key(
            Stage::BlockRead,
            COUNT_ONLY_CLASS | size_class,
            arg(ctx, 1),
            0,
        ),
        0,
        logical,
        physical,
    );
    arc_read_took(arc_read_class::DISK);
    note_miss_reuse(ctx, bp, physical);
}

/// Records the block's reuse distance: the bytes read from disk (by every
/// CPU) since its previous read from disk. The block is known by a hash of
/// its first DVA (vdev, offset), never stored as such. zio_read's priority
/// (8th argument, on the stack) tells the workload's misses (sync reads)
/// from prefetch; on the kernel it is not read yet.
#[inline(always)]
fn note_miss_reuse(ctx: &ProbeContext, bp: u64, physical: u64) {
    const ZIO_PRIORITY_SYNC_READ: u32 = 0;
    let dva = read_or::<[u64; 2]>(bp, [0, 0]);
    if dva == [0, 0] {
        return;
    }
    let id = (dva[0] ^ dva[1].rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let Some(clock) = MISS_CLOCK.get_ptr_mut(0) else {
        return;
    };
    let clock = unsafe { &mut *clock };
    requests::atomic_add(clock, physical);
    // Another CPU's add may land between the two: off by one block at most.
    let now = unsafe { core::ptr::read_volatile(clock) };
    let mut class = if is_kernel() {
        miss_reuse_class::PRIORITY_UNKNOWN
    } else if stack_arg(ctx, 8) as u32 != ZIO_PRIORITY_SYNC_READ {
        miss_reuse_class::ASYNC
    } else {
        0
    };
    let distance = match unsafe { LAST_MISS.get(&id) } {
        Some(&then) => now.saturating_sub(then).saturating_sub(physical),
        None => {
            class |= miss_reuse_class::FIRST;
            0
        }
    };
    let _ = LAST_MISS.insert(&id, &now, 0);
    record(
        &stage_key(Stage::ArcMissReuse, class, arg(ctx, 1), 0),
        distance,
        physical,
        0,
    );
}

/// Bytes read from disk by zio_read so far, all CPUs: the clock of the
/// reuse distances.
#[map]
static MISS_CLOCK: Array<u64> = Array::with_max_entries(1, 0);

/// Per block read from disk (a hash of its first DVA), MISS_CLOCK after its
/// last read. LRU: the longest-unread blocks are forgotten first.
#[map]
static LAST_MISS: LruHashMap<u64, u64> =
    LruHashMap::with_max_entries(zprof_common::MISS_BLOCKS_TRACKED, 0);

/// ddt_lookup(ddt_t *ddt, const blkptr_t *bp, boolean_t add_or_verify):
/// on the thread of the write pipeline that dedups the block.
fn ddt_lookup_entry(_ctx: &ProbeContext) {
    if wanted(false) {
        enter(Stage::DdtLookup, thread_id(), 0, 0, 0, 0);
    }
}

fn ddt_lookup_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::DdtLookup, 0);
}

/// ddt_sync(spa_t *spa, uint64_t txg), inside spa_sync.
fn ddt_sync_entry(ctx: &ProbeContext) {
    if wanted(false) {
        enter(Stage::DdtSync, thread_id(), 0, 0, arg(ctx, 0), 0);
    }
}

fn ddt_sync_return(_ctx: &RetProbeContext) {
    leave_and_record(Stage::DdtSync, 0);
}

/// ARC_FLAG_* bits of arc_read's `arc_flags` (the same in 2.1 to 2.3).
const ARC_FLAG_WAIT: u64 = 1 << 0;
const ARC_FLAG_PREFETCH: u64 = 1 << 2;
const ARC_FLAG_CACHED: u64 = 1 << 3;
/// An open arc_read span's class bit: the path below was seen (the first
/// read it issued decides; a waited read may run other reads on its thread).
const ARC_PATH_SEEN: u64 = 1 << 16;

/// arc_read(zio_t *pio, spa_t *spa, const blkptr_t *bp, done, private,
/// priority, int zio_flags, arc_flags_t *arc_flags, const zbookmark_phys_t *zb):
/// the 8th argument is on the stack, 16 bytes above the return address at
/// entry (x86-64). Embedded block pointers are not ARC reads (their data is
/// in the pointer) and ZFS does not count them either.
fn arc_read_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let bp = arg(ctx, 2);
    let prop = if bp == 0 {
        0
    } else {
        read_or::<u64>(bp + BLKPTR_PROP_OFFSET, 0)
    };
    if prop & BLKPTR_EMBEDDED != 0 {
        return;
    }
    let flags_ptr = stack_arg(ctx, 8);
    let flags = read_or::<u32>(flags_ptr, 0) as u64;
    let mut class = 0u64;
    if flags & ARC_FLAG_PREFETCH != 0 {
        class |= arc_read_class::PREFETCH as u64;
    }
    if flags & ARC_FLAG_WAIT != 0 {
        class |= arc_read_class::WAITED as u64;
    }
    let logical = if prop == 0 {
        0
    } else {
        ((prop & 0xffff) + 1) << 9
    };
    enter(
        Stage::ArcRead,
        thread_id(),
        class,
        logical,
        arg(ctx, 1),
        flags_ptr,
    );
}

/// zio_read_phys(pio, vd, offset, size, data, checksum, done, private,
/// priority, flags, boolean_t labels) entry: a read of a vdev's labels, or,
/// without `labels`, of a cache device: under arc_read, the block is read from
/// it. The kernel's stack arguments are not read yet (not checked under
/// kprobes): there a label read on the thread of an arc_read that found its
/// block in flight would count as L2ARC, and cache devices are not marked.
fn arc_l2_read_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    if is_kernel() {
        arc_read_took(arc_read_class::L2);
        return;
    }
    if stack_arg(ctx, 11) as u32 != 0 {
        return;
    }
    arc_read_took(arc_read_class::L2);
    mark_cache_vdev(arg(ctx, 1));
}

/// zio_write_phys(same arguments as zio_read_phys) entry, libzpool: at
/// ZIO_PRIORITY_ASYNC_WRITE and not a label write, only the L2ARC feed
/// writes this way (2.1 to 2.3): its vdev is a cache device.
fn l2_feed_write_entry(ctx: &ProbeContext) {
    const ZIO_PRIORITY_ASYNC_WRITE: u32 = 3;
    if wanted(false)
        && stack_arg(ctx, 11) as u32 == 0
        && stack_arg(ctx, 9) as u32 == ZIO_PRIORITY_ASYNC_WRITE
    {
        mark_cache_vdev(arg(ctx, 1));
    }
}

/// Remembers a cache device, so that its leaf I/Os get rows of their own.
#[inline(always)]
fn mark_cache_vdev(vd: u64) {
    if vd != 0 && unsafe { CACHE_VDEVS.get(&vd) }.is_none() {
        let _ = CACHE_VDEVS.insert(&vd, &1, 0);
    }
}

/// The `n`-th integer argument (1-based, 7 or more: on the stack) at a
/// function's first instruction, x86-64: above the return address.
#[inline(always)]
fn stack_arg(ctx: &ProbeContext, n: u64) -> u64 {
    let sp = unsafe { (*ctx.regs).rsp };
    read_or::<u64>(sp + 8 * (n - 6), 0)
}

/// Marks the path the thread's arc_read took with its first block read: in
/// its open span when arc_read is timed, else for spa_read_history_add (the
/// end of the same arc_read, on the same thread) to pick up.
#[inline(always)]
fn arc_read_took(path: u32) {
    let tid = thread_id();
    if let Some(open) = INFLIGHT.get_ptr_mut(&span_key(Stage::ArcRead, tid)) {
        let open = unsafe { &mut *open };
        if open.class & ARC_PATH_SEEN == 0 {
            open.class |= ARC_PATH_SEEN | path as u64;
        }
        return;
    }
    let _ = ARC_READ_PATHS.insert(&tid, &path, BPF_NOEXIST as u64);
}

/// spa_read_history_add(spa_t *spa, const zbookmark_phys_t *zb, uint32_t aflags):
/// where every non-embedded arc_read ends, with its final flags by value.
/// Counts each ARC read by path with one probe; when arc_read itself is
/// timed (--full-timing on libzpool) its return does this instead.
fn arc_read_end_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let tid = thread_id();
    if unsafe { INFLIGHT.get(&span_key(Stage::ArcRead, tid)) }.is_some() {
        return;
    }
    let marked = unsafe { ARC_READ_PATHS.get(&tid) }.copied();
    if marked.is_some() {
        let _ = ARC_READ_PATHS.remove(&tid);
    }
    let flags = arg(ctx, 2);
    let path = if flags & ARC_FLAG_CACHED != 0 {
        arc_read_class::HIT
    } else {
        marked.unwrap_or(arc_read_class::IN_FLIGHT)
    };
    let mut class = path | COUNT_ONLY_CLASS;
    if flags & ARC_FLAG_PREFETCH != 0 {
        class |= arc_read_class::PREFETCH;
    }
    record(&stage_key(Stage::ArcRead, class, arg(ctx, 0), 0), 0, 0, 0);
}

/// arc_read's return: ARC_FLAG_CACHED is a hit; otherwise the read it issued
/// names the path, and no read at all means it found one in flight.
fn arc_read_return(_ctx: &RetProbeContext) {
    if !wanted(false) {
        return;
    }
    // Embedded block pointers open no span: `take`, not `leave`, so their
    // returns are not counted as unmatched (a full map is, at the entry).
    let Some((entry, duration)) = take(span_key(Stage::ArcRead, thread_id())) else {
        return;
    };
    let flags = read_or::<u32>(entry.extra, 0) as u64;
    let path = if flags & ARC_FLAG_CACHED != 0 {
        arc_read_class::HIT
    } else if entry.class & ARC_PATH_SEEN != 0 {
        entry.class as u32 & arc_read_class::PATH
    } else {
        arc_read_class::IN_FLIGHT
    };
    // A hit is served inside the call whether the caller waits or not.
    let asked_bits = if path == arc_read_class::HIT {
        arc_read_class::PREFETCH
    } else {
        arc_read_class::PREFETCH | arc_read_class::WAITED
    };
    let asked = entry.class as u32 & asked_bits;
    let timed = path == arc_read_class::HIT || asked & arc_read_class::WAITED != 0;
    let class = path | asked | if timed { 0 } else { COUNT_ONLY_CLASS };
    record(
        &stage_key(Stage::ArcRead, class, entry.pool, 0),
        if timed { duration } else { 0 },
        entry.bytes,
        0,
    );
}

/// arc_buf_access(arc_buf_t *buf): a read of a block whose buffer the dbuf
/// layer holds. ZFS counts it as an ARC hit unless its header is anonymous
/// (dirty: a write's read of the indirect blocks it dirties) or empty; an
/// anonymous header has no identity, so both show as an empty DVA. The
/// buffer's first field is its header, and the header's first its DVA, in
/// every release (2.1 to 2.3).
fn arc_held_hit_entry(ctx: &ProbeContext) {
    if !wanted(false) {
        return;
    }
    let hdr = read_or::<u64>(arg(ctx, 0), 0);
    let dva = read_or::<[u64; 2]>(hdr, [0, 0]);
    if dva == [0, 0] {
        return;
    }
    let class = arc_read_class::HIT | arc_read_class::HELD | COUNT_ONLY_CLASS;
    record(&stage_key(Stage::ArcRead, class, 0, 0), 0, 0, 0);
}

/// Cache devices (vdev_t pointers) seen by `mark_cache_vdev`.
#[map]
static CACHE_VDEVS: HashMap<u64, u8> = HashMap::with_max_entries(256, 0);

/// Per thread, the path of the block read its current arc_read issued, when
/// arc_read is not timed (see `arc_read_took`). LRU: a zio_read outside
/// arc_read (a scrub's) leaves an entry that ages out.
#[map]
static ARC_READ_PATHS: LruHashMap<u64, u32> = LruHashMap::with_max_entries(4096, 0);

/// Byte offset of blk_prop in a blkptr_t (after its three 16-byte DVAs):
/// on-disk format, not a compiler's layout.
const BLKPTR_PROP_OFFSET: u64 = 48;
/// blk_prop's embedded-data bit (BP_IS_EMBEDDED).
const BLKPTR_EMBEDDED: u64 = 1 << 39;

fn dmu_write_count(ctx: &ProbeContext) {
    workload_count(ctx, Stage::WorkloadWrite);
}

fn dmu_read_count(ctx: &ProbeContext) {
    workload_count(ctx, Stage::WorkloadRead);
}

fn dmu_write_entry(ctx: &ProbeContext) {
    workload_dmu(ctx, Stage::WorkloadWrite);
}

fn dmu_read_entry(ctx: &ProbeContext) {
    workload_dmu(ctx, Stage::WorkloadRead);
}

/// dmu_write_uio_dnode/dmu_read_uio_dnode(dnode_t *dn, zfs_uio_t *uio, uint64_t size, ...):
/// the kernel's ZPL and zvol paths both end here.
fn workload_uio(ctx: &ProbeContext, stage: Stage) {
    if !wanted(true) {
        return;
    }
    note_write(stage, arg(ctx, 2));
    enter(stage, thread_id(), 0, arg(ctx, 2), 0, 0);
}

fn uio_write_entry(ctx: &ProbeContext) {
    workload_uio(ctx, Stage::WorkloadWrite);
}

fn uio_read_entry(ctx: &ProbeContext) {
    workload_uio(ctx, Stage::WorkloadRead);
}

fn write_return(_ctx: &RetProbeContext) {
    // Calls inside spa_sync or zil_commit were skipped at entry on purpose.
    if in_zfs_internal() {
        return;
    }
    leave_and_record(Stage::WorkloadWrite, 0);
}

fn read_return(_ctx: &RetProbeContext) {
    if in_zfs_internal() {
        return;
    }
    leave_and_record(Stage::WorkloadRead, 0);
}

// --- Program sections. ---------------------------------------------------------

/// Emits each entry handler as a kprobe (`<name>_k`) and a uprobe (`<name>_u`).
macro_rules! entry_programs {
    ($($kname:ident, $uname:ident => $handler:ident;)*) => {$(
        #[kprobe]
        pub fn $kname(ctx: ProbeContext) -> u32 {
            $handler(&ctx);
            0
        }
        #[uprobe]
        pub fn $uname(ctx: ProbeContext) -> u32 {
            $handler(&ctx);
            0
        }
    )*};
}

/// Emits each return handler as a kretprobe and a uretprobe.
macro_rules! return_programs {
    ($($kname:ident, $uname:ident => $handler:ident;)*) => {$(
        #[kretprobe]
        pub fn $kname(ctx: RetProbeContext) -> u32 {
            $handler(&ctx);
            0
        }
        #[uretprobe]
        pub fn $uname(ctx: RetProbeContext) -> u32 {
            $handler(&ctx);
            0
        }
    )*};
}

entry_programs! {
    compress_entry_k, compress_entry_u => compress_entry;
    decompress_entry_k, decompress_entry_u => decompress_entry;
    zstd_entry_k, zstd_entry_u => zstd_entry;
    lz4_entry_k, lz4_entry_u => lz4_entry;
    checksum_entry_k, checksum_entry_u => checksum_entry;
    verify_entry_k, verify_entry_u => verify_entry;
    vdev_stat_entry_k, vdev_stat_entry_u => vdev_stat_entry;
    vdev_done_entry_k, vdev_done_entry_u => vdev_done_entry;
    vdev_queue_entry_k, vdev_queue_entry_u => vdev_queue_entry;
    vdev_queue_done_entry_k, vdev_queue_done_entry_u => vdev_queue_done_entry;
    vdev_bypass_entry_k, vdev_bypass_entry_u => vdev_bypass_entry;
    vdev_disk_start_entry_k, vdev_disk_start_entry_u => vdev_disk_start_entry;
    lwb_issue_entry_k, lwb_issue_entry_u => lwb_issue_entry;
    lwb_done_entry_k, lwb_done_entry_u => lwb_done_entry;
    flush_entry_k, flush_entry_u => flush_entry;
    flush_leaf_entry_k, flush_leaf_entry_u => flush_leaf_entry;
    flush_done_entry_k, flush_done_entry_u => flush_done_entry;
    zil_commit_entry_k, zil_commit_entry_u => zil_commit_entry;
    timed_wait_entry_k, timed_wait_entry_u => timed_wait_entry;
    spa_sync_entry_k, spa_sync_entry_u => spa_sync_entry;
    spa_remove_entry_k, spa_remove_entry_u => spa_remove_entry;
    txg_wait_entry_k, txg_wait_entry_u => txg_wait_entry;
    tx_assign_entry_k, tx_assign_entry_u => tx_assign_entry;
    tx_wait_entry_k, tx_wait_entry_u => tx_wait_entry;
    dmu_write_entry_k, dmu_write_entry_u => dmu_write_entry;
    dmu_write_count_k, dmu_write_count_u => dmu_write_count;
    dmu_read_count_k, dmu_read_count_u => dmu_read_count;
    block_read_entry_k, block_read_entry_u => block_read_entry;
    arc_read_entry_k, arc_read_entry_u => arc_read_entry;
    arc_l2_read_entry_k, arc_l2_read_entry_u => arc_l2_read_entry;
    arc_read_end_entry_k, arc_read_end_entry_u => arc_read_end_entry;
    arc_held_hit_entry_k, arc_held_hit_entry_u => arc_held_hit_entry;
    l2_feed_write_entry_k, l2_feed_write_entry_u => l2_feed_write_entry;
    ddt_lookup_entry_k, ddt_lookup_entry_u => ddt_lookup_entry;
    ddt_sync_entry_k, ddt_sync_entry_u => ddt_sync_entry;
    dmu_read_entry_k, dmu_read_entry_u => dmu_read_entry;
    uio_write_entry_k, uio_write_entry_u => uio_write_entry;
    uio_read_entry_k, uio_read_entry_u => uio_read_entry;
}

return_programs! {
    compress_return_k, compress_return_u => compress_return;
    decompress_return_k, decompress_return_u => decompress_return;
    zstd_return_k, zstd_return_u => zstd_return;
    lz4_return_k, lz4_return_u => lz4_return;
    checksum_return_k, checksum_return_u => checksum_return;
    verify_return_k, verify_return_u => verify_return;
    zil_commit_return_k, zil_commit_return_u => zil_commit_return;
    timed_wait_return_k, timed_wait_return_u => timed_wait_return;
    flush_return_k, flush_return_u => flush_return;
    spa_sync_return_k, spa_sync_return_u => spa_sync_return;
    txg_wait_return_k, txg_wait_return_u => txg_wait_return;
    tx_assign_return_k, tx_assign_return_u => tx_assign_return;
    tx_wait_return_k, tx_wait_return_u => tx_wait_return;
    write_return_k, write_return_u => write_return;
    read_return_k, read_return_u => read_return;
    arc_read_return_k, arc_read_return_u => arc_read_return;
    ddt_lookup_return_k, ddt_lookup_return_u => ddt_lookup_return;
    ddt_sync_return_k, ddt_sync_return_u => ddt_sync_return;
}

/// task:task_newtask: new processes forked by a tracked process are tracked too.
/// Runs in the parent's context. Threads (CLONE_THREAD) share their process's
/// tgid, which is already tracked, so they are not added. Record offsets differ
/// between kernels; user space reads them from the tracepoint's format file.
#[tracepoint]
pub fn track_fork(ctx: TracePointContext) -> u32 {
    const CLONE_THREAD: u64 = 0x0001_0000;
    if config_u32(&CONFIG.filter_tgid) == 0 {
        return 0;
    }
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !is_tracked(parent) {
        return 0;
    }
    let flags_offset = config_u32(&CONFIG.newtask_flags_offset) as usize;
    let pid_offset = config_u32(&CONFIG.newtask_pid_offset) as usize;
    let Ok(flags) = (unsafe { ctx.read_at::<u64>(flags_offset) }) else {
        return 0;
    };
    if flags & CLONE_THREAD != 0 {
        return 0;
    }
    if let Ok(child) = unsafe { ctx.read_at::<u32>(pid_offset) } {
        if TRACKED.insert(&child, &1, 0).is_err() {
            bump(counter::TRACKED_FULL);
        }
        if let Some(slot) = TRACKED_SLOTS.get_ptr_mut(child % zprof_common::TRACKED_SLOTS) {
            if unsafe { *slot } == 0 {
                unsafe { *slot = child };
            }
        }
    }
    let _ = ctx.as_ptr();
    0
}

/// Whether a kernel thread is one of ZFS's (taskqs and sync threads): on the
/// kernel target compression and checksums run there, not in the workload.
#[inline(always)]
fn is_zfs_kernel_thread(comm: &[u8; 16]) -> bool {
    let starts = |prefix: &[u8]| comm.len() >= prefix.len() && &comm[..prefix.len()] == prefix;
    starts(b"z_")
        || starts(b"txg_")
        || starts(b"zil_")
        || starts(b"spa_")
        || starts(b"dp_")
        || starts(b"arc_")
        || starts(b"dbu_")
        || starts(b"zthr")
        || starts(b"l2arc")
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
