//! Findings 1 and 2: sync writes bound by ZIL commits, and what a log device
//! (SLOG) would do for them, from the pool's sync-write path
//! ([`crate::analyze::sync_path`]). Also the log devices `--what-if slog=`
//! names, since only this what-if uses them.

use zprof_common::Stage;

use super::{Confidence, ExplainOptions, Finding, pct, stat};
use crate::{
    analyze::sync_path::{self, LogDeviceTimes, LogPlace, Prediction, SyncPath},
    recording::benchmark,
    recording::{Recording, Summary, pick, summarize},
    units::{format_count, format_ns},
    zfs::{
        releases::{self, CommitTimeout, Interpretation},
        target::TargetKind,
    },
};

/// A log device to predict with (`--what-if slog=...`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SlogDevice {
    /// Access latency of one log block write (ns).
    pub write_ns: f64,
    /// Its sequential write rate, bytes/s (0: the write's latency does not
    /// depend on its size, as `slog=LATENCY` says).
    pub rate_bytes_per_s: f64,
    /// Latency of one cache flush (ns).
    pub flush_ns: f64,
}

/// The devices `slog=ssd` and `slog=nvme` stand for, from vendors' published
/// figures, not from the lab's models (which the tests compare against):
/// - ssd: a SATA SSD with power-loss protection, the kind sold as a SLOG.
///   Intel's DC S3700 datasheet gives 65 us for a write (its "latency,
///   sequential write") and 460 MB/s sequential writes (800 GB). Datasheets
///   give no flush latency: on a drive with power-loss protection a flush
///   writes nothing to flash, but ATA's FLUSH CACHE is not a queued command,
///   so it waits for the queue to drain and costs a command round trip of
///   its own; 100 us is this project's assumption for it, shown in the
///   finding.
/// - nvme: the DC P3700 (NVMe, power-loss protection) datasheet gives 20 us
///   for a write and 1,900 MB/s sequential writes (1.6 TB); an NVMe flush on
///   such a device is a round trip, 20 us.
impl SlogDevice {
    /// A SATA/SAS SSD with power-loss protection (see above).
    pub const SSD: SlogDevice = SlogDevice {
        write_ns: 65_000.0,
        rate_bytes_per_s: 460e6,
        flush_ns: 100_000.0,
    };
    /// An NVMe device with power-loss protection (see above).
    pub const NVME: SlogDevice = SlogDevice {
        write_ns: 20_000.0,
        rate_bytes_per_s: 1_900e6,
        flush_ns: 20_000.0,
    };

    /// A log block write of `bytes` on the device: its access latency plus
    /// the transfer (a 36 KiB block of 32 KiB sync writes takes an ssd
    /// 80 us beyond its 65 us access).
    pub fn block_write_ns(&self, bytes: f64) -> f64 {
        if self.rate_bytes_per_s > 0.0 {
            self.write_ns + bytes / self.rate_bytes_per_s * 1e9
        } else {
            self.write_ns
        }
    }
}

