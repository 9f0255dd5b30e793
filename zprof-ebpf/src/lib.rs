//! Empty library target: lets zprof depend on this crate in build.rs so cargo
//! rebuilds zprof when the eBPF programs change (the programs are in main.rs).
#![no_std]
