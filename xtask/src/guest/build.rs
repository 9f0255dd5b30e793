//! `guest build`: everything the guest boots from, made once and cached.
//!
//! Steps, each skipped when its stamp file says its inputs are unchanged and its
//! outputs exist (a stamp holds the names of the input packages and the recipe
//! version, readable with `cat`):
//!
//! 1. download the Debian packages (`apt-get download`, never installed here):
//!    the kernel image, its headers and kbuild (a pinned kernel's from
//!    Debian's pool, checked by sha256); qemu with whatever of its
//!    dependencies the host lacks (unless qemu-system-x86 is installed already);
//!    busybox-static, the combination's OpenZFS user space and zfs-dkms for the
//!    source (from the suite scripts/openzfs-releases names, through the private
//!    apt lists scripts/setup.sh keeps for it, when it is not Debian 12's own);
//! 2. unpack them with `dpkg -x` (kernel, qemu, userland);
//! 3. extract vmlinux from vmlinuz (its BTF is the base for the modules' BTF);
//! 4. build the zfs modules for the guest kernel, unstripped (configure + make
//!    in a copy of the dkms source, about 3 minutes on 2 cores), with this
//!    host's tools or in the cell's debootstrapped root ([`super::toolchain`]);
//! 5. two variants of the modules (9 in 2.1, spl and zfs from 2.2): `btf`
//!    (pahole -J against vmlinux, then strip --strip-debug) and `nobtf` (strip
//!    only, as dkms installs them);
//! 6. the base initramfs (busybox, zpool/zfs/zinject, fio and their libraries)
//!    and one small archive of modules per variant.
//!
//! zprof and the guest scripts are not here: `run` packs them at each boot, so a
//! change to zprof rebuilds nothing of this.

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, anyhow, bail, ensure};

use super::{
    BuildArgs, Combination, KernelChoice, PinnedKernel, Variant, cache_dir, cpio, fresh_dir,
    toolchain::Toolchain,
};
use crate::run;

/// Bump when a step's recipe changes, so caches built by the old recipe are redone.
const RECIPE: u32 = 1;

/// Bump when what [`base_tree`] puts in the initramfs changes (that step
/// alone is redone).
const BASE_TREE_RECIPE: u32 = 2;

/// Modules every OpenZFS build has (2.1 splits the rest into 7 more).
const MODULES: [&str; 2] = ["spl", "zfs"];

/// OpenZFS user-space packages unpacked for the guest, beside the libraries
/// zfsutils-linux depends on (their sonames change between releases).
/// zfs-dkms is here for its module source, zfs-test for zinject.
const ZFS_PACKAGES: &[&str] = &["zfsutils-linux", "zfs-test", "zfs-dkms"];

/// Host packages the builder installs when missing (harmless to the host: pahole).
const HOST_PACKAGES: &[(&str, &str)] = &[
    ("pahole", "dwarves"),
    ("xz", "xz-utils"),
    ("zstd", "zstd"),
    ("make", "make"),
    ("gcc-12", "gcc-12"),
    ("curl", "curl"),
    ("objdump", "binutils"),
    ("debootstrap", "debootstrap"),
];

/// What `run` needs to boot a guest.
pub struct Artifacts {
    /// Kernel release, e.g. 6.1.0-57-amd64.
    pub kver: String,
    /// The kernel image.
    pub vmlinuz: PathBuf,
    /// How to start qemu.
    pub qemu: Qemu,
    /// busybox, zfs tools, fio.
    pub base_cpio: PathBuf,
    /// The modules archive of each variant.
    pub modules_cpio: BTreeMap<String, PathBuf>,
    /// The zprof binary to put in the guest.
    pub zprof: PathBuf,
    /// busybox on the host, for the payload's tools (tar).
    pub cache: PathBuf,
    /// Where the modules were built and the guest's libraries come from.
    pub toolchain: Toolchain,
}

impl Artifacts {
    /// One line for logs.
    pub fn summary(&self) -> String {
        let size = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.len() / 1_000_000)
                .unwrap_or(0)
        };
        let modules: Vec<String> = self
            .modules_cpio
            .iter()
            .map(|(v, p)| format!("{v} {} MB", size(p)))
            .collect();
        format!(
            "kernel {} (built with {}), base initramfs {} MB, modules {}, zprof {}, cache {}",
            self.kver,
            self.toolchain.describe(),
            size(&self.base_cpio),
            modules.join(", "),
            self.zprof.display(),
            self.cache.display()
        )
    }

    /// The modules archive for a variant.
    pub fn modules(&self, variant: Variant) -> &Path {
        &self.modules_cpio[variant.modules()]
    }
}

/// A qemu binary, and where its libraries and firmware are when it was unpacked.
pub struct Qemu {
    /// qemu-system-x86_64.
    pub binary: PathBuf,
    /// LD_LIBRARY_PATH for an unpacked qemu.
    pub lib_dir: Option<PathBuf>,
    /// `-L` directories (bios, option ROMs).
    pub firmware: Vec<PathBuf>,
}

