//! A live view's rows (`zprof top`): the difference of two cumulative
//! snapshots of the stage rows, and each stage's rate, quantiles and time
//! per second over that interval, in the order asked for.

use std::collections::BTreeMap;

use zprof_common::{HIST_BUCKETS, Stage, hist_bucket_high};

use crate::recording::{HistRecord, classes::COUNT_ONLY, stage_from_name, stage_name};

/// One line of the view: a stage's events in the last interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewRow {
    /// Stage name.
    pub stage: String,
    /// Pool ("" where the stage cannot tell).
    pub pool: String,
    /// The rows' class, without "count only".
    pub class: String,
    /// Events per second.
    pub ops_per_s: f64,
    /// p50 and p99 of the interval (upper bucket edges, ns); None when not timed.
    pub p50_ns: Option<u64>,
    /// See `p50_ns`.
    pub p99_ns: Option<u64>,
    /// Seconds in the stage per second.
    pub busy: f64,
}

/// The rows of `now` less those of `before` (cumulative maps), key by key.
pub fn interval(before: &[HistRecord], now: &[HistRecord]) -> Vec<HistRecord> {
    let key = |h: &HistRecord| (h.stage.clone(), h.class, h.pool.clone(), h.vdev);
    let earlier: BTreeMap<_, &HistRecord> = before.iter().map(|h| (key(h), h)).collect();
    now.iter()
        .map(|h| {
            let Some(old) = earlier.get(&key(h)) else {
                return h.clone();
            };
            let old_buckets: BTreeMap<u64, u64> =
                old.buckets.iter().map(|[i, n]| (*i, *n)).collect();
            HistRecord {
                count: h.count.saturating_sub(old.count),
                total_ns: h.total_ns.saturating_sub(old.total_ns),
                bytes: h.bytes.saturating_sub(old.bytes),
                bytes_out: h.bytes_out.saturating_sub(old.bytes_out),
                buckets: h
                    .buckets
                    .iter()
                    .map(|[i, n]| {
                        [
                            *i,
                            n.saturating_sub(old_buckets.get(i).copied().unwrap_or(0)),
                        ]
                    })
                    .filter(|[_, n]| *n > 0)
                    .collect(),
                ..h.clone()
            }
        })
        .filter(|h| h.count > 0)
        .collect()
}

/// The value below which a share `q` of the buckets' events fall (upper edge).
fn quantile(buckets: &BTreeMap<u64, u64>, q: f64) -> Option<u64> {
    let total: u64 = buckets.values().sum();
    let mut seen = 0;
    for (index, n) in buckets {
        seen += n;
        if seen as f64 >= q * total as f64 && total > 0 {
            return Some(hist_bucket_high((*index as usize).min(HIST_BUCKETS - 1)));
        }
    }
    None
}

/// The view's rows of an interval of `seconds`: leaves summed, one row per
/// stage, pool and class (the stages whose values are bytes left out).
pub fn view_rows(rows: &[HistRecord], seconds: f64) -> Vec<ViewRow> {
    /// One view row's sums before the rates.
    #[derive(Default)]
    struct Sums {
        count: u64,
        total_ns: u64,
        timed: bool,
        buckets: BTreeMap<u64, u64>,
    }
    let mut merged: BTreeMap<(String, String, String), Sums> = BTreeMap::new();
    let times = |r: &&HistRecord| stage_from_name(&r.stage).is_none_or(|s| !s.values_are_bytes());
    for row in rows.iter().filter(times) {
        let class = row
            .class_name
            .trim_end_matches(COUNT_ONLY)
            .trim()
            .to_owned();
        let sums = merged
            .entry((row.stage.clone(), row.pool.clone(), class))
            .or_default();
        sums.count += row.count;
        sums.total_ns += row.total_ns;
        sums.timed |= !row.class_name.ends_with(COUNT_ONLY);
        for [index, n] in &row.buckets {
            *sums.buckets.entry(*index).or_default() += n;
        }
    }
    let seconds = seconds.max(1e-9);
    merged
        .into_iter()
        .map(|((stage, pool, class), s)| ViewRow {
            stage,
            pool,
            class,
            ops_per_s: s.count as f64 / seconds,
            p50_ns: s.timed.then(|| quantile(&s.buckets, 0.5)).flatten(),
            p99_ns: s.timed.then(|| quantile(&s.buckets, 0.99)).flatten(),
            busy: s.total_ns as f64 / 1e9 / seconds,
        })
        .collect()
}

/// A pool's txgs whose sync began in an interval: how full they were.
#[derive(Debug, Clone, PartialEq)]
pub struct DirtyLevel {
    /// Pool.
    pub pool: String,
    /// Txgs that began their sync.
    pub txgs: u64,
    /// p50 and largest of their dirty bytes (upper bucket edges).
    pub p50_bytes: u64,
    /// See `p50_bytes`.
    pub max_bytes: u64,
}

/// Each pool's dirty level at txg sync in the interval's rows (the
/// `txg_dirty` stage), pools in name order.
pub fn dirty_levels(rows: &[HistRecord]) -> Vec<DirtyLevel> {
    let mut by_pool: BTreeMap<&str, (u64, BTreeMap<u64, u64>)> = BTreeMap::new();
    for row in rows
        .iter()
        .filter(|r| r.stage == stage_name(Stage::TxgDirty))
    {
        let (txgs, buckets) = by_pool.entry(&row.pool).or_default();
        *txgs += row.count;
        for [index, n] in &row.buckets {
            *buckets.entry(*index).or_default() += n;
        }
    }
    by_pool
        .into_iter()
        .filter_map(|(pool, (txgs, buckets))| {
            Some(DirtyLevel {
                pool: pool.to_owned(),
                txgs,
                p50_bytes: quantile(&buckets, 0.5)?,
                max_bytes: quantile(&buckets, 1.0)?,
            })
        })
        .collect()
}

