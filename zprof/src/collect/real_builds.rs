//! What real OpenZFS builds define, for the unit tests of the load-time
//! configuration and the attach plan: each is decided against the functions
//! a build really has, not a list made up to pass.
//!
//! A libzpool set is every name in zfs/catalogue.rs and zfs/releases.rs that
//! is a defined FUNC or IFUNC symbol of the build (`readelf -Ws --dyn-syms`,
//! the symbols zfs::elf::read_library keeps), for Debian's packages, the
//! builds that zprof/offsets/libzpool-*-debian.json describe (same
//! build-ids). The kernel set is the functions zprof attached to in the
//! guest recording tests/data/guest-2.1.11-requests.json: a subset of
//! what that zfs.ko has, so a kernel plan's "not found" proves nothing.
//! Addresses are left out: a plan only passes them on.

use std::collections::HashMap;

use crate::zfs::target::{Target, TargetKind};

/// A real build: what a [`Target`] holds of it.
pub struct RealBuild {
    /// zfs.ko or libzpool.
    pub kind: TargetKind,
    /// Where the build was read.
    pub object: &'static str,
    /// Its OpenZFS release.
    pub zfs_version: &'static str,
    /// Its GNU build-id.
    pub build_id: &'static str,
    /// The catalogue's functions it defines (see the module doc).
    pub functions: &'static [&'static str],
}

impl RealBuild {
    /// The target zprof resolves for this build (`version_given`: with
    /// `--zfs-version`).
    pub fn target(&self, version: Option<&str>, version_given: bool) -> Target {
        Target {
            kind: self.kind,
            object: self.object.into(),
            zfs_version: version.map(str::to_owned),
            zfs_version_given: version_given,
            build_id: Some(self.build_id.into()),
            functions: self.function_map(),
        }
    }

    /// Its functions as a target's map (every address 0).
    pub fn function_map(&self) -> HashMap<String, u64> {
        self.functions
            .iter()
            .map(|f| ((*f).to_owned(), 0))
            .collect()
    }
}

/// Debian 12's libzpool5linux 2.1.11-1+deb12u1.
pub const LIBZPOOL_2_1_11: RealBuild = RealBuild {
    kind: TargetKind::Libzpool,
    object: "/usr/lib/x86_64-linux-gnu/libzpool.so.5",
    zfs_version: "2.1.11",
    build_id: "3d4474bd253c6abf28f24b1f054b14e57578c277",
    functions: &[
        "arc_buf_access",
        "arc_read",
        "bplist_iterate",
        "bpobj_iterate",
        "cv_timedwait_hires",
        "ddt_lookup",
        "ddt_sync",
        "dmu_read",
        "dmu_recv_stream",
        "dmu_tx_assign",
        "dmu_tx_wait",
        "dmu_write",
        "dsl_pool_sync",
        "dsl_pool_sync_done",
        "dsl_scan_sync",
        "lz4_compress_zfs",
        "metaslab_alloc",
        "spa_flush_metaslabs",
        "spa_read_history_add",
        "spa_remove",
        "spa_sync",
        "spa_txg_history_add",
        "spa_txg_history_fini_io",
        "spa_txg_history_set",
        "svr_sync",
        "txg_wait_synced",
        "vdev_config_sync",
        "vdev_get_stats",
        "vdev_queue_io",
        "vdev_queue_io_done",
        "vdev_stat_update",
        "vdev_sync",
        "vdev_sync_done",
        "zfs_zstd_compress",
        "zil_commit",
        "zio_checksum_compute",
        "zio_checksum_error",
        "zio_compress_data",
        "zio_decompress_data",
        "zio_execute",
        "zio_flush",
        "zio_interrupt",
        "zio_read",
        "zio_read_phys",
        "zio_vdev_io_bypass",
        "zio_wait",
        "zio_write_phys",
    ],
};

/// bookworm-backports' libzpool6linux 2.3.2-2~bpo12+2.
pub const LIBZPOOL_2_3_2: RealBuild = RealBuild {
    kind: TargetKind::Libzpool,
    object: "/lib/x86_64-linux-gnu/libzpool.so.6",
    zfs_version: "2.3.2",
    build_id: "aa5ac3b917c3d688984d586629dbe184d3cb587c",
    functions: &[
        "arc_buf_access",
        "arc_read",
        "bplist_iterate",
        "bpobj_iterate",
        "brt_sync",
        "cv_timedwait_hires",
        "ddt_log_begin",
        "ddt_log_commit",
        "ddt_log_take_first",
        "ddt_lookup",
        "ddt_sync",
        "dmu_read",
        "dmu_recv_stream",
        "dmu_tx_assign",
        "dmu_tx_wait",
        "dmu_write",
        "dsl_pool_sync",
        "dsl_pool_sync_done",
        "dsl_scan_sync",
        "metaslab_alloc",
        "spa_flush_metaslabs",
        "spa_read_history_add",
        "spa_remove",
        "spa_sync",
        "spa_txg_history_add",
        "spa_txg_history_fini_io",
        "spa_txg_history_set",
        "svr_sync",
        "txg_wait_synced",
        "vdev_config_sync",
        "vdev_get_stats",
        "vdev_queue_io",
        "vdev_queue_io_done",
        "vdev_stat_update",
        "vdev_sync",
        "vdev_sync_done",
        "zfs_lz4_compress",
        "zfs_zstd_compress",
        "zil_commit",
        "zio_checksum_compute",
        "zio_checksum_error",
        "zio_compress_data",
        "zio_decompress_data",
        "zio_execute",
        "zio_flush",
        "zio_interrupt",
        "zio_read",
        "zio_read_phys",
        "zio_vdev_io_bypass",
        "zio_wait",
        "zio_write_phys",
    ],
};

