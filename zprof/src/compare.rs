//! `zprof compare A B`: two recordings side by side, stage by stage, with the
//! deltas and the findings that changed. The way to explain a change: a pool
//! without and with a log device, lz4 against zstd, 8k against 128k blocks.
//!
//! Rows are matched by stage and class name (not pool: the two runs usually
//! have different pool names), so recordings from either target compare.

use std::fmt::Write as _;

use serde::Serialize;
use zprof_common::Stage;

use crate::{
    explain::{ExplainOptions, Finding, explain},
    recording::{Recording, Summary, stage_name, summarize},
    report::{format_count, format_ns},
    tracer::COUNT_ONLY,
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
    let version = |r: &Recording| {
        r.target
            .zfs_version
            .clone()
            .unwrap_or_else(|| "unknown".into())
    };
    let releases_differ = (version(a) != version(b) || a.target.kind != b.target.kind).then(|| {
        format!(
            "A traced OpenZFS {} ({}), B OpenZFS {} ({}): the releases differ, and so may what a row counts (see `zprof probes`)",
            version(a),
            a.target.kind,
            version(b),
            b.target.kind
        )
    });
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
    Comparison {
        names,
        writes_per_second: (rate(a, Stage::WorkloadWrite), rate(b, Stage::WorkloadWrite)),
        reads_per_second: (rate(a, Stage::WorkloadRead), rate(b, Stage::WorkloadRead)),
        rows,
        findings,
        releases_differ,
    }
}

fn delta(a: f64, b: f64) -> String {
    if a == 0.0 && b == 0.0 {
        return String::new();
    }
    if a == 0.0 {
        return "new".into();
    }
    if b == 0.0 {
        return "gone".into();
    }
    let ratio = b / a;
    if ratio >= 2.0 || ratio <= 0.5 {
        format!("{ratio:.1}x")
    } else {
        format!("{:+.0}%", (ratio - 1.0) * 100.0)
    }
}

/// A change in words: "a -> b (delta)", without "()" when there is no delta.
fn change(a: f64, b: f64) -> String {
    let delta = delta(a, b);
    let arrow = format!("{} -> {}", format_count(a), format_count(b));
    if delta.is_empty() {
        arrow
    } else {
        format!("{arrow} ({delta})")
    }
}

/// A row's median in one recording: "-" without events, "count" where the
/// stage was counted but not timed (a zero median would read as a measurement).
fn p50(row: &CompareRow, summary: &Summary, p50_ns: u64) -> String {
    if summary.count == 0 {
        "-".into()
    } else if row.detail.ends_with(COUNT_ONLY) {
        "count".into()
    } else {
        format_ns(p50_ns)
    }
}

/// Renders a comparison as a table.
pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}\nB: {}", c.names.0, c.names.1);
    if let Some(note) = &c.releases_differ {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(
        out,
        "workload writes/s: {}; reads/s: {}\n",
        change(c.writes_per_second.0, c.writes_per_second.1),
        change(c.reads_per_second.0, c.reads_per_second.1)
    );
    let _ = writeln!(
        out,
        "{:<18} {:<14} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "STAGE", "DETAIL", "A OPS/S", "B OPS/S", "DELTA", "A P50", "B P50", "DELTA"
    );
    for r in &c.rows {
        let timed = r.a.count > 0 && r.b.count > 0 && !r.detail.ends_with(COUNT_ONLY);
        let _ = writeln!(
            out,
            "{:<18} {:<14} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}",
            r.stage,
            r.detail.chars().take(14).collect::<String>(),
            format_count(r.a_per_second),
            format_count(r.b_per_second),
            delta(r.a_per_second, r.b_per_second),
            p50(r, &r.a, r.a_p50_ns),
            p50(r, &r.b, r.b_p50_ns),
            if timed {
                delta(r.a_p50_ns as f64, r.b_p50_ns as f64)
            } else {
                String::new()
            },
        );
    }
    if !c.findings.is_empty() {
        let _ = writeln!(out, "\nfindings that changed:");
        for f in &c.findings {
            let a = if f.a.is_empty() {
                "(none)".to_owned()
            } else {
                format!("{} ({:.0}%)", f.a, f.shares.0 * 100.0)
            };
            let b = if f.b.is_empty() {
                "(none)".to_owned()
            } else {
                format!("{} ({:.0}%)", f.b, f.shares.1 * 100.0)
            };
            let _ = writeln!(
                out,
                "- {}: A {a}\n  {:width$}  B {b}",
                f.kind,
                "",
                width = f.kind.len()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_only_rows_and_idle_sides_are_not_shown_as_measurements() {
        let counted = Summary {
            count: 10,
            ..Default::default()
        };
        let row = CompareRow {
            stage: "write".into(),
            detail: COUNT_ONLY.to_owned(),
            a_per_second: 5.0,
            b_per_second: 6.0,
            a_p50_ns: 0,
            b_p50_ns: 0,
            a: counted.clone(),
            b: counted,
        };
        let comparison = Comparison {
            names: ("a.json".into(), "b.json".into()),
            writes_per_second: (5.0, 6.0),
            reads_per_second: (0.0, 0.0),
            rows: vec![row],
            findings: Vec::new(),
            releases_differ: None,
        };
        let text = render(&comparison);
        assert!(text.contains("reads/s: 0 -> 0\n"), "{text}");
        assert!(!text.contains("()") && !text.contains("0.00ns"), "{text}");
        let row = text.lines().find(|l| l.starts_with("write ")).unwrap();
        assert_eq!(
            row.matches("count").count(),
            3,
            "detail, then A and B medians as counts: {row}"
        );
    }

    #[test]
    fn deltas_read_naturally() {
        assert_eq!(delta(100.0, 110.0), "+10%");
        assert_eq!(delta(100.0, 2000.0), "20.0x");
        assert_eq!(delta(0.0, 5.0), "new");
        assert_eq!(delta(5.0, 0.0), "gone");
        assert_eq!(delta(0.0, 0.0), "");
    }
}
