//! The recording: everything one `zprof record` measured, as a versioned JSON
//! document that `zprof report` (and later `explain`, `compare`, `flamegraph`)
//! read back.
//!
//! Invariant: a recording is self-describing. It names its target and ZFS version,
//! the probes attached and those that could not be (with reasons), and every loss
//! counter, so a reader never has to guess whether a zero means "nothing
//! happened" or "not measured".

pub mod benchmark;
pub mod classes;
pub mod live;
pub mod pgbench;
pub mod pools;
pub mod requests;
pub mod result;

use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};
use zprof_common::{HIST_BUCKETS, Stage, hist_bucket_high, hist_bucket_low};

use crate::zfs::target::TargetKind;

/// Identifies the document type.
pub const SCHEMA: &str = "zprof-recording";
/// Bumped on incompatible changes; readers refuse newer versions.
pub const VERSION: u32 = 1;

/// One recording.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recording {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Format version, see [`VERSION`].
    pub version: u32,
    /// zprof version that wrote it.
    pub zprof_version: String,
    /// What was traced.
    pub target: TargetInfo,
    /// Where struct offsets came from, or why there were none.
    pub offsets_source: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Length of the recording in seconds.
    pub duration_s: f64,
    /// The command zprof ran, if any.
    pub command: Option<Vec<String>>,
    /// Its exit code (128 + signal when killed), when it ended during the recording.
    pub command_exit: Option<i32>,
    /// The process traced (the command's pid, or `--pid`).
    pub pid: Option<u32>,
    /// Every probe point considered, attached or not.
    pub probes: Vec<ProbeStatus>,
    /// Things the reader should know (unknown ZFS version, degraded stages...).
    pub warnings: Vec<String>,
    /// Lost or unmatched events.
    pub losses: Losses,
    /// Histograms, one per stage, class, pool and vdev.
    pub histograms: Vec<HistRecord>,
    /// Each txg synced during the recording.
    pub txgs: Vec<TxgRecord>,
    /// Workload throughput per second.
    pub timeline: Vec<TimelinePoint>,
    /// Per pool and second, what the host-wide timeline cannot split by
    /// pool: the pool's workload writes and the time writers waited on its
    /// write throttle (the phases of its jobs are told apart by these).
    #[serde(default)]
    pub pool_seconds: Vec<PoolSecond>,
    /// zprof's own cost: each eBPF program's run count and run time.
    #[serde(default)]
    pub bpf_programs: Vec<ProgramCost>,
    /// The benchmark's own result, when `zprof run` recognised its output.
    #[serde(default)]
    pub benchmark: Option<crate::recording::benchmark::Benchmark>,
    /// On-CPU stack samples of the traced processes (and of ZFS's kernel threads).
    #[serde(default)]
    pub cpu: Option<CpuProfile>,
    /// zprof's own attach/detach time and memory.
    #[serde(default)]
    pub self_cost: Option<SelfCost>,
    /// Share of the machine's CPU time that was busy (every process, from
    /// /proc/stat) during the recording: whether ZFS's threads had to wait
    /// for a CPU. Absent in older recordings.
    #[serde(default)]
    pub machine_cpu_busy: Option<f64>,
    /// File and zvol requests (kernel target), one row per layer, operation,
    /// dataset, process and cgroup.
    #[serde(default)]
    pub requests: Vec<RequestRecord>,
    /// Where the traced threads were blocked (`record --off-cpu`).
    #[serde(default)]
    pub offcpu: Option<OffCpuProfile>,
    /// Requests slower than `record --slower-than`, slowest first.
    #[serde(default)]
    pub slow_requests: Vec<SlowRequestRecord>,
    /// Slow requests beyond the number a recording keeps.
    #[serde(default)]
    pub slow_requests_dropped: u64,
    /// Where each leaf vdev with I/O sits: its top-level vdev and allocation
    /// class, as read from ZFS's vdev tree. Absent in older recordings.
    #[serde(default)]
    pub vdevs: Vec<VdevRecord>,
    /// The write throttle's tunables as read from the traced ZFS (the
    /// module's parameters, or the libzpool process's globals), by name;
    /// those not read are absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tunables: BTreeMap<String, f64>,
}

/// A leaf vdev's place in its pool, read from ZFS's own vdev tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VdevRecord {
    /// Pool name.
    pub pool: String,
    /// The leaf's guid (the histograms' `vdev`).
    pub guid: u64,
    /// Its top-level vdev, named as zpool_influxdb names vdevs: type and
    /// index ("raidz-0", "mirror-1"; a single disk is "disk-2" or "file-2").
    pub top_vdev: String,
    /// The top-level vdev's guid (`zpool status -g`).
    pub top_guid: u64,
    /// Allocation class: normal, log, special, dedup or cache.
    pub class: String,
}

/// The machine's CPU time counters (/proc/stat's first line), in ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTicks {
    busy: u64,
    all: u64,
}

impl CpuTicks {
    /// Reads /proc/stat; None where it cannot be read.
    pub fn read() -> Option<CpuTicks> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        CpuTicks::parse(text.lines().next()?)
    }

    /// "cpu user nice system idle iowait irq softirq steal ...": idle and
    /// iowait are not busy.
    fn parse(line: &str) -> Option<CpuTicks> {
        let fields: Vec<u64> = line
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let all: u64 = fields.iter().sum();
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        Some(CpuTicks {
            busy: all - idle,
            all,
        })
    }

    /// Busy share of the time since `earlier`, 0..1.
    pub fn busy_since(&self, earlier: &CpuTicks) -> f64 {
        let all = self.all.saturating_sub(earlier.all);
        if all == 0 {
            0.0
        } else {
            (self.busy.saturating_sub(earlier.busy) as f64 / all as f64).clamp(0.0, 1.0)
        }
    }
}

/// What zprof itself cost outside its eBPF programs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SelfCost {
    /// From loading the eBPF object to every probe attached, ms.
    pub attach_ms: f64,
    /// Closing every link and program, ms.
    pub detach_ms: f64,
    /// zprof's peak resident memory (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// Whether the probes went through multi links (fast to detach) rather
    /// than a perf event each: uprobe_multi on libzpool, kprobe_multi on the
    /// kernel (the field keeps its first name, so older recordings still
    /// read). Absent in older recordings.
    #[serde(default)]
    pub uprobe_multi: bool,
}

/// The leaf frame of off-CPU time spent runnable (preempted, or woken but not
/// yet running): waiting for a CPU, not for what the thread was blocked on.
pub const RUNNABLE_FRAME: &str = "[runnable: waiting for a CPU]";
/// The root-side frame of a stack cut at 64 (the eBPF side's STACK_DEPTH) frames.
pub const CUT_FRAME: &str = "[cut: deeper than 64 frames]";
/// A user stack that could not be stored (stack map full or bucket taken;
/// the loss line says which count).
pub const USER_LOST_FRAME: &str = "[user stack lost]";
/// A kernel stack that could not be stored.
pub const KERNEL_LOST_FRAME: &str = "[kernel stack lost]";

