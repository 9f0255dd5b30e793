//! Flame graphs from a recording, as folded stacks and as SVG (inferno).
//!
//! Two kinds from the same recording:
//! - stage time: stacks built from the measured stage spans (`fsync;zil_commit;
//!   log block write;main pool`, `zio pipeline;compress;zstd-3`), weighted by the
//!   wall-clock time spent in them, summed over threads;
//! - CPU: on-CPU stack samples of the workload's process and of ZFS's threads,
//!   symbolized (libzpool's dynamic symbols, the program's own, kallsyms).
//!
//! Colours set compression, checksum and I/O-wait frames apart from the rest.

use std::collections::BTreeMap;

use inferno::flamegraph::{self, Options, color::Color, color::PaletteMap};
use zprof_common::Stage;

use crate::{
    cli::FlameKind,
    recording::{Recording, Summary, stage_name, summarize},
    report::format_ns,
    symbols::UNKNOWN_FRAME,
    tracer::ZSTD_EARLY_ABORT_TRIAL,
};

/// Folded stacks: "frame;frame;frame weight" per line.
pub type Folded = Vec<String>;

fn total(rec: &Recording, stage: Stage, class: Option<&str>) -> u64 {
    let s: Summary = summarize(
        rec.histograms.iter().filter(|h| h.stage == stage_name(stage) && class.is_none_or(|c| h.class_name == c)),
    );
    s.total_ns
}

fn classes(rec: &Recording, stage: Stage) -> Vec<String> {
    let mut names: Vec<String> =
        rec.histograms.iter().filter(|h| h.stage == stage_name(stage)).map(|h| h.class_name.clone()).collect();
    names.sort();
    names.dedup();
    names
}

/// Stage-time stacks, weighted in microseconds.
pub fn stage_stacks(rec: &Recording) -> Folded {
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    let mut add = |stack: String, ns: u64| {
        if ns >= 1_000 {
            *weights.entry(stack).or_default() += ns / 1_000;
        }
    };
    // The workload's own threads.
    add("write;dmu_write".into(), total(rec, Stage::WorkloadWrite, None));
    let wait = total(rec, Stage::TxWait, None);
    add("write;tx_assign".into(), total(rec, Stage::TxAssign, None).saturating_sub(wait));
    add("write;tx_assign;throttle (dmu_tx_wait)".into(), wait);
    add("read;dmu_read".into(), total(rec, Stage::WorkloadRead, None));
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
    add("fsync;zil_commit;commit timeout (waiting for the log block to fill)".into(), waited);
    add("fsync;zil_commit;cpu and wake-ups".into(), total(rec, Stage::ZilCommit, None).saturating_sub(inside_commit));
    add("txg_wait_synced".into(), total(rec, Stage::TxgWaitSynced, None));
    // ZFS's own threads.
    add("txg sync;spa_sync".into(), total(rec, Stage::SpaSync, None));
    // zstd's early abort runs an lz4 trial inside zfs_zstd_compress; trials are
    // not told apart per zstd level, so the first zstd classes take them.
    let mut trials_left = total(rec, Stage::Lz4Compress, Some(ZSTD_EARLY_ABORT_TRIAL));
    for class in classes(rec, Stage::Compress) {
        let outer = total(rec, Stage::Compress, Some(&class));
        let inner = if class.starts_with("zstd") {
            let ns = total(rec, Stage::ZstdCompress, Some(&class));
            let trial = trials_left.min(ns);
            trials_left -= trial;
            add(format!("zio pipeline;compress;{class};zfs_zstd_compress;lz4 early-abort trial"), trial);
            add(format!("zio pipeline;compress;{class};zfs_zstd_compress"), ns - trial);
            ns
        } else if class == "lz4" {
            let ns = total(rec, Stage::Lz4Compress, Some("lz4"));
            add(format!("zio pipeline;compress;{class};lz4_compress_zfs"), ns);
            ns
        } else {
            0
        };
        add(format!("zio pipeline;compress;{class}"), outer.saturating_sub(inner));
    }
    for class in classes(rec, Stage::Decompress) {
        add(format!("zio pipeline;decompress;{class}"), total(rec, Stage::Decompress, Some(&class)));
    }
    for class in classes(rec, Stage::ChecksumCompute) {
        add(format!("zio pipeline;checksum;{class}"), total(rec, Stage::ChecksumCompute, Some(&class)));
    }
    add("zio pipeline;checksum verify".into(), total(rec, Stage::ChecksumVerify, None));
    for class in classes(rec, Stage::VdevDisk) {
        add(format!("vdev I/O;{class};queue"), total(rec, Stage::VdevQueue, Some(&class)));
        add(format!("vdev I/O;{class};disk"), total(rec, Stage::VdevDisk, Some(&class)));
    }
    // Kernel statics split the fallback span where the leaf I/O starts.
    let split_disk = total(rec, Stage::VdevDiskTimed, None);
    if split_disk > 0 {
        add("vdev I/O;queue (no offsets)".into(), total(rec, Stage::VdevWaitTimed, None));
        add("vdev I/O;disk (no offsets)".into(), split_disk);
    } else {
        add("vdev I/O;queue+disk (no offsets)".into(), total(rec, Stage::VdevQueueTimed, None));
    }
    add("vdev I/O;cache flush".into(), total(rec, Stage::Flush, None));
    weights.into_iter().map(|(stack, w)| format!("{stack} {w}")).collect()
}

