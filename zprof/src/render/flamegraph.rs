//! Flame graphs from a recording, as folded stacks and as SVG (inferno).
//!
//! Four kinds from the same recording:
//! - stage time: stacks built from the measured stage spans (`fsync;zil_commit;
//!   log block write;main pool`, `zio pipeline;compress;zstd-3`), weighted by the
//!   wall-clock time spent in them, summed over threads;
//! - CPU: on-CPU stack samples of the workload's process and of ZFS's threads,
//!   symbolized (libzpool's dynamic symbols, the program's own, kallsyms);
//! - off-CPU: where the traced threads were blocked, weighted by time;
//! - wall clock: the CPU samples (as time) and the off-CPU time together, under
//!   a root frame per kind of time (compression, checksums, other CPU, waiting
//!   for the ZIL, for txg sync, throttled, ...), idle threads left out: the
//!   answer to "compression or I/O?" in one picture, its split in the title;
//! - workload: the workload's stage time, with its waits for txg sync split by
//!   what the syncs did (`analyze::waited_for`): a `zfs recv` into zstd-19
//!   is mostly compression, the same stream uncompressed mostly the disks.
//!
//! And a differential graph of two recordings of one kind (`compare
//! --flamegraph`), normalised to the same workload operations.
//!
//! Colours set compression, checksum and I/O-wait frames apart from the rest.

use std::collections::BTreeMap;

use inferno::flamegraph::{self, Options, color::Color, color::PaletteMap};
use zprof_common::Stage;

use super::flamegraph_header as header;
use crate::{
    recording::classes::ZSTD_EARLY_ABORT_TRIAL,
    recording::{Recording, Summary, stage_name, summarize},
    units::format_ns,
    zfs::symbols::UNKNOWN_FRAME,
};

/// Folded stacks: "frame;frame;frame weight" per line.
pub type Folded = Vec<String>;

fn total(rec: &Recording, stage: Stage, class: Option<&str>) -> u64 {
    let s: Summary = summarize(
        rec.histograms
            .iter()
            .filter(|h| h.stage == stage_name(stage) && class.is_none_or(|c| h.class_name == c)),
    );
    s.total_ns
}

