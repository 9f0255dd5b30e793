//! What ZFS's threads are doing, for the families that need to tell the
//! workload's calls from ZFS's own: which threads are inside spa_sync or
//! zil_commit, and what each writing thread wrote since its last commit.

use aya_ebpf::{macros::map, maps::Array};
use zprof_common::{WRITER_SLOTS, WriterSlot, counter};

use super::{counters::bump, spans::thread_id};

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

/// Writing threads: what each wrote since its last zil_commit, at slot
/// `tid % WRITER_SLOTS` (an array for the same reason as `INTERNAL`).
#[map]
static WRITERS: Array<WriterSlot> = Array::with_max_entries(WRITER_SLOTS, 0);

/// Whether this thread is inside ZFS's own machinery rather than the workload:
/// spa_sync writes metadata (space maps) with dmu_write, and zil_commit's
/// get_data callback reads the data it logs with dmu_read.
#[inline(always)]
pub fn in_zfs_internal() -> bool {
    let tid = thread_id() as u32;
    INTERNAL
        .get(tid % INTERNAL_SLOTS)
        .is_some_and(|slot| *slot == tid)
}

/// Marks this thread as inside spa_sync or zil_commit (see `INTERNAL`).
#[inline(always)]
pub fn internal_begin() {
    let tid = thread_id() as u32;
    if let Some(slot) = INTERNAL.get_ptr_mut(tid % INTERNAL_SLOTS) {
        unsafe { *slot = tid };
    }
}

/// Ends `internal_begin`'s mark, unless another thread has taken the slot.
#[inline(always)]
pub fn internal_end() {
    let tid = thread_id() as u32;
    if let Some(slot) = INTERNAL.get_ptr_mut(tid % INTERNAL_SLOTS)
        && unsafe { *slot } == tid
    {
        unsafe { *slot = 0 };
    }
}

/// This thread's writer slot, taken over (and counted) if another thread held it.
#[inline(always)]
pub fn writer_slot() -> Option<&'static mut WriterSlot> {
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
