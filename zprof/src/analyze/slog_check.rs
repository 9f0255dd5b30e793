//! The SLOG what-if checked against a run that had a log device: `zprof
//! compare A B`, where A's pool wrote its log blocks to its own vdevs and
//! B's to a log vdev, predicts A's workload on B's log device as B measured
//! it (its log block writes and flushes) and sets the prediction beside what
//! B made. It is the what-if's "check the gain with zprof compare", and it
//! takes the device out of the question: what is left is whether the rest
//! of A's sync-write path carried over.
//!
//! The rates are sync writes and commits per second: a database's writes
//! per commit change with the commit's speed for its own reasons (pgbench's
//! WAL pages per commit went from 2.3 to 1.8 with a log vdev, full-page
//! images after a checkpoint being a larger share of a slower run), so its
//! commits, and a benchmark's transactions, are the figures to compare.

use serde::Serialize;

use crate::{
    analyze::sync_path::{LogDeviceTimes, LogPlace, SyncPath, model_parameters},
    recording::{Recording, pools::pool_names},
};

/// A's what-if on B's log device, against B.
#[derive(Debug, Clone, Serialize)]
pub struct SlogCheck {
    /// A's pool (no log device) and B's (with one).
    pub pools: (String, String),
    /// B's log device as it measured: a commit's log block write and flush.
    pub device_write_ns: f64,
    /// See `device_write_ns`.
    pub device_flush_ns: f64,
    /// Whether A's commits ran one at a time (the model's pool rate).
    pub serial: bool,
    /// Sync writes per second: A measured, predicted on B's device, B measured.
    pub sync_writes: (f64, f64, f64),
    /// Commits per second, the same three.
    pub commits: (f64, f64, f64),
    /// The benchmark's transactions per second (pgbench's tps), the same
    /// three, where both runs reported them: A's scaled by the commits.
    pub transactions: Option<(f64, f64, f64)>,
    /// A typical commit, ns: A measured, predicted on B's device, B measured.
    /// The part of the prediction the log device decides.
    pub commit_ns: (f64, f64, f64),
    /// The pool's gap between serial commits, ns, the same three, where both
    /// runs' commits ran one at a time. The part the workload decides.
    pub gap_ns: Option<(f64, f64, f64)>,
    /// The gaps the model allows B (the ends of its range: A's gap scaled
    /// least, and whole). A gap of B outside them means B's writers took a
    /// different time between commits for reasons of their own (a host
    /// giving them more or less CPU), which no log device explains.
    pub gap_range_ns: Option<(f64, f64)>,
}

/// The pool of `rec` with the most commits whose log blocks went to a log
/// device (or, with `want_log_device` false, anywhere else), with its path.
fn busiest_pool(rec: &Recording, want_log_device: bool) -> Option<(String, SyncPath)> {
    pool_names(rec)
        .into_iter()
        .filter_map(|pool| SyncPath::measure(rec, &pool).map(|path| (pool, path)))
        .filter(|(_, path)| (path.log_place == LogPlace::LogDevice) == want_log_device)
        .max_by_key(|(_, path)| path.commits)
}

/// The check, where A has a pool without a log device whose sync writes
/// zprof measured and B one with.
pub fn slog_check(a: &Recording, b: &Recording) -> Option<SlogCheck> {
    let (pool_a, path_a) = busiest_pool(a, false)?;
    let (pool_b, path_b) = busiest_pool(b, true)?;
    let device = LogDeviceTimes {
        write_ns: path_b.log_write_ns,
        flush_ns: path_b.flush_ns,
    };
    let (rule, weight) = model_parameters(a);
    let predicted = path_a.predict(device, rule, weight, path_a.writers);
    let measured = |path: &SyncPath| path.measured_per_writer() * path.writers;
    let (ops_a, ops_b) = (measured(&path_a), measured(&path_b));
    let commits = (
        ops_a / path_a.writes_per_commit(),
        predicted.total / path_a.writes_per_commit(),
        ops_b / path_b.writes_per_commit(),
    );
    let finite = |(x, y, z): (f64, f64, f64)| x.is_finite() && y.is_finite() && z.is_finite();
    let transactions = tps(a)
        .zip(tps(b))
        .map(|(tps_a, tps_b)| (tps_a, tps_a * commits.1 / commits.0.max(1e-9), tps_b))
        .filter(|t| finite(*t));
    let sync_writes = (ops_a, predicted.total, ops_b);
    let commit_ns = (
        path_a.commit.typical_mean_ns,
        predicted.commit_ns,
        path_b.commit.typical_mean_ns,
    );
    let gaps = path_a
        .serial
        .as_ref()
        .zip(path_b.serial.as_ref())
        .zip(predicted.gap_scale)
        .map(|((gap_a, gap_b), (scale, least))| {
            let (a, b) = (gap_a.gap.typical_mean_ns, gap_b.gap.typical_mean_ns);
            ((a, a * scale, b), (a * least, a))
        });
    // A damaged recording's figures are not a prediction.
    if !finite(sync_writes) || !finite(commits) {
        return None;
    }
    Some(SlogCheck {
        pools: (pool_a, pool_b),
        device_write_ns: device.write_ns,
        device_flush_ns: device.flush_ns,
        serial: path_a.serial.is_some(),
        sync_writes,
        commits,
        transactions,
        commit_ns,
        gap_ns: gaps.map(|(gap, _)| gap),
        gap_range_ns: gaps.map(|(_, range)| range),
    })
}

/// The benchmark's transactions per second, summed over its jobs.
fn tps(rec: &Recording) -> Option<f64> {
    let jobs = &rec.benchmark.as_ref()?.jobs;
    let tps: Vec<f64> = jobs
        .iter()
        .filter_map(|j| j.transactions.as_ref().map(|t| t.tps))
        .collect();
    (!tps.is_empty()).then(|| tps.iter().sum())
}
