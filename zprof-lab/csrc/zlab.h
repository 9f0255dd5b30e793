/*
 * zlab.h: the narrow C interface between zprof-lab's Rust code and libzpool
 * (OpenZFS's SPA/DMU/ZIL/ZIO stack as a user-space library).
 *
 * Only plain integers, strings and opaque handles cross this boundary, so the
 * Rust side never depends on a ZFS struct layout. The layouts matter only in
 * zlab.c, which is compiled with the flags libzpool itself was built with.
 * src/ffi.rs mirrors these declarations; keep the two in step.
 */
#ifndef ZLAB_H
#define ZLAB_H

#include <stdint.h>
#include <stddef.h>

typedef struct zl_pool zl_pool_t;
typedef struct zl_ds zl_ds_t;

/*
 * Called for every leaf read/write once the host I/O is done (instead of
 * completing it); issued_ns is when ZFS issued it to the vdev (gethrtime).
 */
typedef void (*zl_io_hook_t)(void *zio, uint64_t vdev_guid, int is_write,
    uint64_t offset, uint64_t size, uint64_t issued_ns);
/* Called when ZFS sees a leaf I/O done (vdev_queue_io_done), before it is. */
typedef void (*zl_done_hook_t)(void *zio);
/* Called for every cache flush of a file vdev; returns 1 if it handled it (no host fsync). */
typedef int (*zl_flush_hook_t)(int fd);

typedef struct zl_leaf {
	uint64_t guid;
	uint32_t is_log;
	uint32_t top;		/* index of the top-level vdev */
	uint32_t is_cache;	/* a cache device (L2ARC), not in the vdev tree */
	uint32_t alloc_bias;	/* its top-level vdev's vdev_alloc_bias */
	uint64_t write_ops, write_bytes, read_ops, read_bytes;
	uint64_t top_id;	/* its top-level vdev's vdev_id */
	char top_type[16];	/* its top-level vdev's type ("raidz") */
	char path[1024];
} zl_leaf_t;

typedef struct zl_pool_stats {
	uint64_t normal_alloc;	/* bytes allocated in the normal class */
	uint64_t log_alloc;	/* bytes allocated in the log class */
	uint64_t special_alloc;	/* bytes allocated in the special class */
	uint64_t special_space;	/* the special class's space */
	uint64_t dspace;	/* usable space of the pool */
	uint64_t last_synced_txg;
	uint64_t dedup_ratio_x100;	/* referenced / allocated of deduped blocks, x 100 */
} zl_pool_stats_t;

typedef struct zl_ds_stats {
	uint64_t referenced;	/* ds_referenced_bytes (allocated, after compression) */
	uint64_t compressed;	/* ds_compressed_bytes (physical size of data) */
	uint64_t uncompressed;	/* ds_uncompressed_bytes (logical referenced) */
	uint64_t compressratio;	/* dsl_get_compressratio(): ratio * 100 */
} zl_ds_stats_t;

typedef struct zl_counters {
	uint64_t lab_zil_commits;	/* zl_commit() calls */
	uint64_t all_zil_commits;	/* every zil_commit() call in the process */
	uint64_t spa_syncs;		/* every spa_sync() call in the process */
	uint64_t txg_min;		/* smallest txg synced since zl_txg_mark() */
	uint64_t txg_max;		/* largest txg synced since zl_txg_mark() */
	uint64_t spa_sync_ns;		/* time spent in spa_sync() */
	uint64_t host_fsyncs;		/* zfs_file_fsync() calls that did a real fsync */
	uint64_t leaf_ios_queued;	/* leaf reads and writes that went through the vdev queue */
	uint64_t leaf_flushes;		/* zfs_file_fsync() calls of file vdevs (leaf cache flushes) */
	uint64_t removal_reads;		/* queued leaf reads at ZIO_PRIORITY_REMOVAL (RAIDZ reflow here) */
	uint64_t removal_writes;	/* queued leaf writes at ZIO_PRIORITY_REMOVAL */
} zl_counters_t;

