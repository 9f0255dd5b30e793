//! Checks of the guest's throttle run (`/results/throttle`): 64k async writes
//! under a 32 MiB zfs_dirty_data_max, so the write throttle delays them.
//!
//! - The recording read the tunable the script set (zfs_dirty_data_max
//!   32 MiB, from the module's parameters).
//! - zprof saw delays (trace_zfs_delay__mintime, which dmu_tx_delay calls
//!   before it sleeps) and no more than the DMU's kstats marked for delay
//!   (dmu_tx_dirty_delay and dmu_tx_wrlog_delay: a transaction marked late
//!   enough is not slept).
//! - Every delay came at a dirty level above zfs_delay_min_dirty_percent of
//!   the limit (the power-of-two bucket of the lowest reaches above it).
//! - explain's throttle finding states the delays and their dirty levels.
//! - The txgs equal the pool's txgs kstat, as in every section.

use std::path::Path;

use anyhow::{anyhow, ensure};
use serde_json::Value;
use zprof_common::hist_bucket_high;

use super::{
    Variant,
    check_txgs::compare_txgs,
    results::{histograms, kstat_delta, read_json},
};

/// The limit the script sets, bytes.
const DIRTY_MAX: f64 = 33_554_432.0;

/// Checks the throttle run in `dir`.
pub fn check_throttle(dir: &Path, variant: Variant) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("rec.json"))?;
    let read_max = rec["tunables"]["zfs_dirty_data_max"].as_f64();
    ensure!(
        read_max == Some(DIRTY_MAX),
        "zfs_dirty_data_max read as {read_max:?}, the script set {DIRTY_MAX}"
    );
    let marked = kstat_delta(dir, "dmu_tx", &["dmu_tx_dirty_delay", "dmu_tx_wrlog_delay"])?;
    let delays: u64 = histograms(&rec, "throttle_delay")
        .map(|h| h["count"].as_u64().unwrap_or(0))
        .sum();
    ensure!(
        marked > 0,
        "the DMU marked no transaction for delay: the section did not throttle, so nothing could be checked"
    );
    ensure!(
        delays > 0 && delays <= marked,
        "zprof saw {delays} throttle delays, the DMU's kstats marked {marked} transactions for delay"
    );
    let lowest_high = lowest_dirty_bucket_high(&rec)?;
    let percent = rec["tunables"]["zfs_delay_min_dirty_percent"]
        .as_f64()
        .unwrap_or(60.0);
    let threshold = DIRTY_MAX * percent / 100.0;
    ensure!(
        lowest_high as f64 > threshold,
        "a delay came at a dirty level below {percent}% of zfs_dirty_data_max: its bucket ends at {lowest_high} bytes"
    );
    let explain = read_json(&dir.join("explain.json"))?;
    ensure!(
        throttle_evidence(&explain).is_some_and(|e| e.contains("dmu_tx_delay delayed")),
        "explain's throttle finding does not state the delays: {explain}"
    );
    let txgs = compare_txgs(&rec, dir, "thr", variant)?;
    Ok(format!(
        "{delays} delays of {marked} transactions marked, the lowest dirty level's bucket ending at {:.1} MiB (delays from {percent}% = {:.1} MiB); {txgs}",
        lowest_high as f64 / 1048576.0,
        threshold / 1048576.0
    ))
}

/// The upper edge of the lowest bucket of the dirty levels at delay.
fn lowest_dirty_bucket_high(rec: &Value) -> anyhow::Result<u64> {
    histograms(rec, "throttle_dirty")
        .filter_map(|h| h["buckets"].as_array()?.first()?[0].as_u64())
        .min()
        .map(|index| hist_bucket_high(index as usize))
        .ok_or_else(|| anyhow!("no throttle_dirty rows"))
}

/// The throttle finding's evidence, joined.
fn throttle_evidence(explain: &Value) -> Option<String> {
    let finding = explain
        .as_array()?
        .iter()
        .find(|f| f["kind"] == "throttle")?;
    let lines: Vec<&str> = finding["evidence"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 6.17-2.4.4 guest's throttle recording (tests/data/README.md):
    /// the lowest dirty level at a delay lies in the bucket ending at 20 MiB,
    /// above 60% of the 32 MiB limit.
    #[test]
    fn the_lowest_dirty_level_is_its_buckets_upper_edge() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.4.4-throttle.json"
        );
        let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let high = lowest_dirty_bucket_high(&rec).unwrap();
        assert_eq!(high, 20 * 1048576 - 1, "the last value of the bucket");
        assert!(high as f64 > DIRTY_MAX * 0.6);
        assert!(lowest_dirty_bucket_high(&serde_json::json!({"histograms": []})).is_err());
    }
}
