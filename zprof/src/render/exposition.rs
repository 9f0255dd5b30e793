//! The Prometheus text exposition of zprof's in-kernel aggregates, for
//! `zprof serve`: every stage as a classic histogram in seconds (or bytes),
//! with buckets at the powers of two `zpool iostat -w` uses, its `_sum` and
//! `_count`; count-only rows as counters; and zprof's own health (probes,
//! losses, BPF run time, memory), so an alert can fire when the profiler
//! itself degrades. The values are cumulative since zprof attached, as
//! Prometheus expects of histograms and counters.
//!
//! What each stage is called here, and what its bytes mean, is in one table
//! ([`FAMILIES`]); a stage it does not list is exported under its own name in
//! seconds, without bytes.

#[cfg(feature = "encoder-comparison")]
pub mod by_prometheus_client;

use std::{collections::BTreeMap, fmt::Write as _};

use zprof_common::{HIST_BUCKETS, Stage, hist_bucket_high};

use crate::{
    recording::classes::COUNT_ONLY,
    recording::live::{Health, Scrape},
    recording::requests::RequestRecord,
    recording::{HistRecord, VdevRecord, stage_from_name},
    zfs::names,
};

/// How a stage is exported.
struct Family {
    stage: Stage,
    /// The metric's name between `zfs_` and its unit.
    name: &'static str,
    /// The name of the label that carries the row's class.
    class_label: &'static str,
    /// Whether the rows' `bytes` (and `bytes_out`) are data sizes worth a
    /// counter: elsewhere they hold counts (writes per commit, leaf writes).
    data_bytes: bool,
    /// Whether its rows are a leaf vdev's (labelled with its top-level vdev
    /// and allocation class).
    per_leaf: bool,
    help: &'static str,
}

const fn family(
    stage: Stage,
    name: &'static str,
    class_label: &'static str,
    data_bytes: bool,
    help: &'static str,
) -> Family {
    Family {
        stage,
        name,
        class_label,
        data_bytes,
        per_leaf: false,
        help,
    }
}

const fn leaf_family(stage: Stage, name: &'static str, help: &'static str) -> Family {
    Family {
        per_leaf: true,
        ..family(stage, name, "class", false, help)
    }
}

