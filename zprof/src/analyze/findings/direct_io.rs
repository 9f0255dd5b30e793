//! The Direct I/O finding (OpenZFS 2.3 and later, kernel target): O_DIRECT
//! requests that ZFS sent through the ARC anyway. A benchmark run with
//! fio's direct=1 is read as "the ARC is out of the picture"; ZFS takes its
//! direct path only for page-aligned requests, and for writes only for a
//! whole record or more, so smaller O_DIRECT writes are buffered (2.4:
//! uncached) with the ARC's copies, read-modify-write included.

use super::{Confidence, Finding, pct};
use crate::{
    recording::{Recording, RequestRecord, summarize},
    units::{format_count, format_ns},
};

/// Where the direct-path probe ran: without it (2.1, 2.2, libzpool, a build
/// whose functions were not found) no row can say whether the path was taken.
fn direct_path_traced(rec: &Recording) -> bool {
    rec.probes
        .iter()
        .any(|p| p.role == "dmu_write_uio_direct" && p.attached)
}

fn has(row: &RequestRecord, flag: &str) -> bool {
    row.flags.iter().any(|f| f == flag)
}

/// One finding per dataset and operation whose O_DIRECT requests did not
/// all take the direct path.
pub(super) fn direct_io(rec: &Recording, out: &mut Vec<Finding>) {
    if !direct_path_traced(rec) {
        return;
    }
    let file_ns: u64 = rec
        .requests
        .iter()
        .filter(|r| r.layer == "file")
        .map(|r| r.total_ns)
        .sum();
    let mut groups: Vec<(&str, &str)> = rec
        .requests
        .iter()
        .filter(|r| r.layer == "file" && has(r, "direct"))
        .map(|r| (r.dataset.as_str(), r.op.as_str()))
        .collect();
    groups.sort();
    groups.dedup();
    for (dataset, op) in groups {
        let rows = |taken: bool| {
            rec.requests
                .iter()
                .filter(move |r| r.layer == "file" && r.dataset == dataset && r.op == op)
                .filter(move |r| has(r, "direct") && has(r, "direct-path") == taken)
                .map(RequestRecord::as_hist)
                .collect::<Vec<_>>()
        };
        let (buffered, direct) = (summarize(rows(false).iter()), summarize(rows(true).iter()));
        if buffered.count == 0 {
            continue;
        }
        out.push(buffered_o_direct(dataset, op, &buffered, &direct, file_ns));
    }
}

fn buffered_o_direct(
    dataset: &str,
    op: &str,
    buffered: &crate::recording::Summary,
    direct: &crate::recording::Summary,
    file_ns: u64,
) -> Finding {
    let asked = buffered.count + direct.count;
    let mean_bytes = buffered.bytes as f64 / buffered.count.max(1) as f64;
    Finding {
        kind: "direct_io_buffered".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: format!(
            "{} of {} O_DIRECT {op}s on {dataset} went through the ARC, not ZFS's Direct I/O path",
            format_count(buffered.count as f64),
            format_count(asked as f64)
        ),
        share: buffered.total_ns as f64 / file_ns.max(1) as f64,
        confidence: if buffered.count >= 100 {
            Confidence::High
        } else {
            Confidence::Low
        },
        evidence: vec![
            format!(
                "buffered despite O_DIRECT: {} {op}s of {} on average, p50 {}, p99 {}",
                format_count(buffered.count as f64),
                crate::units::format_bytes(mean_bytes),
                format_ns(buffered.p50_ns),
                format_ns(buffered.p99_ns)
            ),
            format!(
                "took the direct path: {} ({} of those asked), p50 {}",
                format_count(direct.count as f64),
                pct(direct.count as f64 / asked.max(1) as f64),
                format_ns(direct.p50_ns)
            ),
        ],
        missing: vec![
            "why each request was buffered is ZFS's decision (zfs_setup_direct, dmu_write_uio_dnode): zprof sees which path it took, not the reason".into(),
        ],
        action: format!(
            "ZFS takes the direct path for page-aligned requests, and for writes only of a whole record or more: \
             make the dataset's recordsize no larger than the application's {op}s (zfs set recordsize=..., for new files), \
             or count on the ARC's caching and copies in this benchmark's results (direct=disabled makes that explicit)"
        ),
        figures: vec![
            ("buffered_o_direct".into(), buffered.count as f64),
            ("direct_path".into(), direct.count as f64),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guest's Direct I/O run on 2.4.4 (tests/data/README.md).
    fn guest_direct_io() -> Recording {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/guest-2.4.4-direct-io.json"
        ));
        Recording::parse(text, "guest direct I/O").unwrap()
    }

    #[test]
    fn short_o_direct_writes_are_named_and_whole_records_are_not() {
        let rec = guest_direct_io();
        let mut findings = Vec::new();
        direct_io(&rec, &mut findings);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        let std_writes: u64 = rec
            .requests
            .iter()
            .filter(|r| r.dataset == "ft/std" && r.op == "write")
            .map(|r| r.count)
            .sum();
        assert!(f.title.contains("O_DIRECT writes on ft/std"), "{}", f.title);
        assert_eq!(f.figures[0].1, std_writes as f64, "every one was buffered");
        assert_eq!(f.figures[1].1, 0.0);
    }

    #[test]
    fn without_the_direct_path_probe_nothing_is_said() {
        let mut rec = guest_direct_io();
        for p in &mut rec.probes {
            p.attached = false;
        }
        let mut findings = Vec::new();
        direct_io(&rec, &mut findings);
        assert!(findings.is_empty());
    }
}
