//! Where a guest cell's build tools and user space come from: this host
//! (Debian 12), or a Debian root of a newer suite made with debootstrap.
//!
//! A kernel from trixie-backports (6.17) is built with gcc-14, and its kbuild
//! helpers (fixdep, modpost, objtool) and OpenZFS 2.4's zpool and zfs need
//! glibc 2.38: none of them runs on Debian 12. So such a cell builds its
//! modules inside a trixie root, as zfs-dkms would on a trixie host, and takes
//! the guest's libraries (libc, fio's, zpool's) from that root. The root is
//! made once by debootstrap and cached beside the cells that use it.
//!
//! Commands run in the root by `chroot` inside a private mount namespace, with
//! the guest cache bound at its own path: every path under the cache means the
//! same file inside and outside, so the build steps pass paths unchanged, and
//! nothing stays mounted when the command ends.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, ensure};

/// Packages the root is made with: the module build's compiler and tools
/// (kbuild's own BTF needs pahole), the libraries the guest's fio, zpool,
/// zfs and zinject load, and PostgreSQL.
const ROOT_PACKAGES: &[&str] = &[
    "gcc",
    "make",
    "libc6-dev",
    "binutils",
    "dwarves",
    "fio",
    "libssl3t64",
    "libblkid1",
    "libudev1",
    "libuuid1",
    "libaio1t64",
    "zlib1g",
    // PostgreSQL's server, initdb and pgbench for the guest's pgbench
    // section (the newest cell only: its root is trixie's).
    "postgresql",
];

/// The mirror debootstrap fetches from (the one the host's apt and
/// scripts/setup.sh's private lists use).
const MIRROR: &str = "http://deb.debian.org/debian";

/// Runs `command` inside `root`, in the directory the outer command was
/// started in, with the guest cache bound at its own path and /proc mounted.
const IN_ROOT: &str = r#"root=$1 cache=$2; shift 2
mkdir -p "$root$cache"
mount --bind "$cache" "$root$cache"
mount -t proc proc "$root/proc"
exec chroot "$root" /bin/sh -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "$PWD" "$@""#;

/// The tools of one cell.
#[derive(Clone, Debug)]
pub enum Toolchain {
    /// This host's own.
    Host,
    /// A debootstrapped root of a newer suite.
    Root {
        /// The root's directory.
        root: PathBuf,
        /// The guest cache, bound at its own path inside the root.
        cache: PathBuf,
        /// The suite (for messages).
        suite: String,
    },
}

impl Toolchain {
    /// The root of `suite` under `cache` (`roots/SUITE`), made by debootstrap
    /// when its stamp does not name the same packages.
    pub fn root(cache: &Path, suite: &str) -> anyhow::Result<Toolchain> {
        let root = cache.join("roots").join(suite);
        let stamp = cache.join("roots").join(format!("{suite}.stamp"));
        let key = format!("debootstrap --variant=minbase {suite} {MIRROR}\n{ROOT_PACKAGES:?}\n");
        let made = std::fs::read_to_string(&stamp).is_ok_and(|s| s == key)
            && root.join("usr/bin/gcc").exists();
        if !made {
            debootstrap(&root, suite)?;
            std::fs::write(&stamp, key)?;
        }
        Ok(Toolchain::Root {
            root,
            cache: cache.to_owned(),
            suite: suite.to_owned(),
        })
    }

    /// A command that runs `program` with these tools. In a root, the
    /// command's current directory is the one the program starts in (under
    /// the cache, so it means the same there).
    pub fn command(&self, program: &str) -> Command {
        match self {
            Toolchain::Host => Command::new(program),
            Toolchain::Root { root, cache, .. } => {
                let mut cmd = Command::new("unshare");
                cmd.args(["--mount", "--propagation", "private", "--", "sh", "-ec"])
                    .arg(IN_ROOT)
                    .arg("zprof-root")
                    .arg(root)
                    .arg(cache)
                    .arg(program)
                    .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
                cmd
            }
        }
    }

    /// The file the host reads for `path` as these tools see it: a path in
    /// the root is under its directory, except the guest cache, which is
    /// bound at its own path.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        match self {
            Toolchain::Host => path.to_owned(),
            Toolchain::Root { root, cache, .. } if !path.starts_with(cache) => {
                root.join(path.strip_prefix("/").unwrap_or(path))
            }
            Toolchain::Root { .. } => path.to_owned(),
        }
    }

    /// Whether the guest's user space comes from a root (its libc differs
    /// from this host's, so nothing of the host's libraries may enter the guest).
    pub fn is_root(&self) -> bool {
        matches!(self, Toolchain::Root { .. })
    }

    /// For logs: "this host" or "the trixie root at ...".
    pub fn describe(&self) -> String {
        match self {
            Toolchain::Host => "this host".into(),
            Toolchain::Root { root, suite, .. } => {
                format!("the {suite} root at {}", root.display())
            }
        }
    }
}

/// Makes a minimal root of `suite` with [`ROOT_PACKAGES`] (about a minute and
/// 650 MB), replacing whatever was there. debootstrap is one of the
/// builder's host packages (build.rs's HOST_PACKAGES).
fn debootstrap(root: &Path, suite: &str) -> anyhow::Result<()> {
    super::fresh_dir(root)?;
    let log = root.with_extension("debootstrap.log");
    eprintln!(
        "xtask: guest: debootstrap of {suite} into {} (about a minute; log {})",
        root.display(),
        log.display()
    );
    let output = std::fs::File::create(&log)?;
    let status = Command::new("debootstrap")
        .arg("--variant=minbase")
        .arg(format!("--include={}", ROOT_PACKAGES.join(",")))
        .arg(suite)
        .arg(root)
        .arg(MIRROR)
        .stdout(Stdio::from(output.try_clone()?))
        .stderr(Stdio::from(output))
        .status()
        .context("starting debootstrap")?;
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        anyhow::bail!(
            "debootstrap of {suite} failed with {status}; last lines of {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    ensure!(
        root.join("usr/bin/gcc").exists(),
        "debootstrap of {suite} left no /usr/bin/gcc in {}",
        root.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_in_a_root_are_read_under_it_except_the_cache() {
        let tools = Toolchain::Root {
            root: "/c/roots/trixie".into(),
            cache: "/c".into(),
            suite: "trixie".into(),
        };
        assert_eq!(
            tools.host_path(Path::new("/lib/x86_64-linux-gnu/libc.so.6")),
            Path::new("/c/roots/trixie/lib/x86_64-linux-gnu/libc.so.6")
        );
        assert_eq!(
            tools.host_path(Path::new("/c/k-zfs/userland/usr/lib/libzfs.so.7")),
            Path::new("/c/k-zfs/userland/usr/lib/libzfs.so.7")
        );
        assert_eq!(
            Toolchain::Host.host_path(Path::new("/lib/libc.so.6")),
            Path::new("/lib/libc.so.6")
        );
    }
}
