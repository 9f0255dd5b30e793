//! The reads finding against the lab: reads that fetch a whole wide block
//! from RAID-Z are named disk-bound and amplified, with the device time a
//! read waits for (its block's slowest leaf) checked against the lab's own
//! read latency; reads of data that fits in the ARC are named as served by
//! it. Each in `run` mode (the lab's JSON at hand) and `record` mode (zprof's
//! own measurements only), on each release. Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{explain_json, lab_releases, require_root, zprof_on_lab};

/// Runs the lab under zprof (`run` or `record`) and returns the explain
/// findings and the lab's JSON.
fn lab_reads(dir: &Path, lab: &Path, mode: &str, name: &str, args: &[&str]) -> (Vec<Value>, Value) {
    let recording = dir.join(format!("{name}-{mode}.json"));
    let lab_json = zprof_on_lab(mode, lab, dir, &recording, args);
    (explain_json(&recording, &[]), lab_json)
}

fn reads_finding(findings: &[Value]) -> &Value {
    findings.iter().find(|f| f["kind"] == "reads").unwrap_or_else(|| panic!("no reads finding: {findings:#?}"))
}

fn figure(finding: &Value, name: &str) -> f64 {
    finding["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[0] == name)
        .unwrap_or_else(|| panic!("no figure {name}: {finding}"))[1]
        .as_f64()
        .unwrap()
}

/// Random 4k reads on an 8-wide raidz3 of hdds with a 1M volblocksize and
/// primarycache=metadata: every read fetches a 1M block as 5 leaf reads,
/// over 128 MiB so that nearly every leaf read seeks.
const AMPLIFIED: &[&str] = &[
    "--layout", "raidz3:8", "--vdev-model", "hdd", "--volblocksize", "1m", "--primarycache", "metadata",
    "--job", "name=rr,rw=randread,bs=4k,size=128m,runtime=3",
];

/// Random 4k reads of 8 MiB that the ARC holds after their first pass.
const CACHED: &[&str] =
    &["--layout", "raidz1:3", "--vdev-model", "ssd", "--volblocksize", "8k", "--job", "name=rr,rw=randread,bs=4k,size=8m,runtime=3"];

#[test]
fn reads_are_named_amplified_and_disk_bound_or_served_by_the_arc_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-reads", &release.version);
        for mode in ["run", "record"] {
            let (findings, lab) = lab_reads(&dir, &release.lab, mode, "amplified", AMPLIFIED);
            let reads = reads_finding(&findings);
            let title = reads["title"].as_str().unwrap();
            eprintln!("{} {mode}: {title}", release.version);
            assert!(title.contains("disk-bound") && title.contains("amplified"), "{reads:#}");
            assert_eq!(figure(reads, "fan_out"), 5.0, "a 1M block is 5 data columns of an 8-wide raidz3: {reads:#}");
            assert!(figure(reads, "read_amplification") > 200.0, "4k reads of 1M blocks: {reads:#}");
            // The device time a read waits for is the lab's read latency:
            // the slowest of 5 leaf reads (seek + 5/6 of a turn on average),
            // not one leaf's mean or median (seek + half a turn, about 20%
            // less), so 10% tells the two apart.
            let device_ms = figure(reads, "device_per_read_ns") / 1e6;
            let lab_ms = lab["jobs"][0]["read"]["lat_ns"]["mean"].as_f64().unwrap() / 1e6;
            eprintln!("  device per read {device_ms:.2}ms, lab's read latency {lab_ms:.2}ms");
            assert!((device_ms / lab_ms - 1.0).abs() < 0.1, "device {device_ms:.2}ms vs lab {lab_ms:.2}ms");
            // The job's reads wait for the disks about half of the run (the
            // rest lays their data out first).
            assert!(reads["share"].as_f64().unwrap() > 0.25, "{reads:#}");

            let (findings, _) = lab_reads(&dir, &release.lab, mode, "cached", CACHED);
            let reads = reads_finding(&findings);
            let title = reads["title"].as_str().unwrap();
            eprintln!("{} {mode}: {title}", release.version);
            assert!(title.contains("served from the ARC"), "{reads:#}");
            assert!(figure(reads, "blocks_per_read") < 0.05, "{reads:#}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
