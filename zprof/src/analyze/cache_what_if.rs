//! The cache what-if: what a cache device (L2ARC), or that much more ARC,
//! would have served of a run's reads from disk, and the read rate that
//! follows, as the SLOG what-if does for sync writes.
//!
//! The model. Every block read from disk carries its reuse distance: the
//! bytes read from disk (by anything) since its own previous read from disk
//! (stage `arc_miss_reuse`, measured in the kernel from a hash of the block's
//! address). A cache of S bytes that takes every block the ARC evicts, in
//! eviction order, and drops the oldest when full (the L2ARC's ring: what the
//! feed writes, in the order it writes it) keeps a block while S bytes of
//! other blocks are written after it. With the cache, only the reads it does
//! not serve go to disk and are written to it, so a share `h` served makes
//! the ring turn over `1 / (1 - h)` times slower: a block is kept while
//! `S / (1 - h)` bytes of this run's reads from disk go by, and
//! `h = F(S / (1 - h))`, F being the share of reads from disk whose distance
//! is at most that. The fixed point is found by iteration. The sync reads
//! it serves are judged on the distances of the workload's steady seconds
//! (the timeline keeps them per second), not on a warm-up's.
//!
//! What it leaves out, said in the finding: it is conservative where a block
//! also sat in the ARC for a while before its eviction (it counts the whole
//! distance against the cache); a block served by the cache several times is
//! credited as if written at its previous read; the feed is assumed to keep
//! up (its rate is printed against ZFS's default of 8 MiB/s); first reads
//! are never served, so a run too short to read blocks again predicts
//! nothing: warm the cache the way the measured run will be warmed.

use serde::Serialize;
use zprof_common::{Stage, hist_bucket_high, hist_bucket_low, miss_reuse_class};

use crate::analyze::read_path::ReadPath;
use crate::recording::{HistRecord, Recording, pick};

/// A cache to predict with (`--what-if l2arc=SIZE[,ssd|nvme]`, `--what-if arc=+SIZE`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CacheSpec {
    /// What kind of cache: "L2ARC (ssd)", "L2ARC (nvme)", "more ARC".
    pub kind: &'static str,
    /// Its size, bytes.
    pub bytes: u64,
    /// Fixed latency of one read from it, ns.
    pub access_ns: f64,
    /// Its transfer rate, bytes per second (0: free, memory).
    pub bytes_per_s: f64,
}

impl CacheSpec {
    /// An SSD cache device, from Intel's DC S3700 datasheet (a SATA SSD):
    /// 50 us per 4k read ("latency, read") and 500 MB/s sequential reads.
    /// Vendors' figures, not the lab's `ssd` model, which the tests compare
    /// the prediction against.
    pub fn ssd(bytes: u64) -> CacheSpec {
        CacheSpec {
            kind: "L2ARC (ssd)",
            bytes,
            access_ns: 50_000.0,
            bytes_per_s: 500e6,
        }
    }

    /// An NVMe cache device, from Intel's DC P3700 datasheet: 20 us per
    /// read and 2,800 MB/s sequential reads.
    pub fn nvme(bytes: u64) -> CacheSpec {
        CacheSpec {
            kind: "L2ARC (nvme)",
            bytes,
            access_ns: 20_000.0,
            bytes_per_s: 2800e6,
        }
    }

    /// More ARC: a read it serves costs what a hit costs, already in the
    /// run's time outside the devices.
    pub fn more_arc(bytes: u64) -> CacheSpec {
        CacheSpec {
            kind: "more ARC",
            bytes,
            access_ns: 0.0,
            bytes_per_s: 0.0,
        }
    }

    /// Time to read a block of `bytes` from it.
    pub fn read_ns(&self, bytes: f64) -> f64 {
        self.access_ns
            + if self.bytes_per_s > 0.0 {
                bytes / self.bytes_per_s * 1e9
            } else {
                0.0
            }
    }
}

