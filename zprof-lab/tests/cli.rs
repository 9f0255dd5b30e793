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
    // Exit 3: a scenario's checks failed; its report says which.
    assert!(
        out.status.success() || out.status.code() == Some(3),
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

#[test]
fn reads_of_compressed_blocks_with_primarycache_metadata() {
    // The volblocksize scenario's read side: objects laid out with the job's data,
    // and every 4k read fetching its whole (compressed) 64k block from the vdevs.
    let dir = scratch("pcache");
    let out = lab()
        .args(["run", "--vdev-size", "1g", "--compression", "lz4", "--volblocksize", "64k"])
        .args(["--primarycache", "metadata", "--output-format", "json", "--dir"])
        .arg(&dir)
        .args(["--job", "name=r,rw=randread,bs=4k,size=8m,ios=100,buffer_compress_percentage=75"])
        .output()
        .unwrap();
    let r = json(&out);
    let j = &r.jobs[0];
    assert_eq!(j.layout_bytes, 8 << 20);
    assert!(j.pool.compressratio > 2.0, "laid out with 75% data: {}", j.pool.compressratio);
    assert_eq!(r.pools[0].properties["primarycache"], "metadata");
    // 100 reads of 4k, each reading a compressed 64k block (>= 16k on disk): no ARC hits.
    assert!(j.leaf_read_bytes >= 100 * (16 << 10), "leaf reads {}", j.leaf_read_bytes);
    assert_eq!((j.used_delta_bytes, j.logical_used_delta_bytes), (0, 0), "reads change no space");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scenario_check_reports_criteria_and_new_fields() {
    // A one-algorithm, 1 MiB compression scenario: quick, but the whole --check path.
    let dir = scratch("check");
    let out = lab()
        .args(["scenario", "compression", "--compression", "lz4", "--size", "1m", "--check"])
        .args(["--vdev-size", "1g", "--output-format", "json", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let r = json(&out);
    assert_eq!(r.scenario.as_deref(), Some("Compression"));
    assert_eq!(r.jobs.len(), 2);
    assert_eq!(r.checks.len(), 2, "{:?}", r.checks);
    assert!(r.checks.iter().all(|c| c.pass), "{:?}", r.checks);
    for j in &r.jobs {
        assert_eq!(j.write.io_bytes, 1 << 20);
        assert!(j.cpu_ms > 0.0 && j.sync_ms > 0.0, "{}: cpu {} sync {}", j.jobname, j.cpu_ms, j.sync_ms);
        assert!(j.logical_used_delta_bytes >= 1 << 20, "{}", j.logical_used_delta_bytes);
    }
    let (random, pct75) = (&r.jobs[0], &r.jobs[1]);
    assert!(pct75.used_delta_bytes * 2 < random.used_delta_bytes, "75% data takes far less space");
    // The text form prints one line per criterion and the verdict.
    let out = lab()
        .args(["scenario", "compression", "--compression", "lz4", "--size", "1m", "--check"])
        .args(["--vdev-size", "1g", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("check compression:") && text.contains("PASS: 2 of 2 criteria passed"), "{text}");
    assert_eq!(entries(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn l2arc_scenario_reproduces_the_published_shape() {
    // Issue 17: with a warmed ssd cache device at least 10x the 4k random
    // reads at volblocksize 8k, and a gain that falls as volblocksize grows.
    // The default sizes (4 x 128 MiB against a 128 MiB ARC): with less data
    // the ARC holds half of it and the 64k pool's hits blur the shape.
    let dir = scratch("l2arc");
    let out = lab()
        .args(["scenario", "l2arc", "--runtime", "2", "--check", "--output-format", "json", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let r = json(&out);
    let gains: Vec<String> = zprof_lab::scenario::l2arc_rows(&r)
        .iter()
        .map(|x| format!("{}: {:.0} -> {:.0} IOPS ({:.1}x)", x.volblocksize, x.arc_iops, x.l2arc_iops, x.gain()))
        .collect();
    eprintln!("{gains:?}");
    assert_eq!(r.checks.len(), 3, "{:?}", r.checks);
    assert!(r.checks.iter().all(|c| c.pass), "{:?} {gains:?}", r.checks);
    assert!(r.jobs.iter().all(|j| j.warmup_s > 0.0), "every job warmed up");
    assert_eq!(entries(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn abort_removes_the_work_directory() {
    // libzpool aborts the process on a failed assertion; the lab's handler must still
    // remove the vdev files and the work directory (and the process still die of SIGABRT).
    let dir = scratch("abort");
    let child = lab()
        .args(["run", "--vdev-size", "1g", "--logs", "1", "--output-format", "json", "--dir"])
        .arg(&dir)
        .args(["--job", "name=long,rw=randwrite,bs=4k,size=16m,runtime=60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while entries(&dir) == 0 || std::fs::read_dir(&dir).unwrap().flatten().all(|e| entries(&e.path()) < 3) {
        assert!(std::time::Instant::now() < deadline, "pool never appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGABRT) };
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("removed the work directory"), "{err}");
    assert_eq!(entries(&dir), 0, "work directory removed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pool suspended by I/O errors (its vdev files on a full tmpfs) never
/// finishes a txg: a second SIGINT abandons it, removes the work directory
/// and exits 130 (issue 14: only SIGKILL stopped it, leaving its files).
#[test]
fn a_suspended_pool_is_abandoned_on_a_second_signal() {
    assert!(unsafe { libc::geteuid() } == 0, "this test mounts a tmpfs: run it as root (cargo xtask test does)");
    let dir = scratch("suspended");
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=40m", "tmpfs"]).arg(&dir).status().unwrap();
    assert!(mounted.success(), "mount tmpfs on {}", dir.display());
    let child = lab()
        .args(["run", "--vdev-size", "1g", "--dir"])
        .arg(&dir)
        .args(["--job", "name=fill,rw=write,bs=1m,size=512m,runtime=60"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the tmpfs to fill (the pool then suspends), then interrupt twice.
    let full = || {
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        unsafe { libc::statvfs(c.as_ptr(), &mut st) == 0 && st.f_bavail * st.f_frsize < 1 << 20 }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !full() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pid = child.id() as i32;
    unsafe { libc::kill(pid, libc::SIGINT) };
    std::thread::sleep(std::time::Duration::from_secs(3));
    unsafe { libc::kill(pid, libc::SIGINT) };
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let left = entries(&dir);
    let _ = Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}: {err}", started.elapsed());
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(left, 0, "files left in the work directory: {err}");
}
