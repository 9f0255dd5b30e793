//! The events the programs stream one by one through the EVENTS ring buffer
//! (each txg synced, each request slower than `--slower-than`), drained into
//! the session as they come so the buffer does not fill; slow requests
//! beyond [`MAX_SLOW_REQUESTS`] are counted rather than kept.

use std::collections::BTreeMap;

use aya::maps::{MapData, RingBuf};
use zprof_common::{SlowRequest, TxgEvent};

use crate::{collect::pools::pool_label, recording::TxgRecord};

/// Slow requests kept in a recording; more are counted, not kept.
pub const MAX_SLOW_REQUESTS: usize = 10_000;

/// The ring buffer and what has been drained from it.
pub struct EventLog {
    ring: RingBuf<MapData>,
    /// Txgs synced, as streamed.
    pub txgs: Vec<TxgEvent>,
    /// Requests slower than `--slower-than`, as streamed (at most [`MAX_SLOW_REQUESTS`]).
    pub slow_requests: Vec<SlowRequest>,
    /// Slow requests beyond [`MAX_SLOW_REQUESTS`], counted.
    pub slow_requests_dropped: u64,
}

impl EventLog {
    /// An empty log of the EVENTS ring buffer `ring`.
    pub fn new(ring: RingBuf<MapData>) -> EventLog {
        EventLog {
            ring,
            txgs: Vec::new(),
            slow_requests: Vec::new(),
            slow_requests_dropped: 0,
        }
    }

    /// Moves pending events from the ring buffer into the log.
    pub fn drain(&mut self) {
        // Two kinds of record, told apart by their sizes.
        while let Some(item) = self.ring.next() {
            if item.len() == std::mem::size_of::<SlowRequest>() {
                // SAFETY: a record of exactly a SlowRequest's size is one.
                let event =
                    unsafe { std::ptr::read_unaligned(item.as_ptr() as *const SlowRequest) };
                if self.slow_requests.len() < MAX_SLOW_REQUESTS {
                    self.slow_requests.push(event);
                } else {
                    self.slow_requests_dropped += 1;
                }
            } else if item.len() >= std::mem::size_of::<TxgEvent>() {
                // SAFETY: the eBPF side writes exactly one TxgEvent per record.
                let event = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const TxgEvent) };
                self.txgs.push(event);
            }
        }
    }

    /// Forgets the events drained: the live views keep no per-event state,
    /// so their memory stays flat however long they run.
    pub fn forget_drained(&mut self) {
        self.txgs.clear();
        self.slow_requests.clear();
    }
}

/// The txgs drained, placed in time from `started_ktime_ns` (the session's
/// start on the programs' clock) and named by pool, sorted.
pub fn txg_records(
    txgs: &[TxgEvent],
    names: &BTreeMap<u64, String>,
    started_ktime_ns: u64,
) -> Vec<TxgRecord> {
    let mut records: Vec<TxgRecord> = txgs
        .iter()
        .map(|e| TxgRecord {
            pool: pool_label(names, e.pool),
            txg: e.txg,
            start_offset_ns: e.start_ns.saturating_sub(started_ktime_ns),
            duration_ns: e.duration_ns,
        })
        .collect();
    records.sort_by_key(|t| (t.pool.clone(), t.txg));
    records
}
