//! Checks of what OpenZFS 2.3 added (the guest's `features` run) against
//! fio's own counts and the pool's kstats:
//!
//! - Direct I/O: whole-record O_DIRECT writes on a dataset with
//!   direct=always are rows that asked for it ("direct") and took ZFS's
//!   direct path ("direct-path"), as many as fio wrote; O_DIRECT writes
//!   shorter than a record asked for it and did not take it (ZFS sends them
//!   through the ARC). Whole-record O_DIRECT reads took the path, each block
//!   was read from the disks, and the ARC served (or cached) almost none
//!   (the dataset caches metadata only, so no block the layout wrote is
//!   still cached: ZFS would copy such a block instead of reading it).
//! - Fast dedup: zprof's ddt_lookup calls equal the pool's ddt_stats count
//!   of lookups over the same window; each block fio wrote (unique data) is
//!   one entry appended to the dedup log; entries appended less entries
//!   flushed equal the growth of the log's entries in the kstats.
//!
//! - Commits that fell back to a txg sync: fsyncs while snapshots suspend the
//!   ZIL of a version-26 pool; zprof's txg waits inside zil_commit are at
//!   least the ZIL's kstats of fallbacks (suspended, stalled, failed) over
//!   the same window, and there are some. The rest are commits that created
//!   the log chain anew (zil_create's waits), which no kstat counts.
//! - RAIDZ expansion: a raidz1 of three files expanded by a fourth while fio
//!   reads; the reflow's leaf reads (removal priority) read each byte the
//!   pool had allocated before the attach once, plus at most the gaps that
//!   aggregation bridges (zfs_vdev_read_gap_limit, 32 KiB per read); it
//!   wrote, and explain names the expansion on pool rx.
//!
//! On a release without them (2.1) the script says so in `absent`, and the
//! probe rows must name the release that brought them.

use std::path::Path;

use anyhow::{anyhow, ensure};
use serde_json::Value;

use super::results::{FIO_ALLOWANCE, kstat_values, read_json};

/// The features run's checks, or why the release has nothing to check
/// (`probes`: `zprof probes --format json` of the same guest).
pub fn check_features(dir: &Path, probes: &Value) -> anyhow::Result<String> {
    if let Ok(absent) = std::fs::read_to_string(dir.join("absent")) {
        return check_absent(absent.trim(), probes);
    }
    let direct = check_direct_io(dir)?;
    let dedup = check_fast_dedup(dir)?;
    let fallback = check_fallback(dir)?;
    let expansion = check_expansion(dir)?;
    Ok(format!("{direct}; {dedup}; {fallback}; {expansion}"))
}