/// Parses the cache part of `--what-if`: `l2arc=SIZE`, `l2arc=SIZE,nvme`, `arc=+SIZE`.
pub fn parse_cache(s: &str) -> Option<Result<CacheSpec, String>> {
    let bad = || {
        format!(
            "invalid --what-if '{s}': use l2arc=SIZE, l2arc=SIZE,ssd, l2arc=SIZE,nvme or arc=+SIZE (e.g. l2arc=100g)"
        )
    };
    if let Some(rest) = s.strip_prefix("l2arc=") {
        let (size, device) = rest.split_once(',').unwrap_or((rest, "ssd"));
        let Some(bytes) = parse_size(size) else {
            return Some(Err(bad()));
        };
        return Some(match device {
            "ssd" => Ok(CacheSpec::ssd(bytes)),
            "nvme" => Ok(CacheSpec::nvme(bytes)),
            _ => Err(bad()),
        });
    }
    let rest = s.strip_prefix("arc=")?;
    Some(
        rest.strip_prefix('+')
            .and_then(parse_size)
            .map(CacheSpec::more_arc)
            .ok_or_else(bad),
    )
}

/// `512m`, `100g`, `1t`, `4096`: bytes, more than 0.
fn parse_size(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale: u64 = match unit
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|b| *b > 0)
}

/// The reuse distances of a run's reads from disk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReuseCurve {
    /// Re-reads of every priority: (lowest, highest distance of a bucket, reads).
    all: Vec<(f64, f64, f64)>,
    /// Every read from disk.
    pub all_reads: u64,
    /// Re-reads at sync priority (the workload waited for them), the same way.
    sync: Vec<(f64, f64, f64)>,
    /// Reads from disk at sync priority (all reads when the priority is unknown).
    pub sync_reads: u64,
    /// Reads of blocks not read from disk before: never served by a cache.
    pub first_reads: u64,
    /// Their bytes: the distinct data this run read from disk.
    pub first_bytes: u64,
    /// Whether sync reads were told apart (libzpool; not yet on the kernel).
    pub priority_known: bool,
}

impl ReuseCurve {
    /// The curve of `rec`, or `None` when it has no reuse distances (an older zprof).
    pub fn measure(rec: &Recording) -> Option<ReuseCurve> {
        use miss_reuse_class as c;
        let rows = pick(rec, Stage::ArcMissReuse, None, None);
        if rows.is_empty() {
            return None;
        }
        let mut curve = ReuseCurve {
            priority_known: rows.iter().all(|h| h.class & c::PRIORITY_UNKNOWN == 0),
            ..ReuseCurve::default()
        };
        for row in rows {
            let sync = row.class & c::ASYNC == 0;
            curve.all_reads += row.count;
            if sync {
                curve.sync_reads += row.count;
            }
            if row.class & c::FIRST != 0 {
                curve.first_reads += row.count;
                curve.first_bytes += row.bytes;
                continue;
            }
            let buckets = spans(row);
            if sync {
                curve.sync.extend(buckets.iter().copied());
            }
            curve.all.extend(buckets);
        }
        Some(curve)
    }

    /// Re-reads of blocks read from disk before.
    pub fn re_reads(&self) -> u64 {
        self.all_reads - self.first_reads
    }

    /// Sync reads of blocks read from disk before.
    pub fn sync_re_reads(&self) -> u64 {
        self.sync.iter().map(|s| s.2 as u64).sum()
    }

    /// What a cache of `bytes` would have served at the model's fixed point
    /// (see the module's text): the share of all reads from disk, and how
    /// far back (bytes read from disk) it keeps a block.
    pub fn served(&self, bytes: f64) -> (f64, f64) {
        let keep = |h: f64| bytes / (1.0 - h).max(1e-3);
        let mut h = 0.0;
        for _ in 0..200 {
            let next = within(&self.all, self.all_reads, keep(h));
            let done = (next - h).abs() < 1e-9;
            h = next;
            if done {
                break;
            }
        }
        (h, keep(h))
    }

