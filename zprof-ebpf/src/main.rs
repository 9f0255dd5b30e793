//! zprof's eBPF programs: per-stage latency of OpenZFS's I/O path.
//!
//! One set of programs serves both targets: each probed function gets an
//! entry handler (and a return handler when its duration matters), emitted
//! as a kprobe (zfs.ko, names ending in `_k`) and a uprobe (libzpool, `_u`);
//! user space loads only one kind (see `core::programs`).
//!
//! Aggregation happens here, in per-CPU histograms keyed by stage, class, pool
//! and vdev: summing in the kernel costs nothing in user space and cannot lose
//! events. Only spa_sync, a few times a second, and slow requests stream
//! through the ring buffer, because they matter one by one. Everything that
//! can go wrong (full maps, unmatched returns, failed reads) is counted.
//!
//! The modules follow the pipeline, one per program family; each uses only
//! `core` (see there), never another family:
//! - `filter`: follows the forks of traced processes;
//! - `workload`: the workload's reads and writes and the write throttle;
//! - `arc`: reads through the ARC and from disk;
//! - `pipeline`: compression, checksums and dedup lookups;
//! - `dedup`: dedup's table sync and fast dedup's log;
//! - `vdev`: leaf vdev I/O, queue and disk time;
//! - `flush`: leaf cache flushes;
//! - `zil`: zil_commit and its log blocks;
//! - `txg`: spa_sync, txg waits, pools going away;
//! - `requests`: file and zvol requests (kernel target);
//! - `stacks`, `offcpu`: on-CPU samples and blocked time, with stacks.
#![no_std]
#![no_main]
// atomic_xadd for maps all CPUs add to (core::record::atomic_add); the eBPF
// build is nightly anyway.
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod core;

mod alloc;
mod arc;
mod dedup;
mod filter;
mod flush;
mod offcpu;
mod pipeline;
mod recv;
mod requests;
mod stacks;
mod sync_phases;
mod txg;
mod txg_history;
mod vdev;
mod workload;
mod zil;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &::core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
