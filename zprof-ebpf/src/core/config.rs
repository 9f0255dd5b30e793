//! The load-time configuration: one global, `CONFIG`, that user space
//! patches before loading (aya's `override_global`). Filters, struct offsets
//! and release semantics are then constants the verifier sees, not map
//! lookups on every event (libbpf-tools' `const volatile`).

use zprof_common::{Config, Offsets, RequestOffsets, Semantics};

/// Load-time configuration, patched by user space before loading. The name
/// is the one user space sets: do not rename.
#[unsafe(no_mangle)]
pub static CONFIG: Config = Config {
    kernel: 0,
    filter_tgid: 0,
    newtask_pid_offset: 0,
    newtask_flags_offset: 0,
    zio_read_len: 0,
    slow_request_us: 0,
    switch_prev_state_offset: 0,
    switch_next_pid_offset: 0,
    semantics: Semantics {
        zio_flag_io_bypass_bit: 0,
        compress_level_arg: 0,
        flush_mode: 0,
        zio_type_flush: 0,
        zio_flag_config_writer_bit: 0,
    },
    offsets: Offsets {
        valid: 0,
        zio_type: 0,
        zio_priority: 0,
        zio_spa: 0,
        zio_vd: 0,
        zio_delta: 0,
        zio_delay: 0,
        zio_size: 0,
        vdev_guid: 0,
        zilog_spa: 0,
        dsl_pool_spa: 0,
        objset_spa: 0,
        dmu_tx_pool: 0,
        zio_error: 0,
        zio_flags: 0,
        zio_timestamp: 0,
        vdev_top: 0,
        vdev_islog: 0,
        vdev_children: 0,
        zio_private: 0,
        vdev_id: 0,
        vdev_alloc_bias: 0,
        vdev_ops: 0,
        vdev_op_type: 0,
        txg_stat_ndirty: zprof_common::OFFSET_UNKNOWN,
        txg_stat_vs1: zprof_common::OFFSET_UNKNOWN,
        txg_stat_vs2: zprof_common::OFFSET_UNKNOWN,
        vdev_stat_ops: zprof_common::OFFSET_UNKNOWN,
        vdev_stat_bytes: zprof_common::OFFSET_UNKNOWN,
        spa_special_class: zprof_common::OFFSET_UNKNOWN,
        spa_dedup_class: zprof_common::OFFSET_UNKNOWN,
        dmu_recv_cookie_os: zprof_common::OFFSET_UNKNOWN,
    },
    request: RequestOffsets {
        valid: 0,
        req_fua_bit: 0,
        req_preflush_bit: 0,
        bio_opf: 0,
        bio_size: 0,
        bio_bdev: 0,
        bdev_disk: 0,
        disk_private: 0,
        zvol_objset: 0,
        zvol_volblocksize: 0,
        znode_inode: 0,
        inode_sb: 0,
        sb_fs_info: 0,
        zfsvfs_os: 0,
        objset_dataset: 0,
        dataset_dir: 0,
        dir_parent: 0,
        dir_name: 0,
        uio_resid: 0,
        pad: 0,
    },
};

/// A field of `CONFIG`, as patched at load time.
#[inline(always)]
pub fn config_u32(field: &u32) -> u32 {
    // Volatile: the value is patched into .rodata at load time, so the compiler
    // must not fold the default it sees here.
    unsafe { core::ptr::read_volatile(field) }
}

/// Whether the traced code is zfs.ko (kprobes) rather than libzpool (uprobes).
#[inline(always)]
pub fn is_kernel() -> bool {
    config_u32(&CONFIG.kernel) != 0
}

/// Whether user space found the struct offsets of the traced build.
#[inline(always)]
pub fn offsets_valid() -> bool {
    config_u32(&CONFIG.offsets.valid) != 0
}
