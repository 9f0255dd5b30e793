//! Findings 5 and 6: what a byte the workload writes costs on the leaf vdevs
//! (parity, the ZIL, metadata, raidz padding), and whether the write
//! throttle held writers back while txgs synced.

use std::collections::BTreeSet;

use zprof_common::Stage;

use super::{Confidence, Finding, pct, stat};
use crate::{
    analyze::phases::{ThrottlePhases, Waits, throttle_phases},
    recording::{Recording, Summary, pick, summarize},
    units::{format_bytes, format_count, format_ns},
    zfs::names,
};

/// Finding 5: bytes written to leaf vdevs over bytes the workload wrote.
pub(super) fn write_amplification(
    rec: &Recording,
    wall_ns: f64,
    commit_share: f64,
    out: &mut Vec<Finding>,
) {
    let Some((written, who)) = written_by_workload(rec) else {
        return;
    };
    let Some(leaf) = LeafWrites::of(rec, wall_ns) else {
        return;
    };
    let factor = leaf.all.bytes as f64 / written as f64;
    let mut evidence = vec![
        format!(
            "{who} wrote {}; leaf vdevs wrote {} ({factor:.2}x) over {} vdev(s)",
            format_bytes(written as f64),
            format_bytes(leaf.all.bytes as f64),
            leaf.vdevs
        ),
        format!(
            "{}: {} ({:.2}x); txg sync (async writes): {} ({:.2}x)",
            sync_priority_words(leaf.has_commits),
            format_bytes(leaf.zil.bytes as f64),
            leaf.zil.bytes as f64 / written as f64,
            format_bytes(leaf.txg.bytes as f64),
            leaf.txg.bytes as f64 / written as f64
        ),
    ];
    let (mut title, mut action) = if factor >= 1.0 {
        (
            format!("each byte written costs {factor:.1} bytes on the leaf vdevs"),
            "Parity, ZIL writes and metadata make up the difference; on raidz small blocks add padding.".to_owned(),
        )
    } else {
        // Less on the disks than written: not a cost, and the figure is not
        // the pool's steady state.
        (
            format!("the leaf vdevs wrote {factor:.2} bytes per byte written"),
            "Writes still dirty when the recording ended, overwrites of the same blocks within a txg and compression keep bytes off the disks: record for several txgs for the steady-state figure.".to_owned(),
        )
    };
    if let Some(seen) = top_vdevs_line(rec) {
        evidence.push(seen);
    }
    if leaf.copies > 0 {
        evidence.push(format!(
            "left out: {} written at the removal priority (a RAIDZ expansion's reflow or a device removal's copies), not the workload's",
            format_bytes(leaf.copies as f64)
        ));
    }
    if let Some((layout, small_blocks)) = raidz_layout(rec) {
        evidence.push(layout);
        if let Some(small_blocks) = small_blocks {
            title = format!("{title}: small blocks on raidz");
            action = small_blocks;
        }
    }
    if leaf.zil_on_log_vdevs > 0 {
        evidence.push(format!(
            "of the sync-priority writes, {} went to the log vdev(s): the ZIL's blocks are off the data disks",
            format_bytes(leaf.zil_on_log_vdevs as f64)
        ));
    } else if leaf.zil.bytes * 20 > written && leaf.txg.bytes > 0 && leaf.has_commits {
        evidence.push("sync writes reach the disks twice: once in the ZIL, once at txg sync (a SLOG takes the first off the data disks)".into());
    }
    out.push(Finding {
        kind: "write_amplification".into(),
        pool: String::new(),
        pools: Vec::new(),
        title,
        // The disks' write time that the extra bytes account for, as far as the
        // workload waits for it: not while it waits on ZIL commits (finding 1).
        share: leaf.disk_busy.min(1.0)
            * (1.0 - 1.0 / factor.max(1.0))
            * (1.0 - commit_share.min(1.0)),
        confidence: Confidence::Medium,
        evidence,
        missing: vec!["writes of txgs that sync after the recording ends are not counted".into()],
        action,
        figures: vec![("write_amplification".into(), factor)],
    });
}

