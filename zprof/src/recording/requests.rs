//! The request layer, user side: file and zvol requests as the application
//! sees them, read from the eBPF maps into recording rows, named (dataset,
//! process, cgroup) and grouped for the report's "requests" section.
//!
//! Each row of the in-kernel map is one (layer, operation, flags, dataset,
//! process, cgroup, thread name); the report folds them along the dimension
//! asked for (`--by dataset|process|cgroup`). Names are resolved here, once:
//! dataset names from the dsl_dir components the eBPF side learnt, cgroup
//! paths from the cgroup v2 hierarchy (a cgroup's id is its directory's
//! inode number).

use std::{collections::HashMap, fmt::Write as _, path::Path};

use serde::Serialize;
use zprof_common::{DatasetInfo, DirName, RequestKey, SlowRequest, request, wait};

use crate::recording::{HistRecord, Summary, summarize};

pub use super::{RequestRecord, SlowRequestRecord};

/// Names of the [`zprof_common::wait`] slots, as reports show them.
const WAIT_NAMES: [(usize, &str); wait::COUNT] = [
    (wait::ZIL_COMMIT, "zil_commit"),
    (wait::ZIL_LOG_WRITE, "zil_commit: log block write"),
    (wait::ZIL_FLUSH, "zil_commit: cache flush"),
    (wait::ZIL_TIMEOUT_WAIT, "zil_commit: commit timeout"),
    (wait::ZIL_OTHER, "zil_commit: other"),
    (wait::TXG_WAIT_SYNCED, "txg_wait_synced"),
    (wait::TX_WAIT, "throttle (dmu_tx_wait)"),
    (wait::TX_ASSIGN, "tx assign"),
];

/// What the eBPF maps name: datasets, their dsl_dir components, cgroups.
pub struct Names<'a> {
    /// By objset address.
    pub datasets: &'a HashMap<u64, DatasetInfo>,
    /// By dsl_dir address.
    pub dirs: &'a HashMap<u64, DirName>,
    /// By cgroup id.
    pub cgroups: &'a HashMap<u64, String>,
}

impl Names<'_> {
    /// A row's dataset name and volblocksize ("[folded]" for the folded row,
    /// "" without offsets).
    pub fn dataset(&self, key: &RequestKey) -> (String, u64) {
        let info = self.datasets.get(&key.dataset);
        let name = match (key.dataset, info) {
            (0, _) if key.tgid == 0 && key.cgroup == 0 => "[folded]".to_owned(),
            (0, _) => String::new(),
            (_, Some(info)) => dataset_name(info.dir, self.dirs),
            (address, None) => format!("objset@{address:#x}"),
        };
        (name, info.map_or(0, |i| i.volblocksize))
    }

    /// A cgroup id's path ("" for none).
    pub fn cgroup(&self, id: u64) -> String {
        match id {
            0 => String::new(),
            // The root cgroup's id is 1, mounted or not.
            1 => self.cgroups.get(&1).cloned().unwrap_or_else(|| "/".into()),
            id => self
                .cgroups
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("cgroup id {id}")),
        }
    }

    /// A slow request as a recording row; `origin_ns` is the recording's start.
    pub fn slow(&self, event: &SlowRequest, origin_ns: u64) -> SlowRequestRecord {
        let key = &event.key;
        let stages = WAIT_NAMES
            .iter()
            .filter(|(slot, _)| event.waits.ns[*slot] > 0)
            .map(|(slot, name)| ((*name).to_owned(), event.waits.ns[*slot]))
            .collect();
        SlowRequestRecord {
            start_offset_ns: event.start_ns.saturating_sub(origin_ns),
            duration_ns: event.duration_ns,
            layer: layer_name(key.layer).into(),
            op: op_name(key.layer, key.op).into(),
            flags: flag_names(key.flags),
            dataset: self.dataset(key).0,
            pid: key.tgid,
            tid: event.tid,
            comm: c_string(&key.comm),
            bytes: event.bytes,
            stages,
            joined: event.joined != 0,
        }
    }
}

