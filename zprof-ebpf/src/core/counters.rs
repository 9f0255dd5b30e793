//! Loss and mismatch counters: nothing that goes wrong is lost silently.
//! User space reports them with the flag that fixes each (map sizes).

use aya_ebpf::{macros::map, maps::PerCpuArray};
use zprof_common::{STAGE_SLOTS, Stage, counter};

/// Loss and mismatch counters, indexed by `zprof_common::counter`.
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Returns without an entry, per stage number: says which probe pair mismatched.
#[map]
static UNMATCHED: PerCpuArray<u64> = PerCpuArray::with_max_entries(STAGE_SLOTS, 0);

/// Adds one to counter `index` (a `zprof_common::counter`).
#[inline(always)]
pub fn bump(index: u32) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        unsafe { *slot += 1 };
    }
}

/// An end of a span whose start was not seen (attached mid-call, or the start
/// was lost): counted in total and per stage.
#[inline(always)]
pub fn count_unmatched(stage: Stage) {
    bump(counter::RETURN_WITHOUT_ENTRY);
    if let Some(slot) = UNMATCHED.get_ptr_mut(stage as u32) {
        unsafe { *slot += 1 };
    }
}
