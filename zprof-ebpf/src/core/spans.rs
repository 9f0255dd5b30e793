//! Spans: a probed call (or an I/O, or a log block) from its start to its
//! end. The entry probe keeps the start time and what it learnt in
//! `INFLIGHT`; the end turns it into a histogram entry. Spans are keyed by
//! stage and an id (a thread, a zio, a log block), so the open spans of a
//! thread also say which timed stages it is in (`timed::timed_stage`).

use aya_ebpf::{
    bindings::{BPF_ANY, BPF_NOEXIST},
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::{Array, HashMap},
};
use zprof_common::{InFlight, InFlightKey, Stage, counter};

use super::counters::count_unmatched;

/// Calls in flight: start time and what the entry probe learnt.
#[map]
pub static INFLIGHT: HashMap<InFlightKey, InFlight> = HashMap::with_max_entries(16384, 0);

/// When user space had attached every program (bpf_ktime_get_ns's clock;
/// 0 while it is attaching). A span begun before then may have ended
/// unseen, its end's program not yet attached: a later start under its key
/// replaces it rather than counting as nested (a spa_sync run between the
/// attaching of its entry and of its return left its start, and the next
/// txg's spa_sync was timed from it: 980 ms where ZFS's kstat said 2.4 ms).
#[map]
pub static ATTACHED_NS: Array<u64> = Array::with_max_entries(1, 0);

/// Whether a span begun at `start_ns` began while programs were attached.
#[inline(always)]
pub fn begun_while_attaching(start_ns: u64) -> bool {
    let attached = ATTACHED_NS.get(0).copied().unwrap_or(0);
    attached == 0 || start_ns < attached
}

/// The current thread's id (the kernel's pid).
#[inline(always)]
pub fn thread_id() -> u64 {
    bpf_get_current_pid_tgid() & 0xffff_ffff
}

/// The in-flight key of `stage`'s call on this thread.
#[inline(always)]
pub fn thread_key(stage: Stage) -> InFlightKey {
    span_key(stage, thread_id())
}

/// The in-flight key of `stage`'s span for `id` (a thread, a zio, a log block).
#[inline(always)]
pub fn span_key(stage: Stage, id: u64) -> InFlightKey {
    InFlightKey {
        id,
        stage: stage as u32,
        pad: 0,
    }
}

/// Remembers the start of a call; the matching `leave` turns it into a
/// histogram entry. The error is the counter to bump: a span already open
/// under the key (`NESTED_ENTRY`) or a full map.
#[inline(always)]
pub fn enter(
    stage: Stage,
    id: u64,
    class: u64,
    bytes: u64,
    pool: u64,
    extra: u64,
) -> Result<(), u32> {
    let key = span_key(stage, id);
    let value = InFlight {
        start_ns: unsafe { bpf_ktime_get_ns() },
        class,
        bytes,
        pool,
        extra,
    };
    match INFLIGHT.insert(&key, &value, BPF_NOEXIST as u64) {
        Ok(()) => Ok(()),
        Err(-17) => replace_stale(&key, &value), // EEXIST
        Err(_) => Err(counter::ENTRY_MAP_FULL),
    }
}

/// A start found under `key`: one begun while zprof attached may be stale
/// (see [`ATTACHED_NS`]) and gives way; any other is an outer call of the
/// same function still running, and this inner one is not timed.
#[inline(always)]
fn replace_stale(key: &InFlightKey, value: &InFlight) -> Result<(), u32> {
    let stale =
        unsafe { INFLIGHT.get(key) }.is_some_and(|open| begun_while_attaching(open.start_ns));
    if !stale {
        return Err(counter::NESTED_ENTRY);
    }
    INFLIGHT
        .insert(key, value, BPF_ANY as u64)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

/// Ends a call started by `enter`; returns what the entry saw and the duration.
#[inline(always)]
pub fn leave(stage: Stage, id: u64) -> Option<(InFlight, u64)> {
    let ended = take(span_key(stage, id));
    if ended.is_none() {
        count_unmatched(stage);
    }
    ended
}

/// Ends the call under `key` if one started: `leave` without counting a
/// missing start, for spans that only some calls open.
#[inline(always)]
pub fn take(key: InFlightKey) -> Option<(InFlight, u64)> {
    let entry = (unsafe { INFLIGHT.get(&key) }).copied()?;
    let _ = INFLIGHT.remove(&key);
    let now = unsafe { bpf_ktime_get_ns() };
    Some((entry, now.saturating_sub(entry.start_ns)))
}
