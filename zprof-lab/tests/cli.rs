//! Integration tests: run the real `zprof-lab` binary on tiny pools (a second
//! or two each) and check its JSON, its exit codes and that it cleans up.
//! They need root-free libzpool only (no kernel module), as the lab itself.

use std::io::BufRead as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        .args([
            "run",
            "--layout",
            "raidz1:3",
            "--vdev-size",
            "1g",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .args(["--job", "name=async,rw=randwrite,bs=4k,size=16m,ios=2000"])
        .args([
            "--job",
            "name=fsync,rw=randwrite,bs=4k,size=16m,ios=200,fsync=1",
        ])
        .args([
            "--job",
            "name=every4,rw=write,bs=8k,size=16m,ios=100,fsync=4",
        ])
        .output()
        .unwrap();
    let r = json(&out);
    assert_eq!(r.jobs.len(), 3);
    let (a, f, e) = (&r.jobs[0], &r.jobs[1], &r.jobs[2]);
    assert_eq!((a.write.total_ios, a.zil_commits), (2000, 0));
    assert_eq!(
        (f.write.total_ios, f.zil_commits, f.zil_commits_all),
        (200, 200, 200)
    );
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
        .args([
            "run",
            "--vdev-size",
            "1g",
            "--compression",
            "lz4",
            "--volblocksize",
            "64k",
        ])
        .args(["--output-format", "json", "--dir"])
        .arg(&dir)
        .args([
            "--job",
            "name=w,rw=write,bs=64k,size=8m,ios=128,buffer_compress_percentage=75",
        ])
        .output()
        .unwrap();
    let r = json(&out);
    let acct = &r.jobs[0].pool;
    assert!(
        acct.compressratio > 2.0,
        "compressratio {}",
        acct.compressratio
    );
    assert!(acct.logical_used_bytes >= 8 << 20);
    assert!(acct.used_bytes < acct.logical_used_bytes / 2);
    assert_eq!(entries(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_reach_the_vdevs() {
    let dir = scratch("read");
    let out = lab()
        .args([
            "run",
            "--vdev-size",
            "1g",
            "--vdev-model",
            "nvme",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .args(["--job", "name=r,rw=randread,bs=8k,size=8m,ios=200"])
        .output()
        .unwrap();
    let r = json(&out);
    let j = &r.jobs[0];
    assert_eq!(j.read.total_ios, 200);
    assert_eq!(j.write.total_ios, 0);
    assert!(
        j.leaf_read_bytes > 0,
        "ARC was emptied, reads hit the vdevs"
    );
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
    let out = lab()
        .args(["run", "--dir", "/proc/zprof-lab-nope", "--job", "rw=write"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("work directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigint_stops_reports_and_cleans_up() {
    let dir = scratch("sigint");
    let mut child = lab()
        .args([
            "run",
            "--vdev-size",
            "1g",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .args(["--job", "name=long,rw=randwrite,bs=4k,size=16m,runtime=60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt mid-job: once the job has written.
    wait_for_job_data(&mut child, &dir);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r.interrupted && r.jobs[0].interrupted);
    assert!(r.jobs[0].write.total_ios > 0);
    // Stopped by the signal, not by its runtime=60.
    assert!(
        r.jobs[0].runtime_ms < 60_000,
        "the job ran {} ms: its whole runtime",
        r.jobs[0].runtime_ms
    );
    assert_eq!(entries(&dir), 0, "files removed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_of_compressed_blocks_with_primarycache_metadata() {
    // The volblocksize scenario's read side: objects laid out with the job's data,
    // and every 4k read fetching its whole (compressed) 64k block from the vdevs.
    let dir = scratch("pcache");
    let out = lab()
        .args([
            "run",
            "--vdev-size",
            "1g",
            "--compression",
            "lz4",
            "--volblocksize",
            "64k",
        ])
        .args([
            "--primarycache",
            "metadata",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .args([
            "--job",
            "name=r,rw=randread,bs=4k,size=8m,ios=100,buffer_compress_percentage=75",
        ])
        .output()
        .unwrap();
    let r = json(&out);
    let j = &r.jobs[0];
    assert_eq!(j.layout_bytes, 8 << 20);
    assert!(
        j.pool.compressratio > 2.0,
        "laid out with 75% data: {}",
        j.pool.compressratio
    );
    assert_eq!(r.pools[0].properties["primarycache"], "metadata");
    // 100 reads of 4k, each reading a compressed 64k block (>= 16k on disk): no ARC hits.
    assert!(
        j.leaf_read_bytes >= 100 * (16 << 10),
        "leaf reads {}",
        j.leaf_read_bytes
    );
    assert_eq!(
        (j.used_delta_bytes, j.logical_used_delta_bytes),
        (0, 0),
        "reads change no space"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scenario_check_reports_criteria_and_new_fields() {
    // A one-algorithm, 1 MiB compression scenario: quick, but the whole --check path.
    let dir = scratch("check");
    let out = lab()
        .args([
            "scenario",
            "compression",
            "--compression",
            "lz4",
            "--size",
            "1m",
            "--check",
        ])
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
        assert!(
            j.cpu_ms > 0.0 && j.sync_ms > 0.0,
            "{}: cpu {} sync {}",
            j.jobname,
            j.cpu_ms,
            j.sync_ms
        );
        assert!(
            j.logical_used_delta_bytes >= 1 << 20,
            "{}",
            j.logical_used_delta_bytes
        );
    }
    let (random, pct75) = (&r.jobs[0], &r.jobs[1]);
    assert!(
        pct75.used_delta_bytes * 2 < random.used_delta_bytes,
        "75% data takes far less space"
    );
    // The text form prints one line per criterion and the verdict.
    let out = lab()
        .args([
            "scenario",
            "compression",
            "--compression",
            "lz4",
            "--size",
            "1m",
            "--check",
        ])
        .args(["--vdev-size", "1g", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("check compression:") && text.contains("PASS: 2 of 2 criteria passed"),
        "{text}"
    );
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
        .args([
            "scenario",
            "l2arc",
            "--runtime",
            "2",
            "--check",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let r = json(&out);
    let gains: Vec<String> = zprof_lab::scenario::l2arc_rows(&r)
        .iter()
        .map(|x| {
            format!(
                "{}: {:.0} -> {:.0} IOPS ({:.1}x)",
                x.volblocksize,
                x.arc_iops,
                x.l2arc_iops,
                x.gain()
            )
        })
        .collect();
    eprintln!("{gains:?}");
    assert_eq!(r.checks.len(), 3, "{:?}", r.checks);
    assert!(r.checks.iter().all(|c| c.pass), "{:?} {gains:?}", r.checks);
    assert!(
        r.jobs.iter().all(|j| j.warmup_s > 0.0),
        "every job warmed up"
    );
    assert_eq!(entries(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn abort_removes_the_work_directory() {
    // libzpool aborts the process on a failed assertion; the lab's handler must still
    // remove the vdev files and the work directory (and the process still die of SIGABRT).
    let dir = scratch("abort");
    let mut child = lab()
        .args([
            "run",
            "--vdev-size",
            "1g",
            "--logs",
            "1",
            "--output-format",
            "json",
            "--dir",
        ])
        .arg(&dir)
        .args(["--job", "name=long,rw=randwrite,bs=4k,size=16m,runtime=60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Abort mid-job (the pool with its data and log files in use): once the job has written.
    wait_for_job_data(&mut child, &dir);
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
    assert!(
        unsafe { libc::geteuid() } == 0,
        "this test mounts a tmpfs: run it as root (cargo xtask test does)"
    );
    let dir = scratch("suspended");
    // Declared before the lab: dropped after it (the lab is killed first).
    let _tmpfs = Tmpfs::mount(&dir, "40m");
    let mut lab = KillOnDrop(
        lab()
            .args(["run", "--vdev-size", "1g", "--dir"])
            .arg(&dir)
            .args(["--job", "name=fill,rw=write,bs=1m,size=512m,runtime=60"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let err = StderrLog::start(&mut lab.0);
    // The pool's own word (libzpool's warning), and the full tmpfs that caused it:
    // without them the signals below would test the ordinary stop.
    err.wait_for(
        &mut lab.0,
        "has encountered an uncorrectable I/O failure and has been suspended",
        GUARD,
    );
    let free = free_bytes(&dir);
    assert!(
        free < 1 << 20,
        "the pool suspended with {free} bytes free on its 40 MiB tmpfs: {}",
        err.text()
    );
    let pid = lab.0.id() as i32;
    signal_and_wait_delivered(pid, libc::SIGINT);
    unsafe { libc::kill(pid, libc::SIGINT) };
    let status = wait_exit(&mut lab.0, GUARD, &err);
    let err = err.text();
    assert_eq!(status.code(), Some(130), "{err}");
    // The second signal, not the 60 s stop watchdog, abandoned the pool.
    assert!(
        err.contains("stopping at once (a second signal); removed the work directory"),
        "{err}"
    );
    assert_eq!(entries(&dir), 0, "files left in the work directory: {err}");
}

/// Far above how long any step here takes: past it a test fails on a hang
/// instead of waiting forever. Not a speed bound.
const GUARD: Duration = Duration::from_secs(120);

/// Waits until the job's data has reached the vdev files under `dir`: more
/// than 8 MiB allocated in them (a new pool takes about 2 MiB; the job's first
/// txg, within about 5 s, writes its 16 MiB). The job has then written.
fn wait_for_job_data(child: &mut Child, dir: &Path) {
    let deadline = Instant::now() + GUARD;
    while allocated_bytes(dir) <= 8 << 20 {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the lab exited ({status}) before its job's data reached its vdev files");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the job's data never reached the vdev files in {GUARD:?} ({} bytes allocated)",
                allocated_bytes(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Bytes allocated on disk to the files of the work directories under `dir`.
fn allocated_bytes(dir: &Path) -> u64 {
    let files = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|w| std::fs::read_dir(w.path()).into_iter().flatten().flatten());
    files
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

/// Free bytes of the file system holding `dir` (statvfs).
fn free_bytes(dir: &Path) -> u64 {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::statvfs(c.as_ptr(), &mut st) },
        0,
        "statvfs {}",
        dir.display()
    );
    st.f_bavail * st.f_frsize
}

/// Sends `signal` to `pid` and waits until it left the process's pending set:
/// the handler took it, so a second one is a second signal, not merged into
/// the first while still pending.
fn signal_and_wait_delivered(pid: i32, signal: i32) {
    let bit = 1u64 << (signal - 1);
    let pending = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        field("ShdPnd:").unwrap_or(0) | field("SigPnd:").unwrap_or(0)
    };
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, signal) };
    let deadline = Instant::now() + GUARD;
    while pending() & bit != 0 {
        assert!(
            Instant::now() < deadline,
            "signal {signal} to pid {pid} still pending after {GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` to exit, for at most `limit`.
fn wait_exit(child: &mut Child, limit: Duration, err: &StderrLog) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the lab still ran {limit:?} after the second SIGINT: {}",
            err.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child's stderr, read on a thread as it comes, for the test to wait on.
struct StderrLog(Arc<Mutex<String>>);

impl StderrLog {
    fn start(child: &mut Child) -> StderrLog {
        let text = Arc::new(Mutex::new(String::new()));
        let pipe = std::io::BufReader::new(child.stderr.take().expect("stderr piped"));
        let sink = Arc::clone(&text);
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        StderrLog(text)
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// Waits for `needle` on the child's stderr, for at most `limit`.
    fn wait_for(&self, child: &mut Child, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.text().contains(needle) {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the lab exited ({status}) without saying {needle:?}: {}",
                    self.text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the lab did not say {needle:?} in {limit:?}: {}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A child killed (and reaped) when dropped: a failed assertion must not
/// leave the lab running on the tmpfs.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tmpfs mounted on a directory, unmounted and the directory removed when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(mounted.success(), "mount tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
