//! `zprof top` driven in tmux (send-keys) and read back (capture-pane) while
//! the lab runs fsync writes: the screen shows the workload's stages with
//! their rates, `s` changes the sort, `p` picks the lab's pool, `f` shows the
//! top finding, and `q` ends it with every probe detached (exit 0). Needs root.

use std::{
    process::Command,
    time::{Duration, Instant},
};

mod common;
use common::{lab_releases, require_root, scratch};

/// A tmux session, killed however the test ends.
struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(args)
            .output()
            .expect("no tmux: cargo xtask setup installs it");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", &self.0])
    }

    fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", &self.0, keys]);
    }

    /// Waits until the screen satisfies `ok` (up to 20 s); returns it.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no {what} on the screen in 20 s:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

/// The OPS/S column (where its heading starts: classes hold spaces) of the
/// first line that starts with `stage` and holds `pool`.
fn ops_per_s(screen: &str, stage: &str, pool: &str) -> Option<f64> {
    let column = screen.lines().find_map(|l| l.find("OPS/S"))?;
    let line = screen
        .lines()
        .find(|l| l.starts_with(&format!("{stage} ")) && l.contains(pool))?;
    line.get(column..)?
        .split_whitespace()
        .next()?
        .replace(',', "")
        .parse()
        .ok()
}

#[test]
fn top_shows_the_workloads_stages_and_its_keys_work() {
    require_root();
    let release = lab_releases().remove(0);
    let dir = scratch("zprof-top", &release.version);
    let status = dir.join("status");
    let zprof = common::zprof_binary();
    let tmux = Tmux(format!("zprof-top-{}", std::process::id()));
    let command = format!(
        "{} top --target libzpool={} 2>{}; echo exit=$? > {}",
        zprof.display(),
        release.libzpool.display(),
        dir.join("stderr").display(),
        status.display()
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        &tmux.0,
        "-x",
        "160",
        "-y",
        "45",
        &command,
    ]);
    let heading = format!("zprof top: OpenZFS {}", release.version);
    tmux.wait_for("heading", |s| s.contains(&heading));

    let mut lab = Command::new(&release.lab)
        .args(["run", "--dir"])
        .arg(&dir)
        .args([
            "--job",
            "name=f,rw=randwrite,bs=4k,size=16m,runtime=8,fsync=1",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pool = format!("zlab-{}", lab.id());
    let screen = tmux.wait_for("zil_commit row of the lab's pool", |s| {
        ops_per_s(s, "zil_commit", &pool).is_some_and(|ops| ops > 0.0)
    });
    eprintln!("{screen}");
    for stage in ["zil_flush", "vdev_disk", "write"] {
        assert!(
            ops_per_s(&screen, stage, &pool).is_some(),
            "no {stage} row for {pool}:\n{screen}"
        );
    }

    tmux.keys("s");
    tmux.wait_for("sort by ops/s", |s| s.contains("sort: ops/s"));
    // Other pools may be seen too: p until the lab's.
    for _ in 0..5 {
        if tmux.screen().contains(&format!("pool: {pool}")) {
            break;
        }
        tmux.keys("p");
        std::thread::sleep(Duration::from_millis(500));
    }
    let screen = tmux.wait_for("the lab's pool alone", |s| {
        s.contains(&format!("pool: {pool}"))
    });
    let other_pool = |l: &&str| {
        l.split_whitespace()
            .any(|w| w.starts_with("zlab-") && w != pool)
    };
    assert!(
        !screen.lines().skip(2).any(|l| other_pool(&l)),
        "rows of another pool:\n{screen}"
    );
    tmux.keys("f");
    let screen = tmux.wait_for("the top finding", |s| {
        s.contains("top finding over the last")
    });
    eprintln!("{screen}");
    assert!(screen.contains("bound by ZIL commits"), "{screen}");

    tmux.keys("q");
    let started = Instant::now();
    while !status.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "zprof top did not end on q: {}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(&status).unwrap().trim(),
        "exit=0",
        "{}",
        std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
    );
    assert!(lab.wait().unwrap().success());
    drop(tmux);
    std::fs::remove_dir_all(dir).unwrap();
}
