//! Off-CPU time: where the traced threads are blocked, with their stacks.
//!
//! sched:sched_switch runs in the context of the thread leaving the CPU. When
//! a traced thread leaves it, its stacks and the time are kept by thread id;
//! when that thread is switched in again (it is next_pid of a later switch),
//! the time it was away is added to its stacks' total in the kernel. A slow
//! fsync then shows where it waited (zil_commit's cv_wait, txg_wait_synced,
//! the throttle) as time, not as samples. A thread that left the CPU still
//! runnable (preempted, or woken before it was switched out) waited for a CPU,
//! not for ZFS: its periods carry [`RUNNABLE`] so the graph marks them.
//!
//! Stacks go to the live generation of `OFFCPU_STACKS_n` (see
//! `core::stack_maps`): a blocked period's key carries the generation its
//! stacks were stored in.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::HashMap,
    programs::TracePointContext,
};
use zprof_common::{OFFCPU_RUNNABLE as RUNNABLE, OffCpuStart, SampleKey, counter};

use crate::core::{
    config::{CONFIG, config_u32},
    counters::bump,
    programs::run,
    record::atomic_add,
    stack_maps::{CappedStacks, generation, stack_ids},
    timed::timed_stage,
    tracked::samples_wanted,
};

/// Blocked time (ns) by process, thread name and stacks.
#[map]
static OFFCPU: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, 0);

/// Stacks of blocked threads, generation 0 and 1, drained every 250 ms like
/// the CPU samples'. A thread blocked across drains keeps the generation of
/// its stacks in its key; user space keeps a copy of the stacks of threads
/// still blocked when it empties a generation.
#[map]
static OFFCPU_STACKS_0: CappedStacks = CappedStacks::with_max_entries(16384);
#[map]
static OFFCPU_STACKS_1: CappedStacks = CappedStacks::with_max_entries(16384);

/// Threads blocked now, by thread id: since when, and where.
#[map]
static OFFCPU_STARTS: HashMap<u32, OffCpuStart> = HashMap::with_max_entries(16384, 0);

/// sched:sched_switch: the thread leaving the CPU, then the one coming in.
/// Each half counts its own failure.
#[tracepoint]
pub fn offcpu_switch(ctx: TracePointContext) -> u32 {
    let now = unsafe { bpf_ktime_get_ns() };
    run(&ctx, |ctx| try_switched_out(ctx, now));
    run(&ctx, |ctx| try_switched_in(ctx, now));
    0
}

/// The current thread leaves the CPU: if it is traced and blocks, keep where.
#[inline(always)]
fn try_switched_out(ctx: &TracePointContext, now: u64) -> Result<(), u32> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tid, tgid) = (pid_tgid as u32, (pid_tgid >> 32) as u32);
    if tgid == 0 {
        return Ok(());
    }
    let state_offset = config_u32(&CONFIG.switch_prev_state_offset) as usize;
    // prev_state is a long on 6.x kernels; its low bits hold the state. A
    // preempted thread reads TASK_REPORT_MAX (0x100), a runnable one 0: no
    // sleeping state bit in the low byte either way.
    let state = unsafe { ctx.read_at::<u32>(state_offset) }.unwrap_or(0);
    let runnable = if state & 0xff == 0 { RUNNABLE } else { 0 };
    let comm = bpf_get_current_comm().unwrap_or([0; 16]);
    if !samples_wanted(tgid, &comm) {
        return Ok(());
    }
    bump(counter::OFFCPU_PERIODS);
    let generation = generation();
    // One call per generation: each must name its map as a constant.
    let (user_stack, kernel_stack) = if generation & 1 == 0 {
        stack_ids(ctx, &OFFCPU_STACKS_0, counter::OFFCPU_STACK_LOST)
    } else {
        stack_ids(ctx, &OFFCPU_STACKS_1, counter::OFFCPU_STACK_LOST)
    };
    let stage = timed_stage(tid as u64) | runnable;
    let key = SampleKey {
        tgid,
        user_stack,
        kernel_stack,
        pad: stage,
        comm,
        generation,
        reserved: 0,
    };
    let start = OffCpuStart { start_ns: now, key };
    OFFCPU_STARTS
        .insert(&tid, &start, 0)
        .map_err(|_| counter::OFFCPU_START_FULL)
}

/// The thread switched in (next_pid) comes back: its blocked time goes to
/// the stacks it left with.
#[inline(always)]
fn try_switched_in(ctx: &TracePointContext, now: u64) -> Result<(), u32> {
    let next_offset = config_u32(&CONFIG.switch_next_pid_offset) as usize;
    let Ok(next) = (unsafe { ctx.read_at::<i32>(next_offset) }) else {
        return Ok(());
    };
    let tid = next as u32;
    let Some(start) = (unsafe { OFFCPU_STARTS.get(&tid) }).copied() else {
        return Ok(());
    };
    let _ = OFFCPU_STARTS.remove(&tid);
    let blocked = now.saturating_sub(start.start_ns);
    if let Some(total) = OFFCPU.get_ptr_mut(&start.key) {
        atomic_add(unsafe { &mut *total }, blocked);
        return Ok(());
    }
    if OFFCPU
        .insert(&start.key, &blocked, BPF_NOEXIST as u64)
        .is_ok()
    {
        return Ok(());
    }
    // Another CPU inserted the same key first; or the map is full.
    match OFFCPU.get_ptr_mut(&start.key) {
        Some(total) => {
            atomic_add(unsafe { &mut *total }, blocked);
            Ok(())
        }
        None => Err(counter::OFFCPU_MAP_FULL),
    }
}
