//! Where rows sit: pool names by spa_t address, the place of each leaf vdev
//! in its pool's tree, and forgetting the pools exported or destroyed long
//! ago (so that a long-running exporter does not keep every pool a host
//! ever had).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use anyhow::anyhow;
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, PerCpuHashMap},
};
use zprof_common::{GonePool, Hist, HistKey, LeafPlace, PoolName, pool_key};

use crate::{
    collect::clock::monotonic_ns,
    recording::{HistRecord, VdevRecord, requests::c_string},
    zfs::names,
};

/// Pool names by row key (`zprof_common::pool_key`: the spa_t address and
/// the pools removed there before): the pools that are there, and those
/// exported or destroyed since (their rows stay until forgotten), each
/// under a key of its own even where they shared an address.
pub fn pool_names(ebpf: &Ebpf) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    let gone: BpfHashMap<_, u64, GonePool> = BpfHashMap::try_from(
        ebpf.map("GONE_POOLS")
            .ok_or_else(|| anyhow!("GONE_POOLS missing"))?,
    )?;
    for item in gone.iter() {
        let (spa, pool) = item?;
        out.insert(spa, c_string(&pool.name));
    }
    let removals: BpfHashMap<_, u64, u64> = BpfHashMap::try_from(
        ebpf.map("POOL_REMOVALS")
            .ok_or_else(|| anyhow!("POOL_REMOVALS missing"))?,
    )?;
    let live: BpfHashMap<_, u64, PoolName> = BpfHashMap::try_from(
        ebpf.map("POOL_NAMES")
            .ok_or_else(|| anyhow!("POOL_NAMES missing"))?,
    )?;
    for item in live.iter() {
        let (spa, name) = item?;
        let removed_before = removals.get(&spa, 0).unwrap_or(0);
        out.insert(pool_key(spa, removed_before), c_string(&name.name));
    }
    Ok(out)
}

/// The name of a pool by its row key ("" where the stage cannot tell).
pub fn pool_label(names: &BTreeMap<u64, String>, spa: u64) -> String {
    match spa {
        0 => String::new(),
        spa => names
            .get(&spa)
            .cloned()
            .unwrap_or_else(|| format!("spa@{spa:#x}")),
    }
}

/// Drops the rows of pools exported or destroyed at least `after` ago
/// (their histograms and leaf places): their series end in Prometheus.
/// Returns how many pools were forgotten.
pub fn forget_gone_pools(ebpf: &mut Ebpf, after: Duration) -> anyhow::Result<u64> {
    let due = take_pools_gone_since(ebpf, after)?;
    if due.is_empty() {
        return Ok(0);
    }
    let mut hist: PerCpuHashMap<_, HistKey, Hist> = PerCpuHashMap::try_from(
        ebpf.map_mut("HIST")
            .ok_or_else(|| anyhow!("HIST missing"))?,
    )?;
    let rows: Vec<HistKey> = hist
        .keys()
        .filter_map(Result::ok)
        .filter(|k| due.contains(&k.pool))
        .collect();
    for key in &rows {
        let _ = hist.remove(key);
    }
    let mut places: BpfHashMap<_, u64, LeafPlace> = BpfHashMap::try_from(
        ebpf.map_mut("LEAF_PLACES")
            .ok_or_else(|| anyhow!("LEAF_PLACES missing"))?,
    )?;
    let leaves: Vec<u64> = places
        .iter()
        .filter_map(Result::ok)
        .filter(|(_, p)| due.contains(&p.pool))
        .map(|(guid, _)| guid)
        .collect();
    for guid in &leaves {
        let _ = places.remove(guid);
    }
    Ok(due.len() as u64)
}

/// Removes from GONE_POOLS the pools gone at least `after` ago; returns
/// their spa_t addresses.
fn take_pools_gone_since(ebpf: &mut Ebpf, after: Duration) -> anyhow::Result<Vec<u64>> {
    let now = monotonic_ns();
    let mut gone: BpfHashMap<_, u64, GonePool> = BpfHashMap::try_from(
        ebpf.map_mut("GONE_POOLS")
            .ok_or_else(|| anyhow!("GONE_POOLS missing"))?,
    )?;
    let due: Vec<u64> = gone
        .iter()
        .filter_map(Result::ok)
        .filter(|(_, p)| now.saturating_sub(p.removed_ns) >= after.as_nanos() as u64)
        .map(|(spa, _)| spa)
        .collect();
    for spa in &due {
        let _ = gone.remove(spa);
    }
    Ok(due)
}

/// Where each leaf with a vdev row sits (top-level vdev, allocation
/// class), from what the probes read of ZFS's vdev tree; a leaf whose
/// rows show it to be a cache device is in class "cache".
pub fn vdev_places(
    ebpf: &Ebpf,
    names: &BTreeMap<u64, String>,
    histograms: &[HistRecord],
) -> anyhow::Result<Vec<VdevRecord>> {
    let Some(map) = ebpf.map("LEAF_PLACES") else {
        return Ok(Vec::new());
    };
    let places: BpfHashMap<_, u64, LeafPlace> = BpfHashMap::try_from(map)?;
    let with_rows: BTreeSet<u64> = histograms
        .iter()
        .map(|h| h.vdev)
        .filter(|v| *v != 0)
        .collect();
    let caches: BTreeSet<u64> = histograms
        .iter()
        .filter(|h| h.vdev != 0 && h.class & zprof_common::VDEV_CACHE_DEVICE != 0)
        .map(|h| h.vdev)
        .collect();
    let mut records: Vec<VdevRecord> = places
        .iter()
        .filter_map(Result::ok)
        .filter(|(guid, _)| with_rows.contains(guid))
        .map(|(guid, place)| VdevRecord {
            pool: pool_label(names, place.pool),
            guid,
            top_vdev: names::top_vdev(&c_string(&place.top_type), place.top_id),
            top_guid: place.top_guid,
            class: names::allocation_class(
                place.alloc_bias,
                place.is_log != 0,
                caches.contains(&guid),
            ),
        })
        .collect();
    records.sort_by(|a, b| (&a.pool, &a.top_vdev, a.guid).cmp(&(&b.pool, &b.top_vdev, b.guid)));
    Ok(records)
}
