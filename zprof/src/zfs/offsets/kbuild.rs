//! Struct offsets of a zfs.ko built without BTF, computed from the module's own
//! build inputs.
//!
//! Distribution builds of zfs.ko carry no BTF, but a host with zfs-dkms has, by
//! construction, what built its module: the configured OpenZFS tree dkms left
//! in /var/lib/dkms/zfs/VERSION/build (its zfs_config.h and generated
//! module/Kbuild hold the exact flags) and the kernel's headers in
//! /lib/modules/RELEASE/build. zprof compiles `zprof/offsets/zfs_offsets.c`
//! (the file that makes the libzpool tables) with -D_KERNEL through that
//! kbuild, to assembly only, and reads offsetof/sizeof from its markers: no
//! module is built or loaded, and a compile takes about a second.
//!
//! The result is cached per module build, keyed by the module's GNU build-id
//! (/sys/module/zfs/notes/.note.gnu.build-id), which changes whenever dkms
//! rebuilds it: in `$ZPROF_CACHE_DIR/kernel-offsets/BUILD-ID.json` (default
//! /var/cache/zprof). A table made on another host with the same build
//! (`zprof offsets --module zfs.ko ...`) can be put there, or passed with
//! `--offsets FILE`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use crate::zfs::offsets::OffsetsTable;

/// The program whose -D_KERNEL build yields the markers (shared with the
/// libzpool tables, so both read the same members).
const OFFSETS_SOURCE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/offsets/zfs_offsets.c"
));

/// What built the module: the configured OpenZFS tree and the kernel's build directory.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildInputs {
    /// Configured OpenZFS tree (zfs_config.h, module/Kbuild, include/).
    pub zfs_build: PathBuf,
    /// The kernel's kbuild directory (headers, Makefile, scripts).
    pub kernel_build: PathBuf,
}

impl BuildInputs {
    /// Where dkms leaves them for OpenZFS `zfs_version` on kernel
    /// `kernel_release` (the kernel build directory: `kernel_build`, else the
    /// tree's own); the error says which is missing and what provides it.
    pub fn locate(
        zfs_version: Option<&str>,
        kernel_build: Option<PathBuf>,
        kernel_release: &str,
    ) -> Result<BuildInputs, String> {
        let Some(version) = zfs_version else {
            return Err("the module does not say its OpenZFS version (/sys/module/zfs/version), so its dkms tree is unknown".into());
        };
        BuildInputs::for_tree(
            PathBuf::from(format!("/var/lib/dkms/zfs/{version}/build")),
            kernel_build,
            kernel_release,
        )
    }

    /// The inputs of a configured tree for a module that runs on
    /// `kernel_release`: the kernel build directory is the one the tree was
    /// configured with unless `kernel_build` says otherwise, and a tree last
    /// configured for another kernel is refused (its zfs_config.h describes
    /// that kernel, and so may the layouts).
    pub fn for_tree(
        zfs_build: PathBuf,
        kernel_build: Option<PathBuf>,
        kernel_release: &str,
    ) -> Result<BuildInputs, String> {
        let makefile = std::fs::read_to_string(zfs_build.join("Makefile")).unwrap_or_default();
        let variable = |name: &str| {
            makefile.lines().find_map(|l| {
                l.strip_prefix(name)?
                    .trim_start()
                    .strip_prefix('=')
                    .map(|v| v.trim().to_owned())
            })
        };
        if let Some(configured) =
            variable("LINUX_VERSION").filter(|v| !kernel_release.is_empty() && v != kernel_release)
        {
            return Err(format!(
                "the OpenZFS tree {} was last configured for kernel {configured}, not {kernel_release} where the module runs (rebuild it for this kernel: dkms build zfs/VERSION -k {kernel_release})",
                zfs_build.display()
            ));
        }
        let kernel_build = kernel_build
            .or_else(|| {
                variable("LINUX_OBJ")
                    .map(PathBuf::from)
                    .filter(|p| p.join("Makefile").is_file())
            })
            .unwrap_or_else(|| PathBuf::from(format!("/lib/modules/{kernel_release}/build")));
        let inputs = BuildInputs {
            zfs_build,
            kernel_build,
        };
        inputs.check()?;
        Ok(inputs)
    }

