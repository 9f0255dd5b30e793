//! Stacks from the eBPF side into named frames: the CPU samples, drained from
//! their two generations of maps every 250 ms, and the off-CPU time, read once
//! at the end.
//!
//! Draining keeps the stack maps nearly empty: a stack map refuses a stack
//! whose hash bucket another stack holds, so a map that accumulates a whole run
//! loses more samples the longer the run (12.9% of a compression run once, and
//! every sample once it is full). Each generation only ever holds a quarter
//! second of stacks, and is sized from the sample rate (see [`SampleMapSizes`]).
//!
//! Stacks are named while their processes run: the memory map of each sampled
//! process is read again at every drain, so a process that exec'd, mapped a
//! library or exited since the last drain is named by its latest map.

use std::collections::{BTreeMap, HashMap, HashSet};

use aya::maps::{Array, HashMap as BpfHashMap, Map, MapData, StackTraceMap};
use zprof_common::{OFFCPU_RUNNABLE, STACK_DEPTH, SampleKey, Stage};

use crate::{
    recording::stage_name,
    requests,
    symbols::{ProcessMaps, Symbolizer, UNKNOWN_FRAME},
};

/// The leaf frame of off-CPU time spent runnable (preempted, or woken but not
/// yet running): waiting for a CPU, not for what the thread was blocked on.
pub const RUNNABLE_FRAME: &str = "[runnable: waiting for a CPU]";
/// The root-side frame of a stack cut at [`STACK_DEPTH`] frames.
pub const CUT_FRAME: &str = "[cut: deeper than 64 frames]";
/// A sample whose user stack could not be stored (stack map full or bucket taken).
pub const USER_LOST_FRAME: &str = "[user stack lost: stack map full]";
/// A sample whose kernel stack could not be stored.
pub const KERNEL_LOST_FRAME: &str = "[kernel stack lost: stack map full]";

/// -EFAULT from bpf_get_stackid: no stack of that kind (a kernel thread has no
/// user stack; a sample taken in user mode has no kernel stack).
const NO_STACK: i32 = -14;

/// Names the frames of sampled stacks; keeps what it learnt of each process.
#[derive(Default)]
pub struct StackNamer {
    maps: HashMap<u32, ProcessMaps>,
    names: HashMap<u32, String>,
    symbolizer: Symbolizer,
    /// Samples (or microseconds) whose stack reached the depth cap.
    pub cut: u64,
    /// Whether the last stack named had user frames, all unknown.
    last_user_unknown: bool,
}

