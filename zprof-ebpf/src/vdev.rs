//! Leaf vdev I/O: queue and disk time per leaf, as `zpool iostat -l/-w`
//! measures them, from the timing fields ZFS itself sets on each zio; and a
//! fallback that times the queue and the disk with probe pairs when the
//! zio_t's offsets are not known.
//!
//! Leaf I/Os also feed the ZIL's commit window (a log block write a commit
//! waits for) and the leaves' places in their pool (`LEAF_PLACES`).

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel_str_bytes, bpf_probe_read_user_str_bytes},
    macros::map,
    maps::{LruHashMap, PerCpuArray},
    programs::ProbeContext,
};
use zprof_common::{
    ALLOC_BIAS_SPECIAL, InFlight, LEAF_PLACES_TRACKED, LOG_WENT_TO_LOG_VDEV, LOG_WENT_TO_SPECIAL,
    LeafPlace, Stage, VDEV_CACHE_DEVICE, ZIO_WINDOW, counter, zio_type,
};

use crate::core::{
    config::{CONFIG, config_u32, is_kernel, offsets_valid},
    counters::bump,
    memory::{arg, member_u32, member_u64},
    pools::{active_window, is_cache_vdev, pool_row_key},
    programs::entry_programs,
    record::{record, stage_key},
    spans::{INFLIGHT, leave, span_key, take},
    tracked::wanted,
};

entry_programs! {
    vdev_stat_entry_k, vdev_stat_entry_u => try_vdev_stat_entry;
    vdev_done_entry_k, vdev_done_entry_u => try_vdev_done_entry;
    vdev_queue_entry_k, vdev_queue_entry_u => try_vdev_queue_entry;
    vdev_queue_done_entry_k, vdev_queue_done_entry_u => try_vdev_queue_done_entry;
    vdev_bypass_entry_k, vdev_bypass_entry_u => try_vdev_bypass_entry;
    vdev_disk_start_entry_k, vdev_disk_start_entry_u => try_vdev_disk_start_entry;
}

/// This CPU's copy of the zio_t a leaf-I/O probe is looking at (see
/// `read_leaf_zio`): too large for the 512-byte stack.
#[map]
static ZIO_COPY: PerCpuArray<[u8; ZIO_WINDOW as usize]> = PerCpuArray::with_max_entries(1, 0);

/// Where each leaf sits in its pool, by leaf guid: what `serve` labels its
/// rows with (top-level vdev, allocation class).
#[map]
static LEAF_PLACES: LruHashMap<u64, LeafPlace> =
    LruHashMap::with_max_entries(LEAF_PLACES_TRACKED, 0);

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
#[inline(always)]
fn try_vdev_stat_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !offsets_valid() || !wanted(false) {
        return Ok(());
    }
    let Some(zio) = read_leaf_zio(arg(ctx, 0)) else {
        return Ok(());
    };
    record_leaf_io(&zio, zio.delta);
    Ok(())
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
#[inline(always)]
fn try_vdev_done_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !offsets_valid() || !wanted(false) {
        return Ok(());
    }
    let Some(zio) = read_leaf_zio(arg(ctx, 0)) else {
        return Ok(());
    };
    if zio.timestamp == 0 {
        return Ok(());
    }
    let now = unsafe { bpf_ktime_get_ns() };
    record_leaf_io(&zio, now.saturating_sub(zio.timestamp));
    Ok(())
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
    if is_cache_vdev(zio.vd) {
        class |= VDEV_CACHE_DEVICE;
    }
    let queue = delta.saturating_sub(delay);
    // Read once: the leaf's place and the commit's log test both need it.
    let top = leaf_top(zio.vd);
    learn_leaf_place(top, guid, zio.spa);
    // ZIO_TYPE_WRITE at ZIO_PRIORITY_SYNC_WRITE: a log block write (or another
    // sync write) that a commit in progress may be waiting for; not a txg
    // sync's label or uberblock write, which goes to every leaf (a special
    // vdev's too) and which no commit waits for.
    let config_writer = 1u32 << (config_u32(&CONFIG.semantics.zio_flag_config_writer_bit) & 31);
    if zio.io_type == zio_type::WRITE && zio.priority == 1 && zio.flags & config_writer == 0 {
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
/// commits in progress, if any.
#[inline(always)]
fn charge_commit_write(pool: u64, top: u64, total_ns: u64) {
    let Some(window) = active_window(pool) else {
        return;
    };
    let place = if member_u32(top, &CONFIG.offsets.vdev_islog) != 0 {
        LOG_WENT_TO_LOG_VDEV
    } else if member_u32(top, &CONFIG.offsets.vdev_alloc_bias) == ALLOC_BIAS_SPECIAL {
        LOG_WENT_TO_SPECIAL
    } else {
        0
    };
    for slot in window.slots.iter_mut().filter(|slot| slot.tid != 0) {
        slot.writes += 1;
        if total_ns > slot.max_write_ns {
            slot.max_write_ns = total_ns;
        }
        slot.log_places |= place;
    }
}

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
        pool: pool_row_key(pool),
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

// --- The fallback without offsets: probe pairs keyed by the zio. -------------

/// vdev_queue_io(zio_t *zio): fallback timing without offsets, keyed by the zio.
/// A zio the queue held passes here a second time when it is issued: the first
/// start stands, so the second insert's EEXIST is expected, not a nesting.
#[inline(always)]
fn try_vdev_queue_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
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
        Ok(()) | Err(-17) => Ok(()),
        Err(_) => Err(counter::ENTRY_MAP_FULL),
    }
}

/// zio_vdev_io_bypass(zio_t *zio): a child merged into an aggregate never
/// reaches vdev_queue_io_done (the aggregate does), so its spans end here
/// unrecorded, as ZFS leaves aggregated children out of its own histograms.
#[inline(always)]
fn try_vdev_bypass_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let zio = arg(ctx, 0);
    let _ = take(span_key(Stage::VdevQueueTimed, zio));
    let _ = take(span_key(Stage::VdevDiskTimed, zio));
    Ok(())
}

/// vdev_disk_io_start / vdev_file_io_start(zio_t *zio), kernel statics: where a
/// queued leaf I/O goes to the device, splitting the fallback span into queue
/// wait and disk time.
#[inline(always)]
fn try_vdev_disk_start_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let zio = arg(ctx, 0);
    let Some(queued) = (unsafe { INFLIGHT.get(&span_key(Stage::VdevQueueTimed, zio)) }) else {
        return Ok(()); // not through the queue (flushes, probes): no split to make
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
    INFLIGHT
        .insert(&key, &value, 0)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

/// vdev_queue_io_done(zio_t *zio): entry of the completion ends the fallback span.
#[inline(always)]
fn try_vdev_queue_done_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
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
    Ok(())
}