/// Runs every step that is not cached and returns what `combination` boots from.
pub fn build(args: &BuildArgs, combination: Combination) -> anyhow::Result<Artifacts> {
    // zprof first: cargo and the module build never compete for the 2 cores.
    let zprof = match &args.zprof {
        Some(path) => {
            ensure!(path.is_file(), "--zprof {}: no such file", path.display());
            std::path::absolute(path)?
        }
        None => build_zprof(args.release)?,
    };
    host_packages()?;
    let kver = kernel_release(combination.kernel)?;
    let apt = Apt::for_release(combination.zfs)?;
    let tools = match combination.root {
        Some(suite) => Toolchain::root(&cache_dir(), suite)?,
        None => Toolchain::Host,
    };
    let cache = cache_dir().join(format!("{kver}-zfs-{}", combination.zfs));
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    // One builder at a time per cache (two module builds would starve each other).
    let lock = std::fs::File::create(cache.join(".lock"))?;
    lock.lock().context("locking the guest cache")?;
    let steps = Steps { dir: cache.clone() };

    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs)?;
    let kernel_debs = match combination.kernel {
        KernelChoice::Pinned(kernel) => download_pinned(&debs, kernel)?,
        _ => download(&debs, &kernel_packages(&kver)?, &Apt::default())?,
    };
    let mut userland_debs = download(&debs, &["busybox-static".to_owned()], &Apt::default())?;
    userland_debs.extend(download(&debs, &apt.zfs_packages()?, &apt)?);
    let qemu_debs = match host_qemu() {
        Some(_) => Vec::new(),
        None => download(&debs, &qemu_packages()?, &Apt::default())?,
    };

    let kernel_dir = cache.join("kernel");
    let kernel_key = stamp_key(&kernel_debs);
    steps.step("kernel", &kernel_key, &[&kernel_dir], || {
        unpack(&kernel_debs, &kernel_dir)?;
        fix_headers_makefile(&kernel_dir, &kver)
    })?;
    let vmlinuz = kernel_dir.join(format!("boot/vmlinuz-{kver}"));
    let vmlinux = cache.join("vmlinux");
    steps.step("vmlinux", &kernel_key, &[&vmlinux], || {
        extract_vmlinux(&vmlinuz, &vmlinux)
    })?;

    let qemu = guest_qemu(&steps, &cache, &qemu_debs)?;

    let userland = cache.join("userland");
    let userland_key = stamp_key(&userland_debs);
    steps.step("userland", &userland_key, &[&userland], || {
        unpack(&userland_debs, &userland)
    })?;

    let zfs_build = cache.join("zfs-build");
    let zfs_key = format!("{kernel_key}\n{userland_key}");
    // zfs.ko's place differs (module/zfs/ in 2.1, module/ from 2.2): the
    // build leaves a marker of its own.
    let built = zfs_build.join("zprof-modules-built");
    steps.step("zfs-modules", &zfs_key, &[&built], || {
        build_modules(&userland, (&kernel_dir, &kver), &zfs_build, &tools)?;
        built_modules(&zfs_build)?;
        Ok(std::fs::write(&built, "")?)
    })?;

    let modules_cpio = module_archives(&steps, &cache, (&zfs_build, &vmlinux), &zfs_key, &tools)?;
    let base_cpio = base_initramfs(&steps, &cache, &userland, &userland_key, &tools)?;

    Ok(Artifacts {
        kver,
        vmlinuz,
        qemu,
        base_cpio,
        modules_cpio,
        zprof,
        cache,
        toolchain: tools,
    })
}

/// The host's qemu, or else one unpacked from `qemu_debs` (a cached step).
fn guest_qemu(steps: &Steps, cache: &Path, qemu_debs: &[PathBuf]) -> anyhow::Result<Qemu> {
    Ok(match host_qemu() {
        Some(binary) => Qemu {
            binary,
            lib_dir: None,
            firmware: Vec::new(),
        },
        None => {
            let dir = cache.join("qemu");
            steps.step("qemu", &stamp_key(qemu_debs), &[&dir], || {
                unpack(qemu_debs, &dir)?;
                check_libraries(
                    &dir.join("usr/bin/qemu-system-x86_64"),
                    &[dir.join("usr/lib/x86_64-linux-gnu")],
                    &Toolchain::Host,
                )
            })?;
            Qemu {
                binary: dir.join("usr/bin/qemu-system-x86_64"),
                lib_dir: Some(dir.join("usr/lib/x86_64-linux-gnu")),
                firmware: vec![dir.join("usr/share/qemu"), dir.join("usr/share/seabios")],
            }
        }
    })
}

/// The built modules in each variant (with BTF, and with .BTF removed), each
/// packed as a cpio under lib/modules/zfs (cached steps); by variant name.
fn module_archives(
    steps: &Steps,
    cache: &Path,
    (zfs_build, vmlinux): (&Path, &Path),
    zfs_key: &str,
    tools: &Toolchain,
) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let pahole = capture(tools.command("pahole").arg("--version"))?
        .trim()
        .to_owned();
    let mut modules_cpio = BTreeMap::new();
    for variant in [Variant::Btf, Variant::Nobtf] {
        let dir = cache.join(format!("modules-{variant}"));
        let archive = cache.join(format!("modules-{variant}.cpio"));
        let key = format!("{zfs_key}\npahole {pahole}\nnobtf: .BTF removed");
        steps.step(&format!("modules-{variant}"), &key, &[&archive], || {
            module_variant((zfs_build, vmlinux), variant, &dir, tools)?;
            let root = cache.join(format!("modules-{variant}-root"));
            fresh_dir(&root)?;
            let into = root.join("lib/modules/zfs");
            std::fs::create_dir_all(into.parent().unwrap())?;
            copy_tree(&dir, &into)?;
            cpio::write_tree(&root, &archive)?;
            std::fs::remove_dir_all(&root)?;
            Ok(())
        })?;
        modules_cpio.insert(variant.to_string(), archive);
    }
    Ok(modules_cpio)
}