/// Every stage zprof exports, by what it measures.
const FAMILIES: &[Family] = &[
    family(
        Stage::Compress,
        "compress",
        "algorithm",
        true,
        "zio_compress_data: a block's compression",
    ),
    family(
        Stage::Decompress,
        "decompress",
        "algorithm",
        false,
        "zio_decompress_data: a block's decompression",
    ),
    family(
        Stage::ZstdCompress,
        "zstd_compress",
        "algorithm",
        false,
        "zstd's own compression call",
    ),
    family(
        Stage::Lz4Compress,
        "lz4_compress",
        "algorithm",
        false,
        "lz4's own compression call",
    ),
    family(
        Stage::ChecksumCompute,
        "checksum",
        "algorithm",
        false,
        "zio_checksum_compute: a block's checksum",
    ),
    family(
        Stage::ChecksumVerify,
        "checksum_verify",
        "algorithm",
        false,
        "a block's checksum verified on read",
    ),
    leaf_family(
        Stage::VdevQueue,
        "vdev_queue",
        "a leaf I/O's wait in the vdev queue (io_delta - io_delay)",
    ),
    leaf_family(
        Stage::VdevDisk,
        "vdev_disk",
        "a leaf I/O's time on the disk (io_delay)",
    ),
    leaf_family(
        Stage::VdevTotal,
        "vdev_total",
        "a leaf I/O's queue and disk time (io_delta)",
    ),
    family(
        Stage::VdevQueueTimed,
        "vdev_queue_timed",
        "class",
        false,
        "a leaf I/O's wait in the vdev queue, timed by probes",
    ),
    family(
        Stage::VdevWaitTimed,
        "vdev_wait_timed",
        "class",
        false,
        "a leaf I/O's queue wait, timed without struct offsets",
    ),
    family(
        Stage::VdevDiskTimed,
        "vdev_disk_timed",
        "class",
        false,
        "a leaf I/O's disk time, timed without struct offsets",
    ),
    family(
        Stage::ZilCommit,
        "zil_commit",
        "class",
        false,
        "zil_commit: an fsync's (or O_SYNC write's) wait for the ZIL",
    ),
    family(
        Stage::SpaSync,
        "spa_sync",
        "class",
        false,
        "spa_sync: one txg written out",
    ),
    family(
        Stage::SyncPhase,
        "txg_sync_phase",
        "phase",
        false,
        "a phase of a txg's sync, inside spa_sync (write_out, later_passes, frees, dedup, clones, scan, removal, metaslabs, labels, done)",
    ),
    family(
        Stage::TxgWaitSynced,
        "txg_wait_synced",
        "class",
        false,
        "a wait for a txg to be synced",
    ),
    family(
        Stage::TxAssign,
        "tx_assign",
        "class",
        false,
        "dmu_tx_assign: a transaction's assignment to a txg",
    ),
    family(
        Stage::TxWait,
        "tx_wait",
        "class",
        false,
        "dmu_tx_wait: the write throttle's delay and waits for a txg",
    ),
    family(
        Stage::Flush,
        "flush",
        "class",
        false,
        "zio_flush: cache flushes issued",
    ),
    family(
        Stage::WorkloadWrite,
        "workload_write",
        "class",
        true,
        "a workload write (dmu_write, or zfs_write and zvol writes on the kernel)",
    ),
    family(
        Stage::WorkloadRead,
        "workload_read",
        "class",
        true,
        "a workload read (dmu_read, or zfs_read and zvol reads on the kernel)",
    ),
    family(
        Stage::ZilLogWrite,
        "zil_log_write",
        "class",
        false,
        "per commit, the slowest leaf write of the log block (class 1: on a log vdev, 2: on a special vdev)",
    ),
    family(
        Stage::ZilFlush,
        "zil_flush",
        "class",
        false,
        "per commit, the flushes of the log block's vdevs",
    ),
    family(
        Stage::ZilOther,
        "zil_other",
        "class",
        false,
        "per commit, the time beyond its log write, flushes and timeout wait",
    ),
    family(
        Stage::SyncWriteCycle,
        "sync_write_cycle",
        "class",
        false,
        "a sync writer's own time between two of its commits",
    ),
    family(
        Stage::CommitGap,
        "commit_gap",
        "class",
        false,
        "per zil_commit, the pool's time since its last commit ended (count only: started while another was in progress)",
    ),
    family(
        Stage::ZilTimeoutWait,
        "zil_timeout_wait",
        "class",
        false,
        "per commit, the wait for the log block to fill (commit timeout)",
    ),
    family(
        Stage::Recv,
        "recv",
        "class",
        true,
        "zfs recv (dmu_recv_stream): each receive's time, and the stream bytes it read",
    ),
    family(
        Stage::AllocClass,
        "alloc_class",
        "class",
        true,
        "metaslab_alloc: blocks meant for the special or dedup class, and those that found it full (ENOSPC: allocated in another class)",
    ),
    family(
        Stage::BlockRead,
        "block_read",
        "class",
        false,
        "zio_read: blocks read from the disks (by physical size)",
    ),
    family(
        Stage::ZilLogBlock,
        "zil_log_block",
        "class",
        false,
        "a ZIL log block, from its issue to its vdevs flushed",
    ),
    family(
        Stage::ArcRead,
        "arc_read",
        "class",
        false,
        "arc_read: where the ARC served a block from",
    ),
    family(
        Stage::DdtLookup,
        "ddt_lookup",
        "class",
        false,
        "ddt_lookup: a block's search in the dedup table",
    ),
    family(
        Stage::DdtSync,
        "ddt_sync",
        "class",
        false,
        "ddt_sync: the dedup table's changes written at txg sync",
    ),
    family(
        Stage::DdtLogAppend,
        "ddt_log_append",
        "class",
        false,
        "fast dedup: a txg's changed entries appended to the dedup log (inside ddt_sync)",
    ),
    family(
        Stage::DdtLogFlush,
        "ddt_log_flush",
        "class",
        false,
        "fast dedup: logged entries flushed into the dedup table (inside ddt_sync)",
    ),
    family(
        Stage::ThrottleDelay,
        "throttle_delay",
        "class",
        false,
        "a transaction the write throttle delayed: the delay dmu_tx_delay computed (kernel)",
    ),
    family(
        Stage::ThrottleDirty,
        "throttle_dirty",
        "class",
        false,
        "a transaction the write throttle delayed: the pool's dirty data it was delayed at (kernel)",
    ),
    family(
        Stage::TxgDirty,
        "txg_dirty",
        "class",
        false,
        "a txg at the start of its sync: the dirty data it held (ndirty of the txgs kstat)",
    ),
    family(
        Stage::ArcMissReuse,
        "arc_miss_reuse_distance",
        "class",
        false,
        "a block read from disk: the bytes read from disk since its previous read (its reuse distance)",
    ),
];

