//! The findings as `zprof explain` and `zprof report` print them: ranked,
//! each with its evidence, what was not measured and what to do, and the
//! findings that explain almost nothing named on one line. The findings
//! themselves (and their words) come from [`crate::analyze::findings`].

use crate::{
    analyze::findings::{Confidence, Finding},
    recording::benchmark,
    units::pct,
};

/// Renders findings as text.
pub fn render(findings: &[Finding], bench: Option<&benchmark::Benchmark>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if let Some(bench) = bench {
        for line in benchmark::describe(bench) {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
    }
    if findings.is_empty() {
        let _ = writeln!(out, "findings: none (no ZFS activity in the recording)");
        return out;
    }
    let _ = writeln!(
        out,
        "findings, by share of the workload's time (CPU share for compression and checksums):"
    );
    // Findings that explain almost nothing are named on one line, not listed
    // as if they mattered (`--format json` keeps them whole). The sync-write
    // finding is kept whole: it is there only with ten commits or more, and
    // from older recordings its share is unknown (0).
    let (shown, minor): (Vec<&Finding>, Vec<&Finding>) = findings
        .iter()
        .partition(|f| f.share >= MINOR_SHARE || f.kind == "sync_write_bound");
    for (i, f) in shown.iter().enumerate() {
        let pool = pool_tag(f);
        let _ = writeln!(
            out,
            "{}. {}{} ({}, {} confidence)",
            i + 1,
            f.title,
            pool,
            pct(f.share),
            match f.confidence {
                Confidence::High => "high",
                Confidence::Medium => "medium",
                Confidence::Low => "low",
            }
        );
        for e in &f.evidence {
            let _ = writeln!(out, "   - {e}");
        }
        for m in &f.missing {
            let _ = writeln!(out, "   - not measured: {m}");
        }
        let _ = writeln!(out, "   => {}", f.action);
    }
    if !minor.is_empty() {
        let names: Vec<String> = minor
            .iter()
            .map(|f| format!("{}{} ({})", f.title, pool_tag(f), pct(f.share)))
            .collect();
        let _ = writeln!(
            out,
            "below {} of the workload's time: {}",
            pct(MINOR_SHARE),
            names.join("; ")
        );
    }
    out
}

/// The pool a finding is about, after its title: " [tank]", or
/// " [all pools]" for one computed over several.
fn pool_tag(f: &Finding) -> String {
    if !f.pool.is_empty() {
        format!(" [{}]", f.pool)
    } else if f.pools.len() > 1 {
        " [all pools]".to_owned()
    } else {
        String::new()
    }
}

/// Findings explaining less than this share are named on one line.
pub const MINOR_SHARE: f64 = 0.01;
