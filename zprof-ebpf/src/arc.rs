//! Reads through the ARC: each arc_read by the path that served it (hit, in
//! flight, L2ARC, disk), hits on buffers the dbuf layer already held, the
//! block reads that went to disk (with their sizes), and each block's reuse
//! distance, for the cache what-if. Cache devices are marked as their reads
//! and feed writes show them, so the vdev rows can tell them apart.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    macros::map,
    maps::{Array, LruHashMap},
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{COUNT_ONLY_CLASS, Stage, arc_read_class, miss_reuse_class};

use crate::core::{
    config::is_kernel,
    memory::{arg, read_or, stack_arg},
    pools::mark_cache_vdev,
    programs::{entry_programs, return_programs},
    record::{atomic_add, record, stage_key},
    spans::{INFLIGHT, enter, span_key, take, thread_id},
    tracked::wanted,
};

entry_programs! {
    block_read_entry_k, block_read_entry_u => try_block_read_entry;
    arc_read_entry_k, arc_read_entry_u => try_arc_read_entry;
    arc_l2_read_entry_k, arc_l2_read_entry_u => try_arc_l2_read_entry;
    arc_read_end_entry_k, arc_read_end_entry_u => try_arc_read_end_entry;
    arc_held_hit_entry_k, arc_held_hit_entry_u => try_arc_held_hit_entry;
    l2_feed_write_entry_k, l2_feed_write_entry_u => try_l2_feed_write_entry;
}

return_programs! {
    arc_read_return_k, arc_read_return_u => try_arc_read_return;
}

/// ARC_FLAG_* bits of arc_read's `arc_flags` (the same in 2.1 to 2.3).
const ARC_FLAG_WAIT: u64 = 1 << 0;
const ARC_FLAG_PREFETCH: u64 = 1 << 2;
const ARC_FLAG_CACHED: u64 = 1 << 3;
/// An open arc_read span's class bit: the path below was seen (the first
/// read it issued decides; a waited read may run other reads on its thread).
const ARC_PATH_SEEN: u64 = 1 << 16;

/// Byte offset of blk_prop in a blkptr_t (after its three 16-byte DVAs):
/// on-disk format, not a compiler's layout.
const BLKPTR_PROP_OFFSET: u64 = 48;
/// blk_prop's embedded-data bit (BP_IS_EMBEDDED).
const BLKPTR_EMBEDDED: u64 = 1 << 39;

/// Bytes read from disk by zio_read so far, all CPUs: the clock of the
/// reuse distances.
#[map]
static MISS_CLOCK: Array<u64> = Array::with_max_entries(1, 0);

/// Per block read from disk (a hash of its first DVA), MISS_CLOCK after its
/// last read. LRU: the longest-unread blocks are forgotten first.
#[map]
static LAST_MISS: LruHashMap<u64, u64> =
    LruHashMap::with_max_entries(zprof_common::MISS_BLOCKS_TRACKED, 0);

/// Per thread, the path of the block read its current arc_read issued, when
/// arc_read is not timed (see `arc_read_took`). LRU: a zio_read outside
/// arc_read (a scrub's) leaves an entry that ages out.
#[map]
static ARC_READ_PATHS: LruHashMap<u64, u32> = LruHashMap::with_max_entries(4096, 0);

