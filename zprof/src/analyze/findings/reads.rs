//! Finding 7: where the workload's reads spend their time, from the read
//! path ([`crate::analyze::read_path`]): served by the ARC, CPU-bound or
//! waiting for the disks; and 7b: what a cache would have served of them
//! ([`crate::analyze::cache_what_if`]).

use super::{Confidence, ExplainOptions, Finding, pct};
use crate::{
    analyze::cache_what_if::{CachePrediction, CacheSpec, ReuseCurve, predict},
    analyze::read_path::{ArcPaths, ArcSplit, ReadPath},
    recording::Recording,
    units::{format_bytes, format_count, format_ns},
};

/// Finding 7: where reads spend their time (see [`crate::analyze::read_path`]).
pub(super) fn reads(rec: &Recording, path: &ReadPath, workload_ns: f64, out: &mut Vec<Finding>) {
    let reads = &path.reads;
    let (device_share, cpu_share) = read_shares(path);
    let (bound, action) = read_bound(path, device_share, cpu_share);
    // Untimed reads (counted at entry): their time is at least what they
    // waited for the devices, the cache devices included.
    let read_ns = if path.timed {
        reads.total_ns as f64
    } else {
        reads.count as f64 * path.device_per_read_ns + path.cache_sync_reads.total_ns as f64
    };
    out.push(Finding {
        kind: "reads".into(),
        pool: String::new(),
        pools: Vec::new(),
        title: format!("reads are {bound}"),
        share: (read_ns / workload_ns).min(1.0),
        confidence: if reads.count >= 100 && path.blocks.is_some() {
            Confidence::High
        } else {
            Confidence::Low
        },
        evidence: read_evidence(rec, path, device_share, cpu_share),
        missing: read_limits(path),
        action,
        figures: read_figures(path),
    });
}

/// The device's and the CPU's shares of a read's mean time (0 for untimed reads).
fn read_shares(path: &ReadPath) -> (f64, f64) {
    if !path.timed {
        return (0.0, 0.0);
    }
    (
        path.device_per_read_ns / path.reads.mean_ns.max(1.0),
        path.cpu_per_read_ns / path.reads.mean_ns.max(1.0),
    )
}

/// The reads finding's evidence: the reads, how far they reached, where
/// the ARC served them from, a read's parts, the amplification, prefetch.
fn read_evidence(
    rec: &Recording,
    path: &ReadPath,
    device_share: f64,
    cpu_share: f64,
) -> Vec<String> {
    let reads = &path.reads;
    let latency = if path.timed {
        format!(
            ", p50 {}, mean {}",
            format_ns(reads.p50_ns),
            format_ns(reads.mean_ns as u64)
        )
    } else {
        String::new()
    };
    let mut evidence = vec![format!(
        "{} reads of {} on average{latency}",
        format_count(reads.count as f64),
        format_bytes(path.read_bytes())
    )];
    evidence.push(read_reach_line(path));
    if path.cache_sync_reads.count > 0 {
        evidence.push(format!(
            "cache devices (L2ARC): {} sync reads ({:.2} per read), disk time p50 {}, p99 {}",
            format_count(path.cache_sync_reads.count as f64),
            path.cache_reads_per_read(),
            format_ns(path.cache_sync_reads.p50_ns),
            format_ns(path.cache_sync_reads.p99_ns)
        ));
    }
    if let Some(arc) = &path.arc {
        evidence.push(arc_split_line(arc));
    }
    evidence.extend(l2arc_warmup_line(rec));
    evidence.push(format!(
        "per read: device {} ({:.2} blocks x (slowest of {} leaf reads {} + queue {})), decompression + checksum verification {}",
        format_ns(path.device_per_read_ns as u64),
        path.blocks_per_read,
        path.fan_out,
        format_ns(path.block_disk_ns as u64),
        format_ns(path.leaf_queue.mean_ns as u64),
        format_ns(path.cpu_per_read_ns as u64)
    ));
    if path.timed {
        evidence.push(format!(
            "device time is {} of a read's mean, CPU {}",
            pct(device_share),
            pct(cpu_share)
        ));
    }
    if reads.bytes > 0 && path.leaf_disk.bytes > 0 {
        let amplification = path.amplification();
        evidence.push(format!(
            "read amplification: leaf vdevs read {} (sync) for {} requested ({amplification:.1}x)",
            format_bytes(path.leaf_disk.bytes as f64),
            format_bytes(reads.bytes as f64)
        ));
    }
    if path.leaf_async_reads > 0 {
        evidence.push(format!(
            "prefetch and ZFS's own reads: {} leaf async reads",
            format_count(path.leaf_async_reads as f64)
        ));
    }
    evidence
}