fn family_of(stage: Stage) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.stage == stage)
}

/// Bucket bounds: powers of two, as `zpool iostat -w` prints them, from 1 us
/// to 68.7 s (2^10 to 2^36 ns); bytes from 4 KiB to 1 TiB. zprof's own
/// buckets split each power of two in eight, so these edges are exact: a
/// bound counts the values below it (a value equal to it is one nanosecond
/// past the "le" it is shown under; Prometheus cannot tell).
const TIME_SHIFTS: std::ops::RangeInclusive<u32> = 10..=36;
const BYTE_SHIFTS: std::ops::RangeInclusive<u32> = 12..=40;

/// Rendering choices.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Label each row with its leaf vdev's guid (otherwise leaves are summed).
    pub per_vdev: bool,
    /// Series of stage rows kept; rows beyond are folded into one series per
    /// family (labels "_other") and counted.
    pub max_series: usize,
    /// OpenMetrics (counter families named without `_total`, `# EOF`).
    pub openmetrics: bool,
}

/// One exported series of a stage: its labels and its merged rows.
#[derive(Default)]
struct Series {
    count: u64,
    total: u64,
    bytes: u64,
    bytes_out: u64,
    buckets: BTreeMap<usize, u64>,
}

impl Series {
    fn add(&mut self, row: &HistRecord) {
        self.count += row.count;
        self.total += row.total_ns;
        self.bytes += row.bytes;
        self.bytes_out += row.bytes_out;
        for &[index, n] in &row.buckets {
            *self.buckets.entry(index as usize).or_default() += n;
        }
    }

    /// Values below 2^shift for each shift of `shifts` (ascending): one
    /// pass over the buckets, which are in index order, their bounds rising.
    fn below_each(&self, shifts: std::ops::RangeInclusive<u32>) -> Vec<u64> {
        let mut buckets = self
            .buckets
            .iter()
            .filter(|(i, _)| **i < HIST_BUCKETS)
            .peekable();
        let mut below = 0;
        shifts
            .map(|shift| {
                while let Some((_, n)) =
                    buckets.next_if(|(i, _)| hist_bucket_high(**i) < 1u64 << shift)
                {
                    below += n;
                }
                below
            })
            .collect()
    }
}

/// The labels of one stage series.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Labels {
    pool: String,
    class: String,
    /// A leaf's top-level vdev ("raidz-0"), where known.
    top_vdev: Option<String>,
    /// A leaf's allocation class ("log"), where known.
    vdev_class: Option<String>,
    /// The leaf's guid (`--per-vdev`).
    vdev: Option<u64>,
}

