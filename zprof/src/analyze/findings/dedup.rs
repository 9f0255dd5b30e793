//! Finding 8: what dedup costs: the dedup table's lookups in the write
//! pipeline and its writes at txg sync, as a share of the machine's CPU time.

use zprof_common::Stage;

use super::{Confidence, Finding, pct, stat};
use crate::{
    recording::{Recording, Summary},
    units::{format_count, format_ns},
};

/// Finding 8: what dedup costs. Every block written to a dataset with dedup
/// is looked up in the dedup table by the write pipeline's threads (the
/// table's blocks read from disk when the ARC does not hold them), and the
/// table's changes are written at each txg sync. The share is the lookups'
/// and the table syncs' time over the machine's CPU time, as compression's.
pub(super) fn dedup(rec: &Recording, wall_ns: f64, cpu_ns: f64, out: &mut Vec<Finding>) {
    let lookup = stat(rec, Stage::DdtLookup, None);
    if lookup.count == 0 {
        return;
    }
    let table_sync = stat(rec, Stage::DdtSync, None);
    let spa_sync = stat(rec, Stage::SpaSync, None);
    let share = ((lookup.total_ns + table_sync.total_ns) as f64 / cpu_ns).min(1.0);
    let sync_share = if spa_sync.total_ns > 0 {
        table_sync.total_ns as f64 / spa_sync.total_ns as f64
    } else {
        0.0
    };
    let per_second = lookup.count as f64 / (wall_ns / 1e9);
    let mut evidence = vec![
        format!(
            "{} dedup table lookups ({}/s: one per block written with dedup, and per block freed), p50 {}, p99 {}, max {}, {} in all",
            format_count(lookup.count as f64),
            format_count(per_second),
            format_ns(lookup.p50_ns),
            format_ns(lookup.p99_ns),
            format_ns(lookup.max_ns),
            format_ns(lookup.total_ns)
        ),
        format!(
            "dedup table sync: {} in {} txgs, {} of txg sync time (p99 {} a txg)",
            format_ns(table_sync.total_ns),
            table_sync.count,
            pct(sync_share),
            format_ns(table_sync.p99_ns)
        ),
    ];
    let (append, flush) = (
        stat(rec, Stage::DdtLogAppend, None),
        stat(rec, Stage::DdtLogFlush, None),
    );
    if let Some(line) = log_split(&append, &flush, &table_sync) {
        evidence.push(line);
    }
    let slow_lookups = lookup.p99_ns > 20 * lookup.p50_ns.max(1);
    out.push(Finding {
        kind: "dedup".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: format!("dedup costs {} of the machine's time ({} of txg sync)", pct(share), pct(sync_share)),
        share,
        confidence: if lookup.count >= 100 { Confidence::High } else { Confidence::Low },
        evidence,
        // Lookups that name no pool: with several pools the finding says
        // why it is over all of them (findings::dedup_unsplit).
        missing: vec![
            "the dedup ratio achieved is the pool's (zpool list's DEDUP column, zpool status -D): zprof does not read the table".into(),
        ],
        action: if slow_lookups {
            "Lookups vary widely: the dedup table does not fit in the ARC and its blocks are read from disk; \
             a larger ARC, a dedup or special vdev on flash, or dedup off where the ratio does not pay for it."
                .into()
        } else {
            "Check the pool's dedup ratio (zpool list): below about 2x, the table's memory and sync time cost more than the space saved.".into()
        },
        figures: vec![
            ("ddt_lookups".into(), lookup.count as f64),
            ("ddt_lookup_ns".into(), lookup.total_ns as f64),
            ("ddt_sync_ns".into(), table_sync.total_ns as f64),
            ("ddt_sync_share".into(), sync_share),
            ("ddt_log_append_ns".into(), append.total_ns as f64),
            ("ddt_log_flush_ns".into(), flush.total_ns as f64),
        ],
    });
}

/// Fast dedup's share of the table sync (2.3 and later): the txgs' changes
/// appended to the log against logged entries flushed into the table. None
/// for a table without a log (2.1, or a pool without the fast_dedup feature).
fn log_split(append: &Summary, flush: &Summary, table_sync: &Summary) -> Option<String> {
    if append.count + flush.count == 0 {
        return None;
    }
    let of_sync = |ns: u64| pct(ns as f64 / table_sync.total_ns.max(1) as f64);
    Some(format!(
        "fast dedup's log: {} entries appended in {} ({} of the table sync), {} flushed into the table in {} ({})",
        format_count(append.bytes as f64),
        format_ns(append.total_ns),
        of_sync(append.total_ns),
        format_count(flush.bytes as f64),
        format_ns(flush.total_ns),
        of_sync(flush.total_ns)
    ))
}
