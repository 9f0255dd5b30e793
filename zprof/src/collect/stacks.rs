//! Stacks from the eBPF side into named frames: the CPU samples and the
//! off-CPU time, drained from two generations of maps every 250 ms.
//!
//! Draining keeps the stack maps nearly empty: a stack map refuses a stack
//! whose hash bucket another stack holds, so a map that accumulates a whole run
//! loses more samples the longer the run (12.9% of a compression run once, and
//! every sample once it is full). Each generation only ever holds a quarter
//! second of stacks, and is sized from the sample rate (see [`SampleMapSizes`]).
//! Off-CPU time is keyed by the generation its stacks were stored in; a thread
//! blocked across drains (an idle taskq thread, a long fsync) has its stacks
//! copied before their map is emptied, and named from the copy when it wakes.
//!
//! The memory map of each sampled process is read again at every drain, and
//! each drained stack keeps the map that was current (a process that exec'd or
//! mapped a library gets a new one; one that exited keeps its last): stacks
//! are named with it at the end.

use std::collections::{BTreeMap, HashMap, HashSet};

use aya::maps::{Array, HashMap as BpfHashMap, Map, MapData, StackTraceMap};
use zprof_common::{OFFCPU_RUNNABLE, OffCpuStart, STACK_DEPTH, SampleKey, Stage};

use crate::{
    recording::requests,
    recording::{
        CUT_FRAME, KERNEL_LOST_FRAME, RUNNABLE_FRAME, USER_LOST_FRAME, UnnamedProcess, stage_name,
    },
    zfs::symbols::{ProcessMaps, Symbolizer, UNKNOWN_FRAME},
};

/// -EFAULT from bpf_get_stackid: no stack of that kind (a kernel thread has no
/// user stack; a sample taken in user mode has no kernel stack).
const NO_STACK: i32 = -14;

/// One of a stack's two halves as drained.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Walk {
    /// No stack of that kind (a kernel thread's user stack).
    None,
    /// The stack could not be stored, or was emptied before it was read.
    Lost,
    /// Addresses, innermost first.
    Addresses(Vec<u64>),
}

/// A sample's or blocked period's stack as drained: who, where, and which
/// memory map of its process was current then. Named at the end, so that
/// symbolizing (reading ELF files, a one-off 100 ms) does not compete with
/// the workload for the CPU while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawStack {
    tgid: u32,
    comm: [u8; 16],
    pad: u32,
    user: Walk,
    kernel: Walk,
    /// Index of the process's memory map in [`StackNamer`]'s history (none: never read).
    maps_version: Option<u32>,
}

/// Names the frames of sampled stacks; keeps what it learnt of each process.
#[derive(Default)]
pub struct StackNamer {
    /// Each process's memory maps as they changed (exec, mmap).
    maps: HashMap<u32, Vec<ProcessMaps>>,
    names: HashMap<u32, String>,
    /// When each process's map was last read, and its executable then.
    read_at: HashMap<u32, (std::time::Instant, Option<std::path::PathBuf>)>,
    symbolizer: Symbolizer,
}

/// How long a process's memory map is trusted when its executable has not
/// changed (an exec changes it; a library loaded later waits this long).
const MAPS_TRUSTED_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// What naming a stack found besides its frames.
struct Named {
    frames: Vec<String>,
    cut: bool,
    /// Its user frames were all unknown.
    user_unknown: bool,
}

impl StackNamer {
    /// Reads again the memory maps and names of these processes. A process
    /// that is exiting (or a zombie) has no mappings left: its last real map
    /// is kept, or every user frame it left would become [unknown].
    pub fn refresh(&mut self, tgids: impl IntoIterator<Item = u32>) {
        self.read_maps(tgids, false);
    }

    /// Reads the memory maps of these processes even if read a moment ago.
    pub fn refresh_now(&mut self, tgids: impl IntoIterator<Item = u32>) {
        self.read_maps(tgids, true);
    }

