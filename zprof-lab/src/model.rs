//! Device models for the pool's file vdevs: what an I/O or a cache flush would
//! cost on a disk of some kind, and the machinery that applies it.
//!
//! The arithmetic ([`ModelParams`], [`DeviceState`]) is pure and unit-tested.
//! The runtime part ([`install`], [`register_leaves`]) connects it to the C
//! core's hooks: each leaf read/write that the host has finished is queued
//! and completed (`zio_interrupt`) by one timer thread at the time the model
//! computed; each cache flush of a modelled vdev sleeps in the flushing thread
//! until the model says the flush is done (the C caller is synchronous too),
//! and then replaces the host's real fsync.
//!
//! The model's clock starts when ZFS issues the I/O (not when the host's file
//! I/O ends), and the host's hand-off from "done" to "ZFS sees it done" is
//! learnt and fired early ([`Lag`]), so ZFS sees the modelled latency wherever
//! the host is faster than the device. An I/O due sooner than the timer's own
//! hand-off is delivered by the host thread that finished it, after a short
//! spin ([`Delivery::Direct`]): its hand-off is shorter, and learnt apart. Where it is not (a 15 us nvme on a VM
//! whose thread wake-ups take tens of microseconds), ZFS sees the host's
//! floor: [`DeviceTimes`] records what ZFS saw, and the lab's report prints it.
//!
//! Times are CLOCK_MONOTONIC nanoseconds, the clock libzpool's gethrtime uses.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ffi::{c_int, c_void};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};

use crate::options::{OptError, parse_duration_ns, parse_rate};

/// Kind of device a model stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Rotating disk: seek + half a rotation for a non-contiguous I/O, one I/O at a time.
    Hdd,
    /// SATA/SAS flash: fixed access latency, a few I/Os in parallel.
    Ssd,
    /// NVMe flash: short access latency, many I/Os in parallel.
    Nvme,
    /// No added delay: I/O and flushes cost what the host's files cost.
    None,
}

/// Parameters of one device model. All times in nanoseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelParams {
    /// Device kind.
    pub kind: ModelKind,
    /// Average seek time, paid by a non-contiguous I/O (hdd).
    pub seek_ns: u64,
    /// Half a rotation, paid with the seek (hdd): 30 s / rpm.
    pub half_rotation_ns: u64,
    /// Fixed per-I/O access latency (ssd, nvme).
    pub access_ns: u64,
    /// Media transfer rate in bytes per second (per channel).
    pub rate_bytes_per_s: u64,
    /// Cost of a cache flush once the device is idle.
    pub flush_ns: u64,
    /// I/Os the device serves at once (1 for a disk).
    pub channels: u32,
    /// hdd write-back cache: writes complete once in it (after the command
    /// and the interface transfer) while it holds at most this many bytes
    /// not yet on the medium; a flush waits until they are. 0: write-through.
    #[serde(default)]
    pub write_cache_bytes: u64,
}

impl ModelParams {
    /// Refuses a model no device has: a pool on it would take hours per txg
    /// (seek=100s) or per block (rate=1), and the lab would look hung.
    fn check_plausible(&self) -> Result<(), OptError> {
        const SECOND: u64 = 1_000_000_000;
        let limits = [
            ("seek", self.seek_ns, SECOND, "1s"),
            (
                "rot (half a rotation)",
                self.half_rotation_ns,
                SECOND,
                "1s (rpm at least 30)",
            ),
            ("lat", self.access_ns, SECOND, "1s"),
            ("flush", self.flush_ns, 10 * SECOND, "10s"),
        ];
        for (name, value, max, shown) in limits {
            if value > max {
                return Err(OptError(format!(
                    "device model {name} must be at most {shown}"
                )));
            }
        }
        if self.kind != ModelKind::None && self.rate_bytes_per_s < 1 << 20 {
            return Err(OptError("device model rate must be at least 1MiB/s".into()));
        }
        if self.channels > 4096 {
            return Err(OptError("device model qd must be at most 4096".into()));
        }
        if self.write_cache_bytes > 16 << 30 {
            return Err(OptError("device model wc must be at most 16GiB".into()));
        }
        Ok(())
    }
}

/// Command overhead of a write the hdd's cache accepts.
const CACHE_COMMAND_NS: u64 = 30_000;
/// Interface rate of a write into the hdd's cache (SATA 6 Gb/s).
const CACHE_INTERFACE_BYTES_PER_S: u64 = 550_000_000;

impl ModelParams {
    /// Defaults of a model kind.
    pub fn defaults(kind: ModelKind) -> Self {
        match kind {
            // A 7,200 rpm nearline disk with its write cache on, as disks
            // ship: a write completes in the cache, and a flush waits until
            // the cache is on the medium, then for its command round trip.
            ModelKind::Hdd => ModelParams {
                kind,
                seek_ns: 8_000_000,
                half_rotation_ns: 30_000_000_000 / 7200,
                access_ns: 0,
                rate_bytes_per_s: 200 << 20,
                flush_ns: 100_000,
                channels: 1,
                write_cache_bytes: 16 << 20,
            },
            ModelKind::Ssd => ModelParams {
                kind,
                seek_ns: 0,
                half_rotation_ns: 0,
                access_ns: 60_000,
                rate_bytes_per_s: 500 << 20,
                flush_ns: 100_000,
                channels: 4,
                write_cache_bytes: 0,
            },
            ModelKind::Nvme => ModelParams {
                kind,
                seek_ns: 0,
                half_rotation_ns: 0,
                access_ns: 15_000,
                rate_bytes_per_s: 2000 << 20,
                flush_ns: 20_000,
                channels: 16,
                write_cache_bytes: 0,
            },
            ModelKind::None => ModelParams {
                kind,
                seek_ns: 0,
                half_rotation_ns: 0,
                access_ns: 0,
                rate_bytes_per_s: 0,
                flush_ns: 0,
                channels: 1,
                write_cache_bytes: 0,
            },
        }
    }

