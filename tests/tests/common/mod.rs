//! Helpers shared by the integration tests: the binaries under test.
//!
//! This package owns neither binary (cargo's `CARGO_BIN_EXE_*` is only given
//! to the tests of the package that does): both are found in the workspace's
//! target directory, where `cargo build --bins` put them (`cargo xtask test`
//! builds them first).
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;

pub mod ledger;
pub mod serving;

/// The zprof binary under test.
pub fn zprof() -> Command {
    Command::new(zprof_binary())
}

/// zprof's binary in the shared target dir: the debug build, as the tests'
/// own profile. Building these tests does not build it (cargo would only for
/// the zprof package's own tests): after a change to zprof, run `cargo build
/// --bins` before them, as `cargo xtask test` does.
pub fn zprof_binary() -> PathBuf {
    let path = target_dir().join("debug/zprof");
    assert!(
        path.exists(),
        "{} is missing: build it first (cargo build --bins; cargo xtask test does)",
        path.display()
    );
    path
}

/// The workspace's target directory, where cargo put every binary.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// zprof-lab is another package's binary: find it in the shared target dir.
pub fn lab_binary() -> PathBuf {
    let path = target_dir().join("debug/zprof-lab");
    assert!(
        path.exists(),
        "{} is missing: build it first (cargo build -p zprof-lab; cargo xtask test does)",
        path.display()
    );
    path
}

/// Fails the test when not root: the recording tests attach eBPF programs.
pub fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test attaches eBPF programs and needs root: run `cargo xtask test` as root"
    );
}

