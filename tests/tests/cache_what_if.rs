//! The cache what-if (issue 17): from a recording of random reads on a
//! RAID-Z3 of emulated HDDs with the ARC capped and no cache device, zprof
//! predicts the read rate with an SSD cache device (from a vendor's figures,
//! not the lab's model); the lab then runs the same job with one, warmed the
//! same way, and the prediction must be within 30% of it (see [`BOUND`]),
//! where the warm-up left the cache device holding the data. A cache device a
//! quarter of the data is run too: the share of the misses it serves must be
//! the predicted one within 10 points. The run without a cache device is
//! recorded with --full-timing (the what-if splits the timed reads into
//! those served from memory and those that waited for a disk); the runs with
//! one are the lab alone, as the user's workload would run: under the
//! probes a read from the cache device fires a dozen more of them than the
//! what-if's run can show (on an Intel host 5,054 reads/s recorded against
//! 5,875 bare). Where the host does not deliver the lab's cache device (ZFS
//! saw its I/O take over 1.2x its model), the rate cannot be checked there.
//! Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{
    explain_json, figure, first_json, lab_releases, ledger, ledger::Attempts, require_root, stderr,
    zprof_on_lab_with,
};

/// 512 MiB read at random through a 128 MiB ARC, after two warm-up passes
/// (prefetched, not the job's reads). One reader: with more, the cached run
/// on a 2-core machine is bound by the CPU its cache reads cost other threads
/// (the zio pipeline, the device), which the what-if does not count: with 2
/// readers it came out 14% and 37% high in two runs, with 1 reader -1% and +8%.
const JOB: &str = "name=rr,rw=randread,bs=4k,size=512m,numjobs=1,runtime=5,warmup=2";

/// The cache device of the small-cache case: a quarter of the data, so
/// that a block is kept for a fraction of its distance to its next read.
const SMALL_CACHE: &str = "128m";

/// The lab's arguments for the job with `caches` cache devices.
fn lab_args<'a>(caches: &'a str, cache_size: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec![
        "--layout",
        "raidz3:8",
        "--vdev-model",
        "hdd",
        "--arc-max",
        "128m",
        "--volblocksize",
        "8k",
        "--caches",
        caches,
        "--cache-model",
        "ssd",
        "--job",
        JOB,
    ];
    if let Some(size) = cache_size {
        args.extend(["--cache-size", size]);
    }
    args
}

/// The run without a cache device, recorded: its recording.
fn recorded_run(dir: &Path, lab: &Path) -> std::path::PathBuf {
    let recording = dir.join("plain.json");
    let args = lab_args("0", None);
    zprof_on_lab_with("record", &["--full-timing"], lab, dir, &recording, &args);
    recording
}

