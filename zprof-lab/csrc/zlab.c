/*
 * zlab.c: zprof-lab's C core. It does the few things that need OpenZFS's
 * struct layouts (compiled with libzpool's own -DDEBUG -DZFS_DEBUG flags):
 *
 *  - pool/dataset/object life cycle and one write/read/commit per call,
 *    modelled on what a zvol does (range lock, tx, dmu_write, TX_WRITE itx);
 *  - the ZIL get_data callback, so WR_NEED_COPY and WR_INDIRECT records work;
 *  - accounting read from the pool (space, vdev stats, dataset bytes);
 *  - five symbols that the executable exports to take the place of
 *    libzpool's (libzpool reaches them through its PLT):
 *      zio_delay_interrupt  hands each finished leaf I/O to the Rust device
 *                           model, which completes it later (libzpool's own
 *                           version ignores delays outside the kernel);
 *      vdev_queue_io_done   tells the model when ZFS saw the I/O done, so it
 *                           can learn and take out the host's hand-off time;
 *      zfs_file_fsync       cache flushes of file vdevs (they never pass
 *                           through zio_delay_interrupt) go to the model too;
 *      zil_commit, spa_sync counting wrappers around the real functions, so
 *                           the lab can report exact call counts (2.4:
 *                           zil_commit_flags, which zil_close calls too).
 *
 * Everything else (device models, jobs, statistics, output) lives in Rust.
 */
#include <sys/zfs_context.h>
#include <sys/spa.h>
#include <sys/spa_impl.h>
#include <sys/dmu.h>
#include <sys/dmu_tx.h>
#include <sys/dsl_dataset.h>
#include <sys/dsl_pool.h>
#include <sys/dsl_prop.h>
#include <sys/metaslab.h>
#include <sys/zil.h>
#include <sys/zio.h>
#include <sys/vdev_impl.h>
#if ZLAB_OPENZFS >= 20300
#include <sys/vdev_raidz.h>
#endif
#include <sys/zfs_rlock.h>
#include <sys/zfs_file.h>
#include <sys/arc.h>
#include <sys/arc_impl.h>
#include <sys/ddt.h>
#include <sys/fs/zfs.h>
#include <zfeature_common.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <time.h>

#include "zlab.h"

/*
 * The OpenZFS release this core is compiled against, as MAJOR*10000 +
 * MINOR*100 + PATCH (build.rs sets it). The API differences the lab meets
 * are kept here, in one place.
 */
#ifndef ZLAB_OPENZFS
#error "build.rs defines ZLAB_OPENZFS"
#endif
#if ZLAB_OPENZFS >= 20300
/* 2.3 renamed dmu_tx_assign's TXG_* flags to DMU_TX_*. */
#define	ZL_TX_WAIT	DMU_TX_WAIT
#else
#define	ZL_TX_WAIT	TXG_WAIT
#endif
#if ZLAB_OPENZFS >= 20200
/* 2.2 gave zil_open a per-dataset statistics argument (NULL: none). */
#define	ZL_ZIL_OPEN(os, cb)	zil_open((os), (cb), NULL)
#else
#define	ZL_ZIL_OPEN(os, cb)	zil_open((os), (cb))
#endif

/* Declared in sys/dmu_objset.h, which needs sys/zfs_ioctl.h (not shipped). */
extern struct dsl_dataset *dmu_objset_ds(objset_t *os);

#define	ZL_MAX_OBJS	1024

typedef struct zl_obj {
	uint64_t	zo_id;
	uint64_t	zo_blocksize;
	zfs_rangelock_t	zo_rl;
} zl_obj_t;

struct zl_pool {
	char		zp_name[ZFS_MAX_DATASET_NAME_LEN];
	spa_t		*zp_spa;
	_Atomic uint64_t zp_max_txg;	/* highest txg any zl_write used */
};

struct zl_ds {
	zl_pool_t	*zd_pool;
	char		zd_name[ZFS_MAX_DATASET_NAME_LEN];
	objset_t	*zd_os;
	zilog_t		*zd_zilog;
	int		zd_logbias_throughput;
	int		zd_nobjs;
	zl_obj_t	*zd_objs[ZL_MAX_OBJS];
};

static zl_io_hook_t zl_io_hook;
static zl_flush_hook_t zl_flush_hook;
static zl_done_hook_t zl_done_hook;

static _Atomic uint64_t zl_lab_commits, zl_all_commits, zl_syncs, zl_sync_ns;
static _Atomic uint64_t zl_txg_min = UINT64_MAX, zl_txg_max, zl_host_fsyncs;
static _Atomic uint64_t zl_leaf_ios_queued, zl_leaf_flushes;
static _Atomic uint64_t zl_removal_reads, zl_removal_writes;

/*
 * The vdev files of the live pools, by (device, inode): zfs_file_fsync also
 * syncs the pool cache file, with the same flags, and only vdev flushes count
 * as leaf flushes. Registered before spa_create (which already flushes).
 */
#define	ZL_MAX_VDEV_FILES	1024
static struct { dev_t dev; ino_t ino; const void *owner; } zl_vdev_files[ZL_MAX_VDEV_FILES];
static int zl_nvdev_files;
static pthread_mutex_t zl_vdev_files_lock = PTHREAD_MUTEX_INITIALIZER;

