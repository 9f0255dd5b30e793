//! `zprof flamegraph` and the flame graphs `record` writes: folded stacks,
//! SVG or a pprof profile, of one pool or of named processes only.

use super::common::{UsageError, check_writable};
use crate::cli::args::{FlameFormat, FlamegraphArgs};
use crate::recording::Recording;
use anyhow::Context as _;

/// `zprof flamegraph`.
pub(super) fn flamegraph_cmd(args: FlamegraphArgs) -> anyhow::Result<i32> {
    if args.format.is_none() {
        check_profile_path(&args.output)?;
    } else {
        check_writable(&args.output)?;
    }
    let recording = Recording::load(&args.file)?;
    let recording = match &args.pool {
        Some(pool) => only_pool(recording, args.kind.into(), pool)?,
        None => recording,
    };
    let format = args.format.or_else(|| format_of(&args.output));
    write_stacks(
        &recording,
        args.kind.into(),
        &args.output,
        format,
        &args.process,
    )?;
    Ok(0)
}

/// The format a path's name asks for: .svg, .folded, .pb.gz or .pprof.
fn format_of(path: &std::path::Path) -> Option<FlameFormat> {
    let name = path.file_name()?.to_str()?;
    [
        (".svg", FlameFormat::Svg),
        (".folded", FlameFormat::Folded),
        (".pb.gz", FlameFormat::Pprof),
        (".pprof", FlameFormat::Pprof),
    ]
    .into_iter()
    .find(|(ending, _)| name.ends_with(ending))
    .map(|(_, format)| format)
}

/// A stack file's path (`record --flamegraph`, `flamegraph -o`): named for
/// what it will hold (a flame graph, folded stacks or a pprof profile), and
/// writable.
pub(super) fn check_profile_path(path: &std::path::Path) -> anyhow::Result<()> {
    if format_of(path).is_none() {
        return Err(UsageError(format!(
            "cannot write stacks to {}: name it .svg (a flame graph), .folded (folded stacks) or .pb.gz (a pprof profile), or give --format",
            path.display()
        ))
        .into());
    }
    check_writable(path)
}

/// A flame graph's path: named for what it will hold, and writable.
pub(super) fn check_flamegraph_path(path: &std::path::Path) -> anyhow::Result<()> {
    if !matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("svg" | "folded")
    ) {
        return Err(UsageError(format!(
            "cannot write a flame graph to {}: name it .svg (a flame graph) or .folded (folded stacks)",
            path.display()
        ))
        .into());
    }
    check_writable(path)
}

/// Writes a flame graph, as its path's name asks (see [`format_of`]).
pub(super) fn write_flamegraph(
    recording: &Recording,
    kind: crate::render::flamegraph::FlameKind,
    path: &std::path::Path,
    processes: &[String],
) -> anyhow::Result<()> {
    write_stacks(recording, kind, path, format_of(path), processes)
}

/// Writes the stacks of `kind` (of the `processes` named only, when any
/// are) in `format`: folded stacks, a pprof profile, or SVG.
fn write_stacks(
    recording: &Recording,
    kind: crate::render::flamegraph::FlameKind,
    path: &std::path::Path,
    format: Option<FlameFormat>,
    processes: &[String],
) -> anyhow::Result<()> {
    use crate::render::flamegraph::{self, FlameKind};
    let all = flamegraph::stacks_of(recording, kind).map_err(UsageError)?;
    let all_lines = all.clone();
    let lines = only_processes(all, kind, processes)?;
    let (bytes, what) = match format {
        Some(FlameFormat::Pprof) => (pprof_profile(recording, kind, &lines)?, "pprof profile"),
        Some(FlameFormat::Folded) => ((lines.join("\n") + "\n").into_bytes(), "flame graph"),
        _ => (
            svg(recording, kind, &lines, &all_lines, processes)?.into_bytes(),
            "flame graph",
        ),
    };
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "{what} written to {} ({})",
        path.display(),
        flamegraph::describe(&lines, kind != FlameKind::Cpu)
    );
    Ok(())
}

