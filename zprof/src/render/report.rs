//! Rendering a recording for people (a table that reads at a glance) and for
//! programs (JSON with the same rows).
//!
//! Rows are stages in pipeline order, one per stage and class (algorithm, I/O
//! priority), summed over vdevs; pools get their own rows only when the
//! recording saw more than one. The header says what was traced, for how long,
//! and the workload's throughput; the footer says what was lost and which stages
//! could not be measured, and why.

use std::{collections::BTreeSet, fmt::Write as _};

use serde::Serialize;
use zprof_common::Stage;

use crate::{
    recording::requests::{self, GroupBy, RequestRow},
    recording::{HistRecord, Recording, Summary, stage_name, summarize},
    units::{format_bytes, format_count, format_ns},
};

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Stage name as in recordings.
    pub stage: String,
    /// Label shown in the table.
    pub label: String,
    /// Class in words.
    pub detail: String,
    /// Pool, when the recording saw several.
    pub pool: String,
    /// Events per second over the recording.
    pub per_second: f64,
    /// Mean number of events in the stage at once: time spent in it over
    /// wall-clock time (Little's law). On vdev rows, per leaf vdev: 1.0 is a
    /// device with one I/O outstanding throughout, more is a queue.
    pub in_flight: f64,
    /// Statistics.
    #[serde(flatten)]
    pub summary: Summary,
    /// Extra facts (compression ratio, MiB/s).
    pub note: String,
}

/// The report as data.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One-line description of the recording.
    pub title: String,
    /// Workload throughput line.
    pub workload: String,
    /// File and zvol requests as the application saw them (kernel target).
    pub requests: Vec<RequestRow>,
    /// How `requests` is grouped.
    pub requests_by: GroupBy,
    /// The slowest requests (`record --slower-than`), slowest first.
    pub slow_requests: Vec<requests::SlowRequestRecord>,
    /// How many were slower than the threshold in all (kept and dropped).
    pub slow_requests_total: u64,
    /// Stage rows in pipeline order.
    pub rows: Vec<Row>,
    /// Leaf I/O per top-level vdev and allocation class (empty when every
    /// pool is one normal top-level vdev).
    pub top_vdevs: Vec<crate::analyze::top_vdevs::TopVdevRow>,
    /// Loss counters that are not zero.
    pub losses: Vec<(String, u64)>,
    /// Probe points not attached, with reasons.
    pub unavailable: Vec<String>,
    /// Warnings from the recording.
    pub warnings: Vec<String>,
    /// zprof's own cost, in words.
    pub cost: Option<String>,
    /// Each eBPF program's event rate and run time per event, costliest first.
    pub cost_per_program: Option<String>,
}

fn label(stage: Stage) -> &'static str {
    match stage {
        Stage::WorkloadWrite => "write",
        Stage::WorkloadRead => "read",
        Stage::TxAssign => "tx assign",
        Stage::TxWait => "tx wait (throttle)",
        Stage::Compress => "compress",
        Stage::ZstdCompress => "  zstd (inside)",
        Stage::Lz4Compress => "  lz4 (inside)",
        Stage::Decompress => "decompress",
        Stage::BlockRead => "blocks read",
        Stage::ArcRead => "arc read",
        Stage::DdtLookup => "dedup lookup",
        Stage::DdtSync => "dedup table sync",
        Stage::DdtLogAppend => "  log append (inside)",
        Stage::DdtLogFlush => "  log flush (inside)",
        Stage::ArcMissReuse => "disk read reuse",
        Stage::ChecksumCompute => "checksum",
        Stage::ChecksumVerify => "checksum verify",
        Stage::VdevQueue => "vdev queue wait",
        Stage::VdevDisk => "vdev disk",
        Stage::VdevTotal => "vdev total",
        Stage::VdevQueueTimed => "vdev queue+disk",
        Stage::VdevWaitTimed => "  queue wait",
        Stage::VdevDiskTimed => "  disk",
        Stage::Flush => "cache flush",
        Stage::ZilCommit => "zil commit",
        Stage::ZilLogWrite => "  log block write",
        Stage::ZilFlush => "  flush in commit",
        Stage::ZilTimeoutWait => "  commit timeout",
        Stage::ZilOther => "  cpu, wake-ups",
        Stage::ZilLogBlock => "zil log block",
        Stage::SyncWriteCycle => "sync writer cycle",
        Stage::TxgWaitSynced => "txg wait synced",
        Stage::SpaSync => "txg sync",
        Stage::SyncPhase => "  sync phase (inside)",
        Stage::ThrottleDelay => "  throttle delay set",
        Stage::ThrottleDirty => "dirty at delay",
        Stage::TxgDirty => "dirty at txg sync",
        Stage::AllocClass => "class allocation",
        Stage::Recv => "zfs recv",
        Stage::CommitGap => "pool gap between commits",
    }
}

