//! The SLOG what-if against the lab: from a run of fsync=1 writes on a pool
//! of emulated HDDs without a log device, `explain --what-if slog=ssd` (or
//! `nvme`: the forms a user types, the device's datasheet figures) predicts
//! the write rate with one; the lab then runs the same job with a log vdev of
//! that model, and the prediction must be within 30% of it (where the
//! finding calls it an upper bound, at most 30% below it: writes above 32
//! KiB, or both cores busy).
//!
//! What the prediction is not given: the run with the log device. Its only
//! device input is the nominal spec (zprof/src/analyze/findings `SlogDevice`), not
//! the latencies the lab delivered. Its one fitted constant, the weight of
//! each release series (`Series::per_leaf_weight`, zprof/src/zfs/releases.rs),
//! was chosen for 2.1 on raidz3:8, 4k and 32k, one writer, ssd log: those
//! cases stay as regressions, and the unseen ones (other layouts, block
//! sizes, writer counts and an nvme log) check the model. 2.3's was chosen
//! on the Intel VM with raidz1:4 16k and raidz2:6 8k among its cases, so on
//! 2.3.2 only the two-writer mirror, the nvme log and the writes above 32
//! KiB are unseen. Where the host cannot deliver the lab's log device (its
//! write and flush came out well above the model's own), the comparison
//! would measure the host, so the case is recorded as one this host cannot
//! check. Every attempt goes to the test ledger. Needs root.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

mod common;
use common::{
    HostSteal, explain_json, lab_releases,
    ledger::{self, Attempts},
    require_root, stage_count, stage_field, stderr, zprof, zprof_on_lab,
};

const TEST: &str = "slog_what_if";

/// How zprof learns about the workload in a SLOG case: `run` reads the lab's
/// JSON, `record` has only its own measurements (as when it attaches).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Run,
    Record,
}

/// One SLOG case: the pool, the job, the log device's model, and what the
/// model's constant saw of it.
#[derive(Clone, Copy, Debug)]
struct Case {
    layout: &'static str,
    bs: &'static str,
    numjobs: u32,
    /// The lab's `--log-model` and the what-if's `slog=` (the same name).
    log: &'static str,
    mode: Mode,
    /// Both cores kept busy by two loops during both runs.
    loaded: bool,
    /// Among the cases 2.1's weight was chosen on (see the module doc for 2.3's).
    fitted: bool,
    /// A known miss: the open work that explains it.
    known_miss: Option<&'static str>,
    /// The release the known miss is on (None: every release).
    known_miss_on: Option<&'static str>,
}

impl Case {
    /// Whether the finding must call its prediction an upper bound: both
    /// cores busy, or writes a log device would copy where the pool without
    /// one wrote them in place (above zfs_immediate_write_sz, 32 KiB).
    fn claims_upper_bound(&self) -> bool {
        let kib: u32 = self.bs.trim_end_matches('k').parse().unwrap();
        self.loaded || kib > 32
    }

    fn name(&self) -> String {
        format!(
            "{} {} x{} {} log, {:?}{}{}",
            self.layout,
            self.bs,
            self.numjobs,
            self.log,
            self.mode,
            if self.loaded {
                ", both cores loaded"
            } else {
                ""
            },
            if self.fitted {
                " (fitted on)"
            } else {
                " (unseen)"
            }
        )
    }
}

const fn case(
    layout: &'static str,
    bs: &'static str,
    numjobs: u32,
    log: &'static str,
    mode: Mode,
    fitted: bool,
) -> Case {
    Case {
        layout,
        bs,
        numjobs,
        log,
        mode,
        loaded: false,
        fitted,
        known_miss: None,
        known_miss_on: None,
    }
}

