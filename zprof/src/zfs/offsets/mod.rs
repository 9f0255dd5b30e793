//! Struct member offsets of the traced ZFS build, found at run time.
//!
//! The vdev stage reads zio_t members (io_delta, io_delay, io_type, io_priority,
//! io_vd) and pool attribution follows a pointer or two; their offsets depend on
//! the OpenZFS version and on build options (Debian's libzpool is built with
//! DEBUG, which changes layouts). Sources, in order:
//! - kernel: the module's BTF (/sys/kernel/btf/zfs) when it has any; else a
//!   table compiled from the module's own build inputs (dkms tree and kernel
//!   headers) and cached per module build-id ([`crate::zfs::offsets::kbuild`]);
//! - libzpool: a table keyed by the library's GNU build-id, generated from the
//!   matching headers by `zprof/offsets/zfs_offsets.c` (see its README);
//! - `--offsets FILE`: such a table for a build zprof does not ship (its
//!   build-ids must name the traced build).
//!
//! Without offsets the stages that need them say so and fall back.

pub mod btf;
pub mod kbuild;

use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};
use zprof_common::{OFFSET_UNKNOWN, Offsets, RequestOffsets};

/// Tables shipped with zprof, generated from real headers.
const BUILTIN_TABLES: &[(&str, &str)] = &[
    (
        "libzpool-2.1.11-debian.json",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/offsets/libzpool-2.1.11-debian.json"
        )),
    ),
    (
        "libzpool-2.3.2-debian.json",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/offsets/libzpool-2.3.2-debian.json"
        )),
    ),
    (
        "libzpool-2.3.9-debian.json",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/offsets/libzpool-2.3.9-debian.json"
        )),
    ),
    (
        "libzpool-2.4.4-debian.json",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/offsets/libzpool-2.4.4-debian.json"
        )),
    ),
];

/// The OpenZFS release of a libzpool build zprof has a table for, by build-id:
/// the surest way to name a build (Debian's 2.3.2 carries no version string).
pub fn release_of_build(build_id: &str) -> Option<String> {
    builtin_table_for(build_id)
        .ok()
        .flatten()
        .map(|(_, table)| table.zfs_version)
}

/// The built-in table (file name and contents) made for the build `build_id`.
fn builtin_table_for(build_id: &str) -> Result<Option<(&'static str, OffsetsTable)>, String> {
    for (name, text) in BUILTIN_TABLES {
        let table = parse_table(text).map_err(|e| format!("built-in table {name}: {e}"))?;
        if table
            .build_ids
            .iter()
            .any(|id| id.eq_ignore_ascii_case(build_id))
        {
            return Ok(Some((name, table)));
        }
    }
    Ok(None)
}

/// An offsets table file.
#[derive(Debug, Deserialize, Serialize)]
pub struct OffsetsTable {
    /// OpenZFS version the table was made for.
    pub zfs_version: String,
    /// What it was generated from.
    #[serde(default)]
    pub source: String,
    /// GNU build-ids of the library builds it describes.
    pub build_ids: Vec<String>,
    /// "struct.member" -> byte offset.
    pub offsets: BTreeMap<String, u32>,
    /// "struct.member" and "struct" -> size in bytes.
    #[serde(default)]
    pub sizes: BTreeMap<String, u32>,
}

/// Offsets found, and where they came from (shown in reports).
#[derive(Debug, Clone)]
pub struct FoundOffsets {
    /// Values for the eBPF programs (`valid == 0` when none were found).
    pub offsets: Offsets,
    /// Human-readable origin, or why there are none.
    pub source: String,
    /// "struct.member" -> offset of each member zprof reads (empty when none
    /// were found): shown by `zprof probes --format json`, compared across sources.
    pub values: BTreeMap<String, u32>,
    /// ZIO_FLAG_IO_BYPASS as the module's BTF defines it (an enumerator of
    /// OpenZFS 2.1's `enum zio_flag`; later releases use #defines, which BTF
    /// does not carry, and the release's series gives the bit).
    pub zio_flag_io_bypass: Option<u64>,
    /// What the request layer reads (kernel target; `valid == 0` elsewhere).
    pub request: RequestOffsets,
    /// Why `request` is not valid, when it is not.
    pub request_missing: Option<String>,
}

impl FoundOffsets {
    fn none(reason: String) -> Self {
        FoundOffsets {
            offsets: Offsets::default(),
            request_missing: Some(reason.clone()),
            source: reason,
            values: BTreeMap::new(),
            zio_flag_io_bypass: None,
            request: RequestOffsets::default(),
        }
    }

