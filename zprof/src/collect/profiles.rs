//! The CPU and off-CPU profiles of a recording: the stacks the drainer
//! collected (see [`crate::collect::stacks`]), named, with the counters that
//! say what the stack maps could not keep.

use crate::{
    collect::{
        losses::Counters,
        stacks::{self, StackNamer},
    },
    recording::{CpuProfile, CpuStack, OffCpuProfile},
};
use zprof_common::counter;

/// The CPU profile of the samples drained, at `frequency_hz`.
pub fn cpu_profile(
    samples: &mut stacks::SampleMaps,
    namer: &mut StackNamer,
    counters: &Counters,
    frequency_hz: u64,
) -> CpuProfile {
    let named = stacks::name_all(std::mem::take(&mut samples.raw), namer);
    CpuProfile {
        frequency_hz,
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
}

/// The off-CPU profile of the blocked time drained, in microseconds (stacks
/// blocked for less than one are left out).
pub fn offcpu_profile(
    offcpu: &mut stacks::OffCpuMaps,
    namer: &mut StackNamer,
    counters: &Counters,
) -> OffCpuProfile {
    let named = stacks::name_all(std::mem::take(&mut offcpu.raw), namer);
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
}