    fn read_maps(&mut self, tgids: impl IntoIterator<Item = u32>, always: bool) {
        for tgid in tgids {
            // Reading a map costs about 100 us; a readlink of the executable
            // a few: reread only after an exec or once a second.
            let exe = std::fs::read_link(format!("/proc/{tgid}/exe")).ok();
            if let Some((at, seen)) = self.read_at.get(&tgid)
                && !always
                && at.elapsed() < MAPS_TRUSTED_FOR
                && *seen == exe
            {
                continue;
            }
            self.read_at.insert(tgid, (std::time::Instant::now(), exe));
            if let Some(maps) = ProcessMaps::read(tgid).filter(|m| !m.mappings.is_empty()) {
                let history = self.maps.entry(tgid).or_default();
                if history.last() != Some(&maps) {
                    history.push(maps);
                }
            }
            if let Ok(name) = std::fs::read_to_string(format!("/proc/{tgid}/comm")) {
                self.names.insert(tgid, name.trim().to_owned());
            }
        }
    }

    /// Frames that could not be named so far.
    pub fn unsymbolized(&self) -> u64 {
        self.symbolizer.unsymbolized
    }

    /// Frames named only by their place (a function without a symbol).
    pub fn placed(&self) -> u64 {
        self.symbolizer.placed
    }

    /// Why a process's user frames could not be named, if they could not.
    fn why_unnamed(&self, tgid: u32) -> String {
        match self.maps.get(&tgid) {
            None => "its memory map was never read (it exited within 250 ms of starting)".into(),
            Some(_) => {
                "its addresses lie outside its mapped files (stacks walked without frame pointers)"
                    .into()
            }
        }
    }

    /// A stack as drained: `addresses` gives a stack id's addresses,
    /// innermost first. Cheap: naming waits for the end.
    pub fn raw(
        &self,
        key: &SampleKey,
        mut addresses: impl FnMut(i32) -> Option<Vec<u64>>,
    ) -> RawStack {
        let mut walk = |id: i32| match id {
            NO_STACK => Walk::None,
            id if id < 0 => Walk::Lost,
            id => addresses(id).map_or(Walk::Lost, Walk::Addresses),
        };
        RawStack {
            tgid: key.tgid,
            comm: key.comm,
            pad: key.pad,
            user: walk(key.user_stack),
            kernel: walk(key.kernel_stack),
            maps_version: self.maps.get(&key.tgid).map(|h| h.len() as u32 - 1),
        }
    }

    /// A stack's frames: process, thread, the stage zprof timed the thread
    /// in, user frames, kernel frames, outermost first.
    fn name(&mut self, raw: &RawStack) -> Named {
        let thread = requests::c_string(&raw.comm);
        let process = self
            .names
            .get(&raw.tgid)
            .cloned()
            .unwrap_or_else(|| thread.clone());
        let mut frames = vec![process];
        if thread != frames[0] {
            frames.push(thread);
        }
        // The stage the thread was in, measured, not walked: libzpool and libc
        // stacks lose their callers without frame pointers.
        if let Some(stage) = Stage::from_u32(raw.pad & !OFFCPU_RUNNABLE) {
            frames.push(format!("[in {}]", stage_name(stage)));
        }
        let depth = |walk: &Walk| {
            if let Walk::Addresses(a) = walk {
                a.len()
            } else {
                0
            }
        };
        let cut =
            depth(&raw.user) == STACK_DEPTH as usize || depth(&raw.kernel) == STACK_DEPTH as usize;
        if cut {
            frames.push(CUT_FRAME.into());
        }
        let maps = raw
            .maps_version
            .and_then(|v| self.maps.get(&raw.tgid)?.get(v as usize));
        let first_user = frames.len();
        match &raw.user {
            Walk::None => {}
            Walk::Lost => frames.push(USER_LOST_FRAME.into()),
            Walk::Addresses(ips) => {
                frames.extend(ips.iter().rev().map(|&ip| self.symbolizer.user(maps, ip)))
            }
        }
        let user_unknown =
            frames.len() > first_user && frames[first_user..].iter().all(|f| f == UNKNOWN_FRAME);
        match &raw.kernel {
            Walk::None => {}
            Walk::Lost => frames.push(KERNEL_LOST_FRAME.into()),
            Walk::Addresses(ips) => {
                frames.extend(ips.iter().rev().map(|&ip| self.symbolizer.kernel(ip)))
            }
        }
        if raw.pad & OFFCPU_RUNNABLE != 0 {
            frames.push(RUNNABLE_FRAME.into());
        }
        Named {
            frames,
            cut,
            user_unknown,
        }
    }
}

