//! What the subcommands share: the error a user can fix, resolving the
//! target with its offsets, and checking an output path before a run.

use crate::{
    cli::args::TargetArgs,
    zfs::offsets::{self, FoundOffsets},
    zfs::target::{self, SystemPaths, Target, TargetKind},
};

/// Bad input that is the user's to fix (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Resolves the target and its struct offsets.
pub(crate) fn prepare(
    args: &TargetArgs,
    traced: &target::Traced,
) -> anyhow::Result<(Target, FoundOffsets)> {
    let mut target = target::resolve(&args.target, &SystemPaths::default(), traced)?;
    if let Some(version) = &args.zfs_version {
        let known = target
            .build_id
            .as_deref()
            .and_then(offsets::release_of_build);
        if let Some(known) = known.as_ref().filter(|k| *k != version) {
            return Err(UsageError(format!(
                "--zfs-version {version} contradicts the build: its build-id is OpenZFS {known}'s; leave --zfs-version out"
            ))
            .into());
        }
        // Given for a build its build-id names already: nothing changes.
        target.zfs_version_given = known.is_none();
        target.zfs_version = Some(version.clone());
    }
    let found = match target.kind {
        TargetKind::Libzpool => {
            offsets::for_libzpool(target.build_id.as_deref(), args.offsets.as_deref())
                .map_err(UsageError)?
        }
        TargetKind::Kernel => offsets::for_kernel(&offsets::KernelSources {
            module_btf: "/sys/kernel/btf/zfs".as_ref(),
            vmlinux_btf: "/sys/kernel/btf/vmlinux".as_ref(),
            table: args.offsets.as_deref(),
            build_id: target.build_id.as_deref(),
            zfs_version: target.zfs_version.as_deref(),
            kernel_release: &crate::zfs::offsets::kbuild::kernel_release(),
        })
        .map_err(UsageError)?,
    };
    Ok((target, found))
}

/// An output path zprof will write at the end of a run: not a directory, in
/// an existing directory, writable.
pub(crate) fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let shown = path.display();
    if path.is_dir() {
        return Err(UsageError(format!(
            "cannot write {shown}: it is a directory (give a file name)"
        ))
        .into());
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "cannot write {shown}: directory {} does not exist",
            dir.display()
        ))
        .into());
    }
    let writable = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
        // SAFETY: access() only reads the NUL-terminated path.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    };
    let target = if path.exists() { path } else { dir };
    // access() answers for root too where it matters: a read-only mount (EROFS).
    if !writable(target) {
        return Err(UsageError(format!(
            "cannot write {shown}: {} is not writable",
            target.display()
        ))
        .into());
    }
    Ok(())
}

/// Loads a recording and, with `--pool`, keeps only those pools' rows (and
/// the rows that name no pool, which cannot be split), saying so in the
/// recording's warnings. A pool the recording does not hold is a usage error
/// naming the ones it does.
pub(crate) fn load_pools(
    path: &std::path::Path,
    pools: &[String],
) -> anyhow::Result<crate::recording::Recording> {
    use crate::recording::pools::{Unpooled, check_pools, restrict};
    let recording = crate::recording::Recording::load(path)?;
    if pools.is_empty() {
        return Ok(recording);
    }
    check_pools(&recording, pools, &path.display().to_string()).map_err(UsageError)?;
    let mut only = restrict(&recording, pools, Unpooled::Keep);
    only.warnings.push(format!(
        "--pool {}: rows that name no pool (compression, dedup lookups, the kernel's file reads and writes) \
         are every pool's; the timeline and CPU profiles are the whole host's",
        pools.join(",")
    ));
    Ok(only)
}