fn classes(rec: &Recording, stage: Stage) -> Vec<String> {
    let mut names: Vec<String> = rec
        .histograms
        .iter()
        .filter(|h| h.stage == stage_name(stage))
        .map(|h| h.class_name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Stage-time stacks, weighted in microseconds.
pub fn stage_stacks(rec: &Recording) -> Folded {
    let mut weights = Weights::default();
    workload_stacks(rec, &mut weights);
    weights.add(
        "txg_wait_synced".into(),
        total(rec, Stage::TxgWaitSynced, None),
    );
    // ZFS's own threads: each txg's sync, split into its phases where the
    // recording has them (the rest stays spa_sync's own frame).
    let mut phases_ns = 0;
    for phase in classes(rec, Stage::SyncPhase) {
        let ns = total(rec, Stage::SyncPhase, Some(&phase));
        phases_ns += ns;
        weights.add(format!("txg sync;spa_sync;{phase}"), ns);
    }
    weights.add(
        "txg sync;spa_sync".into(),
        total(rec, Stage::SpaSync, None).saturating_sub(phases_ns),
    );
    compression_stacks(rec, &mut weights);
    pipeline_stacks(rec, &mut weights);
    vdev_stacks(rec, &mut weights);
    weights.folded()
}

/// The frame under each share of a txg-sync wait in the workload graph.
const WAITED_FOR: &str = "waited for at txg sync";

/// The workload's stage time, its txg-sync waits split by their causes
/// (what the syncs did), weighted in microseconds.
pub fn workload_cause_stacks(rec: &Recording) -> Folded {
    let mut weights = Weights::default();
    workload_stacks(rec, &mut weights);
    for (frames, ns) in crate::analyze::waited_for::txg_wait_causes(rec) {
        weights.add(format!("{};{WAITED_FOR}", frames.join(";")), ns);
    }
    weights.folded()
}

/// Folded stacks and their weights in microseconds.
#[derive(Default)]
struct Weights(BTreeMap<String, u64>);

impl Weights {
    /// The stacks as folded lines.
    fn folded(self) -> Folded {
        self.0
            .into_iter()
            .map(|(stack, w)| format!("{stack} {w}"))
            .collect()
    }

    /// Adds `ns` to `stack` (spans under a microsecond are left out).
    fn add(&mut self, stack: String, ns: u64) {
        if ns >= 1_000 {
            *self.0.entry(stack).or_default() += ns / 1_000;
        }
    }
}

/// The workload's own threads: writes and the throttle, reads, a zfs recv's
/// stream, and fsync's zil_commit split into its log writes, flushes and
/// waits (their waits for txg sync are the caller's).
fn workload_stacks(rec: &Recording, weights: &mut Weights) {
    let mut add = |stack: String, ns: u64| weights.add(stack, ns);
    add(
        "write;dmu_write".into(),
        total(rec, Stage::WorkloadWrite, None),
    );
    let wait = total(rec, Stage::TxWait, None);
    add(
        "write;tx_assign".into(),
        total(rec, Stage::TxAssign, None).saturating_sub(wait),
    );
    add("write;tx_assign;throttle (dmu_tx_wait)".into(), wait);
    add(
        "read;dmu_read".into(),
        total(rec, Stage::WorkloadRead, None),
    );
    let mut inside_commit = 0;
    for class in classes(rec, Stage::ZilLogWrite) {
        let ns = total(rec, Stage::ZilLogWrite, Some(&class));
        inside_commit += ns;
        add(format!("fsync;zil_commit;log block write;{class}"), ns);
    }
    let flush = total(rec, Stage::ZilFlush, None);
    inside_commit += flush;
    add("fsync;zil_commit;cache flush".into(), flush);
    let waited = total(rec, Stage::ZilTimeoutWait, None);
    inside_commit += waited;
    add(
        "fsync;zil_commit;commit timeout (waiting for the log block to fill)".into(),
        waited,
    );
    add(
        "fsync;zil_commit;cpu and wake-ups".into(),
        total(rec, Stage::ZilCommit, None).saturating_sub(inside_commit),
    );
    add(
        "zfs recv;dmu_recv_stream".into(),
        total(rec, Stage::Recv, None),
    );
}

/// zio's compression: per algorithm and level, zstd's own time and its lz4
/// early-abort trials, and lz4's.
fn compression_stacks(rec: &Recording, weights: &mut Weights) {
    let mut add = |stack: String, ns: u64| weights.add(stack, ns);
    // zstd's early abort runs an lz4 trial inside zfs_zstd_compress; trials are
    // not told apart per zstd level, so the first zstd classes take them.
    let mut trials_left = total(rec, Stage::Lz4Compress, Some(ZSTD_EARLY_ABORT_TRIAL));
    for class in classes(rec, Stage::Compress) {
        let outer = total(rec, Stage::Compress, Some(&class));
        let inner = if class.starts_with("zstd") {
            let ns = total(rec, Stage::ZstdCompress, Some(&class));
            let trial = trials_left.min(ns);
            trials_left -= trial;
            add(
                format!("zio pipeline;compress;{class};zfs_zstd_compress;lz4 early-abort trial"),
                trial,
            );
            add(
                format!("zio pipeline;compress;{class};zfs_zstd_compress"),
                ns - trial,
            );
            ns
        } else if class == "lz4" {
            let ns = total(rec, Stage::Lz4Compress, Some("lz4"));
            add(
                format!("zio pipeline;compress;{class};lz4_compress_zfs"),
                ns,
            );
            ns
        } else {
            0
        };
        add(
            format!("zio pipeline;compress;{class}"),
            outer.saturating_sub(inner),
        );
    }
}

/// zio's decompression and checksums.
fn pipeline_stacks(rec: &Recording, weights: &mut Weights) {
    let mut add = |stack: String, ns: u64| weights.add(stack, ns);
    for class in classes(rec, Stage::Decompress) {
        add(
            format!("zio pipeline;decompress;{class}"),
            total(rec, Stage::Decompress, Some(&class)),
        );
    }
    for class in classes(rec, Stage::ChecksumCompute) {
        add(
            format!("zio pipeline;checksum;{class}"),
            total(rec, Stage::ChecksumCompute, Some(&class)),
        );
    }
    add(
        "zio pipeline;checksum verify".into(),
        total(rec, Stage::ChecksumVerify, None),
    );
}

/// Leaf vdev I/O per class, split into queue and disk where offsets allow,
/// and the cache flushes.
fn vdev_stacks(rec: &Recording, weights: &mut Weights) {
    let mut add = |stack: String, ns: u64| weights.add(stack, ns);
    for class in classes(rec, Stage::VdevDisk) {
        add(
            format!("vdev I/O;{class};queue"),
            total(rec, Stage::VdevQueue, Some(&class)),
        );
        add(
            format!("vdev I/O;{class};disk"),
            total(rec, Stage::VdevDisk, Some(&class)),
        );
    }
    // Kernel statics split the fallback span where the leaf I/O starts.
    let split_disk = total(rec, Stage::VdevDiskTimed, None);
    if split_disk > 0 {
        add(
            "vdev I/O;queue (no offsets)".into(),
            total(rec, Stage::VdevWaitTimed, None),
        );
        add("vdev I/O;disk (no offsets)".into(), split_disk);
    } else {
        add(
            "vdev I/O;queue+disk (no offsets)".into(),
            total(rec, Stage::VdevQueueTimed, None),
        );
    }
    add(
        "vdev I/O;cache flush".into(),
        total(rec, Stage::Flush, None),
    );
}

/// CPU sample stacks, weighted in samples. Spaces in frame names (C++ or Rust
/// generics) would break the folded format, so they become underscores.
pub fn cpu_stacks(rec: &Recording) -> Folded {
    let Some(cpu) = &rec.cpu else {
        return Vec::new();
    };
    cpu.stacks
        .iter()
        .map(|s| format!("{} {}", folded_frames(&s.frames), s.count))
        .collect()
}

/// Off-CPU stacks, weighted in microseconds blocked.
pub fn offcpu_stacks(rec: &Recording) -> Folded {
    let Some(offcpu) = &rec.offcpu else {
        return Vec::new();
    };
    offcpu
        .stacks
        .iter()
        .map(|s| format!("{} {}", folded_frames(&s.frames), s.count))
        .collect()
}

/// The stacks of one kind, or why the recording has none.
pub fn stacks_of(rec: &Recording, kind: FlameKind) -> Result<Folded, String> {
    match kind {
        FlameKind::Stages => Ok(stage_stacks(rec)),
        FlameKind::Cpu => {
            rec.cpu
                .as_ref()
                .ok_or("the recording has no CPU samples (it was made with --sample-freq 0)")?;
            Ok(cpu_stacks(rec))
        }
        FlameKind::OffCpu => {
            rec.offcpu
                .as_ref()
                .ok_or("the recording has no off-CPU time (record it with --off-cpu)")?;
            Ok(offcpu_stacks(rec))
        }
        FlameKind::Wall => Ok(wall_clock(rec)?.0),
        FlameKind::Workload => Ok(workload_cause_stacks(rec)),
    }
}

/// Kinds of flame graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlameKind {
    /// Wall-clock time per stage.
    Stages,
    /// On-CPU stack samples.
    Cpu,
    /// Where the traced threads were blocked, weighted by time.
    OffCpu,
    /// On-CPU and off-CPU time together, under a root per kind of time.
    Wall,
    /// The workload's stage time, its txg-sync waits split by cause.
    Workload,
}

/// A kind's name as the command line spells it.
pub fn kind_name(kind: FlameKind) -> String {
    match kind {
        FlameKind::Stages => "stages",
        FlameKind::Cpu => "cpu",
        FlameKind::OffCpu => "off-cpu",
        FlameKind::Wall => "wall",
        FlameKind::Workload => "workload",
    }
    .to_owned()
}

/// The wall-clock view's root frames, in the order the title lists them.
pub const WALL_CATEGORIES: [&str; 10] = [
    "on CPU: compression",
    "on CPU: checksums",
    "on CPU: other (copies, allocation, the pipeline)",
    "waiting: ZIL commit (fsync, O_SYNC)",
    "waiting: txg sync (txg_wait_synced)",
    "waiting: write throttle (dmu_tx_wait)",
    "waiting: tx assign",
    "waiting: txg sync's own I/O (spa_sync)",
    "waiting: ZFS pipeline threads (I/O, locks)",
    "waiting for a CPU (runnable)",
];

/// The same categories as the title names them, briefly.
const WALL_SHORT: [&str; 10] = [
    "compression",
    "checksums",
    "other",
    "ZIL commit",
    "txg_wait_synced",
    "throttle",
    "tx assign",
    "spa_sync I/O",
    "pipeline I/O",
    "runnable",
];

/// How the wall-clock view split its time, in microseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WallSplit {
    /// Time per category of [`WALL_CATEGORIES`], same order.
    pub by_category: Vec<u64>,
    /// Off-CPU time of threads blocked outside ZFS's work (idle taskq
    /// threads, the benchmark's own sleeps): left out of the graph.
    pub idle_us: u64,
}

