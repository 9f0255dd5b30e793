//! The job engine: runs one fio-style [`JobSpec`] on a pool's dataset with
//! `numjobs` threads (each on its own fresh object) and measures it.
//!
//! A write is what a zvol write is: range lock, tx, dmu_write, a TX_WRITE itx,
//! commit; then, when the job says so (`fsync=N`, `sync=1` or the dataset's
//! sync=always), a zil_commit that is part of that write's latency, as an
//! application's write+fsync would see it. Reads are dmu_read calls; a job
//! that reads first lays out its objects (not measured) and empties the ARC.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;

use crate::ffi;
use crate::lab::{self, Dataset, Pool};
use crate::options::{JobSpec, Rw};
use crate::report::{
    ArcDelta, IoStats, IopsSamples, JobReport, LeafDelta, PoolAccount, ReflowDelta, lat_summary,
    new_histogram, rates,
};

/// A small, fast PRNG (xorshift64*): offsets and buffer contents need speed,
/// not quality.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (a zero seed is replaced).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform-ish value in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Fills `buf` as fio does for buffer_compress_percentage=`pct`: in each
/// 512-byte chunk the first (100-pct)% is random and the rest zeros, so the
/// buffer compresses to roughly (100-pct)% of its size.
pub fn fill_buffer(buf: &mut [u8], pct: u32, rng: &mut Rng) {
    const CHUNK: usize = 512;
    for chunk in buf.chunks_mut(CHUNK) {
        let random = chunk.len() * (100 - pct.min(100) as usize) / 100;
        let (r, z) = chunk.split_at_mut(random);
        for w in r.chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            w.copy_from_slice(&v[..w.len()]);
        }
        z.fill(0);
    }
}

/// Offset of I/O number `i` in an extent of `size` bytes with blocks of `bs`.
pub fn next_offset(random: bool, i: u64, size: u64, bs: u64, rng: &mut Rng) -> u64 {
    let blocks = (size / bs).max(1);
    if random {
        rng.below(blocks) * bs
    } else {
        (i % blocks) * bs
    }
}

/// Whether write number `n` (1-based) is followed by a zil_commit.
pub fn commits_after(n: u64, fsync: u64, sync_every_write: bool) -> bool {
    sync_every_write || (fsync > 0 && n.is_multiple_of(fsync))
}

/// Length of one IOPS sample (fio's default iops log interval).
pub const SAMPLE_MS: u64 = 500;

struct ThreadResult {
    wlat: Histogram<u64>,
    rlat: Histogram<u64>,
    /// I/Os completed in each SAMPLE_MS since the job's start.
    per_sample: Vec<u64>,
    wbytes: u64,
    rbytes: u64,
    commits: u64,
    end: Instant,
    error: Option<String>,
}

/// Bytes of write data prepared per thread before a job starts (at least `bs`).
pub const DATA_RING_BYTES: u64 = 4 << 20;

/// A thread's write data, generated before the job starts so that neither the
/// latencies nor the job's CPU time include data generation: `max(bs, 4 MiB)`
/// of fio-like content; write `n` uses the `bs`-sized window `n mod windows`.
/// Compressibility is a property of each 512-byte chunk, so every window has
/// the job's `buffer_compress_percentage` (dedup is off: repeats cost nothing).
pub fn data_ring(bs: u64, pct: u32, seed: u64) -> Vec<u8> {
    let windows = (DATA_RING_BYTES / bs).max(1);
    let mut ring = vec![0u8; (windows * bs) as usize];
    fill_buffer(&mut ring, pct, &mut Rng::new(seed));
    ring
}

/// With dedupe_percentage, the duplicate writes repeat one of this many windows.
const DUPLICATE_WINDOWS: u64 = 16;

/// Makes a write's data unique: the thread's seed and the write's number at
/// the start of every 4 KiB (every block of 4 KiB or more then differs from
/// every other block written).
fn stamp(data: &mut [u8], seed: u64, n: u64) {
    for chunk in data.chunks_mut(4096).filter(|c| c.len() >= 16) {
        chunk[..8].copy_from_slice(&seed.to_le_bytes());
        chunk[8..16].copy_from_slice(&n.to_le_bytes());
    }
}