/// The SVG of `lines`; its subtitle says what share of the recording's
/// stacks (`all_lines`) the `processes` named hold, when any are.
fn svg(
    recording: &Recording,
    kind: crate::render::flamegraph::FlameKind,
    lines: &crate::render::flamegraph::Folded,
    all_lines: &[String],
    processes: &[String],
) -> anyhow::Result<String> {
    use crate::render::flamegraph::{self, FlameKind};
    let mut titles = flamegraph::titles(recording, kind);
    if !processes.is_empty() {
        let weight = |l: &[String]| {
            flamegraph::parse_folded(l)
                .unwrap_or_default()
                .iter()
                .map(|(_, w)| w)
                .sum::<u64>()
        };
        let amount = |w: u64| match kind {
            FlameKind::Cpu => format!("{w} samples"),
            _ => crate::units::format_ns(w * 1_000),
        };
        titles.subtitle = format!(
            "processes {} only: {} of the recording's {}; {}",
            processes.join(", "),
            amount(weight(lines)),
            amount(weight(all_lines)),
            titles.subtitle
        );
    }
    Ok(flamegraph::render_svg(lines, &titles)?)
}

/// The pprof profile of folded `lines` of `kind`, labelled with the
/// recording's pool where it holds one and the stacks are per pool.
fn pprof_profile(
    recording: &Recording,
    kind: crate::render::flamegraph::FlameKind,
    lines: &[String],
) -> anyhow::Result<Vec<u8>> {
    use crate::render::{flamegraph::FlameKind, pprof};
    let stacks = crate::render::flamegraph::parse_folded(lines).map_err(|e| anyhow::anyhow!(e))?;
    let pools = histogram_pools(recording);
    // CPU and off-CPU stacks are not kept per pool: no pool label on them.
    let per_pool = matches!(kind, FlameKind::Stages | FlameKind::Workload);
    let info = pprof::ProfileInfo {
        kind,
        cpu_hz: recording.cpu.as_ref().map(|c| c.frequency_hz),
        pool: (per_pool && pools.len() == 1).then(|| pools[0].as_str()),
        started_unix_ms: recording.started_unix_ms,
        duration_s: recording.duration_s,
    };
    Ok(pprof::profile(&stacks, &info)?)
}

/// The folded stacks whose process (first frame) is one of `processes`; all
/// of them when none is named.
pub(super) fn only_processes(
    lines: Vec<String>,
    kind: crate::render::flamegraph::FlameKind,
    processes: &[String],
) -> anyhow::Result<Vec<String>> {
    if processes.is_empty() {
        return Ok(lines);
    }
    use crate::render::flamegraph::FlameKind;
    if matches!(kind, FlameKind::Stages | FlameKind::Workload) {
        return Err(UsageError(
            "--process applies to the cpu, off-cpu and wall kinds: stage time is not kept per process"
                .into(),
        )
        .into());
    }
    // The wall-clock view's root is the kind of time; the process comes next.
    let skip = usize::from(kind == crate::render::flamegraph::FlameKind::Wall);
    let process_of = |line: &str| line.split(';').nth(skip).unwrap_or("").to_owned();
    let kept: Vec<String> = lines
        .iter()
        .filter(|l| processes.contains(&process_of(l)))
        .cloned()
        .collect();
    if kept.is_empty() {
        let mut names: Vec<String> = lines.iter().map(|l| process_of(l)).collect();
        names.sort();
        names.dedup();
        return Err(UsageError(format!(
            "no stacks of {} in the recording; its processes: {}",
            processes.join(", "),
            names.join(", ")
        ))
        .into());
    }
    Ok(kept)
}

/// The recording with only one pool's histograms (for the stage graph).
pub(super) fn only_pool(
    mut recording: Recording,
    kind: crate::render::flamegraph::FlameKind,
    pool: &str,
) -> anyhow::Result<Recording> {
    use crate::render::flamegraph::FlameKind;
    if !matches!(kind, FlameKind::Stages | FlameKind::Workload) {
        return Err(UsageError(
            "--pool applies to the stages and workload kinds: CPU and off-CPU stacks are not kept per pool"
                .into(),
        )
        .into());
    }
    let pools = histogram_pools(&recording);
    if !pools.iter().any(|p| p == pool) {
        return Err(UsageError(format!(
            "no pool {pool} in the recording; its pools: {}",
            pools.join(", ")
        ))
        .into());
    }
    recording.histograms.retain(|h| h.pool == pool);
    Ok(recording)
}

/// The pools of a recording's histogram rows, sorted (what stage stacks are
/// built from; its txgs and vdevs may name others).
fn histogram_pools(recording: &Recording) -> Vec<String> {
    let pools: std::collections::BTreeSet<&str> = recording
        .histograms
        .iter()
        .map(|h| h.pool.as_str())
        .filter(|p| !p.is_empty())
        .collect();
    pools.into_iter().map(str::to_owned).collect()
}