/// A process whose sampled user stacks could not be named.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnnamedProcess {
    /// Its pid.
    pub pid: u32,
    /// Its name.
    pub name: String,
    /// Its samples with a user stack.
    pub samples: u64,
    /// Those whose user frames were all unknown.
    pub unnamed: u64,
    /// Why.
    pub why: String,
}

/// On-CPU samples, symbolized.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CpuProfile {
    /// Samples per second per CPU.
    pub frequency_hz: u64,
    /// Samples taken of traced threads.
    pub samples_total: u64,
    /// Samples with a stack lost (stack map full or hash collision; raise
    /// --stack-storage-size): once per sample, user and kernel stack alike.
    pub stack_lost: u64,
    /// Samples not counted (sample map full).
    pub sample_map_full: u64,
    /// Frames that could not be named.
    pub unsymbolized_frames: u64,
    /// Frames of functions without a symbol, named by their place (library,
    /// nearest symbol before the function and offset).
    #[serde(default)]
    pub placed_frames: u64,
    /// Samples whose user or kernel stack reached `stack_depth` frames: cut,
    /// the outermost frames lost (marked by a `[cut ...]` frame).
    #[serde(default)]
    pub cut_samples: u64,
    /// Frames kept per user or kernel stack (0 in recordings made before the cap).
    #[serde(default)]
    pub stack_depth: u32,
    /// Processes most of whose user stacks could not be named, and why.
    #[serde(default)]
    pub unnamed_processes: Vec<UnnamedProcess>,
    /// Distinct stacks with their sample counts.
    pub stacks: Vec<CpuStack>,
}

/// Off-CPU time: stacks of the traced threads when they left the CPU, weighted
/// by how long they stayed off it (time spent runnable, waiting for a CPU,
/// ends in the frame [`RUNNABLE_FRAME`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct OffCpuProfile {
    /// Blocked periods not kept (start map full).
    pub start_map_full: u64,
    /// Blocked periods with no room for their stacks (map full).
    pub map_full: u64,
    /// Blocked periods whose stacks could not be stored (their time is kept,
    /// under a `[... stack lost]` frame).
    #[serde(default)]
    pub stack_lost: u64,
    /// Blocked periods of traced threads (0 in recordings made before it was counted).
    #[serde(default)]
    pub periods: u64,
    /// Time (us) in stacks cut at the depth cap.
    #[serde(default)]
    pub cut_us: u64,
    /// Stacks, root first; `count` is the time off the CPU in microseconds.
    pub stacks: Vec<CpuStack>,
}

/// One stack: process, thread, user frames then kernel frames, outermost first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CpuStack {
    /// Frames, outermost first.
    pub frames: Vec<String>,
    /// Samples.
    pub count: u64,
}

/// One eBPF program's cost during the recording (kernel BPF_STATS_RUN_TIME).
/// Excludes the probe mechanism itself (the uprobe trap, about 0.5 us per event on Linux 6.18).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProgramCost {
    /// Program name (`<handler>_u` or `_k`).
    pub program: String,
    /// Times it ran.
    pub run_count: u64,
    /// Total time it ran, ns.
    pub run_time_ns: u64,
    /// Times the kernel skipped it (bpf_prog_info's recursion_misses): its
    /// probe fired while another tracing program was running on that CPU
    /// (on a preemptible kernel, one its thread was preempted in). Each is
    /// an event the stages do not count.
    #[serde(default)]
    pub missed: u64,
}

/// The traced target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetInfo {
    /// kernel or libzpool.
    pub kind: TargetKind,
    /// Library path, or "zfs.ko".
    pub object: String,
    /// OpenZFS version, when known.
    pub zfs_version: Option<String>,
    /// GNU build-id of the library.
    pub build_id: Option<String>,
    /// Whether zprof has verified this release on this target: verified,
    /// unverified or unknown (see `releases::Status`); empty in old recordings.
    #[serde(default)]
    pub zfs_status: String,
    /// How it was verified, what being unverified risks, or why it is unknown.
    #[serde(default)]
    pub zfs_status_detail: String,
}

/// One probe point and its fate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProbeStatus {
    /// Report group (compression, vdev, zil, ...).
    pub group: String,
    /// Function probed.
    pub function: String,
    /// The role it plays, named as OpenZFS 2.1 names the function (the same
    /// as `function` unless this release renamed or wrapped it).
    #[serde(default)]
    pub role: String,
    /// Byte offset into the function where the probe sits (past instructions
    /// the kernel would single-step; see releases::SKIPPABLE_PROLOGUES).
    #[serde(default)]
    pub offset: u32,
    /// Entry only, or entry and return.
    pub returns: bool,
    /// Whether a program runs at its entry (false: read at its return
    /// only; recordings made before such points existed have them all).
    #[serde(default = "yes")]
    pub entry: bool,
    /// Whether it was attached.
    pub attached: bool,
    /// Why not, when it was not.
    pub reason: Option<String>,
    /// How it was attached, when not as the catalogue says (entry only...), or
    /// what a kernel static adds to its stage.
    #[serde(default)]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

/// Loss and mismatch counters: nothing is lost silently.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Losses {
    /// Entry probes that could not record their start (in-flight map full).
    pub entry_map_full: u64,
    /// Return probes with no matching entry.
    pub return_without_entry: u64,
    /// The same, by stage name (which probe pair mismatched).
    #[serde(default)]
    pub return_without_entry_by_stage: BTreeMap<String, u64>,
    /// Events dropped because the histogram map was full (raise --hist-entries).
    pub hist_map_full: u64,
    /// Ring-buffer events dropped.
    pub ringbuf_full: u64,
    /// Failed reads of ZFS structures.
    pub read_failed: u64,
    /// Recursive entries not timed.
    pub nested_entry: u64,
    /// Calls still in flight when zprof detached (started, never returned).
    pub in_flight_at_end: u64,
    /// Processes forked by the traced one that could not be followed (map full).
    #[serde(default)]
    pub tracked_full: u64,
    /// Requests counted in the folded row (request map full).
    #[serde(default)]
    pub request_folded: u64,
    /// Requests not timed: their start could not be kept (map full).
    #[serde(default)]
    pub request_start_full: u64,
    /// File requests that returned without a start.
    #[serde(default)]
    pub request_end_without_start: u64,
    /// Requests whose end was never seen (the kernel skipped its program):
    /// not counted in any row.
    #[serde(default)]
    pub request_end_missed: u64,
    /// Requests still in progress when zprof detached.
    #[serde(default)]
    pub requests_in_flight_at_end: u64,
    /// Dataset names that could not be kept (name map full).
    #[serde(default)]
    pub name_map_full: u64,
    /// zil_commit calls timed whole but not split into parts: more commits
    /// at once on a pool than `zprof_common::COMMIT_SLOTS`.
    #[serde(default)]
    pub commit_slots_full: u64,
}