/// The bytes the workload wrote, and who: the workload rows' (the DMU's
/// writes in the traced processes), else the write requests' (zvol writes
/// run on ZFS's zvol threads, not the writer's: only their bios are the
/// writer's).
pub(crate) fn written_by_workload(rec: &Recording) -> Option<(u64, &'static str)> {
    let workload = stat(rec, Stage::WorkloadWrite, None).bytes;
    if workload > 0 {
        return Some((workload, "the workload"));
    }
    let requested: u64 = rec
        .requests
        .iter()
        .filter(|r| r.op == "write")
        .map(|r| r.bytes)
        .sum();
    (requested > 0).then_some((requested, "the write requests (file and zvol)"))
}

/// The leaf vdevs' writes over a recording.
struct LeafWrites {
    /// Writes of sync priority (see [`sync_priority_words`]).
    zil: Summary,
    /// Writes of async priority: txg sync.
    txg: Summary,
    /// Every leaf write.
    all: Summary,
    /// Leaf vdevs written to.
    vdevs: usize,
    /// Their busy share writing, per vdev, over the recording's wall time.
    disk_busy: f64,
    /// Whether the recording holds a zil_commit.
    has_commits: bool,
    /// Bytes of the sync-priority writes on leaves of log vdevs.
    zil_on_log_vdevs: u64,
    /// Bytes a device removal or a RAIDZ reflow wrote (left out of `all`).
    copies: u64,
}

impl LeafWrites {
    /// `None` when the leaf vdevs wrote nothing.
    fn of(rec: &Recording, wall_ns: f64) -> Option<LeafWrites> {
        // A device removal's or RAIDZ reflow's copies are not the
        // workload's writes (the reflow finding tells of them).
        let (copy_rows, leaf): (Vec<_>, Vec<_>) = pick(rec, Stage::VdevTotal, None, None)
            .into_iter()
            .filter(|h| crate::zfs::names::io_class_is_write(h.class))
            .partition(|h| names::io_class_priority(h.class) == names::PRIORITY_REMOVAL);
        let by_class =
            |name: &str| summarize(leaf.iter().copied().filter(|h| h.class_name == name));
        let all = summarize(leaf.iter().copied());
        if all.bytes == 0 {
            return None;
        }
        let vdevs: BTreeSet<u64> = leaf.iter().map(|h| h.vdev).collect();
        let disk_busy = summarize(
            pick(rec, Stage::VdevDisk, None, None)
                .into_iter()
                .filter(|h| crate::zfs::names::io_class_is_write(h.class))
                .filter(|h| names::io_class_priority(h.class) != names::PRIORITY_REMOVAL),
        )
        .total_ns as f64
            / (wall_ns * vdevs.len().max(1) as f64);
        let log_leaves: BTreeSet<(&str, u64)> = rec
            .vdevs
            .iter()
            .filter(|v| v.class == "log")
            .map(|v| (v.pool.as_str(), v.guid))
            .collect();
        let zil_on_log_vdevs = summarize(
            leaf.iter()
                .copied()
                .filter(|h| h.class_name == "sync write")
                .filter(|h| log_leaves.contains(&(h.pool.as_str(), h.vdev))),
        )
        .bytes;
        let copies = summarize(copy_rows).bytes;
        Some(LeafWrites {
            zil_on_log_vdevs,
            copies,
            zil: by_class("sync write"),
            txg: by_class("async write"),
            all,
            vdevs: vdevs.len(),
            disk_busy,
            has_commits: stat(rec, Stage::ZilCommit, None).count > 0,
        })
    }
}

/// The pool's top-level vdevs as the probes saw them (each leaf's
/// `vdev_top`), when the recording placed its leaves: "raidz-0 (8 leaves),
/// file-1 log (1 leaf)".
fn top_vdevs_line(rec: &Recording) -> Option<String> {
    let mut tops: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for v in &rec.vdevs {
        *tops
            .entry((v.top_vdev.as_str(), v.class.as_str()))
            .or_default() += 1;
    }
    if tops.is_empty() {
        return None;
    }
    let names: Vec<String> = tops
        .iter()
        .map(|((top, class), leaves)| {
            let class = if *class == "normal" {
                String::new()
            } else {
                format!(" {class}")
            };
            let plural = if *leaves == 1 { "leaf" } else { "leaves" };
            format!("{top}{class} ({leaves} {plural})")
        })
        .collect();
    Some(format!(
        "top-level vdevs, as the probes saw them: {}",
        names.join(", ")
    ))
}

