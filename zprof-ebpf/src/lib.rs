//! Empty library target: lets zprof depend on this crate in build.rs so cargo
//! rebuilds zprof when the eBPF programs change (the programs are the binary
//! target: main.rs and its modules).
#![no_std]