impl Losses {
    /// The non-zero counters, with the names reports use.
    pub fn nonzero(&self) -> Vec<(String, u64)> {
        let by_stage: Vec<String> = self
            .return_without_entry_by_stage
            .iter()
            .map(|(stage, n)| format!("{stage} {n}"))
            .collect();
        let unmatched = if by_stage.is_empty() {
            "return without entry".to_owned()
        } else {
            format!("return without entry ({})", by_stage.join(", "))
        };
        [
            ("entry map full".to_owned(), self.entry_map_full),
            (unmatched, self.return_without_entry),
            (
                "histogram map full (raise --hist-entries)".to_owned(),
                self.hist_map_full,
            ),
            ("ring buffer full".to_owned(), self.ringbuf_full),
            ("failed reads".to_owned(), self.read_failed),
            ("nested calls not timed".to_owned(), self.nested_entry),
            ("in flight at detach".to_owned(), self.in_flight_at_end),
            (
                "forked processes not followed".to_owned(),
                self.tracked_full,
            ),
            (
                "requests folded (request map full: raise --request-rows)".to_owned(),
                self.request_folded,
            ),
            (
                "requests not timed (start map full)".to_owned(),
                self.request_start_full,
            ),
            (
                "file requests ended without a start".to_owned(),
                self.request_end_without_start,
            ),
            (
                "requests whose end was skipped by the kernel (not counted)".to_owned(),
                self.request_end_missed,
            ),
            (
                "requests in flight at detach".to_owned(),
                self.requests_in_flight_at_end,
            ),
            (
                "dataset or gone pool names not kept (name map full)".to_owned(),
                self.name_map_full,
            ),
            (
                format!(
                    "zil_commits not split into parts (more than {} at once on a pool)",
                    zprof_common::COMMIT_SLOTS
                ),
                self.commit_slots_full,
            ),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// One histogram.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistRecord {
    /// Stage name (see [`stage_name`]).
    pub stage: String,
    /// Stage-specific class number (algorithm, or io type << 8 | priority).
    pub class: u32,
    /// The class as words ("lz4", "async write").
    pub class_name: String,
    /// Pool name ("" when the stage cannot tell).
    pub pool: String,
    /// Leaf vdev guid (vdev stages), else 0.
    pub vdev: u64,
    /// Events.
    pub count: u64,
    /// Sum of latencies, ns.
    pub total_ns: u64,
    /// Input bytes.
    pub bytes: u64,
    /// Output bytes (compressed size).
    pub bytes_out: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Non-empty buckets as [index, count]; edges from zprof_common::hist_bucket_low.
    pub buckets: Vec<[u64; 2]>,
}

/// One pool's second of a recording (only seconds with something in them).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PoolSecond {
    /// Pool name.
    pub pool: String,
    /// Seconds since the start (the interval ending here), as in the timeline.
    pub second: u32,
    /// Workload write operations on the pool (where its rows name it).
    pub write_ops: u64,
    /// Their bytes.
    pub write_bytes: u64,
    /// dmu_tx_wait calls: writers delayed by the write throttle.
    pub tx_waits: u64,
    /// Time in them, ns (of the calls that ended in this second).
    pub tx_wait_ns: u64,
    /// Workload read operations on the pool (where its rows name it).
    #[serde(default)]
    pub read_ops: u64,
    /// Leaf I/Os at the removal priority (a device removal's copies, or a
    /// RAIDZ expansion's reflow) done in the second.
    #[serde(default)]
    pub removal_ios: u64,
    /// Their bytes.
    #[serde(default)]
    pub removal_bytes: u64,
    /// Leaf I/Os at the scrub priority (scrub, resilver; the scrub ZFS
    /// starts when a RAIDZ expansion ends) done in the second.
    #[serde(default)]
    pub scrub_ios: u64,
}

/// One txg.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TxgRecord {
    /// Pool name.
    pub pool: String,
    /// txg number.
    pub txg: u64,
    /// Start, ns after the recording began.
    pub start_offset_ns: u64,
    /// spa_sync duration, ns.
    pub duration_ns: u64,
    /// Its life as ZFS's txgs kstat keeps it (otime, qtime, wtime, stime
    /// and ndirty), where zprof saw it: none of it for a txg born or synced
    /// outside the recording, or a recording made before zprof read it.
    #[serde(default, flatten, skip_serializing_if = "TxgLife::is_empty")]
    pub life: TxgLife,
    /// Where its sync's time went, where zprof saw the whole sync (none for
    /// a sync begun before zprof attached, or a recording made before zprof
    /// split syncs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncSplit>,
}

/// A txg's sync split into its phases (`zprof_common::sync_phase`): the
/// functions spa_sync calls on its own thread, timed without overlap. What
/// none of them covers (spa_sync's own work, its wait for the previous
/// txg's frees) is the sync's duration less their sum.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SyncSplit {
    /// Time per phase, ns, by the phase's name: only phases zprof measured
    /// on this build (a phase whose functions could not be attached is
    /// absent, not 0).
    pub phases_ns: BTreeMap<String, u64>,
    /// Sync passes (dsl_pool_sync calls).
    pub passes: u32,
    /// Blocks the sync thread read itself (indirect blocks, space maps): it
    /// waited for each.
    pub reads: u64,
    /// Their bytes on disk.
    pub read_bytes: u64,
    /// Time the sync thread waited for them in zio_wait, ns; absent where
    /// zio_wait was not probed (uprobes without --full-timing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_wait_ns: Option<u64>,
    /// Those waits (a wait may cover several reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_waits: Option<u64>,
}

impl SyncSplit {
    /// The phases' time, ns.
    pub fn phases_total_ns(&self) -> u64 {
        self.phases_ns
            .values()
            .fold(0u64, |sum, ns| sum.saturating_add(*ns))
    }
}

/// A txg's states, timed as the txgs kstat times them, and its dirty bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TxgLife {
    /// Open: from its birth until the next txg opened (otime), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_ns: Option<u64>,
    /// Quiescing: until its writers' transactions were all done (qtime), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiesce_ns: Option<u64>,
    /// Waiting for the previous txg's sync to end (wtime), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
    /// Syncing (stime: spa_sync and the pool's stats around it), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_ns: Option<u64>,
    /// Dirty bytes when its sync began (ndirty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_bytes: Option<u64>,
    /// Its sync's I/O as the kstat counts it (the pool's root vdev stats at
    /// the sync's end less those at its start, so I/O of other work in that
    /// time too, the ZIL's): bytes read (nread), bytes written (nwritten),
    /// reads and writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// Bytes written in its sync (nwritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_bytes: Option<u64>,
    /// Reads in its sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    /// Writes in its sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
}

