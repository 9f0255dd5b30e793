//! Where a pool's txg syncs spend their time, phase by phase (writing out
//! the dirty data, the later passes, frees, dedup, block cloning, scan,
//! device removal, metaslabs, the labels, the cleanup after the uberblock),
//! and what to change for the phase that dominates. Per pool: the families
//! run on each pool's part of the recording.

use zprof_common::{Stage, sync_phase};

use super::{Confidence, Finding};
use crate::{
    recording::{Recording, SyncSplit, TxgRecord, pick, summarize},
    units::{format_bytes, format_ns, pct},
};

/// Syncs worth a finding: the pool synced this share of the recording, or
/// one sync took this long (zfs_txg_timeout's default is 5 s).
const BUSY_SHARE: f64 = 0.2;
const SLOW_SYNC_NS: u64 = 1_000_000_000;

/// The phase the time went to, as a finding's words: what it is, and what
/// to change where it dominates.
fn phase_words(phase: &str) -> (&'static str, &'static str) {
    match phase {
        "write_out" => (
            "writing out the txg's dirty data",
            "The disks set the pace of the sync: more or faster vdevs; for streaming writes a larger recordsize (fewer, larger blocks); zfs_dirty_data_max only moves where writers get throttled.",
        ),
        "later_passes" => (
            "sync passes after the first (metadata the first pass dirtied)",
            "Many small blocks or datasets dirty metadata that takes more passes: larger blocks, fewer datasets written at once, or a special vdev for metadata.",
        ),
        "frees" => (
            "freeing blocks (deleted files, destroyed snapshots)",
            "Frees of a large delete or destroy: they end when it does; zfs_async_block_max_blocks spreads them over more txgs.",
        ),
        "dedup" => (
            "updating the dedup table",
            "Dedup's table writes: dedup off where the ratio does not pay, a dedup vdev, or fast dedup (2.3 and later).",
        ),
        "clones" => (
            "updating the block-cloning table",
            "Block cloning's table updates (copies made with clone): they end with the copying.",
        ),
        "scan" => (
            "scrub, resilver or async destroy work",
            "A scrub or resilver shares the syncs: run scrubs off-peak, or lower zfs_scan_vdev_limit.",
        ),
        "removal" => (
            "copying a removed device's data",
            "A device removal is copying: it ends when the copy does.",
        ),
        "metaslabs" => (
            "metaslab space maps (metaslab_sync, log space map flushes)",
            "Space map work grows with fragmentation and fullness: free space, or a special vdev for metadata.",
        ),
        "labels" => (
            "writing the uberblock and labels, with their cache flushes",
            "The label writes end in cache flushes, which wait for all the disks hold in their write caches: on disks with write caches this is the txg's data reaching the media, so the disks set the pace (more or faster vdevs); a device whose flush alone is slow holds up every txg.",
        ),
        "done" => (
            "the cleanup after the uberblock (the ZIL's, the dirty accounting)",
            "No action: cleanup after each sync.",
        ),
        _ => (
            "spa_sync's own work between the traced phases",
            "Time outside the traced phases (spa_sync's wait for the previous txg's frees, its configuration work): a flame graph (zprof flamegraph --kind cpu) shows which.",
        ),
    }
}

/// Share of the syncs' time spent waiting for their own reads from which
/// the action names the reads first.
const READ_WAIT_SHARE: f64 = 0.10;