/// What the reads finding could not measure, on this target and recording.
fn read_limits(path: &ReadPath) -> Vec<String> {
    let mut missing = match &path.arc {
        None => vec![
            "ARC hits are inferred (a read with no block read from disk); prefetch hits are not told apart \
             (on libzpool --full-timing counts where the ARC served each block)"
                .to_owned(),
        ],
        Some(_) => vec!["ARC reads count every block read, the workload's, prefetch and ZFS's metadata alike; on 2.1 a read \
             that finds its block being read without waiting counts as a hit (2.2 and later: an iohit)"
            .to_owned()],
    };
    if path.blocks.is_none() {
        missing.push("blocks read from disk (zio_read) were not probed: each leaf read is taken as its own block".into());
    }
    if !path.timed {
        missing.push("read latency: counted at entry only on uprobes (--full-timing times each read); the share is the device time".into());
    }
    missing
}

/// The reads finding's figures, the ARC's counts when it was probed.
fn read_figures(path: &ReadPath) -> Vec<(String, f64)> {
    vec![
        ("reads".into(), path.reads.count as f64),
        ("read_p50_ns".into(), path.reads.p50_ns as f64),
        ("blocks_per_read".into(), path.blocks_per_read),
        ("fan_out".into(), path.fan_out as f64),
        ("device_per_read_ns".into(), path.device_per_read_ns),
        ("cpu_per_read_ns".into(), path.cpu_per_read_ns),
        ("read_amplification".into(), path.amplification()),
        ("cache_reads_per_read".into(), path.cache_reads_per_read()),
    ]
    .into_iter()
    .chain(path.arc.iter().flat_map(|arc| {
        let all = arc.all();
        [
            ("arc_hits".into(), all.hit as f64),
            ("arc_misses".into(), (all.l2 + all.disk) as f64),
            ("arc_l2_hits".into(), all.l2 as f64),
            ("arc_in_flight".into(), all.in_flight as f64),
        ]
    }))
    .collect()
}

