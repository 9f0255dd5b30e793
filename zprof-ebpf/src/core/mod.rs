//! What the program families share: the load-time configuration, the loss
//! counters, reads of the traced code's memory, the in-flight spans and the
//! histograms they end in, and the few maps where families meet (pool names
//! and commit windows, which threads are inside ZFS, stored stacks).
//!
//! The rule that keeps the crate readable as a pipeline: a family module
//! (`pipeline`, `vdev`, `zil`, ...) uses only `core` and zprof-common, never
//! another family. State that two families share lives here with the
//! accessors they need; state one family owns stays in its module.
//!
//! Failures are counted in one of two ways. A helper that carries on after a
//! failure (a read that falls back to 0, a histogram entry a full map
//! refused, a stack that was lost) bumps its counter itself, because the
//! handler goes on. A failure that is a handler's outcome (its span not
//! opened, its event not sent) is the `Err` of the handler's `try_` function,
//! which [`programs::run`] counts.

pub mod config;
pub mod counters;
pub mod memory;
pub mod pools;
pub mod programs;
pub mod record;
pub mod spans;
pub mod stack_maps;
pub mod threads;
pub mod timed;
pub mod tracked;
