//! Builds zprof-ebpf (nightly, bpfel-unknown-none, bpf-linker) into OUT_DIR so the
//! binary can embed it: no separate build step to forget.
use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let ebpf_dir = manifest.parent().ok_or_else(|| anyhow!("no workspace root"))?.join("zprof-ebpf");
    let ebpf_dir = ebpf_dir.to_str().context("non-UTF-8 path")?.to_owned();
    aya_build::build_ebpf(
        [Package { name: "zprof-ebpf", root_dir: &ebpf_dir, ..Default::default() }],
        Toolchain::default(),
    )
    .context("building the eBPF programs failed; run `cargo xtask setup` (needs nightly rust-src and bpf-linker)")
}
