//! The request layer (kernel target): file and zvol requests as the
//! application sees them, from submission to completion, per dataset,
//! process and cgroup.
//!
//! - Files: zfs_read, zfs_write and zfs_fsync, entry to return, on the
//!   calling thread (the ZPL's own entry points, in every release).
//! - Direct I/O (2.3 and later): a file request that reaches
//!   dmu_write_uio_direct or dmu_read_uio_direct is marked as having taken
//!   the Direct I/O path, beside whether O_DIRECT was asked for.
//! - Zvols: a bio from zvol_submit_bio (the zvol's submit_bio, in the
//!   submitter's context) to bio_endio of that bio (wherever the taskq ends
//!   it). zvol_write/zvol_read are compiler clones on some builds (2.1.11's
//!   .isra.0), and they do not see the time a bio waits on the taskq.
//!
//! Rows live in one shared hash map, not per CPU: a row holds a 2 KiB
//! histogram, a host has many CPUs and requests are few next to the
//! pipeline's events, so each field is bumped with an atomic add. The row of
//! a request is fixed at submission (who submitted it is not who completes a
//! zvol bio). Dataset names are learnt once per dataset, as dsl_dir name
//! components that user space joins.
//!
//! With `--slower-than`, a request at least that long is also streamed on its
//! own, with the time its thread spent in each timed stage while it ran (the
//! difference of the thread's running totals, kept by `core::timed`).