static void
zl_vdev_files_add(const char *path, const void *owner)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return;
	pthread_mutex_lock(&zl_vdev_files_lock);
	if (zl_nvdev_files < ZL_MAX_VDEV_FILES) {
		zl_vdev_files[zl_nvdev_files].dev = st.st_dev;
		zl_vdev_files[zl_nvdev_files].ino = st.st_ino;
		zl_vdev_files[zl_nvdev_files].owner = owner;
		zl_nvdev_files++;
	}
	pthread_mutex_unlock(&zl_vdev_files_lock);
}

static void
zl_vdev_files_remove(const void *owner)
{
	pthread_mutex_lock(&zl_vdev_files_lock);
	for (int i = 0; i < zl_nvdev_files; ) {
		if (zl_vdev_files[i].owner == owner)
			zl_vdev_files[i] = zl_vdev_files[--zl_nvdev_files];
		else
			i++;
	}
	pthread_mutex_unlock(&zl_vdev_files_lock);
}

static int
zl_is_vdev_file(int fd)
{
	struct stat st;
	int found = 0;

	if (fstat(fd, &st) != 0)
		return (0);
	pthread_mutex_lock(&zl_vdev_files_lock);
	for (int i = 0; i < zl_nvdev_files && !found; i++)
		found = zl_vdev_files[i].dev == st.st_dev &&
		    zl_vdev_files[i].ino == st.st_ino;
	pthread_mutex_unlock(&zl_vdev_files_lock);
	return (found);
}

static void
zl_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	(void) vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static uint64_t
zl_now_ns(void)
{
	struct timespec ts;

	(void) clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec);
}

/* The real definition of an overridden function: the next one after ours. */
static void *
zl_next(const char *name)
{
	void *fn = dlsym(RTLD_NEXT, name);

	if (fn == NULL) {
		(void) fprintf(stderr, "zprof-lab: cannot find libzpool's %s\n",
		    name);
		abort();
	}
	return (fn);
}

/* ---- overrides of libzpool symbols ---------------------------------- */

void
zio_delay_interrupt(zio_t *zio)
{
	zl_io_hook_t hook = __atomic_load_n(&zl_io_hook, __ATOMIC_ACQUIRE);
	vdev_t *vd = zio->io_vd;

	/*
	 * Every leaf read and write a file vdev issues ends here (the members
	 * of an aggregated I/O are not issued; the aggregate is): the lab's own
	 * count of those that went through the vdev queue, which stamped
	 * io_timestamp (what zpool iostat's latency histograms and zprof's vdev
	 * stage see), against which tests check zprof's.
	 */
	if (vd != NULL && vd->vdev_ops->vdev_op_leaf &&
	    (zio->io_type == ZIO_TYPE_READ || zio->io_type == ZIO_TYPE_WRITE) &&
	    zio->io_timestamp != 0) {
		atomic_fetch_add(&zl_leaf_ios_queued, 1);
		/* The lab removes no device: these are RAIDZ expansion's. */
		if (zio->io_priority == ZIO_PRIORITY_REMOVAL)
			atomic_fetch_add(zio->io_type == ZIO_TYPE_WRITE ?
			    &zl_removal_writes : &zl_removal_reads, 1);
	}

	if (hook != NULL && vd != NULL && vd->vdev_ops->vdev_op_leaf &&
	    (zio->io_type == ZIO_TYPE_READ || zio->io_type == ZIO_TYPE_WRITE)) {
		/* io_delay holds the issue time until zio_vdev_io_done. */
		hook(zio, vd->vdev_guid, zio->io_type == ZIO_TYPE_WRITE,
		    zio->io_offset, zio->io_size, zio->io_delay);
		return;
	}
	zio_interrupt(zio);
}

void
vdev_queue_io_done(zio_t *zio)
{
	static void (*real)(zio_t *);
	zl_done_hook_t hook = __atomic_load_n(&zl_done_hook, __ATOMIC_ACQUIRE);

	if (hook != NULL)
		hook(zio);
	if (real == NULL)
		real = zl_next("vdev_queue_io_done");
	real(zio);
}

int
zfs_file_fsync(zfs_file_t *fp, int flags)
{
	static int (*real)(zfs_file_t *, int);
	zl_flush_hook_t hook = __atomic_load_n(&zl_flush_hook,
	    __ATOMIC_ACQUIRE);

	if (zl_is_vdev_file(fp->f_fd))
		atomic_fetch_add(&zl_leaf_flushes, 1);
	if (hook != NULL && hook(fp->f_fd))
		return (0);
	if (real == NULL)
		real = zl_next("zfs_file_fsync");
	atomic_fetch_add(&zl_host_fsyncs, 1);
	return (real(fp, flags));
}

#if ZLAB_OPENZFS >= 20400
/*
 * 2.4: zil_commit() returns an error and wraps zil_commit_flags(), which
 * zil_close() calls directly: every commit passes here.
 */
int
zil_commit_flags(zilog_t *zilog, uint64_t foid, zil_commit_flag_t flags)
{
	static int (*real)(zilog_t *, uint64_t, zil_commit_flag_t);

	if (real == NULL)
		real = zl_next("zil_commit_flags");
	atomic_fetch_add(&zl_all_commits, 1);
	return (real(zilog, foid, flags));
}
#else
void
zil_commit(zilog_t *zilog, uint64_t foid)
{
	static void (*real)(zilog_t *, uint64_t);

	if (real == NULL)
		real = zl_next("zil_commit");
	atomic_fetch_add(&zl_all_commits, 1);
	real(zilog, foid);
}
#endif