/// Finding: the pool's syncs, phase by phase.
pub(super) fn txg_sync(rec: &Recording, wall_ns: f64, out: &mut Vec<Finding>) {
    let split: Vec<(&TxgRecord, &SyncSplit)> = rec
        .txgs
        .iter()
        .filter_map(|t| t.sync.as_ref().map(|s| (t, s)))
        .collect();
    let Some(slowest) = split.iter().max_by_key(|(t, _)| t.duration_ns) else {
        return;
    };
    let sync_ns: u64 = split.iter().map(|(t, _)| t.duration_ns).sum();
    let share = sync_ns as f64 / wall_ns;
    if share < BUSY_SHARE && slowest.0.duration_ns < SLOW_SYNC_NS {
        return;
    }
    let totals = phase_totals(&split);
    let (dominant, dominant_ns) = totals
        .iter()
        .max_by_key(|(_, ns)| *ns)
        .cloned()
        .unwrap_or_default();
    let (what, action) = phase_words(&dominant);
    let mut evidence = vec![format!(
        "{} txgs synced whole in {} ({} of the recording); slowest txg {}: {}, {} of it {}",
        split.len(),
        format_ns(sync_ns),
        pct(share),
        slowest.0.txg,
        format_ns(slowest.0.duration_ns),
        pct(slowest_share(slowest, &dominant)),
        what
    )];
    evidence.push(format!(
        "across the syncs: {}",
        phase_list(&totals, sync_ns)
    ));
    evidence.extend(write_rate(&split));
    evidence.extend(sync_reads(&split));
    let read_wait_ns: Option<u64> = split.iter().map(|(_, s)| s.read_wait_ns).sum();
    let reads: u64 = split.iter().map(|(_, s)| s.reads).sum();
    let waits_matter = read_wait_ns.is_some_and(|ns| ns as f64 >= READ_WAIT_SHARE * sync_ns as f64);
    let paced_by_compression = (dominant == "write_out")
        .then(|| compression_pace(rec, dominant_ns))
        .flatten();
    let action = match paced_by_compression {
        Some((words, setting)) => {
            evidence.push(words);
            format!(
                "Compression ({setting}), not the disks, set the pace of the sync: a lighter setting (a lower zstd level, zstd-fast or lz4 often compress nearly as well for a fraction of the CPU: run both and set them side by side with zprof compare) or more CPUs for ZFS's write threads."
            )
        }
        None => action.to_owned(),
    };
    let action = if waits_matter {
        format!(
            "The syncs waited on their own reads of metadata not in the ARC: a special vdev for metadata makes them fast, a larger ARC (zfs_arc_max) keeps them cached. {action}"
        )
    } else {
        action
    };
    out.push(Finding {
        kind: "txg_sync_phases".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: format!(
            "txg syncs spend {} of their time {what}",
            pct(dominant_ns as f64 / sync_ns.max(1) as f64)
        ),
        share,
        confidence: Confidence::High,
        evidence,
        missing: missing(&split),
        action,
        figures: totals
            .iter()
            .map(|(name, ns)| (format!("sync_{name}_ns"), *ns as f64))
            .chain([
                ("sync_ns".to_owned(), sync_ns as f64),
                ("sync_reads".to_owned(), reads as f64),
            ])
            .chain(read_wait_ns.map(|ns| ("sync_read_wait_ns".to_owned(), ns as f64)))
            .collect(),
    });
}

/// Where compression's CPU time on the pool was at least half the syncs'
/// write-out time and more than the busiest leaf's I/O time: the write-out
/// waited on compression, not on the disks (a zfs recv into zstd-19 in the
/// guest: 2.53 s of zstd for a 2.61 s write-out, the busiest disk 165 ms).
/// The evidence, and the setting that took the most time.
fn compression_pace(rec: &Recording, write_out_ns: u64) -> Option<(String, String)> {
    let rows = pick(rec, Stage::Compress, None, None);
    let compress = summarize(rows.iter().copied());
    let heaviest = rows.iter().max_by_key(|h| h.total_ns)?;
    let busiest_leaf = crate::analyze::waited_for::busiest_leaf_ns(rec, None);
    let paced =
        compress.total_ns as f64 >= 0.5 * write_out_ns as f64 && compress.total_ns > busiest_leaf;
    paced.then(|| {
        let words = format!(
            "compression took {} of CPU on the pool's blocks ({} of it {} on {}, {}), against {} of write-out; the busiest disk's I/O took {}",
            format_ns(compress.total_ns),
            format_ns(heaviest.total_ns),
            heaviest.class_name,
            format_bytes(heaviest.bytes as f64),
            ratio_words(heaviest.bytes, heaviest.bytes_out),
            format_ns(write_out_ns),
            format_ns(busiest_leaf)
        );
        (words, heaviest.class_name.clone())
    })
}

/// "2.48x smaller", or "not smaller" where the compressed size is unknown
/// or no smaller.
fn ratio_words(bytes: u64, bytes_out: u64) -> String {
    if bytes_out > 0 && bytes_out < bytes {
        format!("{:.2}x smaller", bytes as f64 / bytes_out as f64)
    } else {
        "not smaller".to_owned()
    }
}

/// Time per phase over the syncs, and the rest ("other"), largest first.
fn phase_totals(split: &[(&TxgRecord, &SyncSplit)]) -> Vec<(String, u64)> {
    let mut totals: Vec<(String, u64)> = sync_phase::NAMES
        .iter()
        .map(|name| {
            let ns = split
                .iter()
                .filter_map(|(_, s)| s.phases_ns.get(*name))
                .sum();
            ((*name).to_owned(), ns)
        })
        .collect();
    let other = split
        .iter()
        .map(|(t, s)| t.duration_ns.saturating_sub(s.phases_total_ns()))
        .sum();
    totals.push(("other".to_owned(), other));
    totals.sort_by_key(|(_, ns)| std::cmp::Reverse(*ns));
    totals
}

