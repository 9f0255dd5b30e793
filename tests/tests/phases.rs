//! A benchmark's phases told apart: two lab jobs one after another on one
//! pool under `zprof run` (the lab's JSON says when each ran), a write job
//! that meets the write throttle, then a read job whose layout writes meet it
//! too. The throttle finding must count the write job's waits as the
//! workload's, none for the read job, and leave the read job's layout
//! outside; the per-pool seconds it cuts must hold every wait. Needs root.
//!
//! The analysis does not depend on the release, so this runs on the system's
//! 2.1.11 only.

use serde_json::Value;

mod common;
use common::{explain_json, figure, lab_binary, require_root, scratch, stage_count, zprof_on_lab};

/// A small zfs_dirty_data_max (delays from 60% of 32 MiB) makes both the
/// write job and the read job's layout meet the throttle on any host.
const JOBS: &[&str] = &[
    "--layout",
    "raidz3:8",
    "--vdev-model",
    "hdd",
    "--dirty-data-max",
    "32m",
    "--job",
    "name=w,rw=write,bs=128k,size=256m,runtime=3",
    "--job",
    "name=rr,rw=randread,bs=4k,size=64m,runtime=2",
];

/// The waits of the evidence line that starts with `prefix` ("during job w").
fn waits_in(finding: &Value, prefix: &str) -> u64 {
    let line = finding["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' line: {finding:#}"));
    let count = line[prefix.len()..]
        .trim_start_matches(':')
        .split_whitespace()
        .next()
        .unwrap();
    count.replace(',', "").parse().unwrap()
}

#[test]
fn the_throttle_finding_counts_only_the_waits_inside_the_jobs() {
    require_root();
    let dir = scratch("zprof-phases", "jobs");
    let recording = dir.join("rec.json");
    zprof_on_lab("run", &lab_binary(), &dir, &recording, JOBS);
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let waits = stage_count(&rec, "tx_wait");
    let per_second: u64 = rec["pool_seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tx_waits"].as_u64().unwrap())
        .sum();
    assert!(
        waits > 0,
        "the write job met no throttle at 32 MiB of dirty data"
    );
    assert_eq!(per_second, waits, "the per-pool seconds lost waits");
    let findings = explain_json(&recording, &[]);
    let throttle = findings
        .iter()
        .find(|f| f["kind"] == "throttle")
        .unwrap_or_else(|| panic!("no throttle finding: {findings:#?}"));
    eprintln!("{throttle:#}");
    let writes = waits_in(throttle, "during job w");
    let reads = waits_in(throttle, "during job rr");
    assert!(writes > 0, "{throttle:#}");
    assert_eq!(
        reads, 0,
        "the read job's layout counted as its own: {throttle:#}"
    );
    assert!(
        writes < waits,
        "the read job's layout writes met the throttle outside the jobs: {throttle:#}"
    );
    assert!(figure(throttle, "job_tx_wait_ns") < figure(throttle, "tx_wait_ns"));
    std::fs::remove_dir_all(dir).unwrap();
}