impl TxgLife {
    /// Whether nothing of the txg's life was seen.
    pub fn is_empty(&self) -> bool {
        *self == TxgLife::default()
    }
}

/// Workload throughput in one second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TimelinePoint {
    /// Seconds since the start (the interval ending here).
    pub second: u32,
    /// Write operations.
    pub write_ops: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Read operations.
    pub read_ops: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// zil_commit calls.
    pub zil_commits: u64,
    /// ARC reads served by the ARC (hits, held hits) in this second.
    #[serde(default)]
    pub arc_hits: u64,
    /// ARC reads served by a cache device (L2ARC hits).
    #[serde(default)]
    pub arc_l2_hits: u64,
    /// ARC reads served by the pool's disks.
    #[serde(default)]
    pub arc_disk_reads: u64,
    /// Blocks read from disk at sync priority (all priorities where it is
    /// not known): the reads the workload waited for.
    #[serde(default)]
    pub sync_disk_reads: u64,
    /// Of those, blocks not read from disk before.
    #[serde(default)]
    pub sync_first_reads: u64,
    /// The others (sync re-reads) by reuse distance, as `[bucket, count]`
    /// of the `arc_miss_reuse` histogram: the cache what-if needs the
    /// distances of the workload's own seconds, not of a warm-up's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sync_reread_distances: Vec<[u64; 2]>,
}

/// The stable name of a stage in recordings.
pub fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Compress => "compress",
        Stage::Decompress => "decompress",
        Stage::ZstdCompress => "zstd_compress",
        Stage::Lz4Compress => "lz4_compress",
        Stage::ChecksumCompute => "checksum",
        Stage::ChecksumVerify => "checksum_verify",
        Stage::VdevQueue => "vdev_queue",
        Stage::VdevDisk => "vdev_disk",
        Stage::VdevTotal => "vdev_total",
        Stage::VdevQueueTimed => "vdev_queue_timed",
        Stage::VdevWaitTimed => "vdev_wait_timed",
        Stage::VdevDiskTimed => "vdev_disk_timed",
        Stage::ZilCommit => "zil_commit",
        Stage::SpaSync => "spa_sync",
        Stage::TxgWaitSynced => "txg_wait_synced",
        Stage::TxAssign => "tx_assign",
        Stage::TxWait => "tx_wait",
        Stage::Flush => "flush",
        Stage::WorkloadWrite => "write",
        Stage::WorkloadRead => "read",
        Stage::ZilLogWrite => "zil_log_write",
        Stage::ZilFlush => "zil_flush",
        Stage::ZilOther => "zil_other",
        Stage::ZilLogBlock => "zil_log_block",
        Stage::SyncWriteCycle => "sync_write_cycle",
        Stage::ZilTimeoutWait => "zil_timeout_wait",
        Stage::BlockRead => "block_read",
        Stage::ArcRead => "arc_read",
        Stage::DdtLookup => "ddt_lookup",
        Stage::DdtSync => "ddt_sync",
        Stage::DdtLogAppend => "ddt_log_append",
        Stage::DdtLogFlush => "ddt_log_flush",
        Stage::SyncPhase => "sync_phase",
        Stage::ThrottleDelay => "throttle_delay",
        Stage::ThrottleDirty => "throttle_dirty",
        Stage::TxgDirty => "txg_dirty",
        Stage::AllocClass => "alloc_class",
        Stage::Recv => "recv",
        Stage::CommitGap => "commit_gap",
        Stage::ArcMissReuse => "arc_miss_reuse",
    }
}

/// Selects histograms of a stage, optionally of one pool and one class name.
pub fn pick<'a>(
    rec: &'a Recording,
    stage: Stage,
    pool: Option<&str>,
    class: Option<&str>,
) -> Vec<&'a HistRecord> {
    rec.histograms
        .iter()
        .filter(|h| h.stage == stage_name(stage))
        .filter(|h| pool.is_none_or(|p| h.pool == p))
        .filter(|h| class.is_none_or(|c| h.class_name == c))
        .collect()
}

/// The stage with this recording name.
pub fn stage_from_name(name: &str) -> Option<Stage> {
    Stage::ALL.into_iter().find(|s| stage_name(*s) == name)
}

/// Errors reading a recording; each says what is wrong with the file.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be read.
    // The causes are fields of the message, not error sources: anyhow's
    // chain would print them a second time.
    #[error("cannot read recording {path}: {cause}")]
    Read {
        /// File.
        path: String,
        /// Why.
        cause: std::io::Error,
    },
    /// Larger than any recording zprof writes (or an endless file).
    #[error(
        "{path} is not a zprof recording: more than {limit_mib} MiB (recordings are a few MiB)"
    )]
    TooLarge {
        /// File.
        path: String,
        /// The limit, MiB.
        limit_mib: u64,
    },
    /// Does not even start like JSON.
    #[error("{path} is not a zprof recording: it starts with byte {first:#04x}, not a JSON object")]
    NotJson {
        /// File.
        path: String,
        /// Its first byte that is not white space.
        first: u8,
    },
    /// Not JSON, or not the expected shape.
    #[error("{path} is not a valid zprof recording (corrupt or truncated?): {cause}")]
    Corrupt {
        /// File.
        path: String,
        /// The parser's complaint, with line and column, and the field where it knows it.
        cause: String,
    },
    /// JSON, but some other document.
    #[error("{path} is not a zprof recording (schema is {found:?}, expected \"zprof-recording\")")]
    WrongSchema {
        /// File.
        path: String,
        /// What it says it is.
        found: String,
    },
    /// Written by a newer zprof.
    #[error(
        "{path} is recording format version {found}, newer than this zprof reads ({VERSION}); upgrade zprof"
    )]
    TooNew {
        /// File.
        path: String,
        /// Its version.
        found: u32,
    },
    /// Internally inconsistent.
    #[error("{path} is not a valid zprof recording: {problem}")]
    Invalid {
        /// File.
        path: String,
        /// What is inconsistent.
        problem: String,
    },
}