    /// Both trees hold what the compile needs.
    pub fn check(&self) -> Result<(), String> {
        for file in ["zfs_config.h", "module/Kbuild"] {
            if !self.zfs_build.join(file).is_file() {
                return Err(format!(
                    "no configured OpenZFS tree at {} (no {file}: install zfs-dkms, whose build leaves it there)",
                    self.zfs_build.display()
                ));
            }
        }
        if !self.kernel_build.join("Makefile").is_file() {
            return Err(format!(
                "no kernel build directory at {} (install the kernel's headers package, e.g. linux-headers-$(uname -r))",
                self.kernel_build.display()
            ));
        }
        Ok(())
    }

    /// The OpenZFS release of the tree (its META file's Version).
    pub fn zfs_version(&self) -> Option<String> {
        let meta = std::fs::read_to_string(self.zfs_build.join("META")).ok()?;
        meta.lines()
            .find_map(|l| l.strip_prefix("Version:"))
            .map(|v| v.trim().to_owned())
    }
}

/// Whether a kbuild conditional is known to hold when kbuild builds an
/// external module (then its lines apply), or cannot be told (then neither
/// branch is copied).
fn condition_holds(line: &str) -> Option<bool> {
    let compact: String = line.split_whitespace().collect();
    matches!(
        compact.as_str(),
        "ifneq($(KBUILD_EXTMOD),)" | "ifneq($(KERNELRELEASE),)"
    )
    .then_some(true)
}

/// The flag assignments of a configured module/Kbuild that apply to an
/// external-module build: ZFS_MODULE_CFLAGS, ZFS_MODULE_CPPFLAGS and the
/// include directories they name, outside any branch that cannot be told.
pub fn kbuild_flags(kbuild: &str) -> Vec<String> {
    // One entry per open conditional: whether its current branch applies.
    let mut open: Vec<Option<bool>> = Vec::new();
    let mut kept = Vec::new();
    for line in kbuild.lines() {
        let trimmed = line.trim_start();
        let word = trimmed.split_whitespace().next().unwrap_or("");
        match word {
            "ifeq" | "ifneq" | "ifdef" | "ifndef" => open.push(condition_holds(trimmed)),
            "else" => {
                if let Some(top) = open.last_mut() {
                    *top = top.map(|holds| !holds);
                }
            }
            "endif" => {
                open.pop();
            }
            _ => {
                let applies = open.iter().all(|c| *c == Some(true));
                let variable = ["ZFS_MODULE_CFLAGS", "ZFS_MODULE_CPPFLAGS", "zfs_include"];
                if applies && variable.contains(&word) {
                    kept.push(trimmed.to_owned());
                }
            }
        }
    }
    kept
}

/// "struct.member" (or "struct") -> bytes.
pub type ByName = BTreeMap<String, u32>;

/// Offsets and sizes from the compiled markers ("->field zio.io_spa 144 8",
/// "->struct zio 0 1248").
pub fn parse_markers(asm: &str) -> Result<(ByName, ByName), String> {
    let (mut offsets, mut sizes) = (BTreeMap::new(), BTreeMap::new());
    for line in asm.lines() {
        let Some(at) = line.find("\"->") else {
            continue;
        };
        let text = line[at + 3..].split('"').next().unwrap_or("");
        let parts: Vec<&str> = text.split_whitespace().collect();
        let [kind, name, offset, size] = parts[..] else {
            return Err(format!("unexpected marker line: {line}"));
        };
        let number = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("marker {name}: '{s}' is not a number"))
        };
        match kind {
            "field" => {
                offsets.insert(name.to_owned(), number(offset)?);
                sizes.insert(name.to_owned(), number(size)?);
            }
            "struct" => {
                sizes.insert(name.to_owned(), number(size)?);
            }
            _ => return Err(format!("unexpected marker kind '{kind}' in: {line}")),
        }
    }
    if offsets.is_empty() {
        return Err("the compiled file holds no offsets markers".into());
    }
    Ok((offsets, sizes))
}