void
spa_sync(spa_t *spa, uint64_t txg)
{
	static void (*real)(spa_t *, uint64_t);
	uint64_t t0, cur;

	if (real == NULL)
		real = zl_next("spa_sync");
	t0 = zl_now_ns();
	real(spa, txg);
	atomic_fetch_add(&zl_sync_ns, zl_now_ns() - t0);
	atomic_fetch_add(&zl_syncs, 1);
	cur = atomic_load(&zl_txg_min);
	while (txg < cur && !atomic_compare_exchange_weak(&zl_txg_min, &cur,
	    txg))
		;
	cur = atomic_load(&zl_txg_max);
	while (txg > cur && !atomic_compare_exchange_weak(&zl_txg_max, &cur,
	    txg))
		;
}

/*
 * strlcpy is libspl's before 2.4 and glibc's from 2.38: a 2.4 lab linked
 * against Debian 12's glibc has neither at link time.
 */
static void
zl_copy_name(char *dst, const char *src, size_t size)
{
	(void) snprintf(dst, size, "%s", src);
}

/* ---- process ---------------------------------------------------------- */

/* ARC and L2ARC tunables (unsigned long in 2.1, uint64_t later: one type on LP64). */
extern unsigned long zfs_arc_max, zfs_arc_min;
extern uint64_t l2arc_headroom, l2arc_write_max, l2arc_write_boost;
extern uint64_t l2arc_feed_min_ms;
extern int l2arc_noprefetch;
/* int in 2.1, uint_t later: one 4-byte type, and no header declares it. */
extern int zfs_multilist_num_sublists;

/* unsigned long in 2.1, uint64_t later: one type on LP64. */
extern unsigned long zfs_dirty_data_max;

void
zl_set_dirty_data_max(uint64_t bytes)
{
	/* Read by the write throttle at every tx: takes effect at once. */
	zfs_dirty_data_max = bytes;
}

int
zl_init(const char *config_path, uint64_t arc_max, int l2arc_fast,
    char *err, size_t errlen)
{
	/* Before kernel_init: otherwise it would read /etc/zfs/zpool.cache. */
	spa_config_path = strdup(config_path);
	if (spa_config_path == NULL) {
		zl_err(err, errlen, "out of memory");
		return (ENOMEM);
	}
	/*
	 * arc_init applies the tunables: the floor first (at most the default
	 * maximum), then a maximum only above the floor.
	 */
	if (arc_max != 0) {
		zfs_arc_min = MAX(arc_max / 2, 32ULL << 20);
		zfs_arc_max = arc_max;
	}
	if (l2arc_fast) {
		l2arc_headroom = 0;	/* scan whole lists, not 2-8 x the write size */
		l2arc_noprefetch = 0;
		/*
		 * Feeds of up to 8 MiB (no boost: the boost counts in the size
		 * a feed must half fill), the next 20 ms after one that wrote
		 * more than half of that (feed_again), else a second later.
		 * One feed of up to 64 MiB a second wrote 15 MiB/s at 8k
		 * blocks: a warm-up of 512 MiB took 33 s.
		 */
		l2arc_write_max = 8ULL << 20;
		l2arc_write_boost = 0;
		l2arc_feed_min_ms = 20;
		/*
		 * One sublist per ARC list: each feed scans a random sublist
		 * of each list, and with the default 4 a buffer could leave
		 * the ARC before the feed ever looked at its sublist, so a
		 * warm-up pass would leave a quarter of the cache cold.
		 */
		zfs_multilist_num_sublists = 1;
	}
	kernel_init(SPA_MODE_READ | SPA_MODE_WRITE);
	if (arc_max != 0 && arc_c_max != arc_max) {
		zl_err(err, errlen, "the ARC took a maximum of %llu bytes, "
		    "not %llu (it must be 64 MiB or more and below half of "
		    "the host's memory)", (u_longlong_t)arc_c_max,
		    (u_longlong_t)arc_max);
		kernel_fini();
		return (EINVAL);
	}
	return (0);
}

void
zl_arc_stats(zl_arc_stats_t *out)
{
	memset(out, 0, sizeof (*out));
#define	ZL_SUM(field) wmsum_value(&arc_sums.arcstat_##field)
	out->hits = ZL_SUM(hits);
#if ZLAB_OPENZFS >= 20200
	out->iohits = ZL_SUM(iohits);
#endif
	out->misses = ZL_SUM(misses);
	out->demand_data_hits = ZL_SUM(demand_data_hits);
	out->demand_data_misses = ZL_SUM(demand_data_misses);
	out->demand_metadata_hits = ZL_SUM(demand_metadata_hits);
	out->demand_metadata_misses = ZL_SUM(demand_metadata_misses);
	out->prefetch_data_hits = ZL_SUM(prefetch_data_hits);
	out->prefetch_data_misses = ZL_SUM(prefetch_data_misses);
	out->prefetch_metadata_hits = ZL_SUM(prefetch_metadata_hits);
	out->prefetch_metadata_misses = ZL_SUM(prefetch_metadata_misses);
	out->l2_hits = ZL_SUM(l2_hits);
	out->l2_misses = ZL_SUM(l2_misses);
	out->l2_read_bytes = ZL_SUM(l2_read_bytes);
	out->l2_write_bytes = ZL_SUM(l2_write_bytes);
	out->l2_size = ZL_SUM(l2_lsize);
#undef ZL_SUM
	out->size = aggsum_value(&arc_sums.arcstat_size);
	out->c = arc_c;
	out->c_max = arc_c_max;
}

