//! Where a txg's sync spends its time: the functions spa_sync calls on its
//! own thread (writing out the dirty data, the later passes, frees, dedup,
//! block cloning, scan, device removal, metaslabs, the labels, the cleanup
//! after the uberblock; see `zprof_common::sync_phase`), each timed from
//! entry to return into the sync thread's [`SyncPhases`], which spa_sync's
//! return sends with the txg; each phase's time is also a histogram row
//! (Stage::SyncPhase, by pool and phase), which serve exports. All are global functions, present in every
//! kernel's kallsyms and exported by libzpool from 2.1 on (brt_sync from
//! 2.2); they run a few times per txg, so the cost is nothing next to the
//! sync. The reads the sync thread issued itself (zio_read on it) are
//! counted with their bytes, and its waits for them in zio_wait timed
//! (zio_wait runs once per read call of every thread: on uprobes only with
//! --full-timing).

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{OFFSET_UNKNOWN, Stage, SyncPhases, counter, sync_phase, zio_type};

use crate::core::{
    config::{CONFIG, config_u32, offsets_valid},
    memory::{arg, read_or},
    programs::{entry_programs, return_programs},
    record::{record, stage_key},
    spans::thread_id,
};

entry_programs! {
    sync_pool_entry_k, sync_pool_entry_u => try_pool_sync_entry;
    sync_frees_entry_k, sync_frees_entry_u => try_frees_entry;
    sync_clones_entry_k, sync_clones_entry_u => try_clones_entry;
    sync_scan_entry_k, sync_scan_entry_u => try_scan_entry;
    sync_removal_entry_k, sync_removal_entry_u => try_removal_entry;
    sync_metaslabs_entry_k, sync_metaslabs_entry_u => try_metaslabs_entry;
    sync_labels_entry_k, sync_labels_entry_u => try_labels_entry;
    sync_done_entry_k, sync_done_entry_u => try_done_entry;
    sync_read_wait_entry_k, sync_read_wait_entry_u => try_read_wait_entry;
}

return_programs! {
    sync_phase_return_k, sync_phase_return_u => try_phase_return;
    sync_read_wait_return_k, sync_read_wait_return_u => try_read_wait_return;
}

/// The phases of each sync in progress, by its thread.
#[map]
static SYNCING: HashMap<u64, SyncPhases> = HashMap::with_max_entries(256, 0);

/// spa_sync's entry: the thread's sync of `pool` (spa_t) begins, no phase open.
#[inline(always)]
pub fn sync_begins(pool: u64) -> Result<(), u32> {
    SYNCING
        .insert(&thread_id(), &SyncPhases::idle(pool), 0)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

/// spa_sync's return: the thread's phases, and the sync is over. A phase
/// still open (its return skipped) is left out.
#[inline(always)]
pub fn sync_ends() -> SyncPhases {
    let thread = thread_id();
    let phases = unsafe { SYNCING.get(&thread) }
        .copied()
        .unwrap_or_else(|| SyncPhases::idle(0));
    let _ = SYNCING.remove(&thread);
    phases
}

/// A block read issued on a sync thread (zio_read's program), under the
/// parent zio `parent` (0: none).
#[inline(always)]
pub fn note_sync_read(parent: u64, physical_bytes: u64) {
    if let Some(phases) = SYNCING.get_ptr_mut(&thread_id()) {
        let phases = unsafe { &mut *phases };
        phases.reads += 1;
        phases.read_bytes += physical_bytes;
        phases.reads_unwaited += 1;
        if parent != 0 {
            phases.read_parent = parent;
        }
    }
}

/// zio_wait(zio_t *zio) on a sync thread with reads of its own not waited
/// for yet: a wait for them when `zio` is their parent (dbuf_read's and
/// dmu_read's root zio) or a read itself (arc_read's waited read). Other
/// waits (the write-out's root zio) are not timed here.
#[inline(always)]
fn try_read_wait_entry(ctx: &ProbeContext) -> Result<(), u32> {
    let Some(phases) = SYNCING.get_ptr_mut(&thread_id()) else {
        return Ok(());
    };
    let phases = unsafe { &mut *phases };
    if phases.reads_unwaited == 0 {
        return Ok(());
    }
    let zio = arg(ctx, 0);
    if zio == phases.read_parent || io_type(zio) == Some(zio_type::READ) {
        phases.read_wait_start_ns = unsafe { bpf_ktime_get_ns() };
    }
    Ok(())
}

#[inline(always)]
fn try_read_wait_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    let Some(phases) = SYNCING.get_ptr_mut(&thread_id()) else {
        return Ok(());
    };
    let phases = unsafe { &mut *phases };
    if phases.read_wait_start_ns == 0 {
        return Ok(());
    }
    let now = unsafe { bpf_ktime_get_ns() };
    phases.read_wait_ns += now.saturating_sub(phases.read_wait_start_ns);
    phases.read_waits += 1;
    phases.read_wait_start_ns = 0;
    phases.reads_unwaited = 0;
    phases.read_parent = 0;
    Ok(())
}

