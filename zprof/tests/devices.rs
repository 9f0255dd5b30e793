//! The lab's flash models as ZFS sees them, measured through zprof's vdev
//! disk stage (io_delay): a 4k read on the ssd model takes its nominal
//! latency within 10% where the host's own floor (measured with no model) is
//! low, plus what of the floor the model cannot hide where it is not; the
//! nvme model's nominal 17 us is below what this host can deliver (its
//! thread hand-offs), so ZFS sees the host's floor, and the test says so. The
//! lab's own account of the same reads agrees with zprof's. Needs root.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{lab_releases, require_root, zprof_on_lab};

/// Nominal latency of a 4k I/O: access latency plus transfer, in us.
fn nominal_us(access_us: f64, rate_mib_s: f64) -> f64 {
    access_us + 4096.0 / (rate_mib_s * 1048576.0) * 1e6
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
}

fn read_latency_us(dir: &Path, lab: &Path, model: &str) -> ReadRun {
    let recording = dir.join(format!("{model}.json"));
    let args = ["--vdev-model", model, "--volblocksize", "4k", "--primarycache", "metadata"];
    let lab_json = zprof_on_lab("record", lab, dir, &recording, &[&args[..], &["--job", "name=rr,rw=randread,bs=4k,size=16m,runtime=2"]].concat());
    let device = &lab_json["jobs"][0]["leaves"][0]["device"];
    let lab_us = device["io_ns"].as_f64().unwrap() / device["ios"].as_f64().unwrap().max(1.0) / 1e3;
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let mean_us = |classes: &[&str]| {
        let (mut count, mut total) = (0.0, 0.0);
        for h in rec["histograms"].as_array().unwrap() {
            if h["stage"] == "vdev_disk" && classes.iter().any(|c| h["class_name"] == *c) {
                count += h["count"].as_f64().unwrap();
                total += h["total_ns"].as_f64().unwrap();
            }
        }
        assert!(count > 1000.0, "{model}: only {count} {classes:?} reached the vdev");
        total / count / 1e3
    };
    ReadRun { sync_reads: mean_us(&["sync read"]), all_reads: mean_us(&["sync read", "async read"]), lab: lab_us }
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
        let mut floors = vec![read_latency_us(&dir, &release.lab, "none").sync_reads];
        let mut runs = Vec::new();
        for (model, nominal) in [("ssd", nominal_us(60.0, 500.0)), ("nvme", nominal_us(15.0, 2000.0))] {
            for _ in 0..2 {
                let run = read_latency_us(&dir, &release.lab, model);
                floors.push(read_latency_us(&dir, &release.lab, "none").sync_reads);
                let floor = floors[floors.len() - 2].max(floors[floors.len() - 1]);
                runs.push((model, nominal, run, floor));
            }
        }
        for (model, nominal) in [("ssd", nominal_us(60.0, 500.0)), ("nvme", nominal_us(15.0, 2000.0))] {
            let mine: Vec<(&ReadRun, f64)> = runs.iter().filter(|r| r.0 == model).map(|r| (&r.2, r.3)).collect();
            // Never below 90% of its nominal. Above: within 10% on a quiet
            // host, whose floor (30-43 us on this VM) the model's learnt
            // hand-off lag hides. A floor beyond half the nominal is more
            // than the lag can hide, and the excess adds to what ZFS sees
            // (ssd, 67.8 us nominal, on a host of 45-66 us floors: 77-95 us,
            // with the lab's own figures within 1 us of zprof's). Where the
            // floor is above three quarters of the nominal, ZFS sees the
            // floor plus at most the model's own latency (its timer thread's
            // wake-up is not free on a busy host: 2.3.2's nvme runs sat 8-16
            // us over a 34 us floor). Judged by the better of two runs.
            let fits = |&(run, floor): &(&ReadRun, f64)| {
                let upper = if floor > 0.75 * nominal {
                    floor + nominal * 1.2
                } else {
                    nominal * 1.1 + (floor - nominal / 2.0).max(0.0)
                };
                run.sync_reads >= nominal * 0.9 && run.sync_reads <= upper
            };
            // The lab's own account (the same io_delay span, over every read
            // of the job) agrees with zprof's over every read: the job's 4k
            // sync reads and ZFS's own prefetch of larger blocks (2.3.2's
            // 157 async reads at 287 us beside 19,891 sync ones at 40 us put
            // the mean of all at 42 us: a CI check compared the lab's 43.8 us
            // with the sync reads' 37.8). The lab's clock stops in
            // vdev_queue_io_done, a few microseconds after io_delay's end, so
            // they may differ by that: 10% or 5 us.
            let agrees = |&(run, _): &(&ReadRun, f64)| (run.lab - run.all_reads).abs() < (0.10 * run.all_reads).max(5.0);
            eprintln!(
                "{} {model}: 4k sync read through zprof's vdev disk stage (all reads), the lab's own figure of all reads and the host floor around each run: {}; nominal {nominal:.1} us",
                release.version,
                mine.iter().map(|(r, f)| format!("{:.1} ({:.1} all reads)/{:.1}/{f:.1} us", r.sync_reads, r.all_reads, r.lab)).collect::<Vec<_>>().join(", ")
            );
            assert!(mine.iter().any(fits), "{model}: no run within its nominal {nominal:.1} us (or the floor plus the model where the floor is above it): {mine:?}");
            assert!(mine.iter().any(agrees), "{model}: the lab's figures disagree with zprof's in every run: {mine:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
