//! The read path as zprof measured it: how many of the workload's reads
//! reached the disks, how wide each block read was, and how long a read waited
//! for its slowest leaf. The model behind `explain`'s reads finding.
//!
//! A block read from the disks (`block_read`, zio_read: an ARC miss, a
//! prefetch) fans out over a RAID-Z's data columns: a 1M block on an 8-wide
//! raidz3 is 5 leaf reads of about 205K, issued together, and the block is
//! there when the slowest of them is. So:
//! - the fan-out is the leaf reads (sync and async) per block read from disk
//!   (embedded block pointers, whose data is in the pointer, are not
//!   counted), at least 1 and at most the number of leaves that read;
//! - the blocks a workload read waited for are the blocks read times the
//!   sync share of the leaf reads (the rest are prefetch);
//! - a block's device time is the expected maximum of fan-out draws from the
//!   leaves' sync-read time histogram, not its median.
//!
//! Sync reads are the ones a reader waits for; async reads are prefetch and
//! ZFS's own, shown apart.

use zprof_common::Stage;

use crate::{
    recording::classes::{COUNT_ONLY, block_class_bytes},
    recording::{HistRecord, Recording, Summary, bucket_midpoint, pick, summarize},
};

/// The read path of a recording: of one pool when the recording is one
/// pool's part ([`crate::recording::pools::restrict`]), else of all pools
/// together (the kernel's file reads name no pool).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPath {
    /// The workload's reads (count, bytes; latency when timed).
    pub reads: Summary,
    /// Whether the reads carry their latency (not counted at entry only).
    pub timed: bool,
    /// Blocks read from the disks (zio_read), when the probe ran.
    pub blocks: Option<Summary>,
    /// Byte-weighted mean physical size of those blocks.
    pub block_bytes: f64,
    /// Leaf sync reads: their disk time (io_delay).
    pub leaf_disk: Summary,
    /// Leaf sync reads: their queue wait.
    pub leaf_queue: Summary,
    /// Leaf async reads (prefetch, ZFS's own).
    pub leaf_async_reads: u64,
    /// Leaves that served sync reads.
    pub leaves: usize,
    /// Leaf reads per block read (1 on a mirror, the data columns on RAID-Z).
    pub fan_out: u64,
    /// Blocks read from disk for the workload's reads (sync), per read.
    pub blocks_per_read: f64,
    /// Expected device time of one block: the slowest of its leaf reads.
    pub block_disk_ns: f64,
    /// Device time (queue wait and disk) a read waits for, on average.
    pub device_per_read_ns: f64,
    /// Decompression and checksum verification per read, ns.
    pub cpu_per_read_ns: f64,
    /// Where the ARC served block reads from, when arc_read was probed.
    pub arc: Option<ArcSplit>,
    /// Sync reads of cache devices (L2ARC) as their leaves did them: the
    /// ARC's misses a cache device served, whether or not arc_read was probed.
    pub cache_sync_reads: Summary,
}

/// ARC reads by where they were served from (arc_read, all readers: the
/// workload's, prefetch, ZFS's own metadata reads), as ZFS's arcstats count
/// them: hits, misses (L2ARC hits and disk reads together), L2ARC hits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArcSplit {
    /// Demand reads: found in the ARC, found in flight, from a cache device, from disk.
    pub demand: ArcPaths,
    /// Prefetch reads, the same way.
    pub prefetch: ArcPaths,
    /// Reads of cache devices as their leaves did them (libzpool: the leaves
    /// are known to be cache devices there), with their disk time.
    pub cache_device_reads: Summary,
}

/// Reads per path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ArcPaths {
    /// Served by the ARC.
    pub hit: u64,
    /// Of the hits, on buffers the dbuf layer held (no arc_read).
    pub held: u64,
    /// Found a read of the block in flight.
    pub in_flight: u64,
    /// Read from a cache device.
    pub l2: u64,
    /// Read from the pool's disks.
    pub disk: u64,
}

