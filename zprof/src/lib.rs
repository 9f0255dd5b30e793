//! zprof: per-stage latency of OpenZFS's I/O path, measured with eBPF.
//!
//! The binary is thin (`main.rs`); everything testable lives here, in the
//! pipeline's order, each layer importing only the ones before it:
//! [`zfs`] is what zprof knows about OpenZFS builds (releases, the probe
//! catalogue, symbols, struct offsets, the target); [`collect`] loads and
//! attaches the eBPF programs and reads their maps into a [`recording`], the
//! saved JSON model; [`analyze`] turns a recording into findings and what-ifs;
//! [`render`] formats recordings and findings (report, flame graphs,
//! exposition); [`cli`] is the subcommands. Collectors and analyses meet only
//! in the recording; [`units`] are the number formats every layer may use.
#![deny(missing_docs)]

pub mod analyze;
pub mod cli;
pub mod collect;
pub mod recording;
pub mod render;
pub mod units;
pub mod zfs;
