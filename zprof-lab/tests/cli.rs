//! Integration tests: run the real `zprof-lab` binary on tiny pools (a second
//! or two each) and check its JSON, its exit codes and that it cleans up.
//! They need root-free libzpool only (no kernel module), as the lab itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use zprof_lab::report::Report;

fn lab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zprof-lab"))
}

/// A fresh, empty parent directory for one test's work directory.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("zprof-lab-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(d: &Path) -> usize {
    std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0)
}

fn json(out: &Output) -> Report {
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON report")
}

#[test]
fn fsync_every_write_commits_once_per_write() {
    let dir = scratch("fsync");
    let out = lab()
        .args(["run", "--layout", "raidz1:3", "--vdev-size", "1g", "--output-format", "json", "--dir"])
        .arg(&dir)
        .args(["--job", "name=async,rw=randwrite,bs=4k,size=16m,ios=2000"])
        .args(["--job", "name=fsync,rw=randwrite,bs=4k,size=16m,ios=200,fsync=1"])
        .args(["--job", "name=every4,rw=write,bs=8k,size=16m,ios=100,fsync=4"])
        .output()
        .unwrap();
    let r = json(&out);
    assert_eq!(r.jobs.len(), 3);
    let (a, f, e) = (&r.jobs[0], &r.jobs[1], &r.jobs[2]);
    assert_eq!((a.write.total_ios, a.zil_commits), (2000, 0));
    assert_eq!((f.write.total_ios, f.zil_commits, f.zil_commits_all), (200, 200, 200));
    assert_eq!(e.zil_commits, 25);
    for j in &r.jobs {
        assert!(j.write.iops > 0.0 && j.write.io_bytes > 0, "{}", j.jobname);
        assert!(j.txgs_synced >= 1, "the job-end sync is counted");
        assert_eq!(j.txg_last - j.txg_first + 1, j.txgs_synced);
        assert!(j.write.lat_ns.percentile.contains_key("99.900000"));
        assert!(j.leaf_write_bytes > 0);
    }
    // fsync=1 with no log device: each commit flushes the raidz's 3 leaves.
    assert!(f.flushes >= 3 * 200, "flushes {}", f.flushes);
    // The lab's commits plus exactly one from zil_close in teardown.
    assert_eq!(r.totals.zil_commits_lab, 225);
    assert_eq!(r.totals.zil_commits_internal, 1);
    let p = &r.pools[0];
    assert_eq!(p.spa_sync_calls, p.last_txg - p.first_txg + 1);
    assert_eq!(r.totals.spa_sync_calls, p.spa_sync_calls);
    assert_eq!(entries(&dir), 0, "work directory removed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compression_shows_in_the_account() {
    let dir = scratch("compress");
    let out = lab()
        .args(["run", "--vdev-size", "1g", "--compression", "lz4", "--volblocksize", "64k"])
        .args(["--output-format", "json", "--dir"])
        .arg(&dir)
        .args(["--job", "name=w,rw=write,bs=64k,size=8m,ios=128,buffer_compress_percentage=75"])
        .output()
        .unwrap();
    let r = json(&out);
    let acct = &r.jobs[0].pool;
    assert!(acct.compressratio > 2.0, "compressratio {}", acct.compressratio);
    assert!(acct.logical_used_bytes >= 8 << 20);
    assert!(acct.used_bytes < acct.logical_used_bytes / 2);
    assert_eq!(entries(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_reach_the_vdevs() {
    let dir = scratch("read");
    let out = lab()
        .args(["run", "--vdev-size", "1g", "--vdev-model", "nvme", "--output-format", "json", "--dir"])
        .arg(&dir)
        .args(["--job", "name=r,rw=randread,bs=8k,size=8m,ios=200"])
        .output()
        .unwrap();
    let r = json(&out);
    let j = &r.jobs[0];
    assert_eq!(j.read.total_ios, 200);
    assert_eq!(j.write.total_ios, 0);
    assert!(j.leaf_read_bytes > 0, "ARC was emptied, reads hit the vdevs");
    assert_eq!(entries(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_and_leaves_nothing() {
    let dir = scratch("bad");
    let cases: &[&[&str]] = &[
        &["run", "--layout", "raidz3:3", "--job", "rw=write"],
        &["run", "--compression", "lz5", "--job", "rw=write"],
        &["run", "--job", "rw=write,bs=1m,size=64k"],
        &["run", "--vdev-model", "hdd:seek=fast", "--job", "rw=write"],
    ];
    for args in cases {
        let out = lab().args(*args).arg("--dir").arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}: says why");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(entries(&dir), 0);
    // A directory we cannot create anything in.
    let out = lab().args(["run", "--dir", "/proc/zprof-lab-nope", "--job", "rw=write"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("work directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigint_stops_reports_and_cleans_up() {
    let dir = scratch("sigint");
    let child = lab()
        .args(["run", "--vdev-size", "1g", "--output-format", "json", "--dir"])
        .arg(&dir)
        .args(["--job", "name=long,rw=randwrite,bs=4k,size=16m,runtime=60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the pool exists, then interrupt.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while entries(&dir) == 0 || std::fs::read_dir(&dir).unwrap().flatten().all(|e| entries(&e.path()) < 2) {
        assert!(std::time::Instant::now() < deadline, "pool never appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r.interrupted && r.jobs[0].interrupted);
    assert!(r.jobs[0].write.total_ios > 0);
    assert!(r.jobs[0].runtime_ms < 30_000);
    assert_eq!(entries(&dir), 0, "files removed");
    let _ = std::fs::remove_dir_all(&dir);
}
