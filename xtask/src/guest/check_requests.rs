//! Checks of the request layer's figures (the guest's `requests` run) against
//! fio's own: two fio processes (fio-a in cgroup a, fio-b in cgroup b), each
//! with jobs on a file system and a zvol, all at once.
//!
//! - Counts: each fio job's reads, writes and fsyncs equal zprof's rows of
//!   that dataset, operation and process, within 2 (fio's time_based end).
//! - Splits: the rows of each process name and of each cgroup add up to that
//!   fio process's I/Os.
//! - Latency: zprof's p50 and fio's (clat, or the fsync's lat) in the same or
//!   neighbouring power of two. A zvol row starts where zfs.ko receives the
//!   bio, fio's clat around the system call (pinning pages, the block layer,
//!   the wake-up after completion), so zvol rows are lower by that.
//!
//! Without offsets (nobtf) there are no dataset names and no zvol rows: file
//! rows are checked by process and operation, and the zvol points must say
//! why they are absent.

use std::path::Path;

use anyhow::{anyhow, ensure};
use serde_json::Value;

use super::{
    Variant,
    check::{Pow2, percentile_bucket, pow2_of_zprof_bucket, read_json},
};

/// What one fio job did, and where zprof should show it.
struct Job {
    name: &'static str,
    /// fio-a or fio-b (the process name and its JSON file).
    process: &'static str,
    layer: &'static str,
    dataset: &'static str,
    /// (fio's direction, zprof's operation, whether zprof's rows carry "sync").
    ops: &'static [(&'static str, &'static str, bool)],
}

const JOBS: &[Job] = &[
    Job { name: "a-fs-fsync", process: "fio-a", layer: "file", dataset: "rq/fs1", ops: &[("write", "write", false), ("sync", "fsync", false)] },
    Job { name: "a-zvol-fsync", process: "fio-a", layer: "zvol", dataset: "rq/v1", ops: &[("write", "write", false), ("sync", "flush", false)] },
    Job { name: "b-fs-osync", process: "fio-b", layer: "file", dataset: "rq/fs2", ops: &[("write", "write", true)] },
    Job { name: "b-fs-read", process: "fio-b", layer: "file", dataset: "rq/fs2", ops: &[("read", "read", false)] },
    Job { name: "b-zvol-write", process: "fio-b", layer: "zvol", dataset: "rq/v2", ops: &[("write", "write", false)] },
    Job { name: "b-zvol-read", process: "fio-b", layer: "zvol", dataset: "rq/v2", ops: &[("read", "read", false)] },
];

/// fio's count and p50 (ns) of one job's direction.
fn fio_figures(fio: &Value, job: &str, direction: &str) -> anyhow::Result<(u64, Option<u64>)> {
    let entry = fio["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|j| j["jobname"] == job)
        .ok_or_else(|| anyhow!("fio ran no job {job}"))?;
    let side = &entry[direction];
    let latency = if direction == "sync" { &side["lat_ns"] } else { &side["clat_ns"] };
    Ok((side["total_ios"].as_u64().unwrap_or(0), latency["percentile"]["50.000000"].as_u64()))
}

/// zprof's request rows that `keep` accepts: their count and merged buckets.
fn zprof_rows(rec: &Value, keep: impl Fn(&Value) -> bool) -> (u64, Pow2) {
    let mut count = 0;
    let mut hist = Pow2::new();
    for row in rec["requests"].as_array().into_iter().flatten().filter(|r| keep(r)) {
        count += row["count"].as_u64().unwrap_or(0);
        for pair in row["buckets"].as_array().into_iter().flatten() {
            let (Some(index), Some(n)) = (pair[0].as_u64(), pair[1].as_u64()) else { continue };
            *hist.entry(pow2_of_zprof_bucket(index as usize)).or_default() += n;
        }
    }
    (count, hist)
}

fn has_sync_flag(row: &Value) -> bool {
    row["flags"].as_array().is_some_and(|f| f.iter().any(|x| x == "sync"))
}

fn log2(ns: u64) -> usize {
    63 - ns.max(1).leading_zeros() as usize
}

/// Checks the requests run in `dir`; returns what was measured.
pub fn check_requests(dir: &Path, variant: Variant) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("rec.json"))?;
    let fio_a = read_json(&dir.join("fio-a.json"))?;
    let fio_b = read_json(&dir.join("fio-b.json"))?;
    let with_offsets = variant != Variant::Nobtf;
    let mut bad = Vec::new();
    let mut figures = Vec::new();
    let mut per_process = [("fio-a", "/a", 0u64), ("fio-b", "/b", 0u64)];
    for job in JOBS {
        if job.layer == "zvol" && !with_offsets {
            continue;
        }
        let fio = if job.process == "fio-a" { &fio_a } else { &fio_b };
        for &(direction, op, sync) in job.ops {
            let (expected, fio_p50) = fio_figures(fio, job.name, direction)?;
            let (count, hist) = zprof_rows(&rec, |r| {
                r["layer"] == job.layer
                    && r["op"] == op
                    && r["comm"] == job.process
                    && has_sync_flag(r) == sync
                    && (!with_offsets || r["dataset"] == job.dataset)
            });
            for slot in per_process.iter_mut().filter(|s| s.0 == job.process) {
                slot.2 += expected;
            }
            if count.abs_diff(expected) > 2 {
                bad.push(format!("{} {direction}: zprof counted {count} {op} requests, fio {expected}", job.name));
            }
            let ours = percentile_bucket(&hist, 0.5);
            let theirs = fio_p50.map(log2);
            match (ours, theirs) {
                (Some(a), Some(b)) if a.abs_diff(b) <= 1 => {}
                _ => bad.push(format!("{} {direction}: p50 in 2^{ours:?} ns, fio's {fio_p50:?} ns in 2^{theirs:?}", job.name)),
            }
            figures.push(format!("{} {op} {count}/{expected} p50 2^{}/{}", job.name, ours.unwrap_or(0), fio_p50.unwrap_or(0)));
        }
    }
    for (process, cgroup, expected) in per_process {
        let (by_name, _) = zprof_rows(&rec, |r| r["comm"] == process && (with_offsets || r["layer"] == "file"));
        if by_name.abs_diff(expected) > 4 {
            bad.push(format!("process {process}: zprof's rows add up to {by_name}, fio's jobs to {expected}"));
        }
        let (by_cgroup, _) = zprof_rows(&rec, |r| r["cgroup"] == cgroup && (with_offsets || r["layer"] == "file"));
        if by_cgroup.abs_diff(expected) > 4 {
            bad.push(format!("cgroup {cgroup}: zprof's rows add up to {by_cgroup}, fio-{}'s jobs to {expected}", &cgroup[1..]));
        }
        figures.push(format!("{process} and {cgroup}: {by_name}, {by_cgroup} of {expected}"));
    }
    if !with_offsets {
        let probes = rec["probes"].as_array().into_iter().flatten();
        let zvol_absent = probes
            .filter(|p| p["function"] == "zvol_submit_bio")
            .any(|p| p["attached"] == false && p["reason"].as_str().is_some_and(|r| r.contains("request layer's struct offsets")));
        if !zvol_absent {
            bad.push("without offsets, zvol_submit_bio should be left out, saying why".into());
        }
    }
    let losses = &rec["losses"];
    for counter in ["request_folded", "request_start_full", "request_end_without_start", "name_map_full"] {
        if losses[counter].as_u64().unwrap_or(0) > 0 {
            bad.push(format!("{counter}: {}", losses[counter]));
        }
    }
    ensure!(bad.is_empty(), "{}", bad.join("; "));
    Ok(figures.join("; "))
}