/// Finding 7b: what a cache would have served of the reads from disk (see
/// [`crate::analyze::cache_what_if`]), for each `--what-if l2arc=`/`arc=+`, or by
/// default for an ssd cache device holding all the data read from disk.
pub(super) fn cache_what_if(
    rec: &Recording,
    path: &ReadPath,
    options: &ExplainOptions,
    workload_ns: f64,
    out: &mut Vec<Finding>,
) {
    let Some(curve) = ReuseCurve::measure(rec) else {
        return;
    };
    // Reads the ARC serves leave a cache nothing to do.
    if path.blocks_per_read < 0.05 || curve.all_reads == 0 {
        return;
    }
    // A cache that holds all the data this run read from disk, in whole GiB.
    let whole_data = curve.first_bytes.max(1).next_multiple_of(1 << 30);
    let mut specs = options.caches.clone();
    if specs.is_empty() {
        specs.push(CacheSpec::ssd(whole_data));
    }
    let disk_ns = path.device_per_read_ns * path.reads.count as f64;
    for spec in specs {
        let Some(p) = predict(rec, path, &curve, spec, options.cpus) else {
            continue;
        };
        let gain = if p.rate_before > 0.0 {
            p.rate_after / p.rate_before
        } else {
            0.0
        };
        let title = format!(
            "{} of {}: would serve {} of the reads from disk the workload waited for, {} reads/s instead of {} ({gain:.1}x)",
            spec.kind,
            format_bytes(spec.bytes as f64),
            pct(p.served_sync),
            format_count(p.rate_after),
            format_count(p.rate_before)
        );
        out.push(Finding {
            kind: "cache_what_if".into(),
            pool: String::new(),
            pools: Vec::new(),
            title,
            share: (disk_ns * p.served_sync / workload_ns).min(1.0),
            confidence: if curve.re_reads() >= 100 && path.timed { Confidence::High } else { Confidence::Low },
            evidence: cache_evidence(path, &curve, &p),
            missing: cache_what_if_limits(&curve, path, rec.timeline.is_empty()),
            action: if curve.re_reads() == 0 {
                "No block was read from disk twice: a cache serves only data read again. Run longer, or warm the cache \
                 the way production does, and record again."
                    .into()
            } else {
                format!(
                    "A cache of {} holds all the data this run read from disk ({} distinct); smaller ones serve what the \
                     what-if says (pass --what-if l2arc=SIZE[,nvme] or arc=+SIZE).",
                    format_bytes(whole_data as f64),
                    format_bytes(curve.first_bytes as f64)
                )
            },
            figures: vec![
                ("cache_bytes".into(), spec.bytes as f64),
                ("served_sync".into(), p.served_sync),
                ("served_all".into(), p.served_all),
                ("read_rate_before".into(), p.rate_before),
                ("read_rate_after".into(), p.rate_after),
                ("read_after_ns".into(), p.read_after_ns),
            ],
        });
    }
}

fn cache_evidence(path: &ReadPath, curve: &ReuseCurve, p: &CachePrediction) -> Vec<String> {
    let mut lines = vec![
        format!(
            "{} blocks read from disk: {} first reads ({} of distinct data), {} read again; {} of them sync reads (the workload waited for them)",
            format_count(curve.all_reads as f64),
            format_count(curve.first_reads as f64),
            format_bytes(curve.first_bytes as f64),
            format_count(curve.re_reads() as f64),
            format_count(curve.sync_reads as f64)
        ),
        format!(
            "the cache serves {} of all reads from disk and {} of the sync ones",
            pct(p.served_all),
            pct(p.served_sync)
        ),
        match p.split {
            Some((hit, miss, share)) => format!(
                "per read: {} in the workload's steady seconds ({} served from memory in {}, {} waited for a disk: {}); with the cache {} (a {} block read from it in {})",
                format_ns(p.read_before_ns as u64),
                pct(1.0 - share),
                format_ns(hit as u64),
                pct(share),
                format_ns(miss as u64),
                format_ns(p.read_after_ns as u64),
                format_bytes(path.block_bytes),
                format_ns(p.cache_read_ns as u64)
            ),
            None => format!(
                "per read: {} in the run, of which device {}; with the cache {} (a {} block read from it in {})",
                format_ns(p.read_before_ns as u64),
                format_ns(path.device_per_read_ns as u64),
                format_ns(p.read_after_ns as u64),
                format_bytes(path.block_bytes),
                format_ns(p.cache_read_ns as u64)
            ),
        },
    ];
    if p.cpu_bound {
        lines.push(format!(
            "CPU-bound: {} CPUs, each read at least the {} a read served from memory took, cap the rate (with as many reads in flight as in the run it would be higher)",
            p.cpus,
            format_ns(p.split.map_or(0.0, |s| s.0) as u64)
        ));
    }
    if p.spec.bytes_per_s > 0.0 {
        let default_feed = 8.0 * 1048576.0;
        lines.push(format!(
            "at the predicted rate the feed must write {}/s of blocks still read from disk{}",
            format_bytes(p.feed_bytes_per_s),
            if p.feed_bytes_per_s > default_feed {
                ": more than ZFS's default l2arc_write_max (8 MiB/s), so the cache would fill slower than that"
            } else {
                " (ZFS's default l2arc_write_max: 8 MiB/s)"
            }
        ));
    }
    lines
}

