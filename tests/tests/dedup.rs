//! Dedup as zprof sees it: mixed 128k random I/O on a mirror of nvme models,
//! half of the writes duplicates, with dedup on and off, on each release.
//! Fast dedup's log (2.3 and later): unique blocks written once are each one
//! entry appended to the log, and no more are flushed than were appended;
//! on 2.1 the log's points say which release brought it.
//! With dedup, every block written is looked up in the dedup table (at least
//! one lookup per block of a job that writes each block once) and explain
//! names dedup's cost; without,
//! no lookup happens and no dedup finding appears. Needs root.

use serde_json::Value;

mod common;
use common::{
    explain_json, figure, lab_releases, require_root, stage_count, stage_field, zprof_on_lab,
};

/// The pool every case writes to: a mirror of nvme models, 128k blocks.
fn pool_args(dedup: &str) -> Vec<&str> {
    vec![
        "--layout",
        "mirror:2",
        "--vdev-model",
        "nvme",
        "--volblocksize",
        "128k",
        "--dedup",
        dedup,
    ]
}

fn args(dedup: &str) -> Vec<&str> {
    let mut args = pool_args(dedup);
    args.extend([
        // Each block written once: one table lookup each.
        "--job",
        "name=fill,rw=write,bs=128k,size=128m,ios=1024,dedupe_percentage=50",
        "--job",
        "name=mix,rw=randrw,bs=128k,size=128m,runtime=3,numjobs=2,dedupe_percentage=50",
    ]);
    args
}

#[test]
fn dedup_is_named_with_its_cost_only_where_it_is_on_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-dedup", &release.version);
        // ddt_sync's share of txg sync, from each recording's own stages.
        let mut table_sync_share = Vec::new();
        for dedup in ["on", "off"] {
            let recording = dir.join(format!("dedup-{dedup}.json"));
            let lab = zprof_on_lab("record", &release.lab, &dir, &recording, &args(dedup));
            let rec: Value =
                serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
            let findings = explain_json(&recording, &[]);
            let finding = findings.iter().find(|f| f["kind"] == "dedup");
            let lookups = stage_count(&rec, "ddt_lookup");
            table_sync_share.push(
                stage_field(&rec, "ddt_sync", "total_ns") as f64
                    / stage_field(&rec, "spa_sync", "total_ns").max(1) as f64,
            );
            // ddt_sync runs at every txg, dedup or not: the report shows it only beside lookups.
            let report = common::zprof()
                .arg("report")
                .arg(&recording)
                .output()
                .unwrap();
            let shows_table_sync =
                String::from_utf8_lossy(&report.stdout).contains("dedup table sync");
            assert_eq!(
                shows_table_sync,
                dedup == "on",
                "dedup={dedup}: the dedup table sync row"
            );
            let writes = lab["jobs"][0]["write"]["total_ios"].as_u64().unwrap();
            let ratio = lab["jobs"][0]["pool"]["dedup_ratio"].as_f64().unwrap();
            eprintln!(
                "{} dedup={dedup}: {writes} writes, {lookups} table lookups, pool dedup ratio {ratio:.2}; {}",
                release.version,
                finding.map_or("no dedup finding".to_owned(), |f| f["title"]
                    .as_str()
                    .unwrap()
                    .to_owned())
            );
            if dedup == "on" {
                assert!(ratio > 1.3, "half the writes are duplicates: ratio {ratio}");
                // The mixed job overwrites blocks within a txg (one block write
                // for several of its writes): only the fill's writes are counted.
                assert!(
                    lookups >= writes,
                    "one lookup per block written at least: {lookups} for {writes} writes"
                );
                let f = finding.unwrap_or_else(|| panic!("no dedup finding: {findings:#?}"));
                let share = figure(f, "ddt_sync_share");
                assert!(
                    (share - table_sync_share[0]).abs() < 1e-9,
                    "the finding's share is the recording's: {f:#}"
                );
                assert!(
                    f["title"].as_str().unwrap().contains("of txg sync"),
                    "{f:#}"
                );
            } else {
                assert_eq!(lookups, 0, "no dataset dedups");
                assert!(finding.is_none(), "{finding:#?}");
                assert!((ratio - 1.0).abs() < 1e-9, "{ratio}");
            }
        }
        // The table's sync writes the job's new entries with dedup on; off,
        // ddt_sync only finds an empty table at each txg.
        let (on, off) = (table_sync_share[0], table_sync_share[1]);
        eprintln!(
            "{}: dedup table sync {:.2}% of txg sync with dedup, {:.2}% without",
            release.version,
            on * 100.0,
            off * 100.0
        );
        assert!(
            on > 5.0 * off && on < 1.0,
            "dedup table sync: {on:.4} of txg sync with dedup, {off:.4} without"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn fast_dedup_log_appends_each_new_block_once_on_each_release() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-dedup-log", &release.version);
        let recording = dir.join("dedup-log.json");
        let mut args = pool_args("on");
        args.extend([
            "--job",
            "name=unique,rw=write,bs=128k,size=64m,ios=384,dedupe_percentage=0",
        ]);
        let lab = zprof_on_lab("record", &release.lab, &dir, &recording, &args);
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
        let writes = lab["jobs"][0]["write"]["total_ios"].as_u64().unwrap();
        let appended = stage_field(&rec, "ddt_log_append", "bytes");
        let flushed = stage_field(&rec, "ddt_log_flush", "bytes");
        eprintln!(
            "{}: {writes} unique blocks written, {appended} entries appended to the dedup log, {flushed} flushed",
            release.version
        );
        if release.at_least(2, 3) {
            assert_eq!(appended, writes, "one log entry per new block");
            assert!(flushed <= appended, "{flushed} flushed of {appended}");
            assert!(
                stage_field(&rec, "ddt_log_append", "total_ns")
                    <= stage_field(&rec, "ddt_sync", "total_ns"),
                "the append is timed inside ddt_sync"
            );
        } else {
            assert_eq!(stage_count(&rec, "ddt_log_append"), 0);
            let probe = rec["probes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["role"] == "ddt_log_begin")
                .expect("a ddt_log_begin row");
            assert_eq!(
                probe["reason"],
                format!(
                    "not in OpenZFS {}: fast dedup's log came in 2.3",
                    release.version
                )
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