/// The base initramfs, made from the unpacked userland (a cached step).
fn base_initramfs(
    steps: &Steps,
    cache: &Path,
    userland: &Path,
    userland_key: &str,
    tools: &Toolchain,
) -> anyhow::Result<PathBuf> {
    let base_cpio = cache.join("base.cpio");
    let fio_version = package_version("fio", tools).unwrap_or_else(|| "absent".into());
    let base_key = format!(
        "{userland_key}\nfio {fio_version}\nlibc {}\npostgresql {}\ntree {BASE_TREE_RECIPE}",
        package_version("libc6", tools).unwrap_or_default(),
        postgres_version(tools)
            .and_then(|v| package_version(&format!("postgresql-{v}"), tools))
            .unwrap_or_else(|| "absent".into())
    );
    steps.step("initramfs", &base_key, &[&base_cpio], || {
        let root = cache.join("base-root");
        fresh_dir(&root)?;
        base_tree(userland, &root, tools)?;
        cpio::write_tree(&root, &base_cpio)?;
        std::fs::remove_dir_all(&root)?;
        Ok(())
    })?;
    Ok(base_cpio)
}

/// Cached steps of one cache directory.
struct Steps {
    dir: PathBuf,
}

impl Steps {
    /// Runs `work` unless `NAME.stamp` holds `key` and every output exists.
    fn step(
        &self,
        name: &str,
        key: &str,
        outputs: &[&Path],
        work: impl FnOnce() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let key = format!("recipe {RECIPE}\n{key}\n");
        let stamp = self.dir.join(format!("{name}.stamp"));
        let cached = std::fs::read_to_string(&stamp).is_ok_and(|s| s == key)
            && outputs.iter().all(|o| o.exists());
        if cached {
            eprintln!("xtask: guest: {name}: cached");
            return Ok(());
        }
        let _ = std::fs::remove_file(&stamp);
        eprintln!("xtask: guest: {name}: building");
        let started = Instant::now();
        work().with_context(|| format!("guest build step '{name}'"))?;
        std::fs::write(&stamp, key)?;
        eprintln!("xtask: guest: {name}: done in {:.1?}", started.elapsed());
        Ok(())
    }
}

fn stamp_key(debs: &[PathBuf]) -> String {
    let mut names: Vec<String> = debs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.join("\n")
}

fn build_zprof(release: bool) -> anyhow::Result<PathBuf> {
    let mut cmd = crate::cargo();
    cmd.args(["build", "-p", "zprof", "--bin", "zprof"]);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    let path = crate::target_dir()
        .join(if release { "release" } else { "debug" })
        .join("zprof");
    ensure!(
        path.exists(),
        "cargo built zprof but {} is missing",
        path.display()
    );
    Ok(path)
}

