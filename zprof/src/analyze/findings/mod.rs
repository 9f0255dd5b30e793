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
//! Every finding is about one pool (see [`explain`]): a family runs on each
//! pool's part of the recording, and only evidence that names no pool makes
//! a finding over all of them, which says so.
//!
//! This file holds the finding type, the options, and [`explain`], which runs
//! the families in a fixed order and ranks what they found; each family is a
//! file of its own: `sync_writes` (and the SLOG what-if), `cpu`
//! (compression, checksums), `writes` (amplification, the throttle),
//! `txg_sync` (where the syncs' time goes, phase by phase), `reads`
//! (and the cache what-if), `dedup`, `zvol`, `direct_io` and `reflow` (RAIDZ
//! expansion); `unsplit` says why a family
//! cannot be split by pool. Findings are data: the text
//! `zprof explain` prints is made in `render::findings`.

use serde::Serialize;
use zprof_common::Stage;

use crate::recording::{
    Recording, Summary, pick,
    pools::{Unpooled, pool_names, restrict},
    summarize,
};

mod classes;
mod cpu;
mod dedup;
mod direct_io;
mod reads;
mod reflow;
mod sync_writes;
mod txg_sync;
mod unsplit;
pub(crate) mod writes;
mod zvol;

use unsplit::{
    checksum_unsplit, compression_unsplit, dedup_unsplit, reads_unsplit, unpooled_decompression,
    writes_unsplit,
};

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
    /// The pools its evidence comes from: the one pool, or all the
    /// recording's pools when its evidence cannot be split by pool (then
    /// `pool` is "" and `missing` says why).
    pub pools: Vec<String>,
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

/// What every family of findings is given beside the recording it looks at.
struct Context<'a> {
    /// The whole recording's times: every pool's shares are of the whole
    /// workload, so the bottleneck pool's findings rank first.
    time: Time,
    options: &'a ExplainOptions,
    /// The whole recording, for evidence that is the host's (CPU samples).
    whole: &'a Recording,
}

/// One family of findings.
struct Family {
    /// Pushes the family's findings about `rec` (one pool's part of the
    /// recording, or the whole of it).
    run: fn(&Recording, &Context, &mut Vec<Finding>),
    /// Why the family's evidence in this recording cannot be split by pool
    /// (rows of its stages that name none), or `None` when it can.
    unsplit: fn(&Recording) -> Option<String>,
}

/// The families, in the order they push (the sort in [`explain`] is stable:
/// findings of equal share keep it, so the text and JSON are the same run to run).
const FAMILIES: [Family; 12] = [
    Family {
        run: sync_write_family,
        unsplit: |_| None,
    },
    Family {
        run: |r, c, o| cpu::compression(r, c.whole, c.time.cpu_ns, o),
        unsplit: compression_unsplit,
    },
    Family {
        run: |r, c, o| cpu::checksum(r, c.time.cpu_ns, o),
        unsplit: checksum_unsplit,
    },
    Family {
        run: write_amplification_family,
        unsplit: writes_unsplit,
    },
    Family {
        run: |r, c, o| writes::throttle(r, c.time.workload_ns, o),
        unsplit: |_| None,
    },
    Family {
        run: |r, c, o| txg_sync::txg_sync(r, c.time.wall_ns, o),
        unsplit: |_| None,
    },
    Family {
        run: reads_family,
        unsplit: reads_unsplit,
    },
    Family {
        run: |r, c, o| dedup::dedup(r, c.time.wall_ns, c.time.cpu_ns, o),
        unsplit: dedup_unsplit,
    },
    Family {
        run: |r, _, o| zvol::zvol_blocks(r, o),
        unsplit: |_| None,
    },
    Family {
        run: |r, _, o| direct_io::direct_io(r, o),
        unsplit: |_| None,
    },
    Family {
        run: |r, _, o| reflow::reflow(r, o),
        unsplit: |_| None,
    },
    Family {
        run: |r, _, o| classes::class_full(r, o),
        unsplit: |_| None,
    },
];

fn sync_write_family(rec: &Recording, context: &Context, out: &mut Vec<Finding>) {
    let pools: std::collections::BTreeSet<&str> = pick(rec, Stage::ZilCommit, None, None)
        .iter()
        .map(|h| h.pool.as_str())
        .collect();
    for pool in pools {
        sync_writes::sync_write(rec, pool, context.options, out);
    }
}