/// zio_read(zio_t *pio, spa_t *spa, const blkptr_t *bp, abd_t *data,
/// uint64_t lsize, ...): a block read from the disks, counted at entry.
/// Not per workload request (ARC hits never get here), so cheap next to the
/// disk read it starts; ZFS's own threads issue prefetches, so they count on
/// the kernel too. `bytes` is the logical size, `bytes_out` the physical size
/// from the block pointer (an on-disk format, the same in every release), and
/// the class carries log2 of the physical size. With the leaf reads, the
/// count gives the fan-out of a block over a raidz's data columns. Embedded
/// block pointers (data in the pointer) are not counted.
#[inline(always)]
fn try_block_read_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
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
        return Ok(());
    }
    let physical = if prop == 0 {
        logical
    } else {
        (((prop >> 16) & 0xffff) + 1) << 9
    };
    let size_class = if physical <= 1 {
        0
    } else {
        64 - (physical - 1).leading_zeros()
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
    crate::sync_phases::note_sync_read(arg(ctx, 0), physical);
    Ok(())
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
    atomic_add(clock, physical);
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

/// arc_read(zio_t *pio, spa_t *spa, const blkptr_t *bp, done, private,
/// priority, int zio_flags, arc_flags_t *arc_flags, const zbookmark_phys_t *zb):
/// the 8th argument is on the stack, 16 bytes above the return address at
/// entry (x86-64). Embedded block pointers are not ARC reads (their data is
/// in the pointer) and ZFS does not count them either.
#[inline(always)]
fn try_arc_read_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let bp = arg(ctx, 2);
    let prop = if bp == 0 {
        0
    } else {
        read_or::<u64>(bp + BLKPTR_PROP_OFFSET, 0)
    };
    if prop & BLKPTR_EMBEDDED != 0 {
        return Ok(());
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
    )
}

/// zio_read_phys(pio, vd, offset, size, data, checksum, done, private,
/// priority, flags, boolean_t labels) entry: a read of a vdev's labels, or,
/// without `labels`, of a cache device: under arc_read, the block is read from
/// it. The kernel's stack arguments are not read yet (not checked under
/// kprobes): there a label read on the thread of an arc_read that found its
/// block in flight would count as L2ARC, and cache devices are not marked.
#[inline(always)]
fn try_arc_l2_read_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    if is_kernel() {
        arc_read_took(arc_read_class::L2);
        return Ok(());
    }
    if stack_arg(ctx, 11) as u32 != 0 {
        return Ok(());
    }
    arc_read_took(arc_read_class::L2);
    mark_cache_vdev(arg(ctx, 1));
    Ok(())
}

/// zio_write_phys(same arguments as zio_read_phys) entry, libzpool: at
/// ZIO_PRIORITY_ASYNC_WRITE and not a label write, only the L2ARC feed
/// writes this way (2.1 to 2.3): its vdev is a cache device.
#[inline(always)]
fn try_l2_feed_write_entry(ctx: &ProbeContext) -> Result<(), u32> {
    const ZIO_PRIORITY_ASYNC_WRITE: u32 = 3;
    if wanted(false)
        && stack_arg(ctx, 11) as u32 == 0
        && stack_arg(ctx, 9) as u32 == ZIO_PRIORITY_ASYNC_WRITE
    {
        mark_cache_vdev(arg(ctx, 1));
    }
    Ok(())
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
#[inline(always)]
fn try_arc_read_end_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let tid = thread_id();
    if unsafe { INFLIGHT.get(&span_key(Stage::ArcRead, tid)) }.is_some() {
        return Ok(());
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
    Ok(())
}

/// arc_read's return: ARC_FLAG_CACHED is a hit; otherwise the read it issued
/// names the path, and no read at all means it found one in flight.
#[inline(always)]
fn try_arc_read_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    // Embedded block pointers open no span: `take`, not `leave`, so their
    // returns are not counted as unmatched (a full map is, at the entry).
    let Some((entry, duration)) = take(span_key(Stage::ArcRead, thread_id())) else {
        return Ok(());
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
    Ok(())
}

/// arc_buf_access(arc_buf_t *buf): a read of a block whose buffer the dbuf
/// layer holds. ZFS counts it as an ARC hit unless its header is anonymous
/// (dirty: a write's read of the indirect blocks it dirties) or empty; an
/// anonymous header has no identity, so both show as an empty DVA. The
/// buffer's first field is its header, and the header's first its DVA, in
/// every release (2.1 to 2.3).
#[inline(always)]
fn try_arc_held_hit_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let hdr = read_or::<u64>(arg(ctx, 0), 0);
    let dva = read_or::<[u64; 2]>(hdr, [0, 0]);
    if dva == [0, 0] {
        return Ok(());
    }
    let class = arc_read_class::HIT | arc_read_class::HELD | COUNT_ONLY_CLASS;
    record(&stage_key(Stage::ArcRead, class, 0, 0), 0, 0, 0);
    Ok(())
}
