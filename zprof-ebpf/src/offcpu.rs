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

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::HashMap,
    programs::TracePointContext,
};
use zprof_common::{OffCpuStart, SampleKey, Stage, counter};

use crate::{
    CONFIG, INFLIGHT, bump, config_u32, is_kernel, is_tracked, is_zfs_kernel_thread, span_key,
    stacks::{CappedStacks, stack_ids},
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

pub use zprof_common::OFFCPU_RUNNABLE as RUNNABLE;

#[tracepoint]
pub fn offcpu_switch(ctx: TracePointContext) -> u32 {
    let now = unsafe { bpf_ktime_get_ns() };
    switched_out(&ctx, now);
    let next_offset = config_u32(&CONFIG.switch_next_pid_offset) as usize;
    if let Ok(next) = unsafe { ctx.read_at::<i32>(next_offset) } {
        switched_in(next as u32, now);
    }
    0
}

/// The current thread leaves the CPU: if it is traced and blocks, keep where.
#[inline(always)]
fn switched_out(ctx: &TracePointContext, now: u64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tid, tgid) = (pid_tgid as u32, (pid_tgid >> 32) as u32);
    if tgid == 0 {
        return;
    }
    let state_offset = config_u32(&CONFIG.switch_prev_state_offset) as usize;
    // prev_state is a long on 6.x kernels; its low bits hold the state. A
    // preempted thread reads TASK_REPORT_MAX (0x100), a runnable one 0: no
    // sleeping state bit in the low byte either way.
    let state = unsafe { ctx.read_at::<u32>(state_offset) }.unwrap_or(0);
    let runnable = if state & 0xff == 0 { RUNNABLE } else { 0 };
    let comm = bpf_get_current_comm().unwrap_or([0; 16]);
    if config_u32(&CONFIG.filter_tgid) != 0
        && !is_tracked(tgid)
        && !(is_kernel() && is_zfs_kernel_thread(&comm))
    {
        return;
    }
    bump(counter::OFFCPU_PERIODS);
    let generation = crate::stacks::generation();
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
    if OFFCPU_STARTS.insert(&tid, &start, 0).is_err() {
        bump(counter::OFFCPU_START_FULL);
    }
}

/// The innermost timed stage thread `tid` is in (0: none): stacks walked
/// through code without frame pointers (libzpool, libc) lose their callers,
/// and this says what the thread was waiting in all the same.
#[inline(always)]
pub fn timed_stage(tid: u64) -> u32 {
    // Innermost first: zil_commit can wait for a txg; a write waits in the throttle.
    const ORDER: [Stage; 7] = [
        Stage::TxgWaitSynced,
        Stage::TxWait,
        Stage::ZilCommit,
        Stage::TxAssign,
        Stage::SpaSync,
        Stage::WorkloadWrite,
        Stage::WorkloadRead,
    ];
    for stage in ORDER {
        if unsafe { INFLIGHT.get(&span_key(stage, tid)) }.is_some() {
            return stage as u32;
        }
    }
    0
}

/// Thread `tid` comes back: its blocked time goes to the stacks it left with.
#[inline(always)]
fn switched_in(tid: u32, now: u64) {
    let Some(start) = (unsafe { OFFCPU_STARTS.get(&tid) }).copied() else {
        return;
    };
    let _ = OFFCPU_STARTS.remove(&tid);
    let blocked = now.saturating_sub(start.start_ns);
    match OFFCPU.get_ptr_mut(&start.key) {
        Some(total) => crate::requests::atomic_add(unsafe { &mut *total }, blocked),
        None => {
            if OFFCPU
                .insert(&start.key, &blocked, BPF_NOEXIST as u64)
                .is_err()
            {
                match OFFCPU.get_ptr_mut(&start.key) {
                    Some(total) => crate::requests::atomic_add(unsafe { &mut *total }, blocked),
                    None => bump(counter::OFFCPU_MAP_FULL),
                }
            }
        }
    }
}
