//! Loading, attaching, collecting and detaching zprof's eBPF programs.
//!
//! `Session::start` loads the embedded object with the target's configuration
//! (kernel or user memory, struct offsets, pid filter) as load-time constants,
//! attaches every catalogue point whose function exists, and records why the
//! others were not. `Session::finish` reads the maps and returns a [`Recording`];
//! dropping the session detaches everything (aya closes the links), so no probe
//! outlives zprof, whatever path it exits by.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, anyhow};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{
        KProbe, PerfEvent, TracePoint, UProbe,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        uprobe::UProbeAttachLocation,
        uprobe::UProbeScope,
    },
};
use zprof_common::{
    Config, DatasetInfo, DirName, GonePool, HIST_BUCKETS, Hist, HistKey, InFlight, InFlightKey,
    LeafPlace, PoolName, RequestKey, RequestStart, SlowRequest, Stage, TxgEvent, counter,
};

use crate::{
    catalogue::{self, Role, UprobeDefault},
    elf,
    multi_link::{self, MultiLinks},
    offsets::FoundOffsets,
    openzfs,
    recording::{CpuProfile, CpuStack, OffCpuProfile},
    recording::{
        HistRecord, Losses, ProbeStatus, ProgramCost, Recording, SelfCost, TargetInfo,
        TimelinePoint, TxgRecord, VdevRecord, sparse_buckets, stage_name,
    },
    requests::{self, RequestRecord},
    stacks::{self, StackDrains},
    target::{Target, TargetKind},
    zfs_names,
};

/// The eBPF object, built by build.rs from zprof-ebpf.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/zprof"));

/// Options that shape a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Only count these processes (and their children); `None` for all.
    pub filter_pids: Option<Vec<u32>>,
    /// Histogram map size.
    pub hist_entries: u32,
    /// CPU samples per second per CPU (0: no CPU sampling).
    pub sample_hz: u64,
    /// Stacks kept per drain period of CPU samples (`None`: from the rate).
    pub stack_entries: Option<u32>,
    /// Time every workload operation (a probe pair per op) even on uprobes.
    pub full_timing: bool,
    /// Stage groups to leave out.
    pub skip: Vec<String>,
    /// Trace where threads block (sched_switch), for off-CPU flame graphs.
    pub off_cpu: bool,
    /// Stream each request at least this long, with its stage breakdown.
    pub slower_than: Option<std::time::Duration>,
    /// Request map size.
    pub request_rows: u32,
}

/// The leaf frame of off-CPU time spent runnable, waiting for a CPU.
pub use crate::stacks::RUNNABLE_FRAME;

/// Slow requests kept in a recording; more are counted, not kept.
const MAX_SLOW_REQUESTS: usize = 10_000;

/// A loaded and attached set of probes.
pub struct Session {
    ebpf: Ebpf,
    /// The probe programs and their links when the kernel has uprobe_multi or
    /// kprobe_multi (they detach in milliseconds, see `multi_link`); otherwise aya's
    /// uprobes, held in `ebpf`.
    multi: Option<MultiLinks>,
    /// Keeps BPF_STATS_RUN_TIME enabled while open; closing it restores the
    /// kernel's setting (as bpftop does), whatever path zprof exits by.
    _stats: Option<std::os::fd::OwnedFd>,
    /// Programs loaded, for their run-time statistics.
    loaded: Vec<String>,
    target: Target,
    /// How the traced OpenZFS release is interpreted (series, verification).
    release: openzfs::Interpretation,
    offsets: FoundOffsets,
    probes: Vec<ProbeStatus>,
    warnings: Vec<String>,
    started: Instant,
    /// The machine's CPU counters at start, for `Recording::machine_cpu_busy`.
    cpu_at_start: Option<crate::recording::CpuTicks>,
    started_unix_ms: u64,
    /// bpf_ktime_get_ns (CLOCK_MONOTONIC) at start, to place txgs in time.
    started_ktime_ns: u64,
    events: RingBuf<MapData>,
    txg_events: Vec<TxgEvent>,
    /// Requests slower than `--slower-than`, as streamed (at most [`MAX_SLOW_REQUESTS`]).
    slow_requests: Vec<SlowRequest>,
    /// Slow requests beyond [`MAX_SLOW_REQUESTS`], counted.
    slow_requests_dropped: u64,
    timeline: Vec<TimelinePoint>,
    last_totals: TimelinePoint,
    sample_hz: u64,
    /// Whether only the processes in TRACKED are traced.
    filtered: bool,
    /// Time from loading the object to every probe attached.
    attach_ms: f64,
    /// Drains the stack maps of CPU samples and off-CPU time every 250 ms,
    /// on its own thread (none without either).
    drainer: Option<stacks::Drainer>,
    /// Gone pools whose rows [`Session::forget_gone_pools`] dropped.
    pools_forgotten: u64,
    /// How long after its export a pool's rows stay in the live views
    /// (`None`: for ever, as a recording keeps them).
    forget_pools_after: Option<Duration>,
}

/// Adds a process to the pid filter: the TRACKED map, and its fast-path slot
/// when free (the eBPF side checks the slot first).
fn track(ebpf: &mut Ebpf, pid: u32) -> anyhow::Result<()> {
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

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A tracepoint's format file (record layouts differ between kernels).
fn tracepoint_format(category: &str, name: &str) -> anyhow::Result<String> {
    let candidates = [
        format!("/sys/kernel/tracing/events/{category}/{name}/format"),
        format!("/sys/kernel/debug/tracing/events/{category}/{name}/format"),
    ];
    for path in &candidates {
        match std::fs::read_to_string(path) {
            Ok(text) => return Ok(text),
            // tracefs is root's: without the capability this is not a missing mount.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(anyhow::Error::new(crate::commands::UsageError(format!(
                    "permission denied reading {path}: tracefs is root's; run zprof as root, \
                     or add CAP_DAC_READ_SEARCH to its CAP_BPF and CAP_PERFMON"
                ))));
            }
            Err(_) => {}
        }
    }
    Err(anyhow!(
        "cannot read the {category}:{name} tracepoint format; mount tracefs (mount -t tracefs tracefs /sys/kernel/tracing)"
    ))
}