    fn found((offsets, values): (Offsets, BTreeMap<String, u32>), source: String) -> Self {
        FoundOffsets {
            offsets,
            source,
            values,
            zio_flag_io_bypass: None,
            request: RequestOffsets::default(),
            request_missing: Some("libzpool has no file system or zvol layer".into()),
        }
    }

    /// Adds the request layer's members (kernel target), or why they are missing.
    fn with_request(mut self, lookup: impl Fn(&str, &str) -> Option<u32>) -> Self {
        match build_request(lookup) {
            Ok((request, values)) => {
                self.request = request;
                self.values.extend(values);
                self.request_missing = None;
            }
            Err(e) => self.request_missing = Some(e),
        }
        self
    }
}

/// What the request layer reads: (struct, member) pairs in `RequestOffsets`
/// field order after its two flag bits, which are enumerators of the
/// kernel's enum req_flag_bits ("enum", name). bio.bi_iter + bvec_iter.bi_size
/// make one field.
const REQUEST_NEEDED: [(&str, &str); 19] = [
    ("enum", "__REQ_FUA"),
    ("enum", "__REQ_PREFLUSH"),
    ("bio", "bi_opf"),
    ("bio", "bi_iter"),
    ("bvec_iter", "bi_size"),
    ("bio", "bi_bdev"),
    ("block_device", "bd_disk"),
    ("gendisk", "private_data"),
    ("zvol_state", "zv_objset"),
    ("zvol_state", "zv_volblocksize"),
    ("znode", "z_inode"),
    ("inode", "i_sb"),
    ("super_block", "s_fs_info"),
    ("zfsvfs", "z_os"),
    ("objset", "os_dsl_dataset"),
    ("dsl_dataset", "ds_dir"),
    ("dsl_dir", "dd_parent"),
    ("dsl_dir", "dd_myname"),
    ("zfs_uio", "uio_resid"),
];

/// Module structs among [`REQUEST_NEEDED`] (the others are the kernel's own).
const REQUEST_MODULE_STRUCTS: &[&str] = &[
    "zvol_state",
    "znode",
    "zfsvfs",
    "objset",
    "dsl_dataset",
    "dsl_dir",
    "zfs_uio",
];

/// The value of each (struct, member) of `needed`, in order, and by name;
/// names the first member `lookup` cannot find.
fn look_up_all<const N: usize>(
    needed: &[(&str, &str); N],
    lookup: impl Fn(&str, &str) -> Option<u32>,
) -> Result<([u32; N], BTreeMap<String, u32>), String> {
    let mut values = [0u32; N];
    let mut named = BTreeMap::new();
    for (slot, (structure, member)) in values.iter_mut().zip(needed) {
        *slot =
            lookup(structure, member).ok_or_else(|| format!("{structure}.{member} not found"))?;
        named.insert(format!("{structure}.{member}"), *slot);
    }
    Ok((values, named))
}

fn build_request(
    lookup: impl Fn(&str, &str) -> Option<u32>,
) -> Result<(RequestOffsets, BTreeMap<String, u32>), String> {
    let (values, named) = look_up_all(&REQUEST_NEEDED, lookup)?;
    let [
        fua,
        preflush,
        opf,
        iter,
        size,
        bdev,
        disk,
        private,
        zv_objset,
        zv_volblocksize,
        z_inode,
        i_sb,
        s_fs_info,
        z_os,
        os_dsl_dataset,
        ds_dir,
        dd_parent,
        dd_myname,
        uio_resid,
    ] = values;
    let request = RequestOffsets {
        valid: 1,
        req_fua_bit: fua,
        req_preflush_bit: preflush,
        bio_opf: opf,
        bio_size: iter + size,
        bio_bdev: bdev,
        bdev_disk: disk,
        disk_private: private,
        zvol_objset: zv_objset,
        zvol_volblocksize: zv_volblocksize,
        znode_inode: z_inode,
        inode_sb: i_sb,
        sb_fs_info: s_fs_info,
        zfsvfs_os: z_os,
        objset_dataset: os_dsl_dataset,
        dataset_dir: ds_dir,
        dir_parent: dd_parent,
        dir_name: dd_myname,
        uio_resid,
        pad: 0,
    };
    Ok((request, named))
}

