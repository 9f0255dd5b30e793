/*
 * zfs_offsets.c - print the struct offsets zprof needs from OpenZFS.
 *
 * Part of zprof. Compiled against the OpenZFS development headers
 * (Debian: libzfslinux-dev) with the same DEBUG/ZFS_DEBUG defines that
 * libzpool was built with, so the layouts match the user-space library.
 * See README.md in this directory for the exact command line.
 *
 * Output (default): one "name=value" per line:
 *   off.<struct>.<member>=<offsetof>
 *   size.<struct>.<member>=<sizeof member>
 *   size.<struct>=<sizeof struct>
 * With "-j VERSION SOURCE [build-id ...]" it prints the JSON table instead
 * (libzpool-<version>-debian.json): VERSION is the OpenZFS release, SOURCE
 * says which headers it was compiled against.
 *
 * Compiled with -D_KERNEL by the kernel's kbuild instead (zprof does this on
 * a host whose zfs.ko has no BTF, from the module's dkms build tree), it
 * yields the kernel module's layouts as assembly markers: see below.
 */
#include <sys/zfs_context.h>
#include <sys/spa.h>
#include <sys/spa_impl.h>
#include <sys/vdev_impl.h>
#include <sys/zio.h>
#include <sys/zil.h>
#include <sys/zil_impl.h>
#include <sys/dsl_pool.h>
#include <sys/dmu_objset.h>
#include <sys/dmu_tx.h>
#include <sys/dmu_recv.h>
#include <sys/vdev_file.h>

/*
 * The members zprof reads: (short struct name, C type, member). No bit
 * fields: offsetof cannot name them (2.4 made zp_checksum and zp_compress
 * of zio_prop_t 8-bit fields, so they are not listed; zprof reads neither).
 */
#define	ZPROF_FIELDS(F) \
	F(zio, zio_t, io_spa) \
	F(zio, zio_t, io_type) \
	F(zio, zio_t, io_priority) \
	F(zio, zio_t, io_vd) \
	F(zio, zio_t, io_delta) \
	F(zio, zio_t, io_delay) \
	F(zio, zio_t, io_timestamp) \
	F(zio, zio_t, io_target_timestamp) \
	F(zio, zio_t, io_size) \
	F(zio, zio_t, io_lsize) \
	F(zio, zio_t, io_offset) \
	F(zio, zio_t, io_error) \
	F(zio, zio_t, io_flags) \
	F(zio, zio_t, io_txg) \
	F(zio, zio_t, io_stage) \
	F(zio, zio_t, io_child_type) \
	F(zio, zio_t, io_prop) \
	F(zio, zio_t, io_private) \
	F(zio_prop, zio_prop_t, zp_complevel) \
	F(vdev, vdev_t, vdev_guid) \
	F(vdev, vdev_t, vdev_id) \
	F(vdev, vdev_t, vdev_ops) \
	F(vdev, vdev_t, vdev_top) \
	F(vdev, vdev_t, vdev_islog) \
	F(vdev, vdev_t, vdev_alloc_bias) \
	F(vdev, vdev_t, vdev_path) \
	F(vdev, vdev_t, vdev_spa) \
	F(vdev, vdev_t, vdev_parent) \
	F(vdev, vdev_t, vdev_tsd) \
	F(vdev, vdev_t, vdev_children) \
	F(vdev_file, vdev_file_t, vf_file) \
	F(vdev_ops, vdev_ops_t, vdev_op_leaf) \
	F(vdev_ops, vdev_ops_t, vdev_op_type) \
	F(spa, spa_t, spa_name) \
	F(spa, spa_t, spa_root_vdev) \
	F(zilog, zilog_t, zl_spa) \
	F(zilog, zilog_t, zl_os) \
	F(zilog, zilog_t, zl_dmu_pool) \
	F(dsl_pool, dsl_pool_t, dp_spa) \
	F(objset, objset_t, os_spa) \
	F(dmu_tx, dmu_tx_t, tx_pool) \
	F(dmu_tx, dmu_tx_t, tx_txg) \
	F(dmu_tx, dmu_tx_t, tx_objset) \
	F(txg_stat, txg_stat_t, ndirty) \
	F(txg_stat, txg_stat_t, vs1) \
	F(txg_stat, txg_stat_t, vs2) \
	F(vdev_stat, vdev_stat_t, vs_ops) \
	F(vdev_stat, vdev_stat_t, vs_bytes) \
	F(spa, spa_t, spa_special_class) \
	F(spa, spa_t, spa_dedup_class) \
	F(dmu_recv_cookie, dmu_recv_cookie_t, drc_os)

#define	ZPROF_STRUCTS(S) \
	S(zio, zio_t) \
	S(zio_prop, zio_prop_t) \
	S(vdev, vdev_t) \
	S(vdev_ops, vdev_ops_t) \
	S(spa, spa_t) \
	S(zilog, zilog_t) \
	S(dsl_pool, dsl_pool_t) \
	S(objset, objset_t) \
	S(dmu_tx, dmu_tx_t) \
	S(vdev_file, vdev_file_t) \
	S(txg_stat, txg_stat_t) \
	S(vdev_stat, vdev_stat_t) \
	S(dmu_recv_cookie, dmu_recv_cookie_t)