/// The report of `recording`, its requests grouped `by`.
pub fn build(recording: &Recording, by: GroupBy) -> Report {
    Report {
        title: title_line(recording),
        workload: workload_line(recording),
        requests: requests::rows(&recording.requests, by, recording.duration_s),
        requests_by: by,
        slow_requests: recording
            .slow_requests
            .iter()
            .take(SLOW_SHOWN)
            .cloned()
            .collect(),
        slow_requests_total: recording.slow_requests.len() as u64 + recording.slow_requests_dropped,
        rows: stage_rows(recording),
        top_vdevs: crate::analyze::top_vdevs::rows(recording),
        losses: losses_with_samples(recording),
        unavailable: unavailable_lines(recording),
        warnings: recording.warnings.clone(),
        cost: cost_line(recording),
        cost_per_program: cost_per_program_line(recording),
    }
}

/// One row per stage, class and (when the recording saw several) pool.
fn stage_rows(recording: &Recording) -> Vec<Row> {
    let seconds = recording.duration_s.max(1e-9);
    let pools: BTreeSet<&str> = recording
        .histograms
        .iter()
        .map(|h| h.pool.as_str())
        .filter(|p| !p.is_empty())
        .collect();
    let per_pool = pools.len() > 1;
    let mut rows = Vec::new();
    // ddt_sync runs at every txg even where no dataset dedups: its row says
    // something only beside the lookups.
    let dedups = recording
        .histograms
        .iter()
        .any(|h| h.stage == stage_name(Stage::DdtLookup) && h.count > 0);
    for stage in Stage::ALL {
        // Bytes, not times: the cache what-if and the txg findings read them.
        if stage == Stage::DdtSync && !dedups || stage.values_are_bytes() {
            continue;
        }
        let name = stage_name(stage);
        let of_stage: Vec<_> = recording
            .histograms
            .iter()
            .filter(|h| h.stage == name)
            .collect();
        for (pool, _, class_name) in row_groups(&of_stage, per_pool) {
            let members: Vec<_> = of_stage
                .iter()
                .copied()
                .filter(|h| h.class_name == class_name && (!per_pool || h.pool == pool))
                .collect();
            let summary = summarize(members.iter().copied());
            let detail = members
                .first()
                .map(|h| h.class_name.clone())
                .unwrap_or_default();
            rows.push(Row {
                stage: name.to_owned(),
                label: label(stage).to_owned(),
                detail,
                pool,
                per_second: summary.count as f64 / seconds,
                in_flight: summary.total_ns as f64 / 1e9 / seconds / per_device(stage, &members),
                note: stage_note(stage, &summary, seconds),
                summary,
            });
        }
    }
    rows
}

/// A stage's rows by class name: classes that differ only in what the name
/// does not show (lz4's unused level argument) are one row. Ordered by pool,
/// then class number (I/O priority order, algorithm order).
fn row_groups(of_stage: &[&HistRecord], per_pool: bool) -> Vec<(String, u32, String)> {
    let mut groups: Vec<(String, u32, String)> = Vec::new();
    for h in of_stage {
        let pool = if per_pool {
            h.pool.clone()
        } else {
            String::new()
        };
        match groups
            .iter_mut()
            .find(|(p, _, name)| *p == pool && *name == h.class_name)
        {
            Some(group) => group.1 = group.1.min(h.class),
            None => groups.push((pool, h.class, h.class_name.clone())),
        }
    }
    groups.sort();
    groups
}