/// The benchmark's raidz pool as a line of evidence and, when its blocks are
/// four sectors or fewer (mostly parity and padding), the action for that.
fn raidz_layout(rec: &Recording) -> Option<(String, Option<String>)> {
    let bench = rec.benchmark.as_ref()?;
    let pool = bench
        .pools
        .iter()
        .find(|p| p.layout.starts_with("raidz"))
        .filter(|p| p.volblocksize > 0)?;
    let sector = 1u64 << pool.ashift;
    let layout = format!(
        "layout {} ashift {}, volblocksize {}",
        pool.layout,
        pool.ashift,
        format_bytes(pool.volblocksize as f64)
    );
    let small_blocks = (pool.volblocksize <= 4 * sector).then(|| {
        format!(
            "A {} block on {} is only {} sector(s) of data plus parity and padding: use a larger volblocksize (64k or more) or mirrors.",
            format_bytes(pool.volblocksize as f64),
            pool.layout,
            pool.volblocksize / sector
        )
    });
    Some((layout, small_blocks))
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

/// Finding 6: the write throttle and txg sync times. Where the benchmark
/// says when each job ran, only the waits inside the jobs count as the
/// workload's: a read job's layout writes are not its throttle.
pub(super) fn throttle(rec: &Recording, workload_ns: f64, out: &mut Vec<Finding>) {
    let wait = stat(rec, Stage::TxWait, None);
    let synced = stat(rec, Stage::TxgWaitSynced, None);
    let sync = stat(rec, Stage::SpaSync, None);
    if sync.count == 0 && wait.count == 0 {
        return;
    }
    const TXG_TIMEOUT_NS: u64 = 5_000_000_000;
    let phases = throttle_phases(rec);
    let (job_waits, job_ns) = match &phases {
        Some(p) => (
            p.jobs.iter().map(|(_, w)| w.count).sum::<u64>(),
            p.jobs.iter().map(|(_, w)| w.ns).sum::<u64>(),
        ),
        None => (wait.count, wait.total_ns),
    };
    let share = job_ns as f64 / workload_ns;
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
            pct(wait.total_ns as f64 / workload_ns)
        ));
    }
    if let Some(p) = &phases {
        evidence.extend(phase_lines(p));
    }
    let dirty = dirty_lines(rec);
    let dirty_known = !dirty.is_empty();
    evidence.extend(dirty);
    evidence.extend(delay_line(rec));
    let rates = if wait.count > 0 {
        sync_rate_lines(rec)
    } else {
        Vec::new()
    };
    evidence.extend(rates.iter().map(|(line, _)| line.clone()));
    if synced.count > 0 {
        evidence.push(format!(
            "txg_wait_synced: {} call{}, p50 {}",
            synced.count,
            if synced.count == 1 { "" } else { "s" },
            format_ns(synced.p50_ns)
        ));
    }
    let slow = sync.max_ns > TXG_TIMEOUT_NS;
    let title = if job_waits > 0 {
        format!(
            "the write throttle delayed writers ({} of their time)",
            pct(share)
        )
    } else if wait.count > 0 {
        "the write throttle delayed writers only outside the benchmark's jobs (layout writes, warm-up), not the jobs".to_owned()
    } else if slow {
        "txg syncs run longer than the txg timeout: the pool cannot write dirty data as fast as it arrives".to_owned()
    } else {
        "txg syncs keep up; writers were not throttled".to_owned()
    };
    out.push(Finding {
        kind: "throttle".into(),
        pool: String::new(),
        pools: Vec::new(),
        title,
        share,
        confidence: Confidence::High,
        evidence,
        missing: throttle_missing(
            phases.is_none() && wait.count > 0,
            dirty_known,
            rec.tunables.contains_key("zfs_dirty_data_max"),
        )
        .into_iter()
        .chain(delays_missing(rec, wait.count))
        .collect(),
        action: if job_waits > 0 || slow {
            "The disks cannot absorb the write rate: faster vdevs or more of them; zfs_dirty_data_max only moves the point where throttling starts.".into()
        } else {
            "No action needed.".into()
        },
        figures: [
            ("tx_wait_ns".into(), wait.total_ns as f64),
            ("job_tx_wait_ns".into(), job_ns as f64),
            ("spa_sync_max_ns".into(), sync.max_ns as f64),
        ]
        .into_iter()
        .chain(rates.first().map(|(_, took)| ("pool_write_rate_bytes".into(), *took)))
        .collect(),
    });
}