/// A run with a cache device, the lab alone: its JSON.
fn bare_run(dir: &Path, lab: &Path, cache_size: Option<&str>) -> Value {
    let output = std::process::Command::new(lab)
        .args(["run", "--dir"])
        .arg(dir)
        .args(lab_args("1", cache_size))
        .args(["--output-format", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    first_json(&String::from_utf8_lossy(&output.stdout))
}

fn what_if(recording: &Path, extra: &[&str]) -> Value {
    let findings = explain_json(recording, extra);
    findings
        .into_iter()
        .find(|f| f["kind"] == "cache_what_if")
        .unwrap_or_else(|| {
            panic!(
                "no cache what-if in the explanation of {}",
                recording.display()
            )
        })
}

/// A lab run's reads per second and the share of the ARC's misses its
/// cache device served.
fn measured(lab_json: &Value) -> (f64, f64) {
    let job = &lab_json["jobs"][0];
    let arc = &job["arc"];
    (
        job["read"]["iops"].as_f64().unwrap(),
        arc["l2_hits"].as_f64().unwrap() / arc["misses"].as_f64().unwrap().max(1.0),
    )
}

/// The lab's cache leaf as ZFS saw it: its mean I/O time against what the
/// model gave the same I/Os (ns).
fn cache_device(lab_json: &Value) -> (f64, f64) {
    let leaves = lab_json["jobs"][0]["leaves"].as_array().unwrap();
    let cache = leaves
        .iter()
        .find(|l| l["is_cache"] == true)
        .expect("no cache leaf in the lab's JSON");
    let device = &cache["device"];
    let ios = device["ios"].as_f64().unwrap().max(1.0);
    (
        device["io_ns"].as_f64().unwrap() / ios,
        device["model_io_ns"].as_f64().unwrap() / ios,
    )
}

/// How far above its model the lab's cache device may be before the rate
/// measures the host rather than the what-if. Tighter than the lab's own
/// `scenario::DELIVERY_SLACK` (1.5), because of what [`BOUND`] leaves to the
/// host: the cache device is about half of a cached read's time (76 us of
/// 110-170), so a device 20% slow moves the rate by about 10%, which with
/// the model's own spread (-7% to +13%) stays within 30%. At 1.5 a run whose
/// device took 113 us (1.49x; the host slow at everything that run) missed
/// by +57% and was counted as the what-if's miss.
const DELIVERY_SLACK: f64 = 1.2;

/// One attempt: the run without a cache device (its rate as recorded), its
/// what-ifs for the full cache and the small one, and the runs with each.
struct Attempt {
    before: f64,
    full: (f64, f64),
    /// The full cache's device: delivered and modelled mean I/O, ns.
    full_device: (f64, f64),
    full_what_if: Value,
    /// The small cache's run and what-if, where that case was still open.
    small: Option<((f64, f64), Value)>,
}

/// One attempt; the small cache's run only where that case is still open
/// (a run with its warm-up is about half a minute here).
fn attempt(dir: &Path, lab: &Path, with_small: bool) -> Attempt {
    let recording = recorded_run(dir, lab);
    let full = bare_run(dir, lab, None);
    let small = with_small.then(|| {
        (
            measured(&bare_run(dir, lab, Some(SMALL_CACHE))),
            what_if(&recording, &["--what-if", &format!("l2arc={SMALL_CACHE}")]),
        )
    });
    let before = figure(&what_if(&recording, &[]), "read_rate_before");
    Attempt {
        before,
        full: measured(&full),
        full_device: cache_device(&full),
        full_what_if: what_if(&recording, &[]),
        small,
    }
}

const TEST: &str = "cache_what_if";

/// The predicted rate may be this share off the measured one. With the
/// lab's cache device warmed whole, five runs on an Intel VM came out -7% to
/// +13%; before the lab's warm-up checked that the cache held the data, runs
/// where 1-10% of the misses went to the hdds came out 18-133% high, which
/// is why a run whose cache device served less than [`WARMED`] of the misses
/// is not an attempt.
const BOUND: f64 = 0.30;

/// The share of the job's misses a warmed cache device must serve for the
/// run to be the case the what-if predicts: a read from an hdd costs a
/// hundred from the cache, so 0.2% of them add about a tenth to a read.
const WARMED: f64 = 0.998;

#[test]
fn the_cache_what_if_of_a_run_without_a_cache_device_predicts_the_run_with_one() {
    require_root();
    let mut failures = Vec::new();
    // One release: the what-if's inputs (where the ARC served each block, a
    // read's time by source) are checked against ZFS's own counts on every
    // release by arc.rs and reads.rs, and its arithmetic does not depend on
    // the release; at a minute and a half a run, three releases took 17 of
    // the suite's 38 minutes.
    for release in lab_releases().into_iter().take(1) {
        let dir = common::scratch("zprof-cache-what-if", &release.version);
        // A miss gets one more attempt: the cached run's rate moves with the
        // host (2.3.2, same job: 3,611 then 5,366 reads/s on a shared VM).
        let full_case = format!("OpenZFS {} a 16 GiB ssd cache, rate", release.version);
        let small_case = format!(
            "OpenZFS {} a {SMALL_CACHE} ssd cache, share served",
            release.version
        );
        let mut full = Attempts::new(TEST, &full_case, 2);
        let mut small = Attempts::new(TEST, &small_case, 2);
        // A run where the host did not deliver the cache device is not an
        // attempt at the rate; four runs at most, so that one such run
        // still leaves the rate its two attempts, and none after the second
        // such run: a host that misses the device twice misses it for a
        // reason of its own (2.3.2 in a CI run: 153, 181 and 194 us against
        // the model's 76, where 2.1.11 and 2.4.4 got 89 and 80), and each
        // run costs a minute and a half.
        let mut undelivered = 0;
        for _ in 0..4 {
            if !full.again() && !small.again() {
                break;
            }
            let run = attempt(&dir, &release.lab, small.again());
            let (predicted, served) = (
                figure(&run.full_what_if, "read_rate_after"),
                figure(&run.full_what_if, "served_sync"),
            );
            let (measured, l2_share) = run.full;
            eprintln!(
                "{}: {:.0} reads/s without a cache device\n{}",
                release.version, run.before, run.full_what_if["evidence"]
            );
            assert!(
                measured >= 10.0 * run.before,
                "at 8k the cache device lifts random reads tenfold: {} -> {measured}",
                run.before
            );
            assert!(
                served > 0.95,
                "every block the job missed was read in the warm-up: served {served}"
            );
            if l2_share < WARMED {
                // The lab's warm-up passes until the cache device holds the
                // data, four at most (zprof-lab's fill_cache_devices).
                ledger::cannot_check(
                    TEST,
                    &full_case,
                    &format!(
                        "the warm-up left {:.2}% of the job's misses to the disks, so the run is not the warmed cache the what-if predicts ({measured:.0} reads/s)",
                        (1.0 - l2_share) * 100.0
                    ),
                );
                continue;
            }
            let error = predicted / measured - 1.0;
            let (delivered, modelled) = run.full_device;
            let detail = format!(
                "predicted {predicted:.0} reads/s, measured {measured:.0} ({:+.0}%); cache device delivered {:.0} us (model {:.0}), {:.2}% of the misses served by it",
                error * 100.0,
                delivered / 1e3,
                modelled / 1e3,
                l2_share * 100.0
            );
            if delivered > DELIVERY_SLACK * modelled {
                ledger::cannot_check(
                    TEST,
                    &full_case,
                    &format!("the host did not deliver the lab's ssd cache device: {detail}"),
                );
                undelivered += 1;
            } else if full.again() {
                full.attempt(error.abs() <= BOUND, detail);
            }
            if let Some(((small_rate, small_measured), small_what_if)) = &run.small {
                let small_predicted = figure(small_what_if, "served_sync");
                small.attempt(
                    (small_predicted - small_measured).abs() <= 0.10,
                    format!(
                        "predicted {:.0}% of the misses served, measured {:.0}% ({small_rate:.0} reads/s)",
                        small_predicted * 100.0,
                        small_measured * 100.0,
                    ),
                );
            }
            if undelivered == 2 {
                break;
            }
        }
        failures.extend(full.verdict().err());
        failures.extend(small.verdict().err());
        std::fs::remove_dir_all(dir).unwrap();
    }
    assert!(
        failures.is_empty(),
        "the cache what-if missed: {failures:#?}"
    );
}