/// Members zprof needs, as (struct, member) pairs, in `Offsets` field order.
const NEEDED: [(&str, &str); 23] = [
    ("zio", "io_type"),
    ("zio", "io_priority"),
    ("zio", "io_spa"),
    ("zio", "io_vd"),
    ("zio", "io_delta"),
    ("zio", "io_delay"),
    ("zio", "io_size"),
    ("vdev", "vdev_guid"),
    ("zilog", "zl_spa"),
    ("dsl_pool", "dp_spa"),
    ("objset", "os_spa"),
    ("dmu_tx", "tx_pool"),
    ("zio", "io_error"),
    ("zio", "io_flags"),
    ("zio", "io_timestamp"),
    ("vdev", "vdev_top"),
    ("vdev", "vdev_islog"),
    ("vdev", "vdev_children"),
    ("zio", "io_private"),
    ("vdev", "vdev_id"),
    ("vdev", "vdev_alloc_bias"),
    ("vdev", "vdev_ops"),
    ("vdev_ops", "vdev_op_type"),
];

/// Members zprof reads where the source has them and does without
/// otherwise (a table made before it read them): only what each gives is
/// lost. In `Offsets` field order after [`NEEDED`]'s.
const OPTIONAL: [(&str, &str); 8] = [
    ("txg_stat", "ndirty"),
    ("txg_stat", "vs1"),
    ("txg_stat", "vs2"),
    ("vdev_stat", "vs_ops"),
    ("vdev_stat", "vs_bytes"),
    ("spa", "spa_special_class"),
    ("spa", "spa_dedup_class"),
    ("dmu_recv_cookie", "drc_os"),
];

/// Every struct [`NEEDED`] and [`OPTIONAL`] name, once (what a BTF reader
/// looks for).
fn structs_read() -> Vec<&'static str> {
    let mut structs: Vec<&str> = NEEDED
        .iter()
        .chain(&OPTIONAL)
        .map(|(structure, _)| *structure)
        .collect();
    structs.sort_unstable();
    structs.dedup();
    structs
}

/// Builds `Offsets` (and the values by name) from a lookup; names the first
/// needed member it cannot find.
fn build(
    lookup: impl Fn(&str, &str) -> Option<u32>,
) -> Result<(Offsets, BTreeMap<String, u32>), String> {
    let (values, mut named) = look_up_all(&NEEDED, &lookup)?;
    let [
        txg_stat_ndirty,
        txg_stat_vs1,
        txg_stat_vs2,
        vdev_stat_ops,
        vdev_stat_bytes,
        spa_special_class,
        spa_dedup_class,
        dmu_recv_cookie_os,
    ] = OPTIONAL.map(|(structure, member)| {
        let found = lookup(structure, member);
        if let Some(value) = found {
            named.insert(format!("{structure}.{member}"), value);
        }
        found.unwrap_or(OFFSET_UNKNOWN)
    });
    let [
        zio_type,
        zio_priority,
        zio_spa,
        zio_vd,
        zio_delta,
        zio_delay,
        zio_size,
        vdev_guid,
        zilog_spa,
        dsl_pool_spa,
        objset_spa,
        dmu_tx_pool,
        zio_error,
        zio_flags,
        zio_timestamp,
        vdev_top,
        vdev_islog,
        vdev_children,
        zio_private,
        vdev_id,
        vdev_alloc_bias,
        vdev_ops,
        vdev_op_type,
    ] = values;
    let offsets = Offsets {
        valid: 1,
        zio_type,
        zio_priority,
        zio_spa,
        zio_vd,
        zio_delta,
        zio_delay,
        zio_size,
        vdev_guid,
        zilog_spa,
        dsl_pool_spa,
        objset_spa,
        dmu_tx_pool,
        zio_error,
        zio_flags,
        zio_timestamp,
        vdev_top,
        vdev_islog,
        vdev_children,
        zio_private,
        vdev_id,
        vdev_alloc_bias,
        vdev_ops,
        vdev_op_type,
        txg_stat_ndirty,
        txg_stat_vs1,
        txg_stat_vs2,
        vdev_stat_ops,
        vdev_stat_bytes,
        spa_special_class,
        spa_dedup_class,
        dmu_recv_cookie_os,
    };
    Ok((offsets, named))
}

fn from_table(table: &OffsetsTable) -> Result<(Offsets, BTreeMap<String, u32>), String> {
    build(|s, m| table.member(s, m))
}