impl WallSplit {
    /// All the time in the graph.
    pub fn total_us(&self) -> u64 {
        self.by_category.iter().sum()
    }
}

/// The wall-clock view: CPU samples (each worth 1/frequency seconds) and
/// off-CPU time, each stack under its category. Needs both in the recording.
pub fn wall_clock(rec: &Recording) -> Result<(Folded, WallSplit), String> {
    let (Some(cpu), Some(offcpu)) = (&rec.cpu, &rec.offcpu) else {
        return Err("the wall-clock view needs CPU samples and off-CPU time: record with --off-cpu (and --sample-freq above 0)".into());
    };
    let us_per_sample = 1_000_000 / cpu.frequency_hz.max(1);
    let mut split = WallSplit {
        by_category: vec![0; WALL_CATEGORIES.len()],
        idle_us: 0,
    };
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    let stacks = cpu
        .stacks
        .iter()
        .map(|s| (s, true))
        .chain(offcpu.stacks.iter().map(|s| (s, false)));
    for (stack, on_cpu) in stacks {
        let us = if on_cpu {
            stack.count * us_per_sample
        } else {
            stack.count
        };
        match wall_category(&stack.frames, on_cpu) {
            Some(index) => {
                split.by_category[index] += us;
                *lines
                    .entry(format!(
                        "{};{}",
                        WALL_CATEGORIES[index],
                        folded_frames(&stack.frames)
                    ))
                    .or_default() += us;
            }
            None => split.idle_us += us,
        }
    }
    let folded = lines
        .into_iter()
        .filter(|(_, us)| *us > 0)
        .map(|(stack, us)| format!("{stack} {us}"))
        .collect();
    Ok((folded, split))
}

