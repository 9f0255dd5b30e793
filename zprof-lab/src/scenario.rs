//! Named scenarios: fixed plans that reproduce a known effect, with a short
//! text that says what to look at in the figures.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::cli::ScenarioArgs;
use crate::lab::PoolConfig;
use crate::model::{ModelKind, ModelParams};
use crate::options::{JobSpec, Layout, Rw};
use crate::output::{human_bytes, human_count, human_ns};
use crate::report::Report;
use crate::runner::{Plan, pool_name};

/// Scenario names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// RAID-Z3 of 8 emulated HDDs, 4k random writes: async, fsync=1, fsync=1 with an SSD log vdev.
    FsyncCollapse,
    /// One emulated SSD, 128k sequential writes of 50%-compressible data under off, lz4, gzip-6, zstd-3.
    Compression,
}

fn job(name: &str, rw: Rw, bs: u64, runtime_s: f64, fsync: u64, pct: u32) -> JobSpec {
    JobSpec {
        name: name.into(),
        rw,
        bs,
        size: 1 << 30,
        runtime_s,
        ios: 0,
        numjobs: 1,
        fsync,
        sync: false,
        buffer_compress_percentage: pct,
        rwmixread: 50,
    }
}

fn props(compression: &str) -> BTreeMap<String, String> {
    [("compression", compression), ("checksum", "on"), ("sync", "standard"), ("logbias", "latency")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The plan of a scenario.
pub fn plan(a: &ScenarioArgs) -> Plan {
    let hdd = a.vdev_model.clone().unwrap_or_else(|| ModelParams::defaults(ModelKind::Hdd));
    let ssd = a.log_model.clone().unwrap_or_else(|| ModelParams::defaults(ModelKind::Ssd));
    let rt = a.runtime;
    let pools = match a.name {
        Scenario::FsyncCollapse => {
            let base = PoolConfig {
                name: pool_name(0),
                layout: Layout { kind: crate::options::GroupKind::Raidz, nparity: 3, width: 8, groups: 1 },
                ashift: 12,
                vdev_size: a.vdev_size,
                vdev_model: hdd,
                logs: 0,
                log_model: ssd.clone(),
                props: props("off"),
                // Every 4k write is a whole block: no read-modify-write.
                volblocksize: 4096,
            };
            let slog = PoolConfig { name: pool_name(1), logs: 1, ..base.clone() };
            vec![
                (base, vec![job("async", Rw::Randwrite, 4096, rt, 0, 0), job("fsync", Rw::Randwrite, 4096, rt, 1, 0)]),
                (slog, vec![job("fsync-slog", Rw::Randwrite, 4096, rt, 1, 0)]),
            ]
        }
        Scenario::Compression => ["off", "lz4", "gzip-6", "zstd-3"]
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let cfg = PoolConfig {
                    name: pool_name(i),
                    layout: Layout { kind: crate::options::GroupKind::Stripe, nparity: 0, width: 1, groups: 1 },
                    ashift: 12,
                    vdev_size: a.vdev_size,
                    vdev_model: a.vdev_model.clone().unwrap_or_else(|| ModelParams::defaults(ModelKind::Ssd)),
                    logs: 0,
                    log_model: ssd.clone(),
                    props: props(c),
                    volblocksize: 128 << 10,
                };
                (cfg, vec![job(&format!("write-{c}"), Rw::Write, 128 << 10, rt, 0, 50)])
            })
            .collect(),
    };
    Plan { pools, dir: a.common.dir.clone(), keep: a.common.keep, scenario: Some(format!("{:?}", a.name)) }
}

/// A table of the scenario's jobs and what to look at.
pub fn summary(name: Scenario, r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>11} {:>6} {:>8} {:>10} {:>7}",
        "job", "IOPS", "p50", "p99", "max", "zil_commits", "txgs", "flushes", "leaf_write", "ratio"
    );
    for j in &r.jobs {
        let (s, l) = (&j.write, &j.write.lat_ns);
        let p = |k: &str| l.percentile.get(k).map(|v| human_ns(*v as f64)).unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<12} {:>10} {:>10} {:>10} {:>10} {:>11} {:>6} {:>8} {:>10} {:>6.2}x",
            j.jobname,
            human_count(s.iops),
            p("50.000000"),
            p("99.000000"),
            human_ns(l.max as f64),
            j.zil_commits,
            j.txgs_synced,
            j.flushes,
            human_bytes(j.leaf_write_bytes as f64),
            j.pool.compressratio
        );
    }
    out.push('\n');
    out.push_str(match name {
        Scenario::FsyncCollapse => {
            "What to look at: async writes only go to memory (the DMU batches them into txgs), so their \
IOPS show how fast ZFS takes data, not the disks' latency; the disks see it at txg sync \
(txgs, leaf_write; the job-end sync can take far longer than the job on emulated HDDs). With \
fsync=1 every write waits for a ZIL block write on the RAID-Z3 HDDs (most of a rotation, even \
when the block lands next to the previous one) plus a flush of each of the 8 disks, so IOPS \
collapse to about 1/latency; zil_commits equals the writes. With an SSD log vdev the same \
commits go to the SSD and IOPS recover by an order of magnitude, while the data still reaches \
the HDDs in txgs. Published on 8 SAS disks: 10.5k async, 65 with fsync, 686-1,230 with an SSD SLOG.\n"
        }
        Scenario::Compression => {
            "What to look at: ratio and leaf_write per algorithm for the same 50%-compressible data; \
IOPS shows the CPU cost of each algorithm when the emulated device is not the bottleneck.\n"
        }
    });
    out
}