    /// Time to transfer `bytes` at the media rate.
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        if self.rate_bytes_per_s == 0 {
            0
        } else {
            (bytes as u128 * 1_000_000_000 / self.rate_bytes_per_s as u128) as u64
        }
    }

    /// Time from "the device starts this I/O" to "the data is on the medium".
    ///
    /// `gap` is how the I/O lies relative to the end of the previous one on the
    /// device: `Some((bytes_ahead, idle_ns))` when it starts within [`NEAR_BYTES`]
    /// of that end (same track region; negative = behind it), `idle_ns` being
    /// how long the device sat idle in between; `None` otherwise.
    ///
    /// hdd: a far I/O pays a seek and, on average, half a rotation. A near one
    /// pays no seek: it waits for its sector to come under the head. If the
    /// device was streaming (no idle time) that is just the skipped bytes
    /// passing by; after idle time the platter has moved on, so the wait is the
    /// skip minus the idle time, modulo one rotation: an I/O that arrives just
    /// after its neighbour finished waits almost a whole revolution (the
    /// classic "missed revolution" of synchronous sequential writes), and so
    /// does one that starts a little behind the head.
    /// ssd/nvme: a fixed access latency. All kinds add the transfer time.
    pub fn service_ns(&self, size: u64, gap: Option<(i64, u64)>) -> u64 {
        let transfer = self.transfer_ns(size);
        let position = match (self.kind, gap) {
            (ModelKind::Hdd, None) => self.seek_ns + self.half_rotation_ns,
            (ModelKind::Hdd, Some((ahead, idle))) => {
                let skip = self.transfer_ns(ahead.unsigned_abs()) as i128 * ahead.signum() as i128;
                let rotation = 2 * self.half_rotation_ns as i128;
                if rotation == 0 {
                    skip.max(0) as u64
                } else {
                    (skip - idle as i128).rem_euclid(rotation) as u64
                }
            }
            (ModelKind::Ssd | ModelKind::Nvme, _) => self.access_ns,
            (ModelKind::None, _) => 0,
        };
        position + transfer
    }
}

/// How far ahead of the previous I/O's end an hdd I/O may start and still
/// count as "near" (no seek, only rotation): about one track.
pub const NEAR_BYTES: u64 = 1 << 20;

impl std::str::FromStr for ModelParams {
    type Err = OptError;

    /// `KIND[:key=value,...]`, e.g. `hdd:seek=8ms,rpm=7200,rate=200MiB/s,flush=1ms`.
    /// Keys: seek, rpm, rot (half rotation), lat (access latency), rate, flush, qd,
    /// wc (hdd write-back cache size, or off).
    fn from_str(s: &str) -> Result<Self, OptError> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let kind = match kind {
            "hdd" => ModelKind::Hdd,
            "ssd" => ModelKind::Ssd,
            "nvme" => ModelKind::Nvme,
            "none" => ModelKind::None,
            other => {
                return Err(OptError(format!(
                    "unknown device model '{other}' (expected hdd, ssd, nvme or none)"
                )));
            }
        };
        let mut p = ModelParams::defaults(kind);
        for kv in rest.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| OptError(format!("device model option '{kv}' is not key=value")))?;
            match k {
                "seek" => p.seek_ns = parse_duration_ns(v)?,
                "rot" => p.half_rotation_ns = parse_duration_ns(v)?,
                "rpm" => {
                    let rpm: u64 = v.parse().map_err(|_| OptError(format!("bad rpm '{v}'")))?;
                    if rpm == 0 {
                        return Err(OptError("rpm must be > 0".into()));
                    }
                    p.half_rotation_ns = 30_000_000_000 / rpm;
                }
                "lat" => p.access_ns = parse_duration_ns(v)?,
                "rate" => p.rate_bytes_per_s = parse_rate(v)?,
                "flush" => p.flush_ns = parse_duration_ns(v)?,
                "wc" => {
                    p.write_cache_bytes = if v == "off" {
                        0
                    } else {
                        crate::options::parse_size(v)?
                    }
                }
                "qd" => {
                    p.channels = v.parse().map_err(|_| OptError(format!("bad qd '{v}'")))?;
                    if p.channels == 0 {
                        return Err(OptError("qd must be > 0".into()));
                    }
                }
                other => return Err(OptError(format!("unknown device model option '{other}'"))),
            }
        }
        p.check_plausible()?;
        Ok(p)
    }
}