/// Empties a stack map (its generation is idle).
fn empty_stacks(stacks: &mut StackTraceMap<MapData>) {
    let ids: Vec<u32> = stacks.stack_ids().filter_map(Result::ok).collect();
    for id in ids {
        let _ = stacks.remove(&id);
    }
}

/// A stack's addresses in a stack map, innermost first.
fn addresses_in(map: &StackTraceMap<MapData>, id: i32) -> Option<Vec<u64>> {
    let trace = map.get(&u32::try_from(id).ok()?, 0).ok()?;
    Some(trace.frames().iter().map(|f| f.ip).collect())
}

/// Named stacks with their weights, and what naming them found.
#[derive(Debug, Default)]
pub struct NamedStacks {
    /// Weight by frames.
    pub stacks: BTreeMap<Vec<String>, u64>,
    /// Weight in stacks cut at the depth cap.
    pub cut: u64,
    /// Processes most of whose user stacks could not be named.
    pub unnamed_processes: Vec<UnnamedProcess>,
}

/// Names drained stacks, merging those that name alike.
pub fn name_all(raw: HashMap<RawStack, u64>, namer: &mut StackNamer) -> NamedStacks {
    let mut out = NamedStacks::default();
    // Per process: weight with a user stack, and of it the weight whose user
    // frames were all unknown.
    let mut user_weight: HashMap<u32, (u64, u64)> = HashMap::new();
    // A process that exited before its name was read is named by a thread's.
    let mut thread_names: HashMap<u32, String> = HashMap::new();
    for (stack, weight) in raw {
        let named = namer.name(&stack);
        if named.cut {
            out.cut += weight;
        }
        if let Walk::Addresses(_) = stack.user {
            let counts = user_weight.entry(stack.tgid).or_default();
            counts.0 += weight;
            counts.1 += if named.user_unknown { weight } else { 0 };
            thread_names
                .entry(stack.tgid)
                .or_insert_with(|| requests::c_string(&stack.comm));
        }
        *out.stacks.entry(named.frames).or_default() += weight;
    }
    out.unnamed_processes = user_weight
        .into_iter()
        .filter(|(_, (all, unnamed))| *unnamed * 2 > *all)
        .map(|(tgid, (samples, unnamed))| UnnamedProcess {
            pid: tgid,
            name: namer
                .names
                .get(&tgid)
                .or_else(|| thread_names.get(&tgid))
                .cloned()
                .unwrap_or_default(),
            samples,
            unnamed,
            why: namer.why_unnamed(tgid),
        })
        .collect();
    out.unnamed_processes
        .sort_by_key(|p| std::cmp::Reverse(p.unnamed));
    out
}

/// Sizes of the CPU sample maps, per generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleMapSizes {
    /// Stacks per stack map.
    pub stacks: u32,
    /// Keys per sample-count map.
    pub samples: u32,
}

/// Slots of each generation's off-CPU stack map (17.5 MiB each). Threads
/// switch far more often than they are sampled (50,000 times a second in the
/// lab's fsync-collapse scenario), and a quarter second of them must fit.
pub const OFFCPU_STACK_SLOTS: u32 = 32_768;

/// How often the idle generation is drained.
pub const DRAIN_PERIOD: std::time::Duration = std::time::Duration::from_millis(250);

