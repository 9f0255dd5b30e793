//! Mutation fuzzing of the two readers of outside files, in process: the
//! recording reader (and everything that renders a recording it accepts) and
//! the fio/lab JSON reader of `zprof run`. A fixed seed, so a failure repeats;
//! `ZPROF_FUZZ_RUNS=N` runs longer by hand (CI runs the default).
//!
//! The inputs are real: a recording of a lab run made here, and fio output
//! captured from real runs (`tests/data`). Each run mutates the bytes (a
//! number swapped for a hostile one, a byte changed, a range cut or doubled, a
//! truncation); the reader must refuse or accept without panicking, and what
//! it accepts must render without NaN or infinities.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    time::{Duration, Instant},
};

use zprof::{
    analyze::compare, analyze::findings, recording::Recording, recording::requests::GroupBy,
    recording::result, render::flamegraph, render::report,
};

mod common;
use common::{non_number_word, require_root};

/// xorshift64: small, fixed-seed randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const HOSTILE_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-0.0",
    "1e308",
    "1e999",
    "-1e999",
    "18446744073709551615",
    "18446744073709551616",
    "9007199254740993",
    "0.5",
    "1e-320",
    "4294967296",
];
const JSON_BYTES: &[u8] = b"{}[]\",:-.eE0123456789 \\nulltruefalse";

/// Mutations per input: 1,000 by default, about a minute of the debug build
/// for the recording (CI's run stays under its time budget); more by hand.
fn runs() -> usize {
    std::env::var("ZPROF_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// One mutation of `text`.
fn mutate(text: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = text.to_vec();
    for _ in 0..1 + rng.below(3) {
        if out.is_empty() {
            break;
        }
        let at = rng.below(out.len());
        match rng.below(10) {
            // Half the time, a number becomes a hostile one: the JSON stays
            // valid and the reader's own checks are what is tested.
            0..=4 => {
                let digits: Vec<usize> = (0..out.len())
                    .filter(|&i| {
                        out[i].is_ascii_digit() && (i == 0 || !out[i - 1].is_ascii_digit())
                    })
                    .collect();
                if digits.is_empty() {
                    continue;
                }
                let start = digits[rng.below(digits.len())];
                let end = (start..out.len())
                    .find(|&i| !(out[i].is_ascii_digit() || b".eE+-".contains(&out[i])))
                    .unwrap_or(out.len());
                let number = HOSTILE_NUMBERS[rng.below(HOSTILE_NUMBERS.len())];
                out.splice(start..end, number.bytes());
            }
            5 => out[at] = JSON_BYTES[rng.below(JSON_BYTES.len())],
            6 => out[at] = rng.next() as u8,
            7 => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                out.drain(at..end);
            }
            8 => {
                let end = (at + 1 + rng.below(256)).min(out.len());
                let copy = out[at..end].to_vec();
                out.splice(at..at, copy);
            }
            _ => out.truncate(at),
        }
    }
    out
}

/// Everything zprof does with a recording it accepted.
fn render_all(rec: &Recording) -> String {
    let mut out = String::new();
    for by in [GroupBy::Dataset, GroupBy::Process, GroupBy::Cgroup] {
        out.push_str(&report::render_table(&report::build(rec, by)));
    }
    for line in flamegraph::offcpu_stacks(rec)
        .into_iter()
        .chain(flamegraph::cpu_stacks(rec))
    {
        out.push_str(&line);
        out.push('\n');
    }
    let findings = findings::explain(rec, &findings::ExplainOptions::default());
    out.push_str(&zprof::render::findings::render(
        &findings,
        rec.benchmark.as_ref(),
    ));
    out.push_str(&zprof::render::compare::render(&compare::compare(
        rec,
        rec,
        ("a".into(), "b".into()),
    )));
    for line in flamegraph::stage_stacks(rec)
        .into_iter()
        .chain(flamegraph::workload_cause_stacks(rec))
    {
        out.push_str(&line);
        out.push('\n');
    }
    let settings = zprof::analyze::settings::setting_rows(&[
        ("a".into(), rec.clone()),
        ("b".into(), rec.clone()),
    ]);
    out.push_str(&zprof::render::compare::render_settings(&settings));
    out
}

/// Runs `check` on `runs` mutations of `original`; returns (accepted, refused,
/// slowest run), or panics naming the first run that panicked.
fn fuzz(
    name: &str,
    original: &[u8],
    seed: u64,
    check: impl Fn(&str) -> Result<Option<String>, String>,
) -> (usize, usize, Duration) {
    let mut rng = Rng(seed);
    let (mut accepted, mut refused, mut slowest) = (0, 0, Duration::ZERO);
    let mut panics = Vec::new();
    for run in 0..runs() {
        let mutated = mutate(original, &mut rng);
        let text = String::from_utf8_lossy(&mutated);
        let started = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| check(&text))) {
            Ok(Ok(Some(rendered))) => {
                accepted += 1;
                if let Some(token) = non_number_word(&rendered) {
                    panic!("{name} run {run}: accepted and printed {token:?}:\n{rendered}");
                }
            }
            Ok(Ok(None)) => accepted += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => panics.push(run),
        }
        slowest = slowest.max(started.elapsed());
    }
    assert!(
        panics.is_empty(),
        "{name}: {} panics, first at run {} (seed {seed:#x})",
        panics.len(),
        panics[0]
    );
    (accepted, refused, slowest)
}