impl OffsetsTable {
    /// The offset of `structure.member` in the table.
    fn member(&self, structure: &str, member: &str) -> Option<u32> {
        self.offsets.get(&format!("{structure}.{member}")).copied()
    }
}

/// Parses a table file's text.
pub fn parse_table(text: &str) -> Result<OffsetsTable, serde_json::Error> {
    serde_json::from_str(text)
}

/// Offsets from a table file given by the user: its build-ids must name the
/// traced build (`what`: "libzpool" or "zfs.ko"), else it is refused.
fn from_file(
    path: &Path,
    build_id: Option<&str>,
    what: &str,
    remedy: &str,
) -> Result<FoundOffsets, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read offsets table {}: {e}", path.display()))?;
    let table = parse_table(&text)
        .map_err(|e| format!("offsets table {} is malformed: {e}", path.display()))?;
    // A table made for another build would be believed field by field:
    // garbage pool names, vdev rows gone. Its build-ids must name this one.
    let matches = build_id.map(|id| table.build_ids.iter().any(|t| t.eq_ignore_ascii_case(id)));
    if let (Some(false), Some(id)) = (matches.filter(|_| !table.build_ids.is_empty()), build_id) {
        return Err(format!(
            "offsets table {} was made for {what} build {}, not for the traced build {id}: its layouts may differ; {remedy}",
            path.display(),
            table.build_ids.join(", ")
        ));
    }
    let offsets =
        from_table(&table).map_err(|e| format!("offsets table {}: {e}", path.display()))?;
    let checked = match matches {
        Some(true) => "its build-id matches",
        _ => "unchecked: the table or the traced build names no build-id",
    };
    let found = FoundOffsets::found(
        offsets,
        format!(
            "{} (OpenZFS {}, {}; {checked})",
            path.display(),
            table.zfs_version,
            table.source
        ),
    );
    Ok(if what == "zfs.ko" {
        found.with_request(|s, m| table.member(s, m))
    } else {
        found
    })
}

/// Offsets for a libzpool build, by build-id, from the built-in tables or `extra`.
pub fn for_libzpool(build_id: Option<&str>, extra: Option<&Path>) -> Result<FoundOffsets, String> {
    if let Some(path) = extra {
        return from_file(
            path,
            build_id,
            "libzpool",
            "generate a table for this build with zprof/offsets/zfs_offsets.c",
        );
    }
    let Some(build_id) = build_id else {
        return Ok(FoundOffsets::none(
            "the library has no build-id, so its struct layouts are unknown; pass --offsets FILE"
                .into(),
        ));
    };
    if let Some((name, table)) = builtin_table_for(build_id)? {
        let offsets = from_table(&table).map_err(|e| format!("built-in table {name}: {e}"))?;
        return Ok(FoundOffsets::found(
            offsets,
            format!(
                "built-in table {name} (OpenZFS {}, {})",
                table.zfs_version, table.source
            ),
        ));
    }
    Ok(FoundOffsets::none(format!(
        "libzpool build {build_id} is not in zprof's offsets tables; generate one with zprof/offsets/zfs_offsets.c and pass --offsets FILE"
    )))
}

/// Where the kernel target looks for offsets, in order: `--offsets`, the
/// module's BTF, the table cached for its build, a compile from its build inputs.
pub struct KernelSources<'a> {
    /// /sys/kernel/btf/zfs.
    pub module_btf: &'a Path,
    /// /sys/kernel/btf/vmlinux (the base of the module's split BTF).
    pub vmlinux_btf: &'a Path,
    /// `--offsets FILE`.
    pub table: Option<&'a Path>,
    /// The loaded module's GNU build-id.
    pub build_id: Option<&'a str>,
    /// The module's OpenZFS version (names its dkms tree).
    pub zfs_version: Option<&'a str>,
    /// `uname -r` (names the kernel's build directory).
    pub kernel_release: &'a str,
}

