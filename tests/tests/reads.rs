//! The reads finding against the lab: reads that fetch a whole wide block
//! from RAID-Z are named disk-bound and amplified, with the device time a
//! read waits for (its block's slowest leaf) checked against the lab's own
//! read latency; reads of data that fits in the ARC are named as served by
//! it. Each in `run` mode (the lab's JSON at hand) and `record` mode (zprof's
//! own measurements only), on each release. Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{explain_json, figure, lab_releases, require_root, zprof_on_lab};

/// Runs the lab under zprof (`run` or `record`) and returns the explain
/// findings and the lab's JSON.
fn lab_reads(dir: &Path, lab: &Path, mode: &str, name: &str, args: &[&str]) -> (Vec<Value>, Value) {
    let recording = dir.join(format!("{name}-{mode}.json"));
    let lab_json = zprof_on_lab(mode, lab, dir, &recording, args);
    (explain_json(&recording, &[]), lab_json)
}

fn reads_finding(findings: &[Value]) -> &Value {
    findings
        .iter()
        .find(|f| f["kind"] == "reads")
        .unwrap_or_else(|| panic!("no reads finding: {findings:#?}"))
}

/// Random 4k reads on an 8-wide raidz3 of hdds with a 1M volblocksize and
/// primarycache=metadata: every read fetches a 1M block as 5 leaf reads,
/// over 128 MiB so that nearly every leaf read seeks.
const AMPLIFIED: &[&str] = &[
    "--layout",
    "raidz3:8",
    "--vdev-model",
    "hdd",
    "--volblocksize",
    "1m",
    "--primarycache",
    "metadata",
    "--job",
    "name=rr,rw=randread,bs=4k,size=128m,runtime=3",
];

/// Random 4k reads of 8 MiB that the ARC holds after their first pass.
const CACHED: &[&str] = &[
    "--layout",
    "raidz1:3",
    "--vdev-model",
    "ssd",
    "--volblocksize",
    "8k",
    "--job",
    "name=rr,rw=randread,bs=4k,size=8m,runtime=3",
];

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
            assert!(
                title.contains("disk-bound") && title.contains("amplified"),
                "{reads:#}"
            );
            assert_eq!(
                figure(reads, "fan_out"),
                5.0,
                "a 1M block is 5 data columns of an 8-wide raidz3: {reads:#}"
            );
            assert!(
                figure(reads, "read_amplification") > 200.0,
                "4k reads of 1M blocks: {reads:#}"
            );
            // The device time a read waits for, then its CPU (checksum of the
            // whole block), is most of the lab's read latency: the slowest of
            // 5 leaf reads (seek + 5/6 of a turn on average) is 0.9 of it here,
            // one leaf's mean (seek + half a turn) 0.75. The rest is ZFS's
            // hand-offs between threads, longer on a loaded host (it put the
            // device alone at 0.886 in one CI run), never shorter: so the
            // model may fall short of the lab by 15%. It may exceed it by the
            // error of its estimate: the expected slowest of 5 draws from the
            // leaves' histogram, taken at bucket midpoints (a bucket is an
            // eighth of a power of two wide, so up to 6% off), which put it
            // at 1.051 on 2.3.2 in one clean-clone run on the Intel VM.
            let device_ms = figure(reads, "device_per_read_ns") / 1e6;
            let cpu_ms = figure(reads, "cpu_per_read_ns") / 1e6;
            let lab_ms = lab["jobs"][0]["read"]["lat_ns"]["mean"].as_f64().unwrap() / 1e6;
            let ratio = (device_ms + cpu_ms) / lab_ms;
            eprintln!(
                "  per read: device {device_ms:.2}ms + CPU {cpu_ms:.2}ms = {ratio:.3} of the lab's read latency {lab_ms:.2}ms"
            );
            assert!(
                (0.85..1.08).contains(&ratio),
                "device {device_ms:.2}ms + CPU {cpu_ms:.2}ms vs lab {lab_ms:.2}ms"
            );
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
