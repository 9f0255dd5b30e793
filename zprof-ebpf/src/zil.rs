//! The ZIL: zil_commit per pool, broken into what its time went to (the log
//! block writes and flushes it shares with concurrent committers, its own
//! timed wait for a log block to fill, the rest), the sync write cycle of each
//! writing thread between commits, and log blocks from issue to done.
//!
//! A commit takes a slot in its pool's window (`pools::COMMITS`) at entry;
//! the vdev and flush probes charge to every slot taken, and its return
//! reads its own out.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{
    COMMIT_OVERLAPPED, CommitSlot, FLUSH_LEAF_ISSUE_TO_DONE, Stage, log_place_class,
};

use crate::core::{
    config::{CONFIG, config_u32, offsets_valid},
    memory::{arg, member_u64},
    pools::{commit_window_state, held_commit_slot, open_commit_slot},
    programs::{entry_programs, return_programs},
    record::{record, stage_key},
    spans::{INFLIGHT, enter, leave, take, thread_id, thread_key},
    threads::{internal_begin, internal_end, writer_slot},
    tracked::wanted,
};

entry_programs! {
    zil_commit_entry_k, zil_commit_entry_u => try_zil_commit_entry;
    timed_wait_entry_k, timed_wait_entry_u => try_timed_wait_entry;
    lwb_issue_entry_k, lwb_issue_entry_u => try_lwb_issue_entry;
    lwb_done_entry_k, lwb_done_entry_u => try_lwb_done_entry;
}

return_programs! {
    zil_commit_return_k, zil_commit_return_u => try_zil_commit_return;
    timed_wait_return_k, timed_wait_return_u => try_timed_wait_return;
}

/// zil_commit(zilog_t *zilog, uint64_t foid)
#[inline(always)]
fn try_zil_commit_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zilog_spa);
    close_write_cycle(pool);
    // A span that cannot open is counted on the way out (`run`); the window
    // below opens either way.
    let entered = enter(Stage::ZilCommit, thread_id(), 0, 0, pool, 0);
    internal_begin();
    if entered.is_ok() {
        note_commit_start(pool);
    }
    // A slot of its own in the pool's window (kept as the span's class, plus
    // one): the vdev and flush probes charge what completes while it runs to
    // every commit then in progress. A nested call keeps the outer's.
    if entered.is_ok()
        && let Some(index) = open_commit_slot(pool, thread_id())
        && let Some(span) = INFLIGHT.get_ptr_mut(&thread_key(Stage::ZilCommit))
    {
        unsafe { (*span).class = index as u64 + 1 };
    }
    entered
}

#[inline(always)]
fn try_zil_commit_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    internal_end();
    let Some((entry, duration)) = leave(Stage::ZilCommit, thread_id()) else {
        return Ok(());
    };
    record(
        &stage_key(Stage::ZilCommit, 0, entry.pool, 0),
        duration,
        0,
        0,
    );
    if let Some(slot) = writer_slot() {
        slot.last_commit_end_ns = unsafe { bpf_ktime_get_ns() };
        slot.last_pool = entry.pool;
    }
    if entry.class > 0
        && let Some((window, index)) =
            held_commit_slot(entry.pool, thread_id(), entry.class as usize - 1)
    {
        record_commit_parts(&window.slots[index], entry.pool, entry.extra, duration);
        window.slots[index].tid = 0;
        window.active = window.active.saturating_sub(1);
        if window.active == 0 {
            window.last_end_ns = unsafe { bpf_ktime_get_ns() };
        }
    }
    Ok(())
}

/// A commit starts on `pool`: the pool's gap since its last commit ended,
/// or, with another commit in progress, an overlapped start (counted).
/// Commits that never overlap though several threads make them wait for
/// each other: the model of `explain` then takes the pool's commit rate as
/// one commit plus one gap.
#[inline(always)]
fn note_commit_start(pool: u64) {
    let Some((active, last_end_ns)) = commit_window_state(pool) else {
        return;
    };
    if active > 0 {
        record(
            &stage_key(Stage::CommitGap, COMMIT_OVERLAPPED, pool, 0),
            0,
            0,
            0,
        );
    } else if last_end_ns != 0 {
        let gap = unsafe { bpf_ktime_get_ns() }.saturating_sub(last_end_ns);
        record(&stage_key(Stage::CommitGap, 0, pool, 0), gap, 0, 0);
    }
}