/// Compiles the offsets program through the module's kbuild and returns the
/// table for the module build `build_id`.
pub fn compile(inputs: &BuildInputs, build_id: Option<&str>) -> Result<OffsetsTable, String> {
    inputs.check()?;
    let kbuild_path = inputs.zfs_build.join("module/Kbuild");
    let kbuild = std::fs::read_to_string(&kbuild_path)
        .map_err(|e| format!("cannot read {}: {e}", kbuild_path.display()))?;
    let flags = kbuild_flags(&kbuild);
    if !flags.iter().any(|f| f.contains("zfs_config.h")) {
        return Err(format!(
            "{} names no zfs_config.h for external builds: not a configured OpenZFS module tree",
            kbuild_path.display()
        ));
    }
    let dir = ScratchDir::new()?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.0.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", dir.0.join(name).display()))
    };
    write("zprof_offsets.c", OFFSETS_SOURCE)?;
    write(
        "Kbuild",
        &format!(
            "{}\nccflags-y := $(ZFS_MODULE_CFLAGS) $(ZFS_MODULE_CPPFLAGS)\nobj-m := zprof_offsets.o\n",
            flags.join("\n")
        ),
    )?;
    let output = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&inputs.kernel_build)
        .arg(format!("M={}", dir.0.display()))
        .arg("zprof_offsets.s")
        .output()
        .map_err(|e| format!("cannot run make ({e}): install make and gcc, which dkms uses too"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        return Err(format!(
            "compiling the offsets program against {} and {} failed: {}",
            inputs.zfs_build.display(),
            inputs.kernel_build.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    let asm_path = dir.0.join("zprof_offsets.s");
    let asm = std::fs::read_to_string(&asm_path)
        .map_err(|e| format!("make left no {}: {e}", asm_path.display()))?;
    let (offsets, sizes) = parse_markers(&asm)?;
    Ok(OffsetsTable {
        zfs_version: inputs.zfs_version().unwrap_or_else(|| "unknown".into()),
        source: format!(
            "compiled from {} with {}",
            inputs.zfs_build.display(),
            inputs.kernel_build.display()
        ),
        build_ids: build_id.into_iter().map(str::to_owned).collect(),
        offsets,
        sizes,
    })
}

/// A temporary directory removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<ScratchDir, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("zprof-offsets-{}-{nanos}", std::process::id()));
        // A new directory of our own, never one found there: root runs make in it.
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where tables are cached: `$ZPROF_CACHE_DIR/kernel-offsets` (default /var/cache/zprof).
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("ZPROF_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/zprof".into());
    base.join("kernel-offsets")
}

/// The cached table's path for a module build.
pub fn cache_path(build_id: &str) -> PathBuf {
    cache_dir().join(format!("{}.json", build_id.to_ascii_lowercase()))
}

/// Writes `table` to `path` (creating its directory).
pub fn store(table: &OffsetsTable, path: &Path) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let text = serde_json::to_string_pretty(table).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The build-id in a raw ELF note section, as /sys/module/NAME/notes/ shows it.
pub fn note_build_id(note: &[u8]) -> Option<String> {
    let word = |at: usize| {
        note.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut at = 0;
    while at + 12 <= note.len() {
        let (name_size, desc_size, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name_at = at + 12;
        let desc_at = name_at + name_size.div_ceil(4) * 4;
        let name = note.get(name_at..name_at + name_size)?;
        if kind == 3 && name.starts_with(b"GNU") {
            let desc = note.get(desc_at..desc_at + desc_size)?;
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        at = desc_at + desc_size.div_ceil(4) * 4;
    }
    None
}

/// The OpenZFS release of the loaded module (its version without the
/// packaging suffix: "2.1.11-1+deb12u1" is 2.1.11), from sysfs.
pub fn loaded_module_version(module: &Path) -> Option<String> {
    let text = std::fs::read_to_string(module.join("version")).ok()?;
    Some(text.trim().split('-').next().unwrap_or("").to_owned())
}

/// The build-id of the loaded module, from sysfs.
pub fn loaded_module_build_id(module: &Path) -> Option<String> {
    note_build_id(&std::fs::read(module.join("notes/.note.gnu.build-id")).ok()?)
}

/// The kernel release a module file was built for (its modinfo vermagic).
pub fn module_kernel_release(ko: &[u8]) -> Option<String> {
    let key = b"vermagic=";
    let at = ko.windows(key.len()).position(|w| w == key)?;
    let rest = &ko[at + key.len()..];
    let value = &rest[..rest.iter().position(|b| *b == 0 || *b == b' ')?];
    Some(String::from_utf8_lossy(value).into_owned())
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of OpenZFS 2.1.11's configured module/Kbuild (2.3's differs:
    /// one module directory, src/obj redirected, which must not be copied).
    const KBUILD_2_1: &str = "ZFS_MODULES += spl/\nifneq ($(KERNELRELEASE),)\nobj-$(CONFIG_ZFS) := $(ZFS_MODULES)\nZFS_MODULE_CFLAGS += -std=gnu99\nifneq ($(KBUILD_EXTMOD),)\nzfs_include = /b/include\nZFS_MODULE_CFLAGS += -include /b/zfs_config.h\nelse\nzfs_include = $(srctree)/include/zfs\nZFS_MODULE_CFLAGS += -include $(zfs_include)/zfs_config.h\nendif\nZFS_MODULE_CFLAGS += -I$(zfs_include)/os/linux/kernel\nifeq ($(CONFIG_KASAN),y)\nZFS_MODULE_CFLAGS += -Wno-error=frame-larger-than=\nendif\nZFS_MODULE_CPPFLAGS += -D_KERNEL\nZFS_MODULE_CPPFLAGS += -UDEBUG -DNDEBUG\nendif\n";

    #[test]
    fn kbuild_flags_keep_the_external_module_branch_only() {
        let flags = kbuild_flags(KBUILD_2_1);
        assert_eq!(
            flags,
            [
                "ZFS_MODULE_CFLAGS += -std=gnu99",
                "zfs_include = /b/include",
                "ZFS_MODULE_CFLAGS += -include /b/zfs_config.h",
                "ZFS_MODULE_CFLAGS += -I$(zfs_include)/os/linux/kernel",
                "ZFS_MODULE_CPPFLAGS += -D_KERNEL",
                "ZFS_MODULE_CPPFLAGS += -UDEBUG -DNDEBUG",
            ]
        );
        let with_src =
            "ifneq ($(KBUILD_EXTMOD),)\nzfs_include = /b/include\nsrc = /b/module\nendif\n";
        assert_eq!(
            kbuild_flags(with_src),
            ["zfs_include = /b/include"],
            "src/obj are not copied"
        );
    }

    #[test]
    fn markers_are_parsed_and_garbage_is_refused() {
        let asm = "\t.ascii \"->field zio.io_spa 144 8\"\t#,\n\t.ascii \"->struct zio 0 1248\"\t#\n\tret\n";
        let (offsets, sizes) = parse_markers(asm).unwrap();
        assert_eq!(offsets["zio.io_spa"], 144);
        assert_eq!(sizes["zio.io_spa"], 8);
        assert_eq!(sizes["zio"], 1248);
        assert!(
            parse_markers("\tret\n")
                .unwrap_err()
                .contains("no offsets markers")
        );
        assert!(
            parse_markers(".ascii \"->field zio.io_spa $144 8\"")
                .unwrap_err()
                .contains("not a number")
        );
    }

    #[test]
    fn build_id_is_read_from_a_note() {
        // namesz 4, descsz 3, type 3 (NT_GNU_BUILD_ID), "GNU\0", desc padded to 4.
        let mut note = Vec::new();
        for word in [4u32, 3, 3] {
            note.extend(word.to_le_bytes());
        }
        note.extend(b"GNU\0");
        note.extend([0xbe, 0x08, 0x1e, 0]);
        assert_eq!(note_build_id(&note).as_deref(), Some("be081e"));
        assert_eq!(note_build_id(&note[..10]), None);
    }

    #[test]
    fn missing_inputs_name_the_package() {
        let inputs = BuildInputs {
            zfs_build: "/nonexistent/zfs".into(),
            kernel_build: "/nonexistent/kernel".into(),
        };
        assert!(inputs.check().unwrap_err().contains("install zfs-dkms"));
        let err = BuildInputs::locate(None, None, "6.1.0").unwrap_err();
        assert!(err.contains("/sys/module/zfs/version"), "{err}");
    }

    #[test]
    fn a_tree_configured_for_another_kernel_is_refused() {
        let dir = std::env::temp_dir().join(format!("zprof-tree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Makefile"),
            "LINUX_OBJ = /nonexistent\nLINUX_VERSION = 6.1.0-57-amd64\n",
        )
        .unwrap();
        let err = BuildInputs::for_tree(dir.clone(), None, "6.12.57+deb13-amd64").unwrap_err();
        let same = BuildInputs::for_tree(dir.clone(), None, "6.1.0-57-amd64").unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            err.contains("last configured for kernel 6.1.0-57-amd64, not 6.12.57+deb13-amd64"),
            "{err}"
        );
        assert!(same.contains("install zfs-dkms"), "{same}");
    }

    #[test]
    fn vermagic_names_the_kernel() {
        let modinfo = b"\0license=CDDL\0vermagic=6.1.0-57-amd64 SMP preempt mod_unload modversions \0name=zfs\0";
        assert_eq!(
            module_kernel_release(modinfo).as_deref(),
            Some("6.1.0-57-amd64")
        );
        assert_eq!(module_kernel_release(b"no modinfo"), None);
    }
}
