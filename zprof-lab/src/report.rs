//! The result types of a lab run, serialised as the `--output-format json`
//! document (fio-like shape; field meanings are in README.md), and the small
//! pure functions that fill them (rates, percentiles).
//!
//! These types are the lab's public interface: zprof parses this JSON, so
//! field names only ever get added, never renamed.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::model::ModelParams;
use crate::options::{JobSpec, Layout};

/// Percentiles reported for latencies, as fio prints them.
pub const PERCENTILES: [f64; 6] = [50.0, 90.0, 99.0, 99.9, 99.99, 100.0];

/// Whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Version of zprof-lab that wrote this.
    pub zprof_lab_version: String,
    /// The OpenZFS release this binary was built against and runs on.
    #[serde(default)]
    pub openzfs: String,
    /// Scenario name, when the run was a named scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// Pools, in the order they were created.
    pub pools: Vec<PoolInfo>,
    /// Jobs, in the order they ran.
    pub jobs: Vec<JobReport>,
    /// Process-wide counters.
    pub totals: Totals,
    /// True when SIGINT/SIGTERM stopped the run early.
    pub interrupted: bool,
    /// Shape criteria evaluated by `scenario ... --check` (absent otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

/// One shape criterion of a scenario, as `--check` evaluates it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What is compared, e.g. "fsync=1 IOPS / async IOPS (hdd pool)".
    pub criterion: String,
    /// The measured value of that quantity.
    pub measured: f64,
    /// `"<="`, `">="` or `">"`.
    pub op: String,
    /// The bound it must meet.
    pub threshold: f64,
    /// Whether it does.
    pub pass: bool,
    /// Why this host cannot decide it: a device the criterion rests on was
    /// slower than its model, in the direction that could have made the
    /// verdict. Such a criterion neither passes nor fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_limit: Option<String>,
}

impl Check {
    /// Whether it failed on a host that could decide it.
    pub fn failed(&self) -> bool {
        !self.pass && self.host_limit.is_none()
    }
}

/// `scenario all`: one report per scenario, each from its own process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AllReport {
    /// Version of zprof-lab that wrote this.
    pub zprof_lab_version: String,
    /// The scenarios' reports, in the order they ran.
    pub scenarios: Vec<Report>,
    /// True when a signal stopped the sequence early.
    pub interrupted: bool,
}

/// A job's IOPS sampled over fixed intervals (fio's iops_min, iops_max,
/// iops_mean, iops_stddev): how steady the rate was.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IopsSamples {
    /// Sample length, ms.
    pub interval_ms: u64,
    /// Whole samples in the run.
    pub samples: usize,
    /// Lowest sample, I/Os per second.
    pub min: f64,
    /// Highest sample.
    pub max: f64,
    /// Mean of the samples.
    pub mean: f64,
    /// Their standard deviation.
    pub stddev: f64,
}

/// One pool's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolInfo {
    /// Pool name (unique per run).
    pub name: String,
    /// Layout of the data vdevs.
    pub layout: Layout,
    /// Layout as text, e.g. `raidz3:8x1`.
    pub layout_text: String,
    /// ashift of every vdev.
    pub ashift: u32,
    /// Size of each sparse vdev file in bytes.
    pub vdev_size: u64,
    /// Model of the data vdevs.
    pub vdev_model: ModelParams,
    /// Number of log vdevs.
    pub log_vdevs: u32,
    /// Model of the log vdevs.
    pub log_model: ModelParams,
    /// Number of cache devices (L2ARC).
    #[serde(default)]
    pub caches: u32,
    /// Model of the cache devices (absent in older reports).
    #[serde(default)]
    pub cache_model: Option<ModelParams>,
    /// Number of special allocation class vdevs.
    #[serde(default)]
    pub specials: u32,
    /// Model of the special vdevs.
    #[serde(default)]
    pub special_model: Option<ModelParams>,
    /// Dataset properties set at creation (`compression`, `checksum`, `sync`, `logbias`,
    /// `primarycache`).
    pub properties: BTreeMap<String, String>,
    /// Block size of the data objects (volblocksize).
    pub volblocksize: u64,
    /// spa_sync calls while this pool existed (creation to export).
    pub spa_sync_calls: u64,
    /// First txg synced on this pool (numbered from its creation).
    pub first_txg: u64,
    /// Last txg synced on this pool (the export included).
    pub last_txg: u64,
}