impl Recording {
    /// A recording of 1 s on libzpool 2.1.11 holding `histograms` (unit tests).
    #[cfg(test)]
    pub(crate) fn for_tests(histograms: Vec<HistRecord>) -> Recording {
        Recording {
            schema: SCHEMA.into(),
            version: VERSION,
            zprof_version: "test".into(),
            target: TargetInfo {
                kind: TargetKind::Libzpool,
                object: "/lib/libzpool.so.5".into(),
                zfs_version: Some("2.1.11".into()),
                build_id: None,
                zfs_status: "verified".into(),
                zfs_status_detail: String::new(),
            },
            offsets_source: "test".into(),
            started_unix_ms: 0,
            duration_s: 1.0,
            command: None,
            command_exit: None,
            pid: None,
            probes: vec![],
            warnings: vec![],
            losses: Losses::default(),
            histograms,
            txgs: vec![],
            timeline: vec![],
            pool_seconds: vec![],
            bpf_programs: vec![],
            benchmark: None,
            cpu: None,
            self_cost: None,
            machine_cpu_busy: None,
            requests: vec![],
            offcpu: None,
            slow_requests: vec![],
            slow_requests_dropped: 0,
            vdevs: vec![],
            tunables: BTreeMap::new(),
        }
    }

    /// Reads and checks a recording file.
    pub fn load(path: &Path) -> Result<Recording, RecordingError> {
        use std::io::Read as _;
        let shown = path.display().to_string();
        let read_error = |cause| RecordingError::Read {
            path: shown.clone(),
            cause,
        };
        // A huge file, or an endless one (/dev/zero), must not take the
        // machine's memory before it is refused: its size is checked first,
        // its first bytes must open a JSON object, and at most one byte past
        // the limit is read.
        let file = std::fs::File::open(path).map_err(read_error)?;
        let too_large = || RecordingError::TooLarge {
            path: shown.clone(),
            limit_mib: MAX_RECORDING_BYTES >> 20,
        };
        if file
            .metadata()
            .is_ok_and(|m| m.is_file() && m.len() > MAX_RECORDING_BYTES)
        {
            return Err(too_large());
        }
        let mut reader = std::io::BufReader::new(file.take(MAX_RECORDING_BYTES + 1));
        let mut bytes = Vec::new();
        let head = std::io::BufRead::fill_buf(&mut reader).map_err(read_error)?;
        if let Some(first) = head.iter().find(|b| !b.is_ascii_whitespace())
            && *first != b'{'
        {
            return Err(RecordingError::NotJson {
                path: shown,
                first: *first,
            });
        }
        reader.read_to_end(&mut bytes).map_err(read_error)?;
        if bytes.len() as u64 > MAX_RECORDING_BYTES {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            read_error(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not UTF-8 text ({e})"),
            ))
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses and checks a recording's text; `shown` names it in errors.
    pub fn parse(text: &str, shown: &str) -> Result<Recording, RecordingError> {
        // Check the schema and version first, so a newer or foreign file gets the
        // right message instead of a field-level parse error.
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|cause| RecordingError::Corrupt {
                path: shown.to_owned(),
                cause: cause.to_string(),
            })?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(RecordingError::WrongSchema {
                path: shown.to_owned(),
                found: schema.to_owned(),
            });
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if version > VERSION {
            return Err(RecordingError::TooNew {
                path: shown.to_owned(),
                found: version,
            });
        }
        let recording: Recording =
            serde_json::from_value(value).map_err(|_| RecordingError::Corrupt {
                path: shown.to_owned(),
                cause: field_error(text),
            })?;
        recording
            .validate()
            .map_err(|problem| RecordingError::Invalid {
                path: shown.to_owned(),
                problem,
            })?;
        Ok(recording)
    }

    fn validate(&self) -> Result<(), String> {
        if !(self.duration_s.is_finite()
            && self.duration_s > 0.0
            && self.duration_s < MAX_DURATION_S)
        {
            return Err(format!(
                "duration {} s is not a recording's length",
                self.duration_s
            ));
        }
        if let Some(busy) = self.machine_cpu_busy
            && !(0.0..=1.0).contains(&busy)
        {
            return Err(format!("machine_cpu_busy {busy} is not a share"));
        }
        // Every sum zprof computes is a part of one of these totals: bounded
        // totals mean no sum anywhere overflows.
        let hist = |f: fn(&HistRecord) -> u64| self.histograms.iter().map(f);
        bounded_sum("histogram counts", hist(|h| h.count))?;
        bounded_sum("histogram times", hist(|h| h.total_ns))?;
        bounded_sum("histogram bytes", hist(|h| h.bytes))?;
        bounded_sum("histogram output bytes", hist(|h| h.bytes_out))?;
        bounded_sum(
            "program run counts",
            self.bpf_programs.iter().map(|p| p.run_count),
        )?;
        bounded_sum(
            "program run times",
            self.bpf_programs.iter().map(|p| p.run_time_ns),
        )?;
        bounded_sum("txg durations", self.txgs.iter().map(|t| t.duration_ns))?;
        let life =
            |f: fn(&TxgLife) -> Option<u64>| self.txgs.iter().filter_map(move |t| f(&t.life));
        bounded_sum("txg open times", life(|l| l.open_ns))?;
        bounded_sum("txg quiescing times", life(|l| l.quiesce_ns))?;
        bounded_sum("txg wait times", life(|l| l.wait_ns))?;
        bounded_sum("txg sync times", life(|l| l.sync_ns))?;
        bounded_sum("txg dirty bytes", life(|l| l.dirty_bytes))?;
        bounded_sum("txg bytes read", life(|l| l.read_bytes))?;
        bounded_sum("txg bytes written", life(|l| l.written_bytes))?;
        bounded_sum("txg reads", life(|l| l.reads))?;
        bounded_sum("txg writes", life(|l| l.writes))?;
        let splits = || self.txgs.iter().filter_map(|t| t.sync.as_ref());
        bounded_sum(
            "txg sync phases",
            splits().flat_map(|s| s.phases_ns.values().copied()),
        )?;
        bounded_sum("txg sync reads", splits().map(|s| s.reads))?;
        bounded_sum("txg sync read bytes", splits().map(|s| s.read_bytes))?;
        bounded_sum(
            "txg sync read waits",
            splits().filter_map(|s| s.read_wait_ns),
        )?;
        if let Some(offcpu) = &self.offcpu {
            bounded_sum(
                "off-CPU time",
                offcpu
                    .stacks
                    .iter()
                    .map(|s| s.count)
                    .chain([offcpu.start_map_full, offcpu.map_full]),
            )?;
        }
        if let Some(cpu) = &self.cpu {
            bounded_sum(
                "CPU samples",
                cpu.stacks.iter().map(|s| s.count).chain([
                    cpu.samples_total,
                    cpu.stack_lost,
                    cpu.sample_map_full,
                ]),
            )?;
        }
        bounded_sum(
            "loss counters",
            self.losses.nonzero().into_iter().map(|(_, n)| n),
        )?;
        let requests = |f: fn(&RequestRecord) -> u64| self.requests.iter().map(f);
        bounded_sum("request counts", requests(|r| r.count))?;
        bounded_sum("request times", requests(|r| r.total_ns))?;
        bounded_sum("request bytes", requests(|r| r.bytes))?;
        bounded_sum(
            "slow request times",
            self.slow_requests.iter().map(|r| r.duration_ns),
        )?;
        for r in &self.requests {
            check_distribution(
                &r.as_hist(),
                &format!("request row {} {} {}", r.layer, r.op, r.dataset),
            )?;
        }
        for h in &self.histograms {
            if stage_from_name(&h.stage).is_none() {
                return Err(format!("unknown stage {:?}", h.stage));
            }
            check_distribution(h, &format!("stage {}", h.stage))?;
        }
        Ok(())
    }