    /// Share of the sync re-reads within `keep` bytes of their previous read.
    pub fn sync_re_reads_within(&self, keep: f64) -> f64 {
        within(&self.sync, self.sync_re_reads(), keep)
    }
}

/// A row's buckets as (lowest, highest value, count); the last bucket's top is the row's maximum.
fn spans(row: &HistRecord) -> Vec<(f64, f64, f64)> {
    row.buckets
        .iter()
        .map(|[index, count]| {
            let low = hist_bucket_low(*index as usize);
            let high = hist_bucket_high(*index as usize).min(row.max_ns.max(low));
            (low as f64, high as f64, *count as f64)
        })
        .collect()
}

/// Share of `total` reads whose distance is at most `x`, spreading each
/// bucket's reads evenly over its range.
fn within(spans: &[(f64, f64, f64)], total: u64, x: f64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    let reads: f64 = spans
        .iter()
        .map(|&(low, high, count)| {
            if x >= high {
                count
            } else if x < low {
                0.0
            } else {
                count * (x - low + 1.0) / (high - low + 1.0)
            }
        })
        .sum();
    reads / total as f64
}

/// What one cache would have changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CachePrediction {
    /// The cache.
    pub spec: CacheSpec,
    /// Share of all reads from disk it would have served.
    pub served_all: f64,
    /// Share of the sync reads from disk (those the workload waited for).
    pub served_sync: f64,
    /// The workload's read rate in the run (steady seconds), per second.
    pub rate_before: f64,
    /// The rate predicted with the cache.
    pub rate_after: f64,
    /// Mean time per read in the run, ns.
    pub read_before_ns: f64,
    /// Predicted mean time per read, ns.
    pub read_after_ns: f64,
    /// One block's read from the cache, ns.
    pub cache_read_ns: f64,
    /// Bytes per second the feed must write to keep the cache filled at the
    /// predicted rate (the blocks still read from disk).
    pub feed_bytes_per_s: f64,
    /// The run's timed reads: served from memory (mean ns), waited for a
    /// disk (mean ns), and the share that waited.
    pub split: Option<(f64, f64, f64)>,
    /// Whether the rate is capped by the CPUs: each read needs at least what
    /// a read served from memory took, on one of `cpus`.
    pub cpu_bound: bool,
    /// The CPUs it assumed.
    pub cpus: usize,
}

/// The prediction for `spec`, or `None` when the run read nothing from disk.
///
/// Over the workload's steady seconds (see [`Window`]): a read served from
/// memory takes what the run's fast reads took; one that waited for the
/// disks, that plus the disk wait; the cache turns the served share of the
/// waits into a read of the same blocks from it. Readers keep as many reads
/// in flight as in the run, so the rate scales with the inverse of the time
/// per read.
pub fn predict(
    rec: &Recording,
    path: &ReadPath,
    curve: &ReuseCurve,
    spec: CacheSpec,
    cpus: usize,
) -> Option<CachePrediction> {
    if curve.all_reads == 0 || path.blocks_per_read <= 0.0 {
        return None;
    }
    let window = Window::of(rec);
    let (blocks_per_read, re_read_share) = sync_disk_reads(window.as_ref(), path, curve);
    let (served_all, keep) = curve.served(spec.bytes as f64);
    // The steady seconds' own distances where the recording has them: a
    // warm-up's re-reads (prefetched blocks the ARC dropped before the
    // reader came, read again a few MiB later) are not the workload's.
    let within_keep = window
        .as_ref()
        .and_then(|w| w.sync_re_reads_within(keep))
        .unwrap_or_else(|| curve.sync_re_reads_within(keep));
    let served_sync = re_read_share * within_keep;
    let cache_read_ns = spec.read_ns(path.block_bytes);
    let split = ReadSplit::of(rec, path);
    let (read_before_ns, read_after_ns) = match split {
        Some(split) => split.read_times(blocks_per_read, served_sync, cache_read_ns),
        None => unsplit_read_times(path, blocks_per_read, served_sync, cache_read_ns),
    };
    let rate_before = window.as_ref().map_or_else(
        || whole_run_read_rate(rec),
        |w| w.reads as f64 / w.seconds as f64,
    );
    let (rate_after, cpu_bound) =
        rate_with_cache(rate_before, read_before_ns, read_after_ns, split, cpus);
    let feed_bytes_per_s = rate_after * blocks_per_read * (1.0 - served_sync) * path.block_bytes;
    Some(CachePrediction {
        spec,
        served_all,
        served_sync,
        rate_before,
        rate_after,
        read_before_ns,
        read_after_ns,
        cache_read_ns,
        feed_bytes_per_s,
        split: split.map(|s| (s.hit_ns, s.miss_ns, s.miss_share)),
        cpu_bound,
        cpus,
    })
}

