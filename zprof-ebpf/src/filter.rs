//! The process filter's program: with `--pid` or a command, processes the
//! traced ones fork are traced too (fio and ztest fork their workers). Which
//! calls count is decided by `core::tracked`.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};

use crate::core::{
    config::{CONFIG, config_u32},
    programs::run,
    tracked::{is_tracked, track},
};

/// task:task_newtask: new processes forked by a tracked process are tracked too.
#[tracepoint]
pub fn track_fork(ctx: TracePointContext) -> u32 {
    run(&ctx, try_track_fork);
    0
}

/// Runs in the parent's context. Threads (CLONE_THREAD) share their
/// process's tgid, which is already tracked, so they are not added. Record
/// offsets differ between kernels; user space reads them from the
/// tracepoint's format file.
#[inline(always)]
fn try_track_fork(ctx: &TracePointContext) -> Result<(), u32> {
    const CLONE_THREAD: u64 = 0x0001_0000;
    if config_u32(&CONFIG.filter_tgid) == 0 {
        return Ok(());
    }
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !is_tracked(parent) {
        return Ok(());
    }
    let flags_offset = config_u32(&CONFIG.newtask_flags_offset) as usize;
    let pid_offset = config_u32(&CONFIG.newtask_pid_offset) as usize;
    let Ok(flags) = (unsafe { ctx.read_at::<u64>(flags_offset) }) else {
        return Ok(());
    };
    if flags & CLONE_THREAD != 0 {
        return Ok(());
    }
    match unsafe { ctx.read_at::<u32>(pid_offset) } {
        Ok(child) => track(child),
        Err(_) => Ok(()),
    }
}
