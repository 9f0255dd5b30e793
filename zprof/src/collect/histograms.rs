//! The per-stage latency histograms the programs bucket in the kernel
//! (HIST, one row per stage, class, pool and vdev, per CPU), summed over
//! CPUs and named as recordings show them.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::anyhow;
use aya::{Ebpf, maps::PerCpuHashMap};
use zprof_common::{HIST_BUCKETS, Hist, HistKey, Stage, VDEV_CACHE_DEVICE};

use crate::{
    collect::pools::pool_label,
    recording::{HistRecord, classes::class_name, sparse_buckets, stage_name},
};

/// Reads the histograms whose key `wanted` accepts, summed over CPUs. Keys are
/// listed first so only the wanted values (2 KiB per CPU each) are copied.
pub fn read_histograms(
    ebpf: &Ebpf,
    wanted: impl Fn(&HistKey) -> bool,
) -> anyhow::Result<Vec<(HistKey, Hist)>> {
    let map: PerCpuHashMap<_, HistKey, Hist> =
        PerCpuHashMap::try_from(ebpf.map("HIST").ok_or_else(|| anyhow!("HIST missing"))?)?;
    let keys: Vec<HistKey> = map.keys().collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for key in keys.into_iter().filter(|k| wanted(k)) {
        let per_cpu = map.get(&key, 0)?;
        let mut sum = Hist::ZERO;
        for h in per_cpu.iter() {
            sum.add(h);
        }
        out.push((key, sum));
    }
    Ok(out)
}

/// Every histogram row so far, with pool names, sorted.
pub fn histogram_records(
    ebpf: &Ebpf,
    names: &BTreeMap<u64, String>,
) -> anyhow::Result<Vec<HistRecord>> {
    let mut histograms: Vec<HistRecord> = cache_device_rows(read_histograms(ebpf, |_| true)?)
        .into_iter()
        .filter_map(|(key, hist)| hist_record(&key, &hist, names))
        .collect();
    histograms.sort_by(|a, b| {
        (&a.stage, a.class, &a.pool, a.vdev).cmp(&(&b.stage, b.class, &b.pool, b.vdev))
    });
    Ok(histograms)
}

/// A row as recordings show it (`None` for a stage this zprof does not know).
fn hist_record(key: &HistKey, hist: &Hist, names: &BTreeMap<u64, String>) -> Option<HistRecord> {
    let stage = Stage::from_u32(key.stage)?;
    Some(HistRecord {
        stage: stage_name(stage).to_owned(),
        class: key.class,
        class_name: class_name(stage, key.class),
        pool: pool_label(names, key.pool),
        vdev: key.vdev,
        count: hist.count,
        total_ns: hist.total_ns,
        bytes: hist.bytes,
        bytes_out: hist.bytes_out,
        max_ns: hist.max_ns,
        buckets: sparse_buckets(&hist.buckets[..HIST_BUCKETS]),
    })
}

/// Every vdev row of a leaf that some row shows to be a cache device gets the
/// cache-device class too (its label I/O at pool creation came before its
/// first L2ARC read or feed write marked it), rows that now share a key merged.
fn cache_device_rows(rows: Vec<(HistKey, Hist)>) -> Vec<(HistKey, Hist)> {
    let vdev_stage = |k: &HistKey| {
        [Stage::VdevQueue, Stage::VdevDisk, Stage::VdevTotal]
            .iter()
            .any(|s| *s as u32 == k.stage)
    };
    let caches: HashSet<(u64, u64)> = rows
        .iter()
        .filter(|(k, _)| vdev_stage(k) && k.class & VDEV_CACHE_DEVICE != 0)
        .map(|(k, _)| (k.pool, k.vdev))
        .collect();
    if caches.is_empty() {
        return rows;
    }
    let mut merged: HashMap<HistKey, Hist> = HashMap::new();
    for (mut key, hist) in rows {
        if vdev_stage(&key) && caches.contains(&(key.pool, key.vdev)) {
            key.class |= VDEV_CACHE_DEVICE;
        }
        merged.entry(key).or_insert(Hist::ZERO).add(&hist);
    }
    merged.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::classes::COUNT_ONLY_CLASS;

    #[test]
    fn a_cache_device_label_row_joins_its_cache_device_row() {
        let key = |stage: Stage, class: u32, vdev: u64| HistKey {
            stage: stage as u32,
            class,
            pool: 7,
            vdev,
        };
        let hist = |count: u64| Hist {
            count,
            ..Hist::ZERO
        };
        let sync_read = 0x100;
        let rows = vec![
            (key(Stage::VdevDisk, sync_read, 1), hist(18)),
            (
                key(Stage::VdevDisk, sync_read | VDEV_CACHE_DEVICE, 1),
                hist(5297),
            ),
            (key(Stage::VdevDisk, sync_read, 2), hist(10990)),
            (key(Stage::ArcRead, 0, 1), hist(3)),
        ];
        let mut out = cache_device_rows(rows);
        out.sort_by_key(|(k, _)| (k.stage, k.vdev, k.class));
        let counts: Vec<(u32, u64, u32, u64)> = out
            .iter()
            .map(|(k, h)| (k.stage, k.vdev, k.class, h.count))
            .collect();
        assert_eq!(
            counts,
            vec![
                (
                    Stage::VdevDisk as u32,
                    1,
                    sync_read | VDEV_CACHE_DEVICE,
                    5315
                ),
                (Stage::VdevDisk as u32, 2, sync_read, 10990),
                (Stage::ArcRead as u32, 1, 0, 3),
            ]
        );
        assert_eq!(
            class_name(Stage::VdevDisk, sync_read | VDEV_CACHE_DEVICE),
            "sync read, cache device"
        );
        use zprof_common::arc_read_class as c;
        assert_eq!(
            class_name(Stage::ArcRead, c::HIT | c::HELD | COUNT_ONLY_CLASS),
            "held hit count only"
        );
        assert_eq!(
            class_name(Stage::ArcRead, c::DISK | c::PREFETCH | c::WAITED),
            "prefetch disk waited"
        );
    }
}