/// The window of `ring` that write number `n` uses.
pub fn ring_window(ring: &[u8], bs: u64, n: u64) -> &[u8] {
    let windows = ring.len() as u64 / bs;
    let at = ((n % windows) * bs) as usize;
    &ring[at..at + bs as usize]
}

/// Whether the next I/O reads (randrw: `rwmixread` percent of them do).
fn next_is_read(spec: &JobSpec, rng: &mut Rng) -> bool {
    match spec.rw {
        Rw::Read | Rw::Randread => true,
        Rw::Write | Rw::Randwrite => false,
        Rw::Randrw => rng.below(100) < spec.rwmixread as u64,
    }
}

/// The data of the thread's write number `writes`: its window of the ring;
/// with dedupe_percentage either a duplicate (one of a few windows) or made
/// unique in `unique`.
fn write_data<'a>(
    spec: &JobSpec,
    ring: &'a [u8],
    unique: &'a mut [u8],
    rng: &mut Rng,
    (seed, writes): (u64, u64),
) -> &'a [u8] {
    match spec.dedupe_percentage {
        None => ring_window(ring, spec.bs, writes),
        Some(p) if rng.below(100) < p as u64 => {
            ring_window(ring, spec.bs, rng.below(DUPLICATE_WINDOWS))
        }
        Some(_) => {
            unique.copy_from_slice(ring_window(ring, spec.bs, writes));
            stamp(unique, seed, writes);
            unique
        }
    }
}

/// Counts one completed I/O in the SAMPLE_MS sample it falls in.
fn count_in_sample(per_sample: &mut Vec<u64>, start: Instant) {
    let sample = (start.elapsed().as_millis() as u64 / SAMPLE_MS) as usize;
    if per_sample.len() <= sample {
        per_sample.resize(sample + 1, 0);
    }
    per_sample[sample] += 1;
}

