//! Findings per pool: two lab processes, each with its own pool, recorded
//! together by one `zprof record` (the way a host with a boot pool beside its
//! data pools is recorded). Each pool's finding must name its pool, carry the
//! figures of that pool recorded alone, and the pool where the time went must
//! come first. Then `explain --pool` and `report --pool` keep one pool, and an
//! unknown pool is refused naming the ones the recording holds. Needs root.
//!
//! The analysis does not depend on the release, so this runs on the system's
//! 2.1.11 only.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{
    explain_json, figure, lab_binary, require_root, scratch, stderr, zprof, zprof_on_lab,
};

/// Random 4k reads on an 8-wide raidz3 of hdds with primarycache=metadata:
/// every read goes to the disks.
const DISK_BOUND_READS: &[&str] = &[
    "--layout",
    "raidz3:8",
    "--vdev-model",
    "hdd",
    "--volblocksize",
    "128k",
    "--primarycache",
    "metadata",
    "--job",
    "name=rr,rw=randread,bs=4k,size=64m,runtime=4",
];

/// A fixed number of random 4k reads of 8 MiB that the ARC holds (a
/// sequential pass reads it in first): done in a fraction of the other
/// pool's run.
const ARC_READS: &[&str] = &[
    "--layout",
    "stripe:1",
    "--vdev-model",
    "ssd",
    "--volblocksize",
    "8k",
    "--job",
    "name=rr,rw=randread,bs=4k,size=8m,ios=20000,warmup=1",
];

/// 4k writes each followed by fsync on an 8-wide raidz3 of hdds.
const FSYNC_WRITES: &[&str] = &[
    "--layout",
    "raidz3:8",
    "--vdev-model",
    "hdd",
    "--volblocksize",
    "4k",
    "--job",
    "name=f,rw=randwrite,bs=4k,size=64m,fsync=1,runtime=4",
];

/// Async 128k writes on a mirror of ssds.
const ASYNC_WRITES: &[&str] = &[
    "--layout",
    "mirror:2",
    "--vdev-model",
    "ssd",
    "--volblocksize",
    "128k",
    "--job",
    "name=w,rw=write,bs=128k,size=64m,ios=400",
];

/// Async 128k writes of half-compressible data, half of it duplicates, with
/// zstd and dedup on a mirror of ssds.
const ZSTD_WRITES: &[&str] = &[
    "--layout",
    "mirror:2",
    "--vdev-model",
    "ssd",
    "--compression",
    "zstd",
    "--dedup",
    "on",
    "--job",
    "name=z,rw=write,bs=128k,size=64m,ios=400,buffer_compress_percentage=50,dedupe_percentage=50",
];

/// The same with lz4 on a raidz1 of three ssds, twice the data.
const LZ4_WRITES: &[&str] = &[
    "--layout",
    "raidz1:3",
    "--vdev-model",
    "ssd",
    "--compression",
    "lz4",
    "--job",
    "name=l,rw=write,bs=128k,size=128m,ios=800,buffer_compress_percentage=50",
];

/// One pool's findings and its name, recorded alone and beside the other.
struct Pool {
    /// Its name in the recording of both.
    name: String,
    /// Its name when recorded alone (the lab names a pool after its process).
    alone_name: String,
    alone: Vec<Value>,
}

/// Records `args` alone under `zprof record`: the pool's name and findings.
fn alone(dir: &Path, tag: &str, args: &[&str]) -> Pool {
    let recording = dir.join(format!("{tag}-alone.json"));
    let lab = zprof_on_lab("record", &lab_binary(), dir, &recording, args);
    let name = lab["pools"][0]["name"].as_str().unwrap().to_owned();
    Pool {
        name: name.clone(),
        alone_name: name,
        alone: explain_json(&recording, &[]),
    }
}

