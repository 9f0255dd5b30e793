//! Loading, attaching, collecting and detaching zprof's eBPF programs.
//!
//! `Session::start` loads the embedded object with the target's configuration
//! (kernel or user memory, struct offsets, pid filter) as load-time constants
//! (`collect::load`), attaches every catalogue point whose function
//! exists and records why the others were not (`collect::attach_plan`,
//! `collect::attach`). `Session::finish` reads the maps (one module
//! per kind of data) and returns a [`Recording`]; dropping the session
//! detaches everything (aya closes the links), so no probe outlives zprof,
//! whatever path it exits by.

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::anyhow;
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, RingBuf},
};

use crate::{
    collect::{
        attach::{self, ProbeAttacher},
        attach_plan::{self, PlanInputs},
        cost,
        events::{self, EventLog},
        histograms,
        load::{self, LoadConfig},
        losses::{self, InFlightAtEnd},
        multi_link::MultiLinks,
        pools, profiles,
        request_rows::{self, RequestRows},
        stacks::{self, StackDrains},
        timeline,
        tracepoints::TracepointOffsets,
    },
    recording::{
        CpuProfile, CpuTicks, HistRecord, Losses, OffCpuProfile, ProbeStatus, Recording, SelfCost,
        TargetInfo, TimelinePoint,
    },
    zfs::{
        catalogue,
        offsets::FoundOffsets,
        releases,
        target::{Target, TargetKind},
        tunables::{LibraryTunables, Tunable},
    },
};

pub use super::options::{CannotTrace, SessionOptions};