/// The words for a request's layer, operation and flags.
pub fn layer_name(layer: u32) -> &'static str {
    match layer {
        request::LAYER_FILE => "file",
        request::LAYER_ZVOL => "zvol",
        _ => "unknown",
    }
}

/// The operation's name on its layer (a file's flush is its fsync).
pub fn op_name(layer: u32, op: u32) -> &'static str {
    match (layer, op) {
        (_, request::OP_READ) => "read",
        (_, request::OP_WRITE) => "write",
        (request::LAYER_FILE, request::OP_FLUSH) => "fsync",
        (_, request::OP_FLUSH) => "flush",
        (_, request::OP_DISCARD) => "discard",
        _ => "other",
    }
}

/// The flags' names.
pub fn flag_names(flags: u32) -> Vec<String> {
    [
        (request::FLAG_SYNC, "sync"),
        (request::FLAG_DIRECT, "direct"),
        (request::FLAG_PREFLUSH, "preflush"),
        (request::FLAG_DIRECT_PATH, "direct-path"),
    ]
    .into_iter()
    .filter(|(bit, _)| flags & bit != 0)
    .map(|(_, name)| name.to_owned())
    .collect()
}

/// Text of a NUL-terminated byte array.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Deepest name joined: as deep as the eBPF side walks.
use zprof_common::request::MAX_NAME_DEPTH;

/// A dataset's full name, from its dsl_dir up to the pool's root; "?" for a
/// component no longer (or never) known, "..." past the depth zprof walks.
pub fn dataset_name(dir: u64, dirs: &HashMap<u64, DirName>) -> String {
    let mut parts = Vec::new();
    let mut at = dir;
    while at != 0 {
        if parts.len() == MAX_NAME_DEPTH {
            parts.push("...".to_owned());
            break;
        }
        match dirs.get(&at) {
            Some(entry) => {
                parts.push(c_string(&entry.name));
                at = entry.parent;
            }
            None => {
                parts.push("?".to_owned());
                break;
            }
        }
    }
    parts.reverse();
    parts.join("/")
}

/// Cgroup v2 ids to paths, by walking the hierarchy at `root` (a cgroup's id
/// is the inode number of its directory). The root cgroup is "/".
pub fn cgroup_paths(root: &Path, wanted: &[u64]) -> HashMap<u64, String> {
    use std::os::unix::fs::MetadataExt as _;
    let mut found = HashMap::new();
    let mut stack = vec![root.to_path_buf()];
    let mut visited = 0usize;
    // Bounded: a host has thousands of cgroups at most.
    while let Some(dir) = stack.pop() {
        visited += 1;
        if found.len() == wanted.len() || visited > 100_000 {
            break;
        }
        let Ok(meta) = std::fs::metadata(&dir) else {
            continue;
        };
        if wanted.contains(&meta.ino()) {
            let relative = dir
                .strip_prefix(root)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            found.insert(meta.ino(), format!("/{relative}"));
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    found
}

/// Where the cgroup v2 hierarchy is mounted, if it is.
pub fn cgroup2_root() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (_, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
        (kind == "cgroup2").then(|| std::path::PathBuf::from(point))
    })
}