/// The offset of `field` (e.g. " pid;") in a tracepoint format's text.
fn field_offset(format: &str, field: &str) -> Option<u32> {
    format.lines().find(|l| l.contains(field)).and_then(|line| {
        line.split(';')
            .find_map(|f| f.trim().strip_prefix("offset:"))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Offsets of `pid` and `clone_flags` in task:task_newtask records.
fn newtask_offsets() -> anyhow::Result<(u32, u32)> {
    let text = tracepoint_format("task", "task_newtask")?;
    match (
        field_offset(&text, " pid;"),
        field_offset(&text, " clone_flags;"),
    ) {
        (Some(pid), Some(flags)) => Ok((pid, flags)),
        _ => Err(anyhow!(
            "unexpected task_newtask format: no pid or clone_flags field"
        )),
    }
}

/// Offsets of `prev_state` and `next_pid` in sched:sched_switch records.
fn switch_offsets() -> anyhow::Result<(u32, u32)> {
    let text = tracepoint_format("sched", "sched_switch")?;
    match (
        field_offset(&text, " prev_state;"),
        field_offset(&text, " next_pid;"),
    ) {
        (Some(state), Some(next)) => Ok((state, next)),
        _ => Err(anyhow!(
            "unexpected sched_switch format: no prev_state or next_pid field"
        )),
    }
}

impl Session {
    /// Loads and attaches. On error nothing stays attached (the partly built
    /// `Ebpf` is dropped, which detaches what was attached).
    pub fn start(
        target: Target,
        offsets: FoundOffsets,
        options: &SessionOptions,
    ) -> anyhow::Result<Session> {
        let kernel = target.kind == TargetKind::Kernel;
        let filter = options.filter_pids.is_some();
        let newtask = if filter { newtask_offsets()? } else { (0, 0) };
        let switch = if options.off_cpu {
            switch_offsets()?
        } else {
            (0, 0)
        };
        let mut offsets = offsets;
        let mut zio_read_len = offsets.offsets.zio_read_len();
        if zio_read_len > zprof_common::ZIO_WINDOW {
            // A zio_t layout zprof's one-read copy cannot hold: time leaf I/Os
            // the way it does without offsets (the warning below says so).
            offsets.offsets.valid = 0;
            zio_read_len = 0;
            offsets.source = format!(
                "{}: zio_t fields lie beyond the {} bytes zprof copies per I/O",
                offsets.source,
                zprof_common::ZIO_WINDOW
            );
        }
        let release = openzfs::interpret(target.zfs_version.as_deref(), kernel)
            .given_by_user(target.zfs_version_given);
        let mut semantics = release.semantics(kernel);
        // The build's own definition, where its BTF carries one, over the series'.
        if let Some(bit) = offsets
            .zio_flag_io_bypass
            .filter(|v| v.is_power_of_two() && v.trailing_zeros() < 32)
        {
            semantics.zio_flag_io_bypass_bit = bit.trailing_zeros();
        }
        let config = Config {
            kernel: kernel as u32,
            filter_tgid: filter as u32,
            newtask_pid_offset: newtask.0,
            newtask_flags_offset: newtask.1,
            zio_read_len,
            slow_request_us: options
                .slower_than
                .map_or(0, |d| d.as_micros().clamp(1, u32::MAX as u128) as u32),
            switch_prev_state_offset: switch.0,
            switch_next_pid_offset: switch.1,
            semantics,
            offsets: offsets.offsets,
            request: offsets.request,
        };
        // Memory-locked map memory was limited before 5.11; harmless after.
        let rlimit = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rlimit) };

        let cpus = aya::util::online_cpus().map_err(|(path, e)| anyhow!("reading {path}: {e}"))?;
        let mut sample_sizes =
            stacks::SampleMapSizes::for_rate(options.sample_hz, cpus.len() as u64);
        if let Some(entries) = options.stack_entries {
            sample_sizes.stacks = entries;
        }
        if options.sample_hz == 0 {
            sample_sizes = stacks::SampleMapSizes {
                stacks: 1,
                samples: 1,
            };
        }
        // Stack maps are allocated whole at load: the off-CPU ones only when used.
        let offcpu_stacks = if options.off_cpu {
            stacks::OFFCPU_STACK_SLOTS
        } else {
            1
        };
        let load_started = Instant::now();
        let mut ebpf = EbpfLoader::new()
            .override_global("CONFIG", &config, true)
            .map_max_entries("HIST", options.hist_entries)
            .map_max_entries("CPU_STACKS_0", sample_sizes.stacks)
            .map_max_entries("CPU_STACKS_1", sample_sizes.stacks)
            .map_max_entries("SAMPLES_0", sample_sizes.samples)
            .map_max_entries("SAMPLES_1", sample_sizes.samples)
            .map_max_entries("OFFCPU_STACKS_0", offcpu_stacks)
            .map_max_entries("OFFCPU_STACKS_1", offcpu_stacks)
            .map_max_entries("REQUESTS", options.request_rows)
            .load(EBPF_OBJECT)
            .context("loading zprof's eBPF object failed")?;

        let mut warnings: Vec<String> = Vec::new();
        if !matches!(release.status, openzfs::Status::Verified(_)) {
            warnings.push(format!(
                "OpenZFS {}: {}",
                release.version_text(),
                release.status
            ));
        }
        if offsets.offsets.valid == 0 {
            warnings.push(format!(
                "no struct offsets ({}): vdev queue/disk split per priority and pool attribution are unavailable; vdev time falls back to vdev_queue_io..vdev_queue_io_done",
                offsets.source
            ));
        }
        if let Some(warning) = kernel.then(zvol_blk_mq_warning).flatten() {
            warnings.push(warning);
        }
        // Multi links need a copy of the programs relocated against aya's maps.
        // ZPROF_UPROBE_MULTI=0 forces aya's perf-event uprobes (a way out
        // should a kernel's uprobe_multi misbehave, and how the tests cover
        // that path).
        // On the kernel they are opt-in (ZPROF_KPROBE_MULTI=1): one fprobe per
        // function attached in 3.3-6.3 s and detached in 4.5-4.8 s in the 6.12
        // guest, perf-event kprobes in 1.5-2.6 s and 2.3-2.8 s.
        let multi_wanted = if kernel {
            std::env::var("ZPROF_KPROBE_MULTI").is_ok_and(|v| v == "1")
        } else {
            std::env::var("ZPROF_UPROBE_MULTI").map_or(true, |v| v != "0")
        };
        let mut multi = if !multi_wanted {
            None
        } else {
            MultiLinks::new(EBPF_OBJECT, &ebpf, kernel)
                .map_err(|e| {
                    log::debug!("multi-link loader unavailable, using perf-event probes: {e:#}")
                })
                .ok()
        };
        let mut probes = Vec::new();
        let mut loaded: HashSet<String> = HashSet::new();
        // Statistics on before anything is attached: enabling them flips a
        // static key, whose code the kernel patches in place, inside the perf
        // overflow path among others; patched while the sampling events fired
        // on the other vCPU, a 6.12 guest under emulation died of a stray int3
        // in __perf_event_overflow. (They go off last: `_stats` drops after
        // `ebpf`, which holds the perf events.)
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
        let started_attach = Instant::now();
        let points = catalogue::POINTS
            .iter()
            .filter(|p| catalogue::applies(p, kernel));
        for point in points.filter(|p| p.flush_mode.is_none_or(|mode| mode == semantics.flush_mode))
        {
            let function =
                release.function_name(point.function, |f| target.functions.contains_key(f));
            let mut status = ProbeStatus {
                group: point.group.to_owned(),
                function: function.to_owned(),
                role: point.function.to_owned(),
                offset: 0,
                returns: point.ret.is_some(),
                attached: false,
                reason: None,
                note: point
                    .kernel_gain
                    .map(|gain| format!("static, kernel only; gains {gain}")),
            };
            if options.skip.iter().any(|g| g == point.group) {
                status.reason = Some(format!("left out with --skip {}", point.group));
                probes.push(status);
                continue;
            }
            if let Some(why) = release.unavailable(point.group) {
                status.reason = Some(why);
                probes.push(status);
                continue;
            }
            let has_offsets = offsets.offsets.valid != 0;
            match point.role {
                Role::NeedsOffsets if !has_offsets => {
                    status.reason = Some(format!("needs struct offsets: {}", offsets.source));
                    probes.push(status);
                    continue;
                }
                Role::NeedsRequestOffsets if offsets.request.valid == 0 => {
                    let why = offsets.request_missing.as_deref().unwrap_or("unknown");
                    status.reason =
                        Some(format!("needs the request layer's struct offsets: {why}"));
                    probes.push(status);
                    continue;
                }
                Role::FallbackWithoutOffsets if has_offsets => {
                    status.reason =
                        Some("not needed: the leaf-I/O probe reads ZFS's own timings".into());
                    probes.push(status);
                    continue;
                }
                _ => {}
            }
            // Per-operation pairs on uprobes: entry-only counting unless asked.
            let (entry, ret) = match point.role {
                Role::PerOp(default) if !kernel && !options.full_timing => match default {
                    UprobeDefault::Count(program) => {
                        status.returns = false;
                        status.note = Some("counted at entry only; --full-timing adds the return probe (about 0.7 us per call)".into());
                        (program, None)
                    }
                    UprobeDefault::Skip(why) => {
                        status.reason = Some(format!("not needed: {why}"));
                        probes.push(status);
                        continue;
                    }
                },
                _ => (point.entry, point.ret),
            };
            let Some(&start) = target.functions.get(function) else {
                status.reason = Some(format!("{function} not found in {}", target.object));
                probes.push(status);
                continue;
            };
            let location = if kernel {
                start
            } else {
                uprobe_location(&target.object, function, start, &mut status)
            };
            let mut attach = |base: &str, on_return: bool| -> anyhow::Result<()> {
                let name = catalogue::program_name(base, kernel);
                if let Some(multi_links) = multi.as_mut() {
                    let attached = if kernel {
                        multi_links.attach_kprobe(&name, function, on_return)
                    } else {
                        multi_links.attach(&name, Path::new(&target.object), location, on_return)
                    };
                    match attached {
                        Ok(()) => {
                            loaded.insert(name);
                            return Ok(());
                        }
                        Err(e) if !multi_links.proven() && multi_link::unsupported(&e) => {
                            log::debug!("multi links unavailable, using perf-event probes: {e:#}");
                            multi = None;
                        }
                        Err(e) => return Err(e),
                    }
                }
                let program = ebpf
                    .program_mut(&name)
                    .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?;
                if kernel {
                    let probe: &mut KProbe = program.try_into()?;
                    if loaded.insert(name.clone()) {
                        probe.load().with_context(|| format!("loading {name}"))?;
                    }
                    probe.attach(function, 0).map_err(|e| anyhow!("{e}"))?;
                } else {
                    let probe: &mut UProbe = program.try_into()?;
                    if loaded.insert(name.clone()) {
                        probe.load().with_context(|| format!("loading {name}"))?;
                    }
                    probe
                        .attach(
                            UProbeAttachLocation::AbsoluteOffset(location),
                            &target.object,
                            UProbeScope::AllProcesses,
                        )
                        .map_err(|e| anyhow!("{e}"))?;
                }
                Ok(())
            };
            let result = attach(entry, false).and_then(|()| match ret {
                Some(ret) => attach(ret, true),
                None => Ok(()),
            });
            match result {
                Ok(()) => status.attached = true,
                Err(e) => {
                    // The whole verifier log, which the one-line reason points to.
                    log::debug!("{}: {e:#}", point.function);
                    status.reason = Some(format!("attach failed: {}", short_error(&e)))
                }
            }
            probes.push(status);
        }
        if !probes.iter().any(|p| p.attached) {
            return Err(anyhow!(
                "no probe could be attached to {}: {}",
                target.object,
                probes
                    .iter()
                    .filter_map(|p| p.reason.clone())
                    .next()
                    .unwrap_or_default()
            ));
        }
        if let Some(pids) = &options.filter_pids {
            let program: &mut TracePoint = ebpf
                .program_mut("track_fork")
                .ok_or_else(|| anyhow!("track_fork missing"))?
                .try_into()?;
            program.load()?;
            program
                .attach("task", "task_newtask")
                .context("attaching task:task_newtask")?;
            for &pid in pids {
                track(&mut ebpf, pid)?;
            }
        }
        if options.sample_hz > 0 {
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
                        SamplePolicy::Frequency(options.sample_hz),
                        false,
                    )
                    .with_context(|| format!("attaching the CPU sampler on CPU {cpu}"))?;
            }
            loaded.insert("sample_cpu".into());
        }
        let sampling = options.sample_hz > 0;
        let drainer = if sampling || options.off_cpu {
            Some(stacks::Drainer::start(StackDrains::new(
                &mut ebpf,
                sampling,
                options.off_cpu,
            )?)?)
        } else {
            None
        };
        if options.off_cpu {
            let program: &mut TracePoint = ebpf
                .program_mut("offcpu_switch")
                .ok_or_else(|| anyhow!("offcpu_switch missing"))?
                .try_into()?;
            program.load()?;
            program
                .attach("sched", "sched_switch")
                .context("attaching sched:sched_switch (off-CPU time)")?;
            loaded.insert("offcpu_switch".into());
        }
        log::debug!(
            "attached {} probe points in {:?}",
            probes.iter().filter(|p| p.attached).count(),
            started_attach.elapsed()
        );
        let events = RingBuf::try_from(
            ebpf.take_map("EVENTS")
                .ok_or_else(|| anyhow!("EVENTS missing"))?,
        )?;
        if stats.is_none() {
            warnings.push("the kernel did not enable BPF run-time statistics: zprof's own cost is not measured".into());
        }
        let mut loaded: Vec<String> = loaded.into_iter().collect();
        loaded.sort();
        Ok(Session {
            ebpf,
            multi,
            _stats: stats,
            loaded,
            target,
            release,
            offsets,
            probes,
            warnings,
            started: Instant::now(),
            cpu_at_start: crate::recording::CpuTicks::read(),
            attach_ms: load_started.elapsed().as_secs_f64() * 1e3,
            started_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            started_ktime_ns: monotonic_ns(),
            events,
            txg_events: Vec::new(),
            slow_requests: Vec::new(),
            slow_requests_dropped: 0,
            timeline: Vec::new(),
            last_totals: TimelinePoint::default(),
            sample_hz: options.sample_hz,
            filtered: filter,
            drainer,
            pools_forgotten: 0,
            forget_pools_after: None,
        })
    }

    /// Reads the memory maps of the traced processes (with a pid filter):
    /// called every 20 ms in a run's first second, so that a command that
    /// ends before the first drain still has its map (after its exec and its
    /// libraries' loading) to name its stacks with.
    pub fn refresh_traced_maps(&mut self) {
        let Some(drainer) = self.drainer.as_ref().filter(|_| self.filtered) else {
            return;
        };
        let Some(map) = self.ebpf.map("TRACKED") else {
            return;
        };
        let Ok(tracked) = BpfHashMap::<_, u32, u32>::try_from(map) else {
            return;
        };
        drainer.refresh_now(tracked.keys().filter_map(Result::ok).collect());
    }

    /// Drains the stack maps one last time and builds the CPU and off-CPU profiles.
    fn stack_profiles(&mut self) -> anyhow::Result<(Option<CpuProfile>, Option<OffCpuProfile>)> {
        let Some(drainer) = self.drainer.take() else {
            return Ok((None, None));
        };
        let stacks::Drained {
            mut drains,
            mut namer,
            error,
        } = drainer.finish()?;
        // Read after the last drain: the samples counted include those drained.
        let counters = self.counters()?;
        if let Some(error) = error {
            self.warnings.push(format!(
                "draining stacks failed, the CPU and off-CPU profiles stop there: {error}"
            ));
        }
        let cpu = drains.samples.as_mut().map(|samples| {
            let named = stacks::name_all(std::mem::take(&mut samples.raw), &mut namer);
            CpuProfile {
                frequency_hz: self.sample_hz,
                samples_total: counters[counter::SAMPLES as usize],
                stack_lost: counters[counter::STACK_LOST as usize],
                sample_map_full: counters[counter::SAMPLE_MAP_FULL as usize],
                unsymbolized_frames: namer.unsymbolized(),
                placed_frames: namer.placed(),
                cut_samples: named.cut,
                stack_depth: zprof_common::STACK_DEPTH,
                unnamed_processes: named.unnamed_processes,
                stacks: named
                    .stacks
                    .into_iter()
                    .map(|(frames, count)| CpuStack { frames, count })
                    .collect(),
            }
        });
        let offcpu = drains.offcpu.as_mut().map(|offcpu| {
            let named = stacks::name_all(std::mem::take(&mut offcpu.raw), &mut namer);
            OffCpuProfile {
                start_map_full: counters[counter::OFFCPU_START_FULL as usize],
                map_full: counters[counter::OFFCPU_MAP_FULL as usize],
                stack_lost: counters[counter::OFFCPU_STACK_LOST as usize],
                periods: counters[counter::OFFCPU_PERIODS as usize],
                cut_us: named.cut / 1_000,
                stacks: named
                    .stacks
                    .into_iter()
                    .filter(|(_, ns)| *ns >= 1_000)
                    .map(|(frames, ns)| CpuStack {
                        frames,
                        count: ns / 1_000,
                    })
                    .collect(),
            }
        });
        Ok((cpu, offcpu))
    }

    /// Adds a process to the filter (used for a command started after attaching).
    pub fn track_pid(&mut self, pid: u32) -> anyhow::Result<()> {
        track(&mut self.ebpf, pid)
    }

    /// How the traced OpenZFS release is read (series, verification status).
    pub fn release(&self) -> &openzfs::Interpretation {
        &self.release
    }

    /// Every probe point considered, attached or not.
    pub fn probes(&self) -> &[ProbeStatus] {
        &self.probes
    }

    /// Moves pending txg events from the ring buffer into the session.
    pub fn drain_events(&mut self) {
        // Two kinds of record, told apart by their sizes.
        while let Some(item) = self.events.next() {
            if item.len() == std::mem::size_of::<SlowRequest>() {
                // SAFETY: a record of exactly a SlowRequest's size is one.
                let event =
                    unsafe { std::ptr::read_unaligned(item.as_ptr() as *const SlowRequest) };
                if self.slow_requests.len() < MAX_SLOW_REQUESTS {
                    self.slow_requests.push(event);
                } else {
                    self.slow_requests_dropped += 1;
                }
            } else if item.len() >= std::mem::size_of::<TxgEvent>() {
                // SAFETY: the eBPF side writes exactly one TxgEvent per record.
                let event = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const TxgEvent) };
                self.txg_events.push(event);
            }
        }
    }

    /// Reads every histogram, summed over CPUs.
    /// Reads the histograms whose key `wanted` accepts, summed over CPUs. Keys are
    /// listed first so only the wanted values (2 KiB per CPU each) are copied.
    fn read_histograms(
        &self,
        wanted: impl Fn(&HistKey) -> bool,
    ) -> anyhow::Result<Vec<(HistKey, Hist)>> {
        let map: PerCpuHashMap<_, HistKey, Hist> = PerCpuHashMap::try_from(
            self.ebpf
                .map("HIST")
                .ok_or_else(|| anyhow!("HIST missing"))?,
        )?;
        let keys: Vec<HistKey> = map.keys().collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        for key in keys.into_iter().filter(|k| wanted(k)) {
            let per_cpu = map.get(&key, 0)?;
            let mut sum = Hist::ZERO;
            for h in per_cpu.iter() {
                sum.add(h);
            }
            out.push((key, sum));
        }
        Ok(out)
    }

    /// Records one timeline point: the workload's counts since the last call.
    pub fn tick(&mut self) -> anyhow::Result<()> {
        self.drain_events();
        let mut totals = TimelinePoint::default();
        let timeline_stages = [
            Stage::WorkloadWrite,
            Stage::WorkloadRead,
            Stage::ZilCommit,
            Stage::ArcRead,
            Stage::ArcMissReuse,
        ]
        .map(|s| s as u32);
        for (key, hist) in self.read_histograms(|k| timeline_stages.contains(&k.stage))? {
            match Stage::from_u32(key.stage) {
                Some(Stage::WorkloadWrite) => {
                    totals.write_ops += hist.count;
                    totals.write_bytes += hist.bytes;
                }
                Some(Stage::WorkloadRead) => {
                    totals.read_ops += hist.count;
                    totals.read_bytes += hist.bytes;
                }
                Some(Stage::ZilCommit) => totals.zil_commits += hist.count,
                Some(Stage::ArcRead) => match key.class & zprof_common::arc_read_class::PATH {
                    zprof_common::arc_read_class::HIT => totals.arc_hits += hist.count,
                    zprof_common::arc_read_class::L2 => totals.arc_l2_hits += hist.count,
                    zprof_common::arc_read_class::DISK => totals.arc_disk_reads += hist.count,
                    _ => {}
                },
                Some(Stage::ArcMissReuse)
                    if key.class & zprof_common::miss_reuse_class::ASYNC == 0 =>
                {
                    totals.sync_disk_reads += hist.count;
                    if key.class & zprof_common::miss_reuse_class::FIRST != 0 {
                        totals.sync_first_reads += hist.count;
                    }
                }
                _ => {}
            }
        }
        let last = &self.last_totals;
        self.timeline.push(TimelinePoint {
            second: self.timeline.len() as u32 + 1,
            write_ops: totals.write_ops.saturating_sub(last.write_ops),
            write_bytes: totals.write_bytes.saturating_sub(last.write_bytes),
            read_ops: totals.read_ops.saturating_sub(last.read_ops),
            read_bytes: totals.read_bytes.saturating_sub(last.read_bytes),
            zil_commits: totals.zil_commits.saturating_sub(last.zil_commits),
            arc_hits: totals.arc_hits.saturating_sub(last.arc_hits),
            arc_l2_hits: totals.arc_l2_hits.saturating_sub(last.arc_l2_hits),
            arc_disk_reads: totals.arc_disk_reads.saturating_sub(last.arc_disk_reads),
            sync_disk_reads: totals.sync_disk_reads.saturating_sub(last.sync_disk_reads),
            sync_first_reads: totals
                .sync_first_reads
                .saturating_sub(last.sync_first_reads),
        });
        self.last_totals = totals;
        Ok(())
    }

    fn counters(&self) -> anyhow::Result<[u64; counter::COUNT as usize]> {
        let map: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("COUNTERS")
                .ok_or_else(|| anyhow!("COUNTERS missing"))?,
        )?;
        let mut out = [0u64; counter::COUNT as usize];
        for (index, slot) in out.iter_mut().enumerate() {
            *slot = map.get(&(index as u32), 0)?.iter().sum();
        }
        Ok(out)
    }

    /// Run count and run time of each loaded program (BPF_STATS_RUN_TIME).
    fn program_costs(&self) -> Vec<ProgramCost> {
        self.loaded
            .iter()
            .filter_map(|name| {
                if let Some((run_count, run_time_ns)) =
                    self.multi.as_ref().and_then(|m| m.run_stats(name))
                {
                    return Some(ProgramCost {
                        program: name.clone(),
                        run_count,
                        run_time_ns,
                    });
                }
                let info = self.ebpf.program(name)?.info().ok()?;
                Some(ProgramCost {
                    program: name.clone(),
                    run_count: info.run_count(),
                    run_time_ns: info.run_time().as_nanos() as u64,
                })
            })
            .collect()
    }

    fn unmatched_by_stage(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        let map: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("UNMATCHED")
                .ok_or_else(|| anyhow!("UNMATCHED missing"))?,
        )?;
        let mut out = BTreeMap::new();
        for stage in Stage::ALL {
            let n: u64 = map.get(&(stage as u32), 0)?.iter().sum();
            if n > 0 {
                out.insert(stage_name(stage).to_owned(), n);
            }
        }
        Ok(out)
    }

    /// Pool names by spa_t address: the pools that are there, and those
    /// exported or destroyed since (their rows stay until forgotten); a live
    /// pool wins an address a gone one had.
    fn pool_names(&self) -> anyhow::Result<BTreeMap<u64, String>> {
        let mut out = BTreeMap::new();
        let gone: BpfHashMap<_, u64, GonePool> = BpfHashMap::try_from(
            self.ebpf
                .map("GONE_POOLS")
                .ok_or_else(|| anyhow!("GONE_POOLS missing"))?,
        )?;
        for item in gone.iter() {
            let (spa, pool) = item?;
            out.insert(spa, requests::c_string(&pool.name));
        }
        let live: BpfHashMap<_, u64, PoolName> = BpfHashMap::try_from(
            self.ebpf
                .map("POOL_NAMES")
                .ok_or_else(|| anyhow!("POOL_NAMES missing"))?,
        )?;
        for item in live.iter() {
            let (spa, name) = item?;
            out.insert(spa, requests::c_string(&name.name));
        }
        Ok(out)
    }

    /// Drops the rows of pools exported or destroyed at least `after` ago
    /// (their histograms and leaf places), so that a long-running exporter
    /// does not keep every pool a host ever had: their series end in
    /// Prometheus. Returns how many pools were forgotten.
    fn forget_gone_pools(&mut self, after: Duration) -> anyhow::Result<u64> {
        let now = monotonic_ns();
        let mut gone: BpfHashMap<_, u64, GonePool> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("GONE_POOLS")
                .ok_or_else(|| anyhow!("GONE_POOLS missing"))?,
        )?;
        let due: Vec<u64> = gone
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, p)| now.saturating_sub(p.removed_ns) >= after.as_nanos() as u64)
            .map(|(spa, _)| spa)
            .collect();
        for spa in &due {
            let _ = gone.remove(spa);
        }
        if due.is_empty() {
            return Ok(0);
        }
        let mut hist: PerCpuHashMap<_, HistKey, Hist> = PerCpuHashMap::try_from(
            self.ebpf
                .map_mut("HIST")
                .ok_or_else(|| anyhow!("HIST missing"))?,
        )?;
        let rows: Vec<HistKey> = hist
            .keys()
            .filter_map(Result::ok)
            .filter(|k| due.contains(&k.pool))
            .collect();
        for key in &rows {
            let _ = hist.remove(key);
        }
        let mut places: BpfHashMap<_, u64, LeafPlace> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("LEAF_PLACES")
                .ok_or_else(|| anyhow!("LEAF_PLACES missing"))?,
        )?;
        let leaves: Vec<u64> = places
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, p)| due.contains(&p.pool))
            .map(|(guid, _)| guid)
            .collect();
        for guid in &leaves {
            let _ = places.remove(guid);
        }
        self.pools_forgotten += due.len() as u64;
        Ok(due.len() as u64)
    }

    /// The request rows, with dataset names and cgroup paths, and the
    /// requests still in progress.
    fn requests(
        &self,
    ) -> anyhow::Result<(Vec<RequestRecord>, Vec<requests::SlowRequestRecord>, u64)> {
        let Some(rows_map) = self.ebpf.map("REQUESTS") else {
            return Ok((Vec::new(), Vec::new(), 0));
        };
        let rows: BpfHashMap<_, RequestKey, Hist> = BpfHashMap::try_from(rows_map)?;
        let rows: Vec<(RequestKey, Hist)> = rows.iter().collect::<Result<_, _>>()?;
        if rows.is_empty() {
            return Ok((Vec::new(), Vec::new(), 0));
        }
        let datasets: BpfHashMap<_, u64, DatasetInfo> = BpfHashMap::try_from(
            self.ebpf
                .map("DATASETS")
                .ok_or_else(|| anyhow!("DATASETS missing"))?,
        )?;
        let datasets: HashMap<u64, DatasetInfo> = datasets.iter().filter_map(Result::ok).collect();
        let dirs: BpfHashMap<_, u64, DirName> = BpfHashMap::try_from(
            self.ebpf
                .map("DIR_NAMES")
                .ok_or_else(|| anyhow!("DIR_NAMES missing"))?,
        )?;
        let dirs: HashMap<u64, DirName> = dirs.iter().filter_map(Result::ok).collect();
        let starts: BpfHashMap<_, u64, RequestStart> = BpfHashMap::try_from(
            self.ebpf
                .map("REQUEST_STARTS")
                .ok_or_else(|| anyhow!("REQUEST_STARTS missing"))?,
        )?;
        let in_flight = starts.keys().filter(|k| k.is_ok()).count() as u64;
        let mut cgroup_ids: Vec<u64> = rows
            .iter()
            .map(|(k, _)| k.cgroup)
            .filter(|c| *c != 0)
            .collect();
        cgroup_ids.sort_unstable();
        cgroup_ids.dedup();
        let cgroups = requests::cgroup2_root()
            .map(|root| requests::cgroup_paths(&root, &cgroup_ids))
            .unwrap_or_default();
        let names = requests::Names {
            datasets: &datasets,
            dirs: &dirs,
            cgroups: &cgroups,
        };
        let records = rows
            .into_iter()
            .map(|(key, hist)| {
                let (dataset, volblocksize) = names.dataset(&key);
                RequestRecord {
                    layer: requests::layer_name(key.layer).into(),
                    op: requests::op_name(key.layer, key.op).into(),
                    flags: requests::flag_names(key.flags),
                    dataset,
                    volblocksize,
                    pid: key.tgid,
                    comm: requests::c_string(&key.comm),
                    cgroup: names.cgroup(key.cgroup),
                    count: hist.count,
                    total_ns: hist.total_ns,
                    bytes: hist.bytes,
                    max_ns: hist.max_ns,
                    buckets: sparse_buckets(&hist.buckets[..HIST_BUCKETS]),
                }
            })
            .collect();
        let slow = self
            .slow_requests
            .iter()
            .map(|e| names.slow(e, self.started_ktime_ns))
            .collect();
        Ok((records, slow, in_flight))
    }

    fn in_flight(&self) -> anyhow::Result<u64> {
        let map: BpfHashMap<_, InFlightKey, InFlight> = BpfHashMap::try_from(
            self.ebpf
                .map("INFLIGHT")
                .ok_or_else(|| anyhow!("INFLIGHT missing"))?,
        )?;
        Ok(map.keys().filter(|k| k.is_ok()).count() as u64)
    }

    /// Every histogram row so far, with pool names, sorted.
    fn histogram_records(&self, names: &BTreeMap<u64, String>) -> anyhow::Result<Vec<HistRecord>> {
        let pool_name = |spa: u64| pool_label(names, spa);
        let mut histograms: Vec<HistRecord> = cache_device_rows(self.read_histograms(|_| true)?)
            .into_iter()
            .filter_map(|(key, hist)| {
                let stage = Stage::from_u32(key.stage)?;
                Some(HistRecord {
                    stage: stage_name(stage).to_owned(),
                    class: key.class,
                    class_name: class_name(stage, key.class),
                    pool: pool_name(key.pool),
                    vdev: key.vdev,
                    count: hist.count,
                    total_ns: hist.total_ns,
                    bytes: hist.bytes,
                    bytes_out: hist.bytes_out,
                    max_ns: hist.max_ns,
                    buckets: sparse_buckets(&hist.buckets[..HIST_BUCKETS]),
                })
            })
            .collect();
        histograms.sort_by(|a, b| {
            (&a.stage, a.class, &a.pool, a.vdev).cmp(&(&b.stage, b.class, &b.pool, b.vdev))
        });
        Ok(histograms)
    }

    /// Where each leaf with a vdev row sits (top-level vdev, allocation
    /// class), from what the probes read of ZFS's vdev tree; a leaf whose
    /// rows show it to be a cache device is in class "cache".
    fn vdev_places(
        &self,
        names: &BTreeMap<u64, String>,
        histograms: &[HistRecord],
    ) -> anyhow::Result<Vec<VdevRecord>> {
        let Some(map) = self.ebpf.map("LEAF_PLACES") else {
            return Ok(Vec::new());
        };
        let places: BpfHashMap<_, u64, LeafPlace> = BpfHashMap::try_from(map)?;
        let with_rows: std::collections::BTreeSet<u64> = histograms
            .iter()
            .map(|h| h.vdev)
            .filter(|v| *v != 0)
            .collect();
        let caches: std::collections::BTreeSet<u64> = histograms
            .iter()
            .filter(|h| h.vdev != 0 && h.class & zprof_common::VDEV_CACHE_DEVICE != 0)
            .map(|h| h.vdev)
            .collect();
        let mut records: Vec<VdevRecord> = places
            .iter()
            .filter_map(Result::ok)
            .filter(|(guid, _)| with_rows.contains(guid))
            .map(|(guid, place)| VdevRecord {
                pool: pool_label(names, place.pool),
                guid,
                top_vdev: zfs_names::top_vdev(&requests::c_string(&place.top_type), place.top_id),
                top_guid: place.top_guid,
                class: zfs_names::allocation_class(
                    place.alloc_bias,
                    place.is_log != 0,
                    caches.contains(&guid),
                ),
            })
            .collect();
        records.sort_by(|a, b| (&a.pool, &a.top_vdev, a.guid).cmp(&(&b.pool, &b.top_vdev, b.guid)));
        Ok(records)
    }

    /// What `zprof serve` reads at each scrape: the stage rows so far
    /// (cumulative, see [`Session::live_rows`]: an exporter keeps no per-event
    /// state, so its memory stays flat however long it runs), the request
    /// layer's rows, and zprof's health.
    pub fn live(&mut self) -> anyhow::Result<crate::exposition::Scrape> {
        let started = Instant::now();
        let (names, rows) = self.named_live_rows()?;
        let vdevs = self.vdev_places(&names, &rows)?;
        let (requests, _, _) = self.requests()?;
        let c = self.counters()?;
        let losses = LOSS_COUNTERS
            .iter()
            .map(|(index, name)| ((*name).to_owned(), c[*index as usize]))
            .collect();
        let attached = self.probes.iter().filter(|p| p.attached).count() as u64;
        let health = crate::exposition::Health {
            target: format!("{:?}", self.target.kind).to_lowercase(),
            zfs_version: self.release.version.clone().unwrap_or_default(),
            zfs_status: self.release.status.word().into(),
            probes_attached: attached,
            probes_unavailable: self.probes.len() as u64 - attached,
            losses,
            unmatched_by_stage: self.unmatched_by_stage()?.into_iter().collect(),
            programs: self
                .program_costs()
                .into_iter()
                .map(|p| (p.program, p.run_count, p.run_time_ns))
                .collect(),
            attach_seconds: self.attach_ms / 1e3,
            resident_bytes: resident_bytes(),
            collect_seconds: started.elapsed().as_secs_f64(),
            pools_forgotten: self.pools_forgotten,
            tunables: match self.target.kind {
                TargetKind::Kernel => {
                    crate::exposition::read_tunables(Path::new("/sys/module/zfs/parameters"))
                }
                TargetKind::Libzpool => Vec::new(),
            },
        };
        Ok(crate::exposition::Scrape {
            rows,
            requests,
            vdevs,
            health,
        })
    }

    /// Makes the live views ([`Session::live_rows`]) forget the rows of a
    /// pool exported or destroyed `after` ago.
    pub fn forget_pools_after(&mut self, after: Duration) {
        self.forget_pools_after = Some(after);
    }

    /// What the recording says of the traced build.
    fn target_info(&self) -> TargetInfo {
        TargetInfo {
            kind: self.target.kind,
            object: self.target.object.clone(),
            zfs_version: self.release.version.clone(),
            build_id: self.target.build_id.clone(),
            zfs_status: self.release.status.word().into(),
            zfs_status_detail: self.release.status.to_string(),
        }
    }

    /// The stage rows so far (cumulative), the ring buffer's events drained
    /// and dropped: what `zprof top` reads each interval.
    pub fn live_rows(&mut self) -> anyhow::Result<Vec<HistRecord>> {
        Ok(self.named_live_rows()?.1)
    }

    /// [`Session::live_rows`] with the pool names they were labelled by
    /// (for the leaf places of the same scrape: the maps read once).
    fn named_live_rows(&mut self) -> anyhow::Result<(BTreeMap<u64, String>, Vec<HistRecord>)> {
        if let Some(after) = self.forget_pools_after {
            self.forget_gone_pools(after)?;
        }
        self.drain_events();
        self.txg_events.clear();
        self.slow_requests.clear();
        let names = self.pool_names()?;
        let rows = self.histogram_records(&names)?;
        Ok((names, rows))
    }

    /// A recording of `seconds` made of `histograms` (rows of an interval, as
    /// `zprof top` takes them), for explain: this session's target and probes,
    /// no timeline, requests or profiles.
    pub fn interval_recording(&self, histograms: Vec<HistRecord>, seconds: f64) -> Recording {
        Recording {
            schema: crate::recording::SCHEMA.into(),
            version: crate::recording::VERSION,
            zprof_version: env!("CARGO_PKG_VERSION").into(),
            target: self.target_info(),
            offsets_source: self.offsets.source.clone(),
            started_unix_ms: self.started_unix_ms,
            duration_s: seconds,
            command: None,
            command_exit: None,
            pid: None,
            probes: self.probes.clone(),
            warnings: Vec::new(),
            losses: Losses::default(),
            histograms,
            txgs: Vec::new(),
            timeline: Vec::new(),
            bpf_programs: Vec::new(),
            benchmark: None,
            cpu: None,
            self_cost: None,
            machine_cpu_busy: None,
            requests: Vec::new(),
            offcpu: None,
            slow_requests: Vec::new(),
            slow_requests_dropped: 0,
            vdevs: Vec::new(),
        }
    }

    /// Reads everything and builds the recording. The probes stay attached until
    /// the session is dropped.
    pub fn finish(
        mut self,
        command: Option<Vec<String>>,
        command_exit: Option<i32>,
        pid: Option<u32>,
    ) -> anyhow::Result<Recording> {
        let duration = self.started.elapsed();
        // A final partial second only if it holds more than a blink of data.
        if self.timeline.is_empty() || duration.as_secs_f64() - self.timeline.len() as f64 > 0.2 {
            self.tick()?;
        }
        self.drain_events();
        let names = self.pool_names()?;
        let pool_name = |spa: u64| pool_label(&names, spa);
        let histograms = self.histogram_records(&names)?;
        let vdevs = self.vdev_places(&names, &histograms)?;
        let c = self.counters()?;
        let (mut requests, mut slow_requests, requests_in_flight) = self.requests()?;
        slow_requests.sort_by_key(|r| std::cmp::Reverse(r.duration_ns));
        requests.sort_by(|a, b| {
            (&a.layer, &a.dataset, &a.op, a.pid).cmp(&(&b.layer, &b.dataset, &b.op, b.pid))
        });
        if self.filtered && requests.iter().any(|r| r.layer == "zvol") {
            // zvol_write/zvol_read run on the zvol taskq's threads, which the
            // process filter does not follow.
            self.warnings.push(
                "zvol I/O runs on zvol taskq threads: with a process filter the workload rows count the traced processes' file I/O only; the requests section has their zvol requests".into(),
            );
        }
        let losses = Losses {
            request_folded: c[counter::REQUEST_FOLDED as usize],
            request_start_full: c[counter::REQUEST_START_FULL as usize],
            request_end_without_start: c[counter::REQUEST_END_WITHOUT_START as usize],
            requests_in_flight_at_end: requests_in_flight,
            name_map_full: c[counter::NAME_MAP_FULL as usize],
            entry_map_full: c[counter::ENTRY_MAP_FULL as usize],
            return_without_entry: c[counter::RETURN_WITHOUT_ENTRY as usize],
            hist_map_full: c[counter::HIST_MAP_FULL as usize],
            ringbuf_full: c[counter::RINGBUF_FULL as usize],
            read_failed: c[counter::READ_FAILED as usize],
            nested_entry: c[counter::NESTED_ENTRY as usize],
            in_flight_at_end: self.in_flight()?,
            tracked_full: c[counter::TRACKED_FULL as usize],
            return_without_entry_by_stage: self.unmatched_by_stage()?,
        };
        let mut txgs: Vec<TxgRecord> = self
            .txg_events
            .iter()
            .map(|e| TxgRecord {
                pool: pool_name(e.pool),
                txg: e.txg,
                start_offset_ns: e.start_ns.saturating_sub(self.started_ktime_ns),
                duration_ns: e.duration_ns,
            })
            .collect();
        txgs.sort_by_key(|t| (t.pool.clone(), t.txg));
        let (cpu, offcpu) = self.stack_profiles()?;
        let bpf_programs = self.program_costs();
        let attach_ms = self.attach_ms;
        // Detach now (closing every link and program) and time it. Perf-event
        // uprobes (aya's fallback) take about 80 ms each on Linux 6.18;
        // Multi links close in parallel (see `multi_link`).
        let uprobe_multi = self.multi.as_ref().is_some_and(|m| m.proven());
        let target = self.target_info();
        let detach_started = Instant::now();
        drop(self.multi);
        drop(self.ebpf);
        let detach_ms = detach_started.elapsed().as_secs_f64() * 1e3;
        let peak_rss_kib = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        Ok(Recording {
            schema: crate::recording::SCHEMA.into(),
            version: crate::recording::VERSION,
            zprof_version: env!("CARGO_PKG_VERSION").into(),
            target,
            offsets_source: self.offsets.source.clone(),
            started_unix_ms: self.started_unix_ms,
            duration_s: duration.as_secs_f64(),
            command,
            command_exit,
            pid,
            probes: self.probes.clone(),
            warnings: self.warnings.clone(),
            losses,
            histograms,
            txgs,
            timeline: self.timeline.clone(),
            bpf_programs,
            benchmark: None,
            cpu,
            self_cost: Some(SelfCost {
                attach_ms,
                detach_ms,
                peak_rss_kib,
                uprobe_multi,
            }),
            machine_cpu_busy: self
                .cpu_at_start
                .zip(crate::recording::CpuTicks::read())
                .map(|(a, b)| b.busy_since(&a)),
            requests,
            offcpu,
            slow_requests,
            slow_requests_dropped: self.slow_requests_dropped,
            vdevs,
        })
    }
}