/// Both lab runs at once under one `zprof record` (with `record_args`
/// besides): the recording and each run's pool name (from the lab's JSON,
/// written to a file per run).
fn together(dir: &Path, a: &[&str], b: &[&str], record_args: &[&str]) -> (PathBuf, String, String) {
    let recording = dir.join("together.json");
    let lab = lab_binary();
    let run = |args: &[&str], out: &str| {
        let words: Vec<String> = [lab.to_str().unwrap(), "run", "--dir", dir.to_str().unwrap()]
            .iter()
            .chain(args)
            .chain(&["--output-format", "json"])
            .map(|w| format!("'{w}'"))
            .collect();
        format!("{} > '{}'", words.join(" "), dir.join(out).display())
    };
    let script = format!(
        "{} & a=$!; {} & b=$!; wait $a; ra=$?; wait $b; rb=$?; [ $ra = 0 ] && [ $rb = 0 ]",
        run(a, "a.json"),
        run(b, "b.json")
    );
    let output = zprof()
        .args(["record", "--target", "libzpool", "--no-explain"])
        .args(record_args)
        .arg("-o")
        .arg(&recording)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let name = |file: &str| {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let json = common::first_json(&text);
        json["pools"][0]["name"].as_str().unwrap().to_owned()
    };
    (recording, name("a.json"), name("b.json"))
}

/// Each of two jobs recorded alone, then both together (`record_args` added
/// to that recording): the recording of both, its findings (printed), and
/// each pool under its name in it.
fn pair(
    dir: &Path,
    (tag_a, a): (&str, &[&str]),
    (tag_b, b): (&str, &[&str]),
    record_args: &[&str],
) -> (PathBuf, Vec<Value>, Pool, Pool) {
    let first = alone(dir, tag_a, a);
    let second = alone(dir, tag_b, b);
    let (recording, first_name, second_name) = together(dir, a, b, record_args);
    let findings = explain_json(&recording, &[]);
    for f in &findings {
        eprintln!("{} [{}] {:.3}", f["title"], f["pool"], f["share"]);
    }
    let first = Pool {
        name: first_name,
        ..first
    };
    let second = Pool {
        name: second_name,
        ..second
    };
    (recording, findings, first, second)
}

/// The finding of `kind` about `pool`.
fn finding<'a>(findings: &'a [Value], kind: &str, pool: &str) -> &'a Value {
    findings
        .iter()
        .find(|f| f["kind"] == kind && f["pool"] == pool)
        .unwrap_or_else(|| panic!("no {kind} finding about {pool}: {findings:#?}"))
}

/// `figure` of the `kind` finding about the pool, together and alone, within 10%.
fn same_figure(together: &[Value], pool: &Pool, kind: &str, name: &str) {
    let both = figure(finding(together, kind, &pool.name), name);
    let alone = figure(finding(&pool.alone, kind, &pool.alone_name), name);
    eprintln!(
        "  {} {kind} {name}: together {both:.4}, alone {alone:.4}",
        pool.name
    );
    assert!(
        (both - alone).abs() <= 0.10 * alone.abs(),
        "{} {kind} {name}: {both} recorded with the other pool, {alone} alone",
        pool.name
    );
}

