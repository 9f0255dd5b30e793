//! `zprof flamegraph` and the flame graphs `record` writes: folded stacks
//! or SVG, of one pool or of named processes only.

use super::common::{UsageError, check_writable};
use crate::cli::args::FlamegraphArgs;
use crate::recording::Recording;
use anyhow::Context as _;

/// `zprof flamegraph`.
pub(super) fn flamegraph_cmd(args: FlamegraphArgs) -> anyhow::Result<i32> {
    check_flamegraph_path(&args.output)?;
    let recording = Recording::load(&args.file)?;
    let recording = match &args.pool {
        Some(pool) => only_pool(recording, args.kind.into(), pool)?,
        None => recording,
    };
    write_flamegraph(&recording, args.kind.into(), &args.output, &args.process)?;
    Ok(0)
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

/// Writes a flame graph: folded stacks for a `.folded` path, SVG otherwise.
/// Writes a flame graph (of the `processes` named only, when any are).
pub(super) fn write_flamegraph(
    recording: &Recording,
    kind: crate::render::flamegraph::FlameKind,
    path: &std::path::Path,
    processes: &[String],
) -> anyhow::Result<()> {
    use crate::render::flamegraph::{self, FlameKind};
    let all = flamegraph::stacks_of(recording, kind).map_err(UsageError)?;
    let all_lines = all.clone();
    let lines = only_processes(all, kind, processes)?;
    let text = if path.extension().is_some_and(|e| e == "folded") {
        lines.join("\n") + "\n"
    } else {
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
                amount(weight(&lines)),
                amount(weight(&all_lines)),
                titles.subtitle
            );
        }
        flamegraph::render_svg(&lines, &titles)?
    };
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "flame graph written to {} ({})",
        path.display(),
        flamegraph::describe(&lines, kind != FlameKind::Cpu)
    );
    Ok(())
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
    let mut pools: Vec<String> = recording
        .histograms
        .iter()
        .map(|h| h.pool.clone())
        .filter(|p| !p.is_empty())
        .collect();
    pools.sort();
    pools.dedup();
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
