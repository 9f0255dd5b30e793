//! A recording's pools: which pools it holds, and the part of it that is
//! about some of them.
//!
//! A host's recording holds every pool at once (a boot pool beside the data
//! pools, or two lab processes), and a figure computed over all of them can
//! send an admin to the wrong pool. Rows whose stage cannot tell its pool
//! (dedup lookups, the kernel's file reads and writes through the uio path,
//! compression where zio_execute was not probed) have the pool "". A pool's
//! part of the recording takes the kernel's workload reads and writes from
//! the request rows of its datasets.

use std::collections::{BTreeMap, BTreeSet};

use zprof_common::Stage;

use super::{HistRecord, Recording, RequestRecord, stage_name};

/// The pools a recording names, sorted: those of its histogram rows, txgs and
/// leaf vdevs ("" is not a pool).
pub fn pool_names(rec: &Recording) -> Vec<String> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    names.extend(rec.histograms.iter().map(|h| h.pool.as_str()));
    names.extend(rec.txgs.iter().map(|t| t.pool.as_str()));
    names.extend(rec.vdevs.iter().map(|v| v.pool.as_str()));
    names.remove("");
    names.into_iter().map(str::to_owned).collect()
}

/// The pool a request row's dataset or zvol belongs to ("pool/fs" -> "pool").
pub fn dataset_pool(dataset: &str) -> &str {
    dataset.split('/').next().unwrap_or("")
}

/// What [`restrict`] keeps beside the chosen pools' own rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unpooled {
    /// Rows with no pool stay (report, compare: they cannot be split, and
    /// dropping them would hide the stage).
    Keep,
    /// Only what is known to be the pools' own: rows with no pool, the
    /// per-second timeline and the CPU profiles (the whole host's) go.
    Drop,
}

/// The recording of `pools` only. Benchmark jobs that name another pool go,
/// as do its other pools' layouts.
pub fn restrict(rec: &Recording, pools: &[String], unpooled: Unpooled) -> Recording {
    let chosen = |pool: &str| pools.iter().any(|p| p == pool);
    let keep = |pool: &str| chosen(pool) || (pool.is_empty() && unpooled == Unpooled::Keep);
    let drop_host_wide = unpooled == Unpooled::Drop;
    // A clone, then the rows replaced: explain makes one view per pool, and a
    // recording is at most a few MiB.
    let mut view = rec.clone();
    view.histograms = kept(&rec.histograms, |h| keep(&h.pool));
    view.txgs = kept(&rec.txgs, |t| chosen(&t.pool));
    view.pool_seconds = kept(&rec.pool_seconds, |p| chosen(&p.pool));
    view.vdevs = kept(&rec.vdevs, |v| chosen(&v.pool));
    view.requests = kept(&rec.requests, |r| keep(dataset_pool(&r.dataset)));
    view.slow_requests = kept(&rec.slow_requests, |r| keep(dataset_pool(&r.dataset)));
    if drop_host_wide {
        for stage in [Stage::WorkloadWrite, Stage::WorkloadRead] {
            view.histograms
                .extend(workload_rows_from_requests(rec, stage, &chosen));
        }
        view.timeline.clear();
        view.cpu = None;
        view.offcpu = None;
    }
    if let Some(bench) = view.benchmark.as_mut() {
        bench.pools.retain(|p| chosen(&p.name));
        bench.jobs.retain(|j| j.pool.as_deref().is_none_or(&chosen));
    }
    view
}

/// The request operation a workload stage stands for.
fn request_op(stage: Stage) -> &'static str {
    if stage == Stage::WorkloadWrite {
        "write"
    } else {
        "read"
    }
}

/// Whether `stage`'s workload rows can be split by pool through the request
/// rows: every row of the stage names no pool (the kernel counts them at
/// dmu_write/read_uio_dnode, which carries none), and every file or zvol
/// request of that operation names its dataset, so its pool.
pub fn workload_split_by_requests(rec: &Recording, stage: Stage) -> bool {
    let name = stage_name(stage);
    let mut rows = rec.histograms.iter().filter(|h| h.stage == name).peekable();
    let unpooled = rows.peek().is_some() && rows.all(|h| h.pool.is_empty());
    let mut requests = rec
        .requests
        .iter()
        .filter(|r| r.op == request_op(stage))
        .peekable();
    unpooled
        && requests.peek().is_some()
        && requests.all(|r| !r.dataset.is_empty() && r.dataset != "[folded]")
}

/// Where a workload stage's rows name no pool (see
/// [`workload_split_by_requests`]), one row per chosen pool made of its
/// datasets' file and zvol requests of that operation: what the workload
/// asked of that pool, timed from the request's start to its end.
fn workload_rows_from_requests(
    rec: &Recording,
    stage: Stage,
    chosen: &dyn Fn(&str) -> bool,
) -> Vec<HistRecord> {
    if !workload_split_by_requests(rec, stage) {
        return Vec::new();
    }
    let mut per_pool: BTreeMap<&str, Vec<&RequestRecord>> = BTreeMap::new();
    for r in rec.requests.iter().filter(|r| r.op == request_op(stage)) {
        let pool = dataset_pool(&r.dataset);
        if chosen(pool) {
            per_pool.entry(pool).or_default().push(r);
        }
    }
    per_pool
        .into_iter()
        .map(|(pool, requests)| merged_requests(stage, pool, &requests))
        .collect()
}

/// Request rows summed into one histogram row of `stage` for `pool`.
fn merged_requests(stage: Stage, pool: &str, requests: &[&RequestRecord]) -> HistRecord {
    let mut buckets: BTreeMap<u64, u64> = BTreeMap::new();
    for r in requests {
        for [index, count] in &r.buckets {
            *buckets.entry(*index).or_default() += count;
        }
    }
    HistRecord {
        stage: stage_name(stage).into(),
        class: 0,
        class_name: String::new(),
        pool: pool.into(),
        vdev: 0,
        count: requests.iter().map(|r| r.count).sum(),
        total_ns: requests.iter().map(|r| r.total_ns).sum(),
        bytes: requests.iter().map(|r| r.bytes).sum(),
        bytes_out: 0,
        max_ns: requests.iter().map(|r| r.max_ns).max().unwrap_or(0),
        buckets: buckets.into_iter().map(|(i, c)| [i, c]).collect(),
    }
}

/// The rows `keep` says yes to, copied.
fn kept<T: Clone>(rows: &[T], keep: impl Fn(&T) -> bool) -> Vec<T> {
    rows.iter().filter(|row| keep(row)).cloned().collect()
}

/// Checks that every pool asked for (`--pool`) is in the recording; the
/// error names the ones it holds.
pub fn check_pools(rec: &Recording, asked: &[String], shown: &str) -> Result<(), String> {
    let known = pool_names(rec);
    let unknown: Vec<&String> = asked.iter().filter(|p| !known.contains(p)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = unknown.iter().map(|p| format!("'{p}'")).collect();
    Err(format!(
        "{shown} has no pool {}: it holds {}",
        names.join(", "),
        if known.is_empty() {
            "no named pool".to_owned()
        } else {
            known.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dataset_belongs_to_the_pool_its_name_starts_with() {
        assert_eq!(dataset_pool("tank/db/wal"), "tank");
        assert_eq!(dataset_pool("tank"), "tank");
        assert_eq!(dataset_pool(""), "");
    }
}