impl ArcPaths {
    /// Every read of this kind.
    pub fn total(&self) -> u64 {
        self.hit + self.in_flight + self.l2 + self.disk
    }

    fn add(&mut self, class: u32, count: u64) {
        use zprof_common::arc_read_class as c;
        if class & c::HELD != 0 {
            self.held += count;
        }
        match class & c::PATH {
            c::HIT => self.hit += count,
            c::IN_FLIGHT => self.in_flight += count,
            c::L2 => self.l2 += count,
            _ => self.disk += count,
        }
    }
}

impl ArcSplit {
    /// The split of `rec`'s arc_read rows, or `None` when arc_read was not probed.
    pub fn measure(rec: &Recording) -> Option<ArcSplit> {
        use zprof_common::arc_read_class as c;
        if !rec.probes.iter().any(|p| {
            (p.function == "arc_read" || p.function == "spa_read_history_add") && p.attached
        }) {
            return None;
        }
        let cache_reads = rec.histograms.iter().filter(|h| {
            h.stage == crate::recording::stage_name(Stage::VdevDisk)
                && h.class & zprof_common::VDEV_CACHE_DEVICE != 0
                && !crate::zfs::names::io_class_is_write(h.class)
        });
        let mut split = ArcSplit {
            cache_device_reads: summarize(cache_reads),
            ..ArcSplit::default()
        };
        for row in pick(rec, Stage::ArcRead, None, None) {
            let paths = if row.class & c::PREFETCH != 0 {
                &mut split.prefetch
            } else {
                &mut split.demand
            };
            paths.add(row.class, row.count);
        }
        Some(split)
    }

    /// Every ARC read.
    pub fn all(&self) -> ArcPaths {
        ArcPaths {
            hit: self.demand.hit + self.prefetch.hit,
            held: self.demand.held + self.prefetch.held,
            in_flight: self.demand.in_flight + self.prefetch.in_flight,
            l2: self.demand.l2 + self.prefetch.l2,
            disk: self.demand.disk + self.prefetch.disk,
        }
    }
}

impl ReadPath {
    /// The read path of `rec`, or `None` when the workload read nothing.
    pub fn measure(rec: &Recording) -> Option<ReadPath> {
        let read_rows = pick(rec, Stage::WorkloadRead, None, None);
        let reads = summarize(read_rows.iter().copied());
        if reads.count == 0 {
            return None;
        }
        let timed =
            reads.total_ns > 0 && !read_rows.iter().all(|h| h.class_name.ends_with(COUNT_ONLY));
        let block_rows = pick(rec, Stage::BlockRead, None, None);
        let blocks = (!block_rows.is_empty()).then(|| summarize(block_rows.iter().copied()));
        let leaf_rows = pick(rec, Stage::VdevDisk, None, Some("sync read"));
        let leaf_disk = summarize(leaf_rows.iter().copied());
        let leaf_queue = summarize(pick(rec, Stage::VdevQueue, None, Some("sync read")));
        let leaf_async_reads =
            summarize(pick(rec, Stage::VdevTotal, None, Some("async read"))).count;
        let leaves = leaf_rows
            .iter()
            .filter(|h| h.count > 0)
            .map(|h| (&h.pool, h.vdev))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let block_bytes = weighted_block_bytes(&block_rows);
        let leaf_reads = leaf_disk.count + leaf_async_reads;
        let fan_out = fan_out(blocks.as_ref().map_or(0, |b| b.count), leaf_reads, leaves);
        let sync_share = if leaf_reads == 0 {
            0.0
        } else {
            leaf_disk.count as f64 / leaf_reads as f64
        };
        let sync_blocks = match (sync_block_reads(rec), &blocks) {
            (Some(n), _) => n as f64,
            (None, Some(b)) => b.count as f64 * sync_share,
            (None, None) => leaf_disk.count as f64,
        };
        let blocks_per_read = sync_blocks / reads.count as f64;
        let block_disk_ns = expected_max(&leaf_rows, fan_out);
        let queue_mean = leaf_queue.mean_ns;
        let device_per_read_ns = blocks_per_read * (block_disk_ns + queue_mean);
        let cpu = [Stage::Decompress, Stage::ChecksumVerify]
            .iter()
            .map(|s| summarize(pick(rec, *s, None, None)).total_ns as f64)
            .sum::<f64>();
        let cache_sync_reads = summarize(rec.histograms.iter().filter(|h| {
            h.stage == crate::recording::stage_name(Stage::VdevDisk)
                && h.class & zprof_common::VDEV_CACHE_DEVICE != 0
                && h.class_name.starts_with("sync read")
        }));
        Some(ReadPath {
            cache_sync_reads,
            arc: ArcSplit::measure(rec),
            cpu_per_read_ns: cpu / reads.count as f64,
            reads,
            timed,
            blocks,
            block_bytes,
            leaf_disk,
            leaf_queue,
            leaf_async_reads,
            leaves,
            fan_out,
            blocks_per_read,
            block_disk_ns,
            device_per_read_ns,
        })
    }

