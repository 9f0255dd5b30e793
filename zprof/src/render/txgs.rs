//! `zprof report --txgs`: one row per txg, as ZFS's txgs kstat shows it
//! (/proc/spl/kstat/zfs/POOL/txgs: dirty bytes, and how long the txg stayed
//! open, quiescing, waiting and syncing) beside spa_sync's own time, for
//! every txg of the recording and every pool; then where each sync's time
//! went, phase by phase.

use zprof_common::sync_phase;

use crate::{
    recording::{Recording, SyncSplit, TxgRecord},
    units::{format_bytes, format_ns},
};

/// The table: a row per txg, pools in name order, txgs in order.
pub fn render_table(rec: &Recording) -> String {
    if rec.txgs.is_empty() {
        return "no txg was synced while zprof recorded\n".to_owned();
    }
    let mut text = format!(
        "{:<16} {:>10} {:>9} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "pool",
        "txg",
        "start",
        "dirty",
        "written",
        "read",
        "open",
        "quiesce",
        "wait",
        "sync",
        "spa_sync"
    );
    for txg in &rec.txgs {
        text.push_str(&row(txg));
    }
    let unseen = |l: &crate::recording::TxgLife| {
        [l.open_ns, l.quiesce_ns, l.wait_ns, l.sync_ns].contains(&None)
    };
    if rec.txgs.iter().any(|t| unseen(&t.life)) {
        text.push_str(
            "-: not seen (a txg born before zprof attached has no open, wait or sync time; a recording made before zprof read txg histories has none)\n",
        );
    }
    if rec
        .txgs
        .iter()
        .any(|t| t.life.sync_ns.is_some() && t.life.dirty_bytes.is_none())
    {
        text.push_str("dirty, written, read -: the offsets give no txg_stat_t members, or zfs_txg_history is 0 (the txgs kstat is off)\n");
    }
    text + &phases_table(rec)
}

/// Column headings of the phases, by `sync_phase` index.
const PHASE_HEADINGS: [&str; sync_phase::COUNT] = [
    "write", "passes2+", "frees", "dedup", "clones", "scan", "removal", "metaslab", "labels",
    "done",
];

/// Where each sync's time went: a row per txg whose whole sync zprof saw.
fn phases_table(rec: &Recording) -> String {
    let split: Vec<(&TxgRecord, &SyncSplit)> = rec
        .txgs
        .iter()
        .filter_map(|t| t.sync.as_ref().map(|s| (t, s)))
        .collect();
    if split.is_empty() {
        return "\nsync phases: none (no sync was seen whole, or the recording predates them)\n"
            .to_owned();
    }
    let mut text = format!(
        "\nsync phases (each spa_sync's time; other: spa_sync's own work and waits between phases)\n{:<16} {:>10} {:>6}",
        "pool", "txg", "passes"
    );
    for heading in PHASE_HEADINGS.iter().chain(&["other", "spa_sync"]) {
        text.push_str(&format!(" {heading:>9}"));
    }
    text.push_str(&format!(" {:>12} {:>9}\n", "sync reads", "waited"));
    for (txg, sync) in &split {
        text.push_str(&phase_row(txg, sync));
    }
    if split
        .iter()
        .any(|(_, s)| s.phases_ns.len() < sync_phase::COUNT)
    {
        text.push_str(
            "-: not measured on this build (none of the phase's functions could be attached)\n",
        );
    }
    if split.iter().any(|(_, s)| s.read_wait_ns.is_none()) {
        text.push_str(
            "waited: the sync thread's time in zio_wait for its own reads (-: zio_wait not probed; uprobes time it with --full-timing)\n",
        );
    }
    text
}

/// A phase's time; 0 plainly (a phase the sync never entered).
fn phase_time(ns: u64) -> String {
    if ns == 0 {
        "0".to_owned()
    } else {
        format_ns(ns)
    }
}

fn phase_row(txg: &TxgRecord, sync: &SyncSplit) -> String {
    let mut row = format!("{:<16} {:>10} {:>6}", txg.pool, txg.txg, sync.passes);
    for name in sync_phase::NAMES {
        let cell = sync
            .phases_ns
            .get(name)
            .map_or_else(|| "-".to_owned(), |ns| phase_time(*ns));
        row.push_str(&format!(" {cell:>9}"));
    }
    let other = txg.duration_ns.saturating_sub(sync.phases_total_ns());
    row.push_str(&format!(
        " {:>9} {:>9}",
        format_ns(other),
        format_ns(txg.duration_ns)
    ));
    let reads = format!("{} {}", sync.reads, format_bytes(sync.read_bytes as f64));
    let waited = sync.read_wait_ns.map_or_else(|| "-".to_owned(), phase_time);
    row.push_str(&format!(" {reads:>12} {waited:>9}\n"));
    row
}

fn row(txg: &TxgRecord) -> String {
    let time = |ns: Option<u64>| ns.map_or_else(|| "-".to_owned(), format_ns);
    let life = &txg.life;
    let bytes = |b: Option<u64>| b.map_or_else(|| "-".to_owned(), |b| format_bytes(b as f64));
    format!(
        "{:<16} {:>10} {:>8.3}s {:>11} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        txg.pool,
        txg.txg,
        txg.start_offset_ns as f64 / 1e9,
        bytes(life.dirty_bytes),
        bytes(life.written_bytes),
        bytes(life.read_bytes),
        time(life.open_ns),
        time(life.quiesce_ns),
        time(life.wait_ns),
        time(life.sync_ns),
        format_ns(txg.duration_ns),
    )
}

/// The rows as JSON (the recording's own txg records).
pub fn render_json(rec: &Recording) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&rec.txgs)? + "\n")
}
