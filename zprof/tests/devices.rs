//! The lab's flash models as ZFS sees them: a 4k read on the ssd model takes
//! its nominal latency within 10%, measured through zprof's vdev disk stage
//! (io_delay), where the host's own floor is below three quarters of that;
//! the nvme model's nominal 17 us is below what this host can
//! deliver (its thread hand-offs), so ZFS sees the host's floor, measured
//! with no model at all, and the test says so. Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{lab_releases, require_root, zprof_on_lab};

/// Nominal latency of a 4k I/O: access latency plus transfer, in us.
fn nominal_us(access_us: f64, rate_mib_s: f64) -> f64 {
    access_us + 4096.0 / (rate_mib_s * 1048576.0) * 1e6
}

/// Mean sync-read disk time (us) zprof measured, and the lab's own mean of
/// the I/Os it modelled as ZFS saw them, for 4k random reads that all reach
/// one vdev of `model`.
fn read_latency_us(dir: &Path, lab: &Path, model: &str) -> (f64, f64) {
    let recording = dir.join(format!("{model}.json"));
    let args = ["--vdev-model", model, "--volblocksize", "4k", "--primarycache", "metadata"];
    let lab_json = zprof_on_lab("record", lab, dir, &recording, &[&args[..], &["--job", "name=rr,rw=randread,bs=4k,size=16m,runtime=2"]].concat());
    let device = &lab_json["jobs"][0]["leaves"][0]["device"];
    let lab_us = device["io_ns"].as_f64().unwrap() / device["ios"].as_f64().unwrap().max(1.0) / 1e3;
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let (mut count, mut total) = (0.0, 0.0);
    for h in rec["histograms"].as_array().unwrap() {
        if h["stage"] == "vdev_disk" && h["class_name"] == "sync read" {
            count += h["count"].as_f64().unwrap();
            total += h["total_ns"].as_f64().unwrap();
        }
    }
    assert!(count > 1000.0, "{model}: only {count} sync reads reached the vdev");
    (total / count / 1e3, lab_us)
}

#[test]
fn flash_models_give_their_nominal_latency_where_the_host_can() {
    require_root();
    for release in lab_releases() {
        let dir = common::scratch("zprof-devices", &release.version);
        // The host's floor (model "none") drifts within seconds (30-43 us on
        // this VM; 25-38 us within one test on a loaded day, when measuring
        // it only before and after all runs failed with the old and the new
        // zprof alike), so it is measured around every model run, and each
        // run is judged against the higher of the two floors around it.
        let mut floors = vec![read_latency_us(&dir, &release.lab, "none").0];
        let mut runs = Vec::new();
        for (model, nominal) in [("ssd", nominal_us(60.0, 500.0)), ("nvme", nominal_us(15.0, 2000.0))] {
            for _ in 0..2 {
                let run = read_latency_us(&dir, &release.lab, model);
                floors.push(read_latency_us(&dir, &release.lab, "none").0);
                let floor = floors[floors.len() - 2].max(floors[floors.len() - 1]);
                runs.push((model, nominal, run, floor));
            }
        }
        for (model, nominal) in [("ssd", nominal_us(60.0, 500.0)), ("nvme", nominal_us(15.0, 2000.0))] {
            let mine: Vec<((f64, f64), f64)> = runs.iter().filter(|r| r.0 == model).map(|r| (r.2, r.3)).collect();
            // Within 10% of nominal; where the host's floor is above it, ZFS
            // sees the floor, plus at most the model's own latency (its timer
            // thread's wake-up is not free on a busy host: 2.3.2's nvme runs
            // sat 8-16 us over a 34 us floor on a loaded day, with the zprof
            // of before this change too), and never below its nominal.
            // Judged by the better of two runs. A floor above three quarters
            // of the nominal counts as above it: the model's timer wait then
            // overlaps the host's hand-offs only in part (ssd, 67.8 us
            // nominal: 77.6 us over a 62.4 us floor in a CI check on a day of
            // steal, with the lab's own figure at 76.8 us).
            let fits = |&((measured, _), floor): &((f64, f64), f64)| {
                if floor > 0.75 * nominal {
                    measured >= nominal * 0.9 && measured <= floor + nominal * 1.2
                } else {
                    (measured / nominal - 1.0).abs() < 0.10
                }
            };
            // The lab's own account (the same io_delay span, over the job's
            // reads and writes where zprof's row is the sync reads of the
            // whole run) agrees with zprof's. The lab's clock stops in
            // vdev_queue_io_done, a few microseconds after io_delay's end, so
            // they may differ by that: 10% or 5 us.
            let agrees = |&((measured, lab_saw), _): &((f64, f64), f64)| (lab_saw - measured).abs() < (0.10 * measured).max(5.0);
            eprintln!(
                "{} {model}: 4k read through zprof's vdev disk stage, lab's own figure and the host floor around each run: {}; nominal {nominal:.1} us",
                release.version,
                mine.iter().map(|((m, l), f)| format!("{m:.1}/{l:.1}/{f:.1} us")).collect::<Vec<_>>().join(", ")
            );
            assert!(mine.iter().any(fits), "{model}: no run within its nominal {nominal:.1} us (or the floor plus the model where the floor is above it): {mine:?}");
            assert!(mine.iter().any(agrees), "{model}: the lab's figures disagree with zprof's in every run: {mine:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