/// Blocks read from disk at sync priority per read, and the share of them
/// that were read before (which a cache can serve): over the steady seconds
/// when they saw such reads, else over the whole run.
fn sync_disk_reads(window: Option<&Window>, path: &ReadPath, curve: &ReuseCurve) -> (f64, f64) {
    match window {
        Some(w) if w.sync_disk_reads > 0 => (
            w.sync_disk_reads as f64 / w.reads as f64,
            (w.sync_disk_reads - w.sync_first_reads.min(w.sync_disk_reads)) as f64
                / w.sync_disk_reads as f64,
        ),
        _ => (
            path.blocks_per_read,
            curve.sync_re_reads() as f64 / curve.sync_reads.max(1) as f64,
        ),
    }
}

/// A read's mean time before and with the cache when the reads cannot be
/// split (untimed, or no leaf reads): the cache takes the served blocks'
/// device time and gives back its own read, never below one cache read.
fn unsplit_read_times(
    path: &ReadPath,
    blocks_per_read: f64,
    served_sync: f64,
    cache_read_ns: f64,
) -> (f64, f64) {
    let before = if path.timed {
        path.reads.mean_ns
    } else {
        path.device_per_read_ns + path.cpu_per_read_ns
    };
    let device_per_block = path.block_disk_ns + path.leaf_queue.mean_ns;
    (
        before,
        (before - blocks_per_read * served_sync * (device_per_block - cache_read_ns))
            .max(cache_read_ns),
    )
}

/// The read rate with the cache, and whether the CPUs cap it: readers keep
/// as many reads in flight as before, so the rate scales with the inverse of
/// the time per read, up to what the CPUs can serve.
fn rate_with_cache(
    rate_before: f64,
    read_before_ns: f64,
    read_after_ns: f64,
    split: Option<ReadSplit>,
    cpus: usize,
) -> (f64, bool) {
    let concurrency_bound = if read_after_ns > 0.0 {
        rate_before * read_before_ns / read_after_ns
    } else {
        0.0
    };
    // A read served from memory is CPU work from start to end: at most
    // `cpus` of them at once. (A lower bound on a read's CPU: the I/O it
    // issues costs other threads' time too.)
    let cpu_bound_rate = split.map_or(f64::INFINITY, |s| {
        cpus.max(1) as f64 * 1e9 / s.hit_ns.max(1.0)
    });
    // The run itself served `rate_before`: a cap below it is the model's
    // error (a split that took waits for memory reads), and a cache does not
    // slow reads down.
    let cpu_bound_rate = cpu_bound_rate.max(rate_before);
    (
        concurrency_bound.min(cpu_bound_rate),
        cpu_bound_rate < concurrency_bound,
    )
}

