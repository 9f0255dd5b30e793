//! What is known about each pool and vdev, shared by the families that learn
//! it and those that use it: pool names, the ZIL commit in progress (which
//! the vdev and flush probes charge their time to), the sync generation the
//! workload's objset cache trusts, and which vdevs are cache devices.

use aya_ebpf::{
    helpers::{bpf_probe_read_kernel_str_bytes, bpf_probe_read_user_str_bytes},
    macros::map,
    maps::{Array, HashMap, LruHashMap},
};
use zprof_common::{COMMIT_SLOTS, CommitSlot, CommitWindow, PoolName, counter};

use super::{config::is_kernel, counters::bump};

/// Pool names by spa_t address, filled when spa_sync runs.
#[map]
pub static POOL_NAMES: LruHashMap<u64, PoolName> = LruHashMap::with_max_entries(1024, 0);

/// Pools removed (spa_remove) per spa_t address, for [`pool_row_key`].
#[map]
pub static POOL_REMOVALS: HashMap<u64, u64> = HashMap::with_max_entries(1024, 0);

/// The key a pool's rows are kept under (see `zprof_common::pool_key`): one
/// lookup in a map that holds only the addresses a pool was removed from.
#[inline(always)]
pub fn pool_row_key(spa: u64) -> u64 {
    let removed = unsafe { POOL_REMOVALS.get(&spa) }.copied().unwrap_or(0);
    zprof_common::pool_key(spa, removed)
}

/// Counts a pool removed at `spa`: the next pool there gets rows of its own.
#[inline(always)]
pub fn count_pool_removal(spa: u64) -> Result<(), u32> {
    let removed = unsafe { POOL_REMOVALS.get(&spa) }.copied().unwrap_or(0);
    POOL_REMOVALS
        .insert(&spa, &(removed + 1), 0)
        .map_err(|_| counter::NAME_MAP_FULL)
}

/// The ZIL commit in progress per pool (spa_t address).
#[map]
pub static COMMITS: HashMap<u64, CommitWindow> = HashMap::with_max_entries(256, 0);

/// Bumped by every spa_sync: an entry of the workload's objset cache is only
/// trusted within the generation it was read in. A pool is synced when it is
/// created and when it is exported, so an objset freed with one pool and
/// reallocated at the same address in the next cannot carry the old pool's
/// spa_t over.
#[map]
static SYNC_GENERATION: Array<u64> = Array::with_max_entries(1, 0);

/// Cache devices (vdev_t pointers) seen by `mark_cache_vdev`.
#[map]
static CACHE_VDEVS: HashMap<u64, u8> = HashMap::with_max_entries(256, 0);

/// Reads spa_name (the first member of spa_t) once per pool.
#[inline(always)]
pub fn learn_pool_name(spa: u64) {
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

/// The commit window of `pool` while a zil_commit is in progress on it.
#[inline(always)]
pub fn active_window(pool: u64) -> Option<&'static mut CommitWindow> {
    let window = unsafe { &mut *COMMITS.get_ptr_mut(&pool)? };
    if window.active == 0 {
        return None;
    }
    Some(window)
}

/// Gives the calling thread's commit a slot in `pool`'s window; returns its
/// index (None, counted, when every slot is taken: that commit's parts go
/// untimed).
#[inline(always)]
pub fn open_commit_slot(pool: u64, tid: u64) -> Option<usize> {
    if COMMITS.get_ptr_mut(&pool).is_none() {
        let _ = COMMITS.insert(&pool, &CommitWindow::default(), 0);
    }
    let Some(window) = COMMITS.get_ptr_mut(&pool) else {
        bump(counter::COMMIT_SLOTS_FULL);
        return None;
    };
    let window = unsafe { &mut *window };
    // The thread's own slot first: one whose commit's return was lost
    // (already counted in `active`).
    let mut own = None;
    let mut free = None;
    for index in 0..COMMIT_SLOTS {
        let owner = window.slots[index].tid;
        if owner == tid {
            own = Some(index);
            break;
        }
        if owner == 0 && free.is_none() {
            free = Some(index);
        }
    }
    let index = match (own, free) {
        (Some(index), _) => index,
        (None, Some(index)) => {
            window.active += 1;
            index
        }
        (None, None) => {
            bump(counter::COMMIT_SLOTS_FULL);
            return None;
        }
    };
    window.slots[index] = CommitSlot {
        tid,
        ..CommitSlot::default()
    };
    Some(index)
}

/// `pool`'s window as a commit starts, before it takes a slot: the commits
/// in progress and when the last one ended (None before the pool's first).
#[inline(always)]
pub fn commit_window_state(pool: u64) -> Option<(u64, u64)> {
    let window = unsafe { COMMITS.get(&pool)? };
    Some((window.active, window.last_end_ns))
}

/// Slot `index` of `pool`'s window, if the calling thread's commit still
/// holds it. One slot by its index, not a search: the return program records
/// five histograms from it, and a path per slot took the verifier past its
/// million instructions on Linux 6.12 (so did reading them from a copy on
/// the stack instead of the map).
#[inline(always)]
pub fn held_commit_slot(
    pool: u64,
    tid: u64,
    index: usize,
) -> Option<(&'static mut CommitWindow, usize)> {
    let window = unsafe { &mut *COMMITS.get_ptr_mut(&pool)? };
    let index = index & (COMMIT_SLOTS - 1);
    if window.slots[index].tid != tid {
        return None;
    }
    Some((window, index))
}

/// The current sync generation (see `SYNC_GENERATION`).
#[inline(always)]
pub fn sync_generation() -> u64 {
    SYNC_GENERATION.get(0).copied().unwrap_or(0)
}

/// Starts a new sync generation (spa_sync's entry).
#[inline(always)]
pub fn next_sync_generation() {
    if let Some(generation) = SYNC_GENERATION.get_ptr_mut(0) {
        unsafe { *generation += 1 };
    }
}

/// Remembers a cache device, so that its leaf I/Os get rows of their own.
#[inline(always)]
pub fn mark_cache_vdev(vd: u64) {
    if vd != 0 && unsafe { CACHE_VDEVS.get(&vd) }.is_none() {
        let _ = CACHE_VDEVS.insert(&vd, &1, 0);
    }
}

/// Whether `vd` was marked a cache device.
#[inline(always)]
pub fn is_cache_vdev(vd: u64) -> bool {
    unsafe { CACHE_VDEVS.get(&vd) }.is_some()
}