fn cache_what_if_limits(curve: &ReuseCurve, path: &ReadPath, no_timeline: bool) -> Vec<String> {
    let mut limits = vec![
        "model: the cache keeps what the ARC evicts, oldest out first (the L2ARC's ring), and is warm; a block's \
         distance counts every byte read from disk since its previous read (its time in the ARC included: conservative); \
         readers keep as many reads in flight as in the workload's steady seconds, up to the CPUs' bound; a read from \
         the cache device costs the device's time and nothing for its I/O through ZFS (the zio pipeline, a hand-off to \
         an I/O thread and back, checksum verification); the cache holds every block the workload re-read (a cache \
         that missed 1% of them would send 1% of the misses to the disks, at a hundred cache reads' time each)"
            .to_owned(),
        format!(
            "a block read again after {} other blocks counts as a first read (the blocks zprof remembers)",
            format_count(zprof_common::MISS_BLOCKS_TRACKED as f64)
        ),
    ];
    if !curve.priority_known {
        limits.push("sync reads are not told from prefetch on the kernel yet: the served share is of all reads from disk".into());
    }
    if no_timeline {
        limits.push(
            "the workload's steady seconds: the per-second timeline is the whole host's, not this pool's, so the read \
             rates are over the whole recording (lower than the job's own when it ran for part of it)"
                .into(),
        );
    }
    if !path.timed {
        limits.push("read latency: counted at entry only (--full-timing times each read): the time per read is the device time plus decompression and checksums".into());
    }
    limits
}

/// What bounds the reads, and what to do: served by the ARC, CPU-bound,
/// disk-bound (amplified when each read fetches a much larger block), or
/// partly from disk.
fn read_bound(path: &ReadPath, device_share: f64, cpu_share: f64) -> (String, String) {
    let reach = path.blocks_per_read;
    let amplification = path.amplification();
    let from_cache = path.cache_reads_per_read();
    if reach < 0.1 && from_cache >= 0.1 && (!path.timed || device_share < 0.5) {
        (
            format!(
                "served from the ARC and its cache devices ({from_cache:.2} cache-device reads and {reach:.2} blocks \
                 from the disks per read)"
            ),
            format!(
                "The L2ARC serves the ARC's misses (its reads take {} at p50): a larger ARC moves them to memory; \
                 nothing to tune on the disk side.",
                format_ns(path.cache_sync_reads.p50_ns)
            ),
        )
    } else if reach < 0.1 && (!path.timed || device_share < 0.5) {
        (
            format!(
                "served from the ARC ({:.2} blocks read from disk per read)",
                reach
            ),
            "Reads hit the ARC: nothing to tune on the disk side.".to_owned(),
        )
    } else if path.timed && device_share < 0.5 && cpu_share >= 0.5 {
        ("CPU-bound".to_owned(), "Decompression and checksum verification dominate: a cheaper compression algorithm speeds reads up.".to_owned())
    } else if reach >= 0.5 || device_share >= 0.5 {
        let what = if amplification >= 4.0 {
            format!(
                "disk-bound and amplified {amplification:.0}x: each {} read fetches a {} block from {} leaves",
                format_bytes(path.read_bytes()),
                format_bytes(path.block_bytes),
                path.fan_out
            )
        } else {
            "disk-bound".to_owned()
        };
        let action = if amplification >= 4.0 {
            "Each read moves a whole block from the disks: a recordsize/volblocksize closer to the read size, primarycache=all (or a larger ARC, an L2ARC) so blocks are read once; on RAID-Z a narrow block spans fewer leaves."
        } else {
            "Reads wait for the disks: more ARC (or an L2ARC), faster vdevs, or more of them."
        };
        (what, action.to_owned())
    } else {
        let l2 = path.arc.as_ref().map(|a| a.all()).filter(|a| a.l2 > 0);
        let action = match l2 {
            Some(a) => format!(
                "Most reads hit the ARC; cache devices served {} of the misses, the rest wait for the disks: a larger ARC, \
                 or cache devices that hold more of the working set (see how their share grew over the run).",
                pct(a.l2 as f64 / (a.l2 + a.disk).max(1) as f64)
            ),
            None => "Most reads hit the ARC; the rest wait for the disks: a larger ARC or an L2ARC moves them to memory.".to_owned(),
        };
        (
            format!(
                "partly served from disk ({:.0}% of reads reach the leaves)",
                reach * 100.0
            ),
            action,
        )
    }
}