/// The workload's steady seconds: those from its first read to its last,
/// less the first and last (partial). A warm-up that read the data before
/// (ZFS's prefetch, another tool) falls outside them unless it was counted
/// as the workload's reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Seconds.
    pub seconds: usize,
    /// The workload's reads in them.
    pub reads: u64,
    /// Blocks read from disk at sync priority in them.
    pub sync_disk_reads: u64,
    /// Of those, first reads.
    pub sync_first_reads: u64,
    /// The others' reuse distances, as [`ReuseCurve`]'s spans (empty in
    /// recordings of zprof before 0.1 kept them per second).
    sync_re_reads: Vec<(f64, f64, f64)>,
}

impl Window {
    /// The window of `rec`, or `None` with fewer than 3 seconds of reads.
    pub fn of(rec: &Recording) -> Option<Window> {
        let first = rec.timeline.iter().position(|p| p.read_ops > 0)?;
        let last = rec.timeline.iter().rposition(|p| p.read_ops > 0)?;
        if last < first + 2 {
            return None;
        }
        let steady = &rec.timeline[first + 1..last];
        Some(Window {
            seconds: steady.len(),
            reads: steady.iter().map(|p| p.read_ops).sum(),
            sync_disk_reads: steady.iter().map(|p| p.sync_disk_reads).sum(),
            sync_first_reads: steady.iter().map(|p| p.sync_first_reads).sum(),
            sync_re_reads: steady
                .iter()
                .flat_map(|p| &p.sync_reread_distances)
                .map(|[index, count]| {
                    let index = *index as usize;
                    (
                        hist_bucket_low(index) as f64,
                        hist_bucket_high(index) as f64,
                        *count as f64,
                    )
                })
                .collect(),
        })
        .filter(|w| w.reads > 0)
    }

    /// Share of the steady seconds' sync re-reads within `keep` bytes of
    /// their previous read, where the recording kept their distances.
    fn sync_re_reads_within(&self, keep: f64) -> Option<f64> {
        let total: f64 = self.sync_re_reads.iter().map(|s| s.2).sum();
        (total > 0.0).then(|| within(&self.sync_re_reads, total as u64, keep))
    }
}

/// The workload's timed reads split into those served from memory and
/// those that waited for something: a disk (longer than a quarter of the
/// median leaf read), or another read's I/O, a lock (longer than 4x the
/// median of the rest). Memory reads on an idle machine sit close to their
/// median; the few that waited would be short with a cache, like the disk
/// waits, and as hits they once doubled the time of a read from memory (a
/// hundred of them in a 5-second run; CI).
#[derive(Debug, Clone, Copy, PartialEq)]
struct ReadSplit {
    hit_ns: f64,
    miss_ns: f64,
    miss_share: f64,
}

/// How far above the median of the reads served from memory one still is.
const MEMORY_READ_SPREAD: f64 = 4.0;

impl ReadSplit {
    /// A read's mean time before and with the cache: a read served from
    /// memory stays as it was; of the waits for a disk, the served share
    /// becomes reads of the same blocks from the cache.
    fn read_times(&self, blocks_per_read: f64, served_sync: f64, cache_read_ns: f64) -> (f64, f64) {
        let wait = (self.miss_ns - self.hit_ns).max(0.0);
        let blocks_per_miss = blocks_per_read / self.miss_share;
        let after = self.hit_ns
            + self.miss_share
                * ((1.0 - served_sync) * wait + served_sync * blocks_per_miss * cache_read_ns);
        (self.hit_ns + self.miss_share * wait, after)
    }

