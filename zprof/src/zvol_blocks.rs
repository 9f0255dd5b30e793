//! The zvol block-size finding: what a volblocksize larger than the
//! application's requests costs, measured from the request layer (the
//! requests' sizes and each zvol's volblocksize) and the blocks ZFS read from
//! the disks meanwhile (zio_read).
//!
//! A write smaller than a zvol's block changes part of the block, so ZFS must
//! have the whole block: when the ARC does not hold it, it reads it from the
//! disks first (read-modify-write), and the write waits for that read. A read
//! smaller than a block reads the whole block from the disks (read
//! amplification). Block reads are counted per pool, not per zvol: when the
//! recording holds both reads and partial writes, they are shared between the
//! two and the finding says so.

use std::collections::BTreeMap;

use zprof_common::Stage;

use crate::{
    explain::{Confidence, Finding},
    recording::{Recording, pick, summarize},
    report::{format_bytes, format_count},
    requests::RequestRecord,
};

/// One zvol's requests in a recording.
#[derive(Default)]
struct Zvol {
    volblocksize: u64,
    writes: u64,
    write_bytes: u64,
    write_ns: u64,
    reads: u64,
    read_bytes: u64,
    read_ns: u64,
}

fn zvols(requests: &[RequestRecord]) -> BTreeMap<String, Zvol> {
    let mut out: BTreeMap<String, Zvol> = BTreeMap::new();
    for r in requests
        .iter()
        .filter(|r| r.layer == "zvol" && r.volblocksize > 0)
    {
        let zvol = out.entry(r.dataset.clone()).or_default();
        zvol.volblocksize = r.volblocksize;
        match r.op.as_str() {
            "write" => {
                zvol.writes += r.count;
                zvol.write_bytes += r.bytes;
                zvol.write_ns += r.total_ns;
            }
            "read" => {
                zvol.reads += r.count;
                zvol.read_bytes += r.bytes;
                zvol.read_ns += r.total_ns;
            }
            _ => {}
        }
    }
    out
}

