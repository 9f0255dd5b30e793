//! Choosing and checking the target: OpenZFS's kernel module (kprobes) or its
//! user-space library libzpool (uprobes).
//!
//! Every check that can fail before anything is attached runs here, so a machine
//! that cannot trace gets one clear line naming what is missing (and exit status
//! 2) in well under a second, with nothing attached.

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    str::FromStr,
};

use crate::zfs::elf;

/// What the user asked for with `--target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// Kernel when a zfs module is loaded, else libzpool when installed.
    Auto,
    /// zfs.ko through kprobes.
    Kernel,
    /// libzpool through uprobes, optionally at an explicit path.
    Libzpool(Option<PathBuf>),
}

impl FromStr for TargetSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(TargetSpec::Auto),
            "kernel" => Ok(TargetSpec::Kernel),
            "libzpool" => Ok(TargetSpec::Libzpool(None)),
            _ => match s.strip_prefix("libzpool=") {
                Some(path) if !path.is_empty() => {
                    Ok(TargetSpec::Libzpool(Some(PathBuf::from(path))))
                }
                _ => Err(format!(
                    "unknown target '{s}': use kernel, libzpool or libzpool=PATH"
                )),
            },
        }
    }
}

/// System locations, overridable so tests can point them elsewhere.
#[derive(Debug, Clone)]
pub struct SystemPaths {
    /// Present when the zfs module is loaded.
    pub zfs_module: PathBuf,
    /// Present when the kernel supports kprobe PMU events.
    pub kprobe_pmu: PathBuf,
    /// Kernel symbols.
    pub kallsyms: PathBuf,
}

impl Default for SystemPaths {
    fn default() -> Self {
        SystemPaths {
            zfs_module: "/sys/module/zfs".into(),
            kprobe_pmu: "/sys/bus/event_source/devices/kprobe/type".into(),
            kallsyms: "/proc/kallsyms".into(),
        }
    }
}

/// Why a target cannot be used. Each message names what is missing and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Lacking the capabilities eBPF tracing needs (root included, where a
    /// service manager or setpriv took them away).
    #[error(
        "zprof lacks {0}, which loading and attaching its eBPF programs needs: run it as root (sudo), \
         or give it CAP_BPF and CAP_PERFMON (zprof-serve.service: CapabilityBoundingSet=CAP_BPF CAP_PERFMON)"
    )]
    NotPrivileged(String),
    /// Kernel target requested where it cannot work.
    #[error(
        "the kernel target cannot run here: {0}; use --target libzpool to trace OpenZFS in user space"
    )]
    KernelUnavailable(String),
    /// The library does not exist or is not readable.
    #[error(
        "libzpool not found at {path}: {reason}; install libzpool5linux or pass --target libzpool=PATH"
    )]
    LibraryMissing {
        /// Where zprof looked.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// More than one libzpool is installed and neither the command nor the pid says which.
    #[error(
        "several libzpool builds are installed ({0}) and the traced command does not link one directly: pass --target libzpool=PATH"
    )]
    SeveralLibraries(String),
    /// Nothing to trace at all.
    #[error(
        "no OpenZFS to trace: no zfs kernel module is loaded (/sys/module/zfs) and no libzpool is installed; load zfs.ko, install libzpool (Debian: libzpool5linux), or pass --target libzpool=PATH"
    )]
    NothingToTrace,
}

/// Which kind of target was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// zfs.ko via kprobes.
    Kernel,
    /// libzpool via uprobes.
    Libzpool,
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TargetKind::Kernel => "kernel",
            TargetKind::Libzpool => "libzpool",
        })
    }
}

/// A target that passed its checks.
#[derive(Debug, Clone)]
pub struct Target {
    /// Kernel or libzpool.
    pub kind: TargetKind,
    /// The library path (libzpool) or "zfs.ko".
    pub object: String,
    /// OpenZFS version when it can be told.
    pub zfs_version: Option<String>,
    /// True when the version came from `--zfs-version` rather than the build.
    pub zfs_version_given: bool,
    /// GNU build-id of the library, or of the loaded zfs.ko.
    pub build_id: Option<String>,
    /// Functions that can be probed: name -> file offset (libzpool) or address (kernel).
    pub functions: HashMap<String, u64>,
}

