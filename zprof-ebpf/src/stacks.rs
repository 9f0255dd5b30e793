//! Stacks: the on-CPU sampler, and the stack maps it and the off-CPU tracer
//! store their stacks in.
//!
//! A stack map keeps one stack per hash bucket and refuses a new stack whose
//! bucket holds another (-EEXIST): the share of samples lost grows with the
//! stacks the map holds, and once it is full every new stack is lost. So CPU
//! samples go to one of two generations of maps (`SAMPLES_n`, `CPU_STACKS_n`),
//! chosen by `STACK_GENERATION`: user space reads and empties the idle
//! generation every 250 ms and then makes it the live one. The maps then only
//! ever hold a quarter second of stacks, and user space sizes them from the
//! sample rate so that a new stack finds its bucket taken less than 1% of the
//! time (see `SampleMapSizes` in zprof's stacks.rs).
//!
//! Off-CPU stacks use the same generations (`offcpu.rs`): a blocked
//! period's key carries the generation its stacks were stored in.
//!
//! Stacks are capped at [`STACK_DEPTH`] frames by the maps' value size; the
//! innermost frames are kept, and user space marks stacks that reach the cap.

use core::cell::UnsafeCell;

use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_NOEXIST, bpf_map_def, bpf_map_type::BPF_MAP_TYPE_STACK_TRACE},
    cty::c_void,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_stackid},
    macros::{map, perf_event},
    maps::{Array, HashMap},
    programs::PerfEventContext,
};
use zprof_common::{STACK_DEPTH, SampleKey, counter};

use crate::{CONFIG, bump, config_u32, is_kernel, is_tracked, is_zfs_kernel_thread};

/// A stack-trace map whose stacks hold at most [`STACK_DEPTH`] frames (aya's
/// `StackTrace` always holds 127: twice the memory, and towers of garbage).
#[repr(transparent)]
pub struct CappedStacks(UnsafeCell<bpf_map_def>);

unsafe impl Sync for CappedStacks {}

impl CappedStacks {
    /// A map of `max_entries` stacks (user space may resize it at load).
    pub const fn with_max_entries(max_entries: u32) -> Self {
        CappedStacks(UnsafeCell::new(bpf_map_def {
            type_: BPF_MAP_TYPE_STACK_TRACE,
            key_size: 4,
            value_size: STACK_DEPTH * 8,
            max_entries,
            map_flags: 0,
            id: 0,
            pinning: 0,
        }))
    }

    fn as_ptr(&self) -> *mut c_void {
        self.0.get().cast()
    }
}

/// Which generation of the sample and off-CPU stack maps is live (its low
/// bit); user space counts it up every 250 ms.
#[map]
static STACK_GENERATION: Array<u32> = Array::with_max_entries(1, 0);

/// The live generation (see `STACK_GENERATION`).
#[inline(always)]
pub fn generation() -> u32 {
    STACK_GENERATION.get(0).copied().unwrap_or(0)
}

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

/// The current thread's user and kernel stack ids in `stacks`, or negative
/// errors; a lost stack is counted in `lost` once however many of the two
/// were lost.
#[inline(always)]
pub fn stack_ids<C: EbpfContext>(ctx: &C, stacks: &CappedStacks, lost: u32) -> (i32, i32) {
    const BPF_F_USER_STACK: u64 = 1 << 8;
    // -EFAULT: no stack of that kind (a kernel thread's user stack, a sample
    // taken in user mode's kernel stack); anything else is a loss.
    const EFAULT: i32 = -14;
    let user = unsafe { bpf_get_stackid(ctx.as_ptr(), stacks.as_ptr(), BPF_F_USER_STACK) } as i32;
    let kernel = unsafe { bpf_get_stackid(ctx.as_ptr(), stacks.as_ptr(), 0) } as i32;
    if (user < 0 && user != EFAULT) || (kernel < 0 && kernel != EFAULT) {
        bump(lost);
    }
    (user, kernel)
}

/// On-CPU samples (perf event at a fixed frequency on each CPU): user and kernel
/// stacks of the traced processes, and on the kernel target of ZFS's threads,
/// with the stage zprof is timing the thread in (as for off-CPU time).
#[perf_event]
pub fn sample_cpu(ctx: PerfEventContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if tgid == 0 {
        return 0; // idle
    }
    let comm = bpf_get_current_comm().unwrap_or([0; 16]);
    if config_u32(&CONFIG.filter_tgid) != 0
        && !is_tracked(tgid)
        && !(is_kernel() && is_zfs_kernel_thread(&comm))
    {
        return 0;
    }
    bump(counter::SAMPLES);
    let stage = crate::offcpu::timed_stage(pid_tgid & 0xffff_ffff);
    let generation = generation();
    // Two calls, one per generation: each must name its maps as constants.
    if generation & 1 == 0 {
        count_sample(
            &ctx,
            &CPU_STACKS_0,
            &SAMPLES_0,
            SampleKey {
                tgid,
                pad: stage,
                comm,
                ..SampleKey::default()
            },
        );
    } else {
        count_sample(
            &ctx,
            &CPU_STACKS_1,
            &SAMPLES_1,
            SampleKey {
                tgid,
                pad: stage,
                comm,
                ..SampleKey::default()
            },
        );
    }
    0
}

#[inline(always)]
fn count_sample(
    ctx: &PerfEventContext,
    stacks: &CappedStacks,
    samples: &HashMap<SampleKey, u64>,
    mut key: SampleKey,
) {
    (key.user_stack, key.kernel_stack) = stack_ids(ctx, stacks, counter::STACK_LOST);
    if let Some(count) = samples.get_ptr_mut(&key) {
        unsafe { *count += 1 };
        return;
    }
    if samples.insert(&key, &1, BPF_NOEXIST as u64).is_ok() {
        return;
    }
    // Another CPU inserted the same key first; or the map is full.
    match samples.get_ptr_mut(&key) {
        Some(count) => unsafe { *count += 1 },
        None => bump(counter::SAMPLE_MAP_FULL),
    }
}
