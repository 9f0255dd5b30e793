//! zprof: per-stage latency of OpenZFS's I/O path, measured with eBPF.
//!
//! The binary is thin (`main.rs`); everything testable lives here:
//! [`target`] chooses and checks what to trace, [`catalogue`] says which
//! functions each stage probes, [`offsets`] finds struct layouts (for a zfs.ko
//! without BTF, [`kernel_offsets`] compiles them from its build tree), [`tracer`]
//! attaches and collects, [`recording`] is the saved result, [`report`] renders it.
#![deny(missing_docs)]

pub mod bench;
pub mod btf;
pub mod cache_what_if;
pub mod catalogue;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod elf;
pub mod explain;
pub mod exposition;
pub mod flamegraph;
pub mod kernel_offsets;
pub mod multi_link;
pub mod offsets;
pub mod openzfs;
pub mod read_path;
pub mod recording;
pub mod report;
pub mod requests;
pub mod serve;
pub mod stacks;
pub mod symbols;
pub mod sync_path;
pub mod target;
pub mod top;
pub mod top_vdevs;
pub mod tracer;
pub mod zfs_names;
pub mod zvol_blocks;