/// Latency summary in nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LatNs {
    /// Smallest latency.
    pub min: u64,
    /// Largest latency.
    pub max: u64,
    /// Mean latency.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Percentile (fio's key format, e.g. "99.900000") -> latency.
    pub percentile: BTreeMap<String, u64>,
}

/// One direction (read or write) of a job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IoStats {
    /// Bytes transferred.
    pub io_bytes: u64,
    /// Operations completed.
    pub total_ios: u64,
    /// Operations per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Per-operation latency as the job thread saw it (a write includes its zil_commit when it made one).
    pub lat_ns: LatNs,
}

/// Pool accounting after a job (after a txg_wait_synced).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PoolAccount {
    /// Pool name.
    pub name: String,
    /// Bytes allocated in the pool's normal class (data, parity, metadata).
    pub alloc_bytes: u64,
    /// Bytes allocated on log vdevs.
    pub log_alloc_bytes: u64,
    /// Bytes allocated in the special class, and its space (0 without
    /// special vdevs).
    #[serde(default)]
    pub special_alloc_bytes: u64,
    /// See `special_alloc_bytes`.
    #[serde(default)]
    pub special_size_bytes: u64,
    /// Usable pool space.
    pub size_bytes: u64,
    /// Dataset referenced bytes (after compression, with raidz parity inflation removed).
    pub used_bytes: u64,
    /// Dataset logical referenced bytes (before compression).
    pub logical_used_bytes: u64,
    /// Compression ratio logical / physical (dsl_get_compressratio / 100).
    pub compressratio: f64,
    /// Bytes written to leaf vdevs so far (vs_bytes[WRITE] summed over leaves).
    pub leaf_write_bytes: u64,
    /// Bytes read from leaf vdevs so far.
    pub leaf_read_bytes: u64,
    /// Last txg synced.
    pub last_synced_txg: u64,
    /// The pool's dedup ratio (referenced over allocated bytes of the blocks
    /// in its dedup table; 1.00 without dedup), as of the last txg synced.
    #[serde(default)]
    pub dedup_ratio: f64,
}

/// Per-leaf I/O during one job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LeafDelta {
    /// Backing file.
    pub path: String,
    /// True for a log vdev.
    pub is_log: bool,
    /// True for a cache device (L2ARC).
    #[serde(default)]
    pub is_cache: bool,
    /// The leaf's guid (absent in older reports).
    #[serde(default)]
    pub guid: u64,
    /// Its top-level vdev, type and index as zpool_influxdb names it ("raidz-0").
    #[serde(default)]
    pub top_vdev: String,
    /// Its allocation class: normal, log, special, dedup or cache.
    #[serde(default)]
    pub vdev_class: String,
    /// Writes issued to the leaf.
    pub write_ops: u64,
    /// Bytes written to the leaf.
    pub write_bytes: u64,
    /// Reads issued to the leaf.
    pub read_ops: u64,
    /// Bytes read from the leaf.
    pub read_bytes: u64,
    /// Cache flushes of the leaf.
    pub flushes: u64,
    /// Latencies of its modelled I/Os and flushes during the job, as ZFS saw
    /// them (absent for unmodelled leaves and older reports).
    #[serde(default)]
    pub device: crate::model::DeviceTimes,
}

