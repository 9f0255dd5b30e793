//! The timed-stage machinery: which timed stage a thread is in now (from its
//! open spans), for the CPU samples and blocked periods taken in it, and how
//! long it has spent in each stage a request waits in (`--slower-than`).

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, macros::map, maps::LruHashMap};
use zprof_common::{Stage, ThreadWaits, wait};

use super::{
    config::{CONFIG, config_u32},
    spans::{INFLIGHT, span_key},
};

/// Each thread's time in the timed stages so far (`--slower-than` only).
#[map]
static THREAD_WAITS: LruHashMap<u32, ThreadWaits> = LruHashMap::with_max_entries(16384, 0);

/// The innermost timed stage thread `tid` is in (0: none): stacks walked
/// through code without frame pointers (libzpool, libc) lose their callers,
/// and this says what the thread was waiting in all the same.
#[inline(always)]
pub fn timed_stage(tid: u64) -> u32 {
    // Innermost first: zil_commit can wait for a txg; a write waits in the throttle.
    const ORDER: [Stage; 7] = [
        Stage::TxgWaitSynced,
        Stage::TxWait,
        Stage::ZilCommit,
        Stage::TxAssign,
        Stage::SpaSync,
        Stage::WorkloadWrite,
        Stage::WorkloadRead,
    ];
    for stage in ORDER {
        if unsafe { INFLIGHT.get(&span_key(stage, tid)) }.is_some() {
            return stage as u32;
        }
    }
    0
}

/// Whether slow requests are streamed (`--slower-than`), and so whether the
/// threads' stage totals are kept.
#[inline(always)]
pub fn slow_tracking() -> bool {
    config_u32(&CONFIG.slow_request_us) != 0
}

/// Adds a timed stage's duration to the current thread's total (called for
/// every histogram entry; only the stages a file request waits in count).
#[inline(always)]
pub fn note_thread_wait(stage: u32, duration_ns: u64) {
    if !slow_tracking() {
        return;
    }
    let slot = match stage {
        s if s == Stage::ZilCommit as u32 => wait::ZIL_COMMIT,
        s if s == Stage::ZilLogWrite as u32 => wait::ZIL_LOG_WRITE,
        s if s == Stage::ZilFlush as u32 => wait::ZIL_FLUSH,
        s if s == Stage::ZilTimeoutWait as u32 => wait::ZIL_TIMEOUT_WAIT,
        s if s == Stage::ZilOther as u32 => wait::ZIL_OTHER,
        s if s == Stage::TxgWaitSynced as u32 => wait::TXG_WAIT_SYNCED,
        s if s == Stage::TxWait as u32 => wait::TX_WAIT,
        s if s == Stage::TxAssign as u32 => wait::TX_ASSIGN,
        _ => return,
    };
    let tid = bpf_get_current_pid_tgid() as u32;
    let waits = match THREAD_WAITS.get_ptr_mut(&tid) {
        Some(waits) => waits,
        None => {
            let _ = THREAD_WAITS.insert(&tid, &ThreadWaits::default(), 0);
            match THREAD_WAITS.get_ptr_mut(&tid) {
                Some(waits) => waits,
                None => return,
            }
        }
    };
    if slot < wait::COUNT {
        unsafe { (*waits).ns[slot] += duration_ns };
    }
}

/// The current thread's stage totals (zero when not tracked).
#[inline(always)]
pub fn current_waits() -> ThreadWaits {
    if !slow_tracking() {
        return ThreadWaits::default();
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    unsafe { THREAD_WAITS.get(&tid) }
        .copied()
        .unwrap_or_default()
}