/// The note column of a stage's row.
fn stage_note(stage: Stage, summary: &Summary, seconds: f64) -> String {
    let mut note = String::new();
    match stage {
        Stage::Compress | Stage::ZstdCompress | Stage::Lz4Compress if summary.bytes_out > 0 => {
            let ratio = summary.bytes as f64 / summary.bytes_out as f64;
            let _ = write!(
                note,
                "ratio {ratio:.2}x of {}",
                format_bytes(summary.bytes as f64)
            );
        }
        Stage::WorkloadWrite | Stage::WorkloadRead | Stage::VdevTotal | Stage::ChecksumCompute => {
            let _ = write!(note, "{}/s", format_bytes(summary.bytes as f64 / seconds));
        }
        Stage::ZstdCompress | Stage::Lz4Compress => note.push_str("counted within compress"),
        Stage::ZilLogBlock => note.push_str("issue to written and flushed"),
        Stage::DdtLogAppend => {
            let _ = write!(
                note,
                "{} entries logged",
                format_count(summary.bytes as f64)
            );
        }
        Stage::DdtLogFlush => {
            let _ = write!(
                note,
                "{} entries flushed",
                format_count(summary.bytes as f64)
            );
        }
        Stage::VdevWaitTimed | Stage::VdevDiskTimed => {
            note.push_str("split where the leaf I/O starts")
        }
        _ => {}
    }
    note
}

/// The workload line: what the workload did per second, and the requests
/// line when the request layer was traced.
fn workload_line(recording: &Recording) -> String {
    let seconds = recording.duration_s.max(1e-9);
    let stat = |stage: Stage| {
        summarize(
            recording
                .histograms
                .iter()
                .filter(|h| h.stage == stage_name(stage)),
        )
    };
    let writes = stat(Stage::WorkloadWrite);
    let reads = stat(Stage::WorkloadRead);
    let commits = stat(Stage::ZilCommit);
    let mut workload = format!(
        "workload: {} writes/s ({}/s), {} reads/s ({}/s), {} zil commits/s",
        format_count(writes.count as f64 / seconds),
        format_bytes(writes.bytes as f64 / seconds),
        format_count(reads.count as f64 / seconds),
        format_bytes(reads.bytes as f64 / seconds),
        format_count(commits.count as f64 / seconds),
    );
    if !recording.txgs.is_empty() {
        let mean =
            recording.txgs.iter().map(|t| t.duration_ns).sum::<u64>() / recording.txgs.len() as u64;
        let _ = write!(
            workload,
            ", {} txgs synced (mean spa_sync {})",
            recording.txgs.len(),
            format_ns(mean)
        );
    }
    if !recording.requests.is_empty() {
        let rate = |op: &[&str]| {
            let n: u64 = recording
                .requests
                .iter()
                .filter(|r| op.contains(&r.op.as_str()))
                .map(|r| r.count)
                .sum();
            format_count(n as f64 / seconds)
        };
        let _ = write!(
            workload,
            "\nrequests: {} writes/s, {} reads/s, {} fsyncs and flushes/s (file and zvol, as the application issued them)",
            rate(&["write"]),
            rate(&["read"]),
            rate(&["fsync", "flush"])
        );
    }
    workload
}

/// The title: what was traced (and whether zprof verified that build), for
/// how long, around which command or process.
fn title_line(recording: &Recording) -> String {
    let target = &recording.target;
    let mut title = format!(
        "zprof: {} {} (OpenZFS {}{}), {:.1} s",
        target.kind,
        target.object,
        target.zfs_version.as_deref().unwrap_or("version unknown"),
        if target.zfs_status.is_empty() {
            String::new()
        } else {
            format!(", {}", target.zfs_status)
        },
        recording.duration_s
    );
    if let Some(command) = &recording.command {
        let _ = write!(title, ", command `{}`", command.join(" "));
        match recording.command_exit {
            Some(code) => {
                let _ = write!(title, " exited {code}");
            }
            None => title.push_str(" still running at the end"),
        }
    } else if let Some(pid) = recording.pid {
        let _ = write!(title, ", pid {pid}");
    }
    title
}

