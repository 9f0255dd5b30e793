//! The workload's side of the pipeline: its reads and writes where they enter
//! the DMU (dmu_write/dmu_read in libzpool, the uio paths in the kernel),
//! timed or counted only, and the write throttle it waits in (dmu_tx_assign,
//! dmu_tx_wait, and on the kernel each delay dmu_tx_delay computed). Calls ZFS makes itself from spa_sync or zil_commit are left
//! out (`threads::in_zfs_internal`).

use aya_ebpf::{
    macros::map,
    maps::PerCpuArray,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{COUNT_ONLY_CLASS, Stage};

use crate::core::{
    config::CONFIG,
    memory::{arg, member_u64},
    pools::sync_generation,
    programs::{entry_programs, return_programs},
    record::leave_and_record,
    record::{record, stage_key},
    spans::{enter, thread_id},
    threads::{in_zfs_internal, writer_slot},
    tracked::wanted,
};

entry_programs! {
    dmu_write_entry_k, dmu_write_entry_u => try_dmu_write_entry;
    dmu_read_entry_k, dmu_read_entry_u => try_dmu_read_entry;
    dmu_write_count_k, dmu_write_count_u => try_dmu_write_count;
    dmu_read_count_k, dmu_read_count_u => try_dmu_read_count;
    uio_write_entry_k, uio_write_entry_u => try_uio_write_entry;
    uio_read_entry_k, uio_read_entry_u => try_uio_read_entry;
    tx_assign_entry_k, tx_assign_entry_u => try_tx_assign_entry;
    tx_wait_entry_k, tx_wait_entry_u => try_tx_wait_entry;
    tx_delay_entry_k, tx_delay_entry_u => try_tx_delay_entry;
}

return_programs! {
    write_return_k, write_return_u => try_write_return;
    read_return_k, read_return_u => try_read_return;
    tx_assign_return_k, tx_assign_return_u => try_tx_assign_return;
    tx_wait_return_k, tx_wait_return_u => try_tx_wait_return;
}

/// The last objset seen by the workload probes on this CPU, its spa_t and the
/// sync generation it was read in (`pools::sync_generation`), so that a write
/// does not re-read os_spa from the traced process (one bpf_probe_read_user
/// less per write).
#[map]
static OBJSET_SPA: PerCpuArray<[u64; 3]> = PerCpuArray::with_max_entries(1, 0);

/// The spa_t of objset `os`, from this CPU's one-entry cache when it is the
/// same objset as last time (a workload writes to one or a few datasets).
#[inline(always)]
fn objset_spa(os: u64) -> u64 {
    let Some(cache) = OBJSET_SPA.get_ptr_mut(0) else {
        return member_u64(os, &CONFIG.offsets.objset_spa);
    };
    let cache = unsafe { &mut *cache };
    let generation = sync_generation();
    if cache[0] == os && cache[2] == generation && os != 0 {
        return cache[1];
    }
    let spa = member_u64(os, &CONFIG.offsets.objset_spa);
    *cache = [os, spa, generation];
    spa
}

/// A workload write: remembered until this thread's next zil_commit, which
/// makes it a sync write.
#[inline(always)]
fn note_write(stage: Stage, bytes: u64) {
    if !matches!(stage, Stage::WorkloadWrite) {
        return;
    }
    if let Some(slot) = writer_slot() {
        slot.writes += 1;
        slot.bytes += bytes;
    }
}

/// dmu_write/dmu_read(objset_t *os, uint64_t object, uint64_t offset, uint64_t size, ...)
#[inline(always)]
fn workload_dmu(ctx: &ProbeContext, stage: Stage) -> Result<(), u32> {
    if !wanted(true) || in_zfs_internal() {
        return Ok(());
    }
    let pool = objset_spa(arg(ctx, 0));
    note_write(stage, arg(ctx, 3));
    enter(stage, thread_id(), 0, arg(ctx, 3), pool, 0)
}

/// Entry-only variant: counts operations and bytes without timing them
/// (`COUNT_ONLY_CLASS`), one uprobe per operation instead of two.
fn workload_count(ctx: &ProbeContext, stage: Stage) {
    if !wanted(true) || in_zfs_internal() {
        return;
    }
    let pool = objset_spa(arg(ctx, 0));
    note_write(stage, arg(ctx, 3));
    record(
        &stage_key(stage, COUNT_ONLY_CLASS, pool, 0),
        0,
        arg(ctx, 3),
        0,
    );
}

/// dmu_write_uio_dnode/dmu_read_uio_dnode(dnode_t *dn, zfs_uio_t *uio, uint64_t size, ...):
/// the kernel's ZPL and zvol paths both end here.
#[inline(always)]
fn workload_uio(ctx: &ProbeContext, stage: Stage) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    note_write(stage, arg(ctx, 2));
    enter(stage, thread_id(), 0, arg(ctx, 2), 0, 0)
}