/// A commit's parts: the slowest log block write and the flushes it waited
/// for (shared with concurrent committers), its own timed wait for a log
/// block to fill (`waited`), and the rest of its `duration`.
#[inline(always)]
fn record_commit_parts(slot: &CommitSlot, pool: u64, waited: u64, duration: u64) {
    if slot.writes > 0 {
        let key = stage_key(
            Stage::ZilLogWrite,
            log_place_class(slot.log_places),
            pool,
            0,
        );
        record(&key, slot.max_write_ns, slot.writes, 0);
    }
    let flush_ns = if config_u32(&CONFIG.semantics.flush_mode) == FLUSH_LEAF_ISSUE_TO_DONE
        && slot.flush_last_ns > 0
    {
        slot.flush_last_ns
            .saturating_sub(slot.flush_first_ns)
            .min(duration)
    } else {
        slot.flush_ns
    };
    record(&stage_key(Stage::ZilFlush, 0, pool, 0), flush_ns, 0, 0);
    if slot.writes > 0 {
        let waited = waited.min(duration);
        record(
            &stage_key(
                Stage::ZilTimeoutWait,
                log_place_class(slot.log_places),
                pool,
                0,
            ),
            waited,
            0,
            0,
        );
        // Per commit, so its median is exact where a difference of medians
        // would be mostly bucket rounding.
        let other = duration.saturating_sub(slot.max_write_ns + flush_ns + waited);
        record(
            &stage_key(Stage::ZilOther, log_place_class(slot.log_places), pool, 0),
            other,
            0,
            0,
        );
    }
}

/// At zil_commit entry: the cycle since this thread's previous commit, with
/// the writes this commit makes durable (noted by the workload probes).
#[inline(always)]
fn close_write_cycle(pool: u64) {
    let Some(slot) = writer_slot() else { return };
    if slot.last_commit_end_ns != 0 && slot.last_pool == pool {
        let cycle = unsafe { bpf_ktime_get_ns() }.saturating_sub(slot.last_commit_end_ns);
        record(
            &stage_key(Stage::SyncWriteCycle, 0, pool, 0),
            cycle,
            slot.writes,
            slot.bytes,
        );
    }
    slot.writes = 0;
    slot.bytes = 0;
}

/// cv_timedwait_hires(kcondvar_t *cv, kmutex_t *mp, hrtime_t tim, ...):
/// inside zil_commit, zil_commit_waiter's wait for its open log block to
/// fill (the commit timeout); other callers are left alone.
#[inline(always)]
fn try_timed_wait_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    if unsafe { INFLIGHT.get(&thread_key(Stage::ZilCommit)) }.is_none() {
        return Ok(());
    }
    enter(Stage::ZilTimeoutWait, thread_id(), 0, 0, 0, 0)
}

/// Adds the wait to the commit in progress (its `extra`). Waits outside a
/// commit opened no span: nothing to end, and nothing unmatched.
#[inline(always)]
fn try_timed_wait_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    let Some((_, waited)) = take(thread_key(Stage::ZilTimeoutWait)) else {
        return Ok(());
    };
    if let Some(entry) = INFLIGHT.get_ptr_mut(&thread_key(Stage::ZilCommit)) {
        unsafe { (*entry).extra += waited };
    }
    Ok(())
}

/// zil_lwb_write_issue(zilog_t *zilog, lwb_t *lwb), kernel static: a log block
/// goes to disk. Its done callback below ends the span.
#[inline(always)]
fn try_lwb_issue_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !offsets_valid() {
        return Ok(());
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zilog_spa);
    enter(Stage::ZilLogBlock, arg(ctx, 1), 0, 0, pool, 0)
}

/// zil_lwb_flush_vdevs_done(zio_t *zio), kernel static: the log block is
/// written and its vdevs flushed; the lwb is the zio's io_private.
#[inline(always)]
fn try_lwb_done_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !offsets_valid() {
        return Ok(());
    }
    let lwb = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_private);
    if let Some((entry, duration)) = leave(Stage::ZilLogBlock, lwb) {
        record(
            &stage_key(Stage::ZilLogBlock, 0, entry.pool, 0),
            duration,
            0,
            0,
        );
    }
    Ok(())
}