fn slowest_share((txg, split): &(&TxgRecord, &SyncSplit), phase: &str) -> f64 {
    let ns = match split.phases_ns.get(phase) {
        Some(ns) => *ns,
        None => txg.duration_ns.saturating_sub(split.phases_total_ns()),
    };
    ns as f64 / txg.duration_ns.max(1) as f64
}

/// "write_out 1.2s (80%), metaslabs ..." for the phases that took time.
fn phase_list(totals: &[(String, u64)], sync_ns: u64) -> String {
    totals
        .iter()
        .filter(|(_, ns)| *ns > 0)
        .map(|(name, ns)| {
            format!(
                "{name} {} ({})",
                format_ns(*ns),
                pct(*ns as f64 / sync_ns.max(1) as f64)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rate the pool synced its dirty data at, where the dirty bytes are
/// known: the txgs' dirty bytes over their whole syncs (the rate the pool
/// can take writes at), and over their write-out phase alone (which ends
/// when the writes are in the disks' write caches, where they have them);
/// with what the syncs wrote to the disks (nwritten: parity and metadata
/// included) where the recording has it.
fn write_rate(split: &[(&TxgRecord, &SyncSplit)]) -> Option<String> {
    let (mut bytes, mut written, mut sync_ns, mut write_ns) = (0u64, 0u64, 0u64, 0u64);
    for (txg, sync) in split {
        let (Some(dirty), Some(write)) = (txg.life.dirty_bytes, sync.phases_ns.get("write_out"))
        else {
            continue;
        };
        bytes = bytes.saturating_add(dirty);
        written = written.saturating_add(txg.life.written_bytes.unwrap_or(0));
        sync_ns = sync_ns.saturating_add(txg.duration_ns);
        write_ns = write_ns.saturating_add(*write);
    }
    let rate = |amount: u64, ns: u64| format_bytes(amount as f64 / (ns as f64 / 1e9));
    let disks = if written > 0 {
        format!(
            "; the disks took {} from them at {}/s",
            format_bytes(written as f64),
            rate(written, sync_ns)
        )
    } else {
        String::new()
    };
    (write_ns > 0 && bytes > 0).then(|| {
        format!(
            "the syncs wrote {} of dirty data at {}/s (their write-out phases alone at {}/s){disks}",
            format_bytes(bytes as f64),
            rate(bytes, sync_ns),
            rate(bytes, write_ns)
        )
    })
}

/// The blocks the sync thread read itself, and its waits for them where
/// zio_wait was probed.
fn sync_reads(split: &[(&TxgRecord, &SyncSplit)]) -> Option<String> {
    let reads: u64 = split.iter().map(|(_, s)| s.reads).sum();
    let bytes: u64 = split.iter().map(|(_, s)| s.read_bytes).sum();
    let txgs = split.iter().filter(|(_, s)| s.reads > 0).count();
    let waited = split
        .iter()
        .map(|(_, s)| s.read_wait_ns)
        .sum::<Option<u64>>();
    let sync_ns: u64 = split.iter().map(|(t, _)| t.duration_ns).sum();
    let wait = match waited {
        Some(ns) => format!(
            "; it waited {} for them ({:.1}% of the syncs' time)",
            format_ns(ns),
            100.0 * ns as f64 / sync_ns.max(1) as f64
        ),
        None => {
            "; its waits for them are not timed (zio_wait is probed on uprobes with --full-timing)"
                .to_owned()
        }
    };
    (reads > 0).then(|| {
        format!(
            "the sync thread read {reads} blocks ({}) itself, in {txgs} txgs: metadata not in the ARC (indirect blocks, space maps, the dedup table){wait}",
            format_bytes(bytes as f64)
        )
    })
}

fn missing(split: &[(&TxgRecord, &SyncSplit)]) -> Vec<String> {
    let unmeasured: Vec<&str> = sync_phase::NAMES
        .iter()
        .copied()
        .filter(|name| split.iter().all(|(_, s)| !s.phases_ns.contains_key(*name)))
        .collect();
    let mut missing = Vec::new();
    if split.iter().all(|(t, _)| t.life.written_bytes.is_none()) {
        missing.push("the bytes each sync wrote (the txgs kstat's nwritten: offsets without txg_stat_t's vdev stats, or the kstat off): the write rate is the dirty bytes over the sync time".to_owned());
    }
    if !unmeasured.is_empty() {
        missing.push(format!(
            "phases not measured on this build (their functions could not be attached): {}",
            unmeasured.join(", ")
        ));
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::findings::{ExplainOptions, explain};

    fn recording(file: &str) -> Recording {
        let path = format!("{}/../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        Recording::parse(&std::fs::read_to_string(&path).unwrap(), file).unwrap()
    }

    /// zfs recv of one stream into zstd-19 and into compression=off on the
    /// guest's zfs.ko (tests/data/README.md): both syncs are mostly their
    /// write-out, but zstd-19's waited on compression, which the finding
    /// names in place of the disks; off's on the disks.
    #[test]
    fn a_write_out_that_waited_on_compression_names_compression_not_the_disks() {
        let action = |file: &str| {
            let findings = explain(&recording(file), &ExplainOptions::default());
            let found = findings
                .into_iter()
                .find(|f| f.kind == "txg_sync_phases")
                .expect("a sync finding");
            assert!(found.title.contains("writing out"), "{found:#?}");
            (found.action, found.evidence)
        };
        let (zstd, evidence) = action("guest-2.4.4-recv-zstd-19.json");
        assert!(zstd.starts_with("Compression (zstd-19)"), "{zstd}");
        assert!(
            evidence
                .iter()
                .any(|e| e.contains("zstd-19 on 16.0 MiB, 2.48x smaller")),
            "{evidence:#?}"
        );
        let (off, _) = action("guest-2.4.4-recv-off.json");
        assert!(off.starts_with("The disks set the pace"), "{off}");
    }

    /// A 4k random-write job throttled on a raidz1 of emulated HDDs with a
    /// 32 MiB dirty limit (tests/data/README.md): the syncs took most of the
    /// recording, and their largest phase is the labels' cache flushes,
    /// which wait for the disks' write caches to drain.
    #[test]
    fn a_throttled_pools_syncs_are_split_and_the_largest_phase_named() {
        let rec = recording("lab-2.1.11-throttled-phases.json");
        let findings = explain(&rec, &ExplainOptions::default());
        let found = findings
            .iter()
            .find(|f| f.kind == "txg_sync_phases")
            .expect("a sync finding");
        assert!(found.pool.starts_with("zlab-"), "{found:#?}");
        assert!(found.title.contains("uberblock and labels"), "{found:#?}");
        let figure = |name: &str| found.figures.iter().find(|(n, _)| n == name).unwrap().1;
        let phases: f64 = sync_phase::NAMES
            .iter()
            .map(|n| figure(&format!("sync_{n}_ns")))
            .sum::<f64>()
            + figure("sync_other_ns");
        assert_eq!(
            phases,
            figure("sync_ns"),
            "phases and other add up to the syncs"
        );
        let sync_ns: u64 = rec.txgs.iter().map(|t| t.duration_ns).sum();
        assert_eq!(figure("sync_ns"), sync_ns as f64, "every txg was split");
        assert!(
            found
                .evidence
                .iter()
                .any(|e| e.starts_with("the syncs wrote")),
            "{found:#?}"
        );
    }

    /// A dedup pool whose table outgrew a 64 MiB ARC (tests/data/README.md):
    /// the sync thread's waits for its own reads are the sum of the txgs',
    /// in words and as a figure; the throttled run, without zio_wait probed,
    /// says they are not timed.
    #[test]
    fn the_syncs_waits_for_their_reads_are_given_where_timed() {
        let rec = recording("lab-2.1.11-sync-reads.json");
        let findings = explain(&rec, &ExplainOptions::default());
        let found = findings
            .iter()
            .find(|f| f.kind == "txg_sync_phases")
            .expect("a sync finding");
        let waited: u64 = rec
            .txgs
            .iter()
            .filter_map(|t| t.sync.as_ref()?.read_wait_ns)
            .sum();
        assert!(waited > 0);
        let figure = |name: &str| found.figures.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(figure("sync_read_wait_ns"), waited as f64);
        let line = found
            .evidence
            .iter()
            .find(|e| e.starts_with("the sync thread read"))
            .expect("a reads line");
        assert!(
            line.contains(&format!("it waited {}", format_ns(waited))),
            "{line}"
        );

        let untimed = recording("lab-2.1.11-throttled-phases.json");
        let phases = untimed.txgs.iter().filter_map(|t| t.sync.as_ref());
        assert!(phases.clone().all(|s| s.read_wait_ns.is_none()));
    }

    /// A recording made before syncs were split has no such finding.
    #[test]
    fn no_finding_without_split_syncs() {
        let rec = recording("guest-2.4.4-two-pools.json");
        let findings = explain(&rec, &ExplainOptions::default());
        assert!(findings.iter().all(|f| f.kind != "txg_sync_phases"));
    }
}