void
zl_fini(void)
{
	zl_set_hooks(NULL, NULL, NULL);
	kernel_fini();
}

void
zl_set_hooks(zl_io_hook_t io, zl_flush_hook_t flush, zl_done_hook_t done)
{
	__atomic_store_n(&zl_done_hook, done, __ATOMIC_RELEASE);
	__atomic_store_n(&zl_io_hook, io, __ATOMIC_RELEASE);
	__atomic_store_n(&zl_flush_hook, flush, __ATOMIC_RELEASE);
}

void
zl_get_counters(zl_counters_t *out)
{
	out->lab_zil_commits = atomic_load(&zl_lab_commits);
	out->all_zil_commits = atomic_load(&zl_all_commits);
	out->spa_syncs = atomic_load(&zl_syncs);
	out->txg_min = atomic_load(&zl_txg_min);
	out->txg_max = atomic_load(&zl_txg_max);
	out->spa_sync_ns = atomic_load(&zl_sync_ns);
	out->host_fsyncs = atomic_load(&zl_host_fsyncs);
	out->leaf_ios_queued = atomic_load(&zl_leaf_ios_queued);
	out->leaf_flushes = atomic_load(&zl_leaf_flushes);
	out->removal_reads = atomic_load(&zl_removal_reads);
	out->removal_writes = atomic_load(&zl_removal_writes);
}

void
zl_txg_mark(void)
{
	atomic_store(&zl_txg_min, UINT64_MAX);
	atomic_store(&zl_txg_max, 0);
}

/* ---- pool --------------------------------------------------------------- */

static nvlist_t *
zl_file_nv(const char *path, uint64_t ashift)
{
	nvlist_t *nv = fnvlist_alloc();

	fnvlist_add_string(nv, ZPOOL_CONFIG_TYPE, VDEV_TYPE_FILE);
	fnvlist_add_string(nv, ZPOOL_CONFIG_PATH, path);
	fnvlist_add_uint64(nv, ZPOOL_CONFIG_ASHIFT, ashift);
	return (nv);
}

int
zl_pool_create(const char *name, const char *group_type, int nparity,
    int width, int ngroups, const char *const *paths, uint64_t ashift,
    const char *const *log_paths, int nlogs,
    const char *const *special_paths, int nspecial,
    const char *const *cache_paths, int ncache, zl_pool_t **out,
    char *err, size_t errlen)
{
	int ntop = ngroups + nspecial + nlogs, error;
	nvlist_t **top = calloc(ntop, sizeof (nvlist_t *));
	nvlist_t *root, *props;
	zl_pool_t *p;

	for (int g = 0; g < ngroups; g++) {
		if (strcmp(group_type, "file") == 0) {
			top[g] = zl_file_nv(paths[g], ashift);
		} else {
			nvlist_t **kids = calloc(width, sizeof (nvlist_t *));

			for (int c = 0; c < width; c++)
				kids[c] = zl_file_nv(paths[g * width + c],
				    ashift);
			top[g] = fnvlist_alloc();
			fnvlist_add_string(top[g], ZPOOL_CONFIG_TYPE,
			    strcmp(group_type, "raidz") == 0 ?
			    VDEV_TYPE_RAIDZ : VDEV_TYPE_MIRROR);
			if (strcmp(group_type, "raidz") == 0)
				fnvlist_add_uint64(top[g],
				    ZPOOL_CONFIG_NPARITY, nparity);
			fnvlist_add_nvlist_array(top[g],
			    ZPOOL_CONFIG_CHILDREN, kids, width);
			for (int c = 0; c < width; c++)
				fnvlist_free(kids[c]);
			free(kids);
		}
		fnvlist_add_uint64(top[g], ZPOOL_CONFIG_IS_LOG, 0);
	}
	/* Special allocation class vdevs, as `zpool create ... special F`. */
	for (int s = 0; s < nspecial; s++) {
		nvlist_t *nv = zl_file_nv(special_paths[s], ashift);

		fnvlist_add_uint64(nv, ZPOOL_CONFIG_IS_LOG, 0);
		fnvlist_add_string(nv, ZPOOL_CONFIG_ALLOCATION_BIAS,
		    VDEV_ALLOC_BIAS_SPECIAL);
		top[ngroups + s] = nv;
	}
	for (int l = 0; l < nlogs; l++) {
		int t = ngroups + nspecial + l;

		top[t] = zl_file_nv(log_paths[l], ashift);
		fnvlist_add_uint64(top[t], ZPOOL_CONFIG_IS_LOG, 1);
	}
	root = fnvlist_alloc();
	fnvlist_add_string(root, ZPOOL_CONFIG_TYPE, VDEV_TYPE_ROOT);
	fnvlist_add_nvlist_array(root, ZPOOL_CONFIG_CHILDREN, top, ntop);
	for (int t = 0; t < ntop; t++)
		fnvlist_free(top[t]);
	free(top);
	if (ncache > 0) {
		nvlist_t **cache = calloc(ncache, sizeof (nvlist_t *));

		for (int c = 0; c < ncache; c++)
			cache[c] = zl_file_nv(cache_paths[c], ashift);
		fnvlist_add_nvlist_array(root, ZPOOL_CONFIG_L2CACHE, cache,
		    ncache);
		for (int c = 0; c < ncache; c++)
			fnvlist_free(cache[c]);
		free(cache);
	}

	/* Every feature this build supports, as `zpool create` would. */
	props = fnvlist_alloc();
	for (int i = 0; i < SPA_FEATURES; i++) {
		char buf[256];

		if (!spa_feature_table[i].fi_zfs_mod_supported)
			continue;
		(void) snprintf(buf, sizeof (buf), "feature@%s",
		    spa_feature_table[i].fi_uname);
		fnvlist_add_uint64(props, buf, 0);
	}

	p = calloc(1, sizeof (*p));
	for (int i = 0; i < ngroups * (strcmp(group_type, "file") == 0 ?
	    1 : width); i++)
		zl_vdev_files_add(paths[i], p);
	for (int i = 0; i < nlogs; i++)
		zl_vdev_files_add(log_paths[i], p);
	for (int i = 0; i < nspecial; i++)
		zl_vdev_files_add(special_paths[i], p);
	for (int i = 0; i < ncache; i++)
		zl_vdev_files_add(cache_paths[i], p);
	error = spa_create(name, root, props, NULL, NULL);
	fnvlist_free(root);
	fnvlist_free(props);
	if (error != 0) {
		zl_err(err, errlen, "spa_create(%s): %s", name,
		    strerror(error));
		zl_vdev_files_remove(p);
		free(p);
		return (error);
	}
	zl_copy_name(p->zp_name, name, sizeof (p->zp_name));
	error = spa_open(name, &p->zp_spa, p);
	if (error != 0) {
		zl_err(err, errlen, "spa_open(%s): %s", name, strerror(error));
		(void) spa_destroy(name);
		zl_vdev_files_remove(p);
		free(p);
		return (error);
	}
	*out = p;
	return (0);
}