/// Installs the few host tools the build needs (idempotent: checks first).
fn host_packages() -> anyhow::Result<()> {
    let missing: Vec<&str> = HOST_PACKAGES
        .iter()
        .filter(|(tool, _)| which(tool).is_none())
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!(
        "xtask: guest: installing {} (host tools for the module build)",
        missing.join(" ")
    );
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

fn capture(cmd: &mut Command) -> anyhow::Result<String> {
    let output = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    ensure!(
        output.status.success(),
        "{:?} failed with {}",
        cmd,
        output.status
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The installed version of `package` where `tools` come from.
fn package_version(package: &str, tools: &Toolchain) -> Option<String> {
    let out = tools
        .command("dpkg-query")
        .args(["-W", "-f=${Status} ${Version}", package])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_prefix("install ok installed ")
        .map(str::to_owned)
}

/// The guest kernel release. Default: `$ZPROF_GUEST_KERNEL`, else the one
/// Debian's `linux-image-amd64` points at (the generic flavour: the cloud
/// kernel's vermagic differs from the headers'). A series: the newest generic
/// release of it that apt knows.
fn kernel_release(choice: KernelChoice) -> anyhow::Result<String> {
    let series = match choice {
        KernelChoice::Default => {
            if let Ok(kver) = std::env::var("ZPROF_GUEST_KERNEL") {
                return Ok(kver);
            }
            let text = capture(Command::new("apt-cache").args(["depends", "linux-image-amd64"]))?;
            return text
                .lines()
                .find_map(|l| l.trim().strip_prefix("Depends: linux-image-"))
                .map(|k| k.trim().to_owned())
                .ok_or_else(|| anyhow!("apt-cache knows no linux-image-amd64; run apt-get update, or set ZPROF_GUEST_KERNEL=6.1.0-NN-amd64"));
        }
        KernelChoice::Series(series) => series,
        KernelChoice::Pinned(kernel) => return Ok(kernel.release.to_owned()),
    };
    let pattern = format!(
        "^linux-image-{}\\.[0-9]+\\+deb[0-9]+-amd64$",
        series.replace('.', "\\.")
    );
    let text = capture(Command::new("apt-cache").args(["search", "--names-only", &pattern]))?;
    newest_release(&text, series)
        .ok_or_else(|| anyhow!("apt knows no linux-image-{series}.N+debNN-amd64 (run apt-get update; Debian 12 carries 6.12 in bookworm-security)"))
}

/// The newest `SERIES.N+debNN-amd64` among apt-cache search lines.
fn newest_release(search: &str, series: &str) -> Option<String> {
    search
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.strip_prefix("linux-image-"))
        .filter_map(|kver| {
            let patch: u32 = kver
                .strip_prefix(series)?
                .strip_prefix('.')?
                .split('+')
                .next()?
                .parse()
                .ok()?;
            Some((patch, kver.to_owned()))
        })
        .max()
        .map(|(_, kver)| kver)
}

/// The image, its headers and the headers' kbuild/common packages.
fn kernel_packages(kver: &str) -> anyhow::Result<Vec<String>> {
    let headers = format!("linux-headers-{kver}");
    let text = capture(Command::new("apt-cache").args(["depends", &headers]))?;
    let mut packages = vec![format!("linux-image-{kver}"), headers];
    for line in text.lines() {
        if let Some(dep) = line.trim().strip_prefix("Depends: ")
            && (dep.starts_with("linux-headers-") || dep.starts_with("linux-kbuild-"))
        {
            packages.push(dep.trim().to_owned());
        }
    }
    ensure!(
        packages.len() >= 4,
        "unexpected dependencies of {}: {text}",
        packages[1]
    );
    Ok(packages)
}

/// qemu-system-x86_64 when the host has it installed (then nothing is downloaded).
fn host_qemu() -> Option<PathBuf> {
    package_version("qemu-system-x86", &Toolchain::Host)?;
    Some(PathBuf::from("/usr/bin/qemu-system-x86_64"))
}

/// qemu-system-x86 and what apt would install with it. Installing it for real
/// would remove a newer qemu-utils backport, so it is only unpacked.
fn qemu_packages() -> anyhow::Result<Vec<String>> {
    let text = capture(Command::new("apt-get").args([
        "install",
        "-s",
        "--no-install-recommends",
        "qemu-system-x86",
    ]))?;
    let packages: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("Inst "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    ensure!(
        packages.iter().any(|p| p == "qemu-system-x86"),
        "apt-get would not install qemu-system-x86:\n{text}"
    );
    Ok(packages)
}

/// How apt is asked for packages: the host's own lists, or a private set of
/// lists for another suite (as scripts/setup.sh made them), with the package
/// version that release has there.
#[derive(Default)]
struct Apt {
    /// `-o` options selecting the private lists (none: the host's).
    options: Vec<String>,
    /// `=VERSION` pinned on every OpenZFS package (none: the candidate).
    version: Option<String>,
}

impl Apt {
    /// Where OpenZFS `release` comes from: Debian 12's own lists, or the suite
    /// and version scripts/openzfs-releases gives for it.
    fn for_release(release: &str) -> anyhow::Result<Apt> {
        let Some((suite, version)) = crate::release_source(release)? else {
            return Ok(Apt::default());
        };
        let apt = crate::setup_cache().join("apt").join(&suite);
        ensure!(
            apt.join("sources.list").is_file(),
            "no apt lists for {suite} in {} (`cargo xtask setup` makes them)",
            apt.display()
        );
        let options = [
            format!(
                "Dir::Etc::SourceList={}",
                apt.join("sources.list").display()
            ),
            "Dir::Etc::SourceParts=/dev/null".to_owned(),
            format!("Dir::State::Lists={}", apt.join("lists").display()),
            format!("Dir::Cache={}", apt.display()),
            format!("Dir::Cache::Archives={}", apt.join("archives").display()),
        ];
        Ok(Apt {
            options: options
                .into_iter()
                .flat_map(|o| ["-o".to_owned(), o])
                .collect(),
            version: Some(version),
        })
    }

    fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(tool);
        cmd.args(&self.options);
        cmd
    }

    /// `package` or `package=VERSION`.
    fn pinned(&self, package: &str) -> String {
        match &self.version {
            Some(v) => format!("{package}={v}"),
            None => package.to_owned(),
        }
    }

    /// The OpenZFS packages, with the libraries zfsutils-linux depends on
    /// (updating the lists once if they do not know it).
    fn zfs_packages(&self) -> anyhow::Result<Vec<String>> {
        let libraries = || -> anyhow::Result<Vec<String>> {
            let output = self
                .command("apt-cache")
                .arg("depends")
                .arg(self.pinned("zfsutils-linux"))
                .output()?;
            Ok(String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter_map(|l| l.trim().strip_prefix("Depends: "))
                .map(str::trim)
                .filter(|d| d.starts_with("lib") && d.ends_with("linux"))
                .map(|d| self.pinned(d))
                .collect())
        };
        let mut packages = libraries()?;
        if !packages.iter().any(|p| p.starts_with("libzpool")) {
            run(self.command("apt-get").args(["update", "-qq"]))?;
            packages = libraries()?;
        }
        ensure!(
            packages.iter().any(|p| p.starts_with("libzpool")),
            "apt knows no {} depending on a libzpool",
            self.pinned("zfsutils-linux")
        );
        packages.extend(ZFS_PACKAGES.iter().map(|p| self.pinned(p)));
        Ok(packages)
    }
}

/// The .deb of each package (`name` or `name=version`) in `dir`, downloading
/// those not there yet.
fn download(dir: &Path, packages: &[String], apt: &Apt) -> anyhow::Result<Vec<PathBuf>> {
    let find = |package: &str| -> Option<PathBuf> {
        let (name, version) = package.split_once('=').unwrap_or((package, ""));
        // dpkg's file names write the epoch's colon as %3a.
        let prefix = format!("{name}_{}", version.replace(':', "%3a"));
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with(&prefix) && name.ends_with(".deb")
            })
            .collect();
        found.sort();
        found.pop()
    };
    let missing: Vec<&String> = packages.iter().filter(|p| find(p).is_none()).collect();
    if !missing.is_empty() {
        let fetch = |dir: &Path| {
            apt.command("apt-get")
                .current_dir(dir)
                // The files land in the cache, which the _apt user may not reach.
                .args(["download", "-q", "-o", "APT::Sandbox::User=root"])
                .args(&missing)
                .stdout(Stdio::null())
                .status()
        };
        eprintln!(
            "xtask: guest: downloading {}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        if !fetch(dir)?.success() {
            eprintln!(
                "xtask: guest: apt-get download failed; updating the package lists and retrying"
            );
            run(apt.command("apt-get").args(["update", "-qq"]))?;
            ensure!(
                fetch(dir)?.success(),
                "apt-get download failed (is the contrib component enabled? `cargo xtask setup` does that)"
            );
        }
    }
    packages
        .iter()
        .map(|p| {
            find(p).ok_or_else(|| anyhow!("{p}: downloaded, but no {p}_*.deb in {}", dir.display()))
        })
        .collect()
}