/// How many reads reached the disks, and how wide a block read was.
fn read_reach_line(path: &ReadPath) -> String {
    let blocks = match &path.blocks {
        Some(b) => format!(
            "{} blocks read from disk (zio_read, {} physical, byte-weighted block {})",
            format_count(b.count as f64),
            format_bytes(b.bytes_out as f64),
            format_bytes(path.block_bytes)
        ),
        None => "blocks read from disk not probed".to_owned(),
    };
    format!(
        "{blocks}; {} leaf sync reads of {} on average over {} leaves: {} per block, so {:.2} blocks reached the leaves per read",
        format_count(path.leaf_disk.count as f64),
        format_bytes(path.leaf_disk.bytes as f64 / path.leaf_disk.count.max(1) as f64),
        path.leaves,
        path.fan_out,
        path.blocks_per_read
    )
}

/// How the cache devices' share of the ARC's misses changed over the run
/// (a cache device warms as the feed writes to it), from the timeline:
/// the first third of the seconds with misses against the last third.
fn l2arc_warmup_line(rec: &Recording) -> Option<String> {
    let seconds: Vec<_> = rec
        .timeline
        .iter()
        .filter(|p| p.arc_l2_hits + p.arc_disk_reads > 0)
        .collect();
    if seconds.len() < 3 || seconds.iter().all(|p| p.arc_l2_hits == 0) {
        return None;
    }
    let third = seconds.len() / 3;
    let share = |points: &[&crate::recording::TimelinePoint]| {
        let l2: u64 = points.iter().map(|p| p.arc_l2_hits).sum();
        let disk: u64 = points.iter().map(|p| p.arc_disk_reads).sum();
        l2 as f64 / (l2 + disk).max(1) as f64
    };
    Some(format!(
        "cache devices served {} of the ARC's misses in the first {third} s with misses, {} in the last {third} s (the feed warms them)",
        pct(share(&seconds[..third])),
        pct(share(&seconds[seconds.len() - third..]))
    ))
}

/// Where the ARC served block reads from, demand and prefetch apart.
fn arc_split_line(arc: &ArcSplit) -> String {
    let share = |part: u64, all: u64| {
        if all == 0 {
            "0%".to_owned()
        } else {
            pct(part as f64 / all as f64)
        }
    };
    let paths = |p: &ArcPaths| {
        let all = p.total();
        format!(
            "{}: {} hit ({} on held buffers), {} iohit, {} L2ARC, {} disk",
            format_count(all as f64),
            share(p.hit, all),
            share(p.held, all),
            share(p.in_flight, all),
            share(p.l2, all),
            share(p.disk, all)
        )
    };
    let mut line = format!(
        "ARC reads (arc_read), demand {}; prefetch {}",
        paths(&arc.demand),
        paths(&arc.prefetch)
    );
    let cache = &arc.cache_device_reads;
    if cache.count > 0 {
        line.push_str(&format!(
            "; cache devices read {} times, p50 {}, p99 {}",
            format_count(cache.count as f64),
            format_ns(cache.p50_ns),
            format_ns(cache.p99_ns)
        ));
    }
    line
}