impl fmt::Display for ModelParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |ns: u64| ns as f64 / 1e6;
        let mib = self.rate_bytes_per_s as f64 / (1u64 << 20) as f64;
        match self.kind {
            ModelKind::Hdd => write!(
                f,
                "hdd:seek={:.3}ms,rot={:.3}ms,rate={mib:.0}MiB/s,flush={:.3}ms,wc={}",
                ms(self.seek_ns),
                ms(self.half_rotation_ns),
                ms(self.flush_ns),
                match self.write_cache_bytes {
                    0 => "off".to_owned(),
                    b => format!("{}MiB", b >> 20),
                }
            ),
            ModelKind::Ssd | ModelKind::Nvme => write!(
                f,
                "{}:lat={:.3}ms,rate={mib:.0}MiB/s,flush={:.3}ms,qd={}",
                if self.kind == ModelKind::Ssd {
                    "ssd"
                } else {
                    "nvme"
                },
                ms(self.access_ns),
                ms(self.flush_ns),
                self.channels
            ),
            ModelKind::None => write!(f, "none"),
        }
    }
}

/// How much a disk's command queue (NCQ/TCQ) shortens the positioning of a
/// far I/O when `depth` requests are queued (this one included): it serves
/// the one closest to the head first. depth^-0.3 is a fit to published random
/// 4k read rates of 7,200 rpm disks (about 80 IOPS at depth 1, 120 at 4, 180
/// at 16, 220 at 32).
pub fn queued_positioning_factor(depth: usize) -> f64 {
    (depth.max(1) as f64).powf(-0.3)
}

impl ModelParams {
    /// Service time of a far hdd I/O: the average seek plus where the sector
    /// happens to be (`rotation` in [0, 1) of a turn: half a turn on average,
    /// so a block spread over several disks waits for the unluckiest one),
    /// shortened by the command queue's reordering, plus the transfer.
    pub fn far_ns(&self, size: u64, rotation: f64, depth: usize) -> u64 {
        let positioning = self.seek_ns as f64 + 2.0 * self.half_rotation_ns as f64 * rotation;
        (positioning * queued_positioning_factor(depth)) as u64 + self.transfer_ns(size)
    }
}

/// Queueing state of one emulated device.
#[derive(Debug, Clone)]
pub struct DeviceState {
    /// When each channel becomes free.
    busy_until: Vec<u64>,
    /// Where the previous I/O ended (for the hdd's contiguity test).
    last_end: Option<u64>,
    /// When the I/Os submitted so far start (hdd: its command queue's depth).
    starts: std::collections::VecDeque<u64>,
    /// State of the rotational-position generator (xorshift64*, fixed seed:
    /// runs are reproducible).
    rng: u64,
    /// hdd writes in the write-back cache: when each is on the medium, and
    /// its bytes.
    dirty: std::collections::VecDeque<(u64, u64)>,
}

impl DeviceState {
    /// An idle device.
    pub fn new(p: &ModelParams) -> Self {
        DeviceState {
            busy_until: vec![0; p.channels.max(1) as usize],
            last_end: None,
            starts: std::collections::VecDeque::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
            dirty: std::collections::VecDeque::new(),
        }
    }

