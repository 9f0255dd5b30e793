//! `zprof compare`'s table: the rows and findings analyze::compare matched,
//! with their deltas in words.

use std::fmt::Write as _;

use crate::{
    analyze::{
        compare::{CompareRow, Comparison},
        settings::SettingRow,
        slog_check::SlogCheck,
    },
    recording::{Summary, classes::COUNT_ONLY},
    units::{format_bytes, format_count, format_ns},
};

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
    render_moved(&mut out, c);
    if let Some(check) = &c.slog_check {
        render_slog_check(&mut out, check);
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

/// One workload under several settings: a row per recording.
pub fn render_settings(rows: &[SettingRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>8} {:>10} {:>10} {:>9} {:>16} {:>16}",
        "RECORDING", "WALL", "WRITTEN", "LEAVES", "COMPRESS", "MAIN SETTING", "SAVED/EXTRA S"
    );
    let first_wall_s = rows.first().map_or(0.0, |r| r.wall_s);
    for (index, row) in rows.iter().enumerate() {
        let setting = row
            .main_compression
            .as_ref()
            .map_or("-".to_owned(), |(name, ratio)| {
                format!("{name} {ratio:.2}x")
            });
        let saved = match row.saved_bytes_per_extra_s {
            Some(bytes) if bytes <= 0.0 => "none".to_owned(),
            Some(bytes) => format!("{}/s", format_bytes(bytes)),
            None if index > 0 && row.wall_s <= first_wall_s => "faster".to_owned(),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<28} {:>7.2}s {:>10} {:>10} {:>9} {:>16} {:>16}",
            shorten(&row.name, 28),
            row.wall_s,
            format_bytes(row.workload_bytes as f64),
            format_bytes(row.leaf_bytes as f64),
            format_ns(row.compression_ns),
            setting,
            saved
        );
    }
    let _ = writeln!(
        out,
        "WRITTEN: what the workload wrote (a receive's stream); LEAVES: what the leaf vdevs wrote for it (parity and metadata too); COMPRESS: compression's CPU time over threads; MAIN SETTING: the compression that took the most bytes (half the workload's or more), with its ratio; SAVED/EXTRA S: leaf bytes saved per second of wall time more than the first row"
    );
    out
}

/// The last `width` characters of a name (its file name end tells runs apart).
fn shorten(name: &str, width: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= width {
        name.to_owned()
    } else {
        std::iter::once('…')
            .chain(chars[chars.len() - (width - 1)..].iter().copied())
            .collect()
    }
}

/// A's SLOG what-if on B's log device, against B.
fn render_slog_check(out: &mut String, check: &SlogCheck) {
    let _ = writeln!(
        out,
        "\nthe SLOG what-if of A (pool {}) on B's log device (pool {}: log block write {}, flush {}{}):",
        check.pools.0,
        check.pools.1,
        format_ns(check.device_write_ns as u64),
        format_ns(check.device_flush_ns as u64),
        if check.serial {
            "; A's commits ran one at a time, the model's pool rate"
        } else {
            ""
        }
    );
    let line = |what: &str, (a, predicted, b): (f64, f64, f64), show: fn(f64) -> String| {
        format!(
            "  {what:<14} A {:>9}  predicted {:>9}  B {:>9}  (prediction {} against B)",
            show(a),
            show(predicted),
            show(b),
            delta(b, predicted)
        )
    };
    let count: fn(f64) -> String = format_count;
    let time: fn(f64) -> String = |ns| format_ns(ns as u64);
    let _ = writeln!(out, "{}", line("sync writes/s", check.sync_writes, count));
    let _ = writeln!(out, "{}", line("commits/s", check.commits, count));
    if let Some(tps) = check.transactions {
        let _ = writeln!(out, "{}", line("transactions/s", tps, count));
    }
    let _ = writeln!(out, "{}", line("commit", check.commit_ns, time));
    if let Some(gap) = check.gap_ns {
        let _ = writeln!(out, "{}", line("commit gap", gap, time));
    }
}

/// The stages whose time per workload operation moved most.
fn render_moved(out: &mut String, c: &Comparison) {
    if c.moved.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\ntime per workload operation ({} in A, {} in B; a stage's events summed, so concurrent I/Os add up), the stages that moved most:",
        format_count(c.workload_ops.0 as f64),
        format_count(c.workload_ops.1 as f64)
    );
    let per_op = |ns: f64| {
        if ns == 0.0 {
            "-".to_owned()
        } else {
            format_ns(ns as u64)
        }
    };
    for m in &c.moved {
        let _ = writeln!(
            out,
            "  {:<18} {:<14} {:>9} -> {:<9} {}",
            m.stage,
            m.detail.chars().take(14).collect::<String>(),
            per_op(m.a_ns_per_op),
            per_op(m.b_ns_per_op),
            delta(m.a_ns_per_op, m.b_ns_per_op)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::compare::Comparison;

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
            workload_ops: (10, 12),
            moved: Vec::new(),
            releases_differ: None,
            slog_check: None,
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
