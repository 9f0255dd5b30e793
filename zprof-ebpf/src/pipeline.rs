//! The zio pipeline's CPU stages: compression (and zstd's lz4 early-abort
//! trial), checksums, and dedup's table lookups (its txg-sync work is
//! `dedup`'s). Each is timed from
//! the entry of the ZFS function to its return, on the thread that runs it.
//!
//! zio_compress_data and zio_decompress_data are given the data, not the zio,
//! so their pool is the one of the zio their thread is running: every thread
//! that runs zio_execute belongs to one pool's zio taskqs, and the write
//! pipeline always compresses there (its issue stage hands each write to
//! them first). A decompression under arc_read (an ARC hit on the reader's
//! thread) takes arc_read's pool.

use aya_ebpf::{
    macros::map,
    maps::LruHashMap,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{LZ4_CLASS_ZSTD_EARLY_ABORT, Stage};

use crate::core::{
    config::{CONFIG, config_u32},
    memory::{arg, member_u64},
    programs::{entry_programs, return_programs},
    record::leave_and_record,
    spans::{INFLIGHT, enter, thread_id, thread_key},
    tracked::wanted,
};

entry_programs! {
    compress_entry_k, compress_entry_u => try_compress_entry;
    decompress_entry_k, decompress_entry_u => try_decompress_entry;
    zstd_entry_k, zstd_entry_u => try_zstd_entry;
    lz4_entry_k, lz4_entry_u => try_lz4_entry;
    checksum_entry_k, checksum_entry_u => try_checksum_entry;
    verify_entry_k, verify_entry_u => try_verify_entry;
    ddt_lookup_entry_k, ddt_lookup_entry_u => try_ddt_lookup_entry;
    zio_execute_entry_k, zio_execute_entry_u => try_zio_execute_entry;
}

return_programs! {
    compress_return_k, compress_return_u => try_compress_return;
    decompress_return_k, decompress_return_u => try_decompress_return;
    zstd_return_k, zstd_return_u => try_zstd_return;
    lz4_return_k, lz4_return_u => try_lz4_return;
    checksum_return_k, checksum_return_u => try_checksum_return;
    verify_return_k, verify_return_u => try_verify_return;
    ddt_lookup_return_k, ddt_lookup_return_u => try_ddt_lookup_return;
}

/// Per thread, the pool (spa_t) of the zio it last began to run in
/// zio_execute. Only the pools' zio taskq threads run zio_execute, each for
/// one pool, so an entry never goes stale for another pool; LRU, so threads
/// that are gone make room.
#[map]
static EXECUTING_POOL: LruHashMap<u32, u64> =
    LruHashMap::with_max_entries(zprof_common::EXECUTING_THREADS, 0);

/// zio_execute(zio_t *zio): a taskq thread starts on a zio.
#[inline(always)]
fn try_zio_execute_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa);
    let tid = thread_id() as u32;
    // Most calls find the thread's pool already there: a lookup is cheaper
    // than rewriting the entry.
    if unsafe { EXECUTING_POOL.get(&tid) }.is_some_and(|known| *known == pool) {
        return Ok(());
    }
    let _ = EXECUTING_POOL.insert(&tid, &pool, 0);
    Ok(())
}

/// The pool this thread's (de)compression or dedup lookup serves, 0 when unknown (a thread
/// outside both zio_execute and arc_read, such as the L2ARC feed thread).
#[inline(always)]
fn current_pool() -> u64 {
    if let Some(read) = unsafe { INFLIGHT.get(&thread_key(Stage::ArcRead)) } {
        return read.pool;
    }
    unsafe { EXECUTING_POOL.get(&(thread_id() as u32)) }.map_or(0, |pool| *pool)
}

/// enum zio_compress's ZIO_COMPRESS_ZSTD (the same from 2.0 to 2.3).
const ZIO_COMPRESS_ZSTD: u64 = 16;

/// zio_compress_data's level: argument 4 or 5 per release (a load-time
/// constant). Both are read and the value chosen afterwards: a context read at
/// a computed offset is rejected by the verifier, and black_box keeps LLVM
/// from turning the choice of values back into a choice of offsets.
#[inline(always)]
fn compress_level(ctx: &ProbeContext) -> u64 {
    let fourth = core::hint::black_box(arg(ctx, 4));
    let fifth = core::hint::black_box(arg(ctx, 5));
    if config_u32(&CONFIG.semantics.compress_level_arg) == 5 {
        fifth
    } else {
        fourth
    }
}

