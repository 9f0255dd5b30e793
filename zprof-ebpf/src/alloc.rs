//! Allocations meant for the special and dedup classes, and those that
//! found the class full: metaslab_alloc(spa, mc, psize, bp, ndvas, ...) is asked for a
//! class (mc); when the special or dedup class has no room it returns ENOSPC
//! and ZFS allocates the block in the normal class instead (metadata and
//! small blocks land on the data disks). The class is told by comparing mc
//! with the pool's spa_special_class and spa_dedup_class (offsets); an
//! allocation in another class costs the entry program two reads and
//! nothing else. One allocation per block written: on uprobes only with
//! --full-timing.

use aya_ebpf::{
    macros::map,
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{COUNT_ONLY_CLASS, OFFSET_UNKNOWN, Stage, alloc_class, counter};

use crate::core::{
    config::{CONFIG, config_u32, offsets_valid},
    memory::{arg, read_or},
    programs::{entry_programs, return_programs},
    record::{record, stage_key},
    spans::thread_id,
    tracked::wanted,
};

entry_programs! {
    alloc_class_entry_k, alloc_class_entry_u => try_alloc_entry;
}

return_programs! {
    alloc_class_return_k, alloc_class_return_u => try_alloc_return;
}

/// Copies a block pointer holds at most.
const SPA_DVAS_PER_BP: u64 = 3;

/// ENOSPC (the same errno on Linux and in libzpool).
const ENOSPC: i32 = 28;

/// An allocation in a watched class under way, by thread: (spa, class bit,
/// psize times the copies asked for).
#[map]
static ALLOCATING: HashMap<u64, [u64; 3]> = HashMap::with_max_entries(4096, 0);

/// The [`alloc_class`] bit of `mc` in `spa`, if it is a watched class.
#[inline(always)]
fn watched_class(spa: u64, mc: u64) -> Option<u32> {
    let offsets = &CONFIG.offsets;
    let (special, dedup) = (
        config_u32(&offsets.spa_special_class),
        config_u32(&offsets.spa_dedup_class),
    );
    if spa == 0
        || mc == 0
        || !offsets_valid()
        || special == OFFSET_UNKNOWN
        || dedup == OFFSET_UNKNOWN
    {
        return None;
    }
    if read_or::<u64>(spa + special as u64, 0) == mc {
        Some(alloc_class::SPECIAL)
    } else if read_or::<u64>(spa + dedup as u64, 0) == mc {
        Some(alloc_class::DEDUP)
    } else {
        None
    }
}

#[inline(always)]
fn try_alloc_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    // ndvas copies of psize each (ditto blocks for metadata).
    let (spa, mc) = (arg(ctx, 0), arg(ctx, 1));
    let copies = (arg(ctx, 4) as u32 as u64).min(SPA_DVAS_PER_BP);
    let size = arg(ctx, 2).wrapping_mul(copies);
    let Some(class) = watched_class(spa, mc) else {
        return Ok(());
    };
    ALLOCATING
        .insert(&thread_id(), &[spa, class as u64, size], 0)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

#[inline(always)]
fn try_alloc_return(ctx: &RetProbeContext) -> Result<(), u32> {
    let thread = thread_id();
    let Some(&[spa, class, size]) = (unsafe { ALLOCATING.get(&thread) }) else {
        return Ok(());
    };
    let _ = ALLOCATING.remove(&thread);
    let rc: u64 = ctx.ret();
    let full = if rc as i32 == ENOSPC {
        alloc_class::FULL
    } else {
        0
    };
    record(
        &stage_key(
            Stage::AllocClass,
            COUNT_ONLY_CLASS | class as u32 | full,
            spa,
            0,
        ),
        0,
        size,
        0,
    );
    Ok(())
}
