//! One workload under several settings, a row each: `zprof compare A B C
//! ...` with recordings of the same job (a `zfs recv` of one stream into
//! compression off, lz4, zstd-3, zstd-19) answers "what does the better
//! ratio cost in time": each run's wall time, the bytes it asked ZFS to
//! write, the bytes the leaves wrote for them, compression's CPU time, and,
//! against the first recording, the leaf bytes each extra second saved.

use serde::Serialize;
use zprof_common::Stage;

use crate::{
    analyze::findings::writes::written_by_workload,
    recording::{Recording, pick, summarize},
};

/// One recording's row.
#[derive(Debug, Clone, Serialize)]
pub struct SettingRow {
    /// The recording's name (its file, as given).
    pub name: String,
    /// The command's wall time where `run` measured it, else the
    /// recording's, s.
    pub wall_s: f64,
    /// Bytes the workload asked ZFS to write: a receive's stream, else the
    /// workload's writes, else its write requests.
    pub workload_bytes: u64,
    /// Bytes the leaf vdevs wrote (parity, metadata and the ZIL included).
    pub leaf_bytes: u64,
    /// Compression's CPU time, summed over threads, ns.
    pub compression_ns: u64,
    /// The setting that compressed the most bytes, with its ratio, where it
    /// compressed at least half the workload's bytes (with compression off
    /// only the metadata is compressed, by lz4).
    pub main_compression: Option<(String, f64)>,
    /// Against the first row: leaf bytes saved per second of extra wall
    /// time (None for the first, or where this one was not slower).
    pub saved_bytes_per_extra_s: Option<f64>,
}

/// The rows of `recordings`, the first the baseline.
pub fn setting_rows(recordings: &[(String, Recording)]) -> Vec<SettingRow> {
    let mut rows: Vec<SettingRow> = recordings.iter().map(|(n, r)| row(n, r)).collect();
    if let Some(first) = rows.first().cloned() {
        for row in rows.iter_mut().skip(1) {
            let extra_s = row.wall_s - first.wall_s;
            let saved = first.leaf_bytes as f64 - row.leaf_bytes as f64;
            row.saved_bytes_per_extra_s = (extra_s > 0.0).then(|| saved / extra_s);
        }
    }
    rows
}

fn row(name: &str, rec: &Recording) -> SettingRow {
    let total = |stage: Stage| summarize(pick(rec, stage, None, None));
    let received = total(Stage::Recv).bytes;
    let workload_bytes = if received > 0 {
        received
    } else {
        written_by_workload(rec).map_or(0, |(bytes, _)| bytes)
    };
    let leaf_bytes = pick(rec, Stage::VdevTotal, None, None)
        .into_iter()
        .filter(|h| h.class_name.contains("write"))
        .fold(0u64, |sum, h| sum.saturating_add(h.bytes));
    let main_compression = pick(rec, Stage::Compress, None, None)
        .into_iter()
        .max_by_key(|h| h.bytes)
        .filter(|h| h.bytes_out > 0 && h.bytes.saturating_mul(2) >= workload_bytes)
        .map(|h| (h.class_name.clone(), h.bytes as f64 / h.bytes_out as f64));
    SettingRow {
        name: name.to_owned(),
        wall_s: rec
            .benchmark
            .as_ref()
            .and_then(|b| b.wall_s)
            .unwrap_or(rec.duration_s),
        workload_bytes,
        leaf_bytes,
        compression_ns: total(Stage::Compress).total_ns,
        main_compression,
        saved_bytes_per_extra_s: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(file: &str) -> (String, Recording) {
        let path = format!("{}/../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        let rec = Recording::parse(&std::fs::read_to_string(&path).unwrap(), file).unwrap();
        (file.to_owned(), rec)
    }

    /// One 16 MiB stream received into compression off and zstd-19 on the
    /// guest (tests/data/README.md): the same stream, zstd-19's leaves
    /// wrote about half as much, for seconds more of zstd's CPU.
    #[test]
    fn each_setting_is_its_time_bytes_and_compression_against_the_first() {
        let rows = setting_rows(&[
            recording("guest-2.4.4-recv-off.json"),
            recording("guest-2.4.4-recv-zstd-19.json"),
        ]);
        let (off, zstd) = (&rows[0], &rows[1]);
        assert_eq!(off.workload_bytes, zstd.workload_bytes, "one stream");
        assert!(zstd.leaf_bytes * 3 < off.leaf_bytes * 2, "{rows:#?}");
        assert!(
            zstd.compression_ns > 100 * off.compression_ns.max(1),
            "{rows:#?}"
        );
        let (setting, ratio) = zstd.main_compression.clone().unwrap();
        assert_eq!(setting, "zstd-19");
        assert!((2.4..2.6).contains(&ratio), "{ratio}");
        assert!(off.saved_bytes_per_extra_s.is_none());
        assert!(
            off.main_compression.is_none(),
            "only its metadata: {off:#?}"
        );
        let saved = zstd.saved_bytes_per_extra_s.unwrap();
        let expected = (off.leaf_bytes - zstd.leaf_bytes) as f64 / (zstd.wall_s - off.wall_s);
        assert_eq!(saved, expected);
    }
}
