//! The RAIDZ expansion finding (OpenZFS 2.3 and later): while a raidz vdev
//! is expanded by a disk (`zpool attach POOL raidz-N DISK`), ZFS copies every
//! allocated block to the new layout (the reflow) on the same leaves as the
//! workload, at the removal priority, and starts a scrub when it is done. A
//! benchmark run then measures the reflow and the scrub as much as the pool:
//! this finding says how much of the leaves' time they took and what the
//! workload did in the seconds they ran against the seconds they did not.
//!
//! The removal priority also carries a device removal's copies; ZFS refuses
//! to remove a device from a pool with a raidz vdev, so copies on a raidz
//! vdev's leaves are the reflow's.

use std::collections::BTreeSet;

use zprof_common::Stage;

use super::{Confidence, Finding, pct};
use crate::{
    recording::{HistRecord, Recording, pick},
    units::{format_bytes, format_count, format_ns},
    zfs::names::{PRIORITY_REMOVAL, PRIORITY_SCRUB, io_class_is_write, io_class_priority},
};

/// What the leaves did at one priority.
#[derive(Default)]
struct Copies {
    reads: u64,
    read_bytes: u64,
    writes: u64,
    write_bytes: u64,
    disk_ns: u64,
}

impl Copies {
    fn of<'a>(rows: impl Iterator<Item = &'a HistRecord>) -> Copies {
        rows.fold(Copies::default(), |mut c, h| {
            if io_class_is_write(h.class) {
                c.writes += h.count;
                c.write_bytes += h.bytes;
            } else {
                c.reads += h.count;
                c.read_bytes += h.bytes;
            }
            c.disk_ns += h.total_ns;
            c
        })
    }
}

/// One second of the pool: the workload's operations, and the leaf I/Os of
/// the reflow (removal priority) and of scrubs.
#[derive(Clone, Copy)]
struct Second {
    n: u32,
    ops: u64,
    removal: u64,
    scrub: u64,
}

/// The pool's seconds. The workload's operations are the pool's own where
/// its rows name it; on the kernel a file system's reads name none, and a
/// one-pool view keeps the recording's timeline (the whole workload's),
/// which then is this pool's (a view of one pool of several has none).
fn pool_seconds(rec: &Recording) -> Vec<Second> {
    let own: Vec<Second> = rec
        .pool_seconds
        .iter()
        .map(|s| Second {
            n: s.second,
            ops: s.read_ops + s.write_ops,
            removal: s.removal_ios,
            scrub: s.scrub_ios,
        })
        .collect();
    if own.iter().any(|s| s.ops > 0) || rec.timeline.is_empty() {
        return own;
    }
    rec.timeline
        .iter()
        .map(|t| {
            let pool = own.iter().find(|s| s.n == t.second);
            Second {
                n: t.second,
                ops: t.read_ops + t.write_ops,
                removal: pool.map_or(0, |s| s.removal),
                scrub: pool.map_or(0, |s| s.scrub),
            }
        })
        .collect()
}

/// The workload's operations per second in the seconds that `busy` picks
/// and in the others, over the seconds of one job (or of the recording).
struct Rates {
    /// The job they are of ("" when the recording names none).
    job: String,
    busy_s: usize,
    busy_ops: f64,
    quiet_s: usize,
    quiet_ops: f64,
}

impl Rates {
    /// How much slower the workload ran in the busy seconds (0 when faster).
    fn slowdown(&self) -> f64 {
        (1.0 - self.busy_ops / self.quiet_ops.max(1e-9)).max(0.0)
    }
}

fn rates(job: &str, seconds: &[Second], busy: impl Fn(&Second) -> bool) -> Option<Rates> {
    let (b, q): (Vec<Second>, Vec<Second>) =
        seconds.iter().filter(|s| s.ops > 0).partition(|s| busy(s));
    let mean = |picked: &[Second]| {
        picked.iter().map(|s| s.ops as f64).sum::<f64>() / picked.len().max(1) as f64
    };
    (!b.is_empty() && !q.is_empty()).then(|| Rates {
        job: job.to_owned(),
        busy_s: b.len(),
        busy_ops: mean(&b),
        quiet_s: q.len(),
        quiet_ops: mean(&q),
    })
}

/// The first job (or, without a benchmark's phases, the whole recording)
/// with seconds both busy and quiet: a job's own seconds, so that the
/// layout writes before it or another job's rate do not count as its own.
fn first_rates(rec: &Recording, busy: impl Fn(&Second) -> bool + Copy) -> Option<Rates> {
    let seconds = pool_seconds(rec);
    match crate::analyze::phases::JobSeconds::of(rec) {
        Some(jobs) => jobs.names().find_map(|name| {
            let own: Vec<Second> = seconds
                .iter()
                .copied()
                .filter(|s| jobs.job_of(s.n) == Some(name))
                .collect();
            rates(name, &own, busy)
        }),
        None => rates("", &seconds, busy),
    }
}