/// zio_compress_data(enum zio_compress c, abd_t *src, ..., size_t s_len, ..., uint8_t level):
/// the level's position differs between releases (`compress_level_arg`).
#[inline(always)]
fn try_compress_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let algorithm = arg(ctx, 0) & 0xff;
    let level = compress_level(ctx) & 0xff;
    enter(
        Stage::Compress,
        thread_id(),
        algorithm | level << 8,
        arg(ctx, 3),
        current_pool(),
        0,
    )
}

/// Returns the compressed size (psize), or s_len when it did not compress.
#[inline(always)]
fn try_compress_return(ctx: &RetProbeContext) -> Result<(), u32> {
    let out: u64 = ctx.ret();
    leave_and_record(Stage::Compress, out);
    Ok(())
}

/// zio_decompress_data(enum zio_compress c, abd_t *src, void *dst, size_t s_len, size_t d_len, ...)
#[inline(always)]
fn try_decompress_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    enter(
        Stage::Decompress,
        thread_id(),
        arg(ctx, 0) & 0xff,
        arg(ctx, 4),
        current_pool(),
        0,
    )
}

#[inline(always)]
fn try_decompress_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::Decompress, 0);
    Ok(())
}

/// zfs_zstd_compress(void *s, void *d, size_t s_len, size_t d_len, int level)
#[inline(always)]
fn try_zstd_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    enter(
        Stage::ZstdCompress,
        thread_id(),
        arg(ctx, 4) & 0xff,
        arg(ctx, 2),
        current_pool(),
        0,
    )
}

#[inline(always)]
fn try_zstd_return(ctx: &RetProbeContext) -> Result<(), u32> {
    let out: u64 = ctx.ret();
    leave_and_record(Stage::ZstdCompress, out);
    Ok(())
}

/// lz4_compress_zfs / zfs_lz4_compress(src, dst, size_t s_len, size_t d_len, int n).
/// zstd's early abort (2.2 and later, zstd-3 and up on blocks of 128K or more)
/// runs lz4 as a trial inside the zstd compression of a block: such a pass is
/// kept apart (class `LZ4_CLASS_ZSTD_EARLY_ABORT`), shown inside the zstd row
/// and never counted as an lz4 compression of its own.
#[inline(always)]
fn try_lz4_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let inside_zstd = unsafe { INFLIGHT.get(&thread_key(Stage::Compress)) }
        .is_some_and(|outer| outer.class & 0xff == ZIO_COMPRESS_ZSTD);
    let class = if inside_zstd {
        LZ4_CLASS_ZSTD_EARLY_ABORT as u64
    } else {
        0
    };
    enter(
        Stage::Lz4Compress,
        thread_id(),
        class,
        arg(ctx, 2),
        current_pool(),
        0,
    )
}

#[inline(always)]
fn try_lz4_return(ctx: &RetProbeContext) -> Result<(), u32> {
    let out: u64 = ctx.ret();
    leave_and_record(Stage::Lz4Compress, out);
    Ok(())
}

/// zio_checksum_compute(zio_t *zio, enum zio_checksum checksum, abd_t *abd, uint64_t size)
#[inline(always)]
fn try_checksum_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let pool = member_u64(arg(ctx, 0), &CONFIG.offsets.zio_spa);
    enter(
        Stage::ChecksumCompute,
        thread_id(),
        arg(ctx, 1) & 0xff,
        arg(ctx, 3),
        pool,
        0,
    )
}

#[inline(always)]
fn try_checksum_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::ChecksumCompute, 0);
    Ok(())
}

/// zio_checksum_error(zio_t *zio, zio_bad_cksum_t *info)
#[inline(always)]
fn try_verify_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let zio = arg(ctx, 0);
    let pool = member_u64(zio, &CONFIG.offsets.zio_spa);
    let size = member_u64(zio, &CONFIG.offsets.zio_size);
    enter(Stage::ChecksumVerify, thread_id(), 0, size, pool, 0)
}

#[inline(always)]
fn try_verify_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::ChecksumVerify, 0);
    Ok(())
}

/// ddt_lookup(ddt_t *ddt, const blkptr_t *bp, boolean_t add_or_verify):
/// on the thread of the write pipeline that dedups the block, so its pool is
/// the one of the zio that thread runs (the ddt_t's spa_t is at an offset
/// that differs between the kernel and libzpool).
#[inline(always)]
fn try_ddt_lookup_entry(_ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    enter(Stage::DdtLookup, thread_id(), 0, 0, current_pool(), 0)
}

#[inline(always)]
fn try_ddt_lookup_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    leave_and_record(Stage::DdtLookup, 0);
    Ok(())
}