/// One job's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobReport {
    /// Job name.
    pub jobname: String,
    /// The job as specified (defaults filled in).
    pub spec: JobSpec,
    /// Wall clock (ms since the Unix epoch) when the measured run began,
    /// after the layout writes and warm-up reads; it ends runtime_ms +
    /// sync_ms later.
    #[serde(default)]
    pub started_unix_ms: u64,
    /// Measured run time in milliseconds.
    pub runtime_ms: u64,
    /// Read side.
    pub read: IoStats,
    /// Write side.
    pub write: IoStats,
    /// zil_commit calls made by the job's threads.
    pub zil_commits: u64,
    /// Every zil_commit call in the process during the job (equals zil_commits unless ZFS made its own).
    pub zil_commits_all: u64,
    /// spa_sync calls during the job, including the txg_wait_synced at its end.
    pub txgs_synced: u64,
    /// First and last txg synced during the job (0 when none).
    pub txg_first: u64,
    /// See txg_first.
    pub txg_last: u64,
    /// Time spent in spa_sync during the job, in ms.
    pub spa_sync_ms: f64,
    /// Leaf-vdev cache flushes during the job.
    pub flushes: u64,
    /// Host fsync() calls on vdev files during the job (only with model none).
    pub host_fsyncs: u64,
    /// Leaf bytes written during the job.
    pub leaf_write_bytes: u64,
    /// Leaf bytes read during the job.
    pub leaf_read_bytes: u64,
    /// Per-leaf detail during the job.
    pub leaves: Vec<LeafDelta>,
    /// Wall time of the job-end txg_wait_synced, in ms (runtime_ms + sync_ms is the
    /// time until everything the job wrote was on the emulated disks).
    #[serde(default)]
    pub sync_ms: f64,
    /// CPU time of the whole process (user + system, every thread: the job's and
    /// libzpool's taskqs that compress, checksum and issue I/O) from the job's start
    /// to the end of its job-end sync, in ms. Data generation is not included.
    #[serde(default)]
    pub cpu_ms: f64,
    /// The user-mode part of `cpu_ms` (compression and checksums run in user mode;
    /// system time is mostly the host I/O on the vdev files).
    #[serde(default)]
    pub cpu_user_ms: f64,
    /// Change of the dataset's used (referenced) bytes during the job.
    #[serde(default)]
    pub used_delta_bytes: i64,
    /// Change of the dataset's logical (uncompressed) referenced bytes during the job.
    #[serde(default)]
    pub logical_used_delta_bytes: i64,
    /// Bytes a read job wrote to lay out its objects before it started (unmeasured).
    #[serde(default)]
    pub layout_bytes: u64,
    /// Seconds of warm-up reads (the job's `warmup` passes) before it started.
    #[serde(default)]
    pub warmup_s: f64,
    /// IOPS per sample interval (absent in older reports, and under 2 samples).
    #[serde(default)]
    pub iops_samples: Option<IopsSamples>,
    /// The pool it ran on, with its accounting at the end of the job.
    pub pool: PoolAccount,
    /// The ARC during the job, from ZFS's own statistics (absent in older reports).
    #[serde(default)]
    pub arc: Option<ArcDelta>,
    /// True when a signal cut the job short.
    pub interrupted: bool,
    /// The pool's RAIDZ expansion during the job (absent when none ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflow: Option<ReflowDelta>,
}

/// A RAIDZ expansion's reflow during one job, from ZFS's expansion stats
/// and the lab's own count of leaf I/Os at the removal priority.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReflowDelta {
    /// Leaf reads at ZIO_PRIORITY_REMOVAL that went through the vdev queue
    /// (an aggregate counts once): the lab removes no device, so these are
    /// the reflow's.
    pub reads: u64,
    /// Leaf writes at ZIO_PRIORITY_REMOVAL, likewise.
    pub writes: u64,
    /// Bytes the reflow moved during the job (pres_reflowed's change).
    pub reflowed_bytes: u64,
    /// Bytes it had to move in all (pres_to_reflow).
    pub to_reflow_bytes: u64,
    /// Whether it had finished by the end of the job-end sync.
    pub finished: bool,
}

/// The ARC during one job, from ZFS's statistics (arcstats' sums): the
/// counters' change from the job's start to the end of its job-end sync, and
/// the sizes at the end. The ARC serves the whole process: ZFS's own reads
/// (metadata, prefetch) count with the job's.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ArcDelta {
    /// Reads served by the ARC (arcstats hits).
    pub hits: u64,
    /// Reads that found their block being read (iohits; 2.2 and later).
    pub iohits: u64,
    /// Reads the ARC missed (served by a cache device or the disks).
    pub misses: u64,
    /// Of the misses, reads served by a cache device (l2_hits).
    pub l2_hits: u64,
    /// Of the misses, reads a cache device could not serve (l2_misses).
    pub l2_misses: u64,
    /// Demand reads of data: hits and misses.
    pub demand_data_hits: u64,
    /// See demand_data_hits.
    pub demand_data_misses: u64,
    /// Prefetch reads (data and metadata): hits and misses.
    pub prefetch_hits: u64,
    /// See prefetch_hits.
    pub prefetch_misses: u64,
    /// Bytes read from and written to cache devices.
    pub l2_read_bytes: u64,
    /// See l2_read_bytes.
    pub l2_write_bytes: u64,
    /// Logical bytes held by cache devices at the end.
    pub l2_size: u64,
    /// ARC size, target and maximum at the end, in bytes.
    pub size: u64,
    /// See size.
    pub c: u64,
    /// See size.
    pub c_max: u64,
}

