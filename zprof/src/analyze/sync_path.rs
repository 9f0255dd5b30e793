//! The sync-write path of one pool as zprof measured it, and what it would
//! be on a log device: the model behind `explain`'s SLOG what-if.
//!
//! Everything comes from zprof's own stages, so `record` and `--pid` predict
//! what `run` does; a benchmark's JSON only refines the number of writers:
//! - sync writes are the workload writes a thread made before its own
//!   zil_commit (`sync_write_cycle`), so an async job on the same pool does
//!   not count, and a writer's own time between commits is measured, not
//!   derived;
//! - a commit is split into measured parts: the log block write (the slowest
//!   leaf write), the flushes, the commit-timeout wait (the time the waiter
//!   spent in cv_timedwait_hires for its block to fill) and the rest;
//! - means carry throughput, but a commit or cycle more than
//!   [`STALL_FACTOR`] times its median is a stall (a txg-sync wait, such as the
//!   first commit creating the log), whose time is lost once, not per commit.
//!
//! What a log device changes: one log write and one flush at the device's
//! latencies, and the commit timeout scaled to them. What it may change and
//! zprof cannot tell apart in one run: the rest of a commit and the writer's
//! own time. Some of it is work per leaf I/O (each leaf write and flush of a
//! wide RAID-Z commit has its completion hand-off, run on the same CPUs), and
//! a log device has 2 leaf I/Os per commit instead of many; some of it is
//! the cost of waking up: a thread that slept through a 9 ms hdd commit runs
//! its next write cold. Measured with bpftrace on raidz3:8 of emulated hdds,
//! 4k fsync=1: the writer was on a CPU for the whole of its own time, 64-256
//! us per write without a log device and 16-32 us with an ssd log device,
//! the same code. Across zprof's SLOG cases the non-device time kept 13-15%
//! of itself at 4k on 2.1.11 (about "all per leaf I/O"), 24-40% at 32k, and
//! more on 2.3.2, whose libzpool fsyncs a flushed file vdev on a taskq (a
//! hand-off per flush that a log device's commit pays). The point
//! prediction goes the release series' weight (`Series::per_leaf_weight`,
//! [`PER_LEAF_WEIGHT`] for a release zprof does not know) of the way (in log
//! space) from "all of it per commit" to "all of it per leaf I/O", and the
//! finding gives both ends as its range.
//!
//! Writers that wait for each other's commits are another case: PostgreSQL
//! flushes its WAL under one lock, and TPC-B's transactions queue on one
//! row until the previous commit ends, so the pool's commits never overlap
//! though several backends make them. A writer's own time between its
//! commits is then mostly the other writers' commits, and shrinks with
//! them: on a guest's pgbench (4 clients, raidz1 of 5 ms disks) it was 60-74
//! ms without a log vdev and 18-20 ms with one, where the gap between the
//! pool's commits went from 3.6-6.5 ms to 2.7-4.0 ms. Where the pool's
//! commits ran one at a time ([`SerialCommits`]), the model takes the pool's
//! rate as one commit plus one gap, the gap scaled a little
//! ([`SERIAL_GAP_WEIGHT`]).

use zprof_common::{COMMIT_OVERLAPPED, Stage};

use crate::{
    recording::{HistRecord, Recording, Stalls, Summary, pick, split_stalls, summarize},
    zfs::{
        releases::{self, CommitTimeout, IMMEDIATE_WRITE_BYTES},
        target::TargetKind,
    },
};

/// The model's release-dependent parameters for `rec`: the commit timeout
/// rule and the per-leaf weight of its series on libzpool, or
/// [`KERNEL_PER_LEAF_WEIGHT`] on the kernel (2.1's rule assumed and
/// [`PER_LEAF_WEIGHT`] for a release zprof does not know).
pub fn model_parameters(rec: &Recording) -> (CommitTimeout, f64) {
    let kernel = rec.target.kind == TargetKind::Kernel;
    let release = releases::interpret(rec.target.zfs_version.as_deref(), kernel);
    let (rule, weight) = release
        .series
        .map_or((releases::COMMIT_TIMEOUT_ASSUMED, PER_LEAF_WEIGHT), |s| {
            (s.commit_timeout, s.per_leaf_weight)
        });
    (
        rule,
        if kernel {
            KERNEL_PER_LEAF_WEIGHT
        } else {
            weight
        },
    )
}