/// trixie's libzpool6linux 2.3.9-0+deb13u1.
pub const LIBZPOOL_2_3_9: RealBuild = RealBuild {
    kind: TargetKind::Libzpool,
    object: "/usr/lib/x86_64-linux-gnu/libzpool.so.6",
    zfs_version: "2.3.9",
    build_id: "6baf5ab10f420b3961be4436c495290c144bfbb6",
    functions: &[
        "arc_buf_access",
        "arc_read",
        "bplist_iterate",
        "bpobj_iterate",
        "brt_sync",
        "cv_timedwait_hires",
        "ddt_log_begin",
        "ddt_log_commit",
        "ddt_log_take_first",
        "ddt_lookup",
        "ddt_sync",
        "dmu_read",
        "dmu_recv_stream",
        "dmu_tx_assign",
        "dmu_tx_wait",
        "dmu_write",
        "dsl_pool_sync",
        "dsl_pool_sync_done",
        "dsl_scan_sync",
        "metaslab_alloc",
        "spa_flush_metaslabs",
        "spa_read_history_add",
        "spa_remove",
        "spa_sync",
        "spa_txg_history_add",
        "spa_txg_history_fini_io",
        "spa_txg_history_set",
        "svr_sync",
        "txg_wait_synced",
        "txg_wait_synced_flags",
        "vdev_config_sync",
        "vdev_get_stats",
        "vdev_queue_io",
        "vdev_queue_io_done",
        "vdev_stat_update",
        "vdev_sync",
        "vdev_sync_done",
        "zfs_lz4_compress",
        "zfs_zstd_compress",
        "zil_commit",
        "zio_checksum_compute",
        "zio_checksum_error",
        "zio_compress_data",
        "zio_decompress_data",
        "zio_execute",
        "zio_flush",
        "zio_interrupt",
        "zio_read",
        "zio_read_phys",
        "zio_vdev_io_bypass",
        "zio_wait",
        "zio_write_phys",
    ],
};

/// trixie-backports' libzpool7linux 2.4.4-1~bpo13+1.
pub const LIBZPOOL_2_4_4: RealBuild = RealBuild {
    kind: TargetKind::Libzpool,
    object: "/usr/lib/x86_64-linux-gnu/libzpool.so.7",
    zfs_version: "2.4.4",
    build_id: "3e2c7bc392d121c5e7c68c0b4296017a13db6575",
    functions: &[
        "arc_buf_access",
        "arc_read",
        "bplist_iterate",
        "bpobj_iterate",
        "brt_sync",
        "cv_timedwait_hires",
        "ddt_log_begin",
        "ddt_log_commit",
        "ddt_log_take_first",
        "ddt_lookup",
        "ddt_sync",
        "dmu_read",
        "dmu_recv_stream",
        "dmu_tx_assign",
        "dmu_tx_wait",
        "dmu_write",
        "dsl_pool_sync",
        "dsl_pool_sync_done",
        "dsl_scan_sync",
        "metaslab_alloc",
        "spa_flush_metaslabs",
        "spa_read_history_add",
        "spa_remove",
        "spa_sync",
        "spa_txg_history_add",
        "spa_txg_history_fini_io",
        "spa_txg_history_set",
        "svr_sync",
        "txg_wait_synced",
        "txg_wait_synced_flags",
        "vdev_config_sync",
        "vdev_get_stats",
        "vdev_queue_io",
        "vdev_queue_io_done",
        "vdev_stat_update",
        "vdev_sync",
        "vdev_sync_done",
        "zfs_lz4_compress",
        "zfs_zstd_compress",
        "zil_commit",
        "zil_commit_flags",
        "zio_checksum_compute",
        "zio_checksum_error",
        "zio_compress_data",
        "zio_decompress_data",
        "zio_execute",
        "zio_flush",
        "zio_interrupt",
        "zio_read",
        "zio_read_phys",
        "zio_vdev_io_bypass",
        "zio_wait",
        "zio_write_phys",
    ],
};

/// Debian 12's zfs-dkms 2.1.11 on Linux 6.1 in the qemu guest: the
/// functions attached in guest-2.1.11-requests.json.
pub const ZFS_KO_2_1_11_ATTACHED: RealBuild = RealBuild {
    kind: TargetKind::Kernel,
    object: "zfs.ko",
    zfs_version: "2.1.11",
    build_id: "be081e91298ea47aca46252e0ee916a94a8eaaae",
    functions: &[
        "zfs_read",
        "zfs_write",
        "zfs_fsync",
        "zvol_submit_bio",
        "bio_endio",
        "dmu_write_uio_dnode",
        "dmu_read_uio_dnode",
        "dmu_tx_assign",
        "dmu_tx_wait",
        "zio_compress_data",
        "zfs_zstd_compress",
        "lz4_compress_zfs",
        "zio_read",
        "zio_decompress_data",
        "zio_checksum_compute",
        "zio_checksum_error",
        "vdev_stat_update",
        "zio_flush",
        "zil_commit",
        "cv_timedwait_hires",
        "zil_lwb_write_issue",
        "zil_lwb_flush_vdevs_done",
        "spa_sync",
        "txg_wait_synced",
    ],
};