/// A frame with a real name (not a place, a marker or a kernel frame's suffix).
fn named(frame: &str) -> bool {
    !frame.starts_with('[')
}

/// Index in [`WALL_CATEGORIES`] of a stack, or `None` for idle time.
fn wall_category(frames: &[String], on_cpu: bool) -> Option<usize> {
    let real = || frames.iter().filter(|f| named(f));
    if on_cpu {
        let group = real().find_map(|f| colour_group(f).filter(|g| *g != Group::Io));
        return Some(match group {
            Some(Group::Compression) => 0,
            Some(Group::Checksum) => 1,
            _ => 2,
        });
    }
    if frames
        .last()
        .is_some_and(|f| f == crate::recording::RUNNABLE_FRAME)
    {
        return Some(9);
    }
    let in_stage = |stage: Stage| {
        frames
            .iter()
            .any(|f| *f == format!("[in {}]", stage_name(stage)))
    };
    let by_stage = [
        (Stage::ZilCommit, 3),
        (Stage::TxgWaitSynced, 4),
        (Stage::TxWait, 5),
        (Stage::TxAssign, 6),
        (Stage::SpaSync, 7),
        (Stage::WorkloadWrite, 8),
        (Stage::WorkloadRead, 8),
    ];
    if let Some((_, index)) = by_stage.iter().find(|(stage, _)| in_stage(*stage)) {
        return Some(*index);
    }
    const ZFS_WORK: [&str; 9] = [
        "zio_",
        "vdev_",
        "spa_",
        "dmu_",
        "zil_",
        "arc_",
        "dbuf_",
        "metaslab_",
        "zfs_",
    ];
    real()
        .any(|f| ZFS_WORK.iter().any(|p| f.starts_with(p)))
        .then_some(8)
}