impl Labels {
    /// The labels of `row`, placed by `vdevs` (leaf guid -> place).
    fn of(
        row: &HistRecord,
        family: &Family,
        vdevs: &BTreeMap<u64, &VdevRecord>,
        options: &Options,
    ) -> Labels {
        let mut class = row
            .class_name
            .trim_end_matches(COUNT_ONLY)
            .trim()
            .to_owned();
        let mut labels = Labels {
            pool: row.pool.clone(),
            vdev: options.per_vdev.then_some(row.vdev).filter(|v| *v != 0),
            ..Labels::default()
        };
        if family.per_leaf && row.vdev != 0 {
            let place = vdevs.get(&row.vdev);
            labels.top_vdev = place.map(|p| p.top_vdev.clone());
            labels.vdev_class = place.map(|p| p.class.clone());
            if row.class & zprof_common::VDEV_CACHE_DEVICE != 0 {
                // The class label says it is a cache device: not the I/O class too.
                class = names::io_class(row.class & !zprof_common::VDEV_CACHE_DEVICE);
                labels.vdev_class = Some("cache".into());
            }
        }
        labels.class = class.replace(' ', "_");
        labels
    }

    /// The series every row beyond the series limit goes to.
    fn folded() -> Labels {
        Labels {
            pool: "_other".into(),
            class: "_other".into(),
            ..Labels::default()
        }
    }
}

/// The stage rows grouped by family and series, with the series limit applied.
type Families = BTreeMap<&'static str, (&'static Family, BTreeMap<Labels, Series>)>;

struct Grouped {
    timed: Families,
    counted: Families,
    folded: usize,
}

fn group(scrape: &Scrape, options: &Options) -> Grouped {
    let mut grouped = Grouped {
        timed: BTreeMap::new(),
        counted: BTreeMap::new(),
        folded: 0,
    };
    let vdevs: BTreeMap<u64, &VdevRecord> = scrape.vdevs.iter().map(|v| (v.guid, v)).collect();
    let mut series = 0;
    for row in &scrape.rows {
        let Some(family) = stage_from_name(&row.stage).and_then(family_of) else {
            continue;
        };
        let count_only = row.class_name.ends_with(COUNT_ONLY);
        let labels = Labels::of(row, family, &vdevs, options);
        let target = if count_only {
            &mut grouped.counted
        } else {
            &mut grouped.timed
        };
        let (_, by_labels) = target
            .entry(family.name)
            .or_insert_with(|| (family, BTreeMap::new()));
        let labels = if by_labels.contains_key(&labels) || series < options.max_series {
            if !by_labels.contains_key(&labels) {
                series += 1;
            }
            labels
        } else {
            grouped.folded += 1;
            Labels::folded()
        };
        by_labels.entry(labels).or_default().add(row);
    }
    grouped
}

/// A label value with Prometheus's escapes.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A stage series' labels as `name="value"` pairs.
fn label_pairs(family: &Family, labels: &Labels) -> String {
    let mut parts = vec![format!("pool=\"{}\"", escape(&labels.pool))];
    if !labels.class.is_empty() {
        parts.push(format!(
            "{}=\"{}\"",
            family.class_label,
            escape(&labels.class)
        ));
    }
    if let Some(top) = &labels.top_vdev {
        parts.push(format!("top_vdev=\"{}\"", escape(top)));
    }
    if let Some(class) = &labels.vdev_class {
        parts.push(format!("vdev_class=\"{}\"", escape(class)));
    }
    if let Some(vdev) = labels.vdev {
        parts.push(format!("vdev_guid=\"{vdev}\""));
    }
    parts.join(",")
}

/// The same in braces, with `extra` pairs after them.
fn label_text(family: &Family, labels: &Labels, extra: &str) -> String {
    let pairs = label_pairs(family, labels);
    if extra.is_empty() {
        format!("{{{pairs}}}")
    } else {
        format!("{{{pairs},{extra}}}")
    }
}