/// The capabilities this process lacks to load and attach tracing programs
/// (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN, which holds both), by name:
/// none when it has them. Root counts by its effective set, which a unit's
/// CapabilityBoundingSet or setpriv may have cut down.
pub fn missing_capabilities() -> Vec<&'static str> {
    let effective = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| effective_capabilities(&status));
    let Some(caps) = effective else {
        // No /proc: root is taken at its word, anyone else is refused.
        return if unsafe { libc::geteuid() } == 0 {
            Vec::new()
        } else {
            vec!["CAP_BPF", "CAP_PERFMON"]
        };
    };
    missing_from(caps)
}

/// The CapEff line of /proc/self/status.
fn effective_capabilities(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// The tracing capabilities an effective set lacks.
fn missing_from(caps: u64) -> Vec<&'static str> {
    const CAP_SYS_ADMIN: u64 = 21;
    const NEEDED: [(u64, &str); 2] = [(39, "CAP_BPF"), (38, "CAP_PERFMON")];
    if caps & (1 << CAP_SYS_ADMIN) != 0 {
        return Vec::new();
    }
    NEEDED
        .iter()
        .filter(|(bit, _)| caps & (1 << bit) == 0)
        .map(|(_, name)| *name)
        .collect()
}

/// `Err` naming what [`missing_capabilities`] found missing.
fn check_privileged() -> Result<(), TargetError> {
    let missing = missing_capabilities();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TargetError::NotPrivileged(missing.join(" and ")))
    }
}

/// What tells zprof which libzpool a recording is about: the command it runs
/// or the process it attaches to.
#[derive(Debug, Clone, Default)]
pub struct Traced<'a> {
    /// The command line zprof starts (`record -- CMD ...`).
    pub command: Option<&'a [String]>,
    /// The process zprof attaches to (`--pid`).
    pub pid: Option<u32>,
}

/// Whether a file name is a libzpool shared object (`libzpool.so.N[.M.P]`).
fn is_libzpool(name: &str) -> bool {
    name.strip_prefix("libzpool.so.").is_some_and(|rest| {
        rest.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Every libzpool the dynamic linker knows (`ldconfig -p`), one per file.
pub fn installed_libzpools() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    if let Ok(output) = std::process::Command::new("ldconfig").arg("-p").output() {
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let line = line.trim();
            let name = line.split_whitespace().next().unwrap_or("");
            let native = line.contains("x86-64") || line.contains("(libc6)");
            if is_libzpool(name)
                && native
                && let Some(path) = line.rsplit("=> ").next()
            {
                found.push(PathBuf::from(path.trim()));
            }
        }
    }
    if found.is_empty() {
        for dir in [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/local/lib",
            "/usr/lib64",
            "/usr/lib",
        ] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            found.extend(
                entries
                    .flatten()
                    .filter(|e| is_libzpool(&e.file_name().to_string_lossy()))
                    .map(|e| e.path()),
            );
        }
    }
    let mut unique: Vec<PathBuf> = Vec::new();
    for path in found {
        let real = std::fs::canonicalize(&path).unwrap_or(path);
        if !unique.contains(&real) {
            unique.push(real);
        }
    }
    unique
}

/// The libzpool a process maps (/proc/PID/maps), or else one of its
/// descendants (a shell or fio's parent process maps none itself).
fn mapped_libzpool(pid: u32) -> Option<PathBuf> {
    let mut queue = vec![pid];
    // Bounded: a process tree of a few hundred is plenty for a benchmark.
    for _ in 0..512 {
        let pid = queue.pop()?;
        if let Some(found) = maps_libzpool(pid) {
            return Some(found);
        }
        queue.extend(children(pid));
    }
    None
}