impl StackNamer {
    /// Reads again the memory maps and names of these processes. A process
    /// that is exiting (or a zombie) has no mappings left: its last real map
    /// is kept, or every user frame it left would become [unknown].
    pub fn refresh(&mut self, tgids: impl IntoIterator<Item = u32>) {
        for tgid in tgids {
            if let Some(maps) = ProcessMaps::read(tgid).filter(|m| !m.mappings.is_empty()) {
                self.maps.insert(tgid, maps);
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
            Some(_) => "its addresses lie outside its mapped files (stacks walked without frame pointers)".into(),
        }
    }

    /// A sample's or blocked period's stack: process, thread, the stage zprof
    /// timed the thread in, user frames, kernel frames, outermost first.
    pub fn frames_of<T: std::borrow::Borrow<MapData>>(&mut self, key: &SampleKey, stacks: &StackTraceMap<T>) -> Vec<String> {
        let thread = requests::c_string(&key.comm);
        let process = self.names.get(&key.tgid).cloned().unwrap_or_else(|| thread.clone());
        let mut frames = vec![process];
        if thread != frames[0] {
            frames.push(thread);
        }
        // The stage the thread was in, measured, not walked: libzpool and libc
        // stacks lose their callers without frame pointers.
        if let Some(stage) = Stage::from_u32(key.pad & !OFFCPU_RUNNABLE) {
            frames.push(format!("[in {}]", stage_name(stage)));
        }
        let user = self.walked(stacks, key.user_stack, USER_LOST_FRAME);
        let kernel = self.walked(stacks, key.kernel_stack, KERNEL_LOST_FRAME);
        if user.len() + kernel.len() >= STACK_DEPTH as usize
            && (user.len() == STACK_DEPTH as usize || kernel.len() == STACK_DEPTH as usize)
        {
            frames.push(CUT_FRAME.into());
        }
        let maps = self.maps.get(&key.tgid);
        let first_user = frames.len();
        for address in user {
            frames.push(match address {
                Err(lost) => lost.into(),
                Ok(ip) => self.symbolizer.user(maps, ip),
            });
        }
        self.last_user_unknown = frames.len() > first_user && frames[first_user..].iter().all(|f| f == UNKNOWN_FRAME);
        for address in kernel {
            frames.push(match address {
                Err(lost) => lost.into(),
                Ok(ip) => self.symbolizer.kernel(ip),
            });
        }
        if key.pad & OFFCPU_RUNNABLE != 0 {
            frames.push(RUNNABLE_FRAME.into());
        }
        frames
    }

    /// The addresses of one stack, outermost first; a lost stack is one
    /// `Err(frame)`, no stack none.
    fn walked<T: std::borrow::Borrow<MapData>>(
        &self,
        stacks: &StackTraceMap<T>,
        id: i32,
        lost: &'static str,
    ) -> Vec<Result<u64, &'static str>> {
        if id == NO_STACK {
            return Vec::new();
        }
        match u32::try_from(id).ok().and_then(|id| stacks.get(&id, 0).ok()) {
            Some(trace) => trace.frames().iter().rev().map(|f| Ok(f.ip)).collect(),
            None => vec![Err(lost)],
        }
    }
}

/// A process whose sampled user stacks could not be named.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnnamedProcess {
    /// Its pid.
    pub pid: u32,
    /// Its name.
    pub name: String,
    /// Its samples with a user stack.
    pub samples: u64,
    /// Those whose user frames were all unknown.
    pub unnamed: u64,
    /// Why.
    pub why: String,
}

/// Sizes of the CPU sample maps, per generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleMapSizes {
    /// Stacks per stack map.
    pub stacks: u32,
    /// Keys per sample-count map.
    pub samples: u32,
}

/// Slots of the off-CPU stack map (about 35 MiB).
pub const OFFCPU_STACK_SLOTS: u32 = 65_536;

/// How often the idle generation is drained.
pub const DRAIN_PERIOD: std::time::Duration = std::time::Duration::from_millis(250);

impl SampleMapSizes {
    /// Sizes for `hz` samples per second on each of `cpus` CPUs. A drain period
    /// stores at most two stacks per sample; with 256 buckets per sample, a new
    /// stack finds its bucket taken less than 1% of the time even if no two
    /// samples share a stack. Capped at 65,536 stacks (35 MiB a generation),
    /// where the bound loosens past 999 Hz on 2 CPUs; losses are counted.
    pub fn for_rate(hz: u64, cpus: u64) -> SampleMapSizes {
        let per_period = (hz * cpus.max(1)).div_ceil(1_000 / DRAIN_PERIOD.as_millis() as u64).max(1);
        let stacks = (256 * per_period).next_power_of_two().clamp(4_096, 65_536) as u32;
        let samples = (4 * per_period).next_power_of_two().clamp(1_024, 65_536) as u32;
        SampleMapSizes { stacks, samples }
    }
}

/// The CPU sample maps of both generations, and what was drained from them.
pub struct SampleDrain {
    generation: Array<MapData, u32>,
    samples: [BpfHashMap<MapData, SampleKey, u64>; 2],
    stacks: [StackTraceMap<MapData>; 2],
    live: u32,
    /// Samples by named stack.
    pub merged: BTreeMap<Vec<String>, u64>,
    /// Per process: samples with a user stack, and those of them whose user
    /// frames were all unknown.
    user_samples: HashMap<u32, (u64, u64)>,
}

