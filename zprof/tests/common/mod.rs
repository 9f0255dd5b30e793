//! Helpers shared by the integration tests: the binaries under test.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The zprof binary of this build.
pub fn zprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zprof"))
}

/// zprof-lab is another package's binary: find it in the shared target dir.
pub fn lab_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("debug/zprof-lab");
    assert!(path.exists(), "{} is missing: build it first (cargo build -p zprof-lab; cargo xtask test does)", path.display());
    path
}

/// Fails the test when not root: the recording tests attach eBPF programs.
pub fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test attaches eBPF programs and needs root: run `cargo xtask test` as root"
    );
}

/// A fresh scratch directory for one test.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