    /// The next rotational position, uniform in [0, 1).
    pub fn next_rotation(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Requests queued at the device at `now` and not started, plus one.
    fn queue_depth(&mut self, now: u64) -> usize {
        self.starts.retain(|start| *start > now);
        self.starts.len() + 1
    }

    /// An I/O arrives at `now`: it starts when a channel is free and completes
    /// after its service time. Returns the completion time.
    ///
    /// Requests reach the model when the host has finished them, and host
    /// threads finish in any order, so neighbouring requests that ZFS issued
    /// together can arrive here in reverse order. A real disk has them in its
    /// queue together and serves them in rotational order (NCQ/TCQ), so a near
    /// request that lies *behind* the previous one and arrives while the device
    /// is still busy is charged as streaming (transfer only), and the head stays
    /// at the furthest end. An idle device has no queue to reorder: a request
    /// behind the head then waits for the platter, as [`ModelParams::service_ns`] says.
    pub fn submit(
        &mut self,
        p: &ModelParams,
        now: u64,
        offset: u64,
        size: u64,
        write: bool,
    ) -> u64 {
        let (i, free) = self
            .busy_until
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .unwrap_or((0, 0));
        let near = self
            .last_end
            .map(|end| offset as i64 - end as i64)
            .filter(|d| d.unsigned_abs() <= NEAR_BYTES);
        let reordered = p.kind == ModelKind::Hdd && free > now && near.is_some_and(|d| d < 0);
        let gap = if reordered {
            Some((0, 0))
        } else {
            near.map(|d| (d, now.saturating_sub(free)))
        };
        self.last_end = Some(match (reordered, self.last_end) {
            (true, Some(end)) => end.max(offset + size),
            _ => offset + size,
        });
        let start = now.max(free);
        let hdd = p.kind == ModelKind::Hdd;
        // Measured (and the queue's record trimmed) at every hdd request, so
        // that streaming requests do not pile up start times.
        let depth = if hdd { self.queue_depth(now) } else { 1 };
        let service = match (p.kind, gap) {
            (ModelKind::Hdd, None) => p.far_ns(size, self.next_rotation(), depth),
            _ => p.service_ns(size, gap),
        };
        if hdd {
            self.starts.push_back(start);
        }
        let done = start + service;
        self.busy_until[i] = done;
        if write && hdd && p.write_cache_bytes > 0 {
            return self.cached_write(p, now, size, done);
        }
        done
    }

    /// A write into the hdd's write-back cache, on the medium at `on_medium`:
    /// it completes once accepted, or, when the cache is full, once enough
    /// earlier writes have reached the medium to make room for it.
    fn cached_write(&mut self, p: &ModelParams, now: u64, size: u64, on_medium: u64) -> u64 {
        self.dirty.retain(|(at, _)| *at > now);
        let accepted = now + CACHE_COMMAND_NS + size * 1_000_000_000 / CACHE_INTERFACE_BYTES_PER_S;
        let mut excess = (self.dirty.iter().map(|(_, b)| b).sum::<u64>() + size)
            .saturating_sub(p.write_cache_bytes);
        let mut room_at = accepted;
        for (at, bytes) in &self.dirty {
            if excess == 0 {
                break;
            }
            excess = excess.saturating_sub(*bytes);
            room_at = room_at.max(*at);
        }
        self.dirty.push_back((on_medium, size));
        room_at.min(on_medium.max(accepted))
    }

    /// A cache flush arrives at `now`: it waits for every outstanding I/O
    /// (all channels) and then takes the flush time. Returns its completion.
    pub fn flush(&mut self, p: &ModelParams, now: u64) -> u64 {
        let idle = self.busy_until.iter().copied().max().unwrap_or(0).max(now);
        let done = idle + p.flush_ns;
        for b in &mut self.busy_until {
            *b = done;
        }
        done
    }
}

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC, like libzpool's gethrtime).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One emulated leaf vdev.
struct Leaf {
    params: ModelParams,
    state: Mutex<DeviceState>,
    flushes: AtomicU64,
    /// What ZFS saw of its modelled I/Os and flushes (see [`DeviceTimes`]).
    io_times: Timed,
    flush_times: Timed,
    /// The host's hand-offs, per leaf: a busy hdd pool's completions are
    /// slower than a log device's, and must not make the log device early.
    io_lag: Lag,
    /// The hand-off of an I/O that the host thread delivers itself (no timer
    /// wake-up): shorter than `io_lag`, so both are learnt.
    direct_lag: Lag,
    flush_lag: Lag,
}

/// What the modelled I/Os and flushes of one leaf took as ZFS saw them: an
/// I/O from its issue (io_delay's start) to vdev_queue_io_done (its end), a
/// flush from the fsync hook's entry to its return. They can exceed the
/// model's figures where the host's own hand-offs are slower than the device;
/// the model's own figures for the same I/Os and flushes are kept beside
/// them, so a check can tell a host that did not deliver the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceTimes {
    /// Reads and writes timed.
    pub ios: u64,
    /// Their summed latency, ns.
    pub io_ns: u64,
    /// Flushes timed.
    pub flushes: u64,
    /// Their summed latency, ns.
    pub flush_ns: u64,
    /// What the model gave the same I/Os, summed, ns (queueing included).
    #[serde(default)]
    pub model_io_ns: u64,
    /// What the model gave the same flushes, summed, ns.
    #[serde(default)]
    pub model_flush_ns: u64,
}

impl DeviceTimes {
    /// The difference since `earlier`.
    pub fn since(&self, earlier: &DeviceTimes) -> DeviceTimes {
        DeviceTimes {
            ios: self.ios - earlier.ios,
            io_ns: self.io_ns - earlier.io_ns,
            flushes: self.flushes - earlier.flushes,
            flush_ns: self.flush_ns - earlier.flush_ns,
            model_io_ns: self.model_io_ns - earlier.model_io_ns,
            model_flush_ns: self.model_flush_ns - earlier.model_flush_ns,
        }
    }

    /// Sum of two.
    pub fn plus(&self, other: &DeviceTimes) -> DeviceTimes {
        DeviceTimes {
            ios: self.ios + other.ios,
            io_ns: self.io_ns + other.io_ns,
            flushes: self.flushes + other.flushes,
            flush_ns: self.flush_ns + other.flush_ns,
            model_io_ns: self.model_io_ns + other.model_io_ns,
            model_flush_ns: self.model_flush_ns + other.model_flush_ns,
        }
    }

    /// How many times its model's time the device took as ZFS saw it (I/Os
    /// and flushes together); `None` when nothing modelled was timed.
    pub fn delivered_over_model(&self) -> Option<f64> {
        let model = self.model_io_ns + self.model_flush_ns;
        (model > 0).then(|| (self.io_ns + self.flush_ns) as f64 / model as f64)
    }
}

/// A count of events, their summed latency as seen and as modelled, shared
/// between threads.
#[derive(Default)]
struct Timed {
    count: AtomicU64,
    ns: AtomicU64,
    model_ns: AtomicU64,
}

impl Timed {
    fn add(&self, seen_ns: u64, model_ns: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.ns.fetch_add(seen_ns, Ordering::Relaxed);
        self.model_ns.fetch_add(model_ns, Ordering::Relaxed);
    }

    /// Count, seen ns, modelled ns.
    fn load(&self) -> (u64, u64, u64) {
        (
            self.count.load(Ordering::Relaxed),
            self.ns.load(Ordering::Relaxed),
            self.model_ns.load(Ordering::Relaxed),
        )
    }
}