/// One stack's frames in folded form. A run of unknown frames (a user stack
/// walked through code without frame pointers reads garbage, 126 frames of it
/// once) is one frame: it says where the walk was lost, not how far it went.
fn folded_frames(frames: &[String]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(frames.len());
    for frame in frames {
        if frame == UNKNOWN_FRAME && out.last().is_some_and(|last| last == UNKNOWN_FRAME) {
            continue;
        }
        out.push(frame.replace([' ', ';'], "_"));
    }
    out.join(";")
}

/// Parses folded stacks back into (frames, weight).
pub fn parse_folded(lines: &[String]) -> Result<Vec<(Vec<String>, u64)>, String> {
    lines
        .iter()
        .map(|line| {
            let (stack, weight) = line
                .rsplit_once(' ')
                .ok_or_else(|| format!("no weight in {line:?}"))?;
            let weight = weight
                .parse()
                .map_err(|_| format!("bad weight in {line:?}"))?;
            Ok((stack.split(';').map(str::to_owned).collect(), weight))
        })
        .collect()
}

/// Groups of frames the graphs colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Compression,
    Checksum,
    Io,
}

/// The group of a frame, by the words in its name.
fn colour_group(frame: &str) -> Option<Group> {
    let f = frame.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| f.contains(w));
    if any(&[
        "compress", "zstd", "lz4", "gzip", "lzjb", "zle", "deflate", "inflate",
    ]) {
        Some(Group::Compression)
    } else if any(&[
        "checksum", "fletcher", "sha256", "sha512", "sha2", "skein", "edonr", "blake3",
    ]) {
        Some(Group::Checksum)
    } else if any(&[
        "vdev i/o",
        "disk",
        "queue",
        "flush",
        "log block write",
        "fsync",
        "pwrite",
        "pread",
        "io_schedule",
        "spa_sync",
        "txg_wait",
        "throttle",
        "main pool",
        "log vdev",
        "special vdev",
        "sync read",
        "sync write",
        "async read",
        "async write",
        "scrub",
        "trim",
        "waiting",
    ]) {
        Some(Group::Io)
    } else {
        None
    }
}

/// The colour of a frame's group.
fn colour_of(frame: &str) -> Option<Color> {
    colour_group(frame).map(|group| match group {
        Group::Compression => Color {
            r: 230,
            g: 140,
            b: 30,
        }, // orange
        Group::Checksum => Color {
            r: 80,
            g: 180,
            b: 80,
        }, // green
        Group::Io => Color {
            r: 90,
            g: 140,
            b: 220,
        }, // I/O and waiting: blue
    })
}

/// What a flame graph's header says.
pub struct Titles {
    /// Main title.
    pub title: String,
    /// Second line.
    pub subtitle: String,
    /// Unit of the widths ("us", "samples").
    pub count_name: String,
}

/// Titles for a kind of graph of a recording: what was measured, on which
/// target, for how long, and what was lost.
pub fn titles(rec: &Recording, kind: FlameKind) -> Titles {
    let target = format!(
        "{} {} (OpenZFS {})",
        rec.target.kind,
        rec.target
            .object
            .rsplit('/')
            .next()
            .unwrap_or(&rec.target.object),
        rec.target.zfs_version.as_deref().unwrap_or("?")
    );
    match kind {
        FlameKind::Wall => wall_titles(rec, &target),
        FlameKind::OffCpu => offcpu_titles(rec, &target),
        FlameKind::Cpu => cpu_titles(rec, &target),
        FlameKind::Stages => stage_titles(rec, &target),
        FlameKind::Workload => workload_titles(rec, &target),
    }
}