/// The probe points not attached, each with why; a fallback that was not
/// needed is not a gap in the measurement.
fn unavailable_lines(recording: &Recording) -> Vec<String> {
    recording
        .probes
        .iter()
        .filter(|p| !p.attached && !p.reason.as_deref().unwrap_or("").starts_with("not needed"))
        .filter(|p| !p.reason.as_deref().unwrap_or("").starts_with("left out"))
        .map(|p| {
            format!(
                "{} ({}): {}",
                p.function,
                p.group,
                p.reason.as_deref().unwrap_or("not attached")
            )
        })
        .collect()
}

/// "zprof's own cost" line: eBPF program runs per second and time per run,
/// attach and detach time, peak memory.
fn cost_line(recording: &Recording) -> Option<String> {
    let runs: u64 = recording.bpf_programs.iter().map(|p| p.run_count).sum();
    let mut parts = Vec::new();
    if runs > 0 {
        let time: u64 = recording.bpf_programs.iter().map(|p| p.run_time_ns).sum();
        let seconds = recording.duration_s.max(1e-9);
        let busiest = recording.bpf_programs.iter().max_by_key(|p| p.run_count)?;
        parts.push(format!(
            "{} eBPF program runs/s, {} per run, {:.2}% of one CPU (busiest: {} at {}/s); each event also pays the probe trap itself ({})",
            format_count(runs as f64 / seconds),
            format_ns(time / runs),
            time as f64 / 1e9 / seconds * 100.0,
            busiest.program,
            format_count(busiest.run_count as f64 / seconds),
            match recording.target.kind {
                crate::zfs::target::TargetKind::Kernel => "kprobes: about 20-45 ns",
                crate::zfs::target::TargetKind::Libzpool => "uprobes: about 0.5 us on Linux 6.18",
            },
        ));
    }
    if let Some(cost) = recording.self_cost {
        parts.push(format!(
            "attach {:.0} ms, detach {:.0} ms{}, peak RSS {:.1} MiB",
            cost.attach_ms,
            cost.detach_ms,
            match (cost.uprobe_multi, recording.target.kind) {
                (false, _) => "",
                (true, crate::zfs::target::TargetKind::Kernel) => " (kprobe_multi links)",
                (true, crate::zfs::target::TargetKind::Libzpool) => " (uprobe_multi links)",
            },
            cost.peak_rss_kib as f64 / 1024.0
        ));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!("zprof's own cost: {}", parts.join("; ")))
}

/// "per program" line: which of zprof's programs cost what during this run
/// (rate x run time per event), the costliest first.
fn cost_per_program_line(recording: &Recording) -> Option<String> {
    let seconds = recording.duration_s.max(1e-9);
    let mut programs: Vec<_> = recording
        .bpf_programs
        .iter()
        .filter(|p| p.run_count > 0)
        .collect();
    if programs.is_empty() {
        return None;
    }
    programs.sort_by(|a, b| {
        b.run_time_ns
            .cmp(&a.run_time_ns)
            .then(a.program.cmp(&b.program))
    });
    // The six costliest say where the time goes; the rest are summed.
    const SHOWN: usize = 6;
    let mut parts: Vec<String> = programs
        .iter()
        .take(SHOWN)
        .map(|p| {
            format!(
                "{} {}/s x {}",
                p.program,
                format_count(p.run_count as f64 / seconds),
                format_ns(p.run_time_ns / p.run_count)
            )
        })
        .collect();
    if programs.len() > SHOWN {
        let rest = &programs[SHOWN..];
        let runs: u64 = rest.iter().map(|p| p.run_count).sum();
        parts.push(format!(
            "{} more at {}/s in all",
            rest.len(),
            format_count(runs as f64 / seconds)
        ));
    }
    Some(format!(
        "  per program (events/s x BPF time per event): {}",
        parts.join(", ")
    ))
}

