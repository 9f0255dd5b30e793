//! `guest boots`: how reliably each guest image boots under emulation.
//!
//! A boot that dies before the test script starts is retried once by `guest
//! test`, so a rare crash of the emulated kernel would pass unseen there. This
//! boots each image (each combination's initramfs with the btf and the nobtf
//! modules) many times with a trivial command and counts the boots that reach
//! it (/init up, zfs loaded, the command's status 0) with no kernel trouble
//! line (oops, BUG, warning) in the console or dmesg. A failed boot's run
//! directory is kept.

use std::{path::Path, time::Duration};

use anyhow::bail;
use clap::Args;

use super::{Artifacts, BuildArgs, Combination, Variant, build, run, run_dir};

/// `guest boots`.
#[derive(Args)]
pub struct BootsArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// Boots of each image.
    #[arg(long, default_value_t = 30)]
    pub count: u32,
    /// Kill a boot and count it failed after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

/// One image per module build: the headers variant boots the nobtf modules
/// (its offsets table is only a file in the payload), so it is the nobtf image.
const IMAGES: [Variant; 2] = [Variant::Btf, Variant::Nobtf];

/// The trivial command: it shows the guest ran something, nothing more.
const COMMAND: &str = "cat /proc/uptime";

/// What one boot did.
struct Boot {
    /// /init up, zfs loaded and the command's status 0.
    reached: bool,
    trouble: Vec<String>,
    /// Boot to the DONE line, when it came.
    done_after: Option<Duration>,
    /// Why it failed, if it did.
    error: Option<String>,
}

impl Boot {
    fn failed(&self) -> bool {
        !self.reached || !self.trouble.is_empty()
    }
}

/// Boots every image of the chosen combinations; fails if any boot failed.
pub fn boots(args: &BootsArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for combination in args.build.combinations(true)? {
        let artifacts = build::build(&args.build, combination)?;
        for variant in IMAGES {
            let image = format!("{} {}", combination.name(), variant.modules());
            let results: Vec<Boot> = (1..=args.count)
                .map(|n| boot_once(args, combination, &artifacts, variant, &image, n))
                .collect();
            failed.extend(
                results
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.failed())
                    .map(|(i, b)| failure_line(&image, i + 1, b)),
            );
            rows.push(table_row(&image, &results));
        }
    }
    eprintln!(
        "xtask: guest boots ({COMMAND}):\n  {:<22} {:>5} {:>7} {:>7} {:>10} {:>7}",
        "image", "boots", "reached", "trouble", "median s", "max s"
    );
    for row in &rows {
        eprintln!("  {row}");
    }
    if !failed.is_empty() {
        bail!(
            "{} boot(s) failed:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// Boot `n` of `image`; a failed boot's directory is kept as failed-N.
fn boot_once(
    args: &BootsArgs,
    combination: Combination,
    artifacts: &Artifacts,
    variant: Variant,
    image: &str,
    n: u32,
) -> Boot {
    let dir = run_dir(combination, &format!("boots-{}", variant.modules()));
    let out = dir.join("boot");
    let command = vec!["sh".to_owned(), "-c".to_owned(), COMMAND.to_owned()];
    let boot = judge(
        run::run(
            artifacts,
            variant,
            &command,
            &out,
            Duration::from_secs(args.timeout),
            run::Echo::Quiet,
        ),
        &out,
    );
    let kept = dir.join(format!("failed-{n}"));
    if boot.failed() {
        let _ = std::fs::remove_dir_all(&kept);
        let _ = std::fs::rename(&out, &kept);
    }
    let time = boot
        .done_after
        .map(|d| format!("{:.1} s", d.as_secs_f64()))
        .unwrap_or_else(|| "-".into());
    let verdict = if boot.failed() {
        format!("FAILED (kept in {})", kept.display())
    } else {
        "ok".into()
    };
    eprintln!(
        "xtask: guest boots: {image} {n}/{}: done after {time}, {verdict}",
        args.count
    );
    boot
}

fn judge(result: anyhow::Result<run::Outcome>, out: &Path) -> Boot {
    match result {
        Ok(outcome) => Boot {
            reached: outcome.status == 0,
            trouble: outcome.trouble,
            done_after: Some(outcome.done_after),
            error: (outcome.status != 0)
                .then(|| format!("the command exited with status {}", outcome.status)),
        },
        Err(err) => {
            let console = std::fs::read_to_string(out.join("console.log")).unwrap_or_default();
            let first = format!("{err}")
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            Boot {
                reached: false,
                trouble: run::trouble_lines(&console),
                done_after: None,
                error: Some(first),
            }
        }
    }
}

fn failure_line(image: &str, n: usize, boot: &Boot) -> String {
    let why = boot
        .error
        .clone()
        .unwrap_or_else(|| "kernel trouble".into());
    let trouble = if boot.trouble.is_empty() {
        String::new()
    } else {
        format!("; trouble: {}", boot.trouble.join(" | "))
    };
    format!("{image} boot {n}: {why}{trouble}")
}

/// image, boots, reached, boots with trouble, median and max seconds to DONE.
fn table_row(image: &str, boots: &[Boot]) -> String {
    let mut times: Vec<f64> = boots
        .iter()
        .filter(|b| b.reached)
        .filter_map(|b| b.done_after)
        .map(|d| d.as_secs_f64())
        .collect();
    times.sort_by(f64::total_cmp);
    let median = times
        .get(times.len() / 2)
        .map_or("-".into(), |t| format!("{t:.1}"));
    let max = times.last().map_or("-".into(), |t| format!("{t:.1}"));
    let reached = boots.iter().filter(|b| b.reached).count();
    let trouble = boots.iter().filter(|b| !b.trouble.is_empty()).count();
    format!(
        "{image:<22} {:>5} {reached:>7} {trouble:>7} {median:>10} {max:>7}",
        boots.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(reached: bool, trouble: &[&str], secs: f64) -> Boot {
        Boot {
            reached,
            trouble: trouble.iter().map(|t| (*t).to_owned()).collect(),
            done_after: reached.then(|| Duration::from_secs_f64(secs)),
            error: None,
        }
    }

    #[test]
    fn a_boot_with_trouble_fails_even_if_it_reached_the_command() {
        assert!(!boot(true, &[], 12.0).failed());
        assert!(boot(true, &["WARNING: CPU: 1 PID: 1 at x"], 12.0).failed());
        assert!(boot(false, &[], 0.0).failed());
    }

    #[test]
    fn the_row_counts_reached_boots_and_times_them() {
        let row = table_row(
            "6.12-2.3.2 btf",
            &[
                boot(true, &[], 10.0),
                boot(true, &[], 14.0),
                boot(true, &[], 12.0),
                boot(false, &["RIP: x"], 0.0),
            ],
        );
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(words[2..], ["4", "3", "1", "12.0", "14.0"], "{row}");
    }
}
