//! The zvol findings: what a volblocksize larger than the application's
//! requests costs, in words, for the zvols [`crate::analyze::zvol_blocks`]
//! measured (read-modify-write for small writes, read amplification for
//! small reads).

use super::{Confidence, Finding};
use crate::{
    analyze::zvol_blocks::{self, Partial, ZvolBlocks},
    recording::Recording,
    units::{format_bytes, format_count},
};

/// Findings for zvols written or read in pieces smaller than their blocks.
pub(super) fn zvol_blocks(rec: &Recording, out: &mut Vec<Finding>) {
    for zvol in zvol_blocks::measure(rec) {
        out.push(match zvol.partial {
            Partial::Writes => read_modify_write(&zvol),
            Partial::Reads => read_amplification(&zvol),
        });
    }
}

fn read_modify_write(z: &ZvolBlocks) -> Finding {
    let mean_write = z.zvol.mean_write();
    let (title, confidence) = read_modify_write_verdict(z);
    Finding {
        kind: "zvol_read_modify_write".into(),
        pool: String::new(),
        pools: Vec::new(),
        title,
        share: z.read_modify_write_share(),
        confidence,
        evidence: read_modify_write_evidence(z),
        missing: read_modify_write_limits(z),
        action: format!(
            "Create the zvol with a volblocksize matching the writes (zfs create -V SIZE -o volblocksize={} ..., then copy the data: it cannot be changed), or keep its blocks in the ARC (primarycache=all, a larger ARC); on raidz, small blocks cost parity and padding instead",
            size_word(mean_write)
        ),
        figures: vec![
            (
                "read_bytes_per_written_byte".into(),
                z.read_per_written_byte(),
            ),
            ("block_reads_per_write".into(), z.block_reads_per_write()),
            ("volblocksize".into(), z.zvol.volblocksize as f64),
            ("mean_write_bytes".into(), mean_write),
        ],
    }
}

/// The writes, the block reads meanwhile, and when there were none, why.
fn read_modify_write_evidence(z: &ZvolBlocks) -> Vec<String> {
    let zvol = &z.zvol;
    let mean_write = zvol.mean_write();
    let per_byte = z.read_per_written_byte();
    let reads_per_write = z.block_reads_per_write();
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
            format_count(z.block_reads as f64),
            format_bytes(z.block_read_bytes as f64)
        ),
    ];
    if z.block_reads == 0 {
        evidence.push("no block was read: the blocks were in the ARC, or new (holes), so writes did not wait for reads".into());
    }
    evidence
}

/// Why the block reads may not all be the writes'.
fn read_modify_write_limits(z: &ZvolBlocks) -> Vec<String> {
    let mut missing = vec![
        "block reads are counted per pool: reads of other datasets in the same pool count too"
            .to_owned(),
    ];
    if z.workload_read {
        missing.push(
            "the workload also read: those reads' own misses are among the block reads".into(),
        );
    }
    if !z.block_reads_probed {
        missing
            .push("zio_read was not probed: the reads the writes caused are not measured".into());
    }
    missing
}

/// Writes served without reads, or read-modify-write; firmer when the
/// block reads can only be the writes'.
fn read_modify_write_verdict(z: &ZvolBlocks) -> (String, Confidence) {
    let (name, zvol) = (&z.name, &z.zvol);
    if z.block_reads == 0 {
        (
            format!(
                "zvol {name}: writes smaller than its {} blocks, served without reads",
                format_bytes(zvol.volblocksize as f64)
            ),
            Confidence::Medium,
        )
    } else {
        let per_byte = z.read_per_written_byte();
        (
            format!(
                "zvol {name}: read-modify-write: {} writes into {} blocks read {per_byte:.1} bytes per byte written",
                format_bytes(zvol.mean_write()),
                format_bytes(zvol.volblocksize as f64)
            ),
            if z.workload_read || !z.block_reads_probed {
                Confidence::Low
            } else {
                Confidence::Medium
            },
        )
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

fn read_amplification(z: &ZvolBlocks) -> Finding {
    let (name, zvol) = (&z.name, &z.zvol);
    let mean_read = zvol.mean_read();
    let per_byte = z.read_per_requested_byte();
    Finding {
        kind: "zvol_read_amplification".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: format!(
            "zvol {name}: {} reads of {} blocks read {per_byte:.1} bytes from disk per byte asked for",
            format_bytes(mean_read),
            format_bytes(zvol.volblocksize as f64)
        ),
        share: z.read_amplification_share(),
        confidence: Confidence::Low,
        evidence: vec![
            format!("{} reads of {} on average", format_count(zvol.reads as f64), format_bytes(mean_read)),
            format!("{} blocks ({}) read from the disks", format_count(z.block_reads as f64), format_bytes(z.block_read_bytes as f64)),
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