/// The .deb of each of a pinned kernel's files in `dir`, fetching from
/// Debian's pool those not there yet; each is checked against its sha256
/// (a file that fails is removed, so the next run fetches it again).
fn download_pinned(dir: &Path, kernel: &PinnedKernel) -> anyhow::Result<Vec<PathBuf>> {
    let mut debs = Vec::new();
    for (pool_path, sha256) in kernel.files {
        let name = pool_path.rsplit('/').next().unwrap_or(pool_path);
        let deb = dir.join(name);
        if !deb.exists() {
            eprintln!("xtask: guest: downloading {name} from Debian's pool");
            let url = format!("http://deb.debian.org/debian/{pool_path}")
                .replace('+', "%2b")
                .replace('~', "%7e");
            let partial = deb.with_extension("partial");
            let status = Command::new("curl")
                .args(["-sSfL", "--retry", "3", "-o"])
                .arg(&partial)
                .arg(&url)
                .status()
                .context("starting curl")?;
            ensure!(
                status.success(),
                "fetching {url} failed ({status}): Debian's pool no longer has it? Pin a release that it has in xtask/src/guest.rs"
            );
            std::fs::rename(&partial, &deb)?;
        }
        let digest = capture(Command::new("sha256sum").arg(&deb))?;
        if digest.split_whitespace().next() != Some(sha256) {
            let _ = std::fs::remove_file(&deb);
            bail!(
                "{} has sha256 {}, not the {sha256} pinned for it in xtask/src/guest.rs: removed",
                deb.display(),
                digest.split_whitespace().next().unwrap_or("?")
            );
        }
        debs.push(deb);
    }
    Ok(debs)
}

fn unpack(debs: &[PathBuf], into: &Path) -> anyhow::Result<()> {
    fresh_dir(into)?;
    eprintln!(
        "xtask: guest: dpkg -x of {} packages into {}",
        debs.len(),
        into.display()
    );
    for deb in debs {
        quiet(Command::new("dpkg").arg("-x").arg(deb).arg(into))?;
    }
    Ok(())
}

/// Runs a command without echoing it (for the many per-file steps).
fn quiet(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    ensure!(status.success(), "{cmd:?} failed with {status}");
    Ok(())
}

/// Debian's headers Makefile names the common headers (and from 6.17 its own
/// directory, as KBUILD_OUTPUT) by absolute path; point them at the unpacked copy.
fn fix_headers_makefile(kernel_dir: &Path, kver: &str) -> anyhow::Result<()> {
    let makefile = kernel_dir.join(format!("usr/src/linux-headers-{kver}/Makefile"));
    let text = std::fs::read_to_string(&makefile)
        .with_context(|| format!("reading {}", makefile.display()))?;
    let fixed = text
        .replace(
            "include /usr/src/",
            &format!("include {}/usr/src/", kernel_dir.display()),
        )
        .replace("=/usr/src/", &format!("={}/usr/src/", kernel_dir.display()));
    ensure!(
        fixed != text,
        "{} has no 'include /usr/src/...' line to redirect",
        makefile.display()
    );
    std::fs::write(&makefile, fixed)?;
    Ok(())
}

