//! Checks of the guest's special-class run (`/results/special`): a 64 MiB
//! special vdev filled by the indirect blocks of 400 MiB of 512-byte
//! records, so ZFS allocates metadata in the normal class.
//!
//! - The special vdev is full by `zpool list -v` (its CAP at least
//!   [`FULL_PERCENT`]: of the space its metaslabs give, not of the file).
//! - zprof counted allocations the special class turned away (ENOSPC), and
//!   from 2.3 on exactly as many as zio_stats' alloc_class_fallbacks (the
//!   kstat counts each fallback; before 2.3 there is none to compare with).
//! - explain's class_full finding names the pool and the same count.

use std::path::Path;

use anyhow::{anyhow, ensure};
use zprof_common::alloc_class;

use super::results::{figure, histograms, kstat_delta, read_json};

/// The special vdev's capacity (`zpool list -v`'s CAP) from which it is full.
const FULL_PERCENT: u64 = 90;

/// Checks the special-class run in `dir`.
pub fn check_special(dir: &Path) -> anyhow::Result<String> {
    let rec = read_json(&dir.join("rec.json"))?;
    let (taken, away) = histograms(&rec, "alloc_class")
        .filter(|h| h["pool"] == "sp")
        .fold((0u64, 0u64), |(taken, away), h| {
            let count = h["count"].as_u64().unwrap_or(0);
            if h["class"].as_u64().unwrap_or(0) as u32 & alloc_class::FULL != 0 {
                (taken, away + count)
            } else {
                (taken + count, away)
            }
        });
    let (alloc, capacity) = special_vdev_fill(dir)?;
    ensure!(
        capacity >= FULL_PERCENT,
        "the special vdev did not fill: {alloc} bytes allocated, {capacity}% of its space, so nothing could be checked"
    );
    ensure!(
        away > 0,
        "zprof saw no allocation turned away by a full special class ({taken} taken)"
    );
    let kstat = if dir.join("zio_stats-before.txt").exists() {
        let fallbacks = kstat_delta(dir, "zio_stats", &["alloc_class_fallbacks"])?;
        ensure!(
            fallbacks == away,
            "zprof saw {away} allocations turned away, zio_stats counted {fallbacks} class fallbacks"
        );
        format!("zio_stats' alloc_class_fallbacks {fallbacks}")
    } else {
        "no zio_stats kstat before 2.3".to_owned()
    };
    let explain = read_json(&dir.join("explain.json"))?;
    let finding = explain
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == "class_full"))
        .ok_or_else(|| anyhow!("explain has no class_full finding: {explain}"))?;
    ensure!(
        finding["pool"] == "sp" && figure(finding, "special_turned_away") == Some(away as f64),
        "explain's class_full finding: {finding}"
    );
    Ok(format!(
        "the special class took {taken} allocations and turned {away} away ({kstat}); the special vdev {capacity}% full ({alloc} bytes)"
    ))
}

/// The special vdev's allocated bytes and capacity (percent), from
/// `zpool list -Hpv` (name, size, alloc, free, ckpoint, expandsz, frag, cap).
fn special_vdev_fill(dir: &Path) -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string(dir.join("zpool-list.txt"))?;
    let line = text
        .lines()
        .find(|l| l.contains("sp-special"))
        .ok_or_else(|| anyhow!("zpool list -v has no sp-special: {text}"))?;
    let fields: Vec<&str> = line
        .split('\t')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (number(2), number(7)) {
        (Some(alloc), Some(capacity)) => Ok((alloc, capacity)),
        _ => Err(anyhow!(
            "cannot read sp-special's alloc and capacity: {line}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 6.17-2.4.4 guest's special run (2026-12-07): `zpool list -Hpv sp`.
    #[test]
    fn the_special_vdevs_capacity_is_read_from_zpool_list() {
        let dir = std::env::temp_dir().join(format!("zprof-special-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("zpool-list.txt"),
            "sp\t2063597568\t482101248\t1581496320\t-\t-\t1\t23\t1.00\tONLINE\t-\n\
             \t/tmp/vdev/sp-1\t2147483648\t432313344\t1580952576\t-\t-\t1\t21\t-\tONLINE\t-\n\
             special                          -          -           -        -         -      -      -      -         -        -\n\
             \t/tmp/vdev/sp-special\t67108864\t49787904\t543744\t-\t-\t86\t98\t-\tONLINE\t-\n",
        )
        .unwrap();
        assert_eq!(special_vdev_fill(&dir).unwrap(), (49_787_904, 98));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