/// The loss counters, and the CPU samples whose stacks were lost or not
/// counted: a flame graph's gaps belong in the report's footer too.
fn losses_with_samples(recording: &Recording) -> Vec<(String, u64)> {
    let mut losses = recording.losses.nonzero();
    for program in recording.bpf_programs.iter().filter(|p| p.missed > 0) {
        losses.push((
            format!(
                "runs of {} the kernel skipped (another tracing program was running on that CPU: events not counted)",
                program.program
            ),
            program.missed,
        ));
    }
    if let Some(cpu) = &recording.cpu {
        if cpu.stack_lost > 0 {
            losses.push((
                format!(
                    "CPU samples with a lost stack (of {} sampled; raise --stack-storage-size)",
                    cpu.samples_total
                ),
                cpu.stack_lost,
            ));
        }
        if cpu.sample_map_full > 0 {
            losses.push((
                "CPU samples not counted (sample map full)".to_owned(),
                cpu.sample_map_full,
            ));
        }
        if cpu.cut_samples > 0 {
            losses.push((
                format!(
                    "CPU samples with a stack cut at {} frames (outermost frames lost)",
                    cpu.stack_depth
                ),
                cpu.cut_samples,
            ));
        }
        for process in &cpu.unnamed_processes {
            losses.push((
                format!(
                    "CPU samples of {} (pid {}) with no user frame named: {}",
                    process.name, process.pid, process.why
                ),
                process.unnamed,
            ));
        }
    }
    if let Some(offcpu) = &recording.offcpu
        && offcpu.stack_lost > 0
    {
        losses.push((
            format!(
                "off-CPU periods with a lost stack (of {}; stack map full or slot taken)",
                offcpu.periods
            ),
            offcpu.stack_lost,
        ));
    }
    losses
}

/// What a row's in-flight figure is divided by: the leaf vdevs of a vdev row.
fn per_device(stage: Stage, members: &[&HistRecord]) -> f64 {
    let leaf_stage = matches!(stage, Stage::VdevQueue | Stage::VdevDisk | Stage::VdevTotal)
        || matches!(
            stage,
            Stage::VdevQueueTimed | Stage::VdevWaitTimed | Stage::VdevDiskTimed
        );
    if !leaf_stage {
        return 1.0;
    }
    let leaves: BTreeSet<(&str, u64)> = members.iter().map(|h| (h.pool.as_str(), h.vdev)).collect();
    leaves.len().max(1) as f64
}

/// Renders the report as a table.
pub fn render_table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", report.title);
    let _ = writeln!(out, "{}", report.workload);
    let _ = writeln!(out);
    if !report.requests.is_empty() {
        render_requests(&mut out, report);
    }
    if !report.slow_requests.is_empty() {
        render_slow_requests(&mut out, report);
    }
    render_stages(&mut out, report);
    let _ = writeln!(out);
    if !report.top_vdevs.is_empty() {
        crate::render::top_vdevs::render(&mut out, &report.top_vdevs);
    }
    if report.losses.is_empty() {
        let _ = writeln!(out, "lost events: none");
    } else {
        let parts: Vec<String> = report
            .losses
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        let _ = writeln!(out, "lost or unmatched: {}", parts.join(", "));
    }
    if let Some(cost) = &report.cost {
        let _ = writeln!(out, "{cost}");
    }
    if let Some(per_program) = &report.cost_per_program {
        let _ = writeln!(out, "{per_program}");
    }
    for line in &report.unavailable {
        let _ = writeln!(out, "not measured: {line}");
    }
    for line in &report.warnings {
        let _ = writeln!(out, "warning: {line}");
    }
    out
}