impl SampleDrain {
    /// Takes the sample maps out of the loaded object.
    pub fn new(ebpf: &mut aya::Ebpf) -> anyhow::Result<SampleDrain> {
        let mut take = |name: &str| -> anyhow::Result<Map> {
            ebpf.take_map(name).ok_or_else(|| anyhow::anyhow!("{name} missing from the eBPF object"))
        };
        Ok(SampleDrain {
            generation: Array::try_from(take("SAMPLE_GENERATION")?)?,
            samples: [BpfHashMap::try_from(take("SAMPLES_0")?)?, BpfHashMap::try_from(take("SAMPLES_1")?)?],
            stacks: [StackTraceMap::try_from(take("CPU_STACKS_0")?)?, StackTraceMap::try_from(take("CPU_STACKS_1")?)?],
            live: 0,
            merged: BTreeMap::new(),
            user_samples: HashMap::new(),
        })
    }

    /// Drains the idle generation (idle for a drain period: no program can
    /// still be writing to it), then makes it the live one.
    pub fn tick(&mut self, namer: &mut StackNamer) -> anyhow::Result<()> {
        self.drain_idle(namer)?;
        self.flip()
    }

    /// Drains both generations at the end.
    pub fn finish(&mut self, namer: &mut StackNamer) -> anyhow::Result<()> {
        for _ in 0..2 {
            self.flip()?;
            // A program that read the old generation finishes within microseconds.
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.drain_idle(namer)?;
        }
        Ok(())
    }

    /// Processes most of whose sampled user stacks could not be named: the
    /// process, its samples with a user stack, the unnamed ones, and why.
    pub fn unnamed_processes(&self, namer: &StackNamer) -> Vec<UnnamedProcess> {
        let mut out: Vec<UnnamedProcess> = self
            .user_samples
            .iter()
            .filter(|(_, (all, unnamed))| *unnamed * 2 > *all)
            .map(|(&tgid, &(samples, unnamed))| UnnamedProcess {
                pid: tgid,
                name: namer.names.get(&tgid).cloned().unwrap_or_default(),
                samples,
                unnamed,
                why: namer.why_unnamed(tgid),
            })
            .collect();
        out.sort_by_key(|p| std::cmp::Reverse(p.unnamed));
        out
    }

    fn flip(&mut self) -> anyhow::Result<()> {
        self.live ^= 1;
        self.generation.set(0, self.live, 0)?;
        Ok(())
    }

    fn drain_idle(&mut self, namer: &mut StackNamer) -> anyhow::Result<()> {
        let idle = (self.live ^ 1) as usize;
        let entries: Vec<(SampleKey, u64)> = self.samples[idle].iter().collect::<Result<_, _>>()?;
        let with_user_stacks: HashSet<u32> = entries.iter().filter(|(k, _)| k.user_stack >= 0).map(|(k, _)| k.tgid).collect();
        namer.refresh(with_user_stacks);
        for (key, count) in &entries {
            let frames = namer.frames_of(key, &self.stacks[idle]);
            if frames.iter().any(|f| f == CUT_FRAME) {
                namer.cut += count;
            }
            if key.user_stack >= 0 {
                let unnamed = namer.last_user_unknown;
                let counts = self.user_samples.entry(key.tgid).or_default();
                counts.0 += count;
                counts.1 += if unnamed { *count } else { 0 };
            }
            *self.merged.entry(frames).or_default() += count;
        }
        for (key, _) in &entries {
            let _ = self.samples[idle].remove(key);
        }
        let ids: Vec<u32> = self.stacks[idle].stack_ids().filter_map(Result::ok).collect();
        for id in ids {
            let _ = self.stacks[idle].remove(&id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_maps_grow_with_the_rate_within_bounds() {
        // 99 Hz on 2 CPUs: 50 samples a period, 100 stacks at most in 16,384 buckets.
        assert_eq!(SampleMapSizes::for_rate(99, 2), SampleMapSizes { stacks: 16_384, samples: 1_024 });
        assert_eq!(SampleMapSizes::for_rate(1, 1).stacks, 4_096);
        assert_eq!(SampleMapSizes::for_rate(999, 64).stacks, 65_536);
        let sizes = SampleMapSizes::for_rate(499, 2);
        assert!(sizes.stacks as u64 >= 2 * 100 * 250, "{sizes:?}");
    }
}