/// OpenZFS 2.2+ can make zvols blk-mq devices (zvol_use_blk_mq=1, for zvols
/// created after it is set); their requests enter through zvol_mq_queue_rq,
/// which zprof does not time yet: say so rather than show fewer requests.
fn zvol_blk_mq_warning() -> Option<String> {
    let value = std::fs::read_to_string("/sys/module/zfs/parameters/zvol_use_blk_mq").ok()?;
    (value.trim() == "1").then(|| {
        "zvol_use_blk_mq is 1: requests of zvols created since it was set (blk-mq devices) are not in the requests section".into()
    })
}

/// The name of a pool by its spa_t address ("" where the stage cannot tell).
fn pool_label(names: &BTreeMap<u64, String>, spa: u64) -> String {
    match spa {
        0 => String::new(),
        spa => names
            .get(&spa)
            .cloned()
            .unwrap_or_else(|| format!("spa@{spa:#x}")),
    }
}

/// The loss counters `serve` exports, by the names of [`Losses`]' fields.
const LOSS_COUNTERS: [(u32, &str); 12] = [
    (counter::ENTRY_MAP_FULL, "entry_map_full"),
    (counter::RETURN_WITHOUT_ENTRY, "return_without_entry"),
    (counter::HIST_MAP_FULL, "hist_map_full"),
    (counter::RINGBUF_FULL, "ringbuf_full"),
    (counter::READ_FAILED, "read_failed"),
    (counter::NESTED_ENTRY, "nested_entry"),
    (counter::TRACKED_FULL, "tracked_full"),
    (counter::WRITER_SLOT_TAKEN, "writer_slot_taken"),
    (counter::REQUEST_FOLDED, "request_folded"),
    (counter::REQUEST_START_FULL, "request_start_full"),
    (counter::NAME_MAP_FULL, "name_map_full"),
    (
        counter::REQUEST_END_WITHOUT_START,
        "request_end_without_start",
    ),
];