/// The stage table: one line per row, then what INFLT means.
fn render_stages(out: &mut String, report: &Report) {
    let per_pool = report.rows.iter().any(|r| !r.pool.is_empty());
    let _ = write!(out, "{:<19} {:<22} ", "STAGE", "DETAIL");
    if per_pool {
        let _ = write!(out, "{:<14} ", "POOL");
    }
    let _ = writeln!(
        out,
        "{:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6}  NOTE",
        "COUNT", "OPS/S", "P50", "P90", "P99", "MAX", "TOTAL", "INFLT"
    );
    for row in &report.rows {
        let s = &row.summary;
        // Rows counted at entry only have no latency to show.
        let timed = !row.detail.ends_with(crate::recording::classes::COUNT_ONLY);
        let time = |ns: u64| if timed { format_ns(ns) } else { "-".to_owned() };
        let _ = write!(out, "{:<19} {:<22} ", row.label, truncate(&row.detail, 22));
        if per_pool {
            let _ = write!(out, "{:<14} ", truncate(&row.pool, 14));
        }
        let _ = writeln!(
            out,
            "{:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6}  {}",
            format_count(s.count as f64),
            format_count(row.per_second),
            time(s.p50_ns),
            time(s.p90_ns),
            time(s.p99_ns),
            time(s.max_ns),
            time(s.total_ns),
            if timed {
                format!("{:.2}", row.in_flight)
            } else {
                "-".to_owned()
            },
            row.note
        );
    }
    if report.rows.is_empty() {
        let _ = writeln!(
            out,
            "(no events: did the workload run on the traced target?)"
        );
    } else {
        let _ = writeln!(
            out,
            "INFLT: mean number in the stage at once (its time over the wall time); per leaf vdev on vdev rows"
        );
    }
}

/// The requests section: what the application waited for, per dataset,
/// process or cgroup, before the stages that explain it.
fn render_requests(out: &mut String, report: &Report) {
    let who = match report.requests_by {
        GroupBy::Dataset => "DATASET",
        GroupBy::Process => "PROCESS",
        GroupBy::Cgroup => "CGROUP",
    };
    let _ = writeln!(
        out,
        "{:<5} {:<24} {:<24} {:>10} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "REQ", "OP", who, "COUNT", "OPS/S", "MB/S", "P50", "P99", "MAX"
    );
    for row in &report.requests {
        let s = &row.summary;
        let _ = writeln!(
            out,
            "{:<5} {:<24} {:<24} {:>10} {:>9} {:>9.1} {:>8} {:>8} {:>8}",
            row.layer,
            // "write direct direct-path" fits.
            truncate(&row.op, 24),
            truncate(&row.who, 24),
            format_count(s.count as f64),
            format_count(row.per_second),
            row.bytes_per_second / 1e6,
            format_ns(s.p50_ns),
            format_ns(s.p99_ns),
            format_ns(s.max_ns),
        );
    }
    let _ = writeln!(out);
}

/// Slow requests the report lists (the recording keeps more).
const SLOW_SHOWN: usize = 20;

/// The slowest requests, each with the stages its thread waited in.
fn render_slow_requests(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "slowest requests ({} of {} over the --slower-than threshold):",
        report.slow_requests.len(),
        format_count(report.slow_requests_total as f64)
    );
    for r in &report.slow_requests {
        let mut op = r.op.clone();
        for flag in &r.flags {
            let _ = write!(op, " {flag}");
        }
        let stages = if !r.joined {
            "stages not joined (a zvol's work runs on taskq threads)".to_owned()
        } else if r.stages.is_empty() {
            "no timed stage (CPU, page cache, ARC)".to_owned()
        } else {
            r.stages
                .iter()
                .map(|(name, ns)| format!("{name} {}", format_ns(*ns)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "  at {:>7.3}s {:>8} {} {:<12} {} {}[{}] {}: {stages}",
            r.start_offset_ns as f64 / 1e9,
            format_ns(r.duration_ns),
            r.layer,
            op,
            if r.dataset.is_empty() {
                "(dataset unknown)"
            } else {
                &r.dataset
            },
            r.comm,
            r.pid,
            format_bytes(r.bytes as f64),
        );
    }
    let _ = writeln!(out);
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_owned()
    } else {
        text.chars().take(width - 1).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_ns(750), "750ns");
        assert_eq!(format_ns(1_500), "1.50us");
        assert_eq!(format_ns(12_345_678), "12.3ms");
        assert_eq!(format_ns(2_000_000_000), "2.00s");
    }

    #[test]
    fn counts_have_separators() {
        assert_eq!(format_count(10_115.0), "10,115");
        assert_eq!(format_count(999.0), "999");
        assert_eq!(format_count(1_234_567.0), "1,234,567");
        assert_eq!(format_count(2.5), "2.5");
    }
}
