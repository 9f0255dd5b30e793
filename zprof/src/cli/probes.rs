//! `zprof probes`: every stage, its probe points, and whether each attaches
//! on this target (and why not).

use super::common::prepare;
use crate::cli::args::Format;
use crate::cli::args::ProbesArgs;
use crate::collect::session::Session;
use crate::collect::session::SessionOptions;
use crate::zfs::target;

pub(super) fn probes(args: ProbesArgs) -> anyhow::Result<i32> {
    let (target, found) = prepare(&args.target, &target::Traced::default())?;
    let object = target.object.clone();
    // Attaching for real is the only honest answer to "does it attach here".
    let session = Session::start(
        target,
        found.clone(),
        &SessionOptions {
            filter_pids: None,
            hist_entries: 64,
            sample_hz: 0,
            stack_entries: Some(64),
            full_timing: false,
            skip: Vec::new(),
            off_cpu: false,
            slower_than: None,
            request_rows: 64,
        },
    )?;
    let statuses = session.probes().to_vec();
    let release = session.release().clone();
    drop(session);
    if args.format == Format::Json {
        let doc = serde_json::json!({
            "object": object,
            "zfs_version": release.version,
            "zfs_series": release.series.map(|s| s.name),
            "zfs_status": release.status.word(),
            "zfs_status_detail": release.status.to_string(),
            "offsets": found.source,
            "offset_values": found.values,
            "probes": statuses,
            "groups_absent": absent_groups(&statuses),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(0);
    }
    println!("target: {object}");
    println!("OpenZFS {}: {}", release.version_text(), release.status);
    if let Some(series) = release.series {
        println!(
            "interpreted with the {} series' rules ({}):",
            series.name, series.source
        );
        for behaviour in series.behaviours {
            println!("  - {behaviour}");
        }
    }
    println!("offsets: {}", found.source);
    let absent = absent_groups(&statuses);
    for (group, description) in crate::zfs::catalogue::GROUPS {
        println!("\n{group}: {description}");
        if let Some(why) = absent.get(*group) {
            println!("  none on this target: {why}");
        }
        for p in statuses.iter().filter(|p| p.group == *group) {
            let kind = match (p.entry, p.returns) {
                (true, true) => "entry+return",
                (true, false) => "entry",
                (false, _) => "return",
            };
            match &p.reason {
                None => println!(
                    "  {:<22} {:<13} attached{}",
                    p.function,
                    kind,
                    p.note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
                Some(reason) => println!("  {:<22} {:<13} no: {reason}", p.function, kind),
            }
        }
    }
    Ok(0)
}

/// Stage groups with no probe point on the target of `statuses`, and why.
pub(super) fn absent_groups(
    statuses: &[crate::recording::ProbeStatus],
) -> std::collections::BTreeMap<&'static str, &'static str> {
    crate::zfs::catalogue::ABSENT_ON_LIBZPOOL
        .iter()
        .filter(|(group, _)| !statuses.iter().any(|p| p.group == *group))
        .copied()
        .collect()
}
