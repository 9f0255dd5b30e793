//! Where the ARC served each read, as zprof counts it with --full-timing on
//! libzpool (arc_read timed, with the path of the block read each issued, and
//! arc_buf_access for buffers the dbuf layer held), against ZFS's own ARC statistics, which
//! the lab reads from libzpool's sums: hits, misses and L2ARC hits agree
//! within 1% on a cached, an uncached and an L2ARC-served random-read job, on
//! each release. Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{class_field, explain_json, figure, lab_releases, require_root, zprof_on_lab_with};

/// Random 4k reads of 8 MiB that the ARC holds after their first pass.
const CACHED: &[&str] = &[
    "--layout",
    "raidz1:3",
    "--vdev-model",
    "ssd",
    "--volblocksize",
    "8k",
    "--job",
    "name=rr,rw=randread,bs=4k,size=8m,runtime=2",
];

/// The same with primarycache=metadata: every data block is read from disk.
const UNCACHED: &[&str] = &[
    "--layout",
    "raidz1:3",
    "--vdev-model",
    "ssd",
    "--volblocksize",
    "8k",
    "--primarycache",
    "metadata",
    "--job",
    "name=rr,rw=randread,bs=4k,size=8m,runtime=2",
];

/// 256 MiB read at random through a 128 MiB ARC with an nvme cache device:
/// blocks evicted from the ARC come back from the cache device once fed.
const L2ARC: &[&str] = &[
    "--layout",
    "raidz1:3",
    "--vdev-model",
    "ssd",
    "--caches",
    "1",
    "--cache-model",
    "nvme",
    "--arc-max",
    "128m",
    "--volblocksize",
    "8k",
    "--job",
    "name=rr,rw=randread,bs=4k,size=256m,runtime=5",
];

/// zprof's figure against the lab's count: within 1% (or 2 reads, for small counts).
fn agrees(what: &str, zprof: f64, lab: f64) {
    assert!(
        (zprof - lab).abs() <= (0.01 * lab).max(2.0),
        "{what}: zprof {zprof} vs ZFS's {lab}"
    );
}

fn check(dir: &Path, lab: &Path, version: &str, name: &str, args: &[&str]) -> (f64, f64, f64) {
    let recording = dir.join(format!("{name}.json"));
    // On libzpool the paths are counted with --full-timing (a uprobe per ARC
    // read and per held buffer is too dear by default), which times arc_read too.
    let lab_json = zprof_on_lab_with("record", &["--full-timing"], lab, dir, &recording, args);
    let arc = &lab_json["totals"]["arc"];
    let findings = explain_json(&recording, &[]);
    let reads = findings
        .iter()
        .find(|f| f["kind"] == "reads")
        .unwrap_or_else(|| panic!("{name}: no reads finding: {findings:#?}"));
    let (hits, misses, l2) = (
        figure(reads, "arc_hits"),
        figure(reads, "arc_misses"),
        figure(reads, "arc_l2_hits"),
    );
    eprintln!(
        "{version} {name}: zprof hits/misses/L2ARC hits/in flight {hits}/{misses}/{l2}/{}, ZFS's {}/{}/{}/{}",
        figure(reads, "arc_in_flight"),
        arc["hits"],
        arc["misses"],
        arc["l2_hits"],
        arc["iohits"]
    );
    agrees("hits", hits, arc["hits"].as_f64().unwrap());
    agrees("misses", misses, arc["misses"].as_f64().unwrap());
    agrees("L2ARC hits", l2, arc["l2_hits"].as_f64().unwrap());
    if version != "2.1.11" {
        agrees(
            "reads found in flight (iohits)",
            figure(reads, "arc_in_flight"),
            arc["iohits"].as_f64().unwrap(),
        );
    }
    let line = reads["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|l| l.starts_with("ARC reads"));
    assert!(
        line.is_some(),
        "{name}: the finding does not state the split: {reads:#}"
    );
    // The cache device's own rows are its leaf I/Os as ZFS counts them
    // (vs_ops: an aggregate of adjacent L2ARC reads is one read, its members
    // none), sync and async (hits of prefetches are read at async priority).
    // So they equal the cache leaf's read count, not the L2ARC hits: 56,104
    // reads for 56,739 hits on 2.3.2 in one run, 38,673 for 38,654 on 2.1.11
    // in another (the device's header and log blocks are read too).
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let cache_rows = |class: &str| class_field(&rec, "vdev_disk", class, "count");
    let cache_reads =
        (cache_rows("sync read, cache device") + cache_rows("async read, cache device")) as f64;
    let leaf_reads: u64 = lab_json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|job| job["leaves"].as_array().unwrap())
        .filter(|leaf| leaf["is_cache"] == true)
        .map(|leaf| leaf["read_ops"].as_u64().unwrap())
        .sum();
    eprintln!("  cache device reads: zprof {cache_reads}, ZFS's {leaf_reads}, L2ARC hits {l2}");
    agrees("cache device reads", cache_reads, leaf_reads as f64);
    if l2 > 0.0 {
        assert!(
            cache_rows("async write, cache device") > 0,
            "{name}: no feed writes on the cache device's rows"
        );
        assert!(
            line.unwrap().contains("cache devices read"),
            "{name}: {}",
            line.unwrap()
        );
        let warmup = reads["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|l| l.starts_with("cache devices served"));
        assert!(warmup.is_some(), "{name}: no warm-up line: {reads:#}");
        eprintln!("  {}", warmup.unwrap());
    }
    (hits, misses, l2)
}

#[test]
fn arc_hits_misses_and_l2arc_hits_agree_with_zfs_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-arc", &release.version);
        let (hits, misses, _) = check(&dir, &release.lab, &release.version, "cached", CACHED);
        assert!(
            hits > 20.0 * misses,
            "a cached job is served by the ARC: {hits} hits, {misses} misses"
        );
        let (_, misses, _) = check(&dir, &release.lab, &release.version, "uncached", UNCACHED);
        assert!(
            misses > 1000.0,
            "primarycache=metadata: data reads miss: {misses}"
        );
        let (_, _, l2) = check(&dir, &release.lab, &release.version, "l2arc", L2ARC);
        assert!(
            l2 > 1000.0,
            "a cache device serves reads once warm: {l2} L2ARC hits"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
