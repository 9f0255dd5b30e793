//! Each txg's life as the txgs kstat keeps it, on libzpool: the lab writes
//! 256 MiB once, in order (every 128 KiB record dirtied once), and zprof's
//! txg rows must account for it. On each release: a txg's sync time holds
//! its spa_sync's (ZFS stamps the sync around it); the txgs born while
//! attached have their open, quiescing, wait and sync times; the job's txgs
//! follow one another; their dirty bytes hold the job's bytes and at most 5% more (indirect blocks and dnodes are
//! dirtied too: 1.022 on 2.1.11 here); the bytes their syncs wrote are the
//! lab's own count of its leaves' writes; their syncs are split into phases
//! that cover all but 5% of them; and `report --txgs` shows the same rows.
//! A throttled job's rate is the one its syncs allowed; a sync that reads
//! metadata itself waits for it, timed. Needs root.

use serde_json::Value;

mod common;
use common::{lab_releases, require_root, stderr, zprof, zprof_on_lab};

/// The job: 2,048 writes of 128 KiB from offset 0, each record once.
const JOB: &[&str] = &[
    "--layout",
    "raidz1:4",
    "--vdev-model",
    "ssd",
    "--job",
    "name=w,rw=write,bs=128k,size=256m,ios=2048",
];

/// Dirty bytes beyond the data a txg may carry (metadata dirtied with it).
const METADATA_SHARE: f64 = 0.05;

fn life(txg: &Value, field: &str) -> Option<u64> {
    txg[field].as_u64()
}