/// A zio pointer waiting for its completion time. Pointers are only handed
/// back to libzpool, never dereferenced here.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pending(u64, usize);

/// A modelled I/O in flight.
struct Scheduled {
    leaf: Arc<Leaf>,
    /// When ZFS issued it.
    arrival: u64,
    /// When the model completes it.
    done: u64,
    /// How it reaches ZFS.
    path: Delivery,
}

/// How a modelled I/O is handed back to ZFS.
#[derive(Clone, Copy)]
enum Delivery {
    /// The timer thread fires it, early by the timer path's learnt lag.
    Timer,
    /// The host thread that finished it calls zio_interrupt at `at` (after a
    /// short spin when the device is not done yet but too close for the
    /// timer's longer hand-off; at once when the host itself was slower
    /// than the device, which no timing can make up for).
    Direct { at: u64 },
}

/// The longest a host thread spins to deliver an I/O on time: beyond it,
/// the timer path's lag is short enough to use.
const MAX_SPIN_NS: u64 = 200_000;

/// How late the host delivers what the model schedules, learnt as it runs.
///
/// Between the moment the model says a device is done and the moment ZFS
/// sees it (the timer thread's wake-up, zio_interrupt's hand-off to a taskq
/// thread, that thread's wake-up; a flushing thread's own wake-up), the host
/// adds tens of microseconds that a device does not have. The model fires
/// that much early, so ZFS sees the modelled latency: an integral controller
/// on the observed lateness, clamped to [0, `MAX_LAG_NS`].
struct Lag(AtomicU64);

/// The largest hand-off the model compensates for.
const MAX_LAG_NS: u64 = 2_000_000;

impl Lag {
    const fn new() -> Self {
        Lag(AtomicU64::new(0))
    }

    /// The current lag, ns.
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// When to act so that the result is seen at `target`, but not before `now`.
    fn fire_at(&self, target: u64, now: u64) -> u64 {
        target
            .saturating_sub(self.0.load(Ordering::Relaxed))
            .max(now)
    }

    /// Something scheduled for `target` was seen at `seen`: move an eighth of
    /// the error, at most `MAX_STEP_NS` (a txg sync's stall must not swing
    /// it; races between threads only blur the average).
    fn learn(&self, target: u64, seen: u64) {
        const MAX_STEP_NS: i64 = 100_000;
        let error = (seen as i64 - target as i64).clamp(-MAX_STEP_NS, MAX_STEP_NS);
        let current = self.0.load(Ordering::Relaxed) as i64;
        let next = (current + error / 8).clamp(0, MAX_LAG_NS as i64);
        self.0.store(next as u64, Ordering::Relaxed);
    }
}

struct Runtime {
    by_guid: RwLock<HashMap<u64, Arc<Leaf>>>,
    by_inode: RwLock<HashMap<(u64, u64), u64>>,
    queue: Mutex<BinaryHeap<Reverse<Pending>>>,
    wake: Condvar,
    /// Each modelled I/O in flight, by zio.
    scheduled: Mutex<HashMap<usize, Scheduled>>,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| Runtime {
        by_guid: RwLock::new(HashMap::new()),
        by_inode: RwLock::new(HashMap::new()),
        queue: Mutex::new(BinaryHeap::new()),
        wake: Condvar::new(),
        scheduled: Mutex::new(HashMap::new()),
    })
}

/// While set, the models are off: I/O costs what the host's files cost.
static SUSPENDED: AtomicBool = AtomicBool::new(false);

/// Turns the device models off (or back on). A job's unmeasured layout runs
/// without them: on 8 emulated disks, writing a 256 MiB volume at 8k blocks
/// took 49 s, for data whose place on disk does not depend on the timing.
pub fn suspend(off: bool) {
    SUSPENDED.store(off, Ordering::SeqCst);
}

extern "C" fn io_hook(
    zio: *mut c_void,
    guid: u64,
    is_write: c_int,
    offset: u64,
    size: u64,
    issued_ns: u64,
) {
    let rt = runtime();
    // Suspended models cost what a leaf without one costs.
    let leaf = if SUSPENDED.load(Ordering::Relaxed) {
        None
    } else {
        rt.by_guid.read().ok().and_then(|m| m.get(&guid).cloned())
    };
    let Some(leaf) = leaf.filter(|l| l.params.kind != ModelKind::None) else {
        // SAFETY: zio came from libzpool's zio_delay_interrupt and is completed once.
        unsafe { crate::ffi::zio_interrupt(zio) };
        return;
    };
    let now = now_ns();
    // The device received the I/O when ZFS issued it: the host's own file I/O
    // and its hand-off to a vdev_file thread happen inside the modelled time.
    let arrival = if issued_ns > 0 && issued_ns <= now {
        issued_ns
    } else {
        now
    };
    let done = leaf
        .state
        .lock()
        .map(|mut s| s.submit(&leaf.params, arrival, offset, size, is_write != 0))
        .unwrap_or(now);
    let fire = leaf.io_lag.fire_at(done, now);
    if fire > now {
        let io = Scheduled {
            leaf,
            arrival,
            done,
            path: Delivery::Timer,
        };
        rt.scheduled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(zio as usize, io);
        rt.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Reverse(Pending(fire, zio as usize)));
        rt.wake.notify_one();
        return;
    }
    // Too close for the timer's hand-off: deliver from this thread, after a
    // spin if the device is not done yet (the direct hand-off is shorter).
    let at = spin_until(leaf.direct_lag.fire_at(done, now).min(now + MAX_SPIN_NS));
    let io = Scheduled {
        leaf,
        arrival,
        done,
        path: Delivery::Direct { at },
    };
    rt.scheduled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(zio as usize, io);
    // SAFETY: zio came from libzpool's zio_delay_interrupt and is completed once.
    unsafe { crate::ffi::zio_interrupt(zio) };
}

