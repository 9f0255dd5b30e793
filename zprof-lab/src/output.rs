//! Human-readable output, shaped like fio's: one block per job, then the
//! pool and process totals. (JSON output is `serde_json` of [`Report`].)

use std::fmt::Write as _;

use crate::model::DeviceTimes;
use crate::report::{IoStats, JobReport, Report};

/// Bytes with a binary unit, e.g. `133MiB`.
pub fn human_bytes(b: f64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0}{}", U[i])
    } else {
        format!("{v:.1}{}", U[i])
    }
}

/// A count with fio's k/M suffixes, e.g. `34.1k`.
pub fn human_count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Nanoseconds in the unit that reads best.
pub fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2}s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

fn side(out: &mut String, name: &str, s: &IoStats, runtime_ms: u64) {
    if s.total_ios == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {name}: IOPS={}, BW={}/s ({}/{}msec), ios={}",
        human_count(s.iops),
        human_bytes(s.bw_bytes),
        human_bytes(s.io_bytes as f64),
        runtime_ms,
        s.total_ios
    );
    let l = &s.lat_ns;
    let _ = writeln!(
        out,
        "    lat: min={}, max={}, avg={}, stdev={}",
        human_ns(l.min as f64),
        human_ns(l.max as f64),
        human_ns(l.mean),
        human_ns(l.stddev)
    );
    // Keys are fio's strings ("99.900000"); order them by value, not as text.
    let mut sorted: Vec<(f64, u64)> = l
        .percentile
        .iter()
        .map(|(k, v)| (k.parse().unwrap_or(0.0), *v))
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pcts: Vec<String> = sorted
        .iter()
        .map(|(k, v)| format!("{k}th=[{}]", human_ns(*v as f64)))
        .collect();
    let _ = writeln!(out, "    lat percentiles: {}", pcts.join(", "));
}

/// One job's block.
pub fn job_text(j: &JobReport) -> String {
    let mut out = String::new();
    job_header(&mut out, j);
    side(&mut out, "write", &j.write, j.runtime_ms);
    side(&mut out, "read", &j.read, j.runtime_ms);
    commits_and_leaves(&mut out, j);
    device_times(&mut out, j);
    pool_and_arc(&mut out, j);
    out
}

/// The job's line: its spec and pool.
fn job_header(out: &mut String, j: &JobReport) {
    let s = &j.spec;
    let _ = writeln!(
        out,
        "{}: (rw={}, bs={}, size={}, numjobs={}, fsync={}, sync={}, compress%={}) pool={}{}",
        j.jobname,
        s.rw,
        human_bytes(s.bs as f64),
        human_bytes(s.size as f64),
        s.numjobs,
        s.fsync,
        s.sync as u8,
        s.buffer_compress_percentage,
        j.pool.name,
        if j.interrupted { " [interrupted]" } else { "" }
    );
}

/// ZIL commits, txgs and flushes; bytes through the leaf vdevs.
fn commits_and_leaves(out: &mut String, j: &JobReport) {
    let _ = writeln!(
        out,
        "  zil_commits={} (all zil_commit calls: {}), txgs_synced={} (txg {}..{}, {:.0} ms in spa_sync), flushes={}{}",
        j.zil_commits,
        j.zil_commits_all,
        j.txgs_synced,
        j.txg_first,
        j.txg_last,
        j.spa_sync_ms,
        j.flushes,
        if j.host_fsyncs > 0 {
            format!(" (host fsyncs {})", j.host_fsyncs)
        } else {
            String::new()
        }
    );
    let log_w: u64 = j
        .leaves
        .iter()
        .filter(|l| l.is_log)
        .map(|l| l.write_bytes)
        .sum();
    let _ = writeln!(
        out,
        "  leaf vdevs: wrote {} (log vdevs {}), read {}",
        human_bytes(j.leaf_write_bytes as f64),
        human_bytes(log_w as f64),
        human_bytes(j.leaf_read_bytes as f64)
    );
    if let Some(r) = &j.reflow {
        let _ = writeln!(
            out,
            "  raidz expansion: reflow moved {} of {} during the job{} ({} leaf reads, {} leaf writes at the removal priority)",
            human_bytes(r.reflowed_bytes as f64),
            human_bytes(r.to_reflow_bytes as f64),
            if r.finished { ", finished" } else { "" },
            r.reads,
            r.writes
        );
    }
}