static void
zl_leaf_fill(vdev_t *vd, uint32_t top, zl_leaf_t *l)
{
	vdev_stat_t vs;

	memset(l, 0, sizeof (*l));
	vdev_get_stats(vd, &vs);
	l->guid = vd->vdev_guid;
	l->is_log = vd->vdev_top->vdev_islog;
	l->top = top;
	l->alloc_bias = vd->vdev_top->vdev_alloc_bias;
	l->top_id = vd->vdev_top->vdev_id;
	zl_copy_name(l->top_type, vd->vdev_top->vdev_ops->vdev_op_type,
	    sizeof (l->top_type));
	l->write_ops = vs.vs_ops[ZIO_TYPE_WRITE];
	l->write_bytes = vs.vs_bytes[ZIO_TYPE_WRITE];
	l->read_ops = vs.vs_ops[ZIO_TYPE_READ];
	l->read_bytes = vs.vs_bytes[ZIO_TYPE_READ];
	if (vd->vdev_path != NULL)
		zl_copy_name(l->path, vd->vdev_path, sizeof (l->path));
}

static void
zl_walk_leaves(vdev_t *vd, uint32_t top, zl_leaf_t *out, int max, int *n)
{
	if (vd->vdev_ops->vdev_op_leaf) {
		if (*n < max)
			zl_leaf_fill(vd, top, &out[*n]);
		(*n)++;
		return;
	}
	for (uint64_t c = 0; c < vd->vdev_children; c++)
		zl_walk_leaves(vd->vdev_child[c],
		    vd == vd->vdev_spa->spa_root_vdev ? (uint32_t)c : top,
		    out, max, n);
}

int
zl_pool_leaves(zl_pool_t *p, zl_leaf_t *out, int max)
{
	spa_t *spa = p->zp_spa;
	int n = 0;

	spa_config_enter(spa, SCL_VDEV, FTAG, RW_READER);
	zl_walk_leaves(spa->spa_root_vdev, 0, out, max, &n);
	/* Cache devices are auxiliary: not children of the root vdev. */
	for (int c = 0; c < spa->spa_l2cache.sav_count; c++, n++) {
		if (n < max) {
			zl_leaf_fill(spa->spa_l2cache.sav_vdevs[c],
			    spa->spa_root_vdev->vdev_children + c, &out[n]);
			out[n].is_cache = 1;
		}
	}
	spa_config_exit(spa, SCL_VDEV, FTAG);
	return (n);
}

/*
 * RAIDZ expansion (2.3 and later), as `zpool attach POOL raidz-N FILE`:
 * attach one file to the first raidz top-level vdev. The reflow then runs
 * in the pool's expansion thread, beside whatever the lab does next.
 */
int
zl_pool_expand(zl_pool_t *p, const char *path, uint64_t ashift, char *err,
    size_t errlen)
{
#if ZLAB_OPENZFS >= 20300
	spa_t *spa = p->zp_spa;
	vdev_t *rvd = spa->spa_root_vdev, *tvd = NULL;
	nvlist_t *root, *leaf;
	int error;

	for (uint64_t c = 0; c < rvd->vdev_children && tvd == NULL; c++)
		if (rvd->vdev_child[c]->vdev_ops == &vdev_raidz_ops)
			tvd = rvd->vdev_child[c];
	if (tvd == NULL) {
		zl_err(err, errlen, "pool %s has no raidz vdev to expand",
		    p->zp_name);
		return (EINVAL);
	}
	leaf = zl_file_nv(path, ashift);
	root = fnvlist_alloc();
	fnvlist_add_string(root, ZPOOL_CONFIG_TYPE, VDEV_TYPE_ROOT);
	fnvlist_add_nvlist_array(root, ZPOOL_CONFIG_CHILDREN, &leaf, 1);
	zl_vdev_files_add(path, p);
	error = spa_vdev_attach(spa, tvd->vdev_guid, root, B_FALSE, B_FALSE);
	fnvlist_free(leaf);
	fnvlist_free(root);
	if (error != 0)
		zl_err(err, errlen, "attaching %s to %s's raidz vdev: %s", path,
		    p->zp_name, strerror(error));
	return (error);
#else
	(void) p, (void) path, (void) ashift;
	zl_err(err, errlen, "RAIDZ expansion came in OpenZFS 2.3");
	return (ENOTSUP);
#endif
}