fn run_thread(
    ds: Dataset,
    obj: c_int,
    spec: &JobSpec,
    sync_always: bool,
    seed: u64,
    ring: &[u8],
    start: Instant,
) -> ThreadResult {
    let mut rng = Rng::new(seed);
    let mut r = ThreadResult {
        wlat: new_histogram(),
        rlat: new_histogram(),
        per_sample: Vec::new(),
        wbytes: 0,
        rbytes: 0,
        commits: 0,
        end: start,
        error: None,
    };
    let mut buf = if spec.rw.reads() {
        vec![0u8; spec.bs as usize]
    } else {
        Vec::new()
    };
    let mut unique = if spec.dedupe_percentage.is_some() {
        vec![0u8; spec.bs as usize]
    } else {
        Vec::new()
    };
    let deadline = (spec.runtime_s > 0.0).then(|| start + Duration::from_secs_f64(spec.runtime_s));
    let sync_every = spec.sync || sync_always;
    let mut writes = 0u64;
    let mut i = 0u64;
    loop {
        if lab::stop_requested() || (spec.ios > 0 && i >= spec.ios) {
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let off = next_offset(spec.rw.random(), i, spec.size, spec.bs, &mut rng);
        let is_read = next_is_read(spec, &mut rng);
        if is_read {
            let t0 = Instant::now();
            if let Err(e) = ds.read(obj, off, &mut buf) {
                r.error = Some(format!(
                    "dmu_read at {off}: {}",
                    std::io::Error::from_raw_os_error(e)
                ));
                break;
            }
            let _ = r.rlat.record((t0.elapsed().as_nanos() as u64).max(1));
            r.rbytes += spec.bs;
        } else {
            let data = write_data(spec, ring, &mut unique, &mut rng, (seed, writes));
            let t0 = Instant::now();
            if let Err(e) = ds.write(obj, off, data, sync_every) {
                r.error = Some(format!(
                    "write at {off}: {}",
                    std::io::Error::from_raw_os_error(e)
                ));
                break;
            }
            writes += 1;
            if commits_after(writes, spec.fsync, sync_every) {
                ds.commit(obj);
                r.commits += 1;
            }
            let _ = r.wlat.record((t0.elapsed().as_nanos() as u64).max(1));
            r.wbytes += spec.bs;
        }
        count_in_sample(&mut r.per_sample, start);
        i += 1;
    }
    r.end = Instant::now();
    r
}

/// Writes each object's whole extent (unmeasured) with the job's data
/// (`buffer_compress_percentage`) so that reads find data, then syncs and
/// empties the ARC so that the reads reach the (emulated) disks. Returns the
/// bytes written.
fn lay_out(pool: &Pool, objs: &[c_int], size: u64, pct: u32) -> Result<u64> {
    // Unmeasured, and where the blocks land does not depend on the timing.
    struct ModelsBack;
    impl Drop for ModelsBack {
        fn drop(&mut self) {
            crate::model::suspend(false);
        }
    }
    crate::model::suspend(true);
    let _back = ModelsBack;
    let ds = pool.dataset();
    let chunk = (1u64 << 20).min(size);
    let mut rng = Rng::new(42);
    let mut buf = vec![0u8; chunk as usize];
    let mut written = 0;
    for &o in objs {
        let mut off = 0;
        while off < size && !lab::stop_requested() {
            let len = chunk.min(size - off) as usize;
            fill_buffer(&mut buf[..len], pct, &mut rng);
            ds.write(o, off, &buf[..len], false)
                .map_err(|e| anyhow!("laying out: {}", std::io::Error::from_raw_os_error(e)))?;
            off += len as u64;
            written += len as u64;
        }
    }
    pool.sync(true);
    pool.evict_cache();
    Ok(written)
}

/// Reads each object sequentially `passes` times, the objects interleaved,
/// then (with cache devices) waits up to 3 s for the L2ARC feed to write out
/// what the ARC still holds, and checks with paced passes that the cache
/// devices hold the data (see [`fill_cache_devices`]). The reads are not
/// dmu_reads (a profiler of the job counts those as its reads) and are
/// prefetched ahead, so that most reach the disks at async priority and
/// the sync reads are the job's. Returns how long it took.
fn warm_up(pool: &Pool, objs: &[c_int], size: u64, passes: u32) -> Result<Duration> {
    let start = Instant::now();
    for _ in 0..passes {
        warm_pass(pool, objs, size, false)?;
    }
    if pool.config().caches > 0 {
        wait_for_feed();
        fill_cache_devices(pool, objs, size)?;
    }
    Ok(start.elapsed())
}

/// The lab feeds the L2ARC every 20 ms while a feed finds much to write (see
/// zl_init), which keeps up with the first passes' reads from the disks; but
/// a feed that wrote little waits a second, and a pass served mostly by the
/// cache devices turns the ARC over in less: the blocks it read from the
/// disks were dropped before a feed saw them. On an Intel VM, 2 of 5 warm-ups
/// of 512 MiB (2 passes) left 5-7% of the job's misses to the hdds, and its
/// rate fell from 8,500 to 1,350-1,800 reads/s. So: passes that wait for a
/// feed every half of the ARC, until one reads (almost) nothing from the
/// disks, or the cache devices stop growing (they are full), at most
/// [`EXTRA_FEED_PASSES`].
fn fill_cache_devices(pool: &Pool, objs: &[c_int], size: u64) -> Result<()> {
    let data = size * objs.len() as u64;
    let blocks = data / pool.config().volblocksize.max(1);
    for _ in 0..EXTRA_FEED_PASSES {
        let before = lab::arc_stats();
        warm_pass(pool, objs, size, true)?;
        wait_for_feed();
        let after = lab::arc_stats();
        let from_disks = after.l2_misses.saturating_sub(before.l2_misses);
        let grew = after.l2_size.saturating_sub(before.l2_size);
        if from_disks <= blocks / 1000 || grew < data / 1000 {
            break;
        }
    }
    Ok(())
}

/// Paced passes after the asked ones, at most.
const EXTRA_FEED_PASSES: u32 = 4;

/// One sequential pass over the objects, a chunk of each in turn; `paced`:
/// waiting for an L2ARC feed after each half of the ARC read.
fn warm_pass(pool: &Pool, objs: &[c_int], size: u64, paced: bool) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    const AHEAD: u64 = 4 << 20;
    let ds = pool.dataset();
    let mut buf = vec![0u8; CHUNK.min(size) as usize];
    // Half of the ARC's target size, at least a chunk of each object.
    let pace_bytes = paced.then(|| (lab::arc_stats().c / 2).max(CHUNK * objs.len() as u64));
    let mut read_since_feed = 0;
    let warm = |o: c_int, off: u64, buf: &mut [u8], ahead: (u64, u64)| {
        ds.warm(o, off, buf, ahead)
            .map_err(|e| anyhow!("warming up: {}", std::io::Error::from_raw_os_error(e)))
    };
    // A stretch ahead of each object's start, and a moment for it to be
    // issued: a prefetch reads the indirect block first, and a demand
    // read that finds no read of its block under way reads it at sync
    // priority, as the job's reads do.
    for &o in objs {
        warm(o, 0, &mut [], (0, AHEAD.min(size)))?;
    }
    std::thread::sleep(Duration::from_millis(200));
    // A chunk of each object in turn: one object after another, the ARC
    // would end up holding only the last ones, and the threads on them
    // would hit while the others missed.
    let mut off = 0;
    while off < size && !lab::stop_requested() {
        let len = CHUNK.min(size - off);
        // Each chunk prefetches the one a stretch ahead of it.
        let ahead = (off + AHEAD, CHUNK.min(size.saturating_sub(off + AHEAD)));
        for &o in objs {
            warm(o, off, &mut buf[..len as usize], ahead)?;
        }
        off += len;
        read_since_feed += len * objs.len() as u64;
        if pace_bytes.is_some_and(|pace| read_since_feed >= pace) {
            wait_for_one_feed();
            read_since_feed = 0;
        }
    }
    Ok(())
}

