//! Findings: what a recording says about the workload, in words and numbers, with
//! the evidence behind each statement and what to do about it.
//!
//! Each finding carries a `share`: the fraction of the workload's time it
//! explains (time in the stages it is about, over the workload's own time: its
//! reads, writes, tx assigns and ZIL commits), or for CPU-side stages that run in
//! ZFS's threads (compression, checksums) the fraction of the machine's CPU time.
//! Findings are ranked by share. Each states its confidence and the evidence it
//! lacks, rather than guessing silently.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use zprof_common::Stage;

use crate::{
    bench,
    recording::{Recording, Summary, pick, summarize},
    report::{format_bytes, format_count, format_ns},
    sync_path::{self, SyncPath},
};

/// How sure a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Direct measurement, enough events.
    High,
    /// Measured, with a stated assumption or a model.
    Medium,
    /// Few events or missing evidence.
    Low,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Stable identifier (sync_write_bound, slog_what_if, compression, ...).
    pub kind: String,
    /// Pool it is about, when it is about one.
    pub pool: String,
    /// One sentence.
    pub title: String,
    /// Fraction of the workload's time (or CPU) it explains, 0..1.
    pub share: f64,
    /// How sure.
    pub confidence: Confidence,
    /// The numbers behind it.
    pub evidence: Vec<String>,
    /// Evidence the recording lacks.
    pub missing: Vec<String>,
    /// What to do.
    pub action: String,
    /// Key figures, for programs (name, value).
    pub figures: Vec<(String, f64)>,
}

/// A log device to predict with (`--what-if slog=...`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SlogDevice {
    /// Latency of one log block write (ns).
    pub write_ns: f64,
    /// Latency of one cache flush (ns).
    pub flush_ns: f64,
}

/// The devices `slog=ssd` and `slog=nvme` stand for, from vendors' published
/// figures, not from the lab's models (which the tests compare against):
/// - ssd: a SATA SSD with power-loss protection, the kind sold as a SLOG.
///   Intel's DC S3700 datasheet gives 65 us for a write (its "latency,
///   sequential write"). Datasheets give no flush latency: on a drive with
///   power-loss protection a flush writes nothing to flash, but ATA's FLUSH
///   CACHE is not a queued command, so it waits for the queue to drain and
///   costs a command round trip of its own; 100 us is this project's
///   assumption for it, shown in the finding.
/// - nvme: the DC P3700 (NVMe, power-loss protection) datasheet gives 20 us
///   for a write; an NVMe flush on such a device is a round trip, 20 us.
impl SlogDevice {
    /// A SATA/SAS SSD with power-loss protection (see above).
    pub const SSD: SlogDevice = SlogDevice {
        write_ns: 65_000.0,
        flush_ns: 100_000.0,
    };
    /// An NVMe device with power-loss protection (see above).
    pub const NVME: SlogDevice = SlogDevice {
        write_ns: 20_000.0,
        flush_ns: 20_000.0,
    };
}

/// One `--what-if`: a log device, or a cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WhatIf {
    /// A log device (SLOG) for sync writes.
    Slog(SlogDevice),
    /// A cache device or more ARC for reads.
    Cache(crate::cache_what_if::CacheSpec),
}

/// Parses a `--what-if`: `slog=...` (see [`parse_slog`]), `l2arc=SIZE[,ssd|nvme]` or `arc=+SIZE`.
pub fn parse_what_if(s: &str) -> Result<WhatIf, String> {
    match crate::cache_what_if::parse_cache(s) {
        Some(cache) => cache.map(WhatIf::Cache),
        None => parse_slog(s).map(WhatIf::Slog),
    }
}

/// Parses `slog=ssd`, `slog=nvme`, `slog=0.1ms` or `slog=80us,flush=50us`.
pub fn parse_slog(s: &str) -> Result<SlogDevice, String> {
    let bad = || {
        format!(
            "invalid --what-if '{s}': use slog=ssd, slog=nvme, slog=LATENCY or slog=LATENCY,flush=LATENCY (e.g. slog=0.1ms), \
             l2arc=SIZE[,ssd|nvme] or arc=+SIZE"
        )
    };
    let spec = s.strip_prefix("slog=").ok_or_else(bad)?;
    match spec {
        "ssd" => return Ok(SlogDevice::SSD),
        "nvme" => return Ok(SlogDevice::NVME),
        _ => {}
    }
    let mut parts = spec.split(',');
    let write = parse_latency(parts.next().ok_or_else(bad)?).ok_or_else(bad)?;
    let mut flush = write;
    for part in parts {
        let value = part
            .strip_prefix("flush=")
            .and_then(parse_latency)
            .ok_or_else(bad)?;
        flush = value;
    }
    Ok(SlogDevice {
        write_ns: write,
        flush_ns: flush,
    })
}

fn parse_latency(s: &str) -> Option<f64> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    (value > 0.0).then_some(value * scale)
}