/// zio_t.io_type of `zio`, where the offsets are known.
#[inline(always)]
fn io_type(zio: u64) -> Option<u32> {
    let offset = config_u32(&CONFIG.offsets.zio_type);
    if !offsets_valid() || offset == OFFSET_UNKNOWN {
        return None;
    }
    Some(read_or::<u32>(zio + offset as u64, u32::MAX))
}

/// A phase function's entry on a sync thread: it opens `phase` unless one
/// is open (then it is inside that one, and counts there).
#[inline(always)]
fn begin(phase: usize) -> Result<(), u32> {
    let Some(phases) = SYNCING.get_ptr_mut(&thread_id()) else {
        return Ok(());
    };
    let phases = unsafe { &mut *phases };
    if phases.open != sync_phase::NONE {
        phases.nested += 1;
        return Ok(());
    }
    phases.open = phase as u32;
    phases.open_start_ns = unsafe { bpf_ktime_get_ns() };
    Ok(())
}

/// dsl_pool_sync: the first pass writes the dirty data out, later passes
/// what that dirtied.
#[inline(always)]
fn try_pool_sync_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    let Some(phases) = SYNCING.get_ptr_mut(&thread_id()) else {
        return Ok(());
    };
    let passes = unsafe {
        (*phases).passes += 1;
        (*phases).passes
    };
    begin(if passes == 1 {
        sync_phase::WRITE_OUT
    } else {
        sync_phase::LATER_PASSES
    })
}

#[inline(always)]
fn try_frees_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::FREES)
}

#[inline(always)]
fn try_clones_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::CLONES)
}

#[inline(always)]
fn try_scan_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::SCAN)
}

#[inline(always)]
fn try_removal_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::REMOVAL)
}

#[inline(always)]
fn try_metaslabs_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::METASLABS)
}

#[inline(always)]
fn try_labels_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::LABELS)
}

#[inline(always)]
fn try_done_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    begin(sync_phase::DONE)
}

/// ddt_sync's entry and return (the dedup stage's programs call these).
#[inline(always)]
pub fn dedup_begins() {
    let _ = begin(sync_phase::DEDUP);
}

#[inline(always)]
pub fn dedup_ends() {
    end()
}

/// Any phase function's return: closes the open phase unless a phase
/// function inside it returns.
#[inline(always)]
fn try_phase_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    end();
    Ok(())
}

#[inline(always)]
fn end() {
    let Some(phases) = SYNCING.get_ptr_mut(&thread_id()) else {
        return;
    };
    let phases = unsafe { &mut *phases };
    if phases.nested > 0 {
        phases.nested -= 1;
        return;
    }
    let open = phases.open as usize;
    if open < sync_phase::COUNT {
        let now = unsafe { bpf_ktime_get_ns() };
        let duration = now.saturating_sub(phases.open_start_ns);
        phases.ns[open] += duration;
        record(
            &stage_key(Stage::SyncPhase, open as u32, phases.pool, 0),
            duration,
            0,
            0,
        );
    }
    phases.open = sync_phase::NONE;
}
