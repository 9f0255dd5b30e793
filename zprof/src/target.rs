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

use crate::elf;

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
                Some(path) if !path.is_empty() => Ok(TargetSpec::Libzpool(Some(PathBuf::from(path)))),
                _ => Err(format!("unknown target '{s}': use kernel, libzpool or libzpool=PATH")),
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
    /// Not root and lacking the capabilities eBPF tracing needs.
    #[error("zprof needs root (or CAP_BPF with CAP_PERFMON) to load eBPF programs; run it with sudo")]
    NotPrivileged,
    /// Kernel target requested where it cannot work.
    #[error("the kernel target cannot run here: {0}; use --target libzpool to trace OpenZFS in user space")]
    KernelUnavailable(String),
    /// The library does not exist or is not readable.
    #[error("libzpool not found at {path}: {reason}; install libzpool5linux or pass --target libzpool=PATH")]
    LibraryMissing {
        /// Where zprof looked.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// Nothing to trace at all.
    #[error(
        "no OpenZFS to trace: no zfs kernel module is loaded (/sys/module/zfs) and libzpool.so.5 is not installed; load zfs.ko, install libzpool5linux, or pass --target libzpool=PATH"
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
    /// GNU build-id of the library (libzpool only).
    pub build_id: Option<String>,
    /// Functions that can be probed: name -> file offset (libzpool) or address (kernel).
    pub functions: HashMap<String, u64>,
}

/// Whether the process may load and attach tracing programs.
pub fn privileged() -> bool {
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    let Some(caps) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return false;
    };
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    const CAP_BPF: u64 = 39;
    caps & (1 << CAP_SYS_ADMIN) != 0 || (caps & (1 << CAP_BPF) != 0 && caps & (1 << CAP_PERFMON) != 0)
}

/// Where the dynamic linker would find libzpool.so.5.
pub fn find_libzpool() -> Option<PathBuf> {
    if let Ok(output) = std::process::Command::new("ldconfig").arg("-p").output() {
        let text = String::from_utf8_lossy(&output.stdout);
        for line in text.lines() {
            let line = line.trim();
            let native = line.starts_with("libzpool.so.5 ") && line.contains("x86-64");
            if (native || line.starts_with("libzpool.so.5 (libc6)"))
                && let Some(path) = line.rsplit("=> ").next()
            {
                return Some(PathBuf::from(path.trim()));
            }
        }
    }
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib", "/usr/lib64", "/usr/lib"]
        .iter()
        .map(|dir| Path::new(dir).join("libzpool.so.5"))
        .find(|p| p.exists())
}

/// Checks that the kernel target can work; lists everything missing at once.
fn check_kernel(paths: &SystemPaths) -> Result<(), TargetError> {
    let mut missing = Vec::new();
    if !paths.kprobe_pmu.exists() {
        missing.push(format!("kprobes are not available on this kernel (no {})", paths.kprobe_pmu.display()));
    }
    if !paths.zfs_module.exists() {
        missing.push(format!("no zfs module is loaded ({} is absent)", paths.zfs_module.display()));
    }
    if missing.is_empty() { Ok(()) } else { Err(TargetError::KernelUnavailable(missing.join(" and "))) }
}

/// OpenZFS's kernel modules as kallsyms names them: zfs.ko and the modules split
/// from it (zfs_zstd_compress is in zzstd.ko, the fletcher4 code in zcommon.ko).
const ZFS_MODULES: &[&str] = &["[zfs]", "[zzstd]", "[zcommon]", "[icp]", "[spl]", "[znvpair]", "[zlua]", "[zunicode]", "[zavl]"];

