//! Why a family of findings cannot be split by pool in a recording of
//! several: rows of its stages that name no pool, and why they do not (the
//! probe that would name the pool was not attached, the target counts them
//! where no pool is known). `explain` then runs the family over every pool
//! and the findings say so.

use zprof_common::Stage;

use super::stat;
use crate::recording::{
    Recording, pick,
    pools::{pool_names, workload_split_by_requests},
    summarize,
};

/// Decompressions that name no pool, when `rec` is one pool's part of a
/// recording of several: they are in no pool's read CPU. On zfs.ko an ARC
/// hit decompresses on the reader's thread, inside arc_read, which the
/// kernel target does not probe for each read.
pub(super) fn unpooled_decompression(rec: &Recording, whole: &Recording) -> Option<String> {
    if pool_names(whole).len() < 2 || pool_names(rec).len() != 1 {
        return None;
    }
    let unpooled = summarize(
        pick(whole, Stage::Decompress, None, None)
            .into_iter()
            .filter(|h| h.pool.is_empty()),
    );
    (unpooled.count > 0).then(|| {
        format!(
            "{} decompressions ({} wall time) name no pool (outside the pools' zio threads, such as ARC hits decompressed on the reader's thread, or recorded by an older zprof): they are not in this pool's read CPU",
            crate::units::format_count(unpooled.count as f64),
            crate::units::format_ns(unpooled.total_ns)
        )
    })
}

/// Whether some row of these stages names no pool.
fn has_unpooled(rec: &Recording, stages: &[Stage]) -> bool {
    stages
        .iter()
        .any(|s| pick(rec, *s, None, None).iter().any(|h| h.pool.is_empty()))
}

pub(super) fn compression_unsplit(rec: &Recording) -> Option<String> {
    if !has_unpooled(
        rec,
        &[Stage::Compress, Stage::ZstdCompress, Stage::Lz4Compress],
    ) {
        return None;
    }
    // zio_compress_data is given the data, not the zio: its pool is the one
    // of the zio its thread runs, which only the zio_execute probe sees.
    Some(match execute_unprobed(rec) {
        Some(why) => format!(
            "compression: zio_compress_data is given the data, not the zio, and zio_execute, \
             which names the pool of the zio each thread runs, was not probed ({why})"
        ),
        None => "compression: some of its rows name no pool (compressed outside the pools' zio \
                 threads, as the L2ARC feed does, or recorded by an older zprof, which did not \
                 follow each thread's zio)"
            .into(),
    })
}

pub(super) fn checksum_unsplit(rec: &Recording) -> Option<String> {
    let compute = stat(rec, Stage::ChecksumCompute, None);
    if compute.total_ns == 0 && rec.cpu.is_some() {
        return Some(
            "checksums: their CPU time comes from on-CPU samples, which are the whole host's"
                .into(),
        );
    }
    has_unpooled(rec, &[Stage::ChecksumCompute, Stage::ChecksumVerify])
        .then(|| "checksums: some of their rows name no pool".into())
}

pub(super) fn writes_unsplit(rec: &Recording) -> Option<String> {
    workload_unsplit(rec, Stage::WorkloadWrite, "writes", "dmu_write_uio_dnode")
}

pub(super) fn reads_unsplit(rec: &Recording) -> Option<String> {
    workload_unsplit(rec, Stage::WorkloadRead, "reads", "dmu_read_uio_dnode")
}

/// The workload's reads or writes name no pool on the kernel target, where
/// they are counted in the file layer; the request rows, which name their
/// dataset, stand for them per pool when every request does.
fn workload_unsplit(rec: &Recording, stage: Stage, what: &str, counted_at: &str) -> Option<String> {
    (has_unpooled(rec, &[stage]) && !workload_split_by_requests(rec, stage)).then(|| {
        format!(
            "the workload's {what}: on this target they are counted where the file layer calls \
             {counted_at}, which carries no pool, and the request rows, which name their \
             dataset, were not recorded for every one (no request offsets, or rows folded \
             beyond the row limit)"
        )
    })
}

pub(super) fn dedup_unsplit(rec: &Recording) -> Option<String> {
    has_unpooled(rec, &[Stage::DdtLookup]).then(|| match execute_unprobed(rec) {
        Some(why) => format!(
            "dedup table lookups: their pool is the one of the zio their thread runs, and \
                 zio_execute was not probed ({why})"
        ),
        None => "dedup table lookups: some name no pool (outside the pools' zio threads, or \
                     recorded by an older zprof)"
            .into(),
    })
}

/// Why zio_execute, which names the pool of compressions and dedup lookups,
/// was not probed, when it was not.
fn execute_unprobed(rec: &Recording) -> Option<&str> {
    rec.probes
        .iter()
        .find(|p| p.function == "zio_execute" && !p.attached)
        .map(|p| {
            p.reason
                .as_deref()
                .map_or("no reason given", |r| r.trim_start_matches("not needed: "))
        })
}
