//! `zprof compare A B`: two recordings side by side, stage by stage, with the
//! deltas and the findings that changed. The way to explain a change: a pool
//! without and with a log device, lz4 against zstd, 8k against 128k blocks.
//!
//! Rows are matched by stage and class name (not pool: the two runs usually
//! have different pool names), so recordings from either target compare.

use serde::Serialize;
use zprof_common::Stage;

use crate::{
    analyze::findings::{ExplainOptions, Finding, explain},
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
    /// Set when A and B traced different OpenZFS releases: rows can differ by
    /// what the release does (a cache flush is one zio_flush call on 2.1, one
    /// leaf flush on libzpool 2.3), not only by the workload or the pool.
    pub releases_differ: Option<String>,
}

fn rate(rec: &Recording, stage: Stage) -> f64 {
    let s = summarize(
        rec.histograms
            .iter()
            .filter(|h| h.stage == stage_name(stage)),
    );
    s.count as f64 / rec.duration_s.max(1e-9)
}

/// Compares two recordings.
pub fn compare(a: &Recording, b: &Recording, names: (String, String)) -> Comparison {
    Comparison {
        names,
        writes_per_second: (rate(a, Stage::WorkloadWrite), rate(b, Stage::WorkloadWrite)),
        reads_per_second: (rate(a, Stage::WorkloadRead), rate(b, Stage::WorkloadRead)),
        rows: rows(a, b),
        findings: finding_changes(a, b),
        releases_differ: releases_differ(a, b),
    }
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
    for stage in Stage::ALL.into_iter().filter(|s| *s != Stage::ArcMissReuse) {
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