/// Busy-waits until `t` (CLOCK_MONOTONIC ns); returns the time it stopped.
fn spin_until(t: u64) -> u64 {
    loop {
        let now = now_ns();
        if now >= t {
            return now;
        }
        std::hint::spin_loop();
    }
}

extern "C" fn done_hook(zio: *mut c_void) {
    // The clock stops on entry: the lock below is shared with every issuing
    // thread and the timer thread, and waiting for it is not the device's time
    // (on a loaded host it put 2.3.2's nvme figures 6 us above zprof's io_delay).
    let now = now_ns();
    let rt = runtime();
    let io = rt
        .scheduled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&(zio as usize));
    if let Some(io) = io {
        match io.path {
            Delivery::Timer => io.leaf.io_lag.learn(io.done, now),
            // The direct hand-off itself: what was seen after the call.
            Delivery::Direct { at } => io.leaf.direct_lag.learn(at + io.leaf.direct_lag.get(), now),
        }
        io.leaf.io_times.add(
            now.saturating_sub(io.arrival),
            io.done.saturating_sub(io.arrival),
        );
    }
}

extern "C" fn flush_hook(fd: c_int) -> c_int {
    let rt = runtime();
    // SAFETY: fstat on a descriptor libzpool holds open; st is ours.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return 0;
    }
    let guid = rt
        .by_inode
        .read()
        .ok()
        .and_then(|m| m.get(&(st.st_dev, st.st_ino)).copied());
    let leaf = guid.and_then(|g| rt.by_guid.read().ok().and_then(|m| m.get(&g).cloned()));
    let Some(leaf) = leaf else { return 0 };
    if SUSPENDED.load(Ordering::Relaxed) {
        return 1; // a layout's flush: nothing to wait for
    }
    leaf.flushes.fetch_add(1, Ordering::Relaxed);
    if leaf.params.kind == ModelKind::None {
        return 0; // the host's real fsync is this device's flush
    }
    let now = now_ns();
    let done = leaf
        .state
        .lock()
        .map(|mut s| s.flush(&leaf.params, now))
        .unwrap_or(now);
    sleep_until(leaf.flush_lag.fire_at(done, now));
    let woke = now_ns();
    leaf.flush_lag.learn(done, woke);
    leaf.flush_times.add(woke - now, done.saturating_sub(now));
    1
}

fn sleep_until(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as i64,
        tv_nsec: (t % 1_000_000_000) as i64,
    };
    // SAFETY: absolute monotonic sleep; EINTR just retries.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Asks for no timer slack on the calling thread, and so on every thread it
/// creates afterwards (the slack is inherited). Called before kernel_init
/// starts libzpool's taskq threads: with Linux's default 50 us slack, every
/// timed sleep in them (a flush emulated in the flushing thread, a taskq's
/// timed wait) would end up to 50 us late, and an ssd model's 60 us access
/// would look like 120 us to ZFS.
pub fn precise_timers() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

fn timer_thread() {
    // Wake-ups are what the model's precision rests on.
    precise_timers();
    let rt = runtime();
    let mut due = Vec::new();
    loop {
        {
            let mut q = rt.queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = now_ns();
                match q.peek() {
                    None => q = rt.wake.wait(q).unwrap_or_else(|e| e.into_inner()),
                    Some(Reverse(Pending(t, _))) if *t <= now => break,
                    Some(Reverse(Pending(t, _))) => {
                        let wait = std::time::Duration::from_nanos(t - now);
                        q = rt
                            .wake
                            .wait_timeout(q, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
            let now = now_ns();
            while let Some(Reverse(Pending(t, _))) = q.peek() {
                if *t > now {
                    break;
                }
                if let Some(Reverse(Pending(_, z))) = q.pop() {
                    due.push(z);
                }
            }
        }
        for z in due.drain(..) {
            // SAFETY: each queued zio is completed exactly once, here.
            unsafe { crate::ffi::zio_interrupt(z as *mut c_void) };
        }
    }
}

/// Starts the timer thread and installs the hooks in the C core (once per process).
pub fn install() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        runtime();
        std::thread::Builder::new()
            .name("zlab-devtimer".into())
            .spawn(timer_thread)
            .expect("spawn device-model timer thread");
        // SAFETY: the hooks are 'static functions of this module.
        unsafe { crate::ffi::zl_set_hooks(Some(io_hook), Some(flush_hook), Some(done_hook)) };
    });
}