/// Before 2.3 the Direct I/O and dedup-log points say which release brought them.
fn check_absent(absent: &str, probes: &Value) -> anyhow::Result<String> {
    for function in ["dmu_write_uio_direct", "ddt_log_begin"] {
        let reason = probes["probes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["role"] == function)
            .and_then(|p| p["reason"].as_str())
            .ok_or_else(|| anyhow!("probes has no reason for {function}"))?;
        ensure!(
            reason.starts_with("not in OpenZFS ") && reason.contains("came in 2.3"),
            "{function}: {reason:?} does not name the release that brought it"
        );
    }
    Ok(format!("{absent}; the probe rows say so"))
}

/// fio's count of one job's direction (`write`, `read`).
fn fio_count(fio: &Value, job: &str, direction: &str) -> anyhow::Result<u64> {
    Ok(super::check_requests::fio_figures(fio, job, direction)?.count)
}

fn has_flag(row: &Value, flag: &str) -> bool {
    row["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == flag))
}

/// The file request rows of `dataset` and `op`: (count with the direct path,
/// count without, count that asked for O_DIRECT).
fn direct_rows(rec: &Value, dataset: &str, op: &str) -> (u64, u64, u64) {
    let mut out = (0, 0, 0);
    for row in rec["requests"].as_array().into_iter().flatten() {
        if row["layer"] != "file" || row["dataset"] != dataset || row["op"] != op {
            continue;
        }
        let count = row["count"].as_u64().unwrap_or(0);
        if has_flag(row, "direct-path") {
            out.0 += count;
        } else {
            out.1 += count;
        }
        if has_flag(row, "direct") {
            out.2 += count;
        }
    }
    out
}

/// Sum of `field` over a stage's histograms of `pool`.
fn stage_sum(rec: &Value, stage: &str, pool: Option<&str>, field: &str) -> u64 {
    rec["histograms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h["stage"] == stage && pool.is_none_or(|p| h["pool"] == p))
        .filter_map(|h| h[field].as_u64())
        .sum()
}

fn close(ours: u64, fio: u64) -> bool {
    ours.abs_diff(fio) <= FIO_ALLOWANCE
}

fn check_direct_io(dir: &Path) -> anyhow::Result<String> {
    let (rec, fio) = (
        read_json(&dir.join("dio.json"))?,
        read_json(&dir.join("fio-dio.json"))?,
    );
    let writes = fio_count(&fio, "dio-write", "write")?;
    let (taken, not_taken, asked) = direct_rows(&rec, "ft/dio", "write");
    ensure!(
        close(taken, writes) && not_taken == 0 && asked == taken,
        "ft/dio (direct=always, 16k records): {taken} writes took the direct path, {not_taken} did not, {asked} asked, fio wrote {writes} with O_DIRECT"
    );
    let short = fio_count(&fio, "dio-short", "write")?;
    let (short_taken, short_not, short_asked) = direct_rows(&rec, "ft/std", "write");
    ensure!(
        short_taken == 0 && close(short_not, short) && short_asked == short_not,
        "ft/std (4k O_DIRECT writes on 128k records): {short_taken} took the direct path, {short_not} did not, {short_asked} asked, fio wrote {short}"
    );
    let read_rec = read_json(&dir.join("dio-read.json"))?;
    let reads = fio_count(
        &read_json(&dir.join("fio-dio-read.json"))?,
        "dio-read",
        "read",
    )?;
    let (read_taken, read_not, _) = direct_rows(&read_rec, "ft/dio", "read");
    ensure!(
        close(read_taken, reads) && read_not == 0,
        "ft/dio reads: {read_taken} took the direct path, {read_not} did not, fio read {reads}"
    );
    let blocks_read = stage_sum(&read_rec, "block_read", Some("ft"), "count");
    let arc_reads = stage_sum(&read_rec, "arc_read", Some("ft"), "count");
    ensure!(
        blocks_read + FIO_ALLOWANCE >= reads && arc_reads * 10 < reads,
        "direct reads: {blocks_read} blocks read from disk and {arc_reads} ARC reads on ft for fio's {reads} (each should be a disk read the ARC never sees)"
    );
    Ok(format!(
        "Direct I/O: {taken} whole-record writes and {read_taken} reads took the direct path (fio {writes}, {reads}), \
         {short_not} short O_DIRECT writes went through the ARC (fio {short}); \
         {blocks_read} blocks read from disk, {arc_reads} ARC reads on ft"
    ))
}

fn check_fast_dedup(dir: &Path) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("dedup.json"))?;
    let written = fio_count(&read_json(&dir.join("fio-dedup.json"))?, "dedup", "write")?;
    let lookups = stage_sum(&rec, "ddt_lookup", None, "count");
    let (before, after) = kstat_values(dir, "ddt", &["lookup"])?;
    let kstat_lookups = after - before;
    ensure!(
        lookups == kstat_lookups as u64,
        "zprof counted {lookups} dedup lookups, the pool's ddt_stats {kstat_lookups}"
    );
    let appended = stage_sum(&rec, "ddt_log_append", Some("ft"), "bytes");
    let flushed = stage_sum(&rec, "ddt_log_flush", Some("ft"), "bytes");
    ensure!(
        appended == written,
        "{appended} entries appended to the dedup log for fio's {written} unique blocks"
    );
    let logged = ["log_active_entries", "log_flushing_entries"];
    let (log_before, log_after) = kstat_values(dir, "ddt", &logged)?;
    ensure!(
        appended as i64 - flushed as i64 == log_after - log_before,
        "{appended} entries appended less {flushed} flushed, the log's entries went from {log_before} to {log_after}"
    );
    let append_ns = stage_sum(&rec, "ddt_log_append", Some("ft"), "total_ns");
    let flush_ns = stage_sum(&rec, "ddt_log_flush", Some("ft"), "total_ns");
    let sync_ns = stage_sum(&rec, "ddt_sync", None, "total_ns");
    ensure!(
        append_ns + flush_ns <= sync_ns,
        "the log's append ({append_ns} ns) and flush ({flush_ns} ns) are inside ddt_sync ({sync_ns} ns)"
    );
    Ok(format!(
        "fast dedup: {lookups} lookups (ddt_stats {kstat_lookups}), {appended} entries logged for {written} blocks, \
         {flushed} flushed (the log grew {log_before} -> {log_after}); append {:.1} ms, flush {:.1} ms of ddt_sync's {:.1} ms",
        append_ns as f64 / 1e6,
        flush_ns as f64 / 1e6,
        sync_ns as f64 / 1e6
    ))
}

fn check_fallback(dir: &Path) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("fallback.json"))?;
    let (mut count, mut total_ns, mut max_ns) = (0, 0, 0);
    for h in rec["histograms"].as_array().into_iter().flatten() {
        if h["stage"] == "txg_wait_synced"
            && h["class_name"] == "in zil commit"
            && h["pool"] == "fb"
        {
            count += h["count"].as_u64().unwrap_or(0);
            total_ns += h["total_ns"].as_u64().unwrap_or(0);
            max_ns = max_ns.max(h["max_ns"].as_u64().unwrap_or(0));
        }
    }
    let causes = [
        "zil_commit_suspend_count",
        "zil_commit_stall_count",
        "zil_commit_error_count",
    ];
    // 2.3 and later count a fallback once, at its cause.
    let (before, after) = kstat_values(dir, "zil", &causes)?;
    let kstat = (after - before) as u64;
    let commits = stage_sum(&rec, "zil_commit", Some("fb"), "count");
    ensure!(
        count >= kstat && kstat > 0,
        "zprof timed {count} txg waits inside {commits} commits, the ZIL's kstats count {kstat} fallbacks (suspended, stalled, failed): zprof must see each, and the snapshots must cause some"
    );
    Ok(format!(
        "{count} txg waits inside {commits} commits while snapshots suspended the ZIL: {kstat} fallbacks by the ZIL's kstats, {} log chains created anew; {:.1} ms in all, max {:.1} ms",
        count - kstat,
        total_ns as f64 / 1e6,
        max_ns as f64 / 1e6
    ))
}