/// Findings for zvols written or read in pieces smaller than their blocks.
pub fn findings(rec: &Recording, out: &mut Vec<Finding>) {
    let blocks = summarize(pick(rec, Stage::BlockRead, None, None));
    let request_ns: u64 = rec.requests.iter().map(|r| r.total_ns).sum();
    let any_reads = rec.requests.iter().any(|r| r.op == "read" && r.count > 0);
    for (name, zvol) in zvols(&rec.requests) {
        let block = zvol.volblocksize as f64;
        let mean_write = zvol.write_bytes as f64 / zvol.writes.max(1) as f64;
        let mean_read = zvol.read_bytes as f64 / zvol.reads.max(1) as f64;
        if zvol.writes > 0 && mean_write < block {
            out.push(read_modify_write(
                rec,
                &name,
                &zvol,
                mean_write,
                blocks.count,
                blocks.bytes,
                request_ns,
                any_reads,
            ));
        } else if zvol.reads > 0 && mean_read < block && blocks.count > 0 {
            out.push(read_amplification(
                &name,
                &zvol,
                mean_read,
                blocks.count,
                blocks.bytes,
                request_ns,
            ));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn read_modify_write(
    rec: &Recording,
    name: &str,
    zvol: &Zvol,
    mean_write: f64,
    block_reads: u64,
    block_read_bytes: u64,
    request_ns: u64,
    shared_with_reads: bool,
) -> Finding {
    let per_byte = block_read_bytes as f64 / zvol.write_bytes.max(1) as f64;
    let reads_per_write = block_reads as f64 / zvol.writes as f64;
    let probed = rec
        .probes
        .iter()
        .any(|p| p.function == "zio_read" && p.attached);
    let mut evidence = vec![
        format!(
            "{} writes of {} on average into blocks of {} (volblocksize): each changes {:.0}% of its block",
            format_count(zvol.writes as f64),
            format_bytes(mean_write),
            format_bytes(zvol.volblocksize as f64),
            mean_write * 100.0 / zvol.volblocksize as f64
        ),
        format!(
            "ZFS read {} blocks ({}) from the disks meanwhile: {per_byte:.2} bytes read per byte written, {reads_per_write:.2} block reads per write",
            format_count(block_reads as f64),
            format_bytes(block_read_bytes as f64)
        ),
    ];
    let mut missing = vec![
        "block reads are counted per pool: reads of other datasets in the same pool count too"
            .to_owned(),
    ];
    if shared_with_reads {
        missing.push(
            "the workload also read: those reads' own misses are among the block reads".into(),
        );
    }
    if !probed {
        missing
            .push("zio_read was not probed: the reads the writes caused are not measured".into());
    }
    let (title, confidence) = if block_reads == 0 {
        evidence.push("no block was read: the blocks were in the ARC, or new (holes), so writes did not wait for reads".into());
        (
            format!(
                "zvol {name}: writes smaller than its {} blocks, served without reads",
                format_bytes(zvol.volblocksize as f64)
            ),
            Confidence::Medium,
        )
    } else {
        (
            format!(
                "zvol {name}: read-modify-write: {} writes into {} blocks read {per_byte:.1} bytes per byte written",
                format_bytes(mean_write),
                format_bytes(zvol.volblocksize as f64)
            ),
            if shared_with_reads || !probed {
                Confidence::Low
            } else {
                Confidence::Medium
            },
        )
    };
    let write_share = zvol.write_ns as f64 / request_ns.max(1) as f64;
    Finding {
        kind: "zvol_read_modify_write".into(),
        pool: String::new(),
        title,
        // The writes' share of the requests' time, for the share of writes
        // that had to read their block first.
        share: write_share * reads_per_write.min(1.0),
        confidence,
        evidence,
        missing,
        action: format!(
            "Create the zvol with a volblocksize matching the writes (zfs create -V SIZE -o volblocksize={} ..., then copy the data: it cannot be changed), or keep its blocks in the ARC (primarycache=all, a larger ARC); on raidz, small blocks cost parity and padding instead",
            size_word(mean_write)
        ),
        figures: vec![
            ("read_bytes_per_written_byte".into(), per_byte),
            ("block_reads_per_write".into(), reads_per_write),
            ("volblocksize".into(), zvol.volblocksize as f64),
            ("mean_write_bytes".into(), mean_write),
        ],
    }
}

/// A volblocksize for writes of `bytes`: the power of two at or above it, at
/// least 4k, as zfs(8) spells sizes.
fn size_word(bytes: f64) -> String {
    let size = (bytes.max(4096.0).ceil() as u64).next_power_of_two();
    if size >= 1 << 20 {
        format!("{}M", size >> 20)
    } else {
        format!("{}k", size >> 10)
    }
}

fn read_amplification(
    name: &str,
    zvol: &Zvol,
    mean_read: f64,
    block_reads: u64,
    block_read_bytes: u64,
    request_ns: u64,
) -> Finding {
    let per_byte = block_read_bytes as f64 / zvol.read_bytes.max(1) as f64;
    Finding {
        kind: "zvol_read_amplification".into(),
        pool: String::new(),
        title: format!(
            "zvol {name}: {} reads of {} blocks read {per_byte:.1} bytes from disk per byte asked for",
            format_bytes(mean_read),
            format_bytes(zvol.volblocksize as f64)
        ),
        // The reads' share of the requests' time, for the share of reads that
        // went to the disks.
        share: zvol.read_ns as f64 / request_ns.max(1) as f64 * (block_reads as f64 / zvol.reads as f64).min(1.0),
        confidence: Confidence::Low,
        evidence: vec![
            format!("{} reads of {} on average", format_count(zvol.reads as f64), format_bytes(mean_read)),
            format!("{} blocks ({}) read from the disks", format_count(block_reads as f64), format_bytes(block_read_bytes as f64)),
        ],
        missing: vec!["block reads are counted per pool, and the ARC serves some reads without any".into()],
        action: "A smaller volblocksize reads less per request (set at creation); a larger ARC keeps whole blocks for the next reads".into(),
        figures: vec![("read_bytes_per_requested_byte".into(), per_byte)],
    }
}

#[cfg(test)]
mod tests {
    use super::size_word;

    #[test]
    fn suggested_block_sizes_are_powers_of_two_in_zfs_words() {
        assert_eq!(size_word(4096.0), "4k");
        assert_eq!(size_word(1000.0), "4k");
        assert_eq!(size_word(12_000.0), "16k");
        assert_eq!(size_word(1_048_576.0), "1M");
    }
}