use aya_ebpf::{
    bindings::{BPF_ANY, BPF_NOEXIST},
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_ktime_get_ns, bpf_probe_read_kernel_str_bytes,
    },
    macros::{kprobe, kretprobe, map},
    maps::{HashMap, LruHashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{
    DatasetInfo, DirName, HIST_BUCKETS, Hist, RequestKey, RequestStart, SlowRequest, ThreadWaits,
    counter, hist_bucket,
    request::{
        self, FLAG_DIRECT, FLAG_DIRECT_PATH, FLAG_PREFLUSH, FLAG_SYNC, LAYER_FILE, LAYER_ZVOL,
        MAX_NAME_DEPTH,
    },
    wait,
};

use crate::core::{
    config::{CONFIG, config_u32},
    counters::bump,
    memory::{arg, read_or},
    programs::run,
    record::{EVENTS, ZERO, atomic_add},
    spans::begun_while_attaching,
    timed::{current_waits, slow_tracking},
    tracked::wanted,
};

/// zfs_read entry.
#[kprobe]
pub fn file_read_start_k(ctx: ProbeContext) -> u32 {
    run(&ctx, |ctx| try_file_start(ctx, request::OP_READ));
    0
}

/// zfs_write entry.
#[kprobe]
pub fn file_write_start_k(ctx: ProbeContext) -> u32 {
    run(&ctx, |ctx| try_file_start(ctx, request::OP_WRITE));
    0
}

/// zfs_fsync entry.
#[kprobe]
pub fn file_fsync_start_k(ctx: ProbeContext) -> u32 {
    run(&ctx, |ctx| try_file_start(ctx, request::OP_FLUSH));
    0
}

/// The return of zfs_read, zfs_write and zfs_fsync.
#[kretprobe]
pub fn file_request_done_k(ctx: RetProbeContext) -> u32 {
    run(&ctx, try_file_request_done);
    0
}

/// dmu_write_uio_direct and dmu_read_uio_direct entry (2.3 and later).
#[kprobe]
pub fn direct_path_entry_k(ctx: ProbeContext) -> u32 {
    run(&ctx, try_direct_path);
    0
}

/// zvol_submit_bio entry.
#[kprobe]
pub fn zvol_submit_k(ctx: ProbeContext) -> u32 {
    run(&ctx, try_zvol_submit);
    0
}

/// bio_endio entry.
#[kprobe]
pub fn zvol_bio_done_k(ctx: ProbeContext) -> u32 {
    run(&ctx, try_zvol_bio_done);
    0
}

/// Request rows. Size set by user space (`--request-rows`).
#[map]
static REQUESTS: HashMap<RequestKey, Hist> = HashMap::with_max_entries(1024, 0);

/// Requests in progress: by thread id for file requests (they start and end
/// on the caller's thread), by bio address for zvol requests. The two never
/// collide: thread ids are below 2^32, kernel addresses far above.
#[map]
static REQUEST_STARTS: HashMap<u64, RequestStart> = HashMap::with_max_entries(16384, 0);

/// Datasets seen in requests, by objset address.
#[map]
static DATASETS: LruHashMap<u64, DatasetInfo> = LruHashMap::with_max_entries(1024, 0);

/// Name components of the dsl_dirs of those datasets and their parents.
#[map]
static DIR_NAMES: LruHashMap<u64, DirName> = LruHashMap::with_max_entries(2048, 0);

/// Scratch space for a [`DirName`] (264 bytes: too large for the stack next
/// to the rest).
#[map]
static DIR_SCRATCH: PerCpuArray<DirName> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn request_offsets_valid() -> bool {
    config_u32(&CONFIG.request.valid) != 0
}

/// Reads the pointer at `base + offset` (0 when unknown or unreadable).
#[inline(always)]
fn pointer_at(base: u64, offset: &u32) -> u64 {
    if base == 0 || !request_offsets_valid() {
        return 0;
    }
    read_or::<u64>(base + config_u32(offset) as u64, 0)
}

/// The row of a request the current thread submits.
#[inline(always)]
fn key_for(layer: u32, op: u32, flags: u32, dataset: u64) -> RequestKey {
    RequestKey {
        layer,
        op,
        flags,
        tgid: (bpf_get_current_pid_tgid() >> 32) as u32,
        dataset,
        cgroup: unsafe { bpf_get_current_cgroup_id() },
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    }
}

/// Starts request `id`; a full `REQUEST_STARTS` is the error.
#[inline(always)]
fn start(id: u64, bytes: u64, key: RequestKey) -> Result<(), u32> {
    let waits_at_start = if key.layer == LAYER_FILE {
        current_waits()
    } else {
        ThreadWaits::default()
    };
    let value = RequestStart {
        start_ns: unsafe { bpf_ktime_get_ns() },
        bytes,
        key,
        waits_at_start,
    };
    if REQUEST_STARTS
        .insert(&id, &value, BPF_NOEXIST as u64)
        .is_ok()
    {
        return Ok(());
    }
    // A thread is in one call at a time and a bio in flight is one request:
    // a start already there is stale, its request's end never seen (the
    // kernel skipped the end's program while another ran on that CPU). The
    // new request takes its place; the lost end is counted. Anything else is
    // a full map.
    // One begun while zprof attached may have ended before its end's
    // program was attached, and is no loss (see `ATTACHED_NS`).
    let Some(stale) = (unsafe { REQUEST_STARTS.get(&id) }) else {
        return Err(counter::REQUEST_START_FULL);
    };
    let unseen_end = !begun_while_attaching(stale.start_ns);
    match REQUEST_STARTS.insert(&id, &value, BPF_ANY as u64) {
        Ok(()) if unseen_end => Err(counter::REQUEST_END_MISSED),
        Ok(()) => Ok(()),
        Err(_) => Err(counter::REQUEST_START_FULL),
    }
}

/// Ends the request `id` if it was started; `end_without_start_is_loss`
/// says whether an end without a start counts (a file request's return) or
/// not (any bio of any device ends in bio_endio).
#[inline(always)]
fn finish(id: u64, end_without_start_is_loss: bool) -> Result<(), u32> {
    let Some(started) = (unsafe { REQUEST_STARTS.get(&id) }).copied() else {
        if end_without_start_is_loss {
            return Err(counter::REQUEST_END_WITHOUT_START);
        }
        return Ok(());
    };
    let _ = REQUEST_STARTS.remove(&id);
    let duration = unsafe { bpf_ktime_get_ns() }.saturating_sub(started.start_ns);
    add(&started.key, duration, started.bytes);
    if slow_tracking() && duration >= config_u32(&CONFIG.slow_request_us) as u64 * 1_000 {
        return report_slow(&started, duration);
    }
    Ok(())
}

/// Streams one slow request, with the stage time its thread spent while it
/// ran (file requests end on the thread that submitted them).
#[inline(always)]
fn report_slow(started: &RequestStart, duration: u64) -> Result<(), u32> {
    let joined = started.key.layer == LAYER_FILE;
    let mut event = SlowRequest {
        key: started.key,
        start_ns: started.start_ns,
        duration_ns: duration,
        bytes: started.bytes,
        tid: bpf_get_current_pid_tgid() as u32,
        joined: joined as u32,
        waits: ThreadWaits::default(),
    };
    if joined {
        let now = current_waits();
        for slot in 0..wait::COUNT {
            event.waits.ns[slot] = now.ns[slot].saturating_sub(started.waits_at_start.ns[slot]);
        }
    }
    EVENTS
        .output::<SlowRequest>(&event, 0)
        .map_err(|_| counter::RINGBUF_FULL)
}

/// Adds one request to its row, or to the folded row when the map is full.
#[inline(always)]
fn add(key: &RequestKey, duration_ns: u64, bytes: u64) {
    let row = match row(key) {
        Some(row) => row,
        None => {
            bump(counter::REQUEST_FOLDED);
            let folded = RequestKey {
                layer: key.layer,
                op: key.op,
                flags: key.flags,
                comm: *b"[folded]\0\0\0\0\0\0\0\0",
                ..RequestKey::default()
            };
            match row(&folded) {
                Some(row) => row,
                None => return,
            }
        }
    };
    let hist = unsafe { &mut *row };
    atomic_add(&mut hist.count, 1);
    atomic_add(&mut hist.total_ns, duration_ns);
    atomic_add(&mut hist.bytes, bytes);
    // Not atomic: two CPUs finishing a new maximum of the same row in the
    // same instant keep one of the two.
    if duration_ns > hist.max_ns {
        hist.max_ns = duration_ns;
    }
    let bucket = core::hint::black_box(hist_bucket(duration_ns));
    if bucket < HIST_BUCKETS {
        atomic_add(&mut hist.buckets[bucket], 1);
    }
}

/// The row for `key`, created empty if there is room.
#[inline(always)]
fn row(key: &RequestKey) -> Option<*mut Hist> {
    if let Some(row) = REQUESTS.get_ptr_mut(key) {
        return Some(row);
    }
    let zero: &Hist = ZERO.get(0)?;
    // EEXIST (another CPU made it first) is fine; a full map is not.
    let _ = REQUESTS.insert(key, zero, BPF_NOEXIST as u64);
    REQUESTS.get_ptr_mut(key)
}

/// Remembers the dataset of objset `objset` (its dsl_dir and, for a zvol,
/// its volblocksize) and the name components of its dsl_dir and parents,
/// the first time a request names it.
#[inline(always)]
fn learn_dataset(objset: u64, volblocksize: u64) {
    if objset == 0 || unsafe { DATASETS.get(&objset) }.is_some() {
        return;
    }
    let dataset = pointer_at(objset, &CONFIG.request.objset_dataset);
    let mut dir = pointer_at(dataset, &CONFIG.request.dataset_dir);
    if DATASETS
        .insert(&objset, &DatasetInfo { dir, volblocksize }, 0)
        .is_err()
    {
        bump(counter::NAME_MAP_FULL);
    }
    for _ in 0..MAX_NAME_DEPTH {
        if dir == 0 || unsafe { DIR_NAMES.get(&dir) }.is_some() {
            return;
        }
        let Some(scratch) = DIR_SCRATCH.get_ptr_mut(0) else {
            return;
        };
        let scratch = unsafe { &mut *scratch };
        scratch.parent = pointer_at(dir, &CONFIG.request.dir_parent);
        let name = dir + config_u32(&CONFIG.request.dir_name) as u64;
        if unsafe { bpf_probe_read_kernel_str_bytes(name as *const u8, &mut scratch.name) }.is_err()
        {
            bump(counter::READ_FAILED);
            return;
        }
        if DIR_NAMES.insert(&dir, &*scratch, 0).is_err() {
            bump(counter::NAME_MAP_FULL);
        }
        dir = scratch.parent;
    }
}

// --- Files: zfs_read/zfs_write(znode_t *zp, zfs_uio_t *uio, int ioflag, cred_t *cr),
// --- zfs_fsync(znode_t *zp, int syncflag, cred_t *cr).

/// The objset of the file system znode `zp` lives in:
/// zp->z_inode.i_sb->s_fs_info (the zfsvfs_t)->z_os.
#[inline(always)]
fn znode_objset(zp: u64) -> u64 {
    if zp == 0 || !request_offsets_valid() {
        return 0;
    }
    let inode = zp + config_u32(&CONFIG.request.znode_inode) as u64;
    let sb = pointer_at(inode, &CONFIG.request.inode_sb);
    let zfsvfs = pointer_at(sb, &CONFIG.request.sb_fs_info);
    pointer_at(zfsvfs, &CONFIG.request.zfsvfs_os)
}

/// A file request starts on the calling thread.
#[inline(always)]
fn try_file_start(ctx: &ProbeContext, op: u32) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    let objset = znode_objset(arg(ctx, 0));
    learn_dataset(objset, 0);
    let (bytes, flags) = if op == request::OP_FLUSH {
        (0, 0)
    } else {
        let resid = read_or::<u64>(pointer_field(arg(ctx, 1), &CONFIG.request.uio_resid), 0);
        let ioflag = arg(ctx, 2);
        let mut flags = 0;
        if op == request::OP_WRITE && ioflag & request::O_DSYNC != 0 {
            flags |= FLAG_SYNC;
        }
        if ioflag & request::O_DIRECT != 0 {
            flags |= FLAG_DIRECT;
        }
        (resid, flags)
    };
    start(
        bpf_get_current_pid_tgid() & 0xffff_ffff,
        bytes,
        key_for(LAYER_FILE, op, flags, objset),
    )
}