/// Each pool's dirty data per txg, as the txgs kstat counts it (the bytes a
/// txg carried into its sync), where the recording has them.
fn dirty_lines(rec: &Recording) -> Vec<String> {
    let mut per_pool: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    for txg in &rec.txgs {
        if let Some(dirty) = txg.life.dirty_bytes {
            per_pool.entry(txg.pool.as_str()).or_default().push(dirty);
        }
    }
    let limits = DirtyLimits::of(rec);
    per_pool
        .into_iter()
        .map(|(pool, dirty)| {
            let max = dirty.iter().copied().max().unwrap_or(0);
            let mean = dirty.iter().sum::<u64>() as f64 / dirty.len() as f64;
            let against = limits
                .as_ref()
                .map(|l| l.against(max))
                .unwrap_or_default();
            format!(
                "pool {pool}: dirty data per txg at its sync, max {}{against}, mean {} over {} txgs (zprof report --txgs lists them)",
                crate::units::format_bytes(max as f64),
                crate::units::format_bytes(mean),
                dirty.len()
            )
        })
        .collect()
}

/// The rate arithmetic of a throttled pool: the rate its syncs retired
/// dirty data at (dirty bytes over spa_sync time), what the workload's bytes
/// became as dirty data, and so the rate the pool took the workload's
/// writes at (its bytes over the syncs' time) beside the rate it got. Per
/// writing job where the benchmark says when each ran (the syncs begun in
/// its window), else over the recording. Needs the txgs' dirty bytes.
fn sync_rate_lines(rec: &Recording) -> Vec<(String, f64)> {
    let jobs = crate::analyze::phases::job_windows(rec).unwrap_or_default();
    let bench_jobs = rec
        .benchmark
        .as_ref()
        .map(|b| b.jobs.as_slice())
        .unwrap_or_default();
    let mut lines = Vec::new();
    for (name, window) in &jobs {
        let Some(write) = bench_jobs
            .iter()
            .find(|j| &j.name == name)
            .and_then(|j| j.write.as_ref())
        else {
            continue;
        };
        let span = window[1] - window[0];
        let offered = Offered {
            bytes: write.bytes as f64,
            got: write.bw_bytes,
            span_s: span,
        };
        let in_window = |t: &&crate::recording::TxgRecord| {
            let at = t.start_offset_ns as f64 / 1e9;
            at >= window[0] && at < window[1]
        };
        lines.extend(rate_line(rec, in_window, &offered, &format!("job {name}")));
    }
    if jobs.is_empty() {
        let bytes = stat(rec, Stage::WorkloadWrite, None).bytes as f64;
        let offered = Offered {
            bytes,
            got: bytes / rec.duration_s,
            span_s: rec.duration_s,
        };
        lines.extend(rate_line(rec, |_| true, &offered, "the workload"));
    }
    lines
}

/// What a job wrote, the rate it got and over how long.
struct Offered {
    bytes: f64,
    got: f64,
    span_s: f64,
}

/// The arithmetic over the txgs `keep` accepts; the line and the rate the
/// pool took the writes at.
fn rate_line(
    rec: &Recording,
    keep: impl Fn(&&crate::recording::TxgRecord) -> bool,
    offered: &Offered,
    who: &str,
) -> Option<(String, f64)> {
    let (mut dirty, mut sync_ns) = (0f64, 0f64);
    for txg in rec.txgs.iter().filter(|t| t.sync.is_some()).filter(keep) {
        if let Some(bytes) = txg.life.dirty_bytes {
            dirty += bytes as f64;
            sync_ns += txg.duration_ns as f64;
        }
    }
    if dirty == 0.0 || sync_ns == 0.0 || offered.bytes == 0.0 {
        return None;
    }
    let sync_s = sync_ns / 1e9;
    let took = offered.bytes / sync_s;
    let busy = sync_s / offered.span_s;
    let verdict = if busy >= 0.8 {
        "the syncs ran back to back: the disks, not the throttle, set the rate"
    } else {
        "the syncs left the pool idle between txgs: writers were held back while the disks had room"
    };
    let line = format!(
        "{who}: its syncs retired {} of dirty data at {}/s ({} of its time syncing); its {} written became {:.1}x as much dirty data (whole blocks for partial writes, parity, padding, metadata), so the pool took its writes at {}/s and it got {}/s: {verdict}",
        format_bytes(dirty),
        format_bytes(dirty / sync_s),
        pct(busy),
        format_bytes(offered.bytes),
        dirty / offered.bytes,
        format_bytes(took),
        format_bytes(offered.got),
    );
    Some((line, took))
}

