//! The request layer's rows (REQUESTS: per layer, operation, dataset,
//! process and cgroup), named with the dataset and directory names the
//! programs recorded and the cgroup paths found under cgroup2, and the slow
//! requests streamed.

use std::collections::HashMap;

use anyhow::anyhow;
use aya::{Ebpf, maps::HashMap as BpfHashMap};
use zprof_common::{
    DatasetInfo, DirName, HIST_BUCKETS, Hist, RequestKey, RequestStart, SlowRequest,
};

use crate::recording::{
    requests::{self, RequestRecord, SlowRequestRecord},
    sparse_buckets,
};

/// The request layer's rows, its slow requests, and what is still in progress.
#[derive(Debug, Default)]
pub struct RequestRows {
    /// One per layer, operation, dataset, process and cgroup.
    pub records: Vec<RequestRecord>,
    /// The slow requests streamed, named.
    pub slow: Vec<SlowRequestRecord>,
    /// Requests started and not finished (REQUEST_STARTS).
    pub in_flight: u64,
}

impl RequestRows {
    /// In a recording's order: the slowest requests first, rows by layer,
    /// dataset, operation and process.
    pub fn sorted(mut self) -> RequestRows {
        self.slow.sort_by_key(|r| std::cmp::Reverse(r.duration_ns));
        self.records.sort_by(|a, b| {
            (&a.layer, &a.dataset, &a.op, a.pid).cmp(&(&b.layer, &b.dataset, &b.op, b.pid))
        });
        self
    }
}

/// Reads the request rows and names them and the slow requests
/// (`origin_ns`: the session's start on the programs' clock). Nothing
/// without a REQUESTS map or rows.
pub fn read_requests(
    ebpf: &Ebpf,
    slow_requests: &[SlowRequest],
    origin_ns: u64,
) -> anyhow::Result<RequestRows> {
    let Some(rows_map) = ebpf.map("REQUESTS") else {
        return Ok(RequestRows::default());
    };
    let rows: BpfHashMap<_, RequestKey, Hist> = BpfHashMap::try_from(rows_map)?;
    let rows: Vec<(RequestKey, Hist)> = rows.iter().collect::<Result<_, _>>()?;
    if rows.is_empty() {
        return Ok(RequestRows::default());
    }
    let datasets: HashMap<u64, DatasetInfo> = read_all(ebpf, "DATASETS")?;
    let dirs: HashMap<u64, DirName> = read_all(ebpf, "DIR_NAMES")?;
    let starts: BpfHashMap<_, u64, RequestStart> = BpfHashMap::try_from(
        ebpf.map("REQUEST_STARTS")
            .ok_or_else(|| anyhow!("REQUEST_STARTS missing"))?,
    )?;
    let in_flight = starts.keys().filter(|k| k.is_ok()).count() as u64;
    let cgroups = cgroup_paths(&rows);
    let names = requests::Names {
        datasets: &datasets,
        dirs: &dirs,
        cgroups: &cgroups,
    };
    Ok(RequestRows {
        records: rows
            .into_iter()
            .map(|(key, hist)| request_record(&key, &hist, &names))
            .collect(),
        slow: slow_requests
            .iter()
            .map(|e| names.slow(e, origin_ns))
            .collect(),
        in_flight,
    })
}

/// Every readable entry of the name map `name`.
fn read_all<V: aya::Pod>(ebpf: &Ebpf, name: &str) -> anyhow::Result<HashMap<u64, V>> {
    let map: BpfHashMap<_, u64, V> =
        BpfHashMap::try_from(ebpf.map(name).ok_or_else(|| anyhow!("{name} missing"))?)?;
    Ok(map.iter().filter_map(Result::ok).collect())
}

/// The paths of the rows' cgroups, by id, where cgroup2 is mounted.
fn cgroup_paths(rows: &[(RequestKey, Hist)]) -> HashMap<u64, String> {
    let mut cgroup_ids: Vec<u64> = rows
        .iter()
        .map(|(k, _)| k.cgroup)
        .filter(|c| *c != 0)
        .collect();
    cgroup_ids.sort_unstable();
    cgroup_ids.dedup();
    requests::cgroup2_root()
        .map(|root| requests::cgroup_paths(&root, &cgroup_ids))
        .unwrap_or_default()
}

/// A row as recordings show it.
fn request_record(key: &RequestKey, hist: &Hist, names: &requests::Names) -> RequestRecord {
    let (dataset, volblocksize) = names.dataset(key);
    RequestRecord {
        layer: requests::layer_name(key.layer).into(),
        op: requests::op_name(key.layer, key.op).into(),
        flags: requests::flag_names(key.flags),
        dataset,
        volblocksize,
        pid: key.tgid,
        comm: requests::c_string(&key.comm),
        cgroup: names.cgroup(key.cgroup),
        count: hist.count,
        total_ns: hist.total_ns,
        bytes: hist.bytes,
        max_ns: hist.max_ns,
        buckets: sparse_buckets(&hist.buckets[..HIST_BUCKETS]),
    }
}
