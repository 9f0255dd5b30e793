//! Build script: compiles the small C core (`csrc/zlab.c`) against the OpenZFS
//! user-space headers with the flags that reproduce libzpool's own struct layouts
//! (libzpool is built with DEBUG and ZFS_DEBUG, which change them), links libzpool,
//! and exports from the binary the symbols that must override libzpool's own.

use std::path::Path;

/// Symbols the executable defines to take the place of libzpool's (libzpool calls them
/// through its PLT, so the executable's definition wins once it is in the dynamic table).
const OVERRIDES: &[&str] = &["zio_delay_interrupt", "zfs_file_fsync", "zil_commit", "spa_sync"];

fn main() {
    println!("cargo:rerun-if-changed=csrc/zlab.c");
    println!("cargo:rerun-if-changed=csrc/zlab.h");
    for dir in ["/usr/include/libspl", "/usr/include/libzfs"] {
        if !Path::new(dir).is_dir() {
            println!(
                "cargo:warning={dir} is missing: install libzfslinux-dev (Debian contrib) to build zprof-lab"
            );
        }
    }
    cc::Build::new()
        .file("csrc/zlab.c")
        .include("/usr/include/libspl")
        .include("/usr/include/libzfs")
        .define("_GNU_SOURCE", None)
        .define("_REENTRANT", None)
        .define("_FILE_OFFSET_BITS", "64")
        .define("_LARGEFILE64_SOURCE", None)
        .define("DEBUG", None)
        .define("ZFS_DEBUG", None)
        .flag("-UNDEBUG")
        // The OpenZFS headers are not warning-clean (e.g. _NOTE is defined twice).
        .flag("-w")
        .compile("zlab");
    for lib in ["zpool", "nvpair", "uutil"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for sym in OVERRIDES {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
    }
}
