//! What the workload's waits for txg sync waited for: a `zfs recv` spends
//! almost all of its wall time in txg_wait_synced while the sync compresses
//! and writes its data on ZFS's own threads, so its wait, drawn as one
//! frame, hides whether compression or the disks took the time (under
//! zstd-19 in the guest: a 2.67 s wait, 2.53 s of zstd in a 2.61 s
//! write-out, the busiest disk 165 ms).
//!
//! Each pool's waits (txg_wait_synced outside zil_commit) are split in the
//! proportions of that pool's syncs: by phase, and the write-out further by
//! the work it waited on, compression's and checksums' CPU time and the
//! busiest leaf's I/O time, each in proportion to its time over the
//! three's. A proportion, not a trace of each wait: the parts of a
//! write-out run in parallel on several threads, and which one held up the
//! sync at each moment is not recorded.

use std::collections::BTreeMap;

use zprof_common::{Stage, TXG_WAIT_IN_ZIL_COMMIT};

use crate::recording::{Recording, pick, pools::pool_names, summarize};

/// A share of the workload's waits: what took it (frames, outermost
/// first) and its time, ns.
pub type Cause = (Vec<String>, u64);

/// The causes of every pool's txg-sync waits.
pub fn txg_wait_causes(rec: &Recording) -> Vec<Cause> {
    pool_names(rec)
        .iter()
        .flat_map(|pool| pool_causes(rec, pool))
        .collect()
}

fn stage_total(rec: &Recording, stage: Stage, pool: &str) -> u64 {
    summarize(pick(rec, stage, Some(pool), None)).total_ns
}

/// One pool's waits split by its syncs' phases (all of it "txg sync" where
/// the syncs were not timed).
fn pool_causes(rec: &Recording, pool: &str) -> Vec<Cause> {
    let waited = summarize(
        pick(rec, Stage::TxgWaitSynced, Some(pool), None)
            .into_iter()
            .filter(|h| h.class != TXG_WAIT_IN_ZIL_COMMIT),
    )
    .total_ns;
    if waited == 0 {
        return Vec::new();
    }
    let synced = stage_total(rec, Stage::SpaSync, pool);
    if synced == 0 {
        return vec![(vec!["txg sync (not timed)".to_owned()], waited)];
    }
    let share = |ns: u64| (waited as f64 * ns as f64 / synced as f64).round() as u64;
    let mut causes = Vec::new();
    let mut phases_ns = 0;
    for phase in pick(rec, Stage::SyncPhase, Some(pool), None) {
        phases_ns = phase.total_ns.saturating_add(phases_ns);
        if phase.class_name == "write_out" {
            causes.extend(write_out_causes(rec, pool, share(phase.total_ns)));
        } else {
            causes.push((
                vec![format!("txg sync: {}", phase.class_name)],
                share(phase.total_ns),
            ));
        }
    }
    let rest = synced.saturating_sub(phases_ns);
    causes.push((vec!["txg sync: spa_sync's own".to_owned()], share(rest)));
    merge(causes)
}

/// `ns` of waiting on write-outs split between compression (per setting),
/// checksums and the busiest disk, by their times on the pool.
fn write_out_causes(rec: &Recording, pool: &str, ns: u64) -> Vec<Cause> {
    let mut parts: Vec<Cause> = pick(rec, Stage::Compress, Some(pool), None)
        .into_iter()
        .map(|h| {
            (
                vec!["compression".to_owned(), h.class_name.clone()],
                h.total_ns,
            )
        })
        .collect();
    parts.extend(
        pick(rec, Stage::ChecksumCompute, Some(pool), None)
            .into_iter()
            .map(|h| {
                (
                    vec!["checksums".to_owned(), h.class_name.clone()],
                    h.total_ns,
                )
            }),
    );
    parts.push((
        vec!["disk I/O".to_owned(), "the busiest disk".to_owned()],
        busiest_leaf_ns(rec, Some(pool)),
    ));
    let all = parts
        .iter()
        .fold(0u64, |all, (_, t)| all.saturating_add(*t));
    if all == 0 {
        return vec![(vec!["txg sync: write_out".to_owned()], ns)];
    }
    parts
        .into_iter()
        .map(|(frames, t)| (frames, (ns as f64 * t as f64 / all as f64).round() as u64))
        .collect()
}

/// The I/O time of the busiest leaf of `pool` (of any pool: None).
pub fn busiest_leaf_ns(rec: &Recording, pool: Option<&str>) -> u64 {
    let mut leaves = BTreeMap::<(&str, u64), u64>::new();
    for h in pick(rec, Stage::VdevTotal, pool, None) {
        let leaf = leaves.entry((h.pool.as_str(), h.vdev)).or_default();
        *leaf = leaf.saturating_add(h.total_ns);
    }
    leaves.into_values().max().unwrap_or(0)
}

/// Causes with the same frames summed (rows per class and vdev repeat them).
fn merge(causes: Vec<Cause>) -> Vec<Cause> {
    let mut merged = BTreeMap::<Vec<String>, u64>::new();
    for (frames, ns) in causes {
        let sum = merged.entry(frames).or_default();
        *sum = sum.saturating_add(ns);
    }
    merged.into_iter().filter(|(_, ns)| *ns > 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(file: &str) -> Recording {
        let path = format!("{}/../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        Recording::parse(&std::fs::read_to_string(&path).unwrap(), file).unwrap()
    }

    fn widest(causes: &[Cause]) -> (String, f64) {
        let all: u64 = causes.iter().map(|(_, ns)| ns).sum();
        let mut roots = BTreeMap::<&str, u64>::new();
        for (frames, ns) in causes {
            *roots.entry(frames[0].as_str()).or_default() += ns;
        }
        let (root, ns) = roots.into_iter().max_by_key(|(_, ns)| *ns).unwrap();
        (root.to_owned(), ns as f64 / all as f64)
    }

    /// zfs recv of one stream on the guest's zfs.ko (tests/data/README.md):
    /// under zstd-19 compression took the waits, with compression off the
    /// disks did; either way the parts add up to the waits.
    #[test]
    fn a_receives_wait_for_its_syncs_is_split_by_what_the_syncs_did() {
        for (file, root) in [
            ("guest-2.4.4-recv-zstd-19.json", "compression"),
            ("guest-2.4.4-recv-off.json", "disk I/O"),
        ] {
            let rec = recording(file);
            let causes = txg_wait_causes(&rec);
            let waited = summarize(pick(&rec, Stage::TxgWaitSynced, None, None)).total_ns;
            let split: u64 = causes.iter().map(|(_, ns)| ns).sum();
            assert!(
                split.abs_diff(waited) <= causes.len() as u64,
                "{file}: {split} of {waited}"
            );
            let (widest, share) = widest(&causes);
            assert_eq!(widest, root, "{file}: {causes:?}");
            assert!(share > 0.5, "{file}: {share}");
        }
    }
}