/// The per-leaf weight on the kernel module: a commit's other time kept
/// whole. In 6 pairs of the 6.17-2.4.4 guest's pgbench runs (raidz1 of 5
/// ms disks against a file log vdev), it was 1.23-1.54 ms a commit without
/// the log vdev (8.5-9 leaf I/Os) and 1.12-1.42 ms with it (2): the CPU
/// work of a commit (its itxs, the log block's allocation and checksum),
/// where on libzpool each leaf I/O's hand-off between user-space threads is
/// the larger part. Kept whole, the predicted commit came out -13%..+13% of
/// the one measured; at 2.4's libzpool weight, -21%..-34%.
pub const KERNEL_PER_LEAF_WEIGHT: f64 = 0.0;

/// An event longer than this many medians is a stall (see the module doc).
pub const STALL_FACTOR: f64 = 20.0;

/// How far the point prediction goes from keeping the non-device time whole
/// (0) to scaling it per leaf I/O (1), in log space, for a release zprof
/// does not know (each known series has its own, `Series::per_leaf_weight`).
/// Chosen on 15 recorded SLOG cases re-explained at several weights: 0.5
/// (the geometric midpoint) was 14-22% low at 4k on 2.1.11 (31% once), 0.75
/// up to 29% high on 2.3.2, 0.6 within -17%..+20% on both releases.
pub const PER_LEAF_WEIGHT: f64 = 0.6;

/// Leaf I/Os of one commit on a single log device: its write and its flush.
pub const LOG_DEVICE_LEAF_IOS: f64 = 2.0;

/// The largest share of a pool's commits that may start while another is in
/// progress for its commits to count as one after another.
pub const SERIAL_OVERLAP_SHARE: f64 = 0.1;

/// How far the point prediction scales the gap between serial commits from
/// kept whole (0) to per leaf I/O (1), in log space: a fifth of the way,
/// 0.74 of itself at pgbench's 8.5-9 leaf I/Os per commit. With a log vdev
/// the gap came out 0.61-0.84 of the one without (geometric mean 0.74) in 6
/// pairs of the 6.17-2.4.4 guest's pgbench runs (the next backend wakes from
/// a shorter sleep; the lock passes sooner). With the commit's other time
/// kept whole on the kernel ([`KERNEL_PER_LEAF_WEIGHT`]), the predicted gap
/// was -11%..+22% of the one measured and the commits per second -11%..+19%.
/// The range keeps it whole at one end and [`SERIAL_GAP_LEAST`] of it at
/// the other.
pub const SERIAL_GAP_WEIGHT: f64 = 0.2;

/// The least share of the gap between serial commits the range keeps: the
/// least the guest's pgbench pairs kept was 0.58 (scaled per leaf I/O it
/// would keep 0.22 at 8.9 leaf I/Os per commit, four times the rate).
pub const SERIAL_GAP_LEAST: f64 = 0.55;

/// Sync writers from which commits one after another mean the writers
/// waited for each other (with one writer both models are the same).
pub const SERIAL_WRITERS: f64 = 1.5;

/// A pool whose commits ran one after another though several writers made
/// them (see the module doc): its gaps between commits.
#[derive(Debug, Clone, PartialEq)]
pub struct SerialCommits {
    /// The pool's time without a commit, from one's end to the next's start.
    pub gap: Stalls,
    /// Commits that started after such a gap.
    pub gaps: u64,
    /// Commits that started while another was in progress.
    pub overlapped: u64,
}

fn is_gap(h: &&HistRecord) -> bool {
    h.class & COMMIT_OVERLAPPED == 0
}

/// A pool's commits that started after a gap, and while another was in
/// progress.
fn commit_starts(rec: &Recording, pool: &str) -> (u64, u64) {
    let count = |gap: bool| {
        rows(rec, Stage::CommitGap, pool)
            .filter(|h| is_gap(h) == gap)
            .fold(0u64, |sum, h| sum.saturating_add(h.count))
    };
    (count(true), count(false))
}

/// The share of a pool's commits that started while another was in
/// progress (None for a recording made before zprof measured it).
fn overlap_share(rec: &Recording, pool: &str) -> Option<f64> {
    let (gaps, overlapped) = commit_starts(rec, pool);
    let starts = gaps.saturating_add(overlapped);
    (starts > 0).then(|| overlapped as f64 / starts as f64)
}