/// The workload view's titles: how its waits were split.
fn workload_titles(rec: &Recording, target: &str) -> Titles {
    Titles {
        title: format!("zprof workload time by cause: {target}, {:.1} s", rec.duration_s),
        subtitle: "width = the workload's time in each stage, summed over threads; its txg-sync waits split as its pool's syncs spent theirs".into(),
        count_name: "us".into(),
    }
}

/// The wall-clock view's titles: the split of the threads' time.
fn wall_titles(rec: &Recording, target: &str) -> Titles {
    let split = wall_clock(rec).map(|(_, split)| split).unwrap_or_default();
    Titles {
        title: format!(
            "zprof wall clock: where the traced threads' time went, {target}, {:.1} s",
            rec.duration_s
        ),
        subtitle: format!(
            "{}; {} of thread time, idle threads' {} left out",
            wall_split_text(&split),
            format_ns(split.total_us() * 1_000),
            format_ns(split.idle_us * 1_000)
        ),
        count_name: "us".into(),
    }
}

/// The off-CPU view's titles: blocked time, and what was lost or cut.
fn offcpu_titles(rec: &Recording, target: &str) -> Titles {
    let (lost, stack_lost, periods, cut_us, blocked_us) =
        rec.offcpu.as_ref().map_or((0, 0, 0, 0, 0), |o| {
            (
                o.start_map_full + o.map_full,
                o.stack_lost,
                o.periods,
                o.cut_us,
                o.stacks.iter().map(|s| s.count).sum::<u64>(),
            )
        });
    Titles {
        title: format!(
            "zprof off-CPU: where the traced threads waited, {target}, {:.1} s",
            rec.duration_s
        ),
        subtitle: format!(
            "width = time off the CPU, {} in all, summed over threads (a [runnable] leaf: preempted, waiting for a CPU); of {periods} periods {lost} lost, {stack_lost} without stack; {} in stacks cut at {} frames",
            format_ns(blocked_us * 1_000),
            format_ns(cut_us * 1_000),
            zprof_common::STACK_DEPTH
        ),
        count_name: "us".into(),
    }
}

/// The CPU view's titles: samples, losses, symbolization, unnamed processes.
fn cpu_titles(rec: &Recording, target: &str) -> Titles {
    let Some(cpu) = rec.cpu.as_ref() else {
        return Titles {
            title: "zprof CPU: no samples".into(),
            subtitle: String::new(),
            count_name: "samples".into(),
        };
    };
    let lost = cpu.stack_lost + cpu.sample_map_full;
    let lost_pct = if cpu.samples_total > 0 {
        lost as f64 * 100.0 / cpu.samples_total as f64
    } else {
        0.0
    };
    let unnamed: Vec<String> = cpu
        .unnamed_processes
        .iter()
        .map(|p| {
            format!(
                "{} (pid {}): {} of {} user stacks unnamed, {}",
                p.name, p.pid, p.unnamed, p.samples, p.why
            )
        })
        .collect();
    Titles {
        title: format!(
            "zprof CPU: on-CPU samples, {target}, {:.1} s",
            rec.duration_s
        ),
        subtitle: format!(
            "{} samples at {} Hz per CPU; {lost_pct:.1}% of samples lost; {} cut at {} frames; {} frames unsymbolized, {} placed ([lib:symbol+off]: a function without symbol); {}orange compression, green checksums, blue I/O",
            cpu.samples_total,
            cpu.frequency_hz,
            cpu.cut_samples,
            cpu.stack_depth,
            cpu.unsymbolized_frames,
            cpu.placed_frames,
            if unnamed.is_empty() {
                String::new()
            } else {
                format!("NOT NAMED: {}; ", unnamed.join("; "))
            }
        ),
        count_name: "samples".into(),
    }
}

