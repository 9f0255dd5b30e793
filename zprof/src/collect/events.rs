//! The events the programs stream one by one through the EVENTS ring buffer
//! (each txg synced, each txg's life as the txgs kstat keeps it, each request
//! slower than `--slower-than`), drained into
//! the session as they come so the buffer does not fill; slow requests
//! beyond [`MAX_SLOW_REQUESTS`] are counted rather than kept.

use std::collections::BTreeMap;

use aya::maps::{MapData, RingBuf};
use zprof_common::{DIRTY_UNKNOWN, SlowRequest, SyncPhases, TxgEvent, TxgHistoryEvent, sync_phase};

use crate::{
    collect::pools::pool_label,
    recording::{ProbeStatus, SyncSplit, TxgLife, TxgRecord},
    zfs::{catalogue::SYNC_PHASE_FUNCTIONS, releases::ADDED_LATER},
};

// The drain tells the kinds of record apart by their sizes.
const _: () = assert!(
    size_of::<SlowRequest>() != size_of::<TxgEvent>()
        && size_of::<SlowRequest>() != size_of::<TxgHistoryEvent>()
        && size_of::<TxgEvent>() != size_of::<TxgHistoryEvent>()
);

/// Slow requests kept in a recording; more are counted, not kept.
pub const MAX_SLOW_REQUESTS: usize = 10_000;

/// The ring buffer and what has been drained from it.
pub struct EventLog {
    ring: RingBuf<MapData>,
    /// Txgs synced, as streamed.
    pub txgs: Vec<TxgEvent>,
    /// Their lives, as streamed when each one's history closed.
    pub txg_lives: Vec<TxgHistoryEvent>,
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
            txg_lives: Vec::new(),
            slow_requests: Vec::new(),
            slow_requests_dropped: 0,
        }
    }

    /// Moves pending events from the ring buffer into the log.
    pub fn drain(&mut self) {
        while let Some(item) = self.ring.next() {
            if item.len() == size_of::<TxgHistoryEvent>() {
                // SAFETY: a record of exactly this size is one.
                let event =
                    unsafe { std::ptr::read_unaligned(item.as_ptr() as *const TxgHistoryEvent) };
                self.txg_lives.push(event);
            } else if item.len() == std::mem::size_of::<SlowRequest>() {
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
        self.txg_lives.clear();
        self.slow_requests.clear();
    }
}

/// What the attached probes measure of each sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncMeasured {
    /// By phase (see [`measured_sync_phases`]).
    pub phases: [bool; sync_phase::COUNT],
    /// Whether the sync thread's waits for its own reads are timed
    /// (zio_wait attached).
    pub read_waits: bool,
}

impl SyncMeasured {
    /// What `probes` measure.
    pub fn of(probes: &[ProbeStatus]) -> SyncMeasured {
        SyncMeasured {
            phases: measured_sync_phases(probes),
            read_waits: probes
                .iter()
                .any(|p| p.function == "zio_wait" && p.attached),
        }
    }
}

/// Which phases of a sync the attached probes measure (see
/// [`SYNC_PHASE_FUNCTIONS`]): a phase is measured where one of its
/// functions is attached, or where the release has none of them.
fn measured_sync_phases(probes: &[ProbeStatus]) -> [bool; sync_phase::COUNT] {
    let mut attached = [false; sync_phase::COUNT];
    let mut known = [false; sync_phase::COUNT];
    let mut absent_by_release = [true; sync_phase::COUNT];
    for (role, phases) in SYNC_PHASE_FUNCTIONS {
        let status = probes
            .iter()
            .find(|p| p.role == *role || p.function == *role);
        for &phase in *phases {
            known[phase] |= status.is_some();
            let Some(status) = status else { continue };
            attached[phase] |= status.attached;
            let added_later = status
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with(ADDED_LATER));
            absent_by_release[phase] &= !status.attached && added_later;
        }
    }
    std::array::from_fn(|i| attached[i] || (known[i] && absent_by_release[i]))
}

/// A sync's phases as the recording keeps them: none where zprof did not
/// see the whole sync (a phase still open at its end, no pass seen).
fn sync_split(p: &SyncPhases, measured: &SyncMeasured) -> Option<SyncSplit> {
    if p.passes == 0 || p.open != sync_phase::NONE || p.nested != 0 {
        return None;
    }
    let phases_ns = (0..sync_phase::COUNT)
        .filter(|&i| measured.phases[i])
        .map(|i| (sync_phase::NAMES[i].to_owned(), p.ns[i]))
        .collect();
    Some(SyncSplit {
        phases_ns,
        passes: p.passes,
        reads: p.reads as u64,
        read_bytes: p.read_bytes,
        read_wait_ns: measured.read_waits.then_some(p.read_wait_ns),
        read_waits: measured.read_waits.then_some(p.read_waits as u64),
    })
}

