//! Build script: compiles the small C core (`csrc/zlab.c`) against the OpenZFS
//! user-space headers with the flags that reproduce libzpool's own struct layouts
//! (libzpool is built with DEBUG and ZFS_DEBUG, which change them), links libzpool,
//! and exports from the binary the symbols that must override libzpool's own.
//!
//! Which OpenZFS: the system's (Debian 12's libzfslinux-dev and libzpool5linux,
//! 2.1.11) by default; with `ZPROF_LAB_OPENZFS=X.Y.Z`, the release that
//! `scripts/setup.sh` unpacked into `$ZPROF_CACHE/openzfs/X.Y.Z` (libzpool6linux
//! cannot be installed beside libzpool5linux), linked with a run path to it;
//! where that release's root also holds its own libc6 (2.4 needs glibc 2.38),
//! the lab runs under that root's loader.
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
    /// The release's own dynamic loader, where its libzpool needs a newer
    /// glibc than the host's (2.4 on Debian 12: trixie's libc6 is unpacked
    /// beside it): the lab is linked to run under it.
    loader: Option<PathBuf>,
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
        loader: None,
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
    // Bookworm's packages install into /lib, trixie's (merged /usr) into /usr/lib.
    let lib = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"]
        .iter()
        .map(|d| root.join(d))
        .find(|d| has_libzpool(d))
        .unwrap_or_else(|| root.join("lib/x86_64-linux-gnu"));
    let name = std::fs::read_dir(&lib)
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("libzpool.so.") && n.matches('.').count() == 2)
                .min()
        })
        .unwrap_or_else(|| panic!("no libzpool.so.N in {}", lib.display()));
    let loader = root.join("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
    Release {
        version: version.to_owned(),
        includes,
        library: Some((lib, name)),
        loader: loader.exists().then_some(loader),
    }
}

/// Whether `dir` holds a libzpool.so.N.
fn has_libzpool(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .any(|n| n.starts_with("libzpool.so."))
    })
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
    if let Some(loader) = &release.loader {
        // Run under the release's loader, which takes its libc from the run
        // path; DT_RPATH (not RUNPATH) also serves libzpool's own NEEDED
        // libnvpair. The host's libc, linked against, lacks the newer glibc
        // symbols libzpool uses: they resolve at run time.
        println!(
            "cargo:rustc-link-arg=-Wl,--dynamic-linker={}",
            loader.display()
        );
        println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags");
        println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
    }
    for lib in ["nvpair", "uutil"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for sym in OVERRIDES {
        // 2.4 counts commits where zil_close makes them too (zlab.c).
        let sym = if *sym == "zil_commit" && version_number(&release.version) >= 20400 {
            "zil_commit_flags"
        } else {
            sym
        };
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
    }
    // The lab reports which OpenZFS it runs on.
    println!("cargo:rustc-env=ZPROF_LAB_OPENZFS={}", release.version);
}
