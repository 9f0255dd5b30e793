//! Checks of the guest's two-pool run (`/results/two-pools`): fsync writers
//! on tpa and async writers on tpb, recorded at once by one `zprof record
//! --target kernel`, as a host with a boot pool beside its data pool is.
//!
//! - The recording's rows are split by pool: tpa's zil_commit count equals
//!   its fio's fsyncs, the write requests on each pool's datasets its own
//!   fio's writes (within [`FIO_ALLOWANCE`]), and tpb, which no one fsynced,
//!   has no commits.
//! - Compression (lz4 data on tpb; ZFS's own metadata on both) is
//!   attributed to the pool whose zios it served: tpb compressed more bytes
//!   than tpa, whose data is not compressed, and explain has a compression
//!   finding about tpb and none over both pools; so has write amplification,
//!   whose workload bytes per pool are the write requests on its datasets.
//! - explain has tpa's sync-write finding and none about tpb, ranks the
//!   findings by their share of the whole workload's time, and every finding
//!   names one of the two pools or says it covers both and why.
//! - `explain --pool tpa` keeps tpa's findings (and those over both), `report
//!   --pool tpb` only tpb's rows, and an unknown pool is a usage error (exit
//!   2) naming the pools the recording holds.

use std::path::Path;

use anyhow::{anyhow, ensure};
use serde_json::Value;

use super::results::{FIO_ALLOWANCE, histograms, read_json};

/// The pools of the run: fsync writers, async writers.
const SYNC_POOL: &str = "tpa";
const ASYNC_POOL: &str = "tpb";

/// A field of `stage`'s rows for `pool`, summed ("count", "bytes").
fn pool_sum(rec: &Value, stage: &str, pool: &str, field: &str) -> u64 {
    histograms(rec, stage)
        .filter(|h| h["pool"] == pool)
        .map(|h| h[field].as_u64().unwrap_or(0))
        .sum()
}

/// File write requests on `pool`'s datasets (the kernel's workload-write
/// rows carry no pool: zfs_write is counted before ZFS names one).
fn pool_write_requests(rec: &Value, pool: &str) -> u64 {
    rec["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["layer"] == "file" && r["op"] == "write")
        .filter(|r| {
            let dataset = r["dataset"].as_str().unwrap_or("");
            dataset == pool || dataset.starts_with(&format!("{pool}/"))
        })
        .map(|r| r["count"].as_u64().unwrap_or(0))
        .sum()
}

/// fio's total I/Os of one direction ("write", "sync") in its first job.
fn fio_ios(fio: &Value, direction: &str) -> anyhow::Result<u64> {
    fio["jobs"][0][direction]["total_ios"]
        .as_u64()
        .ok_or_else(|| anyhow!("fio's JSON has no {direction}.total_ios"))
}

/// Checks the run; returns what was measured, or every failure.
pub fn check_two_pools(dir: &Path) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("rec.json"))?;
    let mut bad = Vec::new();
    let counts = split_by_pool(&rec, dir, &mut bad)?;
    let findings = read_json(&dir.join("explain.json"))?;
    let findings = findings
        .as_array()
        .ok_or_else(|| anyhow!("explain.json is not a list of findings"))?;
    bad.extend(findings_per_pool(findings));
    bad.extend(pool_options(dir));
    ensure!(bad.is_empty(), "{}", bad.join("; "));
    let ranked: Vec<String> = findings
        .iter()
        .take(3)
        .map(|f| {
            format!(
                "{} [{}]",
                f["kind"].as_str().unwrap_or(""),
                f["pool"].as_str().unwrap_or("")
            )
        })
        .collect();
    Ok(format!(
        "{counts}; findings ranked {}; --pool keeps one pool, an unknown one is refused",
        ranked.join(", ")
    ))
}

/// Each pool's counts against its own fio.
fn split_by_pool(rec: &Value, dir: &Path, bad: &mut Vec<String>) -> anyhow::Result<String> {
    let sync_fio = read_json(&dir.join("fio-tpa.json"))?;
    let async_fio = read_json(&dir.join("fio-tpb.json"))?;
    let fsyncs = fio_ios(&sync_fio, "sync")?;
    let commits = pool_sum(rec, "zil_commit", SYNC_POOL, "count");
    if commits.abs_diff(fsyncs) > FIO_ALLOWANCE {
        bad.push(format!(
            "{SYNC_POOL}: zil_commit count {commits} differs from its fio's {fsyncs} fsyncs"
        ));
    }
    let other_commits = pool_sum(rec, "zil_commit", ASYNC_POOL, "count");
    if other_commits > FIO_ALLOWANCE {
        bad.push(format!(
            "{ASYNC_POOL}: {other_commits} zil_commits, where no one fsynced"
        ));
    }
    let mut line = format!("{SYNC_POOL} {commits} zil_commits / fio {fsyncs} fsyncs");
    line.push_str(&compression_by_pool(rec, bad));
    for (pool, fio) in [(SYNC_POOL, &sync_fio), (ASYNC_POOL, &async_fio)] {
        let (ours, theirs) = (pool_write_requests(rec, pool), fio_ios(fio, "write")?);
        ensure!(
            theirs > 100,
            "fio on {pool} issued only {theirs} writes: too few to compare"
        );
        if ours.abs_diff(theirs) > FIO_ALLOWANCE {
            bad.push(format!(
                "{pool}: {ours} write requests, its fio {theirs} writes"
            ));
        }
        line.push_str(&format!(
            ", {pool} {ours} write requests / fio {theirs} writes"
        ));
    }
    Ok(line)
}