/// Renders the whole exposition: the stages' rows, the request layer's, and
/// zprof's health.
pub fn render(scrape: &Scrape, options: &Options) -> String {
    let mut grouped = group(scrape, options);
    let mut out = String::new();
    for (family, by_labels) in grouped.timed.values() {
        histogram_family(&mut out, family, by_labels);
    }
    let used: usize = grouped
        .timed
        .values()
        .chain(grouped.counted.values())
        .map(|(_, l)| l.len())
        .sum();
    request_families(
        &mut out,
        &scrape.requests,
        options.max_series.saturating_sub(used).max(1),
        &mut grouped.folded,
        options,
    );
    for (family, by_labels) in grouped.counted.values() {
        let name = format!("zfs_{}_events", family.name);
        counter_head(
            &mut out,
            &name,
            &format!("{} (counted at entry, not timed)", family.help),
            options,
        );
        for (labels, series) in by_labels {
            let _ = writeln!(
                out,
                "{name}_total{} {}",
                label_text(family, labels, ""),
                series.count
            );
        }
    }
    bytes_families(&mut out, &grouped, options);
    health_families(&mut out, &scrape.health, grouped.folded, options);
    if options.openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn histogram_family(out: &mut String, family: &Family, by_labels: &BTreeMap<Labels, Series>) {
    let (unit, shifts, scale) = if family.stage.values_are_bytes() {
        ("bytes", BYTE_SHIFTS, 1.0)
    } else {
        ("duration_seconds", TIME_SHIFTS, 1e-9)
    };
    let name = format!("zfs_{}_{unit}", family.name);
    let series = by_labels
        .iter()
        .map(|(labels, series)| (label_pairs(family, labels), series));
    histogram_lines(out, &name, family.help, (shifts, scale), series);
}

/// A histogram family's lines; each series comes with its labels as
/// `name="value"` pairs, joined by commas.
fn histogram_lines<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    (shifts, scale): (std::ops::RangeInclusive<u32>, f64),
    series: impl Iterator<Item = (String, &'a Series)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    // Written straight into `out`: a scrape has tens of thousands of lines.
    let bounds: Vec<String> = shifts
        .clone()
        .map(|shift| ((1u64 << shift) as f64 * scale).to_string())
        .collect();
    for (labels, series) in series {
        let comma = if labels.is_empty() { "" } else { "," };
        for (bound, below) in bounds.iter().zip(series.below_each(shifts.clone())) {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{comma}le=\"{bound}\"}} {below}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{comma}le=\"+Inf\"}} {}",
            series.count
        );
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            series.total as f64 * scale
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", series.count);
    }
}

/// The request layer's rows (per layer, operation and dataset; processes and
/// cgroups summed) as `zfs_request_duration_seconds` and
/// `zfs_request_bytes_total`, within what is left of the series limit.
fn request_families(
    out: &mut String,
    requests: &[RequestRecord],
    room: usize,
    folded: &mut usize,
    options: &Options,
) {
    if requests.is_empty() {
        return;
    }
    let mut by_labels: BTreeMap<(String, String, String), Series> = BTreeMap::new();
    for request in requests {
        let mut key = (
            request.layer.clone(),
            request.op.clone(),
            request.dataset.clone(),
        );
        if !by_labels.contains_key(&key) && by_labels.len() >= room {
            *folded += 1;
            key = ("_other".into(), "_other".into(), "_other".into());
        }
        by_labels.entry(key).or_default().add(&request.as_hist());
    }
    let labels = |(layer, op, dataset): &(String, String, String)| {
        format!(
            "layer=\"{}\",op=\"{}\",dataset=\"{}\"",
            escape(layer),
            escape(op),
            escape(dataset)
        )
    };
    let help =
        "a file system or zvol request, from its system call or bio to its completion, per dataset";
    histogram_lines(
        out,
        "zfs_request_duration_seconds",
        help,
        (TIME_SHIFTS, 1e-9),
        by_labels.iter().map(|(k, s)| (labels(k), s)),
    );
    counter_head(
        out,
        "zfs_request_bytes",
        "bytes requested, per dataset",
        options,
    );
    for (key, series) in &by_labels {
        let _ = writeln!(
            out,
            "zfs_request_bytes_total{{{}}} {}",
            labels(key),
            series.bytes
        );
    }
}

/// `# HELP` and `# TYPE` of a counter family named `name` (without `_total`).
fn counter_head(out: &mut String, name: &str, help: &str, options: &Options) {
    let typed = if options.openmetrics {
        name.to_owned()
    } else {
        format!("{name}_total")
    };
    let _ = writeln!(out, "# HELP {typed} {help}");
    let _ = writeln!(out, "# TYPE {typed} counter");
}

/// Data bytes of the stages whose rows carry them, timed and counted rows alike.
fn bytes_families(out: &mut String, grouped: &Grouped, options: &Options) {
    // Per family, per label set: bytes in and out.
    type Sums<'a> = BTreeMap<&'a Labels, (u64, u64)>;
    let mut by_family: BTreeMap<&str, (&Family, Sums)> = BTreeMap::new();
    for (family, by_labels) in grouped
        .timed
        .values()
        .chain(grouped.counted.values())
        .filter(|(f, _)| f.data_bytes)
    {
        let (_, sums) = by_family
            .entry(family.name)
            .or_insert_with(|| (family, BTreeMap::new()));
        for (labels, series) in by_labels {
            let sum = sums.entry(labels).or_default();
            sum.0 += series.bytes;
            sum.1 += series.bytes_out;
        }
    }
    for (family, sums) in by_family.values() {
        let name = format!("zfs_{}_bytes", family.name);
        counter_head(
            out,
            &name,
            &format!(
                "{}: bytes in (and out, where it transforms them)",
                family.help
            ),
            options,
        );
        for (labels, (bytes_in, bytes_out)) in sums {
            let _ = writeln!(
                out,
                "{name}_total{} {bytes_in}",
                label_text(family, labels, "direction=\"in\"")
            );
            if *bytes_out > 0 {
                let _ = writeln!(
                    out,
                    "{name}_total{} {bytes_out}",
                    label_text(family, labels, "direction=\"out\"")
                );
            }
        }
    }
}

fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

fn counter(out: &mut String, name: &str, help: &str, samples: &[(String, u64)], options: &Options) {
    counter_head(out, name, help, options);
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}_total{labels} {value}");
    }
}

