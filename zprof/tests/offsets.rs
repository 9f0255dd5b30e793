//! The built-in offsets table must match the installed OpenZFS headers: this
//! regenerates it with zprof/offsets/zfs_offsets.c and compares, so a stale or
//! hand-edited table fails here rather than as wrong numbers in a report.

use std::{path::Path, process::Command};

use serde_json::Value;

/// The include directory of the OpenZFS source shipped by zfs-dkms.
fn zfs_source_include() -> std::path::PathBuf {
    let found = std::fs::read_dir("/usr/src")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("include"))
        .find(|p| p.parent().and_then(|d| d.file_name()).is_some_and(|n| n.to_string_lossy().starts_with("zfs-")) && p.is_dir());
    found.expect("no /usr/src/zfs-*/include: install zfs-dkms and libzfslinux-dev (cargo xtask setup does)")
}

#[test]
fn builtin_libzpool_table_matches_the_headers() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = manifest.join("offsets/zfs_offsets.c");
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(manifest.join("offsets/libzpool-2.1.11-debian.json")).unwrap()).unwrap();
    let exe = std::env::temp_dir().join(format!("zprof-offsets-{}", std::process::id()));
    let status = Command::new("gcc")
        .args(["-O0", "-w", "-D_GNU_SOURCE", "-D_REENTRANT", "-D_FILE_OFFSET_BITS=64", "-D_LARGEFILE64_SOURCE"])
        .args(["-DDEBUG", "-UNDEBUG", "-DZFS_DEBUG", "-I/usr/include/libspl", "-I/usr/include/libzfs", "-idirafter"])
        .arg(zfs_source_include())
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .status()
        .expect("gcc is needed (cargo xtask setup installs it)");
    assert!(status.success(), "compiling {} failed", source.display());
    let output = Command::new(&exe).arg("-j").output().unwrap();
    std::fs::remove_file(&exe).unwrap();
    assert!(output.status.success());
    let generated: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(generated["offsets"], table["offsets"], "regenerate the table: see zprof/offsets/README.md");
    assert_eq!(generated["sizes"], table["sizes"]);
}