fn check_expansion(dir: &Path) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("expansion.json"))?;
    let reflow = |class: &str, field: &str| -> u64 {
        rec["histograms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|h| h["stage"] == "vdev_disk" && h["class_name"] == class && h["pool"] == "rx")
            .map(|h| h[field].as_u64().unwrap_or(0))
            .sum()
    };
    let (reads, read_bytes) = (
        reflow("removal/reflow (read)", "count"),
        reflow("removal/reflow (read)", "bytes"),
    );
    let writes = reflow("removal/reflow (write)", "count");
    let text = |name: &str| std::fs::read_to_string(dir.join(name));
    let allocated: f64 = text("expansion-allocated.txt")?.trim().parse()?;
    let status = text("expansion-status.txt")?;
    let copied = status
        .lines()
        .find(|l| l.contains("expand"))
        .unwrap_or("no expand line")
        .trim()
        .to_owned();
    let ratio = read_bytes as f64 / allocated;
    ensure!(
        ratio > 0.99 && read_bytes as f64 <= allocated + reads as f64 * 32768.0 && writes > 0,
        "the reflow read {read_bytes} bytes in {reads} leaf reads ({writes} writes) for {allocated} allocated before the attach ({ratio:.4}); zpool status: {copied}"
    );
    let report = text("expansion-report.txt")?;
    ensure!(
        report
            .lines()
            .any(|l| l.contains("a RAIDZ expansion copied") && l.contains("[rx]")),
        "explain does not name the expansion on pool rx"
    );
    Ok(format!(
        "RAIDZ expansion: the reflow read {read_bytes} bytes ({ratio:.4} of the {allocated} allocated) in {reads} leaf reads and wrote in {writes}; zpool status: {copied}"
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn probes(direct_reason: &str) -> Value {
        json!({"probes": [
            {"role": "dmu_write_uio_direct", "reason": direct_reason},
            {"role": "ddt_log_begin", "reason": "not in OpenZFS 2.1.11: fast dedup's log came in 2.3"},
        ]})
    }

    #[test]
    fn an_absent_feature_needs_the_probe_rows_to_name_the_release() {
        let said = probes("not in OpenZFS 2.1.11: Direct I/O came in 2.3");
        assert!(check_absent("no direct property", &said).is_ok());
        let missing = probes("dmu_write_uio_direct not found in zfs.ko");
        let err = check_absent("no direct property", &missing).unwrap_err();
        assert!(err.to_string().contains("dmu_write_uio_direct"), "{err}");
    }
}