/// Why each delay's dirty level and computed time are absent where writers
/// waited: libzpool compiles dmu_tx_delay's probe to nothing.
fn delays_missing(rec: &Recording, waits: u64) -> Option<String> {
    let libzpool = rec.target.kind == crate::zfs::target::TargetKind::Libzpool;
    (waits > 0 && libzpool && stat(rec, Stage::ThrottleDelay, None).count == 0).then(|| {
        "each delay's dirty level and computed time (kernel only: libzpool compiles dmu_tx_delay's probe function to nothing, and dmu_tx_delay is static)".to_owned()
    })
}

/// The delays the throttle computed (kernel: each delayed transaction's
/// dirty level and delay), set against zfs_dirty_data_max where it was read.
fn delay_line(rec: &Recording) -> Option<String> {
    let delays = stat(rec, Stage::ThrottleDelay, None);
    if delays.count == 0 {
        return None;
    }
    let dirty_rows = pick(rec, Stage::ThrottleDirty, None, None);
    // The lowest level's bucket, both edges: its low edge alone would read
    // as a delay below the threshold.
    let lowest = dirty_rows
        .iter()
        .filter_map(|h| h.buckets.first())
        .map(|[index, _]| *index as usize)
        .min()
        .unwrap_or(0);
    let (low, high) = (
        zprof_common::hist_bucket_low(lowest),
        zprof_common::hist_bucket_high(lowest),
    );
    let dirty = summarize(dirty_rows);
    let limits = DirtyLimits::of(rec).filter(|l| l.max > 0.0);
    let percent = |bytes: u64| limits.as_ref().map(|l| l.percent(bytes));
    let lowest_share = match (percent(low), percent(high)) {
        (Some(from), Some(to)) => format!(" ({from:.0}-{to:.0}% of zfs_dirty_data_max)"),
        _ => String::new(),
    };
    let p50_share = percent(dirty.p50_ns)
        .map(|p| format!(" ({p:.0}%)"))
        .unwrap_or_default();
    Some(format!(
        "dmu_tx_delay delayed {} transactions by {} each at p50 ({} at p99, {} in all); the pool's dirty data when delayed: lowest between {} and {}{lowest_share}, p50 {}{p50_share}",
        format_count(delays.count as f64),
        format_ns(delays.p50_ns),
        format_ns(delays.p99_ns),
        format_ns(delays.total_ns),
        format_bytes(low as f64),
        format_bytes(high as f64),
        format_bytes(dirty.p50_ns as f64),
    ))
}

/// The write throttle's thresholds, from the tunables the recording read
/// (a percentage it could not read is OpenZFS's default, and says so).
struct DirtyLimits {
    max: f64,
    /// (tunable, its percentage, whether it was read).
    percents: Vec<(&'static str, f64, bool)>,
}

impl DirtyLimits {
    fn of(rec: &Recording) -> Option<DirtyLimits> {
        let max = *rec.tunables.get("zfs_dirty_data_max")?;
        let percents = crate::zfs::tunables::DEFAULT_PERCENTS
            .iter()
            .map(|(name, default)| match rec.tunables.get(*name) {
                Some(read) => (*name, *read, true),
                None => (*name, *default as f64, false),
            })
            .collect();
        Some(DirtyLimits { max, percents })
    }

    /// `bytes` as a percentage of zfs_dirty_data_max.
    fn percent(&self, bytes: u64) -> f64 {
        100.0 * bytes as f64 / self.max.max(1.0)
    }