/* The pool's RAIDZ expansion, as `zpool status` shows it; ENOENT: none. */
int
zl_pool_expansion(zl_pool_t *p, zl_expansion_t *out)
{
	memset(out, 0, sizeof (*out));
#if ZLAB_OPENZFS >= 20300
	pool_raidz_expand_stat_t pres;
	spa_t *spa = p->zp_spa;
	int error;

	spa_config_enter(spa, SCL_CONFIG, FTAG, RW_READER);
	error = spa_raidz_expand_get_stats(spa, &pres);
	spa_config_exit(spa, SCL_CONFIG, FTAG);
	if (error != 0)
		return (error);
	out->state = pres.pres_state;
	out->to_reflow = pres.pres_to_reflow;
	out->reflowed = pres.pres_reflowed;
	out->start_time = pres.pres_start_time;
	out->end_time = pres.pres_end_time;
	return (0);
#else
	(void) p;
	return (ENOENT);
#endif
}

void
zl_pool_stats(zl_pool_t *p, zl_pool_stats_t *out)
{
	spa_t *spa = p->zp_spa;

	out->normal_alloc = metaslab_class_get_alloc(spa_normal_class(spa));
	out->log_alloc = metaslab_class_get_alloc(spa_log_class(spa));
	out->special_alloc =
	    metaslab_class_get_alloc(spa_special_class(spa));
	out->special_space =
	    metaslab_class_get_space(spa_special_class(spa));
	out->dspace = spa_get_dspace(spa);
	out->last_synced_txg = spa_last_synced_txg(spa);
	/* From the DDT's histograms, updated at txg sync. */
	out->dedup_ratio_x100 = ddt_get_pool_dedup_ratio(spa);
}

/*
 * Wait until the writes made so far are on disk. With all == 0 this waits
 * only for the highest txg a write used (txg_wait_synced(dp, 0) would wait
 * for open txg + TXG_DEFER_SIZE, i.e. sync two extra, empty-ish txgs).
 */
uint64_t
zl_pool_sync(zl_pool_t *p, int all)
{
	uint64_t txg = all ? 0 : atomic_load(&p->zp_max_txg);

	if (all || txg > spa_last_synced_txg(p->zp_spa))
		txg_wait_synced(spa_get_dsl(p->zp_spa), txg);
	return (spa_last_synced_txg(p->zp_spa));
}

/*
 * Drop the dataset's cached data, so that reads go to the vdevs: the dbufs
 * first (they hold ARC buffers), then this pool's ARC buffers.
 */
void
zl_ds_evict(zl_ds_t *ds)
{
	dmu_objset_evict_dbufs(ds->zd_os);
	arc_flush(ds->zd_pool->zp_spa, B_FALSE);
}

int
zl_pool_export(zl_pool_t *p)
{
	int error;

	spa_close(p->zp_spa, p);
	error = spa_export(p->zp_name, NULL, B_FALSE, B_FALSE);
	zl_vdev_files_remove(p);
	free(p);
	return (error);
}

/* ---- dataset and objects ----------------------------------------------- */

static zl_obj_t *
zl_find_obj(zl_ds_t *ds, uint64_t id)
{
	for (int i = 0; i < ds->zd_nobjs; i++)
		if (ds->zd_objs[i]->zo_id == id)
			return (ds->zd_objs[i]);
	return (NULL);
}

static void
zl_get_done(zgd_t *zgd, int error)
{
	(void) error;
	if (zgd->zgd_db != NULL)
		dmu_buf_rele(zgd->zgd_db, zgd);
	zfs_rangelock_exit(zgd->zgd_lr);
	kmem_free(zgd, sizeof (zgd_t));
}

/*
 * ZIL callback: supply the data of a TX_WRITE record at commit time. With a
 * buffer (WR_NEED_COPY) copy the data in; without one (WR_INDIRECT) write the
 * whole block now with dmu_sync() and log its block pointer. Locking the
 * range keeps writers out while the block is read or checksummed.
 */
static int
zl_get_data(void *arg, uint64_t arg2, lr_write_t *lr, char *buf,
    struct lwb *lwb, zio_t *zio)
{
	zl_ds_t *ds = arg;
	zl_obj_t *o = zl_find_obj(ds, lr->lr_foid);
	uint64_t off = lr->lr_offset, size = lr->lr_length;
	zgd_t *zgd;
	dmu_buf_t *db;
	int error;

