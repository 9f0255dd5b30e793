//! The report's leaf I/O by top-level vdev and allocation class: how the log
//! device, the special vdev and each data vdev served their I/Os, which the
//! stage table sums per pool. Built from the vdev_total and vdev_disk rows
//! and the recording's leaf places (`vdevs`); shown when a pool has more
//! than one top-level vdev or any outside the normal class.

use std::collections::BTreeMap;

use serde::Serialize;
use zprof_common::Stage;

use crate::recording::{HistRecord, Recording, VdevRecord, stage_name, summarize};

/// One top-level vdev's I/Os of one class (sync write, async read...).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopVdevRow {
    /// Pool name.
    pub pool: String,
    /// Top-level vdev ("raidz-0").
    pub top_vdev: String,
    /// Allocation class (normal, log, special, dedup, cache).
    pub class: String,
    /// Its leaves with I/O.
    pub leaves: usize,
    /// The I/O class.
    pub io_class: String,
    /// Leaf I/Os per second.
    pub per_second: f64,
    /// Queue and disk time (io_delta): p50 and p99, ns.
    pub total_p50_ns: u64,
    /// p99 of the same.
    pub total_p99_ns: u64,
    /// Disk time alone (io_delay): p50 and p99, ns.
    pub disk_p50_ns: u64,
    /// p99 of the same.
    pub disk_p99_ns: u64,
}

/// The rows, pool by pool and top-level vdev by top-level vdev; empty when
/// every pool is one normal top-level vdev (the stage table says it all).
pub fn rows(recording: &Recording) -> Vec<TopVdevRow> {
    let places: BTreeMap<u64, &VdevRecord> = recording.vdevs.iter().map(|v| (v.guid, v)).collect();
    let mut tops: BTreeMap<&str, Vec<&VdevRecord>> = BTreeMap::new();
    for place in &recording.vdevs {
        tops.entry(place.pool.as_str()).or_default().push(place);
    }
    let worth_showing = tops.values().any(|leaves| {
        let distinct: std::collections::BTreeSet<&str> =
            leaves.iter().map(|l| l.top_vdev.as_str()).collect();
        distinct.len() > 1 || leaves.iter().any(|l| l.class != "normal")
    });
    if !worth_showing {
        return Vec::new();
    }
    // (pool, class rank, class, top vdev, I/O class number) -> the leaf rows of each stage.
    type Key<'a> = (&'a str, usize, &'a str, &'a str, u32);
    let mut groups: BTreeMap<Key, (String, Vec<&HistRecord>, Vec<&HistRecord>)> = BTreeMap::new();
    let (total, disk) = (stage_name(Stage::VdevTotal), stage_name(Stage::VdevDisk));
    for row in recording
        .histograms
        .iter()
        .filter(|h| h.stage == total || h.stage == disk)
    {
        let Some(place) = places.get(&row.vdev) else {
            continue;
        };
        let io_class = row.class & !zprof_common::VDEV_CACHE_DEVICE;
        let key = (
            place.pool.as_str(),
            class_rank(&place.class),
            place.class.as_str(),
            place.top_vdev.as_str(),
            io_class,
        );
        let entry = groups.entry(key).or_insert_with(|| {
            (
                crate::zfs::names::io_class(io_class),
                Vec::new(),
                Vec::new(),
            )
        });
        if row.stage == total {
            entry.1.push(row)
        } else {
            entry.2.push(row)
        }
    }
    let seconds = recording.duration_s.max(1e-9);
    groups
        .into_iter()
        .filter(|(_, (_, totals, _))| totals.iter().any(|h| h.count > 0))
        .map(|((pool, _, class, top, _), (io_class, totals, disks))| {
            let (t, d) = (
                summarize(totals.iter().copied()),
                summarize(disks.iter().copied()),
            );
            let leaves: std::collections::BTreeSet<u64> = totals.iter().map(|h| h.vdev).collect();
            TopVdevRow {
                pool: pool.to_owned(),
                top_vdev: top.to_owned(),
                class: class.to_owned(),
                leaves: leaves.len(),
                io_class,
                per_second: t.count as f64 / seconds,
                total_p50_ns: t.p50_ns,
                total_p99_ns: t.p99_ns,
                disk_p50_ns: d.p50_ns,
                disk_p99_ns: d.p99_ns,
            }
        })
        .collect()
}

/// Classes in the order `zpool status` lists them.
fn class_rank(class: &str) -> usize {
    ["normal", "special", "dedup", "log", "cache"]
        .iter()
        .position(|c| *c == class)
        .unwrap_or(5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(guid: u64, top: &str, class: &str) -> VdevRecord {
        VdevRecord {
            pool: "p".into(),
            guid,
            top_vdev: top.into(),
            top_guid: 0,
            class: class.into(),
        }
    }

    fn leaf_row(stage: Stage, vdev: u64, class: u32, count: u64) -> HistRecord {
        let index = zprof_common::hist_bucket(100_000) as u64;
        HistRecord {
            stage: stage_name(stage).into(),
            class,
            class_name: crate::zfs::names::io_class(class),
            pool: "p".into(),
            vdev,
            count,
            total_ns: 100_000 * count,
            bytes: 0,
            bytes_out: 0,
            max_ns: 100_000,
            buckets: vec![[index, count]],
        }
    }

    #[test]
    fn rows_split_the_log_device_from_the_data_vdev_and_skip_a_plain_pool() {
        const SYNC_WRITE: u32 = 2 << 8 | 1;
        let mut rec = Recording::for_tests(vec![
            leaf_row(Stage::VdevTotal, 1, SYNC_WRITE, 10),
            leaf_row(Stage::VdevTotal, 2, SYNC_WRITE, 30),
            leaf_row(Stage::VdevDisk, 2, SYNC_WRITE, 30),
            leaf_row(Stage::VdevTotal, 3, SYNC_WRITE, 70),
        ]);
        rec.vdevs = vec![
            place(1, "mirror-0", "normal"),
            place(2, "mirror-0", "normal"),
            place(3, "file-1", "log"),
        ];
        let rows = rows(&rec);
        let summary: Vec<(&str, &str, usize, f64)> = rows
            .iter()
            .map(|r| {
                (
                    r.top_vdev.as_str(),
                    r.class.as_str(),
                    r.leaves,
                    r.per_second,
                )
            })
            .collect();
        let seconds = rec.duration_s;
        assert_eq!(
            summary,
            [
                ("mirror-0", "normal", 2, 40.0 / seconds),
                ("file-1", "log", 1, 70.0 / seconds)
            ]
        );
        rec.vdevs = vec![
            place(1, "mirror-0", "normal"),
            place(2, "mirror-0", "normal"),
        ];
        assert!(
            super::rows(&rec).is_empty(),
            "one normal top-level vdev: nothing the stage table does not say"
        );
    }
}
