//! What moved between OpenZFS releases, each checked on a real build: a test per
//! moved semantic, written to fail on the old behaviour (see
//! ../shared/notes/openzfs-versions.md and zprof/src/zfs/releases.rs).
//!
//! The counts of vdev I/Os, flushes, commits and txgs against the lab's own
//! are checked per release by `cli.rs`; here are zstd's early abort, a CET
//! build that cannot run here (2.3.9), a build zprof cannot name, and the
//! releases on trial (2.4.4, whose lab runs under trixie's loader).

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::ledger::{self, Attempts};
use common::{
    cache_dir, class_field, lab_releases, release_libzpool, require_root, stage_count, stderr,
    trial_releases, zprof, zprof_on_lab,
};

/// Histograms of a stage by class name: (count, total ns).
/// A class's count and total time.
fn by_class(recording: &Value, stage: &str, class: &str) -> (u64, u64) {
    (
        class_field(recording, stage, class, "count"),
        class_field(recording, stage, class, "total_ns"),
    )
}

fn probes_json(library: &Path, extra: &[&str]) -> Value {
    let target = format!("libzpool={}", library.display());
    let output = zprof()
        .args(["probes", "--target", &target, "--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn probe<'a>(doc: &'a Value, function: &str) -> Option<&'a Value> {
    doc["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["function"] == function)
}

/// zstd-3 on 128K blocks: from 2.2 zstd first tries lz4 on each block (early
/// abort). Those trials belong to the zstd row; counted as lz4 compressions they
/// would double the lz4 row and the CPU charged to lz4. On 2.1 there are none.
#[test]
fn zstd_early_abort_trials_stay_inside_zstd() {
    require_root();
    for release in lab_releases() {
        let dir = std::env::temp_dir().join(format!(
            "zprof-zstd-{}-{}",
            release.version,
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let recording_path = dir.join("rec.json");
        let output = zprof()
            .args(["record", "--no-explain", "-o"])
            .arg(&recording_path)
            .arg("--")
            .arg(&release.lab)
            .args([
                "run",
                "--layout",
                "raidz1:3",
                "--compression",
                "zstd-3",
                "--volblocksize",
                "128k",
                "--dir",
            ])
            .arg(&dir)
            .args([
                "--job",
                "name=z,rw=write,bs=128k,size=48m,buffer_compress_percentage=50",
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}: {}",
            release.version,
            stderr(&output)
        );
        let recording: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording_path).unwrap()).unwrap();
        let (zstd_blocks, zstd_ns) = by_class(&recording, "compress", "zstd-3");
        let (trials, trial_ns) = by_class(&recording, "lz4_compress", "zstd early-abort trial");
        let (lz4_calls, _) = by_class(&recording, "lz4_compress", "lz4");
        let (lz4_blocks, _) = by_class(&recording, "compress", "lz4");
        eprintln!(
            "OpenZFS {}: {zstd_blocks} zstd-3 blocks, {trials} early-abort trials, {lz4_calls} lz4 calls",
            release.version
        );
        assert!(
            zstd_blocks >= 384,
            "{}: 48 MiB in 128K blocks: {zstd_blocks}",
            release.version
        );
        // Every lz4 call that is not a trial is one lz4 compression of a block
        // (ZFS's metadata), never a trial counted as lz4.
        assert_eq!(lz4_calls, lz4_blocks, "{}: lz4 row", release.version);
        if release.version.starts_with("2.1.") {
            assert_eq!(trials, 0, "2.1 has no early abort");
        } else {
            assert_eq!(
                trials, zstd_blocks,
                "{}: one lz4 trial per zstd-3 block",
                release.version
            );
            assert!(
                trial_ns < zstd_ns,
                "{}: the trials run inside zstd's time",
                release.version
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// OpenZFS 2.3.9 (Debian 13) needs glibc 2.38 and cannot run here, but zprof
/// resolves its symbols and attaches to its file: the wrapped txg wait, the
/// CET prologues and its status are checked on the real build.
#[test]
fn a_cet_build_with_txg_wait_synced_flags_is_probed_where_it_waits() {
    require_root();
    let library = release_libzpool(&cache_dir(), "2.3.9");
    let doc = probes_json(&library, &[]);
    assert_eq!(doc["zfs_version"], "2.3.9");
    assert_eq!(doc["zfs_series"], "2.3");
    assert_eq!(
        doc["zfs_status"], "unverified",
        "2.3.9 is not run here: {doc}"
    );
    // dmu_tx_wait and dsl_sync_task call txg_wait_synced_flags directly: a probe
    // on txg_wait_synced alone would miss their waits.
    let txg =
        probe(&doc, "txg_wait_synced_flags").expect("the txg stage probes txg_wait_synced_flags");
    assert_eq!(txg["attached"], true, "{txg}");
    assert!(
        probe(&doc, "txg_wait_synced").is_none(),
        "the wrapper is not probed as well: {doc}"
    );
    assert_eq!(
        probe(&doc, "zfs_lz4_compress").expect("lz4 under its 2.3 name")["attached"],
        true
    );
    // Every function starts with endbr64, which the kernel would single-step.
    let commit = probe(&doc, "zil_commit").unwrap();
    assert!(
        commit["note"]
            .as_str()
            .unwrap_or("")
            .contains("attached at +4, past endbr64"),
        "{commit}"
    );
    let interrupt = probe(&doc, "zio_interrupt").unwrap();
    assert!(
        interrupt["note"]
            .as_str()
            .unwrap_or("")
            .contains("attached at +11"),
        "{interrupt}"
    );
}

/// A build zprof cannot name (no version string, an unknown build-id, no
/// package) must not be read with another release's rules: the stages whose
/// meaning moved between releases are unavailable, with the reason, and the
/// others still attach.
#[test]
fn an_unknown_build_makes_release_dependent_stages_unavailable() {
    require_root();
    let original = release_libzpool(&cache_dir(), "2.3.2");
    let copy = std::env::temp_dir()
        .join(format!("zprof-unknown-{}", std::process::id()))
        .join("libzpool.so.6");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::write(
        &copy,
        with_other_build_id(&std::fs::read(&original).unwrap()),
    )
    .unwrap();
    let doc = probes_json(&copy, &[]);
    // The user may name the release; zprof then reads the build with its rules
    // but does not call it verified.
    let named = probes_json(&copy, &["--zfs-version", "2.3.2"]);
    let contradicting = zprof()
        .args(["probes", "--zfs-version", "2.1.11", "--target"])
        .arg(format!("libzpool={}", original.display()))
        .output()
        .unwrap();
    std::fs::remove_dir_all(copy.parent().unwrap()).unwrap();
    assert_eq!(named["zfs_status"], "unverified", "{named}");
    // Compression needs no struct offsets: named, the release's level argument is known.
    assert_eq!(
        probe(&named, "zio_compress_data").unwrap()["attached"],
        true,
        "{named}"
    );
    assert_eq!(
        contradicting.status.code(),
        Some(2),
        "a version the build-id contradicts is refused"
    );
    assert!(
        stderr(&contradicting).contains("its build-id is OpenZFS 2.3.2's"),
        "{}",
        stderr(&contradicting)
    );
    assert_eq!(doc["zfs_status"], "unknown", "{doc}");
    for function in ["zio_compress_data", "vdev_queue_io_done", "zio_flush"] {
        let p = probe(&doc, function).unwrap_or_else(|| panic!("{function} listed"));
        assert_eq!(p["attached"], false, "{p}");
        assert!(
            p["reason"]
                .as_str()
                .unwrap()
                .contains("moved between releases"),
            "{p}"
        );
    }
    for function in ["zil_commit", "spa_sync", "dmu_write"] {
        assert_eq!(
            probe(&doc, function).unwrap()["attached"],
            true,
            "{function} reads the same in every release"
        );
    }
}

/// The library with the first byte of its GNU build-id changed.
fn with_other_build_id(data: &[u8]) -> Vec<u8> {
    // The note: namesz 4, descsz 20, type 3 (NT_GNU_BUILD_ID), "GNU\0", id.
    let header = [4u8, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, b'G', b'N', b'U', 0];
    let at = data
        .windows(header.len())
        .position(|w| w == header)
        .expect("a GNU build-id note")
        + header.len();
    let mut out = data.to_vec();
    out[at] ^= 0xff;
    out
}

/// `--target libzpool` on a command that links a libzpool picks that one, even
/// when it is not the system's (the 2.3.2 lab links a copy in the cache).
#[test]
fn the_library_is_the_one_the_command_links() {
    require_root();
    for release in lab_releases() {
        let output = zprof()
            .args(["record", "--no-explain", "--target", "libzpool", "--"])
            .arg(&release.lab)
            .arg("--version")
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let text = String::from_utf8_lossy(&output.stdout);
        let expected: PathBuf = release.libzpool.clone();
        assert!(
            text.contains(&format!(
                "libzpool {} (OpenZFS {}",
                expected.display(),
                release.version
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("(OpenZFS {})", release.version)),
            "the lab says which it runs on: {text}"
        );
    }
}

/// zprof-lab is the ground truth on every release: each scenario's published
/// shape holds on each (short runs; `cargo xtask demo` runs the full ones).
/// A timing criterion the lab cannot decide because this host delivered a
/// device slower than its model (exit 4) is in the ledger, and tried again;
/// a failed one is tried once more, each attempt in the ledger.
#[test]
fn lab_scenarios_pass_their_checks_on_each_release() {
    const TEST: &str = "lab_scenarios_pass_their_checks_on_each_release";
    let runs: [&[&str]; 3] = [
        &["fsync-collapse", "--runtime", "2"],
        &["compression", "--size", "8m"],
        &["volblocksize", "--size", "8m", "--runtime", "1"],
    ];
    let mut failures = Vec::new();
    for release in lab_releases() {
        for args in runs {
            let case = format!("OpenZFS {} scenario {}", release.version, args.join(" "));
            let mut attempts = Attempts::new(TEST, &case, 2);
            for _ in 0..3 {
                let output = std::process::Command::new(&release.lab)
                    .arg("scenario")
                    .args(args)
                    .arg("--check")
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&output.stdout);
                let verdict = text
                    .lines()
                    .rev()
                    .find(|l| l.contains("criteria passed"))
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                match output.status.code() {
                    Some(0) => attempts.attempt(true, verdict),
                    Some(3) => attempts.attempt(false, format!("{verdict}\n{text}")),
                    Some(4) => ledger::cannot_check(TEST, &case, &check_lines(&text)),
                    _ => panic!(
                        "OpenZFS {}: scenario {} failed ({:?}):\n{text}\n{}",
                        release.version,
                        args[0],
                        output.status,
                        stderr(&output)
                    ),
                }
                if !attempts.again() {
                    break;
                }
            }
            failures.extend(attempts.verdict().err());
        }
    }
    assert!(failures.is_empty(), "scenario checks failed: {failures:#?}");
}

/// The `--check` block of a lab's text output.
fn check_lines(text: &str) -> String {
    text.lines()
        .skip_while(|l| !l.starts_with("check "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every release that runs here, and any on trial (scripts/openzfs-releases):
/// its lab runs under zprof, zprof names the release and takes the shipped
/// offsets of its build, and every commit the lab counts (at zil_commit_flags
/// from 2.4, where zil_close commits too) is one zprof counts. The pool has
/// a special vdev and no log vdev, where 2.4 moved the log blocks: see
/// [`log_blocks_are_named_where_the_lab_saw_them`].
#[test]
fn each_release_runs_under_zprof_with_its_own_offsets() {
    require_root();
    let kept = common::scratch("zprof-releases-compared", "all");
    for release in lab_releases().into_iter().chain(trial_releases()) {
        let dir = common::scratch("zprof-trial", &release.version);
        let recording = dir.join("rec.json");
        let lab = zprof_on_lab(
            "run",
            &release.lab,
            &dir,
            &recording,
            &[
                "--layout",
                "raidz1:3",
                "--vdev-model",
                "ssd",
                "--specials",
                "1",
                "--job",
                "name=f,rw=randwrite,bs=4k,size=64m,fsync=1,runtime=2",
            ],
        );
        assert_eq!(lab["openzfs"], release.version.as_str());
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
        assert_eq!(
            rec["target"]["zfs_version"],
            release.version.as_str(),
            "{}",
            rec["target"]
        );
        let source = rec["offsets_source"].as_str().unwrap_or("");
        assert!(
            source.contains(&format!("libzpool-{}-debian.json", release.version)),
            "{}: offsets from {source}",
            release.version
        );
        let commits = stage_count(&rec, "zil_commit");
        let lab_commits = lab["totals"]["zil_commits_all"].as_u64().unwrap();
        eprintln!(
            "{}: zprof {commits} zil_commits, the lab {lab_commits}",
            release.version
        );
        assert!(commits > 100, "{}: {commits} commits", release.version);
        assert_eq!(commits, lab_commits, "{}", release.version);
        // The leaf-I/O program reads zio_t through the table's offsets.
        let (leaf_writes, leaf_ns) = by_class(&rec, "vdev_disk", "sync write");
        assert!(
            leaf_writes > commits && leaf_ns > 0,
            "{}: {leaf_writes} timed leaf sync writes for {commits} commits",
            release.version
        );
        log_blocks_are_named_where_the_lab_saw_them(&release.version, &lab, &rec, &recording);
        std::fs::copy(&recording, kept.join(format!("{}.json", release.version))).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
    let (a, b) = (kept.join("2.3.2.json"), kept.join("2.4.4.json"));
    if a.exists() && b.exists() {
        compare_says_what_moved_per_operation(&a, &b);
    } else {
        eprintln!("compare across releases not checked: 2.3.2 and 2.4.4 were not both run");
    }
    std::fs::remove_dir_all(kept).unwrap();
}

/// A stage's total time over the recording's workload operations, ns.
fn ns_per_op(rec: &Value, stage: &str, class: &str) -> f64 {
    let ops = stage_count(rec, "write") + stage_count(rec, "read");
    by_class(rec, stage, class).1 as f64 / ops as f64
}

/// `zprof compare` of the same job on 2.3.2 and 2.4.4 names both releases
/// and lists the stages whose time per workload operation moved, each with
/// the figures the two recordings give; among them the log block writes,
/// which left the main pool for the special vdev.
fn compare_says_what_moved_per_operation(a: &Path, b: &Path) {
    let output = zprof()
        .arg("compare")
        .args([a, b])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    let note = comparison["releases_differ"].as_str().unwrap_or("");
    assert!(note.contains("2.3.2") && note.contains("2.4.4"), "{note}");
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (ra, rb) = (read(a), read(b));
    let moved = comparison["moved"].as_array().unwrap();
    for m in moved {
        let (stage, class) = (m["stage"].as_str().unwrap(), m["detail"].as_str().unwrap());
        for (rec, side) in [(&ra, "a_ns_per_op"), (&rb, "b_ns_per_op")] {
            let want = ns_per_op(rec, stage, class);
            let got = m[side].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-6 * want.max(1.0),
                "{stage} {class} {side}: {got} against {want}"
            );
        }
    }
    let row = |class: &str| {
        moved
            .iter()
            .find(|m| m["stage"] == "zil_log_write" && m["detail"] == class)
            .unwrap_or_else(|| panic!("zil_log_write {class} did not move: {moved:#?}"))
    };
    assert!(row("main pool")["b_ns_per_op"] == 0.0 && row("special vdev")["a_ns_per_op"] == 0.0);
    let table = zprof().arg("compare").args([a, b]).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    eprintln!("{table}");
    assert!(table.contains("the stages that moved most"), "{table}");
}

/// Where the log blocks of a pool with a special vdev and no log vdev went,
/// by the lab's own count of the special leaf's writes: from 2.4 to the
/// special vdev (zio_alloc_zil tries it before the normal class), before to
/// the main pool (the special vdev then takes only the txg's metadata, a
/// few writes a second against a commit's every few milliseconds). zprof's
/// zil_log_write rows and its sync-write finding must name that place.
fn log_blocks_are_named_where_the_lab_saw_them(
    version: &str,
    lab: &Value,
    rec: &Value,
    recording: &Path,
) {
    let commits = lab["totals"]["zil_commits_all"].as_u64().unwrap();
    let special_writes: u64 = lab["jobs"][0]["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["vdev_class"] == "special")
        .map(|l| l["write_ops"].as_u64().unwrap())
        .sum();
    let on_special = special_writes > commits / 2;
    eprintln!("{version}: the special leaf took {special_writes} writes for {commits} commits");
    assert_eq!(
        on_special,
        version.starts_with("2.4."),
        "{version}: {special_writes} special writes for {commits} commits"
    );
    let (place, words) = if on_special {
        ("special vdev", "on the special vdev")
    } else {
        ("main pool", "to the main pool")
    };
    let (named, _) = by_class(rec, "zil_log_write", place);
    let all = stage_count(rec, "zil_log_write");
    assert!(
        all > 0 && named == all,
        "{version}: {named} of {all} commits' log block writes named {place}"
    );
    let bound = common::explain_json(recording, &[])
        .into_iter()
        .find(|f| f["kind"] == "sync_write_bound")
        .unwrap_or_else(|| panic!("{version}: no sync_write_bound finding"));
    let title = bound["title"].as_str().unwrap();
    assert!(title.contains(words), "{version}: {title}");
}
