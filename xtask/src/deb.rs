//! `cargo xtask deb`: zprof as a Debian package, built with dpkg-deb from
//! the release binary and what it generates of itself (man pages and
//! completions, `zprof generate`), with the service unit and its defaults
//! from packaging/ and the Grafana dashboard and Prometheus rules from
//! monitoring/.
//!
//! The service is installed but not enabled: a host decides to export its
//! pools' figures (`systemctl enable --now zprof-serve`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail, ensure};
use clap::Args;

/// `cargo xtask deb`.
#[derive(Args)]
pub struct DebArgs {
    /// Directory to write the package to (default: target/deb).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Files of the package from the repository: (source, path in the package).
const REPOSITORY_FILES: [(&str, &str); 5] = [
    (
        "packaging/zprof-serve.service",
        "lib/systemd/system/zprof-serve.service",
    ),
    ("packaging/zprof.default", "etc/default/zprof"),
    (
        "monitoring/grafana-dashboard.json",
        "usr/share/zprof/monitoring/grafana-dashboard.json",
    ),
    (
        "monitoring/zprof-rules.yml",
        "usr/share/zprof/monitoring/zprof-rules.yml",
    ),
    (
        "monitoring/zprof-rules.test.yml",
        "usr/share/zprof/monitoring/zprof-rules.test.yml",
    ),
];

/// Where each shell looks for its completions: (shell, path in the package).
const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "usr/share/bash-completion/completions/zprof"),
    ("zsh", "usr/share/zsh/vendor-completions/_zprof"),
    ("fish", "usr/share/fish/vendor_completions.d/zprof.fish"),
];

/// Builds the package; returns its path.
pub fn deb(args: &DebArgs) -> anyhow::Result<PathBuf> {
    let root = crate::workspace_root();
    crate::run(crate::cargo().args(["build", "-p", "zprof", "--bin", "zprof", "--release"]))?;
    let binary = crate::target_dir().join("release/zprof");
    let version = package_version(&binary)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| crate::target_dir().join("deb"));
    let stage = out.join(format!("zprof_{version}_amd64"));
    if stage.exists() {
        std::fs::remove_dir_all(&stage).with_context(|| format!("removing {}", stage.display()))?;
    }
    let place = |path: &str| -> anyhow::Result<PathBuf> {
        let to = stage.join(path);
        std::fs::create_dir_all(to.parent().expect("a file in a directory"))?;
        Ok(to)
    };
    let installed = place("usr/bin/zprof")?;
    std::fs::copy(&binary, &installed)?;
    // The symbols are not needed to run: a third of the size.
    crate::run(Command::new("strip").arg("--strip-debug").arg(&installed))?;
    for (from, to) in REPOSITORY_FILES {
        std::fs::copy(root.join(from), place(to)?).with_context(|| format!("copying {from}"))?;
    }
    man_pages(&installed, &place("usr/share/man/man1/zprof.1.gz")?)?;
    for (shell, to) in COMPLETIONS {
        let script = output(Command::new(&installed).args(["generate", "completions", shell]))?;
        std::fs::write(place(to)?, script)?;
    }
    write_metadata(&stage, &version)?;
    let package = out.join(format!("zprof_{version}_amd64.deb"));
    crate::run(
        Command::new("dpkg-deb")
            .args(["--build", "--root-owner-group", "-Zxz"])
            .arg(&stage)
            .arg(&package),
    )?;
    eprintln!("xtask: built {}", package.display());
    Ok(package)
}

/// The version zprof reports (`zprof 0.1.0`).
fn package_version(binary: &Path) -> anyhow::Result<String> {
    let text = String::from_utf8(output(Command::new(binary).arg("--version"))?)?;
    let version = text.split_whitespace().nth(1).unwrap_or("").to_owned();
    ensure!(
        !version.is_empty(),
        "zprof --version printed no version: {text}"
    );
    Ok(version)
}

/// The pages `zprof generate man` writes, gzipped beside `first` (zprof.1.gz).
fn man_pages(binary: &Path, first: &Path) -> anyhow::Result<()> {
    let dir = first.parent().expect("man1");
    output(Command::new(binary).args(["generate", "man"]).arg(dir))?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "1") {
            // -n: no name or time stamp, so the same pages make the same bytes.
            crate::run(Command::new("gzip").args(["-9n", "-f"]).arg(&path))?;
        }
    }
    ensure!(first.exists(), "zprof generate man wrote no zprof.1");
    Ok(())
}

/// DEBIAN/control, conffiles and the maintainer scripts, and the copyright.
fn write_metadata(stage: &Path, version: &str) -> anyhow::Result<()> {
    let debian = stage.join("DEBIAN");
    std::fs::create_dir_all(&debian)?;
    let size_kib = tree_size(stage)? / 1024;
    std::fs::write(
        debian.join("control"),
        format!(
            "Package: zprof\n\
             Version: {version}\n\
             Architecture: amd64\n\
             Maintainer: zprof developers <zprof@localhost>\n\
             Installed-Size: {size_kib}\n\
             Depends: libc6 (>= 2.34), libgcc-s1\n\
             Recommends: zfsutils-linux | libzpool5linux\n\
             Section: admin\n\
             Priority: optional\n\
             Description: per-stage latency profiler and Prometheus exporter for OpenZFS\n \
             zprof attaches eBPF programs to OpenZFS (zfs.ko through kprobes, or\n \
             libzpool through uprobes) and measures each stage of the I/O path:\n \
             compression, checksums, the vdev queue, disk I/O, ZIL commits, txg\n \
             sync and the write throttle, then explains what bounds a workload.\n \
             zprof-serve.service exports the stages for Prometheus.\n"
        ),
    )?;
    std::fs::write(debian.join("conffiles"), "/etc/default/zprof\n")?;
    // systemd learns of the unit (or forgets it); it is not enabled.
    let reload = "#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then\n    systemctl daemon-reload || true\nfi\n";
    for script in ["postinst", "postrm"] {
        let path = debian.join(script);
        std::fs::write(&path, reload)?;
        set_mode(&path, 0o755)?;
    }
    let doc = stage.join("usr/share/doc/zprof");
    std::fs::create_dir_all(&doc)?;
    std::fs::write(
        doc.join("copyright"),
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: zprof\n\n\
         Files: *\n\
         License: MIT or Apache-2.0\n \
         On Debian systems, the Apache License 2.0 is in\n \
         /usr/share/common-licenses/Apache-2.0.\n",
    )?;
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Bytes of the regular files under `dir`.
fn tree_size(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            total += tree_size(&entry.path())?;
        } else if kind.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// A command's standard output; `Err` with its standard error if it failed.
fn output(cmd: &mut Command) -> anyhow::Result<Vec<u8>> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}
