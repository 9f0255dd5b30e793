//! How programs are declared: a program is a thin wrapper that runs its
//! handler (`try_<name>`) and counts the failure the handler returns.
//!
//! One set of handlers serves both targets. The macros emit each handler's
//! program twice, once in a `kprobe`/`kretprobe` section (zfs.ko) and once in
//! a `uprobe`/`uretprobe` section (libzpool), because aya picks the attach
//! method from the section. Program names end in `_k` or `_u`; user space
//! loads only one kind, and finds each program by that name.

use super::counters::bump;

/// Runs `handler` and bumps the counter it returns on failure.
///
/// Not `#[inline(always)]`: both programs of a pair call the same instance,
/// which LLVM may keep as one BPF subprogram rather than copy the handler into
/// each. The handlers themselves are `#[inline(always)]`, because the BPF
/// backend cannot return a `Result` from a called function ("aggregate
/// returns are not supported").
pub fn run<C>(ctx: &C, handler: impl FnOnce(&C) -> Result<(), u32>) {
    if let Err(counter) = handler(ctx) {
        bump(counter);
    }
}

/// Emits each entry handler as a kprobe (`<name>_k`) and a uprobe (`<name>_u`).
macro_rules! entry_programs {
    ($($kname:ident, $uname:ident => $handler:ident;)*) => {$(
        #[::aya_ebpf::macros::kprobe]
        pub fn $kname(ctx: ::aya_ebpf::programs::ProbeContext) -> u32 {
            $crate::core::programs::run(&ctx, $handler);
            0
        }
        #[::aya_ebpf::macros::uprobe]
        pub fn $uname(ctx: ::aya_ebpf::programs::ProbeContext) -> u32 {
            $crate::core::programs::run(&ctx, $handler);
            0
        }
    )*};
}

/// Emits each return handler as a kretprobe and a uretprobe.
macro_rules! return_programs {
    ($($kname:ident, $uname:ident => $handler:ident;)*) => {$(
        #[::aya_ebpf::macros::kretprobe]
        pub fn $kname(ctx: ::aya_ebpf::programs::RetProbeContext) -> u32 {
            $crate::core::programs::run(&ctx, $handler);
            0
        }
        #[::aya_ebpf::macros::uretprobe]
        pub fn $uname(ctx: ::aya_ebpf::programs::RetProbeContext) -> u32 {
            $crate::core::programs::run(&ctx, $handler);
            0
        }
    )*};
}

pub(crate) use {entry_programs, return_programs};