/// The address of the member at `offset` of the struct at `base` (0 when unknown).
#[inline(always)]
fn pointer_field(base: u64, offset: &u32) -> u64 {
    if base == 0 || !request_offsets_valid() {
        return 0;
    }
    base + config_u32(offset) as u64
}

/// zfs_read/zfs_write/zfs_fsync return: the file request ends on its thread.
#[inline(always)]
fn try_file_request_done(_ctx: &RetProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    finish(bpf_get_current_pid_tgid() & 0xffff_ffff, true)
}

/// The file request of this thread took ZFS's Direct I/O path (it may call
/// the function once per block; the flag is set each time, harmlessly).
/// Zvols have no Direct I/O path: their bios always go through the DMU's
/// buffers.
#[inline(always)]
fn try_direct_path(_ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    let thread = bpf_get_current_pid_tgid() & 0xffff_ffff;
    if let Some(started) = REQUEST_STARTS.get_ptr_mut(&thread) {
        unsafe { (*started).key.flags |= FLAG_DIRECT_PATH };
    }
    Ok(())
}

// --- Zvols: zvol_submit_bio(struct bio *bio) -> bio_endio(struct bio *bio).

/// REQ_OP_* values of the block layer (the low 8 bits of bi_opf, stable).
const REQ_OP_READ: u32 = 0;
const REQ_OP_WRITE: u32 = 1;
const REQ_OP_FLUSH: u32 = 2;
const REQ_OP_DISCARD: u32 = 3;