    /// Writes the recording as pretty JSON.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

/// A histogram row's buckets, count, total and max agree (`what` names it).
fn check_distribution(h: &HistRecord, what: &str) -> Result<(), String> {
    let mut sum = 0u64;
    for [index, count] in &h.buckets {
        if *index as usize >= HIST_BUCKETS {
            return Err(format!("{what} has bucket index {index} out of range"));
        }
        sum = sum
            .checked_add(*count)
            .ok_or_else(|| format!("{what} bucket counts overflow"))?;
    }
    if sum != h.count {
        return Err(format!(
            "{what} buckets sum to {sum}, count says {}",
            h.count
        ));
    }
    // A count this large is a wrapped counter, not a measurement (the sums
    // are bounded by the totals checked before).
    if h.count > MAX_PLAUSIBLE {
        return Err(format!(
            "{what} holds wrapped counters (count {}, total {} ns)",
            h.count, h.total_ns
        ));
    }
    if h.count > 0 && h.max_ns.saturating_mul(h.count) < h.total_ns {
        return Err(format!(
            "{what}: total {} ns exceeds count x max",
            h.total_ns
        ));
    }
    Ok(())
}

/// The largest recording `load` reads: zprof writes a few MiB.
pub const MAX_RECORDING_BYTES: u64 = 256 << 20;
/// The longest recording accepted: a year.
const MAX_DURATION_S: f64 = 366.0 * 86400.0;
/// Events beyond this in one histogram row are a wrapped counter (2^50:
/// ten million events a second for three and a half years).
const MAX_PLAUSIBLE: u64 = 1 << 50;
/// Summed counts, nanoseconds or bytes beyond this (2^62: 146 years, 4 EiB)
/// over a whole recording are a wrapped or forged counter.
const MAX_PLAUSIBLE_SUM: u64 = 1 << 62;

/// A well-formed JSON text that is not a recording: parsed again from the text
/// (a `Value` has no positions) to name the field where the value went wrong.
fn field_error(text: &str) -> String {
    let Err(err) = serde_json::from_str::<Recording>(text) else {
        return "unexpected shape".into();
    };
    let offset: usize = text
        .split_inclusive('\n')
        .take(err.line().saturating_sub(1))
        .map(str::len)
        .sum::<usize>()
        + err.column().saturating_sub(1);
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let field = before.rfind("\":").and_then(|end| {
        before[..end]
            .rfind('"')
            .map(|start| &before[start + 1..end])
    });
    match field {
        Some(field) => format!("field \"{field}\": {err}"),
        None => err.to_string(),
    }
}

/// Sums `values`, refusing a total over [`MAX_PLAUSIBLE_SUM`] (a wrapped or
/// forged counter).
fn bounded_sum(what: &str, mut values: impl Iterator<Item = u64>) -> Result<u64, String> {
    values
        .try_fold(0u64, |sum, v| {
            sum.checked_add(v).filter(|s| *s <= MAX_PLAUSIBLE_SUM)
        })
        .ok_or_else(|| format!("{what} add up beyond any measurement (wrapped counters)"))
}

/// Summary statistics of one or more histograms merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Events.
    pub count: u64,
    /// Sum of latencies, ns.
    pub total_ns: u64,
    /// Input bytes.
    pub bytes: u64,
    /// Output bytes.
    pub bytes_out: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Mean latency, ns.
    pub mean_ns: f64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
}

/// The value a bucket's events stand for: its midpoint, the top of the
/// bucket capped by the largest event seen (`max_ns`).
pub fn bucket_midpoint(index: usize, max_ns: u64) -> u64 {
    let low = hist_bucket_low(index);
    let high = hist_bucket_high(index).min(max_ns.max(low));
    low + (high - low) / 2
}

/// Merges histograms and computes percentiles.
///
/// Percentiles come from an hdrhistogram fed with each bucket's midpoint, so they
/// carry the buckets' resolution (about 6%); max is exact. An empty input gives
/// all zeros rather than NaN.
pub fn summarize<'a>(records: impl IntoIterator<Item = &'a HistRecord>) -> Summary {
    let mut summary = Summary::default();
    let mut merged = [0u64; HIST_BUCKETS];
    for r in records {
        summary.count += r.count;
        summary.total_ns += r.total_ns;
        summary.bytes += r.bytes;
        summary.bytes_out += r.bytes_out;
        summary.max_ns = summary.max_ns.max(r.max_ns);
        for [index, count] in &r.buckets {
            if let Some(slot) = merged.get_mut(*index as usize) {
                *slot += count;
            }
        }
    }
    if summary.count == 0 {
        return summary;
    }
    summary.mean_ns = summary.total_ns as f64 / summary.count as f64;
    let mut hdr = hdrhistogram::Histogram::<u64>::new(3).expect("3 significant figures is valid");
    for (index, count) in merged.iter().enumerate().filter(|(_, c)| **c > 0) {
        let _ = hdr.record_n(bucket_midpoint(index, summary.max_ns), *count);
    }
    let at = |q: f64| hdr.value_at_quantile(q).min(summary.max_ns);
    summary.p50_ns = at(0.50);
    summary.p90_ns = at(0.90);
    summary.p99_ns = at(0.99);
    summary.p999_ns = at(0.999);
    summary
}

/// Events of a histogram set apart into the typical ones and stalls: those
/// that waited for something other than what the stage usually does (the
/// first zil_commit of a dataset creates its log and waits for a txg sync).
/// A stall is longer than `factor` times the median, or a rare event
/// ([`STALL_SHARE_MAX`] of them at most) above an empty stretch of
/// [`STALL_GAP`] times the longest typical event: an hdd pool's commits take
/// 10-30 ms, and the 250-300 ms txg-sync wait of the first one is only 10-14
/// medians away, but nothing lies between. Throughput follows the typical
/// events' mean per event and loses the stalls' time once, not per event.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stalls {
    /// Mean of the typical events, ns (buckets' midpoints decide which are stalls).
    pub typical_mean_ns: f64,
    /// Stalled events.
    pub stalled: u64,
    /// Their time, ns (estimated from bucket midpoints, at most the total).
    pub stalled_ns: f64,
}

