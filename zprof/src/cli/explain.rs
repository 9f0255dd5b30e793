//! `zprof explain`: findings from a recording, with what-ifs.

use super::report::write_stdout;
use crate::cli::args::Format;
use crate::recording::Recording;

pub(super) fn explain_recording(
    recording: &Recording,
    what_if: &[crate::analyze::findings::WhatIf],
) -> Vec<crate::analyze::findings::Finding> {
    use crate::analyze::findings::WhatIf;
    let slogs = what_if.iter().filter_map(|w| {
        if let WhatIf::Slog(d) = w {
            Some(*d)
        } else {
            None
        }
    });
    let options = crate::analyze::findings::ExplainOptions {
        slogs: slogs
            .enumerate()
            .map(|(i, d)| (format!("what-if #{}", i + 1), d))
            .collect(),
        caches: what_if
            .iter()
            .filter_map(|w| {
                if let WhatIf::Cache(c) = w {
                    Some(*c)
                } else {
                    None
                }
            })
            .collect(),
        ..Default::default()
    };
    crate::analyze::findings::explain(recording, &options)
}

pub(super) fn explain_cmd(args: crate::cli::args::ExplainArgs) -> anyhow::Result<i32> {
    let recording = Recording::load(&args.file)?;
    crate::recording::pools::check_pools(&recording, &args.pools, &args.file.display().to_string())
        .map_err(super::common::UsageError)?;
    let mut findings = explain_recording(&recording, &args.what_if);
    if !args.pools.is_empty() {
        // A finding over several pools stays when it covers one asked for.
        findings.retain(|f| f.pools.iter().any(|p| args.pools.contains(p)));
    }
    let text = match args.format {
        Format::Table => crate::render::findings::render(&findings, recording.benchmark.as_ref()),
        Format::Json => serde_json::to_string_pretty(&findings)? + "\n",
    };
    write_stdout(&text)?;
    Ok(0)
}