/// zvol_submit_bio(struct bio *bio): a zvol request starts, keyed by its bio.
#[inline(always)]
fn try_zvol_submit(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(true) {
        return Ok(());
    }
    let bio = arg(ctx, 0);
    if bio == 0 {
        return Ok(());
    }
    let opf = read_or::<u32>(pointer_field(bio, &CONFIG.request.bio_opf), 0);
    let size = read_or::<u32>(pointer_field(bio, &CONFIG.request.bio_size), 0) as u64;
    let bit = |field: &u32| 1u32.checked_shl(config_u32(field)).unwrap_or(0);
    let preflush = opf & bit(&CONFIG.request.req_preflush_bit) != 0;
    let fua = opf & bit(&CONFIG.request.req_fua_bit) != 0;
    let (op, mut flags) = match opf & 0xff {
        REQ_OP_READ => (request::OP_READ, 0),
        // An empty write with a preflush is how a flush reaches a bio driver.
        REQ_OP_WRITE if size == 0 && preflush => (request::OP_FLUSH, 0),
        REQ_OP_WRITE => (request::OP_WRITE, if preflush { FLAG_PREFLUSH } else { 0 }),
        REQ_OP_FLUSH => (request::OP_FLUSH, 0),
        REQ_OP_DISCARD => (request::OP_DISCARD, 0),
        _ => (request::OP_OTHER, 0),
    };
    if fua && op == request::OP_WRITE {
        flags |= FLAG_SYNC;
    }
    let zvol = pointer_at(
        pointer_at(
            pointer_at(bio, &CONFIG.request.bio_bdev),
            &CONFIG.request.bdev_disk,
        ),
        &CONFIG.request.disk_private,
    );
    let objset = pointer_at(zvol, &CONFIG.request.zvol_objset);
    if objset != 0 {
        learn_dataset(
            objset,
            read_or::<u64>(pointer_field(zvol, &CONFIG.request.zvol_volblocksize), 0),
        );
    }
    start(bio, size, key_for(LAYER_ZVOL, op, flags, objset))
}

/// bio_endio(struct bio *bio): the end of a zvol request, if the bio is one.
#[inline(always)]
fn try_zvol_bio_done(ctx: &ProbeContext) -> Result<(), u32> {
    let bio = arg(ctx, 0);
    // Most bios are other devices': not ours, not a loss.
    if bio == 0 {
        return Ok(());
    }
    finish(bio, false)
}