/// A leaf to emulate: its guid, backing file and model.
pub struct LeafSpec {
    /// vdev guid as ZFS reports it.
    pub guid: u64,
    /// Backing file (to recognise its descriptor in flushes).
    pub path: std::path::PathBuf,
    /// Device model.
    pub params: ModelParams,
}

/// Puts leaves under their models; I/O to unknown leaves completes at once.
pub fn register_leaves(leaves: &[LeafSpec]) {
    let rt = runtime();
    let mut g = rt.by_guid.write().unwrap_or_else(|e| e.into_inner());
    let mut i = rt.by_inode.write().unwrap_or_else(|e| e.into_inner());
    for l in leaves {
        g.insert(
            l.guid,
            Arc::new(Leaf {
                state: Mutex::new(DeviceState::new(&l.params)),
                params: l.params.clone(),
                flushes: AtomicU64::new(0),
                io_times: Timed::default(),
                flush_times: Timed::default(),
                io_lag: Lag::new(),
                direct_lag: Lag::new(),
                flush_lag: Lag::new(),
            }),
        );
        if let Ok(md) = std::fs::metadata(&l.path) {
            use std::os::unix::fs::MetadataExt;
            i.insert((md.dev(), md.ino()), l.guid);
        }
    }
}

/// Forgets leaves (after their pool is exported).
pub fn unregister_leaves(guids: &[u64]) {
    let rt = runtime();
    let mut g = rt.by_guid.write().unwrap_or_else(|e| e.into_inner());
    for guid in guids {
        g.remove(guid);
    }
    rt.by_inode
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|_, v| !guids.contains(v));
}

/// Latencies of the leaf's modelled I/Os and flushes so far.
pub fn device_times(guid: u64) -> DeviceTimes {
    let leaf = runtime()
        .by_guid
        .read()
        .ok()
        .and_then(|m| m.get(&guid).cloned());
    leaf.map_or_else(DeviceTimes::default, |l| {
        let ((ios, io_ns, model_io_ns), (flushes, flush_ns, model_flush_ns)) =
            (l.io_times.load(), l.flush_times.load());
        DeviceTimes {
            ios,
            io_ns,
            flushes,
            flush_ns,
            model_io_ns,
            model_flush_ns,
        }
    })
}