/// The txgs drained, placed in time from `started_ktime_ns` (the session's
/// start on the programs' clock) and named by pool, sorted; their syncs
/// split into the `measured` phases.
pub fn txg_records(
    txgs: &[TxgEvent],
    lives: &[TxgHistoryEvent],
    names: &BTreeMap<u64, String>,
    started_ktime_ns: u64,
    measured: &SyncMeasured,
) -> Vec<TxgRecord> {
    let life_of: BTreeMap<(u64, u64), TxgLife> =
        lives.iter().map(|e| ((e.pool, e.txg), life(e))).collect();
    let mut records: Vec<TxgRecord> = txgs
        .iter()
        .map(|e| TxgRecord {
            pool: pool_label(names, e.pool),
            txg: e.txg,
            start_offset_ns: e.start_ns.saturating_sub(started_ktime_ns),
            duration_ns: e.duration_ns,
            life: life_of.get(&(e.pool, e.txg)).cloned().unwrap_or_default(),
            sync: sync_split(&e.phases, measured),
        })
        .collect();
    records.sort_by_key(|t| (t.pool.clone(), t.txg));
    records
}

/// A txg's states as the kstat times them, from the stamps zprof saw: each
/// state's time needs both of its ends (a stamp before zprof attached is 0).
/// The open and quiescing times are differences of ZFS's own stamps, the
/// wait and the sync of the programs' clock; a wait is never measured
/// across the two clocks.
///
/// The wait and the sync of a txg born before zprof attached are left out:
/// in one guest run (6.17, perf-event kprobes being attached) such a txg's
/// wait came out 5.2 s and its sync 5 ms short where the kstat had 210 us
/// and 27.4 ms, while every txg born later matched it within 0.2 ms. Its
/// dirty bytes and quiescing time are ZFS's own figures and stay.
fn life(e: &TxgHistoryEvent) -> TxgLife {
    let between = |from: u64, to: u64| (from != 0 && to >= from).then(|| to - from);
    let born_while_attached = e.birth != 0;
    TxgLife {
        open_ns: between(e.birth, e.opened_until),
        quiesce_ns: between(e.opened_until, e.quiesced),
        wait_ns: between(e.quiesced_seen_ns, e.sync_start_ns).filter(|_| born_while_attached),
        sync_ns: between(e.sync_start_ns, e.synced_ns).filter(|_| born_while_attached),
        dirty_bytes: known(e.dirty_bytes),
        read_bytes: known(e.io[0]),
        written_bytes: known(e.io[1]),
        reads: known(e.io[2]),
        writes: known(e.io[3]),
    }
}

/// A txg figure the programs read ([`DIRTY_UNKNOWN`] where they could not).
fn known(value: u64) -> Option<u64> {
    (value != DIRTY_UNKNOWN).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stamps of a txg born before zprof attached: its open time needs
    /// its birth, and its wait and sync are left out; born while attached,
    /// all of it is there. The dirty bytes are kept only when read.
    #[test]
    fn a_state_is_timed_only_with_both_of_its_stamps() {
        let event = TxgHistoryEvent {
            pool: 1,
            txg: 9,
            birth: 0,
            opened_until: 5_000,
            quiesced: 5_300,
            quiesced_seen_ns: 70_000,
            sync_start_ns: 70_400,
            synced_ns: 90_400,
            dirty_bytes: DIRTY_UNKNOWN,
            io: [DIRTY_UNKNOWN, 1 << 20, DIRTY_UNKNOWN, 12],
            txg_stat: 0,
        };
        assert_eq!(
            life(&event),
            TxgLife {
                open_ns: None,
                quiesce_ns: Some(300),
                wait_ns: None,
                sync_ns: None,
                dirty_bytes: None,
                written_bytes: Some(1 << 20),
                writes: Some(12),
                ..TxgLife::default()
            }
        );
        let born = TxgHistoryEvent {
            birth: 1_000,
            ..event
        };
        assert_eq!(
            life(&born),
            TxgLife {
                open_ns: Some(4_000),
                quiesce_ns: Some(300),
                wait_ns: Some(400),
                sync_ns: Some(20_000),
                dirty_bytes: None,
                written_bytes: Some(1 << 20),
                writes: Some(12),
                ..TxgLife::default()
            }
        );
        let records = txg_records(
            &[TxgEvent {
                pool: 1,
                txg: 9,
                start_ns: 70_400,
                duration_ns: 19_000,
                ..Default::default()
            }],
            &[TxgHistoryEvent {
                dirty_bytes: 4096,
                ..event
            }],
            &BTreeMap::from([(1, "tank".to_owned())]),
            400,
            &SyncMeasured {
                phases: [true; sync_phase::COUNT],
                read_waits: true,
            },
        );
        assert_eq!(records[0].life.dirty_bytes, Some(4096));
        assert_eq!(records[0].start_offset_ns, 70_000);
    }
}
