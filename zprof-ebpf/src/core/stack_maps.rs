//! Stack storage shared by the on-CPU sampler (`stacks`) and the off-CPU
//! tracer (`offcpu`): the capped stack-trace map type, the generation switch
//! both follow, and the stack-id lookup both use.
//!
//! A stack map keeps one stack per hash bucket and refuses a new stack whose
//! bucket holds another (-EEXIST): the share of stacks lost grows with the
//! stacks the map holds, and once it is full every new stack is lost. So each
//! kind of stack goes to one of two generations of maps, chosen by
//! `STACK_GENERATION`: user space reads and empties the idle generation every
//! 250 ms and then makes it the live one. The maps then only ever hold a
//! quarter second of stacks.
//!
//! Stacks are capped at [`STACK_DEPTH`] frames by the maps' value size; the
//! innermost frames are kept, and user space marks stacks that reach the cap.

use core::cell::UnsafeCell;

use aya_ebpf::{
    EbpfContext,
    bindings::{bpf_map_def, bpf_map_type::BPF_MAP_TYPE_STACK_TRACE},
    cty::c_void,
    helpers::bpf_get_stackid,
    macros::map,
    maps::Array,
};
use zprof_common::STACK_DEPTH;

use super::counters::bump;

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