/// Findings that name no pool must say which pools they cover and why.
fn unsplit_findings_say_so(findings: &[Value], pools: &[&str]) {
    for f in findings.iter().filter(|f| f["pool"] == "") {
        let covered: Vec<&str> = f["pools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert!(pools.iter().all(|p| covered.contains(p)), "{f:#}");
        assert!(
            f["missing"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m.as_str().unwrap().contains("not split by pool")),
            "{f:#}"
        );
    }
}

#[test]
fn each_pool_of_a_recording_gets_its_own_reads_finding_with_its_own_figures() {
    require_root();
    let dir = scratch("zprof-pools", "reads");
    let (recording, findings, disk, arc) =
        pair(&dir, ("disk", DISK_BOUND_READS), ("arc", ARC_READS), &[]);
    assert_eq!(
        findings[0]["pool"],
        disk.name.as_str(),
        "the disk-bound pool first: {:#}",
        findings[0]
    );
    let disk_reads = finding(&findings, "reads", &disk.name);
    assert!(
        disk_reads["title"].as_str().unwrap().contains("disk-bound"),
        "{disk_reads:#}"
    );
    let arc_reads = finding(&findings, "reads", &arc.name);
    assert!(
        arc_reads["title"]
            .as_str()
            .unwrap()
            .contains("served from the ARC"),
        "{arc_reads:#}"
    );
    assert!(figure(arc_reads, "blocks_per_read") < 0.05, "{arc_reads:#}");
    assert!(disk_reads["share"].as_f64() > arc_reads["share"].as_f64());
    for name in ["blocks_per_read", "fan_out", "device_per_read_ns"] {
        same_figure(&findings, &disk, "reads", name);
    }
    same_figure(&findings, &arc, "reads", "reads");
    same_figure(&findings, &disk, "reads", "reads");
    unsplit_findings_say_so(&findings, &[&disk.name, &arc.name]);
    pool_options(&recording, &disk.name, &arc.name);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn fsync_writers_on_one_pool_and_async_writers_on_another_are_told_apart() {
    require_root();
    let dir = scratch("zprof-pools", "writes");
    let (_, findings, sync, bulk) =
        pair(&dir, ("sync", FSYNC_WRITES), ("async", ASYNC_WRITES), &[]);
    assert_eq!(findings[0]["kind"], "sync_write_bound", "{:#}", findings[0]);
    assert_eq!(findings[0]["pool"], sync.name.as_str(), "{:#}", findings[0]);
    assert!(
        !findings
            .iter()
            .any(|f| f["kind"] == "sync_write_bound" && f["pool"] == bulk.name.as_str()),
        "the async pool made no sync writes: {findings:#?}"
    );
    same_figure(&findings, &sync, "sync_write_bound", "writes_per_commit");
    same_figure(&findings, &sync, "sync_write_bound", "flush_ns");
    // Each pool's bytes on its leaves over the bytes its own writers wrote:
    // raidz3 of 4k blocks against a mirror of 128k blocks.
    same_figure(
        &findings,
        &sync,
        "write_amplification",
        "write_amplification",
    );
    same_figure(
        &findings,
        &bulk,
        "write_amplification",
        "write_amplification",
    );
    unsplit_findings_say_so(&findings, &[&sync.name, &bulk.name]);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Compression and dedup lookups are attributed to the pool whose zios they
/// served (the pool of the zio their taskq thread runs: zio_execute, probed
/// on uprobes with --full-timing): each pool's compression finding names its
/// own algorithms, compressed as many bytes as the pool alone, and the
/// costlier zstd pool ranks first; the dedup pool alone has a dedup finding,
/// with as many lookups as alone.
#[test]
fn compression_and_dedup_are_told_apart_by_the_pool_whose_blocks_they_served() {
    require_root();
    let dir = scratch("zprof-pools", "compression");
    let (_, findings, zstd, lz4) = pair(
        &dir,
        ("zstd", ZSTD_WRITES),
        ("lz4", LZ4_WRITES),
        &["--full-timing"],
    );
    let zstd_finding = finding(&findings, "compression", &zstd.name);
    let lz4_finding = finding(&findings, "compression", &lz4.name);
    let names_zstd = |f: &Value| f["evidence"].to_string().contains("zstd:");
    assert!(names_zstd(zstd_finding), "{zstd_finding:#}");
    assert!(!names_zstd(lz4_finding), "{lz4_finding:#}");
    assert!(
        zstd_finding["share"].as_f64() > lz4_finding["share"].as_f64(),
        "zstd's pool costs more CPU: {zstd_finding:#} {lz4_finding:#}"
    );
    same_figure(&findings, &zstd, "compression", "compressed_bytes");
    same_figure(&findings, &lz4, "compression", "compressed_bytes");
    same_figure(&findings, &zstd, "dedup", "ddt_lookups");
    assert!(
        !findings
            .iter()
            .any(|f| f["kind"] == "dedup" && f["pool"] != zstd.name.as_str()),
        "a dedup finding about another pool than {}: {findings:#?}",
        zstd.name
    );
    assert!(
        !findings
            .iter()
            .any(|f| f["kind"] == "compression" && f["pool"] == ""),
        "a compression finding over both pools: {findings:#?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// `explain --pool` keeps one pool's findings (and those over several pools),
/// `report --pool` its rows; an unknown pool is a usage error naming both.
fn pool_options(recording: &Path, keep: &str, other: &str) {
    let only = explain_json(recording, &["--pool", keep]);
    assert!(!only.is_empty());
    for f in &only {
        assert!(f["pool"] == keep || f["pool"] == "", "{f:#}");
    }
    let output = zprof()
        .arg("report")
        .arg(recording)
        .args(["--pool", keep, "--format", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = report.to_string();
    assert!(
        text.contains(keep) && !text.contains(other),
        "report --pool {keep} shows {other}"
    );
    let output = zprof()
        .arg("explain")
        .arg(recording)
        .args(["--pool", "nosuchpool"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("no pool 'nosuchpool'")
            && message.contains(keep)
            && message.contains(other),
        "{message}"
    );
}
