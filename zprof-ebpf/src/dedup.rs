//! Dedup's work at txg sync: the table's changes written (ddt_sync) and, with
//! fast dedup (2.3 and later), how that splits between appending the txg's
//! changed entries to the dedup log and flushing logged entries into the
//! table.
//!
//! All of it runs on the pool's sync thread inside ddt_sync, so each span is
//! keyed by that thread and takes the pool of the ddt_sync it runs in. The
//! flush is a static function (ddt_sync_flush_log) that the compiler inlines
//! into ddt_sync, so its span starts at the first entry it takes from the log
//! (ddt_log_take_first, exported) and ends with ddt_sync; the entries it took
//! are counted on that span as they are taken.

use aya_ebpf::programs::{ProbeContext, RetProbeContext};
use zprof_common::Stage;

use crate::core::{
    memory::arg,
    programs::{entry_programs, return_programs},
    record::{leave_and_record, record, stage_key},
    spans::{INFLIGHT, enter, take, thread_id, thread_key},
    tracked::wanted,
};

entry_programs! {
    ddt_sync_entry_k, ddt_sync_entry_u => try_ddt_sync_entry;
    ddt_log_begin_entry_k, ddt_log_begin_entry_u => try_ddt_log_begin_entry;
}

return_programs! {
    ddt_sync_return_k, ddt_sync_return_u => try_ddt_sync_return;
    ddt_log_commit_return_k, ddt_log_commit_return_u => try_ddt_log_commit_return;
    ddt_log_take_return_k, ddt_log_take_return_u => try_ddt_log_take_return;
}

/// ddt_sync(spa_t *spa, uint64_t txg), inside spa_sync.
#[inline(always)]
fn try_ddt_sync_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    crate::sync_phases::dedup_begins();
    enter(Stage::DdtSync, thread_id(), 0, 0, arg(ctx, 0), 0)
}

/// ddt_sync returns: its log flush (if one began) ends with it.
#[inline(always)]
fn try_ddt_sync_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    if let Some((flush, duration)) = take(thread_key(Stage::DdtLogFlush)) {
        let key = stage_key(Stage::DdtLogFlush, 0, flush.pool, 0);
        record(&key, duration, flush.bytes, 0);
    }
    leave_and_record(Stage::DdtSync, 0);
    crate::sync_phases::dedup_ends();
    Ok(())
}

/// The pool of the ddt_sync this thread is in; None outside one (a log
/// loaded at import, say), where no span is opened.
#[inline(always)]
fn syncing_pool() -> Option<u64> {
    unsafe { INFLIGHT.get(&thread_key(Stage::DdtSync)) }.map(|sync| sync.pool)
}

/// ddt_log_begin(ddt_t *ddt, size_t nentries, dmu_tx_t *tx, ddt_log_update_t *dlu):
/// the txg's changed entries are about to be appended to the active log.
#[inline(always)]
fn try_ddt_log_begin_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let Some(pool) = syncing_pool() else {
        return Ok(());
    };
    enter(Stage::DdtLogAppend, thread_id(), 0, arg(ctx, 1), pool, 0)
}

/// ddt_log_commit returns: the appended entries are written to the log.
#[inline(always)]
fn try_ddt_log_commit_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if syncing_pool().is_none() {
        return Ok(());
    }
    leave_and_record(Stage::DdtLogAppend, 0);
    Ok(())
}

/// ddt_log_take_first returns B_TRUE when it took an entry off the flushing
/// log to write into the table: the first one opens the flush span, each
/// one counts on it (a flush that found nothing to take records nothing).
#[inline(always)]
fn try_ddt_log_take_return(ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let taken: u64 = ctx.ret();
    if taken & 0xffff_ffff == 0 {
        return Ok(());
    }
    let Some(pool) = syncing_pool() else {
        return Ok(());
    };
    let key = thread_key(Stage::DdtLogFlush);
    match INFLIGHT.get_ptr_mut(&key) {
        Some(flush) => unsafe { (*flush).bytes += 1 },
        // The span starts at the first take's return: that call's own few
        // hundred nanoseconds are left out.
        None => enter(Stage::DdtLogFlush, thread_id(), 0, 1, pool, 0)?,
    }
    Ok(())
}
