//! Naming addresses in a stripped library, as Debian ships libzpool: a real
//! shared library is built with gcc, stripped, loaded into this test process,
//! and the address of one of its static functions is symbolized three ways:
//! with no debug file (placed by the nearest exported symbol before it), and
//! with a debug file found by build-id or by .gnu_debuglink (its real name).

use std::{
    ffi::CString,
    path::{Path, PathBuf},
    process::Command,
};

use zprof::zfs::symbols::{ProcessMaps, Symbolizer};

mod common;

const SOURCE: &str = r#"
int exported_before(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int hidden_worker(int x) {
    volatile int acc = 0;
    for (int i = 0; i < x; i++) acc += i * x;
    return acc;
}
int exported_after(int x) { return hidden_worker(x) + 2; }
void *hidden_worker_address(void) { return (void *)hidden_worker; }
"#;

fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds `lib{name}.so` in `dir`, keeps its symbols in `{name}.debug`, and
/// strips it down to its exported symbols.
fn build_stripped(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let source = dir.join(format!("{name}.c"));
    std::fs::write(&source, SOURCE).unwrap();
    let library = dir.join(format!("lib{name}.so"));
    let debug = dir.join(format!("{name}.debug"));
    run(Command::new("gcc")
        .args([
            "-O1",
            "-g",
            "-shared",
            "-fPIC",
            "-fno-toplevel-reorder",
            "-Wl,--build-id",
            "-o",
        ])
        .arg(&library)
        .arg(&source));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&library)
        .arg(&debug));
    run(Command::new("strip").arg("--strip-all").arg(&library));
    (library, debug)
}

/// Loads the library into this process and returns the run-time address of
/// an instruction inside its static function.
fn load_and_find_hidden(library: &Path) -> u64 {
    let path = CString::new(library.to_str().unwrap()).unwrap();
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null(), "dlopen {}", library.display());
    let symbol = CString::new("hidden_worker_address").unwrap();
    let function = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
    assert!(!function.is_null());
    let address_of: extern "C" fn() -> *const u8 = unsafe { std::mem::transmute(function) };
    address_of() as u64 + 4
}

fn build_id_path(root: &Path, library: &Path) -> PathBuf {
    let output = Command::new("readelf")
        .arg("-n")
        .arg(library)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let id = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("library has a build-id")
        .trim();
    root.join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]))
}

#[test]
fn a_static_function_is_placed_without_debug_file_and_named_with_one() {
    let dir = common::scratch("zprof-symbols", "stripped");
    let no_debug_dirs = dir.join("none");

    // Stripped, no debug file anywhere: placed, and the same name for every
    // address in the function (so its samples add up in a flame graph).
    let (plain, _) = build_stripped(&dir, "plain");
    let hidden = load_and_find_hidden(&plain);
    let maps = ProcessMaps::read(std::process::id()).unwrap();
    let mut symbolizer = Symbolizer::with_debug_dirs(vec![no_debug_dirs.clone()]);
    let placed = symbolizer.user(Some(&maps), hidden);
    assert!(
        placed.starts_with("[libplain.so:exported_before+0x"),
        "{placed}"
    );
    assert_eq!(symbolizer.user(Some(&maps), hidden + 2), placed);
    assert_eq!((symbolizer.placed, symbolizer.unsymbolized), (2, 0));

    // The debug file under DIR/.build-id/: the real name.
    let (by_id, by_id_debug) = build_stripped(&dir, "byid");
    let hidden = load_and_find_hidden(&by_id);
    let debug_root = dir.join("debug-root");
    let target = build_id_path(&debug_root, &by_id);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::rename(&by_id_debug, &target).unwrap();
    let maps = ProcessMaps::read(std::process::id()).unwrap();
    let mut symbolizer = Symbolizer::with_debug_dirs(vec![debug_root]);
    assert_eq!(symbolizer.user(Some(&maps), hidden), "hidden_worker");

    // A .gnu_debuglink naming a debug file beside the library: the real name too.
    let (linked, linked_debug) = build_stripped(&dir, "linked");
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", linked_debug.display()))
        .arg(&linked));
    let hidden = load_and_find_hidden(&linked);
    let maps = ProcessMaps::read(std::process::id()).unwrap();
    let mut symbolizer = Symbolizer::with_debug_dirs(vec![no_debug_dirs]);
    assert_eq!(symbolizer.user(Some(&maps), hidden), "hidden_worker");
    assert_eq!((symbolizer.placed, symbolizer.unsymbolized), (0, 0));
    std::fs::remove_dir_all(dir).unwrap();
}
