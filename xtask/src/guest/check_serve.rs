//! Checks of the fleet side on the kernel target: `zprof serve` scraped in
//! the guest (guest/zfs-kernel-test.sh's `/results/serve`), and the leaf vdev
//! places (top-level vdev, allocation class) of every recording.
//!
//! What must hold:
//! - serve exits 0 on SIGTERM (its detach is in detach.txt, checked with the
//!   others); `promtool check metrics` passes on its scrape;
//! - the zil_commit calls it exported for the pool between the two scrapes
//!   equal fio's fsyncs, within [`FIO_ALLOWANCE`];
//! - it names the traced release as verified, exports the module's
//!   zfs_txg_timeout and zfs_dirty_data_max, and lost nothing;
//! - its leaf series carry the pool's layout: the four raidz leaves under
//!   raidz-0 in the normal class, the log file under file-1 in the log class,
//!   with the job's sync writes;
//! - with struct offsets (BTF or headers) each recording's leaves are placed
//!   as its pool was created; without, no leaf is placed.

use std::{collections::BTreeMap, path::Path, process::Command};

use anyhow::{Context as _, anyhow, ensure};
use serde_json::Value;

use super::{
    Variant,
    results::{FIO_ALLOWANCE, read_json},
};

/// One sample of an exposition.
#[derive(Debug, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a Prometheus text exposition (comments skipped).
fn parse_exposition(text: &str) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| anyhow!("no value: {line:?}"))?;
        let value: f64 = value.parse().map_err(|e| anyhow!("{line:?}: {e}"))?;
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (
                name,
                parse_labels(
                    rest.strip_suffix('}')
                        .ok_or_else(|| anyhow!("unclosed labels: {line:?}"))?,
                )?,
            ),
            None => (series, BTreeMap::new()),
        };
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    Ok(samples)
}

/// `a="x",b="y\"z"` as a map, escapes undone.
fn parse_labels(text: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once("=\"")
            .ok_or_else(|| anyhow!("malformed labels: {text:?}"))?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => anyhow::bail!("malformed labels: {text:?}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => anyhow::bail!("unterminated label value: {text:?}"),
            }
        };
        labels.insert(name.trim_start_matches(',').to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Ok(labels)
}

/// The sum of the samples named `name` whose labels include `wanted`.
fn sum(samples: &[Sample], name: &str, wanted: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && wanted
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
        .map(|s| s.value)
        .sum()
}

/// Leaf guid -> (top-level vdev, allocation class), from the vdev_total
/// series of `pool` (a leaf in two places is an error).
fn exported_places(
    samples: &[Sample],
    pool: &str,
) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let mut places = BTreeMap::new();
    for s in samples.iter().filter(|s| {
        s.name == "zfs_vdev_total_duration_seconds_count"
            && s.labels.get("pool").is_some_and(|p| p == pool)
    }) {
        let label = |name: &str| {
            s.labels
                .get(name)
                .cloned()
                .ok_or_else(|| anyhow!("a leaf series without {name}: {:?}", s.labels))
        };
        let place = (label("top_vdev")?, label("vdev_class")?);
        let known = places
            .entry(label("vdev_guid")?)
            .or_insert_with(|| place.clone());
        ensure!(
            *known == place,
            "leaf {:?} in two places: {known:?} and {place:?}",
            s.labels.get("vdev_guid")
        );
    }
    Ok(places)
}

/// What guest/zfs-kernel-test.sh's make_pool builds: (top-level vdev,
/// class) per leaf, sorted.
fn expected_places(layout: &str, log: bool) -> anyhow::Result<Vec<(String, String)>> {
    let leaves = match layout {
        "raidz1" => 4,
        "mirror" => 2,
        other => anyhow::bail!("unknown layout {other}"),
    };
    let top = if layout == "raidz1" {
        "raidz-0"
    } else {
        "mirror-0"
    };
    let mut places = vec![(top.to_owned(), "normal".to_owned()); leaves];
    if log {
        // The log is a file vdev added after the data group: top-level vdev 1.
        places.push(("file-1".into(), "log".into()));
    }
    places.sort();
    Ok(places)
}