    fn of(rec: &Recording, path: &ReadPath) -> Option<ReadSplit> {
        if !path.timed || path.leaf_disk.count == 0 {
            return None;
        }
        let mut reads: Vec<(f64, f64)> = Vec::new();
        for row in pick(rec, Stage::WorkloadRead, None, None) {
            reads.extend(row.buckets.iter().map(|[index, count]| {
                (
                    crate::recording::bucket_midpoint(*index as usize, row.max_ns) as f64,
                    *count as f64,
                )
            }));
        }
        reads.sort_by(|a, b| a.0.total_cmp(&b.0));
        let disk_threshold = (path.leaf_disk.p50_ns as f64 / 4.0).max(20_000.0);
        let threshold = median_below(&reads, disk_threshold).map_or(disk_threshold, |m| {
            disk_threshold.min(MEMORY_READ_SPREAD * m)
        });
        let (mut fast, mut slow) = ((0.0, 0.0), (0.0, 0.0));
        for &(value, count) in &reads {
            let side = if value < threshold {
                &mut fast
            } else {
                &mut slow
            };
            side.0 += count;
            side.1 += value * count;
        }
        (fast.0 > 0.0 && slow.0 > 0.0).then(|| ReadSplit {
            hit_ns: fast.1 / fast.0,
            miss_ns: slow.1 / slow.0,
            miss_share: slow.0 / (fast.0 + slow.0),
        })
    }
}

/// The median of the values below `limit` in sorted (value, count) pairs.
fn median_below(sorted: &[(f64, f64)], limit: f64) -> Option<f64> {
    let below: Vec<&(f64, f64)> = sorted.iter().filter(|(value, _)| *value < limit).collect();
    let half = below.iter().map(|(_, count)| count).sum::<f64>() / 2.0;
    let mut seen = 0.0;
    below
        .into_iter()
        .find(|(_, count)| {
            seen += count;
            seen >= half
        })
        .map(|(value, _)| *value)
}

