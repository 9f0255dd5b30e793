//! Builds zprof-ebpf (nightly, bpfel-unknown-none, bpf-linker) and puts the
//! object in OUT_DIR, so the binary embeds it: no separate build step to
//! forget.
//!
//! What aya-build does, with one difference: the eBPF build's cargo target
//! directory is shared by every profile (`<target>/bpf`) instead of lying in
//! this profile's OUT_DIR. The debug build (tests) and the release build (the
//! guest's zprof) then compile `core` and the programs once, not twice: about
//! 45 s of a fresh machine's CI run.
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, anyhow, ensure};

const REMEDY: &str = "run `cargo xtask setup` (needs nightly rust-src and bpf-linker)";

fn main() -> anyhow::Result<()> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest
        .parent()
        .ok_or_else(|| anyhow!("no workspace root"))?;
    for dir in ["zprof-ebpf", "zprof-common"] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    // OUT_DIR is <target>/[<triple>/]<profile>/build/zprof-<hash>/out.
    let target = out_dir
        .ancestors()
        .nth(4)
        .ok_or_else(|| anyhow!("unexpected OUT_DIR {}", out_dir.display()))?;
    let bpf_target_dir = target.join("bpf");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").context("CARGO_CFG_TARGET_ARCH not set")?;
    let mut cargo = Command::new("rustup");
    cargo.args([
        "run",
        "nightly",
        "cargo",
        "build",
        "--package",
        "zprof-ebpf",
        "--bins",
        "--release",
    ]);
    cargo
        .args([
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--target-dir",
        ])
        .arg(&bpf_target_dir);
    cargo.current_dir(workspace);
    // As aya-build: the target architecture for the programs' cfg, debug
    // info, and BTF from bpf-linker.
    cargo.env(
        "CARGO_ENCODED_RUSTFLAGS",
        format!("--cfg=bpf_target_arch=\"{arch}\"\x1f-Cdebuginfo=2\x1f-Clink-arg=--btf"),
    );
    // The outer build's compiler and wrapper are stable's, not nightly's.
    for key in ["RUSTC", "RUSTC_WORKSPACE_WRAPPER", "CARGO_TARGET_DIR"] {
        cargo.env_remove(key);
    }
    let output = cargo
        .output()
        .with_context(|| format!("cannot run rustup to build the eBPF programs; {REMEDY}"))?;
    let said = String::from_utf8_lossy(&output.stderr);
    for line in said
        .lines()
        .filter(|l| l.contains("warning") || l.contains("Compiling") || l.contains("Finished"))
    {
        println!("cargo:warning={line}");
    }
    ensure!(
        output.status.success(),
        "building the eBPF programs failed; {REMEDY}:\n{said}"
    );
    let object = bpf_target_dir.join("bpfel-unknown-none/release/zprof");
    std::fs::copy(&object, out_dir.join("zprof"))
        .with_context(|| format!("copying {}", object.display()))?;
    Ok(())
}
