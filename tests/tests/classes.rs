//! The special allocation class filling, on libzpool: with a 64 MiB special
//! vdev and 512-byte blocks, the indirect blocks of a few hundred MiB fill it,
//! and ZFS allocates the metadata that follows in the normal class. zprof
//! (metaslab_alloc, --full-timing on uprobes) must count the allocations the
//! special class turned away exactly when the lab's own figures say the class
//! is full, and its allocations in the class must hold at least what the
//! class holds at the end (frees only take from it). With a special vdev of
//! the default size, none is turned away. On each release (the class pointers
//! are offsets of each build). Needs root.

use serde_json::Value;

mod common;
use common::{explain_json, figure, lab_releases, require_root, scratch, zprof_on_lab_with};

/// The pool's and the job's shape; the sizes come after.
const POOL: &[&str] = &["--ashift", "9", "--specials", "1", "--volblocksize", "512"];

/// Share of the special class the lab must see allocated for it to be full.
const FULL_SHARE: f64 = 0.99;

/// The special class's allocations in `rec`: (taken, their bytes, turned
/// away).
fn special_allocations(rec: &Value) -> (u64, u64, u64) {
    rec["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["stage"] == "alloc_class" && h["class"].as_u64().unwrap() & 1 != 0)
        .fold((0, 0, 0), |(taken, bytes, away), h| {
            let count = h["count"].as_u64().unwrap();
            if h["class"].as_u64().unwrap() & 4 != 0 {
                (taken, bytes, away + count)
            } else {
                (taken + count, bytes + h["bytes"].as_u64().unwrap(), away)
            }
        })
}

/// Runs the lab under `zprof record --full-timing` with `extra` after
/// [`POOL`]; returns the lab's pool figures, the recording and its path.
fn run(
    release: &common::LabRelease,
    name: &str,
    extra: &[&str],
) -> (Value, Value, std::path::PathBuf) {
    let dir = scratch(name, &release.version);
    let recording = dir.join("rec.json");
    let args: Vec<&str> = POOL.iter().chain(extra).copied().collect();
    let lab = zprof_on_lab_with(
        "record",
        &["--full-timing"],
        &release.lab,
        &dir,
        &recording,
        &args,
    );
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    (lab["jobs"][0]["pool"].clone(), rec, dir)
}

#[test]
fn a_full_special_class_turns_metadata_away_on_each_release() {
    require_root();
    for release in lab_releases() {
        let name = format!("OpenZFS {}", release.version);
        let (pool, rec, dir) = run(
            &release,
            "zprof-special-full",
            &[
                "--special-size",
                "64m",
                "--job",
                "name=w,rw=write,bs=1m,size=512m,ios=448",
            ],
        );
        let (taken, taken_bytes, away) = special_allocations(&rec);
        let (alloc, size) = (
            pool["special_alloc_bytes"].as_u64().unwrap(),
            pool["special_size_bytes"].as_u64().unwrap(),
        );
        eprintln!(
            "{name}: the special class took {taken} allocations ({taken_bytes} bytes) and turned {away} away; it holds {alloc} of {size} bytes"
        );
        assert!(
            alloc as f64 >= FULL_SHARE * size as f64,
            "{name}: the class did not fill: {pool}"
        );
        assert!(away > 0, "{name}: none turned away from a full class");
        assert!(
            taken_bytes >= alloc,
            "{name}: {taken_bytes} bytes taken, the class holds {alloc}"
        );
        let findings = explain_json(&dir.join("rec.json"), &[]);
        let full = findings
            .iter()
            .find(|f| f["kind"] == "class_full")
            .unwrap_or_else(|| panic!("{name}: no class_full finding: {findings:#?}"));
        assert_eq!(figure(full, "special_turned_away"), away as f64, "{name}");
        assert!(
            full["pool"].as_str().unwrap().starts_with("zlab-"),
            "{full:#}"
        );
        std::fs::remove_dir_all(dir).unwrap();

        let (pool, rec, dir) = run(
            &release,
            "zprof-special-room",
            &["--job", "name=w,rw=write,bs=1m,size=64m,ios=64"],
        );
        let (taken, taken_bytes, away) = special_allocations(&rec);
        let alloc = pool["special_alloc_bytes"].as_u64().unwrap();
        eprintln!(
            "{name}, a 16 GiB special vdev: {taken} allocations ({taken_bytes} bytes), {away} turned away; it holds {alloc}"
        );
        assert_eq!(away, 0, "{name}: turned away with room");
        assert!(
            taken > 0 && taken_bytes >= alloc,
            "{name}: {taken_bytes} bytes taken, the class holds {alloc}"
        );
        let findings = explain_json(&dir.join("rec.json"), &[]);
        assert!(
            findings.iter().all(|f| f["kind"] != "class_full"),
            "{name}: {findings:#?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