fn write_amplification_family(rec: &Recording, context: &Context, out: &mut Vec<Finding>) {
    let commit_share = stat(rec, Stage::ZilCommit, None).total_ns as f64 / context.time.workload_ns;
    writes::write_amplification(rec, context.time.wall_ns, commit_share, out);
}

fn reads_family(rec: &Recording, context: &Context, out: &mut Vec<Finding>) {
    if let Some(path) = crate::analyze::read_path::ReadPath::measure(rec) {
        let workload_ns = context.time.workload_ns;
        let from = out.len();
        reads::reads(rec, &path, workload_ns, out);
        reads::cache_what_if(rec, &path, context.options, workload_ns, out);
        if let Some(line) = unpooled_decompression(rec, context.whole) {
            for f in &mut out[from..] {
                f.missing.push(line.clone());
            }
        }
    }
}

/// Runs every analysis and returns the findings, most important first.
///
/// Every finding is about one pool: each family runs on each pool's part of
/// the recording ([`restrict`]). With one pool, rows that name no pool are
/// that pool's. With several, a family whose evidence has such rows runs
/// once over the whole recording, and its findings say so and name the pools.
pub fn explain(rec: &Recording, options: &ExplainOptions) -> Vec<Finding> {
    let context = Context {
        time: Time::of(rec, options.cpus),
        options,
        whole: rec,
    };
    let pools = pool_names(rec);
    let views: Vec<(String, Recording)> = if pools.len() <= 1 {
        let name = pools.first().cloned().unwrap_or_default();
        vec![(name, restrict(rec, &pools, Unpooled::Keep))]
    } else {
        pools
            .iter()
            .map(|p| {
                (
                    p.clone(),
                    restrict(rec, std::slice::from_ref(p), Unpooled::Drop),
                )
            })
            .collect()
    };
    let mut findings = Vec::new();
    for family in &FAMILIES {
        match (pools.len() > 1).then(|| (family.unsplit)(rec)).flatten() {
            Some(why) => {
                let from = findings.len();
                (family.run)(rec, &context, &mut findings);
                for f in &mut findings[from..] {
                    mark_unsplit(f, &pools, &why);
                }
            }
            None => {
                for (pool, view) in &views {
                    let from = findings.len();
                    (family.run)(view, &context, &mut findings);
                    for f in &mut findings[from..] {
                        f.pool.clone_from(pool);
                        f.pools = (!pool.is_empty())
                            .then(|| pool.clone())
                            .into_iter()
                            .collect();
                    }
                }
            }
        }
    }
    findings.sort_by(|a, b| b.share.total_cmp(&a.share));
    findings
}