/// A fresh scratch directory for one test.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a command that must succeed (its stderr in the failure); its stdout.
pub fn run_ok(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What a command wrote to stderr, for assertion messages.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The first JSON document in `text` (the lab's), ignoring what follows (zprof's report).
pub fn first_json(text: &str) -> Value {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    stream
        .next()
        .expect("no JSON document")
        .expect("malformed JSON")
}

/// `zprof MODE` (record or run) around `LAB run --dir DIR ARGS`, writing
/// `recording`, with the lab's JSON output; checks it succeeded and returns
/// that JSON.
pub fn zprof_on_lab(mode: &str, lab: &Path, dir: &Path, recording: &Path, args: &[&str]) -> Value {
    zprof_on_lab_with(mode, &[], lab, dir, recording, args)
}

/// `zprof_on_lab` with zprof options of its own (`--full-timing`...).
pub fn zprof_on_lab_with(
    mode: &str,
    options: &[&str],
    lab: &Path,
    dir: &Path,
    recording: &Path,
    args: &[&str],
) -> Value {
    let output = zprof()
        .args([mode, "--target", "libzpool", "--no-explain"])
        .args(options)
        .arg("-o")
        .arg(recording)
        .arg("--")
        .arg(lab)
        .args(["run", "--dir"])
        .arg(dir)
        .args(args)
        .args(["--output-format", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    first_json(&String::from_utf8_lossy(&output.stdout))
}

/// `zprof explain RECORDING --format json EXTRA`: the findings.
pub fn explain_json(recording: &Path, extra: &[&str]) -> Vec<Value> {
    let output = zprof()
        .arg("explain")
        .arg(recording)
        .args(["--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice::<Value>(&output.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// A finding's figure by name (explain's JSON: `figures` as [name, value] pairs).
pub fn figure(finding: &Value, name: &str) -> f64 {
    finding["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[0] == name)
        .unwrap_or_else(|| panic!("no figure {name}: {finding}"))[1]
        .as_f64()
        .unwrap()
}

/// Events of a stage in a recording, over every class, pool and vdev.
pub fn stage_count(recording: &Value, stage: &str) -> u64 {
    stage_field(recording, stage, "count")
}

/// A histogram field of a stage summed over every class, pool and vdev.
pub fn stage_field(recording: &Value, stage: &str, field: &str) -> u64 {
    recording["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["stage"] == stage)
        .map(|h| h[field].as_u64().unwrap())
        .sum()
}

/// A histogram field of one class of a stage, summed over pools and vdevs.
pub fn class_field(recording: &Value, stage: &str, class: &str, field: &str) -> u64 {
    recording["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["stage"] == stage && h["class_name"] == class)
        .map(|h| h[field].as_u64().unwrap())
        .sum()
}

/// One OpenZFS release the suite runs on: its zprof-lab and its libzpool.
#[derive(Debug, Clone)]
pub struct LabRelease {
    /// "2.1.11".
    pub version: String,
    /// The zprof-lab binary built against it.
    pub lab: PathBuf,
    /// Its libzpool.
    pub libzpool: PathBuf,
}

impl LabRelease {
    /// Whether it is of the MAJOR.MINOR series or a later one.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        let mut parts = self
            .version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
    }
}

/// The workspace's root (this package is its `tests/`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Recordings and benchmark outputs captured from real runs (its README
/// says how). Still in the zprof crate: its unit tests `include_str!` them
/// from there too.
pub fn data_dir() -> PathBuf {
    workspace().join("tests/data")
}

/// The system's release (Debian 12's 2.1.11) and every release of
/// scripts/openzfs-releases that runs here: the suite checks each.
pub fn lab_releases() -> Vec<LabRelease> {
    let system_lib = [
        "/lib/x86_64-linux-gnu/libzpool.so.5",
        "/usr/lib/x86_64-linux-gnu/libzpool.so.5",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .expect("libzpool.so.5 is not installed: run cargo xtask setup");
    let mut releases = vec![LabRelease {
        version: "2.1.11".into(),
        lab: lab_binary(),
        libzpool: system_lib,
    }];
    releases.extend(listed_releases("run"));
    releases.retain(|r| chosen_release(&r.version));
    assert!(
        !releases.is_empty(),
        "ZPROF_TEST_RELEASES names no release the suite runs on"
    );
    releases
}

/// Whether ZPROF_TEST_RELEASES (a comma-separated list of versions, for a
/// developer checking one release) leaves this release in; unset: all.
fn chosen_release(version: &str) -> bool {
    std::env::var("ZPROF_TEST_RELEASES")
        .map(|list| list.split(',').any(|v| v.trim() == version))
        .unwrap_or(true)
}

/// The releases of scripts/openzfs-releases on trial: their lab is built
/// and runs here, a smoke test checks it, the suite does not run on them yet.
pub fn trial_releases() -> Vec<LabRelease> {
    listed_releases("trial")
}

/// The releases scripts/openzfs-releases lists for `use`, with the lab
/// cargo xtask test built for each.
fn listed_releases(use_: &str) -> Vec<LabRelease> {
    let list = std::fs::read_to_string(workspace().join("scripts/openzfs-releases")).unwrap();
    let cache = cache_dir();
    let mut releases = Vec::new();
    for fields in list.lines().map(|l| {
        l.split('#')
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
    }) {
        // A release ZPROF_TEST_RELEASES leaves out needs no lab built.
        if fields.len() < 4 || fields[3] != use_ || !chosen_release(fields[0]) {
            continue;
        }
        let version = fields[0].to_owned();
        let lab = target_dir().join(format!("openzfs-{version}/debug/zprof-lab"));
        assert!(
            lab.exists(),
            "{} is missing: cargo xtask test builds a zprof-lab per release",
            lab.display()
        );
        releases.push(LabRelease {
            libzpool: release_libzpool(&cache, &version),
            version,
            lab,
        });
    }
    releases
}

/// The libzpool of a release that setup.sh unpacked into the cache.
pub fn release_libzpool(cache: &Path, version: &str) -> PathBuf {
    let root = cache.join("openzfs").join(version).join("root");
    ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"]
        .iter()
        .flat_map(|dir| ["libzpool.so.6", "libzpool.so.7"].map(|name| root.join(dir).join(name)))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "no libzpool.so.6 or .7 under {}: run cargo xtask setup",
                root.display()
            )
        })
}

/// The cache setup.sh unpacks OpenZFS releases into.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ZPROF_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var("HOME").unwrap()).join(".cache/zprof"))
}

/// Reads a spawned zprof's stderr until its "Tracing" line (the probes are
/// attached), leaving the pipe in place for `wait_with_output` to collect the rest.
pub fn wait_until_tracing(child: &mut std::process::Child) {
    use std::io::Read as _;
    let pipe = child
        .stderr
        .as_mut()
        .expect("zprof spawned with stderr piped");
    let mut seen = String::new();
    let started = std::time::Instant::now();
    while !seen.contains("Tracing") {
        let mut buf = [0u8; 256];
        let n = pipe.read(&mut buf).unwrap();
        assert!(n > 0, "zprof exited before attaching: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "no Tracing line: {seen}"
        );
    }
}

/// A word of rendered text that shows a number that is not one: "NaN" or
/// "inf", alone or with a sign, unit or suffix ("NaNx", "-inf%"); "infer" is fine.
pub fn non_number_word(text: &str) -> Option<&str> {
    text.split(|c: char| c.is_whitespace() || "()[],;:/".contains(c))
        .find(|token| {
            let bare = token
                .trim_start_matches(['-', '+'])
                .trim_end_matches(['%', 'x', 's']);
            bare == "inf" || bare == "NaN"
        })
}

/// How long this host takes to run a thread woken after both CPUs idled
/// through an hdd-like wait (8 ms), in microseconds: the median of 40 wake-ups
/// of a thread blocked on a channel by one that slept. A run without a log
/// device pays such a wake-up at each of its hand-offs; a run with one keeps
/// its CPUs warm. Hosts differ here (a VM's idle vCPU may be descheduled),
/// which a timing model fitted on another host cannot know.
pub fn cold_wakeup_us() -> f64 {
    use std::{
        sync::mpsc,
        time::{Duration, Instant},
    };
    let (wake, woken) = mpsc::channel::<Instant>();
    let (report, reported) = mpsc::channel::<Duration>();
    let waiter = std::thread::spawn(move || {
        for sent in woken {
            if report.send(sent.elapsed()).is_err() {
                break;
            }
        }
    });
    let mut samples: Vec<Duration> = (0..40)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(8));
            wake.send(Instant::now()).unwrap();
            reported.recv().unwrap()
        })
        .collect();
    drop(wake);
    waiter.join().unwrap();
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// The share of CPU time the hypervisor took from this VM (steal) since
/// `start`: a timing test's miss on a host that was taken away is told apart
/// from the model's own.
pub struct HostSteal {
    start: (u64, u64),
}

impl HostSteal {
    pub fn start() -> HostSteal {
        HostSteal {
            start: Self::read(),
        }
    }

    /// Steal over all CPU time since the start, 0 to 1.
    pub fn share(&self) -> f64 {
        let (steal, total) = Self::read();
        (steal - self.start.0) as f64 / (total - self.start.1).max(1) as f64
    }

    /// /proc/stat's "cpu" line: (steal, all).
    fn read() -> (u64, u64) {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let fields: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // guest and guest_nice (after steal) are already in user and nice.
        (
            fields.get(7).copied().unwrap_or(0),
            fields.iter().take(8).sum(),
        )
    }
}
