//! Analyses of a recording: the findings and what-ifs, the sync-write and read
//! paths, zvol blocks, the leaf I/O per top-level vdev, the benchmark's
//! phases, and compare's arithmetic (with the SLOG what-if checked against a
//! run that had a log device). They read recordings only, never the collectors.

pub mod cache_what_if;
pub mod compare;
pub mod findings;
pub mod live;
pub mod phases;
pub mod read_path;
pub mod settings;
pub mod slog_check;
pub mod sync_path;
pub mod top_vdevs;
pub mod waited_for;
pub mod zvol_blocks;