/// The stage-time view's titles.
fn stage_titles(rec: &Recording, target: &str) -> Titles {
    let skipped: u64 = rec.bpf_programs.iter().map(|p| p.missed).sum();
    let lost: u64 = rec.losses.nonzero().iter().map(|(_, n)| n).sum::<u64>() + skipped;
    Titles {
        title: format!("zprof stage time: {target}, {:.1} s", rec.duration_s),
        subtitle: format!(
            "width = wall-clock time in each stage, summed over threads; {lost} events lost or unmatched; orange compression, green checksums, blue I/O and waits"
        ),
        count_name: "us".into(),
    }
}

/// The split of the wall-clock view as the title states it: on-CPU and waiting
/// shares, and each category of 1% or more.
pub fn wall_split_text(split: &WallSplit) -> String {
    let total = split.total_us().max(1) as f64;
    let pct = |us: u64| us as f64 * 100.0 / total;
    let part = |range: std::ops::Range<usize>| -> (u64, Vec<String>) {
        let sum = split.by_category[range.clone()].iter().sum();
        let parts = range
            .filter(|&i| pct(split.by_category[i]) >= 1.0)
            .map(|i| format!("{} {:.0}%", WALL_SHORT[i], pct(split.by_category[i])))
            .collect();
        (sum, parts)
    };
    let (on, on_parts) = part(0..3);
    let (waiting, wait_parts) = part(3..WALL_CATEGORIES.len());
    format!(
        "on CPU {:.0}% ({}), waiting {:.0}% ({})",
        pct(on),
        on_parts.join(", "),
        pct(waiting),
        wait_parts.join(", ")
    )
}

/// A differential flame graph's stacks ("stack before after") and header.
pub struct Differential {
    /// Folded lines with two counts: A's (scaled) and B's.
    pub lines: Folded,
    /// What it shows.
    pub titles: Titles,
}

/// Workload operations of a recording (writes and reads as zprof counted them).
fn workload_ops(rec: &Recording) -> u64 {
    [Stage::WorkloadWrite, Stage::WorkloadRead]
        .into_iter()
        .map(|stage| {
            summarize(
                rec.histograms
                    .iter()
                    .filter(|h| h.stage == stage_name(stage)),
            )
            .count
        })
        .sum()
}

/// B's stacks of one kind against A's, A's weights scaled to B's workload
/// operations (or, without operations on one side, to B's duration), so that
/// a run twice as long does not look twice as costly.
pub fn differential(a: &Recording, b: &Recording, kind: FlameKind) -> Result<Differential, String> {
    let (stacks_a, stacks_b) = (stacks_of(a, kind)?, stacks_of(b, kind)?);
    let (ops_a, ops_b) = (workload_ops(a), workload_ops(b));
    let (scale, basis) = if ops_a > 0 && ops_b > 0 {
        (
            ops_b as f64 / ops_a as f64,
            format!("per workload operation ({ops_a} in A, {ops_b} in B)"),
        )
    } else {
        (
            b.duration_s / a.duration_s.max(1e-9),
            format!(
                "per second (no workload operations counted; {:.1} s in A, {:.1} s in B)",
                a.duration_s, b.duration_s
            ),
        )
    };
    let scaled: Folded = parse_folded(&stacks_a)?
        .into_iter()
        .map(|(frames, w)| format!("{} {}", frames.join(";"), (w as f64 * scale).round() as u64))
        .collect();
    let mut out = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        scaled.join("\n").as_bytes(),
        stacks_b.join("\n").as_bytes(),
        &mut out,
    )
    .map_err(|e| format!("building the differential stacks: {e}"))?;
    let lines: Folded = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_owned)
        .collect();
    let unit = if kind == FlameKind::Cpu {
        "samples"
    } else {
        "us"
    };
    let version = |r: &Recording| {
        format!(
            "{} {}",
            r.target.kind,
            r.target.zfs_version.as_deref().unwrap_or("?")
        )
    };
    Ok(Differential {
        lines,
        titles: Titles {
            title: format!(
                "zprof differential ({} kind): B against A, {}",
                kind_name(kind),
                version(b)
            ),
            subtitle: format!(
                "widths: B; red: B spends more than A, blue: less, {basis}; A: {} ({:.1} s), B: {} ({:.1} s)",
                version(a),
                a.duration_s,
                version(b),
                b.duration_s
            ),
            count_name: unit.into(),
        },
    })
}