    /// Leaf bytes read (sync) per byte the workload asked for.
    pub fn amplification(&self) -> f64 {
        if self.reads.bytes == 0 {
            0.0
        } else {
            self.leaf_disk.bytes as f64 / self.reads.bytes as f64
        }
    }

    /// Cache-device (L2ARC) sync reads per workload read.
    pub fn cache_reads_per_read(&self) -> f64 {
        self.cache_sync_reads.count as f64 / self.reads.count.max(1) as f64
    }

    /// Mean size of one workload read.
    pub fn read_bytes(&self) -> f64 {
        self.reads.bytes as f64 / self.reads.count.max(1) as f64
    }
}

/// Byte-weighted mean physical size of the blocks read: a block's weight is
/// its size, so a thousand 512-byte metadata reads do not hide the 1M data
/// blocks that carry the bytes. Within a size class the class's own mean
/// size stands for each block.
fn weighted_block_bytes(block_rows: &[&HistRecord]) -> f64 {
    let physical: f64 = block_rows.iter().map(|h| h.bytes_out as f64).sum();
    if physical == 0.0 {
        return 0.0;
    }
    block_rows
        .iter()
        .filter(|h| h.count > 0)
        .map(|h| {
            let mean = (h.bytes_out as f64 / h.count as f64).min(block_class_bytes(h.class) as f64);
            h.bytes_out as f64 * mean
        })
        .sum::<f64>()
        / physical
}

/// Blocks read from disk at sync priority (the reads someone waited for),
/// where zio_read's priority was read (libzpool): exact, where the share of
/// sync leaf reads is not when prefetch reads aggregate into fewer leaf
/// reads than blocks.
fn sync_block_reads(rec: &Recording) -> Option<u64> {
    use zprof_common::miss_reuse_class as c;
    let rows = pick(rec, Stage::ArcMissReuse, None, None);
    if rows.is_empty() || rows.iter().any(|h| h.class & c::PRIORITY_UNKNOWN != 0) {
        return None;
    }
    Some(
        rows.iter()
            .filter(|h| h.class & c::ASYNC == 0)
            .map(|h| h.count)
            .sum(),
    )
}

/// Leaf reads per block read, between 1 and the leaves that read. Without
/// the blocks-read probe it is 1 (every leaf read taken as its own block).
fn fan_out(blocks: u64, leaf_reads: u64, leaves: usize) -> u64 {
    if blocks == 0 || leaf_reads == 0 {
        return 1;
    }
    ((leaf_reads as f64 / blocks as f64).round() as u64).clamp(1, leaves.max(1) as u64)
}

