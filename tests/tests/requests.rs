//! The request layer's report, findings and off-CPU graph, from recordings
//! the guest test made on a real zfs.ko (tests/data/README.md says how):
//! what `zprof report`, `explain` and `flamegraph` make of them, without
//! the guest.
mod common;

use std::path::PathBuf;

use common::{scratch, stderr, zprof};
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    common::data_dir().join(name)
}

fn run(args: &[&str], file: &str) -> String {
    let output = zprof().args(args).arg(data(file)).output().unwrap();
    assert!(
        output.status.success(),
        "zprof {args:?}: {}",
        stderr(&output)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_report_opens_with_the_requests_of_each_dataset_process_and_cgroup() {
    let by_dataset = run(&["report"], "guest-2.1.11-requests.json");
    for dataset in ["rq/fs1", "rq/fs2", "rq/v1", "rq/v2"] {
        assert!(
            by_dataset.lines().any(|l| l.contains(dataset)),
            "no row for {dataset}:\n{by_dataset}"
        );
    }
    assert!(
        by_dataset.find("REQ ").unwrap() < by_dataset.find("STAGE ").unwrap(),
        "requests come before the stages"
    );
    let by_process = run(&["report", "--by", "process"], "guest-2.1.11-requests.json");
    assert!(
        by_process.contains("fio-a[") && by_process.contains("fio-b["),
        "{by_process}"
    );
    let by_cgroup = run(&["report", "--by", "cgroup"], "guest-2.1.11-requests.json");
    let rows: Vec<&str> = by_cgroup
        .lines()
        .filter(|l| l.starts_with("file ") || l.starts_with("zvol "))
        .collect();
    assert!(
        rows.iter()
            .all(|l| l.contains(" /a ") || l.contains(" /b ")),
        "{rows:#?}"
    );
}

#[test]
fn slow_requests_are_listed_with_the_stages_they_waited_in() {
    let text = run(&["report"], "guest-2.1.11-requests.json");
    let section = text
        .split("slowest requests")
        .nth(1)
        .expect("no slowest-requests section");
    let fsync = section
        .lines()
        .find(|l| l.contains(" fsync "))
        .expect("no slow fsync listed");
    assert!(
        fsync.contains("zil_commit") && fsync.contains("log block write"),
        "{fsync}"
    );
    assert!(
        section
            .lines()
            .any(|l| l.contains("zvol") && l.contains("not joined")),
        "zvol rows must say their stages are not joined"
    );
}

#[test]
fn explain_sets_sync_requests_against_the_commits() {
    let findings: Value = serde_json::from_str(&run(
        &["explain", "--format", "json"],
        "guest-2.1.11-requests.json",
    ))
    .unwrap();
    let sync = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "sync_write_bound")
        .expect("no sync-write finding");
    let line = sync["evidence"][0].as_str().unwrap();
    assert!(
        line.starts_with("as the application saw them:")
            && line.contains("fsyncs")
            && line.contains("zil_commit took"),
        "{line}"
    );
}

#[test]
fn a_zvol_written_in_pieces_of_its_blocks_is_named_with_the_reads_it_cost() {
    let recording: Value =
        serde_json::from_str(&std::fs::read_to_string(data("guest-2.1.11-zvol-rmw.json")).unwrap())
            .unwrap();
    let findings: Value = serde_json::from_str(&run(
        &["explain", "--format", "json"],
        "guest-2.1.11-zvol-rmw.json",
    ))
    .unwrap();
    let rmw = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "zvol_read_modify_write")
        .expect("no read-modify-write finding");
    assert!(rmw["title"].as_str().unwrap().contains("read-modify-write"));
    // Bounds from the job and the pool, not the finding's formula: fio wrote
    // 4k requests at random into a 32 MiB region of a zvol of 64k blocks
    // (512 blocks) with primarycache=metadata, so each block was read from
    // disk at least once, and at most once per txg that dirtied it (a block
    // dirty in the open txg is written over in memory).
    let (writes, written) = recording["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["op"] == "write")
        .fold((0, 0), |(n, b), r| {
            (
                n + r["count"].as_u64().unwrap(),
                b + r["bytes"].as_u64().unwrap(),
            )
        });
    assert_eq!(written, writes * 4096, "fio's requests were all 4k");
    let (blocks, block_bytes) = (512.0, 65536.0);
    let txgs = recording["txgs"].as_array().unwrap().len() as f64;
    let per_byte = common::figure(rmw, "read_bytes_per_written_byte");
    let (low, high) = (
        blocks * block_bytes / written as f64,
        txgs * blocks * block_bytes / written as f64,
    );
    assert!(
        (low..=high).contains(&per_byte),
        "{per_byte:.3} bytes read per byte written, outside {low:.3}..{high:.3} ({txgs} txgs)"
    );
    let per_write = common::figure(rmw, "block_reads_per_write");
    let (low, high) = (blocks / writes as f64, txgs * blocks / writes as f64);
    assert!(
        (low..=high).contains(&per_write),
        "{per_write:.4} block reads per write, outside {low:.4}..{high:.4}"
    );
    assert_eq!(common::figure(rmw, "volblocksize"), 65536.0);
    assert!(
        rmw["action"].as_str().unwrap().contains("volblocksize=4k"),
        "{}",
        rmw["action"]
    );
}

#[test]
fn the_off_cpu_graph_shows_where_fio_blocked() {
    let dir = scratch("requests", "offcpu");
    let folded = dir.join("offcpu.folded");
    let output = zprof()
        .args(["flamegraph", "--kind", "off-cpu", "-o"])
        .arg(&folded)
        .arg(data("guest-2.1.11-requests.json"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&folded).unwrap();
    // On the kernel the walk reaches the commit itself (zil_commit tail-calls
    // zil_commit_impl) beside zprof's stage frame.
    assert!(
        text.lines()
            .any(|l| l.contains("[in_zil_commit]") && l.contains(";zil_commit_impl_[k];")),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_graph_of_named_processes_keeps_only_their_stacks_and_names_the_others() {
    let dir = scratch("requests", "process");
    let folded = dir.join("fio-a.folded");
    let output = zprof()
        .args([
            "flamegraph",
            "--kind",
            "off-cpu",
            "--process",
            "fio-a",
            "-o",
        ])
        .arg(&folded)
        .arg(data("guest-2.1.11-requests.json"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&folded).unwrap();
    assert!(
        !text.is_empty() && text.lines().all(|l| l.starts_with("fio-a;")),
        "{text}"
    );
    let output = zprof()
        .args([
            "flamegraph",
            "--kind",
            "off-cpu",
            "--process",
            "postgres",
            "-o",
        ])
        .arg(dir.join("none.svg"))
        .arg(data("guest-2.1.11-requests.json"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no stacks of postgres") && stderr(&output).contains("fio-b"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