/// A finding computed over every pool: no pool of its own, the pools it
/// covers, and why it could not be split.
fn mark_unsplit(f: &mut Finding, pools: &[String], why: &str) {
    f.pool.clear();
    f.pools = pools.to_vec();
    f.missing.push(format!(
        "not split by pool: {why}; the figures are over pools {}",
        pools.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's l2arc scenario recorded whole (tests/data/README.md) and
    /// its findings.
    fn l2arc_scenario() -> (Recording, Vec<Finding>) {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/lab-2.1.11-l2arc-scenario.json"
        ));
        let rec = Recording::parse(text, "l2arc scenario").unwrap();
        let options = ExplainOptions {
            cpus: 2,
            ..Default::default()
        };
        let findings = explain(&rec, &options);
        (rec, findings)
    }

    /// The lab's l2arc scenario recorded whole (tests/data/README.md): six
    /// pools of one process, three read from the disks and three from a
    /// cache device. Each pool gets its own reads finding, which says what
    /// its job (named in the benchmark's JSON) did.
    #[test]
    fn each_pool_of_the_l2arc_scenario_has_the_reads_finding_of_its_own_job() {
        let (rec, findings) = l2arc_scenario();
        let jobs = &rec.benchmark.as_ref().unwrap().jobs;
        assert_eq!(jobs.len(), 6);
        for job in jobs {
            let pool = job.pool.as_deref().unwrap();
            let reads: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.kind == "reads" && f.pool == pool)
                .collect();
            assert_eq!(reads.len(), 1, "{pool}: {findings:#?}");
            let expected = if job.name.starts_with("l2arc") {
                "served from the ARC and its cache devices"
            } else {
                "disk-bound"
            };
            assert!(
                reads[0].title.contains(expected),
                "{} [{pool}]: {}",
                job.name,
                reads[0].title
            );
            // Its decompressions name no pool (an older zprof's recording):
            // the finding says they are not in its figures.
            assert!(
                reads[0]
                    .missing
                    .iter()
                    .any(|m| m.contains("decompressions (")),
                "{:#?}",
                reads[0]
            );
        }
        // The disk-bound pools rank above the ones their cache devices serve.
        let first = findings.iter().find(|f| f.kind == "reads").unwrap();
        assert!(first.title.contains("disk-bound"), "{first:#?}");
    }

    /// With several pools, a finding from evidence that names no pool
    /// (compression here) covers them all and says why it is not split.
    #[test]
    fn a_finding_that_cannot_be_split_by_pool_names_every_pool() {
        let (rec, findings) = l2arc_scenario();
        let pools = pool_names(&rec);
        assert_eq!(pools.len(), 6, "{pools:?}");
        let compression = findings.iter().find(|f| f.kind == "compression").unwrap();
        assert_eq!(compression.pool, "");
        assert_eq!(compression.pools, pools);
        assert!(
            compression
                .missing
                .iter()
                .any(|m| m.starts_with("not split by pool: compression"))
        );
        for f in findings.iter().filter(|f| !f.pool.is_empty()) {
            assert_eq!(f.pools, vec![f.pool.clone()], "{f:#?}");
        }
    }

    /// The guest's two pools on zfs.ko (tests/data/README.md): 4k fsync
    /// writes on tpa, 64k async lz4 writes on tpb.
    fn guest_two_pools() -> Vec<Finding> {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.1.11-two-pools.json"
        ));
        let rec = Recording::parse(text, "guest two pools").unwrap();
        let options = ExplainOptions {
            cpus: 2,
            ..Default::default()
        };
        explain(&rec, &options)
    }

    fn figure_of(findings: &[Finding], kind: &str, pool: &str, name: &str) -> f64 {
        let finding = findings
            .iter()
            .find(|f| f.kind == kind && f.pool == pool)
            .unwrap_or_else(|| panic!("no {kind} finding about {pool}: {findings:#?}"));
        finding.figures.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// The kernel counts the workload's writes where they carry no pool; each
    /// pool's amplification takes the write requests on its own datasets, and
    /// compression the pool of the zio its thread ran.
    #[test]
    fn a_kernel_recording_of_two_pools_splits_writes_and_compression_by_pool() {
        let findings = guest_two_pools();
        for kind in ["write_amplification", "compression"] {
            assert!(
                !findings.iter().any(|f| f.kind == kind && f.pool.is_empty()),
                "{kind} not split: {findings:#?}"
            );
        }
        // tpa: 2,001 4k writes (8,196,096 bytes) each made durable in the
        // ZIL and rewritten into 128k records at txg sync.
        let tpa = figure_of(
            &findings,
            "write_amplification",
            "tpa",
            "write_amplification",
        );
        assert!(tpa > 5.0, "tpa {tpa}");
        // tpb: 1.58 GiB of 64k overwrites of a small file, most of them
        // still dirty or overwritten when the recording ended.
        let tpb = figure_of(
            &findings,
            "write_amplification",
            "tpb",
            "write_amplification",
        );
        assert!(tpb < 1.0, "tpb {tpb}");
        let lz4_data = figure_of(&findings, "compression", "tpb", "compressed_bytes");
        let metadata = figure_of(&findings, "compression", "tpa", "compressed_bytes");
        assert!(lz4_data > 10.0 * metadata, "tpb {lz4_data}, tpa {metadata}");
    }

    /// A read job whose layout writes met the write throttle
    /// (tests/data/README.md): the throttle is not the job's.
    #[test]
    fn layout_writes_throttled_before_a_read_job_are_not_the_jobs_throttle() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/lab-2.1.11-layout-throttle.json"
        ));
        let rec = Recording::parse(text, "layout throttle").unwrap();
        let findings = explain(&rec, &ExplainOptions::default());
        let throttle = findings.iter().find(|f| f.kind == "throttle").unwrap();
        assert!(
            throttle.title.contains("only outside the benchmark's jobs"),
            "{throttle:#?}"
        );
        assert_eq!(throttle.share, 0.0);
        let all = throttle
            .figures
            .iter()
            .find(|(n, _)| n == "tx_wait_ns")
            .unwrap()
            .1;
        assert!(
            all > 5e8,
            "the layout's 614 ms of waits stay in the evidence: {all}"
        );
        assert!(
            throttle
                .evidence
                .iter()
                .any(|e| e.starts_with("outside the jobs")),
            "{throttle:#?}"
        );
    }

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