/// Splits merged histograms into typical events and stalls (see [`Stalls`]).
pub fn split_stalls<'a>(
    records: impl IntoIterator<Item = &'a HistRecord> + Clone,
    factor: f64,
) -> Stalls {
    let summary = summarize(records.clone());
    if summary.count == 0 {
        return Stalls::default();
    }
    let threshold = (summary.p50_ns as f64 * factor).min(gap_threshold(records.clone(), &summary));
    let (mut stalled, mut stalled_ns) = (0u64, 0f64);
    for r in records {
        for [index, count] in &r.buckets {
            if (hist_bucket_low(*index as usize) as f64) > threshold {
                stalled += count;
                stalled_ns +=
                    *count as f64 * bucket_midpoint(*index as usize, summary.max_ns) as f64;
            }
        }
    }
    let stalled_ns = stalled_ns.min(summary.total_ns as f64);
    let typical = summary.count - stalled.min(summary.count);
    let typical_mean_ns = if typical > 0 {
        (summary.total_ns as f64 - stalled_ns) / typical as f64
    } else {
        0.0
    };
    Stalls {
        typical_mean_ns,
        stalled,
        stalled_ns,
    }
}

/// An empty stretch of this many times the longest typical event sets the
/// events above it apart as stalls (see [`Stalls`]).
pub const STALL_GAP: f64 = 6.0;

/// Stalls found by a gap are at most this share of the events: a gap below
/// more of them splits two modes of the stage, not stalls.
pub const STALL_SHARE_MAX: f64 = 0.05;

/// The top of the typical events where an empty stretch of [`STALL_GAP`]
/// times it lies above the median with few events beyond it; infinite where
/// there is none.
fn gap_threshold<'a>(records: impl IntoIterator<Item = &'a HistRecord>, summary: &Summary) -> f64 {
    let mut merged = BTreeMap::<u64, u64>::new();
    for r in records {
        for [index, count] in &r.buckets {
            *merged.entry(*index).or_default() += count;
        }
    }
    let mut above = summary.count;
    let mut top_of_typical: Option<f64> = None;
    for (index, count) in merged {
        let low = hist_bucket_low(index as usize) as f64;
        if let Some(top) = top_of_typical
            && low > STALL_GAP * top
            && above as f64 <= STALL_SHARE_MAX * summary.count as f64
        {
            return top;
        }
        above -= count.min(above);
        let high = hist_bucket_high(index as usize).min(summary.max_ns) as f64;
        if high >= summary.p50_ns as f64 {
            top_of_typical = Some(high);
        }
    }
    f64::INFINITY
}

/// Converts dense kernel buckets to the sparse recording form.
pub fn sparse_buckets(buckets: &[u64]) -> Vec<[u64; 2]> {
    buckets
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| [i as u64, *c])
        .collect()
}

// The request layer's rows (recording::requests names and groups them).

/// One request row of a recording.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestRecord {
    /// "file" or "zvol".
    pub layer: String,
    /// "read", "write", "fsync" (file), "flush", "discard", "other" (zvol).
    pub op: String,
    /// "sync", "direct", "preflush": see `zprof_common::request`.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Dataset or zvol name ("" when unknown: no offsets; "[folded]" for
    /// requests beyond the row limit).
    pub dataset: String,
    /// A zvol's volblocksize (bytes; 0 for a file system or unknown).
    #[serde(default)]
    pub volblocksize: u64,
    /// Process id of the submitter (0 in the folded row).
    pub pid: u32,
    /// Thread name of the submitter.
    pub comm: String,
    /// Cgroup v2 path of the submitter ("" when unknown).
    pub cgroup: String,
    /// Requests.
    pub count: u64,
    /// Sum of latencies, ns.
    pub total_ns: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Sparse buckets, as in [`HistRecord`].
    pub buckets: Vec<[u64; 2]>,
}

impl RequestRecord {
    /// The row's latency distribution, in the shape `summarize` reads.
    pub fn as_hist(&self) -> HistRecord {
        HistRecord {
            stage: "request".into(),
            class: 0,
            class_name: String::new(),
            pool: String::new(),
            vdev: 0,
            count: self.count,
            total_ns: self.total_ns,
            bytes: self.bytes,
            bytes_out: 0,
            max_ns: self.max_ns,
            buckets: self.buckets.clone(),
        }
    }
}

