//! The lab's flash models as ZFS sees them, measured through zprof's vdev
//! disk stage (io_delay): a 4k read on the ssd model takes its nominal
//! latency within 10% where the host's own floor (measured with no model) is
//! low, plus what of the floor the model cannot hide where it is not. Where
//! the floor is so high that a model adding nothing would look the same (the
//! nvme model's nominal 17 us on a VM whose floor is 30-43 us), the case is
//! recorded in the test ledger as one this host cannot check, not passed.
//! The lab's own account of the same reads agrees with zprof's. Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{
    lab_releases,
    ledger::{self, Attempts},
    require_root, zprof_on_lab,
};

/// Nominal latency of a 4k I/O on the pool's data vdev model as the lab's
/// JSON gives it: access latency plus transfer, in us.
fn nominal_us(lab_json: &Value) -> f64 {
    let model = &lab_json["pools"][0]["vdev_model"];
    let (access_ns, rate) = (
        model["access_ns"].as_f64().unwrap(),
        model["rate_bytes_per_s"].as_f64().unwrap(),
    );
    (access_ns + 4096.0 / rate * 1e9) / 1e3
}

/// What one run of 4k random reads on one vdev of `model` took, in us.
#[derive(Debug)]
struct ReadRun {
    /// zprof's mean disk time of the sync reads (the job's own 4k reads).
    sync_reads: f64,
    /// zprof's mean over every read, prefetch included: what the lab counts.
    all_reads: f64,
    /// The lab's own mean of the I/Os it modelled, as ZFS saw them.
    lab: f64,
    /// A 4k I/O's latency on the model, as the lab gives it.
    nominal: f64,
    /// The model's own time for the same I/Os the lab counted (what it
    /// asked the host for), mean.
    model: f64,
}

fn read_latency_us(dir: &Path, lab: &Path, model: &str) -> ReadRun {
    let recording = dir.join(format!("{model}.json"));
    let args = [
        "--vdev-model",
        model,
        "--volblocksize",
        "4k",
        "--primarycache",
        "metadata",
    ];
    let lab_json = zprof_on_lab(
        "record",
        lab,
        dir,
        &recording,
        &[
            &args[..],
            &["--job", "name=rr,rw=randread,bs=4k,size=16m,runtime=2"],
        ]
        .concat(),
    );
    let device = &lab_json["jobs"][0]["leaves"][0]["device"];
    let ios = device["ios"].as_f64().unwrap().max(1.0);
    let lab_us = device["io_ns"].as_f64().unwrap() / ios / 1e3;
    let model_us = device["model_io_ns"].as_f64().unwrap() / ios / 1e3;
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let mean_us = |classes: &[&str]| {
        let (mut count, mut total) = (0.0, 0.0);
        for h in rec["histograms"].as_array().unwrap() {
            if h["stage"] == "vdev_disk" && classes.iter().any(|c| h["class_name"] == *c) {
                count += h["count"].as_f64().unwrap();
                total += h["total_ns"].as_f64().unwrap();
            }
        }
        assert!(
            count > 1000.0,
            "{model}: only {count} {classes:?} reached the vdev"
        );
        total / count / 1e3
    };
    let nominal = nominal_us(&lab_json);
    ReadRun {
        sync_reads: mean_us(&["sync read"]),
        all_reads: mean_us(&["sync read", "async read"]),
        lab: lab_us,
        nominal,
        model: model_us,
    }
}

/// The lab's flash models.
const MODELS: [&str; 2] = ["ssd", "nvme"];

const TEST: &str = "flash_models_give_their_nominal_latency";

/// Tries per model: the host's floor drifts within seconds, so a run the
/// floor makes uncheckable, or a miss, gets one more (both are in the ledger).
const TRIES: usize = 2;

/// How far above the model's own time ZFS may see an I/O before the host,
/// not the model, is what the bound would measure: the lab's
/// `scenario::DELIVERY_SLACK`.
const DELIVERY_SLACK: f64 = 1.5;

