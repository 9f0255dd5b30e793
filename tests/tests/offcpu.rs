//! Off-CPU time (`record --off-cpu`) on a real lab run: an fsync job's
//! blocked time shows under the stage it blocked in, and agrees with the
//! zil_commit time zprof measured with its own probes.
mod common;

use common::{lab_binary, require_root, scratch, stderr, zprof};
use serde_json::Value;

/// Microseconds blocked in stacks that hold `frame`.
fn blocked_us_under(recording: &Value, frame: &str) -> u64 {
    recording["offcpu"]["stacks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| {
            s["frames"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == frame))
        })
        .map(|s| s["count"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn an_fsync_job_blocks_in_zil_commit_for_most_of_its_commit_time() {
    require_root();
    let dir = scratch("offcpu", "fsync");
    let recording = dir.join("rec.json");
    let output = zprof()
        .args([
            "record",
            "--target",
            "libzpool",
            "--no-explain",
            "--off-cpu",
            "-o",
        ])
        .arg(&recording)
        .arg("--")
        .arg(lab_binary())
        .args(["run", "--dir"])
        .arg(&dir)
        .args([
            "--layout",
            "raidz1:3",
            "--job",
            "name=s,rw=randwrite,bs=4k,fsync=1,runtime=3",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let commit_us = common::stage_field(&rec, "zil_commit", "total_ns") / 1_000;
    let blocked_us = blocked_us_under(&rec, "[in zil_commit]");
    // Measured here: 3,500 of 3,833 ms (91%); the rest is the commit's own CPU
    // and the time it waited for a CPU (preemption is not blocking).
    assert!(
        commit_us > 100_000,
        "the job made too few commits to judge: {commit_us} us"
    );
    assert!(
        blocked_us * 100 >= commit_us * 75 && blocked_us <= commit_us + commit_us / 100,
        "blocked in zil_commit {blocked_us} us, zil_commit took {commit_us} us"
    );
    let svg = dir.join("offcpu.svg");
    let output = zprof()
        .args(["flamegraph", "--kind", "off-cpu", "-o"])
        .arg(&svg)
        .arg(&recording)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("[in_zil_commit]") && text.contains("zprof off-CPU"),
        "the graph names neither the stage nor its kind"
    );
    // The same recording without its off-CPU time: the graph says how to get it.
    let mut without = rec.clone();
    without.as_object_mut().unwrap().remove("offcpu");
    let plain = dir.join("plain.json");
    std::fs::write(&plain, without.to_string()).unwrap();
    let output = zprof()
        .args(["flamegraph", "--kind", "off-cpu", "-o"])
        .arg(dir.join("x.svg"))
        .arg(&plain)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("record it with --off-cpu"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