/// Per device class, its I/O and flush times as ZFS saw them beside the model's.
fn device_times(out: &mut String, j: &JobReport) {
    for (name, class) in [
        ("data vdevs", "normal"),
        ("special vdevs", "special"),
        ("log vdevs", "log"),
        ("cache devices", "cache"),
    ] {
        let t = j
            .leaves
            .iter()
            .filter(|l| l.vdev_class == class)
            .fold(DeviceTimes::default(), |t, l| t.plus(&l.device));
        if t.ios + t.flushes > 0 {
            let mean = |ns: u64, n: u64| {
                if n > 0 {
                    human_ns(ns as f64 / n as f64)
                } else {
                    "-".to_owned()
                }
            };
            let _ = writeln!(
                out,
                "  {name} as ZFS saw them: I/O mean {} ({} timed), flush mean {} ({} timed); the model's: {} and {}",
                mean(t.io_ns, t.ios),
                t.ios,
                mean(t.flush_ns, t.flushes),
                t.flushes,
                mean(t.model_io_ns, t.ios),
                mean(t.model_flush_ns, t.flushes)
            );
        }
    }
}

/// The pool's space, the IOPS samples, the warm-up and the ARC's counters.
fn pool_and_arc(out: &mut String, j: &JobReport) {
    let a = &j.pool;
    let _ = writeln!(
        out,
        "  pool: alloc={} log_alloc={} used={} logical={} compressratio={:.2}x dedupratio={:.2}x",
        human_bytes(a.alloc_bytes as f64),
        human_bytes(a.log_alloc_bytes as f64),
        human_bytes(a.used_bytes as f64),
        human_bytes(a.logical_used_bytes as f64),
        a.compressratio,
        a.dedup_ratio
    );
    if let Some(x) = &j.iops_samples {
        let _ = writeln!(
            out,
            "  iops per {} ms: min={} max={} avg={} stdev={} samples={}",
            x.interval_ms,
            human_count(x.min),
            human_count(x.max),
            human_count(x.mean),
            human_count(x.stddev),
            x.samples
        );
    }
    if j.warmup_s > 0.0 {
        let _ = writeln!(
            out,
            "  warm-up: {:.1} s of sequential reads before the job",
            j.warmup_s
        );
    }
    if let Some(arc) = &j.arc {
        let _ = writeln!(
            out,
            "  arc: hits={} iohits={} misses={} (l2 hits={} misses={}) demand data hits={} misses={}; size={} c_max={} l2_size={}",
            arc.hits,
            arc.iohits,
            arc.misses,
            arc.l2_hits,
            arc.l2_misses,
            arc.demand_data_hits,
            arc.demand_data_misses,
            human_bytes(arc.size as f64),
            human_bytes(arc.c_max as f64),
            human_bytes(arc.l2_size as f64)
        );
    }
}

/// The whole report as text.
pub fn report_text(r: &Report) -> String {
    let mut out = String::new();
    if !r.openzfs.is_empty() {
        let _ = writeln!(out, "OpenZFS {} (libzpool)", r.openzfs);
    }
    for j in &r.jobs {
        out.push_str(&job_text(j));
        out.push('\n');
    }
    for p in &r.pools {
        let _ = writeln!(
            out,
            "pool {}: {}{} ashift={} logs={} data={} log={} volblocksize={} props={:?}: {} spa_sync calls, txg {}..{}",
            p.name,
            p.layout_text,
            if p.specials > 0 {
                format!(" specials={}", p.specials)
            } else {
                String::new()
            },
            p.ashift,
            p.log_vdevs,
            p.vdev_model,
            p.log_model,
            human_bytes(p.volblocksize as f64),
            p.properties,
            p.spa_sync_calls,
            p.first_txg,
            p.last_txg
        );
    }
    let t = &r.totals;
    let _ = writeln!(
        out,
        "totals: zil_commit calls: lab {} + libzpool's own {} = {}; spa_sync calls {}; leaf I/Os through the queue {}; leaf flushes {} (host fsyncs {}){}",
        t.zil_commits_lab,
        t.zil_commits_internal,
        t.zil_commits_all,
        t.spa_sync_calls,
        t.leaf_ios_queued,
        t.leaf_flushes,
        t.host_fsyncs,
        if r.interrupted { " [interrupted]" } else { "" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(human_bytes(4096.0), "4.0KiB");
        assert_eq!(human_bytes(100.0), "100B");
        assert_eq!(human_count(34_120.0), "34.1k");
        assert_eq!(human_count(65.4), "65.4");
        assert_eq!(human_ns(1_500_000.0), "1.50ms");
        assert_eq!(human_ns(750.0), "750ns");
    }
}