/// Cache flushes seen so far on a leaf (modelled or passed to the host).
pub fn flushes(guid: u64) -> u64 {
    runtime()
        .by_guid
        .read()
        .ok()
        .and_then(|m| m.get(&guid).map(|l| l.flushes.load(Ordering::Relaxed)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_random_io_pays_seek_and_half_rotation() {
        let p: ModelParams = "hdd:seek=8ms,rpm=7200,rate=200MiB/s".parse().unwrap();
        assert_eq!(p.half_rotation_ns, 4_166_666);
        let transfer = 4096u64 * 1_000_000_000 / (200 << 20);
        assert_eq!(p.service_ns(4096, None), 8_000_000 + 4_166_666 + transfer);
        // Streaming, adjacent: only the transfer.
        assert_eq!(p.service_ns(4096, Some((0, 0))), transfer);
        // Adjacent but 1 ms after the device went idle: the sector passed, wait
        // for the rest of the revolution (8,333,332 ns per turn).
        assert_eq!(
            p.service_ns(4096, Some((0, 1_000_000))),
            8_333_332 - 1_000_000 + transfer
        );
        // Near, skipping 2 ms worth of sectors, idle 0.5 ms: 1.5 ms of rotation.
        let skip = p.rate_bytes_per_s / 500;
        let wait = p.transfer_ns(skip) - 500_000;
        assert_eq!(
            p.service_ns(4096, Some((skip as i64, 500_000))),
            wait + transfer
        );
        // Streaming, but starting 1 ms worth of sectors behind the head: almost a turn.
        let back = p.rate_bytes_per_s as i64 / 1000;
        assert_eq!(
            p.service_ns(4096, Some((-back, 0))),
            8_333_332 - p.transfer_ns(back as u64) + transfer
        );
    }

    #[test]
    fn hdd_queues_one_request_at_a_time() {
        let p: ModelParams = "hdd:seek=1ms,rot=0,rate=1000000000".parse().unwrap();
        let mut d = DeviceState::new(&p);
        // 1000 bytes at 1e9 B/s = 1 us transfer.
        let a = d.submit(&p, 0, 0, 1000, false);
        assert_eq!(a, 1_001_000);
        // Contiguous, arrives while busy: starts when the first ends.
        let b = d.submit(&p, 10, 1000, 1000, false);
        assert_eq!(b, a + 1000);
        // Far away: pays the seek again, queued behind the others; with B
        // still waiting in the queue the disk picks the closer of two.
        let c = d.submit(&p, 10, 10 << 20, 1000, false);
        assert_eq!(
            c,
            b + (1_000_000.0 * queued_positioning_factor(2)) as u64 + 1000
        );
        // Idle device, later arrival, adjacent, no rotation modelled: starts at arrival.
        let e = d.submit(&p, 10_000_000, (10 << 20) + 1000, 1000, false);
        assert_eq!(e, 10_000_000 + 1000);
    }

    #[test]
    fn hdd_serves_queued_neighbours_in_rotational_order() {
        let p: ModelParams = "hdd:seek=1ms,rpm=6000,rate=1000000000".parse().unwrap();
        let mut d = DeviceState::new(&p);
        // 4096 bytes at 1e9 B/s = 4,096 ns. ZFS issued A=[0,4k) and B=[4k,8k); the host
        // finished B first. B arrives on an idle device: far from nothing, seek + half turn.
        let rotation = d.clone().next_rotation();
        let b = d.submit(&p, 0, 4096, 4096, false);
        assert_eq!(b, 1_000_000 + (10_000_000.0 * rotation) as u64 + 4096);
        // A arrives while the disk is still busy with B: in the disk's queue it would have
        // gone first, so it costs its transfer only, not a revolution.
        let a = d.submit(&p, 10, 0, 4096, false);
        assert_eq!(a, b + 4096);
        // The head is still after B: C=[8k,12k) arriving while busy streams on.
        let c = d.submit(&p, 20, 8192, 4096, false);
        assert_eq!(c, a + 4096);
        // Behind the head on an idle device: no queue to reorder, wait for the platter
        // (one turn = 10 ms, minus the 1 ms idle, minus the 12k we are behind, mod a turn).
        let late = c + 1_000_000;
        let e = d.submit(&p, late, 0, 4096, false);
        assert_eq!(e, late + (10_000_000 - 1_000_000 - 12_288) + 4096);
    }

    #[test]
    fn hdd_rotation_averages_half_a_turn_and_queues_shorten_it() {
        let p: ModelParams = "hdd:seek=8ms,rpm=7200,rate=200MiB/s".parse().unwrap();
        let mut d = DeviceState::new(&p);
        let draws: Vec<f64> = (0..100_000).map(|_| d.next_rotation()).collect();
        assert!(draws.iter().all(|r| (0.0..1.0).contains(r)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        // At depth 1 a far 4k read averages seek + half a turn: about 82 IOPS.
        let at = |depth| {
            draws
                .iter()
                .map(|r| p.far_ns(4096, *r, depth) as f64)
                .sum::<f64>()
                / draws.len() as f64
        };
        let iops = |depth| 1e9 / at(depth);
        assert!((iops(1) - 82.0).abs() < 2.0, "{}", iops(1));
        assert!((iops(4) / iops(1) - 4f64.powf(0.3)).abs() < 0.02);
    }

    #[test]
    fn hdd_write_cache_accepts_writes_and_flush_waits_for_the_medium() {
        let p: ModelParams = "hdd:seek=8ms,rot=0,rate=1000000000,flush=100us,wc=8k"
            .parse()
            .unwrap();
        let mut d = DeviceState::new(&p);
        let accept = CACHE_COMMAND_NS + 4096 * 1_000_000_000 / CACHE_INTERFACE_BYTES_PER_S;
        // Two far 4k writes: accepted at once, each 8 ms on the medium.
        assert_eq!(d.submit(&p, 0, 0, 4096, true), accept);
        assert_eq!(d.submit(&p, 0, 100 << 20, 4096, true), accept);
        // The cache (8k) is full: a third waits until the first is on the medium.
        assert_eq!(d.submit(&p, 0, 200 << 20, 4096, true), 8_004_096);
        // A flush waits for all three on the medium (the third queued behind
        // the second: the disk picks the closer of two), then its command.
        let third_on_medium =
            2 * 8_004_096 + (8_000_000.0 * queued_positioning_factor(2)) as u64 + 4096;
        assert_eq!(d.flush(&p, 10), third_on_medium + 100_000);
        // Write-through (wc=off): a write completes on the medium.
        let p: ModelParams = "hdd:seek=8ms,rot=0,rate=1000000000,wc=off".parse().unwrap();
        let mut d = DeviceState::new(&p);
        assert_eq!(d.submit(&p, 0, 0, 4096, true), 8_004_096);
    }

    #[test]
    fn flush_waits_for_all_channels() {
        let p: ModelParams = "ssd:lat=100us,rate=1000000000,flush=1ms,qd=2"
            .parse()
            .unwrap();
        let mut d = DeviceState::new(&p);
        let a = d.submit(&p, 0, 0, 0, false);
        let b = d.submit(&p, 0, 0, 0, false);
        assert_eq!((a, b), (100_000, 100_000)); // two channels in parallel
        assert_eq!(d.flush(&p, 50_000), 1_100_000);
        assert_eq!(d.submit(&p, 0, 0, 0, false), 1_200_000);
    }

    #[test]
    fn model_parse_errors() {
        assert!("tape".parse::<ModelParams>().is_err());
        assert!("hdd:seek".parse::<ModelParams>().is_err());
        assert!("hdd:colour=red".parse::<ModelParams>().is_err());
        assert!("ssd:qd=0".parse::<ModelParams>().is_err());
        assert_eq!("none".parse::<ModelParams>().unwrap().kind, ModelKind::None);
        // Issue 14: models no device has made the lab look hung.
        assert!(
            "hdd:seek=100s"
                .parse::<ModelParams>()
                .unwrap_err()
                .0
                .contains("seek must be at most 1s")
        );
        assert!(
            "ssd:rate=1"
                .parse::<ModelParams>()
                .unwrap_err()
                .0
                .contains("at least 1MiB/s")
        );
        assert!("hdd:rpm=1".parse::<ModelParams>().is_err());
    }
}
