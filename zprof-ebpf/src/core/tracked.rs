//! Which calls count: the traced processes (with `--pid` or a command) and,
//! on the kernel target, ZFS's own threads. Every probe asks `wanted` first;
//! the `filter` family keeps the set of traced processes up to date.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::map,
    maps::{Array, HashMap},
};
use zprof_common::counter;

use super::config::{CONFIG, config_u32, is_kernel};

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

/// Whether this call belongs to the traced workload. Pool-side stages on the
/// kernel target run in ZFS's own kernel threads, so they are never filtered.
#[inline(always)]
pub fn wanted(workload_side: bool) -> bool {
    if config_u32(&CONFIG.filter_tgid) == 0 || (is_kernel() && !workload_side) {
        return true;
    }
    is_tracked((bpf_get_current_pid_tgid() >> 32) as u32)
}

/// Whether process `tgid` is traced.
#[inline(always)]
pub fn is_tracked(tgid: u32) -> bool {
    TRACKED_SLOTS
        .get(tgid % zprof_common::TRACKED_SLOTS)
        .is_some_and(|slot| *slot == tgid)
        || unsafe { TRACKED.get(&tgid).is_some() }
}

/// Adds process `tgid` to the traced ones; a full `TRACKED` is the error.
/// The fast-path slot is taken only if free: the first holder keeps it.
#[inline(always)]
pub fn track(tgid: u32) -> Result<(), u32> {
    let added = TRACKED
        .insert(&tgid, &1, 0)
        .map_err(|_| counter::TRACKED_FULL);
    if let Some(slot) = TRACKED_SLOTS.get_ptr_mut(tgid % zprof_common::TRACKED_SLOTS)
        && unsafe { *slot } == 0
    {
        unsafe { *slot = tgid };
    }
    added
}

/// Whether a kernel thread is one of ZFS's (taskqs and sync threads): on the
/// kernel target compression and checksums run there, not in the workload.
#[inline(always)]
pub fn is_zfs_kernel_thread(comm: &[u8; 16]) -> bool {
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

/// Whether the current thread's samples and blocked time count: the traced
/// processes', and on the kernel target ZFS's own threads' (`comm` is the
/// current thread's name).
#[inline(always)]
pub fn samples_wanted(tgid: u32, comm: &[u8; 16]) -> bool {
    config_u32(&CONFIG.filter_tgid) == 0
        || is_tracked(tgid)
        || (is_kernel() && is_zfs_kernel_thread(comm))
}
