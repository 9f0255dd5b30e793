//! The report's section of leaf I/O by top-level vdev and allocation class
//! (the rows are analyze::top_vdevs').

use std::fmt::Write as _;

use crate::{
    analyze::top_vdevs::TopVdevRow,
    units::{format_count, format_ns},
};

/// The section's lines.
pub fn render(out: &mut String, rows: &[TopVdevRow]) {
    let _ = writeln!(
        out,
        "leaf I/O by top-level vdev (queue+disk and disk alone):"
    );
    let _ = writeln!(
        out,
        "{:<14} {:<12} {:<8} {:>6} {:<20} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "POOL", "VDEV", "CLASS", "LEAVES", "I/O", "OPS/S", "P50", "P99", "DISK P50", "DISK P99"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<14} {:<12} {:<8} {:>6} {:<20} {:>9} {:>8} {:>8} {:>8} {:>8}",
            r.pool,
            r.top_vdev,
            r.class,
            r.leaves,
            r.io_class,
            format_count(r.per_second),
            format_ns(r.total_p50_ns),
            format_ns(r.total_p99_ns),
            format_ns(r.disk_p50_ns),
            format_ns(r.disk_p99_ns)
        );
    }
    let _ = writeln!(out);
}
