//! The per-second timeline of a recording: the workload's operations, ZIL
//! commits and ARC outcomes of each second, as differences of the
//! cumulative histogram counts read at each tick.

use zprof_common::{Hist, HistKey, Stage, arc_read_class, miss_reuse_class};

use crate::recording::TimelinePoint;

/// The stages a timeline point counts (only their rows are read each tick).
pub const TIMELINE_STAGES: [u32; 5] = [
    Stage::WorkloadWrite as u32,
    Stage::WorkloadRead as u32,
    Stage::ZilCommit as u32,
    Stage::ArcRead as u32,
    Stage::ArcMissReuse as u32,
];

/// The cumulative counts of `rows` (the [`TIMELINE_STAGES`] rows so far).
pub fn totals(rows: &[(HistKey, Hist)]) -> TimelinePoint {
    let mut totals = TimelinePoint::default();
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
                }
            }
            _ => {}
        }
    }
    totals
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
    }
}
