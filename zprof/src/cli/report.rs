//! `zprof report` and the report `record` prints: the stage table, then the
//! benchmark's result and the findings.

use crate::cli::args::Format;
use crate::cli::args::ReportArgs;
use crate::recording::Recording;
use crate::render::report;
use anyhow::anyhow;
use std::io::Write as _;

/// Prints the report, then the benchmark's result and the findings.
pub(super) fn print_all(
    recording: &Recording,
    findings: Option<&[crate::analyze::findings::Finding]>,
    format: Format,
    by: crate::recording::requests::GroupBy,
) -> anyhow::Result<()> {
    let built = report::build(recording, by);
    let text = match format {
        Format::Table => {
            let mut text = report::render_table(&built);
            if let Some(findings) = findings {
                text.push('\n');
                text.push_str(&crate::render::findings::render(
                    findings,
                    recording.benchmark.as_ref(),
                ));
            }
            text
        }
        Format::Json => {
            serde_json::to_string_pretty(&serde_json::json!({
                "report": built,
                "benchmark": recording.benchmark,
                "findings": findings,
            }))? + "\n"
        }
    };
    write_stdout(&text)
}

pub(super) fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()) {
        // A closed pipe (zprof report | head) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| anyhow!(e)),
    }
}

pub(super) fn print_report(
    recording: &Recording,
    format: Format,
    by: crate::recording::requests::GroupBy,
) -> anyhow::Result<()> {
    let built = report::build(recording, by);
    let text = match format {
        Format::Table => report::render_table(&built),
        Format::Json => serde_json::to_string_pretty(&built)? + "\n",
    };
    write_stdout(&text)
}

pub(super) fn report_cmd(args: ReportArgs) -> anyhow::Result<i32> {
    let recording = super::common::load_pools(&args.file, &args.pools)?;
    if args.txgs {
        let text = match args.format {
            Format::Table => crate::render::txgs::render_table(&recording),
            Format::Json => crate::render::txgs::render_json(&recording)?,
        };
        write_stdout(&text)?;
        return Ok(0);
    }
    print_report(&recording, args.format, args.by.into())?;
    Ok(0)
}