/// The leaf frame of off-CPU time spent runnable, waiting for a CPU.
pub use crate::recording::RUNNABLE_FRAME;

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
    release: releases::Interpretation,
    offsets: FoundOffsets,
    probes: Vec<ProbeStatus>,
    warnings: Vec<String>,
    started: Instant,
    /// The machine's CPU counters at start, for `Recording::machine_cpu_busy`.
    cpu_at_start: Option<CpuTicks>,
    started_unix_ms: u64,
    /// bpf_ktime_get_ns (CLOCK_MONOTONIC) at start, to place txgs in time.
    started_ktime_ns: u64,
    /// The txgs and slow requests streamed, as drained.
    events: EventLog,
    timeline: Vec<TimelinePoint>,
    last_totals: TimelinePoint,
    /// Per pool, the cumulative counts at the last tick.
    last_pool_totals: timeline::PoolTotals,
    /// Per pool seconds so far (see [`crate::recording::PoolSecond`]).
    pool_seconds: Vec<crate::recording::PoolSecond>,
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
    /// Where a libzpool keeps the throttle's tunables (empty on the kernel).
    library_tunables: LibraryTunables,
    /// The tunables as last read.
    tunables: Vec<(&'static Tunable, f64)>,
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
        let tracepoints = TracepointOffsets::read(options.filter_pids.is_some(), options.off_cpu)?;
        load::raise_memlock_limit();
        let cpus = aya::util::online_cpus().map_err(|(path, e)| anyhow!("reading {path}: {e}"))?;
        let load_config = LoadConfig::new(&target, offsets, options, tracepoints, cpus.len());
        let load_started = Instant::now();
        let mut ebpf = load::load(&load_config)?;
        let mut warnings = load_config.warnings();
        if let Some(warning) = kernel.then(load::zvol_blk_mq_warning).flatten() {
            warnings.push(warning);
        }
        let plan = attach_plan_for(&target, &load_config, options);
        let LoadConfig {
            release, offsets, ..
        } = load_config;
        let mut multi = attach::multi_links(&ebpf, kernel);
        let mut loaded: HashSet<String> = HashSet::new();
        // Statistics on before anything is attached: enabling them flips a
        // static key, whose code the kernel patches in place, inside the perf
        // overflow path among others; patched while the sampling events fired
        // on the other vCPU, a 6.12 guest under emulation died of a stray int3
        // in __perf_event_overflow. (They go off last: `_stats` drops after
        // `ebpf`, which holds the perf events.)
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
        let started_attach = Instant::now();
        let probes = ProbeAttacher {
            ebpf: &mut ebpf,
            multi: &mut multi,
            loaded: &mut loaded,
            kernel,
            object: &target.object,
        }
        .attach_planned(plan);
        attach::require_an_attached_probe(&probes, &target.object)?;
        let drainer = attach_other_programs(&mut ebpf, options, &cpus, &mut loaded)?;
        attach::mark_attached(&mut ebpf)?;
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
        let library_tunables = match kernel {
            true => LibraryTunables::default(),
            false => LibraryTunables::locate(Path::new(&target.object)),
        };
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
            cpu_at_start: CpuTicks::read(),
            attach_ms: load_started.elapsed().as_secs_f64() * 1e3,
            started_unix_ms: unix_ms_now(),
            started_ktime_ns: super::clock::monotonic_ns(),
            events: EventLog::new(events),
            timeline: Vec::new(),
            last_totals: TimelinePoint::default(),
            last_pool_totals: timeline::PoolTotals::new(),
            pool_seconds: Vec::new(),
            sample_hz: options.sample_hz,
            filtered: options.filter_pids.is_some(),
            drainer,
            pools_forgotten: 0,
            forget_pools_after: None,
            library_tunables,
            tunables: Vec::new(),
        })
    }

    /// Reads the memory maps of the traced processes (with a pid filter):
    /// called every 20 ms in a run's first second, so that a command that
    /// ends before the first drain still has its map (after its exec and its
    /// libraries' loading) to name its stacks with.
    pub fn refresh_traced_maps(&mut self) {
        self.refresh_tunables();
        let Some(drainer) = self.drainer.as_ref().filter(|_| self.filtered) else {
            return;
        };
        drainer.refresh_now(self.traced_pids());
    }

    /// The processes the pid filter follows (none without one).
    fn traced_pids(&self) -> Vec<u32> {
        let Some(map) = self.ebpf.map("TRACKED").filter(|_| self.filtered) else {
            return Vec::new();
        };
        let Ok(tracked) = BpfHashMap::<_, u32, u32>::try_from(map) else {
            return Vec::new();
        };
        tracked.keys().filter_map(Result::ok).collect()
    }

    /// Reads the throttle's tunables where the traced ZFS keeps them: the
    /// module's parameters, or a traced libzpool process's globals. The last
    /// read stays (a lab sets its dirty limit once it has started; a command
    /// gone at the end can no longer be read).
    fn refresh_tunables(&mut self) {
        let read = match self.target.kind {
            TargetKind::Kernel => {
                crate::zfs::tunables::read_tunables(Path::new("/sys/module/zfs/parameters"))
            }
            TargetKind::Libzpool => self
                .traced_pids()
                .into_iter()
                .map(|pid| self.library_tunables.read(pid))
                .find(|read| !read.is_empty())
                .unwrap_or_default(),
        };
        if !read.is_empty() {
            self.tunables = read;
        }
    }

    /// The write throttle's tunables, read again now, by parameter name.
    pub fn tunables_now(&mut self) -> BTreeMap<String, f64> {
        self.refresh_tunables();
        self.recorded_tunables()
    }

    /// The tunables last read, as a recording keeps them.
    fn recorded_tunables(&self) -> BTreeMap<String, f64> {
        self.tunables
            .iter()
            .map(|(t, v)| (t.parameter.to_owned(), *v))
            .collect()
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
        let counters = losses::counters(&self.ebpf)?;
        if let Some(error) = error {
            self.warnings.push(format!(
                "draining stacks failed, the CPU and off-CPU profiles stop there: {error}"
            ));
        }
        let cpu = drains
            .samples
            .as_mut()
            .map(|samples| profiles::cpu_profile(samples, &mut namer, &counters, self.sample_hz));
        let offcpu = drains
            .offcpu
            .as_mut()
            .map(|offcpu| profiles::offcpu_profile(offcpu, &mut namer, &counters));
        Ok((cpu, offcpu))
    }

    /// Adds a process to the filter (used for a command started after attaching).
    pub fn track_pid(&mut self, pid: u32) -> anyhow::Result<()> {
        attach::track(&mut self.ebpf, pid)
    }

    /// How the traced OpenZFS release is read (series, verification status).
    pub fn release(&self) -> &releases::Interpretation {
        &self.release
    }

    /// Every probe point considered, attached or not.
    pub fn probes(&self) -> &[ProbeStatus] {
        &self.probes
    }

    /// Moves pending txg events from the ring buffer into the session.
    pub fn drain_events(&mut self) {
        self.events.drain();
    }

    /// Records one timeline point: the workload's counts since the last call.
    pub fn tick(&mut self) -> anyhow::Result<()> {
        self.drain_events();
        self.refresh_tunables();
        let rows = self.timeline_rows()?;
        let totals = timeline::totals(&rows);
        let second = self.timeline.len() as u32 + 1;
        self.timeline
            .push(timeline::point_since(&totals, &self.last_totals, second));
        self.last_totals = totals;
        self.record_pool_seconds(&rows, second)
    }

    /// The cumulative rows of the stages the timeline counts.
    fn timeline_rows(&self) -> anyhow::Result<Vec<(zprof_common::HistKey, zprof_common::Hist)>> {
        histograms::read_histograms(&self.ebpf, |k| timeline::TIMELINE_STAGES.contains(&k.stage))
    }

    /// Adds each pool's counts since the last call to second `second`.
    fn record_pool_seconds(
        &mut self,
        rows: &[(zprof_common::HistKey, zprof_common::Hist)],
        second: u32,
    ) -> anyhow::Result<()> {
        let pool_totals = timeline::pool_totals(rows);
        if pool_totals != self.last_pool_totals {
            let names = pools::pool_names(&self.ebpf)?;
            self.pool_seconds.extend(timeline::pool_seconds_since(
                &pool_totals,
                &self.last_pool_totals,
                &names,
                second,
            ));
            self.last_pool_totals = pool_totals;
        }
        Ok(())
    }

    /// Run count and run time of each loaded program (BPF_STATS_RUN_TIME).
    fn program_costs(&self) -> Vec<crate::recording::ProgramCost> {
        cost::program_costs(&self.ebpf, self.multi.as_ref(), &self.loaded)
    }

    /// Drops the rows of pools exported or destroyed at least `after` ago
    /// (see [`pools::forget_gone_pools`]).
    fn forget_gone_pools(&mut self, after: Duration) -> anyhow::Result<()> {
        self.pools_forgotten += pools::forget_gone_pools(&mut self.ebpf, after)?;
        Ok(())
    }

    /// The request rows, with dataset names and cgroup paths, and the
    /// requests still in progress.
    fn requests(&self) -> anyhow::Result<RequestRows> {
        request_rows::read_requests(
            &self.ebpf,
            &self.events.slow_requests,
            self.started_ktime_ns,
        )
    }

    /// What `zprof serve` reads at each scrape: the stage rows so far
    /// (cumulative, see [`Session::live_rows`]: an exporter keeps no per-event
    /// state, so its memory stays flat however long it runs), the request
    /// layer's rows, and zprof's health.
    pub fn live(&mut self) -> anyhow::Result<crate::recording::live::Scrape> {
        let started = Instant::now();
        self.refresh_tunables();
        let (names, rows) = self.named_live_rows()?;
        let vdevs = pools::vdev_places(&self.ebpf, &names, &rows)?;
        let requests = self.requests()?.records;
        let c = losses::counters(&self.ebpf)?;
        let attached = self.probes.iter().filter(|p| p.attached).count() as u64;
        let health = crate::recording::live::Health {
            target: format!("{:?}", self.target.kind).to_lowercase(),
            zfs_version: self.release.version.clone().unwrap_or_default(),
            zfs_status: self.release.status.word().into(),
            probes_attached: attached,
            probes_unavailable: self.probes.len() as u64 - attached,
            losses: losses::live_losses(&c),
            unmatched_by_stage: losses::unmatched_by_stage(&self.ebpf)?
                .into_iter()
                .collect(),
            programs: self
                .program_costs()
                .into_iter()
                .map(|p| (p.program, p.run_count, p.run_time_ns))
                .collect(),
            attach_seconds: self.attach_ms / 1e3,
            resident_bytes: cost::resident_bytes(),
            collect_seconds: started.elapsed().as_secs_f64(),
            pools_forgotten: self.pools_forgotten,
            tunables: self.tunables.clone(),
        };
        Ok(crate::recording::live::Scrape {
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
        self.events.forget_drained();
        let names = pools::pool_names(&self.ebpf)?;
        let rows = histograms::histogram_records(&self.ebpf, &names)?;
        Ok((names, rows))
    }

    /// The recording of this session's target and probes over `duration_s`,
    /// with nothing measured yet: what a whole run ([`Session::finish`]) and
    /// an interval ([`Session::interval_recording`]) fill in.
    fn bare_recording(&self, duration_s: f64) -> Recording {
        Recording {
            schema: crate::recording::SCHEMA.into(),
            version: crate::recording::VERSION,
            zprof_version: env!("CARGO_PKG_VERSION").into(),
            target: self.target_info(),
            offsets_source: self.offsets.source.clone(),
            started_unix_ms: self.started_unix_ms,
            duration_s,
            command: None,
            command_exit: None,
            pid: None,
            probes: self.probes.clone(),
            warnings: Vec::new(),
            losses: Losses::default(),
            histograms: Vec::new(),
            txgs: Vec::new(),
            timeline: Vec::new(),
            pool_seconds: Vec::new(),
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
            tunables: self.recorded_tunables(),
        }
    }

    /// A recording of `seconds` made of `histograms` (rows of an interval, as
    /// `zprof top` takes them), for explain: this session's target and probes,
    /// no timeline, requests or profiles.
    pub fn interval_recording(&self, histograms: Vec<HistRecord>, seconds: f64) -> Recording {
        Recording {
            histograms,
            ..self.bare_recording(seconds)
        }
    }

    /// Reads everything and builds the recording, then detaches (timed: the
    /// recording's self cost says how long it took).
    pub fn finish(
        mut self,
        command: Option<Vec<String>>,
        command_exit: Option<i32>,
        pid: Option<u32>,
    ) -> anyhow::Result<Recording> {
        let duration = self.started.elapsed();
        // A final partial second only if it holds more than a blink of data;
        // otherwise the per-pool counts of that blink join the last second,
        // so that every throttle wait is in some pool's second.
        if self.timeline.is_empty() || duration.as_secs_f64() - self.timeline.len() as f64 > 0.2 {
            self.tick()?;
        } else {
            let rows = self.timeline_rows()?;
            self.record_pool_seconds(&rows, self.timeline.len() as u32)?;
        }
        self.drain_events();
        let names = pools::pool_names(&self.ebpf)?;
        let histograms = histograms::histogram_records(&self.ebpf, &names)?;
        let vdevs = pools::vdev_places(&self.ebpf, &names, &histograms)?;
        let counters = losses::counters(&self.ebpf)?;
        let requests = self.requests()?.sorted();
        self.warn_of_unfollowed_zvol_threads(&requests);
        let in_flight = InFlightAtEnd {
            calls: losses::in_flight(&self.ebpf)?,
            requests: requests.in_flight,
        };
        let losses = losses::losses(
            &counters,
            in_flight,
            losses::unmatched_by_stage(&self.ebpf)?,
        );
        let txgs = events::txg_records(
            &self.events.txgs,
            &self.events.txg_lives,
            &names,
            self.started_ktime_ns,
            &events::SyncMeasured::of(&self.probes),
        );
        let (cpu, offcpu) = self.stack_profiles()?;
        let mut recording = Recording {
            command,
            command_exit,
            pid,
            warnings: self.warnings.clone(),
            losses,
            histograms,
            txgs,
            timeline: self.timeline.clone(),
            pool_seconds: self.pool_seconds.clone(),
            bpf_programs: self.program_costs(),
            cpu,
            requests: requests.records,
            offcpu,
            slow_requests: requests.slow,
            slow_requests_dropped: self.events.slow_requests_dropped,
            vdevs,
            ..self.bare_recording(duration.as_secs_f64())
        };
        let uprobe_multi = self.multi.as_ref().is_some_and(|m| m.proven());
        let detach_ms = cost::timed_detach(self.multi, self.ebpf);
        recording.self_cost = Some(SelfCost {
            attach_ms: self.attach_ms,
            detach_ms,
            peak_rss_kib: cost::peak_rss_kib(),
            uprobe_multi,
        });
        recording.machine_cpu_busy = self
            .cpu_at_start
            .zip(CpuTicks::read())
            .map(|(a, b)| b.busy_since(&a));
        Ok(recording)
    }

    /// zvol_write/zvol_read run on the zvol taskq's threads, which the
    /// process filter does not follow: say so when the filtered processes
    /// made zvol requests.
    fn warn_of_unfollowed_zvol_threads(&mut self, requests: &RequestRows) {
        if self.filtered && requests.records.iter().any(|r| r.layer == "zvol") {
            self.warnings.push(
                "zvol I/O runs on zvol taskq threads: with a process filter the workload rows count the traced processes' file I/O only; the requests section has their zvol requests".into(),
            );
        }
    }
}

/// Wall-clock time now, in ms since the epoch (0 before it).
fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The attach plan of `target` as loaded with `load_config`.
fn attach_plan_for(
    target: &Target,
    load_config: &LoadConfig,
    options: &SessionOptions,
) -> Vec<attach_plan::PlannedPoint> {
    attach_plan::plan(
        catalogue::POINTS,
        &PlanInputs {
            kernel: target.kind == TargetKind::Kernel,
            object: &target.object,
            functions: &target.functions,
            release: &load_config.release,
            flush_mode: load_config.config.semantics.flush_mode,
            offsets: &load_config.offsets,
            skip: &options.skip,
            full_timing: options.full_timing,
        },
    )
}

/// Attaches the programs other than the probe points, as the options ask
/// (the fork tracker of the pid filter, the CPU sampler, the off-CPU
/// switch), adding them to `loaded`, and starts draining the stack maps of
/// those that fill them.
fn attach_other_programs(
    ebpf: &mut Ebpf,
    options: &SessionOptions,
    cpus: &[u32],
    loaded: &mut HashSet<String>,
) -> anyhow::Result<Option<stacks::Drainer>> {
    if let Some(pids) = &options.filter_pids {
        attach::track_forks(ebpf, pids)?;
    }
    if options.sample_hz > 0 {
        loaded.insert(attach::sample_cpus(ebpf, cpus, options.sample_hz)?);
    }
    let drainer = start_drainer(ebpf, options)?;
    if options.off_cpu {
        loaded.insert(attach::trace_off_cpu(ebpf)?);
    }
    Ok(drainer)
}

/// Starts draining the stack maps of CPU samples and off-CPU time, when
/// the session has either.
fn start_drainer(
    ebpf: &mut Ebpf,
    options: &SessionOptions,
) -> anyhow::Result<Option<stacks::Drainer>> {
    let sampling = options.sample_hz > 0;
    if !(sampling || options.off_cpu) {
        return Ok(None);
    }
    let drains = StackDrains::new(ebpf, sampling, options.off_cpu)?;
    Ok(Some(stacks::Drainer::start(drains)?))
}