/// zprof's own health, after the stages.
fn health_families(out: &mut String, health: &Health, folded: usize, options: &Options) {
    build_and_probe_families(out, health);
    loss_families(out, health, options);
    program_cost_families(out, health, options);
    own_cost_families(out, health, folded, options);
}

/// What is traced and verified, and the probe points by state.
fn build_and_probe_families(out: &mut String, health: &Health) {
    let build = format!(
        "{{target=\"{}\",zfs_version=\"{}\",zfs_status=\"{}\",version=\"{}\"}}",
        escape(&health.target),
        escape(&health.zfs_version),
        escape(&health.zfs_status),
        env!("CARGO_PKG_VERSION")
    );
    gauge(
        out,
        "zprof_build_info",
        "the traced OpenZFS build and whether zprof verified how it reads it",
        &[(build, 1.0)],
    );
    let probes = [
        ("attached", health.probes_attached),
        ("unavailable", health.probes_unavailable),
    ];
    let probes: Vec<(String, f64)> = probes
        .iter()
        .map(|(s, n)| (format!("{{state=\"{s}\"}}"), *n as f64))
        .collect();
    gauge(
        out,
        "zprof_probes",
        "probe points by state (zprof probes lists why one is unavailable)",
        &probes,
    );
}

/// Lost events by cause and unmatched returns by stage.
fn loss_families(out: &mut String, health: &Health, options: &Options) {
    let losses: Vec<(String, u64)> = health
        .losses
        .iter()
        .map(|(c, n)| (format!("{{cause=\"{}\"}}", escape(c)), *n))
        .collect();
    counter(
        out,
        "zprof_lost_events",
        "events zprof could not count, by cause",
        &losses,
        options,
    );
    let unmatched: Vec<(String, u64)> = health
        .unmatched_by_stage
        .iter()
        .map(|(s, n)| (format!("{{stage=\"{}\"}}", escape(s)), *n))
        .collect();
    counter(
        out,
        "zprof_unmatched_returns",
        "return probes without their entry, by stage",
        &unmatched,
        options,
    );
}

