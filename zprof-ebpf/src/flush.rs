//! Cache flushes of the leaf vdevs, per leaf, and their share of the ZIL
//! commit in progress. How a flush is timed depends on the release
//! (`flush_mode`): as a zio_flush call, inside which the leaf flushes run
//! (`FLUSH_TIMED_CALL`), or from zio_flush reaching a leaf to zio_interrupt
//! of that leaf's flush zio (`FLUSH_LEAF_ISSUE_TO_DONE`). User space attaches
//! the programs of one mode only.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::LruHashMap,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{FlushStart, Stage, counter};

use crate::core::{
    config::{CONFIG, config_u32, offsets_valid},
    counters::count_unmatched,
    memory::{arg, member_u64, read_or},
    pools::active_window,
    programs::{entry_programs, return_programs},
    record::{record, stage_key},
    spans::{INFLIGHT, enter, leave, thread_id, thread_key},
    tracked::wanted,
};

entry_programs! {
    flush_entry_k, flush_entry_u => try_flush_entry;
    flush_leaf_entry_k, flush_leaf_entry_u => try_flush_leaf_entry;
    flush_done_entry_k, flush_done_entry_u => try_flush_done_entry;
}

return_programs! {
    flush_return_k, flush_return_u => try_flush_return;
}

/// Leaf flushes in progress, by leaf vdev_t address (flush mode
/// `FLUSH_LEAF_ISSUE_TO_DONE`): LRU, because a flush that never completes
/// through zio_interrupt (a vdev with its write cache off) must not hold a slot.
#[map]
static FLUSH_STARTS: LruHashMap<u64, FlushStart> = LruHashMap::with_max_entries(4096, 0);

/// zio_flush(zio_t *pio, vdev_t *vd), timed as a call (`FLUSH_TIMED_CALL`): in
/// libzpool up to 2.2 the leaf flushes (fsync) run inside it. From 2.2.4 it
/// calls itself for each child vdev, so only the outermost call is timed and
/// nested ones deepen it (the entry's `bytes` holds the depth).
#[inline(always)]
fn try_flush_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    if let Some(outer) = INFLIGHT.get_ptr_mut(&thread_key(Stage::Flush)) {
        unsafe { (*outer).bytes += 1 };
        return Ok(());
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa);
    let guid = member_u64(arg(ctx, 1), &CONFIG.offsets.vdev_guid);
    enter(Stage::Flush, thread_id(), 0, 0, pool, guid)
}

#[inline(always)]
fn try_flush_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    if let Some(outer) = INFLIGHT.get_ptr_mut(&thread_key(Stage::Flush)) {
        let depth = unsafe { &mut (*outer).bytes };
        if *depth > 0 {
            *depth -= 1;
            return Ok(());
        }
    }
    if let Some((entry, duration)) = leave(Stage::Flush, thread_id()) {
        record(
            &stage_key(Stage::Flush, 0, entry.pool, entry.extra),
            duration,
            0,
            0,
        );
        if let Some(window) = active_window(entry.pool) {
            for slot in window.slots.iter_mut().filter(|slot| slot.tid != 0) {
                slot.flush_ns += duration;
            }
        }
    }
    Ok(())
}

/// zio_flush(zio_t *pio, vdev_t *vd) entry in `FLUSH_LEAF_ISSUE_TO_DONE` mode
/// (libzpool 2.3): at a leaf (no children) zio_flush makes the flush zio, which
/// a vdev_file taskq thread completes later; its start is kept by vdev.
#[inline(always)]
fn try_flush_leaf_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !offsets_valid() || !wanted(false) {
        return Ok(());
    }
    let vd = arg(ctx, 1);
    if vd == 0 || member_u64(vd, &CONFIG.offsets.vdev_children) != 0 {
        return Ok(());
    }
    let start = FlushStart {
        start_ns: unsafe { bpf_ktime_get_ns() },
        pool: member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa),
        guid: member_u64(vd, &CONFIG.offsets.vdev_guid),
    };
    FLUSH_STARTS
        .insert(&vd, &start, 0)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

/// zio_interrupt(zio_t *zio) entry in `FLUSH_LEAF_ISSUE_TO_DONE` mode: the end
/// of a leaf flush started in `try_flush_leaf_entry`, on whichever thread ran
/// it. Other zios (every leaf read and write also ends here) return after one
/// read.
#[inline(always)]
fn try_flush_done_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !offsets_valid() {
        return Ok(());
    }
    let zio = arg(ctx, 0);
    if zio == 0 {
        return Ok(());
    }
    let io_type: u32 = read_or(zio + config_u32(&CONFIG.offsets.zio_type) as u64, 0);
    if io_type != config_u32(&CONFIG.semantics.zio_type_flush) {
        return Ok(());
    }
    let vd = member_u64(zio, &CONFIG.offsets.zio_vd);
    let Some(start) = (unsafe { FLUSH_STARTS.get(&vd) }).copied() else {
        count_unmatched(Stage::Flush);
        return Ok(());
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
    let Some(window) = active_window(start.pool) else {
        return Ok(());
    };
    for slot in window.slots.iter_mut().filter(|slot| slot.tid != 0) {
        if slot.flush_first_ns == 0 || start.start_ns < slot.flush_first_ns {
            slot.flush_first_ns = start.start_ns;
        }
        if now > slot.flush_last_ns {
            slot.flush_last_ns = now;
        }
    }
    Ok(())
}