#[test]
fn mutated_recordings_never_panic() {
    require_root();
    let dir = common::scratch("zprof-fuzz", "recording");
    let path = dir.join("rec.json");
    let jobs = [
        "--layout",
        "raidz1:3",
        "--vdev-model",
        "ssd",
        "--logs",
        "1",
        "--compression",
        "lz4",
    ];
    let job = [
        "--job",
        "name=m,rw=randrw,bs=8k,size=16m,fsync=4,buffer_compress_percentage=50,runtime=1",
    ];
    common::zprof_on_lab(
        "run",
        &common::lab_binary(),
        &dir,
        &path,
        &[&jobs[..], &job].concat(),
    );
    let original = std::fs::read(&path).unwrap();
    Recording::parse(&String::from_utf8_lossy(&original), "rec.json")
        .expect("the unmutated recording is read");
    every_hostile_benchmark_figure_renders(&String::from_utf8_lossy(&original));
    let (accepted, refused, slowest) =
        fuzz("recording", &original, 0x9E37_79B9_7F4A_7C15, |text| {
            let rec = Recording::parse(text, "mutated.json").map_err(|e| e.to_string())?;
            Ok(Some(render_all(&rec)))
        });
    eprintln!(
        "recording: {} runs, {accepted} accepted and rendered, {refused} refused, 0 panics, slowest {slowest:?}",
        runs()
    );
    assert!(
        accepted > 0 && refused > 0,
        "the mutations should both pass and fail the reader"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Each hostile number in each of the benchmark's rates and latencies, one
/// at a time: explain multiplies them (Little's law), where 1e308 once gave
/// "about inf writer(s)" (CI, random mutation).
fn every_hostile_benchmark_figure_renders(original: &str) {
    let mut checked = 0;
    for field in ["\"iops\": ", "\"lat_mean_ns\": ", "\"bw_bytes\": "] {
        for (at, _) in original.match_indices(field) {
            let start = at + field.len();
            let end = start + original[start..].find([',', '\n', '}']).unwrap();
            for number in HOSTILE_NUMBERS {
                let text = format!("{}{number}{}", &original[..start], &original[end..]);
                let Ok(rec) = Recording::parse(&text, "hostile.json") else {
                    continue;
                };
                let rendered = render_all(&rec);
                assert!(
                    non_number_word(&rendered).is_none(),
                    "{field}{number} at byte {start}: printed a non-number:\n{rendered}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "the recording has the benchmark's figures");
}

#[test]
fn mutated_benchmark_output_never_panics() {
    let data = common::data_dir();
    for (file, seed) in [
        ("fio-3.33-randwrite-fsync1.json", 0xD1B5_4A32_D192_ED03u64),
        ("fio-3.33-seqwrite-randread.json", 0xABCD_EF01_2345_6789),
        ("pgbench-15-two-scripts.txt", 0x5EED_0F9B_E4C4_0001),
    ] {
        let original = std::fs::read(data.join(file)).unwrap();
        assert!(
            result::parse(&String::from_utf8_lossy(&original)).is_some(),
            "{file} is read unmutated"
        );
        let (accepted, refused, slowest) =
            fuzz(file, &original, seed, |text| match result::parse(text) {
                Some(benchmark) => Ok(Some(zprof::render::findings::render(&[], Some(&benchmark)))),
                None => Err("not a benchmark".into()),
            });
        // Both must be a real share: a parser that refused every input (or
        // took every one) would pass the panic and rendering checks untested.
        let counts = format!(
            "{file}: {} runs, {accepted} accepted and rendered, {refused} refused",
            runs()
        );
        assert!(
            accepted * 10 >= runs(),
            "{counts}: at least a tenth must be accepted"
        );
        assert!(
            refused * 10 >= runs(),
            "{counts}: at least a tenth must be refused"
        );
        eprintln!("{counts}, 0 panics, slowest {slowest:?}");
    }
}
