//! Each txg's life as ZFS's txgs kstat keeps it (/proc/spl/kstat/zfs/POOL/txgs):
//! when it was born, quiesced and synced, and its dirty bytes, for every txg
//! of the recording rather than the kstat's last `zfs_txg_history`, and
//! whether or not that kstat is on.
//!
//! ZFS stamps a txg's states through spa_txg_history_add (birth) and
//! spa_txg_history_set (open, quiesced: called from txg.c, so never inlined
//! there; the sync's two stamps are set inside spa_stats.c, where a kernel
//! build inlines the call). So the open and quiescing times are ZFS's own
//! stamps, taken from the arguments, and the sync's are taken where ZFS takes
//! its own: spa_sync's entry (just after the wait-for-sync stamp) and the
//! return of spa_txg_history_fini_io (just after the synced stamp). The dirty
//! bytes are the txg_stat_t that fini_io is given (NULL when the kstat is
//! off). One event per txg goes to user space when its sync is done.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{HashMap, LruHashMap},
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{DIRTY_UNKNOWN, OFFSET_UNKNOWN, Stage, TxgHistoryEvent, counter, zio_type};

use crate::core::{
    config::{CONFIG, config_u32, offsets_valid},
    memory::{arg, read_or},
    pools::pool_row_key,
    programs::{entry_programs, return_programs},
    record::{EVENTS, record, stage_key},
    spans::thread_id,
    tracked::wanted,
};

entry_programs! {
    txg_born_entry_k, txg_born_entry_u => try_txg_born_entry;
    txg_state_entry_k, txg_state_entry_u => try_txg_state_entry;
    txg_synced_entry_k, txg_synced_entry_u => try_txg_synced_entry;
}

return_programs! {
    txg_synced_return_k, txg_synced_return_u => try_txg_synced_return;
    txg_io_return_k, txg_io_return_u => try_txg_io_return;
}

/// txg_state_t values ZFS passes to spa_txg_history_set.
const TXG_STATE_OPEN: u64 = 1;
const TXG_STATE_QUIESCED: u64 = 2;

/// A txg's stamps so far, by (spa_t, txg): a pool has at most a few txgs in
/// flight, so an LRU of this size loses none but those of pools gone
/// mid-life.
#[map]
static TXG_STAMPS: LruHashMap<[u64; 2], TxgHistoryEvent> = LruHashMap::with_max_entries(1024, 0);

/// Per sync thread, the txg whose spa_sync returned last (spa_t, txg, start
/// on the programs' clock): its history is closed next, on the same thread.
#[map]
static LAST_SYNC: HashMap<u64, [u64; 3]> = HashMap::with_max_entries(256, 0);

/// Per sync thread, the event being closed between fini_io's entry and return.
#[map]
static CLOSING: HashMap<u64, TxgHistoryEvent> = HashMap::with_max_entries(256, 0);

/// Called by spa_sync's return program: the sync thread's txg, for
/// fini_io to find.
#[inline(always)]
pub fn note_sync(spa: u64, txg: u64, start_ns: u64) {
    if LAST_SYNC
        .insert(&thread_id(), &[spa, txg, start_ns], 0)
        .is_err()
    {
        crate::core::counters::bump(counter::ENTRY_MAP_FULL);
    }
}

/// The stamps of (spa, txg), created empty at first sight.
#[inline(always)]
fn stamps(spa: u64, txg: u64) -> Option<*mut TxgHistoryEvent> {
    let key = [spa, txg];
    if let Some(found) = TXG_STAMPS.get_ptr_mut(&key) {
        return Some(found);
    }
    let fresh = TxgHistoryEvent {
        pool: pool_row_key(spa),
        txg,
        dirty_bytes: DIRTY_UNKNOWN,
        ..Default::default()
    };
    TXG_STAMPS.insert(&key, &fresh, 0).ok()?;
    TXG_STAMPS.get_ptr_mut(&key)
}

/// spa_txg_history_add(spa_t *spa, uint64_t txg, hrtime_t birth_time).
#[inline(always)]
fn try_txg_born_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let row = stamps(arg(ctx, 0), arg(ctx, 1)).ok_or(counter::ENTRY_MAP_FULL)?;
    unsafe { (*row).birth = arg(ctx, 2) };
    Ok(())
}

/// spa_txg_history_set(spa_t *spa, uint64_t txg, txg_state_t
/// completed_state, hrtime_t completed_time): the open and quiesced stamps.
#[inline(always)]
fn try_txg_state_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let state = arg(ctx, 2);
    if state != TXG_STATE_OPEN && state != TXG_STATE_QUIESCED {
        return Ok(());
    }
    let row = stamps(arg(ctx, 0), arg(ctx, 1)).ok_or(counter::ENTRY_MAP_FULL)?;
    unsafe {
        if state == TXG_STATE_OPEN {
            (*row).opened_until = arg(ctx, 3);
        } else {
            (*row).quiesced = arg(ctx, 3);
            (*row).quiesced_seen_ns = bpf_ktime_get_ns();
        }
    }
    Ok(())
}

