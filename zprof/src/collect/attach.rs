//! Attaching: the planned probe points (see [`crate::collect::attach_plan`]),
//! on multi links where the kernel has them and on aya's perf-event probes
//! otherwise, and the session's other programs (the fork tracker of the pid
//! filter, the CPU sampler, the off-CPU switch). These are the side effects
//! of starting a session; a point that fails to attach is reported with the
//! reason and the others carry on.

use std::{collections::HashSet, path::Path};

use anyhow::{Context as _, anyhow};
use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap},
    programs::{
        KProbe, PerfEvent, TracePoint, UProbe,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        uprobe::{UProbeAttachLocation, UProbeScope},
    },
};

use crate::{
    collect::{
        attach_plan::{Attachment, PlannedPoint},
        load::EBPF_OBJECT,
        multi_link::{self, MultiLinks},
    },
    recording::ProbeStatus,
    zfs::{elf, releases},
};

/// The multi-link loader, when wanted and available: multi links need a copy
/// of the programs relocated against aya's maps.
///
/// ZPROF_UPROBE_MULTI=0 forces aya's perf-event uprobes (a way out should a
/// kernel's uprobe_multi misbehave, and how the tests cover that path). On
/// the kernel they are opt-in (ZPROF_KPROBE_MULTI=1): one fprobe per function
/// attached in 3.3-6.3 s and detached in 4.5-4.8 s in the 6.12 guest,
/// perf-event kprobes in 1.5-2.6 s and 2.3-2.8 s.
pub fn multi_links(ebpf: &Ebpf, kernel: bool) -> Option<MultiLinks> {
    let wanted = if kernel {
        std::env::var("ZPROF_KPROBE_MULTI").is_ok_and(|v| v == "1")
    } else {
        std::env::var("ZPROF_UPROBE_MULTI").map_or(true, |v| v != "0")
    };
    if !wanted {
        return None;
    }
    MultiLinks::new(EBPF_OBJECT, ebpf, kernel)
        .map_err(|e| log::debug!("multi-link loader unavailable, using perf-event probes: {e:#}"))
        .ok()
}

/// Tells the programs that every one of them is attached: a span or request
/// begun before now may have ended unseen, and gives way to a later start
/// under its key (see ATTACHED_NS on the eBPF side).
pub fn mark_attached(ebpf: &mut Ebpf) -> anyhow::Result<()> {
    let mut attached: Array<_, u64> = Array::try_from(
        ebpf.map_mut("ATTACHED_NS")
            .ok_or_else(|| anyhow!("ATTACHED_NS missing"))?,
    )?;
    attached.set(0, super::clock::monotonic_ns(), 0)?;
    Ok(())
}

/// Attaches planned points to one target.
pub struct ProbeAttacher<'a> {
    /// The loaded object (aya's probes and the maps).
    pub ebpf: &'a mut Ebpf,
    /// Multi links, until the kernel turns out not to have them.
    pub multi: &'a mut Option<MultiLinks>,
    /// Programs loaded so far, for their run-time statistics.
    pub loaded: &'a mut HashSet<String>,
    /// zfs.ko (kprobes) rather than libzpool (uprobes).
    pub kernel: bool,
    /// The traced object (libzpool's path).
    pub object: &'a str,
}

impl ProbeAttacher<'_> {
    /// Attaches every point the plan attaches; returns each point's status,
    /// attached or with the reason it is not.
    pub fn attach_planned(&mut self, plan: Vec<PlannedPoint>) -> Vec<ProbeStatus> {
        plan.into_iter()
            .map(|planned| match planned.attach {
                Some(attachment) => self.attach_point(planned.status, &attachment),
                None => planned.status,
            })
            .collect()
    }

    /// Attaches one point's entry program, then its return program.
    fn attach_point(&mut self, mut status: ProbeStatus, attachment: &Attachment) -> ProbeStatus {
        let location = if self.kernel {
            attachment.start
        } else {
            uprobe_location(
                self.object,
                attachment.function,
                attachment.start,
                &mut status,
            )
        };
        let entry = match &attachment.entry_program {
            Some(entry) => self.attach_program(entry, attachment.function, location, false),
            None => Ok(()),
        };
        let result = entry.and_then(|()| match &attachment.return_program {
            Some(ret) => self.attach_program(ret, attachment.function, location, true),
            None => Ok(()),
        });
        match result {
            Ok(()) => status.attached = true,
            Err(e) => {
                // The whole verifier log, which the one-line reason points to.
                log::debug!("{}: {e:#}", status.role);
                status.reason = Some(format!("attach failed: {}", short_error(&e)))
            }
        }
        status
    }

    /// Attaches program `name` on a multi link, or on aya's perf-event probe
    /// where the kernel turns out to have no multi links.
    fn attach_program(
        &mut self,
        name: &str,
        function: &str,
        location: u64,
        on_return: bool,
    ) -> anyhow::Result<()> {
        if let Some(multi_links) = self.multi.as_mut() {
            let attached = if self.kernel {
                multi_links.attach_kprobe(name, function, on_return)
            } else {
                multi_links.attach(name, Path::new(self.object), location, on_return)
            };
            match attached {
                Ok(()) => {
                    self.loaded.insert(name.to_owned());
                    return Ok(());
                }
                Err(e) if !multi_links.proven() && multi_link::unsupported(&e) => {
                    log::debug!("multi links unavailable, using perf-event probes: {e:#}");
                    *self.multi = None;
                }
                Err(e) => return Err(e),
            }
        }
        self.attach_perf_event_probe(name, function, location)
    }

    /// Attaches program `name` as aya's kprobe on `function` or uprobe at
    /// `location`, loading it first if it is not yet (a kretprobe or
    /// uretprobe by its section).
    fn attach_perf_event_probe(
        &mut self,
        name: &str,
        function: &str,
        location: u64,
    ) -> anyhow::Result<()> {
        let program = self
            .ebpf
            .program_mut(name)
            .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?;
        if self.kernel {
            let probe: &mut KProbe = program.try_into()?;
            if self.loaded.insert(name.to_owned()) {
                probe.load().with_context(|| format!("loading {name}"))?;
            }
            probe.attach(function, 0).map_err(|e| anyhow!("{e}"))?;
        } else {
            let probe: &mut UProbe = program.try_into()?;
            if self.loaded.insert(name.to_owned()) {
                probe.load().with_context(|| format!("loading {name}"))?;
            }
            probe
                .attach(
                    UProbeAttachLocation::AbsoluteOffset(location),
                    self.object,
                    UProbeScope::AllProcesses,
                )
                .map_err(|e| anyhow!("{e}"))?;
        }
        Ok(())
    }
}

