//! Flame graph stacks as a pprof profile (profile.proto, gzipped), so the
//! fleet's continuous profilers (Grafana Pyroscope, Parca) and `go tool
//! pprof` read zprof's stacks.
//!
//! One sample per folded stack, its frames leaf first as profile.proto
//! wants; one function and one location per distinct frame name (zprof's
//! frames are already symbolized, so there are no addresses or mappings).
//! The values are in the units of each kind: CPU samples and their
//! nanoseconds (samples x the sampling period), off-CPU, wall-clock or stage
//! nanoseconds. Labels: the process of CPU, off-CPU and wall-clock stacks,
//! the stage of stage stacks, and the pool where the recording holds one.
//!
//! The encoding is written here (a dozen fields of a stable format) rather
//! than generated: no protoc at build time.

use std::{collections::HashMap, io::Write as _};

use crate::render::flamegraph::FlameKind;

/// What a profile says beside its stacks.
pub struct ProfileInfo<'a> {
    /// What the stacks are of.
    pub kind: FlameKind,
    /// CPU sampling frequency per CPU (the CPU kind's period).
    pub cpu_hz: Option<u64>,
    /// The one pool the stacks are of, if they are of one.
    pub pool: Option<&'a str>,
    /// When the recording started (the profile's time).
    pub started_unix_ms: u64,
    /// How long it lasted (the profile's duration).
    pub duration_s: f64,
}

/// The profile of `stacks` (folded, root first, weights as the flame graph
/// has them: samples for CPU, microseconds otherwise), gzipped.
pub fn profile(stacks: &[(Vec<String>, u64)], info: &ProfileInfo<'_>) -> std::io::Result<Vec<u8>> {
    let mut strings = Strings::default();
    let types = sample_types(info);
    let mut out = Pb::default();
    for (kind, unit, _) in &types {
        let (kind, unit) = (strings.index(kind), strings.index(unit));
        out.message(1, |t| {
            t.uint(1, kind);
            t.uint(2, unit);
        });
    }
    let mut frames: HashMap<&str, u64> = HashMap::new();
    for (stack, weight) in stacks {
        let ids: Vec<u64> = stack
            .iter()
            .rev()
            .map(|frame| {
                let next = frames.len() as u64 + 1;
                *frames.entry(frame.as_str()).or_insert(next)
            })
            .collect();
        let values: Vec<u64> = types.iter().map(|(_, _, scale)| weight * scale).collect();
        let labels = labels(stack, info);
        let labels: Vec<(u64, u64)> = labels
            .into_iter()
            .map(|(k, v)| (strings.index(k), strings.index(&v)))
            .collect();
        out.message(2, |s| {
            s.packed(1, &ids);
            s.packed(2, &values);
            for (key, value) in &labels {
                s.message(3, |l| {
                    l.uint(1, *key);
                    l.uint(2, *value);
                });
            }
        });
    }
    let mut by_id: Vec<(&str, u64)> = frames.into_iter().collect();
    by_id.sort_by_key(|(_, id)| *id);
    for (_, id) in &by_id {
        out.message(4, |l| {
            l.uint(1, *id);
            l.message(4, |line| line.uint(1, *id));
        });
    }
    for (name, id) in &by_id {
        let name = strings.index(name);
        out.message(5, |f| {
            f.uint(1, *id);
            f.uint(2, name);
            f.uint(3, name);
        });
    }
    out.uint(9, info.started_unix_ms * 1_000_000);
    out.uint(10, (info.duration_s * 1e9) as u64);
    let (period_kind, period_unit, period) = period(info);
    let (period_kind, period_unit) = (strings.index(period_kind), strings.index(period_unit));
    out.message(11, |t| {
        t.uint(1, period_kind);
        t.uint(2, period_unit);
    });
    out.uint(12, period);
    // The string table last: every index above is in it by now.
    for text in &strings.table {
        out.bytes(6, text.as_bytes());
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&out.0)?;
    gz.finish()
}