/// The recording's leaves against the pool the script created (its
/// `config` file names the layout and the log).
pub fn check_places(rec: &Value, dir: &Path, variant: Variant) -> anyhow::Result<String> {
    let config = std::fs::read_to_string(dir.join("config")).context("reading config")?;
    let field = |key: &str| {
        config
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .unwrap_or("")
    };
    let mut places: Vec<(String, String)> = rec["vdevs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["top_vdev"].as_str().unwrap_or("?").to_owned(),
                v["class"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    places.sort();
    if variant == Variant::Nobtf {
        ensure!(
            places.is_empty(),
            "leaves placed without struct offsets: {places:?}"
        );
        return Ok("no leaf placed (no offsets)".into());
    }
    let expected = expected_places(field("layout"), field("log") == "log")?;
    ensure!(
        places == expected,
        "leaf places {places:?}, but the pool was created as {expected:?}"
    );
    let mut counts: BTreeMap<&(String, String), usize> = BTreeMap::new();
    for place in &places {
        *counts.entry(place).or_default() += 1;
    }
    let text: Vec<String> = counts
        .iter()
        .map(|((top, class), n)| format!("{n} {class} under {top}"))
        .collect();
    Ok(format!("leaves: {}", text.join(", ")))
}

/// serve's two scrapes around the fio job, its exit, its figures.
pub fn check_serve(dir: &Path) -> anyhow::Result<String> {
    let exit = std::fs::read_to_string(dir.join("exit")).context("reading exit")?;
    ensure!(
        exit.trim() == "0",
        "zprof serve exited with {} after SIGTERM",
        exit.trim()
    );
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading {name}"))
    };
    let (before_text, after_text) = (read("before.prom")?, read("after.prom")?);
    promtool_check(&after_text)?;
    let (before, after) = (
        parse_exposition(&before_text)?,
        parse_exposition(&after_text)?,
    );
    let info = check_identity(&after)?;
    let label = |name: &str| info.labels.get(name).map(String::as_str).unwrap_or("");
    let (exported, fsyncs) = check_commits(dir, &before, &after)?;
    let job_log_writes = check_leaves(&before, &after)?;
    Ok(format!(
        "{} ({} {}); zil_commit {exported} exported during the job, fio {fsyncs} fsyncs; {} sync writes on the log vdev; leaves placed as created; promtool check metrics passes; exit 0 on SIGTERM",
        label("zfs_version"),
        label("target"),
        label("zfs_status"),
        job_log_writes
    ))
}

/// The build info (the kernel target, its release verified), the module's
/// tunables, no lost events; the build info's sample.
fn check_identity(after: &[Sample]) -> anyhow::Result<&Sample> {
    let info = after
        .iter()
        .find(|s| s.name == "zprof_build_info")
        .ok_or_else(|| anyhow!("no zprof_build_info"))?;
    let label = |name: &str| info.labels.get(name).map(String::as_str).unwrap_or("");
    ensure!(
        label("target") == "kernel" && label("zfs_status") == "verified",
        "zprof_build_info: {:?}",
        info.labels
    );
    let tunable = |name: &str| after.iter().find(|s| s.name == name).map(|s| s.value);
    let (timeout, dirty_max) = (
        tunable("zfs_txg_timeout_seconds"),
        tunable("zfs_dirty_data_max_bytes"),
    );
    ensure!(
        timeout.is_some_and(|t| t > 0.0) && dirty_max.is_some_and(|d| d > 0.0),
        "the module's tunables are not exported: zfs_txg_timeout_seconds {timeout:?}, zfs_dirty_data_max_bytes {dirty_max:?}"
    );
    let lost: Vec<String> = after
        .iter()
        .filter(|s| s.name == "zprof_lost_events_total" && s.value != 0.0)
        .map(|s| format!("{:?} {}", s.labels, s.value))
        .collect();
    ensure!(lost.is_empty(), "lost events: {}", lost.join(", "));
    Ok(info)
}

/// The zil_commit calls serve exported for the pool during the job against
/// fio's fsyncs: (exported, fsyncs).
fn check_commits(dir: &Path, before: &[Sample], after: &[Sample]) -> anyhow::Result<(u64, u64)> {
    let fio = read_json(&dir.join("fio.json"))?;
    let fsyncs = fio["jobs"][0]["sync"]["total_ios"]
        .as_u64()
        .ok_or_else(|| anyhow!("fio.json has no sync.total_ios"))?;
    let commits = |samples: &[Sample]| {
        sum(
            samples,
            "zfs_zil_commit_duration_seconds_count",
            &[("pool", "srv")],
        )
    };
    let exported = (commits(after) - commits(before)) as u64;
    ensure!(
        fsyncs > 20,
        "fio made only {fsyncs} fsyncs: too few to compare"
    );
    ensure!(
        exported.abs_diff(fsyncs) <= FIO_ALLOWANCE,
        "zil_commit calls exported during the job {exported}, fio's fsyncs {fsyncs}"
    );
    Ok((exported, fsyncs))
}

/// The leaves placed as the pool was created, and the job's sync writes on
/// the log vdev (their count).
fn check_leaves(before: &[Sample], after: &[Sample]) -> anyhow::Result<f64> {
    let places = exported_places(after, "srv")?;
    let mut found: Vec<(String, String)> = places.values().cloned().collect();
    found.sort();
    let expected = expected_places("raidz1", true)?;
    ensure!(
        found == expected,
        "serve's leaves of srv {found:?}, but the pool was created as {expected:?}"
    );
    let log_writes = |samples: &[Sample]| {
        sum(
            samples,
            "zfs_vdev_total_duration_seconds_count",
            &[
                ("pool", "srv"),
                ("vdev_class", "log"),
                ("class", "sync_write"),
            ],
        )
    };
    let job_log_writes = log_writes(after) - log_writes(before);
    ensure!(
        job_log_writes > 0.0,
        "no sync write on the log vdev during the job"
    );
    Ok(job_log_writes)
}

/// `promtool check metrics` on an exposition (Debian's prometheus package,
/// which `cargo xtask setup` installs).
fn promtool_check(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run promtool: `cargo xtask setup` installs the prometheus package")?;
    child
        .stdin
        .take()
        .context("promtool's stdin")?
        .write_all(text.as_bytes())?;
    let output = child.wait_with_output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        output.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exposition_is_parsed_with_its_escapes() {
        let text =
            "# HELP x y\nzfs_a_count{pool=\"p\",class=\"a\\\"b,c\"} 3\nzprof_collect_seconds 0.5\n";
        let samples = parse_exposition(text).unwrap();
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].labels["class"], "a\"b,c");
        assert_eq!(samples[0].labels["pool"], "p");
        assert_eq!(
            (samples[1].name.as_str(), samples[1].value),
            ("zprof_collect_seconds", 0.5)
        );
        assert!(parse_exposition("zfs_a{pool=\"p} 1").is_err());
    }

    #[test]
    fn a_leaf_in_two_places_or_a_wrong_layout_fails() {
        let series = |guid: &str, top: &str, class: &str| {
            format!(
                "zfs_vdev_total_duration_seconds_count{{pool=\"srv\",class=\"sync_write\",top_vdev=\"{top}\",vdev_class=\"{class}\",vdev_guid=\"{guid}\"}} 1\n"
            )
        };
        let two =
            parse_exposition(&(series("1", "raidz-0", "normal") + &series("1", "file-1", "log")))
                .unwrap();
        assert!(exported_places(&two, "srv").is_err());
        let one = parse_exposition(&series("1", "mirror-0", "normal")).unwrap();
        let found: Vec<(String, String)> = exported_places(&one, "srv")
            .unwrap()
            .into_values()
            .collect();
        assert_ne!(found, expected_places("raidz1", true).unwrap());
        assert_eq!(
            expected_places("mirror", false).unwrap(),
            vec![("mirror-0".to_owned(), "normal".to_owned()); 2]
        );
    }
}