fn maps_libzpool(pid: u32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .is_some_and(|n| is_libzpool(&n.to_string_lossy()))
        })
        .map(PathBuf::from)
}

/// The child processes of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The libzpool a program would load, as its dynamic linker resolves it (its
/// NEEDED entries through its run path, LD_LIBRARY_PATH and the cache), asked
/// without running the program: `ld.so --list`.
fn linked_libzpool(program: &str) -> Option<PathBuf> {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())?
    };
    let output = std::process::Command::new("/lib64/ld-linux-x86-64.so.2")
        .arg("--list")
        .arg(&path)
        .output()
        .ok()?;
    if !output.status.success() {
        return None; // a script, a static binary or not a program at all
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let (name, rest) = line.trim().split_once(" => ")?;
            let path = rest.split(" (").next()?.trim();
            is_libzpool(name).then(|| PathBuf::from(path))
        })
}

/// Picks the libzpool to trace: the one the process maps or the command links,
/// else the only one installed. Several installed and no way to choose is an
/// error listing them.
pub fn find_libzpool(traced: &Traced) -> Result<PathBuf, TargetError> {
    let mapped = traced.pid.and_then(mapped_libzpool);
    let linked = || {
        traced
            .command
            .and_then(|c| c.first())
            .and_then(|p| linked_libzpool(p))
    };
    choose_libzpool(mapped.or_else(linked), installed_libzpools)
}