/// Offsets for the kernel module; an error only for a bad `--offsets` file.
pub fn for_kernel(sources: &KernelSources) -> Result<FoundOffsets, String> {
    if let Some(path) = sources.table {
        return from_file(
            path,
            sources.build_id,
            "zfs.ko",
            "make one for this build with `zprof offsets`",
        );
    }
    let no_btf = match from_btf(sources.module_btf, sources.vmlinux_btf) {
        Ok(found) => return Ok(found),
        Err(reason) => reason,
    };
    let Some(build_id) = sources.build_id else {
        return Ok(FoundOffsets::none(format!(
            "{no_btf}, and the module shows no build-id to find or cache a table by"
        )));
    };
    let cached = kbuild::cache_path(build_id);
    let (stale, older) = match read_cached(&cached, build_id) {
        Cached::Serves(found) => return Ok(found),
        Cached::Older(found, why) => (why, Some(found)),
        Cached::Stale(why) => (why, None),
    };
    let compiled = kbuild::BuildInputs::locate(sources.zfs_version, None, sources.kernel_release)
        .and_then(|inputs| kbuild::compile(&inputs, Some(build_id)));
    Ok(match (compiled, older) {
        (Ok(table), _) => {
            let offsets = match from_table(&table) {
                Ok(offsets) => offsets,
                Err(e) => {
                    return Ok(FoundOffsets::none(format!(
                        "{no_btf}; the table compiled from its headers lacks {e}"
                    )));
                }
            };
            let stored = match kbuild::store(&table, &cached) {
                Ok(()) => format!("cached in {}", cached.display()),
                Err(e) => format!("not cached: {e}"),
            };
            FoundOffsets::found(
                offsets,
                format!(
                    "headers compiled here: OpenZFS {}, {}; {stored}{stale}",
                    table.zfs_version, table.source
                ),
            )
            .with_request(|s, m| table.member(s, m))
        }
        // The older table still serves all but what it lacks.
        (Err(why), Some(found)) => FoundOffsets {
            source: format!(
                "{}{stale}; it could not be compiled again here ({why}), so it is used as it is",
                found.source
            ),
            ..found
        },
        (Err(why), None) => FoundOffsets::none(format!(
            "{no_btf}{stale}; no table for its build {build_id} in {}; and none can be compiled here: {why}. Run `zprof offsets --module zfs.ko -o FILE` where its dkms tree and kernel headers are, then pass --offsets FILE",
            kbuild::cache_dir().display()
        )),
    })
}

/// What the table cached for a module build is worth.
enum Cached {
    /// It gives every member zprof reads.
    Serves(FoundOffsets),
    /// It lacks an optional member (a table from before zprof read it): to
    /// be compiled again, and used as it is if that fails.
    Older(FoundOffsets, String),
    /// Absent, unusable, or without the request layer: to be compiled again.
    Stale(String),
}

/// Reads the table cached at `cached` for module build `build_id`.
fn read_cached(cached: &Path, build_id: &str) -> Cached {
    if !cached.is_file() {
        return Cached::Stale(String::new());
    }
    match from_file(
        cached,
        Some(build_id),
        "zfs.ko",
        "remove it and run `zprof offsets` again",
    ) {
        Ok(found) if found.request_missing.is_some() => Cached::Stale(format!(
            " (replacing the cached table, made before the request layer: {})",
            found.request_missing.unwrap_or_default()
        )),
        Ok(found) => {
            let found = FoundOffsets {
                source: format!("headers, cached: {}", found.source),
                ..found
            };
            if found.offsets.dmu_recv_cookie_os == OFFSET_UNKNOWN {
                let why = " (the cached table was made before zprof read a receive's objset)";
                Cached::Older(found, why.into())
            } else {
                Cached::Serves(found)
            }
        }
        Err(e) => Cached::Stale(format!(" (replacing the cached table, unusable: {e})")),
    }
}

/// Offsets from the module's BTF, or why there are none.
fn from_btf(module_btf: &Path, vmlinux_btf: &Path) -> Result<FoundOffsets, String> {
    let Ok(split) = std::fs::read(module_btf) else {
        return Err(format!(
            "{} is absent: zfs.ko was built without BTF (dkms builds usually are)",
            module_btf.display()
        ));
    };
    let base = std::fs::read(vmlinux_btf)
        .map_err(|e| format!("cannot read {}: {e}", vmlinux_btf.display()))?;
    let structs = structs_read();
    let found = btf::struct_offsets(&split, Some(&base), &structs)
        .map_err(|e| format!("module BTF {}: {e}", module_btf.display()))?;
    let (offsets, values) = build(|s, m| found.get(s).and_then(|members| members.get(m)).copied())
        .map_err(|e| format!("module BTF {}: {e}", module_btf.display()))?;
    let found_offsets = FoundOffsets {
        zio_flag_io_bypass: btf::enumerator(&split, Some(&base), "ZIO_FLAG_IO_BYPASS")
            .ok()
            .flatten(),
        ..FoundOffsets::found(
            (offsets, values),
            format!("module BTF {}", module_btf.display()),
        )
    };
    Ok(with_request_from_btf(found_offsets, &split, &base))
}

