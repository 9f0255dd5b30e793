//! The zvol block-size measurement behind `explain`'s zvol findings: which
//! zvols the application wrote or read in pieces smaller than their blocks,
//! from the request layer (the requests' sizes and each zvol's
//! volblocksize), and the blocks ZFS read from the disks meanwhile
//! (zio_read). The findings' words are in `findings/zvol.rs`.
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
    recording::requests::RequestRecord,
    recording::{Recording, pick, summarize},
};

/// One zvol's requests in a recording.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Zvol {
    /// Its volblocksize, bytes.
    pub volblocksize: u64,
    /// Writes to it.
    pub writes: u64,
    /// Their bytes.
    pub write_bytes: u64,
    /// Their time, ns.
    pub write_ns: u64,
    /// Reads from it.
    pub reads: u64,
    /// Their bytes.
    pub read_bytes: u64,
    /// Their time, ns.
    pub read_ns: u64,
}

impl Zvol {
    /// Mean write, bytes.
    pub fn mean_write(&self) -> f64 {
        self.write_bytes as f64 / self.writes.max(1) as f64
    }

    /// Mean read, bytes.
    pub fn mean_read(&self) -> f64 {
        self.read_bytes as f64 / self.reads.max(1) as f64
    }
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

/// Which of a zvol's requests are smaller than its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partial {
    /// Its writes: each needs its whole block (read-modify-write).
    Writes,
    /// Its reads (its writes being whole blocks, or none), with blocks read
    /// from the disks: each reads a whole block (read amplification).
    Reads,
}

/// A zvol whose requests are smaller than its blocks, and what ZFS read
/// from the disks meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct ZvolBlocks {
    /// The zvol (its dataset name).
    pub name: String,
    /// Its requests.
    pub zvol: Zvol,
    /// Which requests are smaller than its blocks.
    pub partial: Partial,
    /// Blocks read from the disks (zio_read): the pool's, not only this zvol's.
    pub block_reads: u64,
    /// Their bytes.
    pub block_read_bytes: u64,
    /// Every request's time in the recording, ns: what the shares are of.
    pub request_ns: u64,
    /// Whether the workload also read: those reads' own misses are among the
    /// block reads.
    pub workload_read: bool,
    /// Whether zio_read was probed: without it the block reads are not measured.
    pub block_reads_probed: bool,
}

impl ZvolBlocks {
    /// Bytes read from the disks per byte written.
    pub fn read_per_written_byte(&self) -> f64 {
        self.block_read_bytes as f64 / self.zvol.write_bytes.max(1) as f64
    }

    /// Blocks read from the disks per write (only for [`Partial::Writes`],
    /// where there are writes).
    pub fn block_reads_per_write(&self) -> f64 {
        self.block_reads as f64 / self.zvol.writes as f64
    }

    /// The writes' share of the requests' time, for the share of writes
    /// that had to read their block first.
    pub fn read_modify_write_share(&self) -> f64 {
        let write_share = self.zvol.write_ns as f64 / self.request_ns.max(1) as f64;
        write_share * self.block_reads_per_write().min(1.0)
    }

    /// Bytes read from the disks per byte the reads asked for.
    pub fn read_per_requested_byte(&self) -> f64 {
        self.block_read_bytes as f64 / self.zvol.read_bytes.max(1) as f64
    }

    /// The reads' share of the requests' time, for the share of reads that
    /// went to the disks (only for [`Partial::Reads`], where there are reads).
    pub fn read_amplification_share(&self) -> f64 {
        self.zvol.read_ns as f64 / self.request_ns.max(1) as f64
            * (self.block_reads as f64 / self.zvol.reads as f64).min(1.0)
    }
}

/// The zvols of `rec` written or read in pieces smaller than their blocks,
/// by name. A zvol with partial writes is about them, whatever its reads.
pub fn measure(rec: &Recording) -> Vec<ZvolBlocks> {
    let blocks = summarize(pick(rec, Stage::BlockRead, None, None));
    let request_ns: u64 = rec.requests.iter().map(|r| r.total_ns).sum();
    let workload_read = rec.requests.iter().any(|r| r.op == "read" && r.count > 0);
    let block_reads_probed = rec
        .probes
        .iter()
        .any(|p| p.function == "zio_read" && p.attached);
    zvols(&rec.requests)
        .into_iter()
        .filter_map(|(name, zvol)| {
            let block = zvol.volblocksize as f64;
            let partial = if zvol.writes > 0 && zvol.mean_write() < block {
                Partial::Writes
            } else if zvol.reads > 0 && zvol.mean_read() < block && blocks.count > 0 {
                Partial::Reads
            } else {
                return None;
            };
            Some(ZvolBlocks {
                name,
                zvol,
                partial,
                block_reads: blocks.count,
                block_read_bytes: blocks.bytes,
                request_ns,
                workload_read,
                block_reads_probed,
            })
        })
        .collect()
}
