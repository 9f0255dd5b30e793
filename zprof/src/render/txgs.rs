//! `zprof report --txgs`: one row per txg, as ZFS's txgs kstat shows it
//! (/proc/spl/kstat/zfs/POOL/txgs: dirty bytes, and how long the txg stayed
//! open, quiescing, waiting and syncing) beside spa_sync's own time, for
//! every txg of the recording and every pool.

use crate::{
    recording::{Recording, TxgRecord},
    units::{format_bytes, format_ns},
};

/// The table: a row per txg, pools in name order, txgs in order.
pub fn render_table(rec: &Recording) -> String {
    if rec.txgs.is_empty() {
        return "no txg was synced while zprof recorded\n".to_owned();
    }
    let mut text = format!(
        "{:<16} {:>10} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "pool", "txg", "start", "dirty", "open", "quiesce", "wait", "sync", "spa_sync"
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
        text.push_str("dirty -: the offsets give no txg_stat_t.ndirty, or zfs_txg_history is 0 (the txgs kstat is off)\n");
    }
    text
}

fn row(txg: &TxgRecord) -> String {
    let time = |ns: Option<u64>| ns.map_or_else(|| "-".to_owned(), format_ns);
    let life = &txg.life;
    format!(
        "{:<16} {:>10} {:>8.3}s {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        txg.pool,
        txg.txg,
        txg.start_offset_ns as f64 / 1e9,
        life.dirty_bytes
            .map_or_else(|| "-".to_owned(), |b| format_bytes(b as f64)),
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