impl SerialCommits {
    /// The pool's commits and gaps when they ran one at a time with at
    /// least [`SERIAL_WRITERS`] writers; None where they overlapped, or the
    /// recording has no gaps (made before zprof measured them).
    fn measure(rec: &Recording, pool: &str, writers: f64) -> Option<SerialCommits> {
        let (gaps, overlapped) = commit_starts(rec, pool);
        let starts = gaps.saturating_add(overlapped) as f64;
        if gaps == 0
            || writers < SERIAL_WRITERS
            || overlapped as f64 > SERIAL_OVERLAP_SHARE * starts
        {
            return None;
        }
        Some(SerialCommits {
            gap: split_stalls(
                rows(rec, Stage::CommitGap, pool).filter(is_gap),
                STALL_FACTOR,
            ),
            gaps,
            overlapped,
        })
    }
}

/// The sync-write path of one pool.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncPath {
    /// zil_commit calls.
    pub commits: u64,
    /// Their typical mean and stalls.
    pub commit: Stalls,
    /// Mean commit, stalls included.
    pub commit_mean_ns: f64,
    /// A writer's own time between two of its commits (typical mean, stalls).
    pub cycle: Stalls,
    /// Mean cycle, stalls included.
    pub cycle_mean_ns: f64,
    /// Commits with a measured cycle.
    pub cycles: u64,
    /// Workload writes those commits made durable.
    pub sync_writes: u64,
    /// Per commit, typical means: log block write, flushes, commit timeout, rest.
    pub log_write_ns: f64,
    /// See `log_write_ns`.
    pub flush_ns: f64,
    /// See `log_write_ns`.
    pub timeout_ns: f64,
    /// See `log_write_ns`.
    pub other_ns: f64,
    /// Leaf writes and leaf flushes per commit.
    pub leaf_ios_per_commit: f64,
    /// Where most log blocks went.
    pub log_place: LogPlace,
    /// Mean size of the sync writes the commits made durable.
    pub write_bytes: f64,
    /// Bytes a log device would be written per commit: the commit's sync
    /// writes copied into one log block with their records' headers, in
    /// 4 KiB sectors (see [`log_block_bytes`]).
    pub log_block_bytes: f64,
    /// Writers' time (cycles and commits) over the recording: the average
    /// number of sync writers at work.
    pub writers: f64,
    /// The share of the pool's commits that started while another was in
    /// progress (None in recordings made before zprof measured it).
    pub commit_overlap: Option<f64>,
    /// Set when the pool's commits ran one after another though several
    /// writers made them: the model's pool rate is then commit plus gap.
    pub serial: Option<SerialCommits>,
}

fn rows<'a>(
    rec: &'a Recording,
    stage: Stage,
    pool: &str,
) -> impl Iterator<Item = &'a HistRecord> + Clone + use<'a> {
    pick(rec, stage, Some(pool), None).into_iter()
}

fn typical_mean(rec: &Recording, stage: Stage, pool: &str) -> f64 {
    split_stalls(rows(rec, stage, pool), STALL_FACTOR).typical_mean_ns
}

/// Where a pool's log blocks went: the class of the zil_log_write rows
/// (zprof_common::log_place_class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogPlace {
    /// The pool's normal vdevs.
    MainPool,
    /// A log vdev (SLOG).
    LogDevice,
    /// A special vdev: OpenZFS 2.4 allocates log blocks there before the
    /// normal class when the pool has no log vdev.
    Special,
}

impl LogPlace {
    /// The place that took more than half of the pool's `log_writes`
    /// commits' log blocks; the main pool where none did.
    fn of_most(rec: &Recording, pool: &str, log_writes: u64) -> LogPlace {
        let count = |class: u32| {
            rows(rec, Stage::ZilLogWrite, pool)
                .filter(|h| h.class == class)
                .map(|h| h.count)
                .sum::<u64>()
        };
        if count(1) > log_writes / 2 {
            LogPlace::LogDevice
        } else if count(2) > log_writes / 2 {
            LogPlace::Special
        } else {
            LogPlace::MainPool
        }
    }

    /// "the log vdev", "the special vdev", "the main pool's vdevs".
    pub fn words(self) -> &'static str {
        match self {
            LogPlace::MainPool => "the main pool's vdevs",
            LogPlace::LogDevice => "the log vdev",
            LogPlace::Special => "the special vdev",
        }
    }
}

