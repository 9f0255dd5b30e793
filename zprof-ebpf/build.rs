//! Rebuild the eBPF object when bpf-linker changes (a new LLVM can change codegen).
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
