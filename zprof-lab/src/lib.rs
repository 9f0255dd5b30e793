//! zprof-lab: a user-space OpenZFS pool (libzpool) on sparse files whose
//! "disks" follow device models, driven by fio-style jobs.
//!
//! It exists so that zprof's tracing can be checked against known truths: the
//! lab reports exactly how many zil_commit and spa_sync calls it caused, and
//! reproduces known performance shapes (e.g. the fsync collapse on RAID-Z).
//! The binary is thin (`main.rs`); the report types ([`report`]) are public so
//! that zprof can parse the lab's JSON output.
//!
//! Layering: `options` (pure parsing) -> `model` (device models and their
//! hooks) -> `lab` (safe wrappers over the C core in `csrc/`) -> `job`
//! (workload engine) -> `runner` (plans) -> `output`/`scenario` (presentation).

#![warn(missing_docs)]

pub mod cli;
#[allow(missing_docs, reason = "raw mirror of csrc/zlab.h, documented there")]
pub mod ffi;
pub mod job;
pub mod lab;
pub mod model;
pub mod options;
pub mod output;
pub mod report;
pub mod runner;
pub mod scenario;

/// The OpenZFS release this binary was built against (its libzpool is the one
/// it maps): the system's 2.1.11 by default, another with `ZPROF_LAB_OPENZFS`
/// at build time (see build.rs).
pub const OPENZFS: &str = env!("ZPROF_LAB_OPENZFS");

/// `zprof-lab --version`: the lab's version and the OpenZFS it runs on.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (OpenZFS ",
    env!("ZPROF_LAB_OPENZFS"),
    ")"
);