impl SampleMapSizes {
    /// Sizes for `hz` samples per second on each of `cpus` CPUs. A drain period
    /// stores at most two stacks per sample; with 256 buckets per sample, a new
    /// stack finds its bucket taken less than 1% of the time even if no two
    /// samples share a stack. Capped at 65,536 stacks (35 MiB a generation),
    /// where the bound loosens past 999 Hz on 2 CPUs; losses are counted.
    pub fn for_rate(hz: u64, cpus: u64) -> SampleMapSizes {
        let per_period = (hz * cpus.max(1))
            .div_ceil(1_000 / DRAIN_PERIOD.as_millis() as u64)
            .max(1);
        let stacks = (256 * per_period).next_power_of_two().clamp(4_096, 65_536) as u32;
        let samples = (4 * per_period).next_power_of_two().clamp(1_024, 65_536) as u32;
        SampleMapSizes { stacks, samples }
    }
}

/// The generation counter of the stack maps, and the maps it switches.
pub struct StackDrains {
    generation: Array<MapData, u32>,
    /// The live generation: counted up at every drain; its low bit picks the maps.
    live: u32,
    /// The CPU sample maps (none without sampling).
    pub samples: Option<SampleMaps>,
    /// The off-CPU maps (none without --off-cpu).
    pub offcpu: Option<OffCpuMaps>,
}

impl StackDrains {
    /// Takes the stack maps out of the loaded object.
    pub fn new(ebpf: &mut aya::Ebpf, sampling: bool, off_cpu: bool) -> anyhow::Result<StackDrains> {
        let mut take = |name: &str| -> anyhow::Result<Map> {
            ebpf.take_map(name)
                .ok_or_else(|| anyhow::anyhow!("{name} missing from the eBPF object"))
        };
        let samples = if sampling {
            Some(SampleMaps {
                samples: [
                    BpfHashMap::try_from(take("SAMPLES_0")?)?,
                    BpfHashMap::try_from(take("SAMPLES_1")?)?,
                ],
                stacks: [
                    StackTraceMap::try_from(take("CPU_STACKS_0")?)?,
                    StackTraceMap::try_from(take("CPU_STACKS_1")?)?,
                ],
                raw: HashMap::new(),
            })
        } else {
            None
        };
        let offcpu = if off_cpu {
            Some(OffCpuMaps {
                starts: BpfHashMap::try_from(take("OFFCPU_STARTS")?)?,
                blocked: BpfHashMap::try_from(take("OFFCPU")?)?,
                stacks: [
                    StackTraceMap::try_from(take("OFFCPU_STACKS_0")?)?,
                    StackTraceMap::try_from(take("OFFCPU_STACKS_1")?)?,
                ],
                kept: HashMap::new(),
                raw: HashMap::new(),
            })
        } else {
            None
        };
        Ok(StackDrains {
            generation: Array::try_from(take("STACK_GENERATION")?)?,
            live: 0,
            samples,
            offcpu,
        })
    }

    /// Drains the idle generation (idle for a drain period: no program can
    /// still be writing to its maps), then makes it the live one.
    pub fn tick(&mut self, namer: &mut StackNamer) -> anyhow::Result<()> {
        self.drain(namer, false)?;
        self.flip()
    }

    /// Drains everything at the end.
    pub fn finish(&mut self, namer: &mut StackNamer) -> anyhow::Result<()> {
        for _ in 0..2 {
            self.flip()?;
            // A program that read the old generation finishes within microseconds.
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.drain(namer, false)?;
        }
        // What the live generation gathered in the last 5 ms, read in place.
        self.drain(namer, true)
    }

    fn flip(&mut self) -> anyhow::Result<()> {
        self.live = self.live.wrapping_add(1);
        self.generation.set(0, self.live, 0)?;
        Ok(())
    }

    fn drain(&mut self, namer: &mut StackNamer, last: bool) -> anyhow::Result<()> {
        let idle = self.live.wrapping_sub(1);
        if let Some(samples) = self.samples.as_mut() {
            samples.drain(if last { self.live } else { idle }, namer, !last)?;
        }
        if let Some(offcpu) = self.offcpu.as_mut() {
            offcpu.drain(idle, self.live, namer, last)?;
        }
        Ok(())
    }
}