/// Renders folded stacks as an SVG flame graph.
pub fn render_svg(lines: &Folded, titles: &Titles) -> std::io::Result<String> {
    let mut palette = PaletteMap::default();
    for line in lines {
        let stack = line.rsplit_once(' ').map_or(line.as_str(), |(s, _)| s);
        for frame in stack.split(';') {
            if let Some(colour) = colour_of(frame) {
                palette.insert(frame, colour);
            }
        }
    }
    let mut options = Options::default();
    options.title = titles.title.clone();
    let subtitle = header::wrap(&titles.subtitle, header::SUBTITLE_CHARS);
    options.subtitle = Some(subtitle[0].clone());
    options.count_name = titles.count_name.clone();
    options.palette_map = Some(&mut palette);
    options.deterministic = true;
    options.min_width = 0.0;
    let mut svg = Vec::new();
    if lines.is_empty() {
        let empty = ["(no data) 1".to_owned()];
        flamegraph::from_lines(&mut options, empty.iter().map(String::as_str), &mut svg)?;
    } else {
        flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    }
    let svg = String::from_utf8_lossy(&svg).into_owned();
    Ok(header::add_lines(svg, &subtitle[1..]))
}

/// Share of weight in frames matching `pred` (for tests and summaries).
pub fn share_of(lines: &Folded, pred: impl Fn(&str) -> bool) -> f64 {
    let parsed = parse_folded(lines).unwrap_or_default();
    let total: u64 = parsed.iter().map(|(_, w)| w).sum();
    let matching: u64 = parsed
        .iter()
        .filter(|(frames, _)| frames.iter().any(|f| pred(f)))
        .map(|(_, w)| w)
        .sum();
    if total == 0 {
        0.0
    } else {
        matching as f64 / total as f64
    }
}

/// Human summary used in logs.
pub fn describe(lines: &Folded, unit_ns: bool) -> String {
    let parsed = parse_folded(lines).unwrap_or_default();
    let total: u64 = parsed.iter().map(|(_, w)| w).sum();
    if unit_ns {
        format!(
            "{} stacks, {} in all",
            parsed.len(),
            format_ns(total * 1_000)
        )
    } else {
        format!("{} stacks, {total} samples", parsed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_round_trip() {
        let lines: Folded = vec![
            "fsync;zil_commit;cache flush 120".into(),
            "write;dmu_write 7".into(),
        ];
        let parsed = parse_folded(&lines).unwrap();
        let again: Folded = parsed
            .iter()
            .map(|(f, w)| format!("{} {w}", f.join(";")))
            .collect();
        assert_eq!(again, lines);
        assert!(parse_folded(&["no-weight".to_owned()]).is_err());
    }

    #[test]
    fn runs_of_unknown_frames_are_one_frame() {
        let frames: Vec<String> = [
            "zprof-lab",
            "[unknown]",
            "[unknown]",
            "[unknown]",
            "zio_compress_data",
            "[unknown]",
            "a b;c",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            folded_frames(&frames),
            "zprof-lab;[unknown];zio_compress_data;[unknown];a_b_c"
        );
    }

    #[test]
    fn colours_group_frames() {
        assert_eq!(
            colour_of("zfs_zstd_compress"),
            colour_of("lz4_compress_zfs")
        );
        assert_eq!(
            colour_of("fletcher_4_native"),
            colour_of("zio_checksum_compute")
        );
        assert_ne!(
            colour_of("zfs_zstd_compress"),
            colour_of("zio_checksum_compute")
        );
        assert!(colour_of("dmu_write").is_none());
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let lines: Folded = vec!["a;zfs_zstd_compress 10".into(), "a;b 5".into()];
        let titles = Titles {
            title: "t & <t>".into(),
            subtitle: "s".into(),
            count_name: "us".into(),
        };
        let svg = render_svg(&lines, &titles).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("zfs_zstd_compress"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