/// One finding per pool whose raidz leaves did reflow I/O.
pub(super) fn reflow(rec: &Recording, out: &mut Vec<Finding>) {
    let raidz_leaves: BTreeSet<(&str, u64)> = rec
        .vdevs
        .iter()
        .filter(|v| v.top_vdev.starts_with("raidz"))
        .map(|v| (v.pool.as_str(), v.guid))
        .collect();
    let on_raidz = |h: &&HistRecord| raidz_leaves.contains(&(h.pool.as_str(), h.vdev));
    let disk = pick(rec, Stage::VdevDisk, None, None);
    let at = |priority: u32| {
        Copies::of(
            disk.iter()
                .copied()
                .filter(on_raidz)
                .filter(move |h| io_class_priority(h.class) == priority),
        )
    };
    let copies = at(PRIORITY_REMOVAL);
    if copies.reads + copies.writes == 0 {
        return;
    }
    let all = Copies::of(disk.iter().copied().filter(on_raidz));
    let scrub = at(PRIORITY_SCRUB);
    out.push(finding(rec, &copies, &scrub, &all));
}

fn finding(rec: &Recording, copies: &Copies, scrub: &Copies, all: &Copies) -> Finding {
    let disk_share = copies.disk_ns as f64 / all.disk_ns.max(1) as f64;
    let scrub_share = scrub.disk_ns as f64 / all.disk_ns.max(1) as f64;
    let during = first_rates(rec, |s| s.removal > 0);
    let after = first_rates(rec, |s| s.removal + s.scrub > 0);
    let mut evidence = vec![
        format!(
            "reflow: {} leaf reads ({}) and {} leaf writes ({}) at the removal priority, {} of disk time",
            format_count(copies.reads as f64),
            format_bytes(copies.read_bytes as f64),
            format_count(copies.writes as f64),
            format_bytes(copies.write_bytes as f64),
            format_ns(copies.disk_ns)
        ),
        format!(
            "the reflow took {} of the raidz leaves' disk time",
            pct(disk_share)
        ),
    ];
    if scrub.reads > 0 {
        evidence.push(format!(
            "scrub reads on the same leaves: {} ({}, {} of their disk time); ZFS scrubs a raidz vdev once its expansion is done (zfs_scrub_after_expand)",
            format_count(scrub.reads as f64),
            format_bytes(scrub.read_bytes as f64),
            pct(scrub_share)
        ));
    }
    evidence.extend(during.as_ref().map(|r| rates_line(r, "the reflow")));
    if scrub.reads > 0 {
        evidence.extend(
            after
                .as_ref()
                .map(|r| rates_line(r, "the reflow or the scrub")),
        );
    }
    let slowdown = after.as_ref().or(during.as_ref()).map(Rates::slowdown);
    let missing = vec![match slowdown {
        None => "the workload's rate with and without the reflow: the recording has no seconds of one job (or of the workload) on this pool both with and without it",
        Some(_) => "the rates compare seconds of one run, not a run without the expansion: a job's first seconds can be slower for other reasons too (a cold ARC)",
    }
    .into()];
    Finding {
        kind: "raidz_expansion".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: title(copies, disk_share, slowdown),
        // The workload's time the background work cost: its slowdown in the
        // seconds it ran, over the share of seconds it ran in.
        share: match (&after, slowdown) {
            (Some(r), Some(s)) => s * r.busy_s as f64 / (r.busy_s + r.quiet_s) as f64,
            _ => disk_share * 0.5,
        },
        // The copies are measured; what they cost the workload is read
        // from its seconds with and without them.
        confidence: Confidence::Medium,
        evidence,
        missing,
        action: "A RAIDZ expansion moves every allocated block once, on the disks the workload uses; ZFS gives the workload's I/O \
                 the queue first, but the copies and the scrub after them still take the disks' time. Benchmark the pool once \
                 `zpool wait -t raidz_expand POOL` returns and the scrub is done; on a production pool, expect this slowdown until \
                 then (zfs_vdev_removal_max_active, default 2 per disk, bounds the reflow's I/Os in flight; a scrub can be paused \
                 with `zpool scrub -p`)."
            .into(),
        figures: [
            ("reflow_reads", copies.reads as f64),
            ("reflow_writes", copies.writes as f64),
            ("reflow_write_bytes", copies.write_bytes as f64),
            ("reflow_disk_share", disk_share),
            ("scrub_reads", scrub.reads as f64),
        ]
        .into_iter()
        .chain(slowdown.map(|s| ("workload_slowdown", s)))
        .map(|(name, value)| (name.to_owned(), value))
        .collect(),
    }
}