/// The request layer's members from the module's BTF and the kernel's own.
fn with_request_from_btf(found: FoundOffsets, split: &[u8], base: &[u8]) -> FoundOffsets {
    let module = btf::struct_offsets(split, Some(base), REQUEST_MODULE_STRUCTS).unwrap_or_default();
    let kernel_structs: Vec<&str> = REQUEST_NEEDED
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| *s != "enum" && !REQUEST_MODULE_STRUCTS.contains(s))
        .collect();
    let kernel = btf::struct_offsets(base, None, &kernel_structs).unwrap_or_default();
    let enumerator = |name: &str| {
        btf::enumerator(base, None, name)
            .ok()
            .flatten()
            .map(|v| v as u32)
    };
    found.with_request(|s, m| match s {
        "enum" => enumerator(m),
        _ => module
            .get(s)
            .or_else(|| kernel.get(s))
            .and_then(|members| members.get(m))
            .copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_BUILD_ID: &str = "3d4474bd253c6abf28f24b1f054b14e57578c277";

    #[test]
    fn builtin_table_matches_debian_build() {
        let found = for_libzpool(Some(DEBIAN_BUILD_ID), None).unwrap();
        assert_eq!(found.offsets.valid, 1);
        // Values generated from the 2.1.11 DEBUG headers (zprof/offsets/README.md).
        assert_eq!(found.offsets.zio_delta, 656);
        assert_eq!(found.offsets.zio_delay, 664);
        assert_eq!(found.offsets.vdev_guid, 8);
        assert!(found.source.contains("2.1.11"));
    }

    #[test]
    fn unknown_build_says_what_to_do() {
        let found = for_libzpool(Some("00ff"), None).unwrap();
        assert_eq!(found.offsets.valid, 0);
        assert!(found.source.contains("--offsets FILE"), "{}", found.source);
    }

    #[test]
    fn missing_member_is_named() {
        let table = OffsetsTable {
            zfs_version: "x".into(),
            source: String::new(),
            build_ids: vec![],
            offsets: BTreeMap::from([("zio.io_type".to_owned(), 1)]),
            sizes: BTreeMap::new(),
        };
        assert_eq!(from_table(&table).unwrap_err(), "zio.io_priority not found");
    }

    #[test]
    fn malformed_table_file_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("zprof-offsets-{}.json", std::process::id()));
        std::fs::write(&path, "{ not json").unwrap();
        let err = for_libzpool(None, Some(&path)).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("is malformed"), "{err}");
    }

    #[test]
    fn a_table_for_another_build_is_refused() {
        let (_, text) = BUILTIN_TABLES[0];
        let mut table: serde_json::Value = serde_json::from_str(text).unwrap();
        let own = table["build_ids"][0].as_str().unwrap().to_owned();
        let path =
            std::env::temp_dir().join(format!("zprof-foreign-offsets-{}.json", std::process::id()));
        table["build_ids"] = serde_json::json!(["00ff"]);
        std::fs::write(&path, table.to_string()).unwrap();
        let err = for_libzpool(Some(&own), Some(&path)).unwrap_err();
        table["build_ids"] = serde_json::json!([own]);
        std::fs::write(&path, table.to_string()).unwrap();
        let found = for_libzpool(Some(&own), Some(&path)).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(
            err.contains("was made for libzpool build 00ff, not for the traced build"),
            "{err}"
        );
        assert!(
            found.source.contains("its build-id matches"),
            "{}",
            found.source
        );
    }

    #[test]
    fn kernel_without_module_btf_or_headers_says_why() {
        let sources = KernelSources {
            module_btf: Path::new("/nonexistent/btf/zfs"),
            vmlinux_btf: Path::new("/sys/kernel/btf/vmlinux"),
            table: None,
            build_id: Some("00ff00ff"),
            zfs_version: Some("0.0.1"),
            kernel_release: "0.0.0-nonexistent",
        };
        let found = for_kernel(&sources).unwrap();
        assert_eq!(found.offsets.valid, 0);
        for part in [
            "without BTF",
            "no table for its build 00ff00ff",
            "/var/lib/dkms/zfs/0.0.1/build",
            "zprof offsets",
        ] {
            assert!(found.source.contains(part), "{part}: {}", found.source);
        }
    }
}
