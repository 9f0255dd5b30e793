//! `zprof compare A B`: two recordings side by side, and their flame graphs'
//! difference; `zprof compare A B C...`: a row per recording.

use super::{common::UsageError, flamegraph::check_flamegraph_path, report::write_stdout};
use crate::cli::args::Format;
use anyhow::Context as _;

pub(super) fn compare_cmd(args: crate::cli::args::CompareArgs) -> anyhow::Result<i32> {
    if !args.more.is_empty() {
        return compare_settings(&args);
    }
    if let Some(path) = &args.flamegraph {
        check_flamegraph_path(path)?;
    }
    let a = super::common::load_pools(&args.a, &args.pools)?;
    let b = super::common::load_pools(&args.b, &args.pools)?;
    if let Some(path) = &args.flamegraph {
        let diff = crate::render::flamegraph::differential(&a, &b, args.flamegraph_kind.into())
            .map_err(UsageError)?;
        let text = if path.extension().is_some_and(|e| e == "folded") {
            diff.lines.join("\n") + "\n"
        } else {
            crate::render::flamegraph::render_svg(&diff.lines, &diff.titles)?
        };
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "differential flame graph written to {} ({})",
            path.display(),
            diff.titles.subtitle
        );
    }
    let comparison = crate::analyze::compare::compare(
        &a,
        &b,
        (args.a.display().to_string(), args.b.display().to_string()),
    );
    let text = match args.format {
        Format::Table => crate::render::compare::render(&comparison),
        Format::Json => serde_json::to_string_pretty(&comparison)? + "\n",
    };
    write_stdout(&text)?;
    Ok(0)
}

/// `zprof compare A B C...`: a row per recording.
fn compare_settings(args: &crate::cli::args::CompareArgs) -> anyhow::Result<i32> {
    if args.flamegraph.is_some() {
        return Err(UsageError(
            "--flamegraph draws the difference of two recordings: give A and B only".into(),
        )
        .into());
    }
    let mut recordings = Vec::new();
    for path in [&args.a, &args.b].into_iter().chain(&args.more) {
        let recording = super::common::load_pools(path, &args.pools)?;
        recordings.push((path.display().to_string(), recording));
    }
    let rows = crate::analyze::settings::setting_rows(&recordings);
    let text = match args.format {
        Format::Table => crate::render::compare::render_settings(&rows),
        Format::Json => serde_json::to_string_pretty(&rows)? + "\n",
    };
    write_stdout(&text)?;
    Ok(0)
}