/// Expected maximum of `k` independent draws from the merged histograms:
/// sum over buckets of value x (F(b)^k - F(b-1)^k), with each bucket's
/// midpoint as its value, scaled by the histograms' exact mean over the
/// midpoints' mean (a bucket is 1/8 of a power of two wide: 2 ms at 16 ms,
/// so midpoints alone were off by up to 6% where the values sat low in
/// their buckets).
pub fn expected_max(records: &[&HistRecord], k: u64) -> f64 {
    let mut merged = std::collections::BTreeMap::<u64, u64>::new();
    let (mut max_ns, mut total_ns) = (0, 0u64);
    for r in records {
        max_ns = max_ns.max(r.max_ns);
        total_ns = total_ns.saturating_add(r.total_ns);
        for [index, count] in &r.buckets {
            *merged.entry(*index).or_default() += count;
        }
    }
    let total: u64 = merged.values().sum();
    if total == 0 {
        return 0.0;
    }
    let (mut below, mut expected, mut midpoint_sum) = (0u64, 0f64, 0f64);
    for (index, count) in merged {
        let mid = bucket_midpoint(index as usize, max_ns) as f64;
        midpoint_sum += mid * count as f64;
        let before = (below as f64 / total as f64).powi(k as i32);
        below += count;
        let after = (below as f64 / total as f64).powi(k as i32);
        expected += mid * (after - before);
    }
    // Without exact totals (a row counted at entry only) midpoints stand.
    if total_ns == 0 || midpoint_sum == 0.0 {
        return expected;
    }
    expected * (total_ns as f64 / total as f64) / (midpoint_sum / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zprof_common::hist_bucket;

    fn hist(values: &[(u64, u64)]) -> HistRecord {
        let mut buckets = std::collections::BTreeMap::<u64, u64>::new();
        for (value, count) in values {
            *buckets.entry(hist_bucket(*value) as u64).or_default() += count;
        }
        HistRecord {
            stage: "vdev_disk".into(),
            class: 0,
            class_name: "sync read".into(),
            pool: "p".into(),
            vdev: 1,
            count: values.iter().map(|v| v.1).sum(),
            total_ns: values.iter().map(|v| v.0 * v.1).sum(),
            bytes: 0,
            bytes_out: 0,
            max_ns: values.iter().map(|v| v.0).max().unwrap_or(0),
            buckets: buckets.into_iter().map(|(i, c)| [i, c]).collect(),
        }
    }

    #[test]
    fn a_wide_block_waits_for_its_slowest_leaf() {
        // Half the leaf reads take 1 ms, half 9 ms: one leaf is 5 ms on
        // average, but 5 together are all fast only 1 time in 32.
        let h = hist(&[(1_000_000, 50), (9_000_000, 50)]);
        let one = expected_max(&[&h], 1);
        let five = expected_max(&[&h], 5);
        assert!(
            (one / 5e6 - 1.0).abs() < 1e-9,
            "one draw is the exact mean: {one}"
        );
        let exact = 1e6 / 32.0 + 9e6 * 31.0 / 32.0;
        assert!((five / exact - 1.0).abs() < 0.02, "{five} vs {exact}");
    }

    #[test]
    fn fan_out_is_leaf_reads_per_block() {
        // A randread on an 8-wide raidz3 with a 1M volblocksize: 381 blocks
        // read, 1,965 leaf reads (5 data columns each).
        assert_eq!(fan_out(381, 1965, 8), 5);
        assert_eq!(fan_out(381, 1965, 3), 3);
        assert_eq!(fan_out(0, 1965, 8), 1);
        assert_eq!(fan_out(428, 300, 8), 1);
    }

    #[test]
    fn block_size_follows_the_bytes_not_the_small_blocks() {
        let row = |class: u32, count: u64, bytes: u64| HistRecord {
            stage: "block_read".into(),
            class: 0x100 | class,
            class_name: String::new(),
            pool: "p".into(),
            vdev: 0,
            count,
            total_ns: 0,
            bytes,
            bytes_out: bytes,
            max_ns: 0,
            buckets: Vec::new(),
        };
        let blocks = [row(12, 7, 7 * 4096), row(20, 221, 221 << 20)];
        let weighted = weighted_block_bytes(&blocks.iter().collect::<Vec<_>>());
        assert!(
            weighted > 1_040_000.0 && weighted <= 1_048_576.0,
            "{weighted}"
        );
    }
}