impl ArcDelta {
    /// The change from `a` to `b`, with `b`'s sizes.
    pub fn between(a: &crate::ffi::ZlArcStats, b: &crate::ffi::ZlArcStats) -> ArcDelta {
        let d = |f: fn(&crate::ffi::ZlArcStats) -> u64| f(b).saturating_sub(f(a));
        ArcDelta {
            hits: d(|s| s.hits),
            iohits: d(|s| s.iohits),
            misses: d(|s| s.misses),
            l2_hits: d(|s| s.l2_hits),
            l2_misses: d(|s| s.l2_misses),
            demand_data_hits: d(|s| s.demand_data_hits),
            demand_data_misses: d(|s| s.demand_data_misses),
            prefetch_hits: d(|s| s.prefetch_data_hits + s.prefetch_metadata_hits),
            prefetch_misses: d(|s| s.prefetch_data_misses + s.prefetch_metadata_misses),
            l2_read_bytes: d(|s| s.l2_read_bytes),
            l2_write_bytes: d(|s| s.l2_write_bytes),
            l2_size: b.l2_size,
            size: b.size,
            c: b.c,
            c_max: b.c_max,
        }
    }
}

/// Process-wide totals.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Totals {
    /// zil_commit calls the lab made itself (job writes only).
    pub zil_commits_lab: u64,
    /// Every zil_commit call in the process (the lab's plus libzpool's own, e.g. the one in each zil_close).
    pub zil_commits_all: u64,
    /// zil_commits_all - zil_commits_lab.
    pub zil_commits_internal: u64,
    /// Every spa_sync call in the process (all pools).
    pub spa_sync_calls: u64,
    /// Host fsync() calls on vdev files (model none, or files the model does not know).
    pub host_fsyncs: u64,
    /// Leaf reads and writes that went through the vdev queue, in the whole
    /// process (what zpool iostat's latency histograms count).
    #[serde(default)]
    pub leaf_ios_queued: u64,
    /// Leaf cache flushes (zfs_file_fsync calls of file vdevs) in the whole process.
    #[serde(default)]
    pub leaf_flushes: u64,
    /// Of `leaf_ios_queued`, the reads and the writes at ZIO_PRIORITY_REMOVAL:
    /// RAIDZ expansion's reflow (the lab removes no device).
    #[serde(default)]
    pub removal_reads: u64,
    /// See `removal_reads`.
    #[serde(default)]
    pub removal_writes: u64,
    /// The ARC over the whole process (its statistics start at zero with
    /// it), pools exported: what a tracer of the whole run sees.
    #[serde(default)]
    pub arc: Option<ArcDelta>,
}

/// Latency summary of a histogram of nanoseconds.
pub fn lat_summary(h: &Histogram<u64>) -> LatNs {
    if h.is_empty() {
        return LatNs::default();
    }
    LatNs {
        min: h.min(),
        max: h.max(),
        mean: h.mean(),
        stddev: h.stdev(),
        percentile: PERCENTILES
            .iter()
            .map(|&p| (format!("{p:.6}"), h.value_at_quantile(p / 100.0)))
            .collect(),
    }
}

/// Operations and bytes per second, 0 for an empty interval.
pub fn rates(ops: u64, bytes: u64, elapsed_ns: u64) -> (f64, f64) {
    if elapsed_ns == 0 {
        return (0.0, 0.0);
    }
    let s = elapsed_ns as f64 / 1e9;
    (ops as f64 / s, bytes as f64 / s)
}

/// A latency histogram covering 1 ns .. 1 hour at 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_uniform_values() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let s = lat_summary(&h);
        let p = |k: &str| s.percentile[k] as f64;
        assert!((p("50.000000") - 500_000.0).abs() / 500_000.0 < 0.002);
        assert!((p("99.000000") - 990_000.0).abs() / 990_000.0 < 0.002);
        assert!((p("90.000000") - 900_000.0).abs() / 900_000.0 < 0.002);
        assert_eq!(s.percentile.len(), PERCENTILES.len());
        assert!(s.max >= 999_000 && s.min <= 1001);
    }

    #[test]
    fn empty_histogram_and_zero_time() {
        let s = lat_summary(&new_histogram());
        assert_eq!((s.max, s.percentile.len()), (0, 0));
        assert_eq!(rates(10, 100, 0), (0.0, 0.0));
        assert_eq!(rates(10, 4096, 2_000_000_000), (5.0, 2048.0));
    }
}