/// Functions of OpenZFS's modules in kallsyms (static ones included), by name.
fn kernel_functions(kallsyms: &Path) -> HashMap<String, u64> {
    let Ok(text) = std::fs::read_to_string(kallsyms) else { return HashMap::new() };
    text.lines()
        .filter(|l| ZFS_MODULES.iter().any(|m| l.ends_with(m)))
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
    let owner = std::process::Command::new("dpkg-query").arg("-S").arg(&real).output().ok()?;
    let package = String::from_utf8_lossy(&owner.stdout).split(':').next()?.trim().to_owned();
    if package.is_empty() {
        return None;
    }
    let version = std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", &package])
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    // "2.1.11-1+deb12u1" -> "2.1.11"
    let upstream = version.split(['-', '+', '~']).next()?.trim_start_matches(|c: char| !c.is_ascii_digit() || c == ':');
    (!upstream.is_empty()).then(|| upstream.rsplit(':').next().unwrap_or(upstream).to_owned())
}

/// Resolves `--target` into a checked target.
pub fn resolve(spec: &TargetSpec, paths: &SystemPaths) -> Result<Target, TargetError> {
    match spec {
        TargetSpec::Kernel => {
            check_kernel(paths)?;
            if !privileged() {
                return Err(TargetError::NotPrivileged);
            }
            let version = std::fs::read_to_string(paths.zfs_module.join("version"))
                .ok()
                .map(|v| v.trim().split('-').next().unwrap_or("").to_owned());
            Ok(Target {
                kind: TargetKind::Kernel,
                object: "zfs.ko".into(),
                zfs_version: version,
                build_id: None,
                functions: kernel_functions(&paths.kallsyms),
            })
        }
        TargetSpec::Libzpool(explicit) => {
            let path = match explicit {
                Some(p) => p.clone(),
                None => find_libzpool().ok_or_else(|| TargetError::LibraryMissing {
                    path: "the dynamic linker's search path".into(),
                    reason: "no libzpool.so.5 there".into(),
                })?,
            };
            let info = elf::read_library(&path).map_err(|e| TargetError::LibraryMissing {
                path: path.display().to_string(),
                reason: match &e {
                    elf::ElfError::Read { source, .. } => source.to_string(),
                    elf::ElfError::Parse { source, .. } => format!("not an ELF library ({source})"),
                },
            })?;
            if !privileged() {
                return Err(TargetError::NotPrivileged);
            }
            Ok(Target {
                kind: TargetKind::Libzpool,
                object: path.display().to_string(),
                zfs_version: info.zfs_version.clone().or_else(|| libzpool_version(&path)),
                build_id: info.build_id,
                functions: info.functions,
            })
        }
        TargetSpec::Auto => {
            if paths.zfs_module.exists() {
                resolve(&TargetSpec::Kernel, paths)
            } else if find_libzpool().is_some() {
                resolve(&TargetSpec::Libzpool(None), paths)
            } else {
                Err(TargetError::NothingToTrace)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_spec_parses() {
        assert_eq!("kernel".parse::<TargetSpec>().unwrap(), TargetSpec::Kernel);
        assert_eq!("libzpool".parse::<TargetSpec>().unwrap(), TargetSpec::Libzpool(None));
        assert_eq!(
            "libzpool=/opt/lib/libzpool.so".parse::<TargetSpec>().unwrap(),
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
        let err = resolve(&TargetSpec::Kernel, &paths).unwrap_err().to_string();
        assert!(err.contains("kprobes are not available on this kernel"), "{err}");
        assert!(err.contains("no zfs module is loaded"), "{err}");
        assert!(err.contains("--target libzpool"), "{err}");
    }

    #[test]
    fn missing_library_names_the_path() {
        let spec = TargetSpec::Libzpool(Some("/nonexistent/libzpool.so.5".into()));
        let err = resolve(&spec, &SystemPaths::default()).unwrap_err().to_string();
        assert!(err.starts_with("libzpool not found at /nonexistent/libzpool.so.5"), "{err}");
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
        assert!(functions.contains_key("zfs_zstd_compress"), "zstd lives in zzstd.ko");
        assert_eq!(functions["zio_write_compress"], 0xffffffffc0001000);
    }
}