/// The cases run on each release.
const CASES: [Case; 8] = [
    case("raidz3:8", "4k", 1, "ssd", Mode::Run, true),
    case("raidz3:8", "32k", 1, "ssd", Mode::Record, true),
    case("raidz1:4", "16k", 1, "ssd", Mode::Record, false),
    // Two writers: until each commit had its own slot in the pool's commit
    // window, the commits of two writers overlapped without the window ever
    // closing and their flushes added up past the commits themselves (a
    // 377 us commit's 130 ms): the what-if came out +44% to 3.7x.
    case("mirror:2", "4k", 2, "ssd", Mode::Run, false),
    // A fast log device on 2.1.11: where the host delivered the lab's nvme
    // (30 us write against its 21 us model), the what-if came out 39% and
    // 44% under the measured rate (-37%, -19% in runs the host did not
    // deliver); on 2.3.2 the host has not delivered it yet.
    Case {
        // Seen on 2.3.2 and 2.4.4 too, in a clean-clone run on the Intel VM
        // (2026-12-05): -39%/-44% and -32%/-41% in two attempts each.
        known_miss: Some(
            "issue 32: the SLOG what-if under a fast log device, recorded, 32-44% below the lab's rate on every release",
        ),
        known_miss_on: None,
        ..case("raidz2:6", "8k", 1, "nvme", Mode::Record, false)
    },
    // Sync writes above 32 KiB: without a log device ZFS wrote them in place
    // and the recording holds no copy of them into log blocks, so the
    // finding says its prediction is an upper bound, and that is what is
    // checked (on the Intel VM, 2.1.11, 3 idle runs each per mode: 64k came
    // out +11% to +38%, 128k +3% to +41%, the lab's own rate at 128k moving
    // from 1,093 to 1,482 writes/s between runs).
    case("raidz3:8", "64k", 1, "ssd", Mode::Record, false),
    case("raidz3:8", "128k", 1, "ssd", Mode::Run, false),
    // With both cores busy the finding says its prediction is an upper
    // bound: ZFS's threads compete harder for the CPUs at the higher commit
    // rate, which the run without the log device cannot show. That claim is
    // what is checked; how far above it lands (+22% to +67% on the Intel
    // host, issue 32: the non-device time kept swings with the host's load)
    // is in the ledger.
    Case {
        loaded: true,
        ..case("raidz3:8", "4k", 1, "ssd", Mode::Record, true)
    },
];

/// Within this share of the measured rate.
const BOUND: f64 = 0.30;

/// How far above its model the lab's delivered log device may be before the
/// case measures the host rather than the what-if: the lab's own
/// `scenario::DELIVERY_SLACK`.
const DELIVERY_SLACK: f64 = 1.5;

/// Two busy loops, one per core of this machine, for as long as it lives.
struct CpuLoad(Vec<std::process::Child>);