/// Each pool's compressed bytes: tpb's lz4 data outweighs tpa's metadata,
/// and no compression row is left without a pool.
fn compression_by_pool(rec: &Value, bad: &mut Vec<String>) -> String {
    let (sync, bulk) = (
        pool_sum(rec, "compress", SYNC_POOL, "bytes"),
        pool_sum(rec, "compress", ASYNC_POOL, "bytes"),
    );
    let unattributed = pool_sum(rec, "compress", "", "bytes");
    if bulk <= sync {
        bad.push(format!(
            "compression: {ASYNC_POOL} (lz4) compressed {bulk} bytes, {SYNC_POOL} (off) {sync}"
        ));
    }
    if unattributed > 0 {
        bad.push(format!(
            "compression: {unattributed} bytes compressed for no pool"
        ));
    }
    format!(", compressed {SYNC_POOL} {sync} B / {ASYNC_POOL} {bulk} B")
}

/// What explain must say about two pools (see the module doc).
fn findings_per_pool(findings: &[Value]) -> Vec<String> {
    let mut bad = Vec::new();
    if !findings
        .iter()
        .any(|f| f["kind"] == "sync_write_bound" && f["pool"] == SYNC_POOL)
    {
        bad.push(format!("no sync-write finding about {SYNC_POOL}"));
    }
    let shares: Vec<f64> = findings
        .iter()
        .map(|f| f["share"].as_f64().unwrap_or(0.0))
        .collect();
    if shares.windows(2).any(|pair| pair[0] < pair[1]) {
        bad.push(format!(
            "findings not ranked by their share of the workload's time: {shares:?}"
        ));
    }
    for f in findings {
        let pool = f["pool"].as_str().unwrap_or("");
        if f["kind"] == "sync_write_bound" && pool == ASYNC_POOL {
            bad.push(format!(
                "a sync-write finding about {ASYNC_POOL}: {}",
                f["title"]
            ));
        }
        // Compression (zio_execute) and the workload's writes (the write
        // requests on each pool's datasets) split by pool on the kernel.
        if ["compression", "write_amplification"].contains(&f["kind"].as_str().unwrap_or(""))
            && pool.is_empty()
        {
            bad.push(format!(
                "{} over both pools, not split: {}",
                f["kind"], f["missing"]
            ));
        }
        let covers_both = pool.is_empty() && covers_both_and_says_why(f);
        if ![SYNC_POOL, ASYNC_POOL].contains(&pool) && !covers_both {
            bad.push(format!(
                "finding {} names pool {pool:?} (pools {}): neither one pool nor both with why",
                f["kind"], f["pools"]
            ));
        }
    }
    bad
}

/// A finding over several pools lists both and says it could not split.
fn covers_both_and_says_why(f: &Value) -> bool {
    let pools = f["pools"].to_string();
    pools.contains(SYNC_POOL)
        && pools.contains(ASYNC_POOL)
        && f["missing"].to_string().contains("not split by pool")
}

/// `explain --pool`, `report --pool` and an unknown pool.
fn pool_options(dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    match read_json(&dir.join("explain-tpa.json")) {
        Ok(only) => {
            let findings = only.as_array().cloned().unwrap_or_default();
            if findings.is_empty() {
                bad.push(format!("explain --pool {SYNC_POOL} gave no finding"));
            }
            for f in findings
                .iter()
                .filter(|f| f["pool"] != SYNC_POOL && f["pool"] != "")
            {
                bad.push(format!(
                    "explain --pool {SYNC_POOL} kept a finding about {}",
                    f["pool"]
                ));
            }
        }
        Err(e) => bad.push(format!("{e:#}")),
    }
    match read_json(&dir.join("report-tpb.json")) {
        Ok(report) => {
            let text = report.to_string();
            if !text.contains(&format!("\"{ASYNC_POOL}\""))
                || text.contains(&format!("\"{SYNC_POOL}\""))
            {
                bad.push(format!(
                    "report --pool {ASYNC_POOL} does not show {ASYNC_POOL} alone"
                ));
            }
        }
        Err(e) => bad.push(format!("{e:#}")),
    }
    let rc = std::fs::read_to_string(dir.join("nosuchpool.rc")).unwrap_or_default();
    let message = std::fs::read_to_string(dir.join("nosuchpool.err")).unwrap_or_default();
    if rc.trim() != "2"
        || !message.contains("no pool 'nosuchpool'")
        || !message.contains(SYNC_POOL)
        || !message.contains(ASYNC_POOL)
    {
        bad.push(format!(
            "explain --pool nosuchpool exited {} with {message:?}: not a usage error naming {SYNC_POOL} and {ASYNC_POOL}",
            rc.trim()
        ));
    }
    bad
}
