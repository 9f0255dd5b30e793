//! Build script: compiles the small C core (`csrc/zlab.c`) against the OpenZFS
//! user-space headers with the flags that reproduce libzpool's own struct layouts
//! (libzpool is built with DEBUG and ZFS_DEBUG, which change them), links libzpool,
//! and exports from the binary the symbols that must override libzpool's own.
//!
//! Which OpenZFS: the system's (Debian 12's libzfslinux-dev and libzpool5linux,
//! 2.1.11) by default; with `ZPROF_LAB_OPENZFS=X.Y.Z`, the release that
//! `scripts/setup.sh` unpacked into `$ZPROF_CACHE/openzfs/X.Y.Z` (libzpool6linux
//! cannot be installed beside libzpool5linux), linked with a run path to it.
//! Build each release into its own target directory (`cargo xtask` does).

use std::path::{Path, PathBuf};

/// Symbols the executable defines to take the place of libzpool's (libzpool calls them
/// through its PLT, so the executable's definition wins once it is in the dynamic table).
const OVERRIDES: &[&str] = &[
    "zio_delay_interrupt",
    "zfs_file_fsync",
    "zil_commit",
    "spa_sync",
];

/// Where the headers and the library of one OpenZFS release are.
struct Release {
    version: String,
    includes: Vec<PathBuf>,
    /// Link directory and library name; `None` for the system's libzpool.
    library: Option<(PathBuf, String)>,
}

/// "2.3.2" -> 20302, the value zlab.c tests its API differences against.
fn version_number(version: &str) -> u32 {
    let mut parts = version
        .split(['.', '-', '~', '+'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor, patch) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    major * 10000 + minor * 100 + patch
}

fn system_release() -> Release {
    for dir in ["/usr/include/libspl", "/usr/include/libzfs"] {
        if !Path::new(dir).is_dir() {
            println!(
                "cargo:warning={dir} is missing: install libzfslinux-dev (Debian contrib; cargo xtask setup does)"
            );
        }
    }
    let version = std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "libzfslinux-dev"])
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split(['-', '+', '~'])
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "2.1.11".to_owned());
    Release {
        version,
        includes: vec!["/usr/include/libspl".into(), "/usr/include/libzfs".into()],
        library: None,
    }
}

fn cached_release(version: &str) -> Release {
    let cache = std::env::var_os("ZPROF_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/zprof")
        });
    let root = cache.join("openzfs").join(version).join("root");
    if !root.join("usr/include/libzfs").is_dir() {
        panic!(
            "OpenZFS {version} is not unpacked in {}: run `cargo xtask setup` (scripts/setup.sh lists the releases it fetches)",
            root.display()
        );
    }
    let includes = [
        "usr/include/libspl",
        "usr/include/libzfs",
        "usr/include/libzpool",
    ]
    .iter()
    .map(|d| root.join(d))
    .filter(|d| d.is_dir())
    .collect();
    let lib = root.join("lib/x86_64-linux-gnu");
    let name = std::fs::read_dir(&lib)
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("libzpool.so.") && n.matches('.').count() == 2)
                .min()
        })
        .unwrap_or_else(|| panic!("no libzpool.so.N in {}", lib.display()));
    Release {
        version: version.to_owned(),
        includes,
        library: Some((lib, name)),
    }
}

fn main() {
    println!("cargo:rerun-if-changed=csrc/zlab.c");
    println!("cargo:rerun-if-changed=csrc/zlab.h");
    println!("cargo:rerun-if-env-changed=ZPROF_LAB_OPENZFS");
    println!("cargo:rerun-if-env-changed=ZPROF_CACHE");
    let release = match std::env::var("ZPROF_LAB_OPENZFS") {
        Ok(v) if !v.is_empty() && v != "system" => cached_release(&v),
        _ => system_release(),
    };
    let mut build = cc::Build::new();
    build.file("csrc/zlab.c");
    for dir in &release.includes {
        build.include(dir);
    }
    build
        .define(
            "ZLAB_OPENZFS",
            version_number(&release.version).to_string().as_str(),
        )
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
    match &release.library {
        None => println!("cargo:rustc-link-lib=dylib=zpool"),
        Some((dir, name)) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=dylib:+verbatim={name}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
    for lib in ["nvpair", "uutil"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for sym in OVERRIDES {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
    }
    // The lab reports which OpenZFS it runs on.
    println!("cargo:rustc-env=ZPROF_LAB_OPENZFS={}", release.version);
}
