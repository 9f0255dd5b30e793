//! `zprof offsets`: compiles the struct offsets of a zfs.ko build without
//! BTF from its dkms tree and kernel headers, and stores them.

use super::common::UsageError;
use crate::cli::args::OffsetsArgs;

/// `zprof offsets`: compiles the table for a module build and stores it.
pub(super) fn offsets_cmd(args: OffsetsArgs) -> anyhow::Result<i32> {
    use crate::zfs::offsets::kbuild::{self as ko, BuildInputs};
    let module_dir = std::path::Path::new("/sys/module/zfs");
    let (build_id, release, version) = match &args.module {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| UsageError(format!("cannot read --module {}: {e}", path.display())))?;
            if !bytes.starts_with(b"\x7fELF") {
                return Err(UsageError(format!(
                    "--module {} is not an ELF file: give a zfs.ko",
                    path.display()
                ))
                .into());
            }
            (
                crate::zfs::elf::build_id(&bytes),
                ko::module_kernel_release(&bytes).unwrap_or_default(),
                None,
            )
        }
        None if module_dir.exists() => (
            ko::loaded_module_build_id(module_dir),
            ko::kernel_release(),
            ko::loaded_module_version(module_dir),
        ),
        None => {
            return Err(UsageError(
                "no zfs module is loaded: pass --module FILE (a zfs.ko) to make a table for it"
                    .into(),
            )
            .into());
        }
    };
    let inputs = match args.zfs_build {
        Some(tree) => BuildInputs::for_tree(tree, args.kernel_build, &release),
        None => BuildInputs::locate(version.as_deref(), args.kernel_build, &release),
    }
    .map_err(UsageError)?;
    let table = ko::compile(&inputs, build_id.as_deref()).map_err(UsageError)?;
    let path = match (&args.output, &build_id) {
        (Some(path), _) => path.clone(),
        (None, Some(id)) => ko::cache_path(id),
        (None, None) => {
            return Err(UsageError(
                "the module has no build-id to cache its table by: pass -o FILE".into(),
            )
            .into());
        }
    };
    ko::store(&table, &path).map_err(UsageError)?;
    println!(
        "{}: {} offsets of OpenZFS {} for zfs.ko build {} ({})",
        path.display(),
        table.offsets.len(),
        table.zfs_version,
        build_id.as_deref().unwrap_or("without a build-id"),
        table.source
    );
    Ok(0)
}
