//! The per-second timeline of a recording: the workload's operations, ZIL
//! commits, ARC outcomes and the reuse distances of its sync re-reads in
//! each second, as differences of the cumulative histogram counts read at
//! each tick; and per pool, its workload's operations, throttle waits and
//! background copies (device removal, RAIDZ reflow) in each second.

use std::collections::BTreeMap;

use zprof_common::{Hist, HistKey, Stage, arc_read_class, miss_reuse_class};

use crate::{
    recording::{PoolSecond, TimelinePoint},
    zfs::names,
};

/// The stages a timeline point counts (only their rows are read each tick).
pub const TIMELINE_STAGES: [u32; 7] = [
    Stage::WorkloadWrite as u32,
    Stage::WorkloadRead as u32,
    Stage::ZilCommit as u32,
    Stage::ArcRead as u32,
    Stage::ArcMissReuse as u32,
    Stage::TxWait as u32,
    Stage::VdevDisk as u32,
];

/// Per pool row key, the cumulative counts a [`PoolSecond`] is the
/// difference of.
pub type PoolTotals = BTreeMap<u64, PoolSecond>;

/// The cumulative per-pool counts of `rows` (rows that name no pool left out).
pub fn pool_totals(rows: &[(HistKey, Hist)]) -> PoolTotals {
    let mut totals = PoolTotals::new();
    for (key, hist) in rows.iter().filter(|(k, _)| k.pool != 0) {
        let pool = totals.entry(key.pool).or_default();
        match Stage::from_u32(key.stage) {
            Some(Stage::WorkloadWrite) => {
                pool.write_ops += hist.count;
                pool.write_bytes += hist.bytes;
            }
            Some(Stage::WorkloadRead) => pool.read_ops += hist.count,
            Some(Stage::TxWait) => {
                pool.tx_waits += hist.count;
                pool.tx_wait_ns += hist.total_ns;
            }
            Some(Stage::VdevDisk) => match names::io_class_priority(key.class) {
                names::PRIORITY_REMOVAL => {
                    pool.removal_ios += hist.count;
                    pool.removal_bytes += hist.bytes;
                }
                names::PRIORITY_SCRUB => pool.scrub_ios += hist.count,
                _ => {}
            },
            _ => {}
        }
    }
    totals
}

/// Second `second` of each pool: what `now` counts beyond `last`, named
/// by `names`; pools with nothing in the second left out.
pub fn pool_seconds_since(
    now: &PoolTotals,
    last: &PoolTotals,
    names: &BTreeMap<u64, String>,
    second: u32,
) -> Vec<PoolSecond> {
    now.iter()
        .map(|(key, totals)| {
            let before = last.get(key).cloned().unwrap_or_default();
            PoolSecond {
                pool: crate::collect::pools::pool_label(names, *key),
                second,
                write_ops: totals.write_ops.saturating_sub(before.write_ops),
                write_bytes: totals.write_bytes.saturating_sub(before.write_bytes),
                tx_waits: totals.tx_waits.saturating_sub(before.tx_waits),
                tx_wait_ns: totals.tx_wait_ns.saturating_sub(before.tx_wait_ns),
                read_ops: totals.read_ops.saturating_sub(before.read_ops),
                removal_ios: totals.removal_ios.saturating_sub(before.removal_ios),
                removal_bytes: totals.removal_bytes.saturating_sub(before.removal_bytes),
                scrub_ios: totals.scrub_ios.saturating_sub(before.scrub_ios),
            }
        })
        .filter(|p| p.write_ops + p.read_ops + p.tx_waits + p.removal_ios + p.scrub_ios > 0)
        .collect()
}