/// The drains on a thread of their own: draining costs syscalls (thousands
/// a second with --off-cpu, each slow under emulation), and must not hold up
/// the recording's loop (the timeline, noticing that the command exited).
pub struct Drainer {
    requests: std::sync::mpsc::Sender<DrainRequest>,
    thread: std::thread::JoinHandle<Drained>,
}

enum DrainRequest {
    /// Read these processes' maps now.
    RefreshNow(Vec<u32>),
    /// Drain everything and hand the result back.
    Finish,
}

/// What the drainer hands back at the end.
pub struct Drained {
    /// The maps and what was drained from them.
    pub drains: StackDrains,
    /// What was learnt of the processes, to name the stacks with.
    pub namer: StackNamer,
    /// The first drain that failed: the profiles end there.
    pub error: Option<String>,
}

impl Drainer {
    /// Starts draining every [`DRAIN_PERIOD`].
    pub fn start(drains: StackDrains) -> anyhow::Result<Drainer> {
        let (requests, received) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("zprof-drain".into())
            .spawn(move || drain_loop(drains, &received))?;
        Ok(Drainer { requests, thread })
    }

    /// Asks for these processes' memory maps to be read now.
    pub fn refresh_now(&self, tgids: Vec<u32>) {
        let _ = self.requests.send(DrainRequest::RefreshNow(tgids));
    }

    /// Drains what is left and returns everything.
    pub fn finish(self) -> anyhow::Result<Drained> {
        let _ = self.requests.send(DrainRequest::Finish);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the stack-draining thread panicked"))
    }
}

fn drain_loop(
    mut drains: StackDrains,
    received: &std::sync::mpsc::Receiver<DrainRequest>,
) -> Drained {
    use std::sync::mpsc::RecvTimeoutError;
    let mut namer = StackNamer::default();
    let mut error = None;
    let mut next = std::time::Instant::now() + DRAIN_PERIOD;
    loop {
        match received.recv_timeout(next.saturating_duration_since(std::time::Instant::now())) {
            Ok(DrainRequest::RefreshNow(tgids)) => namer.refresh_now(tgids),
            Ok(DrainRequest::Finish) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                // Behind (a slow drain): the next one a period from now.
                next = (next + DRAIN_PERIOD).max(std::time::Instant::now());
                if error.is_none()
                    && let Err(err) = drains.tick(&mut namer)
                {
                    error = Some(format!("{err:#}"));
                }
            }
        }
    }
    if error.is_none()
        && let Err(err) = drains.finish(&mut namer)
    {
        error = Some(format!("{err:#}"));
    }
    Drained {
        drains,
        namer,
        error,
    }
}

/// The CPU sample maps of both generations, and what was drained from them.
pub struct SampleMaps {
    samples: [BpfHashMap<MapData, SampleKey, u64>; 2],
    stacks: [StackTraceMap<MapData>; 2],
    /// Samples by stack, as drained.
    pub raw: HashMap<RawStack, u64>,
}

impl SampleMaps {
    /// Takes the samples of `generation`'s maps, then empties them (when
    /// `empty`: not the live generation read in place at the end).
    fn drain(
        &mut self,
        generation: u32,
        namer: &mut StackNamer,
        empty: bool,
    ) -> anyhow::Result<()> {
        let parity = (generation & 1) as usize;
        let entries: Vec<(SampleKey, u64)> =
            self.samples[parity].iter().collect::<Result<_, _>>()?;
        let with_user_stacks: HashSet<u32> = entries
            .iter()
            .filter(|(k, _)| k.user_stack >= 0)
            .map(|(k, _)| k.tgid)
            .collect();
        namer.refresh(with_user_stacks);
        for (key, count) in &entries {
            *self
                .raw
                .entry(namer.raw(key, |id| addresses_in(&self.stacks[parity], id)))
                .or_default() += count;
        }
        if !empty {
            return Ok(());
        }
        for (key, _) in &entries {
            let _ = self.samples[parity].remove(key);
        }
        empty_stacks(&mut self.stacks[parity]);
        Ok(())
    }
}

