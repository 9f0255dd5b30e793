//! Raw declarations of the C core's interface (`csrc/zlab.h`) and of the one
//! libzpool function the Rust side calls directly (`zio_interrupt`).
//!
//! Only integers, strings and opaque handles cross this boundary; the structs
//! here are zprof-lab's own (`#[repr(C)]`, no ZFS layouts). Keep in step with
//! `csrc/zlab.h`.

use std::ffi::{c_char, c_int, c_void};

/// Opaque pool handle owned by the C core.
#[repr(C)]
pub struct ZlPool {
    _private: [u8; 0],
}

/// Opaque dataset handle owned by the C core.
#[repr(C)]
pub struct ZlDs {
    _private: [u8; 0],
}

/// Device-model hook for a finished leaf read/write (see `zio_delay_interrupt` in zlab.c).
/// `issued_ns` is when ZFS issued it to the vdev (gethrtime, CLOCK_MONOTONIC).
pub type IoHook = extern "C" fn(
    zio: *mut c_void,
    guid: u64,
    is_write: c_int,
    offset: u64,
    size: u64,
    issued_ns: u64,
);
/// Device-model hook called when ZFS sees a leaf I/O done (vdev_queue_io_done).
pub type DoneHook = extern "C" fn(zio: *mut c_void);
/// Device-model hook for a file vdev cache flush; returns 1 when it replaced the host fsync.
pub type FlushHook = extern "C" fn(fd: c_int) -> c_int;

/// One leaf vdev with its I/O counters (`vdev_stat_t` of that leaf).
#[repr(C)]
pub struct ZlLeaf {
    pub guid: u64,
    pub is_log: u32,
    pub top: u32,
    pub is_cache: u32,
    pub alloc_bias: u32,
    pub write_ops: u64,
    pub write_bytes: u64,
    pub read_ops: u64,
    pub read_bytes: u64,
    pub top_id: u64,
    pub top_type: [c_char; 16],
    pub path: [c_char; 1024],
}

/// The ARC's statistics (zlab.h's zl_arc_stats_t).
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct ZlArcStats {
    pub hits: u64,
    pub iohits: u64,
    pub misses: u64,
    pub demand_data_hits: u64,
    pub demand_data_misses: u64,
    pub demand_metadata_hits: u64,
    pub demand_metadata_misses: u64,
    pub prefetch_data_hits: u64,
    pub prefetch_data_misses: u64,
    pub prefetch_metadata_hits: u64,
    pub prefetch_metadata_misses: u64,
    pub l2_hits: u64,
    pub l2_misses: u64,
    pub l2_read_bytes: u64,
    pub l2_write_bytes: u64,
    pub l2_size: u64,
    pub size: u64,
    pub c: u64,
    pub c_max: u64,
}

/// Pool-wide space figures.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct ZlPoolStats {
    pub normal_alloc: u64,
    pub log_alloc: u64,
    pub special_alloc: u64,
    pub special_space: u64,
    pub dspace: u64,
    pub last_synced_txg: u64,
    pub dedup_ratio_x100: u64,
}

/// Dataset accounting (`dsl_dataset_phys_t` fields).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct ZlDsStats {
    pub referenced: u64,
    pub compressed: u64,
    pub uncompressed: u64,
    pub compressratio: u64,
}

/// Process-wide counters kept by the C core's wrappers.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct ZlCounters {
    pub lab_zil_commits: u64,
    pub all_zil_commits: u64,
    pub spa_syncs: u64,
    pub txg_min: u64,
    pub txg_max: u64,
    pub spa_sync_ns: u64,
    pub host_fsyncs: u64,
    pub leaf_ios_queued: u64,
    pub leaf_flushes: u64,
    pub removal_reads: u64,
    pub removal_writes: u64,
}

/// A pool's RAIDZ expansion (zl_expansion_t).
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct ZlExpansion {
    pub state: u64,
    pub to_reflow: u64,
    pub reflowed: u64,
    pub start_time: u64,
    pub end_time: u64,
}

unsafe extern "C" {
    pub fn zl_init(
        config_path: *const c_char,
        arc_max: u64,
        l2arc_fast: c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn zl_arc_stats(out: *mut ZlArcStats);
    pub fn zl_set_dirty_data_max(bytes: u64);
    pub fn zl_fini();
    pub fn zl_set_hooks(io: Option<IoHook>, flush: Option<FlushHook>, done: Option<DoneHook>);
    pub fn zl_get_counters(out: *mut ZlCounters);
    pub fn zl_txg_mark();
    pub fn zl_pool_create(
        name: *const c_char,
        group_type: *const c_char,
        nparity: c_int,
        width: c_int,
        ngroups: c_int,
        paths: *const *const c_char,
        ashift: u64,
        log_paths: *const *const c_char,
        nlogs: c_int,
        special_paths: *const *const c_char,
        nspecial: c_int,
        cache_paths: *const *const c_char,
        ncache: c_int,
        out: *mut *mut ZlPool,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn zl_pool_leaves(p: *mut ZlPool, out: *mut ZlLeaf, max: c_int) -> c_int;
    pub fn zl_pool_stats(p: *mut ZlPool, out: *mut ZlPoolStats);
    pub fn zl_pool_sync(p: *mut ZlPool, all: c_int) -> u64;
    pub fn zl_pool_export(p: *mut ZlPool) -> c_int;
    pub fn zl_pool_expand(
        p: *mut ZlPool,
        path: *const c_char,
        ashift: u64,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn zl_pool_expansion(p: *mut ZlPool, out: *mut ZlExpansion) -> c_int;
    pub fn zl_ds_open(
        p: *mut ZlPool,
        dsname: *const c_char,
        pnames: *const *const c_char,
        pvals: *const *const c_char,
        nprops: c_int,
        out: *mut *mut ZlDs,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn zl_obj_create(
        ds: *mut ZlDs,
        blocksize: u64,
        index_out: *mut c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub fn zl_write(
        ds: *mut ZlDs,
        oi: c_int,
        off: u64,
        len: u64,
        buf: *const c_void,
        sync: c_int,
    ) -> c_int;
    pub fn zl_read(ds: *mut ZlDs, oi: c_int, off: u64, len: u64, buf: *mut c_void) -> c_int;
    pub fn zl_warm(
        ds: *mut ZlDs,
        oi: c_int,
        off: u64,
        len: u64,
        from: u64,
        ahead: u64,
        buf: *mut c_void,
    ) -> c_int;
    pub fn zl_commit(ds: *mut ZlDs, oi: c_int);
    pub fn zl_ds_stats(ds: *mut ZlDs, out: *mut ZlDsStats);
    pub fn zl_ds_evict(ds: *mut ZlDs);
    pub fn zl_ds_close(ds: *mut ZlDs);

    /// libzpool: hand a zio back to the pipeline after its (emulated) device I/O.
    pub fn zio_interrupt(zio: *mut c_void);
}
