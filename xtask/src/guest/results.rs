//! What the guest checks share: reading a run's `/results` (JSON files,
//! kstat snapshots, the ledger case a directory is), fio's allowance, and the
//! power-of-two histograms zprof's buckets are compared in. Below check.rs,
//! check_requests.rs and check_serve.rs, which all import it (and it none of
//! them).

use std::{collections::BTreeMap, path::Path};

use anyhow::{Context as _, anyhow};
use serde_json::Value;
use zprof_common::{HIST_BUCKETS, hist_bucket_low};

/// fio counts an I/O when it completes; with `--time_based` the job stops at
/// its deadline, and the write or fsync in progress then is issued (zprof sees
/// it) but not counted. So zprof may see one more of each; two leaves room for
/// fio's final fsync at close. Nothing else can count: zprof follows fio's
/// processes only, and the test's own commands run outside the recording.
pub const FIO_ALLOWANCE: u64 = 2;

/// A ledger case's prefix for results under `dir`: the combination and the
/// run, "6.12-2.3.2 test-btf" for target/guest/6.12-2.3.2/test-btf/results/...
/// (the checks know only the directory they judge).
pub(super) fn case_prefix(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.iter().rposition(|p| p == "results") {
        Some(i) if i >= 2 => format!("{} {}", parts[i - 2], parts[i - 1]),
        _ => dir.display().to_string(),
    }
}

/// A finding's figure by name (explain's JSON: `figures` as [name, value] pairs).
pub(super) fn figure(finding: &Value, name: &str) -> Option<f64> {
    finding["figures"]
        .as_array()?
        .iter()
        .find(|f| f[0] == name)?[1]
        .as_f64()
}

/// The JSON document at `path`.
pub(super) fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A recording's histogram rows of one stage (every pool, class and vdev).
pub(super) fn histograms<'a>(
    recording: &'a Value,
    stage: &'a str,
) -> impl Iterator<Item = &'a Value> + 'a {
    recording["histograms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |h| h["stage"] == stage)
}

/// Power-of-two histogram (index j: [2^j, 2^(j+1)) ns; 0 and 1 ns in bucket 0),
/// as `zpool iostat -w` prints it.
pub(super) type Pow2 = BTreeMap<usize, u64>;

/// The power-of-two bucket of a zprof bucket (its 8 sub-buckets per power of two
/// share their power of two's edges).
pub(super) fn pow2_of_zprof_bucket(index: usize) -> usize {
    let low = hist_bucket_low(index.min(HIST_BUCKETS - 1));
    if low <= 1 {
        0
    } else {
        63 - low.leading_zeros() as usize
    }
}

/// The bucket holding the `p` quantile.
pub(super) fn percentile_bucket(hist: &Pow2, p: f64) -> Option<usize> {
    let total: u64 = hist.values().sum();
    if total == 0 {
        return None;
    }
    let rank = ((p * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (bucket, count) in hist {
        seen += count;
        if seen >= rank {
            return Some(*bucket);
        }
    }
    hist.keys().last().copied()
}

/// The sum of kstat counters `stats` in DIR/KSTAT-after.txt less
/// DIR/KSTAT-before.txt (lines `name type value`).
pub(super) fn kstat_delta(dir: &Path, kstat: &str, stats: &[&str]) -> anyhow::Result<u64> {
    let (before, after) = kstat_values(dir, kstat, stats)?;
    Ok(after.saturating_sub(before).max(0) as u64)
}

/// The sum of `stats` in DIR/KSTAT-before.txt and DIR/KSTAT-after.txt (a
/// kstat file's "name type value" lines), signed: a gauge may go down.
pub(super) fn kstat_values(dir: &Path, kstat: &str, stats: &[&str]) -> anyhow::Result<(i64, i64)> {
    let sum = |name: &str| -> anyhow::Result<i64> {
        let text =
            std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading {name}"))?;
        let mut total = 0;
        for stat in stats {
            let line = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(stat));
            let value = line
                .and_then(|l| l.split_whitespace().nth(2))
                .and_then(|v| v.parse::<i64>().ok());
            total += value.ok_or_else(|| anyhow!("{name} has no {stat}"))?;
        }
        Ok(total)
    };
    Ok((
        sum(&format!("{kstat}-before.txt"))?,
        sum(&format!("{kstat}-after.txt"))?,
    ))
}

/// Runs of `programs` the kernel skipped, as the recording counts them
/// (bpf_prog_info's recursion_misses: it runs one BPF program at a time per
/// CPU, so a probe hit in an interrupt during another program's run is
/// skipped): each can be an event missing from zprof's rows.
pub(super) fn skipped_runs(rec: &Value, programs: &[&str]) -> u64 {
    rec["bpf_programs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| programs.iter().any(|name| p["program"] == *name))
        .map(|p| p["missed"].as_u64().unwrap_or(0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_case_names_the_combination_and_the_run() {
        let dir = Path::new("/w/target/guest/6.12-2.3.2/test-btf/results/requests");
        assert_eq!(case_prefix(dir), "6.12-2.3.2 test-btf");
        assert_eq!(
            case_prefix(Path::new("elsewhere/requests")),
            "elsewhere/requests"
        );
    }

    #[test]
    fn zprof_buckets_merge_into_powers_of_two() {
        assert_eq!(pow2_of_zprof_bucket(zprof_common::hist_bucket(0)), 0);
        assert_eq!(pow2_of_zprof_bucket(zprof_common::hist_bucket(1)), 0);
        for value in [2u64, 3, 15, 16, 1000, 65_535, 65_536, 1 << 30] {
            let expected = 63 - value.leading_zeros() as usize;
            assert_eq!(
                pow2_of_zprof_bucket(zprof_common::hist_bucket(value)),
                expected,
                "{value}"
            );
        }
    }
}