/// Waits until the L2ARC feed writes, or a feed interval (1 s) passes.
fn wait_for_one_feed() {
    let written = lab::arc_stats().l2_write_bytes;
    let deadline = Instant::now() + Duration::from_millis(1100);
    while Instant::now() < deadline && lab::arc_stats().l2_write_bytes == written {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the L2ARC feed has not written for a whole feed interval
/// (1 s), or 3 s pass.
fn wait_for_feed() {
    let written = || lab::arc_stats().l2_write_bytes;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut last = (written(), Instant::now());
    while Instant::now() < deadline && !lab::stop_requested() {
        std::thread::sleep(Duration::from_millis(100));
        let now = written();
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_millis(1100) {
            return;
        }
    }
}

impl IopsSamples {
    /// The job's IOPS per SAMPLE_MS (reads and writes together), over the
    /// whole samples of its run time (the last, partial one left out), as
    /// fio's iops_min/iops_max/iops_mean/iops_stddev; `None` under 2 samples.
    fn of(results: &[ThreadResult], elapsed: Duration) -> Option<IopsSamples> {
        let whole = (elapsed.as_millis() as u64 / SAMPLE_MS) as usize;
        let per_second = |n: u64| n as f64 * 1000.0 / SAMPLE_MS as f64;
        let samples: Vec<f64> = (0..whole)
            .map(|i| {
                per_second(
                    results
                        .iter()
                        .map(|r| r.per_sample.get(i).copied().unwrap_or(0))
                        .sum(),
                )
            })
            .collect();
        if samples.len() < 2 {
            return None;
        }
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let var =
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (samples.len() - 1) as f64;
        Some(IopsSamples {
            interval_ms: SAMPLE_MS,
            samples: samples.len(),
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max: samples.iter().copied().fold(0.0, f64::max),
            mean,
            stddev: var.sqrt(),
        })
    }
}

/// CPU time of the whole process so far (all threads), in ns: (user, system).
pub fn process_cpu_ns() -> (u64, u64) {
    // SAFETY: getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// The job's objects, one per thread, and what it did to them before it
/// starts: bytes laid out for a reading job, and its warm-up's time.
fn prepare_objects(pool: &Pool, spec: &JobSpec) -> Result<(Vec<c_int>, u64, Duration)> {
    let ds = pool.dataset();
    let mut objs = Vec::new();
    for _ in 0..spec.numjobs {
        objs.push(ds.create_object(pool.config().volblocksize)?);
    }
    let mut warmup = Duration::ZERO;
    let layout_bytes = if spec.rw.reads() {
        let bytes = lay_out(pool, &objs, spec.size, spec.buffer_compress_percentage)?;
        if spec.warmup_passes > 0 {
            warmup = warm_up(pool, &objs, spec.size, spec.warmup_passes)?;
        }
        bytes
    } else {
        // Object creation belongs to no job: sync it so the job counts only its own txgs.
        pool.sync(false);
        0
    };
    Ok((objs, layout_bytes, warmup))
}

/// Each thread's seed and write data (none for a job that only reads).
fn thread_inputs(threads: usize, spec: &JobSpec) -> (Vec<u64>, Vec<Vec<u8>>) {
    let writes = !matches!(spec.rw, Rw::Read | Rw::Randread);
    let seed = AtomicU64::new(0x5EED ^ std::process::id() as u64);
    let seeds: Vec<u64> = (0..threads)
        .map(|_| seed.fetch_add(0x9E37_79B9, Ordering::Relaxed))
        .collect();
    let rings: Vec<Vec<u8>> = seeds
        .iter()
        .map(|&sd| {
            if writes {
                data_ring(spec.bs, spec.buffer_compress_percentage, sd ^ 0xDA7A)
            } else {
                Vec::new()
            }
        })
        .collect();
    (seeds, rings)
}

/// One thread per object, all started at `start`; their results in order.
fn run_threads(
    ds: Dataset,
    objs: &[c_int],
    spec: &JobSpec,
    sync_always: bool,
    (seeds, rings): (&[u64], &[Vec<u8>]),
    start: Instant,
) -> Vec<ThreadResult> {
    std::thread::scope(|s| {
        let handles: Vec<_> = objs
            .iter()
            .zip(seeds.iter().zip(rings.iter()))
            .map(|(&o, (&sd, ring))| {
                s.spawn(move || run_thread(ds, o, spec, sync_always, sd, ring, start))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("job thread panicked"))
            .collect()
    })
}

/// The threads' figures added up: latencies, bytes, commits.
struct Merged {
    wlat: Histogram<u64>,
    rlat: Histogram<u64>,
    wbytes: u64,
    rbytes: u64,
    commits: u64,
}

impl Merged {
    fn of(results: &[ThreadResult]) -> Merged {
        let mut m = Merged {
            wlat: new_histogram(),
            rlat: new_histogram(),
            wbytes: 0,
            rbytes: 0,
            commits: 0,
        };
        for r in results {
            m.wlat.add(&r.wlat).ok();
            m.rlat.add(&r.rlat).ok();
            m.wbytes += r.wbytes;
            m.rbytes += r.rbytes;
            m.commits += r.commits;
        }
        m
    }
}

/// Each leaf's I/O during the job: its counters after less before (a leaf
/// not there before counts from zero).
fn leaf_deltas(before: &[lab::LeafStat], after: &[lab::LeafStat]) -> Vec<LeafDelta> {
    after
        .iter()
        .map(|b| {
            let a = before.iter().find(|a| a.guid == b.guid);
            let d = |f: fn(&lab::LeafStat) -> u64| f(b) - a.map(f).unwrap_or(0);
            LeafDelta {
                path: b.path.clone(),
                is_log: b.is_log,
                is_cache: b.is_cache,
                guid: b.guid,
                top_vdev: b.top_vdev.clone(),
                vdev_class: b.class.clone(),
                write_ops: d(|l| l.write_ops),
                write_bytes: d(|l| l.write_bytes),
                read_ops: d(|l| l.read_ops),
                read_bytes: d(|l| l.read_bytes),
                flushes: d(|l| l.flushes),
                device: a.map_or(b.device, |a| b.device.since(&a.device)),
            }
        })
        .collect()
}

/// A job's run: the threads' results, and the lab's state around them.
/// Wall-clock milliseconds since the Unix epoch (0 if the clock is before it).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Measured {
    /// When the measured part began (after the layout and warm-up), for
    /// telling the job's phase apart in a recording's timeline.
    started_unix_ms: u64,
    results: Vec<ThreadResult>,
    elapsed: Duration,
    sync_ms: f64,
    cpu_ms: f64,
    cpu_user_ms: f64,
    account0: PoolAccount,
    leaves: Vec<LeafDelta>,
    /// The lab's counters before and after.
    counters: (ffi::ZlCounters, ffi::ZlCounters),
    /// The pool's RAIDZ expansion before and after, if one started.
    expansion: (Option<ffi::ZlExpansion>, Option<ffi::ZlExpansion>),
    arc: ArcDelta,
}

/// Runs the job's threads on `objs` and its job-end sync, and reads the
/// lab's state before and after; an error if a thread failed.
fn measure(pool: &Pool, spec: &JobSpec, objs: &[c_int]) -> Result<Measured> {
    let sync_always = pool
        .config()
        .props
        .get("sync")
        .is_some_and(|v| v == "always");
    let (seeds, rings) = thread_inputs(objs.len(), spec);

    let account0 = pool.account();
    let leaves0 = pool.leaf_stats();
    let c0 = lab::counters();
    let expansion0 = pool.expansion();
    let arc0 = lab::arc_stats();
    let cpu0 = process_cpu_ns();
    let started_unix_ms = unix_ms();
    let start = Instant::now();
    let results = run_threads(
        pool.dataset(),
        objs,
        spec,
        sync_always,
        (&seeds, &rings),
        start,
    );
    let elapsed = results.iter().map(|r| r.end).max().unwrap_or(start) - start;
    // The job's dirty data belongs to the job: wait for it to reach the disks.
    let sync_start = Instant::now();
    pool.sync(false);
    let sync_ms = sync_start.elapsed().as_secs_f64() * 1e3;
    let cpu1 = process_cpu_ns();
    let cpu_user_ms = (cpu1.0 - cpu0.0) as f64 / 1e6;
    let cpu_ms = cpu_user_ms + (cpu1.1 - cpu0.1) as f64 / 1e6;
    drop(rings);
    let c1 = lab::counters();
    let expansion1 = pool.expansion();
    let arc1 = lab::arc_stats();
    let leaves1 = pool.leaf_stats();
    if let Some(e) = results.iter().find_map(|r| r.error.clone()) {
        return Err(anyhow!("job {}: {e}", spec.name));
    }
    Ok(Measured {
        results,
        started_unix_ms,
        elapsed,
        sync_ms,
        cpu_ms,
        cpu_user_ms,
        account0,
        leaves: leaf_deltas(&leaves0, &leaves1),
        counters: (c0, c1),
        expansion: (expansion0, expansion1),
        arc: ArcDelta::between(&arc0, &arc1),
    })
}

/// The reflow of a RAIDZ expansion during a job, if one ran.
fn reflow_delta(m: &Measured) -> Option<ReflowDelta> {
    let after = m.expansion.1?;
    let before = m.expansion.0.map_or(0, |e| e.reflowed);
    let (c0, c1) = &m.counters;
    Some(ReflowDelta {
        reads: c1.removal_reads - c0.removal_reads,
        writes: c1.removal_writes - c0.removal_writes,
        reflowed_bytes: after.reflowed.saturating_sub(before),
        to_reflow_bytes: after.to_reflow,
        // dsl_scan_state_t: DSS_FINISHED.
        finished: after.state == 2,
    })
}

/// Runs one job to completion (or until a stop request) and reports it.
/// An expansion asked for starts once the job's data is laid out, so its
/// reflow has that data to move while the job runs.
pub fn run_job(pool: &mut Pool, spec: &JobSpec) -> Result<JobReport> {
    let (objs, layout_bytes, warmup) = prepare_objects(pool, spec)?;
    pool.expand_raidz()?;
    let m = measure(pool, spec, &objs)?;
    let merged = Merged::of(&m.results);
    let ns = m.elapsed.as_nanos() as u64;
    let iops_samples = IopsSamples::of(&m.results, m.elapsed);
    let side = |h: &Histogram<u64>, bytes: u64| {
        let (iops, bw) = rates(h.len(), bytes, ns);
        IoStats {
            io_bytes: bytes,
            total_ios: h.len(),
            iops,
            bw_bytes: bw,
            lat_ns: lat_summary(h),
        }
    };
    let (c0, c1) = &m.counters;
    let synced = c1.spa_syncs - c0.spa_syncs;
    let account = pool.account();
    let reflow = reflow_delta(&m);
    let leaves = m.leaves;
    Ok(JobReport {
        jobname: spec.name.clone(),
        spec: spec.clone(),
        started_unix_ms: m.started_unix_ms,
        runtime_ms: m.elapsed.as_millis() as u64,
        write: side(&merged.wlat, merged.wbytes),
        read: side(&merged.rlat, merged.rbytes),
        zil_commits: merged.commits,
        zil_commits_all: c1.all_zil_commits - c0.all_zil_commits,
        txgs_synced: synced,
        txg_first: if synced > 0 {
            account.last_synced_txg + 1 - synced
        } else {
            0
        },
        txg_last: if synced > 0 {
            account.last_synced_txg
        } else {
            0
        },
        spa_sync_ms: (c1.spa_sync_ns - c0.spa_sync_ns) as f64 / 1e6,
        flushes: leaves.iter().map(|l| l.flushes).sum(),
        host_fsyncs: c1.host_fsyncs - c0.host_fsyncs,
        leaf_write_bytes: leaves.iter().map(|l| l.write_bytes).sum(),
        leaf_read_bytes: leaves.iter().map(|l| l.read_bytes).sum(),
        leaves,
        sync_ms: m.sync_ms,
        cpu_ms: m.cpu_ms,
        cpu_user_ms: m.cpu_user_ms,
        used_delta_bytes: account.used_bytes as i64 - m.account0.used_bytes as i64,
        logical_used_delta_bytes: account.logical_used_bytes as i64
            - m.account0.logical_used_bytes as i64,
        layout_bytes,
        warmup_s: warmup.as_secs_f64(),
        iops_samples,
        pool: account,
        arc: Some(m.arc),
        interrupted: lab::stop_requested(),
        reflow,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(per_sample: Vec<u64>) -> ThreadResult {
        ThreadResult {
            wlat: new_histogram(),
            rlat: new_histogram(),
            per_sample,
            wbytes: 0,
            rbytes: 0,
            commits: 0,
            end: Instant::now(),
            error: None,
        }
    }

    #[test]
    fn iops_samples_add_the_threads_and_leave_out_the_partial_sample() {
        // Two threads over 1.7 s: samples of 500 ms at 0, 0.5 and 1 s, and a partial one.
        let threads = [thread(vec![100, 0, 50, 999]), thread(vec![100, 0])];
        let x = IopsSamples::of(&threads, Duration::from_millis(1700)).unwrap();
        assert_eq!((x.samples, x.min, x.max), (3, 0.0, 400.0));
        assert!((x.mean - 500.0 / 3.0).abs() < 1e-9);
        // A second of 100/s, 200/s... standard deviation of (400, 0, 100).
        assert!(
            (x.stddev - 208.166_599_946_613_2).abs() < 1e-6,
            "{}",
            x.stddev
        );
        assert!(
            IopsSamples::of(&threads, Duration::from_millis(900)).is_none(),
            "one whole sample is no spread"
        );
    }

    #[test]
    fn commit_schedule() {
        assert!(!commits_after(1, 0, false));
        assert!(commits_after(1, 1, false));
        assert!(!commits_after(3, 4, false) && commits_after(4, 4, false));
        assert!(commits_after(7, 0, true));
    }

    #[test]
    fn offsets_stay_in_extent_and_aligned() {
        let mut rng = Rng::new(1);
        for i in 0..10_000 {
            let o = next_offset(true, i, 1 << 20, 4096, &mut rng);
            assert!(o.is_multiple_of(4096) && o + 4096 <= 1 << 20);
        }
        assert_eq!(next_offset(false, 0, 8192, 4096, &mut rng), 0);
        assert_eq!(next_offset(false, 3, 8192, 4096, &mut rng), 4096);
    }

    #[test]
    fn data_ring_windows() {
        let ring = data_ring(4096, 75, 3);
        assert_eq!(ring.len() as u64, DATA_RING_BYTES);
        assert_ne!(ring_window(&ring, 4096, 0), ring_window(&ring, 4096, 1));
        assert_eq!(
            ring_window(&ring, 4096, 0),
            ring_window(&ring, 4096, DATA_RING_BYTES / 4096)
        );
        let big = data_ring(8 << 20, 0, 3);
        assert_eq!(
            (big.len(), ring_window(&big, 8 << 20, 5).len()),
            (8 << 20, 8 << 20)
        );
    }

    #[test]
    fn buffer_compressibility() {
        let mut rng = Rng::new(7);
        let mut buf = vec![1u8; 4096];
        fill_buffer(&mut buf, 75, &mut rng);
        let zeros = buf.iter().filter(|&&b| b == 0).count();
        // 75% zeros by construction (+ the odd random zero byte).
        assert!((3072..3200).contains(&zeros), "{zeros}");
        fill_buffer(&mut buf, 0, &mut rng);
        assert!(buf.iter().filter(|&&b| b == 0).count() < 64);
    }
}