/// CPU sample stacks, weighted in samples. Spaces in frame names (C++ or Rust
/// generics) would break the folded format, so they become underscores.
pub fn cpu_stacks(rec: &Recording) -> Folded {
    let Some(cpu) = &rec.cpu else { return Vec::new() };
    cpu.stacks.iter().map(|s| format!("{} {}", folded_frames(&s.frames), s.count)).collect()
}

/// Off-CPU stacks, weighted in microseconds blocked.
pub fn offcpu_stacks(rec: &Recording) -> Folded {
    let Some(offcpu) = &rec.offcpu else { return Vec::new() };
    offcpu.stacks.iter().map(|s| format!("{} {}", folded_frames(&s.frames), s.count)).collect()
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
            let (stack, weight) = line.rsplit_once(' ').ok_or_else(|| format!("no weight in {line:?}"))?;
            let weight = weight.parse().map_err(|_| format!("bad weight in {line:?}"))?;
            Ok((stack.split(';').map(str::to_owned).collect(), weight))
        })
        .collect()
}

/// The colour group of a frame.
fn colour_of(frame: &str) -> Option<Color> {
    let f = frame.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| f.contains(w));
    if any(&["compress", "zstd", "lz4", "gzip", "lzjb", "zle", "deflate", "inflate"]) {
        Some(Color { r: 230, g: 140, b: 30 }) // compression: orange
    } else if any(&["checksum", "fletcher", "sha256", "sha512", "sha2", "skein", "edonr", "blake3"]) {
        Some(Color { r: 80, g: 180, b: 80 }) // checksums: green
    } else if any(&[
        "vdev i/o", "disk", "queue", "flush", "log block write", "fsync", "pwrite", "pread", "io_schedule",
        "spa_sync", "txg_wait", "throttle", "main pool", "log vdev", "sync read", "sync write", "async read",
        "async write", "scrub", "trim",
    ]) {
        Some(Color { r: 90, g: 140, b: 220 }) // I/O and waiting: blue
    } else {
        None
    }
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
        rec.target.object.rsplit('/').next().unwrap_or(&rec.target.object),
        rec.target.zfs_version.as_deref().unwrap_or("?")
    );
    if kind == FlameKind::OffCpu {
        let (lost, blocked_us) =
            rec.offcpu.as_ref().map_or((0, 0), |o| (o.start_map_full + o.map_full, o.stacks.iter().map(|s| s.count).sum::<u64>()));
        return Titles {
            title: format!("zprof off-CPU: where the traced threads waited, {target}, {:.1} s", rec.duration_s),
            subtitle: format!(
                "width = time off the CPU, {} in all, summed over threads (a [runnable] leaf: preempted, waiting for a CPU); {lost} periods lost",
                format_ns(blocked_us * 1_000)
            ),
            count_name: "us".into(),
        };
    }
    if kind == FlameKind::Cpu {
        let (lost, total, unsym, hz) = rec.cpu.as_ref().map_or((0, 0, 0, 0), |c| {
            (c.stack_lost + c.sample_map_full, c.samples_total, c.unsymbolized_frames, c.frequency_hz)
        });
        let lost_pct = if total > 0 { lost as f64 * 100.0 / total as f64 } else { 0.0 };
        Titles {
            title: format!("zprof CPU: on-CPU samples, {target}, {:.1} s", rec.duration_s),
            subtitle: format!(
                "{total} samples at {hz} Hz per CPU; {lost_pct:.1}% of samples lost (raise --stack-storage-size); {unsym} frames unsymbolized; orange compression, green checksums, blue I/O"
            ),
            count_name: "samples".into(),
        }
    } else {
        let lost: u64 = rec.losses.nonzero().iter().map(|(_, n)| n).sum();
        Titles {
            title: format!("zprof stage time: {target}, {:.1} s", rec.duration_s),
            subtitle: format!(
                "width = wall-clock time in each stage, summed over threads; {lost} events lost or unmatched; orange compression, green checksums, blue I/O and waits"
            ),
            count_name: "us".into(),
        }
    }
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
    options.subtitle = Some(titles.subtitle.clone());
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
    Ok(String::from_utf8_lossy(&svg).into_owned())
}