    /// "(43% of zfs_dirty_data_max 64 MiB; ...)" for `dirty` bytes.
    fn against(&self, dirty: u64) -> String {
        let thresholds: Vec<String> = self
            .percents
            .iter()
            .map(|(name, percent, read)| {
                format!(
                    "{name} {percent:.0}%{} = {}",
                    if *read { "" } else { " (default, not read)" },
                    crate::units::format_bytes(self.max * percent / 100.0)
                )
            })
            .collect();
        format!(
            " ({:.0}% of zfs_dirty_data_max {}; {})",
            self.percent(dirty),
            crate::units::format_bytes(self.max),
            thresholds.join(", ")
        )
    }
}

fn throttle_missing(phases_unknown: bool, dirty_known: bool, limits_known: bool) -> Vec<String> {
    let mut missing = Vec::new();
    if !dirty_known {
        missing.push("dirty data amounts are not traced (a recording made before zprof read txg histories, or offsets without txg_stat_t.ndirty)".to_owned());
    } else if !limits_known {
        missing.push("zfs_dirty_data_max was not read, so the dirty data is not set against the throttle's thresholds (zfs_delay_min_dirty_percent, zfs_dirty_data_sync_percent)".to_owned());
    }
    if phases_unknown {
        missing.push("which phase the waits fell in (a job's layout writes, or the job): the benchmark did not say when its jobs ran (zprof run reads it from zprof-lab's JSON, and from fio's where it prints job_start)".into());
    }
    missing
}

/// The throttle's waits per phase, as evidence lines: each job's, those
/// outside the jobs, and those in seconds across a job's start or end.
fn phase_lines(phases: &ThrottlePhases) -> Vec<String> {
    let waits = |w: &Waits| {
        format!(
            "{} waits, {}",
            format_count(w.count as f64),
            format_ns(w.ns)
        )
    };
    let mut lines: Vec<String> = phases
        .jobs
        .iter()
        .map(|(name, w)| format!("during job {name}: {}", waits(w)))
        .collect();
    if phases.outside.count > 0 {
        lines.push(format!(
            "outside the jobs (layout writes, warm-up, between jobs): {}; not the workload's",
            waits(&phases.outside)
        ));
    }
    if phases.boundary.count > 0 {
        lines.push(format!(
            "in seconds across a job's start or end: {}; the timeline's seconds cannot tell which side, so not counted as a job's",
            waits(&phases.boundary)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 6.17-2.4.4 guest's two pools recorded at once (tests/data/README.md):
    /// each pool gets its own dirty line, from its own txgs.
    #[test]
    fn dirty_data_is_told_per_pool_from_its_txgs() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.4.4-two-pools.json"
        ));
        let rec = Recording::parse(text, "guest two pools").unwrap();
        let lines = dirty_lines(&rec);
        for pool in ["tpa", "tpb"] {
            let txgs = rec
                .txgs
                .iter()
                .filter(|t| t.pool == pool && t.life.dirty_bytes.is_some())
                .count();
            let line = lines
                .iter()
                .find(|l| l.starts_with(&format!("pool {pool}: ")))
                .unwrap_or_else(|| panic!("no line for {pool}: {lines:?}"));
            assert!(line.contains(&format!("over {txgs} txgs")), "{line}");
        }
        let missing = throttle_missing(false, true, false);
        assert!(missing[0].starts_with("zfs_dirty_data_max was not read"));
        assert!(throttle_missing(false, true, true).is_empty());
    }

    /// A lab job throttled under a 32 MiB dirty limit (tests/data/README.md):
    /// the dirty data is set against the limit and the throttle's thresholds
    /// read from the lab process.
    #[test]
    fn dirty_data_is_set_against_the_limits_read() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/lab-2.1.11-throttled-phases.json"
        ));
        let rec = Recording::parse(text, "throttled").unwrap();
        assert_eq!(rec.tunables["zfs_dirty_data_max"], 32.0 * 1024.0 * 1024.0);
        let lines = dirty_lines(&rec);
        assert!(
            lines[0].contains("of zfs_dirty_data_max 32.0 MiB; zfs_delay_min_dirty_percent 60% = 19.2 MiB, zfs_dirty_data_sync_percent 20% = 6.4 MiB)"),
            "{lines:?}"
        );
    }

    /// The 6.17-2.4.4 guest's throttle run (tests/data/README.md): each
    /// delay the throttle computed, with the dirty level it came at, the
    /// lowest level given as its bucket's two edges (above the 60% = 19.2
    /// MiB threshold where ZFS delays from, which the low edge alone is not).
    #[test]
    fn the_kernels_delays_are_stated_with_their_dirty_levels() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.4.4-throttle.json"
        ));
        let rec = Recording::parse(text, "guest throttle").unwrap();
        let line = delay_line(&rec).expect("a delay line");
        assert!(
            line.starts_with("dmu_tx_delay delayed 465 transactions"),
            "{line}"
        );
        assert!(
            line.contains("lowest between 18.0 MiB and 20.0 MiB (56-62% of zfs_dirty_data_max)"),
            "{line}"
        );
        assert_eq!(delays_missing(&rec, 1), None, "the kernel has them");
    }
}