impl SyncPath {
    /// The pool's path, when zprof saw writers commit (recordings made before
    /// zprof told sync writes apart have no cycles, and with the workload
    /// group skipped the cycles hold no writes: None).
    pub fn measure(rec: &Recording, pool: &str) -> Option<SyncPath> {
        let cycles = summarize(rows(rec, Stage::SyncWriteCycle, pool));
        let commits = summarize(rows(rec, Stage::ZilCommit, pool));
        let log_writes = summarize(rows(rec, Stage::ZilLogWrite, pool));
        if cycles.count == 0 || cycles.bytes == 0 || commits.count == 0 || log_writes.count == 0 {
            return None;
        }
        let log_place = LogPlace::of_most(rec, pool, log_writes.count);
        let leaf_writes = log_writes.bytes as f64 / log_writes.count as f64;
        let commit = split_stalls(rows(rec, Stage::ZilCommit, pool), STALL_FACTOR);
        let log_write_ns = typical_mean(rec, Stage::ZilLogWrite, pool);
        let flush_ns = typical_mean(rec, Stage::ZilFlush, pool);
        let timeout_ns = typical_mean(rec, Stage::ZilTimeoutWait, pool);
        let seconds = rec.duration_s.max(1e-9);
        let write_bytes = sync_write_bytes(&cycles).unwrap_or_else(|| mean_write_bytes(rec, pool));
        let writers = ((cycles.total_ns + commits.total_ns) as f64 / 1e9 / seconds).max(1.0);
        Some(SyncPath {
            commits: commits.count,
            commit,
            commit_mean_ns: commits.mean_ns,
            cycle: split_stalls(rows(rec, Stage::SyncWriteCycle, pool), STALL_FACTOR),
            cycle_mean_ns: cycles.mean_ns,
            cycles: cycles.count,
            sync_writes: cycles.bytes,
            log_write_ns,
            flush_ns,
            timeout_ns,
            // What the typical commit spent beyond its measured parts, so the
            // parts add up to it (each part trimmed apart would not).
            other_ns: (commit.typical_mean_ns - log_write_ns - flush_ns - timeout_ns).max(0.0),
            // A log or special vdev is flushed where it was written; a main
            // pool's top-level vdev in all of its leaves.
            leaf_ios_per_commit: leaf_writes
                + if log_place != LogPlace::MainPool {
                    leaf_writes
                } else {
                    leaf_flushes_per_commit(rec, pool, commits.count)
                },
            log_place,
            write_bytes,
            log_block_bytes: log_block_bytes(
                cycles.bytes as f64 / cycles.count.max(1) as f64,
                write_bytes,
            ),
            writers,
            commit_overlap: overlap_share(rec, pool),
            serial: SerialCommits::measure(rec, pool, writers),
        })
    }

    /// Writes each commit makes durable.
    pub fn writes_per_commit(&self) -> f64 {
        (self.sync_writes as f64 / self.cycles.max(1) as f64).max(1e-9)
    }

    /// Sync writes per second one writer achieved: its writes per commit over
    /// its commit and its own time (stalls included: this is what it did).
    pub fn measured_per_writer(&self) -> f64 {
        self.writes_per_commit() * 1e9 / (self.commit_mean_ns + self.cycle_mean_ns).max(1.0)
    }

    /// Whether a log device would copy the writes into its log blocks where
    /// this pool wrote them in place: sync writes above
    /// [`IMMEDIATE_WRITE_BYTES`] to the main pool (2.4 copies them into log
    /// blocks on a special vdev as on a log one: zil_special_is_slog). The copy, and the
    /// checksum and write of a log block that size, are then in no part of
    /// this recording.
    pub fn log_device_would_copy_anew(&self) -> bool {
        self.log_place == LogPlace::MainPool && self.write_bytes > IMMEDIATE_WRITE_BYTES
    }