/// The off-CPU maps: the blocked time (one map; each key names the generation
/// of its stacks), the threads blocked now, and the two stack maps.
pub struct OffCpuMaps {
    starts: BpfHashMap<MapData, u32, OffCpuStart>,
    blocked: BpfHashMap<MapData, SampleKey, u64>,
    stacks: [StackTraceMap<MapData>; 2],
    /// Addresses of the stacks of threads still blocked when their
    /// generation's stack map was emptied, by (generation, stack id).
    kept: HashMap<(u32, i32), Vec<u64>>,
    /// Blocked time (ns) by stack, as drained.
    pub raw: HashMap<RawStack, u64>,
}

impl OffCpuMaps {
    /// Names and takes the blocked time of the generations before `live`,
    /// keeps the stacks of threads blocked since `idle`, and empties `idle`'s
    /// stack map; at the `last` drain, takes `live`'s time too, in place.
    fn drain(
        &mut self,
        idle: u32,
        live: u32,
        namer: &mut StackNamer,
        last: bool,
    ) -> anyhow::Result<()> {
        let parity = |generation: u32| (generation & 1) as usize;
        // Threads blocked now, read before the blocked time: one that wakes
        // between the two reads is then in both, never in neither.
        let open: Vec<OffCpuStart> = self
            .starts
            .iter()
            .filter_map(Result::ok)
            .map(|(_, s)| s)
            .collect();
        if !last {
            for start in open.iter().filter(|s| s.key.generation == idle) {
                for id in [start.key.user_stack, start.key.kernel_stack] {
                    if let Some(ips) = addresses_in(&self.stacks[parity(idle)], id) {
                        self.kept.insert((idle, id), ips);
                    }
                }
            }
        }
        let keys: Vec<SampleKey> = self.blocked.keys().collect::<Result<_, _>>()?;
        namer.refresh(
            keys.iter()
                .filter(|k| k.user_stack >= 0)
                .map(|k| k.tgid)
                .collect::<HashSet<u32>>(),
        );
        for key in keys.into_iter().filter(|k| last || k.generation != live) {
            // Read and removed at once, so that little can land in between.
            let Ok(ns) = self.blocked.get(&key, 0) else {
                continue;
            };
            let _ = self.blocked.remove(&key);
            let in_map = key.generation == idle || key.generation == live;
            let map = &self.stacks[parity(key.generation)];
            let kept = &self.kept;
            let raw = namer.raw(&key, |id| {
                if in_map {
                    addresses_in(map, id)
                } else {
                    kept.get(&(key.generation, id)).cloned()
                }
            });
            *self.raw.entry(raw).or_default() += ns;
        }
        let open_generations: HashSet<u32> = open.iter().map(|s| s.key.generation).collect();
        self.kept
            .retain(|(generation, _), _| open_generations.contains(generation));
        if !last {
            empty_stacks(&mut self.stacks[parity(idle)]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cut_frame_names_the_depth_cap() {
        assert!(
            CUT_FRAME.contains(&format!(" {STACK_DEPTH} ")),
            "{CUT_FRAME}"
        );
    }

    #[test]
    fn sample_maps_grow_with_the_rate_within_bounds() {
        // 99 Hz on 2 CPUs: 50 samples a period, 100 stacks at most in 16,384 buckets.
        assert_eq!(
            SampleMapSizes::for_rate(99, 2),
            SampleMapSizes {
                stacks: 16_384,
                samples: 1_024
            }
        );
        assert_eq!(SampleMapSizes::for_rate(1, 1).stacks, 4_096);
        assert_eq!(SampleMapSizes::for_rate(999, 64).stacks, 65_536);
        let sizes = SampleMapSizes::for_rate(499, 2);
        assert!(sizes.stacks as u64 >= 2 * 100 * 250, "{sizes:?}");
    }
}
