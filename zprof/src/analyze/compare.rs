//! `zprof compare A B`: two recordings side by side, stage by stage, with the
//! deltas and the findings that changed. The way to explain a change: a pool
//! without and with a log device, lz4 against zstd, 8k against 128k blocks.
//!
//! Rows are matched by stage and class name (not pool: the two runs usually
//! have different pool names), so recordings from either target compare.

use serde::Serialize;
use zprof_common::Stage;

use crate::{
    analyze::{
        findings::{ExplainOptions, Finding, explain},
        slog_check::{SlogCheck, slog_check},
    },
    recording::{Recording, Summary, stage_name, summarize},
};

/// One stage/class in both recordings.
#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    /// Stage name.
    pub stage: String,
    /// Class in words.
    pub detail: String,
    /// Events per second in A.
    pub a_per_second: f64,
    /// Events per second in B.
    pub b_per_second: f64,
    /// Median latency in A, ns.
    pub a_p50_ns: u64,
    /// Median latency in B, ns.
    pub b_p50_ns: u64,
    /// Statistics in A.
    pub a: Summary,
    /// Statistics in B.
    pub b: Summary,
}

/// A finding's status across the two recordings.
#[derive(Debug, Clone, Serialize)]
pub struct FindingChange {
    /// Finding kind.
    pub kind: String,
    /// Title in A (empty if absent).
    pub a: String,
    /// Title in B (empty if absent).
    pub b: String,
    /// Share in A and in B.
    pub shares: (f64, f64),
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Names of the two recordings.
    pub names: (String, String),
    /// Workload write ops/s in A and B.
    pub writes_per_second: (f64, f64),
    /// Workload read ops/s in A and B.
    pub reads_per_second: (f64, f64),
    /// Stage rows.
    pub rows: Vec<CompareRow>,
    /// Findings that appeared, disappeared or changed share by 10 points or more.
    pub findings: Vec<FindingChange>,
    /// Workload operations (writes and reads) in A and B.
    pub workload_ops: (u64, u64),
    /// The timed rows whose time per workload operation moved most, largest
    /// move first: what a change of release, pool or setting cost each
    /// operation, stage by stage.
    pub moved: Vec<MovedStage>,
    /// Set when A and B traced different OpenZFS releases: rows can differ by
    /// what the release does (a cache flush is one zio_flush call on 2.1, one
    /// leaf flush on libzpool 2.3), not only by the workload or the pool.
    pub releases_differ: Option<String>,
    /// Where A wrote its log blocks to its pool and B to a log device: A's
    /// SLOG what-if on B's device, against B.
    pub slog_check: Option<SlogCheck>,
}

/// A stage's time per workload operation in A and B.
#[derive(Debug, Clone, Serialize)]
pub struct MovedStage {
    /// Stage name.
    pub stage: String,
    /// Class in words.
    pub detail: String,
    /// Its time in A over A's workload operations, ns.
    pub a_ns_per_op: f64,
    /// The same in B.
    pub b_ns_per_op: f64,
}

/// How many rows `moved` lists, besides those that appeared or went.
const MOVED_ROWS: usize = 8;
/// A move smaller than this share of the larger side, or than 1 us per
/// operation, is noise between two runs, not a move.
const MOVED_SHARE: f64 = 0.05;
const MOVED_FLOOR_NS: f64 = 1_000.0;

fn count(rec: &Recording, stage: Stage) -> u64 {
    summarize(
        rec.histograms
            .iter()
            .filter(|h| h.stage == stage_name(stage)),
    )
    .count
}

fn rate(rec: &Recording, stage: Stage) -> f64 {
    count(rec, stage) as f64 / rec.duration_s.max(1e-9)
}

fn workload_ops(rec: &Recording) -> u64 {
    count(rec, Stage::WorkloadWrite) + count(rec, Stage::WorkloadRead)
}

/// Compares two recordings.
pub fn compare(a: &Recording, b: &Recording, names: (String, String)) -> Comparison {
    let rows = rows(a, b);
    let workload_ops = (workload_ops(a), workload_ops(b));
    Comparison {
        names,
        writes_per_second: (rate(a, Stage::WorkloadWrite), rate(b, Stage::WorkloadWrite)),
        reads_per_second: (rate(a, Stage::WorkloadRead), rate(b, Stage::WorkloadRead)),
        moved: moved(&rows, workload_ops),
        workload_ops,
        rows,
        findings: finding_changes(a, b),
        releases_differ: releases_differ(a, b),
        slog_check: slog_check(a, b),
    }
}

/// The rows whose time per workload operation moved most (none where either
/// side saw no workload operation: there is nothing to divide by).
fn moved(rows: &[CompareRow], ops: (u64, u64)) -> Vec<MovedStage> {
    if ops.0 == 0 || ops.1 == 0 {
        return Vec::new();
    }
    let mut moved: Vec<MovedStage> = rows
        .iter()
        .map(|r| MovedStage {
            stage: r.stage.clone(),
            detail: r.detail.clone(),
            a_ns_per_op: r.a.total_ns as f64 / ops.0 as f64,
            b_ns_per_op: r.b.total_ns as f64 / ops.1 as f64,
        })
        .filter(|m| {
            let change = (m.b_ns_per_op - m.a_ns_per_op).abs();
            change >= MOVED_FLOOR_NS && change >= MOVED_SHARE * m.a_ns_per_op.max(m.b_ns_per_op)
        })
        .collect();
    let change = |m: &MovedStage| (m.b_ns_per_op - m.a_ns_per_op).abs();
    moved.sort_by(|x, y| change(y).total_cmp(&change(x)));
    // A row that appeared or went stays whatever its size: the time moved
    // to another place (log blocks from the main pool to a special vdev).
    let mut kept = 0;
    moved.retain(|m| {
        kept += 1;
        kept <= MOVED_ROWS || m.a_ns_per_op == 0.0 || m.b_ns_per_op == 0.0
    });
    moved
}