/// spa_txg_history_fini_io(spa_t *spa, txg_stat_t *ts), on the sync thread
/// right after spa_sync: the txg is the one that thread synced last.
#[inline(always)]
fn try_txg_synced_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let thread = thread_id();
    let Some(&[spa, txg, start_ns]) = (unsafe { LAST_SYNC.get(&thread) }) else {
        return Ok(());
    };
    let mut event = match unsafe { TXG_STAMPS.get(&[spa, txg]) } {
        Some(found) => *found,
        None => TxgHistoryEvent {
            pool: pool_row_key(spa),
            txg,
            ..Default::default()
        },
    };
    event.sync_start_ns = start_ns;
    event.dirty_bytes = dirty_bytes(arg(ctx, 1));
    if event.dirty_bytes != DIRTY_UNKNOWN {
        record(
            &stage_key(Stage::TxgDirty, 0, spa, 0),
            event.dirty_bytes,
            0,
            0,
        );
    }
    // The stats when the sync began, until those at its end are read.
    event.io = [DIRTY_UNKNOWN; 4];
    event.txg_stat = 0;
    if let Some(at_start) = root_stats(arg(ctx, 1), &CONFIG.offsets.txg_stat_vs1) {
        event.io = at_start;
        event.txg_stat = arg(ctx, 1);
    }
    let _ = TXG_STAMPS.remove(&[spa, txg]);
    let _ = LAST_SYNC.remove(&thread);
    CLOSING
        .insert(&thread, &event, 0)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

/// txg_stat_t.ndirty of `ts`, where the offset and the kstat are there.
#[inline(always)]
fn dirty_bytes(ts: u64) -> u64 {
    let offset = config_u32(&CONFIG.offsets.txg_stat_ndirty);
    // Without offsets the member's slot holds 0, not OFFSET_UNKNOWN: the
    // txg_stat_t's first bytes would pass for its dirty bytes.
    if ts == 0 || !offsets_valid() || offset == OFFSET_UNKNOWN {
        return DIRTY_UNKNOWN;
    }
    read_or::<u64>(ts + offset as u64, DIRTY_UNKNOWN)
}

/// The root vdev stats a txg_stat_t holds at `which` (its vs1 or vs2):
/// bytes read and written, reads and writes (vs_bytes and vs_ops by zio
/// type: READ 1, WRITE 2 in every release). None without the offsets.
#[inline(always)]
fn root_stats(ts: u64, which: &u32) -> Option<[u64; 4]> {
    let offsets = &CONFIG.offsets;
    let fields = [
        config_u32(which),
        config_u32(&offsets.vdev_stat_bytes),
        config_u32(&offsets.vdev_stat_ops),
    ];
    if ts == 0 || !offsets_valid() || fields.contains(&OFFSET_UNKNOWN) {
        return None;
    }
    let stats = ts + fields[0] as u64;
    let at =
        |array: u32, io_type: u32| read_or::<u64>(stats + array as u64 + 8 * io_type as u64, 0);
    Some([
        at(fields[1], zio_type::READ),
        at(fields[1], zio_type::WRITE),
        at(fields[2], zio_type::READ),
        at(fields[2], zio_type::WRITE),
    ])
}

/// vdev_get_stats returns: inside fini_io on this thread, it has just
/// filled the txg_stat_t's vs2, which ZFS subtracts vs1 from for the kstat.
#[inline(always)]
fn try_txg_io_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    let Some(closing) = CLOSING.get_ptr_mut(&thread_id()) else {
        return Ok(());
    };
    let closing = unsafe { &mut *closing };
    if closing.txg_stat == 0 {
        return Ok(());
    }
    if let Some(at_end) = root_stats(closing.txg_stat, &CONFIG.offsets.txg_stat_vs2) {
        for i in 0..4 {
            closing.io[i] = at_end[i].wrapping_sub(closing.io[i]);
        }
    }
    closing.txg_stat = 0;
    Ok(())
}

#[inline(always)]
fn try_txg_synced_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    let thread = thread_id();
    let Some(closing) = (unsafe { CLOSING.get(&thread) }) else {
        return Ok(());
    };
    let mut event = *closing;
    let _ = CLOSING.remove(&thread);
    // No end stats read (the kstat is off, or vdev_get_stats not probed):
    // the start stats are no figures of the txg.
    if event.txg_stat != 0 {
        event.io = [DIRTY_UNKNOWN; 4];
        event.txg_stat = 0;
    }
    event.synced_ns = unsafe { bpf_ktime_get_ns() };
    EVENTS
        .output::<TxgHistoryEvent>(&event, 0)
        .map_err(|_| counter::RINGBUF_FULL)
}
