//! Findings 3 and 4: the CPU ZFS's threads spend compressing and
//! checksumming blocks, per algorithm, as a share of the machine's CPU time,
//! from the stages' times and the on-CPU samples taken inside them.

use std::collections::{BTreeMap, BTreeSet};

use zprof_common::Stage;

use super::{Confidence, Finding, pct, stat};
use crate::{
    recording::{Recording, Summary, pick, summarize},
    units::{format_bytes, format_count, format_ns},
};

/// Finding 3: compression cost per algorithm.
///
/// `rec` is one pool's part of `whole` (or `whole` itself): the on-CPU
/// samples are the host's, so a pool's CPU is its part of the sampled time,
/// in proportion to its wall time inside zio_compress_data.
pub(super) fn compression(rec: &Recording, whole: &Recording, cpu_ns: f64, out: &mut Vec<Finding>) {
    let rows = pick(rec, Stage::Compress, None, None);
    let algorithms: BTreeSet<&str> = rows.iter().map(|h| h.class_name.as_str()).collect();
    if algorithms.is_empty() {
        return;
    }
    let total: Summary = summarize(rows.iter().copied());
    let mut costs = algorithm_costs(rec, &algorithms);
    let all_pools = summarize(pick(whole, Stage::Compress, None, None));
    let compress_cpu_ns = compression_cpu(whole, &total, &all_pools, &mut costs.evidence);
    let share = compress_cpu_ns / cpu_ns;
    let (title, action) = compression_verdict(&costs, share);
    out.push(Finding {
        kind: "compression".into(),
        pool: String::new(),
        pools: Vec::new(),
        title,
        share,
        confidence: if total.count >= 100 {
            Confidence::High
        } else {
            Confidence::Low
        },
        evidence: costs.evidence,
        missing: vec![
            "ZFS also compresses its own metadata with lz4; those blocks are in the lz4 row".into(),
        ],
        action,
        figures: vec![
            ("compress_cpu_ns".into(), compress_cpu_ns),
            ("compress_wall_ns".into(), total.total_ns as f64),
            ("compressed_bytes".into(), total.bytes as f64),
            ("lz4_saving_ns".into(), costs.saving_ns),
        ],
    });
}

/// What each algorithm compressed, at what ratio and cost, set against lz4's
/// measured cost per MiB.
struct AlgorithmCosts {
    /// One line per algorithm, and one per algorithm lz4 would have done cheaper.
    evidence: Vec<String>,
    /// Algorithms (not lz4) that compressed a MiB or more at under 1.1x.
    nothing: Vec<String>,
    /// Wall time lz4 would have saved, ns.
    saving_ns: f64,
}

/// Wall time per MiB compressed, ns (0 for no bytes).
fn per_mib(s: &Summary) -> f64 {
    if s.bytes > 0 {
        s.total_ns as f64 / (s.bytes as f64 / 1048576.0)
    } else {
        0.0
    }
}

fn algorithm_costs(rec: &Recording, algorithms: &BTreeSet<&str>) -> AlgorithmCosts {
    let lz4 = summarize(pick(rec, Stage::Compress, None, Some("lz4")));
    let lz4_cost = (lz4.bytes >= 1 << 20).then(|| per_mib(&lz4));
    let mut costs = AlgorithmCosts {
        evidence: Vec::new(),
        nothing: Vec::new(),
        saving_ns: 0.0,
    };
    for algorithm in algorithms {
        let s = summarize(pick(rec, Stage::Compress, None, Some(algorithm)));
        let ratio = if s.bytes_out > 0 {
            s.bytes as f64 / s.bytes_out as f64
        } else {
            1.0
        };
        costs.evidence.push(format!(
            "{algorithm}: {} in, ratio {ratio:.2}x, {} wall time in zio_compress_data ({} per MiB, p50 {} per block)",
            format_bytes(s.bytes as f64),
            format_ns(s.total_ns),
            format_ns(per_mib(&s) as u64),
            format_ns(s.p50_ns)
        ));
        // lz4 gives up early on incompressible data and stays cheap: it is
        // the recommended default, not a cost to flag.
        if ratio < 1.1 && s.bytes >= 1 << 20 && *algorithm != "lz4" {
            costs
                .nothing
                .push(format!("{algorithm} (ratio {ratio:.2}x)"));
        }
        if *algorithm != "lz4"
            && let Some(lz4_cost) = lz4_cost
        {
            let with_lz4 = s.bytes as f64 / 1048576.0 * lz4_cost;
            if with_lz4 < s.total_ns as f64 {
                costs.saving_ns += s.total_ns as f64 - with_lz4;
                costs.evidence.push(format!(
                    "at lz4's measured {} per MiB the same data would cost {} ({} less wall time)",
                    format_ns(lz4_cost as u64),
                    format_ns(with_lz4 as u64),
                    format_ns((s.total_ns as f64 - with_lz4) as u64)
                ));
            }
        }
    }
    costs
}

/// Compression's CPU time, ns, with the line saying where it came from:
/// `total` is what is asked about (a pool's part or all), `all_pools` every
/// compression in `whole`, whose CPU samples are the host's.
fn compression_cpu(
    whole: &Recording,
    total: &Summary,
    all_pools: &Summary,
    evidence: &mut Vec<String>,
) -> f64 {
    // Wall time inside zio_compress_data includes waiting for a CPU; the
    // on-CPU samples taken inside it are its CPU time.
    let sampled = sampled_cpu_under(whole, "zio_compress_data");
    let (ns, samples) = match sampled {
        Some((ns, samples)) if samples > 0 => (ns, samples),
        _ => {
            evidence.push("no CPU samples inside zio_compress_data: its wall time stands for CPU (an upper bound)".into());
            return total.total_ns as f64;
        }
    };
    let part = if all_pools.total_ns > 0 {
        total.total_ns as f64 / all_pools.total_ns as f64
    } else {
        1.0
    };
    let cpu_ns = ns * part;
    let pools_part = if part < 1.0 {
        format!(
            " in all pools ({}), this pool's part by its wall time there ({})",
            format_ns(ns as u64),
            pct(part)
        )
    } else {
        String::new()
    };
    evidence.push(format!(
        "CPU from {samples} on-CPU samples inside zio_compress_data{pools_part}: about {} ({} of its wall time; the rest waited for a CPU)",
        format_ns(cpu_ns as u64),
        pct(cpu_ns / (total.total_ns as f64).max(1.0))
    ));
    cpu_ns
}

/// The title and action: compression that buys nothing, or its cost.
fn compression_verdict(costs: &AlgorithmCosts, share: f64) -> (String, String) {
    if !costs.nothing.is_empty() {
        (
            format!("compression is paying for nothing: {} ({} of CPU)", costs.nothing.join(", "), pct(share)),
            "The data does not compress: compression=lz4 (which gives up early on incompressible data) or off for this dataset saves the CPU at no cost in space.".to_owned(),
        )
    } else {
        (
            format!("compression takes {} of the machine's CPU time", pct(share)),
            if costs.saving_ns > 0.0 {
                "Weigh the extra ratio against the CPU: lz4 would cost less per MiB; zstd pays off where space matters more than write throughput.".to_owned()
            } else {
                "No action needed unless the workload is CPU-bound.".to_owned()
            },
        )
    }
}

/// Finding 4: checksum cost per algorithm.
pub(super) fn checksum(rec: &Recording, cpu_ns: f64, out: &mut Vec<Finding>) {
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
        pools: Vec::new(),
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