/// What `explain` needs to know beyond the recording.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// Log devices to predict with; empty means the default (ssd and nvme).
    pub slogs: Vec<(String, SlogDevice)>,
    /// Caches to predict reads with; empty means the default (an ssd cache
    /// device that holds all the data the run read from disk).
    pub caches: Vec<crate::cache_what_if::CacheSpec>,
    /// CPUs of the machine the recording was made on (for CPU shares).
    pub cpus: usize,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            slogs: Vec::new(),
            caches: Vec::new(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

fn stat(rec: &Recording, stage: Stage, pool: Option<&str>) -> Summary {
    summarize(pick(rec, stage, pool, None))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// Runs every analysis and returns the findings, most important first.
pub fn explain(rec: &Recording, options: &ExplainOptions) -> Vec<Finding> {
    let seconds = rec.duration_s.max(1e-9);
    let wall_ns = seconds * 1e9;
    let cpu_ns = wall_ns * options.cpus.max(1) as f64;
    let measured_ns = [
        Stage::WorkloadWrite,
        Stage::WorkloadRead,
        Stage::TxAssign,
        Stage::ZilCommit,
    ]
    .iter()
    .map(|s| stat(rec, *s, None).total_ns as f64)
    .sum::<f64>();
    // Reads and writes counted at entry only (the uprobe default) carry no
    // time: the workload then spent at least the recording's wall time (one
    // thread busy throughout), not just its commits and throttle waits.
    let untimed_ops = [Stage::WorkloadWrite, Stage::WorkloadRead].iter().any(|s| {
        let ops = stat(rec, *s, None);
        ops.count > 0 && ops.total_ns == 0
    });
    let workload_ns = if untimed_ops {
        measured_ns.max(wall_ns)
    } else {
        measured_ns
    }
    .max(1.0);
    let mut findings = Vec::new();

    let pools: BTreeSet<String> = pick(rec, Stage::ZilCommit, None, None)
        .iter()
        .map(|h| h.pool.clone())
        .collect();
    for pool in &pools {
        sync_write(rec, pool, options, &mut findings);
    }
    compression(rec, cpu_ns, &mut findings);
    checksum(rec, cpu_ns, &mut findings);
    let commit_share = stat(rec, Stage::ZilCommit, None).total_ns as f64 / workload_ns;
    write_amplification(rec, wall_ns, commit_share, &mut findings);
    throttle(rec, workload_ns, &mut findings);
    if let Some(path) = crate::read_path::ReadPath::measure(rec) {
        reads(rec, &path, workload_ns, &mut findings);
        cache_what_if(rec, &path, options, workload_ns, &mut findings);
    }
    dedup(rec, wall_ns, cpu_ns, &mut findings);
    crate::zvol_blocks::findings(rec, &mut findings);
    findings.sort_by(|a, b| b.share.total_cmp(&a.share));
    findings
}

/// Findings 1 and 2: sync writes bound by ZIL commits, and what a SLOG would do.
fn sync_write(rec: &Recording, pool: &str, options: &ExplainOptions, out: &mut Vec<Finding>) {
    let commit = stat(rec, Stage::ZilCommit, Some(pool));
    // A handful of commits (zil_close makes one per pool) bound nothing.
    if commit.count < 10 {
        return;
    }
    // Commits that wrote no log block (sync=disabled, or nothing to log) cost
    // no I/O: they bound nothing, whatever their count.
    let offsets_known = !rec
        .warnings
        .iter()
        .any(|w| w.starts_with("no struct offsets"));
    if stat(rec, Stage::ZilLogWrite, Some(pool)).count == 0 && offsets_known {
        return;
    }
    let Some(path) = SyncPath::measure(rec, pool) else {
        out.push(commits_only(pool, &commit));
        return;
    };
    let bench = BenchSync::of(rec, pool);
    let writers = bench.as_ref().map_or(path.writers, |b| b.writers.max(1.0));
    // The sync writers' time: their commits and their own time between them.
    let writer_ns =
        path.commit_mean_ns * path.commits as f64 + path.cycle_mean_ns * path.cycles as f64;
    let share = (commit.total_ns as f64 / writer_ns.max(1.0)).min(1.0);
    let mut evidence = vec![
        format!(
            "{} sync writes (writes a thread made before its own zil_commit; {:.1} per commit) in {} commits, p50 {}, p99 {}: {} of the sync writers' time",
            format_count(path.sync_writes as f64),
            path.writes_per_commit(),
            format_count(commit.count as f64),
            format_ns(commit.p50_ns),
            format_ns(commit.p99_ns),
            pct(share)
        ),
        format!(
            "a commit, typical mean {}: log block write {} on {} + flushes {} + commit timeout {} + other (CPU, wake-ups) {}; {:.1} leaf I/Os per commit",
            format_ns(path.commit.typical_mean_ns as u64),
            format_ns(path.log_write_ns as u64),
            if path.on_log_device {
                "the log vdev"
            } else {
                "the main pool's vdevs"
            },
            format_ns(path.flush_ns as u64),
            format_ns(path.timeout_ns as u64),
            format_ns(path.other_ns as u64),
            path.leaf_ios_per_commit
        ),
        format!(
            "per writer: commit {} + its own time between commits {} (mean) = {}/s; about {:.1} writer(s){}",
            format_ns(path.commit_mean_ns as u64),
            format_ns(path.cycle_mean_ns as u64),
            format_count(path.measured_per_writer()),
            writers,
            bench.as_ref().map_or(String::new(), |b| format!(
                " ({} measured {}/s)",
                b.tool,
                format_count(b.iops)
            ))
        ),
    ];
    if let Some(line) = crate::requests::sync_requests_line(&rec.requests, pool, commit.total_ns) {
        evidence.insert(0, line);
    }
    if path.commit.stalled + path.cycle.stalled > 0 {
        evidence.push(format!(
            "{} commits and {} cycles stalled (over {:.0}x their median: a txg-sync wait, such as the first commit creating the log): {} lost, {} of the writers' time",
            path.commit.stalled,
            path.cycle.stalled,
            sync_path::STALL_FACTOR,
            format_ns((path.commit.stalled_ns + path.cycle.stalled_ns) as u64),
            pct(path.stall_fraction())
        ));
    }
    let mut missing = Vec::new();
    if rec.target.kind == crate::target::TargetKind::Kernel {
        missing.push("on the kernel target zio_flush only issues the flushes: their time is inside the log write".into());
    }
    let (title, action) = if path.on_log_device {
        (
            format!("sync writes are bound by ZIL commits on the log device ({} each)", format_ns(commit.p50_ns)),
            "The log device is on the critical path: a lower-latency SLOG (NVMe with power-loss protection) shortens every commit; more concurrent writers share commits.".to_owned(),
        )
    } else {
        (
            format!(
                "sync writes are bound by ZIL commits to the main pool ({} each, {} of the sync writers' time)",
                format_ns(commit.p50_ns),
                pct(share)
            ),
            "Every fsync waits for a log block write and flushes on the pool's own disks: add a log vdev (SLOG) on low-latency flash (see the what-if), or, only where losing the last seconds of acknowledged writes is acceptable, sync=disabled.".to_owned(),
        )
    };
    out.push(Finding {
        kind: "sync_write_bound".into(),
        pool: pool.to_owned(),
        title,
        share,
        confidence: if commit.count >= 100 {
            Confidence::High
        } else {
            Confidence::Medium
        },
        evidence,
        missing,
        action,
        figures: vec![
            ("commit_mean_ns".into(), path.commit_mean_ns),
            ("log_write_ns".into(), path.log_write_ns),
            ("flush_ns".into(), path.flush_ns),
            ("timeout_ns".into(), path.timeout_ns),
            ("other_ns".into(), path.other_ns),
            ("cycle_ns".into(), path.cycle_mean_ns),
            ("writes_per_commit".into(), path.writes_per_commit()),
            ("writers".into(), writers),
            ("measured_per_writer_ops".into(), path.measured_per_writer()),
        ],
    });
    out.push(slog_what_if(
        rec,
        pool,
        &path,
        writers,
        share,
        bench.as_ref(),
        options,
    ));
}

/// The benchmark's own figures for its sync-writing jobs on a pool: they
/// refine the number of writers and the rate to compare with.
struct BenchSync {
    tool: String,
    iops: f64,
    writers: f64,
}

impl BenchSync {
    fn of(rec: &Recording, pool: &str) -> Option<BenchSync> {
        let bench = rec.benchmark.as_ref()?;
        let jobs: Vec<&bench::BenchJob> = bench
            .jobs
            .iter()
            .filter(|j| j.sync.as_ref().is_some_and(|s| s.count > 0) && j.write.is_some())
            .filter(|j| j.pool.as_deref().is_none_or(|p| p == pool))
            .collect();
        if jobs.is_empty() {
            return None;
        }
        let iops: f64 = jobs
            .iter()
            .filter_map(|j| j.write.as_ref())
            .map(|w| w.iops)
            .sum();
        // Little's law per job: concurrent writers = rate x latency.
        let writers: f64 = jobs
            .iter()
            .filter_map(|j| j.write.as_ref())
            .map(|w| w.iops * w.lat_mean_ns / 1e9)
            .sum();
        // Figures that overflow (a damaged recording's) are not the benchmark's: zprof's own count stands.
        (iops.is_finite() && writers.is_finite()).then(|| BenchSync {
            tool: bench.tool.clone(),
            iops,
            writers,
        })
    }
}

/// A recording without sync-write cycles (made before zprof told sync writes
/// apart, or with the workload probes unavailable): the commits alone.
fn commits_only(pool: &str, commit: &Summary) -> Finding {
    Finding {
        kind: "sync_write_bound".into(),
        pool: pool.to_owned(),
        title: format!("zil_commit takes {} per call (p50)", format_ns(commit.p50_ns)),
        share: 0.0,
        confidence: Confidence::Low,
        evidence: vec![format!(
            "{} zil_commit calls, p50 {}, p99 {}",
            format_count(commit.count as f64),
            format_ns(commit.p50_ns),
            format_ns(commit.p99_ns)
        )],
        missing: vec!["which writes the commits covered (no sync_write_cycle stage, or one without writes: a recording of an older zprof, or the workload probes were skipped or unavailable); no SLOG what-if".into()],
        action: "Record again with this zprof and the workload probes (no --skip workload) to see whether commits bound the writers.".into(),
        figures: vec![("commit_p50_ns".into(), commit.p50_ns as f64)],
    }
}

fn slog_what_if(
    rec: &Recording,
    pool: &str,
    path: &SyncPath,
    writers: f64,
    share: f64,
    bench: Option<&BenchSync>,
    options: &ExplainOptions,
) -> Finding {
    let devices = if options.slogs.is_empty() {
        vec![
            ("ssd".to_owned(), SlogDevice::SSD),
            ("nvme".to_owned(), SlogDevice::NVME),
        ]
    } else {
        options.slogs.clone()
    };
    let release = crate::openzfs::interpret(
        rec.target.zfs_version.as_deref(),
        rec.target.kind == crate::target::TargetKind::Kernel,
    );
    let rule = release
        .series
        .map_or(crate::openzfs::COMMIT_TIMEOUT_ASSUMED, |s| s.commit_timeout);
    let measured = bench.map_or(path.measured_per_writer() * writers, |b| b.iops);
    let measured_by = bench.map_or("zprof", |b| b.tool.as_str());
    let (timeout_fraction, timeout_wake) = path.timeout_parts(rule);
    let mut evidence = vec![format!(
        "model, from this recording: commit = log write + flush on the device + commit timeout (measured {} here: {:.0}% of the log block's latency + {} of wake-up) + other {}; per writer, writes/s = {:.1} writes per commit / (commit + the writer's own time {}), less the {} stalled",
        format_ns(path.timeout_ns as u64),
        timeout_fraction * 100.0,
        format_ns(timeout_wake as u64),
        format_ns(path.other_ns as u64),
        path.writes_per_commit(),
        format_ns(path.cycle.typical_mean_ns as u64),
        pct(path.stall_fraction())
    )];
    let mut figures = Vec::new();
    let mut best_gain: f64 = 0.0;
    let mut first = None;
    for (name, device) in &devices {
        let p = path.predict(device.write_ns, device.flush_ns, rule);
        let total = p.per_writer * writers;
        let gain = if measured > 0.0 {
            total / measured
        } else {
            f64::NAN
        };
        if gain.is_finite() {
            best_gain = best_gain.max(gain);
        }
        evidence.push(format!(
            "with a {name} log device (write {}, flush {}): commit about {}, about {} sync writes/s ({}x the {}/s measured by {measured_by}); between {} (the non-device time all per commit) and {} (all per leaf I/O)",
            format_ns(device.write_ns as u64),
            format_ns(device.flush_ns as u64),
            format_ns(p.commit_ns as u64),
            format_count(total),
            if gain.is_finite() { format!("{gain:.1}") } else { "-".into() },
            format_count(measured),
            format_count(p.range.0 * writers),
            format_count(p.range.1 * writers)
        ));
        figures.push((format!("predicted_ops_{name}"), total));
        figures.push((format!("predicted_ops_low_{name}"), p.range.0 * writers));
        figures.push((format!("predicted_ops_high_{name}"), p.range.1 * writers));
        figures.push((format!("predicted_commit_ns_{name}"), p.commit_ns));
        first.get_or_insert(p);
    }
    let uncertainty = format!(
        "the largest uncertainty is the non-device time, {} per commit (other {} + the writer's own {}): it was measured with {:.1} leaf I/Os per commit and a log device has {:.0}; the prediction keeps {:.0}% of it ({})",
        format_ns(path.non_device_ns() as u64),
        format_ns(path.other_ns as u64),
        format_ns(path.cycle.typical_mean_ns as u64),
        path.leaf_ios_per_commit,
        sync_path::LOG_DEVICE_LEAF_IOS,
        first.map_or(100.0, |p| p.non_device_scale * 100.0),
        match rec.machine_cpu_busy {
            Some(busy) => format!("between per leaf I/O and per commit: the machine's CPUs were {} busy", pct(busy)),
            None => "between per leaf I/O and per commit: the recording does not say how busy the machine was".into(),
        }
    );
    let mut missing = vec![
        uncertainty,
        "assumes the log device's latencies above as ZFS sees them (pass --what-if slog=WRITE,flush=FLUSH for yours); the data still reaches the main pool at txg sync, which must keep up".to_owned(),
    ];
    let saturated = rec.machine_cpu_busy.filter(|busy| *busy >= CPU_SATURATED);
    if let Some(busy) = saturated {
        missing.push(format!(
            "the machine's CPUs were {} busy: at the predicted commit rate ZFS's threads would compete harder for them than they did here, so the prediction is an upper bound",
            pct(busy)
        ));
    }
    if release.series.is_none() {
        missing.push(format!(
            "OpenZFS {} is not a release zprof knows: the commit timeout is taken as 2.1's ({:.0}%)",
            release.version_text(),
            rule.fraction * 100.0
        ));
    }
    let predicted_time = first.map_or(0.0, |p| p.commit_ns + p.cycle_ns);
    let measured_time = path.commit_mean_ns + path.cycle_mean_ns;
    // The share of the writers' time the change would remove.
    let removed = share * (1.0 - predicted_time / measured_time.max(1.0)).max(0.0);
    // Inputs measured over many commits, and a narrow gap between the two
    // ends of the prediction, make it firmer.
    let spread = first.map_or(f64::INFINITY, |p| p.range.1 / p.range.0.max(1e-9));
    let confidence = if path.commits >= 100 && spread < 1.5 && saturated.is_none() {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    Finding {
        kind: "slog_what_if".into(),
        pool: pool.to_owned(),
        title: if path.on_log_device {
            format!("a faster log device would raise sync writes up to {best_gain:.1}x")
        } else {
            format!("a log device (SLOG) would raise sync writes about {best_gain:.0}x")
        },
        share: removed,
        confidence,
        evidence,
        missing,
        action: "Add a mirrored log vdev (zpool add POOL log mirror DEV1 DEV2) on devices with power-loss protection; check the gain with zprof compare on the same workload.".into(),
        figures,
    }
}

/// The machine's busy CPU share from which a SLOG prediction is an upper
/// bound: with no CPU to spare, ten times the commit rate means ZFS's threads
/// wait for CPUs more often (measured on 2.3.2 with both cores loaded: the
/// non-device time of a commit grew from 340 us on raidz3 to 426 us on a log
/// device, where it shrank from 487 to about 117 us on 2.1.11).
const CPU_SATURATED: f64 = 0.9;

/// Finding 3: compression cost per algorithm.
fn compression(rec: &Recording, cpu_ns: f64, out: &mut Vec<Finding>) {
    let rows = pick(rec, Stage::Compress, None, None);
    let algorithms: BTreeSet<&str> = rows.iter().map(|h| h.class_name.as_str()).collect();
    if algorithms.is_empty() {
        return;
    }
    let per_mib = |s: &Summary| {
        if s.bytes > 0 {
            s.total_ns as f64 / (s.bytes as f64 / 1048576.0)
        } else {
            0.0
        }
    };
    let lz4 = summarize(pick(rec, Stage::Compress, None, Some("lz4")));
    let lz4_cost = (lz4.bytes >= 1 << 20).then(|| per_mib(&lz4));
    let total: Summary = summarize(rows.iter().copied());
    let mut evidence = Vec::new();
    let mut nothing = Vec::new();
    let mut saving_ns = 0.0;
    for algorithm in &algorithms {
        let s = summarize(pick(rec, Stage::Compress, None, Some(algorithm)));
        let ratio = if s.bytes_out > 0 {
            s.bytes as f64 / s.bytes_out as f64
        } else {
            1.0
        };
        evidence.push(format!(
            "{algorithm}: {} in, ratio {ratio:.2}x, {} wall time in zio_compress_data ({} per MiB, p50 {} per block)",
            format_bytes(s.bytes as f64),
            format_ns(s.total_ns),
            format_ns(per_mib(&s) as u64),
            format_ns(s.p50_ns)
        ));
        // lz4 gives up early on incompressible data and stays cheap: it is
        // the recommended default, not a cost to flag.
        if ratio < 1.1 && s.bytes >= 1 << 20 && *algorithm != "lz4" {
            nothing.push(format!("{algorithm} (ratio {ratio:.2}x)"));
        }
        if *algorithm != "lz4"
            && let Some(lz4_cost) = lz4_cost
        {
            let with_lz4 = s.bytes as f64 / 1048576.0 * lz4_cost;
            if with_lz4 < s.total_ns as f64 {
                saving_ns += s.total_ns as f64 - with_lz4;
                evidence.push(format!(
                    "at lz4's measured {} per MiB the same data would cost {} ({} less wall time)",
                    format_ns(lz4_cost as u64),
                    format_ns(with_lz4 as u64),
                    format_ns((s.total_ns as f64 - with_lz4) as u64)
                ));
            }
        }
    }
    // Wall time inside zio_compress_data includes waiting for a CPU; the
    // on-CPU samples taken inside it are its CPU time.
    let sampled = sampled_cpu_under(rec, "zio_compress_data");
    let compress_cpu_ns = match sampled {
        Some((ns, samples)) if samples > 0 => {
            evidence.push(format!(
                "CPU from {samples} on-CPU samples inside zio_compress_data: about {} ({} of its wall time; the rest waited for a CPU)",
                format_ns(ns as u64),
                pct(ns / (total.total_ns as f64).max(1.0))
            ));
            ns
        }
        _ => {
            evidence.push("no CPU samples inside zio_compress_data: its wall time stands for CPU (an upper bound)".into());
            total.total_ns as f64
        }
    };
    let share = compress_cpu_ns / cpu_ns;
    let (title, action) = if !nothing.is_empty() {
        (
            format!("compression is paying for nothing: {} ({} of CPU)", nothing.join(", "), pct(share)),
            "The data does not compress: compression=lz4 (which gives up early on incompressible data) or off for this dataset saves the CPU at no cost in space.".to_owned(),
        )
    } else {
        (
            format!("compression takes {} of the machine's CPU time", pct(share)),
            if saving_ns > 0.0 {
                "Weigh the extra ratio against the CPU: lz4 would cost less per MiB; zstd pays off where space matters more than write throughput.".to_owned()
            } else {
                "No action needed unless the workload is CPU-bound.".to_owned()
            },
        )
    };
    out.push(Finding {
        kind: "compression".into(),
        pool: String::new(),
        title,
        share,
        confidence: if total.count >= 100 {
            Confidence::High
        } else {
            Confidence::Low
        },
        evidence,
        missing: vec![
            "ZFS also compresses its own metadata with lz4; those blocks are in the lz4 row".into(),
        ],
        action,
        figures: vec![
            ("compress_cpu_ns".into(), compress_cpu_ns),
            ("compress_wall_ns".into(), total.total_ns as f64),
            ("lz4_saving_ns".into(), saving_ns),
        ],
    });
}

/// Finding 4: checksum cost per algorithm.
fn checksum(rec: &Recording, cpu_ns: f64, out: &mut Vec<Finding>) {
    let rows = pick(rec, Stage::ChecksumCompute, None, None);
    let verify = stat(rec, Stage::ChecksumVerify, None);
    let total = summarize(rows.iter().copied());
    // Untimed blocks (the default on uprobes, where they are not probed): the
    // CPU time comes from the on-CPU samples taken while computing a checksum
    // (verification on read has its own timed probe, so its stacks are left out).
    let sampled = if total.total_ns == 0 {
        sampled_checksum_cpu(rec)
    } else {
        None
    };
    if rows.is_empty()
        && sampled.as_ref().is_none_or(|(_, samples, _)| *samples == 0)
        && verify.count == 0
    {
        return;
    }
    let algorithms: BTreeSet<&str> = rows.iter().map(|h| h.class_name.as_str()).collect();
    let mut evidence = Vec::new();
    for algorithm in &algorithms {
        let s = summarize(pick(rec, Stage::ChecksumCompute, None, Some(algorithm)));
        let per_mib = if s.bytes > 0 {
            s.total_ns as f64 / (s.bytes as f64 / 1048576.0)
        } else {
            0.0
        };
        evidence.push(format!(
            "{algorithm}: {} blocks, {} checksummed, {} CPU ({} per MiB)",
            format_count(s.count as f64),
            format_bytes(s.bytes as f64),
            format_ns(s.total_ns),
            format_ns(per_mib as u64)
        ));
    }
    let mut missing = Vec::new();
    if let Some((ns, samples, functions)) = &sampled {
        if *samples > 0 {
            let functions = if functions.is_empty() {
                String::new()
            } else {
                format!(" ({})", functions.join(", "))
            };
            evidence.push(format!(
                "CPU from {samples} on-CPU samples computing checksums{functions}: about {}",
                format_ns(*ns as u64)
            ));
        } else {
            evidence.push("no on-CPU sample caught a block checksum being computed".into());
        }
        missing.push("blocks and bytes per algorithm: on uprobes blocks are not probed by default (about 0.8 us per block); --full-timing counts and times them".into());
    }
    if verify.count > 0 {
        evidence.push(format!(
            "verification on read: {} checks, {} CPU",
            format_count(verify.count as f64),
            format_ns(verify.total_ns)
        ));
    }
    let compute_ns = if total.total_ns > 0 {
        total.total_ns as f64
    } else {
        sampled.as_ref().map_or(0.0, |(ns, _, _)| *ns)
    };
    let share = (compute_ns + verify.total_ns as f64) / cpu_ns;
    out.push(Finding {
        kind: "checksum".into(),
        pool: String::new(),
        title: format!("checksums take {} of the machine's CPU time", pct(share)),
        share,
        confidence: if total.total_ns > 0 { Confidence::High } else { Confidence::Medium },
        evidence,
        missing,
        action: "fletcher4 is the cheap default; sha256/sha512/skein are needed for dedup or nopwrite, and cost several times more per MiB.".into(),
        figures: vec![("checksum_cpu_ns".into(), compute_ns + verify.total_ns as f64)],
    });
}

/// CPU time in samples taken inside zio_checksum_compute (the write
/// pipeline's block checksums; ARC's debug checksums and verification on read
/// are elsewhere): time, samples, and the innermost checksum functions seen,
/// most sampled first.
fn sampled_checksum_cpu(rec: &Recording) -> Option<(f64, u64, Vec<String>)> {
    let cpu = rec.cpu.as_ref().filter(|c| c.frequency_hz > 0)?;
    let is_checksum = |f: &str| {
        [
            "fletcher_2",
            "fletcher_4",
            "sha256",
            "sha512",
            "SHA2",
            "skein",
            "edonr",
            "blake3",
        ]
        .iter()
        .any(|name| f.contains(name))
    };
    let mut samples = 0;
    let mut by_function: BTreeMap<&str, u64> = BTreeMap::new();
    for stack in &cpu.stacks {
        // Frames run from the root to the leaf: the last checksum frame below
        // zio_checksum_compute is the function doing the work.
        let Some(start) = stack
            .frames
            .iter()
            .position(|f| f.contains("zio_checksum_compute"))
        else {
            continue;
        };
        let leaf = stack.frames[start..]
            .iter()
            .rev()
            .find(|f| is_checksum(f))
            .unwrap_or(&stack.frames[start]);
        samples += stack.count;
        *by_function.entry(leaf.as_str()).or_default() += stack.count;
    }
    let mut functions: Vec<(&str, u64)> = by_function.into_iter().collect();
    functions.sort_by_key(|f| std::cmp::Reverse(f.1));
    let names = functions
        .iter()
        .take(3)
        .map(|(f, _)| f.to_string())
        .collect();
    Some((
        samples as f64 * 1e9 / cpu.frequency_hz as f64,
        samples,
        names,
    ))
}

/// CPU time in on-CPU samples with `function` on the stack, and their number;
/// `None` when the recording has no CPU samples.
fn sampled_cpu_under(rec: &Recording, function: &str) -> Option<(f64, u64)> {
    let cpu = rec.cpu.as_ref().filter(|c| c.frequency_hz > 0)?;
    let samples: u64 = cpu
        .stacks
        .iter()
        .filter(|s| s.frames.iter().any(|f| f.contains(function)))
        .map(|s| s.count)
        .sum();
    Some((samples as f64 * 1e9 / cpu.frequency_hz as f64, samples))
}

/// Finding 5: bytes written to leaf vdevs over bytes the workload wrote.
fn write_amplification(rec: &Recording, wall_ns: f64, commit_share: f64, out: &mut Vec<Finding>) {
    let logical = stat(rec, Stage::WorkloadWrite, None);
    if logical.bytes == 0 {
        return;
    }
    let leaf: Vec<_> = pick(rec, Stage::VdevTotal, None, None)
        .into_iter()
        .filter(|h| crate::zfs_names::io_class_is_write(h.class))
        .collect();
    let by_class = |name: &str| summarize(leaf.iter().copied().filter(|h| h.class_name == name));
    let zil = by_class("sync write");
    let txg = by_class("async write");
    let all = summarize(leaf.iter().copied());
    if all.bytes == 0 {
        return;
    }
    let factor = all.bytes as f64 / logical.bytes as f64;
    let has_commits = stat(rec, Stage::ZilCommit, None).count > 0;
    let vdevs: BTreeSet<u64> = leaf.iter().map(|h| h.vdev).collect();
    let disk_busy = summarize(
        pick(rec, Stage::VdevDisk, None, None)
            .into_iter()
            .filter(|h| crate::zfs_names::io_class_is_write(h.class)),
    )
    .total_ns as f64
        / (wall_ns * vdevs.len().max(1) as f64);
    let mut evidence = vec![
        format!(
            "the workload wrote {}; leaf vdevs wrote {} ({factor:.2}x) over {} vdev(s)",
            format_bytes(logical.bytes as f64),
            format_bytes(all.bytes as f64),
            vdevs.len()
        ),
        format!(
            "{}: {} ({:.2}x); txg sync (async writes): {} ({:.2}x)",
            sync_priority_words(has_commits),
            format_bytes(zil.bytes as f64),
            zil.bytes as f64 / logical.bytes as f64,
            format_bytes(txg.bytes as f64),
            txg.bytes as f64 / logical.bytes as f64
        ),
    ];
    let mut title = format!("each byte written costs {factor:.1} bytes on the leaf vdevs");
    let mut action = "Parity, ZIL writes and metadata make up the difference; on raidz small blocks add padding.".to_owned();
    if let Some(bench) = &rec.benchmark
        && let Some(pool) = bench.pools.iter().find(|p| p.layout.starts_with("raidz"))
        && pool.volblocksize > 0
    {
        let sector = 1u64 << pool.ashift;
        evidence.push(format!(
            "layout {} ashift {}, volblocksize {}",
            pool.layout,
            pool.ashift,
            format_bytes(pool.volblocksize as f64)
        ));
        if pool.volblocksize <= 4 * sector {
            title = format!("{title}: small blocks on raidz");
            action = format!(
                "A {} block on {} is only {} sector(s) of data plus parity and padding: use a larger volblocksize (64k or more) or mirrors.",
                format_bytes(pool.volblocksize as f64),
                pool.layout,
                pool.volblocksize / sector
            );
        }
    }
    if zil.bytes * 20 > logical.bytes && txg.bytes > 0 && has_commits {
        evidence.push("sync writes reach the disks twice: once in the ZIL, once at txg sync (a SLOG takes the first off the data disks)".into());
    }
    out.push(Finding {
        kind: "write_amplification".into(),
        pool: String::new(),
        title,
        // The disks' write time that the extra bytes account for, as far as the
        // workload waits for it: not while it waits on ZIL commits (finding 1).
        share: disk_busy.min(1.0) * (1.0 - 1.0 / factor.max(1.0)) * (1.0 - commit_share.min(1.0)),
        confidence: Confidence::Medium,
        evidence,
        missing: vec!["writes of txgs that sync after the recording ends are not counted".into()],
        action,
        figures: vec![("write_amplification".into(), factor)],
    });
}

/// What the leaf writes of sync priority were. ZFS gives that priority to
/// ZIL blocks, to data that zil_commit writes in place (dmu_sync: large
/// writes, logbias=throughput) and to vdev labels and uberblocks; without a
/// zil_commit in the recording they cannot be the ZIL's.
fn sync_priority_words(has_commits: bool) -> &'static str {
    if has_commits {
        "sync-priority writes (ZIL blocks and the data zil_commit wrote in place, labels)"
    } else {
        "sync-priority writes (no zil_commit was traced: labels, uberblocks, dmu_sync)"
    }
}

/// Finding 6: the write throttle and txg sync times.
fn throttle(rec: &Recording, workload_ns: f64, out: &mut Vec<Finding>) {
    let wait = stat(rec, Stage::TxWait, None);
    let synced = stat(rec, Stage::TxgWaitSynced, None);
    let sync = stat(rec, Stage::SpaSync, None);
    if sync.count == 0 && wait.count == 0 {
        return;
    }
    const TXG_TIMEOUT_NS: u64 = 5_000_000_000;
    let share = wait.total_ns as f64 / workload_ns;
    let mut evidence = vec![format!(
        "{} txgs synced, spa_sync p50 {}, max {} (zfs_txg_timeout is 5 s by default)",
        sync.count,
        format_ns(sync.p50_ns),
        format_ns(sync.max_ns)
    )];
    if wait.count > 0 {
        evidence.push(format!(
            "writers waited in dmu_tx_wait {} times, {} in all ({} of the workload's time)",
            format_count(wait.count as f64),
            format_ns(wait.total_ns),
            pct(share)
        ));
    }
    if synced.count > 0 {
        evidence.push(format!(
            "txg_wait_synced: {} calls, p50 {}",
            synced.count,
            format_ns(synced.p50_ns)
        ));
    }
    let slow = sync.max_ns > TXG_TIMEOUT_NS;
    let title = if wait.count > 0 {
        format!(
            "the write throttle delayed writers ({} of their time)",
            pct(share)
        )
    } else if slow {
        "txg syncs run longer than the txg timeout: the pool cannot write dirty data as fast as it arrives".to_owned()
    } else {
        "txg syncs keep up; writers were not throttled".to_owned()
    };
    out.push(Finding {
        kind: "throttle".into(),
        pool: String::new(),
        title,
        share,
        confidence: Confidence::High,
        evidence,
        missing: vec!["dirty data amounts are not traced".into()],
        action: if wait.count > 0 || slow {
            "The disks cannot absorb the write rate: faster vdevs or more of them; zfs_dirty_data_max only moves the point where throttling starts.".into()
        } else {
            "No action needed.".into()
        },
        figures: vec![("tx_wait_ns".into(), wait.total_ns as f64), ("spa_sync_max_ns".into(), sync.max_ns as f64)],
    });
}

/// Finding 7: where reads spend their time (see [`crate::read_path`]).
fn reads(
    rec: &Recording,
    path: &crate::read_path::ReadPath,
    workload_ns: f64,
    out: &mut Vec<Finding>,
) {
    let reads = &path.reads;
    let reach = path.blocks_per_read;
    let device_share = if path.timed {
        path.device_per_read_ns / reads.mean_ns.max(1.0)
    } else {
        0.0
    };
    let cpu_share = if path.timed {
        path.cpu_per_read_ns / reads.mean_ns.max(1.0)
    } else {
        0.0
    };
    let amplification = path.amplification();
    let (bound, action) = read_bound(path, device_share, cpu_share);
    let latency = if path.timed {
        format!(
            ", p50 {}, mean {}",
            format_ns(reads.p50_ns),
            format_ns(reads.mean_ns as u64)
        )
    } else {
        String::new()
    };
    let mut evidence = vec![format!(
        "{} reads of {} on average{latency}",
        format_count(reads.count as f64),
        format_bytes(path.read_bytes())
    )];
    evidence.push(read_reach_line(path));
    if let Some(arc) = &path.arc {
        evidence.push(arc_split_line(arc));
    }
    evidence.extend(l2arc_warmup_line(rec));
    evidence.push(format!(
        "per read: device {} ({:.2} blocks x (slowest of {} leaf reads {} + queue {})), decompression + checksum verification {}",
        format_ns(path.device_per_read_ns as u64),
        reach,
        path.fan_out,
        format_ns(path.block_disk_ns as u64),
        format_ns(path.leaf_queue.mean_ns as u64),
        format_ns(path.cpu_per_read_ns as u64)
    ));
    if path.timed {
        evidence.push(format!(
            "device time is {} of a read's mean, CPU {}",
            pct(device_share),
            pct(cpu_share)
        ));
    }
    if reads.bytes > 0 && path.leaf_disk.bytes > 0 {
        evidence.push(format!(
            "read amplification: leaf vdevs read {} (sync) for {} requested ({amplification:.1}x)",
            format_bytes(path.leaf_disk.bytes as f64),
            format_bytes(reads.bytes as f64)
        ));
    }
    if path.leaf_async_reads > 0 {
        evidence.push(format!(
            "prefetch and ZFS's own reads: {} leaf async reads",
            format_count(path.leaf_async_reads as f64)
        ));
    }
    // Untimed reads (counted at entry): their time is at least what they
    // waited for the devices.
    let read_ns = if path.timed {
        reads.total_ns as f64
    } else {
        reads.count as f64 * path.device_per_read_ns
    };
    let mut missing = match &path.arc {
        None => vec![
            "ARC hits are inferred (a read with no block read from disk); prefetch hits are not told apart \
             (on libzpool --full-timing counts where the ARC served each block)"
                .to_owned(),
        ],
        Some(_) => vec!["ARC reads count every block read, the workload's, prefetch and ZFS's metadata alike; on 2.1 a read \
             that finds its block being read without waiting counts as a hit (2.2 and later: an iohit)"
            .to_owned()],
    };
    if path.blocks.is_none() {
        missing.push("blocks read from disk (zio_read) were not probed: each leaf read is taken as its own block".into());
    }
    if !path.timed {
        missing.push("read latency: counted at entry only on uprobes (--full-timing times each read); the share is the device time".into());
    }
    out.push(Finding {
        kind: "reads".into(),
        pool: String::new(),
        title: format!("reads are {bound}"),
        share: (read_ns / workload_ns).min(1.0),
        confidence: if reads.count >= 100 && path.blocks.is_some() {
            Confidence::High
        } else {
            Confidence::Low
        },
        evidence,
        missing,
        action,
        figures: vec![
            ("read_p50_ns".into(), reads.p50_ns as f64),
            ("blocks_per_read".into(), reach),
            ("fan_out".into(), path.fan_out as f64),
            ("device_per_read_ns".into(), path.device_per_read_ns),
            ("cpu_per_read_ns".into(), path.cpu_per_read_ns),
            ("read_amplification".into(), amplification),
        ]
        .into_iter()
        .chain(path.arc.iter().flat_map(|arc| {
            let all = arc.all();
            [
                ("arc_hits".into(), all.hit as f64),
                ("arc_misses".into(), (all.l2 + all.disk) as f64),
                ("arc_l2_hits".into(), all.l2 as f64),
                ("arc_in_flight".into(), all.in_flight as f64),
            ]
        }))
        .collect(),
    });
}

/// Finding 7b: what a cache would have served of the reads from disk (see
/// [`crate::cache_what_if`]), for each `--what-if l2arc=`/`arc=+`, or by
/// default for an ssd cache device holding all the data read from disk.
fn cache_what_if(
    rec: &Recording,
    path: &crate::read_path::ReadPath,
    options: &ExplainOptions,
    workload_ns: f64,
    out: &mut Vec<Finding>,
) {
    use crate::cache_what_if::{CacheSpec, ReuseCurve, predict};
    let Some(curve) = ReuseCurve::measure(rec) else {
        return;
    };
    // Reads the ARC serves leave a cache nothing to do.
    if path.blocks_per_read < 0.05 || curve.all_reads == 0 {
        return;
    }
    // A cache that holds all the data this run read from disk, in whole GiB.
    let whole_data = curve.first_bytes.max(1).next_multiple_of(1 << 30);
    let mut specs = options.caches.clone();
    if specs.is_empty() {
        specs.push(CacheSpec::ssd(whole_data));
    }
    let disk_ns = path.device_per_read_ns * path.reads.count as f64;
    for spec in specs {
        let Some(p) = predict(rec, path, &curve, spec, options.cpus) else {
            continue;
        };
        let gain = if p.rate_before > 0.0 {
            p.rate_after / p.rate_before
        } else {
            0.0
        };
        let title = format!(
            "{} of {}: would serve {} of the reads from disk the workload waited for, {} reads/s instead of {} ({gain:.1}x)",
            spec.kind,
            format_bytes(spec.bytes as f64),
            pct(p.served_sync),
            format_count(p.rate_after),
            format_count(p.rate_before)
        );
        out.push(Finding {
            kind: "cache_what_if".into(),
            pool: String::new(),
            title,
            share: (disk_ns * p.served_sync / workload_ns).min(1.0),
            confidence: if curve.re_reads() >= 100 && path.timed { Confidence::High } else { Confidence::Low },
            evidence: cache_evidence(path, &curve, &p),
            missing: cache_what_if_limits(&curve, path),
            action: if curve.re_reads() == 0 {
                "No block was read from disk twice: a cache serves only data read again. Run longer, or warm the cache \
                 the way production does, and record again."
                    .into()
            } else {
                format!(
                    "A cache of {} holds all the data this run read from disk ({} distinct); smaller ones serve what the \
                     what-if says (pass --what-if l2arc=SIZE[,nvme] or arc=+SIZE).",
                    format_bytes(whole_data as f64),
                    format_bytes(curve.first_bytes as f64)
                )
            },
            figures: vec![
                ("cache_bytes".into(), spec.bytes as f64),
                ("served_sync".into(), p.served_sync),
                ("served_all".into(), p.served_all),
                ("read_rate_before".into(), p.rate_before),
                ("read_rate_after".into(), p.rate_after),
                ("read_after_ns".into(), p.read_after_ns),
            ],
        });
    }
}

fn cache_evidence(
    path: &crate::read_path::ReadPath,
    curve: &crate::cache_what_if::ReuseCurve,
    p: &crate::cache_what_if::CachePrediction,
) -> Vec<String> {
    let mut lines = vec![
        format!(
            "{} blocks read from disk: {} first reads ({} of distinct data), {} read again; {} of them sync reads (the workload waited for them)",
            format_count(curve.all_reads as f64),
            format_count(curve.first_reads as f64),
            format_bytes(curve.first_bytes as f64),
            format_count(curve.re_reads() as f64),
            format_count(curve.sync_reads as f64)
        ),
        format!(
            "the cache serves {} of all reads from disk and {} of the sync ones",
            pct(p.served_all),
            pct(p.served_sync)
        ),
        match p.split {
            Some((hit, miss, share)) => format!(
                "per read: {} in the workload's steady seconds ({} served from memory in {}, {} waited for a disk: {}); with the cache {} (a {} block read from it in {})",
                format_ns(p.read_before_ns as u64),
                pct(1.0 - share),
                format_ns(hit as u64),
                pct(share),
                format_ns(miss as u64),
                format_ns(p.read_after_ns as u64),
                format_bytes(path.block_bytes),
                format_ns(p.cache_read_ns as u64)
            ),
            None => format!(
                "per read: {} in the run, of which device {}; with the cache {} (a {} block read from it in {})",
                format_ns(p.read_before_ns as u64),
                format_ns(path.device_per_read_ns as u64),
                format_ns(p.read_after_ns as u64),
                format_bytes(path.block_bytes),
                format_ns(p.cache_read_ns as u64)
            ),
        },
    ];
    if p.cpu_bound {
        lines.push(format!(
            "CPU-bound: {} CPUs, each read at least the {} a read served from memory took, cap the rate (with as many reads in flight as in the run it would be higher)",
            p.cpus,
            format_ns(p.split.map_or(0.0, |s| s.0) as u64)
        ));
    }
    if p.spec.bytes_per_s > 0.0 {
        let default_feed = 8.0 * 1048576.0;
        lines.push(format!(
            "at the predicted rate the feed must write {}/s of blocks still read from disk{}",
            format_bytes(p.feed_bytes_per_s),
            if p.feed_bytes_per_s > default_feed {
                ": more than ZFS's default l2arc_write_max (8 MiB/s), so the cache would fill slower than that"
            } else {
                " (ZFS's default l2arc_write_max: 8 MiB/s)"
            }
        ));
    }
    lines
}

fn cache_what_if_limits(
    curve: &crate::cache_what_if::ReuseCurve,
    path: &crate::read_path::ReadPath,
) -> Vec<String> {
    let mut limits = vec![
        "model: the cache keeps what the ARC evicts, oldest out first (the L2ARC's ring), and is warm; a block's \
         distance counts every byte read from disk since its previous read (its time in the ARC included: conservative); \
         readers keep as many reads in flight as in the workload's steady seconds, up to the CPUs' bound; the CPU time \
         a cache read costs other threads (its I/O) is not counted, so a CPU-bound rate comes out high"
            .to_owned(),
        format!(
            "a block read again after {} other blocks counts as a first read (the blocks zprof remembers)",
            format_count(zprof_common::MISS_BLOCKS_TRACKED as f64)
        ),
    ];
    if !curve.priority_known {
        limits.push("sync reads are not told from prefetch on the kernel yet: the served share is of all reads from disk".into());
    }
    if !path.timed {
        limits.push("read latency: counted at entry only (--full-timing times each read): the time per read is the device time plus decompression and checksums".into());
    }
    limits
}

/// Finding 8: what dedup costs. Every block written to a dataset with dedup
/// is looked up in the dedup table by the write pipeline's threads (the
/// table's blocks read from disk when the ARC does not hold them), and the
/// table's changes are written at each txg sync. The share is the lookups'
/// and the table syncs' time over the machine's CPU time, as compression's.
fn dedup(rec: &Recording, wall_ns: f64, cpu_ns: f64, out: &mut Vec<Finding>) {
    let lookup = stat(rec, Stage::DdtLookup, None);
    if lookup.count == 0 {
        return;
    }
    let table_sync = stat(rec, Stage::DdtSync, None);
    let spa_sync = stat(rec, Stage::SpaSync, None);
    let share = ((lookup.total_ns + table_sync.total_ns) as f64 / cpu_ns).min(1.0);
    let sync_share = if spa_sync.total_ns > 0 {
        table_sync.total_ns as f64 / spa_sync.total_ns as f64
    } else {
        0.0
    };
    let per_second = lookup.count as f64 / (wall_ns / 1e9);
    let evidence = vec![
        format!(
            "{} dedup table lookups ({}/s: one per block written with dedup, and per block freed), p50 {}, p99 {}, max {}, {} in all",
            format_count(lookup.count as f64),
            format_count(per_second),
            format_ns(lookup.p50_ns),
            format_ns(lookup.p99_ns),
            format_ns(lookup.max_ns),
            format_ns(lookup.total_ns)
        ),
        format!(
            "dedup table sync: {} in {} txgs, {} of txg sync time (p99 {} a txg)",
            format_ns(table_sync.total_ns),
            table_sync.count,
            pct(sync_share),
            format_ns(table_sync.p99_ns)
        ),
    ];
    let slow_lookups = lookup.p99_ns > 20 * lookup.p50_ns.max(1);
    out.push(Finding {
        kind: "dedup".into(),
        pool: String::new(),
        title: format!("dedup costs {} of the machine's time ({} of txg sync)", pct(share), pct(sync_share)),
        share,
        confidence: if lookup.count >= 100 { Confidence::High } else { Confidence::Low },
        evidence,
        missing: vec![
            "the dedup ratio achieved is the pool's (zpool list's DEDUP column, zpool status -D): zprof does not read the table".into(),
            "lookups are not attributed to a pool (the table's spa_t is behind a struct)".into(),
        ],
        action: if slow_lookups {
            "Lookups vary widely: the dedup table does not fit in the ARC and its blocks are read from disk; \
             a larger ARC, a dedup or special vdev on flash, or dedup off where the ratio does not pay for it."
                .into()
        } else {
            "Check the pool's dedup ratio (zpool list): below about 2x, the table's memory and sync time cost more than the space saved.".into()
        },
        figures: vec![
            ("ddt_lookups".into(), lookup.count as f64),
            ("ddt_lookup_ns".into(), lookup.total_ns as f64),
            ("ddt_sync_ns".into(), table_sync.total_ns as f64),
            ("ddt_sync_share".into(), sync_share),
        ],
    });
}

/// What bounds the reads, and what to do: served by the ARC, CPU-bound,
/// disk-bound (amplified when each read fetches a much larger block), or
/// partly from disk.
fn read_bound(
    path: &crate::read_path::ReadPath,
    device_share: f64,
    cpu_share: f64,
) -> (String, String) {
    let reach = path.blocks_per_read;
    let amplification = path.amplification();
    if reach < 0.1 && (!path.timed || device_share < 0.5) {
        (
            format!(
                "served from the ARC ({:.2} blocks read from disk per read)",
                reach
            ),
            "Reads hit the ARC: nothing to tune on the disk side.".to_owned(),
        )
    } else if path.timed && device_share < 0.5 && cpu_share >= 0.5 {
        ("CPU-bound".to_owned(), "Decompression and checksum verification dominate: a cheaper compression algorithm speeds reads up.".to_owned())
    } else if reach >= 0.5 || device_share >= 0.5 {
        let what = if amplification >= 4.0 {
            format!(
                "disk-bound and amplified {amplification:.0}x: each {} read fetches a {} block from {} leaves",
                format_bytes(path.read_bytes()),
                format_bytes(path.block_bytes),
                path.fan_out
            )
        } else {
            "disk-bound".to_owned()
        };
        let action = if amplification >= 4.0 {
            "Each read moves a whole block from the disks: a recordsize/volblocksize closer to the read size, primarycache=all (or a larger ARC, an L2ARC) so blocks are read once; on RAID-Z a narrow block spans fewer leaves."
        } else {
            "Reads wait for the disks: more ARC (or an L2ARC), faster vdevs, or more of them."
        };
        (what, action.to_owned())
    } else {
        let l2 = path.arc.as_ref().map(|a| a.all()).filter(|a| a.l2 > 0);
        let action = match l2 {
            Some(a) => format!(
                "Most reads hit the ARC; cache devices served {} of the misses, the rest wait for the disks: a larger ARC, \
                 or cache devices that hold more of the working set (see how their share grew over the run).",
                pct(a.l2 as f64 / (a.l2 + a.disk).max(1) as f64)
            ),
            None => "Most reads hit the ARC; the rest wait for the disks: a larger ARC or an L2ARC moves them to memory.".to_owned(),
        };
        (
            format!(
                "partly served from disk ({:.0}% of reads reach the leaves)",
                reach * 100.0
            ),
            action,
        )
    }
}

/// How many reads reached the disks, and how wide a block read was.
fn read_reach_line(path: &crate::read_path::ReadPath) -> String {
    let blocks = match &path.blocks {
        Some(b) => format!(
            "{} blocks read from disk (zio_read, {} physical, byte-weighted block {})",
            format_count(b.count as f64),
            format_bytes(b.bytes_out as f64),
            format_bytes(path.block_bytes)
        ),
        None => "blocks read from disk not probed".to_owned(),
    };
    format!(
        "{blocks}; {} leaf sync reads of {} on average over {} leaves: {} per block, so {:.2} blocks reached the leaves per read",
        format_count(path.leaf_disk.count as f64),
        format_bytes(path.leaf_disk.bytes as f64 / path.leaf_disk.count.max(1) as f64),
        path.leaves,
        path.fan_out,
        path.blocks_per_read
    )
}

/// How the cache devices' share of the ARC's misses changed over the run
/// (a cache device warms as the feed writes to it), from the timeline:
/// the first third of the seconds with misses against the last third.
fn l2arc_warmup_line(rec: &Recording) -> Option<String> {
    let seconds: Vec<_> = rec
        .timeline
        .iter()
        .filter(|p| p.arc_l2_hits + p.arc_disk_reads > 0)
        .collect();
    if seconds.len() < 3 || seconds.iter().all(|p| p.arc_l2_hits == 0) {
        return None;
    }
    let third = seconds.len() / 3;
    let share = |points: &[&crate::recording::TimelinePoint]| {
        let l2: u64 = points.iter().map(|p| p.arc_l2_hits).sum();
        let disk: u64 = points.iter().map(|p| p.arc_disk_reads).sum();
        l2 as f64 / (l2 + disk).max(1) as f64
    };
    Some(format!(
        "cache devices served {} of the ARC's misses in the first {third} s with misses, {} in the last {third} s (the feed warms them)",
        pct(share(&seconds[..third])),
        pct(share(&seconds[seconds.len() - third..]))
    ))
}

/// Where the ARC served block reads from, demand and prefetch apart.
fn arc_split_line(arc: &crate::read_path::ArcSplit) -> String {
    let share = |part: u64, all: u64| {
        if all == 0 {
            "0%".to_owned()
        } else {
            pct(part as f64 / all as f64)
        }
    };
    let paths = |p: &crate::read_path::ArcPaths| {
        let all = p.total();
        format!(
            "{}: {} hit ({} on held buffers), {} iohit, {} L2ARC, {} disk",
            format_count(all as f64),
            share(p.hit, all),
            share(p.held, all),
            share(p.in_flight, all),
            share(p.l2, all),
            share(p.disk, all)
        )
    };
    let mut line = format!(
        "ARC reads (arc_read), demand {}; prefetch {}",
        paths(&arc.demand),
        paths(&arc.prefetch)
    );
    let cache = &arc.cache_device_reads;
    if cache.count > 0 {
        line.push_str(&format!(
            "; cache devices read {} times, p50 {}, p99 {}",
            format_count(cache.count as f64),
            format_ns(cache.p50_ns),
            format_ns(cache.p99_ns)
        ));
    }
    line
}

/// Renders findings as text.
pub fn render(findings: &[Finding], bench: Option<&bench::Benchmark>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if let Some(bench) = bench {
        for line in bench::describe(bench) {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
    }
    if findings.is_empty() {
        let _ = writeln!(out, "findings: none (no ZFS activity in the recording)");
        return out;
    }
    let _ = writeln!(
        out,
        "findings, by share of the workload's time (CPU share for compression and checksums):"
    );
    // Findings that explain almost nothing are named on one line, not listed
    // as if they mattered (`--format json` keeps them whole). The sync-write
    // finding is kept whole: it is there only with ten commits or more, and
    // from older recordings its share is unknown (0).
    let (shown, minor): (Vec<&Finding>, Vec<&Finding>) = findings
        .iter()
        .partition(|f| f.share >= MINOR_SHARE || f.kind == "sync_write_bound");
    for (i, f) in shown.iter().enumerate() {
        let pool = if f.pool.is_empty() {
            String::new()
        } else {
            format!(" [{}]", f.pool)
        };
        let _ = writeln!(
            out,
            "{}. {}{} ({}, {} confidence)",
            i + 1,
            f.title,
            pool,
            pct(f.share),
            match f.confidence {
                Confidence::High => "high",
                Confidence::Medium => "medium",
                Confidence::Low => "low",
            }
        );
        for e in &f.evidence {
            let _ = writeln!(out, "   - {e}");
        }
        for m in &f.missing {
            let _ = writeln!(out, "   - not measured: {m}");
        }
        let _ = writeln!(out, "   => {}", f.action);
    }
    if !minor.is_empty() {
        let names: Vec<String> = minor
            .iter()
            .map(|f| format!("{} ({})", f.title, pct(f.share)))
            .collect();
        let _ = writeln!(
            out,
            "below {} of the workload's time: {}",
            pct(MINOR_SHARE),
            names.join("; ")
        );
    }
    out
}

/// Findings explaining less than this share are named on one line.
pub const MINOR_SHARE: f64 = 0.01;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_if_specs() {
        assert_eq!(
            parse_what_if("slog=ssd").unwrap(),
            WhatIf::Slog(SlogDevice::SSD)
        );
        assert_eq!(
            parse_slog("slog=0.1ms").unwrap(),
            SlogDevice {
                write_ns: 100_000.0,
                flush_ns: 100_000.0
            }
        );
        assert_eq!(
            parse_slog("slog=80us,flush=50us").unwrap(),
            SlogDevice {
                write_ns: 80_000.0,
                flush_ns: 50_000.0
            }
        );
        assert!(matches!(
            parse_what_if("l2arc=1g").unwrap(),
            WhatIf::Cache(_)
        ));
        assert!(
            parse_what_if("slog=fast")
                .unwrap_err()
                .contains("invalid --what-if 'slog=fast'")
        );
        assert!(parse_what_if("l2arc=1ms").is_err());
        assert!(parse_what_if("slog=0ms").is_err());
    }
}