/// The cumulative counts of `rows` (the [`TIMELINE_STAGES`] rows so far).
pub fn totals(rows: &[(HistKey, Hist)]) -> TimelinePoint {
    let mut totals = TimelinePoint::default();
    let mut re_reads = BTreeMap::new();
    for (key, hist) in rows {
        match Stage::from_u32(key.stage) {
            Some(Stage::WorkloadWrite) => {
                totals.write_ops += hist.count;
                totals.write_bytes += hist.bytes;
            }
            Some(Stage::WorkloadRead) => {
                totals.read_ops += hist.count;
                totals.read_bytes += hist.bytes;
            }
            Some(Stage::ZilCommit) => totals.zil_commits += hist.count,
            Some(Stage::ArcRead) => match key.class & arc_read_class::PATH {
                arc_read_class::HIT => totals.arc_hits += hist.count,
                arc_read_class::L2 => totals.arc_l2_hits += hist.count,
                arc_read_class::DISK => totals.arc_disk_reads += hist.count,
                _ => {}
            },
            Some(Stage::ArcMissReuse) if key.class & miss_reuse_class::ASYNC == 0 => {
                totals.sync_disk_reads += hist.count;
                if key.class & miss_reuse_class::FIRST != 0 {
                    totals.sync_first_reads += hist.count;
                } else {
                    add_buckets(&mut re_reads, &hist.buckets);
                }
            }
            _ => {}
        }
    }
    totals.sync_reread_distances = re_reads.into_iter().map(|(b, n)| [b, n]).collect();
    totals
}

fn add_buckets(sum: &mut BTreeMap<u64, u64>, buckets: &[u64]) {
    for (index, count) in buckets.iter().enumerate().filter(|(_, n)| **n > 0) {
        *sum.entry(index as u64).or_default() += count;
    }
}

/// `now - before`, bucket by bucket, of two sparse `[bucket, count]` lists
/// (the empty buckets left out).
fn buckets_since(now: &[[u64; 2]], before: &[[u64; 2]]) -> Vec<[u64; 2]> {
    let before: BTreeMap<u64, u64> = before.iter().map(|[b, n]| (*b, *n)).collect();
    now.iter()
        .map(|[b, n]| [*b, n.saturating_sub(before.get(b).copied().unwrap_or(0))])
        .filter(|[_, n]| *n > 0)
        .collect()
}

/// Timeline point `second`: what `totals` counts beyond `last` (never
/// below zero).
pub fn point_since(totals: &TimelinePoint, last: &TimelinePoint, second: u32) -> TimelinePoint {
    TimelinePoint {
        second,
        write_ops: totals.write_ops.saturating_sub(last.write_ops),
        write_bytes: totals.write_bytes.saturating_sub(last.write_bytes),
        read_ops: totals.read_ops.saturating_sub(last.read_ops),
        read_bytes: totals.read_bytes.saturating_sub(last.read_bytes),
        zil_commits: totals.zil_commits.saturating_sub(last.zil_commits),
        arc_hits: totals.arc_hits.saturating_sub(last.arc_hits),
        arc_l2_hits: totals.arc_l2_hits.saturating_sub(last.arc_l2_hits),
        arc_disk_reads: totals.arc_disk_reads.saturating_sub(last.arc_disk_reads),
        sync_disk_reads: totals.sync_disk_reads.saturating_sub(last.sync_disk_reads),
        sync_first_reads: totals
            .sync_first_reads
            .saturating_sub(last.sync_first_reads),
        sync_reread_distances: buckets_since(
            &totals.sync_reread_distances,
            &last.sync_reread_distances,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reuse_row(class: u32, buckets: &[(usize, u64)]) -> (HistKey, Hist) {
        let mut hist = Hist::ZERO;
        for &(index, count) in buckets {
            hist.buckets[index] = count;
            hist.count += count;
        }
        let key = HistKey {
            stage: Stage::ArcMissReuse as u32,
            class,
            ..HistKey::default()
        };
        (key, hist)
    }

    #[test]
    fn a_second_counts_its_own_sync_re_reads_by_distance() {
        use miss_reuse_class as c;
        let before = totals(&[reuse_row(0, &[(150, 4), (200, 1)])]);
        let now = totals(&[
            reuse_row(0, &[(150, 6), (200, 1), (210, 3)]),
            reuse_row(c::FIRST, &[(0, 7)]),
            reuse_row(c::ASYNC, &[(150, 50)]),
        ]);
        let point = point_since(&now, &before, 2);
        assert_eq!(
            (point.sync_disk_reads, point.sync_first_reads),
            (10 + 7 - 5, 7)
        );
        assert_eq!(point.sync_reread_distances, vec![[150, 2], [210, 3]]);
    }
}