/// vmlinux is the compressed stream inside vmlinuz (Debian's 6.1 uses xz,
/// 6.12 zstd); its .BTF is the base the modules' BTF is encoded against. A
/// compressor's magic can also occur by chance in the boot code, so each
/// occurrence is tried until one decompresses to an ELF file.
fn extract_vmlinux(vmlinuz: &Path, out: &Path) -> anyhow::Result<()> {
    let image = std::fs::read(vmlinuz).with_context(|| format!("reading {}", vmlinuz.display()))?;
    let formats: [(&[u8], &str, &[&str]); 2] = [
        (b"\xfd7zXZ\x00", "xz", &["-dc", "--single-stream"]),
        (b"\x28\xb5\x2f\xfd", "zstd", &["-dcq"]),
    ];
    for (magic, tool, args) in formats {
        let starts = image
            .windows(magic.len())
            .enumerate()
            .filter(|(_, w)| *w == magic)
            .map(|(at, _)| at);
        for start in starts {
            if decompress(tool, args, &image[start..], out)? {
                return Ok(());
            }
        }
    }
    bail!(
        "no xz or zstd stream in {} decompresses to an ELF file (not a Debian amd64 kernel?)",
        vmlinuz.display()
    )
}

/// Decompresses `payload` with `tool` into `out`; whether that gave an ELF file
/// (trailing bytes after the stream are not the tool's business).
fn decompress(tool: &str, args: &[&str], payload: &[u8], out: &Path) -> anyhow::Result<bool> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(out)?)
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {tool}"))?;
    let mut stdin = child.stdin.take().unwrap();
    let payload = payload.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&payload));
    child.wait()?;
    let _ = writer.join();
    let head = std::fs::read(out)?
        .get(..4)
        .map(|h| h.to_vec())
        .unwrap_or_default();
    Ok(head == b"\x7fELF")
}

/// Every shared library `binary` loads is found (else names the missing ones).
fn check_libraries(binary: &Path, lib_dirs: &[PathBuf], tools: &Toolchain) -> anyhow::Result<()> {
    let missing: Vec<String> = ldd(binary, lib_dirs, tools)?
        .into_iter()
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| n)
        .collect();
    ensure!(
        missing.is_empty(),
        "{} needs libraries that are neither installed nor unpacked: {}",
        binary.display(),
        missing.join(", ")
    );
    Ok(())
}

/// `ldd` where `tools` come from: each library's name and resolved path as
/// they see it (`None`: not found).
fn ldd(
    binary: &Path,
    lib_dirs: &[PathBuf],
    tools: &Toolchain,
) -> anyhow::Result<Vec<(String, Option<PathBuf>)>> {
    let path = lib_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    // Set by env, so that in a root only ldd sees it, not the host's chroot.
    let text = capture(
        tools
            .command("env")
            .arg(format!("LD_LIBRARY_PATH={path}"))
            .arg("ldd")
            .arg(binary),
    )?;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some((name, rest)) = line.split_once(" => ") {
            let path = rest.split(" (").next().unwrap_or("").trim();
            out.push((
                name.to_owned(),
                (!path.is_empty() && path != "not found").then(|| PathBuf::from(path)),
            ));
        } else if line.starts_with('/') {
            let path = line.split(" (").next().unwrap_or("").trim();
            out.push((path.to_owned(), Some(PathBuf::from(path))));
        }
    }
    Ok(out)
}

/// configure + make of the dkms source against the unpacked headers. The result
/// keeps its debug info (pahole reads it); the variants strip it.
fn build_modules(
    userland: &Path,
    (kernel_dir, kver): (&Path, &str),
    out: &Path,
    tools: &Toolchain,
) -> anyhow::Result<()> {
    let source = std::fs::read_dir(userland.join("usr/src"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("zfs-"))
        })
        .ok_or_else(|| anyhow!("zfs-dkms unpacked no /usr/src/zfs-*"))?;
    fresh_dir(out)?;
    run(Command::new("cp").arg("-a").arg(source.join(".")).arg(out))?;
    let headers = kernel_dir.join(format!("usr/src/linux-headers-{kver}"));
    let common = std::fs::read_dir(kernel_dir.join("usr/src"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-common"))
        })
        .ok_or_else(|| anyhow!("no linux-headers-*-common in {}", kernel_dir.display()))?;
    let log = out.join("build.log");
    eprintln!(
        "xtask: guest: configure + make of {} with {} (about 3 minutes on 2 cores; log {})",
        source.display(),
        tools.describe(),
        log.display()
    );
    let logged = |cmd: &mut Command| -> anyhow::Result<()> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let status = cmd
            .current_dir(out)
            .stdout(file.try_clone()?)
            .stderr(file)
            .status()?;
        if !status.success() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            bail!(
                "{:?} failed with {status}; last lines of {}:\n{}",
                cmd.get_program(),
                log.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        Ok(())
    };
    logged(
        tools
            .command("./configure")
            .arg("--with-config=kernel")
            .arg(format!("--with-linux={}", common.display()))
            .arg(format!("--with-linux-obj={}", headers.display())),
    )?;
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    logged(tools.command("make").arg(format!("-j{jobs}")))?;
    Ok(())
}

/// Every built module, by name (spl and zfs at least).
fn built_modules(zfs_build: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![zfs_build.join("module")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "ko") {
                found.insert(
                    path.file_stem().unwrap().to_string_lossy().into_owned(),
                    path,
                );
            }
        }
    }
    for module in MODULES {
        ensure!(found.contains_key(module), "{module}.ko was not built");
    }
    Ok(found.into_iter().collect())
}