#[test]
fn each_txg_has_its_dirty_bytes_and_state_times_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-txgs", &release.version);
        let recording = dir.join("rec.json");
        let lab = zprof_on_lab("run", &release.lab, &dir, &recording, JOB);
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
        let pool = lab["pools"][0]["name"].as_str().unwrap();
        let txgs: Vec<&Value> = rec["txgs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["pool"] == pool)
            .collect();
        let name = format!("OpenZFS {}", release.version);
        assert!(txgs.len() >= 3, "{name}: {} txgs", txgs.len());
        for txg in &txgs {
            if let Some(sync) = life(txg, "sync_ns") {
                assert!(
                    sync >= txg["duration_ns"].as_u64().unwrap(),
                    "{name}: the sync is shorter than its spa_sync: {txg}"
                );
            }
        }
        // Born while zprof was attached: every txg after the first two,
        // with all of its life (an earlier one's wait and sync are left out).
        for txg in &txgs[2..] {
            for field in ["open_ns", "quiesce_ns", "wait_ns", "sync_ns"] {
                assert!(life(txg, field).is_some(), "{name}: no {field}: {txg}");
            }
        }
        let job = &lab["jobs"][0];
        let (first, last) = (
            job["txg_first"].as_u64().unwrap(),
            job["txg_last"].as_u64().unwrap(),
        );
        let numbers: Vec<u64> = txgs.iter().map(|t| t["txg"].as_u64().unwrap()).collect();
        assert!(
            (first..=last).all(|n| numbers.contains(&n)),
            "{name}: the job's txgs {first}..={last} are not all there: {numbers:?}"
        );
        let dirty: u64 = txgs
            .iter()
            .filter(|t| (first..=last).contains(&t["txg"].as_u64().unwrap()))
            .map(|t| {
                life(t, "dirty_bytes").unwrap_or_else(|| panic!("{name}: no dirty bytes: {t}"))
            })
            .sum();
        let written = job["write"]["io_bytes"].as_u64().unwrap();
        let share = dirty as f64 / written as f64;
        eprintln!("{name}: txgs {first}..={last} dirty {dirty} for {written} written ({share:.4})");
        assert!(
            (1.0..=1.0 + METADATA_SHARE).contains(&share),
            "{name}: dirty {dirty} for {written} bytes written ({share:.4})"
        );
        let job_txgs: Vec<&Value> = txgs
            .iter()
            .copied()
            .filter(|t| (first..=last).contains(&t["txg"].as_u64().unwrap()))
            .collect();
        phases_cover_the_syncs(&job_txgs, &name);
        let nwritten: u64 = job_txgs
            .iter()
            .map(|t| {
                life(t, "written_bytes").unwrap_or_else(|| panic!("{name}: no bytes written: {t}"))
            })
            .sum();
        // The lab counts its leaves' writes over the job's txgs as the
        // kstat does (the root vdev's stats): the same bytes.
        let leaves = job["leaf_write_bytes"].as_u64().unwrap();
        eprintln!("{name}: the job's txgs wrote {nwritten} bytes, the lab's leaves {leaves}");
        assert_eq!(nwritten, leaves, "{name}: bytes written by the job's txgs");
        dirty_histogram_holds_the_txgs(&rec, &txgs, pool, &name);
        report_shows_the_rows(&recording, rec["txgs"].as_array().unwrap().len(), &name);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// The pool's `txg_dirty` histogram (what serve exports and top shows)
/// counts every txg with dirty bytes, and its sum is theirs.
fn dirty_histogram_holds_the_txgs(rec: &Value, txgs: &[&Value], pool: &str, name: &str) {
    let rows: Vec<&Value> = rec["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["stage"] == "txg_dirty" && h["pool"] == pool)
        .collect();
    let sum = |field: &str| rows.iter().map(|h| h[field].as_u64().unwrap()).sum::<u64>();
    let dirty: Vec<u64> = txgs.iter().filter_map(|t| life(t, "dirty_bytes")).collect();
    assert_eq!(
        sum("count"),
        dirty.len() as u64,
        "{name}: txg_dirty's count"
    );
    assert_eq!(
        sum("total_ns"),
        dirty.iter().sum::<u64>(),
        "{name}: txg_dirty's sum (bytes, in the ns field)"
    );
}

/// Share of a job's sync time the phases may leave to spa_sync's own work.
const OTHER_SHARE: f64 = 0.05;

/// Every sync of the job is split, its phases within its spa_sync, the
/// write-out the largest of them (the job's data), and over the job's syncs
/// the phases cover all but [`OTHER_SHARE`] of the sync time.
fn phases_cover_the_syncs(txgs: &[&Value], name: &str) {
    let (mut sync_ns, mut phases_ns) = (0u64, 0u64);
    for txg in txgs {
        let split = &txg["sync"];
        assert!(
            split["passes"].as_u64().unwrap_or(0) >= 1,
            "{name}: no split sync: {txg}"
        );
        let phases = split["phases_ns"].as_object().unwrap();
        let total: u64 = phases.values().map(|v| v.as_u64().unwrap()).sum();
        let duration = txg["duration_ns"].as_u64().unwrap();
        assert!(
            total <= duration,
            "{name}: phases {total} ns beyond the sync's {duration}: {txg}"
        );
        sync_ns += duration;
        phases_ns += total;
    }
    let other = 1.0 - phases_ns as f64 / sync_ns as f64;
    eprintln!(
        "{name}: the job's syncs {sync_ns} ns, the phases {phases_ns} ns ({:.1}% other)",
        other * 100.0
    );
    assert!(
        other <= OTHER_SHARE,
        "{name}: the phases cover {phases_ns} of the job's {sync_ns} ns of sync ({:.1}% left out)",
        other * 100.0
    );
}

/// `report --txgs` in JSON gives the recording's rows, and the table a line
/// for each.
fn report_shows_the_rows(recording: &std::path::Path, rows: usize, name: &str) {
    let report = |format: &str| {
        let output = zprof()
            .args(["report", "--txgs", "--format", format])
            .arg(recording)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let json: Value = serde_json::from_str(&report("json")).unwrap();
    assert_eq!(json.as_array().unwrap().len(), rows, "{name}");
    let table = report("table");
    let (life, phases) = table
        .split_once("\nsync phases")
        .unwrap_or_else(|| panic!("{name}: no sync phases:\n{table}"));
    assert_eq!(
        life.lines().filter(|l| l.starts_with("zlab-")).count(),
        rows,
        "{name}:\n{table}"
    );
    assert!(
        phases.lines().any(|l| l.starts_with("zlab-")),
        "{name}: no txg in the sync phases:\n{table}"
    );
    eprintln!("{name}:\n{table}");
}

/// A 4k random-write job on a raidz1 of emulated HDDs under a 32 MiB dirty
/// limit: writers are throttled, and the throttle finding's rate arithmetic
/// (the job's bytes over its syncs' time) gives the rate the lab measured
/// (its bytes over its run and its job-end sync) within [`RATE_SHARE`]; the
/// sync finding names the pool's largest phase.
#[test]
fn a_throttled_jobs_rate_is_the_one_its_syncs_allowed_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-throttle", &release.version);
        let recording = dir.join("rec.json");
        let lab = zprof_on_lab("run", &release.lab, &dir, &recording, THROTTLED_JOB);
        let name = format!("OpenZFS {}", release.version);
        let findings = common::explain_json(&recording, &[]);
        let throttle = findings
            .iter()
            .find(|f| f["kind"] == "throttle")
            .unwrap_or_else(|| panic!("{name}: no throttle finding: {findings:#?}"));
        let took = common::figure(throttle, "pool_write_rate_bytes");
        // The lab's rate until the job's data is on disk: its bytes over its
        // run and its job-end sync (the syncs the finding counts include
        // that last one; bw_bytes stops at the last write, 6-9% higher).
        let job = &lab["jobs"][0];
        let seconds =
            (job["runtime_ms"].as_f64().unwrap() + job["sync_ms"].as_f64().unwrap()) / 1e3;
        let got = job["write"]["io_bytes"].as_f64().unwrap() / seconds;
        eprintln!(
            "{name}: the pool took the job's writes at {:.2} MiB/s, the lab measured {:.2} MiB/s to its job-end sync ({:.2} MiB/s to its last write)",
            took / 1048576.0,
            got / 1048576.0,
            job["write"]["bw_bytes"].as_f64().unwrap() / 1048576.0
        );
        assert!(
            (took / got - 1.0).abs() <= RATE_SHARE,
            "{name}: {took} B/s from the syncs, {got} B/s measured by the lab: {throttle:#}"
        );
        let sync = findings
            .iter()
            .find(|f| f["kind"] == "txg_sync_phases")
            .unwrap_or_else(|| panic!("{name}: no sync finding: {findings:#?}"));
        assert_eq!(sync["pool"], lab["pools"][0]["name"], "{name}: {sync:#}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// The throttled job (see above).
const THROTTLED_JOB: &[&str] = &[
    "--layout",
    "raidz1:4",
    "--vdev-model",
    "hdd",
    "--dirty-data-max",
    "32m",
    "--job",
    "name=w,rw=randwrite,bs=4k,size=1g,runtime=6",
];

/// How close the rate the syncs allowed is to the lab's measured rate.
const RATE_SHARE: f64 = 0.10;

/// A dedup pool whose table outgrows a 64 MiB ARC (1 GiB of unique 4 KiB
/// blocks), on emulated disks that take 2 ms per I/O: the sync thread reads
/// metadata itself and waits for it.
const SYNC_READS_JOB: &[&str] = &[
    "--arc-max",
    "64m",
    "--volblocksize",
    "4k",
    "--dedup",
    "on",
    "--vdev-model",
    "ssd:lat=2ms",
    "--job",
    "name=fill,rw=write,bs=1m,size=1g",
    "--job",
    "name=rw,rw=randwrite,bs=4k,size=1g,runtime=10s",
];

/// The emulated disks' time per I/O in [`SYNC_READS_JOB`].
const DISK_LATENCY_NS: f64 = 2e6;

/// With zio_wait probed (--full-timing), the blocks the sync thread read
/// itself are waited for: at least one wait where it read, never more waits
/// than reads, each wait on average at least half the emulated disk's time
/// (a wait begins just after its read was issued, so the disk's time is its
/// floor), all within the syncs; the sync finding gives the wait.
#[test]
fn a_sync_waits_for_the_metadata_it_reads_on_each_release() {
    require_root();
    for release in lab_releases() {
        let name = format!("OpenZFS {}", release.version);
        let dir = common::scratch("zprof-sync-reads", &release.version);
        let recording = dir.join("rec.json");
        common::zprof_on_lab_with(
            "run",
            &["--full-timing"],
            &release.lab,
            &dir,
            &recording,
            SYNC_READS_JOB,
        );
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
        let splits: Vec<(&Value, &Value)> = rec["txgs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["sync"].is_object())
            .map(|t| (t, &t["sync"]))
            .collect();
        let field = |s: &Value, f: &str| {
            s[f].as_u64()
                .unwrap_or_else(|| panic!("{name}: no {f} (zio_wait not attached?): {s}"))
        };
        let (mut reads, mut waits, mut waited) = (0, 0, 0);
        for (txg, sync) in &splits {
            let (r, w, ns) = (
                field(sync, "reads"),
                field(sync, "read_waits"),
                field(sync, "read_wait_ns"),
            );
            assert!(w <= r, "{name}: {w} waits for {r} reads: {txg}");
            assert!(r == 0 || w > 0, "{name}: reads never waited for: {txg}");
            assert!(
                ns <= txg["duration_ns"].as_u64().unwrap(),
                "{name}: waited longer than the sync: {txg}"
            );
            (reads, waits, waited) = (reads + r, waits + w, waited + ns);
        }
        eprintln!(
            "{name}: the sync thread read {reads} blocks, waited {waits} times, {:.1} ms ({:.2} ms a wait; the disks take 2 ms)",
            waited as f64 / 1e6,
            waited as f64 / 1e6 / waits.max(1) as f64
        );
        assert!(reads > 0, "{name}: the sync thread read nothing");
        assert!(
            waited as f64 >= 0.5 * DISK_LATENCY_NS * waits as f64,
            "{name}: {waits} waits took {waited} ns in all"
        );
        let findings = common::explain_json(&recording, &[]);
        let sync = findings
            .iter()
            .find(|f| f["kind"] == "txg_sync_phases")
            .unwrap_or_else(|| panic!("{name}: no sync finding: {findings:#?}"));
        assert_eq!(
            common::figure(sync, "sync_read_wait_ns"),
            waited as f64,
            "{name}: {sync:#}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
