//! The allocation classes finding: a special (or dedup) class that filled.
//! ZFS asks the special class for metadata and small blocks (the dedup
//! class for the dedup table); when it has no room, metaslab_alloc returns
//! ENOSPC and the block goes to the normal class, on the data disks, with
//! nothing said: `zpool list -v` shows the class full, not what it turned
//! away. Each such allocation is a Stage::AllocClass row with the FULL bit.

use zprof_common::{Stage, alloc_class};

use super::{Confidence, Finding, pct};
use crate::{
    recording::{Recording, pick},
    units::{format_bytes, format_count},
};

/// A class's allocations: those it took and those that found it full.
#[derive(Default)]
struct Asked {
    taken: u64,
    taken_bytes: u64,
    turned_away: u64,
    turned_away_bytes: u64,
}

/// Finding: a class that turned allocations away, per class the pool has.
pub(super) fn class_full(rec: &Recording, out: &mut Vec<Finding>) {
    for (bit, name, goes) in [
        (alloc_class::SPECIAL, "special", "metadata and small blocks"),
        (alloc_class::DEDUP, "dedup", "dedup table blocks"),
    ] {
        let asked = pick(rec, Stage::AllocClass, None, None)
            .into_iter()
            .filter(|h| h.class & (alloc_class::SPECIAL | alloc_class::DEDUP) == bit)
            .fold(Asked::default(), |mut a, h| {
                if h.class & alloc_class::FULL != 0 {
                    a.turned_away += h.count;
                    a.turned_away_bytes += h.bytes;
                } else {
                    a.taken += h.count;
                    a.taken_bytes += h.bytes;
                }
                a
            });
        if asked.turned_away > 0 {
            out.push(finding(name, goes, &asked));
        }
    }
}

fn finding(class: &str, goes: &str, asked: &Asked) -> Finding {
    let all = asked.taken + asked.turned_away;
    let share = asked.turned_away as f64 / all.max(1) as f64;
    Finding {
        kind: "class_full".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: format!(
            "the {class} class is full: {} of the blocks meant for it went to the normal class",
            pct(share)
        ),
        share,
        confidence: Confidence::High,
        evidence: vec![
            format!(
                "metaslab_alloc asked the {class} class for {} blocks ({} with their copies): it took {} ({}) and had no room for {} ({}), which ZFS allocated in another class (the normal one)",
                format_count(all as f64),
                format_bytes((asked.taken_bytes + asked.turned_away_bytes) as f64),
                format_count(asked.taken as f64),
                format_bytes(asked.taken_bytes as f64),
                format_count(asked.turned_away as f64),
                format_bytes(asked.turned_away_bytes as f64),
            ),
            format!("{goes} written from then on land on the data disks, and are read from there until rewritten"),
        ],
        missing: vec!["the share is of allocations, not of the workload's time: what the spilled blocks cost shows in later reads of them from the data disks".into()],
        action: format!("Add {class} vdev capacity (zpool add POOL {class} mirror DISK DISK), or, for the special class, a lower special_small_blocks so that only metadata goes there; zpool list -v shows each class's fill."),
        figures: vec![
            (format!("{class}_allocations"), all as f64),
            (format!("{class}_turned_away"), asked.turned_away as f64),
            (format!("{class}_turned_away_bytes"), asked.turned_away_bytes as f64),
        ],
    }
}