/// `depends=` of a module's .modinfo.
fn module_depends(ko: &Path) -> anyhow::Result<Vec<String>> {
    let bytes = std::fs::read(ko)?;
    let key = b"\0depends=";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .ok_or_else(|| anyhow!("{} has no depends= in its modinfo", ko.display()))?;
    let rest = &bytes[at + key.len()..];
    let value = &rest[..rest.iter().position(|b| *b == 0).unwrap_or(0)];
    Ok(String::from_utf8_lossy(value)
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Module names in an order insmod accepts (each after what it depends on).
fn load_order(deps: &BTreeMap<String, Vec<String>>) -> anyhow::Result<Vec<String>> {
    let mut order: Vec<String> = Vec::new();
    while order.len() < deps.len() {
        let before = order.len();
        for (name, needs) in deps {
            if !order.contains(name) && needs.iter().all(|n| order.contains(n)) {
                order.push(name.clone());
            }
        }
        ensure!(
            order.len() > before,
            "module dependencies form a cycle or name a module not built: {deps:?}"
        );
    }
    Ok(order)
}

fn module_variant(
    (zfs_build, vmlinux): (&Path, &Path),
    variant: Variant,
    out: &Path,
    tools: &Toolchain,
) -> anyhow::Result<()> {
    fresh_dir(out)?;
    let mut deps = BTreeMap::new();
    for (name, source) in built_modules(zfs_build)? {
        let ko = out.join(format!("{name}.ko"));
        std::fs::copy(&source, &ko)?;
        // A root's kbuild ran its own pahole with the kernel's flags (6.17's
        // headers carry vmlinux for it), as dkms does where pahole is
        // installed; this host's pahole 1.24 is for the kernels it builds.
        let kbuild_btf = tools.is_root() && has_section(&ko, ".BTF")?;
        if variant == Variant::Btf && !kbuild_btf {
            // The flags the 6.1 kernel's own module build passes to pahole 1.24.
            quiet(
                tools
                    .command("pahole")
                    .args([
                        "-J",
                        "--btf_gen_floats",
                        "-j",
                        "--lang_exclude=rust",
                        "--btf_base",
                    ])
                    .arg(vmlinux)
                    .arg(&ko),
            )?;
        }
        // Kbuild adds BTF by itself where pahole is installed (here, for the
        // btf variant) and the kernel's headers allow it (6.12's do): the
        // nobtf variant drops it, as a dkms build without pahole has none.
        let mut strip = tools.command("strip");
        strip.arg("--strip-debug");
        if variant == Variant::Nobtf {
            strip.args(["--remove-section=.BTF", "--remove-section=.BTF.base"]);
        }
        quiet(strip.arg(&ko))?;
        deps.insert(name, module_depends(&ko)?);
    }
    let order = load_order(&deps)?;
    std::fs::write(out.join("order"), order.join("\n") + "\n")?;
    Ok(())
}

/// Whether the ELF file has a section of this name (by `objdump -h`).
fn has_section(elf: &Path, section: &str) -> anyhow::Result<bool> {
    let text = capture(Command::new("objdump").arg("-h").arg(elf))?;
    Ok(text
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(section)))
}

pub fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Copies `binary` to `guest_path` under `root` with every library it loads, at
/// the path the guest's loader will look for it.
pub fn install_binary(
    root: &Path,
    binary: &Path,
    guest_path: &str,
    (lib_dirs, strip_prefix): (&[PathBuf], &Path),
    tools: &Toolchain,
) -> anyhow::Result<()> {
    let put = |host: &Path, guest: &Path| -> anyhow::Result<()> {
        let dest = root.join(guest.strip_prefix("/").unwrap_or(guest));
        std::fs::create_dir_all(dest.parent().unwrap())?;
        std::fs::copy(host, &dest)
            .with_context(|| format!("copying {} to the guest tree", host.display()))?;
        Ok(())
    };
    put(&tools.host_path(binary), Path::new(guest_path))?;
    for (name, path) in ldd(binary, lib_dirs, tools)? {
        let path =
            path.ok_or_else(|| anyhow!("{} needs {name}, which is not found", binary.display()))?;
        let guest = match path.strip_prefix(strip_prefix) {
            Ok(inside) => Path::new("/").join(inside),
            Err(_) => path.clone(),
        };
        put(&tools.host_path(&path), &guest)?;
    }
    Ok(())
}

/// busybox, the OpenZFS tools and fio, with their libraries (where `tools`
/// come from) and a minimal /etc.
fn base_tree(userland: &Path, root: &Path, tools: &Toolchain) -> anyhow::Result<()> {
    for dir in [
        "bin", "sbin", "usr/bin", "proc", "sys", "dev", "tmp", "run", "mnt", "root", "etc/zfs",
        "var/tmp",
    ] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    std::fs::copy(userland.join("bin/busybox"), root.join("bin/busybox"))?;
    let lib_dirs = [
        userland.join("lib/x86_64-linux-gnu"),
        userland.join("usr/lib/x86_64-linux-gnu"),
    ];
    for tool in ["zpool", "zfs", "zinject"] {
        // Debian 12's packages put them in /sbin, trixie's (merged /usr) in /usr/sbin.
        let unpacked = ["sbin", "usr/sbin", "usr/bin"]
            .iter()
            .map(|dir| userland.join(dir).join(tool))
            .find(|path| path.is_file())
            .ok_or_else(|| anyhow!("the OpenZFS packages unpacked no {tool}"))?;
        install_binary(
            root,
            &unpacked,
            &format!("/sbin/{tool}"),
            (&lib_dirs, userland),
            tools,
        )?;
    }
    let fio = match tools {
        Toolchain::Host => which("fio").ok_or_else(|| {
            anyhow!("fio is not installed on the host (`cargo xtask setup` installs it)")
        })?,
        Toolchain::Root { .. } => PathBuf::from("/usr/bin/fio"),
    };
    install_binary(root, &fio, "/usr/bin/fio", (&[], userland), tools)?;
    std::os::unix::fs::symlink("/proc/self/mounts", root.join("etc/mtab"))?;
    let mut passwd = "root:x:0:0:root:/root:/bin/sh\n".to_owned();
    let mut group = "root:x:0:\n".to_owned();
    if let Some(version) = postgres_version(tools) {
        install_postgres(root, &version, tools)?;
        // The server refuses to run as root: the script runs it as this user.
        passwd.push_str("postgres:x:70:70:PostgreSQL:/tmp:/bin/sh\n");
        group.push_str("postgres:x:70:\n");
    }
    std::fs::write(root.join("etc/passwd"), passwd)?;
    std::fs::write(root.join("etc/group"), group)?;
    Ok(())
}

/// The PostgreSQL major version the tools have (a root's, where the
/// toolchain installs it): the newest under /usr/lib/postgresql.
fn postgres_version(tools: &Toolchain) -> Option<String> {
    if !tools.is_root() {
        return None;
    }
    let dir = tools.host_path(Path::new("/usr/lib/postgresql"));
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|v| v.parse::<u32>().is_ok())
        .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
}