impl CpuLoad {
    fn start() -> CpuLoad {
        CpuLoad(
            (0..2)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs the case's fsync=1 job on its pool of emulated HDDs under zprof,
/// with `logs` log vdevs; returns the recording and the lab's JSON.
fn fsync_run(dir: &Path, lab: &Path, case: &Case, logs: u32) -> (PathBuf, Value) {
    let load = if case.loaded { "-loaded" } else { "" };
    let name = format!(
        "{}-{}-x{}-{}-{:?}{load}-logs{logs}.json",
        case.layout.replace(':', "_"),
        case.bs,
        case.numjobs,
        case.log,
        case.mode
    );
    let recording = dir.join(name);
    let logs = logs.to_string();
    let job = format!(
        "name=fsync,rw=randwrite,bs={},numjobs={},fsync=1,runtime=3",
        case.bs, case.numjobs
    );
    let args = [
        "--layout",
        case.layout,
        "--vdev-model",
        "hdd",
        "--log-model",
        case.log,
        "--volblocksize",
        case.bs,
        "--logs",
        &logs,
        "--job",
        &job,
    ];
    let lab_json = zprof_on_lab(
        if case.mode == Mode::Run {
            "run"
        } else {
            "record"
        },
        lab,
        dir,
        &recording,
        &args,
    );
    (recording, lab_json)
}

/// One attempt of a case.
struct Attempt {
    without: PathBuf,
    with: PathBuf,
    predicted: f64,
    measured: f64,
    steal: f64,
    /// The lab's log device as ZFS saw it: mean write and flush, ns, and
    /// what its model gave the same writes and flushes.
    delivered: (f64, f64),
    modelled: (f64, f64),
    /// What the prediction rested on, for a miss to be read from the ledger.
    basis: String,
    /// The host's cold wake-up just before the run without a log device
    /// (`common::cold_wakeup_us`).
    wakeup_us: f64,
}

impl Attempt {
    fn error(&self) -> f64 {
        self.predicted / self.measured - 1.0
    }

    /// Whether the host delivered the log device the model stands for: its
    /// write and its flush each (an nvme write seen at 41 us against its
    /// model's 21 is not the device, even where the flush hides it in the sum).
    fn host_delivered(&self) -> bool {
        self.delivered.0 <= DELIVERY_SLACK * self.modelled.0
            && self.delivered.1 <= DELIVERY_SLACK * self.modelled.1
    }

    fn describe(&self) -> String {
        format!(
            "predicted {:.0}/s vs measured {:.0}/s ({:+.0}%); log device delivered {:.0}+{:.0} us (model {:.0}+{:.0}); steal {:.1}%",
            self.predicted,
            self.measured,
            self.error() * 100.0,
            self.delivered.0 / 1e3,
            self.delivered.1 / 1e3,
            self.modelled.0 / 1e3,
            self.modelled.1 / 1e3,
            self.steal * 100.0
        ) + &format!(
            "; {}; the host woke a thread in {:.0} us after an idle 8 ms",
            self.basis, self.wakeup_us
        )
    }
}

fn attempt(dir: &Path, lab: &Path, case: &Case) -> Attempt {
    let wakeup_us = common::cold_wakeup_us();
    let load = case.loaded.then(CpuLoad::start);
    let (without, _) = fsync_run(dir, lab, case, 0);
    let steal = HostSteal::start();
    let (with, lab_with) = fsync_run(dir, lab, case, 1);
    let steal = steal.share();
    drop(load);
    let measured = lab_with["jobs"][0]["write"]["iops"].as_f64().unwrap();
    let findings = explain_json(&without, &["--what-if", &format!("slog={}", case.log)]);
    assert_eq!(
        findings[0]["kind"],
        "sync_write_bound",
        "first finding ({}): {}",
        case.name(),
        findings[0]
    );
    // One writer's commits never overlap; two writers' do (each waits for
    // its own log block while the other's is written), so the what-if keeps
    // the per-writer model rather than a pool rate of commits in a row.
    let overlapped = common::figure(&findings[0], "commits_overlapped_share");
    if case.numjobs > 1 {
        assert!(overlapped > 0.5, "{}: {overlapped}", case.name());
    } else {
        assert_eq!(overlapped, 0.0, "{}", case.name());
    }
    let what_if = findings
        .iter()
        .find(|f| f["kind"] == "slog_what_if")
        .expect("no slog what-if finding");
    if case.claims_upper_bound() {
        assert!(
            what_if["missing"].to_string().contains("upper bound"),
            "{what_if:#}"
        );
    }
    let predicted = what_if["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[0].as_str().unwrap().starts_with("predicted_ops_"))
        .map(|f| f[1].as_f64().unwrap())
        .unwrap();
    let (delivered, modelled) = log_device(&lab_with);
    let basis = prediction_basis(&findings[0], what_if);
    Attempt {
        without,
        with,
        predicted,
        measured,
        steal,
        delivered,
        modelled,
        basis,
        wakeup_us,
    }
}

/// The run without the log device as the prediction saw it (the sync-write
/// finding's parts of a commit and the writer's own time, us) and the
/// prediction's commit and range: which part a miss came from.
fn prediction_basis(sync_write: &Value, what_if: &Value) -> String {
    // The what-if's figures end in the device's name as the user gave it.
    let figure = |finding: &Value, prefix: &str| {
        finding["figures"]
            .as_array()
            .and_then(|all| {
                all.iter()
                    .find(|f| f[0].as_str().is_some_and(|n| n.starts_with(prefix)))
            })
            .and_then(|f| f[1].as_f64())
            .unwrap_or(f64::NAN)
    };
    let us = |name: &str| figure(sync_write, name) / 1e3;
    format!(
        "without log: commit {:.0} us (log write {:.0}, flush {:.0}, timeout {:.0}, other {:.0}), own time {:.0} us; predicted commit {:.0} us, range {:.0}-{:.0}/s",
        us("commit_mean_ns"),
        us("log_write_ns"),
        us("flush_ns"),
        us("timeout_ns"),
        us("other_ns"),
        us("cycle_ns"),
        figure(what_if, "predicted_commit_ns_") / 1e3,
        figure(what_if, "predicted_ops_low_"),
        figure(what_if, "predicted_ops_high_"),
    )
}

/// The lab's log leaf as ZFS saw it (mean write, mean flush, ns) and what its
/// model gave the same writes and flushes.
fn log_device(lab_json: &Value) -> ((f64, f64), (f64, f64)) {
    let leaves = lab_json["jobs"][0]["leaves"].as_array().unwrap();
    let log = leaves
        .iter()
        .find(|l| l["is_log"] == true)
        .expect("no log leaf in the lab's JSON");
    let device = &log["device"];
    let per =
        |sum: &str, n: &str| device[sum].as_f64().unwrap() / device[n].as_f64().unwrap().max(1.0);
    (
        (per("io_ns", "ios"), per("flush_ns", "flushes")),
        (per("model_io_ns", "ios"), per("model_flush_ns", "flushes")),
    )
}

#[test]
fn slog_prediction_from_the_nominal_device_matches_the_lab_on_each_release() {
    require_root();
    let mut failures = Vec::new();
    for release in lab_releases() {
        let dir = common::scratch("zprof-slog", &release.version);
        let mut first = None;
        for case in CASES {
            let name = format!("OpenZFS {} {}", release.version, case.name());
            let known_miss = case
                .known_miss
                .filter(|_| case.known_miss_on.is_none_or(|v| v == release.version));
            if let Some(miss) = run_case(&dir, &release.lab, &case, known_miss, &name, &mut first) {
                failures.push(miss);
            }
        }
        if let Some((without, with)) = first {
            compare_explains_the_log_device(&without, &with);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
    assert!(
        failures.is_empty(),
        "SLOG what-if off by more than {:.0}%: {failures:#?}",
        BOUND * 100.0
    );
}

/// Tries one case (twice where the first misses: the prediction rests on a
/// few seconds of a slow run, whose own-time figure moves between runs on a
/// shared VM); returns its failure. `first` keeps the first pair of
/// recordings of the first case for `compare`.
fn run_case(
    dir: &Path,
    lab: &Path,
    case: &Case,
    known_miss: Option<&str>,
    name: &str,
    first: &mut Option<(PathBuf, PathBuf)>,
) -> Option<String> {
    let mut attempts = match known_miss {
        Some(work) => Attempts::known_miss(TEST, name, work),
        None => Attempts::new(TEST, name, 2),
    };
    let mut undelivered = 0;
    for _ in 0..3 {
        let run = attempt(dir, lab, case);
        eprintln!(
            "| {name} | {:.0} | {:.0} | {:+.0}% | {} |",
            run.predicted,
            run.measured,
            run.error() * 100.0,
            run.describe()
        );
        if first.is_none() && !case.loaded {
            *first = Some((run.without.clone(), run.with.clone()));
        }
        if !run.host_delivered() {
            ledger::cannot_check(
                TEST,
                name,
                &format!(
                    "the host did not deliver the lab's {} log device: {}",
                    case.log,
                    run.describe()
                ),
            );
            // A host that misses the device twice (once under the case's own
            // load, which a third run repeats) misses it for a reason of its
            // own: on this 2-core VM the nvme log's 21 us came out 46-51 us in
            // three runs of three, the loaded ssd log 190-231 us against 76.
            undelivered += 1;
            if undelivered == if case.loaded { 1 } else { 2 } {
                break;
            }
            continue;
        }
        // Where the finding's figure is an upper bound, it must not be more
        // than BOUND below what was measured.
        let within = if case.claims_upper_bound() {
            run.error() >= -BOUND
        } else {
            run.error().abs() <= BOUND
        };
        attempts.attempt(within, run.describe());
        if !attempts.again() {
            break;
        }
    }
    attempts.verdict().err()
}

/// `compare` of the run without the log device against the run with it
/// shows the log writes moving to the log vdev, and zil_commit's latency
/// falling by the factor the lab's rate rose.
fn compare_explains_the_log_device(without: &Path, with: &Path) {
    let output = zprof()
        .arg("compare")
        .arg(without)
        .arg(with)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    let line = |stage: &str, detail: &str| {
        table
            .lines()
            .find(|l| l.starts_with(stage) && l.contains(detail))
            .unwrap_or_else(|| panic!("no {stage} {detail} row:\n{table}"))
            .to_owned()
    };
    assert!(
        line("zil_log_write", "main pool").contains("gone"),
        "{table}"
    );
    assert!(line("zil_log_write", "log vdev").contains("new"), "{table}");
    assert!(
        table.contains("slog_what_if"),
        "the what-if finding changes: {table}"
    );
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (a, b) = (read(without), read(with));
    let commit_mean = |r: &Value| {
        stage_field(r, "zil_commit", "total_ns") as f64 / stage_count(r, "zil_commit") as f64
    };
    let lab_iops = |r: &Value| r["benchmark"]["jobs"][0]["write"]["iops"].as_f64().unwrap();
    let latency_factor = commit_mean(&a) / commit_mean(&b);
    let iops_factor = lab_iops(&b) / lab_iops(&a);
    eprintln!("zil_commit mean fell {latency_factor:.1}x, the lab's IOPS rose {iops_factor:.1}x");
    assert!(
        (latency_factor / iops_factor - 1.0).abs() <= 0.25,
        "commit {latency_factor:.1}x vs IOPS {iops_factor:.1}x"
    );
}

/// PostgreSQL's pgbench on the guest's zfs.ko (tests/data/README.md): 4
/// clients of TPC-B at scale 1, recordsize 128k, a raidz1 of 5 ms disks
/// without and with a log vdev. Its commits never overlap (PostgreSQL
/// flushes its WAL under a lock, and each transaction waits on the one
/// branch row until the previous commit ends), so a backend's own time
/// between its commits is mostly the others' commits: 60 ms without the log
/// vdev, 18 ms with it. Kept per writer, as for independent writers, it made
/// the what-if predict 246-254 sync writes/s where the run with the log vdev
/// made 264-372 (a CI run failed on it); the model takes the pool's rate as
/// one commit plus the gap between commits (3.6 ms here, 3.0 with the log
/// vdev; the model keeps 74% of it, and the commit's other time whole on the
/// kernel).
/// `zprof compare` sets the prediction on the log vdev as the second run
/// measured it beside that run: commits and transactions within 30%.
#[test]
fn a_database_whose_commits_wait_for_each_other_is_predicted_from_the_gap_between_them() {
    let data = |name: &str| common::data_dir().join(name);
    let without = data("guest-2.4.4-pgbench-128k-nolog.json");
    let with = data("guest-2.4.4-pgbench-128k-log.json");
    let findings = explain_json(&without, &[]);
    let bound = findings
        .iter()
        .find(|f| f["kind"] == "sync_write_bound")
        .expect("no sync-write finding");
    assert_eq!(common::figure(bound, "commits_overlapped_share"), 0.0);
    let gap = common::figure(bound, "commit_gap_ns");
    assert!((1e6..10e6).contains(&gap), "gap {gap} ns");
    let what_if = findings
        .iter()
        .find(|f| f["kind"] == "slog_what_if")
        .expect("no slog what-if finding");
    assert!(
        what_if["evidence"][0]
            .as_str()
            .unwrap()
            .contains("commits ran one at a time"),
        "{what_if:#}"
    );
    let output = zprof()
        .args(["compare", "--format", "json"])
        .arg(&without)
        .arg(&with)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let compare: Value = serde_json::from_slice(&output.stdout).unwrap();
    let check = &compare["slog_check"];
    assert_eq!(check["serial"], true, "{check:#}");
    for figure in ["commits", "transactions"] {
        let [_, predicted, measured] = [0, 1, 2].map(|i| check[figure][i].as_f64().unwrap());
        assert!(
            (predicted / measured - 1.0).abs() <= BOUND,
            "{figure}: predicted {predicted:.0}/s, the run with a log vdev made {measured:.0}/s"
        );
    }
    let table = zprof()
        .arg("compare")
        .arg(&without)
        .arg(&with)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("the SLOG what-if of A (pool pg) on B's log device (pool pg"),
        "{table}"
    );
}
