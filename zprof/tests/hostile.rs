//! zprof under bad input and signals (issue 14): nothing is lost, nothing is
//! orphaned, nothing absurd is believed. The recording tests need root.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

mod common;
use common::{require_root, stderr, zprof};

fn scratch(name: &str) -> PathBuf {
    common::scratch("zprof-hostile", name)
}

/// An unwritable `-o` or `--flamegraph` is refused before anything runs.
#[test]
fn unwritable_outputs_are_refused_before_the_command_runs() {
    require_root();
    let dir = scratch("outputs");
    let marker = dir.join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    for (flag, path, says) in [
        ("-o", dir.clone(), "it is a directory"),
        ("-o", dir.join("missing/rec.json"), "does not exist"),
        ("--flamegraph", dir.clone(), "it is a directory"),
    ] {
        let output = zprof().args(["record", "--target", "libzpool", flag]).arg(&path).args(touch).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag} {}: {}", path.display(), stderr(&output));
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
        assert!(!marker.exists(), "the command ran although {flag} {} cannot be written", path.display());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `record -d` ends the command it ran at the deadline (SIGTERM), and passes
/// its status on; the command does not run on untraced.
#[test]
fn the_duration_ends_the_command() {
    require_root();
    let started = Instant::now();
    let output = zprof().args(["record", "--target", "libzpool", "--no-explain", "-d", "1", "--", "sleep", "30"]).output().unwrap();
    assert_eq!(output.status.code(), Some(128 + libc::SIGTERM), "{}", stderr(&output));
    assert!(stderr(&output).contains("the duration is over; sent SIGTERM"), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
}

/// SIGINT sent to zprof alone (not to its process group) reaches the command
/// after a grace period, and zprof reports and exits with its status.
#[test]
fn sigint_to_zprof_alone_is_passed_on() {
    require_root();
    let child = zprof()
        .args(["record", "--target", "libzpool", "--no-explain", "--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(128 + libc::SIGINT), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    let sleeping = Command::new("pgrep").args(["-x", "-f", "sleep 30"]).output().unwrap();
    assert!(sleeping.stdout.is_empty(), "sleep 30 still runs: {}", String::from_utf8_lossy(&sleeping.stdout));
}

/// Durations that overflowed the clock are refused in one line.
#[test]
fn absurd_durations_are_refused() {
    for d in ["100000000000000000000", "10000000000000000000", "9000h"] {
        let output = zprof().args(["record", "--target", "libzpool", "-d", d]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{d}: {}", stderr(&output));
        assert!(stderr(&output).contains("at most 366 days"), "{}", stderr(&output));
    }
}

/// Endless or huge files are refused without reading them whole, and a
/// read error names its cause once.
#[test]
fn endless_and_foreign_files_are_refused_at_once() {
    let started = Instant::now();
    let output = zprof().args(["report", "/dev/zero"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not a JSON object"), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());

    let dir = scratch("files");
    let big = dir.join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(300 << 20).unwrap(); // sparse: no disk used
    let output = zprof().arg("report").arg(&big).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("more than 256 MiB"), "{}", stderr(&output));

    let output = zprof().args(["report", "/nonexistent/rec.json"]).output().unwrap();
    let err = stderr(&output);
    assert_eq!(err.matches("No such file or directory").count(), 1, "the cause once: {err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Recordings whose figures cannot be measurements (a negative duration,
/// wrapped counters) are refused, not rendered.
#[test]
fn recordings_with_impossible_figures_are_refused() {
    require_root();
    let dir = scratch("impossible");
    let good = dir.join("good.json");
    let output = zprof().args(["record", "--target", "libzpool", "--no-explain", "-o"]).arg(&good).args(["--", "true"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&good).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["duration_s"] = serde_json::json!(-10.0);
    let bad = dir.join("negative.json");
    std::fs::write(&bad, value.to_string()).unwrap();
    let output = zprof().arg("report").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("duration -10 s is not a recording's length"), "{}", stderr(&output));
    std::fs::remove_dir_all(dir).unwrap();
}