	(void) arg2;
	if (o == NULL)
		return (SET_ERROR(ENOENT));
	zgd = kmem_zalloc(sizeof (zgd_t), KM_SLEEP);
	zgd->zgd_lwb = lwb;
	zgd->zgd_private = o;
	if (buf != NULL) {
		zgd->zgd_lr = zfs_rangelock_enter(&o->zo_rl, off, size,
		    RL_READER);
		error = dmu_read(ds->zd_os, o->zo_id, off, size, buf,
		    DMU_READ_NO_PREFETCH);
	} else {
		size = o->zo_blocksize;
		off = P2ALIGN_TYPED(off, size, uint64_t);
		zgd->zgd_lr = zfs_rangelock_enter(&o->zo_rl, off, size,
		    RL_READER);
		error = dmu_buf_hold(ds->zd_os, o->zo_id, off, zgd, &db,
		    DMU_READ_NO_PREFETCH);
		if (error == 0) {
			zgd->zgd_db = db;
			zgd->zgd_bp = &lr->lr_blkptr;
			error = dmu_sync(zio, lr->lr_common.lrc_txg,
			    zl_get_done, zgd);
			if (error == 0)
				return (0);
		}
	}
	zl_get_done(zgd, error);
	return (error);
}

int
zl_ds_open(zl_pool_t *p, const char *dsname, const char *const *pnames,
    const char *const *pvals, int nprops, zl_ds_t **out, char *err,
    size_t errlen)
{
	zl_ds_t *ds;
	int error;

	error = dmu_objset_create(dsname, DMU_OST_OTHER, 0, NULL, NULL, NULL);
	if (error != 0) {
		zl_err(err, errlen, "dmu_objset_create(%s): %s", dsname,
		    strerror(error));
		return (error);
	}
	ds = calloc(1, sizeof (*ds));
	ds->zd_pool = p;
	zl_copy_name(ds->zd_name, dsname, sizeof (ds->zd_name));
	/* Set before owning, so the objset starts with these values. */
	for (int i = 0; i < nprops; i++) {
		zfs_prop_t prop = zfs_name_to_prop(pnames[i]);
		uint64_t val;

		if (prop == ZPROP_INVAL ||
		    zfs_prop_string_to_index(prop, pvals[i], &val) != 0) {
			zl_err(err, errlen, "invalid %s value '%s'",
			    pnames[i], pvals[i]);
			free(ds);
			return (EINVAL);
		}
		error = dsl_prop_set_int(dsname, zfs_prop_to_name(prop),
		    ZPROP_SRC_LOCAL, val);
		if (error != 0) {
			zl_err(err, errlen, "setting %s=%s: %s", pnames[i],
			    pvals[i], strerror(error));
			free(ds);
			return (error);
		}
		if (prop == ZFS_PROP_LOGBIAS)
			ds->zd_logbias_throughput =
			    (val == ZFS_LOGBIAS_THROUGHPUT);
	}
	error = dmu_objset_own(dsname, DMU_OST_OTHER, B_FALSE, B_TRUE, ds,
	    &ds->zd_os);
	if (error != 0) {
		zl_err(err, errlen, "dmu_objset_own(%s): %s", dsname,
		    strerror(error));
		free(ds);
		return (error);
	}
	ds->zd_zilog = ZL_ZIL_OPEN(ds->zd_os, zl_get_data);
	*out = ds;
	return (0);
}

int
zl_obj_create(zl_ds_t *ds, uint64_t blocksize, int *index_out, char *err,
    size_t errlen)
{
	zl_obj_t *o;
	dmu_tx_t *tx;
	int error;

	if (ds->zd_nobjs >= ZL_MAX_OBJS) {
		zl_err(err, errlen, "too many objects (max %d)", ZL_MAX_OBJS);
		return (ENOSPC);
	}
	o = calloc(1, sizeof (*o));
	o->zo_blocksize = blocksize;
	zfs_rangelock_init(&o->zo_rl, NULL, NULL);
	tx = dmu_tx_create(ds->zd_os);
	dmu_tx_hold_bonus(tx, DMU_NEW_OBJECT);
	error = dmu_tx_assign(tx, ZL_TX_WAIT);
	if (error != 0) {
		dmu_tx_abort(tx);
		zl_err(err, errlen, "dmu_tx_assign: %s", strerror(error));
		zfs_rangelock_fini(&o->zo_rl);
		free(o);
		return (error);
	}
	/* A zvol's data object: fixed block size, no bonus buffer. */
	o->zo_id = dmu_object_alloc(ds->zd_os, DMU_OT_ZVOL, blocksize,
	    DMU_OT_NONE, 0, tx);
	dmu_tx_commit(tx);
	*index_out = ds->zd_nobjs;
	ds->zd_objs[ds->zd_nobjs++] = o;
	return (0);
}

/*
 * Log a write as a zvol does: WR_INDIRECT for whole large blocks without a
 * log device (or with logbias=throughput), WR_COPIED for synchronous
 * writes that fit a log record, otherwise WR_NEED_COPY.
 */