/// The choice itself: what the traced program uses wins; otherwise the
/// installed libraries must leave no doubt.
fn choose_libzpool(
    used: Option<PathBuf>,
    installed: impl FnOnce() -> Vec<PathBuf>,
) -> Result<PathBuf, TargetError> {
    if let Some(found) = used {
        return Ok(found);
    }
    match installed().as_slice() {
        [] => Err(TargetError::LibraryMissing {
            path: "the dynamic linker's search path".into(),
            reason: "no libzpool.so.N there".into(),
        }),
        [only] => Ok(only.clone()),
        several => Err(TargetError::SeveralLibraries(
            several
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

/// Checks that the kernel target can work; lists everything missing at once.
fn check_kernel(paths: &SystemPaths) -> Result<(), TargetError> {
    let mut missing = Vec::new();
    if !paths.kprobe_pmu.exists() {
        missing.push(format!(
            "kprobes are not available on this kernel (no {})",
            paths.kprobe_pmu.display()
        ));
    }
    if !paths.zfs_module.exists() {
        missing.push(format!(
            "no zfs module is loaded ({} is absent)",
            paths.zfs_module.display()
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TargetError::KernelUnavailable(missing.join(" and ")))
    }
}

/// OpenZFS's kernel modules as kallsyms names them: zfs.ko and the modules split
/// from it (zfs_zstd_compress is in zzstd.ko, the fletcher4 code in zcommon.ko).
const ZFS_MODULES: &[&str] = &[
    "[zfs]",
    "[zzstd]",
    "[zcommon]",
    "[icp]",
    "[spl]",
    "[znvpair]",
    "[zlua]",
    "[zunicode]",
    "[zavl]",
];

/// Functions of the kernel itself (not a module) that the catalogue probes.
const KERNEL_CORE_FUNCTIONS: &[&str] = &["bio_endio"];

/// Functions of OpenZFS's modules in kallsyms (static ones included), and the
/// kernel's own that zprof probes, by name.
fn kernel_functions(kallsyms: &Path) -> HashMap<String, u64> {
    let Ok(text) = std::fs::read_to_string(kallsyms) else {
        return HashMap::new();
    };
    let core = |line: &str| {
        !line.ends_with(']')
            && KERNEL_CORE_FUNCTIONS
                .iter()
                .any(|f| line.ends_with(&format!(" {f}")))
    };
    text.lines()
        .filter(|l| ZFS_MODULES.iter().any(|m| l.ends_with(m)) || core(l))
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let address = u64::from_str_radix(parts.next()?, 16).ok()?;
            let kind = parts.next()?;
            let name = parts.next()?;
            matches!(kind, "t" | "T").then(|| (name.to_owned(), address))
        })
        .collect()
}

/// OpenZFS version of a libzpool file: the Debian package that owns it, if any.
fn libzpool_version(path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let owner = std::process::Command::new("dpkg-query")
        .arg("-S")
        .arg(&real)
        .output()
        .ok()?;
    let package = String::from_utf8_lossy(&owner.stdout)
        .split(':')
        .next()?
        .trim()
        .to_owned();
    if package.is_empty() {
        return None;
    }
    let version = std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", &package])
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    // "2.1.11-1+deb12u1" -> "2.1.11"
    let upstream = version
        .split(['-', '+', '~'])
        .next()?
        .trim_start_matches(|c: char| !c.is_ascii_digit() || c == ':');
    (!upstream.is_empty()).then(|| upstream.rsplit(':').next().unwrap_or(upstream).to_owned())
}

/// Resolves `--target` into a checked target; `traced` says which libzpool
/// the command or process uses when the target does not name one.
pub fn resolve(
    spec: &TargetSpec,
    paths: &SystemPaths,
    traced: &Traced,
) -> Result<Target, TargetError> {
    match spec {
        TargetSpec::Kernel => {
            check_kernel(paths)?;
            check_privileged()?;
            let version = crate::zfs::offsets::kbuild::loaded_module_version(&paths.zfs_module);
            Ok(Target {
                kind: TargetKind::Kernel,
                object: "zfs.ko".into(),
                zfs_version: version,
                zfs_version_given: false,
                build_id: crate::zfs::offsets::kbuild::loaded_module_build_id(&paths.zfs_module),
                functions: kernel_functions(&paths.kallsyms),
            })
        }
        TargetSpec::Libzpool(explicit) => {
            let path = match explicit {
                Some(p) => p.clone(),
                None => find_libzpool(traced)?,
            };
            let info = elf::read_library(&path).map_err(|e| TargetError::LibraryMissing {
                path: path.display().to_string(),
                reason: match &e {
                    elf::ElfError::Read { source, .. } => source.to_string(),
                    elf::ElfError::Parse { source, .. } => format!("not an ELF library ({source})"),
                },
            })?;
            check_privileged()?;
            Ok(Target {
                kind: TargetKind::Libzpool,
                object: path.display().to_string(),
                // The build-id first: Debian's 2.3.2 carries no version string.
                zfs_version: info
                    .build_id
                    .as_deref()
                    .and_then(crate::zfs::offsets::release_of_build)
                    .or_else(|| info.zfs_version.clone())
                    .or_else(|| libzpool_version(&path)),
                zfs_version_given: false,
                build_id: info.build_id,
                functions: info.functions,
            })
        }
        TargetSpec::Auto => {
            if paths.zfs_module.exists() {
                resolve(&TargetSpec::Kernel, paths, traced)
            } else {
                match find_libzpool(traced) {
                    Err(TargetError::LibraryMissing { .. }) => Err(TargetError::NothingToTrace),
                    Err(other) => Err(other),
                    Ok(path) => resolve(&TargetSpec::Libzpool(Some(path)), paths, traced),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_tracing_capabilities_are_named() {
        // CapEff of root under `setpriv --bounding-set=-all,+bpf` (CAP_BPF is
        // bit 39), of full root, and of CAP_SYS_ADMIN alone.
        let status = "Name:\tzprof\nCapEff:\t0000008000000000\n";
        assert_eq!(
            missing_from(effective_capabilities(status).unwrap()),
            ["CAP_PERFMON"]
        );
        assert!(missing_from(0x000001ffffffffff).is_empty());
        assert!(missing_from(1 << 21).is_empty());
        assert_eq!(missing_from(0), ["CAP_BPF", "CAP_PERFMON"]);
    }

    #[test]
    fn target_spec_parses() {
        assert_eq!("kernel".parse::<TargetSpec>().unwrap(), TargetSpec::Kernel);
        assert_eq!(
            "libzpool".parse::<TargetSpec>().unwrap(),
            TargetSpec::Libzpool(None)
        );
        assert_eq!(
            "libzpool=/opt/lib/libzpool.so"
                .parse::<TargetSpec>()
                .unwrap(),
            TargetSpec::Libzpool(Some("/opt/lib/libzpool.so".into()))
        );
        let err = "zfs".parse::<TargetSpec>().unwrap_err();
        assert!(err.contains("unknown target 'zfs'"), "{err}");
        assert!("libzpool=".parse::<TargetSpec>().is_err());
    }

    #[test]
    fn kernel_check_names_everything_missing() {
        let paths = SystemPaths {
            zfs_module: "/nonexistent/zfs".into(),
            kprobe_pmu: "/nonexistent/kprobe/type".into(),
            kallsyms: "/proc/kallsyms".into(),
        };
        let err = resolve(&TargetSpec::Kernel, &paths, &Traced::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kprobes are not available on this kernel"),
            "{err}"
        );
        assert!(err.contains("no zfs module is loaded"), "{err}");
        assert!(err.contains("--target libzpool"), "{err}");
    }

    #[test]
    fn missing_library_names_the_path() {
        let spec = TargetSpec::Libzpool(Some("/nonexistent/libzpool.so.5".into()));
        let err = resolve(&spec, &SystemPaths::default(), &Traced::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("libzpool not found at /nonexistent/libzpool.so.5"),
            "{err}"
        );
    }

    #[test]
    fn libzpool_names_are_recognised() {
        for name in ["libzpool.so.5", "libzpool.so.6", "libzpool.so.6.0.0"] {
            assert!(is_libzpool(name), "{name}");
        }
        for name in [
            "libzpool.so",
            "libzpool.so.6.bak",
            "libzfs.so.6",
            "libzpool.so.",
        ] {
            assert!(!is_libzpool(name), "{name}");
        }
    }

    #[test]
    fn the_library_in_use_wins_and_several_installed_are_named() {
        let five = PathBuf::from("/lib/libzpool.so.5");
        let six = PathBuf::from("/opt/zfs/lib/libzpool.so.6");
        let both = || vec![five.clone(), six.clone()];
        assert_eq!(choose_libzpool(Some(six.clone()), both).unwrap(), six);
        assert_eq!(choose_libzpool(None, || vec![five.clone()]).unwrap(), five);
        let err = choose_libzpool(None, both).unwrap_err().to_string();
        assert!(
            err.contains("/lib/libzpool.so.5, /opt/zfs/lib/libzpool.so.6"),
            "{err}"
        );
        assert!(err.contains("--target libzpool=PATH"), "{err}");
        assert!(matches!(
            choose_libzpool(None, Vec::new),
            Err(TargetError::LibraryMissing { .. })
        ));
    }

    #[test]
    fn a_program_that_links_no_libzpool_falls_back_to_the_installed_ones() {
        assert_eq!(linked_libzpool("/bin/sh"), None);
        assert_eq!(linked_libzpool("/nonexistent/program"), None);
    }

    #[test]
    fn kallsyms_parsing_keeps_zfs_text_symbols() {
        let path = std::env::temp_dir().join(format!("zprof-kallsyms-{}", std::process::id()));
        std::fs::write(
            &path,
            "ffffffffc0001000 t zio_write_compress\t[zfs]\nffffffffc0002000 T zil_commit\t[zfs]\n\
             ffffffffc0003000 d zfs_data\t[zfs]\nffffffff81000000 T _text\n\
             ffffffffc0004000 T zfs_zstd_compress\t[zzstd]\nffffffffc0005000 T ext4_sync_file\t[ext4]\n",
        )
        .unwrap();
        let functions = kernel_functions(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(functions.len(), 3);
        assert!(
            functions.contains_key("zfs_zstd_compress"),
            "zstd lives in zzstd.ko"
        );
        assert_eq!(functions["zio_write_compress"], 0xffffffffc0001000);
    }
}