/// One request slower than `record --slower-than`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SlowRequestRecord {
    /// Start, from the recording's start (ns).
    pub start_offset_ns: u64,
    /// How long it took (ns).
    pub duration_ns: u64,
    /// "file" or "zvol".
    pub layer: String,
    /// Operation, as in [`RequestRecord::op`].
    pub op: String,
    /// Flags, as in [`RequestRecord::flags`].
    #[serde(default)]
    pub flags: Vec<String>,
    /// Dataset or zvol.
    pub dataset: String,
    /// Submitting process and thread.
    pub pid: u32,
    /// Its thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// Bytes requested.
    pub bytes: u64,
    /// Where its time went: (stage, ns) for the timed stages its thread spent
    /// time in while it ran; empty when not joined (a zvol request's work runs
    /// on taskq threads).
    #[serde(default)]
    pub stages: Vec<(String, u64)>,
    /// Whether `stages` could be joined.
    #[serde(default)]
    pub joined: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use zprof_common::hist_bucket;

    fn hist(stage: &str, values: &[u64]) -> HistRecord {
        let mut dense = vec![0u64; HIST_BUCKETS];
        for v in values {
            dense[hist_bucket(*v)] += 1;
        }
        HistRecord {
            stage: stage.into(),
            class: 0,
            class_name: String::new(),
            pool: "tank".into(),
            vdev: 0,
            count: values.len() as u64,
            total_ns: values.iter().sum(),
            bytes: 0,
            bytes_out: 0,
            max_ns: values.iter().copied().max().unwrap_or(0),
            buckets: sparse_buckets(&dense),
        }
    }

    fn recording(histograms: Vec<HistRecord>) -> Recording {
        Recording::for_tests(histograms)
    }

    #[test]
    fn cpu_ticks_from_proc_stat() {
        let a = CpuTicks::parse("cpu  100 0 50 800 50 0 0 0 0 0").unwrap();
        let b = CpuTicks::parse("cpu  190 0 60 850 50 0 0 0 0 0").unwrap();
        assert_eq!(b.busy_since(&a), 100.0 / 150.0);
        assert!(CpuTicks::parse("intr 1 2").is_none());
    }

    #[test]
    fn percentiles_follow_the_data() {
        // 90 fast events at ~1 us and 10 slow ones at ~1 ms.
        let mut values = vec![1_000u64; 90];
        values.extend(vec![1_000_000u64; 10]);
        let s = summarize([&hist("zil_commit", &values)]);
        assert_eq!(s.count, 100);
        assert!((940..=1_070).contains(&s.p50_ns), "p50 {}", s.p50_ns);
        assert!(
            (940_000..=1_000_000).contains(&s.p99_ns),
            "p99 {}",
            s.p99_ns
        );
        assert_eq!(s.max_ns, 1_000_000);
        assert!((s.mean_ns - 100_900.0).abs() < 1.0);
    }

    /// A histogram as recorded: its sparse buckets, count, total and max.
    fn captured(
        stage: &str,
        count: u64,
        total_ns: u64,
        max_ns: u64,
        buckets: &[[u64; 2]],
    ) -> HistRecord {
        HistRecord {
            count,
            total_ns,
            max_ns,
            buckets: buckets.to_vec(),
            ..hist(stage, &[])
        }
    }

    #[test]
    fn a_txg_sync_wait_set_apart_from_slow_commits_is_a_stall() {
        // zil_commit on raidz3:8 of emulated hdds, 64k fsync=1 writes, no log
        // device (zprof record, 2.1.11): 127 commits of 10-33 ms, then the
        // first one's 277 ms txg-sync wait, 12.6 medians away.
        let commits = captured(
            "zil_commit",
            128,
            2_981_383_654,
            277_065_331,
            &[
                [102, 1],
                [174, 3],
                [175, 7],
                [176, 24],
                [177, 13],
                [178, 29],
                [179, 47],
                [180, 2],
                [182, 1],
                [208, 1],
            ],
        );
        let stalls = split_stalls([&commits], 20.0);
        assert_eq!(stalls.stalled, 1);
        assert!((stalls.typical_mean_ns - 21.3e6).abs() < 1e6, "{stalls:?}");
    }

    #[test]
    fn a_long_tail_without_a_gap_is_not_a_stall() {
        // The writers' own time between commits in the same job with an ssd
        // log device: 5,256 cycles of 20-100 us and a tail to 3.3 ms with no
        // empty stretch of 6x; only those past 20 medians are stalls.
        let cycles = captured(
            "sync_write_cycle",
            5256,
            293_608_610,
            3_318_670,
            &[
                [101, 1],
                [102, 10],
                [103, 83],
                [104, 916],
                [105, 1624],
                [106, 990],
                [107, 423],
                [108, 199],
                [109, 116],
                [110, 81],
                [111, 60],
                [112, 147],
                [113, 136],
                [114, 125],
                [115, 61],
                [116, 27],
                [117, 22],
                [118, 16],
                [119, 15],
                [120, 26],
                [121, 24],
                [122, 12],
                [123, 23],
                [124, 20],
                [125, 10],
                [126, 12],
                [127, 13],
                [128, 16],
                [129, 11],
                [130, 4],
                [131, 4],
                [132, 1],
                [133, 2],
                [134, 2],
                [135, 3],
                [136, 5],
                [137, 3],
                [138, 2],
                [139, 1],
                [142, 1],
                [143, 2],
                [144, 4],
                [145, 1],
                [150, 1],
                [156, 1],
            ],
        );
        let summary = summarize([&cycles]);
        assert_eq!(gap_threshold([&cycles], &summary), f64::INFINITY);
        let stalls = split_stalls([&cycles], 20.0);
        let beyond_20_medians: u64 = cycles
            .buckets
            .iter()
            .filter(|[index, _]| {
                hist_bucket_low(*index as usize) as f64 > 20.0 * summary.p50_ns as f64
            })
            .map(|[_, count]| count)
            .sum();
        assert_eq!(stalls.stalled, beyond_20_medians);
    }

    #[test]
    fn empty_summary_is_zero_not_nan() {
        let s = summarize(std::iter::empty());
        assert_eq!(s.count, 0);
        assert_eq!(s.mean_ns, 0.0);
    }

    #[test]
    fn round_trip() {
        let original = recording(vec![hist("spa_sync", &[5_000_000, 7_000_000])]);
        let text = serde_json::to_string(&original).unwrap();
        let back = Recording::parse(&text, "mem").unwrap();
        assert_eq!(back.histograms, original.histograms);
        assert_eq!(back.target.zfs_version.as_deref(), Some("2.1.11"));
    }

    #[test]
    fn a_value_of_the_wrong_kind_names_its_field() {
        let text = serde_json::to_string_pretty(&recording(vec![]))
            .unwrap()
            .replace("\"ringbuf_full\": 0", "\"ringbuf_full\": -3");
        let err = Recording::parse(&text, "rec.json").unwrap_err().to_string();
        assert!(
            err.contains(
                "field \"ringbuf_full\": invalid value: integer `-3`, expected u64 at line"
            ),
            "{err}"
        );
    }

    #[test]
    fn corrupt_truncated_and_foreign_files_are_named() {
        let text = serde_json::to_string(&recording(vec![])).unwrap();
        let truncated = &text[..text.len() / 2];
        let err = Recording::parse(truncated, "rec.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("rec.json is not a valid zprof recording (corrupt or truncated?)"),
            "{err}"
        );
        let err = Recording::parse(r#"{"jobs": []}"#, "fio.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a zprof recording"), "{err}");
        let newer = text.replace("\"version\":1", "\"version\":99");
        let err = Recording::parse(&newer, "new.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("newer than this zprof reads"), "{err}");
    }

    #[test]
    fn inconsistent_buckets_are_rejected() {
        let mut h = hist("zil_commit", &[1_000, 2_000]);
        h.count = 5;
        let text = serde_json::to_string(&recording(vec![h])).unwrap();
        let err = Recording::parse(&text, "bad.json").unwrap_err().to_string();
        assert!(err.contains("buckets sum to 2, count says 5"), "{err}");
    }

    /// CI's fuzzing found a recording whose txgs' dirty bytes overflowed the
    /// throttle finding's sum: such a recording is refused at load.
    #[test]
    fn wrapped_txg_figures_are_rejected() {
        let mut rec = recording(vec![]);
        let txg = |n| TxgRecord {
            pool: "tank".into(),
            txg: n,
            start_offset_ns: 0,
            duration_ns: 1_000,
            life: TxgLife {
                dirty_bytes: Some(u64::MAX / 2 + 1),
                ..TxgLife::default()
            },
            sync: None,
        };
        rec.txgs = vec![txg(5), txg(6)];
        let text = serde_json::to_string(&rec).unwrap();
        let err = Recording::parse(&text, "bad.json").unwrap_err().to_string();
        assert!(err.contains("txg dirty bytes add up beyond"), "{err}");
    }

    #[test]
    fn stage_names_round_trip() {
        for stage in Stage::ALL {
            assert_eq!(stage_from_name(stage_name(stage)), Some(stage));
        }
    }
}
