//! Collecting: loading zprof's eBPF object with a target's configuration,
//! attaching its programs, and reading their maps into a recording.
//!
//! [`session`] composes the steps; each other module decides or reads one
//! thing: the load-time configuration (`load`, `tracepoints`), which
//! points attach and why the others do not (`attach_plan`), the attaching
//! (`attach`, [`multi_link`]), and one reader per kind of data the maps
//! hold (`histograms`, `timeline`, `events`, `losses`, `cost`,
//! `request_rows`, `pools`, [`stacks`], `profiles`).

mod attach;
mod attach_plan;
mod clock;
mod cost;
mod events;
mod histograms;
mod load;
mod losses;
pub mod multi_link;
mod options;
mod pools;
mod profiles;
mod request_rows;
pub mod session;
pub mod stacks;
mod timeline;
mod tracepoints;

#[cfg(test)]
mod real_builds;