/// A note when the two recordings traced different releases or targets.
fn releases_differ(a: &Recording, b: &Recording) -> Option<String> {
    let version = |r: &Recording| {
        r.target
            .zfs_version
            .clone()
            .unwrap_or_else(|| "unknown".into())
    };
    (version(a) != version(b) || a.target.kind != b.target.kind).then(|| {
        format!(
            "A traced OpenZFS {} ({}), B OpenZFS {} ({}): the releases differ, and so may what a row counts (see `zprof probes`)",
            version(a),
            a.target.kind,
            version(b),
            b.target.kind
        )
    })
}

/// One row per stage and class name seen in either recording.
fn rows(a: &Recording, b: &Recording) -> Vec<CompareRow> {
    let mut rows = Vec::new();
    // The reuse distances are bytes, not times (see the cache what-if).
    for stage in Stage::ALL.into_iter().filter(|s| !s.values_are_bytes()) {
        let name = stage_name(stage);
        let mut classes: Vec<(u32, String)> = Vec::new();
        for h in a
            .histograms
            .iter()
            .chain(&b.histograms)
            .filter(|h| h.stage == name)
        {
            if !classes.iter().any(|(_, c)| *c == h.class_name) {
                classes.push((h.class, h.class_name.clone()));
            }
        }
        classes.sort();
        for (_, class) in classes {
            let of = |rec: &Recording| {
                summarize(
                    rec.histograms
                        .iter()
                        .filter(|h| h.stage == name && h.class_name == class),
                )
            };
            let (sa, sb) = (of(a), of(b));
            rows.push(CompareRow {
                stage: name.to_owned(),
                detail: class,
                a_per_second: sa.count as f64 / a.duration_s.max(1e-9),
                b_per_second: sb.count as f64 / b.duration_s.max(1e-9),
                a_p50_ns: sa.p50_ns,
                b_p50_ns: sb.p50_ns,
                a: sa,
                b: sb,
            });
        }
    }
    rows
}

/// The findings whose strongest instance appeared, went, or moved by 10
/// points of share between the two recordings.
fn finding_changes(a: &Recording, b: &Recording) -> Vec<FindingChange> {
    let options = ExplainOptions::default();
    let fa = explain(a, &options);
    let fb = explain(b, &options);
    let mut findings = Vec::new();
    let mut kinds: Vec<String> = fa.iter().chain(&fb).map(|f| f.kind.clone()).collect();
    kinds.dedup();
    let mut seen = std::collections::BTreeSet::new();
    for kind in kinds {
        if !seen.insert(kind.clone()) {
            continue;
        }
        // Pools differ between runs: compare the strongest finding of each kind.
        let best = |list: &[Finding]| {
            list.iter()
                .filter(|f| f.kind == kind)
                .max_by(|x, y| x.share.total_cmp(&y.share))
                .cloned()
        };
        let (x, y) = (best(&fa), best(&fb));
        let shares = (
            x.as_ref().map_or(0.0, |f| f.share),
            y.as_ref().map_or(0.0, |f| f.share),
        );
        let changed = x.is_none() != y.is_none() || (shares.0 - shares.1).abs() >= 0.10;
        if changed {
            findings.push(FindingChange {
                kind,
                a: x.map(|f| f.title).unwrap_or_default(),
                b: y.map(|f| f.title).unwrap_or_default(),
                shares,
            });
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row with these total times in A and B (ns).
    fn row(stage: &str, a_ns: u64, b_ns: u64) -> CompareRow {
        let side = |total_ns| Summary {
            count: u64::from(total_ns > 0),
            total_ns,
            ..Default::default()
        };
        CompareRow {
            stage: stage.into(),
            detail: String::new(),
            a_per_second: 0.0,
            b_per_second: 0.0,
            a_p50_ns: 0,
            b_p50_ns: 0,
            a: side(a_ns),
            b: side(b_ns),
        }
    }

    #[test]
    fn moved_lists_the_largest_moves_per_operation_and_every_row_that_came_or_went() {
        // 10 operations in A, 20 in B.
        let mut rows = vec![
            row("small", 10_000, 20_000),       // 1 us -> 1 us per op: not a move
            row("noise", 1_000_000, 2_080_000), // 100 -> 104 us: under 5%
            row("gone", 20_000, 0),
            row("new", 0, 40_000),
        ];
        for i in 0..MOVED_ROWS as u64 {
            rows.push(row(&format!("big{i}"), 1_000_000, 4_000_000 + i * 200_000));
        }
        let moved = moved(&rows, (10, 20));
        let names: Vec<&str> = moved.iter().map(|m| m.stage.as_str()).collect();
        assert_eq!(names.len(), MOVED_ROWS + 2, "{names:?}");
        assert_eq!(names[0], format!("big{}", MOVED_ROWS - 1));
        assert!(
            names.contains(&"gone") && names.contains(&"new"),
            "{names:?}"
        );
        assert!(
            !names.contains(&"small") && !names.contains(&"noise"),
            "{names:?}"
        );
        let gone = moved.iter().find(|m| m.stage == "gone").unwrap();
        assert_eq!((gone.a_ns_per_op, gone.b_ns_per_op), (2_000.0, 0.0));
        assert!(super::moved(&rows, (0, 20)).is_empty());
    }
}
