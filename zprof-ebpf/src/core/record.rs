//! Where results go: the per-CPU histograms (`HIST`) that almost every stage
//! ends in, and the ring buffer (`EVENTS`) for what matters one by one (a
//! txg, a slow request).
//!
//! The vdev and compression stages fire tens of thousands of times a second:
//! summing in the kernel costs nothing in user space and cannot lose events.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    macros::map,
    maps::{PerCpuArray, PerCpuHashMap, RingBuf},
};
use zprof_common::{HIST_BUCKETS, Hist, HistKey, Stage, counter, hist_bucket};

use super::{
    counters::bump,
    pools::learn_pool_name,
    spans::{leave, thread_id},
    timed::note_thread_wait,
    tracked::wanted,
};

/// Per-CPU histograms; user space sums the CPUs. Size set by `--hist-entries`.
#[map]
static HIST: PerCpuHashMap<HistKey, Hist> = PerCpuHashMap::with_max_entries(2048, 0);

/// A zeroed histogram to insert new keys from (too large for the 512-byte stack).
#[map]
pub static ZERO: PerCpuArray<Hist> = PerCpuArray::with_max_entries(1, 0);

/// Per-txg events (spa_sync returns) and slow requests.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Adds one event to the histogram for `key`.
#[inline(always)]
pub fn record(key: &HistKey, duration_ns: u64, bytes: u64, bytes_out: u64) {
    let mut slot = HIST.get_ptr_mut(key);
    if slot.is_none() {
        // A new key is rare: a good moment to learn its pool's name, for pools
        // that spa_sync has not (yet) named.
        learn_pool_name(key.pool);
        let Some(zero) = ZERO.get(0) else { return };
        if HIST.insert(key, zero, BPF_NOEXIST as u64).is_err() {
            // Either another CPU inserted it first (fine) or the map is full.
            slot = HIST.get_ptr_mut(key);
            if slot.is_none() {
                bump(counter::HIST_MAP_FULL);
                return;
            }
        } else {
            slot = HIST.get_ptr_mut(key);
        }
    }
    note_thread_wait(key.stage, duration_ns);
    let Some(hist) = slot else { return };
    let hist = unsafe { &mut *hist };
    hist.count += 1;
    hist.total_ns += duration_ns;
    hist.bytes += bytes;
    hist.bytes_out += bytes_out;
    if duration_ns > hist.max_ns {
        hist.max_ns = duration_ns;
    }
    // black_box keeps the bound check: the compiler can prove it redundant and
    // drop it, but the verifier needs to see it before the array access.
    let bucket = core::hint::black_box(hist_bucket(duration_ns));
    if bucket < HIST_BUCKETS {
        hist.buckets[bucket] += 1;
    }
}

/// The histogram key of `stage`'s row for `class`, `pool` and `vdev`.
#[inline(always)]
pub fn stage_key(stage: Stage, class: u32, pool: u64, vdev: u64) -> HistKey {
    HistKey {
        stage: stage as u32,
        class,
        pool: super::pools::pool_row_key(pool),
        vdev,
    }
}

/// Adds `value` to a u64 in a map shared by all CPUs.
#[inline(always)]
pub fn atomic_add(field: &mut u64, value: u64) {
    // core's AtomicU64 has no fetch_add on the BPF target. SAFETY: a u64 in
    // a map value, 8-byte aligned; the result is unused, so this is BPF's
    // plain atomic add, which every kernel zprof supports.
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            field, value,
        )
    };
}

/// Ends this thread's `stage` call and records it under the class, bytes and
/// pool its entry saw (`bytes_out`: what the return says, such as a
/// compressed size).
#[inline(always)]
pub fn leave_and_record(stage: Stage, bytes_out: u64) {
    // Entries filtered out (other processes) left nothing to match: not a loss.
    if !wanted(matches!(
        stage,
        Stage::ZilCommit
            | Stage::TxgWaitSynced
            | Stage::TxAssign
            | Stage::TxWait
            | Stage::WorkloadWrite
            | Stage::WorkloadRead
    )) {
        return;
    }
    if let Some((entry, duration)) = leave(stage, thread_id()) {
        let key = stage_key(stage, entry.class as u32, entry.pool, 0);
        record(&key, duration, entry.bytes, bytes_out);
    }
}