/// Parses `slog=ssd`, `slog=nvme`, `slog=0.1ms` or
/// `slog=80us[,rate=500MB/s][,flush=50us]`.
pub fn parse_slog(s: &str) -> Result<SlogDevice, String> {
    let bad = || {
        format!(
            "invalid --what-if '{s}': use slog=ssd, slog=nvme, slog=LATENCY or slog=LATENCY[,rate=RATE][,flush=LATENCY] \
             (e.g. slog=0.1ms, slog=60us,rate=500MB/s,flush=100us), l2arc=SIZE[,ssd|nvme] or arc=+SIZE"
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
    let mut device = SlogDevice {
        write_ns: write,
        rate_bytes_per_s: 0.0,
        flush_ns: write,
    };
    for part in parts {
        if let Some(rate) = part.strip_prefix("rate=") {
            device.rate_bytes_per_s = parse_rate(rate).ok_or_else(bad)?;
        } else {
            device.flush_ns = part
                .strip_prefix("flush=")
                .and_then(parse_latency)
                .ok_or_else(bad)?;
        }
    }
    Ok(device)
}

/// `500MB/s`, `500MiB/s`, `2GB/s`, `2GiB/s` in bytes per second.
fn parse_rate(s: &str) -> Option<f64> {
    let s = s.strip_suffix("/s")?;
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1048576.0,
        "GiB" => 1073741824.0,
        _ => return None,
    };
    (value > 0.0).then_some(value * scale)
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

/// What both findings are computed from: one pool's commits, its measured
/// sync-write path, and the writers.
struct SyncWriters {
    commit: Summary,
    path: SyncPath,
    /// The benchmark's own figures, when it ran sync-writing jobs on the pool.
    bench: Option<BenchSync>,
    /// Concurrent sync writers: the benchmark's count, else zprof's.
    writers: f64,
    /// The commits' share of the sync writers' time.
    share: f64,
}

/// Findings 1 and 2: sync writes bound by ZIL commits, and what a SLOG would do.
pub(super) fn sync_write(
    rec: &Recording,
    pool: &str,
    options: &ExplainOptions,
    out: &mut Vec<Finding>,
) {
    let commit = stat(rec, Stage::ZilCommit, Some(pool));
    if !commits_can_bind(rec, pool, &commit) {
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
    // Writers that wait for each other's commits are bound by the pool's
    // commits, whatever share of each writer's own time they are.
    let share = path
        .serial_commit_share()
        .unwrap_or((commit.total_ns as f64 / writer_ns.max(1.0)).min(1.0));
    let w = SyncWriters {
        commit,
        path,
        bench,
        writers,
        share,
    };
    out.push(sync_write_bound(rec, pool, &w));
    out.push(slog_what_if(rec, pool, &w, options));
}

/// Whether a pool's commits can have bound its writers at all.
fn commits_can_bind(rec: &Recording, pool: &str, commit: &Summary) -> bool {
    // A handful of commits (zil_close makes one per pool) bound nothing.
    if commit.count < 10 {
        return false;
    }
    // Commits that wrote no log block (sync=disabled, or nothing to log) cost
    // no I/O: they bound nothing, whatever their count.
    let offsets_known = !rec
        .warnings
        .iter()
        .any(|w| w.starts_with("no struct offsets"));
    !(stat(rec, Stage::ZilLogWrite, Some(pool)).count == 0 && offsets_known)
}

/// Finding 1: how much of the sync writers' time the commits take, and
/// what a commit is made of.
fn sync_write_bound(rec: &Recording, pool: &str, w: &SyncWriters) -> Finding {
    let (path, commit) = (&w.path, &w.commit);
    let mut missing = Vec::new();
    if rec.target.kind == TargetKind::Kernel {
        missing.push("on the kernel target zio_flush only issues the flushes: their time is inside the log write".into());
    }
    let whose = whose_time(path);
    let (title, action) = match path.log_place {
        LogPlace::LogDevice => (
            format!("sync writes are bound by ZIL commits on the log device ({} each)", format_ns(commit.p50_ns)),
            "The log device is on the critical path: a lower-latency SLOG (NVMe with power-loss protection) shortens every commit; more concurrent writers share commits.".to_owned(),
        ),
        LogPlace::Special => (
            format!(
                "sync writes are bound by ZIL commits on the special vdev ({} each, {} of {whose})",
                format_ns(commit.p50_ns),
                pct(w.share)
            ),
            "Without a log vdev, OpenZFS 2.4 writes the log blocks to the special vdev, whose latency every fsync now waits for: a log vdev (SLOG) on lower-latency flash with power-loss protection takes them instead (see the what-if); the special vdev keeps its metadata work.".to_owned(),
        ),
        LogPlace::MainPool => (
            format!(
                "sync writes are bound by ZIL commits to the main pool ({} each, {} of {whose})",
                format_ns(commit.p50_ns),
                pct(w.share)
            ),
            "Every fsync waits for a log block write and flushes on the pool's own disks: add a log vdev (SLOG) on low-latency flash (see the what-if), or, only where losing the last seconds of acknowledged writes is acceptable, sync=disabled.".to_owned(),
        ),
    };
    Finding {
        kind: "sync_write_bound".into(),
        pool: pool.to_owned(),
        pools: vec![pool.to_owned()],
        title,
        share: w.share,
        confidence: if commit.count >= 100 {
            Confidence::High
        } else {
            Confidence::Medium
        },
        evidence: sync_write_evidence(rec, pool, w),
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
            ("writers".into(), w.writers),
            ("measured_per_writer_ops".into(), path.measured_per_writer()),
        ]
        .into_iter()
        .chain(
            path.commit_overlap
                .map(|share| ("commits_overlapped_share".into(), share)),
        )
        .chain(
            path.serial
                .as_ref()
                .map(|s| ("commit_gap_ns".into(), s.gap.typical_mean_ns)),
        )
        .collect(),
    }
}

/// What the finding's share is of: the sync writers' time, or, where they
/// waited for each other's commits, the pool's.
fn whose_time(path: &SyncPath) -> &'static str {
    if path.serial.is_some() {
        "the pool's time, its writers waiting for each other's commits"
    } else {
        "the sync writers' time"
    }
}

/// The sync-write finding's evidence: the application's view (when the
/// request layer saw it), the writes and commits, a commit's parts, a
/// writer's cycle, and the stalls.
fn sync_write_evidence(rec: &Recording, pool: &str, w: &SyncWriters) -> Vec<String> {
    let (path, commit) = (&w.path, &w.commit);
    let mut evidence = vec![
        format!(
            "{} sync writes (writes a thread made before its own zil_commit; {:.1} per commit) in {} commits, p50 {}, p99 {}: {} of {}",
            format_count(path.sync_writes as f64),
            path.writes_per_commit(),
            format_count(commit.count as f64),
            format_ns(commit.p50_ns),
            format_ns(commit.p99_ns),
            pct(w.share),
            whose_time(path)
        ),
        format!(
            "a commit, typical mean {}: log block write {} on {} + flushes {} + commit timeout {} + other (CPU, wake-ups) {}; {:.1} leaf I/Os per commit",
            format_ns(path.commit.typical_mean_ns as u64),
            format_ns(path.log_write_ns as u64),
            path.log_place.words(),
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
            w.writers,
            w.bench.as_ref().map_or(String::new(), |b| format!(
                " ({} measured {}/s)",
                b.tool,
                format_count(b.iops)
            ))
        ),
    ];
    if let Some(line) =
        crate::recording::requests::sync_requests_line(&rec.requests, pool, commit.total_ns)
    {
        evidence.insert(0, line);
    }
    if let Some(serial) = &path.serial {
        evidence.push(format!(
            "the pool's commits ran one at a time ({} of {} started while another was in progress) though {:.1} writers made them: a commit and the gap after it, {} + {} (typical means), so each writer's own time is mostly the others' commits",
            format_count(serial.overlapped as f64),
            format_count(serial.gaps.saturating_add(serial.overlapped) as f64),
            path.writers,
            format_ns(path.commit.typical_mean_ns as u64),
            format_ns(serial.gap.typical_mean_ns as u64),
        ));
    }
    // Beside the commits, the time the rate carries: the gaps between serial
    // commits, or each writer's own cycles.
    let (other, other_stalls, why, whose) = match &path.serial {
        Some(serial) => (
            "gaps between them",
            &serial.gap,
            "a txg-sync wait, the workload's start and end",
            "the pool's time",
        ),
        None => (
            "cycles",
            &path.cycle,
            "a txg-sync wait, such as the first commit creating the log",
            "the writers' time",
        ),
    };
    if path.commit.stalled + other_stalls.stalled > 0 {
        evidence.push(format!(
            "{} commits and {} {other} stalled (over {:.0}x their median, or over {:.0}x the longest of the rest: {why}): {} lost, {} of {whose}",
            path.commit.stalled,
            other_stalls.stalled,
            sync_path::STALL_FACTOR,
            crate::recording::STALL_GAP,
            format_ns((path.commit.stalled_ns + other_stalls.stalled_ns) as u64),
            pct(path.stall_fraction())
        ));
    }
    if let Some(line) = fell_back_line(rec, pool, commit) {
        evidence.push(line);
    }
    evidence
}

/// Commits that waited for a txg sync (their txg_wait_synced inside
/// zil_commit): the log could not take them, or they created its chain;
/// measured rather than inferred.
fn fell_back_line(rec: &Recording, pool: &str, commit: &Summary) -> Option<String> {
    let fell_back = summarize(
        pick(rec, Stage::TxgWaitSynced, Some(pool), None)
            .into_iter()
            .filter(|h| h.class == zprof_common::TXG_WAIT_IN_ZIL_COMMIT),
    );
    (fell_back.count > 0).then(|| {
        format!(
            "{} txg-sync waits inside commits (the log could not take them: suspended, a block not allocated, a failed write; or they created the log chain anew): {} in all, max {}, {} of commit time",
            format_count(fell_back.count as f64),
            format_ns(fell_back.total_ns),
            format_ns(fell_back.max_ns),
            pct(fell_back.total_ns as f64 / commit.total_ns.max(1) as f64)
        )
    })
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
        let jobs: Vec<&benchmark::BenchJob> = bench
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
        pools: vec![pool.to_owned()],
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

/// The machine's busy CPU share from which a SLOG prediction is an upper
/// bound: with no CPU to spare, ten times the commit rate means ZFS's threads
/// wait for CPUs more often (measured on 2.3.2 with both cores loaded: the
/// non-device time of a commit grew from 340 us on raidz3 to 426 us on a log
/// device, where it shrank from 487 to about 117 us on 2.1.11).
const CPU_SATURATED: f64 = 0.9;

/// The predictions for every log device asked for, as the finding states them.
struct DevicePredictions {
    /// One line per device.
    lines: Vec<String>,
    /// Four figures per device.
    figures: Vec<(String, f64)>,
    /// The largest gain over the measured rate.
    best_gain: f64,
    /// The first device's prediction: the one the share and confidence follow.
    first: Option<Prediction>,
}

/// Finding 2: what each log device would make of the sync writes, by the
/// model of [`crate::analyze::sync_path`].
fn slog_what_if(rec: &Recording, pool: &str, w: &SyncWriters, options: &ExplainOptions) -> Finding {
    let path = &w.path;
    let release = releases::interpret(
        rec.target.zfs_version.as_deref(),
        rec.target.kind == TargetKind::Kernel,
    );
    let (rule, weight) = sync_path::model_parameters(rec);
    let mut evidence = vec![slog_model_line(path, rule)];
    let predicted = predict_devices(w, rule, weight, options);
    evidence.extend(predicted.lines);
    let saturated = rec.machine_cpu_busy.filter(|busy| *busy >= CPU_SATURATED);
    let first = predicted.first;
    let predicted_time = first.map_or(0.0, |p| p.commit_ns + p.cycle_ns);
    let measured_time = path.commit_mean_ns + path.cycle_mean_ns;
    // The share of the writers' time the change would remove.
    let removed = w.share * (1.0 - predicted_time / measured_time.max(1.0)).max(0.0);
    // Inputs measured over many commits, and a narrow gap between the two
    // ends of the prediction, make it firmer.
    let spread = first.map_or(f64::INFINITY, |p| p.range.1 / p.range.0.max(1e-9));
    let confidence = if path.commits >= 100
        && spread < 1.5
        && saturated.is_none()
        && !path.log_device_would_copy_anew()
    {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    let best_gain = predicted.best_gain;
    Finding {
        kind: "slog_what_if".into(),
        pool: pool.to_owned(),
        pools: vec![pool.to_owned()],
        title: match path.log_place {
            LogPlace::LogDevice => {
                format!("a faster log device would raise sync writes up to {best_gain:.1}x")
            }
            LogPlace::Special => format!(
                "a log device (SLOG) instead of the special vdev would raise sync writes up to {best_gain:.1}x"
            ),
            LogPlace::MainPool if path.serial.is_some() => {
                format!("a log device (SLOG) would raise the pool's commits about {best_gain:.0}x")
            }
            LogPlace::MainPool => {
                format!("a log device (SLOG) would raise sync writes about {best_gain:.0}x")
            }
        },
        share: removed,
        confidence,
        evidence,
        missing: slog_limits(rec, path, first, &release, rule, saturated),
        action: "Add a mirrored log vdev (zpool add POOL log mirror DEV1 DEV2) on devices with power-loss protection; check the gain with zprof compare on the same workload.".into(),
        figures: predicted.figures,
    }
}

/// The model's first line: a commit's parts as measured, and how the rate
/// follows from them (per writer, or per pool where its commits ran one at
/// a time).
fn slog_model_line(path: &SyncPath, rule: CommitTimeout) -> String {
    let (timeout_fraction, timeout_wake) = path.timeout_parts(rule);
    let rate = match &path.serial {
        Some(serial) => format!(
            "the pool's commits ran one at a time ({} of {} started while another was in progress) though {:.1} writers made them: they waited for each other's commits (a database's log flush under its lock), so a writer's own time {} is mostly the others' commits; for the pool, writes/s = {:.1} writes per commit / (commit + the gap between commits {})",
            format_count(serial.overlapped as f64),
            format_count(serial.gaps.saturating_add(serial.overlapped) as f64),
            path.writers,
            format_ns(path.cycle.typical_mean_ns as u64),
            path.writes_per_commit(),
            format_ns(serial.gap.typical_mean_ns as u64),
        ),
        None => format!(
            "per writer, writes/s = {:.1} writes per commit / (commit + the writer's own time {})",
            path.writes_per_commit(),
            format_ns(path.cycle.typical_mean_ns as u64),
        ),
    };
    format!(
        "model, from this recording: commit = log write + flush on the device + commit timeout (measured {} here: {:.0}% of the log block's latency + {} of wake-up) + other {}; {rate}, less the {} stalled",
        format_ns(path.timeout_ns as u64),
        timeout_fraction * 100.0,
        format_ns(timeout_wake as u64),
        format_ns(path.other_ns as u64),
        pct(path.stall_fraction())
    )
}

/// The log devices of `--what-if slog=`, or by default an ssd and an nvme.
fn slog_devices(options: &ExplainOptions) -> Vec<(String, SlogDevice)> {
    if options.slogs.is_empty() {
        vec![
            ("ssd".to_owned(), SlogDevice::SSD),
            ("nvme".to_owned(), SlogDevice::NVME),
        ]
    } else {
        options.slogs.clone()
    }
}

/// The log block size a write figure assumed: " of an 8.0 KiB log block"
/// where the device has a rate (its latency depends on the size).
fn block_size_words(device: &SlogDevice, bytes: f64) -> String {
    if device.rate_bytes_per_s > 0.0 {
        format!(" of a {} log block", crate::units::format_bytes(bytes))
    } else {
        String::new()
    }
}

/// Each device's prediction against the rate measured (by the benchmark
/// when it reported one, else by zprof).
fn predict_devices(
    w: &SyncWriters,
    rule: CommitTimeout,
    weight: f64,
    options: &ExplainOptions,
) -> DevicePredictions {
    let (path, writers) = (&w.path, w.writers);
    let measured = w
        .bench
        .as_ref()
        .map_or(path.measured_per_writer() * writers, |b| b.iops);
    let measured_by = w.bench.as_ref().map_or("zprof", |b| b.tool.as_str());
    let mut out = DevicePredictions {
        lines: Vec::new(),
        figures: Vec::new(),
        best_gain: 0.0,
        first: None,
    };
    out.figures
        .push(("log_block_bytes".into(), path.log_block_bytes));
    for (name, device) in &slog_devices(options) {
        let write_ns = device.block_write_ns(path.log_block_bytes);
        let times = LogDeviceTimes {
            write_ns,
            flush_ns: device.flush_ns,
        };
        let p = path.predict(times, rule, weight, writers);
        let total = p.total;
        let gain = if measured > 0.0 {
            total / measured
        } else {
            f64::NAN
        };
        if gain.is_finite() {
            out.best_gain = out.best_gain.max(gain);
        }
        let high_end = if path.serial.is_some() {
            format!(
                "the other per leaf I/O, the gap at {:.0}%",
                sync_path::SERIAL_GAP_LEAST * 100.0
            )
        } else {
            "all per leaf I/O".to_owned()
        };
        out.lines.push(format!(
            "with a {name} log device (write {}{}, flush {}): commit about {}, about {} sync writes/s ({}x the {}/s measured by {measured_by}); between {} (the non-device time all per commit) and {} ({high_end})",
            format_ns(write_ns as u64),
            block_size_words(device, path.log_block_bytes),
            format_ns(device.flush_ns as u64),
            format_ns(p.commit_ns as u64),
            format_count(total),
            if gain.is_finite() { format!("{gain:.1}") } else { "-".into() },
            format_count(measured),
            format_count(p.range.0),
            format_count(p.range.1)
        ));
        out.figures.push((format!("predicted_ops_{name}"), total));
        out.figures
            .push((format!("predicted_ops_low_{name}"), p.range.0));
        out.figures
            .push((format!("predicted_ops_high_{name}"), p.range.1));
        out.figures
            .push((format!("predicted_commit_ns_{name}"), p.commit_ns));
        out.first.get_or_insert(p);
    }
    out
}

/// What the SLOG prediction rests on and cannot see: the non-device time,
/// the device's latencies, a saturated machine, an unknown release.
fn slog_limits(
    rec: &Recording,
    path: &SyncPath,
    first: Option<Prediction>,
    release: &Interpretation,
    rule: CommitTimeout,
    saturated: Option<f64>,
) -> Vec<String> {
    let kept = |share: f64| format!("{:.0}%", share * 100.0);
    let (own, scaled) = match first.and_then(|p| p.gap_scale) {
        Some((gap, _)) => (
            "the gap between commits",
            format!(
                "{} of the other and {} of the gap (the next writer wakes from a shorter sleep)",
                kept(first.map_or(1.0, |p| p.non_device_scale)),
                kept(gap)
            ),
        ),
        None => (
            "the writer's own",
            format!("{} of it", kept(first.map_or(1.0, |p| p.non_device_scale))),
        ),
    };
    let uncertainty = format!(
        "the largest uncertainty is the non-device time, {} per commit (other {} + {own} {}): it was measured with {:.1} leaf I/Os per commit and a log device has {:.0}; the prediction keeps {scaled} ({})",
        format_ns(path.non_device_ns() as u64),
        format_ns(path.other_ns as u64),
        format_ns(path.own_time_ns() as u64),
        path.leaf_ios_per_commit,
        sync_path::LOG_DEVICE_LEAF_IOS,
        match rec.machine_cpu_busy {
            Some(busy) => format!("between per leaf I/O and per commit: the machine's CPUs were {} busy", pct(busy)),
            None => "between per leaf I/O and per commit: the recording does not say how busy the machine was".into(),
        }
    );
    let uncertainty = if rec.target.kind == TargetKind::Kernel {
        format!(
            "{uncertainty}; on the kernel the other is a commit's CPU work (its itxs, the log block's allocation and checksum), which stayed with a log vdev in zprof's guest"
        )
    } else {
        uncertainty
    };
    let mut missing = vec![
        uncertainty,
        "assumes the log device's latencies above as ZFS sees them (pass --what-if slog=WRITE,rate=RATE,flush=FLUSH for yours); the data still reaches the main pool at txg sync, which must keep up".to_owned(),
    ];
    if path.serial.is_some() {
        missing.push(format!(
            "the sync writes per commit ({:.1}) are taken to stay as they were; a database's may fall with faster commits (PostgreSQL's WAL writes per commit went from 2.3 to 1.9 with a log vdev in zprof's guest), so its commits and transactions are the figures to compare (zprof compare of this run and one with a log device sets them beside the prediction)",
            path.writes_per_commit()
        ));
    }
    if let Some(busy) = saturated {
        missing.push(format!(
            "the machine's CPUs were {} busy: at the predicted commit rate ZFS's threads would compete harder for them than they did here, so the prediction is an upper bound",
            pct(busy)
        ));
    }
    if path.log_device_would_copy_anew() {
        missing.push(format!(
            "the sync writes ({}) are above zfs_immediate_write_sz ({}): without a log device ZFS wrote them in place (WR_INDIRECT) and a commit's log block held a pointer; on a log device each is copied into a {} log block, checksummed and written, work this recording does not contain, so the prediction is an upper bound",
            crate::units::format_bytes(path.write_bytes),
            crate::units::format_bytes(releases::IMMEDIATE_WRITE_BYTES),
            crate::units::format_bytes(path.log_block_bytes)
        ));
    }
    if release.series.is_none() {
        missing.push(format!(
            "OpenZFS {} is not a release zprof knows: the commit timeout is taken as 2.1's ({:.0}%)",
            release.version_text(),
            rule.fraction * 100.0
        ));
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guest's fsyncs while snapshots suspend the ZIL of a version-26
    /// pool, on 2.4.4 (tests/data/README.md).
    #[test]
    fn txg_waits_inside_commits_are_named_with_their_time() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.4.4-zil-fallback.json"
        ));
        let rec = Recording::parse(text, "guest zil fallback").unwrap();
        let commit = summarize(pick(&rec, Stage::ZilCommit, Some("fb"), None));
        let line = fell_back_line(&rec, "fb", &commit).expect("waits inside commits");
        let waits = pick(
            &rec,
            Stage::TxgWaitSynced,
            Some("fb"),
            Some("in zil commit"),
        );
        assert_eq!(waits.len(), 1);
        assert!(
            line.starts_with(&format!("{} txg-sync waits inside commits", waits[0].count)),
            "{line}"
        );
        // The other pool-less waits are not the commits'.
        assert!(fell_back_line(&rec, "other", &commit).is_none());
    }
}