/// Each sample type: its name, unit, and the factor from a folded weight.
fn sample_types(info: &ProfileInfo<'_>) -> Vec<(&'static str, &'static str, u64)> {
    match info.kind {
        FlameKind::Cpu => vec![
            ("samples", "count", 1),
            ("cpu", "nanoseconds", cpu_period_ns(info)),
        ],
        FlameKind::OffCpu => vec![("off_cpu", "nanoseconds", 1_000)],
        FlameKind::Wall => vec![("wall", "nanoseconds", 1_000)],
        FlameKind::Stages | FlameKind::Workload => vec![("stage", "nanoseconds", 1_000)],
    }
}

fn cpu_period_ns(info: &ProfileInfo<'_>) -> u64 {
    1_000_000_000 / info.cpu_hz.unwrap_or(1).max(1)
}

/// The profile's period: a CPU sample's nanoseconds; none for time weights.
fn period(info: &ProfileInfo<'_>) -> (&'static str, &'static str, u64) {
    match info.kind {
        FlameKind::Cpu => ("cpu", "nanoseconds", cpu_period_ns(info)),
        _ => ("", "", 0),
    }
}

/// A sample's labels.
fn labels(stack: &[String], info: &ProfileInfo<'_>) -> Vec<(&'static str, String)> {
    let mut labels = Vec::new();
    // The wall-clock view's root is the kind of time; the process comes next.
    let process = match info.kind {
        FlameKind::Cpu | FlameKind::OffCpu => stack.first(),
        FlameKind::Wall => stack.get(1),
        FlameKind::Stages | FlameKind::Workload => None,
    };
    if let Some(process) = process {
        labels.push(("process", process.clone()));
    }
    if matches!(info.kind, FlameKind::Stages | FlameKind::Workload)
        && let Some(stage) = stack.last()
    {
        labels.push(("stage", stage.clone()));
    }
    if let Some(pool) = info.pool {
        labels.push(("pool", pool.to_owned()));
    }
    labels
}

/// profile.proto's string table: index 0 is "".
struct Strings {
    table: Vec<String>,
    index: HashMap<String, u64>,
}

impl Default for Strings {
    fn default() -> Self {
        Self {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    fn index(&mut self, text: &str) -> u64 {
        if let Some(i) = self.index.get(text) {
            return *i;
        }
        let i = self.table.len() as u64;
        self.table.push(text.to_owned());
        self.index.insert(text.to_owned(), i);
        i
    }
}

/// A protobuf message being written: varints, and length-delimited fields.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push(value as u8 | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    /// A varint field (0 is the default, left out).
    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, 0);
            self.varint(value);
        }
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn message(&mut self, field: u32, write: impl FnOnce(&mut Pb)) {
        let mut inner = Pb::default();
        write(&mut inner);
        self.bytes(field, &inner.0);
    }

    fn packed(&mut self, field: u32, values: &[u64]) {
        let mut inner = Pb::default();
        values.iter().for_each(|v| inner.varint(*v));
        self.bytes(field, &inner.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_are_encoded_as_protobuf_says() {
        // The protobuf documentation's example: 150 as field 1 is 08 96 01.
        let mut pb = Pb::default();
        pb.uint(1, 150);
        assert_eq!(pb.0, [0x08, 0x96, 0x01]);
        let mut pb = Pb::default();
        pb.bytes(2, b"testing");
        assert_eq!(pb.0, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        let mut pb = Pb::default();
        pb.packed(4, &[3, 270, 86942]);
        assert_eq!(pb.0, [0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05]);
    }

    #[test]
    fn the_wall_clock_views_process_is_its_second_frame() {
        let info = ProfileInfo {
            kind: FlameKind::Wall,
            cpu_hz: None,
            pool: Some("tank"),
            started_unix_ms: 0,
            duration_s: 1.0,
        };
        let stack: Vec<String> = ["off-CPU", "fio", "fsync"].map(String::from).to_vec();
        assert_eq!(
            labels(&stack, &info),
            vec![("process", "fio".to_owned()), ("pool", "tank".to_owned())]
        );
    }
}