/// Share of weight in frames matching `pred` (for tests and summaries).
pub fn share_of(lines: &Folded, pred: impl Fn(&str) -> bool) -> f64 {
    let parsed = parse_folded(lines).unwrap_or_default();
    let total: u64 = parsed.iter().map(|(_, w)| w).sum();
    let matching: u64 = parsed.iter().filter(|(frames, _)| frames.iter().any(|f| pred(f))).map(|(_, w)| w).sum();
    if total == 0 { 0.0 } else { matching as f64 / total as f64 }
}

/// Human summary used in logs.
pub fn describe(lines: &Folded, unit_ns: bool) -> String {
    let parsed = parse_folded(lines).unwrap_or_default();
    let total: u64 = parsed.iter().map(|(_, w)| w).sum();
    if unit_ns { format!("{} stacks, {} in all", parsed.len(), format_ns(total * 1_000)) } else { format!("{} stacks, {total} samples", parsed.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_round_trip() {
        let lines: Folded = vec!["fsync;zil_commit;cache flush 120".into(), "write;dmu_write 7".into()];
        let parsed = parse_folded(&lines).unwrap();
        let again: Folded = parsed.iter().map(|(f, w)| format!("{} {w}", f.join(";"))).collect();
        assert_eq!(again, lines);
        assert!(parse_folded(&["no-weight".to_owned()]).is_err());
    }

    #[test]
    fn runs_of_unknown_frames_are_one_frame() {
        let frames: Vec<String> =
            ["zprof-lab", "[unknown]", "[unknown]", "[unknown]", "zio_compress_data", "[unknown]", "a b;c"].map(String::from).into();
        assert_eq!(folded_frames(&frames), "zprof-lab;[unknown];zio_compress_data;[unknown];a_b_c");
    }

    #[test]
    fn colours_group_frames() {
        assert_eq!(colour_of("zfs_zstd_compress"), colour_of("lz4_compress_zfs"));
        assert_eq!(colour_of("fletcher_4_native"), colour_of("zio_checksum_compute"));
        assert_ne!(colour_of("zfs_zstd_compress"), colour_of("zio_checksum_compute"));
        assert!(colour_of("dmu_write").is_none());
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let lines: Folded = vec!["a;zfs_zstd_compress 10".into(), "a;b 5".into()];
        let titles = Titles { title: "t & <t>".into(), subtitle: "s".into(), count_name: "us".into() };
        let svg = render_svg(&lines, &titles).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("zfs_zstd_compress"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
