//! What the programs could not record, counted so nothing is lost without a
//! word: the COUNTERS array (full maps, failed reads, unmatched returns...),
//! the returns without an entry per stage, and the calls still in flight at
//! the end.

use std::collections::BTreeMap;

use anyhow::anyhow;
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, PerCpuArray},
};
use zprof_common::{InFlight, InFlightKey, Stage, counter};

use crate::recording::{Losses, stage_name};

/// The COUNTERS array, summed over CPUs, by `zprof_common::counter` index.
pub type Counters = [u64; counter::COUNT as usize];

/// Reads the COUNTERS array, summed over CPUs.
pub fn counters(ebpf: &Ebpf) -> anyhow::Result<Counters> {
    let map: PerCpuArray<_, u64> = PerCpuArray::try_from(
        ebpf.map("COUNTERS")
            .ok_or_else(|| anyhow!("COUNTERS missing"))?,
    )?;
    let mut out = [0u64; counter::COUNT as usize];
    for (index, slot) in out.iter_mut().enumerate() {
        *slot = map.get(&(index as u32), 0)?.iter().sum();
    }
    Ok(out)
}

/// Returns without a matching entry, per stage (stages with none left out).
pub fn unmatched_by_stage(ebpf: &Ebpf) -> anyhow::Result<BTreeMap<String, u64>> {
    let map: PerCpuArray<_, u64> = PerCpuArray::try_from(
        ebpf.map("UNMATCHED")
            .ok_or_else(|| anyhow!("UNMATCHED missing"))?,
    )?;
    let mut out = BTreeMap::new();
    for stage in Stage::ALL {
        let n: u64 = map.get(&(stage as u32), 0)?.iter().sum();
        if n > 0 {
            out.insert(stage_name(stage).to_owned(), n);
        }
    }
    Ok(out)
}

/// Timed calls entered and not yet returned.
pub fn in_flight(ebpf: &Ebpf) -> anyhow::Result<u64> {
    let map: BpfHashMap<_, InFlightKey, InFlight> = BpfHashMap::try_from(
        ebpf.map("INFLIGHT")
            .ok_or_else(|| anyhow!("INFLIGHT missing"))?,
    )?;
    Ok(map.keys().filter(|k| k.is_ok()).count() as u64)
}

/// What was in flight at the end of a recording.
#[derive(Debug, Clone, Copy)]
pub struct InFlightAtEnd {
    /// Timed calls (INFLIGHT).
    pub calls: u64,
    /// Requests (REQUEST_STARTS).
    pub requests: u64,
}

/// A recording's losses, from the counters and what the other maps hold.
pub fn losses(
    c: &Counters,
    in_flight_at_end: InFlightAtEnd,
    return_without_entry_by_stage: BTreeMap<String, u64>,
) -> Losses {
    Losses {
        request_folded: c[counter::REQUEST_FOLDED as usize],
        request_start_full: c[counter::REQUEST_START_FULL as usize],
        request_end_without_start: c[counter::REQUEST_END_WITHOUT_START as usize],
        request_end_missed: c[counter::REQUEST_END_MISSED as usize],
        requests_in_flight_at_end: in_flight_at_end.requests,
        name_map_full: c[counter::NAME_MAP_FULL as usize],
        commit_slots_full: c[counter::COMMIT_SLOTS_FULL as usize],
        entry_map_full: c[counter::ENTRY_MAP_FULL as usize],
        return_without_entry: c[counter::RETURN_WITHOUT_ENTRY as usize],
        hist_map_full: c[counter::HIST_MAP_FULL as usize],
        ringbuf_full: c[counter::RINGBUF_FULL as usize],
        read_failed: c[counter::READ_FAILED as usize],
        nested_entry: c[counter::NESTED_ENTRY as usize],
        in_flight_at_end: in_flight_at_end.calls,
        tracked_full: c[counter::TRACKED_FULL as usize],
        return_without_entry_by_stage,
    }
}

/// The loss counters `serve` exports, by the names of [`Losses`]' fields.
const LOSS_COUNTERS: [(u32, &str); 14] = [
    (counter::ENTRY_MAP_FULL, "entry_map_full"),
    (counter::RETURN_WITHOUT_ENTRY, "return_without_entry"),
    (counter::HIST_MAP_FULL, "hist_map_full"),
    (counter::RINGBUF_FULL, "ringbuf_full"),
    (counter::READ_FAILED, "read_failed"),
    (counter::NESTED_ENTRY, "nested_entry"),
    (counter::TRACKED_FULL, "tracked_full"),
    (counter::WRITER_SLOT_TAKEN, "writer_slot_taken"),
    (counter::REQUEST_FOLDED, "request_folded"),
    (counter::REQUEST_START_FULL, "request_start_full"),
    (counter::NAME_MAP_FULL, "name_map_full"),
    (
        counter::REQUEST_END_WITHOUT_START,
        "request_end_without_start",
    ),
    (counter::COMMIT_SLOTS_FULL, "commit_slots_full"),
    (counter::REQUEST_END_MISSED, "request_end_missed"),
];

/// The loss counters `serve` exports, named.
pub fn live_losses(c: &Counters) -> Vec<(String, u64)> {
    LOSS_COUNTERS
        .iter()
        .map(|(index, name)| ((*name).to_owned(), c[*index as usize]))
        .collect()
}