static void
zl_log_write(zl_ds_t *ds, zl_obj_t *o, dmu_tx_t *tx, uint64_t off,
    uint64_t size, const void *data, int sync)
{
	zilog_t *zilog = ds->zd_zilog;
	uint64_t bs = o->zo_blocksize, total = size;
	itx_wr_state_t state;

	if (ds->zd_logbias_throughput)
		state = WR_INDIRECT;
	else if (!spa_has_slogs(ds->zd_pool->zp_spa) && size >= bs &&
	    bs > 32768)
		state = WR_INDIRECT;
	else if (sync)
		state = WR_COPIED;
	else
		state = WR_NEED_COPY;

	while (size > 0) {
		itx_wr_state_t st = state;
		uint64_t len = size;
		itx_t *itx;
		lr_write_t *lr;

		if (st == WR_COPIED && size > zil_max_copied_data(zilog))
			st = WR_NEED_COPY;
		else if (st == WR_INDIRECT)
			len = MIN(bs - P2PHASE(off, bs), size);
		itx = zil_itx_create(TX_WRITE,
		    sizeof (*lr) + (st == WR_COPIED ? len : 0));
		lr = (lr_write_t *)&itx->itx_lr;
		if (st == WR_COPIED)
			memcpy(lr + 1, data, len);
		itx->itx_wr_state = st;
		lr->lr_foid = o->zo_id;
		lr->lr_offset = off;
		lr->lr_length = len;
		lr->lr_blkoff = 0;
		BP_ZERO(&lr->lr_blkptr);
		itx->itx_private = ds;
		itx->itx_sync = (sync != 0);
		(void) zil_itx_assign(zilog, itx, tx);
		off += len;
		size -= len;
		data = (const char *)data + len;
	}
	if (state == WR_COPIED || state == WR_NEED_COPY)
		dsl_pool_wrlog_count(spa_get_dsl(ds->zd_pool->zp_spa), total,
		    dmu_tx_get_txg(tx));
}

int
zl_write(zl_ds_t *ds, int oi, uint64_t off, uint64_t len, const void *buf,
    int sync)
{
	zl_obj_t *o = ds->zd_objs[oi];
	zfs_locked_range_t *lr;
	dmu_tx_t *tx;
	uint64_t txg, cur;
	int error;

	lr = zfs_rangelock_enter(&o->zo_rl, off, len, RL_WRITER);
	tx = dmu_tx_create(ds->zd_os);
	dmu_tx_hold_write(tx, o->zo_id, off, len);
	error = dmu_tx_assign(tx, ZL_TX_WAIT);
	if (error != 0) {
		dmu_tx_abort(tx);
		zfs_rangelock_exit(lr);
		return (error);
	}
#if ZLAB_OPENZFS >= 20400
	dmu_write(ds->zd_os, o->zo_id, off, len, buf, tx, DMU_READ_PREFETCH);
#else
	dmu_write(ds->zd_os, o->zo_id, off, len, buf, tx);
#endif
	zl_log_write(ds, o, tx, off, len, buf, sync);
	txg = dmu_tx_get_txg(tx);
	cur = atomic_load(&ds->zd_pool->zp_max_txg);
	while (txg > cur && !atomic_compare_exchange_weak(
	    &ds->zd_pool->zp_max_txg, &cur, txg))
		;
	dmu_tx_commit(tx);
	zfs_rangelock_exit(lr);
	return (0);
}

int
zl_read(zl_ds_t *ds, int oi, uint64_t off, uint64_t len, void *buf)
{
	zl_obj_t *o = ds->zd_objs[oi];
	zfs_locked_range_t *lr;
	int error;

	lr = zfs_rangelock_enter(&o->zo_rl, off, len, RL_READER);
	error = dmu_read(ds->zd_os, o->zo_id, off, len, buf,
	    DMU_READ_PREFETCH);
	zfs_rangelock_exit(lr);
	return (error);
}

/*
 * Reads [off, off + len) of an object for a warm-up, after prefetching
 * [from, from + ahead) at async priority: through dmu_read_by_dnode, not
 * dmu_read, which a profiler counts as the workload's reads. The prefetch
 * keeps the reads ahead of the demand reads, so that most reach the disks
 * at async priority, apart from the job's sync reads.
 */
int
zl_warm(zl_ds_t *ds, int oi, uint64_t off, uint64_t len, uint64_t from,
    uint64_t ahead, void *buf)
{
	zl_obj_t *o = ds->zd_objs[oi];
	dnode_t *dn;
	int error;

	if (ahead > 0)	/* a length of 0 would prefetch the dnode */
		dmu_prefetch(ds->zd_os, o->zo_id, 0, from, ahead,
		    ZIO_PRIORITY_ASYNC_READ);
	if (len == 0)
		return (0);
	error = dnode_hold(ds->zd_os, o->zo_id, FTAG, &dn);
	if (error != 0)
		return (error);
	error = dmu_read_by_dnode(dn, off, len, buf, DMU_READ_PREFETCH);
	dnode_rele(dn, FTAG);
	return (error);
}

void
zl_commit(zl_ds_t *ds, int oi)
{
	atomic_fetch_add(&zl_lab_commits, 1);
	/*
	 * 2.4 returns an error where the pool is suspended: the job finds it
	 * suspended at its next write, as on earlier releases.
	 */
	(void) zil_commit(ds->zd_zilog, ds->zd_objs[oi]->zo_id);
}

void
zl_ds_stats(zl_ds_t *ds, zl_ds_stats_t *out)
{
	dsl_dataset_t *d = dmu_objset_ds(ds->zd_os);

	out->referenced = dsl_dataset_phys(d)->ds_referenced_bytes;
	out->compressed = dsl_dataset_phys(d)->ds_compressed_bytes;
	out->uncompressed = dsl_dataset_phys(d)->ds_uncompressed_bytes;
	out->compressratio = dsl_get_compressratio(d);
}

void
zl_ds_close(zl_ds_t *ds)
{
	/* zil_close() itself calls zil_commit(zilog, 0). */
	zil_close(ds->zd_zilog);
	dmu_objset_disown(ds->zd_os, B_TRUE, ds);
	for (int i = 0; i < ds->zd_nobjs; i++) {
		zfs_rangelock_fini(&ds->zd_objs[i]->zo_rl);
		free(ds->zd_objs[i]);
	}
	free(ds);
}
