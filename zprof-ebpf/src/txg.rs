//! Transaction groups and pool lifetime: spa_sync per txg (also streamed one
//! by one, since each txg's number and start time matter), the workload's
//! waits for a txg to sync, and spa_remove, where a pool's name is kept for
//! the report after the pool is gone.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{GonePool, Stage, TXG_WAIT_IN_ZIL_COMMIT, TxgEvent, counter};

use crate::core::{
    config::CONFIG,
    memory::{arg, member_u64},
    pools::{
        COMMITS, POOL_NAMES, count_pool_removal, learn_pool_name, next_sync_generation,
        pool_row_key,
    },
    programs::{entry_programs, return_programs},
    record::{EVENTS, leave_and_record, record, stage_key},
    spans::{INFLIGHT, enter, leave, thread_id, thread_key},
    threads::{internal_begin, internal_end},
    tracked::wanted,
};

entry_programs! {
    spa_sync_entry_k, spa_sync_entry_u => try_spa_sync_entry;
    spa_remove_entry_k, spa_remove_entry_u => try_spa_remove_entry;
    txg_wait_entry_k, txg_wait_entry_u => try_txg_wait_entry;
}

return_programs! {
    spa_sync_return_k, spa_sync_return_u => try_spa_sync_return;
    txg_wait_return_k, txg_wait_return_u => try_txg_wait_return;
}

/// Pools exported or destroyed, with their names (see [`GonePool`]).
#[map]
static GONE_POOLS: HashMap<u64, GonePool> = HashMap::with_max_entries(256, 0);

/// spa_sync(spa_t *spa, uint64_t txg): also learns the pool's name.
#[inline(always)]
fn try_spa_sync_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let spa = arg(ctx, 0);
    let txg = arg(ctx, 1);
    learn_pool_name(spa);
    // A span that cannot open is counted on the way out (`run`); the thread
    // is marked internal either way.
    let entered = enter(Stage::SpaSync, thread_id(), 0, 0, spa, txg);
    internal_begin();
    next_sync_generation();
    entered.and(crate::sync_phases::sync_begins(spa))
}

#[inline(always)]
fn try_spa_sync_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    internal_end();
    let phases = crate::sync_phases::sync_ends();
    let Some((entry, duration)) = leave(Stage::SpaSync, thread_id()) else {
        return Ok(());
    };
    record(&stage_key(Stage::SpaSync, 0, entry.pool, 0), duration, 0, 0);
    crate::txg_history::note_sync(entry.pool, entry.extra, entry.start_ns);
    let event = TxgEvent {
        pool: pool_row_key(entry.pool),
        txg: entry.extra,
        start_ns: entry.start_ns,
        duration_ns: duration,
        tgid: (bpf_get_current_pid_tgid() >> 32) as u32,
        pad: 0,
        phases,
    };
    EVENTS
        .output::<TxgEvent>(&event, 0)
        .map_err(|_| counter::RINGBUF_FULL)
}

/// spa_remove(spa_t *spa): the pool is gone (exported or destroyed). Its name
/// moves to GONE_POOLS under its row key, so that a pool created later at
/// the same address learns its own name and keeps rows of its own (the
/// removal is counted for `pool_row_key`), and its commit window is dropped.
#[inline(always)]
fn try_spa_remove_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let spa = arg(ctx, 0);
    if spa == 0 {
        return Ok(());
    }
    learn_pool_name(spa);
    let Some(name) = (unsafe { POOL_NAMES.get(&spa) }) else {
        return Ok(());
    };
    let gone = GonePool {
        removed_ns: unsafe { bpf_ktime_get_ns() },
        name: name.name,
    };
    let kept = GONE_POOLS
        .insert(&pool_row_key(spa), &gone, 0)
        .map_err(|_| counter::NAME_MAP_FULL);
    let _ = POOL_NAMES.remove(&spa);
    let _ = COMMITS.remove(&spa);
    kept.and(count_pool_removal(spa))
}

/// txg_wait_synced(dsl_pool_t *dp, uint64_t txg); inside zil_commit (a
/// commit that fell back to the txg sync, or created its log chain) its own
/// class.
#[inline(always)]
fn try_txg_wait_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.dsl_pool_spa);
    let class = if unsafe { INFLIGHT.get(&thread_key(Stage::ZilCommit)) }.is_some() {
        TXG_WAIT_IN_ZIL_COMMIT
    } else {
        0
    };
    enter(Stage::TxgWaitSynced, thread_id(), class as u64, 0, pool, 0)
}

#[inline(always)]
fn try_txg_wait_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::TxgWaitSynced, 0);
    Ok(())
}