/* A pool's RAIDZ expansion (pool_raidz_expand_stat_t). */
typedef struct zl_expansion {
	uint64_t state;		/* dsl_scan_state_t: 1 scanning, 2 finished */
	uint64_t to_reflow;	/* bytes the reflow has to move */
	uint64_t reflowed;	/* bytes moved so far */
	uint64_t start_time, end_time;	/* seconds since the epoch */
} zl_expansion_t;

/*
 * The ARC's statistics, read from the sums ZFS keeps (libzpool has no kstats):
 * counters since the process started, sizes now. iohits is 0 before 2.2.
 */
typedef struct zl_arc_stats {
	uint64_t hits, iohits, misses;
	uint64_t demand_data_hits, demand_data_misses;
	uint64_t demand_metadata_hits, demand_metadata_misses;
	uint64_t prefetch_data_hits, prefetch_data_misses;
	uint64_t prefetch_metadata_hits, prefetch_metadata_misses;
	uint64_t l2_hits, l2_misses, l2_read_bytes, l2_write_bytes;
	uint64_t l2_size;	/* logical bytes held by cache devices */
	uint64_t size, c, c_max;
} zl_arc_stats_t;

/*
 * arc_max: cap the ARC at this many bytes (0: ZFS's default, half of the
 * host's memory); the floor is set to half of it, as ZFS only takes a
 * maximum above its floor. l2arc_fast: feed cache devices without the
 * kernel's headroom and prefetch limits, so a short run warms them.
 */
int zl_init(const char *config_path, uint64_t arc_max, int l2arc_fast,
    char *err, size_t errlen);
void zl_arc_stats(zl_arc_stats_t *out);
/*
 * The write throttle's zfs_dirty_data_max, in bytes (after zl_init, which
 * sets it from the host's memory): delays start at 60% of it.
 */
void zl_set_dirty_data_max(uint64_t bytes);
void zl_fini(void);
void zl_set_hooks(zl_io_hook_t io, zl_flush_hook_t flush, zl_done_hook_t done);
void zl_get_counters(zl_counters_t *out);
void zl_txg_mark(void);

/*
 * Create and open a pool: ngroups top-level vdevs of `width` files each
 * (group_type "file" needs width 1; "mirror"; "raidz" with nparity), plus
 * nlogs log vdevs (one file each) and ncache cache devices (L2ARC, one
 * file each). paths has ngroups*width entries.
 */
int zl_pool_create(const char *name, const char *group_type, int nparity,
    int width, int ngroups, const char *const *paths, uint64_t ashift,
    const char *const *log_paths, int nlogs,
    const char *const *special_paths, int nspecial,
    const char *const *cache_paths, int ncache, zl_pool_t **out,
    char *err, size_t errlen);
int zl_pool_leaves(zl_pool_t *p, zl_leaf_t *out, int max);
void zl_pool_stats(zl_pool_t *p, zl_pool_stats_t *out);
uint64_t zl_pool_sync(zl_pool_t *p, int all);
int zl_pool_export(zl_pool_t *p);
/* RAIDZ expansion (2.3+): attach `path` to the first raidz vdev. */
int zl_pool_expand(zl_pool_t *p, const char *path, uint64_t ashift,
    char *err, size_t errlen);
int zl_pool_expansion(zl_pool_t *p, zl_expansion_t *out);

int zl_ds_open(zl_pool_t *p, const char *dsname, const char *const *pnames,
    const char *const *pvals, int nprops, zl_ds_t **out, char *err,
    size_t errlen);
int zl_obj_create(zl_ds_t *ds, uint64_t blocksize, int *index_out,
    char *err, size_t errlen);
int zl_write(zl_ds_t *ds, int oi, uint64_t off, uint64_t len, const void *buf,
    int sync);
int zl_read(zl_ds_t *ds, int oi, uint64_t off, uint64_t len, void *buf);
int zl_warm(zl_ds_t *ds, int oi, uint64_t off, uint64_t len, uint64_t from,
    uint64_t ahead, void *buf);
void zl_commit(zl_ds_t *ds, int oi);
void zl_ds_stats(zl_ds_t *ds, zl_ds_stats_t *out);
void zl_ds_evict(zl_ds_t *ds);
void zl_ds_close(zl_ds_t *ds);

#endif