#[inline(always)]
fn try_dmu_write_entry(ctx: &ProbeContext) -> Result<(), u32> {
    workload_dmu(ctx, Stage::WorkloadWrite)
}

#[inline(always)]
fn try_dmu_read_entry(ctx: &ProbeContext) -> Result<(), u32> {
    workload_dmu(ctx, Stage::WorkloadRead)
}

#[inline(always)]
fn try_dmu_write_count(ctx: &ProbeContext) -> Result<(), u32> {
    workload_count(ctx, Stage::WorkloadWrite);
    Ok(())
}

#[inline(always)]
fn try_dmu_read_count(ctx: &ProbeContext) -> Result<(), u32> {
    workload_count(ctx, Stage::WorkloadRead);
    Ok(())
}

#[inline(always)]
fn try_uio_write_entry(ctx: &ProbeContext) -> Result<(), u32> {
    workload_uio(ctx, Stage::WorkloadWrite)
}

#[inline(always)]
fn try_uio_read_entry(ctx: &ProbeContext) -> Result<(), u32> {
    workload_uio(ctx, Stage::WorkloadRead)
}

#[inline(always)]
fn try_write_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    // Calls inside spa_sync or zil_commit were skipped at entry on purpose.
    if !in_zfs_internal() {
        leave_and_record(Stage::WorkloadWrite, 0);
    }
    Ok(())
}

#[inline(always)]
fn try_read_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !in_zfs_internal() {
        leave_and_record(Stage::WorkloadRead, 0);
    }
    Ok(())
}

/// The spa_t of a dmu_tx_t, through its dsl_pool_t.
#[inline(always)]
fn tx_pool(tx: u64) -> u64 {
    let dp = member_u64(tx, &CONFIG.offsets.dmu_tx_pool);
    member_u64(dp, &CONFIG.offsets.dsl_pool_spa)
}

/// dmu_tx_assign(dmu_tx_t *tx, uint64_t txg_how): includes throttle delays.
#[inline(always)]
fn try_tx_assign_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    enter(Stage::TxAssign, thread_id(), 0, 0, tx_pool(arg(ctx, 0)), 0)
}

#[inline(always)]
fn try_tx_assign_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::TxAssign, 0);
    Ok(())
}

/// dmu_tx_wait(dmu_tx_t *tx)
#[inline(always)]
fn try_tx_wait_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    enter(Stage::TxWait, thread_id(), 0, 0, tx_pool(arg(ctx, 0)), 0)
}

#[inline(always)]
fn try_tx_wait_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::TxWait, 0);
    Ok(())
}

/// trace_zfs_delay__mintime(dmu_tx_t *tx, uint64_t dirty, uint64_t
/// min_tx_time): dmu_tx_delay (static, inlined into dmu_tx_wait) calls this
/// DTRACE probe function just before a delayed writer sleeps, with the
/// pool's dirty bytes and the transaction time it computed from them.
#[inline(always)]
fn try_tx_delay_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    let (pool, dirty, delay) = (tx_pool(arg(ctx, 0)), arg(ctx, 1), arg(ctx, 2));
    record(
        &stage_key(Stage::ThrottleDelay, 0, pool, 0),
        delay,
        dirty,
        0,
    );
    record(&stage_key(Stage::ThrottleDirty, 0, pool, 0), dirty, 0, 0);
    Ok(())
}
