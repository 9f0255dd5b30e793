//! The on-CPU sampler: a perf event at a fixed frequency on each CPU counts
//! the user and kernel stacks of the traced processes (and, on the kernel
//! target, of ZFS's threads), with the timed stage the thread is in.
//!
//! Samples go to the live generation of `SAMPLES_n` and `CPU_STACKS_n` (see
//! `core::stack_maps`). User space sizes the maps from the sample rate so
//! that a new stack finds its bucket taken less than 1% of the time (see
//! `SampleMapSizes` in zprof's stacks module).

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::{map, perf_event},
    maps::HashMap,
    programs::PerfEventContext,
};
use zprof_common::{SampleKey, counter};

use crate::core::{
    counters::bump,
    programs::run,
    stack_maps::{CappedStacks, generation, stack_ids},
    timed::timed_stage,
    tracked::samples_wanted,
};

/// Stacks of CPU samples, generation 0 and 1. Sizes set from the sample rate.
#[map]
static CPU_STACKS_0: CappedStacks = CappedStacks::with_max_entries(16384);
#[map]
static CPU_STACKS_1: CappedStacks = CappedStacks::with_max_entries(16384);

/// CPU sample counts by process, thread name and stacks, generation 0 and 1.
#[map]
static SAMPLES_0: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, 0);
#[map]
static SAMPLES_1: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, 0);

/// On-CPU samples: user and kernel stacks of the traced processes, and on
/// the kernel target of ZFS's threads, with the stage zprof is timing the
/// thread in (as for off-CPU time).
#[perf_event]
pub fn sample_cpu(ctx: PerfEventContext) -> u32 {
    run(&ctx, try_sample_cpu);
    0
}

#[inline(always)]
fn try_sample_cpu(ctx: &PerfEventContext) -> Result<(), u32> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if tgid == 0 {
        return Ok(()); // idle
    }
    let comm = bpf_get_current_comm().unwrap_or([0; 16]);
    if !samples_wanted(tgid, &comm) {
        return Ok(());
    }
    bump(counter::SAMPLES);
    let stage = timed_stage(pid_tgid & 0xffff_ffff);
    let generation = generation();
    // Two calls, one per generation: each must name its maps as constants.
    if generation & 1 == 0 {
        count_sample(
            ctx,
            &CPU_STACKS_0,
            &SAMPLES_0,
            SampleKey {
                tgid,
                pad: stage,
                comm,
                ..SampleKey::default()
            },
        )
    } else {
        count_sample(
            ctx,
            &CPU_STACKS_1,
            &SAMPLES_1,
            SampleKey {
                tgid,
                pad: stage,
                comm,
                ..SampleKey::default()
            },
        )
    }
}

/// Counts one sample under `key` with the current stacks; a full `samples`
/// map is the error.
#[inline(always)]
fn count_sample(
    ctx: &PerfEventContext,
    stacks: &CappedStacks,
    samples: &HashMap<SampleKey, u64>,
    mut key: SampleKey,
) -> Result<(), u32> {
    (key.user_stack, key.kernel_stack) = stack_ids(ctx, stacks, counter::STACK_LOST);
    if let Some(count) = samples.get_ptr_mut(&key) {
        unsafe { *count += 1 };
        return Ok(());
    }
    if samples.insert(&key, &1, BPF_NOEXIST as u64).is_ok() {
        return Ok(());
    }
    // Another CPU inserted the same key first; or the map is full.
    match samples.get_ptr_mut(&key) {
        Some(count) => {
            unsafe { *count += 1 };
            Ok(())
        }
        None => Err(counter::SAMPLE_MAP_FULL),
    }
}