fn title(copies: &Copies, disk_share: f64, slowdown: Option<f64>) -> String {
    let moved = format_bytes(copies.write_bytes as f64);
    match slowdown {
        Some(s) if s >= 0.05 => format!(
            "a RAIDZ expansion copied {moved} while the workload ran: {} fewer operations per second while it and its scrub ran",
            pct(s)
        ),
        _ => format!(
            "a RAIDZ expansion copied {moved} while the workload ran, {} of the raidz leaves' disk time",
            pct(disk_share)
        ),
    }
}

fn rates_line(r: &Rates, what: &str) -> String {
    let job = if r.job.is_empty() {
        String::new()
    } else {
        format!(" (job {})", r.job)
    };
    format!(
        "the workload{job} did {} operations/s in the {} s {what} ran, {} in the {} s it did not",
        format_count(r.busy_ops),
        r.busy_s,
        format_count(r.quiet_ops),
        r.quiet_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's expansion on 2.4.4 (tests/data/README.md).
    fn lab_expansion() -> Recording {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/lab-2.4.4-raidz-expansion.json"
        ));
        Recording::parse(text, "lab raidz expansion").unwrap()
    }

    fn removal_rows(rec: &Recording, write: bool) -> u64 {
        pick(rec, Stage::VdevDisk, None, None)
            .iter()
            .filter(|h| io_class_priority(h.class) == PRIORITY_REMOVAL)
            .filter(|h| io_class_is_write(h.class) == write)
            .map(|h| h.count)
            .sum()
    }

    #[test]
    fn the_reflow_is_named_with_its_copies_and_the_workloads_rates() {
        let rec = lab_expansion();
        let mut findings = Vec::new();
        reflow(&rec, &mut findings);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        let figure = |name: &str| f.figures.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(figure("reflow_reads"), removal_rows(&rec, false) as f64);
        assert_eq!(figure("reflow_writes"), removal_rows(&rec, true) as f64);
        assert!(figure("scrub_reads") > 0.0, "{f:#?}");
        // The job's seconds with the reflow against those without: the
        // job's rate rose from about 1,000 to about 7,000 reads/s.
        let slowdown = figure("workload_slowdown");
        assert!(slowdown > 0.5 && slowdown < 1.0, "{slowdown}");
        assert!(
            f.evidence
                .iter()
                .any(|l| l.starts_with("the workload (job rr) did")),
            "{:#?}",
            f.evidence
        );
    }

    /// Without the vdev tree's places no leaf is known to be a raidz
    /// vdev's: copies at the removal priority may be a device removal's.
    #[test]
    fn copies_on_leaves_of_unknown_place_are_not_called_a_reflow() {
        let mut rec = lab_expansion();
        rec.vdevs.clear();
        let mut findings = Vec::new();
        reflow(&rec, &mut findings);
        assert!(findings.is_empty(), "{findings:#?}");
    }

    /// On the kernel a file system's reads name no pool: the one pool's
    /// view takes the workload's seconds from the timeline (the guest's
    /// expansion on 2.4.4, tests/data/README.md).
    #[test]
    fn on_the_kernel_the_workloads_seconds_come_from_the_timeline() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.4.4-raidz-expansion.json"
        ));
        let rec = Recording::parse(text, "guest raidz expansion").unwrap();
        assert!(rec.pool_seconds.iter().all(|s| s.read_ops == 0));
        let mut findings = Vec::new();
        reflow(&rec, &mut findings);
        let f = &findings[0];
        assert!(
            f.evidence
                .iter()
                .any(|l| l.starts_with("the workload did") && l.contains("the reflow ran")),
            "{:#?}",
            f.evidence
        );
        // Its reads: each byte allocated before the attach, once.
        let read_bytes: u64 = pick(&rec, Stage::VdevDisk, None, None)
            .iter()
            .filter(|h| {
                io_class_priority(h.class) == PRIORITY_REMOVAL && !io_class_is_write(h.class)
            })
            .map(|h| h.bytes)
            .sum();
        let ratio = read_bytes as f64 / 405_905_408.0;
        assert!(ratio > 0.99 && ratio < 1.02, "{ratio}");
    }

    #[test]
    fn a_pool_without_copies_has_no_finding() {
        let mut rec = lab_expansion();
        rec.histograms
            .retain(|h| io_class_priority(h.class) != PRIORITY_REMOVAL);
        let mut findings = Vec::new();
        reflow(&rec, &mut findings);
        assert!(findings.is_empty());
    }
}