#[test]
fn flash_models_give_their_nominal_latency_where_the_host_can() {
    require_root();
    let mut failures = Vec::new();
    for release in lab_releases() {
        let dir = common::scratch("zprof-devices", &release.version);
        // The host's floor (model "none") drifts within seconds (30-43 us on
        // the AMD VM; 25-38 us within one test on a loaded day), so it is
        // measured around every model run, and each run is judged against
        // the higher of the two floors around it.
        let mut floor_before = read_latency_us(&dir, &release.lab, "none").sync_reads;
        for model in MODELS {
            let case = format!("{} {model} 4k read", release.version);
            let mut attempts = Attempts::new(TEST, &case, TRIES);
            for _ in 0..TRIES {
                let run = read_latency_us(&dir, &release.lab, model);
                let floor_after = read_latency_us(&dir, &release.lab, "none").sync_reads;
                let floor = floor_before.max(floor_after);
                floor_before = floor_after;
                let nominal = run.nominal;
                let shown = format!(
                    "nominal {nominal:.1} us: zprof {:.1} us ({:.1} over all reads), the lab {:.1} us, host floor {floor:.1} us",
                    run.sync_reads, run.all_reads, run.lab
                );
                eprintln!("{case}: {shown}");
                assert_lab_agrees(&case, &run);
                // The model asked the host for `model` per I/O and ZFS saw
                // `lab`: well above it, the host did not deliver the model
                // (its timer overshot), and the bound would measure the host.
                // A model that adds nothing asks for nothing and reads at the
                // floor, so it is still judged (and refused) below.
                let delivered = run.lab <= DELIVERY_SLACK * run.model.max(floor);
                match bound(nominal, floor).filter(|_| delivered) {
                    Some((low, high)) => attempts.attempt(
                        run.sync_reads >= low && run.sync_reads <= high,
                        format!("{shown}; bound {low:.1}..{high:.1} us"),
                    ),
                    // A model that adds nothing would look the same here.
                    None if !delivered => ledger::cannot_check(
                        TEST,
                        &case,
                        &format!(
                            "{shown}: the host did not deliver the model (it asked for {:.1} us per I/O)",
                            run.model
                        ),
                    ),
                    None => ledger::cannot_check(
                        TEST,
                        &case,
                        &format!("{shown}: the floor is above 3/4 of the model's latency"),
                    ),
                }
                if !attempts.again() {
                    break;
                }
            }
            failures.extend(attempts.verdict().err());
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
    assert!(
        failures.is_empty(),
        "a flash model missed its nominal latency: {failures:?}"
    );
}

/// Where a 4k read of a model of `nominal` us must land on a host whose own
/// floor (no model) is `floor` us, or `None` where the floor hides the model.
///
/// Never below 90% of its nominal. Above: within 10% on a quiet host, whose
/// floor the model's learnt hand-off lag hides. A floor beyond half the
/// nominal is more than the lag can hide, and the excess adds to what ZFS
/// sees (ssd, 67.8 us nominal, on a host of 45-66 us floors: 77-95 us, with
/// the lab's own figures within 1 us of zprof's). Above three quarters of
/// the nominal, a model that delays nothing would land in any bound that a
/// working model is sure to meet (the floor itself is within 10% of 0.9 x
/// the nominal), so the run cannot be checked on this host.
fn bound(nominal: f64, floor: f64) -> Option<(f64, f64)> {
    (floor <= 0.75 * nominal).then(|| {
        (
            nominal * 0.9,
            nominal * 1.1 + (floor - nominal / 2.0).max(0.0),
        )
    })
}

/// The lab's own account (the same io_delay span, over every read of the
/// job) agrees with zprof's over every read: the job's 4k sync reads and
/// ZFS's own prefetch of larger blocks (2.3.2's 157 async reads at 287 us
/// beside 19,891 sync ones at 40 us put the mean of all at 42 us). The lab's
/// clock stops in vdev_queue_io_done, a few microseconds after io_delay's
/// end, so they may differ by that: 10% or 5 us. Two clocks of the same
/// reads: every run, not the better of two.
fn assert_lab_agrees(case: &str, run: &ReadRun) {
    assert!(
        (run.lab - run.all_reads).abs() < (0.10 * run.all_reads).max(5.0),
        "{case}: the lab's figure of its reads ({:.1} us) disagrees with zprof's ({:.1} us)",
        run.lab,
        run.all_reads
    );
}

#[test]
fn the_bound_refuses_a_model_that_adds_nothing() {
    // A model that adds nothing reads at the host's floor. The nominals: a
    // 4k read on the lab's nvme and ssd models, and a slower device.
    for nominal in [17.0, 67.8, 200.0] {
        for floor in [0.1, 0.3, 0.5, 0.7].map(|f| f * nominal) {
            let (low, high) = bound(nominal, floor).unwrap();
            assert!(
                !(floor >= low && floor <= high),
                "floor {floor:.1} us passes the bound of {nominal:.1} us"
            );
        }
        assert_eq!(bound(nominal, 0.8 * nominal), None);
    }
}
