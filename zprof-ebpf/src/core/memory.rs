//! Reading what the probed code holds: its arguments, and its memory (kernel
//! or user, per target) at offsets user space found for the traced build.

use aya_ebpf::{
    helpers::{bpf_probe_read_kernel, bpf_probe_read_user},
    programs::ProbeContext,
};
use zprof_common::counter;

use super::{
    config::{config_u32, is_kernel, offsets_valid},
    counters::bump,
};

/// Reads a value of the traced code's memory (kernel or user, per target), or
/// `fallback` when the read fails.
///
/// Returns a plain value, not an `Option`: with an `Option`, LLVM may compute on
/// the (undefined) payload of `None` and mask the result afterwards, leaving a
/// register the verifier sees as never written ("R1 !read_ok"). Kernels from
/// about 6.10 hide this by proving the counter lookup in `bump` non-null;
/// 6.1 rejected vdev_stat_entry_k (found in the qemu guest, issue 4).
#[inline(always)]
pub fn read_or<T>(addr: u64, fallback: T) -> T {
    if addr == 0 {
        return fallback;
    }
    let ptr = addr as *const T;
    let result = if is_kernel() {
        unsafe { bpf_probe_read_kernel(ptr) }
    } else {
        unsafe { bpf_probe_read_user(ptr) }
    };
    match result {
        Ok(value) => value,
        Err(_) => {
            bump(counter::READ_FAILED);
            fallback
        }
    }
}

/// Reads a pointer member at `offset` of the struct at `base`, if offsets are known.
#[inline(always)]
pub fn member_u64(base: u64, offset: &u32) -> u64 {
    if !offsets_valid() || base == 0 {
        return 0;
    }
    read_or::<u64>(base + config_u32(offset) as u64, 0)
}

/// A 4-byte member (an int, an enum, a boolean_t): reading 8 would take in
/// the next member too.
#[inline(always)]
pub fn member_u32(base: u64, offset: &u32) -> u32 {
    if !offsets_valid() || base == 0 {
        return 0;
    }
    read_or::<u32>(base + config_u32(offset) as u64, 0)
}

/// The `n`-th (0-based) integer argument in a register, or 0.
#[inline(always)]
pub fn arg(ctx: &ProbeContext, n: usize) -> u64 {
    ctx.arg::<u64>(n).unwrap_or(0)
}

/// The `n`-th integer argument (1-based, 7 or more: on the stack) at a
/// function's first instruction, x86-64: above the return address.
#[inline(always)]
pub fn stack_arg(ctx: &ProbeContext, n: u64) -> u64 {
    let sp = unsafe { (*ctx.regs).rsp };
    read_or::<u64>(sp + 8 * (n - 6), 0)
}