/// Each eBPF program's runs and run time.
fn program_cost_families(out: &mut String, health: &Health, options: &Options) {
    let runs: Vec<(String, u64)> = health
        .programs
        .iter()
        .map(|(p, n, _)| (format!("{{program=\"{}\"}}", escape(p)), *n))
        .collect();
    counter(
        out,
        "zprof_bpf_runs",
        "runs of each loaded eBPF program",
        &runs,
        options,
    );
    let seconds: Vec<(String, f64)> = health
        .programs
        .iter()
        .map(|(p, _, ns)| (format!("{{program=\"{}\"}}", escape(p)), *ns as f64 * 1e-9))
        .collect();
    // A counter in value, but in seconds: a float total.
    counter_head(
        out,
        "zprof_bpf_run_seconds",
        "time spent in each loaded eBPF program",
        options,
    );
    for (labels, value) in &seconds {
        let _ = writeln!(out, "zprof_bpf_run_seconds_total{labels} {value}");
    }
}

/// zprof's own costs and state: attach time, memory, scrape time, the
/// tunables read, pools forgotten and series folded.
fn own_cost_families(out: &mut String, health: &Health, folded: usize, options: &Options) {
    gauge(
        out,
        "zprof_attach_seconds",
        "time from loading the probes to all attached",
        &[(String::new(), health.attach_seconds)],
    );
    gauge(
        out,
        "zprof_resident_memory_bytes",
        "zprof's resident memory",
        &[(String::new(), health.resident_bytes as f64)],
    );
    gauge(
        out,
        "zprof_collect_seconds",
        "time this scrape took to read the in-kernel maps",
        &[(String::new(), health.collect_seconds)],
    );
    for (tunable, value) in &health.tunables {
        gauge(
            out,
            tunable.metric,
            tunable.help,
            &[(String::new(), *value)],
        );
    }
    counter(
        out,
        "zprof_pools_forgotten",
        "exported or destroyed pools whose series ended (--forget-after after their export)",
        &[(String::new(), health.pools_forgotten)],
        options,
    );
    gauge(
        out,
        "zprof_series_folded",
        "stage series beyond --max-series, folded into their family's \"_other\" series",
        &[(String::new(), folded as f64)],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Recording;
    use crate::zfs::tunables::read_tunables;

    fn options() -> Options {
        Options {
            per_vdev: false,
            max_series: 10_000,
            openmetrics: false,
        }
    }

    /// The guest's requests run (OpenZFS 2.1.11 in the kernel, see
    /// tests/data/README.md): real rows, real buckets.
    fn captured() -> Recording {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.1.11-requests.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn sample(text: &str, line_start: &str) -> f64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no {line_start}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn each_histogram_is_cumulative_and_ends_at_its_count_and_sum() {
        let rec = captured();
        let text = render(&Scrape::of_recording(&rec), &options());
        let commits: Vec<&HistRecord> = rec
            .histograms
            .iter()
            .filter(|h| h.stage == "zil_commit")
            .collect();
        assert!(!commits.is_empty(), "the capture has commits");
        let count: u64 = commits.iter().map(|h| h.count).sum();
        let total: u64 = commits.iter().map(|h| h.total_ns).sum();
        let pool = &commits[0].pool;
        let labels = format!("{{pool=\"{pool}\"");
        assert_eq!(
            sample(
                &text,
                &format!("zfs_zil_commit_duration_seconds_count{labels}")
            ),
            count as f64
        );
        assert!(
            (sample(
                &text,
                &format!("zfs_zil_commit_duration_seconds_sum{labels}")
            ) - total as f64 * 1e-9)
                .abs()
                < 1e-6
        );
        let mut last = 0.0;
        for line in text
            .lines()
            .filter(|l| l.starts_with(&format!("zfs_zil_commit_duration_seconds_bucket{labels}")))
        {
            let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(value >= last, "not cumulative: {line}");
            last = value;
        }
        assert_eq!(last, count as f64, "+Inf holds every commit");
    }

    #[test]
    fn a_bucket_bound_counts_the_values_below_its_power_of_two() {
        // One value in [2^20, 2^20 + 2^17) (zprof's bucket index for 2^20) and
        // one just below 2^20.
        let low = zprof_common::hist_bucket(1 << 20) as u64;
        let below = zprof_common::hist_bucket((1 << 20) - 1) as u64;
        let row = HistRecord {
            stage: "zil_commit".into(),
            class: 0,
            class_name: String::new(),
            pool: "p".into(),
            vdev: 0,
            count: 2,
            total_ns: (1 << 21) - 1,
            bytes: 0,
            bytes_out: 0,
            max_ns: 1 << 20,
            buckets: vec![[below, 1], [low, 1]],
        };
        let text = render(
            &Scrape {
                rows: vec![row],
                ..Scrape::default()
            },
            &options(),
        );
        let le = |shift: u32| {
            sample(
                &text,
                &format!(
                    "zfs_zil_commit_duration_seconds_bucket{{pool=\"p\",le=\"{}\"}}",
                    (1u64 << shift) as f64 * 1e-9
                ),
            )
        };
        assert_eq!(le(19), 0.0);
        assert_eq!(le(20), 1.0);
        assert_eq!(le(21), 2.0);
    }

    #[test]
    fn series_beyond_the_limit_are_folded_and_counted() {
        let rec = captured();
        let limited = Options {
            max_series: 3,
            ..options()
        };
        let text = render(
            &Scrape {
                requests: vec![],
                ..Scrape::of_recording(&rec)
            },
            &limited,
        );
        let folded = sample(&text, "zprof_series_folded ");
        assert!(folded > 0.0, "the capture has more than 3 series");
        assert!(text.contains("pool=\"_other\""), "{text}");
        // Nothing is lost: the workload's writes still add up.
        let writes: u64 = rec
            .histograms
            .iter()
            .filter(|h| h.stage == "write")
            .map(|h| h.count)
            .sum();
        let exported: f64 = text
            .lines()
            .filter(|l| {
                l.starts_with("zfs_workload_write_duration_seconds_count")
                    || l.starts_with("zfs_workload_write_events_total")
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum();
        assert_eq!(exported, writes as f64);
    }

    #[test]
    fn requests_are_exported_per_layer_operation_and_dataset() {
        let rec = captured();
        let text = render(&Scrape::of_recording(&rec), &options());
        // The guest's zvol rq/v1 writes, summed over processes and flags.
        let writes: Vec<_> = rec
            .requests
            .iter()
            .filter(|r| r.layer == "zvol" && r.op == "write" && r.dataset == "rq/v1")
            .collect();
        assert!(!writes.is_empty(), "the capture has zvol writes");
        let labels = "{layer=\"zvol\",op=\"write\",dataset=\"rq/v1\"}";
        let count: u64 = writes.iter().map(|r| r.count).sum();
        let bytes: u64 = writes.iter().map(|r| r.bytes).sum();
        assert_eq!(
            sample(
                &text,
                &format!("zfs_request_duration_seconds_count{labels}")
            ),
            count as f64
        );
        assert_eq!(
            sample(&text, &format!("zfs_request_bytes_total{labels}")),
            bytes as f64
        );
    }

    #[test]
    fn tunables_are_read_where_present() {
        let dir = std::env::temp_dir().join(format!("zprof-tunables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("zfs_txg_timeout"), "7\n").unwrap();
        let read = read_tunables(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            read.iter().map(|(t, v)| (t.metric, *v)).collect::<Vec<_>>(),
            [("zfs_txg_timeout_seconds", 7.0)]
        );
        let health = Health {
            tunables: read,
            ..Health::default()
        };
        let text = render(
            &Scrape {
                health,
                ..Scrape::default()
            },
            &options(),
        );
        assert_eq!(sample(&text, "zfs_txg_timeout_seconds "), 7.0);
    }

    #[test]
    fn label_values_are_escaped_and_openmetrics_ends_with_eof() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let text = render(
            &Scrape::of_recording(&captured()),
            &Options {
                openmetrics: true,
                ..options()
            },
        );
        assert!(text.ends_with("# EOF\n"));
        assert!(
            text.contains("# TYPE zprof_lost_events counter"),
            "OpenMetrics names a counter family without _total"
        );
    }
}