#ifdef _KERNEL
#include <linux/blk_types.h>
#include <linux/blkdev.h>
#include <linux/fs.h>
#include <sys/dsl_dataset.h>
#include <sys/dsl_dir.h>
#include <sys/zfs_znode.h>
#include <sys/zfs_vfsops.h>
#include <sys/zvol.h>
#include <sys/zvol_impl.h>

/*
 * What the request layer reads (kernel only: libzpool has no file system or
 * zvol layer). Struct tags, as BTF names them, not typedefs.
 */
#define	ZPROF_REQUEST_FIELDS(F) \
	F(bio, struct bio, bi_opf) \
	F(bio, struct bio, bi_iter) \
	F(bvec_iter, struct bvec_iter, bi_size) \
	F(bio, struct bio, bi_bdev) \
	F(block_device, struct block_device, bd_disk) \
	F(gendisk, struct gendisk, private_data) \
	F(zvol_state, struct zvol_state, zv_objset) \
	F(zvol_state, struct zvol_state, zv_volblocksize) \
	F(znode, struct znode, z_inode) \
	F(inode, struct inode, i_sb) \
	F(super_block, struct super_block, s_fs_info) \
	F(zfsvfs, struct zfsvfs, z_os) \
	F(objset, struct objset, os_dsl_dataset) \
	F(dsl_dataset, struct dsl_dataset, ds_dir) \
	F(dsl_dir, struct dsl_dir, dd_parent) \
	F(dsl_dir, struct dsl_dir, dd_myname) \
	F(zfs_uio, struct zfs_uio, uio_resid)

/* Enumerators: the bits of bio flags (enum req_flag_bits). */
#define	ZPROF_REQUEST_ENUMS(E) \
	E(__REQ_FUA) \
	E(__REQ_PREFLUSH)

/*
 * Kernel layout: kbuild compiles this file to assembly only (zprof runs
 * "make -C KERNEL_BUILD M=DIR zprof_offsets.s" with the module build's own
 * flags), and zprof reads the constants from the marker lines
 * "->field <short struct>.<member> <offsetof> <sizeof>" and
 * "->struct <short struct> 0 <sizeof>", as the kernel's asm-offsets does.
 */
#define	KFIELD(shortname, type, member) \
	asm volatile("\n.ascii \"->field " #shortname "." #member \
	    " %c0 %c1\"" : : "i" (offsetof(type, member)), \
	    "i" (sizeof (((type *)0)->member)));
#define	KSTRUCT(shortname, type) \
	asm volatile("\n.ascii \"->struct " #shortname " 0 %c0\"" : : \
	    "i" (sizeof (type)));
#define	KENUM(name) \
	asm volatile("\n.ascii \"->field enum." #name " %c0 4\"" : : \
	    "i" (name));

void zprof_offsets(void);

void
zprof_offsets(void)
{
	ZPROF_FIELDS(KFIELD)
	ZPROF_STRUCTS(KSTRUCT)
	ZPROF_REQUEST_FIELDS(KFIELD)
	ZPROF_REQUEST_ENUMS(KENUM)
}

#else

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct field {
	const char *name;	/* "<short struct>.<member>" */
	size_t off;
	size_t size;
};

#define	F(shortname, type, member) \
	{ #shortname "." #member, offsetof(type, member), \
	    sizeof (((type *)0)->member) },
#define	S(shortname, type) { #shortname, 0, sizeof (type) },

static const struct field fields[] = {
	ZPROF_FIELDS(F)
};

static const struct field structs[] = {
	ZPROF_STRUCTS(S)
};

#define	N(a)	(sizeof (a) / sizeof ((a)[0]))

static void
print_plain(void)
{
	size_t i;

	for (i = 0; i < N(fields); i++) {
		printf("off.%s=%zu\n", fields[i].name, fields[i].off);
		printf("size.%s=%zu\n", fields[i].name, fields[i].size);
	}
	for (i = 0; i < N(structs); i++)
		printf("size.%s=%zu\n", structs[i].name, structs[i].size);
}

static void
print_json(const char *version, const char *source, int nids, char **ids)
{
	size_t i;
	int k;

	printf("{\n");
	printf("  \"zfs_version\": \"%s\",\n", version);
	printf("  \"source\": \"%s\",\n", source);
	printf("  \"build_ids\": [");
	for (k = 0; k < nids; k++)
		printf("%s\"%s\"", k ? ", " : "", ids[k]);
	printf("],\n");

	printf("  \"offsets\": {\n");
	for (i = 0; i < N(fields); i++)
		printf("    \"%s\": %zu%s\n", fields[i].name, fields[i].off,
		    i + 1 < N(fields) ? "," : "");
	printf("  },\n");

	printf("  \"sizes\": {\n");
	for (i = 0; i < N(fields); i++)
		printf("    \"%s\": %zu,\n", fields[i].name, fields[i].size);
	for (i = 0; i < N(structs); i++)
		printf("    \"%s\": %zu%s\n", structs[i].name, structs[i].size,
		    i + 1 < N(structs) ? "," : "");
	printf("  }\n");
	printf("}\n");
}

int
main(int argc, char **argv)
{
	if (argc > 3 && strcmp(argv[1], "-j") == 0)
		print_json(argv[2], argv[3], argc - 4, argv + 4);
	else
		print_plain();
	return (0);
}

#endif /* _KERNEL */