/// Reads per second over the whole recording.
fn whole_run_read_rate(rec: &Recording) -> f64 {
    let reads: u64 = pick(rec, Stage::WorkloadRead, None, None)
        .iter()
        .map(|h| h.count)
        .sum();
    reads as f64 / rec.duration_s.max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(class: u32, buckets: &[(u64, u64)], bytes: u64) -> HistRecord {
        HistRecord {
            stage: "arc_miss_reuse".into(),
            class,
            class_name: String::new(),
            pool: "p".into(),
            vdev: 0,
            count: buckets.iter().map(|b| b.1).sum(),
            total_ns: 0,
            bytes,
            bytes_out: 0,
            max_ns: buckets.iter().map(|b| b.0).max().unwrap_or(0),
            buckets: buckets
                .iter()
                .map(|&(v, n)| [zprof_common::hist_bucket(v) as u64, n])
                .collect(),
        }
    }

    fn curve(rows: Vec<HistRecord>) -> ReuseCurve {
        let rec = Recording::for_tests(rows);
        ReuseCurve::measure(&rec).unwrap()
    }

    #[test]
    fn a_cache_larger_than_every_distance_serves_every_re_read() {
        use miss_reuse_class as c;
        // 100 first reads (prefetch), then 300 sync re-reads 100-200 MiB apart and 100 first sync reads.
        let c = curve(vec![
            row(c::FIRST | c::ASYNC, &[(0, 100)], 100 << 13),
            row(0, &[(100 << 20, 150), (200 << 20, 150)], 300 << 13),
            row(c::FIRST, &[(0, 100)], 100 << 13),
        ]);
        assert_eq!(
            (c.all_reads, c.sync_reads, c.first_reads, c.re_reads()),
            (500, 400, 200, 300)
        );
        let (all, keep) = c.served(1e12);
        assert!((all - 0.6).abs() < 1e-9, "{all}");
        assert!((keep - 1e12 / 0.4).abs() < 1.0, "{keep}");
        assert_eq!(c.sync_re_reads(), 300);
        assert!((c.sync_re_reads_within(keep) - 1.0).abs() < 1e-9);
        // Nothing is within 1 MiB.
        assert_eq!(c.served(1048576.0).0, 0.0);
        assert_eq!(c.sync_re_reads_within(1048576.0), 0.0);
    }

    #[test]
    fn a_small_cache_is_kept_longer_by_what_it_serves() {
        // Distances spread evenly over 0..1000 MiB buckets: a 100 MiB ring
        // serving h of the reads keeps blocks for 100 / (1 - h) MiB.
        let buckets: Vec<(u64, u64)> = (1..=100).map(|i| ((i * 10) << 20, 10)).collect();
        let c = curve(vec![row(0, &buckets, 0)]);
        let (all, keep_bytes) = c.served(100.0 * 1048576.0);
        let keep = 100.0 / (1.0 - all);
        assert!((keep_bytes / 1048576.0 - keep).abs() < 1e-6);
        assert!(
            all > 0.1 && (all - keep / 1000.0).abs() < 0.02,
            "h {all} keep {keep} MiB"
        );
    }

    #[test]
    fn the_steady_seconds_distances_are_the_workloads_not_the_warm_ups() {
        use crate::recording::TimelinePoint;
        let mib = |m: u64| zprof_common::hist_bucket(m << 20) as u64;
        // A warm-up (seconds 1-2) re-reads at 5 MiB; the workload (seconds
        // 3-6, steady 4-5) at 300 MiB.
        let second = |second: u32, read_ops: u64, distance_mib: u64| TimelinePoint {
            second,
            read_ops,
            sync_disk_reads: 10,
            sync_reread_distances: vec![[mib(distance_mib), 10]],
            ..TimelinePoint::default()
        };
        let mut rec = Recording::for_tests(vec![]);
        rec.timeline = vec![
            second(1, 0, 5),
            second(2, 0, 5),
            second(3, 50, 300),
            second(4, 50, 300),
            second(5, 50, 300),
            second(6, 50, 300),
        ];
        let window = Window::of(&rec).unwrap();
        assert_eq!(
            (window.seconds, window.reads, window.sync_disk_reads),
            (2, 100, 20)
        );
        assert_eq!(window.sync_re_reads_within(100.0 * 1048576.0), Some(0.0));
        assert_eq!(window.sync_re_reads_within(1e12), Some(1.0));
        // An older recording without the distances: no answer, the whole
        // run's curve is used.
        for point in &mut rec.timeline {
            point.sync_reread_distances.clear();
        }
        assert_eq!(Window::of(&rec).unwrap().sync_re_reads_within(1e12), None);
    }

    #[test]
    fn the_median_of_memory_reads_ignores_the_disk_waits_and_a_few_long_ones() {
        // Buckets of a real 2.3.2 run's timed reads (ns, count), the slow ones lumped.
        let reads = [
            (98.3e3, 11.0),
            (114.7e3, 8.0),
            (131.1e3, 15.0),
            (147.5e3, 14.0),
            (720.9e3, 3.0),
            (7.3e6, 400.0),
        ];
        assert_eq!(median_below(&reads, 5e6), Some(131.1e3));
        assert_eq!(median_below(&reads, 50e3), None);
    }

    #[test]
    fn what_if_specs() {
        assert_eq!(
            parse_cache("l2arc=100g").unwrap().unwrap(),
            CacheSpec::ssd(100 << 30)
        );
        assert_eq!(
            parse_cache("l2arc=512m,nvme").unwrap().unwrap(),
            CacheSpec::nvme(512 << 20)
        );
        assert_eq!(
            parse_cache("arc=+1GiB").unwrap().unwrap(),
            CacheSpec::more_arc(1 << 30)
        );
        assert!(parse_cache("l2arc=0").unwrap().is_err());
        assert!(
            parse_cache("l2arc=1g,tape")
                .unwrap()
                .unwrap_err()
                .contains("invalid --what-if 'l2arc=1g,tape'")
        );
        assert!(parse_cache("arc=1g").unwrap().is_err());
        assert!(parse_cache("slog=ssd").is_none());
        let ssd = CacheSpec::ssd(1);
        assert!((ssd.read_ns(8192.0) - (50_000.0 + 8192.0 / 500e6 * 1e9)).abs() < 1e-6);
    }
}