/// A session with no probe attached measures nothing: an error naming the
/// first reason.
pub fn require_an_attached_probe(probes: &[ProbeStatus], object: &str) -> anyhow::Result<()> {
    if probes.iter().any(|p| p.attached) {
        return Ok(());
    }
    Err(anyhow!(
        "no probe could be attached to {object}: {}",
        probes
            .iter()
            .filter_map(|p| p.reason.clone())
            .next()
            .unwrap_or_default()
    ))
}

/// Where a uprobe on `function` (starting at file offset `start`) goes: past
/// instructions the kernel would single-step (endbr64...), where that is safe
/// for the program (see releases::SKIPPABLE_PROLOGUES). The status says so.
fn uprobe_location(object: &str, function: &str, start: u64, status: &mut ProbeStatus) -> u64 {
    let Some((bytes, why)) =
        releases::prologue_skip(function, &elf::read_bytes(Path::new(object), start, 16))
    else {
        return start;
    };
    status.offset = bytes as u32;
    let skip_note = format!("attached at +{bytes}, past {why}");
    status.note = Some(match status.note.take() {
        Some(note) => format!("{note}; {skip_note}"),
        None => skip_note,
    });
    start + bytes as u64
}

/// An error in one line: verifier logs run to thousands of lines, and the
/// verdict is at the end.
fn short_error(err: &anyhow::Error) -> String {
    let text = format!("{err:#}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() <= 2 {
        return lines.join(" ");
    }
    let verdict: Vec<&str> = lines.iter().rev().take(4).rev().copied().collect();
    format!(
        "{} ... {} (run with RUST_LOG=debug for the verifier log)",
        lines[0],
        verdict.join(" | ")
    )
}

/// Follows the forks of the filtered processes (task:task_newtask) and
/// tracks `pids`.
pub fn track_forks(ebpf: &mut Ebpf, pids: &[u32]) -> anyhow::Result<()> {
    let program: &mut TracePoint = ebpf
        .program_mut("track_fork")
        .ok_or_else(|| anyhow!("track_fork missing"))?
        .try_into()?;
    program.load()?;
    program
        .attach("task", "task_newtask")
        .context("attaching task:task_newtask")?;
    for &pid in pids {
        track(ebpf, pid)?;
    }
    Ok(())
}

/// Adds a process to the pid filter: the TRACKED map, and its fast-path slot
/// when free (the eBPF side checks the slot first).
pub fn track(ebpf: &mut Ebpf, pid: u32) -> anyhow::Result<()> {
    let mut tracked: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(
        ebpf.map_mut("TRACKED")
            .ok_or_else(|| anyhow!("TRACKED missing"))?,
    )?;
    tracked.insert(pid, 1, 0)?;
    let mut slots: Array<_, u32> = Array::try_from(
        ebpf.map_mut("TRACKED_SLOTS")
            .ok_or_else(|| anyhow!("TRACKED_SLOTS missing"))?,
    )?;
    let index = pid % zprof_common::TRACKED_SLOTS;
    if slots.get(&index, 0)? == 0 {
        slots.set(index, pid, 0)?;
    }
    Ok(())
}

/// Starts the CPU sampler on every CPU at `hz`; returns its program's name.
pub fn sample_cpus(ebpf: &mut Ebpf, cpus: &[u32], hz: u64) -> anyhow::Result<String> {
    let program: &mut PerfEvent = ebpf
        .program_mut("sample_cpu")
        .ok_or_else(|| anyhow!("sample_cpu missing"))?
        .try_into()?;
    program.load()?;
    for cpu in cpus.iter().copied() {
        program
            .attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Frequency(hz),
                false,
            )
            .with_context(|| format!("attaching the CPU sampler on CPU {cpu}"))?;
    }
    Ok("sample_cpu".into())
}

/// Traces where threads block (sched:sched_switch); returns its program's name.
pub fn trace_off_cpu(ebpf: &mut Ebpf) -> anyhow::Result<String> {
    let program: &mut TracePoint = ebpf
        .program_mut("offcpu_switch")
        .ok_or_else(|| anyhow!("offcpu_switch missing"))?
        .try_into()?;
    program.load()?;
    program
        .attach("sched", "sched_switch")
        .context("attaching sched:sched_switch (off-CPU time)")?;
    Ok("offcpu_switch".into())
}
