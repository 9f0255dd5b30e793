//! Findings: what a recording says about the workload, in words and numbers, with
//! the evidence behind each statement and what to do about it.
//!
//! Each finding carries a `share`: the fraction of the workload's time it
//! explains (time in the stages it is about, over the workload's own time: its
//! reads, writes, tx assigns and ZIL commits), or for CPU-side stages that run in
//! ZFS's threads (compression, checksums) the fraction of the machine's CPU time.
//! Findings are ranked by share. Each states its confidence and the evidence it
//! lacks, rather than guessing silently.
//!
//! This file holds the finding type, the options, and [`explain`], which runs
//! the families in a fixed order and ranks what they found; each family is a
//! file of its own: `sync_writes` (and the SLOG what-if), `cpu`
//! (compression, checksums), `writes` (amplification, the throttle), `reads`
//! (and the cache what-if), `dedup` and `zvol`. Findings are data: the text
//! `zprof explain` prints is made in `render::findings`.

use serde::Serialize;
use zprof_common::Stage;

use crate::recording::{Recording, Summary, pick, summarize};

mod cpu;
mod dedup;
mod reads;
mod sync_writes;
mod writes;
mod zvol;

pub use sync_writes::{SlogDevice, parse_slog};

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

/// One `--what-if`: a log device, or a cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WhatIf {
    /// A log device (SLOG) for sync writes.
    Slog(SlogDevice),
    /// A cache device or more ARC for reads.
    Cache(crate::analyze::cache_what_if::CacheSpec),
}

/// Parses a `--what-if`: `slog=...` (see [`parse_slog`]), `l2arc=SIZE[,ssd|nvme]` or `arc=+SIZE`.
pub fn parse_what_if(s: &str) -> Result<WhatIf, String> {
    match crate::analyze::cache_what_if::parse_cache(s) {
        Some(cache) => cache.map(WhatIf::Cache),
        None => parse_slog(s).map(WhatIf::Slog),
    }
}

/// What `explain` needs to know beyond the recording.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// Log devices to predict with; empty means the default (ssd and nvme).
    pub slogs: Vec<(String, SlogDevice)>,
    /// Caches to predict reads with; empty means the default (an ssd cache
    /// device that holds all the data the run read from disk).
    pub caches: Vec<crate::analyze::cache_what_if::CacheSpec>,
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

// The findings' words give shares in whole percent, as the renderer does.
use crate::units::pct;

/// The time a recording's shares are fractions of.
struct Time {
    /// The recording's wall time, ns.
    wall_ns: f64,
    /// The machine's CPU time over it, ns (for compression's and checksums' shares).
    cpu_ns: f64,
    /// The workload's own time, ns (see the module doc).
    workload_ns: f64,
}

impl Time {
    fn of(rec: &Recording, cpus: usize) -> Time {
        let seconds = rec.duration_s.max(1e-9);
        let wall_ns = seconds * 1e9;
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
        Time {
            wall_ns,
            cpu_ns: wall_ns * cpus.max(1) as f64,
            workload_ns,
        }
    }
}

/// Runs every analysis and returns the findings, most important first.
pub fn explain(rec: &Recording, options: &ExplainOptions) -> Vec<Finding> {
    let time = Time::of(rec, options.cpus);
    let mut findings = Vec::new();
    // The families push in this order, and the sort below is stable: findings
    // of equal share keep it, so the text and JSON are the same run to run.
    let pools: std::collections::BTreeSet<String> = pick(rec, Stage::ZilCommit, None, None)
        .iter()
        .map(|h| h.pool.clone())
        .collect();
    for pool in &pools {
        sync_writes::sync_write(rec, pool, options, &mut findings);
    }
    cpu::compression(rec, time.cpu_ns, &mut findings);
    cpu::checksum(rec, time.cpu_ns, &mut findings);
    let commit_share = stat(rec, Stage::ZilCommit, None).total_ns as f64 / time.workload_ns;
    writes::write_amplification(rec, time.wall_ns, commit_share, &mut findings);
    writes::throttle(rec, time.workload_ns, &mut findings);
    if let Some(path) = crate::analyze::read_path::ReadPath::measure(rec) {
        reads::reads(rec, &path, time.workload_ns, &mut findings);
        reads::cache_what_if(rec, &path, options, time.workload_ns, &mut findings);
    }
    dedup::dedup(rec, time.wall_ns, time.cpu_ns, &mut findings);
    zvol::zvol_blocks(rec, &mut findings);
    findings.sort_by(|a, b| b.share.total_cmp(&a.share));
    findings
}

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
                rate_bytes_per_s: 0.0,
                flush_ns: 100_000.0
            }
        );
        assert_eq!(
            parse_slog("slog=80us,flush=50us").unwrap(),
            SlogDevice {
                write_ns: 80_000.0,
                rate_bytes_per_s: 0.0,
                flush_ns: 50_000.0
            }
        );
        assert_eq!(
            parse_slog("slog=60us,rate=500MiB/s,flush=100us").unwrap(),
            SlogDevice {
                write_ns: 60_000.0,
                rate_bytes_per_s: 500.0 * 1048576.0,
                flush_ns: 100_000.0
            }
        );
        assert!(parse_slog("slog=60us,rate=fast").is_err());
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