/// What the rows are sorted by (the `s` key cycles through them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SortKey {
    /// Time in the stage per second, highest first.
    Time,
    /// Operations per second, highest first.
    Ops,
    /// p99, highest first.
    P99,
    /// Stage name.
    Stage,
}

impl SortKey {
    /// The order the sort key switches to.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Time => SortKey::Ops,
            SortKey::Ops => SortKey::P99,
            SortKey::P99 => SortKey::Stage,
            SortKey::Stage => SortKey::Time,
        }
    }

    /// The order in words, for the heading.
    pub fn word(self) -> &'static str {
        match self {
            SortKey::Time => "time",
            SortKey::Ops => "ops/s",
            SortKey::P99 => "p99",
            SortKey::Stage => "stage",
        }
    }
}

/// Sorts the rows in place.
pub fn sort(rows: &mut [ViewRow], key: SortKey) {
    let by_name = |a: &ViewRow, b: &ViewRow| {
        (&a.stage, &a.pool, &a.class).cmp(&(&b.stage, &b.pool, &b.class))
    };
    rows.sort_by(|a, b| match key {
        SortKey::Time => b.busy.total_cmp(&a.busy).then_with(|| by_name(a, b)),
        SortKey::Ops => b
            .ops_per_s
            .total_cmp(&a.ops_per_s)
            .then_with(|| by_name(a, b)),
        SortKey::P99 => b.p99_ns.cmp(&a.p99_ns).then_with(|| by_name(a, b)),
        SortKey::Stage => by_name(a, b),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Recording;

    /// The guest's requests run (OpenZFS 2.1.11 in the kernel; see
    /// tests/data/README.md): real rows.
    fn captured() -> Recording {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.1.11-requests.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn an_interval_is_the_difference_of_two_snapshots() {
        let rec = captured();
        let zero: Vec<HistRecord> = rec
            .histograms
            .iter()
            .map(|h| HistRecord {
                count: 0,
                total_ns: 0,
                bytes: 0,
                bytes_out: 0,
                buckets: vec![],
                ..h.clone()
            })
            .collect();
        // From nothing to the run: the run; from the run to itself: nothing.
        assert_eq!(
            interval(&zero, &rec.histograms),
            rec.histograms
                .iter()
                .filter(|h| h.count > 0)
                .cloned()
                .collect::<Vec<_>>()
        );
        assert!(interval(&rec.histograms, &rec.histograms).is_empty());
    }

    #[test]
    fn rows_give_rates_quantiles_and_time_per_second() {
        let rec = captured();
        let rows = view_rows(&rec.histograms, rec.duration_s);
        let commits = rows
            .iter()
            .find(|r| r.stage == "zil_commit")
            .expect("the capture has commits");
        let source: Vec<&HistRecord> = rec
            .histograms
            .iter()
            .filter(|h| h.stage == "zil_commit")
            .collect();
        let count: u64 = source.iter().map(|h| h.count).sum();
        let total: u64 = source.iter().map(|h| h.total_ns).sum();
        assert!((commits.ops_per_s - count as f64 / rec.duration_s).abs() < 1e-9);
        assert!((commits.busy - total as f64 / 1e9 / rec.duration_s).abs() < 1e-9);
        let (p50, p99) = (commits.p50_ns.unwrap(), commits.p99_ns.unwrap());
        assert!(
            p50 <= p99 && p99 <= source.iter().map(|h| h.max_ns).max().unwrap() * 2,
            "{p50} {p99}"
        );
    }

    #[test]
    fn sort_keys_order_the_rows() {
        let mut rows = view_rows(&captured().histograms, 10.0);
        sort(&mut rows, SortKey::Time);
        assert!(rows.windows(2).all(|w| w[0].busy >= w[1].busy));
        sort(&mut rows, SortKey::Ops);
        assert!(rows.windows(2).all(|w| w[0].ops_per_s >= w[1].ops_per_s));
        assert_eq!(SortKey::Stage.next(), SortKey::Time);
    }

    /// A lab run whose txgs each carry their dirty bytes (tests/data/README.md):
    /// the dirty levels count the txgs, their largest bucket holds the
    /// largest txg, and no byte-valued stage becomes a row of time.
    #[test]
    fn dirty_levels_hold_the_txgs_and_stay_out_of_the_rows() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/lab-2.1.11-sync-reads.json"
        );
        let rec = Recording::parse(&std::fs::read_to_string(path).unwrap(), path).unwrap();
        let levels = dirty_levels(&rec.histograms);
        assert_eq!(levels.len(), 1, "{levels:?}");
        let with_dirty: Vec<u64> = rec.txgs.iter().filter_map(|t| t.life.dirty_bytes).collect();
        assert_eq!(levels[0].txgs, with_dirty.len() as u64);
        let largest = *with_dirty.iter().max().unwrap();
        assert!(
            levels[0].max_bytes >= largest && levels[0].max_bytes <= 2 * largest,
            "{levels:?} for {largest}"
        );
        assert!(levels[0].p50_bytes <= levels[0].max_bytes);
        let rows = view_rows(&rec.histograms, rec.duration_s);
        assert!(
            rows.iter()
                .all(|r| r.stage != "txg_dirty" && r.stage != "arc_miss_reuse")
        );
    }
}
