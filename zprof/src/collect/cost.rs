//! What tracing costs, measured rather than guessed: each program's run
//! count and run time (BPF_STATS_RUN_TIME, as bpftop reads it), zprof's own
//! memory, and how long detaching takes.

use std::time::Instant;

use aya::Ebpf;

use std::os::fd::AsFd as _;

use crate::{
    collect::multi_link::{MultiLinks, program_stats},
    recording::ProgramCost,
};

/// Run count, run time (BPF_STATS_RUN_TIME) and skipped runs of each
/// program in `loaded`: from its multi-link copy where it has one, else
/// from aya's.
pub fn program_costs(
    ebpf: &Ebpf,
    multi: Option<&MultiLinks>,
    loaded: &[String],
) -> Vec<ProgramCost> {
    loaded
        .iter()
        .filter_map(|name| {
            let stats = match multi.and_then(|m| m.run_stats(name)) {
                Some(stats) => stats,
                None => program_stats(ebpf.program(name)?.fd().ok()?.as_fd())?,
            };
            Some(ProgramCost {
                program: name.clone(),
                run_count: stats.run_count,
                run_time_ns: stats.run_time_ns,
                missed: stats.missed,
            })
        })
        .collect()
}

/// Detaches everything (closing every link and program); returns how long
/// it took, in ms. Perf-event uprobes (aya's fallback) take about 80 ms each
/// on Linux 6.18; multi links close in parallel (see `multi_link`).
pub fn timed_detach(multi: Option<MultiLinks>, ebpf: Ebpf) -> f64 {
    let detach_started = Instant::now();
    drop(multi);
    drop(ebpf);
    detach_started.elapsed().as_secs_f64() * 1e3
}

/// This process's resident memory (statm's second field, in pages).
pub fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64
}

/// This process's peak resident memory (VmHWM), in KiB (0 if unreadable).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