/// Whether a request row is on `pool` (its dataset is the pool or below it).
pub fn on_pool(record: &RequestRecord, pool: &str) -> bool {
    record.dataset == pool
        || record
            .dataset
            .strip_prefix(pool)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The sync requests of `pool` as the application saw them (fsyncs, O_SYNC
/// writes, zvol flushes and FUA writes), against the zil_commit time zprof
/// measured in the traced threads: the share of the file requests' time
/// (fsyncs and O_SYNC writes, which make those commits) spent committing.
/// `None` without such rows.
pub fn sync_requests_line(
    records: &[RequestRecord],
    pool: &str,
    commit_total_ns: u64,
) -> Option<String> {
    let kinds: [(&str, &str, &str, bool); 4] = [
        ("file", "fsync", "fsyncs", false),
        ("file", "write", "O_SYNC writes", true),
        ("zvol", "flush", "zvol flushes", false),
        ("zvol", "write", "zvol FUA writes", true),
    ];
    let mut parts = Vec::new();
    let mut file_sync_ns = 0;
    for (layer, op, words, sync) in kinds {
        let rows: Vec<HistRecord> = records
            .iter()
            .filter(|r| r.layer == layer && r.op == op && on_pool(r, pool))
            .filter(|r| !sync || r.flags.iter().any(|f| f == "sync"))
            .map(RequestRecord::as_hist)
            .collect();
        let summary = summarize(rows.iter());
        if summary.count == 0 {
            continue;
        }
        if layer == "file" {
            file_sync_ns += summary.total_ns;
        }
        parts.push(format!(
            "{} {words} (p50 {}, mean {})",
            crate::units::format_count(summary.count as f64),
            crate::units::format_ns(summary.p50_ns),
            crate::units::format_ns(summary.mean_ns as u64)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let mut line = format!("as the application saw them: {}", parts.join(", "));
    if file_sync_ns > 0 && commit_total_ns > 0 {
        let _ = write!(
            line,
            "; zil_commit took {} of the file requests' {} ({:.0}%)",
            crate::units::format_ns(commit_total_ns),
            crate::units::format_ns(file_sync_ns),
            commit_total_ns as f64 * 100.0 / file_sync_ns as f64
        );
    }
    Some(line)
}

/// How the requests section groups its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// One row per dataset or zvol and operation.
    #[default]
    Dataset,
    /// One row per process and operation.
    Process,
    /// One row per cgroup and operation.
    Cgroup,
}

/// One row of the report's requests section.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRow {
    /// "file" or "zvol".
    pub layer: String,
    /// Operation, with its flags ("write sync").
    pub op: String,
    /// The dataset, process ("fio[1234]") or cgroup the row is for.
    pub who: String,
    /// Requests per second over the recording.
    pub per_second: f64,
    /// Bytes per second.
    pub bytes_per_second: f64,
    /// Statistics.
    #[serde(flatten)]
    pub summary: Summary,
}

/// The requests section's rows, grouped `by`, busiest first within a layer.
pub fn rows(records: &[RequestRecord], by: GroupBy, seconds: f64) -> Vec<RequestRow> {
    let mut groups: Vec<((String, String, String), Vec<HistRecord>)> = Vec::new();
    for r in records {
        let who = match by {
            GroupBy::Dataset if r.dataset.is_empty() => "(dataset unknown)".to_owned(),
            GroupBy::Dataset => r.dataset.clone(),
            GroupBy::Process if r.pid == 0 => r.comm.clone(),
            GroupBy::Process => format!("{}[{}]", r.comm, r.pid),
            GroupBy::Cgroup if r.cgroup.is_empty() => "(cgroup unknown)".to_owned(),
            GroupBy::Cgroup => r.cgroup.clone(),
        };
        let mut op = r.op.clone();
        for flag in &r.flags {
            let _ = write!(op, " {flag}");
        }
        let key = (r.layer.clone(), op, who);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(r.as_hist()),
            None => groups.push((key, vec![r.as_hist()])),
        }
    }
    let seconds = seconds.max(1e-9);
    let mut rows: Vec<RequestRow> = groups
        .into_iter()
        .map(|((layer, op, who), members)| {
            let summary = summarize(members.iter());
            RequestRow {
                layer,
                op,
                who,
                per_second: summary.count as f64 / seconds,
                bytes_per_second: summary.bytes as f64 / seconds,
                summary,
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.layer, &a.who, &a.op).cmp(&(&b.layer, &b.who, &b.op)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(parent: u64, name: &str) -> DirName {
        let mut bytes = [0u8; 256];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        DirName {
            parent,
            name: bytes,
        }
    }

    #[test]
    fn dataset_names_join_their_components_up_to_the_pool() {
        let dirs = HashMap::from([
            (10, dir(0, "tank")),
            (20, dir(10, "vols")),
            (30, dir(20, "db")),
        ]);
        assert_eq!(dataset_name(30, &dirs), "tank/vols/db");
        assert_eq!(dataset_name(10, &dirs), "tank");
        // A parent evicted from the name map is shown as unknown, not skipped.
        let partial = HashMap::from([(30, dir(20, "db"))]);
        assert_eq!(dataset_name(30, &partial), "?/db");
    }

    #[test]
    fn a_cycle_in_the_names_stops_at_the_depth_walked() {
        let dirs = HashMap::from([(1, dir(2, "a")), (2, dir(1, "b"))]);
        assert_eq!(
            dataset_name(1, &dirs).split('/').count(),
            MAX_NAME_DEPTH + 1
        );
        assert!(dataset_name(1, &dirs).starts_with(".../"));
    }

    fn row(dataset: &str, pid: u32, op: &str, flags: &[&str], count: u64) -> RequestRecord {
        RequestRecord {
            layer: "file".into(),
            op: op.into(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            dataset: dataset.into(),
            volblocksize: 0,
            pid,
            comm: "fio".into(),
            cgroup: "/a".into(),
            count,
            total_ns: count * 1000,
            bytes: count * 4096,
            max_ns: 1000,
            buckets: vec![[zprof_common::hist_bucket(1000) as u64, count]],
        }
    }

    #[test]
    fn rows_group_along_the_dimension_asked_for() {
        let records = [
            row("tank/a", 10, "write", &[], 3),
            row("tank/a", 11, "write", &[], 4),
            row("tank/b", 10, "write", &["sync"], 5),
        ];
        let by_dataset = rows(&records, GroupBy::Dataset, 1.0);
        let summary: Vec<(&str, &str, u64)> = by_dataset
            .iter()
            .map(|r| (r.who.as_str(), r.op.as_str(), r.summary.count))
            .collect();
        assert_eq!(
            summary,
            [("tank/a", "write", 7), ("tank/b", "write sync", 5)]
        );
        let by_process = rows(&records, GroupBy::Process, 1.0);
        let summary: Vec<(&str, &str, u64)> = by_process
            .iter()
            .map(|r| (r.who.as_str(), r.op.as_str(), r.summary.count))
            .collect();
        assert_eq!(
            summary,
            [
                ("fio[10]", "write", 3),
                ("fio[10]", "write sync", 5),
                ("fio[11]", "write", 4)
            ]
        );
        let by_cgroup = rows(&records, GroupBy::Cgroup, 2.0);
        assert_eq!(by_cgroup.len(), 2);
        assert_eq!(by_cgroup[0].per_second, 3.5);
        assert_eq!(by_cgroup[0].bytes_per_second, 7.0 * 4096.0 / 2.0);
    }

    #[test]
    fn rows_belong_to_their_pool_by_name() {
        assert!(on_pool(&row("tank/a", 1, "write", &[], 1), "tank"));
        assert!(on_pool(&row("tank", 1, "write", &[], 1), "tank"));
        assert!(!on_pool(&row("tanker/a", 1, "write", &[], 1), "tank"));
        assert!(!on_pool(&row("", 1, "write", &[], 1), "tank"));
    }

    #[test]
    fn operations_and_flags_have_names() {
        assert_eq!(op_name(request::LAYER_FILE, request::OP_FLUSH), "fsync");
        assert_eq!(op_name(request::LAYER_ZVOL, request::OP_FLUSH), "flush");
        assert_eq!(
            flag_names(request::FLAG_SYNC | request::FLAG_DIRECT),
            ["sync", "direct"]
        );
        assert_eq!(
            flag_names(request::FLAG_DIRECT | request::FLAG_DIRECT_PATH),
            ["direct", "direct-path"]
        );
    }

    #[test]
    fn the_root_cgroup_is_found_by_its_inode() {
        use std::os::unix::fs::MetadataExt as _;
        let root = std::env::temp_dir().join(format!("zprof-cgroups-{}", std::process::id()));
        std::fs::create_dir_all(root.join("system.slice/fio.service")).unwrap();
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let service = ino(&root.join("system.slice/fio.service"));
        let found = cgroup_paths(&root, &[ino(&root), service, 1 << 60]);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(found[&service], "/system.slice/fio.service");
        assert_eq!(found.len(), 2, "{found:?}");
    }
}