    /// Share of the writers' time lost to stalls (of the pool's time, commits
    /// and gaps, where its commits ran one at a time).
    pub fn stall_fraction(&self) -> f64 {
        let commits = self.commit_mean_ns * self.commits as f64;
        let (stalled, all) = match &self.serial {
            Some(serial) => (
                self.commit.stalled_ns + serial.gap.stalled_ns,
                commits
                    + serial.gap.typical_mean_ns
                        * serial.gaps.saturating_sub(serial.gap.stalled) as f64
                    + serial.gap.stalled_ns,
            ),
            None => (
                self.commit.stalled_ns + self.cycle.stalled_ns,
                commits + self.cycle_mean_ns * self.cycles as f64,
            ),
        };
        if all > 0.0 {
            (stalled / all).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// Time per commit that is neither device nor timeout: the commit's rest
    /// and the writer's own time (the pool's gap between commits, where they
    /// ran one at a time).
    pub fn non_device_ns(&self) -> f64 {
        self.other_ns + self.own_time_ns()
    }

    /// Where the pool's commits ran one at a time: a typical commit's share of
    /// a commit and the gap after it, the time the writers spent waiting on
    /// commits.
    pub fn serial_commit_share(&self) -> Option<f64> {
        let serial = self.serial.as_ref()?;
        let commit = self.commit.typical_mean_ns;
        Some(commit / (commit + serial.gap.typical_mean_ns).max(1.0))
    }

    /// What the model adds to a commit: the writer's own time, or the pool's
    /// gap between commits where they ran one at a time (typical means).
    pub fn own_time_ns(&self) -> f64 {
        self.serial
            .as_ref()
            .map_or(self.cycle.typical_mean_ns, |s| s.gap.typical_mean_ns)
    }

    /// The commit timeout as measured: the release's fraction of the log
    /// block's latency when the waiter waited at all, and the wake-up cost on
    /// top of it, which does not scale with the device.
    pub fn timeout_parts(&self, rule: CommitTimeout) -> (f64, f64) {
        if self.timeout_ns < 1_000.0 {
            return (0.0, 0.0);
        }
        let fraction = rule.fraction;
        let wake = (self.timeout_ns - fraction * (self.log_write_ns + self.flush_ns)).max(0.0);
        (fraction, wake)
    }

    /// What this path would do with the log blocks on a device of these
    /// latencies, `weight` of the way from per commit to per leaf I/O, with
    /// `writers` sync writers.
    pub fn predict(
        &self,
        device: LogDeviceTimes,
        rule: CommitTimeout,
        weight: f64,
        writers: f64,
    ) -> Prediction {
        let (fraction, wake) = self.timeout_parts(rule);
        let device_ns = device.write_ns + device.flush_ns;
        let timeout = fraction * device_ns + wake;
        let per_leaf =
            (LOG_DEVICE_LEAF_IOS / self.leaf_ios_per_commit.max(LOG_DEVICE_LEAF_IOS)).min(1.0);
        // Between "all per commit" and "all per leaf I/O": zprof cannot tell
        // the two parts apart in one run.
        let scale = per_leaf.powf(weight);
        let kept = 1.0 - self.stall_fraction();
        // The rate with the commit's other time and the gap between serial
        // commits scaled so.
        let rate = |non_device_scale: f64, gap_scale: f64| {
            let commit = timeout + device_ns + self.other_ns * non_device_scale;
            match &self.serial {
                // The pool's rate: one commit and one gap (the writers' work
                // between commits).
                Some(serial) => {
                    let pool_cycle = commit + serial.gap.typical_mean_ns * gap_scale;
                    let total = self.writes_per_commit() * 1e9 / pool_cycle.max(1.0) * kept;
                    (commit, (writers * pool_cycle - commit).max(0.0), total)
                }
                None => {
                    let cycle = self.cycle.typical_mean_ns * non_device_scale;
                    let per_writer =
                        self.writes_per_commit() * 1e9 / (commit + cycle).max(1.0) * kept;
                    (commit, cycle, per_writer * writers)
                }
            }
        };
        let (commit_ns, cycle_ns, total) = rate(scale, per_leaf.powf(SERIAL_GAP_WEIGHT));
        let gap_least = SERIAL_GAP_LEAST.max(per_leaf);
        let (_, _, all_per_commit) = rate(1.0, 1.0);
        let (_, _, all_per_leaf) = rate(per_leaf, gap_least);
        Prediction {
            commit_ns,
            cycle_ns,
            total,
            range: (all_per_commit, all_per_leaf),
            non_device_scale: scale,
            gap_scale: self
                .serial
                .as_ref()
                .map(|_| (per_leaf.powf(SERIAL_GAP_WEIGHT), gap_least)),
        }
    }
}

/// A log record's header (lr_write_t, 192 bytes) and a log block's chain
/// trailer (zil_chain_t, rounded to 256): what a log block holds besides the
/// data it copies.
const LOG_RECORD_HEADER_BYTES: f64 = 192.0;
const LOG_BLOCK_TRAILER_BYTES: f64 = 256.0;
/// The sector a log device is written in (ashift 12).
const LOG_SECTOR_BYTES: f64 = 4096.0;

/// Bytes of one commit's log block on a log device: its `writes` sync writes
/// of `write_bytes` each, copied in (a log device takes them whole, as
/// logbias=latency does), with their headers, in whole sectors. A 4 KiB write
/// makes an 8 KiB block, a 32 KiB one 36 KiB, as the lab's log devices see.
pub fn log_block_bytes(writes: f64, write_bytes: f64) -> f64 {
    let bytes = writes.max(1.0) * (write_bytes + LOG_RECORD_HEADER_BYTES) + LOG_BLOCK_TRAILER_BYTES;
    (bytes / LOG_SECTOR_BYTES).ceil() * LOG_SECTOR_BYTES
}

/// The mean size of the sync writes the commits made durable, from the
/// cycles' own byte counts: the workload's mean write would count the
/// writes no commit followed too (a job's setup, async writers), which
/// made a 32 KiB fsync job's log block 28 KiB. None for recordings made
/// before the cycles carried their bytes.
fn sync_write_bytes(cycles: &Summary) -> Option<f64> {
    (cycles.bytes_out > 0 && cycles.bytes > 0)
        .then(|| cycles.bytes_out as f64 / cycles.bytes as f64)
}

/// The mean size of the pool's workload writes: the fallback for
/// recordings whose cycles carry no bytes.
fn mean_write_bytes(rec: &Recording, pool: &str) -> f64 {
    let writes = summarize(rows(rec, Stage::WorkloadWrite, pool));
    writes.bytes as f64 / writes.count.max(1) as f64
}

/// Leaf flushes per commit: counted per leaf where flushes are timed per leaf;
/// where zio_flush is timed as one call, each leaf of the pool that took sync
/// writes (a flush reaches every leaf of a top-level vdev written to).
fn leaf_flushes_per_commit(rec: &Recording, pool: &str, commits: u64) -> f64 {
    let kernel = rec.target.kind == crate::zfs::target::TargetKind::Kernel;
    let release = crate::zfs::releases::interpret(rec.target.zfs_version.as_deref(), kernel);
    if release.semantics(kernel).flush_mode == zprof_common::FLUSH_LEAF_ISSUE_TO_DONE {
        let flushes: u64 = rows(rec, Stage::Flush, pool).map(|h| h.count).sum();
        return flushes as f64 / commits.max(1) as f64;
    }
    let leaves: std::collections::BTreeSet<u64> = rows(rec, Stage::VdevTotal, pool)
        .filter(|h| h.class_name == "sync write")
        .map(|h| h.vdev)
        .collect();
    leaves.len() as f64
}

/// A log device's latencies for one commit's log block, ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogDeviceTimes {
    /// The log block's write.
    pub write_ns: f64,
    /// The device's flush.
    pub flush_ns: f64,
}

/// A prediction for one log device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// A commit on the device (typical mean), ns.
    pub commit_ns: f64,
    /// The writer's own time between commits, ns (where the pool's commits
    /// ran one at a time: the other writers' commits and gaps).
    pub cycle_ns: f64,
    /// Sync writes per second, all writers.
    pub total: f64,
    /// The same with all of the non-device time per commit (kept whole) and
    /// all of it per leaf I/O (scaled to the log device's 2): the range.
    pub range: (f64, f64),
    /// The share of the non-device time kept (log device's leaf I/Os over the pool's).
    pub non_device_scale: f64,
    /// The share of the gap between serial commits kept, and the least the
    /// range keeps (None where the commits were not serial).
    pub gap_scale: Option<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_block_holds_the_commits_writes_with_their_headers_in_whole_sectors() {
        // The lab's ssd log device (60 us + 500 MiB/s) delivered 76 us per
        // 4 KiB sync write and 130 us per 32 KiB one: 8 KiB and 36 KiB.
        assert_eq!(log_block_bytes(1.0, 4096.0), 8192.0);
        assert_eq!(log_block_bytes(1.0, 32768.0), 36864.0);
        assert_eq!(log_block_bytes(4.0, 4096.0), 20480.0);
    }

    #[test]
    fn the_log_block_takes_the_size_of_the_writes_the_commits_made_durable() {
        // A 32 KiB fsync job: 327 sync writes, whatever the job's other
        // writes were (their sizes are not in the cycles).
        let cycles = Summary {
            count: 327,
            bytes: 327,
            bytes_out: 327 * 32768,
            ..Summary::default()
        };
        assert_eq!(sync_write_bytes(&cycles), Some(32768.0));
        let without_bytes = Summary {
            bytes_out: 0,
            ..cycles
        };
        assert_eq!(sync_write_bytes(&without_bytes), None);
    }
}