/// PostgreSQL's server, initdb, pg_ctl, psql and pgbench with their
/// libraries, its modules, its share directory (initdb's catalog files) and the UTC zone
/// (Debian's builds read the system's zone files), at the paths they have
/// in the root: /usr/lib/postgresql/VERSION/bin (the guest script puts it
/// on PATH).
fn install_postgres(root: &Path, version: &str, tools: &Toolchain) -> anyhow::Result<()> {
    let bin = format!("/usr/lib/postgresql/{version}/bin");
    for program in ["postgres", "initdb", "pg_ctl", "psql", "pgbench"] {
        let path = format!("{bin}/{program}");
        install_binary(root, Path::new(&path), &path, (&[], Path::new("/")), tools)?;
    }
    // Its loadable modules ($libdir: initdb loads dict_snowball and
    // plpgsql), without the JIT's (libLLVM alone is over 100 MB).
    let lib = format!("usr/lib/postgresql/{version}/lib");
    std::fs::create_dir_all(root.join(&lib))?;
    for entry in std::fs::read_dir(tools.host_path(&Path::new("/").join(&lib)))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".so") && !name.starts_with("llvmjit") {
            std::fs::copy(entry.path(), root.join(&lib).join(&name))?;
        }
    }
    let share = format!("usr/share/postgresql/{version}");
    copy_tree(
        &tools.host_path(&Path::new("/").join(&share)),
        &root.join(&share),
    )?;
    let utc = tools.host_path(Path::new("/usr/share/zoneinfo/Etc/UTC"));
    for zone in ["usr/share/zoneinfo/UTC", "usr/share/zoneinfo/Etc/UTC"] {
        let to = root.join(zone);
        std::fs::create_dir_all(to.parent().unwrap())?;
        std::fs::copy(&utc, &to).with_context(|| format!("copying {}", utc.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_order_puts_dependencies_first() {
        let deps: BTreeMap<String, Vec<String>> = [
            ("zfs", vec!["spl", "zcommon"]),
            ("zcommon", vec!["znvpair", "spl"]),
            ("znvpair", vec!["spl"]),
            ("spl", vec![]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
        .collect();
        let order = load_order(&deps).unwrap();
        let at = |m: &str| order.iter().position(|x| x == m).unwrap();
        assert!(
            at("spl") < at("znvpair") && at("znvpair") < at("zcommon") && at("zcommon") < at("zfs")
        );
    }

    #[test]
    fn newest_release_of_a_series() {
        let search = "linux-image-6.12.99+deb12-amd64 - Linux 6.12 (signed)\nlinux-image-6.12.113+deb12-amd64 - Linux 6.12 (signed)\nlinux-image-6.12.107+deb12-amd64 - Linux 6.12 (signed)\nlinux-image-6.1.0-57-amd64 - Linux 6.1\n";
        assert_eq!(
            newest_release(search, "6.12").as_deref(),
            Some("6.12.113+deb12-amd64")
        );
        assert_eq!(newest_release(search, "6.13"), None);
    }

    #[test]
    fn load_order_rejects_a_missing_dependency() {
        let deps: BTreeMap<String, Vec<String>> = [("zfs".to_owned(), vec!["nope".to_owned()])]
            .into_iter()
            .collect();
        assert!(load_order(&deps).is_err());
    }
}
