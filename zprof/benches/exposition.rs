//! Is zprof's own exposition writer worth keeping against a well-kept
//! encoder? The stage histograms of real recordings (tests/data: the guest's
//! and the lab's), written from the same grouping by zprof's writer and by
//! prometheus-client's OpenMetrics encoder: the same samples (checked here),
//! the time per scrape of each, interleaved in one run, and their ratio.
//!
//! `cargo bench -p zprof --bench exposition --features encoder-comparison`

use std::time::{Duration, Instant};

use zprof::{
    recording::{Recording, live::Scrape},
    render::exposition::{
        Options,
        by_prometheus_client::{by_prometheus_client, by_zprof},
    },
};

const RECORDINGS: [&str; 3] = [
    "guest-2.1.11-requests.json",
    "guest-2.4.4-throttle.json",
    "lab-2.1.11-l2arc-scenario.json",
];
const ROUNDS: usize = 7;

fn main() {
    let options = Options {
        per_vdev: true,
        max_series: 5000,
        openmetrics: true,
    };
    println!(
        "recording                        samples   zprof/scrape  prometheus-client/scrape  ratio"
    );
    for name in RECORDINGS {
        let path = format!("{}/../tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("a recording of tests/data");
        let recording: Recording = serde_json::from_str(&text).expect("a recording");
        let scrape = Scrape::of_recording(&recording);
        let ours = samples(&by_zprof(&scrape, &options));
        let theirs = samples(&by_prometheus_client(&scrape, &options));
        let differ: Vec<_> = ours
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a != b)
            .take(3)
            .collect();
        assert!(
            ours.len() == theirs.len() && differ.is_empty(),
            "{name}: the two writers disagree ({} and {} samples): {differ:?}",
            ours.len(),
            theirs.len()
        );
        let (zprof, client) = timed(&scrape, &options);
        println!(
            "{name:<32} {:>7} {:>14} {:>25} {:>6.2}",
            ours.len(),
            format!("{zprof:.0?}"),
            format!("{client:.0?}"),
            client.as_secs_f64() / zprof.as_secs_f64()
        );
    }
    println!(
        "(median of {ROUNDS} rounds, the two writers interleaved; ratio: prometheus-client's time over zprof's)"
    );
}

/// Each writer's median time per scrape, the two interleaved round by round
/// so that a busy moment of the host slows both.
fn timed(scrape: &Scrape, options: &Options) -> (Duration, Duration) {
    let per_round = iterations(scrape, options);
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..per_round {
            std::hint::black_box(by_zprof(scrape, options));
        }
        ours.push(started.elapsed() / per_round);
        let started = Instant::now();
        for _ in 0..per_round {
            std::hint::black_box(by_prometheus_client(scrape, options));
        }
        theirs.push(started.elapsed() / per_round);
    }
    ours.sort();
    theirs.sort();
    (ours[ROUNDS / 2], theirs[ROUNDS / 2])
}

/// Scrapes per round: enough for about 200 ms of zprof's writer.
fn iterations(scrape: &Scrape, options: &Options) -> u32 {
    let started = Instant::now();
    std::hint::black_box(by_zprof(scrape, options));
    let one = started.elapsed().max(Duration::from_micros(1));
    (Duration::from_millis(200).as_nanos() / one.as_nanos()).clamp(3, 100_000) as u32
}

/// Each sample as (name, labels sorted, value), `le` read as a number (the
/// two writers print bounds differently, 0.000001024 and 1.024e-6, and put
/// `le` at different places), sorted.
fn samples(text: &str) -> Vec<(String, Vec<String>, String)> {
    let mut out: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let mut labels: Vec<String> = labels
                .trim_end_matches('}')
                .split(',')
                .filter(|pair| !pair.is_empty())
                .map(|pair| match pair.strip_prefix("le=\"") {
                    Some(bound) => {
                        let bound = bound.trim_end_matches('"');
                        let bound = if bound == "+Inf" {
                            f64::INFINITY
                        } else {
                            bound.parse().expect("a bound")
                        };
                        format!("le={bound:e}")
                    }
                    None => pair.to_owned(),
                })
                .collect();
            labels.sort();
            let value: f64 = value.parse().expect("a value");
            (name.to_owned(), labels, format!("{value:e}"))
        })
        .collect();
    out.sort();
    out
}