/// This process's resident memory (statm's second field, in pages).
fn resident_bytes() -> u64 {
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

/// Class name (or suffix) of rows counted at entry only (no latency).
pub const COUNT_ONLY: &str = "count only";
/// The class bit the eBPF side sets on rows counted at entry only.
pub const COUNT_ONLY_CLASS: u32 = 0x100;

/// Where a uprobe on `function` (starting at file offset `start`) goes: past
/// instructions the kernel would single-step (endbr64...), where that is safe
/// for the program (see openzfs::SKIPPABLE_PROLOGUES). The status says so.
fn uprobe_location(object: &str, function: &str, start: u64, status: &mut ProbeStatus) -> u64 {
    let Some((bytes, why)) =
        openzfs::prologue_skip(function, &elf::read_bytes(Path::new(object), start, 16))
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

/// Every vdev row of a leaf that some row shows to be a cache device gets the
/// cache-device class too (its label I/O at pool creation came before its
/// first L2ARC read or feed write marked it), rows that now share a key merged.
fn cache_device_rows(rows: Vec<(HistKey, Hist)>) -> Vec<(HistKey, Hist)> {
    use zprof_common::VDEV_CACHE_DEVICE;
    let vdev_stage = |k: &HistKey| {
        [Stage::VdevQueue, Stage::VdevDisk, Stage::VdevTotal]
            .iter()
            .any(|s| *s as u32 == k.stage)
    };
    let caches: std::collections::HashSet<(u64, u64)> = rows
        .iter()
        .filter(|(k, _)| vdev_stage(k) && k.class & VDEV_CACHE_DEVICE != 0)
        .map(|(k, _)| (k.pool, k.vdev))
        .collect();
    if caches.is_empty() {
        return rows;
    }
    let mut merged: HashMap<HistKey, Hist> = HashMap::new();
    for (mut key, hist) in rows {
        if vdev_stage(&key) && caches.contains(&(key.pool, key.vdev)) {
            key.class |= VDEV_CACHE_DEVICE;
        }
        merged.entry(key).or_insert(Hist::ZERO).add(&hist);
    }
    merged.into_iter().collect()
}

/// Class name of lz4 trials run by zstd's early abort (not lz4 compressions).
pub const ZSTD_EARLY_ABORT_TRIAL: &str = "zstd early-abort trial";

/// Physical block sizes read from disk, as powers of two: "<=16K" holds
/// compressed blocks of 8K to 16K.
fn block_size_class(class: u32) -> String {
    let size = block_class_bytes(class);
    let words = if size >= 1 << 20 {
        format!("{}M", size >> 20)
    } else if size >= 1024 {
        format!("{}K", size >> 10)
    } else {
        format!("{size}B")
    };
    format!("<={words}")
}

/// Physical size bound of a blocks-read row's class (see [`block_size_class`]).
pub fn block_class_bytes(class: u32) -> u64 {
    1u64 << (class & 0xff).min(40)
}

/// An ARC read row's words: for whom, where it was served from (iohit: found
/// being read, as 2.2's arcstats call it), whether a timed miss was waited for
/// (--full-timing), and "count only" when the row has no latency.
pub fn arc_read_class_name(class: u32) -> String {
    use zprof_common::arc_read_class as c;
    let path = match class & c::PATH {
        c::HIT if class & c::HELD != 0 => "held hit",
        c::HIT => "hit",
        c::IN_FLIGHT => "iohit",
        c::L2 => "L2ARC",
        _ => "disk",
    };
    let asked = if class & c::PREFETCH != 0 {
        "prefetch "
    } else {
        ""
    };
    let waited = if class & c::PATH != c::HIT && class & c::WAITED != 0 {
        " waited"
    } else {
        ""
    };
    let counted = if class & COUNT_ONLY_CLASS != 0 {
        format!(" {COUNT_ONLY}")
    } else {
        String::new()
    };
    format!("{asked}{path}{waited}{counted}")
}

/// The words for a stage's class number.
pub fn class_name(stage: Stage, class: u32) -> String {
    match stage {
        Stage::Compress => zfs_names::compression(class & 0xff, class >> 8),
        Stage::Decompress => zfs_names::compression(class & 0xff, 0),
        Stage::ZstdCompress => format!("zstd-{class}"),
        Stage::Lz4Compress if class == zprof_common::LZ4_CLASS_ZSTD_EARLY_ABORT => {
            ZSTD_EARLY_ABORT_TRIAL.into()
        }
        Stage::Lz4Compress => "lz4".into(),
        Stage::VdevQueue | Stage::VdevDisk | Stage::VdevTotal => zfs_names::io_class(class),
        Stage::ZilLogWrite if class == 1 => "log vdev".into(),
        Stage::BlockRead => format!("{} {COUNT_ONLY}", block_size_class(class)),
        Stage::ArcRead => arc_read_class_name(class),
        Stage::ArcMissReuse => miss_reuse_class_name(class),
        Stage::WorkloadWrite | Stage::WorkloadRead if class & COUNT_ONLY_CLASS != 0 => {
            COUNT_ONLY.into()
        }
        Stage::ChecksumCompute => zfs_names::checksum(class & 0xff),
        Stage::ZilLogWrite => "main pool".into(),
        _ => String::new(),
    }
}

/// `sync read again`, `async first read`, `read again` (priority unknown).
fn miss_reuse_class_name(class: u32) -> String {
    use zprof_common::miss_reuse_class as c;
    let again = if class & c::FIRST != 0 {
        "first read"
    } else {
        "read again"
    };
    match (class & c::PRIORITY_UNKNOWN != 0, class & c::ASYNC != 0) {
        (true, _) => again.to_owned(),
        (false, true) => format!("async {again}"),
        (false, false) => format!("sync {again}"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_device_label_row_joins_its_cache_device_row() {
        use zprof_common::VDEV_CACHE_DEVICE;
        let key = |stage: Stage, class: u32, vdev: u64| HistKey {
            stage: stage as u32,
            class,
            pool: 7,
            vdev,
        };
        let hist = |count: u64| Hist {
            count,
            ..Hist::ZERO
        };
        let sync_read = 0x100;
        let rows = vec![
            (key(Stage::VdevDisk, sync_read, 1), hist(18)),
            (
                key(Stage::VdevDisk, sync_read | VDEV_CACHE_DEVICE, 1),
                hist(5297),
            ),
            (key(Stage::VdevDisk, sync_read, 2), hist(10990)),
            (key(Stage::ArcRead, 0, 1), hist(3)),
        ];
        let mut out = cache_device_rows(rows);
        out.sort_by_key(|(k, _)| (k.stage, k.vdev, k.class));
        let counts: Vec<(u32, u64, u32, u64)> = out
            .iter()
            .map(|(k, h)| (k.stage, k.vdev, k.class, h.count))
            .collect();
        assert_eq!(
            counts,
            vec![
                (
                    Stage::VdevDisk as u32,
                    1,
                    sync_read | VDEV_CACHE_DEVICE,
                    5315
                ),
                (Stage::VdevDisk as u32, 2, sync_read, 10990),
                (Stage::ArcRead as u32, 1, 0, 3),
            ]
        );
        assert_eq!(
            class_name(Stage::VdevDisk, sync_read | VDEV_CACHE_DEVICE),
            "sync read, cache device"
        );
        use zprof_common::arc_read_class as c;
        assert_eq!(
            class_name(Stage::ArcRead, c::HIT | c::HELD | COUNT_ONLY_CLASS),
            "held hit count only"
        );
        assert_eq!(
            class_name(Stage::ArcRead, c::DISK | c::PREFETCH | c::WAITED),
            "prefetch disk waited"
        );
    }
}
