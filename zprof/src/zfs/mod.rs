//! What zprof knows about OpenZFS builds, before anything is attached: the
//! releases and what moved between them, the catalogue of probed functions,
//! OpenZFS's names for classes and states, ELF and symbol lookup, the target
//! (zfs.ko or libzpool) and the struct offsets of a build.

pub mod catalogue;
pub mod elf;
pub mod names;
pub mod offsets;
pub mod releases;
pub mod symbols;
pub mod target;
pub mod tunables;
